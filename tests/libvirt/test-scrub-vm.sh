#!/bin/bash
# The host libvirt tier, scrub method "vm": the real accelvirt worker boots the
# tiny scrub image (build-scrub-image.sh: the Debian kernel and a busybox
# initramfs) as a transient TCG domain under the tier's private libvirtd, from
# the shipped template xml/scrub-vm.xml (type qemu, the image's paths, no
# @HOSTDEV@: this machine has no device to give it), and reads the image
# contract off libvirt's events:
#
#   - the image powers off: the device is free, the journal's report has the
#     domain, reason "shutdown" and the time the scrub boot took;
#   - the image hangs: destroyed at the step's timeout, the device quarantined
#     with "did not power off within N s; destroyed";
#   - the image panics (pvpanic) or reboots: quarantined ("crashed", "rebooted");
#   - a template with on_reboot destroy (a reboot would look like a power-off):
#     refused before anything boots, quarantined;
#   - no scrub domain is left behind (virsh list --all), no worker either.
#
# The devices are the A100s of a private copy of the fake host two-socket-8gpu,
# released through the real hook run directly (it starts the worker detached,
# with our environment: ACCELVIRT_CONNECT reaches the private libvirtd). The
# failure cases run side by side. TAP on stdout; root; about 25 s here.
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/harness.sh"
lv_enter "$0" "$@"

top=$(cd "$here/../.." && pwd)
HOOK_BIN=${ACCELVIRT_HOOK:-$top/accelvirt-hook}
WORKER_BIN=${ACCELVIRT_WORKER:-$top/accelvirt-worker}
AV_BIN=${ACCELVIRT:-$top/accelvirt}
HOSTS=${AV_TEST_HOSTS:-$top/tests/data/hosts}
CACHE=${AV_LV_CACHE:-${AV_TEST_BUILDDIR:-$top/tests}/libvirt/cache}
TEMPLATE=$top/xml/scrub-vm.xml
HANG_TIMEOUT=10
PLAN=19

echo "1..$PLAN"
for b in "$HOOK_BIN" "$WORKER_BIN" "$AV_BIN"; do
	[ -x "$b" ] || lv_die "$b is not built (make accelvirt-hook accelvirt-worker accelvirt)"
done
[ -d "$HOSTS/two-socket-8gpu/sys" ] || lv_die "no fake host $HOSTS/two-socket-8gpu (make hosts)"
[ -r "$TEMPLATE" ] || lv_die "no $TEMPLATE"
t0=$(date +%s.%N)
CACHE=$("$here/build-scrub-image.sh" "$CACHE" 2>&1 | tail -n 1)
[ -f "$CACHE/vmlinux" ] && [ -f "$CACHE/scrub.cpio.gz" ] ||
	lv_die "build-scrub-image.sh failed: $CACHE"
lv_log "scrub image ready in $(echo "$(date +%s.%N) - $t0" | bc) s: $CACHE"

lv_setup
# what the libvirt package creates on a real host (the template logs the console there)
mkdir -p /var/log/libvirt/qemu
lv_start || lv_die "libvirtd did not start (see above)"

n=0
failed=0
ok() {
	n=$((n + 1))
	echo "ok $n - $1"
}
not_ok() {
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n - $1"
	shift
	local l
	for l in "$@"; do printf '%s\n' "$l" | lv_comment; done
	av_diag
}
check() {
	local d=$1 out
	shift
	if out=$("$@" 2>&1); then ok "$d"; else not_ok "$d" "failed: $*" "$out"; fi
}

AVW=$LV_WORK/av
W=$AVW/world
POL=$AVW/policies
mkdir -p "$POL" "$AVW/templates"
cp -a "$HOSTS/two-socket-8gpu" "$W.host" && mkdir -p "$W" && mv "$W.host" "$W/host" ||
	lv_die "cannot copy the fake host"

# template MODE [SED-EXPR]: the shipped template for the tier: TCG, the cached
# image, accelvirt.scrub=MODE on the kernel command line, no @HOSTDEV@.
# no_timer_check: under TCG on a loaded machine the kernel's early IO-APIC
# timer check can fail ("IO-APIC + timer doesn't work!"), a panic before
# pvpanic is loaded, which would look like a hang.
template() {
	local f="$AVW/templates/$1.xml"
	sed -e "s|<domain type='kvm'>|<domain type='qemu'>|" \
		-e "s|<kernel>[^<]*</kernel>|<kernel>$CACHE/vmlinux</kernel>|" \
		-e "s|<initrd>[^<]*</initrd>|<initrd>$CACHE/scrub.cpio.gz</initrd>|" \
		-e "s|<cmdline>\([^<]*\)</cmdline>|<cmdline>\1 no_timer_check accelvirt.scrub=$1</cmdline>|" \
		-e "s|<memory unit='MiB'>[0-9]*</memory>|<memory unit='MiB'>128</memory>|" \
		-e "/@HOSTDEV@/d" ${2:+-e "$2"} "$TEMPLATE" >"$f"
	echo "$f"
}
T_OK=$(template poweroff)
T_HANG=$(template hang '/<uuid>/d')    # no <uuid>: accelvirt writes the pool's
T_PANIC=$(template panic)
T_REBOOT=$(template reboot)
T_BAD=$AVW/templates/bad.xml
sed "s|<on_reboot>restart</on_reboot>|<on_reboot>destroy</on_reboot>|" "$T_OK" >"$T_BAD"

