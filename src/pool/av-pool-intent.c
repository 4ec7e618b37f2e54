/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: write-ahead records of a prepare (av-pool.h, "intents").
 *
 * A prepare binds endpoints to vfio-pci and creates mdevs before it may
 * record the devices in use.  Killed in between, it used to leave an
 * endpoint on vfio-pci whose host driver nobody remembered (the next
 * prepare found it there and took vfio-pci for its original driver) and an
 * mdev nobody would remove.  So the plan is saved first; see
 * av_pool_intents_undo() for what the next holder of the lock does with a
 * plan whose author died. */
#include "config.h"

#include "av-pool-private.h"

#include <string.h>

#include "util/av-error.h"
#include "util/av-json.h"
#include "util/av-names.h"
#include "vfio/av-vfio.h"
#include "vfio/av-vgpu.h"


static void
av_intent_mdev_free(AvIntentMdev *m)
{
    if (!m)
        return;
    g_free(m->uuid);
    g_free(m->parent);
    g_free(m->type);
    g_free(m);
}

static void
av_intent_vfs_free(AvIntentVfs *v)
{
    if (!v)
        return;
    g_free(v->pf);
    g_free(v);
}

/* See av-pool.h.  Caller frees. */
AvIntent *
av_intent_new(const char *domain_uuid, const char *domain_name)
{
    AvIntent *intent = g_new0(AvIntent, 1);

    intent->id = g_uuid_string_random();
    intent->domain_uuid = g_strdup(domain_uuid);
    intent->domain_name = g_strdup(domain_name);
    intent->since = av_pool_now();
    intent->binds = g_ptr_array_new_with_free_func((GDestroyNotify)av_companion_free);
    intent->mdevs = g_ptr_array_new_with_free_func((GDestroyNotify)av_intent_mdev_free);
    intent->claims = g_ptr_array_new_with_free_func(g_free);
    intent->vfs = g_ptr_array_new_with_free_func((GDestroyNotify)av_intent_vfs_free);
    intent->vgpus = g_ptr_array_new_with_free_func(g_free);
    return intent;
}

/* Frees @intent.  NULL is a no-op. */
void
av_intent_free(AvIntent *intent)
{
    if (!intent)
        return;
    g_free(intent->id);
    g_free(intent->domain_uuid);
    g_free(intent->domain_name);
    g_ptr_array_unref(intent->binds);
    g_ptr_array_unref(intent->mdevs);
    g_ptr_array_unref(intent->claims);
    g_ptr_array_unref(intent->vfs);
    g_ptr_array_unref(intent->vgpus);
    g_free(intent->undo_error);
    g_free(intent);
}

/* See av-pool.h: copies @address and @original_driver. */
void
av_intent_add_bind(AvIntent *intent, const char *address, const char *original_driver)
{
    g_ptr_array_add(intent->binds, av_companion_new(address, original_driver));
}

/* See av-pool.h: copies its arguments. */
void
av_intent_add_mdev(AvIntent *intent, const char *uuid, const char *parent, const char *type)
{
    AvIntentMdev *m = g_new0(AvIntentMdev, 1);

    m->uuid = g_strdup(uuid);
    m->parent = g_strdup(parent);
    m->type = g_strdup(type);
    g_ptr_array_add(intent->mdevs, m);
}

/* See av-pool.h: copies @address. */
void
av_intent_add_vgpu(AvIntent *intent, const char *address)
{
    g_ptr_array_add(intent->vgpus, g_strdup(address));
}

/* See av-pool.h: copies @identity. */
void
av_intent_add_claim(AvIntent *intent, const char *identity)
{
    g_ptr_array_add(intent->claims, g_strdup(identity));
}

/* See av-pool.h: copies @pf. */
void
av_intent_add_vfs(AvIntent *intent, const char *pf, guint from, guint to)
{
    AvIntentVfs *v = g_new0(AvIntentVfs, 1);

    v->pf = g_strdup(pf);
    v->from = from;
    v->to = to;
    g_ptr_array_add(intent->vfs, v);
}

