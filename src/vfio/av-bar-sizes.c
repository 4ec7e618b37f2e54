/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the write-ahead record of Resizable BAR sizes (av-bar-sizes.h). */
#include "config.h"

#include "av-bar-sizes.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pci/av-pci.h"
#include "util/av-error.h"
#include "util/av-point.h"
#include "util/av-file.h"
#include "util/av-json.h"
#include "vfio/av-vfio.h"

/* What a record may weigh: six BARs and an error message. */
#define AV_BAR_RECORD_MAX 65536
/* A temporary file of a record older than this is a dead writer's. */
#define AV_BAR_TMP_STALE_S 60

/* See av-bar-sizes.h. */
void
av_bar_record_free(AvBarRecord *record)
{
    if (!record)
        return;
    if (record->fd >= 0)
        close(record->fd);
    g_free(record->identity);
    g_free(record->address);
    if (record->bars)
        g_array_unref(record->bars);
    g_free(record->error);
    g_free(record->state_dir);
    g_free(record->path);
    g_free(record);
}

static char *
av_bar_record_dir(const char *state_dir)
{
    return g_build_filename(state_dir, AV_BAR_SIZES_DIR, NULL);
}

/* See av-bar-sizes.h. */
char *
av_bar_record_path(const char *state_dir, const char *identity)
{
    g_autofree char *hash = g_compute_checksum_for_string(G_CHECKSUM_SHA256, identity, -1);
    g_autofree char *name = g_strconcat(hash, ".json", NULL);

    return g_build_filename(state_dir, AV_BAR_SIZES_DIR, name, NULL);
}

/* See av-bar-sizes.h. */
gboolean
av_bar_record_exists(const char *state_dir, const char *identity)
{
    g_autofree char *path = av_bar_record_path(state_dir, identity);

    return g_file_test(path, G_FILE_TEST_EXISTS);
}

static json_t *
av_bar_record_to_json(const AvBarRecord *record)
{
    json_t *bars = json_array();

    for (guint i = 0; i < record->bars->len; i++) {
        const AvBarSize *b = &g_array_index(record->bars, AvBarSize, i);

        json_array_append_new(bars, json_pack("{s:i, s:i, s:I, s:I}", "bar", (int)b->bar, "bit", (int)b->bit,
                                              "size", (json_int_t)AV_PCI_REBAR_SIZE(b->bit),
                                              "grown", (json_int_t)b->grown));
    }
    return json_pack("{s:s, s:s, s:I, s:o, s:o}", "identity", record->identity, "address", record->address,
                     "since", (json_int_t)record->since, "bars", bars,
                     "error", av_json_string_or_null(record->error));
}

/* Writes @record to its path, crash-safe, and holds the new file's lock
 * (the old one's, if any, let go). */
static gboolean
av_bar_record_save(AvBarRecord *record, GError **error)
{
    g_autoptr(json_t) obj = av_bar_record_to_json(record);
    g_autofree char *text = av_json_dump_compact(obj);
    g_autofree char *dir = av_bar_record_dir(record->state_dir);
    int fd;

    if (!av_file_ensure_dir(dir, 0700, error))
        return FALSE;
    fd = av_file_write_atomic_held(record->path, text, strlen(text), 0600, error);
    if (fd < 0)
        return FALSE;
    if (record->fd >= 0)
        close(record->fd);
    record->fd = fd;
    return TRUE;
}

