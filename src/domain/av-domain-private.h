/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what av-domain.c, av-strip.c and av-topology.c share with the
 * rest of src/domain (the rewrite), and nothing outside it: the one hostile-safe libxml2 parse and
 * the strict value formats, the small tree helpers.  Not installed, not for other layers. */
#pragma once

#include <glib.h>
#include <libxml/tree.h>

#include "domain/av-topology.h"

G_BEGIN_DECLS

/* The namespace of accelvirt's metadata (xml/accelvirt-domain.rng). */
#define AV_NS_DOMAIN "urn:accelvirt:domain:1"

/* Parses the domain XML @xml of @len bytes with the rules at the top of
 * av-domain.c: refused when empty or over AV_DOMAIN_XML_MAX before libxml2
 * sees it, no network, no DTD, a DOCTYPE refused, libxml2 silent (its first
 * error becomes one sentence).  Does not look at the root element.  Returns
 * a new document (xmlFreeDoc) or NULL with AV_ERROR_INVALID_INPUT. */
xmlDocPtr av_domain_xml_read(const char *xml, gsize len, GError **error);
/* The same for the lenient reader of a running domain's live XML
 * (av-domain-live.c): a limit of @max bytes instead of AV_DOMAIN_XML_MAX,
 * and a namespace error (a prefix never declared: libvirt keeps such
 * metadata of a running domain as it was given) is no error; a document
 * that is not well-formed, or has a DOCTYPE, still is. */
xmlDocPtr av_domain_xml_read_live(const char *xml, gsize len, gsize max, GError **error);

/* "DDDD:BB:SS.F" in any case: TRUE and *ret set to the lower-case form (caller
 * frees).  FALSE, *ret untouched, on anything else (NULL included). */
gboolean av_domain_pci_address_canonical(const char *s, char **ret);

/* A UUID, 8-4-4-4-12 or 32 hex digits, any case: TRUE and *ret set to the
 * lower-case 8-4-4-4-12 form (caller frees). */
gboolean av_domain_uuid_canonical(const char *s, char **ret);

/* A libvirt alias / QEMU id: [A-Za-z0-9_.-], 1 to 128, not starting with '.'
 * or '-'. */
gboolean av_domain_alias_valid(const char *s);

/* Sets AV_ERROR_INVALID_INPUT: the message, then the line of @node (when
 * it has one).  Returns FALSE, for "return av_domain_invalid_at(...)". */
gboolean av_domain_invalid_at(GError **error, const xmlNode *node, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

/* @node is the element @name in namespace @ns (NULL: no namespace).  A NULL
 * @node is FALSE. */
gboolean av_domain_is_elem(const xmlNode *node, const char *name, const char *ns);

/* The first child @name of @parent in @ns (libvirt's "./name[1]"), or NULL
 * (a NULL @parent included).  Borrowed from @parent's document. */
xmlNode *av_domain_child_first(const xmlNode *parent, const char *name, const char *ns);

/* The optional pf= and vf= of an <av:device> (an SR-IOV VF: its PF's PCI
 * address and its index, 0 to 65534), both or neither: stores them (pf in
 * canonical form, caller frees; NULL and -1 when absent).  FALSE with
 * AV_ERROR_INVALID_INPUT for a bad value, or one without the other. */
gboolean av_domain_placed_vf(const xmlNode *node, char **ret_pf, int *ret_vf, GError **error);

/* The optional bitstream= of an <av:device>: the hex SHA-256
 * (64 lower-case hex digits) of the bitstream the device must hold, stored
 * in *ret (caller frees; NULL when absent).  FALSE with
 * AV_ERROR_INVALID_INPUT for anything else. */
gboolean av_domain_placed_bitstream(const xmlNode *node, char **ret, GError **error);

/* An attribute by local name, as libvirt's virXMLPropString (xmlGetProp):
 * a copy (caller frees), or NULL when absent. */
char *av_domain_prop(const xmlNode *node, const char *name);

/* ---- av-domain.c, for the rewrite (av-rewrite.c and the files of
 * av-rewrite-private.h) and the topology (av-topology.c) ---- */

/* A decimal without sign, blank or leading zero, at most @max: TRUE and
 * *ret set; FALSE (untouched) otherwise. */
gboolean av_domain_decimal_parse(const char *s, guint max, guint *ret);

/* "0-3,8,10-11" from the CPU (or node) numbers of @cpus, in any order.
 * Caller frees. */
char *av_domain_cpuset_format(GArray *cpus);

/* Whether the domain @root runs a q35 machine (<os><type machine=> names
 * one): a PCI Express machine (formatdomain.rst, "Controllers"). */
gboolean av_domain_machine_is_q35(const xmlNode *root);

/* The <av:accelerators> of the first <metadata>, or NULL.  Borrowed. */
xmlNode *av_domain_accelerators_find(const xmlNode *root);

/* The root of @doc, checked to be <domain> (else NULL and
 * AV_ERROR_INVALID_INPUT).  Borrowed from @doc. */
xmlNode *av_domain_root(xmlDoc *doc, GError **error);

/* ---- av-strip.c, for the rewrite and the topology ---- */

/* Removes from the tree of @root everything an earlier placement wrote
 * (av-rewrite.h), as its <av:placement> records it; *ret_changed says
 * whether it removed anything.  FALSE with AV_ERROR_INVALID_INPUT on a
 * malformed record. */
gboolean av_domain_strip(xmlNode *root, gboolean *ret_changed, GError **error);

/* ---- av-topology.c, for the rewrite (which stands above it) ---- */

/* One <av:topology> element @node, parsed into *ret (the defaults for what
 * it leaves out).  FALSE with AV_ERROR_INVALID_INPUT, one sentence naming
 * the attribute and the values it takes, on anything else. */
gboolean av_domain_topology_elem_parse(const xmlNode *node, AvTopologyRequest *ret, GError **error);

/* The <av:topology> of @accelerators (NULL: none): the defaults when it has
 * none; AV_ERROR_INVALID_INPUT for two of them or a malformed one. */
gboolean av_domain_topology_find(const xmlNode *accelerators, AvTopologyRequest *ret, GError **error);

/* The node @id of @placement->nodes, or NULL.  Borrowed from @placement. */
const AvPlacedNode *av_domain_placed_node(const AvPlacement *placement, int id);

/* av_guest_topology() on the tree of @root, which av_domain_strip() has
 * already cleared of an earlier placement (so that what accelvirt wrote
 * is never taken for the user's).  Caller frees. */
AvGuestTopology *av_guest_topology_at(const xmlNode *root, const AvPlacement *placement, GError **error);

/* ---- av-strip.c ---- */

/* QEMU vfio-pci's GPUDirect P2P clique property (hw/vfio/pci.c). */
#define AV_GPUDIRECT_PROPERTY "x-nv-gpudirect-clique"

/* Whether @root's <qemu:override> sets x-nv-gpudirect-clique for the
 * device @alias (on a tree av_domain_strip() cleared: the user's own). */
gboolean av_domain_user_clique(const xmlNode *root, const char *alias);

G_END_DECLS
