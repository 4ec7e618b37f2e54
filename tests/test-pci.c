/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: host discovery from sysfs (src/pci) on the fake hosts of
 * tests/data/mkhosts.py and on hostile trees built here. */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <glib/gstdio.h>

#include "av-test.h"
#include "pci/av-health.h"
#include "pci/av-pci.h"
#include "util/av-error.h"

#ifndef AV_PCI_IDS
#define AV_PCI_IDS "/usr/share/misc/pci.ids"
#endif

static AvHost *
scan_host(const char *name)
{
    g_autofree char *dir = av_test_host_path(name);
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) root = av_root_new(dir, &err);
    AvHost *host;

    g_assert_no_error(err);
    host = av_host_scan(root, &err);
    g_assert_no_error(err);
    g_assert_nonnull(host);
    return host;
}

static AvHost *
scan_dir(const char *dir, GError **error)
{
    g_autoptr(AvRoot) root = av_root_new(dir, error);

    if (!root)
        return NULL;
    return av_host_scan(root, error);
}

static AvPciDevice *
get_pci(const AvHost *host, const char *address)
{
    AvPciDevice *dev = av_host_find_pci(host, address);

    if (!dev)
        g_error("no PCI device %s in the scan", address);
    return dev;
}

/* The strings of @arr joined by ' ', for comparisons that print well. */
static char *
join_ptr_array(GPtrArray *arr)
{
    GString *s = g_string_new(NULL);

    for (guint i = 0; i < arr->len; i++) {
        if (i)
            g_string_append_c(s, ' ');
        g_string_append(s, g_ptr_array_index(arr, i));
    }
    return g_string_free(s, FALSE);
}

static void
assert_members(AvPciDevice *dev, const char *expected)
{
    g_autofree char *got = join_ptr_array(dev->iommu_group_members);

    g_assert_cmpstr(got, ==, expected);
}

static gboolean
have_pci_ids(void)
{
    return g_file_test(AV_PCI_IDS, G_FILE_TEST_EXISTS);
}

/* --- pure functions --- */

static void
test_cpulist_good(void)
{
    static const struct {
        const char *in;
        guint count, first, last;
    } cases[] = {
        { "0-15,32-47", 32, 0, 47 },
        { "16-31,48-63", 32, 16, 63 },
        { "0", 1, 0, 0 },
        { "0-3,8,10-11", 7, 0, 11 },
        { "5,3,3-4", 3, 3, 5 },      /* unordered, duplicates merged */
        { "7-7", 1, 7, 7 },
        { "0-3\n", 4, 0, 3 },        /* as read, with the newline */
    };

    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) err = NULL;
        g_autoptr(GArray) cpus = NULL;

        g_assert_true(av_cpulist_parse(cases[i].in, &cpus, &err));
        g_assert_no_error(err);
        g_assert_cmpuint(cpus->len, ==, cases[i].count);
        g_assert_cmpuint(g_array_index(cpus, guint, 0), ==, cases[i].first);
        g_assert_cmpuint(g_array_index(cpus, guint, cpus->len - 1), ==, cases[i].last);
        for (guint j = 1; j < cpus->len; j++)
            g_assert_cmpuint(g_array_index(cpus, guint, j - 1), <, g_array_index(cpus, guint, j));
    }

    {
        g_autoptr(GArray) cpus = NULL;

        /* A memory-only node has an empty cpulist. */
        g_assert_true(av_cpulist_parse("", &cpus, NULL));
        g_assert_cmpuint(cpus->len, ==, 0);
    }
    {
        g_autoptr(GArray) cpus = NULL;
        guint expect[] = { 0, 1, 2, 3, 8, 10, 11 };

        g_assert_true(av_cpulist_parse("0-3,8,10-11", &cpus, NULL));
        g_assert_cmpmem(cpus->data, cpus->len * sizeof(guint), expect, sizeof(expect));
    }
}

