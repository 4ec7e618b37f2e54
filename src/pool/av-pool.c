/* accelvirt: the pool of managed devices: its file, its lock, the lifecycle
 * transitions and the reconciliation with a scan. */
#include "config.h"

#include "av-pool-private.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/av-error.h"
#include "util/av-names.h"
#include "util/av-json.h"
#include "vfio/av-vfio.h"

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

/* "domain 'vm1' (UUID)", "domain UUID", "Nova instance UUID" or "nobody". */
static char *
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

/* TRUE when @a and @b can be the same holder: no identifier that both carry
 * differs. */
static gboolean
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

/* TRUE when @address is what a device of @kind records: a PCI address, a
 * USB bus path, or for an mdev its parent's name (av_mdev_parent_name_is_valid():
 * a PCI address or a name such as "mtty"). */
static gboolean
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

/* The form av_pool_address_is_valid() expects, for messages. */
static const char *
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

/* TRUE when @identity is "mdev:" and a canonical lower-case UUID. */
static gboolean
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
    if (dev->companions)
        g_ptr_array_unref(dev->companions);
    g_free(dev);
}

/* @dev as the JSON object stored in pool.json's "devices": every field, in a
 * fixed order.  Caller owns the reference. */
json_t *
av_pool_device_to_json(const AvPoolDevice *dev)
{
    json_t *obj = json_object();
    gboolean missing = dev->state == AV_DEVICE_STATE_MISSING;

    json_object_set_new(obj, "identity", json_string(dev->identity));
    json_object_set_new(obj, "kind", json_string(av_device_kind_to_string(dev->kind)));
    json_object_set_new(obj, "address", av_json_string_or_null(dev->address));
    json_object_set_new(obj, "profile", av_json_string_or_null(dev->profile));
    json_object_set_new(obj, "state", json_string(av_device_state_to_string(dev->state)));
    json_object_set_new(obj, "state_before_missing",
                        missing ? json_string(av_device_state_to_string(dev->state_before_missing)) : json_null());
    json_object_set_new(obj, "owner", av_owner_to_json(dev->owner));
    json_object_set_new(obj, "state_since", json_integer(dev->state_since));
    json_object_set_new(obj, "first_seen", json_integer(dev->first_seen));
    json_object_set_new(obj, "last_seen", json_integer(dev->last_seen));
    json_object_set_new(obj, "claim_expires", json_integer(dev->claim_expires));
    json_object_set_new(obj, "reason", av_json_string_or_null(dev->reason));
    json_object_set_new(obj, "reason_before_missing",
                        av_json_string_or_null(missing ? dev->reason_before_missing : NULL));
    json_object_set_new(obj, "original_driver", av_json_string_or_null(dev->original_driver));
    json_object_set_new(obj, "numa_node", json_integer(dev->numa_node));
    json_object_set_new(obj, "iommu_group", json_integer(dev->iommu_group));
    /* Written only when they say something, so that the pool files of
     * PCI and USB devices without companions keep their form. */
    if (dev->companions && dev->companions->len > 0) {
        json_t *array = json_array();

        for (guint i = 0; i < dev->companions->len; i++) {
            const AvCompanion *c = g_ptr_array_index(dev->companions, i);
            json_t *item = json_object();

            json_object_set_new(item, "address", json_string(c->address));
            json_object_set_new(item, "original_driver", av_json_string_or_null(c->original_driver));
            json_array_append_new(array, item);
        }
        json_object_set_new(obj, "companions", array);
    }
    if (dev->kind == AV_DEVICE_KIND_MDEV)
        json_object_set_new(obj, "created", json_boolean(dev->created));
    if (dev->rom_sha256)
        json_object_set_new(obj, "rom_sha256", json_string(dev->rom_sha256));
    if (dev->scrub_token)
        json_object_set_new(obj, "scrub_token", json_string(dev->scrub_token));
    if (dev->scrub_domain)
        json_object_set_new(obj, "scrub_domain", json_string(dev->scrub_domain));
    return obj;
}

/* The whole pool as written to pool.json: {"version": 1, "devices": [...]},
 * devices sorted by identity.  Caller owns the reference. */
json_t *
av_pool_to_json(const AvPool *pool)
{
    json_t *obj = json_object();
    json_t *devices = json_array();

    for (guint i = 0; i < pool->devices->len; i++)
        json_array_append_new(devices, av_pool_device_to_json(g_ptr_array_index(pool->devices, i)));
    json_object_set_new(obj, "version", json_integer(AV_POOL_VERSION));
    json_object_set_new(obj, "devices", devices);
    return obj;
}

/* See av-pool-private.h. */
gint64
av_pool_now(void)
{
    return g_get_real_time() / G_USEC_PER_SEC;
}

/* --- loading pool.json ----------------------------------------------------- */

typedef struct {
    const char *path;
    const char *data;
    gsize len;
} AvPoolLoad;

static const char av_corrupt_advice[] = "move it away or repair it; accelvirt will not overwrite it";

/* Sets an AV_ERROR_CORRUPT_STATE error about the value at @jpath. */
static gboolean G_GNUC_PRINTF(4, 5)
av_pool_load_fail(const AvPoolLoad *ld, GError **error, const char *jpath, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    int line = 1, column = 1;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (!av_json_locate(ld->data, ld->len, jpath, &line, &column)) {
        line = 1;
        column = 1;
    }
    g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                "the pool file '%s' is corrupt at line %d, column %d: %s: %s; %s",
                ld->path, line, column, *jpath ? jpath : "(top level)", msg, av_corrupt_advice);
    return FALSE;
}

