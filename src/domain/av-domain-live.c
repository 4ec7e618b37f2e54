/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the lenient reader of a running domain's live XML (see
 * av_domain_live_hostdevs() in av-domain.h).
 *
 * The strict parser (av-domain.c) refuses what accelvirt will not act on:
 * right for the hook at prepare, where a refusal stops the domain.  The audit
 * and watch ask another question of a domain that already runs: which host
 * devices does it hold?  A refusal there would leave a device a domain holds
 * free in the pool (a user alias libvirt accepts and the strict parser does
 * not is enough).  So this reader looks at nothing but what names a device,
 * and of each hostdev takes every address it finds (every <source>, every
 * <address> in it: one libvirt version may read the first, another the
 * last); what it cannot read of a device it reports, and never drops.
 *
 * The document itself is parsed as safely as everywhere else (no network,
 * no DTD, no entities: av_domain_xml_read_live()); only a namespace prefix
 * that metadata uses without declaring it, which libvirt keeps, is no
 * error here. */
#include "config.h"

#include "av-domain.h"
#include "av-domain-private.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/tree.h>

#include "util/av-error.h"
#include "util/av-names.h"

/* A number as libvirt reads one with base 0 (virStrToLong_ui): "0x" hex,
 * a leading 0 octal, else decimal; blanks around it are allowed, a sign is
 * not.  TRUE and *ret when it is at most @max. */
static gboolean
live_number(const char *s, guint64 max, guint64 *ret)
{
    char *end = NULL;
    guint64 v;

    if (!s)
        return FALSE;
    while (g_ascii_isspace(*s))
        s++;
    if (!g_ascii_isdigit(*s))
        return FALSE;
    errno = 0;
    v = g_ascii_strtoull(s, &end, 0);
    if (errno || end == s)
        return FALSE;
    while (g_ascii_isspace(*end))
        end++;
    if (*end || v > max)
        return FALSE;
    *ret = v;
    return TRUE;
}

/* A note of what could not be read, "WHAT: WHY (line N)", to @problems. */
static void G_GNUC_PRINTF(4, 5)
live_problem(GPtrArray *problems, const xmlNode *node, const char *what, const char *fmt, ...)
{
    g_autofree char *why = NULL;
    va_list ap;
    long line = node ? xmlGetLineNo(node) : -1;

    va_start(ap, fmt);
    why = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (line > 0)
        g_ptr_array_add(problems, g_strdup_printf("%s: %s (line %ld)", what, why, line));
    else
        g_ptr_array_add(problems, g_strdup_printf("%s: %s", what, why));
}

static gboolean
live_is(const xmlNode *node, const char *name)
{
    return node && node->type == XML_ELEMENT_NODE && strcmp((const char *)node->name, name) == 0;
}

/* A PCI address element (domain, bus, slot, function; an absent one is 0,
 * as libvirt's virPCIDeviceAddressParseXML has it).  Adds a PCI AvHostdev
 * to @list, or a problem. */
static void
live_pci(const xmlNode *address, const char *what, gboolean is_interface, GPtrArray *list, GPtrArray *problems)
{
    static const struct {
        const char *attr;
        guint64 max;
    } fields[] = { { "domain", 0xffff }, { "bus", 0xff }, { "slot", 0x1f }, { "function", 7 } };
    guint64 v[G_N_ELEMENTS(fields)];
    AvHostdev *dev;

    for (gsize i = 0; i < G_N_ELEMENTS(fields); i++) {
        g_autofree char *s = av_domain_prop(address, fields[i].attr);

        v[i] = 0;
        if (s && !live_number(s, fields[i].max, &v[i])) {
            g_autofree char *q = av_domain_quote(s);

            live_problem(problems, address, what, "PCI address %s '%s' is not a number this reader takes",
                         fields[i].attr, q);
            return;
        }
    }
    dev = g_new0(AvHostdev, 1);
    dev->type = AV_HOSTDEV_PCI;
    dev->is_interface = is_interface;
    dev->usb_bus = -1;
    dev->usb_device = -1;
    dev->pci_address = g_strdup_printf("%04x:%02x:%02x.%x", (guint)v[0], (guint)v[1], (guint)v[2], (guint)v[3]);
    g_ptr_array_add(list, dev);
}

