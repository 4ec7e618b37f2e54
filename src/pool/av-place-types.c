/* accelvirt: the constructors and frees of the placement types
 * (src/pool/av-place.h).  Kept apart from the allocator (av-place.c) so that
 * the domain rewrite and its tests build placements by hand. */
#include "config.h"

#include "av-place.h"

/* A request for @count devices of @profile (copied), with the profile's
 * granularity and numa="same".  Caller frees with av_request_free(). */
AvRequest *
av_request_new(const char *profile, guint count)
{
    AvRequest *request = g_new0(AvRequest, 1);

    request->profile = g_strdup(profile);
    request->count = count;
    request->granularity_set = FALSE;
    request->granularity = AV_GRANULARITY_FUNCTION;
    request->numa_any = FALSE;
    return request;
}

void
av_request_free(AvRequest *request)
{
    if (!request)
        return;
    g_free(request->profile);
    g_free(request->bitstream);
    g_free(request->function);
    g_free(request->bitstream_sha256);
    g_free(request);
}

void
av_placed_item_free(AvPlacedItem *item)
{
    if (!item)
        return;
    g_free(item->profile);
    g_free(item->identity);
    g_free(item->pci_address);
    g_free(item->pf_address);
    g_free(item->bitstream);
    g_free(item->mdev_parent);
    g_free(item->mdev_type);
    g_free(item->mdev_uuid);
    g_free(item->usb_bus_path);
    g_free(item->root_port);
    g_free(item->switch_port);
    g_free(item);
}

void
av_placed_node_free(AvPlacedNode *node)
{
    if (!node)
        return;
    if (node->cpus)
        g_array_unref(node->cpus);
    g_free(node);
}

void
av_placement_free(AvPlacement *placement)
{
    if (!placement)
        return;
    if (placement->cpus)
        g_array_unref(placement->cpus);
    if (placement->items)
        g_ptr_array_unref(placement->items);
    if (placement->warnings)
        g_ptr_array_unref(placement->warnings);
    if (placement->nodes)
        g_ptr_array_unref(placement->nodes);
    g_free(placement);
}
