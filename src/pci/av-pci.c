/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: PCI discovery from sysfs.
 *
 * Every fact is read under an AvRoot (see util/av-root.h); the kernel
 * interfaces are those of Documentation/ABI/testing/sysfs-bus-pci,
 * sysfs-kernel-iommu_groups and sysfs-bus-vfio-mdev. */
#include "config.h"

#include "av-pci.h"
#include "av-pci-private.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/av-error.h"
#include "util/av-names.h"

/* --- ownership ---
 *
 * Each *_free() releases the object and everything it owns (strings, arrays
 * and the objects in them); NULL is a no-op. */

void
av_mdev_type_free(AvMdevType *type)
{
    if (!type)
        return;
    g_free(type->id);
    g_free(type->name);
    g_free(type->device_api);
    g_free(type->description);
    g_free(type);
}

void
av_mdev_free(AvMdev *mdev)
{
    if (!mdev)
        return;
    g_free(mdev->uuid);
    g_free(mdev->parent);
    g_free(mdev->type_id);
    g_free(mdev);
}

void
av_mdev_parent_free(AvMdevParent *parent)
{
    if (!parent)
        return;
    g_free(parent->name);
    g_free(parent->sysfs_path);
    g_free(parent->pci_address);
    if (parent->types)
        g_ptr_array_unref(parent->types);
    if (parent->mdevs)
        g_ptr_array_unref(parent->mdevs);
    g_free(parent);
}

void
av_pci_device_free(AvPciDevice *dev)
{
    if (!dev)
        return;
    g_free(dev->address);
    g_free(dev->sysfs_path);
    g_free(dev->vendor_name);
    g_free(dev->device_name);
    g_free(dev->local_cpulist);
    if (dev->iommu_group_members)
        g_ptr_array_unref(dev->iommu_group_members);
    if (dev->netdevs)
        g_ptr_array_unref(dev->netdevs);
    g_free(dev->driver);
    g_free(dev->driver_override);
    g_free(dev->physical_slot);
    g_free(dev->vfio_driver);
    g_free(dev->physfn);
    if (dev->virtfns)
        g_ptr_array_unref(dev->virtfns);
    if (dev->mdev_types)
        g_ptr_array_unref(dev->mdev_types);
    if (dev->mdevs)
        g_ptr_array_unref(dev->mdevs);
    g_strfreev(dev->reset_methods);
    g_free(dev->parent_bridge);
    if (dev->vgpu_creatable)
        g_ptr_array_unref(dev->vgpu_creatable);
    g_free(dev);
}

void
av_host_free(AvHost *host)
{
    if (!host)
        return;
    if (host->pci)
        g_ptr_array_unref(host->pci);
    if (host->usb)
        g_ptr_array_unref(host->usb);
    if (host->numa_nodes)
        g_ptr_array_unref(host->numa_nodes);
    if (host->mdev_parents)
        g_ptr_array_unref(host->mdev_parents);
    g_free(host->boot_id);
    g_free(host);
}

/* --- small parsers --- */

/* See av-pci.h. */
gboolean
av_pci_address_parse(const char *address, guint32 *ret_domain, guint8 *ret_bus, guint8 *ret_slot,
                     guint8 *ret_function)
{
    guint32 domain = 0;
    const char *p;

    if (!av_pci_address_is_valid(address))
        return FALSE;
    /* 4 to 8 lower-case hex digits, then ':' (checked above). */
    for (p = address; *p != ':'; p++)
        domain = domain << 4 | (guint32)g_ascii_xdigit_value(*p);
    *ret_domain = domain;
    *ret_bus = (guint8)(g_ascii_xdigit_value(p[1]) * 16 + g_ascii_xdigit_value(p[2]));
    *ret_slot = (guint8)(g_ascii_xdigit_value(p[4]) * 16 + g_ascii_xdigit_value(p[5]));
    *ret_function = (guint8)g_ascii_xdigit_value(p[7]);
    return TRUE;
}

/* See av-pci.h.  Domain 32 bits, bus 8, slot 5, function 3: 48 bits below
 * the tag. */
guint64
av_pci_address_key(const char *address)
{
    guint32 domain;
    guint8 bus, slot, function;

    if (!av_pci_address_parse(address, &domain, &bus, &slot, &function))
        return AV_PCI_ADDRESS_KEY_INVALID;
    return AV_PCI_ADDRESS_KEY_VALID | (guint64)domain << 16 | (guint64)bus << 8 | (guint64)slot << 3 | function;
}

/* See av-pci.h.  Every valid key is below AV_PCI_ADDRESS_KEY_INVALID. */
int
av_pci_address_key_compare(guint64 key_a, const char *a, guint64 key_b, const char *b)
{
    if (key_a != key_b)
        return key_a < key_b ? -1 : 1;
    if (key_a == AV_PCI_ADDRESS_KEY_INVALID)
        return g_strcmp0(a, b);
    return 0;
}

/* See av-pci.h. */
int
av_pci_address_compare(const char *a, const char *b)
{
    return av_pci_address_key_compare(av_pci_address_key(a), a, av_pci_address_key(b), b);
}

/* Little-endian dword of config space at @off; the caller checks bounds. */
static guint32
av_config_dword(const guint8 *config, gsize off)
{
    return (guint32)config[off] | (guint32)config[off + 1] << 8 |
           (guint32)config[off + 2] << 16 | (guint32)config[off + 3] << 24;
}

static guint16
av_config_word(const guint8 *config, gsize off)
{
    return (guint16)(config[off] | config[off + 1] << 8);
}

#define AV_PCI_EXT_CAP_START 0x100
#define AV_PCI_EXT_CAP_ID_DSN 0x0003
#define AV_PCI_EXT_CAP_MAX_WALK 1024

/* See av-pci.h.  PCIe Base Spec 7.6.3: the extended capability header holds
 * the ID in bits 15:0, the version in 19:16 and the next offset in 31:20
 * (its low two bits reserved); a hostile or broken list that loops ends
 * after AV_PCI_EXT_CAP_MAX_WALK steps. */
gboolean
av_pci_config_find_ext_cap(const guint8 *config, gsize len, guint16 id, gsize *ret_off)
{
    gsize off = AV_PCI_EXT_CAP_START;

    if (!config)
        return FALSE;
    for (guint walked = 0; walked < AV_PCI_EXT_CAP_MAX_WALK; walked++) {
        guint32 header;

        if (off < AV_PCI_EXT_CAP_START || off + 4 > len)
            return FALSE;
        header = av_config_dword(config, off);
        /* No extended capabilities at all: 0, or all ones from an absent device. */
        if (header == 0 || header == 0xffffffffu)
            return FALSE;
        if ((header & 0xffff) == id) {
            *ret_off = off;
            return TRUE;
        }
        off = (header >> 20) & 0xffc;
        if (off == 0)
            return FALSE;
    }
    return FALSE;
}

/* PCIe Base Spec 7.9.3 (Device Serial Number). */
gboolean
av_pci_config_find_dsn(const guint8 *config, gsize len, guint64 *ret_dsn)
{
    gsize off;

    if (!av_pci_config_find_ext_cap(config, len, AV_PCI_EXT_CAP_ID_DSN, &off) || off + 12 > len)
        return FALSE;
    if (ret_dsn)
        *ret_dsn = (guint64)av_config_dword(config, off + 4) | (guint64)av_config_dword(config, off + 8) << 32;
    return TRUE;
}

