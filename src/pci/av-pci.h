/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: host discovery from sysfs (PCI, USB, NUMA).
 *
 * Everything is read under an AvRoot, so a fake tree or a tree copied from a
 * real host reads like the host itself.  Names come from pci.ids (the host's
 * /usr/share/misc/pci.ids, or $ACCELVIRT_PCI_IDS; av-pci-ids.c); every
 * other fact comes from the tree's own files, "config" included.
 *
 * Kernel interfaces: Documentation/ABI/testing/sysfs-bus-pci,
 * sysfs-bus-usb, sysfs-devices-system-node (sysfs-devices-node),
 * sysfs-kernel-iommu_groups, sysfs-bus-vfio-mdev. */
#pragma once

#include <glib.h>

#include "util/av-root.h"

G_BEGIN_DECLS

/* One supported mdev type of a parent device (mdev_supported_types/TYPE). */
typedef struct {
    char *id;            /* directory name, such as "nvidia-35" or "mtty-2" */
    char *name;          /* "name" attribute, or NULL */
    char *device_api;    /* "device_api", such as "vfio-pci" */
    char *description;   /* "description", or NULL */
    guint available;     /* "available_instances" */
} AvMdevType;

void av_mdev_type_free(AvMdevType *type);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvMdevType, av_mdev_type_free)

/* One mediated device that exists now (/sys/bus/mdev/devices/UUID). */
typedef struct {
    char *uuid;
    char *parent;        /* name of the parent as in /sys/class/mdev_bus: the PCI address
                          * for a PCI parent, such as "mtty" for others */
    char *type_id;       /* mdev_type link name, such as "nvidia-35" */
} AvMdev;

void av_mdev_free(AvMdev *mdev);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvMdev, av_mdev_free)

typedef struct {
    char *address;               /* "0000:3b:00.0" (domain:bus:slot.function) */
    guint64 address_key;         /* av_pci_address_key(@address), set by the scan with @address; 0 when
                                  * not set (a device built by hand): the lookups compute it then */
    char *sysfs_path;            /* canonical root-relative path: /sys/devices/pci0000:3a/... */
    guint16 vendor_id;
    guint16 device_id;
    guint16 subsystem_vendor_id;
    guint16 subsystem_device_id;
    guint32 class_code;          /* 24 bits: base, sub, prog-if, such as 0x030200 */
    guint8 revision;
    char *vendor_name;           /* from pci.ids, or NULL */
    char *device_name;           /* from pci.ids, or NULL */
    int numa_node;               /* -1 when neither the kernel nor local_cpulist says */
    gboolean numa_inferred;      /* @numa_node came from local_cpulist (the kernel said -1): every CPU
                                  * of local_cpulist is in that one node, as hwloc infers locality */
    char *local_cpulist;         /* "0-15,32-47", or NULL */
    int iommu_group;             /* -1 when the device has none */
    GPtrArray *iommu_group_members; /* char*: addresses of every device in the group, this one included,
                                     * sorted by av_pci_address_compare() */
    char *driver;                /* bound driver, or NULL */
    char *driver_override;       /* NULL when unset ("(null)") */
    char *physical_slot;         /* slot name from /sys/bus/pci/slots/N/address, or NULL */
    gboolean has_dsn;
    guint64 dsn;                 /* PCIe Device Serial Number (extended capability 0x0003) */
    /* SR-IOV */
    gboolean sriov_capable;      /* sriov_totalvfs exists */
    guint sriov_totalvfs;
    guint sriov_numvfs;
    guint sriov_offset;          /* sriov_offset: routing ID of VF 0 minus the PF's */
    guint sriov_stride;          /* sriov_stride: between the routing IDs of two VFs */
    gboolean sriov_vf_device_set; /* sriov_vf_device exists (kernel 5.9+) */
    guint16 sriov_vf_device;     /* the device id of its VFs, known before any VF exists */
    char *physfn;                /* address of the PF when this is a VF, else NULL */
    int vf_index;                /* index N of the PF's virtfnN link when this is a VF, else -1 */
    GPtrArray *virtfns;          /* char*: VF addresses in virtfn index order (empty if none) */
    /* mdev parent */
    GPtrArray *mdev_types;       /* AvMdevType*, sorted by id (empty if not a parent) */
    GPtrArray *mdevs;            /* AvMdev*: existing mdevs on this parent, sorted by uuid */
    /* reset */
    char **reset_methods;        /* from "reset_method", NULL-terminated; NULL when the file is absent */
    gboolean has_reset;          /* the "reset" attribute exists */
    /* topology */
    char *parent_bridge;         /* address of the upstream bridge/port, or NULL on a root bus */
    gboolean is_bridge;          /* class 0x0604 */
    /* the vfio driver the running kernel offers it (av_pci_vfio_variants()):
     * "vfio_pci", a variant's module ("mlx5_vfio_pci"), or NULL (not asked,
     * no modules.alias, no vfio_pci: alias matches, or a bridge) */
    char *vfio_driver;
    /* NVIDIA vGPU on a VF (av-pci-vgpu.c): nvidia/current_vgpu_type exists */
    gboolean vgpu_capable;
    guint vgpu_current;          /* its current_vgpu_type: 0 when it has no vGPU */
    GPtrArray *vgpu_creatable;   /* AvVgpuType*: its creatable_vgpu_types now; NULL unless @vgpu_capable */
    /* network interfaces its host driver made: the names in its net/
     * directory that av_netdev_name_is_valid() accepts, sorted (empty when
     * none: no netdev, or not on a network driver) */
    GPtrArray *netdevs;          /* char* */
} AvPciDevice;

