/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt stale (seed 004: "computation is done, sometimes GPU
 * is not freed", "stale VMs running after the workload has completed").
 *
 * Finds the devices of the pool that a domain holds for nothing, from
 * what libvirt says of every domain it knows (virConnectListAllDomains(),
 * virDomainGetState() with its reason):
 *   - in use or claimed by a domain libvirt does not know (by UUID, else
 *     by name: a domain of the same name counts as the holder);
 *   - in use by a domain that is shut off, crashed or paused;
 *   - in use by a running domain for longer than its profile's "max_lease";
 *   - claimed past the claim's expiry.
 * libvirt gives no time for a domain's state: how long a finding has lasted
 * is counted from the device's own state_since (for a lease, from
 * state_since + max_lease; for a claim, from its expiry).
 *
 * --release hands what is safe to the normal release path (in use ->
 * dirty, journalled "released_by": "stale (operator NAME)", then the
 * scrub worker; never straight to free): the devices of a domain libvirt
 * does not know or says shut off or crashed, whose QEMU is gone
 * (av_pool_owner_is_gone()), unchanged since libvirt was asked and in use
 * for longer than AV_POOL_DEAD_GRACE_S.  Expired claims go back to free
 * through the claim expiry (av_pool_expire_claims()): no tenant used them.
 * A paused domain, or a running one past its lease, still holds its
 * devices: they stay, and the line says what the operator must do.
 *
 * libvirt is asked before the pool's lock is taken (as `audit` does): a
 * hook waiting for the lock must not wait for libvirt too.  Read-only
 * (shared lock) without --release.  It is not the hook: it calls libvirt. */
#include "config.h"

#include "cli.h"

#include <stdio.h>
#include <string.h>

#include <libvirt/virterror.h>

#include "util/av-error.h"
#include "util/av-json.h"
#include "util/av-names.h"

/* --- what libvirt says ------------------------------------------------------------ */

typedef struct {
    char uuid[VIR_UUID_STRING_BUFLEN];
    char *name;
    int state;                   /* virDomainState */
    int reason;                  /* its reason (virDomainShutoffReason, virDomainPausedReason, ...) */
} AvStaleDomain;

static void
av_stale_domain_free(AvStaleDomain *domain)
{
    if (!domain)
        return;
    g_free(domain->name);
    g_free(domain);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvStaleDomain, av_stale_domain_free)

/* Every domain @conn knows, defined or transient, running or not, with its
 * state (AvStaleDomain* in a new array).  A domain undefined while it was
 * read is left out (libvirt no longer knows it).  NULL with @error. */
static GPtrArray *
av_stale_read_domains(virConnect *conn, GError **error)
{
    g_autoptr(GPtrArray) domains = g_ptr_array_new_with_free_func((GDestroyNotify)av_stale_domain_free);
    virDomainPtr *doms = NULL;
    int n = virConnectListAllDomains(conn, &doms, 0);
    gboolean ok = TRUE;

    if (n < 0) {
        av_cli_virt_error(error, "cannot list libvirt's domains");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        g_autoptr(AvStaleDomain) domain = g_new0(AvStaleDomain, 1);

        if (ok && virDomainGetUUIDString(doms[i], domain->uuid) == 0 &&
            virDomainGetState(doms[i], &domain->state, &domain->reason, 0) == 0) {
            domain->name = g_strdup(virDomainGetName(doms[i]));
            g_ptr_array_add(domains, g_steal_pointer(&domain));
        } else if (ok) {
            const virError *e = virGetLastError();

            if (!e || e->code != VIR_ERR_NO_DOMAIN) {
                g_autofree char *what = g_strdup_printf("cannot read the state of domain '%s'",
                                                        virDomainGetName(doms[i]));

                ok = av_cli_virt_error(error, what);
            }
        }
        virDomainFree(doms[i]);
    }
    free(doms);
    return ok ? g_steal_pointer(&domains) : NULL;
}

/* The domain of @domains that holds @owner: by UUID, else by name.
 * Borrowed; NULL when libvirt knows none. */
