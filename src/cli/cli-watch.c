/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt audit and accelvirt watch: keeping the pool true
 * when devices are attached to or detached from running domains outside
 * accelvirt.
 *
 * libvirt runs no hook on device hot-plug (docs/hooks.rst: the qemu hook
 * knows prepare, start, started, stopped, release, migrate, restore,
 * reconnect and attach, the last one about a QEMU process, not a device),
 * so `virsh attach-device` and `detach-device` go around the hook.  `audit`
 * compares the live XML of every running domain with the pool once
 * (av_pool_audit()); `watch` does it for one domain at each of libvirt's
 * domain events (virConnectDomainEventRegisterAny():
 * VIR_DOMAIN_EVENT_ID_DEVICE_ADDED, VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED,
 * VIR_DOMAIN_EVENT_ID_LIFECYCLE), and for all of them at its start and
 * after each reconnection to libvirtd.
 *
 * The pool's lock is never held while libvirt is called or while events
 * are waited for: the live XML is read first, then the lock is taken, the
 * rules applied and the pool saved.  A device changed between the two
 * (the domain stopped meanwhile and its hook released the device) is left
 * to the next audit (AV_AUDIT_CHANGED); watch audits that domain again a
 * moment later.
 *
 * watch is not the hook: it may call libvirt. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib-unix.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "cli.h"
#include "domain/av-domain.h"
#include "audit/av-audit.h"
#include "util/av-error.h"
#include "util/av-libvirt-casts.h"
#include "util/av-json.h"
#include "vfio/av-kernel.h"
#include "vfio/av-vfio.h"

/* How long watch waits before auditing again a domain whose devices changed
 * after its live XML was read, and the longest wait between two attempts to
 * reconnect to libvirtd. */
#define AV_WATCH_RETRY_MS 1500
#define AV_WATCH_BACKOFF_MAX_S 30

/* --- reading the running domains --------------------------------------------------- */

/* The host devices @xml (a domain's live XML) names, for av_pool_audit():
 * read by the lenient reader (av_domain_live_hostdevs()), which looks at
 * nothing but what names a device: an alias, a value or metadata that the
 * hook's strict parser refuses and libvirt accepts hides no device.  A
 * hostdev it cannot tell is noted (unresolved); a document that does not
 * parse at all gives a domain whose devices the audit leaves alone
 * ("unreadable"), and the audit says it is not complete. */
static AvAuditDomain *
av_cli_audit_domain_from_xml(const char *uuid, const char *name, const char *xml, gint64 seen_at)
{
    g_autoptr(AvAuditDomain) domain = av_audit_domain_new(uuid, name, seen_at);
    g_autoptr(GPtrArray) hostdevs = NULL;
    g_autoptr(GPtrArray) problems = NULL;
    g_autoptr(GError) err = NULL;

    if (!av_domain_live_hostdevs(xml, strlen(xml), &hostdevs, &problems, &err)) {
        domain->unreadable = g_strdup_printf("its live XML cannot be read (%s)", err->message);
        return g_steal_pointer(&domain);
    }
    for (guint i = 0; i < problems->len; i++)
        av_audit_domain_add_unresolved(domain, g_ptr_array_index(problems, i));
    for (guint i = 0; i < hostdevs->len; i++) {
        const AvHostdev *h = g_ptr_array_index(hostdevs, i);

        switch (h->type) {
        case AV_HOSTDEV_PCI:
            av_audit_domain_add_pci(domain, h->pci_address);
            break;
        case AV_HOSTDEV_MDEV:
            av_audit_domain_add_mdev(domain, h->mdev_uuid);
            break;
        case AV_HOSTDEV_USB:
            av_audit_domain_add_usb(domain, h->usb_vendor, h->usb_product, h->usb_bus, h->usb_device);
            break;
        case AV_HOSTDEV_NETDEV:
            g_ptr_array_add(domain->netdevs, g_strdup(h->netdev));
            break;
        }
    }
    return g_steal_pointer(&domain);
}