/* One vGPU type a VF's nvidia/creatable_vgpu_types lists. */
typedef struct {
    guint id;                    /* what current_vgpu_type takes, such as 1157 */
    char *name;                  /* "NVIDIA L40S-2Q" */
} AvVgpuType;

void av_vgpu_type_free(AvVgpuType *type);

/* The types of a creatable_vgpu_types text ("ID : NAME" lines; the header
 * and anything malformed skipped).  Never NULL. */
GPtrArray *av_vgpu_types_parse(const char *text);

/* Reads the VF @address's nvidia/current_vgpu_type into *ret_current and,
 * when @ret_creatable is not NULL, its creatable_vgpu_types (caller frees).
 * 0 or -errno (-ENOENT: no vGPU interface, not a vGPU VF). */
int av_pci_vgpu_read(const AvRoot *root, const char *address, guint *ret_current, GPtrArray **ret_creatable);

/* TRUE when the PCI function @address has NVIDIA's vGPU interface
 * (nvidia/current_vgpu_type): a VF the vGPU Manager serves, whatever its
 * profile says. */
gboolean av_pci_has_vgpu(const AvRoot *root, const char *address);

/* TRUE when @spec (a profile's "vgpu_type") names @type: its decimal ID,
 * its full name ("NVIDIA L40S-2Q") or its short name ("L40S-2Q"). */
gboolean av_vgpu_type_matches(const AvVgpuType *type, const char *spec);
/* The first of @types (AvVgpuType*) @spec names, or NULL. */
const AvVgpuType *av_vgpu_types_find(const GPtrArray *types, const char *spec);
/* TRUE when @spec can name a type: a decimal ID > 0, or a printable name
 * of at most 128 characters without ':'. */
gboolean av_vgpu_type_spec_is_valid(const char *spec);
/* TRUE when the VF @dev (as the host scan read it) can take a vGPU of the
 * type @spec now: it has none, and its creatable_vgpu_types names it. */
gboolean av_pci_vgpu_offers(const AvPciDevice *dev, const char *spec);

void av_pci_device_free(AvPciDevice *dev);

/* The vfio_pci: aliases of the running kernel's modules.alias
 * (/lib/modules/$(cat /proc/sys/kernel/osrelease)/modules.alias under the
 * root): which vfio driver the kernel offers each PCI function, a vfio-pci
 * variant where it has one, else vfio_pci (av-pci-variant.c). */
