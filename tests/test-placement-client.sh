#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: the Placement client (src/nova/av-placement.c, issue 18)
# against a tiny local server (tests/data/fake-placement.py, python3
# http.server) standing in for Placement and Keystone: the GET then PUT of
# one inventory with all six fields and the generation, the 409
# placement.concurrent_update retried, what is not there yet, what cannot be
# reached, and the Keystone token requests of a password and of an
# application credential.  tests/placement (make check-placement) runs the
# real Placement.
. "$AV_TEST_SRCDIR/lib.sh"

: "${AV_TEST_BUILDDIR:?AV_TEST_BUILDDIR is not set: run the tests with make check}"
CLIENT=$AV_TEST_BUILDDIR/placement-client
S=$AV_TMP/server
mkdir -p "$S" "$AV_TMP/home/.config/openstack"
HOME=$AV_TMP/home; export HOME
unset OS_CLIENT_CONFIG_FILE OS_CLIENT_SECURE_FILE OS_CLOUD

python3 "$AV_TEST_SRCDIR/data/fake-placement.py" "$S" &
server=$!
trap 'kill $server 2>/dev/null; kill_holds; rm -rf "$AV_TMP"' EXIT
i=0
while [ ! -s "$S/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
PORT=$(cat "$S/port")
URL=http://127.0.0.1:$PORT

cat >"$HOME/.config/openstack/clouds.yaml" <<EOC
clouds:
  noauth:
    auth_type: admin_token
    auth: {token: admin}
    placement_endpoint_override: "$URL/placement"
  badtoken:
    auth_type: none
    auth: {token: nobody}
    placement_endpoint_override: "$URL/placement"
  down:
    auth_type: admin_token
    placement_endpoint_override: "http://127.0.0.1:9/placement"
  userinfo:
    auth_type: admin_token
    placement_endpoint_override: "http://bob:pw-s3cret@127.0.0.1:9/placement"
  plain:
    auth_type: admin_token
    placement_endpoint_override: "http://127.0.0.2:9/placement"
  keystone:
    auth_type: password
    interface: internal
    region_name: R1
    auth:
      auth_url: "$URL/identity"
      username: placement
      password: s3cret
      project_name: service
      user_domain_name: Default
      project_domain_name: Default
  appcred:
    auth_type: v3applicationcredential
    interface: internal
    auth:
      auth_url: "$URL/identity/v3"
      application_credential_id: 423f19a4
      application_credential_secret: rEaqvJka
EOC
chmod 0600 "$HOME/.config/openstack/clouds.yaml"

ctl() { printf '%s\n' "$1" >"$S/ctl.json"; }
# last_json FILTER: evaluates the python expression FILTER on the list of
# logged requests (r), true or fails.
requests() {
    python3 - "$S/requests.jsonl" "$1" <<'EOP'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
ok = eval(sys.argv[2])
if not ok:
    print(json.dumps(r[-6:], indent=1))
sys.exit(0 if ok else 1)
EOP
}
reset_log() { : >"$S/requests.jsonl"; }
# out_is WANT CMD...: CMD's stdout is WANT and its exit status 0
out_is() {
    want=$1; shift
    got=$("$@") || { echo "exit $?: $got"; return 1; }
    [ "$got" = "$want" ] || { echo "got '$got', want '$want'"; return 1; }
}
# status_is ST CMD...
status_is() {
    want=$1; shift
    "$@"; st=$?
    [ "$st" -eq "$want" ] || { echo "exit $st, want $want"; return 1; }
}

reset_log
check "noauth: reserved = total, one GET of the provider, one of the inventory, one PUT" \
    out_is "reserved 1 total 1 put" "$CLIENT" noauth "compute1_0000:3B:00.0" CUSTOM_PCI_10DE_20B5 -1
check "the PUT keeps all six fields and the generation, only reserved changed, microversion 1.29" \
    requests "[x['method'] for x in r] == ['GET', 'GET', 'PUT'] and r[0]['path'] == '/placement/resource_providers?name=compute1_0000%3A3B%3A00.0' and r[2]['body'] == {'resource_provider_generation': 1, 'total': 1, 'reserved': 1, 'min_unit': 1, 'max_unit': 1, 'step_size': 1, 'allocation_ratio': 1.0} and all(x['version'] == 'placement 1.29' and x['token'] == 'admin' for x in r) and r[2]['content_type'] == 'application/json'"
reset_log
check "already so: no PUT" out_is "reserved 1 total 1 same" "$CLIENT" noauth "compute1_0000:3B:00.0" CUSTOM_PCI_10DE_20B5 -1
check "... only GETs" requests "[x['method'] for x in r] == ['GET', 'GET']"

reset_log
ctl '{"conflicts": 1}'
check "a 409 placement.concurrent_update once: GET again and PUT again" \
    out_is "reserved 0 total 1 put" "$CLIENT" noauth "compute1_0000:3B:00.0" CUSTOM_PCI_10DE_20B5 0
check "... with the new generation" \
    requests "[x['method'] for x in r] == ['GET', 'GET', 'PUT', 'GET', 'PUT'] and r[2]['body']['resource_provider_generation'] == 2 and r[4]['body']['resource_provider_generation'] == 3 and r[4]['body']['reserved'] == 0"
reset_log
ctl '{"conflicts": 9}'
t0=$(date +%s%N)
check "409 on every try: given up after 6 PUTs" status_is 1 "$CLIENT" noauth "compute1_0000:3B:00.0" CUSTOM_PCI_10DE_20B5 1
t1=$(date +%s%N)
check "... 6 PUTs" requests "[x['method'] for x in r].count('PUT') == 6"
check "... with growing pauses between the tries (50+100+200+400+800 ms)" \
    test $(((t1 - t0) / 1000000)) -ge 1500
ctl '{"conflicts": 99}'
reset_log
t0=$(date +%s%N)
check "409 on every try and a run of 400 ms: given up when no time is left (exit 3)" \
    eval "status_is 3 '$CLIENT' noauth 'compute1_0000:3B:00.0,compute1_0000:17:00.0' CUSTOM_PCI_10DE_20B5 1 400 >'$AV_TMP/c.out' && grep -c 'no time left in this run' '$AV_TMP/c.out' | grep -qx 2"
t1=$(date +%s%N)
check "... in bounded time, the second provider asked nothing" \
    eval "test $(((t1 - t0) / 1000000)) -lt 1500 && requests \"all('17%3A00' not in x['path'] for x in r)\""
ctl '{"slow": 3}'
reset_log
t0=$(date +%s%N)
check "answers 3 s late, a run of 1 s: both providers pending (exit 3)" \
    eval "status_is 3 '$CLIENT' noauth 'compute1_0000:3B:00.0,compute1_0000:17:00.0' CUSTOM_PCI_10DE_20B5 1 1000 >'$AV_TMP/s.out' && [ \$(grep -c '^error: ' '$AV_TMP/s.out') = 2 ]"
t1=$(date +%s%N)
check "... within the run's time, one request made" \
    eval "test $(((t1 - t0) / 1000000)) -lt 2500 && requests 'len(r) == 1'"
ctl '{"fail": 503}'
# the slow server may still be answering the one request
sleep 3
reset_log
check "a 503: the run stops, the next provider is not asked (exit 3)" \
    eval "status_is 3 '$CLIENT' noauth 'compute1_0000:3B:00.0,compute1_0000:17:00.0' CUSTOM_PCI_10DE_20B5 1 >'$AV_TMP/f.out' && [ \$(grep -c 'HTTP 503' '$AV_TMP/f.out') = 2 ] && requests 'len(r) == 1'"
ctl '{}'

check "a PF counting VFs: the wanted count capped at the total" \
    out_is "reserved 2 total 2 put" "$CLIENT" noauth "compute1_0000:17:00.0" CUSTOM_PCI_8086_1889 5
check "... and one of two" out_is "reserved 1 total 2 put" "$CLIENT" noauth "compute1_0000:17:00.0" CUSTOM_PCI_8086_1889 1
check "a provider Nova has not made: not found (exit 2)" \
    status_is 2 "$CLIENT" noauth "compute1_0000:AF:00.0" CUSTOM_PCI_10DE_20B5 1
check "an inventory it does not have: not found (exit 2)" \
    status_is 2 "$CLIENT" noauth "compute1_0000:3B:00.0" CUSTOM_OTHER 1
ctl '{"providers": "other"}'
check "a lookup answering another provider's name only: not found (exit 2)" \
    status_is 2 "$CLIENT" noauth "compute1_0000:3B:00.0" CUSTOM_PCI_10DE_20B5 1
ctl '{"providers": "two"}'
check "two providers of the name: an error (exit 1)" \
    status_is 1 "$CLIENT" noauth "compute1_0000:3B:00.0" CUSTOM_PCI_10DE_20B5 1
ctl '{"providers": "baduuid"}'
reset_log
check "a malformed uuid: an error (exit 1), no inventory request" \
    eval "status_is 1 '$CLIENT' noauth 'compute1_0000:3B:00.0' CUSTOM_PCI_10DE_20B5 1 >/dev/null && requests \"len(r) == 1\""
ctl '{"fail": 503}'
check "Placement answering 503: unreachable (exit 3)" \
    status_is 3 "$CLIENT" noauth "compute1_0000:3B:00.0" CUSTOM_PCI_10DE_20B5 1
ctl '{}'
check "nothing listening: unreachable (exit 3)" \
    status_is 3 "$CLIENT" down "compute1_0000:3B:00.0" CUSTOM_PCI_10DE_20B5 1
check "a user:password@ in the URL: not in the error" \
    eval "status_is 3 '$CLIENT' userinfo 'compute1_0000:3B:00.0' CUSTOM_PCI_10DE_20B5 1 >'$AV_TMP/ui.out' 2>&1 && grep -q 'cannot reach http://127.0.0.1:9/placement' '$AV_TMP/ui.out' && ! grep -q 'pw-s3cret' '$AV_TMP/ui.out'"
check "a token sent over plain http to another host: a warning" \
    eval "status_is 3 '$CLIENT' plain 'compute1_0000:3B:00.0' CUSTOM_PCI_10DE_20B5 1 >'$AV_TMP/pl.out' 2>&1 && grep -q 'plain http' '$AV_TMP/pl.out'"
check "... none to 127.0.0.1" \
    eval "status_is 3 '$CLIENT' down 'compute1_0000:3B:00.0' CUSTOM_PCI_10DE_20B5 1 >'$AV_TMP/dn.out' 2>&1 && ! grep -q 'plain http' '$AV_TMP/dn.out'"
check "a token Placement refuses: exit 1" \
    status_is 1 "$CLIENT" badtoken "compute1_0000:3B:00.0" CUSTOM_PCI_10DE_20B5 1

reset_log
check "Keystone password: token, then Placement at the catalog's internal endpoint" \
    out_is "reserved 1 total 1 put" "$CLIENT" keystone "compute1_0000:3B:00.0" CUSTOM_PCI_10DE_20B5 -1
check "... the password token request, project-scoped" \
    requests "r[0]['method'] == 'POST' and r[0]['path'] == '/identity/v3/auth/tokens' and r[0]['body'] == {'auth': {'identity': {'methods': ['password'], 'password': {'user': {'name': 'placement', 'domain': {'name': 'Default'}, 'password': 's3cret'}}}, 'scope': {'project': {'name': 'service', 'domain': {'name': 'Default'}}}}} and all(x['token'] == 'tok-keystone-123' for x in r[1:]) and r[1]['path'].startswith('/placement/resource_providers')"
reset_log
check "Keystone application credential" \
    out_is "reserved 0 total 1 put" "$CLIENT" appcred "compute1_0000:3B:00.0" CUSTOM_PCI_10DE_20B5 0
check "... the application credential token request, no scope" \
    requests "r[0]['path'] == '/identity/v3/auth/tokens' and r[0]['body'] == {'auth': {'identity': {'methods': ['application_credential'], 'application_credential': {'id': '423f19a4', 'secret': 'rEaqvJka'}}}}"

# --- end to end: accelvirt placement sync, status, reconcile on a fake host ---
POL=$AV_TMP/policies
W=$AV_TMP/w
mkdir -p "$POL" "$W"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$W/host"
cat >"$POL/10-test.json" <<'JSON'
{"nova": {"placement_sync": true, "cloud": "noauth", "hypervisor_hostname": "compute1"},
 "profiles": [
  {"name": "a100", "match": {"vendor": "0x10de", "device": "0x20f1", "address": ["0000:65:00.0"]},
   "attach": "vfio-pci", "numa": "none", "scrub": [{"method": "none"}]},
  {"name": "a6000", "match": {"vendor": "0x10de", "device": "0x2230"}, "attach": "vfio-pci", "numa": "none",
   "companions": [{"class": "0x0403"}], "scrub": [{"method": "none"}], "placement_sync": false}
]}
JSON
chmod 0755 "$POL" && chmod 0644 "$POL"/*.json
av() { ACCELVIRT_WORKER=/bin/false "$ACCELVIRT" --root "$W/host" --policy-dir "$POL" --state-dir "$W/state" "$@"; }
pool_state() {
    python3 - "$W/state/pool.json" "$1" "$2" <<'EOP'
import json, sys
p = json.load(open(sys.argv[1]))
for d in p["devices"]:
    if d["address"] == sys.argv[2]:
        d["state"] = sys.argv[3]
        d["reason"] = "test" if sys.argv[3] == "quarantined" else None
json.dump(p, open(sys.argv[1], "w"))
EOP
}
jq_py() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"; }

av status >/dev/null
reset_log
check "placement sync: the free device's reserved back to 0 (Nova's one_time_use had set it), exit 0" \
    eval "av placement sync >'$W/s1.out' && grep -qx 'compute1_0000:65:00.0 CUSTOM_PCI_10DE_20F1: reserved 0 (applied) \\[.*\\]' '$W/s1.out'"
check "... one PUT, reserved 0, max_unit kept" \
    requests "[x['body'] for x in r if x['method'] == 'PUT'] == [{'resource_provider_generation': 7, 'total': 1, 'reserved': 0, 'min_unit': 1, 'max_unit': 1, 'step_size': 1, 'allocation_ratio': 1.0}]"
check "... the state file: in sync, 0600" \
    eval "jq_py '$W/state/placement.json' \"[(v['rp'], v['rc'], v['want'], v['applied'], v['state']) for v in d['devices'].values()] == [('compute1_0000:65:00.0', 'CUSTOM_PCI_10DE_20F1', 0, 0, 'in-sync')]\" && [ \$(stat -c %a '$W/state/placement.json') = 600 ]"
pool_state 0000:65:00.0 quarantined
ctl '{"fail": 503}'
check "Placement failing: placement sync exits 1, the value pending" \
    eval "! av placement sync >'$W/s2.out' && grep -q 'pending (want reserved 1): .*HTTP 503' '$W/s2.out'"
check "status --json: pending, the sync-off devices off" \
    eval "av status --no-sync --json >'$W/st.json' && jq_py '$W/st.json' \"[x['placement']['state'] for x in d['devices'] if x['address'] == '0000:65:00.0'] == ['pending'] and all(x['placement']['state'] == 'off' for x in d['devices'] if x['profile'] == 'a6000')\""
check "status (text): the device's placement line and the count" \
    eval "av status --no-sync >'$W/st.txt' && grep -q '^    placement: pending since .*HTTP 503' '$W/st.txt' && grep -qx 'placement: 1 pending' '$W/st.txt' && grep -qx '    placement: off' '$W/st.txt'"
ctl '{}'
check "reconcile applies what was pending: placement applied 1, pending 0" \
    eval "av reconcile --json >'$W/r.json' && jq_py '$W/r.json' \"d['placement'] == {'applied': 1, 'pending': 0}\""
check "... reserved = total in Placement" \
    requests "[x['body']['reserved'] for x in r if x['method'] == 'PUT'][-1:] == [1]"
check "placement status: in sync (reserved 1)" \
    eval "av placement status >'$W/ps.out' && grep -q 'compute1_0000:65:00.0 CUSTOM_PCI_10DE_20F1: in sync (reserved 1)' '$W/ps.out'"
check "the journal: placement entries, pending then applied" \
    eval "grep '\"event\": *\"placement\"' '$W/state/journal.jsonl' | python3 -c \"import json,sys; e=[json.loads(l) for l in sys.stdin]; sys.exit(0 if [(x['result'], x['reserved']) for x in e] == [('applied', 0), ('pending', 1), ('applied', 1)] and e[1]['error'] and e[2]['rp'] == 'compute1_0000:65:00.0' else 1)\""

# The worker: a device dirty in the pool is reserved as the worker starts,
# then 0 once its scrub freed it.
: "${ACCELVIRT_WORKER:?ACCELVIRT_WORKER is not set: run the tests with make check}"
pool_state 0000:65:00.0 dirty
# As a Nova PUT of the whole inventory leaves it: reserved 0.
"$CLIENT" noauth "compute1_0000:65:00.0" CUSTOM_PCI_10DE_20F1 0 >/dev/null
reset_log
check "the worker: reserved = total before the scrub, 0 after it freed the device" \
    eval "ACCELVIRT_ROOT='$W/host' ACCELVIRT_STATE_DIR='$W/state' ACCELVIRT_POLICY_DIR='$POL' ACCELVIRT_LOG_FILE='$W/worker.log' '$ACCELVIRT_WORKER' && requests \"[x['body']['reserved'] for x in r if x['method'] == 'PUT'] == [1, 0]\" && jq_py '$W/state/pool.json' \"[x['state'] for x in d['devices'] if x['address'] == '0000:65:00.0'] == ['free']\""
check "... the state file in sync, reserved 0" \
    jq_py "$W/state/placement.json" "[(v['state'], v['applied']) for v in d['devices'].values()] == [('in-sync', 0)]"

# A device dirty again since the last sync: its record (in sync, 0) is
# older than its state; status says pending, not "in sync (reserved 0)".
pool_state 0000:65:00.0 dirty
check "status after a state change with no sync: pending (not synced yet)" \
    eval "av status --no-sync >'$W/st2.txt' && grep -qx '    placement: pending (not synced yet)' '$W/st2.txt' && av status --no-sync --json >'$W/st2.json' && jq_py '$W/st2.json' \"[x['placement']['state'] for x in d['devices'] if x['address'] == '0000:65:00.0'] == ['pending']\""
check "placement status too" \
    eval "av placement status >'$W/ps2.out' && grep -q 'compute1_0000:65:00.0 CUSTOM_PCI_10DE_20F1: pending (not synced yet)' '$W/ps2.out'"

finish
