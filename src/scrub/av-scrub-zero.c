/* SPDX-License-Identifier: Apache-2.0 */
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
#include "util/av-point.h"
#include "util/av-file.h"
#include "util/av-root.h"
#include "pci/av-pci.h"
#include "vfio/av-bar-sizes.h"
#include "vfio/av-vfio.h"

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

/* PCI vendors whose memory BAR is not a linear window onto the device's
 * memory: NVIDIA maps BAR1 through the GPU's own MMU, which only NVIDIA's
 * driver sets up, so writing BAR1 without it clears no known part of VRAM.
 * Zeroing such a BAR is recorded, and counts for nothing in the coverage. */
static const struct {
    guint16 vendor;
    const char *note;
} av_zero_unmapped_vendors[] = {
    { 0x10de, "NVIDIA GPUs map BAR1 through the GPU's own MMU: writing it without NVIDIA's driver clears no "
              "known part of the GPU's memory" },
};

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
    case -ENOLCK:
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "cannot open %s through VFIO: accelvirt's hold of its IOMMU group %s is gone, and it is never "
                    "opened without it", address, grp);
        return FALSE;
    case -EBUSY:
        g_set_error(error, AV_ERROR, AV_ERROR_IN_USE,
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

/* What the method knows of one BAR. */
typedef struct {
    gboolean chosen;
    const char *skip;            /* why an implemented BAR is not zeroed, or NULL */
    guint64 rebar;               /* sizes it may take (resourceN_resize bitmap), 0: not resizable */
    guint64 size_before;         /* its size before a resize, 0: not resized */
    guint64 size_after;          /* the size it was resized to */
    guint restore_bit;           /* the bit that gives it @size_before again */
} AvZeroBar;

/* The state of one run of the method. */
typedef struct {
    AvScrubContext *ctx;
    const char *address;
    AvDeviceHandle *handle;
    AvRegion regions[AV_PCI_BAR_COUNT];
    AvZeroBar bars[AV_PCI_BAR_COUNT];
    gboolean unheld;             /* accelvirt's hold was dropped for a resize (av_scrub_unhold()) */
    AvBarRecord *record;         /* the sizes to go back to, written before the first resize (av-bar-sizes.h) */
} AvZeroRun;

static gboolean
av_zero_open(AvZeroRun *run, GError **error)
{
    int r;

    r = av_scrub_device_open(run->ctx, run->address, &run->handle);
    if (r < 0) {
        run->handle = NULL;
        return av_zero_open_error(error, r, run->address, run->ctx->target->iommu_group);
    }
    for (guint i = 0; i < AV_PCI_BAR_COUNT; i++) {
        r = run->ctx->ops->device_region(run->handle, i, &run->regions[i]);
        if (r < 0)
            return av_error_errno(error, r, "cannot describe BAR %u of %s", i, run->address);
    }
    return TRUE;
}

static void
av_zero_close(AvZeroRun *run)
{
    if (run->handle)
        run->ctx->ops->device_close(run->handle);
    run->handle = NULL;
}

/* The index of the highest bit set in @v (not 0). */
static guint
av_zero_top_bit(guint64 v)
{
    return 63 - (guint)__builtin_clzll(v);
}

/* The device's memory as far as it is known: the profile's "memory", else
 * the largest size its Resizable BAR capability offers for any BAR (a power
 * of two: at least the memory, maybe more); 0 and NULL when unknown. */
static guint64
av_zero_device_memory(const AvZeroRun *run, const char **ret_source)
{
    guint64 largest = 0;

    if (run->ctx->profile->memory) {
        *ret_source = "profile";
        return run->ctx->profile->memory;
    }
    for (guint i = 0; i < AV_PCI_BAR_COUNT; i++)
        if (run->bars[i].rebar)
            largest = MAX(largest, AV_PCI_REBAR_SIZE(av_zero_top_bit(run->bars[i].rebar)));
    *ret_source = largest ? "resizable-bar" : NULL;
    return largest;
}

/* Where the record of the BAR sizes of @run's device goes (the target's
 * state dir), or NULL when the target has none. */
static const char *
av_zero_state_dir(const AvZeroRun *run)
{
    const AvScrubTarget *target = run->ctx->target;

    return target->state_dir ? target->state_dir : target->hold_state_dir;
}

/* The key of the device's record: its pool identity, or its address. */
static const char *
av_zero_record_key(const AvZeroRun *run)
{
    return run->ctx->target->identity ? run->ctx->target->identity : run->address;
}

/* Grows every chosen resizable BAR to the largest size it offers (what
 * covers the most of the memory whatever a profile's "memory" says; a
 * device that offers more than the bridge above has room for fails the
 * resize, and is quarantined), the device's handle closed meanwhile (the
 * kernel wants no user of the BARs and no driver), then opens it again.
 * Before the first resize, the size of every BAR to grow is written to the
 * record of av-bar-sizes.h (fsync'd; kept in run->record), so that a
 * process killed before they are back leaves what puts them back.
 * Records each resize in run->bars (for av_zero_resize_back(), before the
 * resize is tried: one that took effect and then failed is put back too)
 * and in @resized. */
static gboolean
av_zero_resize_up(AvZeroRun *run, json_t *resized, GError **error)
{
    g_autoptr(GArray) grow = g_array_new(FALSE, TRUE, sizeof(AvBarSize));
    const char *state_dir = av_zero_state_dir(run);

    for (guint i = 0; i < AV_PCI_BAR_COUNT; i++) {
        AvZeroBar *b = &run->bars[i];
        guint64 size = run->regions[i].size;
        AvBarSize grown = { 0 };
        guint want;

        if (!b->chosen || !b->rebar)
            continue;
        want = av_zero_top_bit(b->rebar);
        if (AV_PCI_REBAR_SIZE(want) <= size)
            continue;
        /* The size to go back to must be one the capability offers. */
        if ((size & (size - 1)) != 0 || size < AV_PCI_REBAR_SIZE(0) ||
            !(b->rebar & ((guint64)1 << (av_zero_top_bit(size) - 20)))) {
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                        "BAR %u of %s is %" G_GUINT64_FORMAT " bytes, a size its Resizable BAR capability does not "
                        "offer (0x%" G_GINT64_MODIFIER "x): it could not be put back after a resize",
                        i, run->address, size, b->rebar);
            return FALSE;
        }
        grown.bar = i;
        grown.bit = av_zero_top_bit(size) - 20;
        grown.grown = AV_PCI_REBAR_SIZE(want);
        g_array_append_val(grow, grown);
    }
    if (grow->len == 0)
        return TRUE;
    if (!state_dir) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot resize the BARs of %s: there is no state dir to record their sizes in first (the worker "
                    "and 'accelvirt scrub' give theirs)", run->address);
        return FALSE;
    }
    run->record = av_bar_record_write(state_dir, av_zero_record_key(run), run->address,
                                      (const AvBarSize *)(gpointer)grow->data, grow->len, error);
    if (!run->record)
        return FALSE;
    av_point_crash_named("bar-recorded");

    /* A resize unbinds the device from vfio-pci: no hold meanwhile. */
    av_zero_close(run);
    if (!av_scrub_unhold(run->ctx, &run->unheld, error))
        return FALSE;
    for (guint k = 0; k < grow->len; k++) {
        const AvBarSize *g = &g_array_index(grow, AvBarSize, k);
        AvZeroBar *b = &run->bars[g->bar];

        b->size_before = AV_PCI_REBAR_SIZE(g->bit);
        b->size_after = g->grown;
        b->restore_bit = g->bit;
        if (!av_vfio_resize_bar(run->ctx->root, run->ctx->ops, run->address, g->bar,
                                av_zero_top_bit(g->grown) - 20, error))
            return FALSE;
        json_array_append_new(resized, json_pack("{s:i, s:I, s:I}", "bar", (int)g->bar,
                                                 "from", (json_int_t)b->size_before,
                                                 "to", (json_int_t)g->grown));
    }
    if ((run->unheld && !av_scrub_rehold(run->ctx, 0, error)) || !av_zero_open(run, error))
        return FALSE;
    for (guint i = 0; i < AV_PCI_BAR_COUNT; i++) {
        AvZeroBar *b = &run->bars[i];

        if (b->size_before && run->regions[i].size != b->size_after) {
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                        "BAR %u of %s is %" G_GUINT64_FORMAT " bytes after its resize to %" G_GUINT64_FORMAT,
                        i, run->address, run->regions[i].size, b->size_after);
            return FALSE;
        }
    }
    av_point_crash_named("bar-grown");
    return TRUE;
}

