/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt enroll, scrub and quarantine: the operator's side of scrubbing.
 *
 *   enroll [--replace] DEVICE... record the option ROM hash of free or quarantined devices
 *   enroll --all                 ... of every free PCI device not enrolled yet
 *   scrub DEVICE                 run the profile's scrub steps by hand
 *   quarantine list              the quarantined devices and why
 *   quarantine clear DEVICE      give it back to its drivers, then quarantined -> free
 *
 * DEVICE is a PCI address or a pool identity. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "cli.h"
#include "lifecycle/av-lifecycle.h"
#include "scrub/av-scrub.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "util/av-names.h"
#include "vfio/av-kernel.h"

/* A profile of one "rom-check" step, to measure a ROM. */
static AvProfile *
av_cli_rom_profile(void)
{
    AvProfile *p = g_new0(AvProfile, 1);
    AvScrubStep *step = g_new0(AvScrubStep, 1);

    p->name = g_strdup("enroll");
    p->scrub = g_ptr_array_new();
    step->method = AV_SCRUB_METHOD_ROM_CHECK;
    step->options = json_pack("{s:s}", "method", "rom-check");
    g_ptr_array_add(p->scrub, step);
    return p;
}

static void
av_cli_rom_profile_free(AvProfile *p)
{
    AvScrubStep *step = g_ptr_array_index(p->scrub, 0);

    json_decref(step->options);
    g_free(step);
    g_ptr_array_unref(p->scrub);
    g_free(p->name);
    g_free(p);
}

/* Measures the option ROM of @dev: what "rom-check" hashes.  Caller frees. */
static char *
av_cli_rom_measure(const AvRoot *root, const AvPoolDevice *dev, GError **error)
{
    AvProfile *profile = av_cli_rom_profile();
    AvScrubTarget target = { .identity = dev->identity, .address = dev->address, .iommu_group = dev->iommu_group };
    g_autoptr(json_t) report = NULL;
    g_autoptr(GError) local = NULL;
    json_t *hash;
    char *ret = NULL;

    /* Not enrolled yet, so the step fails; its report holds the hash. */
    av_scrub_run(root, av_kernel_ops_for(root), profile, &target, &report, &local);
    av_cli_rom_profile_free(profile);
    hash = report ? json_object_get(json_array_get(json_object_get(report, "steps"), 0), "sha256") : NULL;
    if (json_is_string(hash))
        ret = g_strdup(json_string_value(hash));
    else
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot enroll %s: %s", dev->identity,
                    local ? local->message : "no ROM hash");
    return ret;
}

/* Takes the scrub lock of the quarantined @dev, which `accelvirt scrub`
 * holds while it runs the steps on a quarantined device without the pool
 * lock, and adds it to @locks; AV_ERROR_LOCKED naming @what when another
 * accelvirt holds it.  Any other state needs no lock: the pool lock the
 * caller holds keeps scrubs off a free device. */
static gboolean
av_cli_lock_quarantined(const AvCli *cli, const AvPoolDevice *dev, const char *what, GPtrArray *locks,
                        GError **error)
{
    AvLock *lock;

    if (dev->state != AV_DEVICE_STATE_QUARANTINED)
        return TRUE;
    lock = av_scrub_lock_take(cli->state_dir, dev->identity, NULL);
    if (!lock) {
        g_set_error(error, AV_ERROR, AV_ERROR_LOCKED,
                    "device %s (%s) is being scrubbed by hand by another accelvirt; %s it when that is done",
                    dev->address ? dev->address : "-", dev->identity, what);
        return FALSE;
    }
    g_ptr_array_add(locks, lock);
    return TRUE;
}

