/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the bitstream library (see av-bitstream.h).
 *
 * Crash safety: an image is copied to a temporary file in the library's
 * directory, fsynced and renamed to SHA256.bit before the index names it;
 * a removal drops the entry from the index before it unlinks the file.  A
 * writer killed in between leaves at most a file no entry names (the next
 * add of that content replaces it), never an entry without its file. */
#include "config.h"

#include "fpga/av-bitstream.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "pool/av-pool.h"
#include "pool/av-pool-placement.h"
#include "util/av-error.h"
#include "util/av-file.h"
#include "util/av-json.h"
#include "util/av-names.h"

#define AV_BITSTREAM_INDEX "index.json"
/* The largest index read (a few hundred bytes an entry). */
#define AV_BITSTREAM_INDEX_MAX (16u * 1024 * 1024)
#define AV_BITSTREAM_DESCRIPTION_MAX 1024
#define AV_BITSTREAM_SOURCE_MAX 4096
/* Copied and hashed in chunks of this size. */
#define AV_BITSTREAM_CHUNK (1024 * 1024)

void
av_bitstream_free(AvBitstream *bitstream)
{
    if (!bitstream)
        return;
    g_free(bitstream->sha256);
    g_free(bitstream->name);
    if (bitstream->compatible)
        g_ptr_array_unref(bitstream->compatible);
    g_free(bitstream->function_id);
    g_free(bitstream->description);
    g_free(bitstream->source);
    g_free(bitstream);
}

static AvBitstream *
av_bitstream_new(void)
{
    AvBitstream *b = g_new0(AvBitstream, 1);

    b->compatible = g_ptr_array_new_with_free_func(g_free);
    return b;
}

static AvBitstream *
av_bitstream_copy(const AvBitstream *src)
{
    AvBitstream *b = av_bitstream_new();

    b->sha256 = g_strdup(src->sha256);
    b->name = g_strdup(src->name);
    b->size = src->size;
    b->added = src->added;
    for (guint i = 0; i < src->compatible->len; i++)
        g_ptr_array_add(b->compatible, g_strdup(g_ptr_array_index(src->compatible, i)));
    b->function_id = g_strdup(src->function_id);
    b->description = g_strdup(src->description);
    b->source = g_strdup(src->source);
    return b;
}

/* --- names ----------------------------------------------------------------------- */

/* TRUE when @text is a description: valid UTF-8 of at most
 * AV_BITSTREAM_DESCRIPTION_MAX bytes without control characters (it is
 * printed on terminals). */
static gboolean
av_bitstream_description_is_valid(const char *text)
{
    if (!text || strlen(text) > AV_BITSTREAM_DESCRIPTION_MAX || !g_utf8_validate(text, -1, NULL))
        return FALSE;
    for (const char *p = text; *p; p = g_utf8_next_char(p)) {
        gunichar c = g_utf8_get_char(p);

        if (c < 0x20 || (c >= 0x7f && c <= 0x9f))
            return FALSE;
    }
    return TRUE;
}

/* 1 to 4 hex digits, with an optional "0x", into *ret_id. */
static gboolean
av_bitstream_parse_id(const char *s, gsize len, guint16 *ret_id)
{
    guint v = 0;

    if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
        len -= 2;
    }
    if (len < 1 || len > 4)
        return FALSE;
    for (gsize i = 0; i < len; i++) {
        if (!g_ascii_isxdigit(s[i]))
            return FALSE;
        v = v * 16 + (guint)g_ascii_xdigit_value(s[i]);
    }
    *ret_id = (guint16)v;
    return TRUE;
}

/* See av-bitstream.h.  Caller frees. */
char *
av_bitstream_compatible_normalize(const char *entry)
{
    const char *colon;
    guint16 vendor, device;

    if (!entry)
        return NULL;
    if (g_str_has_prefix(entry, "profile:"))
        return av_profile_name_is_valid(entry + strlen("profile:")) ? g_strdup(entry) : NULL;
    colon = strchr(entry, ':');
    if (!colon || !av_bitstream_parse_id(entry, (gsize)(colon - entry), &vendor) ||
        !av_bitstream_parse_id(colon + 1, strlen(colon + 1), &device))
        return NULL;
    return g_strdup_printf("%04x:%04x", vendor, device);
}