/* Checks that @obj has exactly the keys @keys (NULL-terminated), plus any
 * of @optional (NULL-terminated, or NULL for none). */
static gboolean
av_pool_load_keys_opt(const AvPoolLoad *ld, json_t *obj, const char *jpath,
                      const char *const *keys, const char *const *optional, GError **error)
{
    const char *key;
    json_t *value;

    json_object_foreach(obj, key, value) {
        if (!g_strv_contains(keys, key) && !(optional && g_strv_contains(optional, key))) {
            g_autofree char *sub = *jpath ? g_strdup_printf("%s/%s", jpath, key) : g_strdup(key);
            return av_pool_load_fail(ld, error, sub, "unknown member '%s'", key);
        }
    }
    for (guint i = 0; keys[i]; i++) {
        if (!json_object_get(obj, keys[i]))
            return av_pool_load_fail(ld, error, jpath, "the member '%s' is missing", keys[i]);
    }
    return TRUE;
}

/* Checks that @obj has exactly the keys @keys (NULL-terminated). */
static gboolean
av_pool_load_keys(const AvPoolLoad *ld, json_t *obj, const char *jpath,
                  const char *const *keys, GError **error)
{
    return av_pool_load_keys_opt(ld, obj, jpath, keys, NULL, error);
}

/* Reads the string (or, with @nullable, null) member @key of @obj. */
static gboolean
av_pool_load_string(const AvPoolLoad *ld, json_t *obj, const char *jpath, const char *key,
                    gboolean nullable, char **ret_value, GError **error)
{
    json_t *v = json_object_get(obj, key);
    g_autofree char *sub = g_strdup_printf("%s/%s", jpath, key);

    if (json_is_null(v) && nullable) {
        *ret_value = NULL;
        return TRUE;
    }
    if (!json_is_string(v))
        return av_pool_load_fail(ld, error, sub, "expected a string%s", nullable ? " or null" : "");
    if (json_string_length(v) == 0 || strlen(json_string_value(v)) != json_string_length(v))
        return av_pool_load_fail(ld, error, sub, "expected a non-empty string without NUL");
    *ret_value = g_strdup(json_string_value(v));
    return TRUE;
}

static gboolean
av_pool_load_int(const AvPoolLoad *ld, json_t *obj, const char *jpath, const char *key,
                 gint64 min, gint64 max, gint64 *ret_value, GError **error)
{
    json_t *v = json_object_get(obj, key);
    g_autofree char *sub = g_strdup_printf("%s/%s", jpath, key);

    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return av_pool_load_fail(ld, error, sub, "expected an integer from %" G_GINT64_FORMAT
                                 " to %" G_GINT64_FORMAT, min, max);
    *ret_value = json_integer_value(v);
    return TRUE;
}

static gboolean
av_pool_load_state(const AvPoolLoad *ld, json_t *obj, const char *jpath, const char *key,
                   AvDeviceState *ret_state, GError **error)
{
    json_t *v = json_object_get(obj, key);
    g_autofree char *sub = g_strdup_printf("%s/%s", jpath, key);

    if (!json_is_string(v) || !av_device_state_from_string(json_string_value(v), ret_state))
        return av_pool_load_fail(ld, error, sub, "expected a state (free, claimed, in-use, dirty, "
                                 "scrubbing, quarantined, missing)");
    return TRUE;
}

