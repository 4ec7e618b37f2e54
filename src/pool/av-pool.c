/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the pool in memory: owners and devices, lookups, the
 * journal, and the devices the scan does not bring (mdevs).  Its file,
 * pool.json (strictly loaded, atomically saved) under its lock, is
 * av-pool-store.c, on top of the other files of src/pool; the lifecycle is av-pool-lifecycle.c, the
 * reconciliation with a scan av-pool-reconcile.c, scrub tokens
 * av-pool-token.c. */
#include "config.h"

#include "av-pool-private.h"

#include <string.h>

#include "util/av-error.h"
#include "util/av-names.h"
#include "util/av-json.h"

/* --- owners --------------------------------------------------------------- */

/* A new owner holding copies of @domain_uuid and @domain_name (either may be
 * NULL).  Caller frees with av_owner_free(). */
AvOwner *
av_owner_new(const char *domain_uuid, const char *domain_name)
{
    AvOwner *owner = g_new0(AvOwner, 1);

    owner->domain_uuid = g_strdup(domain_uuid);
    owner->domain_name = g_strdup(domain_name);
    return owner;
}

/* A deep copy of @owner, or NULL when @owner is NULL.  Caller frees. */
AvOwner *
av_owner_copy(const AvOwner *owner)
{
    AvOwner *copy;

    if (!owner)
        return NULL;
    copy = av_owner_new(owner->domain_uuid, owner->domain_name);
    copy->nova_instance = g_strdup(owner->nova_instance);
    copy->nova_project = g_strdup(owner->nova_project);
    copy->nova_user = g_strdup(owner->nova_user);
    return copy;
}

/* Frees @owner and its strings.  NULL is a no-op. */
void
av_owner_free(AvOwner *owner)
{
    if (!owner)
        return;
    g_free(owner->domain_uuid);
    g_free(owner->domain_name);
    g_free(owner->nova_instance);
    g_free(owner->nova_project);
    g_free(owner->nova_user);
    g_free(owner);
}

/* See av-pool-private.h. */
char *
av_owner_describe(const AvOwner *owner)
{
    if (!owner)
        return g_strdup("nobody");
    if (owner->domain_name && owner->domain_uuid)
        return g_strdup_printf("domain '%s' (%s)", owner->domain_name, owner->domain_uuid);
    if (owner->domain_name)
        return g_strdup_printf("domain '%s'", owner->domain_name);
    if (owner->domain_uuid)
        return g_strdup_printf("domain %s", owner->domain_uuid);
    if (owner->nova_instance)
        return g_strdup_printf("Nova instance %s", owner->nova_instance);
    return g_strdup("an unnamed owner");
}

/* See av-pool-private.h. */
gboolean
av_owner_compatible(const AvOwner *a, const AvOwner *b)
{
    if (a->domain_uuid && b->domain_uuid && strcmp(a->domain_uuid, b->domain_uuid) != 0)
        return FALSE;
    if (a->nova_instance && b->nova_instance && strcmp(a->nova_instance, b->nova_instance) != 0)
        return FALSE;
    if (!a->domain_uuid || !b->domain_uuid) {
        if (a->domain_name && b->domain_name && strcmp(a->domain_name, b->domain_name) != 0)
            return FALSE;
    }
    return TRUE;
}

/* See av-pool.h. */
json_t *
av_owner_to_json(const AvOwner *owner)
{
    json_t *obj;

    if (!owner)
        return json_null();
    obj = json_object();
    json_object_set_new(obj, "domain_uuid", av_json_string_or_null(owner->domain_uuid));
    json_object_set_new(obj, "domain_name", av_json_string_or_null(owner->domain_name));
    json_object_set_new(obj, "nova_instance", av_json_string_or_null(owner->nova_instance));
    json_object_set_new(obj, "nova_project", av_json_string_or_null(owner->nova_project));
    json_object_set_new(obj, "nova_user", av_json_string_or_null(owner->nova_user));
    return obj;
}

/* --- devices, states, kinds ---------------------------------------------- */

