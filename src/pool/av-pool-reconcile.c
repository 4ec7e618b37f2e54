/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: reconciling the pool with a scan of the host: devices added,
 * found, readdressed, reprofiled, missing; identities that collide. */
#include "config.h"

#include "av-pool-private.h"

#include <string.h>

#include "util/av-error.h"
#include "util/av-json.h"

/* One device of the scan, matched or not. */
typedef struct {
    char *identity;
    char *fallback;              /* the identity to use when @identity is shared */
    AvDeviceKind kind;
    const char *address;         /* borrowed from the host */
    const AvProfile *profile;    /* NULL: no profile matches */
    int numa_node;
    int iommu_group;
    const char *driver;          /* borrowed, or NULL */
    char *match_ids;             /* PCI: what a profile's match reads (av_pool_match_ids_pci()), or NULL */
    char *suspect;               /* an identity problem: its own identity is one the pool knew for one
                                  * device, which another device of this scan presents too; or NULL */
    gboolean keeps;              /* of such devices, the one at the address where the pool knew that
                                  * identity: its identity there never changed, it keeps it */
    const AvUsbDevice *usb;      /* USB: the device, borrowed from the host; else NULL */
} AvScanned;

static void
av_scanned_free(AvScanned *s)
{
    g_free(s->identity);
    g_free(s->fallback);
    g_free(s->match_ids);
    g_free(s->suspect);
    g_free(s);
}

/* Adds the names of @dev (its identity, its address) to @changed
 * (av_pool_changed_since()).  An address names whatever device of any kind
 * is there (a PCI parent and its mdevs alike): more is left alone, never
 * less. */
static void
av_changed_add(GHashTable *changed, const AvPoolDevice *dev)
{
    g_hash_table_add(changed, g_strdup(dev->identity));
    if (dev->address)
        g_hash_table_add(changed, g_strdup(dev->address));
}

/* See av-pool.h. */
void
av_pool_changed_forget(GHashTable *changed, const char *identity, const char *address)
{
    if (identity)
        g_hash_table_remove(changed, identity);
    if (address)
        g_hash_table_remove(changed, address);
}

/* TRUE when @keep (av_pool_changed_since(), or NULL) names the device that
 * presents @identity at @address (either may be NULL). */
static gboolean
av_reconcile_kept(GHashTable *keep, const char *identity, const char *address)
{
    if (!keep || g_hash_table_size(keep) == 0)
        return FALSE;
    return (identity && g_hash_table_contains(keep, identity)) || (address && g_hash_table_contains(keep, address));
}

/* The device of @kind at @address in @at (av_scanned_by_address()), or
 * NULL.  Borrowed. */
static AvScanned *
av_scanned_at(GHashTable *at, AvDeviceKind kind, const char *address)
{
    AvScanned *s = g_hash_table_lookup(at, address);

    return s && s->kind == kind ? s : NULL;
}

/* The devices of @scanned by address (the first of each; a PCI address and
 * a USB port never look alike).  Caller frees; borrows the devices. */
static GHashTable *
av_scanned_by_address(GPtrArray *scanned)
{
    GHashTable *at = g_hash_table_new(g_str_hash, g_str_equal);

    for (guint i = 0; i < scanned->len; i++) {
        AvScanned *s = g_ptr_array_index(scanned, i);

        if (!g_hash_table_contains(at, s->address))
            g_hash_table_insert(at, (gpointer)s->address, s);
    }
    return at;
}

/* The devices of @scanned grouped by identity: identity (borrowed) ->
 * GPtrArray of AvScanned* (borrowed, in scan order), only for identities
 * held by more than one device; @ret_order gets those identities (borrowed)
 * in the order of their first holders.  Caller frees the table. */
static GHashTable *
av_scanned_collisions(GPtrArray *scanned, GPtrArray *ret_order)
{
    g_autoptr(GHashTable) groups = g_hash_table_new_full(g_str_hash, g_str_equal, NULL,
                                                         (GDestroyNotify)g_ptr_array_unref);
    GHashTableIter iter;
    gpointer key, value;

    for (guint i = 0; i < scanned->len; i++) {
        AvScanned *s = g_ptr_array_index(scanned, i);
        GPtrArray *group = g_hash_table_lookup(groups, s->identity);

        if (!group) {
            group = g_ptr_array_new();
            g_hash_table_insert(groups, s->identity, group);
        }
        g_ptr_array_add(group, s);
        if (group->len == 2)
            g_ptr_array_add(ret_order, s->identity);
    }
    g_hash_table_iter_init(&iter, groups);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        if (((GPtrArray *)value)->len < 2)
            g_hash_table_iter_remove(&iter);
    }
    return g_steal_pointer(&groups);
}

/* Marks the devices of every group of @groups (av_scanned_collisions())
 * whose shared identity @pool holds for a device it saw at its last scan:
 * that identity was one device's until now, so the sharing is news, such
 * as a DSN copied onto another card by a tenant's firmware.  The device at
 * the address the pool knew it at presents what it presented there: it
 * keeps the identity (AvScanned.keeps), and the others, whose identity at
 * their address changed, get an identity problem (AvScanned.suspect): a
 * tenant whose card copies the serial of a free card of another tenant
 * gets its own card refused, not the other's.  Without such a device
 * (the known one moved too, or presents another match or IOMMU group), or
 * when another of them is at an address the pool holds no other device at,
 * all of them are suspect. */
