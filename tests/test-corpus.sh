#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: a host's ordinary domains pass through accelvirt untouched
# (issue 19).  tests/data/domains-unmanaged/ holds valid libvirt domain XML
# written from libvirt's formatdomain documentation (each validates with
# virt-xml-validate and defines on libvirt's test driver): many vCPUs and CPU
# ids up to 16383 in vcpupin/emulatorpin/iothreadpin, numatune nodesets past
# node 1023, leading zeros, NUMA cells with distances and HMAT, hostdevs no
# profile manages (NICs, SCSI, USB, s390 mdevs, interface type='hostdev'),
# vDPA, vhost-user, IOMMUs, expander buses and switches, metadata in foreign
# namespaces, odd but legal names, CRLF line ends.  One more is made here: a
# domain given the host's own NIC, which is on the host and no profile
# matches.
#
# Each goes through every hook operation libvirt runs, on a host whose pool
# holds a GPU in use by another domain: exit 0, nothing on stdout but the
# input byte for byte at migrate begin and restore begin, the state dir and
# the host's tree unchanged.  A domain whose XML names no PCI, mdev or USB
# hostdev is run with the pool lock held by someone else: it must not wait
# for it.  `accelvirt rewrite --dry-run` gives each back byte for byte.
. "$AV_TEST_SRCDIR/lib.sh"

: "${ACCELVIRT_HOOK:?ACCELVIRT_HOOK is not set: run the tests with make check}"
AV=$ACCELVIRT
HOOK=$ACCELVIRT_HOOK
CORPUS="$AV_TEST_SRCDIR/data/domains-unmanaged"
command -v flock >/dev/null || { echo "Bail out! flock (util-linux) is needed"; exit 1; }

W="$AV_TMP/world"
mkdir -p "$W" "$W/domains"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$W/host"
boot_id "$W/host" 6c1f3b0e-2a4d-4e5f-8a9b-0c1d2e3f4a5b
hook_policies "$W/policies"

hook() {
    in=$1; shift
    ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$W/policies" \
    ACCELVIRT_WORKER=/bin/false ACCELVIRT_LOG_FILE="$AV_TMP/hook.log" \
    ACCELVIRT_TEST_LOCK_TIMEOUT_MS="${LOCK_MS:-30000}" \
        timeout 60 "$HOOK" "$@" <"$in"
}

# The pool: reconciled, and an A100 in use by another domain.
"$AV" --root "$W/host" --policy-dir "$W/policies" --state-dir "$W/state" status >/dev/null ||
    { echo "Bail out! cannot make the pool"; exit 1; }
cat >"$AV_TMP/gpu.xml" <<'EOF'
<domain type='kvm'>
  <name>gpu-tenant</name>
  <uuid>00000007-0000-4000-8000-000000000007</uuid>
  <memory unit='GiB'>4</memory>
  <vcpu placement='static' cpuset='0-3'>2</vcpu>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x17' slot='0x00' function='0x0'/></source></hostdev>
  </devices>
</domain>
EOF
hook "$AV_TMP/gpu.xml" gpu-tenant prepare begin - >/dev/null 2>&1 &&
    hook "$AV_TMP/gpu.xml" gpu-tenant start begin - >/dev/null 2>&1 ||
    { echo "Bail out! cannot start the GPU domain"; cat "$AV_TMP/hook.log"; exit 1; }
grep -q '"in-use"' "$W/state/pool.json" || { echo "Bail out! no device in use"; exit 1; }

# The host's own NIC (Intel X710 at 0000:02:00.0, on the host, no profile).
sed -e "s|<name>[^<]*</name>|<name>nic-tenant</name>|" \
    -e "s|<uuid>[^<]*</uuid>|<uuid>00000008-0000-4000-8000-000000000008</uuid>|" \
    -e "s|bus='0x81' slot='0x00' function='0x1'|bus='0x02' slot='0x00' function='0x0'|" \
    "$CORPUS/07-hostdev-pci-nic.xml" >"$W/domains/host-nic.xml"
grep -q "bus='0x02' slot='0x00' function='0x0'" "$W/domains/host-nic.xml" ||
    { echo "Bail out! cannot make the host-NIC domain"; exit 1; }

