/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: policies (src/policy) and the JSON locator (src/util/av-json.c).
 *
 * tests/data/policies/bad/NAME.json must fail to load with the one line of
 * tests/data/policies/bad/NAME.err, "NAME.json:LINE:COLUMN: message", the file
 * name relative to the policy directory.  AV_TEST_REGENERATE=1 rewrites the
 * .err files from what the loader says: read the diff. */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "av-test.h"
#include "policy/av-policy.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "util/av-names.h"

/* ---- av_json ---- */

typedef struct {
    const char *path;
    int line;
    int column;
} LocateCase;

static void
test_json_locate(void)
{
    static const char text[] =
        "{\n"
        "  \"profiles\": [\n"
        "    {\"name\": \"a\", \"match\": {\"vendor\": \"0x10de\"}},\n"
        "    {\"name\": \"b\\\"\\u00e9\\ud83d\\ude00\", \"x\": [1, -2.5e+3, true, false, null, {}, []],\n"
        "     \"caf\\u00e9\": \"\xc3\xa9t\xc3\xa9\", \"n\": \"é\", \"v\": 7,\n"
        "     \"a/b\": 1, \"t~\": 2, \"match\": {\"vendor\": \"0x1002\", \"device\": [\"0x1\", \"0x2\"]}}\n"
        "  ],\n"
        "  \"z\": \"\\\\\"\n"
        "}\n";
    static const LocateCase cases[] = {
        { "", 1, 1 },
        { "profiles", 2, 15 },
        { "profiles/0", 3, 5 },
        { "profiles/0/name", 3, 14 },
        { "profiles/0/match/vendor", 3, 39 },
        { "profiles/1", 4, 5 },
        { "profiles/1/x", 4, 44 },
        { "profiles/1/x/1", 4, 48 },
        { "profiles/1/x/2", 4, 57 },
        { "profiles/1/x/4", 4, 70 },
        { "profiles/1/x/5", 4, 76 },
        { "profiles/1/x/6", 4, 80 },
        { "profiles/1/caf\xc3\xa9", 5, 19 },
        { "profiles/1/n", 5, 31 },
        { "profiles/1/v", 5, 41 },
        { "profiles/1/a~1b", 6, 13 },
        { "profiles/1/t~0", 6, 22 },
        { "profiles/1/match/device/1", 6, 73 },
        { "z", 8, 8 },
    };
    static const char *const missing[] = {
        "nope", "profiles/2", "profiles/x", "profiles/-1", "profiles/0/name/x",
        "profiles/1/x/7", "profiles/0/match/device", "z/0", "profiles/99999999999999999999",
    };
    int line = -1, column = -1;

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        line = column = -1;
        if (!av_json_locate(text, strlen(text), cases[i].path, &line, &column))
            g_error("path '%s' not found", cases[i].path);
        if (line != cases[i].line || column != cases[i].column)
            g_error("path '%s': got %d:%d, expected %d:%d", cases[i].path, line, column,
                    cases[i].line, cases[i].column);
    }
    for (gsize i = 0; i < G_N_ELEMENTS(missing); i++) {
        line = column = -7;
        g_assert_false(av_json_locate(text, strlen(text), missing[i], &line, &column));
        g_assert_cmpint(line, ==, -7);
        g_assert_cmpint(column, ==, -7);
    }

    /* keys */
    g_assert_true(av_json_locate_key(text, strlen(text), "profiles/1/match", &line, &column));
    g_assert_cmpint(line, ==, 6);
    g_assert_cmpint(column, ==, 25);
    g_assert_false(av_json_locate_key(text, strlen(text), "profiles/1", &line, &column));
    g_assert_false(av_json_locate_key(text, strlen(text), "", &line, &column));

    /* every prefix of the text: never a read past the length (valgrind and
     * ASan watch), and no value found past the end */
    for (gsize n = 0; n < strlen(text); n++) {
        g_autofree char *copy = g_memdup2(text, n);   /* exactly n bytes, no NUL */
        int l, c;

        if (av_json_locate(copy, n, "z", &l, &c))
            g_assert_cmpuint(n, >, strlen(text) - 7);
        (void)av_json_locate(copy, n, "profiles/1/match/device/1", &l, &c);
        (void)av_json_locate_key(copy, n, "profiles/1/t~0", &l, &c);
    }
}

static void
test_json_locate_invalid(void)
{
    static const char *const texts[] = {
        "{\"a\" 1, \"b\": 2}", "{\"a\": 1 \"b\": 2}", "[1, 2,, 3]", "{\"a\": tru, \"b\": 1}",
        "{\"a\": \"\\x\", \"b\": 1}", "{\"a\": \"\\ud800\", \"b\": 1}", "{\"a\": \"\\udc00\", \"b\": 1}",
        "{\"a\": \"line\nbreak\", \"b\": 1}", "{\"a\": 01, \"b\": 1}", "{\"a\": 1., \"b\": 1}",
        "{\"a\": -, \"b\": 1}", "{\"a\": 1e, \"b\": 1}", "{\"a\": [1}, \"b\": 1}", "",
    };
    int line, column;

    for (gsize i = 0; i < G_N_ELEMENTS(texts); i++) {
        if (av_json_locate(texts[i], strlen(texts[i]), "b", &line, &column))
            g_error("found 'b' in invalid JSON %s", texts[i]);
    }
    g_assert_false(av_json_locate(NULL, 0, "", &line, &column));

    /* deep nesting: bounded, no stack overflow */
    {
        GString *deep = g_string_new("{\"a\": ");
        for (int i = 0; i < 100000; i++)
            g_string_append_c(deep, '[');
        g_string_append(deep, ", \"b\": 1}");
        g_assert_false(av_json_locate(deep->str, deep->len, "b", &line, &column));
        g_string_free(deep, TRUE);
    }
}

static void
test_json_dump(void)
{
    g_autoptr(json_t) v = json_pack("{s:s, s:[i, i], s:{}}", "z", "x", "a", 1, 2, "m");
    g_autoptr(json_t) null = av_json_string_or_null(NULL);
    g_autoptr(json_t) str = av_json_string_or_null("q");
    g_autofree char *pretty = av_json_dump_pretty(v);
    g_autofree char *compact = av_json_dump_compact(v);
    g_autofree char *scalar = av_json_dump_compact(str);
    g_autofree char *path = av_json_path_escape("a/b~c");

    g_assert_cmpstr(pretty, ==, "{\n  \"z\": \"x\",\n  \"a\": [\n    1,\n    2\n  ],\n  \"m\": {}\n}\n");
    g_assert_cmpstr(compact, ==, "{\"z\":\"x\",\"a\":[1,2],\"m\":{}}");
    g_assert_cmpstr(scalar, ==, "\"q\"");
    g_assert_true(json_is_null(null));
    g_assert_cmpstr(json_string_value(str), ==, "q");
    g_assert_cmpstr(path, ==, "a~1b~0c");
}

/* ---- hand-built devices ---- */

static AvPciDevice *
pci_new(const char *address, guint16 vendor, guint16 device, guint32 class_code)
{
    AvPciDevice *dev = g_new0(AvPciDevice, 1);

    dev->address = g_strdup(address);
    dev->vendor_id = vendor;
    dev->device_id = device;
    dev->class_code = class_code;
    dev->numa_node = -1;
    dev->iommu_group = -1;
    dev->vf_index = -1;
    dev->mdev_types = g_ptr_array_new();
    return dev;
}

static void
pci_add_mdev_type(AvPciDevice *dev, const char *id)
{
    AvMdevType *t = g_new0(AvMdevType, 1);

    t->id = g_strdup(id);
    g_ptr_array_add(dev->mdev_types, t);
}

/* Frees what pci_new() and pci_add_mdev_type() set, without the scanner's
 * av_pci_device_free(), so that this test links without src/pci. */
static void
pci_free(AvPciDevice *dev)
{
    if (!dev)
        return;
    for (guint i = 0; i < dev->mdev_types->len; i++) {
        AvMdevType *t = g_ptr_array_index(dev->mdev_types, i);
        g_free(t->id);
        g_free(t);
    }
    g_ptr_array_unref(dev->mdev_types);
    g_free(dev->address);
    g_free(dev->physfn);
    g_free(dev);
}
/* a type of its own, so that its cleanup is pci_free(), not av_pci_device_free() */
typedef AvPciDevice AvPciDevice_test;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPciDevice_test, pci_free)

static AvUsbDevice *
usb_new(const char *bus_path, guint16 vendor, guint16 product)
{
    AvUsbDevice *dev = g_new0(AvUsbDevice, 1);

    dev->bus_path = g_strdup(bus_path);
    dev->vendor_id = vendor;
    dev->product_id = product;
    dev->numa_node = -1;
    return dev;
}

static void
usb_free(AvUsbDevice *dev)
{
    if (!dev)
        return;
    g_free(dev->bus_path);
    g_free(dev);
}
typedef AvUsbDevice AvUsbDevice_test;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvUsbDevice_test, usb_free)

static AvPolicy *
policy_from_text(const char *text)
{
    g_autoptr(AvPolicy) policy = av_policy_new();
    g_autoptr(GError) err = NULL;

    if (!av_policy_add_data(policy, "test.json", text, strlen(text), &err))
        g_error("%s", err->message);
    return g_steal_pointer(&policy);
}

static const char *
match_name(const AvPolicy *policy, const AvPciDevice *dev)
{
    const AvProfile *p = av_policy_match_pci(policy, dev);

    return p ? p->name : NULL;
}

/* ---- loading ---- */

static char *
read_err_file(const char *path)
{
    g_autofree char *text = NULL;
    g_autoptr(GError) err = NULL;

    if (!g_file_get_contents(path, &text, NULL, &err))
        g_error("%s (set AV_TEST_REGENERATE=1 to write it)", err->message);
    g_strchomp(text);
    return g_steal_pointer(&text);
}

static void
test_bad_file(gconstpointer data)
{
    const char *json_path = data;
    g_autofree char *base = g_path_get_basename(json_path);
    g_autofree char *err_path = g_strdup_printf("%.*s.err", (int)(strlen(json_path) - 5), json_path);
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *text = NULL;
    g_autofree char *got = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    gsize len;

    g_assert_true(g_file_get_contents(json_path, &text, &len, NULL));
    av_test_write(tmp, base, text);
    policy = av_policy_load_dir(tmp, &err);
    g_assert_null(policy);
    g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
    g_assert_true(g_str_has_prefix(err->message, tmp));
    g_assert_cmpint(err->message[strlen(tmp)], ==, '/');
    got = g_strdup(err->message + strlen(tmp) + 1);

    if (g_strcmp0(g_getenv("AV_TEST_REGENERATE"), "1") == 0) {
        g_autofree char *line = g_strconcat(got, "\n", NULL);
        g_assert_true(g_file_set_contents(err_path, line, -1, NULL));
    } else {
        g_autofree char *expected = read_err_file(err_path);
        g_assert_cmpstr(got, ==, expected);
    }

    /* the same through av_policy_add_data(): all or nothing */
    {
        g_autoptr(AvPolicy) p = policy_from_text("{\"profiles\": [{\"name\": \"zz-keep\", \"match\": {\"vendor\": \"0x1234\"}}]}");
        g_autoptr(GError) err2 = NULL;
        g_autofree char *expected2 = g_strdup_printf("%s", got);

        g_assert_false(av_policy_add_data(p, base, text, len, &err2));
        g_assert_error(err2, AV_ERROR, AV_ERROR_POLICY);
        g_assert_cmpstr(err2->message, ==, expected2);
        g_assert_cmpuint(p->profiles->len, ==, 1);
        g_assert_cmpuint(p->files->len, ==, 1);
    }
    av_test_tmpdir_remove(tmp);
}

/* The absolute path of the shipped scrub VM template, xml/scrub-vm.xml.
 * Caller frees. */
static char *
shipped_template(void)
{
    g_autofree char *rel = av_test_srcdir_path("../xml/scrub-vm.xml");

    return g_canonicalize_filename(rel, NULL);
}

/* A copy of tests/data/policies/good in a new temporary directory, with
 * @TEMPLATE@ the shipped template: the template of a vm step must exist
 * when the policy loads.  Caller removes it (av_test_tmpdir_remove()). */
