#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: `accelvirt rewrite` and `accelvirt plan --defrag` on the
# fake hosts, the golden cases of issue 5.  Each case is an input domain
# tests/place/NAME.in.xml placed with the test policies tests/place/policies
# (A100s numa strict) or tests/place/policies-preferred (A100s numa
# preferred) and compared byte for byte with tests/place/NAME.out.xml;
# AV_TEST_REGENERATE=1 rewrites those instead (read every diff).
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
PL="$AV_TEST_SRCDIR/place"
STRICT="$PL/policies"
PREF="$PL/policies-preferred"
H2="$AV_TEST_HOSTS/two-socket-8gpu"
FPGA="$AV_TEST_HOSTS/fpga-regions"
VGPU="$AV_TEST_HOSTS/vgpu-mdev"
UUID=5eed0000-0000-4000-8000-0000000000

# pgolden NAME FILE: FILE must equal tests/place/NAME byte for byte.
pgolden() {
    exp="$PL/$1"
    if [ "${AV_TEST_REGENERATE:-0}" = 1 ]; then
        cp "$2" "$exp"
        return 0
    fi
    [ -f "$exp" ] || { echo "missing $exp; run with AV_TEST_REGENERATE=1 and read the result"; return 1; }
    diff -u "$exp" "$2"
}

# av HOST POLICY-DIR STATE-DIR ARGS...
av() {
    h=$1 p=$2 s=$3; shift 3
    "$AV" --root "$h" --policy-dir "$p" --state-dir "$s" "$@"
}

# place OUT HOST POLICY-DIR STATE-DIR [rewrite options] NAME: rewrites
# tests/place/NAME.in.xml; stdout in $AV_TMP/OUT.xml, stderr in $AV_TMP/OUT.err,
# the status in $AV_TMP/OUT.rc.  Always returns 0 (assert the status).
place() {
    o=$1 h=$2 p=$3 s=$4; shift 4
    n=$# i=0
    for a in "$@"; do
        i=$((i + 1))
        if [ "$i" -eq "$n" ]; then name=$a; else set -- "$@" "$a"; fi
    done
    shift "$n"
    av "$h" "$p" "$s" rewrite "$@" "$PL/$name.in.xml" >"$AV_TMP/$o.xml" 2>"$AV_TMP/$o.err"
    echo $? >"$AV_TMP/$o.rc"
    return 0
}

# ok OUT: the rewrite OUT succeeded and printed nothing on stderr.
ok() {
    [ "$(cat "$AV_TMP/$1.rc")" = 0 ] || { echo "exit $(cat "$AV_TMP/$1.rc")"; cat "$AV_TMP/$1.err"; return 1; }
    [ ! -s "$AV_TMP/$1.err" ] || { echo "stderr:"; cat "$AV_TMP/$1.err"; return 1; }
}

# failed OUT STATUS PATTERN: the rewrite OUT exited STATUS with one line on
# stderr, "accelvirt: ...PATTERN", and nothing on stdout.
failed() {
    [ "$(cat "$AV_TMP/$1.rc")" = "$2" ] || { echo "exit $(cat "$AV_TMP/$1.rc"), expected $2"; cat "$AV_TMP/$1.err"; return 1; }
    [ "$(wc -l <"$AV_TMP/$1.err")" -eq 1 ] || { echo "not one line:"; cat "$AV_TMP/$1.err"; return 1; }
    grep -q "^accelvirt: .*$3" "$AV_TMP/$1.err" || { echo "no '$3' in:"; cat "$AV_TMP/$1.err"; return 1; }
    [ ! -s "$AV_TMP/$1.xml" ] || { echo "stdout not empty"; return 1; }
}

# xq FILE PYTHON-EXPR: EXPR over the domain XML FILE, with helpers:
#   r             the root element
#   A(xpath, at)  the values of attribute @at of the elements at xpath
#   pl()          the <av:placement> element
#   devs()        the addresses of its <av:device>s
#   hostdevs()    (type, managed, address or uuid, alias) of each <hostdev>
#   ctls(model)   the <controller type='pci'> elements of that model
#   chain(bus)    (model, index, pxb's target node) of each controller from a guest bus up to pcie-root
#   hbus(alias), cell_of(alias)  a hostdev's guest bus, the guest cell of the pcie-expander-bus above it
#   cliques()     {alias: x-nv-gpudirect-clique} of the <qemu:override> devices
xq() {
    python3 - "$1" "$2" <<'PY'
import sys, xml.etree.ElementTree as ET
NS = "{urn:accelvirt:domain:1}"
r = ET.parse(sys.argv[1]).getroot()
def A(xp, at):
    return [e.get(at) for e in r.findall(xp)]
def pl():
    return r.find("metadata/%saccelerators/%splacement" % (NS, NS))
def devs():
    return [d.get("address") for d in pl().findall(NS + "device")]
def hostdevs():
    out = []
    for h in r.findall("devices/hostdev"):
        a = h.find("source/address")
        if h.get("type") == "pci":
            where = "%s:%s:%s.%s" % (a.get("domain")[2:], a.get("bus")[2:], a.get("slot")[2:], a.get("function")[2:])
        elif h.get("type") == "mdev":
            where = a.get("uuid")
        else:
            where = (h.find("source/vendor").get("id"), h.find("source/product").get("id"))
        al = h.find("alias")
        out.append((h.get("type"), h.get("managed"), where, al.get("name") if al is not None else None))
    return out
# issue 16: the guest PCIe topology.
QNS = "{http://libvirt.org/schemas/domain/qemu/1.0}"
def ctls(model):
    return [c for c in r.findall("devices/controller") if c.get("type") == "pci" and c.get("model") == model]
def bus(e):
    a = e.find("address")
    return int(a.get("bus"), 16) if a is not None and a.get("bus") is not None else None
def hbus(alias):
    return [bus(h) for h in r.findall("devices/hostdev") if h.find("alias") is not None and h.find("alias").get("name") == alias][0]
def chain(b):
    # the controllers from guest bus b up to pcie-root: [(model, index, target node or None)]
    out = []
    while b:
        c = [c for c in r.findall("devices/controller") if c.get("type") == "pci" and int(c.get("index")) == b][0]
        t = c.find("target/node")
        out.append((c.get("model"), b, t.text if t is not None else None))
        b = bus(c)
    return out
def cell_of(alias):
    nodes = [x[2] for x in chain(hbus(alias)) if x[0] == "pcie-expander-bus"]
    return nodes[0] if nodes else None
def cliques():
    return {d.get("alias"): p.get("value") for d in r.findall(QNS + "override/" + QNS + "device")
            for p in d.findall(QNS + "frontend/" + QNS + "property") if p.get("name") == "x-nv-gpudirect-clique"}
ok = eval(sys.argv[2])
if not ok:
    print("false: " + sys.argv[2])
    sys.exit(1)
PY
}

# pinned FILE NODE CPUSET VCPUS: every vCPU and the emulator pinned on
# CPUSET, memory strict on NODE, the placement saying it wrote them.
pinned() {
    xq "$1" "A('cputune/vcpupin', 'vcpu') == [str(i) for i in range($4)] and set(A('cputune/vcpupin', 'cpuset')) == {'$3'} and A('cputune/emulatorpin', 'cpuset') == ['$3'] and A('numatune/memory', 'nodeset') == ['$2'] and A('numatune/memory', 'mode') == ['strict'] and pl().get('node') == '$2' and pl().get('pinned') == 'yes' and pl().get('numatune') == 'yes'"
}

