/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: the Placement sync's pieces that need no server
 * (src/nova): clouds.yaml (lookup order, secure.yaml, trust, each
 * auth_type, the Keystone bodies, the catalog), the wanted values of a pool
 * snapshot, and the state file (pending kept, replayed, dropped).  The HTTP
 * client against a server: tests/test-placement-client.sh. */
#include "config.h"

#include <string.h>
#include <sys/stat.h>

#include "av-test.h"
#include "nova/av-openstack.h"
#include "nova/av-placement-sync.h"
#include "policy/av-policy.h"
#include "util/av-error.h"
#include "util/av-json.h"

/* ---- clouds.yaml ---- */

/* A fresh environment: HOME in @tmp, no OS_* variable. */
static void
clean_env(const char *tmp)
{
    g_autofree char *home = g_build_filename(tmp, "home", NULL);

    g_mkdir_with_parents(home, 0700);
    g_setenv("HOME", home, TRUE);
    g_unsetenv("OS_CLIENT_CONFIG_FILE");
    g_unsetenv("OS_CLIENT_SECURE_FILE");
    g_unsetenv("OS_CLOUD");
}

static gboolean
system_clouds_exist(void)
{
    return g_file_test("/etc/openstack", G_FILE_TEST_EXISTS) || g_file_test("/etc/xdg/openstack", G_FILE_TEST_EXISTS);
}

static void
test_lookup_order(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *home_file = g_build_filename(tmp, "home/.config/openstack/clouds.yaml", NULL);
    g_autofree char *env_file = g_build_filename(tmp, "elsewhere/my-clouds.yaml", NULL);
    g_autoptr(GError) err = NULL;
    g_autofree char *found = NULL;
    g_autoptr(AvOsCloud) cloud = NULL;

    clean_env(tmp);
    if (!system_clouds_exist()) {
        found = av_os_clouds_file_find(&err);
        g_assert_null(found);
        g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
        g_assert_nonnull(strstr(err->message, "/etc/openstack"));
        g_assert_null(strstr(err->message, "current"));
        g_clear_error(&err);
    }
    /* The current directory is never read. */
    av_test_write(tmp, "clouds.yaml", "clouds: {cwd: {auth_type: none}}\n");
    g_assert_cmpint(chdir(tmp), ==, 0);
    av_test_write(tmp, "home/.config/openstack/clouds.yaml",
                  "clouds:\n  home:\n    auth_type: admin_token\n    auth: {token: secret}\n"
                  "    placement_endpoint_override: http://127.0.0.1:1/placement\n");
    found = av_os_clouds_file_find(&err);
    g_assert_no_error(err);
    g_assert_cmpstr(found, ==, home_file);
    g_clear_pointer(&found, g_free);
    cloud = av_os_cloud_load("home", &err);
    g_assert_no_error(err);
    g_assert_cmpint(cloud->auth_type, ==, AV_OS_AUTH_NONE);
    g_assert_cmpstr(cloud->endpoint_override, ==, "http://127.0.0.1:1/placement");
    g_assert_cmpstr(json_string_value(json_object_get(cloud->auth, "token")), ==, "secret");
    g_assert_cmpstr(cloud->interface, ==, "public");
    g_assert_true(cloud->verify);
    g_clear_pointer(&cloud, av_os_cloud_free);

    /* $OS_CLIENT_CONFIG_FILE comes first; $OS_CLOUD names the cloud. */
    av_test_write(tmp, "elsewhere/my-clouds.yaml",
                  "clouds:\n  a: {auth_type: none, placement_endpoint_override: 'http://a'}\n"
                  "  b: {auth_type: none, placement_endpoint_override: 'http://b', interface: internal,"
                  " region_name: R2, verify: false}\n");
    g_setenv("OS_CLIENT_CONFIG_FILE", env_file, TRUE);
    found = av_os_clouds_file_find(&err);
    g_assert_cmpstr(found, ==, env_file);
    g_setenv("OS_CLOUD", "b", TRUE);
    cloud = av_os_cloud_load(NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpstr(cloud->name, ==, "b");
    g_assert_cmpstr(cloud->endpoint_override, ==, "http://b");
    g_assert_cmpstr(cloud->interface, ==, "internal");
    g_assert_cmpstr(cloud->region_name, ==, "R2");
    g_assert_false(cloud->verify);
    g_clear_pointer(&cloud, av_os_cloud_free);
    /* The policy's name wins over $OS_CLOUD. */
    cloud = av_os_cloud_load("a", &err);
    g_assert_no_error(err);
    g_assert_cmpstr(cloud->endpoint_override, ==, "http://a");
    g_clear_pointer(&cloud, av_os_cloud_free);

    /* Missing cloud; no name at all. */
    cloud = av_os_cloud_load("nope", &err);
    g_assert_null(cloud);
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(err->message, "no cloud 'nope'"));
    g_clear_error(&err);
    g_unsetenv("OS_CLOUD");
    cloud = av_os_cloud_load(NULL, &err);
    g_assert_null(cloud);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_assert_nonnull(strstr(err->message, "name the cloud"));
    g_clear_error(&err);
    g_assert_cmpint(chdir("/"), ==, 0);
    clean_env(tmp);
    av_test_tmpdir_remove(tmp);
}

