/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the lifecycle of a pool device (docs/design.md): the transitions
 * and their journal entries, claims, enrollment, the operator's scrub and
 * quarantine clear, scrub certificates, claim expiry. */
#include "config.h"

#include "av-pool-private.h"

#include <string.h>

#include "util/av-error.h"
#include "util/av-json.h"
#include "vfio/av-bar-sizes.h"
#include "vfio/av-vfio.h"

/* --- transitions ------------------------------------------------------------ */

#define AV_BIT(s) (1u << (s))

/* The lifecycle of av-pool.h: allowed[from] is the set of states @from may
 * move to.  MISSING is reachable from everywhere; leaving MISSING is only
 * allowed to state_before_missing, checked apart. */
static const guint av_transitions[] = {
    [AV_DEVICE_STATE_FREE] = AV_BIT(AV_DEVICE_STATE_CLAIMED) | AV_BIT(AV_DEVICE_STATE_MISSING),
    [AV_DEVICE_STATE_CLAIMED] = AV_BIT(AV_DEVICE_STATE_IN_USE) | AV_BIT(AV_DEVICE_STATE_FREE) |
                                AV_BIT(AV_DEVICE_STATE_MISSING),
    [AV_DEVICE_STATE_IN_USE] = AV_BIT(AV_DEVICE_STATE_DIRTY) | AV_BIT(AV_DEVICE_STATE_MISSING),
    [AV_DEVICE_STATE_DIRTY] = AV_BIT(AV_DEVICE_STATE_SCRUBBING) | AV_BIT(AV_DEVICE_STATE_MISSING),
    [AV_DEVICE_STATE_SCRUBBING] = AV_BIT(AV_DEVICE_STATE_FREE) | AV_BIT(AV_DEVICE_STATE_QUARANTINED) |
                                  AV_BIT(AV_DEVICE_STATE_MISSING),
    [AV_DEVICE_STATE_QUARANTINED] = AV_BIT(AV_DEVICE_STATE_FREE) | AV_BIT(AV_DEVICE_STATE_MISSING),
    [AV_DEVICE_STATE_MISSING] = 0,
};

static gboolean
av_transition_allowed(const AvPoolDevice *dev, AvDeviceState to)
{
    if ((guint)to >= G_N_ELEMENTS(av_transitions))
        return FALSE;
    if (dev->state == AV_DEVICE_STATE_MISSING)
        return to == dev->state_before_missing;
    return (av_transitions[dev->state] & AV_BIT(to)) != 0;
}

/* See av-pool-private.h. */
gboolean
av_transition_fail(const AvPoolDevice *dev, AvDeviceState to, GError **error)
{
    g_autofree char *who = av_owner_describe(dev->owner);
    g_autofree char *held = dev->owner ? g_strdup_printf(" by %s", who) : g_strdup("");
    const char *addr = dev->address ? dev->address : "no address";

    if (dev->state == AV_DEVICE_STATE_MISSING) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "device '%s' (%s) is missing (it was %s%s before); cannot move it to %s: "
                    "it can only return to %s when a scan finds it",
                    dev->identity, addr, av_device_state_to_string(dev->state_before_missing), held,
                    av_device_state_to_string(to), av_device_state_to_string(dev->state_before_missing));
        return FALSE;
    }
    g_set_error(error, AV_ERROR, AV_ERROR_STATE, "device '%s' (%s) is %s%s; cannot move it to %s",
                dev->identity, addr, av_device_state_to_string(dev->state), held,
                av_device_state_to_string(to));
    return FALSE;
}

static gboolean
av_pool_transition_do(AvPool *pool, AvPoolDevice *dev, AvDeviceState to, const AvOwner *owner,
                      const char *reason, const char *event, json_t *extra, gboolean checked,
                      GError **error);

/* See av-pool-private.h. */
gboolean
av_pool_transition_event(AvPool *pool, AvPoolDevice *dev, AvDeviceState to, const AvOwner *owner,
                         const char *reason, const char *event, json_t *extra, GError **error)
{
    return av_pool_transition_do(pool, dev, to, owner, reason, event, extra, FALSE, error);
}

/* See av-pool-private.h. */
gboolean
av_pool_transition_checked(AvPool *pool, AvPoolDevice *dev, AvDeviceState to, const char *event, json_t *extra,
                           GError **error)
{
    return av_pool_transition_do(pool, dev, to, NULL, NULL, event, extra, TRUE, error);
}

/* av_pool_transition_event(), where @checked says that the caller has
 * allowed the move itself (the operator's moves outside the table). */
