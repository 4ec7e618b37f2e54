/* accelvirt: kernel-enforced holds of VFIO groups (issue 14).
 *
 * The pool refuses a dirty, scrubbing or quarantined device to every domain;
 * a hold makes the kernel refuse it too, even to a `virsh attach-device`
 * behind accelvirt's back.  The kernel lets one open file of a VFIO group
 * exist at a time (vfio_group_fops_open answers -EBUSY to the next open,
 * Documentation/driver-api/vfio.rst), so accelvirt keeps /dev/vfio/GROUP
 * open in a small process of its own, the holder ("accelvirt-hold"): a
 * QEMU's open of the group then fails with EBUSY, and libvirt's attach or
 * start fails with it.
 *
 * The holder is a grandchild of whoever takes the hold, reparented to init
 * (nobody waits for it), in a session of its own; it keeps the group file as
 * fd 3 (AV_HOLD_FD), nothing else open (stdin, stdout and stderr on
 * /dev/null), and waits for SIGTERM.  Its record is STATE_DIR/holds/N.json:
 * {"pid", "start_time" (/proc/PID/stat field 22, proc(5): with the pid it
 * names the process, whatever reuses the pid later), "group", "address",
 * "since"}; a holder starts holding only once its record is written (a
 * taker killed before that leaves no holder behind, at most a record whose
 * process is gone, which is no hold).  Takes and drops happen under the
 * pool's lock, or the device's scrub lock while the worker scrubs it.
 *
 * What a hold does not cover: USB devices (no VFIO group); a device moved
 * off vfio-pci (on kernel 6.1 unbinding the last member of a group from
 * vfio-pci tears the vfio_group down and the held file no longer stops a new
 * one: the hold applies while the device is on vfio-pci); the moment between
 * a QEMU's exit and the hook's "release end". */
#pragma once

#include <glib.h>

#include "util/av-root.h"
#include "vfio/av-kernel.h"

G_BEGIN_DECLS

/* The fd number of the group file in a holder process. */
#define AV_HOLD_FD 3
/* The holder's name (prctl(PR_SET_NAME), /proc/PID/comm). */
#define AV_HOLD_COMM "accelvirt-hold"
/* How long av_hold_drop() waits for a holder to go after SIGTERM. */
#define AV_HOLD_DROP_WAIT_MS 2000

/* A hold's record (STATE_DIR/holds/N.json). */
typedef struct {
    int group;
    int pid;
    guint64 start_time;          /* /proc/PID/stat field 22 */
    char *address;               /* the PCI device it was taken for */
    char *since;                 /* ISO 8601 UTC */
} AvHold;

void av_hold_free(AvHold *hold);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvHold, av_hold_free)

/* Holds the VFIO group @group (of the PCI device @address, for the record)
 * open in a new holder process, recorded in @state_dir/holds/@group.json.
 * Idempotent: a live holder of @group already recorded gives TRUE and
 * nothing new.  Opens the group through @ops->group_open (the fake table on
 * a fake tree).  FALSE with AV_ERROR_BUSY when another process has the group
 * open, naming it (av_vfio_group_holder()); AV_ERROR_NOT_FOUND when there is
 * no /dev/vfio/@group (no member on vfio-pci); another error when the holder
 * cannot be started or recorded (no holder is left behind then).  The
 * caller holds the pool's lock. */
gboolean av_hold_take(const AvRoot *root, const AvKernelOps *ops, const char *state_dir, int group,
                      const char *address, GError **error);

/* The same without naming the process that has the group open on EBUSY
 * (naming it reads every process of the host): for the hook, whose work
 * grows with the domain. */
gboolean av_hold_take_quick(const AvRoot *root, const AvKernelOps *ops, const char *state_dir, int group,
                            const char *address, GError **error);

/* Ends the hold of @group: when the recorded process is still that holder
 * (its start time and name agree), SIGTERM, then waits up to
 * AV_HOLD_DROP_WAIT_MS for it to go (then SIGKILL); removes the record.
 * TRUE when there was no record or its holder was gone already.  FALSE when
 * the holder would not go or the record cannot be removed.  @root is
 * unused but for symmetry (the holder is a process of this machine). */
gboolean av_hold_drop(const AvRoot *root, const char *state_dir, int group, GError **error);

/* The live hold of @group: TRUE and the record in *ret_hold (caller frees),
 * or NULL when there is no record or its holder is gone (a killed holder:
 * av_pool_holds_sync() takes the hold again).  FALSE only when the record
 * cannot be read. */
gboolean av_hold_get(const char *state_dir, int group, AvHold **ret_hold, GError **error);

/* The groups that have a record in @state_dir/holds (live or not), as ints
 * in a GArray, ascending.  Caller frees. */
GArray *av_hold_list_groups(const char *state_dir);

/* A new fd (the caller's, close-on-exec) on the group file that the holder
 * of @group keeps open: pidfd_open(2) then pidfd_getfd(2) of AV_HOLD_FD, so
 * that the worker scrubs through the held group (ops->device_open_held)
 * without opening it a second time.  AV_ERROR_NOT_FOUND when there is no
 * live hold. */
gboolean av_hold_fd(const AvRoot *root, const char *state_dir, int group, int *ret_fd, GError **error);

/* The pids (as strings, "4242") of the holders recorded in @state_dir/holds
 * whose process under @root's /proc has the recorded start time: the
 * processes av_vfio_groups_find_holder_full() must not take for a QEMU.
 * A NULL @state_dir gives an empty set.  Caller frees. */
GHashTable *av_hold_pids(const AvRoot *root, const char *state_dir);

G_END_DECLS