/* A "billion laughs" clouds.yaml: refused before any expansion; so is
 * any alias, and a file of too many nodes. */
static void
test_yaml_bomb(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autoptr(GString) big = g_string_new("clouds: {c: {auth_type: none}}\nx: [");
    g_autoptr(GError) err = NULL;
    AvOsCloud *cloud;

    clean_env(tmp);
    av_test_write(tmp, "home/.config/openstack/clouds.yaml",
                  "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                  "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                  "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                  "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
                  "clouds: {c: {auth_type: none, placement_endpoint_override: 'http://x', y: *h}}\n");
    cloud = av_os_cloud_load("c", &err);
    g_assert_null(cloud);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_assert_nonnull(strstr(err->message, "aliases are not supported"));
    g_clear_error(&err);
    /* One alias of a scalar is refused too. */
    av_test_write(tmp, "home/.config/openstack/clouds.yaml",
                  "u: &u http://x\nclouds: {c: {auth_type: none, placement_endpoint_override: *u}}\n");
    g_assert_null(av_os_cloud_load("c", &err));
    g_assert_nonnull(strstr(err->message, "aliases are not supported"));
    g_clear_error(&err);
    for (int i = 0; i < 10001; i++)
        g_string_append(big, "1,");
    g_string_append(big, "1]\n");
    av_test_write(tmp, "home/.config/openstack/clouds.yaml", big->str);
    g_assert_null(av_os_cloud_load("c", &err));
    g_assert_nonnull(strstr(err->message, "YAML nodes"));
    g_clear_error(&err);
    clean_env(tmp);
    av_test_tmpdir_remove(tmp);
}

static void
test_secure_and_trust(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *file = g_build_filename(tmp, "home/.config/openstack/clouds.yaml", NULL);
    g_autofree char *secure = g_build_filename(tmp, "home/.config/openstack/secure.yaml", NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(AvOsCloud) cloud = NULL;

    clean_env(tmp);
    av_test_write(tmp, "home/.config/openstack/clouds.yaml",
                  "clouds:\n  prod:\n    region_name: RegionOne\n    interface: internal\n"
                  "    auth:\n      auth_url: https://keystone.example:5000\n      username: placement\n"
                  "      project_name: service\n      user_domain_name: Default\n"
                  "      project_domain_name: Default\n");
    /* Without the password: the cloud is refused, saying what it lacks. */
    cloud = av_os_cloud_load("prod", &err);
    g_assert_null(cloud);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_assert_nonnull(strstr(err->message, "'auth.password'"));
    g_clear_error(&err);
    av_test_write(tmp, "home/.config/openstack/secure.yaml", "clouds:\n  prod:\n    auth:\n      password: s3cret\n");
    cloud = av_os_cloud_load("prod", &err);
    g_assert_no_error(err);
    g_assert_cmpstr(cloud->secure_file, ==, secure);
    g_assert_cmpstr(json_string_value(json_object_get(cloud->auth, "password")), ==, "s3cret");
    g_assert_cmpstr(json_string_value(json_object_get(cloud->auth, "username")), ==, "placement");
    g_assert_cmpint(cloud->auth_type, ==, AV_OS_AUTH_PASSWORD);
    g_clear_pointer(&cloud, av_os_cloud_free);

    /* A file others may change is refused: it says where credentials go. */
    g_assert_cmpint(chmod(secure, 0666), ==, 0);
    cloud = av_os_cloud_load("prod", &err);
    g_assert_null(cloud);
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_clear_error(&err);
    g_assert_cmpint(chmod(secure, 0600), ==, 0);
    g_assert_cmpint(chmod(file, 0620), ==, 0);
    cloud = av_os_cloud_load("prod", &err);
    g_assert_null(cloud);
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_clear_error(&err);
    g_assert_cmpint(chmod(file, 0644), ==, 0);

    /* Bad YAML names the file, line and column. */
    av_test_write(tmp, "home/.config/openstack/clouds.yaml", "clouds:\n  prod: [\n");
    cloud = av_os_cloud_load("prod", &err);
    g_assert_null(cloud);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_assert_true(g_str_has_prefix(err->message, file));
    clean_env(tmp);
    av_test_tmpdir_remove(tmp);
}

/* The token request body of the cloud "c" of @yaml, compact, sorted. */
static char *
token_body(const char *tmp, const char *yaml, GError **error)
{
    g_autoptr(AvOsCloud) cloud = NULL;
    g_autoptr(json_t) body = NULL;

    av_test_write(tmp, "home/.config/openstack/clouds.yaml", yaml);
    cloud = av_os_cloud_load("c", error);
    if (!cloud)
        return NULL;
    body = av_os_token_request(cloud, error);
    return body ? json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
}

/* The token URL of the cloud "c" of the clouds.yaml last written. */
static void
assert_token_url(const char *want)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvOsCloud) cloud = av_os_cloud_load("c", &err);
    g_autofree char *url = NULL;

    g_assert_no_error(err);
    url = av_os_token_url(cloud);
    g_assert_cmpstr(url, ==, want);
}

