#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: what users see from the accelvirt command on the fake hosts.
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
POL="$AV_TEST_SRCDIR/../policies"
H2="$AV_TEST_HOSTS/two-socket-8gpu"
STATE="$AV_TMP/state"

# --- list: golden output for every fake host ---
for h in two-socket-8gpu sriov-fpga-qat vgpu-mdev trap-shared-group; do
    check "list --json on $h matches tests/data/expected/$h.list.json" \
        eval "'$AV' --root '$AV_TEST_HOSTS/$h' --policy-dir '$POL' list --json >'$AV_TMP/$h.json' && mask_names '$AV_TMP/$h.json' && golden '$h.list.json' '$AV_TMP/$h.json'"
done
# The table keeps its names: its golden file follows Debian 12's pci.ids.
check "list table on two-socket-8gpu matches its golden file" \
    eval "'$AV' --root '$H2' --policy-dir '$POL' list --long >'$AV_TMP/t.txt' && golden two-socket-8gpu.list.txt '$AV_TMP/t.txt'"

# --- list: the facts of the 2-socket host ---
"$AV" --root "$H2" --policy-dir "$POL" list --json >"$AV_TMP/h2.json"
check "8 A100/A6000 GPUs, 4 on each NUMA node" json "$AV_TMP/h2.json" \
    "sorted(p['numa_node'] for p in d['pci'] if p['class'] in ('0x030200','0x030000')) == [0,0,0,0,1,1,1,1]"
check "every GPU has an IOMMU group of its own (the A6000s share theirs with their audio function only)" json "$AV_TMP/h2.json" \
    "all((len(p['iommu_group']['members']) == 1) if p['device_id'] == '0x20f1' else (len(p['iommu_group']['members']) == 2 and p['iommu_group']['members'][1].endswith('.1')) for p in d['pci'] if p['class'] in ('0x030200','0x030000')) and len(set(p['iommu_group']['id'] for p in d['pci'] if p['class'] in ('0x030200','0x030000'))) == 8"
check "A100s match the shipped gpu-passthrough profile, A6000s gpu-rtx-a6000, the NIC, disk and audio none" json "$AV_TMP/h2.json" \
    "all(p['profile'] == {'0x20f1': 'gpu-passthrough', '0x2230': 'gpu-rtx-a6000'}.get(p['device_id']) for p in d['pci'] if p['vendor_id'] == '0x10de') and all(p['profile'] is None for p in d['pci'] if p['class'] in ('0x020000','0x010802'))"
check "two NUMA nodes with their CPU lists" json "$AV_TMP/h2.json" \
    "[(n['id'], n['cpulist']) for n in d['numa_nodes']] == [(0,'0-15,32-47'), (1,'16-31,48-63')]"
check "the USB AI stick is listed with its profile and NUMA node" json "$AV_TMP/h2.json" \
    "[(u['vendor_id'], u['product_id'], u['profile'], u['numa_node']) for u in d['usb'] if u['profile']] == [('0x03e7','0x2485','usb-ai-stick', 0)]"
check "ACCELVIRT_ROOT works like --root" \
    eval "ACCELVIRT_ROOT='$H2' '$AV' --policy-dir '$POL' list --json | cmp - '$AV_TMP/h2.json'"
check "global options are accepted after the command too" \
    eval "'$AV' list --json --root '$H2' --policy-dir '$POL' | cmp - '$AV_TMP/h2.json'"
"$AV" --root "$H2" --policy-dir "$POL" list --managed --json >"$AV_TMP/m.json"
check "list --managed shows only the 8 GPUs and the stick" json "$AV_TMP/m.json" \
    "len(d['pci']) == 8 and len(d['usb']) == 1"

# --- the trap host: a GPU sharing its IOMMU group with the host's NIC ---
"$AV" --root "$AV_TEST_HOSTS/trap-shared-group" --policy-dir "$POL" list --json >"$AV_TMP/trap.json"
check "the trap host's GPU is managed but cannot be passed through, naming the NIC and its driver" json "$AV_TMP/trap.json" \
    "[(p['passthrough']['possible'], '0000:05:00.0' in p['passthrough']['reason'] and 'i40e' in p['passthrough']['reason']) for p in d['pci'] if p['profile'] and p['address'] == '0000:04:00.0'] == [(False, True)]"
