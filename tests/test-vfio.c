/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: vfio binding, IOMMU group safety and mdevs (src/vfio),
 * on private copies of the fake hosts of tests/data/mkhosts.py with the
 * emulated kernel of av-kernel.c behind the operations table, and on small
 * trees built here. */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "av-test.h"
#include "doubles/av-doubles.h"
#include "pci/av-pci.h"
#include "policy/av-policy.h"
#include "util/av-error.h"
#include "vfio/av-bar-sizes.h"
#include "vfio/av-kernel.h"
#include "vfio/av-vfio.h"
#include "vfio/av-vgpu.h"

#define A100 "0000:17:00.0"             /* two-socket-8gpu, group 40, nvidia */
#define A6000 "0000:98:00.0"            /* two-socket-8gpu, group 44, with its audio .1 */
#define A6000_AUDIO "0000:98:00.1"
#define A6000_VFIO "0000:b1:00.0"       /* two-socket-8gpu, group 45, already on vfio-pci */
#define TRAP_GPU "0000:04:00.0"         /* trap-shared-group, group 12 with the NIC */
#define A10_NODE0 "0000:17:00.0"        /* vgpu-mdev, runs one nvidia-590 */
#define A10_NODE1 "0000:98:00.0"        /* vgpu-mdev, no mdev */
#define EXISTING_MDEV "4b20d080-1b54-4048-85b3-a6a62d165c01"
#define NEW_MDEV "0b6a5a8e-7c1d-4f6e-9a53-2f1c3d4e5f60"

#define POLICY_A100 \
    "{\"profiles\": [{\"name\": \"gpu-a100\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x20f1\"}," \
    " \"attach\": \"vfio-pci\", \"granularity\": \"card\"}]}"
#define POLICY_A6000_CARD \
    "{\"profiles\": [{\"name\": \"gpu-a6000\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x2230\"}," \
    " \"companions\": [{\"class\": \"0x0403\"}], \"attach\": \"vfio-pci\", \"granularity\": \"card\"}]}"
/* Card granularity alone does not make the card's other functions the guest's. */
#define POLICY_A6000_NO_COMPANIONS \
    "{\"profiles\": [{\"name\": \"gpu-a6000\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x2230\"}," \
    " \"attach\": \"vfio-pci\", \"granularity\": \"card\"}]}"
/* Companions named by ids, and a class that is not the audio's. */
#define POLICY_A6000_BY_IDS \
    "{\"profiles\": [{\"name\": \"gpu-a6000\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x2230\"}," \
    " \"companions\": [{\"vendor\": \"0x10de\", \"device\": [\"0x1aef\"]}, {\"class\": \"0x0c03\"}]}]}"
#define POLICY_A6000_OTHER_CLASS \
    "{\"profiles\": [{\"name\": \"gpu-a6000\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x2230\"}," \
    " \"companions\": [{\"class\": \"0x0c03\"}, {\"vendor\": \"0x10de\", \"device\": \"0x1aee\"}]}]}"
/* A profile naming even the NIC's class among the companions. */
#define POLICY_A6000_GREEDY \
    "{\"profiles\": [{\"name\": \"gpu-a6000\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x2230\"}," \
    " \"companions\": [{\"class\": \"0x0403\"}, {\"class\": \"0x0200\"}]}]}"
#define SAME_SLOT_GPU "0000:06:00.0"      /* trap-shared-group: .1 is the host's E810 (ice), .2 the GPU's audio */
#define SAME_SLOT_NIC "0000:06:00.1"
#define POLICY_A6000_FUNCTION \
    "{\"profiles\": [{\"name\": \"gpu-a6000\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x2230\"}," \
    " \"attach\": \"vfio-pci\", \"granularity\": \"function\"}]}"

/* --- helpers ---------------------------------------------------------------- */

/* A private copy of a fake host with its root and a scan. */
typedef struct {
    char *dir;
    AvRoot *root;
    const AvKernelOps *ops;
} Fixture;

static void
fixture_open(Fixture *f, const char *host)
{
    g_autoptr(GError) err = NULL;

    f->dir = av_test_host_copy(host);
    f->root = av_root_new(f->dir, &err);
    g_assert_no_error(err);
    f->ops = av_kernel_ops_for(f->root);
    g_assert_true(f->ops == &av_kernel_ops_fake);
}

static void
fixture_close(Fixture *f)
{
    av_root_free(f->root);
    av_test_tmpdir_remove(f->dir);
    g_free(f->dir);
}

static AvHost *
scan(const AvRoot *root)
{
    g_autoptr(GError) err = NULL;
    AvHost *host = av_host_scan(root, &err);

    g_assert_no_error(err);
    g_assert_nonnull(host);
    return host;
}

static AvPolicy *
policy_of(const char *json)
{
    g_autoptr(GError) err = NULL;
    AvPolicy *policy = av_policy_new();

    av_policy_add_data(policy, "test.json", json, strlen(json), &err);
    g_assert_no_error(err);
    return policy;
}

static AvPciDevice *
get_pci(const AvHost *host, const char *address)
{
    AvPciDevice *dev = av_host_find_pci(host, address);

    if (!dev)
        g_error("no PCI device %s in the scan", address);
    return dev;
}

/* The driver of @address as the tree says now, or NULL. */
static char *
driver_of(const AvRoot *root, const char *address)
{
    g_autofree char *link = av_sys_path("bus/pci/devices/%s/driver", address);
    char *name = NULL;

    if (av_root_link_name(root, link, &name) < 0)
        return NULL;
    return name;
}

static char *
attr(const AvRoot *root, const char *address, const char *name)
{
    g_autofree char *path = av_sys_path("bus/pci/devices/%s/%s", address, name);
    char *value = NULL;

    g_assert_cmpint(av_root_read_attr(root, path, &value), ==, 0);
    return value;
}

static char *
override_of(const AvRoot *root, const char *address)
{
    return attr(root, address, "driver_override");
}

static gboolean
sys_exists(const AvRoot *root, const char *rel)
{
    g_autofree char *path = av_sys_path("%s", rel);

    return av_root_exists(root, path);
}

static gboolean
group_node_exists(const AvRoot *root, int group)
{
    g_autofree char *path = av_dev_path("vfio/%d", group);

    return av_root_exists(root, path);
}

/* The A100 as the host had it: on nvidia, no driver_override, linked from
 * nvidia's directory and not from vfio-pci's, and no /dev/vfio/40. */
static void
assert_a100_home(const AvRoot *root)
{
    g_autofree char *drv = driver_of(root, A100);
    g_autofree char *ovr = override_of(root, A100);

    g_assert_cmpstr(drv, ==, "nvidia");
    g_assert_cmpstr(ovr, ==, "(null)");
    g_assert_true(sys_exists(root, "bus/pci/drivers/nvidia/" A100));
    g_assert_false(sys_exists(root, "bus/pci/drivers/vfio-pci/" A100));
    g_assert_false(group_node_exists(root, 40));
}

static guint64
available(const AvRoot *root, const char *parent, const char *type)
{
    g_autofree char *path = av_sys_path("bus/pci/devices/%s/mdev_supported_types/%s/available_instances",
                                        parent, type);
    guint64 n = 0;

    g_assert_cmpint(av_root_read_uint(root, path, 10, &n), ==, 0);
    return n;
}

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
assert_message_has(const GError *err, const char *needle)
{
    g_assert_nonnull(err);
    if (!strstr(err->message, needle))
        g_error("the message \"%s\" does not contain \"%s\"", err->message, needle);
}

/* An operations table that records writes and performs none: proof that
 * bad input is refused before any path is built or written. */
static GPtrArray *recorded_writes;

static int
record_write(const AvRoot *root, const char *path, const char *value)
{
    g_ptr_array_add(recorded_writes, g_strdup_printf("%s=%s", path, value));
    return -EPERM;
}

static const AvKernelOps record_ops = { .name = "record", .write = record_write };

/* --- names ------------------------------------------------------------------ */

static void
test_uuid_valid(void)
{
    g_assert_true(av_uuid_is_valid(EXISTING_MDEV));
    g_assert_true(av_uuid_is_valid("00000000-0000-0000-0000-000000000000"));
    g_assert_false(av_uuid_is_valid(NULL));
    g_assert_false(av_uuid_is_valid(""));
    g_assert_false(av_uuid_is_valid("4B20D080-1B54-4048-85B3-A6A62D165C01"));
    g_assert_false(av_uuid_is_valid("4b20d080-1b54-4048-85b3-a6a62d165c0"));
    g_assert_false(av_uuid_is_valid("4b20d080-1b54-4048-85b3-a6a62d165c011"));
    g_assert_false(av_uuid_is_valid("4b20d0801b544048-85b3-a6a62d165c01xx"));
    g_assert_false(av_uuid_is_valid("4b20d080-1b54-4048-85b3-a6a62d165c0g"));
    g_assert_false(av_uuid_is_valid("../../../../../../../../../etc/passw"));
    g_assert_false(av_uuid_is_valid("{4b20d080-1b54-4048-85b3-a6a62d165c}"));

    g_assert_true(av_mdev_type_id_is_valid("nvidia-35"));
    g_assert_true(av_mdev_type_id_is_valid("i915-GVTg_V5_4"));
    g_assert_true(av_mdev_type_id_is_valid("mtty-2"));
    g_assert_false(av_mdev_type_id_is_valid(NULL));
    g_assert_false(av_mdev_type_id_is_valid(""));
    g_assert_false(av_mdev_type_id_is_valid("."));
    g_assert_false(av_mdev_type_id_is_valid(".."));
    g_assert_false(av_mdev_type_id_is_valid("a/b"));
    g_assert_false(av_mdev_type_id_is_valid("mtty 2"));
    g_assert_false(av_mdev_type_id_is_valid("mtty-2\n"));
    g_assert_true(av_driver_name_is_valid("snd_hda_intel"));
    g_assert_false(av_driver_name_is_valid("../vfio-pci"));
}