/* <interface type='direct'><source dev=>: the host interface it names (a
 * card of attach netdev may have made it).  A name no card's net/ could
 * hold (av_netdev_name_is_valid()) names no card: left out. */
static void
live_direct(const xmlNode *node, GPtrArray *list)
{
    for (xmlNode *c = node->children; c; c = c->next) {
        g_autofree char *dev_name = live_is(c, "source") ? av_domain_prop(c, "dev") : NULL;
        AvHostdev *dev;

        if (!av_netdev_name_is_valid(dev_name))
            continue;
        dev = g_new0(AvHostdev, 1);
        dev->type = AV_HOSTDEV_NETDEV;
        dev->usb_bus = -1;
        dev->usb_device = -1;
        dev->netdev = g_steal_pointer(&dev_name);
        dev->netdev_mode = av_domain_prop(c, "mode");
        g_ptr_array_add(list, dev);
    }
}

/* The addresses of every <source> of a PCI hostdev or hostdev interface
 * @node. */
static void
live_pci_sources(const xmlNode *node, const char *what, gboolean is_interface, GPtrArray *list,
                 GPtrArray *problems)
{
    guint found = 0;

    for (const xmlNode *source = node->children; source; source = source->next) {
        if (!live_is(source, "source"))
            continue;
        for (const xmlNode *address = source->children; address; address = address->next) {
            g_autofree char *type = NULL;

            if (!live_is(address, "address"))
                continue;
            found++;
            type = av_domain_prop(address, "type");
            if (type && strcmp(type, "pci") != 0) {
                g_autofree char *q = av_domain_quote(type);

                live_problem(problems, address, what, "source address type '%s' is not 'pci'", q);
                continue;
            }
            live_pci(address, what, is_interface, list, problems);
        }
    }
    if (found == 0)
        live_problem(problems, node, what, "no <source><address> names its PCI device");
}

static void
live_mdev_sources(const xmlNode *node, const char *what, GPtrArray *list, GPtrArray *problems)
{
    guint found = 0;

    for (const xmlNode *source = node->children; source; source = source->next) {
        if (!live_is(source, "source"))
            continue;
        for (const xmlNode *address = source->children; address; address = address->next) {
            g_autofree char *uuid = NULL;
            char *canonical = NULL;
            AvHostdev *dev;

            if (!live_is(address, "address"))
                continue;
            found++;
            uuid = av_domain_prop(address, "uuid");
            if (!av_domain_uuid_canonical(uuid, &canonical)) {
                g_autofree char *q = av_domain_quote(uuid);

                live_problem(problems, address, what, "mdev address uuid '%s' is not a UUID", q);
                continue;
            }
            dev = g_new0(AvHostdev, 1);
            dev->type = AV_HOSTDEV_MDEV;
            dev->usb_bus = -1;
            dev->usb_device = -1;
            dev->mdev_uuid = canonical;
            g_ptr_array_add(list, dev);
        }
    }
    if (found == 0)
        live_problem(problems, node, what, "no <source><address uuid=> names its mdev");
}

/* The first child @elem of @source with an id= (vendor, product): 0 when
 * there is none; -1 (a problem noted) when its id cannot be read. */
static int
live_usb_id(const xmlNode *source, const char *elem, const char *what, GPtrArray *problems)
{
    for (const xmlNode *c = source->children; c; c = c->next) {
        g_autofree char *id = NULL;
        guint64 v = 0;

        if (!live_is(c, elem))
            continue;
        id = av_domain_prop(c, "id");
        if (!live_number(id, 0xffff, &v) || v == 0) {
            g_autofree char *q = av_domain_quote(id);

            live_problem(problems, c, what, "USB %s id '%s' is not a number between 0x0001 and 0xffff", elem, q);
            return -1;
        }
        return (int)v;
    }
    return 0;
}

/* Each <source> of a USB hostdev: its vendor and product, its bus and
 * device numbers. */
