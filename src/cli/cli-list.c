/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt list: host discovery. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pci/av-pci.h"
#include "vfio/av-vfio.h"
#include "util/av-json.h"

static json_t *
av_hex_json(guint64 value, int digits)
{
    g_autofree char *s = g_strdup_printf("0x%0*" G_GINT64_MODIFIER "x", digits, value);

    return json_string(s);
}

static json_t *
av_strv_json(GPtrArray *strings)
{
    json_t *arr = json_array();

    for (guint i = 0; strings && i < strings->len; i++)
        json_array_append_new(arr, json_string(g_ptr_array_index(strings, i)));
    return arr;
}

/* "01-23-45-67-89-ab-cd-ef", most significant byte first, as lspci prints a
 * Device Serial Number. */
static char *
av_dsn_format(guint64 dsn)
{
    GString *s = g_string_new(NULL);

    for (int i = 7; i >= 0; i--)
        g_string_append_printf(s, "%s%02x", i == 7 ? "" : "-", (guint)((dsn >> (i * 8)) & 0xff));
    return g_string_free(s, FALSE);
}

/* Whether a managed device could be handed to a guest as things stand (its
 * IOMMU group is viable and holds nothing the host uses).  NULL when the
 * device is not managed or not passed through whole (mdev parents); else a
 * newly allocated reason ("" when it can).  Caller frees. */
static char *
av_list_passthrough_problem(const AvHost *host, const AvPolicy *policy, const AvPciDevice *dev,
                            const AvProfile *profile)
{
    g_autoptr(GPtrArray) members = NULL;
    g_autoptr(GError) err = NULL;

    if (!profile || profile->attach == AV_ATTACH_MDEV || profile->attach == AV_ATTACH_USB)
        return NULL;
    /* A card of attach netdev goes to a domain as its interface, on its
     * host driver: no IOMMU group to check, an interface to have. */
    if (profile->attach == AV_ATTACH_NETDEV)
        return g_strdup(dev->netdevs && dev->netdevs->len > 0
                            ? ""
                            : "it has no network interface (net/ is empty): load the card's host driver, which "
                              "makes it");
    if (!av_vfio_group_check(host, policy, dev, &members, &err))
        return g_strdup(err->message);
    return g_strdup("");
}

/* AvMdevType* as "types" of list --json: [{"id", "name", "device_api",
 * "available_instances", "description"}]. */
static json_t *
av_mdev_types_json(const GPtrArray *types)
{
    json_t *a = json_array();

    for (guint i = 0; types && i < types->len; i++) {
        const AvMdevType *t = g_ptr_array_index(types, i);
        json_t *jt = json_object();

        json_object_set_new(jt, "id", json_string(t->id));
        json_object_set_new(jt, "name", av_json_string_or_null(t->name));
        json_object_set_new(jt, "device_api", av_json_string_or_null(t->device_api));
        json_object_set_new(jt, "available_instances", json_integer(t->available));
        json_object_set_new(jt, "description", av_json_string_or_null(t->description));
        json_array_append_new(a, jt);
    }
    return a;
}

/* AvMdev* as "devices": [{"uuid", "type"}]. */
static json_t *
av_mdevs_json(const GPtrArray *mdevs)
{
    json_t *a = json_array();

    for (guint i = 0; mdevs && i < mdevs->len; i++) {
        const AvMdev *m = g_ptr_array_index(mdevs, i);
        json_t *jm = json_object();

        json_object_set_new(jm, "uuid", json_string(m->uuid));
        json_object_set_new(jm, "type", av_json_string_or_null(m->type_id));
        json_array_append_new(a, jm);
    }
    return a;
}

/* One entry of "mdev_parents": {"name", "pci_address", "numa_node",
 * "types", "devices", "profile"}. */
static json_t *
av_mdev_parent_json(const AvMdevParent *parent, const AvProfile *profile)
{
    json_t *o = json_object();

    json_object_set_new(o, "name", json_string(parent->name));
    json_object_set_new(o, "pci_address", av_json_string_or_null(parent->pci_address));
    json_object_set_new(o, "numa_node", json_integer(parent->numa_node));
    json_object_set_new(o, "types", av_mdev_types_json(parent->types));
    json_object_set_new(o, "devices", av_mdevs_json(parent->mdevs));
    json_object_set_new(o, "profile", profile ? json_string(profile->name) : json_null());
    return o;
}

/* What the "vfs" profile @maker makes on a PF: {"profile", "vfs": N or
 * "on-demand", "shrink"}, or null. */