int
av_cli_cmd_enroll(AvCli *cli, int argc, char **argv)
{
    gboolean all = FALSE;
    gboolean replace = FALSE;
    const GOptionEntry entries[] = {
        { "all", 0, 0, G_OPTION_ARG_NONE, &all, "Enroll every free PCI device of the pool not enrolled yet", NULL },
        { "replace", 0, 0, G_OPTION_ARG_NONE, &replace,
          "Replace the hash enrolled for the named devices (a firmware update you have checked)", NULL },
        { NULL },
    };
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(GPtrArray) chosen = g_ptr_array_new();
    g_autoptr(GPtrArray) locks = g_ptr_array_new_with_free_func((GDestroyNotify)av_lock_release);
    g_autoptr(GPtrArray) hashes = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *operator_name = av_cli_operator();
    json_t *enrolled = json_array();
    json_t *skipped = json_array();
    g_autoptr(json_t) out = json_pack("{s:o,s:o}", "enrolled", enrolled, "skipped", skipped);
    gboolean changed = FALSE;

    if (!av_cli_parse(cli, "enroll", "[--replace] DEVICE... | --all",
                      "Record the SHA-256 of the option ROM of PCI devices, known good, for the scrub step "
                      "'rom-check'.  DEVICE is a PCI address or a pool identity, free or quarantined (a "
                      "quarantined device stays quarantined until 'accelvirt quarantine clear').  A device "
                      "that has a hash already gets a new one only with --replace; --all enrolls the free "
                      "devices that have none.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (all == (argc > 1))
        return av_cli_usage_error("'enroll' needs devices or --all (not both); see 'accelvirt enroll --help'");
    if (all && replace)
        return av_cli_usage_error("'enroll --replace' takes the devices to re-enroll by name, not --all; "
                                  "see 'accelvirt enroll --help'");
    if (!av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);
    /* A name that is nobody's changes nothing: checked before the
     * reconcile that the write lock brings saves what it finds. */
    for (int i = 1; !all && i < argc; i++)
        if (!av_cli_device_known(cli, argv[i], &err))
            return av_cli_fail(err);
    /* Reconciled with a scan as `status` does (taken before the exclusive
     * lock, again under it when another writer changed the pool
     * meanwhile: the measure reads the ROMs at the addresses it gives). */
    pool = av_cli_open_synced_pool_again(cli, FALSE, &policy, NULL, &err);
    if (!pool)
        return av_cli_fail(err);

    if (all) {
        for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
            AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);
            const char *why;

            if (dev->kind != AV_DEVICE_KIND_PCI)
                continue;
            if (dev->state == AV_DEVICE_STATE_FREE && !dev->rom_sha256) {
                g_ptr_array_add(chosen, dev);
                continue;
            }
            why = dev->state != AV_DEVICE_STATE_FREE ? "not free" : "already enrolled";
            json_array_append_new(skipped, json_pack("{s:s,s:s?,s:s,s:s}", "identity", dev->identity, "address",
                                                     dev->address, "state", av_device_state_to_string(dev->state),
                                                     "reason", why));
        }
    } else {
        for (int i = 1; i < argc; i++) {
            AvPoolDevice *dev = av_cli_find_device(pool, argv[i], &err);

            if (!dev || !av_pool_enroll_check(dev, NULL, replace, &err) ||
                !av_cli_lock_quarantined(cli, dev, "enroll", locks, &err))
                return av_cli_fail(err);
            if (!g_ptr_array_find(chosen, dev, NULL))
                g_ptr_array_add(chosen, dev);
        }
    }
    /* Measure and check every device before recording any. */
    for (guint i = 0; i < chosen->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(chosen, i);
        char *hash = av_cli_rom_measure(root, dev, &err);

        if (!hash)
            return av_cli_fail(err);
        g_ptr_array_add(hashes, hash);
        if (!av_pool_enroll_check(dev, hash, replace, &err))
            return av_cli_fail(err);
    }
    for (guint i = 0; i < chosen->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(chosen, i);
        const char *hash = g_ptr_array_index(hashes, i);

        if (g_strcmp0(dev->rom_sha256, hash) == 0) {
            json_array_append_new(skipped, json_pack("{s:s,s:s?,s:s,s:s}", "identity", dev->identity, "address",
                                                     dev->address, "state", av_device_state_to_string(dev->state),
                                                     "reason", "unchanged"));
            continue;
        }
        json_array_append_new(enrolled, json_pack("{s:s,s:s?,s:s,s:s,s:o,s:{s:I,s:I}}", "identity", dev->identity,
                                                  "address", dev->address, "state",
                                                  av_device_state_to_string(dev->state), "rom_sha256", hash,
                                                  "previous", av_json_string_or_null(dev->rom_sha256),
                                                  "failures_reset", "scrub", (json_int_t)dev->scrub_failures,
                                                  "reset", (json_int_t)dev->reset_failures));
        if (!av_pool_enroll(pool, dev, hash, replace, operator_name, &err))
            return av_cli_fail(err);
        changed = TRUE;
    }
    if (changed && !av_pool_save(pool, &err))
        return av_cli_fail(err);

    if (cli->json) {
        av_cli_print_json(json_incref(out));
    } else {
        size_t i;
        json_t *e;

        json_array_foreach(enrolled, i, e) {
            const char *address = json_string_value(json_object_get(e, "address"));
            const char *previous = json_string_value(json_object_get(e, "previous"));

            printf("enrolled %-12s  %s  %s\n", address, json_string_value(json_object_get(e, "rom_sha256")),
                   json_string_value(json_object_get(e, "identity")));
            json_int_t scrubs = json_integer_value(json_object_get(json_object_get(e, "failures_reset"), "scrub"));
            json_int_t resets = json_integer_value(json_object_get(json_object_get(e, "failures_reset"), "reset"));

            if (previous)
                printf("    replaced %s\n", previous);
            if (scrubs)
                printf("    failure counts set to 0 (were %" JSON_INTEGER_FORMAT " failed scrubs, %" JSON_INTEGER_FORMAT
                       " of them resets)\n", scrubs, resets);
            if (g_str_equal(json_string_value(json_object_get(e, "state")), "quarantined"))
                printf("    still quarantined: 'accelvirt quarantine clear %s' gives it back once checked\n",
                       address);
        }
        json_array_foreach(skipped, i, e) {
            const char *why = json_string_value(json_object_get(e, "reason"));

            printf("skipped  %-12s  %s (%s)\n", json_string_value(json_object_get(e, "address")),
                   json_string_value(json_object_get(e, "state")),
                   g_str_equal(why, "already enrolled") ? "already enrolled; 'accelvirt enroll --replace DEVICE' "
                                                          "re-enrolls it"
                   : g_str_equal(why, "unchanged")      ? "this hash is enrolled already"
                                                        : why);
        }
        if (json_array_size(enrolled) == 0)
            printf("Nothing enrolled%s\n", json_array_size(skipped) ? "." : ": no free PCI device.");
    }
    return AV_EXIT_OK;
}

