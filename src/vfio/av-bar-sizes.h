/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the write-ahead record of Resizable BAR sizes.
 *
 * The scrub method "vfio-zero" with "resize" grows a device's Resizable BARs
 * to their largest size (av_vfio_resize_bar()) to clear all of its memory,
 * then puts them back.  A process killed in between would leave the BARs
 * grown, the device maybe off vfio-pci: what the next tenant gets is then
 * not the device the pool recorded.  So, before the first resize, the size
 * of every BAR about to grow is written, fsync'd, to a record of its own,
 * STATE_DIR/bar-sizes/SHA256(IDENTITY).json:
 *
 *   {"identity", "address", "since" (Unix seconds), "bars": [{"bar", "bit"
 *    (the size to go back to, 2^(bit + 20) bytes, as resourceN_resize
 *    takes it), "size" (that size in bytes), "grown" (the size it grows to)}],
 *    "error" (why the last try to put them back failed, or null)}
 *
 * Its writer holds the file's flock(2) lock as long as it lives (it is
 * written with av_file_write_atomic_held()), and removes it once every BAR
 * is back and the kernel says so.  Whoever takes the lock of a record that
 * is still there knows its writer died before that: it puts the sizes back
 * (av_bar_record_restore()), and removes the record only once they are. */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "util/av-root.h"
#include "vfio/av-kernel.h"

G_BEGIN_DECLS

/* The folder of the records under the state dir. */
#define AV_BAR_SIZES_DIR "bar-sizes"

/* One BAR of a record. */
typedef struct {
    guint bar;                   /* 0-5 */
    guint bit;                   /* the size to go back to: 2^(bit + 20) bytes */
    guint64 grown;               /* the size it is grown to, in bytes */
} AvBarSize;

/* A record, read or written, with its lock held. */
typedef struct {
    char *identity;
    char *address;
    GArray *bars;                /* AvBarSize */
    char *error;                 /* the last failure to put them back, or NULL */
    gint64 since;
    /* private */
    char *state_dir;
    char *path;
    int fd;                      /* the lock, or -1 */
} AvBarRecord;

/* Closes the record's lock (a record left in place is then taken over by
 * the next reader) and frees it.  NULL is a no-op. */
void av_bar_record_free(AvBarRecord *record);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvBarRecord, av_bar_record_free)

/* The record file of the pool device @identity under @state_dir.  Caller
 * frees. */
char *av_bar_record_path(const char *state_dir, const char *identity);

/* Whether a record of @identity is in @state_dir (held or not). */
gboolean av_bar_record_exists(const char *state_dir, const char *identity);

/* Writes, fsync'd, the record of the PCI function @address (pool device
 * @identity) whose @n_bars BARs @bars are about to be resized, and holds its
 * lock.  AV_ERROR_IN_USE when a record of @identity is already there (its
 * sizes must be put back first: av_bar_record_take()).  Copies its
 * arguments.  Returns the record (caller removes or frees it), or NULL. */
AvBarRecord *av_bar_record_write(const char *state_dir, const char *identity, const char *address,
                                 const AvBarSize *bars, guint n_bars, GError **error);

/* Takes the record of @identity left by a writer that is gone: TRUE with
 * the record in *ret_record, its lock held (caller frees), or NULL when
 * there is none.  Waits up to @wait_ms for the lock; FALSE with
 * AV_ERROR_LOCKED when another process holds it still (the writer lives, or
 * another process is putting the sizes back), AV_ERROR_INVALID_INPUT when
 * the file is no record (kept: the sizes are unknown). */
gboolean av_bar_record_take(const char *state_dir, const char *identity, int wait_ms, AvBarRecord **ret_record,
                            GError **error);

/* Every record of @state_dir whose writer is gone, each taken (lock held),
 * in an array (caller frees; av_bar_record_free() on each).  Temporary
 * files of writers that died before their record was in place are removed
 * (no BAR was resized then).  A file that is no record is kept and named in
 * @problems (char*, may be NULL). */
GPtrArray *av_bar_records_take_orphaned(const char *state_dir, GPtrArray *problems);

/* Puts the BARs of @record back to their recorded sizes: each BAR whose
 * size now (the kernel's "resource" line) is another goes through
 * av_vfio_resize_bar() (unbound from vfio-pci, resized, probed back,
 * checked); a device left on no driver by a resize cut short is first
 * probed back onto vfio-pci (its driver_override is vfio-pci).  The caller
 * has dropped accelvirt's hold of the device's group.  Appends to @done
 * one {"bar", "size" (recorded), "was" (found, bytes), "resized"} per BAR
 * looked at.  Tries them all; FALSE with the first failure (AV_ERROR_FAILED
 * for a device on another driver than vfio-pci: never taken from a host
 * driver). */
gboolean av_bar_record_restore(const AvRoot *root, const AvKernelOps *ops, const AvBarRecord *record, json_t *done,
                               GError **error);

/* Keeps @message (NULL: none) as the record's "error", rewritten in place,
 * its lock kept. */
gboolean av_bar_record_set_error(AvBarRecord *record, const char *message, GError **error);

/* Removes the record (fsync'd) and frees it, its lock let go last.  On
 * failure the record is freed all the same (left in place). */
gboolean av_bar_record_remove(AvBarRecord *record, GError **error);

G_END_DECLS
