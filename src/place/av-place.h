/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: placement, the allocator.  Turns a domain's accelerator
 * requests into devices of this host and a NUMA node for its vCPUs.
 *
 * The topology is a tree: host > NUMA node > card > region > function.
 *   card      the devices of one physical card: the functions sharing
 *             domain:bus:slot, with the VFs of those functions;
 *   region    one function of a card that has VFs or mdevs (a PF), with them;
 *   function  what a domain finally gets: a PCI function, a VF, an mdev
 *             instance, a USB device.
 * The IOMMU group is the unit of passthrough: a device is only placed when
 * its group is viable (av_vfio_group_check) and every pooled device of the
 * group is free.
 *
 * Rules (seed 003):
 *   - a card-granularity request takes a whole card, every pooled device of
 *     it free; region takes a whole region;
 *   - function requests pack (fill the partly used card or region first, so
 *     that whole cards stay free for whole-card requests) or spread (the
 *     emptiest first), per the profile's allocation;
 *   - NUMA strict: all devices on one node, with the vCPUs and memory there;
 *     preferred: that node when possible, else another with a warning; none:
 *     anywhere.  The domain's vCPU count must fit the chosen node's CPUs;
 *   - mdev: parents already running the profile's type first (a vGPU parent
 *     runs one type at a time), then the allocation order;
 *   - p2p, a PCI request of count >= 2: all its devices (cards,
 *     regions) behind one host PCIe switch (av_host_pci_position(); a
 *     device behind no switch never qualifies), within the node the search
 *     tries; the switches with enough free in the allocation's order (pack:
 *     the fewest free, spread: the most; then address).  required: no such
 *     switch fails the node ("no PCIe switch ... has N free devices (cards,
 *     regions) of profile 'x' (switch A has 1 free, ...)"), so a strict search tries the
 *     other nodes; preferred: the node search first asks for one switch, and
 *     when no node has one, places as without p2p with a warning;
 *   - each placed PCI item says its host root port, switch and whether it is
 *     an NVIDIA GPU (gpudirect); the placement lists the host NUMA nodes it
 *     uses (AvPlacement->nodes), for the guest topology;
 *   - deterministic: the same pool, host and requests give the same answer
 *     (ties broken by NUMA node, then address).
 * Placement reads the pool and changes nothing; the caller claims.  What a
 * request, a placed device and a placement are, and what the pool records
 * of one: pool/av-pool-placement.h. */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "pci/av-pci.h"
#include "policy/av-policy.h"
#include "pool/av-pool.h"
#include "pool/av-pool-placement.h"

G_BEGIN_DECLS

typedef struct {
    const char *domain_uuid;     /* devices claimed by this domain count as free; may be NULL */
    guint vcpus;                 /* the domain's vCPU count (must fit the node) */
    /* Makes the UUIDs of new mdevs; NULL: g_uuid_string_random().  Tests pass
     * a counter so that golden files are stable. */
    char *(*new_uuid)(gpointer data);
    gpointer new_uuid_data;
} AvPlaceOptions;

/* The host nodes @placement uses (its numa_node and its items' numa_node),
 * ascending, with their CPUs and memory from @host; a node @host lacks is
 * left out: what av_place() stores in AvPlacement->nodes, for placements
 * built otherwise (the hook's remap of the same cards).  Returns a new
 * array of AvPlacedNode* (caller frees). */
GPtrArray *av_placement_nodes(const AvHost *host, const AvPlacement *placement);
/* Places @requests (AvRequest*) on @host given @pool's states.  Errors,
 * each one sentence saying what to do: AV_ERROR_INVALID_INPUT for an
 * unknown profile, a count larger than what the host has of that profile
 * at all ("count 9 is more than the 8 devices of profile 'x' on this host")
 * or not enough CPUs on the node ("12 vCPUs do not fit node 1's 8 CPUs");
 * AV_ERROR_NO_CAPACITY for not enough free devices (naming how many are
 * free, and which states hold the rest), a strict request that no single
 * node can hold, or no device of a request that fits (the reason of the
 * last one tried); AV_ERROR_STATE when the pool is out of date with the
 * scan.  Returns a new placement or NULL. */
AvPlacement *av_place(const AvHost *host, const AvPolicy *policy, const AvPool *pool,
                      GPtrArray *requests, const AvPlaceOptions *options, GError **error);

/* How fragmented the pool is, for `accelvirt plan --defrag`:
 *   {"profiles": [{"profile", "granularity", "cards": N, "cards_free": N,
 *     "cards_partly_used": N, "fragmentation": 0.0-1.0}],
 *    "moves": [{"domain": UUID or name, "device": identity, "from": address,
 *               "to": address, "frees_card": address}]}
 * where a move is a held function that, placed on another partly used card
 * of the same profile, would leave its card wholly free.  Deterministic. */
json_t *av_place_defrag_report(const AvHost *host, const AvPolicy *policy, const AvPool *pool);

G_END_DECLS
