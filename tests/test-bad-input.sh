#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: the bad-input corpus (tests/bad-input/).  Every input is
# answered by exactly one line on stderr that begins "accelvirt:", a
# non-zero exit, nothing on stdout, and no state change: the fake host's
# tree, the state dir and the policy dir byte for byte as before.
#
#   domain/    domain XML, through the hook at prepare begin, start begin and
#              migrate begin, and through `accelvirt rewrite` (which would
#              reserve devices for a good one).  A domain without a hostdev
#              accelvirt may manage and without its metadata passes the
#              hook untouched whatever else it holds (issue 19; the hook
#              reads only its name and UUID), so the inputs whose fault is
#              a value the hook checks only for managed devices (vCPUs,
#              pinning, NUMA, Nova owner, other hostdevs) hold a managed
#              A100: what is checked strictly stays checked
#   domain-pinning/  domain XML whose vCPU count, pinning or NUMA tuning
#              cannot be read, with a managed A100 whose profile has numa
#              strict: refused at prepare begin and start begin, which act
#              on them; migrate begin (the domain was not placed by
#              accelvirt) and `accelvirt rewrite` (no requests) act on
#              nothing and give the XML back byte for byte, exit 0, state
#              unchanged (issue 19)
#   domain-requests/  bad <av:request>s: refused by `accelvirt rewrite`, the
#              only reader of requests; the hook, which never reads them (a
#              domain it sees was placed already, or never asked), passes
#              such a domain untouched: exit 0, silent, nothing changed
#   policy/    a policy file, alone in the policy dir, through `accelvirt
#              policy check` and the hook (prepare of a managed A100)
#   pool/      pool.json of a state dir, through `accelvirt status` (which
#              would reconcile and save) and the hook
#   journal/   journal.jsonl, through `accelvirt journal verify`; those a
#              writer cannot append to (a FIFO, a device, a directory, a last
#              line over 16 MiB) through the hook too, which must refuse them
#              before it changes anything
#   domain-edited/  a domain accelvirt placed (`rewrite --project p1`), as its
#              owner edited it afterwards (NAME.sh makes it from $PLACED):
#              hook-* ones through the hook at prepare begin, start-* ones
#              through `accelvirt start` (libvirt's test driver holding the
#              edited domain, shut off); refused, nothing changed
#   sysfs/     changes to a copy of the fake host two-socket-8gpu (FIFOs,
#              symlink loops, escaping links, unreadable values), through
#              `accelvirt --root TREE list`: refused/ ones are refused;
#              tolerated/ ones are read without a word (a device left out, a
#              link resolved inside the root), and nothing outside the root
#              is ever read
#
# An input is a file, used as it is, or a NAME.sh script that makes it at
# the path it is given (big, generated inputs; FIFOs, links, modes).  A
# NAME.want beside it holds a string its one line must contain.
. "$AV_TEST_SRCDIR/lib.sh"

: "${ACCELVIRT_HOOK:?ACCELVIRT_HOOK is not set: run the tests with make check}"
: "${ACCELVIRT_WORKER:?ACCELVIRT_WORKER is not set: run the tests with make check}"
AV=$ACCELVIRT
HOOK=$ACCELVIRT_HOOK
BAD="$AV_TEST_SRCDIR/bad-input"
U1=00000001-0000-4000-8000-000000000001

# The world: a private fake host, the hook's test policies, a state dir
# with the reconciled pool and its journal.
W="$AV_TMP/world"
mkdir -p "$W"
cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$W/host"
boot_id "$W/host" 0d6c2b1e-5f4a-4b3c-9d8e-7f6a5b4c3d2e
hook_policies "$W/policies"
"$AV" --root "$W/host" --policy-dir "$W/policies" --state-dir "$W/state" status >/dev/null ||
    { echo "Bail out! cannot make the pool"; exit 1; }