typedef struct AvVfioAliases AvVfioAliases;

/* NULL when the file cannot be read (no modules, a kernel built without
 * them): nothing is known, and binding falls back to vfio-pci. */
AvVfioAliases *av_vfio_aliases_load(const AvRoot *root);
void av_vfio_aliases_free(AvVfioAliases *aliases);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvVfioAliases, av_vfio_aliases_free)

/* The module of the most specific alias matching these ids ("vfio_pci",
 * "qat_vfio_pci"; borrowed from @aliases), or NULL when none matches. */
const char *av_vfio_aliases_match(const AvVfioAliases *aliases, guint16 vendor, guint16 device,
                                  guint16 subsystem_vendor, guint16 subsystem_device, guint32 class_code);

/* TRUE when @module has vfio_pci: aliases: it is vfio-pci or a variant, and
 * (for a variant) binds only the devices those aliases name. */
gboolean av_vfio_aliases_module_has(const AvVfioAliases *aliases, const char *module);

/* The module av_vfio_aliases_match() names for the function @address,
 * read from its sysfs ids (caller frees), or NULL (no aliases, no match, a
 * bridge, or ids that cannot be read). */
char *av_pci_vfio_module_for(const AvRoot *root, const AvVfioAliases *aliases, const char *address);

/* TRUE when one of @module's own vfio_pci: aliases in @aliases matches the
 * function @address ('-' and '_' alike in @module): the variant knows the
 * device.  FALSE when nothing can tell (no aliases, unreadable ids). */
gboolean av_pci_vfio_module_names(const AvRoot *root, const AvVfioAliases *aliases, const char *address,
                                  const char *module);

/* Sets vfio_driver of each device of @devices (AvPciDevice*) to the module
 * av_vfio_aliases_match() names for it, or NULL (for list). */
void av_pci_vfio_variants(const AvRoot *root, GPtrArray *devices);

/* TRUE for a variant whose kernel driver implements VFIO migration
 * (mlx5_vfio_pci, hisi_acc_vfio_pci, pds_vfio_pci, qat_vfio_pci,
 * virtio_vfio_pci, xe_vfio_pci); the bound device may still not offer it. */
gboolean av_pci_vfio_variant_migrates(const char *module);

/* TRUE when @driver (a name under /sys/bus/pci/drivers) is vfio-pci or a
 * vfio-pci variant (named "..._vfio_pci" after its module): a device on it
 * is held by VFIO, not by a host driver. */
gboolean av_pci_driver_is_vfio(const char *driver);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPciDevice, av_pci_device_free)

typedef struct {
    char *bus_path;              /* sysfs name such as "1-1.2" */
    char *sysfs_path;            /* canonical root-relative path */
    guint16 vendor_id;           /* idVendor */
    guint16 product_id;          /* idProduct */
    char *manufacturer;          /* or NULL */
    char *product;               /* or NULL */
    char *serial;                /* or NULL */
    guint busnum;
    guint devnum;
    char *speed;                 /* "480", or NULL */
    char *pci_controller;        /* address of the host controller it hangs off, or NULL */
    int numa_node;               /* the controller's node, or -1 */
} AvUsbDevice;

void av_usb_device_free(AvUsbDevice *dev);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvUsbDevice, av_usb_device_free)

/* One mdev parent, a device that registered with the mdev core
 * (mdev_register_parent()): the kernel links every one, PCI or not, into
 * /sys/class/mdev_bus (Documentation/driver-api/vfio-mediated-device.rst):
 * NVIDIA vGPU and Intel GVT-g are PCI functions, while the mtty sample
 * (/sys/devices/virtual/mtty/mtty), s390's vfio_ap ("matrix") and vfio_ccw
 * are not. */