static char *
good_dir_copy(void)
{
    g_autofree char *src = av_test_srcdir_path("data/policies/good");
    g_autofree char *template = shipped_template();
    g_autoptr(GDir) d = g_dir_open(src, 0, NULL);
    char *tmp = av_test_tmpdir();
    const char *name;

    g_assert_nonnull(d);
    while ((name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(src, name, NULL);
        g_autofree char *text = NULL;
        g_auto(GStrv) parts = NULL;
        g_autofree char *filled = NULL;

        g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
        parts = g_strsplit(text, "@TEMPLATE@", -1);
        filled = g_strjoinv(template, parts);
        av_test_write(tmp, name, filled);
    }
    return tmp;
}

static void
test_good_dir(void)
{
    g_autofree char *dir = good_dir_copy();
    g_autofree char *template = shipped_template();
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = av_policy_load_dir(dir, &err);
    const AvProfile *p;
    const AvScrubStep *s;
    static const char *const names[] = { "gpu-a100", "gpu-any-3d", "vgpu", "qat-vf", "stick", "stick-anywhere" };

    g_assert_no_error(err);
    g_assert_nonnull(policy);
    g_assert_cmpstr(policy->dir, ==, dir);
    g_assert_cmpuint(policy->files->len, ==, 2);
    g_assert_true(g_str_has_suffix(g_ptr_array_index(policy->files, 0), "/10-gpu.json"));
    g_assert_true(g_str_has_suffix(g_ptr_array_index(policy->files, 1), "/20-vf-usb.json"));
    g_assert_cmpuint(policy->profiles->len, ==, G_N_ELEMENTS(names));
    for (guint i = 0; i < G_N_ELEMENTS(names); i++)
        g_assert_cmpstr(((AvProfile *)g_ptr_array_index(policy->profiles, i))->name, ==, names[i]);

    /* every key */
    p = av_policy_find(policy, "gpu-a100");
    g_assert_nonnull(p);
    g_assert_cmpstr(p->description, ==, "A100s in two slots only");
    g_assert_cmpstr(p->source_file, ==, g_ptr_array_index(policy->files, 0));
    g_assert_cmpint(p->source_line, ==, 4);
    g_assert_true(p->match_vendor_set);
    g_assert_cmpuint(p->match_vendor, ==, 0x10de);
    g_assert_cmpuint(p->match_devices->len, ==, 2);
    g_assert_cmpuint(g_array_index(p->match_devices, guint16, 0), ==, 0x20b5);
    g_assert_cmpuint(g_array_index(p->match_devices, guint16, 1), ==, 0x20f1);
    g_assert_true(p->match_class_set);
    g_assert_cmphex(p->match_class, ==, 0x030200);
    g_assert_cmphex(p->match_class_mask, ==, 0xffff00);
    g_assert_true(p->match_subsystem_vendor_set);
    g_assert_cmphex(p->match_subsystem_vendor, ==, 0x10de);
    g_assert_true(p->match_subsystem_device_set);
    g_assert_cmphex(p->match_subsystem_device, ==, 0x1533);
    g_assert_cmpuint(p->match_addresses->len, ==, 2);
    g_assert_cmpstr(g_ptr_array_index(p->match_addresses, 0), ==, "0000:3b:00.0");
    g_assert_cmpstr(g_ptr_array_index(p->match_addresses, 1), ==, "0000:af:00.0");
    g_assert_cmpint(p->attach, ==, AV_ATTACH_VFIO_PCI);
    g_assert_null(p->mdev_type);
    g_assert_cmpint(p->numa, ==, AV_NUMA_STRICT);
    g_assert_cmpint(p->allocation, ==, AV_ALLOCATION_SPREAD);
    g_assert_cmpint(p->granularity, ==, AV_GRANULARITY_CARD);
    g_assert_cmpint(p->restore_driver, ==, AV_RESTORE_KEEP_VFIO);
    g_assert_true(p->hide_hypervisor);
    g_assert_cmpstr(p->resource_class, ==, "CUSTOM_GPU_A100");
    g_assert_cmpuint(p->traits->len, ==, 2);
    g_assert_cmpstr(g_ptr_array_index(p->traits, 1), ==, "HW_GPU_API_CUDA_V11_0");
    g_assert_cmpuint(p->scrub->len, ==, 5);
    s = g_ptr_array_index(p->scrub, 0);
    g_assert_cmpint(s->method, ==, AV_SCRUB_METHOD_COMMAND);
    g_assert_cmpuint(s->timeout_s, ==, 120);
    g_assert_cmpstr(json_string_value(json_array_get(json_object_get(s->options, "argv"), 0)), ==, "/usr/bin/true");
    s = g_ptr_array_index(p->scrub, 1);
    g_assert_cmpint(s->method, ==, AV_SCRUB_METHOD_VFIO_ZERO);
    g_assert_cmpuint(s->timeout_s, ==, 0);
    g_assert_cmpstr(json_string_value(json_object_get(s->options, "verify")), ==, "sample");
    g_assert_cmpint(json_integer_value(json_array_get(json_object_get(s->options, "bars"), 1)), ==, 3);
    s = g_ptr_array_index(p->scrub, 2);
    g_assert_cmpint(s->method, ==, AV_SCRUB_METHOD_RESET);
    g_assert_cmpuint(json_array_size(json_object_get(s->options, "methods")), ==, 2);
    s = g_ptr_array_index(p->scrub, 3);
    g_assert_cmpint(s->method, ==, AV_SCRUB_METHOD_ROM_CHECK);
    s = g_ptr_array_index(p->scrub, 4);
    g_assert_cmpint(s->method, ==, AV_SCRUB_METHOD_VM);
    g_assert_cmpuint(s->timeout_s, ==, 600);
    g_assert_cmpint(json_integer_value(json_object_get(s->options, "timeout")), ==, 600);
    g_assert_cmpstr(json_string_value(json_object_get(s->options, "template")), ==, template);

    /* defaults */
    p = av_policy_find(policy, "gpu-any-3d");
    g_assert_nonnull(p);
    g_assert_null(p->description);
    g_assert_cmpuint(p->match_devices->len, ==, 0);
    g_assert_cmphex(p->match_class, ==, 0x030200);
    g_assert_cmphex(p->match_class_mask, ==, 0xffffff);
    g_assert_false(p->match_subsystem_vendor_set);
    g_assert_cmpuint(p->match_addresses->len, ==, 0);
    g_assert_cmpint(p->attach, ==, AV_ATTACH_VFIO_PCI);
    g_assert_cmpint(p->numa, ==, AV_NUMA_PREFERRED);
    g_assert_cmpint(p->allocation, ==, AV_ALLOCATION_PACK);
    g_assert_cmpint(p->granularity, ==, AV_GRANULARITY_CARD);
    g_assert_cmpint(p->restore_driver, ==, AV_RESTORE_ON_RELEASE);
    g_assert_false(p->hide_hypervisor);
    g_assert_null(p->resource_class);
    g_assert_cmpuint(p->traits->len, ==, 0);
    g_assert_cmpuint(p->scrub->len, ==, 1);     /* default: reset */
    g_assert_cmpint(((AvScrubStep *)g_ptr_array_index(p->scrub, 0))->method, ==, AV_SCRUB_METHOD_RESET);

    p = av_policy_find(policy, "vgpu");
    g_assert_cmpint(p->attach, ==, AV_ATTACH_MDEV);
    g_assert_cmpstr(p->mdev_type, ==, "nvidia-588");
    g_assert_cmpint(p->granularity, ==, AV_GRANULARITY_FUNCTION);
    g_assert_cmpuint(p->scrub->len, ==, 0);     /* default for mdev: none */
    g_assert_cmpstr(p->resource_class, ==, "VGPU");

    p = av_policy_find(policy, "qat-vf");
    g_assert_cmpint(p->attach, ==, AV_ATTACH_SRIOV_VF);
    g_assert_cmpint(p->granularity, ==, AV_GRANULARITY_FUNCTION);

    p = av_policy_find(policy, "stick");
    g_assert_cmpint(p->attach, ==, AV_ATTACH_USB);
    g_assert_cmpint(p->granularity, ==, AV_GRANULARITY_FUNCTION);
    g_assert_cmpint(p->numa, ==, AV_NUMA_NONE);
    g_assert_cmpuint(p->scrub->len, ==, 0);
    g_assert_cmpstr(g_ptr_array_index(p->match_addresses, 0), ==, "1-1.2");

    p = av_policy_find(policy, "stick-anywhere");
    s = g_ptr_array_index(p->scrub, 0);
    g_assert_cmpuint(s->timeout_s, ==, 300);

    g_assert_null(av_policy_find(policy, "nope"));
    g_assert_null(av_policy_find(policy, NULL));
    g_assert_null(av_policy_find(NULL, "stick"));
    av_test_tmpdir_remove(dir);
}

static void
test_load_order(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = NULL;

    av_test_write(tmp, "b.json", "{\"profiles\": [{\"name\": \"b1\", \"match\": {\"vendor\": \"0x0002\"}}]}");
    av_test_write(tmp, "10-z.json", "{\"profiles\": [{\"name\": \"z1\", \"match\": {\"vendor\": \"0x0003\"}},"
                                    " {\"name\": \"z0\", \"match\": {\"vendor\": \"0x0003\"}}]}");
    av_test_write(tmp, "B.json", "{\"profiles\": []}");
    av_test_write(tmp, "a.json", "{\"description\": \"only a description\", \"profiles\": []}");
    /* ignored: hidden files, other names, backups, directories without .json */
    av_test_write(tmp, ".hidden.json", "{ not json");
    av_test_write(tmp, "notes.txt", "{ not json");
    av_test_write(tmp, "c.json~", "{ not json");
    av_test_write(tmp, "c.json.rpmsave", "{ not json");
    av_test_write(tmp, "sub/d.json", "{ not json");

    policy = av_policy_load_dir(tmp, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(policy->files->len, ==, 4);
    g_assert_true(g_str_has_suffix(g_ptr_array_index(policy->files, 0), "/10-z.json"));
    g_assert_true(g_str_has_suffix(g_ptr_array_index(policy->files, 1), "/B.json"));
    g_assert_true(g_str_has_suffix(g_ptr_array_index(policy->files, 2), "/a.json"));
    g_assert_true(g_str_has_suffix(g_ptr_array_index(policy->files, 3), "/b.json"));
    g_assert_cmpuint(policy->profiles->len, ==, 3);
    g_assert_cmpstr(((AvProfile *)g_ptr_array_index(policy->profiles, 0))->name, ==, "z1");
    g_assert_cmpstr(((AvProfile *)g_ptr_array_index(policy->profiles, 1))->name, ==, "z0");
    g_assert_cmpstr(((AvProfile *)g_ptr_array_index(policy->profiles, 2))->name, ==, "b1");

    /* a directory named *.json is an error, not skipped */
    av_test_write(tmp, "e.json/x", "");
    g_clear_pointer(&policy, av_policy_free);
    policy = av_policy_load_dir(tmp, &err);
    g_assert_null(policy);
    g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
    g_assert_true(g_str_has_suffix(err->message, "/e.json' is not a regular file"));
    av_test_tmpdir_remove(tmp);
}

static void
test_duplicate_across_files(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autofree char *expected = NULL;

    av_test_write(tmp, "10-a.json", "{\n  \"profiles\": [\n    {\"name\": \"gpu\", \"match\": {\"vendor\": \"0x10de\"}}\n  ]\n}\n");
    av_test_write(tmp, "20-b.json", "{\n  \"profiles\": [\n    {\"name\": \"other\", \"match\": {\"vendor\": \"0x10de\"}},\n"
                                    "    {\"name\": \"gpu\", \"match\": {\"vendor\": \"0x1002\"}}\n  ]\n}\n");
    policy = av_policy_load_dir(tmp, &err);
    g_assert_null(policy);
    g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
    expected = g_strdup_printf("%s/20-b.json:4:14: profiles[1]: duplicate profile name 'gpu'; first defined in %s/10-a.json at line 3",
                               tmp, tmp);
    g_assert_cmpstr(err->message, ==, expected);
    av_test_tmpdir_remove(tmp);
}

/* Issue 18: the top-level "nova" object, one file's at most, and the
 * profiles' "placement_sync" over it. */
static void
test_nova(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autofree char *expected = NULL;
    const AvProfile *gpu, *off, *vf, *usb;

    av_test_write(tmp, "00-nova.json", "{\"nova\": {\"placement_sync\": true, \"cloud\": \"compute\", "
                                       "\"hypervisor_hostname\": \"Compute1.example\"}}\n");
    av_test_write(tmp, "10-a.json", "{\"profiles\": [\n"
                                    "  {\"name\": \"gpu\", \"match\": {\"vendor\": \"0x10de\"}},\n"
                                    "  {\"name\": \"off\", \"match\": {\"vendor\": \"0x1002\"}, \"placement_sync\": false},\n"
                                    "  {\"name\": \"vf\", \"match\": {\"vendor\": \"0x8086\"}, \"attach\": \"sriov-vf\"},\n"
                                    "  {\"name\": \"usb\", \"match\": {\"vendor\": \"0x03e7\"}, \"attach\": \"usb\", "
                                    "\"placement_sync\": false}\n]}\n");
    policy = av_policy_load_dir(tmp, &err);
    g_assert_no_error(err);
    g_assert_nonnull(policy->nova);
    g_assert_true(policy->nova->placement_sync);
    g_assert_cmpstr(policy->nova->cloud, ==, "compute");
    g_assert_cmpstr(policy->nova->hypervisor_hostname, ==, "Compute1.example");
    g_assert_true(g_str_has_suffix(policy->nova->source_file, "/00-nova.json"));
    gpu = av_policy_find(policy, "gpu");
    off = av_policy_find(policy, "off");
    vf = av_policy_find(policy, "vf");
    usb = av_policy_find(policy, "usb");
    g_assert_cmpint(gpu->placement_sync, ==, -1);
    g_assert_true(av_policy_placement_sync(policy, gpu));
    g_assert_false(av_policy_placement_sync(policy, off));
    g_assert_true(av_policy_placement_sync(policy, vf));
    g_assert_false(av_policy_placement_sync(policy, usb));
    /* Off by default; a profile turns it on for itself. */
    g_clear_pointer(&policy->nova, av_nova_settings_free);
    g_assert_false(av_policy_placement_sync(policy, gpu));
    g_clear_pointer(&policy, av_policy_free);

    /* A second "nova" names the first file. */
    av_test_write(tmp, "20-b.json", "{\n  \"nova\": {\"placement_sync\": false},\n  \"profiles\": []\n}\n");
    policy = av_policy_load_dir(tmp, &err);
    g_assert_null(policy);
    g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
    expected = g_strdup_printf("%s/20-b.json:2:3: a second 'nova' object: '%s/00-nova.json' has one already; keep one "
                               "in one file", tmp, tmp);
    g_assert_cmpstr(err->message, ==, expected);
    av_test_tmpdir_remove(tmp);
}

static void
test_missing_dir(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *dir = g_build_filename(tmp, "policies", NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = av_policy_load_dir(dir, &err);
    g_autoptr(AvPciDevice_test) gpu = pci_new("0000:3b:00.0", 0x10de, 0x20b5, 0x030200);

    g_assert_no_error(err);
    g_assert_nonnull(policy);
    g_assert_cmpstr(policy->dir, ==, dir);
    g_assert_cmpuint(policy->files->len, ==, 0);
    g_assert_cmpuint(policy->profiles->len, ==, 0);
    g_assert_null(av_policy_match_pci(policy, gpu));

    /* an empty directory too */
    g_clear_pointer(&policy, av_policy_free);
    policy = av_policy_load_dir(tmp, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(policy->profiles->len, ==, 0);

    /* a file where the directory should be is an error */
    av_test_write(tmp, "file", "");
    g_clear_pointer(&dir, g_free);
    dir = g_build_filename(tmp, "file", NULL);
    g_clear_pointer(&policy, av_policy_free);
    policy = av_policy_load_dir(dir, &err);
    g_assert_null(policy);
    g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
    av_test_tmpdir_remove(tmp);
}

static void
test_world_writable(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *file = g_build_filename(tmp, "a.json", NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = NULL;

    av_test_write(tmp, "a.json", "{\"profiles\": []}");
    g_assert_cmpint(chmod(file, 0666), ==, 0);
    policy = av_policy_load_dir(tmp, &err);
    g_assert_null(policy);
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_clear_error(&err);

    g_assert_cmpint(chmod(file, 0644), ==, 0);
    g_assert_cmpint(chmod(tmp, 0777), ==, 0);
    policy = av_policy_load_dir(tmp, &err);
    g_assert_null(policy);
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_clear_error(&err);

    g_assert_cmpint(chmod(tmp, 0755), ==, 0);
    policy = av_policy_load_dir(tmp, &err);
    g_assert_no_error(err);
    g_assert_nonnull(policy);
    av_test_tmpdir_remove(tmp);
}

/* ---- trust: who could change what runs or is read as root ---- */

/* The uid that owns nothing trusted: nobody's. */
#define UNTRUSTED_UID 65534

/* chown(2) of @path (lchown of a link) to UNTRUSTED_UID; these tests run
 * as root, as make check does here. */
static void
give_away(const char *path)
{
    if (lchown(path, UNTRUSTED_UID, (gid_t)-1) < 0)
        g_error("cannot chown '%s' to uid %d (%s): the trust tests run as root", path, UNTRUSTED_UID,
                g_strerror(errno));
}

/* Loads @dir, which must fail with @code and a message holding each of
 * the NULL-terminated strings after @code, and be one line.  Returns the
 * message (caller frees). */
static char *
load_refused(const char *dir, int code, ...)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = av_policy_load_dir(dir, &err);
    const char *want;
    va_list ap;

    g_assert_null(policy);
    g_assert_nonnull(err);
    if (!g_error_matches(err, AV_ERROR, code))
        g_error("expected error code %d, got %d: %s", code, err->code, err->message);
    g_assert_null(strchr(err->message, '\n'));
    va_start(ap, code);
    while ((want = va_arg(ap, const char *)))
        if (!strstr(err->message, want))
            g_error("no '%s' in: %s", want, err->message);
    va_end(ap);
    return g_strdup(err->message);
}

static void
load_ok(const char *dir)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = av_policy_load_dir(dir, &err);

    g_assert_no_error(err);
    g_assert_nonnull(policy);
}

/* @path given to another user: loading @dir fails (AV_ERROR_UNSAFE),
 * the message naming @where and the owner; then @path is root's again. */
static void
refused_given_away(const char *dir, const char *path, const char *where)
{
    give_away(path);
    g_free(load_refused(dir, AV_ERROR_UNSAFE, where, "owned by uid 65534", NULL));
    g_assert_cmpint(chown(path, 0, 0), ==, 0);
}

#define EMPTY_POLICY "{\"profiles\": []}"

/* The policy dir and its files: owner root (or this process's user), not
 * group- or world-writable, nor in a directory that is, up to "/". */
static void
test_trust_dir(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *base = g_build_filename(tmp, "base", NULL);
    g_autofree char *pol = g_build_filename(base, "policies", NULL);
    g_autofree char *file = g_build_filename(pol, "10-a.json", NULL);
    g_autofree char *msg = NULL;
    g_autofree char *want = NULL;

    av_test_write(pol, "10-a.json", EMPTY_POLICY);
    g_assert_cmpint(chmod(base, 0755), ==, 0);
    g_assert_cmpint(chmod(pol, 0755), ==, 0);
    g_assert_cmpint(chmod(file, 0644), ==, 0);
    load_ok(pol);

    /* A file owned by another user: the whole message, once. */
    give_away(file);
    msg = load_refused(pol, AV_ERROR_UNSAFE, NULL);
    want = g_strdup_printf("refusing the policy file '%s': it is owned by uid 65534 (nobody), not by root "
                           "(mode 0644), so another user could change what accelvirt runs or reads as root; run "
                           "'chown root %s'", file, file);
    g_assert_cmpstr(msg, ==, want);
    g_assert_cmpint(chown(file, 0, 0), ==, 0);

    /* The directory owned by another user. */
    give_away(pol);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "the policy directory", "owned by uid 65534", "chown root", NULL));
    g_assert_cmpint(chown(pol, 0, 0), ==, 0);
    load_ok(pol);

    /* A group-writable file. */
    g_assert_cmpint(chmod(file, 0664), ==, 0);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, file, "is writable by its group", "mode 0664",
                        "chmod go-w", NULL));
    g_assert_cmpint(chmod(file, 0644), ==, 0);

    /* A group-writable parent of the policy dir: the dir itself is fine,
     * but someone else could rename it away and put another in its place. */
    g_assert_cmpint(chmod(base, 0775), ==, 0);
    g_clear_pointer(&msg, g_free);
    msg = load_refused(pol, AV_ERROR_UNSAFE, "the directory '", "is writable by its group", "mode 0775", NULL);
    g_clear_pointer(&want, g_free);
    want = g_strdup_printf("run 'chmod go-w %s'", base);
    g_assert_true(g_str_has_suffix(msg, want));

    /* A world-writable parent without the sticky bit. */
    g_assert_cmpint(chmod(base, 0777), ==, 0);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "is writable by its group and every user", "mode 0777", NULL));
    g_assert_cmpint(chmod(base, 0757), ==, 0);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "is writable by every user", "mode 0757", NULL));

    /* With the sticky bit (/tmp, 1777) it is fine: nobody else can rename
     * or remove the policy dir, root's, out of it... */
    g_assert_cmpint(chmod(base, 01777), ==, 0);
    load_ok(pol);
    /* ...unless that entry is someone else's. */
    give_away(pol);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "the policy directory", "owned by uid 65534", NULL));
    g_assert_cmpint(chown(pol, 0, 0), ==, 0);
    /* The sticky bit does not make the policy dir itself writable by others. */
    g_assert_cmpint(chmod(pol, 01777), ==, 0);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "is writable by its group and every user", "mode 1777", NULL));
    g_assert_cmpint(chmod(pol, 0755), ==, 0);
    load_ok(pol);

    /* A relative policy dir: its chain is the current directory's. */
    {
        g_autofree char *cwd = g_get_current_dir();

        g_assert_cmpint(chdir(base), ==, 0);
        load_ok("policies");
        g_assert_cmpint(chmod(pol, 0775), ==, 0);
        g_free(load_refused("policies", AV_ERROR_UNSAFE, "refusing the policy directory 'policies': it is writable",
                            NULL));
        g_assert_cmpint(chmod(pol, 0755), ==, 0);
        g_assert_cmpint(chdir(cwd), ==, 0);
    }
    av_test_tmpdir_remove(tmp);
}

