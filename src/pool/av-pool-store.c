/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the pool's file, on top of the other files of src/pool:
 * pool.json written (each device here, the intents, placement records and
 * scanned boot by their own files' serialisers), strictly loaded (the
 * devices here, the intents and placement records by av-pool-intent.c and
 * av-pool-placement.c, through the load helpers of av-pool-load.c), opened
 * under its lock and atomically saved.  The devices, owners and lookups it
 * fills are av-pool.c's. */
#include "config.h"

#include "av-pool-private.h"
#include "av-pool-placement.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/av-error.h"
#include "util/av-names.h"
#include "util/av-json.h"

/* --- writing pool.json ---------------------------------------------------- */

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
    if (dev->identity_problem)
        json_object_set_new(obj, "identity_problem", json_string(dev->identity_problem));
    if (dev->unscrubbed)
        json_object_set_new(obj, "unscrubbed", json_true());
    if (dev->last_scrub)
        json_object_set(obj, "last_scrub", dev->last_scrub);
    if (dev->release_pending)
        json_object_set_new(obj, "release_pending", json_true());
    if (dev->claim_programmed)
        json_object_set_new(obj, "claim_programmed", json_true());
    if (dev->in_use_boot_id)
        json_object_set_new(obj, "in_use_boot_id", json_string(dev->in_use_boot_id));
    if (dev->match_ids)
        json_object_set_new(obj, "match_ids", json_string(dev->match_ids));
    /* Only when they say something: a count, or an enrolment
     * later than the device's first_seen. */
    if (dev->scrub_failures || dev->reset_failures ||
        (dev->failures_since && dev->failures_since != dev->first_seen))
        json_object_set_new(obj, "failures",
                            json_pack("{s:I, s:I, s:I}", "scrub", (json_int_t)dev->scrub_failures, "reset",
                                      (json_int_t)dev->reset_failures, "since",
                                      (json_int_t)(dev->failures_since ? dev->failures_since : dev->first_seen)));
    if (dev->programmed) {
        const AvProgrammed *pr = dev->programmed;

        json_object_set_new(obj, "programmed",
                            json_pack("{s:s, s:o, s:I, s:s, s:s}", "sha256", pr->sha256, "name",
                                      av_json_string_or_null(pr->name), "since", (json_int_t)pr->since, "by", pr->by,
                                      "verified", pr->verified));
    }
    return obj;
}

/* The whole pool as written to pool.json: {"version": 1, "devices": [...],
 * "intents": [...] (only when there are)}, devices sorted by identity.  Caller owns the reference. */
json_t *
av_pool_to_json(const AvPool *pool)
{
    json_t *obj = json_object();
    json_t *devices = json_array();

    for (guint i = 0; i < pool->devices->len; i++)
        json_array_append_new(devices, av_pool_device_to_json(g_ptr_array_index(pool->devices, i)));
    json_object_set_new(obj, "version", json_integer(AV_POOL_VERSION));
    json_object_set_new(obj, "devices", devices);
    /* Written only while a prepare runs (or died): a pool at rest keeps its form. */
    if (pool->intents->len > 0)
        json_object_set_new(obj, "intents", av_pool_intents_to_json(pool->intents));
    if (pool->placements->len > 0)
        json_object_set_new(obj, "placements", av_pool_placements_to_json(pool->placements));
    if (pool->usage->len > 0)
        json_object_set_new(obj, "usage", av_pool_usage_to_json(pool->usage));
    if (pool->scanned_boot_id)
        json_object_set_new(obj, "scanned_boot_id", json_string(pool->scanned_boot_id));
    return obj;
}

static int
av_pool_text_append(const char *buffer, size_t size, void *data)
{
    g_string_append_len(data, buffer, size);
    return 0;
}

/* Appends @value as jansson writes it in pool.json (preserved order, the
 * default separators ", " and ": "); FALSE when jansson cannot. */
static gboolean
av_pool_text_dump(GString *out, const json_t *value)
{
    return value && json_dump_callback(value, av_pool_text_append, out, JSON_PRESERVE_ORDER | JSON_ENCODE_ANY) == 0;
}

/* Appends the member @key (the pool's own, printed as it is) and @value of
 * the top object: each element of a non-empty array on a line of its own. */
static gboolean
av_pool_text_member(GString *out, const char *key, const json_t *value)
{
    g_string_append_printf(out, "%s\n\"%s\": ", out->len > 1 ? "," : "", key);
    if (!json_is_array(value) || json_array_size(value) == 0)
        return av_pool_text_dump(out, value);
    g_string_append_c(out, '[');
    for (size_t i = 0; i < json_array_size(value); i++) {
        g_string_append(out, i > 0 ? ",\n" : "\n");
        if (!av_pool_text_dump(out, json_array_get(value, i)))
            return FALSE;
    }
    g_string_append(out, "\n]");
    return TRUE;
}

