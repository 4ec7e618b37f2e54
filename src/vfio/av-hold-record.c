/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the records of the holds of VFIO groups (see av-hold.h):
 * STATE_DIR/holds/N.json read back, and whether the process a record names
 * is still its holder; the pids of the live holders, which the search for a
 * group's holder (av-vfio.c) leaves out.  Taking and dropping a hold is
 * av-hold.c, which stands above av-vfio.c (it names a group's other
 * holder); these records stand below both. */
#include "config.h"

#include "av-hold.h"
#include "av-hold-private.h"

#include <errno.h>
#include <string.h>

#include <jansson.h>

#include "util/av-error.h"
#include "util/av-json.h"

void
av_hold_free(AvHold *hold)
{
    if (!hold)
        return;
    g_free(hold->boot_id);
    g_free(hold->address);
    g_free(hold->since);
    g_free(hold);
}

char *
av_hold_dir(const char *state_dir)
{
    return g_build_filename(state_dir, "holds", NULL);
}

char *
av_hold_path(const char *state_dir, int group)
{
    g_autofree char *name = g_strdup_printf("%d.json", group);

    return g_build_filename(state_dir, "holds", name, NULL);
}

/* See av-hold.h. */
int
av_hold_boot_id(const AvRoot *root, char **ret_boot_id)
{
    g_autoptr(AvRoot) host = NULL;
    int r;

    r = av_root_boot_id(root, ret_boot_id);
    if (r != -ENOENT || av_root_is_host(root))
        return r;
    host = av_root_new("/", NULL);
    return host ? av_root_boot_id(host, ret_boot_id) : -ENOMEM;
}

/* The start time (field 22) and name of process @pid under @root's /proc.
 * Returns 0, or -errno (-ESRCH: no such process, or a zombie, which holds
 * no file any more). */
int
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

/* TRUE when every uid of process @pid under @root's /proc (the "Uid:"
 * line of /proc/PID/status, proc(5): real, effective, saved and
 * filesystem) is the user accelvirt runs as.  A holder is started by
 * accelvirt and never changes users; another user's process that happens
 * to have a recorded pid, start time and name is no holder. */
static gboolean
av_hold_proc_uid_is_ours(const AvRoot *root, int pid)
{
    g_autofree char *path = av_proc_path("%d/status", pid);
    g_autofree char *text = NULL;
    g_auto(GStrv) lines = NULL;
    uid_t self = geteuid();

    if (av_root_read_file(root, path, &text, NULL) < 0)
        return FALSE;
    lines = g_strsplit(text, "\n", -1);
    for (guint i = 0; lines[i]; i++) {
        g_auto(GStrv) uids = NULL;
        guint n = 0;

        if (!g_str_has_prefix(lines[i], "Uid:"))
            continue;
        uids = g_strsplit_set(lines[i] + strlen("Uid:"), " \t", -1);
        for (guint k = 0; uids[k]; k++) {
            guint64 uid;

            if (!*uids[k])
                continue;
            if (!g_ascii_string_to_unsigned(uids[k], 10, 0, G_MAXUINT32, &uid, NULL) || (uid_t)uid != self)
                return FALSE;
            n++;
        }
        return n > 0;
    }
    return FALSE;
}

/* TRUE when process @pid under @root's /proc is an accelvirt holder
 * started at @start_time: its start time, its name and its user agree. */
gboolean
av_hold_proc_is_holder(const AvRoot *root, int pid, guint64 start_time)
{
    g_autofree char *comm = NULL;
    guint64 start;

    if (pid <= 0 || av_hold_proc_stat(root, pid, &start, &comm) < 0)
        return FALSE;
    return start == start_time && g_str_equal(comm, AV_HOLD_COMM) && av_hold_proc_uid_is_ours(root, pid);
}

/* TRUE when @hold's process, on this machine, is still the holder it
 * records (av_hold_proc_is_holder() on the host's /proc), whatever its
 * boot id says. */
gboolean
av_hold_process_matches(const AvHold *hold)
{
    g_autoptr(AvRoot) host = av_root_new("/", NULL);

    return host && av_hold_proc_is_holder(host, hold->pid, hold->start_time);
}

/* TRUE when @hold is a live hold: recorded in this boot (@boot_id, NULL
 * when unknown: then nothing is live) by a holder still running. */
