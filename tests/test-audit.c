/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: the audit of the pool against running domains (issue 14,
 * src/audit/av-audit.c), on fake pools. */
#include "config.h"

#include <string.h>

#include "av-test.h"
#include "audit/av-audit.h"
#include "pool/av-pool-private.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "util/av-names.h"

#define UUID_D "11111111-1111-4111-8111-111111111111"
#define UUID_E "22222222-2222-4222-8222-222222222222"
#define MDEV_UUID "33333333-3333-4333-8333-333333333333"

typedef struct {
    char *tmp;
    char *state;
    AvPool *pool;
    GPtrArray *domains;          /* AvAuditDomain* */
    GPtrArray *findings;         /* of the last audit */
} Fixture;

static void
fixture_set_up(Fixture *f, gconstpointer data)
{
    g_autoptr(GError) err = NULL;

    (void)data;
    f->tmp = av_test_tmpdir();
    f->state = g_build_filename(f->tmp, "state", NULL);
    f->pool = av_pool_open(f->state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    f->domains = g_ptr_array_new_with_free_func((GDestroyNotify)av_audit_domain_free);
}

static void
fixture_tear_down(Fixture *f, gconstpointer data)
{
    (void)data;
    av_pool_free(f->pool);
    g_ptr_array_unref(f->domains);
    if (f->findings)
        g_ptr_array_unref(f->findings);
    av_test_tmpdir_remove(f->tmp);
    g_free(f->tmp);
    g_free(f->state);
}

/* A PCI device "dsn:N" at 0000:NN:00.0 in @state, held by @owner_uuid
 * (NULL: nobody). */
static AvPoolDevice *
add_pci(Fixture *f, guint n, AvDeviceState state, const char *owner_uuid)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvOwner) owner = owner_uuid ? av_owner_new(owner_uuid, g_str_equal(owner_uuid, UUID_D) ? "d" : "e")
                                          : NULL;
    g_autofree char *identity = g_strdup_printf("dsn:10de:2236:%016x.f0", n);
    g_autofree char *address = g_strdup_printf("0000:%02x:00.0", n);
    AvPoolDevice *dev = av_pool_add(f->pool, AV_DEVICE_KIND_PCI, identity, address, "gpu", state, owner, &err);

    g_assert_no_error(err);
    if (state == AV_DEVICE_STATE_QUARANTINED)
        dev->reason = g_strdup("scrub step 'zero' failed");
    return dev;
}

/* A running domain naming the PCI devices 0000:NN:00.0 of the numbers
 * after @name (-1 ends them); the fixture owns it. */
static AvAuditDomain *
add_domain(Fixture *f, const char *uuid, const char *name, ...)
{
    AvAuditDomain *domain = av_audit_domain_new(uuid, name, 0);
    va_list ap;
    int n;

    va_start(ap, name);
    while ((n = va_arg(ap, int)) >= 0) {
        g_autofree char *address = g_strdup_printf("0000:%02x:00.0", n);

        av_audit_domain_add_pci(domain, address);
    }
    va_end(ap);
    g_ptr_array_add(f->domains, domain);
    return domain;
}

static void
run_audit(Fixture *f, const GPtrArray *usb, AvAuditInFlightFunc in_flight, AvAuditFlags flags, gboolean *dirtied)
{
    g_autoptr(GError) err = NULL;

    if (f->findings)
        g_ptr_array_unref(f->findings);
    f->findings = NULL;
    g_assert_true(av_pool_audit(f->pool, f->domains, usb, in_flight, "audit", flags, &f->findings, dirtied, &err));
    g_assert_no_error(err);
    g_assert_nonnull(f->findings);
}

static const AvAuditFinding *
finding(Fixture *f, guint i)
{
    g_assert_cmpuint(i, <, f->findings->len);
    return g_ptr_array_index(f->findings, i);
}

/* How many journal entries of @event there are; the last one to
 * *ret_last (may be NULL; the caller unrefs it). */
static guint
count_events(Fixture *f, const char *event, json_t **ret_last)
{
    g_autoptr(GPtrArray) entries = NULL;
    g_autoptr(GError) err = NULL;
    guint n = 0;

    g_assert_true(av_journal_read(f->state, &entries, &err));
    g_assert_no_error(err);
    for (guint i = 0; i < entries->len; i++) {
        json_t *e = g_ptr_array_index(entries, i);

        if (g_strcmp0(json_string_value(json_object_get(e, "event")), event) != 0)
            continue;
        n++;
        if (ret_last) {
            json_decref(*ret_last);
            *ret_last = json_incref(e);
        }
    }
    return n;
}

