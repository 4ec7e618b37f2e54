/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt rewrite, define, start, undefine and plan: from accelerator
 * requests to a placed domain.
 *
 * The pool lock is never held while libvirt may run the hook (virDomainCreate
 * runs "prepare", which takes the lock): claims are recorded and saved, the
 * lock released, and only then is the domain started.  Defining and
 * undefining run no hook (libvirt's docs/hooks.rst), so they may happen under
 * the lock. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "cli.h"
#include "domain/av-domain.h"
#include "domain/av-rewrite.h"
#include "domain/av-topology.h"
#include "fpga/av-bitstream.h"
#include "place/av-place.h"
#include "util/av-error.h"
#include "util/av-json.h"
#include "util/av-names.h"

/* How long a reservation made by define or rewrite lasts by default: a
 * domain defined but never started does not hold a GPU forever (seed 004). */
#define AV_CLI_CLAIM_TTL_S 3600

/* --- input ------------------------------------------------------------------ */

/* Reads the domain XML from @path ("-" for stdin), bounded like the hook's. */
static gboolean
av_cli_read_xml(const char *path, char **ret_xml, gsize *ret_len, GError **error)
{
    g_autofree char *data = NULL;
    gsize len = 0;

    if (g_str_equal(path, "-"))
        return av_domain_read_fd(STDIN_FILENO, ret_xml, ret_len, error);
    if (!g_file_get_contents(path, &data, &len, error)) {
        g_prefix_error(error, "cannot read the domain XML: ");
        return FALSE;
    }
    if (len > AV_DOMAIN_XML_MAX) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "'%s' is larger than %u bytes, the most a domain XML may be", path, AV_DOMAIN_XML_MAX);
        return FALSE;
    }
    *ret_xml = g_steal_pointer(&data);
    *ret_len = len;
    return TRUE;
}

/* --- placing ---------------------------------------------------------------- */

/* The UUIDs of the mdevs a previous placement gave the domain, handed out
 * again in order, so that placing a placed domain again keeps them; then
 * fresh ones. */
typedef struct {
    GPtrArray *uuids;
    guint next;
} AvUuidReuse;

static char *
av_cli_next_uuid(gpointer data)
{
    AvUuidReuse *reuse = data;

    if (reuse->next < reuse->uuids->len)
        return g_strdup(g_ptr_array_index(reuse->uuids, reuse->next++));
    return g_uuid_string_random();
}

/* TRUE when @bitstream fits a device that @profile matches by its ids:
 * a profile that names one vendor and device ids fits when one of those
 * pairs (or the profile's name) does; for any other profile the devices
 * placed are checked one by one (av_cli_check_fits()). */
static gboolean
av_cli_profile_fits(const AvProfile *profile, const AvBitstream *bitstream)
{
    if (!profile->match_vendor_set || !profile->match_devices || profile->match_devices->len == 0)
        return TRUE;
    for (guint i = 0; i < profile->match_devices->len; i++)
        if (av_bitstream_fits(bitstream, profile->name, profile->match_vendor,
                              g_array_index(profile->match_devices, guint16, i)))
            return TRUE;
    return FALSE;
}

/* A request's function= (and no bitstream=): the one bitstream of the
 * library in @state_dir whose function id it is and that fits @profile
 * becomes the request's bitstream (its name).  FALSE, one sentence, when
 * none or several do. */
static gboolean
av_cli_resolve_function(const AvProfile *profile, const char *state_dir, AvRequest *r, GError **error)
{
    g_autoptr(GPtrArray) all = NULL;
    g_autoptr(GString) names = g_string_new(NULL);
    const AvBitstream *found = NULL;
    guint n = 0;

    if (!av_bitstream_list(state_dir, &all, error))
        return FALSE;
    for (guint i = 0; i < all->len; i++) {
        const AvBitstream *b = g_ptr_array_index(all, i);

        if (g_strcmp0(b->function_id, r->function) != 0 || !av_cli_profile_fits(profile, b))
            continue;
        g_string_append_printf(names, "%s'%s'", n ? ", " : "", b->name);
        found = b;
        n++;
    }
    if (n == 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_NOT_FOUND,
                    "the request for profile '%s' asks for function '%s', which no bitstream of the library "
                    "provides for that profile; 'accelvirt bitstream list' shows the function ids",
                    r->profile, r->function);
        return FALSE;
    }
    if (n > 1) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "the request for profile '%s' asks for function '%s', which %u bitstreams of the library "
                    "provide (%s); name one with bitstream=",
                    r->profile, r->function, n, names->str);
        return FALSE;
    }
    r->bitstream = g_strdup(found->name);
    return TRUE;
}

/* Resolves the bitstream= of each request of @requests (AvRequest*) in the
 * library of @state_dir (av_bitstream_lookup()): sets its
 * bitstream_sha256 and adds the bitstream to @bitstreams (AvBitstream*,
 * owned; once each).  Refused, before anything is claimed: a profile
 * without "program" (or one whose devices are no PCI functions), a
 * bitstream the library lacks, one that fits none of the profile's ids
 * (av_cli_profile_fits()). */
static gboolean
av_cli_resolve_bitstreams(const AvPolicy *policy, const char *state_dir, GPtrArray *requests, GPtrArray *bitstreams,
                          GError **error)
{
    for (guint i = 0; i < requests->len; i++) {
        AvRequest *r = g_ptr_array_index(requests, i);
        const AvProfile *profile;
        g_autoptr(AvBitstream) b = NULL;

        /* A program that names only the card (the profile's, or its scrub's
         * program-base) would reprogram the other domains' functions of a
         * card that a finer request splits. */
        profile = av_policy_find(policy, r->profile);
        if (profile && profile->program && r->granularity_set && r->granularity != AV_GRANULARITY_CARD &&
            !av_program_names_device(profile->program)) {
            g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                        "the request for profile '%s' asks for granularity '%s', but the profile's program names "
                        "only the card ({card}) and would reprogram the functions other domains get; remove "
                        "granularity= from the request",
                        r->profile, av_granularity_to_string(r->granularity));
            return FALSE;
        }
        if (!r->bitstream && !r->function)
            continue;
        if (!profile)
            continue; /* av_place() says so */
        if (!r->bitstream && !av_cli_resolve_function(profile, state_dir, r, error))
            return FALSE;
        if (!profile->program || (profile->attach != AV_ATTACH_VFIO_PCI && profile->attach != AV_ATTACH_SRIOV_VF)) {
            g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                        "the request for profile '%s' names bitstream '%s', but profile '%s' does not program its "
                        "devices (no \"program\", accelvirt-policy(5)); remove bitstream= or use a profile that "
                        "has one",
                        r->profile, r->bitstream, r->profile);
            return FALSE;
        }
        b = av_bitstream_lookup(state_dir, r->bitstream, error);
        if (!b) {
            g_prefix_error(error, "the request for profile '%s': ", r->profile);
            return FALSE;
        }
        if (r->function && g_strcmp0(b->function_id, r->function) != 0) {
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                        "the request for profile '%s' asks for function '%s', but bitstream '%s' provides %s%s%s; "
                        "name one of them only",
                        r->profile, r->function, b->name, b->function_id ? "'" : "",
                        b->function_id ? b->function_id : "no function id", b->function_id ? "'" : "");
            return FALSE;
        }
        if (!av_cli_profile_fits(profile, b)) {
            g_autofree char *fits = NULL;

            g_ptr_array_add(b->compatible, NULL);
            fits = g_strjoinv(", ", (char **)b->compatible->pdata);
            g_ptr_array_remove_index(b->compatible, b->compatible->len - 1);
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                        "bitstream '%s' fits no device of profile '%s' (it fits %s); 'accelvirt bitstream list' "
                        "says what each fits",
                        b->name, profile->name, fits);
            return FALSE;
        }
        g_free(r->bitstream_sha256);
        r->bitstream_sha256 = g_strdup(b->sha256);
        if (!av_cli_bitstream_by_sha256(bitstreams, b->sha256))
            g_ptr_array_add(bitstreams, g_steal_pointer(&b));
    }
    return TRUE;
}

/* Checks that each device of @placement that must hold a bitstream of
 * @bitstreams fits it by its own ids on @host (av_bitstream_fits()). */
