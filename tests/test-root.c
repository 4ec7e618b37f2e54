/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: the root prefix and link resolution inside it. */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "av-test.h"
#include "util/av-error.h"
#include "util/av-root.h"

/* The resolution the tests below run with: FALSE for the kernel's
 * (openat2), TRUE for the component walk (ACCELVIRT_TEST_ROOT_RESOLVE). */
static gboolean test_walk;

static AvRoot *
new_root(const char *dir)
{
    g_autoptr(GError) err = NULL;
    AvRoot *root;

    if (test_walk)
        g_setenv("ACCELVIRT_TEST_ROOT_RESOLVE", "walk", TRUE);
    else
        g_unsetenv("ACCELVIRT_TEST_ROOT_RESOLVE");
    root = av_root_new(dir, &err);
    g_assert_no_error(err);
    g_assert_nonnull(root);
    /* (The switch acts once a fake tree armed the test points.) */
    if (!av_root_is_host(root))
        g_assert_cmpint(av_root_resolves_in_kernel(root), ==, !test_walk);
    return root;
}

static void
test_kernel_paths(void)
{
    g_autofree char *a = av_sys_path("bus/pci/devices/%s/driver", "0000:3b:00.0");
    g_autofree char *b = av_sys_path("/kernel/iommu_groups");
    g_autofree char *c = av_dev_path("vfio/%d", 12);
    g_autofree char *d = av_proc_path("self/mountinfo");
    g_autofree char *e = av_sys_path("%s", "");

    g_assert_cmpstr(a, ==, "/sys/bus/pci/devices/0000:3b:00.0/driver");
    g_assert_cmpstr(b, ==, "/sys/kernel/iommu_groups");
    g_assert_cmpstr(c, ==, "/dev/vfio/12");
    g_assert_cmpstr(d, ==, "/proc/self/mountinfo");
    g_assert_cmpstr(e, ==, "/sys");
}

static void
test_prefix(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *sub = g_build_filename(dir, "x", NULL);
    g_autofree char *file = g_build_filename(dir, "f", NULL);
    g_autoptr(AvRoot) host = new_root(NULL);
    g_autoptr(AvRoot) slash = new_root("/");
    g_autoptr(AvRoot) fake = NULL;
    g_autoptr(AvRoot) none = NULL;
    g_autoptr(AvRoot) notdir = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *hp = NULL;

    g_assert_true(av_root_is_host(host));
    g_assert_true(av_root_is_host(slash));
    g_assert_cmpstr(av_root_prefix(host), ==, "/");

    g_assert_cmpint(g_mkdir_with_parents(sub, 0755), ==, 0);
    fake = new_root(sub);
    g_assert_false(av_root_is_host(fake));
    g_assert_cmpstr(av_root_prefix(fake), ==, sub);
    hp = av_root_host_path(fake, "/sys/x");
    g_assert_true(g_str_has_prefix(hp, sub));
    g_assert_true(g_str_has_suffix(hp, "/x/sys/x"));

    none = av_root_new("/nonexistent/accelvirt-root", &err);
    g_assert_null(none);
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(err->message, "/nonexistent/accelvirt-root"));
    g_clear_error(&err);

    av_test_write(dir, "f", "x");
    notdir = av_root_new(file, &err);
    g_assert_null(notdir);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);

    av_test_tmpdir_remove(dir);
}

static void
test_env_default(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autoptr(AvRoot) a = NULL;
    g_autoptr(AvRoot) b = NULL;
    g_autoptr(GError) err = NULL;

    g_setenv("ACCELVIRT_ROOT", dir, TRUE);
    a = av_root_new_default(NULL, &err);
    g_assert_no_error(err);
    g_assert_false(av_root_is_host(a));
    /* the option wins over the environment */
    b = av_root_new_default("/", &err);
    g_assert_no_error(err);
    g_assert_true(av_root_is_host(b));
    g_unsetenv("ACCELVIRT_ROOT");
    av_test_tmpdir_remove(dir);
}

/* A tree whose links point everywhere: relative like the kernel's, absolute,
 * and climbing above the root.  Every one must resolve inside the root. */
