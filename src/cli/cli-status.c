/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt status: the pool, reconciled with the host. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pci/av-pci.h"
#include "pool/av-pool.h"
#include "util/av-json.h"
#include "vfio/av-hold.h"
#include "vfio/av-vfio.h"

static char *
av_time_str(gint64 t)
{
    g_autoptr(GDateTime) dt = NULL;

    if (t <= 0)
        return g_strdup("-");
    dt = g_date_time_new_from_unix_utc(t);
    return dt ? g_date_time_format(dt, "%Y-%m-%d %H:%M:%SZ") : g_strdup("-");
}

static char *
av_owner_str(const AvOwner *owner)
{
    if (!owner)
        return g_strdup("-");
    if (owner->domain_name)
        return g_strdup(owner->domain_name);
    if (owner->domain_uuid)
        return g_strdup(owner->domain_uuid);
    if (owner->nova_instance)
        return g_strdup_printf("nova:%s", owner->nova_instance);
    return g_strdup("-");
}

/* The USB device of @host that the pool device @d is (by its identity), or
 * NULL.  Borrowed from @host. */
static const AvUsbDevice *
av_status_usb_of(const AvHost *host, const AvPoolDevice *d)
{
    if (!host || d->kind != AV_DEVICE_KIND_USB)
        return NULL;
    return av_pool_find_usb_device(host->usb, d->identity, d->address);
}

/* "port 1-2, bus 1 device 5, serial S1" (or "no serial") for a USB pool
 * device: two identical sticks are told apart by these.  Without a scan
 * (--no-sync) or when the stick is not on the host, no numbers.  Caller
 * frees. */
static char *
av_status_usb_line(const AvHost *host, const AvPoolDevice *d)
{
    const AvUsbDevice *usb = av_status_usb_of(host, d);
    const char *serial = strstr(d->identity, ":serial:");
    g_autofree char *numbers = usb ? g_strdup_printf("bus %u device %u", usb->busnum, usb->devnum)
                                   : g_strdup(host ? "not on the host" : "bus and device not read (--no-sync)");
    g_autofree char *text = g_strdup_printf("port %s, %s, %s%s", d->address ? d->address : "-", numbers,
                                            serial ? "serial " : "no serial", serial ? serial + strlen(":serial:") : "");

    return av_cli_printable(text);
}

/* The index N of a VF's pool identity ("PF-IDENTITY/vfN"), or -1. */
static int
av_status_vf_index(const AvPoolDevice *d)
{
    const char *slash = d->kind == AV_DEVICE_KIND_PCI ? strrchr(d->identity, '/') : NULL;
    guint64 n;

    if (!slash || !g_str_has_prefix(slash, "/vf") ||
        !g_ascii_string_to_unsigned(slash + 3, 10, 0, AV_POLICY_VFS_MAX, &n, NULL))
        return -1;
    return (int)n;
}

/* The PF of the VF @d as the scan @host sees it, or NULL. */
static const char *
av_status_vf_pf(const AvPoolDevice *d, const AvHost *host)
{
    const AvPciDevice *vf = host && d->state != AV_DEVICE_STATE_MISSING ? av_host_find_pci(host, d->address) : NULL;

    return vf ? vf->physfn : NULL;
}

/* TRUE for an SR-IOV PF the user cares about: one that the "vfs" profile
 * @maker makes VFs on, or one with pooled VFs. */
static gboolean
av_status_pf_shown(const AvPool *pool, const AvPciDevice *pf, const AvProfile *maker)
{
    gboolean pooled = FALSE;

    for (guint j = 0; pf->virtfns && j < pf->virtfns->len && !pooled; j++)
        pooled = av_pool_find_address(pool, AV_DEVICE_KIND_PCI, g_ptr_array_index(pf->virtfns, j)) != NULL;
    return pf->sriov_capable && !pf->physfn && (maker || pooled);
}

/* The SR-IOV PFs the user cares about (av_status_pf_shown()): how many VFs
 * exist, how many could, who makes them. */
