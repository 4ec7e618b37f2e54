/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: options, errors and output shared by the commands. */
#include "config.h"

#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include <glib/gstdio.h>

#include "util/av-error.h"
#include "util/av-spawn.h"
#include "vfio/av-kernel.h"
#include "util/av-json.h"
#include "pool/av-pool.h"

#include <libvirt/virterror.h>

/* How long a command waits for the pool lock: quietly, then saying so. */
#define AV_CLI_LOCK_NOTICE_MS 1000
#define AV_CLI_LOCK_TIMEOUT_MS 30000

const GOptionEntry *
av_cli_global_entries(AvCli *cli)
{
    static GOptionEntry entries[7];
    const GOptionEntry e[] = {
        { "root", 0, 0, G_OPTION_ARG_FILENAME, &cli->root,
          "Read /sys, /dev and /proc under DIR (default $ACCELVIRT_ROOT or /)", "DIR" },
        { "state-dir", 0, 0, G_OPTION_ARG_FILENAME, &cli->state_dir,
          "Pool, lock and journal directory (default $ACCELVIRT_STATE_DIR or " AV_STATE_DIR ")", "DIR" },
        { "policy-dir", 0, 0, G_OPTION_ARG_FILENAME, &cli->policy_dir,
          "Policy directory (default $ACCELVIRT_POLICY_DIR or " AV_POLICY_DIR ")", "DIR" },
        { "connect", 'c', 0, G_OPTION_ARG_STRING, &cli->connect,
          "libvirt URI (default $ACCELVIRT_CONNECT or qemu:///system)", "URI" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &cli->json, "Machine-readable output", NULL },
        { "verbose", 'v', 0, G_OPTION_ARG_NONE, &cli->verbose, "Print debug messages", NULL },
        { NULL },
    };

    G_STATIC_ASSERT(G_N_ELEMENTS(e) == G_N_ELEMENTS(entries));
    memcpy(entries, e, sizeof(e));
    return entries;
}

/* Fills *opt from $env or @fallback; returns TRUE when the value was given
 * (option or environment) rather than the compiled-in default. */
static gboolean
av_cli_default(char **opt, const char *env, const char *fallback)
{
    const char *v;

    if (*opt)
        return TRUE;
    v = g_getenv(env);
    *opt = g_strdup(v && *v ? v : fallback);
    return v && *v;
}

void
av_cli_resolve_defaults(AvCli *cli)
{
    cli->state_dir_explicit = av_cli_default(&cli->state_dir, "ACCELVIRT_STATE_DIR", AV_STATE_DIR);
    cli->policy_dir_explicit = av_cli_default(&cli->policy_dir, "ACCELVIRT_POLICY_DIR", AV_POLICY_DIR);
    av_cli_default(&cli->connect, "ACCELVIRT_CONNECT", "qemu:///system");
    /* --root falls back to $ACCELVIRT_ROOT in av_root_new_default(). */
}

/* See cli.h. */
char *
av_cli_printable(const char *text)
{
    g_autofree char *valid = NULL;
    GString *out;

    if (!text)
        return NULL;
    valid = g_utf8_make_valid(text, -1);
    out = g_string_sized_new(strlen(valid));
    for (const char *p = valid; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);

        if (c < 0x20 || (c >= 0x7f && c <= 0x9f) || (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) ||
            c == 0xfffd)
            g_string_append_c(out, '?');
        else
            g_string_append_len(out, p, g_utf8_next_char(p) - p);
    }
    return g_string_free(out, FALSE);
}

/* Prints @error as one line, "accelvirt: MESSAGE", whatever the message
 * quotes (a policy value, a journal line: control characters, newlines and
 * terminal escapes become spaces, as in the hook's refusals), and returns the
 * exit status for it. */