check "the trap host's A6000 whose own slot's function 1 is the host's NIC (ice) cannot be passed through, naming it, though its audio is a companion" json "$AV_TMP/trap.json" \
    "[(p['passthrough']['possible'], \"'0000:06:00.1'\" in p['passthrough']['reason'] and 'driver ice' in p['passthrough']['reason']) for p in d['pci'] if p['profile'] and p['address'] == '0000:06:00.0'] == [(False, True)]"
check "the 2-socket host's GPUs can all be passed through (the A6000 audio functions go with their cards)" json "$AV_TMP/h2.json" \
    "all(p['passthrough']['possible'] for p in d['pci'] if p['profile']) and all(p['passthrough'] is None for p in d['pci'] if not p['profile'])"
check "the list table marks the trap host's GPU and says why" \
    eval "'$AV' --root '$AV_TEST_HOSTS/trap-shared-group' --policy-dir '$POL' list | grep -q 'gpu-passthrough (!)' && '$AV' --root '$AV_TEST_HOSTS/trap-shared-group' --policy-dir '$POL' list | grep -q \"IOMMU group 12 also holds '0000:05:00.0'\""

# --- bad input: one line, a non-zero status, nothing changed ---
one_line_error() {
    # one_line_error STATUS PATTERN CMD...
    st=$1 pat=$2; shift 2
    expect_exit "$st" "$@" || return 1
    [ "$(wc -l <"$AV_TMP/err")" -eq 1 ] || { echo "not one line:"; cat "$AV_TMP/err"; return 1; }
    grep -q "^accelvirt: .*$pat" "$AV_TMP/err" || { echo "no '$pat' in:"; cat "$AV_TMP/err"; return 1; }
}
check "an unknown command is a usage error" one_line_error 2 "unknown command 'lst'" "$AV" lst
check "an unknown option is a usage error" one_line_error 2 "Unknown option" "$AV" list --frobnicate
check "a root that does not exist is refused" one_line_error 1 "/nonexistent" "$AV" --root /nonexistent --policy-dir "$POL" list
check "a policy dir given that does not exist is refused" one_line_error 1 "policy directory '/nonexistent/pol' does not exist" "$AV" --root "$H2" --policy-dir /nonexistent/pol list
check "a fake root is never recorded in the default state dir" one_line_error 2 "give a --state-dir of its own" env -u ACCELVIRT_STATE_DIR "$AV" --root "$H2" --policy-dir "$POL" status
check "a root without sys/ says where to point --root" one_line_error 1 "sys" "$AV" --root "$AV_TMP" --policy-dir "$POL" list
# A host without a PCI bus (s390, some Arm boards, containers): its NUMA
# nodes, USB and mdev parents, and a word that it has no PCI bus; exit 0.
NOPCI="$AV_TMP/nopci"
mkdir -p "$NOPCI/sys/bus/platform" "$NOPCI/sys/devices/system/node/node0"
echo 0-3 >"$NOPCI/sys/devices/system/node/node0/cpulist"
check "a host without a PCI bus lists its NUMA nodes and says it has no PCI bus, exit 0" \
    eval "\"$AV\" --root '$NOPCI' --policy-dir '$POL' list >'$AV_TMP/nopci.txt' && grep -qx 'PCI devices: none, this host has no PCI bus' '$AV_TMP/nopci.txt' && grep -q '^  0     0-3' '$AV_TMP/nopci.txt'"
check "  ... and list --json says pci_bus false, no PCI device, one NUMA node" \
    eval "\"$AV\" --root '$NOPCI' --policy-dir '$POL' list --json | python3 -c \"import json,sys; d=json.load(sys.stdin); assert d['pci_bus'] is False and d['pci'] == [] and [n['id'] for n in d['numa_nodes']] == [0], d\""
