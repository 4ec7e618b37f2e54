/* accelvirt: the domain rewrite (see av-rewrite.h).
 *
 * The document is parsed once with the hostile-input rules of av-domain.c
 * (av_domain_xml_read) and changed as a tree, so that everything accelvirt
 * did not write keeps its place, its comments and its indentation.  Each
 * element accelvirt adds goes in as a pair: a whitespace text node ("\n" and
 * the indentation of its siblings) and the element, right after the sibling
 * libvirt would format before it.  Removing an element removes it with the
 * whitespace before it, so removing what was added gives back the tree it
 * was added to: a rewrite is undone by av_domain_unplace() and redone
 * identically, byte for byte.
 *
 * libxml2 writes attributes in double quotes and empty elements as <x/>: a
 * rewritten document is in that form; a document accelvirt has nothing to
 * do with (no request, nothing placed) is returned as it came.
 *
 * Formats: https://libvirt.org/formatdomain.html (#host-device-assignment,
 * #cpu-tuning, #numa-node-tuning, #hypervisor-features: <kvm><hidden>,
 * <hyperv><vendor_id state='on' value='...'/> of up to 12 characters,
 * libvirt's domaincommon.rng pattern [^,]{0,12}). */
#include "config.h"

#include "av-rewrite.h"
#include "av-domain-private.h"

#include <string.h>

#include <libxml/relaxng.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>
#include <libxml/xmlsave.h>

#include "fpga/av-bitstream.h"
#include "pool/av-pool.h"
#include "util/av-error.h"
#include "util/av-names.h"

#define AV_INDENT_DEFAULT "  "

/* libvirt's order of the children of <domain> (virDomainDefFormatInternal),
 * of <features> (virDomainFeature), of <cputune> and of <hyperv>: a new
 * element goes after the last sibling that libvirt formats before it. */
static const char *const domain_order[] = {
    "name", "uuid", "genid", "title", "description", "metadata", "maxMemory", "memory", "currentMemory",
    "blkiotune", "memtune", "memoryBacking", "vcpu", "vcpus", "iothreads", "iothreadids", "defaultiothread",
    "cputune", "numatune", "resource", "sysinfo", "bootloader", "bootloader_args", "os", "idmap", "features",
    "cpu", "clock", "on_poweroff", "on_reboot", "on_crash", "on_lockfailure", "pm", "perf", "devices", NULL,
};
static const char *const features_order[] = {
    "acpi", "apic", "pae", "hap", "viridian", "privnet", "hyperv", "kvm", "pvspinlock", "capabilities", "pmu",
    "vmport", "gic", "smm", "ioapic", "hpt", "vmcoreinfo", "htm", "nested-hv", "msrs", "ccf-assist", "xen",
    "cfpc", "sbbc", "ibs", "tcg", "async-teardown", NULL,
};
static const char *const cputune_order[] = {
    "shares", "period", "quota", "global_period", "global_quota", "emulator_period", "emulator_quota",
    "iothread_period", "iothread_quota", "vcpupin", "emulatorpin", "iothreadpin", "vcpusched",
    "iothreadsched", "emulatorsched", "cachetune", "memorytune", NULL,
};
static const char *const hyperv_order[] = {
    "relaxed", "vapic", "spinlocks", "vpindex", "runtime", "synic", "stimer", "reset", "vendor_id",
    "frequencies", "reenlightenment", "tlbflush", "ipi", "evmcs", "avic", NULL,
};
static const char *const kvm_order[] = { "hidden", "hint-dedicated", "poll-control", "pv-ipi", "dirty-ring", NULL };
static const char *const numatune_order[] = { "memory", "memnode", NULL };

/* ---- small tree helpers ---- */

static void
set_prop(xmlNode *node, const char *name, const char *value)
{
    xmlNewProp(node, (const xmlChar *)name, (const xmlChar *)value);
}

static xmlNode *
new_elem(xmlDoc *doc, xmlNs *ns, const char *name)
{
    return xmlNewDocNode(doc, ns, (const xmlChar *)name, NULL);
}

static xmlNode *
add_elem(xmlNode *parent, const char *name)
{
    xmlNode *child = new_elem(parent->doc, NULL, name);

    xmlAddChild(parent, child);
    return child;
}

/* ---- whitespace ---- */

static gboolean
is_blank_text(const xmlNode *node)
{
    if (!node || node->type != XML_TEXT_NODE)
        return FALSE;
    for (const xmlChar *p = node->content; p && *p; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            return FALSE;
    }
    return TRUE;
}

/* The indentation of a line that @text (blank) ends: what follows its last
 * newline, or NULL when it has none. */
static char *
text_indent(const xmlNode *text)
{
    const char *s, *nl;

    if (!is_blank_text(text) || !text->content)
        return NULL;
    s = (const char *)text->content;
    nl = strrchr(s, '\n');
    return nl ? g_strdup(nl + 1) : NULL;
}

/* The indentation of @node: that of its line, else its depth times @unit. */
static char *
node_indent(const xmlNode *node, const char *unit)
{
    char *indent = text_indent(node->prev);
    GString *s;

    if (indent)
        return indent;
    s = g_string_new(NULL);
    for (const xmlNode *p = node->parent; p && p->type == XML_ELEMENT_NODE; p = p->parent)
        g_string_append(s, unit);
    return g_string_free(s, FALSE);
}

/* The indentation for a new child of @parent: that of its element children
 * already on their own line, else one @unit more than @parent. */
static char *
child_indent(const xmlNode *parent, const char *unit)
{
    g_autofree char *pi = NULL;

    for (xmlNode *c = parent->children; c; c = c->next) {
        char *indent;

        if (c->type != XML_ELEMENT_NODE)
            continue;
        indent = text_indent(c->prev);
        if (indent)
            return indent;
    }
    pi = node_indent(parent, unit);
    return g_strconcat(pi, unit, NULL);
}

/* The document's indentation step: that of the first child of the root,
 * two spaces when it has none. */
static char *
doc_unit(const xmlNode *root)
{
    for (xmlNode *c = root->children; c; c = c->next) {
        if (c->type == XML_ELEMENT_NODE) {
            char *indent = text_indent(c->prev);

            if (indent && *indent)
                return indent;
            g_free(indent);
            break;
        }
    }
    return g_strdup(AV_INDENT_DEFAULT);
}

static xmlNode *
new_text(xmlDoc *doc, const char *a, const char *b)
{
    g_autofree char *s = g_strconcat(a, b, NULL);

    return xmlNewDocText(doc, (const xmlChar *)s);
}

/* Indents the element children of @node, a subtree built without text, for
 * @node on a line indented by @indent. */
static void
indent_subtree(xmlNode *node, const char *indent, const char *unit)
{
    g_autofree char *inner = g_strconcat(indent, unit, NULL);
    gboolean any = FALSE;

    for (xmlNode *c = node->children; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE)
            continue;
        indent_subtree(c, inner, unit);
        /* before an element: never merged into another text node */
        xmlAddPrevSibling(c, new_text(node->doc, "\n", inner));
        any = TRUE;
    }
    if (any)
        xmlAddChild(node, new_text(node->doc, "\n", indent));
}

/* Inserts @node (a new subtree, taken over) into @parent right after @prev
 * (an element child of @parent), or first when @prev is NULL, with a
 * newline and the indentation of its siblings before it. */
static void
insert_after(xmlNode *parent, xmlNode *prev, xmlNode *node, const char *unit)
{
    g_autofree char *ci = child_indent(parent, unit);
    xmlNode *ws = new_text(parent->doc, "\n", ci);

    indent_subtree(node, ci, unit);
    if (prev) {
        xmlAddNextSibling(prev, node);
        xmlAddPrevSibling(node, ws);
    } else if (parent->children) {
        xmlAddPrevSibling(parent->children, node);
        xmlAddPrevSibling(node, ws);
    } else {
        g_autofree char *pi = node_indent(parent, unit);

        xmlAddChild(parent, ws);
        xmlAddChild(parent, node);
        xmlAddChild(parent, new_text(parent->doc, "\n", pi));
    }
}

static int
order_index(const char *name, const char *const *order)
{
    for (int i = 0; order[i]; i++) {
        if (strcmp(order[i], name) == 0)
            return i;
    }
    return -1;
}

/* Inserts @node into @parent after the last child that @order puts at or
 * before it (libvirt's formatting order), else first. */
static void
insert_ordered(xmlNode *parent, xmlNode *node, const char *const *order, const char *unit)
{
    int target = order_index((const char *)node->name, order);
    xmlNode *prev = NULL;

    for (xmlNode *c = parent->children; c; c = c->next) {
        int i;

        if (c->type != XML_ELEMENT_NODE || c->ns)
            continue;
        i = order_index((const char *)c->name, order);
        if (i >= 0 && i <= target)
            prev = c;
    }
    insert_after(parent, prev, node, unit);
}

/* Appends @node after the last element child of @parent. */
static void
insert_last(xmlNode *parent, xmlNode *node, const char *unit)
{
    xmlNode *prev = NULL;

    for (xmlNode *c = parent->children; c; c = c->next) {
        if (c->type == XML_ELEMENT_NODE)
            prev = c;
    }
    insert_after(parent, prev, node, unit);
}

/* The first child @name of @parent (no namespace), created in libvirt's
 * order when absent. */
static xmlNode *
ensure_child(xmlNode *parent, const char *name, const char *const *order, const char *unit)
{
    xmlNode *c = av_domain_child_first(parent, name, NULL);

    if (c)
        return c;
    c = new_elem(parent->doc, NULL, name);
    insert_ordered(parent, c, order, unit);
    return c;
}

/* Removes @node with the whitespace before it (what insert_after() added). */
static void
remove_node(xmlNode *node)
{
    xmlNode *prev = node->prev;

    if (is_blank_text(prev)) {
        xmlUnlinkNode(prev);
        xmlFreeNode(prev);
    }
    xmlUnlinkNode(node);
    xmlFreeNode(node);
}

/* After accelvirt removed children of @node: an element left with nothing
 * but whitespace goes too when it has no attribute and not @keep (accelvirt
 * made it, or it says nothing), else it stays as <x/>. */
static void
remove_if_emptied(xmlNode *node, gboolean keep)
{
    xmlNode *c, *next;

    if (!node)
        return;
    for (c = node->children; c; c = c->next) {
        if (!is_blank_text(c))
            return;
    }
    if (!node->properties && !keep) {
        remove_node(node);
        return;
    }
    for (c = node->children; c; c = next) {
        next = c->next;
        xmlUnlinkNode(c);
        xmlFreeNode(c);
    }
}

/* Whether @node is an element with no child element and no attribute
 * (<x/>, or whitespace inside). */
static gboolean
element_is_empty(const xmlNode *node)
{
    return node && !node->properties && !xmlFirstElementChild((xmlNode *)node);
}

/* ---- requests ---- */

static gboolean
word_index(const char *s, const char *const *words, int *ret)
{
    for (int i = 0; words[i]; i++) {
        if (strcmp(s, words[i]) == 0) {
            *ret = i;
            return TRUE;
        }
    }
    return FALSE;
}

/* A decimal without sign, blank or leading zero, at most @max. */
gboolean
av_domain_decimal_parse(const char *s, guint max, guint *ret)
{
    guint64 v = 0;

    if (!s || !*s || (s[0] == '0' && s[1]))
        return FALSE;
    for (const char *p = s; *p; p++) {
        if (!g_ascii_isdigit(*p))
            return FALSE;
        v = v * 10 + (guint64)(*p - '0');
        if (v > max)
            return FALSE;
    }
    *ret = (guint)v;
    return TRUE;
}