# claims STATE: "address owner-uuid" of the claimed devices, sorted.
claims() {
    "$AV" --state-dir "$1" status --no-sync --json |
        python3 -c 'import json,sys; print("\n".join(sorted("%s %s" % (x["address"], x["owner"]["domain_uuid"]) for x in json.load(sys.stdin)["devices"] if x["state"] == "claimed")))'
}

# same_claims STATE EXPECTED: the claims of STATE are EXPECTED ("addr uuid-tail; ...").
same_claims() {
    got=$(claims "$1" | sed "s/ $UUID/ /" | tr '\n' ';' | sed 's/;$//; s/;/; /g')
    [ "$got" = "$2" ] || { echo "claims: '$got', expected '$2'"; return 1; }
}

LV_RNG=/usr/share/libvirt/schemas/domain.rng

# lv_valid FILE: libvirt's installed schema accepts the domain FILE, as
# tests/test-rewrite.c checks its goldens (passes, saying so, without it).
lv_valid() {
    if [ ! -f "$LV_RNG" ] || ! command -v xmllint >/dev/null 2>&1; then
        echo "libvirt's schema or xmllint is not installed: not validated"
        return 0
    fi
    xmllint --noout --relaxng "$LV_RNG" "$1"
}

N0=0-15,32-47
N1=16-31,48-63

# === the 2-socket host, pool all free: 1 and 2 GPUs, strict and preferred ===
FREE="$AV_TMP/free"
av "$H2" "$STRICT" "$FREE" status >/dev/null
cp "$FREE/pool.json" "$AV_TMP/free.pool"
for c in gpu1 gpu2; do
    place "$c-strict" "$H2" "$STRICT" "$FREE" --dry-run "$c"
    check "$c strict: placed, nothing on stderr" ok "$c-strict"
    check "$c strict: matches tests/place/$c-strict.out.xml" pgolden "$c-strict.out.xml" "$AV_TMP/$c-strict.xml"
    place "$c-pref" "$H2" "$PREF" "$FREE" --dry-run "$c"
    check "$c preferred: placed, nothing on stderr" ok "$c-pref"
    check "$c preferred: matches tests/place/$c-preferred.out.xml" pgolden "$c-preferred.out.xml" "$AV_TMP/$c-pref.xml"
done
check "gpu1: best fit, node 1 (2 A100s) before node 0 (4): 0000:ca:00.0, managed='no', alias ua-accelvirt-0" \
    xq "$AV_TMP/gpu1-strict.xml" "devs() == ['0000:ca:00.0'] and hostdevs() == [('pci', 'no', '0000:ca:00.0', 'ua-accelvirt-0')]"
check "gpu1: 8 vCPUs and the emulator pinned on node 1's CPUs, memory strict on node 1" pinned "$AV_TMP/gpu1-strict.xml" 1 "$N1" 8
check "gpu2: both node 1 A100s, aliases -0 and -1" \
    xq "$AV_TMP/gpu2-strict.xml" "devs() == ['0000:ca:00.0', '0000:e3:00.0'] and [h[2:] for h in hostdevs()] == [('0000:ca:00.0', 'ua-accelvirt-0'), ('0000:e3:00.0', 'ua-accelvirt-1')]"
check "gpu2: pinned on node 1" pinned "$AV_TMP/gpu2-strict.xml" 1 "$N1" 8
check "with room on one node, preferred places like strict" \
    eval "cmp '$AV_TMP/gpu1-strict.xml' '$AV_TMP/gpu1-pref.xml' && cmp '$AV_TMP/gpu2-strict.xml' '$AV_TMP/gpu2-pref.xml'"
check "--dry-run reserved nothing" cmp "$FREE/pool.json" "$AV_TMP/free.pool"

# 5 GPUs: no node has 5 A100s.
place gpu5-strict "$H2" "$STRICT" "$FREE" gpu5
check "gpu5 strict: refused, no single NUMA node can hold them (no capacity: exit 6, one line)" \
    failed gpu5-strict 6 "no single NUMA node can hold every device.*node 0 has 4 free, node 1 has 2 free"
check "  ... nothing reserved" cmp "$FREE/pool.json" "$AV_TMP/free.pool"
place gpu5-pref "$H2" "$PREF" "$FREE" --dry-run gpu5
check "gpu5 preferred: placed on node 0, its 4 A100s and one of node 1" \
    xq "$AV_TMP/gpu5-pref.xml" "devs() == ['0000:17:00.0', '0000:31:00.0', '0000:4b:00.0', '0000:65:00.0', '0000:ca:00.0'] and pl().get('node') == '0'"
check "gpu5 preferred: matches tests/place/gpu5-preferred.out.xml" pgolden gpu5-preferred.out.xml "$AV_TMP/gpu5-pref.xml"
check "gpu5 preferred: the off-node device is warned about on stderr" \
    eval "[ \$(cat '$AV_TMP/gpu5-pref.rc') = 0 ] && grep -q \"warning: profile 'gpu-passthrough' has numa preferred but 1 of its 5 devices is on NUMA node 1\" '$AV_TMP/gpu5-pref.err'"

# --dry-run on a state dir that no command has reconciled yet.
place fresh "$H2" "$STRICT" "$AV_TMP/fresh" --dry-run gpu1
check "--dry-run on a new state dir places like on a reconciled one" \
    eval "ok fresh && cmp '$AV_TMP/fresh.xml' '$AV_TMP/gpu1-strict.xml'"

# === errors: one line, a clear message, a non-zero status, nothing reserved ===
cp "$FREE/journal.jsonl" "$AV_TMP/free.journal"
place e-unknown "$H2" "$STRICT" "$FREE" unknown-profile
check "unknown profile: exit 2, names it and the profiles there are" \
    failed e-unknown 2 "unknown profile 'gpu-h200': use one the policy defines, 'gpu-passthrough', 'gpu-consumer'"
place e-count "$H2" "$STRICT" "$FREE" count-too-large
check "count too large: exit 2, 'count 7 is more than the 6 cards'" \
    failed e-count 2 "count 7 is more than the 6 cards of profile 'gpu-passthrough' on this host; ask for at most 6"
place e-vcpus "$H2" "$STRICT" "$FREE" vcpus-too-many
check "40 vCPUs on a node of 32 CPUs: exit 2, says how many fit" \
    failed e-vcpus 2 "40 vCPUs do not fit node [01]'s 32 CPUs; give the domain at most 32 vCPUs"
place e-vcpus-pref "$H2" "$PREF" "$FREE" vcpus-too-many
check "  ... preferred too" failed e-vcpus-pref 2 "40 vCPUs do not fit node [01]'s 32 CPUs"
check "the failed rewrites reserved nothing and journalled nothing" \
    eval "cmp '$FREE/pool.json' '$AV_TMP/free.pool' && cmp '$FREE/journal.jsonl' '$AV_TMP/free.journal'"

# === reserving: claimed for the domain's UUID, with an expiry ===
RES="$AV_TMP/res"
before=$(date +%s)
place res1 "$H2" "$STRICT" "$RES" gpu1
check "rewrite without --dry-run prints the same document as --dry-run" \
    eval "ok res1 && cmp '$AV_TMP/res1.xml' '$AV_TMP/gpu1-strict.xml'"
