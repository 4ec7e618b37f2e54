/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: the pool (state file, lock, lifecycle, journal, identity,
 * reconciliation). */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "av-test.h"
#include "pool/av-pool-private.h"
#include "util/av-names.h"
#include "util/av-error.h"
#include "util/av-file.h"
#include "util/av-json.h"
#include "util/av-root.h"

/* --- helpers ----------------------------------------------------------------- */

static AvPoolDevice *
test_device(const char *identity, const char *address)
{
    AvPoolDevice *dev = av_pool_device_new();

    dev->identity = g_strdup(identity);
    dev->address = g_strdup(address);
    dev->profile = g_strdup("gpu");
    dev->first_seen = dev->last_seen = dev->state_since = 1700000000;
    return dev;
}

static char *
test_read(const char *dir, const char *name, gsize *ret_len)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autoptr(GError) err = NULL;
    char *data = NULL;

    g_file_get_contents(path, &data, ret_len, &err);
    g_assert_no_error(err);
    return data;
}

static gboolean
test_exists(const char *dir, const char *name)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);

    return g_file_test(path, G_FILE_TEST_EXISTS);
}

static guint
test_count_temps(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    guint n = 0;

    while (d && (name = g_dir_read_name(d)))
        n += g_str_has_prefix(name, "pool.json.tmp.");
    return n;
}

/* A pool in a new state dir holding @n free devices, saved. */
static char *
test_make_pool(guint n)
{
    g_autofree char *tmp = av_test_tmpdir();
    char *state = g_build_filename(tmp, "state", NULL);
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;

    pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    for (guint i = 0; i < n; i++) {
        g_autofree char *id = g_strdup_printf("dsn:%016x.f0", i);
        g_autofree char *addr = g_strdup_printf("0000:%02x:00.0", i % 256);

        av_pool_add_device(pool, test_device(id, addr));
    }
    av_pool_save(pool, &err);
    g_assert_no_error(err);
    return state;
}

static void
test_remove_state(const char *state)
{
    g_autofree char *tmp = g_path_get_dirname(state);

    av_test_tmpdir_remove(tmp);
}

/* --- states ----------------------------------------------------------------- */

static void
test_state_strings(void)
{
    AvDeviceState s = AV_DEVICE_STATE_FREE;
    static const char *const names[] = {
        "free", "claimed", "in-use", "dirty", "scrubbing", "quarantined", "missing"
    };

    for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
        g_assert_cmpstr(av_device_state_to_string((AvDeviceState)i), ==, names[i]);
        g_assert_true(av_device_state_from_string(names[i], &s));
        g_assert_cmpint(s, ==, i);
    }
    s = AV_DEVICE_STATE_DIRTY;
    g_assert_false(av_device_state_from_string("in_use", &s));
    g_assert_false(av_device_state_from_string("FREE", &s));
    g_assert_false(av_device_state_from_string(NULL, &s));
    g_assert_cmpint(s, ==, AV_DEVICE_STATE_DIRTY);
    g_assert_cmpstr(av_device_kind_to_string(AV_DEVICE_KIND_PCI), ==, "pci");
    g_assert_cmpstr(av_device_kind_to_string(AV_DEVICE_KIND_USB), ==, "usb");
}

/* --- open, save, load ------------------------------------------------------ */

static void
test_open_read_missing(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *state = g_build_filename(tmp, "no", "such", NULL);
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;

    pool = av_pool_open(state, AV_POOL_READ, 0, &err);
    g_assert_no_error(err);
    g_assert_cmpuint(av_pool_devices(pool)->len, ==, 0);
    g_assert_cmpstr(av_pool_state_dir(pool), ==, state);
    g_assert_false(g_file_test(state, G_FILE_TEST_EXISTS));
    g_assert_false(av_pool_save(pool, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    g_assert_false(g_file_test(state, G_FILE_TEST_EXISTS));
    av_test_tmpdir_remove(tmp);
}

static void
test_open_write_creates(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *state = g_build_filename(tmp, "state", NULL);
    g_autofree char *file = g_build_filename(state, "pool.json", NULL);
    g_autofree char *data = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;
    struct stat st;

    pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    g_assert_cmpint(stat(state, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 07777, ==, 0700);
    g_assert_true(test_exists(state, "pool.lock"));
    g_assert_false(test_exists(state, "pool.json"));
    g_assert_true(av_pool_save(pool, &err));
    g_assert_no_error(err);
    g_assert_cmpint(stat(file, &st), ==, 0);
    g_assert_cmpint(st.st_mode & 07777, ==, 0600);
    data = test_read(state, "pool.json", NULL);
    g_assert_cmpstr(data, ==, "{\n\"version\": 1,\n\"devices\": []\n}\n");
    av_test_tmpdir_remove(tmp);
}

/* av_pool_add_device() puts each device where a stable sort would (after
 * equal identities); av_pool_rekey_device() moves it to its new place;
 * av_pool_pci_index() answers as av_pool_find_address() does. */
static void
test_sorted_insert(void)
{
    static const char *const ids[] = { "m", "c", "x", "a", "m", "z", "b", "c", "0", "m" };
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(GHashTable) index = NULL;
    g_autoptr(GPtrArray) added = g_ptr_array_new();
    GPtrArray *devices;
    AvPoolDevice *moved, *gone, *gone2, *gone3;

    pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    devices = av_pool_devices(pool);
    for (guint i = 0; i < G_N_ELEMENTS(ids); i++) {
        g_autofree char *addr = g_strdup_printf("0000:%02x:00.0", i);
        AvPoolDevice *dev = test_device(ids[i], addr);

        g_ptr_array_add(added, dev);
        av_pool_add_device(pool, dev);
    }
    g_assert_cmpuint(devices->len, ==, G_N_ELEMENTS(ids));
    for (guint i = 1; i < devices->len; i++) {
        const AvPoolDevice *a = g_ptr_array_index(devices, i - 1), *b = g_ptr_array_index(devices, i);

        g_assert_cmpint(strcmp(a->identity, b->identity), <=, 0);
    }
    /* The three "m" in the order they came. */
    g_assert_true(g_ptr_array_index(devices, 5) == g_ptr_array_index(added, 0));
    g_assert_true(g_ptr_array_index(devices, 6) == g_ptr_array_index(added, 4));
    g_assert_true(g_ptr_array_index(devices, 7) == g_ptr_array_index(added, 9));
    /* "x" becomes "d": between "c" and "m". */
    moved = g_ptr_array_index(added, 2);
    av_pool_rekey_device(pool, moved, "d");
    g_assert_cmpuint(devices->len, ==, G_N_ELEMENTS(ids));
    g_assert_true(g_ptr_array_index(devices, 5) == moved);
    g_assert_cmpstr(((AvPoolDevice *)g_ptr_array_index(devices, 4))->identity, ==, "c");
    g_assert_cmpstr(((AvPoolDevice *)g_ptr_array_index(devices, 9))->identity, ==, "z");
    /* Two records at one address: the present one, else the first missing. */
    gone = test_device("e-gone", "0000:01:00.0");
    gone->state = AV_DEVICE_STATE_MISSING;
    av_pool_add_device(pool, gone);
    gone2 = test_device("f-gone", "0000:42:00.0");
    gone2->state = AV_DEVICE_STATE_MISSING;
    av_pool_add_device(pool, gone2);
    gone3 = test_device("g-gone", "0000:42:00.0");
    gone3->state = AV_DEVICE_STATE_MISSING;
    av_pool_add_device(pool, gone3);
    index = av_pool_pci_index(pool);
    for (guint i = 0; i < devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(devices, i);

        g_assert_true(g_hash_table_lookup(index, dev->address) ==
                      av_pool_find_address(pool, AV_DEVICE_KIND_PCI, dev->address));
    }
    g_assert_true(g_hash_table_lookup(index, "0000:01:00.0") == g_ptr_array_index(added, 1));
    g_assert_true(g_hash_table_lookup(index, "0000:42:00.0") == gone2);
    g_assert_cmpuint(g_hash_table_size(index), ==, G_N_ELEMENTS(ids) + 1);
    g_clear_pointer(&pool, av_pool_free);
    test_remove_state(state);
}

/* av_pool_file_changed_since(): a save in between is seen even when it
 * wrote the same bytes (a prepare that failed and undid itself); reads
 * alone are not. */
static void
test_file_changed_since(void)
{
    g_autofree char *state = test_make_pool(2);
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPool) before = av_pool_open(state, AV_POOL_READ, 0, &err);
    g_autoptr(AvPool) again = NULL;
    g_autoptr(AvPool) writer = NULL;
    g_autoptr(AvPool) after = NULL;

    g_assert_no_error(err);
    av_pool_unlock(before);
    again = av_pool_open(state, AV_POOL_READ, 0, &err);
    g_assert_no_error(err);
    g_assert_false(av_pool_file_changed_since(before, again));
    av_pool_unlock(again);
    writer = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    g_assert_false(av_pool_file_changed_since(before, writer));
    g_assert_true(av_pool_save(writer, &err));
    g_assert_no_error(err);
    g_clear_pointer(&writer, av_pool_free);
    after = av_pool_open(state, AV_POOL_READ, 0, &err);
    g_assert_no_error(err);
    g_assert_true(av_pool_file_changed_since(before, after));
    g_assert_true(av_pool_file_changed_since(again, after));
    g_clear_pointer(&before, av_pool_free);
    g_clear_pointer(&again, av_pool_free);
    g_clear_pointer(&after, av_pool_free);
    test_remove_state(state);
}

/* av_pool_text() (what a save writes, without the JSON tree) gives the
 * bytes of av_pool_json_text(av_pool_to_json()): every member, jansson's
 * escapes, and a device with a string jansson refuses written by jansson. */
static void
test_save_text_direct(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_autoptr(json_t) json = NULL;
    g_autofree char *direct = NULL, *tree = NULL, *empty = NULL, *empty_tree = NULL;
    AvPoolDevice *a, *b, *m, *u;

    g_assert_no_error(err);
    json = av_pool_to_json(pool);
    empty = av_pool_text(pool);
    empty_tree = av_pool_json_text(json);
    g_assert_cmpstr(empty, ==, empty_tree);
    g_clear_pointer(&json, json_decref);
    a = test_device("dsn:00000000000000ab.f0", "0000:5e:00.0");
    b = test_device("dsn:00000000000000ac.f0", "0000:5f:00.0");
    m = test_device("mdev:4b20d080-1b54-4048-85b3-a6a62d165c01", "0000:3b:00.0");
    u = test_device("usb:03e7:2485:serial:0123", "1-1.2");
    m->kind = AV_DEVICE_KIND_MDEV;
    m->created = TRUE;
    u->kind = AV_DEVICE_KIND_USB;
    av_pool_add_device(pool, a);
    av_pool_add_device(pool, b);
    av_pool_add_device(pool, m);
    av_pool_add_device(pool, u);
    a->state = AV_DEVICE_STATE_MISSING;
    a->state_before_missing = AV_DEVICE_STATE_QUARANTINED;
    a->reason = g_strdup("quote \" backslash \\ controls \b\f\n\r\t\x01\x1f del \x7f slash / é \xe2\x82\xac");
    a->reason_before_missing = g_strdup("scrub failed");
    a->owner = av_owner_new("8f1c8a3c-58c7-4d5e-9a0b-6c2a1f0e9d11", "vm \"one\"");
    a->owner->nova_instance = g_strdup("inst-1");
    a->owner->nova_project = g_strdup("proj");
    a->owner->nova_user = g_strdup("user");
    a->original_driver = g_strdup("nvidia");
    a->numa_node = -1;
    a->iommu_group = 42;
    a->state_since = G_MAXINT64;
    g_ptr_array_add(a->companions, av_companion_new("0000:5e:00.1", NULL));
    g_ptr_array_add(a->companions, av_companion_new("0000:5e:00.2", "snd_hda_intel"));
    a->rom_sha256 = g_strdup(AV_ROM_NONE);
    a->scrub_token = g_strdup("0123456789abcdef0123456789abcdef");
    a->scrub_domain = g_strdup("8f1c8a3c-58c7-4d5e-9a0b-6c2a1f0e9d12");
    a->identity_problem = g_strdup("the serial changed");
    a->unscrubbed = TRUE;
    a->last_scrub = json_pack("{s:I, s:s, s:{s:I, s:I, s:n, s:n, s:s, s:s}}", "time", (json_int_t)1700000000,
                              "result", "quarantined", "coverage", "cleared", (json_int_t)0, "read_back",
                              (json_int_t)0, "memory", "fraction", "verified", "none", "text", "nothing\n");
    a->release_pending = TRUE;
    a->claim_programmed = TRUE;
    a->in_use_boot_id = g_strdup("0f8e2d3c-1b2a-4c5d-8e9f-a0b1c2d3e4f5");
    a->match_ids = g_strdup("10de:20f1 10de:145f 030200 a1");
    a->scrub_failures = 3;
    a->reset_failures = 1;
    a->programmed = av_programmed_new("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", NULL,
                                      "fpga-program", "read back \"ok\"");
    a->programmed->since = 1700000001;
    /* Not UTF-8: jansson drops the member; the direct writer must agree. */
    b->reason = g_strdup("bad \xff byte");
    u->profile = (g_free(u->profile), NULL);
    u->failures_since = u->first_seen + 5;
    pool->scanned_boot_id = g_strdup("3f1e0b9a-6c2d-4e8f-9a1b-2c3d4e5f6a7b");
    {
        /* The limits' usage record (av-pool-usage.c) is written too. */
        AvPoolUsage *used = g_new0(AvPoolUsage, 1);

        used->project = g_strdup("proj");
        used->profile = g_strdup("a100");
        used->period = AV_LIMIT_PERIOD_MONTH;
        used->start = 1700000000;
        used->in_use_s = 3600;
        g_ptr_array_add(pool->usage, used);
    }
    json = av_pool_to_json(pool);
    direct = av_pool_text(pool);
    tree = av_pool_json_text(json);
    g_assert_nonnull(direct);
    g_assert_cmpstr(direct, ==, tree);
    g_assert_nonnull(strstr(direct, "\\u0001\\u001F del \x7f slash / é"));
    g_assert_nonnull(strstr(direct, "\"usage\": "));
    g_clear_pointer(&pool, av_pool_free);
    test_remove_state(state);
}

static void
test_save_load_roundtrip(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autofree char *first = NULL, *second = NULL, *dumped = NULL, *reloaded = NULL;
    g_autoptr(GError) err = NULL;
    AvPoolDevice *a, *b, *c;

    {
        g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
        g_autoptr(json_t) json = NULL;

        g_assert_no_error(err);
        c = test_device("pci:10de:20b0:10de:134f@path:0000:00/01.0/00.0", "0000:3b:00.0");
        a = test_device("dsn:00000000000000ab.f0", "0000:5e:00.0");
        b = test_device("usb:03e7:2485:serial:0123", "1-1.2");
        b->kind = AV_DEVICE_KIND_USB;
        b->profile = (g_free(b->profile), NULL);
        av_pool_add_device(pool, c);
        av_pool_add_device(pool, a);
        av_pool_add_device(pool, b);
        a->state = AV_DEVICE_STATE_CLAIMED;
        a->owner = av_owner_new("8f1c8a3c-58c7-4d5e-9a0b-6c2a1f0e9d11", "vm1");
        a->owner->nova_instance = g_strdup("inst-1");
        a->claim_expires = 1700000600;
        a->original_driver = g_strdup("nvidia");
        a->numa_node = 1;
        a->iommu_group = 42;
        b->state = AV_DEVICE_STATE_MISSING;
        b->state_before_missing = AV_DEVICE_STATE_QUARANTINED;
        b->reason = g_strdup("not found");
        b->reason_before_missing = g_strdup("scrub failed: é");
        c->state = AV_DEVICE_STATE_IN_USE;
        c->owner = av_owner_new(NULL, "vm2");
        g_assert_true(g_ptr_array_index(av_pool_devices(pool), 0) == a);
        g_assert_true(g_ptr_array_index(av_pool_devices(pool), 1) == c);
        g_assert_true(g_ptr_array_index(av_pool_devices(pool), 2) == b);
        g_assert_true(av_pool_find(pool, "dsn:00000000000000ab.f0") == a);
        g_assert_null(av_pool_find(pool, "dsn:00000000000000ac.f0"));
        g_assert_true(av_pool_find_address(pool, AV_DEVICE_KIND_PCI, "0000:3b:00.0") == c);
        g_assert_true(av_pool_find_address(pool, AV_DEVICE_KIND_USB, "1-1.2") == b);
        g_assert_null(av_pool_find_address(pool, AV_DEVICE_KIND_PCI, "1-1.2"));
        g_assert_true(av_pool_save(pool, &err));
        g_assert_no_error(err);
        json = av_pool_to_json(pool);
        dumped = av_pool_json_text(json);
    }
    first = test_read(state, "pool.json", NULL);
    g_assert_cmpstr(first, ==, dumped);
    g_assert_nonnull(strstr(first, "\"state\": \"in-use\""));
    g_assert_nonnull(strstr(first, "\"state_before_missing\": \"quarantined\""));
    g_assert_nonnull(strstr(first, "\"claim_expires\": 1700000600"));
    g_assert_nonnull(strstr(first, "\"owner\": null"));
    {
        g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
        g_autoptr(json_t) json = NULL;
        AvPoolDevice *x;

        g_assert_no_error(err);
        g_assert_cmpuint(av_pool_devices(pool)->len, ==, 3);
        x = av_pool_find(pool, "dsn:00000000000000ab.f0");
        g_assert_cmpint(x->state, ==, AV_DEVICE_STATE_CLAIMED);
        g_assert_cmpstr(x->owner->domain_name, ==, "vm1");
        g_assert_cmpstr(x->owner->nova_instance, ==, "inst-1");
        g_assert_null(x->owner->nova_user);
        g_assert_cmpint(x->numa_node, ==, 1);
        g_assert_cmpint(x->iommu_group, ==, 42);
        x = av_pool_find(pool, "usb:03e7:2485:serial:0123");
        g_assert_cmpint(x->kind, ==, AV_DEVICE_KIND_USB);
        g_assert_cmpint(x->state_before_missing, ==, AV_DEVICE_STATE_QUARANTINED);
        g_assert_cmpstr(x->reason_before_missing, ==, "scrub failed: é");
        g_assert_null(x->profile);
        json = av_pool_to_json(pool);
        reloaded = av_pool_json_text(json);
        g_assert_cmpstr(reloaded, ==, dumped);
        g_assert_true(av_pool_save(pool, &err));
    }
    /* Deterministic: saving what was loaded gives the same bytes. */
    second = test_read(state, "pool.json", NULL);
    g_assert_cmpstr(first, ==, second);
    g_assert_cmpuint(test_count_temps(state), ==, 0);
    /* A device a line, no indentation. */
    g_assert_true(g_str_has_prefix(first, "{\n\"version\": 1,\n\"devices\": [\n{\"identity\": \"dsn:00000000000000ab.f0\", "));
    g_assert_nonnull(strstr(first, "},\n{\"identity\": \"pci:10de:20b0:10de:134f@path:0000:00/01.0/00.0\", "));
    g_assert_true(g_str_has_suffix(first, "}\n]\n}\n"));
    /* The indented form that accelvirt wrote before loads alike, and is
     * saved in the new form. */
    {
        g_autoptr(json_t) json = json_loads(first, 0, NULL);
        g_autofree char *pretty = av_json_dump_pretty(json);
        g_autofree char *third = NULL;
        g_autoptr(AvPool) pool = NULL;

        av_test_write(state, "pool.json", pretty);
        pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
        g_assert_no_error(err);
        g_assert_cmpuint(av_pool_devices(pool)->len, ==, 3);
        g_assert_true(av_pool_save(pool, &err));
        third = test_read(state, "pool.json", NULL);
        g_assert_cmpstr(third, ==, first);
    }
    test_remove_state(state);
}

static const char test_good_device[] =
    "{\"identity\": \"dsn:00000000000000ab.f0\", \"kind\": \"pci\", \"address\": \"0000:3b:00.0\","
    " \"profile\": \"gpu\", \"state\": \"%s\", \"state_before_missing\": %s, \"owner\": %s,"
    " \"state_since\": 1, \"first_seen\": 1, \"last_seen\": %s, \"claim_expires\": 0,"
    " \"reason\": null, \"reason_before_missing\": null, \"original_driver\": null,"
    " \"numa_node\": -1, \"iommu_group\": -1%s}";

static char *
test_pool_text(const char *state, const char *before, const char *owner, const char *last_seen,
               const char *extra)
{
    g_autofree char *dev = g_strdup_printf(test_good_device, state, before, owner, last_seen, extra);

    return g_strdup_printf("{\"version\": 1,\n \"devices\": [\n  %s\n ]\n}\n", dev);
}

static char *
test_replace(const char *s, const char *from, const char *to)
{
    g_auto(GStrv) parts = g_strsplit(s, from, -1);

    return g_strjoinv(to, parts);
}

static void
test_corrupt_one(const char *contents, int line, int column, const char *what)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *file = g_build_filename(tmp, "pool.json", NULL);
    g_autofree char *where = column > 0 ? g_strdup_printf("is corrupt at line %d, column %d: ", line, column)
                                        : g_strdup_printf("is corrupt at line %d, column ", line);
    g_autofree char *after = NULL;
    g_autoptr(GError) err = NULL;
    gsize len = 0;

    av_test_write(tmp, "pool.json", contents);
    for (int mode = AV_POOL_READ; mode <= AV_POOL_WRITE; mode++) {
        g_autoptr(AvPool) pool = av_pool_open(tmp, (AvPoolMode)mode, 0, &err);

        g_assert_null(pool);
        g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
        if (g_test_verbose())
            g_test_message("%s", err->message);
        g_assert_nonnull(strstr(err->message, file));
        if (!g_regex_match_simple("is corrupt at line \\d+, column \\d+: ", err->message, 0, 0))
            g_error("no line and column in '%s'", err->message);
        if (line > 0 && !strstr(err->message, where))
            g_error("expected '%s' in '%s'", where, err->message);
        if (what && !strstr(err->message, what))
            g_error("expected '%s' in '%s'", what, err->message);
        g_assert_nonnull(strstr(err->message, "move it away or repair it; accelvirt will not overwrite it"));
        g_clear_error(&err);
    }
    after = test_read(tmp, "pool.json", &len);
    g_assert_cmpuint(len, ==, strlen(contents));
    g_assert_cmpmem(after, len, contents, strlen(contents));
    g_assert_cmpuint(test_count_temps(tmp), ==, 0);
    av_test_tmpdir_remove(tmp);
}

/* The write-ahead records of prepares (issue 10, hole 7): saved and loaded
 * back as they were, strictly; a pool at rest has no "intents" member. */
static void
test_intents(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *text = NULL;
    g_autoptr(GError) err = NULL;
    gsize len = 0;

    {
        g_autoptr(AvPool) pool = av_pool_open(tmp, AV_POOL_WRITE, 0, &err);
        AvIntent *intent;

        g_assert_no_error(err);
        g_assert_true(av_pool_save(pool, &err));
        text = test_read(tmp, "pool.json", &len);
        g_assert_null(strstr(text, "intents"));
        g_clear_pointer(&text, g_free);
        intent = av_pool_intent_add(pool, av_intent_new("8f1c8a3c-58c7-4d5e-9a0b-6c2a1f0e9d11", "vm1"));
        av_intent_add_bind(intent, "0000:98:00.0", "nvidia");
        av_intent_add_bind(intent, "0000:98:00.1", NULL);
        av_intent_add_mdev(intent, "6f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c", "mtty", "mtty-2");
        av_intent_add_vfs(intent, "0000:6b:00.0", 0, 4);
        g_assert_true(av_pool_save(pool, &err));
    }
    {
        g_autoptr(AvPool) pool = av_pool_open(tmp, AV_POOL_READ, 0, &err);
        const AvIntent *intent;
        const AvCompanion *b;

        g_assert_no_error(err);
        g_assert_cmpuint(av_pool_intents(pool)->len, ==, 1);
        intent = g_ptr_array_index(av_pool_intents(pool), 0);
        g_assert_cmpstr(intent->domain_name, ==, "vm1");
        g_assert_cmpuint(intent->binds->len, ==, 2);
        b = g_ptr_array_index(intent->binds, 1);
        g_assert_cmpstr(b->address, ==, "0000:98:00.1");
        g_assert_null(b->original_driver);
        g_assert_cmpstr(((const AvIntentMdev *)g_ptr_array_index(intent->mdevs, 0))->parent, ==, "mtty");
        g_assert_cmpuint(intent->vfs->len, ==, 1);
        g_assert_cmpstr(((const AvIntentVfs *)g_ptr_array_index(intent->vfs, 0))->pf, ==, "0000:6b:00.0");
        g_assert_cmpuint(((const AvIntentVfs *)g_ptr_array_index(intent->vfs, 0))->to, ==, 4);
    }
    text = test_read(tmp, "pool.json", &len);
    {
        g_autofree char *bad = test_replace(text, "\"0000:98:00.1\"", "\"../../x\"");
        test_corrupt_one(bad, 0, 0, "intents/0/binds/1/address: expected a PCI address");
    }
    {
        g_autofree char *bad = test_replace(text, "\"mtty-2\"", "\"../x\"");
        test_corrupt_one(bad, 0, 0, "intents/0/mdevs/0/type");
    }
    {
        g_autofree char *bad = test_replace(text, "\"0000:6b:00.0\"", "\"../6b\"");
        test_corrupt_one(bad, 0, 0, "intents/0/vfs/0/pf: expected a PCI address");
    }
    {
        g_autofree char *bad = test_replace(text, "\"undo_error\"", "\"undo\"");
        test_corrupt_one(bad, 0, 0, "unknown member 'undo'");
    }
    av_test_tmpdir_remove(tmp);
}

static void
test_corrupt(void)
{
    g_autofree char *good = test_pool_text("free", "null", "null", "1", "");

    /* The template is good. */
    {
        g_autofree char *tmp = av_test_tmpdir();
        g_autoptr(AvPool) pool = NULL;
        g_autoptr(GError) err = NULL;

        av_test_write(tmp, "pool.json", good);
        pool = av_pool_open(tmp, AV_POOL_READ, 0, &err);
        g_assert_no_error(err);
        g_assert_cmpuint(av_pool_devices(pool)->len, ==, 1);
        av_test_tmpdir_remove(tmp);
    }
    test_corrupt_one("", 1, 0, NULL);
    test_corrupt_one("{\"version\": 1,\n \"devices\": [\n", 3, 0, NULL);
    test_corrupt_one("{\"version\": 2, \"devices\": []}", 1, 13, "unknown version 2");
    test_corrupt_one("{\"devices\": []}", 1, 1, "version");
    test_corrupt_one("[]", 1, 1, "expected an object");
    test_corrupt_one("{\"version\": 1, \"devices\": {}}", 1, 27, "expected an array");
    test_corrupt_one("{\"version\": 1, \"devices\": [], \"extra\": 1}", 1, 40, "unknown member 'extra'");
    {
        g_autofree char *t = test_pool_text("bogus", "null", "null", "1", "");
        test_corrupt_one(t, 3, 0, "devices/0/state: expected a state");
    }
    {
        g_autofree char *t = test_pool_text("free", "null", "null", "\"1\"", "");
        test_corrupt_one(t, 3, 0, "devices/0/last_seen: expected an integer");
    }
    {
        g_autofree char *t = test_pool_text("free", "null", "null", "1.5", "");
        test_corrupt_one(t, 3, 0, "devices/0/last_seen");
    }
    {
        g_autofree char *t = test_pool_text("free", "null", "{\"domain_uuid\": 5, \"domain_name\": null,"
                                            " \"nova_instance\": null, \"nova_project\": null,"
                                            " \"nova_user\": null}", "1", "");
        test_corrupt_one(t, 3, 0, "devices/0/owner/domain_uuid");
    }
    {
        g_autofree char *t = test_pool_text("free", "null", "{\"domain_uuid\": \"u\"}", "1", "");
        test_corrupt_one(t, 3, 0, "the member 'domain_name' is missing");
    }
    {
        g_autofree char *t = test_pool_text("free", "\"free\"", "null", "1", "");
        test_corrupt_one(t, 3, 0, "must be null unless the state is missing");
    }
    {
        g_autofree char *t = test_pool_text("missing", "\"missing\"", "null", "1", "");
        test_corrupt_one(t, 3, 0, "state_before_missing");
    }
    {
        g_autofree char *t = test_pool_text("claimed", "null", "null", "1", "");
        test_corrupt_one(t, 3, 0, "devices/0/owner: a claimed device must have an owner");
    }
    {
        g_autofree char *t = test_pool_text("free", "null", "null", "1", "");
        g_autofree char *u = test_replace(t, "\"claim_expires\": 0", "\"claim_expires\": 5");
        test_corrupt_one(u, 3, 0, "devices/0/claim_expires: must be 0 unless");
    }
    {
        g_autofree char *t = test_pool_text("free", "null", "null", "1", "");
        g_autofree char *u = test_replace(t, "\"claim_expires\": 0", "\"claim_expires\": 0, \"claim_programmed\": true");
        test_corrupt_one(u, 3, 0, "devices/0/claim_programmed: only a claimed device");
    }
    {
        g_autofree char *t = test_pool_text("free", "null", "null", "1", ", \"colour\": \"red\"");
        test_corrupt_one(t, 3, 0, "unknown member 'colour'");
    }
    {
        g_autofree char *dev = g_strdup_printf(test_good_device, "free", "null", "null", "1", "");
        g_autofree char *t = g_strdup_printf("{\"version\": 1, \"devices\": [%s,\n%s]}", dev, dev);
        test_corrupt_one(t, 2, 0, "appears twice");
    }
    test_corrupt_one("{\"version\": 1, \"version\": 1, \"devices\": []}", 1, 0, "duplicate");
    {
        g_autofree char *dev = g_strdup_printf(test_good_device, "free", "null", "null", "1", "");
        g_autofree char *bad = NULL;

        g_assert_nonnull(strstr(dev, "0000:3b:00.0"));
        bad = test_replace(dev, "0000:3b:00.0", "../../../etc");
        {
            g_autofree char *t = g_strdup_printf("{\"version\": 1, \"devices\": [\n%s]}", bad);
            test_corrupt_one(t, 2, 0, "devices/0/address: '../../../etc' is not a PCI");
        }
        g_free(bad);
        bad = test_replace(dev, "\"kind\": \"pci\"", "\"kind\": \"usb\"");
        {
            g_autofree char *t = g_strdup_printf("{\"version\": 1, \"devices\": [\n%s]}", bad);
            test_corrupt_one(t, 2, 0, "is not a USB port");
        }
    }
}

/* A pool.json cut short (a copy that was not atomic, a full disk) is
 * corrupt, said with its position, and left byte for byte. */
static void
test_truncated(void)
{
    g_autofree char *state = test_make_pool(20);
    g_autofree char *data = NULL;
    gsize len = 0;

    data = test_read(state, "pool.json", &len);
    data[len / 2] = '\0';
    test_corrupt_one(data, 0, 0, "premature end of input");
    test_remove_state(state);
}

/* --- transitions ------------------------------------------------------------ */

static AvPool *
test_open_write(const char *state)
{
    g_autoptr(GError) err = NULL;
    AvPool *pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);

    g_assert_no_error(err);
    return pool;
}

