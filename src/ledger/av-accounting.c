/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: device time from the journal (see av-accounting.h). */
#include "config.h"

#include "ledger/av-accounting.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal/av-journal.h"
#include "journal/av-journal-checkpoint.h"
#include "pool/av-pool.h"
#include "util/av-error.h"
#include "util/av-json.h"


/* The most a scrub certificate's "seconds" may say (a year): more is an
 * anomaly, not a scrub time. */
#define AV_ACCT_MAX_SCRUB_S (366.0 * 86400.0)

/* One device of the timeline. */
typedef struct {
    char *address;
    char *profile;
    AvDeviceState state;
    AvOwner *owner;
    gint64 since;                /* when it entered @state */
} AvAcctDev;

struct AvAccounting {
    gint64 since, until;
    AvAcctBy by;
    GHashTable *devices;         /* identity -> AvAcctDev* */
    GHashTable *groups;          /* key -> AvAcctGroup* */
    GPtrArray *sorted;           /* after finish: the groups by key (borrowed) */
    AvAcctSums total;
    guint64 anomalies[AV_ACCT_ANOMALIES];
    guint64 entries;
    gint64 last_time;
    gboolean have_time;
    /* the chain */
    guint64 next_seq;
    char *prev_hash;
    char *chain_error;
    guint64 lineno;
    guint64 torn;                /* the first line of a run of lines that are no entries, or 0 */
    gboolean finished;
    /* where the last whole entry fed left things (av_acct_stream()): the
     * point a checkpoint describes */
    struct {
        goffset offset;          /* just after its newline; 0: no entry yet */
        guint64 seq, lineno, not_entry;
        char *hash;              /* the SHA-256 of its line */
        gboolean chain_ok;
    } mark;
    guint64 checkpoint_seq;      /* the at_seq of the checkpoint started from, or 0 */
    guint64 checkpoint_entries;  /* "checkpoint" entries fed (av_accounting_checkpoint() counts the others) */
    char *checkpoint_warning;    /* why a checkpoint found was not used, or NULL */
};

static const char *const av_acct_anomaly_names[AV_ACCT_ANOMALIES] = {
    [AV_ACCT_ANOMALY_NOT_ENTRY] = "not a journal entry",
    [AV_ACCT_ANOMALY_BAD_TIME] = "time that does not parse",
    [AV_ACCT_ANOMALY_BACKWARDS] = "time going backwards (taken as no time)",
    [AV_ACCT_ANOMALY_FROM] = "a transition whose 'from' disagrees with the timeline (the time before it not counted)",
    [AV_ACCT_ANOMALY_UNKNOWN_DEV] = "a transition of a device never added",
    [AV_ACCT_ANOMALY_BAD_FIELDS] = "an entry without the fields its event needs",
    [AV_ACCT_ANOMALY_UNKNOWN] = "an unknown event",
};

static const char *const av_acct_anomaly_ids[AV_ACCT_ANOMALIES] = {
    "not_entry", "bad_time", "backwards", "from_mismatch", "unknown_device", "bad_fields", "unknown_event",
};

/* Events that say nothing about device time: read and left alone. */
static const char *const av_acct_quiet_events[] = {
    "attach-rolled-back", "attached-outside", "bitstream-added", "bitstream-removed", "claim-renewed",
    "clear-failed", "detached-outside", "driver", "enrolled", "health", "identity-changed",
    "identity-problem", "program", "programmed", "programmed-unknown", "quarantine-reason",
    "quarantined-while-missing", "released-while-missing", "rollback-failed", "rolled-back",
    "torn-line", "checkpoint", "journal-archive", "vfs-set", "vfs-set-failed", "violation",
};

static void
av_acct_dev_free(AvAcctDev *dev)
{
    if (!dev)
        return;
    g_free(dev->address);
    g_free(dev->profile);
    av_owner_free(dev->owner);
    g_free(dev);
}

static void
av_acct_group_free(AvAcctGroup *g)
{
    if (!g)
        return;
    g_free(g->key);
    g_free(g->domain);
    g_free(g->name);
    g_free(g->project);
    g_free(g->user);
    g_free(g->profile);
    g_free(g->device);
    g_free(g);
}

/* What a checkpoint may say (av_acct_restore()): a sum of at most 2^53,
 * a time from 0001-01-01T00:00:00Z on. */
#define AV_ACCT_MAX_SUM (G_GINT64_CONSTANT(1) << 53)
#define AV_ACCT_MIN_TIME G_GINT64_CONSTANT(-62135596800)

/* See av-accounting.h. */
AvAccounting *
av_accounting_new(gint64 since, gint64 until, AvAcctBy by)
{
    AvAccounting *acct = g_new0(AvAccounting, 1);

    acct->since = since;
    acct->until = until;
    acct->by = by;
    acct->devices = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)av_acct_dev_free);
    acct->groups = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)av_acct_group_free);
    acct->next_seq = 1;
    acct->prev_hash = g_strdup("");
    return acct;
}

/* See av-accounting.h. */
void
av_accounting_free(AvAccounting *acct)
{
    if (!acct)
        return;
    g_hash_table_destroy(acct->devices);
    if (acct->sorted)
        g_ptr_array_unref(acct->sorted);
    g_hash_table_destroy(acct->groups);
    g_free(acct->prev_hash);
    g_free(acct->chain_error);
    g_free(acct->mark.hash);
    g_free(acct->checkpoint_warning);
    g_free(acct);
}

static const char *
av_acct_or_dash(const char *s)
{
    return s && *s ? s : "-";
}

/* The group of a device @identity (@address, @profile) held by @owner
 * (may be NULL), created on first use.  Borrowed from @acct. */
