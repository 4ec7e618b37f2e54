/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the pool of managed devices, its lock and its journal.
 *
 * The state dir holds:
 *   pool.json      the pool, replaced atomically (temp file, fsync, rename,
 *                  fsync of the directory) on every save;
 *   pool.lock      the flock(2) lock every reader (shared) and writer
 *                  (exclusive) takes;
 *   journal.jsonl  append-only JSON lines, one per transition, fsynced, each
 *                  carrying a sequence number and the SHA-256 of the previous
 *                  line so that the chain can be verified.
 *
 * A pool.json that does not parse is never overwritten: opening fails with
 * AV_ERROR_CORRUPT_STATE and the file is left for the operator.  Leftover
 * "pool.json.tmp.*" files of a writer killed mid-write are ignored (and
 * removed by the next writer).
 *
 * The journal's format, its chain and its torn lines: journal/av-journal.h.
 *
 * Lifecycle (docs/design.md):
 *   free -> claimed -> in-use -> dirty -> scrubbing -> free
 *                                              \-> quarantined -> free (operator)
 *   any state -> missing (not found at a scan; owner kept) -> previous state
 *   claimed -> free (claim dropped or expired); in-use -> dirty (release) */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "journal/av-journal.h"
#include "pci/av-health.h"
#include "pci/av-pci.h"
#include "policy/av-policy.h"
#include "util/av-root.h"
#include "vfio/av-kernel.h"

G_BEGIN_DECLS

typedef enum {
    AV_DEVICE_STATE_FREE,
    AV_DEVICE_STATE_CLAIMED,
    AV_DEVICE_STATE_IN_USE,
    AV_DEVICE_STATE_DIRTY,
    AV_DEVICE_STATE_SCRUBBING,
    AV_DEVICE_STATE_QUARANTINED,
    AV_DEVICE_STATE_MISSING,
} AvDeviceState;

typedef enum {
    AV_DEVICE_KIND_PCI,
    AV_DEVICE_KIND_USB,
    AV_DEVICE_KIND_MDEV,         /* a mediated device: identity "mdev:UUID", address = its parent's
                                  * name in /sys/class/mdev_bus (the PCI address of a PCI parent,
                                  * "mtty" for the mtty sample); in the pool from prepare until
                                  * its release is done */
} AvDeviceKind;

/* Who holds a device. */
typedef struct {
    char *domain_uuid;           /* libvirt domain UUID, or NULL */
    char *domain_name;           /* or NULL */
    char *nova_instance;         /* Nova instance UUID, or NULL */
    char *nova_project;          /* or NULL */
    char *nova_user;             /* or NULL */
} AvOwner;

AvOwner *av_owner_new(const char *domain_uuid, const char *domain_name);
AvOwner *av_owner_copy(const AvOwner *owner);
void av_owner_free(AvOwner *owner);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvOwner, av_owner_free)

/* @owner as pool.json writes it ({"domain_uuid", ...}), or JSON null for
 * NULL.  Caller owns the reference. */
json_t *av_owner_to_json(const AvOwner *owner);

/* An endpoint that moves to vfio-pci with a pool device (same IOMMU group)
 * without being a pool device itself, and the driver to give it back. */
typedef struct {
    char *address;               /* PCI address */
    char *original_driver;       /* or NULL (it was unbound) */
} AvCompanion;

AvCompanion *av_companion_new(const char *address, const char *original_driver);
void av_companion_free(AvCompanion *companion);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvCompanion, av_companion_free)

/* What a device holds as accelvirt last programmed it: the
 * bitstream of the library, when and how it was checked.  The record goes
 * (NULL: unknown) when a tenant had the device (its release), and when a
 * programming starts: only a programming that finished writes it. */
typedef struct {
    char *sha256;                /* hex SHA-256 of the bitstream */
    char *name;                  /* its library name then, or NULL */
    gint64 since;                /* Unix seconds */
    char *by;                    /* who programmed it: "define", "start", "attach", "operator", "scrub" */
    char *verified;              /* how it was checked, one sentence ("the program exited 0", "the verify
                                  * command exited 0") */
} AvProgrammed;

AvProgrammed *av_programmed_new(const char *sha256, const char *name, const char *by, const char *verified);
void av_programmed_free(AvProgrammed *programmed);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvProgrammed, av_programmed_free)

typedef struct {
    char *identity;              /* stable identity, see av_pool_identity_pci() */
    AvDeviceKind kind;
    char *address;               /* last seen PCI address or USB bus path; an mdev's parent name */
    char *profile;               /* profile name */
    AvDeviceState state;
    AvDeviceState state_before_missing; /* meaningful when state is MISSING */
    AvOwner *owner;              /* NULL when nobody holds it */
    gint64 state_since;          /* Unix seconds of the last transition */
    gint64 first_seen;           /* Unix seconds */
    gint64 last_seen;            /* Unix seconds of the last scan that found it */
    gint64 claim_expires;        /* Unix seconds; 0 = no expiry (claimed only) */
    char *reason;                /* why it is quarantined or missing, or NULL */
    char *reason_before_missing; /* reason to restore when a missing device is found, or NULL */
    char *original_driver;       /* driver to restore on release, or NULL */
    int numa_node;               /* -1 unknown */
    int iommu_group;             /* -1 none */
    GPtrArray *companions;       /* AvCompanion*: the other endpoints of its IOMMU group that no
                                  * profile pools (a GPU's audio function), bound to vfio-pci with
                                  * it at prepare and restored with it after the scrub; never NULL.
                                  * In pool.json ("companions") only when not empty. */
    gboolean created;            /* mdev: accelvirt created it at prepare (removed at release);
                                  * in pool.json ("created") for mdevs only */
    char *rom_sha256;            /* PCI: hex SHA-256 of the option ROM enrolled when the device was
                                  * known good (`accelvirt enroll`), AV_ROM_NONE for a device
                                  * without a ROM, or NULL (not enrolled); in pool.json
                                  * ("rom_sha256") only when set */
    char *scrub_token;           /* while a scrub of the device runs (scrubbing, or quarantined and
                                  * scrubbed by hand): AV_SCRUB_TOKEN_LEN random lower-case hex
                                  * digits that the scrub VM's domain carries (av:scrub), so that
                                  * the hook lets that domain, and no other, have the device, once:
                                  * the hook consumes it (NULL again).  In pool.json ("scrub_token")
                                  * only when set */
    char *identity_problem;      /* why the device may have been tampered with: its
                                  * identity changed while it was out of the pool's hands (claimed,
                                  * in use, dirty, being scrubbed, quarantined), or another device
                                  * suddenly presented it too; NULL when none.  Such a device is never
                                  * freed, claimed or used: it ends quarantined with this reason, and
                                  * only the operator's quarantine clear drops it.  In pool.json
                                  * ("identity_problem") only when set */
    gboolean unscrubbed;         /* quarantined with data a domain left that no scrub has cleared since
                                  * (its group was open elsewhere at its release, a domain got it behind
                                  * accelvirt's back): `quarantine clear` refuses it until a scrub by hand
                                  * (`accelvirt scrub`) passes.  In pool.json ("unscrubbed") only when set;
                                  * dropped by every move to free */
    char *scrub_domain;          /* with the token: the UUID the scrub VM's domain must have; kept
                                  * after the token is consumed, while the scrub runs ("scrub_domain").
                                  * Both are cleared by every transition but to missing and back */
    json_t *last_scrub;          /* what the last scrub of the device did, as its certificate said:
                                  * {"time", "result" ("free" or "quarantined"), "coverage": the
                                  * scrub's coverage (cleared, read_back, memory, fraction,
                                  * verified, text)}; NULL when never scrubbed.  In pool.json
                                  * ("last_scrub") only when set; kept by every transition */
    gboolean release_pending;    /* released by a domain (in use -> dirty or quarantined) whose release
                                  * work is not done: its profile's on_release command has not run.  Every
                                  * release leaves it (the hook's, detach, release, stale, the audit, the
                                  * upkeep); the scrub job runs the command before any scrub step and
                                  * clears it once it passed.  In pool.json ("release_pending") only when set; every move
                                  * to free drops it */
    gboolean claim_programmed;   /* claimed, and a program for the claim's domain started on it (define,
                                  * start, attach; not the operator's own): it may hold that tenant's
                                  * image, so the claim ends dirty, never free (a lapsed claim, an
                                  * undefine).  In pool.json ("claim_programmed") only when set; every
                                  * move but to missing and back drops it */
    AvProgrammed *programmed;    /* PCI: the bitstream it holds (see AvProgrammed), or NULL: unknown or
                                  * never programmed.  In pool.json ("programmed": {"sha256", "name",
                                  * "since", "by", "verified"}) only when set; dropped by a release */
    guint scrub_failures;        /* scrubs of the device that failed (quarantined it) since @failures_since
                                  * (health "scrub_failures"); the worker and `accelvirt
                                  * scrub` count them */
    guint reset_failures;        /* of those, the ones whose failing step was a "reset" */
    gint64 failures_since;       /* Unix seconds: the device's enrolment (`accelvirt enroll` sets the
                                  * counts to 0), else its first_seen.  In pool.json ("failures":
                                  * {"scrub", "reset", "since"}) only when a count is not 0 or
                                  * since is not first_seen (an enrolment); 0 reads as first_seen */
    char *match_ids;             /* PCI: what its profile's match reads, as the last scan of it while it was
                                  * free saw it: "VVVV:DDDD SSSS:ssss CCCCCC RR" (vendor, device,
                                  * subsystem vendor and device, class, revision), or NULL (never seen
                                  * free since this was recorded).  Kept unchanged while it is out of the
                                  * pool's hands: a change then is an identity problem, and its profile
                                  * (the one it was claimed under, whose steps scrub it) is not changed by
                                  * a scan then.  In pool.json ("match_ids") only when set */
    char *in_use_boot_id;        /* in use: the id of the boot (/proc/sys/kernel/random/boot_id) in which
                                  * it went in use, as the holder of the lock read it (av_pool_upkeep()),
                                  * or NULL: not known (a pool written by an older accelvirt, a tree
                                  * without a boot id).  The boot rule of av_pool_upkeep() compares it
                                  * with the running boot's.  In pool.json ("in_use_boot_id") only when
                                  * set, on an in-use device (or one missing since it was in use);
                                  * every other transition drops it */
} AvPoolDevice;

