/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: JSON helpers over jansson. */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

G_DEFINE_AUTOPTR_CLEANUP_FUNC(json_t, json_decref)

/* Finds the position of the value at @path in the JSON text @data (@len
 * bytes).  @path is a sequence of object keys and array indexes written as
 * "profiles/2/match/vendor" (array indexes in decimal; in a key, "~1" stands
 * for '/' and "~0" for '~', as in RFC 6901).  Stores 1-based line and column
 * of the first character of that value, counted as jansson counts them in its
 * own errors (a line ends at '\n'; a column is one character, one UTF-8
 * sequence).  With an empty path, the position of the top-level value.
 * Returns FALSE, leaving the outputs alone, when the path does not exist or
 * the text up to the value is not valid JSON.  Never reads past @len. */
gboolean av_json_locate(const char *data, gsize len, const char *path, int *ret_line, int *ret_column);

/* Like av_json_locate(), but the position of the key (its opening quote) of
 * the object member that the last component of @path names.  FALSE when that
 * component is an array index. */
gboolean av_json_locate_key(const char *data, gsize len, const char *path, int *ret_line, int *ret_column);

/* @key escaped as one component of an av_json_locate() path ('~' as "~0",
 * '/' as "~1").  Caller frees. */
char *av_json_path_escape(const char *key);

/* Dumps @value (any JSON value) as text indented by two spaces, keys in
 * insertion order, with a final newline.  Caller frees with g_free(). */
char *av_json_dump_pretty(const json_t *value);

/* Dumps @value (any JSON value) on one line without spaces, keys in
 * insertion order.  Caller frees with g_free(). */
char *av_json_dump_compact(const json_t *value);

/* json_string() of @s, or json_null() when @s is NULL. */
json_t *av_json_string_or_null(const char *s);

G_END_DECLS
