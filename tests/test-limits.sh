#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: the policy's "limits" (accelvirt-policy(5), LIMITS).  The
# hook's prepare refuses, in one line and changing nothing, a domain whose
# owner (as charged: <nova:owner>, or the pinned owner) would hold more
# devices than "max_devices" or has used up "max_device_hours" of the
# period; `accelvirt attach` likewise; `accelvirt limits` and `metrics`
# show the usage; `policy check` refuses bad limits in one line.
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT HOOK=$ACCELVIRT_HOOK W="$AV_TMP/w" POL="$AV_TMP/w/policies"
mkdir -p "$W" && cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$W/host" && hook_policies "$POL"
cat >"$POL/50-limits.json" <<'JSON'
{"limits": [
  {"owner": {"project": "p1"}, "profile": "test-a100", "max_devices": 1},
  {"owner": {"project": "p1"}, "profile": "test-a100", "max_device_hours": 500, "period": "month"},
  {"owner": {"project": "p2", "user": "u2"}, "max_device_hours": 1, "period": "day"}
]}
JSON
chmod 0644 "$POL/50-limits.json"

av() { ACCELVIRT_WORKER=/bin/true "$AV" --root "$W/host" --policy-dir "$POL" --state-dir "$W/state" "$@"; }
hook() {
    ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" ACCELVIRT_WORKER=/bin/true \
        ACCELVIRT_LOG_FILE="$W/log" "$HOOK" "$@"
}
# mkdom FILE NAME N PROJECT USER BUS: a Nova domain (UUID from N) owned by
# PROJECT and USER with the GPU at 0000:BUS:00.0 (managed='no').
mkdom() {
    cat >"$1" <<XML
<domain type='kvm'>
  <name>$2</name>
  <uuid>$(printf '%08x-0000-4000-8000-%012x' "$3" "$3")</uuid>
  <memory unit='GiB'>4</memory>
  <vcpu placement='static'>2</vcpu>
  <metadata><nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'><nova:owner><nova:user uuid='$5'/><nova:project uuid='$4'/></nova:owner></nova:instance></metadata>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x$6' slot='0x00' function='0x0'/></source></hostdev>
  </devices>
</domain>
XML
}
# saved, unchanged: the state dir of $W is as when saved (lib.sh's
# state_snapshot: the journal, the pool less the scans' last_seen).
saved() { state_snapshot "$W/state" >"$W/snap0"; }
unchanged() { state_snapshot "$W/state" >"$W/snap1" && diff -u "$W/snap0" "$W/snap1"; }
# refused PATTERN ARGS...: the hook exits 1 with exactly one stderr line "accelvirt: ...PATTERN".
refused() {
    pat=$1; shift
    hook "$@" >"$AV_TMP/out" 2>"$AV_TMP/err" && { echo "accepted"; return 1; }
    [ "$(wc -l <"$AV_TMP/err")" -eq 1 ] || { echo "not one line:"; cat "$AV_TMP/err"; return 1; }
    grep -qF -- "accelvirt: $pat" "$AV_TMP/err" || { echo "no '$pat' in:"; cat "$AV_TMP/err"; return 1; }
    [ ! -s "$AV_TMP/out" ]
}

mkdom "$W/a.xml" vma 1 p1 u1 17
mkdom "$W/b.xml" vmb 2 p1 u9 31
mkdom "$W/c.xml" vmc 3 p3 u3 31
mkdom "$W/d.xml" vmd 4 p2 u2 4b

check "accelvirt limits without limits says so" \
    eval "mkdir -m 0755 '$W/nopolicies' && ACCELVIRT_WORKER=/bin/true '$AV' --root '$W/host' --policy-dir '$W/nopolicies' --state-dir '$W/none' limits | grep -qx 'No limits: the policy has no \"limits\" (accelvirt-policy(5), LIMITS).'"
check "policy check takes the limits and counts them" \
    eval "av policy check >'$W/check.out' && grep -qx '3 limits (.accelvirt limits. shows each owner.s usage).' '$W/check.out'"
