/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt test doubles: the fake hot-plug table of `accelvirt attach` and
 * `detach` (src/cli/cli-hotplug.h), moved out of src/cli/cli-attach.c so that
 * the installed accelvirt holds no part of it.  libvirt's test driver
 * (Debian 12, libvirt 9.0) implements neither virDomainAttachDeviceFlags nor
 * the DEVICE_REMOVED event; this table stands in for them, on the domain's
 * XML that the real table reads from libvirt.  av-doubles.c registers it
 * when $ACCELVIRT_TEST_HOTPLUG names its directory. */
#include "config.h"

#include <string.h>

#include <glib/gstdio.h>
#include <libvirt/libvirt.h>

#include "av-doubles.h"
#include "cli/cli-hotplug.h"
#include "util/av-error.h"

/* The fake, for the tests only: $ACCELVIRT_TEST_HOTPLUG/UUID/ALIAS.live
 * (and ALIAS.config with VIR_DOMAIN_AFFECT_CONFIG) hold the hostdevs
 * "hot-plugged", added before </devices> of the domain's XML.  Files in
 * $ACCELVIRT_TEST_HOTPLUG steer it: "fail-attach" makes the attaches fail
 * (all of them, or once it holds N, after N hostdevs are in), "stuck"
 * makes a guest that never lets a device go, "lose-event" unplugs without
 * the event. */
static char *
av_hotplug_fake_path(virDomain *dom, const char *name)
{
    char uuid[VIR_UUID_STRING_BUFLEN] = "";

    if (virDomainGetUUIDString(dom, uuid) < 0)
        return NULL;
    return g_build_filename(g_getenv("ACCELVIRT_TEST_HOTPLUG"), uuid, name, NULL);
}

static gboolean
av_hotplug_fake_has(const char *flag)
{
    g_autofree char *path = g_build_filename(g_getenv("ACCELVIRT_TEST_HOTPLUG"), flag, NULL);

    return g_file_test(path, G_FILE_TEST_EXISTS);
}

/* Whether the fake refuses the next hot-plug into @dom: "fail-attach"
 * exists, and is empty or holds a count N of hostdevs that go in first. */
static gboolean
av_hotplug_fake_fails(virDomain *dom)
{
    g_autofree char *path = g_build_filename(g_getenv("ACCELVIRT_TEST_HOTPLUG"), "fail-attach", NULL);
    g_autofree char *dir = av_hotplug_fake_path(dom, "");
    g_autofree char *text = NULL;
    g_autoptr(GDir) d = NULL;
    guint64 after = 0;
    guint live = 0;
    const char *name;

    if (!g_file_get_contents(path, &text, NULL, NULL))
        return FALSE;
    g_strstrip(text);
    if (!*text || !g_ascii_string_to_unsigned(text, 10, 0, 64, &after, NULL) || !dir)
        return TRUE;
    d = g_dir_open(dir, 0, NULL);
    while (d && (name = g_dir_read_name(d)))
        live += g_str_has_suffix(name, ".live");
    return live >= after;
}

static char *
av_hotplug_fake_xml(virDomain *dom, gboolean inactive, GError **error)
{
    g_autofree char *xml = av_hotplug_ops_real.xml(dom, inactive, error);
    g_autofree char *dir = av_hotplug_fake_path(dom, "");
    g_autoptr(GString) added = g_string_new(NULL);
    g_autoptr(GDir) d = NULL;
    const char *name;
    char *end;

    if (!xml || !dir)
        return NULL;
    d = g_dir_open(dir, 0, NULL);
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        g_autofree char *text = NULL;

        if (g_str_has_suffix(name, inactive ? ".config" : ".live") && g_file_get_contents(path, &text, NULL, NULL))
            g_string_append(added, text);
    }
    end = strstr(xml, "</devices>");
    if (!end)
        return g_steal_pointer(&xml);
    return g_strdup_printf("%.*s%s%s", (int)(end - xml), xml, added->str, end);
}

