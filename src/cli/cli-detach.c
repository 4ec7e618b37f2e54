/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt detach: accelerators hot-plugged out of running domains.
 *
 * libvirt runs no hook on device hot-unplug either, so the CLI does what
 * the hook's release does, for the devices the pool has in use by the
 * domain only: asks libvirt to unplug each by alias
 * (virDomainDetachDeviceAlias), waits for VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED
 * (bounded), checks the live XML again (the event can race), then under the
 * lock in use -> dirty ("detach", av_pool_release_device()) and the scrub
 * worker.  Never straight to free.  A device still attached when the time
 * is up stays in use. */
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

/* --- detach ------------------------------------------------------------------------------ */

/* One IOMMU group (or USB stick) that detach takes out of the guest: the
 * pool devices in use by the domain in it, and the aliases of their
 * hostdevs in the live XML. */
typedef struct {
    int group;                   /* -1: a USB stick or an mdev, alone */
    GPtrArray *identities;       /* char* */
    GPtrArray *aliases;          /* char* */
    GPtrArray *hostdevs;         /* const AvHostdev*, borrowed from the live XML: one per alias */
    int group_fd;                /* the QEMU's open file of the group, taken before the unplug, or -1 */
} AvDetachUnit;

static void
av_detach_unit_free(AvDetachUnit *u)
{
    if (!u)
        return;
    if (u->group_fd >= 0)
        close(u->group_fd);
    g_ptr_array_unref(u->identities);
    g_ptr_array_unref(u->aliases);
    g_ptr_array_unref(u->hostdevs);
    g_free(u);
}

/* The hostdev of the live XML @live that is the pool device @dev (PCI by
 * address, mdev by UUID, USB by the bus and device numbers it has on @host
 * now), or NULL. */
static const AvHostdev *
av_detach_find_hostdev(const AvDomain *live, const AvHost *host, const AvPoolDevice *dev)
{
    const AvUsbDevice *usb = NULL;

    if (dev->kind == AV_DEVICE_KIND_USB)
        usb = av_pool_find_usb_device(host->usb, dev->identity, dev->address);
    for (guint i = 0; i < live->hostdevs->len; i++) {
        const AvHostdev *h = g_ptr_array_index(live->hostdevs, i);

        if (dev->kind == AV_DEVICE_KIND_PCI && h->type == AV_HOSTDEV_PCI &&
            g_strcmp0(h->pci_address, dev->address) == 0)
            return h;
        if (dev->kind == AV_DEVICE_KIND_MDEV && h->type == AV_HOSTDEV_MDEV &&
            g_strcmp0(h->mdev_uuid, dev->identity + strlen("mdev:")) == 0)
            return h;
        if (dev->kind == AV_DEVICE_KIND_USB && h->type == AV_HOSTDEV_USB && usb &&
            h->usb_bus == (int)usb->busnum && h->usb_device == (int)usb->devnum)
            return h;
    }
    return NULL;
}

/* A <hostdev> naming @h's source only: what libvirt matches in the
 * persistent definition (virDomainDetachDeviceFlags).  Caller frees. */
static char *
av_detach_source_xml(const AvHostdev *h)
{
    guint d, b, s, f;

    if (h->type == AV_HOSTDEV_PCI && sscanf(h->pci_address, "%x:%x:%x.%x", &d, &b, &s, &f) == 4)
        return g_strdup_printf("<hostdev mode='subsystem' type='pci' managed='%s'>\n"
                               "  <source>\n"
                               "    <address domain='0x%04x' bus='0x%02x' slot='0x%02x' function='0x%x'/>\n"
                               "  </source>\n"
                               "</hostdev>\n", h->managed ? "yes" : "no", d, b, s, f);
    if (h->type == AV_HOSTDEV_MDEV)
        return g_strdup_printf("<hostdev mode='subsystem' type='mdev' model='%s'>\n"
                               "  <source>\n"
                               "    <address uuid='%s'/>\n"
                               "  </source>\n"
                               "</hostdev>\n", h->mdev_model ? h->mdev_model : "vfio-pci", h->mdev_uuid);
    if (h->type == AV_HOSTDEV_USB)
        return g_strdup_printf("<hostdev mode='subsystem' type='usb'>\n"
                               "  <source>\n"
                               "    <vendor id='0x%04x'/>\n"
                               "    <product id='0x%04x'/>\n"
                               "  </source>\n"
                               "</hostdev>\n", h->usb_vendor, h->usb_product);
    return NULL;
}