static const AvStaleDomain *
av_stale_find_domain(const GPtrArray *domains, const AvOwner *owner)
{
    for (guint i = 0; owner->domain_uuid && i < domains->len; i++) {
        const AvStaleDomain *d = g_ptr_array_index(domains, i);

        if (g_ascii_strcasecmp(d->uuid, owner->domain_uuid) == 0)
            return d;
    }
    for (guint i = 0; owner->domain_name && i < domains->len; i++) {
        const AvStaleDomain *d = g_ptr_array_index(domains, i);

        if (g_strcmp0(d->name, owner->domain_name) == 0)
            return d;
    }
    return NULL;
}

/* libvirt's word for @state and @reason (virsh domstate --reason), such as
 * "shut off (destroyed)".  Caller frees. */
static char *
av_stale_state_text(int state, int reason)
{
    static const char *const states[] = { "no state", "running", "blocked", "paused", "shutting down",
                                          "shut off", "crashed", "suspended" };
    static const char *const shutoff[] = { NULL, "shutdown", "destroyed", "crashed", "migrated", "saved",
                                           "failed", "from snapshot", "daemon" };
    static const char *const paused[] = { NULL, "user", "migrating", "saving", "dumping", "I/O error", "watchdog",
                                          "from snapshot", "shutting down", "snapshot", "starting up", "post-copy",
                                          "post-copy failed", "API error" };
    static const char *const crashed[] = { NULL, "panicked" };
    const char *s = state >= 0 && (gsize)state < G_N_ELEMENTS(states) ? states[state] : "unknown state";
    const char *r = NULL;

    if (state == VIR_DOMAIN_SHUTOFF && reason > 0 && (gsize)reason < G_N_ELEMENTS(shutoff))
        r = shutoff[reason];
    else if (state == VIR_DOMAIN_PAUSED && reason > 0 && (gsize)reason < G_N_ELEMENTS(paused))
        r = paused[reason];
    else if (state == VIR_DOMAIN_CRASHED && reason > 0 && (gsize)reason < G_N_ELEMENTS(crashed))
        r = crashed[reason];
    return r ? g_strdup_printf("%s (%s)", s, r) : g_strdup(s);
}

/* --- findings ------------------------------------------------------------------------- */

typedef enum {
    AV_STALE_UNKNOWN_DOMAIN,     /* libvirt knows no such domain */
    AV_STALE_SHUT_OFF,
    AV_STALE_CRASHED,
    AV_STALE_PAUSED,
    AV_STALE_PAST_LEASE,         /* running, in use past the profile's max_lease */
    AV_STALE_CLAIM_EXPIRED,
} AvStaleKind;

static const char *const av_stale_kind_names[] = {
    [AV_STALE_UNKNOWN_DOMAIN] = "unknown-domain",
    [AV_STALE_SHUT_OFF] = "shut-off",
    [AV_STALE_CRASHED] = "crashed",
    [AV_STALE_PAUSED] = "paused",
    [AV_STALE_PAST_LEASE] = "past-lease",
    [AV_STALE_CLAIM_EXPIRED] = "claim-expired",
};

typedef struct {
    AvStaleKind kind;
    AvPoolDevice *dev;           /* borrowed from the pool */
    AvOwner *owner;              /* its owner when judged (a freed claim has none after) */
    const AvStaleDomain *domain; /* borrowed; NULL when libvirt knows none */
    gint64 since;                /* Unix seconds: when the condition began, as far as the pool can tell */
    guint64 max_lease_s;         /* the profile's, or 0 */
    const char *action;          /* "none", "released", "freed" or "kept" */
    char *detail;                /* what it is, one phrase */
    char *advice;                /* what to do, or what was done */
} AvStaleFinding;

static void
av_stale_finding_free(AvStaleFinding *finding)
{
    if (!finding)
        return;
    av_owner_free(finding->owner);
    g_free(finding->detail);
    g_free(finding->advice);
    g_free(finding);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvStaleFinding, av_stale_finding_free)