GPU_OK=0000:17:00.0
GPU_HANG=0000:31:00.0
GPU_PANIC=0000:4b:00.0
GPU_REBOOT=0000:65:00.0
GPU_BAD=0000:ca:00.0

# One profile a GPU, each with its own scrub VM (matched by address).
profile() { # NAME ADDRESS TEMPLATE TIMEOUT
	cat <<EOF
    {
      "name": "$1",
      "match": {"vendor": "0x10de", "device": "0x20f1", "address": ["$2"]},
      "attach": "vfio-pci",
      "numa": "none",
      "scrub": [{"method": "vm", "template": "$3", "timeout": $4}],
      "restore_driver": "on-release"
    }
EOF
}
{
	echo '{"description": "accelvirt libvirt tier (tests/libvirt/test-scrub-vm.sh)", "profiles": ['
	profile vm-ok "$GPU_OK" "$T_OK" 120
	echo ,
	profile vm-hang "$GPU_HANG" "$T_HANG" "$HANG_TIMEOUT"
	echo ,
	profile vm-panic "$GPU_PANIC" "$T_PANIC" 120
	echo ,
	profile vm-reboot "$GPU_REBOOT" "$T_REBOOT" 120
	echo ,
	profile vm-bad "$GPU_BAD" "$T_BAD" 120
	echo ']}'
} >"$POL/10-vm.json"
chmod 0755 "$POL" && chmod 0644 "$POL/10-vm.json"

# av_hook XML ARGS...: the real hook on our world, as a wrapper would run it;
# the worker it starts inherits this environment.
av_hook() {
	local xml=$1
	shift
	env ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" \
		ACCELVIRT_WORKER="$WORKER_BIN" ACCELVIRT_LOG_FILE="$W/hook.log" \
		ACCELVIRT_CONNECT="$LV_URI" "$HOOK_BIN" "$@" <"$xml" 2>>"$W/direct.err"
}

mkdom() { # FILE NAME UUID ADDRESS
	local dom bus slot fn
	IFS=':.' read -r dom bus slot fn <<<"$4"
	cat >"$1" <<EOF
<domain type='qemu'>
  <name>$2</name>
  <uuid>$3</uuid>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices><hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x$dom' bus='0x$bus' slot='0x$slot' function='0x$fn'/></source></hostdev></devices>
</domain>
EOF
}

# pool_dev ADDRESS: "STATE" of the device in the pool file.
pool_dev() {
	python3 - "$W/state/pool.json" "$1" <<'PY' 2>/dev/null || echo absent
import json, sys
d = json.load(open(sys.argv[1]))
print([x["state"] for x in d["devices"] if x.get("address") == sys.argv[2]][0])
PY
}
# wait_dev ADDRESS STATE SECONDS
wait_dev() {
	local i got=
	for ((i = 0; i < $3 * 10; i++)); do
		got=$(pool_dev "$1")
		[ "$got" = "$2" ] && return 0
		sleep 0.1
	done
	echo "$1 is '$got', not '$2', after $3 s"
	return 1
}
# scrub_fact ADDRESS KEY: from the last "scrubbed" journal entry of ADDRESS:
# KEY "reason" (the quarantine reason) or a key of the vm step's report entry.
scrub_fact() {
	python3 - "$W/state/journal.jsonl" "$1" "$2" <<'PY'
import json, sys
last = None
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("event") in ("scrubbed", "scrub-certificate") and e.get("address") == sys.argv[2]:
        last = e
assert last, "no scrubbed entry"
if sys.argv[3] == "reason":
    print(last.get("reason"))
else:
    steps = last["steps"] if "steps" in last else last["report"]["steps"]
    step = steps[0]
    assert step["method"] == "vm", step
    v = step.get(sys.argv[3].replace("step.", "", 1))
    print(json.dumps(v) if not isinstance(v, str) else v)
PY
}
no_domains() {
	local l
	l=$(lv_virsh list --all --name 2>&1 | sed '/^$/d')
	[ -z "$l" ] || { echo "left: $l"; return 1; }
}
vm_name() { # ADDRESS: the name the worker gives the scrub VM of the device (from its pool identity)
	python3 - "$W/state/pool.json" "$1" <<'PY'
import hashlib, json, sys
d = json.load(open(sys.argv[1]))
i = [x["identity"] for x in d["devices"] if x.get("address") == sys.argv[2]][0]
print("accelvirt-scrub-" + hashlib.sha256(i.encode()).hexdigest()[:12])
PY
}

