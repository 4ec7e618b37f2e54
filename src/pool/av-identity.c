/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: stable identities of pooled devices.
 *
 * A bus address is not an identity: adding a card or a firmware update can
 * renumber every bus below a root port.  What survives is the device's own
 * serial number (PCIe DSN, PCIe Base Spec 7.9.3), the physical slot the
 * platform names, or the chain of device.function numbers from the root bus,
 * which does not depend on the numbers given to the buses in between.
 *
 * A DSN is only as good as the vendor programmed it: boards leave it 0 or
 * all ones, and some ship many cards with one serial.  The first two count as
 * no DSN; the DSN form carries the vendor and device ids; and two devices of
 * one scan with one identity are told apart by reconciliation (av-pool.c),
 * which falls back to their slot, path or port identities. */
#include "config.h"

#include "av-pool-private.h"

#include <stdio.h>
#include <string.h>

/* The PCI address parsed into its parts.  FALSE for anything else.  The
 * domain may have 4 to 8 digits (Intel VMD puts its children in domains
 * above 0xffff: "10000:e1:00.0"). */
static gboolean
av_identity_parse_address(const char *address, guint *ret_domain, guint *ret_bus,
                          guint *ret_slot, guint *ret_function)
{
    guint domain, bus, slot, function;
    int end = 0;

    if (!av_pci_address_is_valid(address) ||
        sscanf(address, "%x:%x:%x.%x%n", &domain, &bus, &slot, &function, &end) != 4 ||
        address[end] != '\0')
        return FALSE;
    *ret_domain = domain;
    *ret_bus = bus;
    *ret_slot = slot;
    *ret_function = function;
    return TRUE;
}

/* "@path:DDDD:RR/DD.F/.../DD.F": @dev and its upstream bridges, from the
 * device on the root bus down, with the root bus number and no other. */
static char *
av_identity_path(const AvHost *host, const AvPciDevice *dev)
{
    g_autoptr(GPtrArray) chain = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GString) out = g_string_new("@path:");
    const char *address = dev->address;
    const char *parent = dev->parent_bridge;
    guint domain = 0, bus = 0, slot = 0, function = 0;

    /* At most 256 levels: a loop in a broken tree must not hang us. */
    for (guint depth = 0; depth < 256; depth++) {
        const AvPciDevice *up;

        if (!av_identity_parse_address(address, &domain, &bus, &slot, &function))
            break;
        g_ptr_array_add(chain, g_strdup_printf("%02x.%x", slot, function));
        if (!parent)
            break;
        up = av_host_find_pci(host, parent);
        address = parent;
        parent = up ? up->parent_bridge : NULL;
        if (!up) {
            /* The bridge is not in the scan: it is the top we know. */
            if (av_identity_parse_address(address, &domain, &bus, &slot, &function))
                g_ptr_array_add(chain, g_strdup_printf("%02x.%x", slot, function));
            break;
        }
    }
    g_string_append_printf(out, "%04x:%02x", domain, bus);
    for (guint i = chain->len; i > 0; i--)
        g_string_append_printf(out, "/%s", (const char *)g_ptr_array_index(chain, i - 1));
    return g_string_free(g_steal_pointer(&out), FALSE);
}

/* TRUE when @dev has a DSN that can tell it apart: 0 and all ones are what
 * boards without a programmed serial (and absent devices) report, so they
 * count as no DSN at all. */
static gboolean
av_identity_has_dsn(const AvPciDevice *dev)
{
    return dev->has_dsn && dev->dsn != 0 && dev->dsn != G_MAXUINT64;
}

/* The identity of @dev by itself (not through its PF); with @use_dsn FALSE
 * the slot or path form even when the device has a DSN. */