/* Adds the companion @address to @dev, or, when @dev has it already, gives
 * it @original_driver (unless NULL): the group member that moved to
 * vfio-pci with @dev, and what to give it back at release.  The hook's
 * prepare and `accelvirt attach` record their companions so. */
void av_pool_device_add_companion(AvPoolDevice *dev, const char *address, const char *original_driver);

/* The enrolled "hash" of a device that has no option ROM. */
#define AV_ROM_NONE "none"

/* TRUE when @hash is AV_ROM_NONE or 64 lower-case hex digits. */
gboolean av_rom_sha256_is_valid(const char *hash);

void av_pool_device_free(AvPoolDevice *dev);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPoolDevice, av_pool_device_free)

typedef struct AvPool AvPool;

typedef enum {
    AV_POOL_READ,                /* shared lock; av_pool_save() is refused */
    AV_POOL_WRITE,               /* exclusive lock */
} AvPoolMode;

/* Opens the pool in @state_dir (created with mode 0700 for AV_POOL_WRITE if
 * missing), taking the lock for @mode, waiting at most @timeout_ms.  A
 * missing pool.json is an empty pool; AV_POOL_READ of a missing state dir is
 * an empty pool too, and creates nothing.  A writer removes the
 * "pool.json.tmp.*" files left by killed writers.  A writer trusts the
 * claims it reads, so for AV_POOL_WRITE the state dir and pool.json must be
 * owned by the caller (geteuid()) and not writable by group or others, and
 * pool.json must not be a symbolic link.  Returns NULL with
 * AV_ERROR_LOCKED (lock), AV_ERROR_UNSAFE (ownership, mode or symlink above;
 * the message says what to chmod or chown), AV_ERROR_CORRUPT_STATE (pool.json
 * does not parse or has an unknown version; the message names the file, the
 * line and column, and says to move the file away or repair it; for
 * AV_POOL_WRITE also a journal that cannot take an entry: not a regular
 * file, NUL bytes or an overlong line at its end), or AV_ERROR_IO. */
AvPool *av_pool_open(const char *state_dir, AvPoolMode mode, int timeout_ms, GError **error);

/* Lets go of the lock of @pool: what it holds stays, a snapshot that others
 * may change on disk from now on, read-only (a pool opened for writing can
 * no longer be saved, nor its journal written). */
void av_pool_unlock(AvPool *pool);

/* Releases the lock and frees the pool, without saving. */
void av_pool_free(AvPool *pool);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPool, av_pool_free)

/* Writes pool.json atomically.  Requires AV_POOL_WRITE.  Keeps the domain
 * index of the state dir (av_pool_index_names()) true first. */
gboolean av_pool_save(AvPool *pool, GError **error);

/* Whether the pool of @state_dir names the domain @domain_uuid (as the
 * owner of a device, a scrub domain, a prepare's write-ahead record or a
 * placement record), told by the domain index (STATE/domains/UUID, see
 * av-pool-index.c) with two or three stat(2)s, without the lock and
 * without reading pool.json: for the hook's calls about domains that have
 * nothing to do with accelvirt.  NO is sure: no pool there names it at the
 * moment of the last stat.  UNKNOWN: a pool saved before the index
 * existed, a UUID not in canonical form, an error. */
typedef enum {
    AV_POOL_NAMES_NO,
    AV_POOL_NAMES_YES,
    AV_POOL_NAMES_UNKNOWN,
} AvPoolNames;

AvPoolNames av_pool_index_names(const char *state_dir, const char *domain_uuid);

const char *av_pool_state_dir(const AvPool *pool);

/* The devices, sorted by identity.  Borrowed. */
GPtrArray *av_pool_devices(const AvPool *pool);

/* Lookups; borrowed results or NULL. */
AvPoolDevice *av_pool_find(const AvPool *pool, const char *identity);
AvPoolDevice *av_pool_find_address(const AvPool *pool, AvDeviceKind kind, const char *address);

/* What av_pool_find_address(@pool, AV_DEVICE_KIND_PCI, address) answers, for
 * every address at once: address -> AvPoolDevice*, both borrowed from
 * @pool and valid until it changes.  One pass over the pool, for callers
 * that look up many addresses (the allocator).  Caller unrefs. */
GHashTable *av_pool_pci_index(const AvPool *pool);

/* Moves @dev to @to, checking the transition against the lifecycle above
 * (AV_ERROR_STATE naming the device, both states and the owner otherwise),
 * setting the owner (a copy of @owner; NULL keeps the current owner for
 * claimed->in-use and in-use->dirty, and clears it on ->free), @reason
 * (quarantined, missing), state_since, and appending a "transition" journal
 * entry.  The journal entry is written before the caller saves the pool.
 * free->claimed needs an @owner (AV_ERROR_INVALID_INPUT); an @owner that
 * names another holder than the current one (domain UUID, Nova instance) is
 * refused with AV_ERROR_IN_USE.  claim_expires is cleared on leaving claimed
 * (kept through claimed->missing->claimed).  On failure @dev is unchanged. */
gboolean av_pool_transition(AvPool *pool, AvPoolDevice *dev, AvDeviceState to,
                            const AvOwner *owner, const char *reason, GError **error);

/* The prepare's move, the hook's and `accelvirt attach`'s alike: @dev to
 * in-use for @owner, free -> claimed -> in-use, or claimed -> in-use (each
 * step an av_pool_transition(); the claim's journal line is made durable by
 * the in-use line's fsync, one fsync for both). */
gboolean av_pool_take(AvPool *pool, AvPoolDevice *dev, const AvOwner *owner, GError **error);

/* Quarantines the dirty, scrubbing or quarantined @dev at once with
 * @reason, journalled as a transition with "unscrubbed": true (someone
 * else had its VFIO group open when accelvirt came to hold it:
 * never freed, and the operator sees why).  AV_ERROR_STATE for a device in
 * another state. */
gboolean av_pool_quarantine_unscrubbed(AvPool *pool, AvPoolDevice *dev, const char *reason, GError **error);

/* Quarantines the free @dev with @reason because the host shows it used
 * behind accelvirt's back (@what, such as "vgpu": a vGPU accelvirt did not
 * make), journalled with "found" and "unscrubbed": true: whoever used it
 * may have left something, so a scrub comes before any clear.
 * AV_ERROR_STATE for a device that is not free. */
gboolean av_pool_quarantine_found(AvPool *pool, AvPoolDevice *dev, const char *what, const char *reason,
                                  GError **error);

/* Kernel-enforced holds (av-hold.h) follow the pool: every PCI device
 * that is dirty or quarantined and bound to vfio-pci gets a hold of its
 * IOMMU group (scrubbing ones keep theirs: the worker drops and takes it
 * around steps that need the group elsewhere, so the sweep neither takes
 * nor drops those); every hold whose group has no dirty, scrubbing or
 * quarantined PCI device (free, claimed, in use, missing or gone) is
 * dropped.  First, every record that names no live holder of this boot
 * (another boot's, one without a boot id, a holder gone) is removed
 * (av_hold_prune()).  Under the pool's lock (AV_POOL_WRITE).  Does all it can;
 * returns FALSE with an error naming every hold it could not take or drop
 * (one "; "-separated sentence).  The pool is not changed: a group found
 * open elsewhere is the caller's to act on (the worker's scrub finds it,
 * av_scrub_group_released()). */
gboolean av_pool_holds_sync(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, GError **error);