"$AV" --state-dir "$RES" status --no-sync --json >"$AV_TMP/res1.json"
check "  ... and claims 0000:ca:00.0 for the domain's UUID and name, expiring in an hour" json "$AV_TMP/res1.json" \
    "[(x['address'], x['owner']['domain_uuid'], x['owner']['domain_name'], $before + 3600 <= x['claim_expires'] <= $before + 3600 + 60) for x in d['devices'] if x['state'] != 'free'] == [('0000:ca:00.0', '${UUID}01', 'gpu1', True)]"
place res2 "$H2" "$STRICT" "$RES" gpu1
cp "$RES/pool.json" "$AV_TMP/res.pool"
check "the same rewrite again: the same document (its own claim counts as free)" \
    eval "ok res2 && cmp '$AV_TMP/res1.xml' '$AV_TMP/res2.xml'"
check "  ... and still one claim" same_claims "$RES" "0000:ca:00.0 01"
place res3 "$H2" "$STRICT" "$RES" --dry-run gpu1
check "--dry-run with the domain's own claim: the same document, pool untouched" \
    eval "ok res3 && cmp '$AV_TMP/res1.xml' '$AV_TMP/res3.xml' && cmp '$RES/pool.json' '$AV_TMP/res.pool'"
av "$H2" "$STRICT" "$RES" rewrite --dry-run "$AV_TMP/res1.xml" >"$AV_TMP/res4.xml" 2>"$AV_TMP/res4.err"
check "rewriting the placed document gives it back byte for byte (idempotent)" \
    eval "[ ! -s '$AV_TMP/res4.err' ] && cmp '$AV_TMP/res1.xml' '$AV_TMP/res4.xml'"
av "$H2" "$STRICT" "$RES" rewrite --claim-ttl 0 - <"$PL/hold-a.in.xml" >"$AV_TMP/res5.xml" 2>&1
"$AV" --state-dir "$RES" status --no-sync --json >"$AV_TMP/res5.json"
check "rewrite - reads stdin; --claim-ttl 0 claims with no expiry" json "$AV_TMP/res5.json" \
    "[(x['address'], x['owner']['domain_uuid'], x['claim_expires'] in (0, None)) for x in d['devices'] if x['state'] == 'claimed' and x['owner']['domain_name'] == 'hold-a'] == [('0000:e3:00.0', '${UUID}10', True)]"

# === a full node forcing the other node ===
FULL="$AV_TMP/full"
place full-a "$H2" "$STRICT" "$FULL" hold-a
place full-c "$H2" "$STRICT" "$FULL" hold-c
check "two domains reserve node 1's A100s, one each" \
    eval "ok full-a && ok full-c && same_claims '$FULL' '0000:ca:00.0 10; 0000:e3:00.0 12'"
cp "$FULL/pool.json" "$AV_TMP/full.pool"
for c in gpu1 gpu2; do
    place "$c-full-strict" "$H2" "$STRICT" "$FULL" --dry-run "$c"
    check "$c strict with node 1 full: placed on node 0" ok "$c-full-strict"
    check "  ... matches tests/place/$c-node1-full.out.xml" pgolden "$c-node1-full.out.xml" "$AV_TMP/$c-full-strict.xml"
    place "$c-full-pref" "$H2" "$PREF" "$FULL" --dry-run "$c"
    check "$c preferred with node 1 full: the same, no warning (all on node 0)" \
        eval "ok $c-full-pref && cmp '$AV_TMP/$c-full-strict.xml' '$AV_TMP/$c-full-pref.xml'"
done
check "gpu1 with node 1 full: 0000:17:00.0, pinned on node 0" \
    eval "xq '$AV_TMP/gpu1-full-strict.xml' \"devs() == ['0000:17:00.0']\" && pinned '$AV_TMP/gpu1-full-strict.xml' 0 '$N0' 8"
check "gpu2 with node 1 full: 0000:17 and 0000:31, pinned on node 0" \
    eval "xq '$AV_TMP/gpu2-full-strict.xml' \"devs() == ['0000:17:00.0', '0000:31:00.0']\" && pinned '$AV_TMP/gpu2-full-strict.xml' 0 '$N0' 8"

# Re-placing a placed domain whose device is taken: only what accelvirt
# wrote moves; the user's NIC hostdev and <shares> stay.
place replace "$H2" "$STRICT" "$FULL" --dry-run replace
check "re-placing a domain placed on a now taken GPU: placed, nothing on stderr" ok replace
check "  ... matches tests/place/replace.out.xml" pgolden replace.out.xml "$AV_TMP/replace.xml"
check "  ... the accelvirt hostdev moved to 0000:17:00.0, the user's NIC hostdev kept, managed='yes'" \
    xq "$AV_TMP/replace.xml" "hostdevs() == [('pci', 'yes', '0000:02:00.1', 'ua-user-nic'), ('pci', 'no', '0000:17:00.0', 'ua-accelvirt-0')] and devs() == ['0000:17:00.0']"
check "  ... re-pinned on node 0, the user's <shares> kept" \
    eval "pinned '$AV_TMP/replace.xml' 0 '$N0' 8 && xq '$AV_TMP/replace.xml' \"r.findtext('cputune/shares') == '2048'\""
av "$H2" "$STRICT" "$FULL" rewrite --dry-run "$AV_TMP/replace.xml" >"$AV_TMP/replace2.xml" 2>&1
check "  ... and rewriting that again changes nothing" cmp "$AV_TMP/replace.xml" "$AV_TMP/replace2.xml"
check "  ... the dry runs reserved nothing" cmp "$FULL/pool.json" "$AV_TMP/full.pool"

# Node 1 with one A100 held, node 0 with three: one free on each node.
SPLIT="$AV_TMP/split"
place split-a "$H2" "$STRICT" "$SPLIT" hold-a
place split-b "$H2" "$STRICT" "$SPLIT" hold-b
check "hold-a takes 0000:ca, hold-b's 3 A100s go to node 0 (node 1 cannot hold them)" \
    eval "ok split-a && ok split-b && same_claims '$SPLIT' '0000:17:00.0 11; 0000:31:00.0 11; 0000:4b:00.0 11; 0000:ca:00.0 10'"
cp "$SPLIT/pool.json" "$AV_TMP/split.pool"
place split-strict "$H2" "$STRICT" "$SPLIT" gpu2
check "gpu2 strict with one free A100 on each node: refused, 'no single NUMA node' (no capacity: exit 6)" \
    failed split-strict 6 "no single NUMA node can hold every device this domain needs there (2 of 'gpu-passthrough'; numa strict): node 0 has 1 free, node 1 has 1 free"
check "  ... nothing reserved" cmp "$SPLIT/pool.json" "$AV_TMP/split.pool"
place split-pref "$H2" "$PREF" "$SPLIT" --dry-run gpu2
check "gpu2 preferred: both free A100s, one off the domain's node" \
    xq "$AV_TMP/split-pref.xml" "devs() == ['0000:65:00.0', '0000:e3:00.0'] and pl().get('node') in ('0', '1')"
