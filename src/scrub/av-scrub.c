/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the scrub pipeline and its methods "none" and "command".
 *
 * The other methods ("vfio-zero", "reset", "rom-check", "vm") come with the
 * scrub issue; until then their steps fail, so that a device whose profile
 * asks for them is quarantined rather than handed out unscrubbed. */
#include "config.h"

#include "av-scrub-private.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib-unix.h>

#include "util/av-command.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "vfio/av-hold.h"
#include "vfio/av-vfio.h"
#include "vfio/av-vgpu.h"

/* The method "command": after its argv passed av_policy_check_scrub_argv()
 * once more (the program, and the files it names), runs the step's argv with the
 * device's address and IOMMU group ("none" without one) appended, with
 * av_command_run() at the step's timeout.  The environment is
 * the worker's plus ACCELVIRT_SCRUB_IDENTITY, for an mdev
 * ACCELVIRT_SCRUB_MDEV_UUID, and when the profile gives the device's
 * "memory", ACCELVIRT_SCRUB_MEMORY (bytes).  When accelvirt holds the
 * device's VFIO group (@group_fd >= 0: the held group file), the program
 * runs with the hold kept: it gets that file as its fd 3 and
 * ACCELVIRT_SCRUB_VFIO_GROUP_FD=3 (a program that needs VFIO sets its
 * container on that file: opening /dev/vfio/N itself fails with EBUSY);
 * so no other process can open the group while the step runs.  Exit
 * status 0 is success.  Stores the captured output in *ret_output (caller
 * frees) either way. */
static gboolean
av_scrub_command(const AvScrubStep *step, const AvScrubTarget *target, guint64 memory, int group_fd,
                 char **ret_output, GError **error)
{
    json_t *argv_json = json_object_get(step->options, "argv");
    g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
    g_auto(GStrv) envp = g_get_environ();
    size_t i;
    json_t *item;

    *ret_output = g_strdup("");
    if (!json_is_array(argv_json) || json_array_size(argv_json) == 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "the step has no 'argv'");
        return FALSE;
    }
    /* Checked at policy load, and again now: the program, or a directory
     * above it, may have changed since. */
    {
        guint bad = 0;

        if (!av_policy_check_scrub_argv(argv_json, &bad, error))
            return FALSE;
    }
    json_array_foreach(argv_json, i, item) g_ptr_array_add(argv, g_strdup(json_string_value(item)));
    g_ptr_array_add(argv, g_strdup(target->address ? target->address : "none"));
    g_ptr_array_add(argv, target->iommu_group >= 0 ? g_strdup_printf("%d", target->iommu_group)
                                                   : g_strdup("none"));
    g_ptr_array_add(argv, NULL);
    envp = g_environ_setenv(envp, "ACCELVIRT_SCRUB_IDENTITY", target->identity ? target->identity : "", TRUE);
    if (target->mdev_uuid)
        envp = g_environ_setenv(envp, "ACCELVIRT_SCRUB_MDEV_UUID", target->mdev_uuid, TRUE);
    if (target->netdev)
        envp = g_environ_setenv(envp, "ACCELVIRT_SCRUB_NETDEV", target->netdev, TRUE);
    else
        envp = g_environ_unsetenv(envp, "ACCELVIRT_SCRUB_NETDEV");
    if (memory) {
        g_autofree char *m = g_strdup_printf("%" G_GUINT64_FORMAT, memory);

        envp = g_environ_setenv(envp, "ACCELVIRT_SCRUB_MEMORY", m, TRUE);
    } else {
        envp = g_environ_unsetenv(envp, "ACCELVIRT_SCRUB_MEMORY");
    }
    if (group_fd >= 0)
        envp = g_environ_setenv(envp, "ACCELVIRT_SCRUB_VFIO_GROUP_FD", "3", TRUE);
    else
        envp = g_environ_unsetenv(envp, "ACCELVIRT_SCRUB_VFIO_GROUP_FD");

    g_clear_pointer(ret_output, g_free);
    return av_command_run((const char *const *)argv->pdata, (const char *const *)envp, step->timeout_s, group_fd,
                          ret_output, NULL, error);
}

