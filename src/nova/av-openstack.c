/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: clouds.yaml and the Keystone v3 token request (see
 * av-openstack.h).  Sources: openstacksdk openstack/config/loader.py (the
 * search path, OS_CLIENT_CONFIG_FILE, secure.yaml merged over clouds.yaml,
 * OS_CLOUD), openstack/config/defaults.json (auth_type "password",
 * interface "public"), keystone's api-ref (the token request bodies). */
#include "config.h"

#include "nova/av-openstack.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "util/av-error.h"
#include "util/av-file.h"
#include "util/av-json.h"

/* The largest clouds or secure file read. */
#define AV_OS_FILE_MAX (1024 * 1024)

void
av_os_cloud_free(AvOsCloud *cloud)
{
    if (!cloud)
        return;
    g_free(cloud->name);
    g_free(cloud->file);
    g_free(cloud->secure_file);
    json_decref(cloud->auth);
    g_free(cloud->region_name);
    g_free(cloud->interface);
    g_free(cloud->endpoint_override);
    g_free(cloud->cacert);
    g_free(cloud);
}

/* The directories searched, in order (no current directory: see
 * av-openstack.h).  A new vector (g_strfreev()). */
static char **
av_os_config_dirs(void)
{
    const char *home = g_getenv("HOME");
    GPtrArray *dirs = g_ptr_array_new();

    if (!home || !*home)
        home = g_get_home_dir();
    g_ptr_array_add(dirs, g_build_filename(home, ".config", "openstack", NULL));
    g_ptr_array_add(dirs, g_strdup("/etc/xdg/openstack"));
    g_ptr_array_add(dirs, g_strdup("/etc/openstack"));
    g_ptr_array_add(dirs, NULL);
    return (char **)g_ptr_array_free(dirs, FALSE);
}

/* The first of @stem.yaml, .yml, .json in @dir that exists, or NULL. */
static char *
av_os_find_in(const char *dir, const char *stem)
{
    static const char *const exts[] = { "yaml", "yml", "json" };

    for (gsize i = 0; i < G_N_ELEMENTS(exts); i++) {
        g_autofree char *name = g_strdup_printf("%s.%s", stem, exts[i]);
        g_autofree char *path = g_build_filename(dir, name, NULL);

        if (g_file_test(path, G_FILE_TEST_EXISTS))
            return g_steal_pointer(&path);
    }
    return NULL;
}

/* See av-openstack.h. */
char *
av_os_clouds_file_find(GError **error)
{
    const char *env = g_getenv("OS_CLIENT_CONFIG_FILE");
    g_auto(GStrv) dirs = av_os_config_dirs();
    g_autofree char *list = NULL;

    if (env && *env && g_file_test(env, G_FILE_TEST_EXISTS))
        return g_strdup(env);
    for (guint i = 0; dirs[i]; i++) {
        char *found = av_os_find_in(dirs[i], "clouds");

        if (found)
            return found;
    }
    list = g_strjoinv(", ", dirs);
    g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                "no clouds.yaml found (looked at %s%s%s, then clouds.yaml in %s); write the cloud's credentials "
                "there, as the openstack client reads them", env && *env ? "$OS_CLIENT_CONFIG_FILE " : "",
                env && *env ? env : "", env && *env ? "," : "", list);
    return NULL;
}

/* ---- YAML to JSON ---- */

static json_t *
av_os_yaml_node(yaml_document_t *doc, yaml_node_t *node, int depth)
{
    json_t *out;

    if (!node || depth > 64)
        return NULL;
    switch (node->type) {
    case YAML_SCALAR_NODE:
        return json_stringn((const char *)node->data.scalar.value, node->data.scalar.length);
    case YAML_SEQUENCE_NODE:
        out = json_array();
        for (yaml_node_item_t *item = node->data.sequence.items.start; item < node->data.sequence.items.top;
             item++) {
            json_t *v = av_os_yaml_node(doc, yaml_document_get_node(doc, *item), depth + 1);

            if (!v) {
                json_decref(out);
                return NULL;
            }
            json_array_append_new(out, v);
        }
        return out;
    case YAML_MAPPING_NODE:
        out = json_object();
        for (yaml_node_pair_t *pair = node->data.mapping.pairs.start; pair < node->data.mapping.pairs.top; pair++) {
            yaml_node_t *key = yaml_document_get_node(doc, pair->key);
            json_t *v;

            if (!key || key->type != YAML_SCALAR_NODE) {
                json_decref(out);
                return NULL;
            }
            v = av_os_yaml_node(doc, yaml_document_get_node(doc, pair->value), depth + 1);
            if (!v) {
                json_decref(out);
                return NULL;
            }
            {
                g_autofree char *k = g_strndup((const char *)key->data.scalar.value, key->data.scalar.length);

                json_object_set_new(out, k, v);
            }
        }
        return out;
    default:
        return NULL;
    }
}

