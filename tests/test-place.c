/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: placement (src/place/av-place.c) on the fake hosts of
 * tests/data/mkhosts.py, with pools built by av_pool_reconcile() in a
 * temporary state dir and partly held through av_pool_transition(). */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "av-test.h"
#include "place/av-place.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "vfio/av-kernel.h"

/* --- fixture ------------------------------------------------------------------- */

typedef struct {
    char *tmp;
    AvHost *host;
    AvPolicy *policy;
    AvPool *pool;
    AvRoot *root;
    char *copy;                  /* a private copy of the host, or NULL */
    guint uuids;
} Fix;

static void
fix_open_at(Fix *f, const char *path, const char *policy_text)
{
    g_autofree char *state = NULL;
    AvRoot *root = NULL;
    g_autoptr(GError) err = NULL;

    f->tmp = av_test_tmpdir();
    state = g_build_filename(f->tmp, "state", NULL);
    root = av_root_new(path, &err);
    g_assert_no_error(err);
    f->root = root;
    f->host = av_host_scan(root, &err);
    g_assert_no_error(err);
    f->policy = av_policy_new();
    av_policy_add_data(f->policy, "test.json", policy_text, strlen(policy_text), &err);
    g_assert_no_error(err);
    f->pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    av_pool_reconcile(f->pool, f->host, f->policy, NULL, &err);
    g_assert_no_error(err);
}

static void
fix_open(Fix *f, const char *host_name, const char *policy_text)
{
    g_autofree char *path = av_test_host_path(host_name);

    memset(f, 0, sizeof(*f));
    fix_open_at(f, path, policy_text);
}

/* sriov-fpga-qat with its four VFs on no driver (idle: their count may
 * change), but for @busy (NULL: none), left on its host driver. */
static void
fix_open_idle_vfs(Fix *f, const char *policy_text, const char *busy)
{
    memset(f, 0, sizeof(*f));
    f->copy = av_test_host_copy("sriov-fpga-qat");
    for (guint i = 1; i <= 4; i++) {
        g_autofree char *vf = g_strdup_printf("0000:6b:00.%u", i);
        g_autofree char *link = g_strdup_printf("%s/sys/devices/pci0000:6b/%s/driver", f->copy, vf);

        if (g_strcmp0(vf, busy) != 0)
            g_assert_cmpint(g_unlink(link), ==, 0);
    }
    fix_open_at(f, f->copy, policy_text);
}

static void
fix_close(Fix *f)
{
    av_pool_free(f->pool);
    av_policy_free(f->policy);
    av_host_free(f->host);
    av_root_free(f->root);
    av_test_tmpdir_remove(f->tmp);
    if (f->copy)
        av_test_tmpdir_remove(f->copy);
    g_free(f->copy);
    g_free(f->tmp);
}

/* Moves the pooled device at @address to @state for the domain @owner. */
static void
fix_hold(Fix *f, const char *address, AvDeviceState state, const char *owner)
{
    AvPoolDevice *dev = av_pool_find_address(f->pool, AV_DEVICE_KIND_PCI, address);
    g_autoptr(AvOwner) o = av_owner_new(owner, NULL);
    g_autoptr(GError) err = NULL;
    static const AvDeviceState path[] = {
        AV_DEVICE_STATE_CLAIMED, AV_DEVICE_STATE_IN_USE, AV_DEVICE_STATE_DIRTY,
    };

    if (!dev)
        g_error("'%s' is not in the pool", address);
    for (guint i = 0; i < G_N_ELEMENTS(path) && dev->state != state; i++) {
        av_pool_transition(f->pool, dev, path[i], o, NULL, &err);
        g_assert_no_error(err);
    }
    g_assert_cmpint(dev->state, ==, state);
}

static char *
fix_uuid(gpointer data)
{
    Fix *f = data;

    return g_strdup_printf("00000000-0000-4000-8000-%012x", ++f->uuids);
}

/* Places "profile:count[:card|region][:any][:bs=SHA256][:p2p|:p2p-pref]"
 * requests, given as a space-separated list. */
static AvPlacement *
fix_place_full(Fix *f, const char *spec, guint vcpus, const char *domain, GError **error)
{
    g_autoptr(GPtrArray) requests = g_ptr_array_new_with_free_func((GDestroyNotify)av_request_free);
    g_auto(GStrv) words = g_strsplit(spec, " ", -1);
    AvPlaceOptions options = { domain, vcpus, fix_uuid, f };

    for (guint i = 0; words[i]; i++) {
        g_auto(GStrv) parts = g_strsplit(words[i], ":", -1);
        AvRequest *r = av_request_new(parts[0], parts[1] ? (guint)atoi(parts[1]) : 1);

        for (guint j = 2; parts[1] && parts[j]; j++) {
            if (g_str_equal(parts[j], "card") || g_str_equal(parts[j], "region")) {
                r->granularity_set = TRUE;
                r->granularity = g_str_equal(parts[j], "card") ? AV_GRANULARITY_CARD : AV_GRANULARITY_REGION;
            } else if (g_str_equal(parts[j], "any")) {
                r->numa_any = TRUE;
            } else if (g_str_equal(parts[j], "p2p") || g_str_equal(parts[j], "p2p-pref")) {
                r->p2p = g_str_equal(parts[j], "p2p") ? AV_P2P_REQUIRED : AV_P2P_PREFERRED;
            } else if (g_str_has_prefix(parts[j], "bs=")) {
                r->bitstream = g_strdup("test-image");
                r->bitstream_sha256 = g_strdup(parts[j] + 3);
            }
        }
        g_ptr_array_add(requests, r);
    }
    return av_place(f->host, f->policy, f->pool, requests, &options, error);
}

static AvPlacement *
fix_place(Fix *f, const char *spec, guint vcpus)
{
    g_autoptr(GError) err = NULL;
    AvPlacement *p = fix_place_full(f, spec, vcpus, NULL, &err);

    g_assert_no_error(err);
    g_assert_nonnull(p);
    return p;
}

/* The placed addresses (or bus paths, or "mdev@PARENT"), space-separated. */
static char *
placed(const AvPlacement *p)
{
    GString *s = g_string_new(NULL);

    for (guint i = 0; i < p->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(p->items, i);

        if (s->len)
            g_string_append_c(s, ' ');
        if (item->attach == AV_ATTACH_MDEV)
            g_string_append_printf(s, "mdev@%s", item->pci_address);
        else if (item->attach == AV_ATTACH_USB)
            g_string_append(s, item->usb_bus_path);
        else
            g_string_append(s, item->pci_address);
    }
    return g_string_free(s, FALSE);
}

static void
assert_placed(Fix *f, const char *spec, guint vcpus, int node, const char *want)
{
    g_autoptr(AvPlacement) p = fix_place(f, spec, vcpus);
    g_autofree char *got = placed(p);

    g_assert_cmpstr(got, ==, want);
    g_assert_cmpint(p->numa_node, ==, node);
}

static void
assert_error(Fix *f, const char *spec, guint vcpus, gint code, const char *want)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPlacement) p = fix_place_full(f, spec, vcpus, NULL, &err);

    g_assert_null(p);
    g_assert_error(err, AV_ERROR, code);
    if (!strstr(err->message, want))
        g_error("error '%s' does not say '%s'", err->message, want);
    /* One sentence: one line, no trailing period (GLib style). */
    g_assert_null(strchr(err->message, '\n'));
    g_assert_false(g_str_has_suffix(err->message, "."));
}

/* --- two sockets, eight GPUs ------------------------------------------------------------ */

/* A100s: 17, 31, 4b, 65 on node 0; ca, e3 on node 1 (32 CPUs each). */
#define GPU_POLICY(numa, alloc)                                                                  \
    "{\"profiles\": [\n"                                                                         \
    " {\"name\": \"gpu\", \"match\": {\"vendor\": \"0x10de\", \"device\": [\"0x20f1\"]},"         \
    "  \"numa\": \"" numa "\", \"allocation\": \"" alloc "\"},\n"                                \
    " {\"name\": \"stick\", \"match\": {\"vendor\": \"0x03e7\"}, \"attach\": \"usb\", \"numa\": \"none\"}\n" \
    "]}\n"