static guint
journal_len(Fixture *f)
{
    g_autoptr(GPtrArray) entries = NULL;
    g_autoptr(GError) err = NULL;

    g_assert_true(av_journal_read(f->state, &entries, &err));
    g_assert_no_error(err);
    return entries->len;
}

/* Audits again: no finding, nothing journalled. */
static void
assert_idempotent(Fixture *f)
{
    guint before = journal_len(f);

    run_audit(f, NULL, NULL, AV_AUDIT_DEFAULT, NULL);
    g_assert_cmpuint(f->findings->len, ==, 0);
    g_assert_cmpuint(journal_len(f), ==, before);
}

/* --- the rules ------------------------------------------------------------------------- */

static void
test_own_device(Fixture *f, gconstpointer data)
{
    AvPoolDevice *dev = add_pci(f, 1, AV_DEVICE_STATE_IN_USE, UUID_D);

    (void)data;
    add_domain(f, UUID_D, "d", 1, 9, -1);       /* 9: not a pool device (a NIC, a companion) */
    run_audit(f, NULL, NULL, AV_AUDIT_ALL, NULL);
    g_assert_cmpuint(f->findings->len, ==, 0);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_IN_USE);
}

static void
test_attached_free(Fixture *f, gconstpointer data)
{
    AvPoolDevice *dev = add_pci(f, 1, AV_DEVICE_STATE_FREE, NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) entry = NULL;

    (void)data;
    add_domain(f, UUID_D, "d", 1, -1);
    run_audit(f, NULL, NULL, AV_AUDIT_ALL, NULL);
    g_assert_cmpuint(f->findings->len, ==, 1);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_ATTACHED_OUTSIDE);
    g_assert_cmpint(finding(f, 0)->from, ==, AV_DEVICE_STATE_FREE);
    g_assert_cmpint(finding(f, 0)->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpstr(finding(f, 0)->domain_uuid, ==, UUID_D);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpstr(dev->owner->domain_uuid, ==, UUID_D);
    g_assert_cmpstr(dev->owner->domain_name, ==, "d");
    g_assert_cmpuint(count_events(f, "attached-outside", &entry), ==, 1);
    g_assert_cmpstr(json_string_value(json_object_get(entry, "domain_uuid")), ==, UUID_D);
    g_assert_cmpstr(json_string_value(json_object_get(entry, "from")), ==, "free");
    g_assert_cmpstr(json_string_value(json_object_get(entry, "by")), ==, "audit");
    g_assert_cmpstr(json_string_value(json_object_get(entry, "address")), ==, "0000:01:00.0");
    /* Saved: another opener sees it. */
    av_pool_free(g_steal_pointer(&f->pool));
    f->pool = av_pool_open(f->state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    dev = av_pool_find_address(f->pool, AV_DEVICE_KIND_PCI, "0000:01:00.0");
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_IN_USE);
    assert_idempotent(f);
}

static void
test_attached_claimed(Fixture *f, gconstpointer data)
{
    AvPoolDevice *dev = add_pci(f, 1, AV_DEVICE_STATE_CLAIMED, UUID_D);

    (void)data;
    add_domain(f, UUID_D, "d", 1, -1);
    run_audit(f, NULL, NULL, AV_AUDIT_DEFAULT, NULL);
    g_assert_cmpuint(f->findings->len, ==, 1);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_ATTACHED_OUTSIDE);
    g_assert_cmpint(finding(f, 0)->from, ==, AV_DEVICE_STATE_CLAIMED);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpstr(dev->owner->domain_uuid, ==, UUID_D);
    assert_idempotent(f);
}

/* A device D's live XML names in @state (held by @owner): a violation,
 * journalled, quarantined with a reason naming D, and caught once. */
