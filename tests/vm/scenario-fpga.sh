# SPDX-License-Identifier: Apache-2.0
# Sourced by scenario-e2e.sh (boot 2, libvirtd up, accelvirt's hook installed) after
# scenario-hotplug.sh and before phase V: FPGAs programmed at request time (issue 15)
# on the real kernel. The node-1 ivshmem (0000:81:00.0) stands in for an FPGA card: its
# BAR2 is the card's configuration memory; fpga-prog (tests/vm/fpga-prog.c, built by
# build.sh) is its programmer: it writes a bitstream's bytes there (zeros after them)
# through VFIO with the group file accelvirt passes as fd 3, and reads them back.
# fpga-policies/45-fpga.json (before 50-rig.json) gives the device to profile rig-fpga:
# vfio-pci, keep-vfio, "program" fpga-prog write/verify, base rig-base, scrub
# [program-base], on_prepare and on_free appending a line to a log (fpga-driver.sh).
# Uses scenario-e2e.sh's fact, now, elapsed, st, $A, $V, $R and scenario-accel.sh's
# dev_of, wait_state, scenario-hotplug.sh's hstates.
#   F. 1. three bitstreams made here (root's files): rig-base ("AVBASE..."), rig-fn-x
#         (begins "AVFN:x-accel-1\n"; function id x-accel-1, compatible
#         profile:rig-fpga), rig-other (compatible dead:beef only); `accelvirt
#         bitstream add` each, `bitstream list`.
#      2. the operator puts the card on vfio-pci (keep-vfio: a free device of rig-fpga
#         sits there); `accelvirt program 0000:81:00.0 rig-base` by hand: journalled,
#         the pool says it holds rig-base, BAR2 holds its bytes (this guest reads it
#         through sysfs, the host its backing file: test-vm.sh's host snapshot);
#         the same again: skipped, it already holds it.
#      3. `accelvirt define` of avvm-fpga (a nested guest of the rig's kernel,
#         avvm.tenant=TEXT) with <av:request profile="rig-fpga" bitstream="rig-fn-x"/>:
#         claimed and programmed with rig-fn-x before the domain exists in libvirt
#         (journal "program" ok, verified; pool programmed = rig-fn-x; BAR2, here and
#         on the host, rig-fn-x's bytes).
#      4. `accelvirt start`: the hook's prepare lets it in (the device holds what the
#         placement asks for) and runs on_prepare; the nested guest reads the function
#         id from BAR2 and prints it, then writes TEXT (its own "logic") over BAR2.
#      5. destroy -> release -> the worker's program-base (rig-base back, the tenant's
#         TEXT gone: here and on the host), on_free, free; pool programmed = rig-base
#         by the scrub.
#      6. `virsh start avvm-fpga`: refused by the hook in one line (the device does not
#         hold rig-fn-x); nothing claimed, on_prepare not run.
#      7. `accelvirt start avvm-fpga`: programs rig-fn-x again and starts it; destroy,
#         program-base again, free.
#      8. defines asking for bitstream "nope" (not in the library) and "rig-other"
#         (does not fit rig-fpga): each fails with one line, no domain defined,
#         nothing claimed.
#      9. the end: undefine, 45-fpga.json removed, the device back on its host driver
#         (phase V uses it as rig-ivshmem).
echo "=== phase F" >> "$R/hook.log"
tF=$(now)
AVC="$A --connect qemu:///system --state-dir /var/lib/accelvirt --policy-dir /etc/accelvirt/policies"
export ACCELVIRT_WORKER="$(sed -n 's/^ACCELVIRT_WORKER=//p' "$R/env")" ACCELVIRT_LOG_FILE="$R/hook-e2e.log"
C=$(sed -n 's/^CACHE=//p' "$R/env")
F1=0000:81:00.0
FD=/sys/bus/pci/devices/$F1
FSECRET=FPGATENANT-$(sed -n 's/^SECRET=//p' "$R/env")
FLOG=/var/log/accelvirt-fpga-driver.log
BS=/root/avvm-bitstreams
fdrv() { basename "$(readlink "$FD/driver" 2>/dev/null)" 2>/dev/null; }
fst() { dev_of pci "$F1" state owner profile | tr '\n' ' '; }
fprog() {  # fprog: what pool.json says the device holds: "programmed=NAME/BY/SHA12" or "programmed=none"
    python3 -c 'import json,sys
d=json.load(open("/var/lib/accelvirt/pool.json"))
x=[x for x in d.get("devices", []) if x.get("address")==sys.argv[1] and x.get("kind", "pci")=="pci"]
p=x[0].get("programmed") if x else None
print("programmed=%s/%s/%s" % (p.get("name"), p.get("by"), (p.get("sha256") or "")[:12]) if p else "programmed=none")' "$F1" 2>&1
}
fbar() {  # fbar BITSTREAM: BAR2 against that bitstream's file (zero-bar cmp), and how often the tenant's TEXT is in it
    echo 1 > "$FD/enable" 2>/dev/null
    echo "$1:$(/avvm/zero-bar cmp "$FD/resource2" "$BS/$1.bit" 2>&1) text=$(/avvm/zero-bar count "$FD/resource2" "$FSECRET" 2>&1)"
    echo 0 > "$FD/enable" 2>/dev/null
}
host_snap() {  # host_snap TAG: test-vm.sh copies the host's backing file of ivshmem1 now; the seconds it took
    mkdir -p "$R/host-snap"
    : > "$R/host-snap/$1.req"
    t0=$(now)
    while ! test -e "$R/host-snap/$1.done"; do
        test "$(echo "$(now) $t0" | awk '{print ($1 - $2 > 20)}')" = 1 && { echo timeout; return; }
        sleep 0.2
    done
    elapsed "$t0"
}
fjournal() {  # fjournal: one token per journal entry about $F1 of the events of issue 15, in order
    python3 -c 'import json,sys
out=[]
for l in open("/var/lib/accelvirt/journal.jsonl"):
    try: e=json.loads(l)
    except Exception: continue
    ev=e.get("event")
    if ev not in ("program", "driver", "programmed", "programmed-unknown"): continue
    r=e.get("report") if isinstance(e.get("report"), dict) else e
    if sys.argv[1] not in (r.get("address"), e.get("address")): continue
    ok="ok" if r.get("ok") else "failed"
    if ev=="program":
        v=r.get("verify")
        out.append("program:%s:%s:verify=%s" % (r.get("name"), ok, (v or {}).get("ok") if v else None))
    elif ev=="driver":
        out.append("driver:%s:%s" % (r.get("point"), ok))
    elif ev=="programmed":
        out.append("programmed:%s:%s" % (e.get("name"), e.get("by")))
    else:
        out.append("programmed-unknown")
print(" ".join(out))' "$F1" 2>&1
}
fdriverlog() { cut -d' ' -f2- "$FLOG" 2>/dev/null | tr '\n' ';'; }
fconsole() { grep -a '^AVVM-TENANT-' /tmp/fpga-console.log 2>/dev/null | tr -d '\r' | tr '\n' ' '; }
fwait_console() {  # fwait_console SECS: until the tenant waits (or its domain stopped); the seconds
    t0=$(now)
    while ! grep -q '^AVVM-TENANT-WAIT' /tmp/fpga-console.log 2>/dev/null; do
        test "$(echo "$(now) $t0 $1" | awk '{print ($1 - $2 > $3)}')" = 1 && break
        $V domstate avvm-fpga 2>/dev/null | grep -q running || break
        sleep 1
    done
    elapsed "$t0"
}
fpgaxml() {  # fpgaxml NAME BITSTREAM: a nested tenant (the rig's kernel) asking for one rig-fpga holding BITSTREAM
    cat <<XMLEOF
<domain type='qemu'>
  <name>$1</name>
  <metadata>
    <av:accelerators xmlns:av="urn:accelvirt:domain:1">
      <av:request profile="rig-fpga" count="1" bitstream="$2"/>
    </av:accelerators>
  </metadata>
  <memory unit='MiB'>192</memory>
  <vcpu>1</vcpu>
$(rig_boot pc "avvm.tenant=$FSECRET")
    <serial type='file'><source path='/tmp/fpga-console.log'/></serial>
    <memballoon model='none'/>
  </devices>
</domain>
XMLEOF
}

