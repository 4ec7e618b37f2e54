/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: removing what an earlier placement wrote into a domain XML, as
 * its <av:placement> records it (av_domain_strip()), and reading the user's
 * own <qemu:override> of a device. */
#include "config.h"

#include "av-rewrite-private.h"

#include <string.h>

#include "util/av-error.h"

/* ---- removing what accelvirt wrote ---- */

static gboolean
yes_no(const xmlNode *node, const char *name, gboolean *ret, GError **error)
{
    g_autofree char *v = av_domain_prop(node, name);

    if (!v)
        return TRUE;
    if (strcmp(v, "yes") == 0) {
        *ret = TRUE;
        return TRUE;
    }
    if (strcmp(v, "no") == 0)
        return TRUE;
    {
        g_autofree char *q = av_domain_quote(v);

        return av_domain_invalid_at(error, node, "av:placement %s '%s' is neither 'yes' nor 'no'", name, q);
    }
}

/* What follows AV_REWRITE_ALIAS_PREFIX in the <alias name=> of @node, or
 * NULL when it has no such alias.  Caller frees. */
static char *
alias_suffix(const xmlNode *node)
{
    xmlNode *alias = av_domain_child_first(node, "alias", NULL);
    g_autofree char *name = alias ? av_domain_prop(alias, "name") : NULL;

    if (!name || !g_str_has_prefix(name, AV_REWRITE_ALIAS_PREFIX))
        return NULL;
    return g_strdup(name + strlen(AV_REWRITE_ALIAS_PREFIX));
}

/* A hostdev that a placement wrote: alias "ua-accelvirt-N" (digits only).
 * `accelvirt attach --persistent` writes its own aliases
 * ("ua-accelvirt-0000-65-00-0", "ua-accelvirt-usb-...", "-mdev-..."):
 * those are the user's devices from then on, kept by every rewrite. */
static gboolean
alias_is_ours(const xmlNode *hostdev)
{
    g_autofree char *n = alias_suffix(hostdev);

    if (!n || !*n)
        return FALSE;
    for (const char *p = n; *p; p++) {
        if (!g_ascii_isdigit(*p))
            return FALSE;
    }
    return TRUE;
}

/* A controller that write_topology() wrote: its alias is
 * AV_REWRITE_ALIAS_PREFIX then pxb, rp, up or dn, then digits (never a
 * hostdev's "ua-accelvirt-N" nor a hot-plug port's "...-hotplugK"). */
static gboolean
alias_is_topology(const xmlNode *controller)
{
    static const char *const kinds[] = { "pxb", "rp", "up", "dn", NULL };
    g_autofree char *n = alias_suffix(controller);

    for (int i = 0; n && kinds[i]; i++) {
        guint v = 0;

        if (g_str_has_prefix(n, kinds[i]) && av_domain_decimal_parse(n + strlen(kinds[i]), 9999, &v))
            return TRUE;
    }
    return FALSE;
}

/* A pcie-root-port that write_hotplug() wrote. */
gboolean
alias_is_hotplug(const xmlNode *controller)
{
    xmlNode *alias = av_domain_child_first(controller, "alias", NULL);
    g_autofree char *name = alias ? av_domain_prop(alias, "name") : NULL;

    return name && g_str_has_prefix(name, AV_REWRITE_HOTPLUG_ALIAS_PREFIX);
}

/* @s as libvirt's virXMLPropUInt() reads it with @base (10 for a
 * controller's index=, 0 for an address's bus=: "0x03" hex, "03" octal,
 * "3" decimal), at most 255; -1 when it is not such a number. */
int
pci_number_parse(const char *s, guint base)
{
    guint64 v;
    char *end = NULL;

    if (!s || !g_ascii_isdigit(s[0]))
        return -1;
    v = g_ascii_strtoull(s, &end, base);
    if (!end || *end || v > 255)
        return -1;
    return (int)v;
}

/* The bus number a <controller type='pci' index='N'> gives the devices
 * behind it (N), or -1 when it has no readable index. */
