/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: kernel-enforced holds of VFIO groups (issue 14,
 * src/vfio/av-hold.h) on a private copy of a fake host: the fake kernel's
 * "one open file of a group", real holder processes (the accelvirt-hold
 * program, $ACCELVIRT_HOLD) taken, used and dropped, the group's lock
 * around takes and drops, records that count only in their boot and for
 * a holder of accelvirt's user, holder detection that ignores accelvirt's
 * own holders and no other process, vfio-zero through a held group, and
 * scrubs that never run a step without their hold.  Every holder a test
 * starts is dropped (or killed) before it ends. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "av-test.h"
#include "doubles/av-doubles.h"
#include "policy/av-policy.h"
#include "scrub/av-scrub.h"
#include "pool/av-pool.h"
#include "util/av-error.h"
#include "util/av-file.h"
#include "util/av-json.h"
#include "vfio/av-hold.h"
#include "vfio/av-kernel.h"
#include "vfio/av-vfio.h"

#define A100 "0000:17:00.0"             /* two-socket-8gpu, group 40, nvidia */
#define A100_DIR "sys/bus/pci/devices/" A100

typedef struct {
    char *dir;                   /* the fake host */
    char *state;                 /* a state dir */
    AvRoot *root;
    const AvKernelOps *ops;
} Fixture;

/* A fresh copy of two-socket-8gpu with the A100 on vfio-pci (group 40's
 * /dev/vfio/40 made by the fake kernel) and an empty state dir. */
static void
fixture_open(Fixture *f)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *orig = NULL;

    memset(f, 0, sizeof(*f));
    f->dir = av_test_host_copy("two-socket-8gpu");
    f->state = av_test_tmpdir();
    f->root = av_root_new(f->dir, &err);
    g_assert_no_error(err);
    f->ops = av_kernel_ops_for(f->root);
    g_assert_true(f->ops == &av_kernel_ops_fake);
    g_assert_true(av_vfio_bind(f->root, f->ops, A100, NULL, &orig, &err));
    g_assert_no_error(err);
}

static void
fixture_close(Fixture *f)
{
    g_autoptr(GError) err = NULL;

    /* No holder outlives its test. */
    g_assert_true(av_hold_drop(f->root, f->state, 40, &err));
    g_assert_no_error(err);
    av_root_free(f->root);
    av_test_tmpdir_remove(f->dir);
    av_test_tmpdir_remove(f->state);
    g_free(f->dir);
    g_free(f->state);
}

/* The name of process @pid, or NULL when it is gone (or a zombie). */
static char *
proc_comm(int pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", pid);
    g_autofree char *stat = NULL;
    char *open_paren, *close_paren;

    if (!g_file_get_contents(path, &stat, NULL, NULL))
        return NULL;
    open_paren = strchr(stat, '(');
    close_paren = strrchr(stat, ')');
    g_assert_true(open_paren && close_paren);
    if (close_paren[2] == 'Z')
        return NULL;
    return g_strndup(open_paren + 1, close_paren - open_paren - 1);
}

/* The number of open fds of process @pid, once it is down to @want
 * (the holder settles after its taker's word): waits up to 2 s. */
static guint
proc_fd_count(int pid, guint want)
{
    g_autofree char *fd_dir = g_strdup_printf("/proc/%d/fd", pid);
    guint n = 0;

    for (guint tries = 0; tries < 200; tries++) {
        g_autoptr(GDir) fds = g_dir_open(fd_dir, 0, NULL);

        n = 0;
        while (fds && g_dir_read_name(fds))
            n++;
        if (n == want)
            break;
        g_usleep(10 * 1000);
    }
    return n;
}

/* The live hold of group 40 (asserted). */
static AvHold *
live_hold(Fixture *f)
{
    g_autoptr(GError) err = NULL;
    AvHold *hold = NULL;

    g_assert_true(av_hold_get(f->root, f->state, 40, &hold, &err));
    g_assert_no_error(err);
    g_assert_nonnull(hold);
    return hold;
}

/* Field @n (1-based, proc(5)) of /proc/@pid/stat, or NULL when it is gone. */
static char *
proc_stat_field(int pid, guint n)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", pid);
    g_autofree char *stat = NULL;
    g_auto(GStrv) fields = NULL;
    char *close_paren;

    if (!g_file_get_contents(path, &stat, NULL, NULL))
        return NULL;
    close_paren = strrchr(stat, ')');
    g_assert_nonnull(close_paren);
    fields = g_strsplit(close_paren + 2, " ", -1);
    g_assert_cmpuint(g_strv_length(fields), >=, n - 2);
    return g_strdup(fields[n - 3]);
}

/* Waits (up to 2 s) until process @pid is gone or a zombie; TRUE then. */
static gboolean
proc_wait_gone(int pid)
{
    for (guint i = 0; i < 200; i++) {
        g_autofree char *comm = proc_comm(pid);

        if (!comm)
            return TRUE;
        g_usleep(10 * 1000);
    }
    return FALSE;
}

/* The accelvirt-hold processes of this machine whose fd 3 is @f's group 40
 * file; the last one's pid in *ret_pid (may be NULL). */
static guint
holders_of_group(Fixture *f, int *ret_pid)
{
    g_autofree char *node = g_build_filename(f->dir, "dev", "vfio", "40", NULL);
    g_autofree char *real = realpath(node, NULL);
    g_autoptr(GDir) proc = g_dir_open("/proc", 0, NULL);
    const char *name;
    guint n = 0;

    g_assert_nonnull(real);
    while (proc && (name = g_dir_read_name(proc))) {
        g_autofree char *comm_path = g_strdup_printf("/proc/%s/comm", name);
        g_autofree char *fd_path = g_strdup_printf("/proc/%s/fd/3", name);
        g_autofree char *comm = NULL;
        g_autofree char *target = NULL;

        if (!g_ascii_isdigit(name[0]) || !g_file_get_contents(comm_path, &comm, NULL, NULL))
            continue;
        if (!g_str_equal(g_strstrip(comm), AV_HOLD_COMM))
            continue;
        target = g_file_read_link(fd_path, NULL);
        if (target && g_str_equal(target, real)) {
            n++;
            if (ret_pid)
                *ret_pid = atoi(name);
        }
    }
    return n;
}

/* TRUE when this process may lower an oom_score_adj (CAP_SYS_RESOURCE in
 * its effective set: the "CapEff" line of /proc/self/status). */
