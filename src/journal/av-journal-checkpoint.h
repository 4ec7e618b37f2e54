/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: finding the journal's checkpoints.
 *
 * A checkpoint is a journal entry like any other (event "checkpoint",
 * appended by the pool's writer under its exclusive lock, so in the hash
 * chain): it carries the accounting's state after entry "at_seq" (whose
 * line hashes to "at_sha256" and ends at byte "at_offset", at time
 * "at_time"), so that a reader may start at "at_offset" instead of the
 * journal's start (ledger/av-accounting.h says what the state holds and
 * how a reader checks it continues the chain).  There is no index file:
 * the newest checkpoint is found by reading the journal backwards from its
 * end. */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

#define AV_JOURNAL_CHECKPOINT_EVENT "checkpoint"

/* Reads the journal whose live file is @path backwards from its end (from
 * byte @limit when it is not negative: the size read under the pool's
 * lock), in blocks (memory bounded by the longest line, at most 16 MiB),
 * then, when the live file holds none that serves, its archived segments
 * (newest first, each read forward), for the newest whole line
 * (newline-ended) whose top-level "event" is "checkpoint", whose fields
 * "at_seq" (>= 1), "at_sha256" (64 hex digits), "at_offset" (not past the
 * checkpoint's own line) and "at_time" (RFC 3339) are well formed, and
 * whose "at_time" is at or before @max_time (Unix seconds; G_MAXINT64 for
 * any).  Lines of other events, or whose "checkpoint" is only nested
 * inside another member, are passed over; so is a malformed checkpoint.
 * Sets *ret_entry (caller frees) and *ret_offset (where its line starts),
 * or *ret_entry to NULL when there is none (no journal included).  FALSE
 * with @error only when the file cannot be read. */
gboolean av_journal_find_checkpoint(const char *path, goffset limit, gint64 max_time, json_t **ret_entry,
                                    goffset *ret_offset, GError **error);

/* The Unix time of the checkpoint @entry's "at_time"; FALSE when it is no
 * RFC 3339 time. */
gboolean av_journal_checkpoint_time(json_t *entry, gint64 *ret_time);

/* The line of the journal file @path that ends with the newline at
 * @offset - 1 (the line a checkpoint's "at_offset" follows), read
 * backwards: *ret_line (NUL-terminated, caller frees) and *ret_len.  FALSE
 * with AV_ERROR_CORRUPT_STATE when the byte at @offset - 1 is no newline
 * or the line is longer than 16 MiB, or an I/O error. */
gboolean av_journal_line_before(const char *path, goffset offset, char **ret_line, gsize *ret_len, GError **error);

G_END_DECLS
