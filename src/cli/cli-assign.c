/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: giving claimed devices to a domain: programming the
 * ones whose placement says they must hold a bitstream they do not hold,
 * then the profiles' "on_assign" driver commands (accelvirt-policy(5),
 * PROGRAMMING and DRIVER COMMANDS).  `accelvirt define`, `start` and
 * `attach` call it once the devices are claimed for the domain.
 *
 * Programs take minutes: the pool's lock is not held while they run.
 * Before: every device to program is checked (claimed by the owner, on the
 * driver its program needs, the bitstream fits it), its record cleared
 * (av_pool_set_programmed(NULL)) and its claim made to last past the
 * program's timeouts; the pool is saved and unlocked.  After: the pool is
 * locked again and each outcome recorded only while the device is still
 * claimed by the same owner (an expired claim may have gone to someone
 * else: what the device holds then stays unknown).  Every program run is
 * journalled as "program", every driver command as "driver", with their
 * reports (av_program_run(), av_driver_run()). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "scrub/av-program.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "vfio/av-kernel.h"
#include "vfio/av-vfio.h"

/* How long past a program's timeouts (program, then verify) a claim made
 * or renewed for programming lasts: a killed CLI's claim expires. */
#define AV_CLI_ASSIGN_CLAIM_SLACK_S 60

/* One device being given to the domain. */
typedef struct {
    char *identity;
    char *address;
    const AvProfile *profile;    /* borrowed from the policy */
    const AvBitstream *bitstream; /* borrowed: what it must hold (its item's bitstream), or NULL */
    gboolean program;            /* it does not hold @bitstream: program it */
    gboolean assign;             /* run the profile's on_assign */
    gboolean marked;             /* this run set its claim_programmed (nothing ran for the claim before) */
    int iommu_group;             /* its IOMMU group, -1 none */
    int group_fd;                /* the VFIO group for a "vfio-pci" program, or -1 */
    char **argv;                 /* the program's expanded argv (av_program_argv()), or NULL */
    AvProgrammed *programmed;    /* the program's outcome to record */
    json_t *program_report;
    json_t *driver_report;
} AvAssignJob;

static void
av_assign_job_free(AvAssignJob *job)
{
    g_free(job->identity);
    g_free(job->address);
    if (job->group_fd >= 0)
        close(job->group_fd);
    g_strfreev(job->argv);
    av_programmed_free(job->programmed);
    if (job->program_report)
        json_decref(job->program_report);
    if (job->driver_report)
        json_decref(job->driver_report);
    g_free(job);
}

/* See cli.h. */
const AvBitstream *
av_cli_bitstream_by_sha256(const GPtrArray *bitstreams, const char *sha256)
{
    for (guint i = 0; bitstreams && sha256 && i < bitstreams->len; i++) {
        const AvBitstream *b = g_ptr_array_index(bitstreams, i);

        if (g_str_equal(b->sha256, sha256))
            return b;
    }
    return NULL;
}

/* See cli.h. */
gboolean
av_cli_assign_needed(const AvPolicy *policy, const AvPool *pool, const GPtrArray *items)
{
    for (guint i = 0; items && i < items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(items, i);
        const AvProfile *profile = av_policy_find(policy, item->profile);
        const AvPoolDevice *dev = item->identity ? av_pool_find((AvPool *)pool, item->identity) : NULL;

        if (profile && profile->drivers[AV_DRIVER_ON_ASSIGN])
            return TRUE;
        if (item->bitstream && !(dev && dev->programmed && g_str_equal(dev->programmed->sha256, item->bitstream)))
            return TRUE;
    }
    return FALSE;
}

/* See cli.h. */
int
av_cli_program_group_open(const AvRoot *root, const AvPciDevice *pci, GError **error)
{
    int fd = -1;
    int r;

    if (!av_pci_driver_is_vfio(pci->driver) || pci->iommu_group < 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "device %s is on %s%s, but its profile's program (driver \"vfio-pci\") needs it on vfio-pci "
                    "in an IOMMU group; 'accelvirt status' shows it",
                    pci->address, pci->driver ? pci->driver : "no driver",
                    pci->iommu_group < 0 ? " without an IOMMU group" : "");
        return -1;
    }
    r = av_kernel_ops_for(root)->group_open(root, pci->iommu_group, &fd);
    if (r < 0) {
        g_autofree char *holder = r == -EBUSY ? av_vfio_group_holder(root, pci->iommu_group) : NULL;

        g_set_error(error, AV_ERROR, r == -EBUSY ? AV_ERROR_IN_USE : AV_ERROR_STATE,
                    "cannot open VFIO group %d of %s for its program (%s%s%s): the group must be open nowhere "
                    "else",
                    pci->iommu_group, pci->address, g_strerror(-r), holder ? ", open in " : "",
                    holder ? holder : "");
        return -1;
    }
    return fd;
}

