/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the Placement sync (see av-placement-sync.h). */
#include "config.h"

#include "nova/av-placement-sync.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <sys/socket.h>
#include <string.h>
#include <unistd.h>

#include "nova/av-openstack.h"
#include "nova/av-placement.h"
#include "util/av-error.h"
#include "util/av-file.h"
#include "util/av-json.h"

void
av_placement_device_free(AvPlacementDevice *dev)
{
    if (!dev)
        return;
    g_free(dev->identity);
    g_free(dev->address);
    g_free(dev->profile);
    g_free(dev->pf_address);
    g_free(dev);
}

void
av_placement_target_free(AvPlacementTarget *target)
{
    if (!target)
        return;
    g_free(target->rp);
    g_free(target->rc);
    g_free(target->address);
    g_ptr_array_unref(target->identities);
    g_ptr_array_unref(target->addresses);
    g_free(target);
}

void
av_placement_report_free(AvPlacementReport *report)
{
    if (!report)
        return;
    json_decref(report->results);
    g_free(report);
}

static AvPlacementReport *
av_placement_report_new(void)
{
    AvPlacementReport *report = g_new0(AvPlacementReport, 1);

    report->results = json_array();
    return report;
}

/* See av-placement-sync.h. */
char *
av_placement_rp_name(const char *hostname, const char *address)
{
    g_autofree char *upper = g_ascii_strup(address, -1);

    return g_strdup_printf("%s_%s", hostname, upper);
}

/* See av-placement-sync.h. */
char *
av_placement_resource_class(const AvProfile *profile, guint16 vendor, guint16 device)
{
    if (profile && profile->resource_class)
        return g_strdup(profile->resource_class);
    return g_strdup_printf("CUSTOM_PCI_%04X_%04X", vendor, device);
}

/* See av-placement-sync.h.  As libvirt's virGetHostname() (src/util/virutil.c,
 * virGetHostnameImpl()), which virConnectGetHostname() answers and Nova
 * takes as the compute node's hypervisor_hostname: gethostname() when it
 * starts with "localhost" or has a '.'; else the canonical name
 * getaddrinfo() gives for it (AI_CANONNAME, AF_UNSPEC), unless that fails,
 * is missing or starts with "localhost". */
char *
av_placement_default_hostname(void)
{
    struct addrinfo hints = { 0 };
    struct addrinfo *info = NULL;
    char name[HOST_NAME_MAX + 1] = "";
    char *out;

    if (gethostname(name, sizeof(name)) < 0)
        return NULL;
    name[sizeof(name) - 1] = '\0';
    if (!*name)
        return NULL;
    if (g_str_has_prefix(name, "localhost") || strchr(name, '.'))
        return g_strdup(name);
    hints.ai_flags = AI_CANONNAME;
#ifdef AI_CANONIDN
    hints.ai_flags |= AI_CANONIDN;
#endif
    hints.ai_family = AF_UNSPEC;
    if (getaddrinfo(name, NULL, &hints, &info) != 0)
        return g_strdup(name);
    out = g_strdup(info->ai_canonname && !g_str_has_prefix(info->ai_canonname, "localhost") ? info->ai_canonname
                                                                                               : name);
    freeaddrinfo(info);
    return out;
}

/* See av-placement-sync.h. */
char *
av_placement_hostname(const AvPolicy *policy)
{
    char *name;

    if (policy && policy->nova && policy->nova->hypervisor_hostname)
        return g_strdup(policy->nova->hypervisor_hostname);
    name = av_placement_default_hostname();
    return name ? name : g_strdup("localhost");
}

/* The vendor and device ids of a PCI identity ("dsn:VVVV:DDDD:..." or
 * "pci:VVVV:DDDD:..."); FALSE for a VF's (they are its PF's). */
