/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt benchmark: the vfio-zero core (av_scrub_zero_region()) against a
 * plain memset of the same memory, side by side in one run.  A measurement,
 * not a test: it prints the throughput of each configuration, its ratio to
 * the two memset baselines, and whether it reaches the goal of issue 6 (at
 * least 90% of memset); it never fails on timing.
 *
 * The "BAR" is a memfd (shmem, 4 KiB pages), every page allocated before the
 * first measurement, or with --device a real BAR (below).  The two baselines:
 *
 *   A  memset through one mapping of the memory made (and faulted in) once,
 *      before any clock runs: the memory's bandwidth, nothing else;
 *   B  mmap of the whole memory (MAP_SHARED, MAP_POPULATE, as the routine
 *      maps a window), memset, munmap, all on the clock: a plain memset
 *      scrub of the same memory, done in one piece.
 *
 * The goal is judged against B.  A scrub starts with a device it has never
 * mapped; it cannot memset a BAR without mapping it, and A only looks faster
 * because its page tables were built before its clock started.  For the
 * memfd that is the whole difference: B's time is A's plus that of filling
 * and tearing down the page tables of 4 KiB shmem pages (shown apart, as
 * "mmap + munmap alone": about a third of B's time).  A BAR pays it too:
 * before Linux 6.12 vfio-pci fills the whole mapping with 4 KiB entries at
 * its first fault (measured with --device in the VM rig, Linux 6.1 under
 * TCG: B - A is 29% of B on a 64 MiB BAR); since 6.12 it maps 2 MiB or
 * 1 GiB entries where aligned, which should cost less (not measured yet).
 * The ratio to A is printed too, with its own verdict, so that the
 * difference stays in view.
 *
 * With --device, the memory is region N (a BAR) of a PCI function already
 * bound to vfio-pci, opened through VFIO with the project's own kernel ops
 * (av-kernel.h: device_open, device_region, as the vfio-zero method opens
 * it), and the lines are A, B and zero only: the mapping cost of a real
 * vfio-pci BAR (VM_PFNMAP, faulted in by vfio-pci on the first store, never
 * populated) instead of the memfd's.  It needs root, and it DESTROYS what
 * the region holds: the region is left all zero.  Default region: the
 * largest memory BAR that may be mmapped.  Default rounds: as many as fit
 * in BENCH_DEVICE_BUDGET_S seconds (the VM rig's BAR of 1 MiB in a TCG
 * guest: thousands).
 *
 * The machine may be small and busy, so every round runs every
 * configuration once, in an order rotated from round to round, and a ratio
 * is the median of the ratios within a round (with their range): drift
 * between rounds hits both sides of a ratio alike.
 *
 *   bench-zero [MIB [ROUNDS]]      (default 512 MiB, 9 rounds)
 *   bench-zero --device DDDD:BB:SS.F [--region N] [--rounds N]
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>

#include "scrub/av-scrub-private.h"
#include "util/av-root.h"
#include "vfio/av-kernel.h"

#define GOAL 0.90
/* --device without --rounds: rounds until this many seconds are spent
 * (at least BENCH_ROUNDS_MIN, at most BENCH_ROUNDS_MAX). */
#define BENCH_DEVICE_BUDGET_S 8.0
#define BENCH_ROUNDS_MIN 9u
#define BENCH_ROUNDS_MAX 20001u

static int
bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* The median of the @n values at @v (sorts them). */
static double
bench_median(double *v, guint n)
{
    qsort(v, n, sizeof(double), bench_cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef enum {
    BENCH_MEMSET,                /* baseline A */
    BENCH_MAP_MEMSET,            /* baseline B */
    BENCH_MAP_ONLY,
    BENCH_ZERO,
    BENCH_PWRITE,
    BENCH_ZERO_SAMPLE,
    BENCH_ZERO_FULL,
    BENCH_N
} BenchKind;

static const char *const bench_names[BENCH_N] = {
    [BENCH_MEMSET] = "A  memset, mapping already faulted in",
    [BENCH_MAP_MEMSET] = "B  mmap + memset + munmap, whole",
    [BENCH_MAP_ONLY] = "   mmap + munmap alone (page tables)",
    [BENCH_ZERO] = "vfio-zero, zero only (mmap)",
    [BENCH_PWRITE] = "vfio-zero, zero only (pwrite)",
    [BENCH_ZERO_SAMPLE] = "vfio-zero, zero + verify sample",
    [BENCH_ZERO_FULL] = "vfio-zero, zero + verify full",
};

/* The lines of each mode, in the order they are printed. */
static const BenchKind bench_kinds_memfd[] = {
    BENCH_MEMSET, BENCH_MAP_MEMSET, BENCH_MAP_ONLY, BENCH_ZERO, BENCH_PWRITE, BENCH_ZERO_SAMPLE, BENCH_ZERO_FULL,
};
static const BenchKind bench_kinds_device[] = { BENCH_MEMSET, BENCH_MAP_MEMSET, BENCH_ZERO };

/* What the runs write: @size bytes at @offset of @fd (a memfd at 0, or a
 * VFIO device fd at a region's offset), and @map, the whole of it mapped
 * once and faulted in by the warm-up: baseline A's. */
typedef struct {
    int fd;
    guint64 offset;
    guint64 size;
    guint8 *map;
} BenchTarget;

/* Maps @size bytes at @offset of @fd as the routine maps a window. */
static guint8 *
bench_map(int fd, guint64 offset, guint64 size)
{
    guint8 *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, (off_t)offset);

    if (p == MAP_FAILED) {
        perror("bench-zero: mmap");
        exit(1);
    }
    return p;
}

/* One run of @kind over @t; seconds. */
static double
bench_once(BenchKind kind, const BenchTarget *t)
{
    AvZeroOptions o = { .verify = AV_ZERO_VERIFY_NONE };
    g_autoptr(GError) err = NULL;
    gboolean mmap_ok = TRUE;
    guint8 *whole;
    gint64 start;

    /* Dirty the memory between runs, outside the clock, so each run writes
     * over a pattern as a scrub would (and verify reads real zeros). */
    memset(t->map, 0xa5, t->size);
    __sync_synchronize();
    if (kind == BENCH_ZERO_SAMPLE)
        o.verify = AV_ZERO_VERIFY_SAMPLE;
    if (kind == BENCH_ZERO_FULL)
        o.verify = AV_ZERO_VERIFY_FULL;
    if (kind == BENCH_PWRITE)
        mmap_ok = FALSE;
    start = g_get_monotonic_time();
    switch (kind) {
    case BENCH_MEMSET:
        memset(t->map, 0, t->size);
        __sync_synchronize();
        break;
    case BENCH_MAP_MEMSET:
        whole = bench_map(t->fd, t->offset, t->size);
        memset(whole, 0, t->size);
        __sync_synchronize();
        munmap(whole, t->size);
        break;
    case BENCH_MAP_ONLY:
        whole = bench_map(t->fd, t->offset, t->size);
        munmap(whole, t->size);
        break;
    default:
        if (!av_scrub_zero_region(t->fd, t->offset, t->size, mmap_ok, &o, NULL, &err)) {
            fprintf(stderr, "bench-zero: %s\n", err->message);
            exit(1);
        }
        break;
    }
    return (double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC;
}

typedef struct {
    double median;
    double min, max;
    double q1, q3;               /* the middle half of the rounds lies between */
} BenchRatio;

/* The throughput of @kind relative to @base over @n rounds, each round's
 * ratio taken within the round. */
static BenchRatio
bench_ratio(double *const *t, BenchKind kind, BenchKind base, guint n)
{
    g_autofree double *r = g_new(double, n);
    BenchRatio ratio;

    for (guint i = 0; i < n; i++)
        r[i] = t[base][i] / t[kind][i];
    ratio.median = bench_median(r, n);
    ratio.min = r[0];
    ratio.max = r[n - 1];
    ratio.q1 = r[n / 4];
    ratio.q3 = r[n - 1 - n / 4];
    return ratio;
}

static const char *
bench_verdict(double ratio)
{
    return ratio >= GOAL ? "PASS" : "below goal";
}

/* Opens region @index of the PCI function @address through VFIO, with the
 * kernel ops of the root ($ACCELVIRT_ROOT, else "/": the real ones), as the
 * vfio-zero method does; @index -1 picks the largest memory BAR that may be
 * mmapped.  Stores the handle (the caller closes it with @ret_ops'
 * device_close) and the region.  Returns FALSE with @error set. */
static gboolean
bench_device_open(const char *address, int index, const AvKernelOps **ret_ops, AvDeviceHandle **ret_handle,
                  guint *ret_index, AvRegion *ret_region, GError **error)
{
    g_autoptr(AvRoot) root = av_root_new_default(NULL, error);
    const AvKernelOps *ops;
    AvDeviceHandle *handle = NULL;
    AvRegion region = { 0 };
    guint chosen = 0;
    int r;

    if (!root)
        return FALSE;
    ops = av_kernel_ops_for(root);
    r = ops->device_open(root, address, &handle);
    if (r < 0) {
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(-r),
                    "cannot open '%s' through VFIO (%s kernel ops): %s; is it bound to vfio-pci, "
                    "its group not held by another process, and are you root?", address, ops->name, g_strerror(-r));
        return FALSE;
    }
    for (guint i = 0; i < AV_PCI_BAR_COUNT; i++) {
        AvRegion each;

        if (index >= 0 && (guint)index != i)
            continue;
        r = ops->device_region(handle, i, &each);
        if (r < 0) {
            if (index < 0)
                continue;
            g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(-r), "cannot describe region %u of '%s': %s",
                        i, address, g_strerror(-r));
            ops->device_close(handle);
            return FALSE;
        }
        if (index >= 0 || (each.size > region.size && each.is_memory && each.mmap_ok)) {
            region = each;
            chosen = i;
        }
    }
    if (region.size == 0 || !region.is_memory || !region.mmap_ok || !region.writable) {
        if (index >= 0)
            g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                        "region %d of '%s' is not a writable memory BAR that may be mmapped "
                        "(size %" G_GUINT64_FORMAT ", memory %d, mmap %d, write %d)", index, address, region.size,
                        region.is_memory, region.mmap_ok, region.writable);
        else
            g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                        "'%s' has no memory BAR that may be mmapped", address);
        ops->device_close(handle);
        return FALSE;
    }
    *ret_ops = ops;
    *ret_handle = handle;
    *ret_index = chosen;
    *ret_region = region;
    return TRUE;
}

