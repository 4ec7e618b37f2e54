/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt benchmark: the worker's check after a scrub (issue 38, item
 * 4).  A measurement, not a test: it prints medians, their ratio and
 * whether the goal is met, and never fails on timing (only when a
 * check itself fails, or the targeted one does not confirm a host where
 * nothing changed: a figure of a check that fails is no figure).
 *
 * On fake hosts of 8 managed A100s with 50 other PCI functions and 512
 * with 5,000 (bench/mkbenchhost.py, trees on tmpfs), whose pool was
 * reconciled with the whole host in this boot, what the worker does after
 * the scrub of one GPU before it may free it, side by side in one run, the
 * two interleaved so that the machine's load falls on both alike:
 *   whole     the scan of the whole host, the pool opened (its lock, its
 *             file read) and reconciled with it (what the worker did
 *             before issue 38, and still does when the pool disagrees);
 *   targeted  av_scrub_job_scan() (the GPU, its group, its bridges, every
 *             function that may present its identity), the pool opened
 *             and av_scrub_job_confirm().
 * Neither saves the pool.
 *
 *   bench-check [--runs N] [--python PATH] [--mkhost PATH] [--mkhosts PATH]
 */
#include "config.h"

#include <glib/gstdio.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "lifecycle/av-scrub-job.h"
#include "pci/av-pci.h"
#include "policy/av-policy.h"
#include "pool/av-pool.h"
#include "util/av-root.h"

#include "bench-time.h"

#define GOAL_TARGETED_S 0.2       /* per freed GPU at 512 GPUs */
#define BENCH_GPU "0000:01:00.0"

typedef struct {
    guint gpus;
    guint others;
} BenchHost;

static const BenchHost bench_hosts[] = { { 8, 50 }, { 512, 5000 } };

static const char bench_policy[] =
    "{\"profiles\": [{\"name\": \"bench-a100\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x20f1\"},"
    " \"attach\": \"vfio-pci\", \"granularity\": \"card\", \"numa\": \"preferred\","
    " \"scrub\": [{\"method\": \"none\"}], \"restore_driver\": \"on-release\"}]}\n";

static void G_GNUC_NORETURN
fail(const char *what, const GError *err)
{
    fprintf(stderr, "bench-check: %s: %s\n", what, err ? err->message : "failed");
    exit(1);
}

/* Writes host @h at @root with mkbenchhost.py. */
static void
make_host(const char *python, const char *mkhost, const char *mkhosts, const char *root, const BenchHost *h)
{
    g_autofree char *gpus = g_strdup_printf("%u", h->gpus);
    g_autofree char *others = g_strdup_printf("%u", h->others);
    const char *argv[] = { python, mkhost, "--mkhosts", mkhosts, "--out", root, "--gpus", gpus, "--others", others,
                           NULL };
    g_autoptr(GError) err = NULL;
    g_autofree char *errout = NULL;
    int status = 0;
    double t = bench_now_s();

    if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL,
                      &errout, &status, &err) ||
        !g_spawn_check_wait_status(status, &err)) {
        fprintf(stderr, "%s", errout ? errout : "");
        fail("cannot generate a host", err);
    }
    printf("  host %u GPUs + %u other functions: generated in %.1f s\n", h->gpus, h->others, bench_now_s() - t);
}

/* The whole check: scan, pool, reconcile. */
static double
check_whole(const AvRoot *root, const char *state, const AvPolicy *policy)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvPool) pool = NULL;
    gboolean changed = FALSE;
    double t = bench_now_s();

    host = av_host_scan(root, &err);
    if (!host)
        fail("the whole scan", err);
    pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    if (!pool || !av_pool_reconcile(pool, host, policy, &changed, &err))
        fail("the whole reconcile", err);
    return bench_now_s() - t;
}

/* The targeted check: av_scrub_job_scan(), pool, av_scrub_job_confirm(). */
static double
check_targeted(const AvRoot *root, const char *state, const AvPolicy *policy, const AvScrubJob *job)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_auto(GStrv) addresses = NULL;
    g_autofree char *why = NULL;
    double t = bench_now_s();

    host = av_scrub_job_scan(root, job, &addresses, &err);
    if (!host)
        fail("the targeted scan", err);
    pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    if (!pool)
        fail("the pool", err);
    if (!av_scrub_job_confirm(pool, policy, host, addresses, &why)) {
        fprintf(stderr, "bench-check: the targeted check did not confirm a host where nothing changed: %s\n", why);
        exit(1);
    }
    return bench_now_s() - t;
}