# the programmer, the driver command and the profile: root's, not writable by others
cp "$C/fpga-prog" /etc/accelvirt/fpga-prog
cp "$R/fpga-driver.sh" /etc/accelvirt/fpga-driver.sh
chmod 755 /etc/accelvirt/fpga-prog /etc/accelvirt/fpga-driver.sh
: > "$FLOG"
for p in "$R"/fpga-policies/*.json; do
    sed -e "s|@FPGAPROG@|/etc/accelvirt/fpga-prog|g" -e "s|@FPGADRIVER@|/etc/accelvirt/fpga-driver.sh|g" \
        "$p" > "/etc/accelvirt/policies/$(basename "$p")"
done
chmod 644 /etc/accelvirt/policies/*.json
cp /etc/accelvirt/policies/45-fpga.json "$R/policy-phase-f.json"
$AVC policy check > "$R/fpga-policy-check.out" 2>&1
fact fpga_policy rc=$? "$(grep -c 'rig-fpga' "$R/fpga-policy-check.out")"
st > "$R/status-fpga-0.json"
fact fpga_before "$(fst)" driver="$(fdrv)" "$(fprog)"

# 1. the library: three files made here, added from root's own directory
mkdir -p "$BS"
chmod 700 "$BS"
python3 - "$BS" <<'PYEOF'
import sys
def mk(name, head, fill, size):
    b = head.encode()
    b += (fill.encode() * (size // len(fill) + 1))[:size - len(b)]
    open("%s/%s.bit" % (sys.argv[1], name), "wb").write(b)
mk("rig-base", "AVBASE:rig-base-1\n", "AVBASE-", 8192)
mk("rig-fn-x", "AVFN:x-accel-1\n", "XACCEL1-LOGIC-", 20000)
mk("rig-other", "AVFN:other-1\n", "OTHER-LOGIC-", 4096)
PYEOF
chmod 600 "$BS"/*.bit
for b in rig-base rig-fn-x rig-other; do cp "$BS/$b.bit" "$R/fpga-$b.bit"; done
$AVC bitstream add "$BS/rig-base.bit" --name rig-base --description "the rig's base image" \
    > "$R/fpga-add-base.out" 2>&1
fact fpga_add_base rc=$? "$(head -n1 "$R/fpga-add-base.out")"
$AVC bitstream add "$BS/rig-fn-x.bit" --name rig-fn-x --function-id x-accel-1 --compatible profile:rig-fpga \
    > "$R/fpga-add-fnx.out" 2>&1
fact fpga_add_fnx rc=$? "$(head -n1 "$R/fpga-add-fnx.out")"
$AVC bitstream add "$BS/rig-other.bit" --name rig-other --function-id other-1 --compatible dead:beef \
    > "$R/fpga-add-other.out" 2>&1
fact fpga_add_other rc=$? "$(head -n1 "$R/fpga-add-other.out")"
fact fpga_sha256 "base=$(sha256sum < "$BS/rig-base.bit" | cut -d' ' -f1)" \
    "fnx=$(sha256sum < "$BS/rig-fn-x.bit" | cut -d' ' -f1)" "other=$(sha256sum < "$BS/rig-other.bit" | cut -d' ' -f1)"
fact fpga_library "$(stat -c '%a %U' /var/lib/accelvirt/bitstreams 2>&1)" \
    files="$(ls /var/lib/accelvirt/bitstreams 2>/dev/null | grep -c '^[0-9a-f]\{64\}\.bit$')" \
    modes="$(stat -c '%a' /var/lib/accelvirt/bitstreams/*.bit 2>/dev/null | sort -u | tr '\n' ' ')"
flist() {  # flist TAG: bitstream list --json into $R/fpga-list-TAG.json; "NAME:SHA12:SIZE:FUNCTION:COMPATIBLE:held=yes|no" each
    $AVC bitstream list --json > "$R/fpga-list-$1.json" 2> "$R/fpga-list-$1.err"
    echo "rc=$? $(python3 -c 'import json,sys
d=json.load(open(sys.argv[1]))
if isinstance(d, dict): d=d.get("bitstreams", [])
print(" ".join("%s:%s:%s:%s:%s:held=%s" % (b.get("name"), (b.get("sha256") or "")[:12], b.get("size"), b.get("function_id"),
    ",".join(b.get("compatible") or []), "yes" if sys.argv[2] in json.dumps(b) else "no") for b in d))' "$R/fpga-list-$1.json" "$F1" 2>&1)"
}
fact fpga_list "$(flist 1)"

# 2. on vfio-pci (keep-vfio), then programmed by hand with the base image
echo vfio-pci > "$FD/driver_override"
test -e "$FD/driver" && echo "$F1" > "$FD/driver/unbind"
echo "$F1" > /sys/bus/pci/drivers_probe
fact fpga_on_vfio driver="$(fdrv)" group="$(basename "$(readlink "$FD/iommu_group")")"
t0=$(now)
$AVC program "$F1" rig-base > "$R/fpga-program-base.out" 2> "$R/fpga-program-base.err"
fact fpga_program_base rc=$? seconds="$(elapsed "$t0")" "$(fst)" "$(fprog)" err="$(head -n1 "$R/fpga-program-base.err")"
fact fpga_bar_base0 "$(fbar rig-base)" snap="$(host_snap base0)"
$AVC program "$F1" rig-base > "$R/fpga-program-again.out" 2> "$R/fpga-program-again.err"
fact fpga_program_again rc=$? "$(fprog)" out="$(tr '\n' ' ' < "$R/fpga-program-again.out")"
fact fpga_list_held "$(flist 2)"
fact fpga_journal_hand "$(fjournal)"

# 3. accelvirt define: placed, claimed, programmed with rig-fn-x before libvirt has the domain
fpgaxml avvm-fpga rig-fn-x > "$R/fpga.xml"
$AVC define --dry-run "$R/fpga.xml" > "$R/fpga-dry.out" 2>&1
fact fpga_dry rc=$? "$(grep -i 'program\|holds' "$R/fpga-dry.out" | head -n2 | tr '\n' ' ')" \
    defined="$($V domstate avvm-fpga >/dev/null 2>&1 && echo yes || echo no)" "$(fprog)"
t0=$(now)
$AVC define --json "$R/fpga.xml" > "$R/fpga-define.json" 2> "$R/fpga-define.err"
fact fpga_define rc=$? seconds="$(elapsed "$t0")" "$(fst)" "$(fprog)" driver="$(fdrv)" err="$(head -n1 "$R/fpga-define.err")"
$V dumpxml --inactive avvm-fpga > "$R/fpga-inactive.xml" 2>&1
fact fpga_defined_xml hostdev81="$(grep -c "bus='0x81'" "$R/fpga-inactive.xml")" \
    bitstream="$(grep -o 'bitstream="[^"]*"' "$R/fpga-inactive.xml" | sort -u | tr '\n' ' ')"
fact fpga_bar_fnx "$(fbar rig-fn-x)" snap="$(host_snap fnx)"
fact fpga_journal_define "$(fjournal)"

# 4. accelvirt start: the hook's check and on_prepare; the tenant reads the function id
rm -f /tmp/fpga-console.log
t0=$(now)
$AVC start avvm-fpga > "$R/fpga-start.out" 2>&1
fact fpga_start rc=$? seconds="$(elapsed "$t0")" "$(fst)" "$(fprog)" driver="$(fdrv)" out="$(tr '\n' ' ' < "$R/fpga-start.out" | cut -c1-300)"
fact fpga_tenant_boot seconds="$(fwait_console 240)" "$(fconsole)"
cp /tmp/fpga-console.log "$R/fpga-console-1.log" 2>/dev/null
fact fpga_driver_prepare "$(fdriverlog)"

# 5. destroy: release, the worker's program-base, on_free, free
$V destroy avvm-fpga > "$R/fpga-destroy.out" 2>&1
fact fpga_destroy rc=$? "$(fst)"
fact fpga_free seconds="$(wait_state pci "$F1" free 180)" "$(fst)" "$(fprog)" driver="$(fdrv)"
fact fpga_bar_base1 "$(fbar rig-base)" snap="$(host_snap base1)"
fact fpga_driver_free "$(fdriverlog)"
fact fpga_journal_scrub "$(fjournal)"
cp /var/lib/accelvirt/journal.jsonl "$R/journal-fpga-1.jsonl" 2>/dev/null

# 6. virsh start: the device holds rig-base, not rig-fn-x: the hook refuses
hstates > "$R/fpga-states-before-virsh.txt"
$V start avvm-fpga > "$R/fpga-virsh-start.out" 2>&1
fact fpga_virsh_refused rc=$? lines="$(grep -c 'accelvirt:' "$R/fpga-virsh-start.out")" \
    state="$($V domstate avvm-fpga 2>/dev/null | head -n1)" "$(grep -o 'accelvirt:.*' "$R/fpga-virsh-start.out" | head -n1)"
hstates > "$R/fpga-states-after-virsh.txt"
head -n1 "$R/fpga-states-before-virsh.txt" > /tmp/fb
head -n1 "$R/fpga-states-after-virsh.txt" > /tmp/fa
fact fpga_virsh_unchanged "$(cmp -s /tmp/fb /tmp/fa && echo same || echo changed)" "$(fst)" "$(fprog)" \
    driverlog="$(grep -c . "$FLOG")"

# 7. accelvirt start programs it again and starts it; destroy, program-base again
rm -f /tmp/fpga-console.log
t0=$(now)
$AVC start avvm-fpga > "$R/fpga-start2.out" 2>&1
fact fpga_start2 rc=$? seconds="$(elapsed "$t0")" "$(fst)" "$(fprog)" state="$($V domstate avvm-fpga 2>/dev/null | head -n1)" \
    out="$(tr '\n' ' ' < "$R/fpga-start2.out" | cut -c1-300)"
$V destroy avvm-fpga > "$R/fpga-destroy2.out" 2>&1
fact fpga_destroy2 rc=$?
fact fpga_free2 seconds="$(wait_state pci "$F1" free 180)" "$(fst)" "$(fprog)" bar="$(fbar rig-base)"
fact fpga_driver_all "$(fdriverlog)"
fact fpga_journal_all "$(fjournal)"

# 8. an unknown and an incompatible bitstream: one line each, before any domain exists
hstates > "$R/fpga-states-before-bad.txt"
fpgaxml avvm-fpga-nope nope > "$R/fpga-nope.xml"
$AVC define "$R/fpga-nope.xml" > "$R/fpga-nope.out" 2> "$R/fpga-nope.err"
fact fpga_nope rc=$? lines="$(wc -l < "$R/fpga-nope.err")" "$(head -n1 "$R/fpga-nope.err")"
fpgaxml avvm-fpga-other rig-other > "$R/fpga-other.xml"
$AVC define "$R/fpga-other.xml" > "$R/fpga-other.out" 2> "$R/fpga-other.err"
fact fpga_other rc=$? lines="$(wc -l < "$R/fpga-other.err")" "$(head -n1 "$R/fpga-other.err")"
hstates > "$R/fpga-states-after-bad.txt"
head -n1 "$R/fpga-states-before-bad.txt" > /tmp/fb
head -n1 "$R/fpga-states-after-bad.txt" > /tmp/fa
fact fpga_bad_none domains="$($V list --all --name 2>/dev/null | grep -c '^avvm-fpga-')" \
    states="$(cmp -s /tmp/fb /tmp/fa && echo same || echo changed)" "$(fst)"

# 9. the end: the domain and the profile gone, the device back on its host driver
cp /tmp/fpga-console.log "$R/fpga-console-2.log" 2>/dev/null
$AVC undefine avvm-fpga > "$R/fpga-undefine.out" 2>&1
fact fpga_undefine rc=$?
"$A" journal verify > "$R/journal-verify-fpga.txt" 2>&1
fact fpga_journal_verify rc=$?
cp /var/lib/accelvirt/journal.jsonl "$R/journal-fpga.jsonl" 2>/dev/null
cp /var/lib/accelvirt/pool.json "$R/pool-fpga.json" 2>/dev/null
cp "$FLOG" "$R/fpga-driver.log" 2>/dev/null
cp /var/log/libvirt/qemu/avvm-fpga.log "$R/fpga-qemu.log" 2>/dev/null
rm -f /etc/accelvirt/policies/45-fpga.json
echo > "$FD/driver_override"
test -e "$FD/driver" && echo "$F1" > "$FD/driver/unbind"
echo "$F1" > /sys/bus/pci/drivers_probe
st > "$R/status-fpga-end.json"
fact fpga_end "$(fst)" driver="$(fdrv)"
fact fpga_phase seconds="$(elapsed "$tF")"
unset ACCELVIRT_WORKER ACCELVIRT_LOG_FILE
