/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: JSON helpers over jansson.
 *
 * jansson parses and validates; it does not say where a value was in the text.
 * av_json_locate() answers that for error messages ("FILE:LINE:COLUMN: ..."),
 * with a small scanner of its own (RFC 8259 grammar) that never reads past the
 * given length. */
#include "config.h"

#include "av-json.h"

#include <stdlib.h>
#include <string.h>

/* jansson's own nesting limit (JSON_PARSER_MAX_DEPTH): valid input is never
 * deeper, and the recursion below stays bounded. */
#define AV_JSON_MAX_DEPTH 2048

typedef struct {
    const char *data;
    gsize len;
    gsize pos;
    int line;          /* 1-based */
    int column;        /* 1-based column of data[pos], in characters */
} AvJsonScan;

static gboolean
scan_eof(const AvJsonScan *s)
{
    return s->pos >= s->len;
}

static char
scan_peek(const AvJsonScan *s)
{
    return scan_eof(s) ? '\0' : s->data[s->pos];
}

/* Moves past one byte, keeping line and column as jansson counts them: a new
 * line at '\n', one column per character (the first byte of a UTF-8
 * sequence). */
static void
scan_advance(AvJsonScan *s)
{
    unsigned char c;

    if (scan_eof(s))
        return;
    c = (unsigned char)s->data[s->pos++];
    if (c == '\n') {
        s->line++;
        s->column = 1;
    } else if (scan_eof(s) || ((unsigned char)s->data[s->pos] & 0xc0) != 0x80) {
        /* the next byte starts a new character */
        s->column++;
    }
}