int
av_cli_fail(const GError *error)
{
    g_autofree char *line = g_strdup(error->message);

    for (char *p = line; *p; p++)
        if ((guchar)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    fprintf(stderr, "accelvirt: %s\n", line);
    return error->domain == AV_ERROR ? av_exit_status(error->code) : AV_EXIT_FAILURE;
}

int
av_cli_usage_error(const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    fprintf(stderr, "accelvirt: %s\n", msg);
    return AV_EXIT_USAGE;
}

void
av_cli_print_json(json_t *value)
{
    g_autofree char *text = av_json_dump_pretty(value);

    fputs(text, stdout);
    json_decref(value);
}

/* See cli.h. */
void
av_cli_print_released(json_t *released, const char *verb, const char *preposition)
{
    size_t i;
    json_t *e;

    json_array_foreach(released, i, e)
        printf("%s %s (%s) %s domain '%s': %s, the worker scrubs it\n", verb,
               json_string_value(json_object_get(e, "address")) ?: "-",
               json_string_value(json_object_get(e, "identity")), preposition,
               json_string_value(json_object_get(e, "domain")) ?: "?",
               json_string_value(json_object_get(e, "state")));
}

AvPolicy *
av_cli_load_policy(const AvCli *cli, GError **error)
{
    g_autoptr(GError) local = NULL;
    AvPolicy *policy;

    if (cli->policy_dir_explicit && !g_file_test(cli->policy_dir, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                    "the policy directory '%s' does not exist; create it or point --policy-dir at your policies",
                    cli->policy_dir);
        return NULL;
    }
    policy = av_policy_load_dir(cli->policy_dir, &local);
    /* A policy that another user could change (it, or a program or template
     * it names) is a bad policy: exit status 2, as for a mistake in it. */
    if (!policy && g_error_matches(local, AV_ERROR, AV_ERROR_UNSAFE))
        local->code = AV_ERROR_POLICY;
    if (!policy)
        g_propagate_error(error, g_steal_pointer(&local));
    return policy;
}

gboolean
av_cli_open(const AvCli *cli, AvRoot **ret_root, AvPolicy **ret_policy, GError **error)
{
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;

    root = av_root_new_default(cli->root, error);
    if (!root)
        return FALSE;
    policy = av_cli_load_policy(cli, error);
    if (!policy)
        return FALSE;
    *ret_root = g_steal_pointer(&root);
    *ret_policy = g_steal_pointer(&policy);
    return TRUE;
}

/* av_cli_pool_upkeep(), telling in *@ret_changed whether it changed the
 * pool. */
static gboolean
av_cli_pool_upkeep_full(const AvRoot *root, AvPool *pool, json_t **ret_released, gboolean *ret_changed,
                        GError **error)
{
    g_autoptr(AvPoolUpkeep) upkeep = av_pool_upkeep(pool, root, av_kernel_ops_for(root), error);

    if (!upkeep)
        return FALSE;
    if (ret_changed)
        *ret_changed = upkeep->changed;
    for (guint i = 0; i < upkeep->notes->len; i++)
        fprintf(stderr, "accelvirt: note: %s\n", (const char *)g_ptr_array_index(upkeep->notes, i));
    for (guint i = 0; i < upkeep->problems->len; i++)
        fprintf(stderr, "accelvirt: warning: %s\n", (const char *)g_ptr_array_index(upkeep->problems, i));
    if (upkeep->changed && !av_pool_save(pool, error))
        return FALSE;
    av_pool_upkeep_finish(upkeep);
    if (upkeep->dirtied)
        av_cli_want_worker();
    if (ret_released)
        *ret_released = json_incref(upkeep->released);
    return TRUE;
}

/* See cli.h. */
gboolean
av_cli_pool_upkeep(const AvRoot *root, AvPool *pool, json_t **ret_released, GError **error)
{
    return av_cli_pool_upkeep_full(root, pool, ret_released, NULL, error);
}

/* See cli.h. */
gboolean
av_cli_checkpoints_wanted(void)
{
    const char *v = g_getenv("ACCELVIRT_IGNORE_CHECKPOINTS");

    return !v || !*v;
}

/* FALSE with @error when the devices under @root (may be NULL) are not to be
 * recorded in the pool of @cli: a fake root prefix without a --state-dir of
 * its own. */
static gboolean
av_cli_pool_root_allowed(const AvCli *cli, const AvRoot *root, GError **error)
{
    if (root && !av_root_is_host(root) && !cli->state_dir_explicit) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "refusing to record the devices of '%s' in this host's pool %s; "
                    "give a --state-dir of its own", av_root_prefix(root), cli->state_dir);
        return FALSE;
    }
    return TRUE;
}

/* See cli.h. */
AvPool *
av_cli_open_pool(const AvCli *cli, const AvRoot *root, int mode, GError **error)
{
    return av_cli_open_pool_full(cli, root, mode, NULL, error);
}

