/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the root prefix.
 *
 * Every /sys, /dev and /proc access goes through an AvRoot.  Paths handed to
 * these functions are "root-relative absolute" paths such as
 * "/sys/bus/pci/devices/0000:3b:00.0": they begin with '/', and the AvRoot
 * places them under its prefix ("/" in production, a fake tree in tests).
 *
 * Symlinks are resolved inside the root, never outside it (as
 * libnvidia-container's path_resolve and systemd's chase() do): an absolute
 * link target is taken relative to the prefix, and ".." never climbs above
 * the prefix.  A tree copied from a real host, with the kernel's relative
 * links, therefore reads the same as the host itself.
 *
 * How: the AvRoot holds an O_PATH fd of the prefix, and every path is
 * opened with one openat2(2) under it, RESOLVE_IN_ROOT (the kernel treats
 * the fd as "/" for absolute links and "..") and RESOLVE_NO_MAGICLINKS;
 * attributes are read, directories listed and links read through that fd,
 * and av_root_resolve() names the file it opened (/proc/self/fd/N, less the
 * prefix).  Where the kernel has no openat2() (before Linux 5.6) or a
 * seccomp filter refuses it, a walk does the same in user space: each
 * component lstat()ed and each link read under the prefix's path, as
 * systemd's chase() does; both give the same answers and errors (-ENOENT,
 * -ENOTDIR, -ELOOP after 40 links), the same for "/" as for a fake tree.
 * Test builds take the walk when $ACCELVIRT_TEST_ROOT_RESOLVE is "walk"
 * (tests/test-root.c runs every case both ways; `make bench` compares them).
 *
 * This is the only place that spells out "/sys", "/dev" and "/proc": the
 * layers above build paths with av_sys_path(), av_dev_path() and
 * av_proc_path(). */
#pragma once

#include <glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

typedef struct AvRoot AvRoot;

/* Creates a root context for the directory @prefix.  NULL, "" and "/" mean
 * the real root.  The prefix must exist and be a directory; it is made
 * absolute and canonical.  Returns NULL and sets @error otherwise. */
AvRoot *av_root_new(const char *prefix, GError **error);

/* Like av_root_new() with the prefix taken from @option if it is not NULL,
 * else from $ACCELVIRT_ROOT, else "/". */
AvRoot *av_root_new_default(const char *option, GError **error);

void av_root_free(AvRoot *root);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvRoot, av_root_free)

/* The canonical prefix ("/" for the real root).  Owned by @root. */
const char *av_root_prefix(const AvRoot *root);

/* TRUE when the prefix is "/": the code acts on this very host. */
gboolean av_root_is_host(const AvRoot *root);

/* TRUE when the kernel resolves paths under @root (openat2(2) with
 * RESOLVE_IN_ROOT), FALSE when the component walk does (see above). */
gboolean av_root_resolves_in_kernel(const AvRoot *root);

/* Root-relative paths of kernel interfaces: av_sys_path("bus/pci/devices/%s",
 * addr) gives "/sys/bus/pci/devices/0000:3b:00.0".  The caller frees. */
