/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the scrub transaction, written once for the scrub worker and
 * for `accelvirt scrub`.
 *
 *   dirty ----------> scrubbing --(steps pass, identity kept, health ok)--> free
 *   free (by hand) -/     |
 *                         +--(anything else)--> quarantined
 *   quarantined (by hand) ------------------> quarantined (steps recorded)
 *
 *   av_scrub_job_begin()   under the pool lock: the move to scrubbing, a
 *                          fresh scrub token, saved; a copy of what the
 *                          steps need (the caller holds the device's scrub
 *                          lock from before this until after finish)
 *   av_scrub_job_run()     without the pool lock (a scrub may take minutes,
 *                          other domains' hooks keep going): the release
 *                          work still owed (on_release), the bind to
 *                          vfio-pci a step needs, the profile's steps, the
 *                          check that the group was let go, on_free
 *   av_scrub_job_finish()  under the pool lock again: the check of what
 *                          can have changed (a tenant's firmware may have
 *                          changed the card's identity, at once or at the
 *                          scrub's reset: av_scrub_job_scan() and
 *                          av_scrub_job_confirm(), else a reconcile with
 *                          the whole host), the drivers given back, the health
 *                          check, the move to free or quarantined, the
 *                          certificate in the journal before the save, and
 *                          the kernel-enforced holds brought up to date
 *
 * Callers: hooks/hook-worker.c (devices the hook and every other release
 * made dirty) and src/cli/cli-scrub.c (`accelvirt scrub`, an operator's
 * scrub by hand of a free, dirty or quarantined device).  What differs
 * between them is who is named in the journal, where notes go and how the
 * pool is opened; the steps, their order and the rules are the same. */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "policy/av-policy.h"
#include "pool/av-pool.h"
#include "scrub/av-scrub.h"
#include "util/av-root.h"
#include "vfio/av-kernel.h"

G_BEGIN_DECLS

/* Where a scrub job's notes go: @priority is a syslog(3) priority;
 * @outcome says the line tells what became of the device (free,
 * quarantined, a health warning), which a caller that prints the outcome
 * itself leaves out. */
typedef void (*AvScrubNoteFunc)(gpointer data, int priority, gboolean outcome, const char *message);

/* Opens the pool for writing, with its lock (the caller's timeout). */
typedef AvPool *(*AvScrubOpenPoolFunc)(gpointer data, GError **error);

typedef struct {
    const AvRoot *root;
    const AvKernelOps *ops;
    const char *state_dir;
    const AvPolicy *policy;
    /* `accelvirt scrub`: the operator who ran it, journalled; NULL: the
     * worker.  The journal's "scrubbed_by" says "operator" or "worker", and
     * the programs' runs "operator" or "scrub". */
    const char *operator_name;
    AvScrubOpenPoolFunc open_pool;
    gpointer open_pool_data;
    AvScrubNoteFunc note;        /* may be NULL: notes dropped */
    gpointer note_data;
    AvScrubProgressFunc progress; /* a zeroing step's progress, or NULL */
    gpointer progress_data;
} AvScrubContext;

/* One device's scrub: a copy of what the steps need (the pool is not held
 * while they run), then what they did. */
typedef struct {
    char *identity;
    AvDeviceKind kind;
    char *address;
    char *profile;
    int iommu_group;
    char *rom_sha256;            /* enrolled ROM hash, or NULL */
    char *scrub_token;           /* the pool's token for this scrub (av:scrub of a scrub domain) */
    char *scrub_domain;          /* and the UUID its scrub domain must have */
    AvOwner *owner;              /* the domain that had it before its release, or NULL */
    char *original_driver;       /* PCI: its host driver as the pool knows it, or NULL */
    gboolean release_pending;    /* its profile's on_release is owed (the pool's release_pending) */
    char *release_bitstream;     /* with it: the SHA-256 the domain's placement record said the device must
                                  * hold (the command's bitstream variables), or NULL */
    char *since;                 /* when the scrub began (ISO 8601 UTC) */
    AvDeviceState from;          /* dirty, scrubbing (its worker died), or, by hand, free or quarantined */

    /* What av_scrub_job_run() did. */
    json_t *report;              /* av_scrub_run()'s, or NULL when no step ran */
    json_t *on_release;          /* the on_release run, or NULL */
    json_t *on_free;             /* the on_free run, or NULL */
    GError *failure;             /* why it may not be freed, or NULL */
    gboolean release_failed;     /* on_release failed: no step ran, what the domain left is there */
    gboolean rebound;            /* bound to vfio-pci for the steps */
    char *rebound_from;          /* from this driver (NULL: none) */

    /* What av_scrub_job_finish() decided. */
    const char *result;          /* "free" or "quarantined" */
    char *health_warning;        /* a "warn" of the profile's health limits, journalled, or NULL */
} AvScrubJob;

void av_scrub_job_free(AvScrubJob *job);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvScrubJob, av_scrub_job_free)