static void
test_auth_types(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autoptr(GError) err = NULL;
    g_autofree char *body = NULL;

    clean_env(tmp);
    body = token_body(tmp, "clouds:\n  c:\n    auth:\n      auth_url: http://ks:5000/v3/\n      username: U\n"
                           "      password: P\n      project_name: service\n      user_domain_name: Default\n"
                           "      project_domain_id: default\n", &err);
    g_assert_no_error(err);
    g_assert_cmpstr(body, ==,
                    "{\"auth\":{\"identity\":{\"methods\":[\"password\"],\"password\":{\"user\":{\"domain\":"
                    "{\"name\":\"Default\"},\"name\":\"U\",\"password\":\"P\"}}},\"scope\":{\"project\":{\"domain\":"
                    "{\"id\":\"default\"},\"name\":\"service\"}}}}");
    g_clear_pointer(&body, g_free);
    assert_token_url("http://ks:5000/v3/auth/tokens");

    /* Ids where given; a project by id needs no domain. */
    body = token_body(tmp, "clouds:\n  c:\n    auth_type: password\n    auth: {auth_url: 'http://ks:5000', user_id: "
                           "u1, password: P, project_id: p1}\n", &err);
    g_assert_no_error(err);
    g_assert_cmpstr(body, ==,
                    "{\"auth\":{\"identity\":{\"methods\":[\"password\"],\"password\":{\"user\":{\"id\":\"u1\","
                    "\"password\":\"P\"}}},\"scope\":{\"project\":{\"id\":\"p1\"}}}}");
    g_clear_pointer(&body, g_free);
    assert_token_url("http://ks:5000/v3/auth/tokens");

    /* Application credential, by id (no scope: it has its project). */
    body = token_body(tmp, "clouds:\n  c:\n    auth_type: v3applicationcredential\n    auth:\n"
                           "      auth_url: http://ks/identity/v3\n      application_credential_id: 423f\n"
                           "      application_credential_secret: rEaq\n", &err);
    g_assert_no_error(err);
    g_assert_cmpstr(body, ==,
                    "{\"auth\":{\"identity\":{\"application_credential\":{\"id\":\"423f\",\"secret\":\"rEaq\"},"
                    "\"methods\":[\"application_credential\"]}}}");
    g_clear_pointer(&body, g_free);
    /* By name: with its user. */
    body = token_body(tmp, "clouds:\n  c:\n    auth_type: v3applicationcredential\n    auth:\n"
                           "      auth_url: http://ks/identity/v3\n      application_credential_name: nova-sync\n"
                           "      username: ops\n      user_domain_name: Users\n"
                           "      application_credential_secret: rEaq\n", &err);
    g_assert_no_error(err);
    g_assert_cmpstr(body, ==,
                    "{\"auth\":{\"identity\":{\"application_credential\":{\"name\":\"nova-sync\",\"secret\":\"rEaq\","
                    "\"user\":{\"domain\":{\"name\":\"Users\"},\"name\":\"ops\"}},\"methods\":"
                    "[\"application_credential\"]}}}");
    g_clear_pointer(&body, g_free);
    body = token_body(tmp, "clouds:\n  c:\n    auth_type: v3applicationcredential\n    auth:\n"
                           "      auth_url: http://ks/identity/v3\n      application_credential_name: nova-sync\n"
                           "      application_credential_secret: rEaq\n", &err);
    g_assert_null(body);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);

    /* No Keystone: an endpoint is needed; no body. */
    body = token_body(tmp, "clouds:\n  c:\n    auth_type: none\n", &err);
    g_assert_null(body);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_assert_nonnull(strstr(err->message, "placement_endpoint_override"));
    g_clear_error(&err);
    body = token_body(tmp, "clouds:\n  c:\n    auth_type: none\n    placement_endpoint_override: http://p\n", &err);
    g_assert_null(body);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);

    /* Unknown auth_type. */
    body = token_body(tmp, "clouds:\n  c:\n    auth_type: v3oidcpassword\n", &err);
    g_assert_null(body);
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_assert_nonnull(strstr(err->message, "'v3oidcpassword' is not supported"));
    g_clear_error(&err);
    clean_env(tmp);
    av_test_tmpdir_remove(tmp);
}