typedef struct {
    char *name;                  /* the entry of /sys/class/mdev_bus: the PCI address, or "mtty" */
    char *sysfs_path;            /* canonical root-relative path: /sys/devices/virtual/mtty/mtty */
    char *pci_address;           /* the PCI function it is, or NULL */
    const AvPciDevice *pci;      /* that function, borrowed from the same AvHost, or NULL */
    int numa_node;               /* the PCI function's node, else the parent's own "numa_node"
                                  * attribute if any, else -1 */
    GPtrArray *types;            /* AvMdevType*, sorted by id; for a PCI parent the very array
                                  * of the AvPciDevice (mdev_types), shared */
    GPtrArray *mdevs;            /* AvMdev*, sorted by uuid; for a PCI parent the AvPciDevice's
                                  * mdevs, shared */
} AvMdevParent;

void av_mdev_parent_free(AvMdevParent *parent);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvMdevParent, av_mdev_parent_free)

typedef struct {
    int id;
    char *cpulist;               /* "0-15,32-47" as the kernel prints it */
    GArray *cpus;                /* guint: the CPUs of cpulist, ascending */
    guint64 memory_kib;          /* MemTotal of nodeN/meminfo, 0 if unknown */
} AvNumaNode;

void av_numa_node_free(AvNumaNode *node);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvNumaNode, av_numa_node_free)

typedef struct {
    GPtrArray *pci;              /* AvPciDevice*, sorted by address (av_pci_address_compare()) */
    GPtrArray *usb;              /* AvUsbDevice*, sorted by bus_path; interfaces ("1-1:1.0") and root hubs excluded */
    GPtrArray *numa_nodes;       /* AvNumaNode*, sorted by id; one node 0 holding every online CPU when the tree has no node directory */
    gboolean iommu_enabled;      /* /sys/kernel/iommu_groups has at least one group */
    gboolean has_pci_bus;        /* /sys/bus/pci exists: FALSE on hosts without PCI (s390, some Arm
                                  * boards, containers), whose @pci is then empty */
    GPtrArray *mdev_parents;     /* AvMdevParent*, sorted by name (strcmp): the entries of
                                  * /sys/class/mdev_bus, plus any PCI function offering
                                  * mdev_supported_types that a tree without that class lists
                                  * nowhere else */
    char *boot_id;               /* /proc/sys/kernel/random/boot_id (lower case), or NULL when the tree
                                  * has none (a capture, most fake trees) */
    gboolean partial;            /* av_host_scan_devices(): @pci holds only some functions, @usb
                                  * nothing unless @usb_scanned, @mdev_parents nothing unless asked
                                  * for; what is absent is not known to be absent */
    gboolean usb_scanned;        /* @usb holds every USB device of the host (a whole scan, or a
                                  * partial one with av_host_scan_devices_usb()) */
} AvHost;

void av_host_free(AvHost *host);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvHost, av_host_free)

/* Scans the PCI devices, USB devices and NUMA nodes under @root.
 * A PCI device that disappears during the scan (its link dangles, or its
 * "vendor" is gone once the link resolved: hot unplug, VFs removed) is left
 * out with a debug message; any other failure to read its "vendor" fails
 * the scan, naming the device.
 * A host without /sys/bus/usb or without NUMA directories is fine; a tree
 * without /sys/bus/pci/devices is an error (AV_ERROR_NOT_FOUND, naming the
 * path, saying that --root must point at a tree holding sys/).
 * Returns a new AvHost (caller frees) or NULL with @error set. */
AvHost *av_host_scan(const AvRoot *root, GError **error);

/* Scans only the PCI functions @addresses (NULL-terminated, may be empty),
 * what their identities and IOMMU groups involve (the members of their
 * groups, the PF of a VF, the bridges above them, transitively), the NUMA
 * nodes and the boot id: the hook's scan of one domain, whose
 * cost grows with the domain, not the host.  With @mdev_parents, also
 * every entry of /sys/class/mdev_bus (a PCI parent with its function, as
 * above): a domain's mdevs may live on any of them.  An address the host
 * does not have is left out, as av_host_scan() leaves out what it does not
 * find.  No USB devices, no pci.ids names (vendor_name and device_name
 * NULL); @iommu_enabled is FALSE when no function was read.  Returns a new AvHost with @partial set (caller
 * frees) or NULL with @error set. */