static const char *const av_state_names[] = {
    [AV_DEVICE_STATE_FREE] = "free",
    [AV_DEVICE_STATE_CLAIMED] = "claimed",
    [AV_DEVICE_STATE_IN_USE] = "in-use",
    [AV_DEVICE_STATE_DIRTY] = "dirty",
    [AV_DEVICE_STATE_SCRUBBING] = "scrubbing",
    [AV_DEVICE_STATE_QUARANTINED] = "quarantined",
    [AV_DEVICE_STATE_MISSING] = "missing",
};

/* The lower-case name of @state ("in-use"); a static string. */
const char *
av_device_state_to_string(AvDeviceState state)
{
    if ((guint)state >= G_N_ELEMENTS(av_state_names))
        return "unknown";
    return av_state_names[state];
}

/* Parses a state name as written by av_device_state_to_string().  Returns
 * FALSE, leaving *ret_state untouched, for anything else. */
gboolean
av_device_state_from_string(const char *s, AvDeviceState *ret_state)
{
    if (!s)
        return FALSE;
    for (guint i = 0; i < G_N_ELEMENTS(av_state_names); i++) {
        if (strcmp(s, av_state_names[i]) == 0) {
            *ret_state = (AvDeviceState)i;
            return TRUE;
        }
    }
    return FALSE;
}

/* "pci", "usb" or "mdev"; a static string. */
const char *
av_device_kind_to_string(AvDeviceKind kind)
{
    switch (kind) {
    case AV_DEVICE_KIND_USB:
        return "usb";
    case AV_DEVICE_KIND_MDEV:
        return "mdev";
    case AV_DEVICE_KIND_PCI:
    default:
        return "pci";
    }
}

/* A new companion holding copies of @address and @original_driver (may be
 * NULL).  Caller frees with av_companion_free(). */
AvCompanion *
av_companion_new(const char *address, const char *original_driver)
{
    AvCompanion *companion = g_new0(AvCompanion, 1);

    companion->address = g_strdup(address);
    companion->original_driver = g_strdup(original_driver);
    return companion;
}

/* Frees @companion.  NULL is a no-op. */
void
av_companion_free(AvCompanion *companion)
{
    if (!companion)
        return;
    g_free(companion->address);
    g_free(companion->original_driver);
    g_free(companion);
}

/* See av-pool.h. */
void
av_pool_device_add_companion(AvPoolDevice *dev, const char *address, const char *original_driver)
{
    for (guint i = 0; i < dev->companions->len; i++) {
        AvCompanion *c = g_ptr_array_index(dev->companions, i);

        if (!g_str_equal(c->address, address))
            continue;
        if (original_driver) {
            g_free(c->original_driver);
            c->original_driver = g_strdup(original_driver);
        }
        return;
    }
    g_ptr_array_add(dev->companions, av_companion_new(address, original_driver));
}

/* See av-pool-private.h. */
gboolean
av_pool_address_is_valid(AvDeviceKind kind, const char *address)
{
    switch (kind) {
    case AV_DEVICE_KIND_PCI:
        return av_pci_address_is_valid(address);
    case AV_DEVICE_KIND_USB:
        return av_usb_bus_path_is_valid(address);
    case AV_DEVICE_KIND_MDEV:
        return av_mdev_parent_name_is_valid(address);
    }
    return FALSE;
}

/* See av-pool-private.h. */
const char *
av_pool_address_form(AvDeviceKind kind)
{
    switch (kind) {
    case AV_DEVICE_KIND_PCI:
        return "PCI address (DDDD:BB:SS.F)";
    case AV_DEVICE_KIND_USB:
        return "USB port address (1-1.2)";
    case AV_DEVICE_KIND_MDEV:
        return "mdev parent name (a PCI address DDDD:BB:SS.F, or a name of /sys/class/mdev_bus such as mtty)";
    }
    return "address";
}