gboolean
av_hold_is_live(const AvHold *hold, const char *boot_id)
{
    return boot_id && hold->boot_id && g_str_equal(hold->boot_id, boot_id) && av_hold_process_matches(hold);
}

/* TRUE when @hold is a record of an accelvirt before boot ids whose holder
 * still runs (same pid, start time, name and user): the one stale record
 * whose process may be ended (av_hold_prune()). */
gboolean
av_hold_is_legacy_live(const AvHold *hold)
{
    return !hold->boot_id && av_hold_process_matches(hold);
}

/* Reads the record of @group.  TRUE and NULL when there is none. */
gboolean
av_hold_read(const char *state_dir, int group, AvHold **ret_hold, GError **error)
{
    g_autofree char *path = av_hold_path(state_dir, group);
    g_autoptr(json_t) root = NULL;
    g_autoptr(AvHold) hold = NULL;
    json_error_t jerr;
    json_int_t pid = 0, start = -1, recorded_group = -1;
    json_t *oom = NULL;
    const char *address = NULL, *since = NULL, *boot_id = NULL;

    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        *ret_hold = NULL;
        return TRUE;
    }
    root = json_load_file(path, 0, &jerr);
    if (!root || json_unpack(root, "{s:I, s:I, s:I, s?s, s?s, s?s, s?o}", "pid", &pid, "start_time", &start, "group",
                             &recorded_group, "address", &address, "since", &since, "boot_id", &boot_id,
                             "oom_score_adj", &oom) < 0 ||
        pid <= 0 || pid > G_MAXINT || start < 0 || recorded_group != group || (oom && !json_is_integer(oom))) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE, "the hold record '%s' is not valid%s%s", path,
                    root ? "" : ": ", root ? "" : jerr.text);
        return FALSE;
    }
    hold = g_new0(AvHold, 1);
    hold->group = group;
    hold->pid = (int)pid;
    hold->start_time = (guint64)start;
    hold->boot_id = g_strdup(boot_id);
    hold->address = g_strdup(address);
    hold->since = g_strdup(since);
    hold->oom_score_adj = oom && json_integer_value(oom) >= G_MININT + 1 && json_integer_value(oom) <= G_MAXINT
                          ? (int)json_integer_value(oom) : AV_HOLD_OOM_UNKNOWN;
    *ret_hold = g_steal_pointer(&hold);
    return TRUE;
}

/* This boot's id for @root, or NULL when it cannot be read (then no
 * record is live, and no hold can be taken). */
char *
av_hold_boot_id_or_null(const AvRoot *root)
{
    char *boot_id = NULL;

    return root && av_hold_boot_id(root, &boot_id) == 0 ? boot_id : NULL;
}

/* See av-hold.h. */
gboolean
av_hold_get(const AvRoot *root, const char *state_dir, int group, AvHold **ret_hold, GError **error)
{
    g_autoptr(AvHold) hold = NULL;
    g_autofree char *boot_id = NULL;

    if (!av_hold_read(state_dir, group, &hold, error))
        return FALSE;
    if (hold) {
        boot_id = av_hold_boot_id_or_null(root);
        if (!av_hold_is_live(hold, boot_id))
            g_clear_pointer(&hold, av_hold_free);
    }
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

/* See av-hold.h. */
GHashTable *
av_hold_pids(const AvRoot *root, const char *state_dir)
{
    GHashTable *pids = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(GArray) groups = NULL;
    g_autofree char *boot_id = NULL;

    if (!state_dir)
        return pids;
    groups = av_hold_list_groups(state_dir);
    if (groups->len > 0)
        boot_id = av_hold_boot_id_or_null(root);
    for (guint i = 0; boot_id && i < groups->len; i++) {
        g_autoptr(AvHold) hold = NULL;

        if (!av_hold_read(state_dir, g_array_index(groups, int, i), &hold, NULL) || !hold)
            continue;
        /* This boot's record, and the recorded start time, name and user:
         * a pid reused by another process (a QEMU), or a stale record's
         * pid that another user's process has now, is never taken for
         * accelvirt's. */
        if (g_strcmp0(hold->boot_id, boot_id) == 0 && av_hold_proc_is_holder(root, hold->pid, hold->start_time))
            g_hash_table_add(pids, g_strdup_printf("%d", hold->pid));
    }
    return pids;
}
