/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: the marks of attaches in flight and the undo of an
 * attach the guest never had (src/pool/av-pool-attach.c, issue 14). */
#include "config.h"

#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "av-test.h"
#include "pool/av-pool.h"
#include "util/av-error.h"

#define UUID_A "5eed0000-0000-4000-8000-00000000a001"
#define UUID_B "5eed0000-0000-4000-8000-00000000b002"
#define ID_1 "dsn:10de:20f1:48b02d1a000001c6.f0"
#define ID_2 "dsn:10de:20f1:48b02d1a000001c7.f0"

static guint
test_count_marks(const char *state)
{
    g_autofree char *dir = g_build_filename(state, "attach-pending", NULL);
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    guint n = 0;

    while (d && g_dir_read_name(d))
        n++;
    return n;
}

/* A mark held by this process: in flight for its identity only, until
 * done, which removes it. */
static void
test_mark_done(void)
{
    g_autofree char *state = av_test_tmpdir();
    g_autoptr(GError) err = NULL;
    AvPoolAttachMark *mark;

    g_assert_false(av_pool_attach_in_flight(state, ID_1));
    mark = av_pool_attach_mark(state, UUID_A, ID_1, &err);
    g_assert_no_error(err);
    g_assert_nonnull(mark);
    g_assert_cmpuint(test_count_marks(state), ==, 1);
    g_assert_true(av_pool_attach_in_flight(state, ID_1));
    g_assert_false(av_pool_attach_in_flight(state, ID_2));
    /* Asking does not remove a live mark. */
    g_assert_cmpuint(test_count_marks(state), ==, 1);
    av_pool_attach_mark_done(mark);
    g_assert_cmpuint(test_count_marks(state), ==, 0);
    g_assert_false(av_pool_attach_in_flight(state, ID_1));
    av_test_tmpdir_remove(state);
}

static gpointer
test_take_mark(gconstpointer data)
{
    return av_pool_attach_mark((const char *)data, UUID_A, ID_1, NULL);
}

/* A mark held by another live process counts; once that process lets it
 * go without removing it (as a killed attach), it is a dead mark: it does
 * not count, and the next look removes it. */
static void
test_mark_other_process(void)
{
    g_autofree char *state = av_test_tmpdir();
    int fd = -1;
    pid_t pid = av_test_hold(test_take_mark, (GDestroyNotify)av_pool_attach_mark_free, state, &fd);

    g_assert_true(av_pool_attach_in_flight(state, ID_1));
    g_assert_true(av_pool_attach_in_flight(state, ID_1));
    av_test_hold_release(pid, fd);
    g_assert_cmpuint(test_count_marks(state), ==, 1);
    g_assert_false(av_pool_attach_in_flight(state, ID_1));
    g_assert_cmpuint(test_count_marks(state), ==, 0);
    av_test_tmpdir_remove(state);
}

/* Two marks of one identity: in flight while either lives. */
static void
test_mark_two(void)
{
    g_autofree char *state = av_test_tmpdir();
    AvPoolAttachMark *first = av_pool_attach_mark(state, UUID_A, ID_1, NULL);
    AvPoolAttachMark *second = av_pool_attach_mark(state, NULL, ID_1, NULL);

    g_assert_nonnull(first);
    g_assert_nonnull(second);
    g_assert_cmpuint(test_count_marks(state), ==, 2);
    av_pool_attach_mark_free(first);          /* left behind, dead */
    g_assert_true(av_pool_attach_in_flight(state, ID_1));
    g_assert_cmpuint(test_count_marks(state), ==, 1);
    av_pool_attach_mark_done(second);
    g_assert_false(av_pool_attach_in_flight(state, ID_1));
    av_test_tmpdir_remove(state);
}