/* See av-pool-private.h. */
gboolean
av_identity_is_mdev(const char *identity)
{
    const char *uuid;

    if (!identity || !g_str_has_prefix(identity, "mdev:"))
        return FALSE;
    uuid = identity + 5;
    return av_uuid_is_valid(uuid);
}

/* See av-pool-private.h. */
AvPoolDevice *
av_pool_device_new(void)
{
    AvPoolDevice *dev = g_new0(AvPoolDevice, 1);

    dev->state = AV_DEVICE_STATE_FREE;
    dev->state_before_missing = AV_DEVICE_STATE_FREE;
    dev->numa_node = -1;
    dev->iommu_group = -1;
    dev->companions = g_ptr_array_new_with_free_func((GDestroyNotify)av_companion_free);
    return dev;
}

/* Frees @dev and everything it holds.  NULL is a no-op. */
void
av_pool_device_free(AvPoolDevice *dev)
{
    if (!dev)
        return;
    g_free(dev->identity);
    g_free(dev->address);
    g_free(dev->profile);
    av_owner_free(dev->owner);
    g_free(dev->reason);
    g_free(dev->reason_before_missing);
    g_free(dev->original_driver);
    g_free(dev->rom_sha256);
    g_free(dev->scrub_token);
    g_free(dev->scrub_domain);
    g_free(dev->in_use_boot_id);
    g_free(dev->match_ids);
    g_free(dev->identity_problem);
    if (dev->last_scrub)
        json_decref(dev->last_scrub);
    av_programmed_free(dev->programmed);
    if (dev->companions)
        g_ptr_array_unref(dev->companions);
    g_free(dev);
}

/* See av-pool-private.h. */
gint64
av_pool_now(void)
{
    return g_get_real_time() / G_USEC_PER_SEC;
}

/* See av-pool.h. */
gboolean
av_rom_sha256_is_valid(const char *hash)
{
    if (!hash)
        return FALSE;
    if (g_str_equal(hash, AV_ROM_NONE))
        return TRUE;
    if (strlen(hash) != 64)
        return FALSE;
    for (const char *p = hash; *p; p++)
        if (!g_ascii_isdigit(*p) && !(*p >= 'a' && *p <= 'f'))
            return FALSE;
    return TRUE;
}

AvProgrammed *
av_programmed_new(const char *sha256, const char *name, const char *by, const char *verified)
{
    AvProgrammed *pr = g_new0(AvProgrammed, 1);

    pr->sha256 = g_strdup(sha256);
    pr->name = g_strdup(name);
    pr->since = g_get_real_time() / G_USEC_PER_SEC;
    pr->by = g_strdup(by);
    pr->verified = g_strdup(verified);
    return pr;
}

void
av_programmed_free(AvProgrammed *pr)
{
    if (!pr)
        return;
    g_free(pr->sha256);
    g_free(pr->name);
    g_free(pr->by);
    g_free(pr->verified);
    g_free(pr);
}

/* --- the pool ------------------------------------------------------------- */

/* See av-pool-private.h. */
int
av_pool_device_cmp(gconstpointer a, gconstpointer b)
{
    const AvPoolDevice *da = *(AvPoolDevice *const *)a;
    const AvPoolDevice *db = *(AvPoolDevice *const *)b;

    return strcmp(da->identity, db->identity);
}

/* Puts @dev into the sorted pool->devices after every device that sorts
 * before it or equal to it: where appending it and sorting (a stable sort)
 * would. */