char *av_sys_path(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
char *av_dev_path(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
char *av_proc_path(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
/* "/run/..." (runtime state of the host's daemons, such as libvirt's
 * /run/libvirt/qemu/NAME.pid), also resolved under the root prefix. */
char *av_run_path(const char *fmt, ...) G_GNUC_PRINTF(1, 2);

/* The host's null device, for processes that must keep nothing else open
 * (it is not under the root prefix: a fake tree has none). */
#define AV_DEV_NULL "/dev/null"
/* The calling process's own OOM score adjustment (proc(5)): a process of
 * this machine, whatever the root prefix. */
#define AV_PROC_SELF_OOM_SCORE_ADJ "/proc/self/oom_score_adj"
/* The calling process's own program (proc(5): a link to the file it runs). */
#define AV_PROC_SELF_EXE "/proc/self/exe"

/* The host path of the root-relative @path, without resolving links:
 * prefix + path.  The caller frees.  Use only for paths already resolved
 * with av_root_resolve() or for files that are not links. */
char *av_root_host_path(const AvRoot *root, const char *path);

/* Resolves every symlink of the root-relative @path inside the root.
 * On success stores the canonical root-relative path (beginning with '/') in
 * *ret_resolved (caller frees) and returns 0.  Returns -ENOENT when a
 * component does not exist, -ELOOP after 40 links, -errno otherwise;
 * *ret_resolved is untouched on failure. */
int av_root_resolve(const AvRoot *root, const char *path, char **ret_resolved);

/* Reads the whole file at the root-relative @path (links resolved inside the
 * root) into a NUL-terminated buffer.  *ret_len (may be NULL) gets the byte
 * count.  Reads at most 16 MiB.  Only regular files are read (every sysfs
 * attribute is one): a FIFO or device node planted in a tree gives -EINVAL,
 * a directory -EISDIR, without blocking.  Returns 0 or -errno. */
int av_root_read_file(const AvRoot *root, const char *path, char **ret_contents, gsize *ret_len);

/* Reads a sysfs attribute: the contents with trailing white space removed.
 * Returns 0 or -errno. */
int av_root_read_attr(const AvRoot *root, const char *path, char **ret_value);

/* Reads an attribute holding an unsigned number ("0x10de", "42", "-1" is an
 * error: -ERANGE).  @base as for g_ascii_string_to_unsigned(), 0 accepts a 0x
 * prefix.  Returns 0, -errno, or -EINVAL when the contents are not a number. */
int av_root_read_uint(const AvRoot *root, const char *path, guint base, guint64 *ret_value);

/* Reads an attribute holding a signed decimal number (numa_node may be -1). */
int av_root_read_int(const AvRoot *root, const char *path, gint64 *ret_value);

/* The time the running kernel booted, in Unix seconds: the "btime" line of
 * /proc/stat under the root (proc(5)).  Returns 0 and stores it in
 * *ret_btime, -ENOENT when the file or the line is absent (a fake tree
 * without one), -EINVAL when the line does not hold a positive number,
 * -errno otherwise; *ret_btime is untouched on failure. */
int av_root_boot_time(const AvRoot *root, gint64 *ret_btime);

/* The id of the running boot: /proc/sys/kernel/random/boot_id under the
 * root (proc(5): a random UUID the kernel makes at each boot), lower case.
 * Returns 0 and stores it in *ret_boot_id (caller frees), -ENOENT when the
 * file is absent (a fake tree without one), -EINVAL when it does not hold
 * a UUID, -errno otherwise; *ret_boot_id is untouched on failure. */
int av_root_boot_id(const AvRoot *root, char **ret_boot_id);

/* The last component of the resolved target of the link at @path, such as
 * "nvidia" for a device's "driver" link or "42" for "iommu_group".
 * Returns 0, -ENOENT when the link (or its target) does not exist, -errno. */
int av_root_link_name(const AvRoot *root, const char *path, char **ret_name);

/* As av_root_link_name(), but a link whose target is missing from the tree
 * (a capture that holds a device's "driver" link and not the driver's
 * directory) still gives the last component of its own text, as pciutils
 * reads a driver link.  -ENOENT only when there is no link at all. */
int av_root_link_name_text(const AvRoot *root, const char *path, char **ret_name);

/* The text of the symlink @path itself, as readlink(2) gives it, without
 * following it: the directories above it are resolved inside the root, the
 * link is not.  For links whose text names no file here, such as
 * /proc/PID/fd/N of an anonymous inode ("anon_inode:[vfio-device]", proc(5))
 * or a path in another mount namespace.  Returns 0 and the text in
 * *ret_target (caller frees), -EINVAL when @path is not a link, -errno. */
int av_root_read_link(const AvRoot *root, const char *path, char **ret_target);

/* The names in the directory @path (links resolved inside the root), without
 * "." and "..", sorted with strcmp.  Returns 0 and a NULL-terminated vector
 * (caller frees with g_strfreev), or -errno. */
int av_root_list_dir(const AvRoot *root, const char *path, char ***ret_names);

/* TRUE when @path exists inside the root (links followed inside the root). */
gboolean av_root_exists(const AvRoot *root, const char *path);

/* Writes @value to the kernel attribute at @path (links resolved inside the
 * root), as one write(2), like `echo -n VALUE > PATH`.  Returns 0 or -errno
 * (the kernel's answer, such as -EBUSY or -ENODEV).  This is the primitive
 * under the kernel operation tables of src/vfio; nothing else should call it. */
int av_root_write_attr(const AvRoot *root, const char *path, const char *value);

G_END_DECLS