AvHost *av_host_scan_devices(const AvRoot *root, const char *const *addresses, gboolean mdev_parents,
                             GError **error);

/* Adds every USB device of the host to the partial scan @host (which had
 * none), setting @usb_scanned: /sys/bus/usb/devices is small, so a domain
 * with USB hostdevs reads them all.  FALSE with @error set. */
gboolean av_host_scan_devices_usb(const AvRoot *root, AvHost *host, GError **error);

/* Scans only the USB devices of /sys/bus/usb/devices, as av_host_scan()
 * does (root hubs and interfaces left out): cheap, for the hook's scan of
 * a domain with USB hostdevs and for the USB scrub methods.  Returns a new
 * array of AvUsbDevice* sorted by bus path (caller frees) or NULL with
 * @error set. */
GPtrArray *av_host_scan_usb(const AvRoot *root, GError **error);

/* The USB device of @host whose sysfs busnum and devnum are @busnum and
 * @devnum, or NULL.  Borrowed from @host. */
AvUsbDevice *av_host_find_usb_number(const AvHost *host, guint busnum, guint devnum);

/* Scans one PCI device by address.  Same facts as av_host_scan(). */
AvPciDevice *av_pci_device_scan(const AvRoot *root, const char *address, GError **error);

/* The mdev parent named @name in @host, or NULL.  Borrowed from @host. */
AvMdevParent *av_host_find_mdev_parent(const AvHost *host, const char *name);

/* The parent in @host on which the mdev @uuid exists, or NULL.  Borrowed. */
AvMdevParent *av_host_find_mdev(const AvHost *host, const char *uuid);

/* TRUE when @name may name an mdev parent (an entry of /sys/class/mdev_bus):
 * [A-Za-z0-9_.:-], 1 to 64 characters, neither "." nor "..".  PCI addresses
 * ("0000:17:00.0"), "mtty", "matrix" and ccw subchannels ("0.0.0313") pass.
 * The only form accepted from the pool, users or the tree before it reaches
 * a path. */
gboolean av_mdev_parent_name_is_valid(const char *name);

/* A PCI function as av_pci_find_by_ids() read it. */
typedef struct {
    char *address;
    gboolean known;              /* its ids were read; FALSE: its "vendor" could not be read (not
                                  * gone), so what it presents is not known */
    gboolean has_dsn;            /* with @known: it has a DSN, @dsn (as AvPciDevice has them) */
    guint64 dsn;
} AvPciIdRead;

void av_pci_id_read_free(AvPciIdRead *read);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvPciIdRead, av_pci_id_read_free)

/* The functions of /sys/bus/pci/devices whose vendor and device ids read
 * as @vendor and @device, as av_host_scan() reads them, each with its DSN
 * as av_host_scan() reads it; and every function whose vendor id cannot
 * be read (known FALSE: its scan tells).  A function gone meanwhile is
 * left out, as av_host_scan() leaves it out.  Reads a few attributes of
 * each function rather than scanning it: what a check of one identity
 * needs to know about the functions that may present it.  Returns a new
 * array of AvPciIdRead* in the listing's order (caller frees; empty on a
 * host without a PCI bus) or NULL with @error set. */
GPtrArray *av_pci_find_by_ids(const AvRoot *root, guint16 vendor, guint16 device, GError **error);

/* The device at @address in @host, or NULL.  Borrowed from @host.  A binary
 * search in @host->pci, sorted by av_pci_address_compare() as every scan
 * leaves it; a miss falls back to a linear search (a host built by hand in
 * another order). */
AvPciDevice *av_host_find_pci(const AvHost *host, const char *address);