static void
check_violation(Fixture *f, AvDeviceState state, const char *owner)
{
    AvPoolDevice *dev = add_pci(f, 1, state, owner);
    g_autoptr(json_t) entry = NULL;
    g_autofree char *reason = NULL;
    json_t *held;

    add_domain(f, UUID_D, "d", 1, -1);
    run_audit(f, NULL, NULL, AV_AUDIT_DEFAULT, NULL);
    g_assert_cmpuint(f->findings->len, ==, 1);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_VIOLATION);
    g_assert_cmpint(finding(f, 0)->from, ==, state);
    g_assert_cmpint(finding(f, 0)->state, ==, AV_DEVICE_STATE_QUARANTINED);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_QUARANTINED);
    g_assert_nonnull(strstr(dev->reason, UUID_D));
    g_assert_nonnull(strstr(dev->reason, "behind accelvirt's back"));
    g_assert_nonnull(strstr(dev->reason, av_device_state_to_string(state)));
    /* Whoever held it still does: its own release finds it quarantined. */
    if (owner)
        g_assert_cmpstr(dev->owner->domain_uuid, ==, owner);
    g_assert_cmpuint(count_events(f, "violation", &entry), ==, 1);
    g_assert_cmpstr(json_string_value(json_object_get(entry, "domain_uuid")), ==, UUID_D);
    g_assert_cmpstr(json_string_value(json_object_get(entry, "domain_name")), ==, "d");
    g_assert_cmpstr(json_string_value(json_object_get(entry, "identity")), ==, dev->identity);
    g_assert_cmpstr(json_string_value(json_object_get(entry, "address")), ==, "0000:01:00.0");
    g_assert_cmpstr(json_string_value(json_object_get(entry, "state")), ==, av_device_state_to_string(state));
    held = json_object_get(entry, "owner");
    if (owner)
        g_assert_cmpstr(json_string_value(json_object_get(held, "domain_uuid")), ==, owner);
    else
        g_assert_true(json_is_null(held));
    reason = g_strdup(dev->reason);
    assert_idempotent(f);
    g_assert_cmpstr(dev->reason, ==, reason);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_QUARANTINED);
}

/* The state and owner of a device D's live XML names, for
 * test_violation(). */
typedef struct {
    AvDeviceState state;
    const char *owner;
} Violation;

static const Violation violation_dirty = { AV_DEVICE_STATE_DIRTY, UUID_E };
/* D's own dirty device back in D before its scrub: its scrub would run
 * under D; refused all the same. */
static const Violation violation_dirty_own = { AV_DEVICE_STATE_DIRTY, UUID_D };
static const Violation violation_claimed_other = { AV_DEVICE_STATE_CLAIMED, UUID_E };
static const Violation violation_in_use_other = { AV_DEVICE_STATE_IN_USE, UUID_E };
static const Violation violation_scrubbing = { AV_DEVICE_STATE_SCRUBBING, UUID_E };

static void
test_violation(Fixture *f, gconstpointer data)
{
    const Violation *v = data;

    check_violation(f, v->state, v->owner);
}

static void
test_violation_quarantined(Fixture *f, gconstpointer data)
{
    AvPoolDevice *dev;

    (void)data;
    check_violation(f, AV_DEVICE_STATE_QUARANTINED, NULL);
    dev = av_pool_find_address(f->pool, AV_DEVICE_KIND_PCI, "0000:01:00.0");
    /* The first reason is kept in the new one. */
    g_assert_nonnull(strstr(dev->reason, "scrub step 'zero' failed"));
    g_assert_cmpuint(count_events(f, "quarantine-reason", NULL), ==, 1);
}

static void
test_violation_missing(Fixture *f, gconstpointer data)
{
    AvPoolDevice *dev = add_pci(f, 1, AV_DEVICE_STATE_DIRTY, UUID_E);
    g_autoptr(GError) err = NULL;

    (void)data;
    g_assert_true(av_pool_transition(f->pool, dev, AV_DEVICE_STATE_MISSING, NULL, NULL, &err));
    g_assert_no_error(err);
    add_domain(f, UUID_D, "d", 1, -1);
    run_audit(f, NULL, NULL, AV_AUDIT_DEFAULT, NULL);
    g_assert_cmpuint(f->findings->len, ==, 1);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_VIOLATION);
    g_assert_cmpint(finding(f, 0)->from, ==, AV_DEVICE_STATE_MISSING);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_MISSING);
    /* It comes back quarantined, never dirty (then free). */
    g_assert_cmpint(dev->state_before_missing, ==, AV_DEVICE_STATE_QUARANTINED);
    g_assert_nonnull(strstr(dev->reason_before_missing, UUID_D));
    g_assert_cmpuint(count_events(f, "quarantined-while-missing", NULL), ==, 1);
    assert_idempotent(f);
}

static void
test_identity_problem(Fixture *f, gconstpointer data)
{
    AvPoolDevice *dev = add_pci(f, 1, AV_DEVICE_STATE_CLAIMED, UUID_D);

    (void)data;
    dev->identity_problem = g_strdup("its DSN changed while it was claimed");
    add_domain(f, UUID_D, "d", 1, -1);
    run_audit(f, NULL, NULL, AV_AUDIT_DEFAULT, NULL);
    g_assert_cmpuint(f->findings->len, ==, 1);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_VIOLATION);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_QUARANTINED);
    assert_idempotent(f);
}