static void
av_scanned_mark_suspects(const AvPool *pool, GHashTable *groups, GPtrArray *order)
{
    for (guint i = 0; i < order->len; i++) {
        const char *identity = g_ptr_array_index(order, i);
        GPtrArray *group = g_hash_table_lookup(groups, identity);
        const AvPoolDevice *known = av_pool_find(pool, identity);
        g_autoptr(GString) where = g_string_new(NULL);
        AvScanned *stays = NULL;

        if (!known || known->state == AV_DEVICE_STATE_MISSING)
            continue;
        for (guint j = 0; j < group->len; j++) {
            AvScanned *s = g_ptr_array_index(group, j);

            if (s->kind == known->kind && known->address && g_strcmp0(s->address, known->address) == 0)
                stays = s;
            else
                g_string_append_printf(where, "%s%s", where->len ? " and " : "", s->address);
        }
        /* Only when nothing else moved: the device there presents what the
         * pool knew of it (its match, its IOMMU group), and every other
         * address is one the pool holds another device at (a card whose
         * identity changed), not a new one (a renumbering may have put a
         * tenant's function where the original was). */
        if (stays && ((known->match_ids && g_strcmp0(known->match_ids, stays->match_ids) != 0) ||
                      known->iommu_group != stays->iommu_group))
            stays = NULL;
        for (guint j = 0; stays && j < group->len; j++) {
            const AvScanned *s = g_ptr_array_index(group, j);
            const AvPoolDevice *there = s == stays ? NULL : av_pool_find_address(pool, s->kind, s->address);

            if (s != stays && (!there || g_str_equal(there->identity, identity)))
                stays = NULL;
        }
        if (!stays) {
            g_string_truncate(where, 0);
            for (guint j = 0; j < group->len; j++)
                g_string_append_printf(where, "%s%s", j ? " and " : "", ((AvScanned *)g_ptr_array_index(group, j))->address);
        }
        for (guint j = 0; j < group->len; j++) {
            AvScanned *s = g_ptr_array_index(group, j);

            g_free(s->suspect);
            s->suspect = NULL;
            if (s == stays) {
                s->keeps = TRUE;
                continue;
            }
            if (stays)
                s->suspect = g_strdup_printf("it presents the identity '%s', which is the device's at %s (its "
                                             "identity there did not change): a serial number copied onto this "
                                             "card (firmware may have been altered)? It is refused until an "
                                             "operator has checked it and clears it ('accelvirt quarantine clear "
                                             "%s')", identity, known->address, s->address);
            else
                s->suspect = g_strdup_printf("the identity '%s', which was %s's alone, is now presented by the "
                                             "devices at %s at once: a serial number copied onto another card "
                                             "(firmware may have been altered)? Each of them is refused until an "
                                             "operator has checked them and clears it ('accelvirt quarantine clear "
                                             "ADDRESS')", identity, known->address ? known->address : "one device",
                                             where->str);
        }
    }
}

/* Gives every device whose identity another device of the scan shares its
 * fallback identity (one warning names them all), marking them suspect
 * when that identity was one pooled device's until now
 * (av_scanned_mark_suspects()); devices that share even their fallback are
 * removed from @scanned (another warning), and their identities added to
 * @ret_ambiguous (identity -> reason, both owned), so that neither is
 * pooled nor merged with the other. */
static void
av_scanned_resolve_collisions(const AvPool *pool, GPtrArray *scanned, GHashTable *ret_ambiguous)
{
    g_autoptr(GPtrArray) order = g_ptr_array_new();
    g_autoptr(GHashTable) groups = av_scanned_collisions(scanned, order);
    g_autoptr(GHashTable) shared = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(GString) msg = NULL;

    if (order->len == 0)
        return;
    msg = g_string_new(NULL);
    for (guint i = 0; i < order->len; i++) {
        GPtrArray *group = g_hash_table_lookup(groups, g_ptr_array_index(order, i));

        g_string_append_printf(msg, "%s'%s' (", i ? "; " : "", (const char *)g_ptr_array_index(order, i));
        for (guint j = 0; j < group->len; j++) {
            AvScanned *s = g_ptr_array_index(group, j);

            g_string_append_printf(msg, "%s%s as '%s'", j ? ", " : "", s->address, s->fallback);
        }
        g_string_append_c(msg, ')');
    }
    av_scanned_mark_suspects(pool, groups, order);
    /* @groups and @order borrow the identities: note them before the swap. */
    for (guint i = 0; i < order->len; i++)
        g_hash_table_add(shared, g_strdup(g_ptr_array_index(order, i)));
    g_clear_pointer(&groups, g_hash_table_unref);
    g_ptr_array_set_size(order, 0);
    for (guint i = 0; i < scanned->len; i++) {
        AvScanned *s = g_ptr_array_index(scanned, i);

        if (g_hash_table_contains(shared, s->identity) && !s->keeps) {
            g_free(s->identity);
            s->identity = g_strdup(s->fallback);
        }
    }
    g_warning("devices share an identity (a serial number given to more than one device); "
              "using their slot, path or port identities instead: %s", msg->str);

    /* Even the fallbacks collide: keep all of them out. */
    groups = av_scanned_collisions(scanned, order);
    if (order->len == 0)
        return;
    g_string_truncate(msg, 0);
    for (guint i = 0; i < order->len; i++) {
        const char *identity = g_ptr_array_index(order, i);
        GPtrArray *group = g_hash_table_lookup(groups, identity);
        g_autoptr(GString) where = g_string_new(NULL);

        for (guint j = 0; j < group->len; j++)
            g_string_append_printf(where, "%s%s", j ? ", " : "", ((AvScanned *)g_ptr_array_index(group, j))->address);
        g_string_append_printf(msg, "%s'%s' (%s)", i ? "; " : "", identity, where->str);
        g_hash_table_insert(ret_ambiguous, g_strdup(identity),
                            g_strdup_printf("its identity is shared by the devices at %s", where->str));
    }
    g_warning("devices share even their slot, path or port identity; keeping them out of the pool: %s",
              msg->str);
    g_clear_pointer(&groups, g_hash_table_unref);
    for (guint i = scanned->len; i > 0; i--) {
        AvScanned *s = g_ptr_array_index(scanned, i - 1);

        if (g_hash_table_contains(ret_ambiguous, s->identity))
            g_ptr_array_remove_index(scanned, i - 1);
    }
}

