/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt attach and detach: the libvirt calls that change a domain, as a
 * table of operations (see cli-attach.c).  The real table calls libvirt; the
 * test builds register a fake one (tests/doubles/av-hotplug-fake.c) through
 * av_hotplug_ops_set_double(), used on a fake root only (util/av-point.h
 * says how the doubles plug in). */
#pragma once

#include <glib.h>
#include <libvirt/libvirt.h>

G_BEGIN_DECLS

typedef struct {
    /* The domain's XML, live or (@inactive) persistent.  Caller frees. */
    char *(*xml)(virDomain *dom, gboolean inactive, GError **error);
    /* virDomainAttachDeviceFlags(@dom, @xml, @flags). */
    gboolean (*attach)(virDomain *dom, const char *xml, unsigned int flags, GError **error);
    /* Asks for each alias of @aliases to be unplugged live and waits, at
     * most @timeout_ms, for DEVICE_REMOVED of each; the aliases whose event
     * came go into @removed (a set).  FALSE with @error when libvirt refused
     * a request (those asked before it stay asked). */
    gboolean (*detach_live)(virConnect *conn, virDomain *dom, const GPtrArray *aliases, int timeout_ms,
                            GHashTable *removed, GError **error);
    /* virDomainDetachDeviceFlags(@dom, @xml, VIR_DOMAIN_AFFECT_CONFIG). */
    gboolean (*detach_config)(virDomain *dom, const char *xml, GError **error);
} AvHotplugOps;

/* libvirt's. */
extern const AvHotplugOps av_hotplug_ops_real;

/* The hook point of the fake table: the test doubles' constructor
 * registers it; production code never calls this.  @ops is borrowed for the
 * life of the process. */
void av_hotplug_ops_set_double(const AvHotplugOps *ops);

G_END_DECLS
