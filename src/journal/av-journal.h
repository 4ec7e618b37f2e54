/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the journal, the record of everything done to the pool's
 * devices: append-only JSON lines in journal.jsonl of the state dir, each
 * one fsynced and carrying a sequence number and the SHA-256 of the line
 * before, so that the chain can be verified.
 *
 * The pool (pool/av-pool.h) appends to it under its exclusive lock, before
 * it saves what the entry describes; the ledger (ledger/av-accounting.h)
 * and `accelvirt journal` read it.  Nothing here takes a lock: a writer
 * must hold the pool's exclusive lock, since the chain is only safe with
 * one writer at a time.
 *
 * A journal line left torn by a writer killed mid-append is never deleted
 * (it is evidence): the next writer ends it with a newline and, when it is
 * not a whole entry, appends a "torn-line" entry naming its line number, its
 * length and its SHA-256 (the "prev" of that entry is the hash of the torn
 * bytes, so the chain covers them).  A writer killed while it wrote that
 * entry leaves a second torn line: the run of torn lines is acknowledged by
 * one entry ("line": the first of the run, "lines": how many, "sha256s":
 * each one's hash).  av_journal_verify() reports a torn last line (no
 * newline at its end) and bad lines not followed by the "torn-line" entry
 * acknowledging exactly them as errors, and accepts acknowledged torn lines. */
#pragma once

#include <gio/gio.h>
#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

#define AV_JOURNAL_FILE "journal.jsonl"

/* The writer's view of the journal: where it is and its tail. */
typedef struct {
    char *path;                  /* state_dir/journal.jsonl */
    gboolean ready;              /* the tail was read (av_journal_prepare()) */
    guint64 seq;                 /* seq of the last entry, 0 for none */
    char *prev;                  /* hex SHA-256 of the last line, "" for none */
    gboolean defer_sync;         /* appends leave their fsync to a later one (av_journal_append()) */
    gboolean unsynced;           /* a line was written whose fsync is still to come */
} AvJournal;

/* Sets up @journal for the journal of @state_dir, not yet read. */
void av_journal_init(AvJournal *journal, const char *state_dir);

/* Frees what @journal holds. */
void av_journal_clear(AvJournal *journal);

/* Makes @journal ready for appending, once: reads its tail (the last seq
 * and the hash of the last line), ends a torn last line and records it.
 * AV_ERROR_CORRUPT_STATE when no entry can be appended (not a regular file,
 * NUL bytes or a line over 16 MiB at its end).  A writer's av_pool_open()
 * calls it, so that a journal that cannot take an entry stops a writer
 * before it changes anything (the hook: before it binds a device).  The
 * caller holds the pool's exclusive lock. */
gboolean av_journal_prepare(AvJournal *journal, GError **error);

/* Appends an entry: @event plus the members of @fields (borrowed, a JSON
 * object or NULL; it may not carry "seq", "time", "prev" or "event"),
 * fsynced before this returns, with every line before it.  While
 * @journal->defer_sync is set the line is written but not fsynced
 * (@journal->unsynced then says so): the caller makes it durable with the
 * next append that syncs, or av_journal_sync(), before anything that relies
 * on it (a save of the pool it describes) and before it lets the lock go.
 * The caller holds the pool's exclusive lock. */
gboolean av_journal_append(AvJournal *journal, const char *event, json_t *fields, GError **error);

/* fsyncs the journal when a line written with defer_sync is not durable
 * yet; TRUE at once otherwise.  The caller holds the pool's exclusive
 * lock. */
gboolean av_journal_sync(AvJournal *journal, GError **error);

/* The line of the journal open as @fd that ends at @end (the offset of
 * its newline, or of the end of a last line without one): *ret_start its
 * first byte, *ret_line its bytes NUL-terminated (caller frees), *ret_len
 * their number.  Returns 0 or -errno: -EFBIG for a line longer than
 * AV_JOURNAL_MAX_LINE.  Read backwards to find its start, then once. */
int av_journal_read_line_ending(int fd, goffset end, goffset *ret_start, char **ret_line, gsize *ret_len);

/* The hex SHA-256 of @len bytes at @data.  Caller frees. */
char *av_journal_hash(const char *data, gsize len);

/* Reads the entries of the journal in @state_dir, oldest first, into
 * *ret_entries (json_t*, caller frees; empty without a journal); torn lines
 * are left out.  Does not check the chain (av_journal_verify() does).
 * FALSE with AV_ERROR_CORRUPT_STATE (not a regular file, a NUL byte) or
 * AV_ERROR_IO. */
gboolean av_journal_read(const char *state_dir, GPtrArray **ret_entries, GError **error);