static gboolean
av_string_set(char **field, const char *value)
{
    if (g_strcmp0(*field, value) == 0)
        return FALSE;
    g_free(*field);
    *field = g_strdup(value);
    return TRUE;
}

static gboolean av_state_out_of_hand(AvDeviceState state);

/* What changed of what the profile match reads of @dev, out of the pool's
 * hands, as the scan @s shows it: a sentence, or NULL when nothing did.
 * The profile it was claimed under is the one whose steps scrub it; a
 * tenant's firmware that makes it match another (a board of the same chip
 * with a lighter scrub, told apart by its subsystem ids or class) must not
 * choose its scrub.  Ids that did not change with a profile that did are
 * the operator's new policy; without recorded ids (a pool older than them)
 * a new profile cannot be told from new ids, and counts as them.  Caller
 * frees. */
static char *
av_pool_reconcile_match_changed(const AvPoolDevice *dev, const AvScanned *s, gboolean out_of_hand)
{
    const char *now = s->profile ? s->profile->name : NULL;

    if (dev->match_ids && s->match_ids && strcmp(dev->match_ids, s->match_ids) != 0)
        return g_strdup_printf("what its profile's match reads changed from '%s' to '%s' (vendor:device, "
                               "subsystem, class, revision)%s%s%s", dev->match_ids, s->match_ids,
                               g_strcmp0(now, dev->profile) != 0 ? " and with it its profile, to '" : "",
                               g_strcmp0(now, dev->profile) != 0 ? (now ? now : "none") : "",
                               g_strcmp0(now, dev->profile) != 0 ? "'" : "");
    if (out_of_hand && !dev->match_ids && g_strcmp0(now, dev->profile) != 0)
        return g_strdup_printf("the profile it was claimed under, '%s', no longer matches what it presents (%s%s%s)",
                               dev->profile ? dev->profile : "?", now ? "it matches '" : "no profile matches it",
                               now ? now : "", now ? "' now" : "");
    return NULL;
}

/* Applies one scanned device to the pool. */
static gboolean
av_pool_reconcile_one(AvPool *pool, const AvScanned *s, gint64 now, gboolean *changed, GError **error)
{
    AvPoolDevice *dev = av_pool_find(pool, s->identity);
    gboolean keep_profile = FALSE;

    if (!dev) {
        g_autoptr(AvPoolDevice) added = NULL;

        if (!s->profile)
            return TRUE;
        added = av_pool_device_new();
        added->identity = g_strdup(s->identity);
        added->kind = s->kind;
        added->address = g_strdup(s->address);
        added->profile = g_strdup(s->profile->name);
        added->state_since = added->first_seen = added->last_seen = now;
        added->numa_node = s->numa_node;
        added->iommu_group = s->iommu_group;
        added->original_driver = g_strdup(s->driver);
        added->match_ids = g_strdup(s->match_ids);
        if (!av_pool_journal_device(pool, "added", added, NULL, error))
            return FALSE;
        av_pool_add_device(pool, g_steal_pointer(&added));
        *changed = TRUE;
        return TRUE;
    }

    if (dev->state == AV_DEVICE_STATE_MISSING) {
        g_autoptr(json_t) extra = json_object();

        json_object_set_new(extra, "found_at", json_string(s->address));
        if (!av_pool_transition_event(pool, dev, dev->state_before_missing, NULL, NULL, "found", extra, error))
            return FALSE;
        *changed = TRUE;
    }
    if (g_strcmp0(dev->address, s->address) != 0) {
        g_autoptr(json_t) extra = json_object();

        g_autofree char *old = g_strdup(dev->address);

        json_object_set_new(extra, "old_address", av_json_string_or_null(old));
        /* the entry's "address" is the device's: the new one */
        av_string_set(&dev->address, s->address);
        if (!av_pool_journal_device(pool, "readdressed", dev, extra, error)) {
            av_string_set(&dev->address, old);
            return FALSE;
        }
        *changed = TRUE;
    }
    /* What its match reads is recorded (match_ids) and kept: a change of it
     * comes from the card's firmware, which a tenant may have left set to
     * change later, once the card is free again and scrubbed, so that the
     * next tenant's data gets a lighter scrub.  In every state an identity
     * problem, never a new profile; out of the pool's hands, a new profile
     * without recorded ids (an older pool) counts the same. */
    {
        gboolean out_of_hand = av_state_out_of_hand(dev->state);
        g_autofree char *what = av_pool_reconcile_match_changed(dev, s, out_of_hand);

        keep_profile = what != NULL || (out_of_hand && dev->identity_problem != NULL);
        if (what && !dev->identity_problem) {
            g_autofree char *who = dev->owner ? av_owner_describe(dev->owner) : NULL;
            g_autofree char *problem = g_strdup_printf(
                "%s while it was %s%s%s: its firmware may have been altered; it is %s%s%squarantined: check the "
                "card, then clear its quarantine ('accelvirt quarantine clear %s')", what,
                av_device_state_to_string(dev->state), who ? (dev->state == AV_DEVICE_STATE_IN_USE ||
                                                              dev->state == AV_DEVICE_STATE_CLAIMED ? " by " :
                                                              ", last used by ") : "",
                who ? who : "", out_of_hand ? "scrubbed by '" : "", out_of_hand && dev->profile ? dev->profile : "",
                out_of_hand ? "' and " : "", dev->address ? dev->address : dev->identity);

            if (!av_pool_set_identity_problem(pool, dev, problem, error))
                return FALSE;
            *changed = TRUE;
        }
        if (!dev->match_ids && s->match_ids) {
            dev->match_ids = g_strdup(s->match_ids);
            *changed = TRUE;
        }
    }
    if (!s->profile) {
        if (dev->state == AV_DEVICE_STATE_FREE) {
            if (!av_pool_journal_device(pool, "removed", dev, NULL, error))
                return FALSE;
            av_pool_remove_device(pool, dev);
            *changed = TRUE;
            return TRUE;
        }
        /* A quarantined device keeps why it is: it is never handed out
         * either way, and the operator needs the reason. */
        if (dev->state != AV_DEVICE_STATE_QUARANTINED)
            *changed |= av_string_set(&dev->reason, "unmanaged");
    } else {
        /* A device whose ids changed out of the pool's hands keeps the
         * profile it was claimed under (above). */
        if (g_strcmp0(dev->profile, s->profile->name) != 0 && !keep_profile) {
            g_autoptr(json_t) extra = json_object();

            json_object_set_new(extra, "old_profile", av_json_string_or_null(dev->profile));
            av_string_set(&dev->profile, s->profile->name);
            if (!av_pool_journal_device(pool, "reprofiled", dev, extra, error))
                return FALSE;
            *changed = TRUE;
        }
        if (g_strcmp0(dev->reason, "unmanaged") == 0) {
            g_clear_pointer(&dev->reason, g_free);
            *changed = TRUE;
        }
        /* A free device found on another host driver was moved there by the
         * operator: that is the one to give it back to.  Found on vfio-pci or
         * on none, the record stays (a hook killed mid-prepare leaves that). */
        if (dev->state == AV_DEVICE_STATE_FREE && s->driver && !av_pci_driver_is_vfio(s->driver) &&
            g_strcmp0(dev->original_driver, s->driver) != 0) {
            av_string_set(&dev->original_driver, s->driver);
            *changed = TRUE;
        }
    }
    if (dev->numa_node != s->numa_node || dev->iommu_group != s->iommu_group || dev->last_seen != now) {
        dev->numa_node = s->numa_node;
        dev->iommu_group = s->iommu_group;
        dev->last_seen = now;
        *changed = TRUE;
    }
    return TRUE;
}

