/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what the scrub methods share (src/scrub only). */
#pragma once

#include "av-scrub.h"

G_BEGIN_DECLS

/* One step being run. */
typedef struct {
    const AvRoot *root;
    const AvKernelOps *ops;
    const AvProfile *profile;
    const AvScrubTarget *target;
    const AvScrubStep *step;
    json_t *entry;               /* the step's report entry: a method adds its facts ("bytes", "sha256", ...) */
    gboolean held;               /* the scrub holds the target's group (av_scrub_run() took the hold): every
                                  * step goes through the hold, and none runs without it */
    gboolean *hold_lost;         /* the scrub's: set when the hold was found gone (av_scrub_device_open(),
                                  * av_scrub_hold_fd(), av_scrub_unhold()): the step fails, whatever its
                                  * method made of it, and no later step runs */
} AvScrubContext;

/* A method: runs @ctx->step; *ret_message gets one line for the report, on
 * success and on failure (caller frees).  Returns FALSE with @error set when
 * the step failed: the device is then quarantined. */
typedef gboolean (*AvScrubMethodFunc)(AvScrubContext *ctx, char **ret_message, GError **error);

/* A step's "coverage": how much of the device's memory it cleared.
 * {"cleared": bytes of the device's memory written with zeros (0 when the
 * step's writes are known not to reach its memory), "read_back": of them,
 * bytes read back as zero, "memory": the device's memory in bytes or null
 * when unknown, "memory_source": "profile", "resizable-bar" (the largest
 * size its Resizable BAR capability offers), "reported" (by the step's
 * program) or null, "source": "measured" (by accelvirt) or "reported" (by
 * the step's program, in AV_SCRUB_COVERAGE_PREFIX lines), "note": why the
 * writes count for less, or absent}.  New reference. */
json_t *av_scrub_coverage_new(guint64 cleared, guint64 read_back, guint64 memory, const char *memory_source,
                              const char *source, const char *note);

/* Reads the AV_SCRUB_COVERAGE_PREFIX lines of @text (a scrub program's
 * output, a scrub VM's console): "accelvirt-coverage: device=ADDR
 * method=NAME cleared=BYTES memory=BYTES|unknown verified=yes|no ..." (more
 * key=value pairs may follow).  Lines whose device is not @address (when
 * @address is not NULL; a line without "device=" counts for any) and lines
 * that do not parse are ignored.  The lines counted add up: cleared and
 * memory summed (memory unknown when one says so), read back all of
 * cleared only when every line says verified=yes.  Returns a coverage
 * (av_scrub_coverage_new(), source "reported"), or NULL when no line
 * counts. */
json_t *av_scrub_coverage_parse(const char *text, const char *address);

/* Opens the PCI device @address of @ctx's target through VFIO: through
 * accelvirt's hold of its group when the scrub holds it (@ctx->held:
 * ops->device_open_held on av_hold_fd()), else with ops->device_open.
 * Returns 0 and the handle (close it with ops->device_close) or -errno as
 * device_open; -ENOLCK, *ctx->hold_lost set and nothing opened when the
 * scrub holds the group and the hold is gone: never an open without it. */
int av_scrub_device_open(const AvScrubContext *ctx, const char *address, AvDeviceHandle **ret_handle);

/* The held group file for a program a step runs (its fd 3): -1 and TRUE
 * when the scrub does not hold the target's group; a new descriptor in
 * *ret_fd (caller closes) when it does; FALSE with @error,
 * *ctx->hold_lost set, when it holds it and the hold is gone: the program
 * must not run. */
gboolean av_scrub_hold_fd(const AvScrubContext *ctx, int *ret_fd, GError **error);

/* The one helper for what must run with the target's group not held by
 * accelvirt (another program opens it, or the device leaves vfio-pci for
 * a moment): av_scrub_unhold() drops the hold, *ret_was_held saying
 * whether there was a live one (FALSE and nothing done when the scrub does
 * not hold the group; FALSE with @error, *ctx->hold_lost set, when it does
 * and the hold is gone already); only then does av_scrub_rehold() take it
 * again, waiting up to @grace_us while the group is busy (a scrub VM's QEMU
 * on its way out), then fails with AV_ERROR_IN_USE: another process opened
 * the group meanwhile (the message names it), and the device must be
 * quarantined. */
gboolean av_scrub_unhold(const AvScrubContext *ctx, gboolean *ret_was_held, GError **error);
gboolean av_scrub_rehold(const AvScrubContext *ctx, gint64 grace_us, GError **error);
/* How long av_scrub_rehold() waits after a "vm" step. */
#define AV_SCRUB_REHOLD_GRACE_US (2 * G_USEC_PER_SEC)

/* TRUE when the hold of @ctx's held scrub is live (av-scrub-device.c, as the
 * helpers above). */
gboolean av_scrub_hold_is_live(const AvScrubContext *ctx);
/* Marks @ctx's scrub as having lost its hold. */
void av_scrub_hold_mark_lost(const AvScrubContext *ctx);