check "  ... matches tests/place/gpu2-split-preferred.out.xml" pgolden gpu2-split-preferred.out.xml "$AV_TMP/split-pref.xml"
check "  ... spanning both nodes: two guest NUMA cells, each GPU under the pxb of its node's cell (issue 16), libvirt's schema accepts it" \
    eval "xq '$AV_TMP/split-pref.xml' \"A('cpu/numa/cell', 'cpus') == ['0-3', '4-7'] and (cell_of('ua-accelvirt-0'), cell_of('ua-accelvirt-1')) == ('0', '1')\" && lv_valid '$AV_TMP/split-pref.xml'"
check "  ... with a warning on stderr naming the off-node device" \
    eval "[ \$(cat '$AV_TMP/split-pref.rc') = 0 ] && grep -q \"warning: profile 'gpu-passthrough' has numa preferred but 1 of its 2 devices is on NUMA node\" '$AV_TMP/split-pref.err'"
place split-gpu5 "$H2" "$PREF" "$SPLIT" gpu5
check "gpu5 preferred with 2 of the 6 A100s free: refused, naming what holds the rest (no capacity: exit 6, one line)" \
    failed split-gpu5 6 "not enough free cards of profile 'gpu-passthrough': 2 of 6 free, 5 wanted (devices not free: 4 claimed)"
check "  ... nothing reserved" cmp "$SPLIT/pool.json" "$AV_TMP/split.pool"

# === hide_hypervisor, USB stick, a domain Nova wrote ===
place hide "$H2" "$STRICT" "$FREE" --dry-run hide
check "hide_hypervisor: placed, matches tests/place/hide.out.xml" \
    eval "ok hide && pgolden hide.out.xml '$AV_TMP/hide.xml'"
check "  ... <kvm><hidden state='on'/>, hyperv vendor_id 'accelvirt', the user's features kept, placement says it wrote both" \
    xq "$AV_TMP/hide.xml" "A('features/kvm/hidden', 'state') == ['on'] and A('features/hyperv/vendor_id', 'state') == ['on'] and A('features/hyperv/vendor_id', 'value') == ['accelvirt'] and r.find('features/acpi') is not None and r.find('features/apic') is not None and pl().get('hidden') == 'yes' and pl().get('vendor-id') == 'yes' and devs() == ['0000:98:00.0']"
place usb "$H2" "$STRICT" "$FREE" --dry-run usb-stick
check "USB stick: placed, matches tests/place/usb-stick.out.xml" \
    eval "ok usb && pgolden usb-stick.out.xml '$AV_TMP/usb.xml'"
check "  ... a USB hostdev with the stick's ids, no pinning (numa none)" \
    xq "$AV_TMP/usb.xml" "hostdevs() == [('usb', 'no', ('0x03e7', '0x2485'), 'ua-accelvirt-0')] and [e.get('bus-path') for e in pl().findall(NS + 'usb')] == ['1-1.2'] and r.find('cputune') is None and r.find('numatune') is None and pl().get('pinned') == 'no' and pl().get('node') is None"
place nova "$H2" "$STRICT" "$FREE" nova
check "a domain Nova wrote comes back byte for byte, reserving nothing" \
    eval "ok nova && cmp '$AV_TMP/nova.xml' '$AV_TEST_SRCDIR/data/domains/nova-instance.xml' && cmp '$PL/nova.in.xml' '$AV_TEST_SRCDIR/data/domains/nova-instance.xml' && cmp '$FREE/pool.json' '$AV_TMP/free.pool'"

# === mdev on the vGPU host ===
MDEV="$AV_TMP/mdev"
av "$VGPU" "$STRICT" "$MDEV" status >/dev/null
cp "$MDEV/pool.json" "$AV_TMP/mdev.pool"
place vgpu "$VGPU" "$STRICT" "$MDEV" vgpu
check "vGPU: placed, nothing on stderr" ok vgpu
check "  ... an mdev hostdev (model vfio-pci) whose fresh UUID is the placement's <av:mdev>" \
    xq "$AV_TMP/vgpu.xml" "len(hostdevs()) == 1 and hostdevs()[0][0] == 'mdev' and A('devices/hostdev', 'model') == ['vfio-pci'] and [e.get('uuid') for e in pl().findall('{urn:accelvirt:domain:1}mdev')] == [hostdevs()[0][2]] and __import__('re').fullmatch('[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}', hostdevs()[0][2]) is not None and [e.get('profile') for e in pl().findall('{urn:accelvirt:domain:1}mdev')] == ['vgpu-a10-4q']"
check "  ... on node 0, whose A10 already runs nvidia-590 (the profile's type), pinned there" \
    pinned "$AV_TMP/vgpu.xml" 0 0-23,48-71 4
sed 's/uuid="[0-9a-f]\{8\}-[0-9a-f]\{4\}-[0-9a-f]\{4\}-[0-9a-f]\{4\}-[0-9a-f]\{12\}"/uuid="MDEV-UUID"/g' \
    "$AV_TMP/vgpu.xml" >"$AV_TMP/vgpu.masked.xml"
check "  ... matches tests/place/vgpu.out.xml (mdev UUIDs masked)" pgolden vgpu.out.xml "$AV_TMP/vgpu.masked.xml"
check "  ... the mdev is not claimed at rewrite (the hook creates and pools it at prepare)" \
    json "$MDEV/pool.json" "all(x['state'] == 'free' and x['owner'] is None for x in d['devices']) and not any(x['kind'] == 'mdev' for x in d['devices'])"
av "$VGPU" "$STRICT" "$MDEV" rewrite --dry-run "$AV_TMP/vgpu.xml" >"$AV_TMP/vgpu2.xml" 2>&1
check "  ... rewriting the placed vGPU domain keeps its mdev UUID (idempotent)" cmp "$AV_TMP/vgpu.xml" "$AV_TMP/vgpu2.xml"

# === FPGA functions: packing, whole cards, defragmentation ===
# 3 cards x 3 regions (PFs) x 4 functions (VFs): 3b and 5e on node 0, af on
# node 1.  fpga-lone (numa="any": no node) lands on the first card, 3b;
# fpga-hold (numa strict) on node 1, the node with fewer free functions.
FS="$AV_TMP/fpga"
av "$FPGA" "$STRICT" "$FS" status >/dev/null
place f-card "$FPGA" "$STRICT" "$FS" --dry-run fpga-card
check "a whole-card request on a free pool takes the 12 functions of card af (node 1), every alias distinct" \
    eval "ok f-card && xq '$AV_TMP/f-card.xml' \"devs() == ['0000:af:%02x.%d' % (s, f) for s in (1, 2, 3) for f in range(4)] and len(set(h[3] for h in hostdevs())) == 12 and pl().get('node') == '1'\""
place f-lone "$FPGA" "$STRICT" "$FS" fpga-lone
check "one function with numa='any': the first card, 0000:3b:01.0, no node, no pinning" \
    eval "ok f-lone && xq '$AV_TMP/f-lone.xml' \"devs() == ['0000:3b:01.0'] and pl().get('node') is None and pl().get('pinned') == 'no' and r.find('cputune') is None\""
place f-hold "$FPGA" "$STRICT" "$FS" fpga-hold
check "two functions, numa strict: node 1 (fewer free), af's first region" \
    eval "ok f-hold && xq '$AV_TMP/f-hold.xml' \"devs() == ['0000:af:01.0', '0000:af:01.1'] and pl().get('node') == '1'\" && same_claims '$FS' '0000:3b:01.0 53; 0000:af:01.0 50; 0000:af:01.1 50'"