static gboolean
av_scrub_method_none(AvScrubContext *ctx, char **ret_message, GError **error)
{
    *ret_message = g_strdup("nothing to do");
    return TRUE;
}

/* The method "command": what its program printed is the step's message;
 * its AV_SCRUB_COVERAGE_PREFIX lines for this device, if any, are the
 * step's coverage, as the program reports it. */
static gboolean
av_scrub_method_command(AvScrubContext *ctx, char **ret_message, GError **error)
{
    g_autofree char *output = NULL;
    int group_fd = -1;
    gboolean ok;
    json_t *coverage;

    /* The hold stays while the program runs: it gets the held group file
     * (none when the scrub holds no group); a hold that is gone fails the
     * step before the program runs. */
    if (!av_scrub_hold_fd(ctx, &group_fd, error)) {
        *ret_message = g_strdup("the program did not run: accelvirt's hold of the device's group is gone");
        return FALSE;
    }
    ok = av_scrub_command(ctx->step, ctx->target, ctx->profile->memory, group_fd, &output, error);
    if (group_fd >= 0)
        close(group_fd);
    coverage = output && ctx->target->address && !ctx->target->mdev_uuid
                       ? av_scrub_coverage_parse(output, ctx->target->address) : NULL;

    if (coverage)
        json_object_set_new(ctx->entry, "coverage", coverage);
    *ret_message = output ? g_steal_pointer(&output) : g_strdup("");
    return ok;
}

/* --- coverage --------------------------------------------------------------- */

/* A byte count of a coverage line: decimal digits, at most 2^63 - 1. */
static gboolean
av_scrub_coverage_bytes(const char *text, guint64 *ret)
{
    if (!*text || strlen(text) > 19)
        return FALSE;
    for (const char *p = text; *p; p++)
        if (!g_ascii_isdigit(*p))
            return FALSE;
    return g_ascii_string_to_unsigned(text, 10, 0, G_MAXINT64, ret, NULL);
}

/* Where the coverage line @line starts its fields: after the prefix at the
 * start of the line, or after a kernel console's timestamp ("[   12.345678] ")
 * and the prefix; NULL when the line is no coverage line. */
static const char *
av_scrub_coverage_fields(const char *line)
{
    const char *p = line;

    if (*p == '[') {
        p++;
        while (*p == ' ')
            p++;
        if (!g_ascii_isdigit(*p))
            return NULL;
        while (g_ascii_isdigit(*p) || *p == '.')
            p++;
        if (p[0] != ']' || p[1] != ' ')
            return NULL;
        p += 2;
    }
    return g_str_has_prefix(p, AV_SCRUB_COVERAGE_PREFIX) ? p + strlen(AV_SCRUB_COVERAGE_PREFIX) : NULL;
}

/* One device's line, the last one that parsed. */
typedef struct {
    guint64 cleared;
    guint64 memory;              /* 0: unknown */
    gboolean verified;
} AvCoverageLine;

