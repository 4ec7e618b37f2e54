/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the audit of the pool against the running domains.
 *
 * libvirt runs no hook on device hot-plug (virDomainAttachDevice,
 * virDomainDetachDevice: docs/hooks.rst lists no such operation), so a
 * `virsh attach-device` or `detach-device` goes around accelvirt.  The audit
 * compares what running domains hold, as their live XML says, with the pool,
 * and puts the pool right:
 *
 *   - a device a domain's live XML names that the pool has free, or claimed
 *     by that domain, becomes in use by it ("attached-outside");
 *   - one that is dirty, scrubbing (for another domain than its scrub VM),
 *     quarantined, missing, or claimed or in use by another domain is a
 *     "violation": journalled, and quarantined with a reason naming the
 *     domain, never freed until the operator clears it;
 *   - a device in use by a running domain that its live XML no longer names
 *     is released to dirty ("detached-outside"), then scrubbed: never
 *     straight to free;
 *   - a device in use by a domain that is not running is only reported:
 *     av_pool_upkeep() and `accelvirt release` deal with it.
 *
 * The pool layer reads no XML: the caller (the CLI) hands it, per domain,
 * the host devices its live XML names (AvAuditDomain).  Everything happens
 * under the pool's exclusive lock that the caller holds; the pool is saved
 * once, when it changed. */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "pci/av-pci.h"
#include "pool/av-pool.h"

G_BEGIN_DECLS

typedef enum {
    AV_AUDIT_HOSTDEV_PCI,        /* <hostdev type='pci'> or <interface type='hostdev'> */
    AV_AUDIT_HOSTDEV_MDEV,       /* <hostdev type='mdev'> */
    AV_AUDIT_HOSTDEV_USB,        /* <hostdev type='usb'> */
} AvAuditHostdevKind;

/* One host device a domain's live XML names. */
typedef struct {
    AvAuditHostdevKind kind;
    char *pci_address;           /* PCI: canonical address */
    char *mdev_uuid;             /* mdev: canonical UUID */
    guint16 usb_vendor;          /* USB: vendor and product ids, 0 when absent */
    guint16 usb_product;
    int usb_bus;                 /* USB: bus and device numbers, -1 when absent */
    int usb_device;
} AvAuditHostdev;

/* A running domain, as the caller read it. */
typedef struct {
    char *uuid;                  /* canonical */
    char *name;                  /* or NULL */
    gint64 seen_at;              /* Unix seconds just before its live XML was read; 0: unknown */
    GPtrArray *hostdevs;         /* AvAuditHostdev*, owned */
    char *unreadable;            /* why its live XML could not be read, or NULL: then none of its
                                  * devices is touched (it counts as running, with unknown hostdevs) */
    GPtrArray *netdevs;          /* char*, owned: the host interfaces its <interface type='direct'>s name;
                                  * the caller adds the PCI card that made each (attach netdev) as a PCI
                                  * hostdev before the audit */
    GPtrArray *unresolved;       /* char*, owned: hostdevs of its live XML that name a device the reader
                                  * could not tell; the devices it names are still audited, but none in
                                  * use by it is taken for detached */
} AvAuditDomain;

/* A new domain with no host device; copies @uuid and @name (may be NULL).
 * A device whose state changed at or after @seen_at (0: never) is left for
 * the next audit ("changed" finding) instead of being quarantined or
 * released: the live XML may be older than the change (the domain stopped,
 * and its hook released the device, between the read and the lock).
 * Caller frees with av_audit_domain_free() (NULL is a no-op), which frees
 * its hostdevs. */
AvAuditDomain *av_audit_domain_new(const char *uuid, const char *name, gint64 seen_at);
void av_audit_domain_free(AvAuditDomain *domain);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvAuditDomain, av_audit_domain_free)

/* Add a host device to @domain, which owns it (the strings are copied). */
void av_audit_domain_add_pci(AvAuditDomain *domain, const char *address);
void av_audit_domain_add_mdev(AvAuditDomain *domain, const char *uuid);
void av_audit_domain_add_usb(AvAuditDomain *domain, guint16 vendor, guint16 product, int bus, int device);
/* Notes a hostdev of @domain's live XML that names a device the reader
 * could not tell (@why, copied): an AV_AUDIT_UNRESOLVED finding. */
void av_audit_domain_add_unresolved(AvAuditDomain *domain, const char *why);

