/* accelvirt: the scrub method "vfio-zero".
 *
 * Seed 000: "user 1 uses a gpu, relinquishes it, user 2 claims it ... user 2
 * can access user 1's data".  This method writes zeros over the memory BARs
 * of the released function through VFIO (av-kernel.h: device_open,
 * device_region), then reads them back.
 *
 * The core, av_scrub_zero_region(), works on any (fd, offset, size) region:
 * a VFIO device fd at a region offset, a sysfs resourceN file, or a memfd in
 * the tests and the benchmark.  It streams the region in windows of
 * AV_ZERO_WINDOW bytes: each window is mmapped (MAP_SHARED, read-write, at
 * an address aligned for the kernel's huge mappings of a BAR), zeroed with
 * memset and unmapped, so that a GPU aperture of tens of GB is never mapped
 * or buffered whole.  Where the region may not be mmapped
 * (VFIO_REGION_INFO_FLAG_MMAP clear: a BAR smaller than a page, say) or a
 * window's mmap fails (a sparse-mmap BAR whose MSI-X table page is not
 * mappable), that window is written with pwrite() of a zero buffer in chunks
 * of AV_ZERO_CHUNK bytes at the region's offset.  Then a second pass reads
 * the region back, after every window was written:
 *
 *   verify "full"     every byte;
 *   verify "sample"   the first and the last page (4 KiB) of the region, and
 *                     one page in every run of AV_ZERO_SAMPLE_STRIDE (64)
 *                     pages, the page within the run chosen by a fixed hash
 *                     of the run's number (av_scrub_zero_page_sampled()), so
 *                     that a fault with a stride of 64 pages is neither
 *                     always hit nor always missed.  Deterministic: two runs
 *                     read the same pages.
 *
 * Any non-zero byte fails the step, naming the BAR and the offset.
 *
 * The core's interface is in av-scrub-private.h, for tests/test-scrub.c and
 * bench/bench-zero.c. */
#include "config.h"

#include <glib.h>


#include "av-scrub-private.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/av-error.h"
#include "util/av-file.h"

typedef guint64 __attribute__((may_alias)) AvZeroWord;

/* Where the byte of @p[0..@len) that is not zero is, or -1. */
static gssize
av_zero_find_nonzero(const guint8 *p, gsize len)
{
    gsize i = 0;

    if (((guintptr)p & 7) == 0) {
        for (; i + 64 <= len; i += 64) {
            const AvZeroWord *w = (const AvZeroWord *)(p + i);

            if ((w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7]) != 0)
                break;
        }
    }
    for (; i < len; i++)
        if (p[i])
            return (gssize)i;
    return -1;
}

gboolean
av_scrub_zero_page_sampled(guint64 page, guint64 n_pages)
{
    guint64 run = page / AV_ZERO_SAMPLE_STRIDE;
    /* Knuth's multiplicative hash of the run number, top 6 bits. */
    guint32 pick = (guint32)((guint32)(run * 2654435761u) >> 26) % AV_ZERO_SAMPLE_STRIDE;

    return page == 0 || page + 1 == n_pages || page % AV_ZERO_SAMPLE_STRIDE == pick;
}

guint64
av_scrub_zero_verify_bytes(guint64 size, AvZeroVerify verify)
{
    guint64 n_pages = (size + AV_ZERO_PAGE - 1) / AV_ZERO_PAGE;
    guint64 bytes = 0;

    if (verify == AV_ZERO_VERIFY_FULL)
        return size;
    if (verify == AV_ZERO_VERIFY_NONE)
        return 0;
    for (guint64 p = 0; p < n_pages; p++)
        if (av_scrub_zero_page_sampled(p, n_pages))
            bytes += MIN((guint64)AV_ZERO_PAGE, size - p * AV_ZERO_PAGE);
    return bytes;
}

typedef struct {
    const AvZeroOptions *o;
    guint64 total;
    guint64 done;
    gint64 last_us;
} AvZeroProgress;

static void
av_zero_progress(AvZeroProgress *p, guint64 bytes, gboolean final)
{
    gint64 now;

    p->done += bytes;
    if (!p->o->progress)
        return;
    now = g_get_monotonic_time();
    if (!final && now - p->last_us < AV_ZERO_PROGRESS_INTERVAL_US)
        return;
    p->last_us = now;
    p->o->progress(p->o->progress_data, p->done, p->total);
}

