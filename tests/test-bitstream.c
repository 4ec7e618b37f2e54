/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: the bitstream library (src/fpga/av-bitstream.c). */
#include "config.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "av-test.h"
#include "fpga/av-bitstream.h"
#include "pool/av-pool-placement.h"
#include "pool/av-pool-private.h"
#include "util/av-error.h"
#include "util/av-names.h"

/* Replaces the contents of @path in place (same inode), mode 0600. */
static void
test_put(const char *path, const char *content)
{
    FILE *fp = fopen(path, "w");

    g_assert_nonnull(fp);
    g_assert_cmpint(fputs(content, fp), >=, 0);
    g_assert_cmpint(fclose(fp), ==, 0);
    g_assert_cmpint(chmod(path, 0600), ==, 0);
}

/* A state dir (mode 0700) in a new temporary directory, with a source
 * file "image.bin" of @content beside it (mode 0600). */
typedef struct {
    char *dir;
    char *state;
    char *source;
} Fixture;

static void
fixture_set_up(Fixture *f, gconstpointer data)
{
    (void)data;
    f->dir = av_test_tmpdir();
    f->state = g_build_filename(f->dir, "state", NULL);
    f->source = g_build_filename(f->dir, "image.bin", NULL);
    g_assert_cmpint(g_mkdir(f->state, 0700), ==, 0);
    test_put(f->source, "bitstream one");
}

static void
fixture_tear_down(Fixture *f, gconstpointer data)
{
    (void)data;
    av_test_tmpdir_remove(f->dir);
    g_free(f->dir);
    g_free(f->state);
    g_free(f->source);
}

/* Writes @content to a new file @name (mode 0600) beside the state dir;
 * returns its path.  Caller frees. */
static char *
fixture_file(Fixture *f, const char *name, const char *content)
{
    char *path = g_build_filename(f->dir, name, NULL);

    test_put(path, content);
    return path;
}

static char *
fixture_index(Fixture *f)
{
    return g_build_filename(f->state, AV_BITSTREAM_DIR, "index.json", NULL);
}

