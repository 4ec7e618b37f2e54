/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the command-line program.  Only this layer (and the hook)
 * decides what to print and how to exit; the layers below return errors. */
#pragma once

#include <glib.h>
#include <jansson.h>
#include <libvirt/libvirt.h>

#include "util/av-exit.h"
#include "util/av-root.h"
#include "pci/av-pci.h"
#include "policy/av-policy.h"
#include "fpga/av-bitstream.h"
#include "lifecycle/av-lifecycle.h"
#include "place/av-place.h"
#include "pool/av-pool.h"
#include "nova/av-placement-sync.h"

G_BEGIN_DECLS

/* The global options, shared by every command. */
typedef struct {
    char *root;
    char *state_dir;
    char *policy_dir;
    char *connect;
    gboolean json;
    gboolean verbose;
    gboolean state_dir_explicit;  /* given by option or environment, not the default */
    gboolean policy_dir_explicit;
} AvCli;

/* The global option entries, storing into @cli (static storage). */
const GOptionEntry *av_cli_global_entries(AvCli *cli);

/* Fills the defaults of the options not given: environment, then the
 * compiled-in paths. */
void av_cli_resolve_defaults(AvCli *cli);

/* Prints "accelvirt: MESSAGE" on stderr and returns the exit status for
 * @error (av_exit_status(), the table of util/av-exit.h). */
int av_cli_fail(const GError *error);

/* @text fit for a terminal, whoever wrote it (a device's serial in an
 * identity, a domain's name): control characters (C0, DEL and C1) and
 * Unicode's bidirectional overrides become '?', invalid UTF-8 too.  Caller
 * frees; NULL gives NULL. */
char *av_cli_printable(const char *text);

/* Prints "accelvirt: MESSAGE" on stderr and returns AV_EXIT_USAGE. */
int av_cli_usage_error(const char *fmt, ...) G_GNUC_PRINTF(1, 2);

/* Prints @value as indented JSON on stdout and takes over the reference. */
void av_cli_print_json(json_t *value);

/* Prints one line per device of @released (borrowed; objects with
 * "address", "identity", "domain" and "state"), as `release` and `detach`
 * do: "VERB ADDRESS (IDENTITY) PREPOSITION domain 'NAME': dirty, the worker
 * scrubs it". */
void av_cli_print_released(json_t *released, const char *verb, const char *preposition);

/* The policy, loaded from the options.  The default policy dir may be
 * missing (nothing is managed); one the user named must exist.  NULL with
 * @error set; an untrusted policy (AV_ERROR_UNSAFE of av_policy_load_dir())
 * comes back as AV_ERROR_POLICY, a bad policy like any other (exit 2). */
AvPolicy *av_cli_load_policy(const AvCli *cli, GError **error);

/* Opens the root and loads the policy, so that bad input is found before
 * anything else happens.  On success stores both (caller frees) and returns
 * TRUE; on failure touches neither. */
gboolean av_cli_open(const AvCli *cli, AvRoot **ret_root, AvPolicy **ret_policy, GError **error);

/* Opens the pool for @mode, saying on stderr when it waits for another
 * accelvirt's lock (up to 30 s).  For AV_POOL_WRITE with a fake root, refuses
 * the default state dir: a fake host must not be recorded in the real pool.
 * A writer with a @root first puts right what processes that died left
 * (av_cli_pool_upkeep()), unless @mode carries AV_CLI_POOL_UPKEEP_LATER:
 * the caller then calls av_cli_pool_upkeep() itself before it saves
 * (`stale --release` releases first, so that its releases are its own). */
AvPool *av_cli_open_pool(const AvCli *cli, const AvRoot *root, int mode, GError **error);

/* A flag of av_cli_open_pool()'s @mode: see there. */
#define AV_CLI_POOL_UPKEEP_LATER 0x100

/* What a holder of the pool's lock does first (av_pool_upkeep()): says
 * what it did and could not do on stderr, saves @pool (open for writing)
 * when that changed it, asks for the worker when devices became dirty.
 * What it released goes to *ret_released (may be NULL; caller frees; see
 * AvPoolUpkeep.released).  FALSE with @error when the pool could not be
 * put right or saved. */
gboolean av_cli_pool_upkeep(const AvRoot *root, AvPool *pool, json_t **ret_released, GError **error);

/* av_cli_open_pool(), storing in *ret_released (may be NULL; caller frees;
 * untouched on failure, and when no upkeep ran: a reader, no @root) the
 * devices the upkeep released (AvPoolUpkeep.released, an array, empty when
 * none), for a command that reports them (reconcile). */
