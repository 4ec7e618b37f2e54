/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what a placement is, and what the pool records of one.
 *
 * The vocabulary that the allocator (place/av-place.h) answers in, that the
 * domain rewrite turns into <hostdev> entries and the hook reads back: a
 * request (<av:request/>), a placed device, a placement.  And the record the
 * pool keeps of a domain's placement in pool.json (av-pool-placement.c),
 * which decides at restore and migrate instead of the domain's metadata. */
#pragma once

#include <glib.h>

#include "pool/av-pool.h"

G_BEGIN_DECLS

/* <av:request p2p=>: whether the devices of one request must sit behind one
 * host PCIe switch (av_host_pci_position()), so that they can talk
 * peer-to-peer without the root complex. */
typedef enum {
    AV_P2P_NONE = 0,             /* absent: no constraint */
    AV_P2P_PREFERRED,            /* one switch when some switch can hold them all, else as without p2p
                                  * (with a warning in the placement) */
    AV_P2P_REQUIRED,             /* one switch, else AV_ERROR_NO_CAPACITY naming what each switch has free */
} AvP2p;

/* One <av:request profile= count= granularity= numa= p2p=/>. */
typedef struct {
    char *profile;
    guint count;                 /* >= 1 */
    gboolean granularity_set;
    AvGranularity granularity;   /* when set, overrides the profile's */
    gboolean numa_any;           /* numa="any": may sit off the domain's node (default "same") */
    char *bitstream;             /* bitstream="NAME|SHA256" as written (av_bitstream_ref_is_valid()), or NULL */
    char *function;              /* function="ID": the accelerated function asked for
                                  * (av_bitstream_function_id_is_valid()), which the CLI maps to the one
                                  * bitstream of the library that provides it for the profile; or NULL */
    char *bitstream_sha256;      /* the library's bitstream it names, resolved by the CLI before placing
                                  * (av_bitstream_lookup()), or NULL; the placer prefers devices that hold it */
    AvP2p p2p;                   /* p2p="required|preferred": all of this request's PCI devices behind one
                                  * host switch (a request of count 1, mdevs and USB: no constraint) */
} AvRequest;

AvRequest *av_request_new(const char *profile, guint count);
void av_request_free(AvRequest *request);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvRequest, av_request_free)

/* One device given to the domain. */
typedef struct {
    char *profile;
    AvAttach attach;
    char *identity;              /* pool identity (PCI, USB); NULL for an mdev */
    char *pci_address;           /* vfio-pci, sriov-vf: the device; mdev: the parent foreseen when it
                                  * is a PCI device (a hint: the hook chooses at prepare) */
    char *pf_address;            /* sriov-vf: the VF's PF (so that the hook can make the VF again), else NULL */
    int vf_index;                /* sriov-vf: the VF's index N (the PF's virtfnN), else -1 */
    char *mdev_parent;           /* mdev: the parent foreseen when it is no PCI device (its name in
                                  * /sys/class/mdev_bus, such as "mtty"), else NULL */
    char *mdev_type;             /* mdev, else NULL */
    char *mdev_uuid;             /* mdev: a fresh UUID, else NULL */
    char *usb_bus_path;          /* usb, else NULL */
    char *netdev;                /* netdev: the card's network interface (av_netdev_name_is_valid()), else NULL */
    guint16 usb_vendor;          /* usb */
    guint16 usb_product;         /* usb */
    guint usb_busnum;            /* usb: sysfs busnum and devnum of the stick when it was chosen (what
                                  * <source><address bus= device=/> names), 0 unknown */
    guint usb_devnum;
    int numa_node;               /* -1 unknown */
    char *bitstream;             /* hex SHA-256 of the bitstream the device must hold (its request's
                                  * bitstream_sha256), or NULL */
    /* The host PCIe position, filled by av_place() for PCI items
     * (vfio-pci, sriov-vf) from av_host_pci_position(); NULL for the others
     * and when unknown.  What the rewrite mirrors in the guest
     * (src/domain/av-topology.h).  Not recorded in the pool. */
    char *root_port;             /* the host root port above the device */
    char *switch_port;           /* the upstream port of the host PCIe switch it sits behind */
    gboolean gpudirect;          /* an NVIDIA GPU (vendor 0x10de, base class 0x03), which may take
                                  * QEMU's x-nv-gpudirect-clique */
} AvPlacedItem;