static gboolean
av_placement_identity_ids(const char *identity, guint16 *ret_vendor, guint16 *ret_device)
{
    unsigned vendor, device;
    char sep;

    if (!identity || strstr(identity, "/vf"))
        return FALSE;
    if (!(g_str_has_prefix(identity, "dsn:") || g_str_has_prefix(identity, "pci:")))
        return FALSE;
    if (sscanf(identity + 4, "%4x:%4x%c", &vendor, &device, &sep) != 3 || sep != ':')
        return FALSE;
    *ret_vendor = (guint16)vendor;
    *ret_device = (guint16)device;
    return TRUE;
}

static gboolean
av_placement_state_reserves(AvDeviceState state)
{
    return state == AV_DEVICE_STATE_DIRTY || state == AV_DEVICE_STATE_SCRUBBING ||
           state == AV_DEVICE_STATE_QUARANTINED;
}

/* Whether a device in @state reserves its function (a whole one) or counts
 * among its PF's reserved VFs (@is_vf). */
static gboolean
av_placement_counts(AvDeviceState state, AvDeviceState before_missing, gboolean is_vf)
{
    return av_placement_state_reserves(state) ||
           /* A VF gone while free (vfs_shrink, a lower sriov_numvfs) is no
            * longer among Nova's either: not counted. */
           (state == AV_DEVICE_STATE_MISSING &&
            (!is_vf || (before_missing != AV_DEVICE_STATE_FREE && before_missing != AV_DEVICE_STATE_CLAIMED)));
}

static gint
av_placement_target_compare(gconstpointer a, gconstpointer b)
{
    const AvPlacementTarget *x = *(AvPlacementTarget *const *)a;
    const AvPlacementTarget *y = *(AvPlacementTarget *const *)b;
    int c = strcmp(x->rp, y->rp);

    return c ? c : strcmp(x->rc, y->rc);
}

static AvPlacementTarget *
av_placement_target_new(const char *rp, const char *rc, const char *address, gint64 want)
{
    AvPlacementTarget *t = g_new0(AvPlacementTarget, 1);

    t->rp = g_strdup(rp);
    t->rc = g_strdup(rc);
    t->address = g_strdup(address);
    t->want = want;
    t->identities = g_ptr_array_new_with_free_func(g_free);
    t->addresses = g_ptr_array_new_with_free_func(g_free);
    return t;
}

/* See av-placement-sync.h. */
GPtrArray *
av_placement_targets(const AvPolicy *policy, const char *hostname, const GPtrArray *devices, json_t *records,
                     GHashTable **ret_held)
{
    g_autoptr(GHashTable) by_key = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(GHashTable) held = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)av_placement_target_free);

    for (guint i = 0; devices && i < devices->len; i++) {
        const AvPlacementDevice *dev = g_ptr_array_index(devices, i);
        const AvProfile *profile = dev->profile ? av_policy_find(policy, dev->profile) : NULL;
        json_t *record = json_object_get(records, dev->identity);
        g_autofree char *rp = NULL;
        g_autofree char *rc = NULL;
        g_autofree char *key = NULL;
        const char *rp_address = dev->is_vf ? dev->pf_address : dev->address;
        AvPlacementTarget *t;
        gboolean counts;

        if (!av_policy_placement_sync(policy, profile))
            continue;
        if (!dev->is_vf && (dev->state == AV_DEVICE_STATE_CLAIMED || dev->state == AV_DEVICE_STATE_IN_USE)) {
            g_hash_table_add(held, g_strdup(dev->identity));
            continue;
        }
        if (rp_address && dev->ids_known) {
            rp = av_placement_rp_name(hostname, rp_address);
            rc = av_placement_resource_class(profile, dev->vendor_id, dev->device_id);
        } else if (json_is_string(json_object_get(record, "rp")) && json_is_string(json_object_get(record, "rc"))) {
            rp = g_strdup(json_string_value(json_object_get(record, "rp")));
            rc = g_strdup(json_string_value(json_object_get(record, "rc")));
            if (!rp_address)
                rp_address = json_string_value(json_object_get(record, "rp_address"));
        } else {
            continue;    /* gone before its provider was ever known */
        }
        key = g_strdup_printf("%s\n%s", rp, rc);
        t = g_hash_table_lookup(by_key, key);
        if (!t) {
            t = av_placement_target_new(rp, rc, rp_address, dev->is_vf ? 0 : -1);
            t->counts_vfs = dev->is_vf;
            g_ptr_array_add(out, t);
            g_hash_table_insert(by_key, g_steal_pointer(&key), t);
        }
        g_ptr_array_add(t->identities, g_strdup(dev->identity));
        g_ptr_array_add(t->addresses, g_strdup(dev->address));
        counts = av_placement_counts(dev->state, dev->state_before_missing, dev->is_vf);
        if (dev->is_vf)
            t->want += counts ? 1 : 0;
        else
            t->want = counts ? -1 : 0;
    }
    g_ptr_array_sort(out, av_placement_target_compare);
    if (ret_held)
        *ret_held = g_steal_pointer(&held);
    return out;
}