AvPool *av_cli_open_pool_full(const AvCli *cli, const AvRoot *root, int mode, json_t **ret_released,
                              GError **error);

/* How av_cli_sync_open() applies its scan of the host, taken before the
 * exclusive lock (a hook never waits behind a whole-host scan). */
typedef enum {
    /* For commands that act on what the scan says of devices (drivers,
     * IOMMU groups, VFs, mdev parents: attach, bitstream, define, start,
     * enroll, quarantine clear): the scan taken before the lock is applied
     * whole when nobody saved the pool while it ran; when anyone did
     * (av_pool_file_changed_since(): a hook's prepare, even one that failed
     * and undid what it did to the host), the whole host is scanned again
     * under the lock, as before the scan went first.  A device another
     * writer changed may have been read half-way through that change, and
     * a writer's save does not say every device it touched on the host. */
    AV_CLI_SYNC_ACT,
    /* For commands that show the result, or act only on what the pool
     * says (status, watch's audit, reconcile, which scans again itself
     * before it acts on the host): the scan is applied only to the devices
     * nobody changed while it ran (av_pool_reconcile_scan()); those keep
     * what their last writer recorded. */
    AV_CLI_SYNC_KEEP,
} AvCliSyncMode;

/* The options and results of av_cli_sync_open(). */
typedef struct {
    AvCliSyncMode mode;
    /* Called under the exclusive lock after the upkeep, before the scan is
     * applied (may be NULL; FALSE with @error fails the call). */
    gboolean (*before_apply)(AvPool *pool, gpointer data, GError **error);
    gpointer data;
    json_t **ret_released;       /* may be NULL: av_cli_open_pool_full()'s */
    gboolean unsaved;            /* the reconcile left for the caller to save (with what it does, on success:
                                  * a command refused as bad input or for capacity changes nothing) */
    gboolean scanned_first;      /* out: the scan applied was taken before the lock (*ret_host is that
                                  * scan) */
    gboolean others_changed;     /* out: another writer changed the pool's devices while the host was scanned */
    gboolean others_saved;       /* out (AV_CLI_SYNC_ACT): another writer saved the pool while the host was
                                  * scanned, so it was scanned again under the lock */
} AvCliSync;

/* The pool, opened for writing (put right first: av_cli_pool_upkeep()) and
 * reconciled with a scan of the host, saved when that changed it.  The
 * pool is read under the shared lock, the host scanned with no lock held,
 * then the exclusive lock taken to apply it as @sync->mode says; the host
 * is scanned again under the lock when this call's own upkeep changed the
 * pool (it may have rebound drivers).  The root, the scan and the policies
 * it reconciled with go to *ret_root, *ret_host and *ret_policy (each may
 * be NULL; caller frees).  NULL with @error. */
AvPool *av_cli_sync_open(const AvCli *cli, AvCliSync *sync, AvRoot **ret_root, AvHost **ret_host,
                         AvPolicy **ret_policy, GError **error);

/* av_cli_sync_open() with AV_CLI_SYNC_ACT. */
AvPool *av_cli_open_synced_pool(const AvCli *cli, AvHost **ret_host, AvPolicy **ret_policy, GError **error);

/* av_cli_open_synced_pool() for a caller that loaded the policies
 * already (av_cli_open(), to refuse bad input first): *@policy is replaced
 * by the policies the pool was reconciled with; with @unsaved the caller
 * saves the reconcile (AvCliSync.unsaved).  The commands that claim, bind
 * or restore by the scan (place, define, start, enroll, quarantine
 * clear). */
AvPool *av_cli_open_synced_pool_again(const AvCli *cli, gboolean unsaved, AvPolicy **policy, AvHost **ret_host,
                                      GError **error);

/* av_cli_sync_open() with AV_CLI_SYNC_KEEP (`status`): the scan in
 * *ret_host may be older than the pool. */
AvPool *av_cli_open_synced_pool_scan_first(const AvCli *cli, AvHost **ret_host, AvPolicy **ret_policy,
                                           GError **error);

/* The pool device named @name: its identity, else its PCI address or USB
 * bus path.  NULL with AV_ERROR_NOT_FOUND (one sentence, what to run). */
AvPoolDevice *av_cli_find_device(AvPool *pool, const char *name, GError **error);

/* Whether the pool as saved names a device @name (av_cli_find_device()),
 * read under the shared lock: the check an operator command that names a
 * device makes before it opens the pool for writing, whose reconcile and
 * upkeep save what they find, so that a name that is nobody's changes
 * nothing.  FALSE with AV_ERROR_NOT_FOUND (or the pool's error). */