static gboolean
av_pool_load_owner(const AvPoolLoad *ld, json_t *v, const char *jpath, AvOwner **ret_owner, GError **error)
{
    static const char *const keys[] = {
        "domain_uuid", "domain_name", "nova_instance", "nova_project", "nova_user", NULL
    };
    g_autoptr(AvOwner) owner = NULL;

    if (json_is_null(v)) {
        *ret_owner = NULL;
        return TRUE;
    }
    if (!json_is_object(v))
        return av_pool_load_fail(ld, error, jpath, "expected an object or null");
    if (!av_pool_load_keys(ld, v, jpath, keys, error))
        return FALSE;
    owner = g_new0(AvOwner, 1);
    if (!av_pool_load_string(ld, v, jpath, "domain_uuid", TRUE, &owner->domain_uuid, error) ||
        !av_pool_load_string(ld, v, jpath, "domain_name", TRUE, &owner->domain_name, error) ||
        !av_pool_load_string(ld, v, jpath, "nova_instance", TRUE, &owner->nova_instance, error) ||
        !av_pool_load_string(ld, v, jpath, "nova_project", TRUE, &owner->nova_project, error) ||
        !av_pool_load_string(ld, v, jpath, "nova_user", TRUE, &owner->nova_user, error))
        return FALSE;
    *ret_owner = g_steal_pointer(&owner);
    return TRUE;
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

/* The optional members of a device: "companions" (a list of {"address",
 * "original_driver"}), "created" (a boolean, mdevs only) and "rom_sha256"
 * (PCI only: "none" or 64 lower-case hex digits). */
static gboolean
av_pool_load_extras(const AvPoolLoad *ld, json_t *obj, const char *jpath, AvPoolDevice *dev,
                    GError **error)
{
    static const char *const keys[] = { "address", "original_driver", NULL };
    json_t *companions = json_object_get(obj, "companions");
    json_t *created = json_object_get(obj, "created");
    json_t *rom = json_object_get(obj, "rom_sha256");

    if (rom) {
        g_autofree char *sub = g_strdup_printf("%s/rom_sha256", jpath);

        if (dev->kind != AV_DEVICE_KIND_PCI)
            return av_pool_load_fail(ld, error, sub, "only a PCI device has 'rom_sha256'");
        if (!json_is_string(rom) || !av_rom_sha256_is_valid(json_string_value(rom)))
            return av_pool_load_fail(ld, error, sub, "expected \"none\" or 64 lower-case hex digits");
        dev->rom_sha256 = g_strdup(json_string_value(rom));
    }
    if (created) {
        g_autofree char *sub = g_strdup_printf("%s/created", jpath);

        if (dev->kind != AV_DEVICE_KIND_MDEV)
            return av_pool_load_fail(ld, error, sub, "only an mdev has 'created'");
        if (!json_is_boolean(created))
            return av_pool_load_fail(ld, error, sub, "expected true or false");
        dev->created = json_is_true(created);
    }
    if (!companions)
        return TRUE;
    if (!json_is_array(companions)) {
        g_autofree char *sub = g_strdup_printf("%s/companions", jpath);
        return av_pool_load_fail(ld, error, sub, "expected an array");
    }
    for (guint i = 0; i < json_array_size(companions); i++) {
        json_t *item = json_array_get(companions, i);
        g_autofree char *sub = g_strdup_printf("%s/companions/%u", jpath, i);
        g_autoptr(AvCompanion) c = g_new0(AvCompanion, 1);

        if (!json_is_object(item))
            return av_pool_load_fail(ld, error, sub, "expected an object");
        if (!av_pool_load_keys(ld, item, sub, keys, error) ||
            !av_pool_load_string(ld, item, sub, "address", FALSE, &c->address, error) ||
            !av_pool_load_string(ld, item, sub, "original_driver", TRUE, &c->original_driver, error))
            return FALSE;
        if (!av_pci_address_is_valid(c->address)) {
            g_autofree char *asub = g_strdup_printf("%s/address", sub);
            return av_pool_load_fail(ld, error, asub, "'%s' is not a PCI address (DDDD:BB:SS.F)", c->address);
        }
        g_ptr_array_add(dev->companions, g_steal_pointer(&c));
    }
    return TRUE;
}

/* The optional "scrub_token" (AV_SCRUB_TOKEN_LEN lower-case hex digits)
 * and "scrub_domain" (a lower-case UUID), on a device a scrub runs on
 * (scrubbing or quarantined, or missing from either); a token only with
 * its domain. */
static gboolean
av_pool_load_scrub(const AvPoolLoad *ld, json_t *obj, const char *jpath, AvPoolDevice *dev, GError **error)
{
    json_t *token = json_object_get(obj, "scrub_token");
    json_t *domain = json_object_get(obj, "scrub_domain");
    AvDeviceState state = dev->state == AV_DEVICE_STATE_MISSING ? dev->state_before_missing : dev->state;

    if (token) {
        g_autofree char *sub = g_strdup_printf("%s/scrub_token", jpath);

        if (!json_is_string(token) || !av_scrub_token_is_valid(json_string_value(token)))
            return av_pool_load_fail(ld, error, sub, "expected %d lower-case hex digits", AV_SCRUB_TOKEN_LEN);
        if (!domain)
            return av_pool_load_fail(ld, error, sub, "a scrub token needs its 'scrub_domain'");
        dev->scrub_token = g_strdup(json_string_value(token));
    }
    if (!domain)
        return TRUE;
    {
        g_autofree char *sub = g_strdup_printf("%s/scrub_domain", jpath);

        if (!json_is_string(domain) || !av_uuid_is_valid(json_string_value(domain)))
            return av_pool_load_fail(ld, error, sub, "expected a lower-case UUID");
        if (state != AV_DEVICE_STATE_SCRUBBING && state != AV_DEVICE_STATE_QUARANTINED)
            return av_pool_load_fail(ld, error, sub, "only a device being scrubbed (scrubbing or quarantined) "
                                     "has a scrub domain");
        dev->scrub_domain = g_strdup(json_string_value(domain));
    }
    return TRUE;
}

static AvPoolDevice *
av_pool_load_device(const AvPoolLoad *ld, json_t *obj, guint index, GError **error)
{
    static const char *const keys[] = {
        "identity", "kind", "address", "profile", "state", "state_before_missing", "owner",
        "state_since", "first_seen", "last_seen", "claim_expires", "reason",
        "reason_before_missing", "original_driver", "numa_node", "iommu_group", NULL
    };
    static const char *const optional[] = { "companions", "created", "rom_sha256", "scrub_token", "scrub_domain",
                                            NULL };
    g_autofree char *jpath = g_strdup_printf("devices/%u", index);
    g_autofree char *owner_path = g_strdup_printf("devices/%u/owner", index);
    g_autofree char *kind = NULL;
    g_autoptr(AvPoolDevice) dev = av_pool_device_new();
    gint64 numa = -1, group = -1;
    json_t *before;

    if (!json_is_object(obj))
        return av_pool_load_fail(ld, error, jpath, "expected a device object"), NULL;
    if (!av_pool_load_keys_opt(ld, obj, jpath, keys, optional, error))
        return NULL;
    if (!av_pool_load_string(ld, obj, jpath, "identity", FALSE, &dev->identity, error) ||
        !av_pool_load_string(ld, obj, jpath, "kind", FALSE, &kind, error))
        return NULL;
    if (strcmp(kind, "pci") == 0) {
        dev->kind = AV_DEVICE_KIND_PCI;
    } else if (strcmp(kind, "usb") == 0) {
        dev->kind = AV_DEVICE_KIND_USB;
    } else if (strcmp(kind, "mdev") == 0) {
        dev->kind = AV_DEVICE_KIND_MDEV;
    } else {
        g_autofree char *sub = g_strdup_printf("%s/kind", jpath);
        return av_pool_load_fail(ld, error, sub, "unknown kind '%s' (pci, usb or mdev)", kind), NULL;
    }
    if (dev->kind == AV_DEVICE_KIND_MDEV && !av_identity_is_mdev(dev->identity)) {
        g_autofree char *sub = g_strdup_printf("%s/identity", jpath);
        return av_pool_load_fail(ld, error, sub, "the identity of an mdev must be 'mdev:' and a "
                                 "lower-case UUID, not '%s'", dev->identity), NULL;
    }
    if (!av_pool_load_string(ld, obj, jpath, "address", TRUE, &dev->address, error))
        return NULL;
    /* An mdev's address is its parent's name in /sys/class/mdev_bus: the
     * PCI address of a PCI parent, or a name such as "mtty". */
    if (dev->address && !av_pool_address_is_valid(dev->kind, dev->address)) {
        g_autofree char *sub = g_strdup_printf("%s/address", jpath);
        return av_pool_load_fail(ld, error, sub, "'%s' is not a %s", dev->address,
                                 av_pool_address_form(dev->kind)), NULL;
    }
    if (!av_pool_load_extras(ld, obj, jpath, dev, error))
        return NULL;
    if (
        !av_pool_load_string(ld, obj, jpath, "profile", TRUE, &dev->profile, error) ||
        !av_pool_load_state(ld, obj, jpath, "state", &dev->state, error) ||
        !av_pool_load_owner(ld, json_object_get(obj, "owner"), owner_path, &dev->owner, error))
        return NULL;
    before = json_object_get(obj, "state_before_missing");
    if (dev->state == AV_DEVICE_STATE_MISSING) {
        if (!av_pool_load_state(ld, obj, jpath, "state_before_missing", &dev->state_before_missing, error))
            return NULL;
        if (dev->state_before_missing == AV_DEVICE_STATE_MISSING) {
            g_autofree char *sub = g_strdup_printf("%s/state_before_missing", jpath);
            return av_pool_load_fail(ld, error, sub, "a missing device cannot have been missing before"), NULL;
        }
    } else if (!json_is_null(before)) {
        g_autofree char *sub = g_strdup_printf("%s/state_before_missing", jpath);
        return av_pool_load_fail(ld, error, sub, "must be null unless the state is missing"), NULL;
    }
    if (!av_pool_load_int(ld, obj, jpath, "state_since", 0, G_MAXINT64, &dev->state_since, error) ||
        !av_pool_load_int(ld, obj, jpath, "first_seen", 0, G_MAXINT64, &dev->first_seen, error) ||
        !av_pool_load_int(ld, obj, jpath, "last_seen", 0, G_MAXINT64, &dev->last_seen, error) ||
        !av_pool_load_int(ld, obj, jpath, "claim_expires", 0, G_MAXINT64, &dev->claim_expires, error) ||
        !av_pool_load_string(ld, obj, jpath, "reason", TRUE, &dev->reason, error) ||
        !av_pool_load_string(ld, obj, jpath, "reason_before_missing", TRUE, &dev->reason_before_missing, error) ||
        !av_pool_load_string(ld, obj, jpath, "original_driver", TRUE, &dev->original_driver, error) ||
        !av_pool_load_int(ld, obj, jpath, "numa_node", -1, G_MAXINT, &numa, error) ||
        !av_pool_load_int(ld, obj, jpath, "iommu_group", -1, G_MAXINT, &group, error))
        return NULL;
    dev->numa_node = (int)numa;
    dev->iommu_group = (int)group;
    if (dev->state != AV_DEVICE_STATE_MISSING && dev->reason_before_missing) {
        g_autofree char *sub = g_strdup_printf("%s/reason_before_missing", jpath);
        return av_pool_load_fail(ld, error, sub, "must be null unless the state is missing"), NULL;
    }
    if (dev->claim_expires != 0 && dev->state != AV_DEVICE_STATE_CLAIMED &&
        !(dev->state == AV_DEVICE_STATE_MISSING && dev->state_before_missing == AV_DEVICE_STATE_CLAIMED)) {
        g_autofree char *sub = g_strdup_printf("%s/claim_expires", jpath);
        return av_pool_load_fail(ld, error, sub, "must be 0 unless the device is claimed"), NULL;
    }
    if (!dev->owner && (dev->state == AV_DEVICE_STATE_CLAIMED || dev->state == AV_DEVICE_STATE_IN_USE)) {
        g_autofree char *sub = g_strdup_printf("%s/owner", jpath);
        return av_pool_load_fail(ld, error, sub, "a %s device must have an owner",
                                 av_device_state_to_string(dev->state)), NULL;
    }
    if (!av_pool_load_scrub(ld, obj, jpath, dev, error))
        return NULL;
    return g_steal_pointer(&dev);
}

/* Parses the contents of pool.json into @ret_devices (a new array). */
static gboolean
av_pool_load_data(const char *path, const char *data, gsize len, GPtrArray **ret_devices, GError **error)
{
    static const char *const keys[] = { "version", "devices", NULL };
    AvPoolLoad ld = { path, data, len };
    g_autoptr(GPtrArray) devices = g_ptr_array_new_with_free_func((GDestroyNotify)av_pool_device_free);
    g_autoptr(GHashTable) identities = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(json_t) root = NULL;
    json_error_t jerr;
    json_t *version, *array;

    root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "the pool file '%s' is corrupt at line %d, column %d: %s; %s",
                    path, jerr.line, jerr.column, jerr.text, av_corrupt_advice);
        return FALSE;
    }
    if (!json_is_object(root))
        return av_pool_load_fail(&ld, error, "", "expected an object");
    version = json_object_get(root, "version");
    if (!json_is_integer(version))
        return av_pool_load_fail(&ld, error, json_object_get(root, "version") ? "version" : "",
                                 "expected an integer member \"version\"");
    if (json_integer_value(version) != AV_POOL_VERSION)
        return av_pool_load_fail(&ld, error, "version", "unknown version %" JSON_INTEGER_FORMAT
                                 " (this accelvirt reads version %d)",
                                 json_integer_value(version), AV_POOL_VERSION);
    if (!av_pool_load_keys(&ld, root, "", keys, error))
        return FALSE;
    array = json_object_get(root, "devices");
    if (!json_is_array(array))
        return av_pool_load_fail(&ld, error, "devices", "expected an array");
    for (guint i = 0; i < json_array_size(array); i++) {
        AvPoolDevice *dev = av_pool_load_device(&ld, json_array_get(array, i), i, error);

        if (!dev)
            return FALSE;
        g_ptr_array_add(devices, dev);
        if (!g_hash_table_add(identities, dev->identity)) {
            g_autofree char *sub = g_strdup_printf("devices/%u/identity", i);
            return av_pool_load_fail(&ld, error, sub, "the identity '%s' appears twice", dev->identity);
        }
    }
    *ret_devices = g_steal_pointer(&devices);
    return TRUE;
}