static gboolean
have_cap_sys_resource(void)
{
    g_autofree char *status = NULL;
    const char *line;
    guint64 caps = 0;

    g_assert_true(g_file_get_contents("/proc/self/status", &status, NULL, NULL));
    line = strstr(status, "\nCapEff:");
    g_assert_nonnull(line);
    caps = g_ascii_strtoull(line + strlen("\nCapEff:"), NULL, 16);
    return (caps >> 24) & 1;    /* CAP_SYS_RESOURCE, linux/capability.h */
}

/* The fake kernel lets one open file of a group exist, across fork. */
static void
test_group_open_busy(void)
{
    Fixture f;
    AvDeviceHandle *h = NULL;
    int fd = -1, fd2 = -1;
    pid_t child;
    int status;

    fixture_open(&f);
    g_assert_cmpint(f.ops->group_open(f.root, 41, &fd), ==, -ENOENT);    /* on nvidia: no node */
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd), ==, 0);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd2), ==, -EBUSY);
    g_assert_cmpint(f.ops->device_open(f.root, A100, &h), ==, -EBUSY);
    g_assert_null(h);
    /* The one who holds it opens the device through its file. */
    g_assert_cmpint(f.ops->device_open_held(f.root, A100, fd, &h), ==, 0);
    g_assert_nonnull(h);
    f.ops->device_close(h);
    g_assert_cmpint(f.ops->device_open_held(f.root, A100, -1, &h), ==, -EBADF);
    /* A child holds it on after the parent closes its copy. */
    child = fork();
    g_assert_cmpint(child, >=, 0);
    if (child == 0) {
        pause();
        _exit(0);
    }
    close(fd);
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd2), ==, -EBUSY);
    kill(child, SIGKILL);
    g_assert_cmpint(waitpid(child, &status, 0), ==, child);
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd2), ==, 0);
    /* An opened device holds the group as its own open would. */
    g_assert_cmpint(f.ops->device_open(f.root, A100, &h), ==, -EBUSY);
    close(fd2);
    g_assert_cmpint(f.ops->device_open(f.root, A100, &h), ==, 0);
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd), ==, -EBUSY);
    f.ops->device_close(h);
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd), ==, 0);
    close(fd);
    fixture_close(&f);
}

/* Take, take again, a dup of the held file, drop: a real holder process. */
static void
test_take_drop_fd(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHold) hold = NULL;
    g_autoptr(AvHold) again = NULL;
    g_autofree char *comm = NULL;
    g_autofree char *record = NULL;
    g_autofree char *fd_dir = NULL;
    g_autoptr(GDir) fds = NULL;
    AvDeviceHandle *h = NULL;
    const char *name;
    guint n_fds = 0;
    int fd = -1, busy = -1;

    fixture_open(&f);
    g_assert_true(av_hold_take(f.root, f.ops, f.state, 40, A100, &err));
    g_assert_no_error(err);
    hold = live_hold(&f);
    g_assert_cmpstr(hold->address, ==, A100);
    g_assert_nonnull(hold->since);
    comm = proc_comm(hold->pid);
    g_assert_cmpstr(comm, ==, AV_HOLD_COMM);
    record = g_build_filename(f.state, "holds", "40.json", NULL);
    g_assert_true(g_file_test(record, G_FILE_TEST_IS_REGULAR));
    /* The holder keeps the group file as fd 3 and nothing but /dev/null. */
    g_assert_cmpuint(proc_fd_count(hold->pid, 4), ==, 4);
    fd_dir = g_strdup_printf("/proc/%d/fd", hold->pid);
    fds = g_dir_open(fd_dir, 0, NULL);
    g_assert_nonnull(fds);
    while ((name = g_dir_read_name(fds))) {
        g_autofree char *link = g_build_filename(fd_dir, name, NULL);
        g_autofree char *target = g_file_read_link(link, NULL);

        n_fds++;
        if (g_str_equal(name, "3"))
            g_assert_true(g_str_has_suffix(target, "/dev/vfio/40"));
        else
            g_assert_cmpstr(target, ==, "/dev/null");
    }
    g_assert_cmpuint(n_fds, ==, 4);
    /* The kernel now refuses the group to everyone else (a QEMU). */
    g_assert_cmpint(f.ops->group_open(f.root, 40, &busy), ==, -EBUSY);
    /* Idempotent: the same holder. */
    g_assert_true(av_hold_take(f.root, f.ops, f.state, 40, A100, &err));
    again = live_hold(&f);
    g_assert_cmpint(again->pid, ==, hold->pid);
    /* The worker's way in: a dup of the holder's fd. */
    g_assert_true(av_hold_fd(f.root, f.state, 40, &fd, &err));
    g_assert_no_error(err);
    g_assert_cmpint(f.ops->device_open_held(f.root, A100, fd, &h), ==, 0);
    f.ops->device_close(h);
    close(fd);
    g_assert_cmpint(f.ops->group_open(f.root, 40, &busy), ==, -EBUSY);
    /* Dropped: the holder is gone, the record too, the group free. */
    g_assert_true(av_hold_drop(f.root, f.state, 40, &err));
    g_assert_no_error(err);
    g_clear_pointer(&comm, g_free);
    comm = proc_comm(hold->pid);
    g_assert_null(comm);
    g_assert_false(g_file_test(record, G_FILE_TEST_EXISTS));
    g_assert_cmpint(f.ops->group_open(f.root, 40, &busy), ==, 0);
    close(busy);
    g_assert_false(av_hold_fd(f.root, f.state, 40, &fd, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_clear_error(&err);
    g_assert_true(av_hold_drop(f.root, f.state, 40, &err));      /* nothing to drop */
    fixture_close(&f);
}

/* A group another process has open is not held: in use, naming why, and
 * nothing recorded or left running.  A killed holder is no hold: taken
 * anew. */
static void
test_take_busy_and_killed(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHold) hold = NULL;
    g_autoptr(AvHold) none = NULL;
    g_autoptr(AvHold) fresh = NULL;
    g_autoptr(GArray) groups = NULL;
    int fd = -1, status;

    fixture_open(&f);
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd), ==, 0);
    g_assert_false(av_hold_take(f.root, f.ops, f.state, 40, A100, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_IN_USE);
    g_assert_nonnull(strstr(err->message, "open in another process"));
    g_clear_error(&err);
    groups = av_hold_list_groups(f.state);
    g_assert_cmpuint(groups->len, ==, 0);
    close(fd);
    g_assert_false(av_hold_take(f.root, f.ops, f.state, 41, "0000:31:00.0", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_clear_error(&err);

    g_assert_true(av_hold_take(f.root, f.ops, f.state, 40, A100, &err));
    hold = live_hold(&f);
    g_assert_cmpint(kill(hold->pid, SIGKILL), ==, 0);
    /* Reaped by init, not by us: wait until it is gone. */
    for (guint i = 0; i < 200; i++) {
        g_autofree char *comm = proc_comm(hold->pid);

        if (!comm)
            break;
        g_usleep(10 * 1000);
    }
    g_assert_true(av_hold_get(f.root, f.state, 40, &none, &err));
    g_assert_null(none);
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd), ==, 0);
    close(fd);
    g_assert_true(av_hold_take(f.root, f.ops, f.state, 40, A100, &err));
    g_assert_no_error(err);
    fresh = live_hold(&f);
    g_assert_cmpint(fresh->pid, !=, hold->pid);
    (void)status;
    fixture_close(&f);
}

