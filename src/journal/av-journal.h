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
 * fsynced before this returns.  The caller holds the pool's exclusive
 * lock. */
gboolean av_journal_append(AvJournal *journal, const char *event, json_t *fields, GError **error);

/* The hex SHA-256 of @len bytes at @data.  Caller frees. */
char *av_journal_hash(const char *data, gsize len);

/* Reads the entries of the journal in @state_dir, oldest first, into
 * *ret_entries (json_t*, caller frees; empty without a journal); torn lines
 * are left out.  Does not check the chain (av_journal_verify() does).
 * FALSE with AV_ERROR_CORRUPT_STATE (not a regular file, a NUL byte) or
 * AV_ERROR_IO. */
gboolean av_journal_read(const char *state_dir, GPtrArray **ret_entries, GError **error);

/* Checks the hash chain and sequence of the journal in @state_dir.  Returns
 * FALSE with an error naming the first bad line. */
gboolean av_journal_verify(const char *state_dir, guint64 *ret_entries, GError **error);

G_END_DECLS
