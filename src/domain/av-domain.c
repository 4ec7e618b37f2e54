/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the facts of a libvirt domain XML (see av-domain.h).
 *
 * The document reaches the root-run hook from libvirt, and the CLI from a
 * user's file: every byte is hostile.  The rules, in order:
 *   - more than AV_DOMAIN_XML_MAX bytes is refused before libxml2 sees it;
 *   - libxml2 parses with XML_PARSE_NONET and without NOENT, DTDLOAD,
 *     DTDATTR or HUGE (so its depth and size limits hold), and the parse
 *     stops at the first DOCTYPE (SAX internalSubset): no DTD, no entity
 *     is ever declared, so billion laughs and XXE never start;
 *   - libxml2 prints nothing: its first error becomes one sentence;
 *   - this file reads the tree the way libvirt does (first <name>, every
 *     <devices>/<hostdev>, attributes by local name as xmlGetProp does),
 *     and refuses what libvirt might read differently (two <source>s in a
 *     hostdev, a decimal with a leading zero that libvirt takes for octal);
 *   - every value that may reach a path is checked against a strict format
 *     and stored canonical.
 *
 * Formats: https://libvirt.org/formatdomain.html#host-device-assignment,
 * #cpu-tuning, #numa-node-tuning; Nova's metadata is written by
 * nova/virt/libvirt/config.py (LibvirtConfigGuestMetaNova*). */
#include "config.h"

#include "av-domain.h"
#include "av-domain-private.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <libxml/SAX2.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

#include "pci/av-pci.h"
#include "policy/av-policy.h"
#include "pool/av-pool.h"
#include "util/av-error.h"
#include "util/av-names.h"

#define AV_NS_NOVA "http://openstack.org/xmlns/libvirt/nova/1.1"

#define AV_QUOTE_MAX 64
#define AV_NAME_MAX 1024
#define AV_NOVA_NAME_MAX 255
#define AV_NOVA_ID_MAX 64
#define AV_ALIAS_MAX 128

/* ---- frees ---- */

void
av_hostdev_free(AvHostdev *hostdev)
{
    if (!hostdev)
        return;
    g_free(hostdev->pci_address);
    g_free(hostdev->mdev_uuid);
    g_free(hostdev->mdev_model);
    g_free(hostdev->netdev);
    g_free(hostdev->netdev_mode);
    g_free(hostdev->alias);
    g_free(hostdev);
}

void
av_placed_device_free(AvPlacedDevice *placed)
{
    if (!placed)
        return;
    g_free(placed->profile);
    g_free(placed->pci_address);
    g_free(placed->pf_address);
    g_free(placed->mdev_uuid);
    g_free(placed->usb_bus_path);
    g_free(placed->usb_identity);
    g_free(placed->alias);
    g_free(placed->bitstream);
    g_free(placed);
}

void
av_domain_free(AvDomain *domain)
{
    if (!domain)
        return;
    g_free(domain->name);
    g_free(domain->uuid);
    if (domain->hostdevs)
        g_ptr_array_unref(domain->hostdevs);
    if (domain->ethernet_targets)
        g_ptr_array_unref(domain->ethernet_targets);
    g_free(domain->nova_name);
    g_free(domain->nova_user);
    g_free(domain->nova_project);
    g_free(domain->vcpu_cpuset);
    g_free(domain->vcpu_placement);
    if (domain->vcpupins)
        g_ptr_array_unref(domain->vcpupins);
    g_free(domain->emulatorpin);
    g_free(domain->numatune_memory_mode);
    g_free(domain->numatune_memory_nodeset);
    g_free(domain->numatune_memory_placement);
    g_free(domain->scrub_token);
    g_free(domain->scrub_identity);
    g_free(domain->metadata_problem);
    g_free(domain->pinning_problem);
    if (domain->placed)
        g_ptr_array_unref(domain->placed);
    g_free(domain);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPlacedDevice, av_placed_device_free)

/* ---- quoting and errors ---- */

static gboolean
unichar_is_unsafe(gunichar c)
{
    return c < 0x20 || (c >= 0x7f && c <= 0x9f) || (c >= 0x200b && c <= 0x200f) ||
           (c >= 0x2028 && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) || c == 0xfeff;
}

/* A copy of @s of at most @max characters (then "..."), unsafe characters
 * and invalid UTF-8 bytes replaced by '?'. */
static char *
sanitize(const char *s, guint max)
{
    GString *out;
    guint n = 0;

    if (!s)
        return g_strdup("(null)");
    out = g_string_new(NULL);
    for (const char *p = s; *p; n++) {
        gunichar c;

        if (n == max) {
            g_string_append(out, "...");
            break;
        }
        c = g_utf8_get_char_validated(p, -1);
        if (c == (gunichar)-1 || c == (gunichar)-2) {
            g_string_append_c(out, '?');
            p++;
            continue;
        }
        if (unichar_is_unsafe(c))
            g_string_append_c(out, '?');
        else
            g_string_append_unichar(out, c);
        p = g_utf8_next_char(p);
    }
    return g_string_free(out, FALSE);
}

char *
av_domain_quote(const char *value)
{
    return sanitize(value, AV_QUOTE_MAX);
}

/* See av-domain-private.h. */
gboolean
av_domain_invalid_at(GError **error, const xmlNode *node, const char *fmt, ...)
{
    va_list ap;
    g_autofree char *msg = NULL;
    long line = node ? xmlGetLineNo(node) : -1;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (line > 0)
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "%s (domain XML line %ld)", msg, line);
    else
        g_set_error_literal(error, AV_ERROR, AV_ERROR_INVALID_INPUT, msg);
    return FALSE;
}

/* ---- strict formats ---- */

/* A number as libvirt reads it with strtoul(base 0) or base 10: decimal, or
 * "0x" hex when @allow_hex.  A decimal with a leading zero is refused: libvirt
 * would read "010" as octal 8, and a different number than libvirt's is a
 * different device.  No sign, no blanks.  At most @max (<= G_MAXUINT32). */
static gboolean
number_parse(const char *s, gboolean allow_hex, guint64 max, guint64 *ret)
{
    const char *p = s;
    guint64 v = 0;
    int base = 10;

    if (!s || !*s)
        return FALSE;
    if (allow_hex && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        base = 16;
        p += 2;
        if (!*p)
            return FALSE;
    } else if (p[0] == '0' && p[1] != '\0') {
        return FALSE;
    }
    for (; *p; p++) {
        int d = base == 16 ? g_ascii_xdigit_value(*p) : g_ascii_digit_value(*p);

        if (d < 0)
            return FALSE;
        v = v * (guint64)base + (guint64)d;
        if (v > max)
            return FALSE;
    }
    *ret = v;
    return TRUE;
}