/* See av-placement-sync.h. */
GPtrArray *
av_placement_snapshot(const AvRoot *root, const AvPool *pool, const AvPolicy *policy, GError **error)
{
    g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func((GDestroyNotify)av_placement_device_free);
    g_autoptr(GPtrArray) addresses = g_ptr_array_new();
    g_autoptr(AvHost) host = NULL;

    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        const AvPoolDevice *d = g_ptr_array_index(av_pool_devices(pool), i);
        AvPlacementDevice *dev;

        if (d->kind != AV_DEVICE_KIND_PCI)
            continue;
        dev = g_new0(AvPlacementDevice, 1);
        dev->identity = g_strdup(d->identity);
        dev->address = g_strdup(d->address);
        dev->profile = g_strdup(d->profile);
        dev->state = d->state;
        dev->state_before_missing = d->state_before_missing;
        dev->is_vf = strstr(d->identity, "/vf") != NULL;
        if (!dev->is_vf)
            dev->ids_known = av_placement_identity_ids(d->identity, &dev->vendor_id, &dev->device_id);
        g_ptr_array_add(out, dev);
        if (d->address && d->state != AV_DEVICE_STATE_MISSING &&
            av_policy_placement_sync(policy, d->profile ? av_policy_find(policy, d->profile) : NULL))
            g_ptr_array_add(addresses, d->address);
    }
    if (addresses->len == 0)
        return g_steal_pointer(&out);
    g_ptr_array_add(addresses, NULL);
    host = av_host_scan_devices(root, (const char *const *)addresses->pdata, FALSE, error);
    if (!host)
        return NULL;
    for (guint i = 0; i < out->len; i++) {
        AvPlacementDevice *dev = g_ptr_array_index(out, i);
        const AvPciDevice *pci;

        if (dev->state == AV_DEVICE_STATE_MISSING || !dev->address)
            continue;
        pci = av_host_find_pci(host, dev->address);
        if (!pci)
            continue;
        dev->vendor_id = pci->vendor_id;
        dev->device_id = pci->device_id;
        dev->ids_known = TRUE;
        if (pci->physfn) {
            dev->is_vf = TRUE;
            g_free(dev->pf_address);
            dev->pf_address = g_strdup(pci->physfn);
        }
    }
    return g_steal_pointer(&out);
}

static char *
av_placement_state_path(const char *state_dir)
{
    return g_build_filename(state_dir, AV_PLACEMENT_STATE_FILE, NULL);
}

/* See av-placement-sync.h. */
gboolean
av_placement_sync_wanted(const AvPolicy *policy, const char *state_dir)
{
    g_autofree char *path = av_placement_state_path(state_dir);

    for (guint i = 0; policy && i < policy->profiles->len; i++)
        if (av_policy_placement_sync(policy, g_ptr_array_index(policy->profiles, i)))
            return TRUE;
    return g_file_test(path, G_FILE_TEST_EXISTS);
}

