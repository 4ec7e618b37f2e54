#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: `accelvirt audit` and `accelvirt watch` (issue 14) on a
# fake host, with libvirt's test driver (test:///ABSOLUTE/PATH.xml) as the
# libvirtd whose running domains hold <hostdev>s: every domain of a test
# driver file runs.  The driver's state is private to each connection, so
# only the start-up audit of watch (--once, and the service until SIGTERM)
# is tested here; events need a real libvirtd (tests/vm).
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
POL="$AV_TEST_SRCDIR/../policies"
# A private copy of the fake host: what the audit releases or quarantines is
# held on it (a USB stick's "authorized" written by the emulated kernel).
H2="$AV_TMP/two-socket-8gpu"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$H2"
STATE="$AV_TMP/state"
NODE="$AV_TMP/node.xml"
D1=11111111-1111-4111-8111-111111111111
D2=22222222-2222-4222-8222-222222222222
OLD=33333333-3333-4333-8333-333333333333

# The worker records that it was started, and does nothing else.
fake_worker

av() {
    "$AV" --root "$H2" --policy-dir "$POL" --state-dir "$STATE" --connect "test://$NODE" "$@"
}

# hostdev_pci BUS: a <hostdev> of 0000:BUS:00.0.
hostdev_pci() {
    echo "<hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x$1' slot='0x00' function='0x0'/></source></hostdev>"
}

# domain NAME UUID HOSTDEVS: a running domain of the test driver.
domain() {
    echo "<domain type='test'><name>$1</name><uuid>$2</uuid><memory>1048576</memory><vcpu>1</vcpu>"
    echo "<os><type>hvm</type></os><devices>$3</devices></domain>"
}

# The running domains: d1 got the free GPU 17 and the free USB stick (by
# vendor and product) behind accelvirt's back; d2 got GPU 31, dirty after
# another domain, and no longer holds GPU 4b, which the pool has in use by
# it; GPU 65 is in use by a domain that is not running.
{
    echo "<node>"
    domain d1 $D1 "$(hostdev_pci 17)<hostdev mode='subsystem' type='usb'><source><vendor id='0x03e7'/><product id='0x2485'/></source></hostdev>"
    domain d2 $D2 "$(hostdev_pci 31)"
    echo "</node>"
} >"$NODE"

setup_pool() {
    rm -rf "$STATE" "$AV_TMP/worker-ran"
    av status >/dev/null &&
        pool_set 0000:31:00.0 dirty $OLD old &&
        pool_set 0000:4b:00.0 in-use $D2 d2 &&
        pool_set 0000:65:00.0 in-use $OLD old
}

check "the fake pool is set up" setup_pool

# --- bad input: one line, a non-zero status, nothing changed ---
check "audit takes no arguments" refused 2 "audit takes no arguments" av audit extra
check "an unknown option of audit is a usage error" refused 2 "Unknown option" av audit --frobnicate
check "watch takes no arguments" refused 2 "watch takes no arguments" av watch --once extra
check "audit with no libvirtd there fails, naming the URI" \
    refused 1 "cannot connect to libvirt at 'qemu:///system?socket=/nonexistent/accelvirt-sock'" \
    av audit --connect qemu:///system?socket=/nonexistent/accelvirt-sock
check "watch --once with no libvirtd there fails, naming the URI" \
    refused 1 "cannot connect to libvirt at 'qemu:///system?socket=/nonexistent/accelvirt-sock'" \
    av watch --once --connect qemu:///system?socket=/nonexistent/accelvirt-sock
check "audit of a fake host into the default state dir is refused" \
    eval "ACCELVIRT_WORKER=/bin/false '$AV' --root '$H2' --policy-dir '$POL' --connect 'test://$NODE' audit >'$AV_TMP/out' 2>'$AV_TMP/err'; test \$? -ne 0 && grep -q 'give a --state-dir of its own' '$AV_TMP/err'"

