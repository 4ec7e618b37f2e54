/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: handing PCI devices to vfio-pci and back, IOMMU group safety,
 * mediated devices.
 *
 * Kernel interfaces: Documentation/driver-api/vfio.rst (groups, viability,
 * /dev/vfio/GROUP), Documentation/ABI/testing/sysfs-bus-pci,
 * Documentation/driver-api/vfio-mediated-device.rst.  All writes go through
 * an AvKernelOps (see av-kernel.h). */
#pragma once

#include <glib.h>

#include "pci/av-pci.h"
#include "policy/av-policy.h"
#include "util/av-names.h"
#include "util/av-root.h"
#include "vfio/av-kernel.h"

G_BEGIN_DECLS

/* Checks that the IOMMU group of @dev can be handed to a guest, and lists the
 * devices that must move to vfio-pci with it.  Refuses (AV_ERROR_UNSAFE, one
 * sentence naming the device, the group and the offending member, and what to
 * do) when:
 *   - @dev has no IOMMU group (the IOMMU is off: "enable intel_iommu=on or
 *     amd_iommu=on");
 *   - the group holds a PCI bridge (@dev sits behind a bridge that does not
 *     isolate it, such as a PCIe-to-PCI bridge: the group is not viable);
 *   - the group holds a device the host uses: an endpoint bound to a driver
 *     other than vfio-pci or pci-stub that is neither a pool device handed
 *     out whole (a profile with attach vfio-pci or sriov-vf matches it) nor
 *     a function of @dev's own card (same domain:bus:slot) that the
 *     profile of @dev names in its "companions" — such as the host's NIC,
 *     even as the second function of the GPU's own slot, or its disk.
 * On success stores in *ret_members the addresses (char*, sorted, @dev
 * included) of every endpoint of the group. */
gboolean av_vfio_group_check(const AvHost *host, const AvPolicy *policy, const AvPciDevice *dev,
                             GPtrArray **ret_members, GError **error);

/* The name under /sys/bus/pci/drivers of the loaded vfio driver of the
 * module @module ("vfio_pci" gives "vfio-pci"; a variant's from
 * /sys/module/MODULE/drivers/pci:NAME), or NULL when it is not loaded or
 * not a vfio driver.  Caller frees. */
char *av_vfio_module_driver(const AvRoot *root, const char *module);

/* The vfio driver to bind the PCI function @address to, per its profile's
 * "vfio_driver" @choice (accelvirt-policy(5)): NULL or "auto", the variant
 * the running kernel's modules.alias offers it (@aliases, may be NULL),
 * else vfio-pci; "vfio-pci", vfio-pci; a variant's module name, that one.
 * Fails, in one sentence that says what to run, when the chosen variant is
 * not loaded: a device is never silently given plain vfio-pci when the
 * kernel has a variant for it.  Touches nothing. */
gboolean av_vfio_choose_driver(const AvRoot *root, const AvVfioAliases *aliases, const char *address,
                               const char *choice, char **ret_driver, GError **error);

/* As av_vfio_choose_driver() (reading modules.alias itself), but vfio-pci
 * where that fails, with the reason in @ret_why (may be NULL): for the binds
 * whose job is to keep the host away from a device (a scrub, a quarantine,
 * the boot), which any vfio driver does.  Caller frees. */
char *av_vfio_choose_driver_or_plain(const AvRoot *root, const char *address, const char *choice,
                                     GError **ret_why);

/* When the PCI function @address is already on the vfio driver @current
 * (which it keeps: av_vfio_bind()) and its profile's @choice, or the
 * running kernel's modules.alias (@aliases) for "auto", names another vfio
 * driver: one sentence saying it stays and what the operator can do, for a
 * log.  NULL when @current is the one wanted or not a vfio driver.  Caller
 * frees. */
char *av_vfio_kept_note(const AvRoot *root, const AvVfioAliases *aliases, const char *address, const char *current,
                        const char *choice);

