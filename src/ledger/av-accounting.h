/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: device time from the journal (`accelvirt
 * accounting`, `accelvirt metrics`).
 *
 * The journal (av-pool.h) is read once, line by line, keeping one record
 * per device (its state, owner, profile and the time it entered the state)
 * and one per group: memory grows with devices and groups, never with the
 * journal.  Every state change ("added" with a state, and every entry with
 * "identity", "from" and "to": "transition", "claimed", "claim-expired",
 * "cleared", "found", ...) closes the device's current interval at the
 * entry's time and opens the next one, attributed to the owner that entry
 * names (the releasing domain keeps its device's dirty and scrubbing time;
 * a quarantine without an owner goes to "-").  Intervals are clipped to
 * [since, until); a device still in a state at the end of the journal is
 * in it until @until.
 *
 * Definitions (device-seconds, whole seconds):
 *   in_use       time in state in-use
 *   claimed      time in state claimed
 *   dirty, scrubbing, quarantined   time in those states
 * Counts of entries whose time is in the window:
 *   claims       transitions free -> claimed
 *   releases     transitions in-use -> dirty or quarantined
 *   attaches, detaches   devices named by "attach" ("devices") and
 *                "detach" ("released") entries
 *   scrubs_passed, scrubs_failed   "scrub-certificate" entries by "ok",
 *                scrub_seconds the sum of their "seconds"
 *   quarantines  transitions to quarantined
 * A free or missing device counts no time.  Each interval and count goes to
 * exactly one group and to the total, so the groups add up to the total.
 *
 * Hostile journals: a line that is not an entry, an entry whose time does
 * not parse, time going backwards (the entry is taken at the previous
 * entry's time: no time is invented), a transition whose "from" is not the
 * state the timeline holds (the interval before it is dropped, not
 * counted), a transition of a device never added, an unknown event: each
 * is counted as an anomaly, never fatal. */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

typedef enum {
    AV_ACCT_BY_DOMAIN,           /* key: domain UUID; name: its last name */
    AV_ACCT_BY_PROJECT,          /* key: Nova project */
    AV_ACCT_BY_USER,             /* key: Nova user */
    AV_ACCT_BY_PROFILE,          /* key: profile */
    AV_ACCT_BY_DEVICE,           /* key: device identity; name: its last address */
    AV_ACCT_BY_OWNER,            /* domain, project, user and profile together (metrics --per-domain) */
    AV_ACCT_BY_TENANT,           /* project, user and profile together (metrics, checkpoints) */
} AvAcctBy;

/* What a group (or the total) counted. */
typedef struct {
    gint64 in_use_s;
    gint64 claimed_s;
    gint64 dirty_s;
    gint64 scrubbing_s;
    gint64 quarantined_s;
    guint64 claims;
    guint64 releases;
    guint64 attaches;
    guint64 detaches;
    guint64 scrubs_passed;
    guint64 scrubs_failed;
    guint64 quarantines;
    double scrub_seconds;
} AvAcctSums;

/* One group.  Strings are owned by the accounting; "-" stands for unknown.
 * Only the members the grouping uses are set, the others are NULL (name:
 * NULL when no name was seen). */
typedef struct {
    char *key;                   /* the group's key ("\x1f"-joined for AV_ACCT_BY_OWNER, _TENANT) */
    char *domain;                /* domain UUID (by domain, by owner) */
    char *name;                  /* domain name (by domain, by owner) or device address (by device) */
    char *project;               /* Nova project (by project, by owner, by tenant) */
    char *user;                  /* Nova user (by user, by owner, by tenant) */
    char *profile;               /* profile (by profile, by owner, by tenant) */
    char *device;                /* device identity (by device) */
    AvAcctSums sums;
} AvAcctGroup;

typedef enum {
    AV_ACCT_ANOMALY_NOT_ENTRY,   /* a line that is not a journal entry */
    AV_ACCT_ANOMALY_BAD_TIME,    /* an entry whose time does not parse: skipped */
    AV_ACCT_ANOMALY_BACKWARDS,   /* time going backwards: taken as the previous entry's time */
    AV_ACCT_ANOMALY_FROM,        /* a transition whose "from" disagrees with the timeline */
    AV_ACCT_ANOMALY_UNKNOWN_DEV, /* a transition of a device never added */
    AV_ACCT_ANOMALY_BAD_FIELDS,  /* an entry of a known event without the fields it needs: skipped */
    AV_ACCT_ANOMALY_UNKNOWN,     /* an event accounting does not know: skipped */
    AV_ACCT_ANOMALIES,
} AvAcctAnomaly;

typedef struct AvAccounting AvAccounting;

/* A new accounting of the window [@since, @until) (Unix seconds) grouped
 * by @by.  Caller frees with av_accounting_free(). */
AvAccounting *av_accounting_new(gint64 since, gint64 until, AvAcctBy by);
void av_accounting_free(AvAccounting *acct);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvAccounting, av_accounting_free)

/* Feeds one journal line (@len bytes, no newline) to @acct: accounts it and
 * checks it continues the chain (seq, prev). */
void av_accounting_feed_line(AvAccounting *acct, const char *line, gsize len);

/* Closes the open intervals at the window's end; after it the results are
 * final and nothing more may be fed. */
void av_accounting_finish(AvAccounting *acct);