/* "3h 12m", "2d 5h", "12m", "40s". Caller frees. */
static char *
av_stale_span(gint64 seconds)
{
    guint64 s = seconds > 0 ? (guint64)seconds : 0;

    if (s >= 86400)
        return g_strdup_printf("%" G_GUINT64_FORMAT "d %" G_GUINT64_FORMAT "h", s / 86400, s % 86400 / 3600);
    if (s >= 3600)
        return g_strdup_printf("%" G_GUINT64_FORMAT "h %" G_GUINT64_FORMAT "m", s / 3600, s % 3600 / 60);
    if (s >= 60)
        return g_strdup_printf("%" G_GUINT64_FORMAT "m", s / 60);
    return g_strdup_printf("%" G_GUINT64_FORMAT "s", s);
}

/* The held state of @dev: its state, or for a missing device the state it
 * had when it went missing. */
static AvDeviceState
av_stale_held_state(const AvPoolDevice *dev)
{
    return dev->state == AV_DEVICE_STATE_MISSING ? dev->state_before_missing : dev->state;
}

/* The finding about @dev, or NULL when it is not stale.  @domains: what
 * libvirt said; @now: Unix seconds. */
static AvStaleFinding *
av_stale_judge(const AvPolicy *policy, const GPtrArray *domains, AvPoolDevice *dev, gint64 now)
{
    g_autoptr(AvStaleFinding) f = NULL;
    const AvProfile *profile = dev->profile ? av_policy_find(policy, dev->profile) : NULL;
    AvDeviceState held = av_stale_held_state(dev);
    const AvStaleDomain *domain;
    g_autofree char *span = NULL;
    g_autofree char *lease = NULL;
    g_autofree char *state = NULL;

    if (!dev->owner || (held != AV_DEVICE_STATE_IN_USE && held != AV_DEVICE_STATE_CLAIMED))
        return NULL;
    domain = av_stale_find_domain(domains, dev->owner);
    f = g_new0(AvStaleFinding, 1);
    f->dev = dev;
    f->owner = av_owner_copy(dev->owner);
    f->domain = domain;
    f->since = dev->state_since;
    f->action = "none";
    f->max_lease_s = profile ? profile->max_lease_s : 0;
    if (held == AV_DEVICE_STATE_CLAIMED) {
        if (dev->claim_expires > 0 && dev->claim_expires <= now) {
            f->kind = AV_STALE_CLAIM_EXPIRED;
            f->since = dev->claim_expires;
            span = av_stale_span(now - dev->claim_expires);
            f->detail = g_strdup_printf("claimed, the claim expired %s ago", span);
            return g_steal_pointer(&f);
        }
        if (domain)
            return NULL;
        f->kind = AV_STALE_UNKNOWN_DOMAIN;
        span = av_stale_span(now - dev->state_since);
        f->detail = g_strdup_printf("claimed for %s by a domain libvirt does not know", span);
        return g_steal_pointer(&f);
    }
    span = av_stale_span(now - dev->state_since);
    if (!domain) {
        f->kind = AV_STALE_UNKNOWN_DOMAIN;
        f->detail = g_strdup_printf("libvirt does not know the domain, in use for %s", span);
        return g_steal_pointer(&f);
    }
    if (domain->state == VIR_DOMAIN_SHUTOFF || domain->state == VIR_DOMAIN_CRASHED ||
        domain->state == VIR_DOMAIN_PAUSED) {
        state = av_stale_state_text(domain->state, domain->reason);
        f->kind = domain->state == VIR_DOMAIN_SHUTOFF  ? AV_STALE_SHUT_OFF
                  : domain->state == VIR_DOMAIN_CRASHED ? AV_STALE_CRASHED
                                                        : AV_STALE_PAUSED;
        f->detail = g_strdup_printf("%s, the device in use for %s", state, span);
        return g_steal_pointer(&f);
    }
    if (f->max_lease_s == 0 || now - dev->state_since <= (gint64)f->max_lease_s)
        return NULL;
    f->kind = AV_STALE_PAST_LEASE;
    f->since = dev->state_since + (gint64)f->max_lease_s;
    lease = av_stale_span((gint64)f->max_lease_s);
    state = av_stale_state_text(domain->state, domain->reason);
    f->detail = g_strdup_printf("%s, the device in use for %s, past the max_lease of %s of profile '%s'", state, span,
                                lease, dev->profile);
    return g_steal_pointer(&f);
}