/* The first network interface (by name) that the host driver of the PCI
 * function @address made (its net/ directory), of the names
 * av_netdev_name_is_valid() accepts; NULL when none (caller frees). */
char *av_pci_netdev_first(const AvRoot *root, const char *address);

/* Every such interface of the PCI function @address, sorted: a new array
 * of char* (empty when none; caller frees). */
GPtrArray *av_pci_netdevs(const AvRoot *root, const char *address);

/* The PCI device of @host whose host driver made the network interface
 * @name (its net/ directory lists it exactly), or NULL.  Borrowed from
 * @host. */
AvPciDevice *av_host_find_netdev(const AvHost *host, const char *name);

/* The PCIe position of the function @address of @host, from the
 * parent_bridge links (a scan holds every bridge above a function it
 * holds, av_host_scan_devices() too):
 *   *ret_root_port  the bridge above it that sits on a root bus (its root
 *                   port), NULL when the function sits on a root bus itself;
 *   *ret_switch     the first bridge below that root port when at least one
 *                   more bridge lies between it and the function: the
 *                   upstream port of the top-level PCIe switch the function
 *                   sits behind (root port > upstream port > downstream
 *                   port > function; nested switches count as their top
 *                   one), else NULL.  A PCIe-to-PCI bridge alone below a
 *                   root port (one bridge between) is no switch.
 * A VF sits where its PF sits.  Both borrowed from @host; either pointer may
 * be NULL.  FALSE (outputs NULL) when @host lacks @address or a bridge of
 * its chain, or the chain is deeper than AV_PCI_BRIDGE_DEPTH_MAX or loops:
 * the position is unknown. */
#define AV_PCI_BRIDGE_DEPTH_MAX 32
gboolean av_host_pci_position(const AvHost *host, const char *address, const char **ret_root_port,
                              const char **ret_switch);

/* av_host_pci_position() of @dev, a function of @host (one of @host->pci):
 * without looking @dev up again. */
gboolean av_host_pci_device_position(const AvHost *host, const AvPciDevice *dev, const char **ret_root_port,
                                     const char **ret_switch);

/* TRUE when @address is a canonical PCI address "DDDD:BB:SS.F": lower-case
 * hex, a domain of 4 to 8 digits as the kernel prints it ("%04x": domains
 * above 0xffff, such as those of Intel VMD, "10000:e1:00.0", print wider,
 * without a leading zero), bus 2 digits, slot 2 digits
 * <= 0x1f, function 0 to 7.  The only form accepted from users and domain
 * XML before it reaches a path. */
gboolean av_pci_address_is_valid(const char *address);

/* Splits a valid PCI address (av_pci_address_is_valid()) into its numbers.
 * Returns FALSE, leaving the outputs untouched, for anything else. */
gboolean av_pci_address_parse(const char *address, guint32 *ret_domain, guint8 *ret_bus,
                              guint8 *ret_slot, guint8 *ret_function);

/* Orders PCI addresses by domain, bus, slot and function as numbers (a plain
 * strcmp() would put "10000:00:00.0" before "ffff:00:00.0"); invalid ones
 * come after the valid ones, by strcmp().  Returns <0, 0 or >0. */
int av_pci_address_compare(const char *a, const char *b);

/* @address parsed once for av_pci_address_key_compare(): a valid address
 * (av_pci_address_is_valid()) gives AV_PCI_ADDRESS_KEY_VALID with its domain,
 * bus, slot and function below it, in that order of weight (never 0, and two
 * valid addresses give the same key only when they are the same string);
 * anything else, NULL included, AV_PCI_ADDRESS_KEY_INVALID. */
#define AV_PCI_ADDRESS_KEY_VALID (G_GUINT64_CONSTANT(1) << 48)
#define AV_PCI_ADDRESS_KEY_INVALID G_MAXUINT64
guint64 av_pci_address_key(const char *address);

/* av_pci_address_compare(@a, @b) for addresses whose keys
 * (av_pci_address_key()) are @key_a and @key_b: the strings are read only
 * when both are invalid. */