/* The most YAML nodes (scalars, sequences, mappings) a file may hold. */
#define AV_OS_YAML_NODES_MAX 10000

/* Refuses what the document loader would expand: any alias (a few bytes
 * of nested aliases are gigabytes once each reference is copied), and more
 * than AV_OS_YAML_NODES_MAX nodes.  TRUE when @data is free of both (or
 * not YAML: the loader says so then). */
static gboolean
av_os_yaml_prescan(const char *path, const char *data, gsize len, GError **error)
{
    yaml_parser_t parser;
    yaml_event_t event;
    guint nodes = 0;
    gboolean ok = TRUE;

    if (!yaml_parser_initialize(&parser))
        return TRUE;
    yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
    for (;;) {
        yaml_event_type_t type;

        if (!yaml_parser_parse(&parser, &event))
            break;
        type = event.type;
        yaml_event_delete(&event);
        if (type == YAML_ALIAS_EVENT) {
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "%s: aliases are not supported", path);
            ok = FALSE;
            break;
        }
        if ((type == YAML_SCALAR_EVENT || type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT) &&
            ++nodes > AV_OS_YAML_NODES_MAX) {
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "%s: more than %d YAML nodes", path,
                        AV_OS_YAML_NODES_MAX);
            ok = FALSE;
            break;
        }
        if (type == YAML_STREAM_END_EVENT)
            break;
    }
    yaml_parser_delete(&parser);
    return ok;
}

/* See av-openstack.h. */
json_t *
av_os_yaml_load(const char *path, GError **error)
{
    g_autofree char *data = NULL;
    g_autoptr(GError) local = NULL;
    struct stat st;
    yaml_parser_t parser;
    yaml_document_t doc;
    json_t *out;
    gsize len;

    if (!av_file_check_trusted(path, "OpenStack client configuration", &st, error))
        return NULL;
    if (!S_ISREG(st.st_mode) || st.st_size > AV_OS_FILE_MAX) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "'%s' is not a regular file of at most %d bytes", path,
                    AV_OS_FILE_MAX);
        return NULL;
    }
    if (!g_file_get_contents(path, &data, &len, &local)) {
        g_set_error(error, AV_ERROR, AV_ERROR_IO, "cannot read '%s': %s", path, local->message);
        return NULL;
    }
    if (!av_os_yaml_prescan(path, data, len, error))
        return NULL;
    if (!yaml_parser_initialize(&parser)) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot start the YAML parser for '%s'", path);
        return NULL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
    if (!yaml_parser_load(&parser, &doc)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "%s:%zu:%zu: invalid YAML: %s", path,
                    parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                    parser.problem ? parser.problem : "unknown error");
        yaml_parser_delete(&parser);
        return NULL;
    }
    out = yaml_document_get_root_node(&doc) ? av_os_yaml_node(&doc, yaml_document_get_root_node(&doc), 0)
                                            : json_object();
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (!out || !json_is_object(out)) {
        json_decref(out);
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "'%s' must hold a mapping such as \"clouds: {NAME: {auth: {...}}}\"", path);
        return NULL;
    }
    return out;
}

/* Merges @over into @base, objects key by key, anything else replaced
 * (openstacksdk's merge_clouds). */
static void
av_os_merge(json_t *base, json_t *over)
{
    const char *key;
    json_t *v;

    json_object_foreach(over, key, v) {
        json_t *b = json_object_get(base, key);

        if (json_is_object(b) && json_is_object(v))
            av_os_merge(b, v);
        else
            json_object_set(base, key, v);
    }
}