/* Under the lock: checks the device of @item, claimed by @owner, and fills
 * @job for it (the group opened for a "vfio-pci" program, the claim made
 * to last past the program's timeouts, the record cleared). */
static gboolean
av_assign_prepare(const AvRoot *root, AvPool *pool, const AvPolicy *policy, const AvOwner *owner,
                  const AvPlacedItem *item, const GPtrArray *bitstreams, const char *by, const GPtrArray *jobs,
                  AvAssignJob *job, GError **error)
{
    AvPoolDevice *dev = av_pool_find(pool, item->identity);
    const AvProgram *program;
    g_autoptr(AvPciDevice) pci = NULL;
    gint64 until;

    job->profile = av_policy_find(policy, item->profile);
    if (!job->profile) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "profile '%s' of device %s is not in the policy",
                    item->profile, item->identity);
        return FALSE;
    }
    if (!dev || dev->state != AV_DEVICE_STATE_CLAIMED || !dev->owner ||
        g_strcmp0(dev->owner->domain_uuid, owner->domain_uuid) != 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "device %s is not claimed for domain '%s' any more; 'accelvirt status' shows it",
                    item->identity, owner->domain_name ? owner->domain_name : owner->domain_uuid);
        return FALSE;
    }
    job->address = g_strdup(dev->address);
    /* What it holds, for on_assign's variables, even when it needs no program. */
    job->bitstream = item->bitstream ? av_cli_bitstream_by_sha256(bitstreams, item->bitstream) : NULL;
    if (!item->bitstream || (dev->programmed && g_str_equal(dev->programmed->sha256, item->bitstream)))
        return TRUE;
    job->program = TRUE;

    program = job->profile->program;
    if (!program || !job->bitstream || dev->kind != AV_DEVICE_KIND_PCI || !dev->address) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                    "device %s must hold bitstream %.12s… but %s", item->identity, item->bitstream,
                    !program ? "its profile has no \"program\""
                    : !job->bitstream ? "the library has no such bitstream ('accelvirt bitstream list')"
                                      : "it is no PCI device");
        return FALSE;
    }
    pci = av_pci_device_scan(root, dev->address, error);
    if (!pci)
        return FALSE;
    if (!av_bitstream_fits(job->bitstream, job->profile->name, pci->vendor_id, pci->device_id)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "bitstream '%s' does not fit device %s (%04x:%04x, profile '%s'); 'accelvirt bitstream list' "
                    "says what each fits",
                    job->bitstream->name, dev->address, pci->vendor_id, pci->device_id, job->profile->name);
        return FALSE;
    }
    job->iommu_group = pci->iommu_group;
    if (program->driver == AV_PROGRAM_DRIVER_VFIO) {
        /* The kernel lets one file of a group be open: the functions of one
         * card in one group share it. */
        for (guint i = 0; i < jobs->len && job->group_fd < 0; i++) {
            const AvAssignJob *other = g_ptr_array_index(jobs, i);

            if (other != job && other->group_fd >= 0 && other->iommu_group == job->iommu_group) {
                job->group_fd = dup(other->group_fd);
                if (job->group_fd < 0) {
                    g_set_error(error, AV_ERROR, AV_ERROR_IO, "cannot share VFIO group %d: %s", job->iommu_group,
                                g_strerror(errno));
                    return FALSE;
                }
            }
        }
        if (job->group_fd < 0)
            job->group_fd = av_cli_program_group_open(root, pci, error);
        if (job->group_fd < 0)
            return FALSE;
    } else if (av_pci_driver_is_vfio(pci->driver)) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "device %s is on vfio-pci, but its profile's program (driver \"host\") needs it on its host "
                    "driver; 'accelvirt status' shows it",
                    dev->address);
        return FALSE;
    }
    /* The program, then its verify command, each up to the timeout. */
    until = g_get_real_time() / G_USEC_PER_SEC + (gint64)program->timeout_s * 2 + AV_CLI_ASSIGN_CLAIM_SLACK_S;
    if (dev->claim_expires > 0 && dev->claim_expires < until && !av_pool_claim(pool, dev, owner, until, error))
        return FALSE;
    /* From here the card may hold the domain's image, whatever happens to
     * the program: the claim ends dirty (av_pool_unclaim()).  The
     * operator's own programming of a free card ends free. */
    if (g_strcmp0(by, "operator") != 0 && !dev->claim_programmed)
        job->marked = dev->claim_programmed = TRUE;
    return av_pool_set_programmed(pool, dev, NULL, "programming started", error);
}

/* The earlier job of @jobs (before @job) that ran the very same program
 * as @job would (same bitstream, same expanded argv: the functions of one
 * card whose template names only {card}) and succeeded, or NULL. */