static const char *
skip_blanks(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

/* A number as libvirt reads it with base 10 (virXPathUInt, virXMLPropUInt
 * with base 10): decimal digits, leading zeros allowed ("02" is 2), blanks
 * around it.  At most @max. */
static gboolean
decimal10_parse(const char *s, guint64 max, guint64 *ret)
{
    const char *p = s ? skip_blanks(s) : NULL;
    guint64 v = 0;

    if (!p || !g_ascii_isdigit(*p))
        return FALSE;
    for (; g_ascii_isdigit(*p); p++) {
        v = v * 10 + (guint64)g_ascii_digit_value(*p);
        if (v > max)
            return FALSE;
    }
    if (*skip_blanks(p))
        return FALSE;
    *ret = v;
    return TRUE;
}

/* "8-4-4-4-12" hex or 32 hex digits, any case (libvirt's virUUIDParse takes
 * both); sets *ret to the lower-case 8-4-4-4-12 form. */
static gboolean
uuid_canonical(const char *s, char **ret)
{
    char out[37];
    gsize len = strlen(s), o = 0;

    if (len != 36 && len != 32)
        return FALSE;
    for (gsize i = 0; i < len; i++) {
        if (len == 36 && (i == 8 || i == 13 || i == 18 || i == 23)) {
            if (s[i] != '-')
                return FALSE;
            continue;
        }
        if (!g_ascii_isxdigit(s[i]))
            return FALSE;
        if (o == 8 || o == 13 || o == 18 || o == 23)
            out[o++] = '-';
        out[o++] = g_ascii_tolower(s[i]);
    }
    out[o] = '\0';
    *ret = g_strdup(out);
    return TRUE;
}

/* "DDDD:BB:SS.F", hex, any case; sets *ret to the lower-case form. */
static gboolean
pci_address_canonical(const char *s, char **ret)
{
    static const char shape[] = "xxxx:xx:xx.x";
    char out[sizeof(shape)];

    if (strlen(s) != sizeof(shape) - 1)
        return FALSE;
    for (gsize i = 0; shape[i]; i++) {
        if (shape[i] == 'x' ? !g_ascii_isxdigit(s[i]) : s[i] != shape[i])
            return FALSE;
        out[i] = g_ascii_tolower(s[i]);
    }
    out[sizeof(shape) - 1] = '\0';
    if (g_ascii_xdigit_value(out[8]) > 1 || g_ascii_xdigit_value(out[11]) > 7)
        return FALSE;
    *ret = g_strdup(out);
    return TRUE;
}

/* QEMU ids and libvirt aliases: [A-Za-z0-9_.-], 1 to 128, not starting with '.' or '-'. */
static gboolean
alias_valid(const char *s)
{
    gsize n = strlen(s);

    if (n == 0 || n > AV_ALIAS_MAX || s[0] == '.' || s[0] == '-')
        return FALSE;
    for (const char *c = s; *c; c++) {
        if (!(g_ascii_isalnum(*c) || *c == '_' || *c == '.' || *c == '-'))
            return FALSE;
    }
    return TRUE;
}

/* libvirt refuses '/' in a name; accelvirt also refuses control characters
 * (the name lands in logs) and bounds it. */
static gboolean
domain_name_valid(const char *s)
{
    gsize n = strlen(s);

    if (n == 0 || n > AV_NAME_MAX || strchr(s, '/'))
        return FALSE;
    for (const char *p = s; *p; p = g_utf8_next_char(p)) {
        if (unichar_is_unsafe(g_utf8_get_char(p)))
            return FALSE;
    }
    return TRUE;
}

static gboolean
word_in(const char *s, const char *const *words)
{
    for (; *words; words++) {
        if (strcmp(s, *words) == 0)
            return TRUE;
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

/* ---- cpusets ---- */

/* Decimal digits at *p, saturating above @limit; FALSE when none. */
static gboolean
cpuset_number(const char **p, guint limit, guint *ret)
{
    guint64 v = 0;

    if (!g_ascii_isdigit(**p))
        return FALSE;
    for (; g_ascii_isdigit(**p); (*p)++) {
        if (v <= limit)
            v = v * 10 + (guint64)g_ascii_digit_value(**p);
    }
    *ret = v > limit ? limit : (guint)v;
    return TRUE;
}

/* libvirt's virBitmapParse: "N", "N-M", "^N", comma separated, applied left
 * to right, blanks around the items.  Fills @bits (@limit bits); on failure
 * sets *ret_why to the end of a sentence "cpuset '...' <why>". */
static gboolean
cpuset_bits(const char *s, guint limit, guint8 *bits, const char **ret_why)
{
    static const char syntax[] = "is not a list of numbers and ranges such as '0-3,8,^2'";
    const char *p = skip_blanks(s);
    gboolean any = FALSE;

    memset(bits, 0, (limit + 7) / 8);
    if (!*p) {
        *ret_why = syntax;
        return FALSE;
    }
    while (*p) {
        gboolean neg = FALSE;
        guint first, last;

        if (*p == '^') {
            neg = TRUE;
            p++;
        }
        if (!cpuset_number(&p, limit, &first)) {
            *ret_why = syntax;
            return FALSE;
        }
        last = first;
        p = skip_blanks(p);
        if (*p == '-') {
            if (neg) {
                *ret_why = "excludes a range, but '^' takes a single number";
                return FALSE;
            }
            p = skip_blanks(p + 1);
            if (!cpuset_number(&p, limit, &last)) {
                *ret_why = syntax;
                return FALSE;
            }
            p = skip_blanks(p);
        }
        if (first >= limit || last >= limit) {
            *ret_why = "names a number above 16383, libvirt's largest";
            return FALSE;
        }
        if (last < first) {
            *ret_why = "has a range that ends before it starts";
            return FALSE;
        }
        for (guint i = first; i <= last; i++) {
            if (neg)
                bits[i / 8] &= (guint8) ~(1u << (i % 8));
            else
                bits[i / 8] |= (guint8)(1u << (i % 8));
        }
        if (*p == ',')
            p = skip_blanks(p + 1);
        else if (*p) {
            *ret_why = syntax;
            return FALSE;
        }
    }
    for (guint i = 0; i < (limit + 7) / 8; i++)
        any = any || bits[i];
    if (!any) {
        *ret_why = "selects nothing";
        return FALSE;
    }
    return TRUE;
}

static GArray *
bits_to_array(const guint8 *bits, guint limit)
{
    GArray *set = g_array_new(FALSE, FALSE, sizeof(guint));

    for (guint i = 0; i < limit; i++) {
        if (bits[i / 8] & (1u << (i % 8)))
            g_array_append_val(set, i);
    }
    return set;
}

gboolean
av_domain_cpuset_parse(const char *cpuset, guint limit, GArray **ret_set, GError **error)
{
    g_autofree guint8 *bits = NULL;
    const char *why = NULL;

    g_return_val_if_fail(limit > 0 && limit <= AV_DOMAIN_CPU_MAX, FALSE);
    bits = g_malloc0((limit + 7) / 8);
    if (!cpuset || !cpuset_bits(cpuset, limit, bits, &why)) {
        g_autofree char *q = av_domain_quote(cpuset);

        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "cpuset '%s' %s", q,
                    why ? why : "is missing");
        return FALSE;
    }
    *ret_set = bits_to_array(bits, limit);
    return TRUE;
}

gboolean
av_domain_vcpu_cpus(const AvDomain *domain, GArray **ret_cpus, gboolean *ret_all_pinned, GError **error)
{
    guint8 all[AV_DOMAIN_CPU_MAX / 8] = { 0 };
    guint8 one[AV_DOMAIN_CPU_MAX / 8];
    gboolean all_pinned = TRUE;
    guint n = domain->vcpupins ? domain->vcpupins->len : 0;

    if (domain->pinning_problem)
        return av_domain_invalid_at(error, NULL, "its vCPU pinning cannot be read: %s", domain->pinning_problem);
    if (n == 0)
        n = 1;
    for (guint i = 0; i < n; i++) {
        const char *set = domain->vcpupins && i < domain->vcpupins->len ? g_ptr_array_index(domain->vcpupins, i) : NULL;
        const char *why = NULL;

        if (!set)
            set = domain->vcpu_cpuset;
        if (!set) {
            all_pinned = FALSE;
            continue;
        }
        if (!cpuset_bits(set, AV_DOMAIN_CPU_MAX, one, &why)) {
            g_autofree char *q = av_domain_quote(set);

            return av_domain_invalid_at(error, NULL, "the cpuset '%s' of vCPU %u %s", q, i, why);
        }
        for (guint b = 0; b < sizeof(all); b++)
            all[b] |= one[b];
    }
    *ret_cpus = bits_to_array(all, AV_DOMAIN_CPU_MAX);
    *ret_all_pinned = all_pinned;
    return TRUE;
}

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

/* ---- reading stdin ---- */

gboolean
av_domain_read_fd(int fd, char **ret_xml, gsize *ret_len, GError **error)
{
    g_autofree char *buf = NULL;
    gsize len = 0, size = 64 * 1024;

    buf = g_malloc(size + 1);
    for (;;) {
        ssize_t n;

        if (len == size) {
            if (size > AV_DOMAIN_XML_MAX) {
                g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                            "the domain XML is larger than the %u bytes accelvirt accepts", AV_DOMAIN_XML_MAX);
                return FALSE;
            }
            /* one byte beyond the limit tells "too large" from "exactly the limit" */
            size = MIN(size * 2, (gsize)AV_DOMAIN_XML_MAX + 1);
            buf = g_realloc(buf, size + 1);
        }
        n = read(fd, buf + len, size - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                struct pollfd pfd = { .fd = fd, .events = POLLIN };

                if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
                    return av_error_errno(error, -errno, "cannot wait for the domain XML");
                continue;
            }
            return av_error_errno(error, -errno, "cannot read the domain XML");
        }
        if (n == 0)
            break;
        len += (gsize)n;
    }
    if (len > AV_DOMAIN_XML_MAX) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "the domain XML is larger than the %u bytes accelvirt accepts", AV_DOMAIN_XML_MAX);
        return FALSE;
    }
    buf[len] = '\0';
    *ret_xml = g_steal_pointer(&buf);
    *ret_len = len;
    return TRUE;
}