/* See av-bitstream.h. */
gboolean
av_bitstream_compatible_is_valid(const char *entry)
{
    g_autofree char *normal = av_bitstream_compatible_normalize(entry);

    return normal != NULL;
}

/* --- paths and the directory ------------------------------------------------------ */

static char *
av_bitstream_dir(const char *state_dir)
{
    return g_build_filename(state_dir, AV_BITSTREAM_DIR, NULL);
}

/* See av-bitstream.h.  Caller frees. */
char *
av_bitstream_path(const char *state_dir, const AvBitstream *bitstream)
{
    g_autofree char *file = g_strconcat(bitstream->sha256, ".bit", NULL);

    return g_build_filename(state_dir, AV_BITSTREAM_DIR, file, NULL);
}

/* Checks the library's directory @dir: a directory (not a symbolic link)
 * owned by the owner of @state_dir, writable by nobody else.  *ret_exists
 * says whether it exists (FALSE: no library, TRUE returned). */
static gboolean
av_bitstream_dir_check(const char *state_dir, const char *dir, gboolean *ret_exists, GError **error)
{
    struct stat st, sst;

    *ret_exists = FALSE;
    if (lstat(dir, &st) < 0) {
        if (errno == ENOENT)
            return TRUE;
        return av_error_errno(error, -errno, "cannot examine the bitstream library '%s'", dir);
    }
    if (stat(state_dir, &sst) < 0)
        return av_error_errno(error, -errno, "cannot examine the state directory '%s'", state_dir);
    if (!S_ISDIR(st.st_mode)) {
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "the bitstream library '%s' is not a directory (a symbolic link?); move it away", dir);
        return FALSE;
    }
    if (st.st_uid != sst.st_uid || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "the bitstream library '%s' (uid %u, mode %04o) may be changed by others than the owner of "
                    "the state directory (uid %u); 'chown %u %s && chmod 0700 %s' fixes it",
                    dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)sst.st_uid,
                    (unsigned)sst.st_uid, dir, dir);
        return FALSE;
    }
    *ret_exists = TRUE;
    return TRUE;
}

/* --- the index --------------------------------------------------------------------- */

static gboolean G_GNUC_PRINTF(3, 4)
av_bitstream_corrupt(GError **error, const char *index, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                "the bitstream index '%s' is corrupt: %s; repair it or move it away (the images stay in its "
                "directory, named by their SHA-256)",
                index, msg);
    return FALSE;
}

/* One entry of the index (@i its position), strictly: known members only,
 * each of its type and format; its file, if present, a regular file. */