/* TRUE when nobody but the pool's own lifecycle may touch a device in
 * @state: it is reserved, with a tenant, unscrubbed, being scrubbed, or
 * set aside by a failed scrub. */
static gboolean
av_state_out_of_hand(AvDeviceState state)
{
    return state == AV_DEVICE_STATE_CLAIMED || state == AV_DEVICE_STATE_IN_USE || state == AV_DEVICE_STATE_DIRTY ||
           state == AV_DEVICE_STATE_SCRUBBING || state == AV_DEVICE_STATE_QUARANTINED;
}

/* The pooled stick @dev (in @state, its own or the one before it went
 * missing) presents at its port, as @s, one of its profile's runtime ids
 * (av_pool_usb_is_runtime_of()).  While a domain runs on it, or until its
 * scrub decides (av_pool_usb_runtime_accepted()), it is the same stick:
 * @s takes its identity and profile, so that its entry, state, owner and
 * claims stay.  Free or claimed, it keeps its entry too, with an identity
 * problem (quarantined): the firmware a tenant loaded survived the scrub,
 * or somebody loaded one on the host (nobody runs on a claimed stick). */
static gboolean
av_pool_reconcile_usb_runtime(AvPool *pool, const AvPolicy *policy, AvPoolDevice *dev, AvDeviceState state,
                              AvScanned *s, gboolean *changed, GError **error)
{
    g_autofree char *ids = g_strdup_printf("%04x:%04x", s->usb->vendor_id, s->usb->product_id);

    g_free(s->identity);
    s->identity = g_strdup(dev->identity);
    s->profile = av_policy_find(policy, dev->profile);
    if (av_pool_usb_runtime_accepted(state) || dev->identity_problem)
        return TRUE;
    {
        g_autofree char *problem = g_strdup_printf(
            "it presents %s, one of the runtime_ids of its profile '%s', while it was %s: %s; power-cycle or "
            "replug it, check it, then clear its quarantine ('accelvirt quarantine clear %s'); a "
            "'usb-power-cycle' or 'usb-reauthorize' scrub step brings such a stick back to its first ids",
            ids, dev->profile, av_device_state_to_string(state),
            state == AV_DEVICE_STATE_CLAIMED
                ? "no domain runs on a claimed stick yet, so somebody else loaded that firmware"
                : "the firmware loaded while a domain held it survived its scrub (or somebody loaded one on the host)",
            dev->address);

        if (!av_pool_set_identity_problem(pool, dev, problem, error))
            return FALSE;
    }
    *changed = TRUE;
    return TRUE;
}

/* Identities that change under the pool (a tenant
 * controls its card's firmware).  For each pooled PCI or USB device E whose
 * address now holds a device S of another identity:
 *   - when E is out of the pool's hands (av_state_out_of_hand()) or S is
 *     suspect (a collision, av_scanned_mark_suspects()), and S's identity
 *     is one the pool does not know while E's own identity is nowhere in
 *     the scan, S is E with a new identity: E's entry takes S's identity
 *     ("identity-changed"), keeping its state, owner and claims, so that the
 *     address is never re-added as free and its release still finds it;
 *   - when E is out of the pool's hands and present, and S's identity is
 *     one the pool knows, or E's identity shows up elsewhere, identities
 *     moved between devices (two cards swapping serials, a card taking back
 *     an identity the pool keeps for a missing device): nothing at that
 *     address can be trusted to be what it says.  E gets the problem, and
 *     so does whatever entry S's identity leads to (S is marked suspect).
 * Either way the devices get an identity problem: never freed or handed out
 * until the operator clears them.  A free device whose identity changes, or
 * that moved to another address (re-enumeration after a hardware change),
 * was in the pool's hands: it is the old story (missing, and a new device).
 * A USB stick that presents one of its profile's "runtime_ids" at its port
 * (its firmware loaded: av_pool_usb_is_runtime_of()) is not another device:
 * see av_pool_reconcile_usb_runtime().
 * The devices of @keep (may be NULL) are left alone.  Runs before the
 * scan's devices are applied. */