static gboolean
request_parse(const xmlNode *node, AvRequest **ret, GError **error)
{
    static const char *const known[] = { "profile", "count", "granularity", "numa", "bitstream", "function", "p2p",
                                         NULL };
    static const char *const p2ps[] = { "preferred", "required", NULL };
    static const AvP2p p2p_values[] = { AV_P2P_PREFERRED, AV_P2P_REQUIRED };
    static const char *const granularities[] = { "function", "region", "card", NULL };
    static const AvGranularity granularity_values[] = { AV_GRANULARITY_FUNCTION, AV_GRANULARITY_REGION,
                                                         AV_GRANULARITY_CARD };
    static const char *const numas[] = { "same", "any", NULL };
    g_autofree char *profile = av_domain_prop(node, "profile");
    g_autofree char *count = av_domain_prop(node, "count");
    g_autofree char *granularity = av_domain_prop(node, "granularity");
    g_autofree char *numa = av_domain_prop(node, "numa");
    g_autofree char *bitstream = av_domain_prop(node, "bitstream");
    g_autofree char *function = av_domain_prop(node, "function");
    g_autofree char *p2p = av_domain_prop(node, "p2p");
    g_autoptr(AvRequest) request = NULL;
    guint n = 1;
    int i = 0;

    for (xmlAttr *a = node->properties; a; a = a->next) {
        if (a->ns || !word_index((const char *)a->name, known, &i)) {
            g_autofree char *q = av_domain_quote((const char *)a->name);

            return av_domain_invalid_at(
                error, node, "av:request has an unknown attribute '%s' (it takes profile, count, granularity, numa, "
                       "bitstream, function and p2p)",
                q);
        }
    }
    if (!profile)
        return av_domain_invalid_at(error, node,
                                    "av:request has no profile: say which profile of the policy it asks for");
    if (!av_profile_name_is_valid(profile)) {
        g_autofree char *q = av_domain_quote(profile);

        return av_domain_invalid_at(
            error, node,
            "av:request profile '%s' is not a profile name (1 to 63 of a-z, 0-9, '.', '_' and '-', "
            "the first a letter or digit)",
            q);
    }
    if (count && !(av_domain_decimal_parse(count, G_MAXUINT32, &n) && n >= 1 && n <= AV_REQUEST_COUNT_MAX)) {
        g_autofree char *q = av_domain_quote(count);

        return av_domain_invalid_at(error, node,
                                    "av:request count '%s' for profile '%s' is not a number between 1 and %u", q,
                                    profile, AV_REQUEST_COUNT_MAX);
    }
    request = av_request_new(profile, n);
    if (granularity) {
        if (!word_index(granularity, granularities, &i)) {
            g_autofree char *q = av_domain_quote(granularity);

            return av_domain_invalid_at(error, node,
                                        "av:request granularity '%s' is not 'card', 'region' or 'function'", q);
        }
        request->granularity_set = TRUE;
        request->granularity = granularity_values[i];
    }
    if (numa) {
        if (!word_index(numa, numas, &i)) {
            g_autofree char *q = av_domain_quote(numa);

            return av_domain_invalid_at(error, node, "av:request numa '%s' is neither 'same' nor 'any'", q);
        }
        request->numa_any = i == 1;
    }
    if (bitstream) {
        if (!av_bitstream_ref_is_valid(bitstream)) {
            g_autofree char *q = av_domain_quote(bitstream);

            return av_domain_invalid_at(error, node,
                                        "av:request bitstream '%s' names no bitstream (a name of the library, 1 to "
                                        "63 of a-z, 0-9, '.', '_' and '-', or 64 lower-case hex digits)",
                                        q);
        }
        request->bitstream = g_steal_pointer(&bitstream);
    }
    if (function) {
        if (!av_bitstream_function_id_is_valid(function)) {
            g_autofree char *q = av_domain_quote(function);

            return av_domain_invalid_at(error, node,
                                        "av:request function '%s' is not a function id (1 to 128 of A-Z, a-z, "
                                        "0-9, '.', '_', ':' and '-')",
                                        q);
        }
        request->function = g_steal_pointer(&function);
    }
    if (p2p) {
        if (!word_index(p2p, p2ps, &i)) {
            g_autofree char *q = av_domain_quote(p2p);

            return av_domain_invalid_at(error, node,
                                        "av:request p2p '%s' is neither 'required' nor 'preferred' (leave it out "
                                        "for no peer-to-peer constraint)",
                                        q);
        }
        request->p2p = p2p_values[i];
    }
    *ret = g_steal_pointer(&request);
    return TRUE;
}

/* The <av:accelerators> of the first <metadata> (libvirt keeps one element
 * per namespace), or NULL. */
xmlNode *
av_domain_accelerators_find(const xmlNode *root)
{
    return av_domain_child_first(av_domain_child_first(root, "metadata", NULL), "accelerators", AV_NS_DOMAIN);
}

/* <av:hotplug slots="N"/>: N (1 to AV_HOTPLUG_SLOTS_MAX) empty hot-plug
 * slots the domain wants for `accelvirt attach`. */
static gboolean
hotplug_parse(const xmlNode *node, guint *ret_slots, GError **error)
{
    g_autofree char *slots = av_domain_prop(node, "slots");
    guint v = 0;

    for (const xmlAttr *a = node->properties; a; a = a->next) {
        if (strcmp((const char *)a->name, "slots") != 0) {
            g_autofree char *q = av_domain_quote((const char *)a->name);

            return av_domain_invalid_at(error, node, "<av:hotplug> has an unknown attribute '%s' (it takes slots)",
                                        q);
        }
    }
    if (!slots)
        return av_domain_invalid_at(error, node, "<av:hotplug> has no slots (the number of hot-plug slots, 1 to %u)",
                                    AV_HOTPLUG_SLOTS_MAX);
    if (!av_domain_decimal_parse(slots, AV_HOTPLUG_SLOTS_MAX, &v) || v == 0) {
        g_autofree char *q = av_domain_quote(slots);

        return av_domain_invalid_at(error, node,
                                    "<av:hotplug slots='%s'> is not a number of hot-plug slots from 1 to %u", q,
                                    AV_HOTPLUG_SLOTS_MAX);
    }
    *ret_slots = v;
    return TRUE;
}

static gboolean
requests_parse(const xmlNode *accelerators, GPtrArray **ret, guint *ret_hotplug, GError **error)
{
    g_autoptr(GPtrArray) requests = g_ptr_array_new_with_free_func((GDestroyNotify)av_request_free);
    const xmlNode *hotplug = NULL;
    AvTopologyRequest topology;
    guint slots = 0;

    for (xmlNode *c = accelerators ? accelerators->children : NULL; c; c = c->next) {
        AvRequest *request = NULL;

        if (c->type != XML_ELEMENT_NODE)
            continue;
        if (av_domain_is_elem(c, "placement", AV_NS_DOMAIN))
            continue;
        if (av_domain_is_elem(c, "hotplug", AV_NS_DOMAIN)) {
            if (hotplug)
                return av_domain_invalid_at(error, c, "<av:accelerators> has more than one <av:hotplug>");
            hotplug = c;
            if (!hotplug_parse(c, &slots, error))
                return FALSE;
            continue;
        }
        if (av_domain_is_elem(c, "topology", AV_NS_DOMAIN))
            continue;   /* checked whole below */
        if (!av_domain_is_elem(c, "request", AV_NS_DOMAIN)) {
            g_autofree char *q = av_domain_quote((const char *)c->name);

            return av_domain_invalid_at(
                error, c,
                "<av:accelerators> holds an unknown element <%s> (it takes av:request, av:hotplug, av:topology and "
                "av:placement)",
                q);
        }
        if (requests->len == AV_REQUESTS_MAX)
            return av_domain_invalid_at(error, c, "<av:accelerators> has more than %u requests", AV_REQUESTS_MAX);
        if (!request_parse(c, &request, error))
            return FALSE;
        g_ptr_array_add(requests, request);
    }
    if (!av_domain_topology_find(accelerators, &topology, error))
        return FALSE;
    *ret = g_steal_pointer(&requests);
    if (ret_hotplug)
        *ret_hotplug = slots;
    return TRUE;
}

/* The document's root, checked to be <domain>. */
xmlNode *
av_domain_root(xmlDoc *doc, GError **error)
{
    xmlNode *root = xmlDocGetRootElement(doc);

    if (!root || !av_domain_is_elem(root, "domain", NULL)) {
        g_autofree char *q = av_domain_quote(root ? (const char *)root->name : NULL);

        av_domain_invalid_at(error, root, "the root element is <%s>%s, not <domain>", q,
                             root && root->ns ? " in a namespace" : "");
        return NULL;
    }
    return root;
}

GPtrArray *
av_domain_requests(const char *xml, gsize len, GError **error)
{
    return av_domain_requests_full(xml, len, NULL, error);
}

GPtrArray *
av_domain_requests_full(const char *xml, gsize len, guint *ret_hotplug, GError **error)
{
    xmlDoc *doc = av_domain_xml_read(xml, len, error);
    xmlNode *root;
    GPtrArray *requests = NULL;
    guint hotplug = 0;

    if (!doc)
        return NULL;
    root = av_domain_root(doc, error);
    if (root && !requests_parse(av_domain_accelerators_find(root), &requests, &hotplug, error))
        requests = NULL;
    xmlFreeDoc(doc);
    if (requests && ret_hotplug)
        *ret_hotplug = hotplug;
    return requests;
}

/* ---- serializing ---- */

/* Whether @xml begins with an XML declaration (kept when it does). */
static gboolean
has_declaration(const char *xml, gsize len)
{
    gsize i = 0;

    if (len >= 3 && memcmp(xml, "\xef\xbb\xbf", 3) == 0)
        i = 3;
    return len - i >= 5 && memcmp(xml + i, "<?xml", 5) == 0;
}

static char *
doc_serialize(xmlDoc *doc, gboolean declaration, GError **error)
{
    xmlBufferPtr buf = xmlBufferCreate();
    xmlSaveCtxtPtr save;
    char *out = NULL;

    save = xmlSaveToBuffer(buf, "UTF-8", declaration ? 0 : XML_SAVE_NO_DECL);
    if (!save || xmlSaveDoc(save, doc) < 0) {
        if (save)
            xmlSaveClose(save);
        xmlBufferFree(buf);
        g_set_error_literal(error, AV_ERROR, AV_ERROR_FAILED, "cannot write the domain XML");
        return NULL;
    }
    xmlSaveClose(save);
    out = g_strndup((const char *)xmlBufferContent(buf), (gsize)xmlBufferLength(buf));
    xmlBufferFree(buf);
    return out;
}

/* ---- removing what accelvirt wrote ---- */

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

/* The yes/no attributes of <av:placement> into @wrote. */
static gboolean
wrote_read(const xmlNode *placed, AvWrote *wrote, GError **error);

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
static gboolean
alias_is_hotplug(const xmlNode *controller)
{
    xmlNode *alias = av_domain_child_first(controller, "alias", NULL);
    g_autofree char *name = alias ? av_domain_prop(alias, "name") : NULL;

    return name && g_str_has_prefix(name, AV_REWRITE_HOTPLUG_ALIAS_PREFIX);
}

/* @s as libvirt's virXMLPropUInt() reads it with @base (10 for a
 * controller's index=, 0 for an address's bus=: "0x03" hex, "03" octal,
 * "3" decimal), at most 255; -1 when it is not such a number. */
static int
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
static int
controller_bus(const xmlNode *controller)
{
    g_autofree char *index = av_domain_prop(controller, "index");

    return pci_number_parse(index, 10);
}

/* The bus= of @device's <address type='pci'>, or -1 when it names none. */
static int
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
static gboolean
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
static gboolean
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

static gboolean
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
static xmlNode *
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
static xmlNode *
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
            if ((av_domain_is_elem(c, "hostdev", NULL) && alias_is_ours(c)) ||
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

/* ---- checking the placement ---- */

/* A USB device's sysfs name: "BUS-PORT[.PORT]...", as "1-1.2". */
static gboolean
usb_bus_path_valid(const char *s)
{
    g_auto(GStrv) parts = NULL;
    g_auto(GStrv) ports = NULL;
    guint v = 0;

    if (!s || strlen(s) > 32)
        return FALSE;
    parts = g_strsplit(s, "-", -1);
    if (g_strv_length(parts) != 2 || !av_domain_decimal_parse(parts[0], 999, &v) || v == 0)
        return FALSE;
    ports = g_strsplit(parts[1], ".", -1);
    if (g_strv_length(ports) > 7)
        return FALSE;
    for (char **p = ports; *p; p++) {
        if (!av_domain_decimal_parse(*p, 255, &v) || v == 0)
            return FALSE;
    }
    return TRUE;
}

static gboolean G_GNUC_PRINTF(2, 3)
placement_invalid(GError **error, const char *fmt, ...)
{
    va_list ap;
    g_autofree char *msg = NULL;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "the placement cannot be written: %s", msg);
    return FALSE;
}

static gboolean
requested(GPtrArray *requests, const char *profile)
{
    for (guint i = 0; i < requests->len; i++) {
        const AvRequest *r = g_ptr_array_index(requests, i);

        if (strcmp(r->profile, profile) == 0)
            return TRUE;
    }
    return FALSE;
}

/* Checks every value of @placement that reaches the XML; sets
 * *ret_hide when a placed profile says hide_hypervisor. */