# A good domain holding a managed A100: what the policy and pool inputs are
# tried with (the hook must read both for it).
cat >"$AV_TMP/a100.xml" <<EOF
<domain type='kvm'>
  <name>evil</name>
  <uuid>$U1</uuid>
  <memory unit='GiB'>4</memory>
  <vcpu placement='static' cpuset='0-3'>2</vcpu>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x17' slot='0x00' function='0x0'/></source></hostdev>
  </devices>
</domain>
EOF

# snapshot DIR: every entry of DIR: type, mode, size, ctime (which any
# write, chmod, link or rename changes, and no one can set back), link
# target, name.  FIFOs are never opened.
snapshot() {
    (cd "$1" && find . -printf '%y %m %s %C@ %l %P\n' | LC_ALL=C sort)
}

# av ARGS...: the CLI, 60 s at most.
av() { timeout 60 "$AV" "$@"; }

# make_input SRC DEST: SRC is a file (copied) or a NAME.sh script (run to
# make DEST).
make_input() {
    rm -rf "$2"
    case $1 in
        *.sh) sh "$1" "$2" ;;
        *) cp "$1" "$2" ;;
    esac
}

# one_line DIR CMD...: CMD (given 60 s: av, hook_in) exits non-zero with one
# stderr line beginning "accelvirt:", nothing on stdout, and DIR unchanged.
one_line() {
    dir=$1; shift
    snapshot "$dir" >"$AV_TMP/before"
    "$@" >"$AV_TMP/out" 2>"$AV_TMP/err"
    rc=$?
    snapshot "$dir" >"$AV_TMP/after"
    [ "$rc" -ne 124 ] || { echo "still running after 60 s: $*"; return 1; }
    [ "$rc" -ne 0 ] || { echo "exit 0: $*"; head -c 2000 "$AV_TMP/err"; return 1; }
    [ "$rc" -lt 128 ] || { echo "killed by signal $((rc - 128)): $*"; head -c 2000 "$AV_TMP/err"; return 1; }
    lines=$(wc -l <"$AV_TMP/err")
    [ "$lines" -eq 1 ] && [ "$(tail -c 1 "$AV_TMP/err" | od -An -c | tr -d ' ')" = '\n' ] ||
        { echo "$lines lines on stderr (one expected):"; head -c 2000 "$AV_TMP/err"; return 1; }
    grep -q '^accelvirt: ' "$AV_TMP/err" || { echo "not an 'accelvirt:' line:"; head -c 2000 "$AV_TMP/err"; return 1; }
    [ -z "${WANT:-}" ] || grep -qF -- "$WANT" "$AV_TMP/err" ||
        { echo "no '$WANT' in:"; head -c 2000 "$AV_TMP/err"; return 1; }
    [ ! -s "$AV_TMP/out" ] || { echo "stdout not empty:"; head -c 2000 "$AV_TMP/out"; return 1; }
    diff "$AV_TMP/before" "$AV_TMP/after" >"$AV_TMP/diff" ||
        { echo "state changed:"; head -40 "$AV_TMP/diff"; return 1; }
    echo "# $(head -c 300 "$AV_TMP/err")"
}

# hook_in POLICIES STATE INPUT ARGS...: the hook of the world, INPUT on stdin.
hook_in() {
    pol=$1; st=$2; in=$3; shift 3
    ACCELVIRT_ROOT="$W/host" ACCELVIRT_STATE_DIR="$st" ACCELVIRT_POLICY_DIR="$pol" \
    ACCELVIRT_WORKER="$ACCELVIRT_WORKER" ACCELVIRT_LOG_FILE="$AV_TMP/hook.log" \
        timeout 60 "$HOOK" "$@" <"$in"
}

# ok_line NAME CMD...: one TAP line for one_line over the whole world.
ok_line() {
    name=$1; shift
    av_n=$((av_n + 1))
    if out=$(one_line "$W" "$@" 2>&1); then
        echo "ok $av_n - $name"
        printf '%s\n' "$out" | grep '^# ' | sed 's/^# /#   /'
    else
        echo "not ok $av_n - $name"
        printf '%s\n' "$out" | sed 's/^/# /'
        av_failed=$((av_failed + 1))
    fi
}