/* See av-scrub-private.h. */
json_t *
av_scrub_coverage_parse(const char *text, const char *address)
{
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    g_autoptr(GHashTable) devices = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    GHashTableIter it;
    gpointer value;
    guint64 cleared = 0, memory = 0;
    gboolean memory_known = TRUE, verified = TRUE;

    for (guint i = 0; lines[i]; i++) {
        const char *fields = av_scrub_coverage_fields(lines[i]);
        g_auto(GStrv) words = NULL;
        const char *device = NULL, *c = NULL, *m = NULL, *v = NULL;
        AvCoverageLine *l;

        if (!fields)
            continue;
        words = g_strsplit_set(g_strstrip((char *)fields), " \t\r", -1);
        for (guint k = 0; words[k]; k++) {
            if (g_str_has_prefix(words[k], "device="))
                device = words[k] + 7;
            else if (g_str_has_prefix(words[k], "cleared="))
                c = words[k] + 8;
            else if (g_str_has_prefix(words[k], "memory="))
                m = words[k] + 7;
            else if (g_str_has_prefix(words[k], "verified="))
                v = words[k] + 9;
        }
        l = g_new0(AvCoverageLine, 1);
        if (!c || !m || !v || !av_scrub_coverage_bytes(c, &l->cleared) ||
            (!g_str_equal(v, "yes") && !g_str_equal(v, "no")) ||
            (!g_str_equal(m, "unknown") && (!av_scrub_coverage_bytes(m, &l->memory) || l->memory == 0)) ||
            (address && device && g_ascii_strcasecmp(device, address) != 0)) {
            g_free(l);
            continue;
        }
        l->verified = g_str_equal(v, "yes");
        /* A device said twice counts once, as it said last. */
        g_hash_table_replace(devices, g_ascii_strdown(device ? device : "", -1), l);
    }
    if (g_hash_table_size(devices) == 0)
        return NULL;
    g_hash_table_iter_init(&it, devices);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        const AvCoverageLine *l = value;

        if (cleared > (guint64)G_MAXINT64 - l->cleared || memory > (guint64)G_MAXINT64 - l->memory)
            return NULL;
        cleared += l->cleared;
        memory += l->memory;
        memory_known = memory_known && l->memory;
        verified = verified && l->verified;
    }
    return av_scrub_coverage_new(cleared, verified ? cleared : 0, memory_known ? memory : 0, "reported",
                                 "reported", NULL);
}

/* See av-scrub.h. */
json_t *
av_scrub_coverage_summary(const AvProfile *profile, json_t *steps)
{
    json_t *best = NULL;
    json_int_t best_step = 0;
    guint64 memory = profile->memory, cleared = 0, read_back = 0;
    const char *memory_source = profile->memory ? "profile" : NULL;
    json_t *o = json_object();
    size_t i;
    json_t *step;

    json_array_foreach(steps, i, step) {
        json_t *cov = json_object_get(step, "coverage");
        json_int_t c, r, m;
        gboolean measured, best_measured;

        if (!json_is_object(cov))
            continue;
        c = json_integer_value(json_object_get(cov, "cleared"));
        r = json_integer_value(json_object_get(cov, "read_back"));
        m = json_integer_value(json_object_get(cov, "memory"));
        measured = g_strcmp0(json_string_value(json_object_get(cov, "source")), "measured") == 0;
        best_measured = best && g_strcmp0(json_string_value(json_object_get(best, "source")), "measured") == 0;
        /* The most cleared counts; between equals, what accelvirt measured
         * rather than what a program says. */
        if (!best || c > (json_int_t)cleared ||
            (c == (json_int_t)cleared && (r > (json_int_t)read_back || (r == (json_int_t)read_back && measured &&
                                                                         !best_measured)))) {
            best = cov;
            best_step = (json_int_t)i + 1;
            cleared = (guint64)c;
            read_back = (guint64)r;
        }
        if (!profile->memory && m > 0 && (guint64)m > memory) {
            memory = (guint64)m;
            memory_source = json_string_value(json_object_get(cov, "memory_source"));
        }
    }
    /* Bytes past the memory (a BAR larger than it, a program's say) are no
     * more memory cleared. */
    if (memory && cleared > memory) {
        cleared = memory;
        read_back = MIN(read_back, memory);
    }
    json_object_set_new(o, "cleared", json_integer((json_int_t)cleared));
    json_object_set_new(o, "read_back", json_integer((json_int_t)read_back));
    json_object_set_new(o, "memory", memory ? json_integer((json_int_t)memory) : json_null());
    json_object_set_new(o, "memory_source", av_json_string_or_null(memory ? memory_source : NULL));
    json_object_set_new(o, "fraction", memory ? json_real(MIN(1.0, (double)cleared / (double)memory)) : json_null());
    json_object_set_new(o, "verified", json_string(cleared == 0 ? "none" : read_back >= cleared ? "full"
                                                   : read_back > 0 ? "partial" : "none"));
    json_object_set_new(o, "step", best ? json_integer(best_step) : json_null());
    json_object_set_new(o, "source", best ? json_deep_copy(json_object_get(best, "source")) : json_null());
    if (best)
        json_object_set_new(o, "method", json_deep_copy(json_object_get(json_array_get(steps, (size_t)best_step - 1),
                                                                         "method")));
    if (best && json_object_get(best, "note"))
        json_object_set(o, "note", json_object_get(best, "note"));
    if (!best)
        json_object_set_new(o, "note", json_string("no step measured or reported the memory it cleared"));
    json_object_set_new(o, "text", json_string(""));
    {
        g_autofree char *text = av_scrub_coverage_describe(o);

        json_object_set_new(o, "text", json_string(text));
    }
    return o;
}