gboolean av_scrub_method_vfio_zero(AvScrubContext *ctx, char **ret_message, GError **error);
gboolean av_scrub_method_reset(AvScrubContext *ctx, char **ret_message, GError **error);
gboolean av_scrub_method_rom_check(AvScrubContext *ctx, char **ret_message, GError **error);
gboolean av_scrub_method_vm(AvScrubContext *ctx, char **ret_message, GError **error);
gboolean av_scrub_method_usb_reset(AvScrubContext *ctx, char **ret_message, GError **error);
gboolean av_scrub_method_usb_reauthorize(AvScrubContext *ctx, char **ret_message, GError **error);
gboolean av_scrub_method_usb_power_cycle(AvScrubContext *ctx, char **ret_message, GError **error);
gboolean av_scrub_method_program_base(AvScrubContext *ctx, char **ret_message, GError **error);

/* Puts @func (NULL: none) in the method table for @method and returns what
 * was there.  For av_scrub_vm_register() and tests; a step whose method has
 * no function fails (AV_ERROR_FAILED). */
AvScrubMethodFunc av_scrub_method_set(AvScrubMethod method, AvScrubMethodFunc func);

/* --- the core of "vfio-zero" (av-scrub-zero.c), for tests and bench --- */

/* The bytes mapped at a time: a window.  Its size hardly matters to speed
 * (bench-zero: windows of 2 MiB to the whole 512 MiB zero alike); 64 MiB
 * bounds what one window holds of page tables (128 KiB at 4 KiB a page). */
#define AV_ZERO_WINDOW (64u * 1024 * 1024)
/* The bytes of one pwrite()/pread() when a window is not mapped. */
#define AV_ZERO_CHUNK (1024u * 1024)
/* The page of the sampled verification. */
#define AV_ZERO_PAGE 4096u
/* Verify "sample" reads one page in this many. */
#define AV_ZERO_SAMPLE_STRIDE 64u
/* The least time between two progress calls (200 ms: 5 a second). */
#define AV_ZERO_PROGRESS_INTERVAL_US (200 * 1000)

typedef enum {
    AV_ZERO_VERIFY_NONE,         /* zero only (the benchmark's baseline) */
    AV_ZERO_VERIFY_SAMPLE,
    AV_ZERO_VERIFY_FULL,
} AvZeroVerify;

/* Progress: @done of @total bytes of work, where the work of a region is its
 * bytes written plus the bytes the verification reads back. */
typedef void (*AvZeroProgressFunc)(gpointer data, guint64 done, guint64 total);

/* A test seam: called after the bytes [@offset, @offset + @len) of @fd (an
 * offset in the fd, not in the region) were written with zeros and before
 * they are read back, so that a test can leave a byte non-zero the way a
 * write that did not stick would.  Never set outside tests. */
typedef void (*AvZeroWriteHook)(gpointer data, int fd, guint64 offset, guint64 len);

typedef struct {
    AvZeroVerify verify;
    guint64 window;              /* bytes per mmap window; 0: AV_ZERO_WINDOW; rounded up to pages */
    AvZeroProgressFunc progress; /* or NULL; at most every AV_ZERO_PROGRESS_INTERVAL_US, and at the end */
    gpointer progress_data;
    AvZeroWriteHook after_write; /* tests only, else NULL */
    gpointer after_write_data;
} AvZeroOptions;

typedef struct {
    guint64 zeroed;              /* bytes written (the region's size on success) */
    guint64 mmap_bytes;          /* of them, through a mapping */
    guint64 pwrite_bytes;        /* of them, with pwrite() */
    guint64 verified;            /* bytes read back */
} AvZeroResult;

/* Zeroes the region of @size bytes at @offset of @fd and verifies it as
 * @options says (NULL: verify full, default window, no progress), through
 * windows of mmap when @mmap_ok and @offset is page-aligned, else (and for a
 * window whose mmap fails) with pwrite().  Borrows @fd.  Stores the facts in
 * *ret_result (may be NULL; filled in on failure too, with what was done).
 * Returns FALSE with AV_ERROR_IO when a write or read fails, AV_ERROR_FAILED
 * "non-zero byte 0xXX at offset 0xOFF of the region" when the verification
 * finds one. */
gboolean av_scrub_zero_region(int fd, guint64 offset, guint64 size, gboolean mmap_ok,
                              const AvZeroOptions *options, AvZeroResult *ret_result, GError **error);

/* The bytes that @verify reads back of a region of @size bytes. */
guint64 av_scrub_zero_verify_bytes(guint64 size, AvZeroVerify verify);

/* TRUE when verify "sample" reads page @page (0-based) of a region of
 * @n_pages pages (the last one possibly partial). */
gboolean av_scrub_zero_page_sampled(guint64 page, guint64 n_pages);

G_END_DECLS