static gboolean
av_pool_reconcile_anchor(AvPool *pool, const AvPolicy *policy, GPtrArray *scanned, GHashTable *keep,
                         gboolean *changed, GError **error)
{
    g_autoptr(GHashTable) ids = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) at = av_scanned_by_address(scanned);
    /* Borrowed: re-keying re-sorts the pool's own array. */
    g_autoptr(GPtrArray) devices = g_ptr_array_sized_new(pool->devices->len);

    for (guint i = 0; i < pool->devices->len; i++)
        g_ptr_array_add(devices, g_ptr_array_index(pool->devices, i));
    for (guint i = 0; i < scanned->len; i++)
        g_hash_table_add(ids, ((AvScanned *)g_ptr_array_index(scanned, i))->identity);
    for (guint i = 0; i < devices->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(devices, i);
        gboolean missing = dev->state == AV_DEVICE_STATE_MISSING;
        AvDeviceState state = missing ? dev->state_before_missing : dev->state;
        gboolean elsewhere = g_hash_table_contains(ids, dev->identity);
        g_autoptr(json_t) extra = NULL;
        g_autofree char *old = NULL;
        g_autofree char *problem = NULL;
        g_autofree char *who = NULL;
        AvScanned *s;

        if (dev->kind == AV_DEVICE_KIND_MDEV || !dev->address ||
            av_reconcile_kept(keep, dev->identity, dev->address))
            continue;
        s = av_scanned_at(at, dev->kind, dev->address);
        if (!s || g_str_equal(s->identity, dev->identity))
            continue;
        if (dev->kind == AV_DEVICE_KIND_USB && !s->suspect &&
            av_pool_usb_is_runtime_of(s->usb, dev->identity, dev->address, av_policy_find(policy, dev->profile))) {
            if (!av_pool_reconcile_usb_runtime(pool, policy, dev, state, s, changed, error))
                return FALSE;
            continue;
        }
        who = dev->owner ? av_owner_describe(dev->owner) : NULL;
        if (!av_pool_find(pool, s->identity) && !elsewhere && (av_state_out_of_hand(state) || s->suspect)) {
            /* The same card, another identity: its entry follows it. */
            if (s->suspect)
                problem = g_strdup(s->suspect);
            else
                problem = g_strdup_printf("its identity changed from '%s' to '%s' while it was %s%s%s: its "
                                          "firmware may have been altered; check the card, then clear its "
                                          "quarantine ('accelvirt quarantine clear %s')", dev->identity,
                                          s->identity, av_device_state_to_string(state),
                                          !who ? "" : state == AV_DEVICE_STATE_IN_USE || state == AV_DEVICE_STATE_CLAIMED
                                                          ? " by " : ", last used by ",
                                          who ? who : "", dev->address);
            old = g_strdup(dev->identity);
            extra = json_object();
            json_object_set_new(extra, "old_identity", json_string(old));
            json_object_set_new(extra, "owner", av_owner_to_json(dev->owner));
            av_pool_rekey_device(pool, dev, s->identity);
            if (!av_pool_journal_device(pool, "identity-changed", dev, extra, error)) {
                av_pool_rekey_device(pool, dev, old);
                return FALSE;
            }
            if (!av_pool_set_identity_problem(pool, dev, problem, error))
                return FALSE;
            *changed = TRUE;
            continue;
        }
        if (missing || !av_state_out_of_hand(state))
            continue;
        /* Identities moved between devices: trust neither side. */
        problem = g_strdup_printf("its address %s, which it held while it was %s%s%s, now presents '%s'%s: "
                                  "identities moved between devices, so their firmware may have been altered; "
                                  "check the cards, then clear their quarantine ('accelvirt quarantine clear "
                                  "ADDRESS')", dev->address, av_device_state_to_string(state), who ? " by " : "",
                                  who ? who : "", s->identity,
                                  elsewhere ? ", and its own identity shows up at another address"
                                            : ", an identity the pool knows");
        if (!s->suspect)
            s->suspect = g_strdup(problem);
        if (!dev->identity_problem) {
            if (!av_pool_set_identity_problem(pool, dev, problem, error))
                return FALSE;
            *changed = TRUE;
        }
    }
    return TRUE;
}

/* An mdev entry follows the hook's lifecycle, not the scan: it joins the
 * pool at prepare (av_pool_add()) and leaves it when its scrub is done,
 * though the mdev itself is removed at release already.  A scan only
 * updates where it lives (its parent, that parent's NUMA node and group)
 * when it exists; it never becomes missing. */
static void
av_pool_reconcile_mdev(const AvHost *host, AvPoolDevice *dev, gint64 now, gboolean *changed)
{
    const AvMdevParent *parent = av_host_find_mdev(host, dev->identity + strlen("mdev:"));

    if (!parent)
        return;
    *changed |= av_string_set(&dev->address, parent->name);
    if (dev->numa_node != parent->numa_node || dev->last_seen != now) {
        dev->numa_node = parent->numa_node;
        dev->last_seen = now;
        *changed = TRUE;
    }
}

/* See av-pool.h. */
GHashTable *
av_pool_changed_since(const AvPool *before, const AvPool *now)
{
    GHashTable *changed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

    for (guint i = 0; i < before->devices->len; i++) {
        const AvPoolDevice *was = g_ptr_array_index(before->devices, i);
        const AvPoolDevice *is = av_pool_find(now, was->identity);
        g_autoptr(json_t) a = NULL;
        g_autoptr(json_t) b = NULL;

        if (is) {
            a = av_pool_device_to_json(was);
            b = av_pool_device_to_json(is);
            if (json_equal(a, b))
                continue;
            av_changed_add(changed, is);
        }
        av_changed_add(changed, was);
    }
    for (guint i = 0; i < now->devices->len; i++) {
        const AvPoolDevice *is = g_ptr_array_index(now->devices, i);

        if (!av_pool_find(before, is->identity))
            av_changed_add(changed, is);
    }
    return changed;
}