/* See av-pool.h. */
char *
av_pool_json_text(const json_t *json)
{
    g_autoptr(GString) out = g_string_sized_new(512);
    const char *key;
    json_t *value;

    g_string_append_c(out, '{');
    /* Keys in insertion order (jansson >= 2.8); keys are the pool's own. */
    json_object_foreach((json_t *)json, key, value) {
        if (!av_pool_text_member(out, key, value))
            return NULL;
    }
    g_string_append(out, "\n}\n");
    return g_string_free(g_steal_pointer(&out), FALSE);
}

/* --- writing pool.json without building its JSON tree ----------------------
 *
 * A save writes every device, and building each device's jansson object to
 * dump it cost more than the rest of a prepare at 512 GPUs (issue 38 item
 * 3).  These write the same bytes as av_pool_json_text(av_pool_to_json())
 * (test-pool checks it on every pool it loads): jansson's escapes (\" \\ \b
 * \f \n \r \t, other control characters as \u00XX in upper-case hex, the
 * rest as it is), its separators, its integers.  A device holding a string
 * jansson refuses (not UTF-8, or NULL where jansson would need a string) is
 * written through av_pool_device_to_json() as before, so that its text stays
 * what jansson made of it. */

/* Appends @s (valid UTF-8) as a JSON string, escaped as jansson does. */
static void
av_pool_text_string(GString *out, const char *s)
{
    static const char from[] = "\"\\\b\f\n\r\t", to[] = "\"\\bfnrt";
    const char *run = s, *at;

    g_string_append_c(out, '"');
    for (const char *c = s; *c; c++) {
        guchar u = (guchar)*c;

        if (u >= 0x20 && u != '"' && u != '\\')
            continue;
        g_string_append_len(out, run, c - run);
        run = c + 1;
        at = strchr(from, u);
        if (at) {
            g_string_append_c(out, '\\');
            g_string_append_c(out, to[at - from]);
        } else {
            g_string_append_printf(out, "\\u%04X", (guint)u);
        }
    }
    g_string_append(out, run);
    g_string_append_c(out, '"');
}

/* Appends ", " (unless @first), the member name @key and ": ". */
static void
av_pool_text_key(GString *out, const char *key, gboolean first)
{
    size_t len = strlen(key);
    char *at;

    /* One growth, then plain copies: a save writes some 10,000 members. */
    g_string_set_size(out, out->len + len + 6);
    at = out->str + out->len - len - 6;
    if (first) {
        g_string_truncate(out, out->len - 2);
    } else {
        *at++ = ',';
        *at++ = ' ';
    }
    *at++ = '"';
    memcpy(at, key, len);
    at += len;
    memcpy(at, "\": ", 3);
}

static void
av_pool_text_string_or_null(GString *out, const char *key, const char *value)
{
    av_pool_text_key(out, key, FALSE);
    if (value)
        av_pool_text_string(out, value);
    else
        g_string_append(out, "null");
}

