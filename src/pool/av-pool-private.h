/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: internals shared by the files of src/pool. */
#pragma once

#include <sys/stat.h>

#include "av-pool.h"
#include "journal/av-journal.h"
#include "util/av-file.h"

G_BEGIN_DECLS

#define AV_POOL_FILE "pool.json"
#define AV_POOL_LOCK_FILE "pool.lock"
#define AV_POOL_VERSION 1

/* pool.json as a pool read it: see AvPool.loaded. */
typedef struct {
    gboolean present;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
} AvPoolFileStamp;

struct AvPool {
    char *state_dir;
    char *pool_path;             /* state_dir/pool.json */
    char *lock_path;             /* state_dir/pool.lock */
    AvPoolMode mode;
    AvLock *lock;                /* NULL only for a read of a missing state dir */
    GPtrArray *devices;          /* AvPoolDevice*, owned, sorted by identity */
    GPtrArray *intents;          /* AvIntent*, owned: write-ahead records of prepares
                                  * (av-pool-intent.c); "intents" in pool.json when not empty */
    GPtrArray *placements;       /* AvPoolPlacement*, owned: what accelvirt placed for each domain
                                  * (av-pool-placement.c); "placements" in pool.json when not empty */
    GPtrArray *usage;            /* AvPoolUsage*, owned: device-hours of the current periods by owner
                                  * (av-pool-usage.c); "usage" in pool.json when not empty */
    char *scanned_boot_id;       /* the boot id of the last whole-host reconcile (av_pool_reconcile()),
                                  * "scanned_boot_id" in pool.json when known, or NULL: until a whole
                                  * scan of this boot, no hook trusts the pool for devices it did not
                                  * read (av_pool_confirm()) */
    char *boot_id;               /* the running boot's id, read under the root by av_pool_upkeep() (every
                                  * holder of the write lock calls it first), or NULL: recorded on each
                                  * device that goes in use (AvPoolDevice.in_use_boot_id); not saved */
    GHashTable *index_disk;      /* AV_POOL_WRITE: the UUIDs the pool.json on disk names (as loaded,
                                  * then as last saved), for the domain index (av-pool-index.c) */

    AvJournal journal;           /* its tail is read at the first append (av_journal_prepare()) */

    /* pool.json as this pool read it (av_pool_file_changed_since()): every
     * save renames a new file over it, so another save changes its inode,
     * or its change time, or its size.  present FALSE: there was none. */
    AvPoolFileStamp loaded;

    /* The host its devices are on (av_pool_set_kernel()): its own copy, or NULL. */
    AvRoot *root;
    const AvKernelOps *ops;
};

/* --- the pool in memory (av-pool.c) --- */

/* A new device with every field empty: state free, numa_node and iommu_group
 * -1.  Caller frees. */
AvPoolDevice *av_pool_device_new(void);

/* The order of pool->devices: by identity (strcmp()), for
 * g_ptr_array_sort(). */
int av_pool_device_cmp(gconstpointer a, gconstpointer b);

/* TRUE when @address is what a device of @kind records: a PCI address, a
 * USB bus path, or for an mdev its parent's name (av_mdev_parent_name_is_valid():
 * a PCI address or a name such as "mtty"). */
gboolean av_pool_address_is_valid(AvDeviceKind kind, const char *address);

/* The form av_pool_address_is_valid() expects, for messages. */
const char *av_pool_address_form(AvDeviceKind kind);

/* TRUE when @identity is "mdev:" and a canonical lower-case UUID. */
gboolean av_identity_is_mdev(const char *identity);

/* Takes over @dev, keeping the devices sorted by identity. */
void av_pool_add_device(AvPool *pool, AvPoolDevice *dev);

/* Gives @dev the identity @identity (copied), keeping the devices sorted. */
void av_pool_rekey_device(AvPool *pool, AvPoolDevice *dev, const char *identity);

/* Removes (and frees) @dev. */
void av_pool_remove_device(AvPool *pool, AvPoolDevice *dev);

/* Unix seconds now. */
gint64 av_pool_now(void);

/* TRUE when @a and @b can be the same holder: no identifier that both carry
 * differs. */
gboolean av_owner_compatible(const AvOwner *a, const AvOwner *b);

/* --- the lifecycle (av-pool-lifecycle.c) --- */

