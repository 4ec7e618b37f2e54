/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the operator's release of a domain's devices;
 * `accelvirt reconcile` is in cli-reconcile.c.
 *
 * libvirt calls the hook's "release end" once.  When that release could
 * not be done (the hook was killed, the machine went down with domains
 * running, a QEMU died under a libvirtd that was not running), the devices
 * stay in use in the pool: `accelvirt reconcile` and every later accelvirt
 * call that takes the pool's lock catch what they can tell (release
 * markers, domains whose QEMU is gone, av_pool_upkeep()); `accelvirt
 * release` is the operator's word for the rest.  Released always means
 * dirty, then scrubbed by the worker: never straight to free.  The worker
 * these start takes the released devices' kernel-enforced holds (its
 * sweep, av_pool_holds_sync(), av-hold.h). */
#include "config.h"

#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "util/av-error.h"
#include "util/av-json.h"
#include "util/av-names.h"

/* --- accelvirt release ------------------------------------------------------------ */

/* The pool devices in use that @target names: a device (identity, PCI
 * address, USB bus path) or a domain (UUID or name).  Borrowed. */
static GPtrArray *
av_cli_release_targets(AvPool *pool, const char *target, const char **ret_kind)
{
    GPtrArray *found = g_ptr_array_new();
    AvPoolDevice *dev = av_cli_find_device(pool, target, NULL);
    gboolean by_uuid = av_uuid_is_valid(target);

    if (dev) {
        g_ptr_array_add(found, dev);
        *ret_kind = "device";
        return found;
    }
    *ret_kind = "domain";
    for (guint i = 0; i < av_pool_devices(pool)->len; i++) {
        AvPoolDevice *d = g_ptr_array_index(av_pool_devices(pool), i);

        if (d->owner && (by_uuid ? g_strcmp0(d->owner->domain_uuid, target) == 0
                                 : g_strcmp0(d->owner->domain_name, target) == 0))
            g_ptr_array_add(found, d);
    }
    return found;
}

int
av_cli_cmd_release(AvCli *cli, int argc, char **argv)
{
    gboolean force = FALSE;
    const GOptionEntry entries[] = {
        { "force", 0, 0, G_OPTION_ARG_NONE, &force,
          "Release even a device whose domain may still run (its scrub then fails and quarantines it)", NULL },
        { NULL }
    };
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GPtrArray) targets = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *operator_name = av_cli_operator();
    json_t *released = json_array();
    g_autoptr(json_t) out = json_object();
    const char *kind = NULL;
    guint in_use = 0;

    json_object_set_new(out, "released", released);
    if (!av_cli_parse(cli, "release", "[--force] DOMAIN | DEVICE",
                      "Release what a domain (name or UUID) or one device (address or identity) holds in use "
                      "when its domain is gone and libvirt's release never reached accelvirt: in-use -> dirty, "
                      "journalled with your name, then the scrub worker; never straight to free.  Refused while "
                      "the domain may still run (libvirt's pid file, or a process holding the device's IOMMU "
                      "group), unless --force.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 2)
        return av_cli_usage_error("release needs one DOMAIN or DEVICE; see 'accelvirt release --help'");
    if (!av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);
    pool = av_cli_open_pool(cli, root, AV_POOL_WRITE, &err);
    if (!pool)
        return av_cli_fail(err);
    targets = av_cli_release_targets(pool, argv[1], &kind);
    for (guint i = 0; i < targets->len; i++) {
        const AvPoolDevice *dev = g_ptr_array_index(targets, i);

        if (dev->state != AV_DEVICE_STATE_IN_USE &&
            !(dev->state == AV_DEVICE_STATE_MISSING && dev->state_before_missing == AV_DEVICE_STATE_IN_USE))
            continue;
        in_use++;
        if (!force && !av_pool_owner_is_gone(root, av_pool_state_dir(pool), dev, NULL)) {
            g_set_error(&err, AV_ERROR, AV_ERROR_IN_USE,
                        "domain '%s' may still run with device %s (libvirt's pid file for it exists, or a process "
                        "holds its IOMMU group): stop it first ('virsh destroy %s'), or release with --force, "
                        "which quarantines at once a device whose IOMMU group a process still holds",
                        dev->owner && dev->owner->domain_name ? dev->owner->domain_name : "?",
                        dev->address ? dev->address : dev->identity,
                        dev->owner && dev->owner->domain_name ? dev->owner->domain_name : "DOMAIN");
            return av_cli_fail(err);
        }
    }
    if (in_use == 0) {
        g_set_error(&err, AV_ERROR, AV_ERROR_NOT_FOUND,
                    targets->len > 0 ? "%s '%s' holds no device in use; nothing to release ('accelvirt status' "
                                       "shows the pool)"
                                     : "no device of the pool is '%s' and no domain '%s' holds one; 'accelvirt "
                                       "status' shows the pool",
                    targets->len > 0 ? kind : argv[1], argv[1]);
        return av_cli_fail(err);
    }
    for (guint i = 0; i < targets->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(targets, i);
        g_autofree char *by = g_strdup_printf("operator %s", operator_name);
        gboolean moved = FALSE;

        if (!av_pool_release_device(pool, dev, by, &moved, &err))
            return av_cli_fail(err);
        if (!moved)
            continue;
        json_array_append_new(released, json_pack("{s:s,s:s?,s:s?,s:s}", "identity", dev->identity, "address",
                                                  dev->address, "domain", dev->owner ? dev->owner->domain_name : NULL,
                                                  "state", av_device_state_to_string(dev->state)));
    }
    if (!av_pool_save(pool, &err))
        return av_cli_fail(err);
    av_cli_want_worker();
    if (cli->json)
        av_cli_print_json(json_incref(out));
    else
        av_cli_print_released(released, "released", "of");
    return AV_EXIT_OK;
}
