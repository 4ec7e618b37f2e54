#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: whose word the owner is.  A domain's <nova:owner> is its
# own metadata: for a domain Nova did not write, whoever defines it writes
# it.  The operator pins the owner when placing it (`rewrite`/`define
# --project --user`): the hook's prepare charges the pinned project and
# user, and refuses a domain whose metadata names others; a policy with
# "nova": {"owner_metadata": false} charges no metadata owner at all.
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
HOOK=$ACCELVIRT_HOOK
W="$AV_TMP/w"
mkdir -p "$W"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$W/host"
POL="$W/policies"
mkdir -p "$POL" && cp "$AV_TEST_SRCDIR"/place/policies/*.json "$POL/" && chmod 0755 "$POL" && chmod 0644 "$POL"/*.json
av() { ACCELVIRT_WORKER=/bin/true "$AV" --root "$W/host" --policy-dir "$POL" --state-dir "$W/state" "$@"; }
# scrubbed: the worker (reset, on the fake kernel) frees what a release left dirty.
scrubbed() {
    ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" \
        ACCELVIRT_LOG_FILE="$W/log" "$ACCELVIRT_WORKER" </dev/null >/dev/null 2>&1
}
hook() {
    ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$W/state" ACCELVIRT_POLICY_DIR="$POL" ACCELVIRT_WORKER=/bin/true \
        ACCELVIRT_LOG_FILE="$W/log" "$HOOK" "$@"
}
# owner_of NAME: the owner the journal's last move to in-use of NAME's device names, "project user".
owner_of() {
    python3 - "$W/state/journal.jsonl" "$1" <<'PY'
import json, sys
es = [json.loads(l) for l in open(sys.argv[1])]
o = [e["owner"] for e in es if e.get("to") == "in-use" and (e.get("owner") or {}).get("domain_name") == sys.argv[2]][-1]
print("%s %s" % (o.get("nova_project"), o.get("nova_user")))
PY
}
# withowner IN OUT PROJECT USER: IN with <nova:instance> naming PROJECT and USER.
withowner() {
    sed "s|<metadata>|<metadata><nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'><nova:owner><nova:user uuid='$4'/><nova:project uuid='$3'/></nova:owner></nova:instance>|" "$1" >"$2"
}
sed -e 's/gpu1/pin1/g' -e 's/5eed0000-0000-4000-8000-000000000001/5eed0000-0000-4000-8000-0000000000a1/' \
    "$AV_TEST_SRCDIR/place/gpu1.in.xml" >"$W/pin1.xml"
sed -e 's/gpu1/free1/g' -e 's/5eed0000-0000-4000-8000-000000000001/5eed0000-0000-4000-8000-0000000000a2/' \
    "$AV_TEST_SRCDIR/place/gpu1.in.xml" >"$W/free1.xml"

check "--project that is no OpenStack id: one line, exit 2, nothing placed" \
    eval "one_line 2 '--project and --user take an OpenStack id' av rewrite --project 'a b' '$W/pin1.xml' && [ ! -e '$W/state/pool.json' ]"
withowner "$W/pin1.xml" "$W/pin1-other.xml" other-project u1
check "--project that the domain's own <nova:owner> contradicts: refused in one line, nothing placed" \
    eval "one_line 2 \"names the project 'other-project', not the 'p1' given\" av rewrite --project p1 --user u1 '$W/pin1-other.xml' && [ ! -e '$W/state/pool.json' ]"
check "rewrite --project p1 --user u1 places pin1 and pins its owner in the pool's record" \
    eval "av rewrite --project p1 --user u1 '$W/pin1.xml' >'$W/pin1.placed.xml' && python3 -c \"
import json, sys
d = json.load(open('$W/state/pool.json'))
r = [p for p in d['placements'] if p['domain_name'] == 'pin1'][0]
sys.exit(0 if r['owner'] == {'project': 'p1', 'user': 'u1'} else 1)\""
check "the hook's prepare of pin1 without <nova:owner>: charged to p1 and u1" \
    eval "hook pin1 prepare begin - <'$W/pin1.placed.xml' && [ \"\$(owner_of pin1)\" = 'p1 u1' ]"
hook pin1 release end - <"$W/pin1.placed.xml" && scrubbed
withowner "$W/pin1.placed.xml" "$W/pin1.evil.xml" victim-project u1
check "the owner edits its metadata to charge another project: the hook refuses the prepare in one line" \
    eval "expect_exit 1 hook pin1 prepare begin - <'$W/pin1.evil.xml' && grep -q \"its metadata names the OpenStack project 'victim-project', but the operator pinned the domain to project 'p1'\" '$W/log'"
withowner "$W/pin1.placed.xml" "$W/pin1.same.xml" p1 u1
check "metadata that agrees with the pin: prepared, charged to p1 and u1" \
    eval "hook pin1 prepare begin - <'$W/pin1.same.xml' && [ \"\$(owner_of pin1)\" = 'p1 u1' ]"
hook pin1 release end - <"$W/pin1.same.xml" && scrubbed

# An owner nobody pinned: the metadata's word by default, nobody's with owner_metadata false.
av rewrite "$W/free1.xml" >"$W/free1.placed.xml"
withowner "$W/free1.placed.xml" "$W/free1.meta.xml" some-project some-user
check "no pin, the default policy: the domain's own <nova:owner> is charged" \
    eval "hook free1 prepare begin - <'$W/free1.meta.xml' && [ \"\$(owner_of free1)\" = 'some-project some-user' ]"
hook free1 release end - <"$W/free1.meta.xml" && scrubbed
echo '{"nova": {"owner_metadata": false}}' >"$POL/90-nova.json" && chmod 0644 "$POL/90-nova.json"
check "accelvirt policy check takes \"owner_metadata\": false" av policy check
check "  ... a domain's own <nova:owner> is charged to nobody" \
    eval "hook free1 prepare begin - <'$W/free1.meta.xml' && [ \"\$(owner_of free1)\" = 'None None' ]"
hook free1 release end - <"$W/free1.meta.xml" && scrubbed
check "  ... the pinned owner still is" \
    eval "hook pin1 prepare begin - <'$W/pin1.placed.xml' && [ \"\$(owner_of pin1)\" = 'p1 u1' ]"
echo '{"nova": {"owner_metadata": "no"}}' >"$POL/90-nova.json"
check "\"owner_metadata\" that is no boolean: policy check says so in one line" \
    one_line 2 "'nova.owner_metadata' must be true or false" av policy check
finish