static char *
av_os_get(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);

    return json_is_string(v) && *json_string_value(v) ? g_strdup(json_string_value(v)) : NULL;
}

static const char *
av_os_auth(const AvOsCloud *cloud, const char *key)
{
    json_t *v = json_object_get(cloud->auth, key);

    return json_is_string(v) && *json_string_value(v) ? json_string_value(v) : NULL;
}

/* FALSE for the YAML 1.1 spellings of false. */
static gboolean
av_os_truth(const char *s)
{
    static const char *const no[] = { "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "0", NULL };

    return !g_strv_contains(no, s);
}

/* Checks that @cloud's "auth" has what its auth_type needs. */
static gboolean
av_os_cloud_check(const AvOsCloud *cloud, GError **error)
{
    const char *what = NULL;

    switch (cloud->auth_type) {
    case AV_OS_AUTH_NONE:
        if (!cloud->endpoint_override)
            what = "'placement_endpoint_override' (without Keystone, no catalog says where Placement is)";
        break;
    case AV_OS_AUTH_PASSWORD:
        if (!av_os_auth(cloud, "auth_url"))
            what = "'auth.auth_url'";
        else if (!av_os_auth(cloud, "username") && !av_os_auth(cloud, "user_id"))
            what = "'auth.username' or 'auth.user_id'";
        else if (!av_os_auth(cloud, "password"))
            what = "'auth.password'";
        break;
    case AV_OS_AUTH_APPLICATION_CREDENTIAL:
        if (!av_os_auth(cloud, "auth_url"))
            what = "'auth.auth_url'";
        else if (!av_os_auth(cloud, "application_credential_secret"))
            what = "'auth.application_credential_secret'";
        else if (!av_os_auth(cloud, "application_credential_id") &&
                 !av_os_auth(cloud, "application_credential_name"))
            what = "'auth.application_credential_id' or 'auth.application_credential_name'";
        else if (!av_os_auth(cloud, "application_credential_id") && !av_os_auth(cloud, "username") &&
                 !av_os_auth(cloud, "user_id"))
            what = "'auth.username' or 'auth.user_id' (an application credential named, not given by id)";
        break;
    }
    if (!what)
        return TRUE;
    g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "cloud '%s' of '%s' lacks %s", cloud->name, cloud->file,
                what);
    return FALSE;
}

/* See av-openstack.h. */
AvOsCloud *
av_os_cloud_load(const char *name, GError **error)
{
    g_autoptr(AvOsCloud) cloud = g_new0(AvOsCloud, 1);
    g_autofree char *secure = NULL;
    g_autofree char *dir = NULL;
    g_autofree char *auth_type = NULL;
    g_autofree char *verify = NULL;
    g_autoptr(json_t) config = NULL;
    const char *env_secure = g_getenv("OS_CLIENT_SECURE_FILE");
    json_t *clouds, *entry;

    if (!name || !*name)
        name = g_getenv("OS_CLOUD");
    cloud->file = av_os_clouds_file_find(error);
    if (!cloud->file)
        return NULL;
    config = av_os_yaml_load(cloud->file, error);
    if (!config)
        return NULL;
    dir = g_path_get_dirname(cloud->file);
    if (env_secure && *env_secure && g_file_test(env_secure, G_FILE_TEST_EXISTS))
        secure = g_strdup(env_secure);
    else
        secure = av_os_find_in(dir, "secure");
    if (secure) {
        g_autoptr(json_t) over = av_os_yaml_load(secure, error);

        if (!over)
            return NULL;
        av_os_merge(config, over);
        cloud->secure_file = g_steal_pointer(&secure);
    }
    clouds = json_object_get(config, "clouds");
    if (!json_is_object(clouds)) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "'%s' has no 'clouds' mapping", cloud->file);
        return NULL;
    }
    if (!name || !*name) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "name the cloud of '%s' to use: \"cloud\" in the policy's \"nova\" object, or $OS_CLOUD",
                    cloud->file);
        return NULL;
    }
    entry = json_object_get(clouds, name);
    if (!json_is_object(entry)) {
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND, "no cloud '%s' in '%s'", name, cloud->file);
        return NULL;
    }
    cloud->name = g_strdup(name);
    cloud->auth = json_is_object(json_object_get(entry, "auth")) ? json_deep_copy(json_object_get(entry, "auth"))
                                                                 : json_object();
    auth_type = av_os_get(entry, "auth_type");
    if (!auth_type || g_str_equal(auth_type, "password") || g_str_equal(auth_type, "v3password")) {
        cloud->auth_type = AV_OS_AUTH_PASSWORD;
    } else if (g_str_equal(auth_type, "v3applicationcredential")) {
        cloud->auth_type = AV_OS_AUTH_APPLICATION_CREDENTIAL;
    } else if (g_str_equal(auth_type, "none") || g_str_equal(auth_type, "admin_token")) {
        cloud->auth_type = AV_OS_AUTH_NONE;
    } else {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "cloud '%s' of '%s': auth_type '%s' is not supported; use password, v3applicationcredential, "
                    "or none / admin_token (a Placement without Keystone)", name, cloud->file, auth_type);
        return NULL;
    }
    cloud->region_name = av_os_get(entry, "placement_region_name");
    if (!cloud->region_name)
        cloud->region_name = av_os_get(entry, "region_name");
    cloud->interface = av_os_get(entry, "placement_interface");
    if (!cloud->interface)
        cloud->interface = av_os_get(entry, "interface");
    if (!cloud->interface)
        cloud->interface = g_strdup("public");
    cloud->endpoint_override = av_os_get(entry, "placement_endpoint_override");
    cloud->cacert = av_os_get(entry, "cacert");
    verify = av_os_get(entry, "verify");
    cloud->verify = !verify || av_os_truth(verify);
    if (!av_os_cloud_check(cloud, error))
        return NULL;
    return g_steal_pointer(&cloud);
}

