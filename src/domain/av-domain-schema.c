/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the accelvirt metadata of a domain XML checked against
 * xml/accelvirt-domain.rng (av_domain_validate_metadata()). */
#include "config.h"

#include "av-rewrite-private.h"

#include <string.h>

#include <libxml/relaxng.h>
#include <libxml/xmlerror.h>

#include "util/av-error.h"

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