/* The running domain @dom as the audit needs it: its UUID, name and the
 * devices of its live XML (virDomainGetXMLDesc(), flags 0: the live
 * definition of a running domain).  NULL when it is no longer running (or
 * gone); an XML that cannot be read gives an unreadable domain. */
static AvAuditDomain *
av_cli_audit_read(virDomain *dom)
{
    char uuid[VIR_UUID_STRING_BUFLEN];
    const char *name = virDomainGetName(dom);
    g_autofree char *xml = NULL;
    gint64 seen_at;
    const virError *e;

    if (virDomainGetUUIDString(dom, uuid) < 0)
        return NULL;
    /* Before the read: a device that changes after it is not judged by it. */
    seen_at = g_get_real_time() / G_USEC_PER_SEC;
    if (virDomainIsActive(dom) != 1)
        return NULL;
    xml = virDomainGetXMLDesc(dom, 0);
    if (!xml) {
        g_autoptr(AvAuditDomain) domain = NULL;

        e = virGetLastError();
        if (e && e->code == VIR_ERR_NO_DOMAIN)
            return NULL;
        domain = av_audit_domain_new(uuid, name, seen_at);
        domain->unreadable = g_strdup_printf("its live XML could not be read (%s)",
                                             e && e->message ? e->message : "libvirt gave no reason");
        return g_steal_pointer(&domain);
    }
    return av_cli_audit_domain_from_xml(uuid, name, xml, seen_at);
}

static int
av_cli_audit_domain_compare(gconstpointer a, gconstpointer b)
{
    const AvAuditDomain *x = *(AvAuditDomain *const *)a;
    const AvAuditDomain *y = *(AvAuditDomain *const *)b;
    int by_name = g_strcmp0(x->name, y->name);

    return by_name ? by_name : g_strcmp0(x->uuid, y->uuid);
}

/* Every running domain of @conn (virConnectListAllDomains() with
 * VIR_CONNECT_LIST_DOMAINS_ACTIVE), as AvAuditDomain* in a new array
 * sorted by name (libvirt lists them in no set order).  NULL with @error
 * when libvirt cannot list them. */
static GPtrArray *
av_cli_audit_read_all(virConnect *conn, GError **error)
{
    g_autoptr(GPtrArray) domains = g_ptr_array_new_with_free_func((GDestroyNotify)av_audit_domain_free);
    virDomainPtr *doms = NULL;
    int n = virConnectListAllDomains(conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);

    if (n < 0) {
        av_cli_virt_error(error, "cannot list the running domains");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        AvAuditDomain *domain = av_cli_audit_read(doms[i]);

        if (domain)
            g_ptr_array_add(domains, domain);
        virDomainFree(doms[i]);
    }
    free(doms);
    g_ptr_array_sort(domains, av_cli_audit_domain_compare);
    return g_steal_pointer(&domains);
}

/* The direct interfaces of @domains as the PCI cards of the pool that made
 * them (their net/ lists the name): each a PCI hostdev of its domain, so
 * that the audit sees a card of attach netdev as it sees a passed-through
 * one (in use by its domain, attached outside accelvirt, detached).  Reads
 * the pool's PCI devices only, and only when some domain has one. */
static void
av_cli_audit_netdevs(const AvRoot *root, const AvPool *pool, const GPtrArray *domains)
{
    GPtrArray *devices = av_pool_devices(pool);
    g_autoptr(GHashTable) owners = NULL;

    for (guint i = 0; i < domains->len; i++) {
        AvAuditDomain *domain = g_ptr_array_index(domains, i);

        for (guint j = 0; j < domain->netdevs->len; j++) {
            const char *address;

            if (!owners) {
                owners = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
                for (guint k = 0; k < devices->len; k++) {
                    const AvPoolDevice *dev = g_ptr_array_index(devices, k);
                    g_autoptr(GPtrArray) names = NULL;

                    if (dev->kind != AV_DEVICE_KIND_PCI || !dev->address)
                        continue;
                    names = av_pci_netdevs(root, dev->address);
                    for (guint n = 0; n < names->len; n++)
                        g_hash_table_insert(owners, g_strdup(g_ptr_array_index(names, n)), g_strdup(dev->address));
                }
            }
            address = g_hash_table_lookup(owners, g_ptr_array_index(domain->netdevs, j));
            if (address) {
                av_audit_domain_add_pci(domain, address);
            } else {
                /* An alternative name (udev's altname), which the kernel
                 * resolves as libvirt's macvtap code does, and the pool's
                 * cards' net/ does not list: the card it names, as the
                 * hook's prepare finds it. */
                g_autofree char *card = av_kernel_netdev_card(root, av_kernel_ops_for(root),
                                                              g_ptr_array_index(domain->netdevs, j));

                if (card && av_pool_find_address(pool, AV_DEVICE_KIND_PCI, card))
                    av_audit_domain_add_pci(domain, card);
            }
        }
    }
}