/* A mark that cannot be written: NULL with an error naming the device. */
static void
test_mark_unwritable(void)
{
    g_autofree char *state = av_test_tmpdir();
    g_autoptr(GError) err = NULL;

    av_test_write(state, "attach-pending", "not a directory");
    g_assert_null(av_pool_attach_mark(state, UUID_A, ID_1, &err));
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(err->message, ID_1));
    av_test_tmpdir_remove(state);
}

/* A device in use by @uuid (through claimed), in a new pool of @state. */
static AvPoolDevice *
test_in_use(AvPool *pool, const char *identity, const char *uuid)
{
    g_autoptr(AvOwner) owner = av_owner_new(uuid, "vm");
    g_autoptr(GError) err = NULL;
    AvPoolDevice *dev = av_pool_add(pool, AV_DEVICE_KIND_PCI, identity, "0000:ca:00.0", "gpu", AV_DEVICE_STATE_FREE,
                                    NULL, &err);

    g_assert_no_error(err);
    g_assert_true(av_pool_transition(pool, dev, AV_DEVICE_STATE_CLAIMED, owner, NULL, &err));
    g_assert_true(av_pool_transition(pool, dev, AV_DEVICE_STATE_IN_USE, owner, NULL, &err));
    g_assert_no_error(err);
    return dev;
}

/* The undo of an attach: in use by that domain -> free, journalled; any
 * other holder or state is refused and changes nothing. */
static void
test_attach_undo(void)
{
    g_autofree char *state = av_test_tmpdir();
    g_autoptr(GError) err = NULL;
    g_autoptr(GPtrArray) entries = NULL;
    g_autoptr(AvPool) pool = av_pool_open(state, AV_POOL_WRITE, 0, &err);
    AvPoolDevice *dev;
    json_t *last;

    g_assert_no_error(err);
    dev = test_in_use(pool, ID_1, UUID_A);
    g_assert_false(av_pool_attach_undo(pool, dev, UUID_B, "test", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_STATE);
    g_clear_error(&err);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_IN_USE);

    g_assert_true(av_pool_attach_undo(pool, dev, UUID_A, "the hot-plug failed", &err));
    g_assert_no_error(err);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_FREE);
    g_assert_null(dev->owner);
    g_assert_true(av_journal_read(state, &entries, &err));
    last = g_ptr_array_index(entries, entries->len - 1);
    g_assert_cmpstr(json_string_value(json_object_get(last, "event")), ==, "transition");
    g_assert_cmpstr(json_string_value(json_object_get(last, "by")), ==, "attach-rolled-back");
    g_assert_cmpstr(json_string_value(json_object_get(last, "from")), ==, "in-use");
    g_assert_cmpstr(json_string_value(json_object_get(last, "to")), ==, "free");
    g_assert_cmpstr(json_string_value(json_object_get(last, "why")), ==, "the hot-plug failed");

    /* Free already (or dirty: released meanwhile): refused, unchanged. */
    g_assert_false(av_pool_attach_undo(pool, dev, UUID_A, "again", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_STATE);
    g_clear_error(&err);
    dev = test_in_use(pool, ID_2, UUID_A);
    g_assert_true(av_pool_transition(pool, dev, AV_DEVICE_STATE_DIRTY, NULL, NULL, &err));
    g_assert_false(av_pool_attach_undo(pool, dev, UUID_A, "dirty", &err));
    g_assert_error(err, AV_ERROR, AV_ERROR_STATE);
    g_assert_cmpint(dev->state, ==, AV_DEVICE_STATE_DIRTY);
    g_clear_pointer(&pool, av_pool_free);
    av_test_tmpdir_remove(state);
}

int
main(int argc, char **argv)
{
    av_test_init(&argc, &argv);
    g_test_add_func("/attach-mark/done", test_mark_done);
    g_test_add_func("/attach-mark/other-process", test_mark_other_process);
    g_test_add_func("/attach-mark/two", test_mark_two);
    g_test_add_func("/attach-mark/unwritable", test_mark_unwritable);
    g_test_add_func("/attach-mark/undo", test_attach_undo);
    return g_test_run();
}