static void
av_pool_text_int(GString *out, const char *key, gint64 value)
{
    char digits[24];
    char *d = digits + sizeof(digits);
    guint64 u = value < 0 ? 0 - (guint64)value : (guint64)value;

    /* By hand: printf made half the cost of a save. */
    do {
        *--d = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (value < 0)
        *--d = '-';
    av_pool_text_key(out, key, FALSE);
    g_string_append_len(out, d, digits + sizeof(digits) - d);
}

/* Whether every string of @dev is one jansson takes (UTF-8; the identity
 * set), so that av_pool_device_text() may write it. */
static gboolean
av_pool_device_text_ok(const AvPoolDevice *dev)
{
    const char *const strings[] = {
        dev->address, dev->profile, dev->reason, dev->reason_before_missing, dev->original_driver,
        dev->rom_sha256, dev->scrub_token, dev->scrub_domain, dev->identity_problem, dev->in_use_boot_id,
        dev->match_ids,
        dev->owner ? dev->owner->domain_uuid : NULL, dev->owner ? dev->owner->domain_name : NULL,
        dev->owner ? dev->owner->nova_instance : NULL, dev->owner ? dev->owner->nova_project : NULL,
        dev->owner ? dev->owner->nova_user : NULL,
    };

    if (!dev->identity || !g_utf8_validate(dev->identity, -1, NULL))
        return FALSE;
    for (guint i = 0; i < G_N_ELEMENTS(strings); i++) {
        if (strings[i] && !g_utf8_validate(strings[i], -1, NULL))
            return FALSE;
    }
    for (guint i = 0; dev->companions && i < dev->companions->len; i++) {
        const AvCompanion *c = g_ptr_array_index(dev->companions, i);

        if (!c->address || !g_utf8_validate(c->address, -1, NULL) ||
            (c->original_driver && !g_utf8_validate(c->original_driver, -1, NULL)))
            return FALSE;
    }
    return TRUE;
}

/* Appends @dev as av_pool_json_text() writes av_pool_device_to_json(@dev);
 * FALSE when jansson cannot serialise it. */
static gboolean
av_pool_device_text(GString *out, const AvPoolDevice *dev)
{
    gboolean missing = dev->state == AV_DEVICE_STATE_MISSING;
    const AvOwner *owner = dev->owner;

    if (!av_pool_device_text_ok(dev)) {
        g_autoptr(json_t) obj = av_pool_device_to_json(dev);

        return av_pool_text_dump(out, obj);
    }
    g_string_append_c(out, '{');
    av_pool_text_key(out, "identity", TRUE);
    av_pool_text_string(out, dev->identity);
    av_pool_text_string_or_null(out, "kind", av_device_kind_to_string(dev->kind));
    av_pool_text_string_or_null(out, "address", dev->address);
    av_pool_text_string_or_null(out, "profile", dev->profile);
    av_pool_text_string_or_null(out, "state", av_device_state_to_string(dev->state));
    av_pool_text_string_or_null(out, "state_before_missing",
                                missing ? av_device_state_to_string(dev->state_before_missing) : NULL);
    av_pool_text_key(out, "owner", FALSE);
    if (owner) {
        g_string_append_c(out, '{');
        av_pool_text_key(out, "domain_uuid", TRUE);
        if (owner->domain_uuid)
            av_pool_text_string(out, owner->domain_uuid);
        else
            g_string_append(out, "null");
        av_pool_text_string_or_null(out, "domain_name", owner->domain_name);
        av_pool_text_string_or_null(out, "nova_instance", owner->nova_instance);
        av_pool_text_string_or_null(out, "nova_project", owner->nova_project);
        av_pool_text_string_or_null(out, "nova_user", owner->nova_user);
        g_string_append_c(out, '}');
    } else {
        g_string_append(out, "null");
    }
    av_pool_text_int(out, "state_since", dev->state_since);
    av_pool_text_int(out, "first_seen", dev->first_seen);
    av_pool_text_int(out, "last_seen", dev->last_seen);
    av_pool_text_int(out, "claim_expires", dev->claim_expires);
    av_pool_text_string_or_null(out, "reason", dev->reason);
    av_pool_text_string_or_null(out, "reason_before_missing", missing ? dev->reason_before_missing : NULL);
    av_pool_text_string_or_null(out, "original_driver", dev->original_driver);
    av_pool_text_int(out, "numa_node", dev->numa_node);
    av_pool_text_int(out, "iommu_group", dev->iommu_group);
    if (dev->companions && dev->companions->len > 0) {
        av_pool_text_key(out, "companions", FALSE);
        g_string_append_c(out, '[');
        for (guint i = 0; i < dev->companions->len; i++) {
            const AvCompanion *c = g_ptr_array_index(dev->companions, i);

            g_string_append(out, i > 0 ? ", {" : "{");
            av_pool_text_key(out, "address", TRUE);
            av_pool_text_string(out, c->address);
            av_pool_text_string_or_null(out, "original_driver", c->original_driver);
            g_string_append_c(out, '}');
        }
        g_string_append_c(out, ']');
    }
    if (dev->kind == AV_DEVICE_KIND_MDEV) {
        av_pool_text_key(out, "created", FALSE);
        g_string_append(out, dev->created ? "true" : "false");
    }
    if (dev->rom_sha256)
        av_pool_text_string_or_null(out, "rom_sha256", dev->rom_sha256);
    if (dev->scrub_token)
        av_pool_text_string_or_null(out, "scrub_token", dev->scrub_token);
    if (dev->scrub_domain)
        av_pool_text_string_or_null(out, "scrub_domain", dev->scrub_domain);
    if (dev->identity_problem)
        av_pool_text_string_or_null(out, "identity_problem", dev->identity_problem);
    if (dev->unscrubbed) {
        av_pool_text_key(out, "unscrubbed", FALSE);
        g_string_append(out, "true");
    }
    if (dev->last_scrub) {
        av_pool_text_key(out, "last_scrub", FALSE);
        if (!av_pool_text_dump(out, dev->last_scrub))
            return FALSE;
    }
    if (dev->release_pending) {
        av_pool_text_key(out, "release_pending", FALSE);
        g_string_append(out, "true");
    }
    if (dev->claim_programmed) {
        av_pool_text_key(out, "claim_programmed", FALSE);
        g_string_append(out, "true");
    }
    if (dev->in_use_boot_id)
        av_pool_text_string_or_null(out, "in_use_boot_id", dev->in_use_boot_id);
    if (dev->match_ids)
        av_pool_text_string_or_null(out, "match_ids", dev->match_ids);
    /* The rare members of their own, through jansson as
     * av_pool_device_to_json() builds them. */
    if (dev->scrub_failures || dev->reset_failures ||
        (dev->failures_since && dev->failures_since != dev->first_seen) || dev->programmed) {
        g_autoptr(json_t) obj = av_pool_device_to_json(dev);
        json_t *failures = json_object_get(obj, "failures");
        json_t *programmed = json_object_get(obj, "programmed");

        if (failures) {
            av_pool_text_key(out, "failures", FALSE);
            if (!av_pool_text_dump(out, failures))
                return FALSE;
        }
        if (programmed) {
            av_pool_text_key(out, "programmed", FALSE);
            if (!av_pool_text_dump(out, programmed))
                return FALSE;
        }
    }
    g_string_append_c(out, '}');
    return TRUE;
}

/* See av-pool.h. */
char *
av_pool_text(const AvPool *pool)
{
    g_autoptr(GString) out = g_string_sized_new(512 + pool->devices->len * 512);

    g_string_append(out, "{\n\"version\": ");
    g_string_append_printf(out, "%d", AV_POOL_VERSION);
    g_string_append(out, ",\n\"devices\": ");
    if (pool->devices->len == 0)
        g_string_append(out, "[]");
    else
        g_string_append_c(out, '[');
    for (guint i = 0; i < pool->devices->len; i++) {
        g_string_append(out, i > 0 ? ",\n" : "\n");
        if (!av_pool_device_text(out, g_ptr_array_index(pool->devices, i)))
            return NULL;
    }
    if (pool->devices->len > 0)
        g_string_append(out, "\n]");
    if (pool->intents->len > 0) {
        g_autoptr(json_t) intents = av_pool_intents_to_json(pool->intents);

        if (!av_pool_text_member(out, "intents", intents))
            return NULL;
    }
    if (pool->placements->len > 0) {
        g_autoptr(json_t) placements = av_pool_placements_to_json(pool->placements);

        if (!av_pool_text_member(out, "placements", placements))
            return NULL;
    }
    if (pool->usage->len > 0) {
        g_autoptr(json_t) usage = av_pool_usage_to_json(pool->usage);

        if (!av_pool_text_member(out, "usage", usage))
            return NULL;
    }
    if (pool->scanned_boot_id) {
        g_autoptr(json_t) boot = json_string(pool->scanned_boot_id);

        if (!av_pool_text_member(out, "scanned_boot_id", boot))
            return NULL;
    }
    g_string_append(out, "\n}\n");
    return g_string_free(g_steal_pointer(&out), FALSE);
}

/* --- loading pool.json: the devices, the whole file ----------------------- */

static gboolean
av_pool_load_state(const AvPoolLoad *ld, json_t *obj, const char *jpath, const char *key,
                   AvDeviceState *ret_state, GError **error)
{
    json_t *v = json_object_get(obj, key);

    if (!json_is_string(v) || !av_device_state_from_string(json_string_value(v), ret_state)) {
        g_autofree char *sub = g_strdup_printf("%s/%s", jpath, key);
        return av_pool_load_fail(ld, error, sub, "expected a state (free, claimed, in-use, dirty, "
                                 "scrubbing, quarantined, missing)");
    }
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

/* The optional "last_scrub" (AvPoolDevice): {"time", "result", "coverage":
 * {"cleared", "read_back", "memory", "fraction", "verified", "text"}},
 * every member checked, nothing else. */
static gboolean
av_pool_load_last_scrub(const AvPoolLoad *ld, json_t *obj, const char *jpath, AvPoolDevice *dev, GError **error)
{
    static const char *const keys[] = { "time", "result", "coverage", NULL };
    static const char *const cov_keys[] = { "cleared", "read_back", "memory", "fraction", "verified", "text", NULL };
    json_t *v = json_object_get(obj, "last_scrub");
    g_autofree char *sub = NULL;
    g_autofree char *csub = NULL;
    g_autofree char *s = NULL;
    json_t *cov, *memory, *fraction, *verified, *text;
    gint64 n, cleared;

    /* The paths only for a device that has one: a load reads every device. */
    if (!v)
        return TRUE;
    sub = g_strdup_printf("%s/last_scrub", jpath);
    csub = g_strdup_printf("%s/last_scrub/coverage", jpath);
    if (!json_is_object(v))
        return av_pool_load_fail(ld, error, sub, "expected an object");
    if (!av_pool_load_keys(ld, v, sub, keys, error) ||
        !av_pool_load_int(ld, v, sub, "time", 0, G_MAXINT64, &n, error) ||
        !av_pool_load_string(ld, v, sub, "result", FALSE, &s, error))
        return FALSE;
    if (!g_str_equal(s, "free") && !g_str_equal(s, "quarantined"))
        return av_pool_load_fail(ld, error, sub, "'result' must be free or quarantined");
    cov = json_object_get(v, "coverage");
    if (!json_is_object(cov))
        return av_pool_load_fail(ld, error, csub, "expected an object");
    if (!av_pool_load_keys(ld, cov, csub, cov_keys, error) ||
        !av_pool_load_int(ld, cov, csub, "cleared", 0, G_MAXINT64, &cleared, error) ||
        !av_pool_load_int(ld, cov, csub, "read_back", 0, cleared, &n, error))
        return FALSE;
    memory = json_object_get(cov, "memory");
    fraction = json_object_get(cov, "fraction");
    verified = json_object_get(cov, "verified");
    text = json_object_get(cov, "text");
    if (!json_is_null(memory) && !(json_is_integer(memory) && json_integer_value(memory) > 0))
        return av_pool_load_fail(ld, error, csub, "'memory' must be a byte count above 0 or null");
    if (!(json_is_null(fraction) ? json_is_null(memory)
                                 : json_is_number(fraction) && !json_is_null(memory) &&
                                   json_number_value(fraction) >= 0 && json_number_value(fraction) <= 1))
        return av_pool_load_fail(ld, error, csub, "'fraction' must be a share from 0 to 1 with the memory, or null "
                                 "without");
    if (!json_is_string(verified) || (!g_str_equal(json_string_value(verified), "full") &&
                                      !g_str_equal(json_string_value(verified), "partial") &&
                                      !g_str_equal(json_string_value(verified), "none")))
        return av_pool_load_fail(ld, error, csub, "'verified' must be full, partial or none");
    if (!json_is_string(text) || json_string_length(text) > 4096 ||
        strlen(json_string_value(text)) != json_string_length(text))
        return av_pool_load_fail(ld, error, csub, "'text' must be a string of at most 4096 bytes");
    dev->last_scrub = json_incref(v);
    return TRUE;
}

/* The optional "programmed" (AvPoolDevice, PCI only): {"sha256", "name"
 * (or null), "since", "by", "verified"}, every member checked. */
static gboolean
av_pool_load_programmed(const AvPoolLoad *ld, json_t *obj, const char *jpath, AvPoolDevice *dev, GError **error)
{
    static const char *const keys[] = { "sha256", "name", "since", "by", "verified", NULL };
    json_t *v = json_object_get(obj, "programmed");
    g_autofree char *sub = NULL;
    g_autoptr(AvProgrammed) pr = NULL;

    if (!v)
        return TRUE;
    sub = g_strdup_printf("%s/programmed", jpath);
    if (dev->kind != AV_DEVICE_KIND_PCI)
        return av_pool_load_fail(ld, error, sub, "only a PCI device is programmed");
    if (!json_is_object(v))
        return av_pool_load_fail(ld, error, sub, "expected an object");
    pr = g_new0(AvProgrammed, 1);
    if (!av_pool_load_keys(ld, v, sub, keys, error) ||
        !av_pool_load_string(ld, v, sub, "sha256", FALSE, &pr->sha256, error) ||
        !av_pool_load_string(ld, v, sub, "name", TRUE, &pr->name, error) ||
        !av_pool_load_int(ld, v, sub, "since", 0, G_MAXINT64, &pr->since, error) ||
        !av_pool_load_string(ld, v, sub, "by", FALSE, &pr->by, error) ||
        !av_pool_load_string(ld, v, sub, "verified", FALSE, &pr->verified, error))
        return FALSE;
    if (!av_rom_sha256_is_valid(pr->sha256) || g_str_equal(pr->sha256, AV_ROM_NONE))
        return av_pool_load_fail(ld, error, sub, "'sha256' must be 64 lower-case hex digits");
    if (pr->name && !av_bitstream_name_is_valid(pr->name))
        return av_pool_load_fail(ld, error, sub, "'name' must be a bitstream name or null");
    if (strlen(pr->by) < 1 || strlen(pr->by) > 16 || strspn(pr->by, "abcdefghijklmnopqrstuvwxyz-") != strlen(pr->by))
        return av_pool_load_fail(ld, error, sub, "'by' must be 1 to 16 of a-z and '-'");
    if (strlen(pr->verified) > 256 || !g_utf8_validate(pr->verified, -1, NULL))
        return av_pool_load_fail(ld, error, sub, "'verified' must be a sentence of at most 256 bytes");
    for (const char *c = pr->verified; *c; c++)
        if ((guchar)*c < 0x20 || *c == 0x7f)
            return av_pool_load_fail(ld, error, sub, "'verified' must hold no control character");
    dev->programmed = g_steal_pointer(&pr);
    return TRUE;
}

/* "failures": {"scrub", "reset", "since"}, counts from 0,
 * reset at most scrub (a failed reset is a failed scrub).  Absent: no
 * failures since first_seen. */
static gboolean
av_pool_load_failures(const AvPoolLoad *ld, json_t *obj, const char *jpath, AvPoolDevice *dev, GError **error)
{
    static const char *const keys[] = { "scrub", "reset", "since", NULL };
    json_t *v = json_object_get(obj, "failures");
    g_autofree char *sub = NULL;
    gint64 scrub = 0, reset = 0, since = 0;

    dev->failures_since = dev->first_seen;
    if (!v)
        return TRUE;
    sub = g_strdup_printf("%s/failures", jpath);
    if (!json_is_object(v))
        return av_pool_load_fail(ld, error, sub, "expected an object {\"scrub\", \"reset\", \"since\"}");
    if (!av_pool_load_keys(ld, v, sub, keys, error) ||
        !av_pool_load_int(ld, v, sub, "scrub", 0, G_MAXUINT32, &scrub, error) ||
        !av_pool_load_int(ld, v, sub, "reset", 0, G_MAXUINT32, &reset, error) ||
        !av_pool_load_int(ld, v, sub, "since", 0, G_MAXINT64, &since, error))
        return FALSE;
    if (reset > scrub)
        return av_pool_load_fail(ld, error, sub, "'reset' (%" G_GINT64_FORMAT ") cannot be more than 'scrub' (%"
                                 G_GINT64_FORMAT "): a failed reset is a failed scrub", reset, scrub);
    dev->scrub_failures = (guint)scrub;
    dev->reset_failures = (guint)reset;
    dev->failures_since = since;
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
                                            "identity_problem", "last_scrub", "unscrubbed", "programmed",
                                            "release_pending", "failures", "in_use_boot_id", "match_ids",
                                            "claim_programmed", NULL };
    char jpath[32], owner_path[40];
    g_autofree char *kind = NULL;
    g_autoptr(AvPoolDevice) dev = av_pool_device_new();
    gint64 numa = -1, group = -1;
    json_t *before;

    g_snprintf(jpath, sizeof(jpath), "devices/%u", index);
    g_snprintf(owner_path, sizeof(owner_path), "devices/%u/owner", index);
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
    if (!av_pool_load_scrub(ld, obj, jpath, dev, error) || !av_pool_load_last_scrub(ld, obj, jpath, dev, error) ||
        !av_pool_load_programmed(ld, obj, jpath, dev, error) || !av_pool_load_failures(ld, obj, jpath, dev, error))
        return NULL;
    if (json_object_get(obj, "unscrubbed")) {
        g_autofree char *sub = g_strdup_printf("%s/unscrubbed", jpath);
        AvDeviceState state = dev->state == AV_DEVICE_STATE_MISSING ? dev->state_before_missing : dev->state;

        if (!json_is_true(json_object_get(obj, "unscrubbed")))
            return av_pool_load_fail(ld, error, sub, "expected true (it is left out when not set)"), NULL;
        if (state != AV_DEVICE_STATE_QUARANTINED)
            return av_pool_load_fail(ld, error, sub, "only a quarantined device is 'unscrubbed'"), NULL;
        dev->unscrubbed = TRUE;
    }
    if (json_object_get(obj, "release_pending")) {
        g_autofree char *sub = g_strdup_printf("%s/release_pending", jpath);
        AvDeviceState state = dev->state == AV_DEVICE_STATE_MISSING ? dev->state_before_missing : dev->state;

        if (!json_is_true(json_object_get(obj, "release_pending")))
            return av_pool_load_fail(ld, error, sub, "expected true (it is left out when not set)"), NULL;
        if (state != AV_DEVICE_STATE_DIRTY && state != AV_DEVICE_STATE_SCRUBBING &&
            state != AV_DEVICE_STATE_QUARANTINED)
            return av_pool_load_fail(ld, error, sub, "only a released device (dirty, scrubbing or quarantined) "
                                     "has a release pending"), NULL;
        dev->release_pending = TRUE;
    }
    if (json_object_get(obj, "claim_programmed")) {
        g_autofree char *sub = g_strdup_printf("%s/claim_programmed", jpath);
        AvDeviceState state = dev->state == AV_DEVICE_STATE_MISSING ? dev->state_before_missing : dev->state;

        if (!json_is_true(json_object_get(obj, "claim_programmed")))
            return av_pool_load_fail(ld, error, sub, "expected true (it is left out when not set)"), NULL;
        if (state != AV_DEVICE_STATE_CLAIMED)
            return av_pool_load_fail(ld, error, sub, "only a claimed device is 'claim_programmed'"), NULL;
        dev->claim_programmed = TRUE;
    }
    if (json_object_get(obj, "in_use_boot_id")) {
        g_autofree char *sub = g_strdup_printf("%s/in_use_boot_id", jpath);
        AvDeviceState state = dev->state == AV_DEVICE_STATE_MISSING ? dev->state_before_missing : dev->state;

        if (!av_pool_load_string(ld, obj, jpath, "in_use_boot_id", FALSE, &dev->in_use_boot_id, error))
            return NULL;
        if (!av_uuid_is_valid(dev->in_use_boot_id))
            return av_pool_load_fail(ld, error, sub, "expected a boot id such as "
                                     "'0f8e2d3c-1b2a-4c5d-8e9f-a0b1c2d3e4f5' (lower case), not '%s'",
                                     dev->in_use_boot_id), NULL;
        if (state != AV_DEVICE_STATE_IN_USE)
            return av_pool_load_fail(ld, error, sub, "only an in-use device has the boot it went in use "
                                     "in"), NULL;
    }
    if (json_object_get(obj, "match_ids")) {
        if (!av_pool_load_string(ld, obj, jpath, "match_ids", FALSE, &dev->match_ids, error))
            return NULL;
        if (!av_pool_match_ids_valid(dev->match_ids)) {
            g_autofree char *sub = g_strdup_printf("%s/match_ids", jpath);

            return av_pool_load_fail(ld, error, sub, "expected 'VVVV:DDDD SSSS:ssss CCCCCC RR' (lower-case hex), "
                                     "not '%s'", dev->match_ids), NULL;
        }
    }
    if (json_object_get(obj, "identity_problem")) {
        AvDeviceState state = dev->state == AV_DEVICE_STATE_MISSING ? dev->state_before_missing : dev->state;

        if (!av_pool_load_string(ld, obj, jpath, "identity_problem", FALSE, &dev->identity_problem, error))
            return NULL;
        if (state == AV_DEVICE_STATE_FREE) {
            g_autofree char *sub = g_strdup_printf("%s/identity_problem", jpath);
            return av_pool_load_fail(ld, error, sub, "a free device cannot have an identity problem (only the "
                                     "operator's quarantine clear drops it)"), NULL;
        }
    }
    return g_steal_pointer(&dev);
}

/* Parses the contents of pool.json into @ret_devices, @ret_intents and
 * @ret_placements (new arrays) and *ret_boot_id (or NULL). */
static gboolean
av_pool_load_data(const char *path, const char *data, gsize len, GPtrArray **ret_devices, GPtrArray **ret_intents,
                  GPtrArray **ret_placements, GPtrArray **ret_usage, char **ret_boot_id, GError **error)
{
    static const char *const keys[] = { "version", "devices", NULL };
    static const char *const optional[] = { "intents", "placements", "scanned_boot_id", "usage", NULL };
    json_t *boot;
    AvPoolLoad ld = { path, data, len };
    g_autoptr(GPtrArray) intents = g_ptr_array_new_with_free_func((GDestroyNotify)av_intent_free);
    g_autoptr(GPtrArray) placements = g_ptr_array_new_with_free_func((GDestroyNotify)av_pool_placement_free);
    g_autoptr(GPtrArray) usage = g_ptr_array_new_with_free_func((GDestroyNotify)av_pool_usage_free);
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
    if (!av_pool_load_keys_opt(&ld, root, "", keys, optional, error))
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
    if (!av_pool_load_intents(&ld, json_object_get(root, "intents"), intents, error) ||
        !av_pool_load_placements(&ld, json_object_get(root, "placements"), placements, error) ||
        !av_pool_load_usage(&ld, json_object_get(root, "usage"), usage, error))
        return FALSE;
    boot = json_object_get(root, "scanned_boot_id");
    if (boot && (!json_is_string(boot) || !av_uuid_is_valid(json_string_value(boot))))
        return av_pool_load_fail(&ld, error, "scanned_boot_id", "expected a boot id such as "
                                 "'3f1e0b9a-6c2d-4e8f-9a1b-2c3d4e5f6a7b'");
    *ret_boot_id = boot ? g_strdup(json_string_value(boot)) : NULL;
    *ret_devices = g_steal_pointer(&devices);
    *ret_intents = g_steal_pointer(&intents);
    *ret_placements = g_steal_pointer(&placements);
    *ret_usage = g_steal_pointer(&usage);
    return TRUE;
}

/* --- opening and saving the pool ------------------------------------------ */

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
    av_journal_init(&pool->journal, state_dir);
    pool->mode = mode;
    pool->devices = g_ptr_array_new_with_free_func((GDestroyNotify)av_pool_device_free);
    pool->intents = g_ptr_array_new_with_free_func((GDestroyNotify)av_intent_free);
    pool->placements = g_ptr_array_new_with_free_func((GDestroyNotify)av_pool_placement_free);
    pool->usage = g_ptr_array_new_with_free_func((GDestroyNotify)av_pool_usage_free);
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
    pool->loaded.present = TRUE;
    pool->loaded.dev = st.st_dev;
    pool->loaded.ino = st.st_ino;
    pool->loaded.size = st.st_size;
    pool->loaded.mtime = st.st_mtim;
    pool->loaded.ctime = st.st_ctim;
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
    g_autoptr(GPtrArray) intents = NULL;
    g_autoptr(GPtrArray) placements = NULL;
    g_autoptr(GPtrArray) usage = NULL;
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
        if (!av_journal_prepare(&pool->journal, error))
            return NULL;
    }

    r = av_pool_read_file(pool, &data, &len, error);
    if (r == -ENOENT)
        return g_steal_pointer(&pool);
    if (r < 0)
        return NULL;
    if (!av_pool_load_data(pool->pool_path, data, len, &devices, &intents, &placements, &usage,
                           &pool->scanned_boot_id,
                           error))
        return NULL;
    g_ptr_array_extend_and_steal(pool->devices, g_steal_pointer(&devices));
    g_ptr_array_extend_and_steal(pool->intents, g_steal_pointer(&intents));
    g_ptr_array_extend_and_steal(pool->placements, g_steal_pointer(&placements));
    g_ptr_array_extend_and_steal(pool->usage, g_steal_pointer(&usage));
    g_ptr_array_sort(pool->devices, av_pool_device_cmp);
    if (mode == AV_POOL_WRITE)
        pool->index_disk = av_pool_index_names_of(pool);
    return g_steal_pointer(&pool);
}

