/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: placement, the allocator (see av-place.h for the rules).
 *
 * One call indexes the host and the pool once (O(n): hash tables keyed by
 * address, cards and regions built in one pass over the address-sorted
 * scan), then serves each request from per-profile card lists: cards are
 * kept in a GSequence ordered by the allocation's key, so a pick costs
 * O(log c) and a whole placement O(n + k log c) for k devices, whatever the
 * size of the pool.  IOMMU viability (av_vfio_group_check()) is checked
 * lazily, only for the functions actually picked, and cached.
 *
 * A placement is a trial: the functions it takes are marked and undone when
 * the trial fails, so that several NUMA nodes can be tried in turn.  Every
 * order is a total order on integers given by the address order of the scan
 * (never a hash table's order), so the answer is deterministic. */
#include "config.h"

#include <string.h>

#include "place/av-place.h"
#include "pool/av-pool.h"
#include "util/av-error.h"
#include "vfio/av-vfio.h"

/* The placement types' constructors and frees are in pool/av-pool-placement.c. */

/* --- the index --------------------------------------------------------------------- */

typedef struct AvPlaceUnit AvPlaceUnit;

/* One pooled device present in the scan. */
typedef struct {
    const AvPciDevice *pci;      /* or NULL for USB */
    const AvUsbDevice *usb;      /* or NULL for PCI */
    AvPoolDevice *pool;          /* borrowed from the pool */
    AvPlaceUnit *card;           /* NULL for USB */
    AvPlaceUnit *region;         /* NULL when not part of a region */
    int node;                    /* -1 unknown */
    guint index;                 /* address order */
    gboolean available;          /* free, or claimed by the placing domain */
    gboolean taken;              /* taken by the current trial */
    gint8 viable;                /* -1 not checked yet, 0 no, 1 yes */
    char *viable_error;          /* why not, when viable == 0 */
    const char *root_port;       /* PCI: av_host_pci_device_position(), borrowed from the host; or NULL */
    const char *switch_port;     /* PCI: the host PCIe switch it sits behind, or NULL */
} AvPlaceFn;

/* A card or a region: its pooled functions. */
struct AvPlaceUnit {
    guint index;                 /* address order of its first device */
    char *address;               /* card: "DDDD:BB:SS"; region: the PF's address */
    int node;
    GPtrArray *fns;              /* AvPlaceFn*, address order */
    AvPlaceUnit *card;           /* regions: their card */
    const char *root_port;       /* regions: av_host_pci_device_position() of the function, which its VFs */
    const char *switch_port;     /* share; borrowed from the host */
    guint n_available;
    guint n_taken;
    guint pass;                  /* the last av_place_pass_new() that met it (av_place_unit_first()) */
};

/* A device of another request already picked for an mdev in this trial. */
typedef struct {
    const char *parent;          /* borrowed from the host */
    const char *type;            /* borrowed from the policy */
} AvPlaceMdevPick;

typedef struct {
    const AvHost *host;
    const AvPolicy *policy;
    const AvPool *pool;
    const AvPlaceOptions *options;
    AvPlaceFn *fns;              /* owned, one block: PCI in address order, then USB */
    guint n_fns;
    GPtrArray *cards;            /* AvPlaceUnit*, owned, address order */
    GPtrArray *regions;          /* AvPlaceUnit*, owned, address order */
    GHashTable *by_profile;      /* profile name (borrowed from the pool) -> GPtrArray of AvPlaceFn* */
    GHashTable *shared_groups;   /* PCI address -> AvPlaceFn*, for functions in groups of several devices */
    GHashTable *pci_index;       /* PCI address -> AvPoolDevice* (av_pool_pci_index()): the pool's records */
    GPtrArray *trial_taken;      /* AvPlaceFn* taken by the current trial */
    GArray *trial_mdevs;         /* AvPlaceMdevPick of the current trial */
    guint pass;                  /* the last pass over units (av_place_pass_new()) */
} AvPlaceCtx;

/* A new pass that meets each unit once (av_place_unit_first()), without a
 * hash table: passes never interleave. */
static guint
av_place_pass_new(AvPlaceCtx *ctx)
{
    return ++ctx->pass;
}

/* TRUE the first time @unit is met in @pass. */
static gboolean
av_place_unit_first(AvPlaceUnit *unit, guint pass)
{
    if (unit->pass == pass)
        return FALSE;
    unit->pass = pass;
    return TRUE;
}

static void
av_place_unit_free(AvPlaceUnit *unit)
{
    g_free(unit->address);
    g_ptr_array_unref(unit->fns);
    g_free(unit);
}

static void
av_place_ctx_clear(AvPlaceCtx *ctx)
{
    g_clear_pointer(&ctx->by_profile, g_hash_table_unref);
    g_clear_pointer(&ctx->shared_groups, g_hash_table_unref);
    g_clear_pointer(&ctx->pci_index, g_hash_table_unref);
    for (guint i = 0; ctx->fns && i < ctx->n_fns; i++)
        g_free(ctx->fns[i].viable_error);
    g_clear_pointer(&ctx->fns, g_free);
    g_clear_pointer(&ctx->cards, g_ptr_array_unref);
    g_clear_pointer(&ctx->regions, g_ptr_array_unref);
    g_clear_pointer(&ctx->trial_taken, g_ptr_array_unref);
    g_clear_pointer(&ctx->trial_mdevs, g_array_unref);
}

/* TRUE when @dev may be given to the placing domain. */
static gboolean
av_place_pool_available(const AvPoolDevice *dev, const char *domain_uuid)
{
    if (dev->state == AV_DEVICE_STATE_FREE)
        return TRUE;
    return dev->state == AV_DEVICE_STATE_CLAIMED && domain_uuid && dev->owner &&
           g_strcmp0(dev->owner->domain_uuid, domain_uuid) == 0;
}

/* Length of "DDDD:BB:SS" in "DDDD:BB:SS.F" (0 when there is no '.'). */
static gsize
av_place_card_len(const char *address)
{
    const char *dot = strrchr(address, '.');

    return dot ? (gsize)(dot - address) : 0;
}

static AvPlaceUnit *
av_place_unit_new(GPtrArray *list, char *address, int node)
{
    AvPlaceUnit *unit = g_new0(AvPlaceUnit, 1);

    unit->index = list->len;
    unit->address = address;
    unit->node = node;
    unit->fns = g_ptr_array_new();
    g_ptr_array_add(list, unit);
    return unit;
}

/* The node a device counts on: its own, or the only node of a host that has
 * one (the kernel says -1 on hosts without NUMA). */
static int
av_place_node_of(const AvHost *host, int node)
{
    if (node < 0 && host->numa_nodes && host->numa_nodes->len == 1)
        return ((AvNumaNode *)g_ptr_array_index(host->numa_nodes, 0))->id;
    return node;
}

/* The NUMA node of the mdev parent @name of @host, as placement counts
 * nodes: the scan's parent, else (a host built without mdev_parents) the
 * PCI function of that address; -1 when neither is known. */
static int
av_place_mdev_parent_node(const AvHost *host, const char *name)
{
    const AvMdevParent *parent = av_host_find_mdev_parent(host, name);
    const AvPciDevice *pci = parent ? NULL : av_host_find_pci(host, name);

    if (!parent && !pci)
        return -1;
    return av_place_node_of(host, parent ? parent->numa_node : pci->numa_node);
}

static void
av_place_add_to_profile(AvPlaceCtx *ctx, AvPlaceFn *fn, const char **last_name, GPtrArray **last_list)
{
    const char *name = fn->pool->profile;

    if (!name)
        return;
    if (!*last_name || strcmp(*last_name, name) != 0) {
        *last_list = g_hash_table_lookup(ctx->by_profile, name);
        if (!*last_list) {
            *last_list = g_ptr_array_new();
            g_hash_table_insert(ctx->by_profile, (gpointer)name, *last_list);
        }
        *last_name = name;
    }
    g_ptr_array_add(*last_list, fn);
}

/* Indexes @host and @pool: one pass over the pool (addresses), one over the
 * non-VF functions (cards and regions: the functions of one card are
 * contiguous in address order), one over the VFs and USB devices. */
static void
av_place_ctx_init(AvPlaceCtx *ctx, const AvHost *host, const AvPolicy *policy, const AvPool *pool,
                  const AvPlaceOptions *options)
{
    GPtrArray *devices = av_pool_devices(pool);
    g_autoptr(GHashTable) usb_pool = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) region_of = g_hash_table_new(g_str_hash, g_str_equal);
    const char *domain_uuid = options ? options->domain_uuid : NULL;
    const char *last_name = NULL;
    GPtrArray *last_list = NULL;
    AvPlaceUnit *card = NULL;
    AvPlaceUnit *last_region = NULL;
    const char *card_address = NULL;
    gsize card_len = 0;

    memset(ctx, 0, sizeof(*ctx));
    ctx->host = host;
    ctx->policy = policy;
    ctx->pool = pool;
    ctx->options = options;
    /* At most one for each function and USB device of the host. */
    ctx->fns = g_new0(AvPlaceFn, host->pci->len + host->usb->len);
    ctx->cards = g_ptr_array_new_with_free_func((GDestroyNotify)av_place_unit_free);
    ctx->regions = g_ptr_array_new_with_free_func((GDestroyNotify)av_place_unit_free);
    ctx->by_profile = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)g_ptr_array_unref);
    ctx->shared_groups = g_hash_table_new(g_str_hash, g_str_equal);
    ctx->pci_index = av_pool_pci_index(pool);
    ctx->trial_taken = g_ptr_array_new();
    ctx->trial_mdevs = g_array_new(FALSE, FALSE, sizeof(AvPlaceMdevPick));

    for (guint i = 0; i < devices->len; i++) {
        AvPoolDevice *dev = g_ptr_array_index(devices, i);

        if (dev->state == AV_DEVICE_STATE_MISSING || !dev->address)
            continue;
        if (dev->kind == AV_DEVICE_KIND_USB)
            g_hash_table_insert(usb_pool, dev->address, dev);
    }

    /* One pass in address order.  Cards by domain:bus:slot (the functions of
     * a card that are not VFs are contiguous among those), a region for every
     * function with VFs or mdev types; a VF joins its PF's region, which comes
     * before it (a VF's routing ID is its PF's plus a positive offset: PCIe
     * SR-IOV 1.1, 3.3.9). */
    for (guint i = 0; i < host->pci->len; i++) {
        const AvPciDevice *pci = g_ptr_array_index(host->pci, i);
        AvPoolDevice *pooled = g_hash_table_lookup(ctx->pci_index, pci->address);
        AvPlaceUnit *region = NULL;
        AvPlaceUnit *fn_card;
        AvPlaceFn *fn;

        if (pci->is_bridge)
            continue;
        /* A missing record holds its last address only: not this device. */
        if (pooled && pooled->state == AV_DEVICE_STATE_MISSING)
            pooled = NULL;
        if (pci->physfn) {
            if (!pooled)
                continue;
            /* The VFs of a PF usually follow one another: the last
             * region found first. */
            region = last_region && strcmp(last_region->address, pci->physfn) == 0
                         ? last_region : g_hash_table_lookup(region_of, pci->physfn);
            last_region = region;
            /* A VF whose PF the scan lacks: a card of its own. */
            fn_card = region ? region->card
                             : av_place_unit_new(ctx->cards, g_strdup(pci->address),
                                                 av_place_node_of(host, pci->numa_node));
        } else {
            gboolean is_region = (pci->virtfns && pci->virtfns->len > 0) ||
                                 (pci->mdev_types && pci->mdev_types->len > 0);
            gsize len;

            if (!pooled && !is_region)
                continue;
            len = av_place_card_len(pci->address);
            if (!card || len != card_len || strncmp(card_address, pci->address, len) != 0) {
                card = av_place_unit_new(ctx->cards, g_strndup(pci->address, len),
                                         av_place_node_of(host, pci->numa_node));
                card_address = pci->address;
                card_len = len;
            }
            fn_card = card;
            if (is_region) {
                region = av_place_unit_new(ctx->regions, g_strdup(pci->address),
                                           av_place_node_of(host, pci->numa_node));
                region->card = card;
                av_host_pci_device_position(host, pci, &region->root_port, &region->switch_port);
                g_hash_table_insert(region_of, pci->address, region);
            }
            if (!pooled)
                continue;
        }
        fn = &ctx->fns[ctx->n_fns];
        fn->pci = pci;
        fn->pool = pooled;
        fn->card = fn_card;
        fn->region = region;
        fn->node = av_place_node_of(host, pci->numa_node);
        fn->viable = -1;
        fn->index = ctx->n_fns++;
        fn->available = av_place_pool_available(pooled, domain_uuid);
        /* Unknown (a bridge missing from the scan): no switch, no root port.
         * A region's function and the VFs of its PF sit where it sits. */
        if (region) {
            fn->root_port = region->root_port;
            fn->switch_port = region->switch_port;
        } else {
            av_host_pci_device_position(host, pci, &fn->root_port, &fn->switch_port);
        }
        g_ptr_array_add(fn_card->fns, fn);
        fn_card->n_available += fn->available;
        if (region) {
            g_ptr_array_add(region->fns, fn);
            region->n_available += fn->available;
        }
        if (pci->iommu_group_members && pci->iommu_group_members->len > 1)
            g_hash_table_insert(ctx->shared_groups, pci->address, fn);
        av_place_add_to_profile(ctx, fn, &last_name, &last_list);
    }
    for (guint i = 0; i < host->usb->len; i++) {
        const AvUsbDevice *usb = g_ptr_array_index(host->usb, i);
        AvPoolDevice *pooled = g_hash_table_lookup(usb_pool, usb->bus_path);
        AvPlaceFn *fn;

        if (!pooled)
            continue;
        fn = &ctx->fns[ctx->n_fns];
        fn->usb = usb;
        fn->pool = pooled;
        fn->node = av_place_node_of(host, usb->numa_node);
        fn->index = ctx->n_fns++;
        fn->available = av_place_pool_available(pooled, domain_uuid);
        fn->viable = 1;
        av_place_add_to_profile(ctx, fn, &last_name, &last_list);
    }
}

