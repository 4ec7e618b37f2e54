/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what a placement is (its types' constructors and frees) and
 * the placements the pool remembers.
 *
 * When accelvirt places a domain and claims its devices (`accelvirt
 * define`, `start`, `rewrite`), the pool keeps what was asked and what was
 * given: the requests (profile, count, granularity, numa, and the bitstream
 * as written and resolved) and, per alias ua-accelvirt-N, the
 * device's profile, attach, identity, address and the bitstream it must
 * hold (the hook checks that at prepare from here).  The
 * domain's own metadata says the same, but a running domain may change its
 * metadata (virDomainSetMetadata): at restore and migrate, when the hook
 * remaps the domain to other devices, what the pool recorded decides, never
 * the metadata.  The record is dropped at `accelvirt undefine`. */
#include "config.h"

#include "av-pool-placement.h"
#include "av-pool-private.h"

#include <string.h>

#include "util/av-error.h"
#include "util/av-json.h"
#include "util/av-names.h"

/* ---- the placement types: their constructors and frees ---- */

/* A request for @count devices of @profile (copied), with the profile's
 * granularity and numa="same".  Caller frees with av_request_free(). */
AvRequest *
av_request_new(const char *profile, guint count)
{
    AvRequest *request = g_new0(AvRequest, 1);

    request->profile = g_strdup(profile);
    request->count = count;
    request->granularity_set = FALSE;
    request->granularity = AV_GRANULARITY_FUNCTION;
    request->numa_any = FALSE;
    return request;
}

void
av_request_free(AvRequest *request)
{
    if (!request)
        return;
    g_free(request->profile);
    g_free(request->bitstream);
    g_free(request->function);
    g_free(request->bitstream_sha256);
    g_free(request);
}

void
av_placed_item_free(AvPlacedItem *item)
{
    if (!item)
        return;
    g_free(item->profile);
    g_free(item->identity);
    g_free(item->pci_address);
    g_free(item->pf_address);
    g_free(item->bitstream);
    g_free(item->mdev_parent);
    g_free(item->mdev_type);
    g_free(item->mdev_uuid);
    g_free(item->usb_bus_path);
    g_free(item->netdev);
    g_free(item->root_port);
    g_free(item->switch_port);
    g_free(item);
}

void
av_placed_node_free(AvPlacedNode *node)
{
    if (!node)
        return;
    if (node->cpus)
        g_array_unref(node->cpus);
    g_free(node);
}

void
av_placement_free(AvPlacement *placement)
{
    if (!placement)
        return;
    if (placement->cpus)
        g_array_unref(placement->cpus);
    if (placement->items)
        g_ptr_array_unref(placement->items);
    if (placement->warnings)
        g_ptr_array_unref(placement->warnings);
    if (placement->nodes)
        g_ptr_array_unref(placement->nodes);
    g_free(placement);
}

/* ---- the pool's records of placements ---- */

/* Frees @record.  NULL is a no-op. */
void
av_pool_placement_free(AvPoolPlacement *record)
{
    if (!record)
        return;
    g_free(record->domain_uuid);
    g_free(record->domain_name);
    g_free(record->owner_project);
    g_free(record->owner_user);
    if (record->requests)
        g_ptr_array_unref(record->requests);
    if (record->items)
        g_ptr_array_unref(record->items);
    g_free(record);
}

static AvPoolPlacement *
av_pool_placement_new(const char *domain_uuid, const char *domain_name)
{
    AvPoolPlacement *record = g_new0(AvPoolPlacement, 1);

    record->domain_uuid = g_strdup(domain_uuid);
    record->domain_name = g_strdup(domain_name);
    record->numa_node = -1;
    record->requests = g_ptr_array_new_with_free_func((GDestroyNotify)av_request_free);
    record->items = g_ptr_array_new_with_free_func((GDestroyNotify)av_placed_item_free);
    return record;
}

static AvPlacedItem *
av_placed_item_copy(const AvPlacedItem *item)
{
    AvPlacedItem *copy = g_new0(AvPlacedItem, 1);

    copy->profile = g_strdup(item->profile);
    copy->attach = item->attach;
    copy->identity = g_strdup(item->identity);
    copy->pci_address = g_strdup(item->pci_address);
    copy->root_port = g_strdup(item->root_port);
    copy->switch_port = g_strdup(item->switch_port);
    copy->gpudirect = item->gpudirect;
    copy->pf_address = g_strdup(item->pf_address);
    copy->vf_index = item->vf_index;
    copy->mdev_parent = g_strdup(item->mdev_parent);
    copy->mdev_type = g_strdup(item->mdev_type);
    copy->mdev_uuid = g_strdup(item->mdev_uuid);
    copy->usb_bus_path = g_strdup(item->usb_bus_path);
    copy->netdev = g_strdup(item->netdev);
    copy->usb_vendor = item->usb_vendor;
    copy->usb_product = item->usb_product;
    copy->usb_busnum = item->usb_busnum;
    copy->usb_devnum = item->usb_devnum;
    copy->numa_node = item->numa_node;
    copy->bitstream = g_strdup(item->bitstream);
    return copy;
}

static const AvPoolPlacement *
av_pool_placement_find_in(const GPtrArray *placements, const char *domain_uuid)
{
    for (guint i = 0; domain_uuid && i < placements->len; i++) {
        const AvPoolPlacement *record = g_ptr_array_index(placements, i);

        if (g_str_equal(record->domain_uuid, domain_uuid))
            return record;
    }
    return NULL;
}

/* See av-pool-placement.h. */
const GPtrArray *
av_pool_placements(const AvPool *pool)
{
    return pool->placements;
}

/* See av-pool-placement.h.  Borrowed from @pool, or NULL. */
const AvPoolPlacement *
av_pool_placement_find(const AvPool *pool, const char *domain_uuid)
{
    return av_pool_placement_find_in(pool->placements, domain_uuid);
}

/* See av-pool-placement.h. */
gboolean
av_pool_placement_pin_owner(AvPool *pool, const char *domain_uuid, const char *project, const char *user)
{
    AvPoolPlacement *record = (AvPoolPlacement *)av_pool_placement_find(pool, domain_uuid);

    if (!record)
        return FALSE;
    if (project) {
        g_free(record->owner_project);
        record->owner_project = g_strdup(project);
    }
    if (user) {
        g_free(record->owner_user);
        record->owner_user = g_strdup(user);
    }
    return TRUE;
}

/* See av-pool-placement.h. */
gboolean
av_pool_owner_resolve(const AvPool *pool, gboolean metadata_trusted, AvOwner *owner, GError **error)
{
    const AvPoolPlacement *record = av_pool_placement_find(pool, owner->domain_uuid);
    const char *pinned[] = { record ? record->owner_project : NULL, record ? record->owner_user : NULL };
    char **field[] = { &owner->nova_project, &owner->nova_user };
    static const char *const role[] = { "project", "user" };

    for (gsize i = 0; i < G_N_ELEMENTS(field); i++) {
        if (pinned[i] && *field[i] && strcmp(pinned[i], *field[i]) != 0) {
            g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                        "its metadata names the OpenStack %s '%s', but the operator pinned the domain to %s '%s' "
                        "('accelvirt define --%s'): a domain does not charge another %s; put back its <nova:owner> "
                        "or define it again with the right --%s",
                        role[i], *field[i], role[i], pinned[i], role[i], role[i], role[i]);
            return FALSE;
        }
    }
    for (gsize i = 0; i < G_N_ELEMENTS(field); i++) {
        if (pinned[i] || !metadata_trusted) {
            g_free(*field[i]);
            *field[i] = g_strdup(pinned[i]);
        }
    }
    return TRUE;
}

