/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: what the hook and the CLI need to know of a libvirt domain XML.
 *
 * Domain XML in, facts out: no sysfs, no libvirt calls.  Every byte is
 * treated as hostile: the document is bounded in size, parsed with no network
 * access, no DTD loading and no entity expansion, and every value that may
 * later reach a path (PCI addresses, mdev UUIDs, USB ids) is checked against
 * a strict format here; anything else is AV_ERROR_INVALID_INPUT naming the
 * element and value.
 *
 * Formats: https://libvirt.org/formatdomain.html (hostdev, cputune, numatune),
 * Nova's metadata namespace http://openstack.org/xmlns/libvirt/nova/1.1. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The largest domain XML accepted: 8 MiB. */
#define AV_DOMAIN_XML_MAX (8u * 1024u * 1024u)

/* CPU numbers in a cpuset are below this: libvirt's VIR_DOMAIN_CPUMASK_LEN
 * (16384 since libvirt 8.x), no tighter.  NUMA node numbers
 * (nodeset, av:placement node) below AV_DOMAIN_NODE_MAX: libvirt parses a
 * nodeset with the same bound; the kernel numbers nodes below its
 * MAX_NUMNODES (1024 at most), so a larger id names no node of the host,
 * which is not an error of the XML. */
#define AV_DOMAIN_CPU_MAX 16384u
#define AV_DOMAIN_NODE_MAX 16384u
/* The largest <vcpu> count accepted (bounds the vcpupins array). */
#define AV_DOMAIN_VCPU_MAX 16384u

/* The aliases of the hostdevs accelvirt writes: "ua-accelvirt-0", "-1", ...
 * in placement order.  A <hostdev> whose alias is this prefix and digits is
 * a placement's (a rewrite replaces it); `accelvirt attach --persistent`
 * writes other aliases after the prefix (the device's address), kept. */
#define AV_REWRITE_ALIAS_PREFIX "ua-accelvirt-"
/* The aliases of the empty pcie-root-ports accelvirt writes for
 * <av:hotplug slots="N"/>: "ua-accelvirt-hotplug0", ... */
#define AV_REWRITE_HOTPLUG_ALIAS_PREFIX "ua-accelvirt-hotplug"

typedef enum {
    AV_HOSTDEV_PCI,
    AV_HOSTDEV_MDEV,
    AV_HOSTDEV_USB,
    AV_HOSTDEV_NETDEV,           /* <interface type='direct'>: a host network interface (macvtap) */
} AvHostdevType;

typedef struct {
    AvHostdevType type;
    gboolean managed;            /* managed='yes': libvirt itself binds and unbinds it (Nova's default); absent means 'no' */
    char *pci_address;           /* PCI: "0000:3b:00.0", canonical, from <source><address domain= bus= slot= function=/> */
    char *mdev_uuid;             /* mdev: <source><address uuid=/>, canonical lower case */
    char *mdev_model;            /* mdev: model attribute ("vfio-pci", "vfio-ccw", ...) */
    guint16 usb_vendor;          /* USB: <source><vendor id=/>, 0 if absent */
    guint16 usb_product;         /* USB: <source><product id=/>, 0 if absent */
    int usb_bus;                 /* USB: <source><address bus= device=/>, -1 if absent */
    int usb_device;
    char *alias;                 /* <alias name=/>, or NULL */
    char *netdev;                /* netdev: <source dev=>, av_netdev_name_kernel_valid() */
    char *netdev_mode;           /* netdev: <source mode=> ("passthrough", "bridge", ...), or NULL (libvirt's
                                  * default, vepa) */
    gboolean is_interface;       /* PCI from <interface type='hostdev'> (an SR-IOV VF handed over as a NIC),
                                  * not from <hostdev>: libvirt passes it through all the same */
} AvHostdev;

void av_hostdev_free(AvHostdev *hostdev);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvHostdev, av_hostdev_free)

/* A device accelvirt placed (the rewrite writes these; the hook reads them to
 * know an mdev's profile before the mdev exists):
 *   <av:accelerators xmlns:av="urn:accelvirt:domain:1">
 *     <av:placement node="0">
 *       <av:device profile="gpu-passthrough" address="0000:17:00.0" alias="ua-accelvirt-0"/>
 *       <av:device profile="qat-vf" address="0000:6b:00.5" pf="0000:6b:00.0" vf="4" alias="ua-accelvirt-2"/>
 *       <av:mdev profile="vgpu-a10" uuid="..." alias="ua-accelvirt-1"/>
 *       <av:usb profile="stick" bus-path="1-2" vendor="0x03e7" product="0x2485"
 *               identity="usb:03e7:2485:serial:S1" alias="ua-accelvirt-2"/>
 *     </av:placement>
 *   </av:accelerators> */
