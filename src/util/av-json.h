/* accelvirt: JSON helpers over jansson. */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

G_DEFINE_AUTOPTR_CLEANUP_FUNC(json_t, json_decref)

/* Finds the position of the value at @path in the JSON text @data (@len
 * bytes).  @path is a sequence of object keys and array indexes written as
 * "profiles/2/match/vendor" (array indexes in decimal).  Stores 1-based line
 * and column (in bytes) of the first character of that value.  With an empty
 * path, the position of the top-level value.  Returns FALSE when the path does
 * not exist or the text is not valid JSON. */
gboolean av_json_locate(const char *data, gsize len, const char *path, int *ret_line, int *ret_column);

/* Dumps @value as indented text with a final newline (caller frees). */
char *av_json_dump_pretty(const json_t *value);

/* Dumps @value on one line, keys in insertion order (caller frees). */
char *av_json_dump_compact(const json_t *value);

/* json_string() of @s, or json_null() when @s is NULL. */
json_t *av_json_string_or_null(const char *s);

G_END_DECLS
