/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: Placement kept true about the pool, level-triggered.
 *
 * For each PCI pool device of a profile with the sync on
 * (av_policy_placement_sync()), the "reserved" wanted on its resource
 * provider, Nova's "<hypervisor_hostname>_<ADDRESS>" with the address in
 * upper case (nova/compute/pci_placement_translator.py), a VF's on its PF's:
 *   - a whole function (attach vfio-pci): its total while dirty, scrubbing,
 *     quarantined or missing; 0 when free; claimed or in use: nothing
 *     (Nova's one_time_use set reserved = total at allocation);
 *   - a PF whose VFs the pool has (attach sriov-vf): how many of them are
 *     dirty, scrubbing, quarantined or missing, capped at the total.
 * Applied by the worker, `accelvirt reconcile` and `accelvirt placement
 * sync`, never the hook; what cannot be applied (Placement unreachable,
 * the provider not made by Nova yet) stays pending in STATE/placement.json
 * (0600, written atomically, under STATE/placement.lock, never under the
 * pool's lock while HTTP runs) and is applied by the next run.  The
 * journal gets a "placement" entry each time a value is applied or goes
 * pending. */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "policy/av-policy.h"
#include "pool/av-pool.h"
#include "util/av-root.h"

G_BEGIN_DECLS

#define AV_PLACEMENT_STATE_FILE "placement.json"
#define AV_PLACEMENT_LOCK_FILE "placement.lock"
/* How long a sync waits for the pool's lock (its snapshot, its journal
 * entries) and for another sync. */
#define AV_PLACEMENT_LOCK_TIMEOUT_MS 60000

/* One pool device as the sync sees it (a snapshot: copies). */
typedef struct {
    char *identity;
    char *address;               /* its PCI address (last seen) */
    char *profile;
    AvDeviceState state;
    AvDeviceState state_before_missing;
    char *pf_address;            /* a VF: its PF's address when known, else NULL */
    gboolean is_vf;
    gboolean ids_known;
    guint16 vendor_id;           /* the device's own ids (a VF's own) */
    guint16 device_id;
} AvPlacementDevice;

void av_placement_device_free(AvPlacementDevice *dev);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPlacementDevice, av_placement_device_free)

/* One resource provider's inventory to set. */
typedef struct {
    char *rp;                    /* resource provider name */
    char *rc;                    /* resource class */
    char *address;               /* the PCI address it is named after (a PF's for VFs) */
    gint64 want;                 /* -1: the inventory's total; else this many, capped at the total */
    gboolean counts_vfs;         /* a PF's provider counting its VFs */
    GPtrArray *identities;       /* char*: the pool devices behind it */
    GPtrArray *addresses;        /* char*: their addresses, in the same order */
} AvPlacementTarget;

void av_placement_target_free(AvPlacementTarget *target);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPlacementTarget, av_placement_target_free)

/* The Nova resource provider name of the device at @address on
 * @hostname: "HOSTNAME_ADDRESS", the address in upper case.  Caller frees. */
char *av_placement_rp_name(const char *hostname, const char *address);

/* The resource class of a device of @profile with ids @vendor:@device:
 * the profile's resource_class, else Nova's "CUSTOM_PCI_VVVV_DDDD".
 * Caller frees. */
char *av_placement_resource_class(const AvProfile *profile, guint16 vendor, guint16 device);

/* This host's name as libvirt's virGetHostname() gives it (Nova's
 * hypervisor_hostname); NULL when gethostname() fails.  Caller frees. */
char *av_placement_default_hostname(void);

/* The host name the providers are named after: the policy's "nova"
 * "hypervisor_hostname", else av_placement_default_hostname().  Caller
 * frees. */
char *av_placement_hostname(const AvPolicy *policy);

/* The wanted values for @devices (AvPlacementDevice*, borrowed) on
 * @hostname under @policy: a new array of AvPlacementTarget*, sorted by
 * provider name.  A device whose ids or PF are not known (gone from the
 * host) takes its provider and class from its record in @records (the
 * state file's "devices", may be NULL), or is left out.  Identities of
 * sync-on devices that want nothing (claimed, in use) are added to
 * @ret_held (may be NULL; a new set of char*). */
GPtrArray *av_placement_targets(const AvPolicy *policy, const char *hostname, const GPtrArray *devices,
                                json_t *records, GHashTable **ret_held);

/* The snapshot of @pool for the sync: its PCI devices of sync-on profiles,
 * with the ids and PF of each that is not missing read from the host under
 * @root (a partial scan).  A new array of AvPlacementDevice*, or NULL with
 * @error. */
GPtrArray *av_placement_snapshot(const AvRoot *root, const AvPool *pool, const AvPolicy *policy, GError **error);

/* TRUE when a sync has anything to do: a profile of @policy has the sync on,
 * or @state_dir has a placement state file. */
gboolean av_placement_sync_wanted(const AvPolicy *policy, const char *state_dir);

/* The state file of @state_dir ({"version": 1, "devices": {...}}; an empty
 * one when there is none).  NULL with @error (AV_ERROR_CORRUPT_STATE: it
 * does not parse).  Caller owns the reference. */
json_t *av_placement_state_read(const char *state_dir, GError **error);

/* Writes @state as the state file of @state_dir (0600, atomically). */
gboolean av_placement_state_write(const char *state_dir, json_t *state, GError **error);

/* What a sync did. */
typedef struct {
    guint applied;               /* providers whose reserved a PUT changed */
    guint in_sync;               /* providers that said so already */
    guint pending;               /* devices left pending */
    json_t *results;             /* one object a provider: {"rp", "rc", "address", "identities", "want",
                                  * "reserved" (now, or null), "result": "applied" | "in-sync" | "pending",
                                  * "error"} */
} AvPlacementReport;

void av_placement_report_free(AvPlacementReport *report);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPlacementReport, av_placement_report_free)

/* Runs a sync of @devices (a snapshot, av_placement_snapshot()) under
 * @policy with the state of @state_dir: takes the placement lock, computes
 * the targets, adds the pending records no target covers (devices gone from
 * the pool: their last wanted value), applies each through a client of the
 * policy's cloud (av_os_cloud_load()), writes the state file and the
 * journal entries (under the pool's lock, briefly, after the HTTP).  With
 * @only_identity, only the provider of that device (the worker after each
 * scrub).  A value that cannot be applied is pending, not an error: FALSE
 * with @error only when the state cannot be read or written.  Must not be
 * called with the pool's lock held.  *ret_report (caller frees). */
gboolean av_placement_sync(const char *state_dir, const AvPolicy *policy, const GPtrArray *devices,
                           const char *only_identity, AvPlacementReport **ret_report, GError **error);

/* av_placement_sync() of the pool of @state_dir: the snapshot taken under
 * its shared lock (released before any HTTP).  Does nothing (an empty
 * report) when av_placement_sync_wanted() says so. */
gboolean av_placement_sync_pool(const AvRoot *root, const char *state_dir, const AvPolicy *policy,
                                const char *only_identity, AvPlacementReport **ret_report, GError **error);

/* The "placement" object of `accelvirt status` for @dev: {"state":
 * "in-sync" | "pending" | "off", "rp", "rc", "want", "applied", "since",
 * "error"} from @state (the state file).  Caller owns the reference. */
json_t *av_placement_device_status(const AvPolicy *policy, json_t *state, const AvPoolDevice *dev);

/* The text of @status (av_placement_device_status()): "in sync (reserved
 * N)", "pending since T: ERROR" or "off".  Caller frees. */
char *av_placement_status_text(json_t *status);

G_END_DECLS