/* A policy file may be a link to an example (how one activates it): the
 * chain of the link's own directory and the chain of its target are
 * checked. */
static void
test_trust_symlink(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *share = g_build_filename(tmp, "share", NULL);
    g_autofree char *example = g_build_filename(share, "example.json", NULL);
    g_autofree char *pol = g_build_filename(tmp, "policies", NULL);
    g_autofree char *link = g_build_filename(pol, "50-example.json", NULL);

    av_test_write(share, "example.json", "{\"profiles\": [{\"name\": \"ex\", \"match\": {\"vendor\": \"0x10de\"}}]}");
    av_test_symlink(pol, "50-example.json", example);
    av_test_symlink(pol, "60-relative.json", "../share/example2.json");
    av_test_write(share, "example2.json", EMPTY_POLICY);
    g_assert_cmpint(chmod(share, 0755), ==, 0);
    g_assert_cmpint(chmod(pol, 0755), ==, 0);
    load_ok(pol);

    /* the target's directory is writable by others: refused, named */
    g_assert_cmpint(chmod(share, 0775), ==, 0);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "refusing the policy file '", "50-example.json': the directory '",
                        share, "is writable by its group", NULL));
    g_assert_cmpint(chmod(share, 0755), ==, 0);
    /* the target is someone else's */
    give_away(example);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "the file '", example, "owned by uid 65534", NULL));
    g_assert_cmpint(chown(example, 0, 0), ==, 0);
    /* the link itself is someone else's (in a sticky dir they could swap it) */
    give_away(link);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "the link '", "50-example.json' is owned by uid 65534",
                        "run 'chown -h root", NULL));
    g_assert_cmpint(lchown(link, 0, 0), ==, 0);
    /* the link's own directory is writable by others */
    g_assert_cmpint(chmod(pol, 0757), ==, 0);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "is writable by every user", NULL));
    g_assert_cmpint(chmod(pol, 0755), ==, 0);
    load_ok(pol);
    /* a dangling link named *.json */
    av_test_symlink(pol, "70-gone.json", "/nonexistent/accelvirt/x.json");
    g_free(load_refused(pol, AV_ERROR_NOT_FOUND, "70-gone.json' does not exist", NULL));
    av_test_tmpdir_remove(tmp);
}

/* A policy whose one profile has the scrub step @step (a JSON object with
 * @PATH@ standing for @path), written as @dir/10-scrub.json. */
/* Writes @text to @dir/@name, mode 0644: a policy file that loads. */
static void
write_policy_file(const char *dir, const char *name, const char *text)
{
    g_autofree char *file = g_build_filename(dir, name, NULL);

    av_test_write(dir, name, text);
    g_assert_cmpint(chmod(file, 0644), ==, 0);
}

static void
write_step_policy(const char *dir, const char *step, const char *path)
{
    g_auto(GStrv) parts = g_strsplit(step, "@PATH@", -1);
    g_autofree char *filled = g_strjoinv(path, parts);
    g_autofree char *text = g_strdup_printf(
        "{\"profiles\": [{\"name\": \"gpu\", \"match\": {\"vendor\": \"0x10de\"},\n"
        "  \"scrub\": [%s]}]}\n", filled);

    write_policy_file(dir, "10-scrub.json", text);
}

/* A temporary directory for the trust tests: "policies" (mode 0755, empty)
 * and "bin" (0755) holding the program @name (0755, a shell script that
 * exits 0). */
typedef struct {
    char *tmp;
    char *pol;
    char *bin;
    char *prog;
} TrustDirs;

static void
trust_dirs_clear(TrustDirs *d)
{
    if (d->tmp)
        av_test_tmpdir_remove(d->tmp);
    g_free(d->tmp);
    g_free(d->pol);
    g_free(d->bin);
    g_free(d->prog);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(TrustDirs, trust_dirs_clear)

/* Makes @d's directories; returns d->tmp. */
static const char *
trust_dirs_init(TrustDirs *d, const char *name)
{
    d->tmp = av_test_tmpdir();
    d->pol = g_build_filename(d->tmp, "policies", NULL);
    d->bin = g_build_filename(d->tmp, "bin", NULL);
    d->prog = g_build_filename(d->bin, name, NULL);
    av_test_write(d->bin, name, "#!/bin/sh\nexit 0\n");
    g_assert_cmpint(chmod(d->prog, 0755), ==, 0);
    g_assert_cmpint(chmod(d->bin, 0755), ==, 0);
    g_assert_cmpint(g_mkdir_with_parents(d->pol, 0755), ==, 0);
    return d->tmp;
}

/* The program of a "command" step and the template of a "vm" step run or
 * are read as root: refused at load when someone else could change them,
 * when they do not exist, and (a template) without @HOSTDEV@. */
static void
test_trust_scrub_files(void)
{
    g_auto(TrustDirs) d = { 0 };
    const char *tmp = trust_dirs_init(&d, "scrub"), *pol = d.pol, *bin = d.bin, *prog = d.prog;
    g_autofree char *tmpl = g_build_filename(tmp, "scrub-vm.xml", NULL);
    g_autofree char *missing = g_build_filename(bin, "missing", NULL);
    static const char command[] = "{\"method\": \"command\", \"argv\": [\"@PATH@\", \"--all\"]}";
    static const char vm[] = "{\"method\": \"vm\", \"template\": \"@PATH@\"}";

    av_test_write(tmp, "scrub-vm.xml", "<domain type='kvm'><name>@NAME@</name><devices>@HOSTDEV@</devices></domain>");
    g_assert_cmpint(chmod(tmpl, 0644), ==, 0);

    /* command */
    write_step_policy(pol, command, prog);
    load_ok(pol);
    g_assert_cmpint(chmod(prog, 0775), ==, 0);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "10-scrub.json:2:44: profile 'gpu': 'scrub[0].argv[0]': refusing "
                        "the scrub program '", "it is writable by its group", NULL));
    g_assert_cmpint(chmod(prog, 0755), ==, 0);
    refused_given_away(pol, prog, "'scrub[0].argv[0]'");
    g_assert_cmpint(chmod(bin, 0777), ==, 0);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "the directory '", bin, NULL));
    g_assert_cmpint(chmod(bin, 0755), ==, 0);
    g_assert_cmpint(chmod(prog, 0644), ==, 0);
    g_free(load_refused(pol, AV_ERROR_POLICY, "is not executable (mode 0644)", NULL));
    g_assert_cmpint(chmod(prog, 0755), ==, 0);
    write_step_policy(pol, command, missing);
    g_free(load_refused(pol, AV_ERROR_POLICY, "'scrub[0].argv[0]': the scrub program '", "/bin/missing' does not exist",
                        NULL));
    write_step_policy(pol, command, bin);
    g_free(load_refused(pol, AV_ERROR_POLICY, "is not a regular file", NULL));
    /* a program behind a link to a trusted place */
    write_step_policy(pol, command, "/bin/sh");
    load_ok(pol);

    /* vm */
    write_step_policy(pol, vm, tmpl);
    load_ok(pol);
    g_assert_cmpint(chmod(tmpl, 0646), ==, 0);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "'scrub[0].template': refusing the scrub VM template '",
                        "it is writable by every user", NULL));
    g_assert_cmpint(chmod(tmpl, 0644), ==, 0);
    refused_given_away(pol, tmpl, "'scrub[0].template'");
    write_step_policy(pol, vm, missing);
    g_free(load_refused(pol, AV_ERROR_POLICY, "'scrub[0].template': the scrub VM template '", "does not exist", NULL));
    av_test_write(tmp, "scrub-vm.xml", "<domain type='kvm'><name>@NAME@</name><devices/></domain>");
    write_step_policy(pol, vm, tmpl);
    g_free(load_refused(pol, AV_ERROR_POLICY, "has no @HOSTDEV@ (outside comments), so its scrub VM would boot "
                        "without the device", NULL));
    /* named in a comment only, as the shipped template's header does */
    av_test_write(tmp, "scrub-vm.xml", "<!-- @HOSTDEV@: the device --><domain type='kvm'><devices><!--\n"
                                       "@HOSTDEV@ --></devices></domain><!-- @HOSTDEV@");
    g_free(load_refused(pol, AV_ERROR_POLICY, "has no @HOSTDEV@ (outside comments)", NULL));
    av_test_write(tmp, "scrub-vm.xml", "<!-- @HOSTDEV@ --><domain type='kvm'><devices><!-- x -->@HOSTDEV@"
                                       "</devices></domain>");
    load_ok(pol);

    /* The scrub VM's images are the scrubber: trusted as the template. */
    {
        g_autofree char *boot = g_build_filename(tmp, "boot", NULL);
        g_autofree char *kernel = g_build_filename(boot, "vmlinuz", NULL);
        g_autofree char *disk = g_build_filename(boot, "disk.img", NULL);
        g_autofree char *text = NULL;

        av_test_write(boot, "vmlinuz", "kernel");
        av_test_write(boot, "disk.img", "disk");
        g_assert_cmpint(chmod(boot, 0755), ==, 0);
        g_assert_cmpint(chmod(kernel, 0644), ==, 0);
        g_assert_cmpint(chmod(disk, 0644), ==, 0);
        text = g_strdup_printf("<domain type='kvm'><name>@NAME@</name><os><kernel>%s</kernel></os><devices>"
                               "<disk type='file'><source file='%s'/></disk>@HOSTDEV@"
                               "<serial><log file='/var/log/@NAME@.log'/></serial></devices></domain>",
                               kernel, disk);
        av_test_write(tmp, "scrub-vm.xml", text);
        load_ok(pol);
        g_assert_cmpint(chmod(kernel, 0664), ==, 0);
        g_free(load_refused(pol, AV_ERROR_UNSAFE, "boots from an image that cannot be trusted", "vmlinuz",
                            "writable by its group", NULL));
        g_assert_cmpint(chmod(kernel, 0644), ==, 0);
        refused_given_away(pol, disk, "boots from an image that cannot be trusted");
        g_assert_cmpint(chmod(boot, 0777), ==, 0);
        g_free(load_refused(pol, AV_ERROR_UNSAFE, "boots from an image that cannot be trusted", boot, NULL));
        g_assert_cmpint(chmod(boot, 0755), ==, 0);
        load_ok(pol);
    }

    /* A script an interpreter runs is a program too. */
    {
        static const char interp[] = "{\"method\": \"command\", \"argv\": [\"/bin/sh\", \"@PATH@\", \"/nonexistent/out\"]}";
        g_autofree char *script = g_build_filename(bin, "scrub.sh", NULL);

        av_test_write(bin, "scrub.sh", "exit 0\n");
        g_assert_cmpint(chmod(script, 0644), ==, 0);
        write_step_policy(pol, interp, script);
        load_ok(pol);
        g_assert_cmpint(chmod(script, 0666), ==, 0);
        g_free(load_refused(pol, AV_ERROR_UNSAFE, "'scrub[0].argv[1]'", "scrub program argument", "writable by its group and every user",
                            NULL));
        g_assert_cmpint(chmod(script, 0644), ==, 0);
        /* A script that does not exist yet, where anyone could create it. */
        {
            g_autofree char *open_dir = g_build_filename(tmp, "sticky", NULL);
            g_autofree char *planted = g_build_filename(open_dir, "later.sh", NULL);
            g_autofree char *text = NULL;

            g_assert_cmpint(g_mkdir_with_parents(open_dir, 0755), ==, 0);
            g_assert_cmpint(chmod(open_dir, 01777), ==, 0);
            write_step_policy(pol, interp, planted);
            g_free(load_refused(pol, AV_ERROR_UNSAFE, "'scrub[0].argv[1]'", "does not exist, and another user could "
                                "create it", NULL));
            /* nor an image */
            text = g_strdup_printf("<domain type='kvm'><os><kernel>%s/vmlinuz</kernel></os><devices>@HOSTDEV@"
                                   "</devices></domain>", open_dir);
            av_test_write(tmp, "scrub-vm.xml", text);
            write_step_policy(pol, vm, tmpl);
            g_free(load_refused(pol, AV_ERROR_UNSAFE, "names an image that cannot be trusted", "does not exist, and "
                                "another user could create it", NULL));
        }
    }
}