/* Drops the hold of @dev's IOMMU group (av_hold_drop()) unless another
 * PCI device of the group is still dirty, scrubbing or quarantined.  For
 * the moves to free (the worker's, `accelvirt quarantine clear`), after the
 * save. */
gboolean av_pool_hold_drop_device(AvPool *pool, const AvRoot *root, const AvPoolDevice *dev, GError **error);

/* Whether @dev's state is one the kernel must refuse too (dirty, scrubbing,
 * quarantined) and it is a PCI function with an IOMMU group. */
gboolean av_pool_device_wants_hold(const AvPoolDevice *dev);

/* USB sticks and mdevs: what holds them between their release and their
 * scrub (av-pool-release-hold.c). */

/* Names the host the pool's devices are on, where av_pool_release_device()
 * acts on what it releases (a PCI function's IOMMU group held, a USB stick
 * de-authorized, an mdev accelvirt created removed): the pool keeps a copy
 * of @root; @ops is a static table.  av_pool_upkeep()
 * sets them, so every holder of the write lock has them; a pool without
 * them (a test of the pool alone) changes only itself at a release. */
void av_pool_set_kernel(AvPool *pool, const AvRoot *root, const AvKernelOps *ops);

/* Whether @dev is a USB stick the kernel must refuse (dirty, scrubbing,
 * quarantined), at a port the pool knows. */
gboolean av_pool_usb_wants_hold(const AvPoolDevice *dev);

/* Holds the USB stick @dev: writes 0 to the "authorized" of the device at
 * the port the pool recorded presenting its identity (or, there, one with
 * its vendor id that presents no identity the pool knows: a tenant's
 * firmware may have changed the rest), unless it reads 0 already, and reads
 * it back (av_usb_authorized_set()).  Never a device at another port.
 * *ret_done (static): "deauthorized", "was-deauthorized" or "absent" (no
 * such device at that port: nothing to hold until it comes back).  FALSE
 * with @error when the write or the read back fails. */
gboolean av_pool_usb_hold(const AvPool *pool, const AvRoot *root, const AvKernelOps *ops, const AvPoolDevice *dev,
                          const char **ret_done, GError **error);

/* Authorizes the USB stick @dev again on its way to free (from
 * av_pool_device_restore()): the device at the port the pool recorded
 * presenting its identity, read back as authorized.  FALSE with @error
 * when it is not there or stays de-authorized: then it is not freed. */
gboolean av_pool_usb_unhold(const AvRoot *root, const AvKernelOps *ops, const AvPoolDevice *dev, GError **error);

/* The sweep of the USB sticks (from av_pool_holds_sync()): every stick
 * that wants a hold (av_pool_usb_wants_hold()) and is found authorized is
 * de-authorized again (av_pool_usb_hold()), except a scrubbing one whose
 * scrub runs (its per-device scrub lock is taken: the scrub's steps
 * authorize it for themselves).  Scans the USB devices only when some
 * stick wants a hold.  Does all it can; FALSE with an error naming every
 * stick it could not hold. */
gboolean av_pool_usb_holds_sync(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, GError **error);

/* The file of the per-device scrub lock of @identity in @state_dir
 * (av_scrub_lock_take() takes it).  Caller frees. */
char *av_pool_scrub_lock_path(const char *state_dir, const char *identity);

/* TRUE when the mdev @uuid is one accelvirt created and released, not
 * yet removed from the pool (dirty, scrubbing or quarantined). */
gboolean av_pool_mdev_is_released(const AvPool *pool, const char *uuid);

/* Makes every mdev parent of @host that still carries an mdev accelvirt
 * created and released (dirty, scrubbing or quarantined: not removed yet)
 * offer no instance of any type (available_instances 0 in @host, the
 * caller's scan), so that no new mdev is made on it before the vendor
 * driver has the released one's memory back.  Returns how many types it
 * took instances from. */
guint av_pool_mdev_parents_block(const AvPool *pool, AvHost *host);

/* Whether @sha256 may be enrolled as the option ROM hash of @dev, without
 * changing anything: @dev must be a PCI device (else AV_ERROR_INVALID_INPUT)
 * that nobody holds, free or quarantined (else AV_ERROR_STATE: only such a
 * device can be vouched for; a quarantined one stays quarantined, so a
 * firmware update goes quarantined -> enrolled -> cleared without the device
 * ever being claimable), and @sha256 must pass av_rom_sha256_is_valid()
 * (else AV_ERROR_INVALID_INPUT).  A hash that differs from the one already
 * enrolled replaces it only with @replace (else AV_ERROR_STATE, naming both
 * hashes): re-enrollment is deliberate.  With @sha256 NULL, checks @dev
 * alone (before its ROM is measured). */
gboolean av_pool_enroll_check(const AvPoolDevice *dev, const char *sha256, gboolean replace, GError **error);

/* Records @sha256 as the option ROM hash of @dev after av_pool_enroll_check(),
 * journalling "enrolled" with the hash, the one it replaces ("previous",
 * null when none), the device's state and @operator_name, and sets its
 * failure counts to 0 and failures_since to now (the counts it
 * drops are journalled as "failures_reset" when not 0).  The hash already
 * enrolled is no change: nothing is journalled.  Requires AV_POOL_WRITE. */
gboolean av_pool_enroll(AvPool *pool, AvPoolDevice *dev, const char *sha256, gboolean replace,
                        const char *operator_name, GError **error);

/* An operator's scrub by hand (`accelvirt scrub`): moves a free or dirty
 * @dev to scrubbing, so that nothing claims it meanwhile, journalling a
 * "transition" entry that names @operator.  The scrub then ends as the
 * worker's does (scrubbing -> free or quarantined).  AV_ERROR_STATE for any
 * other state. */
gboolean av_pool_scrub_begin(AvPool *pool, AvPoolDevice *dev, const char *operator_name, GError **error);

/* Gives @dev, which a scrub is about to run on (scrubbing, or quarantined
 * and scrubbed by hand), the scrub token @token (av_scrub_token_random())
 * and a fresh random UUID for its scrub VM's domain, replacing earlier
 * ones; the caller saves the pool.  AV_ERROR_STATE for another state. */
gboolean av_pool_scrub_token_set(AvPoolDevice *dev, const char *token, GError **error);

/* TRUE when @dev carries a scrub token not consumed yet, @token is that
 * token (compared in constant time) and @domain_uuid is the UUID made with
 * it. */
gboolean av_pool_scrub_token_matches(const AvPoolDevice *dev, const char *token, const char *domain_uuid);

/* The scrub VM got @dev: its token may not be used again (its scrub
 * domain's UUID stays, for the hook's later calls). */
void av_pool_scrub_token_consume(AvPoolDevice *dev);

/* The scrub of @dev is over without a transition (a quarantined device
 * scrubbed by hand stays quarantined): its token and scrub domain go. */
void av_pool_scrub_token_clear(AvPoolDevice *dev);

/* TRUE when @domain_uuid is the scrub domain made for the scrub running on
 * @dev (the token may be used up already). */
gboolean av_pool_is_scrub_domain(const AvPoolDevice *dev, const char *domain_uuid);

/* Gives the pool device @dev back to the host as its profile @profile
 * says, once it is clean: the worker after a scrub that passed, the
 * operator's quarantine clear.  A PCI device whose restore_driver is
 * on-release goes back to dev->original_driver (NULL: no driver; "vfio-pci":
 * it stays), then each of its companions to its own original driver;
 * under keep-vfio everything stays on vfio-pci.  An mdev accelvirt created
 * (dev->created) is removed from the host.  Other devices are left alone.
 * Changes nothing in the pool: the caller moves @dev to free and, after an
 * on-release restore, empties dev->companions; a created mdev leaves the
 * pool (av_pool_remove()).  Stops at the first failure, with an error naming
 * the driver and the address ("restoring the driver 'nvidia' of
 * 0000:17:00.0 failed: ..."); what was restored before stays restored, and
 * a second call does the rest. */
gboolean av_pool_device_restore(const AvRoot *root, const AvKernelOps *ops, const AvProfile *profile,
                                const AvPoolDevice *dev, GError **error);

/* The operator's release of a quarantined @dev once checked: gives it back
 * to the host with av_pool_device_restore() (its profile is looked up in
 * @policy), then moves it to free, journalling "cleared" with @operator_name,
 * the reason it was quarantined ("quarantined_for"), the profile's
 * "restore_driver" and where the device is left: "driver" and "companions"
 * ([{address, driver}]) of a PCI device (on-release: the original drivers;
 * keep-vfio: the ones they are on, left alone; null: no driver),
 * "mdev_removed" of an mdev.
 * After an on-release restore dev->companions is emptied; a created mdev
 * then leaves the pool ("removed"), and @dev is freed.  On success
 * *ret_cleared (may be NULL; caller owns it) gets the facts of the "cleared"
 * entry plus "removed_from_pool".  AV_ERROR_STATE when @dev is not
 * quarantined, AV_ERROR_POLICY when its profile is not in @policy.  When the
 * restore fails, @dev stays quarantined and the pool unchanged; a
 * "clear-failed" entry journals the same facts and the "error", and the
 * error (with the restore's code) says that the device stays quarantined.
 * The caller saves the pool.  Requires AV_POOL_WRITE. */