/* The pool devices @target names that the domain @uuid has in use (a
 * DEVICE, every device of --profile, or --all), each with the others of
 * its IOMMU group that the domain has in use, in units; refused, in one
 * sentence, when it names none, another domain's device or a device whose
 * attach is in flight.  Borrowed from @pool. */
static GPtrArray *
av_detach_targets(AvPool *pool, const AvHost *host, const AvDomain *live, const char *uuid, const char *name,
                  const char *device, const char *profile, GError **error)
{
    g_autoptr(GPtrArray) picked = g_ptr_array_new();
    g_autoptr(GPtrArray) units = g_ptr_array_new_with_free_func((GDestroyNotify)av_detach_unit_free);
    GPtrArray *devices = av_pool_devices(pool);

    if (device) {
        AvPoolDevice *dev = av_cli_find_device(pool, device, error);

        if (!dev)
            return NULL;
        if (dev->state != AV_DEVICE_STATE_IN_USE || !dev->owner || g_strcmp0(dev->owner->domain_uuid, uuid) != 0) {
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                        "device %s is not in use by domain '%s' (it is %s%s%s); detach takes only the domain's "
                        "own devices", device, name, av_device_state_to_string(dev->state),
                        dev->owner && dev->owner->domain_name ? " by domain " : "",
                        dev->owner && dev->owner->domain_name ? dev->owner->domain_name : "");
            return NULL;
        }
        g_ptr_array_add(picked, dev);
    }
    for (guint i = 0; !device && i < devices->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(devices, i);

        if (dev->state == AV_DEVICE_STATE_IN_USE && dev->owner && g_strcmp0(dev->owner->domain_uuid, uuid) == 0 &&
            (!profile || g_strcmp0(dev->profile, profile) == 0))
            g_ptr_array_add(picked, dev);
    }
    if (picked->len == 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT, "domain '%s' has no device%s%s%s in use in the pool; "
                    "'accelvirt status' shows who holds what", name, profile ? " of profile '" : "",
                    profile ? profile : "", profile ? "'" : "");
        return NULL;
    }
    for (guint i = 0; i < picked->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(picked, i);
        int group = dev->kind == AV_DEVICE_KIND_PCI ? dev->iommu_group : -1;
        AvDetachUnit *unit = NULL;

        for (guint j = 0; j < units->len && !unit; j++) {
            AvDetachUnit *u = g_ptr_array_index(units, j);

            if ((group >= 0 && u->group == group) || g_ptr_array_find_with_equal_func(u->identities, dev->identity,
                                                                                      g_str_equal, NULL))
                unit = u;
        }
        if (unit)
            continue;
        unit = g_new0(AvDetachUnit, 1);
        unit->group = group;
        unit->group_fd = -1;
        unit->identities = g_ptr_array_new_with_free_func(g_free);
        unit->aliases = g_ptr_array_new_with_free_func(g_free);
        unit->hostdevs = g_ptr_array_new();
        g_ptr_array_add(units, unit);
        for (guint j = 0; j < devices->len; j++) {
            const AvPoolDevice *mate = g_ptr_array_index(devices, j);
            const AvHostdev *h;

            if (mate != dev && !(group >= 0 && mate->kind == AV_DEVICE_KIND_PCI && mate->iommu_group == group &&
                                 mate->state == AV_DEVICE_STATE_IN_USE && mate->owner &&
                                 g_strcmp0(mate->owner->domain_uuid, uuid) == 0))
                continue;
            if (av_pool_attach_in_flight(av_pool_state_dir(pool), mate->identity)) {
                g_set_error(error, AV_ERROR, AV_ERROR_LOCKED, "device %s (%s) is being attached to domain '%s' by "
                            "another accelvirt; detach it once that is done", mate->address, mate->identity, name);
                return NULL;
            }
            g_ptr_array_add(unit->identities, g_strdup(mate->identity));
            h = av_detach_find_hostdev(live, host, mate);
            if (!h)
                continue; /* in the group, not a hostdev of its own: it goes with the group */
            if (!h->alias) {
                g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "the hostdev of device %s in domain '%s' has no "
                            "alias in the live XML; libvirt gives every device one", mate->address, name);
                return NULL;
            }
            g_ptr_array_add(unit->aliases, g_strdup(h->alias));
            g_ptr_array_add(unit->hostdevs, (gpointer)h);
        }
    }
    return g_steal_pointer(&units);
}