/* See av-bar-sizes.h. */
AvBarRecord *
av_bar_record_write(const char *state_dir, const char *identity, const char *address, const AvBarSize *bars,
                    guint n_bars, GError **error)
{
    g_autoptr(AvBarRecord) record = g_new0(AvBarRecord, 1);

    record->fd = -1;
    record->state_dir = g_strdup(state_dir);
    record->path = av_bar_record_path(state_dir, identity);
    record->identity = g_strdup(identity);
    record->address = g_strdup(address);
    record->since = g_get_real_time() / G_USEC_PER_SEC;
    record->bars = g_array_new(FALSE, TRUE, sizeof(AvBarSize));
    g_array_append_vals(record->bars, bars, n_bars);
    if (g_file_test(record->path, G_FILE_TEST_EXISTS)) {
        g_set_error(error, AV_ERROR, AV_ERROR_IN_USE,
                    "the BAR sizes of %s (%s) are recorded already, by a resize that is still under way or was "
                    "cut short ('%s'): they must be put back first", address, identity, record->path);
        return NULL;
    }
    if (!av_bar_record_save(record, error)) {
        g_prefix_error(error, "cannot record the BAR sizes of %s before resizing them: ", address);
        return NULL;
    }
    return g_steal_pointer(&record);
}

/* Reads the record open on @fd (@path).  NULL when it is no record. */
static AvBarRecord *
av_bar_record_parse(int fd, const char *state_dir, const char *path)
{
    static const char *const bar_keys[] = { "bar", "bit", "size", "grown", NULL };
    g_autoptr(AvBarRecord) record = NULL;
    g_autoptr(json_t) obj = NULL;
    g_autofree char *data = NULL;
    gsize len = 0;
    json_t *identity, *address, *since, *bars, *err, *b;
    size_t i;

    if (av_file_read_all(fd, &data, &len) < 0 || len > AV_BAR_RECORD_MAX)
        return NULL;
    obj = json_loadb(data, len, JSON_REJECT_DUPLICATES, NULL);
    identity = json_object_get(obj, "identity");
    address = json_object_get(obj, "address");
    since = json_object_get(obj, "since");
    bars = json_object_get(obj, "bars");
    err = json_object_get(obj, "error");
    if (!json_is_object(obj) || json_object_size(obj) != 5 || !json_is_string(identity) ||
        json_string_length(identity) == 0 || strlen(json_string_value(identity)) != json_string_length(identity) ||
        !json_is_string(address) || !av_pci_address_is_valid(json_string_value(address)) ||
        !json_is_integer(since) || !json_is_array(bars) || json_array_size(bars) == 0 ||
        json_array_size(bars) > AV_PCI_BAR_COUNT || !(json_is_null(err) || json_is_string(err)))
        return NULL;
    record = g_new0(AvBarRecord, 1);
    record->fd = -1;
    record->bars = g_array_new(FALSE, TRUE, sizeof(AvBarSize));
    json_array_foreach(bars, i, b) {
        AvBarSize size = { 0 };
        json_int_t bar = json_integer_value(json_object_get(b, "bar"));
        json_int_t bit = json_integer_value(json_object_get(b, "bit"));
        json_int_t grown = json_integer_value(json_object_get(b, "grown"));

        if (!json_is_object(b) || json_object_size(b) != 4)
            return NULL;
        for (guint k = 0; bar_keys[k]; k++)
            if (!json_is_integer(json_object_get(b, bar_keys[k])))
                return NULL;
        if (bar < 0 || bar >= AV_PCI_BAR_COUNT || bit < 0 || bit > AV_PCI_REBAR_BIT_MAX || grown <= 0 ||
            json_integer_value(json_object_get(b, "size")) != (json_int_t)AV_PCI_REBAR_SIZE(bit))
            return NULL;
        for (guint k = 0; k < record->bars->len; k++)
            if (g_array_index(record->bars, AvBarSize, k).bar == (guint)bar)
                return NULL;
        size.bar = (guint)bar;
        size.bit = (guint)bit;
        size.grown = (guint64)grown;
        g_array_append_val(record->bars, size);
    }
    record->identity = g_strdup(json_string_value(identity));
    record->address = g_strdup(json_string_value(address));
    record->since = json_integer_value(since);
    record->error = json_is_string(err) ? g_strdup(json_string_value(err)) : NULL;
    record->state_dir = g_strdup(state_dir);
    record->path = g_strdup(path);
    return g_steal_pointer(&record);
}