/* See cli.h. */
AvPool *
av_cli_open_pool_full(const AvCli *cli, const AvRoot *root, int mode, json_t **ret_released, GError **error)
{
    g_autoptr(GError) err = NULL;
    gboolean upkeep = !(mode & AV_CLI_POOL_UPKEEP_LATER);
    AvPool *pool;

    mode &= ~AV_CLI_POOL_UPKEEP_LATER;
    if (mode == AV_POOL_WRITE && !av_cli_pool_root_allowed(cli, root, error))
        return NULL;
    pool = av_pool_open(cli->state_dir, (AvPoolMode)mode, AV_CLI_LOCK_NOTICE_MS, &err);
    if (!pool && g_error_matches(err, AV_ERROR, AV_ERROR_LOCKED)) {
        fprintf(stderr, "accelvirt: waiting for another accelvirt to release the pool lock...\n");
        g_clear_error(&err);
        pool = av_pool_open(cli->state_dir, (AvPoolMode)mode, AV_CLI_LOCK_TIMEOUT_MS, &err);
    }
    if (!pool) {
        if (g_error_matches(err, AV_ERROR, AV_ERROR_IO) && geteuid() != 0 &&
            strstr(err->message, g_strerror(EACCES)))
            g_prefix_error(&err, "run as root or choose another --state-dir: ");
        g_propagate_error(error, g_steal_pointer(&err));
        return NULL;
    }
    if (mode == AV_POOL_WRITE && root && upkeep && !av_cli_pool_upkeep(root, pool, ret_released, error)) {
        av_pool_free(pool);
        return NULL;
    }
    return pool;
}

gboolean
av_cli_parse(AvCli *cli, const char *command, const char *params, const char *summary,
             const GOptionEntry *entries, int *argc, char ***argv)
{
    g_autofree char *synopsis = g_strdup_printf("%s%s%s", command, params ? " " : "", params ? params : "");
    g_autoptr(GOptionContext) ctx = g_option_context_new(synopsis);
    g_autoptr(GError) err = NULL;
    /* What main() parsed before the command: a global option given again
     * after it replaces the string, which GOption does not free. */
    char *before[] = { cli->root, cli->state_dir, cli->policy_dir, cli->connect };
    char **after[] = { &cli->root, &cli->state_dir, &cli->policy_dir, &cli->connect };

    g_option_context_set_summary(ctx, summary);
    if (entries)
        g_option_context_add_main_entries(ctx, entries, NULL);
    g_option_context_add_main_entries(ctx, av_cli_global_entries(cli), NULL);
    if (!g_option_context_parse(ctx, argc, argv, &err)) {
        av_cli_usage_error("%s; see 'accelvirt %s --help'", err->message, command);
        return FALSE;
    }
    for (gsize i = 0; i < G_N_ELEMENTS(before); i++) {
        if (*after[i] != before[i])
            g_free(before[i]);
    }
    av_cli_resolve_defaults(cli);
    if (cli->verbose)
        g_setenv("G_MESSAGES_DEBUG", "accelvirt", TRUE);
    return TRUE;
}

/* See cli.h.  Borrowed from @pool. */
AvPoolDevice *
av_cli_find_device(AvPool *pool, const char *name, GError **error)
{
    AvPoolDevice *dev = av_pool_find(pool, name);

    if (!dev && av_pci_address_is_valid(name))
        dev = av_pool_find_address(pool, AV_DEVICE_KIND_PCI, name);
    if (!dev && av_usb_bus_path_is_valid(name))
        dev = av_pool_find_address(pool, AV_DEVICE_KIND_USB, name);
    if (!dev)
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                    "'%s' is not a device of the pool; 'accelvirt status' lists them (address or identity)", name);
    return dev;
}

/* See cli.h. */
gboolean
av_cli_device_known(const AvCli *cli, const char *name, GError **error)
{
    g_autoptr(AvPool) pool = av_cli_open_pool(cli, NULL, AV_POOL_READ, error);
    g_autoptr(AvRoot) root = NULL;
    g_autofree char *sys = NULL;

    if (!pool || av_cli_find_device(pool, name, error))
        return pool != NULL;
    /* Not in the pool yet (never reconciled): a device the host has may
     * join it with the reconcile; a name the host has not is refused. */
    if (av_pci_address_is_valid(name))
        sys = av_sys_path("bus/pci/devices/%s", name);
    else if (av_usb_bus_path_is_valid(name))
        sys = av_sys_path("bus/usb/devices/%s", name);
    root = sys ? av_root_new_default(cli->root, NULL) : NULL;
    if (root && av_root_exists(root, sys)) {
        g_clear_error(error);
        return TRUE;
    }
    return FALSE;
}

