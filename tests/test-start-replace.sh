#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: `accelvirt start` places a domain again only within what
# the operator placed for it (`rewrite`, `define`: the pool's record).  A
# domain's metadata is its owner's to change; an edit from count='1' to
# count='4', with the av:placement dropped so that start must place again,
# must not claim four GPUs.  Against libvirt's test driver (test:///FILE).
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
W="$AV_TMP/w"
mkdir -p "$W"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$W/host"
POL="$AV_TEST_SRCDIR/place/policies"
av() { ACCELVIRT_WORKER=/bin/true "$AV" --root "$W/host" --policy-dir "$POL" --state-dir "$W/state" "$@"; }
claimed() {
    python3 -c "import json,sys; print(sum(1 for x in json.load(open(sys.argv[1]))['devices'] if (x.get('owner') or {}).get('domain_name') == 'gpu1'))" "$W/state/pool.json"
}
# node FILE: the test driver's file with the domain of FILE, defined and shut off.
node() {
    python3 - "$1" "$W/node.xml" <<'PY'
import re, sys
x = open(sys.argv[1]).read()
x = re.sub(r"<domain type=.kvm.>", "<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>", x)
x = re.sub(r"(<vcpu[^>]*>8</vcpu>)", r"\1<test:runstate>5</test:runstate>", x)
open(sys.argv[2], "w").write("<node>\n" + x + "</node>\n")
PY
}

check "rewrite places gpu1's one GPU and records it" \
    eval "av rewrite '$AV_TEST_SRCDIR/place/gpu1.in.xml' >'$W/placed.xml' && [ \"\$(claimed)\" = 1 ]"

# The owner's edit: four GPUs, and no av:placement (start must place again).
python3 - "$W/placed.xml" "$W/edited.xml" <<'PY'
import re, sys
x = open(sys.argv[1]).read()
x = x.replace('count="1"', 'count="4"')
x = re.sub(r"<av:placement.*?</av:placement>", "", x, flags=re.S)
open(sys.argv[2], "w").write(x)
PY
node "$W/edited.xml"
start_refused() {
    cp "$W/state/pool.json" "$W/p0"
    av --connect "test://$W/node.xml" start gpu1 >"$W/out" 2>"$W/err"
    st=$?
    [ $st -eq 2 ] || { echo "exit $st"; cat "$W/out" "$W/err"; return 1; }
    [ "$(wc -l <"$W/err")" -eq 1 ] && grep -q "^accelvirt: domain 'gpu1' must be placed again and its metadata asks for gpu-passthrough x 4, where accelvirt placed gpu-passthrough x 1 for it: start places again only what was placed" "$W/err" ||
        { cat "$W/err"; return 1; }
    [ "$(claimed)" -le 1 ] || { echo "$(claimed) devices claimed for gpu1"; return 1; }
}
check "start of the edited domain (count 4) is refused in one line; no more than the one GPU is gpu1's" start_refused

# A domain accelvirt never placed: start does not place it either.
python3 - "$AV_TEST_SRCDIR/place/gpu1.in.xml" "$W/never.xml" <<'PY'
import sys
x = open(sys.argv[1]).read().replace("<name>gpu1</name>", "<name>never</name>").replace(
    "5eed0000-0000-4000-8000-000000000001", "5eed0000-0000-4000-8000-0000000000ee")
open(sys.argv[2], "w").write(x)
PY
node "$W/never.xml"
never_placed() {
    av --connect "test://$W/node.xml" start never >"$W/out" 2>"$W/err"
    st=$?
    [ $st -eq 2 ] && grep -q "which accelvirt never placed for it" "$W/err" || { echo "exit $st"; cat "$W/err"; return 1; }
}
check "start of a domain with requests accelvirt never placed is refused: define or rewrite places" never_placed

# The metadata as placed, its devices elsewhere now: start places again, as before.
python3 - "$W/placed.xml" "$W/same.xml" <<'PY'
import re, sys
x = open(sys.argv[1]).read()
x = re.sub(r"<av:placement.*?</av:placement>", "", x, flags=re.S)
open(sys.argv[2], "w").write(x)
PY
node "$W/same.xml"
check "start of the domain as placed (its placement gone) places it again within what was recorded" \
    eval "av --connect 'test://$W/node.xml' start gpu1 >'$W/out' 2>'$W/err' && grep -q 're-placed' '$W/out' && [ \"\$(claimed)\" = 1 ]"
finish