/* See av-pci.h. */
int
av_pci_read_resource(const AvRoot *root, const char *address, guint index, guint64 *ret_start, guint64 *ret_end,
                     guint64 *ret_flags)
{
    g_autofree char *path = av_sys_path("bus/pci/devices/%s/resource", address);
    g_autofree char *contents = NULL;
    g_auto(GStrv) lines = NULL;
    g_auto(GStrv) words = NULL;
    guint64 v[3];
    int r;

    r = av_root_read_file(root, path, &contents, NULL);
    if (r < 0)
        return r;
    lines = g_strsplit(contents, "\n", -1);
    if (g_strv_length(lines) <= index)
        return -ENOENT;
    words = g_strsplit_set(g_strstrip(lines[index]), " \t", -1);
    if (g_strv_length(words) != 3)
        return -EINVAL;
    for (guint i = 0; i < 3; i++)
        if (!g_str_has_prefix(words[i], "0x") ||
            !g_ascii_string_to_unsigned(words[i] + 2, 16, 0, G_MAXUINT64, &v[i], NULL))
            return -EINVAL;
    if (ret_start)
        *ret_start = v[0];
    if (ret_end)
        *ret_end = v[1];
    if (ret_flags)
        *ret_flags = v[2];
    return 0;
}

/* See av-pci.h. */
int
av_pci_read_rebar_sizes(const AvRoot *root, const char *address, guint bar, guint64 *ret_bitmap)
{
    g_autofree char *path = NULL;
    g_autofree char *value = NULL;
    const char *hex;
    guint64 bitmap;
    int r;

    if (bar > 5 || !av_pci_address_is_valid(address))
        return -EINVAL;
    path = av_sys_path("bus/pci/devices/%s/resource%u_resize", address, bar);
    r = av_root_read_attr(root, path, &value);
    if (r < 0)
        return r;
    /* The kernel prints "%016llx"; a 0x prefix is accepted too. */
    hex = g_str_has_prefix(value, "0x") ? value + 2 : value;
    if (!*hex || strlen(hex) > 16 || !g_ascii_string_to_unsigned(hex, 16, 0, G_MAXUINT64, &bitmap, NULL))
        return -EINVAL;
    /* Sizes past 2^63 bytes cannot be held, nor exist. */
    bitmap &= ((guint64)1 << (AV_PCI_REBAR_BIT_MAX + 1)) - 1;
    if (bitmap == 0)
        return -EINVAL;
    *ret_bitmap = bitmap;
    return 0;
}

/* --- scanning --- */

/* What a host scan reads once and every device needs. */
typedef struct {
    const AvRoot *root;
    GHashTable *slots;    /* "dddd:bb:ss" -> slot name, from /sys/bus/pci/slots */
    /* PF address -> (VF address -> N of its virtfnN link), for each PF this
     * scan read: a VF finds its index here rather than resolving every
     * virtfnN link of its PF again (what made a card of 15 VFs cost 15x15
     * resolutions). */
    GHashTable *virtfns;
} AvPciScan;

static void
av_pci_scan_clear(AvPciScan *scan)
{
    g_clear_pointer(&scan->slots, g_hash_table_unref);
    g_clear_pointer(&scan->virtfns, g_hash_table_unref);
}

/* Documentation/ABI/testing/sysfs-bus-pci: /sys/bus/pci/slots/N/address
 * holds "dddd:bb:ss" of the slot (no function).  Missing slots are fine. */
static void
av_pci_scan_load_slots(AvPciScan *scan)
{
    g_autofree char *dir = av_sys_path("bus/pci/slots");
    g_auto(GStrv) names = NULL;

    scan->slots = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    scan->virtfns = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_hash_table_unref);
    if (av_root_list_dir(scan->root, dir, &names) < 0)
        return;
    for (guint i = 0; names[i]; i++) {
        g_autofree char *path = av_sys_path("bus/pci/slots/%s/address", names[i]);
        g_autofree char *addr = NULL;
        g_autofree char *probe = NULL;

        if (av_root_read_attr(scan->root, path, &addr) < 0)
            continue;
        /* Validate through a full address with function 0. */
        probe = g_strconcat(addr, ".0", NULL);
        if (!av_pci_address_is_valid(probe)) {
            g_debug("ignoring slot '%s' with malformed address '%s'", names[i], addr);
            continue;
        }
        /* Two slots at one address (never on real hosts): the first wins. */
        if (!g_hash_table_contains(scan->slots, addr))
            g_hash_table_insert(scan->slots, g_steal_pointer(&addr), g_strdup(names[i]));
    }
}

/* TRUE when @s is a non-empty decimal number that fits in an int. */
static gboolean
av_parse_index(const char *s, int *ret)
{
    guint64 v;

    /* Digits only, and no leading zero: the kernel prints "%d". */
    if (!s || !g_ascii_isdigit(*s) || (s[0] == '0' && s[1] != '\0'))
        return FALSE;
    if (!g_ascii_string_to_unsigned(s, 10, 0, G_MAXINT, &v, NULL))
        return FALSE;
    *ret = (int)v;
    return TRUE;
}

/* TRUE for a canonical lower-case UUID, the only name an mdev may have. */
static gboolean
av_mdev_uuid_is_valid(const char *s)
{
    if (!s || strlen(s) != 36)
        return FALSE;
    for (guint i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return FALSE;
        } else if (!g_ascii_isxdigit(s[i]) || g_ascii_isupper(s[i])) {
            return FALSE;
        }
    }
    return TRUE;
}

/* TRUE for a directory name taken from the tree that is safe in a path. */
static gboolean
av_name_is_safe(const char *s)
{
    return s && *s && !strchr(s, '/') && !g_str_equal(s, ".") && !g_str_equal(s, "..");
}

static gint
av_int_cmp(gconstpointer a, gconstpointer b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return x < y ? -1 : x > y;
}

/* Orders an array of PCI addresses (char*) numerically. */
static gint
av_pci_address_cmp_ptr(gconstpointer a, gconstpointer b)
{
    return av_pci_address_compare(*(char *const *)a, *(char *const *)b);
}

/* The ids: Documentation/ABI/testing/sysfs-bus-pci (vendor, device,
 * subsystem_vendor, subsystem_device, class, revision).  Only "vendor" is
 * required; the others fall back to the config header (PCI Local Bus Spec
 * 6.1: device 0x02, revision 0x08, class 0x09, subsystem 0x2c/0x2e), which
 * non-root reads for its first 64 bytes. */