static gboolean
av_zero_nonzero_error(GError **error, const guint8 *p, gssize at, guint64 region_pos)
{
    g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                "non-zero byte 0x%02x at offset 0x%" G_GINT64_MODIFIER "x of the region after zeroing",
                p[at], region_pos + (guint64)at);
    return FALSE;
}

/* Checks the bytes [@pos, @pos + @len) of the region (at @offset in @fd),
 * all of them or, when @sample, only the sampled pages, through @map (the
 * window mapped, or NULL: pread into @buf of AV_ZERO_CHUNK bytes). */
static gboolean
av_zero_verify_window(int fd, guint64 offset, guint64 size, guint64 pos, guint64 len,
                      const guint8 *map, gboolean sample, guint8 *buf,
                      AvZeroProgress *progress, AvZeroResult *res, GError **error)
{
    guint64 n_pages = (size + AV_ZERO_PAGE - 1) / AV_ZERO_PAGE;
    guint64 step = sample ? AV_ZERO_PAGE : (map ? len : AV_ZERO_CHUNK);

    for (guint64 at = 0; at < len; at += step) {
        guint64 n = MIN(step, len - at);
        const guint8 *p;
        gssize bad;
        int r;

        if (sample && !av_scrub_zero_page_sampled((pos + at) / AV_ZERO_PAGE, n_pages))
            continue;
        if (map) {
            p = map + at;
        } else {
            r = av_file_pread_all(fd, buf, n, (goffset)(offset + pos + at));
            if (r < 0)
                return av_error_errno(error, r, "cannot read back offset 0x%" G_GINT64_MODIFIER "x of the region",
                                      pos + at);
            p = buf;
        }
        bad = av_zero_find_nonzero(p, n);
        if (bad >= 0)
            return av_zero_nonzero_error(error, p, bad, pos + at);
        res->verified += n;
        av_zero_progress(progress, n, FALSE);
    }
    return TRUE;
}

/* Writes zeros over [@pos, @pos + @len) of the region with pwrite(). */
static gboolean
av_zero_pwrite_window(int fd, guint64 offset, guint64 pos, guint64 len, const guint8 *zeros,
                      AvZeroProgress *progress, AvZeroResult *res, GError **error)
{
    for (guint64 at = 0; at < len; at += AV_ZERO_CHUNK) {
        guint64 n = MIN((guint64)AV_ZERO_CHUNK, len - at);
        int r = av_file_pwrite_all(fd, zeros, n, (goffset)(offset + pos + at));

        if (r < 0)
            return av_error_errno(error, r, "cannot write zeros at offset 0x%" G_GINT64_MODIFIER "x of the region",
                                  pos + at);
        res->zeroed += n;
        res->pwrite_bytes += n;
        av_zero_progress(progress, n, FALSE);
    }
    return TRUE;
}

/* The largest alignment of a window's address: 1 GiB, the largest page
 * (PUD on x86-64) the kernel maps a pfnmap with. */
#define AV_ZERO_MAP_ALIGN_MAX (1024u * 1024 * 1024)

/* Maps [@pos, @pos + @len) of the region read-write and shared, or returns
 * NULL.
 *
 * The address is aligned to the largest power of two not above @len (at
 * most AV_ZERO_MAP_ALIGN_MAX), as QEMU aligns its mappings of VFIO regions:
 * since Linux 6.12 vfio-pci maps a BAR with PMD (2 MiB) or PUD (1 GiB)
 * entries where the address and the offset in the BAR are both so aligned
 * (vfio_pci_mmap_huge_fault()), and one 4 KiB page per fault elsewhere.  A
 * window's offset in the region is a multiple of the window, so the address
 * is what is left to align.  Best effort, never a failure: a range of
 * addresses is reserved (anonymous, PROT_NONE), given back, and the window
 * mapped at its aligned start with MAP_FIXED_NOREPLACE, which never replaces
 * a mapping another thread made meanwhile; anything amiss, and the window is
 * mapped wherever the kernel likes.
 *
 * @populate adds MAP_POPULATE.  On a file or shmem (the tests, the
 * benchmark's memfd) it fills the page tables with read faults and
 * fault-around, measured almost three times faster than taking the page faults
 * on the first stores, and faster than madvise(MADV_POPULATE_WRITE), which takes one
 * write fault a page.  On a BAR it does nothing: the kernel does not
 * populate VM_IO | VM_PFNMAP mappings and ignores that it did not (mm/gup.c,
 * __mm_populate()), and vfio-pci faults the window in on the first stores. */