static char *
av_identity_pci_own(const AvHost *host, const AvPciDevice *dev, gboolean use_dsn)
{
    guint domain = 0, bus = 0, slot = 0, function = 0;
    g_autofree char *where = NULL;

    av_identity_parse_address(dev->address, &domain, &bus, &slot, &function);
    if (use_dsn && av_identity_has_dsn(dev))
        return g_strdup_printf("dsn:%04x:%04x:%016" G_GINT64_MODIFIER "x.f%u", dev->vendor_id,
                               dev->device_id, dev->dsn, function);
    if (dev->physical_slot && *dev->physical_slot)
        where = g_strdup_printf("@slot:%s.f%u", dev->physical_slot, function);
    else
        where = av_identity_path(host, dev);
    return g_strdup_printf("pci:%04x:%04x:%04x:%04x%s", dev->vendor_id, dev->device_id,
                           dev->subsystem_vendor_id, dev->subsystem_device_id, where);
}

static char *
av_identity_pci(const AvHost *host, const AvPciDevice *dev, gboolean use_dsn)
{
    if (dev->physfn && dev->vf_index >= 0) {
        const AvPciDevice *pf = av_host_find_pci(host, dev->physfn);

        if (pf && !pf->physfn) {
            g_autofree char *pf_identity = av_identity_pci_own(host, pf, use_dsn);

            return g_strdup_printf("%s/vf%d", pf_identity, dev->vf_index);
        }
    }
    return av_identity_pci_own(host, dev, use_dsn);
}

/* See av-pool.h.  "dsn:VVVV:DDDD:0123456789abcdef.fN[/vfK]" or
 * "pci:VVVV:DDDD:...": the ids are the first two fields after the form's
 * name. */
char **
av_pool_identity_presenters(const AvRoot *root, const char *identity, GError **error)
{
    g_autoptr(GPtrArray) reads = NULL;
    g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func(g_free);
    guint vendor, device;
    guint64 dsn = 0;
    gboolean by_dsn;
    int end = 0;

    by_dsn = identity && g_str_has_prefix(identity, "dsn:");
    if (!identity || !(by_dsn || g_str_has_prefix(identity, "pci:")) ||
        strspn(identity + 4, "0123456789abcdef") != 4 || identity[8] != ':' ||
        strspn(identity + 9, "0123456789abcdef") != 4 || identity[13] != ':' ||
        sscanf(identity + 4, "%4x:%4x:%n", &vendor, &device, &end) != 2 || end != 10) {
        g_ptr_array_add(out, NULL);
        return (char **)g_ptr_array_free(g_steal_pointer(&out), FALSE);
    }
    if (by_dsn) {
        g_autofree char *hex = g_strndup(identity + 14, 16);

        if (strlen(hex) != 16 || strspn(hex, "0123456789abcdef") != 16) {
            g_ptr_array_add(out, NULL);
            return (char **)g_ptr_array_free(g_steal_pointer(&out), FALSE);
        }
        dsn = g_ascii_strtoull(hex, NULL, 16);
    }
    reads = av_pci_find_by_ids(root, (guint16)vendor, (guint16)device, error);
    if (!reads)
        return NULL;
    for (guint i = 0; i < reads->len; i++) {
        const AvPciIdRead *read = g_ptr_array_index(reads, i);
        AvPciDevice probe = { .has_dsn = read->has_dsn, .dsn = read->dsn };
        gboolean tells = av_identity_has_dsn(&probe);

        if (!read->known || (by_dsn ? tells && read->dsn == dsn : !tells))
            g_ptr_array_add(out, g_strdup(read->address));
    }
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(g_steal_pointer(&out), FALSE);
}

/* See av-pool.h. */
char *
av_pool_match_ids_pci(const AvPciDevice *dev)
{
    return g_strdup_printf("%04x:%04x %04x:%04x %06x %02x", dev->vendor_id, dev->device_id,
                           dev->subsystem_vendor_id, dev->subsystem_device_id, dev->class_code & 0xffffff,
                           dev->revision);
}

