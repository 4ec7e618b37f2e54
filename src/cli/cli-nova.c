/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt nova config: what nova.conf needs for the host's managed
 * devices, and a provider config for what it cannot say.  The
 * building and checking are in src/nova/av-nova.c; here only the options,
 * the YAML writer (libyaml, the CLI's alone) and the output. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <yaml.h>

#include "cli.h"
#include "nova/av-nova.h"
#include "nova/av-placement-sync.h"
#include "util/av-error.h"
#include "util/av-file.h"
#include "util/av-json.h"

static int
av_yaml_write(void *data, unsigned char *buffer, size_t size)
{
    g_string_append_len((GString *)data, (const char *)buffer, (gssize)size);
    return 1;
}

static gboolean
av_yaml_scalar(yaml_emitter_t *em, const char *text, yaml_scalar_style_t style)
{
    yaml_event_t ev;

    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text, (int)strlen(text), 1, 1, style))
        return FALSE;
    return yaml_emitter_emit(em, &ev) != 0;
}

/* Emits @v as YAML: objects as block mappings with plain keys, arrays as
 * block sequences, strings single-quoted (so that '1.0' stays a string, as
 * provider_config.py's schema_version must be), numbers and booleans
 * plain. */
static gboolean
av_yaml_value(yaml_emitter_t *em, json_t *v)
{
    yaml_event_t ev;

    if (json_is_object(v)) {
        const char *key;
        json_t *member;

        if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE) ||
            !yaml_emitter_emit(em, &ev))
            return FALSE;
        json_object_foreach(v, key, member) {
            if (!av_yaml_scalar(em, key, YAML_PLAIN_SCALAR_STYLE) || !av_yaml_value(em, member))
                return FALSE;
        }
        return yaml_mapping_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev);
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *item;

        if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE) ||
            !yaml_emitter_emit(em, &ev))
            return FALSE;
        json_array_foreach(v, i, item) {
            if (!av_yaml_value(em, item))
                return FALSE;
        }
        return yaml_sequence_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev);
    }
    if (json_is_string(v))
        return av_yaml_scalar(em, json_string_value(v), YAML_SINGLE_QUOTED_SCALAR_STYLE);
    if (json_is_integer(v)) {
        g_autofree char *s = g_strdup_printf("%" JSON_INTEGER_FORMAT, json_integer_value(v));

        return av_yaml_scalar(em, s, YAML_PLAIN_SCALAR_STYLE);
    }
    if (json_is_boolean(v))
        return av_yaml_scalar(em, json_is_true(v) ? "true" : "false", YAML_PLAIN_SCALAR_STYLE);
    return av_yaml_scalar(em, "null", YAML_PLAIN_SCALAR_STYLE);
}

/* @doc as one YAML document after the comment @comment ("# ..." lines),
 * into @out. */
static gboolean
av_yaml_document(GString *out, const char *comment, json_t *doc, GError **error)
{
    yaml_emitter_t em;
    yaml_event_t ev;
    gboolean ok;

    g_string_append(out, comment);
    if (!yaml_emitter_initialize(&em)) {
        g_set_error_literal(error, AV_ERROR, AV_ERROR_FAILED, "cannot start the YAML emitter");
        return FALSE;
    }
    yaml_emitter_set_output(&em, av_yaml_write, out);
    yaml_emitter_set_unicode(&em, 1);
    ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) && yaml_emitter_emit(&em, &ev) &&
         yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) && yaml_emitter_emit(&em, &ev) &&
         av_yaml_value(&em, doc) &&
         yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(&em, &ev) &&
         yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(&em, &ev) && yaml_emitter_flush(&em);
    if (!ok)
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot write the provider config as YAML: %s",
                    em.problem ? em.problem : "libyaml failed");
    yaml_emitter_delete(&em);
    return ok;
}