/* --- picking ------------------------------------------------------------------------ */

/* One request being placed. */
typedef struct {
    const AvRequest *req;
    const AvProfile *profile;    /* borrowed from the policy */
    AvGranularity granularity;   /* effective: function for mdev and usb */
    gboolean tie;                /* bound to the domain's node (numa strict or preferred, not numa="any") */
    GPtrArray *list;             /* AvPlaceFn* of the profile, borrowed from the context; may be NULL */
    GPtrArray *picked;           /* AvPlaceFn* given to the domain by the current trial */
    GPtrArray *mdev_parents;     /* const char*: the parent foreseen for each mdev of the current trial */
    GPtrArray *virtual_parents;  /* const AvMdevParent*: mdev parents that are no PCI device (mtty)
                                  * the profile takes (av_policy_match_mdev_parent()); they are not
                                  * pooled, only their instances count; borrowed from the host */
    char *why;                   /* why a free device could not be used (the last one met), or NULL */
    AvP2p p2p;                   /* the request's p2p, or required while av_place_choose_p2p() first
                                  * tries a preferred one as required */
    char *p2p_warning;           /* p2p preferred: why the current trial's devices are not behind one
                                  * switch, or NULL */
} AvPlaceReq;

static void
av_place_req_clear(AvPlaceReq *r)
{
    g_clear_pointer(&r->picked, g_ptr_array_unref);
    g_clear_pointer(&r->mdev_parents, g_ptr_array_unref);
    g_clear_pointer(&r->virtual_parents, g_ptr_array_unref);
    g_clear_pointer(&r->why, g_free);
    g_clear_pointer(&r->p2p_warning, g_free);
}

typedef struct {
    AvAllocation allocation;
    int prefer;                  /* node whose units come first, or -1 */
    const char *sha256;          /* the bitstream the request wants: devices of @profile that
                                  * hold it come first; NULL: no preference */
    const char *profile;         /* the request's profile */
} AvPlaceOrder;

static guint
av_place_unit_free_count(const AvPlaceUnit *unit)
{
    return unit->n_available - unit->n_taken;
}

/* TRUE when @fn can still be picked and holds @order's bitstream (its pool
 * record, AvPoolDevice->programmed). */
static gboolean
av_place_fn_holds(const AvPlaceFn *fn, const AvPlaceOrder *order)
{
    return order->sha256 && fn->pci && fn->available && !fn->taken && fn->pool->programmed &&
           g_str_equal(fn->pool->programmed->sha256, order->sha256) &&
           g_str_equal(fn->pool->profile, order->profile);
}

/* TRUE when a function of @unit can still be picked and holds @order's
 * bitstream. */
static gboolean
av_place_unit_holds(const AvPlaceUnit *unit, const AvPlaceOrder *order)
{
    for (guint i = 0; order->sha256 && i < unit->fns->len; i++)
        if (av_place_fn_holds(g_ptr_array_index(unit->fns, i), order))
            return TRUE;
    return FALSE;
}

/* The order in which cards (or regions) are used: the preferred node first;
 * then, for a request with a bitstream, those holding it; pack: partly used
 * before untouched, then the fewest free (best fit); spread: the least
 * used, then the most free; then address. */
static int
av_place_unit_cmp(const AvPlaceUnit *a, const AvPlaceUnit *b, const AvPlaceOrder *order)
{
    guint fa = av_place_unit_free_count(a), fb = av_place_unit_free_count(b);
    guint ua = a->fns->len - fa, ub = b->fns->len - fb;

    if (order->prefer >= 0 && (a->node == order->prefer) != (b->node == order->prefer))
        return a->node == order->prefer ? -1 : 1;
    if (order->sha256) {
        gboolean ha = av_place_unit_holds(a, order), hb = av_place_unit_holds(b, order);

        if (ha != hb)
            return ha ? -1 : 1;
    }
    if (order->allocation == AV_ALLOCATION_PACK) {
        if ((ua > 0) != (ub > 0))
            return ua > 0 ? -1 : 1;
        if (fa != fb)
            return fa < fb ? -1 : 1;
    } else {
        if (ua != ub)
            return ua < ub ? -1 : 1;
        if (fa != fb)
            return fa > fb ? -1 : 1;
    }
    return a->index < b->index ? -1 : a->index > b->index;
}

static int
av_place_unit_seq_cmp(gconstpointer a, gconstpointer b, gpointer order)
{
    return av_place_unit_cmp(a, b, order);
}

/* Functions of one card: those holding the request's bitstream first, then
 * by region (same order as cards; functions outside any region last), then
 * address. */
static int
av_place_fn_cmp(const AvPlaceFn *a, const AvPlaceFn *b, const AvPlaceOrder *order)
{
    if (order->sha256) {
        gboolean ha = av_place_fn_holds(a, order), hb = av_place_fn_holds(b, order);

        if (ha != hb)
            return ha ? -1 : 1;
    }
    if (a->region != b->region) {
        if (!a->region || !b->region)
            return a->region ? -1 : 1;
        return av_place_unit_cmp(a->region, b->region, order);
    }
    return a->index < b->index ? -1 : a->index > b->index;
}

/* TRUE when @fn is a card of attach netdev (the domain gets its network
 * interface; it stays on its host driver and takes no IOMMU group). */
static gboolean
av_place_fn_is_netdev(const AvPlaceCtx *ctx, const AvPlaceFn *fn)
{
    const AvProfile *profile = fn->pool && fn->pool->profile ? av_policy_find(ctx->policy, fn->pool->profile) : NULL;

    return fn->pci && profile && profile->attach == AV_ATTACH_NETDEV;
}

/* TRUE when the IOMMU group of @fn can go to a guest, or, a card of
 * attach netdev, when its host driver made its network interface; checked
 * once. */
static gboolean
av_place_fn_viable(AvPlaceCtx *ctx, AvPlaceFn *fn)
{
    if (fn->viable < 0 && av_place_fn_is_netdev(ctx, fn)) {
        fn->viable = fn->pci->netdevs && fn->pci->netdevs->len > 0;
        if (!fn->viable)
            fn->viable_error = g_strdup_printf("'%s' has no network interface (its net/ is empty): the card's host "
                                               "driver, which makes it, is not loaded or not ready",
                                               fn->pci->address);
    }
    if (fn->viable < 0) {
        g_autoptr(GPtrArray) members = NULL;
        g_autoptr(GError) error = NULL;

        fn->viable = av_vfio_group_check(ctx->host, ctx->policy, fn->pci, &members, &error) ? 1 : 0;
        if (!fn->viable)
            fn->viable_error = g_strdup(error->message);
    }
    return fn->viable == 1;
}

/* The other pooled devices of @fn's IOMMU group, which go with it. */
static void
av_place_fn_mates(AvPlaceCtx *ctx, const AvPlaceFn *fn, GPtrArray *ret_mates)
{
    if (!fn->pci || !fn->pci->iommu_group_members || fn->pci->iommu_group_members->len < 2)
        return;
    for (guint i = 0; i < fn->pci->iommu_group_members->len; i++) {
        const char *address = g_ptr_array_index(fn->pci->iommu_group_members, i);
        AvPlaceFn *mate;

        if (strcmp(address, fn->pci->address) == 0)
            continue;
        mate = g_hash_table_lookup(ctx->shared_groups, address);
        if (mate)
            g_ptr_array_add(ret_mates, mate);
    }
}