static void
av_status_print_pfs(const AvPool *pool, const AvHost *host, const AvPolicy *policy)
{
    gboolean header = FALSE;

    for (guint i = 0; host && i < host->pci->len; i++) {
        const AvPciDevice *pf = g_ptr_array_index(host->pci, i);
        const AvProfile *maker = av_policy_match_sriov_pf(policy, pf);

        if (!av_status_pf_shown(pool, pf, maker))
            continue;
        if (!header)
            printf("\n%-12s  %-18s  %-4s  %-5s  %s\n", "SR-IOV PF", "MADE BY", "VFS", "OF", "HOW");
        header = TRUE;
        printf("%-12s  %-18s  %-4u  %-5u  %s\n", pf->address, maker ? maker->name : "-", pf->sriov_numvfs,
               pf->sriov_totalvfs,
               !maker ? "the VFs that exist (no profile makes VFs here)"
               : maker->vfs_on_demand ? (maker->vfs_shrink ? "on demand, back to 0 once all are free" : "on demand")
               : (maker->vfs_shrink ? "a fixed count, shrunk back to it once all are free" : "a fixed count"));
    }
}

/* The kernel-enforced hold of @d (av-hold.h): {"pid", "since",
 * "oom_score_adj" (what the holder got, null when its record does not
 * say)} when its IOMMU group has a live accelvirt holder of this boot;
 * "none" when the pool refuses it
 * (dirty, scrubbing, quarantined) and it is on vfio-pci but nothing holds
 * it (a warning: the kernel would hand it to a `virsh attach-device`); NULL
 * when neither (nothing to say).  New reference. */
static json_t *
av_status_hold(const AvCli *cli, const AvRoot *root, const AvPoolDevice *d)
{
    g_autoptr(AvHold) hold = NULL;
    g_autofree char *driver = NULL;

    if (d->kind != AV_DEVICE_KIND_PCI || d->iommu_group < 0)
        return NULL;
    if (root && av_hold_get(root, cli->state_dir, d->iommu_group, &hold, NULL) && hold)
        return json_pack("{s:i, s:o, s:o}", "pid", hold->pid, "since", av_json_string_or_null(hold->since),
                         "oom_score_adj", hold->oom_score_adj == AV_HOLD_OOM_UNKNOWN
                                          ? json_null() : json_integer(hold->oom_score_adj));
    if (!av_pool_device_wants_hold(d) || !root)
        return NULL;
    driver = av_vfio_current_driver(root, d->address);
    return av_vfio_device_is_vfio(root, d->address, driver) ? json_string("none") : NULL;
}

/* The line of av_status_hold() for people, or nothing. */
static void
av_status_print_hold(const AvCli *cli, const AvRoot *root, const AvPoolDevice *d)
{
    g_autoptr(json_t) hold = av_status_hold(cli, root, d);
    const char *since = json_string_value(json_object_get(hold, "since"));
    json_t *oom = json_object_get(hold, "oom_score_adj");
    g_autofree char *oom_text = json_is_integer(oom)
                                ? g_strdup_printf(" (oom_score_adj %" JSON_INTEGER_FORMAT ")", json_integer_value(oom))
                                : g_strdup("");

    if (json_is_object(hold))
        printf("    held: pid %d since %s%s\n", (int)json_integer_value(json_object_get(hold, "pid")),
               since ? since : "-", oom_text);
    else if (hold)
        printf("    hold: none (warning: the kernel would let a domain open it; run 'accelvirt reconcile')\n");
}

/* A card of attach netdev: the network interface its host driver made
 * (what a domain gets), read from its net/ now, or that it has none. */
static void
av_status_print_netdev(const AvRoot *root, const AvPolicy *policy, const AvPoolDevice *d)
{
    const AvProfile *profile = d->profile && policy ? av_policy_find(policy, d->profile) : NULL;
    g_autofree char *netdev = NULL;

    if (d->kind != AV_DEVICE_KIND_PCI || !profile || profile->attach != AV_ATTACH_NETDEV)
        return;
    netdev = av_pci_netdev_first(root, d->address);
    printf("    netdev: %s\n", netdev ? netdev : "none (its host driver made no interface)");
}

