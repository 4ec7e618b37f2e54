/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: drives the Placement client (src/nova/av-placement.c)
 * for tests/test-placement-client.sh:
 *     placement-client CLOUD RP_NAME[,RP_NAME...] RC WANT [BUDGET_MS]
 * sets the reserved of inventory RC of each provider RP_NAME to WANT (-1:
 * its total) through the cloud CLOUD of clouds.yaml, one client for all
 * (one run, of BUDGET_MS when given), and prints "reserved N total T
 * put|same" for each, or the error; exits with the first failure's status
 * 1 (2: not found, 3: unreachable, 5xx or out of time). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "nova/av-openstack.h"
#include "nova/av-placement.h"
#include "util/av-error.h"

int
main(int argc, char **argv)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(AvPlacementClient) client = NULL;
    AvOsCloud *cloud;
    AvInventory inv;
    gboolean put = FALSE;
    g_auto(GStrv) names = NULL;
    int status = 0;

    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: placement-client CLOUD RP_NAME[,RP_NAME...] RC WANT [BUDGET_MS]\n");
        return 64;
    }
    cloud = av_os_cloud_load(argv[1], &err);
    if (!cloud) {
        fprintf(stderr, "%s\n", err->message);
        return 1;
    }
    client = av_placement_client_new(cloud);
    if (argc == 6)
        av_placement_client_set_budget(client, g_ascii_strtoll(argv[5], NULL, 10));
    names = g_strsplit(argv[2], ",", -1);
    for (guint i = 0; names[i]; i++) {
        g_clear_error(&err);
        if (!av_placement_set_reserved(client, names[i], argv[3], g_ascii_strtoll(argv[4], NULL, 10), &inv, &put,
                                       &err)) {
            printf("error: %s\n", err->message);
            if (!status)
                status = g_error_matches(err, AV_ERROR, AV_ERROR_NOT_FOUND) ? 2
                       : g_error_matches(err, AV_ERROR, AV_ERROR_IO)        ? 3
                                                                             : 1;
            continue;
        }
        printf("reserved %" G_GINT64_FORMAT " total %" G_GINT64_FORMAT " %s\n", inv.reserved, inv.total,
               put ? "put" : "same");
    }
    return status;
}