# --- audit --dry-run: says, changes nothing ---
dry_run() {
    before=$(fingerprint)
    av audit --dry-run >"$AV_TMP/dry" || return 1
    [ "$(fingerprint)" = "$before" ] || { echo "the dry run changed the pool or the journal"; return 1; }
    grep -q "^would do: attached-outside: domain 'd1'.*0000:17:00.0" "$AV_TMP/dry" &&
        grep -q "^would do: violation: domain 'd2'.*0000:31:00.0.*dirty by domain 'old'" "$AV_TMP/dry" &&
        grep -q "^would do: detached-outside: domain 'd2'.*0000:4b:00.0" "$AV_TMP/dry" &&
        grep -q "^would do: not-running: .*0000:65:00.0" "$AV_TMP/dry" &&
        [ ! -e "$AV_TMP/worker-ran" ] || { cat "$AV_TMP/dry"; return 1; }
}
check "audit --dry-run lists every finding and changes nothing" dry_run

# --- audit: the rules ---
av audit --json >"$AV_TMP/audit.json" 2>"$AV_TMP/audit.err"
audit_json() {
    json "$AV_TMP/audit.json" "$1" || { cat "$AV_TMP/audit.json" "$AV_TMP/audit.err"; return 1; }
}
check "audit --json: one finding per device, in domain order" audit_json \
    "not d['dry_run'] and d['domains'] == 2 and [(f['action'], f['domain_name'], f['address'], f['from'], f['state']) for f in d['findings']] == [('attached-outside', 'd1', '0000:17:00.0', 'free', 'in-use'), ('attached-outside', 'd1', '1-1.2', 'free', 'in-use'), ('violation', 'd2', '0000:31:00.0', 'dirty', 'quarantined'), ('detached-outside', 'd2', '0000:4b:00.0', 'in-use', 'dirty'), ('not-running', 'old', '0000:65:00.0', 'in-use', 'in-use')]"
check "the free GPU d1 got is in use by d1" eval "test \"\$(state_of 0000:17:00.0)\" = 'in-use d1 None'"
check "the stick d1 got by vendor and product is in use by d1" eval "test \"\$(state_of 1-1.2)\" = 'in-use d1 None'"
check "the dirty GPU d2 got is quarantined, with a reason naming d2" \
    eval "state_of 0000:31:00.0 | grep -q \"^quarantined old attached behind accelvirt's back to domain $D2 ('d2') while it was dirty\""
check "the GPU d2 no longer holds is dirty, never free" eval "test \"\$(state_of 0000:4b:00.0)\" = 'dirty d2 None'"
check "the GPU of the domain that is not running is left in use" eval "test \"\$(state_of 0000:65:00.0)\" = 'in-use old None'"
check "the worker was started for the dirty GPU" test -e "$AV_TMP/worker-ran"
check "the journal has the violation, with the domain, the device, its state and owner" \
    eval "grep '\"event\":\"violation\"' '$STATE/journal.jsonl' | python3 -c 'import json,sys; e=json.loads(sys.stdin.read()); sys.exit(not (e[\"domain_uuid\"] == \"$D2\" and e[\"domain_name\"] == \"d2\" and e[\"address\"] == \"0000:31:00.0\" and e[\"state\"] == \"dirty\" and e[\"owner\"][\"domain_name\"] == \"old\" and e[\"by\"] == \"audit\"))'"
check "the journal has the attach and the detach outside accelvirt" \
    eval "test \$(grep -c '\"event\":\"attached-outside\"' '$STATE/journal.jsonl') -eq 2 && grep '\"event\":\"detached-outside\"' '$STATE/journal.jsonl' | grep -q '0000:4b:00.0' && grep '\"released_by\":\"audit\"' '$STATE/journal.jsonl' | grep -q '0000:4b:00.0'"
check "the journal's chain holds" av journal verify

