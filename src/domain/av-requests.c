/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the requests of a domain XML: its <av:request> elements and
 * <av:hotplug> (av_domain_requests(), see av-rewrite.h). */
#include "config.h"

#include "av-rewrite-private.h"

#include <string.h>

#include "util/av-error.h"
#include "util/av-names.h"

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

gboolean
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