/* See av-pool-placement.h. */
void
av_pool_placement_forget(AvPool *pool, const char *domain_uuid)
{
    const AvPoolPlacement *record = av_pool_placement_find(pool, domain_uuid);

    if (record)
        g_ptr_array_remove(pool->placements, (gpointer)record);
}

/* See av-place.h: copies everything. */
void
av_pool_placement_record(AvPool *pool, const char *domain_uuid, const char *domain_name, const GPtrArray *requests,
                         const AvPlacement *placement)
{
    AvPoolPlacement *record = av_pool_placement_new(domain_uuid, domain_name);
    const AvPoolPlacement *earlier = av_pool_placement_find(pool, domain_uuid);

    if (earlier) {
        record->owner_project = g_strdup(earlier->owner_project);
        record->owner_user = g_strdup(earlier->owner_user);
    }
    av_pool_placement_forget(pool, domain_uuid);
    record->numa_node = placement->numa_node;
    for (guint i = 0; i < requests->len; i++) {
        const AvRequest *r = g_ptr_array_index(requests, i);
        AvRequest *copy = av_request_new(r->profile, r->count);

        copy->granularity_set = r->granularity_set;
        copy->granularity = r->granularity;
        copy->numa_any = r->numa_any;
        copy->bitstream = g_strdup(r->bitstream);
        copy->bitstream_sha256 = g_strdup(r->bitstream_sha256);
        copy->p2p = r->p2p;
        g_ptr_array_add(record->requests, copy);
    }
    for (guint i = 0; placement->items && i < placement->items->len; i++)
        g_ptr_array_add(record->items, av_placed_item_copy(g_ptr_array_index(placement->items, i)));
    g_ptr_array_add(pool->placements, record);
}