/* TRUE when @live has a hostdev with the alias @alias. */
static gboolean
av_detach_has_alias(const AvDomain *live, const char *alias)
{
    for (guint i = 0; i < live->hostdevs->len; i++)
        if (g_strcmp0(((const AvHostdev *)g_ptr_array_index(live->hostdevs, i))->alias, alias) == 0)
            return TRUE;
    return FALSE;
}

/* TRUE when the persistent definition @config has a hostdev with the
 * source of the live hostdev @live_h. */
static gboolean
av_detach_in_config(const AvDomain *config, const AvHostdev *live_h)
{
    for (guint i = 0; config && i < config->hostdevs->len; i++) {
        const AvHostdev *h = g_ptr_array_index(config->hostdevs, i);

        if (h->type == live_h->type && g_strcmp0(h->pci_address, live_h->pci_address) == 0 &&
            g_strcmp0(h->mdev_uuid, live_h->mdev_uuid) == 0 && h->usb_vendor == live_h->usb_vendor &&
            h->usb_product == live_h->usb_product)
            return TRUE;
    }
    return FALSE;
}

/* Takes the devices of the detached @units out of the domain's persistent
 * definition too, where it has them (or with @persistent); a failure is a
 * warning: the devices are out of the guest either way. */
static void
av_detach_config(const AvHotplugOps *ops, virDomain *dom, const AvDomain *config, GPtrArray *units,
                 const gboolean *gone, gboolean persistent)
{
    for (guint i = 0; i < units->len; i++) {
        const AvDetachUnit *u = g_ptr_array_index(units, i);

        for (guint j = 0; gone[i] && j < u->hostdevs->len; j++) {
            const AvHostdev *h = g_ptr_array_index(u->hostdevs, j);
            gboolean in_config = av_detach_in_config(config, h);
            g_autofree char *xml = av_detach_source_xml(h);
            g_autoptr(GError) err = NULL;

            if (!xml || !(in_config || persistent))
                continue;
            if (!ops->detach_config(dom, xml, &err) && in_config)
                fprintf(stderr, "accelvirt: warning: %s; remove '%s' from the domain's definition by hand\n",
                        err->message, (const char *)g_ptr_array_index(u->aliases, j));
        }
    }
}

/* Under the pool's lock: every device of the @units that left the guest,
 * in use -> dirty ("detach"), journalled, saved, the worker asked for.
 * Appends {identity, address, state} of each to @released. */
