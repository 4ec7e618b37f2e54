/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: the journal's reader (lines forward in bounded memory,
 * across blocks, from an offset, up to a limit) and the verify built on it
 * (a limit, progress, lines no writer writes). */
#include "config.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "av-test.h"
#include "journal/av-journal.h"
#include "util/av-error.h"

/* Writes @len bytes at @data as the journal of @dir. */
static char *
test_write_journal(const char *dir, const char *data, gsize len)
{
    char *path = g_build_filename(dir, AV_JOURNAL_FILE, NULL);
    g_autoptr(GError) err = NULL;

    g_assert_true(g_file_set_contents(path, data, (gssize)len, &err));
    return path;
}

/* Lines of many sizes, some longer than a block of the reader, come back
 * whole, numbered, with their offsets; a last line without a newline comes
 * back not ended. */
static void
test_reader_lines(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autoptr(GString) data = g_string_new(NULL);
    g_autoptr(GPtrArray) want = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GArray) offsets = g_array_new(FALSE, FALSE, sizeof(goffset));
    g_autoptr(AvJournalReader) reader = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *path = NULL;
    const gsize sizes[] = { 0, 1, 100, 4095, 4096, 1024 * 1024 - 1, 1024 * 1024, 1024 * 1024 + 1, 3 * 1024 * 1024,
                            7, 0, 2 * 1024 * 1024 + 13 };
    AvJournalLine line;
    guint n = 0;

    for (guint i = 0; i < G_N_ELEMENTS(sizes); i++) {
        char *s = g_malloc(sizes[i] + 1);

        for (gsize k = 0; k < sizes[i]; k++)
            s[k] = (char)('a' + (i + k) % 26);
        s[sizes[i]] = '\0';
        g_array_append_val(offsets, data->len);
        g_string_append_len(data, s, (gssize)sizes[i]);
        if (i + 1 < G_N_ELEMENTS(sizes))
            g_string_append_c(data, '\n');
        g_ptr_array_add(want, s);
    }
    path = test_write_journal(dir, data->str, data->len);
    g_assert_cmpint(av_journal_reader_open(path, 0, -1, &reader, &err), ==, 1);
    while (av_journal_reader_next(reader, &line, &err) > 0) {
        const char *w = g_ptr_array_index(want, n);

        g_assert_cmpuint(line.number, ==, n + 1);
        g_assert_cmpint(line.offset, ==, g_array_index(offsets, goffset, n));
        g_assert_cmpuint(line.len, ==, strlen(w));
        g_assert_nonnull(line.data);
        g_assert_true(memcmp(line.data, w, line.len) == 0 && line.data[line.len] == '\0');
        g_assert_false(line.nul);
        g_assert_true(line.ended == (n + 1 < G_N_ELEMENTS(sizes)));
        n++;
    }
    g_assert_no_error(err);
    g_assert_cmpuint(n, ==, G_N_ELEMENTS(sizes));
    g_assert_cmpint(av_journal_reader_offset(reader), ==, (goffset)data->len);

    /* From an offset (the start of the fourth line) up to a limit inside
     * the sixth: the sixth comes back cut, not ended. */
    g_clear_pointer(&reader, av_journal_reader_free);
    g_assert_cmpint(av_journal_reader_open(path, g_array_index(offsets, goffset, 3),
                                           g_array_index(offsets, goffset, 5) + 10, &reader, &err), ==, 1);
    g_assert_cmpint(av_journal_reader_next(reader, &line, &err), ==, 1);
    g_assert_cmpuint(line.len, ==, sizes[3]);
    g_assert_cmpint(line.offset, ==, g_array_index(offsets, goffset, 3));
    g_assert_cmpint(av_journal_reader_next(reader, &line, &err), ==, 1);
    g_assert_cmpuint(line.len, ==, sizes[4]);
    g_assert_cmpint(av_journal_reader_next(reader, &line, &err), ==, 1);
    g_assert_cmpuint(line.len, ==, 10);
    g_assert_false(line.ended);
    g_assert_cmpint(av_journal_reader_next(reader, &line, &err), ==, 0);

    /* An offset beyond the end is refused. */
    g_clear_pointer(&reader, av_journal_reader_free);
    g_assert_cmpint(av_journal_reader_open(path, (goffset)data->len + 1, -1, &reader, &err), ==, -1);
    g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
    av_test_tmpdir_remove(dir);
}

