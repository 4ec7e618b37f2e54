/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: attaches in flight.
 *
 * `accelvirt attach` records a device in use by a running domain, saves the
 * pool, lets the pool's lock go and only then asks libvirt to hot-plug it:
 * a hot-plug may take seconds while QEMU pins the guest's memory, and the
 * hooks of other domains must not wait for it.  Meanwhile the device is in
 * use in the pool and not yet in the domain's live XML, which is what
 * `accelvirt audit` and `watch` take for a device unplugged behind
 * accelvirt's back.  So the attaching process leaves a mark first:
 *   attach-pending/HASH-RANDOM.json   HASH: the first 32 hex digits of the
 *                                     SHA-256 of the device's identity;
 *                                     {"domain_uuid", "identity", "since"}
 * and holds its flock(2) lock while it lives.  A mark whose lock is free was
 * left by an attach that died: it means nothing, and is removed.  The audit
 * then releases the device (dirty, scrubbed), which is safe. */
#include "config.h"

#include "av-pool-private.h"

#include <string.h>
#include <unistd.h>

#include "util/av-error.h"
#include "util/av-json.h"

#define AV_POOL_ATTACH_DIR "attach-pending"

struct AvPoolAttachMark {
    AvPoolMarker *marker;        /* its lock held while the attaching process lives */
};

static char *
av_pool_attach_dir(const char *state_dir)
{
    return g_build_filename(state_dir, AV_POOL_ATTACH_DIR, NULL);
}

/* See av-pool.h.  Caller frees with av_pool_attach_mark_done() or
 * av_pool_attach_mark_free(). */
AvPoolAttachMark *
av_pool_attach_mark(const char *state_dir, const char *domain_uuid, const char *identity, GError **error)
{
    g_autofree char *dir = av_pool_attach_dir(state_dir);
    g_autoptr(json_t) content = json_object();
    AvPoolAttachMark *mark;
    AvPoolMarker *marker;

    g_return_val_if_fail(identity, NULL);
    json_object_set_new(content, "domain_uuid", av_json_string_or_null(domain_uuid));
    json_object_set_new(content, "identity", json_string(identity));
    json_object_set_new(content, "since", json_integer(av_pool_now()));
    /* Named by the hash of the identity: av_pool_attach_in_flight() reads
     * no file. */
    marker = av_pool_marker_write(dir, identity, content, error);
    if (!marker) {
        g_prefix_error(error, "cannot mark the attach of device '%s' as in flight: ", identity);
        return NULL;
    }
    mark = g_new0(AvPoolAttachMark, 1);
    mark->marker = marker;
    return mark;
}

/* See av-pool.h. */
void
av_pool_attach_mark_done(AvPoolAttachMark *mark)
{
    if (mark)
        av_pool_marker_close(mark->marker, TRUE);
    g_free(mark);
}

/* See av-pool.h. */
void
av_pool_attach_mark_free(AvPoolAttachMark *mark)
{
    if (mark)
        av_pool_marker_close(mark->marker, FALSE);
    g_free(mark);
}

/* The prefix of the marks of @identity, as av_pool_marker_write() names
 * them: 32 hex digits and '-'.  Caller frees. */
static char *
av_pool_attach_prefix(const char *identity)
{
    g_autofree char *hash = g_compute_checksum_for_string(G_CHECKSUM_SHA256, identity, -1);

    return g_strdup_printf("%.32s-", hash);
}

/* See av-pool.h. */
gboolean
av_pool_attach_in_flight(const char *state_dir, const char *identity)
{
    g_autofree char *dir = av_pool_attach_dir(state_dir);
    g_autofree char *prefix = av_pool_attach_prefix(identity);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *entry;
    gboolean live = FALSE;

    while (d && (entry = g_dir_read_name(d))) {
        g_autofree char *path = NULL;
        int fd = -1, r;

        if (!g_str_has_prefix(entry, prefix))
            continue;
        path = g_build_filename(dir, entry, NULL);
        r = av_file_open_unheld(path, &fd);
        if (r == 1) {
            live = TRUE;   /* its writer lives: the attach runs */
            continue;
        }
        if (fd >= 0)
            close(fd);
        /* Left by an attach that died (or its temporary file): nothing. */
        if (r == 0)
            unlink(path);
    }
    return live;
}

/* See av-pool.h. */
gboolean
av_pool_attach_undo(AvPool *pool, AvPoolDevice *dev, const char *domain_uuid, const char *reason, GError **error)
{
    g_autoptr(json_t) extra = json_object();

    if (dev->state != AV_DEVICE_STATE_IN_USE || !dev->owner ||
        g_strcmp0(dev->owner->domain_uuid, domain_uuid) != 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "device '%s' (%s) is not in use by domain %s any more (%s): its attach is not undone",
                    dev->identity, dev->address ? dev->address : "no address", domain_uuid,
                    av_device_state_to_string(dev->state));
        return FALSE;
    }
    json_object_set_new(extra, "by", json_string("attach-rolled-back"));
    json_object_set_new(extra, "why", av_json_string_or_null(reason));
    return av_pool_transition_checked(pool, dev, AV_DEVICE_STATE_FREE, "transition", extra, error);
}