static AvAcctGroup *
av_acct_group(AvAccounting *acct, const char *identity, const char *address, const char *profile,
              const AvOwner *owner)
{
    const char *uuid = av_acct_or_dash(owner ? owner->domain_uuid : NULL);
    const char *dname = owner ? owner->domain_name : NULL;
    const char *project = av_acct_or_dash(owner ? owner->nova_project : NULL);
    const char *user = av_acct_or_dash(owner ? owner->nova_user : NULL);
    g_autofree char *key = NULL;
    AvAcctGroup *g;

    profile = av_acct_or_dash(profile);
    switch (acct->by) {
    case AV_ACCT_BY_DOMAIN: key = g_strdup(uuid); break;
    case AV_ACCT_BY_PROJECT: key = g_strdup(project); break;
    case AV_ACCT_BY_USER: key = g_strdup(user); break;
    case AV_ACCT_BY_PROFILE: key = g_strdup(profile); break;
    case AV_ACCT_BY_DEVICE: key = g_strdup(av_acct_or_dash(identity)); break;
    case AV_ACCT_BY_TENANT: key = g_strjoin("\x1f", project, user, profile, NULL); break;
    case AV_ACCT_BY_OWNER:
    default: key = g_strjoin("\x1f", uuid, project, user, profile, NULL); break;
    }
    g = g_hash_table_lookup(acct->groups, key);
    if (!g) {
        g = g_new0(AvAcctGroup, 1);
        g->key = g_steal_pointer(&key);
        if (acct->by == AV_ACCT_BY_DOMAIN || acct->by == AV_ACCT_BY_OWNER)
            g->domain = g_strdup(uuid);
        if (acct->by == AV_ACCT_BY_PROJECT || acct->by == AV_ACCT_BY_OWNER || acct->by == AV_ACCT_BY_TENANT)
            g->project = g_strdup(project);
        if (acct->by == AV_ACCT_BY_USER || acct->by == AV_ACCT_BY_OWNER || acct->by == AV_ACCT_BY_TENANT)
            g->user = g_strdup(user);
        if (acct->by == AV_ACCT_BY_PROFILE || acct->by == AV_ACCT_BY_OWNER || acct->by == AV_ACCT_BY_TENANT)
            g->profile = g_strdup(profile);
        if (acct->by == AV_ACCT_BY_DEVICE)
            g->device = g_strdup(av_acct_or_dash(identity));
        g_hash_table_insert(acct->groups, g->key, g);
    }
    /* The last name seen wins (a domain renamed, a device readdressed). */
    if ((acct->by == AV_ACCT_BY_DOMAIN || acct->by == AV_ACCT_BY_OWNER) && dname && *dname &&
        g_strcmp0(g->name, dname) != 0) {
        g_free(g->name);
        g->name = g_strdup(dname);
    } else if (acct->by == AV_ACCT_BY_DEVICE && address && g_strcmp0(g->name, address) != 0) {
        g_free(g->name);
        g->name = g_strdup(address);
    }
    return g;
}

/* Adds the time @dev spent in its state from its since to @end, clipped to
 * the window, to its group and the total. */
static void
av_acct_close(AvAccounting *acct, const char *identity, AvAcctDev *dev, gint64 end)
{
    gint64 from = MAX(dev->since, acct->since), to = MIN(end, acct->until), len;
    AvAcctGroup *g;
    gint64 *mine, *all;

    if (to <= from)
        return;
    len = to - from;
    if (dev->state == AV_DEVICE_STATE_FREE || dev->state == AV_DEVICE_STATE_MISSING)
        return;
    g = av_acct_group(acct, identity, dev->address, dev->profile, dev->owner);
    switch (dev->state) {
    case AV_DEVICE_STATE_IN_USE: mine = &g->sums.in_use_s; all = &acct->total.in_use_s; break;
    case AV_DEVICE_STATE_CLAIMED: mine = &g->sums.claimed_s; all = &acct->total.claimed_s; break;
    case AV_DEVICE_STATE_DIRTY: mine = &g->sums.dirty_s; all = &acct->total.dirty_s; break;
    case AV_DEVICE_STATE_SCRUBBING: mine = &g->sums.scrubbing_s; all = &acct->total.scrubbing_s; break;
    default: mine = &g->sums.quarantined_s; all = &acct->total.quarantined_s; break;
    }
    *mine += len;
    *all += len;
}

/* The owner an entry names ("owner" or @member: an object of strings or
 * null), or NULL. */
static AvOwner *
av_acct_owner_from_json(json_t *o)
{
    AvOwner *owner;

    if (!json_is_object(o))
        return NULL;
    owner = av_owner_new(json_string_value(json_object_get(o, "domain_uuid")),
                         json_string_value(json_object_get(o, "domain_name")));
    owner->nova_instance = g_strdup(json_string_value(json_object_get(o, "nova_instance")));
    owner->nova_project = g_strdup(json_string_value(json_object_get(o, "nova_project")));
    owner->nova_user = g_strdup(json_string_value(json_object_get(o, "nova_user")));
    return owner;
}

/* Counts one event of the window: @field of the group and of the total
 * (a member offset of AvAcctSums). */
static void
av_acct_count(AvAccounting *acct, AvAcctGroup *g, gsize offset)
{
    (*(guint64 *)((char *)&g->sums + offset))++;
    (*(guint64 *)((char *)&acct->total + offset))++;
}

static gboolean
av_acct_in_window(const AvAccounting *acct, gint64 t)
{
    return t >= acct->since && t < acct->until;
}

/* "added": the device starts (again) in the entry's state. */
static void
av_acct_added(AvAccounting *acct, json_t *e, const char *identity, gint64 t)
{
    AvAcctDev *dev = g_hash_table_lookup(acct->devices, identity);
    AvDeviceState state;

    if (!av_device_state_from_string(json_string_value(json_object_get(e, "state")), &state)) {
        acct->anomalies[AV_ACCT_ANOMALY_BAD_FIELDS]++;
        return;
    }
    if (dev) {
        av_acct_close(acct, identity, dev, t);
    } else {
        dev = g_new0(AvAcctDev, 1);
        g_hash_table_insert(acct->devices, g_strdup(identity), dev);
    }
    g_free(dev->address);
    dev->address = g_strdup(json_string_value(json_object_get(e, "address")));
    g_free(dev->profile);
    dev->profile = g_strdup(json_string_value(json_object_get(e, "profile")));
    av_owner_free(dev->owner);
    dev->owner = av_acct_owner_from_json(json_object_get(e, "owner"));
    dev->state = state;
    dev->since = t;
}

/* An entry with "from" and "to": the device's next state. */
static void
av_acct_transition(AvAccounting *acct, json_t *e, const char *identity, gint64 t)
{
    AvAcctDev *dev = g_hash_table_lookup(acct->devices, identity);
    AvDeviceState from, to;
    gboolean claim, release, quarantine;
    AvAcctGroup *g;

    if (!av_device_state_from_string(json_string_value(json_object_get(e, "from")), &from) ||
        !av_device_state_from_string(json_string_value(json_object_get(e, "to")), &to)) {
        acct->anomalies[AV_ACCT_ANOMALY_BAD_FIELDS]++;
        return;
    }
    if (!dev) {
        /* A journal that starts late, or a line lost: the device is known
         * from here on, nothing before is invented. */
        acct->anomalies[AV_ACCT_ANOMALY_UNKNOWN_DEV]++;
        dev = g_new0(AvAcctDev, 1);
        g_hash_table_insert(acct->devices, g_strdup(identity), dev);
    } else if (dev->state != from) {
        acct->anomalies[AV_ACCT_ANOMALY_FROM]++;
    } else {
        av_acct_close(acct, identity, dev, t);
    }
    if (json_is_string(json_object_get(e, "address"))) {
        g_free(dev->address);
        dev->address = g_strdup(json_string_value(json_object_get(e, "address")));
    }
    av_owner_free(dev->owner);
    dev->owner = av_acct_owner_from_json(json_object_get(e, "owner"));
    dev->state = to;
    dev->since = t;
    claim = from == AV_DEVICE_STATE_FREE && to == AV_DEVICE_STATE_CLAIMED;
    release = from == AV_DEVICE_STATE_IN_USE && (to == AV_DEVICE_STATE_DIRTY || to == AV_DEVICE_STATE_QUARANTINED);
    quarantine = to == AV_DEVICE_STATE_QUARANTINED && from != AV_DEVICE_STATE_MISSING;
    if (!av_acct_in_window(acct, t) || !(claim || release || quarantine))
        return;
    g = av_acct_group(acct, identity, dev->address, dev->profile, dev->owner);
    if (claim)
        av_acct_count(acct, g, G_STRUCT_OFFSET(AvAcctSums, claims));
    if (release)
        av_acct_count(acct, g, G_STRUCT_OFFSET(AvAcctSums, releases));
    if (quarantine)
        av_acct_count(acct, g, G_STRUCT_OFFSET(AvAcctSums, quarantines));
}

