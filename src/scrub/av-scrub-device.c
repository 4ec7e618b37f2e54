/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what the scrub methods share, below them and the pipeline.
 *
 * The pipeline (av-scrub.c) runs the steps; the methods (av-scrub-zero.c,
 * av-scrub-reset.c, av-scrub-program.c, ...) and the pipeline call down
 * into this file, which calls neither: the coverage of a step
 * (av_scrub_coverage_new(), av_scrub_coverage_describe()) and the way to the
 * device under accelvirt's hold of its group (av_scrub_device_open(),
 * av_scrub_hold_fd(), av_scrub_unhold(), av_scrub_rehold()). */
#include "config.h"

#include "av-scrub-private.h"

#include <errno.h>
#include <unistd.h>

#include "util/av-error.h"
#include "util/av-json.h"
#include "vfio/av-hold.h"

/* --- coverage --------------------------------------------------------------- */

/* See av-scrub-private.h. */
json_t *
av_scrub_coverage_new(guint64 cleared, guint64 read_back, guint64 memory, const char *memory_source,
                      const char *source, const char *note)
{
    json_t *o = json_object();

    json_object_set_new(o, "cleared", json_integer((json_int_t)MIN(cleared, (guint64)G_MAXINT64)));
    json_object_set_new(o, "read_back", json_integer((json_int_t)MIN(read_back, cleared)));
    json_object_set_new(o, "memory", memory ? json_integer((json_int_t)MIN(memory, (guint64)G_MAXINT64)) : json_null());
    json_object_set_new(o, "memory_source", memory ? av_json_string_or_null(memory_source) : json_null());
    json_object_set_new(o, "source", json_string(source));
    if (note)
        json_object_set_new(o, "note", json_string(note));
    return o;
}

/* @bytes for people, in plain ASCII: "0 bytes", "512 bytes", "256 MiB",
 * "1.5 GiB" (powers of 1024, one decimal unless whole).  Caller frees. */
static char *
av_scrub_format_size(guint64 bytes)
{
    static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    double v = (double)bytes;
    guint u = 0;

    if (bytes < 1024)
        return g_strdup_printf("%" G_GUINT64_FORMAT " byte%s", bytes, bytes == 1 ? "" : "s");
    v /= 1024;
    while (v >= 1024 && u + 1 < G_N_ELEMENTS(units)) {
        v /= 1024;
        u++;
    }
    if (v == (double)(guint64)v)
        return g_strdup_printf("%.0f %s", v, units[u]);
    return g_strdup_printf("%.1f %s", v, units[u]);
}

/* See av-scrub.h. */
char *
av_scrub_coverage_describe(json_t *coverage)
{
    json_int_t cleared = json_integer_value(json_object_get(coverage, "cleared"));
    json_int_t read_back = json_integer_value(json_object_get(coverage, "read_back"));
    json_int_t memory = json_integer_value(json_object_get(coverage, "memory"));
    const char *note = json_string_value(json_object_get(coverage, "note"));
    g_autofree char *c = av_scrub_format_size((guint64)cleared);
    g_autofree char *m = av_scrub_format_size((guint64)memory);
    g_autofree char *r = av_scrub_format_size((guint64)read_back);
    GString *out = g_string_new(NULL);

    if (memory > 0) {
        double pct = 100.0 * MIN(1.0, (double)cleared / (double)memory);
        const char *source = json_string_value(json_object_get(coverage, "memory_source"));

        g_string_append_printf(out, "cleared %s of %s of device memory%s (%.*f%%)", c, m,
                               g_strcmp0(source, "resizable-bar") == 0 ? " (as its Resizable BAR capability says)"
                               : g_strcmp0(source, "reported") == 0 ? " (as the scrub program says)" : "",
                               pct == 0 || pct >= 100 ? 0 : pct < 1 ? 2 : 1, pct);
    } else {
        g_string_append_printf(out, "cleared %s of device memory of unknown size", c);
    }
    if (g_strcmp0(json_string_value(json_object_get(coverage, "source")), "reported") == 0)
        g_string_append_printf(out, ", as the %s step's program reports it",
                               json_string_value(json_object_get(coverage, "method")) ?: "scrub");
    if (cleared > 0)
        g_string_append(out, read_back >= cleared ? ", read back in full"
                             : read_back > 0 ? "" : ", not read back");
    if (cleared > 0 && read_back > 0 && read_back < cleared)
        g_string_append_printf(out, ", %s of it read back", r);
    if (note)
        g_string_append_printf(out, " (%s)", note);
    return g_string_free(out, FALSE);
}

