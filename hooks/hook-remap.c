/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the hook's "restore begin" and "migrate begin" (hook.h): the
 * devices accelvirt placed for a domain restored or migrated to this host,
 * checked against it, and the domain XML printed on stdout for libvirt,
 * unchanged, or remapped to the same cards at their new addresses or to a
 * new placement of the domain's requests. */
#include "config.h"

#include "hook.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "domain/av-rewrite.h"
#include "place/av-place.h"
#include "util/av-json.h"

/* The operation as libvirt names it, for messages: "restore" or "migrate". */
static const char *
av_hook_remap_verb(const char *op)
{
    return g_str_equal(op, "migrate") ? "migrate" : "restore";
}

/* What the journal says about cards that left an address ("readdressed"
 * entries): old_address -> the identity of the card that last left it.
 * The journal's history is read without the pool's lock (another hook
 * must never wait behind that read); under the lock only what was
 * appended after it (av_hook_moved_tail()). */
typedef struct {
    GHashTable *last;   /* old_address -> identity */
    gboolean loaded;    /* the lockless read was made */
    gboolean tail_read; /* ... and, under the lock, what came after it */
    gboolean whole;     /* the last pass: read whatever is missing under the lock */
    dev_t dev;          /* the journal.jsonl read (an archive's cut replaces it) */
    ino_t ino;
    off_t end;          /* the end of its last whole line read */
} AvHookMoved;

/* The hook's remap pass must drop the lock and read the journal first. */
#define AV_HOOK_REMAP_AGAIN (-1)

/* Reads the lines of @f from its position to its last whole line into
 * @moved (the journal only grows: the last entry naming an address wins).
 * Only the lines naming that event are parsed. */
static void
av_hook_moved_read(FILE *f, off_t from, AvHookMoved *moved)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    off_t at = from;

    while ((n = getline(&line, &cap, f)) > 0) {
        g_autoptr(json_t) entry = NULL;
        const char *event, *old, *id;

        if (line[n - 1] != '\n')
            break;  /* a line being written: the tail under the lock reads it */
        at += (off_t)n;
        if (!strstr(line, "\"readdressed\""))
            continue;
        entry = json_loadb(line, (size_t)n, 0, NULL);
        event = json_string_value(json_object_get(entry, "event"));
        old = json_string_value(json_object_get(entry, "old_address"));
        id = json_string_value(json_object_get(entry, "identity"));
        if (g_strcmp0(event, "readdressed") == 0 && old && id)
            g_hash_table_replace(moved->last, g_strdup(old), g_strdup(id));
    }
    free(line);
    moved->end = at;
}

/* journal.jsonl of @state_dir open for reading, or NULL; O_NONBLOCK: a
 * FIFO in its place must not hang the hook (refused as not regular). */
static FILE *
av_hook_moved_open(const char *state_dir, struct stat *st)
{
    g_autofree char *path = g_build_filename(state_dir, "journal.jsonl", NULL);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    FILE *f;

    if (fd < 0)
        return NULL;
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode) || !(f = fdopen(fd, "r"))) {
        close(fd);
        return NULL;
    }
    return f;
}

/* The lockless read of the live journal of @state_dir, whole.  A journal
 * that cannot be read says nothing moved, as before. */
static void
av_hook_moved_load(const char *state_dir, AvHookMoved *moved)
{
    struct stat st;
    FILE *f = av_hook_moved_open(state_dir, &st);

    g_hash_table_remove_all(moved->last);
    moved->loaded = TRUE;
    moved->tail_read = FALSE;
    moved->dev = 0;
    moved->ino = 0;
    moved->end = 0;
    if (!f)
        return;
    moved->dev = st.st_dev;
    moved->ino = st.st_ino;
    av_hook_moved_read(f, 0, moved);
    fclose(f);
}

/* Under the pool's lock: the lines appended since the lockless read (a
 * bounded tail: what was written meanwhile, this hook's scan's own entries
 * among them).  FALSE when journal.jsonl was replaced meanwhile (an
 * archive's cut) and this is not the last pass: the caller drops the lock
 * and reads it again; on the last pass the new file is read whole. */