/* See av-placement-sync.h. */
json_t *
av_placement_state_read(const char *state_dir, GError **error)
{
    g_autofree char *path = av_placement_state_path(state_dir);
    g_autofree char *data = NULL;
    g_autoptr(GError) local = NULL;
    json_error_t jerr;
    json_t *root;
    gsize len;

    if (!g_file_get_contents(path, &data, &len, &local)) {
        if (g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            return json_pack("{s:i, s:{}}", "version", 1, "devices");
        g_set_error(error, AV_ERROR, AV_ERROR_IO, "cannot read '%s': %s", path, local->message);
        return NULL;
    }
    root = json_loadb(data, len, 0, &jerr);
    if (!root || !json_is_object(json_object_get(root, "devices")) ||
        json_integer_value(json_object_get(root, "version")) != 1) {
        json_decref(root);
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "'%s' is not a Placement state file of version 1 (%s); move it away (what it had pending is "
                    "wanted again by the next sync)", path, jerr.text[0] ? jerr.text : "no 'devices' object");
        return NULL;
    }
    return root;
}

/* See av-placement-sync.h. */
gboolean
av_placement_state_write(const char *state_dir, json_t *state, GError **error)
{
    g_autofree char *path = av_placement_state_path(state_dir);
    g_autofree char *text = av_json_dump_pretty(state);

    if (!av_file_ensure_dir(state_dir, 0700, error))
        return FALSE;
    return av_file_write_atomic(path, text, strlen(text), 0600, error);
}

static char *
av_placement_now(void)
{
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();

    return g_date_time_format(now, "%Y-%m-%dT%H:%M:%SZ");
}

/* One device's record after its provider's outcome; a journal entry
 * appended to @journal when a value was applied or went pending.
 * @applied (the reserved Placement said, or NULL) is borrowed. */
static void
av_placement_record(json_t *devices, json_t *journal, const AvPlacementTarget *t, guint k, gint64 want,
                    json_t *applied, gboolean put, const char *error, const char *now)
{
    const char *identity = g_ptr_array_index(t->identities, k);
    const char *address = g_ptr_array_index(t->addresses, k);
    json_t *old = json_object_get(devices, identity);
    const char *old_state = json_string_value(json_object_get(old, "state"));
    gboolean old_want_same = json_is_integer(json_object_get(old, "want")) &&
                             json_integer_value(json_object_get(old, "want")) == want;
    const char *state = error ? "pending" : "in-sync";
    gboolean same = old && g_strcmp0(old_state, state) == 0 && old_want_same;
    gboolean was_pending = g_strcmp0(old_state, "pending") == 0;    /* @old goes with its record below */
    json_t *rec;

    if (!applied)
        applied = old && json_is_integer(json_object_get(old, "applied")) ? json_object_get(old, "applied")
                                                                            : json_null();
    rec = json_pack("{s:s, s:s, s:o, s:I, s:O, s:s, s:o, s:o, s:o}", "rp", t->rp, "rc", t->rc, "address",
                    av_json_string_or_null(address), "want", (json_int_t)want, "applied", applied, "state", state,
                    "since", same ? json_incref(json_object_get(old, "since")) : json_string(now), "error",
                    av_json_string_or_null(error), "rp_address", av_json_string_or_null(t->address));
    json_object_set_new(devices, identity, rec);
    if (put || (error && !same) || (!error && was_pending))
        json_array_append_new(journal, json_pack("{s:s, s:o, s:s, s:s, s:I, s:s, s:o}", "identity", identity,
                                                 "address", av_json_string_or_null(address), "rp", t->rp, "rc",
                                                 t->rc, "reserved", (json_int_t)want, "result",
                                                 error ? "pending" : "applied", "error",
                                                 av_json_string_or_null(error)));
}

/* Appends the entries of @journal to the pool's journal (its lock taken
 * briefly); a failure is logged: the state file says the same. */
static void
av_placement_journal(const char *state_dir, json_t *journal)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(AvPool) pool = NULL;
    size_t i;
    json_t *e;

    if (json_array_size(journal) == 0)
        return;
    pool = av_pool_open(state_dir, AV_POOL_WRITE, AV_PLACEMENT_LOCK_TIMEOUT_MS, &error);
    json_array_foreach(journal, i, e) {
        if (pool && !av_pool_journal_append(pool, "placement", e, &error))
            break;
    }
    if (error)
        g_warning("cannot journal the Placement sync: %s", error->message);
}

