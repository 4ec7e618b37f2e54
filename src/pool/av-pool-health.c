/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: a device's health judged against its profile's limits
 * (see av-pool.h, av_pool_health_check(), and
 * accelvirt-policy(5), HEALTH).  The readings are the kernel's
 * (src/pci/av-health.c); the failure counts are the pool's. */
#include "config.h"

#include "av-pool-private.h"

#include "util/av-error.h"
#include "util/av-json.h"

/* See av-pool.h. */
const char *
av_health_verdict_to_string(AvHealthVerdict verdict)
{
    switch (verdict) {
    case AV_HEALTH_WARN:
        return "warn";
    case AV_HEALTH_OVER:
        return "over";
    case AV_HEALTH_OK:
    default:
        return "ok";
    }
}

/* See av-pool.h. */
json_t *
av_pool_health_to_json(const AvPciHealth *health, gboolean speed_too)
{
    json_t *o = json_object();

    if (health->aer)
        json_object_set_new(o, "aer",
                            json_pack("{s:I, s:I, s:I, s:o}", "correctable", (json_int_t)health->correctable,
                                      "nonfatal", (json_int_t)health->nonfatal, "fatal", (json_int_t)health->fatal,
                                      "from", av_json_string_or_null(health->aer_from)));
    else
        json_object_set_new(o, "aer", json_null());
    if (health->link)
        json_object_set_new(o, "link",
                            json_pack("{s:i, s:i, s:f, s:f, s:o, s:b, s:o}", "width", (int)health->width, "max_width",
                                      (int)health->max_width, "speed_gts", health->speed_gts, "max_speed_gts",
                                      health->max_speed_gts, "from", av_json_string_or_null(health->link_from),
                                      "degraded", av_pci_health_link_degraded(health, speed_too), "problem",
                                      av_json_string_or_null(av_pci_health_link_problem(health, speed_too))));
    else
        json_object_set_new(o, "link", json_null());
    return o;
}

/* Adds "N WHAT[ (its PF FROM's counts)], the profile allows LIMIT" to
 * @over when @count is over @limit (-1: not checked); @from (may be NULL)
 * is the PF whose counters a VF's are. */
static void
judge_count(GPtrArray *over, guint64 count, gint64 limit, const char *one, const char *many, const char *from)
{
    g_autofree char *whose = from ? g_strdup_printf(" (its PF %s's counts)", from) : g_strdup("");

    if (limit < 0 || count <= (guint64)limit)
        return;
    g_ptr_array_add(over, g_strdup_printf("%" G_GUINT64_FORMAT " %s%s, the profile allows %" G_GINT64_FORMAT, count,
                                          count == 1 ? one : many, whose, limit));
}

/* Adds to @over, when @health has no AER reporting (neither the device
 * nor a VF's PF) and @h limits AER counts, that those limits cannot be
 * checked: in doubt, over (accelvirt-policy(5), HEALTH).  A policy cannot
 * refuse such a limit at load: which devices it will match is not known
 * then. */
static void
judge_no_aer(GPtrArray *over, const AvPciHealth *health, const AvHealthLimits *h)
{
    g_autoptr(GString) names = g_string_new(NULL);
    guint n = 0;
    const struct {
        gint64 limit;
        const char *name;
    } limits[] = { { h->fatal_aer, "fatal_aer" }, { h->nonfatal_aer, "nonfatal_aer" },
                   { h->correctable_aer, "correctable_aer" } };

    if (health->aer)
        return;
    for (gsize i = 0; i < G_N_ELEMENTS(limits); i++) {
        if (limits[i].limit < 0)
            continue;
        g_string_append_printf(names, "%s'%s'", n ? ", " : "", limits[i].name);
        n++;
    }
    if (n)
        g_ptr_array_add(over, g_strdup_printf("no AER reporting: the %s %s cannot be checked",
                                              n == 1 ? "limit" : "limits", names->str));
}