/* --- scrub ---------------------------------------------------------------------- */

typedef struct {
    gint64 start;
    gint64 last;
    gboolean printed;
} AvProgress;

static void
av_cli_progress(gpointer data, const char *method, guint64 done, guint64 total)
{
    AvProgress *p = data;
    gint64 now = g_get_monotonic_time();
    double secs = (double)(now - p->start) / G_USEC_PER_SEC;
    g_autofree char *d = g_format_size(done);
    g_autofree char *t = g_format_size(total);
    g_autofree char *rate = g_format_size(secs > 0 ? (guint64)((double)done / secs) : 0);

    if (now - p->last < G_USEC_PER_SEC / 4 && done < total)
        return;
    p->last = now;
    p->printed = TRUE;
    fprintf(stderr, "\r%s: %s of %s (%s/s)   ", method, d, t, rate);
    fflush(stderr);
}

/* The scrub job's notes: what a failure left undone (an isolation, a
 * journal entry, a hold) as a warning; the rest is in the output. */
static void
av_cli_scrub_note(gpointer data, int priority, gboolean outcome, const char *message)
{
    (void)data;
    if (priority <= LOG_ERR && !outcome)
        fprintf(stderr, "accelvirt: warning: %s\n", message);
}

typedef struct {
    AvCli *cli;
    const AvRoot *root;
} AvCliScrubPool;

static AvPool *
av_cli_scrub_open_pool(gpointer data, GError **error)
{
    AvCliScrubPool *p = data;

    return av_cli_open_pool(p->cli, p->root, AV_POOL_WRITE, error);
}