gboolean av_pool_clear_quarantine(AvPool *pool, AvPoolDevice *dev, const AvRoot *root, const AvKernelOps *ops,
                                  const AvPolicy *policy, const char *operator_name, json_t **ret_cleared,
                                  GError **error);

/* FALSE with AV_ERROR_UNSAFE (the reason, and what the operator does)
 * when @dev carries an identity problem: it may not be freed after its
 * scrub, whatever the scrub said.  TRUE otherwise. */
gboolean av_pool_device_may_be_freed(const AvPoolDevice *dev, GError **error);

/* Binds the free or quarantined PCI device @dev of a "keep-vfio" profile
 * and the other endpoints of its IOMMU group, @members (char* addresses,
 * @dev's own included, checked by the caller with av_vfio_group_check()),
 * to vfio-pci, or the variant @vfio_driver (its profile's "vfio_driver",
 * NULL for auto) or the kernel offers (av_vfio_choose_driver_or_plain();
 * vfio-pci for a quarantined @dev), where a reboot left them on another
 * driver (or none) (av_vfio_bind()), and journals "vfio-rebound" (identity, address,
 * "bound": [{"address", "driver": the one it was on}], "by": "reconcile").
 * On success stores that "bound" array (empty when every member was on
 * vfio-pci already; nothing journalled then) in *ret_bound (caller
 * frees).  When a bind fails, the members it bound go back to their
 * drivers, "vfio-rebind-failed" is journalled (the address and the error),
 * and *ret_failure (caller frees) says what failed, *ret_bound untouched.
 * FALSE with @error only when the journal cannot be written.  The pool
 * itself does not change. */
gboolean av_pool_rebind_vfio(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, AvPoolDevice *dev,
                             const GPtrArray *members, const char *vfio_driver, json_t **ret_bound,
                             char **ret_failure, GError **error);

/* Health (accelvirt-policy(5) HEALTH).  Reads @dev's AER
 * counters and link under @root (PCI devices; others have none) and judges
 * them, with its failure counts, against @profile's "health" limits.  Over
 * a limit: @dev is quarantined with the reason ("health: 2 fatal AER errors,
 * the profile allows 0"), journalled ("health" then the transition), and
 * *@ret_quarantined is set; a "warn" finding is journalled only, and
 * returned in *@ret_warning (caller frees; may be NULL).  Only free, dirty
 * and scrubbing devices are judged (the worker calls it just before it
 * frees a device, reconcile on free devices); other states and a profile
 * without "health" are left alone (TRUE).  A device whose health cannot be
 * read while its profile has limits is quarantined too (refuse, never free).
 * FALSE only when the pool cannot be changed (journal, transition). */
gboolean av_pool_health_check(AvPool *pool, AvPoolDevice *dev, const AvProfile *profile, const AvRoot *root,
                              gboolean *ret_quarantined, char **ret_warning, GError **error);

/* The verdict of av_pool_health_judge(). */
typedef enum {
    AV_HEALTH_OK,                /* within every limit, or nothing judged */
    AV_HEALTH_WARN,              /* a "warn" finding (a degraded link with "degraded_link": "warn") */
    AV_HEALTH_OVER,              /* over a limit: to be quarantined */
} AvHealthVerdict;

/* "ok", "warn" or "over". */
const char *av_health_verdict_to_string(AvHealthVerdict verdict);

/* Judges @health (read by av_pci_health_read(); NULL when it could not be
 * read) and @dev's failure counts against @profile's "health" limits,
 * changing nothing.  *@ret_findings (caller frees; NULL for AV_HEALTH_OK)
 * gets the findings as one sentence, those over a limit first, such as
 * "2 fatal AER errors, the profile allows 0".  A profile without "health"
 * (or NULL) is AV_HEALTH_OK; AER limits are not judged on a device that
 * reports no AER, the link not on one without a link; unreadable health
 * under limits is AV_HEALTH_OVER. */
AvHealthVerdict av_pool_health_judge(const AvPoolDevice *dev, const AvProfile *profile, const AvPciHealth *health,
                                     char **ret_findings);

/* @health as JSON: {"aer": {"correctable", "nonfatal", "fatal"} or null,
 * "link": {"width", "max_width", "speed_gts", "max_speed_gts", "from",
 * "degraded"} or null}.  Caller owns the reference. */
json_t *av_pool_health_to_json(const AvPciHealth *health, gboolean speed_too);

/* Counts a failed scrub of @dev (@reset: its failing step was a reset) in
 * its failure counts; the caller saves the pool. */
void av_pool_count_scrub_failure(AvPoolDevice *dev, gboolean reset);

/* Reserves @dev (free, or already claimed by the same owner) for @owner until
 * @expires (Unix seconds; 0: no expiry), journalling "claimed".  A claim
 * that expires before the domain starts goes back to free at the next
 * reconcile ("claim-expired"). */
gboolean av_pool_claim(AvPool *pool, AvPoolDevice *dev, const AvOwner *owner, gint64 expires, GError **error);

/* Reconciles the pool with a fresh scan: every device of @host that a profile
 * of @policy matches is added as free (journal "added") or, when its identity
 * is known, has its address, profile and last_seen updated (journal
 * "readdressed" when the address changed: BDF re-enumeration).  A pooled
 * device no longer found becomes missing (claims and owner kept); a missing
 * device found again returns to its previous state.  A pooled device no
 * profile matches any more stays in the pool, with reason "unmanaged", if it
 * is held; a free one is removed (journal "removed").  Claims whose expiry
 * has passed go back to free (journal "claim-expired").  What a profile
 * matches is av_policy_match_pci() / av_policy_match_usb() and nothing else.
 * Devices of the scan that share an identity each get their fallback (slot,
 * path or port) identity, with one warning naming them; devices sharing even
 * that are kept out of the pool with a warning (a pooled device of that
 * identity becomes missing), never merged.
 * Identities under attack (a tenant controls its card's
 * firmware, hence its DSN and subsystem ids): a pooled device not found
 * under its identity whose address now holds a device of an identity the
 * pool does not know follows that device ("identity-changed": its entry
 * takes the new identity, so the address is never re-added as free) when
 * it was out of the pool's hands (claimed, in use, dirty, scrubbing,
 * quarantined), and gets an identity problem; so do all the devices of a
 * scan that suddenly share an identity the pool had for one device (a DSN
 * copied onto another card: the copy and the original are both refused).
 * A device with an identity problem that is free or claimed goes to
 * quarantined at once; one in use, dirty or scrubbing when its scrub ends.
 * Sets *ret_changed (may be NULL) when anything changed.  Requires
 * AV_POOL_WRITE. */
gboolean av_pool_reconcile(AvPool *pool, const AvHost *host, const AvPolicy *policy,
                           gboolean *ret_changed, GError **error);

/* The devices that differ between @before, a pool read earlier, and @now,
 * the same state dir's pool read later: those added, removed or changed in
 * any recorded field (their pool.json entries differ), each named by its
 * identity and its address in either pool (an address names whatever is
 * there).  A table for
 * av_pool_reconcile_scan(); caller frees.  Borrows both pools. */
GHashTable *av_pool_changed_since(const AvPool *before, const AvPool *now);

/* TRUE when pool.json was saved (by anyone) between the reads of @before
 * and @now, the same state dir's pool read later: even a save that left
 * every device as it was (a prepare that changed the host, failed and
 * undid itself) tells that the host may have changed meanwhile.  By the
 * file's inode, size, modification and change times as each read it. */
gboolean av_pool_file_changed_since(const AvPool *before, const AvPool *now);

/* Takes the device that presents @identity at @address (either may be
 * NULL) out of @changed (av_pool_changed_since()): a caller that must
 * reconcile that device whatever happened to its entry (the worker, the
 * device it scrubbed). */
void av_pool_changed_forget(GHashTable *changed, const char *identity, const char *address);

/* What av_pool_reconcile() reads of the whole-host scan @host (borrowed;
 * it and @policy must outlive the result): each device's identities, the
 * profile that matches it, its match ids.  It needs no pool, so a caller
 * that scans without the pool's lock computes it without the lock too, and
 * holds the lock only for av_pool_reconcile_scan().  Caller frees. */
typedef struct _AvPoolScan AvPoolScan;
AvPoolScan *av_pool_scan_new(const AvHost *host, const AvPolicy *policy);
void av_pool_scan_free(AvPoolScan *scan);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPoolScan, av_pool_scan_free)