/* TRUE when a hostdev of @domains is a USB one: the host's USB devices are
 * then read to resolve it. */
static gboolean
av_cli_audit_has_usb(const GPtrArray *domains)
{
    for (guint i = 0; i < domains->len; i++) {
        const AvAuditDomain *domain = g_ptr_array_index(domains, i);

        for (guint j = 0; j < domain->hostdevs->len; j++)
            if (((const AvAuditHostdev *)g_ptr_array_index(domain->hostdevs, j))->kind == AV_AUDIT_HOSTDEV_USB)
                return TRUE;
    }
    return FALSE;
}

/* The free PCI devices of @pool whose IOMMU group a process other than
 * accelvirt's own holders has open (av_vfio_groups_find_holder_full(): an
 * fd on the group or on a member's vfio cdev, a mapping of a BAR), as
 * identity -> "PID (THROUGH)", for av_pool_audit_full().  A group with a
 * pool device that is not free is left out: its domain's QEMU or
 * accelvirt's hold has it.  Reads every process of the host: for the full
 * audit only.  NULL with @error when the kernel cannot tell (not root). */
static GHashTable *
av_cli_audit_held(const AvCli *cli, const AvRoot *root, AvPool *pool, GError **error)
{
    g_autoptr(GHashTable) held = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_autoptr(GHashTable) busy = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_autoptr(GArray) groups = g_array_new(FALSE, FALSE, sizeof(int));
    GPtrArray *devices = av_pool_devices(pool);

    for (guint i = 0; i < devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(devices, i);

        if (dev->kind == AV_DEVICE_KIND_PCI && dev->iommu_group >= 0 && dev->state != AV_DEVICE_STATE_FREE)
            g_hash_table_add(busy, GINT_TO_POINTER(dev->iommu_group + 1));
    }
    for (guint i = 0; i < devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(devices, i);
        gboolean seen = FALSE;

        if (dev->kind != AV_DEVICE_KIND_PCI || dev->iommu_group < 0 || dev->state != AV_DEVICE_STATE_FREE ||
            g_hash_table_contains(busy, GINT_TO_POINTER(dev->iommu_group + 1)))
            continue;
        for (guint j = 0; j < groups->len && !seen; j++)
            seen = g_array_index(groups, int, j) == dev->iommu_group;
        if (!seen)
            g_array_append_val(groups, dev->iommu_group);
    }
    /* One scan finds one holder: again without its group until none. */
    while (groups->len > 0) {
        g_autoptr(AvVfioHolder) holder = NULL;

        if (!av_vfio_groups_find_holder_full(root, cli->state_dir, (const int *)(void *)groups->data, groups->len,
                                             &holder, error))
            return NULL;
        if (!holder)
            break;
        for (guint i = 0; i < devices->len; i++) {
            const AvPoolDevice *dev = g_ptr_array_index(devices, i);

            if (dev->kind == AV_DEVICE_KIND_PCI && dev->state == AV_DEVICE_STATE_FREE &&
                dev->iommu_group == holder->group)
                g_hash_table_replace(held, g_strdup(dev->identity), av_vfio_holder_describe(holder));
        }
        for (guint j = 0; j < groups->len; j++) {
            if (g_array_index(groups, int, j) == holder->group) {
                g_array_remove_index(groups, j);
                break;
            }
        }
    }
    return g_steal_pointer(&held);
}

