/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the points where a test double may act.
 *
 * The installed programs carry none of the tests' doubles (docs/design.md,
 * as libvirt keeps virpcimock in its tests/).  Production code keeps hook
 * points only, one in the room of what a double stands in for:
 *
 *   here           crash points (the kill storm, tests/storm), stop points
 *                  and the settings a test shortens: av_point_set_double()
 *   src/vfio/      the emulated kernel: av_kernel_ops_set_double()
 *   src/cli/       the hot-plug table of `accelvirt attach`:
 *                  av_hotplug_ops_set_double() (cli.h)
 *
 * Each is a pointer to a table of operations, NULL unless a double
 * registered one.  The test library libaccelvirt-testdoubles.a (tests/doubles/)
 * registers them from a constructor (tests/doubles/av-doubles.c), so the
 * test builds (tests/bin/, the unit tests) are the same objects as the
 * installed programs plus that library.  A registration pointer rather than
 * weak symbols: it is plain C, the same in every linker, and a production
 * program holds no name or code of a double at all (tests/test-doubles.sh
 * reads their symbols and strings).
 *
 * With no double registered every point below is a no-op and every setting
 * unset.  With one, the points act only once the process has made a root
 * prefix other than "/" (av_root_new() calls av_point_arm()): never on the
 * real root. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* What a test double decides at the points (tests/doubles/av-points.c). */
typedef struct {
    /* Whether the process dies (SIGKILL) here: at a counted crash point
     * when @name is NULL, else at the named one @name. */
    gboolean (*crash)(const char *name);
    /* Whether the process stops itself (SIGSTOP) at the stop point @name. */
    gboolean (*stop)(const char *name);
    /* A test's value of the setting @name ("lock-timeout-ms",
     * "driver-budget-s", "root-resolve"), or NULL for the program's own. */
    const char *(*setting)(const char *name);
} AvPointOps;

/* The hook point: the doubles' constructor registers @ops (borrowed for
 * the life of the process); production code never calls this. */
void av_point_set_double(const AvPointOps *ops);
/* The process works on a fake tree: the points may act from now on. */
void av_point_arm(void);

/* A counted crash point: before and after every write the emulated kernel
 * acts on, before a crash-safe file replaces the old one and after, before
 * a journal line is appended and half-way through it. */
void av_point_crash(void);
/* TRUE when this counted crash point is the one to die at: the caller may
 * leave a torn write first, then call av_point_die(). */
gboolean av_point_crash_due(void);
/* A named crash point, for tests that must die at one place of a long
 * operation whatever the count of points before it.  Named points do not
 * count in the numbering of the counted ones. */
void av_point_crash_named(const char *name);
/* Kills the process with SIGKILL, as a crash would. */
void av_point_die(void) G_GNUC_NORETURN;
/* A stop point: the process stops itself (SIGSTOP), holding what it holds,
 * so that a test can kill it there. */
void av_point_stop(const char *name);
/* A test's value of the setting @name, or NULL (see AvPointOps). */
const char *av_point_setting(const char *name);

G_END_DECLS