/* What av_pool_reconcile() reads of a scan: each device's identities,
 * matching profile and match ids, computed without the pool. */
struct _AvPoolScan {
    const AvHost *host;          /* borrowed */
    const AvPolicy *policy;      /* borrowed */
    GPtrArray *scanned;          /* AvScanned *; NULL once reconciled */
};

/* See av-pool.h. */
AvPoolScan *
av_pool_scan_new(const AvHost *host, const AvPolicy *policy)
{
    AvPoolScan *scan = g_new0(AvPoolScan, 1);
    GPtrArray *scanned = g_ptr_array_new_with_free_func((GDestroyNotify)av_scanned_free);

    scan->host = host;
    scan->policy = policy;
    scan->scanned = scanned;
    for (guint i = 0; host->pci && i < host->pci->len; i++) {
        const AvPciDevice *pci = g_ptr_array_index(host->pci, i);
        AvScanned *s = g_new0(AvScanned, 1);

        s->identity = av_pool_identity_pci(host, pci);
        s->fallback = av_pool_identity_pci_fallback(host, pci);
        s->kind = AV_DEVICE_KIND_PCI;
        s->address = pci->address;
        s->profile = av_policy_match_pci(policy, pci);
        s->numa_node = pci->numa_node;
        s->iommu_group = pci->iommu_group;
        s->driver = pci->driver;
        s->match_ids = av_pool_match_ids_pci(pci);
        g_ptr_array_add(scanned, s);
    }
    for (guint i = 0; host->usb && i < host->usb->len; i++) {
        const AvUsbDevice *usb = g_ptr_array_index(host->usb, i);
        AvScanned *s = g_new0(AvScanned, 1);

        s->identity = av_pool_identity_usb(usb);
        s->fallback = av_pool_identity_usb_fallback(usb);
        s->kind = AV_DEVICE_KIND_USB;
        s->address = usb->bus_path;
        s->profile = av_policy_match_usb(policy, usb);
        s->numa_node = usb->numa_node;
        s->iommu_group = -1;
        s->usb = usb;
        g_ptr_array_add(scanned, s);
    }
    return scan;
}

/* See av-pool.h. */
void
av_pool_scan_free(AvPoolScan *scan)
{
    if (!scan)
        return;
    if (scan->scanned)
        g_ptr_array_unref(scan->scanned);
    g_free(scan);
}

/* av_pool_reconcile() (see av-pool.h), leaving the devices of @keep (may be
 * NULL) as they are (av_pool_reconcile_scan()).  Only devices a profile matches join the pool, and
 * av_policy_match_pci() alone says which: a VF through an "sriov-vf" profile
 * or an "mdev" profile whose type it offers (NVIDIA Ampere cards offer their
 * vGPU types on their VFs), a PF never through an "sriov-vf" one.  Devices
 * sharing an identity get their fallback identities, or stay out of the pool
 * (see av_scanned_resolve_collisions()); a pooled device whose identity is
 * thus ambiguous becomes missing, with a reason saying so.  Journal events:
 * "added", "readdressed", "reprofiled" (the matching profile changed),
 * "missing", "found", "removed" and "claim-expired".  On failure (a journal write) the pool
 * may be partly reconciled; the caller must not save it. */
static gboolean
av_pool_reconcile_keeping(AvPool *pool, AvPoolScan *scan, GHashTable *keep, gboolean *ret_changed, GError **error)
{
    const AvHost *host = scan->host;
    g_autoptr(GPtrArray) scanned = g_steal_pointer(&scan->scanned);
    g_autoptr(GHashTable) pooled = NULL;
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) ambiguous = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_autoptr(GPtrArray) gone = g_ptr_array_new();
    g_autoptr(GPtrArray) left = g_ptr_array_new_with_free_func((GDestroyNotify)av_scanned_free);
    gboolean changed = FALSE;
    gint64 now = av_pool_now();

    g_return_val_if_fail(scanned != NULL, FALSE);
    if (pool->mode != AV_POOL_WRITE) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot reconcile the pool in '%s': it was opened for reading only", pool->state_dir);
        return FALSE;
    }
    /* What a partial scan leaves out is not gone. */
    if (host->partial) {
        g_set_error_literal(error, AV_ERROR, AV_ERROR_FAILED,
                            "cannot reconcile the pool with a scan of some devices only");
        return FALSE;
    }

    av_scanned_resolve_collisions(pool, scanned, ambiguous);
    /* What changed in the pool since the scan began is left to whoever
     * changed it: the scan may have seen that device before or while it
     * was changed.  Collisions are told on the whole scan (above). */
    for (guint i = scanned->len; keep && i > 0; i--) {
        AvScanned *s = g_ptr_array_index(scanned, i - 1);

        if (!av_reconcile_kept(keep, s->identity, s->address))
            continue;
        /* Seen all the same: whatever holds that identity is not missing. */
        g_hash_table_add(seen, s->identity);
        g_ptr_array_add(left, g_ptr_array_steal_index(scanned, i - 1));
    }

    if (!av_pool_reconcile_anchor(pool, scan->policy, scanned, keep, &changed, error))
        return FALSE;
    /* A device no profile matches and the pool does not know (most of a
     * host) has nothing to apply: told apart without a search of the pool
     * per device. */
    pooled = g_hash_table_new(g_str_hash, g_str_equal);
    for (guint i = 0; i < pool->devices->len; i++)
        g_hash_table_add(pooled, ((AvPoolDevice *)g_ptr_array_index(pool->devices, i))->identity);
    for (guint i = 0; i < scanned->len; i++) {
        AvScanned *s = g_ptr_array_index(scanned, i);
        AvPoolDevice *dev;

        g_hash_table_add(seen, s->identity);
        if (!s->profile && !g_hash_table_contains(pooled, s->identity))
            continue;
        if (!av_pool_reconcile_one(pool, s, now, &changed, error))
            return FALSE;
        dev = s->suspect ? av_pool_find(pool, s->identity) : NULL;
        if (dev && !dev->identity_problem) {
            if (!av_pool_set_identity_problem(pool, dev, s->suspect, error))
                return FALSE;
            changed = TRUE;
        }
    }

    for (guint i = 0; i < pool->devices->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);

        if (av_reconcile_kept(keep, dev->identity, dev->address))
            continue;
        if (dev->kind == AV_DEVICE_KIND_MDEV) {
            av_pool_reconcile_mdev(host, dev, now, &changed);
            continue;
        }
        if (!g_hash_table_contains(seen, dev->identity) && dev->state != AV_DEVICE_STATE_MISSING)
            g_ptr_array_add(gone, dev);
    }
    for (guint i = 0; i < gone->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(gone, i);
        const char *reason = g_hash_table_lookup(ambiguous, dev->identity);

        if (!av_pool_transition_event(pool, dev, AV_DEVICE_STATE_MISSING, NULL,
                                      reason ? reason : "not found at the last scan", "missing", NULL, error))
            return FALSE;
        changed = TRUE;
    }
    /* Back from missing as claimed, say: nobody holds it, so quarantined now. */
    for (guint i = 0; i < pool->devices->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);

        if (dev->identity_problem && !av_reconcile_kept(keep, dev->identity, dev->address) &&
            (dev->state == AV_DEVICE_STATE_FREE || dev->state == AV_DEVICE_STATE_CLAIMED)) {
            if (!av_pool_set_identity_problem(pool, dev, dev->identity_problem, error))
                return FALSE;
            changed = TRUE;
        }
    }
    if (!av_pool_expire_claims(pool, now, &changed, error))
        return FALSE;
    /* The pool is the picture of the host in this boot, from now on. */
    changed |= av_string_set(&pool->scanned_boot_id, host->boot_id);
    if (ret_changed)
        *ret_changed = changed;
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_reconcile(AvPool *pool, const AvHost *host, const AvPolicy *policy, gboolean *ret_changed, GError **error)
{
    g_autoptr(AvPoolScan) scan = av_pool_scan_new(host, policy);

    return av_pool_reconcile_keeping(pool, scan, NULL, ret_changed, error);
}