static gboolean
av_pool_transition_do(AvPool *pool, AvPoolDevice *dev, AvDeviceState to, const AvOwner *owner,
                      const char *reason, const char *event, json_t *extra, gboolean checked,
                      GError **error)
{
    g_autoptr(AvOwner) new_owner = NULL;
    g_autoptr(json_t) fields = NULL;
    g_autofree char *new_reason = NULL;
    g_autofree char *new_reason_before = NULL;
    AvDeviceState from = dev->state;
    gboolean drop_programmed;
    gboolean programmed_quarantined;

    if (!checked && !av_transition_allowed(dev, to))
        return av_transition_fail(dev, to, error);
    /* A device whose identity changed while it was out of the pool's hands
     * is never handed out or freed: only the operator's clear drops that. */
    if (dev->identity_problem &&
        (to == AV_DEVICE_STATE_FREE || to == AV_DEVICE_STATE_CLAIMED || to == AV_DEVICE_STATE_IN_USE) &&
        !(dev->state == AV_DEVICE_STATE_MISSING && to == dev->state_before_missing)) {
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE, "device '%s' (%s) cannot become %s: %s", dev->identity,
                    dev->address ? dev->address : "no address", av_device_state_to_string(to),
                    dev->identity_problem);
        return FALSE;
    }
    /* A claim a tenant's program ran for may leave that tenant's image:
     * it ends dirty (av_pool_unclaim()), never free. */
    if (dev->claim_programmed && from == AV_DEVICE_STATE_CLAIMED && to == AV_DEVICE_STATE_FREE) {
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "device '%s' (%s) was programmed for its claim's domain: it is scrubbed before it is free",
                    dev->identity, dev->address ? dev->address : "no address");
        return FALSE;
    }

    /* The owner after the move. */
    if (to == AV_DEVICE_STATE_FREE) {
        new_owner = NULL;
    } else if (from == AV_DEVICE_STATE_MISSING || to == AV_DEVICE_STATE_MISSING || !owner) {
        new_owner = av_owner_copy(dev->owner);
    } else {
        if (dev->owner && !av_owner_compatible(dev->owner, owner)) {
            g_autofree char *held = av_owner_describe(dev->owner);
            g_autofree char *want = av_owner_describe(owner);

            g_set_error(error, AV_ERROR, AV_ERROR_IN_USE,
                        "device '%s' (%s) is %s by %s; cannot hand it to %s",
                        dev->identity, dev->address ? dev->address : "no address",
                        av_device_state_to_string(from), held, want);
            return FALSE;
        }
        new_owner = av_owner_copy(owner);
    }
    if (to == AV_DEVICE_STATE_CLAIMED && from == AV_DEVICE_STATE_FREE && !new_owner) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "cannot claim device '%s' (%s) without an owner",
                    dev->identity, dev->address ? dev->address : "no address");
        return FALSE;
    }

    /* The reason after the move. */
    if (to == AV_DEVICE_STATE_MISSING) {
        new_reason = g_strdup(reason ? reason : "not found at the last scan");
        new_reason_before = g_strdup(dev->reason);
    } else if (from == AV_DEVICE_STATE_MISSING) {
        new_reason = g_strdup(reason ? reason : dev->reason_before_missing);
    } else {
        new_reason = g_strdup(reason);
    }

    /* What a device holds (a bitstream) is unknown once a domain may have
     * had it: the tenant may have programmed it since. */
    drop_programmed = dev->programmed &&
                      (to == AV_DEVICE_STATE_DIRTY || to == AV_DEVICE_STATE_QUARANTINED ||
                       (from == AV_DEVICE_STATE_IN_USE && to != AV_DEVICE_STATE_MISSING));

    fields = extra ? json_deep_copy(extra) : json_object();
    if (drop_programmed)
        json_object_set_new(fields, "programmed_dropped", json_string(dev->programmed->sha256));
    json_object_set_new(fields, "identity", json_string(dev->identity));
    json_object_set_new(fields, "address", av_json_string_or_null(dev->address));
    json_object_set_new(fields, "from", json_string(av_device_state_to_string(from)));
    json_object_set_new(fields, "to", json_string(av_device_state_to_string(to)));
    json_object_set_new(fields, "owner", av_owner_to_json(new_owner));
    json_object_set_new(fields, "reason", av_json_string_or_null(new_reason));
    if (!av_pool_journal_append(pool, event, fields, error))
        return FALSE;

    /* Its owner's device-hours (av-pool-usage.c), saved with the move. */
    if (from == AV_DEVICE_STATE_IN_USE && to != AV_DEVICE_STATE_IN_USE)
        av_pool_usage_accrue(pool, dev, av_pool_now());

    /* claim_expires survives only while the claim does (through missing). */
    if (!(to == AV_DEVICE_STATE_CLAIMED ||
          (to == AV_DEVICE_STATE_MISSING && from == AV_DEVICE_STATE_CLAIMED)))
        dev->claim_expires = 0;
    /* A scrub token lives as long as the scrub it was made for, which a
     * rescan that lost the device for a while does not end. */
    if (to != AV_DEVICE_STATE_MISSING &&
        !(from == AV_DEVICE_STATE_MISSING && to == dev->state_before_missing))
        av_pool_scrub_token_clear(dev);
    /* A claim a tenant's program ran for that ends quarantined (its ids
     * changed, say) holds that tenant's image: never cleared to free
     * before a scrub (av_pool_clear_quarantine()). */
    programmed_quarantined = dev->claim_programmed && to == AV_DEVICE_STATE_QUARANTINED;
    if (to != AV_DEVICE_STATE_MISSING && !(from == AV_DEVICE_STATE_MISSING && to == dev->state_before_missing))
        dev->claim_programmed = FALSE;
    if (to == AV_DEVICE_STATE_MISSING)
        dev->state_before_missing = from;
    else
        dev->state_before_missing = AV_DEVICE_STATE_FREE;
    dev->state = to;
    /* Only a quarantine keeps the data a domain left; missing keeps it for
     * when the device comes back quarantined. */
    if (to != AV_DEVICE_STATE_QUARANTINED && to != AV_DEVICE_STATE_MISSING)
        dev->unscrubbed = FALSE;
    if (programmed_quarantined)
        dev->unscrubbed = TRUE;
    if (drop_programmed)
        g_clear_pointer(&dev->programmed, av_programmed_free);
    /* The boot it went in use in, for the boot rule of av_pool_upkeep():
     * kept while it is missing and when it comes back in use. */
    if (to == AV_DEVICE_STATE_IN_USE && from != AV_DEVICE_STATE_MISSING) {
        g_free(dev->in_use_boot_id);
        dev->in_use_boot_id = g_strdup(pool->boot_id);
    } else if (to != AV_DEVICE_STATE_MISSING && to != AV_DEVICE_STATE_IN_USE) {
        g_clear_pointer(&dev->in_use_boot_id, g_free);
    }
    /* A domain let it go: its profile's on_release is owed. */
    if (from == AV_DEVICE_STATE_IN_USE && (to == AV_DEVICE_STATE_DIRTY || to == AV_DEVICE_STATE_QUARANTINED))
        dev->release_pending = TRUE;
    else if (to == AV_DEVICE_STATE_FREE || to == AV_DEVICE_STATE_CLAIMED || to == AV_DEVICE_STATE_IN_USE)
        dev->release_pending = FALSE;
    av_owner_free(dev->owner);
    dev->owner = g_steal_pointer(&new_owner);
    g_free(dev->reason);
    dev->reason = g_steal_pointer(&new_reason);
    g_free(dev->reason_before_missing);
    dev->reason_before_missing = g_steal_pointer(&new_reason_before);
    dev->state_since = av_pool_now();
    return TRUE;
}