static void
scan_skip_ws(AvJsonScan *s)
{
    while (!scan_eof(s)) {
        char c = s->data[s->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        scan_advance(s);
    }
}

static gboolean
scan_expect(AvJsonScan *s, char c)
{
    if (scan_peek(s) != c || scan_eof(s))
        return FALSE;
    scan_advance(s);
    return TRUE;
}

static int
hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static gboolean
scan_hex4(AvJsonScan *s, gunichar *ret)
{
    gunichar v = 0;

    for (int i = 0; i < 4; i++) {
        int h = scan_eof(s) ? -1 : hex_value(s->data[s->pos]);
        if (h < 0)
            return FALSE;
        v = (v << 4) | (gunichar)h;
        scan_advance(s);
    }
    *ret = v;
    return TRUE;
}

/* Scans a string token; with @out, appends its decoded contents. */
static gboolean
scan_string(AvJsonScan *s, GString *out)
{
    if (!scan_expect(s, '"'))
        return FALSE;
    for (;;) {
        unsigned char c;

        if (scan_eof(s))
            return FALSE;
        c = (unsigned char)s->data[s->pos];
        if (c == '"') {
            scan_advance(s);
            return TRUE;
        }
        if (c < 0x20)
            return FALSE;
        if (c != '\\') {
            if (out)
                g_string_append_c(out, (char)c);
            scan_advance(s);
            continue;
        }
        scan_advance(s);
        if (scan_eof(s))
            return FALSE;
        c = (unsigned char)s->data[s->pos];
        scan_advance(s);
        switch (c) {
        case '"': case '\\': case '/':
            if (out)
                g_string_append_c(out, (char)c);
            break;
        case 'b': if (out) g_string_append_c(out, '\b'); break;
        case 'f': if (out) g_string_append_c(out, '\f'); break;
        case 'n': if (out) g_string_append_c(out, '\n'); break;
        case 'r': if (out) g_string_append_c(out, '\r'); break;
        case 't': if (out) g_string_append_c(out, '\t'); break;
        case 'u': {
            gunichar u;

            if (!scan_hex4(s, &u))
                return FALSE;
            if (u >= 0xd800 && u <= 0xdbff) {
                gunichar low;

                /* a high surrogate must be followed by "\uDC00".."\uDFFF" */
                if (!scan_expect(s, '\\') || !scan_expect(s, 'u') || !scan_hex4(s, &low))
                    return FALSE;
                if (low < 0xdc00 || low > 0xdfff)
                    return FALSE;
                u = 0x10000 + ((u - 0xd800) << 10) + (low - 0xdc00);
            } else if (u >= 0xdc00 && u <= 0xdfff) {
                return FALSE;
            }
            if (out)
                g_string_append_unichar(out, u);
            break;
        }
        default:
            return FALSE;
        }
    }
}

static gboolean
scan_digits(AvJsonScan *s)
{
    gboolean any = FALSE;

    while (!scan_eof(s) && g_ascii_isdigit(s->data[s->pos])) {
        scan_advance(s);
        any = TRUE;
    }
    return any;
}

static gboolean
scan_number(AvJsonScan *s)
{
    if (scan_peek(s) == '-')
        scan_advance(s);
    if (scan_peek(s) == '0')
        scan_advance(s);
    else if (!scan_digits(s))
        return FALSE;
    if (scan_peek(s) == '.') {
        scan_advance(s);
        if (!scan_digits(s))
            return FALSE;
    }
    if (scan_peek(s) == 'e' || scan_peek(s) == 'E') {
        scan_advance(s);
        if (scan_peek(s) == '+' || scan_peek(s) == '-')
            scan_advance(s);
        if (!scan_digits(s))
            return FALSE;
    }
    return TRUE;
}

static gboolean
scan_literal(AvJsonScan *s, const char *word)
{
    gsize n = strlen(word);

    if (s->len - s->pos < n || memcmp(s->data + s->pos, word, n) != 0)
        return FALSE;
    for (gsize i = 0; i < n; i++)
        scan_advance(s);
    return TRUE;
}

static gboolean scan_value(AvJsonScan *s, int depth);

static gboolean
scan_object(AvJsonScan *s, int depth)
{
    if (!scan_expect(s, '{'))
        return FALSE;
    scan_skip_ws(s);
    if (scan_expect(s, '}'))
        return TRUE;
    for (;;) {
        scan_skip_ws(s);
        if (!scan_string(s, NULL))
            return FALSE;
        scan_skip_ws(s);
        if (!scan_expect(s, ':'))
            return FALSE;
        scan_skip_ws(s);
        if (!scan_value(s, depth + 1))
            return FALSE;
        scan_skip_ws(s);
        if (scan_expect(s, '}'))
            return TRUE;
        if (!scan_expect(s, ','))
            return FALSE;
    }
}

static gboolean
scan_array(AvJsonScan *s, int depth)
{
    if (!scan_expect(s, '['))
        return FALSE;
    scan_skip_ws(s);
    if (scan_expect(s, ']'))
        return TRUE;
    for (;;) {
        scan_skip_ws(s);
        if (!scan_value(s, depth + 1))
            return FALSE;
        scan_skip_ws(s);
        if (scan_expect(s, ']'))
            return TRUE;
        if (!scan_expect(s, ','))
            return FALSE;
    }
}

/* Scans (skips) one value starting at the current position. */
static gboolean
scan_value(AvJsonScan *s, int depth)
{
    if (depth > AV_JSON_MAX_DEPTH)
        return FALSE;
    switch (scan_peek(s)) {
    case '{':
        return scan_object(s, depth);
    case '[':
        return scan_array(s, depth);
    case '"':
        return scan_string(s, NULL);
    case 't':
        return scan_literal(s, "true");
    case 'f':
        return scan_literal(s, "false");
    case 'n':
        return scan_literal(s, "null");
    default:
        if (scan_eof(s))
            return FALSE;
        return scan_number(s);
    }
}

/* Decodes one path component: "~1" is '/', "~0" is '~' (as in RFC 6901). */
static char *
path_component_decode(const char *start, gsize n)
{
    GString *out = g_string_sized_new(n);

    for (gsize i = 0; i < n; i++) {
        if (start[i] == '~' && i + 1 < n && (start[i + 1] == '0' || start[i + 1] == '1')) {
            g_string_append_c(out, start[i + 1] == '0' ? '~' : '/');
            i++;
        } else {
            g_string_append_c(out, start[i]);
        }
    }
    return g_string_free(out, FALSE);
}

static gboolean
parse_index(const char *comp, guint64 *ret)
{
    guint64 v = 0;

    if (!*comp)
        return FALSE;
    for (const char *p = comp; *p; p++) {
        if (!g_ascii_isdigit(*p))
            return FALSE;
        if (v > G_MAXUINT32)
            return FALSE;
        v = v * 10 + (guint64)(*p - '0');
    }
    *ret = v;
    return TRUE;
}

/* Positions @s on the member named @key of the object at the current
 * position: on success @s is at the value, and *ret_key_* hold the position
 * of the key. */
static gboolean
scan_find_member(AvJsonScan *s, const char *key, int depth, int *ret_key_line, int *ret_key_column)
{
    if (!scan_expect(s, '{'))
        return FALSE;
    scan_skip_ws(s);
    if (scan_peek(s) == '}')
        return FALSE;
    for (;;) {
        g_autoptr(GString) name = g_string_new(NULL);
        int kline, kcol;

        scan_skip_ws(s);
        kline = s->line;
        kcol = s->column;
        if (!scan_string(s, name))
            return FALSE;
        scan_skip_ws(s);
        if (!scan_expect(s, ':'))
            return FALSE;
        scan_skip_ws(s);
        /* keys holding a NUL can never equal a C string key */
        if (strlen(name->str) == name->len && g_str_equal(name->str, key)) {
            *ret_key_line = kline;
            *ret_key_column = kcol;
            return TRUE;
        }
        if (!scan_value(s, depth + 1))
            return FALSE;
        scan_skip_ws(s);
        if (scan_peek(s) == '}' || !scan_expect(s, ','))
            return FALSE;
    }
}

/* Positions @s on element @index of the array at the current position. */
static gboolean
scan_find_element(AvJsonScan *s, guint64 index, int depth)
{
    if (!scan_expect(s, '['))
        return FALSE;
    scan_skip_ws(s);
    if (scan_peek(s) == ']')
        return FALSE;
    for (guint64 i = 0;; i++) {
        scan_skip_ws(s);
        if (i == index)
            return !scan_eof(s);
        if (!scan_value(s, depth + 1))
            return FALSE;
        scan_skip_ws(s);
        if (scan_peek(s) == ']' || !scan_expect(s, ','))
            return FALSE;
    }
}

static gboolean
av_json_locate_internal(const char *data, gsize len, const char *path, gboolean want_key,
                        int *ret_line, int *ret_column)
{
    AvJsonScan s = { .data = data, .len = len, .pos = 0, .line = 1, .column = 1 };
    const char *p = path ? path : "";
    int key_line = 0, key_column = 0;
    gboolean last_was_key = FALSE;
    int depth = 0;

    if (!data)
        return FALSE;
    scan_skip_ws(&s);
    while (*p) {
        const char *slash = strchr(p, '/');
        gsize n = slash ? (gsize)(slash - p) : strlen(p);
        g_autofree char *comp = path_component_decode(p, n);

        if (scan_peek(&s) == '{' && !scan_eof(&s)) {
            if (!scan_find_member(&s, comp, depth, &key_line, &key_column))
                return FALSE;
            last_was_key = TRUE;
        } else if (scan_peek(&s) == '[' && !scan_eof(&s)) {
            guint64 index;

            if (!parse_index(comp, &index) || !scan_find_element(&s, index, depth))
                return FALSE;
            last_was_key = FALSE;
        } else {
            return FALSE;
        }
        depth++;
        p += n;
        if (*p == '/')
            p++;
    }
    if (scan_eof(&s))
        return FALSE;
    if (want_key) {
        if (!last_was_key)
            return FALSE;
        *ret_line = key_line;
        *ret_column = key_column;
        return TRUE;
    }
    *ret_line = s.line;
    *ret_column = s.column;
    return TRUE;
}

/* Scans @data up to the value at @path (not beyond @len) and stores its
 * position; FALSE when the path is absent or the text up to it is not JSON. */
gboolean
av_json_locate(const char *data, gsize len, const char *path, int *ret_line, int *ret_column)
{
    return av_json_locate_internal(data, len, path, FALSE, ret_line, ret_column);
}

/* As av_json_locate(), for the key of the member that @path ends with. */
gboolean
av_json_locate_key(const char *data, gsize len, const char *path, int *ret_line, int *ret_column)
{
    return av_json_locate_internal(data, len, path, TRUE, ret_line, ret_column);
}

/* @key as one path component, "~" and "/" escaped (caller frees). */
char *
av_json_path_escape(const char *key)
{
    GString *out = g_string_new(NULL);

    for (const char *p = key; *p; p++) {
        if (*p == '~')
            g_string_append(out, "~0");
        else if (*p == '/')
            g_string_append(out, "~1");
        else
            g_string_append_c(out, *p);
    }
    return g_string_free(out, FALSE);
}

static char *
av_json_dump_flags(const json_t *value, size_t flags, gboolean newline)
{
    char *text = json_dumps(value, flags | JSON_ENCODE_ANY);
    char *ret;

    if (!text)
        g_error("cannot serialise a JSON value (out of memory?)");
    ret = g_strconcat(text, newline ? "\n" : "", NULL);
    free(text);
    return ret;
}

/* Indented JSON text with a final newline (caller g_free()s). */
char *
av_json_dump_pretty(const json_t *value)
{
    return av_json_dump_flags(value, JSON_INDENT(2) | JSON_PRESERVE_ORDER, TRUE);
}

/* One-line JSON text (caller g_free()s). */
char *
av_json_dump_compact(const json_t *value)
{
    return av_json_dump_flags(value, JSON_COMPACT | JSON_PRESERVE_ORDER, FALSE);
}

/* A new reference: a JSON string copied from @s, or null. */
json_t *
av_json_string_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}