static gboolean
av_hook_moved_tail(const char *state_dir, AvHookMoved *moved)
{
    FILE *f;
    struct stat st;
    gboolean ok = TRUE;

    if (moved->tail_read)
        return TRUE;
    f = av_hook_moved_open(state_dir, &st);
    if (!f) {
        moved->tail_read = TRUE;
        return TRUE;
    }
    if (st.st_dev == moved->dev && st.st_ino == moved->ino && st.st_size >= moved->end &&
        fseeko(f, moved->end, SEEK_SET) == 0) {
        av_hook_moved_read(f, moved->end, moved);
    } else if (!moved->whole) {
        ok = FALSE;
    } else {
        /* Its entries come after those read before, or are the same ones
         * again in the same order: the last still wins. */
        moved->dev = st.st_dev;
        moved->ino = st.st_ino;
        av_hook_moved_read(f, 0, moved);
    }
    fclose(f);
    moved->tail_read = ok;
    return ok;
}

/* The identity of the card the journal last saw leave @address, or NULL
 * (borrowed from @moved). */
static const char *
av_hook_journal_moved(const AvHookMoved *moved, const char *address)
{
    return g_hash_table_lookup(moved->last, address);
}

/* Why the placed PCI device @item of the pool's record (its
 * profile and identity are what accelvirt recorded at placement, never
 * the domain's metadata) cannot go back to @domain as it is: NULL when it
 * can, with *ret_address set to where it is now (borrowed from the pool).
 * The identity follows the card when its bus address changed (seed 003):
 * when the pool has no device of that identity, the card the journal last
 * saw leave the recorded address ("readdressed"). */
static char *
av_hook_remap_problem(const AvHost *host, const AvPolicy *policy, AvPool *pool, const AvDomain *domain,
                      const AvHookMoved *moved, int node, const AvPlacedItem *item, const char **ret_address)
{
    AvPoolDevice *dev = item->identity ? av_pool_find(pool, item->identity) : NULL;
    const AvPciDevice *pci;
    const AvProfile *profile;
    g_autoptr(GError) error = NULL;

    if ((!dev || dev->state == AV_DEVICE_STATE_MISSING) && item->pci_address) {
        const char *moved_to = av_hook_journal_moved(moved, item->pci_address);
        AvPoolDevice *card = moved_to ? av_pool_find(pool, moved_to) : NULL;

        if (card)
            dev = card;
    }
    if (!dev || dev->state == AV_DEVICE_STATE_MISSING || !dev->address ||
        !(pci = av_host_find_pci(host, dev->address)))
        return g_strdup_printf("device %s (profile '%s') is not on this host",
                               item->pci_address ? item->pci_address : item->identity, item->profile);
    if (g_strcmp0(dev->profile, item->profile) != 0)
        return g_strdup_printf("device %s is of profile '%s' on this host, not '%s'", dev->address,
                               dev->profile ? dev->profile : "none", item->profile);
    if (!av_hook_check_available(dev, domain, &error))
        return g_strdup(error->message);
    profile = av_policy_find(policy, item->profile);
    if (node >= 0 && pci->numa_node >= 0 && pci->numa_node != node && profile && profile->numa != AV_NUMA_NONE)
        return g_strdup_printf("device %s is on NUMA node %d, not on the domain's node %d", dev->address,
                               pci->numa_node, node);
    *ret_address = dev->address;
    return NULL;
}

/* Why the placed USB stick @item of the pool's record cannot go back to
 * @domain as it is: NULL when it can, with *ret_usb set to where it is now
 * (borrowed from @host, which holds every USB device), found by its pool
 * identity (its bus and device numbers change when it re-enumerates).  A
 * stick placed by an older accelvirt (no identity) is left as it is: NULL, and
 * *ret_usb NULL. */