cp "$FS/pool.json" "$AV_TMP/fpga.pool"
place f-fn "$FPGA" "$STRICT" "$FS" --dry-run fpga-function
check "3 functions: the partly used region af:01 filled first, then the next region of the same card" \
    eval "ok f-fn && xq '$AV_TMP/f-fn.xml' \"devs() == ['0000:af:01.2', '0000:af:01.3', '0000:af:02.0'] and pl().get('node') == '1'\" && pinned '$AV_TMP/f-fn.xml' 1 8-15 4"
check "  ... matches tests/place/fpga-function.out.xml" pgolden fpga-function.out.xml "$AV_TMP/f-fn.xml"
check "  ... the VFs as managed='no' PCI hostdevs" \
    xq "$AV_TMP/f-fn.xml" "[h[:2] for h in hostdevs()] == [('pci', 'no')] * 3"
place f-card2 "$FPGA" "$STRICT" "$FS" --dry-run fpga-card
check "a whole card now: 5e, skipping 3b (one function held) and af (two held)" \
    eval "ok f-card2 && xq '$AV_TMP/f-card2.xml' \"devs() == ['0000:5e:%02x.%d' % (s, f) for s in (1, 2, 3) for f in range(4)] and pl().get('node') == '0'\" && pinned '$AV_TMP/f-card2.xml' 0 0-7 4"
check "  ... matches tests/place/fpga-card.out.xml" pgolden fpga-card.out.xml "$AV_TMP/f-card2.xml"
check "  ... the dry runs reserved nothing" cmp "$FS/pool.json" "$AV_TMP/fpga.pool"

av "$FPGA" "$STRICT" "$FS" plan --defrag >"$AV_TMP/defrag.txt" 2>&1
check "plan --defrag table matches tests/place/defrag.out.txt" pgolden defrag.out.txt "$AV_TMP/defrag.txt"
av "$FPGA" "$STRICT" "$FS" --json plan --defrag >"$AV_TMP/defrag.json" 2>&1
check "plan --defrag --json: 3 cards of fpga-function, 1 free, 2 partly used" json "$AV_TMP/defrag.json" \
    "[(p['profile'], p['granularity'], p['cards'], p['cards_free'], p['cards_partly_used'], 0 < p['fragmentation'] < 1) for p in d['profiles']] == [('fpga-function', 'function', 3, 1, 2, True)]"
check "  ... one move: fpga-lone's 3b:01.0 into af's region, freeing card 3b" json "$AV_TMP/defrag.json" \
    "[(m['domain'], m['from'], m['to'], m['frees_card']) for m in d['moves']] == [('${UUID}53', '0000:3b:01.0', '0000:af:01.2', '0000:3b:00')] and d['moves'][0]['device'].endswith('/vf0')"
check "  ... plan reserved nothing" cmp "$FS/pool.json" "$AV_TMP/fpga.pool"

# === SR-IOV: VFs made for a placement (issue 13) ===
# sriov-fpga-qat, copied: the QAT PF 0000:6b:00.0 offers 16 VFs (0x4941,
# sriov_vf_device), 4 made; the profile qat-vf (policies-sriov) makes VFs
# on demand.
QH="$AV_TMP/qat-host"
QS="$AV_TMP/qat"
SRIOV="$PL/policies-sriov"
cp -a "$AV_TEST_HOSTS/sriov-fpga-qat" "$QH"
numvfs() { cat "$QH/sys/bus/pci/devices/0000:6b:00.0/sriov_numvfs"; }
av "$QH" "$SRIOV" "$QS" status >/dev/null
place q-busy "$QH" "$SRIOV" "$QS" qat6
check "6 VFs asked while the VFs are on their host driver: no count change, refused naming the VF, sriov_numvfs still 4" \
    eval "failed q-busy 2 'no VF could be made: cannot change the VF count of PF .0000:6b:00.0. .*its VF .0000:6b:00.1. is on the host driver 4xxxvf' && [ \"\$(numvfs)\" = 4 ] && [ ! -e '$QH/sys/.accelvirt-fake-kernel.writes' ]"
# The VFs on no driver (idle) from here: their count may change.
for f in 1 2 3 4; do
    rm -f "$QH/sys/bus/pci/devices/0000:6b:00.$f/driver" "$QH"/sys/bus/pci/drivers/*/0000:6b:00.$f
done
place q-dry "$QH" "$SRIOV" "$QS" --dry-run qat6
check "dry run, 6 VFs asked of 4: says what a real run would write, and writes nothing" \
    eval "[ \"\$(numvfs)\" = 4 ] && [ ! -e '$QH/sys/.accelvirt-fake-kernel.writes' ] && grep -q '^accelvirt: dry run: a real run would make VFs for profile .qat-vf.: sriov_numvfs of PF 0000:6b:00.0 from 4 to 6$' '$AV_TMP/q-dry.err'"
place q6 "$QH" "$SRIOV" "$QS" qat6
check "6 VFs asked, 4 free: the PF goes through 0 to 6 VFs, all six placed and claimed" \
    eval "ok q6 && [ \"\$(numvfs)\" = 6 ] && xq '$AV_TMP/q6.xml' \"devs() == ['0000:6b:00.%d' % i for i in range(1, 7)] and [h[:2] for h in hostdevs()] == [('pci', 'no')] * 6\" && [ \"\$(claims '$QS' | wc -l)\" = 6 ]"
check "  ... through the kernel ops: sriov_drivers_autoprobe 0, sriov_numvfs 0, then 6" \
    eval "grep -o 'devices/0000:6b:00.0/sriov_[a-z_]* [0-9]*' '$QH/sys/.accelvirt-fake-kernel.writes' | tr '\n' ';' | grep -qx 'devices/0000:6b:00.0/sriov_drivers_autoprobe 0;devices/0000:6b:00.0/sriov_numvfs 0;devices/0000:6b:00.0/sriov_numvfs 6;'"
check "  ... journalled: vfs-set of PF 0000:6b:00.0 from 4 to 6, by define, for qat-vf" \
    eval "grep '\"event\":\"vfs-set\"' '$QS/journal.jsonl' >'$AV_TMP/vfs-set.json' && json '$AV_TMP/vfs-set.json' \"(d['pf'], d['from'], d['to'], d['by'], d['profile']) == ('0000:6b:00.0', 4, 6, \\\"define of domain 'qat6' (${UUID}96)\\\", 'qat-vf')\""
check "  ... each VF placed with its PF and index (av:device pf= vf=)" \
    xq "$AV_TMP/q6.xml" "[(d.get('pf'), d.get('vf')) for d in pl().findall(NS + 'device')] == [('0000:6b:00.0', str(i)) for i in range(6)]"
av "$QH" "$SRIOV" "$QS" --json status >"$AV_TMP/q-status.json"
check "  ... status: each VF with its PF and index; the PF with 6 of 16 VFs, made on demand by qat-vf" json "$AV_TMP/q-status.json" \
    "[x['vf'] for x in d['devices']] == [{'pf': '0000:6b:00.0', 'index': i} for i in range(6)] and d['sriov_pfs'] == [{'address': '0000:6b:00.0', 'total_vfs': 16, 'num_vfs': 6, 'made_by': 'qat-vf', 'vfs': 'on-demand', 'shrink': True}]"
cp "$QS/pool.json" "$AV_TMP/qat.pool"
place q1 "$QH" "$SRIOV" "$QS" qat1
check "one VF more while all six are claimed: refused in one line saying why no VF was made (no capacity: exit 6), nothing changed" \
    eval "failed q1 6 'not enough free devices of profile .qat-vf.*; and no VF could be made: cannot change the VF count of PF .0000:6b:00.0. .*is claimed' && [ \"\$(numvfs)\" = 6 ] && cmp '$QS/pool.json' '$AV_TMP/qat.pool'"
QH2="$AV_TMP/qat-host2"
cp -a "$AV_TEST_HOSTS/sriov-fpga-qat" "$QH2"
rm "$QH2/sys/bus/pci/devices/0000:6b:00.0/driver" "$QH2/sys/bus/pci/drivers/4xxx/0000:6b:00.0"
place q-nodrv "$QH2" "$SRIOV" "$AV_TMP/qat2" qat6
check "a PF without its host driver gets no VF: refused in one line saying so, sriov_numvfs still 4" \
    eval "failed q-nodrv 2 'no VF could be made: accelvirt makes no VF on PF .0000:6b:00.0.: it is on no driver' && [ \"\$(cat '$QH2/sys/bus/pci/devices/0000:6b:00.0/sriov_numvfs')\" = 4 ]"

# issue 14: room to grow.  A domain with only <av:hotplug slots="2"/> gets two
# empty root ports and nothing placed, claimed or scanned.
HP="$AV_TMP/hotplug-state"
sed -e 's|<av:request[^>]*/>|<av:hotplug slots="2"/>|' "$PL/hold-a.in.xml" >"$AV_TMP/hotplug.in.xml"
av "$H2" "$STRICT" "$HP" rewrite "$AV_TMP/hotplug.in.xml" >"$AV_TMP/hotplug.xml" 2>"$AV_TMP/hotplug.err"
hotplug_only_ok() {
    [ ! -s "$AV_TMP/hotplug.err" ] || return 1
    [ "$(grep -c 'model="pcie-root-port"' "$AV_TMP/hotplug.xml")" = 2 ] || return 1
    grep -q 'ua-accelvirt-hotplug1' "$AV_TMP/hotplug.xml" || return 1
    ! grep -q '<hostdev' "$AV_TMP/hotplug.xml" || return 1
    [ -z "$(claims "$HP")" ]
}
check "a domain asking only for hot-plug slots: two empty pcie-root-ports, nothing claimed" hotplug_only_ok
sed -e 's|<av:request[^>]*/>|<av:hotplug slots="0"/>|' "$PL/hold-a.in.xml" >"$AV_TMP/hotplug0.in.xml"
check "<av:hotplug slots=\"0\"/>: refused in one line" \
    eval "! av '$H2' '$STRICT' '$HP' rewrite '$AV_TMP/hotplug0.in.xml' >'$AV_TMP/hp0.out' 2>'$AV_TMP/hp0.err' && [ \"\$(wc -l <'$AV_TMP/hp0.err')\" = 1 ] && grep -q 'from 1 to 16' '$AV_TMP/hp0.err'"