# --- idempotent ---
idempotent() {
    before=$(fingerprint)
    av audit >"$AV_TMP/again" || return 1
    [ "$(fingerprint)" = "$before" ] || { echo "the second audit changed the pool or the journal"; return 1; }
    [ "$(cat "$AV_TMP/again")" = "not-running: dsn:10de:20f1:48b02d1a000001c3.f0 (0000:65:00.0) is in use by domain 'old' ($OLD), which is not running: its release is left to 'accelvirt reconcile' or 'accelvirt release'" ] ||
        { cat "$AV_TMP/again"; return 1; }
}
check "a second audit changes nothing and reports only the domain that is not running" idempotent

nothing_to_do() {
    {
        echo "<node>"
        domain d1 $D1 ""
        echo "</node>"
    } >"$AV_TMP/empty.xml"
    rm -rf "$STATE" && av status >/dev/null &&
        [ "$(av audit --connect "test://$AV_TMP/empty.xml")" = "nothing to do (1 running domains)" ]
}
check "an audit with nothing to do says so" nothing_to_do

# --- a device hidden behind what the hook's strict parser refuses ---
# libvirt accepts any user alias "ua-..." (a virsh attach-device can give
# one of 300 characters); the hook's parser takes 128 at most.  The audit
# reads only what names a device: the free GPU is in use by d3, not left
# free for the next tenant.
D3=44444444-4444-4444-8444-444444444444
LONG="ua-$(printf 'x%.0s' $(seq 300))"
long_alias() {
    {
        echo "<node>"
        domain d3 $D3 "<hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0xca' slot='0x00' function='0x0'/></source><alias name='$LONG'/></hostdev>"
        echo "</node>"
    } >"$AV_TMP/long.xml"
    rm -rf "$STATE" && av status >/dev/null || return 1
    av audit --connect "test://$AV_TMP/long.xml" >"$AV_TMP/long.out" 2>"$AV_TMP/long.err" ||
        { cat "$AV_TMP/long.out" "$AV_TMP/long.err"; return 1; }
    grep -q "^attached-outside: domain 'd3'.*0000:ca:00.0" "$AV_TMP/long.out" &&
        [ "$(state_of 0000:ca:00.0)" = 'in-use d3 None' ] || { cat "$AV_TMP/long.out"; return 1; }
}
check "a free GPU held by a domain with a 300-character user alias is in use by it, not free" long_alias

# Metadata with a namespace prefix it never declares (libvirt keeps it as it was set on a
# running domain, virsh metadata --set '<a><q:z/></a>'): the whole live XML must not turn
# unreadable, or the free GPU behind it would stay free.
undeclared_prefix() {
    {
        echo "<node>"
        echo "<domain type='test'><name>d3</name><uuid>$D3</uuid><memory>1048576</memory><vcpu>1</vcpu><os><type>hvm</type></os>"
        echo "<metadata><t:x xmlns:t='urn:tenant'><t:y><q:z>hi</q:z></t:y></t:x></metadata>"
        echo "<devices>$(hostdev_pci ca)</devices></domain>"
        echo "</node>"
    } >"$AV_TMP/ns.xml"
    rm -rf "$STATE" && av status >/dev/null || return 1
    av audit --connect "test://$AV_TMP/ns.xml" >"$AV_TMP/ns.out" 2>"$AV_TMP/ns.err" ||
        { cat "$AV_TMP/ns.out" "$AV_TMP/ns.err"; return 1; }
    grep -q "^attached-outside: domain 'd3'.*0000:ca:00.0" "$AV_TMP/ns.out" &&
        [ "$(state_of 0000:ca:00.0)" = 'in-use d3 None' ] || { cat "$AV_TMP/ns.out"; return 1; }
}
check "a free GPU held by a domain whose metadata uses an undeclared namespace prefix is in use by it, not free" undeclared_prefix

# What the audit cannot tell makes it fail, saying what: a USB hostdev that
# names no stick of this host.  The GPU of the same domain is still audited.
unresolved_fails() {
    {
        echo "<node>"
        domain d3 $D3 "$(hostdev_pci ca)<hostdev mode='subsystem' type='usb'><source><vendor id='0x1234'/><product id='0x5678'/></source></hostdev>"
        echo "</node>"
    } >"$AV_TMP/unres.xml"
    rm -rf "$STATE" && av status >/dev/null || return 1
    av audit --connect "test://$AV_TMP/unres.xml" >"$AV_TMP/unres.out" 2>"$AV_TMP/unres.err"
    st=$?
    [ $st -eq 1 ] || { echo "exit status $st"; cat "$AV_TMP/unres.out" "$AV_TMP/unres.err"; return 1; }
    grep -q "^unresolved: domain 'd3'" "$AV_TMP/unres.out" &&
        grep -q "^attached-outside: domain 'd3'.*0000:ca:00.0" "$AV_TMP/unres.out" &&
        [ "$(wc -l <"$AV_TMP/unres.err")" -eq 1 ] && grep -q "^accelvirt: the audit is not complete" "$AV_TMP/unres.err" ||
        { cat "$AV_TMP/unres.out" "$AV_TMP/unres.err"; return 1; }
    av --json audit --connect "test://$AV_TMP/unres.xml" >"$AV_TMP/unres.json" 2>/dev/null
    json "$AV_TMP/unres.json" "d['complete'] is False"
}
check "an audit that cannot tell a hostdev exits 1, says what, and still audits the rest" unresolved_fails

# A free GPU whose VFIO group a process holds though no running domain
# names it (a domain whose XML could not be read, a program on the host):
# quarantined as unscrubbed, journalled; found from the kernel (/proc).
held_outside() {
    rm -rf "$AV_TMP/h2p" && cp -a "$H2" "$AV_TMP/h2p" || return 1
    mkdir -p "$AV_TMP/h2p/proc/4242/fd" && ln -s /dev/vfio/46 "$AV_TMP/h2p/proc/4242/fd/7" || return 1
    rm -rf "$STATE"
    "$AV" --root "$AV_TMP/h2p" --policy-dir "$POL" --state-dir "$STATE" status >/dev/null || return 1
    "$AV" --root "$AV_TMP/h2p" --policy-dir "$POL" --state-dir "$STATE" --connect "test://$AV_TMP/empty.xml" audit         >"$AV_TMP/held.out" 2>"$AV_TMP/held.err" || { cat "$AV_TMP/held.out" "$AV_TMP/held.err"; return 1; }
    grep -q "^held-outside: .*(0000:ca:00.0) is free but process 4242 (/dev/vfio/46) holds its IOMMU group" "$AV_TMP/held.out" ||
        { cat "$AV_TMP/held.out"; return 1; }
    "$AV" --root "$AV_TMP/h2p" --policy-dir "$POL" --state-dir "$STATE" --json status >"$AV_TMP/held.json" || return 1
    json "$AV_TMP/held.json" "[x for x in d['devices'] if x['address'] == '0000:ca:00.0'][0]['state'] == 'quarantined'" &&
        grep '"event":"violation"' "$STATE/journal.jsonl" | grep -q '0000:ca:00.0' || return 1
    # Quarantined, it is no longer free: a second audit has nothing to do.
    [ "$("$AV" --root "$AV_TMP/h2p" --policy-dir "$POL" --state-dir "$STATE" --connect "test://$AV_TMP/empty.xml" audit 2>/dev/null)" = "nothing to do (1 running domains)" ]
}
check "a free GPU whose group a process holds outside every domain is quarantined" held_outside

# Anyone may open /proc/bus/pci/BB/SS.F (config space, mode 0644): that holds nothing,
# and must not get free devices quarantined.
config_reader() {
    rm -rf "$AV_TMP/h2r" && cp -a "$H2" "$AV_TMP/h2r" || return 1
    mkdir -p "$AV_TMP/h2r/proc/4243/fd" && ln -s /proc/bus/pci/ca/00.0 "$AV_TMP/h2r/proc/4243/fd/3" || return 1
    rm -rf "$STATE"
    "$AV" --root "$AV_TMP/h2r" --policy-dir "$POL" --state-dir "$STATE" status >/dev/null || return 1
    [ "$("$AV" --root "$AV_TMP/h2r" --policy-dir "$POL" --state-dir "$STATE" --connect "test://$AV_TMP/empty.xml" audit 2>&1)" = "nothing to do (1 running domains)" ]
}
check "a process reading a free GPU's config space (/proc/bus/pci) holds nothing: not quarantined" config_reader

# --- watch --once: the same full audit, logged on stderr ---
watch_once() {
    setup_pool || return 1
    av watch --once >"$AV_TMP/w.out" 2>"$AV_TMP/w.err" || { cat "$AV_TMP/w.err"; return 1; }
    grep -q "^accelvirt watch: violation: domain 'd2'.*0000:31:00.0" "$AV_TMP/w.err" &&
        grep -q "^accelvirt watch: attached-outside: domain 'd1'.*0000:17:00.0" "$AV_TMP/w.err" &&
        grep -q "^accelvirt watch: detached-outside: domain 'd2'.*0000:4b:00.0" "$AV_TMP/w.err" &&
        grep -q "^accelvirt watch: audited 2 running domains" "$AV_TMP/w.err" &&
        [ ! -s "$AV_TMP/w.out" ] || { cat "$AV_TMP/w.err"; return 1; }
    grep '"released_by":"watch"' "$STATE/journal.jsonl" | grep -q 0000:4b:00.0 &&
        [ "$(state_of 0000:31:00.0 | cut -d' ' -f1)" = quarantined ]
}
check "watch --once audits every running domain and logs each finding on stderr" watch_once

# wait_for FILE PATTERN: up to 10 s for PATTERN in FILE.
wait_for() {
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -lt 100 ] || { echo "no '$2' in $1:"; cat "$1"; return 1; }
        sleep 0.1
    done
}

# watch_start URI LOG: starts the service in the background, its stderr to
# LOG, its pid in $pid.  watch_stop SIGNAL LOG: sends SIGNAL, and it must
# exit 0 saying why.
watch_start() {
    "$AV" --root "$H2" --policy-dir "$POL" --state-dir "$STATE" --connect "$1" watch 2>"$2" &
    pid=$!
}
watch_stop() {
    kill "-$1" $pid
    wait $pid
    st=$?
    [ $st -eq 0 ] || { echo "exit status $st"; cat "$2"; return 1; }
    grep -q "stopping on a signal" "$2"
}

# The service: a full audit at its start, then it waits for events;
# SIGTERM ends it with status 0.
watch_service() {
    setup_pool || return 1
    watch_start "test://$NODE" "$AV_TMP/ws.err"
    wait_for "$AV_TMP/ws.err" "accelvirt watch: watching test://" || { kill $pid; return 1; }
    grep -q "violation: domain 'd2'" "$AV_TMP/ws.err" || { kill $pid; cat "$AV_TMP/ws.err"; return 1; }
    # Not holding the pool's lock while it waits: a writer gets it at once.
    av release --force d1 >/dev/null || { kill $pid; return 1; }
    watch_stop TERM "$AV_TMP/ws.err"
}
check "watch audits at its start, does not hold the pool's lock while it waits, exits 0 on SIGTERM" watch_service

# A libvirtd that is not there: watch keeps trying, with a growing wait,
# and still ends on SIGINT.
watch_reconnect() {
    watch_start "qemu:///system?socket=/nonexistent/accelvirt-sock" "$AV_TMP/wr.err"
    wait_for "$AV_TMP/wr.err" "trying again in 2 s" || { kill $pid; return 1; }
    watch_stop INT "$AV_TMP/wr.err" &&
        grep -q "cannot connect to libvirt at 'qemu:///system?socket=/nonexistent/accelvirt-sock'.*trying again in 1 s" "$AV_TMP/wr.err"
}
check "watch retries an unreachable libvirtd with backoff and exits 0 on SIGINT" watch_reconnect

finish