/* One journal entry @event with @fields (stolen), the pool's lock taken
 * briefly; a failure is logged. */
static void
av_placement_journal_event(const char *state_dir, const char *event, json_t *fields)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(AvPool) pool = av_pool_open(state_dir, AV_POOL_WRITE, AV_PLACEMENT_LOCK_TIMEOUT_MS, &error);
    g_autoptr(json_t) owned = fields;

    if (!pool || !av_pool_journal_append(pool, event, owned, &error))
        g_warning("cannot journal the Placement sync: %s", error->message);
}

/* Takes placement.lock of @state_dir: the first lock of a sync (the pool's
 * is taken under it, briefly, never the other way round). */
static AvLock *
av_placement_lock(const char *state_dir, GError **error)
{
    g_autofree char *lock_path = g_build_filename(state_dir, AV_PLACEMENT_LOCK_FILE, NULL);

    if (!av_file_ensure_dir(state_dir, 0700, error))
        return NULL;
    return av_lock_take(lock_path, AV_LOCK_EXCLUSIVE, AV_PLACEMENT_LOCK_TIMEOUT_MS, error);
}

/* av_placement_sync() with placement.lock held by the caller. */
static gboolean
av_placement_sync_locked(const char *state_dir, const AvPolicy *policy, const GPtrArray *devices,
                         const char *only_identity, AvPlacementReport **ret_report, GError **error)
{
    g_autoptr(AvPlacementReport) report = av_placement_report_new();
    g_autofree char *hostname = av_placement_hostname(policy);
    g_autofree char *now = av_placement_now();
    g_autofree char *state_path = av_placement_state_path(state_dir);
    g_autoptr(json_t) state = NULL;
    g_autoptr(json_t) journal = json_array();
    g_autoptr(GPtrArray) targets = NULL;
    g_autoptr(GHashTable) held = NULL;
    g_autoptr(GHashTable) known = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) covered = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) covered_rp = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(AvPlacementClient) client = NULL;
    g_autoptr(GError) client_error = NULL;
    g_autoptr(GPtrArray) drop = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GError) read_error = NULL;
    json_t *records;
    const char *key;
    json_t *rec;
    void *tmp;

    state = av_placement_state_read(state_dir, &read_error);
    if (!state && g_error_matches(read_error, AV_ERROR, AV_ERROR_CORRUPT_STATE)) {
        /* A state file that does not parse: moved aside, and the sync
         * starts from nothing (every wanted value comes from the pool; what
         * it had pending for devices gone since is lost, and said so). */
        g_autofree char *bad = g_strconcat(state_path, ".bad", NULL);

        if (rename(state_path, bad) < 0) {
            g_set_error(error, AV_ERROR, AV_ERROR_IO, "%s; cannot move it to '%s': %s", read_error->message, bad,
                        g_strerror(errno));
            return FALSE;
        }
        g_warning("%s: moved to '%s', the Placement sync starts from an empty state", read_error->message, bad);
        av_placement_journal_event(state_dir, "placement-state",
                                   json_pack("{s:s, s:s, s:s}", "file", state_path, "moved_to", bad, "error",
                                             read_error->message));
        g_clear_error(&read_error);
        state = json_pack("{s:i, s:{}}", "version", 1, "devices");
    }
    if (!state) {
        g_propagate_error(error, g_steal_pointer(&read_error));
        return FALSE;
    }
    records = json_object_get(state, "devices");
    targets = av_placement_targets(policy, hostname, devices, records, &held);
    for (guint i = 0; devices && i < devices->len; i++)
        g_hash_table_add(known, ((AvPlacementDevice *)g_ptr_array_index(devices, i))->identity);

    /* What no target covers: devices that want nothing now (claimed, in
     * use) keep their record without a wanted value; a pending value above
     * 0 of a device gone from the pool is replayed unless a current target
     * has the same provider and class (the current device's value is the
     * truth then); the rest is dropped. */
    for (guint i = 0; i < targets->len; i++) {
        AvPlacementTarget *t = g_ptr_array_index(targets, i);

        for (guint k = 0; k < t->identities->len; k++)
            g_hash_table_add(covered, g_ptr_array_index(t->identities, k));
        g_hash_table_add(covered_rp, g_strdup_printf("%s\n%s", t->rp, t->rc));
    }
    json_object_foreach_safe(records, tmp, key, rec) {
        g_autofree char *replay_key = NULL;

        if (g_hash_table_contains(covered, key) || (only_identity && g_strcmp0(key, only_identity) != 0))
            continue;
        if (g_hash_table_contains(held, key)) {
            json_object_set_new(rec, "want", json_null());
            json_object_set_new(rec, "state", json_string("in-sync"));
            json_object_set_new(rec, "error", json_null());
        } else if (!g_hash_table_contains(known, key) &&
                   g_strcmp0(json_string_value(json_object_get(rec, "state")), "pending") == 0 &&
                   json_is_string(json_object_get(rec, "rp")) && json_is_string(json_object_get(rec, "rc")) &&
                   json_is_integer(json_object_get(rec, "want")) &&
                   /* A replay only raises reserved (a device gone while
                    * reserved stays so); it never lowers it ... */
                   json_integer_value(json_object_get(rec, "want")) > 0 &&
                   /* ... nor overrides what a device now in the pool
                    * wants of the same provider and class. */
                   !g_hash_table_contains(covered_rp, replay_key = g_strdup_printf(
                                              "%s\n%s", json_string_value(json_object_get(rec, "rp")),
                                              json_string_value(json_object_get(rec, "rc"))))) {
            AvPlacementTarget *t = av_placement_target_new(json_string_value(json_object_get(rec, "rp")),
                                                           json_string_value(json_object_get(rec, "rc")),
                                                           json_string_value(json_object_get(rec, "rp_address")),
                                                           json_integer_value(json_object_get(rec, "want")));

            g_ptr_array_add(t->identities, g_strdup(key));
            g_ptr_array_add(t->addresses, g_strdup(json_string_value(json_object_get(rec, "address"))));
            g_ptr_array_add(targets, t);
            g_hash_table_add(covered_rp, g_steal_pointer(&replay_key));
            g_ptr_array_add(drop, g_strdup(key));   /* once applied */
        } else {
            g_ptr_array_add(drop, g_strdup(key));
        }
    }

    for (guint i = 0; i < targets->len; i++) {
        AvPlacementTarget *t = g_ptr_array_index(targets, i);
        g_autoptr(GError) local = NULL;
        AvInventory inv = { 0 };
        gboolean put = FALSE;
        gboolean ok = FALSE;
        gint64 want;
        json_t *result;

        if (only_identity && !g_ptr_array_find_with_equal_func(t->identities, only_identity, g_str_equal, NULL))
            continue;
        if (!client && !client_error) {
            AvOsCloud *cloud = av_os_cloud_load(policy && policy->nova ? policy->nova->cloud : NULL, &client_error);

            if (cloud) {
                client = av_placement_client_new(cloud);
                av_placement_client_set_budget(client, AV_PLACEMENT_RUN_BUDGET_S * 1000);
            }
        }
        if (client)
            ok = av_placement_set_reserved(client, t->rp, t->rc, t->want, &inv, &put, &local);
        else
            local = g_error_copy(client_error);
        /* The value wanted, as a number: a whole function's total is 1
         * (Nova's type-PCI and type-PF providers) until Placement says. */
        want = ok ? inv.reserved : t->want < 0 ? 1 : t->want;
        if (!ok) {
            json_t *old = json_object_get(records, g_ptr_array_index(t->identities, 0));

            if (t->want < 0 && json_is_integer(json_object_get(old, "want")) &&
                json_integer_value(json_object_get(old, "want")) > 0)
                want = json_integer_value(json_object_get(old, "want"));
        }
        {
            /* Borrowed by each record ("O"): one reference, dropped here. */
            g_autoptr(json_t) applied = ok ? json_integer(inv.reserved) : NULL;

            for (guint k = 0; k < t->identities->len; k++)
                av_placement_record(records, journal, t, k, want, applied, put, ok ? NULL : local->message, now);
        }
        /* Kept: every record of a value still pending; dropped: a
         * replayed record of a device gone from the pool, once applied. */
        for (guint k = 0; k < t->identities->len; k++) {
            const char *identity = g_ptr_array_index(t->identities, k);
            guint at;

            if ((!ok || g_hash_table_contains(known, identity)) &&
                g_ptr_array_find_with_equal_func(drop, identity, g_str_equal, &at))
                g_ptr_array_remove_index(drop, at);
        }
        if (put)
            report->applied++;
        else if (ok)
            report->in_sync++;
        result = json_pack("{s:s, s:s, s:o, s:o, s:I, s:o, s:s, s:o}", "rp", t->rp, "rc", t->rc, "address",
                           av_json_string_or_null(t->address), "identities", json_array(), "want", (json_int_t)want,
                           "reserved", ok ? json_integer(inv.reserved) : json_null(), "result",
                           put ? "applied" : ok ? "in-sync" : "pending", "error",
                           av_json_string_or_null(ok ? NULL : local->message));
        for (guint k = 0; k < t->identities->len; k++)
            json_array_append_new(json_object_get(result, "identities"),
                                  json_string(g_ptr_array_index(t->identities, k)));
        json_array_append_new(report->results, result);
    }
    for (guint i = 0; i < drop->len; i++)
        json_object_del(records, g_ptr_array_index(drop, i));
    json_object_foreach(records, key, rec)
        report->pending += g_strcmp0(json_string_value(json_object_get(rec, "state")), "pending") == 0;
    if (json_object_size(records) > 0 || g_file_test(state_path, G_FILE_TEST_EXISTS)) {
        if (!av_placement_state_write(state_dir, state, error))
            return FALSE;
    }
    /* Journaled under placement.lock (the pool's lock taken briefly, in
     * the lock order): the entries of two syncs never interleave. */
    av_placement_journal(state_dir, journal);
    *ret_report = g_steal_pointer(&report);
    return TRUE;
}