# === issue 16: PCIe switches, guest NUMA cells, GPUDirect cliques ===
# The switches host (tests/data/mkhosts.py, switches()): A100s behind switch
# 0000:11:00.0 (13, 14) and 0000:21:00.0 (23, 24, and 27 behind a nested
# switch) on node 0 (CPUs 0-7), behind switch 0000:91:00.0 (93, 94) on node 1
# (CPUs 8-15), and 0000:a1:00.0 alone under root port 0000:a0:01.0 on node
# 1.  policies-switches: gpu-p2p (every A100 but a1, pack), gpu-lone (a1),
# both numa none, so that one domain may span the nodes.
SW="$AV_TEST_HOSTS/switches"
SWP="$PL/policies-switches"
SWS="$AV_TMP/switches"
# refused OUT STATUS PATTERN: as failed, and the state dir $SWS as it was.
refused() {
    failed "$@" && cmp "$SWS/pool.json" "$AV_TMP/sw.pool" && cmp "$SWS/journal.jsonl" "$AV_TMP/sw.journal"
}

av "$SW" "$SWP" "$SWS" status >/dev/null
cp "$SWS/pool.json" "$AV_TMP/sw.pool"
cp "$SWS/journal.jsonl" "$AV_TMP/sw.journal"

# topo3: 2 GPUs p2p="required" and the lone GPU of node 1.
place topo3 "$SW" "$SWP" "$SWS" --dry-run topo3
check "topo3 (2 GPUs p2p required, 1 lone GPU): placed, exit 0" eval "[ \$(cat '$AV_TMP/topo3.rc') = 0 ]"
check "  ... matches tests/place/topo3.out.xml" pgolden topo3.out.xml "$AV_TMP/topo3.xml"
check "  ... libvirt's schema accepts it" lv_valid "$AV_TMP/topo3.xml"
check "  ... the p2p GPUs behind one host switch (13, 14 behind 0000:11:00.0), then 0000:a1:00.0" \
    xq "$AV_TMP/topo3.xml" "devs() == ['0000:13:00.0', '0000:14:00.0', '0000:a1:00.0']"
check "  ... one emulated switch: both behind downstream ports of one upstream port, under a root port under the pxb of cell 0" \
    xq "$AV_TMP/topo3.xml" "[x[0] for x in chain(hbus('ua-accelvirt-0'))] == ['pcie-switch-downstream-port', 'pcie-switch-upstream-port', 'pcie-root-port', 'pcie-expander-bus'] and chain(hbus('ua-accelvirt-0'))[1:] == chain(hbus('ua-accelvirt-1'))[1:] and hbus('ua-accelvirt-0') != hbus('ua-accelvirt-1') and len(ctls('pcie-switch-upstream-port')) == 1 and len(ctls('pcie-switch-downstream-port')) == 2"
check "  ... the lone GPU on a root port of its own under the pxb of cell 1; pxbs for cells 0 and 1 only" \
    xq "$AV_TMP/topo3.xml" "[x[0] for x in chain(hbus('ua-accelvirt-2'))] == ['pcie-root-port', 'pcie-expander-bus'] and (cell_of('ua-accelvirt-0'), cell_of('ua-accelvirt-1'), cell_of('ua-accelvirt-2')) == ('0', '0', '1') and sorted(c.findtext('target/node') for c in ctls('pcie-expander-bus')) == ['0', '1']"
check "  ... two guest cells (vCPUs 0-1 and 2-3, 8 GiB each), pinned to host nodes 0 (CPUs 0-7) and 1 (8-15), memory strict per cell" \
    xq "$AV_TMP/topo3.xml" "A('cpu/numa/cell', 'id') == ['0', '1'] and A('cpu/numa/cell', 'cpus') == ['0-1', '2-3'] and [int(m) * {'KiB': 1, None: 1}[u] for m, u in zip(A('cpu/numa/cell', 'memory'), A('cpu/numa/cell', 'unit'))] == [8388608, 8388608] and A('cputune/vcpupin', 'cpuset') == ['0-7', '0-7', '8-15', '8-15'] and [(m.get('cellid'), m.get('nodeset'), m.get('mode')) for m in r.findall('numatune/memnode')] == [('0', '0', 'strict'), ('1', '1', 'strict')]"
check "  ... the NVIDIA GPUs behind one host switch share x-nv-gpudirect-clique 0 (qemu:override); the lone one has none" \
    xq "$AV_TMP/topo3.xml" "cliques() == {'ua-accelvirt-0': '0', 'ua-accelvirt-1': '0'}"