/* See av-openstack.h. */
char *
av_os_token_url(const AvOsCloud *cloud)
{
    g_autofree char *base = g_strdup(av_os_auth(cloud, "auth_url") ? av_os_auth(cloud, "auth_url") : "");
    gsize n = strlen(base);

    while (n > 0 && base[n - 1] == '/')
        base[--n] = '\0';
    if (g_str_has_suffix(base, "/v3"))
        return g_strdup_printf("%s/auth/tokens", base);
    return g_strdup_printf("%s/v3/auth/tokens", base);
}

/* {"id": ID} or {"name": NAME} of @cloud's auth keys @id_key, @name_key;
 * NULL when neither is set. */
static json_t *
av_os_ref(const AvOsCloud *cloud, const char *id_key, const char *name_key)
{
    if (av_os_auth(cloud, id_key))
        return json_pack("{s:s}", "id", av_os_auth(cloud, id_key));
    if (av_os_auth(cloud, name_key))
        return json_pack("{s:s}", "name", av_os_auth(cloud, name_key));
    return NULL;
}

/* The domain of a user or project named by name: its *_domain_id or
 * *_domain_name, else the cloud's domain_id or domain_name, else
 * "Default" (Keystone's default domain). */
static json_t *
av_os_domain(const AvOsCloud *cloud, const char *prefix)
{
    g_autofree char *id_key = g_strdup_printf("%s_domain_id", prefix);
    g_autofree char *name_key = g_strdup_printf("%s_domain_name", prefix);
    json_t *d = av_os_ref(cloud, id_key, name_key);

    if (!d)
        d = av_os_ref(cloud, "domain_id", "domain_name");
    return d ? d : json_pack("{s:s}", "name", "Default");
}

/* A user as Keystone takes it: {"id"} or {"name", "domain"}. */
static json_t *
av_os_user(const AvOsCloud *cloud)
{
    json_t *user = av_os_ref(cloud, "user_id", "username");

    if (user && json_object_get(user, "name"))
        json_object_set_new(user, "domain", av_os_domain(cloud, "user"));
    return user;
}