static gboolean
av_cli_check_fits(const AvHost *host, const AvPlacement *placement, const GPtrArray *bitstreams, GError **error)
{
    for (guint i = 0; i < placement->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
        const AvBitstream *b = av_cli_bitstream_by_sha256(bitstreams, item->bitstream);

        if (!b)
            continue;
        for (guint j = 0; j < host->pci->len; j++) {
            const AvPciDevice *pci = g_ptr_array_index(host->pci, j);

            if (g_strcmp0(pci->address, item->pci_address) == 0 &&
                !av_bitstream_fits(b, item->profile, pci->vendor_id, pci->device_id)) {
                g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                            "bitstream '%s' does not fit device %s (%04x:%04x) placed for profile '%s'; "
                            "'accelvirt bitstream list' says what each fits",
                            b->name, pci->address, pci->vendor_id, pci->device_id, item->profile);
                return FALSE;
            }
        }
    }
    return TRUE;
}

/* The bad input av_cli_place() refuses before it scans or claims (the
 * domain, its requests, their bitstreams, its UUID), refused before the
 * pool is reconciled with the host (av_cli_open_synced_pool_again()
 * journals what the scan finds), so that it changes nothing. */
static gboolean
av_cli_place_check(const AvCli *cli, const AvPolicy *policy, const char *xml, gsize len, GError **error)
{
    g_autoptr(GPtrArray) bitstreams = g_ptr_array_new_with_free_func((GDestroyNotify)av_bitstream_free);
    g_autoptr(AvDomain) domain = av_domain_parse(xml, len, error);
    g_autoptr(GPtrArray) requests = domain ? av_domain_requests_full(xml, len, NULL, error) : NULL;
    g_autofree char *uuid = NULL;
    g_autofree char *with_uuid = NULL;

    if (!requests)
        return FALSE;
    if (requests->len == 0)
        return TRUE;
    if (!av_cli_resolve_bitstreams(policy, cli->state_dir, requests, bitstreams, error))
        return FALSE;
    with_uuid = av_domain_ensure_uuid(xml, len, &uuid, error);
    return with_uuid != NULL;
}

/* The placed XML of a domain: requests placed on this host, devices claimed
 * for it (with @ttl_s seconds of expiry unless @dry_run, 0: none).  @pool must
 * be open for writing unless @dry_run.  Stores the new XML and the domain's
 * UUID (both caller frees), the placement, the bitstreams its requests
 * name (AvBitstream*, resolved in the library before placing: see
 * av_cli_resolve_bitstreams(); caller frees) and the guest topology the
 * rewrite wrote (av_guest_topology() of the same XML and placement, issue
 * 16; caller frees).  Every ret_ may be NULL but @ret_xml.  *@synced (@synced
 * may be NULL, and *@synced): the scan @pool was just reconciled with under
 * its lock (av_cli_sync_open()), used and given back (the host's scan after
 * VFs were made, if any); NULL: the host is scanned here and @pool (a
 * scratch copy of it for a dry run) reconciled with it. */
static gboolean
av_cli_place(const AvCli *cli, AvRoot *root, AvPolicy *policy, AvPool *pool, AvHost **synced, const char *xml,
             gsize len, gboolean dry_run, gint64 ttl_s, char **ret_xml, char **ret_uuid, AvPlacement **ret_placement,
             GPtrArray **ret_bitstreams, AvGuestTopology **ret_topology, GError **error)
{
    g_autoptr(AvGuestTopology) topology = NULL;
    g_autoptr(GPtrArray) bitstreams = g_ptr_array_new_with_free_func((GDestroyNotify)av_bitstream_free);
    g_autoptr(AvDomain) domain = NULL;
    g_autoptr(GPtrArray) requests = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvPlacement) placement = NULL;
    g_autoptr(AvOwner) owner = NULL;
    g_autofree char *with_uuid = NULL;
    g_autofree char *uuid = NULL;
    g_autofree char *placed = NULL;
    g_autofree char *scratch_dir = NULL;
    g_autoptr(AvPool) scratch = NULL;
    g_autoptr(GPtrArray) old_uuids = g_ptr_array_new();
    AvUuidReuse reuse = { old_uuids, 0 };
    AvPlaceOptions options = { 0 };
    gboolean changed = FALSE;
    gboolean ok = FALSE;
    guint planned_vfs = 0;
    guint hotplug = 0;
    g_autofree char *no_vfs_why = NULL;
    g_autofree char *by = NULL;
    gint64 expires;

    domain = av_domain_parse(xml, len, error);
    if (!domain)
        return FALSE;
    requests = av_domain_requests_full(xml, len, &hotplug, error);
    if (!requests)
        return FALSE;
    if (requests->len == 0) {
        /* Nothing asked of accelvirt (a domain Nova wrote, say): left
         * alone; or only room to grow (<av:hotplug>): its empty root
         * ports, and nothing placed or claimed. */
        g_autoptr(AvPlacement) empty = g_new0(AvPlacement, 1);

        empty->numa_node = -1;
        empty->cpus = g_array_new(FALSE, FALSE, sizeof(guint));
        empty->items = g_ptr_array_new_with_free_func((GDestroyNotify)av_placed_item_free);
        empty->warnings = g_ptr_array_new_with_free_func(g_free);
        if (hotplug > 0) {
            placed = av_domain_rewrite(xml, len, empty, policy, error);
            if (!placed)
                return FALSE;
        }
        if (ret_topology) {
            topology = av_guest_topology(xml, len, empty, error);
            if (!topology)
                return FALSE;
            *ret_topology = g_steal_pointer(&topology);
        }
        if (ret_uuid)
            *ret_uuid = g_strdup(domain->uuid);
        if (ret_placement)
            *ret_placement = g_steal_pointer(&empty);
        if (ret_bitstreams)
            *ret_bitstreams = g_steal_pointer(&bitstreams);
        *ret_xml = placed ? g_steal_pointer(&placed) : g_strndup(xml, len);
        return TRUE;
    }
    /* Unknown, unfit bitstreams are refused before anything is scanned or claimed. */
    if (!av_cli_resolve_bitstreams(policy, av_pool_state_dir(pool), requests, bitstreams, error))
        return FALSE;
    /* The claims need the domain's UUID before libvirt sees the domain. */
    with_uuid = av_domain_ensure_uuid(xml, len, &uuid, error);
    if (!with_uuid)
        return FALSE;

    if (synced && *synced) {
        g_return_val_if_fail(!dry_run, FALSE);
        host = g_steal_pointer(synced);
    } else {
        host = av_host_scan(root, error);
        if (!host)
            return FALSE;
        if (!dry_run && !av_pool_reconcile(pool, host, policy, &changed, error))
            return FALSE;
    }
    if (dry_run) {
        /* Reconciled in a scratch copy: what a real run would see. */
        scratch = av_cli_scratch_pool(av_pool_state_dir(pool), &scratch_dir, error);
        if (!scratch)
            goto out;
        pool = scratch;
    }
    if (dry_run && !av_pool_reconcile(pool, host, policy, &changed, error))
        goto out;
    for (guint i = 0; domain->placed && i < domain->placed->len; i++) {
        const AvPlacedDevice *p = g_ptr_array_index(domain->placed, i);

        if (p->mdev_uuid)
            g_ptr_array_add(old_uuids, p->mdev_uuid);
    }
    by = g_strdup_printf("define of domain '%s' (%s)", domain->name ? domain->name : "?", uuid);
    if (!av_cli_grow_vfs(root, policy, pool, &host, requests, uuid, by, dry_run, &planned_vfs, &no_vfs_why, error))
        goto out;
    options.domain_uuid = uuid;
    options.vcpus = domain->vcpus ? domain->vcpus : 1;
    options.new_uuid = av_cli_next_uuid;
    options.new_uuid_data = &reuse;
    placement = av_place(host, policy, pool, requests, &options, error);
    if (!placement) {
        if (dry_run && planned_vfs > 0)
            g_prefix_error(error, "this dry run placed without the VFs that a real run makes first: ");
        if (no_vfs_why && error && *error) {
            char *message = g_strdup_printf("%s; and no VF could be made: %s", (*error)->message, no_vfs_why);

            g_free((*error)->message);
            (*error)->message = message;
        }
        goto out;
    }
    if (!av_cli_check_fits(host, placement, bitstreams, error))
        goto out;
    for (guint i = 0; i < placement->warnings->len; i++)
        fprintf(stderr, "accelvirt: warning: %s\n", (const char *)g_ptr_array_index(placement->warnings, i));
    placed = av_domain_rewrite(with_uuid, strlen(with_uuid), placement, policy, error);
    if (!placed)
        goto out;
    if (ret_topology) {
        /* What the rewrite just wrote, for people (plan, the dry runs). */
        topology = av_guest_topology(with_uuid, strlen(with_uuid), placement, error);
        if (!topology)
            goto out;
    }

    if (!dry_run) {
        owner = av_owner_new(uuid, domain->name);
        expires = ttl_s > 0 ? g_get_real_time() / G_USEC_PER_SEC + ttl_s : 0;
        for (guint i = 0; i < placement->items->len; i++) {
            const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
            AvPoolDevice *dev;

            if (!item->identity)
                continue; /* an mdev: created, and pooled, by the hook at prepare */
            dev = av_pool_find(pool, item->identity);
            if (!dev) {
                g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                            "placed device '%s' is not in the pool; run 'accelvirt status' and retry",
                            item->identity);
                goto out;
            }
            if (!av_pool_claim(pool, dev, owner, expires, error))
                goto out;
        }
        /* What restore and migrate go by, whatever the metadata says later. */
        av_pool_placement_record(pool, uuid, domain->name, requests, placement);
    }
    *ret_xml = g_steal_pointer(&placed);
    if (ret_uuid)
        *ret_uuid = g_steal_pointer(&uuid);
    if (ret_placement)
        *ret_placement = g_steal_pointer(&placement);
    if (ret_bitstreams)
        *ret_bitstreams = g_steal_pointer(&bitstreams);
    if (ret_topology)
        *ret_topology = g_steal_pointer(&topology);
    if (synced)
        *synced = g_steal_pointer(&host);
    ok = TRUE;