/* Makes a journal line written with its fsync deferred durable before the
 * lock goes (av_journal_append()): no other writer may find it pending. */
static void
av_pool_sync_journal(AvPool *pool)
{
    g_autoptr(GError) error = NULL;

    if (pool->lock && !av_journal_sync(&pool->journal, &error))
        g_warning("%s", error->message);
}

/* See av-pool.h. */
void
av_pool_unlock(AvPool *pool)
{
    av_pool_sync_journal(pool);
    g_clear_pointer(&pool->lock, av_lock_release);
    pool->mode = AV_POOL_READ;
}

/* Releases the lock and frees @pool without saving.  NULL is a no-op. */
void
av_pool_free(AvPool *pool)
{
    if (!pool)
        return;
    av_pool_sync_journal(pool);
    av_lock_release(pool->lock);
    g_ptr_array_unref(pool->devices);
    g_ptr_array_unref(pool->intents);
    g_ptr_array_unref(pool->placements);
    g_ptr_array_unref(pool->usage);
    if (pool->index_disk)
        g_hash_table_unref(pool->index_disk);
    g_free(pool->state_dir);
    g_free(pool->pool_path);
    g_free(pool->lock_path);
    av_journal_clear(&pool->journal);
    g_free(pool->scanned_boot_id);
    g_free(pool->boot_id);
    if (pool->root)
        av_root_free(pool->root);
    g_free(pool);
}

