/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: scrubbing a released device before anyone else may have it.
 *
 * A profile's "scrub" steps run in order; the first that fails stops the
 * pipeline and the device is quarantined with the step and its message.
 * Methods: "none", "command" (an external program given the device's address
 * and IOMMU group, killed at its timeout; its exit status decides),
 * "vfio-zero", "reset", "rom-check", "usb-reset", "usb-reauthorize", "usb-power-cycle",
 * "program-base" (the profile's base bitstream programmed back;
 * av-scrub-program.c) (libaccelvirt.a) and "vm"
 * (av-scrub-vm.c, in libaccelvirt-virt.a: it calls libvirt).  The hook must
 * never link libvirt (docs/design.md), so "vm" is not in the method table until a
 * program that links libaccelvirt-virt.a calls av_scrub_vm_register()
 * (accelvirt and accelvirt-worker do, first thing); until then a "vm" step
 * fails, saying so, and the device is quarantined, never handed out
 * unscrubbed. */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "policy/av-policy.h"
#include "pool/av-pool.h"
#include "util/av-file.h"
#include "util/av-root.h"
#include "vfio/av-kernel.h"

G_BEGIN_DECLS

/* Progress of a long step (bytes zeroed so far, of @total), for
 * `accelvirt scrub`; called at most a few times a second. */
typedef void (*AvScrubProgressFunc)(gpointer data, const char *method, guint64 done, guint64 total);

typedef struct {
    const char *identity;        /* pool identity */
    const char *address;         /* PCI address, USB bus path, or an mdev's parent */
    int iommu_group;             /* -1 when none */
    const char *mdev_uuid;       /* for an mdev, else NULL */
    const char *rom_sha256;      /* the option ROM's hash enrolled for the device, or NULL */
    AvScrubProgressFunc progress; /* or NULL */
    gpointer progress_data;
    const char *scrub_token;     /* the pool's scrub token of the device (method "vm" puts it in the
                                  * scrub domain's av:scrub, see hooks), or NULL */
    const char *scrub_domain_uuid; /* the UUID the pool made with it for the scrub domain, or NULL (a
                                    * random one): method "vm" gives the domain this UUID and knows
                                    * its events by it, its name being random */
    const char *hold_state_dir;  /* the state dir of accelvirt's hold of the PCI device's group (av-hold.h),
                                  * or NULL: with it, a device on vfio-pci is scrubbed held from the first
                                  * step to the last (av_scrub_run() takes the hold, or runs no step): the
                                  * steps open the device through the held group file (av_hold_fd(),
                                  * ops->device_open_held), a "command" step's program gets it as fd 3,
                                  * and the hold is dropped around what needs the group elsewhere or
                                  * moves the device off vfio-pci ("vm" steps, vfio-zero's BAR resize) and
                                  * taken again after: a group that another process opened meanwhile
                                  * fails the step (AV_ERROR_IN_USE naming it), so the device is
                                  * quarantined; a hold found gone fails the step it is found in, whose
                                  * method never opens the device without it, and the scrub */
    const char *state_dir;       /* the state dir whose bitstream library a "program-base" step takes the
                                  * profile's base image from (av-bitstream.h), or NULL: @hold_state_dir
                                  * then, and without either the step fails */
    const char *original_driver; /* the PCI device's host driver (the pool's original_driver), where a
                                  * "program-base" step of a program with "driver": "host" runs, or NULL */
    const char *netdev;          /* a card of attach netdev: the network interface its host driver made
                                  * (av_pci_netdev_first()), which a "command" step gets in
                                  * ACCELVIRT_SCRUB_NETDEV; NULL when none */
} AvScrubTarget;

/* What a scrub program prints, one line per device, to say what it cleared
 * (accelvirt-policy(5), COVERAGE). */
#define AV_SCRUB_COVERAGE_PREFIX "accelvirt-coverage:"

/* Runs every scrub step of @profile on @target.  Fills *ret_report (caller
 * frees; may be NULL) with {"steps": [{"method", "ok", "seconds", "message",
 * ...facts of the method such as "bytes" and "coverage"}], "coverage"} for
 * every step run, the failing one included; the report's "coverage" is the
 * scrub's (av_scrub_coverage_summary()).  Returns FALSE at the first failing
 * step, with an error "scrub step N (METHOD) failed: ...", or, when every
 * step passed but the coverage is below the profile's "min_coverage" (or
 * unknown), with an error "the scrub cleared less than min_coverage ...:
 * NUMBERS".  A held target (its hold_state_dir, on vfio-pci) whose group
 * cannot be held fails before any step, *ret_report untouched, with
 * av_hold_take()'s error (AV_ERROR_IN_USE: another process has the group);
 * one whose hold is gone after the last step fails too. */
gboolean av_scrub_run(const AvRoot *root, const AvKernelOps *ops, const AvProfile *profile,
                      const AvScrubTarget *target, json_t **ret_report, GError **error);

/* TRUE when the failing step of the scrub @report (av_scrub_run()'s: its
 * last step, with "ok": false) is a "reset" step, for the pool's failure
 * counts (av_pool_count_scrub_failure()).  FALSE for NULL, for a
 * report whose steps all passed, and for any other method. */
gboolean av_scrub_report_failed_reset(json_t *report);

/* What the "program-base" step of the scrub @report (av_scrub_run()'s) put
 * in the device (its "programmed"), as a record for the pool
 * (av_pool_set_programmed()) made by @by ("scrub"), or NULL when no such
 * step passed.  Record it only once the device is freed.  Caller frees. */