int
main(int argc, char **argv)
{
    g_autofree char *device = NULL;
    gint region_opt = -1, rounds_opt = 0;
    const GOptionEntry entries[] = {
        { "device", 0, 0, G_OPTION_ARG_STRING, &device,
          "Measure on a BAR of this PCI function, bound to vfio-pci (its contents are lost)", "DDDD:BB:SS.F" },
        { "region", 0, 0, G_OPTION_ARG_INT, &region_opt,
          "With --device: the region (BAR) index; default the largest mappable memory BAR", "N" },
        { "rounds", 0, 0, G_OPTION_ARG_INT, &rounds_opt,
          "With --device: rounds; default as many as fit in about 8 s", "N" },
        { NULL },
    };
    g_autoptr(GOptionContext) context = g_option_context_new("[MIB [ROUNDS]]");
    g_autoptr(GError) err = NULL;
    const AvKernelOps *ops = NULL;
    AvDeviceHandle *handle = NULL;
    AvRegion region;
    guint region_index = 0;
    const BenchKind *kinds = bench_kinds_memfd;
    guint n_kinds = G_N_ELEMENTS(bench_kinds_memfd);
    guint64 mib = 512;
    guint rounds = 9;
    BenchTarget target = { .fd = -1 };
    double *t[BENCH_N] = { NULL };
    double sec[BENCH_N] = { 0 };
    BenchRatio zero_a = { 0 }, zero_b = { 0 };
    g_autofree char *what = NULL;

    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_summary(context,
                                 "Measures vfio-zero against memset: on a memfd of MIB MiB (default 512, 9 rounds),\n"
                                 "or with --device on a real BAR through VFIO.");
    if (!g_option_context_parse(context, &argc, &argv, &err)) {
        fprintf(stderr, "bench-zero: %s\n", err->message);
        return 2;
    }
    if (device) {
        if (argc > 1 || rounds_opt < 0 || region_opt < -1 || region_opt >= AV_PCI_BAR_COUNT) {
            fprintf(stderr, "usage: bench-zero --device DDDD:BB:SS.F [--region 0-5] [--rounds N]\n");
            return 2;
        }
        if (!bench_device_open(device, region_opt, &ops, &handle, &region_index, &region, &err)) {
            fprintf(stderr, "bench-zero: %s\n", err->message);
            return 1;
        }
        target.fd = region.fd;
        target.offset = region.offset;
        target.size = region.size;
        kinds = bench_kinds_device;
        n_kinds = G_N_ELEMENTS(bench_kinds_device);
        {
            g_autofree char *size_text = g_format_size_full(region.size, G_FORMAT_SIZE_IEC_UNITS);

            what = g_strdup_printf("region %u of %s (%s, %s memory BAR) through VFIO, %s kernel ops", region_index,
                                   device, size_text, region.prefetchable ? "prefetchable" : "non-prefetchable",
                                   ops->name);
        }
    } else {
        if (argc > 1)
            mib = g_ascii_strtoull(argv[1], NULL, 10);
        if (argc > 2)
            rounds = (guint)g_ascii_strtoull(argv[2], NULL, 10);
        if (mib == 0 || rounds == 0 || argc > 3 || region_opt != -1 || rounds_opt != 0) {
            fprintf(stderr, "usage: bench-zero [MIB [ROUNDS]]\n"
                            "       bench-zero --device DDDD:BB:SS.F [--region N] [--rounds N]\n");
            return 2;
        }
        target.size = mib * 1024 * 1024;
        target.fd = memfd_create("bench-bar", MFD_CLOEXEC);
        if (target.fd < 0 || ftruncate(target.fd, (off_t)target.size) < 0) {
            perror("bench-zero: memfd");
            return 1;
        }
        what = g_strdup_printf("%" G_GUINT64_FORMAT " MiB memfd (shmem, 4 KiB pages) standing in for a BAR", mib);
    }
    target.map = bench_map(target.fd, target.offset, target.size);

    for (guint i = 0; i < n_kinds; i++)
        bench_once(kinds[i], &target);   /* warm-up: faults A's mapping in */
    /* --device without --rounds: rounds until the budget is spent. */
    if (device && rounds_opt == 0)
        rounds = BENCH_ROUNDS_MAX;
    else if (device)
        rounds = (guint)rounds_opt;
    for (guint i = 0; i < n_kinds; i++)
        t[kinds[i]] = g_new(double, rounds);
    {
        gint64 start = g_get_monotonic_time();
        guint r;

        for (r = 0; r < rounds; r++) {
            if (device && rounds_opt == 0 && r >= BENCH_ROUNDS_MIN &&
                g_get_monotonic_time() - start >= BENCH_DEVICE_BUDGET_S * G_USEC_PER_SEC)
                break;
            for (guint i = 0; i < n_kinds; i++) {
                BenchKind k = kinds[(r + i) % n_kinds];

                t[k][r] = bench_once(k, &target);
            }
        }
        rounds = r;
    }
    if (device) {
        /* Leave the BAR as the runs' last one did, but surely: all zero. */
        memset(target.map, 0, target.size);
        __sync_synchronize();
    }

    printf("bench-zero: %s, window %u MiB;\n"
           "%u rounds, each running every line once in a rotated order; medians, ratios taken within a round\n\n",
           what, AV_ZERO_WINDOW / (1024 * 1024), rounds);
    printf("%-38s %6s  %-15s %-15s %s\n", "", "GB/s", "vs A (range)", "vs B (range)", "goal: >= 90% of B");
    for (guint i = 0; i < n_kinds; i++) {
        BenchKind k = kinds[i];
        g_autofree double *copy = g_memdup2(t[k], rounds * sizeof(double));
        g_autofree char *a = NULL;
        g_autofree char *b = NULL;
        BenchRatio ra, rb;

        sec[k] = bench_median(copy, rounds);
        if (k == BENCH_MAP_ONLY) {
            printf("%-38s %6s  %.0f ms, %.0f%% of B's time\n", bench_names[k], "", sec[k] * 1e3,
                   100.0 * sec[k] / sec[BENCH_MAP_MEMSET]);
            continue;
        }
        ra = bench_ratio(t, k, BENCH_MEMSET, rounds);
        rb = bench_ratio(t, k, BENCH_MAP_MEMSET, rounds);
        a = k == BENCH_MEMSET ? g_strdup("100%")
                              : g_strdup_printf("%3.0f%% (%.0f-%.0f)", 100 * ra.median, 100 * ra.min, 100 * ra.max);
        b = k == BENCH_MAP_MEMSET ? g_strdup("100%")
                                  : g_strdup_printf("%3.0f%% (%.0f-%.0f)", 100 * rb.median, 100 * rb.min, 100 * rb.max);
        printf("%-38s %6.2f  %-15s %-15s %s\n", bench_names[k], (double)target.size / 1e9 / sec[k], a, b,
               k >= BENCH_ZERO ? bench_verdict(rb.median) : "");
        if (k == BENCH_ZERO) {
            zero_a = ra;
            zero_b = rb;
        }
    }

    printf("\ngoal (issue 6), vfio-zero zero only >= %.0f%% of a plain memset of the same %s\n"
           "mapped in the run (B): %s (%.0f%%)\n", GOAL * 100, device ? "BAR" : "memfd", bench_verdict(zero_b.median),
           100 * zero_b.median);
    if (device)
        printf("against A, whose mapping was faulted in before its clock started: %s (%.0f%%);\n"
               "B - A = mapping the BAR, vfio-pci faulting it in, unmapping it: %.3f of B's %.3f ms (%.0f%%)\n",
               bench_verdict(zero_a.median), 100 * zero_a.median, (sec[BENCH_MAP_MEMSET] - sec[BENCH_MEMSET]) * 1e3,
               sec[BENCH_MAP_MEMSET] * 1e3, 100.0 * (1 - sec[BENCH_MEMSET] / sec[BENCH_MAP_MEMSET]));
    else
        printf("against A, whose page tables were built before its clock started: %s (%.0f%%);\n"
               "B = A + mapping the memfd alone (%.0f + %.0f = %.0f ms, measured %.0f ms): the difference is the\n"
               "page tables of 4 KiB shmem pages, which any mapping of this memfd pays (a BAR: see --device)\n",
               bench_verdict(zero_a.median), 100 * zero_a.median, sec[BENCH_MEMSET] * 1e3, sec[BENCH_MAP_ONLY] * 1e3,
               (sec[BENCH_MEMSET] + sec[BENCH_MAP_ONLY]) * 1e3, sec[BENCH_MAP_MEMSET] * 1e3);
    /* A median of 9 shrugs off a few bad rounds; a wide middle half means
     * more than a few. */
    if (zero_b.q3 - zero_b.q1 > 0.10)
        printf("the machine was busy: the middle half of the rounds put zero only at %.0f-%.0f%% of B;\n"
               "rerun before trusting these verdicts\n", 100 * zero_b.q1, 100 * zero_b.q3);
    if (!device)
        printf("verify cost: sample %+.0f%%, full %+.0f%% of the zero-only time\n",
               100.0 * (sec[BENCH_ZERO_SAMPLE] / sec[BENCH_ZERO] - 1),
               100.0 * (sec[BENCH_ZERO_FULL] / sec[BENCH_ZERO] - 1));
    for (guint k = 0; k < BENCH_N; k++)
        g_free(t[k]);
    munmap(target.map, target.size);
    if (device)
        ops->device_close(handle);   /* the region's fd is the handle's */
    else
        close(target.fd);
    return 0;
}