/* One device named by an "attach" or "detach" entry: counted in the group
 * its timeline puts it in, else in the entry's domain's. */
static void
av_acct_attach_one(AvAccounting *acct, json_t *e, const char *identity, const char *profile, gsize offset)
{
    AvAcctDev *dev = identity ? g_hash_table_lookup(acct->devices, identity) : NULL;
    g_autoptr(AvOwner) owner = NULL;
    AvAcctGroup *g;

    if (dev && dev->owner) {
        g = av_acct_group(acct, identity, dev->address, dev->profile, dev->owner);
    } else {
        owner = av_owner_new(json_string_value(json_object_get(e, "domain_uuid")),
                             json_string_value(json_object_get(e, "domain_name")));
        g = av_acct_group(acct, identity, dev ? dev->address : NULL, dev ? dev->profile : profile, owner);
    }
    av_acct_count(acct, g, offset);
}

static void
av_acct_attach(AvAccounting *acct, json_t *e, gboolean attach)
{
    json_t *list = json_object_get(e, attach ? "devices" : "released");
    json_t *item;
    size_t i;

    if (!json_is_array(list)) {
        acct->anomalies[AV_ACCT_ANOMALY_BAD_FIELDS]++;
        return;
    }
    json_array_foreach(list, i, item) {
        if (attach)
            av_acct_attach_one(acct, e, json_string_value(json_object_get(item, "identity")),
                               json_string_value(json_object_get(item, "profile")),
                               G_STRUCT_OFFSET(AvAcctSums, attaches));
        else
            av_acct_attach_one(acct, e, json_string_value(item), NULL, G_STRUCT_OFFSET(AvAcctSums, detaches));
    }
}

static void
av_acct_certificate(AvAccounting *acct, json_t *e, const char *identity)
{
    json_t *ok = json_object_get(e, "ok");
    json_t *secs = json_object_get(e, "seconds");
    g_autoptr(AvOwner) owner = av_acct_owner_from_json(json_object_get(e, "previous_owner"));
    AvAcctGroup *g;
    double s = 0;

    if (!json_is_boolean(ok)) {
        acct->anomalies[AV_ACCT_ANOMALY_BAD_FIELDS]++;
        return;
    }
    if (json_is_number(secs)) {
        s = json_number_value(secs);
        if (!isfinite(s) || s < 0 || s > AV_ACCT_MAX_SCRUB_S) {
            acct->anomalies[AV_ACCT_ANOMALY_BAD_FIELDS]++;
            s = 0;
        }
    }
    g = av_acct_group(acct, identity, json_string_value(json_object_get(e, "address")),
                      json_string_value(json_object_get(e, "profile")), owner);
    av_acct_count(acct, g, json_is_true(ok) ? G_STRUCT_OFFSET(AvAcctSums, scrubs_passed)
                                            : G_STRUCT_OFFSET(AvAcctSums, scrubs_failed));
    g->sums.scrub_seconds += s;
    acct->total.scrub_seconds += s;
}

/* Accounts one whole entry at its time @t. */
static void
av_acct_entry(AvAccounting *acct, json_t *e, gint64 t)
{
    const char *event = json_string_value(json_object_get(e, "event"));
    const char *identity = json_string_value(json_object_get(e, "identity"));
    AvAcctDev *dev;

    /* Checkpoints are not what a next checkpoint waits for: an idle host
     * must not gain one every run. */
    if (g_str_equal(event, "checkpoint"))
        acct->checkpoint_entries++;

    if (g_str_equal(event, "added") || g_str_equal(event, "removed") || g_str_equal(event, "reprofiled") ||
        g_str_equal(event, "readdressed") || g_str_equal(event, "scrub-certificate") ||
        json_object_get(e, "from") || json_object_get(e, "to")) {
        if (!identity || !*identity) {
            /* "vfs-set" has numbers in "from" and "to" and no identity. */
            if (g_str_equal(event, "vfs-set") || g_str_equal(event, "vfs-set-failed"))
                return;
            acct->anomalies[AV_ACCT_ANOMALY_BAD_FIELDS]++;
            return;
        }
    }
    if (g_str_equal(event, "added")) {
        av_acct_added(acct, e, identity, t);
    } else if (g_str_equal(event, "removed")) {
        dev = g_hash_table_lookup(acct->devices, identity);
        if (dev) {
            av_acct_close(acct, identity, dev, t);
            g_hash_table_remove(acct->devices, identity);
        }
    } else if (g_str_equal(event, "reprofiled") || g_str_equal(event, "readdressed")) {
        dev = g_hash_table_lookup(acct->devices, identity);
        if (dev) {
            /* The time so far goes to the old profile. */
            av_acct_close(acct, identity, dev, t);
            dev->since = t;
            g_free(dev->profile);
            dev->profile = g_strdup(json_string_value(json_object_get(e, "profile")));
            g_free(dev->address);
            dev->address = g_strdup(json_string_value(json_object_get(e, "address")));
        }
    } else if (g_str_equal(event, "scrub-certificate")) {
        if (av_acct_in_window(acct, t))
            av_acct_certificate(acct, e, identity);
    } else if (g_str_equal(event, "attach") || g_str_equal(event, "detach")) {
        if (av_acct_in_window(acct, t))
            av_acct_attach(acct, e, g_str_equal(event, "attach"));
    } else if (identity && json_is_string(json_object_get(e, "from")) && json_is_string(json_object_get(e, "to"))) {
        av_acct_transition(acct, e, identity, t);
    } else if (!g_strv_contains((const char *const *)av_acct_quiet_events, event)) {
        acct->anomalies[AV_ACCT_ANOMALY_UNKNOWN]++;
    }
}