/* Puts every BAR that av_zero_resize_up() grew back to its size (the
 * handle closed).  Tries them all; FALSE with the first error.  The record
 * of their sizes is removed once every one is back (av_vfio_resize_bar()
 * checks the kernel's account of each) and the hold taken again; else it
 * stays, for whoever comes next (av-bar-sizes.h). */
static gboolean
av_zero_resize_back(AvZeroRun *run, GError **error)
{
    g_autoptr(GError) rehold = NULL;
    gboolean ok = TRUE, unholding = FALSE;

    av_zero_close(run);
    if (run->record)
        av_point_crash_named("bar-zeroed");
    for (guint i = 0; i < AV_PCI_BAR_COUNT; i++) {
        g_autoptr(GError) local = NULL;

        guint64 start = 0, end = 0;

        if (!run->bars[i].size_before)
            continue;
        /* Never grown (the kernel refused the resize): nothing to undo. */
        if (av_pci_read_resource(run->ctx->root, run->address, i, &start, &end, NULL) == 0 && end > start &&
            end - start + 1 == run->bars[i].size_before)
            continue;
        if (!unholding && !av_scrub_unhold(run->ctx, &run->unheld, error))
            return FALSE;
        unholding = TRUE;
        if (!av_vfio_resize_bar(run->ctx->root, run->ctx->ops, run->address, i, run->bars[i].restore_bit, &local)) {
            if (ok)
                g_propagate_prefixed_error(error, g_steal_pointer(&local), "cannot put BAR %u back to %" G_GUINT64_FORMAT
                                           " bytes after its scrub: ", i, run->bars[i].size_before);
            ok = FALSE;
        }
    }
    if (run->unheld && !av_scrub_rehold(run->ctx, 0, &rehold)) {
        if (ok)
            g_propagate_error(error, g_steal_pointer(&rehold));
        ok = FALSE;
    }
    if (ok && run->record) {
        av_point_crash_named("bar-back");
        ok = av_bar_record_remove(g_steal_pointer(&run->record), error);
    }
    return ok;
}

