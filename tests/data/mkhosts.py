#!/usr/bin/env python3
"""Generate the fake hosts of the accelvirt tests: whole sysfs trees.

    mkhosts.py --out DIR [NAME...]

writes DIR/NAME/sys/... for every host below (or only the NAMEs given), in the
kernel's own layout: devices under /sys/devices/pci0000:00/..., with
/sys/bus/pci/devices, driver, iommu_group, physfn/virtfnN, subsystem and mdev
links as relative symlinks exactly like the kernel makes them, binary
"config" files, and attributes printed as the kernel prints them.  The same
input always gives the same tree.

Each host is a small declarative description (HOSTS at the bottom); the
helpers in Tree turn it into files.  Kernel references:
Documentation/ABI/testing/sysfs-bus-pci, sysfs-kernel-iommu_groups,
sysfs-bus-vfio-mdev, sysfs-bus-usb, stable/sysfs-devices-node.
"""

import argparse
import os
import shutil
import struct
import sys

# --- PCI ids (as in /usr/share/misc/pci.ids) -----------------------------------

NVIDIA = 0x10DE
INTEL = 0x8086
XILINX = 0x10EE
SAMSUNG = 0x144D

CLASS_HOST_BRIDGE = 0x060000
CLASS_PCI_BRIDGE = 0x060400
CLASS_3D = 0x030200
CLASS_VGA = 0x030000
CLASS_AUDIO = 0x040300
CLASS_ETHERNET = 0x020000
CLASS_NVME = 0x010802
CLASS_XHCI = 0x0C0330
CLASS_ACCEL = 0x120000
CLASS_CRYPTO = 0x0B4000

# PCI Express capability register "device/port type" (PCIe Base Spec 7.5.3.2).
PCIE_ENDPOINT = 0x0
PCIE_ROOT_PORT = 0x4
PCIE_UPSTREAM = 0x5
PCIE_DOWNSTREAM = 0x6
PCIE_TO_PCI = 0x7
PCIE_RCIEP = 0x9


class Pci:
    """One PCI function.  @parent is the address of the bridge above it, or
    the root complex name ("pci0000:00") for a device on a root bus."""

    def __init__(self, addr, parent, vendor, device, cls, rev=0x00,
                 subsys=(0, 0), driver=None, group=None, dsn=None, slot=None,
                 reset=None, override=None, port=PCIE_ENDPOINT, flr=False,
                 sriov=None, physfn=None, mdev_types=None, mdevs=None,
                 multifunction=False, aer=None, link=None, vgpu_types=None, vgpu=False, net=None):
        self.addr = addr
        self.parent = parent
        self.vendor = vendor
        self.device = device
        self.cls = cls
        self.rev = rev
        self.subsys = subsys
        self.driver = driver
        self.group = group            # IOMMU group number; None: own group, numbered automatically
        self.dsn = dsn                # Device Serial Number, or None
        self.slot = slot              # name of the physical slot holding this card (all its functions), or None
        self.reset = reset            # reset_method contents ("flr bus"), or None: no reset
        self.override = override      # driver_override, or None: "(null)"
        self.port = port
        self.flr = flr
        self.sriov = sriov            # (totalvfs, numvfs, vf_device) for a PF
        self.physfn = physfn          # (pf address, index) for a VF
        self.mdev_types = mdev_types or []
        self.mdevs = mdevs or []
        self.multifunction = multifunction
        self.aer = aer                # (correctable, nonfatal, fatal) AER totals, or None: no AER capability
        self.link = link              # (current speed, max speed, current width, max width), or None
        self.vgpu_types = vgpu_types  # a PF: [(id, max, name)] its vGPU Manager supports, or None
        self.vgpu = vgpu              # a VF with NVIDIA's vGPU interface (nvidia/, vfio-dev/)
        self.net = net or []          # network interfaces its driver made (net/NAME/), such as ["enp69s0"]

    @property
    def is_bridge(self):
        return (self.cls >> 8) == 0x0604


class MdevType:
    def __init__(self, tid, name, max_instances, description, device_api="vfio-pci"):
        self.id = tid
        self.name = name
        self.max = max_instances
        self.description = description
        self.device_api = device_api


class Mdev:
    def __init__(self, uuid, type_id, group):
        self.uuid = uuid
        self.type_id = type_id
        self.group = group


class Usb:
    """A USB device or hub; @path is its bus path ("1-1.2"), @controller the
    PCI address of the host controller."""

    def __init__(self, path, controller, vendor, product, manufacturer=None,
                 name=None, serial=None, speed="480", devnum=1, dev_class=0x00,
                 interfaces=((0xFF, 0xFF, 0xFF),)):
        self.path = path
        self.controller = controller
        self.vendor = vendor
        self.product = product
        self.manufacturer = manufacturer
        self.name = name
        self.serial = serial
        self.speed = speed
        self.devnum = devnum
        self.dev_class = dev_class
        self.interfaces = interfaces


class Node:
    def __init__(self, nid, cpulist, mem_kib):
        self.id = nid
        self.cpulist = cpulist
        self.mem_kib = mem_kib


class VirtualParent:
    """An mdev parent that is no PCI device, such as the kernel's mtty
    sample (samples/vfio-mdev/mtty.c): /sys/devices/virtual/CLASS/NAME, a
    device of class CLASS, with its mdev_supported_types."""

    def __init__(self, name, cls, mdev_types, mdevs=()):
        self.name = name
        self.cls = cls
        self.mdev_types = mdev_types
        self.mdevs = list(mdevs)


class Host:
    def __init__(self, nodes, cpus_online, devices, usb=(), node_of=None, virtual_parents=(),
                 kernel=None):
        self.nodes = nodes
        # The running kernel's modules: (release, [(alias pattern, module)],
        # [loaded vfio-pci variant modules]), or None (no /lib/modules).
        self.kernel = kernel
        self.cpus_online = cpus_online
        self.devices = devices
        self.usb = list(usb)
        self.virtual_parents = list(virtual_parents)
        # root complex name -> NUMA node (-1: the firmware says nothing)
        self.node_of = node_of or {}


# Write-only attributes (bind, reset, create...) are 0200 in sysfs; here the
# owner may read them too, so that tests can copy a tree with cp -a.
WRITE_ONLY = 0o600


# --- the tree writer ------------------------------------------------------------

