/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the Placement client (see av-placement.h).  Sources: the
 * Placement API reference and placement/handlers/inventory.py (GET and PUT
 * of one inventory, the defaults a PUT fills in, 409
 * placement.concurrent_update), keystone's api-ref (201 and the token in
 * X-Subject-Token). */
#include "config.h"

#include "nova/av-placement.h"

#include <curl/curl.h>
#include <jansson.h>
#include <string.h>

#include "util/av-error.h"
#include "util/av-json.h"

/* The largest response body read. */
#define AV_PLACEMENT_BODY_MAX (4 * 1024 * 1024)

struct AvPlacementClient {
    AvOsCloud *cloud;
    CURL *curl;
    char *token;
    char *endpoint;              /* without a trailing '/' */
    GError *broken;              /* set once Placement or Keystone cannot be used */
    gboolean warned_plain;       /* the plain-http warning given */
    gboolean reauthed;           /* a 401 authenticated again once this run */
    gint64 deadline;             /* g_get_monotonic_time() the run ends by; 0: none */
};

/* The error of a run out of time. */
#define AV_PLACEMENT_NO_TIME "no time left in this run"

typedef struct {
    GString *body;
    char *subject_token;
    gboolean too_big;
} AvHttpReply;

static size_t
av_http_write(char *data, size_t size, size_t n, void *user)
{
    AvHttpReply *reply = user;

    if (reply->body->len + size * n > AV_PLACEMENT_BODY_MAX) {
        reply->too_big = TRUE;
        return 0;
    }
    g_string_append_len(reply->body, data, (gssize)(size * n));
    return size * n;
}

static size_t
av_http_header(char *data, size_t size, size_t n, void *user)
{
    AvHttpReply *reply = user;
    static const char name[] = "x-subject-token:";
    gsize len = size * n;

    if (len > sizeof(name) - 1 && g_ascii_strncasecmp(data, name, sizeof(name) - 1) == 0) {
        g_autofree char *v = g_strndup(data + sizeof(name) - 1, len - (sizeof(name) - 1));

        g_free(reply->subject_token);
        reply->subject_token = g_strdup(g_strstrip(v));
    }
    return len;
}

static void
av_placement_curl_init(void)
{
    static gsize once = 0;

    if (g_once_init_enter(&once)) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        g_once_init_leave(&once, 1);
    }
}

/* See av-placement.h. */
AvPlacementClient *
av_placement_client_new(AvOsCloud *cloud)
{
    AvPlacementClient *client = g_new0(AvPlacementClient, 1);

    av_placement_curl_init();
    client->cloud = cloud;
    return client;
}

void
av_placement_client_free(AvPlacementClient *client)
{
    if (!client)
        return;
    av_os_cloud_free(client->cloud);
    if (client->curl)
        curl_easy_cleanup(client->curl);
    g_free(client->token);
    g_free(client->endpoint);
    g_clear_error(&client->broken);
    g_free(client);
}

gboolean
av_placement_client_broken(const AvPlacementClient *client)
{
    return client->broken != NULL;
}

/* See av-placement.h. */
void
av_placement_client_set_budget(AvPlacementClient *client, gint64 budget_ms)
{
    client->deadline = g_get_monotonic_time() + budget_ms * 1000;
}

/* Milliseconds left of @client's run (G_MAXINT64 without a deadline, <= 0
 * once spent). */
static gint64
av_placement_left_ms(const AvPlacementClient *client)
{
    if (!client->deadline)
        return G_MAXINT64;
    return (client->deadline - g_get_monotonic_time()) / 1000;
}

/* Marks @client broken with a copy of @error; returns FALSE. */
static gboolean
av_placement_break(AvPlacementClient *client, GError **error)
{
    if (error && *error && !client->broken)
        client->broken = g_error_copy(*error);
    return FALSE;
}