gboolean av_cli_device_known(const AvCli *cli, const char *name, GError **error);

/* Who runs the command: $SUDO_USER, else "uid N".  Caller frees. */
char *av_cli_operator(void);

/* Asks for the scrub worker to be started when the command ends
 * (av_cli_spawn_pending_worker(), from main()): dirty devices wait for it. */
void av_cli_want_worker(void);

/* Starts the worker ($ACCELVIRT_WORKER, else the installed one) detached
 * when av_cli_want_worker() was called, with @cli's root, state dir and
 * policy dir in its environment; a failure is a warning. */
void av_cli_spawn_pending_worker(const AvCli *cli);

/* Parses the options of a command: @entries (may be NULL) plus the global
 * ones, so that global options may also stand after the command name.
 * @params is the usage synopsis after the command ("[DEVICE]").  Returns
 * FALSE after printing the error. */
gboolean av_cli_parse(AvCli *cli, const char *command, const char *params, const char *summary,
                      const GOptionEntry *entries, int *argc, char ***argv);

/* Sets the VF count of the PF @pf from @from to @to for @profile
 * (av_pool_vf_set_count(), journalled "vfs-set" by @by); when that fails,
 * sets it back to @from, and @error says both.  Every VF of @pf must be
 * idle (av_pool_pf_check_change()).  The caller scans the host again. */
gboolean av_cli_set_vfs(const AvRoot *root, AvPool *pool, const char *pf, const char *profile, guint from, guint to,
                        const char *by, GError **error);

/* Makes the VFs that the "vfs" profiles of @requests (AvRequest*) lack
 * for the domain @uuid (av_pool_vf_growth()), journalled "vfs-set" by @by
 * ("define of domain 'NAME' (UUID)"), then scans the host again into
 * *@host and reconciles the new VFs into @pool; a count that fails half-way
 * is set back.  A @dry_run only says on stderr what a real run would write.
 * *ret_planned: how many PFs change; *ret_why (caller frees): why no PF
 * could, when none could.  @pool open for writing. */
gboolean av_cli_grow_vfs(const AvRoot *root, const AvPolicy *policy, AvPool *pool, AvHost **host,
                         const GPtrArray *requests, const char *uuid, const char *by, gboolean dry_run,
                         guint *ret_planned, char **ret_why, GError **error);

/* A scratch copy of the pool of @state_dir in a new temporary directory
 * (stored in *ret_dir, caller removes it with av_cli_remove_dir()), open
 * for writing: a dry run reconciles and places there, and the real pool and
 * journal see nothing.  NULL with @error. */
AvPool *av_cli_scratch_pool(const char *state_dir, char **ret_dir, GError **error);

/* Removes the files of the flat directory @dir, then @dir.  NULL is a
 * no-op. */
void av_cli_remove_dir(const char *dir);

/* Sets @error (AV_ERROR_FAILED) from libvirt's last error, prefixed by
 * @what; returns FALSE. */
gboolean av_cli_virt_error(GError **error, const char *what);

/* Connects to libvirt at cli->connect, libvirt's own error printing
 * silenced (accelvirt says each error once).  NULL with @error.  Caller
 * closes. */
virConnect *av_cli_connect(const AvCli *cli, GError **error);

/* The domain named @name, or whose UUID is @name; NULL with
 * AV_ERROR_NOT_FOUND (one sentence).  Caller frees. */