static gboolean
av_pci_device_read_ids(const AvRoot *root, AvPciDevice *dev, const guint8 *config, gsize config_len,
                       GError **error)
{
    guint64 v;
    int r;

    r = av_attr_read_hex(root, dev->sysfs_path, "vendor", 0xffff, &v);
    if (r == -ENOENT) {
        /* Its link resolved a moment ago: the device was removed since. */
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                    "the PCI device '%s' disappeared during the scan ('%s/vendor' is gone)",
                    dev->address, dev->sysfs_path);
        return FALSE;
    }
    if (r < 0)
        return av_error_errno(error, r, "cannot read the vendor id of PCI device '%s' ('%s/vendor')",
                              dev->address, dev->sysfs_path);
    dev->vendor_id = (guint16)v;

    if (av_attr_read_hex(root, dev->sysfs_path, "device", 0xffff, &v) == 0)
        dev->device_id = (guint16)v;
    else if (config_len >= 4)
        dev->device_id = av_config_word(config, 0x02);

    if (av_attr_read_hex(root, dev->sysfs_path, "class", 0xffffff, &v) == 0)
        dev->class_code = (guint32)v;
    else if (config_len >= 12)
        dev->class_code = av_config_dword(config, 0x08) >> 8;

    if (av_attr_read_hex(root, dev->sysfs_path, "revision", 0xff, &v) == 0)
        dev->revision = (guint8)v;
    else if (config_len >= 9)
        dev->revision = config[0x08];

    if (av_attr_read_hex(root, dev->sysfs_path, "subsystem_vendor", 0xffff, &v) == 0)
        dev->subsystem_vendor_id = (guint16)v;
    else if (config_len >= 0x30)
        dev->subsystem_vendor_id = av_config_word(config, 0x2c);

    if (av_attr_read_hex(root, dev->sysfs_path, "subsystem_device", 0xffff, &v) == 0)
        dev->subsystem_device_id = (guint16)v;
    else if (config_len >= 0x30)
        dev->subsystem_device_id = av_config_word(config, 0x2e);
    return TRUE;
}

/* Documentation/ABI/testing/sysfs-kernel-iommu_groups: the device's
 * "iommu_group" link names /sys/kernel/iommu_groups/N, whose devices/
 * directory links every member. */
static void
av_pci_device_read_iommu_group(const AvRoot *root, AvPciDevice *dev)
{
    g_autofree char *link = g_strconcat(dev->sysfs_path, "/iommu_group", NULL);
    g_autofree char *group = NULL;
    g_autofree char *dir = NULL;
    g_auto(GStrv) names = NULL;
    gboolean self = FALSE;
    int n;

    if (av_root_link_name(root, link, &group) < 0)
        return;
    if (!av_parse_index(group, &n)) {
        g_debug("ignoring the malformed IOMMU group '%s' of '%s'", group, dev->address);
        return;
    }
    dev->iommu_group = n;
    dir = av_sys_path("kernel/iommu_groups/%d/devices", n);
    if (av_root_list_dir(root, dir, &names) == 0) {
        for (guint i = 0; names[i]; i++) {
            if (!av_pci_address_is_valid(names[i])) {
                g_debug("ignoring '%s' in IOMMU group %d: not a PCI address", names[i], n);
                continue;
            }
            if (g_str_equal(names[i], dev->address))
                self = TRUE;
            g_ptr_array_add(dev->iommu_group_members, g_strdup(names[i]));
        }
    }
    if (!self)
        g_ptr_array_add(dev->iommu_group_members, g_strdup(dev->address));
    g_ptr_array_sort(dev->iommu_group_members, av_pci_address_cmp_ptr);
}

/* Documentation/ABI/testing/sysfs-bus-pci: sriov_totalvfs, sriov_numvfs,
 * sriov_vf_device (the VFs' device id, hex without "0x" as the kernel
 * prints it), and the physfn / virtfnN links between a PF and its VFs. */
/* TRUE when the link name virtfn@a sorts before virtfn@b with strcmp, as a
 * directory listing does. */
static gboolean
av_virtfn_sorts_before(int a, int b)
{
    char x[16], y[16];

    g_snprintf(x, sizeof(x), "%d", a);
    g_snprintf(y, sizeof(y), "%d", b);
    return strcmp(x, y) < 0;
}

/* The index of the VF @dev among the virtfnN links of its PF @physfn: the
 * first link (in the listing's order) that resolves to @dev, or -1.  From
 * the scan's record of the PF when this scan read it, else from the links. */
static int
av_pci_device_find_vf_index(const AvPciScan *scan, const AvPciDevice *dev, const char *physfn)
{
    g_autofree char *pf_dir = av_sys_path("bus/pci/devices/%s", physfn);
    g_auto(GStrv) pf_entries = NULL;
    GHashTable *vfs = scan->virtfns ? g_hash_table_lookup(scan->virtfns, physfn) : NULL;
    gpointer idx;

    if (vfs)
        return g_hash_table_lookup_extended(vfs, dev->address, NULL, &idx) ? GPOINTER_TO_INT(idx) : -1;
    if (av_root_list_dir(scan->root, pf_dir, &pf_entries) < 0)
        return -1;
    for (guint i = 0; pf_entries[i]; i++) {
        g_autofree char *link = NULL;
        g_autofree char *vf = NULL;
        int n;

        if (!g_str_has_prefix(pf_entries[i], "virtfn") || !av_parse_index(pf_entries[i] + 6, &n))
            continue;
        link = g_strconcat(pf_dir, "/", pf_entries[i], NULL);
        if (av_root_link_name(scan->root, link, &vf) == 0 && g_str_equal(vf, dev->address))
            return n;
    }
    return -1;
}

static void
av_pci_device_read_sriov(const AvPciScan *scan, AvPciDevice *dev, char **entries)
{
    const AvRoot *root = scan->root;
    g_autofree char *physfn_link = g_strconcat(dev->sysfs_path, "/physfn", NULL);
    g_autofree char *physfn = NULL;
    g_autoptr(GArray) indexes = g_array_new(FALSE, FALSE, sizeof(int));
    GHashTable *vfs = NULL;

    if (av_attr_read_uint(root, dev->sysfs_path, "sriov_totalvfs", &dev->sriov_totalvfs) == 0) {
        guint64 vf_device;

        dev->sriov_capable = TRUE;
        (void)av_attr_read_uint(root, dev->sysfs_path, "sriov_numvfs", &dev->sriov_numvfs);
        (void)av_attr_read_uint(root, dev->sysfs_path, "sriov_offset", &dev->sriov_offset);
        (void)av_attr_read_uint(root, dev->sysfs_path, "sriov_stride", &dev->sriov_stride);
        if (av_attr_read_hex(root, dev->sysfs_path, "sriov_vf_device", 0xffff, &vf_device) == 0) {
            dev->sriov_vf_device_set = TRUE;
            dev->sriov_vf_device = (guint16)vf_device;
        }
    }

    /* virtfnN links, in index order. */
    for (guint i = 0; entries && entries[i]; i++) {
        int idx;

        if (!g_str_has_prefix(entries[i], "virtfn") || !av_parse_index(entries[i] + 6, &idx))
            continue;
        g_array_append_val(indexes, idx);
    }
    g_array_sort(indexes, av_int_cmp);
    /* (Recorded for the VFs of this PF, which this scan reads next.) */
    if (entries && scan->virtfns && !g_hash_table_contains(scan->virtfns, dev->address)) {
        vfs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
        g_hash_table_insert(scan->virtfns, g_strdup(dev->address), vfs);
    }
    for (guint i = 0; i < indexes->len; i++) {
        int n = g_array_index(indexes, int, i);
        g_autofree char *link = g_strdup_printf("%s/virtfn%d", dev->sysfs_path, n);
        g_autofree char *vf = NULL;
        gpointer seen;

        if (av_root_link_name(root, link, &vf) < 0)
            continue;
        if (!av_pci_address_is_valid(vf)) {
            g_debug("ignoring the virtfn link '%s' of '%s' to '%s'", link, dev->address, vf);
            continue;
        }
        /* Two links to one VF (a hostile tree): the first listed wins, as
         * in av_pci_device_find_vf_index(). */
        if (vfs && (!g_hash_table_lookup_extended(vfs, vf, NULL, &seen) ||
                    av_virtfn_sorts_before(n, GPOINTER_TO_INT(seen))))
            g_hash_table_insert(vfs, g_strdup(vf), GINT_TO_POINTER(n));
        g_ptr_array_add(dev->virtfns, g_steal_pointer(&vf));
    }

    /* A VF: its PF, and its index among the PF's virtfnN links. */
    if (av_root_link_name(root, physfn_link, &physfn) < 0)
        return;
    if (!av_pci_address_is_valid(physfn)) {
        g_debug("ignoring the physfn link of '%s' to '%s'", dev->address, physfn);
        return;
    }
    dev->vf_index = av_pci_device_find_vf_index(scan, dev, physfn);
    dev->physfn = g_steal_pointer(&physfn);
    /* NVIDIA vGPU on VFs (av-pci-vgpu.c). */
    if (av_pci_vgpu_read(root, dev->address, &dev->vgpu_current, &dev->vgpu_creatable) == 0)
        dev->vgpu_capable = TRUE;
}