/* See av-pool.h. */
AvIntent *
av_pool_intent_add(AvPool *pool, AvIntent *intent)
{
    g_ptr_array_add(pool->intents, intent);
    return intent;
}

/* See av-pool.h. */
void
av_pool_intent_remove(AvPool *pool, AvIntent *intent)
{
    g_ptr_array_remove(pool->intents, intent);
}

/* See av-pool.h.  Borrowed. */
GPtrArray *
av_pool_intents(const AvPool *pool)
{
    return pool->intents;
}

/* --- pool.json ---------------------------------------------------------------- */

static json_t *
av_intent_claims_json(const AvIntent *intent)
{
    json_t *claims = json_array();

    for (guint i = 0; i < intent->claims->len; i++)
        json_array_append_new(claims, json_string(g_ptr_array_index(intent->claims, i)));
    return claims;
}

/* See av-pool-private.h.  Caller owns the reference. */
json_t *
av_pool_intents_to_json(const GPtrArray *intents)
{
    json_t *array = json_array();

    for (guint i = 0; i < intents->len; i++) {
        const AvIntent *intent = g_ptr_array_index(intents, i);
        json_t *obj = json_object();
        json_t *binds = json_array();
        json_t *mdevs = json_array();

        for (guint j = 0; j < intent->binds->len; j++) {
            const AvCompanion *b = g_ptr_array_index(intent->binds, j);

            json_array_append_new(binds, json_pack("{s:s,s:o}", "address", b->address, "original_driver",
                                                   av_json_string_or_null(b->original_driver)));
        }
        for (guint j = 0; j < intent->mdevs->len; j++) {
            const AvIntentMdev *m = g_ptr_array_index(intent->mdevs, j);

            json_array_append_new(mdevs, json_pack("{s:s,s:s,s:s}", "uuid", m->uuid, "parent", m->parent,
                                                   "type", m->type));
        }
        json_object_set_new(obj, "id", json_string(intent->id));
        json_object_set_new(obj, "op", json_string("prepare"));
        json_object_set_new(obj, "domain_uuid", json_string(intent->domain_uuid));
        json_object_set_new(obj, "domain_name", av_json_string_or_null(intent->domain_name));
        json_object_set_new(obj, "since", json_integer(intent->since));
        json_object_set_new(obj, "binds", binds);
        json_object_set_new(obj, "mdevs", mdevs);
        json_object_set_new(obj, "claims", av_intent_claims_json(intent));
        if (intent->vfs->len > 0) {
            json_t *vfs = json_array();

            for (guint j = 0; j < intent->vfs->len; j++) {
                const AvIntentVfs *v = g_ptr_array_index(intent->vfs, j);

                json_array_append_new(vfs, json_pack("{s:s,s:I,s:I}", "pf", v->pf, "from", (json_int_t)v->from,
                                                     "to", (json_int_t)v->to));
            }
            json_object_set_new(obj, "vfs", vfs);
        }
        if (intent->vgpus->len > 0) {
            json_t *vgpus = json_array();

            for (guint j = 0; j < intent->vgpus->len; j++)
                json_array_append_new(vgpus, json_string(g_ptr_array_index(intent->vgpus, j)));
            json_object_set_new(obj, "vgpus", vgpus);
        }
        json_object_set_new(obj, "undo_error", av_json_string_or_null(intent->undo_error));
        json_array_append_new(array, obj);
    }
    return array;
}

