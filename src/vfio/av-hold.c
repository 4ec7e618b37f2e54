/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: kernel-enforced holds of VFIO groups (see av-hold.h).
 *
 * The holder is a process of this machine whatever the root prefix (a fake
 * tree's group file is a regular file the fake kernel flock()s), so its
 * liveness is read from the host's own /proc; holder detection
 * (av_hold_pids()) reads the /proc of the root it scans.  The boot id is
 * the root's, as the pool records it (a fake tree may set one to play a
 * reboot), else the host's. */
#include "config.h"

#include "av-hold.h"
#include "av-hold-private.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "util/av-error.h"
#include "util/av-file.h"
#include "util/av-json.h"
#include "vfio/av-vfio.h"

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

#ifndef AV_HOLD_PATH
#define AV_HOLD_PATH "/usr/libexec/accelvirt/accelvirt-hold"
#endif

/* See av-hold.h. */
char *
av_hold_program(void)
{
    const char *path = g_getenv("ACCELVIRT_HOLD");
    g_autofree char *self = NULL;
    g_autofree char *dir = NULL;
    g_autofree char *beside = NULL;

    if (path && *path)
        return g_strdup(path);
    self = g_file_read_link(AV_PROC_SELF_EXE, NULL);
    if (self && g_path_is_absolute(self)) {
        dir = g_path_get_dirname(self);
        beside = g_build_filename(dir, AV_HOLD_COMM, NULL);
        if (access(beside, X_OK) == 0)
            return g_steal_pointer(&beside);
    }
    return g_strdup(AV_HOLD_PATH);
}

/* The lock of @group's hold, @state_dir/holds/@group.lock (made, with its
 * directory, when missing), waited for at most AV_HOLD_LOCK_WAIT_MS.  NULL
 * with AV_ERROR_LOCKED when another process kept it that long: not
 * AV_ERROR_IN_USE, which says that a process other than accelvirt has the
 * group, and quarantines the device. */
static AvLock *
av_hold_lock(const char *state_dir, int group, GError **error)
{
    g_autofree char *dir = av_hold_dir(state_dir);
    g_autofree char *name = g_strdup_printf("%d.lock", group);
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autoptr(GError) local = NULL;
    AvLock *lock;

    if (!av_file_ensure_dir(dir, 0700, error))
        return NULL;
    lock = av_lock_take(path, AV_LOCK_EXCLUSIVE, AV_HOLD_LOCK_WAIT_MS, &local);
    if (lock)
        return lock;
    if (g_error_matches(local, AV_ERROR, AV_ERROR_LOCKED))
        g_set_error(error, AV_ERROR, AV_ERROR_LOCKED,
                    "the hold of IOMMU group %d is being taken or dropped by another accelvirt process (its lock "
                    "'%s' was not free within %d s); try again when it is done", group, path,
                    AV_HOLD_LOCK_WAIT_MS / 1000);
    else
        g_propagate_prefixed_error(error, g_steal_pointer(&local), "cannot lock the hold of IOMMU group %d: ",
                                   group);
    return NULL;
}

/* In the holder's process, between fork and exec: only async-signal-safe
 * calls (signal-safety(7)).  The group file to AV_HOLD_FD, the socket to
 * AV_HOLD_SOCKET_FD, /dev/null to 0, 1 and 2, every other descriptor
 * closed (whatever the taker had open without O_CLOEXEC: the pool's lock,
 * the group's lock, libvirtd's pipes to the hook), then the holder program
 * with an empty environment. */
static void G_GNUC_NORETURN
av_hold_exec(const char *program, char *group_arg, int group_fd, int sock, int devnull)
{
    char *argv[] = { (char *)AV_HOLD_COMM, group_arg, NULL };
    char *envp[] = { NULL };
    int g, s, n;

    /* Out of the way of 0 to AV_HOLD_SOCKET_FD first: a taker started
     * with fd 0, 1 or 2 closed may have one of them there. */
    g = fcntl(group_fd, F_DUPFD, AV_HOLD_SOCKET_FD + 16);
    s = fcntl(sock, F_DUPFD, AV_HOLD_SOCKET_FD + 16);
    n = fcntl(devnull, F_DUPFD, AV_HOLD_SOCKET_FD + 16);
    if (g < 0 || s < 0 || n < 0)
        _exit(127);
    if (dup2(n, STDIN_FILENO) < 0 || dup2(n, STDOUT_FILENO) < 0 || dup2(n, STDERR_FILENO) < 0 ||
        dup2(g, AV_HOLD_FD) < 0 || dup2(s, AV_HOLD_SOCKET_FD) < 0)
        _exit(127);
    if (syscall(SYS_close_range, AV_HOLD_SOCKET_FD + 1, ~0U, 0) < 0) {
        for (int fd = AV_HOLD_SOCKET_FD + 1; fd < 65536; fd++)
            close(fd);
    }
    /* No directory of the host kept busy (a state dir's mount). */
    if (chdir("/") < 0)
        _exit(127);
    execve(program, argv, envp);
    _exit(127);
}