/* See av-placement-sync.h. */
gboolean
av_placement_sync(const char *state_dir, const AvPolicy *policy, const GPtrArray *devices, const char *only_identity,
                  AvPlacementReport **ret_report, GError **error)
{
    g_autoptr(AvLock) lock = av_placement_lock(state_dir, error);

    if (!lock)
        return FALSE;
    return av_placement_sync_locked(state_dir, policy, devices, only_identity, ret_report, error);
}

/* See av-placement-sync.h. */
gboolean
av_placement_sync_pool(const AvRoot *root, const char *state_dir, const AvPolicy *policy, const char *only_identity,
                       AvPlacementReport **ret_report, GError **error)
{
    g_autoptr(GPtrArray) devices = NULL;
    g_autoptr(AvLock) lock = NULL;

    if (!av_placement_sync_wanted(policy, state_dir)) {
        *ret_report = av_placement_report_new();
        return TRUE;
    }
    /* placement.lock first, then the pool read under it: syncs apply their
     * snapshots in the order they were taken (an older snapshot's "free:
     * 0" never lands after a newer "dirty: total"). */
    lock = av_placement_lock(state_dir, error);
    if (!lock)
        return FALSE;
    {
        g_autoptr(AvPool) pool = av_pool_open(state_dir, AV_POOL_READ, AV_PLACEMENT_LOCK_TIMEOUT_MS, error);

        if (!pool)
            return FALSE;
        devices = av_placement_snapshot(root, pool, policy, error);
        if (!devices)
            return FALSE;
    }
    return av_placement_sync_locked(state_dir, policy, devices, only_identity, ret_report, error);
}