/* av_pool_reconcile() of @scan (av_pool_scan_new(); used up: reconciled
 * once), taken without the pool's lock after @before was read: the devices
 * of @keep (av_pool_changed_since() of @before and @pool) are left as they
 * are, neither updated nor made missing, and nothing of the scan at their
 * addresses or with their identities is applied (another accelvirt changed
 * them, and the scan may have seen them before or during that change;
 * theirs is the newer word).  Collisions of identities are still told on
 * the whole scan.  Everything else is av_pool_reconcile()'s, which a NULL
 * @keep is. */
gboolean av_pool_reconcile_scan(AvPool *pool, AvPoolScan *scan, GHashTable *keep, gboolean *ret_changed,
                                GError **error);

/* Whether @pool, as it stands, can be trusted for the functions of the
 * partial scan @host (av_host_scan_devices()) without a whole-host
 * reconcile: the pool's last whole reconcile was in this boot
 * (a boot id both know), and for every function of @host the pool holds
 * exactly what av_pool_reconcile() would leave: the same entry at that
 * address under the identity the function presents now (its own, not a
 * fallback), not missing, the profile av_policy_match_pci() gives (none:
 * no entry, and the identity nowhere in the pool), the same NUMA node and
 * IOMMU group, the same ids a profile's match reads (vendor:device,
 * subsystem, class, revision) where the pool recorded them (match_ids),
 * and for a free device the same host driver, no two of them
 * presenting one identity (a device outside @host that shares one is not
 * seen: the whole scans of the CLI and `accelvirt reconcile` are); and every mdev
 * of the pool that @host holds on the parent the pool records.  When @host
 * holds every USB device (usb_scanned), each is as the pool has it (same
 * identity at that bus path, profile, node; none presenting the identity of
 * another) and every USB device the pool has, not missing, is among them.  Anything else,
 * news included, is FALSE with *ret_why (caller frees) saying what: the
 * caller then scans the whole host and reconciles.  Changes nothing. */
gboolean av_pool_confirm(const AvPool *pool, const AvHost *host, const AvPolicy *policy, char **ret_why);

/* Claims whose expiry (Unix seconds) is before @now go back to free
 * ("claim-expired"), setting *changed; av_pool_reconcile() does it too.
 * Requires AV_POOL_WRITE. */
gboolean av_pool_expire_claims(AvPool *pool, gint64 now, gboolean *changed, GError **error);

/* Ends the claim on @dev (claimed): back to free, or to dirty when a
 * program for the claim's domain started on it (claim_programmed: its
 * image may be on the card, and the scrub's program-base replaces it).
 * @why is the reason recorded (NULL: none), @event the journal entry's
 * name ("transition", "claim-expired"). */
gboolean av_pool_unclaim(AvPool *pool, AvPoolDevice *dev, const char *why, const char *event, GError **error);

/* The stable identity of a PCI device, which survives re-enumeration
 * (never the bus address alone):
 *   "dsn:VVVV:DDDD:0123456789abcdef.fN"  when the device has a DSN (N = function;
 *        a DSN of 0 or 0xffffffffffffffff counts as none);
 *   "pci:VVVV:DDDD:SVVV:SDDD@slot:NAME.fN"   else, with a physical slot;
 *   "pci:VVVV:DDDD:SVVV:SDDD@path:DDDD:RR/DD.F/DD.F"  else, the chain of
 *        device.function numbers from the root bus (bus numbers left out,
 *        since they are what re-enumeration changes);
 *   "<PF identity>/vfN"                    for a VF.
 * The path form starts with the PCI domain, 4 to 8 hex digits (Intel VMD
 * domains are wider than 4: "@path:10000:e0/1a.0/00.0").
 * Two devices of one scan may still share an identity (a DSN or a USB serial
 * given to many devices): av_pool_reconcile() then uses their slot, path or
 * port identities instead.  @host is needed to look up the PF and upstream
 * bridges.  Caller frees. */
char *av_pool_identity_pci(const AvHost *host, const AvPciDevice *dev);

/* The PCI functions of the host under @root that may present the PCI
 * identity @identity (a form of av_pool_identity_pci() or its fallback),
 * read without scanning them (av_pci_find_by_ids()): every function with
 * the vendor and device ids the identity names (a VF's identity names its
 * PF's, so its PF's rivals are found), of them, for a DSN form, those with
 * that DSN, for a slot or path form those without a DSN that tells them
 * apart; and every function whose ids cannot be read.  Whatever presents
 * @identity now is among them; a scan of them (av_host_scan_devices()) and
 * av_pool_confirm() then see any other device sharing it.  Any other
 * identity (USB, mdev, malformed) has none.  Returns a new NULL-terminated
 * array of addresses (caller frees) or NULL with @error set. */
char **av_pool_identity_presenters(const AvRoot *root, const char *identity, GError **error);

/* What a profile's match reads of @dev, as AvPoolDevice.match_ids records it:
 * "VVVV:DDDD SSSS:ssss CCCCCC RR".  Caller frees. */
char *av_pool_match_ids_pci(const AvPciDevice *dev);

/* TRUE when @text has the form of av_pool_match_ids_pci(). */
gboolean av_pool_match_ids_valid(const char *text);

/* The identity of a USB device: "usb:VVVV:PPPP:serial:SERIAL" when it has a
 * serial, else "usb:VVVV:PPPP@port:BUSPATH".  Caller frees. */
char *av_pool_identity_usb(const AvUsbDevice *dev);

/* The port form "usb:VVVV:PPPP@port:BUSPATH" of a USB device's identity,
 * which av_pool_reconcile() gives two devices presenting one serial.
 * Caller frees. */
char *av_pool_identity_usb_fallback(const AvUsbDevice *dev);

/* The identity a device falls back to when its own identity (DSN, USB
 * serial) is shared with another device of the same scan: the slot or path
 * form of av_pool_identity_pci() ignoring the DSN (a VF: its PF's fallback
 * and "/vfN"), and the port form "usb:VVVV:PPPP@port:BUSPATH" of a USB
 * device.  Caller frees. */
char *av_pool_identity_pci_fallback(const AvHost *host, const AvPciDevice *dev);

/* The USB device of @usb (AvUsbDevice*) that presents @identity, as its
 * own identity or its port form (av_pool_identity_usb_fallback()); the one
 * at @bus_path (may be NULL) first when several do.  NULL when none.
 * Borrowed from @usb. */
const AvUsbDevice *av_pool_find_usb_device(const GPtrArray *usb, const char *identity, const char *bus_path);

/* The USB device of @usb at the port @bus_path, when it presents @identity
 * (its own identity or its port form); NULL when no device is at @bus_path
 * or the one there presents another identity.  Never a device elsewhere:
 * what the scrub methods act on.  Borrowed from @usb. */
const AvUsbDevice *av_pool_find_usb_device_at(const GPtrArray *usb, const char *identity, const char *bus_path);

/* TRUE when the USB device @usb is the pooled stick @identity (pooled at
 * the port @bus_path under @profile) presenting one of the profile's
 * "runtime_ids" (its firmware loaded, re-enumerated): at that very port,
 * with the same serial when @identity is the serial form (a tenant's
 * firmware can fake a serial, not the port it is plugged into), and with
 * ids @profile lists as runtime ids.  Whether those ids are acceptable
 * depends on the state of the stick (av_pool_usb_runtime_accepted()).
 * FALSE for NULL arguments. */
gboolean av_pool_usb_is_runtime_of(const AvUsbDevice *usb, const char *identity, const char *bus_path,
                                   const AvProfile *profile);

/* TRUE when a stick in @state may present its profile's runtime ids: a
 * domain runs on it (in-use), or it waits for or runs its scrub (dirty,
 * scrubbing), whose end decides; a quarantined stick keeps its entry too.
 * Never a free stick (the firmware would have survived) nor a claimed one
 * (no domain runs on it yet: firmware then is foreign). */
gboolean av_pool_usb_runtime_accepted(AvDeviceState state);

/* The USB device of @usb at the port @bus_path presenting @identity
 * (av_pool_find_usb_device_at()) or, failing that, presenting one of
 * @profile's runtime ids as that stick (av_pool_usb_is_runtime_of()); NULL
 * otherwise.  *ret_runtime (may be NULL) says which.  Borrowed from @usb. */
const AvUsbDevice *av_pool_find_usb_device_held(const GPtrArray *usb, const char *identity, const char *bus_path,
                                                const AvProfile *profile, gboolean *ret_runtime);

/* What the USB device @usb of the host, at the port of the pooled stick
 * @dev (its address), presents of it. */
typedef enum {
    AV_POOL_USB_SAME,       /* @dev's own identity (or its port form) */
    AV_POOL_USB_RUNTIME,    /* one of @profile's runtime ids as @dev (av_pool_usb_is_runtime_of()) */
    AV_POOL_USB_OTHER,      /* anything else: not @dev, or not at its port */
} AvPoolUsbPresents;

/* What @usb presents of the pooled stick @dev of @profile (may be NULL:
 * no runtime ids).  A device at a port where the pool has a USB entry is
 * that entry's business whatever it presents: callers find the entry by
 * the port (av_pool_find_address()) and ask this, not by identity alone. */