int
main(int argc, char **argv)
{
    gint runs = 11;
    g_autofree char *python = NULL, *mkhost = NULL, *mkhosts = NULL, *tmp = NULL;
    const GOptionEntry entries[] = {
        { "runs", 0, 0, G_OPTION_ARG_INT, &runs, "Checks of each kind on each host (11)", "N" },
        { "python", 0, 0, G_OPTION_ARG_FILENAME, &python, "Python 3 for mkbenchhost.py", "PATH" },
        { "mkhost", 0, 0, G_OPTION_ARG_FILENAME, &mkhost, "bench/mkbenchhost.py", "PATH" },
        { "mkhosts", 0, 0, G_OPTION_ARG_FILENAME, &mkhosts, "tests/data/mkhosts.py", "PATH" },
        { NULL },
    };
    g_autoptr(GOptionContext) context = g_option_context_new(NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = av_policy_new();
    const char *base;
    double goal_s = 0;

    g_option_context_add_main_entries(context, entries, NULL);
    g_option_context_set_summary(context, "Measures the worker's check after a scrub (accelvirt issue 38).");
    if (!g_option_context_parse(context, &argc, &argv, &err) || argc > 1 || runs < 1) {
        fprintf(stderr, "bench-check: %s\n", err ? err->message : "usage: bench-check [OPTION...] (see --help)");
        return 2;
    }
    if (!python)
        python = g_strdup("/usr/bin/python3");
    if (!mkhost)
        mkhost = g_strdup("bench/mkbenchhost.py");
    if (!mkhosts)
        mkhosts = g_strdup("tests/data/mkhosts.py");
    if (!av_policy_add_data(policy, "bench.json", bench_policy, sizeof(bench_policy) - 1, &err))
        fail("the policy", err);
    /* Fake hosts on tmpfs: the figures are the check's, not a disk's. */
    base = g_file_test("/dev/shm", G_FILE_TEST_IS_DIR) && access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                                                                                          : g_get_tmp_dir();
    tmp = g_build_filename(base, "accelvirt-bench-check.XXXXXX", NULL);
    if (!g_mkdtemp(tmp)) {
        perror("bench-check: mkdtemp");
        return 1;
    }
    printf("bench-check: the worker's check after the scrub of one GPU, before it may be freed (whole scan and "
           "reconcile against the targeted check); median of %d checks each, interleaved\n", runs);
    printf("fake hosts (bench/mkbenchhost.py) in %s:\n", tmp);
    for (guint h = 0; h < G_N_ELEMENTS(bench_hosts); h++) {
        g_autofree char *prefix = g_strdup_printf("%s/host-%u-%u/root", tmp, bench_hosts[h].gpus,
                                                  bench_hosts[h].others);

        make_host(python, mkhost, mkhosts, prefix, &bench_hosts[h]);
    }
    printf("  %-34s %12s %12s %9s  %s\n", "host", "whole", "targeted", "ratio", "functions the targeted check read");
    for (guint h = 0; h < G_N_ELEMENTS(bench_hosts); h++) {
        g_autofree char *dir = g_strdup_printf("%s/host-%u-%u", tmp, bench_hosts[h].gpus, bench_hosts[h].others);
        g_autofree char *prefix = g_build_filename(dir, "root", NULL);
        g_autofree char *state = g_build_filename(dir, "state", NULL);
        g_autofree char *label = g_strdup_printf("%u GPUs, %u other functions", bench_hosts[h].gpus,
                                                 bench_hosts[h].others);
        g_autoptr(GArray) tw = g_array_new(FALSE, FALSE, sizeof(double));
        g_autoptr(GArray) tt = g_array_new(FALSE, FALSE, sizeof(double));
        g_autoptr(AvRoot) root = NULL;
        g_autoptr(AvScrubJob) job = g_new0(AvScrubJob, 1);
        g_autoptr(AvHost) host = NULL;
        g_auto(GStrv) addresses = NULL;
        double mw;

        g_mkdir_with_parents(state, 0700);
        root = av_root_new(prefix, &err);
        if (!root)
            fail("the root", err);
        /* The pool, reconciled with the whole host in this boot. */
        {
            g_autoptr(AvHost) whole = av_host_scan(root, &err);
            g_autoptr(AvPool) pool = NULL;
            const AvPoolDevice *gpu;

            if (!whole)
                fail("the first scan", err);
            pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
            if (!pool || !av_pool_reconcile(pool, whole, policy, NULL, &err) || !av_pool_save(pool, &err))
                fail("the first reconcile", err);
            gpu = av_pool_find_address(pool, AV_DEVICE_KIND_PCI, BENCH_GPU);
            if (!gpu)
                fail("the pool has no GPU at " BENCH_GPU, NULL);
            job->identity = g_strdup(gpu->identity);
            job->kind = AV_DEVICE_KIND_PCI;
            job->address = g_strdup(BENCH_GPU);
        }
        host = av_scrub_job_scan(root, job, &addresses, &err);
        if (!host)
            fail("the targeted scan", err);
        /* One warm-up each (page cache), then interleaved. */
        check_whole(root, state, policy);
        check_targeted(root, state, policy, job);
        for (gint i = 0; i < runs; i++) {
            double t = check_whole(root, state, policy);

            g_array_append_val(tw, t);
            t = check_targeted(root, state, policy, job);
            g_array_append_val(tt, t);
        }
        mw = bench_median_of(tw);
        goal_s = bench_median_of(tt);
        printf("  %-34s %9.1f ms %9.1f ms %8.1fx  %u of %u\n", label, mw * 1e3, goal_s * 1e3, mw / goal_s,
               host->pci->len, bench_hosts[h].gpus + bench_hosts[h].others);
        {
            char *rm[] = { (char *)"/bin/rm", (char *)"-rf", dir, NULL };

            g_spawn_sync(NULL, rm, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, NULL, NULL, NULL);
        }
    }
    printf("  goal: the targeted check under %.1f s per freed GPU at 512 GPUs: %.3f s, %s\n", GOAL_TARGETED_S, goal_s,
           goal_s < GOAL_TARGETED_S ? "met" : "NOT met");
    g_rmdir(tmp);
    return 0;
}