static gboolean
placement_check(const AvPlacement *placement, const AvPolicy *policy, GPtrArray *requests, gboolean *ret_hide,
                GError **error)
{
    gboolean hide = FALSE;

    if (placement->numa_node < -1 || placement->numa_node >= (int)AV_DOMAIN_NODE_MAX)
        return placement_invalid(error, "NUMA node %d is not between 0 and %u", placement->numa_node,
                                 AV_DOMAIN_NODE_MAX - 1);
    if (placement->numa_node >= 0) {
        if (!placement->cpus || placement->cpus->len == 0)
            return placement_invalid(error, "node %d has no CPU to pin the vCPUs on", placement->numa_node);
        for (guint i = 0; i < placement->cpus->len; i++) {
            guint cpu = g_array_index(placement->cpus, guint, i);

            if (cpu >= AV_DOMAIN_CPU_MAX)
                return placement_invalid(error, "CPU %u is not below %u", cpu, AV_DOMAIN_CPU_MAX);
        }
    }
    for (guint i = 0; placement->nodes && i < placement->nodes->len; i++) {
        const AvPlacedNode *node = g_ptr_array_index(placement->nodes, i);

        if (node->id < 0 || node->id >= (int)AV_DOMAIN_NODE_MAX)
            return placement_invalid(error, "NUMA node %d is not between 0 and %u", node->id, AV_DOMAIN_NODE_MAX - 1);
        for (guint j = 0; node->cpus && j < node->cpus->len; j++) {
            guint cpu = g_array_index(node->cpus, guint, j);

            if (cpu >= AV_DOMAIN_CPU_MAX)
                return placement_invalid(error, "CPU %u of node %d is not below %u", cpu, node->id, AV_DOMAIN_CPU_MAX);
        }
    }
    for (guint i = 0; placement->items && i < placement->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
        g_autofree char *canonical = NULL;
        const AvProfile *profile;

        if (!item->profile || !av_profile_name_is_valid(item->profile)) {
            g_autofree char *q = av_domain_quote(item->profile);

            return placement_invalid(error, "device %u has the profile name '%s'", i, q);
        }
        if (item->numa_node < -1 || item->numa_node >= (int)AV_DOMAIN_NODE_MAX)
            return placement_invalid(error, "device %u is on NUMA node %d, not between 0 and %u", i, item->numa_node,
                                     AV_DOMAIN_NODE_MAX - 1);
        if (!requested(requests, item->profile))
            return placement_invalid(error, "device %u is of profile '%s', which no av:request of the domain asks for", i,
                                     item->profile);
        profile = policy ? av_policy_find(policy, item->profile) : NULL;
        if (policy && !profile)
            return placement_invalid(error, "profile '%s' is not in the policy", item->profile);
        if (profile && profile->hide_hypervisor)
            hide = TRUE;
        if (item->bitstream && ((item->attach != AV_ATTACH_VFIO_PCI && item->attach != AV_ATTACH_SRIOV_VF) ||
                                !av_rom_sha256_is_valid(item->bitstream) ||
                                g_str_equal(item->bitstream, AV_ROM_NONE))) {
            g_autofree char *q = av_domain_quote(item->bitstream);

            return placement_invalid(error, "device %u of profile '%s' has the bitstream '%s' (a PCI device's "
                                     "SHA-256 only)", i, item->profile, q);
        }
        switch (item->attach) {
        case AV_ATTACH_VFIO_PCI:
        case AV_ATTACH_SRIOV_VF:
            if (!av_domain_pci_address_canonical(item->pci_address, &canonical)) {
                g_autofree char *q = av_domain_quote(item->pci_address);

                return placement_invalid(error, "device %u of profile '%s' has the PCI address '%s'", i, item->profile, q);
            }
            break;
        case AV_ATTACH_MDEV:
            if (!av_domain_uuid_canonical(item->mdev_uuid, &canonical)) {
                g_autofree char *q = av_domain_quote(item->mdev_uuid);

                return placement_invalid(error, "mdev %u of profile '%s' has the UUID '%s'", i, item->profile, q);
            }
            break;
        case AV_ATTACH_USB:
            if (!usb_bus_path_valid(item->usb_bus_path)) {
                g_autofree char *q = av_domain_quote(item->usb_bus_path);

                return placement_invalid(error, "USB device %u of profile '%s' has the bus path '%s'", i, item->profile,
                                         q);
            }
            break;
        default:
            return placement_invalid(error, "device %u of profile '%s' has an unknown attach %d", i, item->profile,
                                     (int)item->attach);
        }
    }
    *ret_hide = hide;
    return TRUE;
}

/* ---- writing ---- */

static gint
compare_uint(gconstpointer a, gconstpointer b)
{
    guint x = *(const guint *)a, y = *(const guint *)b;

    return x < y ? -1 : x > y;
}

/* "0-3,8,10-11" from CPU numbers in any order. */
char *
av_domain_cpuset_format(GArray *cpus)
{
    g_autoptr(GArray) sorted = g_array_copy(cpus);
    GString *s = g_string_new(NULL);
    guint i = 0;

    g_array_sort(sorted, compare_uint);
    while (i < sorted->len) {
        guint first = g_array_index(sorted, guint, i), last = first;

        while (i + 1 < sorted->len && g_array_index(sorted, guint, i + 1) <= last + 1) {
            last = g_array_index(sorted, guint, i + 1);
            i++;
        }
        i++;
        if (s->len)
            g_string_append_c(s, ',');
        if (last == first)
            g_string_append_printf(s, "%u", first);
        else
            g_string_append_printf(s, "%u-%u", first, last);
    }
    return g_string_free(s, FALSE);
}

/* <source><address bus= device=/> of a USB hostdev: the sysfs busnum and
 * devnum of @item's stick, in decimal as libvirt reads them. */
static void
usb_address_set(xmlNode *address, const AvPlacedItem *item)
{
    g_autofree char *bus = g_strdup_printf("%u", item->usb_busnum);
    g_autofree char *device = g_strdup_printf("%u", item->usb_devnum);

    set_prop(address, "bus", bus);
    set_prop(address, "device", device);
}

/* <address type='pci' domain='0x0000' bus='0xBB' slot='0xSS'
 * function='0xF' [multifunction='on']/> as the last child of @node: bus is
 * the index of the controller it plugs into (formatdomain.rst, "Device
 * Addresses"; multifunction='on' on function 0 of a slot whose other
 * functions are used, as libvirt writes its own root ports). */
static void
guest_address_add_function(xmlNode *node, guint bus, guint slot, guint function, gboolean multifunction)
{
    xmlNode *address = add_elem(node, "address");
    g_autofree char *b = g_strdup_printf("0x%02x", bus);
    g_autofree char *sl = g_strdup_printf("0x%02x", slot);
    g_autofree char *f = g_strdup_printf("0x%x", function);

    set_prop(address, "type", "pci");
    set_prop(address, "domain", "0x0000");
    set_prop(address, "bus", b);
    set_prop(address, "slot", sl);
    set_prop(address, "function", f);
    if (multifunction)
        set_prop(address, "multifunction", "on");
}

/* The same, function 0. */
static void
guest_address_add(xmlNode *node, guint bus, guint slot)
{
    guest_address_add_function(node, bus, slot, 0, FALSE);
}

/* The <hostdev> of @item; @guest_bus: the index of the controller it plugs
 * into (slot 0), G_MAXUINT when libvirt chooses. */
static xmlNode *
hostdev_new(xmlDoc *doc, const AvPlacedItem *item, const char *alias, guint guest_bus)
{
    xmlNode *hostdev = new_elem(doc, NULL, "hostdev");
    xmlNode *source, *address;
    g_autofree char *canonical = NULL;

    set_prop(hostdev, "mode", "subsystem");
    switch (item->attach) {
    case AV_ATTACH_MDEV:
        set_prop(hostdev, "type", "mdev");
        set_prop(hostdev, "model", "vfio-pci");
        source = add_elem(hostdev, "source");
        address = add_elem(source, "address");
        av_domain_uuid_canonical(item->mdev_uuid, &canonical);
        set_prop(address, "uuid", canonical);
        break;
    case AV_ATTACH_USB: {
        g_autofree char *vendor = g_strdup_printf("0x%04x", item->usb_vendor);
        g_autofree char *product = g_strdup_printf("0x%04x", item->usb_product);

        set_prop(hostdev, "type", "usb");
        set_prop(hostdev, "managed", "no");
        source = add_elem(hostdev, "source");
        set_prop(add_elem(source, "vendor"), "id", vendor);
        set_prop(add_elem(source, "product"), "id", product);
        /* Exactly the stick chosen: two identical sticks share the ids. */
        if (item->usb_busnum > 0 && item->usb_devnum > 0)
            usb_address_set(add_elem(source, "address"), item);
        break;
    }
    default: {
        g_autofree char *domain = NULL, *bus = NULL, *slot = NULL, *function = NULL;

        av_domain_pci_address_canonical(item->pci_address, &canonical);
        /* "dddd:bb:ss.f" */
        domain = g_strdup_printf("0x%.4s", canonical);
        bus = g_strdup_printf("0x%.2s", canonical + 5);
        slot = g_strdup_printf("0x%.2s", canonical + 8);
        function = g_strdup_printf("0x%.1s", canonical + 11);
        set_prop(hostdev, "type", "pci");
        set_prop(hostdev, "managed", "no");
        source = add_elem(hostdev, "source");
        address = add_elem(source, "address");
        set_prop(address, "domain", domain);
        set_prop(address, "bus", bus);
        set_prop(address, "slot", slot);
        set_prop(address, "function", function);
        break;
    }
    }
    set_prop(add_elem(hostdev, "alias"), "name", alias);
    if (guest_bus != G_MAXUINT)
        guest_address_add(hostdev, guest_bus, 0);
    return hostdev;
}

/* The <av:placement> entry of @item; @cell: its guest NUMA cell, or -1. */
static xmlNode *
placed_new(xmlDoc *doc, xmlNs *ns, const AvPlacedItem *item, const char *alias, int cell)
{
    xmlNode *node;
    g_autofree char *canonical = NULL;

    switch (item->attach) {
    case AV_ATTACH_MDEV:
        node = new_elem(doc, ns, "mdev");
        set_prop(node, "profile", item->profile);
        av_domain_uuid_canonical(item->mdev_uuid, &canonical);
        set_prop(node, "uuid", canonical);
        break;
    case AV_ATTACH_USB: {
        g_autofree char *vendor = g_strdup_printf("0x%04x", item->usb_vendor);
        g_autofree char *product = g_strdup_printf("0x%04x", item->usb_product);

        node = new_elem(doc, ns, "usb");
        set_prop(node, "profile", item->profile);
        set_prop(node, "bus-path", item->usb_bus_path);
        set_prop(node, "vendor", vendor);
        set_prop(node, "product", product);
        if (item->identity)
            set_prop(node, "identity", item->identity);
        break;
    }
    default:
        node = new_elem(doc, ns, "device");
        set_prop(node, "profile", item->profile);
        av_domain_pci_address_canonical(item->pci_address, &canonical);
        set_prop(node, "address", canonical);
        if (item->attach == AV_ATTACH_SRIOV_VF && item->pf_address && item->vf_index >= 0) {
            g_autofree char *pf = NULL;
            g_autofree char *vf = g_strdup_printf("%d", item->vf_index);

            av_domain_pci_address_canonical(item->pf_address, &pf);
            set_prop(node, "pf", pf);
            set_prop(node, "vf", vf);
        }
        if (item->bitstream)
            set_prop(node, "bitstream", item->bitstream);
        break;
    }
    if (cell >= 0) {
        g_autofree char *c = g_strdup_printf("%d", cell);

        set_prop(node, "cell", c);
    }
    set_prop(node, "alias", alias);
    return node;
}

/* Whether the user placed the vCPUs themselves: a <vcpupin> or an
 * <emulatorpin> (accelvirt's own are gone by now), a <vcpu cpuset=>, or
 * placement='auto' (numad decides). */
static gboolean
user_pinned(const xmlNode *root)
{
    xmlNode *vcpu = av_domain_child_first(root, "vcpu", NULL);

    if (vcpu) {
        g_autofree char *cpuset = av_domain_prop(vcpu, "cpuset");
        g_autofree char *placement = av_domain_prop(vcpu, "placement");

        if (cpuset || (placement && strcmp(placement, "auto") == 0))
            return TRUE;
    }
    for (xmlNode *c = root->children; c; c = c->next) {
        if (av_domain_is_elem(c, "cputune", NULL) &&
            (av_domain_child_first(c, "vcpupin", NULL) || av_domain_child_first(c, "emulatorpin", NULL)))
            return TRUE;
    }
    return FALSE;
}

/* Whether the user set the memory placement: a <numatune><memory>, or
 * <vcpu placement='auto'> (libvirt then places memory with numad). */
static gboolean
user_numatune(const xmlNode *root)
{
    xmlNode *vcpu = av_domain_child_first(root, "vcpu", NULL);

    if (vcpu) {
        g_autofree char *placement = av_domain_prop(vcpu, "placement");

        if (placement && strcmp(placement, "auto") == 0)
            return TRUE;
    }
    for (xmlNode *c = root->children; c; c = c->next) {
        if (av_domain_is_elem(c, "numatune", NULL) && av_domain_child_first(c, "memory", NULL))
            return TRUE;
    }
    return FALSE;
}