static AvBitstream *
av_bitstream_from_json(const char *index, const char *dir, json_t *e, size_t i, GError **error)
{
    static const char *const known[] = { "sha256", "name", "size", "added", "compatible", "function_id",
                                         "description", "source", NULL };
    g_autoptr(AvBitstream) b = av_bitstream_new();
    const char *key;
    json_t *v, *c;
    size_t j;
    g_autofree char *path = NULL;
    struct stat st;

    if (!json_is_object(e)) {
        av_bitstream_corrupt(error, index, "entry %zu is not an object", i);
        return NULL;
    }
    json_object_foreach(e, key, v) {
        if (!g_strv_contains(known, key)) {
            av_bitstream_corrupt(error, index, "entry %zu has an unknown member '%s'", i, key);
            return NULL;
        }
    }
    v = json_object_get(e, "sha256");
    if (!json_is_string(v) || !av_bitstream_sha256_is_valid(json_string_value(v))) {
        av_bitstream_corrupt(error, index, "entry %zu has no valid 'sha256' (64 lower-case hex digits)", i);
        return NULL;
    }
    b->sha256 = g_strdup(json_string_value(v));
    v = json_object_get(e, "name");
    if (!json_is_string(v) || !av_bitstream_name_is_valid(json_string_value(v))) {
        av_bitstream_corrupt(error, index, "entry %zu has no valid 'name'", i);
        return NULL;
    }
    b->name = g_strdup(json_string_value(v));
    v = json_object_get(e, "size");
    if (!json_is_integer(v) || json_integer_value(v) < 1 ||
        (guint64)json_integer_value(v) > AV_BITSTREAM_SIZE_MAX) {
        av_bitstream_corrupt(error, index, "the 'size' of '%s' is not 1 to %llu", b->name,
                             (unsigned long long)AV_BITSTREAM_SIZE_MAX);
        return NULL;
    }
    b->size = (guint64)json_integer_value(v);
    v = json_object_get(e, "added");
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        av_bitstream_corrupt(error, index, "the 'added' of '%s' is not Unix seconds", b->name);
        return NULL;
    }
    b->added = (gint64)json_integer_value(v);
    v = json_object_get(e, "compatible");
    if (v && !json_is_array(v)) {
        av_bitstream_corrupt(error, index, "the 'compatible' of '%s' is not an array", b->name);
        return NULL;
    }
    json_array_foreach(v, j, c) {
        g_autofree char *normal = json_is_string(c) ? av_bitstream_compatible_normalize(json_string_value(c)) : NULL;

        if (!normal || !g_str_equal(normal, json_string_value(c))) {
            av_bitstream_corrupt(error, index, "'compatible' entry %zu of '%s' is not \"VVVV:DDDD\" or "
                                 "\"profile:NAME\"", j, b->name);
            return NULL;
        }
        g_ptr_array_add(b->compatible, g_steal_pointer(&normal));
    }
    v = json_object_get(e, "function_id");
    if (v && !json_is_null(v) && (!json_is_string(v) || !av_bitstream_function_id_is_valid(json_string_value(v)))) {
        av_bitstream_corrupt(error, index, "the 'function_id' of '%s' is not valid", b->name);
        return NULL;
    }
    b->function_id = json_is_string(v) ? g_strdup(json_string_value(v)) : NULL;
    v = json_object_get(e, "description");
    if (v && !json_is_null(v) && (!json_is_string(v) || !av_bitstream_description_is_valid(json_string_value(v)))) {
        av_bitstream_corrupt(error, index, "the 'description' of '%s' is not valid", b->name);
        return NULL;
    }
    b->description = json_is_string(v) ? g_strdup(json_string_value(v)) : NULL;
    v = json_object_get(e, "source");
    if (v && !json_is_null(v) &&
        (!json_is_string(v) || strlen(json_string_value(v)) > AV_BITSTREAM_SOURCE_MAX ||
         !g_utf8_validate(json_string_value(v), -1, NULL))) {
        av_bitstream_corrupt(error, index, "the 'source' of '%s' is not valid", b->name);
        return NULL;
    }
    b->source = json_is_string(v) ? g_strdup(json_string_value(v)) : NULL;

    /* Its file: a missing one is av_bitstream_check()'s to report (and
     * remove may still drop the entry); anything but a regular file (a
     * symbolic link to elsewhere) is a hostile index. */
    path = g_strdup_printf("%s/%s.bit", dir, b->sha256);
    if (lstat(path, &st) < 0) {
        if (errno != ENOENT) {
            av_error_errno(error, -errno, "cannot examine '%s'", path);
            return NULL;
        }
    } else if (!S_ISREG(st.st_mode)) {
        av_bitstream_corrupt(error, index, "the file of '%s', %s, is not a regular file", b->name, path);
        return NULL;
    }
    return g_steal_pointer(&b);
}

static gint
av_bitstream_cmp_name(gconstpointer a, gconstpointer b)
{
    const AvBitstream *x = *(const AvBitstream *const *)a;
    const AvBitstream *y = *(const AvBitstream *const *)b;

    return strcmp(x->name, y->name);
}