static gint
av_mdev_type_cmp(gconstpointer a, gconstpointer b)
{
    const AvMdevType *x = *(AvMdevType *const *)a, *y = *(AvMdevType *const *)b;

    return strcmp(x->id, y->id);
}

/* Documentation/ABI/testing/sysfs-bus-vfio-mdev: a parent lists its types
 * in mdev_supported_types/TYPE/{name,device_api,description,
 * available_instances}; each mdev is a directory UUID under its parent with
 * an "mdev_type" link to its type.  Reads those of the parent @name whose
 * directory is @dir (its entries, sorted, in @entries) into @types and
 * @mdevs. */
static void
av_mdev_parent_read(const AvRoot *root, const char *name, const char *dir, char **entries,
                    GPtrArray *types_out, GPtrArray *mdevs_out)
{
    g_autofree char *types_dir = g_strconcat(dir, "/mdev_supported_types", NULL);
    g_auto(GStrv) types = NULL;

    if (av_root_list_dir(root, types_dir, &types) == 0) {
        for (guint i = 0; types[i]; i++) {
            g_autofree char *tdir = NULL;
            AvMdevType *type;
            guint avail = 0;

            if (!av_name_is_safe(types[i]))
                continue;
            tdir = g_strconcat(types_dir, "/", types[i], NULL);
            if (av_attr_read_uint(root, tdir, "available_instances", &avail) < 0) {
                g_debug("ignoring mdev type '%s' of '%s': no readable available_instances",
                        types[i], name);
                continue;
            }
            type = g_new0(AvMdevType, 1);
            type->id = g_strdup(types[i]);
            type->name = av_attr_read_optional(root, tdir, "name");
            type->device_api = av_attr_read_optional(root, tdir, "device_api");
            type->description = av_attr_read_optional(root, tdir, "description");
            type->available = avail;
            g_ptr_array_add(types_out, type);
        }
        g_ptr_array_sort(types_out, av_mdev_type_cmp);
    }

    /* Existing mdevs: children named by a UUID (entries is sorted). */
    for (guint i = 0; entries && entries[i]; i++) {
        g_autofree char *link = NULL;
        g_autofree char *type_id = NULL;
        AvMdev *mdev;

        if (!av_mdev_uuid_is_valid(entries[i]))
            continue;
        link = g_strconcat(dir, "/", entries[i], "/mdev_type", NULL);
        if (av_root_link_name(root, link, &type_id) < 0) {
            g_debug("ignoring '%s' under '%s': no mdev_type link", entries[i], name);
            continue;
        }
        mdev = g_new0(AvMdev, 1);
        mdev->uuid = g_strdup(entries[i]);
        mdev->parent = g_strdup(name);
        mdev->type_id = g_steal_pointer(&type_id);
        g_ptr_array_add(mdevs_out, mdev);
    }
}

static void
av_pci_device_read_mdev(const AvRoot *root, AvPciDevice *dev, char **entries)
{
    av_mdev_parent_read(root, dev->address, dev->sysfs_path, entries, dev->mdev_types, dev->mdevs);
}

/* Documentation/ABI/testing/sysfs-bus-pci: "reset_method" lists the
 * methods the kernel will try, space separated ("flr bus"); absent before
 * Linux 5.15.  "reset" exists when the device can be reset at all. */
static void
av_pci_device_read_reset(const AvRoot *root, AvPciDevice *dev)
{
    g_autofree char *methods = av_attr_read_optional(root, dev->sysfs_path, "reset_method");
    g_autofree char *reset = g_strconcat(dev->sysfs_path, "/reset", NULL);

    if (methods) {
        g_auto(GStrv) parts = g_strsplit_set(methods, " \t\n", -1);
        g_autoptr(GPtrArray) list = g_ptr_array_new();

        for (guint i = 0; parts[i]; i++)
            if (*parts[i])
                g_ptr_array_add(list, g_strdup(parts[i]));
        g_ptr_array_add(list, NULL);
        dev->reset_methods = (char **)g_ptr_array_free(g_steal_pointer(&list), FALSE);
    }
    dev->has_reset = av_root_exists(root, reset);
}