/* ---- matching ---- */

static void
test_match_pci(void)
{
    g_autoptr(AvPolicy) policy = policy_from_text(
        "{\"profiles\": ["
        " {\"name\": \"one-slot\", \"match\": {\"vendor\": \"0x10de\", \"address\": [\"0000:AF:00.0\"]}},"
        " {\"name\": \"subsys\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x20b5\","
        "   \"subsystem_vendor\": \"0x10de\", \"subsystem_device\": \"0x1533\"}},"
        " {\"name\": \"a100\", \"match\": {\"vendor\": \"0x10de\", \"device\": [\"0x20f1\", \"0x20b5\"]}},"
        " {\"name\": \"vga-exact\", \"match\": {\"vendor\": \"0x1002\", \"class\": \"0x030000\"}},"
        " {\"name\": \"display\", \"match\": {\"vendor\": \"0x1002\", \"class\": \"0x0300\"}},"
        " {\"name\": \"vgpu\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x2236\"},"
        "   \"attach\": \"mdev\", \"mdev_type\": \"nvidia-588\"},"
        " {\"name\": \"a10-whole\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x2236\"}},"
        " {\"name\": \"qat-vf\", \"match\": {\"vendor\": \"0x8086\", \"device\": \"0x4941\"}, \"attach\": \"sriov-vf\"},"
        " {\"name\": \"qat-pf\", \"match\": {\"vendor\": \"0x8086\", \"device\": [\"0x4940\", \"0x4941\"]}},"
        " {\"name\": \"intel-anything\", \"match\": {\"vendor\": \"0x8086\"}},"
        " {\"name\": \"usb-intel\", \"match\": {\"vendor\": \"0x8086\"}, \"attach\": \"usb\"}"
        "]}");
    g_autoptr(AvPciDevice_test) a100 = pci_new("0000:3b:00.0", 0x10de, 0x20b5, 0x030200);
    g_autoptr(AvPciDevice_test) a100_slot = pci_new("0000:af:00.0", 0x10de, 0x20b5, 0x030200);
    g_autoptr(AvPciDevice_test) a100_oem = pci_new("0000:3c:00.0", 0x10de, 0x20b5, 0x030200);
    g_autoptr(AvPciDevice_test) l40 = pci_new("0000:3d:00.0", 0x10de, 0x26b5, 0x030200);
    g_autoptr(AvPciDevice_test) vga = pci_new("0000:05:00.0", 0x1002, 0x740f, 0x030000);
    g_autoptr(AvPciDevice_test) vga_progif = pci_new("0000:06:00.0", 0x1002, 0x740f, 0x030001);
    g_autoptr(AvPciDevice_test) amd_3d = pci_new("0000:07:00.0", 0x1002, 0x740f, 0x030200);
    g_autoptr(AvPciDevice_test) a10_pf = pci_new("0000:41:00.0", 0x10de, 0x2236, 0x030200);
    g_autoptr(AvPciDevice_test) a10_vf = pci_new("0000:41:00.4", 0x10de, 0x2236, 0x030200);
    g_autoptr(AvPciDevice_test) a10_vf_other = pci_new("0000:41:00.5", 0x10de, 0x2236, 0x030200);
    g_autoptr(AvPciDevice_test) qat_pf = pci_new("0000:6b:00.0", 0x8086, 0x4940, 0x0b4000);
    g_autoptr(AvPciDevice_test) qat_vf = pci_new("0000:6b:00.1", 0x8086, 0x4941, 0x0b4000);
    g_autoptr(AvPciDevice_test) bridge = pci_new("0000:00:01.0", 0x8086, 0x1901, 0x060400);
    g_autoptr(AvPciDevice_test) host_bridge = pci_new("0000:00:00.0", 0x8086, 0x1900, 0x060000);
    g_autoptr(AvPciDevice_test) nic = pci_new("0000:00:1f.6", 0x8086, 0x15bb, 0x020000);

    a100_oem->subsystem_vendor_id = 0x10de;
    a100_oem->subsystem_device_id = 0x1533;
    a10_vf->physfn = g_strdup("0000:41:00.0");
    pci_add_mdev_type(a10_vf, "nvidia-587");
    pci_add_mdev_type(a10_vf, "nvidia-588");
    a10_vf_other->physfn = g_strdup("0000:41:00.0");
    pci_add_mdev_type(a10_vf_other, "nvidia-587");
    qat_vf->physfn = g_strdup("0000:6b:00.0");
    bridge->is_bridge = TRUE;

    /* first match wins; address, device lists, subsystem ids */
    g_assert_cmpstr(match_name(policy, a100_slot), ==, "one-slot");
    g_assert_cmpstr(match_name(policy, a100_oem), ==, "subsys");
    g_assert_cmpstr(match_name(policy, a100), ==, "a100");
    g_assert_null(match_name(policy, l40));
    /* class: 24 bits, then base class and subclass */
    g_assert_cmpstr(match_name(policy, vga), ==, "vga-exact");
    g_assert_cmpstr(match_name(policy, vga_progif), ==, "display");
    g_assert_null(match_name(policy, amd_3d));
    /* mdev: only parents that offer the type, VFs included; the PF falls
     * through to the vfio-pci profile; a VF never matches vfio-pci */
    g_assert_cmpstr(match_name(policy, a10_vf), ==, "vgpu");
    g_assert_cmpstr(match_name(policy, a10_pf), ==, "a10-whole");
    g_assert_null(match_name(policy, a10_vf_other));
    /* sriov-vf only VFs, vfio-pci never VFs */
    g_assert_cmpstr(match_name(policy, qat_vf), ==, "qat-vf");
    g_assert_cmpstr(match_name(policy, qat_pf), ==, "qat-pf");
    qat_vf->device_id = 0x4942;
    g_assert_null(match_name(policy, qat_vf));
    /* a vendor-wide profile never takes bridges */
    g_assert_cmpstr(match_name(policy, nic), ==, "intel-anything");
    g_assert_null(match_name(policy, bridge));
    g_assert_null(match_name(policy, host_bridge));

    g_assert_null(av_policy_match_pci(NULL, a100));
    g_assert_null(av_policy_match_pci(policy, NULL));
}

static void
test_match_usb(void)
{
    g_autoptr(AvPolicy) policy = policy_from_text(
        "{\"profiles\": ["
        " {\"name\": \"pci-movidius\", \"match\": {\"vendor\": \"0x03e7\"}},"
        " {\"name\": \"ncs2-port\", \"match\": {\"vendor\": \"0x03e7\", \"address\": [\"1-1.2\", \"3-4\"]}, \"attach\": \"usb\"},"
        " {\"name\": \"ncs2\", \"match\": {\"vendor\": \"0x03e7\", \"device\": [\"0x2485\", \"0xf63b\"]}, \"attach\": \"usb\"},"
        " {\"name\": \"coral\", \"match\": {\"vendor\": \"0x1a6e\", \"device\": \"0x089a\"}, \"attach\": \"usb\"}"
        "]}");
    g_autoptr(AvUsbDevice_test) ncs2 = usb_new("1-4", 0x03e7, 0x2485);
    g_autoptr(AvUsbDevice_test) ncs2_booted = usb_new("1-4", 0x03e7, 0xf63b);
    g_autoptr(AvUsbDevice_test) ncs2_port = usb_new("1-1.2", 0x03e7, 0x1234);
    g_autoptr(AvUsbDevice_test) other = usb_new("1-5", 0x03e7, 0x1234);
    g_autoptr(AvUsbDevice_test) coral = usb_new("2-1", 0x1a6e, 0x089a);
    g_autoptr(AvUsbDevice_test) coral_ready = usb_new("2-1", 0x18d1, 0x9302);
    g_autoptr(AvPciDevice_test) pci = pci_new("0000:01:00.0", 0x1a6e, 0x089a, 0x120000);

    g_assert_cmpstr(av_policy_match_usb(policy, ncs2)->name, ==, "ncs2");
    g_assert_cmpstr(av_policy_match_usb(policy, ncs2_booted)->name, ==, "ncs2");
    g_assert_cmpstr(av_policy_match_usb(policy, ncs2_port)->name, ==, "ncs2-port");
    g_assert_null(av_policy_match_usb(policy, other));
    g_assert_cmpstr(av_policy_match_usb(policy, coral)->name, ==, "coral");
    g_assert_null(av_policy_match_usb(policy, coral_ready));
    /* usb profiles never match PCI devices */
    g_assert_null(av_policy_match_pci(policy, pci));
    g_assert_null(av_policy_match_usb(NULL, ncs2));
}

/* ---- output and the shipped examples ---- */

static void
test_to_string(void)
{
    g_assert_cmpstr(av_attach_to_string(AV_ATTACH_SRIOV_VF), ==, "sriov-vf");
    g_assert_cmpstr(av_attach_to_string(AV_ATTACH_VFIO_PCI), ==, "vfio-pci");
    g_assert_cmpstr(av_numa_policy_to_string(AV_NUMA_STRICT), ==, "strict");
    g_assert_cmpstr(av_allocation_to_string(AV_ALLOCATION_SPREAD), ==, "spread");
    g_assert_cmpstr(av_granularity_to_string(AV_GRANULARITY_REGION), ==, "region");
    g_assert_cmpstr(av_restore_driver_to_string(AV_RESTORE_KEEP_VFIO), ==, "keep-vfio");
    g_assert_cmpstr(av_scrub_method_to_string(AV_SCRUB_METHOD_VFIO_ZERO), ==, "vfio-zero");
    g_assert_cmpstr(av_scrub_method_to_string(AV_SCRUB_METHOD_ROM_CHECK), ==, "rom-check");
}

/* av_profile_to_json() of every profile of @policy, wrapped as a document,
 * must load again to the same JSON. */