static void
test_resolve_inside(void)
{
    g_autofree char *outside = av_test_tmpdir();
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *secret = g_build_filename(outside, "secret", NULL);
    g_autoptr(AvRoot) root = NULL;
    g_autofree char *r1 = NULL, *r2 = NULL, *r3 = NULL, *r4 = NULL, *r5 = NULL;
    g_autofree char *v = NULL;
    g_autofree char *name = NULL;
    g_autofree char *escape = NULL;
    char **names = NULL;

    av_test_write(outside, "secret", "outside\n");
    av_test_write(dir, "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor", "0x10de\n");
    av_test_write(dir, "sys/bus/pci/drivers/nvidia/bind", "");
    av_test_write(dir, "etc/secret", "inside\n");
    /* kernel-style relative links */
    av_test_symlink(dir, "sys/bus/pci/devices/0000:01:00.0", "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0");
    av_test_symlink(dir, "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/driver", "../../../../bus/pci/drivers/nvidia");
    /* absolute link: taken relative to the root */
    av_test_symlink(dir, "sys/abs", "/etc/secret");
    /* climbing above the root: stops at the root */
    escape = g_strdup_printf("../../../../../../../../..%s", secret);
    av_test_symlink(dir, "sys/climb", escape);
    av_test_symlink(dir, "sys/climb2", "../../../../../../../../../etc/secret");
    /* link to a host path outside */
    av_test_symlink(dir, "sys/hostabs", secret);
    /* loops */
    av_test_symlink(dir, "sys/loop1", "loop2");
    av_test_symlink(dir, "sys/loop2", "loop1");

    root = new_root(dir);

    g_assert_cmpint(av_root_resolve(root, "/sys/bus/pci/devices/0000:01:00.0/vendor", &r1), ==, 0);
    g_assert_cmpstr(r1, ==, "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor");
    g_assert_cmpint(av_root_resolve(root, "/sys/bus/pci/devices/0000:01:00.0/driver", &r2), ==, 0);
    g_assert_cmpstr(r2, ==, "/sys/bus/pci/drivers/nvidia");
    g_assert_cmpint(av_root_link_name(root, "/sys/bus/pci/devices/0000:01:00.0/driver", &name), ==, 0);
    g_assert_cmpstr(name, ==, "nvidia");

    g_assert_cmpint(av_root_resolve(root, "/sys/abs", &r3), ==, 0);
    g_assert_cmpstr(r3, ==, "/etc/secret");
    g_assert_cmpint(av_root_read_attr(root, "/sys/abs", &v), ==, 0);
    g_assert_cmpstr(v, ==, "inside");
    g_clear_pointer(&v, g_free);

    /* the climbing link lands on <root>/<path of secret>, which does not exist */
    g_assert_cmpint(av_root_resolve(root, "/sys/climb", &r4), ==, -ENOENT);
    g_assert_null(r4);
    g_assert_cmpint(av_root_read_attr(root, "/sys/climb", &v), ==, -ENOENT);
    g_assert_cmpint(av_root_read_attr(root, "/sys/hostabs", &v), ==, -ENOENT);
    g_assert_null(v);
    g_assert_cmpint(av_root_read_attr(root, "/sys/climb2", &v), ==, 0);
    g_assert_cmpstr(v, ==, "inside");
    g_clear_pointer(&v, g_free);
    g_assert_cmpint(av_root_read_attr(root, "/../../sys/../etc/secret", &v), ==, 0);
    g_assert_cmpstr(v, ==, "inside");
    g_clear_pointer(&v, g_free);

    g_assert_cmpint(av_root_resolve(root, "/sys/loop1", &r5), ==, -ELOOP);
    g_assert_cmpint(av_root_resolve(root, "/sys/bus/pci/drivers/nvidia/bind/x", &r5), ==, -ENOTDIR);
    g_assert_null(r5);

    g_assert_cmpint(av_root_list_dir(root, "/sys/bus/pci/devices/0000:01:00.0", &names), ==, 0);
    g_assert_cmpuint(g_strv_length(names), ==, 2);
    g_assert_cmpstr(names[0], ==, "driver");
    g_assert_cmpstr(names[1], ==, "vendor");
    g_strfreev(names);

    g_assert_true(av_root_exists(root, "/sys/bus/pci/devices/0000:01:00.0"));
    g_assert_false(av_root_exists(root, "/sys/bus/pci/devices/0000:02:00.0"));

    av_test_tmpdir_remove(dir);
    av_test_tmpdir_remove(outside);
}

/* av_root_read_link(): the link's own text, never followed; the directories
 * above it resolved inside the root. */