/* "vfs": [{"pf", "from", "to"}] of an intent, optional. */
static gboolean
av_pool_load_intent_vfs(const AvPoolLoad *ld, json_t *vfs, const char *jpath, AvIntent *intent, GError **error)
{
    static const char *const vfs_keys[] = { "pf", "from", "to", NULL };

    if (!vfs)
        return TRUE;
    if (!json_is_array(vfs)) {
        g_autofree char *sub = g_strdup_printf("%s/vfs", jpath);
        return av_pool_load_fail(ld, error, sub, "expected an array");
    }
    for (guint i = 0; i < json_array_size(vfs); i++) {
        g_autofree char *sub = g_strdup_printf("%s/vfs/%u", jpath, i);
        g_autofree char *pf = NULL;
        json_t *v = json_array_get(vfs, i);
        gint64 from = 0, to = 0;

        if (!json_is_object(v))
            return av_pool_load_fail(ld, error, sub, "expected an object");
        if (!av_pool_load_keys(ld, v, sub, vfs_keys, error) ||
            !av_pool_load_string(ld, v, sub, "pf", FALSE, &pf, error) ||
            !av_pool_load_int(ld, v, sub, "from", 0, AV_POLICY_VFS_MAX, &from, error) ||
            !av_pool_load_int(ld, v, sub, "to", 0, AV_POLICY_VFS_MAX, &to, error))
            return FALSE;
        if (!av_pci_address_is_valid(pf)) {
            g_autofree char *at = g_strdup_printf("%s/pf", sub);
            return av_pool_load_fail(ld, error, at, "expected a PCI address");
        }
        av_intent_add_vfs(intent, pf, (guint)from, (guint)to);
    }
    return TRUE;
}