static void
test_scrub_vm(Fixture *f, gconstpointer data)
{
    AvPoolDevice *dev = add_pci(f, 1, AV_DEVICE_STATE_SCRUBBING, UUID_E);
    g_autoptr(GError) err = NULL;
    g_autofree char *token = av_scrub_token_random(&err);

    (void)data;
    g_assert_no_error(err);
    g_assert_true(av_pool_scrub_token_set(dev, token, &err));
    g_assert_no_error(err);
    /* The scrub VM made for it holds it: nothing to say. */
    add_domain(f, dev->scrub_domain, "accelvirt-scrub-1", 1, -1);
    run_audit(f, NULL, NULL, AV_AUDIT_ALL, NULL);
    g_assert_cmpuint(f->findings->len, ==, 0);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_SCRUBBING);
    /* Another domain holding it too is a violation. */
    add_domain(f, UUID_D, "d", 1, -1);
    run_audit(f, NULL, NULL, AV_AUDIT_ALL, NULL);
    g_assert_cmpuint(f->findings->len, ==, 1);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_VIOLATION);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_QUARANTINED);
}

static void
test_detached(Fixture *f, gconstpointer data)
{
    AvPoolDevice *kept = add_pci(f, 1, AV_DEVICE_STATE_IN_USE, UUID_D);
    AvPoolDevice *gone = add_pci(f, 2, AV_DEVICE_STATE_IN_USE, UUID_D);
    g_autoptr(json_t) entry = NULL;
    gboolean dirtied = FALSE;

    (void)data;
    add_domain(f, UUID_D, "d", 1, -1);
    run_audit(f, NULL, NULL, AV_AUDIT_DEFAULT, &dirtied);
    g_assert_cmpuint(f->findings->len, ==, 1);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_DETACHED_OUTSIDE);
    g_assert_cmpstr(finding(f, 0)->identity, ==, gone->identity);
    g_assert_cmpint(finding(f, 0)->state, ==, AV_DEVICE_STATE_DIRTY);
    g_assert_true(dirtied);
    g_assert_cmpint(kept->state, ==, AV_DEVICE_STATE_IN_USE);
    /* Released, never free: the worker scrubs it. */
    g_assert_cmpint(gone->state, ==, AV_DEVICE_STATE_DIRTY);
    g_assert_cmpstr(gone->owner->domain_uuid, ==, UUID_D);
    g_assert_cmpuint(count_events(f, "detached-outside", &entry), ==, 1);
    g_assert_cmpstr(json_string_value(json_object_get(entry, "domain_uuid")), ==, UUID_D);
    g_clear_pointer(&entry, json_decref);
    g_assert_cmpuint(count_events(f, "transition", &entry), >=, 1);
    g_assert_cmpstr(json_string_value(json_object_get(entry, "released_by")), ==, "audit");
    g_assert_cmpstr(json_string_value(json_object_get(entry, "to")), ==, "dirty");
    assert_idempotent(f);
}

static gboolean
in_flight_all(const char *state_dir, const char *identity)
{
    (void)state_dir;
    return g_str_has_prefix(identity, "dsn:");
}

static void
test_in_flight(Fixture *f, gconstpointer data)
{
    AvPoolDevice *gone = add_pci(f, 2, AV_DEVICE_STATE_IN_USE, UUID_D);
    AvPoolDevice *coming = add_pci(f, 3, AV_DEVICE_STATE_CLAIMED, UUID_D);
    guint before = journal_len(f);

    (void)data;
    add_domain(f, UUID_D, "d", 3, -1);
    run_audit(f, NULL, in_flight_all, AV_AUDIT_DEFAULT, NULL);
    g_assert_cmpuint(f->findings->len, ==, 0);
    g_assert_cmpint(gone->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpint(coming->state, ==, AV_DEVICE_STATE_CLAIMED);
    g_assert_cmpuint(journal_len(f), ==, before);
}

static void
test_not_running(Fixture *f, gconstpointer data)
{
    AvPoolDevice *dev = add_pci(f, 1, AV_DEVICE_STATE_IN_USE, UUID_E);
    guint before = journal_len(f);

    (void)data;
    add_domain(f, UUID_D, "d", -1);
    /* Only D audited (watch's event for D): E's device is not its business. */
    run_audit(f, NULL, NULL, AV_AUDIT_DEFAULT, NULL);
    g_assert_cmpuint(f->findings->len, ==, 0);
    /* All the running domains: E is not among them. */
    run_audit(f, NULL, NULL, AV_AUDIT_ALL, NULL);
    g_assert_cmpuint(f->findings->len, ==, 1);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_NOT_RUNNING);
    g_assert_cmpstr(finding(f, 0)->domain_uuid, ==, UUID_E);
    g_assert_cmpint(finding(f, 0)->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpuint(journal_len(f), ==, before);
}

static void
test_unreadable(Fixture *f, gconstpointer data)
{
    AvPoolDevice *dev = add_pci(f, 1, AV_DEVICE_STATE_IN_USE, UUID_D);
    AvAuditDomain *domain;

    (void)data;
    domain = add_domain(f, UUID_D, "d", -1);
    domain->unreadable = g_strdup("its live XML does not parse");
    run_audit(f, NULL, NULL, AV_AUDIT_ALL, NULL);
    g_assert_cmpuint(f->findings->len, ==, 1);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_UNRESOLVED);
    g_assert_nonnull(strstr(finding(f, 0)->detail, "does not parse"));
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_IN_USE);
}

