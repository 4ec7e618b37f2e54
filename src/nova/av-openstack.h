/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the standard OpenStack client configuration (clouds.yaml,
 * secure.yaml, OS_CLOUD) and the Keystone v3 token request, for the
 * Placement sync.
 *
 * clouds.yaml is looked up as openstacksdk does (openstack/config/loader.py,
 * "the first file found wins"), except in the current directory: accelvirt
 * runs as a root service whose working directory is not the operator's
 * choice.  In order: $OS_CLIENT_CONFIG_FILE, ~/.config/openstack,
 * /etc/xdg/openstack, /etc/openstack (each: clouds.yaml, clouds.yml,
 * clouds.json).  secure.yaml ($OS_CLIENT_SECURE_FILE, else secure.yaml,
 * secure.yml or secure.json beside the clouds file) is merged over it.
 * Both must be trusted (av_file_check_trusted()): they say where
 * credentials go. */
#pragma once

#include <glib.h>
#include <jansson.h>

G_BEGIN_DECLS

typedef enum {
    AV_OS_AUTH_PASSWORD,         /* "password" (the default) or "v3password" */
    AV_OS_AUTH_APPLICATION_CREDENTIAL, /* "v3applicationcredential" */
    AV_OS_AUTH_NONE,             /* "none" or "admin_token": no Keystone (Placement's noauth2) */
} AvOsAuthType;

/* One cloud of clouds.yaml, secure.yaml merged in. */
typedef struct {
    char *name;                  /* the cloud's name */
    char *file;                  /* the clouds file it came from */
    char *secure_file;           /* the secure file merged in, or NULL */
    AvOsAuthType auth_type;
    json_t *auth;                /* the "auth" mapping (scalars as strings); never NULL */
    char *region_name;           /* "placement_region_name", else "region_name", or NULL */
    char *interface;             /* "placement_interface", else "interface", else "public" */
    char *endpoint_override;     /* "placement_endpoint_override", or NULL */
    char *cacert;                /* "cacert", or NULL */
    gboolean verify;             /* "verify", default true */
} AvOsCloud;

void av_os_cloud_free(AvOsCloud *cloud);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvOsCloud, av_os_cloud_free)

/* The clouds file to read: the first of the search path above that exists.
 * NULL with AV_ERROR_NOT_FOUND naming every place looked at.  Caller
 * frees. */
char *av_os_clouds_file_find(GError **error);

/* Reads the YAML file @path (which must be trusted) into JSON: mappings
 * become objects, sequences arrays, every scalar a string.  NULL with
 * @error (AV_ERROR_UNSAFE, AV_ERROR_NOT_FOUND, AV_ERROR_IO, or
 * AV_ERROR_INVALID_INPUT "FILE:LINE:COLUMN: ..." for bad YAML). */
json_t *av_os_yaml_load(const char *path, GError **error);

/* The cloud @name (NULL: $OS_CLOUD; neither: an error that says to name
 * it) of the clouds file found, secure.yaml merged over it, checked:
 * a known auth_type with what it needs.  NULL with @error. */
AvOsCloud *av_os_cloud_load(const char *name, GError **error);

/* The Keystone v3 URL of token requests: auth_url, "/v3" appended unless
 * it ends in it, then "/auth/tokens".  Caller frees. */
char *av_os_token_url(const AvOsCloud *cloud);

/* The body of POST /v3/auth/tokens for @cloud's password or application
 * credential (keystone api-ref).  NULL with AV_ERROR_INVALID_INPUT for
 * auth_type none.  Caller owns the reference. */
json_t *av_os_token_request(const AvOsCloud *cloud, GError **error);

/* @url without a "user:password@" part (for errors and logs).  Caller
 * frees; NULL for NULL. */
char *av_os_url_redact(const char *url);

/* Whether @url is plain http:// to a host other than 127.0.0.1, ::1 or
 * localhost: a token sent there can be read on the way. */
gboolean av_os_url_plain_remote(const char *url);

/* The Placement URL of the token response @body ({"token": {"catalog":
 * [...]}}): the endpoint of type "placement" with @interface and, when
 * @region is not NULL, that region.  NULL with AV_ERROR_NOT_FOUND.  Caller
 * frees. */
char *av_os_catalog_endpoint(json_t *body, const char *interface, const char *region, GError **error);

G_END_DECLS
