/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the domain index of the state dir, which lets the hook tell
 * with a stat(2) or two, without the pool's lock and without reading
 * pool.json, that the pool names nothing of a domain.
 *
 *   STATE/domains/UUID   an empty file for every domain UUID that pool.json
 *                        names: the owner of a device, the scrub domain of a
 *                        device, the domain of a prepare's write-ahead
 *                        record, of a placement record.
 *
 * The contract: whenever STATE/domains exists, every UUID the pool.json on
 * disk names has its file there (the index may name more: a domain the pool
 * let go of a moment ago).  Only holders of the exclusive lock write it, in
 * av_pool_save(): the files of the UUIDs the new pool names are created and
 * their directory fsynced before pool.json is replaced; the files of UUIDs
 * it no longer names are removed after.  A writer killed in between leaves
 * files too many, never too few, and the next save removes them.  The
 * index is made whole the first time a pool is saved without one (a state
 * dir of an older accelvirt): in STATE/domains.new, fsynced, then renamed
 * to STATE/domains, with the names of both the pool on disk and the one
 * being saved; so a reader that finds STATE/domains can trust it from then
 * on.  A read (av_pool_index_names()) looks at the directory first, then at
 * the file: the directory, once there, stays. */
#include "config.h"

#include "av-pool-private.h"
#include "av-pool-placement.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/av-error.h"
#include "util/av-point.h"
#include "util/av-names.h"

#define AV_POOL_INDEX_DIR "domains"
#define AV_POOL_INDEX_NEW "domains.new"

static void
av_pool_index_add(GHashTable *set, const char *uuid)
{
    /* Only UUIDs in libvirt's canonical form, the one a hook looks up: one
     * in another form cannot be what a hook finds (the pool compares UUIDs
     * as strings), so it needs no entry. */
    if (av_uuid_is_valid(uuid))
        g_hash_table_add(set, g_strdup(uuid));
}

/* See av-pool-private.h. */
GHashTable *
av_pool_index_names_of(const AvPool *pool)
{
    GHashTable *set = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);

    for (guint i = 0; i < pool->devices->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(pool->devices, i);

        if (dev->owner)
            av_pool_index_add(set, dev->owner->domain_uuid);
        av_pool_index_add(set, dev->scrub_domain);
    }
    for (guint i = 0; i < pool->intents->len; i++)
        av_pool_index_add(set, ((const AvIntent *)g_ptr_array_index(pool->intents, i))->domain_uuid);
    for (guint i = 0; i < pool->placements->len; i++)
        av_pool_index_add(set, ((const AvPoolPlacement *)g_ptr_array_index(pool->placements, i))->domain_uuid);
    return set;
}

/* See av-file.h's av_file_fsync_dir(); an error says which directory. */
static gboolean
av_pool_index_sync(const char *dir, GError **error)
{
    int r = av_file_fsync_dir(dir);

    if (r < 0)
        return av_error_errno(error, r, "cannot sync the directory '%s'", dir);
    return TRUE;
}

/* Creates the empty file @dir/@name (kept when it is there). */
static gboolean
av_pool_index_touch(const char *dir, const char *name, GError **error)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, 0600);

    if (fd < 0)
        return av_error_errno(error, -errno, "cannot create '%s'", path);
    close(fd);
    return TRUE;
}

/* The UUID files in @dir (a new set), or NULL with @error. */
static GHashTable *
av_pool_index_read_dir(const char *dir, GError **error)
{
    g_autoptr(GHashTable) set = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(GDir) d = g_dir_open(dir, 0, error);
    const char *name;

    if (!d) {
        g_prefix_error(error, "cannot read the domain index: ");
        return NULL;
    }
    while ((name = g_dir_read_name(d)))
        av_pool_index_add(set, name);
    return g_steal_pointer(&set);
}

/* Removes @dir and the files in it (a domains.new a writer left). */
static gboolean
av_pool_index_remove_dir(const char *dir, GError **error)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;

    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);

        if (unlink(path) < 0 && errno != ENOENT)
            return av_error_errno(error, -errno, "cannot remove '%s'", path);
    }
    if (rmdir(dir) < 0 && errno != ENOENT)
        return av_error_errno(error, -errno, "cannot remove '%s'", dir);
    return TRUE;
}

/* Makes STATE/domains whole for the first time, naming @names and the
 * pool on disk's (pool->index_disk): built in STATE/domains.new, synced,
 * renamed. */
