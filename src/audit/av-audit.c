/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the audit of the pool against the running domains.
 * See av-audit.h for the rules.
 *
 * The audit works in two passes: the first decides, for every device, what
 * to do (the findings), changing nothing; the second, skipped on a dry run,
 * carries the findings out (journal entries, transitions) and saves once. */
#include "config.h"

#include "audit/av-audit.h"

#include <string.h>

#include "pool/av-pool.h"
#include "util/av-error.h"
#include "util/av-json.h"

/* --- the domains handed in --------------------------------------------------------- */

static void
av_audit_hostdev_free(AvAuditHostdev *hostdev)
{
    if (!hostdev)
        return;
    g_free(hostdev->pci_address);
    g_free(hostdev->mdev_uuid);
    g_free(hostdev);
}

/* See av-audit.h. */
AvAuditDomain *
av_audit_domain_new(const char *uuid, const char *name, gint64 seen_at)
{
    AvAuditDomain *domain = g_new0(AvAuditDomain, 1);

    domain->uuid = g_strdup(uuid);
    domain->name = g_strdup(name);
    domain->seen_at = seen_at;
    domain->hostdevs = g_ptr_array_new_with_free_func((GDestroyNotify)av_audit_hostdev_free);
    domain->unresolved = g_ptr_array_new_with_free_func(g_free);
    domain->netdevs = g_ptr_array_new_with_free_func(g_free);
    return domain;
}

/* See av-audit.h. */
void
av_audit_domain_free(AvAuditDomain *domain)
{
    if (!domain)
        return;
    g_free(domain->uuid);
    g_free(domain->name);
    g_free(domain->unreadable);
    g_ptr_array_unref(domain->hostdevs);
    g_ptr_array_unref(domain->unresolved);
    g_ptr_array_unref(domain->netdevs);
    g_free(domain);
}

static AvAuditHostdev *
av_audit_domain_add(AvAuditDomain *domain, AvAuditHostdevKind kind)
{
    AvAuditHostdev *hostdev = g_new0(AvAuditHostdev, 1);

    hostdev->kind = kind;
    hostdev->usb_bus = -1;
    hostdev->usb_device = -1;
    g_ptr_array_add(domain->hostdevs, hostdev);
    return hostdev;
}

/* See av-audit.h. */
void
av_audit_domain_add_pci(AvAuditDomain *domain, const char *address)
{
    av_audit_domain_add(domain, AV_AUDIT_HOSTDEV_PCI)->pci_address = g_strdup(address);
}

/* See av-audit.h. */
void
av_audit_domain_add_mdev(AvAuditDomain *domain, const char *uuid)
{
    av_audit_domain_add(domain, AV_AUDIT_HOSTDEV_MDEV)->mdev_uuid = g_strdup(uuid);
}

/* See av-audit.h. */
void
av_audit_domain_add_usb(AvAuditDomain *domain, guint16 vendor, guint16 product, int bus, int device)
{
    AvAuditHostdev *hostdev = av_audit_domain_add(domain, AV_AUDIT_HOSTDEV_USB);

    hostdev->usb_vendor = vendor;
    hostdev->usb_product = product;
    hostdev->usb_bus = bus;
    hostdev->usb_device = device;
}

/* See av-audit.h. */
void
av_audit_domain_add_unresolved(AvAuditDomain *domain, const char *why)
{
    g_ptr_array_add(domain->unresolved, g_strdup(why));
}

/* --- findings ----------------------------------------------------------------------- */

static const char *const av_audit_action_names[] = {
    [AV_AUDIT_ATTACHED_OUTSIDE] = "attached-outside",
    [AV_AUDIT_VIOLATION] = "violation",
    [AV_AUDIT_DETACHED_OUTSIDE] = "detached-outside",
    [AV_AUDIT_NOT_RUNNING] = "not-running",
    [AV_AUDIT_CHANGED] = "changed",
    [AV_AUDIT_UNRESOLVED] = "unresolved",
    [AV_AUDIT_HELD_OUTSIDE] = "held-outside",
};

/* See av-audit.h. */
const char *
av_audit_action_to_string(AvAuditAction action)
{
    if ((guint)action >= G_N_ELEMENTS(av_audit_action_names))
        return "?";
    return av_audit_action_names[action];
}