/* --- pool.json -------------------------------------------------------------------- */

/* A request's p2p as pool.json writes it (the values of <av:request p2p=>),
 * NULL for none. */
static const char *
av_pool_p2p_to_string(AvP2p p2p)
{
    switch (p2p) {
    case AV_P2P_REQUIRED:
        return "required";
    case AV_P2P_PREFERRED:
        return "preferred";
    case AV_P2P_NONE:
        break;
    }
    return NULL;
}

/* See av-pool-private.h.  Caller owns the reference. */
json_t *
av_pool_placements_to_json(const GPtrArray *placements)
{
    json_t *array = json_array();

    for (guint i = 0; i < placements->len; i++) {
        const AvPoolPlacement *record = g_ptr_array_index(placements, i);
        json_t *requests = json_array();
        json_t *items = json_array();

        for (guint j = 0; j < record->requests->len; j++) {
            const AvRequest *r = g_ptr_array_index(record->requests, j);
            json_t *obj = json_pack("{s:s,s:i,s:o,s:b}", "profile", r->profile, "count", (int)r->count,
                                    "granularity",
                                    r->granularity_set ? json_string(av_granularity_to_string(r->granularity))
                                                       : json_null(),
                                    "numa_any", r->numa_any);

            /* Only when set: a pool.json of a domain without bitstreams stays as it was. */
            if (r->bitstream)
                json_object_set_new(obj, "bitstream", json_string(r->bitstream));
            if (r->bitstream_sha256)
                json_object_set_new(obj, "bitstream_sha256", json_string(r->bitstream_sha256));
            /* Issue 16: only when asked for, as the bitstream. */
            if (av_pool_p2p_to_string(r->p2p))
                json_object_set_new(obj, "p2p", json_string(av_pool_p2p_to_string(r->p2p)));
            json_array_append_new(requests, obj);
        }
        for (guint j = 0; j < record->items->len; j++) {
            const AvPlacedItem *item = g_ptr_array_index(record->items, j);
            json_t *obj = json_pack("{s:s,s:s,s:o,s:o,s:o,s:o,s:i}", "profile", item->profile, "attach",
                                    av_attach_to_string(item->attach), "identity",
                                    av_json_string_or_null(item->identity), "address",
                                    av_json_string_or_null(item->pci_address), "mdev_uuid",
                                    av_json_string_or_null(item->mdev_uuid), "usb_bus_path",
                                    av_json_string_or_null(item->usb_bus_path), "numa_node", item->numa_node);

            if (item->bitstream)
                json_object_set_new(obj, "bitstream", json_string(item->bitstream));
            if (item->netdev)
                json_object_set_new(obj, "netdev", json_string(item->netdev));
            json_array_append_new(items, obj);
        }
        json_t *obj = json_pack("{s:s,s:o,s:i,s:o,s:o}", "domain_uuid", record->domain_uuid, "domain_name",
                                av_json_string_or_null(record->domain_name), "numa_node", record->numa_node,
                                "requests", requests, "devices", items);

        /* Only when pinned: other records stay as they were. */
        if (record->owner_project || record->owner_user)
            json_object_set_new(obj, "owner", json_pack("{s:o,s:o}", "project",
                                                        av_json_string_or_null(record->owner_project), "user",
                                                        av_json_string_or_null(record->owner_user)));
        json_array_append_new(array, obj);
    }
    return array;
}