/* /proc/@pid of the fake tree: a stat with @start_time, a status whose
 * uids are all @uid, an fd on /dev/vfio/40, empty maps. */
static void
fake_process_uid(Fixture *f, const char *pid, const char *comm, guint64 start_time, unsigned uid)
{
    g_autofree char *stat = g_strdup_printf("%s (%s) S 1 %s %s 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %" G_GUINT64_FORMAT
                                            " 0 0\n", pid, comm, pid, pid, start_time);
    g_autofree char *status = g_strdup_printf("Name:\t%s\nPid:\t%s\nUid:\t%u\t%u\t%u\t%u\nGid:\t0\t0\t0\t0\n", comm,
                                              pid, uid, uid, uid, uid);
    g_autofree char *stat_rel = g_strdup_printf("proc/%s/stat", pid);
    g_autofree char *status_rel = g_strdup_printf("proc/%s/status", pid);
    g_autofree char *maps_rel = g_strdup_printf("proc/%s/maps", pid);
    g_autofree char *fd_rel = g_strdup_printf("proc/%s/fd/3", pid);

    av_test_write(f->dir, stat_rel, stat);
    av_test_write(f->dir, status_rel, status);
    av_test_write(f->dir, maps_rel, "");
    av_test_symlink(f->dir, fd_rel, "/dev/vfio/40");
}

/* The same, of the user the test runs as. */
static void
fake_process(Fixture *f, const char *pid, const char *comm, guint64 start_time)
{
    fake_process_uid(f, pid, comm, start_time, (unsigned)geteuid());
}

/* A hold record of group 40 naming @pid and @start_time, of the boot
 * @boot_id (none when NULL). */
static void
fake_record_boot(const char *state, int pid, guint64 start_time, const char *boot_id)
{
    g_autofree char *boot = boot_id ? g_strdup_printf("\"boot_id\": \"%s\", ", boot_id) : g_strdup("");
    g_autofree char *text = g_strdup_printf("{\"pid\": %d, \"start_time\": %" G_GUINT64_FORMAT ", %s\"group\": 40, "
                                            "\"address\": \"" A100 "\", \"since\": \"2026-01-01T00:00:00Z\"}\n",
                                            pid, start_time, boot);

    av_test_write(state, "holds/40.json", text);
}

/* This boot's id as holds record it for @f's tree. */
static char *
this_boot(Fixture *f)
{
    char *boot_id = NULL;

    g_assert_cmpint(av_hold_boot_id(f->root, &boot_id), ==, 0);
    return boot_id;
}

/* A hold record of group 40 naming @pid and @start_time, of this boot. */
static void
fake_record(Fixture *f, int pid, guint64 start_time)
{
    g_autofree char *boot_id = this_boot(f);

    fake_record_boot(f->state, pid, start_time, boot_id);
}

/* Holder detection: accelvirt's own holder (recorded in this boot, same
 * start time, name and user) is no holder for av_vfio_group_holder_full();
 * any other process is, and so is a recorded pid whose start time differs
 * (the pid was reused), whose user is another, or whose record is of
 * another boot. */
static void
test_detection_ignores_own(void)
{
    Fixture f;
    g_autofree char *own = NULL;
    g_autofree char *plain = NULL;
    g_autofree char *other = NULL;
    g_autofree char *reused = NULL;
    g_autofree char *record = NULL;
    g_autofree char *proc_4343 = NULL;
    g_autofree char *proc_4242 = NULL;
    g_autofree char *other_user = NULL;
    g_autofree char *other_boot = NULL;
    g_autoptr(GHashTable) pids = NULL;
    g_autoptr(GHashTable) pids_other_user = NULL;

    fixture_open(&f);
    fake_process(&f, "4242", AV_HOLD_COMM, 777);
    fake_record(&f, 4242, 777);
    pids = av_hold_pids(f.root, f.state);
    g_assert_true(g_hash_table_contains(pids, "4242"));
    own = av_vfio_group_holder_full(f.root, f.state, 40);
    g_assert_null(own);
    plain = av_vfio_group_holder(f.root, 40);     /* without the state dir: a holder */
    g_assert_cmpstr(plain, ==, "4242 (/dev/vfio/40)");
    /* Another process with the group open: a holder. */
    fake_process(&f, "4343", "qemu-system-x86", 900);
    other = av_vfio_group_holder_full(f.root, f.state, 40);
    g_assert_cmpstr(other, ==, "4343 (/dev/vfio/40)");
    /* The record's pid, started at another time: not ours. */
    proc_4343 = g_build_filename(f.dir, "proc", "4343", NULL);
    av_test_tmpdir_remove(proc_4343);
    fake_record(&f, 4242, 778);
    reused = av_vfio_group_holder_full(f.root, f.state, 40);
    g_assert_cmpstr(reused, ==, "4242 (/dev/vfio/40)");
    /* The record's pid, start time and name, and another user: not ours. */
    proc_4242 = g_build_filename(f.dir, "proc", "4242", NULL);
    av_test_tmpdir_remove(proc_4242);
    fake_process_uid(&f, "4242", AV_HOLD_COMM, 777, 65534);
    fake_record(&f, 4242, 777);
    pids_other_user = av_hold_pids(f.root, f.state);
    g_assert_false(g_hash_table_contains(pids_other_user, "4242"));
    other_user = av_vfio_group_holder_full(f.root, f.state, 40);
    g_assert_cmpstr(other_user, ==, "4242 (/dev/vfio/40)");
    /* Ours again, with a record of another boot: not ours either. */
    av_test_tmpdir_remove(proc_4242);
    fake_process(&f, "4242", AV_HOLD_COMM, 777);
    fake_record_boot(f.state, 4242, 777, "00000000-1111-4222-8333-444444444444");
    other_boot = av_vfio_group_holder_full(f.root, f.state, 40);
    g_assert_cmpstr(other_boot, ==, "4242 (/dev/vfio/40)");
    /* The fixture's drop must not signal pid 4242 of this machine. */
    record = g_build_filename(f.state, "holds", "40.json", NULL);
    g_assert_cmpint(unlink(record), ==, 0);
    fixture_close(&f);
}