check "p1's first A100: prepared (under max_devices 1)" eval "hook vma prepare begin - <'$W/a.xml'"
saved
check "p1's second A100 (another user of p1): refused in one line naming the limit and the usage" \
    eval "refused \"cannot start domain 'vmb': the limit of project 'p1' on profile 'test-a100' (50-limits.json) is max_devices 1: it holds 1 and this would make 2; release a device or raise the limit\" vmb prepare begin - <'$W/b.xml'"
check "  ... nothing changed: pool.json and the journal as before" unchanged
check "  ... its GPU stays on its host driver" \
    eval "[ \"\$(basename \"\$(readlink '$W/host/sys/bus/pci/devices/0000:31:00.0/driver')\")\" = nvidia ]"
check "another project without a limit gets that GPU" eval "hook vmc prepare begin - <'$W/c.xml'"
check "the prepare again of the domain that holds p1's device is not refused (its own device counts once)" \
    eval "hook vma release end - <'$W/a.xml' && ACCELVIRT_ROOT='$W/host' ACCELVIRT_STATE_DIR='$W/state' ACCELVIRT_POLICY_DIR='$POL' ACCELVIRT_LOG_FILE='$W/log' '$ACCELVIRT_WORKER' </dev/null >/dev/null 2>&1; hook vma prepare begin - <'$W/a.xml'"

check "accelvirt limits: each limit, its usage" eval "av limits >'$W/limits.txt'"
check "  ... as expected" golden limits.txt "$W/limits.txt"
check "accelvirt limits --json (the seconds of the running device aside)" \
    eval "av limits --json | python3 -c 'import json,sys; d=json.load(sys.stdin); [(r.pop(\"used_seconds\"), r.update(used=round(r[\"used\"], 1))) for r in d[\"limits\"] if r[\"kind\"] == \"max_device_hours\"]; print(json.dumps(d, indent=2))' >'$W/limits.json'"
check "  ... as expected" golden limits.json "$W/limits.json"
check "metrics: accelvirt_limit and accelvirt_limit_usage by owner, profile and kind" \
    eval "av metrics >'$W/metrics' && grep -qx 'accelvirt_limit{project=\"p1\",user=\"\",profile=\"test-a100\",kind=\"max_devices\"} 1' '$W/metrics' && grep -qx 'accelvirt_limit_usage{project=\"p1\",user=\"\",profile=\"test-a100\",kind=\"max_devices\"} 1' '$W/metrics' && grep -qx 'accelvirt_limit{project=\"p2\",user=\"u2\",profile=\"\",kind=\"max_device_hours\"} 1' '$W/metrics'"

# Device-hours: p2 used 3600 s today (as a release records them in pool.json's "usage").
python3 - "$W/state/pool.json" <<'PY'
import json, sys, time, calendar
p = json.load(open(sys.argv[1]))
t = time.gmtime()
day = calendar.timegm((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0))
p.setdefault("usage", []).append({"project": "p2", "user": "u2", "profile": "test-a100", "period": "day",
                                  "start": day, "in_use_s": 3600})
with open(sys.argv[1], "r+") as f:
    f.truncate(0)
    json.dump(p, f)
PY
saved
check "p2 has used its hour of today: its prepare is refused naming max_device_hours and the hours used" \
    eval "refused \"cannot start domain 'vmd': the limit of project 'p2' user 'u2' on every profile (50-limits.json) is max_device_hours 1 a day: 1.0 used this day\" vmd prepare begin - <'$W/d.xml'"
check "  ... nothing changed" unchanged
check "  ... accelvirt limits says it is reached" eval "av limits | grep -q 'max_device_hours 1/day  *1.0 h (reached)'"

# A release records the device-hours of its owner in pool.json's "usage":
# vmc's GPU in use since two hours ago.
python3 - "$W/state/pool.json" <<'PY'
import json, sys, time
p = json.load(open(sys.argv[1]))
for d in p["devices"]:
    if (d.get("owner") or {}).get("domain_name") == "vmc":
        d["state_since"] = int(time.time()) - 7200
with open(sys.argv[1], "r+") as f:
    f.truncate(0)
    json.dump(p, f)