/* One HTTP request: @method @url with @headers (NULL-terminated) and
 * @body (may be NULL).  *ret_status, *ret_body (caller frees), and when
 * @ret_subject_token is not NULL the X-Subject-Token header (caller frees,
 * NULL when absent).  FALSE with AV_ERROR_IO when no answer came. */
static gboolean
av_http_request(AvPlacementClient *client, const char *method, const char *url, const char *const *headers,
                const char *body, long *ret_status, char **ret_body, char **ret_subject_token, GError **error)
{
    AvHttpReply reply = { g_string_new(NULL), NULL, FALSE };
    struct curl_slist *list = NULL;
    char errbuf[CURL_ERROR_SIZE] = "";
    gint64 left_ms = av_placement_left_ms(client);
    CURLcode rc;
    long status = 0;

    if (left_ms <= 0) {
        g_string_free(reply.body, TRUE);
        g_set_error(error, AV_ERROR, AV_ERROR_IO, AV_PLACEMENT_NO_TIME);
        return FALSE;
    }
    if (!client->curl)
        client->curl = curl_easy_init();
    if (!client->curl) {
        g_string_free(reply.body, TRUE);
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot start libcurl");
        return FALSE;
    }
    curl_easy_reset(client->curl);
    for (guint i = 0; headers && headers[i]; i++)
        list = curl_slist_append(list, headers[i]);
    curl_easy_setopt(client->curl, CURLOPT_URL, url);
    curl_easy_setopt(client->curl, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(client->curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(client->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else if (g_str_equal(method, "GET")) {
        curl_easy_setopt(client->curl, CURLOPT_HTTPGET, 1L);
    }
    curl_easy_setopt(client->curl, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(client->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(client->curl, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)MIN(AV_PLACEMENT_CONNECT_TIMEOUT_S * 1000, MAX(left_ms, 1)));
    curl_easy_setopt(client->curl, CURLOPT_TIMEOUT_MS, (long)MIN(AV_PLACEMENT_TIMEOUT_S * 1000, MAX(left_ms, 1)));
    curl_easy_setopt(client->curl, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(client->curl, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(client->curl, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(client->curl, CURLOPT_SSL_VERIFYPEER, client->cloud->verify ? 1L : 0L);
    curl_easy_setopt(client->curl, CURLOPT_SSL_VERIFYHOST, client->cloud->verify ? 2L : 0L);
    if (client->cloud->cacert)
        curl_easy_setopt(client->curl, CURLOPT_CAINFO, client->cloud->cacert);
    curl_easy_setopt(client->curl, CURLOPT_WRITEFUNCTION, av_http_write);
    curl_easy_setopt(client->curl, CURLOPT_WRITEDATA, &reply);
    curl_easy_setopt(client->curl, CURLOPT_HEADERFUNCTION, av_http_header);
    curl_easy_setopt(client->curl, CURLOPT_HEADERDATA, &reply);
    curl_easy_setopt(client->curl, CURLOPT_ERRORBUFFER, errbuf);
    rc = curl_easy_perform(client->curl);
    curl_slist_free_all(list);
    curl_easy_setopt(client->curl, CURLOPT_HTTPHEADER, NULL);
    if (rc != CURLE_OK) {
        g_autofree char *shown = av_os_url_redact(url);

        g_set_error(error, AV_ERROR, AV_ERROR_IO, "cannot reach %s: %s", shown,
                    reply.too_big ? "the answer is too long" : *errbuf ? errbuf : curl_easy_strerror(rc));
        g_string_free(reply.body, TRUE);
        g_free(reply.subject_token);
        return FALSE;
    }
    curl_easy_getinfo(client->curl, CURLINFO_RESPONSE_CODE, &status);
    *ret_status = status;
    *ret_body = g_string_free(reply.body, FALSE);
    if (ret_subject_token)
        *ret_subject_token = reply.subject_token;
    else
        g_free(reply.subject_token);
    return TRUE;
}

/* The first error's "detail" of a Placement or Keystone error body, else
 * the body's first line, at most 200 characters.  Caller frees. */
static char *
av_http_detail(const char *body)
{
    g_autoptr(json_t) root = json_loads(body ? body : "", 0, NULL);
    json_t *err = json_array_get(json_object_get(root, "errors"), 0);
    const char *detail = json_string_value(json_object_get(err, "detail"));
    g_autofree char *text = NULL;

    if (!detail)
        detail = json_string_value(json_object_get(json_object_get(root, "error"), "message"));
    text = g_strdup(detail ? detail : body ? body : "");
    g_strdelimit(text, "\r\n\t", ' ');
    g_strstrip(text);
    if (strlen(text) > 200)
        strcpy(text + 197, "...");
    return g_steal_pointer(&text);
}

/* A warning (once per client) when @what is sent in clear to @url: plain
 * http:// to a host other than this one. */
static void
av_placement_warn_plain(AvPlacementClient *client, const char *url, const char *what)
{
    g_autofree char *shown = NULL;

    if (client->warned_plain || !av_os_url_plain_remote(url))
        return;
    client->warned_plain = TRUE;
    shown = av_os_url_redact(url);
    g_warning("cloud '%s' of '%s': %s goes to %s over plain http (not https): anyone on the way can read it",
              client->cloud->name, client->cloud->file, what, shown);
}

/* Authenticates @client once (see av_placement_client_new()). */
static gboolean
av_placement_auth(AvPlacementClient *client, GError **error)
{
    const AvOsCloud *cloud = client->cloud;
    g_autoptr(json_t) request = NULL;
    g_autoptr(json_t) answer = NULL;
    g_autofree char *url = NULL;
    g_autofree char *body = NULL;
    g_autofree char *reply = NULL;
    g_autofree char *token = NULL;
    const char *const headers[] = { "Content-Type: application/json", "Accept: application/json", NULL };
    long status = 0;

    if (client->broken) {
        g_propagate_error(error, g_error_copy(client->broken));
        return FALSE;
    }
    if (client->token)
        return TRUE;
    if (!cloud->verify) {
        static gsize warned = 0;

        if (g_once_init_enter(&warned)) {
            g_warning("cloud '%s' of '%s' says \"verify: false\": Placement's and Keystone's TLS certificates are "
                      "not checked", cloud->name, cloud->file);
            g_once_init_leave(&warned, 1);
        }
    }
    if (cloud->auth_type == AV_OS_AUTH_NONE) {
        json_t *t = json_object_get(cloud->auth, "token");

        client->token = g_strdup(json_is_string(t) && *json_string_value(t) ? json_string_value(t) : "admin");
        client->endpoint = g_strdup(cloud->endpoint_override);
    } else {
        request = av_os_token_request(cloud, error);
        if (!request)
            return FALSE;
        url = av_os_token_url(cloud);
        av_placement_warn_plain(client, url, "the credentials");
        body = json_dumps(request, JSON_COMPACT);
        if (!av_http_request(client, "POST", url, headers, body, &status, &reply, &token, error))
            return av_placement_break(client, error);
        if (status != 201 || !token) {
            g_autofree char *detail = av_http_detail(reply);
            g_autofree char *shown = av_os_url_redact(url);

            g_set_error(error, AV_ERROR, status >= 500 ? AV_ERROR_IO : AV_ERROR_FAILED,
                        "Keystone refused the credentials of cloud '%s' (POST %s: HTTP %ld%s%s)", cloud->name, shown,
                        status, *detail ? ": " : "", detail);
            return av_placement_break(client, error);
        }
        if (cloud->endpoint_override) {
            client->endpoint = g_strdup(cloud->endpoint_override);
        } else {
            answer = json_loads(reply, 0, NULL);
            client->endpoint = av_os_catalog_endpoint(answer, cloud->interface, cloud->region_name, error);
            if (!client->endpoint)
                return av_placement_break(client, error);
        }
        client->token = g_steal_pointer(&token);
    }
    for (gsize n = strlen(client->endpoint); n > 0 && client->endpoint[n - 1] == '/'; n--)
        client->endpoint[n - 1] = '\0';
    av_placement_warn_plain(client, client->endpoint, "Placement's token");
    return TRUE;
}

/* A request to Placement: @method @path (from the endpoint on) with @body
 * (JSON text or NULL).  *ret_status and *ret_body (caller frees).  A 401
 * authenticates again once (an expired token). */
static gboolean
av_placement_call(AvPlacementClient *client, const char *method, const char *path, const char *body,
                  long *ret_status, char **ret_body, GError **error)
{
    for (int attempt = 0;; attempt++) {
        g_autofree char *url = NULL;
        g_autofree char *auth = NULL;
        const char *headers[5];
        long status = 0;
        char *reply = NULL;

        if (!av_placement_auth(client, error))
            return FALSE;
        url = g_strconcat(client->endpoint, path, NULL);
        auth = g_strdup_printf("X-Auth-Token: %s", client->token);
        headers[0] = auth;
        headers[1] = "OpenStack-API-Version: " AV_PLACEMENT_MICROVERSION;
        headers[2] = "Accept: application/json";
        headers[3] = body ? "Content-Type: application/json" : NULL;
        headers[4] = NULL;
        if (!av_http_request(client, method, url, headers, body, &status, &reply, NULL, error)) {
            g_prefix_error(error, "Placement: ");
            return av_placement_break(client, error);
        }
        if (status == 401 && attempt == 0 && !client->reauthed && client->cloud->auth_type != AV_OS_AUTH_NONE) {
            client->reauthed = TRUE;
            g_free(reply);
            g_clear_pointer(&client->token, g_free);
            g_clear_pointer(&client->endpoint, g_free);
            continue;
        }
        if (status == 401 || status == 403) {
            g_autofree char *detail = av_http_detail(reply);
            g_autofree char *shown = av_os_url_redact(url);

            g_free(reply);
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "Placement refused the token of cloud '%s' (%s %s: HTTP "
                        "%ld%s%s)", client->cloud->name, method, shown, status, *detail ? ": " : "", detail);
            return av_placement_break(client, error);
        }
        if (status >= 500) {
            g_autofree char *detail = av_http_detail(reply);

            g_free(reply);
            g_set_error(error, AV_ERROR, AV_ERROR_IO, "Placement answered HTTP %ld to %s %s%s%s (no more requests "
                        "this run)", status, method, path, *detail ? ": " : "", detail);
            return av_placement_break(client, error);
        }
        *ret_status = status;
        *ret_body = reply;
        return TRUE;
    }
}

/* An error for the answer @status, @body of @method @what.  A 409 is the
 * generation conflict of a PUT of an inventory (the one write this client
 * makes; placement.concurrent_update): another writer changed the provider
 * between our GET and our PUT, and reading it again and writing again is
 * what fixes it, as for a lock another process held: AV_ERROR_LOCKED, which
 * av_placement_set_reserved() retries, and the next run after it. */
static gboolean
av_placement_fail(GError **error, long status, const char *body, const char *method, const char *what)
{
    g_autofree char *detail = av_http_detail(body);
    int code = status == 404 ? AV_ERROR_NOT_FOUND : status == 409 ? AV_ERROR_LOCKED
             : status >= 500 ? AV_ERROR_IO : AV_ERROR_FAILED;

    g_set_error(error, AV_ERROR, code, "Placement answered HTTP %ld to %s %s%s%s", status, method, what,
                *detail ? ": " : "", detail);
    return FALSE;
}

/* Whether @uuid is 8-4-4-4-12 hex digits (either case). */
static gboolean
av_placement_uuid_valid(const char *uuid)
{
    static const int groups[] = { 8, 4, 4, 4, 12 };
    const char *p = uuid;

    if (!p)
        return FALSE;
    for (guint g = 0; g < G_N_ELEMENTS(groups); g++) {
        for (int k = 0; k < groups[g]; k++, p++)
            if (!g_ascii_isxdigit(*p))
                return FALSE;
        if (*p != (g + 1 < G_N_ELEMENTS(groups) ? '-' : '\0'))
            return FALSE;
        p++;
    }
    return TRUE;
}

/* See av-placement.h. */
gboolean
av_placement_find_provider(AvPlacementClient *client, const char *name, char **ret_uuid, GError **error)
{
    g_autofree char *escaped = g_uri_escape_string(name, NULL, FALSE);
    g_autofree char *path = g_strdup_printf("/resource_providers?name=%s", escaped);
    g_autofree char *body = NULL;
    g_autoptr(json_t) root = NULL;
    const char *uuid = NULL;
    json_t *rps;
    json_t *rp;
    size_t i;
    long status = 0;

    if (!av_placement_call(client, "GET", path, NULL, &status, &body, error))
        return FALSE;
    if (status != 200)
        return av_placement_fail(error, status, body, "GET", path);
    root = json_loads(body, 0, NULL);
    rps = json_object_get(root, "resource_providers");
    if (!json_is_array(rps)) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "Placement's answer to GET %s has no resource_providers", path);
        return FALSE;
    }
    /* Exactly one provider of that very name, with a well-formed uuid:
     * anything else is not trusted (a reserved put on the wrong provider
     * would hide another host's device). */
    json_array_foreach(rps, i, rp) {
        if (g_strcmp0(json_string_value(json_object_get(rp, "name")), name) != 0)
            continue;
        if (uuid) {
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                        "Placement has more than one resource provider named '%s'", name);
            return FALSE;
        }
        uuid = json_string_value(json_object_get(rp, "uuid"));
        if (!av_placement_uuid_valid(uuid)) {
            g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                        "Placement's resource provider '%s' has no valid uuid", name);
            return FALSE;
        }
    }
    if (!uuid) {
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                    "Placement has no resource provider named '%s' (Nova makes it when [pci] report_in_placement is "
                    "on and nova-compute has reported the device)", name);
        return FALSE;
    }
    *ret_uuid = g_strdup(uuid);
    return TRUE;
}

static gboolean
av_inventory_int(json_t *root, const char *key, gint64 *ret)
{
    json_t *v = json_object_get(root, key);

    if (!json_is_integer(v))
        return FALSE;
    *ret = json_integer_value(v);
    return TRUE;
}

/* See av-placement.h. */
gboolean
av_placement_get_inventory(AvPlacementClient *client, const char *uuid, const char *rc, AvInventory *ret,
                           GError **error)
{
    g_autofree char *path = g_strdup_printf("/resource_providers/%s/inventories/%s", uuid, rc);
    g_autofree char *body = NULL;
    g_autoptr(json_t) root = NULL;
    AvInventory inv = { 0 };
    long status = 0;
    json_t *ratio;

    if (!av_placement_call(client, "GET", path, NULL, &status, &body, error))
        return FALSE;
    if (status == 404) {
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                    "resource provider %s has no inventory of %s in Placement (yet)", uuid, rc);
        return FALSE;
    }
    if (status != 200)
        return av_placement_fail(error, status, body, "GET", path);
    root = json_loads(body, 0, NULL);
    ratio = json_object_get(root, "allocation_ratio");
    if (!av_inventory_int(root, "resource_provider_generation", &inv.generation) ||
        !av_inventory_int(root, "total", &inv.total) || !av_inventory_int(root, "reserved", &inv.reserved) ||
        !av_inventory_int(root, "min_unit", &inv.min_unit) || !av_inventory_int(root, "max_unit", &inv.max_unit) ||
        !av_inventory_int(root, "step_size", &inv.step_size) || !json_is_number(ratio)) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "Placement's answer to GET %s lacks a field of the inventory",
                    path);
        return FALSE;
    }
    inv.allocation_ratio = json_number_value(ratio);
    *ret = inv;
    return TRUE;
}