static json_t *
av_vf_maker_json(const AvProfile *maker)
{
    if (!maker)
        return json_null();
    return json_pack("{s:s,s:o,s:b}", "profile", maker->name, "vfs",
                     maker->vfs_on_demand ? json_string("on-demand") : json_integer(maker->vfs), "shrink",
                     maker->vfs_shrink);
}

/* "N of M VFs enabled", and who makes them, for the long list. */
static void
av_print_sriov(const AvPciDevice *d, const AvProfile *maker)
{
    g_autofree char *vf_device = d->sriov_vf_device_set ? g_strdup_printf(", VF device %04x", d->sriov_vf_device)
                                                        : g_strdup("");

    printf("      sr-iov: %u of %u VFs enabled%s\n", d->sriov_numvfs, d->sriov_totalvfs, vf_device);
    if (!maker)
        return;
    if (maker->vfs_on_demand)
        printf("      VFs made by profile %s: on demand, up to %u%s\n", maker->name, d->sriov_totalvfs,
               maker->vfs_shrink ? ", back to 0 once all are free" : "");
    else
        printf("      VFs made by profile %s: %u%s\n", maker->name, maker->vfs,
               maker->vfs_shrink ? ", shrunk back to it once all are free" : "");
}

/* The vfio driver accelvirt would bind @dev to ("vfio-pci", a variant's
 * module): its profile's "vfio_driver", else what the running kernel's
 * modules.alias offers it; NULL for a device no profile hands out whole
 * that the kernel offers nothing (no modules.alias, a bridge). */
static const char *
av_list_vfio_driver(const AvPciDevice *dev, const AvProfile *profile)
{
    /* A vGPU VF stays on NVIDIA's driver, its VFIO driver. */
    if (profile && profile->vgpu_type)
        return dev->driver;
    if (profile && profile->vfio_driver &&
        (profile->attach == AV_ATTACH_VFIO_PCI || profile->attach == AV_ATTACH_SRIOV_VF))
        return profile->vfio_driver;
    if (!dev->vfio_driver)
        return NULL;
    return g_str_equal(dev->vfio_driver, "vfio_pci") ? "vfio-pci" : dev->vfio_driver;
}

