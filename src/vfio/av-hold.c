/* accelvirt: kernel-enforced holds of VFIO groups (see av-hold.h).
 *
 * The holder is a process of this machine whatever the root prefix (a fake
 * tree's group file is a regular file the fake kernel flock()s), so its
 * liveness is read from the host's own /proc; holder detection
 * (av_hold_pids()) reads the /proc of the root it scans. */
#include "config.h"

#include "av-hold.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
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

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

void
av_hold_free(AvHold *hold)
{
    if (!hold)
        return;
    g_free(hold->address);
    g_free(hold->since);
    g_free(hold);
}

static char *
av_hold_dir(const char *state_dir)
{
    return g_build_filename(state_dir, "holds", NULL);
}

static char *
av_hold_path(const char *state_dir, int group)
{
    g_autofree char *name = g_strdup_printf("%d.json", group);

    return g_build_filename(state_dir, "holds", name, NULL);
}

/* The start time (field 22) and name of process @pid under @root's /proc.
 * Returns 0, or -errno (-ESRCH: no such process, or a zombie, which holds
 * no file any more). */
static int
av_hold_proc_stat(const AvRoot *root, int pid, guint64 *ret_start, char **ret_comm)
{
    g_autofree char *path = av_proc_path("%d/stat", pid);
    g_autofree char *text = NULL;
    g_auto(GStrv) fields = NULL;
    char *open_paren, *close_paren;
    guint64 start;
    int r;

    r = av_root_read_file(root, path, &text, NULL);
    if (r < 0)
        return r == -ENOENT ? -ESRCH : r;
    /* proc(5): "PID (COMM) STATE ..."; COMM may hold blanks and parens. */
    open_paren = strchr(text, '(');
    close_paren = strrchr(text, ')');
    if (!open_paren || !close_paren || close_paren < open_paren)
        return -EINVAL;
    fields = g_strsplit_set(g_strstrip(close_paren + 1), " ", -1);
    /* fields[0] is field 3 (state), fields[19] field 22 (starttime). */
    if (g_strv_length(fields) < 20 || !g_ascii_string_to_unsigned(fields[19], 10, 0, G_MAXUINT64, &start, NULL))
        return -EINVAL;
    if (g_str_equal(fields[0], "Z") || g_str_equal(fields[0], "X"))
        return -ESRCH;
    if (ret_comm)
        *ret_comm = g_strndup(open_paren + 1, close_paren - open_paren - 1);
    *ret_start = start;
    return 0;
}

/* TRUE when the process of @hold is still that holder on this machine: its
 * start time and name agree. */
static gboolean
av_hold_is_live(const AvHold *hold)
{
    g_autoptr(AvRoot) host = av_root_new("/", NULL);
    g_autofree char *comm = NULL;
    guint64 start;

    if (!host || hold->pid <= 0 || av_hold_proc_stat(host, hold->pid, &start, &comm) < 0)
        return FALSE;
    return start == hold->start_time && g_str_equal(comm, AV_HOLD_COMM);
}

/* Reads the record of @group.  TRUE and NULL when there is none. */
static gboolean
av_hold_read(const char *state_dir, int group, AvHold **ret_hold, GError **error)
{
    g_autofree char *path = av_hold_path(state_dir, group);
    g_autoptr(json_t) root = NULL;
    g_autoptr(AvHold) hold = NULL;
    json_error_t jerr;
    json_int_t pid = 0, start = -1, recorded_group = -1;
    const char *address = NULL, *since = NULL;

    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        *ret_hold = NULL;
        return TRUE;
    }
    root = json_load_file(path, 0, &jerr);
    if (!root || json_unpack(root, "{s:I, s:I, s:I, s?s, s?s}", "pid", &pid, "start_time", &start, "group",
                             &recorded_group, "address", &address, "since", &since) < 0 ||
        pid <= 0 || pid > G_MAXINT || start < 0 || recorded_group != group) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE, "the hold record '%s' is not valid%s%s", path,
                    root ? "" : ": ", root ? "" : jerr.text);
        return FALSE;
    }
    hold = g_new0(AvHold, 1);
    hold->group = group;
    hold->pid = (int)pid;
    hold->start_time = (guint64)start;
    hold->address = g_strdup(address);
    hold->since = g_strdup(since);
    *ret_hold = g_steal_pointer(&hold);
    return TRUE;
}

/* See av-hold.h. */
gboolean
av_hold_get(const char *state_dir, int group, AvHold **ret_hold, GError **error)
{
    g_autoptr(AvHold) hold = NULL;

    if (!av_hold_read(state_dir, group, &hold, error))
        return FALSE;
    if (hold && !av_hold_is_live(hold))
        g_clear_pointer(&hold, av_hold_free);
    *ret_hold = g_steal_pointer(&hold);
    return TRUE;
}