# inputs DIR: the inputs of DIR (not the .want files).
inputs() {
    for f in "$BAD/$1"/*; do
        case $f in *.want) continue ;; esac
        [ -e "$f" ] && echo "$f"
    done
}

# want SRC: sets WANT from SRC's .want file, or empties it.
want() {
    WANT=""
    w="${1%.*}.want"
    [ ! -f "$w" ] || WANT=$(cat "$w")
}

# --- domain XML ---------------------------------------------------------------
for src in $(inputs domain); do
    n=$(basename "$src"); n=${n%.*}
    in="$AV_TMP/domain-$n.xml"
    want "$src"
    make_input "$src" "$in"
    for op in prepare start migrate; do
        ok_line "domain/$n at '$op begin'" hook_in "$W/policies" "$W/state" "$in" evil "$op" begin -
    done
    ok_line "domain/$n through accelvirt rewrite" \
        av --root "$W/host" --policy-dir "$W/policies" --state-dir "$W/state" rewrite "$in"
    rm -f "$in"
done

# passes DIR OUT CMD...: CMD exits 0, prints on stdout exactly the file OUT
# (nothing when OUT is empty), and leaves DIR unchanged.
passes() {
    dir=$1; want_out=$2; shift 2
    snapshot "$dir" >"$AV_TMP/before"
    "$@" >"$AV_TMP/out" 2>"$AV_TMP/err"
    rc=$?
    snapshot "$dir" >"$AV_TMP/after"
    [ "$rc" -eq 0 ] || { echo "exit $rc: $*"; head -c 2000 "$AV_TMP/err"; return 1; }
    if [ -n "$want_out" ]; then
        cmp -s "$want_out" "$AV_TMP/out" || { echo "stdout is not the input byte for byte"; return 1; }
    else
        [ ! -s "$AV_TMP/out" ] || { echo "stdout not empty"; return 1; }
    fi
    diff "$AV_TMP/before" "$AV_TMP/after" >"$AV_TMP/diff" || { echo "state changed:"; head -40 "$AV_TMP/diff"; return 1; }
}

# ok_pass NAME DIR OUT CMD...: one TAP line for passes.
ok_pass() {
    name=$1; shift
    av_n=$((av_n + 1))
    if out=$(passes "$@" 2>&1); then
        echo "ok $av_n - $name"
    else
        echo "not ok $av_n - $name"
        printf '%s\n' "$out" | sed 's/^/# /'
        av_failed=$((av_failed + 1))
    fi
}

for src in $(inputs domain-pinning); do
    n=$(basename "$src"); n=${n%.*}
    in="$AV_TMP/domain-$n.xml"
    want "$src"
    make_input "$src" "$in"
    for op in prepare start; do
        ok_line "domain-pinning/$n at '$op begin'" hook_in "$W/policies" "$W/state" "$in" evil "$op" begin -
    done
    ok_pass "domain-pinning/$n passes 'migrate begin' untouched" "$W" "$in" \
        hook_in "$W/policies" "$W/state" "$in" evil migrate begin -
    ok_pass "domain-pinning/$n passes accelvirt rewrite untouched" "$W" "$in" \
        av --root "$W/host" --policy-dir "$W/policies" --state-dir "$W/state" rewrite "$in"
    rm -f "$in"
done

# --- policies: the file alone in a policy dir -------------------------------------
for src in $(inputs policy) "$AV_TEST_SRCDIR"/data/policies/bad/*.json; do
    n=$(basename "$src"); n=${n%.*}
    case $src in "$AV_TEST_SRCDIR"/data/*) n="data-$n" ;; esac
    pd="$W/bad-policies"
    want "$src"
    rm -rf "$pd" && mkdir -m 0755 "$pd"
    make_input "$src" "$pd/50-bad.json"
    ok_line "policy/$n through accelvirt policy check" av --policy-dir "$pd" policy check
    ok_line "policy/$n through the hook at 'prepare begin'" \
        hook_in "$pd" "$W/state" "$AV_TMP/a100.xml" evil prepare begin -
    rm -rf "$pd"
done

# --- pool.json: a copy of the world's state dir with it replaced --------------------
for src in $(inputs pool); do
    n=$(basename "$src"); n=${n%.*}
    sd="$W/bad-state"
    want "$src"
    rm -rf "$sd" && cp -a "$W/state" "$sd"
    make_input "$src" "$sd/pool.json"
    ok_line "pool/$n through accelvirt status" \
        av --root "$W/host" --policy-dir "$W/policies" --state-dir "$sd" status
    ok_line "pool/$n through the hook at 'prepare begin'" \
        hook_in "$W/policies" "$sd" "$AV_TMP/a100.xml" evil prepare begin -
    chmod -R u+rwX "$sd" 2>/dev/null; rm -rf "$sd"
done

# --- journal.jsonl ------------------------------------------------------------------
for src in $(inputs journal); do
    n=$(basename "$src"); n=${n%.*}
    sd="$W/bad-state"
    rm -rf "$sd" && cp -a "$W/state" "$sd"
    want "$src"
    make_input "$src" "$sd/journal.jsonl"
    ok_line "journal/$n through accelvirt journal verify" av --state-dir "$sd" journal verify
    case $n in
        fifo|devzero|directory|huge-line)
            WANT=""
            ok_line "journal/$n through the hook at 'prepare begin'" \
                hook_in "$W/policies" "$sd" "$AV_TMP/a100.xml" evil prepare begin - ;;
    esac
    rm -rf "$sd"
done
WANT=""

# --- bad requests: rewrite refuses, the hook passes ------------------------------------
# passes CMD...: exit 0, nothing on stderr, the world unchanged (stdout: the
# XML back, for migrate begin).
passes() {
    snapshot "$W" >"$AV_TMP/before"
    "$@" >"$AV_TMP/out" 2>"$AV_TMP/err"
    rc=$?
    snapshot "$W" >"$AV_TMP/after"
    [ "$rc" -eq 0 ] || { echo "exit $rc:"; head -c 2000 "$AV_TMP/err"; return 1; }
    [ ! -s "$AV_TMP/err" ] || { echo "stderr not empty:"; head -c 2000 "$AV_TMP/err"; return 1; }
    diff "$AV_TMP/before" "$AV_TMP/after" || { echo "state changed"; return 1; }
}
for src in $(inputs domain-requests); do
    n=$(basename "$src"); n=${n%.*}
    in="$AV_TMP/domain-$n.xml"
    want "$src"
    make_input "$src" "$in"
    ok_line "domain-requests/$n through accelvirt rewrite" \
        av --root "$W/host" --policy-dir "$W/policies" --state-dir "$W/state" rewrite "$in"
    for op in prepare start migrate; do
        check "domain-requests/$n passes the hook at '$op begin' untouched" \
            passes hook_in "$W/policies" "$W/state" "$in" evil "$op" begin -
    done
    rm -f "$in"
done
WANT=""

# --- a placed domain, edited by its owner --------------------------------------------
U2=00000002-0000-4000-8000-000000000002
cat >"$AV_TMP/edited.in.xml" <<EOF
<domain type='kvm'>
  <name>edited</name>
  <uuid>$U2</uuid>
  <metadata>
    <av:accelerators xmlns:av="urn:accelvirt:domain:1">
      <av:request profile="test-a100" count="1"/>
    </av:accelerators>
  </metadata>
  <memory unit='GiB'>4</memory>
  <vcpu placement='static'>2</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type></os>
</domain>
EOF
PLACED="$AV_TMP/edited.placed.xml"
export PLACED
av --root "$W/host" --policy-dir "$W/policies" --state-dir "$W/state" rewrite --project p1 --user u1 \
    "$AV_TMP/edited.in.xml" >"$PLACED" 2>/dev/null || echo "Bail out! cannot place the domain to edit"
for src in $(inputs domain-edited); do
    n=$(basename "$src"); n=${n%.*}
    in="$AV_TMP/edited-$n.xml"
    want "$src"
    make_input "$src" "$in"
    case $n in
        hook-*)
            ok_line "domain-edited/$n at 'prepare begin'" hook_in "$W/policies" "$W/state" "$in" edited prepare begin - ;;
        start-*)
            python3 - "$in" "$AV_TMP/node.xml" <<'PY'
import re, sys
x = open(sys.argv[1]).read()
x = re.sub(r"<domain type=.kvm.>", "<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>", x)
x = re.sub(r"(<vcpu[^>]*>[0-9]+</vcpu>)", r"\1<test:runstate>5</test:runstate>", x)
open(sys.argv[2], "w").write("<node>\n" + x + "</node>\n")
PY
            ok_line "domain-edited/$n through accelvirt start" \
                av --root "$W/host" --policy-dir "$W/policies" --state-dir "$W/state" \
                --connect "test://$AV_TMP/node.xml" start edited ;;
    esac
    rm -f "$in"
done
WANT=""

# --- sysfs trees ----------------------------------------------------------------------
# OUTSIDE holds what an escaping link points at: a device whose ids would
# show in the output if anything under the root were resolved outside it.
OUTSIDE="$AV_TMP/outside"
mkdir -p "$OUTSIDE/sys/bus/pci/devices/0000:ee:00.0" "$OUTSIDE/etc"
printf '0xbad1\n' >"$OUTSIDE/sys/bus/pci/devices/0000:ee:00.0/vendor"
printf '0xbad2\n' >"$OUTSIDE/sys/bus/pci/devices/0000:ee:00.0/device"
printf '0x030200\n' >"$OUTSIDE/sys/bus/pci/devices/0000:ee:00.0/class"
printf 'secret\n' >"$OUTSIDE/etc/shadow"
export OUTSIDE

# tree SCRIPT: $T, a fresh copy of the fake host changed by SCRIPT (run in it).
tree() {
    T="$AV_TMP/tree"
    chmod -R u+rwX "$T" 2>/dev/null; rm -rf "$T"
    cp -a "$AV_TEST_HOSTS/two-socket-8gpu" "$T"
    (cd "$T" && sh "$1") || echo "Bail out! $1 failed"
}

for src in "$BAD"/sysfs/refused/*.sh; do
    n=$(basename "$src" .sh)
    tree "$src"
    av_n=$((av_n + 1))
    if out=$(one_line "$T" av --root "$T" list 2>&1); then
        echo "ok $av_n - sysfs/refused/$n through accelvirt --root TREE list"
        printf '%s\n' "$out" | sed 's/^# /#   /'
    else
        echo "not ok $av_n - sysfs/refused/$n through accelvirt --root TREE list"
        printf '%s\n' "$out" | sed 's/^/# /'
        av_failed=$((av_failed + 1))
    fi
done

# tolerated TREE: list exits 0, says nothing, shows nothing from OUTSIDE,
# changes nothing in TREE.
tolerated() {
    snapshot "$1" >"$AV_TMP/before"
    timeout 60 "$AV" --root "$1" list --json >"$AV_TMP/out" 2>"$AV_TMP/err"
    rc=$?
    snapshot "$1" >"$AV_TMP/after"
    [ "$rc" -eq 0 ] || { echo "exit $rc:"; head -c 2000 "$AV_TMP/err"; return 1; }
    [ ! -s "$AV_TMP/err" ] || { echo "stderr not empty:"; head -c 2000 "$AV_TMP/err"; return 1; }
    ! grep -qiE 'bad1|bad2|0000:ee:00.0|secret' "$AV_TMP/out" || { echo "read outside the root:"; grep -iE 'bad1|bad2|0000:ee|secret' "$AV_TMP/out"; return 1; }
    diff "$AV_TMP/before" "$AV_TMP/after" || { echo "the tree changed"; return 1; }
}
for src in "$BAD"/sysfs/tolerated/*.sh; do
    n=$(basename "$src" .sh)
    tree "$src"
    check "sysfs/tolerated/$n: list reads it inside the root, without a word" tolerated "$T"
done
chmod -R u+rwX "$AV_TMP/tree" 2>/dev/null

finish