/* A hostdev the lenient reader could not tell: the devices the domain does
 * name are audited (a free one becomes in use by it), but none in use by it
 * is taken for detached: the unreadable hostdev may be that device. */
static void
test_unresolved_hostdev(Fixture *f, gconstpointer data)
{
    AvPoolDevice *in_use = add_pci(f, 1, AV_DEVICE_STATE_IN_USE, UUID_D);
    AvPoolDevice *free_dev = add_pci(f, 2, AV_DEVICE_STATE_FREE, NULL);
    AvAuditDomain *domain;

    (void)data;
    domain = add_domain(f, UUID_D, "d", 2, -1);
    av_audit_domain_add_unresolved(domain, "hostdev 1: PCI address bus '0x1ff' is not a number this reader takes");
    run_audit(f, NULL, NULL, AV_AUDIT_ALL, NULL);
    g_assert_cmpuint(f->findings->len, ==, 2);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_UNRESOLVED);
    g_assert_nonnull(strstr(finding(f, 0)->detail, "bus '0x1ff'"));
    g_assert_cmpint(finding(f, 1)->action, ==, AV_AUDIT_ATTACHED_OUTSIDE);
    g_assert_true(av_audit_findings_unresolved(f->findings));
    g_assert_cmpint(in_use->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpint(free_dev->state, ==, AV_DEVICE_STATE_IN_USE);
}

static void
test_dry_run(Fixture *f, gconstpointer data)
{
    AvPoolDevice *free_dev = add_pci(f, 1, AV_DEVICE_STATE_FREE, NULL);
    AvPoolDevice *dirty = add_pci(f, 2, AV_DEVICE_STATE_DIRTY, UUID_E);
    AvPoolDevice *gone = add_pci(f, 3, AV_DEVICE_STATE_IN_USE, UUID_D);
    g_autoptr(GError) err = NULL;
    g_autofree char *path = g_build_filename(f->state, "pool.json", NULL);
    g_autofree char *saved = NULL;
    g_autofree char *after = NULL;
    guint before;

    (void)data;
    g_assert_true(av_pool_save(f->pool, &err));
    g_assert_no_error(err);
    g_assert_true(g_file_get_contents(path, &saved, NULL, NULL));
    before = journal_len(f);
    add_domain(f, UUID_D, "d", 1, 2, -1);
    run_audit(f, NULL, NULL, AV_AUDIT_DRY_RUN | AV_AUDIT_ALL, NULL);
    g_assert_cmpuint(f->findings->len, ==, 3);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_ATTACHED_OUTSIDE);
    g_assert_cmpint(finding(f, 1)->action, ==, AV_AUDIT_VIOLATION);
    g_assert_cmpint(finding(f, 2)->action, ==, AV_AUDIT_DETACHED_OUTSIDE);
    g_assert_cmpint(free_dev->state, ==, AV_DEVICE_STATE_FREE);
    g_assert_cmpint(dirty->state, ==, AV_DEVICE_STATE_DIRTY);
    g_assert_cmpint(gone->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpuint(journal_len(f), ==, before);
    g_assert_true(g_file_get_contents(path, &after, NULL, NULL));
    g_assert_cmpstr(after, ==, saved);
}

