/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: making and destroying an NVIDIA vGPU on an SR-IOV VF.  See
 * av-vgpu.h; the sysfs interface is described in src/pci/av-pci-vgpu.c. */
#include "config.h"

#include "av-vgpu.h"

#include <errno.h>

#include "pci/av-pci.h"
#include "util/av-error.h"

static int
av_vgpu_write(const AvRoot *root, const AvKernelOps *ops, const char *address, guint id)
{
    g_autofree char *path = av_sys_path("bus/pci/devices/%s/nvidia/current_vgpu_type", address);
    g_autofree char *value = g_strdup_printf("%u", id);

    return ops->write(root, path, value);
}

/* "L40S-1Q, L40S-2Q" of @types, or "none". */
static char *
av_vgpu_types_describe(const GPtrArray *types)
{
    GString *text = g_string_new(NULL);

    for (guint i = 0; i < types->len && i < 16; i++) {
        const AvVgpuType *t = g_ptr_array_index(types, i);

        g_string_append_printf(text, "%s%s (%u)", i ? ", " : "", t->name, t->id);
    }
    if (types->len > 16)
        g_string_append_printf(text, " and %u more", types->len - 16);
    if (types->len == 0)
        g_string_append(text, "none");
    return g_string_free(text, FALSE);
}

/* See av-vgpu.h. */
gboolean
av_vgpu_set_type(const AvRoot *root, const AvKernelOps *ops, const char *address, const char *spec,
                 guint *ret_id, char **ret_name, GError **error)
{
    g_autoptr(GPtrArray) creatable = NULL;
    const AvVgpuType *type;
    guint current = 0, after = 0;
    int r;

    if (!av_pci_address_is_valid(address) || !av_vgpu_type_spec_is_valid(spec)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "'%s' is not a VF address or '%s' not a vGPU type",
                    address ? address : "(null)", spec ? spec : "(null)");
        return FALSE;
    }
    r = av_pci_vgpu_read(root, address, &current, &creatable);
    if (r == -ENOENT) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot make a vGPU of type '%s' on %s: it has no nvidia/current_vgpu_type (is NVIDIA's vGPU "
                    "Manager loaded, and is %s a VF of a GPU it serves?)", spec, address, address);
        return FALSE;
    }
    if (r < 0)
        return av_error_errno(error, r, "cannot read the vGPU state of %s", address);
    if (current != 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "cannot make a vGPU of type '%s' on %s: it has one of type %u already", spec, address, current);
        return FALSE;
    }
    type = av_vgpu_types_find(creatable, spec);
    if (!type) {
        g_autofree char *offered = av_vgpu_types_describe(creatable);

        g_set_error(error, AV_ERROR, AV_ERROR_NO_CAPACITY,
                    "cannot make a vGPU of type '%s' on %s: its GPU offers %s now (a GPU that serves one vGPU type "
                    "at a time offers no other while one is made)", spec, address, offered);
        return FALSE;
    }
    r = av_vgpu_write(root, ops, address, type->id);
    if (r < 0)
        return av_error_errno(error, r, "cannot make a vGPU of type %s (%u) on %s", type->name, type->id, address);
    r = av_pci_vgpu_read(root, address, &after, NULL);
    if (r < 0 || after != type->id) {
        g_autofree char *read = r < 0 ? g_strdup(g_strerror(-r)) : g_strdup_printf("%u", after);

        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "made a vGPU of type %s (%u) on %s, but its current_vgpu_type reads %s", type->name, type->id,
                    address, read);
        return FALSE;
    }
    *ret_id = type->id;
    *ret_name = g_strdup(type->name);
    return TRUE;
}

/* See av-vgpu.h. */
gboolean
av_vgpu_clear_type(const AvRoot *root, const AvKernelOps *ops, const char *address, guint *ret_was, GError **error)
{
    guint current = 0, after = 0;
    int r;

    if (!av_pci_address_is_valid(address)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "'%s' is not a VF address", address ? address : "(null)");
        return FALSE;
    }
    r = av_pci_vgpu_read(root, address, &current, NULL);
    if (r < 0)
        return av_error_errno(error, r, "cannot read the vGPU type of %s", address);
    if (ret_was)
        *ret_was = current;
    if (current == 0)
        return TRUE;
    r = av_vgpu_write(root, ops, address, 0);
    if (r < 0)
        return av_error_errno(error, r, "cannot destroy the vGPU (type %u) of %s", current, address);
    r = av_pci_vgpu_read(root, address, &after, NULL);
    if (r < 0 || after != 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "destroyed the vGPU (type %u) of %s, but its current_vgpu_type reads %s", current, address,
                    r < 0 ? g_strerror(-r) : "a type still");
        return FALSE;
    }
    return TRUE;
}
