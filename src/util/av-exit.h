/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the exit statuses, one meaning each, and the one mapping from
 * an error code (av-error.h) to them.  accelvirt(1) (EXIT STATUS) and
 * accelvirt-hook(8) say the same, and the tests check them: a script that
 * runs accelvirt decides what to do next from this table alone.
 *
 *   status  meaning                                 what the caller does
 *   ------  --------------------------------------  --------------------------------------
 *   0       done                                    nothing
 *   1       failed: anything not below (a write     read the one line on stderr; the same
 *           that failed, a device that is not       command fails again until what it
 *           there, a refused transition...)         names is put right
 *   2       bad command line, bad input or a bad    fix the input or the policy; the same
 *           policy file                             command fails again as it is
 *   3       locked: another accelvirt holds a       run the same command again when that
 *           lock (the pool's, which accelvirt       one is done
 *           waited 30 s for; a device's scrub
 *           lock; an attach in flight)
 *   4       corrupt state: the state file does      an operator moves it away or repairs it
 *           not parse; nothing was changed          (the message names the file and line)
 *   5       in use: a device, IOMMU group,          free it first (stop the domain, end
 *           bitstream or name is taken by a         the process, remove the name); running
 *           domain, a process or a record           the command again alone does not help
 *   6       no capacity: not enough free devices    free some (release, wait for scrubs),
 *           (or instances, or a node or switch      or ask for fewer, another node or
 *           that holds them) for the request        p2p="preferred"
 *
 * accelvirt (src/cli) exits with these; av_cli_fail() turns an error into
 * its status through av_exit_status().  A Placement generation conflict is
 * AV_ERROR_LOCKED as well, but `accelvirt placement sync` tries it again
 * and keeps what it could not write pending: exit 1, not 3.
 *
 * The hook, accelvirt-hook (hooks/accelvirt-hook.c, installed as
 * /etc/libvirt/hooks/qemu.d/accelvirt), exits 0 or 1 only: libvirt tells
 * zero from non-zero and nothing more (its docs/hooks.rst).  0 lets the
 * operation go on.  1 refuses it, with one line "accelvirt: ..." on
 * stderr, whatever the reason (a device in use, too few free devices, the
 * pool locked past AV_HOOK_LOCK_TIMEOUT_MS, bad XML): libvirt stops the
 * domain's prepare, start or restore and puts that line in its error; a 1
 * of "release end" stops nothing (libvirt logs it), and what was not
 * released is left for the next accelvirt call.  The scrub worker,
 * accelvirt-worker (hooks/hook-worker.c), which the hook starts detached
 * and nobody waits for, exits 0 when no device is left for it and 1 when it
 * could not go on (no policies, no pool); what it did is in the journal and
 * syslog.  accelvirt-hold, which only av_hold_take() runs, answers its
 * taker on a socket; its status is no one's interface. */
#pragma once

#include "util/av-error.h"

G_BEGIN_DECLS

/* The statuses of the table above. */
typedef enum {
    AV_EXIT_OK = 0,
    AV_EXIT_FAILURE = 1,
    AV_EXIT_USAGE = 2,
    AV_EXIT_LOCKED = 3,
    AV_EXIT_CORRUPT = 4,
    AV_EXIT_IN_USE = 5,
    AV_EXIT_NO_CAPACITY = 6,
} AvExitStatus;

/* The exit status of an error of the AV_ERROR domain with @code: 2 for
 * AV_ERROR_INVALID_INPUT and AV_ERROR_POLICY, 3 for AV_ERROR_LOCKED, 4 for
 * AV_ERROR_CORRUPT_STATE, 5 for AV_ERROR_IN_USE, 6 for AV_ERROR_NO_CAPACITY,
 * 1 for any other (a code that is no AvErrorCode too). */
AvExitStatus av_exit_status(int code);

G_END_DECLS
