#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Makes the seed corpus of the fuzzers (tests/fuzz/corpus/NAME/) again from
# the project's real files: the tests' and the examples' domain XML and
# policies, and the pool files and journals that the hook, its worker and
# the CLI write on the fake hosts (a life of claims, releases, scrubs, a
# quarantine, mdevs, an enrolled ROM, a torn journal line).  Inputs named
# regress-* (once crashing inputs, kept as regression tests) are left alone.
#
#   make fuzz-corpus          (runs this with the build tree's programs)
# Then read `git status tests/fuzz/corpus` and commit what should stay.
set -eu
: "${AV_TEST_SRCDIR:?run make fuzz-corpus}"
: "${AV_TEST_HOSTS:?run make fuzz-corpus}"
: "${ACCELVIRT:?}" "${ACCELVIRT_HOOK:?}" "${ACCELVIRT_WORKER:?}"
src=$(cd "$AV_TEST_SRCDIR/.." && pwd)
out="$AV_TEST_SRCDIR/fuzz/corpus"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/accelvirt-corpus.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

for n in domain policy pool journal; do
    mkdir -p "$out/$n"
    find "$out/$n" -type f ! -name 'regress-*' -delete
done

# seed DIR PREFIX FILE...: copies each FILE as PREFIX-BASENAME.
seed() {
    d=$1; p=$2; shift 2
    for f in "$@"; do
        [ -f "$f" ] && cp "$f" "$out/$d/$p-$(basename "$f")"
    done
    return 0
}