/* Checks that @line (whole entry @e or NULL) continues the chain, as
 * av_journal_verify() does: seq from 1, "prev" the SHA-256 of the line
 * before, and lines that are no entries (torn by a killed writer) followed
 * by the "torn-line" entry that acknowledges them.  The first break is
 * kept. */
static void
av_acct_chain(AvAccounting *acct, const char *line, gsize len, json_t *e)
{
    if (!e && !acct->torn)
        acct->torn = acct->lineno;
    if (e && !acct->chain_error) {
        json_t *seq = json_object_get(e, "seq");
        const char *prev = json_string_value(json_object_get(e, "prev"));

        if (acct->torn && g_strcmp0(json_string_value(json_object_get(e, "event")), "torn-line") != 0)
            acct->chain_error = g_strdup_printf("line %" G_GUINT64_FORMAT ": not a journal entry, and no "
                                                "torn-line entry acknowledges it", acct->torn);
        else if (!json_is_integer(seq) || json_integer_value(seq) < 0 ||
                 (guint64)json_integer_value(seq) != acct->next_seq)
            acct->chain_error = g_strdup_printf("line %" G_GUINT64_FORMAT ": seq is not %" G_GUINT64_FORMAT,
                                                acct->lineno, acct->next_seq);
        else if (g_strcmp0(prev, acct->prev_hash) != 0)
            acct->chain_error = g_strdup_printf("line %" G_GUINT64_FORMAT ": prev is not the SHA-256 of the "
                                                "line before", acct->lineno);
        acct->next_seq++;
    }
    if (e)
        acct->torn = 0;
    g_free(acct->prev_hash);
    acct->prev_hash = av_journal_hash(line, len);
}

/* See av-accounting.h. */
void
av_accounting_feed_line(AvAccounting *acct, const char *line, gsize len)
{
    g_autoptr(json_t) e = NULL;
    g_autoptr(GDateTime) dt = NULL;
    const char *time;
    gint64 t;

    g_return_if_fail(!acct->finished);
    acct->lineno++;
    e = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(e) || !json_is_integer(json_object_get(e, "seq")) ||
        !json_is_string(json_object_get(e, "prev")) || !json_is_string(json_object_get(e, "event")) ||
        !json_is_string(json_object_get(e, "time"))) {
        acct->anomalies[AV_ACCT_ANOMALY_NOT_ENTRY]++;
        av_acct_chain(acct, line, len, NULL);
        return;
    }
    av_acct_chain(acct, line, len, e);
    acct->entries++;
    time = json_string_value(json_object_get(e, "time"));
    dt = g_date_time_new_from_iso8601(time, NULL);
    if (!dt) {
        acct->anomalies[AV_ACCT_ANOMALY_BAD_TIME]++;
        return;
    }
    t = g_date_time_to_unix(dt);
    if (acct->have_time && t < acct->last_time) {
        acct->anomalies[AV_ACCT_ANOMALY_BACKWARDS]++;
        t = acct->last_time;
    }
    acct->last_time = t;
    acct->have_time = TRUE;
    av_acct_entry(acct, e, t);
}

static gint
av_acct_group_cmp(gconstpointer a, gconstpointer b)
{
    const AvAcctGroup *ga = *(AvAcctGroup *const *)a, *gb = *(AvAcctGroup *const *)b;

    return strcmp(ga->key, gb->key);
}

/* See av-accounting.h. */
void
av_accounting_finish(AvAccounting *acct)
{
    GHashTableIter it;
    gpointer k, v;

    if (acct->finished)
        return;
    if (acct->torn && !acct->chain_error)
        acct->chain_error = g_strdup_printf("line %" G_GUINT64_FORMAT ": not a journal entry, and no torn-line "
                                            "entry acknowledges it", acct->torn);
    g_hash_table_iter_init(&it, acct->devices);
    while (g_hash_table_iter_next(&it, &k, &v))
        av_acct_close(acct, k, v, acct->until);
    acct->sorted = g_ptr_array_new();
    g_hash_table_iter_init(&it, acct->groups);
    while (g_hash_table_iter_next(&it, NULL, &v))
        g_ptr_array_add(acct->sorted, v);
    g_ptr_array_sort(acct->sorted, av_acct_group_cmp);
    acct->finished = TRUE;
}

/* Feeds the lines of the journal @path from byte @offset up to byte
 * @limit (its end when negative), one block and one line in memory at a
 * time (journal/av-journal.h's reader), keeping acct->mark at the last
 * whole entry.  With @tail_may_grow (a checkpoint's writer, reading without
 * the lock), a last line not ended by a newline is left out: a writer may
 * be appending it.  Else it is a torn line, counted as not an entry, as a
 * line with a NUL or one longer than any writer writes.  A missing file is
 * an empty journal. */
static gboolean
av_acct_feed(AvAccounting *acct, AvJournalReader *reader, goffset stop, gboolean tail_may_grow, GError **error);

static gboolean
av_acct_read_from(AvAccounting *acct, const char *path, goffset offset, goffset limit, gboolean tail_may_grow,
                  GError **error)
{
    g_autoptr(AvJournalReader) reader = NULL;
    int r;

    r = av_journal_reader_open(path, offset, limit, &reader, error);
    if (r <= 0)
        return r == 0;
    return av_acct_feed(acct, reader, -1, tail_may_grow, error);
}

/* Feeds the lines of @reader as av_acct_read_from() says, up to its end
 * or the first line that starts at or after byte @stop (when not
 * negative). */
static gboolean
av_acct_feed(AvAccounting *acct, AvJournalReader *reader, goffset stop, gboolean tail_may_grow, GError **error)
{
    AvJournalLine line;
    int r = 1;

    while ((stop < 0 || av_journal_reader_offset(reader) < stop) &&
           (r = av_journal_reader_next(reader, &line, error)) > 0) {
        guint64 entries = acct->entries;

        if (!line.ended && tail_may_grow)
            break;
        if (!line.data || line.nul || !line.ended) {
            /* A torn last line, a NUL, a line no writer writes. */
            acct->lineno++;
            acct->anomalies[AV_ACCT_ANOMALY_NOT_ENTRY]++;
            if (!acct->chain_error)
                acct->chain_error = g_strdup_printf("line %" G_GUINT64_FORMAT ": not a journal entry",
                                                    acct->lineno);
            continue;
        }
        av_accounting_feed_line(acct, line.data, line.len);
        if (acct->entries != entries) {
            acct->mark.offset = av_journal_reader_offset(reader);
            acct->mark.seq = acct->next_seq - 1;
            acct->mark.lineno = acct->lineno;
            acct->mark.not_entry = acct->anomalies[AV_ACCT_ANOMALY_NOT_ENTRY];
            g_free(acct->mark.hash);
            acct->mark.hash = g_strdup(acct->prev_hash);
            acct->mark.chain_ok = acct->chain_error == NULL;
        }
    }
    return r >= 0;
}