/* See av-openstack.h. */
json_t *
av_os_token_request(const AvOsCloud *cloud, GError **error)
{
    json_t *identity, *auth;

    switch (cloud->auth_type) {
    case AV_OS_AUTH_PASSWORD: {
        json_t *user = av_os_user(cloud);
        json_t *project = av_os_ref(cloud, "project_id", "project_name");
        json_t *domain = NULL;

        json_object_set_new(user, "password", json_string(av_os_auth(cloud, "password")));
        identity = json_pack("{s:[s], s:{s:o}}", "methods", "password", "password", "user", user);
        auth = json_pack("{s:o}", "identity", identity);
        if (project) {
            if (json_object_get(project, "name"))
                json_object_set_new(project, "domain", av_os_domain(cloud, "project"));
            json_object_set_new(auth, "scope", json_pack("{s:o}", "project", project));
        } else if ((domain = av_os_ref(cloud, "domain_id", "domain_name"))) {
            json_object_set_new(auth, "scope", json_pack("{s:o}", "domain", domain));
        } else if (av_os_auth(cloud, "system_scope")) {
            json_object_set_new(auth, "scope", json_pack("{s:{s:b}}", "system", "all", 1));
        }
        return json_pack("{s:o}", "auth", auth);
    }
    case AV_OS_AUTH_APPLICATION_CREDENTIAL: {
        json_t *cred = av_os_ref(cloud, "application_credential_id", "application_credential_name");

        if (json_object_get(cred, "name"))
            json_object_set_new(cred, "user", av_os_user(cloud));
        json_object_set_new(cred, "secret", json_string(av_os_auth(cloud, "application_credential_secret")));
        identity = json_pack("{s:[s], s:o}", "methods", "application_credential", "application_credential", cred);
        return json_pack("{s:{s:o}}", "auth", "identity", identity);
    }
    case AV_OS_AUTH_NONE:
    default:
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "cloud '%s' uses no Keystone (auth_type none)",
                    cloud->name);
        return NULL;
    }
}

/* See av-openstack.h. */
char *
av_os_url_redact(const char *url)
{
    const char *start;
    const char *end;
    const char *at;

    if (!url)
        return NULL;
    start = strstr(url, "://");
    if (!start)
        return g_strdup(url);
    start += 3;
    end = start + strcspn(start, "/?#");
    at = NULL;
    for (const char *p = start; p < end; p++)
        if (*p == '@')
            at = p;
    if (!at)
        return g_strdup(url);
    return g_strdup_printf("%.*s%s", (int)(start - url), url, at + 1);
}

/* See av-openstack.h. */
gboolean
av_os_url_plain_remote(const char *url)
{
    g_autofree char *clean = av_os_url_redact(url);
    const char *host;
    gsize n;

    if (!clean || g_ascii_strncasecmp(clean, "http://", 7) != 0)
        return FALSE;
    host = clean + 7;
    n = strcspn(host, "/?#");
    if (*host == '[') {
        const char *close = memchr(host, ']', n);

        if (close && close - host == 4 && strncmp(host, "[::1]", 5) == 0)
            return FALSE;
        return TRUE;
    }
    n = strcspn(host, ":/?#");
    if ((n == 9 && g_ascii_strncasecmp(host, "localhost", 9) == 0) || (n == 9 && strncmp(host, "127.0.0.1", 9) == 0))
        return FALSE;
    return TRUE;
}

/* See av-openstack.h. */
char *
av_os_catalog_endpoint(json_t *body, const char *interface, const char *region, GError **error)
{
    json_t *catalog = json_object_get(json_object_get(body, "token"), "catalog");
    size_t i, j;
    json_t *service, *ep;

    json_array_foreach(catalog, i, service) {
        if (g_strcmp0(json_string_value(json_object_get(service, "type")), "placement") != 0)
            continue;
        json_array_foreach(json_object_get(service, "endpoints"), j, ep) {
            const char *url = json_string_value(json_object_get(ep, "url"));
            const char *rid = json_string_value(json_object_get(ep, "region_id"));
            const char *rname = json_string_value(json_object_get(ep, "region"));

            if (!url || g_strcmp0(json_string_value(json_object_get(ep, "interface")), interface) != 0)
                continue;
            if (region && g_strcmp0(rid, region) != 0 && g_strcmp0(rname, region) != 0)
                continue;
            return g_strdup(url);
        }
    }
    g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                "Keystone's catalog has no Placement endpoint of interface '%s'%s%s (set 'interface' or "
                "'region_name' of the cloud, or 'placement_endpoint_override')", interface,
                region ? " in region " : "", region ? region : "");
    return NULL;
}