/* Opens @path and takes its lock without waiting: 0 with the fd, 1 when
 * another holds it, -ENOENT when there is no such file (or it was removed
 * or replaced while its lock was taken), another -errno. */
static int
av_bar_record_lock(const char *path, int *ret_fd)
{
    struct stat st, now;
    int fd = -1, r;

    r = av_file_open_unheld(path, &fd);
    if (r != 0)
        return r;
    /* The writer removes or replaces the file while it holds the lock:
     * a lock taken on a file that is no longer there says nothing. */
    if (fstat(fd, &st) < 0 || stat(path, &now) < 0 || st.st_ino != now.st_ino || st.st_dev != now.st_dev) {
        close(fd);
        return -ENOENT;
    }
    *ret_fd = fd;
    return 0;
}

/* See av-bar-sizes.h. */
gboolean
av_bar_record_take(const char *state_dir, const char *identity, int wait_ms, AvBarRecord **ret_record,
                   GError **error)
{
    g_autofree char *path = av_bar_record_path(state_dir, identity);
    gint64 deadline = g_get_monotonic_time() + (gint64)wait_ms * 1000;
    AvBarRecord *record;
    int fd = -1, r;

    for (;;) {
        r = av_bar_record_lock(path, &fd);
        if (r == -ENOENT && g_file_test(path, G_FILE_TEST_EXISTS))
            continue;    /* replaced meanwhile: the new one */
        if (r != 1 || g_get_monotonic_time() >= deadline)
            break;
        g_usleep(50 * 1000);
    }
    if (r == -ENOENT) {
        *ret_record = NULL;
        return TRUE;
    }
    if (r == 1) {
        g_set_error(error, AV_ERROR, AV_ERROR_LOCKED,
                    "another process holds the record of the BAR sizes of %s ('%s'): it is resizing them or "
                    "putting them back", identity, path);
        return FALSE;
    }
    if (r < 0)
        return av_error_errno(error, r, "cannot open the record of the BAR sizes of %s ('%s')", identity, path);
    record = av_bar_record_parse(fd, state_dir, path);
    if (!record || g_strcmp0(record->identity, identity) != 0) {
        close(fd);
        av_bar_record_free(record);
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "'%s' is no record of the BAR sizes of %s: the sizes to put them back to are unknown", path,
                    identity);
        return FALSE;
    }
    record->fd = fd;
    *ret_record = record;
    return TRUE;
}

/* See av-bar-sizes.h. */
GPtrArray *
av_bar_records_take_orphaned(const char *state_dir, GPtrArray *problems)
{
    GPtrArray *records = g_ptr_array_new_with_free_func((GDestroyNotify)av_bar_record_free);
    g_autofree char *dir = av_bar_record_dir(state_dir);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *entry;

    while (d && (entry = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, entry, NULL);
        AvBarRecord *record;
        int fd = -1, r;

        if (!g_str_has_suffix(entry, ".json")) {
            struct stat st;

            /* A writer killed before its record was in place resized
             * nothing.  A live writer's file is there unlocked for a
             * moment before its lock (which it takes without waiting):
             * never locked here, and only one older than
             * AV_BAR_TMP_STALE_S is taken for a dead writer's. */
            if (strstr(entry, ".json.tmp.") && lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
                st.st_mtime + AV_BAR_TMP_STALE_S < g_get_real_time() / G_USEC_PER_SEC)
                unlink(path);
            continue;
        }
        r = av_bar_record_lock(path, &fd);
        if (r != 0)
            continue;    /* its writer lives, or it went meanwhile */
        record = av_bar_record_parse(fd, state_dir, path);
        if (!record) {
            close(fd);
            if (problems)
                g_ptr_array_add(problems, g_strdup_printf("'%s' is no record of BAR sizes: left in place, the "
                                                          "sizes it was to keep are unknown", path));
            continue;
        }
        record->fd = fd;
        g_ptr_array_add(records, record);
    }
    return records;
}