/* Reads the holder's first word on @sock ("PID OOM\n"), waiting at most
 * AV_HOLD_START_WAIT_MS.  0, or -errno (-ECHILD: it ended first). */
static int
av_hold_read_report(int sock, int *ret_pid, int *ret_oom)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)AV_HOLD_START_WAIT_MS * 1000;
    char line[64];
    size_t len = 0;
    int pid = 0, oom = 0;
    char end = 0;

    while (len < sizeof(line) - 1 && (len == 0 || line[len - 1] != '\n')) {
        struct pollfd p = { .fd = sock, .events = POLLIN };
        gint64 left = (deadline - g_get_monotonic_time()) / 1000;
        ssize_t n;
        int r;

        if (left <= 0)
            return -ETIMEDOUT;
        r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -ETIMEDOUT;
        n = recv(sock, line + len, sizeof(line) - 1 - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -ECHILD;
        len += (size_t)n;
    }
    line[len] = '\0';
    if (sscanf(line, "%d %d%c", &pid, &oom, &end) != 3 || end != '\n' || pid <= 0)
        return -EPROTO;
    *ret_pid = pid;
    *ret_oom = oom;
    return 0;
}

/* Starts the holder program on @group_fd (borrowed: the holder gets its own
 * descriptor).  TRUE with its pid, the oom_score_adj it got, and in *ret_go
 * the taker's end of its socket (av_hold_spawn_go()); FALSE with @error,
 * and no holder left (its socket closed before its word ends it). */
static gboolean
av_hold_spawn(int group_fd, int group, int *ret_pid, int *ret_oom, int *ret_go, GError **error)
{
    g_autofree char *program = av_hold_program();
    char group_arg[16];
    int sock[2] = { -1, -1 };
    int devnull, status, r;
    pid_t child;

    if (access(program, X_OK) < 0)
        return av_error_errno(error, -errno, "cannot run the holder program '%s'", program);
    g_snprintf(group_arg, sizeof(group_arg), "%d", group);
    devnull = open(AV_DEV_NULL, O_RDWR | O_CLOEXEC);
    if (devnull < 0)
        return av_error_errno(error, -errno, "cannot open '%s'", AV_DEV_NULL);
    /* A socket, not a pipe: send(MSG_NOSIGNAL) to a holder that died
     * meanwhile fails instead of raising SIGPIPE in the taker. */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock) < 0) {
        r = -errno;
        close(devnull);
        return av_error_errno(error, r, "cannot make the socket to a holder");
    }
    child = fork();
    if (child == 0) {
        pid_t holder;

        /* A session of its own, then the holder as its child: this one
         * exits at once, so the holder goes to init and nobody waits. */
        close(sock[0]);
        if (setsid() < 0)
            _exit(1);
        holder = fork();
        if (holder < 0)
            _exit(1);
        if (holder == 0)
            av_hold_exec(program, group_arg, group_fd, sock[1], devnull);
        _exit(0);
    }
    r = child < 0 ? -errno : 0;
    close(sock[1]);
    close(devnull);
    if (r < 0) {
        close(sock[0]);
        return av_error_errno(error, r, "cannot fork the holder of IOMMU group %d", group);
    }
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    r = av_hold_read_report(sock[0], ret_pid, ret_oom);
    if (r < 0) {
        close(sock[0]);
        return av_error_errno(error, r, "the holder '%s' of IOMMU group %d did not start", program, group);
    }
    *ret_go = sock[0];
    return TRUE;
}

/* Gives the holder behind @go the word that its hold is recorded, and
 * waits (at most AV_HOLD_START_WAIT_MS) for its answer that it holds.
 * Closes @go.  FALSE when it did not answer. */
static gboolean
av_hold_spawn_go(int go)
{
    struct pollfd p = { .fd = go, .events = POLLIN };
    char word = AV_HOLD_WORD_GO, answer = 0;
    gboolean ok = FALSE;
    int r;

    if (send(go, &word, 1, MSG_NOSIGNAL) == 1) {
        while ((r = poll(&p, 1, AV_HOLD_START_WAIT_MS)) < 0 && errno == EINTR)
            ;
        ok = r == 1 && recv(go, &answer, 1, MSG_DONTWAIT) == 1 && answer == AV_HOLD_WORD_READY;
    }
    close(go);
    return ok;
}

