#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The host libvirt tier with the real accelvirt hook: a real libvirtd (private,
# see harness.sh) calls the recording hook (qemu.d/00-record, which keeps
# proving the sequence) and then the build tree's accelvirt-hook through a
# wrapper (qemu.d/accelvirt, av-hook-wrapper) that gives it a private copy of
# a fake host (tests/data/hosts), its own state and policy dirs and the worker.
# This machine has no accelerators: the hook works on the fake tree with its
# emulated kernel, while libvirt works on the real host.
#
#   - a domain without hostdevs: start, save, restore (the hook passes the
#     XML through), stop, all exit 0, no accelvirt state created;
#   - a GPU claimed by another domain: virsh start fails with the hook's one
#     line; release end follows and leaves the pool alone;
#   - a free GPU: the hook binds it (fake tree), libvirt then fails to start
#     QEMU (no such device on this host); release end follows and the worker
#     scrubs the device back to free, on nvidia;
#   - the trap host: a GPU sharing its IOMMU group with the host NIC is
#     refused with one line, nothing bound;
#   - a daemon restart with a running domain: reconnect begin exits 0 and
#     changes nothing.
#   - issue 16: a domain rewritten with a PCIe switch, two guest NUMA cells
#     and a GPUDirect clique is defined by libvirt (busNr given or left
#     out) and kept as written; `accelvirt define` and `undefine` of it.
#
# TAP on stdout. Needs root; installs its packages when missing; never skips.
# Binaries: $ACCELVIRT_HOOK, $ACCELVIRT_WORKER, $ACCELVIRT and $AV_TEST_HOSTS
# (set by make check-libvirt), else the test builds (tests/bin/, with the
# emulated kernel) of the build tree next to this source tree.
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/harness.sh"
lv_enter "$0" "$@"

top=$(cd "$here/../.." && pwd)
HOOK_BIN=${ACCELVIRT_HOOK:-$top/tests/bin/accelvirt-hook}
WORKER_BIN=${ACCELVIRT_WORKER:-$top/tests/bin/accelvirt-worker}
AV_BIN=${ACCELVIRT:-$top/tests/bin/accelvirt}
HOSTS=${AV_TEST_HOSTS:-$top/tests/data/hosts}
PLAN=47

echo "1..$PLAN"
for b in "$HOOK_BIN" "$WORKER_BIN" "$AV_BIN"; do
	[ -x "$b" ] || lv_die "$b is not built (make accelvirt-hook accelvirt-worker accelvirt)"
done
for h in two-socket-8gpu trap-shared-group switches; do
	[ -d "$HOSTS/$h/sys" ] || lv_die "no fake host $HOSTS/$h (make hosts)"
done

lv_setup
lv_install_hook "$here/record-hook" 00-record
lv_install_hook "$here/av-hook-wrapper" accelvirt

n=0
failed=0
ok() {
	n=$((n + 1))
	echo "ok $n - $1"
}
not_ok() { # DESCRIPTION WHY...
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n - $1"
	shift
	local l
	for l in "$@"; do printf '%s\n' "$l" | lv_comment; done
	av_diag
}
check() { # DESCRIPTION COMMAND... (ok when COMMAND succeeds; its output explains a failure)
	local d=$1 out
	shift
	if out=$("$@" 2>&1); then ok "$d"; else not_ok "$d" "failed: $*" "$out"; fi
}

# --- accelvirt's worlds: a private copy of a fake host, its state, its log ---
AVW=$LV_WORK/av
CALLS=$AVW/calls
POL=$AVW/policies
mkdir -p "$CALLS" "$POL"
: >"$CALLS/calls.log"

# The scrub command of the test policy: logs its arguments, succeeds.
cat >"$AVW/scrub.sh" <<'EOF'
#!/bin/sh
[ -n "${AV_SCRUB_LOG:-}" ] && echo "$*" >>"$AV_SCRUB_LOG"
echo "scrubbed $*"
exit 0
EOF
chmod 0755 "$AVW/scrub.sh"
# The A100 (10de:20f1) of both fake hosts, passed through whole, strict NUMA.
cat >"$POL/10-gpu.json" <<EOF
{
  "description": "accelvirt libvirt tier (tests/libvirt/test-hook.sh)",
  "profiles": [
    {
      "name": "lv-a100",
      "match": {"vendor": "0x10de", "device": "0x20f1"},
      "attach": "vfio-pci",
      "granularity": "card",
      "numa": "strict",
      "scrub": [{"method": "command", "argv": ["$AVW/scrub.sh", "--lv"], "timeout": 10}],
      "restore_driver": "on-release"
    }
  ]
}
EOF
chmod 0755 "$POL" && chmod 0644 "$POL/10-gpu.json"