static void
test_read_link(void)
{
    g_autofree char *outside = av_test_tmpdir();
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *secret = g_build_filename(outside, "secret", NULL);
    g_autoptr(AvRoot) root = NULL;
    g_autofree char *t1 = NULL, *t2 = NULL, *t3 = NULL, *t4 = NULL, *t5 = NULL;

    av_test_write(outside, "secret", "outside\n");
    av_test_symlink(outside, "fd/9", "/dev/vfio/12");
    av_test_symlink(dir, "proc-real/42/fd/3", "anon_inode:[vfio-device]");
    av_test_symlink(dir, "proc-real/42/fd/4", "/dev/vfio/12");
    av_test_symlink(dir, "proc-real/42/fd/5", secret);
    av_test_write(dir, "proc-real/42/fd/6", "a file\n");
    /* the directory above the links is a link inside the root */
    av_test_symlink(dir, "proc/42", "../proc-real/42");
    /* and one whose text names the directory outside: taken inside */
    av_test_symlink(dir, "proc/43", outside);
    root = new_root(dir);

    g_assert_cmpint(av_root_read_link(root, "/proc/42/fd/3", &t1), ==, 0);
    g_assert_cmpstr(t1, ==, "anon_inode:[vfio-device]");
    /* Not followed: there is no /dev/vfio/12 in this root. */
    g_assert_cmpint(av_root_read_link(root, "/proc/42/fd/4", &t2), ==, 0);
    g_assert_cmpstr(t2, ==, "/dev/vfio/12");
    g_assert_cmpint(av_root_read_link(root, "/proc/42/fd/5", &t3), ==, 0);
    g_assert_cmpstr(t3, ==, secret);
    g_assert_cmpint(av_root_read_link(root, "/proc/42/fd/6", &t4), ==, -EINVAL);
    g_assert_null(t4);
    g_assert_cmpint(av_root_read_link(root, "/proc/42/fd/7", &t4), ==, -ENOENT);
    g_assert_cmpint(av_root_read_link(root, "/proc/43/fd/9", &t5), ==, -ENOENT);
    g_assert_null(t5);
    g_assert_cmpint(av_root_read_link(root, "/", &t5), ==, -EINVAL);
    g_assert_cmpint(av_root_read_link(root, "/proc/42/fd/..", &t5), ==, -EINVAL);
    g_assert_null(t5);

    av_test_tmpdir_remove(dir);
    av_test_tmpdir_remove(outside);
}

static void
test_read_numbers(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autoptr(AvRoot) root = NULL;
    guint64 u = 0;
    gint64 i = 0;

    av_test_write(dir, "sys/hex", "0x10de\n");
    av_test_write(dir, "sys/dec", "42\n");
    av_test_write(dir, "sys/neg", "-1\n");
    av_test_write(dir, "sys/junk", "12ab\n");
    av_test_write(dir, "sys/empty", "");
    root = new_root(dir);

    g_assert_cmpint(av_root_read_uint(root, "/sys/hex", 0, &u), ==, 0);
    g_assert_cmpuint(u, ==, 0x10de);
    g_assert_cmpint(av_root_read_uint(root, "/sys/hex", 16, &u), ==, 0);
    g_assert_cmpuint(u, ==, 0x10de);
    g_assert_cmpint(av_root_read_uint(root, "/sys/dec", 0, &u), ==, 0);
    g_assert_cmpuint(u, ==, 42);
    g_assert_cmpint(av_root_read_uint(root, "/sys/neg", 0, &u), ==, -ERANGE);
    g_assert_cmpint(av_root_read_uint(root, "/sys/junk", 10, &u), ==, -EINVAL);
    g_assert_cmpint(av_root_read_uint(root, "/sys/empty", 10, &u), ==, -EINVAL);
    g_assert_cmpint(av_root_read_uint(root, "/sys/missing", 10, &u), ==, -ENOENT);
    g_assert_cmpuint(u, ==, 42);
    g_assert_cmpint(av_root_read_int(root, "/sys/neg", &i), ==, 0);
    g_assert_cmpint(i, ==, -1);
    g_assert_cmpint(av_root_read_int(root, "/sys/junk", &i), ==, -EINVAL);
    av_test_tmpdir_remove(dir);
}