static int
av_nova_config(AvCli *cli, const char *hostname, const char *provider_config)
{
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvNovaConfig) config = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(GString) yaml = NULL;
    g_autofree char *note = NULL;
    g_autofree char *name = NULL;

    if (!av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);
    if (!hostname && policy->nova && policy->nova->hypervisor_hostname)
        hostname = policy->nova->hypervisor_hostname;
    if (!hostname) {
        /* What libvirt's virConnectGetHostname() gives Nova as the compute
         * node's hypervisor_hostname (nova/virt/libvirt/host.py:1130-1139),
         * as the Placement sync names the providers. */
        name = av_placement_default_hostname();
        if (!name)
            return av_cli_usage_error("cannot read this host's name: give '--host NAME'");
        hostname = name;
    }
    host = av_host_scan(root, &err);
    if (!host)
        return av_cli_fail(err);
    config = av_nova_config_build(policy, host, hostname, &err);
    if (!config)
        return av_cli_fail(err);

    if (provider_config) {
        g_autoptr(json_t) doc = av_nova_provider_config_json(config);
        g_autofree char *comment = g_strdup_printf(
            "# accelvirt nova config: the provider config of host %s (nova-compute reads every *.yaml of\n"
            "# [compute] provider_config_location, default /etc/nova/provider_config/, at its start)\n",
            hostname);

        yaml = g_string_new(NULL);
        if (!av_yaml_document(yaml, comment, doc, &err))
            return av_cli_fail(err);
        if (g_str_equal(provider_config, "-")) {
            fwrite(yaml->str, 1, yaml->len, stdout);
            return AV_EXIT_OK;
        }
        if (!av_file_write_atomic_safe_dir(provider_config, yaml->str, yaml->len, 0644, &err))
            return av_cli_fail(err);
        note = g_strdup_printf("the provider config is in %s: put it in [compute] provider_config_location "
                               "(default /etc/nova/provider_config/).", provider_config);
    }

    if (cli->json) {
        json_t *o = av_nova_config_to_json(config);

        json_object_set_new(o, "provider_config_file", av_json_string_or_null(provider_config));
        av_cli_print_json(o);
    } else {
        g_autofree char *conf = av_nova_config_to_conf(config, cli->policy_dir, note);

        fputs(conf, stdout);
    }
    return AV_EXIT_OK;
}

int
av_cli_cmd_nova(AvCli *cli, int argc, char **argv)
{
    g_autofree char *hostname = NULL;
    g_autofree char *provider_config = NULL;
    const GOptionEntry entries[] = {
        { "host", 0, 0, G_OPTION_ARG_STRING, &hostname,
          "The compute node's hypervisor hostname, for provider names (default: this host's name)", "NAME" },
        { "provider-config", 0, 0, G_OPTION_ARG_FILENAME, &provider_config,
          "Also write Nova's provider config YAML to FILE (atomically, mode 0644); '-': print only it", "FILE" },
        { NULL },
    };

    if (!av_cli_parse(cli, "nova", "config",
                      "Print the nova.conf lines ([pci] device_spec and alias, [devices] mdev types) for the "
                      "host's managed devices, checked against Nova's rules.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc < 2 || !g_str_equal(argv[1], "config"))
        return av_cli_usage_error("'nova' needs 'config'");
    if (argc > 2)
        return av_cli_usage_error("'nova config' takes no arguments, got '%s'", argv[2]);
    if (hostname && (!*hostname || strlen(hostname) > 150 || strpbrk(hostname, " \t\r\n'\"")))
        return av_cli_usage_error("'--host' needs a host name (1 to 150 characters, no blanks or quotes)");
    if (provider_config && !*provider_config)
        return av_cli_usage_error("'--provider-config' needs a file name, or '-'");
    if (provider_config && g_str_equal(provider_config, "-") && cli->json)
        return av_cli_usage_error("'--provider-config -' prints the YAML alone; with --json, name a file");
    return av_nova_config(cli, hostname, provider_config);
}