/* See av-audit.h. */
void
av_audit_finding_free(AvAuditFinding *finding)
{
    if (!finding)
        return;
    g_free(finding->domain_uuid);
    g_free(finding->domain_name);
    g_free(finding->identity);
    g_free(finding->address);
    g_free(finding->detail);
    g_free(finding);
}

/* See av-audit.h. */
json_t *
av_audit_finding_to_json(const AvAuditFinding *finding)
{
    return json_pack("{s:s,s:o,s:o,s:o,s:o,s:s,s:s,s:o}", "action", av_audit_action_to_string(finding->action),
                     "domain_uuid", av_json_string_or_null(finding->domain_uuid), "domain_name",
                     av_json_string_or_null(finding->domain_name), "identity",
                     av_json_string_or_null(finding->identity), "address", av_json_string_or_null(finding->address),
                     "from", av_device_state_to_string(finding->from), "state",
                     av_device_state_to_string(finding->state), "detail", av_json_string_or_null(finding->detail));
}

/* A finding about @dev (may be NULL) and @domain (may be NULL: then the
 * device's owner); @detail taken over.  Added to @findings; returned
 * borrowed. */
static AvAuditFinding *
av_audit_note(GPtrArray *findings, AvAuditAction action, const AvAuditDomain *domain, const AvPoolDevice *dev,
              char *detail)
{
    AvAuditFinding *finding = g_new0(AvAuditFinding, 1);

    finding->action = action;
    if (domain) {
        finding->domain_uuid = g_strdup(domain->uuid);
        finding->domain_name = g_strdup(domain->name);
    } else if (dev && dev->owner) {
        finding->domain_uuid = g_strdup(dev->owner->domain_uuid);
        finding->domain_name = g_strdup(dev->owner->domain_name);
    }
    if (dev) {
        finding->identity = g_strdup(dev->identity);
        finding->address = g_strdup(dev->address);
        finding->from = dev->state;
        finding->state = dev->state;
    }
    finding->detail = detail;
    g_ptr_array_add(findings, finding);
    return finding;
}

/* --- which pool device a hostdev names ----------------------------------------------- */

/* The device of @usb libvirt gives the USB hostdev @h
 * (virHostdevFindUSBDevice): the one at its bus and device numbers when
 * they name one with its vendor and product (or it gives none), else the
 * only device with its vendor and product.  NULL with *ret_why when none or
 * several. */
static const AvUsbDevice *
av_audit_find_usb(const GPtrArray *usb, const AvAuditHostdev *h, char **ret_why)
{
    const AvUsbDevice *at = NULL;
    const AvUsbDevice *only = NULL;
    guint matches = 0;

    for (guint i = 0; usb && i < usb->len; i++) {
        const AvUsbDevice *u = g_ptr_array_index(usb, i);

        if (h->usb_bus > 0 && h->usb_device > 0 && u->busnum == (guint)h->usb_bus &&
            u->devnum == (guint)h->usb_device)
            at = u;
        if (h->usb_vendor && u->vendor_id == h->usb_vendor && u->product_id == h->usb_product) {
            matches++;
            only = u;
        }
    }
    if (at && (!h->usb_vendor || (at->vendor_id == h->usb_vendor && at->product_id == h->usb_product)))
        return at;
    if (matches == 1)
        return only;
    *ret_why = g_strdup_printf("USB hostdev (vendor 0x%04x product 0x%04x, bus %d device %d) names %s", h->usb_vendor,
                               h->usb_product, h->usb_bus, h->usb_device,
                               !usb ? "a device the audit could not look up (no USB scan)"
                               : matches > 1 ? "several devices of this host: which one it holds is unknown"
                                             : "no device of this host");
    return NULL;
}

static gboolean av_audit_in_use_by(const AvPoolDevice *dev, const AvAuditDomain *domain);

/* The stick @domain holds that its USB hostdev @h names although no device
 * presents @h's ids and numbers any more: a stick whose firmware changed its
 * ids and re-enumerated it (a profile's "runtime_ids", av_pool_reconcile()),
 * which keeps the identity of its first ids.  The only USB entry claimed or
 * in use by @domain whose identity has @h's vendor and product, at a port of
 * @h's bus where a device of that vendor presents other ids.  Only ever the
 * domain's own stick: at worst an unresolved hostdev reads as the stick the
 * domain holds, never as another's.  NULL when there is none or several. */
