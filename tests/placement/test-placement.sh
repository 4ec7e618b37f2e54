#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The placement tier (make check-placement; tests/placement/README.md):
# Debian 12's real Placement 8.0.0 (python3-placement) on 127.0.0.1, SQLite,
# noauth2, with the resource providers Nova makes under [pci]
# report_in_placement and one_time_use; the build tree's accelvirt-hook,
# accelvirt-worker and accelvirt on private copies of the fake hosts keep
# each device's "reserved" true: total while dirty, scrubbing or quarantined,
# 0 after a verified scrub; queued while Placement is down, replayed by
# reconcile; a 409 retried. TAP on stdout; installs python3-placement when
# missing (root); never skips. Logs of a failed run: tests/placement/logs/.
. "$AV_TEST_SRCDIR/lib.sh"

: "${ACCELVIRT_HOOK:?ACCELVIRT_HOOK is not set: run the tests with make check-placement}"
: "${ACCELVIRT_WORKER:?ACCELVIRT_WORKER is not set: run the tests with make check-placement}"
AV=$ACCELVIRT
HOOK=$ACCELVIRT_HOOK
HERE="$AV_TEST_SRCDIR/placement"
LOGS="${AV_TEST_BUILDDIR:-$AV_TEST_SRCDIR}/placement/logs"
SRV="$AV_TMP/placement"
HOST=compute1
A100_RC=CUSTOM_PCI_10DE_20F1

t0=$(date +%s)
step() { echo "# [$(($(date +%s) - t0)) s] $*"; }