typedef struct {
    char *profile;
    char *pci_address;           /* or NULL */
    char *pf_address;            /* av:device pf=: an SR-IOV VF's PF (canonical), or NULL */
    int vf_index;                /* av:device vf=: its index, or -1 */
    char *mdev_uuid;             /* or NULL */
    char *usb_bus_path;          /* av:usb: its bus-path (av_usb_bus_path_is_valid()), else NULL */
    char *usb_identity;          /* av:usb: its pool identity (av_pool_identity_usb_is_valid()), or NULL
                                  * (placements by an older accelvirt have none) */
    char *alias;                 /* or NULL */
    char *bitstream;             /* av:device bitstream=: the hex SHA-256 the device must hold, or NULL */
} AvPlacedDevice;

void av_placed_device_free(AvPlacedDevice *placed);

typedef struct {
    char *name;                  /* <name> */
    char *uuid;                  /* <uuid>, canonical lower case; NULL when absent (a new domain) */
    GPtrArray *hostdevs;         /* AvHostdev*, in document order (devices/hostdev) */
    /* char*: the <target dev=> of each <interface type='ethernet'> (libvirt
     * opens an existing tap or macvtap of that name with managed='no'),
     * av_netdev_name_kernel_valid() names only; NULL or empty when none. */
    GPtrArray *ethernet_targets;
    /* OpenStack Nova (<metadata><nova:instance>) */
    gboolean is_nova;
    char *nova_name;             /* nova:name */
    char *nova_user;             /* nova:owner/nova:user@uuid */
    char *nova_project;          /* nova:owner/nova:project@uuid */
    /* CPU and memory placement */
    guint vcpus;                 /* <vcpu> count (current= ignored), 0 when absent */
    char *vcpu_cpuset;           /* <vcpu cpuset=>, or NULL */
    char *vcpu_placement;        /* <vcpu placement=>: "static", "auto", or NULL */
    GPtrArray *vcpupins;         /* char*: index = vCPU id, value = cpuset or NULL (from <cputune><vcpupin>);
                                  * always max(vcpus, 1) entries: without <vcpu> libvirt runs one vCPU */
    char *emulatorpin;           /* <cputune><emulatorpin cpuset=>, or NULL */
    char *numatune_memory_mode;  /* <numatune><memory mode=>, or NULL */
    char *numatune_memory_nodeset;
    char *numatune_memory_placement; /* "static", "auto", or NULL */
    /* accelvirt's own metadata */
    int placement_node;          /* <av:placement node=>, -1 when absent */
    GPtrArray *placed;           /* AvPlacedDevice* */
    char *scrub_token;           /* <av:scrub token=>: the domain is a scrub VM that accelvirt's worker
                                  * started (av_scrub_token_is_valid()), or NULL */
    char *scrub_identity;        /* <av:scrub identity=>: the pool identity it scrubs (informative), or NULL */
    char *metadata_problem;      /* AV_DOMAIN_PARSE_METADATA_BEST_EFFORT: why the metadata was left out, or NULL */
    char *pinning_problem;       /* why the vCPU pinning and NUMA tuning above were left out (all of them:
                                  * counts 0 or 1, sets NULL), or NULL when they were read (
                                  * never fatal to the parse; what acts on them refuses) */
} AvDomain;

void av_domain_free(AvDomain *domain);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvDomain, av_domain_free)

/* Parses the domain XML @xml of @len bytes (not NUL-terminated necessarily).
 * Refuses documents over AV_DOMAIN_XML_MAX, with a DOCTYPE, that are not a
 * <domain>, or that hold a malformed value in an element accelvirt reads.
 * Returns a new AvDomain or NULL with @error set (AV_ERROR_INVALID_INPUT). */
AvDomain *av_domain_parse(const char *xml, gsize len, GError **error);

typedef enum {
    AV_DOMAIN_PARSE_DEFAULT = 0,
    /* A bad <metadata> (Nova's or accelvirt's) is not fatal: the domain is
     * returned without any of it, and metadata_problem says what was wrong.
     * For the hook's release and reconnect, which find a domain's devices by
     * its UUID and must not fail on what a domain's own metadata says. */
    AV_DOMAIN_PARSE_METADATA_BEST_EFFORT = 1 << 0,
} AvDomainParseFlags;

/* av_domain_parse() with @flags. */
AvDomain *av_domain_parse_flags(const char *xml, gsize len, AvDomainParseFlags flags, GError **error);