/* Called by av_journal_foreach() with each entry (borrowed); FALSE stops. */
typedef gboolean (*AvJournalEach)(json_t *entry, gpointer data);

/* Hands each whole entry of the journal in @state_dir to @each, oldest
 * first, reading its first @limit bytes (all when negative) in bounded
 * memory; torn lines are left out, the chain is not checked.  TRUE
 * without a journal.  FALSE as av_journal_read() says, after the entries
 * before a line with a NUL byte were handed on. */
gboolean av_journal_foreach(const char *state_dir, goffset limit, AvJournalEach each, gpointer data,
                            GError **error);

/* Checks the hash chain and sequence of the journal in @state_dir.  Returns
 * FALSE with an error naming the first bad line. */
gboolean av_journal_verify(const char *state_dir, guint64 *ret_entries, GError **error);

/* Told, every few megabytes and once at the end, how far a verify is:
 * @done of @total bytes, @entries whole entries so far. */
typedef void (*AvJournalProgress)(goffset done, goffset total, guint64 entries, gpointer data);

/* av_journal_verify() of the journal's first @limit bytes (all of it when
 * negative), telling @progress (may be NULL) how far it is.  It holds one
 * block and one line at a time, whatever the journal's size.  A reader
 * that reads only up to the size the journal had under the pool's lock
 * needs no lock while it verifies: what a journal holds is never changed,
 * only appended to. */
gboolean av_journal_verify_part(const char *state_dir, goffset limit, AvJournalProgress progress, gpointer data,
                                guint64 *ret_entries, GError **error);

/* Where a verify starts: byte @offset (the start of a line), which is line
 * @line of the journal, whose first entry must have seq @seq and carry
 * @prev, the hex SHA-256 of the line before ("" at the start). */
typedef struct {
    goffset offset;
    guint64 line;
    guint64 seq;
    const char *prev;
} AvJournalFrom;

/* av_journal_verify_part() from @from instead of the journal's start:
 * `journal verify --since-checkpoint`, from a checkpoint the caller has
 * checked (its line hashes to what the checkpoint says). */
gboolean av_journal_verify_from(const char *state_dir, const AvJournalFrom *from, goffset limit,
                                AvJournalProgress progress, gpointer data, guint64 *ret_entries, GError **error);

/* The size of the journal in @state_dir in bytes, 0 without one: its
 * archived segments' bytes and the live file's (offsets in the journal
 * are counted as if it had never been cut, see below). */
gboolean av_journal_size(const char *state_dir, goffset *ret_size, GError **error);

/* The journal's layout.  `accelvirt journal archive` moves old entries out
 * of journal.jsonl into compressed segments in journal.d/ of the state dir
 * (av-journal-archive.h); the journal is the segments, oldest first, then
 * journal.jsonl.  Offsets and line numbers are the journal's, as if it had
 * never been cut: an archive changes none (a checkpoint's at_offset, a
 * torn-line entry's line stay true).  A reader opens journal.jsonl first,
 * then lists the segments: the live file it holds tells which of them
 * come before it (its first entry's seq follows the last one's, or, after
 * an archive stopped between its segment and its cut, is a segment's
 * first, whose bytes the live file then still holds). */
#define AV_JOURNAL_SEGMENT_DIR "journal.d"

/* No journal offset is larger (a segment's name saying more is refused). */
#define AV_JOURNAL_MAX_OFFSET ((goffset)1 << 60)

/* One archived segment, as its name says. */
typedef struct {
    guint64 first_seq, last_seq;     /* its first and last entries */
    guint64 first_line, last_line;   /* its first and last lines (torn lines count) */
    goffset offset, length;          /* where its bytes are in the journal, uncompressed */
} AvJournalSegment;

/* Its file name: journal-FIRSTSEQ-LASTSEQ.lines-FIRST-LAST.bytes-OFFSET+LENGTH.jsonl.gz
 * (the seqs zero-padded to 12 digits, so that ls sorts them).  Caller frees. */
char *av_journal_segment_name(const AvJournalSegment *seg);

/* Parses a segment's file name, only in the spelling av_journal_segment_name()
 * writes; FALSE for anything else. */
gboolean av_journal_segment_parse(const char *name, AvJournalSegment *ret);

typedef struct {
    char *dir;                       /* state_dir/journal.d */
    GArray *segments;                /* AvJournalSegment, those before the live file, oldest first */
    guint pending;                   /* segments after them that the live file still holds */
    AvJournalSegment pending_last;   /* the last of those, when there are */
    goffset live_offset;             /* where the live file starts in the journal */
    guint64 live_line;               /* the number of its first line */
} AvJournalLayout;