/* See av-accounting.h. */
gboolean
av_accounting_read_journal(AvAccounting *acct, const char *path, GError **error)
{
    if (!av_acct_read_from(acct, path, 0, -1, FALSE, error))
        return FALSE;
    av_accounting_finish(acct);
    return TRUE;
}

/* See av-accounting.h. */
const GPtrArray *
av_accounting_groups(const AvAccounting *acct)
{
    return acct->sorted;
}

/* See av-accounting.h. */
const AvAcctSums *
av_accounting_total(const AvAccounting *acct)
{
    return &acct->total;
}

/* See av-accounting.h. */
guint64
av_accounting_anomalies(const AvAccounting *acct, AvAcctAnomaly kind)
{
    return acct->anomalies[kind];
}

/* See av-accounting.h. */
const char *
av_acct_anomaly_to_string(AvAcctAnomaly kind)
{
    return av_acct_anomaly_names[kind];
}

/* See av-accounting.h. */
const char *
av_acct_anomaly_id(AvAcctAnomaly kind)
{
    return av_acct_anomaly_ids[kind];
}

/* See av-accounting.h. */
char *
av_accounting_anomaly_line(const AvAccounting *acct)
{
    g_autoptr(GString) s = g_string_new(NULL);
    guint64 all = 0;

    for (guint k = 0; k < AV_ACCT_ANOMALIES; k++) {
        if (!acct->anomalies[k])
            continue;
        g_string_append_printf(s, "%s%" G_GUINT64_FORMAT " %s", all ? ", " : "", acct->anomalies[k],
                               av_acct_anomaly_names[k]);
        all += acct->anomalies[k];
    }
    if (!all)
        return NULL;
    return g_strdup_printf("%" G_GUINT64_FORMAT " %s skipped or doubted: %s", all,
                           all == 1 ? "journal line" : "journal lines", s->str);
}

/* See av-accounting.h. */
const char *
av_accounting_chain_error(const AvAccounting *acct)
{
    return acct->chain_error;
}

/* See av-accounting.h. */
guint64
av_accounting_entries(const AvAccounting *acct)
{
    return acct->entries;
}

/* See av-accounting.h. */
gboolean
av_acct_by_from_string(const char *name, AvAcctBy *ret_by)
{
    static const char *const names[] = { "domain", "project", "user", "profile", "device" };

    for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
        if (g_strcmp0(name, names[i]) == 0) {
            *ret_by = (AvAcctBy)i;
            return TRUE;
        }
    }
    return FALSE;
}

/* The members of AvAcctSums but scrub_seconds, in the order of their JSON. */
static const struct {
    const char *name;
    gsize offset;
    gboolean seconds;            /* a gint64 of seconds, else a guint64 count */
} av_acct_sum_fields[] = {
    { "in_use_s", G_STRUCT_OFFSET(AvAcctSums, in_use_s), TRUE },
    { "claimed_s", G_STRUCT_OFFSET(AvAcctSums, claimed_s), TRUE },
    { "dirty_s", G_STRUCT_OFFSET(AvAcctSums, dirty_s), TRUE },
    { "scrubbing_s", G_STRUCT_OFFSET(AvAcctSums, scrubbing_s), TRUE },
    { "quarantined_s", G_STRUCT_OFFSET(AvAcctSums, quarantined_s), TRUE },
    { "claims", G_STRUCT_OFFSET(AvAcctSums, claims), FALSE },
    { "releases", G_STRUCT_OFFSET(AvAcctSums, releases), FALSE },
    { "attaches", G_STRUCT_OFFSET(AvAcctSums, attaches), FALSE },
    { "detaches", G_STRUCT_OFFSET(AvAcctSums, detaches), FALSE },
    { "scrubs_passed", G_STRUCT_OFFSET(AvAcctSums, scrubs_passed), FALSE },
    { "scrubs_failed", G_STRUCT_OFFSET(AvAcctSums, scrubs_failed), FALSE },
    { "quarantines", G_STRUCT_OFFSET(AvAcctSums, quarantines), FALSE },
};

/* See av-accounting.h. */
json_t *
av_acct_sums_to_json(const AvAcctSums *s)
{
    json_t *o = json_object();

    for (guint i = 0; i < G_N_ELEMENTS(av_acct_sum_fields); i++) {
        const char *at = (const char *)s + av_acct_sum_fields[i].offset;

        json_object_set_new(o, av_acct_sum_fields[i].name,
                            json_integer(av_acct_sum_fields[i].seconds ? (json_int_t) * (const gint64 *)at
                                                                       : (json_int_t) * (const guint64 *)at));
    }
    json_object_set_new(o, "scrub_seconds", json_real(s->scrub_seconds));
    return o;
}

/* --- checkpoints ------------------------------------------------------- */


/* @o's sums (av_acct_sums_to_json()'s members) into *ret; FALSE when one
 * is missing, negative or not a number. */
static gboolean
av_acct_sums_from_json(json_t *o, AvAcctSums *ret)
{
    json_t *secs = json_object_get(o, "scrub_seconds");

    memset(ret, 0, sizeof(*ret));
    for (guint i = 0; i < G_N_ELEMENTS(av_acct_sum_fields); i++) {
        json_t *v = json_object_get(o, av_acct_sum_fields[i].name);
        char *at = (char *)ret + av_acct_sum_fields[i].offset;

        /* At most 2^53: a whole read of any journal stays far below, and
         * sums added to it can then never overflow. */
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > AV_ACCT_MAX_SUM)
            return FALSE;
        if (av_acct_sum_fields[i].seconds)
            *(gint64 *)at = json_integer_value(v);
        else
            *(guint64 *)at = (guint64)json_integer_value(v);
    }
    if (!json_is_number(secs) || !isfinite(json_number_value(secs)) || json_number_value(secs) < 0 ||
        json_number_value(secs) > (double)AV_ACCT_MAX_SUM)
        return FALSE;
    ret->scrub_seconds = json_number_value(secs);
    return TRUE;
}

static gboolean
av_acct_string_or_null(json_t *v)
{
    return !v || json_is_null(v) || json_is_string(v);
}

/* Restores the state that the checkpoint entry @cp (av_journal_find_checkpoint()
 * found it) says the accounting had after its "at_seq", into the fresh
 * @acct.  Its group sums are restored only for a window from the journal's
 * start grouped by AV_ACCT_BY_TENANT (what it holds); any other window
 * must start after its "at_time" (the caller checks), where those sums are
 * outside it.  FALSE with *ret_why when a member is missing or malformed. */