static gint
av_netdev_cmp_ptr(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Documentation/ABI/testing/sysfs-class-net: a network device's directory
 * is under its parent's net/ (a PCI function's host driver, such as e1000e,
 * or a card's host driver that makes a virtual Ethernet for it).  Names
 * accelvirt would refuse are left out, with a debug line. */
static void
av_pci_device_read_netdevs(const AvRoot *root, AvPciDevice *dev)
{
    g_autofree char *dir = g_strconcat(dev->sysfs_path, "/net", NULL);
    g_auto(GStrv) names = NULL;

    if (av_root_list_dir(root, dir, &names) < 0)
        return;
    for (guint i = 0; names[i]; i++) {
        if (!av_netdev_name_is_valid(names[i])) {
            g_debug("ignoring the network interface name of '%s': not 1 to 15 letters, digits, '-', '_' or '.'",
                    dev->address);
            continue;
        }
        g_ptr_array_add(dev->netdevs, g_strdup(names[i]));
    }
    g_ptr_array_sort(dev->netdevs, av_netdev_cmp_ptr);
}

/* See av-pci.h. */
GPtrArray *
av_pci_netdevs(const AvRoot *root, const char *address)
{
    g_autoptr(AvPciDevice) dev = g_new0(AvPciDevice, 1);

    dev->netdevs = g_ptr_array_new_with_free_func(g_free);
    if (!av_pci_address_is_valid(address))
        return g_steal_pointer(&dev->netdevs);
    dev->address = g_strdup(address);
    dev->sysfs_path = av_sys_path("bus/pci/devices/%s", address);
    av_pci_device_read_netdevs(root, dev);
    return g_steal_pointer(&dev->netdevs);
}

/* See av-pci.h. */
char *
av_pci_netdev_first(const AvRoot *root, const char *address)
{
    g_autoptr(GPtrArray) names = av_pci_netdevs(root, address);

    return names->len ? g_strdup(g_ptr_array_index(names, 0)) : NULL;
}

/* Scans the device whose canonical sysfs directory is @sysfs_path. */
static AvPciDevice *
av_pci_device_scan_one(const AvPciScan *scan, const char *address, const char *sysfs_path, GError **error)
{
    const AvRoot *root = scan->root;
    g_autoptr(AvPciDevice) dev = g_new0(AvPciDevice, 1);
    g_autofree char *config = NULL;
    g_autofree char *config_path = NULL;
    g_autofree char *parent = NULL;
    g_autofree char *override = NULL;
    g_autofree char *driver_link = NULL;
    g_autofree char *slot_key = NULL;
    g_auto(GStrv) entries = NULL;
    gsize config_len = 0;
    const char *slot;

    dev->address = g_strdup(address);
    dev->address_key = av_pci_address_key(address);
    dev->sysfs_path = g_strdup(sysfs_path);
    dev->numa_node = -1;
    dev->iommu_group = -1;
    dev->vf_index = -1;
    dev->iommu_group_members = g_ptr_array_new_with_free_func(g_free);
    dev->virtfns = g_ptr_array_new_with_free_func(g_free);
    dev->mdev_types = g_ptr_array_new_with_free_func((GDestroyNotify)av_mdev_type_free);
    dev->mdevs = g_ptr_array_new_with_free_func((GDestroyNotify)av_mdev_free);
    dev->netdevs = g_ptr_array_new_with_free_func(g_free);

    /* "config": 64 bytes for users, 256 or 4096 for root. */
    config_path = g_strconcat(sysfs_path, "/config", NULL);
    if (av_root_read_file(root, config_path, &config, &config_len) < 0)
        config_len = 0;

    if (!av_pci_device_read_ids(root, dev, (const guint8 *)config, config_len, error))
        return NULL;
    dev->is_bridge = (dev->class_code >> 8) == 0x0604;
    dev->has_dsn = av_pci_config_find_dsn((const guint8 *)config, config_len, &dev->dsn);

    /* numa_node: "-1" when unknown; local_cpulist. */
    dev->numa_node = av_attr_read_numa_node(root, sysfs_path);
    dev->local_cpulist = av_attr_read_optional(root, sysfs_path, "local_cpulist");

    av_pci_device_read_iommu_group(root, dev);

    /* "driver" link; "driver_override" prints "(null)" when unset. */
    driver_link = g_strconcat(sysfs_path, "/driver", NULL);
    /* A capture may hold the link and not the driver's directory: the
     * link's text still names the driver. */
    if (av_root_link_name_text(root, driver_link, &dev->driver) < 0)
        dev->driver = NULL;
    override = av_attr_read_optional(root, sysfs_path, "driver_override");
    if (override && *override && !g_str_equal(override, "(null)"))
        dev->driver_override = g_steal_pointer(&override);

    /* "dddd:bb:ss": the address without ".f", whatever the domain's width. */
    slot_key = g_strndup(address, strlen(address) - 2);
    slot = scan->slots ? g_hash_table_lookup(scan->slots, slot_key) : NULL;
    dev->physical_slot = g_strdup(slot);

    if (av_root_list_dir(root, sysfs_path, &entries) < 0)
        entries = NULL;
    av_pci_device_read_sriov(scan, dev, entries);
    av_pci_device_read_mdev(root, dev, entries);
    av_pci_device_read_reset(root, dev);
    av_pci_device_read_netdevs(root, dev);

    /* The upstream bridge is the parent directory when it is a function. */
    parent = g_path_get_dirname(sysfs_path);
    {
        g_autofree char *base = g_path_get_basename(parent);

        if (av_pci_address_is_valid(base))
            dev->parent_bridge = g_steal_pointer(&base);
    }
    return g_steal_pointer(&dev);
}

/* Resolves /sys/bus/pci/devices/@address inside the root.  Returns 0 or
 * -errno (-ENOENT: no such device). */
static int
av_pci_device_resolve(const AvRoot *root, const char *address, char **ret_path)
{
    g_autofree char *link = av_sys_path("bus/pci/devices/%s", address);

    return av_root_resolve(root, link, ret_path);
}

/* Scans one device: see av-pci.h.  The caller owns the result. */
AvPciDevice *
av_pci_device_scan(const AvRoot *root, const char *address, GError **error)
{
    AvPciScan scan = { .root = root };
    g_autofree char *path = NULL;
    AvPciDevice *dev;
    int r;

    if (!av_pci_address_is_valid(address)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "'%s' is not a PCI address: expected the form 0000:3b:00.0", address ? address : "");
        return NULL;
    }
    r = av_pci_device_resolve(root, address, &path);
    if (r < 0) {
        av_error_errno(error, r, "cannot find the PCI device '%s' under '%s'", address, av_root_prefix(root));
        return NULL;
    }
    av_pci_scan_load_slots(&scan);
    dev = av_pci_device_scan_one(&scan, address, path, error);
    av_pci_scan_clear(&scan);
    if (dev) {
        g_autoptr(GPtrArray) one = g_ptr_array_new();

        g_ptr_array_add(one, dev);
        av_pci_ids_name(one);
    }
    return dev;
}

/* The key of @dev's address: the one the scan set, else computed now. */
static guint64
av_pci_device_key(const AvPciDevice *dev)
{
    return dev->address_key ? dev->address_key : av_pci_address_key(dev->address);
}

static gint
av_pci_device_cmp(gconstpointer a, gconstpointer b)
{
    const AvPciDevice *x = *(AvPciDevice *const *)a, *y = *(AvPciDevice *const *)b;

    return av_pci_address_key_compare(av_pci_device_key(x), x->address, av_pci_device_key(y), y->address);
}

/* TRUE when /sys/kernel/iommu_groups holds at least one numbered group. */
static gboolean
av_host_iommu_enabled(const AvRoot *root)
{
    g_autofree char *dir = av_sys_path("kernel/iommu_groups");
    g_auto(GStrv) names = NULL;
    int n;

    if (av_root_list_dir(root, dir, &names) < 0)
        return FALSE;
    for (guint i = 0; names[i]; i++)
        if (av_parse_index(names[i], &n))
            return TRUE;
    return FALSE;
}

/* See av-pci.h: dev_set_name() names are free text, so accelvirt takes only
 * a safe subset before one reaches a path. */
gboolean
av_mdev_parent_name_is_valid(const char *name)
{
    return av_name_is_strict(name, ":");
}

static gint
av_mdev_parent_cmp(gconstpointer a, gconstpointer b)
{
    const AvMdevParent *x = *(AvMdevParent *const *)a, *y = *(AvMdevParent *const *)b;

    return strcmp(x->name, y->name);
}

/* The PCI function of @host whose canonical directory is @sysfs_path, or NULL. */
static const AvPciDevice *
av_host_find_pci_by_path(const AvHost *host, const char *sysfs_path)
{
    for (guint i = 0; i < host->pci->len; i++) {
        const AvPciDevice *dev = g_ptr_array_index(host->pci, i);

        if (g_str_equal(dev->sysfs_path, sysfs_path))
            return dev;
    }
    return NULL;
}