/* Quarantines the free, dirty or scrubbing @dev for its health
 * with @reason, journalled as a transition with "health": true; a dirty
 * device, never scrubbed, is marked unscrubbed.  AV_ERROR_STATE for a
 * device in another state (av-pool-lifecycle.c). */
gboolean av_pool_quarantine_health(AvPool *pool, AvPoolDevice *dev, const char *reason, GError **error);

/* The transition behind av_pool_transition() and reconciliation: checks
 * the move against the lifecycle, journals @event (with the members of
 * @extra, borrowed, if not NULL), then changes @dev (av-pool-lifecycle.c). */
gboolean av_pool_transition_event(AvPool *pool, AvPoolDevice *dev, AvDeviceState to, const AvOwner *owner,
                                  const char *reason, const char *event, json_t *extra, GError **error);

/* A move outside the lifecycle table that its caller has allowed (such as
 * in-use -> free of av_pool_attach_undo(): the guest never had the
 * device), journalled as @event with @extra; the owner rules and the
 * refusal of a device with an identity problem still apply. */
gboolean av_pool_transition_checked(AvPool *pool, AvPoolDevice *dev, AvDeviceState to, const char *event,
                                    json_t *extra, GError **error);

/* Sets the AV_ERROR_STATE error "device ... is STATE; cannot move it to
 * TO".  Returns FALSE. */
gboolean av_transition_fail(const AvPoolDevice *dev, AvDeviceState to, GError **error);

/* Gives @dev the identity problem @problem (copied; a problem it has
 * already stays, journalled "identity-problem" once), and when nobody holds
 * it (free, claimed) quarantines it at once with that reason.  A device in
 * use, dirty or scrubbing keeps its state: its scrub ends in quarantine
 * (av_pool_device_may_be_freed()). */
gboolean av_pool_set_identity_problem(AvPool *pool, AvPoolDevice *dev, const char *problem, GError **error);

/* --- marker files (av-pool-upkeep.c) --- */

/* A marker file of the state dir (release markers, attach marks): a file
 * DIR/HASH-RANDOM.json, HASH the first 32 hex digits of the SHA-256 of
 * @key, holding @content (borrowed), written atomically (mode 0600, DIR
 * made with mode 0700) with its flock(2) lock taken before a byte is
 * written and kept on @fd while the writer lives (av_file_write_atomic_held();
 * readers tell a dead writer's marker with av_file_open_unheld()).  NULL
 * with @error.  Caller closes with av_pool_marker_close(). */
typedef struct {
    int fd;
    char *path;
} AvPoolMarker;
AvPoolMarker *av_pool_marker_write(const char *dir, const char *key, json_t *content, GError **error);
/* Drops the marker's lock (removing the file first when @remove) and frees
 * @marker.  NULL is a no-op. */
void av_pool_marker_close(AvPoolMarker *marker, gboolean remove);


/* --- loading pool.json (av-pool-load.c), for the files that load a part of it:
 * the store (av-pool-store.c), the intents, the placement records --- */

typedef struct {
    const char *path;
    const char *data;
    gsize len;
} AvPoolLoad;

/* What a message about a corrupt pool.json ends with: what to do. */
extern const char av_corrupt_advice[];

/* Sets an AV_ERROR_CORRUPT_STATE error about the value at the JSON path
 * @jpath ("devices/3/owner"), naming the file, line and column.  Returns
 * FALSE. */
gboolean av_pool_load_fail(const AvPoolLoad *ld, GError **error, const char *jpath, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);

/* Checks that @obj has exactly the keys @keys (NULL-terminated), plus any
 * of @optional (NULL-terminated, or NULL for none; none of them a key of
 * @keys: the members are counted by lookups, each name once). */
gboolean av_pool_load_keys_opt(const AvPoolLoad *ld, json_t *obj, const char *jpath, const char *const *keys,
                               const char *const *optional, GError **error);
gboolean av_pool_load_keys(const AvPoolLoad *ld, json_t *obj, const char *jpath, const char *const *keys,
                           GError **error);

/* Reads the non-empty string without NUL (or, with @nullable, null)
 * member @key of @obj into *ret_value (caller frees). */
gboolean av_pool_load_string(const AvPoolLoad *ld, json_t *obj, const char *jpath, const char *key,
                             gboolean nullable, char **ret_value, GError **error);

/* Reads the integer member @key of @obj, from @min to @max. */
gboolean av_pool_load_int(const AvPoolLoad *ld, json_t *obj, const char *jpath, const char *key, gint64 min,
                          gint64 max, gint64 *ret_value, GError **error);