/* The methods.  "vm" calls libvirt: it lives in libaccelvirt-virt.a and is
 * put here by av_scrub_vm_register(), so that a program that does not link
 * libvirt (the hook) does not pull it in through this table. */
static AvScrubMethodFunc av_scrub_methods[] = {
    [AV_SCRUB_METHOD_NONE] = av_scrub_method_none,
    [AV_SCRUB_METHOD_COMMAND] = av_scrub_method_command,
    [AV_SCRUB_METHOD_VFIO_ZERO] = av_scrub_method_vfio_zero,
    [AV_SCRUB_METHOD_RESET] = av_scrub_method_reset,
    [AV_SCRUB_METHOD_ROM_CHECK] = av_scrub_method_rom_check,
    [AV_SCRUB_METHOD_VM] = NULL,
    [AV_SCRUB_METHOD_USB_RESET] = av_scrub_method_usb_reset,
    [AV_SCRUB_METHOD_USB_REAUTHORIZE] = av_scrub_method_usb_reauthorize,
    [AV_SCRUB_METHOD_PROGRAM_BASE] = av_scrub_method_program_base,
    [AV_SCRUB_METHOD_USB_POWER_CYCLE] = av_scrub_method_usb_power_cycle,
};

/* See av-scrub-private.h. */
AvScrubMethodFunc
av_scrub_method_set(AvScrubMethod method, AvScrubMethodFunc func)
{
    AvScrubMethodFunc old;

    g_return_val_if_fail((guint)method < G_N_ELEMENTS(av_scrub_methods), NULL);
    old = av_scrub_methods[method];
    av_scrub_methods[method] = func;
    return old;
}

/* A step whose method is not in this program's table: it fails, so that
 * the device is quarantined rather than handed out unscrubbed. */
static gboolean
av_scrub_method_absent(AvScrubContext *ctx, char **ret_message, GError **error)
{
    const char *name = av_scrub_method_to_string(ctx->step->method);

    *ret_message = g_strdup_printf("the scrub method '%s' is not in this program", name);
    g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                "the scrub method '%s' is not in this program (it calls libvirt, which only accelvirt and "
                "accelvirt-worker link): run the scrub with accelvirt-worker or 'accelvirt scrub'",
                name);
    return FALSE;
}

/* TRUE when @target's group is to be under accelvirt's hold for the scrub
 * (a PCI function with a group and a hold_state_dir), when it is on
 * vfio-pci (av_scrub_run()). */
static gboolean
av_scrub_target_held(const AvScrubTarget *target)
{
    return target->hold_state_dir && target->iommu_group >= 0 && target->address && !target->mdev_uuid;
}

/* The error of a held scrub whose hold is gone (its holder killed, or the
 * hold dropped for a step and never taken again): another process may have
 * had the device since, so the scrub fails here and the device is
 * quarantined.  Takes the hold again first when the group is free, so that
 * the kernel goes on refusing the device; says when it cannot (another
 * process has the group now: av_hold_take() names it). */