/* See av-pool.h: pool.json (mode 0600) via av_file_write_atomic().  Refused
 * with AV_ERROR_FAILED for a pool opened with AV_POOL_READ. */
gboolean
av_pool_save(AvPool *pool, GError **error)
{
    g_autofree char *text = NULL;
    g_autoptr(GHashTable) names = NULL;

    if (pool->mode != AV_POOL_WRITE || !pool->lock) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot save the pool in '%s': it was opened for reading only", pool->state_dir);
        return FALSE;
    }
    /* Write-ahead: every journal line is durable before the pool that
     * its transition made (a line whose fsync was deferred is synced
     * here, av_pool_take()). */
    if (!av_journal_sync(&pool->journal, error))
        return FALSE;
    text = av_pool_text(pool);
    if (!text) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot serialise the pool of '%s'", pool->state_dir);
        return FALSE;
    }
    /* The domain index names every domain of the new pool before the pool
     * does (av-pool-index.c). */
    names = av_pool_index_names_of(pool);
    if (!av_pool_index_before_save(pool, names, error))
        return FALSE;
    if (!av_file_write_atomic(pool->pool_path, text, strlen(text), 0600, error))
        return FALSE;
    av_pool_index_after_save(pool, names);
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_file_changed_since(const AvPool *before, const AvPool *now)
{
    const AvPoolFileStamp *a = &before->loaded, *b = &now->loaded;

    if (!a->present || !b->present)
        return a->present != b->present;
    return a->dev != b->dev || a->ino != b->ino || a->size != b->size || a->mtime.tv_sec != b->mtime.tv_sec ||
           a->mtime.tv_nsec != b->mtime.tv_nsec || a->ctime.tv_sec != b->ctime.tv_sec ||
           a->ctime.tv_nsec != b->ctime.tv_nsec;
}