/* Binds the PCI device @address to @driver (NULL: vfio-pci), vfio-pci or a
 * vfio-pci variant (av_vfio_choose_driver()): driver_override = @driver,
 * unbind from the current driver (if any), drivers_probe, then checks that
 * the driver link now names @driver.  A device already on vfio-pci or a
 * variant is left alone.  Stores the driver it was bound to before (that
 * vfio driver when it was already there, NULL when it had none) in
 * *ret_original_driver, so that av_vfio_restore() with it gives the device
 * back exactly as it was.  On failure the device is put back as it was, as
 * far as possible, and the error says what failed. */
gboolean av_vfio_bind(const AvRoot *root, const AvKernelOps *ops, const char *address, const char *driver,
                      char **ret_original_driver, GError **error);

/* Resizes BAR @bar of the PCI device @address, which must be on vfio-pci
 * or a variant of it (its "vfio driver") with nobody holding it open (close
 * any VFIO handle first), to 2^(@bit + 20) bytes
 * (Documentation/ABI/testing/sysfs-bus-pci: resourceN_resize, which
 * requires that no driver is bound): sets driver_override to that vfio
 * driver (so that no host driver takes the device while it has none),
 * unbinds it, writes @bit to resource@bar_resize, and probes it back onto
 * the same vfio driver, whether the resize worked or not.  Returns FALSE
 * with @error saying what failed: the resize (the kernel's answer: the
 * bridge's window has no room, the size is not offered, ...), or the way
 * back (the device may then be on no driver: the caller quarantines it). */
gboolean av_vfio_resize_bar(const AvRoot *root, const AvKernelOps *ops, const char *address, guint bar, guint bit,
                            GError **error);

/* The driver the PCI device @address is bound to now (the name of its
 * driver link under @root), or NULL when it has none or the link cannot be
 * read.  Caller frees. */
char *av_vfio_current_driver(const AvRoot *root, const char *address);

/* TRUE when the PCI device @address, on @driver (its current driver), is a
 * VFIO device whose group file accelvirt can hold: on vfio-pci or a
 * variant, or a VF with NVIDIA's vGPU interface (nvidia/current_vgpu_type)
 * that is a VFIO device (vfio-dev/) on NVIDIA's own driver. */
gboolean av_vfio_device_is_vfio(const AvRoot *root, const char *address, const char *driver);

/* A process that holds a device of an IOMMU group: see
 * av_vfio_groups_find_holder(). */
typedef struct {
    int group;          /* the IOMMU group it holds */
    char *pid;          /* "4242" */
    char *through;      /* how: the path of its fd (/dev/vfio/40,
                         * /dev/vfio/devices/vfio3), "anon_inode:[vfio-device]
                         * of 0000:31:00.0", "a mapping of
                         * /sys/devices/.../0000:31:00.0/resource1" */
} AvVfioHolder;

void av_vfio_holder_free(AvVfioHolder *holder);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(AvVfioHolder, av_vfio_holder_free)

/* "PID (THROUGH)" of @holder, such as "4242 (/dev/vfio/devices/vfio3)", for
 * messages.  Caller frees. */
char *av_vfio_holder_describe(const AvVfioHolder *holder);