static void
write_pinning(xmlNode *root, const AvPlacement *placement, guint vcpus, const char *unit)
{
    xmlNode *cputune = ensure_child(root, "cputune", domain_order, unit);
    g_autofree char *cpuset = av_domain_cpuset_format(placement->cpus);

    for (guint i = 0; i < vcpus; i++) {
        xmlNode *pin = new_elem(root->doc, NULL, "vcpupin");
        g_autofree char *id = g_strdup_printf("%u", i);

        set_prop(pin, "vcpu", id);
        set_prop(pin, "cpuset", cpuset);
        insert_ordered(cputune, pin, cputune_order, unit);
    }
    {
        xmlNode *pin = new_elem(root->doc, NULL, "emulatorpin");

        set_prop(pin, "cpuset", cpuset);
        insert_ordered(cputune, pin, cputune_order, unit);
    }
}

static void
write_numatune(xmlNode *root, const AvPlacement *placement, const char *unit)
{
    xmlNode *numatune = ensure_child(root, "numatune", domain_order, unit);
    xmlNode *memory = new_elem(root->doc, NULL, "memory");
    g_autofree char *node = g_strdup_printf("%d", placement->numa_node);

    set_prop(memory, "mode", "strict");
    set_prop(memory, "nodeset", node);
    insert_ordered(numatune, memory, numatune_order, unit);
}

/* <features><kvm><hidden state='on'/></kvm> and <hyperv><vendor_id
 * state='on' value='accelvirt'/></hyperv>, each unless the user wrote it
 * (in any state: theirs wins), vendor_id also not in hyperv
 * mode='passthrough' (which takes no child). */
static void
write_hidden(xmlNode *root, AvWrote *wrote, const char *unit)
{
    xmlNode *features = av_domain_child_first(root, "features", NULL);
    xmlNode *kvm = features ? av_domain_child_first(features, "kvm", NULL) : NULL;
    xmlNode *hyperv = features ? av_domain_child_first(features, "hyperv", NULL) : NULL;
    g_autofree char *mode = hyperv ? av_domain_prop(hyperv, "mode") : NULL;
    gboolean want_hidden = !kvm || !av_domain_child_first(kvm, "hidden", NULL);
    gboolean want_vendor =
        !(mode && strcmp(mode, "passthrough") == 0) && (!hyperv || !av_domain_child_first(hyperv, "vendor_id", NULL));

    if (!want_hidden && !want_vendor)
        return;
    features = ensure_child(root, "features", domain_order, unit);
    if (want_vendor) {
        xmlNode *vendor = new_elem(root->doc, NULL, "vendor_id");

        hyperv = ensure_child(features, "hyperv", features_order, unit);
        set_prop(vendor, "state", "on");
        set_prop(vendor, "value", AV_REWRITE_VENDOR_ID);
        insert_ordered(hyperv, vendor, hyperv_order, unit);
        wrote->vendor_id = TRUE;
    }
    if (want_hidden) {
        xmlNode *hidden = new_elem(root->doc, NULL, "hidden");

        kvm = ensure_child(features, "kvm", features_order, unit);
        set_prop(hidden, "state", "on");
        insert_ordered(kvm, hidden, kvm_order, unit);
        wrote->hidden = TRUE;
    }
}

/* Whether the domain's machine is a q35 one (<os><type machine='pc-q35-7.2'>):
 * a PCI Express machine whose root complex takes no hot-plugged devices
 * (formatdomain.rst, "PCI Express hot-plug"); i440fx's root bus has
 * hot-plug slots of its own. */
gboolean
av_domain_machine_is_q35(const xmlNode *root)
{
    xmlNode *type = av_domain_child_first(av_domain_child_first(root, "os", NULL), "type", NULL);
    g_autofree char *machine = type ? av_domain_prop(type, "machine") : NULL;

    return machine && strstr(machine, "q35") != NULL;
}

/* The <controller type='pci' index=> the next PCI controller may take: one
 * above the highest the domain names, at least 1 (0 is the root), where a
 * domain names an index by a pci controller's index= (base 10, leading
 * zeros allowed, as libvirt reads it) and by the bus= of any device's
 * <address type='pci'> (libvirt's controller index of that bus, whether or
 * not the controller is written: libvirt adds it when it defines the
 * domain). */
static guint
pci_controller_next_index(const xmlNode *devices)
{
    int next = 1;

    for (xmlNode *c = devices ? devices->children : NULL; c; c = c->next) {
        g_autofree char *type = NULL;

        if (c->type != XML_ELEMENT_NODE)
            continue;
        next = MAX(next, device_pci_bus(c) + 1);
        if (!av_domain_is_elem(c, "controller", NULL))
            continue;
        type = av_domain_prop(c, "type");
        if (g_strcmp0(type, "pci") == 0)
            next = MAX(next, controller_bus(c) + 1);
    }
    return (guint)next;
}

/* <av:hotplug slots="N"/> on a q35 machine: at least N empty
 * pcie-root-ports (no device's address names their bus), since q35's root
 * complex takes no hot-plugged device and every hot-plugged PCIe device
 * needs an empty root port (KubeVirt reserves such placeholder ports too).
 * Adds the ports lacking, each <controller type='pci' index='I'
 * model='pcie-root-port'> with the alias AV_REWRITE_HOTPLUG_ALIAS_PREFIX
 * "K" (K after the highest already there), after the domain's last
 * controller.  Other machines get nothing.  Returns how many it added. */
static guint
write_hotplug(xmlNode *root, guint slots, const char *unit)
{
    xmlNode *devices;
    xmlNode *after = NULL;
    guint index, empty = 0, next_alias = 0, added = 0;

    if (!av_domain_machine_is_q35(root))
        return 0;
    devices = ensure_child(root, "devices", domain_order, unit);
    if (!devices)
        return 0;
    index = pci_controller_next_index(devices);
    for (xmlNode *c = devices->children; c; c = c->next) {
        g_autofree char *model = NULL;

        if (!av_domain_is_elem(c, "controller", NULL))
            continue;
        after = c;
        model = av_domain_prop(c, "model");
        if (g_strcmp0(model, "pcie-root-port") == 0 && !port_is_used(devices, c))
            empty++;
        if (alias_is_hotplug(c)) {
            xmlNode *alias = av_domain_child_first(c, "alias", NULL);
            g_autofree char *name = av_domain_prop(alias, "name");
            guint k = 0;

            if (av_domain_decimal_parse(name + strlen(AV_REWRITE_HOTPLUG_ALIAS_PREFIX), 1000, &k) && k + 1 > next_alias)
                next_alias = k + 1;
        }
    }
    for (; empty + added < slots; added++) {
        xmlNode *controller = new_elem(root->doc, NULL, "controller");
        xmlNode *alias;
        g_autofree char *index_s = g_strdup_printf("%u", index + added);
        g_autofree char *alias_s = g_strdup_printf(AV_REWRITE_HOTPLUG_ALIAS_PREFIX "%u", next_alias + added);

        set_prop(controller, "type", "pci");
        set_prop(controller, "index", index_s);
        set_prop(controller, "model", "pcie-root-port");
        alias = add_elem(controller, "alias");
        set_prop(alias, "name", alias_s);
        if (after)
            insert_after(devices, after, controller, unit);
        else
            insert_last(devices, controller, unit);
        after = controller;
    }
    return added;
}

/* ---- the guest topology (av-topology.h) ---- */

/* <controller type='pci' index= model=>, with <alias name='PREFIX N'/>
 * when @kind is not NULL (libvirt formats <target> before <alias>, so the
 * expander bus adds its own). */
static xmlNode *
controller_new(xmlDoc *doc, guint index, const char *model, const char *kind, guint n)
{
    xmlNode *controller = new_elem(doc, NULL, "controller");
    g_autofree char *index_s = g_strdup_printf("%u", index);

    set_prop(controller, "type", "pci");
    set_prop(controller, "index", index_s);
    set_prop(controller, "model", model);
    if (kind) {
        g_autofree char *alias = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%s%u", kind, n);

        set_prop(add_elem(controller, "alias"), "name", alias);
    }
    return controller;
}

/* Where write_topology() put each placed item: the index of the
 * controller its hostdev plugs into (G_MAXUINT: where libvirt puts it)
 * and its guest cell (-1: none). */
typedef struct {
    guint *bus;
    int *cell;
} AvGuestSlots;

/* Writes the controllers of @topology into <devices> after its last
 * controller, with indexes from pci_controller_next_index() on, every
 * parent before its children:
 *   - per cell some group hangs under: <controller model='pcie-expander-bus'>
 *     with <target busNr='B'><node>C</node></target> and the alias
 *     ua-accelvirt-pxbC; its <address> is left to libvirt (it only goes on
 *     pcie-root).  busNr is written, not left to libvirt, whose default
 *     (the lowest busNr in use minus 2, 254 first) leaves no room for the
 *     buses behind a second expander: each gets 1 + the number of
 *     controllers behind it, counted down from the lowest busNr of the
 *     domain's own pcie-/pci-expander-buses (256 without one), cell 0
 *     highest;
 *   - per group a pcie-root-port (ua-accelvirt-rpK) on the expander (bus
 *     its index, slots 0 to 31, then function 1 of slots 0, 1, ... with
 *     multifunction='on' on function 0, as libvirt writes its own) or,
 *     without a cell, on pcie-root where libvirt picks the slot; for a
 *     switch then a pcie-switch-upstream-port (ua-accelvirt-upK, slot 0 of
 *     the root port) and one pcie-switch-downstream-port (ua-accelvirt-dnK)
 *     per device, on slots 0, 1, ... of the upstream port (at most
 *     AV_GUEST_SWITCH_PORTS_MAX: av_guest_topology() splits a larger one).
 * Stores in @slots the bus each item's hostdev goes on (slot 0).  FALSE
 * (nothing written, AV_ERROR_INVALID_INPUT in one sentence) when the bus
 * numbers below the lowest expander bus cannot hold the controllers on
 * pcie-root (indexes up to the next one, ours, the 16 hot-plug ports), or
 * the controller indexes pass 255. */
static gboolean
write_topology(xmlNode *root, const AvGuestTopology *topology, guint n_items, AvGuestSlots *slots, const char *unit,
               GError **error)
{
    xmlNode *devices, *after = NULL;
    guint index, rp = 0, up = 0, dn = 0, bus_top = 256, user_bus = 256;
    guint ncells = topology->cells->len;
    g_autofree guint *pxb_index = g_new0(guint, ncells + 1);
    g_autofree guint *pxb_size = g_new0(guint, ncells + 1);
    g_autofree guint *pxb_ports = g_new0(guint, ncells + 1);
    g_autofree guint *pxb_port = g_new0(guint, ncells + 1);

    for (guint i = 0; i < n_items; i++) {
        slots->bus[i] = G_MAXUINT;
        slots->cell[i] = -1;
    }
    if (topology->groups->len == 0)
        return TRUE;
    devices = ensure_child(root, "devices", domain_order, unit);
    index = pci_controller_next_index(devices);
    for (xmlNode *c = devices->children; c; c = c->next) {
        g_autofree char *model = NULL;

        if (!av_domain_is_elem(c, "controller", NULL))
            continue;
        after = c;
        /* the user's expander buses: theirs from busNr up, ours below the lowest */
        model = av_domain_prop(c, "model");
        if (g_strcmp0(model, "pcie-expander-bus") == 0 || g_strcmp0(model, "pci-expander-bus") == 0) {
            xmlNode *target = av_domain_child_first(c, "target", NULL);
            g_autofree char *bus_nr = target ? av_domain_prop(target, "busNr") : NULL;
            int v = pci_number_parse(bus_nr, 10);

            if (v >= 0 && (guint)v < user_bus)
                user_bus = (guint)v;
        }
    }
    bus_top = user_bus;
    {
        /* the buses numbered from 1 up on pcie-root (one per controller
         * index at most: the user's, those written here outside an expander
         * bus and the hot-plug ports) must stay below the lowest expander
         * bus's, each of which takes 1 + the controllers behind it */
        guint on_root = 0, below = bus_top, total = 0;

        for (guint g = 0; g < topology->groups->len; g++) {
            const AvGuestGroup *group = g_ptr_array_index(topology->groups, g);
            guint size = 1 + (group->host_switch ? 1 + group->items->len : 0);

            total += size;
            if (group->cell >= 0) {
                pxb_size[group->cell] += size;
                pxb_ports[group->cell]++;
            } else {
                on_root += size;
            }
        }
        for (guint c = 0; c < ncells; c++) {
            if (pxb_size[c] == 0)
                continue;
            on_root++;      /* the expander bus's controller index */
            total++;
            below = below > 1 + pxb_size[c] ? below - 1 - pxb_size[c] : 0;
        }
        if (index + on_root + AV_HOTPLUG_SLOTS_MAX >= below || index + total > 256) {
            if (user_bus < 256)
                return av_domain_invalid_at(error, NULL, "the guest topology of %u devices needs more PCI buses than "
                                            "the domain's own expander bus at busNr %u leaves below it: raise that "
                                            "busNr, write <av:topology switches='off'/> or guest-numa='off', or "
                                            "ask for fewer devices", n_items, user_bus);
            return av_domain_invalid_at(error, NULL, "the guest topology of %u devices needs more PCI buses than a "
                                        "guest has (256): write <av:topology switches='off'/> or "
                                        "guest-numa='off', or ask for fewer devices", n_items);
        }
    }
#define PUT(node)                                                                                                    \
    do {                                                                                                             \
        xmlNode *node_ = (node);                                                                                     \
        if (after)                                                                                                   \
            insert_after(devices, after, node_, unit);                                                               \
        else                                                                                                         \
            insert_last(devices, node_, unit);                                                                       \
        after = node_;                                                                                               \
    } while (0)
    for (guint c = 0; c < ncells; c++) {
        xmlNode *pxb, *target;
        g_autofree char *bus_nr = NULL;
        g_autofree char *node = NULL;
        g_autofree char *alias = NULL;

        if (pxb_size[c] == 0)
            continue;
        bus_top -= 1 + pxb_size[c];
        bus_nr = g_strdup_printf("%u", bus_top);
        node = g_strdup_printf("%u", c);
        alias = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "pxb%u", c);
        pxb_index[c] = index++;
        pxb = controller_new(root->doc, pxb_index[c], "pcie-expander-bus", NULL, 0);
        target = add_elem(pxb, "target");
        set_prop(target, "busNr", bus_nr);
        xmlNodeAddContent(add_elem(target, "node"), (const xmlChar *)node);
        set_prop(add_elem(pxb, "alias"), "name", alias);
        PUT(pxb);
    }
    for (guint g = 0; g < topology->groups->len; g++) {
        const AvGuestGroup *group = g_ptr_array_index(topology->groups, g);
        guint rp_index = index++;
        xmlNode *port = controller_new(root->doc, rp_index, "pcie-root-port", "rp", rp++);

        if (group->cell >= 0) {
            /* slots 0 to 31 of the expander bus, then functions 1 to 7 of them */
            guint k = pxb_port[group->cell]++, n = pxb_ports[group->cell];

            guest_address_add_function(port, pxb_index[group->cell], k % 32, k / 32, k < 32 && k + 32 < n);
        }
        PUT(port);
        if (group->host_switch) {
            guint up_index = index++;
            xmlNode *upstream =
                controller_new(root->doc, up_index, "pcie-switch-upstream-port", "up", up++);

            guest_address_add(upstream, rp_index, 0);
            PUT(upstream);
            for (guint j = 0; j < group->items->len; j++) {
                guint item = g_array_index(group->items, guint, j);
                guint dn_index = index++;
                xmlNode *downstream = controller_new(root->doc, dn_index, "pcie-switch-downstream-port", "dn",
                                                     dn++);

                guest_address_add(downstream, up_index, j);
                PUT(downstream);
                slots->bus[item] = dn_index;
                slots->cell[item] = group->cell;
            }
        } else {
            guint item = g_array_index(group->items, guint, 0);

            slots->bus[item] = rp_index;
            slots->cell[item] = group->cell;
        }
    }