static void
test_gpu_strict(void)
{
    Fix f;

    fix_open(&f, "two-socket-8gpu", GPU_POLICY("strict", "pack"));
    /* Pack: the node with the fewest free GPUs, keeping node 0's four together. */
    assert_placed(&f, "gpu:1", 8, 1, "0000:ca:00.0");
    assert_placed(&f, "gpu:2", 8, 1, "0000:ca:00.0 0000:e3:00.0");
    assert_placed(&f, "gpu:3", 8, 0, "0000:17:00.0 0000:31:00.0 0000:4b:00.0");
    {
        g_autoptr(AvPlacement) p = fix_place(&f, "gpu:2", 16);
        g_autofree char *cpus = NULL;
        GString *s = g_string_new(NULL);

        g_assert_cmpuint(p->cpus->len, ==, 32);
        g_assert_cmpuint(g_array_index(p->cpus, guint, 0), ==, 16);
        g_assert_cmpuint(g_array_index(p->cpus, guint, 16), ==, 48);
        g_assert_cmpuint(p->warnings->len, ==, 0);
        for (guint i = 0; i < p->items->len; i++) {
            AvPlacedItem *item = g_ptr_array_index(p->items, i);

            g_assert_cmpint(item->numa_node, ==, 1);
            g_assert_cmpint(item->attach, ==, AV_ATTACH_VFIO_PCI);
            g_assert_true(g_str_has_prefix(item->identity, "dsn:10de:20f1:"));
            g_string_append_printf(s, "%s ", item->identity);
        }
        cpus = g_string_free(s, FALSE);
        g_assert_cmpstr(cpus, ==, "dsn:10de:20f1:48b02d1a000001c6.f0 dsn:10de:20f1:48b02d1a000001c7.f0 ");
    }
    /* Node 1 half used: one more still goes there (pack), two go to node 0. */
    fix_hold(&f, "0000:ca:00.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    assert_placed(&f, "gpu:1", 8, 1, "0000:e3:00.0");
    assert_placed(&f, "gpu:2", 8, 0, "0000:17:00.0 0000:31:00.0");
    /* Node 1 full: the other node holds everything. */
    fix_hold(&f, "0000:e3:00.0", AV_DEVICE_STATE_CLAIMED, "11111111-1111-4111-8111-111111111111");
    assert_placed(&f, "gpu:1", 8, 0, "0000:17:00.0");
    assert_placed(&f, "gpu:2", 8, 0, "0000:17:00.0 0000:31:00.0");
    assert_placed(&f, "gpu:4", 8, 0, "0000:17:00.0 0000:31:00.0 0000:4b:00.0 0000:65:00.0");
    /* Strict: no node holds three once node 0 has two taken and node 1 one. */
    fix_hold(&f, "0000:17:00.0", AV_DEVICE_STATE_IN_USE, "22222222-2222-4222-8222-222222222222");
    fix_hold(&f, "0000:31:00.0", AV_DEVICE_STATE_DIRTY, "22222222-2222-4222-8222-222222222222");
    {
        AvPoolDevice *e3 = av_pool_find_address(f.pool, AV_DEVICE_KIND_PCI, "0000:e3:00.0");
        g_autoptr(GError) err = NULL;

        av_pool_transition(f.pool, e3, AV_DEVICE_STATE_FREE, NULL, NULL, &err);
        g_assert_no_error(err);
    }
    assert_error(&f, "gpu:3", 8, AV_ERROR_NO_CAPACITY, "no single NUMA node can hold every device this domain needs");
    assert_error(&f, "gpu:3", 8, AV_ERROR_NO_CAPACITY, "node 0 has 2 free, node 1 has 1 free");
    assert_placed(&f, "gpu:2", 8, 0, "0000:4b:00.0 0000:65:00.0");
    /* The domain's own claim counts as free. */
    {
        g_autoptr(GError) err = NULL;
        g_autoptr(AvPlacement) p = fix_place_full(&f, "gpu:1", 8, "11111111-1111-4111-8111-111111111111", &err);

        g_assert_no_error(err);
        g_assert_cmpint(p->numa_node, ==, 1);
    }
    fix_close(&f);
}

static void
test_gpu_preferred(void)
{
    Fix f;

    fix_open(&f, "two-socket-8gpu", GPU_POLICY("preferred", "pack"));
    assert_placed(&f, "gpu:1", 8, 1, "0000:ca:00.0");
    assert_placed(&f, "gpu:2", 8, 1, "0000:ca:00.0 0000:e3:00.0");
    fix_hold(&f, "0000:ca:00.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    fix_hold(&f, "0000:17:00.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    fix_hold(&f, "0000:31:00.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    /* 4b, 65 free on node 0, e3 on node 1: three fit no node, so the node
     * that gets most, with a warning for the other. */
    {
        g_autoptr(AvPlacement) p = fix_place(&f, "gpu:3", 8);
        g_autofree char *got = placed(p);
        const char *w;

        g_assert_cmpstr(got, ==, "0000:4b:00.0 0000:65:00.0 0000:e3:00.0");
        g_assert_cmpint(p->numa_node, ==, 0);
        g_assert_cmpuint(p->warnings->len, ==, 1);
        w = g_ptr_array_index(p->warnings, 0);
        g_assert_nonnull(strstr(w, "1 of its 3 devices is on NUMA node 1, not on the domain's node 0"));
    }
    fix_close(&f);
}

static void
test_gpu_spread(void)
{
    Fix f;

    fix_open(&f, "two-socket-8gpu", GPU_POLICY("strict", "spread"));
    /* Spread: the node with the most free. */
    assert_placed(&f, "gpu:1", 8, 0, "0000:17:00.0");
    assert_placed(&f, "gpu:2", 8, 0, "0000:17:00.0 0000:31:00.0");
    fix_close(&f);
}

static void
test_vcpus(void)
{
    Fix f;

    fix_open(&f, "two-socket-8gpu", GPU_POLICY("strict", "pack"));
    assert_placed(&f, "gpu:1", 32, 1, "0000:ca:00.0");
    assert_error(&f, "gpu:1", 33, AV_ERROR_INVALID_INPUT, "33 vCPUs do not fit node 1's 32 CPUs");
    fix_close(&f);

    /* Preferred: a node with room for the vCPUs, the devices elsewhere. */
    fix_open(&f, "two-socket-8gpu", GPU_POLICY("preferred", "pack"));
    assert_error(&f, "gpu:1", 64, AV_ERROR_INVALID_INPUT, "64 vCPUs do not fit node 1's 32 CPUs");
    fix_close(&f);
}

static void
test_usb(void)
{
    Fix f;

    fix_open(&f, "two-socket-8gpu", GPU_POLICY("strict", "pack"));
    {
        g_autoptr(AvPlacement) p = fix_place(&f, "stick:1", 0);
        AvPlacedItem *item;

        g_assert_cmpuint(p->items->len, ==, 1);
        item = g_ptr_array_index(p->items, 0);
        g_assert_cmpint(item->attach, ==, AV_ATTACH_USB);
        g_assert_cmpstr(item->usb_bus_path, ==, "1-1.2");
        g_assert_cmpuint(item->usb_vendor, ==, 0x03e7);
        g_assert_cmpuint(item->usb_product, ==, 0x2485);
        g_assert_cmpstr(item->identity, ==, "usb:03e7:2485:serial:03e72485");
        g_assert_null(item->pci_address);
        /* numa none: nothing ties the domain to a node. */
        g_assert_cmpint(p->numa_node, ==, -1);
        g_assert_cmpuint(p->cpus->len, ==, 0);
    }
    /* With a strict GPU: the GPU decides the node, the stick goes along. */
    assert_placed(&f, "gpu:1 stick:1", 8, 1, "0000:ca:00.0 1-1.2");
    assert_error(&f, "stick:2", 0, AV_ERROR_INVALID_INPUT, "count 2 is more than the 1 device of profile 'stick'");
    fix_close(&f);
}

static void
test_errors(void)
{
    Fix f;

    fix_open(&f, "two-socket-8gpu", GPU_POLICY("strict", "pack"));
    assert_error(&f, "tpu:1", 0, AV_ERROR_INVALID_INPUT,
                 "unknown profile 'tpu': use one the policy defines, 'gpu', 'stick', or add it");
    assert_error(&f, "gpu:7", 0, AV_ERROR_INVALID_INPUT,
                 "count 7 is more than the 6 cards of profile 'gpu' on this host; ask for at most 6");
    assert_error(&f, "gpu:4 gpu:3", 0, AV_ERROR_INVALID_INPUT, "count 7 is more than the 6 cards");
    fix_hold(&f, "0000:17:00.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    fix_hold(&f, "0000:31:00.0", AV_DEVICE_STATE_DIRTY, "11111111-1111-4111-8111-111111111111");
    fix_hold(&f, "0000:4b:00.0", AV_DEVICE_STATE_CLAIMED, "22222222-2222-4222-8222-222222222222");
    assert_error(&f, "gpu:4", 0, AV_ERROR_NO_CAPACITY,
                 "not enough free cards of profile 'gpu': 3 of 6 free, 4 wanted (devices not free: "
                 "1 claimed, 1 in-use, 1 dirty)");
    fix_close(&f);

    /* Unknown profile with more than five known: five named, the rest counted. */
    fix_open(&f, "two-socket-8gpu",
             "{\"profiles\": [{\"name\": \"a\", \"match\": {\"vendor\": \"0x1\"}},"
             "{\"name\": \"b\", \"match\": {\"vendor\": \"0x2\"}}, {\"name\": \"c\", \"match\": {\"vendor\": \"0x3\"}},"
             "{\"name\": \"d\", \"match\": {\"vendor\": \"0x4\"}}, {\"name\": \"e\", \"match\": {\"vendor\": \"0x5\"}},"
             "{\"name\": \"f\", \"match\": {\"vendor\": \"0x6\"}}, {\"name\": \"g\", \"match\": {\"vendor\": \"0x7\"}}]}");
    assert_error(&f, "x:1", 0, AV_ERROR_INVALID_INPUT, "'a', 'b', 'c', 'd', 'e' (and 2 more)");
    assert_error(&f, "a:1", 0, AV_ERROR_INVALID_INPUT, "count 1 is more than the 0 cards of profile 'a'");
    fix_close(&f);
}

/* A GPU sharing its IOMMU group with the host's NIC is never placed. */
static void
test_not_viable(void)
{
    Fix f;

    fix_open(&f, "trap-shared-group",
             "{\"profiles\": [{\"name\": \"gpu\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x20f1\"}, \"numa\": \"strict\"}]}");
    assert_error(&f, "gpu:1", 0, AV_ERROR_NO_CAPACITY, "IOMMU group 12 also holds '0000:05:00.0'");
    fix_close(&f);
    /* The host's NIC as the second function of the GPU's own slot: never
     * placed, even with the GPU's audio named as a companion. */
    fix_open(&f, "trap-shared-group",
             "{\"profiles\": [{\"name\": \"gpu\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x2230\"},"
             " \"companions\": [{\"class\": \"0x0403\"}], \"numa\": \"none\"}]}");
    assert_error(&f, "gpu:1", 0, AV_ERROR_NO_CAPACITY, "IOMMU group 14 also holds '0000:06:00.1'");
    fix_close(&f);
}

static void
test_determinism(void)
{
    static const char reversed[] =
        "{\"profiles\": [\n"
        " {\"name\": \"stick\", \"match\": {\"vendor\": \"0x03e7\"}, \"attach\": \"usb\", \"numa\": \"none\"},\n"
        " {\"name\": \"aaa\", \"match\": {\"vendor\": \"0x10de\", \"device\": [\"0x2230\"]}},\n"
        " {\"name\": \"gpu\", \"match\": {\"vendor\": \"0x10de\", \"device\": [\"0x20f1\"]},"
        "  \"numa\": \"preferred\", \"allocation\": \"pack\"}\n"
        "]}\n";
    Fix f, g;
    g_autofree char *first = NULL;
    g_autofree char *second = NULL;
    g_autofree char *third = NULL;

    fix_open(&f, "two-socket-8gpu", GPU_POLICY("preferred", "pack"));
    fix_hold(&f, "0000:e3:00.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    {
        g_autoptr(AvPlacement) p1 = fix_place(&f, "gpu:3 stick:1", 8);
        g_autoptr(AvPlacement) p2 = fix_place(&f, "gpu:3 stick:1", 8);

        first = placed(p1);
        second = placed(p2);
    }
    g_assert_cmpstr(first, ==, second);
    /* Another pool and policy order (other hash tables, other insertion
     * orders): the same answer. */
    fix_open(&g, "two-socket-8gpu", reversed);
    fix_hold(&g, "0000:e3:00.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    {
        g_autoptr(AvPlacement) p3 = fix_place(&g, "gpu:3 stick:1", 8);

        third = placed(p3);
    }
    g_assert_cmpstr(first, ==, third);
    g_assert_cmpstr(first, ==, "0000:17:00.0 0000:31:00.0 0000:4b:00.0 1-1.2");
    fix_close(&g);
    fix_close(&f);
}

/* --- cards, regions, functions (seed 003) ------------------------------------------------ */

/* fpga-regions: cards 3b and 5e on node 0, af on node 1; each card three
 * PFs (regions 00.0, 00.1, 00.2) of four VFs (01.x, 02.x, 03.x). */
#define FPGA_POLICY(numa, alloc)                                                                 \
    "{\"profiles\": [{\"name\": \"fvf\", \"match\": {\"vendor\": \"0x10ee\", \"device\": [\"0x5051\"]}," \
    " \"attach\": \"sriov-vf\", \"numa\": \"" numa "\", \"allocation\": \"" alloc "\"}]}\n"

static void
test_pack_region(void)
{
    Fix f;

    fix_open(&f, "fpga-regions", FPGA_POLICY("none", "pack"));
    /* User 1 holds one function of region 1 of card 3b. */
    fix_hold(&f, "0000:3b:01.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    /* User 2 wants two more: from region 1, not from regions 2 or 3. */
    assert_placed(&f, "fvf:2", 0, -1, "0000:3b:01.1 0000:3b:01.2");
    fix_hold(&f, "0000:3b:01.1", AV_DEVICE_STATE_CLAIMED, "22222222-2222-4222-8222-222222222222");
    fix_hold(&f, "0000:3b:01.2", AV_DEVICE_STATE_CLAIMED, "22222222-2222-4222-8222-222222222222");
    /* User 3 wants one more: region 1 again. */
    assert_placed(&f, "fvf:1", 0, -1, "0000:3b:01.3");
    fix_hold(&f, "0000:3b:01.3", AV_DEVICE_STATE_CLAIMED, "33333333-3333-4333-8333-333333333333");
    /* Region 1 full: the next region of the same card, before any other card. */
    assert_placed(&f, "fvf:2", 0, -1, "0000:3b:02.0 0000:3b:02.1");
    /* A request larger than what is left on the card overflows to the next
     * card only when the partly used one is full. */
    assert_placed(&f, "fvf:9", 0, -1,
                  "0000:3b:02.0 0000:3b:02.1 0000:3b:02.2 0000:3b:02.3 0000:3b:03.0 0000:3b:03.1 "
                  "0000:3b:03.2 0000:3b:03.3 0000:5e:01.0");
    /* User 4: the whole free cards stayed whole. */
    assert_placed(&f, "fvf:2:card", 0, -1,
                  "0000:5e:01.0 0000:5e:01.1 0000:5e:01.2 0000:5e:01.3 0000:5e:02.0 0000:5e:02.1 "
                  "0000:5e:02.2 0000:5e:02.3 0000:5e:03.0 0000:5e:03.1 0000:5e:03.2 0000:5e:03.3 "
                  "0000:af:01.0 0000:af:01.1 0000:af:01.2 0000:af:01.3 0000:af:02.0 0000:af:02.1 "
                  "0000:af:02.2 0000:af:02.3 0000:af:03.0 0000:af:03.1 0000:af:03.2 0000:af:03.3");
    /* A region: one of the partly used card first. */
    assert_placed(&f, "fvf:1:region", 0, -1, "0000:3b:02.0 0000:3b:02.1 0000:3b:02.2 0000:3b:02.3");
    fix_close(&f);
}

static void
test_whole_card(void)
{
    Fix f;

    fix_open(&f, "fpga-regions", FPGA_POLICY("strict", "pack"));
    /* Cards: 3b, 5e on node 0, af on node 1; pack fills node 1 first. */
    assert_placed(&f, "fvf:1:card", 0, 1,
                  "0000:af:01.0 0000:af:01.1 0000:af:01.2 0000:af:01.3 0000:af:02.0 0000:af:02.1 "
                  "0000:af:02.2 0000:af:02.3 0000:af:03.0 0000:af:03.1 0000:af:03.2 0000:af:03.3");
    /* One function of af in use: af is no longer whole, node 0 it is. */
    fix_hold(&f, "0000:af:03.3", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    fix_hold(&f, "0000:3b:02.2", AV_DEVICE_STATE_DIRTY, "11111111-1111-4111-8111-111111111111");
    assert_placed(&f, "fvf:1:card", 0, 0,
                  "0000:5e:01.0 0000:5e:01.1 0000:5e:01.2 0000:5e:01.3 0000:5e:02.0 0000:5e:02.1 "
                  "0000:5e:02.2 0000:5e:02.3 0000:5e:03.0 0000:5e:03.1 0000:5e:03.2 0000:5e:03.3");
    assert_error(&f, "fvf:2:card", 0, AV_ERROR_NO_CAPACITY,
                 "not enough free cards of profile 'fvf': 1 of 3 free, 2 wanted");
    assert_error(&f, "fvf:4:card", 0, AV_ERROR_INVALID_INPUT,
                 "count 4 is more than the 3 cards of profile 'fvf' on this host");
    /* A function request packs into the partly used card of node 1. */
    assert_placed(&f, "fvf:1", 0, 1, "0000:af:03.0");
    fix_close(&f);
}

/* Records in the pool that the device at @address holds @sha256. */
static void
fix_programmed(Fix *f, const char *address, const char *sha256)
{
    AvPoolDevice *dev = av_pool_find_address(f->pool, AV_DEVICE_KIND_PCI, address);
    g_autoptr(GError) err = NULL;

    g_assert_nonnull(dev);
    av_pool_set_programmed(f->pool, dev, av_programmed_new(sha256, "test-image", "operator", "the program exited 0"),
                           NULL, &err);
    g_assert_no_error(err);
}

#define SHA_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SHA_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* Issue 15: a request with a bitstream prefers the devices holding it, after
 * the NUMA preference and before pack or spread; every device of the
 * request is to hold it (item->bitstream). */
static void
test_bitstream(void)
{
    Fix f;

    fix_open(&f, "fpga-regions", FPGA_POLICY("none", "pack"));
    fix_hold(&f, "0000:3b:01.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    /* Without a holder: pack, as ever. */
    assert_placed(&f, "fvf:1", 0, -1, "0000:3b:01.1");
    assert_placed(&f, "fvf:1:bs=" SHA_A, 0, -1, "0000:3b:01.1");
    /* af:02.1 holds A, 5e:03.2 holds B: each request goes to its own. */
    fix_programmed(&f, "0000:af:02.1", SHA_A);
    fix_programmed(&f, "0000:5e:03.2", SHA_B);
    assert_placed(&f, "fvf:1:bs=" SHA_A, 0, -1, "0000:af:02.1");
    assert_placed(&f, "fvf:1:bs=" SHA_B, 0, -1, "0000:5e:03.2");
    assert_placed(&f, "fvf:1", 0, -1, "0000:3b:01.1");
    /* Two: the holder, then pack goes on (the partly used card 3b, fewest free). */
    assert_placed(&f, "fvf:2:bs=" SHA_A, 0, -1, "0000:3b:01.1 0000:af:02.1");
    /* A whole region: the one holding it. */
    assert_placed(&f, "fvf:1:region:bs=" SHA_B, 0, -1, "0000:5e:03.0 0000:5e:03.1 0000:5e:03.2 0000:5e:03.3");
    /* A holder that is not free is no holder. */
    fix_hold(&f, "0000:af:02.1", AV_DEVICE_STATE_CLAIMED, "22222222-2222-4222-8222-222222222222");
    assert_placed(&f, "fvf:1:bs=" SHA_A, 0, -1, "0000:3b:01.1");
    /* The devices are to hold it; a request without one says nothing. */
    {
        g_autoptr(AvPlacement) p = fix_place(&f, "fvf:2:bs=" SHA_B " fvf:1", 0);

        g_assert_cmpuint(p->items->len, ==, 3);
        for (guint i = 0; i < 3; i++) {
            const AvPlacedItem *item = g_ptr_array_index(p->items, i);

            g_assert_cmpstr(item->bitstream, ==, i < 2 ? SHA_B : NULL);
        }
    }
    fix_close(&f);

    /* NUMA first: strict on node 1 (pack), a holder on node 0 does not move it. */
    fix_open(&f, "two-socket-8gpu", GPU_POLICY("strict", "pack"));
    fix_programmed(&f, "0000:4b:00.0", SHA_A);
    assert_placed(&f, "gpu:1:bs=" SHA_A, 8, 1, "0000:ca:00.0");
    fix_programmed(&f, "0000:e3:00.0", SHA_A);
    assert_placed(&f, "gpu:1:bs=" SHA_A, 8, 1, "0000:e3:00.0");
    assert_placed(&f, "gpu:3:bs=" SHA_A, 8, 0, "0000:17:00.0 0000:31:00.0 0000:4b:00.0");
    fix_close(&f);

    /* Spread: the holder first even on the busier card. */
    fix_open(&f, "fpga-regions", FPGA_POLICY("none", "spread"));
    fix_hold(&f, "0000:3b:01.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    fix_programmed(&f, "0000:3b:03.3", SHA_A);
    assert_placed(&f, "fvf:1", 0, -1, "0000:5e:01.0");
    assert_placed(&f, "fvf:1:bs=" SHA_A, 0, -1, "0000:3b:03.3");
    fix_close(&f);
}

/* Issue 15: the pool's placement record keeps a request's bitstream (as
 * written and resolved) and each device's, through pool.json; a record
 * without them (older pool.json) still loads; a bad one is refused. */
static void
test_bitstream_record(void)
{
    static const char uuid[] = "44444444-4444-4444-8444-444444444444";
    Fix f;
    g_autoptr(AvPlacement) p = NULL;
    g_autoptr(GPtrArray) requests = g_ptr_array_new_with_free_func((GDestroyNotify)av_request_free);
    g_autofree char *state = NULL, *path = NULL, *text = NULL;
    g_autoptr(GError) err = NULL;
    AvRequest *r;
    const AvPoolPlacement *record;

    fix_open(&f, "fpga-regions", FPGA_POLICY("none", "pack"));
    p = fix_place(&f, "fvf:1:bs=" SHA_A " fvf:1", 0);
    r = av_request_new("fvf", 1);
    r->bitstream = g_strdup("test-image");
    r->bitstream_sha256 = g_strdup(SHA_A);
    g_ptr_array_add(requests, r);
    g_ptr_array_add(requests, av_request_new("fvf", 1));
    av_pool_placement_record(f.pool, uuid, "d", requests, p);
    g_assert_true(av_pool_save(f.pool, &err));
    g_assert_no_error(err);
    av_pool_free(f.pool);
    state = g_build_filename(f.tmp, "state", NULL);
    f.pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    record = av_pool_placement_find(f.pool, uuid);
    g_assert_nonnull(record);
    r = g_ptr_array_index(record->requests, 0);
    g_assert_cmpstr(r->bitstream, ==, "test-image");
    g_assert_cmpstr(r->bitstream_sha256, ==, SHA_A);
    r = g_ptr_array_index(record->requests, 1);
    g_assert_null(r->bitstream);
    g_assert_null(r->bitstream_sha256);
    g_assert_cmpstr(((AvPlacedItem *)g_ptr_array_index(record->items, 0))->bitstream, ==, SHA_A);
    g_assert_null(((AvPlacedItem *)g_ptr_array_index(record->items, 1))->bitstream);
    av_pool_free(f.pool);
    f.pool = NULL;

    /* A device's bitstream that is no SHA-256, a request's sha256 without its
     * name: refused (the hook trusts this record). */
    path = g_build_filename(state, "pool.json", NULL);
    g_file_get_contents(path, &text, NULL, &err);
    g_assert_no_error(err);
    g_assert_nonnull(strstr(text, "\"bitstream\": \"" SHA_A "\""));
    {
        const char *const breaks[][2] = {
            { "\"bitstream\": \"" SHA_A "\"", "\"bitstream\": \"../x\"" },
            { "\"bitstream\": \"test-image\",", "" },
        };

        for (guint i = 0; i < G_N_ELEMENTS(breaks); i++) {
            g_autoptr(GString) s = g_string_new(text);
            AvPool *pool;

            g_string_replace(s, breaks[i][0], breaks[i][1], 0);
            g_assert_cmpstr(s->str, !=, text);
            g_file_set_contents(path, s->str, -1, &err);
            g_assert_no_error(err);
            pool = av_pool_open(state, AV_POOL_READ, 0, &err);
            g_assert_null(pool);
            g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
            g_test_message("refused: %s", err->message);
            g_assert_nonnull(strstr(err->message, "bitstream"));
            g_clear_error(&err);
        }
    }
    /* Without any bitstream (pool.json before issue 15): loads. */
    {
        g_autoptr(json_t) root = json_loads(text, 0, NULL);
        json_t *record_json = json_array_get(json_object_get(root, "placements"), 0);
        g_autofree char *old = NULL;

        g_assert_nonnull(record_json);
        for (guint i = 0; i < 2; i++) {
            json_t *request = json_array_get(json_object_get(record_json, "requests"), i);
            json_t *device = json_array_get(json_object_get(record_json, "devices"), i);

            json_object_del(request, "bitstream");
            json_object_del(request, "bitstream_sha256");
            json_object_del(device, "bitstream");
        }
        old = json_dumps(root, JSON_INDENT(2));
        g_assert_null(strstr(old, "bitstream"));
        g_file_set_contents(path, old, -1, &err);
        g_assert_no_error(err);
        f.pool = av_pool_open(state, AV_POOL_READ, 0, &err);
        g_assert_no_error(err);
        record = av_pool_placement_find(f.pool, uuid);
        g_assert_cmpuint(record->items->len, ==, 2);
        g_assert_null(((AvPlacedItem *)g_ptr_array_index(record->items, 0))->bitstream);
    }
    fix_close(&f);
}

static void
test_spread(void)
{
    Fix f;

    fix_open(&f, "fpga-regions", FPGA_POLICY("none", "spread"));
    fix_hold(&f, "0000:3b:01.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    /* The emptiest cards first, one function each. */
    assert_placed(&f, "fvf:3", 0, -1, "0000:3b:02.0 0000:5e:01.0 0000:af:01.0");
    assert_placed(&f, "fvf:2", 0, -1, "0000:5e:01.0 0000:af:01.0");
    fix_close(&f);
}

static void
test_defrag(void)
{
    Fix f;
    json_t *report, *profile, *moves, *move;
    const char *s;

    fix_open(&f, "fpga-regions", FPGA_POLICY("none", "pack"));
    fix_hold(&f, "0000:3b:01.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    fix_hold(&f, "0000:5e:01.0", AV_DEVICE_STATE_IN_USE, "22222222-2222-4222-8222-222222222222");
    fix_hold(&f, "0000:5e:01.1", AV_DEVICE_STATE_IN_USE, "22222222-2222-4222-8222-222222222222");
    report = av_place_defrag_report(f.host, f.policy, f.pool);
    profile = json_array_get(json_object_get(report, "profiles"), 0);
    g_assert_cmpstr(json_string_value(json_object_get(profile, "profile")), ==, "fvf");
    g_assert_cmpint(json_integer_value(json_object_get(profile, "cards")), ==, 3);
    g_assert_cmpint(json_integer_value(json_object_get(profile, "cards_free")), ==, 1);
    g_assert_cmpint(json_integer_value(json_object_get(profile, "cards_partly_used")), ==, 2);
    /* 21 free functions on partly used cards of 33 free. */
    /* (Not g_assert_cmpfloat_with_epsilon(): its long double arithmetic is
     * -Wdouble-promotion to clang.) */
    g_assert_true(ABS(json_real_value(json_object_get(profile, "fragmentation")) - 21.0 / 33.0) < 1e-9);
    moves = json_object_get(report, "moves");
    g_assert_cmpuint(json_array_size(moves), ==, 1);
    move = json_array_get(moves, 0);
    g_assert_cmpstr(json_string_value(json_object_get(move, "domain")), ==, "11111111-1111-4111-8111-111111111111");
    g_assert_cmpstr(json_string_value(json_object_get(move, "from")), ==, "0000:3b:01.0");
    g_assert_cmpstr(json_string_value(json_object_get(move, "to")), ==, "0000:5e:01.2");
    g_assert_cmpstr(json_string_value(json_object_get(move, "frees_card")), ==, "0000:3b:00");
    s = json_string_value(json_object_get(move, "device"));
    g_assert_true(g_str_has_suffix(s, "/vf0"));
    json_decref(report);
    fix_close(&f);
}

/* --- mdev ------------------------------------------------------------------------------ */

/* vgpu-mdev: A10s at 17 (node 0, runs one nvidia-590) and 98 (node 1). */
#define VGPU_POLICY(type, alloc)                                                                  \
    "{\"profiles\": [{\"name\": \"vgpu\", \"match\": {\"vendor\": \"0x10de\", \"device\": [\"0x2236\"]}," \
    " \"attach\": \"mdev\", \"mdev_type\": \"" type "\", \"numa\": \"none\", \"allocation\": \"" alloc "\"}]}\n"

static void
test_mdev(void)
{
    Fix f;

    /* Spread would pick the emptier parent, but the one running the type comes first. */
    fix_open(&f, "vgpu-mdev", VGPU_POLICY("nvidia-590", "spread"));
    {
        g_autoptr(AvPlacement) p = fix_place(&f, "vgpu:2", 0);
        g_autofree char *got = placed(p);
        AvPlacedItem *item = g_ptr_array_index(p->items, 0);

        g_assert_cmpstr(got, ==, "mdev@0000:17:00.0 mdev@0000:17:00.0");
        g_assert_cmpint(item->attach, ==, AV_ATTACH_MDEV);
        g_assert_cmpstr(item->mdev_type, ==, "nvidia-590");
        g_assert_cmpstr(item->mdev_uuid, ==, "00000000-0000-4000-8000-000000000001");
        g_assert_null(item->identity);
        g_assert_cmpint(item->numa_node, ==, 0);
    }
    /* 5 left on 17, 6 on 98: the seventh goes to 98. */
    assert_placed(&f, "vgpu:7", 0, -1,
                  "mdev@0000:17:00.0 mdev@0000:17:00.0 mdev@0000:17:00.0 mdev@0000:17:00.0 "
                  "mdev@0000:17:00.0 mdev@0000:98:00.0 mdev@0000:98:00.0");
    assert_error(&f, "vgpu:13", 0, AV_ERROR_INVALID_INPUT,
                 "count 13 is more than the 12 mdev instances of profile 'vgpu'");
    fix_close(&f);

    /* Another type: 17 runs nvidia-590, so only 98 has room. */
    fix_open(&f, "vgpu-mdev", VGPU_POLICY("nvidia-588", "pack"));
    assert_placed(&f, "vgpu:1", 0, -1, "mdev@0000:98:00.0");
    fix_hold(&f, "0000:98:00.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    assert_error(&f, "vgpu:1", 0, AV_ERROR_NO_CAPACITY, "not enough free mdev instances of profile 'vgpu'");
    fix_close(&f);

    /* The mdev on 17 is one accelvirt created and released, not removed
     * yet: 17 gives no instance until it is, even to the type it runs. */
    fix_open(&f, "vgpu-mdev", VGPU_POLICY("nvidia-590", "pack"));
    assert_placed(&f, "vgpu:1", 0, -1, "mdev@0000:17:00.0");
    {
        g_autoptr(GError) err = NULL;
        AvPoolDevice *released = av_pool_add(f.pool, AV_DEVICE_KIND_MDEV, "mdev:4b20d080-1b54-4048-85b3-a6a62d165c01",
                                             "0000:17:00.0", "vgpu", AV_DEVICE_STATE_DIRTY, NULL, &err);

        g_assert_no_error(err);
        released->created = TRUE;
        assert_placed(&f, "vgpu:2", 0, -1, "mdev@0000:98:00.0 mdev@0000:98:00.0");
        assert_error(&f, "vgpu:7", 0, AV_ERROR_NO_CAPACITY, "no mdev parent has a free instance of type 'nvidia-590'");
        /* One the operator made (not created by accelvirt) keeps its memory
         * as an mdev of its own: it blocks nothing. */
        released->created = FALSE;
        assert_placed(&f, "vgpu:1", 0, -1, "mdev@0000:17:00.0");
    }
    fix_close(&f);
}

/* --- SR-IOV: the VFs a placement lacks (issue 13) -------------------------------- */

#define POLICY_QAT(vfs) \
    "{\"profiles\": [{\"name\": \"qat-vf\", \"match\": {\"vendor\": \"0x8086\", \"device\": \"0x4941\"}," \
    " \"attach\": \"sriov-vf\", \"vfs\": " vfs ", \"numa\": \"none\"}," \
    " {\"name\": \"qat-pf\", \"match\": {\"vendor\": \"0x8086\", \"device\": \"0x4940\"}, \"granularity\": \"function\"," \
    " \"numa\": \"none\"}]}"

/* The changes of VF counts for @count VFs of qat-vf (sriov-fpga-qat: 4 of
 * 16 VFs on 0000:6b:00.0), as "PF:FROM->TO" joined by ' '. */
static char *
growth_of(Fix *f, guint count, char **ret_why)
{
    g_autoptr(GPtrArray) requests = g_ptr_array_new_with_free_func((GDestroyNotify)av_request_free);
    g_autoptr(GPtrArray) growth = NULL;
    g_autoptr(GString) out = g_string_new(NULL);

    g_ptr_array_add(requests, av_request_new("qat-vf", count));
    growth = av_pool_vf_growth(f->pool, f->root, f->host, f->policy, requests, "00000000-0000-4000-8000-000000000001", ret_why);
    for (guint i = 0; i < growth->len; i++) {
        const AvVfGrowth *g = g_ptr_array_index(growth, i);

        g_string_append_printf(out, "%s%s:%u->%u", i ? " " : "", g->pf, g->from, g->to);
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}

static void
test_sriov_growth(void)
{
    Fix f;
    g_autofree char *why = NULL;
    char *got;

    fix_open_idle_vfs(&f, POLICY_QAT("\"on-demand\""), NULL);
    /* enough free: nothing; on demand: what is missing, through 0 (all free and idle) */
    got = growth_of(&f, 4, &why);
    g_assert_cmpstr(got, ==, "");
    g_free(got);
    got = growth_of(&f, 6, &why);
    g_assert_cmpstr(got, ==, "0000:6b:00.0:4->6");
    g_free(got);
    got = growth_of(&f, 40, &why);
    g_assert_cmpstr(got, ==, "0000:6b:00.0:4->16");
    g_free(got);
    g_assert_null(why);
    /* a VF of the domain's own claim counts as free for the count of free
     * VFs, but any VF not free blocks the count: going through 0 would take
     * it from its claim */
    fix_hold(&f, "0000:6b:00.1", AV_DEVICE_STATE_CLAIMED, "00000000-0000-4000-8000-000000000001");
    got = growth_of(&f, 5, &why);
    g_assert_cmpstr(got, ==, "");
    g_free(got);
    g_assert_nonnull(strstr(why, "its VF '0000:6b:00.1' is claimed"));
    g_clear_pointer(&why, g_free);
    fix_close(&f);

    /* a VF on its host driver (the host uses it): no count change, named */
    fix_open_idle_vfs(&f, POLICY_QAT("\"on-demand\""), "0000:6b:00.3");
    got = growth_of(&f, 6, &why);
    g_assert_cmpstr(got, ==, "");
    g_free(got);
    g_assert_nonnull(strstr(why, "its VF '0000:6b:00.3' is on the host driver 4xxxvf"));
    g_clear_pointer(&why, g_free);
    fix_close(&f);

    /* a VF that is an mdev parent with an mdev: no count change */
    fix_open_idle_vfs(&f, POLICY_QAT("\"on-demand\""), NULL);
    {
        g_autofree char *mdev = g_strdup_printf("%s/sys/devices/pci0000:6b/0000:6b:00.2/"
                                                "11111111-2222-4333-8444-555555555555", f.copy);
        g_autofree char *type = g_build_filename(mdev, "mdev_type", NULL);

        g_assert_cmpint(g_mkdir_with_parents(mdev, 0755), ==, 0);
        g_assert_cmpint(symlink("../mdev_supported_types/x-1", type), ==, 0);
    }
    got = growth_of(&f, 6, &why);
    g_assert_cmpstr(got, ==, "");
    g_free(got);
    g_assert_nonnull(strstr(why, "its VF '0000:6b:00.2' is the parent of the mdev"));
    g_clear_pointer(&why, g_free);
    fix_close(&f);

    /* the shipped tree: VFs on their host driver, no growth */
    fix_open(&f, "sriov-fpga-qat", POLICY_QAT("\"on-demand\""));
    got = growth_of(&f, 6, &why);
    g_assert_cmpstr(got, ==, "");
    g_free(got);
    g_assert_nonnull(strstr(why, "is on the host driver"));
    g_clear_pointer(&why, g_free);
    fix_close(&f);

    /* a declared count; a PF held by a domain gets none */
    fix_open_idle_vfs(&f, POLICY_QAT("8"), NULL);
    got = growth_of(&f, 5, &why);
    g_assert_cmpstr(got, ==, "0000:6b:00.0:4->8");
    g_free(got);
    fix_hold(&f, "0000:6b:00.0", AV_DEVICE_STATE_IN_USE, "00000000-0000-4000-8000-000000000002");
    got = growth_of(&f, 5, &why);
    g_assert_cmpstr(got, ==, "");
    g_free(got);
    g_assert_nonnull(strstr(why, "the PF itself is in-use"));
    fix_close(&f);
}

/* When a VF is idle enough for its PF's count to change
 * (av_pool_vf_check_idle()), and av_pool_vf_undo() refusing otherwise. */
static void
test_sriov_vf_idle(void)
{
    Fix f;
    g_autoptr(GError) err = NULL;
    g_autofree char *numvfs = NULL;
    AvPoolDevice *rec;

    fix_open_idle_vfs(&f, POLICY_QAT("\"on-demand\""), NULL);
    g_assert_true(av_pool_vf_check_idle(f.pool, f.root, "0000:6b:00.2", NULL));
    /* missing counts as what it was before: dirty blocks, free does not */
    rec = av_pool_find_address(f.pool, AV_DEVICE_KIND_PCI, "0000:6b:00.2");
    rec->state = AV_DEVICE_STATE_MISSING;
    rec->state_before_missing = AV_DEVICE_STATE_DIRTY;
    g_assert_false(av_pool_vf_check_idle(f.pool, f.root, "0000:6b:00.2", &err));
    g_assert_nonnull(strstr(err->message, "its VF '0000:6b:00.2' is missing (and was not free before)"));
    g_clear_error(&err);
    rec->state_before_missing = AV_DEVICE_STATE_FREE;
    g_assert_true(av_pool_vf_check_idle(f.pool, f.root, "0000:6b:00.2", NULL));
    rec->state = AV_DEVICE_STATE_FREE;
    /* on vfio-pci with its group held open by a process */
    {
        g_autofree char *drv = g_strdup_printf("%s/sys/devices/pci0000:6b/0000:6b:00.3/driver", f.copy);
        g_autofree char *fd = g_strdup_printf("%s/proc/4242/fd", f.copy);
        g_autofree char *fd3 = g_build_filename(fd, "3", NULL);

        g_assert_cmpint(symlink("../../../bus/pci/drivers/vfio-pci", drv), ==, 0);
        g_assert_cmpint(g_mkdir_with_parents(fd, 0755), ==, 0);
        g_assert_cmpint(symlink("/dev/vfio/152", fd3), ==, 0);
    }
    g_assert_false(av_pool_vf_check_idle(f.pool, f.root, "0000:6b:00.3", &err));
    g_assert_nonnull(strstr(err->message, "its VF '0000:6b:00.3' is held through its IOMMU group 152 by process 4242"));
    g_clear_error(&err);
    /* an undo of 0 -> 4 while that VF is held: refused, the count as it was */
    g_assert_false(av_pool_vf_undo(f.pool, f.root, av_kernel_ops_for(f.root), "0000:6b:00.0", 0, 4, "rollback",
                                   &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_IN_USE);
    g_assert_nonnull(strstr(err->message, "cannot set the VFs of PF '0000:6b:00.0' back from 4 to 0"));
    {
        g_autofree char *path = g_strdup_printf("%s/sys/bus/pci/devices/0000:6b:00.0/sriov_numvfs", f.copy);

        g_assert_true(g_file_get_contents(path, &numvfs, NULL, NULL));
        g_assert_cmpstr(g_strstrip(numvfs), ==, "4");
    }
    fix_close(&f);
}

/* Placing one @profile on the SR-IOV host, with @held in @state for
 * another domain, is refused with an error naming @why. */
static void
assert_sriov_held_refused(const char *profile, const char *held, AvDeviceState state, const char *why)
{
    Fix f;
    g_autoptr(GPtrArray) requests = g_ptr_array_new_with_free_func((GDestroyNotify)av_request_free);
    g_autoptr(AvPlacement) placement = NULL;
    g_autoptr(GError) err = NULL;
    AvPlaceOptions options = { .vcpus = 1 };

    fix_open(&f, "sriov-fpga-qat", POLICY_QAT("\"on-demand\""));
    g_ptr_array_add(requests, av_request_new(profile, 1));
    fix_hold(&f, held, state, "00000000-0000-4000-8000-000000000003");
    placement = av_place(f.host, f.policy, f.pool, requests, &options, &err);
    g_assert_null(placement);
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(err->message, why));
    fix_close(&f);
}

/* A VF goes to no domain while its PF is held (claimed, in use, dirty...). */
static void
test_sriov_vf_with_pf_held(void)
{
    assert_sriov_held_refused("qat-vf", "0000:6b:00.0", AV_DEVICE_STATE_IN_USE, "its PF '0000:6b:00.0'");
}

/* A PF goes to no domain while a VF of it is held. */
static void
test_sriov_pf_with_vf_held(void)
{
    assert_sriov_held_refused("qat-pf", "0000:6b:00.3", AV_DEVICE_STATE_DIRTY, "its VF '0000:6b:00.3'");
}

/* --- PCIe switches (issue 16) ------------------------------------------------------------ */

/* The "switches" host (tests/data/mkhosts.py): A100s behind switch 11:00.0
 * (13, 14) and switch 21:00.0 (23, 24, and 27 behind a nested switch) on
 * node 0; behind switch 91:00.0 (93, 94) and alone under a root port (a1)
 * on node 1; VFs 43:00.1 and 43:00.2 behind switch 41:00.0 on node 0. */
#define SWITCH_POLICY(numa, alloc)                                                               \
    "{\"profiles\": [\n"                                                                         \
    " {\"name\": \"gpu\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x20f1\"},"           \
    "  \"granularity\": \"function\", \"numa\": \"" numa "\", \"allocation\": \"" alloc "\"},\n"   \
    " {\"name\": \"vf\", \"match\": {\"vendor\": \"0x10ee\", \"device\": \"0x5051\"},"            \
    "  \"attach\": \"sriov-vf\", \"numa\": \"none\"}\n"                                          \
    "]}\n"

/* "ADDRESS:ROOT:SWITCH:G" per item ('-' for NULL, G when gpudirect). */
static char *
positions(const AvPlacement *p)
{
    GString *s = g_string_new(NULL);

    for (guint i = 0; i < p->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(p->items, i);

        g_string_append_printf(s, "%s%s:%s:%s%s", s->len ? " " : "", item->pci_address,
                               item->root_port ? item->root_port : "-",
                               item->switch_port ? item->switch_port : "-", item->gpudirect ? ":G" : "");
    }
    return g_string_free(s, FALSE);
}

/* "ID/NCPUS/FIRST-LAST/KIB" per node. */
static char *
nodes_of(const AvPlacement *p)
{
    GString *s = g_string_new(NULL);

    for (guint i = 0; p->nodes && i < p->nodes->len; i++) {
        const AvPlacedNode *n = g_ptr_array_index(p->nodes, i);

        g_string_append_printf(s, "%s%d/%u/%u-%u/%" G_GUINT64_FORMAT, s->len ? " " : "", n->id, n->cpus->len,
                               g_array_index(n->cpus, guint, 0), g_array_index(n->cpus, guint, n->cpus->len - 1),
                               n->memory_kib);
    }
    return g_string_free(s, FALSE);
}

static void
test_switch_items(void)
{
    Fix f;

    fix_open(&f, "switches", SWITCH_POLICY("strict", "pack"));
    {
        g_autoptr(AvPlacement) p = fix_place(&f, "gpu:2 vf:2", 4);
        g_autofree char *got = positions(p);
        g_autofree char *nodes = nodes_of(p);

        /* Pack, strict: node 1 has the fewest free GPUs. */
        g_assert_cmpint(p->numa_node, ==, 1);
        g_assert_cmpstr(got, ==, "0000:93:00.0:0000:90:01.0:0000:91:00.0:G "
                                 "0000:94:00.0:0000:90:01.0:0000:91:00.0:G "
                                 "0000:43:00.1:0000:40:01.0:0000:41:00.0 "
                                 "0000:43:00.2:0000:40:01.0:0000:41:00.0");
        g_assert_cmpint(((AvPlacedItem *)g_ptr_array_index(p->items, 2))->attach, ==, AV_ATTACH_SRIOV_VF);
        /* The domain's node and the VFs' node, ascending. */
        g_assert_cmpstr(nodes, ==, "0/8/0-7/65797984 1/8/8-15/66060128");
    }
    {
        g_autoptr(AvPlacement) p = fix_place(&f, "gpu:3", 4);
        g_autofree char *got = positions(p);
        g_autofree char *nodes = nodes_of(p);

        g_assert_cmpint(p->numa_node, ==, 1);
        g_assert_cmpstr(got, ==, "0000:93:00.0:0000:90:01.0:0000:91:00.0:G "
                                 "0000:94:00.0:0000:90:01.0:0000:91:00.0:G "
                                 "0000:a1:00.0:0000:a0:01.0:-:G");
        g_assert_cmpstr(nodes, ==, "1/8/8-15/66060128");
    }
    fix_close(&f);

    /* A node the host lacks is left out; no node at all: none. */
    fix_open(&f, "switches", SWITCH_POLICY("none", "pack"));
    {
        g_autoptr(AvPlacement) p = fix_place(&f, "vf:1", 4);
        g_autofree char *nodes = nodes_of(p);

        g_assert_cmpint(p->numa_node, ==, -1);
        g_assert_cmpstr(nodes, ==, "0/8/0-7/65797984");
    }
    for (guint i = 0; i < f.host->numa_nodes->len; i++)
        ((AvNumaNode *)g_ptr_array_index(f.host->numa_nodes, i))->id += 10;
    {
        g_autoptr(AvPlacement) p = fix_place(&f, "vf:1", 4);

        g_assert_nonnull(p->nodes);
        g_assert_cmpuint(p->nodes->len, ==, 0);
    }
    fix_close(&f);
}

static void
test_switch_p2p(void)
{
    Fix f;

    fix_open(&f, "switches", SWITCH_POLICY("none", "pack"));
    /* Pack: the switch with the fewest free that holds them (11:00.0 and
     * 91:00.0 hold 2: the lower address); three only fit 21:00.0. */
    assert_placed(&f, "gpu:2:p2p", 4, -1, "0000:13:00.0 0000:14:00.0");
    assert_placed(&f, "gpu:3:p2p", 4, -1, "0000:23:00.0 0000:24:00.0 0000:27:00.0");
    assert_placed(&f, "vf:2:p2p", 4, -1, "0000:43:00.1 0000:43:00.2");
    /* Preferred, and it fits: no warning. */
    {
        g_autoptr(AvPlacement) p = fix_place(&f, "gpu:2:p2p-pref", 4);
        g_autofree char *got = placed(p);

        g_assert_cmpstr(got, ==, "0000:13:00.0 0000:14:00.0");
        g_assert_cmpuint(p->warnings->len, ==, 0);
    }
    /* Required: no switch holds four. */
    assert_error(&f, "gpu:4:p2p", 4, AV_ERROR_NO_CAPACITY,
                 "cannot place 4 devices of profile 'gpu': no PCIe switch of this host has 4 free devices of "
                 "profile 'gpu' (switch 0000:11:00.0 has 2 free, switch 0000:21:00.0 has 3 free, switch "
                 "0000:91:00.0 has 2 free); free some, or ask for p2p='preferred'");
    /* Preferred: placed as without p2p, with a warning. */
    {
        g_autoptr(AvPlacement) p = fix_place(&f, "gpu:4:p2p-pref", 4);
        g_autofree char *got = placed(p);
        const char *w;

        g_assert_cmpstr(got, ==, "0000:13:00.0 0000:14:00.0 0000:23:00.0 0000:24:00.0");
        g_assert_cmpuint(p->warnings->len, ==, 1);
        w = g_ptr_array_index(p->warnings, 0);
        g_assert_true(g_str_has_prefix(w, "the 4 devices of 'gpu' could not sit behind one PCIe switch: no PCIe "
                                          "switch of this host has 4 free devices"));
        g_assert_null(strchr(w, '\n'));
    }
    /* Card granularity: whole cards behind one switch. */
    fix_hold(&f, "0000:13:00.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    assert_placed(&f, "gpu:2:card:p2p", 4, -1, "0000:93:00.0 0000:94:00.0");
    assert_placed(&f, "gpu:3:card:p2p", 4, -1, "0000:23:00.0 0000:24:00.0 0000:27:00.0");
    /* Devices behind no switch never count: one free behind each switch,
     * and the lone a1. */
    fix_hold(&f, "0000:24:00.0", AV_DEVICE_STATE_DIRTY, "11111111-1111-4111-8111-111111111111");
    fix_hold(&f, "0000:27:00.0", AV_DEVICE_STATE_CLAIMED, "11111111-1111-4111-8111-111111111111");
    fix_hold(&f, "0000:93:00.0", AV_DEVICE_STATE_CLAIMED, "11111111-1111-4111-8111-111111111111");
    assert_placed(&f, "gpu:2", 4, -1, "0000:14:00.0 0000:23:00.0");
    assert_error(&f, "gpu:2:p2p", 4, AV_ERROR_NO_CAPACITY,
                 "no PCIe switch of this host has 2 free devices of profile 'gpu' (switch 0000:11:00.0 has 1 "
                 "free, switch 0000:21:00.0 has 1 free, switch 0000:91:00.0 has 1 free)");
    assert_error(&f, "gpu:2:card:p2p", 4, AV_ERROR_NO_CAPACITY, "has 2 free cards of profile 'gpu'");
    /* p2p asks nothing of one device. */
    assert_placed(&f, "gpu:1:p2p", 4, -1, "0000:14:00.0");
    fix_close(&f);

    fix_open(&f, "switches", SWITCH_POLICY("none", "spread"));
    /* Spread: the switch with the most free. */
    assert_placed(&f, "gpu:2:p2p", 4, -1, "0000:23:00.0 0000:24:00.0");
    /* A switch free on paper whose devices cannot all go (24 and 27 share
     * their IOMMU groups with a bridge): 21:00.0 first (3 free), 23 taken,
     * then nothing; its pick is undone exactly and 11:00.0 comes next (2
     * free, before 91:00.0 by address); 23 is free again for the second
     * request. */
    g_ptr_array_add(av_host_find_pci(f.host, "0000:24:00.0")->iommu_group_members, g_strdup("0000:22:01.0"));
    g_ptr_array_add(av_host_find_pci(f.host, "0000:27:00.0")->iommu_group_members, g_strdup("0000:26:00.0"));
    assert_placed(&f, "gpu:2:p2p gpu:1", 4, -1, "0000:13:00.0 0000:14:00.0 0000:23:00.0");
    fix_close(&f);
}

/* Numa strict: a node whose switches cannot hold the request gives way to
 * one whose switch can; none can: the strict error names the switches. */
static void
test_switch_strict(void)
{
    Fix f;

    fix_open(&f, "switches", SWITCH_POLICY("strict", "pack"));
    fix_hold(&f, "0000:13:00.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    fix_hold(&f, "0000:23:00.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    fix_hold(&f, "0000:24:00.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    /* Node 0 has 2 free (14 and 27, behind two switches), node 1 has 3. */
    assert_placed(&f, "gpu:2", 4, 0, "0000:14:00.0 0000:27:00.0");
    assert_placed(&f, "gpu:2:p2p", 4, 1, "0000:93:00.0 0000:94:00.0");
    {
        g_autoptr(AvPlacement) p = fix_place(&f, "gpu:2:p2p-pref", 4);
        g_autofree char *got = placed(p);

        g_assert_cmpstr(got, ==, "0000:93:00.0 0000:94:00.0");
        g_assert_cmpuint(p->warnings->len, ==, 0);
    }
    fix_hold(&f, "0000:94:00.0", AV_DEVICE_STATE_IN_USE, "11111111-1111-4111-8111-111111111111");
    assert_error(&f, "gpu:2:p2p", 4, AV_ERROR_NO_CAPACITY, "no single NUMA node can hold every device");
    assert_error(&f, "gpu:2:p2p", 4, AV_ERROR_NO_CAPACITY,
                 "no PCIe switch on NUMA node 1 has 2 free devices of profile 'gpu' (switch 0000:91:00.0 has 1 "
                 "free); free some, or ask for p2p='preferred'");
    /* Preferred: the first node that holds them, with the warning. */
    {
        g_autoptr(AvPlacement) p = fix_place(&f, "gpu:2:p2p-pref", 4);
        g_autofree char *got = placed(p);

        g_assert_cmpstr(got, ==, "0000:14:00.0 0000:27:00.0");
        g_assert_cmpint(p->numa_node, ==, 0);
        g_assert_cmpuint(p->warnings->len, ==, 1);
        g_assert_nonnull(strstr(g_ptr_array_index(p->warnings, 0), "no PCIe switch on NUMA node 0 has 2 free"));
    }
    fix_close(&f);
}

/* The pool's placement record keeps each request's p2p, so that restore and
 * migrate place again with it; a p2p it does not know is refused. */
static void
test_switch_record(void)
{
    static const char uuid[] = "55555555-5555-4555-8555-555555555555";
    static const AvP2p want[] = { AV_P2P_REQUIRED, AV_P2P_PREFERRED, AV_P2P_NONE };
    Fix f;
    g_autoptr(AvPlacement) p = NULL;
    g_autoptr(AvPlacement) again = NULL;
    g_autoptr(GPtrArray) requests = g_ptr_array_new_with_free_func((GDestroyNotify)av_request_free);
    g_autofree char *state = NULL, *path = NULL, *text = NULL, *got = NULL, *got_again = NULL;
    g_autoptr(GError) err = NULL;
    const AvPoolPlacement *record;
    AvPlaceOptions options = { uuid, 4, fix_uuid, NULL };

    fix_open(&f, "switches", SWITCH_POLICY("none", "pack"));
    options.new_uuid_data = &f;
    for (guint i = 0; i < G_N_ELEMENTS(want); i++) {
        AvRequest *r = av_request_new(i == 2 ? "vf" : "gpu", 2);

        r->p2p = want[i];
        g_ptr_array_add(requests, r);
    }
    p = av_place(f.host, f.policy, f.pool, requests, &options, &err);
    g_assert_no_error(err);
    got = placed(p);
    g_assert_cmpstr(got, ==, "0000:13:00.0 0000:14:00.0 0000:93:00.0 0000:94:00.0 0000:43:00.1 0000:43:00.2");
    av_pool_placement_record(f.pool, uuid, "d", requests, p);
    g_assert_true(av_pool_save(f.pool, &err));
    g_assert_no_error(err);
    av_pool_free(f.pool);
    state = g_build_filename(f.tmp, "state", NULL);
    f.pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    record = av_pool_placement_find(f.pool, uuid);
    g_assert_nonnull(record);
    g_assert_cmpuint(record->requests->len, ==, 3);
    for (guint i = 0; i < G_N_ELEMENTS(want); i++)
        g_assert_cmpint(((AvRequest *)g_ptr_array_index(record->requests, i))->p2p, ==, want[i]);
    /* Placed again from the record: the same devices. */
    again = av_place(f.host, f.policy, f.pool, record->requests, &options, &err);
    g_assert_no_error(err);
    got_again = placed(again);
    g_assert_cmpstr(got_again, ==, got);
    av_pool_free(f.pool);
    f.pool = NULL;

    path = g_build_filename(state, "pool.json", NULL);
    g_file_get_contents(path, &text, NULL, &err);
    g_assert_no_error(err);
    g_assert_nonnull(strstr(text, "\"p2p\": \"required\""));
    g_assert_nonnull(strstr(text, "\"p2p\": \"preferred\""));
    {
        g_autoptr(json_t) root = json_loads(text, 0, NULL);
        json_t *requests_json = json_object_get(json_array_get(json_object_get(root, "placements"), 0), "requests");

        /* Absent when none: a pool.json without p2p stays as it was. */
        g_assert_null(json_object_get(json_array_get(requests_json, 2), "p2p"));
    }
    {
        static const char *const bad[] = { "\"p2p\": \"sometimes\"", "\"p2p\": \"Required\"", "\"p2p\": \"\"",
                                           "\"p2p\": null", "\"p2p\": 1", "\"p2p\": true",
                                           "\"p2p\": \"required\\u0000x\"" };

        for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
            g_autoptr(GString) s = g_string_new(text);
            AvPool *pool;

            g_string_replace(s, "\"p2p\": \"required\"", bad[i], 0);
            g_file_set_contents(path, s->str, -1, &err);
            g_assert_no_error(err);
            pool = av_pool_open(state, AV_POOL_READ, 0, &err);
            g_assert_null(pool);
            g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
            g_test_message("refused: %s", err->message);
            /* (A NUL is the JSON parser's refusal.) */
            g_assert_true(strstr(err->message, "placements/0/requests/0/p2p") || strstr(err->message, "\\u0000"));
            g_clear_error(&err);
        }
    }
    fix_close(&f);
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);
    g_test_add_func("/place/gpu/strict", test_gpu_strict);
    g_test_add_func("/place/gpu/preferred", test_gpu_preferred);
    g_test_add_func("/place/gpu/spread", test_gpu_spread);
    g_test_add_func("/place/vcpus", test_vcpus);
    g_test_add_func("/place/usb", test_usb);
    g_test_add_func("/place/errors", test_errors);
    g_test_add_func("/place/not-viable", test_not_viable);
    g_test_add_func("/place/determinism", test_determinism);
    g_test_add_func("/place/fpga/pack-region", test_pack_region);
    g_test_add_func("/place/fpga/whole-card", test_whole_card);
    g_test_add_func("/place/fpga/spread", test_spread);
    g_test_add_func("/place/fpga/defrag", test_defrag);
    g_test_add_func("/place/fpga/bitstream", test_bitstream);
    g_test_add_func("/place/fpga/bitstream-record", test_bitstream_record);
    g_test_add_func("/place/mdev", test_mdev);
    g_test_add_func("/place/sriov/growth", test_sriov_growth);
    g_test_add_func("/place/sriov/vf-with-pf-held", test_sriov_vf_with_pf_held);
    g_test_add_func("/place/sriov/vf-idle", test_sriov_vf_idle);
    g_test_add_func("/place/sriov/pf-with-vf-held", test_sriov_pf_with_vf_held);
    g_test_add_func("/place/switch/items", test_switch_items);
    g_test_add_func("/place/switch/p2p", test_switch_p2p);
    g_test_add_func("/place/switch/strict", test_switch_strict);
    g_test_add_func("/place/switch/record", test_switch_record);
    return g_test_run();
}