/* The largest live XML the lenient reader below takes: 64 MiB (a running
 * domain's metadata is its owner's to grow; libvirt's own RPC limit for a
 * string is smaller). */
#define AV_DOMAIN_LIVE_XML_MAX (64u * 1024u * 1024u)

/* The host devices a running domain's live XML names, read leniently for the
 * audit and watch (av-domain-live.c): only what names a device is looked at
 * (PCI addresses of <hostdev type='pci'> and <interface type='hostdev'>,
 * mdev UUIDs, USB vendor, product, bus and device), of every <source> and
 * <address> a hostdev has; aliases, managed=, and everything else of the
 * document may be anything libvirt accepts.  *ret_hostdevs gets an AvHostdev*
 * for each device named (only type, pci_address, mdev_uuid, usb_* and
 * is_interface are set), *ret_problems one sentence (char*) for each hostdev
 * or address that names a device this reader cannot tell: the caller must
 * not take the domain's list for complete then.  FALSE with
 * AV_ERROR_INVALID_INPUT only when the document itself does not parse (over
 * AV_DOMAIN_LIVE_XML_MAX, not XML, a DOCTYPE, no <domain> root). */
gboolean av_domain_live_hostdevs(const char *xml, gsize len, GPtrArray **ret_hostdevs, GPtrArray **ret_problems,
                                 GError **error);

/* What the hook reads of every domain before anything else:
 * enough to tell a domain accelvirt has nothing to do with, leniently, so
 * that nothing it does not act on can refuse a domain libvirt accepts
 *: vCPUs, pinning, NUMA, other devices and other metadata are
 * not looked at. */
typedef struct {
    char *name;                  /* the text of <name>, as it is, or NULL */
    char *uuid;                  /* <uuid>, canonical lower case; NULL when absent or not a UUID */
    gboolean may_manage;         /* a <hostdev> accelvirt may manage: any but mode='capabilities'
                                  * and type 'scsi' or 'scsi_host' (PCI, mdev, USB, and
                                  * any it cannot tell); an <interface type='hostdev'>; or accelvirt's own
                                  * metadata (any element of urn:accelvirt:domain:1 in the first
                                  * <metadata>) */
} AvDomainPeek;

void av_domain_peek_clear(AvDomainPeek *peek);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(AvDomainPeek, av_domain_peek_clear)

/* Reads @xml of @len bytes as av_domain_parse() does (the same limits:
 * size, no DOCTYPE, well-formed, a <domain> root), but only for the facts
 * of AvDomainPeek, which nothing else in the document can make it refuse.
 * Fills *ret_peek (cleared first).  FALSE with AV_ERROR_INVALID_INPUT when
 * the document itself is refused. */
gboolean av_domain_peek(const char *xml, gsize len, AvDomainPeek *ret_peek, GError **error);

/* Reads all of @fd (stdin for the hook) up to AV_DOMAIN_XML_MAX bytes;
 * AV_ERROR_INVALID_INPUT when it is larger.  Caller frees *ret_xml. */
gboolean av_domain_read_fd(int fd, char **ret_xml, gsize *ret_len, GError **error);

/* The CPUs the vCPUs of @domain may run on: the union of every vcpupin's
 * cpuset, and <vcpu cpuset=> for vCPUs without a vcpupin.  Sets
 * *ret_all_pinned to FALSE when some vCPU may run anywhere (no pin, no
 * cpuset).  Returns FALSE with AV_ERROR_INVALID_INPUT when the pinning
 * could not be read (pinning_problem). */
gboolean av_domain_vcpu_cpus(const AvDomain *domain, GArray **ret_cpus, gboolean *ret_all_pinned,
                             GError **error);

/* Parses a libvirt cpuset ("0-3,8,^2": items applied left to right, '^'
 * removes one number) whose numbers are below @limit (AV_DOMAIN_CPU_MAX for
 * CPUs, AV_DOMAIN_NODE_MAX for NUMA nodes).  Sets *ret_set to a new GArray of
 * guint, ascending, never empty.  FALSE with AV_ERROR_INVALID_INPUT
 * ("cpuset '...' ...") on a malformed or empty set. */
gboolean av_domain_cpuset_parse(const char *cpuset, guint limit, GArray **ret_set, GError **error);

/* A copy of @value fit to quote in a message: at most 64 characters (then
 * "..."), control and bidirectional-override characters replaced by '?'.
 * NULL gives "(null)".  Caller frees. */
char *av_domain_quote(const char *value);

G_END_DECLS
