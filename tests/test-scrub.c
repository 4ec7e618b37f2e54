/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: the scrub method "vfio-zero" (src/scrub/av-scrub-zero.c)
 * and the device operations of the emulated kernel under it (av-kernel.c).
 *
 * The core routine runs on memfds standing in for BARs; the method runs end
 * to end on a private copy of the fake host two-socket-8gpu, whose A100 gets
 * resourceN files (sysfs has one per BAR) that the fake kernel's
 * device_region hands out as the BARs. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "av-test.h"
#include "doubles/av-doubles.h"
#include "pci/av-pci.h"
#include "policy/av-policy.h"
#include "pool/av-pool.h"
#include "fpga/av-bitstream.h"
#include "scrub/av-scrub.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "vfio/av-bar-sizes.h"
#include "vfio/av-hold.h"
#include "vfio/av-kernel.h"
#include "vfio/av-vfio.h"

/* The core routine's declarations, from the one place they are written. */
#include "scrub/av-scrub-private.h"

#define A100 "0000:17:00.0"             /* two-socket-8gpu, group 40, nvidia */
#define A100_DIR "sys/bus/pci/devices/" A100
#define PAGE AV_ZERO_PAGE

#define POLICY_A100(steps) \
    "{\"profiles\": [{\"name\": \"gpu-a100\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x20f1\"}," \
    " \"attach\": \"vfio-pci\", \"scrub\": " steps "}]}"

/* --- the core routine on memfds ----------------------------------------------- */

/* A memfd of @size bytes, every byte @fill. */
static int
memfd_filled(guint64 size, guint8 fill)
{
    int fd = memfd_create("bar", MFD_CLOEXEC);
    guint8 buf[4096];

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, (off_t)size), ==, 0);
    memset(buf, fill, sizeof(buf));
    for (guint64 at = 0; at < size; at += sizeof(buf)) {
        gsize n = (gsize)MIN((guint64)sizeof(buf), size - at);

        g_assert_cmpint(pwrite(fd, buf, n, (off_t)at), ==, (gssize)n);
    }
    return fd;
}

/* Asserts that [@from, @to) of @fd, read with pread (not the routine's own
 * reads), is all @value. */
static void
assert_bytes(int fd, guint64 from, guint64 to, guint8 value)
{
    guint8 buf[4096];

    for (guint64 at = from; at < to; at += sizeof(buf)) {
        gsize n = (gsize)MIN((guint64)sizeof(buf), to - at);

        g_assert_cmpint(pread(fd, buf, n, (off_t)at), ==, (gssize)n);
        for (gsize i = 0; i < n; i++)
            if (buf[i] != value)
                g_error("byte at %" G_GUINT64_FORMAT " is 0x%02x, not 0x%02x", at + i, buf[i], value);
    }
}

static void
zero_and_check(guint64 size, guint64 window, gboolean mmap_ok, AvZeroVerify verify)
{
    int fd = memfd_filled(size, 0xa5);
    AvZeroOptions o = { .verify = verify, .window = window };
    AvZeroResult res;
    g_autoptr(GError) err = NULL;

    g_assert_true(av_scrub_zero_region(fd, 0, size, mmap_ok, &o, &res, &err));
    g_assert_no_error(err);
    assert_bytes(fd, 0, size, 0);
    g_assert_cmpuint(res.zeroed, ==, size);
    g_assert_cmpuint(res.mmap_bytes, ==, mmap_ok ? size : 0);
    g_assert_cmpuint(res.pwrite_bytes, ==, mmap_ok ? 0 : size);
    g_assert_cmpuint(res.verified, ==, av_scrub_zero_verify_bytes(size, verify));
    close(fd);
}

static void
test_zero_mmap(void)
{
    /* Windows of 3 pages over 10 pages and 100 bytes: the last window
     * crosses the region's end, and the size is no multiple of anything. */
    zero_and_check(10 * PAGE + 100, 3 * PAGE, TRUE, AV_ZERO_VERIFY_FULL);
    zero_and_check(10 * PAGE + 100, 3 * PAGE, TRUE, AV_ZERO_VERIFY_SAMPLE);
    zero_and_check(10 * PAGE + 100, 3 * PAGE, TRUE, AV_ZERO_VERIFY_NONE);
    /* A window that is not a whole number of pages is rounded up. */
    zero_and_check(5 * PAGE, PAGE + 1, TRUE, AV_ZERO_VERIFY_FULL);
    /* Smaller than one page; and the default window of 64 MiB over 3 MiB. */
    zero_and_check(100, 0, TRUE, AV_ZERO_VERIFY_FULL);
    zero_and_check(3 * 1024 * 1024 + 17, 0, TRUE, AV_ZERO_VERIFY_SAMPLE);
}

static void
test_zero_pwrite(void)
{
    /* Chunks of 1 MiB within windows of 2 MiB, over 5 MiB and 7 bytes. */
    zero_and_check(5 * 1024 * 1024 + 7, 2 * 1024 * 1024, FALSE, AV_ZERO_VERIFY_FULL);
    zero_and_check(5 * 1024 * 1024 + 7, 2 * 1024 * 1024, FALSE, AV_ZERO_VERIFY_SAMPLE);
    zero_and_check(10 * PAGE + 100, 3 * PAGE, FALSE, AV_ZERO_VERIFY_FULL);
    zero_and_check(1, 0, FALSE, AV_ZERO_VERIFY_FULL);
}

/* A region inside a larger file: nothing outside it is touched, whether it
 * is mapped (page-aligned offset) or written (an unaligned offset falls back
 * to pwrite, since mmap needs a page-aligned offset). */
static void
test_zero_bounds(void)
{
    struct { guint64 offset; gboolean mmap_ok; guint64 want_mmap; } cases[] = {
        { 2 * PAGE, TRUE, 7 * PAGE + 3 },
        { 2 * PAGE, FALSE, 0 },
        { 2 * PAGE + 100, TRUE, 0 },
    };

    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        guint64 size = 7 * PAGE + 3, file = 12 * PAGE;
        int fd = memfd_filled(file, 0x3c);
        AvZeroOptions o = { .verify = AV_ZERO_VERIFY_FULL, .window = 2 * PAGE };
        AvZeroResult res;
        g_autoptr(GError) err = NULL;

        g_assert_true(av_scrub_zero_region(fd, cases[i].offset, size, cases[i].mmap_ok, &o, &res, &err));
        g_assert_no_error(err);
        assert_bytes(fd, 0, cases[i].offset, 0x3c);
        assert_bytes(fd, cases[i].offset, cases[i].offset + size, 0);
        assert_bytes(fd, cases[i].offset + size, file, 0x3c);
        g_assert_cmpuint(res.mmap_bytes, ==, cases[i].want_mmap);
        g_assert_cmpuint(res.mmap_bytes + res.pwrite_bytes, ==, size);
        close(fd);
    }
}

/* A window whose mmap fails (a sparse-mmap BAR's MSI-X page, say) is
 * written with pwrite() instead.  Here every window's does: the fd is open
 * write-only, which mmap refuses (EACCES) whatever the address. */
static void
test_zero_mmap_refused(void)
{
    guint64 size = 5 * PAGE + 7;
    int fd = memfd_filled(size, 0xa5);
    g_autofree char *path = g_strdup_printf("/proc/self/fd/%d", fd);
    int wronly = open(path, O_WRONLY | O_CLOEXEC);
    AvZeroOptions o = { .verify = AV_ZERO_VERIFY_NONE, .window = 2 * PAGE };
    AvZeroResult res;
    g_autoptr(GError) err = NULL;

    g_assert_cmpint(wronly, >=, 0);
    g_assert_true(mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, wronly, 0) == MAP_FAILED);
    g_assert_true(av_scrub_zero_region(wronly, 0, size, TRUE, &o, &res, &err));
    g_assert_no_error(err);
    assert_bytes(fd, 0, size, 0);
    g_assert_cmpuint(res.zeroed, ==, size);
    g_assert_cmpuint(res.mmap_bytes, ==, 0);
    g_assert_cmpuint(res.pwrite_bytes, ==, size);
    close(wronly);
    close(fd);
}

