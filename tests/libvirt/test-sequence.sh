#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The host libvirt tier: a real libvirtd (private, see harness.sh) calls a
# recording hook (record-hook); this test asserts the exact sequence of hook
# calls libvirt makes for define, start, destroy, save, restore, a daemon
# restart with a running domain (reconnect), a refused prepare and undefine.
# TAP on stdout. Needs root; installs its packages when missing; never skips.
#
# Until the accelvirt hook exists this proves the harness and pins down the
# libvirt behaviour the hook relies on (DESIGN.md: "libvirt's rules").
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/harness.sh"
lv_enter "$0" "$@"

DOM=av-seq-test
UUID=3c0e9a9e-6c1b-4d55-9a63-acce1e5a0001
PLAN=21

echo "1..$PLAN"
lv_setup
lv_install_hook "$here/record-hook" 00-record

n=0
failed=0
ok() { # DESCRIPTION (the assertion passed)
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
	lv_diag
}
check() { # DESCRIPTION COMMAND... (ok when COMMAND succeeds)
	local d=$1
	shift
	if "$@"; then ok "$d"; else not_ok "$d" "failed: $*"; fi
}

# expect_seq DESCRIPTION MARK "OP SUBOP EXTRA"...: the calls for $DOM after
# MARK are exactly these, in this order. Waits (bounded) until as many calls
# arrived, as some (reconnect) come from daemon threads.
expect_seq() {
	local d=$1 mark=$2 i want got
	shift 2
	want=$(printf '%s\n' "$@")
	[ $# -eq 0 ] && want=
	for ((i = 0; i < 600; i++)); do
		[ "$(lv_hook_since "$mark" "$DOM" | wc -l)" -ge $# ] && break
		sleep 0.1
	done
	got=$(lv_hook_since "$mark" "$DOM")
	if [ "$got" = "$want" ]; then
		ok "$d"
	else
		not_ok "$d" "expected hook calls:" "${want:-(none)}" "got:" "${got:-(none)}"
	fi
}

# xml_is_domain FILE [ID]: the XML a hook got is this domain's (and, with ID,
# the live definition of that run).
xml_is_domain() {
	local f=$1 id=${2:-}
	[ -s "$f" ] || { echo "no XML recorded ($f)"; return 1; }
	grep -q "<name>$DOM</name>" "$f" || { echo "$f: not named $DOM"; return 1; }
	grep -q "<uuid>$UUID</uuid>" "$f" || { echo "$f: not uuid $UUID"; return 1; }
	if [ -n "$id" ]; then
		grep -q "^<domain type='qemu' id='$id'>" "$f" || { echo "$f: not the live XML of id $id"; return 1; }
	fi
	return 0
}

# every_xml_is_domain MARK [ID]: each call after MARK got this domain's XML.
every_xml_is_domain() {
	local mark=$1 id=${2:-} f msgs='' any=''
	for f in $(tail -n +"$((mark + 1))" "$LV_RESULTS/hook.log" | awk '{ sub(/^xml=/, "", $7); print $7 }'); do
		any=1
		msgs="$msgs$(xml_is_domain "$LV_RESULTS/$f" "$id")" || true
	done
	[ -n "$any" ] && [ -z "$msgs" ] && return 0
	echo "${msgs:-no hook calls}"
	return 1
}

state_is() { [ "$(lv_virsh domstate "$DOM" 2>&1)" = "$1" ]; }
qemu_count_is() { [ "$(lv_qemu_pids | wc -l)" -eq "$1" ]; }

cat >"$LV_WORK/dom.xml" <<EOF
<domain type='qemu'>
  <name>$DOM</name>
  <uuid>$UUID</uuid>
  <description>accelvirt libvirt tier: TCG, no disk, boots nothing</description>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type></os>
  <devices><memballoon model='none'/></devices>
</domain>
EOF

# 1: the daemon
if ! lv_start; then
	lv_die "libvirtd did not start (see above)"
fi
priv() {
	local d
	for d in /etc/libvirt /run /var/lib/libvirt /var/cache/libvirt /var/log/libvirt; do
		mountpoint -q "$d" || { echo "$d is not our mount"; return 1; }
	done
	[ "$(readlink /proc/self/ns/mnt)" != "$(readlink /proc/1/ns/mnt)" ] || return 1
	[ "$(readlink "/proc/$LV_LIBVIRTD_PID/ns/mnt")" = "$(readlink /proc/self/ns/mnt)" ] || return 1
	[ -x /etc/libvirt/hooks/qemu.d/00-record ] || return 1
	lv_virsh uri | grep -qx 'qemu:///system'
}
if out=$(priv 2>&1); then
	ok "private libvirtd (pid $LV_LIBVIRTD_PID) answers in its own mount namespace"
else
	not_ok "private libvirtd answers in its own mount namespace" "$out"
fi

# 2: define calls no hook
mark=$(lv_hook_mark)
out=$(lv_virsh define "$LV_WORK/dom.xml" 2>&1) || not_ok "virsh define" "$out"
expect_seq "define: no hook call" "$mark"

# 3-5: start
mark=$(lv_hook_mark)
out=$(lv_virsh start "$DOM" 2>&1) || echo "$out" | lv_comment
expect_seq "start: prepare begin, start begin, started begin" "$mark" \
	"prepare begin -" "start begin -" "started begin -"
id=$(lv_virsh domid "$DOM" 2>/dev/null)
if out=$(every_xml_is_domain "$mark" "$id"); then
	ok "start: each call got the domain's live XML on stdin (id $id)"
else
	not_ok "start: each call got the domain's live XML on stdin" "$out"
fi
qpid=$(lv_qemu_pids)
runs_one_qemu() { state_is running && qemu_count_is 1; }
check "start: the domain runs (TCG QEMU pid ${qpid:-none})" runs_one_qemu

# 6-7: destroy
mark=$(lv_hook_mark)
out=$(lv_virsh destroy "$DOM" 2>&1) || echo "$out" | lv_comment
expect_seq "destroy: stopped end, release end" "$mark" "stopped end -" "release end -"
is_off() { state_is "shut off" && qemu_count_is 0; }
if ! out=$(every_xml_is_domain "$mark"); then
	not_ok "destroy: calls got the domain's XML; shut off, QEMU gone" "$out"
else
	check "destroy: calls got the domain's XML; shut off, QEMU gone" is_off
fi

# 8: save (of a running domain)
lv_virsh start "$DOM" >/dev/null 2>&1 || true
mark=$(lv_hook_mark)
out=$(lv_virsh save "$DOM" "$LV_WORK/dom.save" 2>&1) || echo "$out" | lv_comment
expect_seq "save: stopped end, release end" "$mark" "stopped end -" "release end -"

# 9-10: restore; the saved image's XML is what the hook gets at restore begin
marker="accelvirt-saved-$$-$RANDOM"
lv_virsh save-image-dumpxml "$LV_WORK/dom.save" >"$LV_WORK/saved.xml" 2>&1
sed -i "s|<description>.*</description>|<description>$marker</description>|" "$LV_WORK/saved.xml"
lv_virsh save-image-define "$LV_WORK/dom.save" "$LV_WORK/saved.xml" >/dev/null 2>&1 ||
	echo "save-image-define failed" | lv_comment
mark=$(lv_hook_mark)
out=$(lv_virsh restore "$LV_WORK/dom.save" 2>&1) || echo "$out" | lv_comment
expect_seq "restore: restore begin, prepare begin, start begin, started begin" "$mark" \
	"restore begin -" "prepare begin -" "start begin -" "started begin -"
rx=$(lv_hook_xml_since "$mark" restore begin)
restored() {
	xml_is_domain "$rx" || return 1
	grep -q "<description>$marker</description>" "$rx" || { echo "$rx: no $marker"; return 1; }
	! grep -q "^<domain [^>]*id=" "$rx" || { echo "$rx: a live XML, not the image's"; return 1; }
	state_is running || { echo "not running after restore"; return 1; }
}
if out=$(restored 2>&1); then
	ok "restore begin: stdin is the saved image's XML (edited marker seen); domain runs"
else
	not_ok "restore begin: stdin is the saved image's XML; domain runs" "$out" "restore begin XML: ${rx:-none}"
fi

# 11-14: daemon restart with a running domain
qpid=$(lv_qemu_pids)
lv_stop_daemon
qemu_lives() { [ -n "$qpid" ] && lv_pid_alive "$qpid"; }
check "restart: libvirtd stopped by PID, the domain's QEMU (pid ${qpid:-none}) lives on" qemu_lives
mark=$(lv_hook_mark)
if ! lv_start; then
	lv_die "libvirtd did not start again (see above)"
fi
expect_seq "restart: reconnect begin, and nothing else" "$mark" "reconnect begin -"
same_qemu() { state_is running && [ "$(lv_qemu_pids)" = "$qpid" ]; }
if ! out=$(every_xml_is_domain "$mark"); then
	not_ok "restart: reconnect got the XML; same QEMU, still running" "$out"
else
	check "restart: reconnect got the XML; same QEMU, still running" same_qemu
fi
mark=$(lv_hook_mark)
lv_virsh destroy "$DOM" >/dev/null 2>&1
expect_seq "destroy after reconnect: stopped end, release end" "$mark" "stopped end -" "release end -"

# 15-17: a refused prepare: the user sees the hook's line, release end still follows
touch "$LV_RESULTS/fail-prepare"
mark=$(lv_hook_mark)
if out=$(lv_virsh start "$DOM" 2>&1); then
	not_ok "refused prepare: virsh start fails with the hook's message" "virsh start succeeded:" "$out"
elif printf '%s\n' "$out" | grep -q 'accelvirt-test: refused prepare'; then
	ok "refused prepare: virsh start fails with the hook's message"
	printf '%s\n' "$out" | lv_comment
else
	not_ok "refused prepare: virsh start fails with the hook's message" "virsh said:" "$out"
fi
expect_seq "refused prepare: prepare begin, stopped end, release end" "$mark" \
	"prepare begin -" "stopped end -" "release end -"
rm -f "$LV_RESULTS/fail-prepare"
recovers() {
	is_off && lv_virsh start "$DOM" >/dev/null && runs_one_qemu &&
		lv_virsh destroy "$DOM" >/dev/null && is_off
}
check "refused prepare: shut off, no QEMU; a later start works" recovers

# 18-19: at restore begin, what the hook prints on stdout is the XML libvirt restores
lv_virsh start "$DOM" >/dev/null 2>&1 || true
lv_virsh save "$DOM" "$LV_WORK/dom2.save" >/dev/null 2>&1 || echo "save failed" | lv_comment
rewritten="accelvirt-rewritten-$$-$RANDOM"
lv_virsh save-image-dumpxml "$LV_WORK/dom2.save" 2>&1 |
	sed "s|<description>.*</description>|<description>$rewritten</description>|" >"$LV_WORK/rewrite.xml"
cp "$LV_WORK/rewrite.xml" "$LV_RESULTS/rewrite-restore.xml"
mark=$(lv_hook_mark)
out=$(lv_virsh restore "$LV_WORK/dom2.save" 2>&1) || echo "$out" | lv_comment
rm -f "$LV_RESULTS/rewrite-restore.xml"
expect_seq "restore with a rewriting hook: restore begin, prepare begin, start begin, started begin" "$mark" \
	"restore begin -" "prepare begin -" "start begin -" "started begin -"
rewrote() {
	local px
	state_is running || { echo "not running after restore"; return 1; }
	lv_virsh dumpxml "$DOM" | grep -q "<description>$rewritten</description>" ||
		{ echo "the running domain does not have the hook's XML"; return 1; }
	px=$(lv_hook_xml_since "$mark" prepare begin)
	grep -q "<description>$rewritten</description>" "$px" ||
		{ echo "prepare begin did not get the rewritten XML ($px)"; return 1; }
}
if out=$(rewrote 2>&1); then
	ok "restore begin: the XML the hook prints is the one restored (and prepare sees it)"
else
	not_ok "restore begin: the XML the hook prints is the one restored" "$out"
fi
lv_virsh destroy "$DOM" >/dev/null 2>&1

# 20: undefine calls no hook
mark=$(lv_hook_mark)
out=$(lv_virsh undefine "$DOM" 2>&1) || echo "$out" | lv_comment
expect_seq "undefine: no hook call" "$mark"

# 21: everything stopped by PID
lv_stop_all
check "teardown: libvirtd, virtlogd and every QEMU stopped by PID, no orphan left" lv_all_stopped

if [ "$n" -ne "$PLAN" ]; then
	echo "# harness: ran $n tests, planned $PLAN"
	failed=$((failed + 1))
fi
echo "# hook calls recorded: $(lv_hook_mark); daemon starts: $LV_STARTS"
[ "$failed" -eq 0 ]