/* Reads the layout of the journal of @state_dir, whose live file is open as
 * @live_fd (-1 when there is none).  Returns 0, or -1 with
 * AV_ERROR_CORRUPT_STATE when the segments do not follow each other from
 * the journal's start (one missing, renamed, a stray file) or the live
 * file follows none of them, or AV_ERROR_IO. */
int av_journal_layout_load(const char *state_dir, int live_fd, AvJournalLayout *ret, GError **error);
void av_journal_layout_clear(AvJournalLayout *layout);

/* The segment file @path, uncompressed as it is read (a GInputStream;
 * GIO is linked by the readers only, never by the hook): opened without
 * following a link, a regular file only.  NULL with *ret_why.  In
 * av-journal-reader.c. */
GInputStream *av_journal_segment_stream(const char *path, const char **ret_why);

/* The number of the live file's first line, for a writer that numbers a
 * torn line: from the segment it follows (or, after an archive stopped
 * before its cut, starts with), found by name only; 1 without segments.
 * FALSE when journal.d holds segments none of which it follows (moved
 * away): *ret_line is 1 then.  Never fails on a stray file: a writer is not
 * stopped by what an operator put in journal.d. */
gboolean av_journal_live_first_line(const char *state_dir, int live_fd, guint64 *ret_line);

/* Whether journal.d in @state_dir holds anything but an archive's own
 * dot files. */
gboolean av_journal_has_segments(const char *state_dir);

/* The number of archived segments a reader reads before journal.jsonl. */
gboolean av_journal_archived_segments(const char *state_dir, guint *ret_count, GError **error);

/* Every segment of journal.d in @state_dir, oldest first (an archive's
 * temporary files aside), checked to follow each other from the journal's
 * start, as av_journal_layout_load() says. */
int av_journal_segments_list(const char *state_dir, GArray **ret_segments, GError **error);

/* The seq of @len bytes at @line when they are a whole journal entry (a
 * JSON object with a "seq" from 1, a "time", a "prev" and an "event"), and
 * the entry in *ret_entry (may be NULL; caller frees). */
gboolean av_journal_entry_parse(const char *line, gsize len, json_t **ret_entry, guint64 *ret_seq);
gboolean av_journal_entry_seq(const char *line, gsize len, guint64 *ret_seq);

/* The longest line a writer writes (entries are a few hundred bytes); a
 * longer one is never held by a reader. */
#define AV_JOURNAL_MAX_LINE (16 * 1024 * 1024)

/* One line of the journal, as a reader gives it. */
typedef struct {
    const char *data;            /* its bytes, NUL-terminated; NULL when longer than
                                  * AV_JOURNAL_MAX_LINE; borrowed until the next line */
    gsize len;                   /* its length in bytes, without the newline */
    guint64 number;              /* its number, from 1 (from where the reader began) */
    goffset offset;              /* the journal offset of its first byte */
    gboolean ended;              /* a newline ends it (else it is the last bytes read) */
    gboolean nul;                /* it holds a NUL byte */
} AvJournalLine;

/* A reader of the journal's lines, forward, in bounded memory (one block
 * and one line at a time).  src/journal/av-journal-reader.c. */
typedef struct AvJournalReader AvJournalReader;

/* Opens the journal whose live file is @path (state_dir/journal.jsonl) to
 * read its lines, its archived segments' and then the live file's, from
 * byte @offset of the journal (the start of a line) up to byte @limit (its
 * size when negative or larger; what is appended later is not read).  A
 * segment is checked as it is read: its bytes, uncompressed, are as many as
 * its name says and end with a newline.  Returns 1 with
 * *ret_reader, 0 when there is no journal, -1 with @error set: not a
 * regular file (AV_ERROR_CORRUPT_STATE, a FIFO or a device is never read),
 * @offset beyond the end, or an I/O error. */
int av_journal_reader_open(const char *path, goffset offset, goffset limit, AvJournalReader **ret_reader,
                           GError **error);

/* The next line into *ret_line: 1, 0 at the end, -1 with @error set. */
int av_journal_reader_next(AvJournalReader *reader, AvJournalLine *ret_line, GError **error);

/* The file offset after the last line returned, where reading stops, and
 * the file's path. */
goffset av_journal_reader_offset(const AvJournalReader *reader);
goffset av_journal_reader_end(const AvJournalReader *reader);
const char *av_journal_reader_path(const AvJournalReader *reader);

void av_journal_reader_free(AvJournalReader *reader);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvJournalReader, av_journal_reader_free)

G_END_DECLS