static char *
av_hold_now_iso(void)
{
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();

    return g_date_time_format(now, "%Y-%m-%dT%H:%M:%SZ");
}

/* Sends @sig to the holder @hold when its process is still that holder,
 * and waits up to @wait_ms for it to go.  TRUE when it is gone. */
static gboolean
av_hold_stop(const AvHold *hold, int sig, int wait_ms)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)wait_ms * 1000;

    if (!av_hold_process_matches(hold))
        return TRUE;
    if (kill(hold->pid, sig) < 0 && errno == ESRCH)
        return TRUE;
    while (av_hold_process_matches(hold)) {
        if (g_get_monotonic_time() >= deadline)
            return FALSE;
        g_usleep(10 * 1000);
    }
    return TRUE;
}

/* SIGTERM to @hold's holder, SIGKILL when it would not go.  FALSE with
 * @error when it still runs. */
static gboolean
av_hold_end(const AvHold *hold, GError **error)
{
    if (av_hold_stop(hold, SIGTERM, AV_HOLD_DROP_WAIT_MS) || av_hold_stop(hold, SIGKILL, AV_HOLD_DROP_WAIT_MS))
        return TRUE;
    g_set_error(error, AV_ERROR, AV_ERROR_IN_USE, "holder %d of IOMMU group %d did not stop", hold->pid, hold->group);
    return FALSE;
}

/* TRUE when the PCI device @address is in IOMMU group @group now (its
 * sysfs "iommu_group" link, Documentation/ABI/testing/sysfs-kernel-
 * iommu_groups); else FALSE with AV_ERROR_UNSAFE naming both. */
static gboolean
av_hold_group_is_current(const AvRoot *root, int group, const char *address, GError **error)
{
    g_autofree char *link = av_sys_path("bus/pci/devices/%s/iommu_group", address);
    g_autofree char *name = NULL;
    guint64 now = 0;

    if (av_root_link_name(root, link, &name) < 0 || !g_ascii_string_to_unsigned(name, 10, 0, G_MAXINT, &now, NULL)) {
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "cannot hold IOMMU group %d of '%s': the device has no IOMMU group now; nothing held "
                    "('accelvirt reconcile' puts the pool right)", group, address);
        return FALSE;
    }
    if ((int)now != group) {
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "cannot hold IOMMU group %d of '%s': the device is in IOMMU group %d now; nothing held "
                    "('accelvirt reconcile' puts the pool right)", group, address, (int)now);
        return FALSE;
    }
    return TRUE;
}

/* Under @group's lock, with no live hold recorded: starts a holder of
 * @group_fd (borrowed), records it (this boot's @boot_id), then gives it
 * the word.  FALSE with @error and no holder left running without a
 * record. */
static gboolean
av_hold_start(const char *state_dir, int group, const char *address, int group_fd, const char *boot_id,
              GError **error)
{
    g_autofree char *path = av_hold_path(state_dir, group);
    g_autoptr(AvHold) hold = g_new0(AvHold, 1);
    g_autoptr(AvRoot) host = av_root_new("/", error);
    g_autoptr(json_t) record = NULL;
    g_autofree char *text = NULL;
    int go = -1, r;

    if (!host)
        return FALSE;
    hold->group = group;
    hold->boot_id = g_strdup(boot_id);
    hold->address = g_strdup(address);
    hold->since = av_hold_now_iso();
    if (!av_hold_spawn(group_fd, group, &hold->pid, &hold->oom_score_adj, &go, error))
        return FALSE;
    /* Its word came after its exec: its start time, its name and its user
     * are those of the holder now. */
    r = av_hold_proc_stat(host, hold->pid, &hold->start_time, NULL);
    if (r < 0) {
        close(go);
        return av_error_errno(error, r, "cannot read the start time of holder %d of IOMMU group %d", hold->pid,
                              group);
    }
    if (!av_hold_proc_is_holder(host, hold->pid, hold->start_time)) {
        close(go);
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "process %d, started for IOMMU group %d, is not an %s of "
                    "uid %u", hold->pid, group, AV_HOLD_COMM, (unsigned)geteuid());
        return FALSE;
    }
    record = json_pack("{s:i, s:I, s:s, s:i, s:o, s:s, s:i}", "pid", hold->pid, "start_time",
                       (json_int_t)hold->start_time, "boot_id", boot_id, "group", group, "address",
                       av_json_string_or_null(address), "since", hold->since, "oom_score_adj", hold->oom_score_adj);
    text = av_json_dump_pretty(record);
    if (!av_file_write_atomic(path, text, strlen(text), 0600, error)) {
        close(go);
        g_prefix_error(error, "cannot record the hold of IOMMU group %d: ", group);
        return FALSE;
    }
    if (av_hold_spawn_go(go))
        return TRUE;
    /* It got the word or not: it must not hold on without the record that
     * this call removes. */
    if (av_hold_stop(hold, SIGKILL, AV_HOLD_DROP_WAIT_MS))
        unlink(path);
    g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "holder %d of IOMMU group %d did not answer its start", hold->pid,
                group);
    return FALSE;
}