# A capture that holds a device's driver link but not the driver's directory.
DANG="$AV_TMP/dangling"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$DANG"
rm -rf "$DANG/sys/bus/pci/drivers/nvidia"
check "a driver link whose target the capture lacks still names the driver (the link's text, as pciutils reads it)" \
    eval "\"$AV\" --root '$DANG' --policy-dir '$POL' list --json | python3 -c \"import json,sys; d=json.load(sys.stdin); a=[x for x in d['pci'] if x['address']=='0000:17:00.0'][0]; assert a['driver'] == 'nvidia', a\""
# numa_node -1 from the kernel, local_cpulist within one node: on that node,
# said to be inferred; a local_cpulist across both nodes says nothing.
INF="$AV_TMP/infer"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$INF"
D17=$(readlink -f "$INF/sys/bus/pci/devices/0000:17:00.0")
D31=$(readlink -f "$INF/sys/bus/pci/devices/0000:31:00.0")
case "$D17$D31" in "$INF"/*"$INF"/*) ;; *) D17="$INF/sys/bus/pci/devices/0000:17:00.0"; D31="$INF/sys/bus/pci/devices/0000:31:00.0" ;; esac
echo -1 >"$D17/numa_node"; echo 16-31,48-63 >"$D17/local_cpulist"
echo -1 >"$D31/numa_node"; echo 0-63 >"$D31/local_cpulist"
check "numa_node -1 with a local_cpulist within one node: on that node, numa_node_inferred; across nodes: still -1" \
    eval "\"$AV\" --root '$INF' --policy-dir '$POL' list --json | python3 -c \"import json,sys; d={x['address']: x for x in json.load(sys.stdin)['pci']}; a, b, c = d['0000:17:00.0'], d['0000:31:00.0'], d['0000:4b:00.0']; assert a['numa_node'] == 1 and a['numa_node_inferred'] is True and b['numa_node'] == -1 and 'numa_node_inferred' not in b and c['numa_node'] == 0 and 'numa_node_inferred' not in c, (a, b, c)\""
mkdir -p "$AV_TMP/badpol"
printf '{"profiles": [\n  {"name": "gpu", "match": {"vendor": "0x10de"}, "attach": "vfio"}\n]}\n' >"$AV_TMP/badpol/10-gpu.json"
check "a bad policy names file, line and column" one_line_error 2 "10-gpu.json:2:[0-9]*: .*'vfio'" "$AV" --root "$H2" --policy-dir "$AV_TMP/badpol" list

# --- status: the pool, reconciled with the host ---
check "status on a new state dir adds the managed devices as free" \
    eval "'$AV' --root '$H2' --policy-dir '$POL' --state-dir '$STATE' status --json >'$AV_TMP/s1.json'"
check "  ... 9 devices (8 GPUs and the stick), all free" json "$AV_TMP/s1.json" \
    "len(d['devices']) == 9 and all(x['state'] == 'free' for x in d['devices'])"
check "  ... journalled as 9 'added' entries" \
    eval "[ \$(grep -c '\"event\": *\"added\"' '$STATE/journal.jsonl') -eq 9 ]"
lines=$(wc -l <"$STATE/journal.jsonl")
check "a second status journals nothing and reports the same states" \
    eval "'$AV' --root '$H2' --policy-dir '$POL' --state-dir '$STATE' status --json >'$AV_TMP/s1b.json' && [ \$(wc -l <'$STATE/journal.jsonl') -eq $lines ] && python3 -c 'import json,sys; f=lambda p: [(x[\"identity\"], x[\"address\"], x[\"state\"]) for x in json.load(open(p))[\"devices\"]]; sys.exit(0 if f(sys.argv[1]) == f(sys.argv[2]) else 1)' '$AV_TMP/s1.json' '$AV_TMP/s1b.json'"

# A GPU vanishes (pulled card, dead link): it becomes missing, then comes back free.
cp -a "$H2" "$AV_TMP/h2copy"
gone=$(python3 -c "import json;print([p['address'] for p in json.load(open('$AV_TMP/h2.json'))['pci'] if p['profile']][0])")
mv "$AV_TMP/h2copy/sys/bus/pci/devices/$gone" "$AV_TMP/gone-link"
check "a GPU that disappears becomes missing" \
    eval "'$AV' --root '$AV_TMP/h2copy' --policy-dir '$POL' --state-dir '$STATE' status --json >'$AV_TMP/s2.json'"
check "  ... with its address, the others stay free" json "$AV_TMP/s2.json" \
    "[x['state'] for x in d['devices'] if x['address'] == '$gone'] == ['missing'] and sum(x['state'] == 'free' for x in d['devices']) == 8"
mv "$AV_TMP/gone-link" "$AV_TMP/h2copy/sys/bus/pci/devices/$gone"
check "  ... and returns to free when it is back" \
    eval "'$AV' --root '$AV_TMP/h2copy' --policy-dir '$POL' --state-dir '$STATE' status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if all(x[\"state\"]==\"free\" for x in d[\"devices\"]) else 1)'"

check "journal verify accepts the chain" "$AV" --state-dir "$STATE" journal verify

# Eight status runs at once on one state dir: the lock serialises them.
concurrent_status() {
    st="$AV_TMP/conc"
    for i in 1 2 3 4 5 6 7 8; do
        "$AV" --root "$H2" --policy-dir "$POL" --state-dir "$st" status --json >"$AV_TMP/conc.$i" 2>"$AV_TMP/conc.$i.err" &
    done
    wait
    for i in 1 2 3 4 5 6 7 8; do
        json "$AV_TMP/conc.$i" "len(d['devices']) == 9" || return 1
    done
    [ "$(grep -c '"event": *"added"' "$st/journal.jsonl")" -eq 9 ] || { echo "not 9 added entries"; return 1; }
    "$AV" --state-dir "$st" journal verify
}
check "eight concurrent status runs add each device once and keep the journal chain" concurrent_status
cp "$STATE/pool.json" "$AV_TMP/pool.before"
cp "$STATE/journal.jsonl" "$AV_TMP/journal.before"
check "a bad policy leaves the pool and journal untouched" \
    eval "! '$AV' --root '$H2' --policy-dir '$AV_TMP/badpol' --state-dir '$STATE' status 2>/dev/null && cmp '$STATE/pool.json' '$AV_TMP/pool.before' && cmp '$STATE/journal.jsonl' '$AV_TMP/journal.before'"

printf '{"version": 1, "devices": [ {"identity": "dsn:' >"$STATE/pool.json"
cp "$STATE/pool.json" "$AV_TMP/corrupt"
check "a pool.json that does not parse stops status (exit 4) and is left as it is" \
    eval "'$AV' --root '$H2' --policy-dir '$POL' --state-dir '$STATE' status >/dev/null 2>'$AV_TMP/cerr'; [ \$? -eq 4 ] && grep -q 'pool.json' '$AV_TMP/cerr' && cmp '$STATE/pool.json' '$AV_TMP/corrupt'"

# Another accelvirt holds the pool's lock past the 30 s wait: exit 3, locked
# (the same command again once it is done), the wait said first, then the
# one line; nothing changed.
LST="$AV_TMP/lockstate"
"$AV" --root "$H2" --policy-dir "$POL" --state-dir "$LST" status >/dev/null 2>&1
cp "$LST/pool.json" "$AV_TMP/lock.pool"
hold_pool_lock "$LST"
check "status while another holds the pool's lock past the wait: locked (exit 3), said so while it waited, nothing changed" \
    eval "expect_exit 3 '$AV' --root '$H2' --policy-dir '$POL' --state-dir '$LST' status && [ \$(wc -l <'$AV_TMP/err') -eq 2 ] && head -n1 '$AV_TMP/err' | grep -qx 'accelvirt: waiting for another accelvirt to release the pool lock...' && tail -n1 '$AV_TMP/err' | grep -q '^accelvirt: the lock .*pool.lock. is held by another accelvirt process; try again when it is done\$' && cmp '$LST/pool.json' '$AV_TMP/lock.pool'"
let_go_pool_lock

check "status --no-sync on a missing state dir shows an empty pool and creates nothing" \
    eval "'$AV' --state-dir '$AV_TMP/nostate' status --no-sync --json | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)[\"devices\"] == [] else 1)' && [ ! -e '$AV_TMP/nostate' ]"

# --- the exit statuses: one table, in src/util/av-exit.h and accelvirt(1) ---
exit_table() {
    python3 - "$AV_TEST_SRCDIR/../src/util/av-exit.h" "$AV_TEST_SRCDIR/../man/accelvirt.1" <<'PY'
import re, sys
header = open(sys.argv[1]).read()
enum = {int(v) for v in re.findall(r"^\s*AV_EXIT_[A-Z_]+ = (\d+),$", header, re.M)}
table = {int(v) for v in re.findall(r"^ \*   (\d)       ", header, re.M)}
section = open(sys.argv[2]).read().split(".SH EXIT STATUS\n", 1)[1].split("\n.SH ", 1)[0]
man = {int(v) for v in re.findall(r"^\.TP\n\.B (\d+)$", section, re.M)}
if not enum == table == man == set(range(7)):
    print("the enum: %s, the header's table: %s, accelvirt(1): %s" % (sorted(enum), sorted(table), sorted(man)))
    sys.exit(1)
PY
}
check "the enum and the table of src/util/av-exit.h and accelvirt(1)'s EXIT STATUS name the same statuses, 0 to 6" exit_table

# --- policy ---
check "policy check accepts the shipped example policies" "$AV" --policy-dir "$POL" policy check
check "policy show NAME prints the normalised profile; an unknown NAME is refused" \
    eval "'$AV' --policy-dir '$POL' policy show gpu-passthrough | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d[0][\"name\"]==\"gpu-passthrough\" else 1)' && ! '$AV' --policy-dir '$POL' policy show no-such 2>/dev/null"

# Policies, and the programs and templates they name, run or are read as
# root: what another user could change is refused, one line, exit 2.
TP="$AV_TMP/trust"
mkdir -p "$TP/pol" "$TP/bin"
printf '#!/bin/sh\nexit 0\n' >"$TP/bin/scrub"
printf '<domain><name>@NAME@</name><devices/></domain>\n' >"$TP/nohostdev.xml"
printf '{"profiles": [{"name": "gpu", "match": {"vendor": "0x10de"},\n  "scrub": [{"method": "command", "argv": ["%s"]}]}]}\n' \
    "$TP/bin/scrub" >"$TP/pol/10-gpu.json"
chmod 0755 "$TP" "$TP/pol" "$TP/bin" "$TP/bin/scrub" && chmod 0644 "$TP/pol/10-gpu.json" "$TP/nohostdev.xml"
check "policy check accepts a policy whose scrub program only root can change" "$AV" --policy-dir "$TP/pol" policy check
chmod 0664 "$TP/pol/10-gpu.json"
check "policy check refuses a group-writable policy file: one line, exit 2" \
    one_line_error 2 "refusing the policy file '$TP/pol/10-gpu.json': it is writable by its group .*run 'chmod go-w $TP/pol/10-gpu.json'" \
    "$AV" --policy-dir "$TP/pol" policy check
chmod 0644 "$TP/pol/10-gpu.json"
chmod 0777 "$TP/bin"
check "policy check refuses a scrub program in a world-writable directory: one line, exit 2" \
    one_line_error 2 "10-gpu.json:2:[0-9]*: profile 'gpu': 'scrub\[0\].argv\[0\]': refusing the scrub program '$TP/bin/scrub': the directory '$TP/bin' is writable by its group and every user" \
    "$AV" --policy-dir "$TP/pol" policy check
chmod 0755 "$TP/bin"
rm -f "$TP/bin/scrub"
check "policy check refuses a scrub program that does not exist: one line, exit 2" \
    one_line_error 2 "the scrub program '$TP/bin/scrub' does not exist" "$AV" --policy-dir "$TP/pol" policy check
printf '{"profiles": [{"name": "gpu", "match": {"vendor": "0x10de"},\n  "scrub": [{"method": "vm", "template": "%s"}]}]}\n' \
    "$TP/nohostdev.xml" >"$TP/pol/10-gpu.json"
check "policy check refuses a vm step whose template has no @HOSTDEV@: one line, exit 2" \
    one_line_error 2 "'scrub\[0\].template': the scrub VM template '$TP/nohostdev.xml' has no @HOSTDEV@" \
    "$AV" --policy-dir "$TP/pol" policy check

finish