static void
av_scrub_hold_lost_error(const AvScrubContext *ctx, GError **error)
{
    const AvScrubTarget *target = ctx->target;
    g_autoptr(GError) retake = NULL;
    gboolean retaken;

    retaken = av_hold_take(ctx->root, ctx->ops, target->hold_state_dir, target->iommu_group, target->address,
                           &retake);
    g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                "accelvirt's hold of IOMMU group %d of %s was lost during its scrub: another process may have "
                "had the device since, and no step runs on it without the hold; %s%s", target->iommu_group,
                target->address, retaken ? "the hold is taken again" : "the hold cannot be taken again: ",
                retaken ? "" : retake->message);
}

/* TRUE when @step needs the device's group open in another program that
 * cannot be handed the held group file (a scrub VM's QEMU, which libvirt
 * starts): accelvirt's hold must make way.  A "command" step keeps the hold
 * and hands its program the group file (av_scrub_command()). */
static gboolean
av_scrub_step_needs_group(const AvScrubStep *step)
{
    return step->method == AV_SCRUB_METHOD_VM;
}

/* Runs @ctx's step with its method, without accelvirt's hold when the step
 * needs the group elsewhere (av_scrub_unhold(), av_scrub_rehold()).  In a
 * held scrub the hold must be live when the step begins, and must not be
 * found gone while it runs: else the step fails (av_scrub_hold_lost_error())
 * whatever it is, and its method does not run or its result is not taken. */