/* A parent that is the PCI function @dev, sharing its types and mdevs. */
static AvMdevParent *
av_mdev_parent_new_pci(const char *name, const AvPciDevice *dev)
{
    AvMdevParent *parent = g_new0(AvMdevParent, 1);

    parent->name = g_strdup(name);
    parent->sysfs_path = g_strdup(dev->sysfs_path);
    parent->pci_address = g_strdup(dev->address);
    parent->pci = dev;
    parent->numa_node = dev->numa_node;
    parent->types = g_ptr_array_ref(dev->mdev_types);
    parent->mdevs = g_ptr_array_ref(dev->mdevs);
    return parent;
}

/* Documentation/driver-api/vfio-mediated-device.rst: mdev_register_parent()
 * links every parent into /sys/class/mdev_bus by its device name.  Reads
 * them into host->mdev_parents after the PCI scan (a PCI parent is the very
 * AvPciDevice found there).  A tree without the class (one captured before
 * it was looked at) still gives its PCI functions that offer
 * mdev_supported_types.  Entries with unsafe names or dangling links are
 * left out with a debug message. */
static void
av_host_scan_mdev_parents(const AvRoot *root, AvHost *host)
{
    g_autofree char *dir = av_sys_path("class/mdev_bus");
    g_auto(GStrv) names = NULL;

    if (av_root_list_dir(root, dir, &names) < 0)
        names = NULL;
    for (guint i = 0; names && names[i]; i++) {
        g_autofree char *link = NULL;
        g_autofree char *path = NULL;
        g_auto(GStrv) entries = NULL;
        const AvPciDevice *dev;
        AvMdevParent *parent;
        int r;

        if (!av_mdev_parent_name_is_valid(names[i])) {
            g_debug("ignoring the mdev parent '%s' in %s: not a safe name", names[i], dir);
            continue;
        }
        link = g_strconcat(dir, "/", names[i], NULL);
        r = av_root_resolve(root, link, &path);
        if (r < 0) {
            g_debug("ignoring the mdev parent '%s': %s", names[i], g_strerror(-r));
            continue;
        }
        dev = av_host_find_pci_by_path(host, path);
        if (dev) {
            g_ptr_array_add(host->mdev_parents, av_mdev_parent_new_pci(names[i], dev));
            continue;
        }
        parent = g_new0(AvMdevParent, 1);
        parent->name = g_strdup(names[i]);
        parent->sysfs_path = g_steal_pointer(&path);
        parent->numa_node = av_attr_read_numa_node(root, parent->sysfs_path);
        parent->types = g_ptr_array_new_with_free_func((GDestroyNotify)av_mdev_type_free);
        parent->mdevs = g_ptr_array_new_with_free_func((GDestroyNotify)av_mdev_free);
        if (av_root_list_dir(root, parent->sysfs_path, &entries) < 0)
            entries = NULL;
        av_mdev_parent_read(root, parent->name, parent->sysfs_path, entries, parent->types, parent->mdevs);
        g_ptr_array_add(host->mdev_parents, parent);
    }
    for (guint i = 0; i < host->pci->len; i++) {
        const AvPciDevice *dev = g_ptr_array_index(host->pci, i);
        gboolean listed = FALSE;

        if (dev->mdev_types->len == 0)
            continue;
        for (guint j = 0; j < host->mdev_parents->len && !listed; j++)
            listed = ((AvMdevParent *)g_ptr_array_index(host->mdev_parents, j))->pci == dev;
        if (!listed)
            g_ptr_array_add(host->mdev_parents, av_mdev_parent_new_pci(dev->address, dev));
    }
    g_ptr_array_sort(host->mdev_parents, av_mdev_parent_cmp);
}

/* Linear searches: a host has a handful of parents. */
AvMdevParent *
av_host_find_mdev_parent(const AvHost *host, const char *name)
{
    if (!host || !name || !host->mdev_parents)
        return NULL;
    for (guint i = 0; i < host->mdev_parents->len; i++) {
        AvMdevParent *parent = g_ptr_array_index(host->mdev_parents, i);

        if (g_str_equal(parent->name, name))
            return parent;
    }
    return NULL;
}

AvMdevParent *
av_host_find_mdev(const AvHost *host, const char *uuid)
{
    if (!host || !uuid || !host->mdev_parents)
        return NULL;
    for (guint i = 0; i < host->mdev_parents->len; i++) {
        AvMdevParent *parent = g_ptr_array_index(host->mdev_parents, i);

        for (guint j = 0; j < parent->mdevs->len; j++)
            if (g_strcmp0(((AvMdev *)g_ptr_array_index(parent->mdevs, j))->uuid, uuid) == 0)
                return parent;
    }
    return NULL;
}

/* The node every CPU of @cpus (not empty) is in, or -1 when they span nodes
 * or lie outside them all. */
static int
av_host_node_of_cpus(const AvHost *host, GArray *cpus)
{
    for (guint i = 0; i < host->numa_nodes->len; i++) {
        const AvNumaNode *node = g_ptr_array_index(host->numa_nodes, i);
        gboolean all = node->cpus && node->cpus->len > 0;

        for (guint c = 0; all && c < cpus->len; c++) {
            guint cpu = g_array_index(cpus, guint, c);
            gboolean found = FALSE;

            for (guint k = 0; !found && k < node->cpus->len; k++)
                found = g_array_index(node->cpus, guint, k) == cpu;
            all = found;
        }
        if (all)
            return node->id;
    }
    return -1;
}

/* A function whose numa_node the kernel reports as -1, and whose
 * local_cpulist lies within one NUMA node's CPUs, is on that node (hwloc
 * infers locality the same way), marked as inferred.  Only with two nodes
 * or more: on one node there is no locality to learn. */
static void
av_host_infer_numa(AvHost *host)
{
    if (host->numa_nodes->len < 2)
        return;
    for (guint i = 0; i < host->pci->len; i++) {
        AvPciDevice *dev = g_ptr_array_index(host->pci, i);
        g_autoptr(GArray) cpus = NULL;
        int node;

        if (dev->numa_node >= 0 || !dev->local_cpulist || !av_cpulist_parse(dev->local_cpulist, &cpus, NULL) ||
            cpus->len == 0)
            continue;
        node = av_host_node_of_cpus(host, cpus);
        if (node >= 0) {
            dev->numa_node = node;
            dev->numa_inferred = TRUE;
        }
    }
    /* An mdev parent that is such a function is on that node too. */
    for (guint i = 0; host->mdev_parents && i < host->mdev_parents->len; i++) {
        AvMdevParent *parent = g_ptr_array_index(host->mdev_parents, i);

        if (parent->numa_node < 0 && parent->pci && parent->pci->numa_inferred)
            parent->numa_node = parent->pci->numa_node;
    }
}

/* The id of the running boot, lower case, or NULL when the tree has none
 * or it is not a UUID. */
static char *
av_host_read_boot_id(const AvRoot *root)
{
    char *boot_id = NULL;

    return av_root_boot_id(root, &boot_id) < 0 ? NULL : boot_id;
}