static AvPoolDevice *
av_audit_find_reenumerated(const AvPool *pool, const GPtrArray *usb, const AvAuditHostdev *h,
                           const AvAuditDomain *domain)
{
    g_autofree char *prefix = g_strdup_printf("usb:%04x:%04x", h->usb_vendor, h->usb_product);
    GPtrArray *devices = av_pool_devices(pool);
    AvPoolDevice *found = NULL;

    for (guint i = 0; domain && usb && h->usb_vendor && i < devices->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(devices, i);
        const AvUsbDevice *there = NULL;

        if (dev->kind != AV_DEVICE_KIND_USB || !dev->address || !g_str_has_prefix(dev->identity, prefix) ||
            !av_audit_in_use_by(dev, domain))
            continue;
        for (guint j = 0; j < usb->len && !there; j++) {
            const AvUsbDevice *u = g_ptr_array_index(usb, j);

            if (g_str_equal(u->bus_path, dev->address))
                there = u;
        }
        if (!there || there->vendor_id != h->usb_vendor || there->product_id == h->usb_product ||
            (h->usb_bus > 0 && there->busnum != (guint)h->usb_bus))
            continue;
        if (found)
            return NULL;
        found = dev;
    }
    return found;
}

/* The pool device that @h, a host device of @domain (may be NULL), names,
 * in *ret_dev (NULL: none of the pool's).  FALSE with *ret_why when it
 * cannot be told (USB). */
static gboolean
av_audit_resolve(const AvPool *pool, const GPtrArray *usb, const AvAuditDomain *domain, const AvAuditHostdev *h,
                 AvPoolDevice **ret_dev, char **ret_why)
{
    *ret_dev = NULL;
    switch (h->kind) {
    case AV_AUDIT_HOSTDEV_PCI:
        *ret_dev = h->pci_address ? av_pool_find_address(pool, AV_DEVICE_KIND_PCI, h->pci_address) : NULL;
        return TRUE;
    case AV_AUDIT_HOSTDEV_MDEV: {
        g_autofree char *identity = h->mdev_uuid ? av_pool_identity_mdev(h->mdev_uuid) : NULL;
        AvPoolDevice *dev = identity ? av_pool_find(pool, identity) : NULL;

        *ret_dev = dev && dev->kind == AV_DEVICE_KIND_MDEV ? dev : NULL;
        return TRUE;
    }
    case AV_AUDIT_HOSTDEV_USB: {
        const AvUsbDevice *u = av_audit_find_usb(usb, h, ret_why);

        if (!u) {
            *ret_dev = av_audit_find_reenumerated(pool, usb, h, domain);
            if (!*ret_dev)
                return FALSE;
            g_clear_pointer(ret_why, g_free);
            return TRUE;
        }
        /* The entry at its port whatever ids it presents (a stick showing
         * its runtime ids keeps the identity of its first ids): named by a
         * domain that does not hold it, it is flagged as attached outside. */
        *ret_dev = av_pool_find_address(pool, AV_DEVICE_KIND_USB, u->bus_path);
        if (!*ret_dev)
            *ret_dev = av_pool_find_usb(pool, u);
        return TRUE;
    }
    }
    return TRUE;
}

/* --- the rules ------------------------------------------------------------------------- */

/* TRUE when @owner is the domain @domain (by UUID, else by name). */
static gboolean
av_audit_owner_is(const AvOwner *owner, const AvAuditDomain *domain)
{
    if (!owner)
        return FALSE;
    if (owner->domain_uuid && domain->uuid)
        return g_ascii_strcasecmp(owner->domain_uuid, domain->uuid) == 0;
    return owner->domain_name && domain->name && g_str_equal(owner->domain_name, domain->name);
}

/* "domain 'NAME' (UUID)".  Caller frees. */
static char *
av_audit_describe(const AvAuditDomain *domain)
{
    return g_strdup_printf("domain '%s' (%s)", domain->name ? domain->name : "?", domain->uuid ? domain->uuid : "?");
}