/* Before anything else: a record of this device's BAR sizes left by a run
 * that was cut short (killed between a resize and the way back) puts the
 * BARs back first, the hold dropped meanwhile; the facts go to the step's
 * "restored_first" {"bars": [...], "since"}.  The record is removed once
 * they are back.  FALSE when they cannot be put back (the record stays,
 * its error kept) or another process holds the record. */
static gboolean
av_zero_resume(AvZeroRun *run, GError **error)
{
    g_autoptr(AvBarRecord) record = NULL;
    g_autoptr(GError) rehold = NULL;
    g_autoptr(GError) local = NULL;
    g_autoptr(GError) keep = NULL;
    const char *state_dir = av_zero_state_dir(run);
    json_t *done;
    gboolean unheld = FALSE, ok;

    if (!state_dir || !av_bar_record_exists(state_dir, av_zero_record_key(run)))
        return TRUE;
    if (!av_bar_record_take(state_dir, av_zero_record_key(run), 5000, &record, error))
        return FALSE;
    if (!record)
        return TRUE;
    if (!av_scrub_unhold(run->ctx, &unheld, error))
        return FALSE;
    done = json_array();
    json_object_set_new(run->ctx->entry, "restored_first",
                        json_pack("{s:o, s:I}", "bars", done, "since", (json_int_t)record->since));
    ok = av_bar_record_restore(run->ctx->root, run->ctx->ops, record, done, &local);
    if (unheld && !av_scrub_rehold(run->ctx, 0, &rehold) && ok) {
        local = g_steal_pointer(&rehold);
        ok = FALSE;
    }
    if (!ok) {
        g_prefix_error(&local, "the BAR sizes of %s recorded before a resize that was cut short could not be put "
                       "back: ", run->address);
        if (!av_bar_record_set_error(record, local->message, &keep))
            g_prefix_error(&local, "%s; ", keep->message);
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    av_point_crash_named("bar-restored");
    return av_bar_record_remove(g_steal_pointer(&record), error);
}

/* Chooses the BARs to zero: the step's "bars", or every prefetchable memory
 * BAR; every other implemented BAR gets the reason it is skipped. */
static gboolean
av_zero_choose(AvZeroRun *run, GError **error)
{
    json_t *bars_opt = json_object_get(run->ctx->step->options, "bars");
    const AvRegion *regions = run->regions;

    if (bars_opt) {
        size_t k;
        json_t *item;

        json_array_foreach(bars_opt, k, item) {
            json_int_t i = json_integer_value(item);

            if (i < 0 || i >= AV_PCI_BAR_COUNT) {
                g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "BAR %" JSON_INTEGER_FORMAT " does not exist", i);
                return FALSE;
            }
            if (regions[i].size == 0) {
                g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                            "BAR %d of %s is not implemented; remove it from 'bars' of profile '%s'",
                            (int)i, run->address, run->ctx->profile->name);
                return FALSE;
            }
            if (!regions[i].is_memory) {
                g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                            "BAR %d of %s is an I/O port BAR, which vfio-zero never writes; "
                            "remove it from 'bars' of profile '%s'", (int)i, run->address, run->ctx->profile->name);
                return FALSE;
            }
            run->bars[i].chosen = TRUE;
        }
    } else {
        /* Prefetchable memory BARs are memory (a GPU's framebuffer, ivshmem's
         * shared memory); the others are registers, which zeros could upset
         * and which do not read back as written. */
        for (guint i = 0; i < AV_PCI_BAR_COUNT; i++)
            run->bars[i].chosen = regions[i].is_memory && regions[i].prefetchable && regions[i].size > 0;
    }
    for (guint i = 0; i < AV_PCI_BAR_COUNT; i++) {
        AvZeroBar *b = &run->bars[i];

        if (b->chosen || regions[i].size == 0)
            continue;
        if (!regions[i].is_memory)
            b->skip = "an I/O port BAR, which vfio-zero never writes";
        else if (bars_opt)
            b->skip = "not named in the step's 'bars'";
        else
            b->skip = "not prefetchable: registers, not memory (name it in 'bars' to zero it)";
    }
    for (guint i = 0; i < AV_PCI_BAR_COUNT; i++) {
        if (run->bars[i].chosen && !regions[i].mmap_ok && !(regions[i].writable && regions[i].readable)) {
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                        "BAR %u of %s can be neither mapped nor read and written through VFIO", i, run->address);
            return FALSE;
        }
        if (run->bars[i].chosen)
            return TRUE;
    }
    g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                "%s has no prefetchable memory BAR to zero; name its BARs in 'bars' or remove the vfio-zero step from profile '%s'",
                run->address, run->ctx->profile->name);
    return FALSE;
}