static void
av_pool_insert_sorted(AvPool *pool, AvPoolDevice *dev)
{
    guint lo = 0, hi = pool->devices->len;

    while (lo < hi) {
        guint mid = lo + (hi - lo) / 2;

        if (av_pool_device_cmp(&pool->devices->pdata[mid], &dev) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    g_ptr_array_insert(pool->devices, (gint)lo, dev);
}

/* See av-pool-private.h: takes over @dev. */
void
av_pool_add_device(AvPool *pool, AvPoolDevice *dev)
{
    av_pool_insert_sorted(pool, dev);
}

/* See av-pool-private.h: copies @identity.  @dev leaves its place and goes
 * in again at its new one. */
void
av_pool_rekey_device(AvPool *pool, AvPoolDevice *dev, const char *identity)
{
    guint at = 0;
    gboolean member = g_ptr_array_find(pool->devices, dev, &at);

    g_return_if_fail(member);
    g_ptr_array_steal_index(pool->devices, at);
    g_free(dev->identity);
    dev->identity = g_strdup(identity);
    av_pool_insert_sorted(pool, dev);
}

/* See av-pool-private.h: frees @dev. */
void
av_pool_remove_device(AvPool *pool, AvPoolDevice *dev)
{
    g_ptr_array_remove(pool->devices, dev);
}

/* The state dir the pool was opened in.  Owned by @pool. */
const char *
av_pool_state_dir(const AvPool *pool)
{
    return pool->state_dir;
}

/* See av-pool.h.  Borrowed: owned by @pool, valid until the next change. */
GPtrArray *
av_pool_devices(const AvPool *pool)
{
    return pool->devices;
}

/* The device whose identity is @identity, or NULL.  Borrowed. */
AvPoolDevice *
av_pool_find(const AvPool *pool, const char *identity)
{
    for (guint i = 0; i < pool->devices->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);

        if (strcmp(dev->identity, identity) == 0)
            return dev;
    }
    return NULL;
}

/* The device of @kind last seen at @address, or NULL.  Borrowed.  A missing
 * device still answers to its last address, unless a present device of the
 * pool holds that address now. */
AvPoolDevice *
av_pool_find_address(const AvPool *pool, AvDeviceKind kind, const char *address)
{
    AvPoolDevice *missing = NULL;

    for (guint i = 0; i < pool->devices->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);

        if (dev->kind != kind || g_strcmp0(dev->address, address) != 0)
            continue;
        if (dev->state != AV_DEVICE_STATE_MISSING)
            return dev;
        if (!missing)
            missing = dev;
    }
    return missing;
}

/* See av-pool.h: the first present device at each address, else the first
 * missing one, as av_pool_find_address() picks.  One pass, last to first,
 * in which a later insert replaces an earlier one; then the missing devices
 * (few) where no present one is. */
GHashTable *
av_pool_pci_index(const AvPool *pool)
{
    GHashTable *index = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GPtrArray) missing = g_ptr_array_new();

    for (guint i = pool->devices->len; i-- > 0;) {
        AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);

        if (dev->kind != AV_DEVICE_KIND_PCI || !dev->address)
            continue;
        if (dev->state == AV_DEVICE_STATE_MISSING)
            g_ptr_array_add(missing, dev);
        else
            g_hash_table_insert(index, dev->address, dev);
    }
    for (guint i = missing->len; i-- > 0;) {
        AvPoolDevice *dev = g_ptr_array_index(missing, i);

        if (!g_hash_table_contains(index, dev->address))
            g_hash_table_insert(index, dev->address, dev);
    }
    return index;
}

/* See av-pool.h.  Requires AV_POOL_WRITE: the chain is only safe under the
 * exclusive lock. */
gboolean
av_pool_journal_append(AvPool *pool, const char *event, json_t *fields, GError **error)
{
    if (pool->mode != AV_POOL_WRITE || !pool->lock) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot write the journal in '%s': the pool was opened for reading only",
                    pool->state_dir);
        return FALSE;
    }
    return av_journal_append(&pool->journal, event, fields, error);
}

/* See av-pool-private.h. */
gboolean
av_pool_journal_device(AvPool *pool, const char *event, const AvPoolDevice *dev,
                       json_t *extra, GError **error)
{
    g_autoptr(json_t) fields = extra ? json_deep_copy(extra) : json_object();

    json_object_set_new(fields, "identity", json_string(dev->identity));
    json_object_set_new(fields, "kind", json_string(av_device_kind_to_string(dev->kind)));
    json_object_set_new(fields, "address", av_json_string_or_null(dev->address));
    json_object_set_new(fields, "profile", av_json_string_or_null(dev->profile));
    json_object_set_new(fields, "state", json_string(av_device_state_to_string(dev->state)));
    return av_pool_journal_append(pool, event, fields, error);
}

