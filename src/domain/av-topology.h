/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the guest PCIe and NUMA topology a rewrite writes (
 * seed 004: "PCI topology is lost").  Pure: from the domain XML and a
 * placement (its items' host positions and nodes, src/pool/av-pool-placement.h),
 * no sysfs, no libvirt.  av_domain_rewrite() writes what
 * av_guest_topology() returns; `accelvirt plan` and the --dry-run of
 * rewrite and define print it.
 *
 * What is mirrored:
 *   - switches: on a q35 machine, PCI devices (vfio-pci, sriov-vf) of the
 *     placement that sit behind one host PCIe switch
 *     (AvPlacedItem->switch_port), two or more of them, go behind one
 *     emulated switch: a pcie-root-port > a pcie-switch-upstream-port > one
 *     pcie-switch-downstream-port per device, so that the guest's driver
 *     sees a common upstream port and allows peer-to-peer between them;
 *   - guest NUMA cells: when the placement's PCI and mdev devices sit on two
 *     or more host nodes (guest-numa "auto"), or always when the metadata
 *     asks (<av:topology guest-numa="mirror"/>, one node is then one cell):
 *     one <cpu><numa><cell> per host node used, cell K for the K-th node in
 *     ascending host node id; the vCPUs split evenly in order (the first
 *     cells take one more), memory split evenly in whole MiB, or whole
 *     pages of the largest <hugepages><page size=> the domain names (the
 *     last cell takes the rest); each cell's vCPUs pinned to its node's CPUs and
 *     its memory strict on its node (<numatune><memnode>); every device
 *     with a known node (and every switch) goes behind a pcie-root-port
 *     under a pcie-expander-bus whose <target><node> is its cell, so that
 *     the guest reads each device's numa_node as the cell of its host node
 *     (the root ports on slots 0 to 31 of the expander bus, then on
 *     functions 1 to 7 of those slots);
 *   - GPUDirect cliques: NVIDIA GPUs (AvPlacedItem->gpudirect) behind one
 *     host switch get the same x-nv-gpudirect-clique (QEMU vfio-pci's
 *     property, 0 to 15, numbered by switch in placement order) through
 *     libvirt's <qemu:override> (libvirt 8.2 and later); others none; a
 *     GPU for whose alias the user's <qemu:override> sets one keeps the
 *     user's, with a note.
 * Not mirrored, each with a note: any of it on a machine other than q35
 * (i440fx has no PCIe switch); guest NUMA when the user wrote <cpu><numa>
 * cells, pinned the vCPUs or set a <numatune> (theirs win; the switches
 * are still mirrored, on pcie-root), when the domain has fewer vCPUs than
 * cells or less memory than one MiB (one hugepage) per cell, or when a
 * node's CPUs are unknown; devices whose node is unknown
 * stay where libvirt puts them.
 *
 * The metadata may ask (at most one element, every attribute optional):
 *   <av:topology guest-numa="auto|mirror|off" switches="mirror|off"
 *                gpudirect="auto|off"/>
 * guest-numa="mirror" that cannot be honoured (not q35, user cells, too
 * few vCPUs) is an error, not a note. */
#pragma once

#include <glib.h>
#include <jansson.h>

#include "pool/av-pool-placement.h"

G_BEGIN_DECLS

/* The downstream ports one guest pcie-switch-upstream-port takes (its
 * slots 0 to 31): a host switch with more of the placement's devices
 * becomes several guest switches, each its own group (same host_switch,
 * same clique), with a note. */
#define AV_GUEST_SWITCH_PORTS_MAX 32u

typedef enum {
    AV_GUEST_NUMA_AUTO = 0,      /* cells when the devices span two or more host nodes */
    AV_GUEST_NUMA_MIRROR,        /* cells always (one node: one cell) */
    AV_GUEST_NUMA_OFF,           /* never */
} AvGuestNuma;

/* <av:topology>, parsed; the defaults when absent. */
typedef struct {
    AvGuestNuma guest_numa;
    gboolean switches;           /* switches="mirror" (default TRUE) */
    gboolean gpudirect;          /* gpudirect="auto" (default TRUE) */
} AvTopologyRequest;

/* One guest NUMA cell. */
typedef struct {
    guint id;                    /* 0, 1, ... */
    int host_node;               /* the host node it mirrors */
    GArray *vcpus;               /* guint: its vCPUs, ascending, never empty */
    GArray *host_cpus;           /* guint: the host node's CPUs its vCPUs are pinned to */
    guint64 memory_kib;          /* a multiple of 1024 */
} AvGuestCell;

void av_guest_cell_free(AvGuestCell *cell);

/* Devices accelvirt positions in the guest: either one emulated switch
 * mirroring a host one (@host_switch set, two or more items), or one device
 * alone on a root port of its own (@host_switch NULL, written only under a
 * cell's expander bus). */
typedef struct {
    int cell;                    /* the guest cell of the pcie-expander-bus it hangs under; -1: on pcie-root */
    char *host_switch;           /* the host switch mirrored (its upstream port's address), or NULL */
    int clique;                  /* the x-nv-gpudirect-clique of its GPUs (0-15), -1 none */
    GArray *items;               /* guint: indexes into the placement's items, ascending */
} AvGuestGroup;

void av_guest_group_free(AvGuestGroup *group);

typedef struct {
    AvTopologyRequest request;   /* what the metadata asked */
    GPtrArray *cells;            /* AvGuestCell*, by id; empty: no guest NUMA written */
    GPtrArray *groups;           /* AvGuestGroup*, in order of their first item; items in none are
                                  * placed by libvirt as before (a root port of their own) */
    GPtrArray *notes;            /* char*: sentences saying what was not mirrored and why */
} AvGuestTopology;

void av_guest_topology_free(AvGuestTopology *topology);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvGuestTopology, av_guest_topology_free)