/* See av-pool.h. */
gboolean
av_pool_match_ids_valid(const char *text)
{
    static const char shape[] = "hhhh:hhhh hhhh:hhhh hhhhhh hh";

    if (!text || strlen(text) != sizeof(shape) - 1)
        return FALSE;
    for (gsize i = 0; shape[i]; i++) {
        if (shape[i] == 'h' ? !(g_ascii_isdigit(text[i]) || (text[i] >= 'a' && text[i] <= 'f'))
                            : text[i] != shape[i])
            return FALSE;
    }
    return TRUE;
}

/* See av-pool.h.  A VF whose PF is not in @host falls back to its own
 * identity.  Caller frees. */
char *
av_pool_identity_pci(const AvHost *host, const AvPciDevice *dev)
{
    return av_identity_pci(host, dev, TRUE);
}

/* See av-pool-private.h.  Caller frees. */
char *
av_pool_identity_pci_fallback(const AvHost *host, const AvPciDevice *dev)
{
    return av_identity_pci(host, dev, FALSE);
}

/* See av-pool.h.  Caller frees. */
char *
av_pool_identity_usb(const AvUsbDevice *dev)
{
    if (dev->serial && *dev->serial)
        return g_strdup_printf("usb:%04x:%04x:serial:%s", dev->vendor_id, dev->product_id, dev->serial);
    return av_pool_identity_usb_fallback(dev);
}

/* See av-pool.h.  Caller frees. */
char *
av_pool_identity_usb_fallback(const AvUsbDevice *dev)
{
    return g_strdup_printf("usb:%04x:%04x@port:%s", dev->vendor_id, dev->product_id, dev->bus_path);
}

/* See av-pool.h.  Caller frees. */
char *
av_pool_identity_mdev(const char *uuid)
{
    return g_strdup_printf("mdev:%s", uuid);
}

/* See av-pool.h. */
gboolean
av_pool_identity_usb_is_valid(const char *identity)
{
    static const char *const hex4 = "0123456789abcdef";
    const char *p = identity;

    if (!identity || strlen(identity) > 255 || !g_str_has_prefix(p, "usb:"))
        return FALSE;
    p += strlen("usb:");
    if (strspn(p, hex4) != 4 || p[4] != ':' || strspn(p + 5, hex4) != 4)
        return FALSE;
    p += 9;
    if (g_str_has_prefix(p, "@port:"))
        return av_usb_bus_path_is_valid(p + strlen("@port:"));
    if (!g_str_has_prefix(p, ":serial:") || p[strlen(":serial:")] == '\0')
        return FALSE;
    for (p += strlen(":serial:"); *p; p++)
        if (!g_ascii_isprint(*p))
            return FALSE;
    return TRUE;
}

/* See av-pool.h. */
const AvUsbDevice *
av_pool_find_usb_device(const GPtrArray *usb, const char *identity, const char *bus_path)
{
    const AvUsbDevice *found = NULL;

    for (guint i = 0; usb && identity && i < usb->len; i++) {
        const AvUsbDevice *dev = g_ptr_array_index(usb, i);
        g_autofree char *own = av_pool_identity_usb(dev);
        g_autofree char *port = av_pool_identity_usb_fallback(dev);

        if (!g_str_equal(own, identity) && !g_str_equal(port, identity))
            continue;
        if (g_strcmp0(dev->bus_path, bus_path) == 0)
            return dev;
        if (!found)
            found = dev;
    }
    return found;
}

/* See av-pool.h. */
const AvUsbDevice *
av_pool_find_usb_device_at(const GPtrArray *usb, const char *identity, const char *bus_path)
{
    for (guint i = 0; usb && identity && bus_path && i < usb->len; i++) {
        const AvUsbDevice *dev = g_ptr_array_index(usb, i);
        g_autofree char *own = NULL;
        g_autofree char *port = NULL;

        if (g_strcmp0(dev->bus_path, bus_path) != 0)
            continue;
        own = av_pool_identity_usb(dev);
        port = av_pool_identity_usb_fallback(dev);
        return g_str_equal(own, identity) || g_str_equal(port, identity) ? dev : NULL;
    }
    return NULL;
}