/* What the operator can do about @f, when --release did not: one phrase
 * (caller frees). */
static char *
av_stale_advice(const AvStaleFinding *f)
{
    g_autofree char *name = av_cli_printable(f->owner->domain_name ? f->owner->domain_name : f->owner->domain_uuid);

    switch (f->kind) {
    case AV_STALE_CLAIM_EXPIRED:
        if (f->dev->claim_programmed)
            return g_strdup("run 'accelvirt stale --release' (or 'accelvirt reconcile'): it was programmed for the "
                            "domain, so it goes dirty and the worker scrubs it");
        return g_strdup("run 'accelvirt stale --release' (or 'accelvirt reconcile') to free it: no tenant used it");
    case AV_STALE_PAUSED:
    case AV_STALE_PAST_LEASE:
        return g_strdup_printf("the domain still holds it: when its work is done, 'virsh destroy %s' (its release "
                               "then scrubs the device), or 'accelvirt release %s' if that release never comes",
                               name, name);
    case AV_STALE_UNKNOWN_DOMAIN:
        if (av_stale_held_state(f->dev) == AV_DEVICE_STATE_CLAIMED) {
            g_autofree char *left = f->dev->claim_expires > 0 ? av_stale_span(f->dev->claim_expires -
                                                                              g_get_real_time() / G_USEC_PER_SEC)
                                                               : NULL;

            return left ? g_strdup_printf("its claim expires in %s, and the device is then %s", left,
                                          f->dev->claim_programmed ? "dirty and scrubbed (programmed for the domain)"
                                                                   : "free")
                        : g_strdup("its claim has no expiry: 'accelvirt status' shows it");
        }
        break;
    case AV_STALE_SHUT_OFF:
    case AV_STALE_CRASHED:
        break;
    }
    return g_strdup_printf("run 'accelvirt stale --release' or 'accelvirt release %s'", name);
}

/* Releases what is safe of @f (see the top of this file) in @pool, open
 * for writing, by @by; sets f->action and f->advice.  @seen_at: when
 * libvirt was asked.  FALSE with @error when the pool cannot be changed. */
static gboolean
av_stale_release(AvPool *pool, const AvRoot *root, AvStaleFinding *f, gint64 seen_at, gint64 now, const char *by,
                 GError **error)
{
    AvPoolDevice *dev = f->dev;
    g_autofree char *name = av_cli_printable(f->owner->domain_name ? f->owner->domain_name : f->owner->domain_uuid);
    gboolean moved = FALSE;

    if (f->kind != AV_STALE_UNKNOWN_DOMAIN && f->kind != AV_STALE_SHUT_OFF && f->kind != AV_STALE_CRASHED)
        return TRUE;
    if (av_stale_held_state(dev) != AV_DEVICE_STATE_IN_USE)
        return TRUE;
    f->action = "kept";
    g_free(f->advice);
    if (dev->state_since >= seen_at || now - dev->state_since < AV_POOL_DEAD_GRACE_S) {
        f->advice = g_strdup_printf("not released: in use for less than %d s, or since libvirt was asked; run "
                                    "'accelvirt stale --release' again later", AV_POOL_DEAD_GRACE_S);
        return TRUE;
    }
    if (!av_pool_owner_is_gone(root, av_pool_state_dir(pool), dev, NULL)) {
        f->advice = g_strdup_printf("not released: its QEMU may still run (libvirt's pid file for '%s' exists, a "
                                    "process holds the device's IOMMU group, or /run/libvirt/qemu is not there): "
                                    "'virsh destroy %s', then 'accelvirt release %s'", name, name, name);
        return TRUE;
    }
    if (!av_pool_release_device(pool, dev, by, &moved, error))
        return FALSE;
    if (moved) {
        f->action = "released";
        f->advice = g_strdup("released: dirty, the worker scrubs it");
    }
    return TRUE;
}