/* The part of a take under @group's lock: a live hold is kept; else the
 * group is opened with @ops (or @group_fd, borrowed, is used when >= 0)
 * and held. */
static gboolean
av_hold_take_locked(const AvRoot *root, const AvKernelOps *ops, const char *state_dir, int group,
                    const char *address, int group_fd, gboolean name_holder, GError **error)
{
    g_autoptr(AvHold) hold = NULL;
    g_autofree char *boot_id = NULL;
    gboolean ok;
    int fd = -1, r;

    r = av_hold_boot_id(root, &boot_id);
    if (r < 0)
        return av_error_errno(error, r, "cannot hold IOMMU group %d: this boot's id cannot be read", group);
    if (!av_hold_read(state_dir, group, &hold, error))
        return FALSE;
    if (hold && av_hold_is_live(hold, boot_id))
        return TRUE;
    if (group_fd >= 0)
        return av_hold_start(state_dir, group, address, group_fd, boot_id, error);
    r = ops->group_open(root, group, &fd);
    if (r == -EBUSY) {
        g_autofree char *who = name_holder ? av_vfio_group_holder(root, group) : NULL;

        g_set_error(error, AV_ERROR, AV_ERROR_IN_USE,
                    "cannot hold IOMMU group %d of '%s': the group is open in another process (%s)", group,
                    address ? address : "?", who ? who : "unknown: the kernel says it is busy");
        return FALSE;
    }
    if (r < 0)
        return av_error_errno(error, r, "cannot hold IOMMU group %d of '%s'", group, address ? address : "?");
    ok = av_hold_start(state_dir, group, address, fd, boot_id, error);
    close(fd);
    return ok;
}

/* av_hold_take(), av_hold_take_quick() and av_hold_take_fd(): the checks,
 * then the group's lock. */
static gboolean
av_hold_take_full(const AvRoot *root, const AvKernelOps *ops, const char *state_dir, int group, const char *address,
                  int group_fd, gboolean name_holder, GError **error)
{
    g_autoptr(AvLock) lock = NULL;

    g_return_val_if_fail(root && state_dir, FALSE);
    if (group < 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "device '%s' has no IOMMU group to hold",
                    address ? address : "?");
        return FALSE;
    }
    if (group_fd < 0 && (!ops || !ops->group_open)) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "the '%s' kernel table cannot open VFIO groups",
                    ops ? ops->name : "(none)");
        return FALSE;
    }
    /* The group the pool recorded must be the device's group now: a stale
     * number (VFs made again, a rescan) would leave the device unheld and
     * hold another device's group, maybe one the host uses. */
    if (address && !av_hold_group_is_current(root, group, address, error))
        return FALSE;
    lock = av_hold_lock(state_dir, group, error);
    if (!lock)
        return FALSE;
    return av_hold_take_locked(root, ops, state_dir, group, address, group_fd, name_holder, error);
}

/* See av-hold.h. */
gboolean
av_hold_take(const AvRoot *root, const AvKernelOps *ops, const char *state_dir, int group, const char *address,
             GError **error)
{
    return av_hold_take_full(root, ops, state_dir, group, address, -1, TRUE, error);
}

/* See av-hold.h. */
gboolean
av_hold_take_quick(const AvRoot *root, const AvKernelOps *ops, const char *state_dir, int group,
                   const char *address, GError **error)
{
    return av_hold_take_full(root, ops, state_dir, group, address, -1, FALSE, error);
}

/* See av-hold.h. */
gboolean
av_hold_take_fd(const AvRoot *root, const char *state_dir, int group, const char *address, int group_fd,
                GError **error)
{
    if (group_fd < 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "no file of IOMMU group %d to hold", group);
        return FALSE;
    }
    return av_hold_take_full(root, NULL, state_dir, group, address, group_fd, TRUE, error);
}