/* --- the pool ------------------------------------------------------------- */

static int
av_pool_device_cmp(gconstpointer a, gconstpointer b)
{
    const AvPoolDevice *da = *(AvPoolDevice *const *)a;
    const AvPoolDevice *db = *(AvPoolDevice *const *)b;

    return strcmp(da->identity, db->identity);
}

/* See av-pool-private.h: takes over @dev. */
void
av_pool_add_device(AvPool *pool, AvPoolDevice *dev)
{
    g_ptr_array_add(pool->devices, dev);
    g_ptr_array_sort(pool->devices, av_pool_device_cmp);
}

/* See av-pool-private.h: frees @dev. */
void
av_pool_remove_device(AvPool *pool, AvPoolDevice *dev)
{
    g_ptr_array_remove(pool->devices, dev);
}

/* Removes the "pool.json.tmp.*" files a writer killed mid-write left.  Only
 * called with the exclusive lock held, so no live writer owns one. */
static void
av_pool_remove_stale_temps(AvPool *pool)
{
    g_autoptr(GDir) dir = g_dir_open(pool->state_dir, 0, NULL);
    const char *name;

    if (!dir)
        return;
    while ((name = g_dir_read_name(dir))) {
        g_autofree char *path = NULL;

        if (!g_str_has_prefix(name, AV_POOL_FILE ".tmp."))
            continue;
        path = g_build_filename(pool->state_dir, name, NULL);
        if (unlink(path) == 0)
            g_debug("removed '%s', left by a writer that did not finish", path);
    }
}

