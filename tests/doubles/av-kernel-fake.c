/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt test doubles: the emulated kernel, moved out of
 * src/vfio/av-kernel.c so that the installed programs hold no part of it.
 *
 * The fake table, for trees under any root prefix other than "/", does to
 * the tree what the kernel would do (see av-doubles.h for the list), the way
 * libvirt's tests/virpcimock.c does.  It works on root-relative paths that
 * av_root_resolve() has canonicalised, so a write through
 * /sys/bus/pci/devices/ADDR/... and one through /sys/devices/... are the
 * same write.  av-doubles.c registers it (av_kernel_ops_set_double()). */
#include "config.h"

#include "av-doubles.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pci/av-pci.h"
#include "util/av-file.h"
#include "util/av-point.h"
#include "vfio/av-kernel-private.h"

/* --- the emulated kernel ---------------------------------------------------- */

/* The write's argument as the kernel's sysfs_streq() sees it: without one
 * trailing newline.  Caller frees. */
static char *
av_fake_arg(const char *value)
{
    gsize len = strlen(value);

    if (len > 0 && value[len - 1] == '\n')
        len--;
    return g_strndup(value, len);
}

/* The errno of a "fail PATH ERRNO" line of sys/.accelvirt-fake-kernel that
 * names @path or @resolved (PATH may be a g_pattern_match_simple() glob),
 * or 0. */
static int
av_fake_injected_failure(const AvRoot *root, const char *path, const char *resolved)
{
    g_autofree char *control = av_sys_path(".accelvirt-fake-kernel");
    g_autofree char *contents = NULL;
    g_auto(GStrv) lines = NULL;

    if (av_root_read_file(root, control, &contents, NULL) < 0)
        return 0;
    lines = g_strsplit(contents, "\n", -1);
    for (guint i = 0; lines[i]; i++) {
        g_auto(GStrv) words = g_strsplit_set(g_strstrip(lines[i]), " \t", -1);
        g_autoptr(GPtrArray) w = g_ptr_array_new();
        guint64 e;

        for (guint j = 0; words[j]; j++)
            if (*words[j])
                g_ptr_array_add(w, words[j]);
        if (w->len != 3 || !g_str_equal(g_ptr_array_index(w, 0), "fail"))
            continue;
        if (!g_ascii_string_to_unsigned(g_ptr_array_index(w, 2), 10, 1, 4095, &e, NULL))
            continue;
        if (g_pattern_match_simple(g_ptr_array_index(w, 1), path) ||
            (resolved && g_pattern_match_simple(g_ptr_array_index(w, 1), resolved)))
            return -(int)e;
    }
    return 0;
}

/* Writes @contents to the root-relative file @path (no links in it),
 * creating it with @mode when absent.  Returns 0 or -errno. */