static gboolean
av_pool_index_build(AvPool *pool, GHashTable *names, GError **error)
{
    g_autofree char *dir = g_build_filename(pool->state_dir, AV_POOL_INDEX_DIR, NULL);
    g_autofree char *tmp = g_build_filename(pool->state_dir, AV_POOL_INDEX_NEW, NULL);
    GHashTable *sets[] = { names, pool->index_disk };
    GHashTableIter iter;
    gpointer key;

    if (!av_pool_index_remove_dir(tmp, error))
        return FALSE;
    if (mkdir(tmp, 0700) < 0)
        return av_error_errno(error, -errno, "cannot create '%s'", tmp);
    for (guint i = 0; i < G_N_ELEMENTS(sets); i++) {
        if (!sets[i])
            continue;
        g_hash_table_iter_init(&iter, sets[i]);
        while (g_hash_table_iter_next(&iter, &key, NULL))
            if (!av_pool_index_touch(tmp, key, error))
                return FALSE;
    }
    if (!av_pool_index_sync(tmp, error))
        return FALSE;
    av_point_crash();
    if (rename(tmp, dir) < 0)
        return av_error_errno(error, -errno, "cannot rename '%s' to '%s'", tmp, dir);
    return av_pool_index_sync(pool->state_dir, error);
}

/* See av-pool-private.h. */
gboolean
av_pool_index_before_save(AvPool *pool, GHashTable *names, GError **error)
{
    g_autofree char *dir = g_build_filename(pool->state_dir, AV_POOL_INDEX_DIR, NULL);
    g_autoptr(GHashTable) have = NULL;
    GHashTableIter iter;
    gpointer key;
    gboolean added = FALSE;
    struct stat st;

    if (lstat(dir, &st) < 0) {
        if (errno != ENOENT)
            return av_error_errno(error, -errno, "cannot examine the domain index '%s'", dir);
        if (!av_pool_index_build(pool, names, error)) {
            g_prefix_error(error, "cannot make the domain index of '%s': ", pool->state_dir);
            return FALSE;
        }
        return TRUE;
    }
    if (!S_ISDIR(st.st_mode)) {
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE,
                    "refusing to save the pool: the domain index '%s' is not a directory; move it away (the "
                    "next save makes it again)", dir);
        return FALSE;
    }
    have = av_pool_index_read_dir(dir, error);
    if (!have)
        return FALSE;
    g_hash_table_iter_init(&iter, names);
    while (g_hash_table_iter_next(&iter, &key, NULL)) {
        if (g_hash_table_contains(have, key))
            continue;
        if (!av_pool_index_touch(dir, key, error))
            return FALSE;
        added = TRUE;
    }
    if (added && !av_pool_index_sync(dir, error))
        return FALSE;
    return TRUE;
}

/* See av-pool-private.h. */
void
av_pool_index_after_save(AvPool *pool, GHashTable *names)
{
    g_autofree char *dir = g_build_filename(pool->state_dir, AV_POOL_INDEX_DIR, NULL);
    g_autoptr(GHashTable) have = av_pool_index_read_dir(dir, NULL);
    GHashTableIter iter;
    gpointer key;

    /* pool.json names no more than @names now. */
    if (pool->index_disk)
        g_hash_table_unref(pool->index_disk);
    pool->index_disk = g_hash_table_ref(names);
    if (!have)
        return;
    av_point_crash();
    g_hash_table_iter_init(&iter, have);
    while (g_hash_table_iter_next(&iter, &key, NULL)) {
        g_autofree char *path = NULL;

        if (g_hash_table_contains(names, key))
            continue;
        path = g_build_filename(dir, key, NULL);
        /* Left there, it only sends that domain's hook calls the long way. */
        if (unlink(path) < 0 && errno != ENOENT)
            g_debug("cannot remove '%s' from the domain index: %s", path, g_strerror(errno));
    }
}

/* See av-pool.h. */
AvPoolNames
av_pool_index_names(const char *state_dir, const char *domain_uuid)
{
    g_autofree char *dir = NULL;
    g_autofree char *path = NULL;
    struct stat st;

    if (!state_dir || !av_uuid_is_valid(domain_uuid))
        return AV_POOL_NAMES_UNKNOWN;
    dir = g_build_filename(state_dir, AV_POOL_INDEX_DIR, NULL);
    if (stat(dir, &st) < 0) {
        if (errno != ENOENT)
            return AV_POOL_NAMES_UNKNOWN;
        /* No index: no pool either (nothing named), or a pool an older
         * accelvirt saved, which only reading it can tell. */
        path = g_build_filename(state_dir, AV_POOL_FILE, NULL);
        if (stat(path, &st) < 0 && errno == ENOENT)
            return AV_POOL_NAMES_NO;
        return AV_POOL_NAMES_UNKNOWN;
    }
    if (!S_ISDIR(st.st_mode))
        return AV_POOL_NAMES_UNKNOWN;
    path = g_build_filename(dir, domain_uuid, NULL);
    if (stat(path, &st) == 0)
        return AV_POOL_NAMES_YES;
    return errno == ENOENT ? AV_POOL_NAMES_NO : AV_POOL_NAMES_UNKNOWN;
}
