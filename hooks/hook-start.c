/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the hook's "start begin" and "started begin" (hook.h), before
 * and after QEMU starts: the domain's vCPU pinning checked against the
 * NUMA node of each device accelvirt manages, as its profile asks. */
#include "config.h"

#include "hook.h"

#include <syslog.h>

#include "pci/av-pci.h"

/* @cpus (guint, ascending) as a kernel cpulist "0-3,8".  Caller frees. */
static char *
av_hook_cpulist(const GArray *cpus)
{
    GString *s = g_string_new(NULL);

    for (guint i = 0; i < cpus->len;) {
        guint first = g_array_index(cpus, guint, i), last = first;

        while (i + 1 < cpus->len && g_array_index(cpus, guint, i + 1) == last + 1) {
            last++;
            i++;
        }
        i++;
        if (s->len)
            g_string_append_c(s, ',');
        if (first == last)
            g_string_append_printf(s, "%u", first);
        else
            g_string_append_printf(s, "%u-%u", first, last);
    }
    return g_string_free(s, FALSE);
}

/* The CPUs of @cpus that @node does not hold (caller frees). */
static GArray *
av_hook_cpus_outside(const GArray *cpus, const AvNumaNode *node)
{
    GArray *outside = g_array_new(FALSE, FALSE, sizeof(guint));

    for (guint i = 0; i < cpus->len; i++) {
        guint cpu = g_array_index(cpus, guint, i);
        gboolean in = FALSE;

        for (guint j = 0; j < node->cpus->len && !in; j++)
            in = g_array_index(node->cpus, guint, j) == cpu;
        if (!in)
            g_array_append_val(outside, cpu);
    }
    return outside;
}

/* "start begin" and "started begin": the NUMA placement of the domain
 * against each managed device's profile.  strict: every vCPU pinned within
 * the device's node, else refuse; preferred: a warning; none: nothing.  A
 * device whose node the kernel does not know (-1) is not checked. */
int
av_hook_start(const AvHookConfig *config, const AvDomain *domain)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(GArray) cpus = NULL;
    gboolean all_pinned = FALSE;

    policy = av_policy_load_dir(config->policy_dir, &error);
    if (!policy)
        return av_hook_refusef("cannot read the policies: %s", error->message);
    pool = av_pool_open(config->state_dir, AV_POOL_READ, config->lock_timeout_ms, &error);
    if (!pool)
        return av_hook_refuse(error->message);

    for (guint i = 0; i < domain->hostdevs->len; i++) {
        const AvHostdev *h = g_ptr_array_index(domain->hostdevs, i);
        const AvPoolDevice *dev = NULL;
        const AvProfile *profile;
        const AvNumaNode *node = NULL;
        g_autoptr(GArray) outside = NULL;
        g_autofree char *what = NULL;
        g_autofree char *node_cpus = NULL;
        g_autofree char *problem = NULL;

        if (h->type == AV_HOSTDEV_PCI) {
            dev = av_pool_find_address(pool, AV_DEVICE_KIND_PCI, h->pci_address);
        } else if (h->type == AV_HOSTDEV_MDEV) {
            g_autofree char *identity = av_pool_identity_mdev(h->mdev_uuid);
            dev = av_pool_find(pool, identity);
        }
        if (!dev || !dev->profile || dev->numa_node < 0)
            continue;
        /* The scrub VM of the device: its placement is not a tenant's. */
        if (av_pool_is_scrub_domain(dev, domain->uuid))
            continue;
        profile = av_policy_find(policy, dev->profile);
        if (!profile || profile->numa == AV_NUMA_NONE)
            continue;
        if (!host) {
            /* The NUMA nodes alone: the pool has each device's node. */
            host = av_host_scan_devices(config->root, (const char *const[]){ NULL }, FALSE, &error);
            if (!host)
                return av_hook_refusef("cannot read the host's NUMA nodes: %s", error->message);
        }
        if (!cpus && !av_domain_vcpu_cpus(domain, &cpus, &all_pinned, &error)) {
            /* Only what it checks can refuse the domain. */
            what = av_hook_describe_device(dev);
            if (profile->numa == AV_NUMA_STRICT)
                return av_hook_refusef("cannot start domain '%s': device %s has a profile '%s' with numa strict, "
                                       "and %s", domain->name, what, profile->name, error->message);
            av_hook_log(LOG_WARNING, "cannot check the NUMA placement of device %s (profile '%s', numa "
                        "preferred): %s", what, profile->name, error->message);
            g_clear_error(&error);
            continue;
        }
        for (guint j = 0; j < host->numa_nodes->len; j++) {
            const AvNumaNode *n = g_ptr_array_index(host->numa_nodes, j);

            if (n->id == dev->numa_node)
                node = n;
        }
        if (!node)
            continue;
        outside = av_hook_cpus_outside(cpus, node);
        if (all_pinned && outside->len == 0)
            continue;
        what = av_hook_describe_device(dev);
        node_cpus = av_hook_cpulist(node->cpus);
        if (!all_pinned) {
            problem = g_strdup("some of its vCPUs are not pinned");
        } else {
            g_autofree char *list = av_hook_cpulist(outside);
            problem = g_strdup_printf("its vCPUs may run on CPUs %s, outside the node", list);
        }
        if (profile->numa == AV_NUMA_STRICT)
            return av_hook_refusef("cannot start domain '%s': device %s is on NUMA node %d (CPUs %s) and its "
                                   "profile '%s' has numa strict, but %s; pin every vCPU to CPUs of node %d "
                                   "with <vcpupin> or <vcpu cpuset='%s'>",
                                   domain->name, what, node->id, node_cpus, profile->name, problem, node->id,
                                   node_cpus);
        av_hook_log(LOG_WARNING, "device %s is on NUMA node %d (CPUs %s), preferred by its profile '%s', "
                    "but %s; pin the vCPUs to that node for full speed",
                    what, node->id, node_cpus, profile->name, problem);
    }
    return 0;
}