AvPoolUsbPresents av_pool_usb_presents(const AvPoolDevice *dev, const AvUsbDevice *usb, const AvProfile *profile);

/* The pool device that the USB device @usb presents: its own identity,
 * else the port form the pool gives sticks sharing a serial
 * (av_pool_identity_usb_fallback()); NULL when the pool has neither.
 * Borrowed from @pool. */
AvPoolDevice *av_pool_find_usb(const AvPool *pool, const AvUsbDevice *usb);

/* TRUE when @identity is a USB identity as av_pool_identity_usb() and
 * av_pool_identity_usb_fallback() make them ("usb:" 4 hex ":" 4 hex, then
 * ":serial:" and printable characters other than quotes and backslashes,
 * or "@port:" and a bus path), at most 255 characters.  The only form
 * accepted from domain XML. */
gboolean av_pool_identity_usb_is_valid(const char *identity);

/* The identity of a mediated device: "mdev:UUID" (@uuid canonical, see
 * av_uuid_is_valid()).  Caller frees. */
char *av_pool_identity_mdev(const char *uuid);

/* Adds a device that no scan finds by itself (an mdev created at prepare)
 * in state @state with a copy of @owner, journalling "added".  Fails with
 * AV_ERROR_STATE when @identity is already in the pool.  Returns the new
 * device (borrowed from the pool) or NULL. */
AvPoolDevice *av_pool_add(AvPool *pool, AvDeviceKind kind, const char *identity, const char *address,
                          const char *profile, AvDeviceState state, const AvOwner *owner,
                          GError **error);

/* Removes the device @identity from the pool, journalling "removed" with
 * @reason.  Frees the device: pointers to it are invalid afterwards. */
gboolean av_pool_remove(AvPool *pool, const char *identity, const char *reason, GError **error);

/* The devices held by the domain @domain_uuid (any state with that owner),
 * sorted by identity.  The array is the caller's; the devices are borrowed. */
GPtrArray *av_pool_find_owned(const AvPool *pool, const char *domain_uuid);

const char *av_device_state_to_string(AvDeviceState state);
gboolean av_device_state_from_string(const char *s, AvDeviceState *ret_state);
const char *av_device_kind_to_string(AvDeviceKind kind);

/* The pool and each device as JSON (the form of pool.json's "devices"). */
json_t *av_pool_device_to_json(const AvPoolDevice *dev);
json_t *av_pool_to_json(const AvPool *pool);

/* pool.json's text of @json (av_pool_to_json()): each member of the top
 * object on a line of its own, and each element of an array member (a
 * device, a write-ahead record, a placement record) on one line, without
 * indentation (a line of the file is a record: grep finds a device's, and a
 * load error's line number points at it), with a final newline; NULL when
 * jansson cannot serialise it.  Caller frees with g_free(). */
char *av_pool_json_text(const json_t *json);
/* The same text of @pool, written from its devices without building the
 * JSON tree (what av_pool_save() writes); NULL when jansson would fail.
 * Caller frees with g_free(). */
char *av_pool_text(const AvPool *pool);

/* --- write-ahead records of a prepare ---
 *
 * Before the hook touches the kernel at prepare it records in the pool, and
 * saves, the driver of every endpoint it is about to bind and every mdev it
 * is about to create.  The record goes away with the commit that records
 * the devices in use (one save), or with the undo of a failed prepare.  The
 * hook holds the pool lock from the record to the commit, so a record that
 * another holder of the lock finds was left by a process that died mid-way:
 * av_pool_intents_undo() gives each endpoint back to its recorded driver,
 * removes each mdev and sets each VF count it raised back (when no VF of
 * the PF is held: av_pool_vf_undo()), whatever point the process reached. */
typedef struct {
    char *uuid;
    char *parent;                /* the mdev parent's name (av_mdev_parent_name_is_valid()) */
    char *type;
} AvIntentMdev;

/* A PF whose VF count a prepare raises: from @from to @to. */
typedef struct {
    char *pf;                    /* the PF's PCI address */
    guint from;
    guint to;
} AvIntentVfs;

typedef struct {
    char *id;                    /* 32 random lower-case hex digits */
    char *domain_uuid;
    char *domain_name;           /* or NULL */
    gint64 since;                /* Unix seconds */
    GPtrArray *binds;            /* AvCompanion*: each endpoint and the driver it had (NULL: none) */
    GPtrArray *mdevs;            /* AvIntentMdev* */
    GPtrArray *vfs;              /* AvIntentVfs*: VF counts it raises, before anything else; in
                                  * pool.json ("vfs") only when not empty */
    GPtrArray *claims;           /* char*: the identities of the pool devices it will take in use; the
                                  * "rolled-back" entry names them: their moves that the dead prepare
                                  * journalled were never saved */
    GPtrArray *vgpus;            /* char*: the VFs it makes an NVIDIA vGPU on ("vgpu_type"), whose vGPU an
                                  * undo destroys; in pool.json ("vgpus") only when not empty */
    char *undo_error;            /* why the last undo failed, or NULL (journalled once) */
} AvIntent;

/* A new record of a prepare of the domain @domain_uuid (@domain_name may be
 * NULL), with a random id.  Caller frees, or gives it to
 * av_pool_intent_add(). */
AvIntent *av_intent_new(const char *domain_uuid, const char *domain_name);
void av_intent_free(AvIntent *intent);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvIntent, av_intent_free)
void av_intent_add_bind(AvIntent *intent, const char *address, const char *original_driver);
void av_intent_add_mdev(AvIntent *intent, const char *uuid, const char *parent, const char *type);
void av_intent_add_claim(AvIntent *intent, const char *identity);
void av_intent_add_vfs(AvIntent *intent, const char *pf, guint from, guint to);
void av_intent_add_vgpu(AvIntent *intent, const char *address);

/* Adds @intent (taken over) to the pool; returns it, borrowed.  The caller
 * saves the pool before it touches the kernel. */
AvIntent *av_pool_intent_add(AvPool *pool, AvIntent *intent);

/* Drops @intent from the pool (frees it); the caller saves. */
void av_pool_intent_remove(AvPool *pool, AvIntent *intent);

/* The records in the pool (AvIntent*, borrowed). */
GPtrArray *av_pool_intents(const AvPool *pool);

/* Undoes every record of @pool left by a process that died (see above):
 * each endpoint whose recorded driver is not vfio-pci goes back to it with
 * av_vfio_restore() (from vfio-pci, from no driver, or with only its
 * driver_override left behind), each mdev is removed.  A record fully
 * undone is journalled ("rolled-back", with what was done) and dropped; one
 * that fails keeps its place, with the error journalled once
 * ("rollback-failed"), and is tried again by the next call.  Sets
 * *ret_changed when the pool changed (the caller saves).  Returns FALSE
 * with the first failure in @error after trying every record; the pool is
 * consistent either way.  Requires AV_POOL_WRITE. */
gboolean av_pool_intents_undo(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, gboolean *ret_changed,
                              GError **error);

/* --- BAR sizes put back after a resize that was cut short (av-pool-bar-sizes.c) ---
 *
 * Puts back the BARs that a scrub killed between a BAR resize and the way
 * back left grown, from the records of av-bar-sizes.h whose writers are
 * gone: every such record of @pool's state dir, or only that of @identity
 * (when not NULL: the worker, as it picks the device).  Each device goes
 * through the same unbind, resize and probe back onto vfio-pci as the
 * resize (av_bar_record_restore()), its hold dropped meanwhile and taken
 * again as the pool wants it.  Journalled: "bar-sizes-restored" {"identity",
 * "address", "since", "by" (@by), "bars": [{"bar", "size", "was",
 * "resized"}]}, and the record removed; a scrubbing or dirty device then
 * sets *ret_resume (its scrub starts over: start the worker).  When they
 * cannot be put back: "bar-sizes-restore-failed" (with "error", once per
 * error), the record kept with its error, and a dirty or scrubbing device
 * quarantined, unscrubbed (av_pool_quarantine_unscrubbed()), with a reason
 * saying its BAR sizes could not be put back; the next call tries again.
 * Adds a sentence per device to @notes (done) or @problems (not done, or a
 * record held by a live process when @identity is given).  Sets
 * *ret_changed when the pool changed (the caller saves).  FALSE only when
 * the journal cannot be written.  Requires AV_POOL_WRITE. */
gboolean av_pool_bar_sizes_restore(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, const char *identity,
                                   const char *by, gboolean *ret_changed, gboolean *ret_resume, GPtrArray *notes,
                                   GPtrArray *problems, GError **error);

/* --- SR-IOV VFs accelvirt makes (src/pool/av-pool-sriov.c) --- */

/* One change of a PF's VF count. */
typedef struct {
    char *pf;                    /* the PF's address */
    char *profile;               /* the profile that makes its VFs */
    guint from;                  /* sriov_numvfs now */
    guint to;                    /* the count to write */
} AvVfGrowth;