/* Looks through every process under @root (/proc/PID) for one that holds a
 * device of one of the @n_groups IOMMU groups @groups (a domain's QEMU, a
 * DPDK program, a scrubber).  A process holds group N when it has
 *   - an fd on /dev/vfio/N (Documentation/driver-api/vfio.rst: the group);
 *   - an fd on /dev/vfio/devices/vfioX, the vfio cdev of a member of N (the
 *     kernel names it in /sys/.../MEMBER/vfio-dev/vfioX,
 *     Documentation/ABI/testing/sysfs-devices-vfio-dev; the device interface
 *     that iommufd uses, Documentation/userspace-api/iommufd.rst);
 *   - an "anon_inode:[vfio-device]" fd (VFIO_GROUP_GET_DEVICE_FD) whose
 *     /proc/PID/fdinfo/FD names a member ("vfio-device-syspath:",
 *     Documentation/filesystems/proc.rst, kernel 6.18 and later);
 *   - an fd on, or a mapping in /proc/PID/maps (proc(5)) of, a member's BAR:
 *     its sysfs resourceN or resourceN_wc file (root's only), or its
 *     /dev/vfio/devices/vfioX (the cdev's regions); a mapping (not a mere
 *     fd: that reads config space, and anyone may open it) of its
 *     /proc/bus/pci/BB/SS.F file.
 * The members of N are the names in /sys/kernel/iommu_groups/N/devices.
 * An fd on /dev/iommu alone holds no particular device (a device is bound
 * to an iommufd through its own vfio cdev fd, which is what counts).
 * A process that vanishes during the scan is skipped.
 *
 * Returns TRUE and the first holder found in *ret_holder (caller frees),
 * or NULL when no process holds any of the groups.  Returns FALSE with
 * AV_ERROR_FAILED when it cannot tell: no holder was found but a process's
 * fd, fdinfo or maps could not be read (not root?), or /proc is missing
 * under the host's own root.  A tree without /proc (a fake host) has no
 * processes.  Matches the texts the kernel prints, as seen from this mount
 * namespace: see docs/operator-guide.md, Who holds a device, for what this
 * cannot see. */
gboolean av_vfio_groups_find_holder(const AvRoot *root, const int *groups, guint n_groups,
                                    AvVfioHolder **ret_holder, GError **error);

/* As av_vfio_groups_find_holder(), but a process that accelvirt holds the
 * group with (an "accelvirt-hold" recorded in @state_dir/holds whose start
 * time under @root's /proc agrees with its record, av_hold_pids()) is not a
 * holder: that is accelvirt keeping the device from every domain, not a
 * QEMU.  A NULL @state_dir ignores no process. */
gboolean av_vfio_groups_find_holder_full(const AvRoot *root, const char *state_dir, const int *groups,
                                         guint n_groups, AvVfioHolder **ret_holder, GError **error);

/* A new fd (the caller's, close-on-exec) on the very open file of
 * /dev/vfio/@group that a process of this machine has (a domain's QEMU),
 * taken with pidfd_open(2) and pidfd_getfd(2) (root, or the right to
 * ptrace it), and checked to be the group's node.  While the caller keeps
 * it, the group file stays open when that process closes its own, and the
 * kernel refuses every other open of the group (EBUSY): handed to a holder
 * (av_hold_take_fd()), it leaves no moment between the QEMU letting the
 * device go and accelvirt's hold.  Processes of @state_dir's holders are
 * skipped.  TRUE and -1 in *ret_fd when no process has the group file open
 * (no /proc in a fake tree); *ret_from (may be NULL) names the process and
 * its fd.  FALSE when the process cannot be taken from. */
gboolean av_vfio_group_file_take(const AvRoot *root, const char *state_dir, int group, int *ret_fd,
                                 char **ret_from, GError **error);

/* The holder of IOMMU group @group as text, "PID (THROUGH)" (see
 * av_vfio_holder_describe()), such as "4242 (/dev/vfio/40)"; NULL when no
 * process holds it.  When av_vfio_groups_find_holder() cannot tell, the
 * text "unknown (WHY)", so that a caller that only asks "is it held?"
 * errs on the safe side.  Caller frees. */
char *av_vfio_group_holder(const AvRoot *root, int group);
/* As av_vfio_group_holder(), ignoring accelvirt's own holders recorded in
 * @state_dir (av_vfio_groups_find_holder_full()). */
char *av_vfio_group_holder_full(const AvRoot *root, const char *state_dir, int group);