static void
test_invalid_input(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) root = av_root_new(dir, &err);
    g_autofree char *orig = NULL;
    g_autofree char *parent = NULL;
    const char *bad_addresses[] = {
        "", "../../../etc", "0000:17:00.0/../../x", "0000:17:00.8", "0000:17:20.0",
        "0000:17:00.0\n", "0000:1G:00.0", "0000:17:00.A", "17:00.0", NULL,
    };
    const char *bad_uuids[] = { "", "..", "4B20D080-1B54-4048-85B3-A6A62D165C01",
                                "4b20d080-1b54-4048-85b3-a6a62d165c01/..", NULL };

    g_assert_no_error(err);
    recorded_writes = g_ptr_array_new_with_free_func(g_free);
    /* The tree is empty: any path built would give NOT_FOUND, not INVALID_INPUT. */
    for (guint i = 0; bad_addresses[i]; i++) {
        g_assert_false(av_vfio_bind(root, &record_ops, bad_addresses[i], NULL, &orig, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_clear_error(&err);
        g_assert_false(av_vfio_restore(root, &record_ops, bad_addresses[i], "nvidia", &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_clear_error(&err);
        /* An mdev parent is a name of /sys/class/mdev_bus, not only a PCI
         * address: names that are safe in a path ("0000:17:00.8") are looked
         * up and not found, the others refused before any path is built. */
        g_assert_false(av_mdev_create(root, &record_ops, bad_addresses[i], "nvidia-35", NEW_MDEV, &err));
        if (av_mdev_parent_name_is_valid(bad_addresses[i]))
            g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
        else
            g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_clear_error(&err);
    }
    {
        const char *bad_parents[] = { "", ".", "..", "mtty/..", "../mtty", "mtty\n", "m tty", NULL };
        g_autofree char *long_name = g_strnfill(65, 'm');

        for (guint i = 0; bad_parents[i]; i++) {
            g_assert_false(av_mdev_parent_name_is_valid(bad_parents[i]));
            g_assert_false(av_mdev_create(root, &record_ops, bad_parents[i], "mtty-2", NEW_MDEV, &err));
            g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
            g_clear_error(&err);
        }
        g_assert_false(av_mdev_parent_name_is_valid(long_name));
        g_assert_false(av_mdev_parent_name_is_valid(NULL));
        g_assert_true(av_mdev_parent_name_is_valid("mtty"));
        g_assert_true(av_mdev_parent_name_is_valid("matrix"));
        g_assert_true(av_mdev_parent_name_is_valid("0.0.0313"));
        g_assert_true(av_mdev_parent_name_is_valid("0000:17:00.0"));
    }
    g_assert_cmpuint(recorded_writes->len, ==, 0);
    g_assert_false(av_vfio_restore(root, &record_ops, A100, "../../../../tmp/x", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    g_assert_false(av_vfio_restore(root, &record_ops, A100, "", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    for (guint i = 0; bad_uuids[i]; i++) {
        g_assert_false(av_mdev_create(root, &record_ops, A10_NODE0, "nvidia-590", bad_uuids[i], &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_clear_error(&err);
        g_assert_false(av_mdev_remove(root, &record_ops, bad_uuids[i], &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_clear_error(&err);
    }
    g_assert_false(av_mdev_remove(root, &record_ops, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    g_assert_false(av_mdev_create(root, &record_ops, A10_NODE0, "../nvidia-590", NEW_MDEV, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    g_assert_false(av_mdev_create(root, &record_ops, A10_NODE0, "..", NEW_MDEV, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    g_assert_false(av_vfio_wait_group_node(root, -1, 0, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    g_assert_cmpuint(recorded_writes->len, ==, 0);

    /* A valid address on an empty tree: not found, still nothing written. */
    g_assert_false(av_vfio_bind(root, &record_ops, A100, NULL, &orig, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_clear_error(&err);
    g_assert_cmpuint(recorded_writes->len, ==, 0);
    g_assert_null(orig);
    g_assert_null(parent);

    g_clear_pointer(&recorded_writes, g_ptr_array_unref);
    av_test_tmpdir_remove(dir);
}

static void
test_ops_for(void)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) real = av_root_new("/", &err);
    g_autofree char *dir = av_test_tmpdir();
    g_autoptr(AvRoot) fake = av_root_new(dir, &err);

    g_assert_no_error(err);
    /* Only compared: nothing is ever written on this machine's /sys. */
    g_assert_true(av_kernel_ops_for(real) == &av_kernel_ops_real);
    g_assert_cmpstr(av_kernel_ops_for(real)->name, ==, "real");
    g_assert_true(av_kernel_ops_for(fake) == &av_kernel_ops_fake);
    g_assert_cmpstr(av_kernel_ops_for(fake)->name, ==, "fake");
    av_test_tmpdir_remove(dir);
}

/* --- binding ---------------------------------------------------------------- */

static void
test_bind_restore_a100(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autofree char *orig = NULL;
    g_autofree char *drv = NULL;
    g_autofree char *ovr = NULL;
    g_autoptr(AvPciDevice) dev = NULL;

    fixture_open(&f, "two-socket-8gpu");
    drv = driver_of(f.root, A100);
    g_assert_cmpstr(drv, ==, "nvidia");
    g_clear_pointer(&drv, g_free);
    g_assert_false(group_node_exists(f.root, 40));

    g_assert_true(av_vfio_bind(f.root, f.ops, A100, NULL, &orig, &err));
    g_assert_no_error(err);
    g_assert_cmpstr(orig, ==, "nvidia");
    drv = driver_of(f.root, A100);
    g_assert_cmpstr(drv, ==, "vfio-pci");
    ovr = override_of(f.root, A100);
    g_assert_cmpstr(ovr, ==, "vfio-pci");
    g_assert_true(sys_exists(f.root, "bus/pci/drivers/vfio-pci/" A100));
    g_assert_false(sys_exists(f.root, "bus/pci/drivers/nvidia/" A100));
    g_assert_true(sys_exists(f.root, "bus/pci/drivers/nvidia/0000:31:00.0"));
    g_assert_true(group_node_exists(f.root, 40));
    g_assert_true(av_vfio_wait_group_node(f.root, 40, 1000, &err));
    g_assert_no_error(err);
    dev = av_pci_device_scan(f.root, A100, &err);
    g_assert_no_error(err);
    g_assert_cmpstr(dev->driver, ==, "vfio-pci");
    g_assert_cmpstr(dev->driver_override, ==, "vfio-pci");

    g_assert_true(av_vfio_restore(f.root, f.ops, A100, orig, &err));
    g_assert_no_error(err);
    assert_a100_home(f.root);
    g_assert_false(av_vfio_wait_group_node(f.root, 40, 20, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    assert_message_has(err, "vfio/40");
    g_clear_error(&err);

    /* Restoring again is harmless: it is on its driver already. */
    g_assert_true(av_vfio_restore(f.root, f.ops, A100, "nvidia", &err));
    g_assert_no_error(err);
    fixture_close(&f);
}

static void
test_bind_already_vfio(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    char *orig = (char *)"untouched";
    g_autofree char *drv = NULL;

    fixture_open(&f, "two-socket-8gpu");
    g_assert_true(group_node_exists(f.root, 45));
    g_assert_true(av_vfio_bind(f.root, f.ops, A6000_VFIO, NULL, &orig, &err));
    g_assert_no_error(err);
    /* already there: giving it back leaves it on vfio-pci */
    g_assert_cmpstr(orig, ==, "vfio-pci");
    g_free(orig);
    drv = driver_of(f.root, A6000_VFIO);
    g_assert_cmpstr(drv, ==, "vfio-pci");
    g_assert_true(group_node_exists(f.root, 45));
    g_assert_true(av_vfio_wait_group_node(f.root, 45, 0, &err));
    g_assert_no_error(err);

    /* Back to no driver at all: unbound, override cleared, node gone. */
    g_assert_true(av_vfio_restore(f.root, f.ops, A6000_VFIO, NULL, &err));
    g_assert_no_error(err);
    g_clear_pointer(&drv, g_free);
    drv = driver_of(f.root, A6000_VFIO);
    g_assert_null(drv);
    drv = override_of(f.root, A6000_VFIO);
    g_assert_cmpstr(drv, ==, "(null)");
    g_assert_false(group_node_exists(f.root, 45));

    /* An unbound device binds with no original driver. */
    g_assert_true(av_vfio_bind(f.root, f.ops, A6000_VFIO, NULL, &orig, &err));
    g_assert_no_error(err);
    g_assert_null(orig);
    g_clear_pointer(&drv, g_free);
    drv = driver_of(f.root, A6000_VFIO);
    g_assert_cmpstr(drv, ==, "vfio-pci");
    g_assert_true(group_node_exists(f.root, 45));
    fixture_close(&f);
}

/* The hook's sequence for a card: every endpoint of the group goes to
 * vfio-pci, each comes back to its own driver. */
static void
test_bind_a6000_group(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvPolicy) policy = policy_of(POLICY_A6000_CARD);
    g_autoptr(GPtrArray) members = NULL;
    g_autoptr(GPtrArray) originals = g_ptr_array_new_with_free_func(g_free);

    fixture_open(&f, "two-socket-8gpu");
    host = scan(f.root);
    g_assert_true(av_vfio_group_check(host, policy, get_pci(host, A6000), &members, &err));
    g_assert_no_error(err);
    for (guint i = 0; i < members->len; i++) {
        char *orig = NULL;

        g_assert_true(av_vfio_bind(f.root, f.ops, g_ptr_array_index(members, i), NULL, &orig, &err));
        g_assert_no_error(err);
        g_ptr_array_add(originals, orig);
    }
    g_assert_cmpstr(g_ptr_array_index(originals, 0), ==, "nvidia");
    g_assert_cmpstr(g_ptr_array_index(originals, 1), ==, "snd_hda_intel");
    g_assert_true(group_node_exists(f.root, 44));
    /* The node stays while any member is on vfio-pci. */
    g_assert_true(av_vfio_restore(f.root, f.ops, A6000_AUDIO, g_ptr_array_index(originals, 1), &err));
    g_assert_no_error(err);
    g_assert_true(group_node_exists(f.root, 44));
    g_assert_true(av_vfio_restore(f.root, f.ops, A6000, g_ptr_array_index(originals, 0), &err));
    g_assert_no_error(err);
    g_assert_false(group_node_exists(f.root, 44));
    {
        g_autofree char *a = driver_of(f.root, A6000);
        g_autofree char *b = driver_of(f.root, A6000_AUDIO);

        g_assert_cmpstr(a, ==, "nvidia");
        g_assert_cmpstr(b, ==, "snd_hda_intel");
    }
    fixture_close(&f);
}

static void
test_bind_no_vfio_module(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autofree char *orig = NULL;
    g_autofree char *drv = NULL;
    g_autofree char *vfio = NULL;

    fixture_open(&f, "two-socket-8gpu");
    vfio = g_build_filename(f.dir, "sys/bus/pci/drivers/vfio-pci", NULL);
    av_test_tmpdir_remove(vfio);
    g_assert_false(g_file_test(vfio, G_FILE_TEST_EXISTS));
    g_assert_false(av_vfio_bind(f.root, f.ops, A100, NULL, &orig, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    assert_message_has(err, "the vfio-pci module is not loaded; run 'modprobe vfio-pci'");
    g_assert_null(orig);
    drv = driver_of(f.root, A100);
    g_assert_cmpstr(drv, ==, "nvidia");
    fixture_close(&f);
}

static void
test_restore_driver_not_loaded(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autofree char *orig = NULL;
    g_autofree char *drv = NULL;
    g_autofree char *ovr = NULL;
    g_autofree char *nvidia = NULL;

    fixture_open(&f, "two-socket-8gpu");
    g_assert_true(av_vfio_bind(f.root, f.ops, A100, NULL, &orig, &err));
    g_assert_no_error(err);
    nvidia = g_build_filename(f.dir, "sys/bus/pci/drivers/nvidia", NULL);
    av_test_tmpdir_remove(nvidia);
    g_assert_false(av_vfio_restore(f.root, f.ops, A100, orig, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    assert_message_has(err, "driver nvidia is not loaded");
    /* It is off vfio-pci, its override cleared, waiting for the driver. */
    drv = driver_of(f.root, A100);
    g_assert_null(drv);
    ovr = override_of(f.root, A100);
    g_assert_cmpstr(ovr, ==, "(null)");
    g_assert_false(group_node_exists(f.root, 40));
    fixture_close(&f);
}

static void
test_restore_other_driver(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autofree char *drv = NULL;

    fixture_open(&f, "two-socket-8gpu");
    /* The A100 is on nvidia; giving it "back" to xhci_hcd must not touch it. */
    g_assert_false(av_vfio_restore(f.root, f.ops, A100, "xhci_hcd", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_STATE);
    assert_message_has(err, "nvidia");
    drv = driver_of(f.root, A100);
    g_assert_cmpstr(drv, ==, "nvidia");
    fixture_close(&f);
}

static void
test_bind_fail_probe_rolls_back(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autofree char *orig = NULL;

    fixture_open(&f, "two-socket-8gpu");
    av_test_write(f.dir, "sys/.accelvirt-fake-kernel", "# rollback test\nfail /sys/bus/pci/drivers_probe 5\n");
    g_assert_false(av_vfio_bind(f.root, f.ops, A100, NULL, &orig, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    assert_message_has(err, A100);
    assert_message_has(err, "drivers_probe");
    assert_message_has(err, g_strerror(EIO));
    assert_message_has(err, "back on nvidia");
    g_assert_null(orig);
    assert_a100_home(f.root);
    fixture_close(&f);
}

static void
test_bind_fail_unbind_rolls_back(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autofree char *orig = NULL;

    fixture_open(&f, "two-socket-8gpu");
    av_test_write(f.dir, "sys/.accelvirt-fake-kernel", "fail /sys/bus/pci/drivers/nvidia/unbind 16\n");
    g_assert_false(av_vfio_bind(f.root, f.ops, A100, NULL, &orig, &err));
    assert_message_has(err, "unbinding it from nvidia failed");
    assert_a100_home(f.root);
    fixture_close(&f);
}

/* --- the emulated kernel itself ----------------------------------------------- */

static void
test_fake_kernel(void)
{
    Fixture f;
    g_autofree char *probe = av_sys_path("bus/pci/drivers_probe");
    g_autofree char *nvidia_bind = av_sys_path("bus/pci/drivers/nvidia/bind");
    g_autofree char *nvidia_unbind = av_sys_path("bus/pci/drivers/nvidia/unbind");
    g_autofree char *vfio_unbind = av_sys_path("bus/pci/drivers/vfio-pci/unbind");
    g_autofree char *absent_bind = av_sys_path("bus/pci/drivers/nouveau/bind");
    g_autofree char *override = av_sys_path("bus/pci/devices/%s/driver_override", A100);
    g_autofree char *ovr = NULL;

    fixture_open(&f, "two-socket-8gpu");
    g_assert_cmpint(f.ops->write(f.root, nvidia_bind, A100), ==, -EBUSY);
    g_assert_cmpint(f.ops->write(f.root, vfio_unbind, A100), ==, -ENODEV);
    g_assert_cmpint(f.ops->write(f.root, nvidia_unbind, "0000:99:00.0"), ==, -ENODEV);
    g_assert_cmpint(f.ops->write(f.root, absent_bind, A100), ==, -ENODEV);
    g_assert_cmpint(f.ops->write(f.root, nvidia_unbind, A100 "\n"), ==, 0);
    /* No override: drivers_probe has nothing to bind. */
    g_assert_cmpint(f.ops->write(f.root, probe, A100), ==, -ENODEV);
    /* An override for another driver keeps DRV/bind from matching. */
    g_assert_cmpint(f.ops->write(f.root, override, "vfio-pci\n"), ==, 0);
    ovr = attr(f.root, A100, "driver_override");
    g_assert_cmpstr(ovr, ==, "vfio-pci");
    g_assert_cmpint(f.ops->write(f.root, nvidia_bind, A100), ==, -ENODEV);
    g_assert_cmpint(f.ops->write(f.root, probe, A100), ==, 0);
    g_assert_true(group_node_exists(f.root, 40));
    g_assert_cmpint(f.ops->write(f.root, vfio_unbind, A100), ==, 0);
    g_assert_false(group_node_exists(f.root, 40));
    g_assert_cmpint(f.ops->write(f.root, override, "\n"), ==, 0);
    g_clear_pointer(&ovr, g_free);
    ovr = attr(f.root, A100, "driver_override");
    g_assert_cmpstr(ovr, ==, "(null)");
    g_assert_cmpint(f.ops->write(f.root, nvidia_bind, A100), ==, 0);
    /* Failure lines match globs and the canonical path too. */
    av_test_write(f.dir, "sys/.accelvirt-fake-kernel", "fail /sys/devices/*/driver_override 22\n");
    g_assert_cmpint(f.ops->write(f.root, override, "vfio-pci"), ==, -EINVAL);
    fixture_close(&f);
}

/* --- IOMMU groups --------------------------------------------------------------- */

static void
test_group_a6000(void)
{
    g_autofree char *dir = av_test_host_path("two-socket-8gpu");
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) root = av_root_new(dir, &err);
    g_autoptr(AvHost) host = scan(root);
    g_autoptr(AvPolicy) card = policy_of(POLICY_A6000_CARD);
    g_autoptr(AvPolicy) function = policy_of(POLICY_A6000_FUNCTION);
    g_autoptr(AvPolicy) empty = av_policy_new();
    g_autoptr(GPtrArray) members = NULL;
    g_autofree char *joined = NULL;

    g_assert_true(av_vfio_group_check(host, card, get_pci(host, A6000), &members, &err));
    g_assert_no_error(err);
    joined = join_ptr_array(members);
    g_assert_cmpstr(joined, ==, A6000 " " A6000_AUDIO);

    /* Card granularity without companions: the audio function, on its host
     * driver, is not the guest's (it used to be taken for being on the card). */
    {
        g_autoptr(AvPolicy) bare = policy_of(POLICY_A6000_NO_COMPANIONS);
        g_autoptr(AvPolicy) by_ids = policy_of(POLICY_A6000_BY_IDS);
        g_autoptr(AvPolicy) other = policy_of(POLICY_A6000_OTHER_CLASS);
        g_autoptr(GPtrArray) m2 = NULL;

        g_assert_false(av_vfio_group_check(host, bare, get_pci(host, A6000), &m2, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
        assert_message_has(err, A6000_AUDIO);
        assert_message_has(err, "companions");
        g_clear_error(&err);
        g_assert_false(av_vfio_group_check(host, other, get_pci(host, A6000), &m2, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
        g_clear_error(&err);
        g_assert_true(av_vfio_group_check(host, by_ids, get_pci(host, A6000), &m2, &err));
        g_assert_no_error(err);
        g_assert_cmpuint(m2->len, ==, 2);
    }

    /* Per function, the audio function is the host's: refused by name. */
    g_assert_false(av_vfio_group_check(host, function, get_pci(host, A6000), &members, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    assert_message_has(err, A6000_AUDIO);
    assert_message_has(err, "snd_hda_intel");
    assert_message_has(err, "group 44");
    g_clear_error(&err);
    g_assert_false(av_vfio_group_check(host, empty, get_pci(host, A6000), &members, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_clear_error(&err);

    /* A single-device group; the A6000 on vfio-pci has its audio on snd_hda_intel. */
    g_clear_pointer(&members, g_ptr_array_unref);
    g_assert_true(av_vfio_group_check(host, empty, get_pci(host, A100), &members, &err));
    g_assert_no_error(err);
    g_clear_pointer(&joined, g_free);
    joined = join_ptr_array(members);
    g_assert_cmpstr(joined, ==, A100);
    g_clear_pointer(&members, g_ptr_array_unref);
    g_assert_true(av_vfio_group_check(host, card, get_pci(host, A6000_VFIO), &members, &err));
    g_assert_no_error(err);
    g_clear_pointer(&joined, g_free);
    joined = join_ptr_array(members);
    g_assert_cmpstr(joined, ==, A6000_VFIO " 0000:b1:00.1");
}

static void
test_group_trap(void)
{
    g_autofree char *dir = av_test_host_path("trap-shared-group");
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) root = av_root_new(dir, &err);
    g_autoptr(AvHost) host = scan(root);
    g_autoptr(AvPolicy) policy = policy_of(POLICY_A100);
    GPtrArray *members = NULL;

    g_assert_false(av_vfio_group_check(host, policy, get_pci(host, TRAP_GPU), &members, &err));
    g_assert_null(members);
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    assert_message_has(err, TRAP_GPU);
    assert_message_has(err, "group 12");
    assert_message_has(err, "'0000:05:00.0'");
    assert_message_has(err, "driver i40e");
    g_test_message("%s", err->message);
}

/* Issue 10, hole 1: the host's NIC as the second function of the GPU's own
 * slot makes the group non-viable, whatever the profile's granularity or
 * companions, unless the profile names the NIC itself as a companion. */
static void
test_group_same_slot_nic(void)
{
    g_autofree char *dir = av_test_host_path("trap-shared-group");
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) root = av_root_new(dir, &err);
    g_autoptr(AvHost) host = scan(root);
    const char *policies[] = { POLICY_A6000_CARD, POLICY_A6000_FUNCTION, POLICY_A6000_NO_COMPANIONS,
                               POLICY_A6000_BY_IDS };

    for (guint i = 0; i < G_N_ELEMENTS(policies); i++) {
        g_autoptr(AvPolicy) policy = policy_of(policies[i]);
        GPtrArray *members = NULL;

        g_assert_false(av_vfio_group_check(host, policy, get_pci(host, SAME_SLOT_GPU), &members, &err));
        g_assert_null(members);
        g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
        assert_message_has(err, "'" SAME_SLOT_NIC "'");
        assert_message_has(err, "driver ice");
        assert_message_has(err, "group 14");
        g_clear_error(&err);
    }
    /* Naming the NIC's class as a companion is the operator's explicit word
     * that it belongs to the card: accepted, NIC and audio go along. */
    {
        g_autoptr(AvPolicy) policy = policy_of(POLICY_A6000_GREEDY);
        g_autoptr(GPtrArray) members = NULL;
        g_autofree char *joined = NULL;

        g_assert_true(av_vfio_group_check(host, policy, get_pci(host, SAME_SLOT_GPU), &members, &err));
        g_assert_no_error(err);
        joined = join_ptr_array(members);
        g_assert_cmpstr(joined, ==, SAME_SLOT_GPU " " SAME_SLOT_NIC " 0000:06:00.2");
    }
}

static void
test_group_none(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvPolicy) policy = policy_of(POLICY_A100);
    g_autofree char *link = NULL;
    g_autofree char *resolved = NULL;
    g_autofree char *dev_link = av_sys_path("bus/pci/devices/%s/iommu_group", A100);
    GPtrArray *members = NULL;

    fixture_open(&f, "two-socket-8gpu");
    g_assert_cmpint(av_root_resolve(f.root, dev_link, &resolved), ==, 0);
    g_free(resolved);
    resolved = NULL;
    {
        g_autofree char *devdir_link = av_sys_path("bus/pci/devices/%s", A100);

        g_assert_cmpint(av_root_resolve(f.root, devdir_link, &resolved), ==, 0);
    }
    link = g_strconcat(f.dir, resolved, "/iommu_group", NULL);
    g_assert_cmpint(unlink(link), ==, 0);
    host = scan(f.root);
    g_assert_cmpint(get_pci(host, A100)->iommu_group, ==, -1);
    g_assert_false(av_vfio_group_check(host, policy, get_pci(host, A100), &members, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    assert_message_has(err, A100);
    assert_message_has(err, "no IOMMU group");
    assert_message_has(err, "intel_iommu=on or amd_iommu=on");
    g_assert_null(members);
    fixture_close(&f);
}

static void
put_attr(const char *dir, const char *devdir, const char *name, const char *value)
{
    g_autofree char *rel = g_strconcat(devdir, "/", name, NULL);
    g_autofree char *contents = g_strconcat(value, "\n", NULL);

    av_test_write(dir, rel, contents);
}

/* A PCIe-to-PCI bridge (class 0x0604) and the GPU behind it share group 7,
 * as they do on real hardware: the kernel cannot tell their DMA apart. */
static void
test_group_bridge(void)
{
    g_autofree char *dir = av_test_tmpdir();
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvPolicy) policy = policy_of(POLICY_A100);
    const char *bridge = "sys/devices/pci0000:00/0000:00:1e.0";
    g_autofree char *gpu = g_strconcat(bridge, "/0000:05:00.0", NULL);
    GPtrArray *members = NULL;
    struct {
        const char *dir, *addr, *vendor, *device, *cls, *driver;
    } devs[] = {
        { bridge, "0000:00:1e.0", "0x8086", "0x244e", "0x060401", NULL },
        { gpu, "0000:05:00.0", "0x10de", "0x20f1", "0x030200", "nvidia" },
    };

    av_test_write(dir, "sys/bus/pci/drivers/nvidia/bind", "");
    av_test_write(dir, "sys/bus/pci/drivers/vfio-pci/bind", "");
    for (guint i = 0; i < G_N_ELEMENTS(devs); i++) {
        g_autofree char *p = NULL;
        g_autofree char *target = g_strconcat("/", devs[i].dir, NULL);

        put_attr(dir, devs[i].dir, "vendor", devs[i].vendor);
        put_attr(dir, devs[i].dir, "device", devs[i].device);
        put_attr(dir, devs[i].dir, "class", devs[i].cls);
        put_attr(dir, devs[i].dir, "numa_node", "-1");
        put_attr(dir, devs[i].dir, "driver_override", "(null)");
        g_free(p);
        p = g_strconcat(devs[i].dir, "/iommu_group", NULL);
        av_test_symlink(dir, p, "/sys/kernel/iommu_groups/7");
        g_free(p);
        p = g_strconcat("sys/kernel/iommu_groups/7/devices/", devs[i].addr, NULL);
        av_test_symlink(dir, p, target);
        g_free(p);
        p = g_strconcat("sys/bus/pci/devices/", devs[i].addr, NULL);
        av_test_symlink(dir, p, target);
        if (devs[i].driver) {
            g_free(p);
            p = g_strconcat(devs[i].dir, "/driver", NULL);
            av_test_symlink(dir, p, "/sys/bus/pci/drivers/nvidia");
        }
    }
    root = av_root_new(dir, &err);
    g_assert_no_error(err);
    host = scan(root);
    g_assert_true(get_pci(host, "0000:00:1e.0")->is_bridge);
    g_assert_cmpint(get_pci(host, "0000:05:00.0")->iommu_group, ==, 7);
    g_assert_false(av_vfio_group_check(host, policy, get_pci(host, "0000:05:00.0"), &members, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    assert_message_has(err, "'0000:05:00.0'");
    assert_message_has(err, "group 7");
    assert_message_has(err, "'0000:00:1e.0'");
    assert_message_has(err, "not viable");
    g_assert_null(members);
    av_test_tmpdir_remove(dir);
}

/* --- mdevs ---------------------------------------------------------------------- */

static AvMdevType *
mdev_type_of(const AvHost *host, const char *parent, const char *type)
{
    AvPciDevice *dev = get_pci(host, parent);

    for (guint i = 0; i < dev->mdev_types->len; i++) {
        AvMdevType *t = g_ptr_array_index(dev->mdev_types, i);

        if (g_str_equal(t->id, type))
            return t;
    }
    g_error("%s offers no type %s", parent, type);
}

static void
assert_choice(const AvHost *host, const char *type, AvAllocation allocation, int node, const char *expected)
{
    AvProfile profile = { .name = (char *)"vgpu", .mdev_type = (char *)type, .allocation = allocation };
    g_autoptr(GError) err = NULL;
    g_autofree char *parent = NULL;

    g_assert_true(av_mdev_choose_parent(host, &profile, node, &parent, &err));
    g_assert_no_error(err);
    g_assert_cmpstr(parent, ==, expected);
}

static void
test_mdev_choose(void)
{
    g_autofree char *dir = av_test_host_path("vgpu-mdev");
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) root = av_root_new(dir, &err);
    g_autoptr(AvHost) host = scan(root);
    AvProfile profile = { .name = (char *)"vgpu", .mdev_type = (char *)"nvidia-588" };
    char *parent = NULL;

    /* nvidia-590 runs on the node-0 card (5 left); the node-1 card has 6:
     * the parent already running the type wins, pack or spread. */
    g_assert_cmpuint(mdev_type_of(host, A10_NODE0, "nvidia-590")->available, ==, 5);
    g_assert_cmpuint(mdev_type_of(host, A10_NODE1, "nvidia-590")->available, ==, 6);
    assert_choice(host, "nvidia-590", AV_ALLOCATION_PACK, -1, A10_NODE0);
    assert_choice(host, "nvidia-590", AV_ALLOCATION_SPREAD, -1, A10_NODE0);
    /* The NUMA node filter comes first. */
    assert_choice(host, "nvidia-590", AV_ALLOCATION_PACK, 1, A10_NODE1);
    assert_choice(host, "nvidia-590", AV_ALLOCATION_PACK, 0, A10_NODE0);
    /* nvidia-588: the node-0 card runs another type, so none left there. */
    assert_choice(host, "nvidia-588", AV_ALLOCATION_PACK, -1, A10_NODE1);
    g_assert_false(av_mdev_choose_parent(host, &profile, 0, &parent, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NO_CAPACITY);
    assert_message_has(err, "'nvidia-588'");
    assert_message_has(err, "NUMA node 0");
    g_assert_null(parent);
    g_clear_error(&err);
    profile.mdev_type = (char *)"nvidia-999";
    g_assert_false(av_mdev_choose_parent(host, &profile, -1, &parent, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NO_CAPACITY);
    assert_message_has(err, "'nvidia-999'");
    g_clear_error(&err);
    profile.mdev_type = NULL;
    g_assert_false(av_mdev_choose_parent(host, &profile, -1, &parent, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
    g_clear_error(&err);

    /* Neither runs nvidia-589: pack takes the fuller card, spread the emptier;
     * a tie goes to the lower address. */
    mdev_type_of(host, A10_NODE0, "nvidia-589")->available = 3;
    mdev_type_of(host, A10_NODE1, "nvidia-589")->available = 12;
    assert_choice(host, "nvidia-589", AV_ALLOCATION_PACK, -1, A10_NODE0);
    assert_choice(host, "nvidia-589", AV_ALLOCATION_SPREAD, -1, A10_NODE1);
    mdev_type_of(host, A10_NODE0, "nvidia-589")->available = 12;
    assert_choice(host, "nvidia-589", AV_ALLOCATION_PACK, -1, A10_NODE0);
    assert_choice(host, "nvidia-589", AV_ALLOCATION_SPREAD, -1, A10_NODE0);
    mdev_type_of(host, A10_NODE1, "nvidia-589")->available = 1;
    assert_choice(host, "nvidia-589", AV_ALLOCATION_PACK, -1, A10_NODE1);
    assert_choice(host, "nvidia-589", AV_ALLOCATION_SPREAD, -1, A10_NODE0);
}

static void
test_mdev_create_remove(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autofree char *resolved = NULL;
    g_autofree char *type = NULL;
    g_autofree char *group = NULL;
    g_autofree char *bus_link = av_sys_path("bus/mdev/devices/%s", NEW_MDEV);
    g_autofree char *type_link = g_strconcat(bus_link, "/mdev_type", NULL);
    g_autofree char *group_link = g_strconcat(bus_link, "/iommu_group", NULL);
    g_autofree char *group_member = NULL;
    AvPciDevice *dev;
    AvMdev *mdev;

    fixture_open(&f, "vgpu-mdev");
    g_assert_cmpuint(available(f.root, A10_NODE1, "nvidia-588"), ==, 24);
    g_assert_true(av_mdev_create(f.root, f.ops, A10_NODE1, "nvidia-588", NEW_MDEV, &err));
    g_assert_no_error(err);
    g_assert_cmpint(av_root_resolve(f.root, bus_link, &resolved), ==, 0);
    g_assert_true(g_str_has_suffix(resolved, "/" A10_NODE1 "/" NEW_MDEV));
    g_assert_cmpint(av_root_link_name(f.root, type_link, &type), ==, 0);
    g_assert_cmpstr(type, ==, "nvidia-588");
    g_assert_cmpint(av_root_link_name(f.root, group_link, &group), ==, 0);
    g_assert_cmpstr(group, !=, "200");
    group_member = g_strdup_printf("kernel/iommu_groups/%s/devices/%s", group, NEW_MDEV);
    g_assert_true(sys_exists(f.root, group_member));
    g_assert_true(sys_exists(f.root, "bus/pci/devices/" A10_NODE1 "/mdev_supported_types/nvidia-588/devices/" NEW_MDEV));
    g_assert_true(sys_exists(f.root, "bus/mdev/devices/" NEW_MDEV "/remove"));
    g_assert_cmpuint(available(f.root, A10_NODE1, "nvidia-588"), ==, 23);
    /* The scan sees it as the kernel's own. */
    host = scan(f.root);
    dev = get_pci(host, A10_NODE1);
    g_assert_cmpuint(dev->mdevs->len, ==, 1);
    mdev = g_ptr_array_index(dev->mdevs, 0);
    g_assert_cmpstr(mdev->uuid, ==, NEW_MDEV);
    g_assert_cmpstr(mdev->type_id, ==, "nvidia-588");

    /* The same UUID twice: in use; a type with no instance left: no capacity. */
    g_assert_false(av_mdev_create(f.root, f.ops, A10_NODE1, "nvidia-588", NEW_MDEV, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_IN_USE);
    g_clear_error(&err);
    g_assert_false(av_mdev_create(f.root, f.ops, A10_NODE0, "nvidia-588",
                                  "11111111-2222-4333-8444-555555555555", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NO_CAPACITY);
    assert_message_has(err, "nvidia-588");
    g_clear_error(&err);
    g_assert_false(av_mdev_create(f.root, f.ops, A10_NODE1, "nvidia-999",
                                  "11111111-2222-4333-8444-555555555555", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_clear_error(&err);
    g_assert_false(av_mdev_create(f.root, f.ops, "0000:99:00.0", "nvidia-588",
                                  "11111111-2222-4333-8444-555555555555", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_clear_error(&err);

    g_assert_true(av_mdev_remove(f.root, f.ops, NEW_MDEV, &err));
    g_assert_no_error(err);
    g_assert_false(av_root_exists(f.root, bus_link));
    g_assert_false(sys_exists(f.root, "bus/pci/devices/" A10_NODE1 "/" NEW_MDEV));
    g_assert_false(sys_exists(f.root, "bus/pci/devices/" A10_NODE1 "/mdev_supported_types/nvidia-588/devices/" NEW_MDEV));
    g_free(group_member);
    group_member = g_strdup_printf("kernel/iommu_groups/%s", group);
    g_assert_false(sys_exists(f.root, group_member));
    g_assert_cmpuint(available(f.root, A10_NODE1, "nvidia-588"), ==, 24);
    /* Removing it again, or any mdev that does not exist, succeeds. */
    g_assert_true(av_mdev_remove(f.root, f.ops, NEW_MDEV, &err));
    g_assert_no_error(err);

    /* The mdev the tree came with. */
    g_assert_cmpuint(available(f.root, A10_NODE0, "nvidia-590"), ==, 5);
    g_assert_true(av_mdev_remove(f.root, f.ops, EXISTING_MDEV, &err));
    g_assert_no_error(err);
    g_assert_false(sys_exists(f.root, "bus/mdev/devices/" EXISTING_MDEV));
    g_assert_false(sys_exists(f.root, "kernel/iommu_groups/200"));
    g_assert_cmpuint(available(f.root, A10_NODE0, "nvidia-590"), ==, 6);
    fixture_close(&f);
}

/* SR-IOV on the fake kernel (sriov-fpga-qat: the QAT PF 0000:6b:00.0 with
 * 4 of 16 VFs at 6b:00.1-4, VF device 0x4941): av_sriov_set_numvfs() goes
 * through 0, the emulation makes and removes VFs as the kernel does. */
#define QAT_PF "0000:6b:00.0"

static void
test_sriov_numvfs(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autofree char *writes = NULL;
    g_autofree char *writes_path = NULL;
    g_autofree char *numvfs = av_sys_path("bus/pci/devices/" QAT_PF "/sriov_numvfs");
    g_autofree char *unbind = av_sys_path("bus/pci/drivers/4xxx/unbind");
    g_autofree char *original = NULL;
    AvPciDevice *pf, *vf;

    fixture_open(&f, "sriov-fpga-qat");
    /* the kernel's answers to sriov_numvfs: non-zero to non-zero, above total */
    g_assert_cmpint(f.ops->write(f.root, numvfs, "2"), ==, -EBUSY);
    g_assert_cmpint(f.ops->write(f.root, numvfs, "17"), ==, -ERANGE);
    g_assert_cmpint(f.ops->write(f.root, numvfs, "4"), ==, 0);
    g_assert_cmpint(f.ops->write(f.root, numvfs, "x"), ==, -EINVAL);

    /* 4 -> 0: the VFs, their links and groups go */
    g_assert_true(av_sriov_set_numvfs(f.root, f.ops, QAT_PF, 0, AV_SRIOV_WAIT_MS, &err));
    g_assert_no_error(err);
    g_assert_false(sys_exists(f.root, "bus/pci/devices/0000:6b:00.1"));
    g_assert_false(sys_exists(f.root, "bus/pci/devices/" QAT_PF "/virtfn0"));
    g_assert_false(sys_exists(f.root, "kernel/iommu_groups/151"));
    host = scan(f.root);
    pf = get_pci(host, QAT_PF);
    g_assert_cmpuint(pf->sriov_numvfs, ==, 0);
    g_assert_cmpuint(pf->virtfns->len, ==, 0);
    g_assert_true(pf->sriov_vf_device_set);
    g_assert_cmpuint(pf->sriov_vf_device, ==, 0x4941);
    g_clear_pointer(&host, av_host_free);

    /* 0 -> 6: six VFs with the VF device id, each in a group of its own, no driver */
    g_assert_true(av_sriov_set_numvfs(f.root, f.ops, QAT_PF, 6, AV_SRIOV_WAIT_MS, &err));
    g_assert_no_error(err);
    host = scan(f.root);
    pf = get_pci(host, QAT_PF);
    g_assert_cmpuint(pf->sriov_numvfs, ==, 6);
    g_assert_cmpuint(pf->virtfns->len, ==, 6);
    g_assert_cmpstr(g_ptr_array_index(pf->virtfns, 5), ==, "0000:6b:00.6");
    vf = get_pci(host, "0000:6b:00.6");
    g_assert_cmpstr(vf->physfn, ==, QAT_PF);
    g_assert_cmpint(vf->vf_index, ==, 5);
    g_assert_cmpuint(vf->vendor_id, ==, 0x8086);
    g_assert_cmpuint(vf->device_id, ==, 0x4941);
    g_assert_cmpint(vf->iommu_group, >=, 0);
    g_assert_cmpint(vf->iommu_group, !=, get_pci(host, "0000:6b:00.5")->iommu_group);
    g_assert_null(vf->driver);
    g_clear_pointer(&host, av_host_free);

    /* bound to vfio-pci like any function */
    g_assert_true(av_vfio_bind(f.root, f.ops, "0000:6b:00.6", NULL, &original, &err));
    g_assert_no_error(err);
    g_assert_null(original);

    /* 6 -> 9 goes through 0; the autoprobe is off before any VF exists */
    g_assert_true(av_sriov_set_numvfs(f.root, f.ops, QAT_PF, 9, AV_SRIOV_WAIT_MS, &err));
    g_assert_no_error(err);
    g_assert_true(sys_exists(f.root, "bus/pci/devices/0000:6b:01.1/physfn"));
    g_assert_true(sys_exists(f.root, "bus/pci/devices/" QAT_PF "/virtfn8"));
    writes_path = g_build_filename(f.dir, "sys", AV_KERNEL_FAKE_WRITES, NULL);
    g_assert_true(g_file_get_contents(writes_path, &writes, NULL, NULL));
    g_assert_nonnull(strstr(writes, "/sys/bus/pci/devices/" QAT_PF "/sriov_drivers_autoprobe 0\n"
                                    "/sys/bus/pci/devices/" QAT_PF "/sriov_numvfs 0\n"
                                    "/sys/bus/pci/devices/" QAT_PF "/sriov_numvfs 9\n"));

    /* more than the PF offers; no PF; no SR-IOV */
    g_assert_false(av_sriov_set_numvfs(f.root, f.ops, QAT_PF, 17, AV_SRIOV_WAIT_MS, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_clear_error(&err);
    g_assert_false(av_sriov_set_numvfs(f.root, f.ops, "0000:99:00.0", 1, AV_SRIOV_WAIT_MS, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_clear_error(&err);
    g_assert_false(av_sriov_set_numvfs(f.root, f.ops, "0000:3b:00.0", 1, AV_SRIOV_WAIT_MS, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_clear_error(&err);
    /* a PF without its driver: the kernel's -ENOENT */
    g_assert_true(av_sriov_set_numvfs(f.root, f.ops, QAT_PF, 0, AV_SRIOV_WAIT_MS, &err));
    g_assert_cmpint(f.ops->write(f.root, unbind, QAT_PF), ==, 0);
    g_assert_false(av_sriov_set_numvfs(f.root, f.ops, QAT_PF, 2, AV_SRIOV_WAIT_MS, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    assert_message_has(err, "sriov_numvfs");
    g_clear_error(&err);
    fixture_close(&f);
}

/* The first mdev of a host without /sys/bus/mdev (the module just loaded). */
static void
test_mdev_first_on_host(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autofree char *mdev_bus = NULL;

    fixture_open(&f, "vgpu-mdev");
    mdev_bus = g_build_filename(f.dir, "sys/bus/mdev", NULL);
    av_test_tmpdir_remove(mdev_bus);
    g_assert_true(av_mdev_create(f.root, f.ops, A10_NODE1, "nvidia-593", NEW_MDEV, &err));
    g_assert_no_error(err);
    g_assert_true(sys_exists(f.root, "bus/mdev/devices/" NEW_MDEV));
    g_assert_cmpuint(available(f.root, A10_NODE1, "nvidia-593"), ==, 0);
    g_assert_true(av_mdev_remove(f.root, f.ops, NEW_MDEV, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(available(f.root, A10_NODE1, "nvidia-593"), ==, 1);
    fixture_close(&f);
}

static void
test_mdev_fail_create(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;

    fixture_open(&f, "vgpu-mdev");
    av_test_write(f.dir, "sys/.accelvirt-fake-kernel", "fail /sys/bus/pci/devices/*/create 5\n"
                                                      "fail /sys/devices/*/create 5\n");
    g_assert_false(av_mdev_create(f.root, f.ops, A10_NODE1, "nvidia-588", NEW_MDEV, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_IO);
    assert_message_has(err, NEW_MDEV);
    g_assert_false(sys_exists(f.root, "bus/mdev/devices/" NEW_MDEV));
    g_assert_cmpuint(available(f.root, A10_NODE1, "nvidia-588"), ==, 24);
    fixture_close(&f);
}

/* The kernel's mtty sample: a parent that is no PCI device
 * (/sys/devices/virtual/mtty/mtty), found through /sys/class/mdev_bus. */
#define MTTY_MDEV "5b5e1c2e-8f3a-4d6b-9c1e-2a3b4c5d6e7f"

static guint
class_available(const AvRoot *root, const char *parent, const char *type)
{
    g_autofree char *path = av_sys_path("class/mdev_bus/%s/mdev_supported_types/%s/available_instances",
                                        parent, type);
    guint64 n = 0;

    g_assert_cmpint(av_root_read_uint(root, path, 10, &n), ==, 0);
    return n;
}

static void
test_mdev_virtual_parent(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvHost) after = NULL;
    g_autoptr(GPtrArray) names = g_ptr_array_new();
    g_autofree char *parent = NULL;
    g_autofree char *resolved = NULL;
    g_autofree char *type = NULL;
    g_autofree char *bus_link = av_sys_path("bus/mdev/devices/%s", MTTY_MDEV);
    g_autofree char *type_link = g_strconcat(bus_link, "/mdev_type", NULL);
    AvProfile profile = { .name = (char *)"serial", .mdev_type = (char *)"mtty-2",
                          .allocation = AV_ALLOCATION_PACK };
    AvMdevParent *mp;
    AvMdev *mdev;

    fixture_open(&f, "vgpu-mdev");
    host = scan(f.root);

    /* Only mtty offers mtty-2; it has no NUMA node, so a node filter misses it. */
    g_assert_true(av_mdev_choose_parent(host, &profile, -1, &parent, &err));
    g_assert_no_error(err);
    g_assert_cmpstr(parent, ==, "mtty");
    g_clear_pointer(&parent, g_free);
    g_assert_false(av_mdev_choose_parent(host, &profile, 0, &parent, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NO_CAPACITY);
    g_clear_error(&err);
    /* A profile naming its parents takes only those. */
    g_ptr_array_add(names, (gpointer)"0000:98:00.0");
    profile.match_mdev_parents = names;
    g_assert_false(av_mdev_choose_parent(host, &profile, -1, &parent, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NO_CAPACITY);
    g_clear_error(&err);
    profile.mdev_type = (char *)"nvidia-590";
    g_assert_true(av_mdev_choose_parent(host, &profile, -1, &parent, &err));
    g_assert_cmpstr(parent, ==, "0000:98:00.0");     /* not 0000:17:00.0, which runs the type */
    g_clear_pointer(&parent, g_free);
    g_ptr_array_set_size(names, 0);
    g_ptr_array_add(names, (gpointer)"mtty");
    profile.mdev_type = (char *)"mtty-2";
    g_assert_true(av_mdev_choose_parent(host, &profile, -1, &parent, &err));
    g_assert_cmpstr(parent, ==, "mtty");

    /* Created through /sys/class/mdev_bus/mtty, under the virtual device. */
    g_assert_cmpuint(class_available(f.root, "mtty", "mtty-2"), ==, 12);
    g_assert_true(av_mdev_create(f.root, f.ops, parent, "mtty-2", MTTY_MDEV, &err));
    g_assert_no_error(err);
    g_assert_cmpint(av_root_resolve(f.root, bus_link, &resolved), ==, 0);
    g_assert_cmpstr(resolved, ==, "/sys/devices/virtual/mtty/mtty/" MTTY_MDEV);
    g_assert_cmpint(av_root_link_name(f.root, type_link, &type), ==, 0);
    g_assert_cmpstr(type, ==, "mtty-2");
    g_assert_true(sys_exists(f.root, "devices/virtual/mtty/mtty/mdev_supported_types/mtty-2/devices/" MTTY_MDEV));
    g_assert_cmpuint(class_available(f.root, "mtty", "mtty-2"), ==, 11);
    g_assert_cmpuint(class_available(f.root, "mtty", "mtty-1"), ==, 24);

    /* The scan sees it on its parent, by name. */
    after = scan(f.root);
    mp = av_host_find_mdev_parent(after, "mtty");
    g_assert_nonnull(mp);
    g_assert_null(mp->pci);
    g_assert_cmpuint(mp->mdevs->len, ==, 1);
    g_assert_true(av_host_find_mdev(after, MTTY_MDEV) == mp);
    mdev = g_ptr_array_index(mp->mdevs, 0);
    g_assert_cmpstr(mdev->parent, ==, "mtty");
    g_assert_cmpstr(mdev->type_id, ==, "mtty-2");

    /* The UUID again: in use; a parent or type that is not there: not found. */
    g_assert_false(av_mdev_create(f.root, f.ops, "mtty", "mtty-2", MTTY_MDEV, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_IN_USE);
    g_clear_error(&err);
    g_assert_false(av_mdev_create(f.root, f.ops, "matrix", "mtty-2", "11111111-2222-4333-8444-555555555555", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    assert_message_has(err, "matrix");
    g_clear_error(&err);
    g_assert_false(av_mdev_create(f.root, f.ops, "mtty", "nvidia-590", "11111111-2222-4333-8444-555555555555", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_clear_error(&err);

    /* Removed through its remove attribute: the instance is free again. */
    g_assert_true(av_mdev_remove(f.root, f.ops, MTTY_MDEV, &err));
    g_assert_no_error(err);
    g_assert_false(av_root_exists(f.root, bus_link));
    g_assert_false(sys_exists(f.root, "devices/virtual/mtty/mtty/" MTTY_MDEV));
    g_assert_cmpuint(class_available(f.root, "mtty", "mtty-2"), ==, 12);

    /* A failing create leaves nothing behind. */
    av_test_write(f.dir, "sys/.accelvirt-fake-kernel", "fail /sys/devices/virtual/*/create 5\n");
    g_assert_false(av_mdev_create(f.root, f.ops, "mtty", "mtty-1", MTTY_MDEV, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_IO);
    g_clear_error(&err);
    g_assert_false(av_root_exists(f.root, bus_link));
    g_assert_cmpuint(class_available(f.root, "mtty", "mtty-1"), ==, 24);
    fixture_close(&f);
}

/* A PCI parent goes through /sys/class/mdev_bus too, and through
 * /sys/bus/pci/devices when a tree lacks the class. */
static void
test_mdev_pci_parent_without_class(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autofree char *class_dir = NULL;

    fixture_open(&f, "vgpu-mdev");
    class_dir = g_build_filename(f.dir, "sys/class/mdev_bus", NULL);
    av_test_tmpdir_remove(class_dir);
    host = scan(f.root);
    /* No class: the PCI functions offering types are the parents. */
    g_assert_cmpuint(host->mdev_parents->len, ==, 2);
    g_assert_nonnull(av_host_find_mdev_parent(host, A10_NODE0));
    g_assert_null(av_host_find_mdev_parent(host, "mtty"));
    g_assert_true(av_mdev_create(f.root, f.ops, A10_NODE1, "nvidia-588", NEW_MDEV, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(available(f.root, A10_NODE1, "nvidia-588"), ==, 23);
    g_assert_true(av_mdev_remove(f.root, f.ops, NEW_MDEV, &err));
    g_assert_no_error(err);
    fixture_close(&f);
}

/* --- holders of IOMMU groups ------------------------------------------------------ */

#define GPU41 "0000:31:00.0"                                    /* two-socket-8gpu, group 41 */
#define GPU41_DIR "/sys/devices/pci0000:30/0000:30:02.0/" GPU41
#define GPU40_DIR "/sys/devices/pci0000:16/0000:16:02.0/" A100  /* group 40 */
#define MAPS_LINE "7f2a10000000-7f2a11000000 rw-s 00000000 00:15 4711                       "

/* Removes the fake /proc of @f: no processes. */
static void
proc_clear(Fixture *f)
{
    g_autofree char *proc = g_build_filename(f->dir, "proc", NULL);

    av_test_tmpdir_remove(proc);
}

/* The link /proc/@pid/fd/@fd -> @target in @f's tree. */
static void
proc_fd(Fixture *f, const char *pid, const char *fd, const char *target)
{
    g_autofree char *rel = g_strdup_printf("proc/%s/fd/%s", pid, fd);

    av_test_symlink(f->dir, rel, target);
}

/* /proc/@pid/@name (maps, fdinfo/N) with @contents in @f's tree. */
static void
proc_file(Fixture *f, const char *pid, const char *name, const char *contents)
{
    g_autofree char *rel = g_strdup_printf("proc/%s/%s", pid, name);

    av_test_write(f->dir, rel, contents);
}

/* Asserts that av_vfio_group_holder() of @group says @expected (NULL: none),
 * then clears /proc. */
static void
assert_holder(Fixture *f, int group, const char *expected)
{
    g_autofree char *holder = av_vfio_group_holder(f->root, group);

    g_assert_cmpstr(holder, ==, expected);
    proc_clear(f);
}

/* Each way of holding a group that the kernel shows in /proc, and the
 * look-alikes that hold nothing of it. */
static void
test_holder_kinds(void)
{
    Fixture f;

    fixture_open(&f, "two-socket-8gpu");
    /* The vfio cdevs of the kernel's vfio-dev directory
     * (Documentation/ABI/testing/sysfs-devices-vfio-dev). */
    av_test_write(f.dir, "sys/devices/pci0000:30/0000:30:02.0/" GPU41 "/vfio-dev/vfio3/dev", "511:3\n");
    av_test_write(f.dir, "sys/devices/pci0000:16/0000:16:02.0/" A100 "/vfio-dev/vfio7/dev", "511:7\n");

    /* Nobody: no /proc at all, then processes with other files. */
    assert_holder(&f, 41, NULL);
    proc_fd(&f, "1", "0", "/dev/null");
    proc_fd(&f, "1", "1", "socket:[4711]");
    proc_file(&f, "1", "maps", MAPS_LINE "/usr/bin/qemu-system-x86_64\n" MAPS_LINE "\n");
    proc_fd(&f, "self", "3", "/dev/vfio/41");        /* not a PID */
    assert_holder(&f, 41, NULL);

    /* The group node, open or unlinked while open. */
    proc_fd(&f, "4242", "9", "/dev/vfio/41");
    assert_holder(&f, 41, "4242 (/dev/vfio/41)");
    proc_fd(&f, "4242", "9", "/dev/vfio/41 (deleted)");
    assert_holder(&f, 41, "4242 (/dev/vfio/41 (deleted))");

    /* The vfio cdev of a member (iommufd's way); another group's cdev and
     * /dev/iommu alone hold nothing of group 41. */
    proc_fd(&f, "4242", "10", "/dev/vfio/devices/vfio3");
    assert_holder(&f, 41, "4242 (/dev/vfio/devices/vfio3)");
    proc_fd(&f, "4242", "10", "/dev/vfio/devices/vfio7");
    proc_fd(&f, "4242", "11", "/dev/iommu");
    assert_holder(&f, 41, NULL);
    proc_fd(&f, "4242", "10", "/dev/vfio/devices/vfio7");
    assert_holder(&f, 40, "4242 (/dev/vfio/devices/vfio7)");

    /* A device fd from VFIO_GROUP_GET_DEVICE_FD: an anonymous inode, tied to
     * a device by its fdinfo only (kernel 6.18). */
    proc_fd(&f, "4242", "12", "anon_inode:[vfio-device]");
    proc_file(&f, "4242", "fdinfo/12", "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\n"
              "vfio-device-syspath: " GPU41_DIR "\n");
    assert_holder(&f, 41, "4242 (anon_inode:[vfio-device] of " GPU41 ")");
    proc_fd(&f, "4242", "12", "anon_inode:[vfio-device]");
    proc_file(&f, "4242", "fdinfo/12", "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\n"
              "vfio-device-syspath: " GPU40_DIR "\n");
    assert_holder(&f, 41, NULL);
    /* Before 6.18 nothing ties it to a device: not seen. */
    proc_fd(&f, "4242", "12", "anon_inode:[vfio-device]");
    proc_file(&f, "4242", "fdinfo/12", "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\n");
    assert_holder(&f, 41, NULL);

    /* A member's BAR mapped: its sysfs resource files, its cdev's regions,
     * its /proc/bus/pci file; an fd on a BAR file may map it any time. */
    proc_file(&f, "77", "maps", MAPS_LINE "/usr/bin/bash\n" MAPS_LINE GPU41_DIR "/resource1\n");
    assert_holder(&f, 41, "77 (a mapping of " GPU41_DIR "/resource1)");
    proc_file(&f, "77", "maps", MAPS_LINE GPU41_DIR "/resource3_wc (deleted)\n");
    assert_holder(&f, 41, "77 (a mapping of " GPU41_DIR "/resource3_wc (deleted))");
    proc_file(&f, "77", "maps", MAPS_LINE "/dev/vfio/devices/vfio3\n");
    assert_holder(&f, 41, "77 (a mapping of /dev/vfio/devices/vfio3)");
    proc_file(&f, "77", "maps", MAPS_LINE "/proc/bus/pci/31/00.0\n");
    assert_holder(&f, 41, "77 (a mapping of /proc/bus/pci/31/00.0)");
    proc_fd(&f, "77", "5", GPU41_DIR "/resource0");
    assert_holder(&f, 41, "77 (" GPU41_DIR "/resource0)");

    /* Look-alikes: another device's BAR, files of the member that are no
     * BAR, a path that merely begins like one. */
    proc_file(&f, "77", "maps", MAPS_LINE GPU40_DIR "/resource1\n" MAPS_LINE GPU41_DIR "/config\n"
              MAPS_LINE GPU41_DIR "/resource\n" MAPS_LINE GPU41_DIR "/resource1x\n"
              MAPS_LINE GPU41_DIR "0/resource1\n" MAPS_LINE "/proc/bus/pci/31/00.1\n" MAPS_LINE "\n");
    proc_fd(&f, "77", "5", GPU41_DIR "/config");
    assert_holder(&f, 41, NULL);
    /* An open /proc/bus/pci file alone reads config space, which any user
     * may: no holder (else anyone could have every free device quarantined
     * by the audit's held-outside). */
    proc_fd(&f, "77", "5", "/proc/bus/pci/31/00.0");
    assert_holder(&f, 41, NULL);

    fixture_close(&f);
}

/* Several groups in one scan; what cannot be read makes the answer "cannot
 * tell" unless a holder is found; a tree without /proc has no processes. */
static void
test_holder_groups_unreadable(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvVfioHolder) holder = NULL;
    g_autofree char *text = NULL;
    g_autofree char *maps_dir = NULL;
    g_autofree char *gone = NULL;
    const int groups[] = { 40, 41, -1 };

    fixture_open(&f, "two-socket-8gpu");
    g_assert_true(av_vfio_groups_find_holder(f.root, groups, 3, &holder, &err));
    g_assert_no_error(err);
    g_assert_null(holder);

    proc_fd(&f, "4242", "9", "/dev/vfio/41");
    g_assert_true(av_vfio_groups_find_holder(f.root, groups, 3, &holder, &err));
    g_assert_no_error(err);
    g_assert_nonnull(holder);
    g_assert_cmpint(holder->group, ==, 41);
    g_assert_cmpstr(holder->pid, ==, "4242");
    g_assert_cmpstr(holder->through, ==, "/dev/vfio/41");
    g_clear_pointer(&holder, av_vfio_holder_free);

    /* A maps that cannot be read (a directory here: the tests may run as
     * root, whom modes do not stop), with the holder found elsewhere. */
    maps_dir = g_build_filename(f.dir, "proc/100/maps", NULL);
    g_assert_cmpint(g_mkdir_with_parents(maps_dir, 0755), ==, 0);
    g_assert_true(av_vfio_groups_find_holder(f.root, groups, 3, &holder, &err));
    g_assert_no_error(err);
    g_assert_cmpstr(holder->pid, ==, "4242");
    g_clear_pointer(&holder, av_vfio_holder_free);
    /* ... and without it: cannot tell. */
    gone = g_build_filename(f.dir, "proc/4242", NULL);
    av_test_tmpdir_remove(gone);
    g_assert_false(av_vfio_groups_find_holder(f.root, groups, 3, &holder, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    assert_message_has(err, "cannot tell whether a process holds IOMMU groups 40, 41: cannot read "
                       "'/proc/100/maps': Is a directory");
    g_assert_null(holder);
    g_clear_error(&err);
    text = av_vfio_group_holder(f.root, 41);
    g_assert_nonnull(text);
    g_assert_true(g_str_has_prefix(text, "unknown (cannot tell whether a process holds IOMMU group 41: "));

    /* A process that vanished: its entries are gone, nothing to tell. */
    proc_clear(&f);
    g_clear_pointer(&gone, g_free);
    gone = g_build_filename(f.dir, "proc/101/fd", NULL);
    proc_file(&f, "100", "status", "Name:\tbash\n");
    proc_fd(&f, "101", "3", "/dev/vfio/41");
    av_test_tmpdir_remove(gone);
    g_assert_true(av_vfio_groups_find_holder(f.root, groups, 3, &holder, &err));
    g_assert_no_error(err);
    g_assert_null(holder);
    fixture_close(&f);
}

/* The record itself: one per device, its lock held by its writer (another
 * process, or another open of it, cannot take it), taken once the writer
 * lets go; a file that is no record is refused, never guessed at. */
static void
test_bar_record(void)
{
    g_autofree char *state = av_test_tmpdir();
    g_autoptr(GError) err = NULL;
    g_autoptr(AvBarRecord) taken = NULL;
    g_autoptr(GPtrArray) orphans = NULL;
    g_autoptr(GPtrArray) problems = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *path = av_bar_record_path(state, "pci-0000:17:00.0");
    AvBarSize sizes[] = { { 0, 0, 4 * 1024 * 1024 }, { 2, 8, 1024ull * 1024 * 1024 } };
    AvBarRecord *record;

    record = av_bar_record_write(state, "pci-0000:17:00.0", "0000:17:00.0", sizes, G_N_ELEMENTS(sizes), &err);
    g_assert_no_error(err);
    g_assert_nonnull(record);
    g_assert_true(av_bar_record_exists(state, "pci-0000:17:00.0"));
    g_assert_null(av_bar_record_write(state, "pci-0000:17:00.0", "0000:17:00.0", sizes, 1, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_IN_USE);
    g_clear_error(&err);
    g_assert_false(av_bar_record_take(state, "pci-0000:17:00.0", 0, &taken, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_LOCKED);
    g_clear_error(&err);
    orphans = av_bar_records_take_orphaned(state, problems);
    g_assert_cmpuint(orphans->len, ==, 0);
    g_clear_pointer(&orphans, g_ptr_array_unref);
    /* its writer gone */
    av_bar_record_free(record);
    orphans = av_bar_records_take_orphaned(state, problems);
    g_assert_cmpuint(orphans->len, ==, 1);
    record = g_ptr_array_index(orphans, 0);
    g_assert_cmpstr(record->identity, ==, "pci-0000:17:00.0");
    g_assert_cmpstr(record->address, ==, "0000:17:00.0");
    g_assert_cmpuint(record->bars->len, ==, 2);
    g_assert_cmpuint(g_array_index(record->bars, AvBarSize, 1).bar, ==, 2);
    g_assert_cmpuint(g_array_index(record->bars, AvBarSize, 1).bit, ==, 8);
    g_assert_cmpuint(g_array_index(record->bars, AvBarSize, 1).grown, ==, 1024ull * 1024 * 1024);
    g_assert_null(record->error);
    g_clear_pointer(&orphans, g_ptr_array_unref);
    g_assert_true(av_bar_record_take(state, "pci-0000:17:00.0", 0, &taken, &err));
    g_assert_no_error(err);
    g_assert_nonnull(taken);
    g_assert_true(av_bar_record_set_error(taken, "the kernel said no", &err));
    g_assert_no_error(err);
    g_assert_true(av_bar_record_remove(g_steal_pointer(&taken), &err));
    g_assert_no_error(err);
    g_assert_false(av_bar_record_exists(state, "pci-0000:17:00.0"));
    g_assert_true(av_bar_record_take(state, "pci-0000:17:00.0", 0, &taken, &err));
    g_assert_null(taken);

    /* no record: its sizes are unknown, so it is kept and named */
    g_assert_true(g_file_set_contents(path, "{\"identity\": \"pci-0000:17:00.0" "\"}", -1, NULL));
    g_assert_false(av_bar_record_take(state, "pci-0000:17:00.0", 0, &taken, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    orphans = av_bar_records_take_orphaned(state, problems);
    g_assert_cmpuint(orphans->len, ==, 0);
    g_assert_cmpuint(problems->len, ==, 1);
    g_assert_true(av_bar_record_exists(state, "pci-0000:17:00.0"));
    av_test_tmpdir_remove(state);
}

/* --- vfio-pci variants (issue 36): sriov-fpga-qat's kernel has
 * qat_vfio_pci for the QAT 4xxx VFs (loaded) and mlx5_vfio_pci (not). --- */
#define QAT_PF "0000:6b:00.0"
#define QAT_VF "0000:6b:00.1"           /* on 4xxxvf */
#define QAT_VF_VFIO "0000:6b:00.2"      /* on vfio-pci */
#define FPGA_MGMT "0000:3b:00.0"        /* on xclmgmt: no variant for it */

static void
test_variant_names(void)
{
    g_assert_true(av_pci_driver_is_vfio("vfio-pci"));
    g_assert_true(av_pci_driver_is_vfio("mlx5_vfio_pci"));
    g_assert_true(av_pci_driver_is_vfio("nvgrace_gpu_vfio_pci"));
    g_assert_false(av_pci_driver_is_vfio("_vfio_pci"));
    g_assert_false(av_pci_driver_is_vfio("vfio_pci_core"));
    g_assert_false(av_pci_driver_is_vfio("nvidia"));
    g_assert_false(av_pci_driver_is_vfio("pci-stub"));
    g_assert_false(av_pci_driver_is_vfio("../x_vfio_pci"));
    g_assert_false(av_pci_driver_is_vfio(NULL));
    g_assert_true(av_pci_vfio_variant_migrates("qat_vfio_pci"));
    g_assert_false(av_pci_vfio_variant_migrates("nvgrace_gpu_vfio_pci"));
    g_assert_false(av_pci_vfio_variant_migrates("vfio_pci"));
    g_assert_true(av_vfio_driver_choice_is_valid("auto"));
    g_assert_true(av_vfio_driver_choice_is_valid("vfio-pci"));
    g_assert_true(av_vfio_driver_choice_is_valid("mlx5_vfio_pci"));
    g_assert_false(av_vfio_driver_choice_is_valid("nvidia"));
    g_assert_false(av_vfio_driver_choice_is_valid("Mlx5_vfio_pci"));
    g_assert_false(av_vfio_driver_choice_is_valid("../vfio_pci"));
    g_assert_false(av_vfio_driver_choice_is_valid("_vfio_pci"));
}

static void
test_variant_aliases(void)
{
    Fixture f;
    g_autoptr(AvVfioAliases) aliases = NULL;
    g_autofree char *vf = NULL;
    g_autofree char *mgmt = NULL;
    g_autofree char *bridge = NULL;

    fixture_open(&f, "sriov-fpga-qat");
    aliases = av_vfio_aliases_load(f.root);
    g_assert_nonnull(aliases);
    /* The most specific alias wins over vfio_pci's catch-all. */
    g_assert_cmpstr(av_vfio_aliases_match(aliases, 0x8086, 0x4941, 0x8086, 0, 0x0b4000), ==, "qat_vfio_pci");
    g_assert_cmpstr(av_vfio_aliases_match(aliases, 0x15b3, 0x101e, 0x15b3, 0x0047, 0x020000), ==,
                    "mlx5_vfio_pci");
    g_assert_cmpstr(av_vfio_aliases_match(aliases, 0x10de, 0x2236, 0x10de, 0x1482, 0x030200), ==, "vfio_pci");
    g_assert_true(av_vfio_aliases_module_has(aliases, "qat_vfio_pci"));
    g_assert_false(av_vfio_aliases_module_has(aliases, "qat_4xxx"));
    vf = av_pci_vfio_module_for(f.root, aliases, QAT_VF);
    g_assert_cmpstr(vf, ==, "qat_vfio_pci");
    mgmt = av_pci_vfio_module_for(f.root, aliases, FPGA_MGMT);
    g_assert_cmpstr(mgmt, ==, "vfio_pci");
    bridge = av_pci_vfio_module_for(f.root, aliases, "0000:3a:02.0");
    g_assert_null(bridge);
    fixture_close(&f);

    /* A host whose tree has no modules.alias: nothing known. */
    fixture_open(&f, "two-socket-8gpu");
    g_assert_null(av_vfio_aliases_load(f.root));
    fixture_close(&f);
}

static void
test_variant_choose(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvVfioAliases) aliases = NULL;
    char *drv = NULL;

    fixture_open(&f, "sriov-fpga-qat");
    aliases = av_vfio_aliases_load(f.root);
    g_assert_true(av_vfio_choose_driver(f.root, aliases, QAT_VF, NULL, &drv, &err));
    g_assert_cmpstr(drv, ==, "qat_vfio_pci");
    g_clear_pointer(&drv, g_free);
    g_assert_true(av_vfio_choose_driver(f.root, aliases, QAT_VF, "auto", &drv, &err));
    g_assert_cmpstr(drv, ==, "qat_vfio_pci");
    g_clear_pointer(&drv, g_free);
    g_assert_true(av_vfio_choose_driver(f.root, aliases, QAT_VF, "vfio-pci", &drv, &err));
    g_assert_cmpstr(drv, ==, "vfio-pci");
    g_clear_pointer(&drv, g_free);
    g_assert_true(av_vfio_choose_driver(f.root, aliases, FPGA_MGMT, NULL, &drv, &err));
    g_assert_cmpstr(drv, ==, "vfio-pci");
    g_clear_pointer(&drv, g_free);
    /* No aliases at all: vfio-pci, as before variants. */
    g_assert_true(av_vfio_choose_driver(f.root, NULL, QAT_VF, NULL, &drv, &err));
    g_assert_cmpstr(drv, ==, "vfio-pci");
    g_clear_pointer(&drv, g_free);
    /* A variant the profile names whose aliases do not name the device
     * (mlx5_vfio_pci for a QAT VF): refused, whether it is loaded or not. */
    drv = (char *)"untouched";
    g_assert_false(av_vfio_choose_driver(f.root, aliases, QAT_VF, "mlx5_vfio_pci", &drv, &err));
    g_assert_cmpstr(drv, ==, "untouched");
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    assert_message_has(err, "modules.alias names no device of its ids for mlx5_vfio_pci");
    g_clear_error(&err);
    g_assert_false(av_vfio_choose_driver(f.root, aliases, QAT_PF, "qat_vfio_pci", &drv, &err));
    assert_message_has(err, "names no device of its ids for qat_vfio_pci");
    g_clear_error(&err);
    drv = NULL;
    g_assert_true(av_pci_vfio_module_names(f.root, aliases, QAT_VF, "qat-vfio-pci"));
    g_assert_false(av_pci_vfio_module_names(f.root, aliases, QAT_PF, "qat_vfio_pci"));
    g_assert_false(av_pci_vfio_module_names(f.root, NULL, QAT_VF, "qat_vfio_pci"));
    /* The kernel's own map names the driver of a module. */
    drv = av_vfio_module_driver(f.root, "qat_vfio_pci");
    g_assert_cmpstr(drv, ==, "qat_vfio_pci");
    g_clear_pointer(&drv, g_free);
    drv = av_vfio_module_driver(f.root, "vfio_pci");
    g_assert_cmpstr(drv, ==, "vfio-pci");
    g_clear_pointer(&drv, g_free);
    g_assert_null(av_vfio_module_driver(f.root, "mlx5_vfio_pci"));
    g_assert_null(av_vfio_module_driver(f.root, "xocl"));

    /* The variant for the device, named by the profile or offered, is not
     * loaded: refused, naming modprobe and the vfio-pci alternative. */
    {
        g_autofree char *drvdir = g_build_filename(f.dir, "sys/bus/pci/drivers/qat_vfio_pci", NULL);
        g_autofree char *moddir = g_build_filename(f.dir, "sys/module/qat_vfio_pci", NULL);

        av_test_tmpdir_remove(drvdir);
        av_test_tmpdir_remove(moddir);
    }
    drv = (char *)"untouched";
    g_assert_false(av_vfio_choose_driver(f.root, aliases, QAT_VF, "qat_vfio_pci", &drv, &err));
    g_assert_cmpstr(drv, ==, "untouched");
    assert_message_has(err, "the module qat_vfio_pci is not loaded; run 'modprobe qat_vfio_pci'");
    g_clear_error(&err);
    g_assert_false(av_vfio_choose_driver(f.root, aliases, QAT_VF, NULL, &drv, &err));
    assert_message_has(err, "modules.alias offers it for this device");
    assert_message_has(err, "\"vfio_driver\": \"vfio-pci\" in a profile that matches it");
    g_clear_error(&err);
    drv = av_vfio_choose_driver_or_plain(f.root, QAT_VF, NULL, NULL);
    g_assert_cmpstr(drv, ==, "vfio-pci");
    g_clear_pointer(&drv, g_free);
    fixture_close(&f);
}

static void
test_variant_bind_restore(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autofree char *orig = NULL;
    g_autofree char *drv = NULL;
    g_autofree char *ovr = NULL;

    fixture_open(&f, "sriov-fpga-qat");
    /* A VF on its host driver goes to the variant, and back. */
    g_assert_true(av_vfio_bind(f.root, f.ops, QAT_VF, "qat_vfio_pci", &orig, &err));
    g_assert_no_error(err);
    g_assert_cmpstr(orig, ==, "4xxxvf");
    drv = driver_of(f.root, QAT_VF);
    g_assert_cmpstr(drv, ==, "qat_vfio_pci");
    g_clear_pointer(&drv, g_free);
    ovr = override_of(f.root, QAT_VF);
    g_assert_cmpstr(ovr, ==, "qat_vfio_pci");
    g_clear_pointer(&ovr, g_free);
    g_assert_true(group_node_exists(f.root, 150));
    g_assert_true(av_vfio_restore(f.root, f.ops, QAT_VF, orig, &err));
    g_assert_no_error(err);
    drv = driver_of(f.root, QAT_VF);
    g_assert_cmpstr(drv, ==, "4xxxvf");
    g_clear_pointer(&drv, g_free);
    g_assert_false(group_node_exists(f.root, 150));
    g_clear_pointer(&orig, g_free);

    /* A VF on plain vfio-pci stays there when a variant is asked for: a
     * process may hold it, and the kernel's unbind would block or take it
     * away.  Nothing is written. */
    {
        g_autofree char *override_path = g_build_filename(f.dir, "sys/bus/pci/devices", QAT_VF_VFIO, "driver_override",
                                                          NULL);
        g_autofree char *before = NULL;
        g_autofree char *after = NULL;
        g_autofree char *note = NULL;
        g_autoptr(AvVfioAliases) aliases = av_vfio_aliases_load(f.root);

        g_assert_true(g_file_get_contents(override_path, &before, NULL, NULL));
        g_assert_true(av_vfio_bind(f.root, f.ops, QAT_VF_VFIO, "qat_vfio_pci", &orig, &err));
        g_assert_no_error(err);
        g_assert_cmpstr(orig, ==, "vfio-pci");
        drv = driver_of(f.root, QAT_VF_VFIO);
        g_assert_cmpstr(drv, ==, "vfio-pci");
        g_clear_pointer(&drv, g_free);
        g_assert_true(g_file_get_contents(override_path, &after, NULL, NULL));
        g_assert_cmpstr(after, ==, before);
        /* ... and what the hook logs says so, and what to do. */
        note = av_vfio_kept_note(f.root, aliases, QAT_VF_VFIO, "vfio-pci", NULL);
        g_assert_nonnull(note);
        g_assert_true(strstr(note, "stays on vfio-pci") != NULL);
        g_assert_true(strstr(note, "offers qat_vfio_pci") != NULL);
        g_clear_pointer(&note, g_free);
        note = av_vfio_kept_note(f.root, aliases, QAT_VF_VFIO, "vfio-pci", "vfio-pci");
        g_assert_null(note);
        note = av_vfio_kept_note(f.root, aliases, QAT_VF_VFIO, "qat_vfio_pci", NULL);
        g_assert_null(note);
        note = av_vfio_kept_note(f.root, aliases, QAT_VF_VFIO, "pds-vfio-pci", "pds_vfio_pci");
        g_assert_null(note);
        note = av_vfio_kept_note(f.root, aliases, QAT_VF_VFIO, "qat_vfio_pci", "vfio-pci");
        g_assert_nonnull(note);
        g_assert_true(strstr(note, "profile's \"vfio_driver\" asks for vfio-pci") != NULL);
    }
    g_clear_pointer(&orig, g_free);

    /* The emulated kernel as the real one: vfio-pci and its variants list
     * their ids override-only, so a bind by name without the override
     * finds no match. */
    {
        g_autofree char *unbind = av_sys_path("bus/pci/drivers/vfio-pci/unbind");
        g_autofree char *bind = av_sys_path("bus/pci/drivers/vfio-pci/bind");
        g_autofree char *ovr_path = av_sys_path("bus/pci/devices/%s/driver_override", QAT_VF_VFIO);

        g_assert_cmpint(f.ops->write(f.root, ovr_path, "\n"), ==, 0);
        g_assert_cmpint(f.ops->write(f.root, unbind, QAT_VF_VFIO), ==, 0);
        g_assert_cmpint(f.ops->write(f.root, bind, QAT_VF_VFIO), ==, -ENODEV);
        drv = driver_of(f.root, QAT_VF_VFIO);
        g_assert_null(drv);
    }
    /* A crash between an unbind and a probe left it on no driver: it goes
     * back to vfio-pci by driver_override and drivers_probe. */
    g_assert_true(av_vfio_restore(f.root, f.ops, QAT_VF_VFIO, "vfio-pci", &err));
    g_assert_no_error(err);
    drv = driver_of(f.root, QAT_VF_VFIO);
    g_assert_cmpstr(drv, ==, "vfio-pci");
    g_clear_pointer(&drv, g_free);
    ovr = override_of(f.root, QAT_VF_VFIO);
    g_assert_cmpstr(ovr, ==, "vfio-pci");
    g_clear_pointer(&ovr, g_free);
    g_assert_true(group_node_exists(f.root, 151));

    /* A VF some other tool moved to the variant goes back to the vfio-pci
     * it was recorded on, by driver_override. */
    g_assert_true(av_vfio_bind(f.root, f.ops, QAT_VF, "qat_vfio_pci", &orig, &err));
    g_assert_true(av_vfio_restore(f.root, f.ops, QAT_VF, "vfio-pci", &err));
    g_assert_no_error(err);
    drv = driver_of(f.root, QAT_VF);
    g_assert_cmpstr(drv, ==, "vfio-pci");
    g_clear_pointer(&drv, g_free);
    g_assert_true(av_vfio_restore(f.root, f.ops, QAT_VF, orig, &err));
    g_assert_no_error(err);
    drv = driver_of(f.root, QAT_VF);
    g_assert_cmpstr(drv, ==, "4xxxvf");
    g_clear_pointer(&drv, g_free);
    g_clear_pointer(&orig, g_free);

    /* The emulated kernel's variant refuses a device its aliases do not
     * name (the PF): the bind fails and the PF is back on 4xxx. */
    g_assert_false(av_vfio_bind(f.root, f.ops, QAT_PF, "qat_vfio_pci", &orig, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    assert_message_has(err, "not qat_vfio_pci");
    assert_message_has(err, "it is back on 4xxx");
    g_clear_error(&err);
    drv = driver_of(f.root, QAT_PF);
    g_assert_cmpstr(drv, ==, "4xxx");
    g_clear_pointer(&drv, g_free);

    /* Not a vfio driver at all: refused before any write. */
    g_assert_false(av_vfio_bind(f.root, f.ops, QAT_VF, "4xxx", &orig, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    fixture_close(&f);
}

/* --- NVIDIA vGPU on VFs: vgpu-sriov's two L40S with 4 VFs each --- */
static char *
vgpu_creatable_of(const char *dir, const char *vf)
{
    g_autofree char *path = g_build_filename(dir, "sys/bus/pci/devices", vf, "nvidia/creatable_vgpu_types", NULL);
    char *text = NULL;

    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    return text;
}

static void
test_vgpu_set_clear(void)
{
    Fixture f;
    g_autoptr(GError) err = NULL;
    g_autoptr(GPtrArray) types = NULL;
    g_autofree char *name = NULL;
    g_autofree char *text = NULL;
    guint id = 0, cur = 99, was = 0;

    fixture_open(&f, "vgpu-sriov");
    g_assert_cmpint(av_pci_vgpu_read(f.root, "0000:17:00.1", &cur, &types), ==, 0);
    g_assert_cmpuint(cur, ==, 0);
    g_assert_cmpuint(types->len, ==, 5);
    g_assert_nonnull(av_vgpu_types_find(types, "L40S-2Q"));
    g_assert_nonnull(av_vgpu_types_find(types, "NVIDIA L40S-2Q"));
    g_assert_cmpuint(av_vgpu_types_find(types, "1156")->id, ==, 1156);
    g_assert_null(av_vgpu_types_find(types, "L40S-3Q"));
    g_assert_null(av_vgpu_types_find(types, "2Q"));
    g_assert_true(av_vgpu_type_spec_is_valid("L40S-2Q"));
    g_assert_false(av_vgpu_type_spec_is_valid("0"));
    g_assert_false(av_vgpu_type_spec_is_valid("a:b"));
    g_assert_false(av_vgpu_type_spec_is_valid(""));
    /* A vGPU VF on NVIDIA's driver is a VFIO device accelvirt holds; its
     * PF, on the same driver, is not. */
    g_assert_true(av_vfio_device_is_vfio(f.root, "0000:17:00.1", "nvidia"));
    g_assert_false(av_vfio_device_is_vfio(f.root, "0000:17:00.0", "nvidia"));
    g_assert_false(av_vfio_device_is_vfio(f.root, "0000:17:00.1", NULL));
    g_assert_true(av_vfio_device_is_vfio(f.root, "0000:17:00.0", "vfio-pci"));
    /* The PF has no vGPU interface of its own. */
    g_assert_cmpint(av_pci_vgpu_read(f.root, "0000:17:00.0", &cur, NULL), ==, -ENOENT);
    g_assert_false(av_vgpu_set_type(f.root, f.ops, "0000:17:00.0", "L40S-2Q", &id, &name, &err));
    assert_message_has(err, "has no nvidia/current_vgpu_type");
    g_clear_error(&err);

    /* Made on VF 1: the GPU now serves L40S-2Q alone. */
    g_assert_true(av_vgpu_set_type(f.root, f.ops, "0000:17:00.1", "L40S-2Q", &id, &name, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(id, ==, 1156);
    g_assert_cmpstr(name, ==, "NVIDIA L40S-2Q");
    text = vgpu_creatable_of(f.dir, "0000:17:00.2");
    g_assert_nonnull(strstr(text, "L40S-2Q"));
    g_assert_null(strstr(text, "L40S-4Q"));
    g_clear_pointer(&text, g_free);
    /* Another type on the same GPU: refused in one line naming what it offers. */
    g_clear_pointer(&name, g_free);
    g_assert_false(av_vgpu_set_type(f.root, f.ops, "0000:17:00.2", "L40S-4Q", &id, &name, &err));
    assert_message_has(err, "its GPU offers NVIDIA L40S-2Q (1156) now");
    g_clear_error(&err);
    /* ... and on the other GPU it is free to take. */
    g_assert_true(av_vgpu_set_type(f.root, f.ops, "0000:98:00.1", "L40S-4Q", &id, &name, &err));
    g_clear_pointer(&name, g_free);
    /* A VF that has a vGPU takes no second. */
    g_assert_false(av_vgpu_set_type(f.root, f.ops, "0000:17:00.1", "L40S-2Q", &id, &name, &err));
    assert_message_has(err, "has one of type 1156 already");
    g_clear_error(&err);

    /* Destroyed: 0 read back, every type offered again. */
    g_assert_true(av_vgpu_clear_type(f.root, f.ops, "0000:17:00.1", &was, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(was, ==, 1156);
    g_assert_cmpint(av_pci_vgpu_read(f.root, "0000:17:00.1", &cur, NULL), ==, 0);
    g_assert_cmpuint(cur, ==, 0);
    text = vgpu_creatable_of(f.dir, "0000:17:00.2");
    g_assert_nonnull(strstr(text, "L40S-4Q"));
    g_clear_pointer(&text, g_free);
    g_assert_true(av_vgpu_clear_type(f.root, f.ops, "0000:17:00.1", &was, &err));
    g_assert_cmpuint(was, ==, 0);

    /* A type made to the GPU's last instance: nothing more offered. */
    g_assert_true(av_vgpu_set_type(f.root, f.ops, "0000:17:00.3", "1161", &id, &name, &err));
    g_clear_pointer(&name, g_free);
    text = vgpu_creatable_of(f.dir, "0000:17:00.4");
    g_assert_null(strstr(text, "L40S"));
    g_clear_pointer(&text, g_free);
    g_assert_false(av_vgpu_set_type(f.root, f.ops, "0000:17:00.4", "L40S-48Q", &id, &name, &err));
    assert_message_has(err, "offers none now");
    g_clear_error(&err);
    fixture_close(&f);
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);
    g_test_add_func("/vfio/names", test_uuid_valid);
    g_test_add_func("/vfio/invalid-input", test_invalid_input);
    g_test_add_func("/vfio/ops-for", test_ops_for);
    g_test_add_func("/vfio/fake-kernel", test_fake_kernel);
    g_test_add_func("/vfio/bind/a100-and-back", test_bind_restore_a100);
    g_test_add_func("/vfio/bind/already-vfio", test_bind_already_vfio);
    g_test_add_func("/vfio/variant/names", test_variant_names);
    g_test_add_func("/vfio/variant/aliases", test_variant_aliases);
    g_test_add_func("/vfio/variant/choose", test_variant_choose);
    g_test_add_func("/vfio/variant/bind-restore", test_variant_bind_restore);
    g_test_add_func("/vfio/vgpu/set-clear", test_vgpu_set_clear);
    g_test_add_func("/vfio/bind/a6000-group", test_bind_a6000_group);
    g_test_add_func("/vfio/bind/no-vfio-module", test_bind_no_vfio_module);
    g_test_add_func("/vfio/bind/fail-probe-rolls-back", test_bind_fail_probe_rolls_back);
    g_test_add_func("/vfio/bind/fail-unbind-rolls-back", test_bind_fail_unbind_rolls_back);
    g_test_add_func("/vfio/restore/driver-not-loaded", test_restore_driver_not_loaded);
    g_test_add_func("/vfio/restore/other-driver", test_restore_other_driver);
    g_test_add_func("/vfio/group/a6000", test_group_a6000);
    g_test_add_func("/vfio/group/trap-shared", test_group_trap);
    g_test_add_func("/vfio/group/same-slot-nic", test_group_same_slot_nic);
    g_test_add_func("/vfio/group/no-iommu", test_group_none);
    g_test_add_func("/vfio/group/bridge", test_group_bridge);
    g_test_add_func("/vfio/mdev/choose-parent", test_mdev_choose);
    g_test_add_func("/vfio/mdev/create-remove", test_mdev_create_remove);
    g_test_add_func("/vfio/sriov/numvfs", test_sriov_numvfs);
    g_test_add_func("/vfio/mdev/first-on-host", test_mdev_first_on_host);
    g_test_add_func("/vfio/mdev/fail-create", test_mdev_fail_create);
    g_test_add_func("/vfio/mdev/virtual-parent", test_mdev_virtual_parent);
    g_test_add_func("/vfio/mdev/pci-parent-without-class", test_mdev_pci_parent_without_class);
    g_test_add_func("/vfio/holder/kinds", test_holder_kinds);
    g_test_add_func("/vfio/holder/groups-unreadable", test_holder_groups_unreadable);
    g_test_add_func("/vfio/bar-sizes/record", test_bar_record);
    return g_test_run();
}