/* See av-bitstream.h. */
gboolean
av_bitstream_list(const char *state_dir, GPtrArray **ret_list, GError **error)
{
    g_autofree char *dir = av_bitstream_dir(state_dir);
    g_autofree char *index = g_build_filename(dir, AV_BITSTREAM_INDEX, NULL);
    g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func((GDestroyNotify)av_bitstream_free);
    g_autofree char *data = NULL;
    g_autoptr(json_t) root = NULL;
    json_error_t jerr;
    gboolean exists = FALSE;
    gsize len = 0;
    struct stat st;
    json_t *entries, *e;
    size_t i;
    int fd, r;

    if (!av_bitstream_dir_check(state_dir, dir, &exists, error))
        return FALSE;
    if (!exists) {
        *ret_list = g_steal_pointer(&list);
        return TRUE;
    }
    fd = open(index, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0 && errno == ENOENT) {
        *ret_list = g_steal_pointer(&list);
        return TRUE;
    }
    if (fd < 0 && errno == ELOOP)
        return av_bitstream_corrupt(error, index, "it is a symbolic link");
    if (fd < 0)
        return av_error_errno(error, -errno, "cannot open the bitstream index '%s'", index);
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (guint64)st.st_size > AV_BITSTREAM_INDEX_MAX) {
        close(fd);
        return av_bitstream_corrupt(error, index, "not a regular file of at most %u bytes", AV_BITSTREAM_INDEX_MAX);
    }
    r = av_file_read_all(fd, &data, &len);
    close(fd);
    if (r < 0)
        return av_error_errno(error, r, "cannot read the bitstream index '%s'", index);
    root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return av_bitstream_corrupt(error, index, "line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
    entries = json_object_get(root, "bitstreams");
    if (!json_is_object(root) || json_object_size(root) != 1 || !json_is_array(entries))
        return av_bitstream_corrupt(error, index, "expected {\"bitstreams\": [...]} and nothing else");
    json_array_foreach(entries, i, e) {
        AvBitstream *b = av_bitstream_from_json(index, dir, e, i, error);

        if (!b)
            return FALSE;
        for (guint k = 0; k < list->len; k++) {
            const AvBitstream *o = g_ptr_array_index(list, k);

            if (g_str_equal(o->name, b->name) || g_str_equal(o->sha256, b->sha256)) {
                av_bitstream_corrupt(error, index, "entries %u and %zu share a %s", k, i,
                                     g_str_equal(o->name, b->name) ? "name" : "sha256");
                av_bitstream_free(b);
                return FALSE;
            }
        }
        g_ptr_array_add(list, b);
    }
    g_ptr_array_sort(list, av_bitstream_cmp_name);
    *ret_list = g_steal_pointer(&list);
    return TRUE;
}

/* The entry of @list that @ref names, borrowed, or NULL. */
static AvBitstream *
av_bitstream_find(GPtrArray *list, const char *ref)
{
    gboolean by_sha = av_bitstream_sha256_is_valid(ref);

    for (guint i = 0; i < list->len; i++) {
        AvBitstream *b = g_ptr_array_index(list, i);

        if (g_str_equal(by_sha ? b->sha256 : b->name, ref))
            return b;
    }
    return NULL;
}

/* The library of @state_dir in *ret_list (caller frees) and its entry
 * that @ref names (borrowed from the list), or NULL with @error:
 * AV_ERROR_INVALID_INPUT for a @ref that cannot name one, AV_ERROR_NOT_FOUND,
 * or an error of av_bitstream_list(). */
static AvBitstream *
av_bitstream_list_find(const char *state_dir, const char *ref, GPtrArray **ret_list, GError **error)
{
    g_autoptr(GPtrArray) list = NULL;
    AvBitstream *b;

    if (!av_bitstream_ref_is_valid(ref)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "'%s' cannot name a bitstream (a name of [a-z0-9._-], or a SHA-256 of 64 hex digits)", ref);
        return NULL;
    }
    if (!av_bitstream_list(state_dir, &list, error))
        return NULL;
    b = av_bitstream_find(list, ref);
    if (!b) {
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                    "no bitstream '%s' in the library; 'accelvirt bitstream list' shows them", ref);
        return NULL;
    }
    *ret_list = g_steal_pointer(&list);
    return b;
}

/* See av-bitstream.h.  Caller frees. */
AvBitstream *
av_bitstream_lookup(const char *state_dir, const char *ref, GError **error)
{
    g_autoptr(GPtrArray) list = NULL;
    const AvBitstream *b = av_bitstream_list_find(state_dir, ref, &list, error);

    return b ? av_bitstream_copy(b) : NULL;
}