static char *
av_hook_remap_usb_problem(const AvHost *host, AvPool *pool, const AvDomain *domain, const AvPlacedItem *item,
                          const AvUsbDevice **ret_usb)
{
    const AvPoolDevice *dev = item->identity ? av_pool_find(pool, item->identity) : NULL;
    g_autoptr(GError) error = NULL;

    *ret_usb = NULL;
    if (!item->identity)
        return NULL;
    *ret_usb = dev ? av_pool_find_usb_device(host->usb, dev->identity, dev->address) : NULL;
    if (!*ret_usb)
        return g_strdup_printf("USB stick %s (profile '%s') is not on this host", item->identity, item->profile);
    if (!av_hook_check_available(dev, domain, &error)) {
        *ret_usb = NULL;
        return g_strdup(error->message);
    }
    return NULL;
}

/* @item of a remapped placement is at the USB device @stick now (NULL:
 * left as recorded). */
static void
av_hook_remap_set_stick(AvPlacedItem *item, const AvUsbDevice *stick)
{
    if (!stick)
        return;
    g_free(item->usb_bus_path);
    item->usb_bus_path = g_strdup(stick->bus_path);
    item->usb_busnum = stick->busnum;
    item->usb_devnum = stick->devnum;
    /* The pool's record keeps no ids: the stick's own. */
    item->usb_vendor = stick->vendor_id;
    item->usb_product = stick->product_id;
}

/* The CPUs of NUMA node @id of @host (a new array), or NULL. */
static GArray *
av_hook_node_cpus(const AvHost *host, int id)
{
    for (guint i = 0; i < host->numa_nodes->len; i++) {
        const AvNumaNode *n = g_ptr_array_index(host->numa_nodes, i);

        if (n->id == id && n->cpus && n->cpus->len > 0)
            return g_array_copy(n->cpus);
    }
    return NULL;
}

/* The hostdev of @domain with the alias ua-accelvirt-@index, or NULL. */
static const AvHostdev *
av_hook_hostdev_of_alias(const AvDomain *domain, guint index)
{
    g_autofree char *alias = g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%u", index);

    for (guint i = 0; i < domain->hostdevs->len; i++) {
        const AvHostdev *h = g_ptr_array_index(domain->hostdevs, i);

        if (g_strcmp0(h->alias, alias) == 0)
            return h;
    }
    return NULL;
}

/* How the accelvirt metadata of the domain (@current, @requests: what its
 * XML says now) differs from the pool's @record of its placement, in a
 * sentence; NULL when it does not.  Caller frees. */
static char *
av_hook_metadata_disagrees(const AvPoolPlacement *record, const AvPlacement *current, const GPtrArray *requests)
{
    if (!requests || requests->len != record->requests->len)
        return g_strdup_printf("it asks for %u request(s), accelvirt placed %u", requests ? requests->len : 0,
                               record->requests->len);
    for (guint i = 0; i < requests->len; i++) {
        const AvRequest *a = g_ptr_array_index(requests, i);
        const AvRequest *b = g_ptr_array_index(record->requests, i);

        if (g_strcmp0(a->profile, b->profile) != 0 || a->count != b->count || a->numa_any != b->numa_any ||
            a->granularity_set != b->granularity_set || (a->granularity_set && a->granularity != b->granularity))
            return g_strdup_printf("its request %u asks for %u of '%s', accelvirt placed %u of '%s'", i, a->count,
                                   a->profile, b->count, b->profile);
    }
    if (!current || current->items->len != record->items->len)
        return g_strdup_printf("its placement names %u device(s), accelvirt placed %u",
                               current ? current->items->len : 0, record->items->len);
    if (current->numa_node != record->numa_node)
        return g_strdup_printf("its placement says NUMA node %d, accelvirt placed it on %d", current->numa_node,
                               record->numa_node);
    for (guint i = 0; i < current->items->len; i++) {
        const AvPlacedItem *a = g_ptr_array_index(current->items, i);
        const AvPlacedItem *b = g_ptr_array_index(record->items, i);

        if (g_strcmp0(a->profile, b->profile) != 0 || a->attach != b->attach ||
            (b->attach == AV_ATTACH_MDEV && g_strcmp0(a->mdev_uuid, b->mdev_uuid) != 0))
            return g_strdup_printf(AV_REWRITE_ALIAS_PREFIX "%u is of profile '%s' in its placement, accelvirt "
                                   "placed '%s'", i, a->profile, b->profile);
    }
    return NULL;
}