static void
check_round_trip(const AvPolicy *policy)
{
    g_autoptr(json_t) doc = json_pack("{s:[]}", "profiles");
    g_autoptr(AvPolicy) again = av_policy_new();
    g_autoptr(GError) err = NULL;
    g_autofree char *text = NULL;

    for (guint i = 0; i < policy->profiles->len; i++)
        json_array_append_new(json_object_get(doc, "profiles"), av_profile_to_json(g_ptr_array_index(policy->profiles, i)));
    text = av_json_dump_pretty(doc);
    if (!av_policy_add_data(again, "round-trip.json", text, strlen(text), &err))
        g_error("%s\n%s", err->message, text);
    g_assert_cmpuint(again->profiles->len, ==, policy->profiles->len);
    for (guint i = 0; i < policy->profiles->len; i++) {
        g_autoptr(json_t) a = av_profile_to_json(g_ptr_array_index(policy->profiles, i));
        g_autoptr(json_t) b = av_profile_to_json(g_ptr_array_index(again->profiles, i));
        g_autofree char *ta = av_json_dump_pretty(a);
        g_autofree char *tb = av_json_dump_pretty(b);

        g_assert_cmpstr(ta, ==, tb);
    }
}

/* The normalised form of the profile @name of @policy, for `accelvirt
 * policy show`, is @expected (compact JSON). */
static void
assert_profile_json(const AvPolicy *policy, const char *name, const char *expected)
{
    g_autoptr(json_t) j = av_profile_to_json(av_policy_find(policy, name));
    g_autofree char *text = av_json_dump_compact(j);

    g_assert_cmpstr(text, ==, expected);
}

static void
test_round_trip(void)
{
    g_autofree char *dir = good_dir_copy();
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = av_policy_load_dir(dir, &err);

    g_assert_no_error(err);
    check_round_trip(policy);

    /* the normalised form of one profile, for `accelvirt policy show` */
    assert_profile_json(policy, "gpu-any-3d",
                    "{\"name\":\"gpu-any-3d\",\"match\":{\"vendor\":\"0x10de\",\"class\":\"0x030200\"},"
                    "\"attach\":\"vfio-pci\",\"vfio_driver\":\"auto\",\"numa\":\"preferred\",\"allocation\":\"pack\",\"granularity\":\"card\","
                    "\"scrub\":[{\"method\":\"reset\"}],\"restore_driver\":\"on-release\",\"hide_hypervisor\":false,"
                    "\"traits\":[]}");
    av_test_tmpdir_remove(dir);
}

/* "vfs", "vfs_shrink" and "match.pf": which PFs a profile makes VFs on
 * (av_policy_match_sriov_pf()), which VFs it takes, and the round trip. */
static void
test_sriov_vfs(void)
{
    g_autoptr(AvPolicy) policy = policy_from_text(
        "{\"profiles\": ["
        " {\"name\": \"qat-one\", \"match\": {\"vendor\": \"0x8086\", \"pf\": \"0000:6B:00.0\"},"
        "  \"attach\": \"sriov-vf\", \"vfs\": \"on-demand\", \"vfs_shrink\": true},"
        " {\"name\": \"qat-vf\", \"match\": {\"vendor\": \"0x8086\", \"device\": \"0x4941\"},"
        "  \"attach\": \"sriov-vf\", \"vfs\": 4},"
        " {\"name\": \"old-vf\", \"match\": {\"vendor\": \"0x8086\", \"device\": \"0x37c9\"}, \"attach\": \"sriov-vf\"}"
        "]}");
    g_autoptr(AvPciDevice_test) pf = pci_new("0000:6b:00.0", 0x8086, 0x4940, 0x0b4000);
    g_autoptr(AvPciDevice_test) pf2 = pci_new("0000:6c:00.0", 0x8086, 0x4940, 0x0b4000);
    g_autoptr(AvPciDevice_test) c62x = pci_new("0000:6d:00.0", 0x8086, 0x37c8, 0x0b4000);
    g_autoptr(AvPciDevice_test) vf = pci_new("0000:6b:00.1", 0x8086, 0x4941, 0x0b4000);
    g_autoptr(AvPciDevice_test) vf2 = pci_new("0000:6c:00.1", 0x8086, 0x4941, 0x0b4000);
    const AvProfile *p;

    for (AvPciDevice *d = pf; d; d = d == pf ? pf2 : d == pf2 ? c62x : NULL) {
        d->sriov_capable = TRUE;
        d->sriov_totalvfs = 16;
        d->sriov_vf_device_set = TRUE;
        d->sriov_vf_device = d == c62x ? 0x37c9 : 0x4941;
    }
    vf->physfn = g_strdup("0000:6b:00.0");
    vf2->physfn = g_strdup("0000:6c:00.0");

    p = av_policy_find(policy, "qat-one");
    g_assert_true(av_profile_makes_vfs(p));
    g_assert_true(p->vfs_on_demand && p->vfs_shrink);
    g_assert_cmpuint(av_profile_vfs_base(p), ==, 0);
    g_assert_cmpstr(g_ptr_array_index(p->match_pfs, 0), ==, "0000:6b:00.0");
    p = av_policy_find(policy, "qat-vf");
    g_assert_cmpuint(av_profile_vfs_base(p), ==, 4);
    g_assert_false(p->vfs_shrink);
    g_assert_false(av_profile_makes_vfs(av_policy_find(policy, "old-vf")));

    /* the PF named by match.pf first; another PF by its sriov_vf_device */
    g_assert_cmpstr(av_policy_match_sriov_pf(policy, pf)->name, ==, "qat-one");
    g_assert_cmpstr(av_policy_match_sriov_pf(policy, pf2)->name, ==, "qat-vf");
    /* a profile without "vfs" makes none */
    g_assert_null(av_policy_match_sriov_pf(policy, c62x));
    /* a VF, a PF that does not say its VFs' id, a function without SR-IOV */
    g_assert_null(av_policy_match_sriov_pf(policy, vf));
    pf2->sriov_vf_device_set = FALSE;
    g_assert_null(av_policy_match_sriov_pf(policy, pf2));
    pf->sriov_capable = FALSE;
    g_assert_null(av_policy_match_sriov_pf(policy, pf));
    /* VFs: match.pf takes those of its PFs only */
    g_assert_cmpstr(match_name(policy, vf), ==, "qat-one");
    g_assert_cmpstr(match_name(policy, vf2), ==, "qat-vf");

    check_round_trip(policy);
}

static void
test_shipped(void)
{
    g_autofree char *dir = av_test_srcdir_path("../policies");
    static const char *const files[] = {
        "amd-instinct.json", "fpga-alveo.json", "intel-qat-vf.json", "nvidia-datacenter.json", "usb-ai-stick.json",
    };
    g_autoptr(GError) err = NULL;
    /* Read as documents: the programs and templates their steps name are
     * the operator's to install (the load of the policy dir checks them). */
    g_autoptr(AvPolicy) all = av_policy_new();
    g_autoptr(AvPciDevice_test) a100 = pci_new("0000:3b:00.0", 0x10de, 0x20b5, 0x030200);
    g_autoptr(AvPciDevice_test) u250_mgmt = pci_new("0000:5e:00.0", 0x10ee, 0x5004, 0x120000);
    g_autoptr(AvPciDevice_test) u250_user = pci_new("0000:5e:00.1", 0x10ee, 0x5005, 0x120000);
    g_autoptr(AvPciDevice_test) qat_vf = pci_new("0000:6b:00.1", 0x8086, 0x4941, 0x0b4000);
    g_autoptr(AvUsbDevice_test) coral = usb_new("2-1", 0x18d1, 0x9302);

    /* all of them together: names are unique across the files */
    for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
        g_autofree char *path = g_build_filename(dir, files[i], NULL);
        g_autofree char *text = NULL;
        g_autoptr(AvPolicy) one = av_policy_new();
        gsize len;

        g_assert_true(g_file_get_contents(path, &text, &len, NULL));
        if (!av_policy_add_data(one, path, text, len, &err) || !av_policy_add_data(all, path, text, len, &err))
            g_error("%s", err->message);
        g_assert_cmpuint(one->profiles->len, >, 0);
    }
    check_round_trip(all);
    /* The shipped examples scrub with steps that can clear their devices,
     * but for the FPGA card, whose DDR only the vendor's tools in a scrub
     * VM clear (its program-base step takes the last tenant's design off):
     * policy check says so, and that XRT's xbmgmt is missing where it is. */
    for (guint i = 0; i < all->profiles->len; i++) {
        const AvProfile *p = g_ptr_array_index(all->profiles, i);
        g_autoptr(GPtrArray) w = av_profile_scrub_warnings(p);

        if (g_str_equal(p->name, "fpga-alveo-u250")) {
            gboolean xrt = g_file_test("/opt/xilinx/xrt/bin/xbmgmt", G_FILE_TEST_EXISTS);

            g_assert_cmpuint(w->len, ==, xrt ? 1 : 2);
            if (!xrt)
                g_assert_cmpstr(g_ptr_array_index(w, 0), ==, "'program' runs '/opt/xilinx/xrt/bin/xbmgmt', which is "
                                "not installed: until it is, no device is programmed (a domain that asks for a "
                                "bitstream does not start, a 'program-base' step quarantines the device)");
            g_assert_true(g_str_has_prefix(g_ptr_array_index(w, w->len - 1), "no scrub step clears the device's memory"));
            g_assert_cmpint(p->program->driver, ==, AV_PROGRAM_DRIVER_HOST);
            g_assert_cmpstr(p->program->base, ==, "u250-clear");
            g_assert_cmpint(((AvScrubStep *)g_ptr_array_index(p->scrub, 0))->method, ==, AV_SCRUB_METHOD_PROGRAM_BASE);
        } else if (w->len) {
            g_error("shipped profile '%s': %s", p->name, (const char *)g_ptr_array_index(w, 0));
        }
    }
    g_assert_cmpuint(av_policy_find(all, "gpu-rtx-a6000")->memory, ==, 48ull << 30);
    g_assert_true(av_policy_find(all, "gpu-rtx-a6000")->min_coverage == 0);
    g_assert_cmpuint(av_policy_find(all, "amd-instinct-64g")->memory, ==, 64ull << 30);
    g_assert_true(av_policy_find(all, "amd-instinct-mi100")->min_coverage == 1.0);

    g_assert_cmpstr(match_name(all, a100), ==, "gpu-passthrough");
    g_assert_cmpstr(match_name(all, u250_mgmt), ==, "fpga-alveo-u250");
    g_assert_cmpstr(match_name(all, u250_user), ==, "fpga-alveo-u250");
    g_assert_null(match_name(all, qat_vf));
    qat_vf->physfn = g_strdup("0000:6b:00.0");
    g_assert_cmpstr(match_name(all, qat_vf), ==, "qat-vf");
    g_assert_cmpstr(av_policy_match_usb(all, coral)->name, ==, "usb-ai-stick-coral-ready");
    g_assert_cmpint(av_policy_find(all, "gpu-passthrough")->numa, ==, AV_NUMA_STRICT);
    g_assert_cmpuint(av_policy_find(all, "gpu-passthrough")->scrub->len, ==, 3);
    g_assert_cmpint(av_policy_find(all, "qat-vf")->allocation, ==, AV_ALLOCATION_PACK);
    g_assert_cmpint(av_policy_find(all, "usb-ai-stick")->attach, ==, AV_ATTACH_USB);
    g_assert_cmpuint(av_policy_find(all, "usb-ai-stick")->scrub->len, ==, 1);
    g_assert_cmpint(((AvScrubStep *)g_ptr_array_index(av_policy_find(all, "usb-ai-stick")->scrub, 0))->method, ==,
                    AV_SCRUB_METHOD_USB_POWER_CYCLE);
    g_assert_true(av_profile_runtime_id(av_policy_find(all, "usb-ai-stick"), 0x03e7, 0xf63b));
}