static void
test_zero_empty(void)
{
    int fd = memfd_filled(PAGE, 0x11);
    AvZeroResult res;
    g_autoptr(GError) err = NULL;

    g_assert_true(av_scrub_zero_region(fd, 0, 0, TRUE, NULL, &res, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(res.zeroed, ==, 0);
    assert_bytes(fd, 0, PAGE, 0x11);
    close(fd);
}

/* The faulty writer: after the routine zeroed a window, the byte at @at (of
 * the fd) is written non-zero again, as if the zero did not stick. */
typedef struct {
    guint64 at;
    guint calls;
} Fault;

static void
fault_hook(gpointer data, int fd, guint64 offset, guint64 len)
{
    Fault *f = data;
    guint8 b = 0x5a;

    f->calls++;
    if (f->at >= offset && f->at < offset + len)
        g_assert_cmpint(pwrite(fd, &b, 1, (off_t)f->at), ==, 1);
}

/* Runs the routine with a fault at region offset @at; returns whether it
 * succeeded, and the error message in *ret_message. */
static gboolean
zero_with_fault(guint64 size, guint64 at, gboolean mmap_ok, AvZeroVerify verify, AvZeroResult *res,
                char **ret_message)
{
    int fd = memfd_filled(size + 2 * PAGE, 0xa5);
    Fault f = { PAGE + at, 0 };
    AvZeroOptions o = { .verify = verify, .window = 4 * PAGE, .after_write = fault_hook, .after_write_data = &f };
    g_autoptr(GError) err = NULL;
    gboolean ok;

    /* The region sits at a page offset, so fd and region offsets differ. */
    ok = av_scrub_zero_region(fd, PAGE, size, mmap_ok, &o, res, &err);
    g_assert_cmpuint(f.calls, ==, (size + 4 * PAGE - 1) / (4 * PAGE));
    *ret_message = err ? g_strdup(err->message) : NULL;
    if (!ok)
        g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    close(fd);
    return ok;
}

static void
test_zero_fault(void)
{
    guint64 size = 200 * PAGE + 123;   /* 201 pages, the last partial */
    guint64 last = size - 1;
    AvZeroResult res;

    for (int m = 0; m < 2; m++) {
        gboolean mmap_ok = m == 0;
        guint64 mid_unsampled = 1 * PAGE + 7; /* page 1 is not sampled */
        char *msg = NULL;

        /* Full: any byte anywhere, named by its offset in the region. */
        g_assert_false(zero_with_fault(size, 150 * PAGE + 9, mmap_ok, AV_ZERO_VERIFY_FULL, &res, &msg));
        g_assert_nonnull(strstr(msg, "non-zero byte 0x5a at offset 0x96009 of the region"));
        g_clear_pointer(&msg, g_free);
        g_assert_false(zero_with_fault(size, last, mmap_ok, AV_ZERO_VERIFY_FULL, &res, &msg));
        g_clear_pointer(&msg, g_free);

        /* Sample: the first and the last page are always read. */
        g_assert_false(zero_with_fault(size, 0, mmap_ok, AV_ZERO_VERIFY_SAMPLE, &res, &msg));
        g_assert_nonnull(strstr(msg, "offset 0x0 "));
        g_clear_pointer(&msg, g_free);
        g_assert_false(zero_with_fault(size, last, mmap_ok, AV_ZERO_VERIFY_SAMPLE, &res, &msg));
        g_clear_pointer(&msg, g_free);

        /* A page the sample skips: by design the sample misses it, the full
         * verification does not. */
        g_assert_false(av_scrub_zero_page_sampled(1, 201));
        g_assert_true(zero_with_fault(size, mid_unsampled, mmap_ok, AV_ZERO_VERIFY_SAMPLE, &res, &msg));
        g_assert_null(msg);
        g_assert_cmpuint(res.verified, <, size);
        g_assert_false(zero_with_fault(size, mid_unsampled, mmap_ok, AV_ZERO_VERIFY_FULL, &res, &msg));
        g_clear_pointer(&msg, g_free);

        /* Zero only reads nothing back. */
        g_assert_true(zero_with_fault(size, 0, mmap_ok, AV_ZERO_VERIFY_NONE, &res, &msg));
        g_assert_cmpuint(res.verified, ==, 0);
    }
}

/* The sample plan: first and last page, then one page in every run of 64. */
static void
test_zero_sample_plan(void)
{
    guint64 n_pages = 64 * 100 + 5;
    guint64 count = 0;

    g_assert_true(av_scrub_zero_page_sampled(0, n_pages));
    g_assert_true(av_scrub_zero_page_sampled(n_pages - 1, n_pages));
    for (guint64 run = 0; run < 100; run++) {
        guint in_run = 0;

        for (guint64 p = run * 64; p < run * 64 + 64; p++)
            in_run += av_scrub_zero_page_sampled(p, n_pages) && p != 0;
        g_assert_cmpuint(in_run, <=, 1 + (run == 0));
        count += in_run;
    }
    /* Not always the same page of a run. */
    {
        gboolean differ = FALSE;
        guint64 first = 0;

        for (guint64 p = 64; p < 128; p++)
            if (av_scrub_zero_page_sampled(p, n_pages))
                first = p % 64;
        for (guint64 run = 2; run < 100 && !differ; run++)
            for (guint64 p = run * 64; p < run * 64 + 64; p++)
                if (av_scrub_zero_page_sampled(p, n_pages) && p % 64 != first)
                    differ = TRUE;
        g_assert_true(differ);
    }
    g_assert_cmpuint(count, >=, 99);
    g_assert_cmpuint(av_scrub_zero_verify_bytes(n_pages * PAGE, AV_ZERO_VERIFY_SAMPLE), <=,
                     (n_pages / 64 + 3) * PAGE);
    g_assert_cmpuint(av_scrub_zero_verify_bytes(PAGE + 1, AV_ZERO_VERIFY_SAMPLE), ==, PAGE + 1);
    g_assert_cmpuint(av_scrub_zero_verify_bytes(12345, AV_ZERO_VERIFY_FULL), ==, 12345);
    g_assert_cmpuint(av_scrub_zero_verify_bytes(12345, AV_ZERO_VERIFY_NONE), ==, 0);
}

typedef struct {
    guint calls;
    guint64 last_done;
    guint64 total;
} Progress;

static void
progress_cb(gpointer data, guint64 done, guint64 total)
{
    Progress *p = data;

    g_assert_cmpuint(done, >=, p->last_done);
    g_assert_cmpuint(done, <=, total);
    p->calls++;
    p->last_done = done;
    p->total = total;
}

static void
test_zero_progress(void)
{
    guint64 size = 8 * 1024 * 1024 + 3;
    int fd = memfd_filled(size, 0xee);
    Progress p = { 0 };
    AvZeroOptions o = { .verify = AV_ZERO_VERIFY_FULL, .window = 16 * PAGE, .progress = progress_cb,
                        .progress_data = &p };
    g_autoptr(GError) err = NULL;

    g_assert_true(av_scrub_zero_region(fd, 0, size, TRUE, &o, NULL, &err));
    g_assert_no_error(err);
    /* Work is bytes written plus bytes read back; the last call says done.
     * 256 windows on a fast memfd: far fewer calls than windows. */
    g_assert_cmpuint(p.total, ==, 2 * size);
    g_assert_cmpuint(p.last_done, ==, p.total);
    g_assert_cmpuint(p.calls, >=, 1);
    g_assert_cmpuint(p.calls, <, 100);
    close(fd);
}

/* --- the method on a fake host ------------------------------------------------- */

typedef struct {
    char *dir;
    AvRoot *root;
    const AvKernelOps *ops;
    AvPolicy *policy;
    guint64 flags[6];            /* the sysfs "resource" flags of each BAR (0: absent) */
} Fixture;

/* IORESOURCE flags as the kernel prints them in "resource". */
#define FLAGS_MEM_PREFETCH 0x14220cu   /* memory, 64-bit, prefetchable: device memory */
#define FLAGS_MEM_REGS 0x40200u        /* memory, not prefetchable: registers */

/* Rewrites the device's "resource" file from f->flags (addresses made up). */
static void
write_resource(Fixture *f)
{
    g_autoptr(GString) s = g_string_new(NULL);

    for (guint i = 0; i < 6; i++) {
        if (f->flags[i])
            g_string_append_printf(s, "0x%016x 0x%016x 0x%016" G_GINT64_MODIFIER "x\n", 0xe0000000u + i * 0x1000000u,
                                   0xe0000fffu + i * 0x1000000u, f->flags[i]);
        else
            g_string_append_printf(s, "0x%016x 0x%016x 0x%016x\n", 0, 0, 0);
    }
    av_test_write(f->dir, A100_DIR "/resource", s->str);
}

static void
fixture_open(Fixture *f, const char *policy_json, gboolean bind)
{
    g_autoptr(GError) err = NULL;

    memset(f, 0, sizeof(*f));
    f->dir = av_test_host_copy("two-socket-8gpu");
    f->root = av_root_new(f->dir, &err);
    g_assert_no_error(err);
    f->ops = av_kernel_ops_for(f->root);
    g_assert_true(f->ops == &av_kernel_ops_fake);
    f->policy = av_policy_new();
    if (!av_policy_add_data(f->policy, "test.json", policy_json, strlen(policy_json), &err))
        g_error("%s", err->message);
    if (bind) {
        g_autofree char *orig = NULL;

        g_assert_true(av_vfio_bind(f->root, f->ops, A100, NULL, &orig, &err));
        g_assert_no_error(err);
        g_assert_cmpstr(orig, ==, "nvidia");
    }
}

static void
fixture_close(Fixture *f)
{
    av_policy_free(f->policy);
    av_root_free(f->root);
    av_test_tmpdir_remove(f->dir);
    g_free(f->dir);
}

/* Creates the BAR file @dir/A100_DIR/resource@bar of @size bytes of @fill. */
/* A BAR of @size bytes filled with @fill, of the kind @flags says. */
static void
make_bar_flags(Fixture *f, guint bar, guint64 size, guint8 fill, guint64 flags)
{
    g_autofree char *path = g_strdup_printf("%s/" A100_DIR "/resource%u", f->dir, bar);
    int fd = memfd_filled(size, fill);
    g_autofree char *data = g_malloc(size);

    g_assert_cmpint(pread(fd, data, size, 0), ==, (gssize)size);
    close(fd);
    g_assert_true(g_file_set_contents(path, data, (gssize)size, NULL));
    f->flags[bar] = flags;
    write_resource(f);
}

/* A BAR of device memory (prefetchable), what vfio-zero zeroes by default. */
static void
make_bar(Fixture *f, guint bar, guint64 size, guint8 fill)
{
    make_bar_flags(f, bar, size, fill, FLAGS_MEM_PREFETCH);
}

static void
assert_bar(Fixture *f, guint bar, guint64 size, guint8 value)
{
    g_autofree char *path = g_strdup_printf("%s/" A100_DIR "/resource%u", f->dir, bar);
    g_autofree char *data = NULL;
    gsize len = 0;

    g_assert_true(g_file_get_contents(path, &data, &len, NULL));
    g_assert_cmpuint(len, ==, size);
    for (gsize i = 0; i < len; i++)
        if ((guint8)data[i] != value)
            g_error("resource%u: byte %" G_GSIZE_FORMAT " is 0x%02x, not 0x%02x", bar, i, (guint8)data[i], value);
}

static char *
fake_log(Fixture *f)
{
    g_autofree char *path = g_strdup_printf("%s/sys/" AV_KERNEL_FAKE_LOG, f->dir);
    char *contents = NULL;

    if (!g_file_get_contents(path, &contents, NULL, NULL))
        return g_strdup("");
    return contents;
}

static gboolean
run(Fixture *f, const AvScrubTarget *target, json_t **ret_report, GError **error)
{
    const AvProfile *profile = av_policy_find(f->policy, "gpu-a100");

    g_assert_nonnull(profile);
    return av_scrub_run(f->root, f->ops, profile, target, ret_report, error);
}

typedef struct {
    guint calls;
    guint64 done, total;
} MethodProgress;

static void
method_progress(gpointer data, const char *method, guint64 done, guint64 total)
{
    MethodProgress *p = data;

    g_assert_cmpstr(method, ==, "vfio-zero");
    g_assert_cmpuint(done, >=, p->done);
    p->calls++;
    p->done = done;
    p->total = total;
}

static void
test_method_default_bars(void)
{
    Fixture f;
    MethodProgress mp = { 0 };
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40,
                             .progress = method_progress, .progress_data = &mp };
    g_autoptr(json_t) report = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *log = NULL;
    json_t *step, *bars;

    fixture_open(&f, POLICY_A100("[{\"method\": \"vfio-zero\"}]"), TRUE);
    make_bar(&f, 0, 1024 * 1024, 0xa5);          /* BAR0, 1 MiB */
    make_bar(&f, 2, 3 * 1024 * 1024 + 512, 0x5a); /* BAR2: not a page multiple */
    make_bar_flags(&f, 3, 4096, 0x3c, FLAGS_MEM_REGS); /* registers: never zeroed by default */
    g_assert_true(run(&f, &target, &report, &err));
    g_assert_no_error(err);
    assert_bar(&f, 0, 1024 * 1024, 0);
    assert_bar(&f, 2, 3 * 1024 * 1024 + 512, 0);
    assert_bar(&f, 3, 4096, 0x3c);

    step = json_array_get(json_object_get(report, "steps"), 0);
    g_assert_true(json_is_true(json_object_get(step, "ok")));
    g_assert_cmpstr(json_string_value(json_object_get(step, "method")), ==, "vfio-zero");
    g_assert_cmpint(json_integer_value(json_object_get(step, "bytes")), ==, 4 * 1024 * 1024 + 512);
    g_assert_cmpstr(json_string_value(json_object_get(step, "verify")), ==, "full");
    g_assert_true(json_is_real(json_object_get(step, "mb_per_s")));
    g_assert_true(json_is_real(json_object_get(step, "seconds")));
    g_assert_nonnull(strstr(json_string_value(json_object_get(step, "message")), "zeroed 2 BARs of " A100));
    bars = json_object_get(step, "bars");
    g_assert_cmpuint(json_array_size(bars), ==, 2);
    g_assert_cmpint(json_integer_value(json_object_get(json_array_get(bars, 0), "bar")), ==, 0);
    g_assert_cmpint(json_integer_value(json_object_get(json_array_get(bars, 0), "size")), ==, 1024 * 1024);
    g_assert_cmpstr(json_string_value(json_object_get(json_array_get(bars, 0), "method")), ==, "mmap");
    g_assert_cmpint(json_integer_value(json_object_get(json_array_get(bars, 0), "read_back")), ==,
                    1024 * 1024);
    g_assert_cmpint(json_integer_value(json_object_get(json_array_get(bars, 1), "bar")), ==, 2);
    g_assert_cmpint(json_integer_value(json_object_get(json_array_get(bars, 1), "read_back")), ==,
                    3 * 1024 * 1024 + 512);

    /* Progress in bytes of work: written plus read back, ending at the total. */
    g_assert_cmpuint(mp.calls, >=, 2);
    g_assert_cmpuint(mp.total, ==, 2 * (4 * 1024 * 1024 + 512));
    g_assert_cmpuint(mp.done, ==, mp.total);

    log = fake_log(&f);
    g_assert_cmpstr(log, ==, "VFIO_GROUP_GET_DEVICE_FD " A100 "\nclose " A100 "\n");
    fixture_close(&f);
}

static void
test_method_named_bars_sample(void)
{
    Fixture f;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    g_autoptr(json_t) report = NULL;
    g_autoptr(GError) err = NULL;
    json_t *step, *bar;
    guint64 size = 2 * 1024 * 1024;

    fixture_open(&f, POLICY_A100("[{\"method\": \"vfio-zero\", \"bars\": [2], \"verify\": \"sample\"}]"), TRUE);
    make_bar(&f, 0, 65536, 0xa5);
    make_bar(&f, 2, size, 0x5a);
    g_assert_true(run(&f, &target, &report, &err));
    g_assert_no_error(err);
    assert_bar(&f, 0, 65536, 0xa5);   /* not named: untouched */
    assert_bar(&f, 2, size, 0);
    step = json_array_get(json_object_get(report, "steps"), 0);
    g_assert_cmpstr(json_string_value(json_object_get(step, "verify")), ==, "sample");
    g_assert_cmpuint(json_array_size(json_object_get(step, "bars")), ==, 1);
    bar = json_array_get(json_object_get(step, "bars"), 0);
    g_assert_cmpint(json_integer_value(json_object_get(bar, "bar")), ==, 2);
    g_assert_cmpint(json_integer_value(json_object_get(bar, "read_back")), ==,
                    (json_int_t)av_scrub_zero_verify_bytes(size, AV_ZERO_VERIFY_SAMPLE));
    g_assert_cmpint(json_integer_value(json_object_get(bar, "read_back")), <, (json_int_t)size / 16);
    fixture_close(&f);
}

/* A profile naming a BAR the device lacks, or an I/O BAR, is a mistake. */
static void
test_method_bad_bars(void)
{
    Fixture f;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    g_autoptr(json_t) report = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *resource = NULL;

    fixture_open(&f, POLICY_A100("[{\"method\": \"vfio-zero\", \"bars\": [0, 4]}]"), TRUE);
    make_bar(&f, 0, 65536, 0xa5);
    g_assert_false(run(&f, &target, &report, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
    g_assert_nonnull(strstr(err->message, "BAR 4 of " A100 " is not implemented"));
    g_clear_error(&err);
    g_clear_pointer(&report, json_decref);

    /* BAR 4 an I/O BAR, as the sysfs "resource" file says (IORESOURCE_IO). */
    make_bar(&f, 4, 128, 0x77);
    resource = g_strdup_printf("0x%016x 0x%016x 0x%016x\n"   /* BAR0: memory, 64 KiB */
                               "0x%016x 0x%016x 0x%016x\n"
                               "0x%016x 0x%016x 0x%016x\n"
                               "0x%016x 0x%016x 0x%016x\n"
                               "0x%016x 0x%016x 0x%016x\n",  /* BAR4: I/O ports */
                               0xe0000000, 0xe000ffff, FLAGS_MEM_PREFETCH, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                               0x1000, 0x107f, 0x40101);
    av_test_write(f.dir, A100_DIR "/resource", resource);
    g_assert_false(run(&f, &target, &report, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
    g_assert_nonnull(strstr(err->message, "BAR 4 of " A100 " is an I/O port BAR"));
    assert_bar(&f, 4, 128, 0x77);
    g_clear_error(&err);
    fixture_close(&f);

    /* By default the I/O BAR is skipped, the memory BAR zeroed. */
    fixture_open(&f, POLICY_A100("[{\"method\": \"vfio-zero\"}]"), TRUE);
    make_bar(&f, 0, 65536, 0xa5);
    make_bar(&f, 4, 128, 0x77);
    av_test_write(f.dir, A100_DIR "/resource", resource);
    g_assert_true(run(&f, &target, NULL, &err));
    g_assert_no_error(err);
    assert_bar(&f, 0, 65536, 0);
    assert_bar(&f, 4, 128, 0x77);
    fixture_close(&f);
}

static void
test_method_no_memory_bar(void)
{
    Fixture f;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    g_autoptr(json_t) report = NULL;
    g_autoptr(GError) err = NULL;
    json_t *step;

    fixture_open(&f, POLICY_A100("[{\"method\": \"vfio-zero\"}]"), TRUE);
    g_assert_false(run(&f, &target, &report, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
    g_assert_nonnull(strstr(err->message, "scrub step 1 (vfio-zero) failed: " A100 " has no prefetchable memory BAR to zero; "
                                          "name its BARs in 'bars' or remove the vfio-zero step from profile 'gpu-a100'"));
    step = json_array_get(json_object_get(report, "steps"), 0);
    g_assert_true(json_is_false(json_object_get(step, "ok")));
    g_assert_cmpint(json_integer_value(json_object_get(step, "bytes")), ==, 0);
    fixture_close(&f);
}

static void
test_method_not_vfio(void)
{
    Fixture f;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    g_autoptr(GError) err = NULL;

    fixture_open(&f, POLICY_A100("[{\"method\": \"vfio-zero\"}]"), FALSE);
    make_bar(&f, 0, 65536, 0xa5);
    g_assert_false(run(&f, &target, NULL, &err));
    g_assert_nonnull(strstr(err->message, "cannot open " A100 " through VFIO: it is not bound to vfio-pci"));
    assert_bar(&f, 0, 65536, 0xa5);
    fixture_close(&f);
}

static void
test_method_group_busy(void)
{
    Fixture f;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    g_autoptr(GError) err = NULL;

    fixture_open(&f, POLICY_A100("[{\"method\": \"vfio-zero\"}]"), TRUE);
    make_bar(&f, 0, 65536, 0xa5);
    av_test_write(f.dir, "sys/.accelvirt-fake-kernel", "fail /dev/vfio/40 16\n");
    g_assert_false(run(&f, &target, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_IN_USE);
    g_assert_nonnull(strstr(err->message, "its IOMMU group 40 is held by another process"));
    assert_bar(&f, 0, 65536, 0xa5);
    fixture_close(&f);
}

/* An mdev shares its parent with other tenants: never zeroed whole. */
static void
test_method_mdev_refused(void)
{
    Fixture f;
    AvScrubTarget target = { .identity = "mdev-x", .address = A100, .iommu_group = 40,
                             .mdev_uuid = "4b20d080-1b54-4048-85b3-a6a62d165c01" };
    g_autoptr(GError) err = NULL;

    fixture_open(&f, POLICY_A100("[{\"method\": \"vfio-zero\"}]"), TRUE);
    g_assert_false(run(&f, &target, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
    g_assert_nonnull(strstr(err->message, "needs a whole PCI function"));
    fixture_close(&f);
}

/* --- coverage: what a scrub says it cleared ----------------------------------- */

static void
assert_driver(Fixture *f, const char *want)
{
    g_autofree char *driver = av_vfio_current_driver(f->root, A100);

    g_assert_cmpstr(driver, ==, want);
}

#define POLICY_A100_WITH(fields, steps) \
    "{\"profiles\": [{\"name\": \"gpu-a100\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x20f1\"}," \
    " \"attach\": \"vfio-pci\", " fields ", \"scrub\": " steps "}]}"

/* The fake A100 made a card of another vendor, whose BARs map its memory. */
static void
set_vendor(Fixture *f, const char *vendor)
{
    g_autofree char *text = g_strconcat(vendor, "\n", NULL);

    av_test_write(f->dir, A100_DIR "/vendor", text);
}

static json_t *
step_coverage(json_t *report, guint step)
{
    return json_object_get(json_array_get(json_object_get(report, "steps"), step), "coverage");
}

/* A BAR of 1 MiB on a card whose profile says 8 MiB of memory: the
 * certificate's coverage is 1/8, never "in full"; the register BAR is
 * listed as skipped with its reason. */
static void
test_coverage_bar_smaller_than_memory(void)
{
    Fixture f;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    g_autoptr(json_t) report = NULL;
    g_autoptr(GError) err = NULL;
    json_t *cov, *step, *skipped;

    fixture_open(&f, POLICY_A100_WITH("\"memory\": \"8MiB\"", "[{\"method\": \"vfio-zero\"}, {\"method\": \"reset\"}]"),
                 TRUE);
    set_vendor(&f, "0x1002");
    make_bar(&f, 0, 1024 * 1024, 0xa5);
    make_bar_flags(&f, 3, 4096, 0x3c, FLAGS_MEM_REGS);
    g_assert_true(run(&f, &target, &report, &err));
    g_assert_no_error(err);
    step = json_array_get(json_object_get(report, "steps"), 0);
    cov = step_coverage(report, 0);
    g_assert_cmpint(json_integer_value(json_object_get(cov, "cleared")), ==, 1024 * 1024);
    g_assert_cmpint(json_integer_value(json_object_get(cov, "read_back")), ==, 1024 * 1024);
    g_assert_cmpint(json_integer_value(json_object_get(cov, "memory")), ==, 8 * 1024 * 1024);
    g_assert_cmpstr(json_string_value(json_object_get(cov, "memory_source")), ==, "profile");
    g_assert_cmpstr(json_string_value(json_object_get(cov, "source")), ==, "measured");
    skipped = json_object_get(step, "skipped");
    g_assert_cmpuint(json_array_size(skipped), ==, 1);
    g_assert_cmpint(json_integer_value(json_object_get(json_array_get(skipped, 0), "bar")), ==, 3);
    g_assert_cmpint(json_integer_value(json_object_get(json_array_get(skipped, 0), "size")), ==, 4096);
    g_assert_nonnull(strstr(json_string_value(json_object_get(json_array_get(skipped, 0), "reason")),
                            "not prefetchable"));
    g_assert_true(json_is_true(json_object_get(json_array_get(json_object_get(step, "bars"), 0), "prefetchable")));
    g_assert_cmpint(json_integer_value(json_object_get(json_array_get(json_object_get(step, "bars"), 0), "written")),
                    ==, 1024 * 1024);

    cov = json_object_get(report, "coverage");
    /* (Not g_assert_cmpfloat_with_epsilon(): -Wdouble-promotion to clang.) */
    g_assert_true(ABS(json_real_value(json_object_get(cov, "fraction")) - 0.125) < 1e-9);
    g_assert_cmpstr(json_string_value(json_object_get(cov, "verified")), ==, "full");
    g_assert_cmpint(json_integer_value(json_object_get(cov, "step")), ==, 1);
    g_assert_cmpstr(json_string_value(json_object_get(cov, "text")), ==,
                    "cleared 1 MiB of 8 MiB of device memory (12.5%), read back in full");
    g_assert_nonnull(strstr(json_string_value(json_object_get(step, "message")),
                            "cleared 1 MiB of 8 MiB of device memory (12.5%)"));
    fixture_close(&f);
}

/* Verify "sample" reads back part of what was written: the coverage says
 * how much, and "partial", never "in full". */
static void
test_coverage_partial_read_back(void)
{
    Fixture f;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    g_autoptr(json_t) report = NULL;
    g_autoptr(GError) err = NULL;
    json_t *cov;
    const char *text;

    fixture_open(&f, POLICY_A100("[{\"method\": \"vfio-zero\", \"verify\": \"sample\"}]"), TRUE);
    set_vendor(&f, "0x1002");
    make_bar(&f, 2, 4 * 1024 * 1024, 0x5a);
    g_assert_true(run(&f, &target, &report, &err));
    cov = json_object_get(report, "coverage");
    g_assert_cmpstr(json_string_value(json_object_get(cov, "verified")), ==, "partial");
    g_assert_true(json_is_null(json_object_get(cov, "memory")));
    g_assert_true(json_is_null(json_object_get(cov, "fraction")));
    g_assert_cmpint(json_integer_value(json_object_get(cov, "read_back")), ==,
                    (json_int_t)av_scrub_zero_verify_bytes(4 * 1024 * 1024, AV_ZERO_VERIFY_SAMPLE));
    text = json_string_value(json_object_get(cov, "text"));
    g_assert_true(g_str_has_prefix(text, "cleared 4 MiB of device memory of unknown size, "));
    g_assert_nonnull(strstr(text, "of it read back"));
    g_assert_null(strstr(text, "in full"));
    fixture_close(&f);
}

/* min_coverage: a scrub whose steps passed but cleared less fails, with
 * the numbers; unknown memory is below any share. */
static void
test_coverage_min(void)
{
    Fixture f;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    g_autoptr(json_t) report = NULL;
    g_autoptr(GError) err = NULL;

    fixture_open(&f, POLICY_A100_WITH("\"memory\": 4194304, \"min_coverage\": 1.0", "[{\"method\": \"vfio-zero\"}]"),
                 TRUE);
    set_vendor(&f, "0x1002");
    make_bar(&f, 0, 1024 * 1024, 0xa5);
    g_assert_false(run(&f, &target, &report, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    g_assert_cmpstr(err->message, ==, "the scrub cleared less than profile 'gpu-a100' requires (min_coverage 1, of memory "
                                      "accelvirt measured clearing): "
                                      "cleared 1 MiB of 4 MiB of device memory (25.0%), read back in full");
    g_assert_true(json_is_true(json_object_get(json_array_get(json_object_get(report, "steps"), 0), "ok")));
    assert_bar(&f, 0, 1024 * 1024, 0);
    fixture_close(&f);
    g_clear_error(&err);
    g_clear_pointer(&report, json_decref);

    /* NVIDIA: BAR1 writes count for nothing, whatever the BAR's size */
    fixture_open(&f, POLICY_A100_WITH("\"memory\": 1048576, \"min_coverage\": 0.5", "[{\"method\": \"vfio-zero\"}]"),
                 TRUE);
    make_bar(&f, 1, 1024 * 1024, 0xa5);
    g_assert_false(run(&f, &target, &report, &err));
    g_assert_nonnull(strstr(err->message, "cleared 0 bytes of 1 MiB of device memory (0%) (NVIDIA GPUs map BAR1 "
                                          "through the GPU's own MMU"));
    g_assert_cmpint(json_integer_value(json_object_get(json_array_get(json_object_get(report, "steps"), 0), "bytes")),
                    ==, 1024 * 1024);
    fixture_close(&f);
    g_clear_error(&err);
}

/* The BAR of the tests of a resize cut short: 1 MiB of a tenant's bytes
 * (0xa5), offering 1, 2 and 4 MiB, the kernel's "resource" line saying
 * 1 MiB, on a card whose BARs map its memory. */
static void
make_resizable_bar(Fixture *f)
{
    set_vendor(f, "0x1002");
    make_bar(f, 0, 1024 * 1024, 0xa5);
    av_test_write(f->dir, A100_DIR "/resource0_resize", "0000000000000007\n");
    av_test_write(f->dir, A100_DIR "/resource",
                  "0x00000000e0000000 0x00000000e00fffff 0x000000000014220c\n"
                  "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
                  "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
                  "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
                  "0x0000000000000000 0x0000000000000000 0x0000000000000000\n"
                  "0x0000000000000000 0x0000000000000000 0x0000000000000000\n");
}

/* The size of the A100's BAR @bar as the fake tree holds it (its file). */
static guint64
bar_file_size(Fixture *f, guint bar)
{
    g_autofree char *path = g_strdup_printf("%s/" A100_DIR "/resource%u", f->dir, bar);
    struct stat st;

    g_assert_cmpint(stat(path, &st), ==, 0);
    return (guint64)st.st_size;
}

/* "resize": a BAR with the Resizable BAR capability grows to cover the
 * device's memory for the scrub, unbound meanwhile, then goes back. */
static void
test_coverage_resize(void)
{
    Fixture f;
    g_autofree char *state = av_test_tmpdir();
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40, .state_dir = state };
    g_autoptr(json_t) report = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *writes = NULL;
    g_autofree char *writes_path = NULL;
    g_autofree char *resource = NULL;
    g_autofree char *res_path = NULL;
    g_autofree char *resource_before = NULL;
    json_t *cov, *resized;

    fixture_open(&f, POLICY_A100("[{\"method\": \"vfio-zero\", \"resize\": true}]"), TRUE);
    set_vendor(&f, "0x1002");
    make_bar(&f, 0, 1024 * 1024, 0xa5);
    /* 1, 2 and 4 MiB offered: no profile memory, so the device's is 4 MiB */
    av_test_write(f.dir, A100_DIR "/resource0_resize", "0000000000000007\n");
    res_path = g_strdup_printf("%s/" A100_DIR "/resource", f.dir);
    g_assert_true(g_file_get_contents(res_path, &resource_before, NULL, NULL));
    g_assert_true(run(&f, &target, &report, &err));
    g_assert_no_error(err);
    resized = json_object_get(json_array_get(json_object_get(report, "steps"), 0), "resized");
    g_assert_cmpuint(json_array_size(resized), ==, 1);
    g_assert_cmpint(json_integer_value(json_object_get(json_array_get(resized, 0), "from")), ==, 1024 * 1024);
    g_assert_cmpint(json_integer_value(json_object_get(json_array_get(resized, 0), "to")), ==, 4 * 1024 * 1024);
    cov = json_object_get(report, "coverage");
    g_assert_cmpint(json_integer_value(json_object_get(cov, "cleared")), ==, 4 * 1024 * 1024);
    g_assert_cmpstr(json_string_value(json_object_get(cov, "memory_source")), ==, "resizable-bar");
    /* (Not g_assert_cmpfloat_with_epsilon(): -Wdouble-promotion to clang.) */
    g_assert_true(ABS(json_real_value(json_object_get(cov, "fraction")) - 1.0) < 1e-9);
    /* back to 1 MiB, on vfio-pci, its resource line as before */
    assert_bar(&f, 0, 1024 * 1024, 0);
    g_assert_true(g_file_get_contents(res_path, &resource, NULL, NULL));
    g_assert_true(g_str_has_prefix(resource, "0x00000000e0000000 0x00000000e00fffff 0x000000000014220c\n"));
    g_assert_cmpstr(strchr(resource, '\n'), ==, strchr(resource_before, '\n'));
    assert_driver(&f, "vfio-pci");
    writes_path = g_strdup_printf("%s/sys/" AV_KERNEL_FAKE_WRITES, f.dir);
    g_assert_true(g_file_get_contents(writes_path, &writes, NULL, NULL));
    g_assert_nonnull(strstr(writes, "/sys/bus/pci/drivers/vfio-pci/unbind " A100 "\n"
                                    "/sys/bus/pci/devices/" A100 "/resource0_resize 2\n"
                                    "/sys/bus/pci/drivers_probe " A100 "\n"));
    g_assert_nonnull(strstr(writes, "/sys/bus/pci/devices/" A100 "/resource0_resize 0\n"));
    fixture_close(&f);
    g_clear_pointer(&report, json_decref);

    /* the largest size offered, whatever the profile's memory: the bytes
     * past it count for no more memory than it has */
    fixture_open(&f, POLICY_A100_WITH("\"memory\": \"3MiB\", \"min_coverage\": 1",
                                      "[{\"method\": \"vfio-zero\", \"resize\": true}]"), TRUE);
    set_vendor(&f, "0x1002");
    make_bar(&f, 0, 1024 * 1024, 0xa5);
    av_test_write(f.dir, A100_DIR "/resource0_resize", "000000000000000f\n");
    g_assert_true(run(&f, &target, &report, &err));
    g_assert_no_error(err);
    resized = json_object_get(json_array_get(json_object_get(report, "steps"), 0), "resized");
    g_assert_cmpint(json_integer_value(json_object_get(json_array_get(resized, 0), "to")), ==, 8 * 1024 * 1024);
    g_assert_cmpstr(json_string_value(json_object_get(json_object_get(report, "coverage"), "text")), ==,
                    "cleared 3 MiB of 3 MiB of device memory (100%), read back in full");
    fixture_close(&f);
    g_clear_pointer(&report, json_decref);

    /* the kernel refuses (no room in the bridge's window): the step fails,
     * nothing was zeroed, the device is on vfio-pci at its old size */
    fixture_open(&f, POLICY_A100("[{\"method\": \"vfio-zero\", \"resize\": true}]"), TRUE);
    make_resizable_bar(&f);
    av_test_write(f.dir, "sys/.accelvirt-fake-kernel", "fail /sys/bus/pci/devices/" A100 "/resource0_resize 28\n");
    g_assert_false(run(&f, &target, &report, &err));
    g_assert_nonnull(strstr(err->message, "the kernel refused to resize BAR 0 of '" A100 "' to 4 MiB"));
    g_assert_nonnull(strstr(err->message, "the bridge above it has no room"));
    assert_bar(&f, 0, 1024 * 1024, 0xa5);
    assert_driver(&f, "vfio-pci");
    /* put back, nothing was left to record */
    g_assert_false(av_bar_record_exists(state, "pci-" A100));
    fixture_close(&f);
    g_clear_error(&err);
    g_clear_pointer(&report, json_decref);

    /* without a state dir to record the sizes in first, nothing is resized */
    fixture_open(&f, POLICY_A100("[{\"method\": \"vfio-zero\", \"resize\": true}]"), TRUE);
    set_vendor(&f, "0x1002");
    make_bar(&f, 0, 1024 * 1024, 0xa5);
    av_test_write(f.dir, A100_DIR "/resource0_resize", "0000000000000007\n");
    target.state_dir = NULL;
    g_assert_false(run(&f, &target, &report, &err));
    g_assert_nonnull(strstr(err->message, "there is no state dir to record their sizes in first"));
    assert_bar(&f, 0, 1024 * 1024, 0xa5);
    fixture_close(&f);
    av_test_tmpdir_remove(state);
}

/* A held device (av-hold.h) whose BAR a resize unbinds: the unbind tears
 * the group file down (a new one comes with the rebind), so the hold is
 * dropped before the resize and taken again after, on the new file; the
 * BAR is zeroed through the hold. */
static void
test_resize_through_hold(void)
{
    Fixture f;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHold) before = NULL;
    g_autoptr(AvHold) after = NULL;
    g_autofree char *state = av_test_tmpdir();
    g_autofree char *fd_link = NULL;
    g_autofree char *held = NULL;
    int fd = -1;

    fixture_open(&f, POLICY_A100("[{\"method\": \"vfio-zero\", \"resize\": true}]"), TRUE);
    set_vendor(&f, "0x1002");
    make_bar(&f, 0, 1024 * 1024, 0xa5);
    av_test_write(f.dir, A100_DIR "/resource0_resize", "0000000000000007\n");
    target.hold_state_dir = state;
    target.state_dir = state;
    g_assert_true(av_hold_take(f.root, f.ops, state, 40, A100, &err));
    g_assert_true(av_hold_get(f.root, state, 40, &before, &err) && before);
    g_assert_true(run(&f, &target, NULL, &err));
    g_assert_no_error(err);
    assert_bar(&f, 0, 1024 * 1024, 0);
    assert_driver(&f, "vfio-pci");
    g_assert_true(av_hold_get(f.root, state, 40, &after, &err) && after);
    g_assert_cmpint(after->pid, !=, before->pid);
    /* The holder has the group file there is now, not a deleted one. */
    fd_link = g_strdup_printf("/proc/%d/fd/%d", after->pid, AV_HOLD_FD);
    held = g_file_read_link(fd_link, NULL);
    g_assert_nonnull(held);
    g_assert_true(g_str_has_suffix(held, "/dev/vfio/40"));
    g_assert_cmpint(f.ops->group_open(f.root, 40, &fd), ==, -EBUSY);
    g_assert_true(av_hold_drop(f.root, state, 40, &err));
    av_test_tmpdir_remove(state);
    fixture_close(&f);
}

/* Runs the scrub of @target in a child process that kills itself at the
 * named kill point @point (ACCELVIRT_TEST_KILL_AT), as a SIGKILL there
 * would; asserts that it died there. */
static void
run_killed_at(Fixture *f, const AvScrubTarget *target, const char *point)
{
    int status = 0;
    pid_t pid = fork();

    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        g_setenv("ACCELVIRT_TEST_KILL_AT", point, TRUE);
        run(f, target, NULL, NULL);
        _exit(0);
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
        g_error("the scrub was not killed at '%s' (status 0x%x)", point, status);
}

/* A scrub killed at each point of a resize: before anything is resized
 * (the sizes recorded), with the device unbound from vfio-pci for the
 * resize, with the BAR grown, zeroed, and put back but its record not yet
 * removed.  The record is there after each; the next scrub finds it, puts
 * the BAR back to its recorded size first (the device probed back onto
 * vfio-pci if the kill left it on no driver), says so in its step, then
 * scrubs the device whole and leaves it as it was: 1 MiB, zeroed, on
 * vfio-pci, no record left. */
static void
test_resize_killed(void)
{
    static const struct {
        const char *point;
        guint64 left;            /* the size the kill leaves the BAR at */
        const char *driver;      /* and the driver */
    } cases[] = {
        { "bar-recorded", 1024 * 1024, "vfio-pci" },
        { "bar-unbound", 1024 * 1024, NULL },
        { "bar-grown", 4 * 1024 * 1024, "vfio-pci" },
        { "bar-zeroed", 4 * 1024 * 1024, "vfio-pci" },
        { "bar-back", 1024 * 1024, "vfio-pci" },
    };

    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        Fixture f;
        g_autofree char *state = av_test_tmpdir();
        g_autofree char *resource = NULL;
        g_autofree char *res_path = NULL;
        AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40,
                                 .state_dir = state };
        g_autoptr(json_t) report = NULL;
        g_autoptr(GError) err = NULL;
        json_t *step, *first, *bar, *resized;

        g_test_message("killed at %s", cases[i].point);
        fixture_open(&f, POLICY_A100("[{\"method\": \"vfio-zero\", \"resize\": true}]"), TRUE);
        make_resizable_bar(&f);
        run_killed_at(&f, &target, cases[i].point);
        g_assert_cmpuint(bar_file_size(&f, 0), ==, cases[i].left);
        assert_driver(&f, cases[i].driver);
        g_assert_true(av_bar_record_exists(state, "pci-" A100));

        g_assert_true(run(&f, &target, &report, &err));
        g_assert_no_error(err);
        step = json_array_get(json_object_get(report, "steps"), 0);
        first = json_object_get(step, "restored_first");
        g_assert_nonnull(first);
        g_assert_cmpuint(json_array_size(json_object_get(first, "bars")), ==, 1);
        bar = json_array_get(json_object_get(first, "bars"), 0);
        g_assert_cmpint(json_integer_value(json_object_get(bar, "bar")), ==, 0);
        g_assert_cmpint(json_integer_value(json_object_get(bar, "size")), ==, 1024 * 1024);
        g_assert_cmpint(json_integer_value(json_object_get(bar, "was")), ==, (json_int_t)cases[i].left);
        g_assert_true(json_is_true(json_object_get(bar, "resized")) == (cases[i].left != 1024 * 1024));
        /* then the scrub as ever: grown, zeroed whole, back */
        resized = json_object_get(step, "resized");
        g_assert_cmpuint(json_array_size(resized), ==, 1);
        g_assert_cmpint(json_integer_value(json_object_get(json_array_get(resized, 0), "from")), ==, 1024 * 1024);
        g_assert_cmpint(json_integer_value(json_object_get(json_object_get(report, "coverage"), "cleared")), ==,
                        4 * 1024 * 1024);
        assert_bar(&f, 0, 1024 * 1024, 0);
        res_path = g_strdup_printf("%s/" A100_DIR "/resource", f.dir);
        g_assert_true(g_file_get_contents(res_path, &resource, NULL, NULL));
        g_assert_true(g_str_has_prefix(resource, "0x00000000e0000000 0x00000000e00fffff "));
        assert_driver(&f, "vfio-pci");
        g_assert_false(av_bar_record_exists(state, "pci-" A100));
        fixture_close(&f);
        av_test_tmpdir_remove(state);
    }
}

/* The BAR cannot be put back (the kernel refuses): the scrub fails saying
 * so, before anything is zeroed, and the record stays with the error; once
 * the kernel lets it, the next scrub puts it back and goes on. */
static void
test_resize_restore_fails(void)
{
    Fixture f;
    g_autofree char *state = av_test_tmpdir();
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40, .state_dir = state };
    g_autoptr(json_t) report = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvBarRecord) record = NULL;

    fixture_open(&f, POLICY_A100("[{\"method\": \"vfio-zero\", \"resize\": true}]"), TRUE);
    make_resizable_bar(&f);
    run_killed_at(&f, &target, "bar-grown");
    av_test_write(f.dir, "sys/.accelvirt-fake-kernel", "fail /sys/bus/pci/devices/" A100 "/resource0_resize 5\n");
    g_assert_false(run(&f, &target, &report, &err));
    g_assert_nonnull(strstr(err->message, "the BAR sizes of " A100 " recorded before a resize that was cut short "
                                          "could not be put back"));
    g_assert_cmpuint(bar_file_size(&f, 0), ==, 4 * 1024 * 1024);
    g_assert_cmpint(json_integer_value(json_object_get(json_object_get(report, "coverage"), "cleared")), ==, 0);
    g_assert_true(av_bar_record_take(state, "pci-" A100, 0, &record, NULL));
    g_assert_nonnull(record);
    g_assert_nonnull(strstr(record->error, "could not be put back"));
    g_assert_cmpuint(record->bars->len, ==, 1);
    g_assert_cmpuint(g_array_index(record->bars, AvBarSize, 0).bit, ==, 0);
    g_clear_pointer(&record, av_bar_record_free);
    g_clear_error(&err);
    g_clear_pointer(&report, json_decref);

    av_test_write(f.dir, "sys/.accelvirt-fake-kernel", "");
    g_assert_true(run(&f, &target, &report, &err));
    g_assert_no_error(err);
    assert_bar(&f, 0, 1024 * 1024, 0);
    g_assert_false(av_bar_record_exists(state, "pci-" A100));
    fixture_close(&f);
    av_test_tmpdir_remove(state);
}

/* The fake kernel's resourceN_resize, as the ABI says: no driver bound,
 * and only a size the bitmap offers. */
static void
test_fake_resize_abi(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    guint64 bitmap = 0;

    fixture_open(&f, POLICY_A100("[{\"method\": \"none\"}]"), TRUE);
    make_bar(&f, 0, 1024 * 1024, 0xa5);
    g_assert_cmpint(av_pci_read_rebar_sizes(f.root, A100, 0, &bitmap), ==, -ENOENT);
    av_test_write(f.dir, A100_DIR "/resource0_resize", "00000000000001c0\n");
    g_assert_cmpint(av_pci_read_rebar_sizes(f.root, A100, 0, &bitmap), ==, 0);
    g_assert_cmpuint(bitmap, ==, 0x1c0);
    /* bound to vfio-pci: busy */
    g_assert_cmpint(f.ops->write(f.root, "/sys/bus/pci/devices/" A100 "/resource0_resize", "7"), ==, -EBUSY);
    /* a size not offered */
    g_assert_false(av_vfio_resize_bar(f.root, f.ops, A100, 0, 3, &err));
    g_assert_nonnull(strstr(err->message, "Invalid argument"));
    g_clear_error(&err);
    g_assert_true(av_vfio_resize_bar(f.root, f.ops, A100, 0, 7, &err));
    g_assert_no_error(err);
    {
        g_autofree char *path = g_strdup_printf("%s/" A100_DIR "/resource0", f.dir);
        struct stat st;

        /* the window grew; what the device holds stays */
        g_assert_cmpint(stat(path, &st), ==, 0);
        g_assert_cmpint(st.st_size, ==, 128 * 1024 * 1024);
    }
    assert_driver(&f, "vfio-pci");
    /* garbage in the file is no bitmap */
    av_test_write(f.dir, A100_DIR "/resource0_resize", "zz\n");
    g_assert_cmpint(av_pci_read_rebar_sizes(f.root, A100, 0, &bitmap), ==, -EINVAL);
    av_test_write(f.dir, A100_DIR "/resource0_resize", "0000000000000000\n");
    g_assert_cmpint(av_pci_read_rebar_sizes(f.root, A100, 0, &bitmap), ==, -EINVAL);
    fixture_close(&f);
}

/* Coverage lines of a scrub program: this device's, or any device's when
 * the line names none; malformed ones are ignored. */
static void
test_coverage_parse(void)
{
    g_autoptr(json_t) a = NULL;
    g_autoptr(json_t) b = NULL;
    g_autoptr(json_t) c = NULL;
    g_autoptr(json_t) d = NULL;

    a = av_scrub_coverage_parse("gpu 0: ok\n"
                                "accelvirt-coverage: device=0000:17:00.0 method=cuda cleared=1000 memory=2000 "
                                "verified=yes gbps=1.0\n"
                                "accelvirt-coverage: device=0000:65:00.0 method=cuda cleared=5 memory=5 verified=yes\n",
                                A100);
    g_assert_cmpint(json_integer_value(json_object_get(a, "cleared")), ==, 1000);
    g_assert_cmpint(json_integer_value(json_object_get(a, "read_back")), ==, 1000);
    g_assert_cmpint(json_integer_value(json_object_get(a, "memory")), ==, 2000);
    g_assert_cmpstr(json_string_value(json_object_get(a, "source")), ==, "reported");
    /* a scrub VM's console: guest addresses, all counted; one not verified */
    b = av_scrub_coverage_parse("[    1.2] accelvirt-coverage: device=0000:01:00.0 method=bars cleared=10 "
                                "memory=unknown verified=yes\r\n"
                                "accelvirt-coverage: device=0000:02:00.0 method=bars cleared=20 memory=unknown "
                                "verified=no\n", NULL);
    g_assert_cmpint(json_integer_value(json_object_get(b, "cleared")), ==, 30);
    g_assert_cmpint(json_integer_value(json_object_get(b, "read_back")), ==, 0);
    g_assert_true(json_is_null(json_object_get(b, "memory")));
    c = av_scrub_coverage_parse("accelvirt-coverage: cleared=-1 memory=5 verified=yes\n"
                                "accelvirt-coverage: cleared=1 memory=0 verified=yes\n"
                                "accelvirt-coverage: cleared=1 memory=5 verified=maybe\n"
                                "accelvirt-coverage: cleared=99999999999999999999 memory=5 verified=yes\n"
                                "accelvirt-coverage: cleared=0x10 memory=5 verified=yes\n"
                                "accelvirt-coverage: memory=5 verified=yes\n", NULL);
    g_assert_null(c);
    d = av_scrub_coverage_parse("accelvirt-coverage: device=0000:65:00.0 cleared=5 memory=5 verified=yes\n", A100);
    g_assert_null(d);
}

/* A command step's program says what it cleared; the profile's memory
 * reaches it in ACCELVIRT_SCRUB_MEMORY.  Its word is recorded as its word,
 * and never meets min_coverage, which counts what accelvirt measured. */
static void
test_coverage_command(void)
{
    Fixture f;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *bin = g_build_filename(tmp, "bin", NULL);
    g_autofree char *prog = g_build_filename(bin, "clear", NULL);
    g_autofree char *steps = g_strdup_printf("[{\"method\": \"command\", \"argv\": [\"%s\"]}]", prog);
    g_autofree char *policy = g_strdup_printf(POLICY_A100_WITH("\"memory\": \"2GiB\"", "%s"), steps);
    g_autofree char *strict = g_strdup_printf(POLICY_A100_WITH("\"memory\": \"2GiB\", \"min_coverage\": 0.5", "%s"),
                                              steps);
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) report = NULL;
    json_t *cov;

    av_test_write(bin, "clear", "#!/bin/sh\necho \"accelvirt-coverage: device=$1 method=test "
                                "cleared=$ACCELVIRT_SCRUB_MEMORY memory=$ACCELVIRT_SCRUB_MEMORY verified=no\"\n"
                                "echo \"accelvirt-coverage: device=$1 method=test cleared=5 memory=5 verified=no\"\n"
                                "echo \"accelvirt-coverage: device=$1 method=test cleared=$ACCELVIRT_SCRUB_MEMORY "
                                "memory=$ACCELVIRT_SCRUB_MEMORY verified=no\"\n");
    g_assert_cmpint(chmod(bin, 0755), ==, 0);
    g_assert_cmpint(chmod(prog, 0755), ==, 0);
    fixture_open(&f, policy, FALSE);
    g_assert_true(run(&f, &target, &report, &err));
    g_assert_no_error(err);
    cov = json_object_get(report, "coverage");
    /* said three times for one device: counted once, as said last */
    g_assert_cmpint(json_integer_value(json_object_get(cov, "cleared")), ==, 2ll << 30);
    g_assert_cmpstr(json_string_value(json_object_get(cov, "verified")), ==, "none");
    g_assert_cmpstr(json_string_value(json_object_get(cov, "source")), ==, "reported");
    g_assert_cmpstr(json_string_value(json_object_get(cov, "text")), ==,
                    "cleared 2 GiB of 2 GiB of device memory (100%), as the command step's program reports it, "
                    "not read back");
    fixture_close(&f);
    g_clear_pointer(&report, json_decref);

    fixture_open(&f, strict, FALSE);
    g_assert_false(run(&f, &target, &report, &err));
    g_assert_nonnull(strstr(err->message, "min_coverage 0.5, of memory accelvirt measured clearing"));
    fixture_close(&f);
    av_test_tmpdir_remove(tmp);
}

/* --- files that steps run or read, checked again right before use ------------- */

/* A scrub program @dir/bin/scrub that records its run in @dir/ran, and a
 * scrub VM template @dir/scrub-vm.xml, both root's and writable by nobody
 * else, as the policy load wants them. */
static void
write_scrub_files(const char *dir)
{
    g_autofree char *bin = g_build_filename(dir, "bin", NULL);
    g_autofree char *prog = g_build_filename(bin, "scrub", NULL);
    g_autofree char *ran = g_build_filename(dir, "ran", NULL);
    g_autofree char *script = g_strdup_printf("#!/bin/sh\necho \"$@\" >'%s'\n", ran);
    g_autofree char *tmpl = g_build_filename(dir, "scrub-vm.xml", NULL);

    av_test_write(bin, "scrub", script);
    av_test_write(dir, "scrub-vm.xml", "<domain type='test'><name>@NAME@</name><uuid>@UUID@</uuid>"
                                      "<memory>1024</memory><os><type>hvm</type></os>"
                                      "<devices>@HOSTDEV@</devices></domain>\n");
    g_assert_cmpint(chmod(bin, 0755), ==, 0);
    g_assert_cmpint(chmod(prog, 0755), ==, 0);
    g_assert_cmpint(chmod(tmpl, 0644), ==, 0);
}

/* The program of a "command" step that someone else could change after the
 * policy was loaded is not run: the step fails (the worker quarantines). */
static void
test_command_checked_at_run(void)
{
    Fixture f;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *prog = g_build_filename(tmp, "bin", "scrub", NULL);
    g_autofree char *bin = g_build_filename(tmp, "bin", NULL);
    g_autofree char *ran = g_build_filename(tmp, "ran", NULL);
    g_autofree char *steps = g_strdup_printf("[{\"method\": \"command\", \"argv\": [\"%s\"]}]", prog);
    g_autofree char *policy = g_strdup_printf(POLICY_A100("%s"), steps);
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) report = NULL;
    json_t *entry;

    write_scrub_files(tmp);
    fixture_open(&f, policy, FALSE);
    g_assert_true(run(&f, &target, NULL, &err));
    g_assert_no_error(err);
    g_assert_true(g_file_test(ran, G_FILE_TEST_EXISTS));
    g_assert_cmpint(unlink(ran), ==, 0);

    /* the program turned group-writable */
    g_assert_cmpint(chmod(prog, 0775), ==, 0);
    g_assert_false(run(&f, &target, &report, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_assert_true(g_str_has_prefix(err->message, "scrub step 1 (command) failed: refusing the scrub program '"));
    g_assert_nonnull(strstr(err->message, "it is writable by its group"));
    g_assert_false(g_file_test(ran, G_FILE_TEST_EXISTS));
    entry = json_array_get(json_object_get(report, "steps"), 0);
    g_assert_false(json_is_true(json_object_get(entry, "ok")));
    g_clear_error(&err);
    g_clear_pointer(&report, json_decref);
    g_assert_cmpint(chmod(prog, 0755), ==, 0);

    /* its directory turned world-writable */
    g_assert_cmpint(chmod(bin, 0777), ==, 0);
    g_assert_false(run(&f, &target, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_assert_nonnull(strstr(err->message, "the directory '"));
    g_assert_false(g_file_test(ran, G_FILE_TEST_EXISTS));
    g_clear_error(&err);
    g_assert_cmpint(chmod(bin, 0755), ==, 0);

    /* it went away */
    g_assert_cmpint(unlink(prog), ==, 0);
    g_assert_false(run(&f, &target, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(err->message, "does not exist"));
    fixture_close(&f);
    g_clear_error(&err);

    /* A script that /bin/sh runs, turned writable by everyone after load,
     * is not run either. */
    {
        g_autofree char *script = g_build_filename(bin, "scrub.sh", NULL);
        g_autofree char *body = g_strdup_printf("touch '%s'\n", ran);
        g_autofree char *steps2 = g_strdup_printf("[{\"method\": \"command\", \"argv\": [\"/bin/sh\", \"%s\"]}]",
                                                  script);
        g_autofree char *policy2 = g_strdup_printf(POLICY_A100("%s"), steps2);

        av_test_write(bin, "scrub.sh", body);
        g_assert_cmpint(chmod(script, 0644), ==, 0);
        fixture_open(&f, policy2, FALSE);
        g_assert_true(run(&f, &target, NULL, &err));
        g_assert_no_error(err);
        g_assert_cmpint(unlink(ran), ==, 0);
        g_assert_cmpint(chmod(script, 0666), ==, 0);
        g_assert_false(run(&f, &target, NULL, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
        g_assert_nonnull(strstr(err->message, "refusing the scrub program argument '"));
        g_assert_false(g_file_test(ran, G_FILE_TEST_EXISTS));
        fixture_close(&f);
    }
    av_test_tmpdir_remove(tmp);
}

/* In a program that did not register the "vm" method (the hook links no
 * libvirt, so it cannot), a vm step fails, saying why: the device is
 * quarantined, never passed unscrubbed. */
static void
test_vm_unregistered(void)
{
    Fixture f;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *tmpl = g_build_filename(tmp, "scrub-vm.xml", NULL);
    g_autofree char *steps = g_strdup_printf("[{\"method\": \"vm\", \"template\": \"%s\", \"timeout\": 5}]", tmpl);
    g_autofree char *policy = g_strdup_printf(POLICY_A100("%s"), steps);
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) report = NULL;
    AvScrubMethodFunc registered;
    json_t *list;

    write_scrub_files(tmp);
    g_setenv("ACCELVIRT_CONNECT", "test:///nonexistent/accelvirt-unreached.xml", TRUE);
    fixture_open(&f, policy, TRUE);
    registered = av_scrub_method_set(AV_SCRUB_METHOD_VM, NULL);
    g_assert_nonnull(registered);
    g_assert_false(run(&f, &target, &report, &err));
    av_scrub_method_set(AV_SCRUB_METHOD_VM, registered);
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    g_assert_true(g_str_has_prefix(err->message, "scrub step 1 (vm) failed: the scrub method 'vm' is not in this "
                                                 "program (it calls libvirt"));
    list = json_object_get(report, "steps");
    g_assert_cmpuint(json_array_size(list), ==, 1);
    g_assert_true(json_is_false(json_object_get(json_array_get(list, 0), "ok")));
    g_clear_error(&err);
    /* Registered again, the same step reaches libvirt (and fails there). */
    g_assert_false(run(&f, &target, NULL, &err));
    g_assert_null(strstr(err->message, "is not in this program"));
    g_assert_nonnull(strstr(err->message, "cannot connect to libvirt"));
    g_unsetenv("ACCELVIRT_CONNECT");
    fixture_close(&f);
    av_test_tmpdir_remove(tmp);
}

/* The template of a "vm" step that someone else could change after the
 * policy was loaded, or that lost its @HOSTDEV@, fails the step before
 * libvirt is asked for anything. */
static void
test_vm_template_checked_at_run(void)
{
    Fixture f;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40 };
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *tmpl = g_build_filename(tmp, "scrub-vm.xml", NULL);
    g_autofree char *steps = g_strdup_printf("[{\"method\": \"vm\", \"template\": \"%s\", \"timeout\": 5}]", tmpl);
    g_autofree char *policy = g_strdup_printf(POLICY_A100("%s"), steps);
    g_autoptr(GError) err = NULL;

    write_scrub_files(tmp);
    /* a libvirt that would fail loudly if it were reached */
    g_setenv("ACCELVIRT_CONNECT", "test:///nonexistent/accelvirt-unreached.xml", TRUE);
    fixture_open(&f, policy, TRUE);
    {
        g_assert_cmpint(lchown(tmpl, 65534, (gid_t)-1), ==, 0);
        g_assert_false(run(&f, &target, NULL, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
        g_assert_true(g_str_has_prefix(err->message, "scrub step 1 (vm) failed: refusing the scrub VM template '"));
        g_assert_nonnull(strstr(err->message, "is owned by uid 65534"));
        g_clear_error(&err);
        g_assert_cmpint(lchown(tmpl, 0, 0), ==, 0);
    }
    g_assert_cmpint(chmod(tmp, 0757), ==, 0);
    g_assert_false(run(&f, &target, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_assert_nonnull(strstr(err->message, "is writable by every user"));
    g_clear_error(&err);
    g_assert_cmpint(chmod(tmp, 0700), ==, 0);

    av_test_write(tmp, "scrub-vm.xml", "<domain type='test'><name>@NAME@</name><devices/></domain>\n");
    g_assert_false(run(&f, &target, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
    g_assert_nonnull(strstr(err->message, "has no @HOSTDEV@"));
    g_unsetenv("ACCELVIRT_CONNECT");
    fixture_close(&f);
    av_test_tmpdir_remove(tmp);
}

/* --- the vm method on libvirt's test driver --------------------------------------
 *
 * test:///default is libvirt's in-process mock hypervisor: it keeps the
 * domains it is given (hostdevs and all) and reports their lifecycle
 * events (not a guest reboot: that case is left to a real libvirt), but
 * runs nothing.  The method connects to it through
 * ACCELVIRT_CONNECT; an operator thread, on a connection of its own, finds
 * the scrub domain by the UUID the pool made and plays the image's part
 * (power off, crash) or someone else's (destroy, another domain's events).
 * The libvirt tier (tests/libvirt/test-scrub-vm.sh) boots real scrub VMs. */

#define VM_UUID "6f0d7b8e-3c1a-4e9b-9d2f-5a4b3c2d1e0f"
#define VM_TOKEN "0123456789abcdef0123456789abcdef"
#define VM_IDENTITY "dsn:00-11-22-33-44-55-66-77"
#define VM_TEST_URI "test:///default"

static void
vm_silence(void *data, virErrorPtr e)
{
    (void)data;
    (void)e;
}

typedef enum {
    OP_SHUTDOWN,                 /* the image powers off: the one success */
    OP_CRASH,                    /* the image panics */
    OP_DESTROY,                  /* someone destroys the scrub domain */
} OpAction;

typedef struct {
    OpAction action;
    const char *dump;            /* OP_CRASH: where the test driver writes its core dump */
    const char *other;           /* the name of a running domain to power off first, or NULL */
    gboolean found;              /* the scrub domain was seen running */
    char *xml;                   /* its XML then (free()) */
    const char *console_dir;     /* the image's console: written to CONSOLE_DIR/NAME.log before it stops */
    const char *console;
} Operator;

static gpointer
operator_run(gpointer data)
{
    Operator *op = data;
    virConnectPtr conn = virConnectOpen(VM_TEST_URI);
    virDomainPtr dom = NULL;

    g_assert_nonnull(conn);
    for (guint i = 0; i < 400 && !dom; i++) {
        dom = virDomainLookupByUUIDString(conn, VM_UUID);
        if (!dom)
            g_usleep(25 * 1000);
    }
    if (dom) {
        op->found = TRUE;
        /* the method reads the live XML at once after it started it */
        g_usleep(300 * 1000);
        op->xml = virDomainGetXMLDesc(dom, 0);
        if (op->console) {
            g_autofree char *file = g_strdup_printf("%s.log", virDomainGetName(dom));

            av_test_write(op->console_dir, file, op->console);
        }
        if (op->other) {
            virDomainPtr other = virDomainLookupByName(conn, op->other);

            g_assert_nonnull(other);
            g_assert_cmpint(virDomainShutdown(other), ==, 0);
            virDomainFree(other);
            /* its events reach the method well before ours */
            g_usleep(600 * 1000);
        }
        switch (op->action) {
        case OP_SHUTDOWN:
            g_assert_cmpint(virDomainShutdown(dom), ==, 0);
            break;
        case OP_CRASH:
            g_assert_cmpint(virDomainCoreDumpWithFormat(dom, op->dump, VIR_DOMAIN_CORE_DUMP_FORMAT_RAW,
                                                        VIR_DUMP_CRASH), ==, 0);
            break;
        case OP_DESTROY:
            g_assert_cmpint(virDomainDestroy(dom), ==, 0);
            break;
        }
        virDomainFree(dom);
    }
    virConnectClose(conn);
    return NULL;
}

typedef struct {
    Fixture f;
    char *tmp;                   /* the template and the core dumps */
    virConnectPtr conn;          /* ours, kept open: the test driver's state lives while one is */
    AvScrubTarget target;
} VmFixture;

/* A fixture whose A100 profile has one vm step of @timeout_s seconds on the
 * template @template_text (the usual one when NULL), ACCELVIRT_CONNECT the
 * test driver. */
static void
vm_fixture_open_timeout(VmFixture *v, const char *template_text, guint timeout_s)
{
    g_autofree char *tmpl = NULL;
    g_autofree char *steps = NULL;
    g_autofree char *policy = NULL;

    v->tmp = av_test_tmpdir();
    write_scrub_files(v->tmp);
    tmpl = g_build_filename(v->tmp, "scrub-vm.xml", NULL);
    if (template_text)
        av_test_write(v->tmp, "scrub-vm.xml", template_text);
    steps = g_strdup_printf("[{\"method\": \"vm\", \"template\": \"%s\", \"timeout\": %u}]", tmpl, timeout_s);
    policy = g_strdup_printf(POLICY_A100("%s"), steps);
    fixture_open(&v->f, policy, TRUE);
    virSetErrorFunc(NULL, vm_silence);
    g_setenv("ACCELVIRT_CONNECT", VM_TEST_URI, TRUE);
    v->conn = virConnectOpen(VM_TEST_URI);
    g_assert_nonnull(v->conn);
    v->target = (AvScrubTarget){ .identity = VM_IDENTITY, .address = A100, .iommu_group = 40,
                                 .scrub_token = VM_TOKEN, .scrub_domain_uuid = VM_UUID };
}

static void
vm_fixture_open(VmFixture *v, const char *template_text)
{
    vm_fixture_open_timeout(v, template_text, 20);
}

static void
vm_fixture_close(VmFixture *v)
{
    virDomainPtr left = virDomainLookupByUUIDString(v->conn, VM_UUID);

    /* no scrub domain is left behind */
    g_assert_null(left);
    virConnectClose(v->conn);
    g_unsetenv("ACCELVIRT_CONNECT");
    fixture_close(&v->f);
    av_test_tmpdir_remove(v->tmp);
    g_free(v->tmp);
}

/* Runs the steps with @op (or no operator) playing alongside; the step's
 * report entry in *ret_entry (a new reference). */
static gboolean
vm_run(VmFixture *v, Operator *op, json_t **ret_entry, GError **error)
{
    g_autoptr(json_t) report = NULL;
    GThread *thread = op ? g_thread_new("operator", operator_run, op) : NULL;
    gboolean ok = run(&v->f, &v->target, &report, error);

    if (thread)
        g_thread_join(thread);
    *ret_entry = json_incref(json_array_get(json_object_get(report, "steps"), 0));
    g_assert_nonnull(*ret_entry);
    return ok;
}

/* The name the scrub domain had before it was random: accelvirt-scrub- and
 * 12 hex digits of the identity's SHA-256, which anyone could work out.
 * Caller frees. */
static char *
vm_old_name(void)
{
    g_autofree char *hash = g_compute_checksum_for_string(G_CHECKSUM_SHA256, VM_IDENTITY, -1);

    return g_strdup_printf("accelvirt-scrub-%.12s", hash);
}

static void
assert_random_name(const char *name)
{
    g_assert_true(g_regex_match_simple("^accelvirt-scrub-[0-9a-f]{16}$", name, 0, 0));
}

/* The image powers off, the scrub domain had the device: the step passes,
 * and the report says what libvirt showed. */
static void
test_vm_pass(void)
{
    VmFixture v;
    Operator op = { .action = OP_SHUTDOWN };
    g_autoptr(json_t) entry = NULL;
    g_autoptr(GError) err = NULL;
    json_t *live;

    vm_fixture_open(&v, NULL);
    g_assert_true(vm_run(&v, &op, &entry, &err));
    g_assert_no_error(err);
    g_assert_true(op.found);
    assert_random_name(json_string_value(json_object_get(entry, "domain")));
    g_assert_cmpstr(json_string_value(json_object_get(entry, "uuid")), ==, VM_UUID);
    g_assert_cmpstr(json_string_value(json_object_get(entry, "hostdev")), ==, A100);
    live = json_object_get(entry, "live_hostdevs");
    g_assert_cmpuint(json_array_size(live), ==, 1);
    g_assert_cmpstr(json_string_value(json_array_get(live, 0)), ==, A100);
    g_assert_cmpstr(json_string_value(json_object_get(entry, "reason")), ==, "shutdown");
    g_assert_nonnull(strstr(json_string_value(json_object_get(entry, "message")), "had device " A100 " and powered off"));
    /* as it ran: the pool's UUID and scrub token, the device */
    g_assert_nonnull(op.xml);
    g_assert_nonnull(strstr(op.xml, "<uuid>" VM_UUID "</uuid>"));
    g_assert_nonnull(strstr(op.xml, "<av:scrub token=\"" VM_TOKEN "\" identity=\"" VM_IDENTITY "\"/>"));
    g_assert_nonnull(strstr(op.xml, "bus='0x17'"));
    free(op.xml);
    vm_fixture_close(&v);
}

/* The image's coverage lines on its console (the template's serial log
 * file, named after the scrub domain) are the step's coverage: every device
 * it had; a console with none says nothing, a malformed line is not
 * believed, nor is a log whose name is not the scrub domain's (another
 * scrub's, or one anyone could prepare). */
static void
test_vm_console_coverage(void)
{
    static const char *const consoles[] = {
        ("Linux booting\n[    2.100000] accelvirt-coverage: device=0000:01:00.0 method=bars cleared=1048576 "
         "memory=unknown verified=yes bars=2\naccelvirt-scrub: powering off\n"),
        "Linux booting\naccelvirt-scrub: powering off\n",
        "accelvirt-coverage: device=0000:01:00.0 method=bars cleared=1e9 memory=unknown verified=yes\n",
        "board name: accelvirt-coverage: device=0000:01:00.0 method=bars cleared=9 memory=unknown verified=yes\n",
        "accelvirt-coverage: device=0000:01:00.0 method=bars cleared=1048576 memory=unknown verified=yes\n",
    };

    for (guint i = 0; i < G_N_ELEMENTS(consoles); i++) {
        VmFixture v;
        Operator op = { .action = OP_SHUTDOWN, .console = consoles[i] };
        g_autoptr(json_t) entry = NULL;
        g_autoptr(GError) err = NULL;
        g_autofree char *tmp = av_test_tmpdir();
        /* the last case: a fixed name, not the scrub domain's */
        g_autofree char *tmpl = g_strdup_printf(
            "<domain type='test'><name>@NAME@</name><memory>1024</memory><os><type>hvm</type></os>"
            "<devices>@HOSTDEV@<serial type='pty'><log file='%s/%s.log' append='off'/></serial></devices></domain>\n",
            tmp, i == 4 ? "fixed" : "@NAME@");
        json_t *cov;

        op.console_dir = tmp;
        if (i == 4) {
            av_test_write(tmp, "fixed.log", consoles[i]);
            op.console = NULL;
        }
        vm_fixture_open(&v, tmpl);
        g_assert_true(vm_run(&v, &op, &entry, &err));
        g_assert_no_error(err);
        cov = json_object_get(entry, "coverage");
        if (i == 0) {
            g_autofree char *want = g_strdup_printf("%s/%s.log", tmp,
                                                    json_string_value(json_object_get(entry, "domain")));

            g_assert_cmpstr(json_string_value(json_object_get(entry, "console_log")), ==, want);
            g_assert_cmpint(json_integer_value(json_object_get(cov, "cleared")), ==, 1048576);
            g_assert_cmpint(json_integer_value(json_object_get(cov, "read_back")), ==, 1048576);
            g_assert_cmpstr(json_string_value(json_object_get(cov, "source")), ==, "reported");
        } else {
            g_assert_null(cov);
        }
        free(op.xml);
        vm_fixture_close(&v);
        av_test_tmpdir_remove(tmp);
    }
}

/* A scrub domain that runs without the device (the placeholder where
 * libvirt does not take it as a device: in <description>, in <metadata>; or
 * another device's hostdev beside it) is destroyed at once and the step
 * fails, whatever the image would do. */
static void
test_vm_no_device(void)
{
    static const char *const templates[] = {
        "<domain type='test'><name>@NAME@</name><description>@HOSTDEV@</description><memory>1024</memory>"
        "<os><type>hvm</type></os><devices/></domain>\n",
        "<domain type='test'><name>@NAME@</name><metadata><x:m xmlns:x='urn:example:x'>@HOSTDEV@</x:m></metadata>"
        "<memory>1024</memory><os><type>hvm</type></os><devices/></domain>\n",
        "<domain type='test'><name>@NAME@</name><description>@HOSTDEV@</description><memory>1024</memory>"
        "<os><type>hvm</type></os><devices><hostdev mode='subsystem' type='pci' managed='no'><source>"
        "<address domain='0x0000' bus='0x31' slot='0x00' function='0x0'/></source></hostdev></devices></domain>\n",
    };
    static const char *const seen[] = { "[]", "[]", "[\"0000:31:00.0\"]" };

    for (guint i = 0; i < G_N_ELEMENTS(templates); i++) {
        VmFixture v;
        g_autoptr(json_t) entry = NULL;
        g_autoptr(GError) err = NULL;
        g_autofree char *live = NULL;

        vm_fixture_open(&v, templates[i]);
        g_assert_false(vm_run(&v, NULL, &entry, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
        g_assert_true(g_regex_match_simple("^scrub step 1 \\(vm\\) failed: the scrub VM 'accelvirt-scrub-[0-9a-f]{16}' "
                                           "runs without device 0000:17:00.0: its live XML has no <hostdev "
                                           "type='pci'> of that address \\(PCI hostdevs seen: .*\\); destroyed$",
                                           err->message, 0, 0));
        live = av_json_dump_compact(json_object_get(entry, "live_hostdevs"));
        g_assert_cmpstr(live, ==, seen[i]);
        g_assert_cmpstr(json_string_value(json_object_get(entry, "reason")), ==, "no-device");
        g_assert_false(json_is_true(json_object_get(entry, "ok")));
        vm_fixture_close(&v);
    }
}

/* An image that never powers off (a hang): destroyed at the step's
 * timeout, failed. */
static void
test_vm_hang(void)
{
    VmFixture v;
    g_autoptr(json_t) entry = NULL;
    g_autoptr(GError) err = NULL;
    gint64 start = g_get_monotonic_time();

    vm_fixture_open_timeout(&v, NULL, 2);
    g_assert_false(vm_run(&v, NULL, &entry, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    g_assert_true(g_regex_match_simple("^scrub step 1 \\(vm\\) failed: the scrub VM 'accelvirt-scrub-[0-9a-f]{16}' "
                                       "did not power off within 2 s; destroyed$", err->message, 0, 0));
    g_assert_cmpint(g_get_monotonic_time() - start, >=, 2 * G_USEC_PER_SEC);
    g_assert_cmpstr(json_string_value(json_object_get(entry, "reason")), ==, "timeout");
    vm_fixture_close(&v);
}

/* The vm method takes a whole PCI function: an mdev (or no PCI address)
 * fails the step before libvirt is asked. */
static void
test_vm_not_pci(void)
{
    VmFixture v;
    g_autoptr(json_t) entry = NULL;
    g_autoptr(GError) err = NULL;

    vm_fixture_open(&v, NULL);
    v.target.mdev_uuid = "4b20d080-1b54-4048-85b3-a6a62d165c01";
    g_assert_false(vm_run(&v, NULL, &entry, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
    g_assert_nonnull(strstr(err->message, "gives the scrub VM a whole PCI function"));
    g_assert_null(json_object_get(entry, "domain"));
    g_clear_error(&err);
    g_clear_pointer(&entry, json_decref);
    v.target.mdev_uuid = NULL;
    v.target.address = "1-1.2";
    g_assert_false(vm_run(&v, NULL, &entry, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
    vm_fixture_close(&v);
}

/* A domain defined under the name the scrub domain used to have (anyone
 * can work it out) no longer stands in its way; two scrubs of one device
 * use two names. */
static void
test_vm_names(void)
{
    VmFixture v;
    g_autofree char *old = vm_old_name();
    g_autofree char *squat = NULL;
    g_autofree char *first = NULL;
    virDomainPtr dom;

    vm_fixture_open(&v, NULL);
    squat = g_strdup_printf("<domain type='test'><name>%s</name><memory>1024</memory><os><type>hvm</type></os>"
                            "<devices/></domain>", old);
    dom = virDomainDefineXML(v.conn, squat);
    g_assert_nonnull(dom);
    for (guint i = 0; i < 2; i++) {
        Operator op = { .action = OP_SHUTDOWN };
        g_autoptr(json_t) entry = NULL;
        g_autoptr(GError) err = NULL;
        const char *name;

        g_assert_true(vm_run(&v, &op, &entry, &err));
        g_assert_no_error(err);
        name = json_string_value(json_object_get(entry, "domain"));
        assert_random_name(name);
        g_assert_cmpstr(name, !=, old);
        if (i == 0)
            first = g_strdup(name);
        else
            g_assert_cmpstr(name, !=, first);
        free(op.xml);
    }
    /* the squatter is as it was: defined, not running */
    g_assert_cmpint(virDomainIsActive(dom), ==, 0);
    g_assert_cmpint(virDomainUndefine(dom), ==, 0);
    virDomainFree(dom);
    vm_fixture_close(&v);
}

/* Only the scrub domain's own events count, by its UUID: another domain
 * (here under the name the scrub domain used to have) that powers off
 * while the scrub runs does not make it pass, and the scrub domain's own
 * crash or destruction fails it. */
static void
test_vm_other_events(void)
{
    static const OpAction actions[] = { OP_CRASH, OP_DESTROY };
    static const char *const messages[] = {
        "crashed after", "stopped after",
    };
    g_autofree char *old = vm_old_name();

    for (guint i = 0; i < G_N_ELEMENTS(actions); i++) {
        VmFixture v;
        g_autofree char *dump = NULL;
        g_autofree char *other = NULL;
        Operator op = { .action = actions[i], .other = old };
        g_autoptr(json_t) entry = NULL;
        g_autoptr(GError) err = NULL;
        virDomainPtr dom;

        vm_fixture_open(&v, NULL);
        dump = g_build_filename(v.tmp, "core", NULL);
        op.dump = dump;
        other = g_strdup_printf("<domain type='test'><name>%s</name><memory>1024</memory><os><type>hvm</type></os>"
                                "<devices/></domain>", old);
        dom = virDomainCreateXML(v.conn, other, 0);
        g_assert_nonnull(dom);
        g_assert_false(vm_run(&v, &op, &entry, &err));
        g_assert_true(op.found);
        g_assert_nonnull(strstr(err->message, messages[i]));
        g_assert_cmpstr(json_string_value(json_object_get(entry, "reason")), ==, i == 0 ? "crashed" : "destroyed");
        /* the other one powered off, and that was not taken for ours */
        g_assert_cmpint(virDomainIsActive(dom), !=, 1);
        virDomainFree(dom);
        free(op.xml);
        vm_fixture_close(&v);
    }
}

/* --- the fake kernel's device operations --------------------------------------- */

static void
test_fake_device_ops(void)
{
    Fixture f;
    AvDeviceHandle *h = NULL;
    AvRegion region;
    g_autofree char *log = NULL;

    fixture_open(&f, POLICY_A100("[{\"method\": \"none\"}]"), FALSE);
    /* On nvidia: no /dev/vfio/40 yet. */
    g_assert_cmpint(f.ops->device_open(f.root, A100, &h), ==, -ENOENT);
    g_assert_cmpint(f.ops->device_open(f.root, "0000:ff:1f.7", &h), ==, -ENODEV);
    g_assert_cmpint(f.ops->device_open(f.root, "not-an-address", &h), ==, -EINVAL);
    g_assert_null(h);
    fixture_close(&f);

    fixture_open(&f, POLICY_A100("[{\"method\": \"none\"}]"), TRUE);
    make_bar(&f, 1, 8192, 0x01);
    g_assert_cmpint(f.ops->device_open(f.root, A100, &h), ==, 0);
    g_assert_nonnull(h);
    g_assert_cmpint(f.ops->device_region(h, 1, &region), ==, 0);
    g_assert_cmpuint(region.size, ==, 8192);
    g_assert_cmpuint(region.offset, ==, 0);
    g_assert_true(region.mmap_ok && region.is_memory && region.readable && region.writable);
    g_assert_cmpint(region.fd, >=, 0);
    g_assert_cmpint(f.ops->device_region(h, 0, &region), ==, 0);
    g_assert_cmpuint(region.size, ==, 0);
    g_assert_cmpint(f.ops->device_region(h, 6, &region), ==, -EINVAL);
    g_assert_cmpint(f.ops->device_reset(h), ==, 0);
    av_test_write(f.dir, "sys/.accelvirt-fake-kernel", "fail VFIO_DEVICE_RESET:* 25\n");
    g_assert_cmpint(f.ops->device_reset(h), ==, -ENOTTY);
    f.ops->device_close(h);
    f.ops->device_close(NULL);
    log = fake_log(&f);
    g_assert_cmpstr(log, ==, "VFIO_GROUP_GET_DEVICE_FD " A100 "\nVFIO_DEVICE_RESET " A100 "\nclose " A100 "\n");

    /* A group another member makes unviable: a host driver in it. */
    av_test_symlink(f.dir, "sys/kernel/iommu_groups/40/devices/0000:02:00.0", "../../../../bus/pci/devices/0000:02:00.0");
    h = NULL;
    g_assert_cmpint(f.ops->device_open(f.root, A100, &h), ==, -EPERM);
    g_assert_null(h);
    fixture_close(&f);
}

/* ---- USB sticks (issue 13) ---- */

#define STICK_DIR "sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1.2"
#define STICK_ID "usb:03e7:2485:serial:03e72485"

static const char usb_policy[] =
    "{\"profiles\": [{\"name\": \"stick\", \"match\": {\"vendor\": \"0x03e7\", \"device\": \"0x2485\"},"
    " \"attach\": \"usb\", \"scrub\": [{\"method\": \"usb-reset\"},"
    " {\"method\": \"usb-reauthorize\", \"timeout\": 1}]}]}";

/* Runs the stick profile's steps on the tree's Movidius stick (1-1.2, bus
 * 1 device 3) presenting @identity. */
static gboolean
run_stick_at(Fixture *f, const char *identity, const char *address, json_t **ret_report, GError **error)
{
    AvScrubTarget target = { .identity = identity, .address = address, .iommu_group = -1 };

    return av_scrub_run(f->root, f->ops, av_policy_find(f->policy, "stick"), &target, ret_report, error);
}

static gboolean
run_stick(Fixture *f, const char *identity, json_t **ret_report, GError **error)
{
    AvScrubTarget target = { .identity = identity, .address = "1-1.2", .iommu_group = -1 };

    return av_scrub_run(f->root, f->ops, av_policy_find(f->policy, "stick"), &target, ret_report, error);
}

/* The stick's "authorized" as the tree has it now.  Caller frees. */
static char *
stick_authorized(Fixture *f)
{
    g_autofree char *path = g_build_filename(f->dir, STICK_DIR "/authorized", NULL);
    char *text = NULL;

    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    return g_strstrip(text);
}

static void
test_usb_methods(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) report = NULL;
    g_autofree char *log = NULL;
    g_autofree char *devnum = NULL;
    g_autofree char *node = NULL;
    json_t *steps;

    fixture_open(&f, usb_policy, FALSE);
    /* No /dev/bus/usb node: the reset cannot be done, and says so. */
    g_assert_false(run_stick(&f, STICK_ID, NULL, &err));
    g_assert_nonnull(strstr(err->message, "USBDEVFS_RESET on /dev/bus/usb/001/003"));
    g_clear_error(&err);

    av_test_write(f.dir, "dev/bus/usb/001/003", "");
    /* Found authorized (an operator's scrub of a free stick, a re-plug):
     * held from the first step on, and left held by the last. */
    av_test_write(f.dir, STICK_DIR "/authorized", "1\n");
    g_assert_true(run_stick(&f, STICK_ID, &report, &err));
    g_assert_no_error(err);
    steps = json_object_get(report, "steps");
    g_assert_cmpstr(json_string_value(json_object_get(json_array_get(steps, 0), "message")), ==,
                    "usb port reset of 1-1.2 (bus 1 device 3), de-authorized throughout (it was found authorized)");
    g_assert_cmpstr(json_string_value(json_object_get(json_array_get(steps, 1), "message")), ==,
                    "de-authorized and authorized again at 1-1.2 (devnum 3 before, 4 after); re-enumerated; "
                    "de-authorized again until it is freed");
    /* Nothing of memory: neither step clears any. */
    g_assert_cmpint(json_integer_value(json_object_get(json_object_get(report, "coverage"), "cleared")), ==, 0);
    log = fake_log(&f);
    g_assert_nonnull(strstr(log, "USB_DEAUTHORIZE 1-1.2\nUSBDEVFS_RESET 001/003\nUSB_AUTHORIZE 1-1.2 devnum 4\n"
                                 "USB_DEAUTHORIZE 1-1.2\n"));
    node = g_build_filename(f.dir, "dev/bus/usb/001/004", NULL);
    g_assert_true(g_file_test(node, G_FILE_TEST_EXISTS));
    devnum = g_build_filename(f.dir, STICK_DIR "/devnum", NULL);
    {
        g_autofree char *text = NULL;
        g_autofree char *authorized = stick_authorized(&f);

        g_assert_true(g_file_get_contents(devnum, &text, NULL, NULL));
        g_assert_cmpstr(g_strstrip(text), ==, "4");
        /* Authorized for the step's moment only: the stick is held again. */
        g_assert_cmpstr(authorized, ==, "0");
    }
    /* Held already: the reset writes nothing to "authorized", and the
     * re-authorization authorizes it only for itself. */
    json_decref(g_steal_pointer(&report));
    g_assert_true(run_stick(&f, STICK_ID, &report, &err));
    g_assert_no_error(err);
    steps = json_object_get(report, "steps");
    g_assert_cmpstr(json_string_value(json_object_get(json_array_get(steps, 0), "message")), ==,
                    "usb port reset of 1-1.2 (bus 1 device 4), de-authorized throughout");
    {
        g_autofree char *authorized = stick_authorized(&f);

        g_assert_cmpstr(authorized, ==, "0");
    }

    /* Another stick's identity: not this one, nothing done to it. */
    g_assert_false(run_stick(&f, "usb:03e7:2485:serial:S9", NULL, &err));
    g_assert_nonnull(strstr(err->message, "no USB device presenting usb:03e7:2485:serial:S9"));
    g_clear_error(&err);

    /* The pool recorded the stick at another port (1-9, where nothing is):
     * the stick presenting that identity at 1-1.2 is not touched. */
    g_free(log);
    log = fake_log(&f);
    g_assert_false(run_stick_at(&f, STICK_ID, "1-9", NULL, &err));
    g_assert_nonnull(strstr(err->message, "is at the port the pool recorded (1-9); nothing done"));
    g_clear_error(&err);
    {
        g_autofree char *after = fake_log(&f);

        g_assert_cmpstr(after, ==, log);
    }

    /* The emulated kernel fails the reset on demand. */
    av_test_write(f.dir, "sys/.accelvirt-fake-kernel", "fail USBDEVFS_RESET:001/* 5\n");
    g_assert_false(run_stick(&f, STICK_ID, NULL, &err));
    g_assert_nonnull(strstr(err->message, "scrub step 1 (usb-reset) failed"));
    g_clear_error(&err);
    /* ... and the authorize write: the stick stays held. */
    av_test_write(f.dir, "sys/.accelvirt-fake-kernel", "fail /sys/bus/usb/devices/1-1.2/authorized 13\n");
    g_assert_false(run_stick(&f, STICK_ID, NULL, &err));
    g_assert_nonnull(strstr(err->message, "scrub step 2 (usb-reauthorize) failed: cannot write 1 to 'authorized'"));
    g_clear_error(&err);
    {
        g_autofree char *authorized = stick_authorized(&f);

        g_assert_cmpstr(authorized, ==, "0");
    }
    /* A stick found authorized that cannot be de-authorized: the reset is
     * not done, the step fails. */
    av_test_write(f.dir, STICK_DIR "/authorized", "1\n");
    g_free(log);
    log = fake_log(&f);
    g_assert_false(run_stick(&f, STICK_ID, NULL, &err));
    g_assert_nonnull(strstr(err->message, "scrub step 1 (usb-reset) failed: the USB device 1-1.2 cannot be kept "
                                          "de-authorized before the step: cannot write 0 to 'authorized'"));
    {
        g_autofree char *after = fake_log(&f);

        g_assert_cmpstr(after, ==, log);
    }
    fixture_close(&f);
}

/* ---- USB sticks whose firmware changes their ids (issue 34) ---- */

#define STICK_PORT_DIR "sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1:1.0/1-1-port2"

static const char usb_runtime_policy[] =
    "{\"profiles\": [{\"name\": \"stick\", \"match\": {\"vendor\": \"0x03e7\", \"device\": \"0x2485\"},"
    " \"attach\": \"usb\", \"runtime_ids\": [\"03e7:f63b\"],"
    " \"scrub\": [{\"method\": \"usb-power-cycle\", \"timeout\": 1}]}]}";

static const char usb_runtime_reauth_policy[] =
    "{\"profiles\": [{\"name\": \"stick\", \"match\": {\"vendor\": \"0x03e7\", \"device\": \"0x2485\"},"
    " \"attach\": \"usb\", \"runtime_ids\": [\"03e7:f63b\"],"
    " \"scrub\": [{\"method\": \"usb-reauthorize\", \"timeout\": 1}]}]}";

/* The contents of the tree's file @rel, stripped.  Caller frees. */
static char *
tree_read(Fixture *f, const char *rel)
{
    g_autofree char *path = g_build_filename(f->dir, rel, NULL);
    char *text = NULL;

    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    return g_strstrip(text);
}

/* Links @rel in the tree to @target. */
static void
tree_link(Fixture *f, const char *target, const char *rel)
{
    g_autofree char *path = g_build_filename(f->dir, rel, NULL);

    g_assert_cmpint(symlink(target, path), ==, 0);
}

/* The stick's hub port 1-1-port2 of the hub 1-1: the stick's "port" link,
 * the port's "device" link, and its "disable" when @disable. */
static void
stick_port(Fixture *f, gboolean disable)
{
    g_autofree char *dir = g_build_filename(f->dir, STICK_PORT_DIR, NULL);

    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    tree_link(f, "../1-1:1.0/1-1-port2", STICK_DIR "/port");
    tree_link(f, "../../1-1.2", STICK_PORT_DIR "/device");
    if (disable)
        av_test_write(f->dir, STICK_PORT_DIR "/disable", "0\n");
}

/* The stick as a tenant leaves it: its firmware loaded, 03e7:f63b, with
 * the same serial at the same port; its boot loader's id 2485. */
static void
stick_loaded(Fixture *f)
{
    av_test_write(f->dir, STICK_DIR "/idProduct", "f63b\n");
    av_test_write(f->dir, STICK_DIR "/fake_boot_idProduct", "2485\n");
}

static void
test_usb_power_cycle(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) report = NULL;
    g_autofree char *before = NULL;
    json_t *step;

    fixture_open(&f, usb_runtime_policy, FALSE);
    stick_loaded(&f);
    /* No hub port in sysfs: nothing done, said so. */
    g_assert_false(run_stick(&f, STICK_ID, NULL, &err));
    g_assert_nonnull(strstr(err->message, "has no hub port in sysfs ('port' link)"));
    g_clear_error(&err);
    /* A port without "disable": refused before any write. */
    stick_port(&f, FALSE);
    before = fake_log(&f);
    g_assert_false(run_stick(&f, STICK_ID, NULL, &err));
    g_assert_nonnull(strstr(err->message, "the hub port 1-1-port2 of the USB device 1-1.2 has no 'disable'"));
    g_clear_error(&err);
    {
        g_autofree char *after = fake_log(&f);

        g_assert_cmpstr(after, ==, before);
    }
    /* With it: the stick presenting its runtime ids is found at its port,
     * the port's power goes off and on, and it is back with its first ids,
     * re-enumerated, held. */
    av_test_write(f.dir, STICK_PORT_DIR "/disable", "0\n");
    g_assert_true(run_stick(&f, STICK_ID, &report, &err));
    g_assert_no_error(err);
    step = json_array_get(json_object_get(report, "steps"), 0);
    g_assert_cmpstr(json_string_value(json_object_get(step, "message")), ==,
                    "port of 1-1.2 disabled and enabled again (devnum 3 before, 4 after; its power off meanwhile "
                    "only where its hub switches each port's power); back with its first ids, de-authorized until "
                    "it is freed");
    g_assert_cmpstr(json_string_value(json_object_get(step, "runtime_ids_before")), ==, "03e7:f63b");
    {
        g_autofree char *log = fake_log(&f);
        g_autofree char *writes_path = g_strdup_printf("%s/sys/" AV_KERNEL_FAKE_WRITES, f.dir);
        g_autofree char *writes = NULL;
        g_autofree char *product = tree_read(&f, STICK_DIR "/idProduct");
        g_autofree char *disable = tree_read(&f, STICK_PORT_DIR "/disable");
        g_autofree char *authorized = stick_authorized(&f);
        const char *off, *on;

        g_assert_nonnull(strstr(log, "USB_DEAUTHORIZE 1-1.2\nUSB_PORT_OFF 1-1-port2 1-1.2\nUSB_PORT_ON 1-1-port2 "
                                     "1-1.2\nUSB_AUTHORIZE 1-1.2 devnum 4\nUSB_DEAUTHORIZE 1-1.2\n"));
        g_assert_true(g_file_get_contents(writes_path, &writes, NULL, NULL));
        off = strstr(writes, "1-1-port2/disable 1");
        on = strstr(writes, "1-1-port2/disable 0");
        g_assert_nonnull(off);
        g_assert_nonnull(on);
        g_assert_true(off < on);
        g_assert_cmpstr(product, ==, "2485");
        g_assert_cmpstr(disable, ==, "0");
        g_assert_cmpstr(authorized, ==, "0");
    }
    /* Firmware that survives the power cycle (a ganged hub leaves VBUS on):
     * the step fails, saying the stick still presents its runtime ids. */
    stick_loaded(&f);
    av_test_write(f.dir, STICK_DIR "/fake_firmware_survives", "\n");
    g_assert_false(run_stick(&f, STICK_ID, NULL, &err));
    g_assert_nonnull(strstr(err->message, "did not come back presenting " STICK_ID));
    g_assert_nonnull(strstr(err->message, "it still presents 03e7:f63b, one of the runtime_ids of profile 'stick'"));
    g_clear_error(&err);
    {
        g_autofree char *authorized = stick_authorized(&f);

        g_assert_cmpstr(authorized, ==, "0");
    }
    /* Other ids at the port (not a runtime id): not this stick, nothing done. */
    av_test_write(f.dir, STICK_DIR "/idProduct", "1234\n");
    g_assert_false(run_stick(&f, STICK_ID, NULL, &err));
    g_assert_nonnull(strstr(err->message, "no USB device presenting " STICK_ID " is at the port"));
    g_clear_error(&err);
    /* Runtime ids with another serial (a tenant's firmware faking one): not this stick. */
    av_test_write(f.dir, STICK_DIR "/idProduct", "f63b\n");
    av_test_write(f.dir, STICK_DIR "/serial", "FAKED\n");
    g_assert_false(run_stick(&f, STICK_ID, NULL, &err));
    g_assert_nonnull(strstr(err->message, "no USB device presenting " STICK_ID " is at the port"));
    g_clear_error(&err);
    fixture_close(&f);
}

/* usb-reauthorize on a stick presenting its runtime ids: found, but one
 * whose firmware survives the re-authorization fails the step. */
static void
test_usb_runtime_reauthorize(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    AvPoolDevice held = { .kind = AV_DEVICE_KIND_USB, .identity = (char *)STICK_ID, .address = (char *)"1-1.2",
                          .state = AV_DEVICE_STATE_SCRUBBING };

    fixture_open(&f, usb_runtime_reauth_policy, FALSE);
    stick_loaded(&f);
    g_assert_false(run_stick(&f, STICK_ID, NULL, &err));
    g_assert_nonnull(strstr(err->message, "scrub step 1 (usb-reauthorize) failed"));
    g_assert_nonnull(strstr(err->message, "it still presents 03e7:f63b, one of the runtime_ids of profile 'stick'"));
    g_clear_error(&err);
    /* Nor is it authorized for the next tenant (the move to free). */
    g_assert_false(av_pool_usb_unhold(f.root, f.ops, &held, &err));
    g_assert_nonnull(strstr(err->message, "the USB stick " STICK_ID " at 1-1.2 presents 03e7:f63b, not its first "
                                          "ids: the firmware loaded while a domain held it survived the scrub"));
    g_clear_error(&err);
    {
        g_autofree char *authorized = stick_authorized(&f);

        g_assert_cmpstr(authorized, ==, "0");
    }
    /* Back to its boot loader: the step passes, and the stick can be freed. */
    av_test_write(f.dir, STICK_DIR "/idProduct", "2485\n");
    g_assert_true(run_stick(&f, STICK_ID, NULL, &err));
    g_assert_no_error(err);
    g_assert_true(av_pool_usb_unhold(f.root, f.ops, &held, &err));
    g_assert_no_error(err);
    fixture_close(&f);
}

/* "program-base" (issue 15): the profile's base image must be in the
 * library (in the target's state dir) and fit the device, or the step fails
 * before any program runs (the worker quarantines); one that fits is
 * programmed, verified, and the step's report says what the device holds
 * now, which the worker records. */
#define POLICY_A100_PROGRAM(prog, base) \
    "{\"profiles\": [{\"name\": \"gpu-a100\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x20f1\"}," \
    " \"attach\": \"vfio-pci\", \"restore_driver\": \"keep-vfio\", \"program\": {\"argv\": [\"" prog "\", " \
    "\"program\", \"{address}\", \"{bitstream}\"], \"verify\": [\"" prog "\", \"verify\", \"{address}\", " \
    "\"{bitstream}\"], \"timeout\": 5, \"base\": \"" base "\"}, \"scrub\": [{\"method\": \"program-base\"}]}]}"

static void
test_program_base(void)
{
    Fixture f;
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *state = g_build_filename(tmp, "state", NULL);
    g_autofree char *prog = g_build_filename(tmp, "bin", "prog", NULL);
    g_autofree char *ran = g_build_filename(tmp, "ran", NULL);
    g_autofree char *script = g_strdup_printf("#!/bin/sh\necho \"$@\" >>'%s'\n", ran);
    g_autofree char *image = g_build_filename(tmp, "images", "base.bit", NULL);
    g_autofree char *policy = NULL;
    g_autofree char *log = NULL;
    g_autofree char *file = NULL;
    AvScrubTarget target = { .identity = "pci-" A100, .address = A100, .iommu_group = 40, .state_dir = state };
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) report = NULL;
    g_autoptr(AvBitstream) bad = NULL;
    g_autoptr(AvBitstream) good = NULL;
    const char *const wrong[] = { "dead:beef", NULL };
    const char *const right[] = { "10de:20f1", NULL };
    json_t *entry;

    av_test_write(tmp, "bin/prog", script);
    av_test_write(tmp, "images/base.bit", "the base image\n");
    av_test_write(tmp, "images/other.bit", "another image\n");
    g_assert_cmpint(chmod(prog, 0755), ==, 0);
    g_assert_cmpint(mkdir(state, 0700), ==, 0);
    policy = g_strdup_printf(POLICY_A100_PROGRAM("%s", "base-good"), prog, prog);

    /* not in the library */
    fixture_open(&f, policy, FALSE);
    g_assert_false(run(&f, &target, &report, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_assert_true(g_str_has_prefix(err->message, "scrub step 1 (program-base) failed: the base bitstream of "
                                                 "profile 'gpu-a100': "));
    g_assert_false(g_file_test(ran, G_FILE_TEST_EXISTS));
    g_clear_error(&err);
    g_clear_pointer(&report, json_decref);

    /* in the library, for other cards */
    file = g_build_filename(tmp, "images", "other.bit", NULL);
    bad = av_bitstream_add(state, file, "base-good", wrong, NULL, NULL, &err);
    g_assert_no_error(err);
    g_assert_false(run(&f, &target, &report, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_assert_nonnull(strstr(err->message, "does not fit device " A100));
    g_assert_false(g_file_test(ran, G_FILE_TEST_EXISTS));
    entry = json_array_get(json_object_get(report, "steps"), 0);
    g_assert_false(json_is_true(json_object_get(entry, "ok")));
    g_assert_null(json_object_get(entry, "programmed"));
    g_assert_null(av_scrub_report_programmed(report, "scrub"));
    g_clear_error(&err);
    g_clear_pointer(&report, json_decref);
    g_assert_true(av_bitstream_remove(state, "base-good", &err));
    g_assert_no_error(err);

    /* one that fits: programmed, then verified, through the library's file */
    good = av_bitstream_add(state, image, "base-good", right, NULL, NULL, &err);
    g_assert_no_error(err);
    g_assert_true(run(&f, &target, &report, &err));
    g_assert_no_error(err);
    g_assert_true(g_file_get_contents(ran, &log, NULL, NULL));
    {
        g_autofree char *path = av_bitstream_path(state, good);
        g_autofree char *want = g_strdup_printf("program " A100 " %s\nverify " A100 " %s\n", path, path);

        g_assert_cmpstr(log, ==, want);
    }
    entry = json_array_get(json_object_get(report, "steps"), 0);
    g_assert_true(json_is_true(json_object_get(entry, "ok")));
    g_assert_cmpstr(json_string_value(json_object_get(json_object_get(entry, "programmed"), "sha256")), ==,
                    good->sha256);
    g_assert_cmpstr(json_string_value(json_object_get(json_object_get(entry, "programmed"), "name")), ==,
                    "base-good");
    g_assert_true(json_is_true(json_object_get(json_object_get(entry, "program"), "ok")));
    {
        g_autoptr(AvProgrammed) pr = av_scrub_report_programmed(report, "scrub");

        g_assert_nonnull(pr);
        g_assert_cmpstr(pr->sha256, ==, good->sha256);
        g_assert_cmpstr(pr->name, ==, "base-good");
        g_assert_cmpstr(pr->by, ==, "scrub");
        g_assert_cmpstr(pr->verified, ==, "the program and the verify command exited 0");
    }
    fixture_close(&f);
    av_test_tmpdir_remove(tmp);
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);
    /* This program links libaccelvirt-virt.a, as the worker does. */
    av_scrub_vm_register();
    g_test_add_func("/scrub/zero/mmap", test_zero_mmap);
    g_test_add_func("/scrub/zero/pwrite", test_zero_pwrite);
    g_test_add_func("/scrub/zero/bounds", test_zero_bounds);
    g_test_add_func("/scrub/zero/mmap-refused", test_zero_mmap_refused);
    g_test_add_func("/scrub/zero/empty", test_zero_empty);
    g_test_add_func("/scrub/zero/fault", test_zero_fault);
    g_test_add_func("/scrub/zero/sample-plan", test_zero_sample_plan);
    g_test_add_func("/scrub/zero/progress", test_zero_progress);
    g_test_add_func("/scrub/vfio-zero/default-bars", test_method_default_bars);
    g_test_add_func("/scrub/vfio-zero/named-bars-sample", test_method_named_bars_sample);
    g_test_add_func("/scrub/vfio-zero/bad-bars", test_method_bad_bars);
    g_test_add_func("/scrub/vfio-zero/no-memory-bar", test_method_no_memory_bar);
    g_test_add_func("/scrub/vfio-zero/not-vfio", test_method_not_vfio);
    g_test_add_func("/scrub/vfio-zero/group-busy", test_method_group_busy);
    g_test_add_func("/scrub/vfio-zero/mdev-refused", test_method_mdev_refused);
    g_test_add_func("/scrub/coverage/bar-smaller-than-memory", test_coverage_bar_smaller_than_memory);
    g_test_add_func("/scrub/coverage/partial-read-back", test_coverage_partial_read_back);
    g_test_add_func("/scrub/coverage/min", test_coverage_min);
    g_test_add_func("/scrub/coverage/resize", test_coverage_resize);
    g_test_add_func("/scrub/coverage/resize-through-hold", test_resize_through_hold);
    g_test_add_func("/scrub/coverage/fake-resize-abi", test_fake_resize_abi);
    g_test_add_func("/scrub/resize/killed", test_resize_killed);
    g_test_add_func("/scrub/resize/restore-fails", test_resize_restore_fails);
    g_test_add_func("/scrub/coverage/parse", test_coverage_parse);
    g_test_add_func("/scrub/coverage/command", test_coverage_command);
    g_test_add_func("/scrub/command/checked-at-run", test_command_checked_at_run);
    g_test_add_func("/scrub/vm/unregistered", test_vm_unregistered);
    g_test_add_func("/scrub/vm/template-checked-at-run", test_vm_template_checked_at_run);
    g_test_add_func("/scrub/vm/pass", test_vm_pass);
    g_test_add_func("/scrub/vm/console-coverage", test_vm_console_coverage);
    g_test_add_func("/scrub/vm/no-device", test_vm_no_device);
    g_test_add_func("/scrub/vm/hang", test_vm_hang);
    g_test_add_func("/scrub/vm/not-pci", test_vm_not_pci);
    g_test_add_func("/scrub/vm/names", test_vm_names);
    g_test_add_func("/scrub/vm/other-events", test_vm_other_events);
    g_test_add_func("/scrub/kernel/fake-device-ops", test_fake_device_ops);
    g_test_add_func("/scrub/usb/methods", test_usb_methods);
    g_test_add_func("/scrub/usb/power-cycle", test_usb_power_cycle);
    g_test_add_func("/scrub/usb/runtime-reauthorize", test_usb_runtime_reauthorize);
    g_test_add_func("/scrub/program-base", test_program_base);
    return g_test_run();
}