/* See cli.h.  Caller frees. */
char *
av_cli_operator(void)
{
    const char *sudo = g_getenv("SUDO_USER");

    if (sudo && *sudo)
        return g_strdup(sudo);
    return g_strdup_printf("uid %u", (unsigned)getuid());
}

#ifndef AV_WORKER_PATH
#define AV_WORKER_PATH "/usr/libexec/accelvirt/accelvirt-worker"
#endif

static gboolean av_cli_worker_wanted;

/* See cli.h. */
void
av_cli_want_worker(void)
{
    av_cli_worker_wanted = TRUE;
}

/* See cli.h. */
void
av_cli_spawn_pending_worker(const AvCli *cli)
{
    const char *worker = g_getenv("ACCELVIRT_WORKER");
    g_autoptr(GError) error = NULL;

    if (!av_cli_worker_wanted)
        return;
    av_cli_worker_wanted = FALSE;
    /* The worker reads where to act from its environment, as the hook's,
     * and runs in "/" (av_spawn_detached()): a relative path is made
     * absolute here, from where this command ran. */
    const char *const names[] = { "ACCELVIRT_ROOT", "ACCELVIRT_STATE_DIR", "ACCELVIRT_POLICY_DIR" };
    const char *const values[] = { cli->root, cli->state_dir, cli->policy_dir };

    for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
        g_autofree char *absolute = values[i] ? g_canonicalize_filename(values[i], NULL) : NULL;

        if (absolute)
            g_setenv(names[i], absolute, TRUE);
    }
    if (!worker || !*worker)
        worker = AV_WORKER_PATH;
    if (!av_spawn_detached(worker, &error))
        fprintf(stderr, "accelvirt: warning: cannot start the scrub worker '%s': %s; the dirty devices wait for "
                "the next one\n", worker, error->message);
}

/* Scans the host into *@host and its reconcile input into *@scan (both
 * replaced). */
static gboolean
av_cli_sync_scan(const AvRoot *root, const AvPolicy *policy, AvHost **host, AvPoolScan **scan, GError **error)
{
    g_clear_pointer(scan, av_pool_scan_free);
    g_clear_pointer(host, av_host_free);
    *host = av_host_scan(root, error);
    if (!*host)
        return FALSE;
    *scan = av_pool_scan_new(*host, policy);
    return TRUE;
}

/* See cli.h.  The pool is read under the shared lock first and let go of
 * before the scan; the exclusive lock is taken after it to apply it. */
AvPool *
av_cli_sync_open(const AvCli *cli, AvCliSync *sync, AvRoot **ret_root, AvHost **ret_host, AvPolicy **ret_policy,
                 GError **error)
{
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvPool) before = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvPoolScan) scan = NULL;
    g_autoptr(GHashTable) keep = NULL;
    gboolean changed = FALSE;
    gboolean upkept = FALSE;

    sync->scanned_first = FALSE;
    sync->others_changed = FALSE;
    sync->others_saved = FALSE;
    /* Bad input is found before the pool is touched. */
    if (!av_cli_open(cli, &root, &policy, error) || !av_cli_pool_root_allowed(cli, root, error))
        return NULL;
    before = av_cli_open_pool(cli, root, AV_POOL_READ, error);
    if (!before)
        return NULL;
    av_pool_unlock(before);
    if (!av_cli_sync_scan(root, policy, &host, &scan, error))
        return NULL;
    pool = av_cli_open_pool(cli, root, AV_POOL_WRITE | AV_CLI_POOL_UPKEEP_LATER, error);
    if (!pool)
        return NULL;
    /* What other writers changed while the host was scanned, before this
     * call's own upkeep changes anything. */
    keep = av_pool_changed_since(before, pool);
    sync->others_changed = g_hash_table_size(keep) > 0;
    if (sync->others_changed)
        g_debug("the pool changed while the host was scanned: %u names of devices", g_hash_table_size(keep));
    /* A command that acts on what the scan says of drivers, groups, VFs
     * and mdev parents (AV_CLI_SYNC_ACT) needs the host as it is now: when
     * any writer saved the pool while the host was scanned, even one that
     * left every device entry as it was (a prepare that bound a group or
     * grew VFs, failed and undid it: the scan may have read it half-way),
     * the scan may not say what the host is now. */
    if (sync->mode == AV_CLI_SYNC_ACT && av_pool_file_changed_since(before, pool))
        sync->others_saved = TRUE;
    if (!av_cli_pool_upkeep_full(root, pool, sync->ret_released, &upkept, error))
        return NULL;
    if (upkept || sync->others_saved) {
        /* Or the upkeep changed the pool (the devices of a previous boot
         * released, an intent rolled back, which may rebind drivers): the
         * scan taken before it may not say what the host is now.  Scanned
         * again under the lock, as before the scan went first (the first
         * call after a boot or a crash; for AV_CLI_SYNC_ACT, one during
         * which another writer saved). */
        g_clear_pointer(&keep, g_hash_table_unref);
        if (!av_cli_sync_scan(root, policy, &host, &scan, error))
            return NULL;
    } else {
        /* What others changed is left as they recorded it (AV_CLI_SYNC_KEEP:
         * their devices get the next call's scan), the rest gets the scan:
         * when nobody saved the pool meanwhile, the scan is what one under
         * the lock would read, as far as accelvirt goes (every change
         * accelvirt makes to a device on the host happens under this lock
         * and is saved). */
        sync->scanned_first = TRUE;
    }
    if (sync->before_apply && !sync->before_apply(pool, sync->data, error))
        return NULL;
    if (!av_pool_reconcile_scan(pool, scan, keep, &changed, error))
        return NULL;
    if (changed && !sync->unsaved && !av_pool_save(pool, error))
        return NULL;
    if (ret_root)
        *ret_root = g_steal_pointer(&root);
    if (ret_host)
        *ret_host = g_steal_pointer(&host);
    if (ret_policy)
        *ret_policy = g_steal_pointer(&policy);
    return g_steal_pointer(&pool);
}