# facts FILE: "NAME-FILE MAY-MANAGE" of a domain, its name written to
# NAME-FILE (the hook's argv[1] must be the domain's <name>).
facts() {
    python3 - "$1" "$2" <<'PY'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
open(sys.argv[2], "w").write(root.findtext("name"))
devices = root.find("devices")
manage = False
for d in (devices if devices is not None else []):
    if d.tag == "hostdev" and d.get("mode", "subsystem") == "subsystem" and d.get("type") in ("pci", "mdev", "usb"):
        manage = True
    if d.tag == "interface" and d.get("type") == "hostdev":
        manage = True
print("yes" if manage else "no")
PY
}

# snapshot: the state dir and the host tree: type, mode, size, ctime, link, name.
snapshot() {
    (cd "$W" && find state host -printf '%y %m %s %C@ %l %P\n' | LC_ALL=C sort)
}

# one FILE NAME-FILE OP SUB LOCKED: one hook call, checked.
one() {
    f=$1; namefile=$2; op=$3; sub=$4; locked=$5
    snapshot >"$AV_TMP/before"
    if [ "$locked" = yes ]; then
        # Someone else holds the pool lock the whole time.
        (exec 9>>"$W/state/pool.lock" && flock -x 9 && exec sleep 60) >/dev/null 2>&1 </dev/null &
        holder=$!
        tries=0
        while flock -n "$W/state/pool.lock" true; do
            tries=$((tries + 1))
            [ "$tries" -lt 500 ] || { echo "the lock holder never took the lock"; return 1; }
            sleep 0.01
        done
        LOCK_MS=200 hook "$f" "$(cat "$namefile")" "$op" "$sub" - >"$AV_TMP/out" 2>"$AV_TMP/err"
        rc=$?
        kill "$holder" 2>/dev/null
        wait "$holder" 2>/dev/null
    else
        hook "$f" "$(cat "$namefile")" "$op" "$sub" - >"$AV_TMP/out" 2>"$AV_TMP/err"
        rc=$?
    fi
    snapshot >"$AV_TMP/after"
    [ "$rc" -eq 0 ] || { echo "exit $rc"; head -c 1500 "$AV_TMP/err"; return 1; }
    case "$op $sub" in
        "migrate begin" | "restore begin")
            cmp -s "$f" "$AV_TMP/out" || { echo "stdout is not the input byte for byte"; return 1; } ;;
        *)
            [ ! -s "$AV_TMP/out" ] || { echo "stdout not empty:"; head -c 500 "$AV_TMP/out"; return 1; } ;;
    esac
    [ ! -s "$AV_TMP/err" ] || { echo "stderr not empty:"; head -c 500 "$AV_TMP/err"; return 1; }
    diff "$AV_TMP/before" "$AV_TMP/after" >"$AV_TMP/diff" || { echo "state changed:"; head -20 "$AV_TMP/diff"; return 1; }
}

# The operations libvirt runs the qemu hook for (docs/hooks.rst), in a
# domain's life order.
OPS="prepare:begin start:begin started:begin reconnect:begin attach:begin migrate:begin restore:begin
stopped:end release:end"

for f in "$CORPUS"/*.xml "$W/domains/host-nic.xml"; do
    n=$(basename "$f" .xml)
    may_manage=$(facts "$f" "$AV_TMP/name") || { check "$n: read by python" false; continue; }
    locked=no
    [ "$may_manage" = yes ] || locked=yes
    for o in $OPS; do
        op=${o%%:*}; sub=${o#*:}
        what="$n: '$op $sub' passes untouched"
        [ "$locked" = no ] || what="$what, without the pool lock"
        av_n=$((av_n + 1))
        if out=$(one "$f" "$AV_TMP/name" "$op" "$sub" "$locked" 2>&1); then
            echo "ok $av_n - $what"
        else
            echo "not ok $av_n - $what"
            printf '%s\n' "$out" | sed 's/^/# /'
            av_failed=$((av_failed + 1))
        fi
    done
    check "$n: accelvirt rewrite --dry-run gives it back byte for byte" sh -c '
        "$1" --root "$2/host" --policy-dir "$2/policies" --state-dir "$2/state" rewrite --dry-run "$3" \
            >"$4/rw.out" 2>"$4/rw.err" && cmp -s "$3" "$4/rw.out" && [ ! -s "$4/rw.err" ] ||
            { head -c 800 "$4/rw.err"; exit 1; }' sh "$AV" "$W" "$f" "$AV_TMP"
done

# The GPU domain still holds its device: nothing above disturbed it.
check "the GPU tenant's device is still in use" grep -q '"in-use"' "$W/state/pool.json"

finish