/* TRUE when @fn can be taken now: free for this domain, not taken, its group
 * viable and the other pooled devices of its group free too.  Otherwise
 * keeps the reason in @r->why when it is worth telling. */
static gboolean
av_place_fn_usable(AvPlaceCtx *ctx, AvPlaceReq *r, AvPlaceFn *fn)
{
    g_autoptr(GPtrArray) mates = g_ptr_array_new();

    if (!fn->available || fn->taken)
        return FALSE;
    /* A vGPU VF: only one whose GPU offers the profile's type now. */
    if (fn->pci && r->profile && r->profile->vgpu_type && !av_pci_vgpu_offers(fn->pci, r->profile->vgpu_type)) {
        g_free(r->why);
        r->why = fn->pci->vgpu_capable && fn->pci->vgpu_current
                     ? g_strdup_printf("'%s' has a vGPU (type %u) already", fn->pci->address, fn->pci->vgpu_current)
                     : g_strdup_printf("the GPU of '%s' does not offer vGPU type '%s' now (it serves another type, "
                                       "or is full)", fn->pci->address, r->profile->vgpu_type);
        return FALSE;
    }
    if (fn->pci && !av_place_fn_viable(ctx, fn)) {
        g_free(r->why);
        r->why = g_strdup(fn->viable_error);
        return FALSE;
    }
    /* A PF is never handed out while a VF of it is not free. */
    if (fn->pci && !fn->pci->physfn && fn->pci->virtfns && fn->pci->virtfns->len > 0) {
        g_autoptr(GError) busy = NULL;

        if (!av_pool_pf_check_vfs_in(ctx->pci_index, ctx->host, fn->pci->address, &busy)) {
            g_free(r->why);
            r->why = g_strdup(busy->message);
            return FALSE;
        }
    }
    /* Nor a VF while its PF is not free. */
    if (fn->pci && fn->pci->physfn) {
        g_autoptr(GError) busy = NULL;

        if (!av_pool_vf_check_pf_in(ctx->pci_index, fn->pci, &busy)) {
            g_free(r->why);
            r->why = g_strdup(busy->message);
            return FALSE;
        }
    }
    if (!av_place_fn_is_netdev(ctx, fn))
        av_place_fn_mates(ctx, fn, mates);
    for (guint i = 0; i < mates->len; i++) {
        AvPlaceFn *mate = g_ptr_array_index(mates, i);

        if (!mate->available || mate->taken) {
            g_free(r->why);
            r->why = g_strdup_printf("'%s' shares IOMMU group %d with '%s', which is %s",
                                     fn->pci->address, fn->pci->iommu_group, mate->pci->address,
                                     mate->taken ? "taken by another request of this domain"
                                                 : av_device_state_to_string(mate->pool->state));
            return FALSE;
        }
    }
    return TRUE;
}

static void
av_place_take_one(AvPlaceCtx *ctx, AvPlaceFn *fn)
{
    fn->taken = TRUE;
    if (fn->card)
        fn->card->n_taken++;
    if (fn->region)
        fn->region->n_taken++;
    g_ptr_array_add(ctx->trial_taken, fn);
}

/* Takes @fn (usable) for @r, with the other pooled devices of its group. */
static void
av_place_take(AvPlaceCtx *ctx, AvPlaceReq *r, AvPlaceFn *fn)
{
    g_autoptr(GPtrArray) mates = g_ptr_array_new();

    av_place_take_one(ctx, fn);
    g_ptr_array_add(r->picked, fn);
    av_place_fn_mates(ctx, fn, mates);
    for (guint i = 0; i < mates->len; i++)
        av_place_take_one(ctx, g_ptr_array_index(mates, i));
}

/* Undoes what the current trial took after its first @mark functions. */
static void
av_place_undo_taken(AvPlaceCtx *ctx, guint mark)
{
    for (guint i = mark; i < ctx->trial_taken->len; i++) {
        AvPlaceFn *fn = g_ptr_array_index(ctx->trial_taken, i);

        fn->taken = FALSE;
        if (fn->card)
            fn->card->n_taken--;
        if (fn->region)
            fn->region->n_taken--;
    }
    g_ptr_array_set_size(ctx->trial_taken, mark);
}

/* Undoes everything the current trial took. */
static void
av_place_trial_undo(AvPlaceCtx *ctx, AvPlaceReq *reqs, guint n_reqs)
{
    av_place_undo_taken(ctx, 0);
    g_array_set_size(ctx->trial_mdevs, 0);
    for (guint i = 0; i < n_reqs; i++) {
        g_ptr_array_set_size(reqs[i].picked, 0);
        g_ptr_array_set_size(reqs[i].mdev_parents, 0);
    }
}

static gboolean
av_place_node_ok(int node_filter, int node)
{
    return node_filter < 0 || node == node_filter;
}

/* Function granularity, PCI: the best card first (see av_place_unit_cmp()),
 * and in it the best region; pack takes from a card until it is full,
 * spread takes one function and puts the card back in order.  @list: the
 * candidates, the profile's functions or those behind one switch. */
static gboolean
av_place_pick_functions(AvPlaceCtx *ctx, AvPlaceReq *r, GPtrArray *list, int node_filter, int prefer)
{
    AvPlaceOrder order = { r->profile->allocation, prefer, r->req->bitstream_sha256, r->profile->name };
    g_autoptr(GSequence) seq = g_sequence_new(NULL);
    guint pass = av_place_pass_new(ctx);
    guint wanted = r->req->count;

    for (guint i = 0; i < list->len; i++) {
        AvPlaceFn *fn = g_ptr_array_index(list, i);

        if (!fn->pci || !fn->available || fn->taken || !av_place_node_ok(node_filter, fn->node))
            continue;
        if (av_place_unit_first(fn->card, pass))
            g_sequence_insert_sorted(seq, fn->card, av_place_unit_seq_cmp, &order);
    }
    while (r->picked->len < wanted) {
        GSequenceIter *it = g_sequence_get_begin_iter(seq);
        AvPlaceUnit *card;
        AvPlaceFn *best = NULL;

        if (g_sequence_iter_is_end(it))
            return FALSE;
        card = g_sequence_get(it);
        for (guint i = 0; i < card->fns->len; i++) {
            AvPlaceFn *fn = g_ptr_array_index(card->fns, i);

            if (!fn->available || fn->taken || strcmp(fn->pool->profile, r->profile->name) != 0 ||
                !av_place_node_ok(node_filter, fn->node))
                continue;
            if (best && av_place_fn_cmp(fn, best, &order) >= 0)
                continue;
            if (!av_place_fn_usable(ctx, r, fn))
                continue;
            best = fn;
        }
        if (!best) {
            g_sequence_remove(it);
            continue;
        }
        av_place_take(ctx, r, best);
        g_sequence_sort_changed(it, av_place_unit_seq_cmp, &order);
    }
    return TRUE;
}

/* Whole units: the preferred node first, then by their card's order
 * (av_place_unit_cmp()), then (regions of one card) those holding the
 * request's bitstream, then address. */