static void
test_binary_file(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *path = g_build_filename(dir, "sys", "config", NULL);
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *data = NULL;
    guint8 bytes[4096];
    gsize len = 0;

    for (gsize k = 0; k < sizeof(bytes); k++)
        bytes[k] = (guint8)(k * 7);
    bytes[5] = 0;
    av_test_write(dir, "sys/.keep", "");
    g_file_set_contents(path, (const char *)bytes, sizeof(bytes), &err);
    g_assert_no_error(err);
    root = new_root(dir);
    g_assert_cmpint(av_root_read_file(root, "/sys/config", &data, &len), ==, 0);
    g_assert_cmpuint(len, ==, sizeof(bytes));
    g_assert_cmpmem(data, len, bytes, sizeof(bytes));
    av_test_tmpdir_remove(dir);
}

/* A hostile tree cannot hang or flood a reader with a FIFO or a device node. */
static void
test_special_files(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *fifo = g_build_filename(dir, "sys", "fifo", NULL);
    g_autoptr(AvRoot) root = NULL;
    g_autofree char *v = NULL;

    av_test_write(dir, "sys/.keep", "");
    g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
    av_test_symlink(dir, "sys/zero", "/dev/zero");
    av_test_symlink(dir, "sys/loopzero", "../dev/zero");
    av_test_symlink(dir, "dev/zero", "../../../../../dev/zero");
    root = new_root(dir);
    /* a FIFO with no writer would block a plain open() forever */
    g_assert_cmpint(av_root_read_attr(root, "/sys/fifo", &v), ==, -EINVAL);
    g_assert_cmpint(av_root_write_attr(root, "/sys/fifo", "x"), <, 0);
    /* links to the host's /dev/zero resolve inside the root: a link that
     * tries to climb back out lands on itself */
    g_assert_cmpint(av_root_read_attr(root, "/sys/zero", &v), ==, -ELOOP);
    g_assert_cmpint(av_root_read_attr(root, "/sys/loopzero", &v), ==, -ELOOP);
    g_assert_cmpint(av_root_read_attr(root, "/sys", &v), ==, -EISDIR);
    g_assert_null(v);
    av_test_tmpdir_remove(dir);
}

static void
test_write_attr(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autoptr(AvRoot) root = NULL;
    g_autofree char *v = NULL;

    av_test_write(dir, "sys/devices/d/driver_override", "(null)\n");
    av_test_symlink(dir, "sys/bus/d", "../devices/d");
    root = new_root(dir);
    g_assert_cmpint(av_root_write_attr(root, "/sys/bus/d/driver_override", "vfio-pci"), ==, 0);
    g_assert_cmpint(av_root_read_attr(root, "/sys/devices/d/driver_override", &v), ==, 0);
    g_assert_cmpstr(v, ==, "vfio-pci");
    g_assert_cmpint(av_root_write_attr(root, "/sys/bus/d/missing", "x"), ==, -ENOENT);
    av_test_tmpdir_remove(dir);
}

/* What a hostile tree plants to lead a reader outside the root or to hang
 * it: each must resolve inside the root, fail cleanly, or be refused. */