static gboolean
av_scrub_run_step(AvScrubContext *ctx, char **ret_message, GError **error)
{
    const AvScrubStep *step = ctx->step;
    gboolean unheld = FALSE;
    g_autoptr(GError) rehold = NULL;
    g_autoptr(GError) local = NULL;
    gboolean ok;

    if (ctx->held && !av_scrub_hold_is_live(ctx)) {
        av_scrub_hold_mark_lost(ctx);
        av_scrub_hold_lost_error(ctx, error);
        *ret_message = g_strdup("not run: accelvirt's hold of the device's group is gone");
        return FALSE;
    }
    if (av_scrub_step_needs_group(step) && !av_scrub_unhold(ctx, &unheld, &local)) {
        if (ctx->hold_lost && *ctx->hold_lost)
            av_scrub_hold_lost_error(ctx, error);
        else
            g_propagate_error(error, g_steal_pointer(&local));
        *ret_message = g_strdup("accelvirt's hold of the device's group could not be dropped for the step");
        return FALSE;
    }
    if ((guint)step->method < G_N_ELEMENTS(av_scrub_methods) && av_scrub_methods[step->method])
        ok = av_scrub_methods[step->method](ctx, ret_message, &local);
    else
        ok = av_scrub_method_absent(ctx, ret_message, &local);
    if (ctx->hold_lost && *ctx->hold_lost) {
        /* The method met a hold that is gone: whatever it made of it (a
         * reset ladder going on to sysfs, say), the step fails. */
        g_clear_error(&local);
        av_scrub_hold_lost_error(ctx, &local);
        ok = FALSE;
    }
    if (unheld &&
        !av_scrub_rehold(ctx, step->method == AV_SCRUB_METHOD_VM ? AV_SCRUB_REHOLD_GRACE_US : 0, &rehold)) {
        if (ok)
            g_propagate_error(error, g_steal_pointer(&rehold));
        else
            g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    if (!ok && !local)
        g_set_error(&local, AV_ERROR, AV_ERROR_FAILED, "the step failed");
    if (!ok)
        g_propagate_error(error, g_steal_pointer(&local));
    return ok;
}

/* The last step of an NVIDIA vGPU VF's scrub (profile "vgpu_type"): its
 * vGPU destroyed, current_vgpu_type 0 read back (av_vgpu_clear_type()).
 * Appends a "vgpu-destroy" entry to @steps; outside the coverage, as it
 * clears nothing accelvirt can read: the framebuffer the vGPU had is NVIDIA's
 * vGPU Manager's to clear. */
static gboolean
av_scrub_vgpu_destroy(const AvRoot *root, const AvKernelOps *ops, const char *address, json_t *steps,
                      GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autofree char *message = NULL;
    json_t *entry = json_object();
    gint64 start = g_get_monotonic_time();
    guint was = 0;
    gboolean ok;

    ok = av_vgpu_clear_type(root, ops, address, &was, &local);
    if (ok && was)
        message = g_strdup_printf("destroyed the vGPU of type %u: current_vgpu_type reads 0 again; the framebuffer it "
                                  "had is cleared, if at all, by NVIDIA's vGPU Manager, which accelvirt cannot read",
                                  was);
    else if (ok)
        message = g_strdup("it had no vGPU: current_vgpu_type reads 0");
    json_object_set_new(entry, "method", json_string("vgpu-destroy"));
    json_object_set_new(entry, "ok", json_boolean(ok));
    json_object_set_new(entry, "seconds", json_real((double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC));
    json_object_set_new(entry, "message", json_string(ok ? message : local->message));
    json_object_set_new(entry, "vgpu_type", json_integer(was));
    if (!ok)
        json_object_set_new(entry, "error", json_string(local->message));
    json_array_append_new(steps, entry);
    if (!ok)
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "scrub step %zu (vgpu-destroy) failed: %s", json_array_size(steps),
                    local->message);
    return ok;
}

/* See av-scrub.h.  @root and @ops are for the methods that touch the device
 * (none of "none" and "command" does).  A profile without steps succeeds
 * with an empty report. */
gboolean
av_scrub_run(const AvRoot *root, const AvKernelOps *ops, const AvProfile *profile,
             const AvScrubTarget *target, json_t **ret_report, GError **error)
{
    g_autoptr(json_t) report = NULL;
    json_t *steps = NULL;
    json_t *coverage;
    gboolean held = FALSE, hold_lost = FALSE;

    /* A PCI function on vfio-pci is scrubbed held, from its first step to
     * its last: the hold is taken now (kept when it is live), and a scrub
     * that cannot hold the group runs no step. */
    if (av_scrub_target_held(target)) {
        g_autofree char *driver = av_vfio_current_driver(root, target->address);

        if (av_vfio_device_is_vfio(root, target->address, driver)) {
            if (!av_hold_take(root, ops, target->hold_state_dir, target->iommu_group, target->address, error)) {
                g_prefix_error(error, "no scrub step ran: ");
                return FALSE;
            }
            held = TRUE;
        }
    }
    report = json_object();
    steps = json_array();
    json_object_set_new(report, "steps", steps);
    for (guint i = 0; profile->scrub && i < profile->scrub->len; i++) {
        const AvScrubStep *step = g_ptr_array_index(profile->scrub, i);
        g_autoptr(GError) local = NULL;
        g_autofree char *message = NULL;
        json_t *entry = json_object();
        gint64 start = g_get_monotonic_time();
        AvScrubContext ctx = { root, ops, profile, target, step, entry, held, &hold_lost };
        gboolean ok;

        json_object_set_new(entry, "method", json_string(av_scrub_method_to_string(step->method)));
        ok = av_scrub_run_step(&ctx, &message, &local);
        json_object_set_new(entry, "ok", json_boolean(ok));
        json_object_set_new(entry, "seconds", json_real((double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC));
        json_object_set_new(entry, "message", json_string(message ? message : ""));
        if (!ok)
            json_object_set_new(entry, "error", json_string(local->message));
        json_array_append_new(steps, entry);
        if (!ok) {
            g_set_error(error, AV_ERROR, local->domain == AV_ERROR ? local->code : AV_ERROR_FAILED,
                        "scrub step %u (%s) failed: %s", i + 1,
                        av_scrub_method_to_string(step->method), local->message);
            json_object_set_new(report, "coverage", av_scrub_coverage_summary(profile, steps));
            if (ret_report)
                *ret_report = g_steal_pointer(&report);
            return FALSE;
        }
    }
    /* Held to the end: a hold gone after the last step began leaves the
     * device's state after it unknown. */
    if (held) {
        AvScrubContext ctx = { root, ops, profile, target, NULL, NULL, held, &hold_lost };

        if (!av_scrub_hold_is_live(&ctx)) {
            av_scrub_hold_lost_error(&ctx, error);
            json_object_set_new(report, "coverage", av_scrub_coverage_summary(profile, steps));
            if (ret_report)
                *ret_report = g_steal_pointer(&report);
            return FALSE;
        }
    }
    coverage = av_scrub_coverage_summary(profile, steps);
    json_object_set_new(report, "coverage", coverage);
    if (profile->min_coverage > 0) {
        json_t *fraction = json_object_get(coverage, "fraction");
        gboolean measured = g_strcmp0(json_string_value(json_object_get(coverage, "source")), "measured") == 0;

        /* Only what accelvirt itself wrote and read back counts: a
         * program's or a scrub VM's figures are their word, which the
         * device's firmware may have shaped. */
        if (!json_is_number(fraction) || json_number_value(fraction) < profile->min_coverage || !measured) {
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                        "the scrub cleared less than profile '%s' requires (min_coverage %g, of memory accelvirt "
                        "measured clearing): %s", profile->name, profile->min_coverage,
                        json_string_value(json_object_get(coverage, "text")));
            if (ret_report)
                *ret_report = g_steal_pointer(&report);
            return FALSE;
        }
    }
    /* An NVIDIA vGPU VF: its vGPU is destroyed after every step passed (a
     * step may need the vGPU to reach its memory), never before; decided by
     * what the VF has, not by its profile now (which the operator may have
     * changed since its release). */
    if (target->address && !target->mdev_uuid && (profile->vgpu_type || av_pci_has_vgpu(root, target->address)) &&
        !av_scrub_vgpu_destroy(root, ops, target->address, steps, error)) {
        if (ret_report)
            *ret_report = g_steal_pointer(&report);
        return FALSE;
    }
    if (ret_report)
        *ret_report = g_steal_pointer(&report);
    return TRUE;
}

/* --- around the steps: the per-device lock, vfio-pci ------------------------ */

/* See av-scrub.h. */
AvLock *
av_scrub_lock_take(const char *state_dir, const char *identity, GError **error)
{
    g_autofree char *path = av_pool_scrub_lock_path(state_dir, identity);

    return av_lock_take(path, AV_LOCK_EXCLUSIVE, 0, error);
}

/* TRUE when a step of @profile needs the device on vfio-pci. */
static gboolean
av_scrub_needs_vfio(const AvProfile *profile)
{
    /* A vGPU VF stays on NVIDIA's driver, its VFIO driver: a rebind would
     * break the vGPU Manager's hold of it. */
    if (profile->vgpu_type)
        return FALSE;
    /* A card of attach netdev stays on the host driver that makes its
     * interface: its "reset" goes through sysfs (av-scrub-reset.c), its
     * "command" runs with the card where it is. */
    if (profile->attach == AV_ATTACH_NETDEV)
        return FALSE;
    for (guint i = 0; profile->scrub && i < profile->scrub->len; i++) {
        const AvScrubStep *step = g_ptr_array_index(profile->scrub, i);

        if (step->method == AV_SCRUB_METHOD_VFIO_ZERO || step->method == AV_SCRUB_METHOD_RESET ||
            step->method == AV_SCRUB_METHOD_VM)
            return TRUE;
        /* A program of "driver" "vfio-pci" gets the held group file; one of
         * "host" moves the device to its host driver itself. */
        if (step->method == AV_SCRUB_METHOD_PROGRAM_BASE && profile->program &&
            profile->program->driver == AV_PROGRAM_DRIVER_VFIO)
            return TRUE;
    }
    return FALSE;
}

/* See av-scrub.h. */
gboolean
av_scrub_bind_vfio(const AvRoot *root, const AvKernelOps *ops, const AvProfile *profile, const char *address,
                   gboolean *ret_rebound, char **ret_rebound_from, GError **error)
{
    g_autofree char *driver = NULL;
    g_autofree char *before = NULL;

    /* A VF NVIDIA's vGPU Manager serves is never moved off its driver,
     * whatever its profile says now. */
    if (av_scrub_needs_vfio(profile) && !av_pci_has_vgpu(root, address)) {
        driver = av_vfio_current_driver(root, address);
        if (!av_pci_driver_is_vfio(driver)) {
            g_autofree char *vfio = av_vfio_choose_driver_or_plain(root, address, profile ? profile->vfio_driver : NULL,
                                                                    NULL);

            if (!av_vfio_bind(root, ops, address, vfio, &before, error)) {
                g_prefix_error(error, "%s needs a vfio driver for its scrub: ", address);
                return FALSE;
            }
            *ret_rebound = TRUE;
            *ret_rebound_from = g_steal_pointer(&driver);
            return TRUE;
        }
    }
    *ret_rebound = FALSE;
    *ret_rebound_from = NULL;
    return TRUE;
}

/* See av-scrub.h. */
gboolean
av_scrub_isolate(const AvRoot *root, const AvKernelOps *ops, const char *address, gboolean *ret_isolated,
                 char **ret_from, GError **error)
{
    g_autofree char *driver = av_vfio_current_driver(root, address);
    g_autofree char *before = NULL;

    *ret_isolated = FALSE;
    if (ret_from)
        *ret_from = NULL;
    /* A vGPU VF on NVIDIA's driver is a VFIO device already, held like one:
     * a rebind would break the vGPU Manager's hold of it. */
    if (av_vfio_device_is_vfio(root, address, driver))
        return TRUE;
    if (!av_vfio_bind(root, ops, address, NULL, &before, error)) {
        g_prefix_error(error, "cannot bind %s to vfio-pci to keep it away from the host while quarantined: ",
                       address);
        return FALSE;
    }
    *ret_isolated = TRUE;
    if (ret_from)
        *ret_from = g_steal_pointer(&driver);
    return TRUE;
}

/* See av-scrub.h. */
gboolean
av_scrub_restore_rebound(const AvRoot *root, const AvKernelOps *ops, const char *address,
                         const char *rebound_from, GError **error)
{
    if (av_vfio_restore(root, ops, address, rebound_from, error))
        return TRUE;
    g_prefix_error(error, "restoring the driver '%s' of %s after its scrub failed: ",
                   rebound_from ? rebound_from : "none", address);
    return FALSE;
}

/* See av-scrub.h. */
gboolean
av_scrub_group_released(const AvRoot *root, const char *state_dir, int group, const char *address,
                        GError **error)
{
    gint64 deadline = g_get_monotonic_time() + AV_SCRUB_GROUP_GRACE_US;
    g_autoptr(AvVfioHolder) holder = NULL;
    g_autoptr(GError) unknown = NULL;
    g_autofree char *who = NULL;

    if (group < 0)
        return TRUE;
    for (;;) {
        g_clear_pointer(&holder, av_vfio_holder_free);
        g_clear_error(&unknown);
        if (av_vfio_groups_find_holder_full(root, state_dir, &group, 1, &holder, &unknown) && !holder)
            return TRUE;
        if (g_get_monotonic_time() >= deadline)
            break;
        g_usleep(200 * 1000);
    }
    if (!holder) {
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE, "after its scrub, %s; %s is not freed", unknown->message,
                    address ? address : "the device");
        return FALSE;
    }
    who = av_vfio_holder_describe(holder);
    g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                "after its scrub, IOMMU group %d of %s is still held by process %s, a domain's QEMU or "
                "another user of the device; not freed", group, address ? address : "-", who);
    return FALSE;
}

/* See av-scrub.h. */
gboolean
av_scrub_report_failed_reset(json_t *report)
{
    json_t *steps = report ? json_object_get(report, "steps") : NULL;
    json_t *last = json_array_size(steps) ? json_array_get(steps, json_array_size(steps) - 1) : NULL;

    return last && json_is_false(json_object_get(last, "ok")) &&
           g_strcmp0(json_string_value(json_object_get(last, "method")), "reset") == 0;
}