static void
test_names(void)
{
    const char *compat[][2] = {
        { "10ee:5004", "10ee:5004" }, { "0x10EE:0x5004", "10ee:5004" }, { "8086:bcc0", "8086:bcc0" },
        { "1:2", "0001:0002" }, { "profile:fpga-u250", "profile:fpga-u250" },
        { "10ee", NULL }, { "10ee:", NULL }, { ":5004", NULL }, { "10ee:50045", NULL }, { "1g:0000", NULL },
        { "profile:", NULL }, { "profile:Bad", NULL }, { "10ee:5004:1", NULL }, { "", NULL },
    };

    g_assert_true(av_bitstream_name_is_valid("shell-1.0_x"));
    g_assert_true(av_bitstream_name_is_valid("0"));
    g_assert_false(av_bitstream_name_is_valid(""));
    g_assert_false(av_bitstream_name_is_valid(NULL));
    g_assert_false(av_bitstream_name_is_valid("-x"));
    g_assert_false(av_bitstream_name_is_valid(".x"));
    g_assert_false(av_bitstream_name_is_valid("Upper"));
    g_assert_false(av_bitstream_name_is_valid("a/b"));
    g_assert_false(av_bitstream_name_is_valid("a b"));
    g_assert_true(av_bitstream_name_is_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));   /* 63 */
    g_assert_false(av_bitstream_name_is_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));  /* 64 */
    g_assert_true(av_bitstream_ref_is_valid("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
    g_assert_false(av_bitstream_ref_is_valid("0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"));
    g_assert_false(av_bitstream_ref_is_valid("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg"));
    g_assert_true(av_bitstream_ref_is_valid("name"));
    g_assert_false(av_bitstream_ref_is_valid("../x"));
    for (gsize i = 0; i < G_N_ELEMENTS(compat); i++) {
        g_autofree char *n = av_bitstream_compatible_normalize(compat[i][0]);

        g_assert_cmpstr(n, ==, compat[i][1]);
        g_assert_true(av_bitstream_compatible_is_valid(compat[i][0]) == (compat[i][1] != NULL));
    }
}

static void
test_add_list_remove(Fixture *f, gconstpointer data)
{
    const char *compatible[] = { "0x10EE:0x5004", "profile:fpga", "10ee:5004", NULL };
    g_autofree char *sha = g_compute_checksum_for_string(G_CHECKSUM_SHA256, "bitstream one", -1);
    g_autofree char *libdir = g_build_filename(f->state, AV_BITSTREAM_DIR, NULL);
    g_autofree char *path = NULL;
    g_autofree char *other = fixture_file(f, "other.bin", "bitstream two");
    g_autoptr(AvBitstream) b = NULL;
    g_autoptr(AvBitstream) again = NULL;
    g_autoptr(AvBitstream) found = NULL;
    g_autoptr(GPtrArray) list = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *data_read = NULL;
    struct stat st;

    (void)data;
    /* No library yet: empty, nothing created. */
    g_assert_true(av_bitstream_list(f->state, &list, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(list->len, ==, 0);
    g_clear_pointer(&list, g_ptr_array_unref);
    g_assert_false(g_file_test(libdir, G_FILE_TEST_EXISTS));

    b = av_bitstream_add(f->state, f->source, "shell-a", compatible, "fn:crc32", "the first", &err);
    g_assert_no_error(err);
    g_assert_nonnull(b);
    g_assert_cmpstr(b->sha256, ==, sha);
    g_assert_cmpstr(b->name, ==, "shell-a");
    g_assert_cmpuint(b->size, ==, strlen("bitstream one"));
    g_assert_cmpstr(b->function_id, ==, "fn:crc32");
    g_assert_cmpstr(b->description, ==, "the first");
    g_assert_cmpstr(b->source, ==, f->source);
    g_assert_cmpuint(b->compatible->len, ==, 2);
    g_assert_cmpstr(g_ptr_array_index(b->compatible, 0), ==, "10ee:5004");
    g_assert_cmpstr(g_ptr_array_index(b->compatible, 1), ==, "profile:fpga");
    g_assert_cmpint(b->added, >, 0);

    /* The file: named by its hash, 0600, in a 0700 directory; no leftover. */
    path = av_bitstream_path(f->state, b);
    {
        g_autofree char *tail = g_strdup_printf("/state/bitstreams/%s.bit", sha);

        g_assert_true(g_str_has_suffix(path, tail));
    }
    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 07777, ==, 0600);
    g_assert_true(g_file_get_contents(path, &data_read, NULL, NULL));
    g_assert_cmpstr(data_read, ==, "bitstream one");
    g_assert_cmpint(stat(libdir, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 07777, ==, 0700);
    {
        g_autoptr(GDir) d = g_dir_open(libdir, 0, NULL);
        const char *n;
        guint count = 0;

        while ((n = g_dir_read_name(d))) {
            g_assert_false(strstr(n, ".tmp."));
            count++;
        }
        g_assert_cmpuint(count, ==, 2);
    }

    /* Lookup by name and by hash; a copy, equal. */
    found = av_bitstream_lookup(f->state, "shell-a", &err);
    g_assert_no_error(err);
    g_assert_cmpstr(found->sha256, ==, sha);
    g_assert_cmpstr(found->source, ==, f->source);
    g_clear_pointer(&found, av_bitstream_free);
    found = av_bitstream_lookup(f->state, sha, &err);
    g_assert_no_error(err);
    g_assert_cmpstr(found->name, ==, "shell-a");
    g_clear_pointer(&found, av_bitstream_free);
    g_assert_null(av_bitstream_lookup(f->state, "nope", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(err->message, "accelvirt bitstream list"));
    g_clear_error(&err);
    g_assert_null(av_bitstream_lookup(f->state, "../x", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);

    /* The same content under the same name: no change. */
    again = av_bitstream_add(f->state, f->source, "shell-a", NULL, NULL, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpstr(again->sha256, ==, sha);
    g_assert_cmpint(again->added, ==, b->added);
    g_assert_cmpuint(again->compatible->len, ==, 2);
    /* The same content under another name; another content under the name. */
    g_assert_null(av_bitstream_add(f->state, f->source, "shell-b", NULL, NULL, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_IN_USE);
    g_assert_nonnull(strstr(err->message, "'shell-a'"));
    g_clear_error(&err);
    g_assert_null(av_bitstream_add(f->state, other, "shell-a", NULL, NULL, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_IN_USE);
    g_assert_nonnull(strstr(err->message, "taken"));
    g_clear_error(&err);
    /* Bad arguments. */
    g_assert_null(av_bitstream_add(f->state, other, "Bad Name", NULL, NULL, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    {
        const char *bad[] = { "10ee:5004", "nonsense", NULL };

        g_assert_null(av_bitstream_add(f->state, other, "two", bad, NULL, NULL, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_assert_nonnull(strstr(err->message, "'nonsense'"));
        g_clear_error(&err);
    }
    g_assert_null(av_bitstream_add(f->state, other, "two", NULL, "white space", NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    g_assert_null(av_bitstream_add(f->state, other, "two", NULL, NULL, "bell\a", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);

    /* A second one; listed in name order. */
    g_clear_pointer(&again, av_bitstream_free);
    again = av_bitstream_add(f->state, other, "a-two", NULL, NULL, NULL, &err);
    g_assert_no_error(err);
    g_assert_true(av_bitstream_list(f->state, &list, &err));
    g_assert_cmpuint(list->len, ==, 2);
    g_assert_cmpstr(((AvBitstream *)g_ptr_array_index(list, 0))->name, ==, "a-two");
    g_assert_cmpstr(((AvBitstream *)g_ptr_array_index(list, 1))->name, ==, "shell-a");
    g_assert_null(((AvBitstream *)g_ptr_array_index(list, 0))->function_id);
    g_clear_pointer(&list, g_ptr_array_unref);

    /* Removed by hash: its file and entry go, the other stays. */
    g_assert_true(av_bitstream_remove(f->state, sha, &err));
    g_assert_no_error(err);
    g_assert_cmpint(access(path, F_OK), ==, -1);
    g_assert_true(av_bitstream_list(f->state, &list, &err));
    g_assert_cmpuint(list->len, ==, 1);
    g_assert_false(av_bitstream_remove(f->state, "shell-a", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_clear_error(&err);
    g_assert_true(av_bitstream_remove(f->state, "a-two", &err));
    g_clear_pointer(&list, g_ptr_array_unref);
    g_assert_true(av_bitstream_list(f->state, &list, &err));
    g_assert_cmpuint(list->len, ==, 0);
}

static void
test_source_untrusted(Fixture *f, gconstpointer data)
{
    g_autofree char *empty = fixture_file(f, "empty.bin", "");
    g_autoptr(GError) err = NULL;
    struct passwd *nobody = getpwnam("nobody");

    (void)data;
    /* Writable by others. */
    g_assert_cmpint(chmod(f->source, 0666), ==, 0);
    g_assert_null(av_bitstream_add(f->state, f->source, "x", NULL, NULL, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_clear_error(&err);
    g_assert_cmpint(chmod(f->source, 0600), ==, 0);
    /* Owned by another user (we are root or the test's user). */
    if (nobody && geteuid() == 0) {
        g_assert_cmpint(chown(f->source, nobody->pw_uid, nobody->pw_gid), ==, 0);
        g_assert_null(av_bitstream_add(f->state, f->source, "x", NULL, NULL, NULL, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
        g_clear_error(&err);
        g_assert_cmpint(chown(f->source, 0, 0), ==, 0);
    }
    /* Empty, missing, a directory. */
    g_assert_null(av_bitstream_add(f->state, empty, "x", NULL, NULL, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    g_assert_null(av_bitstream_add(f->state, "/nonexistent/image.bin", "x", NULL, NULL, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_clear_error(&err);
    g_assert_null(av_bitstream_add(f->state, f->state, "x", NULL, NULL, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    /* Nothing was added by any of them. */
    {
        g_autoptr(GPtrArray) list = NULL;

        g_assert_true(av_bitstream_list(f->state, &list, &err));
        g_assert_cmpuint(list->len, ==, 0);
    }
}

static void
test_fits(void)
{
    g_autoptr(AvBitstream) b = g_new0(AvBitstream, 1);

    b->sha256 = g_strdup("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    b->name = g_strdup("x");
    b->compatible = g_ptr_array_new_with_free_func(g_free);
    g_assert_true(av_bitstream_fits(b, "any", 0x1234, 0x5678));
    g_ptr_array_add(b->compatible, g_strdup("10ee:5004"));
    g_ptr_array_add(b->compatible, g_strdup("profile:fpga-u250"));
    g_assert_true(av_bitstream_fits(b, "other", 0x10ee, 0x5004));
    g_assert_true(av_bitstream_fits(b, "fpga-u250", 0x1234, 0x5678));
    g_assert_false(av_bitstream_fits(b, "fpga-u25", 0x10ee, 0x5005));
    g_assert_false(av_bitstream_fits(b, "fpga-u2500", 0x5004, 0x10ee));
    g_assert_false(av_bitstream_fits(b, NULL, 0x10ee, 0x5000));
}

static void
test_check_tamper(Fixture *f, gconstpointer data)
{
    g_autoptr(AvBitstream) b = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *path = NULL;
    g_autofree char *elsewhere = fixture_file(f, "elsewhere.bin", "bitstream one");

    (void)data;
    b = av_bitstream_add(f->state, f->source, "shell", NULL, NULL, NULL, &err);
    g_assert_no_error(err);
    path = av_bitstream_path(f->state, b);
    g_assert_true(av_bitstream_check(f->state, b, &err));
    g_assert_no_error(err);

    /* The source may change after the add: the library has its own copy. */
    test_put(f->source, "changed");
    g_assert_true(av_bitstream_check(f->state, b, &err));

    /* Same size, other bytes. */
    test_put(path, "bitstream 0ne");
    g_assert_false(av_bitstream_check(f->state, b, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
    g_assert_nonnull(strstr(err->message, "does not hash"));
    g_clear_error(&err);
    /* Another size. */
    test_put(path, "bitstream one!");
    g_assert_false(av_bitstream_check(f->state, b, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
    g_clear_error(&err);
    /* The right bytes, writable by others. */
    test_put(path, "bitstream one");
    g_assert_true(av_bitstream_check(f->state, b, &err));
    g_assert_cmpint(chmod(path, 0666), ==, 0);
    g_assert_false(av_bitstream_check(f->state, b, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_clear_error(&err);
    g_assert_cmpint(chmod(path, 0600), ==, 0);
    /* A symbolic link to a file of the right bytes. */
    g_assert_cmpint(unlink(path), ==, 0);
    g_assert_cmpint(symlink(elsewhere, path), ==, 0);
    g_assert_false(av_bitstream_check(f->state, b, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
    g_clear_error(&err);
    /* Missing. */
    g_assert_cmpint(unlink(path), ==, 0);
    g_assert_false(av_bitstream_check(f->state, b, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
    g_clear_error(&err);
    /* Its entry may still be removed. */
    g_assert_true(av_bitstream_remove(f->state, "shell", &err));
    g_assert_no_error(err);
}

static void
test_hostile_index(Fixture *f, gconstpointer data)
{
    const char *sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    g_autofree char *index = fixture_index(f);
    g_autofree char *libdir = g_build_filename(f->state, AV_BITSTREAM_DIR, NULL);
    g_autofree char *good = g_strdup_printf("{\"bitstreams\": [{\"sha256\": \"%s\", \"name\": \"ok\", \"size\": 3, "
                                            "\"added\": 1, \"compatible\": [], \"function_id\": null, "
                                            "\"description\": null, \"source\": \"/x\"}]}", sha);
    char *bad[] = {
        g_strdup("{"),
        g_strdup("[]"),
        g_strdup("{\"bitstreams\": {}}"),
        g_strdup("{\"bitstreams\": [], \"more\": 1}"),
        g_strdup("{\"bitstreams\": [1]}"),
        g_strdup_printf("{\"bitstreams\": [{\"sha256\": \"%s\", \"name\": \"../etc\", \"size\": 3, \"added\": 1}]}",
                        sha),
        g_strdup_printf("{\"bitstreams\": [{\"sha256\": \"../../x\", \"name\": \"ok\", \"size\": 3, \"added\": 1}]}"),
        g_strdup_printf("{\"bitstreams\": [{\"sha256\": \"%.63sA\", \"name\": \"ok\", \"size\": 3, \"added\": 1}]}",
                        sha),
        g_strdup_printf("{\"bitstreams\": [{\"sha256\": \"%s\", \"name\": \"ok\", \"size\": 0, \"added\": 1}]}", sha),
        g_strdup_printf("{\"bitstreams\": [{\"sha256\": \"%s\", \"name\": \"ok\", \"size\": \"3\", \"added\": 1}]}",
                        sha),
        g_strdup_printf("{\"bitstreams\": [{\"sha256\": \"%s\", \"name\": \"ok\", \"size\": 3, \"added\": 1, "
                        "\"compatible\": [\"0x10EE:5004\"]}]}", sha),
        g_strdup_printf("{\"bitstreams\": [{\"sha256\": \"%s\", \"name\": \"ok\", \"size\": 3, \"added\": 1, "
                        "\"function_id\": \"a b\"}]}", sha),
        g_strdup_printf("{\"bitstreams\": [{\"sha256\": \"%s\", \"name\": \"ok\", \"size\": 3, \"added\": 1, "
                        "\"description\": \"\\u001b[2J\"}]}", sha),
        g_strdup_printf("{\"bitstreams\": [{\"sha256\": \"%s\", \"name\": \"ok\", \"size\": 3, \"added\": 1, "
                        "\"unknown\": 1}]}", sha),
        g_strdup_printf("{\"bitstreams\": [{\"sha256\": \"%s\", \"name\": \"ok\", \"size\": 3, \"added\": 1}, "
                        "{\"sha256\": \"%s\", \"name\": \"ok2\", \"size\": 3, \"added\": 1}]}", sha, sha),
        g_strdup_printf("{\"bitstreams\": [{\"sha256\": \"%s\", \"name\": \"ok\", \"size\": 3, \"added\": 1}, "
                        "{\"sha256\": \"%.63s0\", \"name\": \"ok\", \"size\": 3, \"added\": 1}]}", sha, sha),
    };
    g_autoptr(GError) err = NULL;
    g_autoptr(GPtrArray) list = NULL;
    g_autofree char *bitfile = g_strdup_printf("%s/%s.bit", libdir, sha);
    g_autofree char *target = fixture_file(f, "target.json", good);

    (void)data;
    g_assert_cmpint(g_mkdir(libdir, 0700), ==, 0);
    g_assert_true(g_file_set_contents(index, good, -1, NULL));
    g_assert_true(av_bitstream_list(f->state, &list, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(list->len, ==, 1);
    g_clear_pointer(&list, g_ptr_array_unref);

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_test_message("index %zu: %s", i, bad[i]);
        g_assert_true(g_file_set_contents(index, bad[i], -1, NULL));
        g_assert_false(av_bitstream_list(f->state, &list, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
        g_assert_nonnull(strstr(err->message, index));
        g_clear_error(&err);
        /* Every user of the index refuses alike, and changes nothing. */
        g_assert_null(av_bitstream_lookup(f->state, "ok", &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
        g_clear_error(&err);
        g_assert_null(av_bitstream_add(f->state, f->source, "new", NULL, NULL, NULL, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
        g_clear_error(&err);
        g_assert_false(av_bitstream_remove(f->state, "ok", &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
        g_clear_error(&err);
        {
            g_autofree char *now = NULL;

            g_assert_true(g_file_get_contents(index, &now, NULL, NULL));
            g_assert_cmpstr(now, ==, bad[i]);
        }
        g_free(bad[i]);
    }

    /* The index a symbolic link (to a good index). */
    g_assert_cmpint(unlink(index), ==, 0);
    g_assert_cmpint(symlink(target, index), ==, 0);
    g_assert_false(av_bitstream_list(f->state, &list, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
    g_assert_nonnull(strstr(err->message, "symbolic link"));
    g_clear_error(&err);
    g_assert_cmpint(unlink(index), ==, 0);

    /* An entry's file a symbolic link. */
    g_assert_true(g_file_set_contents(index, good, -1, NULL));
    g_assert_cmpint(symlink(target, bitfile), ==, 0);
    g_assert_false(av_bitstream_list(f->state, &list, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
    g_assert_nonnull(strstr(err->message, index));
    g_clear_error(&err);
    g_assert_cmpint(unlink(bitfile), ==, 0);

    /* The library directory writable by others, or a symbolic link. */
    g_assert_cmpint(chmod(libdir, 0777), ==, 0);
    g_assert_false(av_bitstream_list(f->state, &list, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_clear_error(&err);
    g_assert_cmpint(chmod(libdir, 0700), ==, 0);
    {
        g_autofree char *moved = g_build_filename(f->dir, "lib-elsewhere", NULL);

        g_assert_cmpint(rename(libdir, moved), ==, 0);
        g_assert_cmpint(symlink(moved, libdir), ==, 0);
        g_assert_false(av_bitstream_list(f->state, &list, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
        g_clear_error(&err);
        g_assert_null(av_bitstream_add(f->state, f->source, "new", NULL, NULL, NULL, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
        g_clear_error(&err);
    }
}

static void
test_in_use(Fixture *f, gconstpointer data)
{
    g_autoptr(AvBitstream) b = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvPolicy) policy = g_new0(AvPolicy, 1);
    g_autoptr(GError) err = NULL;
    AvProfile *profile = g_new0(AvProfile, 1);
    AvPoolPlacement *record = g_new0(AvPoolPlacement, 1);
    AvPlacedItem *item = g_new0(AvPlacedItem, 1);
    AvPoolDevice *dev;
    char *why;

    (void)data;
    b = av_bitstream_add(f->state, f->source, "shell", NULL, NULL, NULL, &err);
    g_assert_no_error(err);
    pool = av_pool_open(f->state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    policy->profiles = g_ptr_array_new_with_free_func((GDestroyNotify)av_profile_free);
    profile->name = g_strdup("fpga");
    profile->program = g_new0(AvProgram, 1);
    g_ptr_array_add(policy->profiles, profile);
    g_assert_null(av_bitstream_in_use(pool, policy, b));
    g_assert_null(av_bitstream_in_use(NULL, NULL, b));

    /* A profile's base, by name, then by hash. */
    profile->program->base = g_strdup("shell");
    why = av_bitstream_in_use(pool, policy, b);
    g_assert_nonnull(strstr(why, "profile 'fpga'"));
    g_free(why);
    g_free(profile->program->base);
    profile->program->base = g_strdup(b->sha256);
    why = av_bitstream_in_use(pool, policy, b);
    g_assert_nonnull(strstr(why, "profile 'fpga'"));
    g_free(why);
    g_clear_pointer(&profile->program->base, g_free);

    /* A placement record with an item that must hold it. */
    record->domain_uuid = g_strdup("11111111-2222-3333-4444-555555555555");
    record->domain_name = g_strdup("vm1");
    record->requests = g_ptr_array_new_with_free_func((GDestroyNotify)av_request_free);
    record->items = g_ptr_array_new_with_free_func((GDestroyNotify)av_placed_item_free);
    item->bitstream = g_strdup(b->sha256);
    g_ptr_array_add(record->items, item);
    g_ptr_array_add(pool->placements, record);
    why = av_bitstream_in_use(pool, policy, b);
    g_assert_nonnull(strstr(why, "domain 'vm1'"));
    g_free(why);
    g_ptr_array_remove(pool->placements, record);

    /* A device recorded holding it. */
    dev = av_pool_add(pool, AV_DEVICE_KIND_PCI, "pci:10ee:5004:10ee:000e@slot:1.f0", "0000:3b:00.0", "fpga",
                      AV_DEVICE_STATE_FREE, NULL, &err);
    g_assert_no_error(err);
    g_assert_true(av_pool_set_programmed(pool, dev, av_programmed_new(b->sha256, b->name, "operator", "test"), NULL,
                                         &err));
    why = av_bitstream_in_use(pool, policy, b);
    g_assert_nonnull(strstr(why, "0000:3b:00.0"));
    g_free(why);
    g_assert_true(av_pool_set_programmed(pool, dev, NULL, "test", &err));
    g_assert_null(av_bitstream_in_use(pool, policy, b));
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);

    g_test_add_func("/bitstream/names", test_names);
    g_test_add_func("/bitstream/fits", test_fits);
    g_test_add("/bitstream/add-list-remove", Fixture, NULL, fixture_set_up, test_add_list_remove, fixture_tear_down);
    g_test_add("/bitstream/source-untrusted", Fixture, NULL, fixture_set_up, test_source_untrusted,
               fixture_tear_down);
    g_test_add("/bitstream/check-tamper", Fixture, NULL, fixture_set_up, test_check_tamper, fixture_tear_down);
    g_test_add("/bitstream/hostile-index", Fixture, NULL, fixture_set_up, test_hostile_index, fixture_tear_down);
    g_test_add("/bitstream/in-use", Fixture, NULL, fixture_set_up, test_in_use, fixture_tear_down);
    return g_test_run();
}