/* The note of the vendor of @address whose BARs do not map its memory, or
 * NULL. */
static const char *
av_zero_unmapped_note(const AvRoot *root, const char *address)
{
    g_autofree char *path = av_sys_path("bus/pci/devices/%s/vendor", address);
    guint64 vendor;

    if (av_root_read_uint(root, path, 16, &vendor) < 0)
        return NULL;
    for (gsize i = 0; i < G_N_ELEMENTS(av_zero_unmapped_vendors); i++)
        if (av_zero_unmapped_vendors[i].vendor == vendor)
            return av_zero_unmapped_vendors[i].note;
    return NULL;
}

/* The method "vfio-zero" (accelvirt-policy(5)): opens the device through
 * ctx->ops, zeroes the BARs of the step's "bars" (default: every prefetchable memory BAR
 * of a size above 0; I/O port BARs are never written) and verifies them.
 * With "resize", a BAR with the Resizable BAR capability first grows to the
 * size that covers the device's memory and goes back afterwards.  A device
 * without a memory BAR to zero fails the step: a profile that asks to zero
 * a device with nothing to zero is a mistake to fix, not a scrub that
 * happened.  Adds to ctx->entry: "bytes" (zeroed in all), "verify", "bars"
 * [{"bar", "size", "prefetchable", "written", "read_back", "method": "mmap",
 * "pwrite" or "mmap+pwrite", "seconds"}] (the BARs done, the failing one
 * included), "skipped" [{"bar", "size", "reason"}], "resized" [{"bar",
 * "from", "to"}], "mb_per_s" (bytes zeroed per second of zeroing and
 * verifying, 10^6 bytes) and "coverage" (av_scrub_coverage_new()).  The
 * step's "seconds" is av_scrub_run()'s.  Progress goes to
 * ctx->target->progress in bytes of work (written plus read back). */
