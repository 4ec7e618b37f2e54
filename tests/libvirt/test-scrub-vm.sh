#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The host libvirt tier, scrub method "vm": the real accelvirt worker boots the
# tiny scrub image (build-scrub-image.sh: the Debian kernel and a busybox
# initramfs) as a transient TCG domain under the tier's private libvirtd, from
# the shipped template xml/scrub-vm.xml (type qemu, the image's paths).
#
# A vm step passes only when the scrub domain really had the device (its live
# XML shows the <hostdev>), and this machine can give no PCI device to a
# domain (no IOMMU): so here every vm scrub fails, and what the tier proves is
# that it fails for the right reason, on a real libvirtd:
#
#   - the template's @HOSTDEV@ where libvirt takes no device (in
#     <description>): the scrub VM starts (its console log is there) without
#     the device, is destroyed at once, and the device is quarantined, not
#     freed ("runs without device"); the journal's report gives the random
#     domain name, its UUID, the device given and the PCI hostdevs seen (none);
#   - the shipped template as it is (@HOSTDEV@ in <devices>): libvirt cannot
#     start it here; quarantined ("cannot start the scrub VM");
#   - a domain defined beforehand under the name the scrub domain used to
#     have (accelvirt-scrub- and 12 hex digits of the identity's SHA-256)
#     does not stop the scrub domain from starting, and is left as it was;
#   - two scrubs of one device use two random names;
#   - a template with on_reboot destroy (a reboot would look like a
#     power-off): refused before anything boots, quarantined;
#   - no scrub domain is left behind (virsh list --all), no worker either.
#
# The image contract (power-off, panic, hang) and the events of other domains
# are proved on libvirt's test driver (tests/test-scrub.c, /scrub/vm/), the
# power-off with a real device on a real kernel by the VM rig (tests/vm, phase
# V). A rebooting image no longer gets that far here (it needs the device),
# and the test driver reports no guest reboot: that case has no test now.
#
# The devices are the A100s of a private copy of the fake host two-socket-8gpu,
# released through the real hook run directly (it starts the worker detached,
# with our environment: ACCELVIRT_CONNECT reaches the private libvirtd). The
# scrubs run side by side. TAP on stdout; root; about 15 s here.
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/harness.sh"
lv_enter "$0" "$@"

top=$(cd "$here/../.." && pwd)
HOOK_BIN=${ACCELVIRT_HOOK:-$top/tests/bin/accelvirt-hook}
WORKER_BIN=${ACCELVIRT_WORKER:-$top/tests/bin/accelvirt-worker}
AV_BIN=${ACCELVIRT:-$top/tests/bin/accelvirt}
HOSTS=${AV_TEST_HOSTS:-$top/tests/data/hosts}
CACHE=${AV_LV_CACHE:-${AV_TEST_BUILDDIR:-$top/tests}/libvirt/cache}
TEMPLATE=$top/xml/scrub-vm.xml
PLAN=17

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

# template NAME MODE [SED-EXPR]: the shipped template for the tier as
# templates/NAME.xml: TCG, the cached image, accelvirt.scrub=MODE on the
# kernel command line, @HOSTDEV@ as shipped.
# no_timer_check: under TCG on a loaded machine the kernel's early IO-APIC
# timer check can fail ("IO-APIC + timer doesn't work!"), a panic before
# pvpanic is loaded, which would look like a hang.
template() {
	local f="$AVW/templates/$1.xml"
	sed -e "s|<domain type='kvm'>|<domain type='qemu'>|" \
		-e "s|<kernel>[^<]*</kernel>|<kernel>$CACHE/vmlinux</kernel>|" \
		-e "s|<initrd>[^<]*</initrd>|<initrd>$CACHE/scrub.cpio.gz</initrd>|" \
		-e "s|<cmdline>\([^<]*\)</cmdline>|<cmdline>\1 no_timer_check accelvirt.scrub=$2</cmdline>|" \
		-e "s|<memory unit='MiB'>[0-9]*</memory>|<memory unit='MiB'>128</memory>|" \
		${3:+-e "$3"} "$TEMPLATE" >"$f"
	echo "$f"
}
# nodev: @HOSTDEV@ moved from <devices> into <description>: it passes the
# policy load (it is there, outside comments), and libvirt boots the domain
# without the device (a description is text).
T_NODEV=$(template nodev poweroff \
	's|^\( *\)@HOSTDEV@$||; s|<description>[^<]*</description>|<description>@HOSTDEV@</description>|')