static int
av_place_whole_cmp(gconstpointer a, gconstpointer b, gpointer data)
{
    const AvPlaceOrder *order = data;
    const AvPlaceUnit *x = *(AvPlaceUnit *const *)a, *y = *(AvPlaceUnit *const *)b;
    const AvPlaceUnit *cx = x->card ? x->card : x, *cy = y->card ? y->card : y;
    int c = cx == cy ? 0 : av_place_unit_cmp(cx, cy, order);

    if (c != 0)
        return c;
    if (order->sha256 && x != y) {
        gboolean hx = av_place_unit_holds(x, order), hy = av_place_unit_holds(y, order);

        if (hx != hy)
            return hx ? -1 : 1;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Card or region granularity: whole units, every pooled device of them
 * free; the preferred node first, then address.  @list as for
 * av_place_pick_functions(). */
static gboolean
av_place_pick_units(AvPlaceCtx *ctx, AvPlaceReq *r, GPtrArray *list, int node_filter, int prefer)
{
    g_autoptr(GPtrArray) units = g_ptr_array_new();
    guint pass = av_place_pass_new(ctx);
    AvPlaceOrder order = { r->profile->allocation, prefer, r->req->bitstream_sha256, r->profile->name };
    guint got = 0;

    for (guint i = 0; i < list->len; i++) {
        AvPlaceFn *fn = g_ptr_array_index(list, i);
        AvPlaceUnit *unit;

        if (!fn->pci)
            continue;
        unit = r->granularity == AV_GRANULARITY_REGION && fn->region ? fn->region : fn->card;
        if (!av_place_unit_first(unit, pass))
            continue;
        if (unit->n_taken > 0 || unit->n_available < unit->fns->len || !av_place_node_ok(node_filter, unit->node))
            continue;
        g_ptr_array_add(units, unit);
    }
    /* The preferred node's units first; regions of partly used cards
     * before those of untouched cards (pack), cards best fit first. */
    g_ptr_array_sort_with_data(units, av_place_whole_cmp, &order);
    for (guint i = 0; i < units->len && got < r->req->count; i++) {
        AvPlaceUnit *unit = g_ptr_array_index(units, i);
        gboolean ok = TRUE;

        for (guint j = 0; j < unit->fns->len && ok; j++)
            ok = av_place_fn_usable(ctx, r, g_ptr_array_index(unit->fns, j));
        if (!ok)
            continue;
        for (guint j = 0; j < unit->fns->len; j++) {
            AvPlaceFn *fn = g_ptr_array_index(unit->fns, j);

            /* A group mate taken with an earlier function of the unit. */
            if (fn->taken)
                g_ptr_array_add(r->picked, fn);
            else
                av_place_take(ctx, r, fn);
        }
        got++;
    }
    return got == r->req->count;
}

/* USB devices: the preferred node first, then bus path. */
static gboolean
av_place_pick_usb(AvPlaceCtx *ctx, AvPlaceReq *r, int node_filter, int prefer)
{
    for (guint pass = 0; pass < 2; pass++) {
        for (guint i = 0; i < r->list->len && r->picked->len < r->req->count; i++) {
            AvPlaceFn *fn = g_ptr_array_index(r->list, i);

            if (!fn->usb || !av_place_node_ok(node_filter, fn->node))
                continue;
            if (prefer >= 0 && (fn->node == prefer) != (pass == 0))
                continue;
            if (prefer < 0 && pass == 1)
                continue;
            if (av_place_fn_usable(ctx, r, fn))
                av_place_take(ctx, r, fn);
        }
    }
    return r->picked->len == r->req->count;
}

static const AvMdevType *
av_place_mdev_type_in(const GPtrArray *types, const char *type)
{
    for (guint i = 0; types && i < types->len; i++) {
        const AvMdevType *t = g_ptr_array_index(types, i);

        if (strcmp(t->id, type) == 0)
            return t;
    }
    return NULL;
}

static const AvMdevType *
av_place_mdev_type(const AvPciDevice *dev, const char *type)
{
    return av_place_mdev_type_in(dev->mdev_types, type);
}

/* A parent as av_mdev_choose_parent() should see it during this trial: a
 * shallow copy (name borrowed from the host) whose only type shows the
 * instances this placement already used, and whose mdevs include the ones
 * foreseen. */
static void
av_place_view_parent_free(AvMdevParent *copy)
{
    g_ptr_array_unref(copy->types);
    g_ptr_array_unref(copy->mdevs);
    g_free(copy);
}

static void
av_place_view_parent_add(AvPlaceCtx *ctx, GPtrArray *parents, const char *name, int node,
                         const AvMdevType *t, const GPtrArray *mdevs, const char *type, AvMdev *foreseen)
{
    AvMdevParent *copy = g_new0(AvMdevParent, 1);
    AvMdevType *tc;

    copy->name = (char *)name;
    copy->numa_node = node;
    copy->types = g_ptr_array_new_with_free_func(g_free);
    tc = g_memdup2(t, sizeof(*tc));
    g_ptr_array_add(copy->types, tc);
    copy->mdevs = g_ptr_array_new();
    for (guint j = 0; mdevs && j < mdevs->len; j++) {
        const AvMdev *m = g_ptr_array_index(mdevs, j);

        g_ptr_array_add(copy->mdevs, (gpointer)m);
        /* A released mdev of accelvirt's is still there: no new one on
         * this parent until it is removed (av_pool_mdev_parents_block()). */
        if (av_pool_mdev_is_released(ctx->pool, m->uuid))
            tc->available = 0;
    }
    for (guint j = 0; j < ctx->trial_mdevs->len; j++) {
        AvPlaceMdevPick *pick = &g_array_index(ctx->trial_mdevs, AvPlaceMdevPick, j);

        if (strcmp(pick->parent, name) != 0)
            continue;
        if (strcmp(pick->type, type) == 0) {
            tc->available = tc->available > 0 ? tc->available - 1 : 0;
            g_ptr_array_add(copy->mdevs, foreseen);
        } else {
            tc->available = 0;   /* one type per parent at a time */
        }
    }
    g_ptr_array_add(parents, copy);
}

/* mdevs: the parent that av_mdev_choose_parent() (the hook's own choice at
 * prepare, so the hint and the hook agree) picks on a view of the pooled,
 * free PCI parents and of the parents that are no PCI device, one instance
 * at a time. */
static gboolean
av_place_pick_mdevs(AvPlaceCtx *ctx, AvPlaceReq *r, int node_filter, int prefer, GError **error)
{
    const char *type = r->profile->mdev_type;
    g_autoptr(GPtrArray) parents = g_ptr_array_new_with_free_func((GDestroyNotify)av_place_view_parent_free);
    AvMdev foreseen = { NULL, NULL, (char *)type };
    AvHost view = *ctx->host;

    if (!type) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "profile '%s' has attach 'mdev' but names no mdev_type; "
                    "add one to the profile", r->profile->name);
        return FALSE;
    }
    for (guint i = 0; r->list && i < r->list->len; i++) {
        AvPlaceFn *fn = g_ptr_array_index(r->list, i);
        const AvMdevType *t;

        if (!fn->pci || !fn->available || fn->taken || !(t = av_place_mdev_type(fn->pci, type)))
            continue;
        av_place_view_parent_add(ctx, parents, fn->pci->address, fn->node, t, fn->pci->mdevs, type, &foreseen);
    }
    for (guint i = 0; r->virtual_parents && i < r->virtual_parents->len; i++) {
        const AvMdevParent *vp = g_ptr_array_index(r->virtual_parents, i);
        const AvMdevType *t = av_place_mdev_type_in(vp->types, type);

        if (t)
            av_place_view_parent_add(ctx, parents, vp->name, av_place_node_of(ctx->host, vp->numa_node), t,
                                     vp->mdevs, type, &foreseen);
    }
    view.mdev_parents = parents;
    for (guint n = 0; n < r->req->count; n++) {
        g_autofree char *parent = NULL;
        g_autoptr(GError) local = NULL;
        AvPlaceMdevPick pick;

        if (!av_mdev_choose_parent(&view, r->profile, node_filter >= 0 ? node_filter : prefer, &parent, &local)) {
            if (node_filter >= 0 || prefer < 0 || !g_error_matches(local, AV_ERROR, AV_ERROR_NO_CAPACITY)) {
                g_propagate_error(error, g_steal_pointer(&local));
                return FALSE;
            }
            g_clear_error(&local);
            if (!av_mdev_choose_parent(&view, r->profile, -1, &parent, &local)) {
                g_propagate_error(error, g_steal_pointer(&local));
                return FALSE;
            }
        }
        for (guint i = 0; i < parents->len; i++) {
            AvMdevParent *copy = g_ptr_array_index(parents, i);
            AvMdevType *tc = g_ptr_array_index(copy->types, 0);

            if (strcmp(copy->name, parent) != 0)
                continue;
            tc->available--;
            g_ptr_array_add(copy->mdevs, &foreseen);
            pick.parent = copy->name;     /* the host's string: the copy is shallow */
            pick.type = type;
            g_array_append_val(ctx->trial_mdevs, pick);
            g_ptr_array_add(r->mdev_parents, (gpointer)copy->name);
            break;
        }
    }
    return TRUE;
}

/* --- peer-to-peer: one host PCIe switch ---------------------------------- */

static const char *av_place_unit_word(const AvPlaceReq *r, gboolean plural);

/* The candidates of a request behind one host PCIe switch. */
typedef struct {
    const char *address;         /* the switch's upstream port, borrowed from the host */
    guint64 address_key;         /* av_pci_address_key(@address) */
    int node;
    GPtrArray *fns;              /* AvPlaceFn* of the request's profile, in the profile list's order */
    guint free_;                 /* free functions; at card or region granularity, wholly free units */
} AvPlaceSwitch;

static void
av_place_switch_free(AvPlaceSwitch *sw)
{
    g_ptr_array_unref(sw->fns);
    g_free(sw);
}

/* The switches holding candidates of @r on @node_filter's node, in one pass
 * over the profile's list (no host-wide rescan).  Functions behind no
 * switch never count.  Caller frees. */
static GPtrArray *
av_place_switches(const AvPlaceReq *r, int node_filter)
{
    GPtrArray *switches = g_ptr_array_new_with_free_func((GDestroyNotify)av_place_switch_free);
    g_autoptr(GHashTable) by_address = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) units = g_hash_table_new(NULL, NULL);

    for (guint i = 0; r->list && i < r->list->len; i++) {
        AvPlaceFn *fn = g_ptr_array_index(r->list, i);
        AvPlaceSwitch *sw;

        if (!fn->pci || !fn->switch_port || !av_place_node_ok(node_filter, fn->node))
            continue;
        sw = g_hash_table_lookup(by_address, fn->switch_port);
        if (!sw) {
            sw = g_new0(AvPlaceSwitch, 1);
            sw->address = fn->switch_port;
            sw->address_key = av_pci_address_key(sw->address);
            sw->node = fn->node;
            sw->fns = g_ptr_array_new();
            g_hash_table_insert(by_address, (gpointer)sw->address, sw);
            g_ptr_array_add(switches, sw);
        }
        g_ptr_array_add(sw->fns, fn);
        if (r->granularity == AV_GRANULARITY_FUNCTION) {
            sw->free_ += fn->available && !fn->taken;
        } else {
            AvPlaceUnit *unit = r->granularity == AV_GRANULARITY_REGION && fn->region ? fn->region : fn->card;

            if (g_hash_table_add(units, unit) && unit->n_taken == 0 && unit->n_available == unit->fns->len)
                sw->free_++;
        }
    }
    return switches;
}

/* The order in which switches are tried: the preferred node's first; pack:
 * the fewest free (best fit), spread: the most free; then address. */
static int
av_place_switch_cmp(gconstpointer a, gconstpointer b, gpointer data)
{
    const AvPlaceOrder *order = data;
    const AvPlaceSwitch *x = *(AvPlaceSwitch *const *)a, *y = *(AvPlaceSwitch *const *)b;

    if (order->prefer >= 0 && (x->node == order->prefer) != (y->node == order->prefer))
        return x->node == order->prefer ? -1 : 1;
    if (x->free_ != y->free_) {
        if (order->allocation == AV_ALLOCATION_PACK)
            return x->free_ < y->free_ ? -1 : 1;
        return x->free_ > y->free_ ? -1 : 1;
    }
    return av_pci_address_key_compare(x->address_key, x->address, y->address_key, y->address);
}

static int
av_place_switch_address_cmp(gconstpointer a, gconstpointer b)
{
    const AvPlaceSwitch *x = *(AvPlaceSwitch *const *)a, *y = *(AvPlaceSwitch *const *)b;

    return av_pci_address_key_compare(x->address_key, x->address, y->address_key, y->address);
}

/* "no PCIe switch of this host has 3 free devices of profile 'x' (switch
 * 0000:11:00.0 has 2 free, ...)": at most a few switches, by address. */
#define AV_PLACE_SWITCHES_NAMED 4

static char *
av_place_switch_shortage(const AvPlaceReq *r, GPtrArray *switches, int node_filter)
{
    g_autoptr(GString) s = g_string_new(NULL);
    g_autofree char *where = node_filter >= 0 ? g_strdup_printf("on NUMA node %d", node_filter)
                                              : g_strdup("of this host");

    g_ptr_array_sort(switches, av_place_switch_address_cmp);
    g_string_append_printf(s, "no PCIe switch %s has %u free %s of profile '%s' (", where, r->req->count,
                           av_place_unit_word(r, r->req->count != 1), r->profile->name);
    if (switches->len == 0)
        g_string_append_printf(s, "none of its %s sits behind one", av_place_unit_word(r, TRUE));
    for (guint i = 0; i < switches->len && i < AV_PLACE_SWITCHES_NAMED; i++) {
        const AvPlaceSwitch *sw = g_ptr_array_index(switches, i);

        g_string_append_printf(s, "%sswitch %s has %u free", i ? ", " : "", sw->address, sw->free_);
    }
    if (switches->len > AV_PLACE_SWITCHES_NAMED)
        g_string_append_printf(s, ", and %u more switches", switches->len - AV_PLACE_SWITCHES_NAMED);
    g_string_append_c(s, ')');
    return g_string_free(g_steal_pointer(&s), FALSE);
}

/* A PCI request of @list (function, card or region granularity). */
static gboolean
av_place_pick_pci(AvPlaceCtx *ctx, AvPlaceReq *r, GPtrArray *list, int node_filter, int prefer)
{
    if (r->granularity != AV_GRANULARITY_FUNCTION)
        return av_place_pick_units(ctx, r, list, node_filter, prefer);
    return av_place_pick_functions(ctx, r, list, node_filter, prefer);
}