av_diag() {
	lv_diag
	local f
	for f in "$W/hook.log" "$W/direct.err"; do
		[ -s "$f" ] || continue
		lv_log "--- $f (tail) ---"
		tail -n 20 "$f" | lv_comment
	done
	for f in /var/log/libvirt/qemu/accelvirt-scrub-*.console.log; do
		[ -r "$f" ] || continue
		lv_log "--- $f (tail) ---"
		tail -n 5 "$f" | lv_comment
	done
}

# release ADDRESS NAME UUID: the hook gives the GPU to a domain (prepare) and
# takes it back (release end): dirty, and a worker is started.
release() {
	mkdom "$LV_WORK/$2.xml" "$2" "$3" "$1"
	av_hook "$LV_WORK/$2.xml" "$2" prepare begin - >/dev/null || { cat "$W/direct.err"; return 1; }
	[ "$(pool_dev "$1")" = in-use ] || { echo "$1 not in-use after prepare"; return 1; }
	av_hook "$LV_WORK/$2.xml" "$2" release end - >/dev/null || { cat "$W/direct.err"; return 1; }
}

# --- 1-6: the image powers off: free ---
check "set-up: $GPU_OK prepared and released through the hook; the worker starts" \
	release "$GPU_OK" dom-ok 5a0e9a9e-6c1b-4d55-9a63-acce1e5a0201
t_rel=$(date +%s.%N)
check "poweroff: the scrub VM powers off; $GPU_OK is free" wait_dev "$GPU_OK" free 120
t_free=$(date +%s.%N)
boot=$(scrub_fact "$GPU_OK" seconds 2>/dev/null)
lv_log "scrub boot (TCG): ${boot:-?} s for the vm step; $(echo "$t_free - $t_rel" | bc) s from release end to free"
name_ok=$(vm_name "$GPU_OK")
facts_ok() {
	[ "$(scrub_fact "$GPU_OK" domain)" = "$name_ok" ] || { scrub_fact "$GPU_OK" domain; return 1; }
	[ "$(scrub_fact "$GPU_OK" step.reason)" = shutdown ] || { scrub_fact "$GPU_OK" step.reason; return 1; }
	[ "$(scrub_fact "$GPU_OK" hostdev)" = null ] || { scrub_fact "$GPU_OK" hostdev; return 1; }
	[ "$(scrub_fact "$GPU_OK" ok)" = true ] || return 1
	python3 -c "import sys; s=float(sys.argv[1]); assert 0 < s < 120, s" "$boot"
}
check "poweroff: the journal's report names the domain $name_ok, reason shutdown, no hostdev, ${boot:-?} s" facts_ok
console_ok() {
	grep -q 'accelvirt-scrub-image: scrubbed; powering off' "/var/log/libvirt/qemu/$name_ok.console.log" ||
		{ tail -n 5 "/var/log/libvirt/qemu/$name_ok.console.log"; return 1; }
}
check "poweroff: the image's console is logged in /var/log/libvirt/qemu/$name_ok.console.log" console_ok
check "poweroff: no scrub domain left (virsh list --all)" no_domains
check "poweroff: $GPU_OK back on nvidia in the fake tree; the journal verifies" eval \
	'[ "$(basename "$(readlink "$W/host/sys/bus/pci/devices/$GPU_OK/driver")")" = nvidia ] &&
	 "$AV_BIN" --state-dir "$W/state" journal verify >/dev/null'