/* The size of BAR @bar of @address as the kernel has it now (its
 * "resource" line), 0 when unassigned.  -errno when it cannot be read. */
static int
av_bar_size_now(const AvRoot *root, const char *address, guint bar, guint64 *ret_size)
{
    guint64 start = 0, end = 0;
    int r = av_pci_read_resource(root, address, bar, &start, &end, NULL);

    if (r < 0)
        return r;
    *ret_size = end > start ? end - start + 1 : 0;
    return 0;
}

/* See av-bar-sizes.h. */
gboolean
av_bar_record_restore(const AvRoot *root, const AvKernelOps *ops, const AvBarRecord *record, json_t *done,
                      GError **error)
{
    g_autofree char *driver = av_vfio_current_driver(root, record->address);
    gboolean ok = TRUE;

    if (driver && !av_pci_driver_is_vfio(driver)) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                    "cannot put the BARs of %s back to their recorded sizes: it is on %s, not vfio-pci (a host "
                    "driver is never unbound for it)", record->address, driver);
        return FALSE;
    }
    if (!driver) {
        g_autofree char *original = NULL;
        g_autofree char *override_path = av_sys_path("bus/pci/devices/%s/driver_override", record->address);
        g_autofree char *override = NULL;

        /* Left unbound by a resize cut short: its driver_override is the
         * vfio driver it was on (vfio-pci or a variant), which nothing else
         * can bind meanwhile: back onto that one. */
        if (av_root_read_attr(root, override_path, &override) < 0 || !av_pci_driver_is_vfio(override))
            g_clear_pointer(&override, g_free);
        if (!av_vfio_bind(root, ops, record->address, override, &original, error)) {
            g_prefix_error(error, "cannot probe %s back onto %s to put its BARs back: ", record->address,
                           override ? override : "vfio-pci");
            return FALSE;
        }
    }
    for (guint i = 0; i < record->bars->len; i++) {
        const AvBarSize *b = &g_array_index(record->bars, AvBarSize, i);
        g_autoptr(GError) local = NULL;
        guint64 size = AV_PCI_REBAR_SIZE(b->bit), now = 0;
        gboolean resized = FALSE;
        int r = av_bar_size_now(root, record->address, b->bar, &now);

        if (r < 0) {
            av_error_errno(&local, r, "cannot read the size of BAR %u of %s", b->bar, record->address);
        } else if (now != size) {
            resized = av_vfio_resize_bar(root, ops, record->address, b->bar, b->bit, &local);
            if (!resized)
                g_prefix_error(&local, "cannot put BAR %u of %s back to %" G_GUINT64_FORMAT " bytes: ", b->bar,
                               record->address, size);
        }
        json_array_append_new(done, json_pack("{s:i, s:I, s:I, s:b}", "bar", (int)b->bar, "size", (json_int_t)size,
                                              "was", (json_int_t)now, "resized", resized));
        if (local) {
            if (ok)
                g_propagate_error(error, g_steal_pointer(&local));
            ok = FALSE;
        }
    }
    return ok;
}

/* See av-bar-sizes.h. */
gboolean
av_bar_record_set_error(AvBarRecord *record, const char *message, GError **error)
{
    g_free(record->error);
    record->error = g_strdup(message);
    return av_bar_record_save(record, error);
}

/* See av-bar-sizes.h. */
gboolean
av_bar_record_remove(AvBarRecord *record, GError **error)
{
    g_autofree char *dir = av_bar_record_dir(record->state_dir);
    gboolean ok = TRUE;
    int r;

    if (unlink(record->path) < 0 && errno != ENOENT) {
        ok = av_error_errno(error, -errno, "cannot remove the record of the BAR sizes of %s ('%s')",
                            record->address, record->path);
    } else {
        av_point_crash();
        r = av_file_fsync_dir(dir);
        if (r < 0)
            ok = av_error_errno(error, r, "the record '%s' was removed, but syncing its folder failed",
                                record->path);
    }
    av_bar_record_free(record);
    return ok;
}