/* The <av:topology> of the domain XML @xml (the defaults when it has none),
 * with the hostile-input rules of av_domain_requests(): at most one
 * element, known attributes and values only, else AV_ERROR_INVALID_INPUT in
 * one sentence naming the attribute and its values. */
gboolean av_domain_topology_request(const char *xml, gsize len, AvTopologyRequest *ret, GError **error);

/* The guest topology a rewrite of @xml with @placement writes (above).
 * AV_ERROR_INVALID_INPUT for a malformed <av:topology> or a guest-numa
 * "mirror" that cannot be honoured (one sentence saying what to change).
 * Deterministic.  Caller frees. */
AvGuestTopology *av_guest_topology(const char *xml, gsize len, const AvPlacement *placement, GError **error);

/* Lines (each ending in '\n') saying what @topology writes, for people:
 *   "guest NUMA: cell 0 = host node 0 (vCPUs 0-1, 2048 MiB), cell 1 = host node 1 (vCPUs 2-3, 2048 MiB)"
 *   "guest switch under cell 0 mirrors host switch 0000:01:00.0: ua-accelvirt-0 (0000:03:00.0),
 *    ua-accelvirt-1 (0000:04:00.0); x-nv-gpudirect-clique 0"
 *   "guest root port under cell 1: ua-accelvirt-2 (0000:81:00.0)"
 *   "not mirrored: ..." for each note
 * or "guest topology: as libvirt places it (nothing to mirror)\n".  Caller
 * frees. */
char *av_guest_topology_describe(const AvGuestTopology *topology, const AvPlacement *placement);

/* The same as JSON, for --json:
 *   {"cells": [{"cell", "host_node", "vcpus": "0-1", "memory_kib"}],
 *    "groups": [{"cell" (or null), "host_switch" (or null), "clique" (or null),
 *                "devices": [{"alias", "address"}]}],
 *    "notes": [...]} */
json_t *av_guest_topology_json(const AvGuestTopology *topology, const AvPlacement *placement);

G_END_DECLS