void av_vf_growth_free(AvVfGrowth *growth);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvVfGrowth, av_vf_growth_free)

/* The VF counts to write (AvVfGrowth*, caller frees; empty when none) so
 * that the "vfs" profiles of @requests (AvRequest*) have as many free VFs
 * (or VFs claimed by @domain_uuid) as they ask for: PFs that the profile
 * makes VFs on, in address order, whose count may change (the PF free or
 * unpooled; its count 0, or every VF idle: av_pool_pf_check_change() under
 * @root), each to the profile's "vfs"
 * or, on demand, to what is missing, at most sriov_totalvfs.  Changes
 * nothing.  What no PF can give is left to av_place() to report; why the
 * first PF refused goes to *@ret_why (caller frees) when it is NULL. */
GPtrArray *av_pool_vf_growth(const AvPool *pool, const AvRoot *root, const AvHost *host, const AvPolicy *policy,
                             const GPtrArray *requests, const char *domain_uuid, char **ret_why);

/* Sets the VF count of the PF @pf from @from to @to with
 * av_sriov_set_numvfs() and journals it: "vfs-set" (or "vfs-set-failed")
 * with pf, profile, from, to and @by (who asked: "define", "prepare",
 * "worker").  Requires AV_POOL_WRITE; the caller reconciles with a new
 * scan and saves. */
gboolean av_pool_vf_set_count(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, const char *pf,
                              const char *profile, guint from, guint to, const char *by, GError **error);

/* TRUE, with the count in *ret_count, when the PF @pf_address should
 * shrink: its profile says "vfs_shrink", it has more VFs than the
 * profile's base count (av_profile_vfs_base()), and every VF and the PF
 * are free and idle (av_pool_pf_check_change()). */
gboolean av_pool_vf_shrink_target(const AvPool *pool, const AvRoot *root, const AvHost *host, const AvPolicy *policy,
                                  const char *pf_address, guint *ret_count);

/* Sets the VF count of the PF @pf back to @from, what a prepare that
 * raised it from @from to @to undoes (journalled "vfs-set" by @by),
 * whatever the count is now (@to, 0 after a kill between the kernel's two
 * writes, anything else): only while every VF of the PF (its virtfnN
 * links now) is idle (av_pool_vf_check_idle()); AV_ERROR_IN_USE otherwise,
 * and the caller keeps its record.  A count that is already @from, or
 * that cannot be read (the PF is gone), is left. */
gboolean av_pool_vf_undo(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, const char *pf, guint from,
                         guint to, const char *by, GError **error);

/* FALSE (AV_ERROR_IN_USE, one sentence naming the VF and why) when the
 * existing VF @vf is in use by anything, so that no VF count may change
 * (the kernel changes a count only through 0, which removes every VF): its
 * pool record is not free (a missing one counts as its state before it
 * went missing), it is on a driver other than vfio-pci (the host uses it,
 * pooled or not), a process holds its IOMMU group open
 * (av_vfio_group_holder()), or it is the parent of an mdev. */
gboolean av_pool_vf_check_idle(const AvPool *pool, const AvRoot *root, const char *vf, GError **error);

/* FALSE (AV_ERROR_IN_USE, one sentence) when accelvirt may not change the VF
 * count of @pf now: the PF is in the pool and not free (claimed, in use by
 * a domain, dirty...), it is on vfio-pci or on no driver, or it has VFs and
 * one is not idle (av_pool_vf_check_idle()). */
gboolean av_pool_pf_check_change(const AvPool *pool, const AvRoot *root, const AvHost *host, const AvPciDevice *pf,
                                 GError **error);

/* FALSE (AV_ERROR_IN_USE, one sentence naming the PF and its state) when
 * @vf is a VF whose PF is in the pool and not free (claimed, in use,
 * dirty, scrubbing, quarantined, missing): a domain that holds the PF
 * holds its VFs, so no VF of it goes to anyone else. */
gboolean av_pool_vf_check_pf(const AvPool *pool, const AvPciDevice *vf, GError **error);

/* av_pool_vf_check_pf() with the pool's records looked up in @index
 * (av_pool_pci_index() of the pool). */
gboolean av_pool_vf_check_pf_in(GHashTable *index, const AvPciDevice *vf, GError **error);

/* FALSE (AV_ERROR_IN_USE, one sentence naming the VF and its state) when a
 * VF of the PF @pf_address is in the pool and not free: the PF is then not
 * handed out whole. */
gboolean av_pool_pf_check_vfs(const AvPool *pool, const AvHost *host, const char *pf_address, GError **error);

/* av_pool_pf_check_vfs() with the pool's records looked up in @index
 * (av_pool_pci_index() of the pool). */
gboolean av_pool_pf_check_vfs_in(GHashTable *index, const AvHost *host, const char *pf_address, GError **error);

/* Records that @dev holds @programmed (taken over; NULL: unknown), with a
 * journal entry "programmed" (identity, address, sha256, name, by,
 * verified) or, for NULL, "programmed-unknown" with @why.  No entry when
 * nothing changes.  The caller saves.  Requires AV_POOL_WRITE. */
gboolean av_pool_set_programmed(AvPool *pool, AvPoolDevice *dev, AvProgrammed *programmed, const char *why,
                                GError **error);

/* --- what processes that died left --- */

/* How long a device may be in use by a domain without a QEMU before the
 * pool takes the domain for gone: libvirt starts QEMU (and writes its pid
 * file) only after "prepare begin" and "start begin" returned. */
#define AV_POOL_DEAD_GRACE_S 120

/* Moves what the domain @domain_uuid holds (or, when @domain_uuid is NULL,
 * the domain named @domain_name: a release whose XML did not parse) from
 * in-use to dirty, journalling "transition" with "released_by"
 * (@released_by: "hook", "release-marker", "dead-domain", "previous-boot",
 * "operator"); a
 * device missing while in use will come back dirty ("released-while-
 * missing").  Never straight to free.  Adds the devices it released to
 * @ret_released (borrowed; may be NULL).  The caller saves. */
gboolean av_pool_release_owner(AvPool *pool, const char *domain_uuid, const char *domain_name,
                               const char *released_by, GPtrArray *ret_released, GError **error);

/* The same for one device: in-use to dirty (or, missing while in use, to
 * come back dirty); *ret_released says whether it moved (any other state:
 * nothing to release, TRUE and FALSE).  This is the one release of a
 * device: the hook's, `accelvirt detach`, `release`, `stale --release`,
 * the audit's and the upkeep's all come here.  On the host
 * av_pool_set_kernel() names, the device is held before its move is
 * journalled (a PCI function on vfio-pci: its IOMMU group; a USB stick
 * de-authorized; an mdev accelvirt created removed); a PCI function whose
 * group is open in another process (someone got it between its domain's
 * end and now) is quarantined as unscrubbed at once.  The caller saves,
 * then asks for the worker. */
gboolean av_pool_release_device(AvPool *pool, AvPoolDevice *dev, const char *released_by, gboolean *ret_released,
                                GError **error);

/* Leaves a release marker in @state_dir (its directory release-pending,
 * mode 0700; the marker written atomically, one file per call), without
 * the pool lock: the hook does it before it waits for the lock, so that a
 * release that cannot be done now (a lock wait that times out, a hook
 * killed) is done by the next holder of the lock (av_pool_upkeep()).  The
 * marker's flock(2) lock is held until av_pool_release_mark_done() or
 * av_pool_release_mark_free() (or the process's death): while it is held,
 * other holders of the pool's lock leave the marker to its writer.
 * @domain_uuid may be NULL (the XML did not parse: released by
 * @domain_name).  NULL with @error when it cannot be written. */
typedef struct AvPoolReleaseMark AvPoolReleaseMark;
AvPoolReleaseMark *av_pool_release_mark(const char *state_dir, const char *domain_uuid, const char *domain_name,
                                        GError **error);
/* The release was done and the pool saved: removes the marker, frees
 * @mark.  NULL is a no-op. */
void av_pool_release_mark_done(AvPoolReleaseMark *mark);
/* Drops the marker's lock and frees @mark, the marker left for the next
 * holder of the pool's lock.  NULL is a no-op. */
void av_pool_release_mark_free(AvPoolReleaseMark *mark);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPoolReleaseMark, av_pool_release_mark_free)

/* An attach in flight (src/pool/av-pool-attach.c): `accelvirt
 * attach` records a device in use by a running domain and saves the pool
 * before it hot-plugs it without the pool's lock, so that for a while the
 * device is in use and not in the domain's live XML.  The mark says so to
 * `accelvirt audit` and `watch`: a file STATE/attach-pending/HASH-RANDOM.json
 * ({"domain_uuid", "identity", "since"}; mode 0700 directory, written
 * atomically) whose flock(2) lock the attaching process holds until
 * av_pool_attach_mark_done() or av_pool_attach_mark_free() (or its death).
 * Made under the pool's lock, before the save that records the device in
 * use.  @domain_uuid may be NULL.  NULL with @error when it cannot be
 * written.  Caller frees. */