/* See cli.h. */
AvPool *
av_cli_open_synced_pool(const AvCli *cli, AvHost **ret_host, AvPolicy **ret_policy, GError **error)
{
    AvCliSync sync = { .mode = AV_CLI_SYNC_ACT };

    return av_cli_sync_open(cli, &sync, NULL, ret_host, ret_policy, error);
}

/* See cli.h. */
AvPool *
av_cli_open_synced_pool_again(const AvCli *cli, gboolean unsaved, AvPolicy **policy, AvHost **ret_host,
                              GError **error)
{
    g_autoptr(AvPolicy) synced = NULL;
    AvCliSync sync = { .mode = AV_CLI_SYNC_ACT, .unsaved = unsaved };
    AvPool *pool = av_cli_sync_open(cli, &sync, NULL, ret_host, &synced, error);

    if (!pool)
        return NULL;
    g_clear_pointer(policy, av_policy_free);
    *policy = g_steal_pointer(&synced);
    return pool;
}

/* See cli.h. */
AvPool *
av_cli_open_synced_pool_scan_first(const AvCli *cli, AvHost **ret_host, AvPolicy **ret_policy, GError **error)
{
    AvCliSync sync = { .mode = AV_CLI_SYNC_KEEP };

    return av_cli_sync_open(cli, &sync, NULL, ret_host, ret_policy, error);
}

/* --- SR-IOV VFs ------------------------------------------------------------------ */

/* See cli.h. */
gboolean
av_cli_set_vfs(const AvRoot *root, AvPool *pool, const char *pf, const char *profile, guint from, guint to,
               const char *by, GError **error)
{
    g_autoptr(GError) back = NULL;
    g_autofree char *why = NULL;
    GQuark quark;
    int code;

    if (av_pool_vf_set_count(pool, root, av_kernel_ops_for(root), pf, profile, from, to, by, error))
        return TRUE;
    /* The kernel goes from a count to another through 0: a failure after
     * the first write leaves the PF with no VF.  Its count goes back to
     * what it was (every VF was idle: the caller checked it), and the
     * error says where it stands. */
    why = g_strdup(error && *error ? (*error)->message : "failed");
    quark = error && *error ? (*error)->domain : AV_ERROR;
    code = error && *error ? (*error)->code : AV_ERROR_FAILED;
    g_clear_error(error);
    if (av_pool_vf_set_count(pool, root, av_kernel_ops_for(root), pf, profile, to, from, by, &back))
        g_set_error(error, quark, code, "%s; the VF count of PF %s was set back to %u, as before", why, pf, from);
    else
        g_set_error(error, quark, code, "%s; setting the VF count of PF %s back to %u failed too (%s): the PF may "
                    "have no VF now, see its sriov_numvfs", why, pf, from, back->message);
    return FALSE;
}