static AvHost *
av_host_new(const AvRoot *root)
{
    AvHost *host = g_new0(AvHost, 1);

    host->pci = g_ptr_array_new_with_free_func((GDestroyNotify)av_pci_device_free);
    host->usb = g_ptr_array_new_with_free_func((GDestroyNotify)av_usb_device_free);
    host->numa_nodes = g_ptr_array_new_with_free_func((GDestroyNotify)av_numa_node_free);
    host->mdev_parents = g_ptr_array_new_with_free_func((GDestroyNotify)av_mdev_parent_free);
    host->boot_id = av_host_read_boot_id(root);
    return host;
}

/* Scans the function @address into @host: *ret_dev (may be NULL) points
 * at it, or is NULL when it is not there (unplugged since it was named, a
 * dangling link, its VF removed meanwhile: left out with a debug message).
 * FALSE with @error set on any other failure. */
static gboolean
av_pci_scan_add(AvPciScan *scan, AvHost *host, const char *address, const AvPciDevice **ret_dev, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autofree char *path = NULL;
    AvPciDevice *dev;
    int r = av_pci_device_resolve(scan->root, address, &path);

    if (ret_dev)
        *ret_dev = NULL;
    if (r < 0) {
        g_debug("ignoring the PCI device '%s': %s", address, g_strerror(-r));
        return TRUE;
    }
    dev = av_pci_device_scan_one(scan, address, path, &local);
    if (!dev && g_error_matches(local, AV_ERROR, AV_ERROR_NOT_FOUND)) {
        g_debug("ignoring the PCI device '%s': %s", address, local->message);
        return TRUE;
    }
    if (!dev) {
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    g_ptr_array_add(host->pci, dev);
    if (ret_dev)
        *ret_dev = dev;
    return TRUE;
}

/* Adds @address to @queue unless it is there (@queued: the set of it). */
static void
av_scan_queue_add(GPtrArray *queue, GHashTable *queued, const char *address)
{
    char *copy;

    if (!address || g_hash_table_contains(queued, address))
        return;
    copy = g_strdup(address);
    g_ptr_array_add(queue, copy);
    g_hash_table_add(queued, copy);
}

/* See av-pci.h.  The caller owns the result. */
AvHost *
av_host_scan_devices(const AvRoot *root, const char *const *addresses, gboolean mdev_parents, GError **error)
{
    g_autoptr(AvHost) host = av_host_new(root);
    g_autoptr(GPtrArray) queue = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GHashTable) queued = g_hash_table_new(g_str_hash, g_str_equal);
    g_autofree char *dir = av_sys_path("bus/pci/devices");
    AvPciScan scan = { .root = root };

    host->partial = TRUE;
    host->has_pci_bus = av_root_exists(root, dir);
    for (guint i = 0; host->has_pci_bus && addresses && addresses[i]; i++) {
        if (av_pci_address_is_valid(addresses[i]))
            av_scan_queue_add(queue, queued, addresses[i]);
    }
    if (host->has_pci_bus && mdev_parents) {
        g_autofree char *bus = av_sys_path("class/mdev_bus");
        g_auto(GStrv) names = NULL;

        /* A PCI parent is named by its address (mdev_register_parent()). */
        if (av_root_list_dir(root, bus, &names) < 0)
            names = NULL;
        for (guint i = 0; names && names[i]; i++) {
            if (av_pci_address_is_valid(names[i]))
                av_scan_queue_add(queue, queued, names[i]);
        }
    }
    if (queue->len > 0)
        av_pci_scan_load_slots(&scan);
    /* The queue grows as devices name others: a breadth-first walk. */
    for (guint i = 0; i < queue->len; i++) {
        const AvPciDevice *dev = NULL;

        if (!av_pci_scan_add(&scan, host, g_ptr_array_index(queue, i), &dev, error)) {
            av_pci_scan_clear(&scan);
            return NULL;
        }
        if (!dev)
            continue;
        for (guint j = 0; dev->iommu_group_members && j < dev->iommu_group_members->len; j++)
            av_scan_queue_add(queue, queued, g_ptr_array_index(dev->iommu_group_members, j));
        av_scan_queue_add(queue, queued, dev->physfn);
        av_scan_queue_add(queue, queued, dev->parent_bridge);
    }
    av_pci_scan_clear(&scan);
    g_ptr_array_sort(host->pci, av_pci_device_cmp);
    if (mdev_parents)
        av_host_scan_mdev_parents(root, host);
    /* A function in an IOMMU group says the IOMMU is on without a listing
     * of every group of the host. */
    for (guint i = 0; i < host->pci->len && !host->iommu_enabled; i++)
        host->iommu_enabled = ((const AvPciDevice *)g_ptr_array_index(host->pci, i))->iommu_group >= 0;
    if (!host->iommu_enabled && host->pci->len > 0)
        host->iommu_enabled = av_host_iommu_enabled(root);
    if (!av_numa_scan(root, host->numa_nodes, error))
        return NULL;
    av_host_infer_numa(host);
    return g_steal_pointer(&host);
}

/* Scans the whole host: see av-pci.h.  The caller owns the result. */
AvHost *
av_host_scan(const AvRoot *root, GError **error)
{
    g_autoptr(AvHost) host = av_host_new(root);
    g_autofree char *dir = av_sys_path("bus/pci/devices");
    g_auto(GStrv) names = NULL;
    AvPciScan scan = { .root = root };
    int r;

    r = av_root_list_dir(root, dir, &names);
    if (r == -ENOENT) {
        g_autofree char *sys = av_sys_path("bus");
        g_autofree char *pci_bus = av_sys_path("bus/pci");

        /* A kernel without a PCI bus still has /sys/bus (platform, usb,
         * ...): such a host lists its NUMA nodes, USB devices and mdev
         * parents.  No /sys/bus at all is a --root that points nowhere. */
        if (av_root_exists(root, sys) && !av_root_exists(root, pci_bus)) {
            names = g_new0(char *, 1);
            r = 0;
        }
    } else if (r == 0) {
        host->has_pci_bus = TRUE;
    }
    if (r < 0) {
        g_autofree char *where = av_root_host_path(root, dir);

        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                    "cannot list the PCI devices in '%s': %s; --root (or ACCELVIRT_ROOT) must point at "
                    "a directory holding sys/, such as '/' or a tree captured from a host",
                    where, g_strerror(-r));
        return NULL;
    }

    av_pci_scan_load_slots(&scan);
    for (guint i = 0; names[i]; i++) {
        if (!av_pci_address_is_valid(names[i])) {
            g_debug("ignoring '%s' in %s: not a PCI address", names[i], dir);
            continue;
        }
        if (!av_pci_scan_add(&scan, host, names[i], NULL, error)) {
            av_pci_scan_clear(&scan);
            return NULL;
        }
    }
    av_pci_scan_clear(&scan);
    g_ptr_array_sort(host->pci, av_pci_device_cmp);
    av_pci_ids_name(host->pci);
    av_host_scan_mdev_parents(root, host);

    host->iommu_enabled = av_host_iommu_enabled(root);
    if (!av_usb_scan(root, host->usb, error))
        return NULL;
    host->usb_scanned = TRUE;
    if (!av_numa_scan(root, host->numa_nodes, error))
        return NULL;
    av_host_infer_numa(host);
    return g_steal_pointer(&host);
}