static void
test_move(AvPool *pool, AvPoolDevice *dev, AvDeviceState to, const AvOwner *owner, const char *reason)
{
    g_autoptr(GError) err = NULL;

    av_pool_transition(pool, dev, to, owner, reason, &err);
    g_assert_no_error(err);
    g_assert_cmpint(dev->state, ==, to);
}

/* Puts @dev into @state by allowed moves from free. */
static void
test_reach(AvPool *pool, AvPoolDevice *dev, AvDeviceState state)
{
    g_autoptr(AvOwner) owner = av_owner_new("uuid-1", "vm1");
    static const AvDeviceState path[] = {
        AV_DEVICE_STATE_CLAIMED, AV_DEVICE_STATE_IN_USE, AV_DEVICE_STATE_DIRTY,
        AV_DEVICE_STATE_SCRUBBING, AV_DEVICE_STATE_QUARANTINED,
    };

    if (state == AV_DEVICE_STATE_MISSING) {
        test_move(pool, dev, AV_DEVICE_STATE_MISSING, NULL, NULL);
        return;
    }
    for (guint i = 0; i < G_N_ELEMENTS(path) && dev->state != state; i++)
        test_move(pool, dev, path[i], i == 0 ? owner : NULL, NULL);
    g_assert_cmpint(dev->state, ==, state);
}

static void
test_transition_table(void)
{
    /* allowed[from][to], the lifecycle of av-pool.h; leaving missing is
     * checked apart (test_missing). */
    static const gboolean allowed[7][7] = {
        /*              free claimed in-use dirty scrub quar missing */
        /* free */     { 0, 1, 0, 0, 0, 0, 1 },
        /* claimed */  { 1, 0, 1, 0, 0, 0, 1 },
        /* in-use */   { 0, 0, 0, 1, 0, 0, 1 },
        /* dirty */    { 0, 0, 0, 0, 1, 0, 1 },
        /* scrubbing */{ 1, 0, 0, 0, 0, 1, 1 },
        /* quarant. */ { 1, 0, 0, 0, 0, 0, 1 },
        /* missing */  { 1, 0, 0, 0, 0, 0, 0 }, /* before_missing = free */
    };
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvOwner) owner = av_owner_new("uuid-1", "vm1");
    guint64 entries = 0;
    guint moves = 0;

    for (guint from = 0; from < 7; from++) {
        for (guint to = 0; to < 7; to++) {
            g_autoptr(AvPool) pool = test_open_write(state);
            g_autoptr(GError) err = NULL;
            AvPoolDevice *dev = test_device("dsn:0000000000000001.f0", "0000:3b:00.0");
            gboolean ok;

            av_pool_add_device(pool, dev);
            test_reach(pool, dev, (AvDeviceState)from);
            ok = av_pool_transition(pool, dev, (AvDeviceState)to,
                                    to == AV_DEVICE_STATE_CLAIMED ? owner : NULL, NULL, &err);
            if (ok != allowed[from][to])
                g_error("%s -> %s: expected %s, got %s", av_device_state_to_string(from),
                        av_device_state_to_string(to), allowed[from][to] ? "allowed" : "refused",
                        err ? err->message : "allowed");
            if (ok) {
                g_assert_no_error(err);
                g_assert_cmpint(dev->state, ==, to);
            } else {
                g_assert_error(err, AV_ERROR, AV_ERROR_STATE);
                g_assert_cmpint(dev->state, ==, from);
                g_assert_nonnull(strstr(err->message, "cannot move it to"));
                g_assert_nonnull(strstr(err->message, av_device_state_to_string(to)));
            }
            moves += ok;
        }
    }
    g_assert_cmpuint(moves, ==, 15);
    g_assert_true(av_journal_verify(state, &entries, NULL));
    g_assert_cmpuint(entries, >, 49);
    test_remove_state(state);
}