# av_world NAME HOST PROBE...: a fresh world $W (a copy of the fake HOST, its
# state dir, not created), made the one the installed hook uses. PROBE: the
# addresses whose driver the wrapper records after each call.
av_world() {
	W=$AVW/$1
	rm -rf "$W"
	mkdir -p "$W"
	cp -a "$HOSTS/$2" "$W/host" || lv_die "cannot copy $HOSTS/$2"
	shift 2
	cat >/etc/libvirt/hooks/accelvirt-hook.env <<EOF
AV_HOOK_BIN='$HOOK_BIN'
CALLS_DIR='$CALLS'
AV_PROBE='$*'
ACCELVIRT_ROOT='$W/host'
ACCELVIRT_STATE_DIR='$W/state'
ACCELVIRT_POLICY_DIR='$POL'
ACCELVIRT_WORKER='$WORKER_BIN'
ACCELVIRT_LOG_FILE='$W/hook.log'
AV_SCRUB_LOG='$W/scrub.log'
EOF
}

# av_hook XML ARGS...: runs the hook of $W directly (as the wrapper would),
# stderr in $W/direct.err.
av_hook() {
	local xml=$1
	shift
	env ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" \
		ACCELVIRT_WORKER="$WORKER_BIN" ACCELVIRT_LOG_FILE="$W/hook.log" AV_SCRUB_LOG="$W/scrub.log" \
		"$HOOK_BIN" "$@" <"$xml" 2>"$W/direct.err"
}

# driver ADDRESS: the driver of ADDRESS in the fake tree of $W, or "none".
driver() {
	local l="$W/host/sys/bus/pci/devices/$1/driver"
	if [ -L "$l" ]; then basename "$(readlink "$l")"; else echo none; fi
}
drivers() {
	local d
	for d in "$W"/host/sys/bus/pci/devices/*; do echo "${d##*/} $(driver "${d##*/}")"; done
}

# av_status: `accelvirt status` of $W's pool, as JSON, in $W/st.json.
av_status() { "$AV_BIN" --state-dir "$W/state" status --no-sync --json >"$W/st.json" 2>"$W/st.err"; }

# pool_dev ADDRESS: "STATE OWNER-UUID" of the PCI device ADDRESS in $W/st.json.
pool_dev() {
	python3 - "$W/st.json" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for x in d["devices"]:
    if x.get("kind") == "pci" and x.get("address") == sys.argv[2]:
        print(x["state"], (x.get("owner") or {}).get("domain_uuid") or "-")
        break
else:
    print("absent -")
PY
}

# wait_dev ADDRESS "STATE OWNER": bounded poll of accelvirt status (30 s).
wait_dev() {
	local i got=
	for ((i = 0; i < 300; i++)); do
		av_status && got=$(pool_dev "$1")
		[ "$got" = "$2" ] && return 0
		sleep 0.1
	done
	echo "$1 is '$got', not '$2', after 30 s"
	cat "$W/st.json" "$W/st.err" 2>/dev/null
	return 1
}

# --- the wrapper's records ---
calls_mark() { wc -l <"$CALLS/calls.log"; }
# calls_since MARK [DOMAIN]: "OP SUBOP EXTRA rc=N" of each accelvirt call after MARK.
calls_since() {
	tail -n +"$(($1 + 1))" "$CALLS/calls.log" |
		awk -v d="${2:-}" 'd == "" || $1 == d { print $2, $3, $4, $5 }'
}
# call_id MARK DOMAIN OP SUBOP: the id of the first such call after MARK.
call_id() {
	tail -n +"$(($1 + 1))" "$CALLS/calls.log" |
		awk -v d="$2" -v o="$3" -v s="$4" '$1 == d && $2 == o && $3 == s { sub(/^id=/, "", $6); print $6; exit }'
}

