/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: device time from the journal (see av-accounting.h). */
#include "config.h"

#include "ledger/av-accounting.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pool/av-pool.h"
#include "util/av-error.h"
#include "util/av-json.h"

/* The longest line read; the journal's writers never write one longer
 * (av-journal.c AV_JOURNAL_MAX_LINE). */
#define AV_ACCT_MAX_LINE (16 * 1024 * 1024)

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
    "torn-line", "vfs-set", "vfs-set-failed", "violation",
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
    case AV_ACCT_BY_OWNER:
    default: key = g_strjoin("\x1f", uuid, project, user, profile, NULL); break;
    }
    g = g_hash_table_lookup(acct->groups, key);
    if (!g) {
        g = g_new0(AvAcctGroup, 1);
        g->key = g_steal_pointer(&key);
        if (acct->by == AV_ACCT_BY_DOMAIN || acct->by == AV_ACCT_BY_OWNER)
            g->domain = g_strdup(uuid);
        if (acct->by == AV_ACCT_BY_PROJECT || acct->by == AV_ACCT_BY_OWNER)
            g->project = g_strdup(project);
        if (acct->by == AV_ACCT_BY_USER || acct->by == AV_ACCT_BY_OWNER)
            g->user = g_strdup(user);
        if (acct->by == AV_ACCT_BY_PROFILE || acct->by == AV_ACCT_BY_OWNER)
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

/* See av-accounting.h.  One line in memory at a time (getline). */
gboolean
av_accounting_read_journal(AvAccounting *acct, const char *path, GError **error)
{
    g_autofree char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    FILE *f;

    f = fopen(path, "re");
    if (!f) {
        if (errno == ENOENT) {
            av_accounting_finish(acct);
            return TRUE;
        }
        return av_error_errno(error, -errno, "cannot read the journal '%s'", path);
    }
    while ((n = getline(&line, &cap, f)) >= 0) {
        gsize len = (gsize)n;
        gboolean ended = len > 0 && line[len - 1] == '\n';

        if (ended)
            len--;
        if (!ended && len == 0)
            break;
        if (len > AV_ACCT_MAX_LINE || memchr(line, '\0', len) || !ended) {
            /* A torn last line, a NUL, a line no writer writes. */
            acct->lineno++;
            acct->anomalies[AV_ACCT_ANOMALY_NOT_ENTRY]++;
            if (!acct->chain_error)
                acct->chain_error = g_strdup_printf("line %" G_GUINT64_FORMAT ": not a journal entry",
                                                    acct->lineno);
            continue;
        }
        av_accounting_feed_line(acct, line, len);
    }
    if (ferror(f)) {
        int e = errno;

        fclose(f);
        return av_error_errno(error, -e, "cannot read the journal '%s'", path);
    }
    fclose(f);
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

/* See av-accounting.h. */
json_t *
av_acct_sums_to_json(const AvAcctSums *s)
{
    json_t *o = json_object();

    json_object_set_new(o, "in_use_s", json_integer(s->in_use_s));
    json_object_set_new(o, "claimed_s", json_integer(s->claimed_s));
    json_object_set_new(o, "dirty_s", json_integer(s->dirty_s));
    json_object_set_new(o, "scrubbing_s", json_integer(s->scrubbing_s));
    json_object_set_new(o, "quarantined_s", json_integer(s->quarantined_s));
    json_object_set_new(o, "claims", json_integer((json_int_t)s->claims));
    json_object_set_new(o, "releases", json_integer((json_int_t)s->releases));
    json_object_set_new(o, "attaches", json_integer((json_int_t)s->attaches));
    json_object_set_new(o, "detaches", json_integer((json_int_t)s->detaches));
    json_object_set_new(o, "scrubs_passed", json_integer((json_int_t)s->scrubs_passed));
    json_object_set_new(o, "scrubs_failed", json_integer((json_int_t)s->scrubs_failed));
    json_object_set_new(o, "quarantines", json_integer((json_int_t)s->quarantines));
    json_object_set_new(o, "scrub_seconds", json_real(s->scrub_seconds));
    return o;
}