#undef PUT
    return TRUE;
}

/* The guest NUMA cells of @topology: <cpu><numa><cell id= cpus= memory=
 * unit='KiB'/></numa> (a <cpu> made when the domain has none; the user's
 * mode and model kept), a <vcpupin> per vCPU on its cell's host CPUs and
 * <emulatorpin> on all of them, <numatune><memory mode='strict'
 * nodeset=(every node)/> and a <memnode cellid= mode='strict' nodeset=/>
 * per cell (formatdomain.rst, "CPU model and topology", "CPU Tuning",
 * "NUMA Node Tuning").  Sets @wrote's cells, cpu, pinned, numatune. */
static void
write_cells(xmlNode *root, const AvGuestTopology *topology, AvWrote *wrote, const char *unit)
{
    xmlNode *cpu = av_domain_child_first(root, "cpu", NULL);
    xmlNode *numa, *cputune, *numatune, *memory;
    g_autoptr(GArray) all_cpus = g_array_new(FALSE, FALSE, sizeof(guint));
    g_autoptr(GArray) all_nodes = g_array_new(FALSE, FALSE, sizeof(guint));
    g_autofree char *all_cpuset = NULL;
    g_autofree char *all_nodeset = NULL;

    if (!cpu) {
        cpu = ensure_child(root, "cpu", domain_order, unit);
        wrote->cpu = TRUE;
    }
    numa = new_elem(root->doc, NULL, "numa");
    cputune = ensure_child(root, "cputune", domain_order, unit);
    for (guint c = 0; c < topology->cells->len; c++) {
        const AvGuestCell *cell = g_ptr_array_index(topology->cells, c);
        xmlNode *node = add_elem(numa, "cell");
        g_autofree char *id = g_strdup_printf("%u", cell->id);
        g_autofree char *vcpus = av_domain_cpuset_format(cell->vcpus);
        g_autofree char *cpuset = av_domain_cpuset_format(cell->host_cpus);
        g_autofree char *memory_s = g_strdup_printf("%" G_GUINT64_FORMAT, cell->memory_kib);
        guint host_node = (guint)cell->host_node;

        set_prop(node, "id", id);
        set_prop(node, "cpus", vcpus);
        set_prop(node, "memory", memory_s);
        set_prop(node, "unit", "KiB");
        for (guint v = 0; v < cell->vcpus->len; v++) {
            xmlNode *pin = new_elem(root->doc, NULL, "vcpupin");
            g_autofree char *vcpu = g_strdup_printf("%u", g_array_index(cell->vcpus, guint, v));

            set_prop(pin, "vcpu", vcpu);
            set_prop(pin, "cpuset", cpuset);
            insert_ordered(cputune, pin, cputune_order, unit);
        }
        g_array_append_vals(all_cpus, cell->host_cpus->data, cell->host_cpus->len);
        g_array_append_val(all_nodes, host_node);
    }
    insert_last(cpu, numa, unit);
    all_cpuset = av_domain_cpuset_format(all_cpus);
    all_nodeset = av_domain_cpuset_format(all_nodes);
    {
        xmlNode *pin = new_elem(root->doc, NULL, "emulatorpin");

        set_prop(pin, "cpuset", all_cpuset);
        insert_ordered(cputune, pin, cputune_order, unit);
    }
    numatune = ensure_child(root, "numatune", domain_order, unit);
    memory = new_elem(root->doc, NULL, "memory");
    set_prop(memory, "mode", "strict");
    set_prop(memory, "nodeset", all_nodeset);
    insert_ordered(numatune, memory, numatune_order, unit);
    for (guint c = 0; c < topology->cells->len; c++) {
        const AvGuestCell *cell = g_ptr_array_index(topology->cells, c);
        xmlNode *memnode = new_elem(root->doc, NULL, "memnode");
        g_autofree char *id = g_strdup_printf("%u", cell->id);
        g_autofree char *nodeset = g_strdup_printf("%d", cell->host_node);

        set_prop(memnode, "cellid", id);
        set_prop(memnode, "mode", "strict");
        set_prop(memnode, "nodeset", nodeset);
        insert_ordered(numatune, memnode, numatune_order, unit);
    }
    wrote->cells = wrote->pinned = wrote->numatune = TRUE;
}

/* The xmlns:qemu namespace of <domain>, declared (prefix "qemu") when it
 * is not; sets @wrote's qemu_ns then. */
static xmlNs *
qemu_ns_ensure(xmlNode *root, AvWrote *wrote)
{
    xmlNs *ns = xmlSearchNsByHref(root->doc, root, (const xmlChar *)AV_NS_QEMU);

    if (ns)
        return ns;
    ns = xmlNewNs(root, (const xmlChar *)AV_NS_QEMU, (const xmlChar *)"qemu");
    if (!ns)    /* "qemu" names another namespace on <domain> */
        ns = xmlNewNs(root, (const xmlChar *)AV_NS_QEMU, (const xmlChar *)"accelvirt-qemu");
    wrote->qemu_ns = ns != NULL;
    return ns;
}

/* GPUDirect cliques: for each GPU of a group with a clique,
 *   <qemu:override><qemu:device alias='ua-accelvirt-N'><qemu:frontend>
 *     <qemu:property name='x-nv-gpudirect-clique' type='unsigned' value='C'/>
 *   </qemu:frontend></qemu:device></qemu:override>
 * (libvirt 8.2 and later, docs/drvqemu.rst "Overriding properties of QEMU
 * devices"; QEMU hw/vfio/pci.c's x-nv-gpudirect-clique, 0 to 15), into the
 * user's <qemu:override>, <qemu:device alias=> and <qemu:frontend> where
 * they are (one element per alias, as libvirt wants), else new ones, the
 * <qemu:override> last in <domain>, where libvirt's schema puts it.  A GPU
 * whose alias has an x-nv-gpudirect-clique of the user's gets none (theirs
 * wins; av_guest_topology() notes it).  Stores in @made[i] what it made
 * for item i, for <av:placement> (clique-made=): "property" (into the
 * user's frontend), "frontend" or "device"; NULL when it wrote nothing;
 * sets @wrote's qemu_override when it made the <qemu:override>. */
static void
write_cliques(xmlNode *root, const AvGuestTopology *topology, const AvPlacement *placement, AvWrote *wrote,
              const char **made, const char *unit)
{
    xmlNode *override = override_find(root);
    xmlNs *ns = override ? override->ns : NULL;

    for (guint g = 0; g < topology->groups->len; g++) {
        const AvGuestGroup *group = g_ptr_array_index(topology->groups, g);
        g_autofree char *clique = g_strdup_printf("%d", group->clique);

        if (group->clique < 0)
            continue;
        for (guint j = 0; j < group->items->len; j++) {
            guint i = g_array_index(group->items, guint, j);
            const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
            g_autofree char *alias = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%u", i);
            xmlNode *device, *frontend, *property;

            if (!item->gpudirect || av_domain_user_clique(root, alias))
                continue;
            if (!ns) {
                ns = qemu_ns_ensure(root, wrote);
                if (!ns)
                    return;
            }
            if (!override) {
                override = new_elem(root->doc, ns, "override");
                insert_last(root, override, unit);
                wrote->qemu_override = TRUE;
            }
            property = new_elem(root->doc, ns, "property");
            set_prop(property, "name", AV_GPUDIRECT_PROPERTY);
            set_prop(property, "type", "unsigned");
            set_prop(property, "value", clique);
            device = override_device(override, alias);
            frontend = av_domain_child_first(device, "frontend", AV_NS_QEMU);
            if (frontend) {
                insert_last(frontend, property, unit);
                made[i] = "property";
            } else if (device) {
                frontend = new_elem(root->doc, ns, "frontend");
                xmlAddChild(frontend, property);
                insert_last(device, frontend, unit);
                made[i] = "frontend";
            } else {
                device = new_elem(root->doc, ns, "device");
                set_prop(device, "alias", alias);
                frontend = new_elem(root->doc, ns, "frontend");
                xmlAddChild(device, frontend);
                xmlAddChild(frontend, property);
                insert_last(override, device, unit);
                made[i] = "device";
            }
        }
    }
}

/* The clique of the group holding item @i of @topology, -1 when none. */
static int
group_clique(const AvGuestTopology *topology, guint i)
{
    for (guint g = 0; g < topology->groups->len; g++) {
        const AvGuestGroup *group = g_ptr_array_index(topology->groups, g);

        for (guint j = 0; j < group->items->len; j++) {
            if (g_array_index(group->items, guint, j) == i)
                return group->clique;
        }
    }
    return -1;
}

char *
av_domain_hotplug_fill(const char *xml, gsize len, guint *ret_added, GError **error)
{
    g_autoptr(GPtrArray) requests = NULL;
    g_autofree char *unit = NULL;
    xmlDoc *doc = av_domain_xml_read(xml, len, error);
    xmlNode *root;
    guint hotplug = 0, added = 0;
    char *out = NULL;

    if (!doc)
        return NULL;
    root = av_domain_root(doc, error);
    if (root && requests_parse(av_domain_accelerators_find(root), &requests, &hotplug, error)) {
        unit = doc_unit(root);
        if (hotplug > 0)
            added = write_hotplug(root, hotplug, unit);
        out = added > 0 ? doc_serialize(doc, has_declaration(xml, len), error) : g_strndup(xml, len);
        if (out)
            *ret_added = added;
    }
    xmlFreeDoc(doc);
    return out;
}