PY
check "a release adds the in-use time to the owner's usage of the day, week and month" \
    eval "hook vmc release end - <'$W/c.xml' && json '$W/state/pool.json' \"sorted(u['period'] for u in d['usage'] if u['project'] == 'p3' and 0 < u['in_use_s'] <= 7202) == ['day', 'month', 'week'] and [u['in_use_s'] for u in d['usage'] if u['project'] == 'p3' and u['period'] == 'month'][0] >= [u['in_use_s'] for u in d['usage'] if u['project'] == 'p3' and u['period'] == 'day'][0]\""
check "  ... which accelvirt limits counts (a limit of p3 added)" \
    eval "printf '%s\\n' '{\"limits\": [{\"owner\": {\"project\": \"p3\"}, \"max_device_hours\": 9, \"period\": \"month\"}]}' >'$POL/55-p3.json' && chmod 0644 '$POL/55-p3.json' && av limits --json | python3 -c 'import json,sys; r=[x for x in json.load(sys.stdin)[\"limits\"] if x[\"project\"] == \"p3\"][0]; sys.exit(0 if 0 < r[\"used_seconds\"] <= 7202 else 1)'"
rm -f "$POL/55-p3.json"

# attach: the same check under the pool's lock, before anything changes
# (libvirt's test driver and the CLI's fake hot-plug, as tests/test-attach.sh).
T="$AV_TMP/t"
mkdir -p "$T/hp" "$T/pol"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$T/host"
cp "$AV_TEST_SRCDIR"/place/policies/*.json "$T/pol/"
cat >"$T/pol/50-limits.json" <<'JSON'
{"limits": [{"owner": {"project": "pa"}, "profile": "gpu-passthrough", "max_devices": 1}]}
JSON
chmod 0755 "$T/pol" && chmod 0644 "$T/pol"/*.json
cat >"$T/drv.xml" <<'XML'
<node>
  <domain type='test'>
    <name>vmn</name>
    <uuid>5eed0000-0000-4000-8000-00000000a101</uuid>
    <memory>1048576</memory>
    <vcpu placement='static' cpuset='16-31'>2</vcpu>
    <metadata><nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'><nova:owner><nova:user uuid='ua'/><nova:project uuid='pa'/></nova:owner></nova:instance></metadata>
    <os><type>hvm</type></os>
    <devices/>
  </domain>
</node>
XML
at() {
    ACCELVIRT_TEST_HOTPLUG="$T/hp" ACCELVIRT_WORKER=/bin/true \
        "$AV" --root "$T/host" --policy-dir "$T/pol" --state-dir "$T/state" -c "test://$T/drv.xml" "$@"
}
at status >/dev/null 2>&1
state_snapshot "$T/state" >"$T/snap0"
check "attach of two GPUs to pa's domain: refused in one line naming max_devices, nothing changed" \
    eval "one_line 6 \"the limit of project 'pa' on profile 'gpu-passthrough' (50-limits.json) is max_devices 1: it holds 0 and this would make 2\" at attach vmn gpu-passthrough --count 2 && state_snapshot '$T/state' >'$T/snap1' && diff -u '$T/snap0' '$T/snap1'"
check "attach of one: done" eval "at attach vmn gpu-passthrough >/dev/null"
check "attach of one more: refused, it holds 1" \
    one_line 6 "is max_devices 1: it holds 1 and this would make 2; release a device or raise the limit" at attach vmn gpu-passthrough

# policy check: each mistake one line, non-zero, naming it.
bad() {
    printf '%s\n' "$2" >"$POL/60-bad.json" && chmod 0644 "$POL/60-bad.json"
    av policy check >"$AV_TMP/out" 2>"$AV_TMP/err"; rc=$?
    rm -f "$POL/60-bad.json"
    [ "$rc" -ne 0 ] || { echo "exit 0"; return 1; }
    [ "$(wc -l <"$AV_TMP/err")" -eq 1 ] || { echo "not one line:"; cat "$AV_TMP/err"; return 1; }
    grep -qF -- "$1" "$AV_TMP/err" || { echo "no '$1' in:"; cat "$AV_TMP/err"; return 1; }
}
check "policy check: an unknown key in a limit" \
    bad "unknown key 'max_gpus' in a limit" '{"limits": [{"owner": {"project": "p"}, "max_gpus": 1}]}'
check "policy check: an owner without an id" \
    bad "the limit's owner names no id" '{"limits": [{"owner": {}, "max_devices": 1}]}'
check "policy check: an unknown key in the owner" \
    bad "unknown key 'tenant' in a limit's owner" '{"limits": [{"owner": {"tenant": "p"}, "max_devices": 1}]}'
check "policy check: a negative number" \
    bad "'max_devices' must be a whole number" '{"limits": [{"owner": {"project": "p"}, "max_devices": -1}]}'
check "policy check: a number that is not whole" \
    bad "'max_device_hours' must be a whole number" '{"limits": [{"owner": {"project": "p"}, "max_device_hours": 1.5, "period": "day"}]}'
check "policy check: an unknown profile" \
    bad "unknown profile 'h100'" '{"limits": [{"owner": {"project": "p"}, "profile": "h100", "max_devices": 1}]}'
check "policy check: an unknown period" \
    bad "unknown period; expected one of: day, week, month" '{"limits": [{"owner": {"project": "p"}, "max_device_hours": 5, "period": "year"}]}'
check "policy check: max_device_hours without a period" \
    bad "\"max_device_hours\" needs a \"period\"" '{"limits": [{"owner": {"project": "p"}, "max_device_hours": 5}]}'
check "policy check: a limit that limits nothing" \
    bad "a limit needs \"max_devices\" or \"max_device_hours\"" '{"limits": [{"owner": {"project": "p"}}]}'
check "policy check: limits that are no list" \
    bad "'limits' must be a list" '{"limits": {"owner": {"project": "p"}}}'

# A hostdev of a function in a pool device's IOMMU group claims that
# device: it counts against max_devices, once however many hostdevs name it
# or its group.  Its own host, policy and state (the A6000s 0000:98:00.0 and
# 0000:b1:00.0 each share their group with a function .1 the pool does not hold).
G="$AV_TMP/g"
mkdir -p "$G" && cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$G/host" && hook_policies "$G/policies"
printf '{"limits": [{"owner": {"project": "p4"}, "max_devices": 1}]}\n' >"$G/policies/50-limits.json"
chmod 0644 "$G/policies/50-limits.json"
ghook() {
    ACCELVIRT_ROOT="$G/host" ACCELVIRT_STATE_DIR="$G/state" ACCELVIRT_POLICY_DIR="$G/policies" \
        ACCELVIRT_WORKER=/bin/true ACCELVIRT_LOG_FILE="$G/log" "$HOOK" "$@"
}
# gdom FILE NAME N FUNCTION...: a domain of project p4 with those functions.
gdom() {
    f=$1 name=$2 n=$3; shift 3
    {
        printf "<domain type='kvm'><name>%s</name><uuid>%s</uuid><memory unit='GiB'>4</memory><vcpu>2</vcpu>\n" \
            "$name" "$(printf '%08x-0000-4000-8000-%012x' "$n" "$n")"
        printf "<metadata><nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'><nova:owner><nova:user uuid='u4'/><nova:project uuid='p4'/></nova:owner></nova:instance></metadata><devices>\n"
        for fn in "$@"; do
            printf "<hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x%s' slot='0x00' function='0x%s'/></source></hostdev>\n" \
                "${fn%.*}" "${fn#*.}"
        done
        printf '</devices></domain>\n'
    } >"$f"
}
gdom "$G/two.xml" vmg2 21 98.1 b1.1
gdom "$G/one.xml" vmg1 22 98.0 98.1
check "max_devices counts the devices claimed through their IOMMU group: two A6000s named by their .1 functions refused" \
    eval "! ghook vmg2 prepare begin - <'$G/two.xml' >'$G/out' 2>'$G/err' && grep -q 'max_devices 1: it holds 0 and this would make 2' '$G/err'"
check "  ... nothing claimed" eval "! grep -qE '\"state\": \"(claimed|in_use)\"' '$G/state/pool.json'"
check "  ... one A6000 named by its function and by its group's other function counts once" \
    eval "ghook vmg1 prepare begin - <'$G/one.xml' 2>'$G/err1' || ! grep -q max_devices '$G/err1'"

finish
