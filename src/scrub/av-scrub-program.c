/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the scrub method "program-base": the profile's base
 * bitstream ("program": {"base": ...}, accelvirt-policy(5), PROGRAMMING)
 * programmed back into the device, so that no tenant's logic survives its
 * release (seed 000: firmware matters more than memory).  The policy makes
 * it the profile's first step.  The program runs as av_program_run() says
 * (the library file checked, the fit checked, then "program" and "verify");
 * the step's report gets "program" (that run's report) and, when it
 * passed, "programmed": {"sha256", "name", "verified"}, which the worker
 * records in the pool (av_pool_set_programmed(), by "scrub") once the
 * device is freed. */
#include "config.h"

#include "av-scrub-private.h"

#include "pci/av-pci.h"

#include <unistd.h>

#include "scrub/av-program.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "vfio/av-hold.h"
#include "vfio/av-vfio.h"

/* How long the group's node may take to come back after the device is
 * bound to vfio-pci again (udev). */
#define AV_SCRUB_PROGRAM_NODE_TIMEOUT_MS 5000

/* Runs @program's base @bitstream on @ctx's device where the program wants
 * it: "vfio-pci" with the held group file as its fd 3 (none when the
 * scrub holds no group; not run at all when its hold is gone,
 * av_scrub_hold_fd()); "host" on the device's host driver (the pool's
 * original driver), to which a device on vfio-pci is given for the run,
 * accelvirt's hold dropped (av_scrub_unhold()), and from which it is bound
 * to vfio-pci again and held after (av_scrub_rehold(): a group another
 * process opened meanwhile fails the step). */
static AvProgrammed *
av_scrub_program_base_run(AvScrubContext *ctx, const AvProgramTarget *base_target, const AvBitstream *bitstream,
                          json_t **ret_report, GError **error)
{
    const AvScrubTarget *target = ctx->target;
    AvProgramTarget run = *base_target;
    g_autoptr(AvProgrammed) programmed = NULL;
    g_autofree char *driver = NULL;
    g_autofree char *before = NULL;
    g_autofree char *vfio_driver = NULL;
    gboolean unheld = FALSE;
    GError *local = NULL;
    int group_fd = -1;

    if (ctx->profile->program->driver == AV_PROGRAM_DRIVER_VFIO) {
        if (!av_scrub_hold_fd(ctx, &group_fd, error))
            return NULL;
        run.group_fd = group_fd;
        programmed = av_program_run(&run, bitstream, "scrub", ret_report, error);
        if (group_fd >= 0)
            close(group_fd);
        return g_steal_pointer(&programmed);
    }
    /* "host": the vendor's tool finds the device on its own driver. */
    driver = av_vfio_current_driver(ctx->root, target->address);
    if (!av_pci_driver_is_vfio(driver))
        return av_program_run(&run, bitstream, "scrub", ret_report, error);
    if (!target->original_driver) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                    "profile '%s' programs %s on its host driver (\"driver\": \"host\"), and the pool knows no "
                    "host driver of it", ctx->profile->name, target->address);
        return NULL;
    }
    /* The host's driver will probe what the tenant left: only the device
     * the pool knows, by the identity its firmware shows (ids, serial). */
    {
        const char *const addresses[] = { target->address, NULL };
        g_autoptr(AvHost) host = av_host_scan_devices(ctx->root, addresses, FALSE, error);
        g_autofree char *now = NULL;

        if (!host)
            return NULL;
        for (guint i = 0; i < host->pci->len && !now; i++) {
            const AvPciDevice *pci = g_ptr_array_index(host->pci, i);

            if (g_str_equal(pci->address, target->address))
                now = av_pool_identity_pci(host, pci);
        }
        if (!now || g_strcmp0(now, target->identity) != 0) {
            g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                        "%s shows the identity %s, not the pool's %s: it is not given to its host driver %s to "
                        "be programmed", target->address, now ? now : "(none: gone)",
                        target->identity ? target->identity : "(none)", target->original_driver);
            return NULL;
        }
    }
    if (!av_scrub_unhold(ctx, &unheld, error))
        return NULL;
    if (!av_vfio_restore(ctx->root, ctx->ops, target->address, target->original_driver, &local)) {
        g_propagate_prefixed_error(error, local, "cannot give %s to %s to program it: ", target->address,
                                   target->original_driver);
        return NULL;
    }
    programmed = av_program_run(&run, bitstream, "scrub", ret_report, &local);
    /* Back on vfio-pci (or the variant its profile gets) and held,
     * whatever the program did. */
    vfio_driver = av_vfio_choose_driver_or_plain(ctx->root, target->address, ctx->profile->vfio_driver, NULL);
    if (!av_vfio_bind(ctx->root, ctx->ops, target->address, vfio_driver, &before, local ? NULL : &local) ||
        (target->iommu_group >= 0 &&
         !av_vfio_wait_group_node(ctx->root, target->iommu_group, AV_SCRUB_PROGRAM_NODE_TIMEOUT_MS,
                                  local ? NULL : &local)) ||
        (unheld && !av_scrub_rehold(ctx, 0, local ? NULL : &local))) {
        if (!local)
            g_set_error(&local, AV_ERROR, AV_ERROR_FAILED, "cannot take %s back to vfio-pci after programming it",
                        target->address);
        g_clear_pointer(&programmed, av_programmed_free);
    }
    if (local) {
        g_propagate_error(error, local);
        return NULL;
    }
    return g_steal_pointer(&programmed);
}