char *
av_domain_rewrite(const char *xml, gsize len, const AvPlacement *placement, const AvPolicy *policy, GError **error)
{
    g_autoptr(AvDomain) dom = NULL;
    g_autoptr(GPtrArray) requests = NULL;
    g_autoptr(AvGuestTopology) topology = NULL;
    g_autofree char *unit = NULL;
    g_autofree guint *slot_bus = NULL;
    g_autofree int *slot_cell = NULL;
    g_autofree const char **made = NULL;
    AvGuestSlots slots;
    xmlDoc *doc = NULL;
    xmlNode *root, *accelerators, *devices = NULL, *placed;
    AvWrote wrote = { 0 };
    guint hotplug = 0, n_items;
    gboolean hide = FALSE, changed = FALSE;
    char *out = NULL;

    g_return_val_if_fail(placement != NULL, NULL);
    /* the reader's checks first: a domain it refuses is never written */
    dom = av_domain_parse(xml, len, error);
    if (!dom)
        return NULL;
    doc = av_domain_xml_read(xml, len, error);
    if (!doc)
        return NULL;
    root = av_domain_root(doc, error);
    if (!root)
        goto out;
    accelerators = av_domain_accelerators_find(root);
    if (!requests_parse(accelerators, &requests, &hotplug, error))
        goto out;
    if (requests->len == 0 && hotplug == 0) {
        /* nothing asked of accelvirt (a domain Nova wrote, say): as it came */
        out = g_strndup(xml, len);
        goto out;
    }
    if (dom->pinning_problem && requests->len > 0) {
        /* it is acted on from here: the vCPUs are pinned to the devices' node */
        av_domain_invalid_at(error, NULL, "cannot place the accelerators of domain '%s': its vCPU pinning or NUMA "
                             "tuning cannot be read (%s); accelvirt pins the vCPUs to the devices' NUMA node, "
                             "so correct it first", dom->name, dom->pinning_problem);
        goto out;
    }
    if (!placement_check(placement, policy, requests, &hide, error) || !av_domain_strip(root, &changed, error))
        goto out;
    /* on what the user wrote, accelvirt's earlier placement gone */
    topology = av_guest_topology_at(root, placement, error);
    if (!topology)
        goto out;

    unit = doc_unit(root);
    /* the user's own empty <cputune/> and <numatune/>, which an unplace gives back */
    wrote.user_cputune = element_is_empty(av_domain_child_first(root, "cputune", NULL));
    wrote.user_numatune = element_is_empty(av_domain_child_first(root, "numatune", NULL));
    n_items = placement->items ? placement->items->len : 0;
    slot_bus = g_new0(guint, n_items + 1);
    slot_cell = g_new0(int, n_items + 1);
    slots.bus = slot_bus;
    slots.cell = slot_cell;
    if (!write_topology(root, topology, n_items, &slots, unit, error))
        goto out;
    for (guint i = 0; i < n_items; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
        g_autofree char *alias = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%u", i);

        if (!devices)
            devices = ensure_child(root, "devices", domain_order, unit);
        insert_last(devices, hostdev_new(doc, item, alias, slots.bus[i]), unit);
    }
    if (hotplug > 0)
        write_hotplug(root, hotplug, unit);
    if (topology->cells->len > 0) {
        write_cells(root, topology, &wrote, unit);
    } else if (placement->numa_node >= 0) {
        if (!user_pinned(root)) {
            write_pinning(root, placement, MAX(dom->vcpus, 1), unit);
            wrote.pinned = TRUE;
        }
        if (!user_numatune(root)) {
            write_numatune(root, placement, unit);
            wrote.numatune = TRUE;
        }
    }
    if (hide)
        write_hidden(root, &wrote, unit);
    made = g_new0(const char *, n_items + 1);
    write_cliques(root, topology, placement, &wrote, made, unit);

    placed = new_elem(doc, accelerators->ns, "placement");
    if (placement->numa_node >= 0) {
        g_autofree char *node = g_strdup_printf("%d", placement->numa_node);

        set_prop(placed, "node", node);
    }
    set_prop(placed, "pinned", wrote.pinned ? "yes" : "no");
    set_prop(placed, "numatune", wrote.numatune ? "yes" : "no");
    set_prop(placed, "hidden", wrote.hidden ? "yes" : "no");
    set_prop(placed, "vendor-id", wrote.vendor_id ? "yes" : "no");
    /* The guest topology's, only when written: the records of earlier placements stay as they were */
    if (wrote.cells)
        set_prop(placed, "cells", "yes");
    if (wrote.cpu)
        set_prop(placed, "cpu", "yes");
    if (wrote.qemu_ns)
        set_prop(placed, "qemu-ns", "yes");
    if (wrote.qemu_override)
        set_prop(placed, "qemu-override", "yes");
    if (wrote.user_cputune && wrote.pinned)
        set_prop(placed, "user-cputune", "yes");
    if (wrote.user_numatune && (wrote.numatune || wrote.cells))
        set_prop(placed, "user-numatune", "yes");
    for (guint i = 0; i < n_items; i++) {
        g_autofree char *alias = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%u", i);

        xmlNode *entry = placed_new(doc, accelerators->ns, g_ptr_array_index(placement->items, i), alias,
                                    slots.cell[i]);

        if (made[i]) {
            g_autofree char *clique = g_strdup_printf("%d", group_clique(topology, i));

            set_prop(entry, "clique", clique);
            set_prop(entry, "clique-made", made[i]);
        }
        xmlAddChild(placed, entry);
    }
    insert_last(accelerators, placed, unit);
    out = doc_serialize(doc, has_declaration(xml, len), error);
out:
    xmlFreeDoc(doc);
    return out;
}

char *
av_domain_ensure_uuid(const char *xml, gsize len, char **ret_uuid, GError **error)
{
    g_autoptr(AvDomain) dom = NULL;
    g_autofree char *uuid = NULL;
    g_autofree char *unit = NULL;
    xmlDoc *doc = NULL;
    xmlNode *root, *node;
    char *out = NULL;

    dom = av_domain_parse(xml, len, error);
    if (!dom)
        return NULL;
    if (dom->uuid) {
        *ret_uuid = g_strdup(dom->uuid);
        return g_strndup(xml, len);
    }
    doc = av_domain_xml_read(xml, len, error);
    if (!doc)
        return NULL;
    root = av_domain_root(doc, error);
    if (root) {
        uuid = g_uuid_string_random();
        unit = doc_unit(root);
        node = new_elem(doc, NULL, "uuid");
        xmlNodeAddContent(node, (const xmlChar *)uuid);
        insert_ordered(root, node, domain_order, unit);
        out = doc_serialize(doc, has_declaration(xml, len), error);
        if (out)
            *ret_uuid = g_steal_pointer(&uuid);
    }
    xmlFreeDoc(doc);
    return out;
}

char *
av_domain_unplace(const char *xml, gsize len, GError **error)
{
    xmlDoc *doc = av_domain_xml_read(xml, len, error);
    xmlNode *root;
    gboolean changed = FALSE;
    char *out = NULL;

    if (!doc)
        return NULL;
    root = av_domain_root(doc, error);
    if (root && av_domain_strip(root, &changed, error))
        out = changed ? doc_serialize(doc, has_declaration(xml, len), error) : g_strndup(xml, len);
    xmlFreeDoc(doc);
    return out;
}

/* ---- remapping a placed domain (restore, migrate) ---- */

/* Sets @name of @node to @value (removes it when @value is NULL), noting in
 * *changed when that changes the document. */
static void
update_prop(xmlNode *node, const char *name, const char *value, gboolean *changed)
{
    g_autofree char *old = av_domain_prop(node, name);

    if (g_strcmp0(old, value) == 0)
        return;
    if (value)
        xmlSetProp(node, (const xmlChar *)name, (const xmlChar *)value);
    else
        xmlUnsetProp(node, (const xmlChar *)name);
    *changed = TRUE;
}

/* The <av:placement> of @accelerators, or NULL. */
static xmlNode *
placement_find(const xmlNode *accelerators)
{
    return av_domain_child_first(accelerators, "placement", AV_NS_DOMAIN);
}

/* The kind of an <av:placement> entry: "device", "mdev" or "usb". */
static const char *
placed_kind_of(AvAttach attach)
{
    switch (attach) {
    case AV_ATTACH_MDEV:
        return "mdev";
    case AV_ATTACH_USB:
        return "usb";
    default:
        return "device";
    }
}

/* The entries of <av:placement> in document order, each checked to carry
 * the alias ua-accelvirt-N of its position N. */
static gboolean
placed_entries(xmlNode *placed, GPtrArray **ret, GError **error)
{
    g_autoptr(GPtrArray) entries = g_ptr_array_new();

    for (xmlNode *c = placed->children; c; c = c->next) {
        g_autofree char *alias = NULL;
        g_autofree char *want = NULL;

        if (c->type != XML_ELEMENT_NODE)
            continue;
        if (!av_domain_is_elem(c, "device", AV_NS_DOMAIN) && !av_domain_is_elem(c, "mdev", AV_NS_DOMAIN) &&
            !av_domain_is_elem(c, "usb", AV_NS_DOMAIN)) {
            g_autofree char *q = av_domain_quote((const char *)c->name);

            return av_domain_invalid_at(error, c,
                                        "<av:placement> holds an unknown element <%s> (it takes av:device, av:mdev "
                                        "and av:usb)",
                                        q);
        }
        if (entries->len == AV_REQUESTS_MAX * AV_REQUEST_COUNT_MAX)
            return av_domain_invalid_at(error, c, "<av:placement> has more than %u devices",
                                        AV_REQUESTS_MAX * AV_REQUEST_COUNT_MAX);
        alias = av_domain_prop(c, "alias");
        want = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%u", entries->len);
        if (g_strcmp0(alias, want) != 0) {
            g_autofree char *q = av_domain_quote(alias);

            return av_domain_invalid_at(error, c,
                                        "av:placement entry %u has the alias '%s', not '%s': accelvirt did not "
                                        "write this placement; place the domain again with 'accelvirt define'",
                                        entries->len, q, want);
        }
        g_ptr_array_add(entries, c);
    }
    *ret = g_steal_pointer(&entries);
    return TRUE;
}

/* The <hostdev> of <devices> whose alias is @alias, or NULL; refuses a
 * second one. */
static gboolean
hostdev_find(xmlNode *root, const char *alias, xmlNode **ret, GError **error)
{
    xmlNode *found = NULL;

    for (xmlNode *devices = root->children; devices; devices = devices->next) {
        if (!av_domain_is_elem(devices, "devices", NULL))
            continue;
        for (xmlNode *c = devices->children; c; c = c->next) {
            xmlNode *a;
            g_autofree char *name = NULL;

            if (!av_domain_is_elem(c, "hostdev", NULL) || !(a = av_domain_child_first(c, "alias", NULL)))
                continue;
            name = av_domain_prop(a, "name");
            if (g_strcmp0(name, alias) != 0)
                continue;
            if (found)
                return av_domain_invalid_at(error, c, "two <hostdev>s have the alias '%s'", alias);
            found = c;
        }
    }
    *ret = found;
    return TRUE;
}

/* The canonical source address of the PCI hostdev @alias of @dom. */
static const char *
hostdev_address(const AvDomain *dom, const char *alias)
{
    for (guint i = 0; i < dom->hostdevs->len; i++) {
        const AvHostdev *h = g_ptr_array_index(dom->hostdevs, i);

        if (h->type == AV_HOSTDEV_PCI && !h->is_interface && g_strcmp0(h->alias, alias) == 0)
            return h->pci_address;
    }
    return NULL;
}

/* Moves the PCI hostdev @hostdev (alias @alias) and its entry @entry to the
 * address of @item: <source><address domain= bus= slot= function=/> only;
 * the guest-side <address type='pci'/>, the alias, the driver stay.  The
 * entry's bitstream= becomes @item's. */
static gboolean
remap_pci(const AvDomain *dom, xmlNode *hostdev, xmlNode *entry, const AvPlacedItem *item, const char *alias,
          gboolean *changed, GError **error)
{
    xmlNode *address = av_domain_child_first(av_domain_child_first(hostdev, "source", NULL), "address", NULL);
    const char *old = hostdev_address(dom, alias);
    g_autofree char *canonical = NULL;

    av_domain_pci_address_canonical(item->pci_address, &canonical);
    if (!address || !old)
        return av_domain_invalid_at(error, hostdev, "the <hostdev> '%s' has no <source><address>", alias);
    if (strcmp(old, canonical) != 0) {
        g_autofree char *domain = g_strdup_printf("0x%.4s", canonical);
        g_autofree char *bus = g_strdup_printf("0x%.2s", canonical + 5);
        g_autofree char *slot = g_strdup_printf("0x%.2s", canonical + 8);
        g_autofree char *function = g_strdup_printf("0x%.1s", canonical + 11);

        update_prop(address, "domain", domain, changed);
        update_prop(address, "bus", bus, changed);
        update_prop(address, "slot", slot, changed);
        update_prop(address, "function", function, changed);
    }
    update_prop(entry, "address", canonical, changed);
    update_prop(entry, "bitstream", item->bitstream, changed);
    return TRUE;
}

/* Moves the USB hostdev @hostdev and its entry @entry to @item: vendor and
 * product ids, <source><address bus= device=/> (the stick's numbers now:
 * they change when it re-enumerates; when @item does not know them, kept
 * for the same port and removed for another), and the bus path and
 * identity in the entry. */
