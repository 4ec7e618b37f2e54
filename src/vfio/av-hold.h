/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: kernel-enforced holds of VFIO groups.
 *
 * The pool refuses a dirty, scrubbing or quarantined device to every domain;
 * a hold makes the kernel refuse it too, even to a `virsh attach-device`
 * behind accelvirt's back.  The kernel lets one open file of a VFIO group
 * exist at a time (vfio_group_fops_open answers -EBUSY to the next open,
 * Documentation/driver-api/vfio.rst), so accelvirt keeps /dev/vfio/GROUP
 * open in a small process of its own, the holder: a QEMU's open of the
 * group then fails with EBUSY, and libvirt's attach or start fails with it.
 *
 * The holder is a program of its own, accelvirt-hold (hooks/accelvirt-hold.c,
 * installed beside accelvirt-worker: av_hold_program()), which whoever takes
 * the hold forks and execs: nothing of the taker's memory, locks or
 * descriptors goes with it.  It has the group file as fd 3 (AV_HOLD_FD), a
 * socket to its taker as fd 4 (AV_HOLD_SOCKET_FD) until its record is
 * written, stdin, stdout and stderr on /dev/null, an empty environment, a
 * session of its own, and its parent gone (it is reparented to init:
 * nobody waits for it).  It sets its oom_score_adj to -1000 (without
 * CAP_SYS_RESOURCE it cannot, and holds all the same) and waits for
 * SIGTERM.
 *
 * Its record is STATE_DIR/holds/N.json: {"pid", "start_time" (/proc/PID/stat
 * field 22, proc(5): with the pid it names the process, whatever reuses the
 * pid later), "boot_id" (/proc/sys/kernel/random/boot_id: pids and start
 * times mean nothing in another boot), "group", "address", "since",
 * "oom_score_adj" (what the holder got)}.  A record names a live hold only
 * when its boot id is this boot's and its process is an accelvirt-hold of
 * the user accelvirt runs as (/proc/PID/status Uid) with the recorded start
 * time: a record left by another boot, or by an accelvirt before boot ids,
 * is never taken for a hold, whatever process has its pid now (its fd 3 is
 * never handed to a scrub program), and av_hold_prune() removes it.
 *
 * A holder holds only once its record is written: it waits on its socket
 * for the taker's word, and the socket closing first (a taker killed at
 * any instruction) ends it; so no holder lives without a record to drop it
 * by, at most a record whose process is gone, which is no hold.  Takes and
 * drops of one group are serialised by its lock, STATE_DIR/holds/N.lock
 * (flock(2), waited for at most AV_HOLD_LOCK_WAIT_MS): two takers, or a
 * taker and a dropper, never interleave their look at the record, the
 * group's open, the holder's start and the record's write or removal.
 * Callers hold the pool's lock, or the device's scrub lock while the worker
 * scrubs it; the group lock is taken last and nothing is taken under it.
 *
 * What a hold does not cover: USB devices (no VFIO group); a device moved
 * off vfio-pci (on kernel 6.1 unbinding the last member of a group from
 * vfio-pci tears the vfio_group down and the held file no longer stops a new
 * one: the hold applies while the device is on vfio-pci); the moment between
 * a QEMU's exit and the hook's "release end". */
#pragma once

#include <glib.h>
#include <sys/syscall.h>

#include "util/av-root.h"
#include "vfio/av-kernel.h"

G_BEGIN_DECLS

/* pidfd_open(2) and pidfd_getfd(2), for C libraries whose headers lack
 * them (the holder's fd and a QEMU's group file are taken with them). */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/* The fd number of the group file in a holder process. */
#define AV_HOLD_FD 3
/* The fd number of the socket to its taker in a holder that has not yet
 * been told its record is written. */
#define AV_HOLD_SOCKET_FD 4
/* The holder's name (its program's name, and prctl(PR_SET_NAME): its
 * /proc/PID/comm). */
#define AV_HOLD_COMM "accelvirt-hold"
/* The oom_score_adj a holder asks for: never the OOM killer's choice. */
#define AV_HOLD_OOM_SCORE_ADJ -1000
/* The taker's word to a holder whose record is written, and its answer
 * once it holds (on AV_HOLD_SOCKET_FD, after the holder's "PID OOM\n"). */
#define AV_HOLD_WORD_GO 'g'
#define AV_HOLD_WORD_READY 'r'
/* How long av_hold_drop() waits for a holder to go after SIGTERM (then
 * as long after SIGKILL). */
#define AV_HOLD_DROP_WAIT_MS 2000
/* How long a take or a drop waits for the group's lock (another one of the
 * same group, which may wait 2 * AV_HOLD_DROP_WAIT_MS for a holder). */
#define AV_HOLD_LOCK_WAIT_MS 10000
/* How long a taker waits for its holder's first word. */
#define AV_HOLD_START_WAIT_MS 5000

/* A hold's record (STATE_DIR/holds/N.json). */
typedef struct {
    int group;
    int pid;
    guint64 start_time;          /* /proc/PID/stat field 22 */
    char *boot_id;               /* the boot the holder was started in, or NULL (a record older than boot ids) */
    char *address;               /* the PCI device it was taken for */
    char *since;                 /* ISO 8601 UTC */
    int oom_score_adj;           /* what the holder got, or AV_HOLD_OOM_UNKNOWN */
} AvHold;

/* AvHold's oom_score_adj when the record does not say. */
#define AV_HOLD_OOM_UNKNOWN G_MININT

void av_hold_free(AvHold *hold);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvHold, av_hold_free)