int
av_cli_cmd_scrub(AvCli *cli, int argc, char **argv)
{
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvLock) lock = NULL;
    g_autoptr(AvScrubJob) job = NULL;
    g_autofree char *operator_name = av_cli_operator();
    g_autofree char *shown_identity = NULL;
    AvProgress progress = { g_get_monotonic_time(), 0, FALSE };
    AvCliScrubPool open_data = { cli, NULL };
    AvScrubContext ctx = { 0 };
    const GError *failure;
    const AvProfile *profile;
    AvPoolDevice *dev;
    AvDeviceState from;
    json_t *report;

    if (!av_cli_parse(cli, "scrub", "DEVICE",
                      "Run the scrub steps of the device's profile by hand, on a free, dirty or quarantined "
                      "device.  A free or dirty device is scrubbing meanwhile and ends free or quarantined, as "
                      "after the worker's scrub (its profile's health limits checked before it is freed); a "
                      "quarantined device stays quarantined (clear it with 'accelvirt quarantine clear' once the "
                      "steps pass).",
                      NULL, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 2)
        return av_cli_usage_error("'scrub' needs one DEVICE (a PCI address or a pool identity)");
    if (!av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);

    if (!av_cli_device_known(cli, argv[1], &err))
        return av_cli_fail(err);
    /* Under the pool lock: check, take the device's scrub lock, and begin
     * (av-scrub-job.h); the steps run without the pool lock, as the
     * worker's, and the outcome is recorded as the worker records it. */
    pool = av_cli_open_pool(cli, root, AV_POOL_WRITE, &err);
    if (!pool)
        return av_cli_fail(err);
    dev = av_cli_find_device(pool, argv[1], &err);
    if (!dev)
        return av_cli_fail(err);
    from = dev->state;
    if (from != AV_DEVICE_STATE_FREE && from != AV_DEVICE_STATE_DIRTY && from != AV_DEVICE_STATE_QUARANTINED) {
        g_set_error(&err, AV_ERROR, AV_ERROR_STATE,
                    "device %s (%s) is %s: only a free, dirty or quarantined device can be scrubbed by hand%s",
                    dev->address ? dev->address : "-", dev->identity, av_device_state_to_string(from),
                    from == AV_DEVICE_STATE_SCRUBBING ? "; the worker is scrubbing it, wait for it"
                                                      : "; wait until its domain releases it");
        return av_cli_fail(err);
    }
    profile = dev->profile ? av_policy_find(policy, dev->profile) : NULL;
    if (!profile) {
        g_set_error(&err, AV_ERROR, AV_ERROR_POLICY,
                    "the profile '%s' of %s is not in the policies; its scrub steps are unknown",
                    dev->profile ? dev->profile : "(none)", dev->identity);
        return av_cli_fail(err);
    }
    lock = av_scrub_lock_take(cli->state_dir, dev->identity, NULL);
    if (!lock) {
        g_set_error(&err, AV_ERROR, AV_ERROR_LOCKED,
                    "device %s is being scrubbed by another accelvirt; wait for it", dev->identity);
        return av_cli_fail(err);
    }
    ctx.root = root;
    ctx.ops = av_kernel_ops_for(root);
    ctx.state_dir = cli->state_dir;
    ctx.policy = policy;
    ctx.operator_name = operator_name;
    open_data.root = root;
    ctx.open_pool = av_cli_scrub_open_pool;
    ctx.open_pool_data = &open_data;
    ctx.note = av_cli_scrub_note;
    if (isatty(STDERR_FILENO) && !cli->json) {
        ctx.progress = av_cli_progress;
        ctx.progress_data = &progress;
    }
    job = av_scrub_job_begin(&ctx, pool, dev, &err);
    if (!job)
        return av_cli_fail(err);
    g_clear_pointer(&pool, av_pool_free);

    av_scrub_job_run(&ctx, job);
    if (progress.printed)
        fputc('\n', stderr);
    if (!av_scrub_job_finish(&ctx, job, NULL, NULL, &err)) {
        /* Left scrubbing: the worker scrubs it again once this command
         * has let its scrub lock go. */
        av_cli_want_worker();
        return av_cli_fail(err);
    }
    failure = job->failure;
    report = job->report;
    shown_identity = av_cli_printable(job->identity);

    if (cli->json) {
        json_t *coverage = report ? json_object_get(report, "coverage") : NULL;
        json_t *o = json_pack("{s:s,s:s?,s:s?,s:s,s:s,s:b,s:o,s:O}", "identity", job->identity, "address",
                              job->address, "profile", job->profile, "state_before", av_device_state_to_string(from),
                              "result", job->result, "ok", failure == NULL, "reason",
                              av_json_string_or_null(failure ? failure->message : NULL), "steps",
                              report ? json_object_get(report, "steps") : json_array());

        json_object_set(o, "coverage", coverage ? coverage : json_null());
        json_object_set_new(o, "health_warning", av_json_string_or_null(job->health_warning));
        av_cli_print_json(o);
    } else {
        json_t *steps = report ? json_object_get(report, "steps") : NULL;
        json_t *coverage = report ? json_object_get(report, "coverage") : NULL;
        size_t i;
        json_t *s;

        printf("scrub of %s (%s), profile %s:\n", job->address ? job->address : "-", shown_identity, job->profile);
        json_array_foreach(steps, i, s) {
            /* a command's message is what its program printed */
            g_autofree char *text = av_cli_printable(
                json_string_value(json_object_get(s, json_object_get(s, "error") ? "error" : "message")));

            printf("  %zu. %-10s %-4s %7.2f s  %s\n", i + 1, json_string_value(json_object_get(s, "method")),
                   json_is_true(json_object_get(s, "ok")) ? "ok" : "FAIL",
                   json_number_value(json_object_get(s, "seconds")), text ? text : "");
        }
        if (json_is_object(coverage))
            printf("coverage: %s\n", json_string_value(json_object_get(coverage, "text")));
        if (from == AV_DEVICE_STATE_QUARANTINED) {
            printf("%s; the device stays quarantined%s\n", failure ? "a step failed" : "every step passed",
                   failure ? "" : ": 'accelvirt quarantine clear' gives it back to the pool");
        } else {
            g_autofree char *why = av_cli_printable(failure ? failure->message : "every step passed");

            printf("%s: %s\n", job->result, why);
        }
        if (job->health_warning) {
            g_autofree char *warning = av_cli_printable(job->health_warning);

            printf("health: warn: %s (journalled)\n", warning);
        }
    }
    return failure ? AV_EXIT_FAILURE : AV_EXIT_OK;
}