/* See av-bitstream.h. */
json_t *
av_bitstream_to_json(const AvBitstream *bitstream)
{
    json_t *compatible = json_array();

    for (guint i = 0; i < bitstream->compatible->len; i++)
        json_array_append_new(compatible, json_string(g_ptr_array_index(bitstream->compatible, i)));
    return json_pack("{s:s,s:s,s:I,s:I,s:o,s:o,s:o,s:o}", "sha256", bitstream->sha256, "name", bitstream->name,
                     "size", (json_int_t)bitstream->size, "added", (json_int_t)bitstream->added, "compatible",
                     compatible, "function_id", av_json_string_or_null(bitstream->function_id), "description",
                     av_json_string_or_null(bitstream->description), "source",
                     av_json_string_or_null(bitstream->source));
}

/* Replaces the index of the library @dir with @list, atomically. */
static gboolean
av_bitstream_index_write(const char *dir, const GPtrArray *list, GError **error)
{
    g_autofree char *index = g_build_filename(dir, AV_BITSTREAM_INDEX, NULL);
    g_autoptr(json_t) entries = json_array();
    g_autoptr(json_t) root = NULL;
    g_autofree char *text = NULL;

    for (guint i = 0; i < list->len; i++)
        json_array_append_new(entries, av_bitstream_to_json(g_ptr_array_index(list, i)));
    root = json_pack("{s:O}", "bitstreams", entries);
    text = av_json_dump_pretty(root);
    return av_file_write_atomic(index, text, strlen(text), 0600, error);
}

/* --- checking, adding, removing ---------------------------------------------------- */

/* Copies @in (@expected bytes) to @out, hashing the bytes as they go.
 * The hex SHA-256 to *ret_sha256 (caller frees).  FALSE when the file is
 * not @expected bytes long (it changed meanwhile) or a read or write fails. */
static gboolean
av_bitstream_copy_hash(int in, int out, const char *what, guint64 expected, char **ret_sha256, GError **error)
{
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    g_autofree guchar *buf = g_malloc(AV_BITSTREAM_CHUNK);
    guint64 total = 0;

    for (;;) {
        ssize_t n = read(in, buf, AV_BITSTREAM_CHUNK);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return av_error_errno(error, -errno, "cannot read '%s'", what);
        if (n == 0)
            break;
        total += (guint64)n;
        if (total > expected) {
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "'%s' grew while it was read; try again", what);
            return FALSE;
        }
        g_checksum_update(sum, buf, (gssize)n);
        if (out >= 0) {
            int r = av_file_pwrite_all(out, buf, (gsize)n, (goffset)(total - (guint64)n));

            if (r < 0)
                return av_error_errno(error, r, "cannot copy '%s' into the bitstream library", what);
        }
    }
    if (total != expected) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "'%s' changed size while it was read; try again", what);
        return FALSE;
    }
    *ret_sha256 = g_strdup(g_checksum_get_string(sum));
    return TRUE;
}

/* See av-bitstream.h.  The file is hashed whole: SHA-256 runs at a few
 * hundred MiB/s to GiB/s on one core, so the largest images (a few hundred
 * MiB) cost well under a second or two, against the minutes programming
 * takes; it runs once before each program run, never in the hook. */