static gboolean
av_pool_load_attach(const char *name, AvAttach *ret_attach)
{
    static const AvAttach all[] = { AV_ATTACH_VFIO_PCI, AV_ATTACH_MDEV, AV_ATTACH_SRIOV_VF, AV_ATTACH_USB,
                                    AV_ATTACH_NETDEV };

    for (guint i = 0; i < G_N_ELEMENTS(all); i++) {
        if (g_strcmp0(name, av_attach_to_string(all[i])) == 0) {
            *ret_attach = all[i];
            return TRUE;
        }
    }
    return FALSE;
}

static gboolean
av_pool_load_granularity(const char *name, AvGranularity *ret)
{
    static const AvGranularity all[] = { AV_GRANULARITY_FUNCTION, AV_GRANULARITY_REGION, AV_GRANULARITY_CARD };

    for (guint i = 0; i < G_N_ELEMENTS(all); i++) {
        if (g_strcmp0(name, av_granularity_to_string(all[i])) == 0) {
            *ret = all[i];
            return TRUE;
        }
    }
    return FALSE;
}

/* A hex SHA-256: 64 lower-case hex digits. */
static gboolean
av_pool_sha256_valid(const char *s)
{
    return av_rom_sha256_is_valid(s) && !g_str_equal(s, AV_ROM_NONE);
}

/* The optional string member @key of @obj (absent in older
 * pool.json): *ret_value NULL when absent. */
static gboolean
av_pool_load_optional_string(const AvPoolLoad *ld, json_t *obj, const char *jpath, const char *key,
                             char **ret_value, GError **error)
{
    if (!json_object_get(obj, key)) {
        *ret_value = NULL;
        return TRUE;
    }
    return av_pool_load_string(ld, obj, jpath, key, FALSE, ret_value, error);
}

static gboolean
av_pool_load_request(const AvPoolLoad *ld, json_t *obj, const char *jpath, GPtrArray *requests, GError **error)
{
    static const char *const keys[] = { "profile", "count", "granularity", "numa_any", NULL };
    static const char *const optional[] = { "bitstream", "bitstream_sha256", "p2p", NULL };
    g_autofree char *profile = NULL;
    g_autofree char *granularity = NULL;
    g_autofree char *bitstream = NULL;
    g_autofree char *sha256 = NULL;
    g_autofree char *p2p = NULL;
    g_autoptr(AvRequest) r = NULL;
    gint64 count = 0;

    if (!json_is_object(obj))
        return av_pool_load_fail(ld, error, jpath, "expected an object");
    if (!av_pool_load_keys_opt(ld, obj, jpath, keys, optional, error) ||
        !av_pool_load_string(ld, obj, jpath, "profile", FALSE, &profile, error) ||
        !av_pool_load_int(ld, obj, jpath, "count", 1, 4096, &count, error) ||
        !av_pool_load_string(ld, obj, jpath, "granularity", TRUE, &granularity, error) ||
        !av_pool_load_optional_string(ld, obj, jpath, "bitstream", &bitstream, error) ||
        !av_pool_load_optional_string(ld, obj, jpath, "bitstream_sha256", &sha256, error) ||
        !av_pool_load_optional_string(ld, obj, jpath, "p2p", &p2p, error))
        return FALSE;
    if ((bitstream && !av_bitstream_ref_is_valid(bitstream)) || (sha256 && !av_pool_sha256_valid(sha256)) ||
        (!bitstream != !sha256)) {
        g_autofree char *sub = g_strdup_printf("%s/%s", jpath, bitstream && av_bitstream_ref_is_valid(bitstream)
                                                                   ? "bitstream_sha256" : "bitstream");
        return av_pool_load_fail(ld, error, sub, "expected a bitstream name or SHA-256 and the SHA-256 it "
                                 "resolved to, both or neither");
    }
    if (!av_profile_name_is_valid(profile) || !json_is_boolean(json_object_get(obj, "numa_any"))) {
        g_autofree char *sub = g_strdup_printf("%s/%s", jpath, av_profile_name_is_valid(profile) ? "numa_any"
                                                                                                  : "profile");
        return av_pool_load_fail(ld, error, sub, "expected a profile name and a boolean numa_any");
    }
    r = av_request_new(profile, (guint)count);
    r->numa_any = json_is_true(json_object_get(obj, "numa_any"));
    if (granularity) {
        if (!av_pool_load_granularity(granularity, &r->granularity)) {
            g_autofree char *sub = g_strdup_printf("%s/granularity", jpath);
            return av_pool_load_fail(ld, error, sub, "expected card, region or function");
        }
        r->granularity_set = TRUE;
    }
    r->bitstream = g_steal_pointer(&bitstream);
    r->bitstream_sha256 = g_steal_pointer(&sha256);
    if (p2p) {
        if (g_str_equal(p2p, "required")) {
            r->p2p = AV_P2P_REQUIRED;
        } else if (g_str_equal(p2p, "preferred")) {
            r->p2p = AV_P2P_PREFERRED;
        } else {
            g_autofree char *sub = g_strdup_printf("%s/p2p", jpath);
            return av_pool_load_fail(ld, error, sub, "expected required or preferred");
        }
    }
    g_ptr_array_add(requests, g_steal_pointer(&r));
    return TRUE;
}