static json_t *
av_pci_json(const AvPciDevice *dev, const AvProfile *profile, const AvProfile *maker, const char *problem)
{
    json_t *o = json_object();
    json_t *sriov = json_null();
    json_t *mdev = json_null();
    json_t *group = json_null();
    json_t *resets = json_null();

    json_object_set_new(o, "address", json_string(dev->address));
    json_object_set_new(o, "vendor_id", av_hex_json(dev->vendor_id, 4));
    json_object_set_new(o, "device_id", av_hex_json(dev->device_id, 4));
    json_object_set_new(o, "subsystem_vendor_id", av_hex_json(dev->subsystem_vendor_id, 4));
    json_object_set_new(o, "subsystem_device_id", av_hex_json(dev->subsystem_device_id, 4));
    json_object_set_new(o, "class", av_hex_json(dev->class_code, 6));
    json_object_set_new(o, "revision", av_hex_json(dev->revision, 2));
    json_object_set_new(o, "vendor_name", av_json_string_or_null(dev->vendor_name));
    json_object_set_new(o, "device_name", av_json_string_or_null(dev->device_name));
    json_object_set_new(o, "numa_node", json_integer(dev->numa_node));
    /* Only when the node was inferred from local_cpulist (the kernel said -1). */
    if (dev->numa_inferred)
        json_object_set_new(o, "numa_node_inferred", json_true());
    json_object_set_new(o, "local_cpulist", av_json_string_or_null(dev->local_cpulist));
    if (dev->iommu_group >= 0) {
        group = json_object();
        json_object_set_new(group, "id", json_integer(dev->iommu_group));
        json_object_set_new(group, "members", av_strv_json(dev->iommu_group_members));
    }
    json_object_set_new(o, "iommu_group", group);
    json_object_set_new(o, "driver", av_json_string_or_null(dev->driver));
    json_object_set_new(o, "driver_override", av_json_string_or_null(dev->driver_override));
    json_object_set_new(o, "vfio_driver", av_json_string_or_null(av_list_vfio_driver(dev, profile)));
    json_object_set_new(o, "live_migratable",
                        av_list_vfio_driver(dev, profile) ? json_boolean(av_pci_vfio_variant_migrates(
                                                                av_list_vfio_driver(dev, profile)))
                                                          : json_null());
    /* Only for a VF with NVIDIA's vGPU interface (av-pci-vgpu.c). */
    if (dev->vgpu_capable) {
        json_t *vgpu = json_object();
        json_t *types = json_array();

        for (guint i = 0; dev->vgpu_creatable && i < dev->vgpu_creatable->len; i++) {
            const AvVgpuType *t = g_ptr_array_index(dev->vgpu_creatable, i);

            json_array_append_new(types, json_pack("{s:I,s:s}", "id", (json_int_t)t->id, "name", t->name));
        }
        json_object_set_new(vgpu, "current_type", json_integer(dev->vgpu_current));
        json_object_set_new(vgpu, "creatable", types);
        json_object_set_new(o, "vgpu", vgpu);
    }
    json_object_set_new(o, "physical_slot", av_json_string_or_null(dev->physical_slot));
    if (dev->has_dsn) {
        g_autofree char *dsn = av_dsn_format(dev->dsn);
        json_object_set_new(o, "dsn", json_string(dsn));
    } else {
        json_object_set_new(o, "dsn", json_null());
    }
    if (dev->sriov_capable) {
        sriov = json_object();
        json_object_set_new(sriov, "total_vfs", json_integer(dev->sriov_totalvfs));
        json_object_set_new(sriov, "num_vfs", json_integer(dev->sriov_numvfs));
        json_object_set_new(sriov, "vfs", av_strv_json(dev->virtfns));
        json_object_set_new(sriov, "vf_device", dev->sriov_vf_device_set ? av_hex_json(dev->sriov_vf_device, 4)
                                                                         : json_null());
        json_object_set_new(sriov, "made_by", av_vf_maker_json(maker));
    }
    json_object_set_new(o, "sriov", sriov);
    json_object_set_new(o, "physfn", av_json_string_or_null(dev->physfn));
    json_object_set_new(o, "vf_index", dev->physfn ? json_integer(dev->vf_index) : json_null());
    if (dev->mdev_types && dev->mdev_types->len > 0) {
        mdev = json_object();
        json_object_set_new(mdev, "types", av_mdev_types_json(dev->mdev_types));
        json_object_set_new(mdev, "devices", av_mdevs_json(dev->mdevs));
    }
    json_object_set_new(o, "mdev", mdev);
    if (dev->reset_methods) {
        resets = json_array();
        for (char **m = dev->reset_methods; *m; m++)
            json_array_append_new(resets, json_string(*m));
    }
    json_object_set_new(o, "reset_methods", resets);
    json_object_set_new(o, "reset", json_boolean(dev->has_reset));
    json_object_set_new(o, "parent_bridge", av_json_string_or_null(dev->parent_bridge));
    json_object_set_new(o, "sysfs_path", json_string(dev->sysfs_path));
    /* Only when it has some: the interfaces its host driver made. */
    if (dev->netdevs && dev->netdevs->len > 0)
        json_object_set_new(o, "netdevs", av_strv_json(dev->netdevs));
    json_object_set_new(o, "profile", profile ? json_string(profile->name) : json_null());
    if (problem) {
        json_t *pt = json_object();

        json_object_set_new(pt, "possible", json_boolean(*problem == '\0'));
        json_object_set_new(pt, "reason", *problem ? json_string(problem) : json_null());
        json_object_set_new(o, "passthrough", pt);
    } else {
        json_object_set_new(o, "passthrough", json_null());
    }
    return o;
}

static json_t *
av_usb_json(const AvUsbDevice *dev, const AvProfile *profile)
{
    json_t *o = json_object();

    json_object_set_new(o, "bus_path", json_string(dev->bus_path));
    json_object_set_new(o, "vendor_id", av_hex_json(dev->vendor_id, 4));
    json_object_set_new(o, "product_id", av_hex_json(dev->product_id, 4));
    json_object_set_new(o, "manufacturer", av_json_string_or_null(dev->manufacturer));
    json_object_set_new(o, "product", av_json_string_or_null(dev->product));
    json_object_set_new(o, "serial", av_json_string_or_null(dev->serial));
    json_object_set_new(o, "busnum", json_integer(dev->busnum));
    json_object_set_new(o, "devnum", json_integer(dev->devnum));
    json_object_set_new(o, "speed", av_json_string_or_null(dev->speed));
    json_object_set_new(o, "pci_controller", av_json_string_or_null(dev->pci_controller));
    json_object_set_new(o, "numa_node", json_integer(dev->numa_node));
    json_object_set_new(o, "sysfs_path", json_string(dev->sysfs_path));
    json_object_set_new(o, "profile", profile ? json_string(profile->name) : json_null());
    return o;
}