static void
test_catalog(void)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) body = json_loads(
        "{\"token\":{\"catalog\":[{\"type\":\"compute\",\"endpoints\":[{\"interface\":\"public\",\"url\":\"http://n\"}]},"
        "{\"type\":\"placement\",\"endpoints\":["
        "{\"interface\":\"public\",\"region_id\":\"R1\",\"url\":\"https://pub1/placement\"},"
        "{\"interface\":\"internal\",\"region_id\":\"R1\",\"url\":\"http://int1:8778\"},"
        "{\"interface\":\"internal\",\"region_id\":\"R2\",\"region\":\"R2\",\"url\":\"http://int2:8778\"}]}]}}",
        0, NULL);
    g_autofree char *a = av_os_catalog_endpoint(body, "public", NULL, &err);
    g_autofree char *b = av_os_catalog_endpoint(body, "internal", "R2", &err);
    g_autofree char *c = av_os_catalog_endpoint(body, "internal", NULL, &err);
    g_autofree char *d = NULL;

    g_assert_no_error(err);
    g_assert_cmpstr(a, ==, "https://pub1/placement");
    g_assert_cmpstr(b, ==, "http://int2:8778");
    g_assert_cmpstr(c, ==, "http://int1:8778");
    d = av_os_catalog_endpoint(body, "admin", NULL, &err);
    g_assert_null(d);
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
}

/* ---- wanted values ---- */

static const char policy_json[] =
    "{\"nova\": {\"placement_sync\": true, \"cloud\": \"test\", \"hypervisor_hostname\": \"compute1\"},\n"
    " \"profiles\": [\n"
    "  {\"name\": \"gpu\", \"match\": {\"vendor\": \"0x10de\"}},\n"
    "  {\"name\": \"fpga\", \"match\": {\"vendor\": \"0x10ee\"}, \"resource_class\": \"CUSTOM_FPGA_U250\"},\n"
    "  {\"name\": \"off\", \"match\": {\"vendor\": \"0x1002\"}, \"placement_sync\": false},\n"
    "  {\"name\": \"vf\", \"match\": {\"vendor\": \"0x8086\"}, \"attach\": \"sriov-vf\"}\n"
    " ]}\n";

static AvPolicy *
test_policy(void)
{
    g_autoptr(GError) err = NULL;
    AvPolicy *policy = av_policy_new();

    g_assert_true(av_policy_add_data(policy, "test.json", policy_json, strlen(policy_json), &err));
    g_assert_no_error(err);
    return policy;
}

static void
add_dev(GPtrArray *devices, const char *identity, const char *address, const char *profile, AvDeviceState state,
        AvDeviceState before, guint16 vendor, guint16 device, const char *pf)
{
    AvPlacementDevice *d = g_new0(AvPlacementDevice, 1);

    d->identity = g_strdup(identity);
    d->address = g_strdup(address);
    d->profile = g_strdup(profile);
    d->state = state;
    d->state_before_missing = before;
    d->is_vf = pf != NULL || strstr(identity, "/vf") != NULL;
    d->pf_address = g_strdup(pf);
    d->ids_known = vendor != 0;
    d->vendor_id = vendor;
    d->device_id = device;
    g_ptr_array_add(devices, d);
}

static gboolean
has_target(const GPtrArray *targets, const char *rp)
{
    for (guint i = 0; i < targets->len; i++) {
        const AvPlacementTarget *t = g_ptr_array_index(targets, i);

        if (g_str_equal(t->rp, rp))
            return TRUE;
    }
    return FALSE;
}

/* The target of @rp; aborts the test when there is none. */
static const AvPlacementTarget *
find_target(const GPtrArray *targets, const char *rp)
{
    for (guint i = 0; i < targets->len; i++) {
        const AvPlacementTarget *t = g_ptr_array_index(targets, i);

        if (g_str_equal(t->rp, rp))
            return t;
    }
    g_error("no target for %s", rp);
}