/* See cli.h. */
gboolean
av_cli_grow_vfs(const AvRoot *root, const AvPolicy *policy, AvPool *pool, AvHost **host, const GPtrArray *requests,
                const char *uuid, const char *by, gboolean dry_run, guint *ret_planned, char **ret_why,
                GError **error)
{
    g_autoptr(GPtrArray) growth = av_pool_vf_growth(pool, root, *host, policy, requests, uuid, ret_why);
    gboolean changed = FALSE;

    *ret_planned = growth->len;
    for (guint i = 0; i < growth->len; i++) {
        const AvVfGrowth *g = g_ptr_array_index(growth, i);

        if (dry_run) {
            fprintf(stderr, "accelvirt: dry run: a real run would make VFs for profile '%s': sriov_numvfs of PF %s "
                    "from %u to %u\n", g->profile, g->pf, g->from, g->to);
            continue;
        }
        if (!av_cli_set_vfs(root, pool, g->pf, g->profile, g->from, g->to, by, error))
            return FALSE;
    }
    if (dry_run || growth->len == 0)
        return TRUE;
    g_clear_pointer(host, av_host_free);
    *host = av_host_scan(root, error);
    return *host && av_pool_reconcile(pool, *host, policy, &changed, error);
}

/* --- dry runs ------------------------------------------------------------------- */

/* See cli.h. */
AvPool *
av_cli_scratch_pool(const char *state_dir, char **ret_dir, GError **error)
{
    g_autofree char *dir = g_dir_make_tmp("accelvirt-dry-run-XXXXXX", error);
    g_autofree char *src = g_build_filename(state_dir, "pool.json", NULL);
    g_autofree char *dst = NULL;
    g_autofree char *data = NULL;
    gsize len = 0;
    AvPool *pool;

    if (!dir)
        return NULL;
    *ret_dir = g_strdup(dir);
    if (g_file_get_contents(src, &data, &len, NULL)) {
        dst = g_build_filename(dir, "pool.json", NULL);
        if (!g_file_set_contents_full(dst, data, (gssize)len, G_FILE_SET_CONTENTS_CONSISTENT, 0600, error))
            return NULL;
    }
    pool = av_pool_open(dir, AV_POOL_WRITE, 0, error);
    return pool;
}

/* See cli.h. */
void
av_cli_remove_dir(const char *dir)
{
    g_autoptr(GDir) d = NULL;
    const char *name;

    if (!dir)
        return;
    d = g_dir_open(dir, 0, NULL);
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *p = g_build_filename(dir, name, NULL);

        g_unlink(p);
    }
    g_rmdir(dir);
}

/* --- libvirt, for the commands that talk to it ---------------------------------- */

/* See cli.h. */
gboolean
av_cli_virt_error(GError **error, const char *what)
{
    const virError *e = virGetLastError();

    g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "%s: %s", what,
                e && e->message ? e->message : "libvirt gave no reason");
    return FALSE;
}

static void
av_cli_virt_silence(void *data, virErrorPtr e)
{
    (void)data;
    (void)e;
}

/* See cli.h.  Caller closes. */
virConnect *
av_cli_connect(const AvCli *cli, GError **error)
{
    virConnect *conn;

    /* libvirt prints its errors itself unless told otherwise; accelvirt says
     * them once, in its own words. */
    virSetErrorFunc(NULL, av_cli_virt_silence);
    conn = virConnectOpen(cli->connect);
    if (!conn) {
        g_autofree char *what = g_strdup_printf("cannot connect to libvirt at '%s' (is libvirtd running? "
                                                "see --connect)", cli->connect);
        av_cli_virt_error(error, what);
        return NULL;
    }
    return conn;
}

/* See cli.h.  Caller frees. */
virDomain *
av_cli_lookup(virConnect *conn, const char *name, GError **error)
{
    virDomain *dom = virDomainLookupByName(conn, name);

    if (!dom)
        dom = virDomainLookupByUUIDString(conn, name);
    if (!dom) {
        char *uri = virConnectGetURI(conn);    /* the caller frees it (libvirt) */

        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                    "no domain '%s' on %s; 'virsh list --all' shows the defined ones", name,
                    uri ? uri : "this connection");
        free(uri);
        return NULL;
    }
    return dom;
}