static guint8 *
av_zero_map(int fd, guint64 offset, guint64 pos, guint64 len, gboolean populate)
{
    int flags = MAP_SHARED | (populate ? MAP_POPULATE : 0);
    guint64 page = (guint64)sysconf(_SC_PAGESIZE);
    guint64 align = MIN(len, (guint64)AV_ZERO_MAP_ALIGN_MAX);
    void *reserve;
    void *p;

    align = MAX((guint64)1 << (63 - __builtin_clzll(align)), page);
    reserve = mmap(NULL, len + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (reserve != MAP_FAILED) {
        void *at = (void *)(((guintptr)reserve + align - 1) & ~(guintptr)(align - 1));

        munmap(reserve, len + align);
        p = mmap(at, len, PROT_READ | PROT_WRITE, flags | MAP_FIXED_NOREPLACE, fd, (off_t)(offset + pos));
        /* Before Linux 4.17 the flag is unknown and @at only a hint: a
         * mapping elsewhere is still the window. */
        if (p != MAP_FAILED)
            return p;
    }
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd, (off_t)(offset + pos));
    return p == MAP_FAILED ? NULL : p;
}

gboolean
av_scrub_zero_region(int fd, guint64 offset, guint64 size, gboolean mmap_ok,
                     const AvZeroOptions *options, AvZeroResult *ret_result, GError **error)
{
    static const AvZeroOptions defaults = { .verify = AV_ZERO_VERIFY_FULL };
    const AvZeroOptions *o = options ? options : &defaults;
    guint64 page = (guint64)sysconf(_SC_PAGESIZE);
    guint64 window = o->window ? o->window : AV_ZERO_WINDOW;
    AvZeroProgress progress = { o, size + av_scrub_zero_verify_bytes(size, o->verify), 0, 0 };
    AvZeroResult res = { 0 };
    /* The bounce buffer of pwrite()/pread(), made the first time one runs:
     * a 1 MiB calloc is most of the time of a small mapped BAR. */
    g_autofree guint8 *buf = NULL;
    gboolean ok = TRUE;

    window = (window + page - 1) / page * page;
    if (offset % page != 0)
        mmap_ok = FALSE;
    progress.last_us = g_get_monotonic_time();

    /* Pass 1: zero every window. */
    for (guint64 pos = 0; ok && pos < size; pos += window) {
        guint64 len = MIN(window, size - pos);
        guint8 *map = mmap_ok ? av_zero_map(fd, offset, pos, len, TRUE) : NULL;

        if (map) {
            memset(map, 0, len);
            /* The stores reach the device before the mapping goes (write-combined BARs). */
            __sync_synchronize();
            munmap(map, len);
            res.zeroed += len;
            res.mmap_bytes += len;
            av_zero_progress(&progress, len, FALSE);
        } else {
            if (!buf)
                buf = g_malloc0(AV_ZERO_CHUNK);
            ok = av_zero_pwrite_window(fd, offset, pos, len, buf, &progress, &res, error);
        }
        if (ok && o->after_write)
            o->after_write(o->after_write_data, fd, offset + pos, len);
    }

    /* Pass 2: read back, once every window has been written. */
    for (guint64 pos = 0; ok && o->verify != AV_ZERO_VERIFY_NONE && pos < size; pos += window) {
        guint64 len = MIN(window, size - pos);
        gboolean sample = o->verify == AV_ZERO_VERIFY_SAMPLE;
        guint8 *map = mmap_ok ? av_zero_map(fd, offset, pos, len, !sample) : NULL;

        if (!buf && !map)
            buf = g_malloc0(AV_ZERO_CHUNK);
        ok = av_zero_verify_window(fd, offset, size, pos, len, map, sample, buf, &progress, &res, error);
        if (map)
            munmap(map, len);
    }
    if (ok)
        av_zero_progress(&progress, 0, TRUE);
    if (ret_result)
        *ret_result = res;
    return ok;
}

/* --- the method -------------------------------------------------------------- */

typedef struct {
    const AvScrubTarget *target;
    guint64 base;                /* work done before this BAR */
    guint64 total;               /* work of every BAR */
} AvZeroMethodProgress;

static void
av_zero_method_progress(gpointer data, guint64 done, guint64 total)
{
    AvZeroMethodProgress *p = data;

    p->target->progress(p->target->progress_data, "vfio-zero", p->base + done, p->total);
}

/* The error of ops->device_open() failing with @r, in words an operator can
 * act on. */