#define AV_PLACEMENT_NOT_SYNCED "not synced yet: the next worker, reconcile or placement sync does"

/* See av-placement-sync.h. */
json_t *
av_placement_device_status(const AvPolicy *policy, json_t *state, const AvPoolDevice *dev)
{
    const AvProfile *profile = dev->profile ? av_policy_find(policy, dev->profile) : NULL;
    json_t *rec = json_object_get(json_object_get(state, "devices"), dev->identity);
    json_t *out;

    if (dev->kind != AV_DEVICE_KIND_PCI || !av_policy_placement_sync(policy, profile))
        return json_pack("{s:s}", "state", "off");
    /* Claimed or in use (a whole function): Nova's allocation, nothing
     * wanted. */
    if (!rec && !strstr(dev->identity, "/vf") &&
        (dev->state == AV_DEVICE_STATE_CLAIMED || dev->state == AV_DEVICE_STATE_IN_USE))
        return json_pack("{s:s, s:n, s:n, s:n, s:n, s:n, s:n}", "state", "in-sync", "rp", "rc", "want", "applied",
                         "since", "error");
    if (!rec)
        return json_pack("{s:s, s:n, s:n, s:n, s:n, s:n, s:s}", "state", "pending", "rp", "rc", "want", "applied",
                         "since", "error", AV_PLACEMENT_NOT_SYNCED);
    /* The record against what the device's state wants now (as
     * av_placement_targets() counts it): a record of an older state (a
     * device released since the last sync) is not "in sync". */
    if (g_strcmp0(json_string_value(json_object_get(rec, "state")), "in-sync") == 0) {
        gboolean is_vf = strstr(dev->identity, "/vf") != NULL;
        gboolean held = !is_vf && (dev->state == AV_DEVICE_STATE_CLAIMED || dev->state == AV_DEVICE_STATE_IN_USE);
        gboolean counts = av_placement_counts(dev->state, dev->state_before_missing, is_vf);
        json_t *applied = json_object_get(rec, "applied");
        json_t *want = json_object_get(rec, "want");
        gboolean stale;

        if (held)
            stale = !json_is_null(want);
        else if (!json_is_integer(applied) || !json_is_integer(want))
            stale = TRUE;
        else if (is_vf)
            stale = counts && json_integer_value(applied) < 1;
        else
            stale = counts ? json_integer_value(applied) < 1 : json_integer_value(applied) != 0;
        if (stale)
            return json_pack("{s:s, s:O, s:O, s:n, s:O, s:n, s:s}", "state", "pending", "rp",
                             json_object_get(rec, "rp"), "rc", json_object_get(rec, "rc"), "want", "applied", applied,
                             "since", "error", AV_PLACEMENT_NOT_SYNCED);
    }
    out = json_pack("{s:O, s:O, s:O, s:O, s:O, s:O, s:O}", "state", json_object_get(rec, "state"), "rp",
                    json_object_get(rec, "rp"), "rc", json_object_get(rec, "rc"), "want",
                    json_object_get(rec, "want"), "applied", json_object_get(rec, "applied"), "since",
                    json_object_get(rec, "since"), "error", json_object_get(rec, "error"));
    return out;
}

/* See av-placement-sync.h. */
char *
av_placement_status_text(json_t *status)
{
    const char *state = json_string_value(json_object_get(status, "state"));
    json_t *applied = json_object_get(status, "applied");

    if (g_strcmp0(state, "off") == 0)
        return g_strdup("off");
    if (g_strcmp0(state, "pending") == 0) {
        const char *since = json_string_value(json_object_get(status, "since"));
        const char *err = json_string_value(json_object_get(status, "error"));

        if (!since && g_strcmp0(err, AV_PLACEMENT_NOT_SYNCED) == 0)
            return g_strdup("pending (not synced yet)");

        return g_strdup_printf("pending since %s: %s", since ? since : "-", err ? err : "-");
    }
    if (json_is_null(json_object_get(status, "want")))
        return json_is_integer(applied)
                   ? g_strdup_printf("in sync (in use: Nova's allocation; reserved %" JSON_INTEGER_FORMAT " when "
                                     "last set)", json_integer_value(applied))
                   : g_strdup("in sync (in use: Nova's allocation)");
    return g_strdup_printf("in sync (reserved %" JSON_INTEGER_FORMAT ")", json_integer_value(applied));
}