static gboolean
av_detach_release(const AvCli *cli, const AvRoot *root, const char *uuid, const char *name, GPtrArray *units,
                  const gboolean *gone, json_t *released, GError **error)
{
    g_autoptr(AvPool) pool = av_cli_open_pool(cli, root, AV_POOL_WRITE, error);
    g_autoptr(json_t) fields = json_object();
    json_t *ids = json_array();

    if (!pool)
        return FALSE;
    json_object_set_new(fields, "domain_uuid", json_string(uuid));
    json_object_set_new(fields, "domain_name", json_string(name));
    json_object_set_new(fields, "released", ids);
    /* The group files taken from the QEMU before the unplug go to holders
     * first: the kernel's one open file of each group never left a
     * process that keeps it from other domains, and the release below
     * (av_pool_release_device(), which holds each group it releases) finds
     * the group held by accelvirt, not open in this process. */
    for (guint i = 0; i < units->len; i++) {
        AvDetachUnit *u = g_ptr_array_index(units, i);
        const AvPoolDevice *dev = u->identities->len > 0 ? av_pool_find(pool, g_ptr_array_index(u->identities, 0))
                                                         : NULL;
        g_autoptr(GError) hold_error = NULL;

        if (u->group_fd < 0 || !gone[i] || !dev || dev->kind != AV_DEVICE_KIND_PCI || dev->iommu_group < 0 ||
            !dev->owner || g_strcmp0(dev->owner->domain_uuid, uuid) != 0)
            continue;
        if (!av_hold_take_fd(root, av_pool_state_dir(pool), u->group, dev->address, u->group_fd, &hold_error))
            fprintf(stderr, "accelvirt: warning: %s\n", hold_error->message);
        close(u->group_fd);
        u->group_fd = -1;
    }
    for (guint i = 0; i < units->len; i++) {
        const AvDetachUnit *u = g_ptr_array_index(units, i);

        for (guint j = 0; gone[i] && j < u->identities->len; j++) {
            AvPoolDevice *dev = av_pool_find(pool, g_ptr_array_index(u->identities, j));
            gboolean moved = FALSE;

            if (!dev || !dev->owner || g_strcmp0(dev->owner->domain_uuid, uuid) != 0)
                continue; /* released by another accelvirt meanwhile */
            if (!av_pool_release_device(pool, dev, "detach", &moved, error))
                return FALSE;
            if (!moved)
                continue;
            json_array_append_new(ids, json_string(dev->identity));
            json_array_append_new(released, json_pack("{s:s,s:s?,s:s,s:s}", "identity", dev->identity, "address",
                                                       dev->address, "domain", name, "state",
                                                       av_device_state_to_string(dev->state)));
        }
    }
    if (json_array_size(ids) == 0)
        return TRUE;
    if (!av_pool_journal_append(pool, "detach", fields, error) || !av_pool_save(pool, error))
        return FALSE;
    av_cli_want_worker();
    return TRUE;
}