/* See av-pool.h. */
AvHealthVerdict
av_pool_health_judge(const AvPoolDevice *dev, const AvProfile *profile, const AvPciHealth *health,
                     char **ret_findings)
{
    g_autoptr(GPtrArray) over = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GPtrArray) warn = g_ptr_array_new_with_free_func(g_free);
    const AvHealthLimits *h;
    AvHealthVerdict verdict;

    *ret_findings = NULL;
    if (!profile || !profile->health.set)
        return AV_HEALTH_OK;
    h = &profile->health;
    if (!health) {
        *ret_findings = g_strdup("its health cannot be read and its profile has limits");
        return AV_HEALTH_OVER;
    }
    if (health->aer) {
        judge_count(over, health->fatal, h->fatal_aer, "fatal AER error", "fatal AER errors", health->aer_from);
        judge_count(over, health->nonfatal, h->nonfatal_aer, "non-fatal AER error", "non-fatal AER errors",
                    health->aer_from);
        judge_count(over, health->correctable, h->correctable_aer, "correctable AER error",
                    "correctable AER errors", health->aer_from);
    }
    judge_no_aer(over, health, h);
    judge_count(over, dev->scrub_failures, h->scrub_failures, "failed scrub since enrolment",
                "failed scrubs since enrolment", NULL);
    judge_count(over, dev->reset_failures, h->reset_failures, "failed reset since enrolment",
                "failed resets since enrolment", NULL);
    if (h->degraded_link != AV_HEALTH_LINK_IGNORE && av_pci_health_link_degraded(health, h->link_speed)) {
        g_autofree char *link = av_pci_health_link_describe(health);

        g_ptr_array_add(h->degraded_link == AV_HEALTH_LINK_QUARANTINE ? over : warn,
                        g_strdup_printf("%s (%s)%s", av_pci_health_link_problem(health, h->link_speed), link,
                                        h->degraded_link == AV_HEALTH_LINK_QUARANTINE
                                            ? ", the profile quarantines a degraded link" : ""));
    }
    if (over->len == 0 && warn->len == 0)
        return AV_HEALTH_OK;
    verdict = over->len > 0 ? AV_HEALTH_OVER : AV_HEALTH_WARN;
    for (guint i = 0; i < warn->len; i++)
        g_ptr_array_add(over, g_strdup(g_ptr_array_index(warn, i)));
    g_ptr_array_add(over, NULL);
    *ret_findings = g_strjoinv("; ", (char **)over->pdata);
    return verdict;
}

/* See av-pool.h. */
gboolean
av_pool_health_check(AvPool *pool, AvPoolDevice *dev, const AvProfile *profile, const AvRoot *root,
                     gboolean *ret_quarantined, char **ret_warning, GError **error)
{
    g_autoptr(GError) read_error = NULL;
    g_autoptr(json_t) fields = NULL;
    g_autofree char *findings = NULL;
    AvPciHealth health = { 0 };
    gboolean readable = FALSE;
    AvHealthVerdict verdict;

    if (ret_quarantined)
        *ret_quarantined = FALSE;
    if (ret_warning)
        *ret_warning = NULL;
    if (!profile || !profile->health.set)
        return TRUE;
    if (dev->state != AV_DEVICE_STATE_FREE && dev->state != AV_DEVICE_STATE_DIRTY &&
        dev->state != AV_DEVICE_STATE_SCRUBBING)
        return TRUE;
    if (dev->kind != AV_DEVICE_KIND_PCI || !dev->address)
        g_set_error(&read_error, AV_ERROR, AV_ERROR_INVALID_INPUT, "device %s is not a PCI function with an address",
                    dev->identity);
    else
        readable = av_pci_health_read(root, dev->address, &health, &read_error);
    verdict = av_pool_health_judge(dev, profile, readable ? &health : NULL, &findings);
    if (verdict == AV_HEALTH_OK) {
        av_pci_health_clear(&health);
        return TRUE;
    }

    /* The reading and the verdict, before any transition. */
    fields = json_object();
    if (readable)
        json_object_set_new(fields, "reading", av_pool_health_to_json(&health, profile->health.link_speed));
    else
        json_object_set_new(fields, "reading", json_pack("{s:s}", "error", read_error->message));
    json_object_set_new(fields, "failures",
                        json_pack("{s:I, s:I, s:I}", "scrub", (json_int_t)dev->scrub_failures, "reset",
                                  (json_int_t)dev->reset_failures, "since",
                                  (json_int_t)(dev->failures_since ? dev->failures_since : dev->first_seen)));
    json_object_set_new(fields, "verdict", json_string(av_health_verdict_to_string(verdict)));
    json_object_set_new(fields, "findings", json_string(findings));
    av_pci_health_clear(&health);
    if (!av_pool_journal_device(pool, "health", dev, fields, error))
        return FALSE;
    if (verdict == AV_HEALTH_WARN) {
        if (ret_warning)
            *ret_warning = g_steal_pointer(&findings);
        return TRUE;
    }
    {
        g_autofree char *reason = readable ? g_strdup_printf("health: %s", findings)
                                           : g_strdup_printf("health: %s: %s", findings, read_error->message);

        if (!av_pool_quarantine_health(pool, dev, reason, error))
            return FALSE;
    }
    if (ret_quarantined)
        *ret_quarantined = TRUE;
    return TRUE;
}

/* See av-pool.h. */
void
av_pool_count_scrub_failure(AvPoolDevice *dev, gboolean reset)
{
    if (dev->scrub_failures < G_MAXUINT32)
        dev->scrub_failures++;
    if (reset && dev->reset_failures < dev->scrub_failures)
        dev->reset_failures++;
    if (!dev->failures_since)
        dev->failures_since = dev->first_seen;
}