# Everything this test started is stopped on any exit; a failed run's logs
# (Placement's, the proxy's, accelvirt's) are kept in $LOGS first.
PROXY_PID=
cleanup() {
    [ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null
    sh "$HERE/placement-server.sh" stop "$SRV" 2>/dev/null
    if [ "$av_failed" -ne 0 ]; then
        rm -rf "$LOGS" && mkdir -p "$LOGS" &&
            find "$AV_TMP" -maxdepth 2 \( -name '*.log' -o -name log -o -name 'proxy*.log' \) -type f |
            while read -r f; do cp "$f" "$LOGS/$(echo "${f#"$AV_TMP"/}" | tr / _)"; done
        echo "# logs kept in $LOGS"
    fi
    kill_holds
    rm -rf "$AV_TMP"
}
trap cleanup EXIT

# bail DESCRIPTION [OUTPUT]: a step the rest depends on failed.
bail() {
    av_n=$((av_n + 1))
    av_failed=$((av_failed + 1))
    echo "not ok $av_n - $1"
    [ $# -gt 1 ] && printf '%s\n' "$2" | tail -30 | sed 's/^/# /'
    echo "1..$av_n"
    exit 1
}

# --- the server -----------------------------------------------------------------
if ! command -v placement-api >/dev/null || ! command -v placement-manage >/dev/null; then
    [ "$(id -u)" = 0 ] || bail "placement-api missing: run build-aux/install-deps --placement (as root), or this tier as root"
    out=$(sh "$AV_TEST_SRCDIR/../build-aux/install-deps" --placement 2>&1) ||
        bail "build-aux/install-deps --placement installs python3-placement" "$out"
fi
step "python3-placement $(dpkg-query -W -f='${Version}' python3-placement 2>/dev/null), os-traits $(dpkg-query -W -f='${Version}' python3-os-traits 2>/dev/null)"
PORT=$(sh "$HERE/placement-server.sh" start "$SRV" 2>"$AV_TMP/server.err") ||
    bail "Placement starts on 127.0.0.1 (placement-manage db sync, placement-api, GET / answers)" "$(cat "$AV_TMP/server.err")"
URL="http://127.0.0.1:$PORT"
step "placement-api on $URL"
PL() { python3 "$HERE/placement.py" --url "$URL" "$@"; }

check "the real Placement answers GET / without a token: max microversion 1.39 (Debian 12's 8.0.0)" \
    eval "python3 -c \"import json, urllib.request; d = json.load(urllib.request.urlopen('$URL/')); assert d['versions'][0]['max_version'] == '1.39', d\""

# Debian 12's os-traits 2.9 (research f): HW_PCI_ONE_TIME_USE came in 3.4.0.
MISSING=$(PL traits-missing COMPUTE_MANAGED_PCI_DEVICE HW_PCI_ONE_TIME_USE HW_PCI_LIVE_MIGRATABLE OWNER_NOVA)
OTU=$(PL otu-trait)
for t in COMPUTE_MANAGED_PCI_DEVICE HW_PCI_ONE_TIME_USE HW_PCI_LIVE_MIGRATABLE OWNER_NOVA; do
    case " $(echo $MISSING) " in
        *" $t "*) echo "# os-traits of this Placement lacks $t" ;;
        *) echo "# os-traits of this Placement has $t" ;;
    esac
done
echo "# the one-time-use trait set on the devices' RPs: $OTU"
check "COMPUTE_MANAGED_PCI_DEVICE is a standard trait here (how Nova knows its PCI RPs)" \
    eval "! echo '$MISSING' | grep -qx COMPUTE_MANAGED_PCI_DEVICE"

# --- what Nova makes: the compute node and one child RP per device ---
# two-socket-8gpu: A100s (10de:20f1) at 17, 31, 4b, 65, ca, e3; A6000s
# (10de:2230) at 98 (resource_class CUSTOM_GPU_A6000) and b1 (sync off).
check "the compute node RP '$HOST' is made as Nova's resource tracker makes it" PL compute-node "$HOST"
for a in 0000:17:00.0 0000:31:00.0 0000:4b:00.0 0000:65:00.0 0000:ca:00.0 0000:e3:00.0; do
    PL pci-rp "$HOST" "$a" "$A100_RC" 1 "$OTU" >/dev/null || bail "child RP of $a" "$(PL pci-rp "$HOST" "$a" "$A100_RC" 1 "$OTU" 2>&1)"
done
PL pci-rp "$HOST" 0000:98:00.0 CUSTOM_GPU_A6000 1 "$OTU" >/dev/null || bail "child RP of 0000:98:00.0"
PL pci-rp "$HOST" 0000:b1:00.0 CUSTOM_PCI_10DE_2230 1 "$OTU" >/dev/null || bail "child RP of 0000:b1:00.0"
step "Nova's RPs made"
check "the device RPs are named as Nova names them: only the address upper-cased (compute1_0000:4B:00.0, compute1_0000:E3:00.0)" \
    eval "PL uuid '${HOST}_0000:4B:00.0' >/dev/null && PL uuid '${HOST}_0000:E3:00.0' >/dev/null && ! PL uuid '${HOST}_0000:e3:00.0' 2>/dev/null"
check "  ... with Nova's inventory: total 1, max_unit 1, the rest Placement's defaults (reserved 0)" \
    eval "PL inventory '${HOST}_0000:E3:00.0' $A100_RC >'$AV_TMP/inv' && json '$AV_TMP/inv' \"(d['total'], d['max_unit'], d['reserved'], d['min_unit'], d['step_size'], d['allocation_ratio']) == (1, 1, 0, 1, 1, 1.0)\""

# --- Placement's own behaviour, the ground the sync stands on ---
G=${HOST}_0000:E3:00.0
in_cands() { PL candidates "$1" | grep -qxF "$2"; }
check "allocation candidates of $A100_RC:1 (microversion 1.29) return a free device's RP" in_cands "$A100_RC" "$G"
check "reserved = total (1.26+) takes it out of the candidates" eval "PL set-reserved '$G' $A100_RC 1 && ! in_cands $A100_RC '$G'"
check "reserved = 0 brings it back" eval "PL set-reserved '$G' $A100_RC 0 && in_cands $A100_RC '$G'"
C0=00000000-0000-4000-8000-0000000000e3
check "Nova's one_time_use allocation: the instance's allocation, then reserved = total" \
    eval "PL allocate '$G' $A100_RC $C0 --otu && [ \"\$(PL reserved '$G' $A100_RC)\" = 1 ] && ! in_cands $A100_RC '$G'"
check "  ... the instance deleted: reserved stays total (Nova never gives it back), still no candidate" \
    eval "PL deallocate $C0 && [ \"\$(PL reserved '$G' $A100_RC)\" = 1 ] && ! in_cands $A100_RC '$G'"
check "  ... the operator's reserved = 0 returns it (what accelvirt's verified scrub is to do)" \
    eval "PL set-reserved '$G' $A100_RC 0 && in_cands $A100_RC '$G'"
check "Nova's PUT of the whole inventory (total and max_unit only) resets a reserved to 0" \
    eval "PL set-reserved '$G' $A100_RC 1 && PL nova-put '$G' $A100_RC && [ \"\$(PL reserved '$G' $A100_RC)\" = 0 ]"
step "Placement's ground checked"

# --- accelvirt's side: policies, clouds.yaml, the fake host ---
GATES="$AV_TMP/gates"
mkdir -p "$GATES"
POL="$AV_TMP/policies"
mkdir -p "$POL"
cat >"$POL/10-nova.json" <<JSON
{"description": "The placement tier: the A100s scrubbed by a gate the test opens.",
 "nova": {"placement_sync": true, "cloud": "test", "hypervisor_hostname": "$HOST"},
 "profiles": [
  {"name": "a100", "match": {"vendor": "0x10de", "device": "0x20f1"}, "attach": "vfio-pci",
   "granularity": "card", "numa": "none", "restore_driver": "on-release",
   "scrub": [{"method": "command", "argv": ["$HERE/scrub-gate.sh", "$GATES"], "timeout": 90}]},
  {"name": "a6000-rc", "match": {"vendor": "0x10de", "device": "0x2230", "address": "0000:98:00.0"},
   "companions": [{"class": "0x0403"}], "attach": "vfio-pci", "granularity": "card", "numa": "none",
   "resource_class": "CUSTOM_GPU_A6000", "scrub": [{"method": "none"}]},
  {"name": "a6000-off", "match": {"vendor": "0x10de", "device": "0x2230", "address": "0000:b1:00.0"},
   "companions": [{"class": "0x0403"}], "attach": "vfio-pci", "granularity": "card", "numa": "none",
   "placement_sync": false, "scrub": [{"method": "none"}]}
 ]}
JSON
chmod 0755 "$POL" && chmod 0644 "$POL"/*.json

# clouds.yaml (research g): Placement without Keystone, the token noauth2 wants.
clouds() { # FILE PORT
    cat >"$1" <<YAML
clouds:
  test:
    auth_type: admin_token
    auth:
      token: admin
    placement_endpoint_override: "http://127.0.0.1:$2"
YAML
    chmod 0600 "$1"
}
CLOUDS="$AV_TMP/clouds.yaml"
clouds "$CLOUDS" "$PORT"

W="$AV_TMP/life"
mkdir -p "$W"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$W/host"
# av ARGS...: the CLI on world $W (its root, state dir, policies, clouds.yaml).
av() {
    OS_CLIENT_CONFIG_FILE="${AV_CLOUDS:-$CLOUDS}" OS_CLOUD=test ACCELVIRT_WORKER="$ACCELVIRT_WORKER" \
    ACCELVIRT_LOG_FILE="$W/log" \
        "$AV" --root "$W/host" --policy-dir "${AV_POL:-$POL}" --state-dir "$W/state" "$@"
}
# hook XML ARGS...: the hook of world $W as a wrapper runs it (test-hook.sh).
hook() {
    xml=$1; shift
    OS_CLIENT_CONFIG_FILE="$CLOUDS" OS_CLOUD=test \
    ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="${AV_POL:-$POL}" \
    ACCELVIRT_WORKER="$ACCELVIRT_WORKER" ACCELVIRT_LOG_FILE="$W/log" \
        "$HOOK" "$@" <"$xml"
}
# mkdom FILE NAME UUID ADDRESS: a domain with one managed='no' hostdev, a Nova instance's.
mkdom() {
    b=${4#0000:}
    cat >"$1" <<DOM
<domain type='kvm'>
  <name>$2</name>
  <uuid>$3</uuid>
  <memory unit='GiB'>4</memory>
  <vcpu placement='static'>2</vcpu>
  <metadata><nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'><nova:name>$2</nova:name><nova:owner><nova:user uuid='0a1b2c3d4e5f46a7b8c9d0e1f2a3b4c5'>u</nova:user><nova:project uuid='6f1f5c3d0f0b4b8e9d0c8b0a1e2f3a4b'>p</nova:project></nova:owner></nova:instance></metadata>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x${b%%:*}' slot='0x$(echo "$b" | cut -d: -f2 | cut -d. -f1)' function='0x${b##*.}'/></source></hostdev>
  </devices>
</domain>
DOM
}
uuid() { printf '%08x-0000-4000-8000-%012x' "$1" "$1"; }
# st: the pool of $W as JSON in $W/st.json (status, no host scan).
st() { av status --no-sync --json >"$W/st.json"; }
# pool_state ADDRESS: the pool state of a PCI device of $W.
pool_state() {
    python3 -c "import json,sys; print([x['state'] for x in json.load(open(sys.argv[1]))['devices'] if x['address'] == sys.argv[2] and x['kind'] == 'pci'][0])" "$W/state/pool.json" "$1" 2>/dev/null
}
# wait_for SECONDS CMD...: CMD succeeds within SECONDS (polled every 0.2 s).
wait_for() {
    lim=$1; shift
    i=0
    while [ $i -lt $((lim * 5)) ]; do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
        i=$((i + 1))
    done
    echo "not within $lim s: $*"
    return 1
}
reserved_is() { [ "$(PL reserved "$1" "$2")" = "$3" ]; }
state_is() { [ "$(pool_state "$1")" = "$2" ]; }
# wait_reserved RP RC N: Placement says reserved N within 30 s.
wait_reserved() {
    wait_for 30 reserved_is "$@" && return 0
    echo "reserved of $1 $2: $(PL reserved "$1" "$2"), expected $3"
    tail -5 "$W/log" 2>/dev/null
    return 1
}
# pl ADDRESS PYTHON-EXPR: EXPR on the device's "placement" object `p` of
# `accelvirt status --json` (as $W/st.json).
pl() {
    st || return 1
    python3 - "$W/st.json" "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
devs = [x for x in d["devices"] if x["address"] == sys.argv[2] and x["kind"] == "pci"]
p = devs[0].get("placement") if devs else None
try:
    ok = p is not None and eval(sys.argv[3])
except Exception as e:  # noqa: BLE001
    ok = False
    print("error: %r" % e)
if not ok:
    print("false: %s; placement of %s: %s" % (sys.argv[3], sys.argv[2], json.dumps(p)))
    sys.exit(1)
PY
}
# journal_placement ADDRESS: the journal's "placement" entries of ADDRESS, one JSON a line.
journal_placement() {
    python3 -c "
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get('event') == 'placement' and e.get('address') == sys.argv[2]:
        print(json.dumps(e, sort_keys=True))" "$W/state/journal.jsonl" "$1"
}
# gate ADDRESS: the scrub of ADDRESS may go on; ungate: the next one waits.
gate() { touch "$GATES/open-$1"; }
ungate() { rm -f "$GATES/open-$1" "$GATES/fail-$1"; }

check "the hook links neither libcurl nor libyaml (it never talks to Placement)" \
    eval "! ${READELF:-readelf} -d '$HOOK' | grep NEEDED | grep -qE 'libcurl|libyaml'"
check "accelvirt policy check accepts the tier's policy (a \"nova\" object, profiles' placement_sync)" \
    av policy check

# A second "nova" object, and placement_sync on an mdev profile: refused.
BAD="$AV_TMP/bad-policies"
mkdir -p "$BAD/two" "$BAD/mdev"
cp "$POL/10-nova.json" "$BAD/two/10-nova.json"
echo '{"nova": {"placement_sync": true, "cloud": "test"}, "profiles": []}' >"$BAD/two/20-nova.json"
echo '{"profiles": [{"name": "v", "match": {"vendor": "0x10de", "device": "0x2236"}, "attach": "mdev", "mdev_type": "nvidia-590", "numa": "none", "placement_sync": true, "scrub": [{"method": "none"}]}]}' >"$BAD/mdev/10-mdev.json"
chmod -R go-w "$BAD" && chmod 0644 "$BAD"/*/*.json
check "a second policy file with a \"nova\" object is an error naming both files" \
    eval "AV_POL='$BAD/two' av policy check >'$AV_TMP/out' 2>&1; [ \$? -ne 0 ] && grep -q '10-nova.json' '$AV_TMP/out' && grep -q '20-nova.json' '$AV_TMP/out' && ! grep -q 'unknown key' '$AV_TMP/out' || { cat '$AV_TMP/out'; false; }"
check "placement_sync true on an mdev profile is an error" \
    eval "AV_POL='$BAD/mdev' av policy check >'$AV_TMP/out' 2>&1; [ \$? -ne 0 ] && grep -q 'placement_sync' '$AV_TMP/out' && ! grep -q 'unknown key' '$AV_TMP/out' || { cat '$AV_TMP/out'; false; }"

# --- enrolment: the pool made, everything free: reserved 0 asserted ---
PL set-reserved "${HOST}_0000:98:00.0" CUSTOM_GPU_A6000 1 >/dev/null
PL set-reserved "${HOST}_0000:B1:00.0" CUSTOM_PCI_10DE_2230 1 >/dev/null
PL set-reserved "${HOST}_0000:CA:00.0" "$A100_RC" 1 >/dev/null
check "accelvirt status makes the pool: every GPU free" \
    eval "av status --json >'$W/st.json' && json '$W/st.json' \"sorted(x['state'] for x in d['devices'] if x['kind'] == 'pci') == ['free'] * 8\""
check "accelvirt placement sync exits 0: every free device of a sync-on profile in sync" \
    eval "av placement sync >'$W/sync.out' 2>&1 || { cat '$W/sync.out'; false; }"
check "  ... a free A100 whose RP said reserved 1 (a stale one-time-use) is given back: reserved 0" \
    reserved_is "${HOST}_0000:CA:00.0" "$A100_RC" 0
check "  ... the profile's resource_class is the one synced (CUSTOM_GPU_A6000 of 0000:98:00.0: reserved 0)" \
    reserved_is "${HOST}_0000:98:00.0" CUSTOM_GPU_A6000 0
check "  ... a device of a profile with placement_sync false is left alone (reserved 1 as it was)" \
    reserved_is "${HOST}_0000:B1:00.0" CUSTOM_PCI_10DE_2230 1
check "status --json: the free A100's placement in-sync, want 0, applied 0, Nova's RP name and class" \
    pl 0000:ca:00.0 "(p['state'], p['want'], p['applied'], p['rp'], p['rc'], p['error']) == ('in-sync', 0, 0, '${HOST}_0000:CA:00.0', '$A100_RC', None)"
check "  ... the sync-off A6000's placement is off" pl 0000:b1:00.0 "p['state'] == 'off'"
check "  ... the state file placement.json: mode 0600, version 1, one record per synced device" \
    eval "[ \"\$(stat -c %a '$W/state/placement.json')\" = 600 ] && json '$W/state/placement.json' \"d['version'] == 1 and sorted(x['address'] for x in d['devices'].values()) == ['0000:17:00.0', '0000:31:00.0', '0000:4b:00.0', '0000:65:00.0', '0000:98:00.0', '0000:ca:00.0', '0000:e3:00.0']\""
check "accelvirt placement status --json reads the same view" \
    eval "av placement status --json >'$W/ps.json' && json '$W/ps.json' 'bool(d)'"
step "enrolled and synced"

# --- a life without one_time_use (reserved 0 while in use): accelvirt's release reserves ---
D=0000:17:00.0 RP=${HOST}_0000:17:00.0
mkdom "$W/vm1.xml" inst1 "$(uuid 1)" $D
C1=00000000-0000-4000-8000-000000000001
check "Nova allocates $D to an instance (no one_time_use: reserved stays 0), the hook prepares it" \
    eval "PL allocate '$RP' $A100_RC $C1 && hook '$W/vm1.xml' inst1 prepare begin - && state_is $D in-use"
check "  ... in use: accelvirt placement sync wants no change (reserved still 0)" \
    eval "av placement sync >/dev/null && reserved_is '$RP' $A100_RC 0"
check "the instance deleted (Nova's allocation gone), the hook's release end: the device dirty, the worker scrubbing it" \
    eval "PL deallocate $C1 && hook '$W/vm1.xml' inst1 release end - && wait_for 30 test -e '$GATES/waiting-$D'"
check "  ... after release its RP has reserved = total (1), set by the worker" wait_reserved "$RP" $A100_RC 1
check "  ... allocation candidates of $A100_RC no longer return it" eval "! in_cands $A100_RC '$RP'"
check "  ... status: placement in-sync, want 1, applied 1" pl $D "(p['state'], p['want'], p['applied']) == ('in-sync', 1, 1)"
gate $D
check "the scrub verifies: the device free" wait_for 30 state_is $D free
check "  ... and its RP's reserved back to 0" wait_reserved "$RP" $A100_RC 0
check "  ... returned by the allocation candidates again" in_cands $A100_RC "$RP"
check "  ... the other fields as Nova left them (total 1, max_unit 1, min_unit 1, step_size 1, allocation_ratio 1.0)" \
    eval "PL inventory '$RP' $A100_RC >'$AV_TMP/inv' && json '$AV_TMP/inv' \"(d['total'], d['max_unit'], d['min_unit'], d['step_size'], d['allocation_ratio']) == (1, 1, 1, 1, 1.0)\""
check "  ... journalled: placement applied reserved 1, then 0, with RP and class; the chain intact" \
    eval "journal_placement $D >'$W/jp' && python3 -c \"
import json, sys
e = [json.loads(l) for l in open(sys.argv[1])]
got = [(x['reserved'], x['result'], x['rp'], x['rc']) for x in e]
want = [(1, 'applied', '$RP', '$A100_RC'), (0, 'applied', '$RP', '$A100_RC')]
assert got[-2:] == want, got
\" '$W/jp' && av journal verify >/dev/null"
ungate $D
step "release, reserve, scrub, give back"

# --- the same device with one_time_use: Nova reserves at allocation, accelvirt gives back ---
C2=00000000-0000-4000-8000-000000000002
mkdom "$W/vm2.xml" inst2 "$(uuid 2)" $D
check "one_time_use: Nova's allocation sets reserved = total; the hook prepares; sync leaves it (in use)" \
    eval "PL allocate '$RP' $A100_RC $C2 --otu && hook '$W/vm2.xml' inst2 prepare begin - && state_is $D in-use && av placement sync >/dev/null && reserved_is '$RP' $A100_RC 1"
gate $D
check "  ... the instance deleted, released, scrubbed: free, and reserved 0 (given back after the verified scrub)" \
    eval "PL deallocate $C2 && hook '$W/vm2.xml' inst2 release end - && wait_for 30 state_is $D free && wait_reserved '$RP' $A100_RC 0 && in_cands $A100_RC '$RP'"
ungate $D

# --- a failing scrub: quarantined, kept reserved ---
D=0000:31:00.0 RP=${HOST}_0000:31:00.0
mkdom "$W/vm3.xml" inst3 "$(uuid 3)" $D
touch "$GATES/fail-$D"
gate $D
check "a scrub that fails (its command step exits 1): the device quarantined" \
    eval "hook '$W/vm3.xml' inst3 prepare begin - && hook '$W/vm3.xml' inst3 release end - && wait_for 30 state_is $D quarantined"
check "  ... its RP keeps reserved = total" eval "sleep 1 && wait_reserved '$RP' $A100_RC 1"
check "  ... no candidate" eval "! in_cands $A100_RC '$RP'"
check "  ... status: in-sync, want 1" pl $D "(p['state'], p['want'], p['applied']) == ('in-sync', 1, 1)"
check "Nova's whole-inventory PUT resets it to 0; accelvirt reconcile asserts reserved 1 again" \
    eval "PL nova-put '$RP' $A100_RC && reserved_is '$RP' $A100_RC 0 && av reconcile >'$W/rec.out' 2>&1 && reserved_is '$RP' $A100_RC 1 || { cat '$W/rec.out'; false; }"
ungate $D
check "the operator's quarantine clear, then accelvirt placement sync: reserved 0" \
    eval "av quarantine clear $D >'$W/qc.out' 2>&1 && state_is $D free && av placement sync >>'$W/qc.out' 2>&1 && reserved_is '$RP' $A100_RC 0 || { cat '$W/qc.out'; false; }"
step "failing scrub"

# --- Placement stopped during a scrub, then started: the queued change applied ---
D=0000:4b:00.0 RP=${HOST}_0000:4B:00.0
mkdom "$W/vm4.xml" inst4 "$(uuid 4)" $D
check "a device released and scrubbing: reserved 1" \
    eval "hook '$W/vm4.xml' inst4 prepare begin - && hook '$W/vm4.xml' inst4 release end - && wait_for 30 test -e '$GATES/waiting-$D' && wait_reserved '$RP' $A100_RC 1"
sh "$HERE/placement-server.sh" stop "$SRV"
step "Placement stopped"
gate $D
check "Placement stopped, the scrub verifies: the device free in the pool all the same" wait_for 30 state_is $D free
# pending ADDRESS: placement.json says ADDRESS is pending.
pending() {
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if [x for x in d['devices'].values() if x['address']==sys.argv[2] and x['state']=='pending'] else 1)" "$W/state/placement.json" "$1"
}
check "  ... the change to 0 queued: pending in placement.json" wait_for 30 pending $D
check "  ... status --json: pending, want 0, with the time and one sentence of error" \
    pl $D "p['state'] == 'pending' and p['want'] == 0 and p['since'] and p['error']"