int
controller_bus(const xmlNode *controller)
{
    g_autofree char *index = av_domain_prop(controller, "index");

    return pci_number_parse(index, 10);
}

/* The bus= of @device's <address type='pci'>, or -1 when it names none. */
int
device_pci_bus(const xmlNode *device)
{
    xmlNode *address = av_domain_child_first(device, "address", NULL);
    g_autofree char *type = address ? av_domain_prop(address, "type") : NULL;
    g_autofree char *bus = address ? av_domain_prop(address, "bus") : NULL;

    if (g_strcmp0(type, "pci") != 0)
        return -1;
    return pci_number_parse(bus, 0);
}

/* Whether a device of @devices sits behind the PCI controller @port: an
 * <address type='pci' bus='N'/> (hex as libvirt writes it, or decimal) of
 * the port's index.  A device without an address sits nowhere yet (libvirt
 * places it when it defines the domain, in the first free port). */
gboolean
port_is_used(const xmlNode *devices, const xmlNode *port)
{
    int bus = controller_bus(port);

    if (bus < 0)
        return TRUE;    /* cannot tell: treated as used, never removed */
    for (const xmlNode *d = devices->children; d; d = d->next) {
        if (d->type == XML_ELEMENT_NODE && d != port && device_pci_bus(d) == bus)
            return TRUE;
    }
    return FALSE;
}

/* Removes the children @name of @parent; TRUE when there was one. */
gboolean
remove_children(xmlNode *parent, const char *name)
{
    gboolean removed = FALSE;
    xmlNode *next;

    if (!parent)
        return FALSE;
    for (xmlNode *c = parent->children; c; c = next) {
        next = c->next;
        if (av_domain_is_elem(c, name, NULL)) {
            remove_node(c);
            removed = TRUE;
        }
    }
    return removed;
}

gboolean
wrote_read(const xmlNode *placed, AvWrote *wrote, GError **error)
{
    return yes_no(placed, "pinned", &wrote->pinned, error) && yes_no(placed, "numatune", &wrote->numatune, error) &&
           yes_no(placed, "hidden", &wrote->hidden, error) && yes_no(placed, "vendor-id", &wrote->vendor_id, error) &&
           yes_no(placed, "cells", &wrote->cells, error) && yes_no(placed, "cpu", &wrote->cpu, error) &&
           yes_no(placed, "qemu-ns", &wrote->qemu_ns, error) &&
           yes_no(placed, "qemu-override", &wrote->qemu_override, error) &&
           yes_no(placed, "user-cputune", &wrote->user_cputune, error) &&
           yes_no(placed, "user-numatune", &wrote->user_numatune, error);
}

/* The first child of @parent called @name in @ns whose attribute @attr is
 * @value, or NULL. */
static xmlNode *
child_with_prop(const xmlNode *parent, const char *name, const char *ns, const char *attr, const char *value)
{
    for (xmlNode *c = parent ? parent->children : NULL; c; c = c->next) {
        g_autofree char *v = NULL;

        if (!av_domain_is_elem(c, name, ns))
            continue;
        v = av_domain_prop(c, attr);
        if (g_strcmp0(v, value) == 0)
            return c;
    }
    return NULL;
}

/* The <qemu:device alias=@alias> of @override, or NULL. */
xmlNode *
override_device(const xmlNode *override, const char *alias)
{
    return child_with_prop(override, "device", AV_NS_QEMU, "alias", alias);
}

/* The <qemu:property name='x-nv-gpudirect-clique'> of @device's
 * <qemu:frontend>, or NULL. */
static xmlNode *
device_clique(const xmlNode *device)
{
    return child_with_prop(av_domain_child_first(device, "frontend", AV_NS_QEMU), "property", AV_NS_QEMU, "name",
                           AV_GPUDIRECT_PROPERTY);
}

/* The first <qemu:override> of @root, or NULL. */
xmlNode *
override_find(const xmlNode *root)
{
    for (xmlNode *c = root->children; c; c = c->next) {
        if (av_domain_is_elem(c, "override", AV_NS_QEMU))
            return c;
    }
    return NULL;
}