out:
    g_clear_pointer(&scratch, av_pool_free);
    av_cli_remove_dir(scratch_dir);
    return ok;
}

/* Gives back every claim (not in-use devices) of the domain @uuid: to
 * free, or dirty where a program ran for it (av_pool_unclaim()). */
static gboolean
av_cli_drop_claims(AvPool *pool, const char *uuid, guint *ret_dropped, GError **error)
{
    g_autoptr(GPtrArray) owned = av_pool_find_owned(pool, uuid);
    guint dropped = 0;

    for (guint i = 0; i < owned->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(owned, i);

        if (dev->state != AV_DEVICE_STATE_CLAIMED)
            continue;
        if (!av_pool_unclaim(pool, dev, NULL, "transition", error))
            return FALSE;
        if (dev->state == AV_DEVICE_STATE_DIRTY)
            av_cli_want_worker();
        dropped++;
    }
    if (ret_dropped)
        *ret_dropped = dropped;
    return TRUE;
}

/* What becomes of @item's bitstream: "already holds 'NAME'" when @pool
 * records its device holding it, else "will be programmed with 'NAME'
 * (sha256 PREFIX…)"; NULL when it must hold none.  Caller frees. */
static char *
av_cli_program_note(const AvPool *pool, const GPtrArray *bitstreams, const AvPlacedItem *item)
{
    const AvBitstream *b = av_cli_bitstream_by_sha256(bitstreams, item->bitstream);
    const AvPoolDevice *dev = item->identity ? av_pool_find((AvPool *)pool, item->identity) : NULL;
    const char *name = b ? b->name : "?";

    if (!item->bitstream)
        return NULL;
    if (dev && dev->programmed && g_str_equal(dev->programmed->sha256, item->bitstream))
        return g_strdup_printf("already holds '%s'", name);
    return g_strdup_printf("will be programmed with '%s' (sha256 %.12s…)", name, item->bitstream);
}

/* For `rewrite`, whose stdout is the XML: the programming notes on stderr. */
static void
av_cli_print_program_notes(const AvPool *pool, const GPtrArray *bitstreams, const AvPlacement *placement)
{
    for (guint i = 0; placement && i < placement->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
        g_autofree char *note = av_cli_program_note(pool, bitstreams, item);

        if (note)
            fprintf(stderr, "accelvirt: %s %s\n", item->pci_address, note);
    }
}

/* "VERB domain 'NAME' (UUID) on NUMA node N:", the first line of a
 * placement for people; when @placement has no device, the line ends
 * ": no accelerator requests, @nothing" and FALSE says so. */
static gboolean
av_cli_print_placement_head(const char *verb, const char *name, const char *uuid, const AvPlacement *placement,
                            const char *nothing)
{
    g_autofree char *printable = av_cli_printable(name);

    printf("%s domain '%s' (%s)", verb, printable, uuid ? uuid : "UUID chosen by libvirt");
    if (placement->items->len == 0) {
        printf(": no accelerator requests, %s\n", nothing);
        return FALSE;
    }
    if (placement->numa_node >= 0)
        printf(" on NUMA node %d", placement->numa_node);
    printf(":\n");
    return TRUE;
}

static void
av_cli_print_placement(const char *verb, const char *name, const char *uuid, const AvPlacement *placement,
                       const AvPool *pool, const GPtrArray *bitstreams)
{
    if (!av_cli_print_placement_head(verb, name, uuid, placement, "left as written"))
        return;
    for (guint i = 0; i < placement->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);

        if (item->mdev_uuid)
            printf("  %-20s mdev %s (%s)\n", item->profile, item->mdev_uuid, item->mdev_type);
        else if (item->usb_bus_path)
            printf("  %-20s usb %s\n", item->profile, item->usb_bus_path);
        else {
            g_autofree char *note = av_cli_program_note(pool, bitstreams, item);
            g_autofree char *vf = item->pf_address ? g_strdup_printf(" (vf %d of PF %s)", item->vf_index,
                                                                     item->pf_address)
                                                   : NULL;

            printf("  %-20s %s%s%s%s\n", item->profile, item->pci_address, vf ? vf : "", note ? ": " : "",
                   note ? note : "");
        }
    }
    for (guint i = 0; i < placement->warnings->len; i++)
        printf("  warning: %s\n", (const char *)g_ptr_array_index(placement->warnings, i));
}

static json_t *
av_cli_placement_json(const char *name, const char *uuid, const AvPlacement *placement, const AvPool *pool,
                      const GPtrArray *bitstreams)
{
    json_t *o = json_object();
    json_t *items = json_array();
    json_t *warnings = json_array();

    for (guint i = 0; i < placement->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
        json_t *j = json_object();

        json_object_set_new(j, "profile", json_string(item->profile));
        json_object_set_new(j, "attach", json_string(av_attach_to_string(item->attach)));
        json_object_set_new(j, "identity", av_json_string_or_null(item->identity));
        json_object_set_new(j, "address", av_json_string_or_null(item->pci_address ? item->pci_address
                                                                                  : item->mdev_parent));
        json_object_set_new(j, "mdev_uuid", av_json_string_or_null(item->mdev_uuid));
        json_object_set_new(j, "usb_bus_path", av_json_string_or_null(item->usb_bus_path));
        if (item->pf_address)
            json_object_set_new(j, "vf", json_pack("{s:s,s:i}", "pf", item->pf_address, "index", item->vf_index));
        json_object_set_new(j, "numa_node", json_integer(item->numa_node));
        /* Its alias in the domain, and its host PCIe position. */
        json_object_set_new(j, "alias", json_sprintf(AV_REWRITE_ALIAS_PREFIX "%u", i));
        json_object_set_new(j, "root_port", av_json_string_or_null(item->root_port));
        json_object_set_new(j, "switch", av_json_string_or_null(item->switch_port));
        json_object_set_new(j, "gpudirect", json_boolean(item->gpudirect));
        if (item->bitstream) {
            const AvBitstream *b = av_cli_bitstream_by_sha256(bitstreams, item->bitstream);
            const AvPoolDevice *dev = item->identity ? av_pool_find((AvPool *)pool, item->identity) : NULL;

            json_object_set_new(j, "bitstream",
                                json_pack("{s:s,s:o,s:b}", "sha256", item->bitstream, "name",
                                          av_json_string_or_null(b ? b->name : NULL), "held",
                                          dev && dev->programmed &&
                                              g_str_equal(dev->programmed->sha256, item->bitstream)));
        }
        json_array_append_new(items, j);
    }
    for (guint i = 0; i < placement->warnings->len; i++)
        json_array_append_new(warnings, json_string(g_ptr_array_index(placement->warnings, i)));
    json_object_set_new(o, "domain", json_string(name));
    json_object_set_new(o, "uuid", av_json_string_or_null(uuid));
    json_object_set_new(o, "numa_node", json_integer(placement->numa_node));
    json_object_set_new(o, "devices", items);
    json_object_set_new(o, "warnings", warnings);
    return o;
}

/* TRUE when @topology mirrors nothing and has no note: the dry runs then
 * say nothing of it, as before the guest topology was written. */
static gboolean
av_cli_topology_silent(const AvGuestTopology *topology)
{
    return topology->cells->len == 0 && topology->groups->len == 0 && topology->notes->len == 0;
}