gboolean
av_bitstream_check(const char *state_dir, const AvBitstream *bitstream, GError **error)
{
    g_autofree char *path = av_bitstream_path(state_dir, bitstream);
    g_autofree char *sha = NULL;
    struct stat st, tst, sst;
    GError *local = NULL;
    int fd;
    gboolean ok;

    if (stat(state_dir, &sst) < 0)
        return av_error_errno(error, -errno, "cannot examine the state directory '%s'", state_dir);
    /* Nobody but root and accelvirt could have put another image there:
     * the path from "/" down (av_file_check_trusted()). */
    if (!av_file_check_trusted(path, "bitstream", &tst, &local)) {
        if (!g_error_matches(local, AV_ERROR, AV_ERROR_UNSAFE))
            local->code = AV_ERROR_CORRUPT_STATE;
        g_prefix_error(&local, "the file of bitstream '%s' cannot be used: ", bitstream->name);
        g_propagate_error(error, local);
        return FALSE;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE, "the file of bitstream '%s', %s, cannot be opened: %s",
                    bitstream->name, path, g_strerror(errno));
        return FALSE;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_ino != tst.st_ino || st.st_dev != tst.st_dev) {
        close(fd);
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "the file of bitstream '%s', %s, is not a regular file (a symbolic link?)", bitstream->name, path);
        return FALSE;
    }
    if (st.st_uid != sst.st_uid || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        close(fd);
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "the file of bitstream '%s', %s (uid %u, mode %04o), may be changed by others than the owner of "
                    "the state directory (uid %u); remove the bitstream and add it again",
                    bitstream->name, path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)sst.st_uid);
        return FALSE;
    }
    if ((guint64)st.st_size != bitstream->size) {
        close(fd);
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "the file of bitstream '%s', %s, is %llu bytes, not the %llu recorded: it was changed; remove "
                    "the bitstream and add it again",
                    bitstream->name, path, (unsigned long long)st.st_size, (unsigned long long)bitstream->size);
        return FALSE;
    }
    ok = av_bitstream_copy_hash(fd, -1, path, bitstream->size, &sha, &local);
    close(fd);
    if (!ok) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE, "the file of bitstream '%s' cannot be checked: %s",
                    bitstream->name, local->message);
        g_error_free(local);
        return FALSE;
    }
    if (!g_str_equal(sha, bitstream->sha256)) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "the file of bitstream '%s', %s, does not hash to its name (its SHA-256 is %s): it was changed; "
                    "remove the bitstream and add it again",
                    bitstream->name, path, sha);
        return FALSE;
    }
    return TRUE;
}

/* Opens the file @path to add: trusted (av_file_check_trusted()), a regular
 * file of 1 to AV_BITSTREAM_SIZE_MAX bytes, the very file that was checked.
 * Returns the fd and its size in *ret_size, or -1 with @error. */
static int
av_bitstream_open_source(const char *path, guint64 *ret_size, GError **error)
{
    struct stat tst, st;
    int fd;

    if (!av_file_check_trusted(path, "bitstream file", &tst, error))
        return -1;
    if (!S_ISREG(tst.st_mode)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "'%s' is not a regular file", path);
        return -1;
    }
    /* O_NONBLOCK: a FIFO put there since the check does not hang us. */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        av_error_errno(error, -errno, "cannot open '%s'", path);
        return -1;
    }
    if (fstat(fd, &st) < 0 || st.st_ino != tst.st_ino || st.st_dev != tst.st_dev || !S_ISREG(st.st_mode)) {
        close(fd);
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE, "'%s' changed while it was checked; try again", path);
        return -1;
    }
    if (st.st_size < 1 || (guint64)st.st_size > AV_BITSTREAM_SIZE_MAX) {
        close(fd);
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "'%s' is %lld bytes: a bitstream is 1 byte to %llu GiB",
                    path, (long long)st.st_size, (unsigned long long)(AV_BITSTREAM_SIZE_MAX >> 30));
        return -1;
    }
    *ret_size = (guint64)st.st_size;
    return fd;
}

/* Removes the temporary files that adds killed mid-copy left in the
 * library @dir ("incoming.tmp.*", and "index.json.tmp.*" of a killed index
 * write): the caller holds the pool's write lock, so no add is under way. */
static void
av_bitstream_remove_leftovers(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;

    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = NULL;

        if (!g_str_has_prefix(name, "incoming.tmp.") && !g_str_has_prefix(name, AV_BITSTREAM_INDEX ".tmp."))
            continue;
        path = g_build_filename(dir, name, NULL);
        g_unlink(path);
    }
}