/* TRUE when @dev is in use by @domain (or was when it went missing). */
static gboolean
av_audit_in_use_by(const AvPoolDevice *dev, const AvAuditDomain *domain)
{
    AvDeviceState state = dev->state == AV_DEVICE_STATE_MISSING ? dev->state_before_missing : dev->state;

    return state == AV_DEVICE_STATE_IN_USE && av_audit_owner_is(dev->owner, domain);
}

/* The quarantine reason of a device a domain got behind accelvirt's back
 * (av_audit_reason()) begins with this, then names the domain's UUID. */
#define AV_AUDIT_REASON_PREFIX "attached behind accelvirt's back to domain "

/* The reason @dev, which @finding's domain holds, is quarantined with:
 * the domain, the state it was in, and why it was quarantined before.
 * Caller frees. */
static char *
av_audit_reason(const AvAuditFinding *finding, const AvPoolDevice *dev)
{
    const char *before = dev->state == AV_DEVICE_STATE_MISSING ? dev->reason_before_missing : dev->reason;
    gboolean was_quarantined = dev->state == AV_DEVICE_STATE_QUARANTINED ||
                               (dev->state == AV_DEVICE_STATE_MISSING &&
                                dev->state_before_missing == AV_DEVICE_STATE_QUARANTINED);

    return g_strdup_printf(AV_AUDIT_REASON_PREFIX "%s ('%s') while it was %s%s%s",
                           finding->domain_uuid ? finding->domain_uuid : "?",
                           finding->domain_name ? finding->domain_name : "?",
                           av_device_state_to_string(finding->from),
                           was_quarantined && before ? "; quarantined before for: " : "",
                           was_quarantined && before ? before : "");
}

/* TRUE when @dev is quarantined (or will come back quarantined) because
 * @domain got it behind accelvirt's back: an earlier audit caught it. */
static gboolean
av_audit_caught(const AvPoolDevice *dev, const AvAuditDomain *domain)
{
    g_autofree char *prefix = NULL;
    const char *reason = dev->reason;

    if (dev->state == AV_DEVICE_STATE_MISSING) {
        if (dev->state_before_missing != AV_DEVICE_STATE_QUARANTINED)
            return FALSE;
        reason = dev->reason_before_missing;
    } else if (dev->state != AV_DEVICE_STATE_QUARANTINED) {
        return FALSE;
    }
    prefix = g_strdup_printf(AV_AUDIT_REASON_PREFIX "%s ", domain->uuid ? domain->uuid : "?");
    return reason && g_str_has_prefix(reason, prefix);
}

/* The rule for the device @dev that @domain's live XML names.  Adds at
 * most one finding. */
static void
av_audit_named(const AvPool *pool, const AvAuditDomain *domain, const AvPoolDevice *dev,
               AvAuditInFlightFunc in_flight, GPtrArray *findings)
{
    g_autofree char *who = av_audit_describe(domain);
    g_autofree char *holder = NULL;
    const char *state = av_device_state_to_string(dev->state);

    /* Its own device, or the scrub VM made for it. */
    if (av_audit_in_use_by(dev, domain))
        return;
    if ((dev->state == AV_DEVICE_STATE_SCRUBBING || dev->state == AV_DEVICE_STATE_QUARANTINED) && domain->uuid &&
        av_pool_is_scrub_domain(dev, domain->uuid))
        return;
    if (in_flight && in_flight(av_pool_state_dir(pool), dev->identity))
        return;
    /* A device with an identity problem is never handed to anyone
     * (av_pool_device_may_be_freed()): a violation, whatever its state. */
    if (!dev->identity_problem &&
        (dev->state == AV_DEVICE_STATE_FREE ||
         (dev->state == AV_DEVICE_STATE_CLAIMED && av_audit_owner_is(dev->owner, domain)))) {
        AvAuditFinding *f = av_audit_note(findings, AV_AUDIT_ATTACHED_OUTSIDE, domain, dev,
                                          g_strdup_printf("%s got %s (%s) outside accelvirt while it was %s: "
                                                          "now in use by it", who, dev->identity,
                                                          dev->address ? dev->address : "-", state));

        f->state = AV_DEVICE_STATE_IN_USE;
        return;
    }
    /* Already caught: the audit is idempotent. */
    if (av_audit_caught(dev, domain))
        return;
    /* The live XML may be older than the device's last change: the domain
     * stopped (its hook released the device) after it was read. */
    if (domain->seen_at > 0 && dev->state_since >= domain->seen_at) {
        av_audit_note(findings, AV_AUDIT_CHANGED, domain, dev,
                      g_strdup_printf("%s names %s (%s), which became %s after its live XML was read: left to the "
                                      "next audit", who, dev->identity, dev->address ? dev->address : "-", state));
        return;
    }
    holder = av_owner_describe(dev->owner);
    {
        AvAuditFinding *f = av_audit_note(findings, AV_AUDIT_VIOLATION, domain, dev,
                                          g_strdup_printf("%s holds %s (%s), which is %s%s%s: attached behind "
                                                          "accelvirt's back; quarantined until the operator "
                                                          "clears it", who, dev->identity,
                                                          dev->address ? dev->address : "-", state,
                                                          dev->owner ? " by " : "", dev->owner ? holder : ""));

        f->state = dev->state == AV_DEVICE_STATE_MISSING ? AV_DEVICE_STATE_MISSING : AV_DEVICE_STATE_QUARANTINED;
    }
}