class Tree:
    """Writes a sysfs tree under OUT/sys.  Paths given to its methods are
    root-relative ("/sys/bus/pci/devices"); links are made relative with
    os.path.relpath, as the kernel's sysfs links are."""

    def __init__(self, out):
        self.out = out

    def host(self, path):
        assert path.startswith("/")
        return os.path.join(self.out, path.lstrip("/"))

    def mkdir(self, path):
        os.makedirs(self.host(path), exist_ok=True)

    def write(self, path, data, mode=0o644):
        self.mkdir(os.path.dirname(path))
        if isinstance(data, str):
            data = data.encode()
        with open(self.host(path), "wb") as f:
            f.write(data)
        os.chmod(self.host(path), mode)

    def attr(self, path, value):
        """A sysfs attribute: the value and the kernel's trailing newline."""
        self.write(path, "%s\n" % value)

    def link(self, path, target):
        """The relative symlink @path -> @target, both root-relative."""
        self.mkdir(os.path.dirname(path))
        rel = os.path.relpath(target, os.path.dirname(path))
        os.symlink(rel, self.host(path))


# --- config space ---------------------------------------------------------------

def config_space(dev):
    """The binary "config" attribute: a type 0 or type 1 header (PCI Local Bus
    Spec 6.1), a capability list ending in a PCI Express capability, and,
    when the device has a DSN, 4 KiB of extended space with the Device Serial
    Number capability (PCIe Base Spec 7.9.3) at 0x100."""
    size = 4096 if dev.dsn is not None else 256
    c = bytearray(size)
    struct.pack_into("<HH", c, 0x00, dev.vendor, dev.device)
    struct.pack_into("<HH", c, 0x04, 0x0406, 0x0010)   # command: mem, master; status: cap list
    c[0x08] = dev.rev
    c[0x09] = dev.cls & 0xFF
    c[0x0A] = (dev.cls >> 8) & 0xFF
    c[0x0B] = (dev.cls >> 16) & 0xFF
    header_type = 0x01 if dev.is_bridge else 0x00
    if dev.multifunction:
        header_type |= 0x80
    c[0x0E] = header_type
    if not dev.is_bridge:
        struct.pack_into("<HH", c, 0x2C, dev.subsys[0], dev.subsys[1])
    c[0x34] = 0x40                                      # capabilities pointer
    # 0x40: power management, next 0x60
    c[0x40:0x44] = bytes([0x01, 0x60, 0x03, 0x00])
    # 0x60: MSI, next 0x78
    c[0x60:0x64] = bytes([0x05, 0x78, 0x80, 0x00])
    # 0x78: PCI Express, last
    c[0x78] = 0x10
    c[0x79] = 0x00
    struct.pack_into("<H", c, 0x7A, 0x0002 | (dev.port << 4))      # version 2
    devcap = 0x00008FC2 | ((1 << 28) if dev.flr else 0)            # FLR capable: bit 28
    struct.pack_into("<I", c, 0x7C, devcap)
    if dev.dsn is not None:
        struct.pack_into("<I", c, 0x100, 0x0003 | (1 << 16))         # DSN, version 1, last
        struct.pack_into("<II", c, 0x104, dev.dsn & 0xFFFFFFFF, dev.dsn >> 32)
    return bytes(c)