# (The worker's end re-asserts every device: with Placement down, all of
# them are pending, not only this one.)
check "  ... status (text): the device's 'placement: pending since' line and 'placement: N pending'" \
    eval "av status >'$W/st.txt' 2>&1 && awk '/^$D /{f=1; next} /^0000:/{f=0} f && /placement: pending since/{ok=1} END{exit !ok}' '$W/st.txt' && grep -Eq '^placement: [1-9][0-9]* pending' '$W/st.txt' || { cat '$W/st.txt'; false; }"
check "  ... accelvirt placement sync exits 1 with one line naming the device" \
    eval "av placement sync >'$W/ps.out' 2>&1; rc=\$?; [ \$rc -eq 1 ] && grep -qi '$D' '$W/ps.out' || { echo \"exit \$rc\"; cat '$W/ps.out'; false; }"
check "  ... journalled: placement pending" eval "journal_placement $D | tail -n1 >'$W/jp' && json '$W/jp' \"d['result'] == 'pending' and d['reserved'] == 0 and d['error']\""
P2=$(sh "$HERE/placement-server.sh" start "$SRV" "$PORT" 2>"$AV_TMP/server.err") ||
    bail "Placement starts again on port $PORT" "$(cat "$AV_TMP/server.err")"
step "Placement started again"
check "Placement started again: the RP still says reserved 1 (nothing applied meanwhile)" reserved_is "$RP" $A100_RC 1
check "  ... accelvirt reconcile applies the queued change: reserved 0, candidate again" \
    eval "av reconcile >'$W/rec.out' 2>&1 && reserved_is '$RP' $A100_RC 0 && in_cands $A100_RC '$RP' || { cat '$W/rec.out'; false; }"