/* The rules for one running @domain: the devices it names, then the
 * devices in use by it that it no longer names. */
static void
av_audit_domain(const AvPool *pool, const AvAuditDomain *domain, const GPtrArray *usb,
                AvAuditInFlightFunc in_flight, GPtrArray *findings)
{
    g_autoptr(GHashTable) named = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_autofree char *who = av_audit_describe(domain);
    gboolean usb_unknown = FALSE;
    GPtrArray *devices = av_pool_devices(pool);

    if (domain->unreadable) {
        av_audit_note(findings, AV_AUDIT_UNRESOLVED, domain, NULL,
                      g_strdup_printf("%s: %s; the devices in use by it are left as they are, and a free device "
                                      "it may hold is found only by its IOMMU group (a full audit)", who,
                                      domain->unreadable));
        return;
    }
    for (guint i = 0; i < domain->unresolved->len; i++)
        av_audit_note(findings, AV_AUDIT_UNRESOLVED, domain, NULL,
                      g_strdup_printf("%s: %s; the devices in use by it are left as they are", who,
                                      (const char *)g_ptr_array_index(domain->unresolved, i)));
    for (guint i = 0; i < domain->hostdevs->len; i++) {
        const AvAuditHostdev *h = g_ptr_array_index(domain->hostdevs, i);
        g_autofree char *why = NULL;
        AvPoolDevice *dev = NULL;

        if (!av_audit_resolve(pool, usb, domain, h, &dev, &why)) {
            usb_unknown = TRUE;
            av_audit_note(findings, AV_AUDIT_UNRESOLVED, domain, NULL,
                          g_strdup_printf("%s: %s; its USB devices are left as they are", who, why));
            continue;
        }
        if (!dev || g_hash_table_contains(named, dev))
            continue;
        g_hash_table_add(named, dev);
        av_audit_named(pool, domain, dev, in_flight, findings);
    }
    for (guint i = 0; i < devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(devices, i);

        if (!av_audit_in_use_by(dev, domain) || g_hash_table_contains(named, dev))
            continue;
        /* A hostdev the reader could not tell may be this device. */
        if ((dev->kind == AV_DEVICE_KIND_USB && usb_unknown) || domain->unresolved->len > 0)
            continue;
        if (in_flight && in_flight(av_pool_state_dir(pool), dev->identity))
            continue;
        if (domain->seen_at > 0 && dev->state_since >= domain->seen_at) {
            av_audit_note(findings, AV_AUDIT_CHANGED, domain, dev,
                          g_strdup_printf("%s does not name %s (%s), which became %s after its live XML was read: "
                                          "left to the next audit", who, dev->identity,
                                          dev->address ? dev->address : "-", av_device_state_to_string(dev->state)));
            continue;
        }
        {
            AvAuditFinding *f = av_audit_note(findings, AV_AUDIT_DETACHED_OUTSIDE, domain, dev,
                                              g_strdup_printf("%s no longer holds %s (%s): detached outside "
                                                              "accelvirt; released, to be scrubbed", who,
                                                              dev->identity, dev->address ? dev->address : "-"));

            f->state = dev->state == AV_DEVICE_STATE_MISSING ? AV_DEVICE_STATE_MISSING : AV_DEVICE_STATE_DIRTY;
        }
    }
}