av_diag() {
	lv_diag
	lv_log "--- accelvirt calls (wrapper) ---"
	lv_comment <"$CALLS/calls.log"
	local f
	for f in "$CALLS"/*.err; do
		[ -s "$f" ] || continue
		lv_log "--- stderr of accelvirt call ${f##*/} ---"
		lv_comment <"$f"
	done
	for f in "$AVW"/*/hook.log; do
		[ -r "$f" ] || continue
		lv_log "--- $f (tail) ---"
		tail -n 20 "$f" | lv_comment
	done
}

# expect_seq DESCRIPTION MARK DOMAIN "OP SUBOP EXTRA"...: the recording hook's
# calls for DOMAIN after MARK are exactly these (bounded wait for them).
expect_seq() {
	local d=$1 mark=$2 dom=$3 i want got
	shift 3
	want=$(printf '%s\n' "$@")
	for ((i = 0; i < 600; i++)); do
		[ "$(lv_hook_since "$mark" "$dom" | wc -l)" -ge $# ] && break
		sleep 0.1
	done
	got=$(lv_hook_since "$mark" "$dom")
	if [ "$got" = "$want" ]; then
		ok "$d"
	else
		not_ok "$d" "expected hook calls:" "$want" "got:" "${got:-(none)}"
	fi
}

# expect_calls DESCRIPTION MARK DOMAIN "OP SUBOP EXTRA rc=N"...: the same for
# the accelvirt hook's calls (through the wrapper), with their exit status.
expect_calls() {
	local d=$1 mark=$2 dom=$3 i want got
	shift 3
	want=$(printf '%s\n' "$@")
	for ((i = 0; i < 600; i++)); do
		[ "$(calls_since "$mark" "$dom" | wc -l)" -ge $# ] && break
		sleep 0.1
	done
	got=$(calls_since "$mark" "$dom")
	if [ "$got" = "$want" ]; then
		ok "$d"
	else
		not_ok "$d" "expected accelvirt calls:" "$want" "got:" "${got:-(none)}"
	fi
}

# one_refusal VIRSH-OUTPUT ID PATTERN: the hook's stderr of call ID is exactly
# one line "accelvirt: ...PATTERN...", and virsh's error ends with that line.
one_refusal() {
	local out=$1 err="$CALLS/$2.err" pat=$3 line
	[ -n "$2" ] && [ -r "$err" ] || { echo "no record of the refusing call"; return 1; }
	[ "$(wc -l <"$err")" -eq 1 ] || { echo "the hook's stderr is not one line:"; cat "$err"; return 1; }
	line=$(cat "$err")
	case "$line" in
	"accelvirt: "*) ;;
	*) echo "the hook's stderr does not begin 'accelvirt: ': $line"; return 1 ;;
	esac
	printf '%s\n' "$line" | grep -qE -- "$pat" || { echo "no /$pat/ in: $line"; return 1; }
	[ ! -s "$CALLS/$2.out" ] || { echo "the refusing hook wrote on stdout"; return 1; }
	# libvirt: "... unexpected exit status 1: accelvirt: ..." and nothing after it
	printf '%s\n' "$out" | sed '/^$/d' | tail -n 1 | grep -qF -- ": $line" ||
		{ echo "virsh's error does not end with the hook's line:"; printf '%s\n' "$out"; return 1; }
}

state_is() { [ "$(lv_virsh domstate "$1" 2>&1)" = "$2" ]; }

# mkdom FILE NAME UUID [PCI-ADDRESS]: a TCG domain that boots nothing, with a
# managed='no' PCI hostdev when ADDRESS is given (vCPU pinned to CPU 0: on the
# fake hosts' node 0, as the strict profile wants).
mkdom() {
	local f=$1 name=$2 uuid=$3 hd='' vcpu='<vcpu>1</vcpu>' dom bus slot fn
	if [ -n "${4:-}" ]; then
		IFS=':.' read -r dom bus slot fn <<<"$4"
		hd="<hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x$dom' bus='0x$bus' slot='0x$slot' function='0x$fn'/></source></hostdev>"
		vcpu="<vcpu placement='static' cpuset='0'>1</vcpu>"
	fi
	cat >"$f" <<EOF
<domain type='qemu'>
  <name>$name</name>
  <uuid>$uuid</uuid>
  <description>accelvirt libvirt tier: TCG, no disk, boots nothing</description>
  <memory unit='MiB'>64</memory>
  $vcpu
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices><memballoon model='none'/>$hd</devices>
</domain>
EOF
}

PLAIN=av-plain
U_PLAIN=3c0e9a9e-6c1b-4d55-9a63-acce1e5a0101
OTHER=av-other
U_OTHER=3c0e9a9e-6c1b-4d55-9a63-acce1e5a0102
CLAIMED=av-claimed
U_CLAIMED=3c0e9a9e-6c1b-4d55-9a63-acce1e5a0103
FREE=av-free
U_FREE=3c0e9a9e-6c1b-4d55-9a63-acce1e5a0104
TRAP=av-trap
U_TRAP=3c0e9a9e-6c1b-4d55-9a63-acce1e5a0105
GPU_CLAIMED=0000:17:00.0
GPU_FREE=0000:31:00.0
GPU_TRAP=0000:04:00.0
NIC_TRAP=0000:05:00.0

mkdom "$LV_WORK/plain.xml" "$PLAIN" "$U_PLAIN"
mkdom "$LV_WORK/other.xml" "$OTHER" "$U_OTHER" "$GPU_CLAIMED"
mkdom "$LV_WORK/claimed.xml" "$CLAIMED" "$U_CLAIMED" "$GPU_CLAIMED"
mkdom "$LV_WORK/free.xml" "$FREE" "$U_FREE" "$GPU_FREE"
mkdom "$LV_WORK/trap.xml" "$TRAP" "$U_TRAP" "$GPU_TRAP"

av_world gpu8 two-socket-8gpu "$GPU_CLAIMED" "$GPU_FREE"
GPU8=$W
drivers >"$W/drivers.orig"

# 1: the daemon, with both hooks
lv_start || lv_die "libvirtd did not start (see above)"
installed() {
	[ -x /etc/libvirt/hooks/qemu.d/00-record ] && [ -x /etc/libvirt/hooks/qemu.d/accelvirt ] &&
		[ "$(ls /etc/libvirt/hooks/qemu.d)" = "$(printf '00-record\naccelvirt')" ] &&
		lv_virsh uri | grep -qx 'qemu:///system'
}
check "private libvirtd (pid $LV_LIBVIRTD_PID) runs with qemu.d/00-record and qemu.d/accelvirt" installed

for x in plain claimed free; do
	out=$(lv_virsh define "$LV_WORK/$x.xml" 2>&1) || lv_die "virsh define $x.xml: $out"
done

# --- a domain without hostdevs: exactly as before ---------------------------
# 2-5: start
mark=$(lv_hook_mark)
cmark=$(calls_mark)
out=$(lv_virsh start "$PLAIN" 2>&1) || echo "$out" | lv_comment
expect_seq "no hostdevs, start: prepare begin, start begin, started begin" "$mark" "$PLAIN" \
	"prepare begin -" "start begin -" "started begin -"
expect_calls "no hostdevs, start: accelvirt called at each, exit 0" "$cmark" "$PLAIN" \
	"prepare begin - rc=0" "start begin - rc=0" "started begin - rc=0"
silent() { # MARK: no accelvirt call after MARK wrote anything
	local id
	for id in $(tail -n +"$(($1 + 1))" "$CALLS/calls.log" | sed 's/.* id=//'); do
		[ ! -s "$CALLS/$id.err" ] || { echo "call $id wrote on stderr:"; cat "$CALLS/$id.err"; return 1; }
		[ ! -s "$CALLS/$id.out" ] || { echo "call $id wrote on stdout:"; cat "$CALLS/$id.out"; return 1; }
	done
}
runs() { state_is "$PLAIN" running && [ "$(lv_qemu_pids | wc -l)" -eq 1 ]; }
check "no hostdevs, start: the domain runs; accelvirt wrote nothing" eval 'runs && silent "$cmark"'
no_state() {
	[ ! -e "$GPU8/state" ] || { echo "state created:"; ls -la "$GPU8/state"; return 1; }
	[ ! -e "$GPU8/hook.log" ] || { echo "hook log written:"; cat "$GPU8/hook.log"; return 1; }
	drivers | cmp -s - "$GPU8/drivers.orig" || { echo "the fake tree changed"; return 1; }
}
check "no hostdevs, start: no accelvirt state, no log line, fake tree untouched" no_state

# 6-9: save and restore: restore begin passes the XML through
mark=$(lv_hook_mark)
cmark=$(calls_mark)
out=$(lv_virsh save "$PLAIN" "$LV_WORK/plain.save" 2>&1) || echo "$out" | lv_comment
expect_calls "no hostdevs, save: stopped end, release end, exit 0" "$cmark" "$PLAIN" \
	"stopped end - rc=0" "release end - rc=0"
marker="accelvirt-saved-$$-$RANDOM"
lv_virsh save-image-dumpxml "$LV_WORK/plain.save" 2>&1 |
	sed "s|<description>.*</description>|<description>$marker</description>|" >"$LV_WORK/plain-saved.xml"
lv_virsh save-image-define "$LV_WORK/plain.save" "$LV_WORK/plain-saved.xml" >/dev/null 2>&1 ||
	echo "save-image-define failed" | lv_comment
mark=$(lv_hook_mark)
cmark=$(calls_mark)
out=$(lv_virsh restore "$LV_WORK/plain.save" 2>&1) || echo "$out" | lv_comment
expect_calls "no hostdevs, restore: restore begin, prepare begin, start begin, started begin, exit 0" \
	"$cmark" "$PLAIN" "restore begin - rc=0" "prepare begin - rc=0" "start begin - rc=0" "started begin - rc=0"
passed_through() {
	local rx id
	rx=$(lv_hook_xml_since "$mark" restore begin)
	id=$(call_id "$cmark" "$PLAIN" restore begin)
	[ -s "$rx" ] && grep -q "<description>$marker</description>" "$rx" ||
		{ echo "restore begin did not get the image's XML ($rx)"; return 1; }
	cmp "$rx" "$CALLS/$id.out" || { echo "accelvirt's stdout at restore begin is not its stdin"; return 1; }
	[ ! -s "$CALLS/$id.err" ] || { echo "stderr:"; cat "$CALLS/$id.err"; return 1; }
	state_is "$PLAIN" running || { echo "not running after restore"; return 1; }
	lv_virsh dumpxml "$PLAIN" | grep -q "<description>$marker</description>" ||
		{ echo "the restored domain lost the image's XML"; return 1; }
}
check "no hostdevs, restore begin: accelvirt prints its stdin back byte for byte; the image's XML runs" passed_through
check "no hostdevs, save + restore: still no accelvirt state" no_state

# --- the pool: another domain holds a GPU (the hook driven directly) --------
# 10
claim_other() {
	av_hook "$LV_WORK/other.xml" "$OTHER" prepare begin - >/dev/null ||
		{ cat "$W/direct.err"; return 1; }
	[ "$(driver "$GPU_CLAIMED")" = vfio-pci ] || { echo "$GPU_CLAIMED not on vfio-pci"; return 1; }
	wait_dev "$GPU_CLAIMED" "in-use $U_OTHER"
}
check "set-up: the hook (run directly) gives $GPU_CLAIMED to $OTHER: in-use, vfio-pci" claim_other
cp "$W/state/pool.json" "$W/pool.claimed"
cp "$W/state/journal.jsonl" "$W/journal.claimed"

# --- a daemon restart with the plain domain running: reconnect -------------
# 11-14
qpid=$(lv_qemu_pids)
lv_stop_daemon
mark=$(lv_hook_mark)
cmark=$(calls_mark)
lv_start || lv_die "libvirtd did not start again (see above)"
expect_seq "restart: reconnect begin, and nothing else" "$mark" "$PLAIN" "reconnect begin -"
expect_calls "restart: accelvirt's reconnect begin exits 0" "$cmark" "$PLAIN" "reconnect begin - rc=0"
undisturbed() {
	state_is "$PLAIN" running && [ -n "$qpid" ] && [ "$(lv_qemu_pids)" = "$qpid" ] ||
		{ echo "not the same QEMU (${qpid:-none}) running"; return 1; }
	silent "$cmark" || return 1
	cmp "$W/state/pool.json" "$W/pool.claimed" && cmp "$W/state/journal.jsonl" "$W/journal.claimed" ||
		{ echo "the pool or journal changed"; return 1; }
}
check "restart: same QEMU (pid ${qpid:-none}) runs; accelvirt silent; pool and journal unchanged" undisturbed
mark=$(lv_hook_mark)
cmark=$(calls_mark)
lv_virsh destroy "$PLAIN" >/dev/null 2>&1
expect_calls "no hostdevs, destroy: stopped end, release end, exit 0" "$cmark" "$PLAIN" \
	"stopped end - rc=0" "release end - rc=0"

# --- a GPU another domain holds: refused, release end leaves the pool alone --
# 15-19
mark=$(lv_hook_mark)
cmark=$(calls_mark)
if out=$(lv_virsh start "$CLAIMED" 2>&1); then
	not_ok "claimed GPU: virsh start fails" "virsh start succeeded:" "$out"
	lv_virsh destroy "$CLAIMED" >/dev/null 2>&1
else
	ok "claimed GPU: virsh start fails"
	printf '%s\n' "$out" | lv_comment
fi
id=$(call_id "$cmark" "$CLAIMED" prepare begin)
check "claimed GPU: virsh's error ends with the hook's one line, naming device, state and owner" \
	one_refusal "$out" "$id" "^accelvirt: cannot start domain '$CLAIMED': device $GPU_CLAIMED \\([^)]*\\) is in-use, owner domain '$OTHER' \\($U_OTHER\\); [^;]+$"
expect_seq "claimed GPU: prepare begin, stopped end, release end" "$mark" "$CLAIMED" \
	"prepare begin -" "stopped end -" "release end -"
expect_calls "claimed GPU: accelvirt refuses prepare (exit 1), then stopped end and release end exit 0" \
	"$cmark" "$CLAIMED" "prepare begin - rc=1" "stopped end - rc=0" "release end - rc=0"
# The refused prepare may refresh the scan (last_seen); release end changes
# nothing at all, and nothing is journalled.
kept() {
	local prep rel
	state_is "$CLAIMED" "shut off" || return 1
	prep=$(call_id "$cmark" "$CLAIMED" prepare begin)
	rel=$(call_id "$cmark" "$CLAIMED" release end)
	[ -n "$prep" ] && [ -n "$rel" ] || { echo "no record of prepare or release"; return 1; }
	cmp "$CALLS/$prep.pool.json" "$CALLS/$rel.pool.json" || { echo "release end changed the pool"; return 1; }
	cmp "$W/state/pool.json" "$CALLS/$rel.pool.json" || { echo "the pool changed after release end"; return 1; }
	cmp "$W/state/journal.jsonl" "$W/journal.claimed" || { echo "the journal changed"; return 1; }
	python3 - "$W/pool.claimed" "$W/state/pool.json" <<'PY' || { echo "the pool differs in more than last_seen"; return 1; }
import json, sys
def norm(f):
    d = json.load(open(f))
    for x in d["devices"]:
        x.pop("last_seen", None)
    return d
assert norm(sys.argv[1]) == norm(sys.argv[2])
PY
	[ "$(pool_dev "$GPU_CLAIMED")" = "in-use $U_OTHER" ] || return 1
	[ "$(driver "$GPU_CLAIMED")" = vfio-pci ] || { echo "$GPU_CLAIMED left vfio-pci"; return 1; }
	[ ! -e "$W/scrub.log" ] || { echo "something was scrubbed:"; cat "$W/scrub.log"; return 1; }
}
check "claimed GPU: release end leaves the pool byte for byte, the journal untouched; $OTHER keeps it on vfio-pci" \
	eval 'av_status && kept'

# --- a free GPU: bound by prepare, libvirt fails, released and scrubbed ------
# 20-27
mark=$(lv_hook_mark)
cmark=$(calls_mark)
if out=$(lv_virsh start "$FREE" 2>&1); then
	not_ok "free GPU: virsh start fails (no such PCI device on this host)" "virsh start succeeded:" "$out"
	lv_virsh destroy "$FREE" >/dev/null 2>&1
else
	ok "free GPU: virsh start fails (no such PCI device on this host)"
	printf '%s\n' "$out" | lv_comment
fi
not_accelvirt() { ! printf '%s\n' "$out" | grep -q 'accelvirt'; }
check "free GPU: the failure is libvirt's own, not accelvirt's" not_accelvirt
pid_prep=$(call_id "$cmark" "$FREE" prepare begin)
bound_at_prepare() {
	[ -n "$pid_prep" ] || { echo "accelvirt was not called at prepare begin"; return 1; }
	grep -qx "$GPU_FREE vfio-pci" "$CALLS/$pid_prep.drivers" ||
		{ echo "after prepare:"; cat "$CALLS/$pid_prep.drivers"; return 1; }
	python3 - "$CALLS/$pid_prep.pool.json" "$GPU_FREE" "$U_FREE" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = [(x["state"], (x.get("owner") or {}).get("domain_uuid"), x.get("original_driver"))
     for x in d["devices"] if x.get("address") == sys.argv[2]]
assert s == [("in-use", sys.argv[3], "nvidia")], s
PY
}
check "free GPU: accelvirt's prepare bound it to vfio-pci in the fake tree, in-use for $FREE, original driver nvidia" \
	bound_at_prepare
expect_seq "free GPU: prepare begin, stopped end, release end (libvirt fails between them)" "$mark" "$FREE" \
	"prepare begin -" "stopped end -" "release end -"
calls_ok() { # every accelvirt call for FREE after prepare exits 0
	local got
	got=$(calls_since "$cmark" "$FREE")
	printf '%s\n' "$got" | grep -q '^prepare begin - rc=0$' || { echo "$got"; return 1; }
	printf '%s\n' "$got" | grep -q '^release end - rc=0$' || { echo "$got"; return 1; }
	! printf '%s\n' "$got" | grep -qv 'rc=0$' || { echo "$got"; return 1; }
	silent "$cmark"
}
check "free GPU: accelvirt's calls all exit 0 and write nothing" calls_ok
check "free GPU: released, the worker scrubs it, free again (accelvirt status)" wait_dev "$GPU_FREE" "free -"
back_home() {
	[ "$(driver "$GPU_FREE")" = nvidia ] || { echo "driver $(driver "$GPU_FREE")"; return 1; }
	grep -qx -- "--lv $GPU_FREE [0-9]*" "$W/scrub.log" || { echo "scrub log:"; cat "$W/scrub.log"; return 1; }
	[ "$(pool_dev "$GPU_CLAIMED")" = "in-use $U_OTHER" ] || return 1
	"$AV_BIN" --state-dir "$W/state" journal verify >/dev/null
}
check "free GPU: back on nvidia in the fake tree, scrubbed once by the worker; $OTHER untouched; journal verifies" back_home
went_through() {
	python3 - "$W/state/journal.jsonl" "$GPU_FREE" <<'PY'
import json, sys
seq = []
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("event") == "transition" and sys.argv[2] in json.dumps(e):
        seq.append(e.get("to"))
want = ["claimed", "in-use", "dirty", "scrubbing", "free"]
it = iter(seq)
assert all(s in it for s in want), seq
PY
}
check "free GPU: the journal has it claimed, in-use, dirty, scrubbing, free" went_through

# --- the trap host: a GPU sharing its IOMMU group with the host NIC ---------
# 28-32
av_world trap trap-shared-group "$GPU_TRAP" "$NIC_TRAP"
drivers >"$W/drivers.orig"
lv_virsh define "$LV_WORK/trap.xml" >/dev/null 2>&1 || lv_die "virsh define trap.xml"
mark=$(lv_hook_mark)
cmark=$(calls_mark)
if out=$(lv_virsh start "$TRAP" 2>&1); then
	not_ok "trap host: virsh start of a GPU grouped with the host NIC fails" "virsh start succeeded:" "$out"
	lv_virsh destroy "$TRAP" >/dev/null 2>&1
else
	ok "trap host: virsh start of a GPU grouped with the host NIC fails"
	printf '%s\n' "$out" | lv_comment
fi
id=$(call_id "$cmark" "$TRAP" prepare begin)
check "trap host: virsh's error ends with the hook's one line, naming the NIC $NIC_TRAP" \
	one_refusal "$out" "$id" "^accelvirt: cannot start domain '$TRAP': cannot hand '$GPU_TRAP' to a guest: its IOMMU group [0-9]+ also holds '$NIC_TRAP' .*; [^;]+$"
expect_seq "trap host: prepare begin, stopped end, release end" "$mark" "$TRAP" \
	"prepare begin -" "stopped end -" "release end -"
expect_calls "trap host: accelvirt refuses prepare (exit 1), stopped end and release end exit 0" \
	"$cmark" "$TRAP" "prepare begin - rc=1" "stopped end - rc=0" "release end - rc=0"
untouched() {
	drivers | cmp -s - "$W/drivers.orig" || { echo "drivers changed:"; drivers | diff "$W/drivers.orig" -; return 1; }
	if [ -e "$W/state/pool.json" ]; then
		python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert all(x['state']=='free' and not x.get('owner') for x in d['devices']), d" "$W/state/pool.json" || return 1
	fi
	[ ! -e "$W/scrub.log" ]
}
check "trap host: nothing bound, nothing claimed, nothing scrubbed" untouched

# --- issue 16: the guest PCIe topology, as libvirt 9.0 reads it -------------
# 33-41: `accelvirt rewrite --dry-run` of tests/place/topo3.in.xml on the
# switches host (two A100s behind host switch 0000:11:00.0 on node 0, one
# alone on node 1): a pcie-expander-bus per guest cell, a root port > an
# upstream port > two downstream ports under cell 0, a root port under cell
# 1, the hostdevs' guest addresses on them, <cpu><numa> with two cells and a
# <qemu:override> clique.  libvirt defines it and keeps all of it (the
# domain is never started: no such device here, and the hook has nothing to
# do at define).
TOPO=av-topo
sed -e "s/type='kvm'/type='qemu'/" -e "s|<name>topo3</name>|<name>$TOPO</name>|" \
	"$here/../place/topo3.in.xml" >"$LV_WORK/topo.in.xml"
"$AV_BIN" --root "$HOSTS/switches" --policy-dir "$here/../place/policies-switches" --state-dir "$AVW/topo-state" \
	rewrite --dry-run "$LV_WORK/topo.in.xml" >"$LV_WORK/topo.xml" 2>"$LV_WORK/topo.err"
# has_topology FILE: the domain FILE holds that topology (libvirt may add
# what it defaults: busNr, the pxb's address, controller models' targets).
has_topology() {
	python3 - "$1" <<'PY'
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
Q = "{http://libvirt.org/schemas/domain/qemu/1.0}"
ctl = {int(c.get("index")): c for c in r.findall("devices/controller") if c.get("type") == "pci"}
def bus(e):
    a = e.find("address")
    return int(a.get("bus"), 16) if a is not None and a.get("bus") is not None else 0
def chain(b):
    out = []
    while b:
        c = ctl[b]
        out.append((c.get("model"), c.findtext("target/node")))
        b = bus(c)
    return out
hd = {h.find("alias").get("name"): h for h in r.findall("devices/hostdev") if h.find("alias") is not None}
want = {
    "ua-accelvirt-0": ["pcie-switch-downstream-port", "pcie-switch-upstream-port", "pcie-root-port", "pcie-expander-bus"],
    "ua-accelvirt-1": ["pcie-switch-downstream-port", "pcie-switch-upstream-port", "pcie-root-port", "pcie-expander-bus"],
    "ua-accelvirt-2": ["pcie-root-port", "pcie-expander-bus"],
}
got = {a: [m for m, _ in chain(bus(hd[a]))] for a in want if a in hd}
assert got == want, "hostdevs' controller chains: %s" % got
cells = {a: chain(bus(hd[a]))[-1][1] for a in want}
assert cells == {"ua-accelvirt-0": "0", "ua-accelvirt-1": "0", "ua-accelvirt-2": "1"}, "pxb nodes: %s" % cells
assert chain(bus(hd["ua-accelvirt-0"]))[1:] == chain(bus(hd["ua-accelvirt-1"]))[1:], "not one upstream port"
assert [c.get("id") for c in r.findall("cpu/numa/cell")] == ["0", "1"], "cells"
cl = {d.get("alias"): [p.get("value") for p in d.iter(Q + "property") if p.get("name") == "x-nv-gpudirect-clique"]
      for d in r.iter(Q + "device")}
assert cl == {"ua-accelvirt-0": ["0"], "ua-accelvirt-1": ["0"]}, "cliques: %s" % cl
print("pxb busNr: %s" % [c.find("target").get("busNr") for c in ctl.values() if c.get("model") == "pcie-expander-bus"])
PY
}
check "issue 16: accelvirt rewrites a 3-GPU domain of the switches host with a switch, two cells and a clique" \
	eval 'has_topology "$LV_WORK/topo.xml" && [ -s "$LV_WORK/topo.err" ]'
has_topology "$LV_WORK/topo.xml" 2>&1 | lv_comment
check "  ... libvirt 9.0 defines it (virsh define)" lv_virsh define "$LV_WORK/topo.xml"
lv_virsh dumpxml --inactive "$TOPO" >"$LV_WORK/topo.defined.xml" 2>&1
check "  ... and keeps it: the pxbs of cells 0 and 1, the switch, the hostdevs' addresses, the cells, the clique" \
	has_topology "$LV_WORK/topo.defined.xml"
has_topology "$LV_WORK/topo.defined.xml" 2>&1 | sed 's/^/libvirt: /' | lv_comment
check "  ... undefined" lv_virsh undefine "$TOPO"
# 37-38: the same with the pxbs' busNr left out: libvirt 9.0 numbers them itself.
sed -e 's/ busNr="[0-9]*"//' -e "s|<name>$TOPO</name>|<name>$TOPO-nobus</name>|" "$LV_WORK/topo.xml" >"$LV_WORK/topo-nobus.xml"
nobus() {
	! grep -q busNr "$LV_WORK/topo-nobus.xml" && lv_virsh define "$LV_WORK/topo-nobus.xml" &&
		lv_virsh dumpxml --inactive "$TOPO-nobus" >"$LV_WORK/topo-nobus.defined.xml" &&
		has_topology "$LV_WORK/topo-nobus.defined.xml"
}
check "  ... with the pxbs' busNr left out, libvirt defines it too, and keeps the rest" nobus
has_topology "$LV_WORK/topo-nobus.defined.xml" 2>&1 | sed 's/^/libvirt, busNr left out: /' | lv_comment
check "  ... undefined" lv_virsh undefine "$TOPO-nobus"
# 39-41: `accelvirt define` itself (its read-back for hot-plug ports included)
# and `accelvirt undefine`, through this libvirtd.
TOPO_AV=("$AV_BIN" --connect "$LV_URI" --root "$HOSTS/switches" --policy-dir "$here/../place/policies-switches"
	--state-dir "$AVW/topo-define")
av_defined() {
	"${TOPO_AV[@]}" define "$LV_WORK/topo.in.xml" >"$LV_WORK/topo-define.out" 2>&1 &&
		grep -q "^defined domain '$TOPO'" "$LV_WORK/topo-define.out" &&
		lv_virsh dumpxml --inactive "$TOPO" >"$LV_WORK/topo-define.xml" && has_topology "$LV_WORK/topo-define.xml"
}
check "  ... accelvirt define: libvirt has the domain with its topology" av_defined
claimed3() {
	"$AV_BIN" --state-dir "$AVW/topo-define" status --no-sync --json |
		python3 -c 'import json,sys; c = sorted(x["address"] for x in json.load(sys.stdin)["devices"] if x["state"] == "claimed"); assert c == ["0000:13:00.0", "0000:14:00.0", "0000:a1:00.0"], c'
}
check "  ... its 3 GPUs claimed" claimed3
check "  ... accelvirt undefine gives the 3 back" \
	eval '"${TOPO_AV[@]}" undefine "$TOPO" | grep -q "3 reserved devices given back"'

# --- undefine; nothing left ---
# 42-47
W=$GPU8
for x in "$PLAIN" "$CLAIMED" "$FREE" "$TRAP"; do
	lv_virsh undefine "$x" >/dev/null 2>&1 || echo "undefine $x failed" | lv_comment
done
check "undefine: no domain left" eval '[ -z "$(lv_virsh list --all --name 2>&1 | sed "/^$/d")" ]'
av_hook "$LV_WORK/other.xml" "$OTHER" release end - >/dev/null 2>"$W/direct.err"
check "clean-up: $OTHER's release (hook run directly) gives $GPU_CLAIMED back, free on nvidia" \
	eval 'wait_dev "$GPU_CLAIMED" "free -" && [ "$(driver "$GPU_CLAIMED")" = nvidia ]'
check "the fake tree ends as it began" eval 'drivers | cmp - "$GPU8/drivers.orig"'
# The refusals are logged (at error level) with the text the user got; nothing else.
no_errors() {
	local id want='' got
	for id in $(grep -E '^av-(claimed|trap) prepare begin - rc=1 ' "$CALLS/calls.log" | sed 's/.* id=//'); do
		want="$want$(sed -n "1s/^accelvirt: //p" "$CALLS/$id.err")"$'\n'
	done
	got=$(cat "$AVW"/*/hook.log | grep -E '^accelvirt\[[0-9]+\]: (error|warning): ' |
		sed -E "s/^accelvirt\[[0-9]+\]: (error|warning): domain '[^']*': //")
	[ "$got" = "${want%$'\n'}" ] || { echo "logged:"; echo "$got"; echo "refusals:"; echo "$want"; return 1; }
}
check "accelvirt's only errors in its log are its two refusals, as the user saw them" no_errors
check "no accelvirt hook or worker left running" lv_no_accelvirt_procs
lv_stop_all
check "teardown: libvirtd, virtlogd and every QEMU stopped by PID, no orphan left" lv_all_stopped

if [ "$n" -ne "$PLAN" ]; then
	echo "# harness: ran $n tests, planned $PLAN"
	failed=$((failed + 1))
fi
echo "# hook calls recorded: $(lv_hook_mark); accelvirt calls: $(calls_mark); daemon starts: $LV_STARTS"
[ "$failed" -eq 0 ]