static gint
av_hold_compare_int(gconstpointer a, gconstpointer b)
{
    return *(const int *)a - *(const int *)b;
}

/* See av-hold.h. */
GArray *
av_hold_list_groups(const char *state_dir)
{
    g_autofree char *dir_path = av_hold_dir(state_dir);
    g_autoptr(GDir) dir = g_dir_open(dir_path, 0, NULL);
    GArray *groups = g_array_new(FALSE, FALSE, sizeof(int));
    const char *name;

    while (dir && (name = g_dir_read_name(dir))) {
        g_autofree char *stem = NULL;
        guint64 n;

        if (!g_str_has_suffix(name, ".json"))
            continue;
        stem = g_strndup(name, strlen(name) - strlen(".json"));
        if (g_ascii_string_to_unsigned(stem, 10, 0, G_MAXINT, &n, NULL)) {
            int group = (int)n;

            g_array_append_val(groups, group);
        }
    }
    g_array_sort(groups, av_hold_compare_int);
    return groups;
}

/* The holder, after the second fork: only async-signal-safe calls
 * (signal-safety(7)).  Tells its pid through @report_w once it is named,
 * then waits on the socket @go_r for the taker's word that the hold is
 * recorded: the socket closing without it (the taker failed, or was
 * killed) ends the holder, so that no hold lives without a record to drop
 * it by.  Then keeps @group_fd as AV_HOLD_FD and nothing else, answers
 * that it is ready, and waits for SIGTERM. */
static void G_GNUC_NORETURN
av_hold_holder_main(int group_fd, int report_w, int go_r, int go_w, int devnull)
{
    sigset_t none;
    pid_t self = getpid();
    ssize_t n;
    char word = 0;

    (void)prctl(PR_SET_NAME, AV_HOLD_COMM, 0, 0, 0);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    close(go_w);
    /* Out of the way of 0 to AV_HOLD_FD first: a taker started with fd 0,
     * 1 or 2 closed may have got the group file or a pipe there, which the
     * dup2()s below would close.  Without /dev/null the holder would keep
     * the taker's stdout and stderr (libvirtd's pipes to the hook, which
     * it waits on until they close): it gives up instead. */
    group_fd = fcntl(group_fd, F_DUPFD, AV_HOLD_FD + 16);
    report_w = fcntl(report_w, F_DUPFD, AV_HOLD_FD + 16);
    go_r = fcntl(go_r, F_DUPFD, AV_HOLD_FD + 16);
    if (group_fd < 0 || report_w < 0 || go_r < 0 || devnull < 0)
        _exit(1);
    dup2(devnull, STDIN_FILENO);
    dup2(devnull, STDOUT_FILENO);
    dup2(devnull, STDERR_FILENO);
    if (write(report_w, &self, sizeof(self)) != sizeof(self))
        _exit(1);
    while ((n = read(go_r, &word, 1)) < 0 && errno == EINTR)
        ;
    if (n != 1 || word != 'g')
        _exit(0);
    /* The socket above AV_HOLD_FD, the group file to it, then "ready":
     * from then on pidfd_getfd(AV_HOLD_FD) gets the group file. */
    go_r = fcntl(go_r, F_DUPFD, AV_HOLD_FD + 1);
    if (go_r < 0 || (group_fd != AV_HOLD_FD && dup2(group_fd, AV_HOLD_FD) < 0))
        _exit(1);
    if (send(go_r, "r", 1, MSG_NOSIGNAL) != 1)
        _exit(1);
    if (syscall(SYS_close_range, AV_HOLD_FD + 1, ~0U, 0) < 0) {
        for (int fd = AV_HOLD_FD + 1; fd < 65536; fd++)
            close(fd);
    }
    for (;;)
        pause();
}

/* Starts the holder of @group_fd.  Returns its pid (> 0) and in *ret_go
 * the socket to give it the word on (av_hold_spawn_go()), or -errno.
 * @group_fd stays the caller's. */