T_DEV=$(template dev poweroff)
T_BAD=$(template bad poweroff \
	's|^\( *\)@HOSTDEV@$||; s|<description>[^<]*</description>|<description>@HOSTDEV@</description>|; s|<on_reboot>restart</on_reboot>|<on_reboot>destroy</on_reboot>|')

GPU_NODEV=0000:17:00.0
GPU_DEV=0000:31:00.0
GPU_SQUAT=0000:4b:00.0
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
	profile vm-nodev "$GPU_NODEV" "$T_NODEV" 120
	echo ,
	profile vm-dev "$GPU_DEV" "$T_DEV" 120
	echo ,
	profile vm-squat "$GPU_SQUAT" "$T_NODEV" 120
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
old_name() { # ADDRESS: the name the scrub VM of the device had before names were random (from its pool identity)
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

# scrub_names ADDRESS: the domain of the vm step of every scrub of ADDRESS, one a line.
scrub_names() {
	python3 - "$W/state/journal.jsonl" "$1" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("event") in ("scrubbed", "scrub-certificate") and e.get("address") == sys.argv[2]:
        steps = e["steps"] if "steps" in e else e["report"]["steps"]
        print(steps[0].get("domain"))
PY
}
reason_is() { # ADDRESS PATTERN
	local r
	r=$(scrub_fact "$1" reason)
	printf '%s\n' "$r" | grep -qE -- "$2" || { echo "reason: $r"; return 1; }
}
on_vfio() { # ADDRESS...
	local a
	for a in "$@"; do
		[ "$(basename "$(readlink "$W/host/sys/bus/pci/devices/$a/driver")")" = vfio-pci ] || { echo "$a"; return 1; }
	done
}

# --- 1-7: @HOSTDEV@ where libvirt takes no device: it boots without it, quarantined ---
check "set-up: $GPU_NODEV prepared and released through the hook; the worker starts" \
	release "$GPU_NODEV" dom-nodev 5a0e9a9e-6c1b-4d55-9a63-acce1e5a0201
t_rel=$(date +%s.%N)
check "no device: the scrub VM never had $GPU_NODEV: quarantined, not free" wait_dev "$GPU_NODEV" quarantined 120
lv_log "from release end to quarantine: $(echo "$(date +%s.%N) - $t_rel" | bc) s"
name_nodev=$(scrub_fact "$GPU_NODEV" domain 2>/dev/null)
check "no device: the reason says the scrub VM '$name_nodev' ran without the device and was destroyed" \
	reason_is "$GPU_NODEV" "^scrub step 1 \\(vm\\) failed: the scrub VM 'accelvirt-scrub-[0-9a-f]{16}' runs without device $GPU_NODEV: its live XML has no <hostdev type='pci'> of that address \\(PCI hostdevs seen: none\\); destroyed$"
facts_nodev() {
	printf '%s\n' "$name_nodev" | grep -Eqx 'accelvirt-scrub-[0-9a-f]{16}' || { echo "domain: $name_nodev"; return 1; }
	[ "$name_nodev" != "$(old_name "$GPU_NODEV")" ] || { echo "the old, predictable name"; return 1; }
	[ "$(scrub_fact "$GPU_NODEV" hostdev)" = "$GPU_NODEV" ] || { scrub_fact "$GPU_NODEV" hostdev; return 1; }
	[ "$(scrub_fact "$GPU_NODEV" live_hostdevs)" = "[]" ] || { scrub_fact "$GPU_NODEV" live_hostdevs; return 1; }
	[ "$(scrub_fact "$GPU_NODEV" step.reason)" = no-device ] || { scrub_fact "$GPU_NODEV" step.reason; return 1; }
	scrub_fact "$GPU_NODEV" uuid | grep -Eqx '[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}' ||
		{ scrub_fact "$GPU_NODEV" uuid; return 1; }
	[ "$(scrub_fact "$GPU_NODEV" ok)" = false ]
}
check "no device: the journal's report gives the random domain name, its UUID, the device given, no PCI hostdev seen" facts_nodev
check "no device: it did start on the real libvirtd (/var/log/libvirt/qemu/$name_nodev.console.log)" \
	test -e "/var/log/libvirt/qemu/$name_nodev.console.log"
check "no device: no scrub domain left (virsh list --all)" no_domains
check "no device: $GPU_NODEV stays on vfio-pci; the journal verifies" eval \
	'on_vfio "$GPU_NODEV" && "$AV_BIN" --state-dir "$W/state" journal verify >/dev/null'

# --- 8-13: the shipped template, a squatter under the old name, a bad template, side by side ---
SQUAT=$(old_name "$GPU_SQUAT")
cat >"$LV_WORK/squat.xml" <<EOF
<domain type='qemu'>
  <name>$SQUAT</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
</domain>
EOF
rel_more() {
	lv_virsh define "$LV_WORK/squat.xml" >/dev/null || return 1
	release "$GPU_DEV" dom-dev 5a0e9a9e-6c1b-4d55-9a63-acce1e5a0202 &&
		release "$GPU_SQUAT" dom-squat 5a0e9a9e-6c1b-4d55-9a63-acce1e5a0203 &&
		release "$GPU_BAD" dom-bad 5a0e9a9e-6c1b-4d55-9a63-acce1e5a0205
}
check "set-up: a domain '$SQUAT' defined under $GPU_SQUAT's old scrub VM name; $GPU_DEV, $GPU_SQUAT, $GPU_BAD released" rel_more
check "the shipped template (@HOSTDEV@ in <devices>): libvirt cannot give a domain of this machine the device; quarantined" eval \
	'wait_dev "$GPU_DEV" quarantined 120 &&
	 reason_is "$GPU_DEV" "^scrub step 1 \\(vm\\) failed: cannot start the scrub VM .accelvirt-scrub-[0-9a-f]{16}. from "'
check "squatter: the scrub VM of $GPU_SQUAT starts all the same, under a random name (quarantined for running without the device, not for its name)" eval \
	'wait_dev "$GPU_SQUAT" quarantined 120 &&
	 reason_is "$GPU_SQUAT" "^scrub step 1 \\(vm\\) failed: the scrub VM .accelvirt-scrub-[0-9a-f]{16}. runs without device $GPU_SQUAT"'
squat_left() {
	lv_virsh domstate "$SQUAT" | grep -qx 'shut off' || { lv_virsh domstate "$SQUAT"; return 1; }
	lv_virsh undefine "$SQUAT" >/dev/null
}
check "squatter: '$SQUAT' is left as it was (defined, shut off)" squat_left
check "on_reboot destroy: the template is refused before anything boots, quarantined" eval \
	'wait_dev "$GPU_BAD" quarantined 60 &&
	 reason_is "$GPU_BAD" "templates/bad.xml. says <on_reboot>destroy</on_reboot>; the image contract needs <on_reboot>restart</on_reboot>" &&
	 [ "$(scrub_fact "$GPU_BAD" live_hostdevs)" = null ]'
check "failures: the quarantined devices keep no scrub token or scrub domain, stay on vfio-pci; the journal verifies" eval \
	'! grep -Eq "scrub_token|scrub_domain" "$W/state/pool.json" && on_vfio "$GPU_DEV" "$GPU_SQUAT" "$GPU_BAD" &&
	 "$AV_BIN" --state-dir "$W/state" journal verify >/dev/null'

# --- 14: a second scrub of one device, by hand: another name ---
again() {
	local names
	if ACCELVIRT_CONNECT="$LV_URI" "$AV_BIN" --root "$W/host" --state-dir "$W/state" --policy-dir "$POL" \
		scrub "$GPU_NODEV" >"$LV_WORK/again.out" 2>&1; then
		echo "the scrub passed"
		return 1
	fi
	names=$(scrub_names "$GPU_NODEV")
	[ "$(printf '%s\n' "$names" | grep -Ecx 'accelvirt-scrub-[0-9a-f]{16}')" -eq 2 ] &&
		[ "$(printf '%s\n' "$names" | sort -u | wc -l)" -eq 2 ] ||
		{ echo "names: $names"; cat "$LV_WORK/again.out"; return 1; }
}
check "two scrubs of $GPU_NODEV (the worker's, then accelvirt scrub's) use two random names" again

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