/* Prints the lines of av_guest_topology_describe() on @out, each after
 * @prefix; nothing when @topology is NULL, or silent and @quiet. */
static void
av_cli_print_topology(FILE *out, const char *prefix, const AvGuestTopology *topology, const AvPlacement *placement,
                      gboolean quiet)
{
    g_autofree char *text = NULL;
    g_auto(GStrv) lines = NULL;

    if (!topology || (quiet && av_cli_topology_silent(topology)))
        return;
    text = av_guest_topology_describe(topology, placement);
    lines = g_strsplit(text, "\n", -1);
    for (guint i = 0; lines[i]; i++)
        if (*lines[i])
            fprintf(out, "%s%s\n", prefix, lines[i]);
}

/* The placement JSON of define (av_cli_placement_json()) with the guest
 * topology @topology writes as "topology" (av_guest_topology_json()), for
 * `plan FILE --json` and `define --dry-run --json`.  Caller owns it. */
static json_t *
av_cli_plan_json(const char *name, const char *uuid, const AvPlacement *placement, const AvPool *pool,
                 const GPtrArray *bitstreams, const AvGuestTopology *topology)
{
    json_t *o = av_cli_placement_json(name, uuid, placement, pool, bitstreams);

    json_object_set_new(o, "topology", av_guest_topology_json(topology, placement));
    return o;
}

/* --- commands --------------------------------------------------------------- */

/* --project or --user given for a domain accelvirt placed nothing for:
 * no record to pin them in, nothing saved.  The exit status. */
static int
av_cli_owner_unpinned(GError **error)
{
    g_set_error_literal(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                        "--project and --user pin the owner of what accelvirt places, and this domain asks for no "
                        "accelerator: nothing was pinned; leave them out");
    return av_cli_fail(*error);
}

/* TRUE when --project and --user (NULL: not given) are OpenStack ids; else
 * says so in one line. */
static gboolean
av_cli_owner_options_valid(const char *project, const char *user)
{
    if ((project && !av_openstack_id_is_valid(project)) || (user && !av_openstack_id_is_valid(user))) {
        av_cli_usage_error("--project and --user take an OpenStack id: 1 to 64 letters, digits, '_', '.', '@' or "
                           "'-', beginning with a letter or digit");
        return FALSE;
    }
    return TRUE;
}

static gboolean
av_cli_owner_disagrees(const char *role, const char *said, const char *given, GError **error)
{
    g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                "the domain's <nova:owner> names the %s '%s', not the '%s' given (--%s); give the one its time is "
                "charged to and make its metadata agree, or leave <nova:owner> out", role, said, given, role);
    return FALSE;
}

/* FALSE with one sentence when the domain @xml (@len bytes) names in its
 * <nova:owner> another OpenStack project or user than @project or @user
 * (NULL: not given), which `define --project`/`--user` pin. */
static gboolean
av_cli_owner_agrees(const char *xml, gsize len, const char *project, const char *user, GError **error)
{
    g_autoptr(AvDomain) domain = av_domain_parse(xml, len, error);

    if (!domain)
        return FALSE;
    if (project && domain->nova_project && strcmp(project, domain->nova_project) != 0)
        return av_cli_owner_disagrees("project", domain->nova_project, project, error);
    if (user && domain->nova_user && strcmp(user, domain->nova_user) != 0)
        return av_cli_owner_disagrees("user", domain->nova_user, user, error);
    return TRUE;
}