static void
test_wanted(void)
{
    g_autoptr(AvPolicy) policy = test_policy();
    g_autoptr(GPtrArray) devices = g_ptr_array_new_with_free_func((GDestroyNotify)av_placement_device_free);
    g_autoptr(GPtrArray) targets = NULL;
    g_autoptr(GHashTable) held = NULL;
    g_autofree char *host = av_placement_hostname(policy);
    g_autofree char *rp = av_placement_rp_name("Host", "0000:af:00.0");
    const AvPlacementTarget *t;
    const AvDeviceState F = AV_DEVICE_STATE_FREE;

    g_assert_cmpstr(host, ==, "compute1");
    /* Only the address is upper-cased (Nova's translator). */
    g_assert_cmpstr(rp, ==, "Host_0000:AF:00.0");

    add_dev(devices, "dsn:10de:20b5:01.f0", "0000:3b:00.0", "gpu", AV_DEVICE_STATE_DIRTY, F, 0x10de, 0x20b5, NULL);
    add_dev(devices, "dsn:10de:20b5:02.f0", "0000:5e:00.0", "gpu", AV_DEVICE_STATE_FREE, F, 0x10de, 0x20b5, NULL);
    add_dev(devices, "dsn:10de:20b5:03.f0", "0000:86:00.0", "gpu", AV_DEVICE_STATE_IN_USE, F, 0x10de, 0x20b5, NULL);
    add_dev(devices, "dsn:10de:20b5:04.f0", "0000:af:00.0", "gpu", AV_DEVICE_STATE_QUARANTINED, F, 0x10de, 0x20b5,
            NULL);
    /* Missing: its ids from its identity (the caller read them there). */
    add_dev(devices, "pci:10ee:5005:10ee:000e@slot:4.f0", "0000:d8:00.0", "fpga", AV_DEVICE_STATE_MISSING, F,
            0x10ee, 0x5005, NULL);
    add_dev(devices, "dsn:1002:740f:05.f0", "0000:c1:00.0", "off", AV_DEVICE_STATE_DIRTY, F, 0x1002, 0x740f, NULL);
    /* Four VFs of one PF: one dirty, one scrubbing, one free, one in use;
     * one more gone while free (not counted). */
    add_dev(devices, "dsn:8086:1592:06.f0/vf0", "0000:17:00.1", "vf", AV_DEVICE_STATE_DIRTY, F, 0x8086, 0x1889,
            "0000:17:00.0");
    add_dev(devices, "dsn:8086:1592:06.f0/vf1", "0000:17:00.2", "vf", AV_DEVICE_STATE_SCRUBBING, F, 0x8086, 0x1889,
            "0000:17:00.0");
    add_dev(devices, "dsn:8086:1592:06.f0/vf2", "0000:17:00.3", "vf", AV_DEVICE_STATE_FREE, F, 0x8086, 0x1889,
            "0000:17:00.0");
    add_dev(devices, "dsn:8086:1592:06.f0/vf3", "0000:17:00.4", "vf", AV_DEVICE_STATE_IN_USE, F, 0x8086, 0x1889,
            "0000:17:00.0");
    add_dev(devices, "dsn:8086:1592:06.f0/vf4", "0000:17:00.5", "vf", AV_DEVICE_STATE_MISSING, F, 0, 0, NULL);
    /* A PF whose only VF is free. */
    add_dev(devices, "dsn:8086:1592:07.f0/vf0", "0000:18:00.1", "vf", AV_DEVICE_STATE_FREE, F, 0x8086, 0x1889,
            "0000:18:00.0");

    targets = av_placement_targets(policy, host, devices, NULL, &held);
    g_assert_cmpuint(targets->len, ==, 6);
    t = find_target(targets, "compute1_0000:3B:00.0");
    g_assert_cmpstr(t->rc, ==, "CUSTOM_PCI_10DE_20B5");
    g_assert_cmpint(t->want, ==, -1);
    g_assert_false(t->counts_vfs);
    g_assert_cmpint(find_target(targets, "compute1_0000:5E:00.0")->want, ==, 0);
    g_assert_false(has_target(targets, "compute1_0000:86:00.0"));
    g_assert_true(g_hash_table_contains(held, "dsn:10de:20b5:03.f0"));
    g_assert_cmpint(find_target(targets, "compute1_0000:AF:00.0")->want, ==, -1);
    t = find_target(targets, "compute1_0000:D8:00.0");
    g_assert_cmpstr(t->rc, ==, "CUSTOM_FPGA_U250");
    g_assert_cmpint(t->want, ==, -1);
    g_assert_false(has_target(targets, "compute1_0000:C1:00.0"));
    /* The PF's provider, named after the PF, the VFs' own ids. */
    t = find_target(targets, "compute1_0000:17:00.0");
    g_assert_true(t->counts_vfs);
    g_assert_cmpstr(t->rc, ==, "CUSTOM_PCI_8086_1889");
    g_assert_cmpint(t->want, ==, 2);
    g_assert_cmpuint(t->identities->len, ==, 4);
    g_assert_cmpint(find_target(targets, "compute1_0000:18:00.0")->want, ==, 0);
    g_clear_pointer(&targets, g_ptr_array_unref);
    g_clear_pointer(&held, g_hash_table_unref);

    /* The gone VF, known to the state file: counted once it went missing
     * dirty. */
    {
        g_autoptr(json_t) records = json_pack("{s:{s:s, s:s}}", "dsn:8086:1592:06.f0/vf4", "rp",
                                              "compute1_0000:17:00.0", "rc", "CUSTOM_PCI_8086_1889");
        AvPlacementDevice *gone = g_ptr_array_index(devices, 10);

        gone->state_before_missing = AV_DEVICE_STATE_DIRTY;
        targets = av_placement_targets(policy, host, devices, records, NULL);
        g_assert_cmpint(find_target(targets, "compute1_0000:17:00.0")->want, ==, 3);
        g_assert_cmpuint(find_target(targets, "compute1_0000:17:00.0")->identities->len, ==, 5);
    }
    /* Without the global setting only the profiles that say so. */
    g_clear_pointer(&policy->nova, av_nova_settings_free);
    g_clear_pointer(&targets, g_ptr_array_unref);
    targets = av_placement_targets(policy, "h", devices, NULL, NULL);
    g_assert_cmpuint(targets->len, ==, 0);
}