static gboolean
av_pool_load_item(const AvPoolLoad *ld, json_t *obj, const char *jpath, GPtrArray *items, GError **error)
{
    static const char *const keys[] = { "profile", "attach", "identity", "address", "mdev_uuid", "usb_bus_path",
                                        "numa_node", NULL };
    static const char *const optional[] = { "bitstream", "netdev", NULL };
    g_autoptr(AvPlacedItem) item = g_new0(AvPlacedItem, 1);
    g_autofree char *attach = NULL;
    gint64 node = -1;
    const char *bad = NULL;

    if (!json_is_object(obj))
        return av_pool_load_fail(ld, error, jpath, "expected an object");
    if (!av_pool_load_keys_opt(ld, obj, jpath, keys, optional, error) ||
        !av_pool_load_string(ld, obj, jpath, "profile", FALSE, &item->profile, error) ||
        !av_pool_load_string(ld, obj, jpath, "attach", FALSE, &attach, error) ||
        !av_pool_load_string(ld, obj, jpath, "identity", TRUE, &item->identity, error) ||
        !av_pool_load_string(ld, obj, jpath, "address", TRUE, &item->pci_address, error) ||
        !av_pool_load_string(ld, obj, jpath, "mdev_uuid", TRUE, &item->mdev_uuid, error) ||
        !av_pool_load_string(ld, obj, jpath, "usb_bus_path", TRUE, &item->usb_bus_path, error) ||
        !av_pool_load_int(ld, obj, jpath, "numa_node", -1, G_MAXINT, &node, error) ||
        !av_pool_load_optional_string(ld, obj, jpath, "bitstream", &item->bitstream, error) ||
        !av_pool_load_optional_string(ld, obj, jpath, "netdev", &item->netdev, error))
        return FALSE;
    item->numa_node = (int)node;
    if (!av_profile_name_is_valid(item->profile))
        bad = "profile";
    else if (!av_pool_load_attach(attach, &item->attach))
        bad = "attach";
    else if (item->pci_address && !av_pci_address_is_valid(item->pci_address))
        bad = "address";
    else if (item->mdev_uuid && !av_uuid_is_valid(item->mdev_uuid))
        bad = "mdev_uuid";
    else if (item->usb_bus_path && !av_usb_bus_path_is_valid(item->usb_bus_path))
        bad = "usb_bus_path";
    else if (item->netdev && (!av_netdev_name_is_valid(item->netdev) || !item->pci_address))
        bad = "netdev";
    else if (item->bitstream && (!av_pool_sha256_valid(item->bitstream) || !item->pci_address))
        bad = "bitstream";
    if (bad) {
        g_autofree char *sub = g_strdup_printf("%s/%s", jpath, bad);
        return av_pool_load_fail(ld, error, sub, "not a valid %s", bad);
    }
    g_ptr_array_add(items, g_steal_pointer(&item));
    return TRUE;
}