/* ---- libxml2 ---- */

typedef struct {
    gboolean doctype;
    int doctype_line;
    char *first_error;      /* sanitized libxml2 message */
    int first_error_line;
    gboolean namespaces_lenient; /* a namespace error (an undeclared prefix) is no error */
} ParseState;

static void
xml_silent_error(void *data, xmlErrorPtr err)
{
}

static void G_GNUC_PRINTF(2, 3)
xml_silent_generic(void *data, const char *msg, ...)
{
}

/* The parser context's structured error handler: keeps the first error. */
static void
xml_parse_error(void *data, xmlErrorPtr err)
{
    xmlParserCtxtPtr ctxt = data;
    ParseState *st = ctxt ? ctxt->_private : NULL;
    g_autofree char *msg = NULL;

    if (!st || !err || err->level < XML_ERR_ERROR || st->first_error)
        return;
    if (st->namespaces_lenient && err->domain == XML_FROM_NAMESPACE)
        return;
    msg = g_strstrip(g_strdup(err->message ? err->message : "unknown error"));
    st->first_error = sanitize(msg, 160);
    st->first_error_line = err->line;
}

/* SAX internalSubset: a DOCTYPE.  Stop before its internal subset is read. */
static void
xml_internal_subset(void *data, const xmlChar *name, const xmlChar *external_id, const xmlChar *system_id)
{
    xmlParserCtxtPtr ctxt = data;
    ParseState *st = ctxt->_private;

    st->doctype = TRUE;
    st->doctype_line = xmlSAX2GetLineNumber(ctxt);
    xmlStopParser(ctxt);
}

static gpointer
xml_init_once(gpointer data)
{
    xmlInitParser();
    return NULL;
}

/* Parses @xml into a document, or NULL with @error set.  With
 * @namespaces_lenient, a namespace error (libxml2's XML_FROM_NAMESPACE: a
 * prefix never declared, which libvirt lets a running domain's metadata
 * carry) does not refuse a well-formed document. */
static xmlDocPtr
xml_read(const char *xml, gsize len, gboolean namespaces_lenient, GError **error)
{
    static GOnce once = G_ONCE_INIT;
    xmlStructuredErrorFunc old_serror = xmlStructuredError;
    void *old_serror_ctx = xmlStructuredErrorContext;
    xmlGenericErrorFunc old_error = xmlGenericError;
    void *old_error_ctx = xmlGenericErrorContext;
    xmlParserCtxtPtr ctxt;
    xmlDocPtr doc = NULL;
    ParseState st = { .namespaces_lenient = namespaces_lenient };
    gboolean ok;

    g_once(&once, xml_init_once, NULL);
    ctxt = xmlCreateMemoryParserCtxt(xml, (int)len);
    if (!ctxt) {
        g_set_error_literal(error, AV_ERROR, AV_ERROR_FAILED, "cannot create an XML parser");
        return NULL;
    }
    /* No NOENT, DTDLOAD, DTDATTR, HUGE: see the top of this file. */
    xmlCtxtUseOptions(ctxt, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_BIG_LINES);
    ctxt->_private = &st;
    ctxt->sax->internalSubset = xml_internal_subset;
    ctxt->sax->externalSubset = NULL;
    ctxt->sax->resolveEntity = NULL;
    ctxt->sax->serror = xml_parse_error;
    ctxt->vctxt.error = NULL;
    ctxt->vctxt.warning = NULL;

    /* Errors raised outside this context (I/O, memory) go nowhere either. */
    xmlSetStructuredErrorFunc(NULL, xml_silent_error);
    xmlSetGenericErrorFunc(NULL, xml_silent_generic);

    xmlParseDocument(ctxt);

    xmlSetStructuredErrorFunc(old_serror_ctx, old_serror);
    xmlSetGenericErrorFunc(old_error_ctx, old_error);

    ok = ctxt->wellFormed && !st.doctype && !st.first_error;
    doc = ctxt->myDoc;
    ctxt->myDoc = NULL;
    ctxt->_private = NULL;
    xmlFreeParserCtxt(ctxt);

    if (ok && doc && (doc->intSubset || doc->extSubset)) {
        st.doctype = TRUE;
        st.doctype_line = 1;
    }
    if (st.doctype) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "the domain XML has a DOCTYPE (line %d), which accelvirt refuses: libvirt never writes one "
                    "and a DTD can declare entities",
                    st.doctype_line);
        ok = FALSE;
    } else if (!ok || !doc) {
        if (st.first_error)
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "the domain XML does not parse at line %d: %s",
                        st.first_error_line, st.first_error);
        else
            g_set_error_literal(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "the domain XML does not parse");
        ok = FALSE;
    }
    g_free(st.first_error);
    if (!ok) {
        xmlFreeDoc(doc);
        return NULL;
    }
    return doc;
}

static xmlDocPtr
xml_read_bounded(const char *xml, gsize len, gsize max, gboolean namespaces_lenient, GError **error);

xmlDocPtr
av_domain_xml_read(const char *xml, gsize len, GError **error)
{
    return xml_read_bounded(xml, len, AV_DOMAIN_XML_MAX, FALSE, error);
}

xmlDocPtr
av_domain_xml_read_live(const char *xml, gsize len, gsize max, GError **error)
{
    return xml_read_bounded(xml, len, max, TRUE, error);
}

static xmlDocPtr
xml_read_bounded(const char *xml, gsize len, gsize max, gboolean namespaces_lenient, GError **error)
{
    if (len > max) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "the domain XML is %" G_GSIZE_FORMAT " bytes, more than the %" G_GSIZE_FORMAT
                    " accelvirt accepts", len, max);
        return NULL;
    }
    if (len == 0 || !xml) {
        g_set_error_literal(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "the domain XML is empty");
        return NULL;
    }
    return xml_read(xml, len, namespaces_lenient, error);
}

gboolean
av_domain_pci_address_canonical(const char *s, char **ret)
{
    return s && pci_address_canonical(s, ret);
}

gboolean
av_domain_uuid_canonical(const char *s, char **ret)
{
    return s && uuid_canonical(s, ret);
}

gboolean
av_domain_alias_valid(const char *s)
{
    return s && alias_valid(s);
}

/* ---- tree access ---- */

/* See av-domain-private.h. */
gboolean
av_domain_is_elem(const xmlNode *node, const char *name, const char *ns)
{
    if (!node || node->type != XML_ELEMENT_NODE || strcmp((const char *)node->name, name) != 0)
        return FALSE;
    if (!ns)
        return node->ns == NULL;
    return node->ns && node->ns->href && strcmp((const char *)node->ns->href, ns) == 0;
}

/* See av-domain-private.h. */
xmlNode *
av_domain_child_first(const xmlNode *parent, const char *name, const char *ns)
{
    if (!parent)
        return NULL;
    for (xmlNode *c = parent->children; c; c = c->next) {
        if (av_domain_is_elem(c, name, ns))
            return c;
    }
    return NULL;
}

/* The only child element called @name, in any namespace: two (where one
 * libvirt version reads the first and another the last) is an error. */
static gboolean
child_unique(const xmlNode *parent, const char *name, const char *what, xmlNode **ret, GError **error)
{
    xmlNode *found = NULL;

    for (xmlNode *c = parent->children; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE || strcmp((const char *)c->name, name) != 0)
            continue;
        if (found)
            return av_domain_invalid_at(error, c, "%s has more than one <%s>, where libvirt reads one", what, name);
        found = c;
    }
    if (found && found->ns)
        return av_domain_invalid_at(error, found, "%s has its <%s> in a namespace, where libvirt expects none", what,
                                    name);
    *ret = found;
    return TRUE;
}

/* See av-domain-private.h. */
char *
av_domain_prop(const xmlNode *node, const char *name)
{
    xmlChar *v = xmlGetProp(node, (const xmlChar *)name);
    char *r = v ? g_strdup((const char *)v) : NULL;

    xmlFree(v);
    return r;
}