static void
test_escape(void)
{
    g_autofree char *outside = av_test_tmpdir();
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *fifo = g_build_filename(dir, "sys", "devices", "d", "fifo", NULL);
    g_autofree char *outdir = g_build_filename(outside, "dev", NULL);
    g_autoptr(AvRoot) root = NULL;
    g_autofree char *v = NULL, *r = NULL, *name = NULL;
    char **names = NULL;

    av_test_write(outside, "dev/secret", "outside\n");
    av_test_write(dir, "sys/devices/d/vendor", "0x10de\n");
    g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
    /* the host's /etc/passwd, absolute and by climbing */
    av_test_symlink(dir, "sys/passwd", "/etc/passwd");
    av_test_symlink(dir, "sys/devices/d/up", "../../../../../../../../../../etc/passwd");
    /* a directory outside, by its host path */
    av_test_symlink(dir, "sys/outdir", outdir);
    /* a directory link in the middle of a path, absolute */
    av_test_symlink(dir, "sys/class/x", "/sys/devices/d");
    av_test_symlink(dir, "sys/class/f", "../devices/d/fifo");
    /* loops, direct and through a directory */
    av_test_symlink(dir, "sys/loop", "loop");
    av_test_symlink(dir, "sys/a", "b/x");
    av_test_symlink(dir, "sys/b", "a");
    /* a chain of 40 links resolves, one of 41 does not (40, as the kernel) */
    for (int i = 0; i < 41; i++) {
        g_autofree char *rel = g_strdup_printf("sys/chain/%d", i);
        g_autofree char *target = i == 0 ? g_strdup("../devices/d/vendor") : g_strdup_printf("%d", i - 1);

        av_test_symlink(dir, rel, target);
    }
    root = new_root(dir);

    /* /etc/passwd of the host: not in this root */
    g_assert_cmpint(av_root_read_attr(root, "/sys/passwd", &v), ==, -ENOENT);
    g_assert_cmpint(av_root_read_attr(root, "/sys/devices/d/up", &v), ==, -ENOENT);
    g_assert_cmpint(av_root_read_attr(root, "/../../../../etc/passwd", &v), ==, -ENOENT);
    g_assert_false(av_root_exists(root, "/sys/passwd"));
    g_assert_null(v);
    /* ... and the root's own once there is one */
    av_test_write(dir, "etc/passwd", "root:x:0:0:inside:/root:/bin/sh\n");
    g_assert_cmpint(av_root_read_attr(root, "/sys/passwd", &v), ==, 0);
    g_assert_cmpstr(v, ==, "root:x:0:0:inside:/root:/bin/sh");
    g_clear_pointer(&v, g_free);
    g_assert_cmpint(av_root_resolve(root, "/sys/devices/d/up", &r), ==, 0);
    g_assert_cmpstr(r, ==, "/etc/passwd");
    g_clear_pointer(&r, g_free);
    /* ".." at the top is the top */
    g_assert_cmpint(av_root_resolve(root, "/..", &r), ==, 0);
    g_assert_cmpstr(r, ==, "/");
    g_clear_pointer(&r, g_free);
    g_assert_cmpint(av_root_resolve(root, "/../sys/./devices//d/", &r), ==, 0);
    g_assert_cmpstr(r, ==, "/sys/devices/d");
    g_clear_pointer(&r, g_free);
    g_assert_cmpint(av_root_read_attr(root, "/../../sys/class/x/../d/vendor", &v), ==, 0);
    g_assert_cmpstr(v, ==, "0x10de");
    g_clear_pointer(&v, g_free);

    /* the directory outside is not listed, read nor named */
    g_assert_cmpint(av_root_list_dir(root, "/sys/outdir", &names), ==, -ENOENT);
    g_assert_cmpint(av_root_read_attr(root, "/sys/outdir/secret", &v), ==, -ENOENT);
    g_assert_cmpint(av_root_link_name(root, "/sys/outdir", &name), ==, -ENOENT);
    g_assert_null(names);
    g_assert_null(name);

    /* through a directory link */
    g_assert_cmpint(av_root_list_dir(root, "/sys/class/x", &names), ==, 0);
    g_assert_cmpuint(g_strv_length(names), ==, 3);
    g_assert_cmpstr(names[0], ==, "fifo");
    g_assert_cmpstr(names[1], ==, "up");
    g_assert_cmpstr(names[2], ==, "vendor");
    g_clear_pointer(&names, g_strfreev);
    g_assert_cmpint(av_root_link_name(root, "/sys/class/x", &name), ==, 0);
    g_assert_cmpstr(name, ==, "d");
    g_clear_pointer(&name, g_free);

    /* loops */
    g_assert_cmpint(av_root_resolve(root, "/sys/loop", &r), ==, -ELOOP);
    g_assert_cmpint(av_root_read_attr(root, "/sys/loop", &v), ==, -ELOOP);
    g_assert_cmpint(av_root_list_dir(root, "/sys/a", &names), ==, -ELOOP);
    g_assert_cmpint(av_root_link_name(root, "/sys/b", &name), ==, -ELOOP);
    g_assert_cmpint(av_root_write_attr(root, "/sys/a", "x"), ==, -ELOOP);
    g_assert_false(av_root_exists(root, "/sys/loop"));
    g_assert_cmpint(av_root_read_attr(root, "/sys/chain/39", &v), ==, 0);
    g_assert_cmpstr(v, ==, "0x10de");
    g_clear_pointer(&v, g_free);
    g_assert_cmpint(av_root_resolve(root, "/sys/chain/40", &r), ==, -ELOOP);
    g_assert_cmpint(av_root_read_attr(root, "/sys/chain/40", &v), ==, -ELOOP);

    /* a FIFO planted as an attribute, by its name and through a link:
     * refused at once, never waited on */
    g_assert_cmpint(av_root_read_attr(root, "/sys/class/f", &v), ==, -EINVAL);
    g_assert_cmpint(av_root_read_attr(root, "/sys/class/x/fifo", &v), ==, -EINVAL);
    g_assert_cmpint(av_root_write_attr(root, "/sys/class/f", "x"), ==, -ENXIO);
    g_assert_cmpint(av_root_list_dir(root, "/sys/class/f", &names), ==, -ENOTDIR);
    /* a directory as an attribute, a file as a directory */
    g_assert_cmpint(av_root_read_attr(root, "/sys/class/x", &v), ==, -EISDIR);
    g_assert_cmpint(av_root_write_attr(root, "/sys/devices/d", "x"), ==, -EISDIR);
    g_assert_cmpint(av_root_list_dir(root, "/sys/devices/d/vendor", &names), ==, -ENOTDIR);
    g_assert_cmpint(av_root_read_attr(root, "/sys/devices/d/vendor/x", &v), ==, -ENOTDIR);
    g_assert_null(v);
    g_assert_null(r);
    g_assert_null(names);
    g_assert_null(name);

    av_test_tmpdir_remove(dir);
    av_test_tmpdir_remove(outside);
}