/* See av-placement.h. */
gboolean
av_placement_put_inventory(AvPlacementClient *client, const char *uuid, const char *rc, const AvInventory *inv,
                           GError **error)
{
    g_autofree char *path = g_strdup_printf("/resource_providers/%s/inventories/%s", uuid, rc);
    g_autofree char *body = NULL;
    g_autofree char *reply = NULL;
    g_autoptr(json_t) doc = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:f}",
                                      "resource_provider_generation", (json_int_t)inv->generation,
                                      "total", (json_int_t)inv->total, "reserved", (json_int_t)inv->reserved,
                                      "min_unit", (json_int_t)inv->min_unit, "max_unit", (json_int_t)inv->max_unit,
                                      "step_size", (json_int_t)inv->step_size,
                                      "allocation_ratio", inv->allocation_ratio);
    long status = 0;

    body = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    if (!av_placement_call(client, "PUT", path, body, &status, &reply, error))
        return FALSE;
    if (status != 200)
        return av_placement_fail(error, status, reply, "PUT", path);
    return TRUE;
}

/* See av-placement.h. */
gboolean
av_placement_set_reserved(AvPlacementClient *client, const char *rp_name, const char *rc, gint64 want,
                          AvInventory *ret_inv, gboolean *ret_put, GError **error)
{
    g_autofree char *uuid = NULL;
    gboolean put = FALSE;
    AvInventory inv;

    if (!av_placement_find_provider(client, rp_name, &uuid, error))
        return FALSE;
    for (int attempt = 0;; attempt++) {
        g_autoptr(GError) local = NULL;
        gint64 value;

        if (!av_placement_get_inventory(client, uuid, rc, &inv, error)) {
            g_prefix_error(error, "%s: ", rp_name);
            return FALSE;
        }
        value = want < 0 ? inv.total : MIN(want, inv.total);
        if (inv.reserved == value)
            break;
        inv.reserved = value;
        if (av_placement_put_inventory(client, uuid, rc, &inv, &local)) {
            inv.generation++;
            put = TRUE;
            break;
        }
        if (g_error_matches(local, AV_ERROR, AV_ERROR_LOCKED) && attempt < AV_PLACEMENT_CONFLICT_RETRIES) {
            /* Another writer: a short pause, growing, within the run. */
            gint64 pause_ms = (gint64)AV_PLACEMENT_CONFLICT_PAUSE_MS << attempt;

            if (pause_ms >= av_placement_left_ms(client)) {
                g_clear_error(&local);
                g_set_error(&local, AV_ERROR, AV_ERROR_IO, AV_PLACEMENT_NO_TIME);
                av_placement_break(client, &local);
                g_propagate_prefixed_error(error, g_steal_pointer(&local), "%s: ", rp_name);
                return FALSE;
            }
            g_usleep((gulong)pause_ms * 1000);
            continue;
        }
        if (!g_error_matches(local, AV_ERROR, AV_ERROR_LOCKED) || attempt >= AV_PLACEMENT_CONFLICT_RETRIES) {
            g_propagate_prefixed_error(error, g_steal_pointer(&local), "%s: ", rp_name);
            if (attempt >= AV_PLACEMENT_CONFLICT_RETRIES)
                g_prefix_error(error, "still a generation conflict after %d tries: ", attempt + 1);
            return FALSE;
        }
    }
    if (ret_inv)
        *ret_inv = inv;
    if (ret_put)
        *ret_put = put;
    return TRUE;
}

/* See av-placement.h. */
char *
av_placement_client_version(void)
{
    const curl_version_info_data *info = curl_version_info(CURLVERSION_NOW);

    return g_strdup_printf("built in (libcurl %s)", info && info->version ? info->version : "of unknown version");
}