static void
live_usb_sources(const xmlNode *node, const char *what, GPtrArray *list, GPtrArray *problems)
{
    guint found = 0;

    for (const xmlNode *source = node->children; source; source = source->next) {
        const xmlNode *address = NULL;
        int vendor, product;
        AvHostdev *dev;

        if (!live_is(source, "source"))
            continue;
        found++;
        vendor = live_usb_id(source, "vendor", what, problems);
        product = live_usb_id(source, "product", what, problems);
        if (vendor < 0 || product < 0)
            continue;
        for (const xmlNode *c = source->children; c && !address; c = c->next)
            if (live_is(c, "address"))
                address = c;
        dev = g_new0(AvHostdev, 1);
        dev->type = AV_HOSTDEV_USB;
        dev->usb_bus = -1;
        dev->usb_device = -1;
        if (vendor > 0 && product > 0) {
            dev->usb_vendor = (guint16)vendor;
            dev->usb_product = (guint16)product;
        }
        if (address) {
            g_autofree char *bus = av_domain_prop(address, "bus");
            g_autofree char *device = av_domain_prop(address, "device");
            guint64 b = 0, d = 0;

            if (live_number(bus, 0xffff, &b) && live_number(device, 127, &d)) {
                dev->usb_bus = (int)b;
                dev->usb_device = (int)d;
            }
        }
        if (dev->usb_vendor == 0 && dev->usb_bus < 0) {
            live_problem(problems, source, what, "neither a vendor and product nor a bus and device name its "
                         "USB device");
            av_hostdev_free(dev);
            continue;
        }
        g_ptr_array_add(list, dev);
    }
    if (found == 0)
        live_problem(problems, node, what, "no <source> names its USB device");
}

static void
live_hostdev(const xmlNode *node, guint index, GPtrArray *list, GPtrArray *problems)
{
    static const char *const ignored[] = { "scsi", "scsi_host", NULL };
    g_autofree char *what = g_strdup_printf("hostdev %u", index);
    g_autofree char *mode = av_domain_prop(node, "mode");
    g_autofree char *type = av_domain_prop(node, "type");

    /* mode='capabilities' hands over a storage, misc or net capability of
     * the host (a block device, a character device, an interface), no
     * PCI, mdev or USB device. */
    if (mode && strcmp(mode, "capabilities") == 0)
        return;
    if (!type) {
        live_problem(problems, node, what, "it has no type");
        return;
    }
    if (g_strv_contains(ignored, type))
        return;
    if (strcmp(type, "pci") == 0)
        live_pci_sources(node, what, FALSE, list, problems);
    else if (strcmp(type, "mdev") == 0)
        live_mdev_sources(node, what, list, problems);
    else if (strcmp(type, "usb") == 0)
        live_usb_sources(node, what, list, problems);
    else {
        g_autofree char *q = av_domain_quote(type);

        live_problem(problems, node, what, "its type '%s' is not one this reader knows", q);
    }
}

/* See av-domain.h. */
gboolean
av_domain_live_hostdevs(const char *xml, gsize len, GPtrArray **ret_hostdevs, GPtrArray **ret_problems,
                        GError **error)
{
    g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func((GDestroyNotify)av_hostdev_free);
    g_autoptr(GPtrArray) problems = g_ptr_array_new_with_free_func(g_free);
    xmlDocPtr doc;
    xmlNode *root;
    guint nhostdev = 0, ninterface = 0;

    g_return_val_if_fail(xml != NULL || len == 0, FALSE);
    doc = av_domain_xml_read_live(xml, len, AV_DOMAIN_LIVE_XML_MAX, error);
    if (!doc)
        return FALSE;
    root = xmlDocGetRootElement(doc);
    if (!root || !live_is(root, "domain")) {
        g_set_error_literal(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "the root element is not <domain>");
        xmlFreeDoc(doc);
        return FALSE;
    }
    /* Every <devices> (libvirt's "./devices/hostdev" selects in all of
     * them), in any namespace: what names a device is never skipped. */
    for (xmlNode *devices = root->children; devices; devices = devices->next) {
        if (!live_is(devices, "devices"))
            continue;
        for (xmlNode *c = devices->children; c; c = c->next) {
            if (live_is(c, "hostdev")) {
                live_hostdev(c, ++nhostdev, list, problems);
            } else if (live_is(c, "interface")) {
                g_autofree char *type = av_domain_prop(c, "type");
                g_autofree char *what = g_strdup_printf("interface %u", ++ninterface);

                if (type && strcmp(type, "hostdev") == 0)
                    live_pci_sources(c, what, TRUE, list, problems);
                else if (type && strcmp(type, "direct") == 0)
                    live_direct(c, list);
            }
        }
    }
    xmlFreeDoc(doc);
    *ret_hostdevs = g_steal_pointer(&list);
    *ret_problems = g_steal_pointer(&problems);
    return TRUE;
}