int
av_cli_cmd_detach(AvCli *cli, int argc, char **argv)
{
    g_autofree char *profile = NULL;
    gboolean all = FALSE;
    gboolean persistent = FALSE;
    gint timeout = AV_DETACH_TIMEOUT_S;
    const GOptionEntry entries[] = {
        { "profile", 0, 0, G_OPTION_ARG_STRING, &profile, "Every device of profile P the domain has", "P" },
        { "all", 0, 0, G_OPTION_ARG_NONE, &all, "Every device of the pool the domain has", NULL },
        { "timeout", 0, 0, G_OPTION_ARG_INT, &timeout,
          "How long to wait for the guest to let the devices go (default 30)", "SECONDS" },
        { "persistent", 0, 0, G_OPTION_ARG_NONE, &persistent,
          "Take the devices out of the domain's persistent definition too", NULL },
        { NULL },
    };
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(virConnect) conn = NULL;
    g_autoptr(virDomain) dom = NULL;
    g_autoptr(AvDomain) live = NULL;
    g_autoptr(AvDomain) config = NULL;
    g_autoptr(AvDomain) after = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(GPtrArray) units = NULL;
    g_autoptr(GPtrArray) aliases = g_ptr_array_new();
    g_autoptr(GHashTable) removed = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(GError) detach_err = NULL;
    g_autofree gboolean *gone = NULL;
    g_autoptr(GString) still = g_string_new(NULL);
    g_autoptr(json_t) out = json_object();
    json_t *released = json_array();
    json_t *still_attached = json_array();
    const AvHotplugOps *ops;
    const char *device = NULL;
    char uuid[VIR_UUID_STRING_BUFLEN] = "";
    guint n_still = 0;

    json_object_set_new(out, "released", released);
    json_object_set_new(out, "still_attached", still_attached);
    if (!av_cli_parse(cli, "detach", "DOMAIN DEVICE | --profile P | --all",
                      "Hot-unplug devices the pool has in use by the running DOMAIN (with the others of their "
                      "IOMMU groups): libvirt detaches them by alias, accelvirt waits for the guest to let them "
                      "go, then they go dirty and the worker scrubs them; never straight to free.  A device still "
                      "attached when the time is up stays in use.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc == 3)
        device = argv[2];
    if (argc < 2 || argc > 3 || (device != NULL) + (profile != NULL) + (all != FALSE) != 1)
        return av_cli_usage_error("'detach' takes a DOMAIN and one of DEVICE, --profile P or --all; see "
                                  "'accelvirt detach --help'");
    if (timeout < 1)
        return av_cli_usage_error("--timeout must be 1 second or more");
    if (!av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);
    conn = av_attach_connect(cli, &err);
    if (!conn)
        return av_cli_fail(err);
    dom = av_attach_running(conn, argv[1], uuid, &err);
    if (!dom)
        return av_cli_fail(err);
    ops = av_hotplug_ops_for(root);
    live = av_attach_parse(ops, dom, FALSE, &err);
    if (!live)
        return av_cli_fail(err);
    config = av_attach_parse(ops, dom, TRUE, NULL);

    /* What to take out, read under the pool's shared lock, let go before
     * the scan and the wait (hooks take the exclusive lock): the hooks of
     * other domains wait neither for this guest nor for the scan.  The
     * release checks each device again under the exclusive lock. */
    pool = av_cli_open_pool(cli, root, AV_POOL_READ, &err);
    if (!pool)
        return av_cli_fail(err);
    av_pool_unlock(pool);
    host = av_host_scan(root, &err);
    if (!host)
        return av_cli_fail(err);
    units = av_detach_targets(pool, host, live, uuid, live->name, device, profile, &err);
    if (!units)
        return av_cli_fail(err);
    g_clear_pointer(&pool, av_pool_free);
    for (guint i = 0; i < units->len; i++) {
        AvDetachUnit *u = g_ptr_array_index(units, i);
        g_autofree char *from = NULL;

        for (guint j = 0; j < u->aliases->len; j++)
            g_ptr_array_add(aliases, g_ptr_array_index(u->aliases, j));
        /* Before the unplug: the QEMU's own open file of the group, so that
         * when it lets the group go nobody else can open it before the
         * hold (av_vfio_group_file_take()). */
        if (u->group >= 0 && !av_vfio_group_file_take(root, cli->state_dir, u->group, &u->group_fd, &from, &err)) {
            g_prefix_error(&err, "nothing detached from domain '%s': ", live->name);
            return av_cli_fail(err);
        }
    }
    if (aliases->len > 0)
        ops->detach_live(conn, dom, aliases, timeout * 1000, removed, &detach_err);

    /* The event can race: the live XML says what is still there. */
    after = av_attach_parse(ops, dom, FALSE, &err);
    if (!after) {
        g_prefix_error(&err, "cannot tell which devices left domain '%s', so they all stay in use: ", live->name);
        return av_cli_fail(err);
    }
    gone = g_new0(gboolean, units->len);
    for (guint i = 0; i < units->len; i++) {
        const AvDetachUnit *u = g_ptr_array_index(units, i);

        gone[i] = TRUE;
        for (guint j = 0; j < u->aliases->len; j++)
            gone[i] = gone[i] && !av_detach_has_alias(after, g_ptr_array_index(u->aliases, j));
        for (guint j = 0; !gone[i] && j < u->identities->len; j++) {
            json_array_append_new(still_attached, json_string(g_ptr_array_index(u->identities, j)));
            g_string_append_printf(still, "%s%s", still->len ? ", " : "",
                                   (const char *)g_ptr_array_index(u->identities, j));
            n_still++;
        }
    }
    av_detach_config(ops, dom, config, units, gone, persistent);
    if (!av_detach_release(cli, root, uuid, live->name, units, gone, released, &err))
        return av_cli_fail(err);
    if (cli->json)
        av_cli_print_json(json_incref(out));
    else
        av_cli_print_released(released, "detached", "from");
    if (still->len == 0)
        return AV_EXIT_OK;
    if (detach_err) {
        g_prefix_error(&detach_err, "%s stays attached to domain '%s' and in use: ", still->str, live->name);
        return av_cli_fail(detach_err);
    }
    g_set_error(&err, AV_ERROR, AV_ERROR_FAILED,
                "%s %s %s still attached to domain '%s' after %d s (the guest has not let %s go); %s in use: "
                "try again with a longer --timeout, or stop the domain", n_still == 1 ? "device" : "devices",
                still->str, n_still == 1 ? "is" : "are", live->name, timeout, n_still == 1 ? "it" : "them",
                n_still == 1 ? "it stays" : "they stay");
    return av_cli_fail(err);
}
