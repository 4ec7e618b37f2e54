/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: a client of OpenStack Placement's REST API, through libcurl,
 * for the Placement sync: find a resource provider by name, read
 * and write one inventory, with the generation conflicts retried.
 *
 * Every request carries "OpenStack-API-Version: placement 1.29" (1.26 lets
 * reserved equal total; placement/rest_api_version_history.rst) and the
 * token; TLS is verified (the cloud's "cacert"; "verify": false only with
 * a warning in the log); connect timeout 5 s, a whole request 15 s; no
 * redirect is followed. */
#pragma once

#include <glib.h>

#include "nova/av-openstack.h"

G_BEGIN_DECLS

#define AV_PLACEMENT_MICROVERSION "placement 1.29"
#define AV_PLACEMENT_CONNECT_TIMEOUT_S 5L
#define AV_PLACEMENT_TIMEOUT_S 15L
/* How many times a PUT that met a generation conflict is tried again. */
#define AV_PLACEMENT_CONFLICT_RETRIES 5
/* The time one sync run may talk to Placement, all providers together;
 * what is left when it is spent stays pending for the next run. */
#define AV_PLACEMENT_RUN_BUDGET_S 30
/* The first pause between two tries of a PUT answered 409, doubled at
 * each try (50, 100, 200, 400, 800 ms). */
#define AV_PLACEMENT_CONFLICT_PAUSE_MS 50

/* One inventory of a resource provider, the six fields and the
 * provider's generation (GET /resource_providers/{uuid}/inventories/{rc}). */
typedef struct {
    gint64 generation;
    gint64 total;
    gint64 reserved;
    gint64 min_unit;
    gint64 max_unit;
    gint64 step_size;
    double allocation_ratio;
} AvInventory;

typedef struct AvPlacementClient AvPlacementClient;

/* A client for @cloud (taken over).  Authenticates at its first request:
 * Keystone v3 (password or application credential), the endpoint from the
 * catalog unless the cloud's placement_endpoint_override says; without
 * Keystone (auth_type none), the token of auth.token ("admin" by default,
 * what Placement's noauth2 takes). */
AvPlacementClient *av_placement_client_new(AvOsCloud *cloud);
void av_placement_client_free(AvPlacementClient *client);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPlacementClient, av_placement_client_free)

/* TRUE once a request of @client could not reach Placement or Keystone,
 * or authentication failed: later requests fail at once with the same
 * error (a sync stops trying). */
gboolean av_placement_client_broken(const AvPlacementClient *client);

/* Gives @client's run a deadline: @budget_ms from now.  Every request of
 * the run ends by it (its timeout cut to what is left); once it is passed
 * the client is broken with "no time left in this run".  The first 5xx,
 * timeout or connection failure breaks the client too (the rest of the run
 * makes no request), and a 401 authenticates again at most once per run. */
void av_placement_client_set_budget(AvPlacementClient *client, gint64 budget_ms);

/* The UUID of the resource provider named @name (GET
 * /resource_providers?name=NAME) in *ret_uuid (caller frees).  FALSE with
 * AV_ERROR_NOT_FOUND when there is none; AV_ERROR_IO when Placement cannot
 * be reached or answers 5xx; AV_ERROR_FAILED for anything else (auth). */
gboolean av_placement_find_provider(AvPlacementClient *client, const char *name, char **ret_uuid, GError **error);

/* GET /resource_providers/@uuid/inventories/@rc into *ret.  FALSE with
 * AV_ERROR_NOT_FOUND when the provider has no such inventory. */
gboolean av_placement_get_inventory(AvPlacementClient *client, const char *uuid, const char *rc, AvInventory *ret,
                                    GError **error);

/* PUT /resource_providers/@uuid/inventories/@rc with all six fields of
 * @inv and its generation (fields left out would be reset to Placement's
 * defaults, handlers/inventory.py).  FALSE with AV_ERROR_LOCKED on a
 * generation conflict (409 placement.concurrent_update). */
gboolean av_placement_put_inventory(AvPlacementClient *client, const char *uuid, const char *rc,
                                    const AvInventory *inv, GError **error);

/* Makes the inventory @rc of the provider named @rp_name say reserved =
 * @want (-1: its total; else @want capped at the total): GET, then PUT the
 * same with only "reserved" changed, again from the GET after each
 * generation conflict, up to AV_PLACEMENT_CONFLICT_RETRIES times.  No PUT
 * when it says so already.  *ret_inv (may be NULL): the inventory as it is
 * now; *ret_put (may be NULL): whether a PUT was made.  FALSE with the
 * errors above; the sentence names the provider. */
gboolean av_placement_set_reserved(AvPlacementClient *client, const char *rp_name, const char *rc, gint64 want,
                                   AvInventory *ret_inv, gboolean *ret_put, GError **error);

/* What `accelvirt --version` says of this client: "built in (libcurl
 * VERSION)".  Caller frees. */
char *av_placement_client_version(void);

G_END_DECLS