/* One line for @f, fit for a terminal.  Caller frees. */
static char *
av_stale_line(const AvStaleFinding *f)
{
    const AvPoolDevice *dev = f->dev;
    g_autofree char *identity = av_cli_printable(dev->identity);
    g_autofree char *name = av_cli_printable(f->owner->domain_name);
    g_autofree char *profile = av_cli_printable(dev->profile);

    return g_strdup_printf("%s: %s (%s, profile %s) held by domain '%s' (%s): %s; %s",
                           g_str_equal(f->action, "released") ? "released"
                           : g_str_equal(f->action, "freed")  ? "freed"
                                                              : "stale",
                           identity, dev->address ? dev->address : "-", profile ? profile : "-",
                           name ? name : "?", f->owner->domain_uuid ? f->owner->domain_uuid : "no UUID",
                           f->detail, f->advice);
}

static json_t *
av_stale_finding_to_json(const AvStaleFinding *f, gint64 now)
{
    const AvPoolDevice *dev = f->dev;
    g_autofree char *state = f->domain ? av_stale_state_text(f->domain->state, f->domain->reason) : NULL;

    return json_pack("{s:s,s:s,s:o,s:o,s:s,s:o,s:o,s:o,s:I,s:I,s:o,s:o,s:s,s:s,s:s}", "kind",
                     av_stale_kind_names[f->kind], "identity", dev->identity, "address",
                     av_json_string_or_null(dev->address), "profile", av_json_string_or_null(dev->profile), "state",
                     av_device_state_to_string(dev->state), "domain_uuid",
                     av_json_string_or_null(f->owner->domain_uuid), "domain_name",
                     av_json_string_or_null(f->owner->domain_name), "domain_state", av_json_string_or_null(state),
                     "since", (json_int_t)f->since, "for_s", (json_int_t)(now - f->since), "max_lease_s",
                     f->max_lease_s ? json_integer((json_int_t)f->max_lease_s) : json_null(), "claim_expires",
                     dev->claim_expires ? json_integer(dev->claim_expires) : json_null(), "action", f->action,
                     "detail", f->detail, "advice", f->advice);
}

/* --- accelvirt stale -------------------------------------------------------------------- */

/* `accelvirt stale [--older-than DURATION] [--release]` (see the top of
 * this file and accelvirt(1)): 0 whatever it found, 1 when libvirt cannot
 * be reached, 2 for bad usage. */