/* See av-hold.h. */
gboolean
av_hold_drop(const AvRoot *root, const char *state_dir, int group, GError **error)
{
    g_autofree char *path = av_hold_path(state_dir, group);
    g_autofree char *boot_id = NULL;
    g_autoptr(AvHold) hold = NULL;
    g_autoptr(AvLock) lock = NULL;

    /* Nothing recorded: nothing to drop, and no directory made for it. */
    if (!g_file_test(path, G_FILE_TEST_EXISTS))
        return TRUE;
    lock = av_hold_lock(state_dir, group, error);
    if (!lock || !av_hold_read(state_dir, group, &hold, error))
        return FALSE;
    if (!hold)
        return TRUE;
    boot_id = av_hold_boot_id_or_null(root);
    if ((av_hold_is_live(hold, boot_id) || av_hold_is_legacy_live(hold)) && !av_hold_end(hold, error))
        return FALSE;
    if (unlink(path) < 0 && errno != ENOENT)
        return av_error_errno(error, -errno, "cannot remove the hold record '%s'", path);
    return TRUE;
}

/* See av-hold.h. */
gboolean
av_hold_prune(const AvRoot *root, const char *state_dir, guint *ret_removed, GError **error)
{
    g_autoptr(GArray) groups = av_hold_list_groups(state_dir);
    g_autofree char *boot_id = av_hold_boot_id_or_null(root);
    g_autoptr(GString) problems = g_string_new(NULL);
    guint removed = 0;

    for (guint i = 0; i < groups->len; i++) {
        int group = g_array_index(groups, int, i);
        g_autofree char *path = av_hold_path(state_dir, group);
        g_autoptr(GError) local = NULL;
        g_autoptr(AvHold) hold = NULL;
        g_autoptr(AvLock) lock = av_hold_lock(state_dir, group, &local);

        if (!lock || !av_hold_read(state_dir, group, &hold, &local)) {
            g_string_append_printf(problems, "%s%s", problems->len ? "; " : "", local->message);
            continue;
        }
        /* Without this boot's id nothing can be told live: nothing goes. */
        if (!hold || !boot_id || av_hold_is_live(hold, boot_id))
            continue;
        if (av_hold_is_legacy_live(hold) && !av_hold_end(hold, &local)) {
            g_string_append_printf(problems, "%s%s", problems->len ? "; " : "", local->message);
            continue;
        }
        if (unlink(path) < 0 && errno != ENOENT) {
            g_string_append_printf(problems, "%scannot remove the hold record '%s': %s", problems->len ? "; " : "",
                                   path, g_strerror(errno));
            continue;
        }
        removed++;
    }
    if (ret_removed)
        *ret_removed = removed;
    if (!boot_id && groups->len > 0)
        g_string_append_printf(problems, "%sthis boot's id cannot be read: no hold record can be told live",
                               problems->len ? "; " : "");
    if (problems->len > 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot remove the stale hold records of '%s': %s", state_dir,
                    problems->str);
        return FALSE;
    }
    return TRUE;
}

/* See av-hold.h. */
gboolean
av_hold_fd(const AvRoot *root, const char *state_dir, int group, int *ret_fd, GError **error)
{
    g_autoptr(AvHold) hold = NULL;
    g_autofree char *boot_id = NULL;
    int pidfd, fd, saved;

    if (!av_hold_get(root, state_dir, group, &hold, error))
        return FALSE;
    if (!hold) {
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND, "IOMMU group %d has no live accelvirt holder", group);
        return FALSE;
    }
    pidfd = (int)syscall(SYS_pidfd_open, hold->pid, 0);
    if (pidfd < 0)
        return av_error_errno(error, -errno, "cannot open holder %d of IOMMU group %d", hold->pid, group);
    /* The pid may have been reused between the check and pidfd_open: check
     * again now that the pidfd pins the process. */
    boot_id = av_hold_boot_id_or_null(root);
    if (!av_hold_is_live(hold, boot_id)) {
        close(pidfd);
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND, "holder %d of IOMMU group %d is gone", hold->pid, group);
        return FALSE;
    }
    fd = (int)syscall(SYS_pidfd_getfd, pidfd, AV_HOLD_FD, 0);
    saved = errno;
    close(pidfd);
    if (fd < 0)
        return av_error_errno(error, -saved, "cannot take the group file of holder %d of IOMMU group %d",
                              hold->pid, group);
    *ret_fd = fd;
    return TRUE;
}