static void
av_status_print_table(const AvCli *cli, const AvRoot *root, const AvPool *pool, const AvHost *host,
                      const AvPolicy *policy, gboolean synced, json_t *placement)
{
    GPtrArray *devices = av_pool_devices(pool);
    guint pending = 0;

    if (devices->len == 0) {
        printf("The pool is empty: no device of this host matches a profile in the policy dir.\n"
               "Write profiles there (see accelvirt-policy(5) and the examples in " AV_EXAMPLE_POLICY_DIR ").\n");
        return;
    }
    printf("%-12s  %-18s  %-11s  %-4s  %-16s  %-20s  %s\n",
           "ADDRESS", "PROFILE", "STATE", "NODE", "OWNER", "SINCE", "IDENTITY");
    for (guint i = 0; i < devices->len; i++) {
        const AvPoolDevice *d = g_ptr_array_index(devices, i);
        g_autofree char *owner = av_owner_str(d->owner);
        g_autofree char *since = av_time_str(d->state_since);
        g_autofree char *node = d->numa_node < 0 ? g_strdup("-") : g_strdup_printf("%d", d->numa_node);

        /* An identity holds a device's serial, a reason what a program
         * printed: shown as text, never as terminal controls. */
        g_autofree char *identity = av_cli_printable(d->identity);
        g_autofree char *reason = av_cli_printable(d->reason);
        g_autofree char *problem = av_cli_printable(d->identity_problem);
        g_autofree char *shown_owner = av_cli_printable(owner);

        printf("%-12s  %-18s  %-11s  %-4s  %-16s  %-20s  %s\n", d->address, d->profile,
               av_device_state_to_string(d->state), node, shown_owner, since, identity);
        if (d->kind == AV_DEVICE_KIND_USB) {
            g_autofree char *usb = av_status_usb_line(host, d);

            printf("    usb: %s\n", usb);
        }
        av_status_print_netdev(root, policy, d);
        if (av_status_vf_index(d) >= 0) {
            const char *pf = av_status_vf_pf(d, host);

            if (pf)
                printf("    vf %d of PF %s\n", av_status_vf_index(d), pf);
            else
                printf("    vf %d%s\n", av_status_vf_index(d), d->state == AV_DEVICE_STATE_MISSING
                       ? " (gone: its PF offers fewer VFs now; made again when a placement or prepare needs it)"
                       : "");
        }
        av_status_print_hold(cli, root, d);
        if (reason)
            printf("    reason: %s\n", reason);
        if (problem && g_strcmp0(d->identity_problem, d->reason) != 0)
            printf("    identity problem (quarantined when its scrub ends): %s\n", problem);
        if (d->programmed) {
            g_autofree char *when = av_time_str(d->programmed->since);
            g_autofree char *name = av_cli_printable(d->programmed->name ? d->programmed->name : "?");
            g_autofree char *verified = av_cli_printable(d->programmed->verified);

            printf("    holds bitstream '%s' (sha256 %.12s...), programmed %s by %s: %s\n", name,
                   d->programmed->sha256, when, d->programmed->by, verified);
        } else {
            const AvProfile *profile = d->profile ? av_policy_find(policy, d->profile) : NULL;

            if (profile && profile->program)
                printf("    holds: unknown (no bitstream programmed by accelvirt since a domain last had it)\n");
        }
        if (d->last_scrub) {
            json_t *cov = json_object_get(d->last_scrub, "coverage");
            g_autofree char *when = av_time_str(json_integer_value(json_object_get(d->last_scrub, "time")));

            printf("    last scrub: %s, %s: %s\n", when, json_string_value(json_object_get(d->last_scrub, "result")),
                   json_string_value(json_object_get(cov, "text")));
        }
        if (placement) {
            g_autoptr(json_t) p = av_placement_device_status(policy, placement, d);
            g_autofree char *text = av_placement_status_text(p);
            g_autofree char *shown = av_cli_printable(text);

            printf("    placement: %s\n", shown);
            pending += g_strcmp0(json_string_value(json_object_get(p, "state")), "pending") == 0;
        }
    }
    if (pending)
        printf("placement: %u pending\n", pending);
    av_status_print_pfs(pool, host, policy);
    if (!synced)
        printf("\n(as recorded; not compared with the host: --no-sync)\n");
}

/* {"address", "total_vfs", "num_vfs", "made_by": profile or null} of each PF
 * that av_status_print_pfs() shows. */
