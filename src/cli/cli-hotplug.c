/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt attach and detach: the libvirt calls that change a domain
 * (AvHotplugOps, cli-hotplug.h), and what attach and detach share: the
 * connection, the running domain and its XML.
 *
 * libvirt's test driver (Debian 12, libvirt 9.0) implements neither
 * virDomainAttachDeviceFlags nor the DEVICE_REMOVED event, so the libvirt
 * calls that change a domain go through a small table of operations
 * (AvHotplugOps, cli-hotplug.h, as AvKernelOps for the kernel): the real one
 * calls libvirt; a fake one, in the test builds only
 * (tests/doubles/av-hotplug-fake.c), keeps the hot-plugged hostdevs in files
 * and adds them to the domain's XML. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "cli.h"
#include "cli-hotplug.h"
#include "domain/av-domain.h"
#include "util/av-error.h"
#include "util/av-libvirt-casts.h"
#include "util/av-json.h"
#include "util/av-names.h"
#include "vfio/av-hold.h"
#include "vfio/av-kernel.h"
#include "vfio/av-vfio.h"
#include "vfio/av-vgpu.h"

/* --- the libvirt calls that change a domain ------------------------------------------- */

static char *
av_hotplug_real_xml(virDomain *dom, gboolean inactive, GError **error)
{
    char *xml = virDomainGetXMLDesc(dom, inactive ? VIR_DOMAIN_XML_INACTIVE : 0);

    if (!xml)
        av_cli_virt_error(error, inactive ? "cannot read the domain's persistent XML"
                                          : "cannot read the domain's live XML");
    return xml;
}

static gboolean
av_hotplug_real_attach(virDomain *dom, const char *xml, unsigned int flags, GError **error)
{
    if (virDomainAttachDeviceFlags(dom, xml, flags) < 0)
        return av_cli_virt_error(error, "libvirt could not hot-plug the device");
    return TRUE;
}

typedef struct {
    GHashTable *pending;         /* the aliases asked for and not removed yet */
    GHashTable *removed;
} AvDetachWait;

/* VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED (libvirt-domain.h:
 * virConnectDomainEventDeviceRemovedCallback). */
static void
av_hotplug_removed_cb(virConnect *conn, virDomain *dom, const char *alias, void *opaque)
{
    AvDetachWait *w = opaque;

    (void)conn;
    (void)dom;
    if (alias && g_hash_table_remove(w->pending, alias))
        g_hash_table_add(w->removed, g_strdup(alias));
}

static void
av_hotplug_tick(int timer, void *opaque)
{
    (void)timer;
    (void)opaque;
}

static gboolean
av_hotplug_real_detach_live(virConnect *conn, virDomain *dom, const GPtrArray *aliases, int timeout_ms,
                            GHashTable *removed, GError **error)
{
    g_autoptr(GHashTable) pending = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    AvDetachWait w = { pending, removed };
    gint64 deadline = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    gboolean ok = TRUE;
    int id, timer;

    for (guint i = 0; i < aliases->len; i++)
        g_hash_table_add(pending, g_strdup(g_ptr_array_index(aliases, i)));
    /* Registered before the first request, so that no event is missed
     * (the event loop was registered before the connection was opened). */
    AV_LIBVIRT_CALLBACK_CASTS_BEGIN
    id = virConnectDomainEventRegisterAny(conn, dom, VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED,
                                          VIR_DOMAIN_EVENT_CALLBACK(av_hotplug_removed_cb), &w, NULL);
    AV_LIBVIRT_CALLBACK_CASTS_END
    if (id < 0)
        return av_cli_virt_error(error, "cannot listen to libvirt's device-removed events");
    /* The loop wakes up at least every 100 ms to look at the clock. */
    timer = virEventAddTimeout(100, av_hotplug_tick, NULL, NULL);
    if (timer < 0) {
        virConnectDomainEventDeregisterAny(conn, id);
        return av_cli_virt_error(error, "cannot bound the wait for libvirt's device-removed events");
    }
    for (guint i = 0; i < aliases->len && ok; i++) {
        const char *alias = g_ptr_array_index(aliases, i);

        if (virDomainDetachDeviceAlias(dom, alias, VIR_DOMAIN_AFFECT_LIVE) < 0) {
            g_autofree char *what = g_strdup_printf("libvirt refused to unplug '%s'", alias);

            ok = av_cli_virt_error(error, what);
        }
    }
    while (g_hash_table_size(pending) > 0 && g_get_monotonic_time() < deadline)
        if (virEventRunDefaultImpl() < 0)
            break;
    virEventRemoveTimeout(timer);
    virConnectDomainEventDeregisterAny(conn, id);
    return ok;
}

static gboolean
av_hotplug_real_detach_config(virDomain *dom, const char *xml, GError **error)
{
    if (virDomainDetachDeviceFlags(dom, xml, VIR_DOMAIN_AFFECT_CONFIG) < 0)
        return av_cli_virt_error(error, "libvirt could not remove the device from the persistent definition");
    return TRUE;
}

const AvHotplugOps av_hotplug_ops_real = {
    av_hotplug_real_xml,
    av_hotplug_real_attach,
    av_hotplug_real_detach_live,
    av_hotplug_real_detach_config,
};

/* The test builds' fake table (tests/doubles/av-hotplug-fake.c), or NULL. */
static const AvHotplugOps *av_hotplug_ops_double;

/* See cli-hotplug.h. */
void
av_hotplug_ops_set_double(const AvHotplugOps *ops)
{
    av_hotplug_ops_double = ops;
}

/* The double on a fake root when the test builds registered one; else
 * libvirt. */
const AvHotplugOps *
av_hotplug_ops_for(const AvRoot *root)
{
    if (!av_root_is_host(root) && av_hotplug_ops_double)
        return av_hotplug_ops_double;
    return &av_hotplug_ops_real;
}

/* --- what attach and detach share ------------------------------------------------------ */

/* The connection of attach and detach: libvirt's default event loop is
 * registered first, as DEVICE_REMOVED events reach only a loop registered
 * before the connection is opened (libvirt-event.h,
 * virEventRegisterDefaultImpl); an attach that rolls back waits for them
 * too.  Caller closes. */
virConnect *
av_attach_connect(const AvCli *cli, GError **error)
{
    if (virEventRegisterDefaultImpl() < 0) {
        av_cli_virt_error(error, "cannot start libvirt's event loop");
        return NULL;
    }
    return av_cli_connect(cli, error);
}

/* The running domain @name: looked up, refused with one line when it is not
 * running (nothing to hot-plug into), its UUID in @ret_uuid. */
virDomain *
av_attach_running(virConnect *conn, const char *name, char *ret_uuid, GError **error)
{
    g_autoptr(virDomain) dom = av_cli_lookup(conn, name, error);

    if (!dom)
        return NULL;
    if (virDomainIsActive(dom) != 1) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "domain '%s' is not running; attach and detach act on running domains (for a stopped one, "
                    "put an av:request in its metadata and 'accelvirt define' it)", name);
        return NULL;
    }
    if (virDomainGetUUIDString(dom, ret_uuid) < 0) {
        av_cli_virt_error(error, "cannot read the domain's UUID");
        return NULL;
    }
    return g_steal_pointer(&dom);
}

/* The live (or @inactive) XML of @dom, parsed.  Caller frees. */
AvDomain *
av_attach_parse(const AvHotplugOps *ops, virDomain *dom, gboolean inactive, GError **error)
{
    g_autofree char *xml = ops->xml(dom, inactive, error);

    return xml ? av_domain_parse(xml, strlen(xml), error) : NULL;
}