/* --- devices the scan does not bring: mdevs ---------------------------------- */

/* See av-pool.h.  The device gets numa_node and iommu_group -1 (the caller
 * sets them), first_seen, last_seen and state_since now.  The "added" entry
 * is journalled before the device joins the pool; on failure the pool is
 * unchanged. */
AvPoolDevice *
av_pool_add(AvPool *pool, AvDeviceKind kind, const char *identity, const char *address,
            const char *profile, AvDeviceState state, const AvOwner *owner, GError **error)
{
    g_autoptr(AvPoolDevice) dev = NULL;
    g_autoptr(json_t) extra = json_object();
    AvPoolDevice *borrowed;

    g_return_val_if_fail(identity && *identity, NULL);
    if (pool->mode != AV_POOL_WRITE) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot add to the pool in '%s': it was opened for reading only", pool->state_dir);
        return NULL;
    }
    if (av_pool_find(pool, identity)) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE, "device '%s' is already in the pool", identity);
        return NULL;
    }
    if (kind == AV_DEVICE_KIND_MDEV && !av_identity_is_mdev(identity)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "'%s' is not an mdev identity ('mdev:' and a lower-case UUID)", identity);
        return NULL;
    }
    if (address && !av_pool_address_is_valid(kind, address)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "'%s' is not a %s", address,
                    av_pool_address_form(kind));
        return NULL;
    }
    if (!owner && (state == AV_DEVICE_STATE_CLAIMED || state == AV_DEVICE_STATE_IN_USE)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "cannot add device '%s' as %s without an owner", identity,
                    av_device_state_to_string(state));
        return NULL;
    }
    if (state == AV_DEVICE_STATE_MISSING) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE, "cannot add device '%s' as missing", identity);
        return NULL;
    }
    dev = av_pool_device_new();
    dev->identity = g_strdup(identity);
    dev->kind = kind;
    dev->address = g_strdup(address);
    dev->profile = g_strdup(profile);
    dev->state = state;
    dev->owner = av_owner_copy(owner);
    if (state == AV_DEVICE_STATE_IN_USE)
        dev->in_use_boot_id = g_strdup(pool->boot_id);
    dev->state_since = dev->first_seen = dev->last_seen = dev->failures_since = av_pool_now();
    json_object_set_new(extra, "owner", av_owner_to_json(dev->owner));
    if (!av_pool_journal_device(pool, "added", dev, extra, error))
        return NULL;
    borrowed = dev;
    av_pool_add_device(pool, g_steal_pointer(&dev));
    return borrowed;
}

/* See av-pool.h. */
gboolean
av_pool_remove(AvPool *pool, const char *identity, const char *reason, GError **error)
{
    g_autoptr(json_t) extra = json_object();
    AvPoolDevice *dev;

    if (pool->mode != AV_POOL_WRITE) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot remove from the pool in '%s': it was opened for reading only", pool->state_dir);
        return FALSE;
    }
    dev = av_pool_find(pool, identity);
    if (!dev) {
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND, "device '%s' is not in the pool", identity);
        return FALSE;
    }
    json_object_set_new(extra, "reason", av_json_string_or_null(reason));
    if (!av_pool_journal_device(pool, "removed", dev, extra, error))
        return FALSE;
    av_pool_remove_device(pool, dev);
    return TRUE;
}

/* See av-pool.h. */
GPtrArray *
av_pool_find_owned(const AvPool *pool, const char *domain_uuid)
{
    GPtrArray *owned = g_ptr_array_new();

    if (!domain_uuid)
        return owned;
    for (guint i = 0; i < pool->devices->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);

        if (dev->owner && g_strcmp0(dev->owner->domain_uuid, domain_uuid) == 0)
            g_ptr_array_add(owned, dev);
    }
    return owned;
}
