/* accelvirt tests: kernel-enforced holds of VFIO groups (issue 14,
 * src/vfio/av-hold.h) on a private copy of a fake host: the fake kernel's
 * "one open file of a group", real holder processes taken, used and
 * dropped, holder detection that ignores accelvirt's own holders and no
 * other process, and vfio-zero through a held group.  Every holder a test
 * starts is dropped (or killed) before it ends. */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "av-test.h"
#include "policy/av-policy.h"
#include "scrub/av-scrub.h"
#include "util/av-error.h"
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
    g_assert_true(av_vfio_bind(f->root, f->ops, A100, &orig, &err));
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

    g_assert_true(av_hold_get(f->state, 40, &hold, &err));
    g_assert_no_error(err);
    g_assert_nonnull(hold);
    return hold;
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

/* A group another process has open is not held: BUSY, naming why, and
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
    g_assert_error(err, AV_ERROR, AV_ERROR_BUSY);
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
    g_assert_true(av_hold_get(f.state, 40, &none, &err));
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

/* /proc/@pid of the fake tree: a stat with @start_time, an fd on
 * /dev/vfio/40, empty maps. */
static void
fake_process(Fixture *f, const char *pid, const char *comm, guint64 start_time)
{
    g_autofree char *stat = g_strdup_printf("%s (%s) S 1 %s %s 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %" G_GUINT64_FORMAT
                                            " 0 0\n", pid, comm, pid, pid, start_time);
    g_autofree char *stat_rel = g_strdup_printf("proc/%s/stat", pid);
    g_autofree char *maps_rel = g_strdup_printf("proc/%s/maps", pid);
    g_autofree char *fd_rel = g_strdup_printf("proc/%s/fd/3", pid);

    av_test_write(f->dir, stat_rel, stat);
    av_test_write(f->dir, maps_rel, "");
    av_test_symlink(f->dir, fd_rel, "/dev/vfio/40");
}

/* A hold record of group 40 naming @pid and @start_time. */
static void
fake_record(Fixture *f, int pid, guint64 start_time)
{
    g_autofree char *text = g_strdup_printf("{\"pid\": %d, \"start_time\": %" G_GUINT64_FORMAT ", \"group\": 40, "
                                            "\"address\": \"" A100 "\", \"since\": \"2026-01-01T00:00:00Z\"}\n",
                                            pid, start_time);

    av_test_write(f->state, "holds/40.json", text);
}

/* Holder detection: accelvirt's own holder (recorded, same start time) is
 * no holder for av_vfio_group_holder_full(); any other process is, and so
 * is a recorded pid whose start time differs (the pid was reused). */
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
    g_autoptr(GHashTable) pids = NULL;

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
    g_assert_error(err, AV_ERROR, AV_ERROR_BUSY);
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
    return g_test_run();
}