/* TRUE when every device @r picked sits behind one switch. */
static gboolean
av_place_picked_one_switch(const AvPlaceReq *r)
{
    const char *first = NULL;

    for (guint i = 0; i < r->picked->len; i++) {
        const AvPlaceFn *fn = g_ptr_array_index(r->picked, i);

        if (!fn->switch_port || (first && strcmp(first, fn->switch_port) != 0))
            return FALSE;
        first = fn->switch_port;
    }
    return first != NULL;
}

/* p2p="required|preferred", PCI, count >= 2: every device behind one host
 * switch, the switches tried in the allocation's order among those with
 * enough free, each failed switch's picks undone.  Required: FALSE with
 * @r->why naming what each switch has free (a strict search then tries the
 * other nodes).  Preferred: the usual pick, with @r->p2p_warning. */
static gboolean
av_place_pick_p2p(AvPlaceCtx *ctx, AvPlaceReq *r, int node_filter, int prefer)
{
    AvPlaceOrder order = { r->profile->allocation, prefer, r->req->bitstream_sha256, r->profile->name };
    g_autoptr(GPtrArray) switches = av_place_switches(r, node_filter);
    g_autofree char *inner = NULL;
    g_autofree char *shortage = NULL;

    /* Only this pick's reasons below, not an earlier trial's. */
    g_clear_pointer(&r->why, g_free);
    g_ptr_array_sort_with_data(switches, av_place_switch_cmp, &order);
    for (guint i = 0; i < switches->len; i++) {
        const AvPlaceSwitch *sw = g_ptr_array_index(switches, i);
        guint mark = ctx->trial_taken->len;

        if (sw->free_ < r->req->count)
            continue;
        if (av_place_pick_pci(ctx, r, sw->fns, node_filter, prefer))
            return TRUE;
        /* Free on paper, not usable (an IOMMU group, a VF's PF): undo this
         * switch's picks exactly and try the next. */
        av_place_undo_taken(ctx, mark);
        g_ptr_array_set_size(r->picked, 0);
    }
    inner = g_steal_pointer(&r->why);
    shortage = av_place_switch_shortage(r, switches, node_filter);
    if (r->p2p == AV_P2P_REQUIRED) {
        r->why = g_strdup_printf("%s%s%s; free some, or ask for p2p='preferred'", shortage,
                                 inner ? ": " : "", inner ? inner : "");
        return FALSE;
    }
    if (!av_place_pick_pci(ctx, r, r->list, node_filter, prefer))
        return FALSE;
    if (!av_place_picked_one_switch(r))
        r->p2p_warning = g_strdup_printf("the %u %s of '%s' could not sit behind one PCIe switch: %s; they "
                                         "talk peer-to-peer through the root complex, if at all, until "
                                         "devices behind one switch are freed and the domain is placed again",
                                         r->req->count, av_place_unit_word(r, r->req->count != 1),
                                         r->profile->name, shortage);
    return TRUE;
}

/* Places @r in the current trial.  FALSE when it does not fit (with @error
 * set only for a fault that no other node can cure, such as a profile
 * without mdev type). */
static gboolean
av_place_pick(AvPlaceCtx *ctx, AvPlaceReq *r, int node_filter, int prefer, GError **error)
{
    if (!r->list && !(r->virtual_parents && r->virtual_parents->len > 0))
        return FALSE;
    if (r->profile->attach == AV_ATTACH_MDEV) {
        g_autoptr(GError) local = NULL;

        if (av_place_pick_mdevs(ctx, r, node_filter, prefer, &local))
            return TRUE;
        if (g_error_matches(local, AV_ERROR, AV_ERROR_NO_CAPACITY)) {
            g_free(r->why);
            r->why = g_strdup(local->message);
            return FALSE;
        }
        g_propagate_error(error, g_steal_pointer(&local));
        return FALSE;
    }
    if (r->profile->attach == AV_ATTACH_USB)
        return av_place_pick_usb(ctx, r, node_filter, prefer);
    g_clear_pointer(&r->p2p_warning, g_free);
    if (r->p2p != AV_P2P_NONE && r->req->count >= 2)
        return av_place_pick_p2p(ctx, r, node_filter, prefer);
    return av_place_pick_pci(ctx, r, r->list, node_filter, prefer);
}

/* --- the checks before placing ------------------------------------------------------------ */

/* "unknown profile 'x'; the policy defines 'a', 'b' (and N more): ..." */
static void
av_place_error_unknown(const AvPolicy *policy, const char *name, GError **error)
{
    g_autoptr(GString) known = g_string_new(NULL);
    guint n = policy->profiles->len;

    if (n == 0) {
        g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                    "unknown profile '%s': the policy defines no profile; add one to a file of the policy "
                    "directory", name);
        return;
    }
    for (guint i = 0; i < n && i < 5; i++)
        g_string_append_printf(known, "%s'%s'", i ? ", " : "",
                               ((const AvProfile *)g_ptr_array_index(policy->profiles, i))->name);
    if (n > 5)
        g_string_append_printf(known, " (and %u more)", n - 5);
    g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                "unknown profile '%s': use one the policy defines, %s, or add it to a file of the policy "
                "directory", name, known->str);
}

static const char *
av_place_unit_word(const AvPlaceReq *r, gboolean plural)
{
    if (r->profile->attach == AV_ATTACH_MDEV)
        return plural ? "mdev instances" : "mdev instance";
    if (r->granularity == AV_GRANULARITY_CARD)
        return plural ? "cards" : "card";
    if (r->granularity == AV_GRANULARITY_REGION)
        return plural ? "regions" : "region";
    return plural ? "devices" : "device";
}

/* Counts what the host has of @r's profile (*ret_total) and what is free
 * for this domain (*ret_free), in @r's units; tallies in @states (indexed
 * by AvDeviceState) the states of the pooled devices that are not free.
 * @node_filter >= 0 counts that node only. */
static void
av_place_count(AvPlaceCtx *ctx, AvPlaceReq *r, int node_filter, guint *ret_total, guint *ret_free,
               guint states[AV_DEVICE_STATE_MISSING + 1])
{
    guint pass = av_place_pass_new(ctx);
    guint total = 0, free_ = 0;

    for (guint i = 0; r->list && i < r->list->len; i++) {
        AvPlaceFn *fn = g_ptr_array_index(r->list, i);

        if (!av_place_node_ok(node_filter, fn->node))
            continue;
        if (r->profile->attach == AV_ATTACH_MDEV) {
            const AvMdevType *t = fn->pci && r->profile->mdev_type
                                  ? av_place_mdev_type(fn->pci, r->profile->mdev_type) : NULL;
            guint running = 0;

            if (!t)
                continue;
            for (guint j = 0; fn->pci->mdevs && j < fn->pci->mdevs->len; j++)
                running += g_strcmp0(((AvMdev *)g_ptr_array_index(fn->pci->mdevs, j))->type_id, t->id) == 0;
            total += t->available + running;
            if (fn->available)
                free_ += t->available;
            else if (states)
                states[fn->pool->state] += t->available;
        } else if (r->granularity != AV_GRANULARITY_FUNCTION && fn->pci) {
            AvPlaceUnit *unit = r->granularity == AV_GRANULARITY_REGION && fn->region ? fn->region : fn->card;

            if (!av_place_unit_first(unit, pass))
                continue;
            total++;
            if (unit->n_available == unit->fns->len) {
                free_++;
            } else if (states) {
                for (guint j = 0; j < unit->fns->len; j++) {
                    AvPlaceFn *f = g_ptr_array_index(unit->fns, j);

                    if (!f->available)
                        states[f->pool->state]++;
                }
            }
        } else {
            total++;
            if (fn->available)
                free_++;
            else if (states)
                states[fn->pool->state]++;
        }
    }
    for (guint i = 0; r->virtual_parents && r->profile->mdev_type && i < r->virtual_parents->len; i++) {
        const AvMdevParent *vp = g_ptr_array_index(r->virtual_parents, i);
        const AvMdevType *t = av_place_mdev_type_in(vp->types, r->profile->mdev_type);
        guint running = 0;

        if (!t || !av_place_node_ok(node_filter, av_place_node_of(ctx->host, vp->numa_node)))
            continue;
        for (guint j = 0; vp->mdevs && j < vp->mdevs->len; j++)
            running += g_strcmp0(((AvMdev *)g_ptr_array_index(vp->mdevs, j))->type_id, t->id) == 0;
        total += t->available + running;
        free_ += t->available;
    }
    *ret_total = total;
    *ret_free = free_;
}

/* Count too large, or not enough free: the whole host, before any node. */
static gboolean
av_place_check_counts(AvPlaceCtx *ctx, AvPlaceReq *reqs, guint n_reqs, GError **error)
{
    for (guint i = 0; i < n_reqs; i++) {
        AvPlaceReq *r = &reqs[i];
        guint states[AV_DEVICE_STATE_MISSING + 1] = { 0 };
        guint total = 0, free_ = 0, wanted = 0;
        gboolean first = TRUE;

        /* Requests of one profile and granularity draw from one supply. */
        for (guint j = 0; j < n_reqs; j++) {
            if (reqs[j].profile != r->profile || reqs[j].granularity != r->granularity)
                continue;
            if (j < i)
                first = FALSE;
            wanted += reqs[j].req->count;
        }
        if (!first)
            continue;
        av_place_count(ctx, r, -1, &total, &free_, states);
        if (total == 0) {
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                        "count %u is more than the 0 %s of profile '%s' on this host: no device matches it; "
                        "check its match rules against 'accelvirt list', or ask for another profile",
                        wanted, av_place_unit_word(r, TRUE), r->profile->name);
            return FALSE;
        }
        if (wanted > total) {
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                        "count %u is more than the %u %s of profile '%s' on this host; ask for at most %u",
                        wanted, total, av_place_unit_word(r, total != 1), r->profile->name, total);
            return FALSE;
        }
        if (wanted > free_) {
            g_autoptr(GString) held = g_string_new(NULL);

            for (guint s = 0; s <= AV_DEVICE_STATE_MISSING; s++) {
                if (states[s])
                    g_string_append_printf(held, "%s%u %s", held->len ? ", " : "", states[s],
                                           av_device_state_to_string(s));
            }
            g_set_error(error, AV_ERROR, AV_ERROR_NO_CAPACITY,
                        "not enough free %s of profile '%s': %u of %u free, %u wanted (devices not free: %s); "
                        "wait until their domains release them and their scrub finishes ('accelvirt status' "
                        "shows who holds them)",
                        av_place_unit_word(r, TRUE), r->profile->name, free_, total, wanted,
                        held->len ? held->str : "none");
            return FALSE;
        }
    }
    return TRUE;
}