static gboolean
av_acct_restore(AvAccounting *acct, json_t *cp, const char **ret_why)
{
    json_t *devices = json_object_get(cp, "devices");
    json_t *sums = json_object_get(cp, "sums");
    json_t *an = json_object_get(cp, "anomalies");
    json_t *entries = json_object_get(cp, "entries");
    json_t *lines = json_object_get(cp, "lines");
    json_int_t at_seq = json_integer_value(json_object_get(cp, "at_seq"));
    gboolean with_sums = acct->since == G_MININT64;
    json_t *item;
    size_t i;

    if (!av_journal_checkpoint_time(cp, &acct->last_time)) {
        *ret_why = "its at_time is no time";
        return FALSE;
    }
    if (!json_is_integer(entries) || json_integer_value(entries) < 1 || json_integer_value(entries) > at_seq ||
        !json_is_integer(lines) || json_integer_value(lines) < json_integer_value(entries) ||
        !json_is_object(an) || !json_is_array(devices) || !json_is_array(sums)) {
        *ret_why = "its entries, lines, anomalies, devices or sums are missing";
        return FALSE;
    }
    for (guint k = 0; k < AV_ACCT_ANOMALIES; k++) {
        json_t *v = json_object_get(an, av_acct_anomaly_ids[k]);

        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            *ret_why = "an anomaly count is missing";
            return FALSE;
        }
        acct->anomalies[k] = (guint64)json_integer_value(v);
    }
    json_array_foreach(devices, i, item) {
        const char *identity = json_string_value(json_object_get(item, "identity"));
        json_t *owner = json_object_get(item, "owner");
        json_t *since = json_object_get(item, "since");
        AvAcctDev *dev;
        AvDeviceState state;

        /* A state entered between year 1 (the earliest RFC 3339 time, as a
         * whole read parses them) and the checkpoint's at_time: an
         * interval closed later can then never overflow. */
        if (!identity || !*identity || g_hash_table_contains(acct->devices, identity) ||
            !av_device_state_from_string(json_string_value(json_object_get(item, "state")), &state) ||
            !json_is_integer(since) || json_integer_value(since) < AV_ACCT_MIN_TIME ||
            json_integer_value(since) > acct->last_time || !av_acct_string_or_null(json_object_get(item, "address")) ||
            !av_acct_string_or_null(json_object_get(item, "profile")) || !(json_is_null(owner) || json_is_object(owner))) {
            *ret_why = "a device of it is malformed or named twice";
            return FALSE;
        }
        dev = g_new0(AvAcctDev, 1);
        dev->address = g_strdup(json_string_value(json_object_get(item, "address")));
        dev->profile = g_strdup(json_string_value(json_object_get(item, "profile")));
        dev->owner = av_acct_owner_from_json(owner);
        dev->state = state;
        dev->since = json_integer_value(since);
        g_hash_table_insert(acct->devices, g_strdup(identity), dev);
    }
    if (with_sums) {
        g_return_val_if_fail(acct->by == AV_ACCT_BY_TENANT, FALSE);
        if (!av_acct_sums_from_json(json_object_get(cp, "total"), &acct->total)) {
            *ret_why = "its total is malformed";
            return FALSE;
        }
        json_array_foreach(sums, i, item) {
            const char *project = json_string_value(json_object_get(item, "project"));
            const char *user = json_string_value(json_object_get(item, "user"));
            const char *profile = json_string_value(json_object_get(item, "profile"));
            g_autofree char *key = NULL;
            AvAcctGroup *g;

            if (!project || !user || !profile || !*project || !*user || !*profile) {
                *ret_why = "a group of its sums is malformed";
                return FALSE;
            }
            key = g_strjoin("\x1f", project, user, profile, NULL);
            if (g_hash_table_contains(acct->groups, key)) {
                *ret_why = "a group of its sums is named twice";
                return FALSE;
            }
            g = g_new0(AvAcctGroup, 1);
            g->key = g_steal_pointer(&key);
            g->project = g_strdup(project);
            g->user = g_strdup(user);
            g->profile = g_strdup(profile);
            g_hash_table_insert(acct->groups, g->key, g);
            if (!av_acct_sums_from_json(item, &g->sums)) {
                *ret_why = "a group of its sums is malformed";
                return FALSE;
            }
        }
    }
    acct->entries = (guint64)json_integer_value(entries);
    acct->lineno = (guint64)json_integer_value(lines);
    acct->have_time = TRUE;
    acct->next_seq = (guint64)at_seq + 1;
    g_free(acct->prev_hash);
    acct->prev_hash = g_strdup(json_string_value(json_object_get(cp, "at_sha256")));
    acct->checkpoint_seq = (guint64)at_seq;
    return TRUE;
}

static int
av_acct_strcmp_ptr(const char *const *a, const char *const *b)
{
    return strcmp(*a, *b);
}

/* The members of a checkpoint entry for the state at acct->mark: @acct
 * was fed from the journal's start (or a checkpoint) grouped by
 * AV_ACCT_BY_TENANT over all time, and not finished (the open intervals
 * stay in the devices).  Only entries change the devices, the groups, the
 * times and every anomaly but "not_entry", so those stand as they were at
 * the mark. */
