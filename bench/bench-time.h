/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt benchmarks: the clock and the median that bench-hook and
 * bench-check share. */
#pragma once

#include <time.h>

#include <glib.h>

/* CLOCK_MONOTONIC in seconds. */
static inline double
bench_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline int
bench_cmp_double(gconstpointer a, gconstpointer b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* The median of the doubles of @t (sorts them); 0 when empty. */
static inline double
bench_median_of(GArray *t)
{
    g_array_sort(t, bench_cmp_double);
    if (t->len == 0)
        return 0;
    if (t->len % 2)
        return g_array_index(t, double, t->len / 2);
    return (g_array_index(t, double, t->len / 2 - 1) + g_array_index(t, double, t->len / 2)) / 2;
}