static AvPool *
av_pool_new(const char *state_dir, AvPoolMode mode)
{
    AvPool *pool = g_new0(AvPool, 1);

    pool->state_dir = g_strdup(state_dir);
    pool->pool_path = g_build_filename(state_dir, AV_POOL_FILE, NULL);
    pool->lock_path = g_build_filename(state_dir, AV_POOL_LOCK_FILE, NULL);
    pool->journal_path = g_build_filename(state_dir, AV_POOL_JOURNAL_FILE, NULL);
    pool->mode = mode;
    pool->devices = g_ptr_array_new_with_free_func((GDestroyNotify)av_pool_device_free);
    pool->journal_prev = g_strdup("");
    return pool;
}

/* A writer trusts what it finds in the state dir (it replays claims from
 * pool.json and hands devices out by them), so the dir and pool.json must be
 * the caller's own and writable by nobody else.  @path was stat()ed (the dir)
 * or fstat()ed (pool.json, opened without following a symlink) into @st. */
static gboolean
av_pool_check_owner(const char *what, const char *path, const struct stat *st, GError **error)
{
    uid_t me = geteuid();

    if (st->st_uid != me) {
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "refusing to use the %s '%s': it is owned by uid %u, not by uid %u that runs "
                    "accelvirt; chown it to uid %u (or move it away)",
                    what, path, (guint)st->st_uid, (guint)me, (guint)me);
        return FALSE;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "refusing to use the %s '%s': it is writable by %s (mode %04o); "
                    "chmod go-w it (or move it away)",
                    what, path, (st->st_mode & S_IWOTH) ? "everyone" : "its group",
                    (guint)(st->st_mode & 07777));
        return FALSE;
    }
    return TRUE;
}