static char *
text(const xmlNode *node)
{
    xmlChar *v = xmlNodeGetContent(node);
    char *r = g_strdup(v ? (const char *)v : "");

    xmlFree(v);
    return r;
}

/* The <av:accelerators> of the first <metadata> (libvirt keeps one element
 * per namespace), or NULL. */
xmlNode *
av_domain_accelerators_find(const xmlNode *root)
{
    return av_domain_child_first(av_domain_child_first(root, "metadata", NULL), "accelerators", AV_NS_DOMAIN);
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

/* ---- hostdevs ---- */

typedef struct {
    const char *attr;
    guint64 max;
    const char *max_text;
} PciField;

/* <address domain= bus= slot= function=/>, each "0x" hex or decimal; an
 * absent one is 0, as in libvirt's virPCIDeviceAddressParseXML. */
static gboolean
pci_source_parse(const xmlNode *address, const char *what, char **ret, GError **error)
{
    static const PciField fields[] = {
        { "domain", 0xffff, "0xffff" },
        { "bus", 0xff, "0xff" },
        { "slot", 0x1f, "0x1f" },
        { "function", 7, "7" },
    };
    guint64 v[G_N_ELEMENTS(fields)];

    for (gsize i = 0; i < G_N_ELEMENTS(fields); i++) {
        g_autofree char *s = av_domain_prop(address, fields[i].attr);

        v[i] = 0;
        if (s && !number_parse(s, TRUE, fields[i].max, &v[i])) {
            g_autofree char *q = av_domain_quote(s);

            return av_domain_invalid_at(error, address,
                                        "%s: PCI address %s '%s' is not a number between 0 and %s "
                                        "('0x' hex, or decimal without a leading zero)",
                                        what, fields[i].attr, q, fields[i].max_text);
        }
    }
    *ret = g_strdup_printf("%04x:%02x:%02x.%x", (guint)v[0], (guint)v[1], (guint)v[2], (guint)v[3]);
    return TRUE;
}

static gboolean
hostdev_managed(const xmlNode *node, const char *what, gboolean *ret, GError **error)
{
    g_autofree char *managed = av_domain_prop(node, "managed");

    if (!managed || strcmp(managed, "no") == 0) {
        *ret = FALSE;
    } else if (strcmp(managed, "yes") == 0) {
        *ret = TRUE;
    } else {
        g_autofree char *q = av_domain_quote(managed);

        return av_domain_invalid_at(error, node, "%s: managed '%s' is neither 'yes' nor 'no'", what, q);
    }
    return TRUE;
}

static gboolean
hostdev_alias(const xmlNode *node, const char *what, AvHostdev *dev, GError **error)
{
    xmlNode *alias = NULL;
    g_autofree char *name = NULL;

    if (!child_unique(node, "alias", what, &alias, error))
        return FALSE;
    if (!alias)
        return TRUE;
    name = av_domain_prop(alias, "name");
    if (!name || !alias_valid(name)) {
        g_autofree char *q = av_domain_quote(name);

        return av_domain_invalid_at(error, alias, "%s: alias name '%s' is not 1 to %d letters, digits, '_', '.' or '-'",
                                    what, q, AV_ALIAS_MAX);
    }
    dev->alias = g_steal_pointer(&name);
    return TRUE;
}

static gboolean
usb_id_parse(const xmlNode *source, const char *elem, const char *what, guint16 *ret, GError **error)
{
    xmlNode *node = NULL;
    g_autofree char *id = NULL;
    guint64 v = 0;

    if (!child_unique(source, elem, what, &node, error))
        return FALSE;
    *ret = 0;
    if (!node)
        return TRUE;
    id = av_domain_prop(node, "id");
    if (!id || !number_parse(id, TRUE, 0xffff, &v) || v == 0) {
        g_autofree char *q = av_domain_quote(id);

        return av_domain_invalid_at(error, node, "%s: USB %s id '%s' is not a number between 0x0001 and 0xffff", what,
                                    elem, q);
    }
    *ret = (guint16)v;
    return TRUE;
}

static gboolean
usb_source_parse(const xmlNode *source, const char *what, AvHostdev *dev, GError **error)
{
    xmlNode *address = NULL;

    if (!usb_id_parse(source, "vendor", what, &dev->usb_vendor, error) ||
        !usb_id_parse(source, "product", what, &dev->usb_product, error) ||
        !child_unique(source, "address", what, &address, error))
        return FALSE;
    if ((dev->usb_vendor != 0) != (dev->usb_product != 0))
        return av_domain_invalid_at(error, source, "%s: a USB source needs both <vendor> and <product>, or neither",
                                    what);
    if (address) {
        g_autofree char *bus = av_domain_prop(address, "bus");
        g_autofree char *device = av_domain_prop(address, "device");
        guint64 b = 0, d = 0;

        if (!bus || !number_parse(bus, TRUE, 0xffff, &b)) {
            g_autofree char *q = av_domain_quote(bus);

            return av_domain_invalid_at(error, address, "%s: USB address bus '%s' is not a number between 0 and 65535",
                                        what, q);
        }
        if (!device || !number_parse(device, TRUE, 127, &d)) {
            g_autofree char *q = av_domain_quote(device);

            return av_domain_invalid_at(error, address, "%s: USB address device '%s' is not a number between 0 and 127",
                                        what, q);
        }
        dev->usb_bus = (int)b;
        dev->usb_device = (int)d;
    }
    if (dev->usb_vendor == 0 && !address)
        return av_domain_invalid_at(error, source, "%s: a USB source needs <vendor> and <product>, or an <address>",
                                    what);
    return TRUE;
}

static gboolean
hostdev_source(const xmlNode *node, const char *what, const char *kind, xmlNode **ret, GError **error)
{
    if (!child_unique(node, "source", what, ret, error))
        return FALSE;
    if (!*ret)
        return av_domain_invalid_at(error, node, "%s: a %s needs a <source>", what, kind);
    return TRUE;
}

/* <hostdev> number @index (1-based, among all hostdevs): adds an AvHostdev
 * to @list for mode='subsystem' (libvirt's default) pci, mdev and usb. */
static gboolean
hostdev_parse(const xmlNode *node, guint index, GPtrArray *list, GError **error)
{
    static const char *const ignored[] = { "scsi", "scsi_host", NULL };
    static const char *const mdev_models[] = { "vfio-pci", "vfio-ccw", "vfio-ap", NULL };
    g_autofree char *what = g_strdup_printf("hostdev %u", index);
    g_autofree char *mode = av_domain_prop(node, "mode");
    g_autofree char *type = NULL;
    g_autofree char *kind = NULL;
    g_autoptr(AvHostdev) dev = NULL;
    xmlNode *source = NULL;
    xmlNode *address = NULL;

    if (mode && strcmp(mode, "capabilities") == 0)
        return TRUE;
    if (mode && strcmp(mode, "subsystem") != 0) {
        g_autofree char *q = av_domain_quote(mode);

        return av_domain_invalid_at(error, node, "%s: mode '%s' is neither 'subsystem' nor 'capabilities'", what, q);
    }
    type = av_domain_prop(node, "type");
    if (!type)
        return av_domain_invalid_at(error, node, "%s: a subsystem hostdev needs a type ('pci', 'mdev', 'usb', ...)",
                                    what);
    if (word_in(type, ignored))
        return TRUE;

    kind = g_strdup_printf("%s hostdev", type);
    dev = g_new0(AvHostdev, 1);
    dev->usb_bus = -1;
    dev->usb_device = -1;
    if (strcmp(type, "pci") == 0) {
        dev->type = AV_HOSTDEV_PCI;
        if (!hostdev_managed(node, what, &dev->managed, error) || !hostdev_source(node, what, kind, &source, error) ||
            !child_unique(source, "address", what, &address, error))
            return FALSE;
        if (!address)
            return av_domain_invalid_at(error, source, "%s: a pci hostdev needs a <source><address>", what);
        if (!pci_source_parse(address, what, &dev->pci_address, error))
            return FALSE;
    } else if (strcmp(type, "mdev") == 0) {
        g_autofree char *model = av_domain_prop(node, "model");
        g_autofree char *uuid = NULL;

        dev->type = AV_HOSTDEV_MDEV;
        if (!model || !word_in(model, mdev_models)) {
            g_autofree char *q = av_domain_quote(model);

            return av_domain_invalid_at(error, node, "%s: mdev model '%s' is not 'vfio-pci', 'vfio-ccw' or 'vfio-ap'",
                                        what, q);
        }
        if (!hostdev_source(node, what, kind, &source, error) || !child_unique(source, "address", what, &address, error))
            return FALSE;
        if (address)
            uuid = av_domain_prop(address, "uuid");
        if (!uuid || !uuid_canonical(uuid, &dev->mdev_uuid)) {
            g_autofree char *q = av_domain_quote(uuid);

            return av_domain_invalid_at(
                error, address ? address : source,
                "%s: mdev address uuid '%s' is not a UUID such as '4b20d080-1b54-4048-85b3-a6a62d165c01'", what, q);
        }
        dev->mdev_model = g_steal_pointer(&model);
    } else if (strcmp(type, "usb") == 0) {
        dev->type = AV_HOSTDEV_USB;
        if (!hostdev_managed(node, what, &dev->managed, error) || !hostdev_source(node, what, kind, &source, error) ||
            !usb_source_parse(source, what, dev, error))
            return FALSE;
    } else {
        /* Not a device accelvirt manages (libvirt refuses unknown types itself). */
        return TRUE;
    }
    if (!hostdev_alias(node, what, dev, error))
        return FALSE;
    g_ptr_array_add(list, g_steal_pointer(&dev));
    return TRUE;
}

/* <interface type='direct'><source dev='IFNAME' mode='passthrough'/>: a
 * host network interface the guest gets through macvtap, which is how a
 * card of attach "netdev" reaches it (the hook checks the name against the
 * pool's cards).  A name the kernel would not make, or over IFNAMSIZ, is
 * refused: it names no card, and it would reach logs. */
static gboolean
interface_direct_parse(const xmlNode *node, const char *what, GPtrArray *list, GError **error)
{
    g_autoptr(AvHostdev) dev = g_new0(AvHostdev, 1);
    xmlNode *source = NULL;

    dev->type = AV_HOSTDEV_NETDEV;
    dev->usb_bus = -1;
    dev->usb_device = -1;
    if (!child_unique(node, "source", what, &source, error))
        return FALSE;
    if (!source)
        return av_domain_invalid_at(error, node, "%s: a direct interface needs a <source dev=>", what);
    dev->netdev = av_domain_prop(source, "dev");
    if (!av_netdev_name_kernel_valid(dev->netdev)) {
        g_autofree char *q = av_domain_quote(dev->netdev);

        return av_domain_invalid_at(error, source, "%s: source dev '%s' is not a network interface name (1 to 15 "
                                    "bytes, no '/', ':' or white space)", what, q);
    }
    dev->netdev_mode = av_domain_prop(source, "mode");
    if (!hostdev_alias(node, what, dev, error))
        return FALSE;
    g_ptr_array_add(list, g_steal_pointer(&dev));
    return TRUE;
}

/* <interface type='hostdev'>: libvirt passes a PCI function (an SR-IOV VF)
 * through just as for a <hostdev>, so the claim checks must see it. */
static gboolean
interface_parse(const xmlNode *node, guint index, GPtrArray *list, GError **error)
{
    g_autofree char *what = g_strdup_printf("interface %u", index);
    g_autofree char *type = av_domain_prop(node, "type");
    g_autofree char *addr_type = NULL;
    const char *kind = "hostdev interface";
    g_autoptr(AvHostdev) dev = NULL;
    xmlNode *source = NULL;
    xmlNode *address = NULL;

    if (type && strcmp(type, "direct") == 0)
        return interface_direct_parse(node, what, list, error);
    if (!type || strcmp(type, "hostdev") != 0)
        return TRUE;
    dev = g_new0(AvHostdev, 1);
    dev->type = AV_HOSTDEV_PCI;
    dev->is_interface = TRUE;
    dev->usb_bus = -1;
    dev->usb_device = -1;
    if (!hostdev_managed(node, what, &dev->managed, error) || !hostdev_source(node, what, kind, &source, error) ||
        !child_unique(source, "address", what, &address, error))
        return FALSE;
    if (!address)
        return av_domain_invalid_at(error, source, "%s: a hostdev interface needs a <source><address>", what);
    addr_type = av_domain_prop(address, "type");
    if (addr_type && strcmp(addr_type, "pci") != 0) {
        g_autofree char *q = av_domain_quote(addr_type);

        return av_domain_invalid_at(error, address, "%s: source address type '%s' is not 'pci'", what, q);
    }
    if (!pci_source_parse(address, what, &dev->pci_address, error) || !hostdev_alias(node, what, dev, error))
        return FALSE;
    g_ptr_array_add(list, g_steal_pointer(&dev));
    return TRUE;
}

/* <interface type='ethernet'>: its <target dev=>, which libvirt opens as it
 * is when it exists (managed='no': a tap or macvtap made beforehand, such as
 * another domain's macvtap on a card), so the hook checks what it sits on.
 * A name the kernel cannot hold names nothing here: left out. */
static gboolean
interface_ethernet_parse(const xmlNode *node, guint index, GPtrArray *list, GError **error)
{
    g_autofree char *what = g_strdup_printf("interface %u", index);
    g_autofree char *dev = NULL;
    xmlNode *target = NULL;

    if (!child_unique(node, "target", what, &target, error))
        return FALSE;
    if (!target)
        return TRUE;
    dev = av_domain_prop(target, "dev");
    if (av_netdev_name_kernel_valid(dev))
        g_ptr_array_add(list, g_steal_pointer(&dev));
    return TRUE;
}

/* Every <devices> (libvirt's "./devices/hostdev" selects in all of them). */
static gboolean
devices_parse(const xmlNode *root, AvDomain *dom, GError **error)
{
    guint nhostdev = 0, ninterface = 0;

    for (xmlNode *devices = root->children; devices; devices = devices->next) {
        if (!av_domain_is_elem(devices, "devices", NULL))
            continue;
        for (xmlNode *c = devices->children; c; c = c->next) {
            if (av_domain_is_elem(c, "hostdev", NULL)) {
                if (!hostdev_parse(c, ++nhostdev, dom->hostdevs, error))
                    return FALSE;
            } else if (av_domain_is_elem(c, "interface", NULL)) {
                g_autofree char *type = av_domain_prop(c, "type");

                if (g_strcmp0(type, "ethernet") == 0) {
                    if (!interface_ethernet_parse(c, ++ninterface, dom->ethernet_targets, error))
                        return FALSE;
                } else if (!interface_parse(c, ++ninterface, dom->hostdevs, error)) {
                    return FALSE;
                }
            }
        }
    }
    return TRUE;
}

/* ---- CPU and memory placement ---- */

static gboolean
cpuset_check(const xmlNode *node, const char *what, const char *set, guint limit, GError **error)
{
    g_autofree guint8 *bits = g_malloc0((limit + 7) / 8);
    const char *why = NULL;

    if (!cpuset_bits(set, limit, bits, &why)) {
        g_autofree char *q = av_domain_quote(set);

        return av_domain_invalid_at(error, node, "%s '%s' %s", what, q, why);
    }
    return TRUE;
}

static gboolean
placement_word(const xmlNode *node, const char *what, char **ret, GError **error)
{
    static const char *const words[] = { "static", "auto", NULL };
    g_autofree char *placement = av_domain_prop(node, "placement");

    if (placement && !word_in(placement, words)) {
        g_autofree char *q = av_domain_quote(placement);

        return av_domain_invalid_at(error, node, "%s placement '%s' is neither 'static' nor 'auto'", what, q);
    }
    *ret = g_steal_pointer(&placement);
    return TRUE;
}

/* <vcpu placement= cpuset=>N</vcpu>, the first as libvirt reads it. */
static gboolean
vcpu_parse(const xmlNode *root, AvDomain *dom, GError **error)
{
    xmlNode *vcpu = av_domain_child_first(root, "vcpu", NULL);
    guint n = 1;

    if (vcpu) {
        g_autofree char *count = text(vcpu);
        guint64 v = 0;

        if (!decimal10_parse(count, AV_DOMAIN_VCPU_MAX, &v) || v == 0) {
            g_autofree char *q = av_domain_quote(count);

            return av_domain_invalid_at(error, vcpu, "<vcpu> '%s' is not a number of vCPUs between 1 and %u", q,
                                        AV_DOMAIN_VCPU_MAX);
        }
        dom->vcpus = (guint)v;
        n = dom->vcpus;
        dom->vcpu_cpuset = av_domain_prop(vcpu, "cpuset");
        if (dom->vcpu_cpuset && !cpuset_check(vcpu, "<vcpu> cpuset", dom->vcpu_cpuset, AV_DOMAIN_CPU_MAX, error))
            return FALSE;
        if (!placement_word(vcpu, "<vcpu>", &dom->vcpu_placement, error))
            return FALSE;
    }
    dom->vcpupins = g_ptr_array_new_full(n, g_free);
    g_ptr_array_set_size(dom->vcpupins, (gint)n);
    return TRUE;
}

/* Every <cputune>/<vcpupin> (libvirt's "./cputune/vcpupin"); one <emulatorpin>. */
static gboolean
cputune_parse(const xmlNode *root, AvDomain *dom, GError **error)
{
    xmlNode *emulatorpin = NULL;

    for (xmlNode *cputune = root->children; cputune; cputune = cputune->next) {
        if (!av_domain_is_elem(cputune, "cputune", NULL))
            continue;
        for (xmlNode *c = cputune->children; c; c = c->next) {
            if (av_domain_is_elem(c, "vcpupin", NULL)) {
                g_autofree char *vcpu = av_domain_prop(c, "vcpu");
                g_autofree char *cpuset = av_domain_prop(c, "cpuset");
                g_autofree char *what = NULL;
                guint64 id = 0;

                if (!vcpu || !decimal10_parse(vcpu, G_MAXUINT32, &id) || id >= dom->vcpupins->len) {
                    g_autofree char *q = av_domain_quote(vcpu);

                    return av_domain_invalid_at(error, c, "vcpupin vcpu '%s' is not a vCPU number between 0 and %u", q,
                                                dom->vcpupins->len - 1);
                }
                if (g_ptr_array_index(dom->vcpupins, id))
                    return av_domain_invalid_at(error, c, "vcpupin for vCPU %u appears twice", (guint)id);
                what = g_strdup_printf("vcpupin for vCPU %u: cpuset", (guint)id);
                if (!cpuset || !cpuset_check(c, what, cpuset, AV_DOMAIN_CPU_MAX, error)) {
                    if (!cpuset)
                        return av_domain_invalid_at(error, c, "vcpupin for vCPU %u has no cpuset", (guint)id);
                    return FALSE;
                }
                g_ptr_array_index(dom->vcpupins, id) = g_steal_pointer(&cpuset);
            } else if (av_domain_is_elem(c, "emulatorpin", NULL)) {
                g_autofree char *cpuset = av_domain_prop(c, "cpuset");

                if (emulatorpin)
                    return av_domain_invalid_at(error, c, "<cputune> has more than one <emulatorpin>");
                emulatorpin = c;
                if (!cpuset)
                    return av_domain_invalid_at(error, c, "<emulatorpin> has no cpuset");
                if (!cpuset_check(c, "emulatorpin cpuset", cpuset, AV_DOMAIN_CPU_MAX, error))
                    return FALSE;
                dom->emulatorpin = g_steal_pointer(&cpuset);
            }
        }
    }
    return TRUE;
}

/* <numatune><memory mode= nodeset= placement=/></numatune>, one of each as libvirt demands. */
static gboolean
numatune_parse(const xmlNode *root, AvDomain *dom, GError **error)
{
    static const char *const modes[] = { "strict", "preferred", "interleave", "restrictive", NULL };
    xmlNode *numatune = NULL, *memory = NULL;
    g_autofree char *mode = NULL;

    for (xmlNode *c = root->children; c; c = c->next) {
        if (!av_domain_is_elem(c, "numatune", NULL))
            continue;
        if (numatune)
            return av_domain_invalid_at(error, c, "the domain has more than one <numatune>");
        numatune = c;
    }
    if (!numatune)
        return TRUE;
    for (xmlNode *c = numatune->children; c; c = c->next) {
        if (!av_domain_is_elem(c, "memory", NULL))
            continue;
        if (memory)
            return av_domain_invalid_at(error, c, "<numatune> has more than one <memory>");
        memory = c;
    }
    if (!memory)
        return TRUE;
    mode = av_domain_prop(memory, "mode");
    if (mode && !word_in(mode, modes)) {
        g_autofree char *q = av_domain_quote(mode);

        return av_domain_invalid_at(
            error, memory, "numatune memory mode '%s' is not 'strict', 'preferred', 'interleave' or 'restrictive'", q);
    }
    dom->numatune_memory_mode = g_steal_pointer(&mode);
    dom->numatune_memory_nodeset = av_domain_prop(memory, "nodeset");
    if (dom->numatune_memory_nodeset &&
        !cpuset_check(memory, "numatune memory nodeset", dom->numatune_memory_nodeset, AV_DOMAIN_NODE_MAX, error))
        return FALSE;
    return placement_word(memory, "numatune memory", &dom->numatune_memory_placement, error);
}

/* ---- metadata ---- */

/* <nova:instance>: name, owner user and project. */
static gboolean
nova_parse(const xmlNode *instance, AvDomain *dom, GError **error)
{
    xmlNode *name = av_domain_child_first(instance, "name", AV_NS_NOVA);
    xmlNode *owner = av_domain_child_first(instance, "owner", AV_NS_NOVA);
    static const char *const roles[] = { "user", "project" };
    char **targets[] = { &dom->nova_user, &dom->nova_project };

    dom->is_nova = TRUE;
    if (name) {
        g_autofree char *s = text(name);

        dom->nova_name = sanitize(s, AV_NOVA_NAME_MAX);
    }
    if (!owner)
        return TRUE;
    for (gsize i = 0; i < G_N_ELEMENTS(roles); i++) {
        xmlNode *node = av_domain_child_first(owner, roles[i], AV_NS_NOVA);
        g_autofree char *uuid = NULL;

        if (!node)
            continue;
        uuid = av_domain_prop(node, "uuid");
        if (!av_openstack_id_is_valid(uuid)) {
            g_autofree char *q = av_domain_quote(uuid);

            return av_domain_invalid_at(
                error, node, "nova:%s uuid '%s' is not an OpenStack id (1 to %d letters, digits, '_', '.', '@' or '-')",
                roles[i], q, AV_NOVA_ID_MAX);
        }
        *targets[i] = g_steal_pointer(&uuid);
    }
    return TRUE;
}

gboolean
av_domain_placed_vf(const xmlNode *node, char **ret_pf, int *ret_vf, GError **error)
{
    g_autofree char *pf = av_domain_prop(node, "pf");
    g_autofree char *vf = av_domain_prop(node, "vf");
    g_autofree char *canonical = NULL;
    guint64 index;

    if (!pf && !vf) {
        *ret_pf = NULL;
        *ret_vf = -1;
        return TRUE;
    }
    if (!pf || !vf)
        return av_domain_invalid_at(error, node, "av:device has %s= without %s=: a VF names both its PF and its index, "
                                    "or neither", pf ? "pf" : "vf", pf ? "vf" : "pf");
    if (!pci_address_canonical(pf, &canonical)) {
        g_autofree char *q = av_domain_quote(pf);

        return av_domain_invalid_at(error, node, "av:device pf '%s' is not a PCI address such as '0000:6b:00.0' "
                                    "(a VF's PF, given with vf=)", q);
    }
    if (!g_ascii_string_to_unsigned(vf, 10, 0, 65534, &index, NULL) || vf[0] == '+') {
        g_autofree char *q = av_domain_quote(vf);

        return av_domain_invalid_at(error, node, "av:device vf '%s' is not a VF index from 0 to 65534 (given with pf=)",
                                    q);
    }
    *ret_pf = g_steal_pointer(&canonical);
    *ret_vf = (int)index;
    return TRUE;
}

gboolean
av_domain_placed_bitstream(const xmlNode *node, char **ret, GError **error)
{
    g_autofree char *sha256 = av_domain_prop(node, "bitstream");

    if (sha256 && (!av_rom_sha256_is_valid(sha256) || g_str_equal(sha256, AV_ROM_NONE))) {
        g_autofree char *q = av_domain_quote(sha256);

        return av_domain_invalid_at(error, node, "av:device bitstream '%s' is not a SHA-256 (64 lower-case hex digits)",
                                    q);
    }
    *ret = g_steal_pointer(&sha256);
    return TRUE;
}

static gboolean
placed_parse(const xmlNode *node, gboolean is_mdev, AvDomain *dom, GError **error)
{
    const char *what = is_mdev ? "av:mdev" : "av:device";
    g_autoptr(AvPlacedDevice) placed = g_new0(AvPlacedDevice, 1);
    g_autofree char *profile = av_domain_prop(node, "profile");
    g_autofree char *alias = av_domain_prop(node, "alias");
    g_autofree char *value = av_domain_prop(node, is_mdev ? "uuid" : "address");

    if (!profile || !av_profile_name_is_valid(profile)) {
        g_autofree char *q = av_domain_quote(profile);

        return av_domain_invalid_at(
            error, node, "%s profile '%s' is not a profile name (lower case letters, digits, '.', '_', '-')", what, q);
    }
    placed->profile = g_steal_pointer(&profile);
    if (alias && !alias_valid(alias)) {
        g_autofree char *q = av_domain_quote(alias);

        return av_domain_invalid_at(error, node, "%s alias '%s' is not 1 to %d letters, digits, '_', '.' or '-'", what,
                                    q, AV_ALIAS_MAX);
    }
    placed->alias = g_steal_pointer(&alias);
    placed->vf_index = -1;
    if (!is_mdev && (!av_domain_placed_vf(node, &placed->pf_address, &placed->vf_index, error) ||
                     !av_domain_placed_bitstream(node, &placed->bitstream, error)))
        return FALSE;
    if (is_mdev ? !value || !uuid_canonical(value, &placed->mdev_uuid)
                : !value || !pci_address_canonical(value, &placed->pci_address)) {
        g_autofree char *q = av_domain_quote(value);

        return av_domain_invalid_at(error, node,
                                    is_mdev
                                        ? "%s uuid '%s' is not a UUID such as '4b20d080-1b54-4048-85b3-a6a62d165c01'"
                                        : "%s address '%s' is not a PCI address such as '0000:3b:00.0'",
                                    what, q);
    }
    g_ptr_array_add(dom->placed, g_steal_pointer(&placed));
    return TRUE;
}

/* <av:usb profile= bus-path= identity= alias=/> (vendor and product are the
 * hostdev's own business): an entry the hook maps a USB hostdev with. */
static gboolean
placed_usb_parse(const xmlNode *node, AvDomain *dom, GError **error)
{
    g_autoptr(AvPlacedDevice) placed = g_new0(AvPlacedDevice, 1);
    g_autofree char *profile = av_domain_prop(node, "profile");
    g_autofree char *alias = av_domain_prop(node, "alias");
    g_autofree char *bus_path = av_domain_prop(node, "bus-path");
    g_autofree char *identity = av_domain_prop(node, "identity");

    if (!profile || !av_profile_name_is_valid(profile)) {
        g_autofree char *q = av_domain_quote(profile);

        return av_domain_invalid_at(
            error, node, "av:usb profile '%s' is not a profile name (lower case letters, digits, '.', '_', '-')", q);
    }
    if (alias && !alias_valid(alias)) {
        g_autofree char *q = av_domain_quote(alias);

        return av_domain_invalid_at(error, node, "av:usb alias '%s' is not 1 to %d letters, digits, '_', '.' or '-'",
                                    q, AV_ALIAS_MAX);
    }
    if (!bus_path || !av_usb_bus_path_is_valid(bus_path)) {
        g_autofree char *q = av_domain_quote(bus_path);

        return av_domain_invalid_at(error, node, "av:usb bus-path '%s' is not a USB port such as '1-1.2'", q);
    }
    if (identity && !av_pool_identity_usb_is_valid(identity)) {
        g_autofree char *q = av_domain_quote(identity);

        return av_domain_invalid_at(error, node, "av:usb identity '%s' is not a USB identity such as "
                                    "'usb:03e7:2485:serial:0123' or 'usb:03e7:2485@port:1-2'", q);
    }
    placed->profile = g_steal_pointer(&profile);
    placed->alias = g_steal_pointer(&alias);
    placed->usb_bus_path = g_steal_pointer(&bus_path);
    placed->usb_identity = g_steal_pointer(&identity);
    g_ptr_array_add(dom->placed, g_steal_pointer(&placed));
    return TRUE;
}

/* <av:scrub token= identity=/>: the mark of a scrub VM (see the hook). */
static gboolean
scrub_parse(const xmlNode *scrub, AvDomain *dom, GError **error)
{
    g_autofree char *token = av_domain_prop(scrub, "token");
    g_autofree char *identity = av_domain_prop(scrub, "identity");

    if (!token)
        return av_domain_invalid_at(error, scrub, "av:scrub has no token");
    if (!av_scrub_token_is_valid(token)) {
        g_autofree char *q = av_domain_quote(token);

        return av_domain_invalid_at(error, scrub, "av:scrub token '%s' is not %d lower-case hex digits", q,
                                    AV_SCRUB_TOKEN_LEN);
    }
    dom->scrub_token = g_steal_pointer(&token);
    if (identity)
        dom->scrub_identity = sanitize(identity, AV_NAME_MAX);
    return TRUE;
}

/* <av:accelerators>: <av:placement node=> with av:device and av:mdev, and
 * <av:scrub>, at most one of each. */
static gboolean
accelerators_parse(const xmlNode *accelerators, AvDomain *dom, GError **error)
{
    xmlNode *placement = NULL, *scrub = NULL;
    g_autofree char *node = NULL;

    for (xmlNode *c = accelerators->children; c; c = c->next) {
        if (av_domain_is_elem(c, "scrub", AV_NS_DOMAIN)) {
            if (scrub)
                return av_domain_invalid_at(error, c, "<av:accelerators> has more than one <av:scrub>");
            scrub = c;
            continue;
        }
        if (!av_domain_is_elem(c, "placement", AV_NS_DOMAIN))
            continue;
        if (placement)
            return av_domain_invalid_at(error, c, "<av:accelerators> has more than one <av:placement>");
        placement = c;
    }
    if (scrub && !scrub_parse(scrub, dom, error))
        return FALSE;
    if (!placement)
        return TRUE;
    node = av_domain_prop(placement, "node");
    if (node) {
        guint64 v = 0;

        if (!number_parse(node, FALSE, AV_DOMAIN_NODE_MAX - 1, &v)) {
            g_autofree char *q = av_domain_quote(node);

            return av_domain_invalid_at(error, placement,
                                        "av:placement node '%s' is not a NUMA node number between 0 and %u", q,
                                        AV_DOMAIN_NODE_MAX - 1);
        }
        dom->placement_node = (int)v;
    }
    for (xmlNode *c = placement->children; c; c = c->next) {
        if (av_domain_is_elem(c, "device", AV_NS_DOMAIN)) {
            if (!placed_parse(c, FALSE, dom, error))
                return FALSE;
        } else if (av_domain_is_elem(c, "mdev", AV_NS_DOMAIN)) {
            if (!placed_parse(c, TRUE, dom, error))
                return FALSE;
        } else if (av_domain_is_elem(c, "usb", AV_NS_DOMAIN)) {
            if (!placed_usb_parse(c, dom, error))
                return FALSE;
        }
    }
    return TRUE;
}

/* The first <metadata> (libvirt's "./metadata[1]"). */
static gboolean
metadata_parse(const xmlNode *root, AvDomain *dom, GError **error)
{
    xmlNode *metadata = av_domain_child_first(root, "metadata", NULL);
    xmlNode *instance, *accelerators;

    if (!metadata)
        return TRUE;
    instance = av_domain_child_first(metadata, "instance", AV_NS_NOVA);
    if (instance && !nova_parse(instance, dom, error))
        return FALSE;
    accelerators = av_domain_child_first(metadata, "accelerators", AV_NS_DOMAIN);
    if (accelerators && !accelerators_parse(accelerators, dom, error))
        return FALSE;
    return TRUE;
}

/* ---- the domain ---- */

static gboolean
identity_parse(const xmlNode *root, AvDomain *dom, GError **error)
{
    xmlNode *name = av_domain_child_first(root, "name", NULL);
    xmlNode *uuid = av_domain_child_first(root, "uuid", NULL);

    if (!name)
        return av_domain_invalid_at(error, root, "the domain has no <name>");
    dom->name = text(name);
    if (!domain_name_valid(dom->name)) {
        g_autofree char *q = av_domain_quote(dom->name);

        return av_domain_invalid_at(error, name,
                                    "the domain name '%s' is not 1 to %d characters without '/' or control characters",
                                    q, AV_NAME_MAX);
    }
    if (uuid) {
        g_autofree char *s = text(uuid);

        if (!uuid_canonical(g_strstrip(s), &dom->uuid)) {
            g_autofree char *q = av_domain_quote(s);

            return av_domain_invalid_at(
                error, uuid, "the domain <uuid> '%s' is not a UUID such as '4b20d080-1b54-4048-85b3-a6a62d165c01'", q);
        }
    }
    return TRUE;
}

/* Forgets everything metadata_parse() may have set. */
static void
metadata_forget(AvDomain *dom)
{
    dom->is_nova = FALSE;
    g_clear_pointer(&dom->nova_name, g_free);
    g_clear_pointer(&dom->nova_user, g_free);
    g_clear_pointer(&dom->nova_project, g_free);
    dom->placement_node = -1;
    g_ptr_array_set_size(dom->placed, 0);
    g_clear_pointer(&dom->scrub_token, g_free);
    g_clear_pointer(&dom->scrub_identity, g_free);
}

/* ---- the first look (av_domain_peek()) ---- */

/* See av-domain.h. */
void
av_domain_peek_clear(AvDomainPeek *peek)
{
    g_clear_pointer(&peek->name, g_free);
    g_clear_pointer(&peek->uuid, g_free);
    peek->may_manage = FALSE;
}

/* TRUE when the device element @node may be one accelvirt manages (see
 * AvDomainPeek). */
static gboolean
peek_device_may_manage(const xmlNode *node)
{
    static const char *const not_managed[] = { "scsi", "scsi_host", NULL };
    g_autofree char *mode = NULL;
    g_autofree char *type = NULL;

    if (av_domain_is_elem(node, "interface", NULL)) {
        type = av_domain_prop(node, "type");
        return g_strcmp0(type, "hostdev") == 0 || g_strcmp0(type, "direct") == 0 ||
               g_strcmp0(type, "ethernet") == 0;
    }
    if (!av_domain_is_elem(node, "hostdev", NULL))
        return FALSE;
    mode = av_domain_prop(node, "mode");
    if (g_strcmp0(mode, "capabilities") == 0)
        return FALSE;
    type = av_domain_prop(node, "type");
    return !type || !word_in(type, not_managed);
}

/* See av-domain.h. */
gboolean
av_domain_peek(const char *xml, gsize len, AvDomainPeek *ret_peek, GError **error)
{
    xmlDocPtr doc;
    xmlNode *root, *node, *metadata;
    gboolean ok = TRUE;

    g_return_val_if_fail(ret_peek != NULL, FALSE);
    av_domain_peek_clear(ret_peek);
    doc = av_domain_xml_read(xml, len, error);
    if (!doc)
        return FALSE;
    root = xmlDocGetRootElement(doc);
    if (!root || !av_domain_is_elem(root, "domain", NULL)) {
        g_autofree char *q = av_domain_quote(root ? (const char *)root->name : NULL);

        ok = av_domain_invalid_at(error, root, "the root element is <%s>%s, not <domain>", q,
                                  root && root->ns ? " in a namespace" : "");
        goto out;
    }
    node = av_domain_child_first(root, "name", NULL);
    if (node)
        ret_peek->name = text(node);
    node = av_domain_child_first(root, "uuid", NULL);
    if (node) {
        g_autofree char *s = text(node);

        /* Left NULL when it is not a UUID: the strict parse says so. */
        (void)uuid_canonical(g_strstrip(s), &ret_peek->uuid);
    }
    /* Every <devices>, as libvirt's "./devices/hostdev" selects in all. */
    for (xmlNode *devices = root->children; devices && !ret_peek->may_manage; devices = devices->next) {
        if (!av_domain_is_elem(devices, "devices", NULL))
            continue;
        for (xmlNode *c = devices->children; c && !ret_peek->may_manage; c = c->next)
            ret_peek->may_manage = peek_device_may_manage(c);
    }
    /* The first <metadata>, as libvirt reads it. */
    metadata = av_domain_child_first(root, "metadata", NULL);
    for (xmlNode *c = metadata ? metadata->children : NULL; c && !ret_peek->may_manage; c = c->next)
        ret_peek->may_manage = c->type == XML_ELEMENT_NODE && c->ns && c->ns->href &&
                               strcmp((const char *)c->ns->href, AV_NS_DOMAIN) == 0;
out:
    xmlFreeDoc(doc);
    if (!ok)
        av_domain_peek_clear(ret_peek);
    return ok;
}

AvDomain *
av_domain_parse(const char *xml, gsize len, GError **error)
{
    return av_domain_parse_flags(xml, len, AV_DOMAIN_PARSE_DEFAULT, error);
}

/* Leaves out all of the domain's pinning and NUMA tuning, keeping the
 * vCPU count when it was read: one NULL pin per vCPU. */
static void
pinning_forget(AvDomain *dom)
{
    g_clear_pointer(&dom->vcpu_cpuset, g_free);
    g_clear_pointer(&dom->vcpu_placement, g_free);
    g_clear_pointer(&dom->emulatorpin, g_free);
    g_clear_pointer(&dom->numatune_memory_mode, g_free);
    g_clear_pointer(&dom->numatune_memory_nodeset, g_free);
    g_clear_pointer(&dom->numatune_memory_placement, g_free);
    g_clear_pointer(&dom->vcpupins, g_ptr_array_unref);
    dom->vcpupins = g_ptr_array_new_full(MAX(dom->vcpus, 1), g_free);
    g_ptr_array_set_size(dom->vcpupins, (gint)MAX(dom->vcpus, 1));
}

AvDomain *
av_domain_parse_flags(const char *xml, gsize len, AvDomainParseFlags flags, GError **error)
{
    g_autoptr(AvDomain) dom = NULL;
    xmlDocPtr doc;
    xmlNode *root;
    gboolean ok;

    g_return_val_if_fail(xml != NULL || len == 0, NULL);
    doc = av_domain_xml_read(xml, len, error);
    if (!doc)
        return NULL;

    dom = g_new0(AvDomain, 1);
    dom->hostdevs = g_ptr_array_new_with_free_func((GDestroyNotify)av_hostdev_free);
    dom->ethernet_targets = g_ptr_array_new_with_free_func(g_free);
    dom->placed = g_ptr_array_new_with_free_func((GDestroyNotify)av_placed_device_free);
    dom->placement_node = -1;

    root = xmlDocGetRootElement(doc);
    if (!root || !av_domain_is_elem(root, "domain", NULL)) {
        g_autofree char *q = av_domain_quote(root ? (const char *)root->name : NULL);

        ok = av_domain_invalid_at(error, root, "the root element is <%s>%s, not <domain>", q,
                                  root && root->ns ? " in a namespace" : "");
    } else {
        g_autoptr(GError) meta_error = NULL;

        g_autoptr(GError) pin_error = NULL;

        ok = identity_parse(root, dom, error) && devices_parse(root, dom, error);
        /* Issue 19: what libvirt accepted and accelvirt cannot read here
         * refuses nothing by itself; what acts on it does. */
        if (ok && !(vcpu_parse(root, dom, &pin_error) && cputune_parse(root, dom, &pin_error) &&
                    numatune_parse(root, dom, &pin_error))) {
            pinning_forget(dom);
            dom->pinning_problem = g_strdup(pin_error->message);
        }
        if (ok && !metadata_parse(root, dom, &meta_error)) {
            if (flags & AV_DOMAIN_PARSE_METADATA_BEST_EFFORT) {
                metadata_forget(dom);
                dom->metadata_problem = g_strdup(meta_error->message);
            } else {
                g_propagate_error(error, g_steal_pointer(&meta_error));
                ok = FALSE;
            }
        }
    }
    xmlFreeDoc(doc);
    if (!ok)
        return NULL;
    return g_steal_pointer(&dom);
}
