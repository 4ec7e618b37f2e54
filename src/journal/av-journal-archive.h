/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: moving the journal's old entries into compressed segments
 * (`accelvirt journal archive`), without losing an entry or the chain.
 *
 * The journal is the segments of journal.d/ and then journal.jsonl
 * (av-journal.h, "the journal's layout").  An archive cuts journal.jsonl
 * before the line of the entry a checkpoint covers (the caller chooses it,
 * `journal archive --keep-days`), so that metrics, accounting --since and
 * verify --since-checkpoint starting from it keep reading only the live
 * file:
 *  1. without the pool's lock: the entries before the cut are written to a
 *     segment (gzip, fsynced, renamed into place, read back and compared)
 *     and those after it, up to the size the caller learnt under the lock,
 *     to journal.jsonl's successor;
 *  2. under the pool's exclusive lock (av_journal_archive_commit()): what
 *     writers appended meanwhile is copied too, the successor is fsynced
 *     and renamed over journal.jsonl.
 * A process killed between the two leaves a segment whose entries the live
 * file still holds: readers then take them from the live file, and the next
 * archive only makes the cut.  Nothing is ever deleted: an archive's own
 * temporary files aside. */
#pragma once

#include <glib.h>

#include "journal/av-journal.h"

G_BEGIN_DECLS

typedef struct AvJournalArchive AvJournalArchive;

/* What an archive did, for its journal entry and its report. */
typedef struct {
    AvJournalSegment segment;        /* the segment written (or finished) */
    char *name;                      /* its file name in journal.d */
    char *sha256;                    /* the SHA-256 of its bytes, uncompressed */
    goffset compressed;              /* its size on disk */
    gboolean finished_only;          /* an earlier archive wrote it; only the cut was made */
} AvJournalArchived;

/* Step 1 for the journal of @state_dir, of its first @size bytes (the
 * journal's size learnt under the pool's lock, av_journal_size()), cutting
 * at @cut (the start of a whole entry's line: the one a checkpoint covers,
 * which the caller found and checked).  Takes journal.d's own lock (another archive:
 * AV_ERROR_LOCKED), until av_journal_archive_free().  Returns 1 with
 * *ret_archive, 0 when there is nothing to cut (@cut at or before the live
 * file's start), -1 with @error: the line at @cut is no whole entry, a
 * segment cannot be written or does not read back the same, I/O. */
int av_journal_archive_prepare(const char *state_dir, goffset size, goffset cut, AvJournalArchive **ret_archive,
                               GError **error);

/* Step 2: the caller holds the pool's exclusive lock.  Copies what was
 * appended since @size, fsyncs and renames the new live file into place.
 * AV_ERROR_CORRUPT_STATE when journal.jsonl was replaced or shrank
 * meanwhile (nothing is cut then). */
gboolean av_journal_archive_commit(AvJournalArchive *archive, AvJournalArchived *ret, GError **error);

void av_journal_archive_free(AvJournalArchive *archive);
void av_journal_archived_clear(AvJournalArchived *archived);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvJournalArchive, av_journal_archive_free)

G_END_DECLS