/* See av-pool.h.  The owner rules: ->free clears the owner; free->claimed
 * needs an @owner (AV_ERROR_INVALID_INPUT without one); otherwise a NULL
 * @owner keeps the current one, and a non-NULL one replaces it only if it
 * names the same holder (same domain UUID, Nova instance or, lacking UUIDs,
 * domain name), else AV_ERROR_IN_USE: a device claimed by one domain is never
 * handed to another.  Moves to and from missing keep the owner (and a claim's
 * expiry).  Requires AV_POOL_WRITE (the journal refuses otherwise). */
gboolean
av_pool_transition(AvPool *pool, AvPoolDevice *dev, AvDeviceState to,
                   const AvOwner *owner, const char *reason, GError **error)
{
    return av_pool_transition_event(pool, dev, to, owner, reason, "transition", NULL, error);
}

/* See av-pool.h. */
gboolean
av_pool_device_may_be_freed(const AvPoolDevice *dev, GError **error)
{
    if (!dev->identity_problem)
        return TRUE;
    g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE, "%s", dev->identity_problem);
    return FALSE;
}

/* Quarantines @dev with @reason, journalled with @extra and
 * "unscrubbed": true, and marks it so (never cleared before a scrub). */
static gboolean
av_pool_quarantine_marked(AvPool *pool, AvPoolDevice *dev, const char *reason, json_t *extra, GError **error)
{
    json_object_set_new(extra, "unscrubbed", json_true());
    if (!av_pool_transition_do(pool, dev, AV_DEVICE_STATE_QUARANTINED, NULL, reason, "transition", extra, TRUE,
                               error))
        return FALSE;
    dev->unscrubbed = TRUE;
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_take(AvPool *pool, AvPoolDevice *dev, const AvOwner *owner, GError **error)
{
    gboolean ok;

    if (dev->state == AV_DEVICE_STATE_FREE) {
        /* One fsync for the two entries (issue 38): the claim's line is
         * written without its own, and the in-use line's fsync right after
         * it makes both durable.  Write-ahead holds: neither transition is
         * in pool.json before that fsync (av_pool_save() also syncs a line
         * still pending, and so does letting the lock go).  Killed between
         * the two writes, the claim's line is in the page cache (a process
         * dying loses nothing written); lost only with the power, when the
         * pool on disk never had the claim either: the journal then does not
         * say what the pool did not do, and a line cut short there is the
         * torn line every writer already ends (av_journal_prepare()). */
        pool->journal.defer_sync = TRUE;
        ok = av_pool_transition(pool, dev, AV_DEVICE_STATE_CLAIMED, owner, NULL, error);
        pool->journal.defer_sync = FALSE;
        if (!ok)
            return FALSE;
    }
    return av_pool_transition(pool, dev, AV_DEVICE_STATE_IN_USE, owner, NULL, error);
}

/* See av-pool.h. */
gboolean
av_pool_quarantine_unscrubbed(AvPool *pool, AvPoolDevice *dev, const char *reason, GError **error)
{
    g_autoptr(json_t) extra = json_object();

    if (dev->state != AV_DEVICE_STATE_DIRTY && dev->state != AV_DEVICE_STATE_SCRUBBING &&
        dev->state != AV_DEVICE_STATE_QUARANTINED)
        return av_transition_fail(dev, AV_DEVICE_STATE_QUARANTINED, error);
    return av_pool_quarantine_marked(pool, dev, reason, extra, error);
}

/* See av-pool-private.h. */
gboolean
av_pool_quarantine_health(AvPool *pool, AvPoolDevice *dev, const char *reason, GError **error)
{
    g_autoptr(json_t) extra = json_object();
    gboolean dirty = dev->state == AV_DEVICE_STATE_DIRTY;

    if (dev->state != AV_DEVICE_STATE_FREE && !dirty && dev->state != AV_DEVICE_STATE_SCRUBBING)
        return av_transition_fail(dev, AV_DEVICE_STATE_QUARANTINED, error);
    json_object_set_new(extra, "health", json_true());
    if (!av_pool_transition_do(pool, dev, AV_DEVICE_STATE_QUARANTINED, NULL, reason, "transition", extra, TRUE,
                               error))
        return FALSE;
    if (dirty)
        dev->unscrubbed = TRUE;
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_quarantine_found(AvPool *pool, AvPoolDevice *dev, const char *what, const char *reason, GError **error)
{
    g_autoptr(json_t) extra = json_object();

    if (dev->state != AV_DEVICE_STATE_FREE)
        return av_transition_fail(dev, AV_DEVICE_STATE_QUARANTINED, error);
    json_object_set_new(extra, "found", json_string(what));
    return av_pool_quarantine_marked(pool, dev, reason, extra, error);
}

/* See av-pool-private.h. */
gboolean
av_pool_set_identity_problem(AvPool *pool, AvPoolDevice *dev, const char *problem, GError **error)
{
    AvDeviceState state = dev->state == AV_DEVICE_STATE_MISSING ? dev->state_before_missing : dev->state;
    g_autoptr(json_t) extra = json_object();

    if (!dev->identity_problem) {
        g_autoptr(json_t) fields = json_object();

        json_object_set_new(fields, "problem", json_string(problem));
        json_object_set_new(fields, "state", json_string(av_device_state_to_string(state)));
        json_object_set_new(fields, "owner", av_owner_to_json(dev->owner));
        if (!av_pool_journal_device(pool, "identity-problem", dev, fields, error))
            return FALSE;
        dev->identity_problem = g_strdup(problem);
    }
    if (dev->state != AV_DEVICE_STATE_FREE && dev->state != AV_DEVICE_STATE_CLAIMED)
        return TRUE;
    /* Nobody holds it now: quarantined at once, a claim forgotten. */
    json_object_set_new(extra, "identity_problem", json_true());
    return av_pool_transition_do(pool, dev, AV_DEVICE_STATE_QUARANTINED, NULL, dev->identity_problem,
                                 "transition", extra, TRUE, error);
}

/* See av-pool-private.h. */
gboolean
av_pool_quarantine_force(AvPool *pool, AvPoolDevice *dev, const char *reason, json_t *extra, GError **error)
{
    g_autoptr(json_t) fields = extra ? json_deep_copy(extra) : json_object();

    if (dev->state == AV_DEVICE_STATE_QUARANTINED) {
        /* Already quarantined: the reason says the new news too. */
        json_object_set_new(fields, "reason", json_string(reason));
        json_object_set_new(fields, "previous_reason", av_json_string_or_null(dev->reason));
        if (!av_pool_journal_device(pool, "quarantine-reason", dev, fields, error))
            return FALSE;
        g_free(dev->reason);
        dev->reason = g_strdup(reason);
        dev->unscrubbed = TRUE;
        return TRUE;
    }
    if (dev->state != AV_DEVICE_STATE_MISSING) {
        if (!av_pool_transition_do(pool, dev, AV_DEVICE_STATE_QUARANTINED, NULL, reason, "transition", extra,
                                   TRUE, error))
            return FALSE;
        dev->unscrubbed = TRUE;
        return TRUE;
    }
    json_object_set_new(fields, "was", json_string(av_device_state_to_string(dev->state_before_missing)));
    json_object_set_new(fields, "reason", json_string(reason));
    if (!av_pool_journal_device(pool, "quarantined-while-missing", dev, fields, error))
        return FALSE;
    dev->state_before_missing = AV_DEVICE_STATE_QUARANTINED;
    g_free(dev->reason_before_missing);
    dev->reason_before_missing = g_strdup(reason);
    /* What only a claim keeps goes with it; it holds what a domain may
     * have left, as in every other branch. */
    dev->claim_expires = 0;
    dev->claim_programmed = FALSE;
    dev->unscrubbed = TRUE;
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_claim(AvPool *pool, AvPoolDevice *dev, const AvOwner *owner, gint64 expires, GError **error)
{
    g_autoptr(json_t) extra = json_object();

    if (!owner || (!owner->domain_uuid && !owner->nova_instance)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "cannot claim '%s' for nobody: the claim needs the domain's UUID", dev->identity);
        return FALSE;
    }
    json_object_set_new(extra, "expires", json_integer(expires));
    if (dev->state == AV_DEVICE_STATE_CLAIMED && dev->owner &&
        g_strcmp0(dev->owner->domain_uuid, owner->domain_uuid) == 0 &&
        g_strcmp0(dev->owner->nova_instance, owner->nova_instance) == 0) {
        /* The same domain claims again (define twice, start re-placing): renew. */
        json_object_set_new(extra, "identity", json_string(dev->identity));
        json_object_set_new(extra, "address", av_json_string_or_null(dev->address));
        if (!av_pool_journal_append(pool, "claim-renewed", extra, error))
            return FALSE;
    } else if (!av_pool_transition_event(pool, dev, AV_DEVICE_STATE_CLAIMED, owner, NULL, "claimed", extra, error)) {
        return FALSE;
    }
    dev->claim_expires = expires;
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_enroll_check(const AvPoolDevice *dev, const char *sha256, gboolean replace, GError **error)
{
    const char *address = dev->address ? dev->address : "-";

    if (dev->kind != AV_DEVICE_KIND_PCI) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "device %s (%s) is a %s device: only PCI devices have an option ROM to enroll", address,
                    dev->identity, av_device_kind_to_string(dev->kind));
        return FALSE;
    }
    if (dev->state != AV_DEVICE_STATE_FREE && dev->state != AV_DEVICE_STATE_QUARANTINED) {
        g_autofree char *who = av_owner_describe(dev->owner);

        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "device %s (%s) is %s%s%s: enroll a device only when nobody holds it, free or quarantined "
                    "(after its scrub, or once you have checked it)",
                    address, dev->identity, av_device_state_to_string(dev->state), dev->owner ? " by " : "",
                    dev->owner ? who : "");
        return FALSE;
    }
    if (!sha256)
        return TRUE;
    if (!av_rom_sha256_is_valid(sha256)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "'%s' is not a ROM hash (\"none\" or 64 lower-case hex digits)", sha256);
        return FALSE;
    }
    if (dev->rom_sha256 && !g_str_equal(dev->rom_sha256, sha256) && !replace) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "device %s (%s) has the ROM hash %s enrolled and its ROM now hashes to %s: once you have "
                    "checked the new firmware, replace the hash deliberately ('accelvirt enroll --replace %s')",
                    address, dev->identity, dev->rom_sha256, sha256, dev->address ? dev->address : dev->identity);
        return FALSE;
    }
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_enroll(AvPool *pool, AvPoolDevice *dev, const char *sha256, gboolean replace, const char *operator_name,
               GError **error)
{
    g_autoptr(json_t) fields = json_object();

    if (!sha256) {
        g_set_error_literal(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "no ROM hash to enroll");
        return FALSE;
    }
    if (!av_pool_enroll_check(dev, sha256, replace, error))
        return FALSE;
    if (g_strcmp0(dev->rom_sha256, sha256) == 0)
        return TRUE;    /* enrolled already: nothing to record */
    json_object_set_new(fields, "identity", json_string(dev->identity));
    if (dev->scrub_failures || dev->reset_failures)
        json_object_set_new(fields, "failures_reset", json_pack("{s:I, s:I}", "scrub", (json_int_t)dev->scrub_failures,
                                                                 "reset", (json_int_t)dev->reset_failures));
    json_object_set_new(fields, "address", av_json_string_or_null(dev->address));
    json_object_set_new(fields, "state", json_string(av_device_state_to_string(dev->state)));
    json_object_set_new(fields, "rom_sha256", json_string(sha256));
    json_object_set_new(fields, "previous", av_json_string_or_null(dev->rom_sha256));
    json_object_set_new(fields, "operator", av_json_string_or_null(operator_name));
    if (!av_pool_journal_append(pool, "enrolled", fields, error))
        return FALSE;
    g_free(dev->rom_sha256);
    dev->rom_sha256 = g_strdup(sha256);
    /* The device's health counts start again. */
    dev->scrub_failures = dev->reset_failures = 0;
    dev->failures_since = av_pool_now();
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_set_programmed(AvPool *pool, AvPoolDevice *dev, AvProgrammed *programmed, const char *why, GError **error)
{
    g_autoptr(AvProgrammed) pr = programmed;
    g_autoptr(json_t) fields = json_object();

    if (!pr && !dev->programmed)
        return TRUE;
    if (pr && dev->programmed && g_str_equal(pr->sha256, dev->programmed->sha256) &&
        g_strcmp0(pr->by, dev->programmed->by) == 0 && g_strcmp0(pr->verified, dev->programmed->verified) == 0) {
        dev->programmed->since = pr->since;
        return TRUE;
    }
    json_object_set_new(fields, "identity", json_string(dev->identity));
    json_object_set_new(fields, "address", av_json_string_or_null(dev->address));
    json_object_set_new(fields, "state", json_string(av_device_state_to_string(dev->state)));
    if (pr) {
        json_object_set_new(fields, "sha256", json_string(pr->sha256));
        json_object_set_new(fields, "name", av_json_string_or_null(pr->name));
        json_object_set_new(fields, "by", json_string(pr->by));
        json_object_set_new(fields, "verified", json_string(pr->verified));
    } else {
        json_object_set_new(fields, "previous", json_string(dev->programmed->sha256));
        json_object_set_new(fields, "why", av_json_string_or_null(why));
    }
    if (!av_pool_journal_append(pool, pr ? "programmed" : "programmed-unknown", fields, error))
        return FALSE;
    av_programmed_free(dev->programmed);
    dev->programmed = g_steal_pointer(&pr);
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_scrub_begin(AvPool *pool, AvPoolDevice *dev, const char *operator_name, GError **error)
{
    g_autoptr(json_t) extra = json_object();

    if (dev->state != AV_DEVICE_STATE_FREE && dev->state != AV_DEVICE_STATE_DIRTY)
        return av_transition_fail(dev, AV_DEVICE_STATE_SCRUBBING, error);
    json_object_set_new(extra, "operator", av_json_string_or_null(operator_name));
    return av_pool_transition_do(pool, dev, AV_DEVICE_STATE_SCRUBBING, NULL, NULL, "transition", extra,
                                 TRUE, error);
}

/* See av-pool.h. */
gboolean
av_pool_device_restore(const AvRoot *root, const AvKernelOps *ops, const AvProfile *profile,
                       const AvPoolDevice *dev, GError **error)
{
    if (dev->kind == AV_DEVICE_KIND_MDEV && dev->created) {
        if (!av_mdev_remove(root, ops, dev->identity + strlen("mdev:"), error)) {
            g_prefix_error(error, "removing the mdev failed: ");
            return FALSE;
        }
        return TRUE;
    }
    if (dev->kind == AV_DEVICE_KIND_USB)
        return av_pool_usb_unhold(root, ops, dev, error);
    if (dev->kind != AV_DEVICE_KIND_PCI || profile->restore_driver != AV_RESTORE_ON_RELEASE)
        return TRUE;
    /* A card of attach netdev stays on its host driver through its use
     * and scrub: nothing to give back, unless a quarantine took it to
     * vfio-pci (av_scrub_isolate()), which a clear undoes below. */
    if (profile->attach == AV_ATTACH_NETDEV) {
        g_autofree char *now = av_vfio_current_driver(root, dev->address);

        if (!av_pci_driver_is_vfio(now))
            return TRUE;
    }
    /* NULL: it had no driver, and goes back to none. */
    if (!av_vfio_restore(root, ops, dev->address, dev->original_driver, error)) {
        g_prefix_error(error, "restoring the driver '%s' of %s failed: ",
                       dev->original_driver ? dev->original_driver : "none", dev->address);
        return FALSE;
    }
    for (guint i = 0; i < dev->companions->len; i++) {
        const AvCompanion *c = g_ptr_array_index(dev->companions, i);

        if (!av_vfio_restore(root, ops, c->address, c->original_driver, error)) {
            g_prefix_error(error, "restoring the driver '%s' of %s (in the IOMMU group of %s) failed: ",
                           c->original_driver ? c->original_driver : "none", c->address, dev->address);
            return FALSE;
        }
    }
    return TRUE;
}

/* The driver that clearing the quarantine of @address leaves it on: its
 * @original driver under on-release, where it is now under keep-vfio. */
static json_t *
av_pool_clear_driver(const AvRoot *root, const AvProfile *profile, const char *address, const char *original)
{
    g_autofree char *now = NULL;

    if (profile->restore_driver == AV_RESTORE_ON_RELEASE)
        return av_json_string_or_null(original);
    now = av_vfio_current_driver(root, address);
    return av_json_string_or_null(now);
}

/* What clearing the quarantine of @dev gives back to the host, as the
 * "cleared" entry records it: the driver of the PCI device and of its
 * companions after the clear (JSON null: none), or whether its mdev is
 * removed. */
static json_t *
av_pool_clear_facts(const AvRoot *root, const AvPoolDevice *dev, const AvProfile *profile,
                    const char *operator_name)
{
    json_t *facts = json_object();

    json_object_set_new(facts, "identity", json_string(dev->identity));
    json_object_set_new(facts, "address", av_json_string_or_null(dev->address));
    json_object_set_new(facts, "operator", av_json_string_or_null(operator_name));
    json_object_set_new(facts, "quarantined_for", av_json_string_or_null(dev->reason));
    json_object_set_new(facts, "identity_problem", av_json_string_or_null(dev->identity_problem));
    json_object_set_new(facts, "restore_driver", json_string(av_restore_driver_to_string(profile->restore_driver)));
    if (dev->kind == AV_DEVICE_KIND_PCI) {
        json_t *companions = json_array();

        json_object_set_new(facts, "driver", av_pool_clear_driver(root, profile, dev->address, dev->original_driver));
        for (guint i = 0; i < dev->companions->len; i++) {
            const AvCompanion *c = g_ptr_array_index(dev->companions, i);

            json_array_append_new(companions, json_pack("{s:s,s:o}", "address", c->address, "driver",
                                                        av_pool_clear_driver(root, profile, c->address,
                                                                             c->original_driver)));
        }
        json_object_set_new(facts, "companions", companions);
    } else if (dev->kind == AV_DEVICE_KIND_MDEV) {
        json_object_set_new(facts, "mdev_removed", json_boolean(dev->created));
    }
    return facts;
}

/* See av-pool.h. */
gboolean
av_pool_clear_quarantine(AvPool *pool, AvPoolDevice *dev, const AvRoot *root, const AvKernelOps *ops,
                         const AvPolicy *policy, const char *operator_name, json_t **ret_cleared,
                         GError **error)
{
    g_autoptr(json_t) facts = NULL;
    g_autoptr(GError) local = NULL;
    g_autofree char *identity = NULL;
    g_autofree char *problem = NULL;
    const char *address = dev->address ? dev->address : "-";
    const AvProfile *profile;
    gboolean remove;

    if (dev->state != AV_DEVICE_STATE_QUARANTINED)
        return av_transition_fail(dev, AV_DEVICE_STATE_FREE, error);
    /* Its BARs as a resize cut short left them: never free so. */
    if (av_bar_record_exists(pool->state_dir, dev->identity)) {
        g_autofree char *path = av_bar_record_path(pool->state_dir, dev->identity);

        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "the BARs of device %s (%s) may still be at the sizes a scrub grew them to: their recorded "
                    "sizes ('%s') are not put back yet; run 'accelvirt reconcile' (or 'accelvirt scrub %s') and "
                    "see its warning, then clear it", address, dev->identity, path, address);
        return FALSE;
    }
    if (dev->unscrubbed) {
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "device %s (%s) holds what a domain left in it and no scrub has cleared it since (%s); run "
                    "'accelvirt scrub %s' first (it stays quarantined), then clear it", address, dev->identity,
                    dev->reason ? dev->reason : "quarantined", address);
        return FALSE;
    }
    /* An NVIDIA vGPU VF whose vGPU is still made (its scrub failed before
     * its last step destroyed it): never free so. */
    if (dev->kind == AV_DEVICE_KIND_PCI && dev->address) {
        guint current = 0;

        if (av_pci_vgpu_read(root, dev->address, &current, NULL) == 0 && current != 0) {
            g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                        "device %s (%s) still has an NVIDIA vGPU (type %u), with what its last tenant left in it; "
                        "run 'accelvirt scrub %s' first (its last step destroys the vGPU), then clear it", address,
                        dev->identity, current, address);
            return FALSE;
        }
    }
    profile = dev->profile ? av_policy_find(policy, dev->profile) : NULL;
    if (!profile) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                    "the profile '%s' of device %s (%s) is not in the policies, so how to give the device back "
                    "(restore_driver) is unknown; it stays quarantined until its profile is back",
                    dev->profile ? dev->profile : "(none)", address, dev->identity);
        return FALSE;
    }
    facts = av_pool_clear_facts(root, dev, profile, operator_name);

    /* The host first: when it fails, the pool is left as it was. */
    if (!av_pool_device_restore(root, ops, profile, dev, &local)) {
        g_autoptr(json_t) failed = json_deep_copy(facts);

        json_object_set_new(failed, "error", json_string(local->message));
        if (!av_pool_journal_append(pool, "clear-failed", failed, error))
            return FALSE;
        g_set_error(error, local->domain, local->code,
                    "cannot clear the quarantine of device %s (%s): %s; it stays quarantined (fix that, then clear "
                    "it again)", address, dev->identity, local->message);
        return FALSE;
    }
    remove = dev->kind == AV_DEVICE_KIND_MDEV && dev->created;
    /* The operator's word is what drops an identity problem. */
    problem = g_steal_pointer(&dev->identity_problem);
    if (!av_pool_transition_event(pool, dev, AV_DEVICE_STATE_FREE, NULL, NULL, "cleared", facts, error)) {
        dev->identity_problem = g_steal_pointer(&problem);
        return FALSE;
    }
    /* The operator checked the card as it is now: the next scan records
     * what its match reads afresh (match_ids). */
    if (problem)
        g_clear_pointer(&dev->match_ids, g_free);
    /* Back on their drivers: nothing left to restore with the device. */
    if (dev->kind == AV_DEVICE_KIND_PCI && profile->restore_driver == AV_RESTORE_ON_RELEASE)
        g_ptr_array_set_size(dev->companions, 0);
    identity = g_strdup(dev->identity);
    if (remove && !av_pool_remove(pool, identity, "its mdev was removed when its quarantine was cleared", error))
        return FALSE;
    json_object_set_new(facts, "removed_from_pool", json_boolean(remove));
    if (ret_cleared)
        *ret_cleared = g_steal_pointer(&facts);
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_journal_certificate(AvPool *pool, const char *identity, const char *address,
                            const char *profile, const AvOwner *previous_owner, json_t *report,
                            const char *started, const char *result, const char *reason,
                            json_t *extra, GError **error)
{
    g_autoptr(json_t) fields = extra ? json_deep_copy(extra) : json_object();
    json_t *steps = report ? json_object_get(report, "steps") : NULL;
    json_t *coverage;
    AvPoolDevice *dev;
    json_int_t bytes = 0;
    double seconds = 0;
    size_t i;
    json_t *step;

    steps = json_is_array(steps) ? json_deep_copy(steps) : json_array();
    json_array_foreach(steps, i, step) {
        json_t *b = json_object_get(step, "bytes");
        json_t *t = json_object_get(step, "seconds");

        if (json_is_integer(b))
            bytes += json_integer_value(b);
        if (json_is_number(t))
            seconds += json_number_value(t);
    }
    json_object_set_new(fields, "identity", json_string(identity));
    json_object_set_new(fields, "address", av_json_string_or_null(address));
    json_object_set_new(fields, "profile", av_json_string_or_null(profile));
    json_object_set_new(fields, "previous_owner", av_owner_to_json(previous_owner));
    json_object_set_new(fields, "started", av_json_string_or_null(started));
    json_object_set_new(fields, "steps", steps);
    json_object_set_new(fields, "bytes_zeroed", json_integer(bytes));
    json_object_set_new(fields, "seconds", json_real(seconds));
    json_object_set_new(fields, "ok", json_boolean(reason == NULL));
    json_object_set_new(fields, "result", json_string(result));
    json_object_set_new(fields, "reason", av_json_string_or_null(reason));
    coverage = report ? json_object_get(report, "coverage") : NULL;
    json_object_set_new(fields, "coverage", json_is_object(coverage) ? json_deep_copy(coverage) : json_null());
    if (!av_pool_journal_append(pool, "scrub-certificate", fields, error))
        return FALSE;
    dev = av_pool_find(pool, identity);
    if (dev) {
        static const char *const kept[] = { "cleared", "read_back", "memory", "fraction", "verified", "text" };
        json_t *cov = json_object();

        for (gsize k = 0; k < G_N_ELEMENTS(kept); k++) {
            json_t *v = json_is_object(coverage) ? json_object_get(coverage, kept[k]) : NULL;

            json_object_set(cov, kept[k], v ? v : json_null());
        }
        if (!json_is_object(coverage)) {
            json_object_set_new(cov, "cleared", json_integer(0));
            json_object_set_new(cov, "read_back", json_integer(0));
            json_object_set_new(cov, "verified", json_string("none"));
            json_object_set_new(cov, "text", json_string("no scrub step ran"));
        }
        if (dev->last_scrub)
            json_decref(dev->last_scrub);
        dev->last_scrub = json_pack("{s:I, s:s, s:o}", "time", (json_int_t)(g_get_real_time() / G_USEC_PER_SEC),
                                    "result", g_str_equal(result, "free") ? "free" : "quarantined", "coverage", cov);
    }
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_unclaim(AvPool *pool, AvPoolDevice *dev, const char *why, const char *event, GError **error)
{
    g_autofree char *reason = NULL;

    if (dev->state != AV_DEVICE_STATE_CLAIMED)
        return av_transition_fail(dev, AV_DEVICE_STATE_FREE, error);
    if (!dev->claim_programmed)
        return av_pool_transition_event(pool, dev, AV_DEVICE_STATE_FREE, NULL, why, event, NULL, error);
    reason = g_strdup_printf("%s%sit was programmed for the claim's domain, so it may hold that domain's image: "
                             "scrubbed before it is free", why ? why : "", why ? "; " : "");
    /* Outside the table: only here does a claim end dirty. */
    return av_pool_transition_do(pool, dev, AV_DEVICE_STATE_DIRTY, NULL, reason, event, NULL, TRUE, error);
}

/* Claims whose expiry has passed end ("claim-expired"): a domain defined
 * but never started does not hold a GPU forever (seed 004).  They go back
 * to free, or to dirty when a program ran for them (av_pool_unclaim()). */
gboolean
av_pool_expire_claims(AvPool *pool, gint64 now, gboolean *changed, GError **error)
{
    for (guint i = 0; i < pool->devices->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);

        if (dev->state != AV_DEVICE_STATE_CLAIMED || dev->claim_expires == 0 || dev->claim_expires > now)
            continue;
        if (!av_pool_unclaim(pool, dev, "the claim expired", "claim-expired", error))
            return FALSE;
        *changed = TRUE;
    }
    return TRUE;
}