/* See av-bitstream.h.  Caller frees. */
AvBitstream *
av_bitstream_add(const char *state_dir, const char *path, const char *name, const char *const *compatible,
                 const char *function_id, const char *description, GError **error)
{
    g_autofree char *dir = av_bitstream_dir(state_dir);
    g_autofree char *tmp = NULL;
    g_autofree char *sha = NULL;
    g_autofree char *abs = NULL;
    g_autoptr(GPtrArray) list = NULL;
    g_autoptr(AvBitstream) b = NULL;
    g_autoptr(GError) local = NULL;
    AvBitstream *same;
    gboolean exists = FALSE;
    guint64 size = 0;
    int in = -1, out = -1;

    if (!av_bitstream_name_is_valid(name)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "'%s' is not a bitstream name: 1 to 63 of [a-z0-9._-], starting with a letter or digit", name);
        return NULL;
    }
    if (function_id && !av_bitstream_function_id_is_valid(function_id)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "'%s' is not a function id: 1 to %u of [A-Za-z0-9._:-]", function_id,
                    AV_BITSTREAM_FUNCTION_ID_MAX);
        return NULL;
    }
    if (description && !av_bitstream_description_is_valid(description)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "the description is not UTF-8 text of at most %u bytes without control characters",
                    AV_BITSTREAM_DESCRIPTION_MAX);
        return NULL;
    }
    b = av_bitstream_new();
    for (const char *const *c = compatible; c && *c; c++) {
        char *normal = av_bitstream_compatible_normalize(*c);

        if (!normal) {
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                        "'%s' is not a compatible entry: \"VVVV:DDDD\" (PCI vendor and device, as lspci -n writes "
                        "them) or \"profile:NAME\"", *c);
            return NULL;
        }
        if (!g_ptr_array_find_with_equal_func(b->compatible, normal, g_str_equal, NULL))
            g_ptr_array_add(b->compatible, normal);
        else
            g_free(normal);
    }
    abs = g_path_is_absolute(path) ? g_strdup(path) : g_build_filename(g_get_current_dir(), path, NULL);
    if (strlen(abs) > AV_BITSTREAM_SOURCE_MAX || !g_utf8_validate(abs, -1, NULL)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "the path of the bitstream file is too long or not UTF-8");
        return NULL;
    }
    /* The library first: bad state is found before a byte is copied. */
    if (!av_file_ensure_dir(dir, 0700, error) || !av_bitstream_dir_check(state_dir, dir, &exists, error) ||
        !av_bitstream_list(state_dir, &list, error))
        return NULL;
    av_bitstream_remove_leftovers(dir);
    in = av_bitstream_open_source(path, &size, error);
    if (in < 0)
        return NULL;
    tmp = g_build_filename(dir, "incoming.tmp.XXXXXX", NULL);
    out = g_mkstemp_full(tmp, O_WRONLY | O_CLOEXEC, 0600);
    if (out < 0) {
        av_error_errno(error, -errno, "cannot create '%s'", tmp);
        close(in);
        return NULL;
    }
    if (!av_bitstream_copy_hash(in, out, abs, size, &sha, &local) || fchmod(out, 0600) < 0 || fsync(out) < 0) {
        if (!local)
            av_error_errno(&local, -errno, "cannot write '%s'", tmp);
        goto fail;
    }
    close(in);
    in = -1;
    if (close(out) < 0) {
        out = -1;
        av_error_errno(&local, -errno, "cannot write '%s'", tmp);
        goto fail;
    }
    out = -1;

    same = av_bitstream_find(list, sha);
    if (same && g_str_equal(same->name, name)) {
        /* The same content under the same name: no change. */
        g_unlink(tmp);
        return av_bitstream_copy(same);
    }
    if (same) {
        g_set_error(&local, AV_ERROR, AV_ERROR_IN_USE,
                    "the content of '%s' is in the library already as '%s' (sha256 %s); use that name, or "
                    "'accelvirt bitstream remove %s' first",
                    abs, same->name, sha, same->name);
        goto fail;
    }
    same = av_bitstream_find(list, name);
    if (same) {
        g_set_error(&local, AV_ERROR, AV_ERROR_IN_USE,
                    "the name '%s' is taken by other content (sha256 %s); choose another name, or "
                    "'accelvirt bitstream remove %s' first",
                    name, same->sha256, name);
        goto fail;
    }
    b->sha256 = g_steal_pointer(&sha);
    b->name = g_strdup(name);
    b->size = size;
    b->added = g_get_real_time() / G_USEC_PER_SEC;
    b->function_id = g_strdup(function_id);
    b->description = g_strdup(description);
    b->source = g_steal_pointer(&abs);
    {
        g_autofree char *final = av_bitstream_path(state_dir, b);
        int r;

        if (rename(tmp, final) < 0) {
            av_error_errno(&local, -errno, "cannot rename '%s' to '%s'", tmp, final);
            goto fail;
        }
        r = av_file_fsync_dir(dir);
        g_ptr_array_add(list, av_bitstream_copy(b));
        g_ptr_array_sort(list, av_bitstream_cmp_name);
        if (r < 0 || !av_bitstream_index_write(dir, list, &local)) {
            if (!local)
                av_error_errno(&local, r, "cannot sync the directory '%s'", dir);
            /* No entry names it: gone again. */
            g_unlink(final);
            g_propagate_error(error, g_steal_pointer(&local));
            return NULL;
        }
    }
    return g_steal_pointer(&b);