static int
compare_names(gconstpointer a, gconstpointer b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* One test a file of tests/data/policies/bad, in name order. */
static void
add_bad_tests(void)
{
    g_autofree char *dir = av_test_srcdir_path("data/policies/bad");
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
    const char *name;

    g_assert_nonnull(d);
    while ((name = g_dir_read_name(d))) {
        if (g_str_has_suffix(name, ".json"))
            g_ptr_array_add(names, g_strdup(name));
    }
    g_assert_cmpuint(names->len, >, 0);
    g_ptr_array_sort(names, compare_names);
    for (guint i = 0; i < names->len; i++) {
        const char *n = g_ptr_array_index(names, i);
        g_autofree char *test = g_strdup_printf("/policy/bad/%.*s", (int)(strlen(n) - 5), n);
        char *path = g_build_filename(dir, n, NULL);

        g_test_add_data_func_full(test, path, test_bad_file, g_free);
    }
}

/* Ids as `lspci -n` and Nova's [pci] device_spec write them ("10de") as well
 * as "0x10de"; class codes "0302", "030200" as well as "0x0302".  Every other
 * spelling is refused with the message that names both forms. */
static void
test_id_forms(void)
{
    static const struct {
        const char *text;
        guint16 value;
    } good[] = {
        { "10de", 0x10de }, { "10DE", 0x10de }, { "0x10de", 0x10de }, { "0x10DE", 0x10de },
        { "1", 0x0001 }, { "0x1", 0x0001 }, { "ffff", 0xffff }, { "0000", 0x0000 },
    };
    static const char *const bad[] = {
        "", "0x", "10de0", "g0de", " 10de", "10de ", "0X10de", "-1", "+10de", "0x10de0", "x10de",
        "0xg0de", "10 de",
    };
    static const struct {
        const char *text;
        guint32 code;
        guint32 mask;
    } good_class[] = {
        { "0302", 0x030200, 0xffff00 }, { "0x0302", 0x030200, 0xffff00 },
        { "030200", 0x030200, 0xffffff }, { "0x030201", 0x030201, 0xffffff }, { "0C03", 0x0c0300, 0xffff00 },
    };
    static const char *const bad_class[] = { "", "0x", "03", "03020", "0x03020", "0302000", "g302", " 0302" };

    for (gsize i = 0; i < G_N_ELEMENTS(good); i++) {
        g_autofree char *text = g_strdup_printf(
            "{\"profiles\": [{\"name\": \"gpu\", \"match\": {\"vendor\": \"%s\", \"device\": \"%s\","
            " \"subsystem_vendor\": \"%s\", \"subsystem_device\": \"%s\"},"
            " \"companions\": [{\"vendor\": \"%s\", \"device\": \"%s\"}]}]}",
            good[i].text, good[i].text, good[i].text, good[i].text, good[i].text, good[i].text);
        g_autoptr(AvPolicy) policy = policy_from_text(text);
        const AvProfile *p = av_policy_find(policy, "gpu");
        const AvCompanionMatch *c;

        g_assert_nonnull(p);
        g_assert_true(p->match_vendor_set);
        g_assert_cmphex(p->match_vendor, ==, good[i].value);
        g_assert_cmpuint(p->match_devices->len, ==, 1);
        g_assert_cmphex(g_array_index(p->match_devices, guint16, 0), ==, good[i].value);
        g_assert_cmphex(p->match_subsystem_vendor, ==, good[i].value);
        c = g_ptr_array_index(p->companions, 0);
        g_assert_cmphex(c->vendor, ==, good[i].value);
        g_assert_cmphex(g_array_index(c->devices, guint16, 0), ==, good[i].value);
    }
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        static const char *const fields[] = { "vendor", "device", "subsystem_vendor", "subsystem_device" };

        for (gsize f = 0; f < G_N_ELEMENTS(fields); f++) {
            g_autofree char *text = g_strdup_printf(
                "{\"profiles\": [{\"name\": \"gpu\", \"match\": {%s\"%s\": \"%s\"}}]}",
                f == 0 ? "" : "\"vendor\": \"10de\", ", fields[f], bad[i]);
            g_autofree char *want = g_strdup_printf("'match.%s' is ", fields[f]);
            g_autoptr(AvPolicy) policy = av_policy_new();
            g_autoptr(GError) err = NULL;

            if (av_policy_add_data(policy, "test.json", text, strlen(text), &err))
                g_error("'%s' accepted as %s", bad[i], fields[f]);
            g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
            g_assert_true(g_str_has_prefix(err->message, "test.json:1:"));
            if (!strstr(err->message, want))
                g_error("unexpected message for %s '%s': %s", fields[f], bad[i], err->message);
            if (!strstr(err->message, "such as '10de' or '0x10de'") &&
                !strstr(err->message, "expected 0000 to ffff (or 0x0000 to 0xffff)"))
                g_error("message for '%s' names neither form: %s", bad[i], err->message);
        }
    }
    for (gsize i = 0; i < G_N_ELEMENTS(good_class); i++) {
        g_autofree char *text = g_strdup_printf(
            "{\"profiles\": [{\"name\": \"gpu\", \"match\": {\"vendor\": \"10de\", \"class\": \"%s\"},"
            " \"companions\": [{\"class\": \"%s\"}]}]}", good_class[i].text, good_class[i].text);
        g_autoptr(AvPolicy) policy = policy_from_text(text);
        const AvProfile *p = av_policy_find(policy, "gpu");
        const AvCompanionMatch *c = g_ptr_array_index(p->companions, 0);

        g_assert_cmphex(p->match_class, ==, good_class[i].code);
        g_assert_cmphex(p->match_class_mask, ==, good_class[i].mask);
        g_assert_cmphex(c->class_code, ==, good_class[i].code);
        g_assert_cmphex(c->class_mask, ==, good_class[i].mask);
    }
    for (gsize i = 0; i < G_N_ELEMENTS(bad_class); i++) {
        g_autofree char *text = g_strdup_printf(
            "{\"profiles\": [{\"name\": \"gpu\", \"match\": {\"vendor\": \"10de\", \"class\": \"%s\"}}]}",
            bad_class[i]);
        g_autoptr(AvPolicy) policy = av_policy_new();
        g_autoptr(GError) err = NULL;

        if (av_policy_add_data(policy, "test.json", text, strlen(text), &err))
            g_error("class '%s' accepted", bad_class[i]);
        g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
        g_assert_nonnull(strstr(err->message, "'match.class' is not a class code"));
        g_assert_nonnull(strstr(err->message, "such as '0302' or '0x0302'"));
    }
}

/* "match": {"mdev_parent": ...}: an mdev profile that takes parents by
 * their name in /sys/class/mdev_bus, PCI or not. */
static void
test_match_mdev_parent(void)
{
    g_autoptr(AvPolicy) policy = policy_from_text(
        "{\"profiles\": ["
        " {\"name\": \"serial\", \"match\": {\"mdev_parent\": \"mtty\"}, \"attach\": \"mdev\", \"mdev_type\": \"mtty-2\"},"
        " {\"name\": \"serial1\", \"match\": {\"mdev_parent\": [\"mtty\", \"matrix\"]}, \"attach\": \"mdev\", \"mdev_type\": \"mtty-1\"},"
        " {\"name\": \"one-a10\", \"match\": {\"mdev_parent\": [\"0000:98:00.0\"]}, \"attach\": \"mdev\", \"mdev_type\": \"nvidia-590\"},"
        " {\"name\": \"a10\", \"match\": {\"vendor\": \"0x10de\"}, \"attach\": \"mdev\", \"mdev_type\": \"nvidia-590\"}"
        "]}");
    g_autoptr(AvPciDevice_test) a10_0 = pci_new("0000:17:00.0", 0x10de, 0x2236, 0x030200);
    g_autoptr(AvPciDevice_test) a10_1 = pci_new("0000:98:00.0", 0x10de, 0x2236, 0x030200);
    g_autoptr(GPtrArray) mtty_types = g_ptr_array_new();
    AvMdevType mtty1 = { .id = (char *)"mtty-1" }, mtty2 = { .id = (char *)"mtty-2" };
    AvMdevParent mtty = { .name = (char *)"mtty", .numa_node = -1 };
    AvMdevParent other = { .name = (char *)"other", .numa_node = -1 };
    AvMdevParent pci0 = { .name = (char *)"0000:17:00.0", .numa_node = -1 };
    AvMdevParent pci1 = { .name = (char *)"0000:98:00.0", .numa_node = -1 };
    const AvProfile *p;
    g_autoptr(json_t) j = NULL;

    pci_add_mdev_type(a10_0, "nvidia-590");
    pci_add_mdev_type(a10_1, "nvidia-590");
    g_ptr_array_add(mtty_types, &mtty2);
    mtty.types = mtty_types;
    other.types = mtty_types;
    pci0.pci = a10_0;
    pci0.types = a10_0->mdev_types;
    pci1.pci = a10_1;
    pci1.types = a10_1->mdev_types;

    /* No vendor needed; the first profile naming the parent and whose type it offers. */
    p = av_policy_find(policy, "serial");
    g_assert_cmpuint(p->match_mdev_parents->len, ==, 1);
    g_assert_false(p->match_vendor_set);
    g_assert_true(av_policy_match_mdev_parent(policy, &mtty) == p);
    g_assert_null(av_policy_match_mdev_parent(policy, &other));
    /* A parent offering only mtty-1 goes to the profile of that type. */
    g_ptr_array_set_size(mtty_types, 0);
    g_ptr_array_add(mtty_types, &mtty1);
    g_assert_true(av_policy_match_mdev_parent(policy, &mtty) == av_policy_find(policy, "serial1"));
    g_ptr_array_set_size(mtty_types, 0);
    g_assert_null(av_policy_match_mdev_parent(policy, &mtty));

    /* PCI parents through av_policy_match_pci(): named by address, or by ids. */
    g_assert_true(av_policy_match_pci(policy, a10_1) == av_policy_find(policy, "one-a10"));
    g_assert_true(av_policy_match_mdev_parent(policy, &pci1) == av_policy_find(policy, "one-a10"));
    g_assert_true(av_policy_match_pci(policy, a10_0) == av_policy_find(policy, "a10"));
    g_assert_true(av_policy_match_mdev_parent(policy, &pci0) == av_policy_find(policy, "a10"));
    g_assert_null(av_policy_match_mdev_parent(policy, NULL));
    g_assert_null(av_policy_match_mdev_parent(NULL, &mtty));

    /* A vfio-pci profile matching a PCI parent is no mdev profile for it. */
    {
        g_autoptr(AvPolicy) vfio = policy_from_text(
            "{\"profiles\": [{\"name\": \"pass\", \"match\": {\"vendor\": \"0x10de\"}}]}");

        g_assert_nonnull(av_policy_match_pci(vfio, a10_0));
        g_assert_null(av_policy_match_mdev_parent(vfio, &pci0));
    }

    /* Normalised for policy show; a PCI address in upper case is stored lower. */
    j = av_profile_to_json(av_policy_find(policy, "serial1"));
    g_assert_cmpuint(json_array_size(json_object_get(json_object_get(j, "match"), "mdev_parent")), ==, 2);
    {
        g_autoptr(AvPolicy) upper = policy_from_text(
            "{\"profiles\": [{\"name\": \"u\", \"match\": {\"mdev_parent\": \"0000:AB:00.0\"}, "
            "\"attach\": \"mdev\", \"mdev_type\": \"nvidia-590\"}]}");

        g_assert_cmpstr(g_ptr_array_index(av_policy_find(upper, "u")->match_mdev_parents, 0), ==, "0000:ab:00.0");
    }
}

/* The USB scrub methods (issue 13): usb-reauthorize's timeout defaults to
 * 10 s; both names round-trip. */
static void
test_usb_scrub_methods(void)
{
    g_autoptr(AvPolicy) policy = policy_from_text(
        "{\"profiles\": [{\"name\": \"stick\", \"match\": {\"vendor\": \"0x03e7\"}, \"attach\": \"usb\","
        " \"scrub\": [{\"method\": \"usb-reset\"}, {\"method\": \"usb-reauthorize\"},"
        " {\"method\": \"usb-reauthorize\", \"timeout\": 30}]}]}");
    const AvProfile *p = av_policy_find(policy, "stick");
    const AvScrubStep *s;

    g_assert_nonnull(p);
    g_assert_cmpuint(p->scrub->len, ==, 3);
    s = g_ptr_array_index(p->scrub, 0);
    g_assert_cmpint(s->method, ==, AV_SCRUB_METHOD_USB_RESET);
    g_assert_cmpstr(av_scrub_method_to_string(s->method), ==, "usb-reset");
    g_assert_cmpuint(s->timeout_s, ==, 0);
    s = g_ptr_array_index(p->scrub, 1);
    g_assert_cmpint(s->method, ==, AV_SCRUB_METHOD_USB_REAUTHORIZE);
    g_assert_cmpstr(av_scrub_method_to_string(s->method), ==, "usb-reauthorize");
    g_assert_cmpuint(s->timeout_s, ==, 10);
    g_assert_cmpint(json_integer_value(json_object_get(s->options, "timeout")), ==, 10);
    s = g_ptr_array_index(p->scrub, 2);
    g_assert_cmpuint(s->timeout_s, ==, 30);
}

/* A stick whose firmware changes its ids (issue 34): "runtime_ids" and
 * "usb-power-cycle" (its timeout defaults to 10 s) load, print and load
 * back; the ids are case-insensitive and printed in lower case. */
static void
test_usb_runtime_ids(void)
{
    g_autoptr(AvPolicy) policy = policy_from_text(
        "{\"profiles\": [{\"name\": \"stick\", \"match\": {\"vendor\": \"0x03e7\", \"device\": \"0x2485\"},"
        " \"attach\": \"usb\", \"runtime_ids\": [\"03E7:F63B\", \"03e7:f63c\"],"
        " \"scrub\": [{\"method\": \"usb-power-cycle\"}, {\"method\": \"usb-power-cycle\", \"timeout\": 3}]}]}");
    const AvProfile *p = av_policy_find(policy, "stick");
    g_autoptr(json_t) j = av_profile_to_json(p);
    const AvScrubStep *s;

    g_assert_cmpuint(p->runtime_ids->len, ==, 2);
    g_assert_true(av_profile_runtime_id(p, 0x03e7, 0xf63b));
    g_assert_true(av_profile_runtime_id(p, 0x03e7, 0xf63c));
    g_assert_false(av_profile_runtime_id(p, 0x03e7, 0x2485));
    g_assert_false(av_profile_runtime_id(NULL, 0x03e7, 0xf63b));
    g_assert_cmpstr(json_string_value(json_array_get(json_object_get(j, "runtime_ids"), 0)), ==, "03e7:f63b");
    s = g_ptr_array_index(p->scrub, 0);
    g_assert_cmpint(s->method, ==, AV_SCRUB_METHOD_USB_POWER_CYCLE);
    g_assert_cmpstr(av_scrub_method_to_string(s->method), ==, "usb-power-cycle");
    g_assert_cmpuint(s->timeout_s, ==, 10);
    s = g_ptr_array_index(p->scrub, 1);
    g_assert_cmpuint(s->timeout_s, ==, 3);
    check_round_trip(policy);
    /* A profile without them has none. */
    {
        g_autoptr(AvPolicy) plain = policy_from_text(
            "{\"profiles\": [{\"name\": \"stick\", \"match\": {\"vendor\": \"0x03e7\"}, \"attach\": \"usb\"}]}");
        g_autoptr(json_t) k = av_profile_to_json(av_policy_find(plain, "stick"));

        g_assert_cmpuint(av_policy_find(plain, "stick")->runtime_ids->len, ==, 0);
        g_assert_null(json_object_get(k, "runtime_ids"));
    }
}

/* Issue 34: attach "netdev" (an IP-over-PCIe card on its host driver):
 * the name round-trips, the default granularity is function and the
 * default scrub a reset (through sysfs); reset and command load. */
static void
test_netdev_attach(void)
{
    g_autoptr(AvPolicy) policy = policy_from_text(
        "{\"profiles\": ["
        " {\"name\": \"vca\", \"match\": {\"vendor\": \"0x8086\", \"device\": \"0x2953\"}, \"attach\": \"netdev\"},"
        " {\"name\": \"vca-cmd\", \"match\": {\"vendor\": \"0x8086\", \"device\": \"0x2954\"}, \"attach\": \"netdev\","
        "  \"scrub\": [{\"method\": \"reset\"}, {\"method\": \"command\", \"argv\": [\"/usr/bin/true\"]}]}"
        "]}");
    const AvProfile *p = av_policy_find(policy, "vca");

    g_assert_nonnull(p);
    g_assert_cmpint(p->attach, ==, AV_ATTACH_NETDEV);
    g_assert_cmpstr(av_attach_to_string(p->attach), ==, "netdev");
    g_assert_cmpint(p->granularity, ==, AV_GRANULARITY_FUNCTION);
    g_assert_cmpuint(p->scrub->len, ==, 1);     /* default: reset */
    g_assert_cmpint(((AvScrubStep *)g_ptr_array_index(p->scrub, 0))->method, ==, AV_SCRUB_METHOD_RESET);
    p = av_policy_find(policy, "vca-cmd");
    g_assert_nonnull(p);
    g_assert_cmpuint(p->scrub->len, ==, 2);
}