seed domain data "$src"/tests/data/domains/*.xml
seed domain in "$src"/tests/xml/in/*.xml
seed domain out "$src"/tests/xml/out/*.xml
seed domain place "$src"/tests/place/*.xml
seed domain example "$src"/xml/examples/*.xml "$src"/xml/scrub-vm.xml

seed policy good "$src"/tests/data/policies/good/*.json
seed policy bad "$src"/tests/data/policies/bad/*.json
seed policy shipped "$src"/policies/*.json
seed policy hook "$src"/tests/data/hook-policies/*.json
seed policy place "$src"/tests/place/policies/*.json
seed policy vm-hook "$src"/tests/vm/hook-policies/*.json
seed policy vm-scrub "$src"/tests/vm/scrub-policies/*.json

# --- pools and journals: the hook's life on the fake hosts ---
SCRUB="$src/tests/data/hook-scrub.sh"
POL="$tmp/policies"
mkdir -p "$POL"
for f in "$src"/tests/data/hook-policies/*.json; do
    sed "s|@SCRUB@|$SCRUB|g" "$f" >"$POL/$(basename "$f")"
done
cp "$src"/policies/*.json "$POL/" 2>/dev/null || true
# The shipped examples may name the same devices: keep the test ones first.
for f in "$POL"/*.json; do
    case $(basename "$f") in 10-*|20-*) ;; *) mv "$f" "$POL/90-$(basename "$f")" ;; esac
done
"$ACCELVIRT" --policy-dir "$POL" policy check >/dev/null 2>&1 || rm -f "$POL"/90-*.json

snap=0
snapshot() {
    snap=$((snap + 1))
    [ -f "$S/pool.json" ] && cp "$S/pool.json" "$out/pool/life-$snap-$1.json"
    [ -f "$S/journal.jsonl" ] && cp "$S/journal.jsonl" "$out/journal/life-$snap-$1.jsonl"
    return 0
}
hook() {
    xml=$1; shift
    ACCELVIRT_ROOT="$H" ACCELVIRT_STATE_DIR="$S" ACCELVIRT_POLICY_DIR="$POL" \
    ACCELVIRT_WORKER="$ACCELVIRT_WORKER" ACCELVIRT_LOG_FILE="$tmp/log" \
    AV_SCRUB_LOG="$tmp/scrub.log" AV_SCRUB_FAIL="$tmp/scrub-fail" \
        "$ACCELVIRT_HOOK" "$@" <"$xml" >/dev/null 2>&1 || true
}
settle() {
    i=0
    while [ $i -lt 100 ] && grep -qE '"(dirty|scrubbing)"' "$S/pool.json" 2>/dev/null; do
        sleep 0.1; i=$((i + 1))
    done
}
dom() {
    # dom FILE NAME UUID HOSTDEV-XML
    printf "<domain type='kvm'>\n  <name>%s</name>\n  <uuid>%s</uuid>\n  <memory unit='GiB'>4</memory>\n  <vcpu placement='static'>2</vcpu>\n  %s\n  <devices>\n    %s\n  </devices>\n</domain>\n" "$2" "$3" "${5:-}" "$4" >"$1"
}
pci() {
    echo "$1" | sed -E "s|^([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$|<hostdev mode='subsystem' type='pci' managed='${2:-no}'><source><address domain='0x\1' bus='0x\2' slot='0x\3' function='0x\4'/></source></hostdev>|"
}

for host in two-socket-8gpu sriov-fpga-qat vgpu-mdev fpga-regions trap-shared-group; do
    H="$tmp/$host/host"; S="$tmp/$host/state"
    mkdir -p "$tmp/$host"
    cp -a "$AV_TEST_HOSTS/$host" "$H"
    "$ACCELVIRT" --root "$H" --policy-dir "$POL" --state-dir "$S" status >/dev/null 2>&1 || true
    snapshot "$host-status"
done

H="$tmp/two-socket-8gpu/host"; S="$tmp/two-socket-8gpu/state"
U1=00000001-0000-4000-8000-000000000001
U2=00000002-0000-4000-8000-000000000002
dom "$tmp/vm1.xml" vm1 $U1 "$(pci 0000:17:00.0)"
dom "$tmp/vm2.xml" vm2 $U2 "$(pci 0000:31:00.0 yes)" \
    "<metadata><nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'><nova:name>inst</nova:name><nova:owner><nova:user uuid='11111111-1111-4111-8111-111111111111'>u</nova:user><nova:project uuid='22222222-2222-4222-8222-222222222222'>p</nova:project></nova:owner></nova:instance></metadata>"
dom "$tmp/a6.xml" a6 00000003-0000-4000-8000-000000000003 "$(pci 0000:98:00.0)"
hook "$tmp/vm1.xml" vm1 prepare begin -
hook "$tmp/vm2.xml" vm2 prepare begin -
hook "$tmp/a6.xml" a6 prepare begin -
snapshot in-use
hook "$tmp/vm1.xml" vm1 release end -
settle; snapshot scrubbed
touch "$tmp/scrub-fail"
hook "$tmp/vm2.xml" vm2 release end -
settle; snapshot quarantined
rm -f "$tmp/scrub-fail"
"$ACCELVIRT" --root "$H" --policy-dir "$POL" --state-dir "$S" enroll --all >/dev/null 2>&1 || true
snapshot enrolled
"$ACCELVIRT" --root "$H" --policy-dir "$POL" --state-dir "$S" quarantine clear 0000:31:00.0 >/dev/null 2>&1 || true
snapshot cleared

# A release whose worker cannot start leaves the device dirty; a device
# gone from the host is missing.
dom "$tmp/vm3.xml" vm3 00000005-0000-4000-8000-000000000005 "$(pci 0000:4b:00.0)"
hook "$tmp/vm3.xml" vm3 prepare begin -
ACCELVIRT_ROOT="$H" ACCELVIRT_STATE_DIR="$S" ACCELVIRT_POLICY_DIR="$POL" ACCELVIRT_WORKER=/nonexistent \
    ACCELVIRT_LOG_FILE="$tmp/log" "$ACCELVIRT_HOOK" vm3 release end - <"$tmp/vm3.xml" >/dev/null 2>&1 || true
snapshot dirty
rm -f "$H/sys/bus/pci/devices/0000:b1:00.0"
"$ACCELVIRT" --root "$H" --policy-dir "$POL" --state-dir "$S" status >/dev/null 2>&1 || true
snapshot missing

H="$tmp/vgpu-mdev/host"; S="$tmp/vgpu-mdev/state"
M1=aaaaaaaa-0000-4000-8000-000000000001
dom "$tmp/vgpu.xml" vgpu 00000004-0000-4000-8000-000000000004 \
    "<hostdev mode='subsystem' type='mdev' model='vfio-pci'><source><address uuid='$M1'/></source></hostdev>" \
    "<metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'><av:placement><av:mdev profile='test-vgpu' uuid='$M1'/></av:placement></av:accelerators></metadata>"
hook "$tmp/vgpu.xml" vgpu prepare begin -
snapshot mdev
hook "$tmp/vgpu.xml" vgpu release end -
settle; snapshot mdev-released

# A journal whose last line a killed writer left torn, and the same after
# the next writer acknowledged it.
S="$tmp/torn"; mkdir -p "$S"
cp "$tmp/two-socket-8gpu/state/journal.jsonl" "$S/journal.jsonl"
printf '{"seq": 99, "time": "2026-' >>"$S/journal.jsonl"
snapshot torn
H="$tmp/two-socket-8gpu/host"
"$ACCELVIRT" --root "$H" --policy-dir "$POL" --state-dir "$S" status >/dev/null 2>&1 || true
snapshot torn-acknowledged

echo "corpus: $(for n in domain policy pool journal; do printf '%s %s  ' "$n" "$(find "$out/$n" -type f | wc -l)"; done)"