# Documentation/ABI/testing/sysfs-bus-pci-devices-aer: the error names of
# each file, in the kernel's order (drivers/pci/pcie/aer.c), then the total.
AER_FILES = (
    ("aer_dev_correctable", "TOTAL_ERR_COR",
     ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr", "HeaderOF")),
    ("aer_dev_nonfatal", "TOTAL_ERR_NONFATAL",
     ("Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt", "RxOF", "MalfTLP",
      "ECRC", "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP", "AtomicOpBlocked", "TLPBlockedErr",
      "PoisonTLPBlocked")),
    ("aer_dev_fatal", "TOTAL_ERR_FATAL",
     ("Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt", "RxOF", "MalfTLP",
      "ECRC", "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP", "AtomicOpBlocked", "TLPBlockedErr",
      "PoisonTLPBlocked")),
)


def aer_text(names, total_name, total):
    """One aer_dev_* file: the whole @total counted on the first error type."""
    lines = ["%s %d" % (n, total if i == 0 else 0) for i, n in enumerate(names)]
    return "\n".join(lines + ["%s %d" % (total_name, total)]) + "\n"


def build_health(t, d, path):
    """AER counters and link attributes (sysfs-bus-pci, sysfs-bus-pci-devices-aer)."""
    if d.aer is not None:
        for (name, total_name, names), total in zip(AER_FILES, d.aer):
            t.write(path + "/" + name, aer_text(names, total_name, total))
    if d.link is not None:
        speed, max_speed, width, max_width = d.link
        t.attr(path + "/current_link_speed", speed)
        t.attr(path + "/max_link_speed", max_speed)
        t.attr(path + "/current_link_width", str(width))
        t.attr(path + "/max_link_width", str(max_width))


# --- building a host ----------------------------------------------------------

def device_dirs(host):
    """Root-relative directory of every PCI function, parents first."""
    by_addr = {d.addr: d for d in host.devices}
    if len(by_addr) != len(host.devices):
        seen = [d.addr for d in host.devices]
        raise ValueError("two devices at %s" % [a for a in by_addr if seen.count(a) > 1])
    dirs = {}

    def dir_of(addr):
        if addr in dirs:
            return dirs[addr]
        d = by_addr[addr]
        if d.parent.startswith("pci"):
            parent_dir = "/sys/devices/" + d.parent
        else:
            parent_dir = dir_of(d.parent)
        dirs[addr] = parent_dir + "/" + addr
        return dirs[addr]

    for d in host.devices:
        dir_of(d.addr)
    return dirs


def root_complex(dirs, addr):
    return dirs[addr].split("/")[3]


def build_pci(t, host):
    dirs = device_dirs(host)
    cpulists = {n.id: n.cpulist for n in host.nodes}
    used = {d.group for d in host.devices if d.group is not None}
    used |= {m.group for d in host.devices for m in d.mdevs}
    next_group = max(used) + 1 if used else 0
    groups = {}

    t.mkdir("/sys/bus/pci/devices")
    t.mkdir("/sys/bus/pci/slots")
    t.mkdir("/sys/kernel/iommu_groups")
    for name in ("drivers_probe", "rescan"):
        t.write("/sys/bus/pci/" + name, "", WRITE_ONLY)
    t.attr("/sys/bus/pci/drivers_autoprobe", "1")
    drivers = {d.driver for d in host.devices if d.driver} | {"vfio-pci", "pcieport"}
    for drv in sorted(drivers):
        base = "/sys/bus/pci/drivers/" + drv
        for name in ("bind", "unbind", "new_id", "remove_id"):
            t.write(base + "/" + name, "", WRITE_ONLY)

    for d in sorted(host.devices, key=lambda x: x.addr):
        path = dirs[d.addr]
        rc = root_complex(dirs, d.addr)
        node = host.node_of.get(rc, -1)
        t.mkdir(path)
        t.attr(path + "/vendor", "0x%04x" % d.vendor)
        t.attr(path + "/device", "0x%04x" % d.device)
        t.attr(path + "/subsystem_vendor", "0x%04x" % d.subsys[0])
        t.attr(path + "/subsystem_device", "0x%04x" % d.subsys[1])
        t.attr(path + "/class", "0x%06x" % d.cls)
        t.attr(path + "/revision", "0x%02x" % d.rev)
        t.attr(path + "/numa_node", str(node))
        all_cpus = host.cpus_online
        t.attr(path + "/local_cpulist", cpulists.get(node, all_cpus))
        t.attr(path + "/enable", "1" if d.driver else "0")
        t.attr(path + "/driver_override", d.override if d.override else "(null)")
        t.write(path + "/config", config_space(d))
        t.link(path + "/subsystem", "/sys/bus/pci")
        t.link("/sys/bus/pci/devices/" + d.addr, path)
        if d.is_bridge:
            bus = int(d.addr[5:7], 16)
            children = [x for x in host.devices if x.parent == d.addr]
            sec = min((int(x.addr[5:7], 16) for x in children), default=bus + 1)
            t.attr(path + "/secondary_bus_number", str(sec))
            t.attr(path + "/subordinate_bus_number", str(sec))
        if d.reset is not None:
            t.attr(path + "/reset_method", d.reset)
            t.write(path + "/reset", "", WRITE_ONLY)
        if d.driver:
            drv = "/sys/bus/pci/drivers/" + d.driver
            t.link(path + "/driver", drv)
            t.link(drv + "/" + d.addr, path)
        if d.slot is not None:
            t.attr("/sys/bus/pci/slots/%s/address" % d.slot, d.addr[:10])
        group = d.group
        if group is None:
            group = next_group
            next_group += 1
        groups.setdefault(group, []).append(d.addr)
        gdir = "/sys/kernel/iommu_groups/%d" % group
        t.link(path + "/iommu_group", gdir)
        t.link(gdir + "/devices/" + d.addr, path)
        t.attr(gdir + "/type", "DMA-FQ")
        t.attr(gdir + "/reserved_regions", "0x00000000fee00000 0x00000000feefffff msi")
        if d.sriov:
            total, num, vf_device = d.sriov
            t.attr(path + "/sriov_totalvfs", str(total))
            t.attr(path + "/sriov_numvfs", str(num))
            t.attr(path + "/sriov_offset", "1")
            t.attr(path + "/sriov_stride", "1")
            t.attr(path + "/sriov_vf_device", "%04x" % vf_device)
            t.attr(path + "/sriov_drivers_autoprobe", "1")
        if d.physfn:
            pf, index = d.physfn
            t.link(path + "/physfn", dirs[pf])
            t.link(dirs[pf] + "/virtfn%d" % index, path)
        for i, name in enumerate(d.net):
            # Documentation/ABI/testing/sysfs-class-net: the interface's
            # directory under its parent device, linked from /sys/class/net.
            t.attr(path + "/net/%s/address" % name, "52:54:00:45:00:%02x" % i)
            t.attr(path + "/net/%s/operstate" % name, "up")
            t.link("/sys/class/net/" + name, path + "/net/" + name)
        build_health(t, d, path)
        build_vgpu(t, host, d, path)
        build_mdev(t, d, path)
        if d.mdev_types:
            # mdev_register_parent() links every parent into the class.
            t.link("/sys/class/mdev_bus/" + d.addr, path)


def vgpu_creatable(types):
    """nvidia/creatable_vgpu_types as NVIDIA's vGPU Manager prints it."""
    return "ID    : vGPU Name\n" + "".join("%-5d : %s\n" % (tid, name) for tid, _, name in types)


def build_vgpu(t, host, d, path):
    """NVIDIA vGPU on VFs (vGPU 17 and later, kernels 6.8 and later): each VF
    of a GPU the vGPU Manager serves has nvidia/current_vgpu_type (0: none)
    and nvidia/creatable_vgpu_types, and is a VFIO device (vfio-dev/vfioN).
    The PF's .fake-vgpu-types is the emulated kernel's own record of what
    the GPU supports ("ID MAX NAME"), which no real driver writes."""
    if d.vgpu_types:
        t.write(path + "/.fake-vgpu-types", "".join("%d %d %s\n" % x for x in d.vgpu_types))
    if d.vgpu:
        pf = [x for x in host.devices if x.addr == d.physfn[0]][0]
        t.attr(path + "/nvidia/current_vgpu_type", "0")
        t.write(path + "/nvidia/creatable_vgpu_types", vgpu_creatable(pf.vgpu_types))
        t.mkdir(path + "/vfio-dev/vfio%d" % d.physfn[1])


def build_virtual_parents(t, host):
    """Documentation/driver-api/vfio-mediated-device.rst: a parent that is
    no PCI device, as the mtty sample registers it on a real 6.1 kernel:
    /sys/devices/virtual/mtty/mtty with power/, subsystem -> class/mtty,
    uevent and mdev_supported_types, linked from /sys/class/mtty and
    /sys/class/mdev_bus."""
    for vp in host.virtual_parents:
        path = "/sys/devices/virtual/%s/%s" % (vp.cls, vp.name)
        t.mkdir(path + "/power")
        t.attr(path + "/uevent", "")
        t.link(path + "/subsystem", "/sys/class/" + vp.cls)
        t.link("/sys/class/%s/%s" % (vp.cls, vp.name), path)
        t.link("/sys/class/mdev_bus/" + vp.name, path)
        build_mdev(t, vp, path)


def build_mdev(t, d, path):
    """Documentation/ABI/testing/sysfs-bus-vfio-mdev: the parent's
    mdev_supported_types, and each mdev as a child directory of its parent."""
    used = {}
    for m in d.mdevs:
        used[m.type_id] = used.get(m.type_id, 0) + 1
    for ty in d.mdev_types:
        tdir = path + "/mdev_supported_types/" + ty.id
        # NVIDIA time-sliced vGPU: one type per GPU at a time, so once an
        # mdev exists every other type has no instance left.
        if used:
            avail = ty.max - used[ty.id] if ty.id in used else 0
        else:
            avail = ty.max
        t.attr(tdir + "/name", ty.name)
        t.attr(tdir + "/available_instances", str(avail))
        t.attr(tdir + "/device_api", ty.device_api)
        if ty.description is not None:
            t.attr(tdir + "/description", ty.description)
        t.write(tdir + "/create", "", WRITE_ONLY)
        t.mkdir(tdir + "/devices")
    for m in d.mdevs:
        mdir = path + "/" + m.uuid
        tdir = path + "/mdev_supported_types/" + m.type_id
        t.mkdir(mdir)
        t.link(mdir + "/mdev_type", tdir)
        t.link(tdir + "/devices/" + m.uuid, mdir)
        t.link(mdir + "/subsystem", "/sys/bus/mdev")
        t.write(mdir + "/remove", "", WRITE_ONLY)
        t.link("/sys/bus/mdev/devices/" + m.uuid, mdir)
        gdir = "/sys/kernel/iommu_groups/%d" % m.group
        t.link(mdir + "/iommu_group", gdir)
        t.link(gdir + "/devices/" + m.uuid, mdir)
        t.attr(gdir + "/type", "blocked")


def build_usb(t, host):
    """USB devices below their controller: CTRL/usbN (root hub),
    CTRL/usbN/N-P (device), .../N-P.Q, and the interfaces N-P.Q:C.I."""
    if not host.usb:
        return
    dirs = device_dirs(host)
    t.mkdir("/sys/bus/usb/devices")
    for u in sorted(host.usb, key=lambda x: x.path):
        bus = u.path.split("-")[0]
        ports = u.path.split("-")[1] if "-" in u.path else ""
        ctrl = dirs[u.controller]
        if u.path.startswith("usb"):
            bus = u.path[3:]
            path = ctrl + "/" + u.path
            if_prefix = bus + "-0"
        else:
            chain = ports.split(".")
            path = ctrl + "/usb" + bus
            for i in range(1, len(chain) + 1):
                path += "/" + bus + "-" + ".".join(chain[:i])
            if_prefix = u.path
        t.attr(path + "/idVendor", "%04x" % u.vendor)
        t.attr(path + "/idProduct", "%04x" % u.product)
        t.attr(path + "/bDeviceClass", "%02x" % u.dev_class)
        t.attr(path + "/bNumInterfaces", "%2d" % len(u.interfaces))
        t.attr(path + "/busnum", bus)
        t.attr(path + "/devnum", str(u.devnum))
        t.attr(path + "/speed", u.speed)
        # sysfs-bus-usb: authorized, 1 unless the host's policy says otherwise
        t.attr(path + "/authorized", "1")
        for name, value in (("manufacturer", u.manufacturer), ("product", u.name), ("serial", u.serial)):
            if value is not None:
                t.attr(path + "/" + name, value)
        t.link(path + "/subsystem", "/sys/bus/usb")
        t.link("/sys/bus/usb/devices/" + os.path.basename(path), path)
        for i, (cls, sub, proto) in enumerate(u.interfaces):
            iname = "%s:1.%d" % (if_prefix, i)
            ipath = path + "/" + iname
            t.attr(ipath + "/bInterfaceClass", "%02x" % cls)
            t.attr(ipath + "/bInterfaceSubClass", "%02x" % sub)
            t.attr(ipath + "/bInterfaceProtocol", "%02x" % proto)
            t.link(ipath + "/subsystem", "/sys/bus/usb")
            t.link("/sys/bus/usb/devices/" + iname, ipath)


def build_nodes(t, host):
    """stable/sysfs-devices-node and sysfs-devices-system-cpu."""
    ids = [n.id for n in host.nodes]
    t.attr("/sys/devices/system/cpu/online", host.cpus_online)
    t.attr("/sys/devices/system/cpu/possible", host.cpus_online)
    if not host.nodes:
        return
    span = "%d" % ids[0] if len(ids) == 1 else "%d-%d" % (ids[0], ids[-1])
    for name in ("online", "possible", "has_cpu", "has_memory", "has_normal_memory"):
        t.attr("/sys/devices/system/node/" + name, span)
    for n in host.nodes:
        ndir = "/sys/devices/system/node/node%d" % n.id
        t.attr(ndir + "/cpulist", n.cpulist)
        free = n.mem_kib * 9 // 10
        t.write(ndir + "/meminfo",
                "Node %d MemTotal:       %d kB\n"
                "Node %d MemFree:        %d kB\n"
                "Node %d MemUsed:        %d kB\n" % (n.id, n.mem_kib, n.id, free, n.id, n.mem_kib - free))


def build_dev_vfio(t, host):
    """Documentation/driver-api/vfio.rst: the container node /dev/vfio/vfio
    (vfio-pci is loaded on every fake host), and /dev/vfio/GROUP for each
    group with a device bound to vfio-pci or a vGPU VF (a VFIO device on
    NVIDIA's driver).  Plain empty files: the fake
    kernel of src/vfio keeps them in step with the bindings."""
    t.write("/dev/vfio/vfio", "")
    for g in sorted({d.group for d in host.devices if d.driver == "vfio-pci" or d.vgpu}):
        assert g is not None, "give a vfio-pci device an explicit IOMMU group"
        t.write("/dev/vfio/%d" % g, "")


def build_kernel(t, host):
    """/proc/sys/kernel/osrelease and /lib/modules/RELEASE/modules.alias as
    depmod writes it ("alias PATTERN MODULE"), and each loaded vfio-pci
    variant as the kernel shows a loaded PCI driver: the driver directory,
    and /sys/module/MODULE/drivers/pci:NAME (a variant's pci_driver is
    named after its module, KBUILD_MODNAME)."""
    if not host.kernel:
        return
    release, aliases, loaded = host.kernel
    t.attr("/proc/sys/kernel/osrelease", release)
    t.write("/lib/modules/%s/modules.alias" % release,
            "# Aliases extracted from modules themselves.\n" +
            "".join("alias %s %s\n" % (pattern, module) for pattern, module in aliases))
    for module in loaded:
        base = "/sys/bus/pci/drivers/" + module
        for name in ("bind", "unbind", "new_id", "remove_id"):
            t.write(base + "/" + name, "", WRITE_ONLY)
        t.link("/sys/module/%s/drivers/pci:%s" % (module, module), base)


def vfio_alias(vendor, device):
    """The alias PCI_DRIVER_OVERRIDE_DEVICE_VFIO(vendor, device) makes."""
    return "vfio_pci:v%08Xd%08Xsv*sd*bc*sc*i*" % (vendor, device)


def build(out, host):
    t = Tree(out)
    t.mkdir("/sys")
    build_kernel(t, host)
    build_pci(t, host)
    build_virtual_parents(t, host)
    build_dev_vfio(t, host)
    build_usb(t, host)
    build_nodes(t, host)


# --- the hosts -----------------------------------------------------------------

def host_bridge(rc, **kw):
    """The host bridge function at bus:00.0 of root complex @rc."""
    bus = rc[len("pci"):]
    return Pci(bus + ":00.0", "pci" + bus, INTEL, 0x09A2, CLASS_HOST_BRIDGE, rev=0x04, **kw)


def root_port(addr, rc, device=0x347A, **kw):
    return Pci(addr, rc, INTEL, device, CLASS_PCI_BRIDGE, rev=0x04, driver="pcieport",
               port=PCIE_ROOT_PORT, **kw)


# Health of the A100s by index: the second runs at x8 of x16 (a degraded
# link), the third has seen correctable AER errors; all have AER and a link.
A100_LINK = "16.0 GT/s PCIe"


def a100(addr, parent, index, slot, group=None):
    return Pci(addr, parent, NVIDIA, 0x20F1, CLASS_3D, rev=0xA1, subsys=(NVIDIA, 0x145F),
               driver="nvidia", dsn=0x48B02D1A00000000 | (0x1C0 + index), slot=slot,
               reset="flr bus", flr=True, group=group,
               aer=(3 if index == 2 else 0, 0, 0),
               link=(A100_LINK, A100_LINK, 8 if index == 1 else 16, 16))


def a6000(addr, parent, slot, vfio, group):
    fn0 = Pci(addr, parent, NVIDIA, 0x2230, CLASS_VGA, rev=0xA1, subsys=(NVIDIA, 0x1459),
              driver="vfio-pci" if vfio else "nvidia", override="vfio-pci" if vfio else None,
              group=group, slot=slot, reset="pm", multifunction=True,
              link=("2.5 GT/s PCIe", "16.0 GT/s PCIe", 16, 16))   # idle: slower, no AER
    fn1 = Pci(addr[:-1] + "1", parent, NVIDIA, 0x1AEF, CLASS_AUDIO, rev=0xA1, subsys=(NVIDIA, 0x1459),
              driver="snd_hda_intel", group=group, reset="pm", multifunction=True)
    return [fn0, fn1]


def x710(addr, parent, group=None):
    return [Pci(addr[:-1] + str(f), parent, INTEL, 0x1572, CLASS_ETHERNET, rev=0x02,
                subsys=(INTEL, 0x0007), driver="i40e", group=group, reset="flr",
                flr=True, multifunction=True)
            for f in (0, 1)]


def two_socket_8gpu():
    node0_rcs = ["pci0000:16", "pci0000:30", "pci0000:4a", "pci0000:64"]
    node1_rcs = ["pci0000:97", "pci0000:b0", "pci0000:c9", "pci0000:e2"]
    devs = [
        host_bridge("pci0000:00"),
        # USB controller of the chipset, holding the Movidius stick
        Pci("0000:00:14.0", "pci0000:00", INTEL, 0xA36D, CLASS_XHCI, rev=0x10,
            subsys=(0x1028, 0x0922), driver="xhci_hcd", reset="flr", flr=True),
        # the host's own NIC and boot disk
        root_port("0000:00:1c.0", "pci0000:00", device=0xA33C),
        *x710("0000:02:00.0", "0000:00:1c.0"),
        root_port("0000:00:1d.0", "pci0000:00", device=0xA330),
        Pci("0000:01:00.0", "0000:00:1d.0", SAMSUNG, 0xA808, CLASS_NVME,
            subsys=(SAMSUNG, 0xA801), driver="nvme", reset="flr bus", flr=True),
        host_bridge("pci0000:80"),
    ]
    gpus = [
        ("pci0000:16", "0000:17:00.0", "A100"),
        ("pci0000:30", "0000:31:00.0", "A100"),
        ("pci0000:4a", "0000:4b:00.0", "A100"),
        ("pci0000:64", "0000:65:00.0", "A100"),
        ("pci0000:97", "0000:98:00.0", "A6000"),
        ("pci0000:b0", "0000:b1:00.0", "A6000-vfio"),
        ("pci0000:c9", "0000:ca:00.0", "A100"),
        ("pci0000:e2", "0000:e3:00.0", "A100"),
    ]
    for i, (rc, addr, model) in enumerate(gpus):
        bus = rc[len("pci"):]
        port = bus + ":02.0"
        devs.append(host_bridge(rc))
        devs.append(root_port(port, rc))
        slot = str(i + 1)
        if model == "A100":
            devs.append(a100(addr, port, i, slot, group=40 + i))
        else:
            devs.extend(a6000(addr, port, slot, model.endswith("vfio"), group=40 + i))
    node_of = {rc: 0 for rc in ["pci0000:00"] + node0_rcs}
    node_of.update({rc: 1 for rc in ["pci0000:80"] + node1_rcs})
    usb = [
        Usb("usb1", "0000:00:14.0", 0x1D6B, 0x0002, "Linux 6.8.0-45-generic xhci-hcd",
            "xHCI Host Controller", "0000:00:14.0", dev_class=0x09, interfaces=((0x09, 0x00, 0x00),)),
        Usb("usb2", "0000:00:14.0", 0x1D6B, 0x0003, "Linux 6.8.0-45-generic xhci-hcd",
            "xHCI Host Controller", "0000:00:14.0", speed="10000", dev_class=0x09,
            interfaces=((0x09, 0x00, 0x00),)),
        Usb("1-1", "0000:00:14.0", 0x05E3, 0x0610, "GenesysLogic", "USB2.1 Hub", None,
            devnum=2, dev_class=0x09, interfaces=((0x09, 0x00, 0x02),)),
        Usb("1-1.2", "0000:00:14.0", 0x03E7, 0x2485, "Movidius Ltd.", "Movidius MyriadX",
            "03e72485", devnum=3),
    ]
    return Host(
        nodes=[Node(0, "0-15,32-47", 263921276), Node(1, "16-31,48-63", 264195264)],
        cpus_online="0-63", devices=devs, usb=usb, node_of=node_of)


def sriov_fpga_qat():
    dsn = 0x000A35002C1D0F0E
    devs = [
        host_bridge("pci0000:00"),
        host_bridge("pci0000:3a"),
        root_port("0000:3a:02.0", "pci0000:3a"),
        Pci("0000:3b:00.0", "0000:3a:02.0", XILINX, 0x5004, CLASS_ACCEL, subsys=(XILINX, 0x000E),
            driver="xclmgmt", group=30, dsn=dsn, slot="2", reset="flr", flr=True, multifunction=True,
            aer=(0, 0, 0), link=("8 GT/s", "8 GT/s", 16, 16)),   # an older kernel's speed
        Pci("0000:3b:00.1", "0000:3a:02.0", XILINX, 0x5005, CLASS_ACCEL, subsys=(XILINX, 0x000E),
            driver="xocl", group=30, dsn=dsn, reset="flr", flr=True, multifunction=True),
        # QAT 4xxx: a root complex integrated endpoint with SR-IOV
        Pci("0000:6b:00.0", "pci0000:6b", INTEL, 0x4940, CLASS_CRYPTO, rev=0x40,
            subsys=(INTEL, 0x0000), driver="4xxx", port=PCIE_RCIEP, sriov=(16, 4, 0x4941),
            reset="flr", flr=True, multifunction=True),
    ]
    for i in range(4):
        vfio = i == 1
        devs.append(Pci("0000:6b:00.%d" % (i + 1), "pci0000:6b", INTEL, 0x4941, CLASS_CRYPTO,
                        rev=0x40, subsys=(INTEL, 0x0000), driver="vfio-pci" if vfio else "4xxxvf",
                        override="vfio-pci" if vfio else None, port=PCIE_RCIEP,
                        physfn=("0000:6b:00.0", i), group=150 + i, reset="flr", flr=True))
    node_of = {rc: 0 for rc in ("pci0000:00", "pci0000:3a", "pci0000:6b")}
    # A kernel with vfio-pci variants (as Linux 6.12 builds them with
    # CONFIG_QAT_VFIO_PCI and CONFIG_MLX5_VFIO_PCI): qat_vfio_pci takes the
    # QAT 4xxx VFs (drivers/vfio/pci/qat/main.c: 0x4941, 0x4943, 0x4945)
    # and is loaded; mlx5_vfio_pci is not.  Besides them, the host drivers'
    # own pci: aliases, which are no vfio driver's.
    aliases = [
        ("pci:v00008086d00004940sv*sd*bc*sc*i*", "qat_4xxx"),
        ("pci:v00008086d00004941sv*sd*bc*sc*i*", "qat_4xxxvf"),
        (vfio_alias(0x15B3, 0x101E), "mlx5_vfio_pci"),
        (vfio_alias(INTEL, 0x4941), "qat_vfio_pci"),
        (vfio_alias(INTEL, 0x4943), "qat_vfio_pci"),
        (vfio_alias(INTEL, 0x4945), "qat_vfio_pci"),
        ("vfio_pci:v*d*sv*sd*bc*sc*i*", "vfio_pci"),
    ]
    return Host(nodes=[Node(0, "0-31", 131595968)], cpus_online="0-31", devices=devs, node_of=node_of,
                kernel=("6.12.57+deb13-amd64", aliases, ["qat_vfio_pci"]))


A10_TYPES = [
    # id, name, instances, framebuffer MiB
    ("nvidia-588", "NVIDIA A10-1Q", 24, 1024),
    ("nvidia-589", "NVIDIA A10-2Q", 12, 2048),
    ("nvidia-590", "NVIDIA A10-4Q", 6, 4096),
    ("nvidia-591", "NVIDIA A10-8Q", 3, 8192),
    ("nvidia-592", "NVIDIA A10-12Q", 2, 12288),
    ("nvidia-593", "NVIDIA A10-24Q", 1, 24576),
]


def a10(addr, parent, slot, mdevs=()):
    types = [MdevType(tid, name, n,
                      "num_heads=4, frl_config=60, framebuffer=%dM, max_resolution=7680x4320, "
                      "max_instance=%d" % (fb, n))
             for tid, name, n, fb in A10_TYPES]
    return Pci(addr, parent, NVIDIA, 0x2236, CLASS_3D, rev=0xA1, subsys=(NVIDIA, 0x1482),
               driver="nvidia", slot=slot, reset="flr bus", flr=True, mdev_types=types,
               mdevs=list(mdevs))


def vgpu_mdev():
    devs = [
        host_bridge("pci0000:00"),
        host_bridge("pci0000:16"),
        root_port("0000:16:02.0", "pci0000:16"),
        a10("0000:17:00.0", "0000:16:02.0", "1",
            [Mdev("4b20d080-1b54-4048-85b3-a6a62d165c01", "nvidia-590", group=200)]),
        host_bridge("pci0000:80"),
        host_bridge("pci0000:97"),
        root_port("0000:97:02.0", "pci0000:97"),
        a10("0000:98:00.0", "0000:97:02.0", "5"),
    ]
    node_of = {"pci0000:00": 0, "pci0000:16": 0, "pci0000:80": 1, "pci0000:97": 1}
    # The kernel's mdev sample, as a VM rig loads it: a virtual parent with
    # no numa_node (samples/vfio-mdev/mtty.c: MAX_MTTYS 24 ports, so 24
    # single-port or 12 dual-port instances).
    mtty = VirtualParent("mtty", "mtty", [
        MdevType("mtty-1", "Single port serial", 24, None),
        MdevType("mtty-2", "Dual port serial", 12, None),
    ])
    return Host(nodes=[Node(0, "0-23,48-71", 197880176), Node(1, "24-47,72-95", 198163004)],
                cpus_online="0-95", devices=devs, node_of=node_of, virtual_parents=[mtty])


L40S_VGPU_TYPES = [
    # id, instances per GPU, name (NVIDIA vGPU 17 for the L40S: 48 GB)
    (1155, 32, "NVIDIA L40S-1Q"),
    (1156, 24, "NVIDIA L40S-2Q"),
    (1157, 12, "NVIDIA L40S-4Q"),
    (1160, 2, "NVIDIA L40S-24Q"),
    (1161, 1, "NVIDIA L40S-48Q"),
]


def l40s(addr, parent, slot, group, vfs):
    """An L40S the vGPU Manager serves: the PF and its VFs on nvidia."""
    devs = [Pci(addr, parent, NVIDIA, 0x26B9, CLASS_3D, rev=0xA1, subsys=(NVIDIA, 0x1851),
                driver="nvidia", slot=slot, group=group, reset="flr bus", flr=True,
                sriov=(32, vfs, 0x26B9), vgpu_types=L40S_VGPU_TYPES, multifunction=True)]
    base = addr[:-1]
    for i in range(vfs):
        devs.append(Pci("%s%d" % (base, i + 1), parent, NVIDIA, 0x26B9, CLASS_3D, rev=0xA1,
                        subsys=(NVIDIA, 0x1851), driver="nvidia", physfn=(addr, i),
                        group=group + 1 + i, reset="flr", flr=True, vgpu=True))
    return devs


def vgpu_sriov():
    # Two L40S on two nodes, as NVIDIA's sriov-manage leaves them at boot
    # (nvidia-sriov-manage@ALL.service): 4 VFs each, every one free.
    devs = [host_bridge("pci0000:00"), host_bridge("pci0000:16"), root_port("0000:16:02.0", "pci0000:16")]
    devs += l40s("0000:17:00.0", "0000:16:02.0", "1", 60, 4)
    devs += [host_bridge("pci0000:97"), root_port("0000:97:02.0", "pci0000:97")]
    devs += l40s("0000:98:00.0", "0000:97:02.0", "5", 70, 4)
    node_of = {"pci0000:00": 0, "pci0000:16": 0, "pci0000:97": 1}
    return Host(nodes=[Node(0, "0-23", 197880176), Node(1, "24-47", 198163004)],
                cpus_online="0-47", devices=devs, node_of=node_of)


def trap_shared_group():
    # A root port and a PCIe switch without ACS: everything below the switch
    # lands in IOMMU group 12, the GPU together with the host's own NIC.
    devs = [
        host_bridge("pci0000:00", group=0),
        root_port("0000:00:1c.0", "pci0000:00", device=0xA33C, group=11),
        Pci("0000:02:00.0", "0000:00:1c.0", 0x10B5, 0x8747, CLASS_PCI_BRIDGE, rev=0xCA,
            driver="pcieport", port=PCIE_UPSTREAM, group=12),
        Pci("0000:03:08.0", "0000:02:00.0", 0x10B5, 0x8747, CLASS_PCI_BRIDGE, rev=0xCA,
            driver="pcieport", port=PCIE_DOWNSTREAM, group=12),
        Pci("0000:03:10.0", "0000:02:00.0", 0x10B5, 0x8747, CLASS_PCI_BRIDGE, rev=0xCA,
            driver="pcieport", port=PCIE_DOWNSTREAM, group=12),
        a100("0000:04:00.0", "0000:03:08.0", 0, "3", group=12),
        *x710("0000:05:00.0", "0000:03:10.0", group=12),
        # Behind a root port of its own, a multi-function card whose first
        # function is an A6000, its second the host's E810 NIC (on ice) and
        # its third the A6000's HDMI audio: one slot, one IOMMU group 14.
        # The audio goes with the GPU when the profile names it among its
        # companions; the NIC never does, whatever its function number.
        root_port("0000:00:1d.0", "pci0000:00", device=0xA330, group=13),
        Pci("0000:06:00.0", "0000:00:1d.0", NVIDIA, 0x2230, CLASS_VGA, rev=0xA1, subsys=(NVIDIA, 0x1459),
            driver="nvidia", group=14, slot="4", reset="pm", multifunction=True),
        Pci("0000:06:00.1", "0000:00:1d.0", INTEL, 0x1593, CLASS_ETHERNET, rev=0x02, subsys=(INTEL, 0x0005),
            driver="ice", group=14, reset="flr", flr=True, multifunction=True),
        Pci("0000:06:00.2", "0000:00:1d.0", NVIDIA, 0x1AEF, CLASS_AUDIO, rev=0xA1, subsys=(NVIDIA, 0x1459),
            driver="snd_hda_intel", group=14, reset="pm", multifunction=True),
    ]
    return Host(nodes=[Node(0, "0-7", 32657996)], cpus_online="0-7", devices=devs,
                node_of={"pci0000:00": -1})


def fpga_regions():
    # Multi-region accelerator cards (seed 003: a card holds regions, a
    # region holds functions).  Each card is one slot with three PFs (the
    # regions), each PF with four VFs (the functions) on the card's bus, every
    # function in its own IOMMU group.  Two cards on node 0, one on node 1.
    # Made-up device ids 0x5050 (PF) and 0x5051 (VF) under Xilinx.
    devs = [host_bridge("pci0000:00")]
    cards = [("pci0000:3a", "3b", 0x1001), ("pci0000:5d", "5e", 0x1002), ("pci0000:ae", "af", 0x1003)]
    for i, (rc, bus, serial) in enumerate(cards):
        port = rc[len("pci"):] + ":02.0"
        devs.append(host_bridge(rc))
        devs.append(root_port(port, rc))
        for pf in range(3):
            pf_addr = "0000:%s:00.%d" % (bus, pf)
            devs.append(Pci(pf_addr, port, XILINX, 0x5050, CLASS_ACCEL, subsys=(XILINX, 0x0010),
                            driver="xclmgmt", dsn=0x000A350000000000 | (serial << 8), slot=str(i + 1),
                            sriov=(4, 4, 0x5051), reset="flr", flr=True, multifunction=True))
            for vf in range(4):
                devs.append(Pci("0000:%s:%02x.%d" % (bus, pf + 1, vf), port, XILINX, 0x5051, CLASS_ACCEL,
                                subsys=(XILINX, 0x0010), driver="xocl", physfn=(pf_addr, vf),
                                reset="flr", flr=True))
    node_of = {"pci0000:00": 0, "pci0000:3a": 0, "pci0000:5d": 0, "pci0000:ae": 1}
    return Host(nodes=[Node(0, "0-7", 65797984), Node(1, "8-15", 66060128)], cpus_online="0-15",
                devices=devs, node_of=node_of)


def switches():
    # PCIe switches for peer-to-peer (issue 16).  Each switch is an upstream
    # port (PLX/Broadcom PEX 8747 ids) below a root port, with one downstream
    # port per device; the A100s (10de:20f1, class 0x030200, driver nvidia)
    # sit one per bus, so each is a card of its own.
    #   node 0, CPUs 0-7:
    #     switch 0000:11:00.0 (root port 0000:10:01.0): GPUs 0000:13:00.0, 0000:14:00.0
    #     switch 0000:21:00.0 (root port 0000:20:01.0): GPUs 0000:23:00.0, 0000:24:00.0,
    #       and 0000:27:00.0 behind a nested switch 0000:25:00.0 (its top switch: 0000:21:00.0)
    #     PCIe-to-PCI bridge 0000:31:00.0 (root port 0000:30:01.0, no switch):
    #       a conventional PCI card 0000:32:00.0 (10ee:7021, class 0x120000)
    #     switch 0000:41:00.0 (root port 0000:40:01.0): SR-IOV PF 0000:43:00.0 (10ee:5050)
    #       with VFs 0000:43:00.1 and 0000:43:00.2 (10ee:5051), class 0x120000
    #   node 1, CPUs 8-15:
    #     switch 0000:91:00.0 (root port 0000:90:01.0): GPUs 0000:93:00.0, 0000:94:00.0
    #     GPU 0000:a1:00.0 alone under root port 0000:a0:01.0 (no switch)
    def plx(addr, parent, port):
        return Pci(addr, parent, 0x10B5, 0x8747, CLASS_PCI_BRIDGE, rev=0xCA, driver="pcieport", port=port)

    devs = [host_bridge("pci0000:00"), host_bridge("pci0000:80")]
    gpus = []

    def switch(rc, ports):
        # ports: [(downstream port address, device bus)], one GPU per port
        bus = rc[len("pci"):]
        rp = bus + ":01.0"
        up = "%s:%02x:00.0" % (bus[:4], int(bus[5:7], 16) + 1)
        devs.extend([host_bridge(rc), root_port(rp, rc), plx(up, rp, PCIE_UPSTREAM)])
        for down, dev_bus in ports:
            devs.append(plx(down, up, PCIE_DOWNSTREAM))
            gpus.append(("0000:%s:00.0" % dev_bus, down))

    switch("pci0000:10", [("0000:12:00.0", "13"), ("0000:12:01.0", "14")])
    switch("pci0000:20", [("0000:22:00.0", "23"), ("0000:22:01.0", "24")])
    # a switch nested below the third downstream port of 0000:21:00.0
    devs.extend([plx("0000:22:02.0", "0000:21:00.0", PCIE_DOWNSTREAM),
                 plx("0000:25:00.0", "0000:22:02.0", PCIE_UPSTREAM),
                 plx("0000:26:00.0", "0000:25:00.0", PCIE_DOWNSTREAM)])
    gpus.append(("0000:27:00.0", "0000:26:00.0"))
    switch("pci0000:90", [("0000:92:00.0", "93"), ("0000:92:01.0", "94")])
    # a GPU alone under its root port
    devs.extend([host_bridge("pci0000:a0"), root_port("0000:a0:01.0", "pci0000:a0")])
    gpus.append(("0000:a1:00.0", "0000:a0:01.0"))
    for i, (addr, parent) in enumerate(gpus):
        devs.append(a100(addr, parent, i, str(i + 1)))
    # a conventional PCI card behind a PCIe-to-PCI bridge (TI XIO2001)
    devs.extend([host_bridge("pci0000:30"), root_port("0000:30:01.0", "pci0000:30"),
                 Pci("0000:31:00.0", "0000:30:01.0", 0x104C, 0x8240, CLASS_PCI_BRIDGE, rev=0x00,
                     port=PCIE_TO_PCI),
                 Pci("0000:32:00.0", "0000:31:00.0", XILINX, 0x7021, CLASS_ACCEL, subsys=(XILINX, 0x0007),
                     slot="20", reset="bus")])
    # an SR-IOV accelerator behind a switch, its VFs with it
    devs.extend([host_bridge("pci0000:40"), root_port("0000:40:01.0", "pci0000:40"),
                 plx("0000:41:00.0", "0000:40:01.0", PCIE_UPSTREAM),
                 plx("0000:42:00.0", "0000:41:00.0", PCIE_DOWNSTREAM),
                 Pci("0000:43:00.0", "0000:42:00.0", XILINX, 0x5050, CLASS_ACCEL, subsys=(XILINX, 0x0010),
                     driver="xclmgmt", dsn=0x000A350000001004, slot="21", sriov=(4, 2, 0x5051),
                     reset="flr", flr=True, multifunction=True)])
    for vf in range(2):
        devs.append(Pci("0000:43:00.%d" % (vf + 1), "0000:42:00.0", XILINX, 0x5051, CLASS_ACCEL,
                        subsys=(XILINX, 0x0010), driver="xocl", physfn=("0000:43:00.0", vf),
                        reset="flr", flr=True))
    node_of = {rc: 0 for rc in ("pci0000:00", "pci0000:10", "pci0000:20", "pci0000:30", "pci0000:40")}
    node_of.update({rc: 1 for rc in ("pci0000:80", "pci0000:90", "pci0000:a0")})
    return Host(nodes=[Node(0, "0-7", 65797984), Node(1, "8-15", 66060128)], cpus_online="0-15",
                devices=devs, node_of=node_of)


def netdev_card():
    # Issue 34: IP-over-PCIe cards (Intel VCA-style), reached through the
    # network interface their host driver makes.  Two 82574L (e1000e)
    # functions stand in, as QEMU's e1000e does on the VM rig: each on its
    # host driver with one interface, behind a root port of its own; a
    # third NIC is the host's own (no profile matches it).
    devs = [
        host_bridge("pci0000:00", group=0),
        root_port("0000:00:1c.0", "pci0000:00", device=0xA33C, group=11),
        Pci("0000:45:00.0", "0000:00:1c.0", INTEL, 0x10D3, CLASS_ETHERNET, subsys=(INTEL, 0x0000),
            driver="e1000e", group=12, reset="flr", flr=True, net=["enp69s0"]),
        root_port("0000:00:1d.0", "pci0000:00", device=0xA330, group=13),
        Pci("0000:46:00.0", "0000:00:1d.0", INTEL, 0x10D3, CLASS_ETHERNET, subsys=(INTEL, 0x0000),
            driver="e1000e", group=14, reset="flr", flr=True, net=["enp70s0"]),
        root_port("0000:00:1e.0", "pci0000:00", device=0xA331, group=15),
        Pci("0000:47:00.0", "0000:00:1e.0", INTEL, 0x1593, CLASS_ETHERNET, rev=0x02, subsys=(INTEL, 0x0005),
            driver="ice", group=16, reset="flr", flr=True, net=["eno1"]),
    ]
    return Host(nodes=[Node(0, "0-7", 32657996)], cpus_online="0-7", devices=devs,
                node_of={"pci0000:00": 0})


HOSTS = {
    "netdev-card": netdev_card,
    "two-socket-8gpu": two_socket_8gpu,
    "sriov-fpga-qat": sriov_fpga_qat,
    "vgpu-mdev": vgpu_mdev,
    "vgpu-sriov": vgpu_sriov,
    "trap-shared-group": trap_shared_group,
    "fpga-regions": fpga_regions,
    "switches": switches,
}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory that receives one tree per host")
    parser.add_argument("names", nargs="*", help="hosts to generate (default: all)")
    args = parser.parse_args(argv)
    names = args.names or sorted(HOSTS)
    for name in names:
        if name not in HOSTS:
            parser.error("unknown host '%s' (known: %s)" % (name, ", ".join(sorted(HOSTS))))
    os.makedirs(args.out, exist_ok=True)
    for name in names:
        out = os.path.join(args.out, name)
        if os.path.lexists(out):
            shutil.rmtree(out)
        os.makedirs(out)
        build(out, HOSTS[name]())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