static gboolean
av_pool_load_intent(const AvPoolLoad *ld, json_t *obj, const char *jpath, AvIntent **ret_intent, GError **error)
{
    static const char *const keys[] = { "id", "op", "domain_uuid", "domain_name", "since", "binds", "mdevs",
                                        "claims", "undo_error", NULL };
    static const char *const optional[] = { "vfs", "vgpus", NULL };
    static const char *const bind_keys[] = { "address", "original_driver", NULL };
    static const char *const mdev_keys[] = { "uuid", "parent", "type", NULL };
    g_autoptr(AvIntent) intent = NULL;
    g_autofree char *id = NULL;
    g_autofree char *op = NULL;
    g_autofree char *uuid = NULL;
    g_autofree char *name = NULL;
    json_t *binds, *mdevs, *claims;
    gint64 since = 0;

    if (!json_is_object(obj))
        return av_pool_load_fail(ld, error, jpath, "expected an object");
    if (!av_pool_load_keys_opt(ld, obj, jpath, keys, optional, error) ||
        !av_pool_load_string(ld, obj, jpath, "id", FALSE, &id, error) ||
        !av_pool_load_string(ld, obj, jpath, "op", FALSE, &op, error) ||
        !av_pool_load_string(ld, obj, jpath, "domain_uuid", FALSE, &uuid, error) ||
        !av_pool_load_string(ld, obj, jpath, "domain_name", TRUE, &name, error) ||
        !av_pool_load_int(ld, obj, jpath, "since", 0, G_MAXINT64, &since, error))
        return FALSE;
    if (!av_uuid_is_valid(id) || !g_str_equal(op, "prepare")) {
        g_autofree char *sub = g_strdup_printf("%s/%s", jpath, av_uuid_is_valid(id) ? "op" : "id");
        return av_pool_load_fail(ld, error, sub, av_uuid_is_valid(id) ? "expected \"prepare\"" : "expected a UUID");
    }
    intent = av_intent_new(uuid, name);
    g_free(intent->id);
    intent->id = g_steal_pointer(&id);
    intent->since = since;
    if (!av_pool_load_string(ld, obj, jpath, "undo_error", TRUE, &intent->undo_error, error))
        return FALSE;
    binds = json_object_get(obj, "binds");
    mdevs = json_object_get(obj, "mdevs");
    claims = json_object_get(obj, "claims");
    if (!json_is_array(binds) || !json_is_array(mdevs) || !json_is_array(claims)) {
        g_autofree char *sub = g_strdup_printf("%s/%s", jpath, !json_is_array(binds) ? "binds"
                                               : !json_is_array(mdevs) ? "mdevs" : "claims");
        return av_pool_load_fail(ld, error, sub, "expected an array");
    }
    for (guint i = 0; i < json_array_size(claims); i++) {
        json_t *c = json_array_get(claims, i);

        if (!json_is_string(c) || json_string_length(c) == 0 || strlen(json_string_value(c)) != json_string_length(c)) {
            g_autofree char *sub = g_strdup_printf("%s/claims/%u", jpath, i);
            return av_pool_load_fail(ld, error, sub, "expected a device identity");
        }
        av_intent_add_claim(intent, json_string_value(c));
    }
    for (guint i = 0; i < json_array_size(binds); i++) {
        g_autofree char *sub = g_strdup_printf("%s/binds/%u", jpath, i);
        g_autofree char *address = NULL;
        g_autofree char *driver = NULL;
        json_t *b = json_array_get(binds, i);

        if (!json_is_object(b))
            return av_pool_load_fail(ld, error, sub, "expected an object");
        if (!av_pool_load_keys(ld, b, sub, bind_keys, error) ||
            !av_pool_load_string(ld, b, sub, "address", FALSE, &address, error) ||
            !av_pool_load_string(ld, b, sub, "original_driver", TRUE, &driver, error))
            return FALSE;
        if (!av_pci_address_is_valid(address) || (driver && !av_driver_name_is_valid(driver))) {
            g_autofree char *at = g_strdup_printf("%s/%s", sub, av_pci_address_is_valid(address) ? "original_driver"
                                                                                                  : "address");
            return av_pool_load_fail(ld, error, at, av_pci_address_is_valid(address) ? "expected a driver name"
                                                                                     : "expected a PCI address");
        }
        av_intent_add_bind(intent, address, driver);
    }
    for (guint i = 0; i < json_array_size(mdevs); i++) {
        g_autofree char *sub = g_strdup_printf("%s/mdevs/%u", jpath, i);
        g_autofree char *muuid = NULL;
        g_autofree char *parent = NULL;
        g_autofree char *type = NULL;
        json_t *m = json_array_get(mdevs, i);

        if (!json_is_object(m))
            return av_pool_load_fail(ld, error, sub, "expected an object");
        if (!av_pool_load_keys(ld, m, sub, mdev_keys, error) ||
            !av_pool_load_string(ld, m, sub, "uuid", FALSE, &muuid, error) ||
            !av_pool_load_string(ld, m, sub, "parent", FALSE, &parent, error) ||
            !av_pool_load_string(ld, m, sub, "type", FALSE, &type, error))
            return FALSE;
        if (!av_uuid_is_valid(muuid) || !av_mdev_parent_name_is_valid(parent) || !av_mdev_type_id_is_valid(type)) {
            g_autofree char *at = g_strdup_printf("%s/%s", sub, !av_uuid_is_valid(muuid) ? "uuid"
                                                  : !av_mdev_parent_name_is_valid(parent) ? "parent" : "type");
            return av_pool_load_fail(ld, error, at, "expected an mdev UUID, parent name and type id");
        }
        av_intent_add_mdev(intent, muuid, parent, type);
    }
    if (!av_pool_load_intent_vfs(ld, json_object_get(obj, "vfs"), jpath, intent, error))
        return FALSE;
    {
        json_t *vgpus = json_object_get(obj, "vgpus");

        if (vgpus && !json_is_array(vgpus)) {
            g_autofree char *sub = g_strdup_printf("%s/vgpus", jpath);
            return av_pool_load_fail(ld, error, sub, "expected an array");
        }
        for (guint i = 0; vgpus && i < json_array_size(vgpus); i++) {
            json_t *a = json_array_get(vgpus, i);

            if (!json_is_string(a) || !av_pci_address_is_valid(json_string_value(a))) {
                g_autofree char *sub = g_strdup_printf("%s/vgpus/%u", jpath, i);
                return av_pool_load_fail(ld, error, sub, "expected a PCI address");
            }
            av_intent_add_vgpu(intent, json_string_value(a));
        }
    }
    if (!av_uuid_is_valid(intent->domain_uuid)) {
        g_autofree char *sub = g_strdup_printf("%s/domain_uuid", jpath);
        return av_pool_load_fail(ld, error, sub, "expected a lower-case UUID");
    }
    *ret_intent = g_steal_pointer(&intent);
    return TRUE;
}