/* ---- the state file ---- */

static void
test_state(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *state_dir = g_build_filename(tmp, "state", NULL);
    g_autofree char *path = g_build_filename(state_dir, "placement.json", NULL);
    g_autoptr(AvPolicy) policy = test_policy();
    g_autoptr(GPtrArray) devices = g_ptr_array_new_with_free_func((GDestroyNotify)av_placement_device_free);
    g_autoptr(AvPlacementReport) report = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) state = NULL;
    g_autofree char *since = NULL;
    struct stat st;
    json_t *rec;

    clean_env(tmp);
    /* Nothing listens on port 9: every value stays pending. */
    av_test_write(tmp, "home/.config/openstack/clouds.yaml",
                  "clouds:\n  test:\n    auth_type: admin_token\n    placement_endpoint_override: http://127.0.0.1:9\n");
    state = av_placement_state_read(state_dir, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(json_object_size(json_object_get(state, "devices")), ==, 0);
    g_clear_pointer(&state, json_decref);

    add_dev(devices, "dsn:10de:20b5:01.f0", "0000:3b:00.0", "gpu", AV_DEVICE_STATE_DIRTY, 0, 0x10de, 0x20b5, NULL);
    add_dev(devices, "dsn:10de:20b5:02.f0", "0000:5e:00.0", "gpu", AV_DEVICE_STATE_IN_USE, 0, 0x10de, 0x20b5, NULL);
    g_assert_true(av_placement_sync(state_dir, policy, devices, NULL, &report, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(report->applied, ==, 0);
    g_assert_cmpuint(report->pending, ==, 1);
    g_assert_cmpstr(json_string_value(json_object_get(json_array_get(report->results, 0), "result")), ==, "pending");
    g_clear_pointer(&report, av_placement_report_free);
    g_assert_cmpint(stat(path, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 0777, ==, 0600);
    state = av_placement_state_read(state_dir, &err);
    rec = json_object_get(json_object_get(state, "devices"), "dsn:10de:20b5:01.f0");
    g_assert_cmpstr(json_string_value(json_object_get(rec, "state")), ==, "pending");
    g_assert_cmpstr(json_string_value(json_object_get(rec, "rp")), ==, "compute1_0000:3B:00.0");
    g_assert_cmpstr(json_string_value(json_object_get(rec, "rc")), ==, "CUSTOM_PCI_10DE_20B5");
    g_assert_cmpstr(json_string_value(json_object_get(rec, "address")), ==, "0000:3b:00.0");
    g_assert_cmpint(json_integer_value(json_object_get(rec, "want")), ==, 1);
    g_assert_true(json_is_null(json_object_get(rec, "applied")));
    g_assert_nonnull(strstr(json_string_value(json_object_get(rec, "error")), "127.0.0.1:9"));
    since = g_strdup(json_string_value(json_object_get(rec, "since")));
    /* The in-use device has no record: Nova's allocation is the truth. */
    g_assert_null(json_object_get(json_object_get(state, "devices"), "dsn:10de:20b5:02.f0"));
    g_clear_pointer(&state, json_decref);

    /* A status of the pending device. */
    {
        AvPoolDevice dev = { .identity = (char *)"dsn:10de:20b5:01.f0", .kind = AV_DEVICE_KIND_PCI,
                             .profile = (char *)"gpu" };
        AvPoolDevice off = { .identity = (char *)"x", .kind = AV_DEVICE_KIND_PCI, .profile = (char *)"off" };
        g_autoptr(json_t) s = av_placement_state_read(state_dir, &err);
        g_autoptr(json_t) p = av_placement_device_status(policy, s, &dev);
        g_autoptr(json_t) q = av_placement_device_status(policy, s, &off);
        g_autofree char *text = av_placement_status_text(p);
        g_autofree char *text_off = av_placement_status_text(q);

        AvPoolDevice used = { .identity = (char *)"dsn:10de:20b5:02.f0", .kind = AV_DEVICE_KIND_PCI,
                              .profile = (char *)"gpu", .state = AV_DEVICE_STATE_IN_USE };
        g_autoptr(json_t) u = av_placement_device_status(policy, s, &used);
        g_autofree char *text_used = av_placement_status_text(u);

        g_assert_true(g_str_has_prefix(text, "pending since "));
        /* An in-sync record of an older state: released (free) since a
         * sync applied reserved 1, and dirty since one applied 0. */
        {
            g_autoptr(json_t) s2 = json_deep_copy(s);
            json_t *r = json_object_get(json_object_get(s2, "devices"), "dsn:10de:20b5:01.f0");
            AvPoolDevice freed = dev;
            g_autoptr(json_t) a = NULL;
            g_autoptr(json_t) b = NULL;
            g_autoptr(json_t) c = NULL;
            g_autofree char *ta = NULL;
            g_autofree char *tb = NULL;
            g_autofree char *tc = NULL;

            json_object_set_new(r, "state", json_string("in-sync"));
            json_object_set_new(r, "applied", json_integer(1));
            json_object_set_new(r, "error", json_null());
            freed.state = AV_DEVICE_STATE_FREE;
            a = av_placement_device_status(policy, s2, &freed);
            ta = av_placement_status_text(a);
            g_assert_cmpstr(json_string_value(json_object_get(a, "state")), ==, "pending");
            g_assert_cmpstr(ta, ==, "pending (not synced yet)");
            freed.state = AV_DEVICE_STATE_DIRTY;
            b = av_placement_device_status(policy, s2, &freed);
            tb = av_placement_status_text(b);
            g_assert_cmpstr(tb, ==, "in sync (reserved 1)");
            json_object_set_new(r, "applied", json_integer(0));
            json_object_set_new(r, "want", json_integer(0));
            c = av_placement_device_status(policy, s2, &freed);
            tc = av_placement_status_text(c);
            g_assert_cmpstr(tc, ==, "pending (not synced yet)");
        }
        g_assert_cmpstr(text_off, ==, "off");
        g_assert_cmpstr(text_used, ==, "in sync (in use: Nova's allocation)");
    }

    /* The device is gone from the pool: its pending value is replayed
     * (still pending here), "since" kept. */
    g_ptr_array_set_size(devices, 0);
    g_assert_true(av_placement_sync(state_dir, policy, devices, NULL, &report, &err));
    g_assert_cmpuint(report->pending, ==, 1);
    g_assert_cmpuint(json_array_size(report->results), ==, 1);
    g_clear_pointer(&report, av_placement_report_free);
    state = av_placement_state_read(state_dir, &err);
    rec = json_object_get(json_object_get(state, "devices"), "dsn:10de:20b5:01.f0");
    g_assert_cmpstr(json_string_value(json_object_get(rec, "state")), ==, "pending");
    g_assert_cmpstr(json_string_value(json_object_get(rec, "since")), ==, since);
    g_clear_pointer(&state, json_decref);

    /* A replay never lowers reserved nor overrides a current device of
     * the same provider and class: a gone device's pending 0 is dropped;
     * a gone device's pending 1 on the provider a device now in the pool
     * wants 0 of is not replayed after it. */
    {
        g_autoptr(json_t) js = av_placement_state_read(state_dir, &err);
        json_t *devs = json_object_get(js, "devices");
        json_t *r0 = json_deep_copy(json_object_get(devs, "dsn:10de:20b5:01.f0"));
        json_t *r1 = json_deep_copy(r0);
        g_autoptr(GPtrArray) now = g_ptr_array_new_with_free_func((GDestroyNotify)av_placement_device_free);

        json_object_set_new(r0, "want", json_integer(0));
        json_object_set_new(r0, "rp", json_string("compute1_0000:AF:00.0"));
        json_object_set_new(devs, "dsn:10de:20b5:09.f0", r0);
        json_object_set_new(devs, "dsn:10de:20b5:08.f0", r1);    /* want 1 on 0000:3B:00.0 */
        json_object_del(devs, "dsn:10de:20b5:01.f0");
        g_assert_true(av_placement_state_write(state_dir, js, &err));
        add_dev(now, "dsn:10de:20b5:07.f0", "0000:3b:00.0", "gpu", AV_DEVICE_STATE_FREE, 0, 0x10de, 0x20b5, NULL);
        g_assert_true(av_placement_sync(state_dir, policy, now, NULL, &report, &err));
        g_assert_no_error(err);
        g_assert_cmpuint(json_array_size(report->results), ==, 1);
        g_assert_cmpint(json_integer_value(json_object_get(json_array_get(report->results, 0), "want")), ==, 0);
        g_clear_pointer(&report, av_placement_report_free);
        g_clear_pointer(&js, json_decref);
        js = av_placement_state_read(state_dir, &err);
        g_assert_null(json_object_get(json_object_get(js, "devices"), "dsn:10de:20b5:09.f0"));
        g_assert_null(json_object_get(json_object_get(js, "devices"), "dsn:10de:20b5:08.f0"));
        json_object_clear(json_object_get(js, "devices"));
        g_assert_true(av_placement_state_write(state_dir, js, &err));
    }

    /* Back, under a profile with the sync off: the record goes. */
    add_dev(devices, "dsn:10de:20b5:01.f0", "0000:3b:00.0", "off", AV_DEVICE_STATE_DIRTY, 0, 0x10de, 0x20b5, NULL);
    g_assert_true(av_placement_sync(state_dir, policy, devices, NULL, &report, &err));
    g_assert_cmpuint(report->pending, ==, 0);
    g_clear_pointer(&report, av_placement_report_free);
    state = av_placement_state_read(state_dir, &err);
    g_assert_cmpuint(json_object_size(json_object_get(state, "devices")), ==, 0);
    g_clear_pointer(&state, json_decref);

    /* A state file that does not parse is moved to placement.json.bad and
     * the sync starts from an empty state: the device's value pending. */
    av_test_write(state_dir, "placement.json", "{\"version\": 2}");
    g_ptr_array_set_size(devices, 0);
    add_dev(devices, "dsn:10de:20b5:01.f0", "0000:3b:00.0", "gpu", AV_DEVICE_STATE_DIRTY, 0, 0x10de, 0x20b5, NULL);
    g_test_expect_message("accelvirt", G_LOG_LEVEL_WARNING, "*placement.json.bad*");
    g_assert_true(av_placement_sync(state_dir, policy, devices, NULL, &report, &err));
    g_test_assert_expected_messages();
    g_assert_no_error(err);
    g_assert_cmpuint(report->pending, ==, 1);
    g_clear_pointer(&report, av_placement_report_free);
    {
        g_autofree char *bad = g_build_filename(state_dir, "placement.json.bad", NULL);
        g_autofree char *text = NULL;

        g_assert_true(g_file_get_contents(bad, &text, NULL, NULL));
        g_assert_cmpstr(text, ==, "{\"version\": 2}");
    }
    state = av_placement_state_read(state_dir, &err);
    g_assert_no_error(err);
    g_assert_nonnull(json_object_get(json_object_get(state, "devices"), "dsn:10de:20b5:01.f0"));
    g_clear_pointer(&state, json_decref);
    clean_env(tmp);
    av_test_tmpdir_remove(tmp);
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);
    g_test_add_func("/placement/clouds/lookup-order", test_lookup_order);
    g_test_add_func("/placement/clouds/secure-and-trust", test_secure_and_trust);
    g_test_add_func("/placement/clouds/yaml-bomb", test_yaml_bomb);
    g_test_add_func("/placement/clouds/auth-types", test_auth_types);
    g_test_add_func("/placement/clouds/catalog", test_catalog);
    g_test_add_func("/placement/wanted", test_wanted);
    g_test_add_func("/placement/state", test_state);
    return g_test_run();
}