static json_t *
av_acct_checkpoint_fields(AvAccounting *acct)
{
    g_autoptr(GDateTime) dt = g_date_time_new_from_unix_utc(acct->last_time);
    g_autofree char *at_time = g_date_time_format(dt, "%Y-%m-%dT%H:%M:%SZ");
    g_autoptr(GPtrArray) ids = g_ptr_array_new();
    json_t *o = json_object(), *devices = json_array(), *sums = json_array(), *an = json_object();
    GHashTableIter it;
    gpointer k, v;

    json_object_set_new(o, "at_seq", json_integer((json_int_t)acct->mark.seq));
    json_object_set_new(o, "at_sha256", json_string(acct->mark.hash));
    json_object_set_new(o, "at_offset", json_integer((json_int_t)acct->mark.offset));
    json_object_set_new(o, "at_time", json_string(at_time));
    json_object_set_new(o, "entries", json_integer((json_int_t)acct->entries));
    json_object_set_new(o, "lines", json_integer((json_int_t)acct->mark.lineno));
    for (guint i = 0; i < AV_ACCT_ANOMALIES; i++)
        json_object_set_new(an, av_acct_anomaly_ids[i],
                            json_integer((json_int_t)(i == AV_ACCT_ANOMALY_NOT_ENTRY ? acct->mark.not_entry
                                                                                    : acct->anomalies[i])));
    json_object_set_new(o, "anomalies", an);
    /* Sorted, so that the same state writes the same line. */
    g_hash_table_iter_init(&it, acct->devices);
    while (g_hash_table_iter_next(&it, &k, NULL))
        g_ptr_array_add(ids, k);
    g_ptr_array_sort(ids, (GCompareFunc)av_acct_strcmp_ptr);
    for (guint i = 0; i < ids->len; i++) {
        const AvAcctDev *dev = g_hash_table_lookup(acct->devices, g_ptr_array_index(ids, i));
        json_t *d = json_object();

        json_object_set_new(d, "identity", json_string(g_ptr_array_index(ids, i)));
        json_object_set_new(d, "state", json_string(av_device_state_to_string(dev->state)));
        json_object_set_new(d, "since", json_integer(dev->since));
        json_object_set_new(d, "address", dev->address ? json_string(dev->address) : json_null());
        json_object_set_new(d, "profile", dev->profile ? json_string(dev->profile) : json_null());
        json_object_set_new(d, "owner", av_owner_to_json(dev->owner));
        json_array_append_new(devices, d);
    }
    json_object_set_new(o, "devices", devices);
    g_ptr_array_set_size(ids, 0);
    g_hash_table_iter_init(&it, acct->groups);
    while (g_hash_table_iter_next(&it, &k, &v))
        g_ptr_array_add(ids, k);
    g_ptr_array_sort(ids, (GCompareFunc)av_acct_strcmp_ptr);
    for (guint i = 0; i < ids->len; i++) {
        const AvAcctGroup *g = g_hash_table_lookup(acct->groups, g_ptr_array_index(ids, i));
        json_t *s = av_acct_sums_to_json(&g->sums);

        json_object_set_new(s, "project", json_string(g->project));
        json_object_set_new(s, "user", json_string(g->user));
        json_object_set_new(s, "profile", json_string(g->profile));
        json_array_append_new(sums, s);
    }
    json_object_set_new(o, "sums", sums);
    json_object_set_new(o, "total", av_acct_sums_to_json(&acct->total));
    return o;
}

/* Feeds @acct (fresh) from the checkpoint @cp at @cp_offset when it can be
 * trusted, else nothing: FALSE with *ret_why.  Trusted: the line ending
 * at its "at_offset" is the entry "at_seq" and hashes to "at_sha256", its
 * state restores (av_acct_restore()), and the lines from "at_offset" on
 * continue the chain from that line without a break, up to and past the
 * checkpoint itself (the chain covers its own line when an entry
 * follows). */
static gboolean
av_acct_from_checkpoint(AvAccounting *acct, const char *path, json_t *cp, goffset cp_offset, goffset limit,
                        gboolean tail_may_grow, const char **ret_why, GError **error)
{
    goffset at = (goffset)json_integer_value(json_object_get(cp, "at_offset"));
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) n = NULL;
    g_autofree char *line = NULL;
    g_autofree char *hash = NULL;
    gsize len = 0;

    if (!av_journal_line_before(path, at, &line, &len, &err)) {
        if (!g_error_matches(err, AV_ERROR, AV_ERROR_CORRUPT_STATE)) {
            g_propagate_error(error, g_steal_pointer(&err));
            return FALSE;
        }
        *ret_why = "no whole line ends at its at_offset";
        return FALSE;
    }
    hash = av_journal_hash(line, len);
    n = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
    if (g_strcmp0(hash, json_string_value(json_object_get(cp, "at_sha256"))) != 0 ||
        !json_is_integer(json_object_get(n, "seq")) ||
        json_integer_value(json_object_get(n, "seq")) != json_integer_value(json_object_get(cp, "at_seq"))) {
        *ret_why = "the line before its at_offset is not the entry at_seq hashing to at_sha256";
        return FALSE;
    }
    if (!av_acct_restore(acct, cp, ret_why))
        return FALSE;
    if (!av_acct_read_from(acct, path, at, limit, tail_may_grow, error))
        return FALSE;
    /* Through the last whole entry: a torn tail after it (a writer killed,
     * the next one not come yet) is a chain error a whole read reports
     * too, with the same numbers. */
    if (!acct->mark.chain_ok || acct->mark.offset <= cp_offset) {
        *ret_why = "the lines after it do not continue the chain from it";
        return FALSE;
    }
    return TRUE;
}

/* See av-accounting.h. */
AvAccounting *
av_accounting_read(const char *path, goffset limit, gint64 since, gint64 until, AvAcctBy by, gboolean checkpoints,
                   GError **error)
{
    g_autoptr(AvAccounting) acct = av_accounting_new(since, until, by);
    g_autoptr(json_t) cp = NULL;
    goffset cp_offset = 0;
    const char *why = NULL;

    /* A checkpoint at or after the window's start would count what it
     * holds again (from the start: grouped as it holds them only). */
    if (checkpoints && (since != G_MININT64 || by == AV_ACCT_BY_TENANT)) {
        if (!av_journal_find_checkpoint(path, limit, (since == G_MININT64 ? until : since) - 1, &cp, &cp_offset,
                                        error))
            return NULL;
    }
    if (cp && !av_acct_from_checkpoint(acct, path, cp, cp_offset, limit, FALSE, &why, error)) {
        if (!why)
            return NULL;
        av_accounting_free(acct);
        acct = av_accounting_new(since, until, by);
        acct->checkpoint_warning = g_strdup_printf("the journal's checkpoint at seq %" G_GINT64_FORMAT " is not "
                                                   "used (%s): read the whole journal instead",
                                                   (gint64)json_integer_value(json_object_get(cp, "at_seq")), why);
    }
    if (!cp || acct->checkpoint_warning) {
        if (!av_acct_read_from(acct, path, 0, limit, FALSE, error))
            return NULL;
    }
    av_accounting_finish(acct);
    return g_steal_pointer(&acct);
}

/* See av-accounting.h. */
gboolean
av_accounting_checkpoint(const char *path, json_t **ret_fields, guint64 *ret_new, char **ret_warning,
                         GError **error)
{
    g_autoptr(AvAccounting) acct = av_accounting_new(G_MININT64, G_MAXINT64, AV_ACCT_BY_TENANT);
    g_autoptr(json_t) cp = NULL;
    goffset cp_offset = 0, limit;
    const char *why = NULL;
    guint64 from = 0;
    g_autofree char *state_dir = g_path_get_dirname(path);

    *ret_fields = NULL;
    *ret_new = 0;
    *ret_warning = NULL;
    /* What is there now: lines appended meanwhile wait for the next one. */
    if (!av_journal_size(state_dir, &limit, error))
        return FALSE;
    if (limit == 0)
        return TRUE;
    if (!av_journal_find_checkpoint(path, limit, G_MAXINT64, &cp, &cp_offset, error))
        return FALSE;
    if (cp && av_acct_from_checkpoint(acct, path, cp, cp_offset, limit, TRUE, &why, error)) {
        from = acct->checkpoint_seq;
    } else {
        if (!why && cp)
            return FALSE;
        if (why)
            *ret_warning = g_strdup_printf("the journal's checkpoint at seq %" G_GINT64_FORMAT " is not used (%s): "
                                           "computed from the journal's start instead",
                                           (gint64)json_integer_value(json_object_get(cp, "at_seq")), why);
        av_accounting_free(acct);
        acct = av_accounting_new(G_MININT64, G_MAXINT64, AV_ACCT_BY_TENANT);
        if (!av_acct_read_from(acct, path, 0, limit, TRUE, error))
            return FALSE;
    }
    if (!acct->mark.offset || !acct->have_time)
        return TRUE;
    if (!acct->mark.chain_ok) {
        g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE,
                    "the journal '%s' does not verify (%s): no checkpoint is written over a broken chain; "
                    "'accelvirt journal verify' says where", path, acct->chain_error);
        return FALSE;
    }
    *ret_new = acct->mark.seq - from - MIN(acct->checkpoint_entries, acct->mark.seq - from);
    *ret_fields = av_acct_checkpoint_fields(acct);
    return TRUE;
}