typedef struct AvPoolAttachMark AvPoolAttachMark;
AvPoolAttachMark *av_pool_attach_mark(const char *state_dir, const char *domain_uuid, const char *identity,
                                      GError **error);
/* The attach is over (done, or rolled back and saved): removes the mark,
 * frees @mark.  NULL is a no-op. */
void av_pool_attach_mark_done(AvPoolAttachMark *mark);
/* Drops the mark's lock and frees @mark, the file left behind (a later
 * av_pool_attach_in_flight() removes it).  NULL is a no-op. */
void av_pool_attach_mark_free(AvPoolAttachMark *mark);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPoolAttachMark, av_pool_attach_mark_free)

/* TRUE while a live process holds an attach mark for the device @identity
 * in @state_dir: leave the device alone, its hot-plug is under way.  The
 * marks of @identity whose lock is free were left by attaches that died:
 * they are removed, and do not count. */
gboolean av_pool_attach_in_flight(const char *state_dir, const char *identity);

/* Undoes the attach of @dev to the domain @domain_uuid when the guest never
 * had it (the hot-plug failed and the device is neither in the domain's
 * live XML nor held through its IOMMU group, which the caller checked, and
 * the caller gave its endpoints back to their drivers): in-use -> free,
 * outside the lifecycle, journalled as a "transition" with "by":
 * "attach-rolled-back" and "why": @reason (the caller journals the
 * attach's own "attach-rolled-back" entry).
 * AV_ERROR_STATE when @dev is not in use by @domain_uuid (then nothing
 * changes: another accelvirt released it meanwhile).  A device the guest
 * may have had is released instead (av_pool_release_device()): dirty.
 * The caller saves.  Requires AV_POOL_WRITE. */
gboolean av_pool_attach_undo(AvPool *pool, AvPoolDevice *dev, const char *domain_uuid, const char *reason,
                             GError **error);

/* TRUE when the QEMU of the domain that owns @dev is gone: libvirt's state
 * dir /run/libvirt/qemu exists (under @root), its pid file NAME.pid does
 * not, and no
 * process holds the device's IOMMU group (av_vfio_group_holder_full(),
 * which does not count accelvirt's own holders recorded in @state_dir; for
 * an mdev, the mdev's own group); *ret_why (may be NULL; caller frees) then
 * says so.  FALSE when it may be running, or cannot be told (no owner, a
 * name that cannot be a file name). */
gboolean av_pool_owner_is_gone(const AvRoot *root, const char *state_dir, const AvPoolDevice *dev,
                               char **ret_why);

/* What av_pool_upkeep() did. */
typedef struct {
    gboolean changed;            /* the pool changed: the caller saves it */
    gboolean dirtied;            /* devices became dirty (or a scrub must start over): the caller starts the
                                  * worker */
    GPtrArray *notes;            /* char*: what was done, one sentence each, for the log */
    GPtrArray *problems;         /* char*: what could not be done now (tried again next time) */
    GPtrArray *markers;          /* char*: release markers done with (see av_pool_upkeep_finish()) */
    json_t *released;            /* array of what it released (in use -> dirty): {"identity", "address"
                                  * (or null), "domain" (its name), "why": "release-marker",
                                  * "dead-domain" or "previous-boot" (in use since before this boot)} */
} AvPoolUpkeep;

void av_pool_upkeep_free(AvPoolUpkeep *upkeep);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPoolUpkeep, av_pool_upkeep_free)

/* What every holder of the pool's exclusive lock does first: undoes the
 * write-ahead records of prepares that died (av_pool_intents_undo()), puts
 * back the BAR sizes that scrubs killed mid-resize left grown
 * (av_pool_bar_sizes_restore(): a scrub to start over counts as dirtied),
 * carries out the release markers of the state dir whose writers are gone
 * (av_pool_release_mark()), and releases the devices in use, for longer
 * than AV_POOL_DEAD_GRACE_S, by domains whose QEMU is gone
 * (av_pool_owner_is_gone()), and at once those in use since before the
 * running kernel booted (btime of /proc/stat, av_root_boot_time()) when
 * no pid file nor a holder of the IOMMU group says their QEMU runs: no
 * QEMU survives a reboot, and warm reboots do not clear a device's memory,
 * so they are scrubbed (released_by "previous-boot").  The caller saves the pool when it changed,
 * then calls av_pool_upkeep_finish().  NULL with @error when the journal
 * cannot be written (the caller must not save).  Caller frees. */
AvPoolUpkeep *av_pool_upkeep(AvPool *pool, const AvRoot *root, const AvKernelOps *ops, GError **error);

/* After the pool is saved: removes the release markers carried out (and
 * the temporary files of writers that died). */
void av_pool_upkeep_finish(AvPoolUpkeep *upkeep);

/* Appends an entry to the journal of @pool: @event plus the members of
 * @fields (borrowed), with "seq", "time" (ISO 8601 UTC) and "prev" (hex
 * SHA-256 of the previous line, "" for the first) added. */
gboolean av_pool_journal_append(AvPool *pool, const char *event, json_t *fields, GError **error);

/* Appends a "scrub-certificate" entry: what was done to the device
 * @identity (@address, @profile) after @previous_owner (may be NULL) had it:
 * "steps" (those of @report, av_scrub_run()'s, each with its method,
 * result, duration and facts), "bytes_zeroed" (the sum of their "bytes"),
 * "seconds" (the sum of their durations), "started" (@started), "ok",
 * "result" (@result: "free" or "quarantined") and "reason" (NULL when ok),
 * "coverage" (the report's: how much of the device's memory was cleared),
 * plus the members of @extra (borrowed, may be NULL).  The device's
 * last_scrub (in @pool, saved by the caller) takes the result and the
 * coverage.  Like every entry it
 * carries "prev", the SHA-256 of the previous line, which makes the
 * journal a chain that av_journal_verify() checks. */
gboolean av_pool_journal_certificate(AvPool *pool, const char *identity, const char *address,
                                     const char *profile, const AvOwner *previous_owner, json_t *report,
                                     const char *started, const char *result, const char *reason,
                                     json_t *extra, GError **error);

/* "domain 'vm1' (UUID)", "domain UUID", "Nova instance UUID" or "nobody".
 * Caller frees. */
char *av_owner_describe(const AvOwner *owner);

/* Journals @event about @dev: its identity, kind, address, profile and
 * state, plus the members of @extra (borrowed, may be NULL). */
gboolean av_pool_journal_device(AvPool *pool, const char *event, const AvPoolDevice *dev, json_t *extra,
                                GError **error);

/* Quarantines @dev whatever its state, with @reason (copied), keeping its
 * owner: a device a domain got behind the pool's back (audit/av-audit.c), which
 * only the operator's clear frees.  A missing device comes back
 * quarantined ("quarantined-while-missing").  Journals "transition" (or
 * that entry) with the members of @extra (borrowed, may be NULL).  A
 * device already quarantined keeps its state and takes @reason
 * ("quarantine-reason"). */
gboolean av_pool_quarantine_force(AvPool *pool, AvPoolDevice *dev, const char *reason, json_t *extra,
                                  GError **error);

/* --- the policy's "limits" (av-pool-usage.c; accelvirt-policy(5), LIMITS) --- */

/* One device a domain is about to hold: its pool identity (NULL for one
 * not in the pool yet, a new mdev) and its profile.  Borrowed. */
typedef struct {
    const char *identity;
    const char *profile;
} AvLimitTake;

/* What @limit's owner holds now in @pool (devices claimed or in use, a
 * missing one counted as it was) into *ret_devices, and its in-use
 * device-seconds of the current period (at @now) into *ret_seconds (0 for
 * a limit without a period): those recorded at releases in pool.json's
 * "usage" since the period began, plus the devices in use now.  Reads
 * the pool only: bounded by the pool, never the journal. */
void av_pool_limit_usage(const AvPool *pool, const AvLimit *limit, gint64 now, gint64 *ret_devices,
                         gint64 *ret_seconds);

/* Checks that @owner (as charged: av_pool_owner_resolve()) may hold the
 * @n_takes devices @takes too: for every limit of @limits (AvLimit*, may be
 * NULL) that names the owner and the profile of one of them, the devices
 * held (those among @takes not counted twice) plus those of @takes stay
 * within "max_devices", and the device-hours of the current period are
 * below "max_device_hours".  FALSE with AV_ERROR_NO_CAPACITY naming the
 * first limit passed, its file and the usage.  Changes nothing. */
gboolean av_pool_limits_check(const AvPool *pool, const GPtrArray *limits, const AvOwner *owner,
                              const AvLimitTake *takes, guint n_takes, gint64 now, GError **error);

G_END_DECLS