/* vfio-zero through the held group: the scrub needs no second open of
 * the group (which the kernel would refuse), and the hold stays. */
static void
test_zero_through_hold(void)
{
    static const char policy_json[] =
        "{\"profiles\": [{\"name\": \"gpu-a100\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x20f1\"},"
        " \"attach\": \"vfio-pci\", \"scrub\": [{\"method\": \"vfio-zero\", \"bars\": [1]}]}]}";
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = av_policy_new();
    g_autoptr(json_t) report = NULL;
    g_autoptr(AvHold) before = NULL;
    g_autoptr(AvHold) after = NULL;
    g_autofree char *bar = NULL;
    g_autofree char *data = NULL;
    g_autofree char *filled = g_malloc(8192);
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    gsize len = 0;

    fixture_open(&f);
    g_assert_true(av_policy_add_data(policy, "test.json", policy_json, strlen(policy_json), &err));
    memset(filled, 0xa5, 8192);
    bar = g_build_filename(f.dir, A100_DIR, "resource1", NULL);
    g_assert_true(g_file_set_contents(bar, filled, 8192, NULL));
    g_assert_true(av_hold_take(f.root, f.ops, f.state, 40, A100, &err));
    before = live_hold(&f);
    /* Without the hold's state dir, the scrub opens the group itself: busy. */
    g_assert_false(av_scrub_run(f.root, f.ops, av_policy_find(policy, "gpu-a100"), &target, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_IN_USE);
    g_clear_error(&err);
    target.hold_state_dir = f.state;
    g_assert_true(av_scrub_run(f.root, f.ops, av_policy_find(policy, "gpu-a100"), &target, &report, &err));
    g_assert_no_error(err);
    g_assert_true(g_file_get_contents(bar, &data, &len, NULL));
    g_assert_cmpuint(len, ==, 8192);
    for (gsize i = 0; i < len; i++)
        g_assert_cmpint(data[i], ==, 0);
    after = live_hold(&f);
    g_assert_cmpint(after->pid, ==, before->pid);
    fixture_close(&f);
}

/* A "command" step keeps the hold: no other process can open the group
 * while it runs, and the program gets the held group file as its fd 3
 * (ACCELVIRT_SCRUB_VFIO_GROUP_FD=3); the holder is the same after. */
static void
test_command_keeps_hold(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = av_policy_new();
    g_autoptr(AvHold) before = NULL;
    g_autoptr(AvHold) after = NULL;
    g_autofree char *node = NULL;
    g_autofree char *policy_json = NULL;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    const AvProfile *profile;

    fixture_open(&f);
    node = g_build_filename(f.dir, "dev", "vfio", "40", NULL);
    /* exit 7: another open file got the group; 8: no fd 3 named in the
     * environment; 9: fd 3 is not the group file */
    policy_json = g_strdup_printf(
        "{\"profiles\": [{\"name\": \"gpu-a100\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x20f1\"},"
        " \"attach\": \"vfio-pci\", \"scrub\": [{\"method\": \"command\", \"timeout\": 10, \"argv\": [\"/bin/sh\", "
        "\"-c\", \"flock -n %s true && exit 7; [ \\\"$ACCELVIRT_SCRUB_VFIO_GROUP_FD\\\" = 3 ] || exit 8; "
        "[ \\\"$(readlink /proc/self/fd/3)\\\" = %s ] || exit 9; exit 0\"]}]}]}",
        node, node);
    g_assert_true(av_policy_add_data(policy, "test.json", policy_json, strlen(policy_json), &err));
    g_assert_no_error(err);
    profile = av_policy_find(policy, "gpu-a100");
    target.hold_state_dir = f.state;
    g_assert_true(av_hold_take(f.root, f.ops, f.state, 40, A100, &err));
    before = live_hold(&f);
    g_assert_true(av_scrub_run(f.root, f.ops, profile, &target, NULL, &err));
    g_assert_no_error(err);
    after = live_hold(&f);
    g_assert_cmpint(after->pid, ==, before->pid);
    fixture_close(&f);
}

/* The holder is the accelvirt-hold program, exec'd: not a copy of its
 * taker (its own program, an empty environment, no descriptor of the
 * taker's), reparented and in a session of its own, with the
 * oom_score_adj it asked for (-1000 where the taker may lower it) in its
 * record, and this boot's id. */
static void
test_holder_is_exec(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHold) hold = NULL;
    g_autofree char *exe_link = NULL;
    g_autofree char *exe = NULL;
    g_autofree char *want_exe = NULL;
    g_autofree char *environ_path = NULL;
    g_autofree char *environ_text = NULL;
    g_autofree char *oom_path = NULL;
    g_autofree char *oom_text = NULL;
    g_autofree char *ppid = NULL;
    g_autofree char *sid = NULL;
    g_autofree char *boot_id = NULL;
    gsize environ_len = 0;
    int leak;

    fixture_open(&f);
    /* A descriptor the taker has open without O_CLOEXEC stays the taker's. */
    leak = open("/dev/null", O_RDONLY);
    g_assert_cmpint(leak, >=, 0);
    g_assert_true(av_hold_take(f.root, f.ops, f.state, 40, A100, &err));
    g_assert_no_error(err);
    close(leak);
    hold = live_hold(&f);
    exe_link = g_strdup_printf("/proc/%d/exe", hold->pid);
    exe = g_file_read_link(exe_link, NULL);
    want_exe = realpath(g_getenv("ACCELVIRT_HOLD"), NULL);
    g_assert_nonnull(want_exe);
    g_assert_cmpstr(exe, ==, want_exe);
    environ_path = g_strdup_printf("/proc/%d/environ", hold->pid);
    g_assert_true(g_file_get_contents(environ_path, &environ_text, &environ_len, NULL));
    g_assert_cmpuint(environ_len, ==, 0);
    /* Field 4 is its parent, field 6 its session. */
    ppid = proc_stat_field(hold->pid, 4);
    g_assert_cmpint(atoi(ppid), !=, (int)getpid());
    sid = proc_stat_field(hold->pid, 6);
    g_assert_cmpint(atoi(sid), !=, (int)getsid(0));
    g_assert_cmpuint(proc_fd_count(hold->pid, 4), ==, 4);
    oom_path = g_strdup_printf("/proc/%d/oom_score_adj", hold->pid);
    g_assert_true(g_file_get_contents(oom_path, &oom_text, NULL, NULL));
    g_assert_cmpint(atoi(oom_text), ==, hold->oom_score_adj);
    if (have_cap_sys_resource())
        g_assert_cmpint(hold->oom_score_adj, ==, AV_HOLD_OOM_SCORE_ADJ);
    else
        g_test_message("no CAP_SYS_RESOURCE here: the holder has oom_score_adj %d", hold->oom_score_adj);
    boot_id = this_boot(&f);
    g_assert_cmpstr(hold->boot_id, ==, boot_id);
    fixture_close(&f);
}