int av_pci_address_key_compare(guint64 key_a, const char *a, guint64 key_b, const char *b);

/* TRUE when @path is a USB device name as sysfs gives it under
 * /sys/bus/usb/devices: "BUS-PORT[.PORT]..." in decimal, such as "1-1.2",
 * shorter than 64 characters (dev_set_name() in usb_alloc_dev(); the
 * kernel's devpath holds at most 15 characters).  Root hubs ("usb1") and
 * interfaces ("1-1.2:1.0") are not device names.  The only form accepted
 * from users, policies and the pool before it reaches a path. */
gboolean av_usb_bus_path_is_valid(const char *path);

/* Parses a kernel cpulist ("0-3,8,10-11") into ascending CPU numbers.
 * Returns FALSE with AV_ERROR_INVALID_INPUT on malformed input. */
gboolean av_cpulist_parse(const char *cpulist, GArray **ret_cpus, GError **error);

/* Finds the PCIe Device Serial Number in the extended configuration space
 * @config (@len bytes as read from the "config" attribute; only root reads
 * past 64 bytes, so short buffers simply have none).  PCIe Base Spec 7.9.3:
 * extended capability ID 0x0003, serial as two dwords at +4 (low) and +8 (high).
 * Returns TRUE and sets *ret_dsn when found.  Walks at most 1024 capabilities
 * and never outside @len. */
gboolean av_pci_config_find_dsn(const guint8 *config, gsize len, guint64 *ret_dsn);

/* The offset of the extended capability @id (PCIe: 0x0003 Device Serial
 * Number, 0x000d Access Control Services) in the @len bytes of
 * configuration space at @config: TRUE with *ret_off, FALSE when the
 * device has none (or the space is too short to say: not root). */
gboolean av_pci_config_find_ext_cap(const guint8 *config, gsize len, guint16 id, gsize *ret_off);

/* The sizes BAR @bar (0-5) of the PCI function @address may be resized to,
 * as the kernel offers them in resourceN_resize
 * (Documentation/ABI/testing/sysfs-bus-pci): a bitmap where bit B set means
 * 2^(B + 20) bytes (bit 0: 1 MiB) is supported.  The file exists only for
 * the BARs of a device with the PCIe Resizable BAR capability, on kernels
 * that offer the interface.  Returns 0 and the bitmap (never 0), -ENOENT
 * when the BAR is not resizable (or the kernel has no such file), -EINVAL
 * when the file does not hold a non-zero hex bitmap, another -errno. */
#define AV_PCI_REBAR_BIT_MAX 43  /* 2^63 bytes: the largest size a guint64 holds */
int av_pci_read_rebar_sizes(const AvRoot *root, const char *address, guint bar, guint64 *ret_bitmap);

/* Line @index (0-5: the BARs) of the PCI function @address's sysfs
 * "resource" file, "START END FLAGS" in hex as the kernel prints it
 * (drivers/pci/pci-sysfs.c: resource_show): the kernel's own decoding of
 * the BAR.  Any output pointer may be NULL.  Returns 0, -ENOENT without the
 * file or the line, -EINVAL for a line that is not three 0x numbers. */
int av_pci_read_resource(const AvRoot *root, const char *address, guint index, guint64 *ret_start,
                         guint64 *ret_end, guint64 *ret_flags);

/* The size in bytes of the Resizable BAR bit @bit (2^(bit + 20)). */
#define AV_PCI_REBAR_SIZE(bit) ((guint64)1 << ((bit) + 20))

/* The address of VF @index of the PF @pf_address, whose sriov_offset is
 * @offset and sriov_stride @stride: routing ID = the PF's + @offset +
 * @index * @stride (PCIe Base Spec 9.3.3.9, 9.3.3.10).  NULL for a bad PF
 * address or a routing ID past the bus range.  Caller frees. */
char *av_pci_sriov_vf_address(const char *pf_address, guint offset, guint stride, guint index);

G_END_DECLS