/* See av-scrub-private.h. */
gboolean
av_scrub_method_program_base(AvScrubContext *ctx, char **ret_message, GError **error)
{
    const AvScrubTarget *target = ctx->target;
    const AvProgram *program = ctx->profile->program;
    const char *state_dir = target->state_dir ? target->state_dir : target->hold_state_dir;
    g_autoptr(AvBitstream) bitstream = NULL;
    g_autoptr(AvProgrammed) programmed = NULL;
    g_autoptr(json_t) report = NULL;
    AvProgramTarget base_target = { .root = ctx->root, .state_dir = state_dir, .profile = ctx->profile,
                                    .address = target->address, .identity = target->identity, .group_fd = -1 };

    if (!program || !program->base) {
        *ret_message = g_strdup("the profile has no base bitstream");
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                    "profile '%s' has a \"program-base\" step and no \"program\" with a \"base\"",
                    ctx->profile->name);
        return FALSE;
    }
    if (!target->address || target->mdev_uuid) {
        *ret_message = g_strdup("not a PCI device");
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "a \"program-base\" step programs PCI devices only, not %s",
                    target->mdev_uuid ? target->mdev_uuid : "a device without an address");
        return FALSE;
    }
    if (!state_dir) {
        *ret_message = g_strdup("no bitstream library");
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "no state dir, so no bitstream library, was given to the "
                    "scrub of %s", target->address);
        return FALSE;
    }
    bitstream = av_bitstream_lookup(state_dir, program->base, error);
    if (!bitstream) {
        *ret_message = g_strdup_printf("the base bitstream '%s' is not in the library", program->base);
        g_prefix_error(error, "the base bitstream of profile '%s': ", ctx->profile->name);
        return FALSE;
    }
    programmed = av_scrub_program_base_run(ctx, &base_target, bitstream, &report, error);
    if (report)
        json_object_set(ctx->entry, "program", report);
    if (!programmed) {
        *ret_message = g_strdup_printf("programming the base bitstream '%s' failed", bitstream->name);
        return FALSE;
    }
    json_object_set_new(ctx->entry, "programmed",
                        json_pack("{s:s,s:o,s:o}", "sha256", programmed->sha256, "name",
                                  av_json_string_or_null(programmed->name), "verified",
                                  av_json_string_or_null(programmed->verified)));
    *ret_message = g_strdup_printf("programmed the base bitstream '%s' (sha256 %.12s...): %s", bitstream->name,
                                   bitstream->sha256, programmed->verified);
    return TRUE;
}

/* See av-scrub.h. */
json_t *
av_scrub_report_program_step(json_t *report)
{
    json_t *steps = json_object_get(report, "steps");
    json_t *step;
    size_t i;

    json_array_foreach(steps, i, step)
        if (g_strcmp0(json_string_value(json_object_get(step, "method")), "program-base") == 0)
            return step;
    return NULL;
}

/* See av-scrub.h. */
AvProgrammed *
av_scrub_report_programmed(json_t *report, const char *by)
{
    json_t *step = av_scrub_report_program_step(report);
    json_t *pr = json_object_get(step, "programmed");

    if (!json_is_true(json_object_get(step, "ok")) || !json_is_object(pr) ||
        !json_is_string(json_object_get(pr, "sha256")))
        return NULL;
    return av_programmed_new(json_string_value(json_object_get(pr, "sha256")),
                             json_string_value(json_object_get(pr, "name")), by,
                             json_string_value(json_object_get(pr, "verified")));
}

/* See av-scrub.h. */
gboolean
av_scrub_journal_runs(AvPool *pool, const char *identity, json_t *report, json_t *on_free, const char *by,
                      GError **error)
{
    json_t *program = json_object_get(av_scrub_report_program_step(report), "program");
    json_t *runs[] = { json_is_object(program) ? program : NULL, on_free };
    const char *const events[] = { "program", "driver" };

    for (guint i = 0; i < G_N_ELEMENTS(runs); i++)
        if (runs[i] && !av_program_journal(pool, events[i], runs[i], identity, NULL, NULL, by, error))
            return FALSE;
    return TRUE;
}