/* A taker without CAP_SYS_RESOURCE (dropped from the bounding set, so its
 * holder cannot have it after exec): the holder's write of -1000 fails, it
 * holds all the same, and its record says what it got. */
static void
test_holder_without_oom_capability(void)
{
    Fixture f;
    g_autoptr(AvHold) hold = NULL;
    g_autofree char *own = NULL;
    pid_t child;
    int status, fd = -1;

    fixture_open(&f);
    g_assert_true(g_file_get_contents("/proc/self/oom_score_adj", &own, NULL, NULL));
    child = fork();
    g_assert_cmpint(child, >=, 0);
    if (child == 0) {
        if (prctl(PR_CAPBSET_DROP, 24 /* CAP_SYS_RESOURCE */, 0, 0, 0) < 0)
            _exit(77);
        _exit(av_hold_take(f.root, f.ops, f.state, 40, A100, NULL) ? 0 : 1);
    }
    g_assert_cmpint(waitpid(child, &status, 0), ==, child);
    g_assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) {
        g_test_skip("cannot drop CAP_SYS_RESOURCE from the bounding set (no CAP_SETPCAP)");
        fixture_close(&f);
        return;
    }
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    hold = live_hold(&f);
    if (atoi(own) != AV_HOLD_OOM_SCORE_ADJ)
        g_assert_cmpint(hold->oom_score_adj, ==, atoi(own));
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd), ==, -EBUSY);
    fixture_close(&f);
}

/* Starts the holder program on @f's group 40 as a taker does, by hand:
 * returns its pid (our child) and in *ret_sock our end of its socket,
 * once it has told its pid. */
static pid_t
holder_by_hand(Fixture *f, int *ret_sock)
{
    char line[64] = { 0 };
    int sock[2], group_fd = -1, pid = 0, oom = 0;
    ssize_t n;
    pid_t child;

    g_assert_cmpint(f->ops->group_open(f->root, 40, &group_fd), ==, 0);
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock), ==, 0);
    child = fork();
    g_assert_cmpint(child, >=, 0);
    if (child == 0) {
        char *argv[] = { (char *)AV_HOLD_COMM, NULL };
        char *envp[] = { NULL };

        if (dup2(group_fd, AV_HOLD_FD) < 0 || dup2(sock[1], AV_HOLD_SOCKET_FD) < 0)
            _exit(126);
        execve(g_getenv("ACCELVIRT_HOLD"), argv, envp);
        _exit(127);
    }
    close(group_fd);
    close(sock[1]);
    n = recv(sock[0], line, sizeof(line) - 1, 0);
    g_assert_cmpint(n, >, 0);
    g_assert_cmpint(sscanf(line, "%d %d", &pid, &oom), ==, 2);
    g_assert_cmpint(pid, ==, child);
    *ret_sock = sock[0];
    return child;
}

/* The holder program holds only once told: its socket closing before the
 * word (a taker killed before or after writing the record) ends it and
 * frees the group; told, it answers, holds on without the socket, and
 * ends on SIGTERM. */
static void
test_holder_needs_word(void)
{
    Fixture f;
    char answer = 0;
    int sock = -1, fd = -1, status;
    pid_t holder;

    fixture_open(&f);
    holder = holder_by_hand(&f, &sock);
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd), ==, -EBUSY);
    close(sock);
    g_assert_cmpint(waitpid(holder, &status, 0), ==, holder);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd), ==, 0);
    close(fd);

    holder = holder_by_hand(&f, &sock);
    g_assert_cmpint(send(sock, (char[]){ AV_HOLD_WORD_GO }, 1, 0), ==, 1);
    g_assert_cmpint(recv(sock, &answer, 1, 0), ==, 1);
    g_assert_cmpint(answer, ==, AV_HOLD_WORD_READY);
    close(sock);
    g_usleep(100 * 1000);
    g_assert_cmpint(waitpid(holder, &status, WNOHANG), ==, 0);
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd), ==, -EBUSY);
    g_assert_cmpint(kill(holder, SIGTERM), ==, 0);
    g_assert_cmpint(waitpid(holder, &status, 0), ==, holder);
    g_assert_true(WIFSIGNALED(status));
    g_assert_cmpint(WTERMSIG(status), ==, SIGTERM);
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd), ==, 0);
    close(fd);
    fixture_close(&f);
}

/* For av_test_hold(): the lock of group 40's hold in the state dir @data. */
static gpointer
take_group_lock(gconstpointer data)
{
    g_autofree char *path = g_build_filename((const char *)data, "holds", "40.lock", NULL);
    g_autofree char *dir = g_path_get_dirname(path);

    if (!av_file_ensure_dir(dir, 0700, NULL))
        return NULL;
    return av_lock_take(path, AV_LOCK_EXCLUSIVE, 0, NULL);
}

/* A child that takes (@take) or drops group 40's hold; its pid. */
static pid_t
hold_child(Fixture *f, gboolean take)
{
    pid_t child = fork();

    g_assert_cmpint(child, >=, 0);
    if (child == 0) {
        gboolean ok = take ? av_hold_take(f->root, f->ops, f->state, 40, A100, NULL)
                           : av_hold_drop(f->root, f->state, 40, NULL);

        _exit(ok ? 0 : 1);
    }
    return child;
}

static void
assert_child_ok(pid_t child)
{
    int status = 0;

    g_assert_cmpint(waitpid(child, &status, 0), ==, child);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
}

/* Takes and drops of one group wait for its lock (holds/40.lock): while
 * another process has it, a take neither opens the group nor writes a
 * record, and a drop neither stops the holder nor removes its record. */
