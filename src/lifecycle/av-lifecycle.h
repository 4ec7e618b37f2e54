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
 *     quarantined (unscrubbed)                              process has open (av_pool_release_device())
 *   any -> quarantined         av_pool_quarantine_force()   the audit's and watch's violations
 *                                                           (av-audit.c)
 *   quarantined -> free        av_pool_clear_quarantine()   accelvirt quarantine clear (cli-scrub.c)
 *   any -> missing and back    av_pool_reconcile()          every whole scan (av-pool-reconcile.c)
 *
 * What the host sees as devices are handed to a domain (the endpoints bound
 * to a vfio driver, the vGPUs and mdevs made, recorded first in a
 * write-ahead intent, undone newest first, the companions recorded) is one
 * binding (av-binding.h), which the hook's prepare (hook-prepare.c) and
 * accelvirt attach (cli-attach.c) both plan, apply and commit.
 *
 * The release holds what it releases before the move is journalled (a PCI
 * function's IOMMU group, a USB stick de-authorized, an mdev removed), for
 * every caller alike, and leaves the profile's on_release command owed
 * (release_pending): the scrub job runs it, for every release alike, before
 * any scrub step; failing, the device is quarantined, unscrubbed.  The
 * on_prepare command runs where the domain gets its devices: under the
 * pool's lock in the hook's prepare, without it in accelvirt attach (which
 * then runs on_assign).  A refused prepare runs the on_release of each
 * device whose on_prepare passed, at once, under the lock (no release
 * follows: the devices were never in use); a rolled-back attach releases
 * such a device instead (dirty), and its scrub runs the on_release.
 * Every driver command and program run is journalled in one shape
 * (av_program_journal(), scrub/av-program.h). */
#pragma once

#include "lifecycle/av-binding.h"
#include "lifecycle/av-scrub-job.h"
#include "pool/av-pool.h"
#include "scrub/av-program.h"