/* A line longer than any writer writes (with a NUL byte in the part that
 * is dropped) is reported by its length without its bytes; the line after
 * it comes back whole. */
static void
test_reader_long_line(void)
{
    g_autofree char *dir = av_test_tmpdir();
    gsize big = AV_JOURNAL_MAX_LINE + 3 * 1024 * 1024 + 5;
    g_autofree char *data = g_malloc(big + 16);
    g_autoptr(AvJournalReader) reader = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *path = NULL;
    AvJournalLine line;

    memset(data, 'x', big);
    data[1000] = '\0';
    memcpy(data + big, "\nafter\n", 7);
    path = test_write_journal(dir, data, big + 7);
    g_assert_cmpint(av_journal_reader_open(path, 0, -1, &reader, &err), ==, 1);
    g_assert_cmpint(av_journal_reader_next(reader, &line, &err), ==, 1);
    g_assert_null(line.data);
    g_assert_cmpuint(line.len, ==, big);
    g_assert_true(line.nul && line.ended);
    g_assert_cmpint(av_journal_reader_next(reader, &line, &err), ==, 1);
    g_assert_cmpstr(line.data, ==, "after");
    g_assert_cmpuint(line.number, ==, 2);
    g_assert_cmpint(line.offset, ==, (goffset)big + 1);
    g_assert_false(line.nul);
    g_assert_cmpint(av_journal_reader_next(reader, &line, &err), ==, 0);

    /* verify names it; without its newline it is a torn last line. */
    g_assert_false(av_journal_verify(dir, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
    g_assert_nonnull(strstr(err->message, "at line 1: the line holds a NUL byte"));
    g_clear_error(&err);
    data[1000] = 'x';
    g_free(test_write_journal(dir, data, big + 7));
    g_assert_false(av_journal_verify(dir, NULL, &err));
    g_assert_nonnull(strstr(err->message, "at line 1: the line is longer than"));
    g_clear_error(&err);
    g_free(test_write_journal(dir, data, big));
    g_assert_false(av_journal_verify(dir, NULL, &err));
    g_assert_nonnull(strstr(err->message, "at line 1: the last line is torn"));
    av_test_tmpdir_remove(dir);
}

/* A FIFO in the journal's place is refused at once, never read. */
static void
test_reader_fifo(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *path = g_build_filename(dir, AV_JOURNAL_FILE, NULL);
    g_autoptr(AvJournalReader) reader = NULL;
    g_autoptr(GError) err = NULL;

    g_assert_cmpint(mkfifo(path, 0600), ==, 0);
    g_assert_cmpint(av_journal_reader_open(path, 0, -1, &reader, &err), ==, -1);
    g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
    g_clear_error(&err);
    g_assert_false(av_journal_verify(dir, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
    av_test_tmpdir_remove(dir);
}

/* A journal cut while it is read (writers only append) is an error, never
 * a shorter verdict. */
static void
test_reader_shrunk(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *data = g_malloc(3 * 1024 * 1024);
    g_autofree char *path = NULL;
    g_autoptr(AvJournalReader) reader = NULL;
    g_autoptr(GError) err = NULL;
    AvJournalLine line;
    int r;

    for (gsize i = 0; i < 3 * 1024 * 1024; i++)
        data[i] = i % 100 == 99 ? '\n' : 'x';
    path = test_write_journal(dir, data, 3 * 1024 * 1024);
    g_assert_cmpint(av_journal_reader_open(path, 0, -1, &reader, &err), ==, 1);
    g_assert_cmpint(av_journal_reader_next(reader, &line, &err), ==, 1);
    g_assert_cmpint(truncate(path, 1024 * 1024 + 500), ==, 0);
    while ((r = av_journal_reader_next(reader, &line, &err)) > 0)
        ;
    g_assert_cmpint(r, ==, -1);
    g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
    g_assert_nonnull(strstr(err->message, "shrank while it was read"));
    av_test_tmpdir_remove(dir);
}

static void
test_progress(goffset done, goffset total, guint64 entries, gpointer data)
{
    goffset *last = data;

    g_assert_cmpint(done, >=, *last);
    g_assert_cmpint(done, <=, total);
    *last = done;
    (void)entries;
}

/* A chain of entries verifies up to a limit whatever was appended after
 * it (a torn line a writer is still writing), with progress told up to
 * the limit; the whole of it does not. */
static void
test_verify_limit(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autoptr(GString) data = g_string_new(NULL);
    g_autoptr(GError) err = NULL;
    g_autofree char *prev = g_strdup("");
    goffset limit, last = 0;
    guint64 entries = 0;

    /* Over 8 MiB, so that progress is told before the end too. */
    for (guint seq = 1; seq <= 40000; seq++) {
        g_autofree char *line = g_strdup_printf("{\"seq\":%u,\"time\":\"2026-11-29T00:00:00Z\",\"prev\":\"%s\","
                                                "\"event\":\"note\",\"pad\":\"%0200u\"}", seq, prev, seq);

        g_free(prev);
        prev = av_journal_hash(line, strlen(line));
        g_string_append_printf(data, "%s\n", line);
    }
    limit = (goffset)data->len;
    g_string_append(data, "{\"seq\":40001,\"ti");
    g_free(test_write_journal(dir, data->str, data->len));
    g_assert_true(av_journal_verify_part(dir, limit, test_progress, &last, &entries, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(entries, ==, 40000);
    g_assert_cmpint(last, ==, limit);
    g_assert_false(av_journal_verify(dir, NULL, &err));
    g_assert_nonnull(strstr(err->message, "at line 40001: the last line is torn"));
    av_test_tmpdir_remove(dir);
}

/* A writer beside archived segments: a journal.jsonl emptied or removed
 * must not start again from seq 1 (it would hide the segments from every
 * reader); a torn line is numbered after the archived lines, found from
 * the segments' names, and a stray file in journal.d stops no writer. */
static void
test_writer_segments(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *segdir = g_build_filename(dir, AV_JOURNAL_SEGMENT_DIR, NULL);
    g_autofree char *seg = g_build_filename(segdir, "journal-000000000001-000000000003.lines-1-3.bytes-0+300.jsonl.gz",
                                            NULL);
    g_autofree char *stray = g_build_filename(segdir, "README", NULL);
    g_autofree char *path = NULL;
    g_autofree char *data = NULL;
    g_autoptr(GError) err = NULL;
    AvJournal j;

    g_assert_cmpint(mkdir(segdir, 0700), ==, 0);
    g_assert_true(g_file_set_contents(seg, "", 0, &err));
    /* Missing, then empty. */
    for (int round = 0; round < 2; round++) {
        if (round == 1)
            g_free(test_write_journal(dir, "", 0));
        av_journal_init(&j, dir);
        g_assert_false(av_journal_append(&j, "note", NULL, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
        g_assert_nonnull(strstr(err->message, "is missing or empty"));
        g_clear_error(&err);
        av_journal_clear(&j);
    }
    g_assert_true(g_file_set_contents(stray, "notes", -1, &err));
    path = test_write_journal(dir, "{\"seq\":4,\"time\":\"2026-11-29T00:00:00Z\",\"prev\":\"x\",\"event\":\"note\"}\n"
                              "{\"seq\":5,\"ti", 78);
    av_journal_init(&j, dir);
    g_assert_true(av_journal_append(&j, "note", NULL, &err));
    g_assert_no_error(err);
    av_journal_clear(&j);
    g_assert_true(g_file_get_contents(path, &data, NULL, &err));
    g_assert_nonnull(strstr(data, "\"event\":\"torn-line\",\"line\":5,"));
    av_test_tmpdir_remove(dir);
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);
    g_test_add_func("/journal/reader/lines", test_reader_lines);
    g_test_add_func("/journal/reader/long-line", test_reader_long_line);
    g_test_add_func("/journal/reader/fifo", test_reader_fifo);
    g_test_add_func("/journal/reader/shrunk", test_reader_shrunk);
    g_test_add_func("/journal/verify/limit", test_verify_limit);
    g_test_add_func("/journal/writer/segments", test_writer_segments);
    return g_test_run();
}