static void
test_transition_lifecycle(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPool) pool = test_open_write(state);
    g_autoptr(AvOwner) vm1 = av_owner_new("8f1c8a3c-58c7-4d5e-9a0b-6c2a1f0e9d11", "vm1");
    g_autoptr(AvOwner) vm2 = av_owner_new("11111111-2222-3333-4444-555555555555", "vm2");
    g_autoptr(GError) err = NULL;
    g_autofree char *journal = NULL;
    g_auto(GStrv) lines = NULL;
    AvPoolDevice *dev = test_device("dsn:0123456789abcdef.f0", "0000:3b:00.0");
    guint64 entries = 0;

    av_pool_add_device(pool, dev);

    /* free -> claimed needs an owner. */
    g_assert_false(av_pool_transition(pool, dev, AV_DEVICE_STATE_CLAIMED, NULL, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_FREE);

    test_move(pool, dev, AV_DEVICE_STATE_CLAIMED, vm1, NULL);
    g_assert_cmpstr(dev->owner->domain_name, ==, "vm1");
    g_assert_true(dev->owner != vm1);
    g_assert_cmpint(dev->state_since, >=, av_pool_now() - 5);
    dev->claim_expires = av_pool_now() + 600;

    /* Another domain cannot take it. */
    g_assert_false(av_pool_transition(pool, dev, AV_DEVICE_STATE_IN_USE, vm2, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_IN_USE);
    g_assert_nonnull(strstr(err->message, "domain 'vm1' (8f1c8a3c-58c7-4d5e-9a0b-6c2a1f0e9d11)"));
    g_assert_nonnull(strstr(err->message, "vm2"));
    g_clear_error(&err);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_CLAIMED);

    /* NULL keeps the owner; leaving claimed drops the expiry. */
    test_move(pool, dev, AV_DEVICE_STATE_IN_USE, NULL, NULL);
    g_assert_cmpstr(dev->owner->domain_uuid, ==, vm1->domain_uuid);
    g_assert_cmpint(dev->claim_expires, ==, 0);

    g_assert_false(av_pool_transition(pool, dev, AV_DEVICE_STATE_CLAIMED, vm1, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_STATE);
    g_assert_cmpstr(err->message, ==,
                    "device 'dsn:0123456789abcdef.f0' (0000:3b:00.0) is in-use by domain 'vm1' "
                    "(8f1c8a3c-58c7-4d5e-9a0b-6c2a1f0e9d11); cannot move it to claimed");
    g_clear_error(&err);
    g_assert_false(av_pool_transition(pool, dev, AV_DEVICE_STATE_FREE, NULL, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_STATE);
    g_clear_error(&err);

    test_move(pool, dev, AV_DEVICE_STATE_DIRTY, NULL, NULL);
    g_assert_nonnull(dev->owner);
    test_move(pool, dev, AV_DEVICE_STATE_SCRUBBING, NULL, NULL);
    test_move(pool, dev, AV_DEVICE_STATE_QUARANTINED, NULL, "scrub step 'vfio-zero' failed");
    g_assert_cmpstr(dev->reason, ==, "scrub step 'vfio-zero' failed");
    g_assert_false(av_pool_transition(pool, dev, AV_DEVICE_STATE_CLAIMED, vm2, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_STATE);
    g_clear_error(&err);
    test_move(pool, dev, AV_DEVICE_STATE_FREE, NULL, NULL);
    g_assert_null(dev->owner);
    g_assert_null(dev->reason);

    /* The claim check happened before the journal: refused moves left no line. */
    g_assert_true(av_journal_verify(state, &entries, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(entries, ==, 6);
    journal = test_read(state, "journal.jsonl", NULL);
    lines = g_strsplit(journal, "\n", -1);
    g_assert_cmpuint(g_strv_length(lines), ==, 7);
    g_assert_true(g_str_has_prefix(lines[0], "{\"seq\": 1, \"time\": \"") ||
                  g_str_has_prefix(lines[0], "{\"seq\":1,\"time\":\""));
    g_assert_nonnull(strstr(lines[0], "\"prev\": \"\"") ? lines[0] : strstr(lines[0], "\"prev\":\"\""));
    g_assert_nonnull(strstr(lines[0], "\"event\"") ? strstr(lines[0], "transition") : NULL);
    g_assert_nonnull(strstr(lines[5], "quarantined"));
    {
        g_autoptr(json_t) e = json_loads(lines[1], 0, NULL);
        g_autofree char *hash = av_journal_hash(lines[0], strlen(lines[0]));
        g_autoptr(GRegex) re = g_regex_new("^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ$", 0, 0, NULL);

        g_assert_nonnull(e);
        g_assert_cmpint(json_integer_value(json_object_get(e, "seq")), ==, 2);
        g_assert_cmpstr(json_string_value(json_object_get(e, "prev")), ==, hash);
        g_assert_cmpstr(json_string_value(json_object_get(e, "from")), ==, "claimed");
        g_assert_cmpstr(json_string_value(json_object_get(e, "to")), ==, "in-use");
        g_assert_cmpstr(json_string_value(json_object_get(e, "identity")), ==, "dsn:0123456789abcdef.f0");
        g_assert_cmpstr(json_string_value(json_object_get(json_object_get(e, "owner"), "domain_name")), ==, "vm1");
        g_assert_true(g_regex_match(re, json_string_value(json_object_get(e, "time")), 0, NULL));
    }
    test_remove_state(state);
}

static void
test_missing(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPool) pool = test_open_write(state);
    g_autoptr(AvOwner) vm1 = av_owner_new("uuid-1", "vm1");
    g_autoptr(GError) err = NULL;
    AvPoolDevice *dev = test_device("dsn:0123456789abcdef.f0", "0000:3b:00.0");
    gint64 expires;

    av_pool_add_device(pool, dev);
    test_move(pool, dev, AV_DEVICE_STATE_CLAIMED, vm1, NULL);
    expires = dev->claim_expires = av_pool_now() + 600;
    test_move(pool, dev, AV_DEVICE_STATE_MISSING, NULL, NULL);
    g_assert_cmpint(dev->state_before_missing, ==, AV_DEVICE_STATE_CLAIMED);
    g_assert_cmpstr(dev->reason, ==, "not found at the last scan");
    g_assert_cmpstr(dev->owner->domain_name, ==, "vm1");
    g_assert_cmpint(dev->claim_expires, ==, expires);
    for (guint to = 0; to < 7; to++) {
        if (to == AV_DEVICE_STATE_CLAIMED)
            continue;
        g_assert_false(av_pool_transition(pool, dev, (AvDeviceState)to, NULL, NULL, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_STATE);
        g_assert_nonnull(strstr(err->message, "is missing (it was claimed by domain 'vm1' (uuid-1) before)"));
        g_clear_error(&err);
    }
    /* Saved and loaded, a missing device keeps what it needs to come back. */
    g_assert_true(av_pool_save(pool, &err));
    g_clear_pointer(&pool, av_pool_free);
    pool = test_open_write(state);
    dev = av_pool_find(pool, "dsn:0123456789abcdef.f0");
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_MISSING);
    test_move(pool, dev, AV_DEVICE_STATE_CLAIMED, NULL, NULL);
    g_assert_cmpint(dev->claim_expires, ==, expires);
    g_assert_null(dev->reason);
    g_assert_cmpstr(dev->owner->domain_uuid, ==, "uuid-1");

    /* quarantined -> missing -> quarantined keeps the quarantine reason. */
    test_move(pool, dev, AV_DEVICE_STATE_IN_USE, NULL, NULL);
    test_move(pool, dev, AV_DEVICE_STATE_DIRTY, NULL, NULL);
    test_move(pool, dev, AV_DEVICE_STATE_SCRUBBING, NULL, NULL);
    test_move(pool, dev, AV_DEVICE_STATE_QUARANTINED, NULL, "reset failed");
    test_move(pool, dev, AV_DEVICE_STATE_MISSING, NULL, "gone");
    g_assert_cmpstr(dev->reason, ==, "gone");
    test_move(pool, dev, AV_DEVICE_STATE_QUARANTINED, NULL, NULL);
    g_assert_cmpstr(dev->reason, ==, "reset failed");
    g_assert_null(dev->reason_before_missing);
    g_assert_true(av_journal_verify(state, NULL, &err));
    g_assert_no_error(err);
    test_remove_state(state);
}

static void
test_read_mode_refuses(void)
{
    g_autofree char *state = test_make_pool(1);
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvOwner) vm1 = av_owner_new("uuid-1", "vm1");
    AvPoolDevice *dev;

    pool = av_pool_open(state, AV_POOL_READ, 0, &err);
    g_assert_no_error(err);
    dev = g_ptr_array_index(av_pool_devices(pool), 0);
    g_assert_false(av_pool_transition(pool, dev, AV_DEVICE_STATE_CLAIMED, vm1, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    g_clear_error(&err);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_FREE);
    g_assert_false(av_pool_save(pool, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    g_assert_false(test_exists(state, "journal.jsonl"));
    test_remove_state(state);
}

/* --- journal ---------------------------------------------------------------- */

static void
test_journal_append(AvPool *pool, const char *event)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) fields = json_pack("{s:s}", "note", event);

    av_pool_journal_append(pool, event, fields, &err);
    g_assert_no_error(err);
}

static void
test_journal_chain(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(GError) err = NULL;
    g_autofree char *data = NULL;
    guint64 entries = 0;

    g_assert_true(av_journal_verify(state, &entries, &err));
    g_assert_cmpuint(entries, ==, 0);
    for (guint round = 0; round < 3; round++) {
        g_autoptr(AvPool) pool = test_open_write(state);

        test_journal_append(pool, "a");
        test_journal_append(pool, "b");
    }
    g_assert_true(av_journal_verify(state, &entries, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(entries, ==, 6);

    /* Reserved members are refused. */
    {
        g_autoptr(AvPool) pool = test_open_write(state);
        g_autoptr(json_t) fields = json_pack("{s:i}", "seq", 99);

        g_assert_false(av_pool_journal_append(pool, "x", fields, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
        g_clear_error(&err);
    }
    /* An entry longer than a line may be is refused, the journal left as
     * it was: a reader would refuse it, and every writer after it. */
    {
        g_autoptr(AvPool) pool = test_open_write(state);
        g_autofree char *big = g_malloc(17 * 1024 * 1024);
        g_autoptr(json_t) fields = NULL;
        g_autofree char *before = test_read(state, "journal.jsonl", NULL);
        g_autofree char *after = NULL;

        memset(big, 'x', 17 * 1024 * 1024 - 1);
        big[17 * 1024 * 1024 - 1] = '\0';
        fields = json_pack("{s:s}", "note", big);
        g_assert_false(av_pool_journal_append(pool, "checkpoint", fields, &err));
        g_assert_nonnull(strstr(err->message, "is longer than a line of the journal"));
        g_clear_error(&err);
        after = test_read(state, "journal.jsonl", NULL);
        g_assert_cmpstr(before, ==, after);
    }

    data = test_read(state, "journal.jsonl", NULL);
    /* Changing one byte of line 3 (still a valid entry) breaks the chain at
     * line 4; of line 2, at line 3. */
    for (guint target = 2; target <= 3; target++) {
        g_auto(GStrv) lines = g_strsplit(data, "\n", -1);
        g_autofree char *joined = NULL;
        g_autofree char *want = g_strdup_printf("at line %u: prev", target + 1);
        char *note = strstr(lines[target - 1], "\"note\":\"");

        g_assert_nonnull(note);
        note[strlen("\"note\":\"")] = 'z';
        joined = g_strjoinv("\n", lines);
        av_test_write(state, "journal.jsonl", joined);
        g_assert_false(av_journal_verify(state, NULL, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
        if (!strstr(err->message, want))
            g_error("expected '%s' in '%s'", want, err->message);
        g_clear_error(&err);
    }
    /* Removing line 2 breaks the seq at the new line 2. */
    {
        g_auto(GStrv) lines = g_strsplit(data, "\n", -1);
        g_autofree char *joined = NULL;

        g_free(lines[1]);
        memmove(&lines[1], &lines[2], (g_strv_length(&lines[2]) + 1) * sizeof(char *));
        joined = g_strjoinv("\n", lines);
        av_test_write(state, "journal.jsonl", joined);
        g_assert_false(av_journal_verify(state, NULL, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
        g_assert_nonnull(strstr(err->message, "at line 2: seq is 3, expected 2"));
        g_clear_error(&err);
    }
    test_remove_state(state);
}

/* The kill storm's find: a writer killed while it acknowledged a torn line
 * leaves its own torn line right after it.  The next writer acknowledges
 * the run of torn lines with one entry that lists each line's SHA-256, and
 * the chain verifies; an acknowledgement that leaves one out does not. */
static void
test_journal_torn_run(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(GError) err = NULL;
    g_autofree char *good = NULL, *torn = NULL, *after = NULL;
    guint64 entries = 0;

    {
        g_autoptr(AvPool) pool = test_open_write(state);

        for (guint i = 0; i < 3; i++)
            test_journal_append(pool, "a");
    }
    good = test_read(state, "journal.jsonl", NULL);
    /* Torn once, ended; its acknowledgement torn half-way again. */
    torn = g_strconcat(good, "{\"seq\": 4, \"time\": \"2026-\n", "{\"seq\": 4, \"time\": \"2026-11-23T", NULL);
    av_test_write(state, "journal.jsonl", torn);
    {
        g_autoptr(AvPool) pool = test_open_write(state);

        test_journal_append(pool, "b");
    }
    after = test_read(state, "journal.jsonl", NULL);
    g_assert_true(g_str_has_prefix(after, torn));
    g_assert_true(av_journal_verify(state, &entries, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(entries, ==, 5);
    {
        g_auto(GStrv) lines = g_strsplit(after, "\n", -1);
        g_autoptr(json_t) ack = json_loads(lines[5], 0, NULL);
        g_autofree char *h4 = av_journal_hash(lines[3], strlen(lines[3]));
        g_autofree char *h5 = av_journal_hash(lines[4], strlen(lines[4]));
        json_t *all = json_object_get(ack, "sha256s");
        g_autofree char *bad = NULL;

        g_assert_cmpstr(json_string_value(json_object_get(ack, "event")), ==, "torn-line");
        g_assert_cmpint(json_integer_value(json_object_get(ack, "line")), ==, 4);
        g_assert_cmpint(json_integer_value(json_object_get(ack, "lines")), ==, 2);
        g_assert_cmpstr(json_string_value(json_array_get(all, 0)), ==, h4);
        g_assert_cmpstr(json_string_value(json_array_get(all, 1)), ==, h5);
        g_assert_cmpstr(json_string_value(json_object_get(ack, "prev")), ==, h5);
        /* The first torn line changed afterwards: the chain says so. */
        bad = g_strdup(after);
        bad[strlen(good) + 2] = 'X';
        av_test_write(state, "journal.jsonl", bad);
        g_assert_false(av_journal_verify(state, NULL, &err));
        g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
        g_assert_nonnull(strstr(err->message, "line 4"));
    }
    test_remove_state(state);
}

static void
test_journal_torn(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(GError) err = NULL;
    g_autofree char *good = NULL, *torn = NULL, *after = NULL;
    guint64 entries = 0;
    gsize good_len;

    {
        g_autoptr(AvPool) pool = test_open_write(state);

        for (guint i = 0; i < 3; i++)
            test_journal_append(pool, "a");
    }
    good = test_read(state, "journal.jsonl", &good_len);
    /* A writer killed mid-append: half a line, no newline. */
    torn = g_strconcat(good, "{\"seq\": 4, \"time\": \"2026-", NULL);
    av_test_write(state, "journal.jsonl", torn);
    g_assert_false(av_journal_verify(state, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
    g_assert_nonnull(strstr(err->message, "line 4"));
    g_assert_nonnull(strstr(err->message, "torn"));
    g_clear_error(&err);

    /* The next writer keeps the torn bytes, ends them, records them. */
    {
        g_autoptr(AvPool) pool = test_open_write(state);

        test_journal_append(pool, "b");
    }
    after = test_read(state, "journal.jsonl", NULL);
    g_assert_true(g_str_has_prefix(after, torn));
    g_assert_cmpint(after[strlen(torn)], ==, '\n');
    g_assert_true(av_journal_verify(state, &entries, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(entries, ==, 5);
    {
        g_auto(GStrv) lines = g_strsplit(after, "\n", -1);
        g_autoptr(json_t) ack = json_loads(lines[4], 0, NULL);
        g_autoptr(json_t) next = json_loads(lines[5], 0, NULL);
        g_autofree char *hash = av_journal_hash(lines[3], strlen(lines[3]));

        g_assert_cmpuint(g_strv_length(lines), ==, 7);
        g_assert_cmpstr(json_string_value(json_object_get(ack, "event")), ==, "torn-line");
        g_assert_cmpint(json_integer_value(json_object_get(ack, "line")), ==, 4);
        g_assert_cmpint(json_integer_value(json_object_get(ack, "seq")), ==, 4);
        g_assert_cmpstr(json_string_value(json_object_get(ack, "prev")), ==, hash);
        g_assert_cmpint(json_integer_value(json_object_get(next, "seq")), ==, 5);
        g_assert_cmpstr(json_string_value(json_object_get(next, "event")), ==, "b");
    }

    /* A whole entry that only lost its newline: ended, no torn-line entry. */
    {
        g_autofree char *nonl = g_strndup(good, good_len - 1);
        g_autofree char *final = NULL;

        av_test_write(state, "journal.jsonl", nonl);
        g_assert_false(av_journal_verify(state, NULL, &err));
        g_assert_nonnull(strstr(err->message, "line 3"));
        g_clear_error(&err);
        {
            g_autoptr(AvPool) pool = test_open_write(state);

            test_journal_append(pool, "c");
        }
        g_assert_true(av_journal_verify(state, &entries, &err));
        g_assert_no_error(err);
        g_assert_cmpuint(entries, ==, 4);
        final = test_read(state, "journal.jsonl", NULL);
        g_assert_null(strstr(final, "torn-line"));
    }

    /* A bad line with no torn-line entry after it is an error. */
    {
        g_autofree char *bad = g_strconcat(good, "garbage\n", NULL);

        av_test_write(state, "journal.jsonl", bad);
        g_assert_false(av_journal_verify(state, NULL, &err));
        g_assert_nonnull(strstr(err->message, "line 4"));
        g_clear_error(&err);
    }
    test_remove_state(state);
}

/* The bytes this process has read so far (rchar of /proc/self/io), or -1
 * when the kernel does not count them. */
static gint64
test_bytes_read(void)
{
    g_autofree char *io = NULL;
    const char *p;

    if (!g_file_get_contents("/proc/self/io", &io, NULL, NULL) || !(p = strstr(io, "rchar: ")))
        return -1;
    return g_ascii_strtoll(p + strlen("rchar: "), NULL, 10);
}

/* A valid journal of @n entries (the last one padded past several read
 * chunks), built here rather than by @n fsynced appends. */
static char *
test_journal_text(guint n)
{
    GString *text = g_string_new(NULL);
    g_autofree char *prev = g_strdup("");
    g_autofree char *pad = g_strnfill(10000, 'p');

    for (guint i = 1; i <= n; i++) {
        gsize start = text->len;

        g_string_append_printf(text, "{\"seq\":%u,\"time\":\"2026-01-01T00:00:00Z\",\"prev\":\"%s\","
                               "\"event\":\"bulk\"%s%s%s}", i, prev, i == n ? ",\"pad\":\"" : "",
                               i == n ? pad : "", i == n ? "\"" : "");
        g_free(prev);
        prev = av_journal_hash(text->str + start, text->len - start);
        g_string_append_c(text, '\n');
    }
    return g_string_free(text, FALSE);
}

/* A writer reads only the tail of a long journal: appending to 50,000
 * lines reads a few chunks, not the whole file, and the chain still holds,
 * also across a torn last line (whose number it must still give). */
static void
test_journal_long(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autofree char *text = test_journal_text(50000);
    g_autofree char *torn = NULL;
    g_autoptr(GError) err = NULL;
    guint64 entries = 0;
    gsize size = strlen(text);
    gint64 before, after;

    av_test_write(state, "journal.jsonl", text);
    g_assert_true(av_journal_verify(state, &entries, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(entries, ==, 50000);
    {
        g_autoptr(AvPool) pool = test_open_write(state);

        before = test_bytes_read();
        test_journal_append(pool, "after-50000");
        after = test_bytes_read();
    }
    if (before < 0)
        g_test_message("no /proc/self/io: not measuring what the append read");
    else
        g_assert_cmpint(after - before, <, 64 * 1024);
    g_assert_cmpuint(size, >, 5 * 1024 * 1024);
    g_assert_true(av_journal_verify(state, &entries, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(entries, ==, 50001);

    /* A torn tail: acknowledged with its line number, 50,002. */
    {
        g_autofree char *now = test_read(state, "journal.jsonl", NULL);

        torn = g_strconcat(now, "{\"seq\": 50002, \"ti", NULL);
        av_test_write(state, "journal.jsonl", torn);
    }
    {
        g_autoptr(AvPool) pool = test_open_write(state);

        test_journal_append(pool, "after-torn");
    }
    g_assert_true(av_journal_verify(state, &entries, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(entries, ==, 50003);
    {
        g_autofree char *all = test_read(state, "journal.jsonl", NULL);
        g_auto(GStrv) lines = g_strsplit(all + size, "\n", -1);
        g_autoptr(json_t) ack = NULL;

        /* after-50000, the torn line, its acknowledgement, after-torn, "" */
        g_assert_cmpuint(g_strv_length(lines), ==, 5);
        ack = json_loads(lines[2], 0, NULL);
        g_assert_cmpstr(json_string_value(json_object_get(ack, "event")), ==, "torn-line");
        g_assert_cmpint(json_integer_value(json_object_get(ack, "line")), ==, 50002);
        g_assert_cmpint(json_integer_value(json_object_get(ack, "seq")), ==, 50002);
    }
    test_remove_state(state);
}

/* --- state dir safety ------------------------------------------------------- */

static void
test_open_unsafe_one(const char *state, const char *want)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);

    g_assert_null(pool);
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    if (!strstr(err->message, want))
        g_error("expected '%s' in '%s'", want, err->message);
}

/* A writer refuses a state dir or pool.json that others may write. */
static void
test_open_unsafe_mode(void)
{
    g_autofree char *state = test_make_pool(1);
    g_autofree char *file = g_build_filename(state, "pool.json", NULL);
    static const mode_t dir_modes[] = { 0770, 0707, 0720, 0777 };
    static const mode_t file_modes[] = { 0620, 0602, 0666 };

    for (guint i = 0; i < G_N_ELEMENTS(dir_modes); i++) {
        g_assert_cmpint(chmod(state, dir_modes[i]), ==, 0);
        test_open_unsafe_one(state, "chmod go-w");
        test_open_unsafe_one(state, "state dir");
    }
    g_assert_cmpint(chmod(state, 0755), ==, 0);
    for (guint i = 0; i < G_N_ELEMENTS(file_modes); i++) {
        g_assert_cmpint(chmod(file, file_modes[i]), ==, 0);
        test_open_unsafe_one(state, "chmod go-w");
        test_open_unsafe_one(state, "pool.json");
    }
    /* Readers are not writers: they may look. */
    {
        g_autoptr(GError) err = NULL;
        g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_READ, 0, &err);

        g_assert_no_error(err);
        g_assert_cmpuint(av_pool_devices(pool)->len, ==, 1);
    }
    g_assert_cmpint(chmod(file, 0644), ==, 0);
    {
        g_autoptr(GError) err = NULL;
        g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);

        g_assert_no_error(err);
        g_assert_cmpuint(av_pool_devices(pool)->len, ==, 1);
    }
    test_remove_state(state);
}

/* A writer refuses a pool.json that is a symbolic link, even to a good
 * pool file. */
static void
test_open_unsafe_symlink(void)
{
    g_autofree char *state = test_make_pool(1);
    g_autofree char *file = g_build_filename(state, "pool.json", NULL);
    g_autofree char *real = g_build_filename(state, "real.json", NULL);

    g_assert_cmpint(rename(file, real), ==, 0);
    g_assert_cmpint(symlink("real.json", file), ==, 0);
    test_open_unsafe_one(state, "symbolic link");
    /* Dangling, too: the writer would create the file it points at. */
    g_assert_cmpint(unlink(real), ==, 0);
    test_open_unsafe_one(state, "symbolic link");
    test_remove_state(state);
}

/* A writer refuses a state dir or pool.json owned by another user.  Making
 * one takes root (chown). */
static void
test_open_unsafe_owner(void)
{
    g_autofree char *state = NULL;
    g_autofree char *file = NULL;
    g_autofree char *want = NULL;

    if (geteuid() != 0) {
        g_test_skip("needs root to chown a state dir to another user");
        return;
    }
    state = test_make_pool(1);
    file = g_build_filename(state, "pool.json", NULL);
    want = g_strdup_printf("chown it to uid %u", (guint)geteuid());
    g_assert_cmpint(chown(state, 65534, 65534), ==, 0);
    test_open_unsafe_one(state, want);
    test_open_unsafe_one(state, "owned by uid 65534");
    g_assert_cmpint(chown(state, 0, 0), ==, 0);
    g_assert_cmpint(chown(file, 65534, 0), ==, 0);
    test_open_unsafe_one(state, want);
    test_open_unsafe_one(state, "pool file");
    g_assert_cmpint(chown(file, 0, 0), ==, 0);
    {
        g_autoptr(GError) err = NULL;
        g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);

        g_assert_no_error(err);
        g_assert_nonnull(pool);
    }
    test_remove_state(state);
}

/* --- identity --------------------------------------------------------------- */

static AvPciDevice *
test_pci(const char *address, const char *parent, guint16 vendor, guint16 device)
{
    AvPciDevice *dev = g_new0(AvPciDevice, 1);

    dev->address = g_strdup(address);
    dev->parent_bridge = g_strdup(parent);
    dev->vendor_id = vendor;
    dev->device_id = device;
    dev->subsystem_vendor_id = vendor;
    dev->subsystem_device_id = 0x134f;
    dev->numa_node = -1;
    dev->iommu_group = -1;
    dev->vf_index = -1;
    return dev;
}

/* A host: root port 00:01.0 (root bus @root) > switch upstream port
 * @b1:00.0 > downstream ports @b2:08.0 and @b2:10.0 > two identical GPUs
 * (@g1:00.0 with an audio function @g1:00.1, and @g2:00.0). */
static AvHost *
test_host(guint root, guint b1, guint b2, guint g1, guint g2)
{
    AvHost *host = g_new0(AvHost, 1);
    g_autofree char *rp = g_strdup_printf("0000:%02x:01.0", root);
    g_autofree char *up = g_strdup_printf("0000:%02x:00.0", b1);
    g_autofree char *dp1 = g_strdup_printf("0000:%02x:08.0", b2);
    g_autofree char *dp2 = g_strdup_printf("0000:%02x:10.0", b2);
    g_autofree char *gpu1 = g_strdup_printf("0000:%02x:00.0", g1);
    g_autofree char *aud1 = g_strdup_printf("0000:%02x:00.1", g1);
    g_autofree char *gpu2 = g_strdup_printf("0000:%02x:00.0", g2);

    host->pci = g_ptr_array_new_with_free_func((GDestroyNotify)av_pci_device_free);
    host->usb = g_ptr_array_new_with_free_func((GDestroyNotify)av_usb_device_free);
    host->numa_nodes = g_ptr_array_new_with_free_func((GDestroyNotify)av_numa_node_free);
    g_ptr_array_add(host->pci, test_pci(rp, NULL, 0x8086, 0x2030));
    g_ptr_array_add(host->pci, test_pci(up, rp, 0x10b5, 0x8747));
    g_ptr_array_add(host->pci, test_pci(dp1, up, 0x10b5, 0x8747));
    g_ptr_array_add(host->pci, test_pci(dp2, up, 0x10b5, 0x8747));
    g_ptr_array_add(host->pci, test_pci(gpu1, dp1, 0x10de, 0x20b0));
    g_ptr_array_add(host->pci, test_pci(aud1, dp1, 0x10de, 0x1aef));
    g_ptr_array_add(host->pci, test_pci(gpu2, dp2, 0x10de, 0x20b0));
    return host;
}

static GPtrArray *
test_identities(const AvHost *host)
{
    GPtrArray *ids = g_ptr_array_new_with_free_func(g_free);

    for (guint i = 0; i < host->pci->len; i++)
        g_ptr_array_add(ids, av_pool_identity_pci(host, g_ptr_array_index(host->pci, i)));
    return ids;
}

static void
test_identity_renumbering(void)
{
    g_autoptr(AvHost) before = test_host(0x00, 0x01, 0x02, 0x03, 0x04);
    g_autoptr(AvHost) after = test_host(0x00, 0x05, 0x06, 0x07, 0x09);
    g_autoptr(GPtrArray) a = test_identities(before);
    g_autoptr(GPtrArray) b = test_identities(after);

    g_assert_cmpuint(a->len, ==, b->len);
    for (guint i = 0; i < a->len; i++) {
        g_assert_cmpstr(g_ptr_array_index(a, i), ==, g_ptr_array_index(b, i));
        for (guint j = 0; j < i; j++)
            g_assert_cmpstr(g_ptr_array_index(a, i), !=, g_ptr_array_index(a, j));
    }
    g_assert_cmpstr(g_ptr_array_index(a, 0), ==, "pci:8086:2030:8086:134f@path:0000:00/01.0");
    g_assert_cmpstr(g_ptr_array_index(a, 4), ==, "pci:10de:20b0:10de:134f@path:0000:00/01.0/00.0/08.0/00.0");
    g_assert_cmpstr(g_ptr_array_index(a, 5), ==, "pci:10de:1aef:10de:134f@path:0000:00/01.0/00.0/08.0/00.1");
    /* Two identical cards in different slots are two devices. */
    g_assert_cmpstr(g_ptr_array_index(a, 6), ==, "pci:10de:20b0:10de:134f@path:0000:00/01.0/00.0/10.0/00.0");
}

static void
test_identity_forms(void)
{
    g_autoptr(AvHost) host = test_host(0x3a, 0x3b, 0x3c, 0x3d, 0x3e);
    AvPciDevice *gpu1 = av_host_find_pci(host, "0000:3d:00.0");
    AvPciDevice *aud1 = av_host_find_pci(host, "0000:3d:00.1");
    AvPciDevice *gpu2 = av_host_find_pci(host, "0000:3e:00.0");
    AvPciDevice *vf;
    g_autofree char *id1 = NULL, *id2 = NULL, *id3 = NULL, *id4 = NULL, *id5 = NULL, *id6 = NULL;

    /* DSN: every function of the card shares it; the function tells apart. */
    gpu1->has_dsn = aud1->has_dsn = TRUE;
    gpu1->dsn = aud1->dsn = G_GUINT64_CONSTANT(0x0123456789ABCDEF);
    id1 = av_pool_identity_pci(host, gpu1);
    id2 = av_pool_identity_pci(host, aud1);
    g_assert_cmpstr(id1, ==, "dsn:10de:20b0:0123456789abcdef.f0");
    g_assert_cmpstr(id2, ==, "dsn:10de:1aef:0123456789abcdef.f1");

    /* A physical slot beats the path. */
    gpu2->physical_slot = g_strdup("7");
    id3 = av_pool_identity_pci(host, gpu2);
    g_assert_cmpstr(id3, ==, "pci:10de:20b0:10de:134f@slot:7.f0");

    /* A VF is its PF's identity and its index. */
    vf = test_pci("0000:3e:00.4", "0000:3c:10.0", 0x10de, 0x20b1);
    vf->physfn = g_strdup("0000:3e:00.0");
    vf->vf_index = 3;
    g_ptr_array_add(host->pci, vf);
    id4 = av_pool_identity_pci(host, vf);
    g_assert_cmpstr(id4, ==, "pci:10de:20b0:10de:134f@slot:7.f0/vf3");
    /* Not the VF's own DSN, if it has one. */
    vf->has_dsn = TRUE;
    vf->dsn = 5;
    id5 = av_pool_identity_pci(host, vf);
    g_assert_cmpstr(id5, ==, id4);

    /* A parent bridge that the scan does not hold ends the path there. */
    g_free(gpu2->physical_slot);
    gpu2->physical_slot = NULL;
    g_free(gpu2->parent_bridge);
    gpu2->parent_bridge = g_strdup("0000:77:02.0");
    id6 = av_pool_identity_pci(host, gpu2);
    g_assert_cmpstr(id6, ==, "pci:10de:20b0:10de:134f@path:0000:77/02.0/00.0");
}

static void
test_identity_usb(void)
{
    AvUsbDevice dev = { 0 };
    g_autofree char *a = NULL, *b = NULL;

    dev.bus_path = (char *)"1-1.2";
    dev.vendor_id = 0x03e7;
    dev.product_id = 0x2485;
    a = av_pool_identity_usb(&dev);
    g_assert_cmpstr(a, ==, "usb:03e7:2485@port:1-1.2");
    dev.serial = (char *)"03E72485";
    b = av_pool_identity_usb(&dev);
    g_assert_cmpstr(b, ==, "usb:03e7:2485:serial:03E72485");
}

/* --- crash safety and locks -------------------------------------------------- */

/* A writer killed in the middle of writing the temporary file (here by
 * SIGXFSZ, when the file outgrows RLIMIT_FSIZE: deterministic) leaves the
 * previous pool.json whole; the next writer removes its temporary file. */
static void
test_crash_mid_write(void)
{
    g_autofree char *state = test_make_pool(3);
    g_autofree char *before = NULL, *after = NULL;
    g_autoptr(GError) err = NULL;
    int status = 0;
    pid_t pid;

    before = test_read(state, "pool.json", NULL);
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        struct rlimit lim = { 4096, 4096 };
        AvPool *pool = av_pool_open(state, AV_POOL_WRITE, 1000, NULL);

        if (!pool)
            _exit(2);
        for (guint i = 0; i < 1000; i++) {
            g_autofree char *id = g_strdup_printf("dsn:%016x.f1", i);

            av_pool_add_device(pool, test_device(id, "0000:3b:00.0"));
        }
        signal(SIGXFSZ, SIG_DFL);
        setrlimit(RLIMIT_FSIZE, &lim);
        av_pool_save(pool, NULL);
        _exit(3);
    }
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFSIGNALED(status));
    g_assert_cmpint(WTERMSIG(status), ==, SIGXFSZ);
    g_assert_cmpuint(test_count_temps(state), ==, 1);

    after = test_read(state, "pool.json", NULL);
    g_assert_cmpstr(after, ==, before);
    {
        g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_READ, 0, &err);

        g_assert_no_error(err);
        g_assert_cmpuint(av_pool_devices(pool)->len, ==, 3);
        g_assert_cmpuint(test_count_temps(state), ==, 1);
    }
    {
        g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);

        g_assert_no_error(err);
        g_assert_cmpuint(av_pool_devices(pool)->len, ==, 3);
        g_assert_cmpuint(test_count_temps(state), ==, 0);
    }
    test_remove_state(state);
}

/* The same with SIGKILL at an arbitrary moment of a loop of saves: whatever
 * the moment, pool.json is one whole version, old or new. */
static void
test_crash_sigkill(void)
{
    g_autofree char *state = test_make_pool(3);
    g_autoptr(GError) err = NULL;
    int status = 0;
    pid_t pid;

    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        AvPool *pool = av_pool_open(state, AV_POOL_WRITE, 1000, NULL);

        if (!pool)
            _exit(2);
        for (guint i = 0; i < 20000; i++) {
            g_autofree char *id = g_strdup_printf("dsn:%016x.f1", i);

            av_pool_add_device(pool, test_device(id, "0000:3b:00.0"));
        }
        for (;;)
            av_pool_save(pool, NULL);
    }
    /* Kill it once a temporary file is there. */
    for (guint i = 0; i < 3000 && test_count_temps(state) == 0; i++)
        g_usleep(1000);
    kill(pid, SIGKILL);
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFSIGNALED(status));
    {
        g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
        guint n;

        g_assert_no_error(err);
        n = av_pool_devices(pool)->len;
        g_assert_true(n == 3 || n == 20003);
        g_assert_cmpuint(test_count_temps(state), ==, 0);
    }
    test_remove_state(state);
}

static void
test_stale_temps(void)
{
    g_autofree char *state = test_make_pool(1);

    av_test_write(state, "pool.json.tmp.AbC123", "{\"version\": 1, \"dev");
    av_test_write(state, "other.tmp.x", "keep");
    {
        g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_READ, 0, NULL);

        g_assert_nonnull(pool);
        g_assert_cmpuint(test_count_temps(state), ==, 1);
    }
    {
        g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_WRITE, 0, NULL);

        g_assert_nonnull(pool);
        g_assert_cmpuint(av_pool_devices(pool)->len, ==, 1);
        g_assert_cmpuint(test_count_temps(state), ==, 0);
        g_assert_true(test_exists(state, "other.tmp.x"));
    }
    test_remove_state(state);
}

typedef struct {
    const char *state;
    AvPoolMode mode;
} TestHoldArgs;

static gpointer
test_take_pool(gconstpointer data)
{
    const TestHoldArgs *args = data;

    return av_pool_open(args->state, args->mode, 1000, NULL);
}

/* A child holds the pool (@mode) until the parent writes to its pipe. */
static pid_t
test_hold(const char *state, AvPoolMode mode, int *ret_fd)
{
    const TestHoldArgs args = { state, mode };

    return av_test_hold(test_take_pool, (GDestroyNotify)av_pool_free, &args, ret_fd);
}

static void
test_lock_contention(void)
{
    g_autofree char *state = test_make_pool(1);
    g_autoptr(GError) err = NULL;
    gint64 start;
    int fd = -1;
    pid_t pid;

    /* A writer excludes everyone. */
    pid = test_hold(state, AV_POOL_WRITE, &fd);
    {
        g_autoptr(AvPool) w = av_pool_open(state, AV_POOL_WRITE, 0, &err);

        g_assert_null(w);
        g_assert_error(err, AV_ERROR, AV_ERROR_LOCKED);
        g_assert_nonnull(strstr(err->message, "pool.lock"));
        g_clear_error(&err);
    }
    {
        g_autoptr(AvPool) r = av_pool_open(state, AV_POOL_READ, 0, &err);

        g_assert_null(r);
        g_assert_error(err, AV_ERROR, AV_ERROR_LOCKED);
        g_clear_error(&err);
    }
    start = g_get_monotonic_time();
    {
        g_autoptr(AvPool) w = av_pool_open(state, AV_POOL_WRITE, 150, &err);

        g_assert_null(w);
        g_assert_error(err, AV_ERROR, AV_ERROR_LOCKED);
        g_clear_error(&err);
    }
    g_assert_cmpint(g_get_monotonic_time() - start, >=, 150 * 1000);
    av_test_hold_release(pid, fd);
    {
        g_autoptr(AvPool) w = av_pool_open(state, AV_POOL_WRITE, 0, &err);

        g_assert_no_error(err);
        g_assert_nonnull(w);
    }

    /* Readers share. */
    pid = test_hold(state, AV_POOL_READ, &fd);
    {
        g_autoptr(AvPool) r = av_pool_open(state, AV_POOL_READ, 0, &err);
        g_autoptr(AvPool) w = NULL;

        g_assert_no_error(err);
        g_assert_cmpuint(av_pool_devices(r)->len, ==, 1);
        w = av_pool_open(state, AV_POOL_WRITE, 0, &err);
        g_assert_null(w);
        g_assert_error(err, AV_ERROR, AV_ERROR_LOCKED);
        g_clear_error(&err);
    }
    av_test_hold_release(pid, fd);

    /* A holder that dies drops the lock. */
    pid = test_hold(state, AV_POOL_WRITE, &fd);
    kill(pid, SIGKILL);
    g_assert_cmpint(waitpid(pid, NULL, 0), ==, pid);
    close(fd);
    {
        g_autoptr(AvPool) w = av_pool_open(state, AV_POOL_WRITE, 0, &err);

        g_assert_no_error(err);
        g_assert_nonnull(w);
    }
    test_remove_state(state);
}

/* --- reconciliation ----------------------------------------------------------- */

static const char test_policy[] =
    "{\"profiles\": [\n"
    " {\"name\": \"gpu\", \"match\": {\"vendor\": \"0x10de\", \"device\": [\"0x20b0\"]},"
    " \"attach\": \"vfio-pci\"},\n"
    " {\"name\": \"qat-vf\", \"match\": {\"vendor\": \"0x8086\", \"device\": [\"0x37c9\"]},"
    " \"attach\": \"sriov-vf\"},\n"
    " {\"name\": \"stick\", \"match\": {\"vendor\": \"0x03e7\", \"device\": [\"0x2485\"]},"
    " \"attach\": \"usb\"}\n"
    "]}\n";

static AvPolicy *
test_load_policy(const char *text)
{
    g_autoptr(AvPolicy) policy = av_policy_new();
    g_autoptr(GError) err = NULL;

    av_policy_add_data(policy, "test.json", text, strlen(text), &err);
    g_assert_no_error(err);
    return g_steal_pointer(&policy);
}

static AvUsbDevice *
test_usb(const char *bus_path, const char *serial)
{
    AvUsbDevice *dev = g_new0(AvUsbDevice, 1);

    dev->bus_path = g_strdup(bus_path);
    dev->serial = g_strdup(serial);
    dev->vendor_id = 0x03e7;
    dev->product_id = 0x2485;
    dev->numa_node = 0;
    return dev;
}

static void
test_reconcile_host(AvPool *pool, const AvHost *host, const AvPolicy *policy, gboolean want_changed)
{
    g_autoptr(GError) err = NULL;
    gboolean changed = !want_changed;

    av_pool_reconcile(pool, host, policy, &changed, &err);
    g_assert_no_error(err);
    if (want_changed)
        g_assert_true(changed);
}

static guint
test_count_events(const char *state, const char *event)
{
    g_autofree char *data = test_read(state, "journal.jsonl", NULL);
    g_auto(GStrv) lines = g_strsplit(data, "\n", -1);
    guint n = 0;

    for (guint i = 0; lines[i]; i++) {
        g_autoptr(json_t) e = json_loads(lines[i], 0, NULL);

        n += e && g_strcmp0(json_string_value(json_object_get(e, "event")), event) == 0;
    }
    return n;
}

static void
test_reconcile(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPolicy) policy = test_load_policy(test_policy);
    g_autoptr(AvHost) host = test_host(0x00, 0x01, 0x02, 0x03, 0x04);
    g_autoptr(AvHost) renumbered = test_host(0x00, 0x05, 0x06, 0x07, 0x09);
    g_autoptr(AvHost) one_gone = test_host(0x00, 0x05, 0x06, 0x07, 0x09);
    g_autoptr(AvOwner) vm1 = av_owner_new("uuid-1", "vm1");
    g_autoptr(AvPool) pool = test_open_write(state);
    g_autoptr(GError) err = NULL;
    AvPciDevice *gpu = av_host_find_pci(host, "0000:03:00.0");
    AvPciDevice *pf, *vf;
    AvPoolDevice *a, *b, *u;
    guint64 entries = 0;

    gpu->numa_node = 1;
    gpu->iommu_group = 17;
    gpu->driver = g_strdup("nvidia");
    /* A QAT PF (not pooled by the sriov-vf profile) and one VF (pooled). */
    pf = test_pci("0000:00:05.0", NULL, 0x8086, 0x37c8);
    pf->sriov_capable = TRUE;
    vf = test_pci("0000:00:05.1", NULL, 0x8086, 0x37c9);
    vf->physfn = g_strdup("0000:00:05.0");
    vf->vf_index = 0;
    g_ptr_array_add(host->pci, pf);
    g_ptr_array_add(host->pci, vf);
    g_ptr_array_add(host->usb, test_usb("1-1.2", "S1"));

    test_reconcile_host(pool, host, policy, TRUE);
    g_assert_cmpuint(av_pool_devices(pool)->len, ==, 4);
    a = av_pool_find(pool, "pci:10de:20b0:10de:134f@path:0000:00/01.0/00.0/08.0/00.0");
    b = av_pool_find(pool, "pci:10de:20b0:10de:134f@path:0000:00/01.0/00.0/10.0/00.0");
    u = av_pool_find(pool, "usb:03e7:2485:serial:S1");
    g_assert_nonnull(a);
    g_assert_nonnull(b);
    g_assert_nonnull(u);
    g_assert_nonnull(av_pool_find(pool, "pci:8086:37c8:8086:134f@path:0000:00/05.0/vf0"));
    g_assert_cmpstr(a->address, ==, "0000:03:00.0");
    g_assert_cmpstr(a->profile, ==, "gpu");
    g_assert_cmpint(a->state, ==, AV_DEVICE_STATE_FREE);
    g_assert_cmpint(a->numa_node, ==, 1);
    g_assert_cmpint(a->iommu_group, ==, 17);
    g_assert_cmpstr(a->original_driver, ==, "nvidia");
    g_assert_cmpint(a->last_seen, >=, av_pool_now() - 5);
    g_assert_cmpint(u->kind, ==, AV_DEVICE_KIND_USB);
    g_assert_cmpstr(u->address, ==, "1-1.2");
    g_assert_cmpstr(u->profile, ==, "stick");
    g_assert_cmpuint(test_count_events(state, "added"), ==, 4);

    /* Nothing new: no journal line. */
    av_journal_verify(state, &entries, NULL);
    test_reconcile_host(pool, host, policy, FALSE);
    {
        guint64 again = 0;

        av_journal_verify(state, &again, NULL);
        g_assert_cmpuint(again, ==, entries);
    }

    /* Claim one, then the buses are renumbered: same devices, new addresses. */
    test_move(pool, a, AV_DEVICE_STATE_CLAIMED, vm1, NULL);
    test_move(pool, a, AV_DEVICE_STATE_IN_USE, NULL, NULL);
    test_reconcile_host(pool, renumbered, policy, TRUE);
    g_assert_cmpuint(av_pool_devices(pool)->len, ==, 4);
    g_assert_cmpstr(a->address, ==, "0000:07:00.0");
    g_assert_cmpstr(b->address, ==, "0000:09:00.0");
    g_assert_cmpint(a->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpuint(test_count_events(state, "readdressed"), ==, 2);
    /* The VF and the stick are not on the renumbered host: missing. */
    g_assert_cmpint(u->state, ==, AV_DEVICE_STATE_MISSING);
    g_assert_cmpuint(test_count_events(state, "missing"), ==, 2);

    /* The in-use card disappears: missing, owner kept; then it returns. */
    g_ptr_array_remove_index(one_gone->pci, 4);
    g_ptr_array_remove_index(one_gone->pci, 4);
    test_reconcile_host(pool, one_gone, policy, TRUE);
    g_assert_cmpint(a->state, ==, AV_DEVICE_STATE_MISSING);
    g_assert_cmpint(a->state_before_missing, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpstr(a->owner->domain_name, ==, "vm1");
    test_reconcile_host(pool, renumbered, policy, TRUE);
    g_assert_cmpint(a->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpstr(a->owner->domain_name, ==, "vm1");
    g_assert_cmpuint(test_count_events(state, "found"), ==, 1);

    /* The profile goes away: the held card stays as unmanaged, the free one
     * leaves the pool. */
    {
        g_autoptr(AvPolicy) other = test_load_policy("{\"profiles\": [{\"name\": \"stick\", \"match\": "
                                                     "{\"vendor\": \"0x03e7\"}, \"attach\": \"usb\"}]}");

        test_reconcile_host(pool, renumbered, other, TRUE);
        g_assert_true(av_pool_find(pool, a->identity) == a);
        g_assert_cmpstr(a->reason, ==, "unmanaged");
        g_assert_null(av_pool_find(pool, "pci:10de:20b0:10de:134f@path:0000:00/01.0/00.0/10.0/00.0"));
        g_assert_cmpuint(test_count_events(state, "removed"), ==, 1);
    }
    test_reconcile_host(pool, renumbered, policy, TRUE);
    g_assert_null(a->reason);

    /* A quarantined device keeps why through a profile going and coming back. */
    test_move(pool, a, AV_DEVICE_STATE_DIRTY, NULL, NULL);
    test_move(pool, a, AV_DEVICE_STATE_SCRUBBING, NULL, NULL);
    test_move(pool, a, AV_DEVICE_STATE_QUARANTINED, NULL, "the option ROM changed");
    {
        g_autoptr(AvPolicy) other = test_load_policy("{\"profiles\": [{\"name\": \"stick\", \"match\": "
                                                     "{\"vendor\": \"0x03e7\"}, \"attach\": \"usb\"}]}");

        test_reconcile_host(pool, renumbered, other, FALSE);
        g_assert_cmpint(a->state, ==, AV_DEVICE_STATE_QUARANTINED);
        g_assert_cmpstr(a->reason, ==, "the option ROM changed");
    }
    test_reconcile_host(pool, renumbered, policy, FALSE);
    g_assert_cmpint(a->state, ==, AV_DEVICE_STATE_QUARANTINED);
    g_assert_cmpstr(a->reason, ==, "the option ROM changed");

    g_assert_true(av_journal_verify(state, NULL, &err));
    g_assert_no_error(err);
    g_assert_true(av_pool_save(pool, &err));
    g_assert_no_error(err);
    test_remove_state(state);
}

/* A host without devices; tests add theirs. */
static AvHost *
test_host_empty(void)
{
    AvHost *host = g_new0(AvHost, 1);

    host->pci = g_ptr_array_new_with_free_func((GDestroyNotify)av_pci_device_free);
    host->usb = g_ptr_array_new_with_free_func((GDestroyNotify)av_usb_device_free);
    host->numa_nodes = g_ptr_array_new_with_free_func((GDestroyNotify)av_numa_node_free);
    return host;
}

static AvPciDevice *
test_pci_dsn(AvHost *host, const char *address, guint16 device, guint64 dsn)
{
    AvPciDevice *dev = test_pci(address, NULL, 0x10de, device);

    dev->has_dsn = TRUE;
    dev->dsn = dsn;
    g_ptr_array_add(host->pci, dev);
    return dev;
}

static const char test_collide_policy[] =
    "{\"profiles\": [\n"
    " {\"name\": \"a100\", \"match\": {\"vendor\": \"0x10de\", \"device\": [\"0x20b0\", \"0x20b5\"]}},\n"
    " {\"name\": \"stick\", \"match\": {\"vendor\": \"0x03e7\", \"device\": [\"0x2485\"]},"
    " \"attach\": \"usb\"}\n"
    "]}\n";

static const char test_runtime_policy[] =
    "{\"profiles\": [{\"name\": \"stick\", \"match\": {\"vendor\": \"0x03e7\", \"device\": [\"0x2485\"]},"
    " \"attach\": \"usb\", \"runtime_ids\": [\"03e7:f63b\"]}]}\n";

/* A host whose one stick at 1-1.2 presents @product and @serial, seen in
 * the boot "boot-1"; @partial: as av_pool_confirm() takes it. */
static AvHost *
test_runtime_host(guint16 product, const char *serial, gboolean partial)
{
    AvHost *host = test_host_empty();
    AvUsbDevice *stick = test_usb("1-1.2", serial);

    stick->product_id = product;
    g_ptr_array_add(host->usb, stick);
    host->boot_id = g_strdup("boot-1");
    host->partial = partial;
    host->usb_scanned = TRUE;
    return host;
}

/* The stick of @first, in use, then seen as in @changed: its entry takes
 * @identity with an identity problem ("identity-changed"). */
static void
test_runtime_changed(const AvPolicy *policy, const AvHost *first, const AvHost *changed, const char *identity)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPool) pool = test_open_write(state);
    g_autoptr(AvOwner) vm1 = av_owner_new("uuid-1", "vm1");
    AvPoolDevice *u;

    test_reconcile_host(pool, first, policy, TRUE);
    u = av_pool_find(pool, "usb:03e7:2485:serial:S1");
    test_move(pool, u, AV_DEVICE_STATE_CLAIMED, vm1, NULL);
    test_move(pool, u, AV_DEVICE_STATE_IN_USE, NULL, NULL);
    test_reconcile_host(pool, changed, policy, TRUE);
    g_assert_cmpuint(test_count_events(state, "identity-changed"), ==, 1);
    g_assert_cmpstr(u->identity, ==, identity);
    g_assert_nonnull(strstr(u->identity_problem, "its identity changed from 'usb:03e7:2485:serial:S1'"));
    test_remove_state(state);
}

/* A stick whose firmware changes its ids (issue 34): held, it may present
 * its profile's runtime_ids at its port and keeps its entry; other ids, or
 * the runtime ids with another serial, are an identity change; free, the
 * runtime ids are an identity problem (the firmware survived). */
static void
test_reconcile_usb_runtime(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPolicy) policy = test_load_policy(test_runtime_policy);
    g_autoptr(AvHost) first = test_runtime_host(0x2485, "S1", FALSE);
    g_autoptr(AvHost) loaded = test_runtime_host(0xf63b, "S1", FALSE);
    g_autoptr(AvHost) loaded_partial = test_runtime_host(0xf63b, "S1", TRUE);
    g_autoptr(AvHost) other = test_runtime_host(0x1234, "S1", FALSE);
    g_autoptr(AvHost) faked = test_runtime_host(0xf63b, "FAKE", FALSE);
    g_autoptr(AvOwner) vm1 = av_owner_new("uuid-1", "vm1");
    g_autoptr(AvPool) pool = test_open_write(state);
    AvPoolDevice *u;
    char *why = NULL;

    test_reconcile_host(pool, first, policy, TRUE);
    u = av_pool_find(pool, "usb:03e7:2485:serial:S1");
    g_assert_nonnull(u);
    test_move(pool, u, AV_DEVICE_STATE_CLAIMED, vm1, NULL);
    test_move(pool, u, AV_DEVICE_STATE_IN_USE, NULL, NULL);

    /* In use, its firmware loaded: the same entry, nothing to say. */
    test_reconcile_host(pool, loaded, policy, FALSE);
    g_assert_cmpuint(av_pool_devices(pool)->len, ==, 1);
    g_assert_true(av_pool_find(pool, "usb:03e7:2485:serial:S1") == u);
    g_assert_null(av_pool_find(pool, "usb:03e7:f63b:serial:S1"));
    g_assert_cmpint(u->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpstr(u->owner->domain_name, ==, "vm1");
    g_assert_cmpstr(u->profile, ==, "stick");
    g_assert_null(u->identity_problem);
    g_assert_null(u->reason);
    g_assert_cmpuint(test_count_events(state, "identity-changed"), ==, 0);
    g_assert_cmpuint(test_count_events(state, "missing"), ==, 0);
    /* The hook's quick check agrees with the pool. */
    g_assert_true(av_pool_confirm(pool, loaded_partial, policy, &why));
    g_assert_null(why);

    /* Released, still loaded until its scrub: the same. */
    test_move(pool, u, AV_DEVICE_STATE_DIRTY, NULL, NULL);
    test_reconcile_host(pool, loaded, policy, FALSE);
    g_assert_cmpint(u->state, ==, AV_DEVICE_STATE_DIRTY);
    g_assert_null(u->identity_problem);
    /* Scrubbed back to its first ids: free. */
    test_move(pool, u, AV_DEVICE_STATE_SCRUBBING, NULL, NULL);
    test_reconcile_host(pool, first, policy, FALSE);
    test_move(pool, u, AV_DEVICE_STATE_FREE, NULL, NULL);
    test_reconcile_host(pool, first, policy, FALSE);
    g_assert_cmpint(u->state, ==, AV_DEVICE_STATE_FREE);
    /* Free, presenting its runtime ids: the firmware survived, quarantined. */
    test_reconcile_host(pool, loaded, policy, TRUE);
    g_assert_true(av_pool_find(pool, "usb:03e7:2485:serial:S1") == u);
    g_assert_cmpint(u->state, ==, AV_DEVICE_STATE_QUARANTINED);
    g_assert_nonnull(strstr(u->identity_problem, "it presents 03e7:f63b, one of the runtime_ids of its profile "
                                                 "'stick', while it was free"));
    g_assert_cmpuint(test_count_events(state, "identity-problem"), ==, 1);
    test_remove_state(state);

    /* In use, other ids at its port: an identity change, as ever; so are
     * the runtime ids with another serial (a tenant's firmware faking one). */
    test_runtime_changed(policy, first, other, "usb:03e7:1234:serial:S1");
    test_runtime_changed(policy, first, faked, "usb:03e7:f63b:serial:FAKE");
}

/* Claimed (no domain runs on it yet), presenting its runtime ids: foreign
 * firmware, quarantined with an identity problem as a free stick is. */
static void
test_reconcile_usb_runtime_claimed(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPolicy) policy = test_load_policy(test_runtime_policy);
    g_autoptr(AvHost) first = test_runtime_host(0x2485, "S1", FALSE);
    g_autoptr(AvHost) loaded = test_runtime_host(0xf63b, "S1", FALSE);
    g_autoptr(AvOwner) vm1 = av_owner_new("uuid-1", "vm1");
    g_autoptr(AvPool) pool = test_open_write(state);
    AvPoolDevice *u;

    g_assert_false(av_pool_usb_runtime_accepted(AV_DEVICE_STATE_CLAIMED));
    g_assert_false(av_pool_usb_runtime_accepted(AV_DEVICE_STATE_FREE));
    g_assert_true(av_pool_usb_runtime_accepted(AV_DEVICE_STATE_IN_USE));
    test_reconcile_host(pool, first, policy, TRUE);
    u = av_pool_find(pool, "usb:03e7:2485:serial:S1");
    g_assert_nonnull(u);
    test_move(pool, u, AV_DEVICE_STATE_CLAIMED, vm1, NULL);
    test_reconcile_host(pool, loaded, policy, TRUE);
    g_assert_true(av_pool_find(pool, "usb:03e7:2485:serial:S1") == u);
    g_assert_cmpint(u->state, ==, AV_DEVICE_STATE_QUARANTINED);
    g_assert_nonnull(strstr(u->identity_problem, "it presents 03e7:f63b, one of the runtime_ids of its profile "
                                                 "'stick', while it was claimed: no domain runs on a claimed stick"));
    test_remove_state(state);
}

/* Two identical USB sticks with one serial: both pooled, each by its port,
 * with a warning naming them. */
static void
test_collide_usb(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPolicy) policy = test_load_policy(test_collide_policy);
    g_autoptr(AvHost) host = test_host_empty();
    g_autoptr(AvPool) pool = test_open_write(state);
    AvPoolDevice *a, *b;

    g_ptr_array_add(host->usb, test_usb("1-1.2", "SAME"));
    g_ptr_array_add(host->usb, test_usb("1-1.3", "SAME"));
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING,
                          "*share an identity*usb:03e7:2485:serial:SAME*1-1.2 as 'usb:03e7:2485@port:1-1.2'*"
                          "1-1.3 as 'usb:03e7:2485@port:1-1.3'*");
    test_reconcile_host(pool, host, policy, TRUE);
    g_test_assert_expected_messages();
    g_assert_cmpuint(av_pool_devices(pool)->len, ==, 2);
    a = av_pool_find(pool, "usb:03e7:2485@port:1-1.2");
    b = av_pool_find(pool, "usb:03e7:2485@port:1-1.3");
    g_assert_nonnull(a);
    g_assert_nonnull(b);
    g_assert_cmpstr(a->address, ==, "1-1.2");
    g_assert_cmpstr(b->address, ==, "1-1.3");
    g_assert_null(av_pool_find(pool, "usb:03e7:2485:serial:SAME"));
    g_assert_cmpuint(test_count_events(state, "added"), ==, 2);
    test_remove_state(state);
}

/* DSNs that tell nothing apart: 0 and all ones are no DSN; a DSN two
 * kinds of card share is told apart by the ids; two identical cards with
 * one DSN fall back to their paths. */
static void
test_collide_dsn(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPolicy) policy = test_load_policy(test_collide_policy);
    g_autoptr(AvHost) host = test_host_empty();
    g_autoptr(AvHost) twins = test_host_empty();
    g_autoptr(AvPool) pool = test_open_write(state);
    g_autoptr(GError) err = NULL;
    g_autofree char *id = NULL;
    AvPciDevice *vf0, *vf1;

    /* Two A100s with DSN 0, one with all ones: their paths. */
    test_pci_dsn(host, "0000:17:00.0", 0x20b0, 0);
    test_pci_dsn(host, "0000:31:00.0", 0x20b0, 0);
    test_pci_dsn(host, "0000:4b:00.0", 0x20b0, G_MAXUINT64);
    /* One DSN on two cards of different device ids. */
    test_pci_dsn(host, "0000:ca:00.0", 0x20b0, G_GUINT64_CONSTANT(0x48b02d1a000001c0));
    test_pci_dsn(host, "0000:e3:00.0", 0x20b5, G_GUINT64_CONSTANT(0x48b02d1a000001c0));
    test_reconcile_host(pool, host, policy, TRUE);
    g_assert_cmpuint(av_pool_devices(pool)->len, ==, 5);
    g_assert_nonnull(av_pool_find(pool, "pci:10de:20b0:10de:134f@path:0000:17/00.0"));
    g_assert_nonnull(av_pool_find(pool, "pci:10de:20b0:10de:134f@path:0000:31/00.0"));
    g_assert_nonnull(av_pool_find(pool, "pci:10de:20b0:10de:134f@path:0000:4b/00.0"));
    g_assert_cmpstr(av_pool_find(pool, "dsn:10de:20b0:48b02d1a000001c0.f0")->address, ==, "0000:ca:00.0");
    g_assert_cmpstr(av_pool_find(pool, "dsn:10de:20b5:48b02d1a000001c0.f0")->address, ==, "0000:e3:00.0");

    /* Two identical PFs with one DSN, each with a VF: every one of the four
     * falls back to its path (the VFs to their PF's path), one warning. */
    test_pci_dsn(twins, "0000:17:00.0", 0x20b0, 42);
    test_pci_dsn(twins, "0000:31:00.0", 0x20b0, 42);
    vf0 = test_pci_dsn(twins, "0000:17:00.4", 0x20b5, 42);
    vf0->physfn = g_strdup("0000:17:00.0");
    vf0->vf_index = 0;
    vf1 = test_pci_dsn(twins, "0000:31:00.4", 0x20b5, 42);
    vf1->physfn = g_strdup("0000:31:00.0");
    vf1->vf_index = 0;
    id = av_pool_identity_pci(twins, vf1);
    g_assert_cmpstr(id, ==, "dsn:10de:20b0:000000000000002a.f0/vf0");
    {
        g_autoptr(AvPolicy) vfs = test_load_policy(
            "{\"profiles\": [{\"name\": \"a100\", \"match\": {\"vendor\": \"0x10de\", \"device\": [\"0x20b0\"]}},"
            " {\"name\": \"a100-vf\", \"match\": {\"vendor\": \"0x10de\", \"device\": [\"0x20b5\"]},"
            " \"attach\": \"sriov-vf\"}]}");
        g_autofree char *state2 = test_make_pool(0);
        g_autoptr(AvPool) pool2 = test_open_write(state2);

        g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING,
                              "*'dsn:10de:20b0:000000000000002a.f0' (0000:17:00.0 as "
                              "'pci:10de:20b0:10de:134f@path:0000:17/00.0', 0000:31:00.0 as "
                              "'pci:10de:20b0:10de:134f@path:0000:31/00.0')*"
                              "'dsn:10de:20b0:000000000000002a.f0/vf0' (0000:17:00.4 as "
                              "'pci:10de:20b0:10de:134f@path:0000:17/00.0/vf0', 0000:31:00.4*");
        test_reconcile_host(pool2, twins, vfs, TRUE);
        g_test_assert_expected_messages();
        g_assert_cmpuint(av_pool_devices(pool2)->len, ==, 4);
        g_assert_cmpstr(av_pool_find(pool2, "pci:10de:20b0:10de:134f@path:0000:17/00.0")->address, ==,
                        "0000:17:00.0");
        g_assert_cmpstr(av_pool_find(pool2, "pci:10de:20b0:10de:134f@path:0000:31/00.0/vf0")->address, ==,
                        "0000:31:00.4");
        g_assert_true(av_journal_verify(state2, NULL, &err));
        g_assert_no_error(err);
        test_remove_state(state2);
    }
    test_remove_state(state);
}

/* The pool device at @address, and checks that it is the only one there. */
static AvPoolDevice *
test_only_at(AvPool *pool, const char *address)
{
    AvPoolDevice *found = NULL;

    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(av_pool_devices(pool), i);

        if (g_strcmp0(dev->address, address) != 0)
            continue;
        if (found)
            g_error("two pool devices at %s: '%s' and '%s'", address, found->identity, dev->identity);
        found = dev;
    }
    g_assert_nonnull(found);
    return found;
}

/* Issue 10, hole 2: a card whose identity (its DSN: the card's firmware)
 * changes while it is out of the pool's hands keeps its entry, state and
 * owner under the new identity, gets an identity problem, and never comes
 * back as a new free device; a free card's change is the old story. */
static void
test_identity_changed(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPolicy) policy = test_load_policy(test_collide_policy);
    g_autoptr(AvHost) before = test_host_empty();
    g_autoptr(AvHost) after = test_host_empty();
    g_autoptr(AvPool) pool = test_open_write(state);
    g_autoptr(AvOwner) t1 = av_owner_new("8f1c8a3c-58c7-4d5e-9a0b-6c2a1f0e9d11", "tenant1");
    g_autoptr(AvOwner) t2 = av_owner_new("9f1c8a3c-58c7-4d5e-9a0b-6c2a1f0e9d12", "tenant2");
    g_autoptr(GError) err = NULL;
    AvPoolDevice *a, *b, *d;

    test_pci_dsn(before, "0000:17:00.0", 0x20b0, 0x100);
    test_pci_dsn(before, "0000:31:00.0", 0x20b0, 0x200);
    test_pci_dsn(before, "0000:4b:00.0", 0x20b0, 0x300);
    test_pci_dsn(before, "0000:65:00.0", 0x20b0, 0x400);
    test_reconcile_host(pool, before, policy, TRUE);
    a = av_pool_find(pool, "dsn:10de:20b0:0000000000000100.f0");
    test_move(pool, a, AV_DEVICE_STATE_CLAIMED, t1, NULL);
    test_move(pool, a, AV_DEVICE_STATE_IN_USE, t1, NULL);
    test_move(pool, av_pool_find(pool, "dsn:10de:20b0:0000000000000200.f0"), AV_DEVICE_STATE_CLAIMED, t2, NULL);
    d = av_pool_find(pool, "dsn:10de:20b0:0000000000000400.f0");
    test_move(pool, d, AV_DEVICE_STATE_CLAIMED, t2, NULL);
    test_move(pool, d, AV_DEVICE_STATE_IN_USE, t2, NULL);
    test_move(pool, d, AV_DEVICE_STATE_DIRTY, NULL, NULL);

    /* Each card's firmware now reports another serial number. */
    test_pci_dsn(after, "0000:17:00.0", 0x20b0, 0x111);
    test_pci_dsn(after, "0000:31:00.0", 0x20b0, 0x222);
    test_pci_dsn(after, "0000:4b:00.0", 0x20b0, 0x333);
    test_pci_dsn(after, "0000:65:00.0", 0x20b0, 0x444);
    test_reconcile_host(pool, after, policy, TRUE);

    /* In use: the same entry, state and owner, under the new identity. */
    a = test_only_at(pool, "0000:17:00.0");
    g_assert_cmpstr(a->identity, ==, "dsn:10de:20b0:0000000000000111.f0");
    g_assert_cmpint(a->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpstr(a->owner->domain_name, ==, "tenant1");
    g_assert_nonnull(a->identity_problem);
    g_assert_nonnull(strstr(a->identity_problem, "its identity changed from 'dsn:10de:20b0:0000000000000100.f0' to "
                                                 "'dsn:10de:20b0:0000000000000111.f0' while it was in-use by "
                                                 "domain 'tenant1'"));
    g_assert_nonnull(strstr(a->identity_problem, "firmware may have been altered"));
    /* Claimed: nobody has it yet, so quarantined at once. */
    b = test_only_at(pool, "0000:31:00.0");
    g_assert_cmpint(b->state, ==, AV_DEVICE_STATE_QUARANTINED);
    g_assert_cmpstr(b->reason, ==, b->identity_problem);
    g_assert_cmpint(b->claim_expires, ==, 0);
    /* Free: the old identity is missing, the card is a new free device. */
    g_assert_cmpint(av_pool_find(pool, "dsn:10de:20b0:0000000000000300.f0")->state, ==, AV_DEVICE_STATE_MISSING);
    g_assert_cmpint(av_pool_find(pool, "dsn:10de:20b0:0000000000000333.f0")->state, ==, AV_DEVICE_STATE_FREE);
    g_assert_null(av_pool_find(pool, "dsn:10de:20b0:0000000000000333.f0")->identity_problem);
    /* Dirty: stays dirty, with the problem. */
    d = test_only_at(pool, "0000:65:00.0");
    g_assert_cmpint(d->state, ==, AV_DEVICE_STATE_DIRTY);
    g_assert_nonnull(d->identity_problem);
    g_assert_cmpuint(test_count_events(state, "identity-changed"), ==, 3);

    /* Its release and scrub go on; it is never freed, claimed or used. */
    test_move(pool, a, AV_DEVICE_STATE_DIRTY, NULL, NULL);
    test_move(pool, a, AV_DEVICE_STATE_SCRUBBING, NULL, NULL);
    g_assert_false(av_pool_device_may_be_freed(a, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_clear_error(&err);
    g_assert_false(av_pool_transition(pool, a, AV_DEVICE_STATE_FREE, NULL, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_clear_error(&err);
    test_move(pool, a, AV_DEVICE_STATE_QUARANTINED, NULL, a->identity_problem);

    /* The same scan again: nothing new to say. */
    test_reconcile_host(pool, after, policy, FALSE);
    g_assert_cmpuint(test_count_events(state, "identity-changed"), ==, 3);
    g_assert_cmpuint(test_count_events(state, "identity-problem"), ==, 3);
    g_assert_true(av_pool_save(pool, &err));
    g_assert_no_error(err);
    g_assert_true(av_journal_verify(state, NULL, &err));
    g_assert_no_error(err);
    test_remove_state(state);
}

/* A DSN copied onto another card.  The card that had it, at the address
 * the pool knew it, presents what it did: it keeps its identity, its
 * tenant or its freedom.  The copy is refused until an operator decides: in
 * use, it keeps its tenant and ends quarantined; free, it is quarantined at
 * once; it never shows as a new free device.  The next scan says nothing
 * new. */
static void
test_identity_copied(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPolicy) policy = test_load_policy(test_collide_policy);
    g_autoptr(AvHost) before = test_host_empty();
    g_autoptr(AvHost) after = test_host_empty();
    g_autoptr(AvPool) pool = test_open_write(state);
    g_autoptr(AvOwner) t1 = av_owner_new("8f1c8a3c-58c7-4d5e-9a0b-6c2a1f0e9d11", "tenant1");
    g_autoptr(AvOwner) t2 = av_owner_new("9f1c8a3c-58c7-4d5e-9a0b-6c2a1f0e9d12", "tenant2");
    const char *addrs[] = { "0000:17:00.0", "0000:31:00.0", "0000:4b:00.0", "0000:65:00.0" };
    g_autoptr(GError) err = NULL;
    AvPoolDevice *dev;
    guint problems;

    test_pci_dsn(before, addrs[0], 0x20b0, 0x100);
    test_pci_dsn(before, addrs[1], 0x20b0, 0x300);
    test_pci_dsn(before, addrs[2], 0x20b0, 0x500);
    test_pci_dsn(before, addrs[3], 0x20b0, 0x600);
    test_reconcile_host(pool, before, policy, TRUE);
    dev = av_pool_find(pool, "dsn:10de:20b0:0000000000000100.f0");
    test_move(pool, dev, AV_DEVICE_STATE_CLAIMED, t1, NULL);
    test_move(pool, dev, AV_DEVICE_STATE_IN_USE, t1, NULL);
    dev = av_pool_find(pool, "dsn:10de:20b0:0000000000000300.f0");
    test_move(pool, dev, AV_DEVICE_STATE_CLAIMED, t2, NULL);
    test_move(pool, dev, AV_DEVICE_STATE_IN_USE, t2, NULL);

    /* tenant2's card copies tenant1's serial; a free card copies another's. */
    test_pci_dsn(after, addrs[0], 0x20b0, 0x100);
    test_pci_dsn(after, addrs[1], 0x20b0, 0x100);
    test_pci_dsn(after, addrs[2], 0x20b0, 0x500);
    test_pci_dsn(after, addrs[3], 0x20b0, 0x500);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*devices share an identity*");
    test_reconcile_host(pool, after, policy, TRUE);
    g_test_assert_expected_messages();
    for (guint i = 0; i < G_N_ELEMENTS(addrs); i++) {
        dev = test_only_at(pool, addrs[i]);
        if (i % 2 == 0) {
            /* the originals: untouched */
            g_assert_null(dev->identity_problem);
            g_assert_true(g_str_has_prefix(dev->identity, "dsn:10de:20b0:"));
            g_assert_cmpint(dev->state, ==, i == 0 ? AV_DEVICE_STATE_IN_USE : AV_DEVICE_STATE_FREE);
            continue;
        }
        g_assert_nonnull(dev->identity_problem);
        g_assert_nonnull(strstr(dev->identity_problem, "(its identity there did not change): a serial number copied "
                                                       "onto this card"));
        g_assert_cmpint(dev->state, ==, i < 2 ? AV_DEVICE_STATE_IN_USE : AV_DEVICE_STATE_QUARANTINED);
        g_assert_true(g_str_has_prefix(dev->identity, "pci:10de:20b0:"));
    }
    g_assert_cmpstr(test_only_at(pool, addrs[0])->identity, ==, "dsn:10de:20b0:0000000000000100.f0");
    g_assert_cmpstr(test_only_at(pool, addrs[0])->owner->domain_name, ==, "tenant1");
    g_assert_cmpstr(test_only_at(pool, addrs[1])->owner->domain_name, ==, "tenant2");
    g_assert_cmpstr(test_only_at(pool, addrs[2])->identity, ==, "dsn:10de:20b0:0000000000000500.f0");
    g_assert_null(test_only_at(pool, addrs[2])->owner);
    g_assert_nonnull(strstr(test_only_at(pool, addrs[1])->identity_problem,
                            "it presents the identity 'dsn:10de:20b0:0000000000000100.f0', which is the device's at "
                            "0000:17:00.0"));
    problems = test_count_events(state, "identity-problem");
    g_assert_cmpuint(problems, ==, 2);

    /* The next scan: the originals keep the serial, the copies are found by
     * their slots, nothing new is journalled. */
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*devices share an identity*");
    test_reconcile_host(pool, after, policy, FALSE);
    g_test_assert_expected_messages();
    g_assert_cmpuint(test_count_events(state, "identity-problem"), ==, problems);
    for (guint i = 0; i < G_N_ELEMENTS(addrs); i++)
        g_assert_cmpint(test_only_at(pool, addrs[i])->state, ==,
                        i < 2 ? AV_DEVICE_STATE_IN_USE : i == 2 ? AV_DEVICE_STATE_FREE : AV_DEVICE_STATE_QUARANTINED);
    g_assert_true(av_journal_verify(state, NULL, &err));
    g_assert_no_error(err);
    test_remove_state(state);
}

/* Devices sharing even their fallback identity (two sticks without a
 * serial on one port: a broken tree) are both kept out, not merged; the
 * device pooled under that identity goes missing, saying why. */
static void
test_collide_fallback(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPolicy) policy = test_load_policy(test_collide_policy);
    g_autoptr(AvHost) one = test_host_empty();
    g_autoptr(AvHost) two = test_host_empty();
    g_autoptr(AvPool) pool = test_open_write(state);
    g_autoptr(GError) err = NULL;
    AvPoolDevice *dev;

    g_ptr_array_add(one->usb, test_usb("1-1.2", NULL));
    test_reconcile_host(pool, one, policy, TRUE);
    dev = av_pool_find(pool, "usb:03e7:2485@port:1-1.2");
    g_assert_nonnull(dev);

    g_ptr_array_add(two->usb, test_usb("1-1.2", NULL));
    g_ptr_array_add(two->usb, test_usb("1-1.2", NULL));
    g_ptr_array_add(two->usb, test_usb("1-1.3", NULL));
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*share an identity*");
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING,
                          "*keeping them out of the pool: 'usb:03e7:2485@port:1-1.2' (1-1.2, 1-1.2)*");
    test_reconcile_host(pool, two, policy, TRUE);
    g_test_assert_expected_messages();
    g_assert_cmpuint(av_pool_devices(pool)->len, ==, 2);
    g_assert_true(av_pool_find(pool, "usb:03e7:2485@port:1-1.2") == dev);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_MISSING);
    g_assert_nonnull(strstr(dev->reason, "shared by the devices at 1-1.2, 1-1.2"));
    g_assert_nonnull(av_pool_find(pool, "usb:03e7:2485@port:1-1.3"));
    g_assert_true(av_journal_verify(state, NULL, &err));
    g_assert_no_error(err);
    test_remove_state(state);
}

/* An "mdev" profile whose type the VFs offer (NVIDIA Ampere: A10 and A100
 * expose their vGPU types on their SR-IOV VFs) pools the VFs: what
 * av_policy_match_pci() matches is what the pool manages. */
static void
test_reconcile_mdev_vf(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPolicy) policy = test_load_policy(
        "{\"profiles\": [{\"name\": \"a10-vgpu\", \"match\": {\"vendor\": \"0x10de\", \"device\": [\"0x2236\"]},"
        " \"attach\": \"mdev\", \"mdev_type\": \"nvidia-592\"}]}");
    g_autoptr(AvHost) host = test_host_empty();
    g_autoptr(AvPool) pool = test_open_write(state);
    AvPciDevice *pf, *vf;
    AvMdevType *type;
    const AvProfile *profile;
    AvPoolDevice *dev;

    pf = test_pci("0000:ca:00.0", NULL, 0x10de, 0x2236);
    pf->sriov_capable = TRUE;
    pf->sriov_totalvfs = pf->sriov_numvfs = 1;
    pf->physical_slot = g_strdup("4");
    pf->mdev_types = g_ptr_array_new_with_free_func((GDestroyNotify)av_mdev_type_free);
    vf = test_pci("0000:ca:00.4", NULL, 0x10de, 0x2236);
    vf->physfn = g_strdup("0000:ca:00.0");
    vf->vf_index = 0;
    vf->iommu_group = 91;
    vf->driver = g_strdup("nvidia");
    vf->mdev_types = g_ptr_array_new_with_free_func((GDestroyNotify)av_mdev_type_free);
    type = g_new0(AvMdevType, 1);
    type->id = g_strdup("nvidia-592");
    type->device_api = g_strdup("vfio-pci");
    type->available = 1;
    g_ptr_array_add(vf->mdev_types, type);
    g_ptr_array_add(host->pci, pf);
    g_ptr_array_add(host->pci, vf);

    /* What `accelvirt list` shows... */
    profile = av_policy_match_pci(policy, vf);
    g_assert_nonnull(profile);
    g_assert_null(av_policy_match_pci(policy, pf));
    /* ...is what the pool holds. */
    test_reconcile_host(pool, host, policy, TRUE);
    g_assert_cmpuint(av_pool_devices(pool)->len, ==, 1);
    dev = av_pool_find(pool, "pci:10de:2236:10de:134f@slot:4.f0/vf0");
    g_assert_nonnull(dev);
    g_assert_cmpstr(dev->address, ==, "0000:ca:00.4");
    g_assert_cmpstr(dev->profile, ==, "a10-vgpu");
    g_assert_cmpint(dev->iommu_group, ==, 91);
    test_remove_state(state);
}

/* Intel VMD: a domain of 5 digits in the path identity. */
static void
test_identity_vmd(void)
{
    g_autoptr(AvHost) host = test_host_empty();
    g_autofree char *port = NULL, *nvme = NULL;

    g_ptr_array_add(host->pci, test_pci("10000:e0:1a.0", NULL, 0x8086, 0xa0bc));
    g_ptr_array_add(host->pci, test_pci("10000:e1:00.0", "10000:e0:1a.0", 0x144d, 0xa80a));
    port = av_pool_identity_pci(host, g_ptr_array_index(host->pci, 0));
    nvme = av_pool_identity_pci(host, g_ptr_array_index(host->pci, 1));
    g_assert_cmpstr(port, ==, "pci:8086:a0bc:8086:134f@path:10000:e0/1a.0");
    g_assert_cmpstr(nvme, ==, "pci:144d:a80a:144d:134f@path:10000:e0/1a.0/00.0");
}

static AvHost *
test_scan(const char *name)
{
    g_autofree char *path = av_test_host_path(name);
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(GError) err = NULL;
    AvHost *host;

    root = av_root_new(path, &err);
    g_assert_no_error(err);
    host = av_host_scan(root, &err);
    g_assert_no_error(err);
    return host;
}

static const char test_fake_policy[] =
    "{\"profiles\": [\n"
    " {\"name\": \"fpga\", \"match\": {\"vendor\": \"0x10ee\", \"device\": [\"0x5004\"]}},\n"
    " {\"name\": \"qat-vf\", \"match\": {\"vendor\": \"0x8086\", \"device\": [\"0x4940\", \"0x4941\"]},"
    " \"attach\": \"sriov-vf\"},\n"
    " {\"name\": \"a100\", \"match\": {\"vendor\": \"0x10de\", \"device\": [\"0x20f1\"]}},\n"
    " {\"name\": \"stick\", \"match\": {\"vendor\": \"0x03e7\"}, \"attach\": \"usb\"}\n"
    "]}\n";

/* The fake hosts of tests/data, scanned: DSN identities, VFs under their PF
 * (the PF itself, matched by the sriov-vf profile's ids, is not pooled),
 * USB by serial. */
/* A domain defined but never started does not hold a device forever. */
static void
test_claim_expiry(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPolicy) policy = test_load_policy(test_fake_policy);
    g_autoptr(AvHost) gpus = test_scan("two-socket-8gpu");
    g_autoptr(AvPool) pool = test_open_write(state);
    g_autoptr(AvOwner) vm1 = av_owner_new("11111111-1111-1111-1111-111111111111", "vm1");
    g_autoptr(AvOwner) vm2 = av_owner_new("22222222-2222-2222-2222-222222222222", "vm2");
    g_autoptr(GError) err = NULL;
    gint64 now = g_get_real_time() / G_USEC_PER_SEC;
    AvPoolDevice *a, *b;
    guint64 entries = 0;
    gboolean changed = FALSE;

    test_reconcile_host(pool, gpus, policy, TRUE);
    a = av_pool_find(pool, "dsn:10de:20f1:48b02d1a000001c0.f0");
    b = av_pool_find(pool, "dsn:10de:20f1:48b02d1a000001c1.f0");
    g_assert_nonnull(a);
    g_assert_nonnull(b);

    /* a claim needs an owner */
    g_assert_false(av_pool_claim(pool, a, NULL, now + 3600, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    g_assert_cmpint(a->state, ==, AV_DEVICE_STATE_FREE);

    g_assert_true(av_pool_claim(pool, a, vm1, now - 1, &err));
    g_assert_no_error(err);
    g_assert_true(av_pool_claim(pool, b, vm1, now + 3600, &err));
    g_assert_cmpint(b->claim_expires, ==, now + 3600);
    /* the same domain renews its claim; another domain cannot take it */
    g_assert_true(av_pool_claim(pool, b, vm1, now + 7200, &err));
    g_assert_no_error(err);
    g_assert_cmpint(b->claim_expires, ==, now + 7200);
    g_assert_false(av_pool_claim(pool, b, vm2, now + 3600, &err));
    g_assert_nonnull(err);
    g_clear_error(&err);
    g_assert_cmpstr(b->owner->domain_uuid, ==, vm1->domain_uuid);

    /* the next reconcile frees the expired claim only */
    g_assert_true(av_pool_reconcile(pool, gpus, policy, &changed, &err));
    g_assert_no_error(err);
    g_assert_true(changed);
    g_assert_cmpint(a->state, ==, AV_DEVICE_STATE_FREE);
    g_assert_null(a->owner);
    g_assert_cmpint(a->claim_expires, ==, 0);
    g_assert_cmpint(b->state, ==, AV_DEVICE_STATE_CLAIMED);

    /* A claim a tenant's program started on: never free, by any path. */
    b->claim_programmed = TRUE;
    g_assert_true(av_pool_save(pool, &err));
    g_clear_pointer(&pool, av_pool_free);
    pool = test_open_write(state);
    b = av_pool_find(pool, "dsn:10de:20f1:48b02d1a000001c1.f0");
    g_assert_true(b->claim_programmed);
    g_assert_false(av_pool_transition(pool, b, AV_DEVICE_STATE_FREE, NULL, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_UNSAFE);
    g_clear_error(&err);
    g_assert_cmpint(b->state, ==, AV_DEVICE_STATE_CLAIMED);
    b->claim_expires = now - 1;
    g_assert_true(av_pool_expire_claims(pool, now, &changed, &err));
    g_assert_no_error(err);
    g_assert_cmpint(b->state, ==, AV_DEVICE_STATE_DIRTY);
    g_assert_false(b->claim_programmed);
    g_assert_cmpstr(b->owner->domain_uuid, ==, vm1->domain_uuid);
    g_assert_nonnull(strstr(b->reason, "programmed for the claim's domain"));
    /* Quarantined instead (its ids changed under the tenant's image): it
     * holds the image, so no clear frees it before a scrub. */
    a = av_pool_find(pool, "dsn:10de:20f1:48b02d1a000001c0.f0");
    g_assert_true(av_pool_claim(pool, a, vm2, now + 3600, &err));
    a->claim_programmed = TRUE;
    g_assert_true(av_pool_set_identity_problem(pool, a, "its ids changed", &err));
    g_assert_no_error(err);
    g_assert_cmpint(a->state, ==, AV_DEVICE_STATE_QUARANTINED);
    g_assert_true(a->unscrubbed);
    g_assert_false(a->claim_programmed);
    g_assert_true(av_pool_save(pool, &err));
    g_assert_true(av_journal_verify(state, &entries, &err));
    g_assert_no_error(err);
    test_remove_state(state);
}

static void
test_reconcile_fake_hosts(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPolicy) policy = test_load_policy(test_fake_policy);
    g_autoptr(AvHost) qat = test_scan("sriov-fpga-qat");
    g_autoptr(AvHost) gpus = test_scan("two-socket-8gpu");
    g_autoptr(AvPool) pool = test_open_write(state);
    g_autoptr(GError) err = NULL;
    guint64 entries = 0, again = 0;
    AvPoolDevice *dev;

    test_reconcile_host(pool, qat, policy, TRUE);
    if (g_test_verbose()) {
        for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
            AvPoolDevice *d = g_ptr_array_index(av_pool_devices(pool), i);
            g_test_message("%s %s %s", d->identity, d->address, d->profile);
        }
    }
    g_assert_cmpuint(av_pool_devices(pool)->len, ==, 5);
    dev = av_pool_find(pool, "dsn:10ee:5004:000a35002c1d0f0e.f0");
    g_assert_nonnull(dev);
    g_assert_cmpstr(dev->address, ==, "0000:3b:00.0");
    g_assert_cmpstr(dev->profile, ==, "fpga");
    g_assert_cmpint(dev->iommu_group, ==, 30);
    g_assert_cmpint(dev->numa_node, ==, 0);
    g_assert_cmpstr(dev->original_driver, ==, "xclmgmt");
    for (guint i = 0; i < 4; i++) {
        g_autofree char *id = g_strdup_printf("pci:8086:4940:8086:0000@path:0000:6b/00.0/vf%u", i);
        g_autofree char *addr = g_strdup_printf("0000:6b:00.%u", i + 1);

        dev = av_pool_find(pool, id);
        if (!dev)
            g_error("'%s' is not in the pool", id);
        g_assert_cmpstr(dev->address, ==, addr);
        g_assert_cmpstr(dev->profile, ==, "qat-vf");
        g_assert_cmpint(dev->iommu_group, ==, 150 + (int)i);
        /* a VF already on vfio-pci goes back to vfio-pci */
        if (i == 1)
            g_assert_cmpstr(dev->original_driver, ==, "vfio-pci");
        else
            g_assert_cmpstr(dev->original_driver, ==, "4xxxvf");
    }
    g_assert_true(av_journal_verify(state, &entries, &err));
    test_reconcile_host(pool, qat, policy, FALSE);
    g_assert_true(av_journal_verify(state, &again, &err));
    g_assert_cmpuint(again, ==, entries);

    /* Another host in the same state dir: the first host's devices go missing. */
    test_reconcile_host(pool, gpus, policy, TRUE);
    g_assert_cmpuint(av_pool_devices(pool)->len, ==, 5 + 6 + 1);
    dev = av_pool_find(pool, "dsn:10de:20f1:48b02d1a000001c0.f0");
    g_assert_nonnull(dev);
    g_assert_cmpstr(dev->address, ==, "0000:17:00.0");
    g_assert_cmpint(dev->numa_node, ==, 0);
    dev = av_pool_find(pool, "dsn:10de:20f1:48b02d1a000001c7.f0");
    g_assert_nonnull(dev);
    g_assert_cmpint(dev->numa_node, ==, 1);
    dev = av_pool_find(pool, "usb:03e7:2485:serial:03e72485");
    g_assert_nonnull(dev);
    g_assert_cmpstr(dev->address, ==, "1-1.2");
    g_assert_cmpint(dev->kind, ==, AV_DEVICE_KIND_USB);
    dev = av_pool_find(pool, "dsn:10ee:5004:000a35002c1d0f0e.f0");
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_MISSING);
    g_assert_cmpint(dev->state_before_missing, ==, AV_DEVICE_STATE_FREE);
    g_assert_true(av_pool_save(pool, &err));
    g_assert_no_error(err);
    g_assert_true(av_journal_verify(state, NULL, &err));
    g_assert_no_error(err);
    test_remove_state(state);
}

/* --- devices the scan does not bring: mdevs ---------------------------------- */

#define TEST_MDEV "mdev:6f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c"

static void
test_add_remove(void)
{
    g_autofree char *state = test_make_pool(2);
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvOwner) owner = av_owner_new("11111111-1111-4111-8111-111111111111", "vm1");
    g_autoptr(GPtrArray) owned = NULL;
    g_autofree char *journal = NULL;
    AvPoolDevice *dev;
    guint64 entries = 0;

    pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    dev = av_pool_add(pool, AV_DEVICE_KIND_MDEV, TEST_MDEV, "0000:17:00.0", "vgpu",
                      AV_DEVICE_STATE_IN_USE, owner, &err);
    g_assert_no_error(err);
    g_assert_nonnull(dev);
    g_assert_true(av_pool_find(pool, TEST_MDEV) == dev);
    g_assert_cmpint(dev->kind, ==, AV_DEVICE_KIND_MDEV);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_cmpstr(dev->owner->domain_name, ==, "vm1");
    g_assert_true(av_pool_find_address(pool, AV_DEVICE_KIND_MDEV, "0000:17:00.0") == dev);
    dev->created = TRUE;
    dev->numa_node = 1;

    /* Refusals leave the pool as it was. */
    g_assert_null(av_pool_add(pool, AV_DEVICE_KIND_MDEV, TEST_MDEV, "0000:17:00.0", "vgpu",
                              AV_DEVICE_STATE_IN_USE, owner, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_STATE);
    g_clear_error(&err);
    g_assert_null(av_pool_add(pool, AV_DEVICE_KIND_MDEV, "mdev:../../x", "0000:17:00.0", "vgpu",
                              AV_DEVICE_STATE_IN_USE, owner, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    g_assert_null(av_pool_add(pool, AV_DEVICE_KIND_MDEV, "mdev:6F2A0B1C-9D8E-4F7A-8B6C-5D4E3F2A1B0C",
                              "0000:17:00.0", "vgpu", AV_DEVICE_STATE_IN_USE, owner, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    g_assert_null(av_pool_add(pool, AV_DEVICE_KIND_MDEV, "mdev:7f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c",
                              "0000:17:00.0", "vgpu", AV_DEVICE_STATE_IN_USE, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    g_assert_null(av_pool_add(pool, AV_DEVICE_KIND_MDEV, "mdev:7f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c",
                              "../17:00.0", "vgpu", AV_DEVICE_STATE_FREE, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_INVALID_INPUT);
    g_clear_error(&err);
    g_assert_cmpuint(av_pool_devices(pool)->len, ==, 3);

    /* Companions of a PCI device. */
    dev = av_pool_find(pool, "dsn:0000000000000000.f0");
    g_assert_nonnull(dev);
    g_ptr_array_add(dev->companions, av_companion_new("0000:00:00.1", "snd_hda_intel"));
    g_ptr_array_add(dev->companions, av_companion_new("0000:00:00.2", NULL));
    av_pool_save(pool, &err);
    g_assert_no_error(err);
    g_clear_pointer(&pool, av_pool_free);

    /* What was saved reads back. */
    pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    dev = av_pool_find(pool, TEST_MDEV);
    g_assert_nonnull(dev);
    g_assert_cmpint(dev->kind, ==, AV_DEVICE_KIND_MDEV);
    g_assert_cmpstr(dev->address, ==, "0000:17:00.0");
    g_assert_true(dev->created);
    g_assert_cmpint(dev->numa_node, ==, 1);
    g_assert_cmpstr(av_device_kind_to_string(dev->kind), ==, "mdev");
    dev = av_pool_find(pool, "dsn:0000000000000000.f0");
    g_assert_cmpuint(dev->companions->len, ==, 2);
    g_assert_cmpstr(((AvCompanion *)g_ptr_array_index(dev->companions, 0))->original_driver, ==, "snd_hda_intel");
    g_assert_null(((AvCompanion *)g_ptr_array_index(dev->companions, 1))->original_driver);
    g_assert_false(av_pool_find(pool, "dsn:0000000000000001.f0")->created);

    owned = av_pool_find_owned(pool, "11111111-1111-4111-8111-111111111111");
    g_assert_cmpuint(owned->len, ==, 1);
    g_assert_cmpstr(((AvPoolDevice *)g_ptr_array_index(owned, 0))->identity, ==, TEST_MDEV);
    g_clear_pointer(&owned, g_ptr_array_unref);
    owned = av_pool_find_owned(pool, "22222222-2222-4222-8222-222222222222");
    g_assert_cmpuint(owned->len, ==, 0);
    g_clear_pointer(&owned, g_ptr_array_unref);

    g_assert_true(av_pool_remove(pool, TEST_MDEV, "scrubbed", &err));
    g_assert_no_error(err);
    g_assert_null(av_pool_find(pool, TEST_MDEV));
    g_assert_false(av_pool_remove(pool, TEST_MDEV, "again", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_NOT_FOUND);
    g_clear_error(&err);
    av_pool_save(pool, &err);
    g_assert_no_error(err);
    g_clear_pointer(&pool, av_pool_free);

    journal = test_read(state, "journal.jsonl", NULL);
    g_assert_nonnull(strstr(journal, "\"event\":\"added\""));
    g_assert_nonnull(strstr(journal, "\"event\":\"removed\""));
    g_assert_nonnull(strstr(journal, "\"reason\":\"scrubbed\""));
    g_assert_true(av_journal_verify(state, &entries, &err));
    g_assert_no_error(err);
    g_assert_cmpuint(entries, ==, 2);
    test_remove_state(state);
}

static void
test_add_read_only(void)
{
    g_autofree char *state = test_make_pool(1);
    g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_READ, 0, NULL);
    g_autoptr(GError) err = NULL;

    g_assert_nonnull(pool);
    g_assert_null(av_pool_add(pool, AV_DEVICE_KIND_MDEV, TEST_MDEV, "0000:17:00.0", "vgpu",
                              AV_DEVICE_STATE_FREE, NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    g_clear_error(&err);
    g_assert_false(av_pool_remove(pool, "dsn:0000000000000000.f0", NULL, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_FAILED);
    g_clear_pointer(&pool, av_pool_free);
    test_remove_state(state);
}

/* A pool.json with one device in @state whose members are @extra (appended). */
static void
test_load_device_state(const char *kind, const char *identity, const char *address, const char *state_name,
                       const char *extra, gboolean ok)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *state = g_build_filename(tmp, "state", NULL);
    g_autofree char *path = g_build_filename(state, "pool.json", NULL);
    g_autofree char *text = g_strdup_printf(
        "{\"version\": 1, \"devices\": [{\"identity\": \"%s\", \"kind\": \"%s\", \"address\": \"%s\", "
        "\"profile\": \"p\", \"state\": \"%s\", \"state_before_missing\": null, \"owner\": null, "
        "\"state_since\": 1, \"first_seen\": 1, \"last_seen\": 1, \"claim_expires\": 0, \"reason\": null, "
        "\"reason_before_missing\": null, \"original_driver\": null, \"numa_node\": -1, "
        "\"iommu_group\": -1%s}]}\n", identity, kind, address, state_name, extra);
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;

    g_assert_true(av_file_ensure_dir(state, 0700, NULL));
    g_assert_true(g_file_set_contents(path, text, -1, NULL));
    g_assert_cmpint(chmod(path, 0600), ==, 0);
    pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    if (ok) {
        g_assert_no_error(err);
        g_assert_nonnull(pool);
    } else {
        g_assert_error(err, AV_ERROR, AV_ERROR_CORRUPT_STATE);
    }
    g_clear_pointer(&pool, av_pool_free);
    av_test_tmpdir_remove(tmp);
}

/* A pool.json with one free device whose members are @extra (appended). */
static void
test_load_device_one(const char *kind, const char *identity, const char *address, const char *extra,
                     gboolean ok)
{
    test_load_device_state(kind, identity, address, "free", extra, ok);
}

/* The scrub token: 32 lower-case hex digits, while a scrub runs only. */
static void
test_load_scrub_token(void)
{
    static const char *const dsn = "dsn:0000000000000000.f0";
#define DOM ", \"scrub_domain\": \"6f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b0c\""
    static const char *const dom = DOM;
    static const char *const tok = ", \"scrub_token\": \"0123456789abcdef0123456789abcdef\"" DOM;

    test_load_device_state("pci", dsn, "0000:17:00.0", "scrubbing", tok, TRUE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "quarantined", tok, TRUE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "scrubbing", "", TRUE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "scrubbing", dom, TRUE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "free", dom, FALSE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "scrubbing",
                           ", \"scrub_token\": \"0123456789abcdef0123456789abcdef\"", FALSE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "scrubbing",
                           ", \"scrub_domain\": \"6F2A0B1C-9D8E-4F7A-8B6C-5D4E3F2A1B0C\"", FALSE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "free", tok, FALSE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "dirty", tok, FALSE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "scrubbing",
                           ", \"scrub_token\": \"0123456789ABCDEF0123456789abcdef\"" DOM, FALSE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "scrubbing",
                           ", \"scrub_token\": \"0123456789abcdef0123456789abcde\"" DOM, FALSE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "scrubbing", ", \"scrub_token\": null" DOM, FALSE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "scrubbing", ", \"scrub_token\": 1" DOM, FALSE);
#undef DOM
}

/* last_scrub: what the last certificate said, every member checked. */
static void
test_load_last_scrub(void)
{
    static const char *const dsn = "dsn:0000000000000000.f0";
#define LS(cov) ", \"last_scrub\": {\"time\": 1795467932, \"result\": \"free\", \"coverage\": {" cov "}}"
#define COV(c, r, m, f, v) "\"cleared\": " c ", \"read_back\": " r ", \"memory\": " m ", \"fraction\": " f \
                           ", \"verified\": \"" v "\", \"text\": \"cleared\""

    test_load_device_state("pci", dsn, "0000:17:00.0", "free", LS(COV("1024", "1024", "4096", "0.25", "full")), TRUE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "quarantined", LS(COV("0", "0", "null", "null", "none")), TRUE);
    /* read back more than cleared; a share without the memory; above 1 */
    test_load_device_state("pci", dsn, "0000:17:00.0", "free", LS(COV("1", "2", "null", "null", "full")), FALSE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "free", LS(COV("1", "1", "null", "0.5", "full")), FALSE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "free", LS(COV("1", "1", "2", "1.5", "full")), FALSE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "free", LS(COV("1", "1", "0", "null", "full")), FALSE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "free", LS(COV("1", "1", "null", "null", "all")), FALSE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "free", LS(COV("1", "1", "null", "null", "full") ", \"x\": 1"),
                           FALSE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "free",
                           ", \"last_scrub\": {\"time\": 1, \"result\": \"ok\", \"coverage\": {"
                           COV("1", "1", "null", "null", "full") "}}", FALSE);
    test_load_device_state("pci", dsn, "0000:17:00.0", "free", ", \"last_scrub\": null", FALSE);
#undef COV
#undef LS
}

/* A token is made for a scrub with its domain's UUID, matches only itself
 * with that UUID, is used once, survives a save and a spell of missing, and
 * goes with the next transition. */
static void
test_scrub_token_life(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvOwner) owner = av_owner_new("11111111-1111-4111-8111-111111111111", "vm1");
    g_autofree char *token = av_scrub_token_random(&err);
    g_autofree char *other = av_scrub_token_random(&err);
    g_autofree char *uuid = NULL;
    AvPoolDevice *dev;

    g_assert_no_error(err);
    g_assert_true(av_scrub_token_is_valid(token));
    g_assert_cmpstr(token, !=, other);
    pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    dev = av_pool_add(pool, AV_DEVICE_KIND_PCI, "dsn:0000000000000000.f0", "0000:17:00.0", "p",
                      AV_DEVICE_STATE_IN_USE, owner, &err);
    g_assert_no_error(err);
    g_assert_false(av_pool_scrub_token_set(dev, token, &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_STATE);
    g_clear_error(&err);
    g_assert_true(av_pool_transition(pool, dev, AV_DEVICE_STATE_DIRTY, NULL, NULL, &err));
    g_assert_true(av_pool_transition(pool, dev, AV_DEVICE_STATE_SCRUBBING, NULL, NULL, &err));
    g_assert_null(dev->scrub_token);
    g_assert_true(av_pool_scrub_token_set(dev, token, &err));
    g_assert_no_error(err);
    g_assert_true(av_uuid_is_valid(dev->scrub_domain));
    uuid = g_strdup(dev->scrub_domain);
    g_assert_true(av_pool_scrub_token_matches(dev, token, uuid));
    g_assert_false(av_pool_scrub_token_matches(dev, token, "11111111-1111-4111-8111-111111111111"));
    g_assert_false(av_pool_scrub_token_matches(dev, token, NULL));
    g_assert_false(av_pool_scrub_token_matches(dev, NULL, uuid));
    g_assert_false(av_pool_scrub_token_matches(dev, other, uuid));
    {
        g_autofree char *shorter = g_strndup(token, AV_SCRUB_TOKEN_LEN - 1);

        g_assert_false(av_pool_scrub_token_matches(dev, shorter, uuid));
    }
    g_assert_true(av_pool_save(pool, &err));
    g_clear_pointer(&pool, av_pool_free);

    pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    dev = av_pool_find(pool, "dsn:0000000000000000.f0");
    g_assert_true(av_pool_scrub_token_matches(dev, token, uuid));
    /* A rescan that loses the device for a while does not end its scrub. */
    g_assert_true(av_pool_transition(pool, dev, AV_DEVICE_STATE_MISSING, NULL, NULL, &err));
    g_assert_true(av_pool_transition(pool, dev, AV_DEVICE_STATE_SCRUBBING, NULL, NULL, &err));
    g_assert_no_error(err);
    g_assert_true(av_pool_scrub_token_matches(dev, token, uuid));
    /* Used once; the scrub domain's UUID stays. */
    av_pool_scrub_token_consume(dev);
    g_assert_false(av_pool_scrub_token_matches(dev, token, uuid));
    g_assert_cmpstr(dev->scrub_domain, ==, uuid);
    g_assert_true(av_pool_save(pool, &err));
    g_clear_pointer(&pool, av_pool_free);
    pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    dev = av_pool_find(pool, "dsn:0000000000000000.f0");
    g_assert_null(dev->scrub_token);
    g_assert_cmpstr(dev->scrub_domain, ==, uuid);
    g_assert_true(av_pool_is_scrub_domain(dev, uuid));
    g_assert_false(av_pool_is_scrub_domain(dev, "11111111-1111-4111-8111-111111111111"));
    g_assert_false(av_pool_is_scrub_domain(dev, NULL));
    /* The scrub ends: both go. */
    g_assert_true(av_pool_transition(pool, dev, AV_DEVICE_STATE_FREE, NULL, NULL, &err));
    g_assert_no_error(err);
    g_assert_null(dev->scrub_token);
    g_assert_null(dev->scrub_domain);
    g_clear_pointer(&pool, av_pool_free);
    test_remove_state(state);
}

static void
test_load_mdev(void)
{
    test_load_device_one("mdev", TEST_MDEV, "0000:17:00.0", ", \"created\": true", TRUE);
    test_load_device_one("mdev", TEST_MDEV, "0000:17:00.0", "", TRUE);
    test_load_device_one("mdev", "mdev:nope", "0000:17:00.0", "", FALSE);
    test_load_device_one("mdev", "dsn:0000000000000000.f0", "0000:17:00.0", "", FALSE);
    /* An mdev's address is its parent's name: a PCI address or such as "mtty". */
    test_load_device_one("mdev", TEST_MDEV, "mtty", ", \"created\": true", TRUE);
    test_load_device_one("mdev", TEST_MDEV, "../mtty", "", FALSE);
    test_load_device_one("mdev", TEST_MDEV, "..", "", FALSE);
    test_load_device_one("mdev", TEST_MDEV, "mtty/x", "", FALSE);
    test_load_device_one("pci", "dsn:0000000000000000.f0", "mtty", "", FALSE);
    test_load_device_one("mdev", TEST_MDEV, "0000:17:00.0", ", \"created\": 1", FALSE);
    test_load_device_one("pci", "dsn:0000000000000000.f0", "0000:17:00.0", ", \"created\": false", FALSE);
    test_load_device_one("pci", "dsn:0000000000000000.f0", "0000:17:00.0",
                         ", \"companions\": [{\"address\": \"0000:17:00.1\", \"original_driver\": null}]", TRUE);
    test_load_device_one("pci", "dsn:0000000000000000.f0", "0000:17:00.0",
                         ", \"companions\": [{\"address\": \"../x\", \"original_driver\": null}]", FALSE);
    test_load_device_one("pci", "dsn:0000000000000000.f0", "0000:17:00.0",
                         ", \"companions\": [{\"address\": \"0000:17:00.1\"}]", FALSE);
    test_load_device_one("pci", "dsn:0000000000000000.f0", "0000:17:00.0", ", \"companions\": {}", FALSE);
    test_load_device_one("vfio", "dsn:0000000000000000.f0", "0000:17:00.0", "", FALSE);
}

/* A scan never makes an mdev entry missing: it follows the hook's
 * lifecycle (its mdev is removed at release, before the scrub). */
static void
test_reconcile_keeps_mdev(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvOwner) owner = av_owner_new("11111111-1111-4111-8111-111111111111", "vm1");
    g_autoptr(AvPolicy) policy = av_policy_new();
    g_autoptr(AvHost) host = g_new0(AvHost, 1);
    AvPoolDevice *dev;

    host->pci = g_ptr_array_new_with_free_func((GDestroyNotify)av_pci_device_free);
    host->usb = g_ptr_array_new_with_free_func((GDestroyNotify)av_usb_device_free);
    host->numa_nodes = g_ptr_array_new_with_free_func((GDestroyNotify)av_numa_node_free);
    pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    dev = av_pool_add(pool, AV_DEVICE_KIND_MDEV, TEST_MDEV, "0000:17:00.0", "vgpu",
                      AV_DEVICE_STATE_IN_USE, owner, &err);
    g_assert_no_error(err);
    g_assert_true(av_pool_reconcile(pool, host, policy, NULL, &err));
    g_assert_no_error(err);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_true(av_pool_transition(pool, dev, AV_DEVICE_STATE_DIRTY, NULL, NULL, &err));
    g_assert_true(av_pool_reconcile(pool, host, policy, NULL, &err));
    g_assert_no_error(err);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_DIRTY);
    g_assert_cmpstr(dev->owner->domain_name, ==, "vm1");
    g_clear_pointer(&pool, av_pool_free);
    test_remove_state(state);
}

/* A USB stick of bus 1 at @port with devnum @devnum and @serial (may be
 * NULL), as av_usb_scan() makes them. */
static AvUsbDevice *
test_stick(const char *port, guint devnum, const char *serial)
{
    AvUsbDevice *usb = g_new0(AvUsbDevice, 1);

    usb->bus_path = g_strdup(port);
    usb->sysfs_path = g_strdup_printf("/sys/devices/pci0000:00/0000:00:14.0/usb1/%s", port);
    usb->vendor_id = 0x03e7;
    usb->product_id = 0x2485;
    usb->serial = g_strdup(serial);
    usb->busnum = 1;
    usb->devnum = devnum;
    usb->numa_node = -1;
    return usb;
}

/* A host with no PCI function, no USB device yet and a boot id, and in
 * *@ret_policy one profile "stick" taking test_stick()'s 03e7:2485. */
static AvHost *
test_usb_world(AvPolicy **ret_policy)
{
    static const char json[] = "{\"profiles\": [{\"name\": \"stick\", \"match\": {\"vendor\": \"0x03e7\", "
                               "\"device\": \"0x2485\"}, \"attach\": \"usb\"}]}";
    AvHost *host = g_new0(AvHost, 1);
    g_autoptr(GError) err = NULL;

    *ret_policy = av_policy_new();
    g_assert_true(av_policy_add_data(*ret_policy, "t.json", json, strlen(json), &err));
    g_assert_no_error(err);
    host->pci = g_ptr_array_new_with_free_func((GDestroyNotify)av_pci_device_free);
    host->usb = g_ptr_array_new_with_free_func((GDestroyNotify)av_usb_device_free);
    host->numa_nodes = g_ptr_array_new_with_free_func((GDestroyNotify)av_numa_node_free);
    host->boot_id = g_strdup("3d2c1b0a-9f8e-4d7c-8b6a-5f4e3d2c1b0a");
    return host;
}

/* av_pool_confirm() of a partial scan holding every USB device (issue 13):
 * yes while the sticks are as the pool has them, whatever their devnums;
 * no for a pooled stick gone, a new stick a profile matches, or two sticks
 * presenting one identity; the USB devices are not looked at when the scan
 * did not read them. */
static void
test_confirm_usb(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvHost) host = test_usb_world(&policy);
    char *why = NULL;

    g_ptr_array_add(host->usb, test_stick("1-2", 5, "S1"));
    g_ptr_array_add(host->usb, test_stick("1-3", 6, NULL));
    pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    g_assert_true(av_pool_reconcile(pool, host, policy, NULL, &err));
    g_assert_no_error(err);
    g_assert_nonnull(av_pool_find(pool, "usb:03e7:2485:serial:S1"));
    g_assert_nonnull(av_pool_find(pool, "usb:03e7:2485@port:1-3"));

    host->partial = TRUE;
    host->usb_scanned = TRUE;
    ((AvUsbDevice *)g_ptr_array_index(host->usb, 0))->devnum = 8;
    g_assert_true(av_pool_confirm(pool, host, policy, &why));
    g_assert_null(why);

    g_ptr_array_add(host->usb, test_stick("1-4", 7, "S2"));
    g_assert_false(av_pool_confirm(pool, host, policy, &why));
    g_assert_nonnull(strstr(why, "1-4 (usb:03e7:2485:serial:S2) is news"));
    g_clear_pointer(&why, g_free);
    g_ptr_array_set_size(host->usb, 2);

    g_ptr_array_add(host->usb, test_stick("1-5", 9, "S1"));
    g_assert_false(av_pool_confirm(pool, host, policy, &why));
    g_clear_pointer(&why, g_free);
    g_ptr_array_set_size(host->usb, 2);

    g_ptr_array_remove_index(host->usb, 0);
    g_assert_false(av_pool_confirm(pool, host, policy, &why));
    g_assert_nonnull(strstr(why, "usb:03e7:2485:serial:S1 is not on the host"));
    g_clear_pointer(&why, g_free);

    host->usb_scanned = FALSE;
    g_assert_true(av_pool_confirm(pool, host, policy, &why));
    g_clear_pointer(&pool, av_pool_free);
    test_remove_state(state);
}

/* av_pool_confirm() of sticks the pool holds by their port because they
 * share a serial: each is confirmed under the identity av_pool_reconcile()
 * gave it, so that the hook's fast path holds (it used to say no every
 * time); no once the serial is no longer shared (reconcile would pool the
 * remaining stick by its serial) or when a third stick shows it. */
static void
test_confirm_usb_shared_serial(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvHost) host = test_usb_world(&policy);
    char *why = NULL;

    g_ptr_array_add(host->usb, test_stick("1-2", 5, "S1"));
    g_ptr_array_add(host->usb, test_stick("1-6", 10, "S7"));
    g_ptr_array_add(host->usb, test_stick("1-7", 11, "S7"));
    pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    g_assert_no_error(err);
    g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*devices share an identity*");
    g_assert_true(av_pool_reconcile(pool, host, policy, NULL, &err));
    g_test_assert_expected_messages();
    g_assert_no_error(err);
    g_assert_nonnull(av_pool_find(pool, "usb:03e7:2485:serial:S1"));
    g_assert_nonnull(av_pool_find(pool, "usb:03e7:2485@port:1-6"));
    g_assert_nonnull(av_pool_find(pool, "usb:03e7:2485@port:1-7"));
    g_assert_null(av_pool_find(pool, "usb:03e7:2485:serial:S7"));

    host->partial = TRUE;
    host->usb_scanned = TRUE;
    g_assert_true(av_pool_confirm(pool, host, policy, &why));
    g_assert_null(why);

    /* A third stick showing S7: news to the pool. */
    g_ptr_array_add(host->usb, test_stick("1-8", 12, "S7"));
    g_assert_false(av_pool_confirm(pool, host, policy, &why));
    g_assert_nonnull(strstr(why, "1-8 (usb:03e7:2485@port:1-8) is news"));
    g_clear_pointer(&why, g_free);
    g_ptr_array_set_size(host->usb, 3);

    /* One of the two gone: the other now presents its serial form. */
    g_ptr_array_remove_index(host->usb, 2);
    g_assert_false(av_pool_confirm(pool, host, policy, &why));
    g_assert_nonnull(why);
    g_clear_pointer(&why, g_free);
    g_clear_pointer(&pool, av_pool_free);
    test_remove_state(state);
}

/* The domain index (av-pool-index.c): every save names the domains of the
 * new pool before pool.json does and drops the others after; a state dir
 * without one gets it whole at the first save (the names of the pool on disk
 * included); the lookup says NO only when sure. */
static void
test_domain_index(void)
{
    g_autofree char *state = test_make_pool(2);
    g_autofree char *dir = g_build_filename(state, "domains", NULL);
    g_autofree char *f1 = NULL, *f2 = NULL;
    g_autoptr(GError) err = NULL;
    const char *u1 = "8f1c8a3c-58c7-4d5e-9a0b-6c2a1f0e9d11";
    const char *u2 = "00000002-0000-4000-8000-000000000002";
    const char *u3 = "00000003-0000-4000-8000-000000000003";

    f1 = g_build_filename(dir, u1, NULL);
    f2 = g_build_filename(dir, u2, NULL);
    /* An empty pool was saved: an empty index. */
    g_assert_true(g_file_test(dir, G_FILE_TEST_IS_DIR));
    g_assert_cmpint(av_pool_index_names(state, u1), ==, AV_POOL_NAMES_NO);
    {
        g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
        AvPoolDevice *a = av_pool_find(pool, "dsn:0000000000000000.f0");
        AvPoolDevice *b = av_pool_find(pool, "dsn:0000000000000001.f0");

        g_assert_no_error(err);
        a->state = AV_DEVICE_STATE_IN_USE;
        a->owner = av_owner_new(u1, "vm1");
        b->state = AV_DEVICE_STATE_QUARANTINED;
        b->owner = av_owner_new("NOT-A-UUID", "vm9");   /* the pool compares as strings: no lookup finds it */
        av_pool_intent_add(pool, av_intent_new(u2, "vm2"));
        g_assert_true(av_pool_save(pool, &err));
        g_assert_no_error(err);
    }
    g_assert_true(g_file_test(f1, G_FILE_TEST_IS_REGULAR));
    g_assert_true(g_file_test(f2, G_FILE_TEST_IS_REGULAR));
    g_assert_cmpint(av_pool_index_names(state, u1), ==, AV_POOL_NAMES_YES);
    g_assert_cmpint(av_pool_index_names(state, u2), ==, AV_POOL_NAMES_YES);
    g_assert_cmpint(av_pool_index_names(state, u3), ==, AV_POOL_NAMES_NO);
    g_assert_cmpint(av_pool_index_names(state, "8F1C8A3C-58C7-4D5E-9A0B-6C2A1F0E9D11"), ==, AV_POOL_NAMES_UNKNOWN);
    g_assert_cmpint(av_pool_index_names(state, "../pool.json"), ==, AV_POOL_NAMES_UNKNOWN);

    /* A state dir of an older accelvirt: unknown until a save makes the
     * index, which then names what the pool on disk named too. */
    g_assert_true(unlink(f1) == 0 && unlink(f2) == 0 && rmdir(dir) == 0);
    g_assert_cmpint(av_pool_index_names(state, u3), ==, AV_POOL_NAMES_UNKNOWN);
    {
        g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
        AvPoolDevice *a = av_pool_find(pool, "dsn:0000000000000000.f0");

        g_assert_no_error(err);
        /* Opening changes nothing. */
        g_assert_false(g_file_test(dir, G_FILE_TEST_EXISTS));
        av_owner_free(a->owner);
        a->owner = av_owner_new(u3, "vm3");
        /* Made whole at the save, then the names the new pool drops go: u1. */
        g_assert_true(av_pool_save(pool, &err));
        g_assert_no_error(err);
        g_assert_cmpint(av_pool_index_names(state, u1), ==, AV_POOL_NAMES_NO);
        g_assert_cmpint(av_pool_index_names(state, u2), ==, AV_POOL_NAMES_YES);
        g_assert_cmpint(av_pool_index_names(state, u3), ==, AV_POOL_NAMES_YES);
        /* Dropped from the pool: dropped from the index after the save. */
        av_pool_intent_remove(pool, g_ptr_array_index(av_pool_intents(pool), 0));
        g_assert_true(av_pool_save(pool, &err));
        g_assert_no_error(err);
        g_assert_cmpint(av_pool_index_names(state, u2), ==, AV_POOL_NAMES_NO);
    }
    g_assert_false(g_file_test(f1, G_FILE_TEST_EXISTS));
    g_assert_false(g_file_test(f2, G_FILE_TEST_EXISTS));

    /* No state dir at all: nothing is named. */
    {
        g_autofree char *none = g_build_filename(state, "nowhere", NULL);

        g_assert_cmpint(av_pool_index_names(none, u1), ==, AV_POOL_NAMES_NO);
    }
    test_remove_state(state);
}

/* ---- health (issue 17) ---- */

/* pool.json "failures": loaded strictly; absent, since is first_seen. */
static void
test_load_failures(void)
{
    static const char *const dsn = "dsn:0000000000000000.f0";
    static const char *const bad[] = {
        ", \"failures\": {\"scrub\": -1, \"reset\": 0, \"since\": 5}",
        ", \"failures\": {\"scrub\": 1, \"reset\": 2, \"since\": 5}",
        ", \"failures\": {\"scrub\": 1.5, \"reset\": 0, \"since\": 5}",
        ", \"failures\": {\"scrub\": 1, \"reset\": 0, \"since\": -5}",
        ", \"failures\": {\"scrub\": 4294967296, \"reset\": 0, \"since\": 5}",
        ", \"failures\": {\"scrub\": 1, \"reset\": 0}",
        ", \"failures\": {\"scrub\": 1, \"reset\": 0, \"since\": 5, \"more\": 1}",
        ", \"failures\": null",
        ", \"failures\": \"3\"",
    };

    test_load_device_one("pci", dsn, "0000:17:00.0", ", \"failures\": {\"scrub\": 3, \"reset\": 1, \"since\": 5}",
                         TRUE);
    test_load_device_one("pci", dsn, "0000:17:00.0", ", \"failures\": {\"scrub\": 0, \"reset\": 0, \"since\": 5}",
                         TRUE);
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++)
        test_load_device_one("pci", dsn, "0000:17:00.0", bad[i], FALSE);
}

/* Counted failures saved and loaded back; none written while the counts
 * are 0 and since is first_seen, so that older pools keep their form. */
static void
test_failures_roundtrip(void)
{
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *state = g_build_filename(tmp, "state", NULL);
    g_autoptr(AvPool) pool = test_open_write(state);
    g_autoptr(GError) err = NULL;
    g_autoptr(json_t) j = NULL;
    AvPoolDevice *dev = av_pool_add(pool, AV_DEVICE_KIND_PCI, "dsn:0000000000000001.f0", "0000:17:00.0", "gpu",
                                    AV_DEVICE_STATE_FREE, NULL, &err);

    g_assert_no_error(err);
    g_assert_cmpint(dev->failures_since, ==, dev->first_seen);
    j = av_pool_device_to_json(dev);
    g_assert_null(json_object_get(j, "failures"));
    g_clear_pointer(&j, json_decref);

    av_pool_count_scrub_failure(dev, FALSE);
    av_pool_count_scrub_failure(dev, TRUE);
    g_assert_cmpuint(dev->scrub_failures, ==, 2);
    g_assert_cmpuint(dev->reset_failures, ==, 1);
    dev->failures_since = 1234;
    g_assert_true(av_pool_save(pool, &err));
    g_clear_pointer(&pool, av_pool_free);
    pool = test_open_write(state);
    dev = av_pool_find(pool, "dsn:0000000000000001.f0");
    g_assert_cmpuint(dev->scrub_failures, ==, 2);
    g_assert_cmpuint(dev->reset_failures, ==, 1);
    g_assert_cmpint(dev->failures_since, ==, 1234);

    /* counts 0 with an enrolment's since: still written */
    dev->scrub_failures = dev->reset_failures = 0;
    j = av_pool_device_to_json(dev);
    g_assert_cmpint(json_integer_value(json_object_get(json_object_get(j, "failures"), "since")), ==, 1234);
    av_test_tmpdir_remove(tmp);
}

static const char test_health_policy[] =
    "{\"profiles\": [{\"name\": \"gpu\", \"match\": {\"vendor\": \"0x10de\"},"
    " \"health\": {\"fatal_aer\": 0, \"nonfatal_aer\": 2, \"correctable_aer\": 10, \"scrub_failures\": 3,"
    " \"reset_failures\": 0, \"degraded_link\": \"quarantine\"}},"
    " {\"name\": \"warn\", \"match\": {\"vendor\": \"0x8086\"}, \"health\": {\"degraded_link\": \"warn\","
    " \"link_speed\": \"check\"}},"
    " {\"name\": \"none\", \"match\": {\"vendor\": \"0x1002\"}}]}";

/* av_pool_health_judge(): each limit, and the sentences. */
static void
test_health_judge(void)
{
    g_autoptr(AvPolicy) policy = test_load_policy(test_health_policy);
    const AvProfile *gpu = av_policy_find(policy, "gpu");
    const AvProfile *warn = av_policy_find(policy, "warn");
    AvPoolDevice dev = { .identity = (char *)"x", .kind = AV_DEVICE_KIND_PCI };
    AvPciHealth h = { .aer = TRUE, .link = TRUE, .speed_gts = 16, .max_speed_gts = 16, .width = 16, .max_width = 16 };
    g_autofree char *f = NULL;

    g_assert_cmpint(av_pool_health_judge(&dev, gpu, &h, &f), ==, AV_HEALTH_OK);
    g_assert_null(f);
    h.fatal = 2;
    g_assert_cmpint(av_pool_health_judge(&dev, gpu, &h, &f), ==, AV_HEALTH_OVER);
    g_assert_cmpstr(f, ==, "2 fatal AER errors, the profile allows 0");
    g_clear_pointer(&f, g_free);
    h.fatal = 0;
    h.nonfatal = 2;
    h.correctable = 11;
    dev.scrub_failures = 4;
    dev.reset_failures = 1;
    g_assert_cmpint(av_pool_health_judge(&dev, gpu, &h, &f), ==, AV_HEALTH_OVER);
    g_assert_cmpstr(f, ==, "11 correctable AER errors, the profile allows 10; 4 failed scrubs since enrolment, the "
                    "profile allows 3; 1 failed reset since enrolment, the profile allows 0");
    g_clear_pointer(&f, g_free);
    dev.scrub_failures = dev.reset_failures = 0;
    h.correctable = 0;
    /* no AER reporting under AER limits: in doubt, over (they cannot be checked) */
    h.aer = FALSE;
    h.fatal = 5;
    g_assert_cmpint(av_pool_health_judge(&dev, gpu, &h, &f), ==, AV_HEALTH_OVER);
    g_assert_cmpstr(f, ==, "no AER reporting: the limits 'fatal_aer', 'nonfatal_aer', 'correctable_aer' cannot be "
                    "checked");
    g_clear_pointer(&f, g_free);
    g_assert_cmpint(av_pool_health_judge(&dev, warn, &h, &f), ==, AV_HEALTH_OK);
    h.aer = TRUE;
    /* a VF's counts read on its PF: said so */
    h.aer_from = (char *)"0000:6b:00.0";
    g_assert_cmpint(av_pool_health_judge(&dev, gpu, &h, &f), ==, AV_HEALTH_OVER);
    g_assert_cmpstr(f, ==, "5 fatal AER errors (its PF 0000:6b:00.0's counts), the profile allows 0");
    g_clear_pointer(&f, g_free);
    h.aer_from = NULL;
    h.fatal = 0;
    /* a link down, a speed unknown: in doubt, degraded */
    h.width = 0;
    g_assert_cmpint(av_pool_health_judge(&dev, gpu, &h, &f), ==, AV_HEALTH_OVER);
    g_assert_cmpstr(f, ==, "link down (x0 of x16 at 16.0 of 16.0 GT/s), the profile quarantines a degraded link");
    g_clear_pointer(&f, g_free);
    h.width = 16;
    h.speed_gts = 0;
    g_assert_cmpint(av_pool_health_judge(&dev, gpu, &h, &f), ==, AV_HEALTH_OK);
    g_assert_cmpint(av_pool_health_judge(&dev, warn, &h, &f), ==, AV_HEALTH_WARN);
    g_assert_cmpstr(f, ==, "speed unknown (x16 of x16 at unknown of 16.0 GT/s)");
    g_clear_pointer(&f, g_free);
    h.speed_gts = 16;
    /* the link: quarantine, warn, speed only with link_speed check */
    h.width = 8;
    g_assert_cmpint(av_pool_health_judge(&dev, gpu, &h, &f), ==, AV_HEALTH_OVER);
    g_assert_cmpstr(f, ==, "a degraded link (x8 of x16 at 16.0 of 16.0 GT/s), the profile quarantines a degraded link");
    g_clear_pointer(&f, g_free);
    g_assert_cmpint(av_pool_health_judge(&dev, warn, &h, &f), ==, AV_HEALTH_WARN);
    g_assert_cmpstr(f, ==, "a degraded link (x8 of x16 at 16.0 of 16.0 GT/s)");
    g_clear_pointer(&f, g_free);
    h.width = 16;
    h.speed_gts = 2.5;
    g_assert_cmpint(av_pool_health_judge(&dev, gpu, &h, &f), ==, AV_HEALTH_OK);
    g_assert_cmpint(av_pool_health_judge(&dev, warn, &h, &f), ==, AV_HEALTH_WARN);
    g_clear_pointer(&f, g_free);
    /* unreadable under limits: over; no limits: ok */
    g_assert_cmpint(av_pool_health_judge(&dev, gpu, NULL, &f), ==, AV_HEALTH_OVER);
    g_clear_pointer(&f, g_free);
    g_assert_cmpint(av_pool_health_judge(&dev, av_policy_find(policy, "none"), NULL, &f), ==, AV_HEALTH_OK);
    g_assert_cmpint(av_pool_health_judge(&dev, NULL, NULL, &f), ==, AV_HEALTH_OK);
    g_assert_null(f);
}

/* av_pool_health_check() on a copy of two-socket-8gpu: journalled and
 * quarantined over a limit, a dirty device marked unscrubbed, other
 * states left alone, unreadable health quarantined. */
static void
test_health_check(void)
{
    g_autofree char *hostdir = av_test_host_copy("two-socket-8gpu");
    g_autofree char *tmp = av_test_tmpdir();
    g_autofree char *state = g_build_filename(tmp, "state", NULL);
    g_autoptr(AvRoot) root = av_root_new(hostdir, NULL);
    g_autoptr(AvPolicy) policy = test_load_policy(test_health_policy);
    const AvProfile *gpu = av_policy_find(policy, "gpu");
    g_autoptr(AvPool) pool = test_open_write(state);
    g_autoptr(GError) err = NULL;
    g_autofree char *warning = NULL;
    gboolean q = TRUE;
    AvPoolDevice *ok17, *deg31, *used, *dirty;

    ok17 = av_pool_add(pool, AV_DEVICE_KIND_PCI, "dsn:a.f0", "0000:17:00.0", "gpu", AV_DEVICE_STATE_FREE, NULL, &err);
    deg31 = av_pool_add(pool, AV_DEVICE_KIND_PCI, "dsn:b.f0", "0000:31:00.0", "gpu", AV_DEVICE_STATE_FREE, NULL, &err);
    used = av_pool_add(pool, AV_DEVICE_KIND_PCI, "dsn:c.f0", "0000:31:00.0", "gpu", AV_DEVICE_STATE_FREE, NULL, &err);
    dirty = av_pool_add(pool, AV_DEVICE_KIND_PCI, "dsn:d.f0", "0000:65:00.0", "gpu", AV_DEVICE_STATE_FREE, NULL, &err);
    g_assert_no_error(err);

    g_assert_true(av_pool_health_check(pool, ok17, gpu, root, &q, &warning, &err));
    g_assert_false(q);
    g_assert_null(warning);
    g_assert_cmpint(ok17->state, ==, AV_DEVICE_STATE_FREE);
    g_assert_cmpuint(test_count_events(state, "health"), ==, 0);

    /* no "health": not judged */
    g_assert_true(av_pool_health_check(pool, deg31, av_policy_find(policy, "none"), root, &q, NULL, &err));
    g_assert_false(q);

    /* the x8 link under "quarantine" */
    g_assert_true(av_pool_health_check(pool, deg31, gpu, root, &q, &warning, &err));
    g_assert_no_error(err);
    g_assert_true(q);
    g_assert_cmpint(deg31->state, ==, AV_DEVICE_STATE_QUARANTINED);
    g_assert_cmpstr(deg31->reason, ==, "health: a degraded link (x8 of x16 at 16.0 of 16.0 GT/s), the profile "
                    "quarantines a degraded link");
    g_assert_false(deg31->unscrubbed);
    g_assert_cmpuint(test_count_events(state, "health"), ==, 1);

    /* held by a tenant: left alone */
    test_reach(pool, used, AV_DEVICE_STATE_IN_USE);
    g_assert_true(av_pool_health_check(pool, used, gpu, root, &q, NULL, &err));
    g_assert_false(q);
    g_assert_cmpint(used->state, ==, AV_DEVICE_STATE_IN_USE);

    /* dirty, its AER file unparsable: quarantined, unscrubbed */
    test_reach(pool, dirty, AV_DEVICE_STATE_DIRTY);
    {
        g_autofree char *rel = g_strdup_printf("sys/bus/pci/devices/0000:65:00.0/aer_dev_fatal");

        av_test_write(hostdir, rel, "garbage\n");
    }
    g_assert_true(av_pool_health_check(pool, dirty, gpu, root, &q, NULL, &err));
    g_assert_true(q);
    g_assert_cmpint(dirty->state, ==, AV_DEVICE_STATE_QUARANTINED);
    g_assert_true(dirty->unscrubbed);
    g_assert_nonnull(strstr(dirty->reason, "health: its health cannot be read"));
    g_assert_nonnull(strstr(dirty->reason, "aer_dev_fatal"));
    g_assert_cmpuint(test_count_events(state, "health"), ==, 2);

    g_clear_pointer(&pool, av_pool_free);
    av_test_tmpdir_remove(tmp);
    av_test_tmpdir_remove(hostdir);
}

/* A scan taken without the lock (`status`), applied after another writer
 * changed the pool: what that writer changed keeps its word (a device it
 * claimed is not made missing by a scan that could not see it), and the
 * rest is reconciled as ever (an identity that changed under a tenant is
 * caught; a device that left is missing). */
static void
test_reconcile_scan_first(void)
{
    g_autofree char *state = test_make_pool(0);
    g_autoptr(AvPolicy) policy = test_load_policy(test_collide_policy);
    g_autoptr(AvHost) host = test_host_empty();
    g_autoptr(AvHost) stale = test_host_empty();
    g_autoptr(AvPool) pool = test_open_write(state);
    g_autoptr(AvPool) before = NULL;
    g_autoptr(AvOwner) t1 = av_owner_new("8f1c8a3c-58c7-4d5e-9a0b-6c2a1f0e9d11", "tenant1");
    g_autoptr(AvOwner) t2 = av_owner_new("9f1c8a3c-58c7-4d5e-9a0b-6c2a1f0e9d12", "tenant2");
    g_autoptr(AvPoolScan) scan = NULL;
    g_autoptr(GHashTable) keep = NULL;
    g_autoptr(GError) err = NULL;
    gboolean changed = FALSE;
    AvPoolDevice *a, *c;

    test_pci_dsn(host, "0000:17:00.0", 0x20b0, 0x100);
    test_pci_dsn(host, "0000:31:00.0", 0x20b0, 0x200);
    test_pci_dsn(host, "0000:4b:00.0", 0x20b0, 0x300);
    test_reconcile_host(pool, host, policy, TRUE);
    c = av_pool_find(pool, "dsn:10de:20b0:0000000000000200.f0");
    test_move(pool, c, AV_DEVICE_STATE_CLAIMED, t2, NULL);
    test_move(pool, c, AV_DEVICE_STATE_IN_USE, t2, NULL);
    g_assert_true(av_pool_save(pool, &err));
    g_assert_no_error(err);
    g_clear_pointer(&pool, av_pool_free);

    /* `status` reads the pool and lets go of the lock... */
    before = av_pool_open(state, AV_POOL_READ, 0, &err);
    g_assert_no_error(err);
    av_pool_unlock(before);
    /* ...scans while 0000:17:00.0 is away (a reset), and its tenant's
     * card at 0000:31:00.0 now presents another serial... */
    test_pci_dsn(stale, "0000:31:00.0", 0x20b0, 0x222);
    /* ...while a hook claims 0000:17:00.0 (its own scan saw it there) and
     * 0000:4b:00.0 leaves for good. */
    pool = test_open_write(state);
    a = av_pool_find(pool, "dsn:10de:20b0:0000000000000100.f0");
    test_move(pool, a, AV_DEVICE_STATE_CLAIMED, t1, NULL);
    g_assert_true(av_pool_save(pool, &err));
    g_assert_no_error(err);

    keep = av_pool_changed_since(before, pool);
    /* The claimed device, by identity and address; nothing else. */
    g_assert_true(g_hash_table_contains(keep, "dsn:10de:20b0:0000000000000100.f0"));
    g_assert_true(g_hash_table_contains(keep, "0000:17:00.0"));
    g_assert_cmpuint(g_hash_table_size(keep), ==, 2);
    scan = av_pool_scan_new(stale, policy);
    g_assert_true(av_pool_reconcile_scan(pool, scan, keep, &changed, &err));
    g_assert_no_error(err);
    g_assert_true(changed);
    /* The hook's claim stands: not missing on the strength of the scan. */
    a = av_pool_find(pool, "dsn:10de:20b0:0000000000000100.f0");
    g_assert_cmpint(a->state, ==, AV_DEVICE_STATE_CLAIMED);
    g_assert_cmpstr(a->owner->domain_name, ==, "tenant1");
    /* The changed identity is caught as by a whole reconcile. */
    c = test_only_at(pool, "0000:31:00.0");
    g_assert_cmpstr(c->identity, ==, "dsn:10de:20b0:0000000000000222.f0");
    g_assert_cmpint(c->state, ==, AV_DEVICE_STATE_IN_USE);
    g_assert_nonnull(c->identity_problem);
    g_assert_cmpint(av_pool_find(pool, "dsn:10de:20b0:0000000000000300.f0")->state, ==, AV_DEVICE_STATE_MISSING);

    /* Nothing changed meanwhile: the same as av_pool_reconcile(). */
    g_clear_pointer(&keep, g_hash_table_unref);
    keep = av_pool_changed_since(pool, pool);
    g_assert_cmpuint(g_hash_table_size(keep), ==, 0);
    /* The worker takes the device it scrubbed out of what is left alone. */
    g_clear_pointer(&keep, g_hash_table_unref);
    keep = av_pool_changed_since(before, pool);
    av_pool_changed_forget(keep, "dsn:10de:20b0:0000000000000100.f0", "0000:17:00.0");
    g_assert_false(g_hash_table_contains(keep, "dsn:10de:20b0:0000000000000100.f0"));
    g_assert_false(g_hash_table_contains(keep, "0000:17:00.0"));
    g_assert_true(g_hash_table_contains(keep, "0000:4b:00.0"));
    g_clear_pointer(&pool, av_pool_free);
    test_remove_state(state);
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);

    g_test_add_func("/pool/confirm-usb", test_confirm_usb);
    g_test_add_func("/pool/health/load-failures", test_load_failures);
    g_test_add_func("/pool/health/failures-roundtrip", test_failures_roundtrip);
    g_test_add_func("/pool/health/judge", test_health_judge);
    g_test_add_func("/pool/health/check", test_health_check);
    g_test_add_func("/pool/confirm-usb-shared-serial", test_confirm_usb_shared_serial);
    g_test_add_func("/pool/state-strings", test_state_strings);
    g_test_add_func("/pool/open/read-missing", test_open_read_missing);
    g_test_add_func("/pool/open/write-creates", test_open_write_creates);
    g_test_add_func("/pool/save-load", test_save_load_roundtrip);
    g_test_add_func("/pool/save-text-direct", test_save_text_direct);
    g_test_add_func("/pool/file-changed-since", test_file_changed_since);
    g_test_add_func("/pool/domain-index", test_domain_index);
    g_test_add_func("/pool/sorted-insert", test_sorted_insert);
    g_test_add_func("/pool/corrupt", test_corrupt);
    g_test_add_func("/pool/intents", test_intents);
    g_test_add_func("/pool/corrupt/truncated", test_truncated);
    g_test_add_func("/pool/transition/table", test_transition_table);
    g_test_add_func("/pool/transition/lifecycle", test_transition_lifecycle);
    g_test_add_func("/pool/transition/missing", test_missing);
    g_test_add_func("/pool/transition/read-mode", test_read_mode_refuses);
    g_test_add_func("/pool/journal/chain", test_journal_chain);
    g_test_add_func("/pool/journal/torn", test_journal_torn);
    g_test_add_func("/pool/journal/torn-run", test_journal_torn_run);
    g_test_add_func("/pool/journal/long", test_journal_long);
    g_test_add_func("/pool/open/unsafe/mode", test_open_unsafe_mode);
    g_test_add_func("/pool/open/unsafe/symlink", test_open_unsafe_symlink);
    g_test_add_func("/pool/open/unsafe/owner", test_open_unsafe_owner);
    g_test_add_func("/pool/identity/renumbering", test_identity_renumbering);
    g_test_add_func("/pool/identity/forms", test_identity_forms);
    g_test_add_func("/pool/identity/usb", test_identity_usb);
    g_test_add_func("/pool/crash/mid-write", test_crash_mid_write);
    g_test_add_func("/pool/crash/sigkill", test_crash_sigkill);
    g_test_add_func("/pool/stale-temps", test_stale_temps);
    g_test_add_func("/pool/lock", test_lock_contention);
    g_test_add_func("/pool/reconcile", test_reconcile);
    g_test_add_func("/pool/reconcile-usb-runtime", test_reconcile_usb_runtime);
    g_test_add_func("/pool/reconcile-usb-runtime/claimed", test_reconcile_usb_runtime_claimed);
    g_test_add_func("/pool/reconcile/fake-hosts", test_reconcile_fake_hosts);
    g_test_add_func("/pool/reconcile/collide/usb", test_collide_usb);
    g_test_add_func("/pool/reconcile/collide/dsn", test_collide_dsn);
    g_test_add_func("/pool/reconcile/collide/fallback", test_collide_fallback);
    g_test_add_func("/pool/reconcile/identity-changed", test_identity_changed);
    g_test_add_func("/pool/reconcile/identity-copied", test_identity_copied);
    g_test_add_func("/pool/reconcile/scan-first", test_reconcile_scan_first);
    g_test_add_func("/pool/reconcile/mdev-vf", test_reconcile_mdev_vf);
    g_test_add_func("/pool/identity/vmd", test_identity_vmd);
    g_test_add_func("/pool/claim/expiry", test_claim_expiry);
    g_test_add_func("/pool/mdev/add-remove", test_add_remove);
    g_test_add_func("/pool/mdev/read-only", test_add_read_only);
    g_test_add_func("/pool/mdev/load", test_load_mdev);
    g_test_add_func("/pool/scrub-token/load", test_load_scrub_token);
    g_test_add_func("/pool/last-scrub/load", test_load_last_scrub);
    g_test_add_func("/pool/scrub-token/life", test_scrub_token_life);
    g_test_add_func("/pool/mdev/reconcile", test_reconcile_keeps_mdev);
    return g_test_run();
}