/* Reads pool.json into *ret_data.  A writer opens it without following a
 * symlink and checks its owner and mode (av_pool_check_owner()).  Returns
 * 0 with *ret_data set, -ENOENT when there is none, or -1 with @error set. */
static int
av_pool_read_file(AvPool *pool, char **ret_data, gsize *ret_len, GError **error)
{
    struct stat st;
    int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    int fd, r;

    if (pool->mode == AV_POOL_WRITE)
        flags |= O_NOFOLLOW;
    fd = open(pool->pool_path, flags);
    if (fd < 0) {
        int e = errno;

        if (e == ENOENT)
            return -ENOENT;
        if (e == ELOOP && pool->mode == AV_POOL_WRITE) {
            g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                        "refusing to use the pool file '%s': it is a symbolic link; replace it "
                        "with the file itself (owned by uid %u, chmod 0600)",
                        pool->pool_path, (guint)geteuid());
            return -1;
        }
        av_error_errno(error, -e, "cannot read the pool file '%s'", pool->pool_path);
        return -1;
    }
    if (fstat(fd, &st) < 0) {
        av_error_errno(error, -errno, "cannot read the pool file '%s'", pool->pool_path);
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        g_set_error(error, AV_ERROR, pool->mode == AV_POOL_WRITE ? AV_ERROR_UNSAFE : AV_ERROR_IO,
                    "refusing to read the pool file '%s': it is not a regular file", pool->pool_path);
        close(fd);
        return -1;
    }
    if (pool->mode == AV_POOL_WRITE && !av_pool_check_owner("pool file", pool->pool_path, &st, error)) {
        close(fd);
        return -1;
    }
    r = av_file_read_all(fd, ret_data, ret_len);
    close(fd);
    if (r < 0) {
        av_error_errno(error, r, "cannot read the pool file '%s'", pool->pool_path);
        return -1;
    }
    return 0;
}

/* See av-pool.h.  A read of a state dir that does not exist gives an empty
 * pool and creates nothing (no lock is then held: there is nothing to
 * protect).  A writer creates the dir (0700), refuses (AV_ERROR_UNSAFE) a
 * dir or pool.json that another user owns or that its group or everyone may
 * write, and a pool.json that is a symbolic link; then it takes the
 * exclusive lock and removes stale temporary files.  Caller frees the pool
 * with av_pool_free(). */
AvPool *
av_pool_open(const char *state_dir, AvPoolMode mode, int timeout_ms, GError **error)
{
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GPtrArray) devices = NULL;
    g_autofree char *data = NULL;
    gsize len = 0;
    int r;

    g_return_val_if_fail(state_dir && *state_dir, NULL);
    pool = av_pool_new(state_dir, mode);
    if (mode == AV_POOL_READ) {
        if (!g_file_test(state_dir, G_FILE_TEST_EXISTS))
            return g_steal_pointer(&pool);
        pool->lock = av_lock_take(pool->lock_path, AV_LOCK_SHARED, timeout_ms, error);
    } else {
        struct stat st;

        if (!av_file_ensure_dir(state_dir, 0700, error))
            return NULL;
        /* Checked before the lock file is made in it. */
        if (stat(state_dir, &st) < 0) {
            av_error_errno(error, -errno, "cannot examine the state dir '%s'", state_dir);
            return NULL;
        }
        if (!S_ISDIR(st.st_mode)) {
            g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                        "refusing to use the state dir '%s': it is not a directory", state_dir);
            return NULL;
        }
        if (!av_pool_check_owner("state dir", state_dir, &st, error))
            return NULL;
        pool->lock = av_lock_take(pool->lock_path, AV_LOCK_EXCLUSIVE, timeout_ms, error);
    }
    if (!pool->lock)
        return NULL;
    if (mode == AV_POOL_WRITE) {
        av_pool_remove_stale_temps(pool);
        if (!av_journal_prepare(pool, error))
            return NULL;
    }

    r = av_pool_read_file(pool, &data, &len, error);
    if (r == -ENOENT)
        return g_steal_pointer(&pool);
    if (r < 0)
        return NULL;
    if (!av_pool_load_data(pool->pool_path, data, len, &devices, error))
        return NULL;
    g_ptr_array_extend_and_steal(pool->devices, g_steal_pointer(&devices));
    g_ptr_array_sort(pool->devices, av_pool_device_cmp);
    return g_steal_pointer(&pool);
}

/* Releases the lock and frees @pool without saving.  NULL is a no-op. */
void
av_pool_free(AvPool *pool)
{
    if (!pool)
        return;
    av_lock_release(pool->lock);
    g_ptr_array_unref(pool->devices);
    g_free(pool->state_dir);
    g_free(pool->pool_path);
    g_free(pool->lock_path);
    g_free(pool->journal_path);
    g_free(pool->journal_prev);
    g_free(pool);
}

/* See av-pool.h: pool.json (mode 0600) via av_file_write_atomic().  Refused
 * with AV_ERROR_FAILED for a pool opened with AV_POOL_READ. */
gboolean
av_pool_save(AvPool *pool, GError **error)
{
    g_autoptr(json_t) json = NULL;
    g_autofree char *text = NULL;

    if (pool->mode != AV_POOL_WRITE || !pool->lock) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot save the pool in '%s': it was opened for reading only", pool->state_dir);
        return FALSE;
    }
    json = av_pool_to_json(pool);
    text = av_json_dump_pretty(json);
    if (!text) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot serialise the pool of '%s'", pool->state_dir);
        return FALSE;
    }
    return av_file_write_atomic(pool->pool_path, text, strlen(text), 0600, error);
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