int
av_cli_cmd_rewrite(AvCli *cli, int argc, char **argv)
{
    gboolean dry_run = FALSE;
    gint ttl = AV_CLI_CLAIM_TTL_S;
    g_autofree char *project = NULL;
    g_autofree char *user = NULL;
    g_autofree char *uuid = NULL;
    const GOptionEntry entries[] = {
        { "dry-run", 'n', 0, G_OPTION_ARG_NONE, &dry_run, "Reserve nothing: only print the placed XML", NULL },
        { "claim-ttl", 0, 0, G_OPTION_ARG_INT, &ttl, "Seconds the reservation lasts (0: until undefined)", "S" },
        { "project", 0, 0, G_OPTION_ARG_STRING, &project,
          "Charge the domain's device time to this OpenStack project, whatever its metadata says", "ID" },
        { "user", 0, 0, G_OPTION_ARG_STRING, &user, "Charge it to this OpenStack user likewise", "ID" },
        { NULL },
    };
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *xml = NULL;
    g_autofree char *placed = NULL;
    g_autoptr(AvPlacement) placement = NULL;
    g_autoptr(GPtrArray) bitstreams = NULL;
    g_autoptr(AvGuestTopology) topology = NULL;
    gsize len = 0;

    if (!av_cli_parse(cli, "rewrite", "[FILE|-]",
                      "Place the domain's accelerator requests on this host and print the domain XML with "
                      "its <hostdev>s, vCPU and memory pinning.  Without --dry-run the devices are reserved "
                      "for the domain (see 'accelvirt define').",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc > 2)
        return av_cli_usage_error("'rewrite' takes one FILE (or - for stdin)");
    if (ttl < 0)
        return av_cli_usage_error("--claim-ttl must be 0 or more seconds");
    if (!av_cli_owner_options_valid(project, user))
        return AV_EXIT_USAGE;
    if (!av_cli_read_xml(argc > 1 ? argv[1] : "-", &xml, &len, &err))
        return av_cli_fail(err);
    if ((project || user) && !av_cli_owner_agrees(xml, len, project, user, &err))
        return av_cli_fail(err);
    {
        g_autoptr(AvDomain) domain = av_domain_parse(xml, len, &err);
        guint hotplug = 0;
        g_autoptr(GPtrArray) requests = domain ? av_domain_requests_full(xml, len, &hotplug, &err) : NULL;

        if (!requests)
            return av_cli_fail(err);
        if (requests->len == 0 && hotplug == 0 && (project || user)) {
            g_autoptr(GError) none = NULL;

            return av_cli_owner_unpinned(&none);
        }
        if (requests->len == 0 && hotplug == 0) {
            /* Nothing asked of accelvirt: the input back, byte for byte,
             * and nothing opened, scanned or saved. */
            fwrite(xml, 1, len, stdout);
            return AV_EXIT_OK;
        }
    }
    if (!av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);
    if (dry_run) {
        /* A dry run reads a snapshot: the shared lock goes before its
         * scan (hooks take the exclusive one). */
        pool = av_cli_open_pool(cli, root, AV_POOL_READ, &err);
        if (pool)
            av_pool_unlock(pool);
    } else if (av_cli_place_check(cli, policy, xml, len, &err)) {
        pool = av_cli_open_synced_pool_again(cli, TRUE, &policy, &host, &err);
    }
    if (!pool)
        return av_cli_fail(err);
    if (!av_cli_place(cli, root, policy, pool, &host, xml, len, dry_run, ttl, &placed, &uuid, &placement, &bitstreams,
                      dry_run ? &topology : NULL, &err))
        return av_cli_fail(err);
    if (!dry_run && (project || user) && !av_pool_placement_pin_owner(pool, uuid, project, user))
        return av_cli_owner_unpinned(&err);
    if (!dry_run && !av_pool_save(pool, &err))
        return av_cli_fail(err);
    /* Programming happens at define and start; stdout is the XML. */
    av_cli_print_program_notes(pool, bitstreams, placement);
    av_cli_print_topology(stderr, "accelvirt: ", topology, placement, TRUE);
    fputs(placed, stdout);
    return AV_EXIT_OK;
}

static gboolean av_cli_hotplug_fill(virConnect *conn, virDomain **dom, GError **error);

/* After a failed define or start of the domain @uuid whose claims were
 * saved: its claims given back, and (@forget: define) its placement record
 * dropped, saved; then @failure printed.  *@pool may be NULL (closed by
 * av_cli_assign()): opened again. */
static int
av_cli_give_back(const AvCli *cli, const AvRoot *root, AvPool **pool, const char *uuid, gboolean forget,
                 GError *failure)
{
    g_autoptr(GError) err = NULL;

    if (!*pool)
        *pool = av_cli_open_pool(cli, root, AV_POOL_WRITE, &err);
    if (*pool) {
        if (forget)
            av_pool_placement_forget(*pool, uuid);
        if (av_cli_drop_claims(*pool, uuid, NULL, &err))
            av_pool_save(*pool, &err);
    }
    if (err) {
        g_autoptr(GError) both = g_error_new(failure->domain, failure->code,
                                             "%s (and its devices could not be given back: %s)", failure->message,
                                             err->message);

        g_error_free(failure);
        return av_cli_fail(both);
    }
    {
        g_autoptr(GError) owned = failure;

        return av_cli_fail(owned);
    }
}

int
av_cli_cmd_define(AvCli *cli, int argc, char **argv)
{
    gint ttl = AV_CLI_CLAIM_TTL_S;
    gboolean dry_run = FALSE;
    g_autofree char *project = NULL;
    g_autofree char *user = NULL;
    const GOptionEntry entries[] = {
        { "claim-ttl", 0, 0, G_OPTION_ARG_INT, &ttl,
          "Seconds the devices stay reserved if the domain is not started (0: until undefined)", "S" },
        { "dry-run", 'n', 0, G_OPTION_ARG_NONE, &dry_run,
          "Reserve, program and define nothing: only say where the domain would go", NULL },
        { "project", 0, 0, G_OPTION_ARG_STRING, &project,
          "Charge the domain's device time to this OpenStack project, whatever its metadata says", "ID" },
        { "user", 0, 0, G_OPTION_ARG_STRING, &user,
          "Charge it to this OpenStack user likewise", "ID" },
        { NULL },
    };
    g_autoptr(GPtrArray) bitstreams = NULL;
    g_autoptr(AvOwner) owner = NULL;
    gboolean saved = FALSE;
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvPlacement) placement = NULL;
    g_autoptr(AvDomain) parsed = NULL;
    g_autoptr(virConnect) conn = NULL;
    g_autoptr(virDomain) dom = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *xml = NULL;
    g_autofree char *placed = NULL;
    g_autofree char *uuid = NULL;
    gsize len = 0;

    if (!av_cli_parse(cli, "define", "FILE",
                      "Place the domain's accelerator requests on this host, reserve the devices and define "
                      "the placed domain in libvirt.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 2)
        return av_cli_usage_error("'define' takes one FILE (or - for stdin)");
    if (ttl < 0)
        return av_cli_usage_error("--claim-ttl must be 0 or more seconds");
    if (!av_cli_owner_options_valid(project, user))
        return AV_EXIT_USAGE;
    if (!av_cli_read_xml(argv[1], &xml, &len, &err) || !av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);
    if ((project || user) && !av_cli_owner_agrees(xml, len, project, user, &err))
        return av_cli_fail(err);
    if (dry_run) {
        g_autoptr(AvGuestTopology) topology = NULL;

        pool = av_cli_open_pool(cli, root, AV_POOL_READ, &err);
        if (pool)
            av_pool_unlock(pool);  /* a snapshot: the lock goes before the scan */
        if (!pool || !av_cli_place(cli, root, policy, pool, NULL, xml, len, TRUE, 0, &placed, &uuid, &placement,
                                   &bitstreams, &topology, &err))
            return av_cli_fail(err);
        parsed = av_domain_parse(placed, strlen(placed), NULL);
        if (cli->json) {
            av_cli_print_json(av_cli_plan_json(parsed ? parsed->name : "?", uuid, placement, pool, bitstreams,
                                               topology));
        } else {
            av_cli_print_placement("would define", parsed ? parsed->name : "?", uuid, placement, pool, bitstreams);
            av_cli_print_topology(stdout, "  ", topology, placement, TRUE);
        }
        return AV_EXIT_OK;
    }
    conn = av_cli_connect(cli, &err);
    if (!conn)
        return av_cli_fail(err);
    if (av_cli_place_check(cli, policy, xml, len, &err))
        pool = av_cli_open_synced_pool_again(cli, TRUE, &policy, &host, &err);
    if (!pool)
        return av_cli_fail(err);
    if (!av_cli_place(cli, root, policy, pool, &host, xml, len, FALSE, ttl, &placed, &uuid, &placement, &bitstreams, NULL,
                      &err))
        return av_cli_fail(err);
    /* Saved with the claims: what the hook charges the devices to. */
    if ((project || user) && !av_pool_placement_pin_owner(pool, uuid, project, user))
        return av_cli_owner_unpinned(&err);
    parsed = av_domain_parse(placed, strlen(placed), NULL);
    if (av_cli_assign_needed(policy, pool, placement->items)) {
        /* Programs and driver commands run with the claims saved and the
         * lock released; a failure gives the claims back, defines nothing. */
        owner = av_owner_new(uuid, parsed ? parsed->name : NULL);
        saved = TRUE;
        if (!av_cli_assign(cli, root, policy, &pool, owner, placement->items, bitstreams, NULL, "define", NULL,
                           &err))
            return av_cli_give_back(cli, root, &pool, uuid, TRUE, g_steal_pointer(&err));
    }
    /* libvirt runs no hook at define: defining under the pool lock is safe.
     * The pool is saved only once libvirt has the domain. */
    dom = virDomainDefineXML(conn, placed);
    if (!dom) {
        av_cli_virt_error(&err, "libvirt refused the placed domain");
        if (saved)
            return av_cli_give_back(cli, root, &pool, uuid, TRUE, g_steal_pointer(&err));
        return av_cli_fail(err);
    }
    if (!av_pool_save(pool, &err))
        return av_cli_fail(err);
    if (!av_cli_hotplug_fill(conn, &dom, &err))
        return av_cli_fail(err);
    if (cli->json)
        av_cli_print_json(av_cli_placement_json(parsed ? parsed->name : "?", uuid, placement, pool, bitstreams));
    else
        av_cli_print_placement("defined", parsed ? parsed->name : "?", uuid, placement, pool, bitstreams);
    return AV_EXIT_OK;
}

/* After libvirt defined *@dom: the empty root ports its <av:hotplug
 * slots="N"/> asks for, counted in the definition as libvirt wrote it
 * (libvirt put the devices that had no address in the first free ports),
 * and the ports lacking added and defined again (av_domain_hotplug_fill()),
 * until N are empty (a few rounds at most: a port added after libvirt's
 * placement stays empty).  *@dom is the domain as defined last. */
static gboolean
av_cli_hotplug_fill(virConnect *conn, virDomain **dom, GError **error)
{
    for (guint round = 0; round < 4; round++) {
        g_autofree char *xml = virDomainGetXMLDesc(*dom, VIR_DOMAIN_XML_INACTIVE | VIR_DOMAIN_XML_SECURE);
        g_autofree char *filled = NULL;
        virDomain *redefined;
        guint added = 0;

        if (!xml)
            return av_cli_virt_error(error, "cannot read the defined domain back for its hot-plug ports");
        filled = av_domain_hotplug_fill(xml, strlen(xml), &added, error);
        if (!filled)
            return FALSE;
        if (added == 0)
            return TRUE;
        redefined = virDomainDefineXML(conn, filled);
        if (!redefined)
            return av_cli_virt_error(error, "libvirt refused the domain with its hot-plug ports");
        virDomainFree(*dom);
        *dom = redefined;
    }
    g_set_error(error, AV_ERROR, AV_ERROR_FAILED,
                "the domain is defined, but libvirt keeps filling the empty root ports <av:hotplug> asks for; "
                "give its devices PCI addresses and define it again");
    return FALSE;
}

/* TRUE when every device the placement of @domain names is still free or
 * claimed by it, at the same address. */
static gboolean
av_cli_placement_holds(const AvPool *pool, const AvDomain *domain)
{
    if (!domain->placed || domain->placed->len == 0)
        return FALSE;
    for (guint i = 0; i < domain->placed->len; i++) {
        const AvPlacedDevice *p = g_ptr_array_index(domain->placed, i);
        AvPoolDevice *dev;

        if (p->usb_bus_path)
            dev = p->usb_identity ? av_pool_find(pool, p->usb_identity)
                                  : av_pool_find_address(pool, AV_DEVICE_KIND_USB, p->usb_bus_path);
        else if (!p->pci_address)
            continue; /* mdevs are checked by the hook at prepare */
        else
            dev = av_pool_find_address(pool, AV_DEVICE_KIND_PCI, p->pci_address);
        if (!dev || g_strcmp0(dev->profile, p->profile) != 0)
            return FALSE;
        if (dev->state == AV_DEVICE_STATE_FREE)
            continue;
        if (dev->state == AV_DEVICE_STATE_CLAIMED && dev->owner &&
            g_strcmp0(dev->owner->domain_uuid, domain->uuid) == 0)
            continue;
        return FALSE;
    }
    return TRUE;
}

/* The placement of @xml with every USB stick where its pool identity is
 * now on @host (bus path, bus and device numbers: they change when a stick
 * re-enumerates), the node's CPUs from @host; *ret_usb says whether it has
 * a stick at all.  A stick placed by an older accelvirt (no identity) is found
 * by its port in @pool.  NULL with @error when the placement does not
 * read. */
static AvPlacement *
av_cli_usb_refreshed(const char *xml, const AvHost *host, const AvPool *pool, gboolean *ret_usb, GError **error)
{
    g_autoptr(AvPlacement) placement = av_domain_placement(xml, strlen(xml), error);

    *ret_usb = FALSE;
    if (!placement)
        return NULL;
    for (guint i = 0; i < host->numa_nodes->len; i++) {
        const AvNumaNode *n = g_ptr_array_index(host->numa_nodes, i);

        if (n->id == placement->numa_node && n->cpus)
            g_array_append_vals(placement->cpus, n->cpus->data, n->cpus->len);
    }
    for (guint i = 0; i < placement->items->len; i++) {
        AvPlacedItem *item = g_ptr_array_index(placement->items, i);
        const AvPoolDevice *dev;
        const AvUsbDevice *usb;

        if (item->attach != AV_ATTACH_USB)
            continue;
        *ret_usb = TRUE;
        dev = item->identity ? av_pool_find(pool, item->identity)
                             : av_pool_find_address(pool, AV_DEVICE_KIND_USB, item->usb_bus_path);
        usb = dev ? av_pool_find_usb_device(host->usb, dev->identity, dev->address) : NULL;
        if (!usb)
            continue; /* not on the host: the hook refuses it at prepare, saying so */
        g_free(item->identity);
        item->identity = g_strdup(dev->identity);
        g_free(item->usb_bus_path);
        item->usb_bus_path = g_strdup(usb->bus_path);
        item->usb_busnum = usb->busnum;
        item->usb_devnum = usb->devnum;
    }
    return g_steal_pointer(&placement);
}

/* Before `accelvirt start`: the persistent definition's USB hostdevs
 * refreshed from the pool identities of their sticks (the hook refuses bus
 * and device numbers that name another stick), redefined when that changed
 * them; *ret_refreshed says so. */
static gboolean
av_cli_refresh_usb(virConnect *conn, const char *xml, const AvHost *host, const AvPool *pool,
                   gboolean *ret_refreshed, GError **error)
{
    gboolean usb = FALSE;
    g_autoptr(AvPlacement) placement = av_cli_usb_refreshed(xml, host, pool, &usb, error);
    g_autofree char *out = NULL;
    g_autoptr(virDomain) redefined = NULL;

    *ret_refreshed = FALSE;
    if (!placement)
        return FALSE;
    if (!usb)
        return TRUE;
    out = av_domain_remap(xml, strlen(xml), placement, error);
    if (!out)
        return FALSE;
    if (strcmp(out, xml) == 0)
        return TRUE;
    redefined = virDomainDefineXML(conn, out);
    if (!redefined) {
        av_cli_virt_error(error, "libvirt refused the domain with its USB sticks' bus and device numbers "
                          "refreshed");
        return FALSE;
    }
    *ret_refreshed = TRUE;
    return TRUE;
}

/* `accelvirt start` of a domain whose placement holds: the devices of its
 * pool placement record (what the hook checks at prepare) that must be
 * programmed, or whose profile has "on_assign", are claimed for it when
 * free (until AV_CLI_CLAIM_TTL_S from now; av_cli_assign() renews a claim
 * that would end before its program could) and given to it
 * (av_cli_assign(): programmed unless their record says they hold their
 * bitstream; on_assign for those claimed now).  Nothing to do: TRUE at
 * once.  *@pool as av_cli_assign() leaves it. */
static gboolean
av_cli_start_assign(const AvCli *cli, const AvRoot *root, const AvPolicy *policy, AvPool **pool,
                    const AvOwner *owner, GError **error)
{
    const AvPoolPlacement *record = av_pool_placement_find(*pool, owner->domain_uuid);
    g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func((GDestroyNotify)av_placed_item_free);
    g_autoptr(GPtrArray) bitstreams = g_ptr_array_new_with_free_func((GDestroyNotify)av_bitstream_free);
    g_autoptr(GHashTable) assign = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    gint64 expires = g_get_real_time() / G_USEC_PER_SEC + AV_CLI_CLAIM_TTL_S;
    gboolean program = FALSE;

    for (guint i = 0; record && i < record->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(record->items, i);
        const AvProfile *profile = av_policy_find(policy, item->profile);
        AvPoolDevice *dev = item->identity ? av_pool_find(*pool, item->identity) : NULL;
        gboolean held = dev && dev->programmed && item->bitstream &&
                        g_str_equal(dev->programmed->sha256, item->bitstream);
        gboolean on_assign = profile && profile->drivers[AV_DRIVER_ON_ASSIGN];
        AvPlacedItem *copy;

        if (!dev || ((!item->bitstream || held) && !on_assign))
            continue;
        if (dev->state == AV_DEVICE_STATE_FREE) {
            if (!av_pool_claim(*pool, dev, owner, expires, error))
                return FALSE;
            if (on_assign)
                g_hash_table_add(assign, g_strdup(dev->identity));
        } else if (!(dev->state == AV_DEVICE_STATE_CLAIMED && dev->owner &&
                     g_strcmp0(dev->owner->domain_uuid, owner->domain_uuid) == 0)) {
            continue; /* av_cli_placement_holds() said it is ours or free */
        }
        if (item->bitstream && !held) {
            program = TRUE;
            if (!av_cli_bitstream_by_sha256(bitstreams, item->bitstream)) {
                AvBitstream *b = av_bitstream_lookup(cli->state_dir, item->bitstream, error);

                if (!b)
                    return FALSE;
                g_ptr_array_add(bitstreams, b);
            }
        }
        /* A copy: av_cli_assign() closes the pool that owns the record. */
        copy = g_new0(AvPlacedItem, 1);
        copy->profile = g_strdup(item->profile);
        copy->identity = g_strdup(item->identity);
        copy->pci_address = g_strdup(item->pci_address);
        copy->bitstream = g_strdup(item->bitstream);
        g_ptr_array_add(items, copy);
    }
    if (!program && g_hash_table_size(assign) == 0)
        return TRUE;
    return av_cli_assign(cli, root, policy, pool, owner, items, bitstreams, assign, "start", NULL, error);
}

/* "PROFILE x COUNT[ bitstream B][ function F], ..." of @requests.
 * Caller frees. */
static char *
av_cli_requests_text(const GPtrArray *requests)
{
    g_autoptr(GString) out = g_string_new(NULL);

    for (guint i = 0; requests && i < requests->len; i++) {
        const AvRequest *r = g_ptr_array_index(requests, i);

        g_string_append_printf(out, "%s%s x %u%s%s%s%s", i ? ", " : "", r->profile, r->count,
                               r->bitstream ? " bitstream " : "", r->bitstream ? r->bitstream : "",
                               r->function ? " function " : "", r->function ? r->function : "");
    }
    return g_string_free(g_steal_pointer(&out), FALSE);
}

/* TRUE when the requests of the domain's metadata, @requests, are those the
 * pool recorded when the operator placed it (`define`, `rewrite`: @record,
 * may be NULL), the same in the same order; else FALSE with one sentence.
 * `start` re-places a domain whose devices went elsewhere, but only what
 * was placed for it: a running domain's metadata is its owner's to change
 * (virDomainSetMetadata), and a count raised there must not claim more. */
static gboolean
av_cli_requests_recorded(const AvDomain *domain, const AvPoolPlacement *record, const GPtrArray *requests,
                         GError **error)
{
    gboolean same = record && record->requests->len == requests->len;
    g_autofree char *asked = NULL;
    g_autofree char *placed = NULL;

    for (guint i = 0; same && i < requests->len; i++) {
        const AvRequest *a = g_ptr_array_index(requests, i);
        const AvRequest *b = g_ptr_array_index(record->requests, i);

        same = g_strcmp0(a->profile, b->profile) == 0 && a->count == b->count &&
               a->granularity_set == b->granularity_set && (!a->granularity_set || a->granularity == b->granularity) &&
               a->numa_any == b->numa_any && a->p2p == b->p2p && g_strcmp0(a->bitstream, b->bitstream) == 0 &&
               g_strcmp0(a->function, b->function) == 0;
    }
    if (same)
        return TRUE;
    asked = av_cli_requests_text(requests);
    placed = record ? av_cli_requests_text(record->requests) : NULL;
    g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                "domain '%s' must be placed again and its metadata asks for %s, %s%s%s: start places again only "
                "what was placed; place it with 'accelvirt define' or 'accelvirt rewrite'", domain->name, asked,
                record ? "where accelvirt placed " : "which accelvirt never placed for it",
                record ? placed : "", record ? " for it" : "");
    return FALSE;
}

int
av_cli_cmd_start(AvCli *cli, int argc, char **argv)
{
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(virConnect) conn = NULL;
    g_autoptr(virDomain) dom = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *xml = NULL;
    g_autoptr(AvDomain) domain = NULL;
    g_autoptr(GPtrArray) requests = NULL;
    gboolean replaced = FALSE;
    gboolean refreshed = FALSE;
    gboolean replace = FALSE;
    const GOptionEntry entries[] = {
        { "replace", 0, 0, G_OPTION_ARG_NONE, &replace,
          "Place the domain again even if its devices are free (after 'accelvirt plan --defrag')", NULL },
        { NULL },
    };

    if (!av_cli_parse(cli, "start", "DOMAIN",
                      "Start a defined domain.  When the devices it was placed on are taken or gone, place it "
                      "again on free ones, redefine it, then start it.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 2)
        return av_cli_usage_error("'start' takes one DOMAIN (name or UUID)");
    if (!av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);
    conn = av_cli_connect(cli, &err);
    if (!conn)
        return av_cli_fail(err);
    dom = av_cli_lookup(conn, argv[1], &err);
    if (!dom)
        return av_cli_fail(err);
    xml = virDomainGetXMLDesc(dom, VIR_DOMAIN_XML_INACTIVE | VIR_DOMAIN_XML_SECURE);
    if (!xml) {
        av_cli_virt_error(&err, "cannot read the domain's XML");
        return av_cli_fail(err);
    }
    domain = av_domain_parse(xml, strlen(xml), &err);
    if (!domain)
        return av_cli_fail(err);
    requests = av_domain_requests(xml, strlen(xml), &err);
    if (!requests)
        return av_cli_fail(err);

    if (requests->len > 0) {
        g_autoptr(AvHost) host = NULL;
        g_autoptr(AvPool) pool = av_cli_open_synced_pool_again(cli, TRUE, &policy, &host, &err);
        g_autoptr(AvOwner) owner = av_owner_new(domain->uuid, domain->name);

        if (!pool)
            return av_cli_fail(err);
        if (replace || !av_cli_placement_holds(pool, domain)) {
            g_autofree char *placed = NULL;
            g_autoptr(AvPlacement) placement = NULL;
            g_autoptr(GPtrArray) bitstreams = NULL;
            g_autoptr(virDomain) redefined = NULL;

            if (!av_cli_requests_recorded(domain, av_pool_placement_find(pool, domain->uuid), requests, &err))
                return av_cli_fail(err);
            if (!av_cli_drop_claims(pool, domain->uuid, NULL, &err) ||
                !av_cli_place(cli, root, policy, pool, &host, xml, strlen(xml), FALSE, AV_CLI_CLAIM_TTL_S,
                              &placed, NULL, &placement, &bitstreams, NULL, &err))
                return av_cli_fail(err);
            if (av_cli_assign_needed(policy, pool, placement->items) &&
                !av_cli_assign(cli, root, policy, &pool, owner, placement->items, bitstreams, NULL, "start", NULL,
                               &err))
                return av_cli_give_back(cli, root, &pool, domain->uuid, FALSE, g_steal_pointer(&err));
            redefined = virDomainDefineXML(conn, placed);
            if (!redefined) {
                av_cli_virt_error(&err, "libvirt refused the re-placed domain");
                return av_cli_give_back(cli, root, &pool, domain->uuid, FALSE, g_steal_pointer(&err));
            }
            if (!av_cli_hotplug_fill(conn, &redefined, &err))
                return av_cli_fail(err);
            if (!cli->json)
                av_cli_print_placement("re-placed", domain->name, domain->uuid, placement, pool, bitstreams);
            replaced = TRUE;
        } else if (!av_cli_refresh_usb(conn, xml, host, pool, &refreshed, &err)) {
            return av_cli_fail(err);
        } else {
            if (refreshed && !cli->json)
                printf("refreshed the USB bus and device numbers of domain '%s'\n", domain->name);
            if (!av_cli_start_assign(cli, root, policy, &pool, owner, &err))
                return av_cli_give_back(cli, root, &pool, domain->uuid, FALSE, g_steal_pointer(&err));
        }
        if (!av_pool_save(pool, &err))
            return av_cli_fail(err);
        /* The pool lock goes before the start: the hook's prepare takes it. */
    }
    if (virDomainCreate(dom) < 0) {
        av_cli_virt_error(&err, "libvirt could not start the domain");
        return av_cli_fail(err);
    }
    if (cli->json) {
        json_t *o = json_object();

        json_object_set_new(o, "domain", json_string(domain->name));
        json_object_set_new(o, "uuid", av_json_string_or_null(domain->uuid));
        json_object_set_new(o, "replaced", json_boolean(replaced));
        json_object_set_new(o, "usb_refreshed", json_boolean(refreshed));
        av_cli_print_json(o);
    } else {
        printf("started domain '%s'\n", domain->name);
    }
    return AV_EXIT_OK;
}

int
av_cli_cmd_undefine(AvCli *cli, int argc, char **argv)
{
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(virConnect) conn = NULL;
    g_autoptr(virDomain) dom = NULL;
    g_autoptr(GError) err = NULL;
    char uuid[VIR_UUID_STRING_BUFLEN];
    const char *name;
    guint dropped = 0;

    if (!av_cli_parse(cli, "undefine", "DOMAIN",
                      "Undefine the domain in libvirt and give back the devices reserved for it.",
                      NULL, &argc, &argv))
        return AV_EXIT_USAGE;
    if (argc != 2)
        return av_cli_usage_error("'undefine' takes one DOMAIN (name or UUID)");
    conn = av_cli_connect(cli, &err);
    if (!conn)
        return av_cli_fail(err);
    dom = av_cli_lookup(conn, argv[1], &err);
    if (!dom)
        return av_cli_fail(err);
    if (virDomainGetUUIDString(dom, uuid) < 0) {
        av_cli_virt_error(&err, "cannot read the domain's UUID");
        return av_cli_fail(err);
    }
    name = virDomainGetName(dom);
    pool = av_cli_open_pool(cli, NULL, AV_POOL_WRITE, &err);
    if (!pool)
        return av_cli_fail(err);
    if (virDomainUndefineFlags(dom, VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA |
                                        VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA) < 0) {
        av_cli_virt_error(&err, "libvirt could not undefine the domain");
        return av_cli_fail(err);
    }
    av_pool_placement_forget(pool, uuid);
    if (!av_cli_drop_claims(pool, uuid, &dropped, &err) || !av_pool_save(pool, &err))
        return av_cli_fail(err);
    if (cli->json) {
        json_t *o = json_object();

        json_object_set_new(o, "domain", json_string(name));
        json_object_set_new(o, "uuid", json_string(uuid));
        json_object_set_new(o, "released", json_integer(dropped));
        av_cli_print_json(o);
    } else {
        printf("undefined domain '%s'; %u reserved device%s given back\n", name, dropped, dropped == 1 ? "" : "s");
    }
    return AV_EXIT_OK;
}

/* "vCPUs 0-3 on CPUs 0-15,32-47, vCPU 4 on CPUs 16-31": the vcpupins of
 * @domain, consecutive vCPUs with one cpuset together; NULL when it pins
 * none.  Caller frees. */
static char *
av_cli_vcpupins_describe(const AvDomain *domain)
{
    GString *s = g_string_new(NULL);
    guint n = domain->vcpupins ? domain->vcpupins->len : 0;

    for (guint i = 0; i < n;) {
        const char *set = g_ptr_array_index(domain->vcpupins, i);
        guint last = i;

        while (last + 1 < n && g_strcmp0(g_ptr_array_index(domain->vcpupins, last + 1), set) == 0)
            last++;
        if (set) {
            if (s->len)
                g_string_append(s, ", ");
            if (last == i)
                g_string_append_printf(s, "vCPU %u on CPUs %s", i, set);
            else
                g_string_append_printf(s, "vCPUs %u-%u on CPUs %s", i, last, set);
        }
        i = last + 1;
    }
    if (s->len == 0) {
        g_string_free(s, TRUE);
        return NULL;
    }
    return g_string_free(s, FALSE);
}

/* `plan FILE`'s text: what a rewrite of the domain would write.
 * Per device its alias, profile, host device, host node and host PCIe
 * position; the domain's node and the pinning of @placed (the rewritten
 * XML, parsed); the guest topology. */
static void
av_cli_print_plan(const AvDomain *placed, const char *uuid, const AvPlacement *placement,
                  const AvGuestTopology *topology)
{
    g_autofree char *vcpus = av_cli_vcpupins_describe(placed);
    g_autoptr(GString) pinning = g_string_new(NULL);
    g_autofree char *printable = NULL;

    if (!av_cli_print_placement_head("plan for", placed->name ? placed->name : "?", uuid, placement,
                                     "nothing to place"))
        return;
    for (guint i = 0; i < placement->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);
        /* g_string_append_printf() only: GCC 14 takes the NULL test of
         * glib 2.84's inline g_string_append() for a NULL string. */
        g_autoptr(GString) line = g_string_new(NULL);

        g_string_append_printf(line, "  " AV_REWRITE_ALIAS_PREFIX "%-3u %-20s ", i, item->profile);
        if (item->mdev_uuid)
            g_string_append_printf(line, "mdev %s (%s) on %s", item->mdev_uuid, item->mdev_type ? item->mdev_type : "?",
                                   item->mdev_parent ? item->mdev_parent : "the parent the hook picks at prepare");
        else if (item->usb_bus_path)
            g_string_append_printf(line, "usb %s", item->usb_bus_path);
        else
            g_string_append_printf(line, "%s", item->pci_address ? item->pci_address : "?");
        if (item->netdev)
            g_string_append_printf(line, ", interface %s (direct, passthrough)", item->netdev);
        if (item->numa_node >= 0)
            g_string_append_printf(line, ", host node %d", item->numa_node);
        else
            g_string_append_printf(line, "%s", ", host node unknown");
        if (item->switch_port)
            g_string_append_printf(line, ", behind host switch %s (root port %s)", item->switch_port,
                                   item->root_port ? item->root_port : "unknown");
        else if (item->root_port)
            g_string_append_printf(line, ", on host root port %s", item->root_port);
        else if (item->attach == AV_ATTACH_VFIO_PCI || item->attach == AV_ATTACH_SRIOV_VF)
            g_string_append_printf(line, "%s", ", on a host root bus (or its position is unknown)");
        if (item->gpudirect)
            g_string_append_printf(line, "%s", ", NVIDIA GPU");
        printf("%s\n", line->str);
    }
    if (vcpus)
        g_string_append(pinning, vcpus);
    if (placed->emulatorpin)
        g_string_append_printf(pinning, "%semulator on CPUs %s", pinning->len ? "; " : "", placed->emulatorpin);
    if (placed->numatune_memory_nodeset)
        g_string_append_printf(pinning, "%smemory %s on host nodes %s", pinning->len ? "; " : "",
                               placed->numatune_memory_mode ? placed->numatune_memory_mode : "strict",
                               placed->numatune_memory_nodeset);
    if (pinning->len == 0)
        g_string_append(pinning, "none (nothing ties the domain to a NUMA node)");
    /* The domain's own pinning, when it has some, is the tenant's text. */
    printable = av_cli_printable(pinning->str);
    printf("  pinning: %s\n", printable);
    for (guint i = 0; i < placement->warnings->len; i++)
        printf("  warning: %s\n", (const char *)g_ptr_array_index(placement->warnings, i));
    av_cli_print_topology(stdout, "", topology, placement, FALSE);
}

/* `accelvirt plan [FILE|-]`: the domain placed as `rewrite --dry-run`
 * places it (nothing reserved, saved or defined), and what the rewrite would
 * write, for people or as JSON (define --dry-run's, with "topology"). */
static int
av_cli_plan_domain(AvCli *cli, const char *path)
{
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *xml = NULL;
    g_autofree char *placed = NULL;
    g_autofree char *uuid = NULL;
    g_autoptr(AvPlacement) placement = NULL;
    g_autoptr(GPtrArray) bitstreams = NULL;
    g_autoptr(AvGuestTopology) topology = NULL;
    g_autoptr(AvDomain) parsed = NULL;
    gsize len = 0;

    if (!av_cli_read_xml(path, &xml, &len, &err) || !av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);
    pool = av_cli_open_pool(cli, root, AV_POOL_READ, &err);
    if (pool)
        av_pool_unlock(pool);  /* a snapshot: the lock goes before the scan */
    if (!pool || !av_cli_place(cli, root, policy, pool, NULL, xml, len, TRUE, 0, &placed, &uuid, &placement, &bitstreams,
                               &topology, &err))
        return av_cli_fail(err);
    parsed = av_domain_parse(placed, strlen(placed), &err);
    if (!parsed)
        return av_cli_fail(err);
    if (cli->json)
        av_cli_print_json(av_cli_plan_json(parsed->name, uuid, placement, pool, bitstreams, topology));
    else
        av_cli_print_plan(parsed, uuid, placement, topology);
    return AV_EXIT_OK;
}

/* `accelvirt plan --defrag`: how fragmented the pool is. */
static int
av_cli_plan_defrag(AvCli *cli)
{
    g_autoptr(AvRoot) root = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(GError) err = NULL;
    json_t *report;
    json_t *profiles, *moves;

    if (!av_cli_open(cli, &root, &policy, &err))
        return av_cli_fail(err);
    pool = av_cli_open_pool(cli, root, AV_POOL_READ, &err);
    if (!pool)
        return av_cli_fail(err);
    /* A report: the pool as read, the shared lock let go before the scan
     * (hooks take the exclusive one). */
    av_pool_unlock(pool);
    host = av_host_scan(root, &err);
    if (!host)
        return av_cli_fail(err);
    report = av_place_defrag_report(host, policy, pool);
    if (cli->json) {
        av_cli_print_json(report);
        return AV_EXIT_OK;
    }
    profiles = json_object_get(report, "profiles");
    moves = json_object_get(report, "moves");
    printf("%-24s  %-11s  %5s  %5s  %6s  %s\n", "PROFILE", "GRANULARITY", "CARDS", "FREE", "PARTLY", "FRAGMENTATION");
    for (gsize i = 0; i < json_array_size(profiles); i++) {
        json_t *p = json_array_get(profiles, i);

        printf("%-24s  %-11s  %5" JSON_INTEGER_FORMAT "  %5" JSON_INTEGER_FORMAT "  %6" JSON_INTEGER_FORMAT "  %.0f%%\n",
               json_string_value(json_object_get(p, "profile")),
               json_string_value(json_object_get(p, "granularity")),
               json_integer_value(json_object_get(p, "cards")),
               json_integer_value(json_object_get(p, "cards_free")),
               json_integer_value(json_object_get(p, "cards_partly_used")),
               100.0 * json_number_value(json_object_get(p, "fragmentation")));
    }
    if (json_array_size(moves) == 0) {
        printf("\nNo move would free a whole card.\n");
    } else {
        printf("\nMoves that would free whole cards (stop the domain, then 'accelvirt start --replace DOMAIN'):\n");
        for (gsize i = 0; i < json_array_size(moves); i++) {
            json_t *m = json_array_get(moves, i);

            printf("  %s: %s -> %s frees card %s\n", json_string_value(json_object_get(m, "domain")),
                   json_string_value(json_object_get(m, "from")), json_string_value(json_object_get(m, "to")),
                   json_string_value(json_object_get(m, "frees_card")));
        }
    }
    json_decref(report);
    return AV_EXIT_OK;
}

int
av_cli_cmd_plan(AvCli *cli, int argc, char **argv)
{
    gboolean defrag = FALSE;
    const GOptionEntry entries[] = {
        { "defrag", 0, 0, G_OPTION_ARG_NONE, &defrag,
          "Report how fragmented the pool is and which moves would free whole cards", NULL },
        { NULL },
    };

    if (!av_cli_parse(cli, "plan", "[FILE|-] | --defrag",
                      "With a domain XML (FILE, or - or nothing for stdin): place it on this host as 'rewrite "
                      "--dry-run' does, reserving nothing, and print what the rewrite would write: per device "
                      "its alias, host device, NUMA node and PCIe switch or root port, the domain's pinning, "
                      "and the guest NUMA cells, switches and GPUDirect cliques.  With --defrag: how fragmented "
                      "the pool is: per profile, how many cards are wholly free and how many partly used, and "
                      "which moves of held functions would free whole cards.",
                      entries, &argc, &argv))
        return AV_EXIT_USAGE;
    if (defrag && argc > 1)
        return av_cli_usage_error("'plan' takes either --defrag or a domain FILE, not both");
    if (argc > 2)
        return av_cli_usage_error("'plan' takes one FILE (or - for stdin)");
    if (defrag)
        return av_cli_plan_defrag(cli);
    return av_cli_plan_domain(cli, argc > 1 ? argv[1] : "-");
}
