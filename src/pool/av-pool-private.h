/* accelvirt: internals shared by the files of src/pool. */
#pragma once

#include "av-pool.h"
#include "util/av-file.h"

G_BEGIN_DECLS

#define AV_POOL_FILE "pool.json"
#define AV_POOL_LOCK_FILE "pool.lock"
#define AV_POOL_JOURNAL_FILE "journal.jsonl"
#define AV_POOL_VERSION 1

struct AvPool {
    char *state_dir;
    char *pool_path;             /* state_dir/pool.json */
    char *lock_path;             /* state_dir/pool.lock */
    char *journal_path;          /* state_dir/journal.jsonl */
    AvPoolMode mode;
    AvLock *lock;                /* NULL only for a read of a missing state dir */
    GPtrArray *devices;          /* AvPoolDevice*, owned, sorted by identity */

    /* The journal's tail, read at the first append (av-journal.c). */
    gboolean journal_ready;
    guint64 journal_seq;         /* seq of the last entry, 0 for none */
    char *journal_prev;          /* hex SHA-256 of the last line, "" for none */
};

/* A new device with every field empty: state free, numa_node and iommu_group
 * -1.  Caller frees. */
AvPoolDevice *av_pool_device_new(void);

/* Takes over @dev, keeping the devices sorted by identity. */
void av_pool_add_device(AvPool *pool, AvPoolDevice *dev);

/* Removes (and frees) @dev. */
void av_pool_remove_device(AvPool *pool, AvPoolDevice *dev);

/* The identity a device falls back to when its own identity (DSN, USB
 * serial) is shared with another device of the same scan: the slot or path
 * form of av_pool_identity_pci() ignoring the DSN (a VF: its PF's fallback
 * and "/vfN"), and the port form "usb:VVVV:PPPP@port:BUSPATH" of a USB
 * device.  Caller frees. */
char *av_pool_identity_pci_fallback(const AvHost *host, const AvPciDevice *dev);
char *av_pool_identity_usb_fallback(const AvUsbDevice *dev);

/* Unix seconds now. */
gint64 av_pool_now(void);

/* Makes the journal of @pool ready for appending, once per pool: reads its
 * tail (the last seq and the hash of the last line), ends a torn last line
 * and records it.  AV_ERROR_CORRUPT_STATE when no entry can be appended (not
 * a regular file, NUL bytes or a line over 16 MiB at its end).  A writer's
 * av_pool_open() calls it, so that a journal that cannot take an entry stops
 * a writer before it changes anything (the hook: before it binds a device). */
gboolean av_journal_prepare(AvPool *pool, GError **error);

/* The hex SHA-256 of @len bytes at @data.  Caller frees. */
char *av_journal_hash(const char *data, gsize len);

G_END_DECLS