static gboolean
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

/* The transition behind av_pool_transition() and reconciliation: checks,
 * journals @event (with the members of @extra, borrowed, if not NULL), then
 * changes @dev. */
static gboolean
av_pool_transition_do(AvPool *pool, AvPoolDevice *dev, AvDeviceState to, const AvOwner *owner,
                      const char *reason, const char *event, json_t *extra, gboolean checked,
                      GError **error);

static gboolean
av_pool_transition_event(AvPool *pool, AvPoolDevice *dev, AvDeviceState to, const AvOwner *owner,
                         const char *reason, const char *event, json_t *extra, GError **error)
{
    return av_pool_transition_do(pool, dev, to, owner, reason, event, extra, FALSE, error);
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

    if (!checked && !av_transition_allowed(dev, to))
        return av_transition_fail(dev, to, error);

    /* The owner after the move. */
    if (to == AV_DEVICE_STATE_FREE) {
        new_owner = NULL;
    } else if (from == AV_DEVICE_STATE_MISSING || to == AV_DEVICE_STATE_MISSING || !owner) {
        new_owner = av_owner_copy(dev->owner);
    } else {
        if (dev->owner && !av_owner_compatible(dev->owner, owner)) {
            g_autofree char *held = av_owner_describe(dev->owner);
            g_autofree char *want = av_owner_describe(owner);

            g_set_error(error, AV_ERROR, AV_ERROR_BUSY,
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

    fields = extra ? json_deep_copy(extra) : json_object();
    json_object_set_new(fields, "identity", json_string(dev->identity));
    json_object_set_new(fields, "address", av_json_string_or_null(dev->address));
    json_object_set_new(fields, "from", json_string(av_device_state_to_string(from)));
    json_object_set_new(fields, "to", json_string(av_device_state_to_string(to)));
    json_object_set_new(fields, "owner", av_owner_to_json(new_owner));
    json_object_set_new(fields, "reason", av_json_string_or_null(new_reason));
    if (!av_pool_journal_append(pool, event, fields, error))
        return FALSE;

    /* claim_expires survives only while the claim does (through missing). */
    if (!(to == AV_DEVICE_STATE_CLAIMED ||
          (to == AV_DEVICE_STATE_MISSING && from == AV_DEVICE_STATE_CLAIMED)))
        dev->claim_expires = 0;
    /* A scrub token lives as long as the scrub it was made for, which a
     * rescan that lost the device for a while does not end. */
    if (to != AV_DEVICE_STATE_MISSING &&
        !(from == AV_DEVICE_STATE_MISSING && to == dev->state_before_missing))
        av_pool_scrub_token_clear(dev);
    if (to == AV_DEVICE_STATE_MISSING)
        dev->state_before_missing = from;
    else
        dev->state_before_missing = AV_DEVICE_STATE_FREE;
    dev->state = to;
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
 * domain name), else AV_ERROR_BUSY: a device claimed by one domain is never
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
    json_object_set_new(fields, "address", av_json_string_or_null(dev->address));
    json_object_set_new(fields, "state", json_string(av_device_state_to_string(dev->state)));
    json_object_set_new(fields, "rom_sha256", json_string(sha256));
    json_object_set_new(fields, "previous", av_json_string_or_null(dev->rom_sha256));
    json_object_set_new(fields, "operator", av_json_string_or_null(operator_name));
    if (!av_pool_journal_append(pool, "enrolled", fields, error))
        return FALSE;
    g_free(dev->rom_sha256);
    dev->rom_sha256 = g_strdup(sha256);
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
av_pool_scrub_token_set(AvPoolDevice *dev, const char *token, GError **error)
{
    if (dev->state != AV_DEVICE_STATE_SCRUBBING && dev->state != AV_DEVICE_STATE_QUARANTINED) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "device '%s' is %s: only a device being scrubbed gets a scrub token", dev->identity,
                    av_device_state_to_string(dev->state));
        return FALSE;
    }
    g_return_val_if_fail(av_scrub_token_is_valid(token), FALSE);
    g_free(dev->scrub_token);
    dev->scrub_token = g_strdup(token);
    g_free(dev->scrub_domain);
    dev->scrub_domain = g_uuid_string_random();
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_scrub_token_matches(const AvPoolDevice *dev, const char *token, const char *domain_uuid)
{
    unsigned char diff = 0;

    if (!dev->scrub_token || !dev->scrub_domain || !token || !domain_uuid ||
        strlen(token) != AV_SCRUB_TOKEN_LEN || strlen(dev->scrub_token) != AV_SCRUB_TOKEN_LEN)
        return FALSE;
    for (gsize i = 0; i < AV_SCRUB_TOKEN_LEN; i++)
        diff |= (unsigned char)(dev->scrub_token[i] ^ token[i]);
    return diff == 0 && strcmp(dev->scrub_domain, domain_uuid) == 0;
}

/* See av-pool.h. */
void
av_pool_scrub_token_consume(AvPoolDevice *dev)
{
    g_clear_pointer(&dev->scrub_token, g_free);
}

/* See av-pool.h. */
void
av_pool_scrub_token_clear(AvPoolDevice *dev)
{
    g_clear_pointer(&dev->scrub_token, g_free);
    g_clear_pointer(&dev->scrub_domain, g_free);
}

/* See av-pool.h. */
gboolean
av_pool_is_scrub_domain(const AvPoolDevice *dev, const char *domain_uuid)
{
    return dev->scrub_domain && domain_uuid && strcmp(dev->scrub_domain, domain_uuid) == 0;
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
    if (dev->kind != AV_DEVICE_KIND_PCI || profile->restore_driver != AV_RESTORE_ON_RELEASE)
        return TRUE;
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
    const char *address = dev->address ? dev->address : "-";
    const AvProfile *profile;
    gboolean remove;

    if (dev->state != AV_DEVICE_STATE_QUARANTINED)
        return av_transition_fail(dev, AV_DEVICE_STATE_FREE, error);
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
    if (!av_pool_transition_event(pool, dev, AV_DEVICE_STATE_FREE, NULL, NULL, "cleared", facts, error))
        return FALSE;
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
    return av_pool_journal_append(pool, "scrub-certificate", fields, error);
}

/* Claims whose expiry has passed go back to free ("claim-expired"): a domain
 * defined but never started does not hold a GPU forever (seed 004). */
static gboolean
av_pool_expire_claims(AvPool *pool, gint64 now, gboolean *changed, GError **error)
{
    for (guint i = 0; i < pool->devices->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);

        if (dev->state != AV_DEVICE_STATE_CLAIMED || dev->claim_expires == 0 || dev->claim_expires > now)
            continue;
        if (!av_pool_transition_event(pool, dev, AV_DEVICE_STATE_FREE, NULL, "the claim expired",
                                      "claim-expired", NULL, error))
            return FALSE;
        *changed = TRUE;
    }
    return TRUE;
}

/* --- reconciliation --------------------------------------------------------- */

static gboolean
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
} AvScanned;