gboolean
av_domain_user_clique(const xmlNode *root, const char *alias)
{
    for (xmlNode *c = root->children; c; c = c->next) {
        if (av_domain_is_elem(c, "override", AV_NS_QEMU) && device_clique(override_device(c, alias)))
            return TRUE;
    }
    return FALSE;
}

/* Removes from the <qemu:override> @override the cliques that the
 * placement @placed recorded (its entries' clique= and clique-made=,
 * write_cliques()): the x-nv-gpudirect-clique property, then the
 * <qemu:frontend> or <qemu:device> accelvirt made for it once emptied;
 * the user's own properties stay.  TRUE when it removed anything. */
static gboolean
strip_overrides(xmlNode *override, const xmlNode *placed)
{
    gboolean removed = FALSE;

    for (const xmlNode *e = placed ? placed->children : NULL; e; e = e->next) {
        g_autofree char *alias = NULL;
        g_autofree char *made = NULL;
        xmlNode *device, *frontend, *property;

        if (e->type != XML_ELEMENT_NODE || !(made = av_domain_prop(e, "clique-made")))
            continue;
        alias = av_domain_prop(e, "alias");
        device = override_device(override, alias);
        property = device_clique(device);
        if (!property)
            continue;
        frontend = property->parent;
        remove_node(property);
        removed = TRUE;
        remove_if_emptied(frontend, strcmp(made, "property") == 0);
        if (strcmp(made, "device") == 0 && !xmlFirstElementChild(device))
            remove_node(device);
        else if (strcmp(made, "frontend") == 0)
            remove_if_emptied(device, TRUE);   /* the user's <qemu:device/> as it was */
    }
    return removed;
}

/* Whether @node or anything in it uses the namespace @ns. */
static gboolean
ns_used(const xmlNode *node, const xmlNs *ns)
{
    for (const xmlNode *c = node; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE)
            continue;
        if (c->ns == ns)
            return TRUE;
        for (const xmlAttr *a = c->properties; a; a = a->next) {
            if (a->ns == ns)
                return TRUE;
        }
        if (c->children && ns_used(c->children, ns))
            return TRUE;
    }
    return FALSE;
}

/* Drops the xmlns:qemu declaration a placement added to <domain> once
 * nothing uses it; TRUE when it did. */
static gboolean
qemu_ns_drop(xmlNode *root)
{
    xmlNs **link = &root->nsDef;

    for (xmlNs *ns = root->nsDef; ns; link = &ns->next, ns = ns->next) {
        if (!ns->href || strcmp((const char *)ns->href, AV_NS_QEMU) != 0)
            continue;
        if (root->ns == ns || ns_used(root->children, ns))
            return FALSE;
        for (const xmlAttr *a = root->properties; a; a = a->next) {
            if (a->ns == ns)
                return FALSE;
        }
        *link = ns->next;
        ns->next = NULL;
        xmlFreeNs(ns);
        return TRUE;
    }
    return FALSE;
}

/* Removes what an earlier placement wrote.  Sets *ret_changed when it
 * removed anything. */
