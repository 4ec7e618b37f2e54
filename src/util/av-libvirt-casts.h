/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the one cast libvirt's event API asks for.
 *
 * libvirt takes every domain event callback as one generic type, through
 * its VIR_DOMAIN_EVENT_CALLBACK() cast (as its documentation does); the
 * callback's own type follows the event id.  clang 19 warns on that cast
 * (-Wcast-function-type-mismatch, in -Wcast-function-type; GCC 12 and 14
 * and clang 14 do not): the registrations go between these two, and only
 * they. */
#pragma once

#define AV_LIBVIRT_CALLBACK_CASTS_BEGIN \
    _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wcast-function-type\"")
#define AV_LIBVIRT_CALLBACK_CASTS_END _Pragma("GCC diagnostic pop")