/* The real root ("/") takes the same path: a link of this host resolves to
 * its host path. */
static void
test_host_resolve(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *real = realpath(dir, NULL);
    g_autofree char *link = g_build_filename(real, "l", NULL);
    g_autofree char *link_f = g_build_filename(real, "l", "f", NULL);
    g_autofree char *want = g_build_filename(real, "d", NULL);
    g_autofree char *want_f = g_build_filename(real, "d", "f", NULL);
    g_autoptr(AvRoot) fake = new_root(dir);
    g_autoptr(AvRoot) host = new_root("/");
    g_autofree char *r = NULL, *v = NULL;

    /* (The fake root armed the switch for "/" too.) */
    g_assert_nonnull(fake);
    g_assert_cmpint(av_root_resolves_in_kernel(host), ==, !test_walk);
    av_test_write(dir, "d/f", "on the host\n");
    av_test_symlink(dir, "l", "d");
    g_assert_cmpint(av_root_resolve(host, link, &r), ==, 0);
    g_assert_cmpstr(r, ==, want);
    g_clear_pointer(&r, g_free);
    g_assert_cmpint(av_root_resolve(host, link_f, &r), ==, 0);
    g_assert_cmpstr(r, ==, want_f);
    g_assert_cmpint(av_root_read_attr(host, link_f, &v), ==, 0);
    g_assert_cmpstr(v, ==, "on the host");
    av_test_tmpdir_remove(dir);
}

/* The tests of resolution, run twice: by the kernel and by the walk. */
typedef struct {
    const char *name;
    void (*fn)(void);
} RootCase;

static const RootCase root_cases[] = {
    { "resolve-inside", test_resolve_inside },
    { "escape", test_escape },
    { "read-link", test_read_link },
    { "read-numbers", test_read_numbers },
    { "binary-file", test_binary_file },
    { "special-files", test_special_files },
    { "write-attr", test_write_attr },
    { "host-resolve", test_host_resolve },
};

static void
run_case(gconstpointer data)
{
    const RootCase *c = data;
    g_autofree char *dir = av_test_tmpdir();
    g_autoptr(AvRoot) probe = av_root_new(dir, NULL);

    /* A kernel before 5.6, or a seccomp filter: only the walk is there. */
    g_assert_nonnull(probe);
    if (!av_root_resolves_in_kernel(probe)) {
        av_test_tmpdir_remove(dir);
        g_test_skip("this kernel does not resolve in a root (openat2)");
        return;
    }
    av_test_tmpdir_remove(dir);
    c->fn();
}

static void
run_case_walk(gconstpointer data)
{
    const RootCase *c = data;

    test_walk = TRUE;
    c->fn();
    test_walk = FALSE;
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);
    g_test_add_func("/root/kernel-paths", test_kernel_paths);
    g_test_add_func("/root/prefix", test_prefix);
    g_test_add_func("/root/env-default", test_env_default);
    for (guint i = 0; i < G_N_ELEMENTS(root_cases); i++) {
        g_autofree char *kernel = g_strdup_printf("/root/kernel/%s", root_cases[i].name);
        g_autofree char *walk = g_strdup_printf("/root/walk/%s", root_cases[i].name);

        g_test_add_data_func(kernel, &root_cases[i], run_case);
        g_test_add_data_func(walk, &root_cases[i], run_case_walk);
    }
    return g_test_run();
}