/* Streams the journal file @path through av_accounting_feed_line() and
 * finishes @acct.  A missing file is an empty journal.  FALSE with @error
 * when it cannot be read (the caller holds the pool lock it wants). */
gboolean av_accounting_read_journal(AvAccounting *acct, const char *path, GError **error);

/* The groups, sorted by key (borrowed from @acct), and the total. */
const GPtrArray *av_accounting_groups(const AvAccounting *acct);
const AvAcctSums *av_accounting_total(const AvAccounting *acct);

/* The number of anomalies of @kind, a phrase saying what they are, and a
 * short name for machines ("not_entry", "bad_time", "backwards",
 * "from_mismatch", "unknown_device", "bad_fields", "unknown_event"). */
guint64 av_accounting_anomalies(const AvAccounting *acct, AvAcctAnomaly kind);
const char *av_acct_anomaly_to_string(AvAcctAnomaly kind);
const char *av_acct_anomaly_id(AvAcctAnomaly kind);

/* One line saying every anomaly with its count ("3 entries skipped or
 * doubted: 2 not a journal entry, 1 time going backwards"), or NULL when
 * there were none.  Caller frees. */
char *av_accounting_anomaly_line(const AvAccounting *acct);

/* NULL when the lines fed form an intact chain (seq from 1, each "prev" the
 * SHA-256 of the line before), else a sentence naming the first break
 * (borrowed). */
const char *av_accounting_chain_error(const AvAccounting *acct);

/* The number of entries fed (whole entries, in the window or not). */
guint64 av_accounting_entries(const AvAccounting *acct);

/* The grouping named @name ("domain", "project", "user", "profile",
 * "device"); FALSE when unknown. */
gboolean av_acct_by_from_string(const char *name, AvAcctBy *ret_by);

/* @sums as a JSON object (exact seconds; new reference). */
json_t *av_acct_sums_to_json(const AvAcctSums *sums);

/* Checkpoints (journal/av-journal-checkpoint.h): a "checkpoint" journal
 * entry holds the accounting's state after the entry "at_seq" (line ending
 * at byte "at_offset", hashing to "at_sha256", at "at_time", the time as
 * accounting took it): "entries" and "lines" read so far, "anomalies" (by
 * av_acct_anomaly_id()), "devices" (each device's identity, state, since,
 * address, profile and owner: every member of the timeline), and, over all
 * time up to at_time, "sums" by (project, user, profile) and "total".  Sums
 * by domain are not kept (one group per domain ever seen, without
 * bound).  A reader restores it and feeds the journal from "at_offset";
 * the numbers are the same as from the journal's start. */

/* The accounting of the journal file @path (its first @limit bytes, all
 * of it when negative: a reader takes the journal's size under the pool's
 * lock and reads that much without it, as nothing before it ever changes)
 * over [@since, @until) grouped by @by, finished; with @checkpoints, started from the newest checkpoint
 * that serves: for a window from the journal's start (@since G_MININT64)
 * only by AV_ACCT_BY_TENANT, at_time before @until; for any other window
 * and grouping, at_time before @since (its devices are all it needs).  A
 * checkpoint is used only when the line ending at its at_offset is the
 * entry at_seq hashing to at_sha256, its state restores, and the lines
 * from at_offset continue the chain without a break through its own line
 * to the last whole entry (a torn tail after that is reported as a whole
 * read reports it); else the whole journal is read and
 * av_accounting_checkpoint_warning() says why.  NULL with @error when the
 * file cannot be read. */
AvAccounting *av_accounting_read(const char *path, goffset limit, gint64 since, gint64 until, AvAcctBy by,
                                 gboolean checkpoints,
                                 GError **error);

/* The at_seq of the checkpoint @acct started from, 0 when it read the
 * journal from its start: its chain was checked from the next entry on. */
guint64 av_accounting_checkpoint_seq(const AvAccounting *acct);

/* Why a checkpoint found was not used (a sentence, borrowed), or NULL. */
const char *av_accounting_checkpoint_warning(const AvAccounting *acct);

/* The members of a new checkpoint entry for the journal file @path, as it
 * is now (the last whole entry before any torn or half-written tail),
 * computed from its newest usable checkpoint or its start: reads without
 * a lock (the journal only grows), so the caller takes the pool's
 * exclusive lock only to append them.  *ret_new: the entries after the
 * newest checkpoint's at_seq (all of them without one).  *ret_fields NULL
 * when there is no entry with a time yet.  *ret_warning (caller frees):
 * why the newest checkpoint was not started from, or NULL.  FALSE with
 * AV_ERROR_CORRUPT_STATE
 * when the chain does not verify up to that entry (no checkpoint vouches
 * for a broken chain), or an I/O error. */
/* Checks every checkpoint entry in the journal @path's first @limit bytes
 * against the entries before it: the state the accounting reaches from the
 * journal's start at its at_offset must be what it holds.  *ret_checked
 * gets how many held; *ret_problem (caller frees) a sentence naming the
 * first that does not, or NULL.  FALSE with @error when the file cannot be
 * read.  A whole `journal verify` runs it: nothing else would find a
 * checkpoint that is in the chain but wrong, whose sums readers take. */
gboolean av_accounting_check_checkpoints(const char *path, goffset limit, guint *ret_checked, char **ret_problem,
                                         GError **error);

gboolean av_accounting_checkpoint(const char *path, json_t **ret_fields, guint64 *ret_new, char **ret_warning,
                                  GError **error);

G_END_DECLS
