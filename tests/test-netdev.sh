#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: cards of attach netdev (issue 34 item 4: IP-over-PCIe
# cards such as Intel's VCA, reached through the network interface their
# host driver makes), on a private copy of the fake host netdev-card, whose
# two e1000e functions (0000:45:00.0 with enp69s0, 0000:46:00.0 with
# enp70s0) stand in for the cards.  The pool and `list` show the interface;
# the hook claims the card of a domain's <interface type='direct'> (mode
# passthrough) and leaves it on its host driver; another domain, another
# mode, the card as a <hostdev> are refused with the pool unchanged; the
# release scrubs it by its profile's steps (reset through sysfs, a command
# that gets the interface's name) and frees it; the policy refuses what
# needs vfio-pci.
. "$AV_TEST_SRCDIR/lib.sh"

: "${ACCELVIRT_HOOK:?ACCELVIRT_HOOK is not set: run the tests with make check}"
: "${ACCELVIRT_WORKER:?ACCELVIRT_WORKER is not set: run the tests with make check}"
AV=$ACCELVIRT
SCRUB="$AV_TEST_SRCDIR/data/netdev-scrub.sh"
REAL_WORKER=$ACCELVIRT_WORKER

POL="$AV_TMP/policies"
mkdir -p "$POL"
cat >"$POL/10-vca.json" <<JSON
{"profiles": [
  {"name": "vca", "description": "an IP-over-PCIe card (e1000e standing in)",
   "match": {"vendor": "0x8086", "device": "0x10d3"}, "attach": "netdev", "numa": "none",
   "scrub": [{"method": "reset"}, {"method": "command", "argv": ["$SCRUB"], "timeout": 5}]}
]}
JSON
chmod 0755 "$POL" && chmod 0644 "$POL"/*.json

W="$AV_TMP/w"
STATE="$W/state"
mkdir -p "$W"
cp -a "$AV_TEST_HOSTS/netdev-card" "$W/host"
DEVS="$W/host/sys/bus/pci/devices"
av() {
    ACCELVIRT_WORKER="$ACCELVIRT_WORKER" ACCELVIRT_LOG_FILE="$W/log" AV_SCRUB_LOG="$W/scrub.log" \
    AV_SCRUB_FAIL="$W/scrub-fail" "$AV" --root "$W/host" --policy-dir "$POL" --state-dir "$STATE" "$@"
}
hook() {
    xml=$1; shift
    ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$STATE" ACCELVIRT_POLICY_DIR="$POL" \
    ACCELVIRT_WORKER="$ACCELVIRT_WORKER" ACCELVIRT_LOG_FILE="$W/log" \
    AV_SCRUB_LOG="$W/scrub.log" AV_SCRUB_FAIL="$W/scrub-fail" "$ACCELVIRT_HOOK" "$@" <"$xml"
}
uuid() { printf '%08x-0000-4000-8000-%012x' "$1" "$1"; }
# mkdom FILE NAME UUID DEVICES: a domain whose <devices> hold DEVICES.
mkdom() {
    printf '<domain type="kvm"><name>%s</name><uuid>%s</uuid><memory unit="GiB">4</memory><vcpu>2</vcpu><devices>%s</devices></domain>\n' \
        "$2" "$3" "$4" >"$1"
}
direct() { printf '<interface type="direct"><source dev="%s" mode="%s"/><model type="virtio"/></interface>' "$1" "$2"; }
# wait_state ADDRESS STATE: polls the pool until ADDRESS is in STATE (20 s).
wait_state() {
    i=0
    while [ $i -lt 200 ]; do
        [ "$(state_of "$1" | cut -d' ' -f1)" = "$2" ] && return 0
        sleep 0.1
        i=$((i + 1))
    done
    echo "$1 is $(state_of "$1"), not $2"
    return 1
}
driver_of() { basename "$(readlink "$DEVS/$1/driver")"; }

av status >/dev/null

# --- the pool and list ---
check "the two e1000e cards are the pool's, free; the host's own NIC is not" \
    eval "[ \"\$(state_of 0000:45:00.0)\" = 'free None None' ] && [ \"\$(state_of 0000:46:00.0)\" = 'free None None' ] &&
          [ -z \"\$(state_of 0000:47:00.0)\" ]"
check "list shows each card's interface (and the host NIC's, of no profile)" \
    eval "av list >'$W/list.txt' && grep -q '^  0000:45:00.0 .*netdev enp69s0' '$W/list.txt' &&
          grep -q '^  0000:46:00.0 .*netdev enp70s0' '$W/list.txt' && grep -q '^  0000:47:00.0 .*  -  .*netdev eno1\$' '$W/list.txt'"
check "  ... list --json too" \
    eval "av list --json >'$W/list.json'"
check "  ... its netdevs" json "$W/list.json" \
    "[(x['address'], x['netdevs']) for x in d['pci'] if x['address'] in ('0000:45:00.0', '0000:47:00.0')] == [('0000:45:00.0', ['enp69s0']), ('0000:47:00.0', ['eno1'])]"

# --- placement: accelvirt rewrite writes the free card's interface ---
cat >"$W/ask.xml" <<'XML'
<domain type='kvm'><name>ask</name><metadata><av:accelerators xmlns:av="urn:accelvirt:domain:1"><av:request profile="vca"/></av:accelerators></metadata><memory unit='GiB'>4</memory><vcpu>2</vcpu><os><type arch='x86_64' machine='q35'>hvm</type></os><devices/></domain>
XML
check "rewrite --dry-run gives the domain a card's interface, direct in passthrough mode" \
    eval "av rewrite --dry-run '$W/ask.xml' >'$W/ask.out' &&
          tr -d ' \\n' <'$W/ask.out' | grep -q '<interfacetype=\"direct\"><sourcedev=\"enp69s0\"mode=\"passthrough\"/><modeltype=\"virtio\"/><aliasname=\"ua-accelvirt-0\"/></interface>' &&
          grep -q 'av:device profile=\"vca\" address=\"0000:45:00.0\" netdev=\"enp69s0\"' '$W/ask.out' && ! grep -q '<hostdev' '$W/ask.out'"
mv "$DEVS/0000:45:00.0/net/enp69s0" "$W/enp69s0.away"
check "  ... a card whose driver made no interface is not placed: the other one is" \
    eval "av rewrite --dry-run '$W/ask.xml' >'$W/ask.out' && grep -q 'source dev=\"enp70s0\"' '$W/ask.out'"
check "  ... and list marks it (!), saying why" \
    eval "av list >'$W/list2.txt' && grep -q '^  0000:45:00.0 .* vca (!) ' '$W/list2.txt' && grep -q 'no network interface' '$W/list2.txt'"
mv "$W/enp69s0.away" "$DEVS/0000:45:00.0/net/enp69s0"

# --- prepare: claimed, left on its host driver ---
mkdom "$W/vm1.xml" vm1 "$(uuid 1)" "$(direct enp69s0 passthrough)"
check "prepare of vm1, whose direct interface names enp69s0: the card is in use by vm1" \
    eval "hook '$W/vm1.xml' vm1 prepare begin - && [ \"\$(state_of 0000:45:00.0)\" = 'in-use vm1 None' ]"
check "  ... still on e1000e, its driver_override unset (never bound to vfio-pci)" \
    eval "[ \"\$(driver_of 0000:45:00.0)\" = e1000e ] && [ \"\$(cat '$DEVS/0000:45:00.0/driver_override')\" = '(null)' ]"
check "  ... the other card untouched" eval "[ \"\$(state_of 0000:46:00.0)\" = 'free None None' ]"
check "  ... start begin passes" hook "$W/vm1.xml" vm1 start begin -
check "status shows the interface of the card in use" \
    eval "av status --no-sync >'$W/status.txt' && grep -A1 '^0000:45:00.0 ' '$W/status.txt' | grep -qx '    netdev: enp69s0'"

# --- refusals: nothing changes ---
mkdom "$W/vm2.xml" vm2 "$(uuid 2)" "$(direct enp69s0 passthrough)"
check "vm2 naming vm1's card's interface is refused, the pool unchanged" \
    refused 1 "0000:45:00.0.*vm1" hook "$W/vm2.xml" vm2 prepare begin -
# vm3_refused NAME PATTERN DEVICES: domain vm3 with DEVICES is refused at
# prepare with one line holding PATTERN, the pool unchanged.
vm3_refused() {
    mkdom "$W/vm3.xml" vm3 "$(uuid 3)" "$3"
    check "$1" refused 1 "$2" hook "$W/vm3.xml" vm3 prepare begin -
}
vm3_refused "a card's interface in mode bridge is refused (passthrough only)" "mode 'bridge'.*passthrough" \
    "$(direct enp70s0 bridge)"
vm3_refused "  ... and with no mode (libvirt's vepa)" "mode 'vepa" \
    '<interface type="direct"><source dev="enp70s0"/></interface>'
vm3_refused "the card as a <hostdev> is refused: it stays on its host driver" \
    "0000:46:00.0 is a card of attach netdev.*interface type='direct'" \
    '<hostdev mode="subsystem" type="pci" managed="no"><source><address domain="0x0000" bus="0x46" slot="0x00" function="0x0"/></source></hostdev>'
check "  ... and was not bound" eval "[ \"\$(driver_of 0000:46:00.0)\" = e1000e ]"
vm3_refused "the same card named twice is refused" "named twice" \
    "$(direct enp70s0 passthrough)$(direct enp70s0 passthrough)"
vm3_refused "an interface name that is none (a '/') is refused" "not a network interface name" \
    "$(direct 'enp70s0/../x' passthrough)"
vm3_refused "  ... and one over IFNAMSIZ" "not a network interface name" "$(direct enp70s0123456789 passthrough)"
mkdom "$W/vm4.xml" vm4 "$(uuid 4)" "$(direct eno1 bridge)"
check "the host's own NIC (no profile) passes through the hook untouched" \
    eval "before=\$(fingerprint) && hook '$W/vm4.xml' vm4 prepare begin - && [ \"\$(fingerprint)\" = \"\$before\" ]"

# --- names the kernel resolves beyond the cards' net/ (review H2, L3) ---
# What the kernel knows and the fake tree lacks: each interface's ifindex
# and device link, and an altname of enp70s0 (udev gives one to each NIC on
# Debian; the kernel lists it only through netlink, the emulated kernel
# reads fake_altnames).
i=2
for n in eno1 enp69s0 enp70s0; do
    d=$(cd "$W/host/sys/class/net/$n" && pwd -P)
    echo "$i" >"$d/ifindex"
    ln -s ../.. "$d/device"
    i=$((i + 1))
done
printf 'enx0016e1000046\n' >"$W/host/sys/class/net/enp70s0/fake_altnames"
printf 'enx0016e1000045\n' >"$W/host/sys/class/net/enp69s0/fake_altnames"
vm3_refused "an altname of a free card in mode vepa is refused as the card's own name is (a macvtap never scrubbed)" \
    "mode 'vepa" '<interface type="direct"><source dev="enx0016e1000046" mode="vepa"/></interface>'
vm3_refused "  ... an altname of vm1's card is refused: vm1 holds the card" "0000:45:00.0.*vm1" \
    "$(direct enx0016e1000045 passthrough)"
# macvtap0: a macvtap made on enp70s0 (another domain's direct interface,
# say), which <interface type='ethernet'> with managed='no' would open.
mkdir "$W/host/sys/class/net/macvtap0" "$W/host/sys/class/net/tap0"
echo 9 >"$W/host/sys/class/net/macvtap0/ifindex"
echo 10 >"$W/host/sys/class/net/tap0/ifindex"
ln -s ../enp70s0 "$W/host/sys/class/net/macvtap0/lower_enp70s0"
ethernet() { printf '<interface type="ethernet"><target dev="%s" managed="no"/></interface>' "$1"; }
vm3_refused "an ethernet interface opening a macvtap on a pool card is refused (review M2)" \
    "target 'macvtap0' is or sits on 'enp70s0'.*0000:46:00.0" "$(ethernet macvtap0)"
vm3_refused "  ... and one naming the card's own interface" "target 'enp70s0' is or sits on 'enp70s0'" \
    "$(ethernet enp70s0)"
mkdom "$W/vm4.xml" vm4 "$(uuid 4)" "$(ethernet tap0)"
check "  ... a tap of no card passes untouched" \
    eval "before=\$(fingerprint) && hook '$W/vm4.xml' vm4 prepare begin - && [ \"\$(fingerprint)\" = \"\$before\" ]"
mkdom "$W/vm4.xml" vm4 "$(uuid 4)" "$(direct 'br@lan+1' bridge)"
check "a host NIC named outside accelvirt's character set, of no pool card, passes untouched" \
    eval "before=\$(fingerprint) && hook '$W/vm4.xml' vm4 prepare begin - && [ \"\$(fingerprint)\" = \"\$before\" ]"

# --- release: scrubbed by the profile's steps, freed ---
check "release end of vm1: the worker resets the card, runs the command with its interface, frees it" \
    eval "hook '$W/vm1.xml' vm1 release end - && wait_state 0000:45:00.0 free"
check "  ... the command got the address, the group and ACCELVIRT_SCRUB_NETDEV" \
    eval "grep -qx '0000:45:00.0 12 netdev=enp69s0' '$W/scrub.log'"
check "  ... the reset went through sysfs, the card still on e1000e" \
    eval "[ \"\$(driver_of 0000:45:00.0)\" = e1000e ] && grep -q '\"method\": *\"reset\"' '$STATE/journal.jsonl'"
check "vm2 gets the card now" \
    eval "hook '$W/vm2.xml' vm2 prepare begin - && [ \"\$(state_of 0000:45:00.0)\" = 'in-use vm2 None' ]"
touch "$W/scrub-fail"
check "a failed scrub command quarantines the card" \
    eval "hook '$W/vm2.xml' vm2 release end - && wait_state 0000:45:00.0 quarantined"
rm -f "$W/scrub-fail"
check "  ... bound to vfio-pci to keep it from the host while quarantined, as any quarantined device" \
    eval "[ \"\$(driver_of 0000:45:00.0)\" = vfio-pci ]"
check "  ... quarantine clear gives it back to e1000e, free" \
    eval "av quarantine clear 0000:45:00.0 >/dev/null && [ \"\$(driver_of 0000:45:00.0)\" = e1000e ] &&
          [ \"\$(state_of 0000:45:00.0)\" = 'free None None' ]"

# --- audit: a card's interface is its card (libvirt's test driver runs the domains) ---
STATE="$W/state-audit"
NODE="$W/node.xml"
fake_worker
av status >/dev/null
hook "$W/vm1.xml" vm1 prepare begin - >/dev/null
{
    echo "<node>"
    printf '<domain type="test"><name>vm1</name><uuid>%s</uuid><memory>1048576</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices>%s</devices></domain>\n' \
        "$(uuid 1)" "$(direct enp69s0 passthrough)"
    printf '<domain type="test"><name>out</name><uuid>%s</uuid><memory>1048576</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices>%s</devices></domain>\n' \
        "$(uuid 5)" "$(direct enp70s0 passthrough)$(direct eno1 bridge)"
    echo "</node>"
} >"$NODE"
check "audit: the interface of a free card given to a domain outside accelvirt is attached-outside; vm1's card stays in use" \
    eval "av --connect 'test://$NODE' audit --json >'$W/audit.json'"
check "  ... the findings" json "$W/audit.json" \
    "[(f['action'], f['domain_name'], f['address']) for f in d['findings']] == [('attached-outside', 'out', '0000:46:00.0')]"
check "  ... the pool" eval "[ \"\$(state_of 0000:45:00.0)\" = 'in-use vm1 None' ] && [ \"\$(state_of 0000:46:00.0)\" = 'in-use out None' ]"

# The same card given outside accelvirt by its altname (review: the audit
# matched primary names only): attached-outside all the same.
STATE="$W/state-audit-alt"
NODE="$W/node-alt.xml"
av status >/dev/null
{
    echo "<node>"
    printf '<domain type="test"><name>alt</name><uuid>%s</uuid><memory>1048576</memory><vcpu>1</vcpu><os><type>hvm</type></os><devices>%s</devices></domain>\n' \
        "$(uuid 6)" "$(direct enx0016e1000046 vepa)"
    echo "</node>"
} >"$NODE"
check "audit: a free card's interface named by its altname in a domain outside accelvirt is attached-outside" \
    eval "av --connect 'test://$NODE' audit --json >'$W/audit-alt.json'"
check "  ... the finding names the card" json "$W/audit-alt.json" \
    "[(f['action'], f['domain_name'], f['address']) for f in d['findings']] == [('attached-outside', 'alt', '0000:46:00.0')]"

# --- the whole way: rewrite reserves, the rewritten domain starts and releases ---
STATE="$W/state-define"
ACCELVIRT_WORKER=$REAL_WORKER
sed 's|<name>ask</name>|<name>ask</name><uuid>5eed0000-0000-4000-8000-000000000009</uuid>|' "$W/ask.xml" >"$W/ask9.xml"
check "rewrite reserves the card for the domain (claimed), its interface written" \
    eval "av rewrite '$W/ask9.xml' >'$W/ask9.out' && [ \"\$(state_of 0000:45:00.0)\" = 'claimed ask None' ] &&
          grep -q 'source dev=\"enp69s0\" mode=\"passthrough\"' '$W/ask9.out'"
check "  ... the rewritten domain's prepare, start and restore pass; the card is in use, on e1000e" \
    eval "hook '$W/ask9.out' ask prepare begin - && hook '$W/ask9.out' ask start begin - &&
          hook '$W/ask9.out' ask restore begin - >'$W/ask9.restored' && cmp -s '$W/ask9.out' '$W/ask9.restored' &&
          [ \"\$(state_of 0000:45:00.0)\" = 'in-use ask None' ] && [ \"\$(driver_of 0000:45:00.0)\" = e1000e ]"
check "  ... its release scrubs and frees the card" \
    eval "hook '$W/ask9.out' ask release end - && wait_state 0000:45:00.0 free"

# --- a card a profile matches that the pool does not hold yet (review M1) ---
# eno1's card (0000:47:00.0, an ice function) becomes a card of attach
# netdev by a new policy file, before any reconcile: the hook's scan of a
# direct interface's card pools it, as that of a PCI hostdev's device does,
# and the checks apply.
STATE="$W/state-new"
ACCELVIRT_WORKER=$REAL_WORKER
av status >/dev/null
cat >"$POL/20-nic.json" <<JSON
{"profiles": [
  {"name": "nic", "match": {"vendor": "0x8086", "device": "0x1593"}, "attach": "netdev", "numa": "none",
   "scrub": [{"method": "reset"}]}
]}
JSON
chmod 0644 "$POL/20-nic.json"
check "a card of a new profile, not pooled yet: not in the pool before the hook runs" eval "[ -z \"\$(state_of 0000:47:00.0)\" ]"
mkdom "$W/vm7.xml" vm7 "$(uuid 7)" "$(direct eno1 bridge)"
check "  ... its interface in mode bridge is refused, the card pooled free by the hook's scan" \
    eval "one_line 1 \"mode 'bridge'.*passthrough\" hook '$W/vm7.xml' vm7 prepare begin - &&
          [ \"\$(state_of 0000:47:00.0)\" = 'free None None' ]"
mkdom "$W/vm6.xml" vm6 "$(uuid 6)" "$(direct eno1 passthrough)"
check "  ... in mode passthrough the domain gets it claimed, in use, on its host driver" \
    eval "hook '$W/vm6.xml' vm6 prepare begin - && [ \"\$(state_of 0000:47:00.0)\" = 'in-use vm6 None' ] &&
          [ \"\$(driver_of 0000:47:00.0)\" = ice ]"
rm -f "$POL/20-nic.json"

# --- the policy: what a netdev card cannot do ---
bad_policy() {
    d="$AV_TMP/bad-$1"
    mkdir -p "$d" && printf '%s\n' "$2" >"$d/10.json" && chmod 0755 "$d" && chmod 0644 "$d/10.json"
    "$AV" --root "$W/host" --policy-dir "$d" --state-dir "$AV_TMP/bad-state-$1" policy check
}
# policy_refused NAME PATTERN PROFILE-JSON: `policy check` of the one
# profile {"name": "v", "match": {"vendor": "0x8086"}, "attach": "netdev", ...}
# with PROFILE-JSON's keys added fails in one line holding PATTERN.
policy_refused() {
    n=$((n + 1))
    check "$1" one_line 2 "$2" bad_policy "$n" \
        "{\"profiles\": [{\"name\": \"v\", \"match\": {\"vendor\": \"0x8086\"}, \"attach\": \"netdev\", $3}]}"
}
n=0
policy_refused "policy: vfio-zero on a netdev card is refused in one line" \
    "scrub method 'vfio-zero' cannot be used with attach 'netdev'.*none, command, reset" '"scrub": [{"method": "vfio-zero"}]'
policy_refused "  ... rom-check too" "scrub method 'rom-check' cannot be used with attach 'netdev'" \
    '"scrub": [{"method": "rom-check"}]'
policy_refused "  ... an mdev_type" "'mdev_type' is only allowed with attach 'mdev'" '"mdev_type": "x-1"'
policy_refused "  ... restore_driver keep-vfio" "keep-vfio' cannot be used with attach 'netdev'" \
    '"restore_driver": "keep-vfio"'
policy_refused "  ... granularity card" "granularity 'card' cannot be used with attach 'netdev'" '"granularity": "card"'
policy_refused "  ... min_coverage (nothing is cleared through vfio)" "'min_coverage' cannot be used with attach 'netdev'" \
    '"min_coverage": 0.5'

finish