int
av_cli_cmd_stale(AvCli *cli, int argc, char **argv)
{
    gboolean release = FALSE;
    g_autofree char *older_than = NULL;
    const GOptionEntry entries[] = {
        { "older-than", 0, 0, G_OPTION_ARG_STRING, &older_than,
          "Only what has lasted longer than DURATION (\"30m\", \"2h\", \"7d\", or seconds)", "DURATION" },
        { "release", 0, 0, G_OPTION_ARG_NONE, &release,
          "Release what is safe (dirty, then scrubbed) and free expired claims", NULL },
        { NULL }
    };
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GPtrArray) domains = NULL;
    g_autoptr(GPtrArray) findings = g_ptr_array_new_with_free_func((GDestroyNotify)av_stale_finding_free);
    g_autoptr(GError) err = NULL;
    g_autofree char *operator_name = av_cli_operator();
    g_autofree char *by = g_strdup_printf("stale (operator %s)", operator_name);
    guint64 min_age = 0;
    gboolean changed = FALSE, released = FALSE;
    gint64 seen_at, now;
    virConnect *conn;

    if (!av_cli_parse(cli, "stale", "[--older-than DURATION] [--release]",
                      "Devices held for nothing: in use or claimed by a domain libvirt does not know, in use by a "
                      "domain that is shut off, crashed or paused, or running past its profile's max_lease, and "
                      "claims past their expiry.  --release hands the devices of unknown, shut off and crashed "
                      "domains whose QEMU is gone to the normal release (dirty, then scrubbed; never straight to "
                      "free) and frees expired claims; paused and running domains keep theirs.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 1)
        return av_cli_usage_error("stale takes no arguments; see 'accelvirt stale --help'");
    if (older_than && !av_duration_parse(older_than, &min_age))
        return av_cli_usage_error("invalid --older-than '%s': a duration such as \"30m\", \"2h\", \"7d\" or a whole "
                                  "number of seconds", older_than);
    if (!av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);
    /* libvirt first, the lock after. */
    conn = av_cli_connect(cli, &err);
    if (!conn)
        return av_cli_fail(err);
    seen_at = g_get_real_time() / G_USEC_PER_SEC;
    domains = av_stale_read_domains(conn, &err);
    virConnectClose(conn);
    if (!domains)
        return av_cli_fail(err);
    pool = av_cli_open_pool(cli, root, release ? AV_POOL_WRITE | AV_CLI_POOL_UPKEEP_LATER : AV_POOL_READ, &err);
    if (!pool)
        return av_cli_fail(err);
    now = g_get_real_time() / G_USEC_PER_SEC;
    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);
        AvStaleFinding *f = av_stale_judge(policy, domains, dev, now);

        if (!f)
            continue;
        /* --release frees every expired claim (the claim expiry below), and
         * says so, whatever --older-than. */
        if (now - f->since <= (gint64)min_age && !(release && f->kind == AV_STALE_CLAIM_EXPIRED)) {
            av_stale_finding_free(f);
            continue;
        }
        f->advice = av_stale_advice(f);
        g_ptr_array_add(findings, f);
        if (release && !av_stale_release(pool, root, f, seen_at, now, by, &err))
            return av_cli_fail(err);
        released = released || g_str_equal(f->action, "released");
    }
    if (release) {
        /* The claim expiry, as reconcile does it: every expired claim. */
        if (!av_pool_expire_claims(pool, now, &changed, &err))
            return av_cli_fail(err);
        for (guint i = 0; i < findings->len; i++) {
            AvStaleFinding *f = g_ptr_array_index(findings, i);

            if (f->kind == AV_STALE_CLAIM_EXPIRED && f->dev->state == AV_DEVICE_STATE_FREE) {
                f->action = "freed";
                g_free(f->advice);
                f->advice = g_strdup("freed by the claim's expiry (no tenant used it)");
            } else if (f->kind == AV_STALE_CLAIM_EXPIRED && f->dev->state == AV_DEVICE_STATE_DIRTY) {
                /* A program ran for the claim: its image is scrubbed away. */
                f->action = "released";
                released = TRUE;
                g_free(f->advice);
                f->advice = g_strdup("dirty by the claim's expiry (it was programmed for the domain): the "
                                     "worker scrubs it");
            }
        }
        if ((released || changed) && !av_pool_save(pool, &err))
            return av_cli_fail(err);
        if (released)
            av_cli_want_worker();
        /* Then what every holder of the lock does first. */
        if (!av_cli_pool_upkeep(root, pool, NULL, &err))
            return av_cli_fail(err);
    }
    if (cli->json) {
        json_t *list = json_array();

        for (guint i = 0; i < findings->len; i++)
            json_array_append_new(list, av_stale_finding_to_json(g_ptr_array_index(findings, i), now));
        av_cli_print_json(json_pack("{s:b,s:o,s:i,s:o}", "release", release, "older_than_s",
                                    older_than ? json_integer((json_int_t)min_age) : json_null(), "domains",
                                    (int)domains->len, "findings", list));
        return AV_EXIT_OK;
    }
    for (guint i = 0; i < findings->len; i++) {
        g_autofree char *line = av_stale_line(g_ptr_array_index(findings, i));

        printf("%s\n", line);
    }
    if (findings->len == 0)
        printf("nothing stale (%u domains known to libvirt)\n", domains->len);
    return AV_EXIT_OK;
}