/* ---- programs and driver commands (issue 15) ---- */

/* A profile's "program", its driver commands and the scrub method
 * "program-base": what loads, the defaults, what policy show prints (and
 * loads back), and what policy check warns of. */
static void
test_program(void)
{
    g_autoptr(AvPolicy) policy = policy_from_text(
        "{\"profiles\": ["
        " {\"name\": \"fpga\", \"match\": {\"vendor\": \"0x10ee\", \"device\": \"0x5004\"},"
        "  \"program\": {\"argv\": [\"/opt/xilinx/xrt/bin/xbmgmt\", \"program\", \"--device\", \"{card}\", \"--user\","
        "   \"{bitstream}\"], \"verify\": [\"/usr/libexec/check\", \"{card}\", \"{sha256}\"], \"timeout\": 120,"
        "   \"base\": \"u250-clear\", \"driver\": \"host\"},"
        "  \"scrub\": [{\"method\": \"program-base\"}, {\"method\": \"reset\"}],"
        "  \"on_prepare\": {\"argv\": [\"/usr/libexec/prep\", \"{address}\", \"{domain_uuid}\"]},"
        "  \"on_assign\": {\"argv\": [\"/usr/libexec/assign\", \"--fn={function_id}\"], \"timeout\": 900}},"
        " {\"name\": \"fpga-vfio\", \"match\": {\"vendor\": \"0x1234\", \"device\": \"0x11e8\"}, \"restore_driver\": \"keep-vfio\","
        "  \"program\": {\"argv\": [\"/usr/bin/true\", \"{address}\", \"{bitstream}\"],"
        "   \"base\": \"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"}},"
        " {\"name\": \"fpga-vf\", \"match\": {\"vendor\": \"0x8086\", \"device\": \"0x0b31\"}, \"attach\": \"sriov-vf\","
        "  \"restore_driver\": \"keep-vfio\", \"program\": {\"argv\": [\"/usr/bin/true\", \"--bus\", \"{card}\","
        "   \"--region\", \"{region}\", \"{bitstream}\"], \"base\": \"n3000-base\"},"
        "  \"scrub\": [{\"method\": \"program-base\"}, {\"method\": \"vfio-zero\"}]},"
        " {\"name\": \"stick\", \"match\": {\"vendor\": \"0x03e7\"}, \"attach\": \"usb\","
        "  \"on_prepare\": {\"argv\": [\"/usr/libexec/stick\", \"up\", \"{address}\"], \"timeout\": 30},"
        "  \"on_release\": {\"argv\": [\"/usr/libexec/stick\", \"down\", \"{address}\"]},"
        "  \"on_free\": {\"argv\": [\"/usr/libexec/stick\", \"idle\", \"{identity}\"], \"timeout\": 86400}},"
        " {\"name\": \"serial\", \"match\": {\"mdev_parent\": \"mtty\"}, \"attach\": \"mdev\", \"mdev_type\": \"mtty-2\","
        "  \"on_assign\": {\"argv\": [\"/usr/libexec/tty\", \"{address}\", \"{domain_name}\", \"{profile}\"]}}"
        "]}");
    const AvProfile *p = av_policy_find(policy, "fpga");
    const AvScrubStep *step;
    g_autoptr(GPtrArray) w = NULL;

    /* everything as written */
    g_assert_nonnull(p->program);
    g_assert_cmpuint(json_array_size(p->program->argv), ==, 6);
    g_assert_cmpstr(json_string_value(json_array_get(p->program->argv, 3)), ==, "{card}");
    g_assert_cmpuint(json_array_size(p->program->verify), ==, 3);
    g_assert_cmpuint(p->program->timeout_s, ==, 120);
    g_assert_cmpstr(p->program->base, ==, "u250-clear");
    g_assert_cmpint(p->program->driver, ==, AV_PROGRAM_DRIVER_HOST);
    g_assert_cmpint(p->restore_driver, ==, AV_RESTORE_ON_RELEASE);
    step = g_ptr_array_index(p->scrub, 0);
    g_assert_cmpint(step->method, ==, AV_SCRUB_METHOD_PROGRAM_BASE);
    g_assert_cmpstr(av_scrub_method_to_string(step->method), ==, "program-base");
    g_assert_cmpuint(step->timeout_s, ==, 120);          /* the program's */
    g_assert_cmpuint(p->drivers[AV_DRIVER_ON_PREPARE]->timeout_s, ==, 10);
    g_assert_cmpuint(p->drivers[AV_DRIVER_ON_ASSIGN]->timeout_s, ==, 900);
    g_assert_null(p->drivers[AV_DRIVER_ON_RELEASE]);
    g_assert_null(p->drivers[AV_DRIVER_ON_FREE]);
    /* the templates expand with the values of av-policy.h */
    {
        AvArgvValues values = { .address = "0000:5e:00.0", .card = "0000:5e:00.0", .bitstream = "/lib/b.xclbin" };
        g_auto(GStrv) argv = av_profile_argv_expand(p->program->argv, &values, NULL);
        g_autoptr(GError) err = NULL;

        g_assert_nonnull(argv);
        g_assert_cmpstr(argv[3], ==, "0000:5e:00.0");
        g_assert_cmpstr(argv[5], ==, "/lib/b.xclbin");
        g_assert_null(argv[6]);
        g_assert_null(av_profile_argv_expand(p->program->verify, &values, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_POLICY);
        g_assert_nonnull(strstr(err->message, "'{sha256}', which has no value here"));
    }

    /* the defaults */
    p = av_policy_find(policy, "fpga-vfio");
    g_assert_null(p->program->verify);
    g_assert_cmpuint(p->program->timeout_s, ==, 600);
    g_assert_cmpint(p->program->driver, ==, AV_PROGRAM_DRIVER_VFIO);
    g_assert_cmpuint(strlen(p->program->base), ==, 64);
    for (guint i = 0; i < AV_DRIVER_POINTS; i++)
        g_assert_null(p->drivers[i]);
    p = av_policy_find(policy, "stick");
    g_assert_null(p->program);
    g_assert_cmpuint(p->drivers[AV_DRIVER_ON_PREPARE]->timeout_s, ==, 30);
    g_assert_cmpuint(p->drivers[AV_DRIVER_ON_RELEASE]->timeout_s, ==, 10);
    g_assert_cmpuint(p->drivers[AV_DRIVER_ON_FREE]->timeout_s, ==, 86400);
    g_assert_cmpuint(av_policy_find(policy, "serial")->drivers[AV_DRIVER_ON_ASSIGN]->timeout_s, ==, 300);
    g_assert_cmpstr(av_driver_point_to_string(AV_DRIVER_ON_FREE), ==, "on_free");

    /* policy show: the normalised form, which loads back */
    assert_profile_json(policy, "fpga",
                    "{\"name\":\"fpga\",\"match\":{\"vendor\":\"0x10ee\",\"device\":[\"0x5004\"]},"
                    "\"attach\":\"vfio-pci\",\"vfio_driver\":\"auto\",\"numa\":\"preferred\",\"allocation\":\"pack\",\"granularity\":\"card\","
                    "\"scrub\":[{\"method\":\"program-base\"},{\"method\":\"reset\"}],\"restore_driver\":\"on-release\","
                    "\"hide_hypervisor\":false,"
                    "\"program\":{\"argv\":[\"/opt/xilinx/xrt/bin/xbmgmt\",\"program\",\"--device\",\"{card}\","
                    "\"--user\",\"{bitstream}\"],\"verify\":[\"/usr/libexec/check\",\"{card}\",\"{sha256}\"],"
                    "\"timeout\":120,\"base\":\"u250-clear\",\"driver\":\"host\"},"
                    "\"on_prepare\":{\"argv\":[\"/usr/libexec/prep\",\"{address}\",\"{domain_uuid}\"],\"timeout\":10},"
                    "\"on_assign\":{\"argv\":[\"/usr/libexec/assign\",\"--fn={function_id}\"],\"timeout\":900},"
                    "\"traits\":[]}");
    check_round_trip(policy);

    /* policy check: a programmed card whose scrub does not program the
     * base back keeps the last tenant's logic */
    w = av_profile_scrub_warnings(av_policy_find(policy, "fpga-vfio"));
    g_assert_cmpuint(w->len, ==, 1);
    g_assert_true(g_str_has_prefix(g_ptr_array_index(w, 0), "the profile programs its devices but no scrub step is "
                                   "'program-base': the last tenant's logic stays on the card"));
    g_ptr_array_unref(w);
    /* with it, nothing more than what the other steps call for */
    w = av_profile_scrub_warnings(av_policy_find(policy, "fpga-vf"));
    g_assert_cmpuint(w->len, ==, 0);
    g_ptr_array_unref(w);
    /* programs that are not installed (yet) load, and policy check says
     * what fails until they are */
    w = av_profile_scrub_warnings(av_policy_find(policy, "fpga"));
    g_assert_cmpuint(w->len, ==, 5);
    g_assert_true(g_str_has_prefix(g_ptr_array_index(w, 0), "'program' runs '/opt/xilinx/xrt/bin/xbmgmt', which is "
                                   "not installed: until it is, no device is programmed"));
    g_assert_cmpstr(g_ptr_array_index(w, 1), ==, "'program.verify' runs '/usr/libexec/check', which is not "
                    "installed: until it is, every programming fails");
    g_assert_cmpstr(g_ptr_array_index(w, 2), ==, "'on_prepare' runs '/usr/libexec/prep', which is not installed: "
                    "until it is, the hook refuses every domain given one of its devices");
    g_assert_true(g_str_has_prefix(g_ptr_array_index(w, 3), "'on_assign' runs '/usr/libexec/assign'"));
    g_assert_true(g_str_has_prefix(g_ptr_array_index(w, 4), "no scrub step clears the device's memory"));
    g_ptr_array_unref(w);
    w = av_profile_scrub_warnings(av_policy_find(policy, "stick"));
    g_assert_cmpuint(w->len, ==, 3);
    g_assert_cmpstr(g_ptr_array_index(w, 1), ==, "'on_release' runs '/usr/libexec/stick', which is not installed: "
                    "until it is, every device a domain releases is quarantined");
}

/* @text with each "@PROG@" replaced by @prog and each "@OPEN@" by @open.
 * Caller frees. */
static char *
fill_paths(const char *text, const char *prog, const char *open)
{
    g_auto(GStrv) a = g_strsplit(text, "@PROG@", -1);
    g_autofree char *t = g_strjoinv(prog, a);
    g_auto(GStrv) b = g_strsplit(t, "@OPEN@", -1);

    return g_strjoinv(open, b);
}

/* Writes @dir/10-fpga.json: one "fpga" profile with @fields. */
static void
write_fpga_policy(const char *dir, const char *fields, const char *prog, const char *open)
{
    g_autofree char *filled = fill_paths(fields, prog, open);
    g_autofree char *text = g_strdup_printf(
        "{\"profiles\": [{\"name\": \"fpga\", \"match\": {\"vendor\": \"0x10ee\"}, \"restore_driver\": \"keep-vfio\",\n"
        "  %s}]}\n", filled);

    write_policy_file(dir, "10-fpga.json", text);
}

/* The programs of "program" and of the driver commands run as root: they
 * and the absolute paths among their arguments are trusted as a "command"
 * step's, but for the arguments that name a placeholder, known only once
 * expanded (and checked then, before they run). */
static void
test_trust_program_files(void)
{
    g_auto(TrustDirs) d = { 0 };
    const char *tmp = trust_dirs_init(&d, "program"), *pol = d.pol, *bin = d.bin, *prog = d.prog;
    g_autofree char *open = g_build_filename(tmp, "open", NULL);
    static const char program[] = "\"program\": {\"argv\": [\"@PROG@\", \"--device\", \"{card}\", "
                                  "\"@OPEN@/{sha256}.bit\"], \"verify\": [\"@PROG@\", \"--verify\"]}";
    static const char driver[] = "\"on_prepare\": {\"argv\": [\"/bin/sh\", \"@PROG@\", \"@OPEN@/{domain_name}\"]}";

    g_assert_cmpint(g_mkdir_with_parents(open, 0755), ==, 0);
    g_assert_cmpint(chmod(open, 01777), ==, 0);

    /* an argument naming a placeholder in a directory anyone can write:
     * left to the check of the expanded argv */
    write_fpga_policy(pol, program, prog, open);
    load_ok(pol);
    write_fpga_policy(pol, driver, prog, open);
    load_ok(pol);

    /* the program */
    write_fpga_policy(pol, program, prog, open);
    g_assert_cmpint(chmod(prog, 0757), ==, 0);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "10-fpga.json:2:24: profile 'fpga': 'program.argv[0]': refusing the "
                        "program '", "it is writable by every user", NULL));
    g_assert_cmpint(chmod(prog, 0755), ==, 0);
    refused_given_away(pol, prog, "'program.argv[0]'");
    g_assert_cmpint(chmod(prog, 0644), ==, 0);
    g_free(load_refused(pol, AV_ERROR_POLICY, "'program.argv[0]': the program '", "is not executable (mode 0644)",
                        NULL));
    g_assert_cmpint(chmod(prog, 0755), ==, 0);
    /* verify, checked as the program; one not installed yet loads where
     * nobody else could put it (av_program_run() checks it again), and
     * policy check warns of it */
    write_fpga_policy(pol, "\"program\": {\"argv\": [\"/usr/bin/true\", \"{bitstream}\"], \"verify\": [\"@PROG@-v\"]}",
                      prog, open);
    load_ok(pol);
    write_fpga_policy(pol, "\"program\": {\"argv\": [\"/usr/bin/true\", \"{bitstream}\"], \"verify\": [\"@OPEN@/v\"]}",
                      prog, open);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "'program.verify[0]': the verify program '", "/open/v' does not exist, "
                        "and another user could create it", NULL));
    /* an argument without placeholder is checked now */
    write_fpga_policy(pol, "\"program\": {\"argv\": [\"@PROG@\", \"@OPEN@/base.cfg\", \"{bitstream}\"]}", prog, open);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "'program.argv[1]'", "program argument", "does not exist, and another "
                        "user could create it", NULL));

    /* a driver command, and the script its interpreter runs */
    write_fpga_policy(pol, driver, prog, open);
    g_assert_cmpint(chmod(bin, 0777), ==, 0);
    g_free(load_refused(pol, AV_ERROR_UNSAFE, "'on_prepare.argv[1]': refusing the driver command argument '",
                        "the directory '", bin, NULL));
    g_assert_cmpint(chmod(bin, 0755), ==, 0);
    write_fpga_policy(pol, "\"on_free\": {\"argv\": [\"@PROG@\", \"{address}\"]}", prog, open);
    load_ok(pol);
    refused_given_away(pol, prog, "'on_free.argv[0]': refusing the driver command '");

    /* braces are no placeholders in a "command" step: its argument is checked */
    {
        g_autofree char *text = fill_paths(
            "{\"profiles\": [{\"name\": \"gpu\", \"match\": {\"vendor\": \"0x10de\"},\n"
            "  \"scrub\": [{\"method\": \"command\", \"argv\": [\"@PROG@\", \"@OPEN@/{sha256}.log\"]}]}]}\n", prog, open);

        av_test_write(pol, "10-fpga.json", text);
        g_free(load_refused(pol, AV_ERROR_UNSAFE, "'scrub[0].argv[1]'", "does not exist, and another user could "
                            "create it", NULL));
    }
}