static void
test_lock_serialises(void)
{
    Fixture f;
    g_autofree char *record = NULL;
    g_autoptr(AvHold) hold = NULL;
    pid_t locker, child;
    int go = -1, fd = -1;

    fixture_open(&f);
    record = g_build_filename(f.state, "holds", "40.json", NULL);
    locker = av_test_hold(take_group_lock, (GDestroyNotify)av_lock_release, f.state, &go);
    child = hold_child(&f, TRUE);
    g_usleep(300 * 1000);
    g_assert_false(g_file_test(record, G_FILE_TEST_EXISTS));
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd), ==, 0);
    close(fd);
    g_assert_cmpuint(holders_of_group(&f, NULL), ==, 0);
    av_test_hold_release(locker, go);
    assert_child_ok(child);
    hold = live_hold(&f);

    locker = av_test_hold(take_group_lock, (GDestroyNotify)av_lock_release, f.state, &go);
    child = hold_child(&f, FALSE);
    g_usleep(300 * 1000);
    g_assert_true(g_file_test(record, G_FILE_TEST_EXISTS));
    {
        g_autofree char *comm = proc_comm(hold->pid);

        g_assert_nonnull(comm);
    }
    av_test_hold_release(locker, go);
    assert_child_ok(child);
    g_assert_false(g_file_test(record, G_FILE_TEST_EXISTS));
    g_assert_true(proc_wait_gone(hold->pid));
    fixture_close(&f);
}

/* Processes that take and drop one group at once: every take succeeds
 * (one holds, the others find its live hold), and whatever the order, in
 * the end a record names the one holder there is, or there is neither. */
static void
test_concurrent_takes_and_drops(void)
{
    Fixture f;
    g_autofree char *record = NULL;
    pid_t children[8];
    int barrier[2];

    fixture_open(&f);
    record = g_build_filename(f.state, "holds", "40.json", NULL);
    for (guint round = 0; round < 4; round++) {
        g_autoptr(AvHold) hold = NULL;
        g_autoptr(GError) err = NULL;
        int pid = 0;

        g_assert_cmpint(pipe(barrier), ==, 0);
        for (guint i = 0; i < G_N_ELEMENTS(children); i++) {
            gboolean take = round % 2 == 0 || i % 2 == 0;

            children[i] = fork();
            g_assert_cmpint(children[i], >=, 0);
            if (children[i] == 0) {
                char c;
                gboolean ok;

                close(barrier[1]);
                if (read(barrier[0], &c, 1) != 0)
                    _exit(3);
                ok = take ? av_hold_take(f.root, f.ops, f.state, 40, A100, NULL)
                          : av_hold_drop(f.root, f.state, 40, NULL);
                _exit(ok ? 0 : 1);
            }
        }
        close(barrier[0]);
        close(barrier[1]);     /* all at once */
        for (guint i = 0; i < G_N_ELEMENTS(children); i++)
            assert_child_ok(children[i]);
        g_assert_true(av_hold_get(f.root, f.state, 40, &hold, &err));
        g_assert_no_error(err);
        if (round % 2 == 0 || g_file_test(record, G_FILE_TEST_EXISTS)) {
            g_assert_nonnull(hold);
            g_assert_cmpuint(holders_of_group(&f, &pid), ==, 1);
            g_assert_cmpint(pid, ==, hold->pid);
        } else {
            for (guint i = 0; i < 200 && holders_of_group(&f, NULL) > 0; i++)
                g_usleep(10 * 1000);
            g_assert_cmpuint(holders_of_group(&f, NULL), ==, 0);
        }
    }
    fixture_close(&f);
}

/* Rewrites group 40's record in @f: its boot id @boot_id (none when NULL),
 * and @pid and @start_time when @pid > 0. */
static void
rewrite_record(Fixture *f, const char *boot_id, int pid, guint64 start_time)
{
    g_autofree char *path = g_build_filename(f->state, "holds", "40.json", NULL);
    g_autoptr(json_t) record = json_load_file(path, 0, NULL);
    g_autofree char *text = NULL;

    g_assert_nonnull(record);
    if (boot_id)
        json_object_set_new(record, "boot_id", json_string(boot_id));
    else
        json_object_del(record, "boot_id");
    if (pid > 0) {
        json_object_set_new(record, "pid", json_integer(pid));
        json_object_set_new(record, "start_time", json_integer((json_int_t)start_time));
    }
    text = json_dumps(record, 0);
    av_test_write(f->state, "holds/40.json", text);
}

#define OTHER_BOOT "00000000-1111-4222-8333-444444444444"

/* A record of another boot is never a hold, even when its pid and start
 * time name a live accelvirt-hold of ours (pids mean nothing across
 * boots): no av_hold_get(), no av_hold_fd(), not in av_hold_pids(); the
 * pool's sweep removes it and signals nobody.  A record without a boot id
 * (an accelvirt before them) is no hold either; its holder, still ours,
 * is ended when the sweep removes it. */