void av_placed_item_free(AvPlacedItem *item);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPlacedItem, av_placed_item_free)

/* A host NUMA node a placement uses, with its CPUs (the pinning set of the
 * guest NUMA cell that mirrors it). */
typedef struct {
    int id;
    GArray *cpus;                /* guint, ascending (AvNumaNode->cpus) */
    guint64 memory_kib;          /* AvNumaNode->memory_kib, 0 unknown */
} AvPlacedNode;

void av_placed_node_free(AvPlacedNode *node);

typedef struct {
    int numa_node;               /* the domain's node; -1 when nothing ties it to one */
    GArray *cpus;                /* guint: the CPUs of that node (the pinning set); empty when -1 */
    GPtrArray *items;            /* AvPlacedItem*, in request order, each request's in address order */
    GPtrArray *warnings;         /* char*: sentences, such as a preferred profile placed off its node */
    GPtrArray *nodes;            /* AvPlacedNode*, ascending id: every host node of @numa_node and of the
                                  * items (numa_node >= 0), with its CPUs, from the host's scan; may be
                                  * NULL or empty in placements built by hand (no guest NUMA then) */
} AvPlacement;

void av_placement_free(AvPlacement *placement);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPlacement, av_placement_free)

/* What the pool recorded when accelvirt placed a domain and claimed its
 * devices: its requests and, in alias order
 * (ua-accelvirt-N), each device's profile, attach, identity and address.
 * At restore and migrate this decides, not the domain's own metadata. */
typedef struct {
    char *domain_uuid;
    char *domain_name;           /* or NULL */
    int numa_node;               /* -1 none */
    GPtrArray *requests;         /* AvRequest* */
    GPtrArray *items;            /* AvPlacedItem*, in alias order */
    char *owner_project;         /* the OpenStack project the operator pinned the domain to
                                  * (`accelvirt define --project`), or NULL: what its devices' time is
                                  * charged to, whatever its metadata says */
    char *owner_user;            /* the user likewise (--user), or NULL */
} AvPoolPlacement;

void av_pool_placement_free(AvPoolPlacement *record);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPoolPlacement, av_pool_placement_free)

/* Records (replacing an earlier record of @domain_uuid, whose owner pin it
 * keeps) that @requests were placed as @placement for the domain
 * @domain_uuid named @domain_name; copies everything.  The caller saves the
 * pool. */
void av_pool_placement_record(AvPool *pool, const char *domain_uuid, const char *domain_name,
                              const GPtrArray *requests, const AvPlacement *placement);

/* Pins the owner of the domain @domain_uuid, whose record must exist:
 * @project and @user (each an OpenStack id, or NULL: left as pinned) are what
 * its devices are charged to from now on (the hook's prepare), and a
 * domain whose metadata names another is refused.  A record made again
 * (av_pool_placement_record()) keeps the pin.  FALSE, nothing changed,
 * when there is no record.  The caller saves. */
gboolean av_pool_placement_pin_owner(AvPool *pool, const char *domain_uuid, const char *project, const char *user);

/* Makes @owner (its project and user as the domain's metadata says, its
 * domain_uuid set) what the domain's devices are charged to: the project
 * and user pinned in @pool's record of the domain in their place, and
 * without a pin, none when @metadata_trusted is FALSE (the policy's
 * "owner_metadata": false).  FALSE with AV_ERROR_UNSAFE, @owner
 * unchanged, when the metadata names another project or user than a pin:
 * a domain does not charge another project.  The hook's prepare and
 * `accelvirt attach` go through it. */
gboolean av_pool_owner_resolve(const AvPool *pool, gboolean metadata_trusted, AvOwner *owner, GError **error);

/* The record of @domain_uuid, or NULL.  Borrowed from @pool. */
const AvPoolPlacement *av_pool_placement_find(const AvPool *pool, const char *domain_uuid);

/* Every record of @pool (AvPoolPlacement*), in the order they were made.
 * Borrowed. */
const GPtrArray *av_pool_placements(const AvPool *pool);

/* Drops the record of @domain_uuid, if any.  The caller saves. */
void av_pool_placement_forget(AvPool *pool, const char *domain_uuid);

G_END_DECLS
