/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt benchmark: av_place() on synthetic hosts of 10 to 100,000
 * functions.  A measurement, not a test: it prints the median time of a
 * placement for each size, its ratio to the 10-function case, and whether
 * the 10,000-function case stays under 5 ms and the 100,000-function case
 * under 50 ms; it never fails on timing.  It also times building each
 * pool with av_pool_add_device(), one device at a time as a reconcile adds
 * them, side by side with appending them all and sorting once (the floor),
 * both in one shuffled order (a scan's order, by address, is not the
 * pool's, by identity); once a size takes over a second that way, the
 * larger sizes are built only the second way (a pool that sorts itself at
 * every add takes minutes at 100,000).
 *
 * Each host: two NUMA nodes of 32 CPUs, cards of one SR-IOV PF with 8 VFs
 * (the functions), one IOMMU group per function, half of the cards on each
 * node; every third card has one VF in use by another domain, so that
 * packing has partly used cards to fill.  The pool is built in memory (in a
 * temporary state dir that is never saved).
 *
 *   bench-place [REPEATS]       (default 101) */
#include "config.h"

#include <glib/gstdio.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "place/av-place.h"
#include "pool/av-pool-private.h"

#define VFS_PER_CARD 8

static const char bench_policy[] =
    "{\"profiles\": [{\"name\": \"vf\", \"match\": {\"vendor\": \"0x10ee\", \"device\": [\"0x5051\"]},"
    " \"attach\": \"sriov-vf\", \"numa\": \"strict\", \"allocation\": \"pack\"}]}";

static GPtrArray *
bench_strings(const char *first)
{
    GPtrArray *a = g_ptr_array_new_with_free_func(g_free);

    if (first)
        g_ptr_array_add(a, g_strdup(first));
    return a;
}

static AvPciDevice *
bench_device(const char *address, guint16 device, int node, int group)
{
    AvPciDevice *dev = g_new0(AvPciDevice, 1);

    dev->address = g_strdup(address);
    dev->address_key = av_pci_address_key(address);
    dev->vendor_id = 0x10ee;
    dev->device_id = device;
    dev->class_code = 0x120000;
    dev->numa_node = node;
    dev->iommu_group = group;
    dev->iommu_group_members = bench_strings(address);
    dev->virtfns = bench_strings(NULL);
    dev->mdev_types = g_ptr_array_new_with_free_func((GDestroyNotify)av_mdev_type_free);
    dev->mdevs = g_ptr_array_new_with_free_func((GDestroyNotify)av_mdev_free);
    dev->driver = g_strdup("vfio-pci");
    dev->vf_index = -1;
    return dev;
}

static AvNumaNode *
bench_node(int id, guint first_cpu)
{
    AvNumaNode *node = g_new0(AvNumaNode, 1);

    node->id = id;
    node->cpulist = g_strdup_printf("%u-%u", first_cpu, first_cpu + 31);
    node->cpus = g_array_new(FALSE, FALSE, sizeof(guint));
    for (guint c = first_cpu; c < first_cpu + 32; c++)
        g_array_append_val(node->cpus, c);
    return node;
}

/* A host of @n functions (VFs), in address order. */
static AvHost *
bench_host(guint n)
{
    AvHost *host = g_new0(AvHost, 1);
    guint cards = (n + VFS_PER_CARD - 1) / VFS_PER_CARD;
    guint made = 0;
    int group = 0;

    host->pci = g_ptr_array_new_with_free_func((GDestroyNotify)av_pci_device_free);
    host->usb = g_ptr_array_new_with_free_func((GDestroyNotify)av_usb_device_free);
    host->numa_nodes = g_ptr_array_new_with_free_func((GDestroyNotify)av_numa_node_free);
    g_ptr_array_add(host->numa_nodes, bench_node(0, 0));
    g_ptr_array_add(host->numa_nodes, bench_node(1, 32));
    host->iommu_enabled = TRUE;
    for (guint k = 0; k < cards; k++) {
        g_autofree char *pf_address = g_strdup_printf("%04x:%02x:00.0", k / 200, k % 200 + 1);
        int node = k < cards / 2 ? 0 : 1;
        AvPciDevice *pf = bench_device(pf_address, 0x5050, node, group++);

        pf->has_dsn = TRUE;
        pf->dsn = 0x000a350000000000ull | k;
        pf->sriov_capable = TRUE;
        pf->sriov_totalvfs = VFS_PER_CARD;
        g_ptr_array_add(host->pci, pf);
        for (guint v = 0; v < VFS_PER_CARD && made < n; v++, made++) {
            g_autofree char *address = g_strdup_printf("%04x:%02x:01.%u", k / 200, k % 200 + 1, v);
            AvPciDevice *vf = bench_device(address, 0x5051, node, group++);

            vf->physfn = g_strdup(pf_address);
            vf->vf_index = v;
            g_ptr_array_add(pf->virtfns, g_strdup(address));
            pf->sriov_numvfs++;
            g_ptr_array_add(host->pci, vf);
        }
    }
    return host;
}

static gint64
bench_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (gint64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The pool devices of @host's VFs, every third card with one VF in use, in
 * address order. */
static GPtrArray *
bench_pool_devices(const AvHost *host)
{
    g_autoptr(AvOwner) other = av_owner_new("99999999-9999-4999-8999-999999999999", "other");
    GHashTable *pfs = g_hash_table_new(g_str_hash, g_str_equal);
    GPtrArray *devices = g_ptr_array_new_with_free_func((GDestroyNotify)av_pool_device_free);

    for (guint i = 0; i < host->pci->len; i++) {
        AvPciDevice *pci = g_ptr_array_index(host->pci, i);
        AvPoolDevice *dev;
        AvPciDevice *pf;
        guint card;

        if (!pci->physfn) {
            g_hash_table_insert(pfs, pci->address, pci);
            continue;
        }
        pf = g_hash_table_lookup(pfs, pci->physfn);
        card = (guint)(pf->dsn & 0xffffff);
        dev = av_pool_device_new();
        /* The identity av_pool_identity_pci() gives (a DSN PF's "/vfN"),
         * built here without its linear PF lookup. */
        dev->identity = g_strdup_printf("dsn:10ee:5050:%016" G_GINT64_MODIFIER "x.f0/vf%d", pf->dsn, pci->vf_index);
        dev->kind = AV_DEVICE_KIND_PCI;
        dev->address = g_strdup(pci->address);
        dev->profile = g_strdup("vf");
        dev->numa_node = pci->numa_node;
        dev->iommu_group = pci->iommu_group;
        if (card % 3 == 0 && pci->vf_index == 0) {
            dev->state = AV_DEVICE_STATE_IN_USE;
            dev->owner = av_owner_copy(other);
        }
        g_ptr_array_add(devices, dev);
    }
    g_hash_table_unref(pfs);
    return devices;
}

/* An empty pool in memory, in @state (never saved). */
static AvPool *
bench_pool_open(const char *state)
{
    g_autoptr(GError) err = NULL;
    AvPool *pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);

    if (!pool)
        g_error("cannot open a pool in '%s': %s", state, err->message);
    return pool;
}

/* Moves @devices into @pool: with av_pool_add_device() one at a time when
 * @add, else appended and sorted once.  Returns the ns it took. */
static gint64
bench_pool_fill(AvPool *pool, GPtrArray *devices, gboolean add)
{
    gint64 start;

    /* The order of a scan (by address) is not the pool's (by identity):
     * both ways take them in a shuffled order. */
    {
        g_autoptr(GRand) rand = g_rand_new_with_seed(38);

        for (guint i = devices->len; i > 1; i--) {
            guint j = (guint)g_rand_int_range(rand, 0, (gint32)i);
            gpointer t = devices->pdata[i - 1];

            devices->pdata[i - 1] = devices->pdata[j];
            devices->pdata[j] = t;
        }
    }
    start = bench_now_ns();
    for (guint i = 0; i < devices->len; i++) {
        AvPoolDevice *dev = g_steal_pointer(&devices->pdata[i]);

        if (add)
            av_pool_add_device(pool, dev);
        else
            g_ptr_array_add(pool->devices, dev);
    }
    if (!add)
        g_ptr_array_sort(pool->devices, av_pool_device_cmp);
    return bench_now_ns() - start;
}

/* Removes a state dir the pool left (its lock file, nothing saved). */
static void
bench_remove_state(const char *state)
{
    g_autoptr(GDir) dir = g_dir_open(state, 0, NULL);
    const char *name;

    while (dir && (name = g_dir_read_name(dir))) {
        g_autofree char *path = g_build_filename(state, name, NULL);

        g_unlink(path);
    }
    g_rmdir(state);
}

static int
bench_cmp(gconstpointer a, gconstpointer b)
{
    gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;

    return x < y ? -1 : x > y;
}

/* Median ns of @repeats placements of @request. */
static double
bench_time(const AvHost *host, const AvPolicy *policy, const AvPool *pool, AvRequest *request,
           guint repeats, char **ret_first)
{
    g_autoptr(GPtrArray) requests = g_ptr_array_new();
    g_autofree gint64 *t = g_new(gint64, repeats);
    AvPlaceOptions options = { NULL, 4, NULL, NULL };

    g_ptr_array_add(requests, request);
    for (guint r = 0; r < repeats; r++) {
        g_autoptr(GError) err = NULL;
        g_autoptr(AvPlacement) p = NULL;
        gint64 start = bench_now_ns();

        p = av_place(host, policy, pool, requests, &options, &err);
        t[r] = bench_now_ns() - start;
        if (!p)
            g_error("placement failed: %s", err->message);
        if (r == 0 && ret_first) {
            AvPlacedItem *item = g_ptr_array_index(p->items, 0);

            *ret_first = g_strdup_printf("%s (+%u)", item->pci_address, p->items->len - 1);
        }
    }
    qsort(t, repeats, sizeof(*t), bench_cmp);
    return (double)t[repeats / 2];
}

int
main(int argc, char **argv)
{
    static const guint sizes[] = { 10, 100, 1000, 10000, 100000 };
    guint repeats = argc > 1 ? (guint)strtoul(argv[1], NULL, 10) : 101;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = av_policy_new();
    g_autofree char *tmp = g_dir_make_tmp("accelvirt-bench-XXXXXX", &err);
    double base_fn = 0, base_card = 0;
    double at_fn[G_N_ELEMENTS(sizes)], at_card[G_N_ELEMENTS(sizes)];
    gboolean slow_add = FALSE;

    if (repeats == 0)
        repeats = 1;
    if (!tmp || !av_policy_add_data(policy, "bench.json", bench_policy, strlen(bench_policy), &err))
        g_error("setup: %s", err->message);
    printf("av_place() on synthetic hosts: 2 NUMA nodes, cards of 1 PF + %d VFs, every third card with one VF in use;\n"
           "median of %u placements each.  The pool of the VFs built with av_pool_add_device() (\"add\")\n"
           "and by appending all and sorting once (\"sort\"), each timed once\n\n", VFS_PER_CARD, repeats);
    printf("%9s  %16s  %8s  %16s  %8s  %12s  %12s  %6s  %s\n", "functions", "1 function (us)", "ratio",
           "whole card (us)", "ratio", "pool add (ms)", "pool sort (ms)", "ratio", "first placed");
    for (guint s = 0; s < G_N_ELEMENTS(sizes); s++) {
        g_autofree char *state = g_strdup_printf("%s/state-%u", tmp, sizes[s]);
        g_autofree char *state_add = g_strdup_printf("%s/state-add-%u", tmp, sizes[s]);
        g_autoptr(AvHost) host = bench_host(sizes[s]);
        g_autoptr(GPtrArray) devices = bench_pool_devices(host);
        g_autoptr(AvPool) pool = bench_pool_open(state);
        g_autoptr(AvRequest) one = av_request_new("vf", 1);
        g_autoptr(AvRequest) card = av_request_new("vf", 1);
        g_autofree char *first_fn = NULL;
        g_autofree char *first_card = NULL;
        g_autofree char *add_ms = NULL;
        g_autofree char *add_ratio = NULL;
        double fn_ns, card_ns, sort_ns;

        sort_ns = (double)bench_pool_fill(pool, devices, FALSE);
        if (slow_add) {
            add_ms = g_strdup("skipped");
            add_ratio = g_strdup("-");
        } else {
            g_autoptr(GPtrArray) again = bench_pool_devices(host);
            g_autoptr(AvPool) added = bench_pool_open(state_add);
            double add_ns = (double)bench_pool_fill(added, again, TRUE);

            /* Both ways give the same order. */
            for (guint i = 0; i < pool->devices->len; i++) {
                const AvPoolDevice *x = g_ptr_array_index(pool->devices, i);
                const AvPoolDevice *y = g_ptr_array_index(added->devices, i);

                if (!g_str_equal(x->identity, y->identity))
                    g_error("the pools differ at %u: %s, %s", i, x->identity, y->identity);
            }
            add_ms = g_strdup_printf("%.1f", add_ns / 1e6);
            add_ratio = g_strdup_printf("%.1f", add_ns / sort_ns);
            slow_add = add_ns > 1e9;
            g_clear_pointer(&added, av_pool_free);
            bench_remove_state(state_add);
        }
        card->granularity_set = TRUE;
        card->granularity = AV_GRANULARITY_CARD;
        fn_ns = bench_time(host, policy, pool, one, repeats, &first_fn);
        card_ns = bench_time(host, policy, pool, card, repeats, &first_card);
        if (s == 0) {
            base_fn = fn_ns;
            base_card = card_ns;
        }
        at_fn[s] = fn_ns;
        at_card[s] = card_ns;
        printf("%9u  %16.1f  %8.1f  %16.1f  %8.1f  %12s  %12.1f  %6s  %s; %s\n", sizes[s], fn_ns / 1000,
               fn_ns / base_fn, card_ns / 1000, card_ns / base_card, add_ms, sort_ns / 1e6, add_ratio, first_fn,
               first_card);
        fflush(stdout);
        g_clear_pointer(&pool, av_pool_free);
        bench_remove_state(state);
    }
    printf("\n10,000 functions under 5 ms: 1 function %s (%.2f ms), whole card %s (%.2f ms)\n",
           at_fn[3] < 5e6 ? "yes" : "NO", at_fn[3] / 1e6, at_card[3] < 5e6 ? "yes" : "NO", at_card[3] / 1e6);
    printf("100,000 functions under 50 ms: 1 function %s (%.2f ms), whole card %s (%.2f ms)\n",
           at_fn[4] < 5e7 ? "yes" : "NO", at_fn[4] / 1e6, at_card[4] < 5e7 ? "yes" : "NO", at_card[4] / 1e6);
    printf("(size ratio 10 -> 100,000 is 10,000x; linear scaling would show ratios near 1000 at 10,000\n"
           "and 10,000 at 100,000)\n");
    g_rmdir(tmp);
    return 0;
}