check "  ... stderr says what it mirrors: the cells, the switch with its clique, the lone root port" \
    eval "grep -q '^accelvirt: guest NUMA: cell 0 = host node 0 (vCPUs 0-1, 8192 MiB), cell 1 = host node 1 (vCPUs 2-3, 8192 MiB)$' '$AV_TMP/topo3.err' && grep -q '^accelvirt: guest switch under cell 0 mirrors host switch 0000:11:00.0: ua-accelvirt-0 (0000:13:00.0), ua-accelvirt-1 (0000:14:00.0); x-nv-gpudirect-clique 0$' '$AV_TMP/topo3.err' && grep -q '^accelvirt: guest root port under cell 1: ua-accelvirt-2 (0000:a1:00.0)$' '$AV_TMP/topo3.err' && [ \$(wc -l <'$AV_TMP/topo3.err') = 3 ]"
check "  ... reserved nothing" eval "cmp '$SWS/pool.json' '$AV_TMP/sw.pool' && cmp '$SWS/journal.jsonl' '$AV_TMP/sw.journal'"
av "$SW" "$SWP" "$SWS" rewrite --dry-run "$AV_TMP/topo3.xml" >"$AV_TMP/topo3-again.xml" 2>/dev/null
check "  ... rewriting the placed document gives it back byte for byte" cmp "$AV_TMP/topo3.xml" "$AV_TMP/topo3-again.xml"

# p2p="required" with 3: only switch 0000:21:00.0 holds 3 (its nested switch counts as it).
place p2p3 "$SW" "$SWP" "$SWS" --dry-run p2p3
check "p2p required, 3 GPUs: all behind host switch 0000:21:00.0 (23, 24, and 27 behind its nested switch)" \
    eval "[ \$(cat '$AV_TMP/p2p3.rc') = 0 ] && xq '$AV_TMP/p2p3.xml' \"devs() == ['0000:23:00.0', '0000:24:00.0', '0000:27:00.0']\""
check "  ... one emulated switch of 3 downstream ports on pcie-root (one host node: no cells), one clique" \
    xq "$AV_TMP/p2p3.xml" "len(ctls('pcie-switch-downstream-port')) == 3 and not ctls('pcie-expander-bus') and r.find('cpu/numa') is None and [x[0] for x in chain(hbus('ua-accelvirt-2'))] == ['pcie-switch-downstream-port', 'pcie-switch-upstream-port', 'pcie-root-port'] and cliques() == {'ua-accelvirt-%d' % i: '0' for i in range(3)}"
check "  ... matches tests/place/p2p3.out.xml, which libvirt's schema accepts" \
    eval "pgolden p2p3.out.xml '$AV_TMP/p2p3.xml' && lv_valid '$AV_TMP/p2p3.xml'"
"$AV" --root "$SW" --policy-dir "$SWP" --state-dir "$SWS" --json plan "$PL/nop2p3.in.xml" >"$AV_TMP/nop2p3.json" 2>&1
check "without p2p the same 3 GPUs are not all behind one switch (pack by address)" json "$AV_TMP/nop2p3.json" \
    "len(d['devices']) == 3 and len(set(x['switch'] for x in d['devices'])) > 1"

# p2p="required" that no switch can hold: refused, nothing reserved.
place p2p4 "$SW" "$SWP" "$SWS" p2p4
P2P4_WHY="no PCIe switch of this host has 4 free cards of profile 'gpu-p2p' (switch 0000:11:00.0 has 2 free, switch 0000:21:00.0 has 3 free, switch 0000:91:00.0 has 2 free)"
check "p2p required, 4 GPUs: no switch has 4: refused in one line naming what each switch has free (no capacity: exit 6), nothing reserved" \
    refused p2p4 6 "$P2P4_WHY; free some, or ask for p2p='preferred'\$"
place p2p4p "$SW" "$SWP" "$SWS" --dry-run p2p4-preferred
check "p2p preferred, 4 GPUs: placed anyway, with a warning that they could not sit behind one switch" \
    eval "[ \$(cat '$AV_TMP/p2p4p.rc') = 0 ] && grep -qF \"accelvirt: warning: the 4 cards of 'gpu-p2p' could not sit behind one PCIe switch: $P2P4_WHY\" '$AV_TMP/p2p4p.err' && lv_valid '$AV_TMP/p2p4p.xml'"
check "  ... two by two behind switches 0000:11:00.0 and 0000:21:00.0: two emulated switches, cliques 0 and 1" \
    xq "$AV_TMP/p2p4p.xml" "devs() == ['0000:13:00.0', '0000:14:00.0', '0000:23:00.0', '0000:24:00.0'] and len(ctls('pcie-switch-upstream-port')) == 2 and cliques() == {'ua-accelvirt-0': '0', 'ua-accelvirt-1': '0', 'ua-accelvirt-2': '1', 'ua-accelvirt-3': '1'} and chain(hbus('ua-accelvirt-0'))[1] != chain(hbus('ua-accelvirt-2'))[1]"

# plan FILE: what rewrite would write, reserving nothing.
plan_topo3() {
    "$AV" --root "$SW" --policy-dir "$SWP" --state-dir "$SWS" plan "$PL/topo3.in.xml" >"$AV_TMP/topo3.plan.txt" 2>"$AV_TMP/topo3.plan.err"
}
check "plan FILE: exit 0, nothing on stderr, the state dir as it was" \
    eval "state_unchanged '$SWS' plan_topo3 && [ ! -s '$AV_TMP/topo3.plan.err' ]"
check "  ... matches tests/place/topo3.plan.txt (per device alias, host address, node, switch or root port; pinning; topology)" \
    pgolden topo3.plan.txt "$AV_TMP/topo3.plan.txt"
check "  ... plan of the placed document says the same" \
    eval "'$AV' --root '$SW' --policy-dir '$SWP' --state-dir '$SWS' plan - <'$AV_TMP/topo3.xml' | cmp - '$AV_TMP/topo3.plan.txt'"
"$AV" --root "$SW" --policy-dir "$SWP" --state-dir "$SWS" --json plan "$PL/topo3.in.xml" >"$AV_TMP/topo3.plan.json" 2>&1
check "plan --json: each device with its alias, host switch or root port and GPUDirect fact" json "$AV_TMP/topo3.plan.json" \
    "[(x['alias'], x['address'], x['numa_node'], x['switch'], x['root_port'], x['gpudirect']) for x in d['devices']] == [('ua-accelvirt-0', '0000:13:00.0', 0, '0000:11:00.0', '0000:10:01.0', True), ('ua-accelvirt-1', '0000:14:00.0', 0, '0000:11:00.0', '0000:10:01.0', True), ('ua-accelvirt-2', '0000:a1:00.0', 1, None, '0000:a0:01.0', True)] and d['domain'] == 'topo3'"
check "  ... and \"topology\": two cells, the switch group in cell 0 with clique 0, the root port group in cell 1, no note" json "$AV_TMP/topo3.plan.json" \
    "[(c['cell'], c['host_node'], c['vcpus'], c['memory_kib']) for c in d['topology']['cells']] == [(0, 0, '0-1', 8388608), (1, 1, '2-3', 8388608)] and [(g['cell'], g['host_switch'], g['clique'], [x['alias'] for x in g['devices']]) for g in d['topology']['groups']] == [(0, '0000:11:00.0', 0, ['ua-accelvirt-0', 'ua-accelvirt-1']), (1, None, None, ['ua-accelvirt-2'])] and d['topology']['notes'] == []"