static gboolean
av_zero_open_error(GError **error, int r, const char *address, int group)
{
    g_autofree char *grp = group >= 0 ? g_strdup_printf("%d", group) : g_strdup("?");

    switch (r) {
    case -EBUSY:
        g_set_error(error, AV_ERROR, AV_ERROR_BUSY,
                    "cannot open %s through VFIO: its IOMMU group %s is held by another process "
                    "(a running domain's QEMU?); stop it and scrub again", address, grp);
        return FALSE;
    case -ENODEV:
    case -ENOENT:
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot open %s through VFIO: it is not bound to vfio-pci "
                    "(or has no IOMMU group, or vfio-pci is not loaded): %s", address, g_strerror(-r));
        return FALSE;
    case -EPERM:
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "cannot open %s through VFIO: its IOMMU group %s is not viable "
                    "(another device of the group is bound to a host driver)", address, grp);
        return FALSE;
    case -EPROTONOSUPPORT:
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot open %s through VFIO: the kernel's VFIO does not offer API version %d "
                    "with the Type1 IOMMU", address, 0);
        return FALSE;
    default:
        return av_error_errno(error, r, "cannot open %s through VFIO", address);
    }
}

static const char *
av_zero_how(const AvZeroResult *res)
{
    if (res->pwrite_bytes == 0)
        return "mmap";
    return res->mmap_bytes == 0 ? "pwrite" : "mmap+pwrite";
}

/* The method "vfio-zero" (accelvirt-policy(5)): opens the device through
 * ctx->ops, zeroes the BARs of the step's "bars" (default: every prefetchable memory BAR
 * of a size above 0; I/O port BARs are never written) and verifies them.
 * A device without a memory BAR to zero fails the step: a profile that asks
 * to zero a device with nothing to zero is a mistake to fix, not a scrub that
 * happened.  Adds to ctx->entry: "bytes" (zeroed in all), "verify", "bars"
 * [{"bar", "size", "method": "mmap", "pwrite" or "mmap+pwrite",
 * "verified_bytes", "seconds"}] (the BARs done, the failing one included),
 * "mb_per_s" (bytes zeroed per second of zeroing and verifying, 10^6 bytes).
 * The step's "seconds" is av_scrub_run()'s.  Progress goes to
 * ctx->target->progress in bytes of work (written plus read back). */