/* See av-pool-private.h. */
gboolean
av_pool_load_placements(const AvPoolLoad *ld, json_t *v, GPtrArray *placements, GError **error)
{
    static const char *const keys[] = { "domain_uuid", "domain_name", "numa_node", "requests", "devices", NULL };
    static const char *const optional[] = { "owner", NULL };

    if (!v)
        return TRUE;
    if (!json_is_array(v))
        return av_pool_load_fail(ld, error, "placements", "expected an array");
    for (guint i = 0; i < json_array_size(v); i++) {
        g_autofree char *jpath = g_strdup_printf("placements/%u", i);
        json_t *obj = json_array_get(v, i);
        g_autofree char *uuid = NULL;
        g_autofree char *name = NULL;
        AvPoolPlacement *record;
        json_t *requests, *items;
        gint64 node = -1;

        if (!json_is_object(obj))
            return av_pool_load_fail(ld, error, jpath, "expected an object");
        if (!av_pool_load_keys_opt(ld, obj, jpath, keys, optional, error) ||
            !av_pool_load_string(ld, obj, jpath, "domain_uuid", FALSE, &uuid, error) ||
            !av_pool_load_string(ld, obj, jpath, "domain_name", TRUE, &name, error) ||
            !av_pool_load_int(ld, obj, jpath, "numa_node", -1, G_MAXINT, &node, error))
            return FALSE;
        requests = json_object_get(obj, "requests");
        items = json_object_get(obj, "devices");
        if (!av_uuid_is_valid(uuid) || !json_is_array(requests) || !json_is_array(items) ||
            av_pool_placement_find_in(placements, uuid)) {
            g_autofree char *sub = g_strdup_printf("%s/%s", jpath, !av_uuid_is_valid(uuid) ? "domain_uuid"
                                                   : !json_is_array(requests) ? "requests" : !json_is_array(items)
                                                   ? "devices" : "domain_uuid");
            return av_pool_load_fail(ld, error, sub, "expected a lower-case UUID recorded once, and arrays of "
                                     "requests and devices");
        }
        record = av_pool_placement_new(uuid, name);
        record->numa_node = (int)node;
        g_ptr_array_add(placements, record);
        if (json_object_get(obj, "owner")) {
            static const char *const owner_keys[] = { "project", "user", NULL };
            g_autofree char *sub = g_strdup_printf("%s/owner", jpath);
            json_t *owner = json_object_get(obj, "owner");

            if (!json_is_object(owner))
                return av_pool_load_fail(ld, error, sub, "expected an object {\"project\", \"user\"}");
            if (!av_pool_load_keys(ld, owner, sub, owner_keys, error) ||
                !av_pool_load_string(ld, owner, sub, "project", TRUE, &record->owner_project, error) ||
                !av_pool_load_string(ld, owner, sub, "user", TRUE, &record->owner_user, error))
                return FALSE;
            if ((record->owner_project && !av_openstack_id_is_valid(record->owner_project)) ||
                (record->owner_user && !av_openstack_id_is_valid(record->owner_user)) ||
                (!record->owner_project && !record->owner_user))
                return av_pool_load_fail(ld, error, sub, "expected an OpenStack project or user id (or both)");
        }
        for (guint j = 0; j < json_array_size(requests); j++) {
            g_autofree char *sub = g_strdup_printf("%s/requests/%u", jpath, j);

            if (!av_pool_load_request(ld, json_array_get(requests, j), sub, record->requests, error))
                return FALSE;
        }
        for (guint j = 0; j < json_array_size(items); j++) {
            g_autofree char *sub = g_strdup_printf("%s/devices/%u", jpath, j);

            if (!av_pool_load_item(ld, json_array_get(items, j), sub, record->items, error))
                return FALSE;
        }
    }
    return TRUE;
}
