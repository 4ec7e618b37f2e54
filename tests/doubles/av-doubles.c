/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt test doubles: their registration (see av-doubles.h). */
#include "config.h"

#include "av-doubles.h"

/* See av-doubles.h. */
void
av_doubles_register(void)
{
    av_kernel_ops_set_double(&av_kernel_ops_fake);
    av_point_set_double(&av_points_fake);
}

/* Before main(): a test build acts as the installed program would, with the
 * doubles in place of the kernel and of the tests' points. */
static void __attribute__((constructor))
av_doubles_init(void)
{
    av_doubles_register();
}
