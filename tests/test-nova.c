/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: src/nova (issue 18), the rules that policies cannot
 * reach from the command line (the policy loader refuses bad names first),
 * and the build on a fake host: a VF spec never one_time_use, a PF spec
 * with the VFs' ids.  tests/test-nova-config.sh tests the command. */
#include "config.h"

#include <string.h>

#include "av-test.h"
#include "nova/av-nova.h"
#include "util/av-error.h"

static void
test_names(void)
{
    g_autofree char *long_rc = g_strnfill(256, 'A');
    g_autofree char *long_ok = g_strnfill(255, 'A');

    /* Placement: ^CUSTOM_[A-Z0-9_]+$ up to 255, or a standard class */
    g_assert_true(av_nova_resource_class_is_valid("CUSTOM_GPU_A100"));
    g_assert_true(av_nova_resource_class_is_valid("PGPU"));
    g_assert_true(av_nova_resource_class_is_valid("VGPU"));
    g_assert_true(av_nova_resource_class_is_valid("FPGA"));
    g_assert_true(av_nova_resource_class_is_valid("PCI_DEVICE"));
    g_assert_true(av_nova_resource_class_is_valid("SRIOV_NET_VF"));
    g_assert_false(av_nova_resource_class_is_valid("CUSTOM_"));
    g_assert_false(av_nova_resource_class_is_valid("CUSTOM_gpu"));
    g_assert_false(av_nova_resource_class_is_valid("CUSTOM_A-B"));
    g_assert_false(av_nova_resource_class_is_valid("GPU"));
    g_assert_false(av_nova_resource_class_is_valid(""));
    g_assert_false(av_nova_resource_class_is_valid(NULL));
    memcpy(long_rc, "CUSTOM_", 7);
    g_assert_false(av_nova_resource_class_is_valid(long_rc));
    /* traits: ^[A-Z0-9_]{1,255}$ */
    g_assert_true(av_nova_trait_is_valid("CUSTOM_A"));
    g_assert_true(av_nova_trait_is_valid("HW_GPU_API_CUDA_V11_0"));
    g_assert_true(av_nova_trait_is_valid(long_ok));
    g_assert_false(av_nova_trait_is_valid(long_rc));
    g_assert_false(av_nova_trait_is_valid(""));
    g_assert_false(av_nova_trait_is_valid("CUSTOM_A, CUSTOM_B"));
    g_assert_false(av_nova_trait_is_valid("custom_a"));
}

static AvPolicy *
policy_from_text(const char *text)
{
    g_autoptr(AvPolicy) policy = av_policy_new();
    g_autoptr(GError) err = NULL;

    if (!av_policy_add_data(policy, "test.json", text, strlen(text), &err))
        g_error("%s", err->message);
    return g_steal_pointer(&policy);
}

static AvHost *
scan(const char *name)
{
    g_autofree char *dir = av_test_host_path(name);
    g_autoptr(GError) err = NULL;
    g_autoptr(AvRoot) root = av_root_new(dir, &err);
    AvHost *host;

    g_assert_no_error(err);
    host = av_host_scan(root, &err);
    g_assert_no_error(err);
    return host;
}

static void
test_sriov(void)
{
    g_autoptr(AvHost) host = scan("sriov-fpga-qat");
    g_autoptr(AvPolicy) policy = policy_from_text(
        "{\"profiles\": [{\"name\": \"qat-vf\", \"match\": {\"vendor\": \"8086\", \"device\": \"4941\"},"
        " \"attach\": \"sriov-vf\", \"numa\": \"strict\", \"traits\": [\"CUSTOM_QAT\"], \"scrub\": [{\"method\": \"reset\"}]}]}");
    g_autoptr(GError) err = NULL;
    g_autoptr(AvNovaConfig) c = av_nova_config_build(policy, host, "h", &err);
    const AvNovaSpec *s;
    const AvNovaAlias *a;
    g_autofree char *line = NULL;

    g_assert_no_error(err);
    g_assert_cmpuint(c->specs->len, ==, 1);
    s = g_ptr_array_index(c->specs, 0);
    g_assert_cmpstr(s->address, ==, "0000:6b:00.0");
    g_assert_cmpstr(s->device_type, ==, "type-VF");
    g_assert_cmphex(s->product_id, ==, 0x4941);
    g_assert_false(s->one_time_use);
    g_assert_cmpuint(s->devices, ==, 4);
    g_assert_cmpuint(c->devices, ==, 4);
    line = av_nova_spec_to_string(s);
    g_assert_cmpstr(line, ==, "{\"address\": \"0000:6b:00.0\", \"vendor_id\": \"8086\", \"product_id\": \"4941\", "
                              "\"resource_class\": \"CUSTOM_PCI_8086_4941\", \"traits\": \"CUSTOM_QAT\", \"managed\": \"no\"}");
    g_assert_cmpuint(c->aliases->len, ==, 1);
    a = g_ptr_array_index(c->aliases, 0);
    g_assert_cmpstr(a->device_type, ==, "type-VF");
    g_assert_cmpstr(a->numa_policy, ==, "required");
    /* every profile scrubs: the compute node gets the trait */
    g_assert_cmpuint(c->providers->len, ==, 1);
    g_assert_null(((AvNovaProvider *)g_ptr_array_index(c->providers, 0))->name);
    g_assert_cmpstr(g_ptr_array_index(((AvNovaProvider *)g_ptr_array_index(c->providers, 0))->traits, 0), ==,
                    AV_NOVA_SCRUBBED_TRAIT);
}

static void
test_nothing(void)
{
    g_autoptr(AvHost) host = scan("sriov-fpga-qat");
    g_autoptr(AvPolicy) policy = policy_from_text(
        "{\"profiles\": [{\"name\": \"a100\", \"match\": {\"vendor\": \"10de\"}, \"attach\": \"vfio-pci\"}]}");
    g_autoptr(GError) err = NULL;
    g_autoptr(AvNovaConfig) c = av_nova_config_build(policy, host, "h", &err);

    g_assert_null(c);
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    g_assert_true(g_str_has_prefix(err->message, "nothing for Nova on this host"));
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);
    g_test_add_func("/nova/names", test_names);
    g_test_add_func("/nova/sriov", test_sriov);
    g_test_add_func("/nova/nothing", test_nothing);
    return g_test_run();
}