/* --- trials ------------------------------------------------------------------------- */

typedef enum {
    AV_PLACE_TIE_FILTER,         /* tied requests only on the node */
    AV_PLACE_TIE_STRICT_ONLY,    /* strict ones on the node, preferred ones there first */
    AV_PLACE_TIE_PREFER,         /* every tied request there first */
} AvPlaceTieMode;

/* One trial with @node as the domain's node (-1: none).  Leaves the picks
 * in the requests on success; undoes them on failure. */
static gboolean
av_place_trial(AvPlaceCtx *ctx, AvPlaceReq *reqs, guint n_reqs, int node, AvPlaceTieMode mode, GError **error)
{
    for (guint i = 0; i < n_reqs; i++) {
        AvPlaceReq *r = &reqs[i];
        int filter = -1, prefer = -1;

        if (r->tie && node >= 0) {
            if (mode == AV_PLACE_TIE_FILTER ||
                (mode == AV_PLACE_TIE_STRICT_ONLY && r->profile->numa == AV_NUMA_STRICT))
                filter = node;
            else
                prefer = node;
        }
        if (!av_place_pick(ctx, r, filter, prefer, error)) {
            av_place_trial_undo(ctx, reqs, n_reqs);
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean
av_place_vcpus_fit(const AvPlaceOptions *options, const AvNumaNode *node)
{
    return !options || options->vcpus == 0 || options->vcpus <= node->cpus->len;
}

typedef struct {
    const AvNumaNode *node;
    guint free_;                 /* free devices of the tied profiles on it */
} AvPlaceNodeRank;

static int
av_place_node_rank_cmp(gconstpointer a, gconstpointer b, gpointer allocation)
{
    const AvPlaceNodeRank *x = a, *y = b;

    if (x->free_ != y->free_) {
        if (GPOINTER_TO_INT(allocation) == AV_ALLOCATION_PACK)
            return x->free_ < y->free_ ? -1 : 1;
        return x->free_ > y->free_ ? -1 : 1;
    }
    return x->node->id < y->node->id ? -1 : x->node->id > y->node->id;
}

/* "no single NUMA node can hold ...: node 0 has 1 free of 'gpu', node 1 ..." */
static void
av_place_error_strict(AvPlaceCtx *ctx, AvPlaceReq *reqs, guint n_reqs, GError **error)
{
    g_autoptr(GString) wanted = g_string_new(NULL);
    g_autoptr(GString) nodes = g_string_new(NULL);
    const char *why = NULL;

    for (guint i = 0; i < n_reqs; i++) {
        if (!reqs[i].tie)
            continue;
        g_string_append_printf(wanted, "%s%u of '%s'", wanted->len ? ", " : "", reqs[i].req->count,
                               reqs[i].profile->name);
        if (reqs[i].why)
            why = reqs[i].why;
    }
    for (guint n = 0; n < ctx->host->numa_nodes->len; n++) {
        const AvNumaNode *node = g_ptr_array_index(ctx->host->numa_nodes, n);
        g_autoptr(GString) counts = g_string_new(NULL);

        for (guint i = 0; i < n_reqs; i++) {
            guint total = 0, free_ = 0;

            if (!reqs[i].tie)
                continue;
            av_place_count(ctx, &reqs[i], node->id, &total, &free_, NULL);
            g_string_append_printf(counts, "%s%u", counts->len ? " and " : "", free_);
        }
        g_string_append_printf(nodes, "%snode %d has %s free", nodes->len ? ", " : "", node->id, counts->str);
    }
    g_set_error(error, AV_ERROR, AV_ERROR_NO_CAPACITY,
                "no single NUMA node can hold every device this domain needs there (%s; numa strict): %s%s%s; "
                "free devices on one node, or set the profile's numa to 'preferred' or the request's numa "
                "to 'any'", wanted->str, nodes->str, why ? "; " : "", why ? why : "");
}

static void
av_place_error_vcpus(const AvPlaceOptions *options, const AvNumaNode *node, GError **error)
{
    g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                "%u vCPUs do not fit node %d's %u CPUs; give the domain at most %u vCPUs",
                options->vcpus, node->id, node->cpus->len, node->cpus->len);
}

/* Why a trial with no node to choose failed: the first reason met. */
static void
av_place_error_trial(AvPlaceReq *reqs, guint n_reqs, GError **error)
{
    for (guint i = 0; i < n_reqs; i++) {
        if (reqs[i].why) {
            g_set_error(error, AV_ERROR, AV_ERROR_NO_CAPACITY,
                        "cannot place %u %s of profile '%s': %s", reqs[i].req->count,
                        av_place_unit_word(&reqs[i], reqs[i].req->count != 1), reqs[i].profile->name,
                        reqs[i].why);
            return;
        }
    }
    g_set_error(error, AV_ERROR, AV_ERROR_NO_CAPACITY,
                "not enough free devices to place every request of this domain together; free some "
                "('accelvirt status' shows who holds them)");
}

/* Chooses the domain's node and places every request (see av-place.h).
 * Sets *ret_node (-1 when no request ties the domain to a node). */
static gboolean
av_place_choose(AvPlaceCtx *ctx, AvPlaceReq *reqs, guint n_reqs, int *ret_node, GError **error)
{
    const AvPlaceOptions *options = ctx->options;
    GPtrArray *numa = ctx->host->numa_nodes;
    g_autoptr(GArray) ranks = NULL;
    gboolean any_tie = FALSE, any_strict = FALSE;
    AvAllocation allocation = AV_ALLOCATION_PACK;
    const AvNumaNode *vcpu_short = NULL;
    g_autoptr(GError) hard = NULL;

    for (guint i = 0; i < n_reqs; i++) {
        if (!reqs[i].tie)
            continue;
        if (!any_tie)
            allocation = reqs[i].profile->allocation;
        any_tie = TRUE;
        any_strict |= reqs[i].profile->numa == AV_NUMA_STRICT;
    }
    if (!any_tie || !numa || numa->len == 0) {
        *ret_node = -1;
        if (av_place_trial(ctx, reqs, n_reqs, -1, AV_PLACE_TIE_PREFER, &hard))
            return TRUE;
        if (hard)
            g_propagate_error(error, g_steal_pointer(&hard));
        else
            av_place_error_trial(reqs, n_reqs, error);
        return FALSE;
    }

    /* The nodes in the allocation's order of their free tied devices. */
    ranks = g_array_sized_new(FALSE, TRUE, sizeof(AvPlaceNodeRank), numa->len);
    for (guint n = 0; n < numa->len; n++) {
        AvPlaceNodeRank rank = { g_ptr_array_index(numa, n), 0 };

        for (guint i = 0; i < n_reqs; i++) {
            guint total = 0, free_ = 0;

            if (!reqs[i].tie)
                continue;
            av_place_count(ctx, &reqs[i], rank.node->id, &total, &free_, NULL);
            rank.free_ += free_;
        }
        g_array_append_val(ranks, rank);
    }
    g_array_sort_with_data(ranks, av_place_node_rank_cmp, GINT_TO_POINTER(allocation));

    /* Everything tied on one node; then the strict ones on one node with
     * the preferred ones there when they fit. */
    for (guint pass = 0; pass < (any_strict ? 2 : 1); pass++) {
        AvPlaceTieMode mode = pass == 0 ? AV_PLACE_TIE_FILTER : AV_PLACE_TIE_STRICT_ONLY;

        for (guint n = 0; n < ranks->len; n++) {
            const AvNumaNode *node = g_array_index(ranks, AvPlaceNodeRank, n).node;

            if (!av_place_trial(ctx, reqs, n_reqs, node->id, mode, &hard)) {
                if (hard) {
                    g_propagate_error(error, g_steal_pointer(&hard));
                    return FALSE;
                }
                continue;
            }
            if (av_place_vcpus_fit(options, node)) {
                *ret_node = node->id;
                return TRUE;
            }
            if (!vcpu_short || node->cpus->len > vcpu_short->cpus->len)
                vcpu_short = node;
            av_place_trial_undo(ctx, reqs, n_reqs);
        }
    }
    if (any_strict) {
        if (vcpu_short)
            av_place_error_vcpus(options, vcpu_short, error);
        else
            av_place_error_strict(ctx, reqs, n_reqs, error);
        return FALSE;
    }

    /* Preferred only: the node (with room for the vCPUs) that gets the most
     * of the tied devices; the rest elsewhere, with a warning. */
    {
        int best = -1;
        guint best_on = 0;
        const AvNumaNode *largest = NULL;

        for (guint n = 0; n < ranks->len; n++) {
            const AvNumaNode *node = g_array_index(ranks, AvPlaceNodeRank, n).node;
            guint on = 0;

            if (!largest || node->cpus->len > largest->cpus->len)
                largest = node;
            if (!av_place_vcpus_fit(options, node))
                continue;
            if (!av_place_trial(ctx, reqs, n_reqs, node->id, AV_PLACE_TIE_PREFER, &hard)) {
                if (hard) {
                    g_propagate_error(error, g_steal_pointer(&hard));
                    return FALSE;
                }
                continue;
            }
            for (guint i = 0; i < n_reqs; i++) {
                for (guint j = 0; reqs[i].tie && j < reqs[i].picked->len; j++)
                    on += ((AvPlaceFn *)g_ptr_array_index(reqs[i].picked, j))->node == node->id;
                for (guint j = 0; reqs[i].tie && j < reqs[i].mdev_parents->len; j++) {
                    on += av_place_mdev_parent_node(ctx->host, g_ptr_array_index(reqs[i].mdev_parents, j)) == node->id;
                }
            }
            av_place_trial_undo(ctx, reqs, n_reqs);
            if (best < 0 || on > best_on) {
                best = node->id;
                best_on = on;
            }
        }
        if (best < 0) {
            if (largest && !av_place_vcpus_fit(options, largest))
                av_place_error_vcpus(options, largest, error);
            else
                av_place_error_trial(reqs, n_reqs, error);
            return FALSE;
        }
        if (!av_place_trial(ctx, reqs, n_reqs, best, AV_PLACE_TIE_PREFER, &hard)) {
            /* Cannot happen: the same trial succeeded above. */
            if (hard)
                g_propagate_error(error, g_steal_pointer(&hard));
            else
                av_place_error_trial(reqs, n_reqs, error);
            return FALSE;
        }
        *ret_node = best;
        return TRUE;
    }
}

/* av_place_choose(), trying first every p2p="preferred" request as if
 * required, so that the node chosen is one where a switch holds it; when
 * that fails, as asked (the devices anywhere, with a warning). */
static gboolean
av_place_choose_p2p(AvPlaceCtx *ctx, AvPlaceReq *reqs, guint n_reqs, int *ret_node, GError **error)
{
    gboolean upgraded = FALSE;

    for (guint i = 0; i < n_reqs; i++) {
        if (reqs[i].p2p == AV_P2P_PREFERRED && reqs[i].req->count >= 2) {
            reqs[i].p2p = AV_P2P_REQUIRED;
            upgraded = TRUE;
        }
    }
    if (upgraded) {
        g_autoptr(GError) local = NULL;
        gboolean ok = av_place_choose(ctx, reqs, n_reqs, ret_node, &local);

        for (guint i = 0; i < n_reqs; i++) {
            reqs[i].p2p = reqs[i].req->p2p;
            /* The reasons of that search are not the answer's. */
            if (!ok)
                g_clear_pointer(&reqs[i].why, g_free);
        }
        if (ok)
            return TRUE;
    }
    return av_place_choose(ctx, reqs, n_reqs, ret_node, error);
}

/* --- the placement ------------------------------------------------------------------------ */

/* TRUE when the pooled device @fn is still the device the scan shows at its
 * address (the pool was reconciled with this scan): a BDF that moved since
 * (seed 003) must not hand the domain another card. */
static gboolean
av_place_fn_check_identity(const AvPlaceCtx *ctx, const AvPlaceFn *fn, GError **error)
{
    g_autofree char *identity = NULL;
    g_autofree char *fallback = NULL;

    if (fn->pci) {
        identity = av_pool_identity_pci(ctx->host, fn->pci);
        if (strcmp(identity, fn->pool->identity) == 0)
            return TRUE;
        fallback = av_pool_identity_pci_fallback(ctx->host, fn->pci);
    } else {
        identity = av_pool_identity_usb(fn->usb);
        if (strcmp(identity, fn->pool->identity) == 0)
            return TRUE;
        fallback = av_pool_identity_usb_fallback(fn->usb);
    }
    if (strcmp(fallback, fn->pool->identity) == 0)
        return TRUE;
    g_set_error(error, AV_ERROR, AV_ERROR_STATE,
                "the pool is out of date: '%s' is now %s, not the pooled device %s; run 'accelvirt status' "
                "to reconcile the pool with the host, then place again", fn->pool->address, identity,
                fn->pool->identity);
    return FALSE;
}

static int
av_place_fn_index_cmp(gconstpointer a, gconstpointer b)
{
    const AvPlaceFn *x = *(AvPlaceFn *const *)a, *y = *(AvPlaceFn *const *)b;

    return x->index < y->index ? -1 : x->index > y->index;
}

static int
av_place_address_cmp(gconstpointer a, gconstpointer b)
{
    return av_pci_address_compare(*(const char *const *)a, *(const char *const *)b);
}

static AvPlacedItem *
av_place_item_from_fn(const AvPlaceCtx *ctx, const AvPlaceFn *fn)
{
    AvPlacedItem *item = g_new0(AvPlacedItem, 1);
    const AvProfile *profile = av_policy_find(ctx->policy, fn->pool->profile);

    item->profile = g_strdup(fn->pool->profile);
    item->identity = g_strdup(fn->pool->identity);
    item->numa_node = fn->node;
    item->vf_index = -1;
    if (fn->usb) {
        item->attach = AV_ATTACH_USB;
        item->usb_bus_path = g_strdup(fn->usb->bus_path);
        item->usb_vendor = fn->usb->vendor_id;
        item->usb_product = fn->usb->product_id;
        item->usb_busnum = fn->usb->busnum;
        item->usb_devnum = fn->usb->devnum;
    } else {
        /* A device of another profile in a whole card: as its profile says,
         * or plain passthrough when that profile is gone. */
        item->attach = profile && profile->attach == AV_ATTACH_SRIOV_VF ? AV_ATTACH_SRIOV_VF : AV_ATTACH_VFIO_PCI;
        /* A card of attach netdev: its first interface (av_place_fn_viable()
         * took only one that has some). */
        if (profile && profile->attach == AV_ATTACH_NETDEV && fn->pci->netdevs && fn->pci->netdevs->len > 0) {
            item->attach = AV_ATTACH_NETDEV;
            item->netdev = g_strdup(g_ptr_array_index(fn->pci->netdevs, 0));
        }
        item->pci_address = g_strdup(fn->pci->address);
        item->root_port = g_strdup(fn->root_port);
        item->switch_port = g_strdup(fn->switch_port);
        /* NVIDIA's display controllers (PCI Code and ID Assignment
         * Specification: base class 0x03), which take QEMU's
         * x-nv-gpudirect-clique (hw/vfio/pci-quirks.c). */
        item->gpudirect = fn->pci->vendor_id == 0x10de && (fn->pci->class_code >> 16) == 0x03;
        if (item->attach == AV_ATTACH_SRIOV_VF && fn->pci->physfn && fn->pci->vf_index >= 0) {
            item->pf_address = g_strdup(fn->pci->physfn);
            item->vf_index = fn->pci->vf_index;
        }
    }
    return item;
}

static char *
av_place_random_uuid(gpointer data)
{
    return g_uuid_string_random();
}

/* Warnings for the tied requests placed off @node. */
static void
av_place_warn(AvPlaceCtx *ctx, AvPlaceReq *r, GPtrArray *items, guint first, int node, GPtrArray *warnings)
{
    guint off = 0, n = items->len - first;
    int where = -1;

    if (!r->tie || node < 0)
        return;
    for (guint i = first; i < items->len; i++) {
        AvPlacedItem *item = g_ptr_array_index(items, i);

        if (item->numa_node != node) {
            off++;
            if (where < 0 || item->numa_node < where)
                where = item->numa_node;
        }
    }
    if (off == 0)
        return;
    g_ptr_array_add(warnings,
                    g_strdup_printf("profile '%s' has numa preferred but %u of its %u %s %s on NUMA node %d, "
                                    "not on the domain's node %d, which has no more free: expect slower "
                                    "device access until devices are freed there and the domain is placed "
                                    "again", r->profile->name, off, n, n == 1 ? "device" : "devices",
                                    off == 1 ? "is" : "are", where, node));
}

static int
av_place_int_cmp(gconstpointer a, gconstpointer b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return x < y ? -1 : x > y;
}

/* See av-place.h. */
GPtrArray *
av_placement_nodes(const AvHost *host, const AvPlacement *placement)
{
    GPtrArray *nodes = g_ptr_array_new_with_free_func((GDestroyNotify)av_placed_node_free);
    g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(int));

    if (placement->numa_node >= 0)
        g_array_append_val(ids, placement->numa_node);
    for (guint i = 0; i < placement->items->len; i++) {
        const AvPlacedItem *item = g_ptr_array_index(placement->items, i);

        if (item->numa_node >= 0)
            g_array_append_val(ids, item->numa_node);
    }
    g_array_sort(ids, av_place_int_cmp);
    for (guint i = 0; i < ids->len; i++) {
        int id = g_array_index(ids, int, i);

        if (i > 0 && id == g_array_index(ids, int, i - 1))
            continue;
        for (guint n = 0; host->numa_nodes && n < host->numa_nodes->len; n++) {
            const AvNumaNode *numa = g_ptr_array_index(host->numa_nodes, n);
            AvPlacedNode *node;

            if (numa->id != id)
                continue;
            node = g_new0(AvPlacedNode, 1);
            node->id = id;
            node->cpus = g_array_new(FALSE, FALSE, sizeof(guint));
            if (numa->cpus)
                g_array_append_vals(node->cpus, numa->cpus->data, numa->cpus->len);
            node->memory_kib = numa->memory_kib;
            g_ptr_array_add(nodes, node);
            break;
        }
    }
    return nodes;
}

AvPlacement *
av_place(const AvHost *host, const AvPolicy *policy, const AvPool *pool, GPtrArray *requests,
         const AvPlaceOptions *options, GError **error)
{
    static const AvPlaceOptions no_options = { 0 };
    g_autoptr(AvPlacement) placement = NULL;
    g_autofree AvPlaceReq *reqs = NULL;
    AvPlaceCtx ctx;
    guint n_reqs;
    int node = -1;
    gboolean ok = FALSE;

    g_return_val_if_fail(host && policy && pool && requests, NULL);
    if (!options)
        options = &no_options;
    n_reqs = requests->len;
    reqs = g_new0(AvPlaceReq, n_reqs ? n_reqs : 1);
    for (guint i = 0; i < n_reqs; i++) {
        const AvRequest *req = g_ptr_array_index(requests, i);
        const AvProfile *profile = req->profile ? av_policy_find(policy, req->profile) : NULL;

        if (!profile) {
            av_place_error_unknown(policy, req->profile ? req->profile : "", error);
            return NULL;
        }
        if (req->count == 0) {
            g_set_error(error, AV_ERROR, AV_ERROR_INVALID_INPUT,
                        "count 0 of profile '%s' asks for nothing; give a count of at least 1", profile->name);
            return NULL;
        }
        reqs[i].req = req;
        reqs[i].profile = profile;
        reqs[i].granularity = req->granularity_set ? req->granularity : profile->granularity;
        if (profile->attach == AV_ATTACH_MDEV || profile->attach == AV_ATTACH_USB)
            reqs[i].granularity = AV_GRANULARITY_FUNCTION;
        reqs[i].tie = profile->numa != AV_NUMA_NONE && !req->numa_any;
        reqs[i].p2p = req->p2p;
        reqs[i].picked = g_ptr_array_new();
        reqs[i].mdev_parents = g_ptr_array_new();
    }

    av_place_ctx_init(&ctx, host, policy, pool, options);
    for (guint i = 0; i < n_reqs; i++) {
        reqs[i].list = g_hash_table_lookup(ctx.by_profile, reqs[i].profile->name);
        if (reqs[i].profile->attach != AV_ATTACH_MDEV)
            continue;
        reqs[i].virtual_parents = g_ptr_array_new();
        for (guint j = 0; host->mdev_parents && j < host->mdev_parents->len; j++) {
            const AvMdevParent *mp = g_ptr_array_index(host->mdev_parents, j);

            if (!mp->pci && av_policy_match_mdev_parent(policy, mp) == reqs[i].profile)
                g_ptr_array_add(reqs[i].virtual_parents, (gpointer)mp);
        }
    }

    if (!av_place_check_counts(&ctx, reqs, n_reqs, error) ||
        !av_place_choose_p2p(&ctx, reqs, n_reqs, &node, error))
        goto out;

    placement = g_new0(AvPlacement, 1);
    placement->numa_node = node;
    placement->cpus = g_array_new(FALSE, FALSE, sizeof(guint));
    placement->items = g_ptr_array_new_with_free_func((GDestroyNotify)av_placed_item_free);
    placement->warnings = g_ptr_array_new_with_free_func(g_free);
    for (guint n = 0; node >= 0 && n < host->numa_nodes->len; n++) {
        const AvNumaNode *numa = g_ptr_array_index(host->numa_nodes, n);

        if (numa->id == node && numa->cpus)
            g_array_append_vals(placement->cpus, numa->cpus->data, numa->cpus->len);
    }
    for (guint i = 0; i < n_reqs; i++) {
        AvPlaceReq *r = &reqs[i];
        guint first = placement->items->len;

        g_ptr_array_sort(r->picked, av_place_fn_index_cmp);
        for (guint j = 0; j < r->picked->len; j++) {
            AvPlaceFn *fn = g_ptr_array_index(r->picked, j);

            AvPlacedItem *item;

            if (!av_place_fn_check_identity(&ctx, fn, error))
                goto out;
            item = av_place_item_from_fn(&ctx, fn);
            /* The request's own devices must hold its bitstream (a whole card's
             * functions of other profiles are not programmed). */
            if (r->req->bitstream_sha256 && fn->pci && g_str_equal(item->profile, r->profile->name))
                item->bitstream = g_strdup(r->req->bitstream_sha256);
            g_ptr_array_add(placement->items, item);
        }
        g_ptr_array_sort(r->mdev_parents, av_place_address_cmp);
        for (guint j = 0; j < r->mdev_parents->len; j++) {
            const char *parent = g_ptr_array_index(r->mdev_parents, j);
            AvPlacedItem *item = g_new0(AvPlacedItem, 1);

            item->profile = g_strdup(r->profile->name);
            item->attach = AV_ATTACH_MDEV;
            if (av_pci_address_is_valid(parent))
                item->pci_address = g_strdup(parent);
            else
                item->mdev_parent = g_strdup(parent);
            item->mdev_type = g_strdup(r->profile->mdev_type);
            item->mdev_uuid = options->new_uuid ? options->new_uuid(options->new_uuid_data)
                                                : av_place_random_uuid(NULL);
            item->numa_node = av_place_mdev_parent_node(host, parent);
            g_ptr_array_add(placement->items, item);
        }
        av_place_warn(&ctx, r, placement->items, first, node, placement->warnings);
        if (r->p2p_warning)
            g_ptr_array_add(placement->warnings, g_strdup(r->p2p_warning));
    }
    placement->nodes = av_placement_nodes(host, placement);
    ok = TRUE;

out:
    for (guint i = 0; i < n_reqs; i++)
        av_place_req_clear(&reqs[i]);
    av_place_ctx_clear(&ctx);
    return ok ? g_steal_pointer(&placement) : NULL;
}

/* --- fragmentation ------------------------------------------------------------------------ */

static const char *
av_place_owner_name(const AvOwner *owner)
{
    if (!owner)
        return NULL;
    if (owner->domain_uuid)
        return owner->domain_uuid;
    if (owner->domain_name)
        return owner->domain_name;
    return owner->nova_instance;
}

/* A device a move could take away from its card: held by a domain. */
static gboolean
av_place_fn_movable(const AvPlaceFn *fn)
{
    return (fn->pool->state == AV_DEVICE_STATE_CLAIMED || fn->pool->state == AV_DEVICE_STATE_IN_USE) &&
           av_place_owner_name(fn->pool->owner) != NULL;
}

/* The free functions of @profile left on @card for moves (not yet a target). */
static guint
av_place_card_targets(const AvPlaceUnit *card, const char *profile, GHashTable *targeted)
{
    guint n = 0;

    for (guint i = 0; i < card->fns->len; i++) {
        const AvPlaceFn *fn = g_ptr_array_index(card->fns, i);

        n += fn->available && strcmp(fn->pool->profile, profile) == 0 && !g_hash_table_contains(targeted, fn);
    }
    return n;
}

static void
av_place_defrag_profile(AvPlaceCtx *ctx, const AvProfile *profile, json_t *profiles, json_t *moves)
{
    GPtrArray *list = g_hash_table_lookup(ctx->by_profile, profile->name);
    g_autoptr(GPtrArray) cards = g_ptr_array_new();
    g_autoptr(GPtrArray) partly = g_ptr_array_new();
    g_autoptr(GHashTable) seen = g_hash_table_new(NULL, NULL);
    g_autoptr(GHashTable) targeted = g_hash_table_new(NULL, NULL);
    g_autoptr(GHashTable) freed = g_hash_table_new(NULL, NULL);
    guint n_free_cards = 0, free_fns = 0, free_on_partly = 0;
    json_t *entry;

    for (guint i = 0; list && i < list->len; i++) {
        AvPlaceFn *fn = g_ptr_array_index(list, i);

        if (fn->card && g_hash_table_add(seen, fn->card))
            g_ptr_array_add(cards, fn->card);
    }
    if (cards->len == 0)
        return;
    for (guint i = 0; i < cards->len; i++) {
        AvPlaceUnit *card = g_ptr_array_index(cards, i);

        free_fns += card->n_available;
        if (card->n_available == card->fns->len) {
            n_free_cards++;
        } else if (card->n_available > 0) {
            g_ptr_array_add(partly, card);
            free_on_partly += card->n_available;
        }
    }
    entry = json_object();
    json_object_set_new(entry, "profile", json_string(profile->name));
    json_object_set_new(entry, "granularity", json_string(av_granularity_to_string(profile->granularity)));
    json_object_set_new(entry, "cards", json_integer(cards->len));
    json_object_set_new(entry, "cards_free", json_integer(n_free_cards));
    json_object_set_new(entry, "cards_partly_used", json_integer(partly->len));
    /* The share of the free functions that sit on partly used cards: 0 when
     * every free function is on a wholly free card. */
    json_object_set_new(entry, "fragmentation", json_real(free_fns ? (double)free_on_partly / free_fns : 0.0));
    json_array_append_new(profiles, entry);

    /* Moves: empty the partly used cards that hold the fewest movable
     * functions first, onto the other partly used cards, fullest first. */
    {
        g_autoptr(GPtrArray) order = g_ptr_array_copy(partly, NULL, NULL);

        for (guint i = 0; i < order->len; i++) {
            AvPlaceUnit *card = g_ptr_array_index(order, i);
            guint held = card->fns->len - card->n_available;

            card->n_taken = held;   /* reused as the sort key below; reset after */
        }
        /* Insertion sort by (held, index): partly used cards are few. */
        for (guint i = 1; i < order->len; i++) {
            for (guint j = i; j > 0; j--) {
                AvPlaceUnit *a = g_ptr_array_index(order, j - 1), *b = g_ptr_array_index(order, j);

                if (a->n_taken < b->n_taken || (a->n_taken == b->n_taken && a->index < b->index))
                    break;
                order->pdata[j - 1] = b;
                order->pdata[j] = a;
            }
        }
        for (guint i = 0; i < order->len; i++)
            ((AvPlaceUnit *)g_ptr_array_index(order, i))->n_taken = 0;

        for (guint i = 0; i < order->len; i++) {
            AvPlaceUnit *card = g_ptr_array_index(order, i);
            g_autoptr(GPtrArray) held = g_ptr_array_new();
            g_autoptr(GPtrArray) targets = g_ptr_array_new();
            g_autoptr(GPtrArray) dests = g_ptr_array_new();
            gboolean ok = TRUE;

            for (guint j = 0; j < card->fns->len && ok; j++) {
                AvPlaceFn *fn = g_ptr_array_index(card->fns, j);

                if (fn->available)
                    continue;
                /* Only functions of this profile held by a domain can move. */
                ok = av_place_fn_movable(fn) && strcmp(fn->pool->profile, profile->name) == 0;
                g_ptr_array_add(held, fn);
            }
            if (!ok || held->len == 0)
                continue;
            /* Destinations: other partly used cards not freed by a move, the
             * fewest free targets first (pack), then address. */
            for (guint j = 0; j < partly->len; j++) {
                AvPlaceUnit *other = g_ptr_array_index(partly, j);

                if (other != card && !g_hash_table_contains(freed, other) &&
                    av_place_card_targets(other, profile->name, targeted) > 0)
                    g_ptr_array_add(dests, other);
            }
            for (guint j = 1; j < dests->len; j++) {
                for (guint k = j; k > 0; k--) {
                    AvPlaceUnit *a = g_ptr_array_index(dests, k - 1), *b = g_ptr_array_index(dests, k);
                    guint ta = av_place_card_targets(a, profile->name, targeted);
                    guint tb = av_place_card_targets(b, profile->name, targeted);

                    if (ta < tb || (ta == tb && a->index < b->index))
                        break;
                    dests->pdata[k - 1] = b;
                    dests->pdata[k] = a;
                }
            }
            for (guint d = 0; d < dests->len && targets->len < held->len; d++) {
                AvPlaceUnit *other = g_ptr_array_index(dests, d);

                for (guint j = 0; j < other->fns->len && targets->len < held->len; j++) {
                    AvPlaceFn *fn = g_ptr_array_index(other->fns, j);

                    if (fn->available && strcmp(fn->pool->profile, profile->name) == 0 &&
                        !g_hash_table_contains(targeted, fn) && !g_ptr_array_find(targets, fn, NULL))
                        g_ptr_array_add(targets, fn);
                }
            }
            if (targets->len < held->len)
                continue;
            g_hash_table_add(freed, card);
            for (guint j = 0; j < held->len; j++) {
                AvPlaceFn *from = g_ptr_array_index(held, j);
                AvPlaceFn *to = g_ptr_array_index(targets, j);
                json_t *move = json_object();

                g_hash_table_add(targeted, to);
                json_object_set_new(move, "domain", json_string(av_place_owner_name(from->pool->owner)));
                json_object_set_new(move, "device", json_string(from->pool->identity));
                json_object_set_new(move, "from", json_string(from->pci->address));
                json_object_set_new(move, "to", json_string(to->pci->address));
                json_object_set_new(move, "frees_card", json_string(card->address));
                json_array_append_new(moves, move);
            }
        }
    }
}

json_t *
av_place_defrag_report(const AvHost *host, const AvPolicy *policy, const AvPool *pool)
{
    json_t *report = json_object();
    json_t *profiles = json_array();
    json_t *moves = json_array();
    AvPlaceCtx ctx;

    g_return_val_if_fail(host && policy && pool, NULL);
    av_place_ctx_init(&ctx, host, policy, pool, NULL);
    for (guint i = 0; i < policy->profiles->len; i++) {
        const AvProfile *profile = g_ptr_array_index(policy->profiles, i);

        if (profile->attach == AV_ATTACH_VFIO_PCI || profile->attach == AV_ATTACH_SRIOV_VF)
            av_place_defrag_profile(&ctx, profile, profiles, moves);
    }
    av_place_ctx_clear(&ctx);
    json_object_set_new(report, "profiles", profiles);
    json_object_set_new(report, "moves", moves);
    return report;
}