gboolean
av_scrub_method_vfio_zero(AvScrubContext *ctx, char **ret_message, GError **error)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(GError) back_err = NULL;
    const AvScrubTarget *target = ctx->target;
    const char *verify_name = json_string_value(json_object_get(ctx->step->options, "verify"));
    gboolean resize = json_is_true(json_object_get(ctx->step->options, "resize"));
    AvZeroVerify verify = verify_name && g_str_equal(verify_name, "sample") ? AV_ZERO_VERIFY_SAMPLE
                                                                            : AV_ZERO_VERIFY_FULL;
    AvZeroRun run = { .ctx = ctx, .address = target->address };
    AvZeroMethodProgress mp = { target, 0, 0 };
    json_t *bars = json_array();
    json_t *skipped = json_array();
    json_t *resized = json_array();
    const char *memory_source = NULL;
    const char *unmapped = NULL;
    guint64 bytes = 0, read_back = 0, memory = 0;
    guint n_chosen = 0;
    gint64 start;
    double seconds = 0;
    gboolean ok = TRUE;

    json_object_set_new(ctx->entry, "bars", bars);
    json_object_set_new(ctx->entry, "skipped", skipped);
    json_object_set_new(ctx->entry, "resized", resized);
    json_object_set_new(ctx->entry, "verify", json_string(verify == AV_ZERO_VERIFY_SAMPLE ? "sample" : "full"));
    json_object_set_new(ctx->entry, "bytes", json_integer(0));

    if (!target->address || target->mdev_uuid) {
        g_set_error(&err, AV_ERROR, AV_ERROR_POLICY,
                    "vfio-zero needs a whole PCI function, and '%s' is not one",
                    target->identity ? target->identity : "(unnamed)");
        goto out_fail;
    }
    if (!av_zero_resume(&run, &err) || !av_zero_open(&run, &err) || !av_zero_choose(&run, &err))
        goto out_fail;
    for (guint i = 0; i < AV_PCI_BAR_COUNT; i++) {
        int r = av_pci_read_rebar_sizes(ctx->root, run.address, i, &run.bars[i].rebar);

        if (r < 0 && r != -ENOENT) {
            av_error_errno(&err, r, "cannot read the sizes BAR %u of %s may take (resource%u_resize)", i,
                           run.address, i);
            goto out_fail;
        }
        if (r < 0)
            run.bars[i].rebar = 0;
    }
    memory = av_zero_device_memory(&run, &memory_source);
    unmapped = av_zero_unmapped_note(ctx->root, run.address);
    if (resize && !av_zero_resize_up(&run, resized, &err))
        goto out_restore;

    for (guint i = 0; i < AV_PCI_BAR_COUNT; i++) {
        if (run.bars[i].skip)
            json_array_append_new(skipped, json_pack("{s:i, s:I, s:s}", "bar", (int)i,
                                                     "size", (json_int_t)run.regions[i].size,
                                                     "reason", run.bars[i].skip));
        if (!run.bars[i].chosen)
            continue;
        n_chosen++;
        mp.total += run.regions[i].size + av_scrub_zero_verify_bytes(run.regions[i].size, verify);
    }

    start = g_get_monotonic_time();
    for (guint i = 0; ok && i < AV_PCI_BAR_COUNT; i++) {
        AvZeroOptions o = { .verify = verify };
        AvZeroResult res = { 0 };
        g_autoptr(GError) local = NULL;
        gint64 bar_start = g_get_monotonic_time();
        const AvRegion *region = &run.regions[i];

        if (!run.bars[i].chosen)
            continue;
        if (target->progress) {
            o.progress = av_zero_method_progress;
            o.progress_data = &mp;
        }
        ok = av_scrub_zero_region(region->fd, region->offset, region->size, region->mmap_ok, &o, &res, &local);
        bytes += res.zeroed;
        read_back += res.verified;
        mp.base += region->size + av_scrub_zero_verify_bytes(region->size, verify);
        json_array_append_new(bars, json_pack("{s:i, s:I, s:b, s:I, s:I, s:s, s:f}", "bar", (int)i,
                                              "size", (json_int_t)region->size, "prefetchable", region->prefetchable,
                                              "written", (json_int_t)res.zeroed, "read_back", (json_int_t)res.verified,
                                              "method", av_zero_how(&res),
                                              "seconds", (double)(g_get_monotonic_time() - bar_start) / G_USEC_PER_SEC));
        if (!ok)
            g_set_error(&err, local->domain, local->code, "BAR %u of %s: %s", i, run.address, local->message);
    }
    seconds = (double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC;

out_restore:
    /* Every BAR goes back to its size, whether the zeroing worked or not. */
    if (!av_zero_resize_back(&run, &back_err) && !err)
        err = g_steal_pointer(&back_err);
    av_zero_close(&run);
    /* Not back: the record stays for the next worker or reconcile. */
    g_clear_pointer(&run.record, av_bar_record_free);
    json_object_set_new(ctx->entry, "bytes", json_integer((json_int_t)bytes));
    json_object_set_new(ctx->entry, "mb_per_s", json_real(seconds > 0 ? (double)bytes / 1e6 / seconds : 0.0));
    json_object_set_new(ctx->entry, "coverage",
                        av_scrub_coverage_new(unmapped ? 0 : bytes, unmapped ? 0 : read_back, memory, memory_source,
                                              "measured", unmapped));
    if (err)
        goto out_fail;

    {
        g_autofree char *size = g_format_size_full(bytes, G_FORMAT_SIZE_IEC_UNITS);
        g_autofree char *cov = av_scrub_coverage_describe(json_object_get(ctx->entry, "coverage"));

        *ret_message = g_strdup_printf("zeroed %u BAR%s of %s (%s) at %.0f MB/s%s; %s", n_chosen,
                                       n_chosen == 1 ? "" : "s", target->address, size,
                                       seconds > 0 ? (double)bytes / 1e6 / seconds : 0.0,
                                       json_array_size(resized) ? " (resized for the scrub, and back)" : "", cov);
    }
    return TRUE;

out_fail:
    av_zero_close(&run);
    g_clear_pointer(&run.record, av_bar_record_free);
    if (!json_object_get(ctx->entry, "coverage"))
        json_object_set_new(ctx->entry, "coverage",
                            av_scrub_coverage_new(0, 0, memory, memory_source, "measured", unmapped));
    *ret_message = g_strdup(err->message);
    g_propagate_error(error, g_steal_pointer(&err));
    return FALSE;
}
