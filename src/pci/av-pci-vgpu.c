/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: NVIDIA vGPU on SR-IOV virtual functions, as NVIDIA's vGPU
 * Manager (release 17 and later) offers it on kernels 6.8 and later, with
 * no mdev: the GPU is an SR-IOV PF on the nvidia driver, and each of its VFs
 * carries nvidia/creatable_vgpu_types (the types that can be made on it
 * now, "ID : NAME" lines under an "ID : vGPU Name" header) and
 * nvidia/current_vgpu_type (the type it has, 0 for none).  Writing a type's
 * ID to current_vgpu_type makes the vGPU, writing 0 destroys it.  A GPU
 * whose driver serves one type at a time lists only that type on its other
 * VFs while one is made, and nothing once it is full.
 *
 * What is read here is the driver's, not a tenant's; it is still bounded
 * (AV_VGPU_TYPES_MAX bytes, AV_VGPU_NAME_MAX per name, printable ASCII). */
#include "config.h"

#include "av-pci-private.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/av-root.h"

#define AV_VGPU_TYPES_MAX (64 * 1024)
#define AV_VGPU_NAME_MAX 128

void
av_vgpu_type_free(AvVgpuType *type)
{
    if (!type)
        return;
    g_free(type->name);
    g_free(type);
}

/* A decimal type ID of at most 9 digits (no sign, no spaces). */
static gboolean
av_vgpu_parse_id(const char *s, guint *ret)
{
    gsize len = strlen(s);
    guint v = 0;

    if (len == 0 || len > 9)
        return FALSE;
    for (gsize i = 0; i < len; i++) {
        if (!g_ascii_isdigit(s[i]))
            return FALSE;
        v = v * 10 + (guint)(s[i] - '0');
    }
    *ret = v;
    return TRUE;
}

static gboolean
av_vgpu_name_valid(const char *s)
{
    gsize len = strlen(s);

    if (len == 0 || len > AV_VGPU_NAME_MAX)
        return FALSE;
    for (gsize i = 0; i < len; i++)
        if (!g_ascii_isprint(s[i]))
            return FALSE;
    return TRUE;
}

/* See av-pci.h. */
GPtrArray *
av_vgpu_types_parse(const char *text)
{
    GPtrArray *types = g_ptr_array_new_with_free_func((GDestroyNotify)av_vgpu_type_free);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);

    for (guint i = 0; lines[i]; i++) {
        char *colon = strchr(lines[i], ':');
        AvVgpuType *type;
        char *id_text, *name;
        guint id;

        if (!colon)
            continue;
        *colon = '\0';
        id_text = g_strstrip(lines[i]);
        name = g_strstrip(colon + 1);
        /* The header ("ID : vGPU Name") and anything else that is not a
         * type: skipped. */
        if (!av_vgpu_parse_id(id_text, &id) || id == 0 || !av_vgpu_name_valid(name))
            continue;
        type = g_new0(AvVgpuType, 1);
        type->id = id;
        type->name = g_strdup(name);
        g_ptr_array_add(types, type);
    }
    return types;
}

/* See av-pci.h. */
int
av_pci_vgpu_read(const AvRoot *root, const char *address, guint *ret_current, GPtrArray **ret_creatable)
{
    g_autofree char *dir = NULL;
    g_autofree char *current = NULL;
    g_autofree char *path = NULL;
    g_autofree char *text = NULL;
    gsize len = 0;
    guint id;
    int r;

    if (!av_pci_address_is_valid(address))
        return -EINVAL;
    dir = av_sys_path("bus/pci/devices/%s/nvidia", address);
    path = g_strconcat(dir, "/current_vgpu_type", NULL);
    r = av_root_read_attr(root, path, &current);
    if (r < 0)
        return r;
    if (!av_vgpu_parse_id(g_strstrip(current), &id))
        return -EINVAL;
    if (ret_creatable) {
        g_clear_pointer(&path, g_free);
        path = g_strconcat(dir, "/creatable_vgpu_types", NULL);
        r = av_root_read_file(root, path, &text, &len);
        if (r < 0)
            return r;
        if (len > AV_VGPU_TYPES_MAX || memchr(text, '\0', len))
            return -EFBIG;
        *ret_creatable = av_vgpu_types_parse(text);
    }
    *ret_current = id;
    return 0;
}

/* See av-pci.h. */
gboolean
av_pci_has_vgpu(const AvRoot *root, const char *address)
{
    g_autofree char *path = NULL;

    if (!av_pci_address_is_valid(address))
        return FALSE;
    path = av_sys_path("bus/pci/devices/%s/nvidia/current_vgpu_type", address);
    return av_root_exists(root, path);
}

/* See av-pci.h. */
gboolean
av_vgpu_type_matches(const AvVgpuType *type, const char *spec)
{
    const char *space;
    guint id;

    if (!type || !spec)
        return FALSE;
    if (av_vgpu_parse_id(spec, &id))
        return id == type->id;
    if (g_str_equal(type->name, spec))
        return TRUE;
    /* The short name, as mdev types and NVIDIA's tools say it: the last
     * word of "NVIDIA L40S-2Q". */
    space = strrchr(type->name, ' ');
    return space && g_str_equal(space + 1, spec);
}

/* See av-pci.h. */
const AvVgpuType *
av_vgpu_types_find(const GPtrArray *types, const char *spec)
{
    for (guint i = 0; types && i < types->len; i++) {
        const AvVgpuType *type = g_ptr_array_index(types, i);

        if (av_vgpu_type_matches(type, spec))
            return type;
    }
    return NULL;
}

/* See av-pci.h. */
gboolean
av_vgpu_type_spec_is_valid(const char *spec)
{
    guint id;

    if (!spec)
        return FALSE;
    if (av_vgpu_parse_id(spec, &id))
        return id > 0;
    return av_vgpu_name_valid(spec) && !strchr(spec, ':');
}

/* See av-pci.h. */
gboolean
av_pci_vgpu_offers(const AvPciDevice *dev, const char *spec)
{
    if (!dev || !dev->vgpu_capable)
        return FALSE;
    /* Free of any vGPU.  One that has a type (another tenant's, or one a
     * prepare killed midway left) is not offered: its type goes back to 0
     * only through a scrub (av_vgpu_clear_type()). */
    if (dev->vgpu_current != 0)
        return FALSE;
    return av_vgpu_types_find(dev->vgpu_creatable, spec) != NULL;
}