static void
test_dry_run_read_only(Fixture *f, gconstpointer data)
{
    g_autoptr(AvPool) reader = NULL;
    g_autoptr(GPtrArray) findings = NULL;
    g_autoptr(GError) err = NULL;

    (void)data;
    add_pci(f, 1, AV_DEVICE_STATE_FREE, NULL);
    g_assert_true(av_pool_save(f->pool, &err));
    av_pool_free(g_steal_pointer(&f->pool));
    reader = av_pool_open(f->state, AV_POOL_READ, 0, &err);
    g_assert_no_error(err);
    add_domain(f, UUID_D, "d", 1, -1);
    g_assert_true(av_pool_audit(reader, f->domains, NULL, NULL, "audit", AV_AUDIT_DRY_RUN, &findings, NULL, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(findings->len, ==, 1);
    /* Not dry: a reader cannot journal. */
    g_clear_pointer(&findings, g_ptr_array_unref);
    g_assert_false(av_pool_audit(reader, f->domains, NULL, NULL, "audit", AV_AUDIT_DEFAULT, &findings, NULL, &err));
    g_assert_nonnull(err);
    g_assert_null(findings);
    g_clear_error(&err);
    av_pool_free(g_steal_pointer(&reader));
    f->pool = av_pool_open(f->state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
}

/* The live XML was read before the device's last change (the domain
 * stopped and its hook released the device meanwhile): left alone. */
static void
test_changed_meanwhile(Fixture *f, gconstpointer data)
{
    AvPoolDevice *dirty = add_pci(f, 1, AV_DEVICE_STATE_DIRTY, UUID_D);
    AvPoolDevice *used = add_pci(f, 2, AV_DEVICE_STATE_IN_USE, UUID_D);
    AvAuditDomain *domain;
    guint before = journal_len(f);

    (void)data;
    /* Both changed in the same second (the clock may tick between the two
     * adds, which made this test fail now and then). */
    used->state_since = dirty->state_since;
    domain = add_domain(f, UUID_D, "d", 1, -1);
    domain->seen_at = dirty->state_since;
    run_audit(f, NULL, NULL, AV_AUDIT_DEFAULT, NULL);
    g_assert_cmpuint(f->findings->len, ==, 2);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_CHANGED);
    g_assert_cmpint(finding(f, 1)->action, ==, AV_AUDIT_CHANGED);
    g_assert_cmpint(dirty->state, ==, AV_DEVICE_STATE_DIRTY);
    g_assert_cmpint(used->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpuint(journal_len(f), ==, before);
    /* Read after the change: the rules apply. */
    domain->seen_at = dirty->state_since + 1;
    run_audit(f, NULL, NULL, AV_AUDIT_DEFAULT, NULL);
    g_assert_cmpuint(f->findings->len, ==, 2);
    g_assert_cmpint(dirty->state, ==, AV_DEVICE_STATE_QUARANTINED);
    g_assert_cmpint(used->state, ==, AV_DEVICE_STATE_DIRTY);
}

static AvUsbDevice *
usb_device(const char *bus_path, guint16 vendor, guint16 product, const char *serial, guint busnum, guint devnum)
{
    AvUsbDevice *usb = g_new0(AvUsbDevice, 1);

    usb->bus_path = g_strdup(bus_path);
    usb->vendor_id = vendor;
    usb->product_id = product;
    usb->serial = g_strdup(serial);
    usb->busnum = busnum;
    usb->devnum = devnum;
    usb->numa_node = -1;
    return usb;
}

static void
test_mdev_and_usb(Fixture *f, gconstpointer data)
{
    g_autoptr(GPtrArray) usb = g_ptr_array_new_with_free_func((GDestroyNotify)av_usb_device_free);
    g_autoptr(GError) err = NULL;
    g_autofree char *mdev_id = av_pool_identity_mdev(MDEV_UUID);
    AvPoolDevice *mdev;
    AvPoolDevice *stick;
    AvPoolDevice *other;
    AvAuditDomain *domain;
    g_autoptr(AvOwner) owner = av_owner_new(UUID_D, "d");

    (void)data;
    g_ptr_array_add(usb, usb_device("1-2", 0x03e7, 0x2485, "S1", 1, 5));
    g_ptr_array_add(usb, usb_device("1-3", 0x03e7, 0x2485, "S2", 1, 6));
    mdev = av_pool_add(f->pool, AV_DEVICE_KIND_MDEV, mdev_id, "0000:17:00.0", "vgpu", AV_DEVICE_STATE_DIRTY, NULL,
                       &err);
    g_assert_no_error(err);
    stick = av_pool_add(f->pool, AV_DEVICE_KIND_USB, "usb:03e7:2485:serial:S1", "1-2", "stick",
                        AV_DEVICE_STATE_FREE, NULL, &err);
    g_assert_no_error(err);
    other = av_pool_add(f->pool, AV_DEVICE_KIND_USB, "usb:03e7:2485:serial:S2", "1-3", "stick",
                        AV_DEVICE_STATE_IN_USE, owner, &err);
    g_assert_no_error(err);
    domain = add_domain(f, UUID_D, "d", -1);
    av_audit_domain_add_mdev(domain, MDEV_UUID);
    av_audit_domain_add_usb(domain, 0x03e7, 0x2485, 1, 5);
    /* Without the host's USB devices, no USB device of D is released. */
    run_audit(f, NULL, NULL, AV_AUDIT_DRY_RUN, NULL);
    g_assert_cmpuint(f->findings->len, ==, 2);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_VIOLATION);
    g_assert_cmpint(finding(f, 1)->action, ==, AV_AUDIT_UNRESOLVED);
    g_assert_null(finding(f, 1)->identity);
    run_audit(f, usb, NULL, AV_AUDIT_DEFAULT, NULL);
    g_assert_cmpuint(f->findings->len, ==, 3);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_VIOLATION);
    g_assert_cmpstr(finding(f, 0)->identity, ==, mdev_id);
    g_assert_cmpint(finding(f, 1)->action, ==, AV_AUDIT_ATTACHED_OUTSIDE);
    g_assert_cmpstr(finding(f, 1)->identity, ==, stick->identity);
    g_assert_cmpint(finding(f, 2)->action, ==, AV_AUDIT_DETACHED_OUTSIDE);
    g_assert_cmpstr(finding(f, 2)->identity, ==, other->identity);
    g_assert_cmpint(mdev->state, ==, AV_DEVICE_STATE_QUARANTINED);
    g_assert_cmpint(stick->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpint(other->state, ==, AV_DEVICE_STATE_DIRTY);
}

static void
test_usb_by_ids(Fixture *f, gconstpointer data)
{
    g_autoptr(GPtrArray) usb = g_ptr_array_new_with_free_func((GDestroyNotify)av_usb_device_free);
    g_autoptr(GError) err = NULL;
    AvPoolDevice *stick;
    AvAuditDomain *domain;

    (void)data;
    g_ptr_array_add(usb, usb_device("1-2", 0x03e7, 0x2485, "S1", 1, 5));
    g_ptr_array_add(usb, usb_device("1-3", 0x1234, 0x5678, NULL, 1, 6));
    stick = av_pool_add(f->pool, AV_DEVICE_KIND_USB, "usb:03e7:2485:serial:S1", "1-2", "stick",
                        AV_DEVICE_STATE_DIRTY, NULL, &err);
    g_assert_no_error(err);
    domain = add_domain(f, UUID_D, "d", -1);
    /* Stale numbers (bus 1 device 6 is another device): libvirt goes by
     * vendor and product, and so does the audit. */
    av_audit_domain_add_usb(domain, 0x03e7, 0x2485, 1, 6);
    run_audit(f, usb, NULL, AV_AUDIT_DEFAULT, NULL);
    g_assert_cmpuint(f->findings->len, ==, 1);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_VIOLATION);
    g_assert_cmpint(stick->state, ==, AV_DEVICE_STATE_QUARANTINED);
}

/* A stick whose firmware changed its ids (issue 34: "runtime_ids") and
 * re-enumerated it, in use by domain d: 1-2 presents 03e7:f63b as bus 1
 * device 9; the hostdev of the domain named @name (@uuid) names
 * @product (of vendor 03e7) at bus 1 device @devnum.  Runs the audit;
 * returns the stick. */
static AvPoolDevice *
audit_stick_named(Fixture *f, const char *uuid, const char *name, guint16 product, int devnum)
{
    g_autoptr(GPtrArray) usb = g_ptr_array_new_with_free_func((GDestroyNotify)av_usb_device_free);
    g_autoptr(GError) err = NULL;
    g_autoptr(AvOwner) owner = av_owner_new(UUID_D, "d");
    AvPoolDevice *stick;
    AvAuditDomain *domain;

    g_ptr_array_add(usb, usb_device("1-2", 0x03e7, 0xf63b, "S1", 1, 9));
    stick = av_pool_add(f->pool, AV_DEVICE_KIND_USB, "usb:03e7:2485:serial:S1", "1-2", "stick",
                        AV_DEVICE_STATE_IN_USE, owner, &err);
    g_assert_no_error(err);
    domain = add_domain(f, uuid, name, -1);
    av_audit_domain_add_usb(domain, 0x03e7, product, 1, devnum);
    run_audit(f, usb, NULL, AV_AUDIT_DEFAULT, NULL);
    return stick;
}

/* The hostdev names the first ids and the old numbers (bus 1 device 5),
 * which no device presents now. */
static AvPoolDevice *
audit_reenumerated(Fixture *f, const char *uuid, const char *name)
{
    return audit_stick_named(f, uuid, name, 0x2485, 5);
}

/* In d's hostdev: still the stick d holds (no finding). */
static void
test_usb_reenumerated(Fixture *f, gconstpointer data)
{
    AvPoolDevice *stick = audit_reenumerated(f, UUID_D, "d");

    (void)data;
    g_assert_cmpuint(f->findings->len, ==, 0);
    g_assert_cmpint(stick->state, ==, AV_DEVICE_STATE_IN_USE);
}

/* In the hostdev of e, which does not hold it: never d's stick;
 * unresolved, the stick left as it is. */
static void
test_usb_reenumerated_other(Fixture *f, gconstpointer data)
{
    AvPoolDevice *stick = audit_reenumerated(f, UUID_E, "e");

    (void)data;
    g_assert_cmpint(stick->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpuint(f->findings->len, ==, 1);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_UNRESOLVED);
    g_assert_nonnull(strstr(finding(f, 0)->detail, "names no device of this host"));
}

/* The same stick named by what it presents now (its runtime ids, bus 1
 * device 9): the pool's entry at its port whatever ids it presents. */
static AvPoolDevice *
audit_runtime_named(Fixture *f, const char *uuid, const char *name)
{
    return audit_stick_named(f, uuid, name, 0xf63b, 9);
}

/* d, which holds it, naming it by its runtime ids: its own stick. */
static void
test_usb_runtime_holder(Fixture *f, gconstpointer data)
{
    AvPoolDevice *stick = audit_runtime_named(f, UUID_D, "d");

    (void)data;
    g_assert_cmpuint(f->findings->len, ==, 0);
    g_assert_cmpint(stick->state, ==, AV_DEVICE_STATE_IN_USE);
}

/* e naming it by its runtime ids: d's stick attached outside accelvirt,
 * a violation (never "nothing of accelvirt's"). */
static void
test_usb_runtime_other(Fixture *f, gconstpointer data)
{
    AvPoolDevice *stick = audit_runtime_named(f, UUID_E, "e");

    (void)data;
    g_assert_cmpuint(f->findings->len, ==, 1);
    g_assert_cmpint(finding(f, 0)->action, ==, AV_AUDIT_VIOLATION);
    g_assert_cmpstr(finding(f, 0)->identity, ==, stick->identity);
}

static void
test_finding_json(Fixture *f, gconstpointer data)
{
    g_autoptr(json_t) j = NULL;

    (void)data;
    add_pci(f, 1, AV_DEVICE_STATE_FREE, NULL);
    add_domain(f, UUID_D, "d", 1, -1);
    run_audit(f, NULL, NULL, AV_AUDIT_DRY_RUN, NULL);
    j = av_audit_finding_to_json(finding(f, 0));
    g_assert_cmpstr(json_string_value(json_object_get(j, "action")), ==, "attached-outside");
    g_assert_cmpstr(json_string_value(json_object_get(j, "from")), ==, "free");
    g_assert_cmpstr(json_string_value(json_object_get(j, "state")), ==, "in-use");
    g_assert_cmpstr(json_string_value(json_object_get(j, "domain_name")), ==, "d");
    g_assert_cmpstr(json_string_value(json_object_get(j, "address")), ==, "0000:01:00.0");
    g_assert_nonnull(json_string_value(json_object_get(j, "detail")));
}

#define ADD(name, fn) g_test_add("/audit/" name, Fixture, NULL, fixture_set_up, fn, fixture_tear_down)

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);
    ADD("own-device", test_own_device);
    ADD("attached/free", test_attached_free);
    ADD("attached/claimed", test_attached_claimed);
    g_test_add("/audit/violation/dirty", Fixture, &violation_dirty, fixture_set_up, test_violation, fixture_tear_down);
    g_test_add("/audit/violation/dirty-own", Fixture, &violation_dirty_own, fixture_set_up, test_violation,
               fixture_tear_down);
    g_test_add("/audit/violation/claimed-other", Fixture, &violation_claimed_other, fixture_set_up, test_violation,
               fixture_tear_down);
    g_test_add("/audit/violation/in-use-other", Fixture, &violation_in_use_other, fixture_set_up, test_violation,
               fixture_tear_down);
    g_test_add("/audit/violation/scrubbing", Fixture, &violation_scrubbing, fixture_set_up, test_violation,
               fixture_tear_down);
    ADD("violation/quarantined", test_violation_quarantined);
    ADD("violation/missing", test_violation_missing);
    ADD("violation/identity-problem", test_identity_problem);
    ADD("scrub-vm", test_scrub_vm);
    ADD("detached", test_detached);
    ADD("in-flight", test_in_flight);
    ADD("not-running", test_not_running);
    ADD("unreadable", test_unreadable);
    ADD("unresolved-hostdev", test_unresolved_hostdev);
    ADD("dry-run", test_dry_run);
    ADD("dry-run/read-only", test_dry_run_read_only);
    ADD("changed-meanwhile", test_changed_meanwhile);
    ADD("mdev-and-usb", test_mdev_and_usb);
    ADD("usb-by-ids", test_usb_by_ids);
    ADD("usb-reenumerated", test_usb_reenumerated);
    ADD("usb-reenumerated/other", test_usb_reenumerated_other);
    ADD("usb-runtime/holder", test_usb_runtime_holder);
    ADD("usb-runtime/other", test_usb_runtime_other);
    ADD("finding-json", test_finding_json);
    return g_test_run();
}