static void
av_scanned_free(AvScanned *s)
{
    g_free(s->identity);
    g_free(s->fallback);
    g_free(s);
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

/* Gives every device whose identity another device of the scan shares its
 * fallback identity (one warning names them all); devices that share even
 * their fallback are removed from @scanned (another warning), and their
 * identities added to @ret_ambiguous (identity -> reason, both owned), so
 * that neither is pooled nor merged with the other. */
static void
av_scanned_resolve_collisions(GPtrArray *scanned, GHashTable *ret_ambiguous)
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
    /* @groups and @order borrow the identities: note them before the swap. */
    for (guint i = 0; i < order->len; i++)
        g_hash_table_add(shared, g_strdup(g_ptr_array_index(order, i)));
    g_clear_pointer(&groups, g_hash_table_unref);
    g_ptr_array_set_size(order, 0);
    for (guint i = 0; i < scanned->len; i++) {
        AvScanned *s = g_ptr_array_index(scanned, i);

        if (g_hash_table_contains(shared, s->identity)) {
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

/* Applies one scanned device to the pool. */
static gboolean
av_pool_reconcile_one(AvPool *pool, const AvScanned *s, gint64 now, gboolean *changed, GError **error)
{
    AvPoolDevice *dev = av_pool_find(pool, s->identity);

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
        if (g_strcmp0(dev->profile, s->profile->name) != 0) {
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
        if (dev->state == AV_DEVICE_STATE_FREE && s->driver && strcmp(s->driver, "vfio-pci") != 0 &&
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

/* See av-pool.h.  Only devices a profile matches join the pool, and
 * av_policy_match_pci() alone says which: a VF through an "sriov-vf" profile
 * or an "mdev" profile whose type it offers (NVIDIA Ampere cards offer their
 * vGPU types on their VFs), a PF never through an "sriov-vf" one.  Devices
 * sharing an identity get their fallback identities, or stay out of the pool
 * (see av_scanned_resolve_collisions()); a pooled device whose identity is
 * thus ambiguous becomes missing, with a reason saying so.  Journal events:
 * "added", "readdressed", "reprofiled" (the matching profile changed),
 * "missing", "found", "removed" and "claim-expired".  On failure (a journal write) the pool
 * may be partly reconciled; the caller must not save it. */
gboolean
av_pool_reconcile(AvPool *pool, const AvHost *host, const AvPolicy *policy,
                  gboolean *ret_changed, GError **error)
{
    g_autoptr(GPtrArray) scanned = g_ptr_array_new_with_free_func((GDestroyNotify)av_scanned_free);
    g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) ambiguous = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_autoptr(GPtrArray) gone = g_ptr_array_new();
    gboolean changed = FALSE;
    gint64 now = av_pool_now();

    if (pool->mode != AV_POOL_WRITE) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot reconcile the pool in '%s': it was opened for reading only", pool->state_dir);
        return FALSE;
    }

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
        g_ptr_array_add(scanned, s);
    }
    av_scanned_resolve_collisions(scanned, ambiguous);

    for (guint i = 0; i < scanned->len; i++) {
        AvScanned *s = g_ptr_array_index(scanned, i);

        g_hash_table_add(seen, s->identity);
        if (!av_pool_reconcile_one(pool, s, now, &changed, error))
            return FALSE;
    }

    for (guint i = 0; i < pool->devices->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);

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
    if (!av_pool_expire_claims(pool, now, &changed, error))
        return FALSE;
    if (ret_changed)
        *ret_changed = changed;
    return TRUE;
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
    dev->state_since = dev->first_seen = dev->last_seen = av_pool_now();
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