static void
test_cpulist_bad(void)
{
    static const char *const bad[] = {
        "a", "1-", "-1", "3-1", "1,,2", ",1", "1,", "0x1", "1-2-3", "1 2",
        "+1", "1.5", "0-99999999", "99999999", "0-3;", "--", NULL,
    };

    for (guint i = 0; bad[i]; i++) {
        g_autoptr(GError) err = NULL;
        GArray *cpus = (GArray *)0x1;   /* must stay untouched */

        g_assert_false(av_cpulist_parse(bad[i], &cpus, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_assert_true(strstr(err->message, bad[i]) != NULL);
        g_assert_true(cpus == (GArray *)0x1);
    }
    {
        g_autoptr(GError) err = NULL;
        GArray *cpus = NULL;

        g_assert_false(av_cpulist_parse(NULL, &cpus, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    }
}

static void
test_address_is_valid(void)
{
    static const char *const good[] = {
        "0000:00:00.0", "0000:3b:00.0", "0000:ff:1f.7", "ffff:00:00.0", "0001:17:00.1",
        /* Intel VMD domains, above 0xffff; 32 bits at most */
        "10000:e1:00.0", "10001:00:1f.7", "ffffffff:00:00.0", "1234abcd:01:02.3", NULL,
    };
    static const char *const bad[] = {
        "", "0000:3B:00.0", "0000:3b:00.8", "0000:3b:20.0", "0000:3b:00", "3b:00.0",
        "0000:3b:00.0 ", " 0000:3b:00.0", "0000-3b-00.0", "0000:3b:00.00", "00000:3b:00.0",
        "0000:3b:0g.0", "../../00:0.0", "0000:3b/00.0", "0000:3b:00.-",
        "000:3b:00.0", "100000000:00:00.0", "010000:e1:00.0", "0ffff:00:00.0", "1000G:e1:00.0",
        "10000:E1:00.0", "10000:e1:00.8", "10000:e1:20.0", "10000:e1:00", "10000:e1:00.0x", NULL,
    };
    /* Numeric order, which strcmp() is not once domains differ in width. */
    static const char *const sorted[] = {
        "0000:00:00.0", "0000:00:00.1", "0000:00:1f.0", "0000:3b:00.0", "0001:00:00.0",
        "ffff:00:00.0", "10000:00:00.0", "10000:e1:00.0", "ffffffff:00:00.0", NULL,
    };
    guint32 domain = 0;
    guint8 bus = 0, slot = 0, function = 0;

    for (guint i = 0; good[i]; i++)
        g_assert_true(av_pci_address_is_valid(good[i]));
    for (guint i = 0; bad[i]; i++) {
        if (av_pci_address_is_valid(bad[i]))
            g_error("'%s' was accepted", bad[i]);
    }
    g_assert_false(av_pci_address_is_valid(NULL));
    for (guint i = 0; sorted[i]; i++) {
        for (guint j = 0; sorted[j]; j++) {
            int c = av_pci_address_compare(sorted[i], sorted[j]);

            if ((i < j && c >= 0) || (i == j && c != 0) || (i > j && c <= 0))
                g_error("'%s' and '%s' compare as %d", sorted[i], sorted[j], c);
        }
    }
    g_assert_true(av_pci_address_parse("10000:e1:1c.5", &domain, &bus, &slot, &function));
    g_assert_cmphex(domain, ==, 0x10000);
    g_assert_cmphex(bus, ==, 0xe1);
    g_assert_cmphex(slot, ==, 0x1c);
    g_assert_cmphex(function, ==, 5);
    g_assert_false(av_pci_address_parse("10000:e1:1c.8", &domain, &bus, &slot, &function));
    g_assert_cmphex(domain, ==, 0x10000);

    /* USB device names: "BUS-PORT[.PORT]...", shorter than 64 characters. */
    {
        static const char *const usb_good[] = { "1-1", "1-1.2", "3-4", "10-1.2.3.4.5", "2-11.14", NULL };
        static const char *const usb_bad[] = {
            "", "usb1", "1-1.2:1.0", "1-", "-1", "1", "1-1.", "1-.2", "1--1", "1-1..2",
            "a-1", "1-1 ", " 1-1", "1-1/..", "../1-1", NULL,
        };
        g_autofree char *ports61 = g_strnfill(61, '1');
        g_autofree char *ports62 = g_strnfill(62, '1');
        g_autofree char *longest = g_strconcat("1-", ports61, NULL);
        g_autofree char *too_long = g_strconcat("1-", ports62, NULL);

        for (guint i = 0; usb_good[i]; i++)
            g_assert_true(av_usb_bus_path_is_valid(usb_good[i]));
        for (guint i = 0; usb_bad[i]; i++) {
            if (av_usb_bus_path_is_valid(usb_bad[i]))
                g_error("'%s' was accepted", usb_bad[i]);
        }
        g_assert_true(av_usb_bus_path_is_valid(longest));
        g_assert_false(av_usb_bus_path_is_valid(too_long));
        g_assert_false(av_usb_bus_path_is_valid(NULL));
    }
}

/* --- av_pci_config_find_dsn on crafted buffers --- */

static void
put_dword(guint8 *c, gsize off, guint32 v)
{
    c[off] = v & 0xff;
    c[off + 1] = (v >> 8) & 0xff;
    c[off + 2] = (v >> 16) & 0xff;
    c[off + 3] = (v >> 24) & 0xff;
}

/* An extended capability header: id, version 1, next offset. */
static guint32
ext_header(guint16 id, guint16 next)
{
    return (guint32)id | 1u << 16 | (guint32)next << 20;
}

static void
test_dsn(void)
{
    g_autofree guint8 *c = g_malloc0(4096);
    guint64 dsn = 0;

    /* Nothing at all, and buffers too short for extended space. */
    g_assert_false(av_pci_config_find_dsn(NULL, 0, &dsn));
    g_assert_false(av_pci_config_find_dsn(c, 0, &dsn));
    g_assert_false(av_pci_config_find_dsn(c, 64, &dsn));
    g_assert_false(av_pci_config_find_dsn(c, 256, &dsn));
    g_assert_false(av_pci_config_find_dsn(c, 4096, &dsn));

    /* DSN first, at 0x100. */
    put_dword(c, 0x100, ext_header(0x0003, 0));
    put_dword(c, 0x104, 0x89abcdef);
    put_dword(c, 0x108, 0x01234567);
    g_assert_true(av_pci_config_find_dsn(c, 4096, &dsn));
    g_assert_cmphex(dsn, ==, G_GUINT64_CONSTANT(0x0123456789abcdef));
    g_assert_true(av_pci_config_find_dsn(c, 0x10c, NULL));
    /* The header fits, the serial does not. */
    g_assert_false(av_pci_config_find_dsn(c, 0x108, &dsn));
    g_assert_false(av_pci_config_find_dsn(c, 0x104, &dsn));
    g_assert_false(av_pci_config_find_dsn(c, 0x102, &dsn));

    /* Behind AER (0x0001) and ACS (0x000d): the chain is followed. */
    memset(c, 0, 4096);
    put_dword(c, 0x100, ext_header(0x0001, 0x148));
    put_dword(c, 0x148, ext_header(0x000d, 0x2a0));
    put_dword(c, 0x2a0, ext_header(0x0003, 0));
    put_dword(c, 0x2a4, 0x00000042);
    put_dword(c, 0x2a8, 0x48b02d1a);
    dsn = 0;
    g_assert_true(av_pci_config_find_dsn(c, 4096, &dsn));
    g_assert_cmphex(dsn, ==, G_GUINT64_CONSTANT(0x48b02d1a00000042));
    /* Reserved low bits of the next pointer are ignored (0x2a3 -> 0x2a0). */
    put_dword(c, 0x148, ext_header(0x000d, 0x2a3));
    g_assert_true(av_pci_config_find_dsn(c, 4096, &dsn));
    /* The same chain cut by the buffer's end. */
    g_assert_false(av_pci_config_find_dsn(c, 0x2a0, &dsn));

    /* A loop: 0x100 -> 0x140 -> 0x100, no DSN.  Must end. */
    memset(c, 0, 4096);
    put_dword(c, 0x100, ext_header(0x0001, 0x140));
    put_dword(c, 0x140, ext_header(0x000d, 0x100));
    g_assert_false(av_pci_config_find_dsn(c, 4096, &dsn));
    /* A capability pointing at itself. */
    put_dword(c, 0x100, ext_header(0x0001, 0x100));
    g_assert_false(av_pci_config_find_dsn(c, 4096, &dsn));

    /* Next pointers out of bounds: into the legacy space, past @len. */
    memset(c, 0, 4096);
    put_dword(c, 0x100, ext_header(0x0001, 0x040));
    put_dword(c, 0x040, ext_header(0x0003, 0));
    g_assert_false(av_pci_config_find_dsn(c, 4096, &dsn));
    put_dword(c, 0x100, ext_header(0x0001, 0xffc));
    g_assert_false(av_pci_config_find_dsn(c, 0x200, &dsn));
    /* 0xffc is in a 4 KiB buffer but the DSN there would end past it. */
    put_dword(c, 0xffc, ext_header(0x0003, 0));
    g_assert_false(av_pci_config_find_dsn(c, 4096, &dsn));

    /* All ones: a device that went away. */
    memset(c, 0xff, 4096);
    g_assert_false(av_pci_config_find_dsn(c, 4096, &dsn));
}

/* --- the fake hosts --- */

static const struct {
    const char *address;
    const char *model;       /* "A100" or "A6000" */
    int node;
    int group;
    const char *slot;
    const char *port;        /* its own root port */
} two_socket_gpus[] = {
    { "0000:17:00.0", "A100", 0, 40, "1", "0000:16:02.0" },
    { "0000:31:00.0", "A100", 0, 41, "2", "0000:30:02.0" },
    { "0000:4b:00.0", "A100", 0, 42, "3", "0000:4a:02.0" },
    { "0000:65:00.0", "A100", 0, 43, "4", "0000:64:02.0" },
    { "0000:98:00.0", "A6000", 1, 44, "5", "0000:97:02.0" },
    { "0000:b1:00.0", "A6000", 1, 45, "6", "0000:b0:02.0" },
    { "0000:ca:00.0", "A100", 1, 46, "7", "0000:c9:02.0" },
    { "0000:e3:00.0", "A100", 1, 47, "8", "0000:e2:02.0" },
};

static void
test_two_socket_gpus(void)
{
    g_autoptr(AvHost) host = scan_host("two-socket-8gpu");
    guint gpus = 0;

    g_assert_true(host->iommu_enabled);
    /* Sorted by address. */
    for (guint i = 1; i < host->pci->len; i++) {
        AvPciDevice *a = g_ptr_array_index(host->pci, i - 1);
        AvPciDevice *b = g_ptr_array_index(host->pci, i);

        g_assert_cmpstr(a->address, <, b->address);
    }
    for (guint i = 0; i < host->pci->len; i++) {
        AvPciDevice *dev = g_ptr_array_index(host->pci, i);

        if (dev->vendor_id == 0x10de && (dev->class_code >> 16) == 0x03)
            gpus++;
    }
    g_assert_cmpuint(gpus, ==, 8);

    for (guint i = 0; i < G_N_ELEMENTS(two_socket_gpus); i++) {
        AvPciDevice *dev = get_pci(host, two_socket_gpus[i].address);
        gboolean a100 = g_str_equal(two_socket_gpus[i].model, "A100");
        const char *cpus = two_socket_gpus[i].node == 0 ? "0-15,32-47" : "16-31,48-63";
        const char *port = two_socket_gpus[i].port;

        g_test_message("GPU %u: %s", i, dev->address);
        g_assert_cmphex(dev->vendor_id, ==, 0x10de);
        g_assert_cmphex(dev->device_id, ==, a100 ? 0x20f1 : 0x2230);
        g_assert_cmphex(dev->subsystem_vendor_id, ==, 0x10de);
        g_assert_cmphex(dev->subsystem_device_id, ==, a100 ? 0x145f : 0x1459);
        g_assert_cmphex(dev->class_code, ==, a100 ? 0x030200 : 0x030000);
        g_assert_cmphex(dev->revision, ==, 0xa1);
        g_assert_cmpint(dev->numa_node, ==, two_socket_gpus[i].node);
        g_assert_cmpstr(dev->local_cpulist, ==, cpus);
        g_assert_cmpint(dev->iommu_group, ==, two_socket_gpus[i].group);
        g_assert_cmpstr(dev->physical_slot, ==, two_socket_gpus[i].slot);
        g_assert_false(dev->is_bridge);
        g_assert_false(dev->sriov_capable);
        g_assert_null(dev->physfn);
        g_assert_cmpint(dev->vf_index, ==, -1);
        g_assert_cmpuint(dev->virtfns->len, ==, 0);
        g_assert_cmpuint(dev->mdev_types->len, ==, 0);
        g_assert_cmpuint(dev->mdevs->len, ==, 0);
        g_assert_true(dev->has_reset);
        g_assert_nonnull(dev->reset_methods);
        /* Each GPU behind its own root port on its own root complex. */
        g_assert_cmpstr(dev->parent_bridge, ==, port);
        g_assert_true(get_pci(host, port)->is_bridge);
        g_assert_cmpstr(get_pci(host, port)->driver, ==, "pcieport");
        g_assert_true(g_str_has_prefix(dev->sysfs_path, "/sys/devices/pci0000:"));
        g_assert_true(g_str_has_suffix(dev->sysfs_path, dev->address));

        if (a100) {
            g_assert_cmpstr(dev->driver, ==, "nvidia");
            g_assert_null(dev->driver_override);
            g_assert_true(dev->has_dsn);
            g_assert_cmphex(dev->dsn, ==, G_GUINT64_CONSTANT(0x48b02d1a00000000) | (0x1c0 + i));
            g_assert_cmpstrv(dev->reset_methods, ((const char *const[]){ "flr", "bus", NULL }));
            assert_members(dev, dev->address);
        } else {
            g_autofree char *audio = g_strndup(dev->address, 11);
            g_autofree char *audio_addr = g_strconcat(audio, "1", NULL);
            g_autofree char *members = g_strconcat(dev->address, " ", audio_addr, NULL);
            AvPciDevice *snd = get_pci(host, audio_addr);

            /* No DSN: the identity falls back to the slot. */
            g_assert_false(dev->has_dsn);
            g_assert_cmpstrv(dev->reset_methods, ((const char *const[]){ "pm", NULL }));
            assert_members(dev, members);
            assert_members(snd, members);
            g_assert_cmpint(snd->iommu_group, ==, dev->iommu_group);
            g_assert_cmphex(snd->vendor_id, ==, 0x10de);
            g_assert_cmphex(snd->device_id, ==, 0x1aef);
            g_assert_cmphex(snd->class_code, ==, 0x040300);
            g_assert_cmpstr(snd->driver, ==, "snd_hda_intel");
            g_assert_null(snd->driver_override);
            g_assert_cmpstr(snd->physical_slot, ==, dev->physical_slot);
            if (g_str_equal(dev->address, "0000:b1:00.0")) {
                g_assert_cmpstr(dev->driver, ==, "vfio-pci");
                g_assert_cmpstr(dev->driver_override, ==, "vfio-pci");
            } else {
                g_assert_cmpstr(dev->driver, ==, "nvidia");
                g_assert_null(dev->driver_override);
            }
        }

        if (have_pci_ids()) {
            g_assert_cmpstr(dev->vendor_name, ==, "NVIDIA Corporation");
            g_assert_cmpstr(dev->device_name, ==, a100 ? "GA100 [A100 PCIe 40GB]" : "GA102GL [RTX A6000]");
        }
    }
}

static void
test_two_socket_host_devices(void)
{
    g_autoptr(AvHost) host = scan_host("two-socket-8gpu");
    AvPciDevice *nic = get_pci(host, "0000:02:00.0");
    AvPciDevice *nvme = get_pci(host, "0000:01:00.0");
    AvPciDevice *xhci = get_pci(host, "0000:00:14.0");
    AvPciDevice *hb = get_pci(host, "0000:00:00.0");
    AvPciDevice *rp = get_pci(host, "0000:00:1c.0");

    g_assert_cmphex(nic->vendor_id, ==, 0x8086);
    g_assert_cmphex(nic->device_id, ==, 0x1572);
    g_assert_cmphex(nic->class_code, ==, 0x020000);
    g_assert_cmpstr(nic->driver, ==, "i40e");
    g_assert_cmpstr(nic->parent_bridge, ==, "0000:00:1c.0");
    g_assert_cmpstr(get_pci(host, "0000:02:00.1")->driver, ==, "i40e");
    g_assert_null(nic->physical_slot);
    g_assert_cmphex(nvme->vendor_id, ==, 0x144d);
    g_assert_cmphex(nvme->device_id, ==, 0xa808);
    g_assert_cmphex(nvme->class_code, ==, 0x010802);
    g_assert_cmpstr(nvme->driver, ==, "nvme");
    g_assert_cmphex(xhci->class_code, ==, 0x0c0330);
    g_assert_cmpstr(xhci->driver, ==, "xhci_hcd");

    /* A host bridge on the root bus: no driver, no upstream bridge, and no
     * reset_method file at all (as on kernels before 5.15). */
    g_assert_cmphex(hb->class_code, ==, 0x060000);
    g_assert_false(hb->is_bridge);
    g_assert_null(hb->driver);
    g_assert_null(hb->parent_bridge);
    g_assert_null(hb->reset_methods);
    g_assert_false(hb->has_reset);
    g_assert_cmphex(rp->class_code, ==, 0x060400);
    g_assert_true(rp->is_bridge);
    g_assert_cmpstr(rp->driver, ==, "pcieport");
    g_assert_null(rp->parent_bridge);
    if (have_pci_ids()) {
        g_assert_cmpstr(nic->vendor_name, ==, "Intel Corporation");
        g_assert_cmpstr(nic->device_name, ==, "Ethernet Controller X710 for 10GbE SFP+");
    }
}

static void
test_two_socket_numa_usb(void)
{
    g_autoptr(AvHost) host = scan_host("two-socket-8gpu");
    AvNumaNode *n0, *n1;
    AvUsbDevice *hub, *stick;

    g_assert_cmpuint(host->numa_nodes->len, ==, 2);
    n0 = g_ptr_array_index(host->numa_nodes, 0);
    n1 = g_ptr_array_index(host->numa_nodes, 1);
    g_assert_cmpint(n0->id, ==, 0);
    g_assert_cmpint(n1->id, ==, 1);
    g_assert_cmpstr(n0->cpulist, ==, "0-15,32-47");
    g_assert_cmpstr(n1->cpulist, ==, "16-31,48-63");
    g_assert_cmpuint(n0->cpus->len, ==, 32);
    g_assert_cmpuint(n1->cpus->len, ==, 32);
    g_assert_cmpuint(g_array_index(n0->cpus, guint, 16), ==, 32);
    g_assert_cmpuint(g_array_index(n1->cpus, guint, 31), ==, 63);
    g_assert_cmpuint(n0->memory_kib, ==, 263921276);
    g_assert_cmpuint(n1->memory_kib, ==, 264195264);

    /* Root hubs (usb1, usb2) and interfaces (1-1.2:1.0) are not listed. */
    g_assert_cmpuint(host->usb->len, ==, 2);
    hub = g_ptr_array_index(host->usb, 0);
    stick = g_ptr_array_index(host->usb, 1);
    g_assert_cmpstr(hub->bus_path, ==, "1-1");
    g_assert_cmpstr(stick->bus_path, ==, "1-1.2");
    g_assert_cmphex(stick->vendor_id, ==, 0x03e7);
    g_assert_cmphex(stick->product_id, ==, 0x2485);
    g_assert_cmpstr(stick->serial, ==, "03e72485");
    g_assert_cmpstr(stick->manufacturer, ==, "Movidius Ltd.");
    g_assert_cmpstr(stick->product, ==, "Movidius MyriadX");
    g_assert_cmpuint(stick->busnum, ==, 1);
    g_assert_cmpuint(stick->devnum, ==, 3);
    g_assert_cmpstr(stick->speed, ==, "480");
    g_assert_cmpstr(stick->pci_controller, ==, "0000:00:14.0");
    g_assert_cmpint(stick->numa_node, ==, 0);
    g_assert_cmpstr(stick->sysfs_path, ==, "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1.2");
    g_assert_null(hub->serial);
}

static void
test_device_scan(void)
{
    g_autofree char *dir = av_test_host_path("two-socket-8gpu");
    g_autoptr(AvRoot) root = av_root_new(dir, NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPciDevice) dev = NULL;
    AvPciDevice *missing;

    dev = av_pci_device_scan(root, "0000:ca:00.0", &err);
    g_assert_no_error(err);
    g_assert_cmphex(dev->device_id, ==, 0x20f1);
    g_assert_cmpstr(dev->physical_slot, ==, "7");
    g_assert_cmpint(dev->numa_node, ==, 1);
    g_assert_true(dev->has_dsn);
    g_assert_cmpstr(dev->sysfs_path, ==, "/sys/devices/pci0000:c9/0000:c9:02.0/0000:ca:00.0");

    missing = av_pci_device_scan(root, "0000:ca:00.1", &err);
    g_assert_null(missing);
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_assert_true(strstr(err->message, "0000:ca:00.1") != NULL);
    g_clear_error(&err);

    missing = av_pci_device_scan(root, "../../../etc", &err);
    g_assert_null(missing);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    missing = av_pci_device_scan(root, "0000:CA:00.0", &err);
    g_assert_null(missing);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
}

static void
test_sriov_fpga_qat(void)
{
    g_autoptr(AvHost) host = scan_host("sriov-fpga-qat");
    AvPciDevice *pf = get_pci(host, "0000:6b:00.0");
    AvPciDevice *mgmt = get_pci(host, "0000:3b:00.0");
    AvPciDevice *user = get_pci(host, "0000:3b:00.1");
    g_autofree char *vfs = NULL;

    /* The QAT PF: a root complex integrated endpoint with 4 of 16 VFs. */
    g_assert_cmphex(pf->vendor_id, ==, 0x8086);
    g_assert_cmphex(pf->device_id, ==, 0x4940);
    g_assert_cmphex(pf->class_code, ==, 0x0b4000);
    g_assert_cmpstr(pf->driver, ==, "4xxx");
    g_assert_true(pf->sriov_capable);
    g_assert_cmpuint(pf->sriov_totalvfs, ==, 16);
    g_assert_cmpuint(pf->sriov_numvfs, ==, 4);
    g_assert_null(pf->physfn);
    g_assert_cmpint(pf->vf_index, ==, -1);
    g_assert_null(pf->parent_bridge);
    vfs = join_ptr_array(pf->virtfns);
    g_assert_cmpstr(vfs, ==, "0000:6b:00.1 0000:6b:00.2 0000:6b:00.3 0000:6b:00.4");

    for (int i = 0; i < 4; i++) {
        g_autofree char *addr = g_strdup_printf("0000:6b:00.%d", i + 1);
        AvPciDevice *vf = get_pci(host, addr);

        g_assert_cmphex(vf->device_id, ==, 0x4941);
        g_assert_cmpstr(vf->physfn, ==, "0000:6b:00.0");
        g_assert_cmpint(vf->vf_index, ==, i);
        g_assert_false(vf->sriov_capable);
        g_assert_cmpuint(vf->virtfns->len, ==, 0);
        /* Each VF alone in its IOMMU group. */
        g_assert_cmpint(vf->iommu_group, ==, 150 + i);
        assert_members(vf, addr);
        if (i == 1) {
            g_assert_cmpstr(vf->driver, ==, "vfio-pci");
            g_assert_cmpstr(vf->driver_override, ==, "vfio-pci");
        } else {
            g_assert_cmpstr(vf->driver, ==, "4xxxvf");
            g_assert_null(vf->driver_override);
        }
        g_assert_cmpstrv(vf->reset_methods, ((const char *const[]){ "flr", NULL }));
    }

    /* The Alveo U250: two functions sharing a group, each with the DSN. */
    g_assert_cmphex(mgmt->vendor_id, ==, 0x10ee);
    g_assert_cmphex(mgmt->device_id, ==, 0x5004);
    g_assert_cmphex(user->device_id, ==, 0x5005);
    g_assert_cmphex(mgmt->class_code, ==, 0x120000);
    g_assert_cmpstr(mgmt->driver, ==, "xclmgmt");
    g_assert_cmpstr(user->driver, ==, "xocl");
    g_assert_true(mgmt->has_dsn);
    g_assert_cmphex(mgmt->dsn, ==, G_GUINT64_CONSTANT(0x000a35002c1d0f0e));
    g_assert_cmphex(user->dsn, ==, mgmt->dsn);
    g_assert_cmpint(mgmt->iommu_group, ==, 30);
    assert_members(mgmt, "0000:3b:00.0 0000:3b:00.1");
    assert_members(user, "0000:3b:00.0 0000:3b:00.1");
    g_assert_cmpstr(mgmt->physical_slot, ==, "2");
    g_assert_cmpstr(mgmt->parent_bridge, ==, "0000:3a:02.0");
    if (have_pci_ids()) {
        g_assert_cmpstr(mgmt->vendor_name, ==, "Xilinx Corporation");
        g_assert_cmpstr(mgmt->device_name, ==, "Alveo U250 XDMA Platform");
    }

    g_assert_cmpuint(host->numa_nodes->len, ==, 1);
    g_assert_cmpuint(((AvNumaNode *)g_ptr_array_index(host->numa_nodes, 0))->cpus->len, ==, 32);
    /* No USB at all in this tree. */
    g_assert_cmpuint(host->usb->len, ==, 0);
}

static void
test_vgpu_mdev(void)
{
    g_autoptr(AvHost) host = scan_host("vgpu-mdev");
    AvPciDevice *busy = get_pci(host, "0000:17:00.0");
    AvPciDevice *idle = get_pci(host, "0000:98:00.0");
    static const char *const ids[] = {
        "nvidia-588", "nvidia-589", "nvidia-590", "nvidia-591", "nvidia-592", "nvidia-593",
    };
    static const guint max[] = { 24, 12, 6, 3, 2, 1 };
    AvMdev *mdev;
    AvMdevType *t;

    g_assert_cmphex(busy->device_id, ==, 0x2236);
    g_assert_cmphex(busy->subsystem_device_id, ==, 0x1482);
    g_assert_cmphex(busy->class_code, ==, 0x030200);
    g_assert_cmpstr(busy->driver, ==, "nvidia");
    g_assert_cmpint(busy->numa_node, ==, 0);
    g_assert_cmpint(idle->numa_node, ==, 1);
    g_assert_cmpuint(busy->mdev_types->len, ==, 6);
    g_assert_cmpuint(idle->mdev_types->len, ==, 6);
    for (guint i = 0; i < 6; i++) {
        AvMdevType *b = g_ptr_array_index(busy->mdev_types, i);
        AvMdevType *d = g_ptr_array_index(idle->mdev_types, i);

        g_assert_cmpstr(b->id, ==, ids[i]);
        g_assert_cmpstr(d->id, ==, ids[i]);
        g_assert_cmpstr(b->device_api, ==, "vfio-pci");
        g_assert_true(g_str_has_prefix(b->name, "NVIDIA A10-"));
        g_assert_nonnull(b->description);
        g_assert_true(strstr(b->description, "max_instance=") != NULL);
        g_assert_cmpuint(d->available, ==, max[i]);
        /* One nvidia-590 exists: one fewer of it, none of the others. */
        g_assert_cmpuint(b->available, ==, i == 2 ? max[i] - 1 : 0);
    }
    t = g_ptr_array_index(busy->mdev_types, 2);
    g_assert_cmpstr(t->name, ==, "NVIDIA A10-4Q");
    t = g_ptr_array_index(busy->mdev_types, 5);
    g_assert_cmpstr(t->name, ==, "NVIDIA A10-24Q");

    g_assert_cmpuint(busy->mdevs->len, ==, 1);
    g_assert_cmpuint(idle->mdevs->len, ==, 0);
    mdev = g_ptr_array_index(busy->mdevs, 0);
    g_assert_cmpstr(mdev->uuid, ==, "4b20d080-1b54-4048-85b3-a6a62d165c01");
    g_assert_cmpstr(mdev->parent, ==, "0000:17:00.0");
    g_assert_cmpstr(mdev->type_id, ==, "nvidia-590");
    /* The mdev is not a PCI function. */
    g_assert_null(av_host_find_pci(host, mdev->uuid));

    g_assert_cmpuint(host->numa_nodes->len, ==, 2);
    if (have_pci_ids())
        g_assert_cmpstr(busy->device_name, ==, "GA102GL [A10]");
}

static void
test_trap_shared_group(void)
{
    g_autoptr(AvHost) host = scan_host("trap-shared-group");
    AvPciDevice *gpu = get_pci(host, "0000:04:00.0");
    AvPciDevice *nic = get_pci(host, "0000:05:00.0");
    const char *group = "0000:02:00.0 0000:03:08.0 0000:03:10.0 0000:04:00.0 0000:05:00.0 0000:05:00.1";

    g_assert_cmphex(gpu->device_id, ==, 0x20f1);
    g_assert_cmpint(gpu->iommu_group, ==, 12);
    g_assert_cmpint(nic->iommu_group, ==, 12);
    assert_members(gpu, group);
    assert_members(nic, group);
    g_assert_cmpstr(nic->driver, ==, "i40e");
    g_assert_cmphex(nic->device_id, ==, 0x1572);
    g_assert_cmpstr(gpu->parent_bridge, ==, "0000:03:08.0");
    g_assert_cmpstr(get_pci(host, "0000:03:08.0")->parent_bridge, ==, "0000:02:00.0");
    g_assert_cmpstr(get_pci(host, "0000:02:00.0")->parent_bridge, ==, "0000:00:1c.0");
    /* The firmware gives no proximity here: numa_node reads -1. */
    g_assert_cmpint(gpu->numa_node, ==, -1);
    /* Every device has a group. */
    for (guint i = 0; i < host->pci->len; i++)
        g_assert_cmpint(((AvPciDevice *)g_ptr_array_index(host->pci, i))->iommu_group, >=, 0);
}

/* --- trees built here --- */

/* A minimal device at @rel (under @root) with vendor @vendor. */
static void
write_device(const char *root, const char *rel, const char *vendor)
{
    g_autofree char *v = g_build_filename(rel, "vendor", NULL);
    g_autofree char *d = g_build_filename(rel, "device", NULL);
    g_autofree char *c = g_build_filename(rel, "class", NULL);

    av_test_write(root, v, vendor);
    av_test_write(root, d, "0x1000\n");
    av_test_write(root, c, "0x020000\n");
}

static void
test_not_a_sys_tree(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;

    av_test_write(dir, "etc/hostname", "not sysfs\n");
    host = scan_dir(dir, &err);
    g_assert_null(host);
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_test_message("%s", err->message);
    g_assert_true(strstr(err->message, "sys/bus/pci/devices") != NULL);
    g_assert_true(strstr(err->message, "--root") != NULL);
    g_assert_true(strstr(err->message, "sys/") != NULL);
    av_test_tmpdir_remove(dir);
}

static void
test_numa_fallback(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;
    AvNumaNode *node;

    /* A kernel without CONFIG_NUMA: no node directory, PCI devices without
     * numa_node, no IOMMU. */
    write_device(dir, "sys/devices/pci0000:00/0000:00:03.0", "0x8086\n");
    av_test_symlink(dir, "sys/bus/pci/devices/0000:00:03.0", "../../../devices/pci0000:00/0000:00:03.0");
    av_test_write(dir, "sys/devices/system/cpu/online", "0-3\n");
    av_test_write(dir, "proc/meminfo", "MemTotal:        8035772 kB\nMemFree:  1 kB\n");
    host = scan_dir(dir, &err);
    g_assert_no_error(err);
    g_assert_false(host->iommu_enabled);
    g_assert_cmpuint(host->numa_nodes->len, ==, 1);
    node = g_ptr_array_index(host->numa_nodes, 0);
    g_assert_cmpint(node->id, ==, 0);
    g_assert_cmpstr(node->cpulist, ==, "0-3");
    g_assert_cmpuint(node->cpus->len, ==, 4);
    g_assert_cmpuint(node->memory_kib, ==, 8035772);
    g_assert_cmpuint(host->pci->len, ==, 1);
    {
        AvPciDevice *dev = g_ptr_array_index(host->pci, 0);

        g_assert_cmpint(dev->numa_node, ==, -1);
        g_assert_cmpint(dev->iommu_group, ==, -1);
        g_assert_cmpuint(dev->iommu_group_members->len, ==, 0);
        g_assert_null(dev->driver);
        g_assert_null(dev->driver_override);
        g_assert_null(dev->local_cpulist);
        g_assert_null(dev->reset_methods);
        g_assert_false(dev->has_dsn);
        g_assert_cmphex(dev->subsystem_vendor_id, ==, 0);
    }
    av_test_tmpdir_remove(dir);
}

static void
test_unreadable_vendor(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *vendor = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPciDevice) dev = NULL;

    /* 00:03.0 lost its "vendor" after its link resolved (unplugged
     * mid-scan); 00:06.0's link dangles; 00:04.0 is whole. */
    av_test_write(dir, "sys/devices/pci0000:00/0000:00:03.0/device", "0x1000\n");
    av_test_symlink(dir, "sys/bus/pci/devices/0000:00:03.0", "../../../devices/pci0000:00/0000:00:03.0");
    av_test_write(dir, "sys/devices/pci0000:00/0000:00:04.0/vendor", "0x8086\n");
    av_test_symlink(dir, "sys/bus/pci/devices/0000:00:04.0", "../../../devices/pci0000:00/0000:00:04.0");
    av_test_symlink(dir, "sys/bus/pci/devices/0000:00:06.0", "../../../devices/pci0000:00/0000:00:06.0");
    host = scan_dir(dir, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(host->pci->len, ==, 1);
    g_assert_cmpstr(((AvPciDevice *)g_ptr_array_index(host->pci, 0))->address, ==, "0000:00:04.0");
    g_clear_pointer(&host, av_host_free);

    /* Asked for by address, the vanished device is not found. */
    root = av_root_new(dir, &err);
    g_assert_no_error(err);
    dev = av_pci_device_scan(root, "0000:00:03.0", &err);
    g_assert_null(dev);
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(err->message, "0000:00:03.0"));
    g_clear_error(&err);

    /* Any other failure to read "vendor" (here -EISDIR) fails the scan,
     * naming the device. */
    vendor = g_build_filename(dir, "sys/devices/pci0000:00/0000:00:03.0/vendor", NULL);
    g_assert_cmpint(mkdir(vendor, 0755), ==, 0);
    host = scan_dir(dir, &err);
    g_assert_null(host);
    g_assert_error(err, AV_ERROR, AV_ERROR_IO);
    g_test_message("%s", err->message);
    g_assert_nonnull(strstr(err->message, "0000:00:03.0"));
    g_assert_nonnull(strstr(err->message, "vendor"));
    av_test_tmpdir_remove(dir);
}

/* Intel VMD: the NVMe drives behind the controller live in a PCI domain
 * above 0xffff ("10000:e1:00.0"), under /sys/devices/pci0000:00/
 * 0000:00:0e.0/pci10000:e0/.  Their addresses are valid, sorted by number,
 * their slots and parents found. */
static void
test_vmd_domain(void)
{
    static const char *const order[] = {
        "0000:00:0e.0", "ffff:00:02.0", "10000:e0:1a.0", "10000:e1:00.0", NULL,
    };
    g_autofree char *dir = av_test_tmpdir();
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPciDevice) one = NULL;
    const char *vmd = "sys/devices/pci0000:00/0000:00:0e.0";
    const char *port = "sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:1a.0";
    const char *nvme = "sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:1a.0/10000:e1:00.0";
    const char *other = "sys/devices/pciffff:00/ffff:00:02.0";
    const char *const devs[][4] = {
        { "0000:00:0e.0", NULL, "0x8086", "0x010400" },
        { "10000:e0:1a.0", NULL, "0x8086", "0x060400" },
        { "10000:e1:00.0", NULL, "0x144d", "0x010802" },
        { "ffff:00:02.0", NULL, "0x1af4", "0x020000" },
    };
    const char *paths[] = { vmd, port, nvme, other };
    AvPciDevice *dev;

    for (guint i = 0; i < G_N_ELEMENTS(devs); i++) {
        g_autofree char *v = g_strconcat(paths[i], "/vendor", NULL);
        g_autofree char *c = g_strconcat(paths[i], "/class", NULL);
        g_autofree char *link = g_strconcat("sys/bus/pci/devices/", devs[i][0], NULL);
        g_autofree char *target = g_strconcat("../../../", paths[i] + strlen("sys/"), NULL);
        g_autofree char *vline = g_strconcat(devs[i][2], "\n", NULL);
        g_autofree char *cline = g_strconcat(devs[i][3], "\n", NULL);

        av_test_write(dir, v, vline);
        av_test_write(dir, c, cline);
        av_test_symlink(dir, link, target);
    }
    av_test_write(dir, "sys/bus/pci/slots/3/address", "10000:e1:00\n");
    av_test_write(dir, "sys/kernel/iommu_groups/7/devices/.keep", "");
    av_test_symlink(dir, "sys/kernel/iommu_groups/7/devices/10000:e1:00.0", "../../../../devices/x");
    av_test_symlink(dir, "sys/kernel/iommu_groups/7/devices/0000:00:0e.0", "../../../../devices/x");
    av_test_symlink(dir, "sys/kernel/iommu_groups/7/devices/ffff:00:02.0", "../../../../devices/x");
    {
        g_autofree char *group = g_strconcat(nvme, "/iommu_group", NULL);

        av_test_symlink(dir, group, "../../../../../../kernel/iommu_groups/7");
    }

    host = scan_dir(dir, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(host->pci->len, ==, 4);
    for (guint i = 0; order[i]; i++)
        g_assert_cmpstr(((AvPciDevice *)g_ptr_array_index(host->pci, i))->address, ==, order[i]);
    dev = get_pci(host, "10000:e1:00.0");
    g_assert_cmphex(dev->vendor_id, ==, 0x144d);
    g_assert_cmpstr(dev->parent_bridge, ==, "10000:e0:1a.0");
    g_assert_cmpstr(dev->physical_slot, ==, "3");
    g_assert_cmpint(dev->iommu_group, ==, 7);
    {
        g_autofree char *members = join_ptr_array(dev->iommu_group_members);

        g_assert_cmpstr(members, ==, "0000:00:0e.0 ffff:00:02.0 10000:e1:00.0");
    }
    dev = get_pci(host, "10000:e0:1a.0");
    g_assert_null(dev->parent_bridge);
    g_assert_true(dev->is_bridge);
    g_assert_null(get_pci(host, "0000:00:0e.0")->parent_bridge);

    root = av_root_new(dir, &err);
    g_assert_no_error(err);
    one = av_pci_device_scan(root, "10000:e1:00.0", &err);
    g_assert_no_error(err);
    g_assert_cmpstr(one->sysfs_path, ==, "/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:1a.0/10000:e1:00.0");
    g_assert_cmpstr(one->physical_slot, ==, "3");
    av_test_tmpdir_remove(dir);
}

/* Non-root readers get 64 bytes of config: ids still come from the
 * attributes or that header, and no DSN. */
static void
test_short_config(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autofree char *path = NULL;
    guint8 config[64] = { 0 };
    AvPciDevice *dev;

    config[0x00] = 0xde; config[0x01] = 0x10;      /* vendor 0x10de */
    config[0x02] = 0xf1; config[0x03] = 0x20;      /* device 0x20f1 */
    config[0x08] = 0xa1;                           /* revision */
    config[0x09] = 0x00; config[0x0a] = 0x02; config[0x0b] = 0x03;
    config[0x2c] = 0xde; config[0x2d] = 0x10; config[0x2e] = 0x5f; config[0x2f] = 0x14;
    av_test_write(dir, "sys/devices/pci0000:00/0000:00:05.0/vendor", "0x10de\n");
    path = g_build_filename(dir, "sys/devices/pci0000:00/0000:00:05.0/config", NULL);
    g_assert_true(g_file_set_contents(path, (const char *)config, sizeof(config), NULL));
    av_test_symlink(dir, "sys/bus/pci/devices/0000:00:05.0", "../../../devices/pci0000:00/0000:00:05.0");
    host = scan_dir(dir, &err);
    g_assert_no_error(err);
    dev = get_pci(host, "0000:00:05.0");
    g_assert_cmphex(dev->device_id, ==, 0x20f1);
    g_assert_cmphex(dev->class_code, ==, 0x030200);
    g_assert_cmphex(dev->revision, ==, 0xa1);
    g_assert_cmphex(dev->subsystem_device_id, ==, 0x145f);
    g_assert_false(dev->has_dsn);
    av_test_tmpdir_remove(dir);
}

/* Links that are absolute or climb above the root resolve inside it.  The
 * tree is DIR/root; decoys in DIR (one level above the root) would be read
 * if a link escaped. */
static void
test_root_containment(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autofree char *rootdir = g_build_filename(dir, "root", NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;
    const char *devdir = "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0";
    AvPciDevice *dev, *vf;

    /* Decoys outside the root. */
    av_test_write(dir, "sys/kernel/iommu_groups/9/devices/0000:0f:00.0/vendor", "0xdead\n");
    av_test_write(dir, "sys/bus/pci/drivers/outside-driver/bind", "");
    av_test_write(dir, "outside-vendor", "0xdead\n");
    av_test_write(dir, "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0/local_cpulist", "outside\n");

    /* The device, its PF-side links and group inside the root. */
    write_device(rootdir, devdir, "0x15b3\n");
    write_device(rootdir, "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.1", "0x15b3\n");
    av_test_write(rootdir, "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0/sriov_totalvfs", "8\n");
    av_test_write(rootdir, "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0/sriov_numvfs", "1\n");
    av_test_write(rootdir, "sys/bus/pci/drivers/mlx5_core/bind", "");
    av_test_write(rootdir, "sys/kernel/iommu_groups/9/type", "DMA\n");
    av_test_write(rootdir, "sys/devices/system/node/node0/cpulist", "0-3,7\n");
    av_test_write(rootdir, "sys/devices/system/cpu/online", "0-3\n");
    av_test_write(rootdir, "sys/bus/pci/slots/4/address", "0000:01:00\n");
    /* Absolute links, as a careless copy would leave them. */
    av_test_symlink(rootdir, "sys/bus/pci/devices/0000:01:00.0",
                    "/sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0");
    av_test_symlink(rootdir, "sys/bus/pci/devices/0000:01:00.1",
                    "/sys/devices/pci0000:00/0000:00:02.0/0000:01:00.1");
    av_test_symlink(rootdir, "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0/driver",
                    "/sys/bus/pci/drivers/mlx5_core");
    av_test_symlink(rootdir, "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.1/driver",
                    "/sys/bus/pci/drivers/outside-driver");
    /* Too many "..": one more than needed to reach the root. */
    av_test_symlink(rootdir, "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0/iommu_group",
                    "../../../../../../sys/kernel/iommu_groups/9");
    av_test_symlink(rootdir, "sys/kernel/iommu_groups/9/devices/0000:01:00.0",
                    "../../../../../../../../../../sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0");
    av_test_symlink(rootdir, "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0/virtfn0",
                    "/../../../sys/devices/pci0000:00/0000:00:02.0/0000:01:00.1");
    av_test_symlink(rootdir, "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.1/physfn",
                    "../../../../../../../sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0");
    /* An attribute that is a link climbing out: reads the root's copy. */
    av_test_write(rootdir, "outside-vendor", "0x15b3\n");
    av_test_write(rootdir, "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.1/subsystem_vendor.real", "0x15b3\n");
    av_test_symlink(rootdir, "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.1/subsystem_vendor",
                    "../../../../../../outside-vendor");
    av_test_symlink(rootdir, "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0/local_cpulist",
                    "/sys/devices/system/node/node0/cpulist");

    host = scan_dir(rootdir, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(host->pci->len, ==, 2);
    dev = get_pci(host, "0000:01:00.0");
    vf = get_pci(host, "0000:01:00.1");
    g_assert_cmpstr(dev->sysfs_path, ==, "/sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0");
    g_assert_cmpstr(dev->driver, ==, "mlx5_core");
    /* The outside-driver's directory exists only outside the root: never
     * looked at, but the link's own text, inside the root, names the driver
     * (as pciutils reads it; a capture often lacks the drivers' dirs). */
    g_assert_cmpstr(vf->driver, ==, "outside-driver");
    g_assert_cmpint(dev->iommu_group, ==, 9);
    assert_members(dev, "0000:01:00.0");
    g_assert_cmpstr(dev->local_cpulist, ==, "0-3,7");
    g_assert_cmphex(vf->subsystem_vendor_id, ==, 0x15b3);
    g_assert_cmpstr(vf->physfn, ==, "0000:01:00.0");
    g_assert_cmpint(vf->vf_index, ==, 0);
    g_assert_cmpuint(dev->virtfns->len, ==, 1);
    g_assert_cmpstr(g_ptr_array_index(dev->virtfns, 0), ==, "0000:01:00.1");
    g_assert_cmpstr(dev->physical_slot, ==, "4");
    av_test_tmpdir_remove(dir);
}

/* Malformed names and links are skipped, loops end, nothing crashes. */
static void
test_hostile_tree(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;
    const char *d = "sys/devices/pci0000:00/0000:00:04.0";
    g_autofree char *bad_uuid = g_strconcat(d, "/4B20D080-1B54-4048-85B3-A6A62D165C01/mdev_type", NULL);
    g_autofree char *short_uuid = g_strconcat(d, "/4b20d080-1b54-4048-85b3/mdev_type", NULL);
    g_autofree char *good_uuid = g_strconcat(d, "/11111111-2222-3333-4444-555555555555/mdev_type", NULL);
    g_autofree char *no_type = g_strconcat(d, "/22222222-2222-3333-4444-555555555555/remove", NULL);
    AvPciDevice *dev;

    write_device(dir, d, "0x10de\n");
    av_test_symlink(dir, "sys/bus/pci/devices/0000:00:04.0", "../../../devices/pci0000:00/0000:00:04.0");
    /* Names that are not addresses, pointing anywhere. */
    av_test_symlink(dir, "sys/bus/pci/devices/0000:00:04.0x", "../../../devices/pci0000:00/0000:00:04.0");
    av_test_symlink(dir, "sys/bus/pci/devices/..hidden", "/etc");
    av_test_symlink(dir, "sys/bus/pci/devices/0000:00:1F.0", "../../../devices/pci0000:00/0000:00:04.0");
    /* A dangling device link is skipped too. */
    av_test_symlink(dir, "sys/bus/pci/devices/0000:00:05.0", "../../../devices/pci0000:00/gone");
    /* A link loop for the driver, a non-numeric group, odd virtfn links. */
    av_test_symlink(dir, "sys/devices/pci0000:00/0000:00:04.0/driver", "driver2");
    av_test_symlink(dir, "sys/devices/pci0000:00/0000:00:04.0/driver2", "driver");
    av_test_symlink(dir, "sys/devices/pci0000:00/0000:00:04.0/iommu_group", "../../../kernel/iommu_groups/abc");
    av_test_write(dir, "sys/kernel/iommu_groups/abc/devices/x", "");
    av_test_symlink(dir, "sys/devices/pci0000:00/0000:00:04.0/virtfn0", "../../../kernel");
    av_test_symlink(dir, "sys/devices/pci0000:00/0000:00:04.0/virtfnX", "../0000:00:04.0");
    av_test_symlink(dir, "sys/devices/pci0000:00/0000:00:04.0/physfn", "/");
    av_test_write(dir, "sys/devices/pci0000:00/0000:00:04.0/numa_node", "banana\n");
    av_test_write(dir, "sys/devices/pci0000:00/0000:00:04.0/driver_override", "\n");
    av_test_write(dir, "sys/devices/pci0000:00/0000:00:04.0/sriov_totalvfs", "-3\n");
    av_test_write(dir, "sys/devices/pci0000:00/0000:00:04.0/reset_method", "\n");
    /* mdev children: only a well-formed UUID with a type counts. */
    av_test_write(dir, "sys/devices/pci0000:00/0000:00:04.0/mdev_supported_types/t-1/available_instances", "2\n");
    av_test_write(dir, "sys/devices/pci0000:00/0000:00:04.0/mdev_supported_types/t-2/available_instances", "many\n");
    av_test_symlink(dir, bad_uuid, "../mdev_supported_types/t-1");
    av_test_symlink(dir, short_uuid, "../mdev_supported_types/t-1");
    av_test_symlink(dir, good_uuid, "../mdev_supported_types/t-1");
    av_test_write(dir, no_type, "");
    /* A malformed slot and USB names that are not devices. */
    av_test_write(dir, "sys/bus/pci/slots/9/address", "0000:00:04/../..\n");
    av_test_write(dir, "sys/devices/usbjunk/idVendor", "03e7\n");
    av_test_symlink(dir, "sys/bus/usb/devices/1-x", "../../../devices/usbjunk");
    av_test_symlink(dir, "sys/bus/usb/devices/1-1", "../../../devices/nowhere");
    /* NUMA directories with odd names are ignored. */
    av_test_write(dir, "sys/devices/system/node/nodeX/cpulist", "0\n");
    av_test_write(dir, "sys/devices/system/node/node1/cpulist", "2-3\n");

    host = scan_dir(dir, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(host->pci->len, ==, 1);
    dev = get_pci(host, "0000:00:04.0");
    g_assert_null(dev->driver);
    g_assert_null(dev->driver_override);
    g_assert_cmpint(dev->iommu_group, ==, -1);
    g_assert_cmpint(dev->numa_node, ==, -1);
    g_assert_null(dev->physfn);
    g_assert_cmpint(dev->vf_index, ==, -1);
    g_assert_cmpuint(dev->virtfns->len, ==, 0);
    g_assert_false(dev->sriov_capable);
    g_assert_null(dev->physical_slot);
    g_assert_nonnull(dev->reset_methods);
    g_assert_null(dev->reset_methods[0]);
    g_assert_cmpuint(dev->mdev_types->len, ==, 1);
    g_assert_cmpstr(((AvMdevType *)g_ptr_array_index(dev->mdev_types, 0))->id, ==, "t-1");
    g_assert_null(((AvMdevType *)g_ptr_array_index(dev->mdev_types, 0))->name);
    g_assert_cmpuint(dev->mdevs->len, ==, 1);
    g_assert_cmpstr(((AvMdev *)g_ptr_array_index(dev->mdevs, 0))->uuid, ==,
                    "11111111-2222-3333-4444-555555555555");
    g_assert_cmpuint(host->usb->len, ==, 0);
    g_assert_cmpuint(host->numa_nodes->len, ==, 1);
    g_assert_cmpint(((AvNumaNode *)g_ptr_array_index(host->numa_nodes, 0))->id, ==, 1);
    av_test_tmpdir_remove(dir);
}

static void
test_bad_node_cpulist(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;

    av_test_write(dir, "sys/bus/pci/devices/.keep", "");
    av_test_write(dir, "sys/devices/system/node/node0/cpulist", "0-3,x\n");
    host = scan_dir(dir, &err);
    g_assert_null(host);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_assert_true(strstr(err->message, "node0/cpulist") != NULL);
    av_test_tmpdir_remove(dir);
}

/* /sys/class/mdev_bus: the PCI parents (the A10s, sharing their types and
 * mdevs with their AvPciDevice) and the virtual mtty, sorted by name. */
static void
test_mdev_parents(void)
{
    g_autoptr(AvHost) host = scan_host("vgpu-mdev");
    static const char *const names[] = { "0000:17:00.0", "0000:98:00.0", "mtty" };
    AvMdevParent *busy, *mtty;
    AvMdevType *t;

    g_assert_cmpuint(host->mdev_parents->len, ==, 3);
    for (guint i = 0; i < 3; i++)
        g_assert_cmpstr(((AvMdevParent *)g_ptr_array_index(host->mdev_parents, i))->name, ==, names[i]);

    busy = av_host_find_mdev_parent(host, "0000:17:00.0");
    g_assert_nonnull(busy);
    g_assert_cmpstr(busy->pci_address, ==, "0000:17:00.0");
    g_assert_true(busy->pci == get_pci(host, "0000:17:00.0"));
    g_assert_true(busy->types == busy->pci->mdev_types);
    g_assert_true(busy->mdevs == busy->pci->mdevs);
    g_assert_cmpstr(busy->sysfs_path, ==, busy->pci->sysfs_path);
    g_assert_cmpint(busy->numa_node, ==, 0);
    g_assert_cmpint(av_host_find_mdev_parent(host, "0000:98:00.0")->numa_node, ==, 1);
    g_assert_true(av_host_find_mdev(host, "4b20d080-1b54-4048-85b3-a6a62d165c01") == busy);
    g_assert_null(av_host_find_mdev(host, "00000000-0000-4000-8000-000000000000"));

    mtty = av_host_find_mdev_parent(host, "mtty");
    g_assert_nonnull(mtty);
    g_assert_null(mtty->pci);
    g_assert_null(mtty->pci_address);
    g_assert_cmpstr(mtty->sysfs_path, ==, "/sys/devices/virtual/mtty/mtty");
    g_assert_cmpint(mtty->numa_node, ==, -1);
    g_assert_cmpuint(mtty->types->len, ==, 2);
    t = g_ptr_array_index(mtty->types, 0);
    g_assert_cmpstr(t->id, ==, "mtty-1");
    g_assert_cmpstr(t->name, ==, "Single port serial");
    g_assert_cmpstr(t->device_api, ==, "vfio-pci");
    g_assert_null(t->description);
    g_assert_cmpuint(t->available, ==, 24);
    t = g_ptr_array_index(mtty->types, 1);
    g_assert_cmpstr(t->id, ==, "mtty-2");
    g_assert_cmpuint(t->available, ==, 12);
    g_assert_cmpuint(mtty->mdevs->len, ==, 0);
    /* The virtual parent is no PCI device; the PCI devices keep their facts. */
    g_assert_null(av_host_find_pci(host, "mtty"));
    g_assert_cmpuint(get_pci(host, "0000:98:00.0")->mdev_types->len, ==, 6);

    /* Hosts without any parent have an empty list. */
    {
        g_autoptr(AvHost) none = scan_host("two-socket-8gpu");

        g_assert_cmpuint(none->mdev_parents->len, ==, 0);
    }
}

/* Entries of /sys/class/mdev_bus that are no safe name or dangle are left
 * out; a virtual parent with a numa_node attribute has that node; an mdev
 * under a virtual parent is read with the parent's name. */
static void
test_mdev_parents_hostile(void)
{
    g_autofree char *dir = av_test_host_copy("vgpu-mdev");
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) root = av_root_new(dir, &err);
    g_autoptr(AvHost) host = NULL;
    AvMdevParent *mtty;
    AvMdev *mdev;

    av_test_symlink(dir, "sys/class/mdev_bus/bad name", "../../devices/virtual/mtty/mtty");
    av_test_symlink(dir, "sys/class/mdev_bus/gone", "../../devices/virtual/gone/gone");
    av_test_symlink(dir, "sys/class/mdev_bus/escape", "../../../../../../../../etc");
    av_test_write(dir, "sys/devices/virtual/mtty/mtty/numa_node", "1\n");
    av_test_symlink(dir, "sys/devices/virtual/mtty/mtty/5b5e1c2e-8f3a-4d6b-9c1e-2a3b4c5d6e7f/mdev_type",
                    "../mdev_supported_types/mtty-1");
    g_assert_no_error(err);
    host = av_host_scan(root, &err);
    g_assert_no_error(err);
    for (guint i = 0; i < host->mdev_parents->len; i++) {
        const char *name = ((AvMdevParent *)g_ptr_array_index(host->mdev_parents, i))->name;

        g_assert_cmpstr(name, !=, "bad name");
        g_assert_cmpstr(name, !=, "gone");
    }
    mtty = av_host_find_mdev_parent(host, "mtty");
    g_assert_nonnull(mtty);
    g_assert_cmpint(mtty->numa_node, ==, 1);
    g_assert_cmpuint(mtty->mdevs->len, ==, 1);
    mdev = g_ptr_array_index(mtty->mdevs, 0);
    g_assert_cmpstr(mdev->parent, ==, "mtty");
    g_assert_cmpstr(mdev->type_id, ==, "mtty-1");
    /* A link that leaves the root resolves inside it (or not at all): no
     * parent reads outside the tree. */
    {
        AvMdevParent *escape = av_host_find_mdev_parent(host, "escape");

        g_assert_true(!escape || g_str_has_prefix(escape->sysfs_path, "/"));
    }
    av_test_tmpdir_remove(dir);
}

/* av_host_pci_position() of @address: "ROOT SWITCH", "-" for NULL, or
 * "unknown".  Caller frees. */
static char *
position_of(const AvHost *host, const char *address)
{
    const char *root_port = "x", *sw = "x";

    if (!av_host_pci_position(host, address, &root_port, &sw)) {
        g_assert_null(root_port);
        g_assert_null(sw);
        return g_strdup("unknown");
    }
    return g_strdup_printf("%s %s", root_port ? root_port : "-", sw ? sw : "-");
}

static void
assert_position(const AvHost *host, const char *address, const char *expected)
{
    g_autofree char *got = position_of(host, address);

    g_assert_cmpstr(got, ==, expected);
}

/* Issue 16: root ports and switches of the fake host "switches"
 * (tests/data/mkhosts.py). */
static void
test_switches_position(void)
{
    g_autoptr(AvHost) host = scan_host("switches");
    g_autofree char *dir = av_test_host_path("switches");
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) root = av_root_new(dir, &err);
    static const char *const some[] = { "0000:27:00.0", "0000:43:00.2", NULL };
    g_autoptr(AvHost) partial = NULL;
    AvPciDevice *gpu, *bridge;
    char *saved;

    /* root port > upstream > downstream > GPU: the switch is the upstream port */
    assert_position(host, "0000:13:00.0", "0000:10:01.0 0000:11:00.0");
    assert_position(host, "0000:14:00.0", "0000:10:01.0 0000:11:00.0");
    assert_position(host, "0000:23:00.0", "0000:20:01.0 0000:21:00.0");
    /* behind a nested switch: the top one counts */
    assert_position(host, "0000:27:00.0", "0000:20:01.0 0000:21:00.0");
    /* alone under its root port */
    assert_position(host, "0000:a1:00.0", "0000:a0:01.0 -");
    /* a PCIe-to-PCI bridge alone below the root port is no switch */
    assert_position(host, "0000:32:00.0", "0000:30:01.0 -");
    /* a downstream port itself: only one bridge between it and the root
     * port, as for a function behind a PCIe-to-PCI bridge */
    assert_position(host, "0000:12:00.0", "0000:10:01.0 -");
    assert_position(host, "0000:11:00.0", "0000:10:01.0 -");
    /* on a root bus: no root port */
    assert_position(host, "0000:10:01.0", "- -");
    assert_position(host, "0000:00:00.0", "- -");
    /* a PF and its VFs behind a switch */
    assert_position(host, "0000:43:00.0", "0000:40:01.0 0000:41:00.0");
    assert_position(host, "0000:43:00.1", "0000:40:01.0 0000:41:00.0");
    assert_position(host, "0000:43:00.2", "0000:40:01.0 0000:41:00.0");
    /* unknown devices, and NULL outputs accepted */
    assert_position(host, "0000:99:00.0", "unknown");
    assert_position(host, "not-an-address", "unknown");
    g_assert_true(av_host_pci_position(host, "0000:13:00.0", NULL, NULL));

    /* The hook's partial scan holds the bridges above what it asks for. */
    g_assert_no_error(err);
    partial = av_host_scan_devices(root, some, FALSE, &err);
    g_assert_no_error(err);
    assert_position(partial, "0000:27:00.0", "0000:20:01.0 0000:21:00.0");
    assert_position(partial, "0000:43:00.2", "0000:40:01.0 0000:41:00.0");
    assert_position(partial, "0000:13:00.0", "unknown");

    /* A bridge of the chain missing, or a loop: unknown. */
    gpu = get_pci(host, "0000:13:00.0");
    saved = gpu->parent_bridge;
    gpu->parent_bridge = g_strdup("0000:12:07.0");
    assert_position(host, "0000:13:00.0", "unknown");
    g_free(gpu->parent_bridge);
    gpu->parent_bridge = saved;
    bridge = get_pci(host, "0000:10:01.0");
    bridge->parent_bridge = g_strdup("0000:12:00.0");
    assert_position(host, "0000:13:00.0", "unknown");
    g_clear_pointer(&bridge->parent_bridge, g_free);
    assert_position(host, "0000:13:00.0", "0000:10:01.0 0000:11:00.0");
}

/* av_host_find_pci() (a binary search) finds every function of a scan and
 * nothing else. */
/* av_pci_address_key(): parsed once, the order of av_pci_address_compare():
 * valid addresses by number (domains past 0xffff too), then the invalid
 * ones by strcmp() (NULL first, as g_strcmp0() puts it). */
static void
test_address_key(void)
{
    static const char *const sorted[] = {
        "0000:00:00.0", "0000:00:00.7", "0000:00:01.0", "0000:00:1f.7", "0000:01:00.0", "0000:ff:1f.7",
        "0001:00:00.0", "ffff:ff:1f.7", "10000:00:00.0", "10000:e1:00.0", "fffffffe:ff:1f.7",
        "ffffffff:00:00.0", "ffffffff:ff:1f.7",
        /* invalid: after every valid one, by strcmp() */
        NULL, "", "00000:00:00.0", "0000:00:00.8", "0000:3B:00.0", "100000000:00:00.0", "zz",
    };
    guint n = G_N_ELEMENTS(sorted);
    g_autofree guint64 *keys = g_new(guint64, n);

    for (guint i = 0; i < n; i++) {
        keys[i] = av_pci_address_key(sorted[i]);
        g_assert_cmpuint(keys[i], !=, 0);
        if (av_pci_address_is_valid(sorted[i]))
            g_assert_cmpuint(keys[i], <, AV_PCI_ADDRESS_KEY_INVALID);
        else
            g_assert_cmpuint(keys[i], ==, AV_PCI_ADDRESS_KEY_INVALID);
    }
    for (guint i = 0; i < n; i++) {
        for (guint j = 0; j < n; j++) {
            int k = av_pci_address_key_compare(keys[i], sorted[i], keys[j], sorted[j]);
            int c = av_pci_address_compare(sorted[i], sorted[j]);

            if ((i < j && k >= 0) || (i == j && k != 0) || (i > j && k <= 0) || (k > 0) != (c > 0) ||
                (k < 0) != (c < 0))
                g_error("'%s' and '%s': keys compare as %d, addresses as %d", sorted[i] ? sorted[i] : "(null)",
                        sorted[j] ? sorted[j] : "(null)", k, c);
        }
    }
    /* Equal keys: the same string, for valid addresses. */
    g_assert_cmpuint(av_pci_address_key("10000:e1:1c.5"), ==, av_pci_address_key("10000:e1:1c.5"));
    g_assert_cmpuint(av_pci_address_key("0000:00:00.0"), ==, AV_PCI_ADDRESS_KEY_VALID);
    g_assert_cmpuint(av_pci_address_key("10000:e1:1c.5"), ==,
                     AV_PCI_ADDRESS_KEY_VALID | (guint64)0x10000 << 16 | 0xe1 << 8 | 0x1c << 3 | 5);
}

/* av_host_find_pci() on a host built by hand: some devices without keys
 * (computed at each lookup), some with, invalid addresses last. */
static void
test_find_pci_keys(void)
{
    static const char *const addresses[] = {
        "0000:00:01.0", "0000:3b:00.0", "0000:3b:00.1", "ffff:00:00.0", "10000:e1:00.0", "ffffffff:ff:1f.7",
        "0000:3B:00.0", "bogus",
    };
    g_autoptr(AvHost) host = g_new0(AvHost, 1);

    host->pci = g_ptr_array_new_with_free_func((GDestroyNotify)av_pci_device_free);
    for (guint i = 0; i < G_N_ELEMENTS(addresses); i++) {
        AvPciDevice *dev = g_new0(AvPciDevice, 1);

        dev->address = g_strdup(addresses[i]);
        if (i % 2 == 0)
            dev->address_key = av_pci_address_key(addresses[i]);
        g_ptr_array_add(host->pci, dev);
    }
    for (guint i = 0; i < G_N_ELEMENTS(addresses); i++) {
        const AvPciDevice *dev = av_host_find_pci(host, addresses[i]);

        g_assert_nonnull(dev);
        g_assert_cmpstr(dev->address, ==, addresses[i]);
    }
    g_assert_null(av_host_find_pci(host, "0000:3b:00.2"));
    g_assert_null(av_host_find_pci(host, "10000:e1:00.1"));
    g_assert_null(av_host_find_pci(host, "bogus2"));
}

static void
test_find_pci(void)
{
    static const char *const names[] = { "switches", "two-socket-8gpu", "sriov-fpga-qat", "fpga-regions" };

    for (guint n = 0; n < G_N_ELEMENTS(names); n++) {
        g_autoptr(AvHost) host = scan_host(names[n]);

        for (guint i = 0; i < host->pci->len; i++) {
            AvPciDevice *dev = g_ptr_array_index(host->pci, i);

            g_assert_true(av_host_find_pci(host, dev->address) == dev);
        }
        g_assert_null(av_host_find_pci(host, "0000:ff:1f.7"));
        g_assert_null(av_host_find_pci(host, "0000:00:00.00"));
        g_assert_null(av_host_find_pci(host, "0000:00:00"));
        g_assert_null(av_host_find_pci(host, "00000:00:00.0"));
        g_assert_null(av_host_find_pci(host, ""));
        g_assert_null(av_host_find_pci(host, NULL));
    }
    g_assert_null(av_host_find_pci(NULL, "0000:00:00.0"));
}

/* ---- health: AER counters and link (issue 17) ---- */

static gboolean
health_of(const AvRoot *root, const char *address, AvPciHealth *ret, GError **error)
{
    return av_pci_health_read(root, address, ret, error);
}

/* The fake hosts' devices as tests/data/mkhosts.py gives them AER files
 * and links. */
static void
test_health_hosts(void)
{
    g_autofree char *two = av_test_host_path("two-socket-8gpu");
    g_autofree char *fpga = av_test_host_path("sriov-fpga-qat");
    g_autoptr(AvRoot) root = av_root_new(two, NULL);
    g_autoptr(AvRoot) froot = av_root_new(fpga, NULL);
    g_autoptr(GError) err = NULL;
    AvPciHealth h = { 0 };

    /* an A100 at full width */
    g_assert_true(health_of(root, "0000:17:00.0", &h, &err));
    g_assert_no_error(err);
    g_assert_true(h.aer);
    g_assert_cmpuint(h.correctable + h.nonfatal + h.fatal, ==, 0);
    g_assert_true(h.link);
    g_assert_cmpfloat(h.speed_gts, ==, 16.0);
    g_assert_cmpfloat(h.max_speed_gts, ==, 16.0);
    g_assert_cmpuint(h.width, ==, 16);
    g_assert_cmpuint(h.max_width, ==, 16);
    g_assert_null(h.link_from);
    g_assert_false(av_pci_health_link_degraded(&h, TRUE));

    /* x8 of x16: degraded, with or without the speed */
    g_assert_true(health_of(root, "0000:31:00.0", &h, &err));
    g_assert_cmpuint(h.width, ==, 8);
    g_assert_true(av_pci_health_link_degraded(&h, FALSE));
    g_assert_true(av_pci_health_link_degraded(&h, TRUE));

    /* correctable errors counted from TOTAL_ERR_COR */
    g_assert_true(health_of(root, "0000:4b:00.0", &h, &err));
    g_assert_cmpuint(h.correctable, ==, 3);
    g_assert_cmpuint(h.fatal, ==, 0);

    /* an A6000 idling at 2.5 of 16 GT/s, without AER: degraded only when
     * the speed counts */
    g_assert_true(health_of(root, "0000:98:00.0", &h, &err));
    g_assert_false(h.aer);
    g_assert_true(h.link);
    g_assert_cmpfloat(h.speed_gts, ==, 2.5);
    g_assert_false(av_pci_health_link_degraded(&h, FALSE));
    g_assert_true(av_pci_health_link_degraded(&h, TRUE));

    /* the chipset's USB controller: neither reported */
    g_assert_true(health_of(root, "0000:00:14.0", &h, &err));
    g_assert_false(h.aer);
    g_assert_false(h.link);
    g_assert_false(av_pci_health_link_degraded(&h, TRUE));

    /* an older kernel's "8 GT/s" */
    g_assert_true(health_of(froot, "0000:3b:00.0", &h, &err));
    g_assert_no_error(err);
    g_assert_cmpfloat(h.speed_gts, ==, 8.0);
    g_assert_cmpuint(h.max_width, ==, 16);

    /* no such device, no such address */
    g_assert_false(health_of(root, "0000:99:00.0", &h, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(err->message, "0000:99:00.0"));
    g_clear_error(&err);
    g_assert_false(health_of(root, "../../etc", &h, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    av_pci_health_clear(&h);
}

typedef struct {
    const char *file;
    const char *contents;
    const char *error;          /* in the message; NULL: reads */
} HealthFileCase;

/* A VF reads its PF's link; hostile and odd files on a tree built here. */
static void
test_health_files(void)
{
    static const char dev[] = "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0";
    static const char vf[] = "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.1";
    static const HealthFileCase cases[] = {
        { "aer_dev_fatal", "Undefined 0\nDLP 2\nTOTAL_ERR_FATAL 2\n", NULL },
        { "aer_dev_fatal", "Undefined 0\nDLP 2\n", "has no TOTAL_ERR_FATAL line" },
        { "aer_dev_fatal", "", "has no TOTAL_ERR_FATAL line" },
        { "aer_dev_fatal", "Undefined 0\nTOTAL_ERR_FATAL -1\n", "line 2 is not 'NAME COUNT'" },
        { "aer_dev_fatal", "Undefined 0\nTOTAL_ERR_FATAL 1.5\n", "line 2" },
        { "aer_dev_fatal", "TOTAL_ERR_FATAL 99999999999999999999999\n", "line 1" },
        { "aer_dev_fatal", "TOTAL_ERR_FATAL 1 2\n", "line 1" },
        { "aer_dev_fatal", " 1\n", "line 1" },
        { "current_link_speed", "Unknown", NULL },
        { "current_link_speed", "Unknown speed", NULL },
        { "current_link_speed", "fast", "is not a link speed" },
        { "current_link_speed", "16.0 GB/s", "is not a link speed" },
        { "current_link_speed", "1.2.3 GT/s", "is not a link speed" },
        { "current_link_speed", " GT/s", "is not a link speed" },
        { "current_link_width", "x16", "is not a lane count" },
        { "current_link_width", "-1", "is not a lane count" },
        { "current_link_width", "65", "is not a lane count" },
        { "current_link_width", "0", NULL },
    };
    g_autoptr(GError) err = NULL;
    AvPciHealth h = { 0 };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *dir = av_test_tmpdir();
        g_autoptr(AvRoot) root = NULL;
        g_autofree char *target = NULL;
        g_autofree char *vf_target = NULL;
        g_autofree char *file = g_build_filename(dev, cases[i].file, NULL);
        static const char *const aer_files[] = { "aer_dev_correctable", "aer_dev_nonfatal", "aer_dev_fatal" };
        static const char *const totals[] = { "TOTAL_ERR_COR", "TOTAL_ERR_NONFATAL", "TOTAL_ERR_FATAL" };

        for (guint a = 0; a < 3; a++) {
            g_autofree char *rel = g_build_filename(dev, aer_files[a], NULL);
            g_autofree char *text = g_strdup_printf("X 0\n%s 0\n", totals[a]);

            av_test_write(dir, rel, text);
        }
        {
            g_autofree char *s = g_build_filename(dev, "current_link_speed", NULL);
            g_autofree char *m = g_build_filename(dev, "max_link_speed", NULL);
            g_autofree char *w = g_build_filename(dev, "current_link_width", NULL);
            g_autofree char *mw = g_build_filename(dev, "max_link_width", NULL);

            av_test_write(dir, s, "8.0 GT/s PCIe\n");
            av_test_write(dir, m, "16.0 GT/s PCIe\n");
            av_test_write(dir, w, "4\n");
            av_test_write(dir, mw, "16\n");
        }
        {
            g_autofree char *vendor = g_build_filename(vf, "vendor", NULL);

            av_test_write(dir, vendor, "0x8086\n");
        }
        target = g_strdup_printf("../../../%s", dev + strlen("sys/"));
        av_test_symlink(dir, "sys/bus/pci/devices/0000:01:00.0", target);
        vf_target = g_strdup_printf("../../../%s", vf + strlen("sys/"));
        av_test_symlink(dir, "sys/bus/pci/devices/0000:01:00.1", vf_target);
        {
            g_autofree char *physfn = g_build_filename(vf, "physfn", NULL);

            av_test_symlink(dir, physfn, "../0000:01:00.0");
        }
        av_test_write(dir, file, cases[i].contents);
        root = av_root_new(dir, &err);
        g_assert_no_error(err);

        if (cases[i].error) {
            g_assert_false(health_of(root, "0000:01:00.0", &h, &err));
            g_assert_nonnull(err);
            g_test_message("%s", err->message);
            g_assert_nonnull(strstr(err->message, cases[i].error));
            g_assert_nonnull(strstr(err->message, cases[i].file));
            g_assert_false(h.aer || h.link);
            g_clear_error(&err);
            /* the VF's link is its PF's: the same file fails it */
            if (g_str_has_prefix(cases[i].file, "current_link")) {
                g_assert_false(health_of(root, "0000:01:00.1", &h, &err));
                g_assert_nonnull(strstr(err->message, cases[i].file));
                g_clear_error(&err);
            }
        } else {
            g_assert_true(health_of(root, "0000:01:00.0", &h, &err));
            g_assert_no_error(err);
            g_assert_true(h.aer);
            g_assert_true(h.link);
            if (i == 0)
                g_assert_cmpuint(h.fatal, ==, 2);
            if (g_str_has_prefix(cases[i].contents, "Unknown"))
                g_assert_cmpfloat(h.speed_gts, ==, 0);
            /* width 0: the link is down; in doubt, degraded */
            if (g_str_equal(cases[i].contents, "0")) {
                g_assert_true(av_pci_health_link_degraded(&h, FALSE));
                g_assert_cmpstr(av_pci_health_link_problem(&h, FALSE), ==, "link down");
            }
            /* speed Unknown: degraded when the speed is judged */
            if (g_str_has_prefix(cases[i].contents, "Unknown") && g_str_equal(cases[i].file, "current_link_speed"))
                g_assert_cmpstr(av_pci_health_link_problem(&h, TRUE), ==, "speed unknown");
            /* the VF: no AER of its own, so its PF's (named), and the PF's link */
            g_assert_true(health_of(root, "0000:01:00.1", &h, &err));
            g_assert_no_error(err);
            g_assert_true(h.aer);
            g_assert_cmpstr(h.aer_from, ==, "0000:01:00.0");
            g_assert_true(h.link);
            g_assert_cmpstr(h.link_from, ==, "0000:01:00.0");
            g_assert_cmpuint(h.max_width, ==, 16);
        }
        av_pci_health_clear(&h);
        /* one or two AER files of three: refused */
        if (i == 0) {
            g_autofree char *rel = g_build_filename(dev, "aer_dev_nonfatal", NULL);
            g_autofree char *host = g_build_filename(dir, rel, NULL);

            g_assert_cmpint(unlink(host), ==, 0);
            g_assert_false(health_of(root, "0000:01:00.0", &h, &err));
            g_assert_nonnull(strstr(err->message, "only 2 of the files"));
            g_clear_error(&err);
        }
        av_test_tmpdir_remove(dir);
    }
}

/* A VF's index is the first of its PF's virtfnN links (in the listing's
 * order) that leads to it, whether the scan read the PF before the VF (a
 * host scan: the PF's links read once) or not (one device, or a VF queued
 * before its PF). */
static void
test_vf_index_order(void)
{
    g_autofree char *dir = av_test_host_copy("sriov-fpga-qat");
    const char *pf_dir = "sys/devices/pci0000:6b/0000:6b:00.0";
    g_autofree char *link = g_strdup_printf("%s/virtfn10", pf_dir);
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvHost) partial = NULL;
    g_autoptr(AvPciDevice) one = NULL;
    const char *some[] = { "0000:6b:00.3", "0000:6b:00.0", NULL };

    /* A second link to the VF of virtfn2: "virtfn10" lists first. */
    av_test_symlink(dir, link, "../0000:6b:00.3");
    root = av_root_new(dir, &err);
    g_assert_no_error(err);

    host = av_host_scan(root, &err);
    g_assert_no_error(err);
    g_assert_cmpint(get_pci(host, "0000:6b:00.1")->vf_index, ==, 0);
    g_assert_cmpint(get_pci(host, "0000:6b:00.3")->vf_index, ==, 10);
    g_assert_cmpint(get_pci(host, "0000:6b:00.4")->vf_index, ==, 3);

    one = av_pci_device_scan(root, "0000:6b:00.3", &err);
    g_assert_no_error(err);
    g_assert_cmpint(one->vf_index, ==, 10);

    partial = av_host_scan_devices(root, some, FALSE, &err);
    g_assert_no_error(err);
    g_assert_cmpint(get_pci(partial, "0000:6b:00.3")->vf_index, ==, 10);
    av_test_tmpdir_remove(dir);
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);

    g_test_add_func("/pci/cpulist/good", test_cpulist_good);
    g_test_add_func("/pci/cpulist/bad", test_cpulist_bad);
    g_test_add_func("/pci/address/valid", test_address_is_valid);
    g_test_add_func("/pci/config/dsn", test_dsn);
    g_test_add_func("/pci/host/two-socket-8gpu/gpus", test_two_socket_gpus);
    g_test_add_func("/pci/host/two-socket-8gpu/host-devices", test_two_socket_host_devices);
    g_test_add_func("/pci/host/two-socket-8gpu/numa-usb", test_two_socket_numa_usb);
    g_test_add_func("/pci/host/two-socket-8gpu/device-scan", test_device_scan);
    g_test_add_func("/pci/host/sriov-fpga-qat", test_sriov_fpga_qat);
    g_test_add_func("/pci/host/vgpu-mdev", test_vgpu_mdev);
    g_test_add_func("/pci/host/vgpu-mdev/mdev-parents", test_mdev_parents);
    g_test_add_func("/pci/tree/mdev-parents-hostile", test_mdev_parents_hostile);
    g_test_add_func("/pci/host/trap-shared-group", test_trap_shared_group);
    g_test_add_func("/pci/host/switches/position", test_switches_position);
    g_test_add_func("/pci/host/find", test_find_pci);
    g_test_add_func("/pci/address/key", test_address_key);
    g_test_add_func("/pci/host/find-keys", test_find_pci_keys);
    g_test_add_func("/pci/health/hosts", test_health_hosts);
    g_test_add_func("/pci/health/files", test_health_files);
    g_test_add_func("/pci/tree/not-sysfs", test_not_a_sys_tree);
    g_test_add_func("/pci/tree/numa-fallback", test_numa_fallback);
    g_test_add_func("/pci/tree/unreadable-vendor", test_unreadable_vendor);
    g_test_add_func("/pci/tree/short-config", test_short_config);
    g_test_add_func("/pci/tree/vmd-domain", test_vmd_domain);
    g_test_add_func("/pci/tree/root-containment", test_root_containment);
    g_test_add_func("/pci/tree/hostile", test_hostile_tree);
    g_test_add_func("/pci/tree/vf-index-order", test_vf_index_order);
    g_test_add_func("/pci/tree/bad-node-cpulist", test_bad_node_cpulist);
    return g_test_run();
}