/* --- quarantine ------------------------------------------------------------------- */

int
av_cli_cmd_quarantine(AvCli *cli, int argc, char **argv)
{
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;

    if (!av_cli_parse(cli, "quarantine", "[list | clear DEVICE]",
                      "List the quarantined devices with their reasons, or give one back once you have "
                      "checked it: back to its drivers (and its IOMMU group's) as its profile's restore_driver "
                      "says, an mdev accelvirt created removed, then quarantined -> free, journalled with your "
                      "name.  When the restore fails it stays quarantined.",
                      NULL, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc == 1 || (argc == 2 && g_str_equal(argv[1], "list"))) {
        json_t *list = json_array();

        pool = av_cli_open_pool(cli, NULL, AV_POOL_READ, &err);
        if (!pool) {
            json_decref(list);
            return av_cli_fail(err);
        }
        for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
            const AvPoolDevice *d = g_ptr_array_index(av_pool_devices(pool), i);
            g_autoptr(GDateTime) dt = NULL;
            g_autofree char *since = NULL;

            if (d->state != AV_DEVICE_STATE_QUARANTINED)
                continue;
            dt = g_date_time_new_from_unix_utc(d->state_since);
            since = dt ? g_date_time_format(dt, "%Y-%m-%dT%H:%M:%SZ") : g_strdup("-");
            json_array_append_new(list, json_pack("{s:s,s:s?,s:s?,s:s,s:s?}", "identity", d->identity, "address",
                                                  d->address, "profile", d->profile, "since", since, "reason",
                                                  d->reason));
        }
        if (cli->json) {
            av_cli_print_json(json_pack("{s:o}", "devices", list));
        } else {
            size_t i;
            json_t *e;

            if (json_array_size(list) == 0)
                printf("No device is quarantined.\n");
            json_array_foreach(list, i, e)
                printf("%-12s  %-20s  %s\n    reason: %s\n", json_string_value(json_object_get(e, "address")),
                       json_string_value(json_object_get(e, "since")),
                       json_string_value(json_object_get(e, "identity")),
                       json_string_value(json_object_get(e, "reason")));
            json_decref(list);
        }
        return AV_EXIT_OK;
    }
    if (argc == 3 && g_str_equal(argv[1], "clear")) {
        g_autoptr(AvRoot) root = NULL;
        g_autoptr(AvPolicy) policy = NULL;
        g_autoptr(GPtrArray) locks = g_ptr_array_new_with_free_func((GDestroyNotify)av_lock_release);
        g_autoptr(json_t) cleared = NULL;
        g_autofree char *operator_name = av_cli_operator();
        const char *address, *identity;
        AvPoolDevice *dev;

        if (!av_cli_open(cli, &root, &policy, &err))
            return av_cli_fail(err);
        if (!av_cli_device_known(cli, argv[2], &err))
            return av_cli_fail(err);
        /* Its address as the host has it now: the restore writes there
         * (the scan taken before the exclusive lock, again under it when
         * another writer changed the pool meanwhile). */
        pool = av_cli_open_synced_pool_again(cli, FALSE, &policy, NULL, &err);
        if (!pool)
            return av_cli_fail(err);
        dev = av_cli_find_device(pool, argv[2], &err);
        if (!dev)
            return av_cli_fail(err);
        if (dev->state != AV_DEVICE_STATE_QUARANTINED) {
            g_set_error(&err, AV_ERROR, AV_ERROR_STATE, "device %s (%s) is %s, not quarantined: nothing to clear",
                        dev->address ? dev->address : "-", dev->identity, av_device_state_to_string(dev->state));
            return av_cli_fail(err);
        }
        /* Given back to its drivers (or its mdev removed), then free; a
         * failed restore leaves it quarantined and the pool unsaved. */
        if (!av_cli_lock_quarantined(cli, dev, "clear", locks, &err) ||
            !av_pool_clear_quarantine(pool, dev, root, av_kernel_ops_for(root), policy, operator_name, &cleared,
                                      &err) ||
            !av_pool_save(pool, &err))
            return av_cli_fail(err);
        /* Free and saved: the kernel may hand it out again (av-hold.h).  A
         * removed mdev had no hold (and @dev is gone with it). */
        if (!json_is_true(json_object_get(cleared, "removed_from_pool")) &&
            !av_pool_hold_drop_device(pool, root, dev, &err)) {
            fprintf(stderr, "accelvirt: warning: %s; 'accelvirt reconcile' drops it\n", err->message);
            g_clear_error(&err);
        }
        address = json_string_value(json_object_get(cleared, "address"));
        identity = json_string_value(json_object_get(cleared, "identity"));
        if (cli->json) {
            json_object_set_new(cleared, "state", json_string("free"));
            av_cli_print_json(g_steal_pointer(&cleared));
        } else if (json_is_true(json_object_get(cleared, "removed_from_pool"))) {
            printf("cleared %s: its mdev removed, out of the pool, by %s\n", identity, operator_name);
        } else if (json_object_get(cleared, "driver")) {
            const char *driver = json_string_value(json_object_get(cleared, "driver"));
            const char *how = g_str_equal(json_string_value(json_object_get(cleared, "restore_driver")), "on-release")
                                  ? "given back to" : "left on";
            json_t *companions = json_object_get(cleared, "companions");
            size_t i;
            json_t *c;

            printf("cleared %s (%s): free, %s %s, by %s\n", address ? address : "-", identity, how,
                   driver ? driver : "no driver", operator_name);
            json_array_foreach(companions, i, c) {
                const char *cd = json_string_value(json_object_get(c, "driver"));

                printf("    %s (same IOMMU group): %s %s\n", json_string_value(json_object_get(c, "address")), how,
                       cd ? cd : "no driver");
            }
        } else {
            printf("cleared %s (%s): free, by %s\n", address ? address : "-", identity, operator_name);
        }
        return AV_EXIT_OK;
    }
    return av_cli_usage_error("'quarantine' takes 'list' or 'clear DEVICE'; see 'accelvirt quarantine --help'");
}