static int
av_fake_put(const AvRoot *root, const char *path, const char *contents, mode_t mode)
{
    g_autofree char *host = av_root_host_path(root, path);
    size_t len = strlen(contents);
    ssize_t n;
    int fd, r = 0;

    fd = open(host, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -errno;
    n = write(fd, contents, len);
    if (n < 0)
        r = -errno;
    else if ((size_t)n != len)
        r = -EIO;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    return r;
}

static int
av_fake_mkdir_p(const AvRoot *root, const char *path)
{
    g_autofree char *host = av_root_host_path(root, path);

    return g_mkdir_with_parents(host, 0755) < 0 ? -errno : 0;
}

/* The relative link target from the directory @from_dir to @to, both
 * canonical root-relative paths, as the kernel's sysfs links are. */
static char *
av_fake_relative(const char *from_dir, const char *to)
{
    g_auto(GStrv) a = g_strsplit(from_dir + 1, "/", -1);
    g_auto(GStrv) b = g_strsplit(to + 1, "/", -1);
    GString *s = g_string_new(NULL);
    guint i = 0;

    while (a[i] && b[i] && *a[i] && g_str_equal(a[i], b[i]))
        i++;
    for (guint j = i; a[j]; j++)
        if (*a[j])
            g_string_append(s, "../");
    for (guint j = i; b[j]; j++) {
        g_string_append(s, b[j]);
        if (b[j + 1])
            g_string_append_c(s, '/');
    }
    return g_string_free(s, FALSE);
}

/* Creates the link @path -> @target (root-relative; relative link),
 * creating the parent directory.  Returns 0 or -errno. */
static int
av_fake_link(const AvRoot *root, const char *path, const char *target)
{
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *rel = av_fake_relative(dir, target);
    g_autofree char *host = av_root_host_path(root, path);
    int r;

    r = av_fake_mkdir_p(root, dir);
    if (r < 0)
        return r;
    if (symlink(rel, host) < 0)
        return -errno;
    return 0;
}

/* Removes the file or link @path; a missing one is fine. */
static int
av_fake_unlink(const AvRoot *root, const char *path)
{
    g_autofree char *host = av_root_host_path(root, path);

    if (unlink(host) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

/* Removes the directory @path and everything in it, without following links. */
static int
av_fake_remove_tree(const AvRoot *root, const char *path)
{
    g_autofree char *host = av_root_host_path(root, path);
    struct stat st;
    GDir *dir;
    const char *name;
    int r = 0;

    if (lstat(host, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return unlink(host) < 0 ? -errno : 0;
    dir = g_dir_open(host, 0, NULL);
    if (!dir)
        return -EIO;
    while ((name = g_dir_read_name(dir)) && r == 0) {
        g_autofree char *child = g_strconcat(path, "/", name, NULL);

        r = av_fake_remove_tree(root, child);
    }
    g_dir_close(dir);
    if (r == 0 && rmdir(host) < 0)
        r = -errno;
    return r;
}

/* The canonical directory of the PCI device @address, or NULL. */
static char *
av_fake_device_dir(const AvRoot *root, const char *address)
{
    g_autofree char *link = NULL;
    char *resolved = NULL;

    if (!av_pci_address_is_valid(address))
        return NULL;
    link = av_sys_path("bus/pci/devices/%s", address);
    if (av_root_resolve(root, link, &resolved) < 0)
        return NULL;
    return resolved;
}

/* The name of the link @dir/@name's target, or NULL. */
static char *
av_fake_link_name(const AvRoot *root, const char *dir, const char *name)
{
    g_autofree char *path = g_strconcat(dir, "/", name, NULL);
    char *ret = NULL;

    if (av_root_link_name(root, path, &ret) < 0)
        return NULL;
    return ret;
}

/* Keeps /dev/vfio/GROUP in step with the devices of the IOMMU group of the
 * device at @devdir: present exactly while one of them is on vfio-pci. */
static int
av_fake_sync_group_node(const AvRoot *root, const char *devdir)
{
    g_autofree char *group = av_fake_link_name(root, devdir, "iommu_group");
    g_autofree char *members_dir = NULL;
    g_autofree char *node = NULL;
    g_autofree char *node_dir = NULL;
    g_auto(GStrv) members = NULL;
    gboolean on_vfio = FALSE;
    int r;

    if (!group)
        return 0;
    members_dir = av_sys_path("kernel/iommu_groups/%s/devices", group);
    if (av_root_list_dir(root, members_dir, &members) == 0) {
        for (guint i = 0; members[i] && !on_vfio; i++) {
            g_autofree char *member = g_strconcat(members_dir, "/", members[i], NULL);
            g_autofree char *drv = av_fake_link_name(root, member, "driver");

            on_vfio = drv && av_pci_driver_is_vfio(drv);
        }
    }
    node_dir = av_dev_path("vfio");
    node = av_dev_path("vfio/%s", group);
    if (!on_vfio)
        return av_fake_unlink(root, node);
    r = av_fake_mkdir_p(root, node_dir);
    if (r < 0)
        return r;
    if (av_root_exists(root, node))
        return 0;
    return av_fake_put(root, node, "", 0600);
}

/* The driver_override of @devdir, NULL when unset. */
static char *
av_fake_override(const AvRoot *root, const char *devdir)
{
    g_autofree char *path = g_strconcat(devdir, "/driver_override", NULL);
    char *value = NULL;

    if (av_root_read_attr(root, path, &value) < 0)
        return NULL;
    if (!*value || g_str_equal(value, "(null)")) {
        g_free(value);
        return NULL;
    }
    return value;
}

/* Links the device @address at @devdir to the driver @drv. */
static int
av_fake_attach(const AvRoot *root, const char *address, const char *devdir, const char *drv)
{
    g_autofree char *drv_dir = av_sys_path("bus/pci/drivers/%s", drv);
    g_autofree char *link = g_strconcat(devdir, "/driver", NULL);
    g_autofree char *back = g_strconcat(drv_dir, "/", address, NULL);
    int r;

    r = av_fake_link(root, link, drv_dir);
    if (r == 0)
        r = av_fake_link(root, back, devdir);
    if (r == 0)
        r = av_fake_sync_group_node(root, devdir);
    return r;
}

/* FALSE when @drv is a vfio-pci variant whose module's vfio_pci: aliases
 * (the running kernel's modules.alias under @root) do not name @address:
 * its probe refuses a device it does not know, as mlx5_vfio_pci's
 * does a function that is not a ConnectX VF.  vfio-pci takes any device;
 * so does a variant the file does not list (nothing known of it). */
static gboolean
av_fake_variant_accepts(const AvRoot *root, const char *drv, const char *address)
{
    g_autoptr(AvVfioAliases) aliases = NULL;
    g_autofree char *module = NULL;

    if (g_str_equal(drv, "vfio-pci") || !av_pci_driver_is_vfio(drv))
        return TRUE;
    aliases = av_vfio_aliases_load(root);
    if (!av_vfio_aliases_module_has(aliases, drv))
        return TRUE;
    module = av_pci_vfio_module_for(root, aliases, address);
    return g_strcmp0(module, drv) == 0;
}

/* drivers/DRV/bind: Documentation/ABI/testing/sysfs-bus-pci. */
static int
av_fake_bind(const AvRoot *root, const char *drv, const char *value)
{
    g_autofree char *address = av_fake_arg(value);
    g_autofree char *devdir = av_fake_device_dir(root, address);
    g_autofree char *current = NULL;
    g_autofree char *override = NULL;

    if (!devdir)
        return -ENODEV;
    current = av_fake_link_name(root, devdir, "driver");
    if (current)
        return -EBUSY;
    /* A device with an override matches no other driver (pci_match_device).
     * vfio-pci and its variants list their ids override-only
     * (PCI_DRIVER_OVERRIDE_DEVICE_VFIO): without the override naming them,
     * a bind by name finds no match. */
    override = av_fake_override(root, devdir);
    if (override && !g_str_equal(override, drv))
        return -ENODEV;
    if (!override && av_pci_driver_is_vfio(drv))
        return -ENODEV;
    if (!av_fake_variant_accepts(root, drv, address))
        return -ENODEV;
    return av_fake_attach(root, address, devdir, drv);
}

/* drivers/DRV/unbind. */
static int
av_fake_unbind(const AvRoot *root, const char *drv, const char *value)
{
    g_autofree char *address = av_fake_arg(value);
    g_autofree char *devdir = av_fake_device_dir(root, address);
    g_autofree char *current = NULL;
    g_autofree char *link = NULL;
    g_autofree char *back = NULL;
    int r;

    if (!devdir)
        return -ENODEV;
    current = av_fake_link_name(root, devdir, "driver");
    if (!current || !g_str_equal(current, drv))
        return -ENODEV;
    link = g_strconcat(devdir, "/driver", NULL);
    back = av_sys_path("bus/pci/drivers/%s/%s", drv, address);
    r = av_fake_unlink(root, link);
    if (r == 0)
        r = av_fake_unlink(root, back);
    if (r == 0)
        r = av_fake_sync_group_node(root, devdir);
    return r;
}

/* drivers_probe: binds the device to its driver_override.  As the kernel,
 * a device already bound, or an override naming a driver that is not
 * loaded, is left as it is and the write succeeds. */
static int
av_fake_probe(const AvRoot *root, const char *value)
{
    g_autofree char *address = av_fake_arg(value);
    g_autofree char *devdir = av_fake_device_dir(root, address);
    g_autofree char *current = NULL;
    g_autofree char *override = NULL;
    g_autofree char *drv_dir = NULL;

    if (!devdir)
        return -ENODEV;
    current = av_fake_link_name(root, devdir, "driver");
    if (current)
        return 0;
    override = av_fake_override(root, devdir);
    if (!override)
        return -ENODEV;
    if (strchr(override, '/') || g_str_equal(override, ".") || g_str_equal(override, ".."))
        return 0;
    drv_dir = av_sys_path("bus/pci/drivers/%s", override);
    if (!av_root_exists(root, drv_dir))
        return 0;
    if (!av_fake_variant_accepts(root, override, address))
        return 0;
    return av_fake_attach(root, address, devdir, override);
}

/* driver_override: stores the value; an empty one ("\n") clears it. */
static int
av_fake_set_override(const AvRoot *root, const char *resolved, const char *value)
{
    g_autofree char *arg = av_fake_arg(value);
    g_autofree char *contents = NULL;

    if (strlen(arg) >= 4096)
        return -EINVAL;
    contents = g_strconcat(*arg ? arg : "(null)", "\n", NULL);
    return av_fake_put(root, resolved, contents, 0644);
}

static gboolean
av_fake_uuid_ok(const char *s)
{
    if (strlen(s) != 36)
        return FALSE;
    for (guint i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return FALSE;
        } else if (!g_ascii_isxdigit(s[i])) {
            return FALSE;
        }
    }
    return TRUE;
}

/* Adds @delta to the available_instances of the type directory @type_dir. */
static int
av_fake_adjust_available(const AvRoot *root, const char *type_dir, int delta)
{
    g_autofree char *path = g_strconcat(type_dir, "/available_instances", NULL);
    g_autofree char *contents = NULL;
    guint64 n;
    int r;

    r = av_root_read_uint(root, path, 10, &n);
    if (r < 0)
        return r;
    if (delta < 0 && n == 0)
        return -EUSERS;
    contents = g_strdup_printf("%" G_GUINT64_FORMAT "\n", (guint64)((gint64)n + delta));
    return av_fake_put(root, path, contents, 0644);
}

/* The next free IOMMU group number. */
static int
av_fake_new_group(const AvRoot *root)
{
    g_autofree char *dir = av_sys_path("kernel/iommu_groups");
    g_auto(GStrv) names = NULL;
    guint64 max = 0, n;
    gboolean any = FALSE;

    if (av_root_list_dir(root, dir, &names) == 0) {
        for (guint i = 0; names[i]; i++) {
            if (g_ascii_string_to_unsigned(names[i], 10, 0, G_MAXINT - 1, &n, NULL)) {
                if (!any || n > max)
                    max = n;
                any = TRUE;
            }
        }
    }
    return any ? (int)max + 1 : 0;
}

/* mdev_supported_types/TYPE/create: Documentation/driver-api/vfio-mediated-device.rst. */
static int
av_fake_mdev_create(const AvRoot *root, const char *create, const char *value)
{
    g_autofree char *arg = av_fake_arg(value);
    g_autofree char *uuid = NULL;
    g_autofree char *type_dir = g_path_get_dirname(create);
    g_autofree char *types_dir = g_path_get_dirname(type_dir);
    g_autofree char *parent_dir = g_path_get_dirname(types_dir);
    g_autofree char *bus_link = NULL;
    g_autofree char *mdir = NULL;
    g_autofree char *group_dir = NULL;
    g_autofree char *path = NULL;
    guint64 avail;
    int r, group;

    if (!av_fake_uuid_ok(arg))
        return -EINVAL;
    uuid = g_ascii_strdown(arg, -1);
    bus_link = av_sys_path("bus/mdev/devices/%s", uuid);
    mdir = g_strconcat(parent_dir, "/", uuid, NULL);
    if (av_root_exists(root, bus_link) || av_root_exists(root, mdir))
        return -EEXIST;
    path = g_strconcat(type_dir, "/available_instances", NULL);
    r = av_root_read_uint(root, path, 10, &avail);
    if (r < 0)
        return r;
    if (avail == 0)
        return -EUSERS;
    g_clear_pointer(&path, g_free);

    r = av_fake_mkdir_p(root, mdir);
    if (r < 0)
        return r;
    path = g_strconcat(mdir, "/mdev_type", NULL);
    if ((r = av_fake_link(root, path, type_dir)) < 0)
        return r;
    g_clear_pointer(&path, g_free);
    path = g_strconcat(type_dir, "/devices/", uuid, NULL);
    if ((r = av_fake_link(root, path, mdir)) < 0)
        return r;
    g_clear_pointer(&path, g_free);
    {
        g_autofree char *bus = av_sys_path("bus/mdev");

        path = g_strconcat(mdir, "/subsystem", NULL);
        if ((r = av_fake_mkdir_p(root, bus)) < 0 || (r = av_fake_link(root, path, bus)) < 0)
            return r;
    }
    g_clear_pointer(&path, g_free);
    path = g_strconcat(mdir, "/remove", NULL);
    if ((r = av_fake_put(root, path, "", 0600)) < 0)
        return r;
    if ((r = av_fake_link(root, bus_link, mdir)) < 0)
        return r;
    group = av_fake_new_group(root);
    group_dir = av_sys_path("kernel/iommu_groups/%d", group);
    g_clear_pointer(&path, g_free);
    path = g_strconcat(group_dir, "/devices/", uuid, NULL);
    if ((r = av_fake_link(root, path, mdir)) < 0)
        return r;
    g_clear_pointer(&path, g_free);
    path = g_strconcat(group_dir, "/type", NULL);
    if ((r = av_fake_put(root, path, "blocked\n", 0644)) < 0)
        return r;
    g_clear_pointer(&path, g_free);
    path = g_strconcat(mdir, "/iommu_group", NULL);
    if ((r = av_fake_link(root, path, group_dir)) < 0)
        return r;
    return av_fake_adjust_available(root, type_dir, -1);
}

/* Takes @member out of the IOMMU group @group; an empty group goes. */
static int
av_fake_group_leave(const AvRoot *root, const char *group, const char *member)
{
    g_autofree char *group_dir = NULL;
    g_autofree char *members = NULL;
    g_autofree char *path = NULL;
    g_auto(GStrv) left = NULL;
    int r;

    if (!group || strchr(group, '/'))
        return 0;
    group_dir = av_sys_path("kernel/iommu_groups/%s", group);
    members = g_strconcat(group_dir, "/devices", NULL);
    path = g_strconcat(members, "/", member, NULL);
    if ((r = av_fake_unlink(root, path)) < 0)
        return r;
    if (av_root_list_dir(root, members, &left) == 0 && !left[0])
        return av_fake_remove_tree(root, group_dir);
    return 0;
}

/* UUID/remove "1": the mdev goes away, its instance is free again. */
static int
av_fake_mdev_remove(const AvRoot *root, const char *remove, const char *value)
{
    g_autofree char *arg = av_fake_arg(value);
    g_autofree char *mdir = g_path_get_dirname(remove);
    g_autofree char *uuid = g_path_get_basename(mdir);
    g_autofree char *type_link = g_strconcat(mdir, "/mdev_type", NULL);
    g_autofree char *type_dir = NULL;
    g_autofree char *group = av_fake_link_name(root, mdir, "iommu_group");
    g_autofree char *bus_link = av_sys_path("bus/mdev/devices/%s", uuid);
    g_autofree char *path = NULL;
    int r;

    if (!g_str_equal(arg, "1") && !g_str_equal(arg, "y") && !g_str_equal(arg, "Y"))
        return g_str_equal(arg, "0") ? 0 : -EINVAL;
    r = av_root_resolve(root, type_link, &type_dir);
    if (r < 0)
        return r;
    path = g_strconcat(type_dir, "/devices/", uuid, NULL);
    if ((r = av_fake_unlink(root, path)) < 0)
        return r;
    if ((r = av_fake_adjust_available(root, type_dir, +1)) < 0)
        return r;
    if ((r = av_fake_group_leave(root, group, uuid)) < 0)
        return r;
    if ((r = av_fake_unlink(root, bus_link)) < 0)
        return r;
    return av_fake_remove_tree(root, mdir);
}

/* resourceN_resize (Documentation/ABI/testing/sysfs-bus-pci): the file
 * holds the bitmap of sizes and keeps it; writing a bit number B (as
 * kstrtoul reads it) with no driver bound resizes BAR N to 2^(B + 20)
 * bytes: the regular file resourceN takes that size (grown with zeros,
 * shrunk by truncation), line N of "resource" ends at its start plus the
 * size.  A driver bound: -EBUSY; B not in the bitmap: -EINVAL (the
 * kernel's pci_resize_resource()). */
static int
av_fake_resize(const AvRoot *root, const char *resolved, const char *devdir, guint bar, const char *value)
{
    g_autofree char *arg = av_fake_arg(value);
    g_autofree char *driver = g_strconcat(devdir, "/driver", NULL);
    g_autofree char *bitmap_text = NULL;
    g_autofree char *res_path = g_strdup_printf("%s/resource%u", devdir, bar);
    g_autofree char *res_host = av_root_host_path(root, res_path);
    g_autofree char *table_path = g_strconcat(devdir, "/resource", NULL);
    g_autofree char *table = NULL;
    g_auto(GStrv) lines = NULL;
    g_autoptr(GString) out = g_string_new(NULL);
    guint64 bit, bitmap, size, start, end, flags;
    int r;

    if (g_str_has_prefix(arg, "0x") ? !g_ascii_string_to_unsigned(arg + 2, 16, 0, 63, &bit, NULL)
                                    : !g_ascii_string_to_unsigned(arg, 10, 0, 63, &bit, NULL))
        return -EINVAL;
    if (av_root_exists(root, driver))
        return -EBUSY;
    r = av_root_read_attr(root, resolved, &bitmap_text);
    if (r < 0)
        return r;
    if (!g_ascii_string_to_unsigned(bitmap_text, 16, 0, G_MAXUINT64, &bitmap, NULL) || bit > AV_PCI_REBAR_BIT_MAX ||
        !(bitmap & ((guint64)1 << bit)))
        return -EINVAL;
    size = AV_PCI_REBAR_SIZE(bit);
    if (truncate(res_host, (off_t)size) < 0)
        return -errno;
    r = av_root_read_file(root, table_path, &table, NULL);
    if (r < 0)
        return r;
    lines = g_strsplit(table, "\n", -1);
    for (guint i = 0; lines[i]; i++) {
        if (!lines[i][0] && !lines[i + 1])
            break;
        if (i == bar && sscanf(lines[i], "0x%" G_GINT64_MODIFIER "x 0x%" G_GINT64_MODIFIER "x 0x%" G_GINT64_MODIFIER "x",
                               &start, &end, &flags) == 3)
            g_string_append_printf(out, "0x%016" G_GINT64_MODIFIER "x 0x%016" G_GINT64_MODIFIER "x 0x%016"
                                   G_GINT64_MODIFIER "x\n", start, start + size - 1, flags);
        else
            g_string_append_printf(out, "%s\n", lines[i]);
    }
    return av_fake_put(root, table_path, out->str, 0644);
}

/* --- SR-IOV: sriov_numvfs ----------------------------------------------- */

/* Reads the unsigned attribute @name of the device at @devdir. */
static int
av_fake_read_uint(const AvRoot *root, const char *devdir, const char *name, guint base, guint64 *ret)
{
    g_autofree char *path = g_strconcat(devdir, "/", name, NULL);

    return av_root_read_uint(root, path, base, ret);
}

/* Copies the attribute @name of @from to @to, when @from has it. */
static int
av_fake_copy_attr(const AvRoot *root, const char *from, const char *to, const char *name)
{
    g_autofree char *src = g_strconcat(from, "/", name, NULL);
    g_autofree char *dst = g_strconcat(to, "/", name, NULL);
    g_autofree char *contents = NULL;
    gsize len;

    if (av_root_read_file(root, src, &contents, &len) < 0)
        return 0;
    return av_fake_put(root, dst, contents, 0644);
}

/* Writes @contents to @dir/@name.  Returns 0 or -errno. */
static int
av_fake_put_in(const AvRoot *root, const char *dir, const char *name, const char *contents, mode_t mode)
{
    g_autofree char *path = g_strconcat(dir, "/", name, NULL);

    return av_fake_put(root, path, contents, mode);
}

/* Links @dir/@name to @target.  Returns 0 or -errno. */
static int
av_fake_link_in(const AvRoot *root, const char *dir, const char *name, const char *target)
{
    g_autofree char *path = g_strconcat(dir, "/", name, NULL);

    return av_fake_link(root, path, target);
}

/* One 16 KiB prefetchable memory BAR 0 for VF @index, so that a VF's
 * vfio-zero has something to clear; "resource" says so as the kernel
 * prints it. */
static int
av_fake_vf_bar(const AvRoot *root, const char *vfdir, guint index)
{
    g_autofree char *path = g_strconcat(vfdir, "/resource0", NULL);
    g_autofree char *host = av_root_host_path(root, path);
    g_autofree char *zeros = g_malloc0(16384);
    g_autoptr(GString) table = g_string_new(NULL);
    guint64 start = 0x00000000e0000000ULL + (guint64)index * 16384;

    if (!g_file_set_contents(host, zeros, 16384, NULL))
        return -EIO;
    g_string_append_printf(table, "0x%016" G_GINT64_MODIFIER "x 0x%016" G_GINT64_MODIFIER "x 0x%016x\n", start,
                           start + 16383, AV_IORESOURCE_MEM | AV_IORESOURCE_PREFETCH);
    for (guint i = 1; i < 13; i++)
        g_string_append(table, "0x0000000000000000 0x0000000000000000 0x0000000000000000\n");
    return av_fake_put_in(root, vfdir, "resource", table->str, 0444);
}

/* The ids and attributes a VF takes from its PF, its own device id
 * (sriov_vf_device), no driver_override, a reset when the PF has one. */
static int
av_fake_vf_attrs(const AvRoot *root, const char *pfdir, const char *vfdir, guint index)
{
    static const char *const copied[] = {
        "vendor", "subsystem_vendor", "subsystem_device", "class", "revision", "numa_node", "local_cpulist",
        "reset_method", "config", NULL,
    };
    g_autofree char *vf_device = g_strconcat(pfdir, "/sriov_vf_device", NULL);
    g_autofree char *pf_reset = g_strconcat(pfdir, "/reset", NULL);
    g_autofree char *id = NULL;
    g_autofree char *text = NULL;
    int r;

    for (guint i = 0; copied[i]; i++)
        if ((r = av_fake_copy_attr(root, pfdir, vfdir, copied[i])) < 0)
            return r;
    if ((r = av_root_read_attr(root, vf_device, &id)) < 0)
        return r;
    text = g_strdup_printf("0x%s\n", g_str_has_prefix(id, "0x") ? id + 2 : id);
    if ((r = av_fake_put_in(root, vfdir, "device", text, 0644)) < 0 ||
        (r = av_fake_put_in(root, vfdir, "driver_override", "(null)\n", 0644)) < 0 ||
        (r = av_fake_put_in(root, vfdir, "enable", "0\n", 0644)) < 0)
        return r;
    if (av_root_exists(root, pf_reset) && (r = av_fake_put_in(root, vfdir, "reset", "", 0200)) < 0)
        return r;
    return av_fake_vf_bar(root, vfdir, index);
}

/* Makes VF @index of the PF at @pfdir: its directory beside the PF (on the
 * PF's parent bus), the physfn, virtfnN, subsystem and bus links, an IOMMU
 * group of its own, no driver (sriov_drivers_autoprobe 0, as accelvirt
 * writes it; the emulation probes no VF driver either way). */
static int
av_fake_vf_create(const AvRoot *root, const char *pfdir, const char *vf_address, guint index)
{
    g_autofree char *parent = g_path_get_dirname(pfdir);
    g_autofree char *vfdir = g_strconcat(parent, "/", vf_address, NULL);
    g_autofree char *bus = av_sys_path("bus/pci");
    g_autofree char *bus_link = av_sys_path("bus/pci/devices/%s", vf_address);
    g_autofree char *virtfn = g_strdup_printf("virtfn%u", index);
    g_autofree char *group_dir = NULL;
    g_autofree char *members = NULL;
    int r;

    if (av_root_exists(root, vfdir) || av_root_exists(root, bus_link))
        return -EEXIST;
    if ((r = av_fake_mkdir_p(root, vfdir)) < 0 || (r = av_fake_vf_attrs(root, pfdir, vfdir, index)) < 0 ||
        (r = av_fake_link_in(root, vfdir, "physfn", pfdir)) < 0 ||
        (r = av_fake_link_in(root, pfdir, virtfn, vfdir)) < 0 ||
        (r = av_fake_link_in(root, vfdir, "subsystem", bus)) < 0 || (r = av_fake_link(root, bus_link, vfdir)) < 0)
        return r;
    group_dir = av_sys_path("kernel/iommu_groups/%d", av_fake_new_group(root));
    members = g_strconcat(group_dir, "/devices", NULL);
    if ((r = av_fake_link_in(root, members, vf_address, vfdir)) < 0 ||
        (r = av_fake_put_in(root, group_dir, "type", "DMA-FQ\n", 0644)) < 0)
        return r;
    return av_fake_link_in(root, vfdir, "iommu_group", group_dir);
}

/* Removes the VF at @vfdir, linked as the PF's @virtfn: unbound from its
 * driver, out of its IOMMU group (the group goes when empty), its links
 * and directory gone (pci_iov_remove_virtfn()). */
static int
av_fake_vf_remove(const AvRoot *root, const char *pfdir, const char *virtfn, const char *vfdir)
{
    g_autofree char *address = g_path_get_basename(vfdir);
    g_autofree char *drv = av_fake_link_name(root, vfdir, "driver");
    g_autofree char *group = av_fake_link_name(root, vfdir, "iommu_group");
    g_autofree char *bus_link = av_sys_path("bus/pci/devices/%s", address);
    g_autofree char *link = g_strconcat(pfdir, "/", virtfn, NULL);
    int r;

    if ((drv && (r = av_fake_unbind(root, drv, address)) < 0) || (r = av_fake_group_leave(root, group, address)) < 0 ||
        (r = av_fake_unlink(root, bus_link)) < 0 || (r = av_fake_unlink(root, link)) < 0)
        return r;
    return av_fake_remove_tree(root, vfdir);
}

/* Removes every VF of the PF at @pfdir (its virtfnN links). */
static int
av_fake_vfs_remove(const AvRoot *root, const char *pfdir)
{
    g_auto(GStrv) names = NULL;
    int r = av_root_list_dir(root, pfdir, &names);

    for (guint i = 0; r == 0 && names[i]; i++) {
        g_autofree char *link = g_strconcat(pfdir, "/", names[i], NULL);
        g_autofree char *vfdir = NULL;

        if (!g_str_has_prefix(names[i], "virtfn"))
            continue;
        if (av_root_resolve(root, link, &vfdir) < 0)
            r = av_fake_unlink(root, link);
        else
            r = av_fake_vf_remove(root, pfdir, names[i], vfdir);
    }
    return r;
}

/* sriov_numvfs (Documentation/ABI/testing/sysfs-bus-pci;
 * drivers/pci/iov.c: sriov_numvfs_store): a count above sriov_totalvfs is
 * -ERANGE; the same count as now does nothing; a PF without a driver is
 * -ENOENT; a change from one non-zero count to another is -EBUSY (the
 * kernel wants 0 first); 0 removes every VF; N makes VFs 0 to N-1. */
static int
av_fake_sriov_numvfs(const AvRoot *root, const char *resolved, const char *pfdir, const char *value)
{
    g_autofree char *arg = av_fake_arg(value);
    g_autofree char *pf_address = g_path_get_basename(pfdir);
    g_autofree char *driver = g_strconcat(pfdir, "/driver", NULL);
    g_autofree char *text = NULL;
    guint64 want, now, total, offset = 1, stride = 1;
    int r;

    if (!g_ascii_string_to_unsigned(arg, 10, 0, G_MAXUINT16, &want, NULL))
        return -EINVAL;
    if ((r = av_fake_read_uint(root, pfdir, "sriov_totalvfs", 10, &total)) < 0 ||
        (r = av_root_read_uint(root, resolved, 10, &now)) < 0)
        return r;
    (void)av_fake_read_uint(root, pfdir, "sriov_offset", 10, &offset);
    (void)av_fake_read_uint(root, pfdir, "sriov_stride", 10, &stride);
    if (want > total)
        return -ERANGE;
    if (want == now)
        return 0;
    if (!av_root_exists(root, driver))
        return -ENOENT;
    if (want != 0 && now != 0)
        return -EBUSY;
    if (want == 0)
        r = av_fake_vfs_remove(root, pfdir);
    for (guint i = 0; r == 0 && i < want; i++) {
        g_autofree char *vf = av_pci_sriov_vf_address(pf_address, (guint)offset, (guint)stride, i);

        r = vf ? av_fake_vf_create(root, pfdir, vf, i) : -ERANGE;
    }
    if (r < 0)
        return r;
    text = g_strdup_printf("%" G_GUINT64_FORMAT "\n", want);
    return av_fake_put(root, resolved, text, 0644);
}

/* Any other attribute: the value is simply stored. */
static int
av_fake_store(const AvRoot *root, const char *resolved, const char *value)
{
    g_autofree char *host = av_root_host_path(root, resolved);
    struct stat st;

    if (lstat(host, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
    return av_fake_put(root, resolved, value, 0644);
}

/* TRUE when @path is /sys/bus/pci/drivers/DRV/@attr; stores DRV. */
static gboolean
av_fake_driver_attr(const char *path, const char *attr, char **ret_drv)
{
    g_autofree char *drivers = av_sys_path("bus/pci/drivers/");
    g_autofree char *suffix = g_strconcat("/", attr, NULL);
    const char *rest;
    gsize len;

    if (!g_str_has_prefix(path, drivers) || !g_str_has_suffix(path, suffix))
        return FALSE;
    rest = path + strlen(drivers);
    len = strlen(rest) - strlen(suffix);
    if (len == 0 || memchr(rest, '/', len))
        return FALSE;
    *ret_drv = g_strndup(rest, len);
    return TRUE;
}

static int
av_kernel_fake_write_do(const AvRoot *root, const char *path, const char *value);
static int av_fake_log_to(const AvRoot *root, const char *name, const char *line);
static int av_fake_log(const AvRoot *root, const char *line);

/* The highest devnum of the USB devices of bus @busnum in the tree. */
static guint
av_fake_usb_max_devnum(const AvRoot *root, guint busnum)
{
    g_autofree char *dir = av_sys_path("bus/usb/devices");
    g_auto(GStrv) names = NULL;
    guint max = 1;

    if (av_root_list_dir(root, dir, &names) < 0)
        return max;
    for (guint i = 0; names[i]; i++) {
        g_autofree char *d = g_strconcat(dir, "/", names[i], NULL);
        g_autofree char *bus_path = g_strconcat(d, "/busnum", NULL);
        g_autofree char *dev_path = g_strconcat(d, "/devnum", NULL);
        g_autofree char *b = NULL;
        g_autofree char *n = NULL;

        if (av_root_read_attr(root, bus_path, &b) < 0 || av_root_read_attr(root, dev_path, &n) < 0)
            continue;
        if (g_ascii_strtoull(b, NULL, 10) == busnum)
            max = MAX(max, (guint)g_ascii_strtoull(n, NULL, 10));
    }
    return max;
}

/* Re-enumerates the USB device @devdir as usb_authorize_device() does:
 * the next devnum of its bus, its /dev/bus/usb node moved along, logged. */
static int
av_fake_usb_reenumerate(const AvRoot *root, const char *devdir)
{
    g_autofree char *name = g_path_get_basename(devdir);
    g_autofree char *dev_attr = g_strconcat(devdir, "/devnum", NULL);
    g_autofree char *bus_attr = g_strconcat(devdir, "/busnum", NULL);
    g_autofree char *b = NULL, *n = NULL, *old_rel = NULL, *new_rel = NULL;
    g_autofree char *old_node = NULL, *new_node = NULL, *devnum = NULL, *line = NULL;
    guint busnum, next;
    int r;

    if (av_root_read_attr(root, bus_attr, &b) < 0 || av_root_read_attr(root, dev_attr, &n) < 0)
        return -ENODEV;
    busnum = (guint)g_ascii_strtoull(b, NULL, 10);
    next = av_fake_usb_max_devnum(root, busnum) % 127 + 1;
    old_rel = av_dev_path("bus/usb/%03u/%03u", busnum, (guint)g_ascii_strtoull(n, NULL, 10));
    new_rel = av_dev_path("bus/usb/%03u/%03u", busnum, next);
    old_node = av_root_host_path(root, old_rel);
    new_node = av_root_host_path(root, new_rel);
    if (rename(old_node, new_node) < 0 && errno != ENOENT)
        return -errno;
    devnum = g_strdup_printf("%u", next);
    r = av_fake_put(root, dev_attr, devnum, 0644);
    if (r < 0)
        return r;
    line = g_strdup_printf("USB_AUTHORIZE %s devnum %u", name, next);
    return av_fake_log(root, line);
}

/* Stores the "0" or "1" @value (-EINVAL for anything else) at @resolved:
 * *ret_arg gets it, *ret_before what was there (NULL when unreadable).
 * Returns 0 or -errno. */
static int
av_fake_put_switch(const AvRoot *root, const char *resolved, const char *value, char **ret_arg, char **ret_before)
{
    g_autofree char *arg = av_fake_arg(value);

    if (!g_str_equal(arg, "0") && !g_str_equal(arg, "1"))
        return -EINVAL;
    (void)av_root_read_attr(root, resolved, ret_before);
    *ret_arg = g_steal_pointer(&arg);
    return av_fake_put(root, resolved, *ret_arg, 0644);
}

/* "authorized" of the USB device @devdir: "0" stores it and logs it; "1"
 * after "0" re-enumerates the device (av_fake_usb_reenumerate()). */
static int
av_fake_usb_authorized(const AvRoot *root, const char *resolved, const char *devdir, const char *value)
{
    g_autofree char *arg = NULL;
    g_autofree char *before = NULL;
    int r = av_fake_put_switch(root, resolved, value, &arg, &before);

    if (r < 0)
        return r;
    if (g_str_equal(arg, "0")) {
        g_autofree char *name = g_path_get_basename(devdir);
        g_autofree char *line = g_strconcat("USB_DEAUTHORIZE ", name, NULL);

        return av_fake_log(root, line);
    }
    return g_strcmp0(before, "0") == 0 ? av_fake_usb_reenumerate(root, devdir) : 0;
}

/* "disable" of the hub port @portdir (Documentation/ABI/testing/
 * sysfs-bus-usb): "1" disconnects the device the port's "device" link names
 * (its /sys/bus/usb/devices link is put aside as ".NAME.off", and the
 * port's "device" link kept) and logs USB_PORT_OFF; "0" after "1" connects
 * it again: the link back, a new devnum (av_fake_usb_reenumerate()),
 * "authorized" 1 as the kernel's default gives a new device, and, as a
 * stick's boot loader does, "idProduct" back to the device's
 * "fake_boot_idProduct" when it has one and no "fake_firmware_survives".
 * A port without a device just stores the value. */
static int
av_fake_usb_port_disable(const AvRoot *root, const char *resolved, const char *portdir, const char *value)
{
    g_autofree char *arg = NULL;
    g_autofree char *before = NULL;
    g_autofree char *link = g_strconcat(portdir, "/device", NULL);
    g_autofree char *devdir = NULL;
    g_autofree char *name = NULL;
    g_autofree char *on_rel = NULL, *off_rel = NULL, *on = NULL, *off = NULL, *line = NULL;
    g_autofree char *port = g_path_get_basename(portdir);
    int r = av_fake_put_switch(root, resolved, value, &arg, &before);

    if (r < 0)
        return r;
    if (av_root_resolve(root, link, &devdir) < 0)
        return 0;
    name = g_path_get_basename(devdir);
    on_rel = av_sys_path("bus/usb/devices/%s", name);
    off_rel = av_sys_path("bus/usb/devices/.%s.off", name);
    on = av_root_host_path(root, on_rel);
    off = av_root_host_path(root, off_rel);
    if (g_str_equal(arg, "1")) {
        if (g_strcmp0(before, "1") != 0 && rename(on, off) < 0)
            return -errno;
        line = g_strdup_printf("USB_PORT_OFF %s %s", port, name);
        return av_fake_log(root, line);
    }
    if (g_strcmp0(before, "1") != 0)
        return 0;
    if (rename(off, on) < 0)
        return -errno;
    {
        g_autofree char *boot_path = g_strconcat(devdir, "/fake_boot_idProduct", NULL);
        g_autofree char *survives = g_strconcat(devdir, "/fake_firmware_survives", NULL);
        g_autofree char *product = g_strconcat(devdir, "/idProduct", NULL);
        g_autofree char *authorized = g_strconcat(devdir, "/authorized", NULL);
        g_autofree char *boot = NULL;

        if (!av_root_exists(root, survives) && av_root_read_attr(root, boot_path, &boot) == 0) {
            r = av_fake_put(root, product, boot, 0644);
            if (r < 0)
                return r;
        }
        r = av_fake_put(root, authorized, "1", 0644);
        if (r < 0)
            return r;
    }
    line = g_strdup_printf("USB_PORT_ON %s %s", port, name);
    r = av_fake_log(root, line);
    if (r < 0)
        return r;
    return av_fake_usb_reenumerate(root, devdir);
}

/* The fake table's write: logs "PATH VALUE" to the tree's
 * AV_KERNEL_FAKE_WRITES (the kill storm checks that no host device was ever
 * written to), with a test kill point before and after the write
 * (av_point_crash()).  The real kernel completes a write whatever
 * happens to the writer; the emulation takes many steps (an mdev's
 * directory, links, counts), so it runs in a child process of its own,
 * which a SIGKILL of the writer does not stop, and which holds the
 * writer's descriptors (the pool lock among them) until it is done: nobody
 * sees a half-made mdev. */
static int
av_kernel_fake_write(const AvRoot *root, const char *path, const char *value)
{
    g_autofree char *line = NULL;
    g_autofree char *shown = g_strescape(value, NULL);
    int status = 0, r;
    pid_t pid;

    av_point_crash();
    line = g_strdup_printf("%s %s", path, shown);
    av_fake_log_to(root, AV_KERNEL_FAKE_WRITES, line);
    pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0)
        _exit(-av_kernel_fake_write_do(root, path, value) & 0xff);
    while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    if (r < 0)
        return -errno;
    r = WIFEXITED(status) ? -WEXITSTATUS(status) : -EIO;
    av_point_crash();
    return r;
}

/* NVIDIA vGPU on VFs (src/pci/av-pci-vgpu.c).  What the GPU supports is
 * the emulation's own state, in the PF's .fake-vgpu-types ("ID MAX NAME"
 * lines, which no real driver writes and accelvirt never reads): with no
 * vGPU made on the GPU, every VF's creatable_vgpu_types lists them all;
 * with one made, the GPU serves that type alone, so a VF without a vGPU
 * lists only it, until MAX are made, then nothing; a VF with a vGPU lists
 * nothing. */
typedef struct {
    guint id, max;
    char *name;
} AvFakeVgpuType;

static void
av_fake_vgpu_type_free(gpointer p)
{
    AvFakeVgpuType *t = p;

    g_free(t->name);
    g_free(t);
}

static guint
av_fake_vgpu_current(const AvRoot *root, const char *vfdir)
{
    guint64 v = 0;

    if (av_fake_read_uint(root, vfdir, "nvidia/current_vgpu_type", 10, &v) < 0)
        return 0;
    return (guint)v;
}

/* Rewrites the creatable_vgpu_types of every VF of the PF at @pfdir. */
static int
av_fake_vgpu_refresh(const AvRoot *root, const char *pfdir)
{
    g_autofree char *state = g_strconcat(pfdir, "/.fake-vgpu-types", NULL);
    g_autofree char *text = NULL;
    g_autoptr(GPtrArray) types = g_ptr_array_new_with_free_func(av_fake_vgpu_type_free);
    g_autoptr(GPtrArray) vfs = g_ptr_array_new_with_free_func(g_free);
    g_auto(GStrv) lines = NULL;
    g_auto(GStrv) entries = NULL;
    guint in_use = 0, made = 0;
    const AvFakeVgpuType *only = NULL;
    gsize len = 0;
    int r;

    if ((r = av_root_read_file(root, state, &text, &len)) < 0)
        return r;
    lines = g_strsplit(text, "\n", -1);
    for (guint i = 0; lines[i]; i++) {
        g_auto(GStrv) f = g_strsplit(lines[i], " ", 3);
        AvFakeVgpuType *t;

        if (g_strv_length(f) < 3)
            continue;
        t = g_new0(AvFakeVgpuType, 1);
        t->id = (guint)g_ascii_strtoull(f[0], NULL, 10);
        t->max = (guint)g_ascii_strtoull(f[1], NULL, 10);
        t->name = g_strdup(f[2]);
        g_ptr_array_add(types, t);
    }
    if ((r = av_root_list_dir(root, pfdir, &entries)) < 0)
        return r;
    for (guint i = 0; entries[i]; i++) {
        g_autofree char *link = NULL;
        g_autofree char *vfdir = NULL;
        guint cur;

        if (!g_str_has_prefix(entries[i], "virtfn"))
            continue;
        link = g_strconcat(pfdir, "/", entries[i], NULL);
        if (av_root_resolve(root, link, &vfdir) < 0)
            continue;
        cur = av_fake_vgpu_current(root, vfdir);
        if (cur) {
            in_use = cur;
            made++;
        }
        g_ptr_array_add(vfs, g_steal_pointer(&vfdir));
    }
    for (guint i = 0; in_use && i < types->len; i++)
        if (((AvFakeVgpuType *)g_ptr_array_index(types, i))->id == in_use)
            only = g_ptr_array_index(types, i);
    for (guint i = 0; i < vfs->len; i++) {
        const char *vfdir = g_ptr_array_index(vfs, i);
        g_autoptr(GString) list = g_string_new("ID    : vGPU Name\n");
        g_autofree char *nvdir = g_strconcat(vfdir, "/nvidia", NULL);

        if (av_fake_vgpu_current(root, vfdir) == 0) {
            for (guint j = 0; j < types->len; j++) {
                const AvFakeVgpuType *t = g_ptr_array_index(types, j);

                if (in_use ? (t == only && made < t->max) : TRUE)
                    g_string_append_printf(list, "%-5u : %s\n", t->id, t->name);
            }
        }
        if ((r = av_fake_put_in(root, nvdir, "creatable_vgpu_types", list->str, 0444)) < 0)
            return r;
    }
    return 0;
}

/* nvidia/current_vgpu_type of a VF: an ID its creatable_vgpu_types lists
 * makes the vGPU (-EBUSY when it has one, -EINVAL for a type not listed),
 * 0 destroys it. */
static int
av_fake_vgpu_set(const AvRoot *root, const char *resolved, const char *nvdir, const char *value)
{
    g_autofree char *arg = av_fake_arg(value);
    g_autofree char *vfdir = g_path_get_dirname(nvdir);
    g_autofree char *physfn = g_strconcat(vfdir, "/physfn", NULL);
    g_autofree char *pfdir = NULL;
    g_autofree char *creatable = NULL;
    g_autoptr(GPtrArray) types = NULL;
    char *end = NULL;
    guint64 id;
    int r;

    if (!*arg || !g_ascii_isdigit(arg[0]))
        return -EINVAL;
    id = g_ascii_strtoull(arg, &end, 10);
    if (*end || id > G_MAXUINT)
        return -EINVAL;
    if (av_root_resolve(root, physfn, &pfdir) < 0)
        return -ENODEV;
    if (id != 0) {
        g_autofree char *path = g_strconcat(nvdir, "/creatable_vgpu_types", NULL);
        gboolean listed = FALSE;

        if (av_fake_vgpu_current(root, vfdir) != 0)
            return -EBUSY;
        if ((r = av_root_read_attr(root, path, &creatable)) < 0)
            return r;
        types = av_vgpu_types_parse(creatable);
        for (guint i = 0; i < types->len; i++)
            listed = listed || ((AvVgpuType *)g_ptr_array_index(types, i))->id == id;
        if (!listed)
            return -EINVAL;
    }
    {
        g_autofree char *text = g_strdup_printf("%" G_GUINT64_FORMAT "\n", id);

        if ((r = av_fake_store(root, resolved, text)) < 0)
            return r;
    }
    return av_fake_vgpu_refresh(root, pfdir);
}

static int
av_kernel_fake_write_do(const AvRoot *root, const char *path, const char *value)
{
    g_autofree char *resolved = NULL;
    g_autofree char *base = NULL;
    g_autofree char *dir = NULL;
    g_autofree char *dir_base = NULL;
    g_autofree char *probe = av_sys_path("bus/pci/drivers_probe");
    g_autofree char *drv = NULL;
    int r;

    g_return_val_if_fail(path && path[0] == '/' && value, -EINVAL);

    r = av_root_resolve(root, path, &resolved);
    if (r < 0) {
        int injected = av_fake_injected_failure(root, path, NULL);

        if (injected < 0)
            return injected;
        /* Writing to the bind file of a driver that is not loaded. */
        if (r == -ENOENT && av_fake_driver_attr(path, "bind", &drv))
            return -ENODEV;
        return r;
    }
    r = av_fake_injected_failure(root, path, resolved);
    if (r < 0)
        return r;

    base = g_path_get_basename(resolved);
    dir = g_path_get_dirname(resolved);
    dir_base = g_path_get_basename(dir);
    if (g_str_equal(resolved, probe))
        return av_fake_probe(root, value);
    if (av_fake_driver_attr(resolved, "bind", &drv))
        return av_fake_bind(root, drv, value);
    if (av_fake_driver_attr(resolved, "unbind", &drv))
        return av_fake_unbind(root, drv, value);
    if (g_str_equal(base, "driver_override"))
        return av_fake_set_override(root, resolved, value);
    if (g_str_equal(base, "current_vgpu_type") && g_str_equal(dir_base, "nvidia"))
        return av_fake_vgpu_set(root, resolved, dir, value);
    if (g_str_equal(base, "sriov_numvfs"))
        return av_fake_sriov_numvfs(root, resolved, dir, value);
    if (g_str_has_prefix(base, "resource") && g_str_has_suffix(base, "_resize") && strlen(base) == strlen("resource0_resize") &&
        base[8] >= '0' && base[8] <= '5')
        return av_fake_resize(root, resolved, dir, (guint)(base[8] - '0'), value);
    if (g_str_equal(base, "create")) {
        g_autofree char *types = g_path_get_dirname(dir);
        g_autofree char *types_base = g_path_get_basename(types);

        if (g_str_equal(types_base, "mdev_supported_types"))
            return av_fake_mdev_create(root, resolved, value);
    }
    if (g_str_equal(base, "authorized")) {
        g_autofree char *vendor = g_strconcat(dir, "/idVendor", NULL);

        if (av_root_exists(root, vendor))
            return av_fake_usb_authorized(root, resolved, dir, value);
    }
    if (g_str_equal(base, "disable") && strstr(dir_base, "-port"))
        return av_fake_usb_port_disable(root, resolved, dir, value);
    if (g_str_equal(base, "remove")) {
        g_autofree char *type_link = g_strconcat(dir, "/mdev_type", NULL);

        if (av_root_exists(root, type_link))
            return av_fake_mdev_remove(root, resolved, value);
    }
    return av_fake_store(root, resolved, value);
}

/* Appends @line and a newline to the file @name under the fake tree's
 * /sys.  Returns 0 or -errno. */
static int
av_fake_log_to(const AvRoot *root, const char *name, const char *line)
{
    g_autofree char *path = av_sys_path("%s", name);
    g_autofree char *host = av_root_host_path(root, path);
    g_autofree char *text = g_strconcat(line, "\n", NULL);
    size_t len = strlen(text);
    ssize_t n;
    int fd, r = 0;

    fd = open(host, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -errno;
    n = write(fd, text, len);
    if (n < 0)
        r = -errno;
    else if ((size_t)n != len)
        r = -EIO;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    return r;
}

/* Appends @line to the fake kernel's log (AV_KERNEL_FAKE_LOG). */
static int
av_fake_log(const AvRoot *root, const char *line)
{
    return av_fake_log_to(root, AV_KERNEL_FAKE_LOG, line);
}

/* TRUE when the IOMMU group @group is viable, as the kernel decides
 * (Documentation/driver-api/vfio.rst): every member is unbound or bound to
 * vfio-pci, pci-stub or pcieport (a bridge's port driver). */
static gboolean
av_fake_group_viable(const AvRoot *root, const char *group)
{
    g_autofree char *members_dir = av_sys_path("kernel/iommu_groups/%s/devices", group);
    g_auto(GStrv) members = NULL;

    if (av_root_list_dir(root, members_dir, &members) < 0)
        return TRUE;
    for (guint i = 0; members[i]; i++) {
        g_autofree char *member = g_strconcat(members_dir, "/", members[i], NULL);
        g_autofree char *drv = av_fake_link_name(root, member, "driver");

        if (drv && !av_pci_driver_is_vfio(drv) && !g_str_equal(drv, "pci-stub") &&
            !g_str_equal(drv, "pcieport"))
            return FALSE;
    }
    return TRUE;
}

/* Opens the fake tree's group file @node (root-relative) and takes its
 * flock, as the kernel lets one open file of a group exist (see
 * av-kernel.h: group_open).  Returns the fd or -errno (-EBUSY: another open
 * file has it). */
static int
av_fake_group_lock(const AvRoot *root, const char *node)
{
    g_autofree char *host = av_root_host_path(root, node);
    int r = av_fake_injected_failure(root, node, NULL);
    int fd;

    if (r < 0)
        return r;
    fd = open(host, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        r = errno == EWOULDBLOCK ? -EBUSY : -errno;
        close(fd);
        return r;
    }
    return fd;
}

static int
av_kernel_fake_group_open(const AvRoot *root, int group, int *ret_fd)
{
    return av_kernel_group_open_with(root, group, av_fake_group_lock, ret_fd);
}

/* Both device opens of the fake table: @held_fd is the group file the
 * caller holds (device_open_held), or -1 to open and lock it here. */
static int
av_kernel_fake_device_open_fd(const AvRoot *root, const char *address, int held_fd, AvDeviceHandle **ret_handle)
{
    int group_fd = -1;
    g_autofree char *devdir = NULL;
    g_autofree char *group = NULL;
    g_autofree char *node = NULL;
    g_autofree char *drv = NULL;
    g_autofree char *line = NULL;
    AvDeviceHandle *h;
    int r;

    if (!av_pci_address_is_valid(address))
        return -EINVAL;
    devdir = av_fake_device_dir(root, address);
    if (!devdir)
        return -ENODEV;
    group = av_fake_link_name(root, devdir, "iommu_group");
    if (!group)
        return -ENODEV;
    node = av_dev_path("vfio/%s", group);
    r = av_fake_injected_failure(root, node, NULL);
    if (r < 0)
        return r;
    if (!av_root_exists(root, node))
        return -ENOENT;
    if (!av_fake_group_viable(root, group))
        return -EPERM;
    drv = av_fake_link_name(root, devdir, "driver");
    if (!drv || !av_pci_driver_is_vfio(drv))
        return -ENODEV;
    if (held_fd < 0 && (group_fd = av_fake_group_lock(root, node)) < 0)
        return group_fd;
    line = g_strconcat("VFIO_GROUP_GET_DEVICE_FD ", address, NULL);
    r = av_fake_log(root, line);
    if (r < 0) {
        if (group_fd >= 0)
            close(group_fd);
        return r;
    }
    h = av_device_handle_new(root, address, TRUE);
    h->devdir = g_steal_pointer(&devdir);
    h->group = group_fd;
    h->group_held = held_fd >= 0;
    *ret_handle = h;
    return 0;
}

static int
av_kernel_fake_device_open(const AvRoot *root, const char *address, AvDeviceHandle **ret_handle)
{
    return av_kernel_fake_device_open_fd(root, address, -1, ret_handle);
}

static int
av_kernel_fake_device_open_held(const AvRoot *root, const char *address, int group_fd,
                                AvDeviceHandle **ret_handle)
{
    if (group_fd < 0 || fcntl(group_fd, F_GETFD) < 0)
        return -EBADF;
    return av_kernel_fake_device_open_fd(root, address, group_fd, ret_handle);
}

static int
av_kernel_fake_device_region(AvDeviceHandle *h, guint index, AvRegion *ret_region)
{
    AvRegion region = { .fd = -1, .mmap_ok = TRUE, .is_memory = TRUE, .readable = TRUE, .writable = TRUE };
    guint64 flags;
    struct stat st;

    if (index >= AV_PCI_BAR_COUNT)
        return -EINVAL;
    if (h->bar_fd[index] < 0) {
        g_autofree char *path = g_strdup_printf("%s/resource%u", h->devdir, index);
        g_autofree char *host = av_root_host_path(h->root, path);
        int fd;

        if (lstat(host, &st) < 0) {
            if (errno != ENOENT)
                return -errno;
            /* No resourceN: the BAR is not implemented. */
            region.mmap_ok = region.readable = region.writable = FALSE;
            *ret_region = region;
            return 0;
        }
        if (!S_ISREG(st.st_mode))
            return -EINVAL;
        fd = open(host, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            return -errno;
        h->bar_fd[index] = fd;
    }
    if (fstat(h->bar_fd[index], &st) < 0)
        return -errno;
    region.fd = h->bar_fd[index];
    region.size = (guint64)st.st_size;
    if (av_kernel_bar_flags(h->root, h->address, index, &flags) == 0) {
        if (flags & AV_IORESOURCE_IO) {
            region.is_memory = FALSE;
            region.mmap_ok = FALSE;
        }
        region.prefetchable = region.is_memory && (flags & AV_IORESOURCE_PREFETCH);
    }
    *ret_region = region;
    return 0;
}

static int
av_kernel_fake_device_reset(AvDeviceHandle *h)
{
    g_autofree char *what = g_strconcat("VFIO_DEVICE_RESET:", h->address, NULL);
    g_autofree char *line = g_strconcat("VFIO_DEVICE_RESET ", h->address, NULL);
    int r = av_fake_injected_failure(h->root, what, NULL);

    if (r < 0)
        return r;
    return av_fake_log(h->root, line);
}

static void
av_kernel_fake_device_close(AvDeviceHandle *h)
{
    g_autofree char *line = NULL;

    if (!h)
        return;
    line = g_strconcat("close ", h->address, NULL);
    av_fake_log(h->root, line);
    av_device_handle_free(h);
}

static int
av_kernel_fake_usb_reset(const AvRoot *root, guint busnum, guint devnum)
{
    g_autofree char *node = av_dev_path("bus/usb/%03u/%03u", busnum, devnum);
    g_autofree char *what = g_strdup_printf("USBDEVFS_RESET:%03u/%03u", busnum, devnum);
    g_autofree char *line = g_strdup_printf("USBDEVFS_RESET %03u/%03u", busnum, devnum);
    int r = av_fake_injected_failure(root, what, NULL);

    if (r < 0)
        return r;
    if (!av_root_exists(root, node))
        return -ENOENT;
    return av_fake_log(root, line);
}

/* The tree's sys/class/net/NAME/ifindex, or that of the interface whose
 * fake_altnames file (one name a line; the kernel lists altnames only
 * through netlink) holds @name. */
static int
av_kernel_fake_netdev_index(const AvRoot *root, const char *name, guint *ret_index)
{
    g_autofree char *net = av_sys_path("class/net");
    g_auto(GStrv) names = NULL;
    guint64 v;

    if (!strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
        g_autofree char *path = g_strconcat(net, "/", name, "/ifindex", NULL);

        if (av_root_read_uint(root, path, 10, &v) == 0 && v > 0 && v <= G_MAXUINT) {
            *ret_index = (guint)v;
            return 0;
        }
    }
    if (av_root_list_dir(root, net, &names) < 0)
        return -ENODEV;
    for (guint i = 0; names[i]; i++) {
        g_autofree char *alt = g_strconcat(net, "/", names[i], "/fake_altnames", NULL);
        g_autofree char *path = g_strconcat(net, "/", names[i], "/ifindex", NULL);
        g_autofree char *contents = NULL;
        g_auto(GStrv) lines = NULL;

        if (av_root_read_file(root, alt, &contents, NULL) < 0)
            continue;
        lines = g_strsplit(contents, "\n", -1);
        if (g_strv_contains((const char *const *)lines, name) && av_root_read_uint(root, path, 10, &v) == 0 &&
            v > 0 && v <= G_MAXUINT) {
            *ret_index = (guint)v;
            return 0;
        }
    }
    return -ENODEV;
}

const AvKernelOps av_kernel_ops_fake = {
    .name = "fake",
    .write = av_kernel_fake_write,
    .device_open = av_kernel_fake_device_open,
    .device_open_held = av_kernel_fake_device_open_held,
    .group_open = av_kernel_fake_group_open,
    .device_region = av_kernel_fake_device_region,
    .device_reset = av_kernel_fake_device_reset,
    .device_close = av_kernel_fake_device_close,
    .usb_reset = av_kernel_fake_usb_reset,
    .netdev_index = av_kernel_fake_netdev_index,
};