/* See av-pci.h. */
void
av_pci_id_read_free(AvPciIdRead *read)
{
    if (!read)
        return;
    g_free(read->address);
    g_free(read);
}

/* See av-pci.h.  The reads are those of av_pci_device_scan_one() and
 * av_pci_device_read_ids(), through the device's link: "vendor", then
 * "device" or, without it, the config header's word at 0x02 (0 when that
 * is unreadable too), and the DSN as av_pci_config_find_dsn() finds it in
 * "config".  "config" is read only for the functions that match. */
GPtrArray *
av_pci_find_by_ids(const AvRoot *root, guint16 vendor, guint16 device, GError **error)
{
    g_autoptr(GPtrArray) found = g_ptr_array_new_with_free_func((GDestroyNotify)av_pci_id_read_free);
    g_autofree char *dir = av_sys_path("bus/pci/devices");
    g_auto(GStrv) names = NULL;
    int r = av_root_list_dir(root, dir, &names);

    if (r == -ENOENT)
        return g_steal_pointer(&found);
    if (r < 0) {
        av_error_errno(error, r, "cannot list the PCI devices");
        return NULL;
    }
    for (guint i = 0; names[i]; i++) {
        g_autofree char *path = NULL;
        g_autofree char *config = NULL;
        g_autofree char *config_path = NULL;
        gsize config_len = 0;
        AvPciIdRead *read;
        guint64 v = 0;
        guint16 id;

        if (!av_pci_address_is_valid(names[i]))
            continue;
        path = av_sys_path("bus/pci/devices/%s", names[i]);
        r = av_attr_read_hex(root, path, "vendor", 0xffff, &v);
        /* Gone (a dangling link, removed meanwhile): what a scan leaves out. */
        if (r == -ENOENT || (r == 0 && v != vendor))
            continue;
        read = g_new0(AvPciIdRead, 1);
        read->address = g_strdup(names[i]);
        g_ptr_array_add(found, read);
        /* Its vendor id unreadable: what it presents is not known. */
        if (r < 0)
            continue;
        config_path = g_strconcat(path, "/config", NULL);
        if (av_root_read_file(root, config_path, &config, &config_len) < 0)
            config_len = 0;
        if (av_attr_read_hex(root, path, "device", 0xffff, &v) == 0)
            id = (guint16)v;
        else
            id = config_len >= 4 ? av_config_word((const guint8 *)config, 0x02) : 0;
        if (id != device) {
            g_ptr_array_remove_index(found, found->len - 1);
            continue;
        }
        read->known = TRUE;
        read->has_dsn = av_pci_config_find_dsn((const guint8 *)config, config_len, &read->dsn);
    }
    return g_steal_pointer(&found);
}

/* See av-pci.h. */
AvPciDevice *
av_host_find_netdev(const AvHost *host, const char *name)
{
    if (!host || !host->pci || !av_netdev_name_is_valid(name))
        return NULL;
    for (guint i = 0; i < host->pci->len; i++) {
        AvPciDevice *dev = g_ptr_array_index(host->pci, i);

        for (guint j = 0; dev->netdevs && j < dev->netdevs->len; j++)
            if (g_str_equal(g_ptr_array_index(dev->netdevs, j), name))
                return dev;
    }
    return NULL;
}

/* See av-pci.h. */
AvPciDevice *
av_host_find_pci(const AvHost *host, const char *address)
{
    guint lo = 0, hi;
    guint64 key;

    if (!host || !host->pci || !address)
        return NULL;
    /* A binary search: every scan leaves @pci sorted by
     * av_pci_address_compare(), a total order (invalid addresses after the
     * valid ones, by strcmp()), and sets each device's key: @address is
     * parsed once.  The string itself must match. */
    key = av_pci_address_key(address);
    hi = host->pci->len;
    while (lo < hi) {
        guint mid = lo + (hi - lo) / 2;
        AvPciDevice *dev = g_ptr_array_index(host->pci, mid);
        int c = av_pci_address_key_compare(av_pci_device_key(dev), dev->address, key, address);

        if (c == 0 && g_str_equal(dev->address, address))
            return dev;
        if (c == 0)
            break;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* A miss: a linear search, so that a host built by hand in another
     * order (tests) finds what it holds. */
    for (guint i = 0; i < host->pci->len; i++) {
        AvPciDevice *dev = g_ptr_array_index(host->pci, i);

        if (g_str_equal(dev->address, address))
            return dev;
    }
    return NULL;
}

/* See av-pci.h.  The chain is the parent_bridge links of the scan: the
 * kernel makes a function's sysfs directory a child of the bridge above it
 * (Documentation/ABI/testing/sysfs-bus-pci; a VF's directory is a sibling
 * of its PF's, drivers/pci/iov.c: pci_iov_add_virtfn() gives it the PF's
 * bus parent).  PCIe Base Spec 1.3.3: a switch is an upstream port above
 * downstream ports, each a PCI-to-PCI bridge. */
gboolean
av_host_pci_position(const AvHost *host, const char *address, const char **ret_root_port,
                     const char **ret_switch)
{
    return av_host_pci_device_position(host, av_host_find_pci(host, address), ret_root_port, ret_switch);
}

/* See av-pci.h; @dev NULL: unknown. */
gboolean
av_host_pci_device_position(const AvHost *host, const AvPciDevice *dev, const char **ret_root_port,
                            const char **ret_switch)
{
    const char *chain[AV_PCI_BRIDGE_DEPTH_MAX];
    const AvPciDevice *pf;
    const char *parent;
    guint depth = 0;

    if (ret_root_port)
        *ret_root_port = NULL;
    if (ret_switch)
        *ret_switch = NULL;
    if (!dev)
        return FALSE;
    /* A VF sits where its PF sits, when the scan holds the PF. */
    if (dev->physfn && (pf = av_host_find_pci(host, dev->physfn)))
        dev = pf;
    for (parent = dev->parent_bridge; parent; depth++) {
        const AvPciDevice *bridge;

        /* Deeper than any real hierarchy: a loop or a corrupt tree. */
        if (depth == AV_PCI_BRIDGE_DEPTH_MAX)
            return FALSE;
        bridge = av_host_find_pci(host, parent);
        if (!bridge)
            return FALSE;
        chain[depth] = bridge->address;
        parent = bridge->parent_bridge;
    }
    /* chain[0] is the bridge right above the function, chain[depth - 1]
     * the root port. */
    if (ret_root_port && depth >= 1)
        *ret_root_port = chain[depth - 1];
    if (ret_switch && depth >= 3)
        *ret_switch = chain[depth - 2];
    return TRUE;
}

/* See av-pci.h. */
char *
av_pci_sriov_vf_address(const char *pf_address, guint offset, guint stride, guint index)
{
    guint domain, bus, slot, fn;
    guint64 rid;

    if (!av_pci_address_is_valid(pf_address) || sscanf(pf_address, "%4x:%2x:%2x.%1x", &domain, &bus, &slot, &fn) != 4)
        return NULL;
    rid = ((guint64)bus << 8 | slot << 3 | fn) + offset + (guint64)stride * index;
    if (rid > 0xffff)
        return NULL;
    return g_strdup_printf("%04x:%02x:%02x.%x", domain, (guint)(rid >> 8), (guint)(rid >> 3) & 0x1f, (guint)rid & 7);
}
