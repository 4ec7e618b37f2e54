/* accelvirt: what av-domain.c shares with the rest of src/domain (the
 * rewrite), and nothing outside it: the one hostile-safe libxml2 parse and
 * the strict value formats.  Not installed, not for other layers. */
#pragma once

#include <glib.h>
#include <libxml/tree.h>

G_BEGIN_DECLS

/* The namespace of accelvirt's metadata (xml/accelvirt-domain.rng). */
#define AV_NS_DOMAIN "urn:accelvirt:domain:1"

/* Parses the domain XML @xml of @len bytes with the rules at the top of
 * av-domain.c: refused when empty or over AV_DOMAIN_XML_MAX before libxml2
 * sees it, no network, no DTD, a DOCTYPE refused, libxml2 silent (its first
 * error becomes one sentence).  Does not look at the root element.  Returns
 * a new document (xmlFreeDoc) or NULL with AV_ERROR_INVALID_INPUT. */
xmlDocPtr av_domain_xml_read(const char *xml, gsize len, GError **error);

/* "DDDD:BB:SS.F" in any case: TRUE and *ret set to the lower-case form (caller
 * frees).  FALSE, *ret untouched, on anything else (NULL included). */
gboolean av_domain_pci_address_canonical(const char *s, char **ret);

/* A UUID, 8-4-4-4-12 or 32 hex digits, any case: TRUE and *ret set to the
 * lower-case 8-4-4-4-12 form (caller frees). */
gboolean av_domain_uuid_canonical(const char *s, char **ret);

/* A libvirt alias / QEMU id: [A-Za-z0-9_.-], 1 to 128, not starting with '.'
 * or '-'. */
gboolean av_domain_alias_valid(const char *s);

G_END_DECLS