/* "restore begin" and "migrate begin" of a domain accelvirt placed: the
 * devices of its placement checked against this host.  What the devices
 * must be, and what to place again when they cannot be had, is what the
 * pool recorded when accelvirt placed the domain, never
 * the domain's own metadata, which a running domain may change: metadata
 * that disagrees with the record is logged and ignored, and a domain the
 * pool has no record of goes through unchanged (prepare checks its devices
 * as for any domain).  The XML goes back unchanged when every recorded
 * device is on this host, free for the domain and at the address its
 * hostdev names; else remapped (av_domain_remap()) to the same cards at
 * their new addresses, or to a new placement of the recorded requests
 * (host-side facts only), which the pool then records.  Nothing is
 * claimed: prepare claims right after.  One pass under the pool's lock;
 * AV_HOOK_REMAP_AGAIN, with nothing written, when it needs the journal's
 * history (a card gone from its address) and @history does not hold it. */
static int
av_hook_remap_once(const AvHookConfig *config, const AvDomain *domain, const char *xml, gsize len, const char *op,
                   AvHookMoved *history)
{
    const char *verb = av_hook_remap_verb(op);
    g_autoptr(GError) error = NULL;
    g_autoptr(AvPolicy) policy = NULL;
    g_autoptr(AvPool) pool = NULL;
    g_autoptr(AvHost) host = NULL;
    g_autoptr(AvPlacement) current = NULL;
    g_autoptr(AvPlacement) placement = NULL;
    g_autoptr(GPtrArray) xml_requests = NULL;
    g_autoptr(GPtrArray) addresses = NULL;
    g_autoptr(GPtrArray) sticks = g_ptr_array_new();
    g_autofree char *problem = NULL;
    g_autofree char *disagreement = NULL;
    g_autofree char *out = NULL;
    const AvPoolPlacement *record;
    gboolean moved = FALSE, usb = FALSE;

    /* Read for the comparison only: a malformed metadata is a disagreement. */
    current = av_domain_placement(xml, len, NULL);
    xml_requests = av_domain_requests(xml, len, NULL);
    policy = av_policy_load_dir(config->policy_dir, &error);
    if (!policy)
        return av_hook_refusef("cannot read the policies: %s", error->message);
    pool = av_hook_pool_open(config, &error);
    if (!pool)
        return av_hook_refuse(error->message);
    record = av_pool_placement_find(pool, domain->uuid);
    if (!record) {
        av_hook_log(LOG_WARNING, "%s: accelvirt recorded no placement of this domain, so its accelvirt metadata "
                    "does not choose devices: the XML goes through unchanged, and prepare checks its devices", verb);
        return av_hook_write_stdout(xml, len, &error) ? 0 : av_hook_refuse(error->message);
    }
    disagreement = av_hook_metadata_disagrees(record, current, xml_requests);

    /* The devices of the placement where the pool has them: read alone
     * when the pool agrees with them, else the whole host. */
    addresses = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < record->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(record->items, i);
        const AvPoolDevice *dev = item->identity ? av_pool_find(pool, item->identity) : NULL;
        const char *address = dev && dev->kind == AV_DEVICE_KIND_PCI ? dev->address : item->pci_address;

        usb = usb || item->attach == AV_ATTACH_USB;
        if (address)
            g_ptr_array_add(addresses, g_strdup(address));
    }
    g_ptr_array_add(addresses, NULL);
    host = av_hook_scan_devices(config, policy, pool, (const char *const *)addresses->pdata, FALSE, usb, &error);
    if (!host)
        return av_hook_refuse(error->message);
    g_clear_pointer(&addresses, g_ptr_array_unref);
    /* A card no longer where the pool has it is looked for in the
     * journal's history, which is never read under the lock: the lock goes,
     * the history is read, and the pass starts again (the caller). */
    for (guint i = 0; i < record->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(record->items, i);
        const AvPoolDevice *dev = item->identity ? av_pool_find(pool, item->identity) : NULL;

        if ((item->attach == AV_ATTACH_VFIO_PCI || item->attach == AV_ATTACH_SRIOV_VF) && item->pci_address &&
            (!dev || dev->state == AV_DEVICE_STATE_MISSING) &&
            (!history->loaded || !av_hook_moved_tail(av_pool_state_dir(pool), history)))
            return AV_HOOK_REMAP_AGAIN;
    }
    if (disagreement)
        av_hook_log(LOG_WARNING, "%s: the domain's accelvirt metadata disagrees with what accelvirt recorded when it "
                    "placed it (%s); it is ignored", verb, disagreement);

    addresses = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < record->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(record->items, i);
        const AvHostdev *h = av_hook_hostdev_of_alias(domain, i);
        const AvUsbDevice *stick = NULL;
        const char *address = NULL;
        char *why = NULL;

        g_ptr_array_add(addresses, NULL);
        g_ptr_array_add(sticks, NULL);
        if (!h)
            why = g_strdup_printf("it has no <hostdev> with the alias " AV_REWRITE_ALIAS_PREFIX "%u that accelvirt "
                                  "placed", i);
        else if (item->attach == AV_ATTACH_USB) {
            why = av_hook_remap_usb_problem(host, pool, domain, item, &stick);
            if (!why) {
                /* The same stick, its numbers refreshed when they changed. */
                g_ptr_array_index(sticks, i) = (gpointer)stick;
                moved = moved || (stick && (h->usb_bus != (int)stick->busnum || h->usb_device != (int)stick->devnum));
                continue;
            }
        } else if (item->attach != AV_ATTACH_VFIO_PCI && item->attach != AV_ATTACH_SRIOV_VF)
            continue;
        else
            why = av_hook_remap_problem(host, policy, pool, domain, history, record->numa_node, item, &address);
        if (why) {
            av_hook_log(LOG_INFO, "%s: %s%s", verb, why, problem ? "" : "; placing the domain again");
            if (!problem)
                problem = why;
            else
                g_free(why);
            continue;
        }
        g_ptr_array_index(addresses, i) = g_strdup(address);
        moved = moved || g_strcmp0(address, h->pci_address) != 0;
    }
    if (!problem && !moved) {
        av_hook_log(LOG_INFO, "%s: every device accelvirt placed is on this host and free for the domain", verb);
        return av_hook_write_stdout(xml, len, &error) ? 0 : av_hook_refuse(error->message);
    }

    if (!problem) {
        /* the same cards, readdressed */
        g_autoptr(GArray) cpus = record->numa_node >= 0 ? av_hook_node_cpus(host, record->numa_node) : NULL;

        if (record->numa_node < 0 || cpus) {
            placement = g_new0(AvPlacement, 1);
            placement->numa_node = record->numa_node;
            placement->cpus = cpus ? g_steal_pointer(&cpus) : g_array_new(FALSE, FALSE, sizeof(guint));
            placement->warnings = g_ptr_array_new_with_free_func(g_free);
            placement->items = g_ptr_array_new_with_free_func((GDestroyNotify)av_placed_item_free);
            for (guint i = 0; i < record->items->len; i++) {
                const AvPlacedItem *c = g_ptr_array_index(record->items, i);
                AvPlacedItem *item = g_new0(AvPlacedItem, 1);
                const char *address = g_ptr_array_index(addresses, i);
                const AvPoolDevice *dev = address ? av_pool_find_address(pool, AV_DEVICE_KIND_PCI, address) : NULL;

                item->profile = g_strdup(c->profile);
                item->attach = c->attach;
                item->identity = g_strdup(dev ? dev->identity : c->identity);
                item->pci_address = g_strdup(address ? address : c->pci_address);
                item->mdev_uuid = g_strdup(c->mdev_uuid);
                item->usb_bus_path = g_strdup(c->usb_bus_path);
                item->usb_vendor = c->usb_vendor;
                item->usb_product = c->usb_product;
                item->usb_busnum = c->usb_busnum;
                item->usb_devnum = c->usb_devnum;
                item->numa_node = c->numa_node;
                av_hook_remap_set_stick(item, g_ptr_array_index(sticks, i));
                g_ptr_array_add(placement->items, item);
            }
            /* The CPUs of every node, for the guest NUMA cells accelvirt
             * wrote (av_domain_remap() re-pins them). */
            placement->nodes = av_placement_nodes(host, placement);
        } else {
            problem = g_strdup_printf("NUMA node %d of the placement is not on this host", record->numa_node);
        }
    }
    if (!placement) {
        AvPlaceOptions options = { 0 };

        /* Placing again chooses among all the host's devices. */
        if (host->partial) {
            g_clear_pointer(&host, av_host_free);
            host = av_hook_scan_host(config, policy, pool, &error);
            if (!host)
                return av_hook_refuse(error->message);
        }
        options.domain_uuid = domain->uuid;
        options.vcpus = MAX(domain->vcpus, 1);
        placement = av_place(host, policy, pool, record->requests, &options, &error);
        if (!placement)
            return av_hook_refusef("cannot %s domain '%s' on this host: %s, and the requests accelvirt placed for it "
                                   "cannot be placed again: %s", verb, domain->name, problem, error->message);
        for (guint i = 0; placement->warnings && i < placement->warnings->len; i++)
            av_hook_log(LOG_WARNING, "%s: %s", verb, (const char *)g_ptr_array_index(placement->warnings, i));
    }
    out = av_domain_remap(xml, len, placement, &error);
    if (!out)
        return av_hook_refusef("cannot %s domain '%s': its devices must be remapped, but %s%s%s", verb, domain->name,
                               error->message, disagreement ? "; its accelvirt metadata was changed since it was "
                                                              "placed: " : "", disagreement ? disagreement : "");
    for (guint i = 0; i < record->items->len && i < placement->items->len; i++) {
        const AvPlacedItem *a = g_ptr_array_index(record->items, i);
        const AvPlacedItem *b = g_ptr_array_index(placement->items, i);

        if (a->attach == AV_ATTACH_VFIO_PCI && g_strcmp0(a->pci_address, b->pci_address) != 0)
            av_hook_log(LOG_INFO, "%s: " AV_REWRITE_ALIAS_PREFIX "%u (profile '%s') moved from %s to %s", verb, i,
                        a->profile, a->pci_address, b->pci_address);
    }
    if (record->numa_node != placement->numa_node)
        av_hook_log(LOG_INFO, "%s: the domain moved from NUMA node %d to node %d", verb, record->numa_node,
                    placement->numa_node);
    /* What it is placed as now is what the next remap goes by. */
    {
        g_autoptr(GPtrArray) requests = g_ptr_array_ref(record->requests);

        av_pool_placement_record(pool, domain->uuid, domain->name, requests, placement);
        if (!av_pool_save(pool, &error))
            return av_hook_refusef("cannot %s domain '%s': cannot record its new placement: %s", verb, domain->name,
                                   error->message);
    }
    return av_hook_write_stdout(out, strlen(out), &error) ? 0 : av_hook_refuse(error->message);
}

/* See hook.h.  At most three passes: the last reads under the lock what
 * an archive's cut between the lockless read and the lock left unread. */
int
av_hook_remap(const AvHookConfig *config, const AvDomain *domain, const char *xml, gsize len, const char *op)
{
    AvHookMoved moved = { 0 };
    int r = AV_HOOK_REMAP_AGAIN;

    moved.last = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    for (int pass = 0; pass < 3 && r == AV_HOOK_REMAP_AGAIN; pass++) {
        if (pass > 0)
            av_hook_moved_load(config->state_dir, &moved);
        moved.whole = pass == 2;
        r = av_hook_remap_once(config, domain, xml, len, op, &moved);
    }
    g_hash_table_unref(moved.last);
    return r == AV_HOOK_REMAP_AGAIN ? av_hook_refuse("cannot read the journal's history of readdressed cards") : r;
}
