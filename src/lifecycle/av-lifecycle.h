/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: a device's life, each move written once.  What the hook, the
 * worker and the CLI call to move a pooled device from one state to the
 * next (docs/design.md, "Device states"), the function that makes each
 * move, and its callers:
 *
 *   move                       function                     callers
 *   -------------------------  ---------------------------  -------------------------------------
 *   free -> claimed            av_pool_claim()              accelvirt define/start/rewrite
 *                                                           (cli-domain.c), program (cli-bitstream.c),
 *                                                           the audit's attached-outside (av-audit.c)
 *   claimed -> claimed         av_pool_claim() (renewed)    the same, and define/start's programs
 *                                                           (cli-assign.c)
 *   claimed -> free or dirty   av_pool_unclaim()            undefine (cli-domain.c); an expired
 *                              (av_pool_expire_claims())    claim: the hook, reconcile, stale and
 *                                                           every whole scan (av-pool-reconcile.c)
 *   free/claimed -> in-use     av_pool_take()               the hook's prepare (hook-prepare.c) and
 *                                                           reconnect (hook-reconnect.c), accelvirt
 *                                                           attach (cli-attach.c)
 *   in-use -> free             av_pool_attach_undo()        an attach the guest never had
 *                                                           (cli-attach.c)
 *   in-use -> dirty            av_pool_release_device()     the hook's release end (hook-release.c,
 *                              (av_pool_release_owner())    through the owner), accelvirt detach
 *                                                           (cli-detach.c), release (cli-release.c),
 *                                                           stale --release (cli-stale.c), the audit
 *                                                           (av-audit.c), the upkeep of every locked
 *                                                           call (av-pool-upkeep.c: release markers,
 *                                                           dead domains, the previous boot)
 *   dirty -> scrubbing ->      av_scrub_job_begin(), _run(),  the worker (hook-worker.c) and
 *     free or quarantined      _finish() (av-scrub-job.h)   accelvirt scrub (cli-scrub.c)
 *   dirty/scrubbing ->         av_pool_quarantine_unscrubbed()  a release whose group another
 *     quarantined (unscrubbed)                              process has open (av_pool_release_device()),
 *                                                           a failed on_release (hook-release.c)
 *   any -> quarantined         av_pool_quarantine_force()   the audit's and watch's violations
 *                                                           (av-audit.c)
 *   quarantined -> free        av_pool_clear_quarantine()   accelvirt quarantine clear (cli-scrub.c)
 *   any -> missing and back    av_pool_reconcile()          every whole scan (av-pool-reconcile.c)
 *
 * The release holds what it releases before the move is journalled (a PCI
 * function's IOMMU group, a USB stick de-authorized, an mdev removed), for
 * every caller alike.  Every driver command and program run is journalled
 * in one shape (av_program_journal(), scrub/av-program.h).
 *
 * Not yet written once: the prepare's binding (the write-ahead intent, the
 * bind to vfio-pci, the companions, the mdevs and VFs, on_prepare) is the
 * hook's (hook-prepare.c) and accelvirt attach's (cli-attach.c), each its
 * own; the on_release command runs at once in the hook's release and in
 * detach, and in the worker's scrub job for the other releases. */
#pragma once

#include "lifecycle/av-scrub-job.h"
#include "pool/av-pool.h"
#include "scrub/av-program.h"