typedef enum {
    AV_AUDIT_ATTACHED_OUTSIDE,   /* claimed and in use for the domain */
    AV_AUDIT_VIOLATION,          /* journalled and quarantined */
    AV_AUDIT_DETACHED_OUTSIDE,   /* released: in use -> dirty, then scrubbed */
    AV_AUDIT_NOT_RUNNING,        /* in use by a domain that is not running: reported only */
    AV_AUDIT_CHANGED,            /* changed after the live XML was read: left to the next audit */
    AV_AUDIT_UNRESOLVED,         /* a hostdev (or a whole live XML) that names no device the audit can tell,
                                  * or a USB hostdev that names several: reported; the audit is not complete */
    AV_AUDIT_HELD_OUTSIDE,       /* a free device whose IOMMU group a process holds though no running domain
                                  * the audit could read names it: journalled and quarantined */
} AvAuditAction;

/* "attached-outside", "violation", "detached-outside", "not-running",
 * "changed", "unresolved", "held-outside"; static strings. */
const char *av_audit_action_to_string(AvAuditAction action);

/* What the audit found about one device. */
typedef struct {
    AvAuditAction action;
    char *domain_uuid;           /* or NULL */
    char *domain_name;           /* or NULL */
    char *identity;              /* the pool device, or NULL (AV_AUDIT_UNRESOLVED) */
    char *address;               /* or NULL */
    AvDeviceState from;          /* the device's state before */
    AvDeviceState state;         /* its state after (the same on a dry run, or when reported only) */
    char *detail;                /* one sentence */
} AvAuditFinding;

/* Frees @finding and its strings; NULL is a no-op. */
void av_audit_finding_free(AvAuditFinding *finding);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvAuditFinding, av_audit_finding_free)

/* @finding as JSON ({"action", "domain_uuid", "domain_name", "identity",
 * "address", "from", "state", "detail"}).  Caller owns the reference. */
json_t *av_audit_finding_to_json(const AvAuditFinding *finding);

/* TRUE when the device @identity of the pool in @state_dir is being
 * attached or detached by accelvirt itself (`accelvirt attach`/`detach`
 * between its claim and libvirt's answer): the audit leaves it alone. */
typedef gboolean (*AvAuditInFlightFunc)(const char *state_dir, const char *identity);

typedef enum {
    AV_AUDIT_DEFAULT = 0,
    AV_AUDIT_DRY_RUN = 1 << 0,   /* report only: no journal entry, no change, no save */
    AV_AUDIT_ALL = 1 << 1,       /* @domains are all the running domains of the host: devices in use by
                                  * any other domain are reported (AV_AUDIT_NOT_RUNNING) */
} AvAuditFlags;

/* Applies the rules above to @pool (opened AV_POOL_WRITE, or AV_POOL_READ
 * with AV_AUDIT_DRY_RUN) for each of @domains (AvAuditDomain*, borrowed),
 * and saves the pool once when it changed.  @usb (AvUsbDevice*, borrowed;
 * may be NULL) is the host's USB devices, which USB hostdevs are resolved
 * with (bus and device numbers, else the only device of the vendor and
 * product, as libvirt's virHostdevFindUSBDevice does); without it, or when
 * a hostdev names no device or several, the hostdev is
 * AV_AUDIT_UNRESOLVED and no USB device of that domain is released.
 * @in_flight (may be NULL) says which devices accelvirt itself is
 * attaching or detaching: they are skipped.  @by ("audit", "watch") goes
 * into the journal entries ("by", and "released_by" of a release).
 * *ret_findings gets the findings (AvAuditFinding*, caller frees), in the
 * order of @domains and their hostdevs, then the devices of domains not
 * running; *ret_dirtied (may be NULL) whether a device became dirty (the
 * caller starts the scrub worker).  Running it twice changes nothing the
 * second time.  FALSE with @error when the journal or the save fails: the
 * pool must then not be saved by the caller. */
gboolean av_pool_audit(AvPool *pool, const GPtrArray *domains, const GPtrArray *usb,
                       AvAuditInFlightFunc in_flight, const char *by, AvAuditFlags flags,
                       GPtrArray **ret_findings, gboolean *ret_dirtied, GError **error);

/* As av_pool_audit(), and besides: @held (may be NULL) maps the identity
 * (char*) of pool devices that are free to a description (char*) of a
 * process that holds their IOMMU group (av_vfio_holder_describe()), as the
 * caller read it from the kernel under the pool's lock.  Each such device
 * that no domain of @domains names is AV_AUDIT_HELD_OUTSIDE: journalled
 * ("violation", "by") and quarantined: it may hold what that process wrote,
 * and it was never scrubbed after it. */
gboolean av_pool_audit_full(AvPool *pool, const GPtrArray *domains, GHashTable *held, const GPtrArray *usb,
                            AvAuditInFlightFunc in_flight, const char *by, AvAuditFlags flags,
                            GPtrArray **ret_findings, gboolean *ret_dirtied, GError **error);

/* TRUE when @findings (AvAuditFinding*) hold an AV_AUDIT_UNRESOLVED one:
 * the audit could not tell everything running domains hold. */
gboolean av_audit_findings_unresolved(const GPtrArray *findings);

G_END_DECLS
