/* accelvirt tests: drives the Placement client (src/nova/av-placement.c)
 * for tests/test-placement-client.sh:
 *     placement-client CLOUD RP_NAME RC WANT
 * sets the reserved of inventory RC of the provider RP_NAME to WANT (-1:
 * its total) through the cloud CLOUD of clouds.yaml, and prints
 * "reserved N total T put|same", or the error and exits 1 (2: not found,
 * 3: unreachable or 5xx). */
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

    if (argc != 5) {
        fprintf(stderr, "usage: placement-client CLOUD RP_NAME RC WANT\n");
        return 64;
    }
    cloud = av_os_cloud_load(argv[1], &err);
    if (!cloud) {
        fprintf(stderr, "%s\n", err->message);
        return 1;
    }
    client = av_placement_client_new(cloud);
    if (!av_placement_set_reserved(client, argv[2], argv[3], g_ascii_strtoll(argv[4], NULL, 10), &inv, &put, &err)) {
        printf("error: %s\n", err->message);
        return g_error_matches(err, AV_ERROR, AV_ERROR_NOT_FOUND) ? 2 : g_error_matches(err, AV_ERROR, AV_ERROR_IO) ? 3
                                                                                                                  : 1;
    }
    printf("reserved %" G_GINT64_FORMAT " total %" G_GINT64_FORMAT " %s\n", inv.reserved, inv.total,
           put ? "put" : "same");
    return 0;
}