/* --- applying the rules -------------------------------------------------------------- */

/* Applies av_pool_audit() to @domains, under the pool's lock, taken now
 * and let go before returning.  @all: @domains are all the running
 * domains; the pool is then reconciled with a whole scan first
 * (av_cli_open_synced_pool_scan_first()), else only put right (av_cli_open_pool()),
 * so that the work of one domain's audit grows with the domain.
 * Devices `accelvirt attach`/`detach` have in flight
 * (av_pool_attach_in_flight()) are left to them.  Findings to
 * *ret_findings (caller frees).  The worker is asked for when devices
 * became dirty. */
static gboolean
av_cli_audit_apply(const AvCli *cli, const AvRoot *root, const GPtrArray *domains, gboolean all, gboolean dry_run,
                   const char *by, GPtrArray **ret_findings, gboolean *ret_incomplete, GError **error)
{
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GPtrArray) usb = NULL;
    g_autoptr(GHashTable) held = NULL;
    gboolean need_held = all;
    AvAuditFlags flags = (all ? AV_AUDIT_ALL : 0) | (dry_run ? AV_AUDIT_DRY_RUN : 0);
    gboolean dirtied = FALSE;

    if (av_cli_audit_has_usb(domains)) {
        usb = av_host_scan_usb(root, error);
        if (!usb)
            return FALSE;
    }
    if (dry_run)
        pool = av_cli_open_pool(cli, root, AV_POOL_READ, error);
    else if (all)
        /* The audit reads no scan: applied to what nobody changed while
         * the host was scanned, without the lock. */
        pool = av_cli_open_synced_pool_scan_first(cli, NULL, NULL, error);
    else
        pool = av_cli_open_pool(cli, root, AV_POOL_WRITE, error);
    if (!pool)
        return FALSE;
    av_cli_audit_netdevs(root, pool, domains);
    *ret_incomplete = FALSE;
    /* A domain whose devices cannot all be told may hold a free device:
     * then even the audit of that one domain looks at the kernel. */
    for (guint i = 0; i < domains->len && !need_held; i++) {
        const AvAuditDomain *d = g_ptr_array_index(domains, i);

        need_held = d->unreadable || d->unresolved->len > 0;
    }
    if (need_held) {
        g_autoptr(GError) held_error = NULL;

        held = av_cli_audit_held(cli, root, pool, &held_error);
        if (!held) {
            g_printerr("accelvirt: warning: free devices held outside any domain cannot be found: %s\n",
                       held_error->message);
            *ret_incomplete = TRUE;
        }
    }
    if (!av_pool_audit_full(pool, domains, held, usb, av_pool_attach_in_flight, by, flags, ret_findings, &dirtied,
                            error))
        return FALSE;
    *ret_incomplete = *ret_incomplete || av_audit_findings_unresolved(*ret_findings);
    if (dirtied) {
        g_autoptr(GError) hold_error = NULL;

        /* Released devices held at once (their domain's QEMU let them
         * go), not only at the worker's sweep. */
        if (!av_pool_holds_sync(pool, root, av_kernel_ops_for(root), &hold_error))
            g_printerr("accelvirt: warning: %s\n", hold_error->message);
        av_cli_want_worker();
    }
    return TRUE;
}

/* "ACTION: DETAIL", fit for a terminal.  Caller frees. */
static char *
av_cli_audit_line(const AvAuditFinding *finding)
{
    g_autofree char *detail = av_cli_printable(finding->detail);

    return g_strdup_printf("%s: %s", av_audit_action_to_string(finding->action), detail);
}

/* --- accelvirt audit -------------------------------------------------------------------- */