static const AvAssignJob *
av_assign_same_program(const GPtrArray *jobs, const AvAssignJob *job)
{
    for (guint i = 0; i < jobs->len; i++) {
        const AvAssignJob *other = g_ptr_array_index(jobs, i);

        if (other == job)
            break;
        if (other->programmed && other->argv && job->argv && other->program && other->bitstream == job->bitstream &&
            other->profile == job->profile && g_strv_equal((const char *const *)other->argv,
                                                           (const char *const *)job->argv))
            return other;
    }
    return NULL;
}

/* Without the lock: programs @job's device (unless an earlier job of @jobs
 * ran the same program), then runs its on_assign. */
static gboolean
av_assign_run(const AvCli *cli, const AvRoot *root, const AvOwner *owner, const char *by, const GPtrArray *jobs,
              AvAssignJob *job, gboolean quiet, GError **error)
{
    AvProgramTarget target = { 0 };

    target.root = root;
    target.state_dir = cli->state_dir;
    target.profile = job->profile;
    target.address = job->address;
    target.identity = job->identity;
    target.domain_name = owner->domain_name;
    target.domain_uuid = owner->domain_uuid;
    target.group_fd = job->group_fd;
    if (job->program) {
        const AvAssignJob *same;

        job->argv = av_program_argv(&target, job->bitstream, error);
        if (!job->argv)
            return FALSE;
        same = av_assign_same_program(jobs, job);
        if (same) {
            job->programmed = av_programmed_new(same->programmed->sha256, same->programmed->name, by,
                                                same->programmed->verified);
            job->program_report = json_pack("{s:s,s:s?,s:s,s:s,s:b,s:s?}", "point", "program", "address", job->address,
                                            "sha256", job->bitstream->sha256, "name", job->bitstream->name, "ok", TRUE,
                                            "same_program_as", same->address);
            goto assign;
        }
        if (!quiet)
            fprintf(stderr, "accelvirt: programming %s with '%s' (up to %u s)...\n", job->address,
                    job->bitstream->name, job->profile->program->timeout_s);
        job->programmed = av_program_run(&target, job->bitstream, by, &job->program_report, error);
        if (!job->programmed)
            return FALSE;
    }
assign:
    if (!job->assign)
        return TRUE;
    /* A driver command gets no group file. */
    target.group_fd = -1;
    return av_driver_run(&target, AV_DRIVER_ON_ASSIGN, job->bitstream, &job->driver_report, error);
}

/* Under the lock, right before @job runs: its device must still be
 * claimed by @owner, and the claim is made to last past what the job may
 * take (its program and verify, its on_assign, each up to its timeout).
 * FALSE, nothing run, when the claim is gone (it expired while earlier
 * jobs ran, and the device may be another domain's now). */
static gboolean
av_assign_lease(const AvCli *cli, const AvRoot *root, const AvOwner *owner, const AvAssignJob *job, GError **error)
{
    g_autoptr(AvPool) pool = NULL;
    AvPoolDevice *dev;
    gint64 until = g_get_real_time() / G_USEC_PER_SEC + AV_CLI_ASSIGN_CLAIM_SLACK_S;

    if (!job->program && !job->assign)
        return TRUE;
    pool = av_cli_open_pool(cli, root, AV_POOL_WRITE, error);
    if (!pool)
        return FALSE;
    dev = av_pool_find(pool, job->identity);
    if (!dev || dev->state != AV_DEVICE_STATE_CLAIMED || !dev->owner ||
        g_strcmp0(dev->owner->domain_uuid, owner->domain_uuid) != 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "device %s is no longer claimed for domain '%s' (its claim expired?): nothing was run on it",
                    job->address ? job->address : job->identity,
                    owner->domain_name ? owner->domain_name : owner->domain_uuid);
        return FALSE;
    }
    if (job->program)
        until += (gint64)job->profile->program->timeout_s * 2;
    if (job->assign)
        until += job->profile->drivers[AV_DRIVER_ON_ASSIGN]->timeout_s;
    if (dev->claim_expires > 0 && dev->claim_expires < until && !av_pool_claim(pool, dev, owner, until, error))
        return FALSE;
    return av_pool_save(pool, error);
}

/* Under the lock again: records @job's outcome while its device is still
 * claimed by @owner, journals its reports.  A device that is no longer
 * ours but was programmed (its claim expired during the run) loses its
 * record: what it holds is not what the pool said. */