/* See av-pool.h.  The identity is "usb:VVVV:PPPP:serial:S" or
 * "usb:VVVV:PPPP@port:P" (av_pool_identity_usb_is_valid()). */
gboolean
av_pool_usb_is_runtime_of(const AvUsbDevice *usb, const char *identity, const char *bus_path,
                          const AvProfile *profile)
{
    const char *rest;

    if (!usb || !profile || !bus_path || !av_pool_identity_usb_is_valid(identity) ||
        g_strcmp0(usb->bus_path, bus_path) != 0 || !av_profile_runtime_id(profile, usb->vendor_id, usb->product_id))
        return FALSE;
    rest = identity + strlen("usb:VVVV:PPPP");
    if (g_str_has_prefix(rest, ":serial:"))
        return g_strcmp0(usb->serial, rest + strlen(":serial:")) == 0;
    return g_str_equal(rest + strlen("@port:"), bus_path);
}

/* See av-pool.h. */
gboolean
av_pool_usb_runtime_accepted(AvDeviceState state)
{
    return state == AV_DEVICE_STATE_IN_USE || state == AV_DEVICE_STATE_DIRTY || state == AV_DEVICE_STATE_SCRUBBING ||
           state == AV_DEVICE_STATE_QUARANTINED;
}

/* See av-pool.h. */
AvPoolUsbPresents
av_pool_usb_presents(const AvPoolDevice *dev, const AvUsbDevice *usb, const AvProfile *profile)
{
    g_autofree char *own = NULL;
    g_autofree char *port = NULL;

    if (!dev || !usb || dev->kind != AV_DEVICE_KIND_USB || g_strcmp0(dev->address, usb->bus_path) != 0)
        return AV_POOL_USB_OTHER;
    own = av_pool_identity_usb(usb);
    port = av_pool_identity_usb_fallback(usb);
    if (g_strcmp0(own, dev->identity) == 0 || g_strcmp0(port, dev->identity) == 0)
        return AV_POOL_USB_SAME;
    return av_pool_usb_is_runtime_of(usb, dev->identity, dev->address, profile) ? AV_POOL_USB_RUNTIME
                                                                               : AV_POOL_USB_OTHER;
}

/* See av-pool.h. */
const AvUsbDevice *
av_pool_find_usb_device_held(const GPtrArray *usb, const char *identity, const char *bus_path,
                             const AvProfile *profile, gboolean *ret_runtime)
{
    const AvUsbDevice *dev = av_pool_find_usb_device_at(usb, identity, bus_path);

    if (ret_runtime)
        *ret_runtime = FALSE;
    if (dev)
        return dev;
    for (guint i = 0; usb && profile && i < usb->len; i++) {
        const AvUsbDevice *u = g_ptr_array_index(usb, i);

        if (g_strcmp0(u->bus_path, bus_path) != 0)
            continue;
        if (!av_pool_usb_is_runtime_of(u, identity, bus_path, profile))
            return NULL;
        if (ret_runtime)
            *ret_runtime = TRUE;
        return u;
    }
    return NULL;
}

/* See av-pool.h. */
AvPoolDevice *
av_pool_find_usb(const AvPool *pool, const AvUsbDevice *usb)
{
    g_autofree char *identity = av_pool_identity_usb(usb);
    g_autofree char *fallback = av_pool_identity_usb_fallback(usb);
    AvPoolDevice *dev = av_pool_find(pool, identity);

    if (!dev || dev->kind != AV_DEVICE_KIND_USB)
        dev = av_pool_find(pool, fallback);
    return dev && dev->kind == AV_DEVICE_KIND_USB ? dev : NULL;
}