/* Reads an owner object or null at @v. */
gboolean av_pool_load_owner(const AvPoolLoad *ld, json_t *v, const char *jpath, AvOwner **ret_owner,
                            GError **error);

/* --- intents (av-pool-intent.c) --- */

/* The "intents" member of pool.json (@v, may be NULL: none) into
 * @intents (AvIntent*), strictly. */
gboolean av_pool_load_intents(const AvPoolLoad *ld, json_t *v, GPtrArray *intents, GError **error);

/* The intents as pool.json's "intents" array. */
json_t *av_pool_intents_to_json(const GPtrArray *intents);

/* --- placements (av-pool-placement.c) --- */

/* The "placements" member of pool.json (@v, may be NULL: none) into
 * @placements (AvPoolPlacement*), strictly. */
gboolean av_pool_load_placements(const AvPoolLoad *ld, json_t *v, GPtrArray *placements, GError **error);

/* The records as pool.json's "placements" array. */
json_t *av_pool_placements_to_json(const GPtrArray *placements);

/* --- per-owner usage (av-pool-usage.c) --- */

/* One entry of pool.json's "usage": the in-use device-seconds an owner's
 * devices of one profile had in the current @period, those released
 * (the devices in use now are added on reading). */
typedef struct {
    char *project;               /* or NULL */
    char *user;                  /* or NULL; not both NULL */
    char *profile;
    AvLimitPeriod period;        /* day, week or month */
    gint64 start;                /* Unix seconds: the period's start (av_limit_period_start()) */
    gint64 in_use_s;
} AvPoolUsage;

void av_pool_usage_free(AvPoolUsage *usage);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPoolUsage, av_pool_usage_free)

/* Adds the time @dev, in use by its owner since its state_since, was in
 * use in the current day, week and month (at @now) to @pool's usage, and
 * drops the entries of earlier periods.  Called by every transition out of
 * in-use, before it changes @dev; saved with it. */
void av_pool_usage_accrue(AvPool *pool, const AvPoolDevice *dev, gint64 now);

/* The "usage" member of pool.json (@v, may be NULL) into @usage
 * (AvPoolUsage*), strictly; and back. */
gboolean av_pool_load_usage(const AvPoolLoad *ld, json_t *v, GPtrArray *usage, GError **error);
json_t *av_pool_usage_to_json(const GPtrArray *usage);

/* --- the domain index (av-pool-index.c) --- */

/* The domain UUIDs (canonical form only) @pool names: owners of devices,
 * scrub domains, intents, placement records.  A new set (char*, owned). */
GHashTable *av_pool_index_names_of(const AvPool *pool);

/* Before pool.json is replaced by a pool naming @names: every one of them
 * gets its file in the index (made whole first when there is none), synced.
 * FALSE with @error when that cannot be done: the pool must not be saved. */
gboolean av_pool_index_before_save(AvPool *pool, GHashTable *names, GError **error);

/* After pool.json was replaced: the files of UUIDs it no longer names go;
 * @names (a reference is taken) is what the pool on disk names now. */
void av_pool_index_after_save(AvPool *pool, GHashTable *names);

/* --- release holds (av-pool-release-hold.c) --- */

/* At the release of @dev (in use, going dirty), before its move is
 * journalled, on the host the pool names (av_pool_set_kernel(); none:
 * nothing): a PCI function on vfio-pci gets its IOMMU group held
 * (av_hold_take_quick()), a USB stick is held (av_pool_usb_hold()), an
 * mdev accelvirt created is removed.  Held before the move is journalled
 * and saved: killed in between, the device is still in use on disk with a
 * hold the next sweep drops, never dirty without one.  What was done goes
 * into @extra, the move's journal fields: "hold_error", "usb_hold"
 * ("deauthorized", "was-deauthorized", "absent") or "usb_hold_error",
 * "mdev_removed" or "mdev_remove_error".  Such a failure does not stop the
 * release: the device is dirty all the same, the worker's sweep holds it,
 * and its scrub removes the mdev or quarantines it.  Returns NULL, or
 * (caller frees) why the device must be quarantined at once: its group is
 * open in another process, so someone got the device between its
 * domain's end and now. */
char *av_pool_release_hold(AvPool *pool, AvPoolDevice *dev, json_t *extra);

G_END_DECLS