static gboolean
av_assign_record(AvPool *pool, const AvOwner *owner, AvAssignJob *job, GError **error)
{
    AvPoolDevice *dev = av_pool_find(pool, job->identity);
    gboolean ours = dev && dev->state == AV_DEVICE_STATE_CLAIMED && dev->owner &&
                    g_strcmp0(dev->owner->domain_uuid, owner->domain_uuid) == 0;

    if (job->program_report) {
        g_autoptr(json_t) report = json_deep_copy(job->program_report);

        json_object_set_new(report, "recorded", json_boolean(ours && job->programmed));
        if (!av_program_journal(pool, "program", report, job->identity, owner->domain_name, owner->domain_uuid,
                                "assign", error))
            return FALSE;
    }
    if (job->driver_report && !av_program_journal(pool, "driver", job->driver_report, job->identity,
                                                  owner->domain_name, owner->domain_uuid, "assign", error))
        return FALSE;
    if (!ours && dev && job->program_report &&
        !av_pool_set_programmed(pool, dev, NULL, "a program for another domain ran on it after that domain's claim "
                                "expired", error))
        return FALSE;
    if (!ours && (job->program || job->assign)) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "device %s was no longer claimed for domain '%s' when its %s ended (its claim expired?): "
                    "what it holds is not recorded",
                    job->address ? job->address : job->identity,
                    owner->domain_name ? owner->domain_name : owner->domain_uuid,
                    job->program ? "programming" : "on_assign command");
        return FALSE;
    }
    if (job->programmed && !av_pool_set_programmed(pool, dev, g_steal_pointer(&job->programmed), NULL, error))
        return FALSE;
    return TRUE;
}

/* See cli.h. */
gboolean
av_cli_assign(const AvCli *cli, const AvRoot *root, const AvPolicy *policy, AvPool **pool, const AvOwner *owner,
              const GPtrArray *items, const GPtrArray *bitstreams, GHashTable *assign, const char *by,
              guint *ret_programmed, GError **error)
{
    g_autoptr(GPtrArray) jobs = g_ptr_array_new_with_free_func((GDestroyNotify)av_assign_job_free);
    g_autoptr(GError) failure = NULL;
    guint programmed = 0;

    for (guint i = 0; items && i < items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(items, i);
        AvAssignJob *job;

        if (!item->identity)
            continue; /* an mdev: the hook makes it at prepare */
        job = g_new0(AvAssignJob, 1);
        job->group_fd = -1;
        job->iommu_group = -1;
        job->identity = g_strdup(item->identity);
        g_ptr_array_add(jobs, job);
        if (!av_assign_prepare(root, *pool, policy, owner, item, bitstreams, by, jobs, job, &failure))
            break;
        job->assign = job->profile->drivers[AV_DRIVER_ON_ASSIGN] &&
                      (!assign || g_hash_table_contains(assign, item->identity));
    }
    if (failure) {
        /* Nothing ran: the records cleared so far stay unknown, which is
         * no lie, and no card holds the domain's image (their claims may
         * end free); saved with the rest by the caller. */
        for (guint i = 0; i < jobs->len; i++) {
            const AvAssignJob *job = g_ptr_array_index(jobs, i);
            AvPoolDevice *dev = job->marked ? av_pool_find(*pool, job->identity) : NULL;

            if (dev && dev->state == AV_DEVICE_STATE_CLAIMED)
                dev->claim_programmed = FALSE;
        }
        g_propagate_error(error, g_steal_pointer(&failure));
        return FALSE;
    }
    if (!av_pool_save(*pool, error))
        return FALSE;
    g_clear_pointer(pool, av_pool_free);

    /* Progress for people at a terminal; a failure stays one line.  Each
     * job's claim is checked and renewed right before it runs: the runs
     * before it may have taken longer than its claim had left. */
    for (guint i = 0; i < jobs->len && !failure; i++) {
        AvAssignJob *job = g_ptr_array_index(jobs, i);

        if (av_assign_lease(cli, root, owner, job, &failure))
            av_assign_run(cli, root, owner, by, jobs, job, cli->json || !isatty(STDERR_FILENO), &failure);
    }
    for (guint i = 0; i < jobs->len; i++) {
        AvAssignJob *job = g_ptr_array_index(jobs, i);

        if (job->group_fd >= 0) {
            close(job->group_fd);
            job->group_fd = -1;
        }
    }

    *pool = av_cli_open_pool(cli, root, AV_POOL_WRITE, error);
    if (!*pool)
        return FALSE;
    for (guint i = 0; i < jobs->len; i++) {
        AvAssignJob *job = g_ptr_array_index(jobs, i);
        GError *local = NULL;

        programmed += job->programmed != NULL;
        if (!av_assign_record(*pool, owner, job, failure ? NULL : &local) && local)
            g_propagate_error(&failure, local);
    }
    if (failure) {
        g_propagate_error(error, g_steal_pointer(&failure));
        return FALSE;
    }
    if (ret_programmed)
        *ret_programmed = programmed;
    return TRUE;
}