/* --- the hold ------------------------------------------------------------- */

/* TRUE when the hold of @ctx's held scrub is live. */
gboolean
av_scrub_hold_is_live(const AvScrubContext *ctx)
{
    g_autoptr(AvHold) hold = NULL;

    return av_hold_get(ctx->root, ctx->target->hold_state_dir, ctx->target->iommu_group, &hold, NULL) && hold;
}

/* Marks @ctx's scrub as having lost its hold. */
void
av_scrub_hold_mark_lost(const AvScrubContext *ctx)
{
    if (ctx->hold_lost)
        *ctx->hold_lost = TRUE;
}

/* See av-scrub-private.h. */
int
av_scrub_device_open(const AvScrubContext *ctx, const char *address, AvDeviceHandle **ret_handle)
{
    const AvScrubTarget *target = ctx->target;
    int fd = -1, r;

    if (!ctx->held)
        return ctx->ops->device_open(ctx->root, address, ret_handle);
    /* Held: through the held group file, or not at all. */
    if (!ctx->ops->device_open_held)
        return -ENOSYS;
    if (!av_hold_fd(ctx->root, target->hold_state_dir, target->iommu_group, &fd, NULL)) {
        av_scrub_hold_mark_lost(ctx);
        return -ENOLCK;
    }
    r = ctx->ops->device_open_held(ctx->root, address, fd, ret_handle);
    close(fd);
    return r;
}

/* See av-scrub-private.h. */
gboolean
av_scrub_hold_fd(const AvScrubContext *ctx, int *ret_fd, GError **error)
{
    const AvScrubTarget *target = ctx->target;
    g_autoptr(GError) local = NULL;

    *ret_fd = -1;
    if (!ctx->held)
        return TRUE;
    if (av_hold_fd(ctx->root, target->hold_state_dir, target->iommu_group, ret_fd, &local))
        return TRUE;
    av_scrub_hold_mark_lost(ctx);
    g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE, "accelvirt's hold of IOMMU group %d of %s is gone: %s",
                target->iommu_group, target->address, local->message);
    return FALSE;
}

/* See av-scrub-private.h. */
gboolean
av_scrub_unhold(const AvScrubContext *ctx, gboolean *ret_was_held, GError **error)
{
    *ret_was_held = FALSE;
    if (!ctx->held)
        return TRUE;
    if (!av_scrub_hold_is_live(ctx)) {
        av_scrub_hold_mark_lost(ctx);
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE, "accelvirt's hold of IOMMU group %d of %s is gone",
                    ctx->target->iommu_group, ctx->target->address);
        return FALSE;
    }
    if (!av_hold_drop(ctx->root, ctx->target->hold_state_dir, ctx->target->iommu_group, error))
        return FALSE;
    *ret_was_held = TRUE;
    return TRUE;
}

/* See av-scrub-private.h. */
gboolean
av_scrub_rehold(const AvScrubContext *ctx, gint64 grace_us, GError **error)
{
    const AvScrubTarget *target = ctx->target;
    gint64 deadline = g_get_monotonic_time() + grace_us;

    if (!ctx->held)
        return TRUE;
    for (;;) {
        g_autoptr(GError) local = NULL;

        if (av_hold_take(ctx->root, ctx->ops, target->hold_state_dir, target->iommu_group, target->address,
                         &local))
            return TRUE;
        if (!g_error_matches(local, AV_ERROR, AV_ERROR_IN_USE) || g_get_monotonic_time() >= deadline) {
            g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                       "another process may have had the device meanwhile: ");
            return FALSE;
        }
        g_usleep(100 * 1000);
    }
}