/* The alias of a hostdev XML written by av_attach_hostdev_xml(). */
static char *
av_hotplug_fake_alias(const char *xml)
{
    const char *a = strstr(xml, "<alias name='");
    const char *e = a ? strchr(a + 13, '\'') : NULL;

    return e ? g_strndup(a + 13, e - (a + 13)) : NULL;
}

static gboolean
av_hotplug_fake_attach(virDomain *dom, const char *xml, unsigned int flags, GError **error)
{
    g_autofree char *alias = av_hotplug_fake_alias(xml);
    g_autofree char *dir = av_hotplug_fake_path(dom, "");
    g_autofree char *base = NULL;
    g_autofree char *live = NULL;
    g_autofree char *config = NULL;

    if (av_hotplug_fake_fails(dom) || !alias) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "libvirt could not hot-plug the device: the fake hot-plug "
                    "was told to fail");
        return FALSE;
    }
    if (!dir || g_mkdir_with_parents(dir, 0700) < 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_IO, "the fake hot-plug cannot write its state");
        return FALSE;
    }
    base = g_build_filename(dir, alias, NULL);
    live = g_strdup_printf("%s.live", base);
    config = g_strdup_printf("%s.config", base);
    if ((flags & VIR_DOMAIN_AFFECT_CONFIG) && !g_file_set_contents(config, xml, -1, error))
        return FALSE;
    return g_file_set_contents(live, xml, -1, error);
}

static gboolean
av_hotplug_fake_detach_live(virConnect *conn, virDomain *dom, const GPtrArray *aliases, int timeout_ms,
                            GHashTable *removed, GError **error)
{
    (void)conn;
    (void)timeout_ms;
    (void)error;
    if (av_hotplug_fake_has("stuck"))
        return TRUE;
    for (guint i = 0; i < aliases->len; i++) {
        const char *alias = g_ptr_array_index(aliases, i);
        g_autofree char *base = av_hotplug_fake_path(dom, alias);
        g_autofree char *live = g_strdup_printf("%s.live", base);

        g_unlink(live);
        if (!av_hotplug_fake_has("lose-event"))
            g_hash_table_add(removed, g_strdup(alias));
    }
    return TRUE;
}

static gboolean
av_hotplug_fake_detach_config(virDomain *dom, const char *xml, GError **error)
{
    g_autofree char *dir = av_hotplug_fake_path(dom, "");
    g_autoptr(GDir) d = dir ? g_dir_open(dir, 0, NULL) : NULL;
    const char *name;

    const char *src = strstr(xml, "<source>");
    const char *src_end = src ? strstr(src, "</source>") : NULL;
    g_autofree char *source = src && src_end ? g_strndup(src, src_end - src) : NULL;

    (void)error;
    /* libvirt finds a hostdev of the persistent definition by its source. */
    while (source && d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        g_autofree char *text = NULL;

        if (g_str_has_suffix(name, ".config") && g_file_get_contents(path, &text, NULL, NULL) &&
            strstr(text, source))
            g_unlink(path);
    }
    return TRUE;
}

/* The table (av_hotplug_fake_register() below registers it). */
extern const AvHotplugOps av_hotplug_ops_fake;
const AvHotplugOps av_hotplug_ops_fake = {
    av_hotplug_fake_xml,
    av_hotplug_fake_attach,
    av_hotplug_fake_detach_live,
    av_hotplug_fake_detach_config,
};


/* Before main(): with $ACCELVIRT_TEST_HOTPLUG naming the fake's directory,
 * the test build of accelvirt hot-plugs through it on a fake root
 * (cli-attach.c's av_hotplug_ops_for()); without, through libvirt. */
static void __attribute__((constructor))
av_hotplug_fake_register(void)
{
    const char *dir = g_getenv("ACCELVIRT_TEST_HOTPLUG");

    if (dir && *dir)
        av_hotplug_ops_set_double(&av_hotplug_ops_fake);
}