/* Gives @address back to the host: unbind from vfio-pci or its variant, clear
 * driver_override, then bind to @original_driver exactly (its
 * /sys/bus/pci/drivers/DRV/bind), or leave it unbound when
 * @original_driver is NULL.  When @original_driver is itself a vfio driver
 * (vfio-pci or a variant, which bind by driver_override only), the override
 * names it and drivers_probe binds it, from another vfio driver or from
 * none. */
gboolean av_vfio_restore(const AvRoot *root, const AvKernelOps *ops, const char *address,
                         const char *original_driver, GError **error);

/* Waits up to @timeout_ms for /dev/vfio/@group to appear (udev may be slow).
 * AV_ERROR_FAILED naming the path on timeout. */
gboolean av_vfio_wait_group_node(const AvRoot *root, int group, int timeout_ms, GError **error);



/* Chooses the parent for a new mdev of @profile (its mdev_type) among
 * @host's mdev parents (host->mdev_parents: /sys/class/mdev_bus, PCI or
 * not): parents whose types list the type with at least one available
 * instance, and that the profile names when it matches parents by name
 * ("mdev_parent"); only those on @numa_node when it is >= 0; preferring
 * parents that already run mdevs of this very type (a vGPU parent runs one
 * type at a time), then by allocation: pack (the parent with the fewest
 * instances left) or spread (the most); ties by name.  Stores the parent's
 * name (caller frees).  AV_ERROR_NO_CAPACITY when no parent has room,
 * naming the type and node. */
gboolean av_mdev_choose_parent(const AvHost *host, const AvProfile *profile, int numa_node,
                               char **ret_parent, GError **error);

/* Creates the mdev @uuid of @type on the parent named @parent (a name of
 * /sys/class/mdev_bus, av_mdev_parent_name_is_valid(): "0000:17:00.0",
 * "mtty"): writes the UUID to
 * /sys/class/mdev_bus/PARENT/mdev_supported_types/TYPE/create (through
 * /sys/bus/pci/devices/PARENT for a PCI parent a tree without the class
 * holds) and checks that it appeared under that parent.
 * AV_ERROR_INVALID_INPUT for a bad name, type or UUID, AV_ERROR_NOT_FOUND
 * for an unknown parent or type, AV_ERROR_NO_CAPACITY when no instance is
 * left, AV_ERROR_IN_USE when the UUID exists. */
gboolean av_mdev_create(const AvRoot *root, const AvKernelOps *ops, const char *parent,
                        const char *type, const char *uuid, GError **error);

/* How long av_sriov_set_numvfs() waits for the VFs' sysfs directories. */
#define AV_SRIOV_WAIT_MS 5000

/* Sets the VF count of the PF @pf_address to @count
 * (Documentation/ABI/testing/sysfs-bus-pci: sriov_drivers_autoprobe,
 * sriov_numvfs): writes sriov_drivers_autoprobe 0 (so that no host VF
 * driver takes the new VFs before accelvirt binds them to vfio-pci), then
 * sriov_numvfs: through 0 first when a non-zero count changes to another
 * (the kernel refuses that with -EBUSY); the caller has checked that no
 * existing VF is in use.  Then waits up to @timeout_ms for virtfn0 to
 * virtfn(@count - 1) and their directories.  Every write goes through
 * @ops.  AV_ERROR_INVALID_INPUT for a bad address, AV_ERROR_NOT_FOUND
 * when it is no SR-IOV PF, AV_ERROR_UNSAFE above sriov_totalvfs,
 * AV_ERROR_FAILED for a write the kernel refused or VFs that did not
 * appear in time. */
gboolean av_sriov_set_numvfs(const AvRoot *root, const AvKernelOps *ops, const char *pf_address, guint count,
                             int timeout_ms, GError **error);

/* Removes the mdev @uuid (write "1" to its remove attribute).  Removing an
 * mdev that does not exist succeeds. */
gboolean av_mdev_remove(const AvRoot *root, const AvKernelOps *ops, const char *uuid, GError **error);

G_END_DECLS
