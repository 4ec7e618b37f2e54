/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: scrub tokens.  While a scrub runs on a device, the pool holds
 * a random single-use token and the UUID of the scrub VM's domain made with
 * it: the hook hands the device to that domain only (hooks/hook-prepare.c). */
#include "config.h"

#include "av-pool-private.h"

#include <string.h>

#include "util/av-error.h"
#include "util/av-names.h"

/* See av-pool.h. */
gboolean
av_pool_scrub_token_set(AvPoolDevice *dev, const char *token, GError **error)
{
    if (dev->state != AV_DEVICE_STATE_SCRUBBING && dev->state != AV_DEVICE_STATE_QUARANTINED) {
        g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                    "device '%s' is %s: only a device being scrubbed gets a scrub token", dev->identity,
                    av_device_state_to_string(dev->state));
        return FALSE;
    }
    g_return_val_if_fail(av_scrub_token_is_valid(token), FALSE);
    g_free(dev->scrub_token);
    dev->scrub_token = g_strdup(token);
    g_free(dev->scrub_domain);
    dev->scrub_domain = g_uuid_string_random();
    return TRUE;
}

/* See av-pool.h. */
gboolean
av_pool_scrub_token_matches(const AvPoolDevice *dev, const char *token, const char *domain_uuid)
{
    unsigned char diff = 0;

    if (!dev->scrub_token || !dev->scrub_domain || !token || !domain_uuid ||
        strlen(token) != AV_SCRUB_TOKEN_LEN || strlen(dev->scrub_token) != AV_SCRUB_TOKEN_LEN)
        return FALSE;
    for (gsize i = 0; i < AV_SCRUB_TOKEN_LEN; i++)
        diff |= (unsigned char)(dev->scrub_token[i] ^ token[i]);
    return diff == 0 && strcmp(dev->scrub_domain, domain_uuid) == 0;
}

/* See av-pool.h. */
void
av_pool_scrub_token_consume(AvPoolDevice *dev)
{
    g_clear_pointer(&dev->scrub_token, g_free);
}

/* See av-pool.h. */
void
av_pool_scrub_token_clear(AvPoolDevice *dev)
{
    g_clear_pointer(&dev->scrub_token, g_free);
    g_clear_pointer(&dev->scrub_domain, g_free);
}

/* See av-pool.h. */
gboolean
av_pool_is_scrub_domain(const AvPoolDevice *dev, const char *domain_uuid)
{
    return dev->scrub_domain && domain_uuid && strcmp(dev->scrub_domain, domain_uuid) == 0;
}
