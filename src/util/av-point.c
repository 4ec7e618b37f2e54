/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the points where a test double may act (see av-point.h). */
#include "config.h"

#include "av-point.h"

#include <signal.h>
#include <unistd.h>

static const AvPointOps *av_point_ops;
static gboolean av_point_armed;

/* The registered double when it may act, or NULL. */
static const AvPointOps *
av_point_double(void)
{
    return av_point_armed ? av_point_ops : NULL;
}

/* See av-point.h. */
void
av_point_set_double(const AvPointOps *ops)
{
    av_point_ops = ops;
}

/* See av-point.h. */
void
av_point_arm(void)
{
    av_point_armed = TRUE;
}

/* See av-point.h. */
void
av_point_die(void)
{
    kill(getpid(), SIGKILL);
    _exit(137);
}

/* See av-point.h. */
gboolean
av_point_crash_due(void)
{
    const AvPointOps *ops = av_point_double();

    return ops && ops->crash(NULL);
}

/* See av-point.h. */
void
av_point_crash(void)
{
    if (av_point_crash_due())
        av_point_die();
}

/* See av-point.h. */
void
av_point_crash_named(const char *name)
{
    const AvPointOps *ops = av_point_double();

    if (ops && ops->crash(name))
        av_point_die();
}

/* See av-point.h. */
void
av_point_stop(const char *name)
{
    const AvPointOps *ops = av_point_double();

    if (ops && ops->stop(name))
        raise(SIGSTOP);
}

/* See av-point.h. */
const char *
av_point_setting(const char *name)
{
    const AvPointOps *ops = av_point_double();

    return ops ? ops->setting(name) : NULL;
}
