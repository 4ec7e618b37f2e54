/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the tree edits of the domain rewrite: each element added
 * goes in with the whitespace of its siblings, right after the sibling
 * libvirt would format before it, and goes out with the whitespace before
 * it (see av-rewrite.c); and the document written back out. */
#include "config.h"

#include "av-rewrite-private.h"

#include <string.h>

#include <libxml/xmlsave.h>

#include "util/av-error.h"

#define AV_INDENT_DEFAULT "  "

/* libvirt's order of the children of <domain> (virDomainDefFormatInternal),
 * of <features> (virDomainFeature), of <cputune> and of <hyperv>: a new
 * element goes after the last sibling that libvirt formats before it. */
const char *const domain_order[] = {
    "name", "uuid", "genid", "title", "description", "metadata", "maxMemory", "memory", "currentMemory",
    "blkiotune", "memtune", "memoryBacking", "vcpu", "vcpus", "iothreads", "iothreadids", "defaultiothread",
    "cputune", "numatune", "resource", "sysinfo", "bootloader", "bootloader_args", "os", "idmap", "features",
    "cpu", "clock", "on_poweroff", "on_reboot", "on_crash", "on_lockfailure", "pm", "perf", "devices", NULL,
};
const char *const features_order[] = {
    "acpi", "apic", "pae", "hap", "viridian", "privnet", "hyperv", "kvm", "pvspinlock", "capabilities", "pmu",
    "vmport", "gic", "smm", "ioapic", "hpt", "vmcoreinfo", "htm", "nested-hv", "msrs", "ccf-assist", "xen",
    "cfpc", "sbbc", "ibs", "tcg", "async-teardown", NULL,
};
const char *const cputune_order[] = {
    "shares", "period", "quota", "global_period", "global_quota", "emulator_period", "emulator_quota",
    "iothread_period", "iothread_quota", "vcpupin", "emulatorpin", "iothreadpin", "vcpusched",
    "iothreadsched", "emulatorsched", "cachetune", "memorytune", NULL,
};
const char *const hyperv_order[] = {
    "relaxed", "vapic", "spinlocks", "vpindex", "runtime", "synic", "stimer", "reset", "vendor_id",
    "frequencies", "reenlightenment", "tlbflush", "ipi", "evmcs", "avic", NULL,
};
const char *const kvm_order[] = { "hidden", "hint-dedicated", "poll-control", "pv-ipi", "dirty-ring", NULL };
const char *const numatune_order[] = { "memory", "memnode", NULL };

/* ---- small tree helpers ---- */

void
set_prop(xmlNode *node, const char *name, const char *value)
{
    xmlNewProp(node, (const xmlChar *)name, (const xmlChar *)value);
}

xmlNode *
new_elem(xmlDoc *doc, xmlNs *ns, const char *name)
{
    return xmlNewDocNode(doc, ns, (const xmlChar *)name, NULL);
}

xmlNode *
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
char *
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
void
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
void
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
void
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
xmlNode *
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
void
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
void
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
gboolean
element_is_empty(const xmlNode *node)
{
    return node && !node->properties && !xmlFirstElementChild((xmlNode *)node);
}

/* ---- serializing ---- */

/* Whether @xml begins with an XML declaration (kept when it does). */
gboolean
has_declaration(const char *xml, gsize len)
{
    gsize i = 0;

    if (len >= 3 && memcmp(xml, "\xef\xbb\xbf", 3) == 0)
        i = 3;
    return len - i >= 5 && memcmp(xml + i, "<?xml", 5) == 0;
}

char *
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