static void
remap_usb(xmlNode *hostdev, xmlNode *entry, const AvPlacedItem *item, gboolean *changed)
{
    xmlNode *source = av_domain_child_first(hostdev, "source", NULL);
    xmlNode *vendor = av_domain_child_first(source, "vendor", NULL);
    xmlNode *product = av_domain_child_first(source, "product", NULL);
    xmlNode *address = av_domain_child_first(source, "address", NULL);
    g_autofree char *vendor_id = g_strdup_printf("0x%04x", item->usb_vendor);
    g_autofree char *product_id = g_strdup_printf("0x%04x", item->usb_product);
    g_autofree char *old_path = av_domain_prop(entry, "bus-path");

    if (item->usb_busnum > 0 && item->usb_devnum > 0 && source) {
        g_autofree char *bus = g_strdup_printf("%u", item->usb_busnum);
        g_autofree char *device = g_strdup_printf("%u", item->usb_devnum);

        if (!address) {
            address = add_elem(source, "address");
            *changed = TRUE;
        }
        update_prop(address, "bus", bus, changed);
        update_prop(address, "device", device, changed);
    } else if (address && g_strcmp0(old_path, item->usb_bus_path) != 0) {
        remove_node(address);
        *changed = TRUE;
    }
    /* Ids unknown (0: a placement the pool recorded keeps none) stay. */
    if (vendor && item->usb_vendor)
        update_prop(vendor, "id", vendor_id, changed);
    if (product && item->usb_product)
        update_prop(product, "id", product_id, changed);
    update_prop(entry, "bus-path", item->usb_bus_path, changed);
    if (item->usb_vendor && item->usb_product) {
        update_prop(entry, "vendor", vendor_id, changed);
        update_prop(entry, "product", product_id, changed);
    }
    if (item->identity)
        update_prop(entry, "identity", item->identity, changed);
}

/* The pinning and numatune accelvirt wrote (as @wrote says), moved to the
 * node of @placement; removed when it has none. */
static void
remap_numa(xmlNode *root, xmlNode *placed, const AvPlacement *placement, const AvWrote *wrote, gboolean *changed)
{
    g_autofree char *cpuset = placement->numa_node >= 0 ? av_domain_cpuset_format(placement->cpus) : NULL;
    g_autofree char *node = placement->numa_node >= 0 ? g_strdup_printf("%d", placement->numa_node) : NULL;
    xmlNode *next;

    update_prop(placed, "node", node, changed);
    for (xmlNode *c = root->children; c; c = next) {
        next = c->next;
        if (wrote->pinned && av_domain_is_elem(c, "cputune", NULL)) {
            if (!cpuset) {
                gboolean removed = remove_children(c, "vcpupin");

                removed = remove_children(c, "emulatorpin") || removed;
                if (removed) {
                    *changed = TRUE;
                    remove_if_emptied(c, FALSE);
                }
                continue;
            }
            for (xmlNode *pin = c->children; pin; pin = pin->next) {
                if (av_domain_is_elem(pin, "vcpupin", NULL) || av_domain_is_elem(pin, "emulatorpin", NULL))
                    update_prop(pin, "cpuset", cpuset, changed);
            }
        } else if (wrote->numatune && av_domain_is_elem(c, "numatune", NULL)) {
            if (!node) {
                if (remove_children(c, "memory")) {
                    *changed = TRUE;
                    remove_if_emptied(c, FALSE);
                }
                continue;
            }
            for (xmlNode *memory = c->children; memory; memory = memory->next) {
                if (av_domain_is_elem(memory, "memory", NULL))
                    update_prop(memory, "nodeset", node, changed);
            }
        }
    }
    if (!node) {
        if (wrote->pinned)
            update_prop(placed, "pinned", "no", changed);
        if (wrote->numatune)
            update_prop(placed, "numatune", "no", changed);
    }
}

/* The cell= of the <av:placement> entry @entry: *ret the cell, -1 when
 * it has none. */
static gboolean
entry_cell(const xmlNode *entry, int *ret, GError **error)
{
    g_autofree char *cell = av_domain_prop(entry, "cell");
    guint v = 0;

    *ret = -1;
    if (!cell)
        return TRUE;
    if (!av_domain_decimal_parse(cell, AV_DOMAIN_NODE_MAX - 1, &v)) {
        g_autofree char *q = av_domain_quote(cell);

        return av_domain_invalid_at(error, entry, "av:placement entry cell '%s' is not a guest NUMA cell between 0 "
                                    "and %u", q, AV_DOMAIN_NODE_MAX - 1);
    }
    *ret = (int)v;
    return TRUE;
}

/* The vCPUs of the guest cell @id as <cpu><numa><cell id= cpus=> of @root
 * says, or NULL with an error. */
static GArray *
cell_vcpus(const xmlNode *root, guint id, GError **error)
{
    xmlNode *numa = av_domain_child_first(av_domain_child_first(root, "cpu", NULL), "numa", NULL);

    for (xmlNode *c = numa ? numa->children : NULL; c; c = c->next) {
        g_autofree char *cid = NULL;
        g_autofree char *cpus = NULL;
        GArray *set = NULL;
        guint v = 0;

        if (!av_domain_is_elem(c, "cell", NULL))
            continue;
        cid = av_domain_prop(c, "id");
        if (!av_domain_decimal_parse(cid, G_MAXUINT32, &v) || v != id)
            continue;
        cpus = av_domain_prop(c, "cpus");
        if (!cpus || !av_domain_cpuset_parse(cpus, AV_DOMAIN_VCPU_MAX, &set, error)) {
            if (!cpus)
                av_domain_invalid_at(error, c, "<cell id='%u'> has no cpus", id);
            return NULL;
        }
        return set;
    }
    av_domain_invalid_at(error, numa, "the domain's <cpu><numa> has no <cell id='%u'>, which its av:placement "
                         "names; place the domain again with 'accelvirt define'", id);
    return NULL;
}

/* Sets @prop to @value on each <cputune> (vcpupin, emulatorpin) or
 * <numatune> (memory, memnode) child @elem whose @attr is @id (@attr NULL:
 * every one). */
static void
pins_update(xmlNode *root, const char *elem, const char *attr, guint id, const char *prop, const char *value,
            gboolean *changed)
{
    const char *parent = g_str_has_prefix(elem, "mem") ? "numatune" : "cputune";

    for (xmlNode *c = root->children; c; c = c->next) {
        if (!av_domain_is_elem(c, parent, NULL))
            continue;
        for (xmlNode *pin = c->children; pin; pin = pin->next) {
            g_autofree char *v = NULL;
            guint n = 0;

            if (!av_domain_is_elem(pin, elem, NULL))
                continue;
            v = attr ? av_domain_prop(pin, attr) : NULL;
            if (!attr || (av_domain_decimal_parse(v, G_MAXUINT32, &n) && n == id))
                update_prop(pin, prop, value, changed);
        }
    }
}

/* The host nodes the devices of guest cell @c sit on in @placement
 * (@cells: each entry's cell), in the order met. */
static GArray *
cell_nodes(GArray *cells, const AvPlacement *placement, guint c)
{
    GArray *nodes = g_array_new(FALSE, FALSE, sizeof(guint));

    for (guint i = 0; i < cells->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
        guint node = (guint)item->numa_node;
        gboolean seen = FALSE;

        if (g_array_index(cells, int, i) != (int)c || item->numa_node < 0)
            continue;
        for (guint k = 0; k < nodes->len && !seen; k++)
            seen = g_array_index(nodes, guint, k) == node;
        if (!seen)
            g_array_append_val(nodes, node);
    }
    return nodes;
}

/* The nodeset of <numatune><memnode cellid=@c>, or NULL.  Caller frees. */
static char *
memnode_nodeset(const xmlNode *root, guint c)
{
    xmlNode *numatune = av_domain_child_first(root, "numatune", NULL);

    for (xmlNode *m = numatune ? numatune->children : NULL; m; m = m->next) {
        g_autofree char *id = NULL;
        guint v = 0;

        if (!av_domain_is_elem(m, "memnode", NULL))
            continue;
        id = av_domain_prop(m, "cellid");
        if (av_domain_decimal_parse(id, G_MAXUINT32, &v) && v == c)
            return av_domain_prop(m, "nodeset");
    }
    return NULL;
}

/* The guest cells accelvirt wrote, re-pinned to the host nodes their
 * devices sit on in @placement (a cell whose devices span nodes: all of
 * them): each cell's <vcpupin>s and <memnode>, then <emulatorpin> and
 * <numatune><memory> on the union.  The cells, controllers and guest
 * addresses stay: the guest ABI never changes.  When every cell's devices
 * sit on the nodes its <memnode> already names, nothing changes (and
 * @placement needs no CPUs: the hook's own remap of the same cards builds
 * one without its nodes); else every node needs its CPUs in
 * @placement->nodes. */
static gboolean
remap_cells(xmlNode *root, GPtrArray *entries, const AvPlacement *placement, gboolean *changed, GError **error)
{
    g_autoptr(GArray) cells = g_array_new(FALSE, FALSE, sizeof(int));
    g_autoptr(GArray) all_cpus = g_array_new(FALSE, FALSE, sizeof(guint));
    g_autoptr(GArray) all_nodes = g_array_new(FALSE, FALSE, sizeof(guint));
    g_autofree char *all_cpuset = NULL;
    g_autofree char *all_nodeset = NULL;
    guint max_cell = 0;
    gboolean any = FALSE, moved = FALSE;

    for (guint i = 0; i < entries->len; i++) {
        int cell = -1;

        if (!entry_cell(g_ptr_array_index(entries, i), &cell, error))
            return FALSE;
        g_array_append_val(cells, cell);
        if (cell >= 0) {
            max_cell = MAX(max_cell, (guint)cell);
            any = TRUE;
        }
    }
    for (guint c = 0; any && c <= max_cell && !moved; c++) {
        g_autoptr(GArray) nodes = cell_nodes(cells, placement, c);
        g_autofree char *nodeset = nodes->len ? av_domain_cpuset_format(nodes) : NULL;
        g_autofree char *now = memnode_nodeset(root, c);

        moved = nodeset && g_strcmp0(nodeset, now) != 0;
    }
    if (!moved)
        return TRUE;
    for (guint c = 0; c <= max_cell; c++) {
        g_autoptr(GArray) nodes = cell_nodes(cells, placement, c);
        g_autoptr(GArray) vcpus = NULL;
        g_autoptr(GArray) cpus = g_array_new(FALSE, FALSE, sizeof(guint));
        g_autofree char *cpuset = NULL;
        g_autofree char *nodeset = NULL;

        if (nodes->len == 0)
            continue;    /* no cell c, or none of its devices has a known node: as it was */
        for (guint k = 0; k < nodes->len; k++) {
            int node = (int)g_array_index(nodes, guint, k);
            const AvPlacedNode *n = av_domain_placed_node(placement, node);

            if (!n || !n->cpus || n->cpus->len == 0)
                return av_domain_invalid_at(error, NULL, "the new placement lacks the CPUs of host node %d, where "
                                            "the devices of guest cell %u now sit: cannot re-pin the cell",
                                            node, c);
            g_array_append_vals(cpus, n->cpus->data, n->cpus->len);
        }
        if (!(vcpus = cell_vcpus(root, c, error)))
            return FALSE;
        cpuset = av_domain_cpuset_format(cpus);
        nodeset = av_domain_cpuset_format(nodes);
        for (guint v = 0; v < vcpus->len; v++)
            pins_update(root, "vcpupin", "vcpu", g_array_index(vcpus, guint, v), "cpuset", cpuset, changed);
        pins_update(root, "memnode", "cellid", c, "nodeset", nodeset, changed);
        g_array_append_vals(all_cpus, cpus->data, cpus->len);
        g_array_append_vals(all_nodes, nodes->data, nodes->len);
    }
    all_cpuset = av_domain_cpuset_format(all_cpus);
    all_nodeset = av_domain_cpuset_format(all_nodes);
    pins_update(root, "emulatorpin", NULL, 0, "cpuset", all_cpuset, changed);
    pins_update(root, "memory", NULL, 0, "nodeset", all_nodeset, changed);
    return TRUE;
}