static json_t *
av_numa_json(const AvNumaNode *node)
{
    json_t *o = json_object();
    json_t *cpus = json_array();

    for (guint i = 0; i < node->cpus->len; i++)
        json_array_append_new(cpus, json_integer(g_array_index(node->cpus, guint, i)));
    json_object_set_new(o, "id", json_integer(node->id));
    json_object_set_new(o, "cpulist", json_string(node->cpulist));
    json_object_set_new(o, "cpus", cpus);
    json_object_set_new(o, "memory_kib", json_integer((json_int_t)node->memory_kib));
    return o;
}

static const char *
av_or_dash(const char *s)
{
    return s && *s ? s : "-";
}

static char *
av_node_str(int node)
{
    return node < 0 ? g_strdup("-") : g_strdup_printf("%d", node);
}

static void
av_list_print_table(const AvHost *host, const AvPolicy *policy, gboolean managed_only, gboolean lng)
{
    g_autoptr(GPtrArray) problems = g_ptr_array_new_with_free_func(g_free);

    printf("NUMA nodes\n");
    printf("  %-4s  %-24s  %s\n", "NODE", "CPUS", "MEMORY");
    for (guint i = 0; i < host->numa_nodes->len; i++) {
        const AvNumaNode *n = g_ptr_array_index(host->numa_nodes, i);
        g_autofree char *mem = n->memory_kib ? g_format_size_full(n->memory_kib * 1024, G_FORMAT_SIZE_IEC_UNITS) : g_strdup("-");

        printf("  %-4d  %-24s  %s\n", n->id, n->cpulist, mem);
    }

    if (!host->has_pci_bus) {
        printf("\nPCI devices: none, this host has no PCI bus\n");
    } else {
        printf("\nPCI devices%s\n", host->iommu_enabled ? "" : " (no IOMMU groups: the IOMMU is off; vfio passthrough is impossible)");
        printf("  %-12s  %-9s  %-6s  %-4s  %-5s  %-14s  %-18s  %s\n",
               "ADDRESS", "ID", "CLASS", "NODE", "GROUP", "DRIVER", "PROFILE", "NAME");
    }
    for (guint i = 0; i < host->pci->len; i++) {
        const AvPciDevice *d = g_ptr_array_index(host->pci, i);
        const AvProfile *p = av_policy_match_pci(policy, d);
        g_autofree char *node = av_node_str(d->numa_node);
        g_autofree char *group = d->iommu_group < 0 ? g_strdup("-") : g_strdup_printf("%d", d->iommu_group);
        g_autofree char *id = g_strdup_printf("%04x:%04x", d->vendor_id, d->device_id);
        g_autofree char *cls = g_strdup_printf("%06x", d->class_code);
        g_autofree char *name = NULL;
        g_autofree char *problem = NULL;
        g_autofree char *pcol = NULL;

        if (managed_only && !p && !av_policy_match_sriov_pf(policy, d))
            continue;
        problem = av_list_passthrough_problem(host, policy, d, p);
        if (problem && *problem)
            g_ptr_array_add(problems, g_strdup(problem));
        pcol = !p ? g_strdup("-") : problem && *problem ? g_strconcat(p->name, " (!)", NULL) : g_strdup(p->name);
        name = g_strdup_printf("%s%s%s", av_or_dash(d->vendor_name), d->device_name ? " " : "",
                               d->device_name ? d->device_name : "");
        /* The interfaces its host driver made (a card of attach netdev goes
         * to a domain as one of them). */
        for (guint j = 0; d->netdevs && j < d->netdevs->len; j++) {
            char *more = g_strdup_printf("%s%s %s", name, j ? "," : "  netdev",
                                         (const char *)g_ptr_array_index(d->netdevs, j));

            g_free(name);
            name = more;
        }
        printf("  %-12s  %-9s  %-6s  %-4s  %-5s  %-14s  %-18s  %s\n",
               d->address, id, cls, node, group, av_or_dash(d->driver),
               pcol, name);
        if (!lng)
            continue;
        if (d->driver_override)
            printf("      driver_override: %s\n", d->driver_override);
        if (d->vgpu_capable) {
            g_autoptr(GString) types = g_string_new(NULL);

            for (guint j = 0; d->vgpu_creatable && j < d->vgpu_creatable->len; j++)
                g_string_append_printf(types, "%s%s", j ? ", " : "",
                                       ((const AvVgpuType *)g_ptr_array_index(d->vgpu_creatable, j))->name);
            if (d->vgpu_current)
                printf("      vGPU: type %u made; creatable now: %s\n", d->vgpu_current,
                       types->len ? types->str : "none");
            else
                printf("      vGPU: none made; creatable now: %s\n", types->len ? types->str : "none");
        }
        if (p && p->vgpu_type)
            ;   /* NVIDIA's driver, not a vfio-pci variant */
        else if (av_list_vfio_driver(d, p) && !g_str_equal(av_list_vfio_driver(d, p), "vfio-pci"))
            printf("      vfio driver: %s (a vfio-pci variant%s)\n", av_list_vfio_driver(d, p),
                   av_pci_vfio_variant_migrates(av_list_vfio_driver(d, p)) ? " with live migration" : "");
        if (d->iommu_group_members && d->iommu_group_members->len > 1) {
            g_autoptr(GString) others = g_string_new(NULL);

            for (guint j = 0; j < d->iommu_group_members->len; j++) {
                const char *m = g_ptr_array_index(d->iommu_group_members, j);
                if (!g_str_equal(m, d->address))
                    g_string_append_printf(others, " %s", m);
            }
            printf("      iommu group %d shared with:%s\n", d->iommu_group, others->str);
        }
        if (d->physical_slot)
            printf("      slot: %s\n", d->physical_slot);
        if (d->has_dsn) {
            g_autofree char *dsn = av_dsn_format(d->dsn);
            printf("      serial number: %s\n", dsn);
        }
        if (d->sriov_capable)
            av_print_sriov(d, av_policy_match_sriov_pf(policy, d));
        if (d->physfn)
            printf("      vf %d of %s\n", d->vf_index, d->physfn);
        for (guint j = 0; d->mdev_types && j < d->mdev_types->len; j++) {
            const AvMdevType *t = g_ptr_array_index(d->mdev_types, j);
            printf("      mdev type %s (%s, %s): %u available\n", t->id, av_or_dash(t->name),
                   av_or_dash(t->device_api), t->available);
        }
        for (guint j = 0; d->mdevs && j < d->mdevs->len; j++) {
            const AvMdev *m = g_ptr_array_index(d->mdevs, j);
            printf("      mdev %s (%s)\n", m->uuid, av_or_dash(m->type_id));
        }
        if (d->reset_methods) {
            g_autofree char *methods = g_strjoinv(" ", d->reset_methods);
            printf("      reset methods: %s\n", *methods ? methods : "(none)");
        }
    }

    if (problems->len > 0) {
        printf("\n(!) Managed devices that cannot be given to a guest as the host stands:\n");
        for (guint i = 0; i < problems->len; i++)
            printf("  %s\n", (const char *)g_ptr_array_index(problems, i));
    }

    if (host->mdev_parents && host->mdev_parents->len > 0) {
        gboolean header = FALSE;

        for (guint i = 0; i < host->mdev_parents->len; i++) {
            const AvMdevParent *mp = g_ptr_array_index(host->mdev_parents, i);
            const AvProfile *p = av_policy_match_mdev_parent(policy, mp);
            g_autofree char *node = av_node_str(mp->numa_node);
            g_autoptr(GString) types = g_string_new(NULL);

            if (managed_only && !p)
                continue;
            if (!header) {
                printf("\nMediated device parents\n");
                printf("  %-12s  %-12s  %-4s  %-5s  %-18s  %s\n", "NAME", "PCI", "NODE", "MDEVS", "PROFILE",
                       "TYPES (AVAILABLE)");
                header = TRUE;
            }
            for (guint j = 0; j < mp->types->len; j++) {
                const AvMdevType *t = g_ptr_array_index(mp->types, j);

                g_string_append_printf(types, "%s%s (%u)", j ? ", " : "", t->id, t->available);
            }
            printf("  %-12s  %-12s  %-4s  %-5u  %-18s  %s\n", mp->name, av_or_dash(mp->pci_address), node,
                   mp->mdevs->len, p ? p->name : "-", types->len ? types->str : "-");
            if (!lng || mp->pci)
                continue;
            /* A PCI parent's details are under its PCI device above. */
            for (guint j = 0; j < mp->types->len; j++) {
                const AvMdevType *t = g_ptr_array_index(mp->types, j);
                printf("      mdev type %s (%s, %s): %u available\n", t->id, av_or_dash(t->name),
                       av_or_dash(t->device_api), t->available);
            }
            for (guint j = 0; j < mp->mdevs->len; j++) {
                const AvMdev *m = g_ptr_array_index(mp->mdevs, j);
                printf("      mdev %s (%s)\n", m->uuid, av_or_dash(m->type_id));
            }
            printf("      sysfs: %s\n", mp->sysfs_path);
        }
    }

    printf("\nUSB devices\n");
    printf("  %-12s  %-7s  %-9s  %-4s  %-18s  %-16s  %s\n", "BUS PATH", "BUS/DEV", "ID", "NODE", "PROFILE", "SERIAL",
           "NAME");
    for (guint i = 0; i < host->usb->len; i++) {
        const AvUsbDevice *u = g_ptr_array_index(host->usb, i);
        const AvProfile *p = av_policy_match_usb(policy, u);
        g_autofree char *node = av_node_str(u->numa_node);
        g_autofree char *id = g_strdup_printf("%04x:%04x", u->vendor_id, u->product_id);
        g_autofree char *numbers = g_strdup_printf("%u/%u", u->busnum, u->devnum);
        /* Two identical sticks differ in port, numbers and serial only. */
        g_autofree char *serial = u->serial ? av_cli_printable(u->serial) : g_strdup("no serial");

        if (managed_only && !p)
            continue;
        printf("  %-12s  %-7s  %-9s  %-4s  %-18s  %-16s  %s%s%s\n", u->bus_path, numbers, id, node,
               p ? p->name : "-", serial, av_or_dash(u->manufacturer), u->product ? " " : "",
               u->product ? u->product : "");
    }
}

