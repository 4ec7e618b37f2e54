/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the scrub method "rom-check": the option ROM is what it was
 * when the device was enrolled ("firmware is more important than memory",
 * seed 000: a tenant with the device may have reflashed it).
 *
 * The ROM is read through sysfs "rom" (Documentation/ABI/testing/
 * sysfs-bus-pci: "rom"): reading it needs it enabled first (writing "1";
 * the kernel's pci_read_rom() answers EINVAL while it is disabled) and
 * disabled again after (writing "0").  A ROM that already reads (left
 * enabled by someone, or a fake tree) is read as it is and left so.
 * The SHA-256 of its bytes is compared with the hash enrolled in the pool
 * (`accelvirt enroll`); a device without a "rom" attribute, or whose ROM
 * reads empty, has the hash AV_ROM_NONE ("none"). */
#include "config.h"

#include "av-scrub-private.h"

#include <errno.h>

#include "pci/av-pci.h"
#include "pool/av-pool.h"
#include "util/av-error.h"

/* Reads the option ROM of @address and stores its hex SHA-256, or
 * AV_ROM_NONE, in *ret_hash (caller frees) and its size in *ret_size. */
static gboolean
av_rom_measure(const AvScrubContext *ctx, const char *address, char **ret_hash, gsize *ret_size,
               GError **error)
{
    g_autofree char *path = av_sys_path("bus/pci/devices/%s/rom", address);
    g_autofree char *data = NULL;
    gsize len = 0;
    int r;

    if (!av_root_exists(ctx->root, path)) {
        *ret_hash = g_strdup(AV_ROM_NONE);
        *ret_size = 0;
        return TRUE;
    }
    r = av_root_read_file(ctx->root, path, &data, &len);
    if (r == -EINVAL) {
        int w = ctx->ops->write(ctx->root, path, "1");
        int d;

        if (w < 0)
            return av_error_errno(error, w, "cannot enable the option ROM of %s (writing 1 to 'rom')", address);
        r = av_root_read_file(ctx->root, path, &data, &len);
        /* Disabled again whatever the read gave. */
        d = ctx->ops->write(ctx->root, path, "0");
        if (r >= 0 && d < 0)
            return av_error_errno(error, d, "cannot disable the option ROM of %s again (writing 0 to 'rom')",
                                  address);
    }
    if (r < 0)
        return av_error_errno(error, r, "cannot read the option ROM of %s (sysfs 'rom')", address);
    *ret_hash = len == 0 ? g_strdup(AV_ROM_NONE)
                         : g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)data, len);
    *ret_size = len;
    return TRUE;
}

gboolean
av_scrub_method_rom_check(AvScrubContext *ctx, char **ret_message, GError **error)
{
    const char *address = ctx->target->address;
    const char *enrolled = ctx->target->rom_sha256;
    g_autofree char *hash = NULL;
    gsize size = 0;

    if (ctx->target->mdev_uuid || !address || !av_pci_address_is_valid(address)) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "'%s' is not a PCI function: it has no option ROM of its own",
                    ctx->target->identity ? ctx->target->identity : "(none)");
        *ret_message = g_strdup((*error)->message);
        return FALSE;
    }
    if (!av_rom_measure(ctx, address, &hash, &size, error)) {
        *ret_message = g_strdup((*error)->message);
        return FALSE;
    }
    json_object_set_new(ctx->entry, "sha256", json_string(hash));
    json_object_set_new(ctx->entry, "rom_bytes", json_integer((json_int_t)size));
    json_object_set_new(ctx->entry, "enrolled", enrolled ? json_string(enrolled) : json_null());
    if (!enrolled) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "the option ROM of %s is not enrolled: run 'accelvirt enroll %s' when it is known good "
                    "(its ROM now: %s)", address, address, hash);
        *ret_message = g_strdup((*error)->message);
        return FALSE;
    }
    if (!g_str_equal(enrolled, hash)) {
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "the option ROM of %s changed since enrollment (enrolled %s, now %s): firmware "
                    "tampered with by a tenant?  Check or reflash it, then 'accelvirt enroll --replace %s' "
                    "and 'accelvirt quarantine clear %s'",
                    address, enrolled, hash, address, address);
        *ret_message = g_strdup((*error)->message);
        return FALSE;
    }
    *ret_message = g_strcmp0(hash, AV_ROM_NONE) == 0
                       ? g_strdup("no option ROM, as enrolled")
                       : g_strdup_printf("option ROM unchanged (%" G_GSIZE_FORMAT " bytes, sha256 %s)", size, hash);
    return TRUE;
}
