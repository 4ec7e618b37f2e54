/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the exit status of an error (see av-exit.h). */
#include "config.h"

#include "av-exit.h"

AvExitStatus
av_exit_status(int code)
{
    /* Every code is named and there is no default: a new AvErrorCode does
     * not build (-Wswitch) until someone says which status it gets. */
    switch ((AvErrorCode)code) {
    case AV_ERROR_INVALID_INPUT:
    case AV_ERROR_POLICY:
        return AV_EXIT_USAGE;
    case AV_ERROR_LOCKED:
        return AV_EXIT_LOCKED;
    case AV_ERROR_CORRUPT_STATE:
        return AV_EXIT_CORRUPT;
    case AV_ERROR_IN_USE:
        return AV_EXIT_IN_USE;
    case AV_ERROR_NO_CAPACITY:
        return AV_EXIT_NO_CAPACITY;
    case AV_ERROR_FAILED:
    case AV_ERROR_NOT_FOUND:
    case AV_ERROR_IO:
    case AV_ERROR_UNSAFE:
    case AV_ERROR_STATE:
        return AV_EXIT_FAILURE;
    }
    return AV_EXIT_FAILURE;
}