int
av_cli_cmd_audit(AvCli *cli, int argc, char **argv)
{
    gboolean dry_run = FALSE;
    const GOptionEntry entries[] = {
        { "dry-run", 'n', 0, G_OPTION_ARG_NONE, &dry_run, "Say what would be done; change nothing", NULL },
        { NULL }
    };
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(GPtrArray) domains = NULL;
    g_autoptr(GPtrArray) findings = NULL;
    g_autoptr(GError) err = NULL;
    gboolean incomplete = FALSE;
    virConnect *conn;

    if (!av_cli_parse(cli, "audit", "[--dry-run]",
                      "Compare the live XML of every running domain with the pool once, for what was attached or "
                      "detached outside accelvirt (virsh attach-device, detach-device): a free device a domain "
                      "holds becomes in use by it; a dirty, scrubbing, quarantined or missing one, or another "
                      "domain's, is journalled as a violation and quarantined; a device a running domain no longer "
                      "holds is released (dirty, then scrubbed).  What 'accelvirt watch' does at each event.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 1)
        return av_cli_usage_error("audit takes no arguments; see 'accelvirt audit --help'");
    if (!av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);
    conn = av_cli_connect(cli, &err);
    if (!conn)
        return av_cli_fail(err);
    domains = av_cli_audit_read_all(conn, &err);
    virConnectClose(conn);
    if (!domains)
        return av_cli_fail(err);
    if (!av_cli_audit_apply(cli, root, domains, TRUE, dry_run, "audit", &findings, &incomplete, &err))
        return av_cli_fail(err);
    if (cli->json) {
        json_t *list = json_array();

        for (guint i = 0; i < findings->len; i++)
            json_array_append_new(list, av_audit_finding_to_json(g_ptr_array_index(findings, i)));
        av_cli_print_json(json_pack("{s:b,s:i,s:o,s:b}", "dry_run", dry_run, "domains", (int)domains->len,
                                    "findings", list, "complete", !incomplete));
    } else {
        for (guint i = 0; i < findings->len; i++) {
            g_autofree char *line = av_cli_audit_line(g_ptr_array_index(findings, i));

            printf("%s%s\n", dry_run ? "would do: " : "", line);
        }
        if (findings->len == 0)
            printf("nothing to do (%u running domains)\n", domains->len);
    }
    /* What a running domain holds and the audit cannot tell may be a free
     * device of the pool: not a clean result. */
    if (incomplete) {
        g_printerr("accelvirt: the audit is not complete: what running domains hold could not all be told "
                   "(the 'unresolved' lines say what); check those domains with 'virsh dumpxml' and run the "
                   "audit again\n");
        return AV_EXIT_FAILURE;
    }
    return AV_EXIT_OK;
}

/* --- accelvirt watch -------------------------------------------------------------------- */

typedef struct {
    AvCli *cli;
    AvRoot *root;
    virConnect *conn;
    int callbacks[3];            /* virConnectDomainEventRegisterAny() ids, -1 when none */
    gboolean closed;             /* libvirt closed the connection (virConnectRegisterCloseCallback()) */
    GHashTable *pending;         /* UUIDs (char*) of the domains to audit */
    GHashTable *retry;           /* UUIDs to audit again after AV_WATCH_RETRY_MS */
    int retry_timer;             /* virEventAddTimeout() id, -1 when none */
    int wake[2];                 /* the self-pipe the signal handler writes to */
    int wake_watch;              /* its virEventAddHandle() id */
} AvWatch;

static volatile sig_atomic_t av_watch_quit;
static int av_watch_wake_fd = -1;

static void
av_watch_on_signal(int sig)
{
    int saved = errno;
    char c = 1;

    (void)sig;
    av_watch_quit = 1;
    if (write(av_watch_wake_fd, &c, 1) < 0) {
        /* The pipe is full: the loop wakes anyway. */
    }
    errno = saved;
}

static void
av_watch_on_wake(int watch, int fd, int events, void *opaque)
{
    char buf[64];

    (void)watch;
    (void)events;
    (void)opaque;
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
}

/* One line on stderr, which journald records for the service. */
#define av_watch_log(fmt, ...) \
    (fprintf(stderr, "accelvirt watch: " fmt "\n", __VA_ARGS__), fflush(stderr))

/* Applies the audit to @domains and logs each finding, one line each;
 * UUIDs of domains with AV_AUDIT_CHANGED findings go to the retry set.
 * Then starts the worker when devices became dirty.  FALSE with @error
 * when the audit could not run. */
static gboolean
av_watch_audit(AvWatch *w, const GPtrArray *domains, gboolean all, GError **error)
{
    g_autoptr(GPtrArray) findings = NULL;
    gboolean incomplete = FALSE;

    if (!av_cli_audit_apply(w->cli, w->root, domains, all, FALSE, "watch", &findings, &incomplete, error))
        return FALSE;
    if (incomplete)
        av_watch_log("%s", "not complete: what running domains hold could not all be told (the unresolved lines "
                     "say what)");
    for (guint i = 0; i < findings->len; i++) {
        const AvAuditFinding *finding = g_ptr_array_index(findings, i);
        g_autofree char *line = av_cli_audit_line(finding);

        av_watch_log("%s", line);
        if (finding->action == AV_AUDIT_CHANGED && finding->domain_uuid)
            g_hash_table_add(w->retry, g_strdup(finding->domain_uuid));
    }
    av_cli_spawn_pending_worker(w->cli);
    return TRUE;
}

/* The full audit: at the start and after each reconnection. */
static gboolean
av_watch_audit_all(AvWatch *w, GError **error)
{
    g_autoptr(GPtrArray) domains = av_cli_audit_read_all(w->conn, error);

    if (!domains)
        return FALSE;
    if (!av_watch_audit(w, domains, TRUE, error))
        return FALSE;
    av_watch_log("audited %u running domains", domains->len);
    return TRUE;
}

/* The audit of the domains whose events came: each alone, so that the work
 * grows with the domain, not the host. */
static void
av_watch_audit_pending(AvWatch *w)
{
    g_autoptr(GHashTable) pending = g_steal_pointer(&w->pending);
    GHashTableIter iter;
    gpointer key;

    w->pending = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_hash_table_iter_init(&iter, pending);
    while (g_hash_table_iter_next(&iter, &key, NULL)) {
        g_autoptr(virDomain) dom = virDomainLookupByUUIDString(w->conn, key);
        g_autoptr(GPtrArray) domains = g_ptr_array_new_with_free_func((GDestroyNotify)av_audit_domain_free);
        g_autoptr(GError) err = NULL;
        AvAuditDomain *domain = dom ? av_cli_audit_read(dom) : NULL;

        /* Gone or stopped meanwhile: its hook's release is the authority. */
        if (!domain)
            continue;
        g_ptr_array_add(domains, domain);
        if (av_watch_audit(w, domains, FALSE, &err))
            continue;
        av_watch_log("cannot audit domain %s: %s", (const char *)key, err->message);
        /* The pool's lock held too long by another accelvirt: again soon. */
        if (g_error_matches(err, AV_ERROR, AV_ERROR_LOCKED))
            g_hash_table_add(w->retry, g_strdup(key));
    }
}

static void
av_watch_want(AvWatch *w, virDomainPtr dom)
{
    char uuid[VIR_UUID_STRING_BUFLEN];

    if (virDomainGetUUIDString(dom, uuid) == 0)
        g_hash_table_add(w->pending, g_strdup(uuid));
}

/* A device was added to or removed from @dom (its alias: libvirt names the
 * device by nothing else).  The domain is audited once the callback
 * returns, outside libvirt's dispatch. */
static void
av_watch_on_device(virConnectPtr conn, virDomainPtr dom, const char *alias, void *opaque)
{
    (void)conn;
    (void)alias;
    av_watch_want(opaque, dom);
}

/* Started or resumed: audited (a domain started while watch was away, or
 * restored with devices of its own).  Stopped: nothing; the hook's
 * "release" moves its devices to dirty, and auditing a domain that is
 * going away would only race with that release.  The rest (defined,
 * suspended...) changes no device. */
static void
av_watch_on_lifecycle(virConnectPtr conn, virDomainPtr dom, int event, int detail, void *opaque)
{
    (void)conn;
    (void)detail;
    if (event == VIR_DOMAIN_EVENT_STARTED || event == VIR_DOMAIN_EVENT_RESUMED)
        av_watch_want(opaque, dom);
}

static void
av_watch_on_close(virConnectPtr conn, int reason, void *opaque)
{
    AvWatch *w = opaque;

    (void)conn;
    w->closed = TRUE;
    av_watch_log("libvirt closed the connection (reason %d); reconnecting", reason);
}

static void
av_watch_on_retry(int timer, void *opaque)
{
    AvWatch *w = opaque;
    GHashTableIter iter;
    gpointer key;

    virEventRemoveTimeout(timer);
    w->retry_timer = -1;
    g_hash_table_iter_init(&iter, w->retry);
    while (g_hash_table_iter_next(&iter, &key, NULL))
        g_hash_table_add(w->pending, g_strdup(key));
    g_hash_table_remove_all(w->retry);
}

/* Lets go of the connection and its callbacks. */
static void
av_watch_disconnect(AvWatch *w)
{
    if (!w->conn)
        return;
    for (guint i = 0; i < G_N_ELEMENTS(w->callbacks); i++) {
        if (w->callbacks[i] >= 0)
            virConnectDomainEventDeregisterAny(w->conn, w->callbacks[i]);
        w->callbacks[i] = -1;
    }
    virConnectUnregisterCloseCallback(w->conn, av_watch_on_close);
    virConnectClose(w->conn);
    w->conn = NULL;
}

/* Connects and subscribes to the events.  FALSE with @error. */
static gboolean
av_watch_connect(AvWatch *w, GError **error)
{
    w->closed = FALSE;
    w->conn = av_cli_connect(w->cli, error);
    if (!w->conn)
        return FALSE;
    /* A remote libvirtd that dies is noticed in 15 s (no-op for local
     * drivers that do not support it). */
    virConnectSetKeepAlive(w->conn, 5, 3);
    if (virConnectRegisterCloseCallback(w->conn, av_watch_on_close, w, NULL) < 0) {
        /* Drivers without a close callback (test:///) stay connected. */
    }
    AV_LIBVIRT_CALLBACK_CASTS_BEGIN
    w->callbacks[0] = virConnectDomainEventRegisterAny(w->conn, NULL, VIR_DOMAIN_EVENT_ID_DEVICE_ADDED,
                                                       VIR_DOMAIN_EVENT_CALLBACK(av_watch_on_device), w, NULL);
    w->callbacks[1] = virConnectDomainEventRegisterAny(w->conn, NULL, VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED,
                                                       VIR_DOMAIN_EVENT_CALLBACK(av_watch_on_device), w, NULL);
    w->callbacks[2] = virConnectDomainEventRegisterAny(w->conn, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                                       VIR_DOMAIN_EVENT_CALLBACK(av_watch_on_lifecycle), w, NULL);
    AV_LIBVIRT_CALLBACK_CASTS_END
    for (guint i = 0; i < G_N_ELEMENTS(w->callbacks); i++) {
        if (w->callbacks[i] < 0) {
            av_cli_virt_error(error, "cannot subscribe to libvirt's domain events");
            av_watch_disconnect(w);
            return FALSE;
        }
    }
    return TRUE;
}

static void
av_watch_on_backoff(int timer, void *opaque)
{
    gboolean *done = opaque;

    virEventRemoveTimeout(timer);
    *done = TRUE;
}

/* Waits @seconds in libvirt's event loop, or less when a signal comes. */
static void
av_watch_sleep(guint seconds)
{
    gboolean done = FALSE;
    int timer = virEventAddTimeout((int)(seconds * 1000), av_watch_on_backoff, &done, NULL);

    if (timer < 0)
        return;
    while (!done && !av_watch_quit)
        if (virEventRunDefaultImpl() < 0)
            break;
    /* Ended by a signal: the timer must not outlive @done. */
    if (!done)
        virEventRemoveTimeout(timer);
}

static void
av_watch_free(AvWatch *w)
{
    av_watch_disconnect(w);
    if (w->retry_timer >= 0)
        virEventRemoveTimeout(w->retry_timer);
    if (w->wake_watch >= 0)
        virEventRemoveHandle(w->wake_watch);
    g_hash_table_unref(w->pending);
    g_hash_table_unref(w->retry);
    av_root_free(w->root);
}

int
av_cli_cmd_watch(AvCli *cli, int argc, char **argv)
{
    gboolean once = FALSE;
    const GOptionEntry entries[] = {
        { "once", 0, 0, G_OPTION_ARG_NONE, &once, "Audit every running domain once, then exit", NULL },
        { NULL }
    };
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(GError) err = NULL;
    AvWatch w = { .cli = cli, .callbacks = { -1, -1, -1 }, .retry_timer = -1, .wake = { -1, -1 },
                  .wake_watch = -1 };
    struct sigaction sa = { .sa_handler = av_watch_on_signal };
    guint backoff = 1;
    int status = AV_EXIT_OK;
    char *uri = NULL;

    if (!av_cli_parse(cli, "watch", "[--once]",
                      "Keep the pool true while domains run: listen to libvirt's domain events (device added or "
                      "removed, domain started or resumed) and audit that domain at each, as 'accelvirt audit' "
                      "does for all of them (which watch does at its start and after each reconnection to "
                      "libvirtd).  Runs in the foreground, logging one line per finding on stderr; exits on "
                      "SIGTERM or SIGINT.  The unit accelvirt-watch.service runs it.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 1)
        return av_cli_usage_error("watch takes no arguments; see 'accelvirt watch --help'");
    if (!av_cli_open(cli, &w.root, &policy, &err))
        return av_cli_fail(err);
    w.pending = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    w.retry = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    /* libvirt's event loop, registered before the connection is opened
     * (libvirt's docs: virEventRegisterDefaultImpl()). */
    if (virEventRegisterDefaultImpl() < 0) {
        av_cli_virt_error(&err, "cannot start libvirt's event loop");
        av_watch_free(&w);
        return av_cli_fail(err);
    }
    if (once) {
        /* One full audit: bad input and an unreachable libvirtd are
         * errors, as for 'accelvirt audit'. */
        if (!av_watch_connect(&w, &err) || !av_watch_audit_all(&w, &err))
            status = av_cli_fail(err);
        av_watch_free(&w);
        return status;
    }
    if (!g_unix_open_pipe(w.wake, FD_CLOEXEC, &err)) {
        av_watch_free(&w);
        return av_cli_fail(err);
    }
    g_unix_set_fd_nonblocking(w.wake[0], TRUE, NULL);
    g_unix_set_fd_nonblocking(w.wake[1], TRUE, NULL);
    av_watch_wake_fd = w.wake[1];
    w.wake_watch = virEventAddHandle(w.wake[0], VIR_EVENT_HANDLE_READABLE, av_watch_on_wake, NULL, NULL);
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    while (!av_watch_quit) {
        if (!w.conn) {
            g_clear_error(&err);
            if (!av_watch_connect(&w, &err) || !av_watch_audit_all(&w, &err)) {
                av_watch_log("%s; trying again in %u s", err->message, backoff);
                av_watch_disconnect(&w);
                av_watch_sleep(backoff);
                backoff = MIN(backoff * 2, AV_WATCH_BACKOFF_MAX_S);
                continue;
            }
            backoff = 1;
            uri = virConnectGetURI(w.conn);
            av_watch_log("watching %s", uri ? uri : w.cli->connect);
            g_clear_pointer(&uri, free);
        }
        if (virEventRunDefaultImpl() < 0) {
            av_cli_virt_error(&err, "libvirt's event loop failed");
            status = av_cli_fail(err);
            break;
        }
        if (w.closed) {
            av_watch_disconnect(&w);
            continue;
        }
        if (!av_watch_quit)
            av_watch_audit_pending(&w);
        if (g_hash_table_size(w.retry) > 0 && w.retry_timer < 0)
            w.retry_timer = virEventAddTimeout(AV_WATCH_RETRY_MS, av_watch_on_retry, &w, NULL);
    }
    if (av_watch_quit)
        av_watch_log("%s", "stopping on a signal");
    av_watch_free(&w);
    av_watch_wake_fd = -1;
    close(w.wake[0]);
    close(w.wake[1]);
    return status;
}