check "  ... status: in-sync, applied 0, no error" pl $D "(p['state'], p['want'], p['applied'], p['error']) == ('in-sync', 0, 0, None)"
check "  ... journalled: placement applied 0 after the pending one" \
    eval "journal_placement $D | tail -n1 >'$W/jp' && json '$W/jp' \"(d['result'], d['reserved']) == ('applied', 0)\""
check "  ... accelvirt placement sync exits 0 now" av placement sync
ungate $D

# --- a 409: the RP's generation bumped between accelvirt's GET and PUT ---
D=0000:65:00.0 RP=${HOST}_0000:65:00.0
U65=$(PL uuid "$RP")
# proxy N: a proxy to Placement that makes N 409s on $RP's inventory PUTs.
proxy() {
    [ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null
    rm -f "$AV_TMP/proxy.port"
    python3 "$HERE/placement.py" --url "$URL" proxy "$AV_TMP/proxy.port" "$AV_TMP/proxy$1.log" "$1" "$U65" \
        </dev/null >>"$AV_TMP/proxy.out" 2>&1 &
    PROXY_PID=$!
    wait_for 10 test -s "$AV_TMP/proxy.port" || return 1
    clouds "$AV_TMP/clouds-proxy.yaml" "$(cat "$AV_TMP/proxy.port")"
}
# (The proxy runs in this shell, never in a check's command substitution,
# which would wait for it.)
PL set-reserved "$RP" $A100_RC 1 >/dev/null
proxy 1 || bail "a proxy to Placement starts" "$(cat "$AV_TMP/proxy.out")"
check "through a proxy that bumps the RP's generation before accelvirt's PUT: placement sync exits 0" \
    eval "AV_CLOUDS='$AV_TMP/clouds-proxy.yaml' av placement sync >'$W/409.out' 2>&1 || { cat '$W/409.out'; false; }"
check "  ... Placement answered 409 once and accelvirt retried: GET, PUT 200" \
    eval "grep -c '^bumped' '$AV_TMP/proxy1.log' | grep -qx 1 && grep -A3 '^bumped' '$AV_TMP/proxy1.log' | grep -q '^PUT .*inventories/$A100_RC 409' && grep -A3 '^bumped' '$AV_TMP/proxy1.log' | grep -q '^PUT .*inventories/$A100_RC 20[04]' || { cat '$AV_TMP/proxy1.log'; false; }"
check "  ... every request with X-Auth-Token and OpenStack-API-Version placement 1.29 or later (reserved = total needs 1.26)" \
    eval "python3 -c \"
import re, sys
bad = [l for l in open(sys.argv[1]) if not l.startswith('bumped') and not re.search(r'\\[placement 1\\.(29|3[0-9])\\] token=yes$', l)]
assert not bad, bad
\" '$AV_TMP/proxy1.log'"
check "  ... reserved 0, the other fields kept" \
    eval "PL inventory '$RP' $A100_RC >'$AV_TMP/inv' && json '$AV_TMP/inv' \"(d['reserved'], d['total'], d['max_unit'], d['min_unit'], d['step_size'], d['allocation_ratio']) == (0, 1, 1, 1, 1, 1.0)\""
PL set-reserved "$RP" $A100_RC 1 >/dev/null
proxy 20 || bail "a proxy to Placement starts" "$(cat "$AV_TMP/proxy.out")"
check "409s on every try: placement sync gives up after its retries, exit 1, the device pending" \
    eval "AV_CLOUDS='$AV_TMP/clouds-proxy.yaml' av placement sync >'$W/409.out' 2>&1; rc=\$?; [ \$rc -eq 1 ] && pending $D && reserved_is '$RP' $A100_RC 1 || { echo \"exit \$rc\"; cat '$W/409.out'; false; }"
check "  ... no more than 6 PUTs (the first and 5 retries)" \
    eval "n=\$(grep -c '^PUT .*inventories/$A100_RC 409' '$AV_TMP/proxy20.log'); [ \$n -ge 2 ] && [ \$n -le 6 ] || { cat '$AV_TMP/proxy20.log'; false; }"
echo "# inventory PUTs answered 409 before accelvirt gave up: $(grep -c '^PUT .*inventories/.* 409' "$AV_TMP/proxy20.log")"
kill "$PROXY_PID" 2>/dev/null
PROXY_PID=
check "  ... the next sync without the proxy applies it" \
    eval "av placement sync >/dev/null && reserved_is '$RP' $A100_RC 0"
step "409"

# --- SR-IOV: the PF's RP counts its VFs ---
W="$AV_TMP/qat"
mkdir -p "$W"
cp -a "$AV_TEST_HOSTS/sriov-fpga-qat" "$W/host"
av_novfs "$W/host" 0000:6b:00.0
QPOL="$AV_TMP/policies-qat"
mkdir -p "$QPOL"
cat >"$QPOL/10-nova.json" <<JSON
{"nova": {"placement_sync": true, "cloud": "test", "hypervisor_hostname": "$HOST"},
 "profiles": [
  {"name": "qat-vf", "match": {"vendor": "0x8086", "device": "0x4941"}, "attach": "sriov-vf", "numa": "none",
   "vfs": 2, "scrub": [{"method": "command", "argv": ["$HERE/scrub-gate.sh", "$GATES"], "timeout": 90}]}
 ]}
JSON
chmod 0755 "$QPOL" && chmod 0644 "$QPOL"/*.json
QRP=${HOST}_0000:6B:00.0
QRC=CUSTOM_PCI_8086_4941
export AV_POL="$QPOL"
check "a PF's VFs (\"vfs\": 2) made by reconcile: 2 free VFs" \
    eval "av reconcile >'$W/rec.out' 2>&1 && state_is 0000:6b:00.1 free && state_is 0000:6b:00.2 free || { cat '$W/rec.out'; false; }"
check "  ... Nova has not made the PF's RP yet: placement sync exits 1, the VFs pending, the error naming the RP" \
    eval "av placement sync >'$W/ps.out' 2>&1; rc=\$?; [ \$rc -eq 1 ] && pending 0000:6b:00.1 && av placement status --json >'$W/ps.json' && json '$W/ps.json' \"'$QRP' in json.dumps(d) and 'pending' in json.dumps(d)\" && grep -q '$QRP' '$W/ps.out' || { echo \"exit \$rc\"; cat '$W/ps.out'; false; }"
PL pci-rp "$HOST" 0000:6b:00.0 $QRC 2 >/dev/null || bail "the PF's RP"
check "  ... Nova's PF RP made (total 2): placement sync applies reserved 0" \
    eval "av placement sync >'$W/ps.out' 2>&1 && reserved_is '$QRP' $QRC 0 || { cat '$W/ps.out'; false; }"
mkdom "$W/vf.xml" vfinst "$(uuid 5)" 0000:6b:00.1
check "one VF released and scrubbing: the PF's RP gets reserved 1" \
    eval "hook '$W/vf.xml' vfinst prepare begin - && hook '$W/vf.xml' vfinst release end - && wait_for 30 test -e '$GATES/waiting-0000:6b:00.1' && wait_reserved '$QRP' $QRC 1"
check "  ... candidates: $QRC:1 still there (the other VF), $QRC:2 not" \
    eval "in_cands $QRC:1 '$QRP' && ! in_cands $QRC:2 '$QRP'"
gate 0000:6b:00.1
check "  ... scrubbed: reserved 0, $QRC:2 a candidate again" \
    eval "wait_for 30 state_is 0000:6b:00.1 free && wait_reserved '$QRP' $QRC 0 && in_cands $QRC:2 '$QRP'"
unset AV_POL
step "VFs"

finish