/* The devices in use by domains not among @domains: reported only. */
static void
av_audit_not_running(const AvPool *pool, const GPtrArray *domains, GPtrArray *findings)
{
    GPtrArray *devices = av_pool_devices(pool);

    for (guint i = 0; i < devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(devices, i);
        AvDeviceState state = dev->state == AV_DEVICE_STATE_MISSING ? dev->state_before_missing : dev->state;
        gboolean running = FALSE;
        g_autofree char *holder = NULL;

        if (state != AV_DEVICE_STATE_IN_USE)
            continue;
        for (guint j = 0; j < domains->len && !running; j++)
            running = av_audit_owner_is(dev->owner, g_ptr_array_index(domains, j));
        if (running)
            continue;
        holder = av_owner_describe(dev->owner);
        av_audit_note(findings, AV_AUDIT_NOT_RUNNING, NULL, dev,
                      g_strdup_printf("%s (%s) is in use by %s, which is not running: its release is left to "
                                      "'accelvirt reconcile' or 'accelvirt release'", dev->identity,
                                      dev->address ? dev->address : "-", holder));
    }
}

/* TRUE when a domain of @domains names @dev (its live XML, as resolved). */
static gboolean
av_audit_named_by_any(const AvPool *pool, const GPtrArray *domains, const GPtrArray *usb, const AvPoolDevice *dev)
{
    for (guint i = 0; i < domains->len; i++) {
        const AvAuditDomain *domain = g_ptr_array_index(domains, i);

        for (guint j = 0; domain->hostdevs && j < domain->hostdevs->len; j++) {
            g_autofree char *why = NULL;
            AvPoolDevice *named = NULL;

            if (av_audit_resolve(pool, usb, domain, g_ptr_array_index(domain->hostdevs, j), &named, &why) &&
                named == dev)
                return TRUE;
        }
    }
    return FALSE;
}

/* The free devices of @held (identity -> holder) that no domain names:
 * a process has them outside every domain the audit could read. */
static void
av_audit_held_outside(const AvPool *pool, const GPtrArray *domains, GHashTable *held, const GPtrArray *usb,
                      AvAuditInFlightFunc in_flight, GPtrArray *findings)
{
    GPtrArray *devices = av_pool_devices(pool);

    for (guint i = 0; held && i < devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(devices, i);
        const char *holder = g_hash_table_lookup(held, dev->identity);
        AvAuditFinding *f;

        if (!holder || dev->state != AV_DEVICE_STATE_FREE || av_audit_named_by_any(pool, domains, usb, dev))
            continue;
        if (in_flight && in_flight(av_pool_state_dir(pool), dev->identity))
            continue;
        f = av_audit_note(findings, AV_AUDIT_HELD_OUTSIDE, NULL, dev,
                          g_strdup_printf("%s (%s) is free but process %s holds its IOMMU group, and no running "
                                          "domain the audit could read names it: quarantined as unscrubbed until "
                                          "the operator clears it", dev->identity, dev->address ? dev->address : "-",
                                          holder));
        f->state = AV_DEVICE_STATE_QUARANTINED;
    }
}

/* --- carrying the findings out ----------------------------------------------------------- */

/* The journal's facts of @finding, with "by" @by. */
static json_t *
av_audit_facts(const AvAuditFinding *finding, const AvPoolDevice *dev, const char *by)
{
    return json_pack("{s:o,s:o,s:s,s:o,s:s}", "domain_uuid", av_json_string_or_null(finding->domain_uuid),
                     "domain_name", av_json_string_or_null(finding->domain_name), "from",
                     av_device_state_to_string(finding->from), "owner", av_owner_to_json(dev->owner), "by", by);
}

