# SPDX-License-Identifier: Apache-2.0
# Sourced by scenario-e2e.sh (boot 2, libvirtd up, accelvirt's hook installed) after
# scenario-fpga.sh and before phase V: the guest PCIe and NUMA topology (issue 16) on
# the real kernel, with one nested boot. run-vm.sh's switch: root port 0000:40:05.0 >
# upstream port 0000:46:00.0 > two ports > edu 0000:48:00.0 and 0000:49:00.0 (node 0);
# edu 0000:84:00.0 alone behind root port 0000:80:03.0 (node 1).
# topo-policies/44-topo.json (before 50-rig.json) gives the three to profile rig-p2p
# (vfio-pci, numa none, scrub none). Uses scenario-e2e.sh's fact, now, elapsed, st, $A,
# $V, $R and scenario-accel.sh's dev_of, wait_state.
#   T. 1. this host's view of the three (numa_node, IOMMU group, sysfs path); the
#         policy installed, `policy check`.
#      2. avvm-topo: a q35 domain (2 vCPUs, 256 MiB, ACPI, the rig's kernel with
#         avvm.topology=1) asking for two rig-p2p with p2p="required" and one more,
#         <av:topology guest-numa="mirror"/>: `accelvirt plan FILE` (text and --json)
#         and `rewrite --dry-run` say what they would write (the switch, the cells)
#         and claim nothing.
#      3. `accelvirt define`: the p2p request gets the two behind the switch, the
#         other the node-1 edu; the persistent XML (dumpxml --inactive) has a
#         pcie-expander-bus per cell (<target><node> 0 and 1), a switch (upstream and
#         two downstream ports) under cell 0's, a root port under cell 1's, two
#         <cpu><numa> cells: analysed into results/topo-xml.txt.
#      4. `virsh start`: the hook binds the three to vfio-pci, the nested QEMU holds
#         their groups; QEMU's command line has pxb-pcie with numa_node 0 and 1,
#         x3130-upstream and xio3130-downstream; the nested guest prints its nodes,
#         bridges (PCIe port type) and edus with their numa_node and sysfs path
#         (init.sh avvm.topology=1), then powers off: results/topo-console.log,
#         checked by test-vm.sh (the two behind one upstream port that is no root
#         port, each numa_node the cell of its host node).
#      5. the domain stopped (destroyed if it still runs): release, the worker, all
#         three free; undefine; the profile removed.
echo "=== phase T" >> "$R/hook.log"
tT=$(now)
AVC="$A --connect qemu:///system --state-dir /var/lib/accelvirt --policy-dir /etc/accelvirt/policies"
export ACCELVIRT_WORKER="$(sed -n 's/^ACCELVIRT_WORKER=//p' "$R/env")" ACCELVIRT_LOG_FILE="$R/hook-e2e.log"
C=$(sed -n 's/^CACHE=//p' "$R/env")
TDEVS="0000:48:00.0 0000:49:00.0 0000:84:00.0"
tst() {  # tst: "ADDRESS=STATE/OWNER/PROFILE" of each of $TDEVS in the pool
    for a in $TDEVS; do
        echo "$a=$(dev_of pci "$a" state owner profile | sed 's/[a-z]*=//g; s/ /\//g')"
    done | tr '\n' ' ' | sed 's/ $//'
}
tdrv() {  # tdrv: "ADDRESS=DRIVER" of each of $TDEVS
    for a in $TDEVS; do
        echo "$a=$(basename "$(readlink "/sys/bus/pci/devices/$a/driver" 2>/dev/null)" 2>/dev/null)"
    done | tr '\n' ' ' | sed 's/ $//'
}
tholds() {  # tholds DOMAIN: how many of $TDEVS' /dev/vfio/GROUP its QEMU holds
    qpid=$(cat "/run/libvirt/qemu/$1.pid" 2>/dev/null)
    k=0
    for a in $TDEVS; do
        g=$(basename "$(readlink "/sys/bus/pci/devices/$a/iommu_group")")
        ls -l "/proc/${qpid:-none}/fd" 2>/dev/null | grep -q "/dev/vfio/$g\$" && k=$((k + 1))
    done
    echo "$k"
}
topoxml() {  # topoxml NAME: the nested guest asking for the switch's two and one more
    cat <<XMLEOF
<domain type='qemu'>
  <name>$1</name>
  <metadata>
    <av:accelerators xmlns:av="urn:accelvirt:domain:1">
      <av:request profile="rig-p2p" count="2" p2p="required"/>
      <av:request profile="rig-p2p" count="1"/>
      <av:topology guest-numa="mirror"/>
    </av:accelerators>
  </metadata>
  <memory unit='MiB'>256</memory>
  <vcpu>2</vcpu>
$(rig_boot pc-q35-7.2 avvm.topology=1 "<features><acpi/><apic/></features>")
    <controller type='pci' index='0' model='pcie-root'/>
    <controller type='usb' model='none'/>
    <serial type='file'><source path='/tmp/topo-console.log'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
XMLEOF
}