static void
test_stale_records(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHold) hold = NULL;
    g_autoptr(AvHold) none = NULL;
    g_autoptr(AvHold) legacy = NULL;
    g_autoptr(AvHold) none2 = NULL;
    g_autoptr(AvRoot) host = av_root_new("/", NULL);
    g_autoptr(GHashTable) pids = NULL;
    g_autoptr(GHashTable) pids2 = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autofree char *record = NULL;
    g_autofree char *pid_text = NULL;
    guint removed = 0;
    int fd = -1;

    fixture_open(&f);
    record = g_build_filename(f.state, "holds", "40.json", NULL);
    g_assert_true(av_hold_take(f.root, f.ops, f.state, 40, A100, &err));
    hold = live_hold(&f);
    pid_text = g_strdup_printf("%d", hold->pid);
    rewrite_record(&f, OTHER_BOOT, 0, 0);
    g_assert_true(av_hold_get(f.root, f.state, 40, &none, &err));
    g_assert_null(none);
    g_assert_false(av_hold_fd(f.root, f.state, 40, &fd, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_clear_error(&err);
    pids = av_hold_pids(host, f.state);
    g_assert_false(g_hash_table_contains(pids, pid_text));
    /* The sweep: the record goes, its pid is not signalled. */
    pool = av_pool_open(f.state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    g_assert_true(av_pool_holds_sync(pool, f.root, f.ops, &err));
    g_assert_no_error(err);
    g_assert_false(g_file_test(record, G_FILE_TEST_EXISTS));
    g_usleep(100 * 1000);
    {
        g_autofree char *comm = proc_comm(hold->pid);

        g_assert_nonnull(comm);
    }
    g_assert_cmpint(kill(hold->pid, SIGKILL), ==, 0);
    g_assert_true(proc_wait_gone(hold->pid));

    /* No boot id: no hold; av_hold_prune() removes it and ends its holder. */
    g_assert_true(av_hold_take(f.root, f.ops, f.state, 40, A100, &err));
    g_assert_no_error(err);
    legacy = live_hold(&f);
    rewrite_record(&f, NULL, 0, 0);
    g_assert_true(av_hold_get(f.root, f.state, 40, &none2, &err));
    g_assert_null(none2);
    g_assert_false(av_hold_fd(f.root, f.state, 40, &fd, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_clear_error(&err);
    g_clear_pointer(&pid_text, g_free);
    pid_text = g_strdup_printf("%d", legacy->pid);
    pids2 = av_hold_pids(host, f.state);
    g_assert_false(g_hash_table_contains(pids2, pid_text));
    g_assert_true(av_hold_prune(f.root, f.state, &removed, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(removed, ==, 1);
    g_assert_false(g_file_test(record, G_FILE_TEST_EXISTS));
    g_assert_true(proc_wait_gone(legacy->pid));
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd), ==, 0);
    close(fd);
    fixture_close(&f);
}

/* A record whose pid and start time name a process of another user that
 * calls itself accelvirt-hold (a stale record's pid reused, or someone
 * playing at it) is no hold, of this boot or none: its fd 3 is never
 * handed out (av_hold_fd()), it is no accelvirt holder for holder
 * detection, and a drop removes the record without signalling it. */
static void
test_record_of_another_user(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) host = av_root_new("/", NULL);
    g_autofree char *boot_id = NULL;
    g_autofree char *start = NULL;
    g_autofree char *decoy = NULL;
    g_autofree char *pid_text = NULL;
    int ready[2], fd = -1, status;
    char c;
    pid_t child;

    if (geteuid() != 0) {
        g_test_skip("needs root, to run a process of another user");
        return;
    }
    fixture_open(&f);
    decoy = g_build_filename(f.state, "decoy", NULL);
    av_test_write(f.state, "decoy", "not a VFIO group\n");
    g_assert_cmpint(pipe(ready), ==, 0);
    child = fork();
    g_assert_cmpint(child, >=, 0);
    if (child == 0) {
        int d = open(decoy, O_RDONLY);

        if (d < 0 || dup2(d, AV_HOLD_FD) < 0 || prctl(PR_SET_NAME, AV_HOLD_COMM, 0, 0, 0) < 0 ||
            setgid(65534) < 0 || setuid(65534) < 0 || write(ready[1], "r", 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(ready[1]);
    g_assert_cmpint(read(ready[0], &c, 1), ==, 1);
    close(ready[0]);
    start = proc_stat_field(child, 22);
    pid_text = g_strdup_printf("%d", (int)child);
    boot_id = this_boot(&f);
    for (guint with_boot = 0; with_boot < 2; with_boot++) {
        g_autoptr(AvHold) got = NULL;
        g_autoptr(GHashTable) own = NULL;

        fake_record_boot(f.state, (int)child, g_ascii_strtoull(start, NULL, 10), with_boot ? boot_id : NULL);
        g_assert_true(av_hold_get(f.root, f.state, 40, &got, &err));
        g_assert_null(got);
        g_assert_false(av_hold_fd(f.root, f.state, 40, &fd, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
        g_clear_error(&err);
        own = av_hold_pids(host, f.state);
        g_assert_false(g_hash_table_contains(own, pid_text));
    }
    g_assert_true(av_hold_drop(f.root, f.state, 40, &err));
    g_assert_no_error(err);
    g_usleep(100 * 1000);
    g_assert_cmpint(waitpid(child, &status, WNOHANG), ==, 0);
    kill(child, SIGKILL);
    g_assert_cmpint(waitpid(child, &status, 0), ==, child);
    fixture_close(&f);
}

/* A policy of the A100 whose scrub is @steps (a JSON array). */
static AvPolicy *
a100_policy(const char *steps)
{
    g_autofree char *json = g_strdup_printf("{\"profiles\": [{\"name\": \"gpu-a100\", \"match\": {\"vendor\": \"0x10de\", "
                                            "\"device\": \"0x20f1\"}, \"attach\": \"vfio-pci\", \"scrub\": %s}]}",
                                            steps);
    g_autoptr(GError) err = NULL;
    AvPolicy *policy = av_policy_new();

    if (!av_policy_add_data(policy, "test.json", json, strlen(json), &err))
        g_error("%s: %s", json, err->message);
    return policy;
}

/* A "command" step that kills group 40's holder in @f (SIGKILL: as the OOM
 * killer or an operator would) and waits until it is gone. */
static char *
kill_holder_step(Fixture *f)
{
    return g_strdup_printf("{\"method\": \"command\", \"timeout\": 10, \"argv\": [\"/bin/sh\", \"-c\", "
                           "\"p=$(sed -n 's/.*pid.: *\\\\([0-9]*\\\\).*/\\\\1/p' %s/holds/40.json); "
                           "kill -9 $p; while [ -e /proc/$p ] && [ $(cut -d' ' -f3 /proc/$p/stat) != Z ]; "
                           "do sleep 0.01; done\"]}", f->state);
}

/* BAR 1 of the A100 in @f filled with 0xa5; its path. */
static char *
fill_bar(Fixture *f)
{
    g_autofree char *filled = g_malloc(8192);
    char *bar = g_build_filename(f->dir, A100_DIR, "resource1", NULL);

    memset(filled, 0xa5, 8192);
    g_assert_true(g_file_set_contents(bar, filled, 8192, NULL));
    return bar;
}

/* TRUE when every byte of @path is @value. */
static gboolean
file_all(const char *path, int value)
{
    g_autofree char *data = NULL;
    gsize len = 0;

    g_assert_true(g_file_get_contents(path, &data, &len, NULL));
    for (gsize i = 0; i < len; i++)
        if ((guchar)data[i] != value)
            return FALSE;
    return len > 0;
}

/* Scrubs @f's A100, held, with a "command" step that kills its holder
 * (kill_holder_step()) and then @second (a JSON step); av_scrub_run()'s
 * result. */
static gboolean
scrub_after_holder_killed(Fixture *f, const char *second, GError **error)
{
    g_autofree char *kill_step = kill_holder_step(f);
    g_autofree char *steps = g_strdup_printf("[%s, %s]", kill_step, second);
    g_autoptr(AvPolicy) policy = a100_policy(steps);
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40,
                             .hold_state_dir = f->state };

    return av_scrub_run(f->root, f->ops, av_policy_find(policy, "gpu-a100"), &target, NULL, error);
}

/* A held scrub whose hold is gone between two steps (its holder killed):
 * the next step, a vfio-zero, does not open the device without the hold;
 * the scrub fails saying so, the BAR is as the tenant left it, and the
 * hold is taken again (the group is free) for the quarantined device. */
static void
test_scrub_hold_lost_zero(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHold) before = NULL;
    g_autoptr(AvHold) after = NULL;
    g_autofree char *bar = NULL;

    fixture_open(&f);
    bar = fill_bar(&f);
    g_assert_true(av_hold_take(f.root, f.ops, f.state, 40, A100, &err));
    before = live_hold(&f);
    g_assert_false(scrub_after_holder_killed(&f, "{\"method\": \"vfio-zero\", \"bars\": [1]}", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_assert_nonnull(strstr(err->message, "scrub step 2 (vfio-zero) failed"));
    g_assert_nonnull(strstr(err->message, "was lost during its scrub"));
    g_assert_nonnull(strstr(err->message, "the hold is taken again"));
    g_assert_true(file_all(bar, 0xa5));
    g_assert_true(proc_wait_gone(before->pid));
    after = live_hold(&f);
    g_assert_cmpint(after->pid, !=, before->pid);
    fixture_close(&f);
}

/* The same before a "command" step: its program never runs (it would get
 * no group file, and the group would be anyone's). */
static void
test_scrub_hold_lost_command(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autofree char *marker = NULL;
    g_autofree char *second = NULL;

    fixture_open(&f);
    marker = g_build_filename(f.state, "ran", NULL);
    second = g_strdup_printf("{\"method\": \"command\", \"timeout\": 10, \"argv\": [\"/bin/sh\", \"-c\", "
                             "\"touch %s\"]}", marker);
    g_assert_false(scrub_after_holder_killed(&f, second, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_assert_nonnull(strstr(err->message, "scrub step 2 (command) failed"));
    g_assert_nonnull(strstr(err->message, "was lost during its scrub"));
    g_assert_false(g_file_test(marker, G_FILE_TEST_EXISTS));
    fixture_close(&f);
}

/* The same before a "reset" step: no reset by VFIO without the hold, and
 * none by sysfs instead. */
static void
test_scrub_hold_lost_reset(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autofree char *writes_path = NULL;
    g_autofree char *writes = NULL;

    fixture_open(&f);
    writes_path = g_build_filename(f.dir, "sys", ".accelvirt-fake-kernel.writes", NULL);
    g_assert_false(scrub_after_holder_killed(&f, "{\"method\": \"reset\"}", &err));
    g_assert_nonnull(strstr(err->message, "scrub step 2 (reset) failed"));
    g_assert_nonnull(strstr(err->message, "was lost during its scrub"));
    if (g_file_get_contents(writes_path, &writes, NULL, NULL))
        g_assert_null(strstr(writes, A100 "/reset "));
    fixture_close(&f);
}

/* A held target whose hold is gone when its scrub begins (a worker killed
 * after dropping it for a "vm" step, say): the scrub takes it again and
 * runs every step through it, from the first. */
static void
test_scrub_hold_retaken_at_start(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = a100_policy("[{\"method\": \"vfio-zero\", \"bars\": [1]}]");
    g_autoptr(AvHold) before = NULL;
    g_autoptr(AvHold) after = NULL;
    g_autofree char *bar = NULL;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };

    fixture_open(&f);
    bar = fill_bar(&f);
    target.hold_state_dir = f.state;
    g_assert_true(av_hold_take(f.root, f.ops, f.state, 40, A100, &err));
    before = live_hold(&f);
    g_assert_cmpint(kill(before->pid, SIGKILL), ==, 0);
    g_assert_true(proc_wait_gone(before->pid));
    g_assert_true(av_scrub_run(f.root, f.ops, av_policy_find(policy, "gpu-a100"), &target, NULL, &err));
    g_assert_no_error(err);
    g_assert_true(file_all(bar, 0));
    after = live_hold(&f);
    g_assert_cmpint(after->pid, !=, before->pid);
    fixture_close(&f);
}

/* A held target whose group another process has: no step runs. */
static void
test_scrub_unholdable(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = a100_policy("[{\"method\": \"vfio-zero\", \"bars\": [1]}]");
    g_autoptr(json_t) report = NULL;
    g_autofree char *bar = NULL;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    int fd = -1;

    fixture_open(&f);
    bar = fill_bar(&f);
    target.hold_state_dir = f.state;
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd), ==, 0);
    g_assert_false(av_scrub_run(f.root, f.ops, av_policy_find(policy, "gpu-a100"), &target, &report, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_IN_USE);
    g_assert_nonnull(strstr(err->message, "no scrub step ran"));
    g_assert_null(report);
    g_assert_true(file_all(bar, 0xa5));
    close(fd);
    fixture_close(&f);
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);
    g_test_add_func("/hold/group-open-busy", test_group_open_busy);
    g_test_add_func("/hold/take-drop-fd", test_take_drop_fd);
    g_test_add_func("/hold/take-busy-and-killed", test_take_busy_and_killed);
    g_test_add_func("/hold/detection-ignores-own", test_detection_ignores_own);
    g_test_add_func("/hold/zero-through-hold", test_zero_through_hold);
    g_test_add_func("/hold/command-keeps-hold", test_command_keeps_hold);
    g_test_add_func("/hold/holder-is-exec", test_holder_is_exec);
    g_test_add_func("/hold/holder-without-oom-capability", test_holder_without_oom_capability);
    g_test_add_func("/hold/holder-needs-word", test_holder_needs_word);
    g_test_add_func("/hold/lock-serialises", test_lock_serialises);
    g_test_add_func("/hold/concurrent-takes-and-drops", test_concurrent_takes_and_drops);
    g_test_add_func("/hold/stale-records", test_stale_records);
    g_test_add_func("/hold/record-of-another-user", test_record_of_another_user);
    g_test_add_func("/hold/scrub-hold-lost-zero", test_scrub_hold_lost_zero);
    g_test_add_func("/hold/scrub-hold-lost-command", test_scrub_hold_lost_command);
    g_test_add_func("/hold/scrub-hold-lost-reset", test_scrub_hold_lost_reset);
    g_test_add_func("/hold/scrub-hold-retaken-at-start", test_scrub_hold_retaken_at_start);
    g_test_add_func("/hold/scrub-unholdable", test_scrub_unholdable);
    return g_test_run();
}