# --- 7-14: the failures, side by side ---
rel_fail() {
	release "$GPU_HANG" dom-hang 5a0e9a9e-6c1b-4d55-9a63-acce1e5a0202 &&
		release "$GPU_PANIC" dom-panic 5a0e9a9e-6c1b-4d55-9a63-acce1e5a0203 &&
		release "$GPU_REBOOT" dom-reboot 5a0e9a9e-6c1b-4d55-9a63-acce1e5a0204 &&
		release "$GPU_BAD" dom-bad 5a0e9a9e-6c1b-4d55-9a63-acce1e5a0205
}
t_rel=$(date +%s.%N)
check "set-up: $GPU_HANG, $GPU_PANIC, $GPU_REBOOT, $GPU_BAD released; workers start" rel_fail
reason_is() { # ADDRESS PATTERN
	local r
	r=$(scrub_fact "$1" reason)
	printf '%s\n' "$r" | grep -qE -- "$2" || { echo "reason: $r"; return 1; }
}
# The running scrub VM carries the pool's token of its scrub in its metadata,
# which is what accelvirt's hook checks before it lets it have the device.
token_in_xml() {
	local name tok xml i
	name=$(vm_name "$GPU_HANG")
	for ((i = 0; i < 300; i++)); do
		xml=$(lv_virsh dumpxml "$name" 2>/dev/null) && break
		sleep 0.1
	done
	[ -n "$xml" ] || { echo "no running $name"; return 1; }
	read -r tok uuid <<<"$(python3 - "$W/state/pool.json" "$GPU_HANG" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
x = [x for x in d["devices"] if x.get("address") == sys.argv[2]][0]
print(x.get("scrub_token"), x.get("scrub_domain"))
PY
)"
	printf '%s\n' "$tok" | grep -Eqx '[0-9a-f]{32}' || { echo "pool token: $tok"; return 1; }
	printf '%s\n' "$xml" | grep -Eq "<av:scrub token=.$tok. identity=" || { echo "no av:scrub token=$tok in:"; printf '%s\n' "$xml" | grep -A3 '<metadata'; return 1; }
	printf '%s\n' "$xml" | grep -q "<uuid>$uuid</uuid>" || { echo "the domain's UUID is not the pool's scrub_domain $uuid"; return 1; }
}
check "hang: while it runs, the scrub VM's metadata carries the pool's scrub token of $GPU_HANG (av:scrub), and its UUID is the pool's scrub_domain (its template has no <uuid>)" token_in_xml
check "panic: quarantined" wait_dev "$GPU_PANIC" quarantined 120
check "panic: the reason says the scrub VM crashed" \
	reason_is "$GPU_PANIC" "^scrub step 1 \\(vm\\) failed: the scrub VM '$(vm_name "$GPU_PANIC")' crashed after"
check "reboot: quarantined, the reason says the scrub VM rebooted; destroyed" eval \
	'wait_dev "$GPU_REBOOT" quarantined 120 &&
	 reason_is "$GPU_REBOOT" "the scrub VM .$(vm_name "$GPU_REBOOT"). rebooted after .* instead of powering off.*; destroyed$"'
check "on_reboot destroy: the template is refused, nothing boots, quarantined" eval \
	'wait_dev "$GPU_BAD" quarantined 60 &&
	 reason_is "$GPU_BAD" "templates/bad.xml. says <on_reboot>destroy</on_reboot>; the image contract needs <on_reboot>restart</on_reboot>" &&
	 [ ! -e "/var/log/libvirt/qemu/$(vm_name "$GPU_BAD").console.log" ]'
check "hang: quarantined at the timeout" wait_dev "$GPU_HANG" quarantined $((HANG_TIMEOUT + 60))
t_hang=$(date +%s.%N)
check "hang: the reason says it did not power off within $HANG_TIMEOUT s; destroyed (after >= $HANG_TIMEOUT s)" eval \
	'reason_is "$GPU_HANG" "^scrub step 1 \\(vm\\) failed: the scrub VM .$(vm_name "$GPU_HANG"). did not power off within $HANG_TIMEOUT s; destroyed$" &&
	 [ "$(scrub_fact "$GPU_HANG" reason)" != null ] &&
	 python3 -c "import sys; assert float(sys.argv[1]) >= $HANG_TIMEOUT" "$(echo "$t_hang - $t_rel" | bc)"'
lv_log "failure cases: $(echo "$t_hang - $t_rel" | bc) s from the releases to the last quarantine"
check "hang: quarantined, $GPU_HANG keeps no scrub token or scrub domain" eval \
	'! grep -Eq "scrub_token|scrub_domain" "$W/state/pool.json"'
check "failures: the quarantined devices stay on vfio-pci; the journal verifies" eval \
	'for a in $GPU_HANG $GPU_PANIC $GPU_REBOOT $GPU_BAD; do
	   [ "$(basename "$(readlink "$W/host/sys/bus/pci/devices/$a/driver")")" = vfio-pci ] || { echo "$a"; exit 1; }
	 done; "$AV_BIN" --state-dir "$W/state" journal verify >/dev/null'

# --- 15-17: nothing left ---
check "no scrub domain left (virsh list --all)" no_domains
check "no accelvirt worker left running" lv_no_accelvirt_procs
lv_stop_all
check "teardown: libvirtd, virtlogd and every QEMU stopped by PID, no orphan left" lv_all_stopped

if [ "$n" -ne "$PLAN" ]; then
	echo "# harness: ran $n tests, planned $PLAN"
	failed=$((failed + 1))
fi
[ "$failed" -eq 0 ]
