/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what handing devices to a domain changes on the host, for the
 * hook's prepare and `accelvirt attach` alike (av-binding.h). */
#include "config.h"

#include "lifecycle/av-binding.h"

#include <syslog.h>

#include "util/av-error.h"
#include "util/av-point.h"
#include "vfio/av-vgpu.h"

static void
av_binding_bind_free(AvBindingBind *bind)
{
    if (!bind)
        return;
    g_free(bind->address);
    g_free(bind->original_driver);
    g_free(bind->driver);
    g_free(bind->first);
    g_free(bind);
}

static void
av_binding_vgpu_free(AvBindingVgpu *v)
{
    if (!v)
        return;
    g_free(v->address);
    g_free(v->type);
    g_free(v);
}

static void
av_binding_mdev_free(AvBindingMdev *m)
{
    if (!m)
        return;
    g_free(m->uuid);
    g_free(m->parent);
    g_free(m->type);
    g_free(m->profile);
    g_free(m->identity);
    g_free(m);
}

static void
av_binding_note(const AvBinding *b, int priority, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

static void
av_binding_note(const AvBinding *b, int priority, const char *fmt, ...)
{
    g_autofree char *message = NULL;
    va_list ap;

    if (!b->note)
        return;
    va_start(ap, fmt);
    message = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    b->note(b->note_data, priority, message);
}

/* See av-binding.h. */
AvBinding *
av_binding_new(const AvRoot *root, const AvKernelOps *ops, AvBindingNoteFunc note, gpointer note_data)
{
    AvBinding *b = g_new0(AvBinding, 1);

    b->root = root;
    b->ops = ops;
    b->note = note;
    b->note_data = note_data;
    b->binds = g_ptr_array_new_with_free_func((GDestroyNotify)av_binding_bind_free);
    b->vgpus = g_ptr_array_new_with_free_func((GDestroyNotify)av_binding_vgpu_free);
    b->mdevs = g_ptr_array_new_with_free_func((GDestroyNotify)av_binding_mdev_free);
    b->groups = g_array_new(FALSE, FALSE, sizeof(int));
    return b;
}

/* See av-binding.h. */
void
av_binding_free(AvBinding *b)
{
    if (!b)
        return;
    g_ptr_array_unref(b->binds);
    g_ptr_array_unref(b->vgpus);
    g_ptr_array_unref(b->mdevs);
    g_array_unref(b->groups);
    g_clear_pointer(&b->aliases, av_vfio_aliases_free);
    g_free(b);
}

/* --- the plan ------------------------------------------------------------------------------ */

/* See av-binding.h. */
gboolean
av_binding_plan_endpoint(AvBinding *b, const AvHost *host, const AvPolicy *policy, const char *address, int group,
                         const char *first, gboolean make_vgpu, GError **error)
{
    const AvPciDevice *pci = av_host_find_pci(host, address);
    const AvProfile *profile = pci ? av_policy_match_pci(policy, pci) : NULL;
    g_autofree char *driver = NULL;
    AvBindingBind *bind;

    if (profile && profile->vgpu_type) {
        if (make_vgpu)
            av_binding_add_vgpu(b, address, profile->vgpu_type, group);
        return TRUE;
    }
    /* modules.alias, read once for the whole plan. */
    if (!b->aliases_read) {
        b->aliases = av_vfio_aliases_load(b->root);
        b->aliases_read = TRUE;
    }
    if (pci && av_pci_driver_is_vfio(pci->driver)) {
        g_autofree char *note = av_vfio_kept_note(b->root, b->aliases, address, pci->driver,
                                                  profile ? profile->vfio_driver : NULL);

        if (note)
            av_binding_note(b, LOG_WARNING, "%s", note);
        return TRUE;
    }
    if (!av_vfio_choose_driver(b->root, b->aliases, address, profile ? profile->vfio_driver : NULL, &driver, error))
        return FALSE;
    if (pci && g_strcmp0(pci->driver, driver) == 0)
        return TRUE;
    bind = g_new0(AvBindingBind, 1);
    bind->address = g_strdup(address);
    bind->original_driver = g_strdup(pci ? pci->driver : NULL);
    bind->driver = g_steal_pointer(&driver);
    bind->first = g_strdup(first);
    bind->group = group;
    g_ptr_array_add(b->binds, bind);
    return TRUE;
}

/* See av-binding.h. */
void
av_binding_add_vgpu(AvBinding *b, const char *address, const char *type, int group)
{
    AvBindingVgpu *v = g_new0(AvBindingVgpu, 1);

    v->address = g_strdup(address);
    v->type = g_strdup(type);
    v->group = group;
    g_ptr_array_add(b->vgpus, v);
}

/* See av-binding.h. */
AvBindingMdev *
av_binding_add_mdev(AvBinding *b, const char *uuid, const char *parent, const char *type, const char *profile,
                    int node)
{
    AvBindingMdev *m = g_new0(AvBindingMdev, 1);

    m->uuid = g_strdup(uuid);
    m->parent = g_strdup(parent);
    m->type = g_strdup(type);
    m->profile = g_strdup(profile);
    m->identity = av_pool_identity_mdev(uuid);
    m->node = node;
    g_ptr_array_add(b->mdevs, m);
    return m;
}

/* See av-binding.h. */
gboolean
av_binding_has_group(const AvBinding *b, int group)
{
    for (guint i = 0; i < b->groups->len; i++)
        if (g_array_index(b->groups, int, i) == group)
            return TRUE;
    return FALSE;
}

/* See av-binding.h. */
void
av_binding_wait_group(AvBinding *b, int group)
{
    if (!av_binding_has_group(b, group))
        g_array_append_val(b->groups, group);
}

/* See av-binding.h. */
void
av_binding_record(const AvBinding *b, AvIntent *intent)
{
    for (guint i = 0; i < b->binds->len; i++) {
        const AvBindingBind *bind = g_ptr_array_index(b->binds, i);

        av_intent_add_bind(intent, bind->address, bind->original_driver);
    }
    for (guint i = 0; i < b->vgpus->len; i++)
        av_intent_add_vgpu(intent, ((const AvBindingVgpu *)g_ptr_array_index(b->vgpus, i))->address);
    for (guint i = 0; i < b->mdevs->len; i++) {
        const AvBindingMdev *m = g_ptr_array_index(b->mdevs, i);

        av_intent_add_mdev(intent, m->uuid, m->parent, m->type);
    }
}

/* --- apply and undo ------------------------------------------------------------------------ */

/* See av-binding.h. */
gboolean
av_binding_apply(AvBinding *b, GError **error)
{
    for (guint i = 0; i < b->binds->len; i++) {
        AvBindingBind *bind = g_ptr_array_index(b->binds, i);
        g_autofree char *original = NULL;

        if (!av_vfio_bind(b->root, b->ops, bind->address, bind->driver, &original, error))
            return FALSE;
        g_free(bind->original_driver);
        bind->original_driver = g_steal_pointer(&original);
        bind->bound = TRUE;
        av_binding_note(b, LOG_INFO, "bound %s to %s (it was on %s)", bind->address, bind->driver,
                        bind->original_driver ? bind->original_driver : "no driver");
        if (i == 0 && b->stop_bound_first && !av_root_is_host(b->root))
            av_point_stop(b->stop_bound_first);
    }
    /* A type its GPU does not offer refuses in one line. */
    for (guint i = 0; i < b->vgpus->len; i++) {
        AvBindingVgpu *v = g_ptr_array_index(b->vgpus, i);
        g_autofree char *name = NULL;
        guint id = 0;

        v->made = TRUE;
        if (!av_vgpu_set_type(b->root, b->ops, v->address, v->type, &id, &name, error))
            return FALSE;
        av_binding_note(b, LOG_INFO, "made a vGPU of type %s (%u) on %s", name, id, v->address);
    }
    for (guint i = 0; i < b->groups->len; i++)
        if (!av_vfio_wait_group_node(b->root, g_array_index(b->groups, int, i), AV_BINDING_VFIO_NODE_TIMEOUT_MS, error))
            return FALSE;
    for (guint i = 0; i < b->mdevs->len; i++) {
        AvBindingMdev *m = g_ptr_array_index(b->mdevs, i);

        if (!av_mdev_create(b->root, b->ops, m->parent, m->type, m->uuid, error)) {
            g_prefix_error(error, "cannot create mdev %s (profile '%s'): ", m->uuid, m->profile);
            return FALSE;
        }
        m->created = TRUE;
        av_binding_note(b, LOG_INFO, "created mdev %s of type %s on %s", m->uuid, m->type, m->parent);
    }
    return TRUE;
}

/* Keeps the first failure of an undo in @error; notes each. */
static void
av_binding_undo_failed(const AvBinding *b, gboolean *ok, GError **error, GError *local, const char *fmt, ...)
    G_GNUC_PRINTF(5, 6);

static void
av_binding_undo_failed(const AvBinding *b, gboolean *ok, GError **error, GError *local, const char *fmt, ...)
{
    g_autofree char *what = NULL;
    va_list ap;

    va_start(ap, fmt);
    what = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    av_binding_note(b, LOG_ERR, "rollback: %s: %s", what, local->message);
    if (*ok)
        g_propagate_prefixed_error(error, local, "%s: ", what);
    else
        g_error_free(local);
    *ok = FALSE;
}

/* The mdevs (only @identity's unless NULL) when @mdevs, then the vGPUs and
 * binds (of IOMMU group @group only when @one_group) when @binds, newest
 * first. */
static gboolean
av_binding_undo_some(AvBinding *b, gboolean mdevs, const char *identity, gboolean binds, gboolean one_group,
                     int group, GError **error)
{
    gboolean ok = TRUE;

    for (guint i = mdevs ? b->mdevs->len : 0; i > 0; i--) {
        AvBindingMdev *m = g_ptr_array_index(b->mdevs, i - 1);
        GError *local = NULL;

        if (!m->created || (identity && g_strcmp0(identity, m->identity) != 0))
            continue;
        if (!av_mdev_remove(b->root, b->ops, m->uuid, &local)) {
            av_binding_undo_failed(b, &ok, error, local, "cannot remove mdev %s", m->uuid);
            continue;
        }
        m->created = FALSE;
        av_binding_note(b, LOG_INFO, "rollback: removed the mdev %s", m->uuid);
    }
    /* No tenant had the vGPUs made here: they go first. */
    for (guint i = binds ? b->vgpus->len : 0; i > 0; i--) {
        AvBindingVgpu *v = g_ptr_array_index(b->vgpus, i - 1);
        GError *local = NULL;

        if (!v->made || (one_group && v->group != group))
            continue;
        if (!av_vgpu_clear_type(b->root, b->ops, v->address, NULL, &local)) {
            av_binding_undo_failed(b, &ok, error, local, "cannot destroy the vGPU of %s", v->address);
            continue;
        }
        v->made = FALSE;
        av_binding_note(b, LOG_INFO, "rollback: destroyed the vGPU made on %s", v->address);
    }
    for (guint i = binds ? b->binds->len : 0; i > 0; i--) {
        AvBindingBind *bind = g_ptr_array_index(b->binds, i - 1);
        const char *drv = bind->original_driver ? bind->original_driver : "no driver";
        GError *local = NULL;

        if (!bind->bound || (one_group && bind->group != group))
            continue;
        if (!av_vfio_restore(b->root, b->ops, bind->address, bind->original_driver, &local)) {
            av_binding_undo_failed(b, &ok, error, local, "cannot give %s back to %s", bind->address, drv);
            continue;
        }
        bind->bound = FALSE;
        av_binding_note(b, LOG_INFO, "rollback: gave %s back to %s", bind->address, drv);
    }
    return ok;
}

/* See av-binding.h. */
gboolean
av_binding_undo(AvBinding *b, GError **error)
{
    return av_binding_undo_some(b, TRUE, NULL, TRUE, FALSE, -1, error);
}

/* See av-binding.h. */
gboolean
av_binding_undo_group(AvBinding *b, int group, GError **error)
{
    return av_binding_undo_some(b, FALSE, NULL, TRUE, TRUE, group, error);
}

/* See av-binding.h. */
gboolean
av_binding_undo_mdev(AvBinding *b, const char *identity, GError **error)
{
    return av_binding_undo_some(b, TRUE, identity, FALSE, FALSE, -1, error);
}

/* --- commit -------------------------------------------------------------------------------- */

/* See av-binding.h. */
void
av_binding_commit(const AvBinding *b, AvPool *pool)
{
    for (guint i = 0; i < b->binds->len; i++) {
        const AvBindingBind *bind = g_ptr_array_index(b->binds, i);
        AvPoolDevice *dev = av_pool_find_address(pool, AV_DEVICE_KIND_PCI, bind->address);
        AvPoolDevice *first = NULL;

        if (dev) {
            if (bind->original_driver && !av_pci_driver_is_vfio(bind->original_driver)) {
                g_free(dev->original_driver);
                dev->original_driver = g_strdup(bind->original_driver);
            }
        } else if (bind->first && (first = av_pool_find(pool, bind->first)) != NULL) {
            av_pool_device_add_companion(first, bind->address, bind->original_driver);
        }
    }
}

/* See av-binding.h. */
void
av_binding_drop_companions(const AvBinding *b, AvPoolDevice *dev)
{
    for (guint i = 0; i < b->binds->len; i++) {
        const AvBindingBind *bind = g_ptr_array_index(b->binds, i);

        if (bind->bound || g_strcmp0(bind->first, dev->identity) != 0)
            continue;
        for (guint j = 0; j < dev->companions->len; j++)
            if (g_str_equal(((const AvCompanion *)g_ptr_array_index(dev->companions, j))->address, bind->address))
                g_ptr_array_remove_index(dev->companions, j--);
    }
}