# 1. this host's view, the profile
for a in $TDEVS; do
    d=/sys/bus/pci/devices/$a
    fact topo_host "$a" numa="$(cat "$d/numa_node" 2>/dev/null)" \
        group="$(ls "$d/iommu_group/devices" 2>/dev/null | tr '\n' ',' | sed 's/,$//')" \
        path="$(readlink -f "$d")"
done
for p in "$R"/topo-policies/*.json; do
    cp "$p" "/etc/accelvirt/policies/$(basename "$p")"
done
chmod 644 /etc/accelvirt/policies/*.json
$AVC policy check > "$R/topo-policy-check.out" 2>&1
fact topo_policy rc=$? "$(grep -c 'rig-p2p' "$R/topo-policy-check.out")"
st > "$R/status-topo-0.json"
fact topo_before "$(tst)" "$(tdrv)"

# 2. plan and rewrite --dry-run: what they would write; nothing claimed
topoxml avvm-topo > "$R/topo.xml"
$AVC plan "$R/topo.xml" > "$R/topo-plan.out" 2> "$R/topo-plan.err"
fact topo_plan rc=$? "$(grep -i 'switch\|cell' "$R/topo-plan.out" | head -n4 | tr '\n' ';')"
$AVC plan --json "$R/topo.xml" > "$R/topo-plan.json" 2> "$R/topo-plan-json.err"
fact topo_plan_json rc=$? "$(python3 -c 'import json,sys
t=json.load(open(sys.argv[1])).get("topology") or {}
print("cells=%s groups=%s" % (",".join("%s:%s" % (c.get("cell"), c.get("host_node")) for c in t.get("cells", [])),
    ",".join("%s:%s:%s" % (g.get("cell"), g.get("host_switch"), "+".join(d.get("address") or "?" for d in g.get("devices", [])))
             for g in t.get("groups", []))))' "$R/topo-plan.json" 2>&1 | tail -n1)"
$AVC rewrite --dry-run "$R/topo.xml" > "$R/topo-rewrite.xml" 2> "$R/topo-rewrite.err"
fact topo_rewrite rc=$? "$(grep -i 'switch\|cell' "$R/topo-rewrite.err" | head -n4 | tr '\n' ';')" \
    expanders="$(grep -c 'model=.pcie-expander-bus.' "$R/topo-rewrite.xml")"
fact topo_after_dry "$(tst)" defined="$($V domstate avvm-topo >/dev/null 2>&1 && echo yes || echo no)"

# 3. define: placed, claimed, the topology in the persistent XML
t0=$(now)
$AVC define --json "$R/topo.xml" > "$R/topo-define.json" 2> "$R/topo-define.err"
fact topo_define rc=$? seconds="$(elapsed "$t0")" "$(python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
print("devices=%s" % ",".join(x.get("address", "?") for x in d.get("devices", [])))' "$R/topo-define.json" 2>&1 | tail -n1)" \
    err="$(head -n1 "$R/topo-define.err")"
fact topo_defined "$(tst)"
$V dumpxml --inactive avvm-topo > "$R/topo-inactive.xml" 2>&1
# each hostdev: its host address, the chain of controllers from its guest bus up to
# pcie-root ("MODEL#INDEX" each), and the <target><node> of the expander bus on it
python3 - "$R/topo-inactive.xml" > "$R/topo-xml.txt" 2>&1 <<'PYEOF'
import sys
import xml.etree.ElementTree as ET
dom = ET.parse(sys.argv[1]).getroot()
ctl = {}
for c in dom.findall("./devices/controller[@type='pci']"):
    a = c.find("address")
    node = c.find("target/node")
    t = c.find("target")
    ctl[int(c.get("index"))] = (c.get("model"), int(a.get("bus"), 16) if a is not None and a.get("bus") else None,
                                node.text if node is not None else None,
                                int(t.get("busNr")) if t is not None and t.get("busNr") else None)
cells = dom.findall("./cpu/numa/cell")
print("cells %d %s" % (len(cells), " ".join("%s:%s:%s" % (c.get("id"), c.get("cpus"), c.get("memory")) for c in cells)))
# each expander bus: its busNr (libvirt writes the one it picks into the definition) and
# the bus numbers the guest needs from there (its own, one per controller below it),
# which must stay below the next expander's busNr (or 256)
def pxb_of(i):
    seen = 0
    while i in ctl and seen < 16:
        if ctl[i][0] == "pcie-expander-bus":
            return i
        i, seen = ctl[i][1], seen + 1
    return None
pxbs = sorted((v[3] if v[3] is not None else -1, i) for i, v in ctl.items() if v[0] == "pcie-expander-bus")
out = []
for k, (nr, i) in enumerate(pxbs):
    need = 1 + sum(1 for j in ctl if j != i and pxb_of(j) == i)
    top = pxbs[k + 1][0] if k + 1 < len(pxbs) else 256
    out.append("%d:node%s:busNr=%d:buses=%d:%s" % (i, ctl[i][2], nr, need, "ok" if nr > 0 and nr + need <= top else "short"))
print("expanders %s" % " ".join(sorted(out)))
print("switch_ports up=%d down=%d" % (sum(v[0] == "pcie-switch-upstream-port" for v in ctl.values()),
                                     sum(v[0] == "pcie-switch-downstream-port" for v in ctl.values())))
for h in dom.findall("./devices/hostdev"):
    s = h.find("source/address")
    g = h.find("address")
    host = "%04x:%02x:%02x.%x" % tuple(int(s.get(k), 16) for k in ("domain", "bus", "slot", "function"))
    chain, node, bus, seen = [], None, int(g.get("bus"), 16) if g is not None else None, 0
    while bus is not None and bus in ctl and seen < 16:
        model, parent, n, _ = ctl[bus]
        chain.append("%s#%d" % (model, bus))
        if model == "pcie-expander-bus" and node is None:
            node = n
        bus, seen = parent, seen + 1
    up = [c for c in chain if c.startswith("pcie-switch-upstream-port#")]
    print("hostdev %s cell=%s up=%s chain=%s" % (host, node, up[0].split("#")[1] if up else "none", ">".join(chain)))
PYEOF
fact topo_xml "$(tr '\n' ';' < "$R/topo-xml.txt")"
fact topo_xml_pin vcpupin="$(grep -c '<vcpupin ' "$R/topo-inactive.xml")" memnode="$(grep -c '<memnode ' "$R/topo-inactive.xml")"

# 4. virsh start: the hook binds the three, the nested guest reports what it sees
rm -f /tmp/topo-console.log
t0=$(now)
$V start avvm-topo > "$R/topo-start.out" 2>&1
fact topo_start rc=$? seconds="$(elapsed "$t0")" "$(tr '\n' ' ' < "$R/topo-start.out" | cut -c1-300)"
fact topo_running "$(tst)" "$(tdrv)" holds="$(tholds avvm-topo)"
$V dumpxml avvm-topo > "$R/topo-live.xml" 2>&1
cp /var/log/libvirt/qemu/avvm-topo.log "$R/topo-qemu.log" 2>/dev/null
fact topo_qemu pxb="$(grep -o '"driver":"pxb-pcie"[^}]*' "$R/topo-qemu.log" | grep -o '"numa_node":[0-9]*' | sed 's/.*://' | sort -u | tr '\n' ',')" \
    up="$(grep -o '"driver":"x3130-upstream"\|x3130-upstream' "$R/topo-qemu.log" | wc -l)" \
    down="$(grep -o '"driver":"xio3130-downstream"\|xio3130-downstream' "$R/topo-qemu.log" | wc -l)"
twait=$(now)
while ! grep -q '^AVVM-TOPO-END' /tmp/topo-console.log 2>/dev/null; do
    test "$(echo "$(now) $twait" | awk '{print ($1 - $2 > 300)}')" = 1 && break
    $V domstate avvm-topo 2>/dev/null | grep -q running || break
    sleep 1
done
fact topo_guest seconds="$(elapsed "$twait")" \
    "$(grep -a '^AVVM-TOPO-\(NODE\|DEV\|END\)' /tmp/topo-console.log 2>/dev/null | tr -d '\r' | cut -d' ' -f1-3 | tr '\n' ' ')"
cp /tmp/topo-console.log "$R/topo-console.log" 2>/dev/null

# 5. stopped (it powers off once it has reported; destroyed if it still runs), released, freed
tw=$(now)
while grep -q '^AVVM-TOPO-END' /tmp/topo-console.log 2>/dev/null && $V domstate avvm-topo 2>/dev/null | grep -q running; do
    test "$(echo "$(now) $tw" | awk '{print ($1 - $2 > 60)}')" = 1 && break
    sleep 0.5
done
how=poweroff
if $V domstate avvm-topo 2>/dev/null | grep -q running; then
    how=destroy
    $V destroy avvm-topo > "$R/topo-destroy.out" 2>&1
fi
fact topo_stop how="$how" state="$($V domstate avvm-topo 2>/dev/null | head -n1)"
for a in $TDEVS; do
    wait_state pci "$a" free 90 > /dev/null
done
fact topo_free seconds="$(elapsed "$tw")" "$(tst)" "$(tdrv)"
st > "$R/status-topo-1-end.json"
$AVC undefine avvm-topo > "$R/topo-undefine.out" 2>&1
fact topo_undefine rc=$? defined="$($V domstate avvm-topo >/dev/null 2>&1 && echo yes || echo no)" "$(tst)"
"$A" journal verify > "$R/journal-verify-topo.txt" 2>&1
fact topo_journal_verify rc=$?
cp /var/lib/accelvirt/journal.jsonl "$R/journal-topo.jsonl" 2>/dev/null
cp /var/log/libvirt/qemu/avvm-topo.log "$R/topo-qemu.log" 2>/dev/null
fact topo_hook_calls $(awk '$1 == "avvm-topo" {print $2 "/" $3}' "$R/hook.log" 2>/dev/null)
rm -f /etc/accelvirt/policies/44-topo.json
fact topo_phase seconds="$(elapsed "$tT")"
unset ACCELVIRT_WORKER ACCELVIRT_LOG_FILE