/* See av-pool.h. */
gboolean
av_pool_reconcile_scan(AvPool *pool, AvPoolScan *scan, GHashTable *keep, gboolean *ret_changed, GError **error)
{
    return av_pool_reconcile_keeping(pool, scan, keep, ret_changed, error);
}

/* The reason av_pool_confirm() says no about the device of @kind at
 * @address, which presents @identity, @profile matches (or none) and is on
 * NUMA node @node, as far as every kind goes: the same entry at that
 * address, not missing, the same profile and node, no identity problem to
 * act on; NULL when the pool agrees.  *ret_dev gets the pool's entry (NULL:
 * none).  Caller frees. */
static char *
av_pool_confirm_entry(const AvPool *pool, AvDeviceKind kind, const char *address, const char *identity,
                      const AvProfile *profile, int node, const AvPoolDevice **ret_dev)
{
    const AvPoolDevice *dev = av_pool_find(pool, identity);
    const AvPoolDevice *at = av_pool_find_address(pool, kind, address);

    *ret_dev = dev;
    if (!dev) {
        if (profile)
            return g_strdup_printf("%s (%s) is news to the pool", address, identity);
        if (at)
            return g_strdup_printf("%s presents the identity %s, the pool has %s there", address, identity,
                                   at->identity);
        return NULL;
    }
    if (dev->kind != kind || dev->state == AV_DEVICE_STATE_MISSING || g_strcmp0(dev->address, address) != 0 ||
        at != dev)
        return g_strdup_printf("%s presents the identity %s, which the pool has %s at %s", address, identity,
                               dev->state == AV_DEVICE_STATE_MISSING ? "missing" : "present",
                               dev->address ? dev->address : "no address");
    if (profile ? g_strcmp0(dev->profile, profile->name) != 0 || g_strcmp0(dev->reason, "unmanaged") == 0
                : dev->state == AV_DEVICE_STATE_FREE ||
                      (dev->state != AV_DEVICE_STATE_QUARANTINED && g_strcmp0(dev->reason, "unmanaged") != 0))
        return g_strdup_printf("the profile of %s changed", address);
    if (dev->numa_node != node)
        return g_strdup_printf("the NUMA node of %s changed", address);
    if (dev->identity_problem && (dev->state == AV_DEVICE_STATE_FREE || dev->state == AV_DEVICE_STATE_CLAIMED))
        return g_strdup_printf("%s has an identity problem to act on", address);
    return NULL;
}

/* The reason av_pool_confirm() says no about the function @pci, which
 * presents @identity, or NULL when the pool agrees
 * (av_pool_confirm_entry(), and the same IOMMU group, the same ids a
 * profile's match reads where the pool recorded them, and for a free
 * device the same host driver).  Caller frees. */
static char *
av_pool_confirm_one(const AvPool *pool, const AvPolicy *policy, const AvPciDevice *pci, const char *identity)
{
    const AvPoolDevice *dev = NULL;
    char *why = av_pool_confirm_entry(pool, AV_DEVICE_KIND_PCI, pci->address, identity,
                                      av_policy_match_pci(policy, pci), pci->numa_node, &dev);

    if (why || !dev)
        return why;
    if (dev->iommu_group != pci->iommu_group)
        return g_strdup_printf("the IOMMU group of %s changed", pci->address);
    /* What its profile's match reads (av_pool_reconcile_match_changed()):
     * a change is an identity problem even when the identity and the
     * profile stay. */
    if (dev->match_ids) {
        g_autofree char *match_ids = av_pool_match_ids_pci(pci);

        if (strcmp(dev->match_ids, match_ids) != 0)
            return g_strdup_printf("what the profile match reads of %s changed", pci->address);
    }
    if (dev->state == AV_DEVICE_STATE_FREE && pci->driver && !av_pci_driver_is_vfio(pci->driver) &&
        g_strcmp0(dev->original_driver, pci->driver) != 0)
        return g_strdup_printf("%s is on another host driver", pci->address);
    return NULL;
}