gboolean
av_scrub_method_vfio_zero(AvScrubContext *ctx, char **ret_message, GError **error)
{
    g_autoptr(GError) err = NULL;
    const AvScrubTarget *target = ctx->target;
    const char *verify_name = json_string_value(json_object_get(ctx->step->options, "verify"));
    json_t *bars_opt = json_object_get(ctx->step->options, "bars");
    AvZeroVerify verify = verify_name && g_str_equal(verify_name, "sample") ? AV_ZERO_VERIFY_SAMPLE
                                                                            : AV_ZERO_VERIFY_FULL;
    AvRegion regions[AV_PCI_BAR_COUNT];
    gboolean chosen[AV_PCI_BAR_COUNT] = { FALSE };
    AvZeroMethodProgress mp = { target, 0, 0 };
    AvDeviceHandle *handle = NULL;
    json_t *bars = json_array();
    guint64 bytes = 0;
    guint n_chosen = 0;
    gint64 start;
    double seconds;
    gboolean ok = TRUE;
    int r;

    json_object_set_new(ctx->entry, "bars", bars);
    json_object_set_new(ctx->entry, "verify", json_string(verify == AV_ZERO_VERIFY_SAMPLE ? "sample" : "full"));
    json_object_set_new(ctx->entry, "bytes", json_integer(0));

    if (!target->address || target->mdev_uuid) {
        g_set_error(&err, AV_ERROR, AV_ERROR_POLICY,
                    "vfio-zero needs a whole PCI function, and '%s' is not one",
                    target->identity ? target->identity : "(unnamed)");
        goto out_fail;
    }
    r = ctx->ops->device_open(ctx->root, target->address, &handle);
    if (r < 0) {
        av_zero_open_error(&err, r, target->address, target->iommu_group);
        goto out_fail;
    }
    for (guint i = 0; i < AV_PCI_BAR_COUNT; i++) {
        r = ctx->ops->device_region(handle, i, &regions[i]);
        if (r < 0) {
            av_error_errno(&err, r, "cannot describe BAR %u of %s", i, target->address);
            goto out_fail;
        }
    }

    if (bars_opt) {
        size_t k;
        json_t *item;

        json_array_foreach(bars_opt, k, item) {
            json_int_t i = json_integer_value(item);

            if (i < 0 || i >= AV_PCI_BAR_COUNT) {
                g_set_error(&err, AV_ERROR, AV_ERROR_POLICY, "BAR %" JSON_INTEGER_FORMAT " does not exist", i);
                goto out_fail;
            }
            if (regions[i].size == 0) {
                g_set_error(&err, AV_ERROR, AV_ERROR_POLICY,
                            "BAR %d of %s is not implemented; remove it from 'bars' of profile '%s'",
                            (int)i, target->address, ctx->profile->name);
                goto out_fail;
            }
            if (!regions[i].is_memory) {
                g_set_error(&err, AV_ERROR, AV_ERROR_POLICY,
                            "BAR %d of %s is an I/O port BAR, which vfio-zero never writes; "
                            "remove it from 'bars' of profile '%s'", (int)i, target->address, ctx->profile->name);
                goto out_fail;
            }
            chosen[i] = TRUE;
        }
    } else {
        /* Prefetchable memory BARs are memory (a GPU's framebuffer, ivshmem's
         * shared memory); the others are registers, which zeros could upset
         * and which do not read back as written. */
        for (guint i = 0; i < AV_PCI_BAR_COUNT; i++)
            chosen[i] = regions[i].is_memory && regions[i].prefetchable && regions[i].size > 0;
    }
    for (guint i = 0; i < AV_PCI_BAR_COUNT; i++) {
        if (!chosen[i])
            continue;
        if (!regions[i].mmap_ok && !(regions[i].writable && regions[i].readable)) {
            g_set_error(&err, AV_ERROR, AV_ERROR_FAILED,
                        "BAR %u of %s can be neither mapped nor read and written through VFIO", i, target->address);
            goto out_fail;
        }
        n_chosen++;
        mp.total += regions[i].size + av_scrub_zero_verify_bytes(regions[i].size, verify);
    }
    if (n_chosen == 0) {
        g_set_error(&err, AV_ERROR, AV_ERROR_POLICY,
                    "%s has no prefetchable memory BAR to zero; name its BARs in 'bars' or remove the vfio-zero step from profile '%s'",
                    target->address, ctx->profile->name);
        goto out_fail;
    }

    start = g_get_monotonic_time();
    for (guint i = 0; ok && i < AV_PCI_BAR_COUNT; i++) {
        AvZeroOptions o = { .verify = verify };
        AvZeroResult res = { 0 };
        g_autoptr(GError) local = NULL;
        gint64 bar_start = g_get_monotonic_time();
        json_t *bar;

        if (!chosen[i])
            continue;
        if (target->progress) {
            o.progress = av_zero_method_progress;
            o.progress_data = &mp;
        }
        ok = av_scrub_zero_region(regions[i].fd, regions[i].offset, regions[i].size, regions[i].mmap_ok,
                                  &o, &res, &local);
        bytes += res.zeroed;
        mp.base += regions[i].size + av_scrub_zero_verify_bytes(regions[i].size, verify);
        bar = json_pack("{s:i, s:I, s:s, s:I, s:f}", "bar", (int)i, "size", (json_int_t)regions[i].size,
                        "method", av_zero_how(&res), "verified_bytes", (json_int_t)res.verified,
                        "seconds", (double)(g_get_monotonic_time() - bar_start) / G_USEC_PER_SEC);
        json_array_append_new(bars, bar);
        if (!ok) {
            g_set_error(&err, local->domain, local->code, "BAR %u of %s: %s", i, target->address, local->message);
            break;
        }
    }
    seconds = (double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC;
    json_object_set_new(ctx->entry, "bytes", json_integer((json_int_t)bytes));
    json_object_set_new(ctx->entry, "mb_per_s", json_real(seconds > 0 ? (double)bytes / 1e6 / seconds : 0.0));
    ctx->ops->device_close(handle);
    handle = NULL;
    if (!ok)
        goto out_fail;

    {
        g_autofree char *size = g_format_size_full(bytes, G_FORMAT_SIZE_IEC_UNITS);

        *ret_message = g_strdup_printf("zeroed %u BAR%s of %s (%s) at %.0f MB/s, verified %s", n_chosen,
                                       n_chosen == 1 ? "" : "s", target->address, size,
                                       seconds > 0 ? (double)bytes / 1e6 / seconds : 0.0,
                                       verify == AV_ZERO_VERIFY_SAMPLE ? "by sample" : "in full");
    }
    return TRUE;

out_fail:
    if (handle)
        ctx->ops->device_close(handle);
    *ret_message = g_strdup(err->message);
    g_propagate_error(error, g_steal_pointer(&err));
    return FALSE;
}