fail:
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    g_unlink(tmp);
    g_propagate_error(error, g_steal_pointer(&local));
    return NULL;
}

/* See av-bitstream.h. */
gboolean
av_bitstream_remove(const char *state_dir, const char *ref, GError **error)
{
    g_autofree char *dir = av_bitstream_dir(state_dir);
    g_autofree char *path = NULL;
    g_autoptr(GPtrArray) list = NULL;
    AvBitstream *b;
    int r;

    b = av_bitstream_list_find(state_dir, ref, &list, error);
    if (!b)
        return FALSE;
    path = av_bitstream_path(state_dir, b);
    g_ptr_array_remove(list, b);
    /* The entry goes first: a crash leaves a file nobody names. */
    if (!av_bitstream_index_write(dir, list, error))
        return FALSE;
    if (unlink(path) < 0 && errno != ENOENT)
        return av_error_errno(error, -errno, "'%s' left the index but its file '%s' could not be removed", ref, path);
    r = av_file_fsync_dir(dir);
    if (r < 0)
        return av_error_errno(error, r, "cannot sync the directory '%s'", dir);
    return TRUE;
}

/* See av-bitstream.h. */
gboolean
av_bitstream_fits(const AvBitstream *bitstream, const char *profile, guint16 vendor, guint16 device)
{
    g_autofree char *ids = g_strdup_printf("%04x:%04x", vendor, device);

    if (bitstream->compatible->len == 0)
        return TRUE;
    for (guint i = 0; i < bitstream->compatible->len; i++) {
        const char *c = g_ptr_array_index(bitstream->compatible, i);

        if (g_str_equal(c, ids) || (profile && g_str_has_prefix(c, "profile:") &&
                                    g_str_equal(c + strlen("profile:"), profile)))
            return TRUE;
    }
    return FALSE;
}

/* See av-bitstream.h.  Caller frees. */
char *
av_bitstream_in_use(const AvPool *pool, const AvPolicy *policy, const AvBitstream *bitstream)
{
    const GPtrArray *devices = pool ? av_pool_devices(pool) : NULL;
    const GPtrArray *records = pool ? av_pool_placements(pool) : NULL;

    for (guint i = 0; devices && i < devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(devices, i);

        if (dev->programmed && g_str_equal(dev->programmed->sha256, bitstream->sha256))
            return g_strdup_printf("device %s (%s) holds it (programmed by %s); 'accelvirt program %s OTHER' "
                                   "programs another first",
                                   dev->address ? dev->address : "-", dev->identity,
                                   dev->programmed->by ? dev->programmed->by : "?",
                                   dev->address ? dev->address : dev->identity);
    }
    for (guint i = 0; records && i < records->len; i++) {
        const AvPoolPlacement *record = g_ptr_array_index(records, i);

        for (guint k = 0; k < record->items->len; k++) {
            const AvPlacedItem *item = g_ptr_array_index(record->items, k);

            if (item->bitstream && g_str_equal(item->bitstream, bitstream->sha256))
                return g_strdup_printf("domain '%s' (%s) was placed with it; 'accelvirt undefine' of that domain "
                                       "gives its placement back",
                                       record->domain_name ? record->domain_name : "?", record->domain_uuid);
        }
    }
    for (guint i = 0; policy && i < policy->profiles->len; i++) {
        const AvProfile *profile = g_ptr_array_index(policy->profiles, i);
        const char *base = profile->program ? profile->program->base : NULL;

        if (base && (g_str_equal(base, bitstream->name) || g_str_equal(base, bitstream->sha256)))
            return g_strdup_printf("profile '%s' (%s) restores it as its program's base; change that \"base\" "
                                   "first",
                                   profile->name, profile->source_file ? profile->source_file : "?");
    }
    return NULL;
}