/* Where a checkpoint entry is: its line's end (the offset of its newline)
 * and its at_offset. */
typedef struct {
    goffset end;
    goffset at;
} AvAcctCheckpointAt;

/* The checkpoint entries of the journal @path's first @limit bytes, in
 * order: whole lines whose top-level event is "checkpoint" and whose
 * at_offset is an integer before their own line (the substring test
 * first, so that other lines are not parsed).  Only where they are is
 * kept: their lines are read again one at a time. */
static GArray *
av_acct_checkpoint_entries(const char *path, goffset limit, GError **error)
{
    g_autoptr(GArray) found = g_array_new(FALSE, FALSE, sizeof(AvAcctCheckpointAt));
    g_autoptr(AvJournalReader) reader = NULL;
    AvJournalLine line;
    int r;

    r = av_journal_reader_open(path, 0, limit, &reader, error);
    while (r > 0 && (r = av_journal_reader_next(reader, &line, error)) > 0) {
        g_autoptr(json_t) e = NULL;
        json_t *at;

        if (!line.data || !line.ended || line.nul || !strstr(line.data, "\"event\":\"checkpoint\""))
            continue;
        e = json_loadb(line.data, line.len, JSON_REJECT_DUPLICATES, NULL);
        at = json_object_get(e, "at_offset");
        if (json_is_object(e) && g_strcmp0(json_string_value(json_object_get(e, "event")), "checkpoint") == 0 &&
            json_is_integer(at) && json_integer_value(at) > 0 && json_integer_value(at) <= line.offset) {
            AvAcctCheckpointAt where = { line.offset + (goffset)line.len, (goffset)json_integer_value(at) };

            g_array_append_val(found, where);
        }
    }
    if (r < 0)
        return NULL;
    return g_steal_pointer(&found);
}

/* See av-accounting.h.  One pass over the journal, its state compared
 * with each checkpoint's at the checkpoint's at_offset: the journal's
 * members (seq, time, prev, event) aside, the same fields as `journal
 * checkpoint` would write there from the start. */
gboolean
av_accounting_check_checkpoints(const char *path, goffset limit, guint *ret_checked, char **ret_problem,
                                GError **error)
{
    g_autoptr(AvAccounting) acct = av_accounting_new(G_MININT64, G_MAXINT64, AV_ACCT_BY_TENANT);
    g_autoptr(GArray) cps = av_acct_checkpoint_entries(path, limit, error);
    g_autoptr(AvJournalReader) reader = NULL;
    g_autoptr(AvJournalReader) lines = NULL;
    goffset at = 0;

    *ret_checked = 0;
    *ret_problem = NULL;
    if (!cps)
        return FALSE;
    if (cps->len == 0)
        return TRUE;
    /* Two readers forward, one fed to the accounting and one for the
     * checkpoints' own lines, so that archived segments are read once. */
    if (av_journal_reader_open(path, 0, limit, &reader, error) <= 0 ||
        av_journal_reader_open(path, 0, limit, &lines, error) <= 0) {
        if (error && !*error)
            g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE, "the journal '%s' changed while it was read",
                        path);
        return FALSE;
    }
    for (guint i = 0; i < cps->len; i++) {
        const AvAcctCheckpointAt *where = &g_array_index(cps, AvAcctCheckpointAt, i);
        goffset next = where->at;
        g_autoptr(json_t) want = NULL;
        g_autoptr(json_t) have = NULL;
        g_autofree char *line = NULL;
        json_t *cp, *value;
        json_int_t seq;
        const char *key;
        gsize len = 0;
        AvJournalLine l = { 0 };
        int r;

        while ((r = av_journal_reader_next(lines, &l, error)) > 0 && l.offset + (goffset)l.len < where->end)
            ;
        if (r < 0)
            return FALSE;
        if (r > 0 && l.data && l.offset + (goffset)l.len == where->end) {
            line = g_strndup(l.data, l.len);
            len = l.len;
        }
        want = cp = line ? json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL) : NULL;
        if (!json_is_object(cp)) {
            g_set_error(error, AV_ERROR, AV_ERROR_CORRUPT_STATE, "the journal '%s' changed while it was read",
                        path);
            return FALSE;
        }

        if (next < at) {
            *ret_problem = g_strdup_printf("the checkpoint at seq %" G_GINT64_FORMAT " covers less than the one "
                                           "before it", (gint64)json_integer_value(json_object_get(cp, "seq")));
            return TRUE;
        }
        if (!av_acct_feed(acct, reader, next, TRUE, error))
            return FALSE;
        at = next;
        have = av_acct_checkpoint_fields(acct);
        seq = json_integer_value(json_object_get(cp, "seq"));
        for (const char *const *k = (const char *const[]){ "seq", "time", "prev", "event", NULL }; *k; k++)
            json_object_del(want, *k);
        json_object_foreach(want, key, value) {
            if (!json_equal(value, json_object_get(have, key)))
                break;
        }
        if (!key && json_object_size(want) != json_object_size(have))
            key = "its members";
        if (key) {
            *ret_problem = g_strdup_printf("the checkpoint at seq %" G_GINT64_FORMAT " (the state after seq %"
                                           G_GINT64_FORMAT ") does not hold what the entries before it add up to "
                                           "(%s differs)", (gint64)seq,
                                           (gint64)json_integer_value(json_object_get(cp, "at_seq")), key);
            return TRUE;
        }
        (*ret_checked)++;
    }
    return TRUE;
}

/* See av-accounting.h. */
guint64
av_accounting_checkpoint_seq(const AvAccounting *acct)
{
    return acct->checkpoint_seq;
}

/* See av-accounting.h. */
const char *
av_accounting_checkpoint_warning(const AvAccounting *acct)
{
    return acct->checkpoint_warning;
}
