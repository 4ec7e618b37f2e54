/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what the files of the domain rewrite share (av-rewrite.c,
 * av-rewrite-tree.c, av-rewrite-topology.c, av-requests.c, av-strip.c,
 * av-remap.c), and nothing outside them: the tree edits that keep the
 * document's whitespace, the parse of the requests, the record of what a
 * placement wrote, the writing of the guest topology.  av-topology.c, which
 * the rewrite calls, includes none of it.  Each function is described where
 * it is defined.  Not installed, not for other layers. */
#pragma once

#include <glib.h>
#include <libxml/tree.h>

#include "domain/av-domain-private.h"
#include "domain/av-rewrite.h"

G_BEGIN_DECLS

/* What <av:placement> records that a placement wrote besides its devices. */
typedef struct {
    gboolean pinned;
    gboolean numatune;
    gboolean hidden;
    gboolean vendor_id;
    gboolean cells;              /* <cpu><numa> and <numatune><memnode>s */
    gboolean cpu;                /* the <cpu> element itself (it had none) */
    gboolean qemu_ns;            /* the xmlns:qemu declaration on <domain> */
    gboolean qemu_override;      /* the <qemu:override> element itself (it had none) */
    gboolean user_cputune;       /* the user's <cputune> was there, empty: kept when emptied */
    gboolean user_numatune;      /* the same for <numatune> */
} AvWrote;

/* The qemu namespace of libvirt's domain XML (docs/drvqemu.rst,
 * "Overriding properties of QEMU devices"). */
#define AV_NS_QEMU "http://libvirt.org/schemas/domain/qemu/1.0"

/* ---- the tree, its whitespace and its output (av-rewrite-tree.c) ---- */

/* libvirt's order of the children of <domain>, <features>, <cputune>,
 * <hyperv>, <kvm> and <numatune> (for insert_ordered() and ensure_child()). */
extern const char *const domain_order[];
extern const char *const features_order[];
extern const char *const cputune_order[];
extern const char *const hyperv_order[];
extern const char *const kvm_order[];
extern const char *const numatune_order[];

void set_prop(xmlNode *node, const char *name, const char *value);
xmlNode *new_elem(xmlDoc *doc, xmlNs *ns, const char *name);
xmlNode *add_elem(xmlNode *parent, const char *name);
char *doc_unit(const xmlNode *root);
void insert_after(xmlNode *parent, xmlNode *prev, xmlNode *node, const char *unit);
void insert_ordered(xmlNode *parent, xmlNode *node, const char *const *order, const char *unit);
void insert_last(xmlNode *parent, xmlNode *node, const char *unit);
xmlNode *ensure_child(xmlNode *parent, const char *name, const char *const *order, const char *unit);
void remove_node(xmlNode *node);
void remove_if_emptied(xmlNode *node, gboolean keep);
gboolean element_is_empty(const xmlNode *node);
gboolean has_declaration(const char *xml, gsize len);
char *doc_serialize(xmlDoc *doc, gboolean declaration, GError **error);

/* ---- the requests (av-requests.c) ---- */

gboolean requests_parse(const xmlNode *accelerators, GPtrArray **ret, guint *ret_hotplug, GError **error);

/* ---- removing what accelvirt wrote (av-strip.c) ---- */

gboolean alias_is_hotplug(const xmlNode *controller);
int pci_number_parse(const char *s, guint base);
int controller_bus(const xmlNode *controller);
int device_pci_bus(const xmlNode *device);
gboolean port_is_used(const xmlNode *devices, const xmlNode *port);
gboolean remove_children(xmlNode *parent, const char *name);
gboolean wrote_read(const xmlNode *placed, AvWrote *wrote, GError **error);
xmlNode *override_device(const xmlNode *override, const char *alias);
xmlNode *override_find(const xmlNode *root);

/* ---- the guest PCIe and NUMA topology written (av-rewrite-topology.c) ---- */

/* Where write_topology() put each placed item: the index of the
 * controller its hostdev plugs into (G_MAXUINT: where libvirt puts it)
 * and its guest cell (-1: none). */
typedef struct {
    guint *bus;
    int *cell;
} AvGuestSlots;

void guest_address_add(xmlNode *node, guint bus, guint slot);
guint pci_controller_next_index(const xmlNode *devices);
gboolean write_topology(xmlNode *root, const AvGuestTopology *topology, guint n_items, AvGuestSlots *slots,
                        const char *unit, GError **error);
void write_cells(xmlNode *root, const AvGuestTopology *topology, AvWrote *wrote, const char *unit);
void write_cliques(xmlNode *root, const AvGuestTopology *topology, const AvPlacement *placement, AvWrote *wrote,
                   const char **made, const char *unit);
int group_clique(const AvGuestTopology *topology, guint i);

/* ---- the rewrite (av-rewrite.c) ---- */

gboolean usb_bus_path_valid(const char *s);
gboolean placement_check(const AvPlacement *placement, const AvPolicy *policy, GPtrArray *requests, gboolean *ret_hide,
                         GError **error);

G_END_DECLS
