/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the domain rewrite.  XML in, XML out: no sysfs, no libvirt.
 *
 * From a placement (src/pool/av-pool-placement.h) it writes into the domain:
 *   - for each PCI device: <hostdev mode='subsystem' type='pci' managed='no'>
 *     with its source address and <alias name='ua-accelvirt-N'/> (accelvirt
 *     binds, not libvirt);
 *   - for each mdev: <hostdev mode='subsystem' type='mdev' model='vfio-pci'>
 *     with the placement's UUID (the hook picks the parent at prepare);
 *   - for each USB stick: <hostdev mode='subsystem' type='usb'> with vendor
 *     and product ids and its bus address;
 *   - when the placement has a node: <vcpupin> for every vCPU and
 *     <emulatorpin> on the node's CPUs, <numatune><memory mode='strict'
 *     nodeset='N'/>;
 *   - when a profile says hide_hypervisor: <features><kvm><hidden
 *     state='on'/></kvm><hyperv><vendor_id state='on' value='...'/></hyperv>
 *     (seed 004: drivers that refuse to run in a VM);
 *   - on a q35 machine, the guest topology of av_guest_topology()
 *     (src/domain/av-topology.h): pcie-expander-buses
 *     ("ua-accelvirt-pxbC", <target busNr=><node>C</node></target>),
 *     pcie-root-ports ("ua-accelvirt-rpK"), switch upstream and downstream
 *     ports ("ua-accelvirt-upK", "-dnK"), all with explicit indexes, and
 *     each positioned hostdev's guest <address type='pci'/>; guest NUMA
 *     cells (<cpu><numa>, per-cell <vcpupin>s, <emulatorpin>, <numatune>
 *     <memory> and <memnode>s, in place of the one node's pinning); GPUDirect
 *     cliques (<qemu:override> entries for ua-accelvirt-N, xmlns:qemu on
 *     <domain> when it had none);
 *   - for <av:hotplug slots="N"/> on a q35 machine: as many
 *     <controller type='pci' model='pcie-root-port'>s with aliases
 *     "ua-accelvirt-hotplugK" as it takes for N empty root ports, room for
 *     `accelvirt attach` (other machines: nothing, their root bus has
 *     hot-plug slots; a rewrite removes only those of its ports that no
 *     device sits behind);
 *   - the placement itself, in the accelvirt metadata:
 *       <av:accelerators xmlns:av="urn:accelvirt:domain:1">
 *         <av:request .../>                       (kept as the user wrote them)
 *         <av:placement node="0" pinned="yes" numatune="yes" hidden="no">
 *           <av:device profile=".." address="0000:17:00.0" alias="ua-accelvirt-0"/>
 *           <av:device profile=".." address="0000:3b:00.0" bitstream="SHA256" alias=".."/>
 *                                                 (its request's bitstream=, resolved by the CLI:
 *                                                  the device must hold it at prepare)
 *           <av:mdev profile=".." uuid="..." alias="ua-accelvirt-1"/>
 *           <av:usb profile=".." bus-path="1-1.2" vendor="0x03e7" product="0x2485" alias="ua-accelvirt-2"/>
 *         </av:placement>
 *       </av:accelerators>
 *     (and vendor-id="yes|no": hidden is about <kvm><hidden>, vendor-id
 *     about <hyperv><vendor_id>, since the user may have written one of them;
 *     only when "yes": cells= for <cpu><numa> and the memnodes,
 *     cpu= for the <cpu> element itself, qemu-ns= for the xmlns:qemu
 *     declaration; and cell="C" on each entry a guest cell holds)
 *     whose pinned/numatune/hidden/vendor-id attributes say which elements
 *     accelvirt wrote, so that a later rewrite (or av_domain_unplace())
 *     removes exactly what accelvirt wrote and never what the user wrote.
 * Elements the user wrote stay: if the user pinned vCPUs or wrote a numatune
 * already, accelvirt leaves them (and the placement says pinned="no").
 * Rewriting twice with the same placement gives the same document, byte for
 * byte.  Domains without <av:accelerators> requests (such as those Nova
 * writes) are returned unchanged.  The schema is xml/accelvirt-domain.rng. */
#pragma once

#include <glib.h>

#include "domain/av-domain.h"
#include "pool/av-pool-placement.h"

G_BEGIN_DECLS

/* <av:hotplug slots=> is 1 to this. */
#define AV_HOTPLUG_SLOTS_MAX 16u
/* <hyperv><vendor_id value=>: at most 12 characters, no ',' (libvirt). */
#define AV_REWRITE_VENDOR_ID "accelvirt"
/* An <av:request count=> is 1 to this; a domain has at most AV_REQUESTS_MAX
 * requests. */
#define AV_REQUEST_COUNT_MAX 64u
#define AV_REQUESTS_MAX 64u

/* The requests of the domain XML @xml (its <av:request> elements), parsed
 * with the same hostile-input rules as av_domain_parse().  An empty array
 * when there are none.  NULL with AV_ERROR_INVALID_INPUT on a malformed
 * request (unknown attribute value, count out of 1..64, bad profile name). */
GPtrArray *av_domain_requests(const char *xml, gsize len, GError **error);

/* The same, and in *ret_hotplug (may be NULL) the hot-plug slots its
 * <av:hotplug slots="N"/> asks for (0 when none): at most one, N from 1 to
 * AV_HOTPLUG_SLOTS_MAX, else AV_ERROR_INVALID_INPUT. */
GPtrArray *av_domain_requests_full(const char *xml, gsize len, guint *ret_hotplug, GError **error);

/* Writes @placement into @xml as described above, first removing whatever an
 * earlier placement wrote.  @policy gives each profile's hide_hypervisor.
 * Returns the new document (caller frees) or NULL with @error set. */
char *av_domain_rewrite(const char *xml, gsize len, const AvPlacement *placement,
                        const AvPolicy *policy, GError **error);

/* For `accelvirt define`: @xml as libvirt defined it (every device with
 * the address libvirt gave it) with the empty pcie-root-ports its
 * <av:hotplug slots="N"/> lacks added: libvirt puts a device without an
 * address (a USB controller, a disk, a NIC) in the first free root port,
 * so the ports a rewrite reserved may be taken by the time the domain is
 * defined.  Counts every pcie-root-port that no device's address names;
 * adds (aliases ua-accelvirt-hotplugK) up to N.  *ret_added says how many
 * (0: @xml back unchanged).  Caller frees. */
char *av_domain_hotplug_fill(const char *xml, gsize len, guint *ret_added, GError **error);

/* Removes everything an earlier placement wrote (hostdevs with ua-accelvirt
 * aliases, the pinning and numatune it wrote, the hidden features it wrote,
 * the topology's controllers by alias, the <qemu:override> entries of its
 * hostdevs (and the override when they were all it held), the cells,
 * memnodes, <cpu> and xmlns:qemu its record says it wrote, <av:placement>),
 * keeping the requests.  Caller frees. */
char *av_domain_unplace(const char *xml, gsize len, GError **error);

/* The domain XML @xml with a <uuid> (a new random one after <name> when it
 * has none, so that devices can be claimed for it before libvirt sees it).
 * Stores the UUID in *ret_uuid.  Both caller frees. */
char *av_domain_ensure_uuid(const char *xml, gsize len, char **ret_uuid, GError **error);

/* Moves a domain accelvirt placed (it has <av:placement> and ua-accelvirt-N
 * hostdevs) to @placement, a new placement of the same requests: item i is
 * for alias ua-accelvirt-i, of the same profile and kind.  For restore and
 * migration, it changes host-side facts only, in place: each PCI hostdev's
 * <source><address> (its guest-side <address type='pci'/>, alias, driver
 * and everything else stay), USB hostdevs' vendor and product ids, the
 * <av:placement> node and entries, and, only where <av:placement> says
 * accelvirt wrote them (pinned="yes", numatune="yes"), the cpusets of the
 * <vcpupin>s and <emulatorpin> and the <numatune><memory nodeset=> (removed,
 * with the flag set to "no", when @placement has no node).  Guest NUMA cells
 * accelvirt wrote (cells="yes") stay, each re-pinned to the host node(s)
 * its devices (cell= of the entries) sit on in @placement: its <vcpupin>s
 * on their CPUs (@placement->nodes; AV_ERROR_INVALID_INPUT when a node's
 * CPUs are missing there), its <memnode> on them, <emulatorpin> and
 * <numatune><memory> on the union; unchanged when every cell's devices sit
 * on the nodes its <memnode> names.  The controllers, guest addresses and
 * cliques never change.  mdev hostdevs
 * keep their UUID: the hook creates the mdev at prepare.  The vCPU count,
 * memory, guest addresses and the rest of the guest ABI never change (libvirt
 * refuses such changes at restore and migration).  When nothing changes the
 * document comes back byte for byte.  AV_ERROR_INVALID_INPUT when the domain
 * has no placement or @placement does not line up with its aliases (count,
 * profile, kind).  Caller frees. */
char *av_domain_remap(const char *xml, gsize len, const AvPlacement *placement, GError **error);

/* The placement <av:placement> of @xml records, read back: its node (-1
 * when none; cpus left empty), and one item per entry in alias order with
 * its profile and kind (av:device as vfio-pci), PCI address, mdev UUID or USB
 * bus path and ids (an entry's cell= is checked, not kept: AvPlacedItem
 * has no field for the guest side).  An empty placement (no items) when
 * there is none.
 * AV_ERROR_INVALID_INPUT on a malformed entry.  Caller frees. */
AvPlacement *av_domain_placement(const char *xml, gsize len, GError **error);

/* Validates the accelvirt metadata of @xml against xml/accelvirt-domain.rng
 * (at @schema_path) with libxml2's RelaxNG.  FALSE with a sentence naming
 * the line on a violation. */
gboolean av_domain_validate_metadata(const char *xml, gsize len, const char *schema_path, GError **error);

G_END_DECLS