/* See av-pool-private.h. */
gboolean
av_pool_load_intents(const AvPoolLoad *ld, json_t *v, GPtrArray *intents, GError **error)
{
    if (!v)
        return TRUE;
    if (!json_is_array(v))
        return av_pool_load_fail(ld, error, "intents", "expected an array");
    for (guint i = 0; i < json_array_size(v); i++) {
        g_autofree char *jpath = g_strdup_printf("intents/%u", i);
        AvIntent *intent = NULL;

        if (!av_pool_load_intent(ld, json_array_get(v, i), jpath, &intent, error))
            return FALSE;
        g_ptr_array_add(intents, intent);
    }
    return TRUE;
}

/* --- undo --------------------------------------------------------------------- */

/* Who holds the IOMMU group of the VFIO device @address (on vfio-pci or a
 * variant, or a vGPU VF on NVIDIA's driver: av_vfio_device_is_vfio()), a
 * process or "unknown (...)" when it cannot be told: see
 * av_vfio_group_holder().  NULL when nobody does, or it is no VFIO device
 * (then nobody can hold it through VFIO).  Caller frees. */
static char *
av_intent_endpoint_holder(const AvRoot *root, const char *address)
{
    g_autofree char *driver = av_vfio_current_driver(root, address);
    g_autofree char *link = av_sys_path("bus/pci/devices/%s/iommu_group", address);
    g_autofree char *group = NULL;
    guint64 n = 0;

    if (!av_vfio_device_is_vfio(root, address, driver))
        return NULL;
    if (av_root_link_name(root, link, &group) < 0 || !g_ascii_string_to_unsigned(group, 10, 0, G_MAXINT, &n, NULL))
        return NULL;
    return av_vfio_group_holder(root, (int)n);
}

/* Undoes @intent on the host: the mdevs first (a created mdev keeps its
 * parent busy), then every endpoint back to its recorded driver, newest
 * first.  Fills @done with what was done ({"restored": [{address, driver}],
 * "mdevs_removed": [uuid]}).  Tries everything; FALSE with the first
 * failure. */
static gboolean
av_intent_undo(AvPool *pool, const AvIntent *intent, const AvRoot *root, const AvKernelOps *ops, json_t *done,
               GError **error)
{
    json_t *restored = json_array();
    json_t *removed = json_array();
    gboolean ok = TRUE;

    char *holder = NULL;

    json_object_set_new(done, "restored", restored);
    json_object_set_new(done, "mdevs_removed", removed);
    /* The vGPUs it made (none of them ever had a tenant: the prepare died
     * before the domain could start), unless a process holds the VF. */
    if (intent->vgpus->len > 0)
        json_object_set_new(done, "vgpus_destroyed", json_array());
    for (guint i = intent->vgpus->len; i > 0; i--) {
        const char *address = g_ptr_array_index(intent->vgpus, i - 1);
        g_autoptr(GError) local = NULL;
        guint was = 0;

        if ((holder = av_intent_endpoint_holder(root, address))) {
            if (ok)
                g_set_error(error, AV_ERROR, AV_ERROR_IN_USE, "cannot destroy the vGPU made on %s: process %s holds "
                            "its IOMMU group", address, holder);
            ok = FALSE;
            g_clear_pointer(&holder, g_free);
            continue;
        }
        if (av_vgpu_clear_type(root, ops, address, &was, &local)) {
            if (was)
                json_array_append_new(json_object_get(done, "vgpus_destroyed"),
                                      json_pack("{s:s,s:I}", "address", address, "type", (json_int_t)was));
        } else if (ok) {
            g_propagate_prefixed_error(error, g_steal_pointer(&local), "cannot destroy the vGPU made on %s: ",
                                       address);
            ok = FALSE;
        }
    }
    for (guint i = intent->mdevs->len; i > 0; i--) {
        const AvIntentMdev *m = g_ptr_array_index(intent->mdevs, i - 1);
        g_autoptr(GError) local = NULL;

        if (av_mdev_remove(root, ops, m->uuid, &local)) {
            json_array_append_new(removed, json_string(m->uuid));
        } else if (ok) {
            g_propagate_prefixed_error(error, g_steal_pointer(&local), "cannot remove the mdev %s: ", m->uuid);
            ok = FALSE;
        }
    }
    for (guint i = intent->binds->len; i > 0; i--) {
        const AvCompanion *b = g_ptr_array_index(intent->binds, i - 1);
        g_autoptr(GError) local = NULL;

        /* Recorded on vfio-pci already: that is where it stays. */
        if (av_pci_driver_is_vfio(b->original_driver))
            continue;
        /* Never from under a process that holds it (the records of a dead
         * prepare keep its devices out of every prepare until undone, but
         * a device may have been given out by hand meanwhile). */
        if ((holder = av_intent_endpoint_holder(root, b->address))) {
            if (ok)
                g_set_error(error, AV_ERROR, AV_ERROR_IN_USE, "cannot give %s back to %s: process %s holds its "
                            "IOMMU group", b->address, b->original_driver ? b->original_driver : "no driver",
                            holder);
            ok = FALSE;
            g_clear_pointer(&holder, g_free);
            continue;
        }
        if (av_vfio_restore(root, ops, b->address, b->original_driver, &local)) {
            json_array_append_new(restored, json_pack("{s:s,s:o}", "address", b->address, "driver",
                                                      av_json_string_or_null(b->original_driver)));
        } else if (ok) {
            g_propagate_prefixed_error(error, g_steal_pointer(&local), "cannot give %s back to %s: ", b->address,
                                       b->original_driver ? b->original_driver : "no driver");
            ok = FALSE;
        }
    }
    /* Last, as the prepare raised them first: the VFs go once unbound. */
    if (intent->vfs->len > 0)
        json_object_set_new(done, "vfs", json_array());
    for (guint i = intent->vfs->len; ok && i > 0; i--) {
        const AvIntentVfs *v = g_ptr_array_index(intent->vfs, i - 1);

        if (!av_pool_vf_undo(pool, root, ops, v->pf, v->from, v->to, "rollback", error))
            return FALSE;
        json_array_append_new(json_object_get(done, "vfs"),
                              json_pack("{s:s,s:I}", "pf", v->pf, "numvfs", (json_int_t)v->from));
    }
    return ok;
}