static int
av_hold_spawn(int group_fd, int *ret_go)
{
    int report[2] = { -1, -1 }, go[2] = { -1, -1 };
    int devnull = open(AV_DEV_NULL, O_RDWR | O_CLOEXEC);
    pid_t child = -1, holder = 0;
    ssize_t n = 0;
    int status, r = 0;

    /* The word goes over a socket: send(MSG_NOSIGNAL) to a holder that
     * died meanwhile fails instead of raising SIGPIPE in the taker. */
    if (pipe2(report, O_CLOEXEC) < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) < 0)
        r = -errno;
    else if ((child = fork()) < 0)
        r = -errno;
    else if (child == 0) {
        /* A session of its own, then the holder as its child: this one
         * exits at once, so the holder goes to init and nobody waits. */
        close(report[0]);
        if (setsid() < 0)
            _exit(1);
        child = fork();
        if (child < 0)
            _exit(1);
        if (child == 0)
            av_hold_holder_main(group_fd, report[1], go[0], go[1], devnull);
        _exit(0);
    }
    if (report[1] >= 0)
        close(report[1]);
    if (go[0] >= 0)
        close(go[0]);
    if (devnull >= 0)
        close(devnull);
    if (child > 0) {
        while (waitpid(child, &status, 0) < 0 && errno == EINTR)
            ;
        while ((n = read(report[0], &holder, sizeof(holder))) < 0 && errno == EINTR)
            ;
        if (n != sizeof(holder) || holder <= 0)
            r = -ECHILD;
    }
    if (report[0] >= 0)
        close(report[0]);
    if (r < 0) {
        if (go[1] >= 0)
            close(go[1]);
        return r;
    }
    *ret_go = go[1];
    return (int)holder;
}

/* Gives the holder behind @go the word that its hold is recorded (@ok),
 * and waits for its answer that it holds the group file as AV_HOLD_FD; or
 * lets it end (!@ok).  Closes @go.  FALSE when the holder did not answer
 * (it is gone). */
static gboolean
av_hold_spawn_go(int go, gboolean ok)
{
    char answer = 0;
    ssize_t n = 0;

    if (ok && send(go, "g", 1, MSG_NOSIGNAL) != 1)
        ok = FALSE;
    while (ok && (n = recv(go, &answer, 1, 0)) < 0 && errno == EINTR)
        ;
    if (ok && (n != 1 || answer != 'r'))
        ok = FALSE;
    close(go);
    return ok;
}

static char *
av_hold_now_iso(void)
{
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();

    return g_date_time_format(now, "%Y-%m-%dT%H:%M:%SZ");
}

/* Sends @sig to the holder @hold when it is still that holder, and waits
 * up to @wait_ms for it to go.  TRUE when it is gone. */
