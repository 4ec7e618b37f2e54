/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: NUMA nodes from sysfs.
 *
 * Documentation/ABI/stable/sysfs-devices-node: /sys/devices/system/node/nodeN
 * with "cpulist" and "meminfo"; Documentation/ABI/testing/sysfs-devices-system-cpu
 * for /sys/devices/system/cpu/online. */
#include "config.h"

#include "av-pci-private.h"

#include <errno.h>
#include <string.h>

#include "util/av-error.h"

void
av_numa_node_free(AvNumaNode *node)
{
    if (!node)
        return;
    g_free(node->cpulist);
    if (node->cpus)
        g_array_unref(node->cpus);
    g_free(node);
}

/* The value of the "MemTotal:" line of a meminfo file, in KiB, or 0.
 * Node files read "Node 0 MemTotal:       263921276 kB", /proc/meminfo
 * "MemTotal:       263921276 kB". */
static guint64
av_numa_parse_memtotal(const char *meminfo)
{
    const char *p = meminfo ? strstr(meminfo, "MemTotal:") : NULL;
    guint64 v;
    char *end;

    if (!p)
        return 0;
    p += strlen("MemTotal:");
    while (*p == ' ' || *p == '\t')
        p++;
    if (!g_ascii_isdigit(*p))
        return 0;
    v = g_ascii_strtoull(p, &end, 10);
    if (end == p)
        return 0;
    return v;
}

/* A new node @id with the CPUs of @cpulist; NULL with @error set when the
 * list is malformed (naming @where). */
static AvNumaNode *
av_numa_node_new(int id, const char *cpulist, const char *where, GError **error)
{
    g_autoptr(AvNumaNode) node = g_new0(AvNumaNode, 1);

    node->id = id;
    node->cpulist = g_strdup(cpulist);
    if (!av_cpulist_parse(cpulist, &node->cpus, error)) {
        g_prefix_error(error, "cannot read '%s': ", where);
        return NULL;
    }
    return g_steal_pointer(&node);
}

static gint
av_numa_node_cmp(gconstpointer a, gconstpointer b)
{
    const AvNumaNode *x = *(AvNumaNode *const *)a, *y = *(AvNumaNode *const *)b;

    return x->id < y->id ? -1 : x->id > y->id;
}

/* TRUE and the number N for a directory named "nodeN". */
static gboolean
av_numa_parse_name(const char *name, int *ret_id)
{
    guint64 v;

    if (!g_str_has_prefix(name, "node") || !g_ascii_isdigit(name[4]))
        return FALSE;
    if (!g_ascii_string_to_unsigned(name + 4, 10, 0, G_MAXINT, &v, NULL))
        return FALSE;
    *ret_id = (int)v;
    return TRUE;
}

/* Scans the NUMA nodes: see av-pci-private.h.  Without any nodeN directory
 * (a kernel without CONFIG_NUMA), one node 0 holds the CPUs of
 * /sys/devices/system/cpu/online and the MemTotal of /proc/meminfo.
 * Appends owned AvNumaNode* to @ret_nodes and sorts it. */
gboolean
av_numa_scan(const AvRoot *root, GPtrArray *ret_nodes, GError **error)
{
    g_autofree char *dir = av_sys_path("devices/system/node");
    g_auto(GStrv) names = NULL;
    guint found = 0;
    int r;

    r = av_root_list_dir(root, dir, &names);
    if (r < 0 && r != -ENOENT && r != -ENOTDIR)
        return av_error_errno(error, r, "cannot list the NUMA nodes in '%s'", dir);

    for (guint i = 0; names && names[i]; i++) {
        g_autofree char *cpulist_path = NULL;
        g_autofree char *meminfo_path = NULL;
        g_autofree char *cpulist = NULL;
        g_autofree char *meminfo = NULL;
        AvNumaNode *node;
        int id;

        if (!av_numa_parse_name(names[i], &id))
            continue;
        cpulist_path = av_sys_path("devices/system/node/%s/cpulist", names[i]);
        r = av_root_read_attr(root, cpulist_path, &cpulist);
        if (r < 0)
            return av_error_errno(error, r, "cannot read the CPUs of NUMA node %d ('%s')", id, cpulist_path);
        node = av_numa_node_new(id, cpulist, cpulist_path, error);
        if (!node)
            return FALSE;
        meminfo_path = av_sys_path("devices/system/node/%s/meminfo", names[i]);
        if (av_root_read_file(root, meminfo_path, &meminfo, NULL) == 0)
            node->memory_kib = av_numa_parse_memtotal(meminfo);
        g_ptr_array_add(ret_nodes, node);
        found++;
    }

    if (found == 0) {
        g_autofree char *online_path = av_sys_path("devices/system/cpu/online");
        g_autofree char *meminfo_path = av_proc_path("meminfo");
        g_autofree char *online = NULL;
        g_autofree char *meminfo = NULL;
        AvNumaNode *node;

        r = av_root_read_attr(root, online_path, &online);
        if (r < 0) {
            g_debug("no NUMA nodes and no '%s' (%s): node 0 without CPUs", online_path, g_strerror(-r));
            online = g_strdup("");
        }
        node = av_numa_node_new(0, online, online_path, error);
        if (!node)
            return FALSE;
        if (av_root_read_file(root, meminfo_path, &meminfo, NULL) == 0)
            node->memory_kib = av_numa_parse_memtotal(meminfo);
        g_ptr_array_add(ret_nodes, node);
    }
    g_ptr_array_sort(ret_nodes, av_numa_node_cmp);
    return TRUE;
}