/* Under the pool lock (@pool opened for writing) and @dev's scrub lock
 * (av_scrub_lock_take(), held by the caller until after
 * av_scrub_job_finish()): moves @dev to scrubbing (dirty, or free by hand:
 * av_pool_scrub_begin() naming the operator; a device left scrubbing by a
 * worker that died, or quarantined by hand, keeps its state), gives it a
 * fresh scrub token, holds a USB stick for its steps (a hold that fails
 * fails the scrub: the device ends quarantined) and saves.  Returns the
 * job, or NULL with @error and nothing saved. */
AvScrubJob *av_scrub_job_begin(const AvScrubContext *ctx, AvPool *pool, AvPoolDevice *dev, GError **error);

/* Without the pool lock: the steps of @job, recorded in it.  Never fails:
 * a failure is the job's (job->failure), and the device ends quarantined. */
void av_scrub_job_run(const AvScrubContext *ctx, AvScrubJob *job);

/* Under the pool lock again (ctx->open_pool): records the outcome of @job
 * as the header says, the certificate journalled before the save, and sets
 * job->result.  FALSE with @error when the outcome cannot be recorded
 * (the pool cannot be opened, read or saved, the device left the pool or
 * is no longer scrubbing, the health check, the move, the removal of an
 * mdev, the programmed record or the certificate cannot be written): the
 * device stays as the pool has it, and one left scrubbing is scrubbed
 * again by the next worker, which the caller starts.  With @ret_pool and @ret_host
 * (both or neither), the pool (still locked) and the host scanned after
 * the scrub (or NULL; partial, av_host_scan_devices(), when the check
 * confirmed it: it holds the device, its group and its PF) are handed to
 * the caller for what it does next. */
gboolean av_scrub_job_finish(const AvScrubContext *ctx, AvScrubJob *job, AvPool **ret_pool, AvHost **ret_host,
                             GError **error);

/* The check after a scrub, its read (without the pool lock): the device of
 * @job with what its identity and IOMMU group involve (its group's
 * members, its PF, the bridges above it: av_host_scan_devices()), every
 * PCI function that may present its identity
 * (av_pool_identity_presenters(): a serial copied onto another card, two
 * cards swapping theirs), the mdev parents for an mdev, every USB device
 * for a stick.  Returns a partial host (caller frees), *ret_addresses the
 * PCI functions asked for (NULL-terminated, caller frees); for a PCI
 * device without a valid address, the whole host (not partial, no
 * *ret_addresses); or NULL with @error set. */
AvHost *av_scrub_job_scan(const AvRoot *root, const AvScrubJob *job, char ***ret_addresses, GError **error);

/* The check after a scrub, its verdict (under the pool lock): TRUE when
 * @pool agrees with @host and @addresses of av_scrub_job_scan()
 * (av_pool_confirm(): reconciled with the whole host in this boot, every
 * function of @host as the pool has it, no two presenting one identity;
 * and every function of @addresses that the pool has a device at still
 * there): a reconcile with the whole host would change nothing that
 * decides the scrubbed device's fate.  Else FALSE with *ret_why (caller
 * frees): av_scrub_job_finish() then reconciles with the whole host.
 * Changes nothing. */
gboolean av_scrub_job_confirm(const AvPool *pool, const AvPolicy *policy, const AvHost *host, char **addresses,
                              char **ret_why);

G_END_DECLS
