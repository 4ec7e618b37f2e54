/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt test doubles: what the tests' environment makes of the points
 * of src/util/av-point.h (which act only once the process made a root
 * prefix other than "/", never on the real root):
 *
 *   ACCELVIRT_TEST_KILL_AT=N        the process kills itself with SIGKILL at
 *                                   its Nth counted crash point (counting
 *                                   from 0): the kill storm, tests/storm
 *   ACCELVIRT_TEST_KILL_AT=NAME     ... or at the named crash point NAME
 *                                   (such as "bar-grown" in a BAR resize)
 *   ACCELVIRT_TEST_STOP=NAME        the process stops itself (SIGSTOP) at the
 *                                   stop point NAME, so that a test can kill
 *                                   it there
 *   ACCELVIRT_TEST_LOCK_TIMEOUT_MS  the setting "lock-timeout-ms": the hook's
 *                                   wait for the pool's lock
 *   ACCELVIRT_TEST_DRIVER_BUDGET    the setting "driver-budget-s": the hook's
 *                                   budget for driver commands, in seconds
 *   ACCELVIRT_TEST_ROOT_RESOLVE     the setting "root-resolve": "walk" makes
 *                                   a root prefix resolve paths by the
 *                                   component walk, not openat2() (the tests
 *                                   of both, the benchmark) */
#include "config.h"

#include "av-doubles.h"

/* The counted crash points left before the one to die at: -2 until the
 * environment is read, -1 when there is none. */
static gint64 av_points_left = -2;

static gboolean
av_points_crash(const char *name)
{
    const char *at = g_getenv("ACCELVIRT_TEST_KILL_AT");

    if (name)
        return g_strcmp0(at, name) == 0;
    if (av_points_left == -2) {
        guint64 n = 0;

        av_points_left = at && g_ascii_string_to_unsigned(at, 10, 0, G_MAXINT, &n, NULL) ? (gint64)n : -1;
    }
    if (av_points_left < 0)
        return FALSE;
    return av_points_left-- == 0;
}

static gboolean
av_points_stop(const char *name)
{
    return g_strcmp0(g_getenv("ACCELVIRT_TEST_STOP"), name) == 0;
}

static const char *
av_points_setting(const char *name)
{
    const char *value = NULL;

    if (g_str_equal(name, "lock-timeout-ms"))
        value = g_getenv("ACCELVIRT_TEST_LOCK_TIMEOUT_MS");
    else if (g_str_equal(name, "driver-budget-s"))
        value = g_getenv("ACCELVIRT_TEST_DRIVER_BUDGET");
    else if (g_str_equal(name, "root-resolve"))
        value = g_getenv("ACCELVIRT_TEST_ROOT_RESOLVE");
    return value && *value ? value : NULL;
}

const AvPointOps av_points_fake = {
    .crash = av_points_crash,
    .stop = av_points_stop,
    .setting = av_points_setting,
};