static gboolean
av_hold_stop(const AvHold *hold, int sig, int wait_ms)
{
    gint64 deadline = g_get_monotonic_time() + (gint64)wait_ms * 1000;

    if (!av_hold_is_live(hold))
        return TRUE;
    if (kill(hold->pid, sig) < 0 && errno == ESRCH)
        return TRUE;
    while (av_hold_is_live(hold)) {
        if (g_get_monotonic_time() >= deadline)
            return FALSE;
        g_usleep(10 * 1000);
    }
    return TRUE;
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

static gboolean av_hold_take_full(const AvRoot *root, const AvKernelOps *ops, const char *state_dir, int group,
                                  const char *address, gboolean name_holder, GError **error);

/* See av-hold.h. */
gboolean
av_hold_take(const AvRoot *root, const AvKernelOps *ops, const char *state_dir, int group, const char *address,
             GError **error)
{
    return av_hold_take_full(root, ops, state_dir, group, address, TRUE, error);
}

/* See av-hold.h. */
gboolean
av_hold_take_quick(const AvRoot *root, const AvKernelOps *ops, const char *state_dir, int group,
                   const char *address, GError **error)
{
    return av_hold_take_full(root, ops, state_dir, group, address, FALSE, error);
}

static gboolean
av_hold_take_full(const AvRoot *root, const AvKernelOps *ops, const char *state_dir, int group, const char *address,
                  gboolean name_holder, GError **error)
{
    g_autofree char *dir = av_hold_dir(state_dir);
    g_autofree char *path = av_hold_path(state_dir, group);
    g_autoptr(AvHold) hold = NULL;
    g_autoptr(AvRoot) host = NULL;
    g_autoptr(json_t) record = NULL;
    g_autofree char *text = NULL;
    int fd = -1, go = -1, pid, r;

    g_return_val_if_fail(root && ops && state_dir, FALSE);
    if (group < 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "device '%s' has no IOMMU group to hold",
                    address ? address : "?");
        return FALSE;
    }
    if (!ops->group_open) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "the '%s' kernel table cannot open VFIO groups", ops->name);
        return FALSE;
    }
    /* The group the pool recorded must be the device's group now: a stale
     * number (VFs made again, a rescan) would leave the device unheld and
     * hold another device's group, maybe one the host uses. */
    if (address && !av_hold_group_is_current(root, group, address, error))
        return FALSE;
    if (!av_hold_get(state_dir, group, &hold, error))
        return FALSE;
    if (hold)
        return TRUE;
    if (!av_file_ensure_dir(dir, 0700, error))
        return FALSE;
    r = ops->group_open(root, group, &fd);
    if (r == -EBUSY) {
        g_autofree char *who = name_holder ? av_vfio_group_holder(root, group) : NULL;

        g_set_error(error, AV_ERROR, AV_ERROR_BUSY,
                    "cannot hold IOMMU group %d of '%s': the group is open in another process (%s)", group,
                    address ? address : "?", who ? who : "unknown: the kernel says it is busy");
        return FALSE;
    }
    if (r < 0)
        return av_error_errno(error, r, "cannot hold IOMMU group %d of '%s'", group, address ? address : "?");
    pid = av_hold_spawn(fd, &go);
    close(fd);
    if (pid < 0)
        return av_error_errno(error, pid, "cannot start the holder of IOMMU group %d", group);
    hold = g_new0(AvHold, 1);
    hold->group = group;
    hold->pid = pid;
    hold->address = g_strdup(address);
    hold->since = av_hold_now_iso();
    host = av_root_new("/", NULL);
    r = host ? av_hold_proc_stat(host, pid, &hold->start_time, NULL) : -ENOMEM;
    if (r < 0) {
        av_hold_spawn_go(go, FALSE);
        return av_error_errno(error, r, "cannot read the start time of holder %d of IOMMU group %d", pid, group);
    }
    record = json_pack("{s:i, s:I, s:i, s:o, s:s}", "pid", pid, "start_time", (json_int_t)hold->start_time,
                       "group", group, "address", av_json_string_or_null(address), "since", hold->since);
    text = av_json_dump_pretty(record);
    if (!av_file_write_atomic(path, text, strlen(text), 0600, error)) {
        av_hold_spawn_go(go, FALSE);
        g_prefix_error(error, "cannot record the hold of IOMMU group %d: ", group);
        return FALSE;
    }
    if (!av_hold_spawn_go(go, TRUE)) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "holder %d of IOMMU group %d ended before its start", pid,
                    group);
        return FALSE;
    }
    return TRUE;
}

/* See av-hold.h. */
gboolean
av_hold_drop(const AvRoot *root, const char *state_dir, int group, GError **error)
{
    g_autofree char *path = av_hold_path(state_dir, group);
    g_autoptr(AvHold) hold = NULL;

    (void)root;
    if (!av_hold_read(state_dir, group, &hold, error))
        return FALSE;
    if (!hold)
        return TRUE;
    if (!av_hold_stop(hold, SIGTERM, AV_HOLD_DROP_WAIT_MS) && !av_hold_stop(hold, SIGKILL, AV_HOLD_DROP_WAIT_MS)) {
        g_set_error(error, AV_ERROR, AV_ERROR_BUSY, "holder %d of IOMMU group %d did not stop", hold->pid, group);
        return FALSE;
    }
    if (unlink(path) < 0 && errno != ENOENT)
        return av_error_errno(error, -errno, "cannot remove the hold record '%s'", path);
    return TRUE;
}

/* See av-hold.h. */
gboolean
av_hold_fd(const AvRoot *root, const char *state_dir, int group, int *ret_fd, GError **error)
{
    g_autoptr(AvHold) hold = NULL;
    int pidfd, fd, saved;

    (void)root;
    if (!av_hold_get(state_dir, group, &hold, error))
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
    if (!av_hold_is_live(hold)) {
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

/* See av-hold.h. */
GHashTable *
av_hold_pids(const AvRoot *root, const char *state_dir)
{
    GHashTable *pids = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(GArray) groups = NULL;

    if (!state_dir)
        return pids;
    groups = av_hold_list_groups(state_dir);
    for (guint i = 0; i < groups->len; i++) {
        g_autoptr(AvHold) hold = NULL;
        g_autofree char *comm = NULL;
        guint64 start;

        if (!av_hold_read(state_dir, g_array_index(groups, int, i), &hold, NULL) || !hold)
            continue;
        /* The recorded start time and the holder's name: a pid reused by
         * another process (a QEMU) is never taken for accelvirt's. */
        if (av_hold_proc_stat(root, hold->pid, &start, &comm) == 0 && start == hold->start_time &&
            g_strcmp0(comm, AV_HOLD_COMM) == 0)
            g_hash_table_add(pids, g_strdup_printf("%d", hold->pid));
    }
    return pids;
}