virDomain *av_cli_lookup(virConnect *conn, const char *name, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(virConnect, virConnectClose)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(virDomain, virDomainFree)

/* --- giving devices to a domain (cli-assign.c) --- */

/* The bitstream of @bitstreams (AvBitstream*, borrowed; may be NULL) whose
 * SHA-256 is @sha256, or NULL.  Borrowed from @bitstreams. */
const AvBitstream *av_cli_bitstream_by_sha256(const GPtrArray *bitstreams, const char *sha256);

/* Opens the VFIO group of @pci (borrowed, a fresh scan) for a program with
 * driver "vfio-pci", passed to it as fd 3: the device must be on vfio-pci
 * and its group open nowhere else (Documentation/driver-api/vfio.rst: one
 * open file of a group at a time), through the root's kernel table.
 * Returns the fd (caller closes) or -1 with @error (AV_ERROR_IN_USE when
 * another process has the group open, naming it). */
int av_cli_program_group_open(const AvRoot *root, const AvPciDevice *pci, GError **error);

/* TRUE when av_cli_assign() has work for @items (AvPlacedItem*): a device
 * whose pool record does not say it holds the bitstream its item names, or
 * a profile with an "on_assign" driver command. */
gboolean av_cli_assign_needed(const AvPolicy *policy, const AvPool *pool, const GPtrArray *items);

/* Gives the devices of @items (AvPlacedItem*, borrowed), CLAIMED by @owner
 * in *@pool (open for writing), to the domain: each one whose item names a
 * bitstream (item->bitstream, found in @bitstreams: AvBitstream*, borrowed)
 * that its pool record does not say it holds is programmed with it
 * (av_program_run(), by @by: "define", "start"); then each whose identity
 * is in @assign (a set of char*, borrowed; NULL: all) gets its profile's
 * "on_assign" command (av_driver_run()).  The checks, the claims renewed
 * to last past the programs' timeouts and the records cleared are saved,
 * *@pool is closed (the lock released) while the commands run, then
 * opened again for writing (a new pool in *@pool, NULL only when that
 * fails): outcomes are recorded (av_pool_set_programmed()) only for
 * devices still claimed by @owner, and journalled ("program", "driver").
 * The first failure stops the runs: FALSE with @error; what ran is
 * recorded, the claims stay (the caller gives them back).  The caller
 * saves.  *ret_programmed (may be NULL): how many were programmed. */
gboolean av_cli_assign(const AvCli *cli, const AvRoot *root, const AvPolicy *policy, AvPool **pool,
                       const AvOwner *owner, const GPtrArray *items, const GPtrArray *bitstreams, GHashTable *assign,
                       const char *by, guint *ret_programmed, GError **error);

/* The commands: argv[0] is the command name. */
int av_cli_cmd_list(AvCli *cli, int argc, char **argv);
int av_cli_cmd_status(AvCli *cli, int argc, char **argv);
int av_cli_cmd_policy(AvCli *cli, int argc, char **argv);
int av_cli_cmd_journal(AvCli *cli, int argc, char **argv);

/* FALSE when ACCELVIRT_IGNORE_CHECKPOINTS is set (not empty): metrics and
 * accounting then read the whole journal, checkpoints left aside (the
 * tests compare both ways). */
gboolean av_cli_checkpoints_wanted(void);
int av_cli_cmd_rewrite(AvCli *cli, int argc, char **argv);
int av_cli_cmd_define(AvCli *cli, int argc, char **argv);
int av_cli_cmd_start(AvCli *cli, int argc, char **argv);
int av_cli_cmd_undefine(AvCli *cli, int argc, char **argv);
int av_cli_cmd_plan(AvCli *cli, int argc, char **argv);
int av_cli_cmd_enroll(AvCli *cli, int argc, char **argv);
int av_cli_cmd_scrub(AvCli *cli, int argc, char **argv);
int av_cli_cmd_quarantine(AvCli *cli, int argc, char **argv);
int av_cli_cmd_release(AvCli *cli, int argc, char **argv);
int av_cli_cmd_reconcile(AvCli *cli, int argc, char **argv);
int av_cli_cmd_attach(AvCli *cli, int argc, char **argv);
int av_cli_cmd_detach(AvCli *cli, int argc, char **argv);
int av_cli_cmd_audit(AvCli *cli, int argc, char **argv);
int av_cli_cmd_watch(AvCli *cli, int argc, char **argv);
int av_cli_cmd_host_validate(AvCli *cli, int argc, char **argv);
int av_cli_cmd_bitstream(AvCli *cli, int argc, char **argv);
int av_cli_cmd_program(AvCli *cli, int argc, char **argv);
int av_cli_cmd_accounting(AvCli *cli, int argc, char **argv);
int av_cli_cmd_stale(AvCli *cli, int argc, char **argv);
int av_cli_cmd_health(AvCli *cli, int argc, char **argv);
int av_cli_cmd_metrics(AvCli *cli, int argc, char **argv);
int av_cli_cmd_limits(AvCli *cli, int argc, char **argv);

/* The rows of `accelvirt limits --json` ("limits"): one per limit and kind
 * of @policy, with the usage @pool holds at @now (cli-limits.c; `metrics`
 * exports them).  New reference. */
json_t *av_cli_limits_usage(const AvPool *pool, const AvPolicy *policy, gint64 now);
int av_cli_cmd_nova(AvCli *cli, int argc, char **argv);

int av_cli_cmd_placement(AvCli *cli, int argc, char **argv);

/* The Placement sync of the pool (av_placement_sync_pool()):
 * what `reconcile` and `placement sync` run.  Must not be called with the
 * pool's lock held.  *ret_report (caller frees). */
gboolean av_cli_placement_sync(const AvCli *cli, const AvRoot *root, const AvPolicy *policy,
                               AvPlacementReport **ret_report, GError **error);

G_END_DECLS