/* The holder program: $ACCELVIRT_HOLD when set and not empty (the tests'
 * build), else an accelvirt-hold beside the program that runs (a build
 * tree's, where the hook, the worker and the CLI run from it), else the
 * installed one (AV_HOLD_PATH, beside the installed worker).  Caller frees. */
char *av_hold_program(void);

/* The id of this boot as holds record it: @root's boot id
 * (av_root_boot_id()), or the host's when @root is a fake tree without one.
 * Returns 0 and *ret_boot_id (caller frees), or -errno. */
int av_hold_boot_id(const AvRoot *root, char **ret_boot_id);

/* Holds the VFIO group @group (of the PCI device @address, for the record)
 * open in a new holder process, recorded in @state_dir/holds/@group.json,
 * under the group's lock.  Idempotent: a live holder of @group already
 * recorded gives TRUE and nothing new.  Opens the group through
 * @ops->group_open (the fake table on a fake tree).  FALSE with
 * AV_ERROR_IN_USE when another process has the group open, naming it
 * (av_vfio_group_holder()); AV_ERROR_NOT_FOUND when there is no
 * /dev/vfio/@group (no member on vfio-pci); another error (AV_ERROR_LOCKED, exit status 3: retry,
 * when the group's lock could not be had in time) when the holder cannot be
 * started or recorded (no holder is left behind then).  The caller holds
 * the pool's lock, or the device's scrub lock. */
gboolean av_hold_take(const AvRoot *root, const AvKernelOps *ops, const char *state_dir, int group,
                      const char *address, GError **error);

/* The same without naming the process that has the group open on EBUSY
 * (naming it reads every process of the host): for the hook, whose work
 * grows with the domain. */
gboolean av_hold_take_quick(const AvRoot *root, const AvKernelOps *ops, const char *state_dir, int group,
                            const char *address, GError **error);

/* Holds an open file of group @group that the caller already has,
 * @group_fd (a file of /dev/vfio/@group: one taken from a QEMU with
 * pidfd_getfd(2), say), in a new holder recorded as av_hold_take() records
 * it, under the group's lock.  Borrows @group_fd: the holder gets its own
 * descriptor of the same open file, and the caller closes its one after
 * the call, whatever it returns (the kernel's one open file of the group is
 * then the holder's).  TRUE and nothing new when a live holder of @group is
 * recorded already.  The caller checked that @group_fd is that group's
 * file (nothing here can tell a fake tree's file from a real one) and
 * that @group is @address's group now. */
gboolean av_hold_take_fd(const AvRoot *root, const char *state_dir, int group, const char *address, int group_fd,
                         GError **error);

/* Ends the hold of @group, under the group's lock: when the record names a
 * live holder (av_hold_get()), SIGTERM, then waits up to
 * AV_HOLD_DROP_WAIT_MS for it to go (then SIGKILL); removes the record.  A
 * record of another boot, or whose process is gone or is not that holder,
 * is removed and no process signalled.  TRUE when there was no record or
 * its holder was gone already.  FALSE when the holder would not go, the
 * lock could not be had or the record cannot be removed. */
gboolean av_hold_drop(const AvRoot *root, const char *state_dir, int group, GError **error);

/* The live hold of @group: TRUE and the record in *ret_hold (caller frees),
 * or NULL when there is no record or it names no live holder: a record of
 * another boot or without a boot id, a holder gone (killed: the sweep,
 * av_pool_holds_sync(), takes the hold again), a pid that another process
 * has now (another start time, name or user).  FALSE only when the record
 * cannot be read.  @root gives the boot id (av_hold_boot_id()); the holder's
 * process is read from the host's /proc (it is a process of this machine
 * whatever the root prefix). */
gboolean av_hold_get(const AvRoot *root, const char *state_dir, int group, AvHold **ret_hold, GError **error);

/* The groups that have a record in @state_dir/holds (live or not), as ints
 * in a GArray, ascending.  Caller frees. */
GArray *av_hold_list_groups(const char *state_dir);

/* Removes, each under its group's lock, every record of @state_dir/holds
 * that names no live holder (see av_hold_get()): those of another boot or
 * without a boot id, and those whose holder is gone (a taker killed
 * between the record and its word, a holder killed).  No process is
 * signalled, but one: a record without a boot id (an accelvirt before
 * them) whose process is an accelvirt-hold of the user accelvirt runs as,
 * with the recorded start time, in this boot, gets SIGTERM, as
 * av_hold_drop() would, so that an upgrade leaves no hold behind that no
 * record names.  Stores in *ret_removed (may be NULL) how many records
 * went.  FALSE with the records it could not remove or read. */
gboolean av_hold_prune(const AvRoot *root, const char *state_dir, guint *ret_removed, GError **error);

/* A new fd (the caller's, close-on-exec) on the group file that the holder
 * of @group keeps open: pidfd_open(2) then pidfd_getfd(2) of AV_HOLD_FD, so
 * that the worker scrubs through the held group (ops->device_open_held)
 * without opening it a second time.  AV_ERROR_NOT_FOUND when there is no
 * live hold (av_hold_get()): never the fd of a process a stale record
 * names. */
gboolean av_hold_fd(const AvRoot *root, const char *state_dir, int group, int *ret_fd, GError **error);

/* The pids (as strings, "4242") of the live holders recorded in
 * @state_dir/holds, read under @root's /proc (the record of this boot, an
 * accelvirt-hold of the user accelvirt runs as with the recorded start
 * time): the processes av_vfio_groups_find_holder_full() must not take for
 * a QEMU.  A NULL @state_dir gives an empty set.  Caller frees. */
GHashTable *av_hold_pids(const AvRoot *root, const char *state_dir);

G_END_DECLS