char *
av_domain_remap(const char *xml, gsize len, const AvPlacement *placement, GError **error)
{
    g_autoptr(AvDomain) dom = NULL;
    g_autoptr(GPtrArray) requests = NULL;
    g_autoptr(GPtrArray) entries = NULL;
    xmlDoc *doc = NULL;
    xmlNode *root, *accelerators, *placed;
    AvWrote wrote = { 0 };
    gboolean hide = FALSE, changed = FALSE;
    char *out = NULL;

    g_return_val_if_fail(placement != NULL, NULL);
    dom = av_domain_parse(xml, len, error);
    if (!dom)
        return NULL;
    doc = av_domain_xml_read(xml, len, error);
    if (!doc)
        return NULL;
    root = av_domain_root(doc, error);
    if (!root)
        goto out;
    accelerators = av_domain_accelerators_find(root);
    if (!requests_parse(accelerators, &requests, NULL, error))
        goto out;
    placed = accelerators ? placement_find(accelerators) : NULL;
    if (requests->len == 0 || !placed) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "domain '%s' has no accelvirt placement to remap (no <av:request> or no <av:placement> in its "
                    "<av:accelerators>); place it with 'accelvirt define'", dom->name ? dom->name : "(unnamed)");
        goto out;
    }
    if (!wrote_read(placed, &wrote, error) || !placed_entries(placed, &entries, error) ||
        !placement_check(placement, NULL, requests, &hide, error))
        goto out;
    if (!placement->items || placement->items->len != entries->len) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "the new placement has %u devices but domain '%s' was placed with %u (%s0 to %s%u); place "
                    "the domain again with 'accelvirt define'",
                    placement->items ? placement->items->len : 0, dom->name ? dom->name : "(unnamed)",
                    entries->len, AV_REWRITE_ALIAS_PREFIX, AV_REWRITE_ALIAS_PREFIX,
                    entries->len ? entries->len - 1 : 0);
        goto out;
    }
    for (guint i = 0; i < entries->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
        xmlNode *entry = g_ptr_array_index(entries, i);
        g_autofree char *alias = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%u", i);
        g_autofree char *profile = av_domain_prop(entry, "profile");
        g_autofree char *type = NULL;
        const char *kind = placed_kind_of(item->attach);
        const char *want_type = item->attach == AV_ATTACH_MDEV ? "mdev"
                                : item->attach == AV_ATTACH_USB ? "usb" : "pci";
        xmlNode *hostdev = NULL;

        if (g_strcmp0(profile, item->profile) != 0) {
            g_autofree char *q = av_domain_quote(profile);

            av_domain_invalid_at(error, entry,
                                 "the new placement's device %u is of profile '%s' but %s of the domain is of "
                                 "profile '%s': the placement is not for these requests",
                                 i, item->profile, alias, q);
            goto out;
        }
        if (strcmp((const char *)entry->name, kind) != 0) {
            av_domain_invalid_at(error, entry,
                                 "the new placement's device %u is an %s but %s of the domain is an "
                                 "av:%s: the placement is not for these requests",
                                 i, kind, alias, (const char *)entry->name);
            goto out;
        }
        if (!hostdev_find(root, alias, &hostdev, error))
            goto out;
        if (!hostdev) {
            av_domain_invalid_at(error, entry,
                                 "the domain has no <hostdev> with the alias '%s' that its av:placement names; "
                                 "place the domain again with 'accelvirt define'",
                                 alias);
            goto out;
        }
        type = av_domain_prop(hostdev, "type");
        if (g_strcmp0(type, want_type) != 0) {
            g_autofree char *q = av_domain_quote(type);

            av_domain_invalid_at(error, hostdev,
                                 "the <hostdev> '%s' is of type '%s', not '%s' as its av:placement entry "
                                 "says",
                                 alias, q, want_type);
            goto out;
        }
        if (item->attach == AV_ATTACH_USB)
            remap_usb(hostdev, entry, item, &changed);
        else if (item->attach != AV_ATTACH_MDEV && !remap_pci(dom, hostdev, entry, item, alias, &changed, error))
            goto out;
        /* an mdev keeps its UUID: the hook creates it at prepare */
    }
    if (wrote.cells) {
        /* the cells' pinning, not the one node's */
        if (!remap_cells(root, entries, placement, &changed, error))
            goto out;
        wrote.pinned = wrote.numatune = FALSE;
    }
    remap_numa(root, placed, placement, &wrote, &changed);
    out = changed ? doc_serialize(doc, has_declaration(xml, len), error) : g_strndup(xml, len);
out:
    xmlFreeDoc(doc);
    return out;
}

/* See av-rewrite.h. */
AvPlacement *
av_domain_placement(const char *xml, gsize len, GError **error)
{
    g_autoptr(AvPlacement) placement = g_new0(AvPlacement, 1);
    g_autoptr(GPtrArray) entries = NULL;
    xmlDoc *doc;
    xmlNode *root, *accelerators, *placed = NULL;
    gboolean ok = FALSE;

    placement->numa_node = -1;
    placement->cpus = g_array_new(FALSE, FALSE, sizeof(guint));
    placement->items = g_ptr_array_new_with_free_func((GDestroyNotify)av_placed_item_free);
    placement->warnings = g_ptr_array_new_with_free_func(g_free);
    doc = av_domain_xml_read(xml, len, error);
    if (!doc)
        return NULL;
    root = av_domain_root(doc, error);
    if (!root)
        goto out;
    accelerators = av_domain_accelerators_find(root);
    placed = accelerators ? placement_find(accelerators) : NULL;
    if (!placed) {
        ok = TRUE;
        goto out;
    }
    {
        g_autofree char *node = av_domain_prop(placed, "node");
        guint v = 0;

        if (node) {
            if (!av_domain_decimal_parse(node, AV_DOMAIN_NODE_MAX - 1, &v)) {
                g_autofree char *q = av_domain_quote(node);

                av_domain_invalid_at(error, placed, "av:placement node '%s' is not a NUMA node number between 0 and %u",
                                     q, AV_DOMAIN_NODE_MAX - 1);
                goto out;
            }
            placement->numa_node = (int)v;
        }
    }
    if (!placed_entries(placed, &entries, error))
        goto out;
    for (guint i = 0; i < entries->len; i++) {
        xmlNode *entry = g_ptr_array_index(entries, i);
        g_autoptr(AvPlacedItem) item = g_new0(AvPlacedItem, 1);
        g_autofree char *value = NULL;
        int cell = -1;    /* checked; AvPlacedItem has no field for the guest side */

        item->numa_node = -1;
        item->vf_index = -1;
        item->profile = av_domain_prop(entry, "profile");
        if (!item->profile || !av_profile_name_is_valid(item->profile)) {
            g_autofree char *q = av_domain_quote(item->profile);

            av_domain_invalid_at(error, entry, "av:placement entry %u has the profile name '%s'", i, q);
            goto out;
        }
        if (av_domain_is_elem(entry, "device", AV_NS_DOMAIN)) {
            item->attach = AV_ATTACH_VFIO_PCI;
            value = av_domain_prop(entry, "address");
            if (!av_domain_pci_address_canonical(value, &item->pci_address)) {
                g_autofree char *q = av_domain_quote(value);

                av_domain_invalid_at(error, entry, "av:device address '%s' is not a PCI address such as '0000:3b:00.0'",
                                     q);
                goto out;
            }
            if (!av_domain_placed_vf(entry, &item->pf_address, &item->vf_index, error) ||
                !av_domain_placed_bitstream(entry, &item->bitstream, error) || !entry_cell(entry, &cell, error))
                goto out;
            if (item->pf_address)
                item->attach = AV_ATTACH_SRIOV_VF;
        } else if (av_domain_is_elem(entry, "mdev", AV_NS_DOMAIN)) {
            item->attach = AV_ATTACH_MDEV;
            value = av_domain_prop(entry, "uuid");
            if (!av_domain_uuid_canonical(value, &item->mdev_uuid)) {
                g_autofree char *q = av_domain_quote(value);

                av_domain_invalid_at(error, entry, "av:mdev uuid '%s' is not a UUID", q);
                goto out;
            }
            if (!entry_cell(entry, &cell, error))
                goto out;
        } else {
            g_autofree char *vendor = av_domain_prop(entry, "vendor");
            g_autofree char *product = av_domain_prop(entry, "product");
            guint64 v = 0, p = 0;

            item->attach = AV_ATTACH_USB;
            item->usb_bus_path = av_domain_prop(entry, "bus-path");
            if (!usb_bus_path_valid(item->usb_bus_path) || !vendor || !product ||
                !g_str_has_prefix(vendor, "0x") || !g_str_has_prefix(product, "0x") ||
                !g_ascii_string_to_unsigned(vendor + 2, 16, 0, G_MAXUINT16, &v, NULL) ||
                !g_ascii_string_to_unsigned(product + 2, 16, 0, G_MAXUINT16, &p, NULL)) {
                av_domain_invalid_at(error, entry, "av:usb entry %u is malformed (bus-path, vendor, product)", i);
                goto out;
            }
            item->usb_vendor = (guint16)v;
            item->usb_product = (guint16)p;
            /* Optional: placements by an older accelvirt have none. */
            item->identity = av_domain_prop(entry, "identity");
            if (item->identity && !av_pool_identity_usb_is_valid(item->identity)) {
                av_domain_invalid_at(error, entry, "av:usb entry %u has a malformed identity", i);
                goto out;
            }
        }
        g_ptr_array_add(placement->items, g_steal_pointer(&item));
    }
    ok = TRUE;
out:
    xmlFreeDoc(doc);
    return ok ? g_steal_pointer(&placement) : NULL;
}

/* ---- RelaxNG ---- */

typedef struct {
    char *first;
    int line;
    char *element;               /* the element the first error is about, or NULL */
} RngErrors;

static void
rng_error(void *data, xmlErrorPtr err)
{
    RngErrors *st = data;
    g_autofree char *msg = NULL;

    if (!st || !err || st->first)
        return;
    msg = g_strstrip(g_strndup(err->message ? err->message : "unknown error", 200));
    for (char *p = msg; *p; p++) {
        if ((guchar)*p < 0x20 || (guchar)*p == 0x7f)
            *p = '?';
    }
    st->first = g_steal_pointer(&msg);
    st->line = err->node ? (int)xmlGetLineNo(err->node) : err->line;
    if (err->node && ((xmlNode *)err->node)->type == XML_ELEMENT_NODE)
        st->element = av_domain_quote((const char *)((xmlNode *)err->node)->name);
}

static void
rng_silent(void *data, xmlErrorPtr err)
{
}

gboolean
av_domain_validate_metadata(const char *xml, gsize len, const char *schema_path, GError **error)
{
    xmlStructuredErrorFunc old_serror = xmlStructuredError;
    void *old_serror_ctx = xmlStructuredErrorContext;
    g_autofree char *schema_text = NULL;
    gsize schema_len = 0;
    xmlRelaxNGParserCtxtPtr pctxt = NULL;
    xmlRelaxNGPtr schema = NULL;
    xmlRelaxNGValidCtxtPtr vctxt = NULL;
    xmlDoc *doc, *sub = NULL;
    xmlNode *root, *accelerators;
    RngErrors st = { 0 };
    gboolean ok = FALSE;
    g_autoptr(GError) io = NULL;

    doc = av_domain_xml_read(xml, len, error);
    if (!doc)
        return FALSE;
    root = av_domain_root(doc, error);
    if (!root)
        goto out;
    accelerators = av_domain_accelerators_find(root);
    if (!accelerators) {
        ok = TRUE;
        goto out;
    }
    if (!g_file_get_contents(schema_path, &schema_text, &schema_len, &io)) {
        g_set_error(error, AV_ERROR, AV_ERROR_IO, "cannot read the schema '%s': %s", schema_path, io->message);
        goto out;
    }
    xmlSetStructuredErrorFunc(NULL, rng_silent);
    pctxt = xmlRelaxNGNewMemParserCtxt(schema_text, (int)schema_len);
    if (pctxt) {
        xmlRelaxNGSetParserStructuredErrors(pctxt, rng_error, &st);
        schema = xmlRelaxNGParse(pctxt);
    }
    if (!schema) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "the schema '%s' does not load: %s", schema_path,
                    st.first ? st.first : "unknown error");
        goto restore;
    }
    /* the metadata alone, as its own document (line numbers are kept) */
    sub = xmlNewDoc((const xmlChar *)"1.0");
    xmlDocSetRootElement(sub, xmlDocCopyNode(accelerators, sub, 1));
    vctxt = xmlRelaxNGNewValidCtxt(schema);
    xmlRelaxNGSetValidStructuredErrors(vctxt, rng_error, &st);
    if (xmlRelaxNGValidateDoc(vctxt, sub) == 0) {
        ok = TRUE;
    } else if (st.line > 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "the accelvirt metadata does not follow the schema %s: <av:%s> at domain XML line %d: %s",
                    schema_path, st.element ? st.element : "accelerators", st.line, st.first ? st.first : "invalid");
    } else {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "the accelvirt metadata does not follow the schema %s: %s",
                    schema_path, st.first ? st.first : "invalid");
    }
restore:
    xmlSetStructuredErrorFunc(old_serror_ctx, old_serror);
out:
    if (vctxt)
        xmlRelaxNGFreeValidCtxt(vctxt);
    if (schema)
        xmlRelaxNGFree(schema);
    if (pctxt)
        xmlRelaxNGFreeParserCtxt(pctxt);
    xmlFreeDoc(sub);
    xmlFreeDoc(doc);
    g_free(st.first);
    g_free(st.element);
    return ok;
}
