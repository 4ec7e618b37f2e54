/* accelvirt benchmark: the vfio-zero core (av_scrub_zero_region()) against a
 * plain memset of the same memory, side by side in one run.  A measurement,
 * not a test: it prints the median throughput of each, its ratio to memset,
 * and whether zeroing alone reaches the goal of issue 6 (at least 90% of
 * memset); the cost of verifying is shown apart.  It never fails on timing.
 *
 * The "BAR" is a memfd, every page allocated before the first measurement.
 * memset writes through one mapping of it made once; the routine maps it
 * window by window (64 MiB) on each run, as it does a BAR, so its figure
 * includes the mmap/munmap and page-table cost that a real scrub pays.
 * A second baseline maps the whole memfd at once, memsets and unmaps it:
 * the same page-table work without windows, which tells what the windows
 * themselves cost apart from what mapping 4 KiB shmem pages costs.
 *
 *   bench-zero [MIB [REPEATS]]      (default 512 MiB, 7 repeats) */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>

#include "scrub/av-scrub-private.h"

#define GOAL 0.90

static int
bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double
bench_median(double *v, guint n)
{
    qsort(v, n, sizeof(double), bench_cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef enum {
    BENCH_MEMSET,
    BENCH_MAP_MEMSET,
    BENCH_ZERO,
    BENCH_ZERO_SAMPLE,
    BENCH_ZERO_FULL,
    BENCH_PWRITE,
} BenchKind;

static const char *const bench_names[] = {
    [BENCH_MEMSET] = "memset of the mapping",
    [BENCH_MAP_MEMSET] = "mmap whole + memset + munmap",
    [BENCH_ZERO] = "vfio-zero, zero only (mmap)",
    [BENCH_ZERO_SAMPLE] = "vfio-zero, zero + verify sample",
    [BENCH_ZERO_FULL] = "vfio-zero, zero + verify full",
    [BENCH_PWRITE] = "vfio-zero, zero only (pwrite)",
};

/* One run of @kind over the @size bytes of @fd (mapped at @map); seconds. */
static double
bench_once(BenchKind kind, int fd, guint8 *map, guint64 size)
{
    AvZeroOptions o = { .verify = AV_ZERO_VERIFY_NONE };
    g_autoptr(GError) err = NULL;
    gboolean mmap_ok = TRUE;
    gint64 start;

    /* Dirty the memory between runs, outside the clock, so each run writes
     * over a pattern as a scrub would (and verify reads real zeros). */
    memset(map, 0xa5, size);
    if (kind == BENCH_ZERO_SAMPLE)
        o.verify = AV_ZERO_VERIFY_SAMPLE;
    if (kind == BENCH_ZERO_FULL)
        o.verify = AV_ZERO_VERIFY_FULL;
    if (kind == BENCH_PWRITE)
        mmap_ok = FALSE;
    start = g_get_monotonic_time();
    if (kind == BENCH_MEMSET) {
        memset(map, 0, size);
        __sync_synchronize();
    } else if (kind == BENCH_MAP_MEMSET) {
        guint8 *whole = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);

        if (whole == MAP_FAILED) {
            perror("bench-zero: mmap");
            exit(1);
        }
        memset(whole, 0, size);
        __sync_synchronize();
        munmap(whole, size);
    } else if (!av_scrub_zero_region(fd, 0, size, mmap_ok, &o, NULL, &err)) {
        fprintf(stderr, "bench-zero: %s\n", err->message);
        exit(1);
    }
    return (double)(g_get_monotonic_time() - start) / G_USEC_PER_SEC;
}

int
main(int argc, char **argv)
{
    guint64 mib = argc > 1 ? g_ascii_strtoull(argv[1], NULL, 10) : 512;
    guint repeats = argc > 2 ? (guint)g_ascii_strtoull(argv[2], NULL, 10) : 7;
    guint64 size = mib * 1024 * 1024;
    double gbps[G_N_ELEMENTS(bench_names)];
    g_autofree double *t = NULL;
    guint8 *map;
    int fd;

    if (mib == 0 || repeats == 0) {
        fprintf(stderr, "usage: bench-zero [MIB [REPEATS]]\n");
        return 2;
    }
    fd = memfd_create("bench-bar", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
        perror("bench-zero: memfd");
        return 1;
    }
    map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED) {
        perror("bench-zero: mmap");
        return 1;
    }
    t = g_new(double, repeats);
    printf("bench-zero: %" G_GUINT64_FORMAT " MiB memfd, window %u MiB, median of %u runs\n\n", mib,
           AV_ZERO_WINDOW / (1024 * 1024), repeats);
    printf("%-36s %10s %12s\n", "", "GB/s", "vs memset");
    /* Interleaved: each repeat runs every kind once, so that drift in the
     * machine (frequency, other load) hits them alike. */
    {
        double all[G_N_ELEMENTS(bench_names)][64];
        guint n = MIN(repeats, 64u);

        for (guint k = 0; k < G_N_ELEMENTS(bench_names); k++)
            bench_once((BenchKind)k, fd, map, size); /* warm-up */
        for (guint r = 0; r < n; r++)
            for (guint k = 0; k < G_N_ELEMENTS(bench_names); k++)
                all[k][r] = bench_once((BenchKind)k, fd, map, size);
        for (guint k = 0; k < G_N_ELEMENTS(bench_names); k++) {
            gbps[k] = (double)size / 1e9 / bench_median(all[k], n);
            printf("%-36s %10.2f %11.0f%%\n", bench_names[k], gbps[k], 100.0 * gbps[k] / gbps[BENCH_MEMSET]);
        }
    }
    printf("\ngoal: zero only >= %.0f%% of memset: %s (%.0f%%)\n", GOAL * 100,
           gbps[BENCH_ZERO] >= GOAL * gbps[BENCH_MEMSET] ? "met" : "NOT met",
           100.0 * gbps[BENCH_ZERO] / gbps[BENCH_MEMSET]);
    printf("zero only vs one whole mapping (same page-table work): %.0f%%\n",
           100.0 * gbps[BENCH_ZERO] / gbps[BENCH_MAP_MEMSET]);
    printf("verify cost: sample %+.0f%%, full %+.0f%% of the zero-only time\n",
           100.0 * (gbps[BENCH_ZERO] / gbps[BENCH_ZERO_SAMPLE] - 1),
           100.0 * (gbps[BENCH_ZERO] / gbps[BENCH_ZERO_FULL] - 1));
    munmap(map, size);
    close(fd);
    return 0;
}