/* Adds @identity (taken) of a device of av_pool_confirm(), found at
 * @where, to @identities, which takes it.  FALSE with *ret_why when @why
 * (taken: the reason it says no about the device, or NULL) is set, or when
 * another device presents that identity too: the whole scan tells more. */
static gboolean
av_pool_confirm_add(GHashTable *identities, char *identity, char *why, const char *where, char **ret_why)
{
    if (why) {
        g_free(identity);
        *ret_why = why;
        return FALSE;
    }
    if (!g_hash_table_add(identities, identity)) {
        *ret_why = g_strdup_printf("%s shares its identity with another device", where);
        return FALSE;
    }
    return TRUE;
}

/* The reason av_pool_confirm() says no about the USB device @usb, which
 * presents @identity (av_pool_confirm_entry()), or NULL.  Caller frees. */
static char *
av_pool_confirm_usb(const AvPool *pool, const AvPolicy *policy, const AvUsbDevice *usb, const char *identity)
{
    const AvPoolDevice *dev = NULL;

    return av_pool_confirm_entry(pool, AV_DEVICE_KIND_USB, usb->bus_path, identity, av_policy_match_usb(policy, usb),
                                 usb->numa_node, &dev);
}

/* av_pool_confirm() of the USB devices of @host, which holds them all: each
 * as the pool has it, no identity twice, and every pooled USB device not
 * missing among them.  Each device is confirmed under the identity
 * av_pool_reconcile() gives it: its serial form, or its port form when
 * another device of the host presents the same serial form
 * (av_scanned_resolve_collisions()), so that sticks pooled by their port
 * do not send every hook call to the whole scan. */
static gboolean
av_pool_confirm_usb_all(const AvPool *pool, const AvHost *host, const AvPolicy *policy, char **ret_why)
{
    g_autoptr(GHashTable) identities = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

    for (guint i = 0; i < host->usb->len; i++) {
        char *own = av_pool_identity_usb(g_ptr_array_index(host->usb, i));

        g_hash_table_insert(seen, own, GUINT_TO_POINTER(GPOINTER_TO_UINT(g_hash_table_lookup(seen, own)) + 1));
    }
    for (guint i = 0; i < host->usb->len; i++) {
        const AvUsbDevice *usb = g_ptr_array_index(host->usb, i);
        char *identity = av_pool_identity_usb(usb);

        if (GPOINTER_TO_UINT(g_hash_table_lookup(seen, identity)) > 1) {
            g_free(identity);
            identity = av_pool_identity_usb_fallback(usb);
        }

        {
            /* A held stick presenting its runtime ids: as av_pool_reconcile() has it. */
            const AvPoolDevice *at = av_pool_find_address(pool, AV_DEVICE_KIND_USB, usb->bus_path);
            const AvProfile *was = at ? av_policy_find(policy, at->profile) : NULL;

            if (at && !g_str_equal(at->identity, identity) && av_pool_usb_runtime_accepted(at->state) &&
                av_pool_usb_is_runtime_of(usb, at->identity, at->address, was)) {
                const AvPoolDevice *dev = NULL;

                g_free(identity);
                identity = g_strdup(at->identity);
                if (!av_pool_confirm_add(identities, identity,
                                         av_pool_confirm_entry(pool, AV_DEVICE_KIND_USB, usb->bus_path, identity,
                                                               was, usb->numa_node, &dev),
                                         usb->bus_path, ret_why))
                    return FALSE;
                continue;
            }
        }
        if (!av_pool_confirm_add(identities, identity, av_pool_confirm_usb(pool, policy, usb, identity),
                                 usb->bus_path, ret_why))
            return FALSE;
    }
    for (guint i = 0; i < pool->devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);

        if (dev->kind == AV_DEVICE_KIND_USB && dev->state != AV_DEVICE_STATE_MISSING &&
            !g_hash_table_contains(identities, dev->identity)) {
            *ret_why = g_strdup_printf("USB device %s is not on the host", dev->identity);
            return FALSE;
        }
    }
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_confirm(const AvPool *pool, const AvHost *host, const AvPolicy *policy, char **ret_why)
{
    g_autoptr(GHashTable) identities = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

    g_return_val_if_fail(host->partial, FALSE);
    if (!host->boot_id || g_strcmp0(pool->scanned_boot_id, host->boot_id) != 0) {
        *ret_why = g_strdup(host->boot_id ? "the pool was not reconciled with the whole host in this boot"
                                          : "the host gives no boot id");
        return FALSE;
    }
    for (guint i = 0; i < host->pci->len; i++) {
        const AvPciDevice *pci = g_ptr_array_index(host->pci, i);
        char *identity = av_pool_identity_pci(host, pci);

        if (!av_pool_confirm_add(identities, identity, av_pool_confirm_one(pool, policy, pci, identity),
                                 pci->address, ret_why))
            return FALSE;
    }
    if (host->usb_scanned && !av_pool_confirm_usb_all(pool, host, policy, ret_why))
        return FALSE;
    /* The mdevs the scan found where av_pool_reconcile_mdev() would move them. */
    for (guint i = 0; i < pool->devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);
        const AvMdevParent *parent = dev->kind == AV_DEVICE_KIND_MDEV
                                         ? av_host_find_mdev(host, dev->identity + strlen("mdev:"))
                                         : NULL;

        if (parent && (g_strcmp0(dev->address, parent->name) != 0 || dev->numa_node != parent->numa_node)) {
            *ret_why = g_strdup_printf("mdev %s is on another parent", dev->identity + strlen("mdev:"));
            return FALSE;
        }
    }
    *ret_why = NULL;
    return TRUE;
}