int
av_cli_cmd_list(AvCli *cli, int argc, char **argv)
{
    gboolean managed_only = FALSE;
    gboolean lng = FALSE;
    const GOptionEntry entries[] = {
        { "managed", 'm', 0, G_OPTION_ARG_NONE, &managed_only, "Only devices that a profile matches", NULL },
        { "long", 'l', 0, G_OPTION_ARG_NONE, &lng, "Details under each PCI device", NULL },
        { NULL },
    };
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(GError) err = NULL;

    if (!av_cli_parse(cli, "list", NULL,
                      "Show the PCI and USB devices and NUMA nodes of the host, with the profile that matches each.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc > 1)
        return av_cli_usage_error("'list' takes no arguments, got '%s'", argv[1]);

    if (!av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);
    host = av_host_scan(root, &err);
    if (!host)
        return av_cli_fail(err);
    av_pci_vfio_variants(root, host->pci);

    if (cli->json) {
        json_t *o = json_object();
        json_t *numa = json_array();
        json_t *pci = json_array();
        json_t *usb = json_array();
        json_t *parents = json_array();

        for (guint i = 0; i < host->numa_nodes->len; i++)
            json_array_append_new(numa, av_numa_json(g_ptr_array_index(host->numa_nodes, i)));
        for (guint i = 0; i < host->pci->len; i++) {
            const AvPciDevice *d = g_ptr_array_index(host->pci, i);
            const AvProfile *p = av_policy_match_pci(policy, d);

            if (!managed_only || p || av_policy_match_sriov_pf(policy, d)) {
                g_autofree char *problem = av_list_passthrough_problem(host, policy, d, p);

                json_array_append_new(pci, av_pci_json(d, p, av_policy_match_sriov_pf(policy, d), problem));
            }
        }
        for (guint i = 0; i < host->usb->len; i++) {
            const AvUsbDevice *u = g_ptr_array_index(host->usb, i);
            const AvProfile *p = av_policy_match_usb(policy, u);

            if (!managed_only || p)
                json_array_append_new(usb, av_usb_json(u, p));
        }
        json_object_set_new(o, "pci_bus", json_boolean(host->has_pci_bus));
        json_object_set_new(o, "iommu_enabled", json_boolean(host->iommu_enabled));
        json_object_set_new(o, "numa_nodes", numa);
        json_object_set_new(o, "pci", pci);
        for (guint i = 0; host->mdev_parents && i < host->mdev_parents->len; i++) {
            const AvMdevParent *mp = g_ptr_array_index(host->mdev_parents, i);
            const AvProfile *p = av_policy_match_mdev_parent(policy, mp);

            if (!managed_only || p)
                json_array_append_new(parents, av_mdev_parent_json(mp, p));
        }
        json_object_set_new(o, "usb", usb);
        json_object_set_new(o, "mdev_parents", parents);
        av_cli_print_json(o);
    } else {
        av_list_print_table(host, policy, managed_only, lng);
    }
    return AV_EXIT_OK;
}