AvProgrammed *av_scrub_report_programmed(json_t *report, const char *by);

/* The "program-base" step's entry of the scrub @report (its "program" is
 * av_program_run()'s report, for the journal's "program" event), or NULL.
 * Borrowed from @report. */
json_t *av_scrub_report_program_step(json_t *report);

/* Journals in @pool the programs a scrub of the device @identity ran
 * besides its steps' own: its "program-base" step's program (in @report,
 * av_scrub_run()'s) as event "program", and the on_free command (@on_free,
 * av_driver_run()'s report, or NULL) as event "driver", each with
 * "identity" and "by" (@by: "scrub" for the worker, "operator").  FALSE
 * with @error at the first entry that cannot be written. */
gboolean av_scrub_journal_runs(AvPool *pool, const char *identity, json_t *report, json_t *on_free, const char *by,
                               GError **error);

/* Puts the "vm" method (which calls libvirt) into the method table.
 * Defined in libaccelvirt-virt.a (src/scrub/av-scrub-vm.c): only programs
 * that link libvirt can call it, which the hook must never do.  Idempotent. */
void av_scrub_vm_register(void);

/* The coverage of a whole scrub from its @steps (the report's "steps"):
 * the step that cleared the most of the device's memory counts; the memory
 * is @profile's "memory" when it has one, else the largest a step knew.
 * {"cleared", "read_back", "memory" (null: unknown), "memory_source",
 * "fraction" (cleared / memory, at most 1; null when the memory is
 * unknown), "verified": "full" (every byte cleared was read back),
 * "partial", or "none", "step": the 1-based step that counted or null,
 * "note", "text": av_scrub_coverage_describe()}.  New reference. */
json_t *av_scrub_coverage_summary(const AvProfile *profile, json_t *steps);

/* One line for people of a coverage object (a step's or a scrub's), such
 * as "cleared 256 MiB of 48 GiB of device memory (0.5%), read back in full".
 * Caller frees. */
char *av_scrub_coverage_describe(json_t *coverage);

/* Takes, without waiting, the per-device scrub lock of the pool device
 * @identity (a file "scrub-SHA256(IDENTITY).lock" in @state_dir), which the
 * worker and `accelvirt scrub` hold while a device's steps run.  Returns
 * the lock (caller releases), or NULL with AV_ERROR_LOCKED when another
 * process holds it (another error when it cannot be taken at all). */
AvLock *av_scrub_lock_take(const char *state_dir, const char *identity, GError **error);

/* Before the steps of @profile run on the PCI device @address: when a step
 * needs the device on vfio-pci ("vfio-zero" opens it through VFIO, "reset"
 * must not pull a device from under a host driver, "vm" hands it to a scrub
 * domain; "rom-check" and "command" do not move it) and it is on another
 * driver or none, binds it to vfio-pci.  On success *ret_rebound is TRUE
 * when it was bound, and *ret_rebound_from (caller frees) names the driver
 * it was on then (NULL: none); FALSE and NULL when it did not move.
 * Returns FALSE with @error set when the bind fails, the outputs untouched. */
gboolean av_scrub_bind_vfio(const AvRoot *root, const AvKernelOps *ops, const AvProfile *profile,
                            const char *address, gboolean *ret_rebound, char **ret_rebound_from,
                            GError **error);

/* After steps that passed, before a PCI device may be freed: no process may
 * still hold its IOMMU group @group (a domain's QEMU that has it yet is no
 * device to hand to the next tenant): an fd on the group, on a member's vfio
 * cdev or device fd, or a member's BAR mapped (av_vfio_groups_find_holder()).
 * accelvirt's own holder recorded in @state_dir (av-hold.h) does not count.
 * Waits up to AV_SCRUB_GROUP_GRACE_US for the process of a domain that just
 * stopped to go.  Returns FALSE with AV_ERROR_UNSAFE naming the process and
 * how it holds the group ("process 4242 (/dev/vfio/devices/vfio3)"), or
 * saying why it cannot tell; TRUE for @group -1. */
#define AV_SCRUB_GROUP_GRACE_US (5 * G_USEC_PER_SEC)
gboolean av_scrub_group_released(const AvRoot *root, const char *state_dir, int group, const char *address,
                                 GError **error);

/* A PCI device about to be quarantined (a failed scrub, an identity
 * problem) goes to vfio-pci, away from the host's drivers, whatever its
 * steps needed: a managed='yes' device is back on its host driver after
 * release, a device found after a host reboot too.  Binds @address to
 * vfio-pci when it is on another driver or none; *ret_from (caller frees;
 * may be NULL) names the driver it was on (NULL: none or already on
 * vfio-pci), and *ret_isolated says whether it moved.  FALSE with @error
 * when the bind failed (the device stays where it is: say so). */
gboolean av_scrub_isolate(const AvRoot *root, const AvKernelOps *ops, const char *address, gboolean *ret_isolated,
                          char **ret_from, GError **error);

/* After a scrub that passed: gives @address, bound to vfio-pci by
 * av_scrub_bind_vfio(), back to @rebound_from (NULL: no driver). */
gboolean av_scrub_restore_rebound(const AvRoot *root, const AvKernelOps *ops, const char *address,
                                  const char *rebound_from, GError **error);

G_END_DECLS