static json_t *
av_status_pfs_json(const AvPool *pool, const AvHost *host, const AvPolicy *policy)
{
    json_t *out = json_array();

    for (guint i = 0; host && i < host->pci->len; i++) {
        const AvPciDevice *pf = g_ptr_array_index(host->pci, i);
        const AvProfile *maker = av_policy_match_sriov_pf(policy, pf);

        if (!av_status_pf_shown(pool, pf, maker))
            continue;
        json_array_append_new(out, json_pack("{s:s,s:i,s:i,s:o,s:o,s:b}", "address", pf->address, "total_vfs",
                                             (int)pf->sriov_totalvfs, "num_vfs", (int)pf->sriov_numvfs, "made_by",
                                             maker ? json_string(maker->name) : json_null(), "vfs",
                                             !maker ? json_null() : maker->vfs_on_demand ? json_string("on-demand")
                                                                   : json_integer(maker->vfs),
                                             "shrink", maker && maker->vfs_shrink));
    }
    return out;
}

int
av_cli_cmd_status(AvCli *cli, int argc, char **argv)
{
    gboolean no_sync = FALSE;
    const GOptionEntry entries[] = {
        { "no-sync", 0, 0, G_OPTION_ARG_NONE, &no_sync,
          "Show the pool as recorded, without scanning the host (takes only a shared lock)", NULL },
        { NULL },
    };
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(json_t) placement = NULL;

    if (!av_cli_parse(cli, "status", NULL,
                      "Scan the host, reconcile the pool with it (new managed devices become free, vanished ones "
                      "missing) and show every managed device with its state and owner.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc > 1)
        return av_cli_usage_error("'status' takes no arguments, got '%s'", argv[1]);

    if (no_sync) {
        pool = av_cli_open_pool(cli, NULL, AV_POOL_READ, &err);
        if (!pool)
            return av_cli_fail(err);
    } else {
        /* The whole-host scan is taken without the pool's lock: a hook
         * waits only for the pool's read, update and save. */
        pool = av_cli_open_synced_pool_scan_first(cli, &host, &policy, &err);
        if (!pool)
            return av_cli_fail(err);
    }
    /* What is shown (the holds and drivers of 512 devices take a while) is
     * read without the lock: the pool as just read or saved. */
    av_pool_unlock(pool);
    /* For the holds' warning only: which driver a device is on. */
    root = av_root_new_default(cli->root, NULL);
    /* Placement's view: the state file, read without a lock
     * (written atomically); --no-sync reads the policy for it alone. */
    if (!policy)
        policy = av_cli_load_policy(cli, NULL);
    if (policy) {
        g_autoptr(GError) placement_error = NULL;

        placement = av_placement_state_read(cli->state_dir, &placement_error);
        if (!placement)
            fprintf(stderr, "accelvirt: warning: %s\n", placement_error->message);
    }

    if (cli->json) {
        json_t *o = av_pool_to_json(pool);
        json_t *devices = json_object_get(o, "devices");
        json_t *d;
        size_t i;

        /* A scrub token is for the scrub domain alone, not for what
         * collects this output. */
        json_array_foreach(devices, i, d) {
            const AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);
            const AvUsbDevice *usb = av_status_usb_of(host, dev);
            const char *pf = av_status_vf_pf(dev, host);

            json_t *hold = av_status_hold(cli, root, dev);

            json_object_del(d, "scrub_token");
            if (placement)
                json_object_set_new(d, "placement", av_placement_device_status(policy, placement, dev));
            if (hold)
                json_object_set_new(d, "hold", hold);
            if (av_status_vf_index(dev) >= 0)
                json_object_set_new(d, "vf", json_pack("{s:o,s:i}", "pf", av_json_string_or_null(pf), "index",
                                                       av_status_vf_index(dev)));
            if (dev->kind != AV_DEVICE_KIND_USB)
                continue;
            json_object_set_new(d, "usb_busnum", usb ? json_integer(usb->busnum) : json_null());
            json_object_set_new(d, "usb_devnum", usb ? json_integer(usb->devnum) : json_null());
            json_object_set_new(d, "usb_serial", usb ? av_json_string_or_null(usb->serial) : json_null());
        }
        if (!no_sync)
            json_object_set_new(o, "sriov_pfs", av_status_pfs_json(pool, host, policy));
        json_object_set_new(o, "state_dir", json_string(cli->state_dir));
        json_object_set_new(o, "synced", json_boolean(!no_sync));
        av_cli_print_json(o);
    } else {
        /* The placement lines where anything is synced (a policy without
         * Nova shows none). */
        av_status_print_table(cli, root, pool, host, policy, !no_sync,
                              placement && av_placement_sync_wanted(policy, cli->state_dir) ? placement : NULL);
    }
    return AV_EXIT_OK;
}