/* ---- health and max_lease (issue 17) ---- */

/* av_duration_parse(): the units, bare seconds, and what it refuses. */
static void
test_duration(void)
{
    static const struct {
        const char *text;
        guint64 seconds;     /* 0: refused */
    } cases[] = {
        { "90m", 5400 }, { "72h", 259200 }, { "30d", 2592000 }, { "3600s", 3600 }, { "3600", 3600 }, { "1", 1 },
        { "3650d", 315360000 }, { "315360000", 315360000 }, { "007h", 25200 },
        { "0", 0 }, { "0h", 0 }, { "", 0 }, { "h", 0 }, { "-5", 0 }, { "+5", 0 }, { "1.5h", 0 }, { "5 h", 0 },
        { " 5h", 0 }, { "5H", 0 }, { "5hh", 0 }, { "3w", 0 }, { "3651d", 0 }, { "315360001", 0 },
        { "99999999999999999999999", 0 }, { "5h\n", 0 },
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        guint64 got = 42;
        gboolean ok = av_duration_parse(cases[i].text, &got);

        if (cases[i].seconds) {
            g_assert_true(ok);
            g_assert_cmpuint(got, ==, cases[i].seconds);
        } else {
            g_assert_false(ok);
            g_assert_cmpuint(got, ==, 42);
        }
    }
    g_assert_false(av_duration_parse(NULL, NULL));
}

/* "max_lease" and "health": the defaults, good values, what policy show
 * prints and that it loads back.  Hostile values: tests/data/policies/bad/
 * max-lease-*.json and health-*.json. */
static void
test_health_limits(void)
{
    g_autoptr(AvPolicy) policy = policy_from_text(
        "{\"profiles\": ["
        " {\"name\": \"plain\", \"match\": {\"vendor\": \"0x10de\", \"device\": \"0x1111\"}},"
        " {\"name\": \"gpu\", \"match\": {\"vendor\": \"0x10de\"}, \"max_lease\": \"72h\","
        "  \"health\": {\"fatal_aer\": 0, \"nonfatal_aer\": 10, \"correctable_aer\": 1000,"
        "   \"reset_failures\": 1, \"scrub_failures\": 3, \"degraded_link\": \"quarantine\", \"link_speed\": \"check\"}},"
        " {\"name\": \"vf\", \"match\": {\"vendor\": \"0x8086\"}, \"attach\": \"sriov-vf\", \"max_lease\": 3600,"
        "  \"health\": {\"degraded_link\": \"warn\"}},"
        " {\"name\": \"stick\", \"match\": {\"vendor\": \"0x03e7\"}, \"attach\": \"usb\", \"max_lease\": \"30d\"},"
        " {\"name\": \"empty\", \"match\": {\"vendor\": \"0x1002\"}, \"health\": {}}"
        "]}");
    const AvProfile *plain = av_policy_find(policy, "plain");
    const AvProfile *gpu = av_policy_find(policy, "gpu");
    const AvProfile *vf = av_policy_find(policy, "vf");
    const AvProfile *empty = av_policy_find(policy, "empty");
    g_autoptr(json_t) shown = json_object();
    g_autoptr(json_t) j = NULL;
    g_autofree char *text = NULL;

    g_assert_false(plain->health.set);
    g_assert_cmpuint(plain->max_lease_s, ==, 0);
    g_assert_cmpint(plain->health.fatal_aer, ==, -1);
    g_assert_cmpint(plain->health.scrub_failures, ==, -1);
    g_assert_cmpint(plain->health.degraded_link, ==, AV_HEALTH_LINK_IGNORE);
    j = av_profile_to_json(plain);
    g_assert_null(json_object_get(j, "health"));
    g_assert_null(json_object_get(j, "max_lease"));
    g_clear_pointer(&j, json_decref);

    g_assert_true(gpu->health.set);
    g_assert_cmpuint(gpu->max_lease_s, ==, 72 * 3600);
    g_assert_cmpint(gpu->health.fatal_aer, ==, 0);
    g_assert_cmpint(gpu->health.nonfatal_aer, ==, 10);
    g_assert_cmpint(gpu->health.correctable_aer, ==, 1000);
    g_assert_cmpint(gpu->health.reset_failures, ==, 1);
    g_assert_cmpint(gpu->health.scrub_failures, ==, 3);
    g_assert_cmpint(gpu->health.degraded_link, ==, AV_HEALTH_LINK_QUARANTINE);
    g_assert_true(gpu->health.link_speed);

    g_assert_cmpuint(vf->max_lease_s, ==, 3600);
    g_assert_true(vf->health.set);
    g_assert_cmpint(vf->health.degraded_link, ==, AV_HEALTH_LINK_WARN);
    g_assert_false(vf->health.link_speed);
    g_assert_cmpint(vf->health.fatal_aer, ==, -1);
    g_assert_cmpuint(av_policy_find(policy, "stick")->max_lease_s, ==, 30 * 86400);
    g_assert_true(empty->health.set);

    /* policy show: seconds, every limit set, and the link actions */
    j = av_profile_to_json(gpu);
    g_assert_cmpint(json_integer_value(json_object_get(j, "max_lease")), ==, 259200);
    text = av_json_dump_compact(json_object_get(j, "health"));
    g_assert_cmpstr(text, ==, "{\"fatal_aer\":0,\"nonfatal_aer\":10,\"correctable_aer\":1000,\"reset_failures\":1,"
                    "\"scrub_failures\":3,\"degraded_link\":\"quarantine\",\"link_speed\":\"check\"}");
    g_clear_pointer(&j, json_decref);
    j = av_profile_to_json(vf);
    g_free(text);
    text = av_json_dump_compact(json_object_get(j, "health"));
    g_assert_cmpstr(text, ==, "{\"degraded_link\":\"warn\",\"link_speed\":\"ignore\"}");

    /* what policy show prints loads back to the same limits */
    {
        json_t *profiles = json_array();
        g_autoptr(AvPolicy) again = NULL;
        g_autofree char *doc = NULL;
        const AvProfile *g2;

        json_array_append_new(profiles, av_profile_to_json(gpu));
        json_object_set_new(shown, "profiles", profiles);
        doc = av_json_dump_compact(shown);
        again = policy_from_text(doc);
        g2 = av_policy_find(again, "gpu");
        g_assert_cmpuint(g2->max_lease_s, ==, gpu->max_lease_s);
        g_assert_cmpmem(&g2->health, sizeof(g2->health), &gpu->health, sizeof(gpu->health));
    }
}

/* The top-level "limits" (accelvirt-policy(5), LIMITS): parsed with their
 * defaults, a file of limits alone naming a profile of an earlier file,
 * the owner's match, and what `policy show`'s JSON of them says. */
static void
test_limits(void)
{
    g_autoptr(AvPolicy) policy = policy_from_text(
        "{\"profiles\": [{\"name\": \"h100\", \"match\": {\"vendor\": \"0x10de\"}}],"
        " \"limits\": [{\"owner\": {\"project\": \"p1\"}, \"profile\": \"h100\", \"max_devices\": 1},"
        " {\"owner\": {\"project\": \"p1\", \"user\": \"u1\"}, \"max_device_hours\": 500, \"period\": \"month\"}]}");
    static const char more[] = "{\"limits\": [{\"owner\": {\"user\": \"u2\"}, \"profile\": \"h100\", "
                               "\"max_devices\": 0, \"max_device_hours\": 2, \"period\": \"week\"}]}";
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) j = NULL;
    const AvLimit *a, *b, *c;

    g_assert_cmpuint(policy->limits->len, ==, 2);
    a = g_ptr_array_index(policy->limits, 0);
    b = g_ptr_array_index(policy->limits, 1);
    g_assert_cmpstr(a->project, ==, "p1");
    g_assert_null(a->user);
    g_assert_cmpstr(a->profile, ==, "h100");
    g_assert_cmpint(a->max_devices, ==, 1);
    g_assert_cmpint(a->max_device_hours, ==, -1);
    g_assert_cmpint(a->period, ==, AV_LIMIT_PERIOD_NONE);
    g_assert_null(b->profile);
    g_assert_cmpint(b->max_devices, ==, -1);
    g_assert_cmpint(b->max_device_hours, ==, 500);
    g_assert_cmpint(b->period, ==, AV_LIMIT_PERIOD_MONTH);
    g_assert_cmpstr(b->source_file, ==, "test.json");

    /* A project limit counts all its users; a project and user limit that user only. */
    g_assert_true(av_limit_owner_matches(a, "p1", "anyone"));
    g_assert_true(av_limit_owner_matches(a, "p1", NULL));
    g_assert_false(av_limit_owner_matches(a, "p2", "u1"));
    g_assert_false(av_limit_owner_matches(a, NULL, NULL));
    g_assert_true(av_limit_owner_matches(b, "p1", "u1"));
    g_assert_false(av_limit_owner_matches(b, "p1", "u2"));

    /* A file of limits alone names a profile of a file before it. */
    g_assert_true(av_policy_add_data(policy, "more.json", more, strlen(more), &err));
    g_assert_no_error(err);
    g_assert_cmpuint(policy->limits->len, ==, 3);
    c = g_ptr_array_index(policy->limits, 2);
    g_assert_cmpstr(c->user, ==, "u2");
    g_assert_cmpint(c->max_devices, ==, 0);
    g_assert_cmpint(c->period, ==, AV_LIMIT_PERIOD_WEEK);
    j = av_limit_to_json(c);
    g_assert_cmpstr(json_string_value(json_object_get(j, "period")), ==, "week");
    g_assert_cmpint(json_integer_value(json_object_get(j, "max_device_hours")), ==, 2);
    g_assert_cmpstr(json_string_value(json_object_get(json_object_get(j, "owner"), "user")), ==, "u2");
    {
        g_autofree char *who = av_limit_describe_owner(b);

        g_assert_cmpstr(who, ==, "project 'p1' user 'u1'");
    }
}

/* Calendar periods in UTC: the day from 00:00, the ISO week from Monday,
 * the month from the 1st. */
static void
test_limits_period_start(void)
{
    /* Sunday 2026-11-29 22:15:00 UTC. */
    gint64 now = 1795990500;

    g_assert_cmpint(av_limit_period_start(AV_LIMIT_PERIOD_DAY, now), ==, 1795910400);   /* 2026-11-29 */
    g_assert_cmpint(av_limit_period_start(AV_LIMIT_PERIOD_WEEK, now), ==, 1795392000);  /* Mon 2026-11-23 */
    g_assert_cmpint(av_limit_period_start(AV_LIMIT_PERIOD_MONTH, now), ==, 1793491200); /* 2026-11-01 */
    g_assert_cmpint(av_limit_period_start(AV_LIMIT_PERIOD_NONE, now), ==, now);
    /* A Monday is its own week's start. */
    g_assert_cmpint(av_limit_period_start(AV_LIMIT_PERIOD_WEEK, 1795392000 + 5), ==, 1795392000);
    g_assert_cmpstr(av_limit_period_to_string(AV_LIMIT_PERIOD_MONTH), ==, "month");
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);

    g_test_add_func("/json/locate", test_json_locate);
    g_test_add_func("/json/locate-invalid", test_json_locate_invalid);
    g_test_add_func("/json/dump", test_json_dump);
    g_test_add_func("/policy/good-dir", test_good_dir);
    g_test_add_func("/policy/usb-scrub-methods", test_usb_scrub_methods);
    g_test_add_func("/policy/usb-runtime-ids", test_usb_runtime_ids);
    g_test_add_func("/policy/netdev-attach", test_netdev_attach);
    g_test_add_func("/policy/load-order", test_load_order);
    g_test_add_func("/policy/duplicate-across-files", test_duplicate_across_files);
    g_test_add_func("/policy/missing-dir", test_missing_dir);
    g_test_add_func("/policy/nova", test_nova);
    g_test_add_func("/policy/world-writable", test_world_writable);
    g_test_add_func("/policy/trust/dir", test_trust_dir);
    g_test_add_func("/policy/trust/symlink", test_trust_symlink);
    g_test_add_func("/policy/trust/scrub-files", test_trust_scrub_files);
    g_test_add_func("/policy/match-pci", test_match_pci);
    g_test_add_func("/policy/id-forms", test_id_forms);
    g_test_add_func("/policy/match-usb", test_match_usb);
    g_test_add_func("/policy/to-string", test_to_string);
    g_test_add_func("/policy/match/mdev-parent", test_match_mdev_parent);
    g_test_add_func("/policy/round-trip", test_round_trip);
    g_test_add_func("/policy/shipped", test_shipped);
    g_test_add_func("/policy/sriov-vfs", test_sriov_vfs);
    g_test_add_func("/policy/program", test_program);
    g_test_add_func("/policy/trust/program-files", test_trust_program_files);
    g_test_add_func("/policy/duration", test_duration);
    g_test_add_func("/policy/health-limits", test_health_limits);
    g_test_add_func("/policy/limits", test_limits);
    g_test_add_func("/policy/limits/period-start", test_limits_period_start);
    add_bad_tests();
    return g_test_run();
}