/* See av-pool.h. */
gboolean
av_pool_intents_undo(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, gboolean *ret_changed,
                     GError **error)
{
    g_autoptr(GError) first = NULL;
    gboolean changed = FALSE;

    for (guint i = pool->intents->len; i > 0; i--) {
        AvIntent *intent = g_ptr_array_index(pool->intents, i - 1);
        g_autoptr(json_t) fields = json_object();
        g_autoptr(GError) local = NULL;

        json_object_set_new(fields, "intent", json_string(intent->id));
        json_object_set_new(fields, "domain_uuid", json_string(intent->domain_uuid));
        json_object_set_new(fields, "domain_name", av_json_string_or_null(intent->domain_name));
        json_object_set_new(fields, "reason", json_string("a prepare died before it recorded its devices "
                                                          "(or undid what it did): undone from its record"));
        /* Their moves to in-use that it journalled were never saved: the
         * pool holds them as before it, and no tenant had them. */
        json_object_set_new(fields, "claims", av_intent_claims_json(intent));
        if (av_intent_undo(pool, intent, root, ops, fields, &local)) {
            if (!av_pool_journal_append(pool, "rolled-back", fields, error))
                return FALSE;
            av_pool_intent_remove(pool, intent);
            changed = TRUE;
            continue;
        }
        if (g_strcmp0(intent->undo_error, local->message) != 0) {
            json_object_set_new(fields, "error", json_string(local->message));
            if (!av_pool_journal_append(pool, "rollback-failed", fields, error))
                return FALSE;
            g_free(intent->undo_error);
            intent->undo_error = g_strdup(local->message);
            changed = TRUE;
        }
        if (!first)
            first = g_steal_pointer(&local);
    }
    if (ret_changed)
        *ret_changed = *ret_changed || changed;
    if (first) {
        g_propagate_prefixed_error(error, g_steal_pointer(&first),
                                   "a prepare that died left devices this call could not give back: ");
        return FALSE;
    }
    return TRUE;
}