gboolean
av_domain_strip(xmlNode *root, gboolean *ret_changed, GError **error)
{
    xmlNode *accelerators = av_domain_accelerators_find(root);
    AvWrote wrote = { 0 };
    gboolean changed = FALSE;
    xmlNode *next;

    for (xmlNode *c = accelerators ? accelerators->children : NULL; c; c = c->next) {
        if (!av_domain_is_elem(c, "placement", AV_NS_DOMAIN))
            continue;
        if (!wrote_read(c, &wrote, error))
            return FALSE;
        for (xmlNode *e = c->children; e; e = e->next) {
            g_autofree char *made = e->type == XML_ELEMENT_NODE ? av_domain_prop(e, "clique-made") : NULL;

            if (made && strcmp(made, "property") != 0 && strcmp(made, "frontend") != 0 &&
                strcmp(made, "device") != 0) {
                g_autofree char *q = av_domain_quote(made);

                return av_domain_invalid_at(error, e, "av:placement clique-made '%s' is none of 'property', "
                                            "'frontend' and 'device'", q);
            }
        }
    }
    /* the cliques first: <av:placement> says which were accelvirt's */
    for (xmlNode *c = root->children; c; c = next) {
        next = c->next;
        if (!av_domain_is_elem(c, "override", AV_NS_QEMU))
            continue;
        for (xmlNode *p = accelerators ? accelerators->children : NULL; p; p = p->next) {
            if (av_domain_is_elem(p, "placement", AV_NS_DOMAIN) && strip_overrides(c, p))
                changed = TRUE;
        }
        if (wrote.qemu_override && !xmlFirstElementChild(c)) {
            remove_node(c);
            changed = TRUE;
        }
    }
    for (xmlNode *c = accelerators ? accelerators->children : NULL; c; c = next) {
        next = c->next;
        if (av_domain_is_elem(c, "placement", AV_NS_DOMAIN)) {
            remove_node(c);
            changed = TRUE;
        }
    }

    for (xmlNode *devices = root->children; devices; devices = next) {
        gboolean removed = FALSE;
        xmlNode *next_dev;

        next = devices->next;
        if (!av_domain_is_elem(devices, "devices", NULL))
            continue;
        for (xmlNode *c = devices->children; c; c = next_dev) {
            next_dev = c->next;
            if (((av_domain_is_elem(c, "hostdev", NULL) || av_domain_is_elem(c, "interface", NULL)) &&
                 alias_is_ours(c)) ||
                (av_domain_is_elem(c, "controller", NULL) && alias_is_topology(c))) {
                remove_node(c);
                removed = TRUE;
            }
        }
        /* the hot-plug ports once the hostdevs behind accelvirt's are gone */
        for (xmlNode *c = devices->children; c; c = next_dev) {
            next_dev = c->next;
            if (av_domain_is_elem(c, "controller", NULL) && alias_is_hotplug(c) && !port_is_used(devices, c)) {
                remove_node(c);
                removed = TRUE;
            }
        }
        if (removed) {
            changed = TRUE;
            /* libvirt always writes a <devices>: an empty one is the user's */
            remove_if_emptied(devices, TRUE);
        }
    }
    for (xmlNode *c = root->children; c; c = next) {
        next = c->next;
        if (wrote.pinned && av_domain_is_elem(c, "cputune", NULL)) {
            gboolean removed = remove_children(c, "vcpupin");

            removed = remove_children(c, "emulatorpin") || removed;
            if (removed) {
                changed = TRUE;
                remove_if_emptied(c, wrote.user_cputune);
            }
        } else if ((wrote.numatune || wrote.cells) && av_domain_is_elem(c, "numatune", NULL)) {
            gboolean removed = wrote.numatune && remove_children(c, "memory");

            removed = (wrote.cells && remove_children(c, "memnode")) || removed;
            if (removed) {
                changed = TRUE;
                remove_if_emptied(c, wrote.user_numatune);
            }
        } else if (wrote.cells && av_domain_is_elem(c, "cpu", NULL)) {
            if (remove_children(c, "numa")) {
                changed = TRUE;
                remove_if_emptied(c, !wrote.cpu);
            }
        } else if ((wrote.hidden || wrote.vendor_id) && av_domain_is_elem(c, "features", NULL)) {
            xmlNode *kvm = av_domain_child_first(c, "kvm", NULL);
            xmlNode *hyperv = av_domain_child_first(c, "hyperv", NULL);
            gboolean removed = FALSE;

            if (wrote.hidden && kvm && remove_children(kvm, "hidden")) {
                removed = TRUE;
                remove_if_emptied(kvm, FALSE);
            }
            if (wrote.vendor_id && hyperv && remove_children(hyperv, "vendor_id")) {
                removed = TRUE;
                remove_if_emptied(hyperv, FALSE);
            }
            if (removed) {
                changed = TRUE;
                remove_if_emptied(c, FALSE);
            }
        }
    }
    if (wrote.qemu_ns && qemu_ns_drop(root))
        changed = TRUE;
    *ret_changed = changed;
    return TRUE;
}