static gboolean
av_audit_apply(AvPool *pool, const AvAuditFinding *finding, const char *by, gboolean *dirtied, GError **error)
{
    AvPoolDevice *dev = finding->identity ? av_pool_find(pool, finding->identity) : NULL;
    g_autoptr(json_t) facts = NULL;

    if (!dev)
        return TRUE;
    facts = av_audit_facts(finding, dev, by);
    switch (finding->action) {
    case AV_AUDIT_ATTACHED_OUTSIDE: {
        g_autoptr(AvOwner) owner = av_owner_new(finding->domain_uuid, finding->domain_name);

        if (!av_pool_journal_device(pool, "attached-outside", dev, facts, error))
            return FALSE;
        if (dev->state == AV_DEVICE_STATE_FREE && !av_pool_claim(pool, dev, owner, 0, error))
            return FALSE;
        return av_pool_transition(pool, dev, AV_DEVICE_STATE_IN_USE, owner, NULL, error);
    }
    case AV_AUDIT_VIOLATION: {
        g_autofree char *reason = av_audit_reason(finding, dev);
        g_autoptr(json_t) extra = json_pack("{s:s,s:o}", "violation_by", by, "violation_domain",
                                            av_json_string_or_null(finding->domain_uuid));

        if (!av_pool_journal_device(pool, "violation", dev, facts, error))
            return FALSE;
        return av_pool_quarantine_force(pool, dev, reason, extra, error);
    }
    case AV_AUDIT_DETACHED_OUTSIDE: {
        gboolean moved = FALSE;

        if (!av_pool_release_device(pool, dev, by, &moved, error))
            return FALSE;
        *dirtied = *dirtied || moved;
        return av_pool_journal_device(pool, "detached-outside", dev, facts, error);
    }
    case AV_AUDIT_HELD_OUTSIDE: {
        g_autofree char *reason = g_strdup_printf("held outside accelvirt while it was free: %s", finding->detail);
        g_autoptr(json_t) extra = json_pack("{s:s}", "violation_by", by);

        json_object_set_new(facts, "detail", json_string(finding->detail));
        if (!av_pool_journal_device(pool, "violation", dev, facts, error))
            return FALSE;
        return av_pool_quarantine_force(pool, dev, reason, extra, error);
    }
    case AV_AUDIT_NOT_RUNNING:
    case AV_AUDIT_CHANGED:
    case AV_AUDIT_UNRESOLVED:
        return TRUE;
    }
    return TRUE;
}

/* See av-audit.h. */
gboolean
av_pool_audit(AvPool *pool, const GPtrArray *domains, const GPtrArray *usb, AvAuditInFlightFunc in_flight,
              const char *by, AvAuditFlags flags, GPtrArray **ret_findings, gboolean *ret_dirtied, GError **error)
{
    return av_pool_audit_full(pool, domains, NULL, usb, in_flight, by, flags, ret_findings, ret_dirtied, error);
}

/* See av-audit.h. */
gboolean
av_audit_findings_unresolved(const GPtrArray *findings)
{
    for (guint i = 0; findings && i < findings->len; i++)
        if (((const AvAuditFinding *)g_ptr_array_index(findings, i))->action == AV_AUDIT_UNRESOLVED)
            return TRUE;
    return FALSE;
}

/* See av-audit.h. */
gboolean
av_pool_audit_full(AvPool *pool, const GPtrArray *domains, GHashTable *held, const GPtrArray *usb,
                   AvAuditInFlightFunc in_flight, const char *by, AvAuditFlags flags, GPtrArray **ret_findings,
                   gboolean *ret_dirtied, GError **error)
{
    g_autoptr(GPtrArray) findings = g_ptr_array_new_with_free_func((GDestroyNotify)av_audit_finding_free);
    gboolean changed = FALSE;
    gboolean dirtied = FALSE;

    for (guint i = 0; i < domains->len; i++)
        av_audit_domain(pool, g_ptr_array_index(domains, i), usb, in_flight, findings);
    av_audit_held_outside(pool, domains, held, usb, in_flight, findings);
    if (flags & AV_AUDIT_ALL)
        av_audit_not_running(pool, domains, findings);
    if (!(flags & AV_AUDIT_DRY_RUN)) {
        for (guint i = 0; i < findings->len; i++) {
            const AvAuditFinding *finding = g_ptr_array_index(findings, i);

            if (!av_audit_apply(pool, finding, by, &dirtied, error))
                return FALSE;
            changed = changed || finding->state != finding->from || finding->action == AV_AUDIT_VIOLATION ||
                      finding->action == AV_AUDIT_HELD_OUTSIDE;
        }
        if (changed && !av_pool_save(pool, error))
            return FALSE;
    }
    *ret_findings = g_steal_pointer(&findings);
    if (ret_dirtied)
        *ret_dirtied = dirtied;
    return TRUE;
}
