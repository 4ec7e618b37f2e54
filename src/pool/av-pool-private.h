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

/* "domain 'vm1' (UUID)", "domain UUID", "Nova instance UUID" or "nobody".
 * Caller frees. */
char *av_owner_describe(const AvOwner *owner);

/* TRUE when @a and @b can be the same holder: no identifier that both carry
 * differs. */
gboolean av_owner_compatible(const AvOwner *a, const AvOwner *b);

/* Journals @event about @dev: its identity, kind, address, profile and
 * state, plus the members of @extra (borrowed, may be NULL). */
gboolean av_pool_journal_device(AvPool *pool, const char *event, const AvPoolDevice *dev, json_t *extra,
                                GError **error);

/* The transition behind av_pool_transition() and reconciliation: checks
 * the move against the lifecycle, journals @event (with the members of
 * @extra, borrowed, if not NULL), then changes @dev (av-pool-lifecycle.c). */
gboolean av_pool_transition_event(AvPool *pool, AvPoolDevice *dev, AvDeviceState to, const AvOwner *owner,
                                  const char *reason, const char *event, json_t *extra, GError **error);

/* Sets the AV_ERROR_STATE error "device ... is STATE; cannot move it to
 * TO".  Returns FALSE. */
gboolean av_transition_fail(const AvPoolDevice *dev, AvDeviceState to, GError **error);

/* Claims whose expiry (Unix seconds) is before @now go back to free
 * ("claim-expired"), setting *changed. */
gboolean av_pool_expire_claims(AvPool *pool, gint64 now, gboolean *changed, GError **error);

/* The hex SHA-256 of @len bytes at @data.  Caller frees. */
char *av_journal_hash(const char *data, gsize len);

G_END_DECLS