check "  ... the same JSON as define --dry-run --json" \
    eval "'$AV' --root '$SW' --policy-dir '$SWP' --state-dir '$SWS' --json define --dry-run '$PL/topo3.in.xml' | cmp - '$AV_TMP/topo3.plan.json'"
"$AV" --root "$SW" --policy-dir "$SWP" --state-dir "$SWS" define --dry-run "$PL/topo3.in.xml" >"$AV_TMP/topo3.define.txt" 2>&1
check "define --dry-run: the placement, then the topology lines" \
    eval "grep -q \"^would define domain 'topo3'\" '$AV_TMP/topo3.define.txt' && grep -q '^  guest switch under cell 0 mirrors host switch 0000:11:00.0: ua-accelvirt-0 (0000:13:00.0), ua-accelvirt-1 (0000:14:00.0); x-nv-gpudirect-clique 0$' '$AV_TMP/topo3.define.txt' && grep -q '^  guest NUMA: cell 0 = host node 0' '$AV_TMP/topo3.define.txt'"
check "plan --defrag FILE: a usage error in one line (exit 2)" \
    one_line 2 "either --defrag or a domain FILE, not both" "$AV" --root "$SW" --policy-dir "$SWP" --state-dir "$SWS" plan --defrag "$PL/topo3.in.xml"
check "plan of a p2p request no switch can hold: the placer's line (no capacity: exit 6), the state dir as it was" \
    eval "state_unchanged '$SWS' one_line 6 \"$P2P4_WHY\" '$AV' --root '$SW' --policy-dir '$SWP' --state-dir '$SWS' plan '$PL/p2p4.in.xml'"
check "plan of a domain without requests: says so" \
    eval "'$AV' --root '$SW' --policy-dir '$SWP' --state-dir '$SWS' plan '$PL/nova.in.xml' | grep -q ': no accelerator requests, nothing to place$'"

# Reserved: the next p2p domain goes elsewhere.
place topo3-res "$SW" "$SWP" "$SWS" topo3
check "topo3 reserved (no --dry-run): the same document, its 3 GPUs claimed" \
    eval "[ \$(cat '$AV_TMP/topo3-res.rc') = 0 ] && cmp '$AV_TMP/topo3.xml' '$AV_TMP/topo3-res.xml' && same_claims '$SWS' '0000:13:00.0 70; 0000:14:00.0 70; 0000:a1:00.0 70'"
sed 's/count="3"/count="2"/' "$PL/p2p3.in.xml" >"$AV_TMP/p2p2.in.xml"
"$AV" --root "$SW" --policy-dir "$SWP" --state-dir "$SWS" --json plan "$AV_TMP/p2p2.in.xml" >"$AV_TMP/p2p2.json" 2>&1
check "  ... 2 more GPUs p2p required: switch 0000:91:00.0 (2 free, pack: the fewest that hold them), not 0000:21:00.0 (3)" json "$AV_TMP/p2p2.json" \
    "[(x['address'], x['switch']) for x in d['devices']] == [('0000:93:00.0', '0000:91:00.0'), ('0000:94:00.0', '0000:91:00.0')]"

# Hostile or impossible metadata: one line, exit 2, nothing reserved.
cp "$SWS/pool.json" "$AV_TMP/sw.pool"
cp "$SWS/journal.jsonl" "$AV_TMP/sw.journal"
hostile() {
    sed "$2" "$PL/topo3.in.xml" >"$AV_TMP/$1.in.xml"
    av "$SW" "$SWP" "$SWS" rewrite "$AV_TMP/$1.in.xml" >"$AV_TMP/$1.xml" 2>"$AV_TMP/$1.err"
    echo $? >"$AV_TMP/$1.rc"
}
hostile h-p2p 's/p2p="required"/p2p="always"/'
check "p2p=\"always\": refused in one line naming p2p (exit 2), nothing reserved" refused h-p2p 2 "p2p"
hostile h-numa 's|<av:request profile="gpu-lone" count="1"/>|&<av:topology guest-numa="sometimes"/>|'
check "<av:topology guest-numa=\"sometimes\">: refused in one line (exit 2), nothing reserved" refused h-numa 2 "guest-numa"
hostile h-attr 's|<av:request profile="gpu-lone" count="1"/>|&<av:topology bridges="mirror"/>|'
check "<av:topology bridges=>: an unknown attribute, refused in one line (exit 2), nothing reserved" refused h-attr 2 "bridges"
hostile h-two 's|<av:request profile="gpu-lone" count="1"/>|&<av:topology/><av:topology/>|'
check "two <av:topology>: refused in one line (exit 2), nothing reserved" refused h-two 2 "topology"
hostile h-mirror "s|<av:request profile=\"gpu-lone\" count=\"1\"/>|&<av:topology guest-numa=\"mirror\"/>|; s|machine='q35'|machine='pc'|"
check "guest-numa=\"mirror\" on i440fx: cannot be honoured, refused in one line (exit 2), nothing reserved" refused h-mirror 2 "mirror"

# i440fx: nothing mirrored, a note (on a pool of its own: topo3 holds the lone GPU).
sed "s|machine='q35'|machine='pc'|" "$PL/topo3.in.xml" >"$AV_TMP/pc.in.xml"
av "$SW" "$SWP" "$AV_TMP/pc-state" rewrite --dry-run "$AV_TMP/pc.in.xml" >"$AV_TMP/pc.xml" 2>"$AV_TMP/pc.err"
check "an i440fx domain: placed without switch, pxb or cells, and a 'not mirrored' note on stderr" \
    eval "xq '$AV_TMP/pc.xml' \"not ctls('pcie-expander-bus') and not ctls('pcie-switch-upstream-port') and r.find('cpu/numa') is None\" && grep -q '^accelvirt: not mirrored: ' '$AV_TMP/pc.err' && lv_valid '$AV_TMP/pc.xml'"

# The user's own guest NUMA wins: no cells, the switch on pcie-root, a note.
sed "s|<cpu mode='host-passthrough'/>|<cpu mode='host-passthrough'><numa><cell id='0' cpus='0-3' memory='16777216' unit='KiB'/></numa></cpu>|" \
    "$PL/topo3.in.xml" >"$AV_TMP/user.in.xml"
av "$SW" "$SWP" "$AV_TMP/user-state" rewrite --dry-run "$AV_TMP/user.in.xml" >"$AV_TMP/user.xml" 2>"$AV_TMP/user.err"
check "a domain with <cpu><numa> cells of its own: they stay as written, no pxb, the switch mirrored on pcie-root, a note" \
    eval "xq '$AV_TMP/user.xml' \"A('cpu/numa/cell', 'memory') == ['16777216'] and not ctls('pcie-expander-bus') and [x[0] for x in chain(hbus('ua-accelvirt-0'))] == ['pcie-switch-downstream-port', 'pcie-switch-upstream-port', 'pcie-root-port'] and cliques() == {'ua-accelvirt-0': '0', 'ua-accelvirt-1': '0'}\" && grep -q '^accelvirt: not mirrored: guest NUMA: the domain has <cpu><numa> cells of its own' '$AV_TMP/user.err' && lv_valid '$AV_TMP/user.xml'"

finish
