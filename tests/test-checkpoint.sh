#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: journal checkpoints.  `accelvirt metrics` and
# `accelvirt accounting --since` started from a checkpoint give the numbers
# of a whole read (ACCELVIRT_IGNORE_CHECKPOINTS=1), on a journal of many
# cycles with the hostile lines accounting must survive (mkcycles.py
# --hostile: torn lines acknowledged, time going backwards, unknown events,
# a nested checkpoint-like object); checkpoints are chained entries that
# `journal verify` checks; a checkpoint that does not continue the chain,
# or whose line was edited, is not used (a warning, then a whole read).
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
MKC="$AV_TEST_SRCDIR/data/journals/mkcycles.py"
S="$AV_TMP/state"
mkdir -p "$S"
J="$S/journal.jsonl"

# checkpoints FILE: the checkpoint entries of FILE (top-level "event":
# mkcycles.py --hostile nests checkpoint-like objects in other entries).
CKPT_RE='^{"seq":[0-9]*,"time":"[^"]*","prev":"[0-9a-f]*","event":"checkpoint"'
checkpoints() {
    grep "$CKPT_RE" "$1"
}

# last_at_seq FILE: the "at_seq" of the last checkpoint of FILE.
last_at_seq() {
    checkpoints "$1" | tail -1 | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["at_seq"])'
}

# retime FILE N: the last N entries of FILE (the ones `journal checkpoint`
# just wrote, stamped now) take the time of the last entry before them, the
# chain rewritten over them: the synthetic journal lives in 2026's first
# months, and its next entries must not go back in time from "now".
retime() {
    python3 - "$1" "$2" <<'PY'
import hashlib, json, sys
path, n = sys.argv[1], int(sys.argv[2])
lines = open(path, "rb").read().split(b"\n")[:-1]
def entry(line):
    try:
        return json.loads(line)
    except ValueError:
        return None          # a torn line
when = next(entry(l)["time"] for l in reversed(lines[:-n]) if entry(l))
for k in range(len(lines) - n, len(lines)):
    e = json.loads(lines[k])
    e["time"], e["prev"] = when, hashlib.sha256(lines[k - 1]).hexdigest()
    lines[k] = json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode()
open(path, "wb").write(b"".join(l + b"\n" for l in lines))
PY
}

# same_metrics DIR: metrics with checkpoints and without are the same bytes
# but for journal_checked_from_seq (run within one second, as their window
# ends now: retried when the second turned); its value left in $AV_TMP/from.
same_metrics() {
    for try in 1 2 3 4 5; do
        t0=$(date +%s)
        "$AV" --state-dir "$1" metrics >"$AV_TMP/m1" 2>"$AV_TMP/m1.err" || return 1
        ACCELVIRT_IGNORE_CHECKPOINTS=1 "$AV" --state-dir "$1" metrics >"$AV_TMP/m2" 2>"$AV_TMP/m2.err" || return 1
        [ "$(date +%s)" = "$t0" ] && break
    done
    sed -n 's/^accelvirt_journal_checked_from_seq //p' "$AV_TMP/m1" >"$AV_TMP/from"
    grep -q '^accelvirt_journal_checked_from_seq 1$' "$AV_TMP/m2" || { echo "whole read not from seq 1"; return 1; }
    grep -v '^accelvirt_journal_checked_from_seq ' "$AV_TMP/m1" >"$AV_TMP/m1.cmp"
    grep -v '^accelvirt_journal_checked_from_seq ' "$AV_TMP/m2" >"$AV_TMP/m2.cmp"
    diff "$AV_TMP/m1.cmp" "$AV_TMP/m2.cmp" || return 1
    [ ! -s "$AV_TMP/m2.err" ]
}

# same_accounting DIR SINCE: accounting --since SINCE (--until fixed) by
# every grouping, --json and --csv, with checkpoints and without, the same
# but for checked_from_seq; the largest checked_from_seq in $AV_TMP/from.
same_accounting() {
    echo 1 >"$AV_TMP/from"
    for by in domain project user profile device; do
        for fmt in --json --csv; do
            "$AV" --state-dir "$1" accounting --since "$2" --until 2027-06-01 --by $by $fmt \
                >"$AV_TMP/a1" 2>"$AV_TMP/a1.err" || return 1
            ACCELVIRT_IGNORE_CHECKPOINTS=1 "$AV" --state-dir "$1" accounting --since "$2" --until 2027-06-01 \
                --by $by $fmt >"$AV_TMP/a2" 2>"$AV_TMP/a2.err" || return 1
            python3 - "$AV_TMP/a1" "$AV_TMP/a2" "$AV_TMP/from" "$fmt" <<'PY' || return 1
import json, sys
a, b = open(sys.argv[1]).read(), open(sys.argv[2]).read()
if sys.argv[4] == "--json":
    a, b = json.loads(a), json.loads(b)
    assert b["checked_from_seq"] == 1, b["checked_from_seq"]
    if a["checked_from_seq"] > int(open(sys.argv[3]).read()):
        open(sys.argv[3], "w").write(str(a["checked_from_seq"]))
    del a["checked_from_seq"], b["checked_from_seq"]
assert a == b, "checkpointed and whole reads differ"
PY
            cmp "$AV_TMP/a1.err" "$AV_TMP/a2.err" || return 1
        done
    done
}

# The journal in steps, a checkpoint after each (the journal checkpoint
# command, as the reconcile timer runs it).
python3 "$MKC" "$J" 4000 --hostile --seed 1
check "a journal of cycles with hostile lines verifies" "$AV" --state-dir "$S" journal verify
check "metrics before any checkpoint: the whole journal, from seq 1" \
    eval "same_metrics '$S' && [ \"\$(cat '$AV_TMP/from')\" = 1 ]"
check "journal checkpoint writes one, chained: journal verify passes" \
    eval "'$AV' --state-dir '$S' journal checkpoint >'$AV_TMP/c.txt' &&
          grep -q '^Wrote a checkpoint of the journal at seq ' '$AV_TMP/c.txt' && '$AV' --state-dir '$S' journal verify"
retime "$J" 1
CP1=$(last_at_seq "$J")
T1=$(checkpoints "$J" | tail -1 | sed 's/.*"at_time":"\([^"]*\)".*/\1/')
check "metrics from the checkpoint right after it: the same numbers, checked from at_seq + 1" \
    eval "same_metrics '$S' && [ \"\$(cat '$AV_TMP/from')\" = $((CP1 + 1)) ]"
check "--min-entries: no second checkpoint when fewer entries came" \
    eval "'$AV' --state-dir '$S' journal checkpoint --min-entries 10 --json >'$AV_TMP/c.json' &&
          json '$AV_TMP/c.json' \"d['written'] is False and d['new_entries'] == 0 and d['at_seq'] is None\""
python3 "$MKC" "$J" 3000 --hostile --seed 2
"$AV" --state-dir "$S" journal checkpoint --min-entries 1000 >/dev/null
retime "$J" 1
CP2=$(last_at_seq "$J")
# A torn tail while the checkpoint is computed: it covers the entry
# before it; the writer's append then ends the torn line and acknowledges
# it before the checkpoint entry.
python3 "$MKC" "$J" 2500 --hostile --seed 3
printf '{"seq":99999,"time":"2026-' >>"$J"
check "a checkpoint over a torn tail: at the entry before it, the torn line acknowledged, the chain intact" \
    eval "'$AV' --state-dir '$S' journal checkpoint >/dev/null && '$AV' --state-dir '$S' journal verify >/dev/null &&
          tail -2 '$J' | head -1 | grep -q '\"event\":\"torn-line\"'"
retime "$J" 2
CP3=$(last_at_seq "$J")
python3 "$MKC" "$J" 1500 --hostile --seed 4
check "three checkpoints in the journal, each a chained entry" \
    eval "[ \"\$(checkpoints '$J' | wc -l)\" = 3 ] && [ $CP1 -lt $CP2 ] && [ $CP2 -lt $CP3 ] &&
          '$AV' --state-dir '$S' journal verify"
check "metrics after three checkpoints: the same numbers as a whole read, from the newest" \
    eval "same_metrics '$S' && [ \"\$(cat '$AV_TMP/from')\" -gt $CP3 ]"
check "journal verify --since-checkpoint: only the entries after the newest checkpoint, from at_seq + 1" \
    eval "'$AV' --state-dir '$S' journal verify --json >'$AV_TMP/vall.json' &&
          '$AV' --state-dir '$S' journal verify --since-checkpoint --json >'$AV_TMP/vcp.json' &&
          '$AV' --state-dir '$S' journal verify --since-checkpoint | grep -q \"entries from seq $((CP3 + 1)) (line [0-9]*, after the checkpoint at seq $CP3), chain intact from there; the entries before were not read\\.\$\" &&
          python3 -c \"import json; a = json.load(open('$AV_TMP/vall.json')); c = json.load(open('$AV_TMP/vcp.json'))
assert c['from_seq'] == $CP3 + 1 and a['from_seq'] == 1 and c['entries'] == a['entries'] - $CP3, (a, c)\""
check "... a line changed after the checkpoint fails it, naming the same line as a whole verify" \
    eval "mkdir -p '$AV_TMP/late' && python3 - '$J' '$AV_TMP/late/journal.jsonl' <<'PY'
import sys
lines = open(sys.argv[1]).read().split('\\n')
k = len(lines) - 3
lines[k] = lines[k].replace('\"seq\"', '\"seq\" ', 1)
open(sys.argv[2], 'w').write('\\n'.join(lines))
PY
          '$AV' --state-dir '$AV_TMP/late' journal verify 2>'$AV_TMP/l1.err'; [ \$? = 4 ] &&
          '$AV' --state-dir '$AV_TMP/late' journal verify --since-checkpoint 2>'$AV_TMP/l2.err'; [ \$? = 4 ] &&
          cmp '$AV_TMP/l1.err' '$AV_TMP/l2.err'"
check "... without a journal: 0 entries, read from the start" \
    eval "'$AV' --state-dir '$AV_TMP/nojournal' journal verify --since-checkpoint | grep -q '0 entries, chain intact (no checkpoint yet: read from its start)'"
check "--since-checkpoint is an option of journal verify only" one_line 2 "an option of 'journal verify'" \
    "$AV" --state-dir "$S" journal show --since-checkpoint
check "accounting reads the checkpoint entries as known events (no anomaly of them)" \
    eval "'$AV' --state-dir '$S' accounting --json >'$AV_TMP/k.json' &&
          ACCELVIRT_IGNORE_CHECKPOINTS=1 '$AV' --state-dir '$S' accounting --json >'$AV_TMP/k2.json' &&
          python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); assert a[\"anomalies\"]==b[\"anomalies\"] and a[\"checked_from_seq\"]==1' '$AV_TMP/k.json' '$AV_TMP/k2.json'"
# --since at several times: before the first checkpoint (a whole read),
# exactly at a checkpoint's at_time (that one must not serve: it holds an
# entry of the window), a second after it, between, after the end.
for since in 2026-01-01T00:00:00Z 2026-01-15 "$T1" \
    "$(python3 -c "import datetime,sys; print((datetime.datetime.fromisoformat(sys.argv[1].replace('Z','+00:00'))+datetime.timedelta(seconds=1)).strftime('%Y-%m-%dT%H:%M:%SZ'))" "$T1")" \
    2026-03-01 2026-04-01 2026-05-01 2027-01-01; do
    check "accounting --since $since, every --by, --json and --csv: the same as a whole read" same_accounting "$S" "$since"
done
check "accounting --since after the checkpoints did start from one (the test above is not vacuous)" \
    eval "same_accounting '$S' 2027-01-01 && [ \"\$(cat '$AV_TMP/from')\" -gt $CP3 ]"
check "accounting --since at a checkpoint's at_time does not start from it" \
    eval "'$AV' --state-dir '$S' accounting --since '$T1' --until 2027-06-01 --json >'$AV_TMP/t1.json' &&
          json '$AV_TMP/t1.json' \"d['checked_from_seq'] == 1\""

# A journal that ends with every device removed: no open interval, so
# metrics agree whatever the second.
R="$AV_TMP/removed"
mkdir -p "$R"
python3 "$MKC" "$R/journal.jsonl" 3000 --hostile --seed 5
"$AV" --state-dir "$R" journal checkpoint >/dev/null
retime "$R/journal.jsonl" 1
python3 "$MKC" "$R/journal.jsonl" 500 --seed 6 --remove-all
check "every device removed at the end: metrics from the checkpoint equal the whole read" same_metrics "$R"

# edit_checkpoint FILE sha|sums: edits the newest checkpoint of FILE.
# sha: a wrong at_sha256, the chain after it rewritten (journal verify
# passes); sums: an hour more in its total, the chain left as it is.
edit_checkpoint() {
    python3 - "$1" "$2" <<'PY'
import hashlib, json, sys
path, what = sys.argv[1], sys.argv[2]
lines = open(path, "rb").read().split(b"\n")[:-1]
i = max(k for k, l in enumerate(lines)
        if l.startswith(b'{"seq":') and l.endswith(b'}') and json.loads(l)["event"] == "checkpoint")
e = json.loads(lines[i])
if what in ("sums", "rechained-sums"):
    e["total"]["in_use_s"] += 3600
elif what == "since":
    e["devices"][0]["since"] = -9223372036854775808
    e["devices"][0]["state"] = "in-use"
elif what == "huge":
    e["total"]["in_use_s"] = 2 ** 62
else:
    e["at_sha256"] = "1" * 64
lines[i] = json.dumps(e, separators=(",", ":")).encode()
for k in range(i + 1, len(lines)) if what != "sums" else ():
    try:
        n = json.loads(lines[k])
    except ValueError:
        continue
    n["prev"] = hashlib.sha256(lines[k - 1]).hexdigest()
    if n["event"] == "torn-line":
        n["sha256"] = n["prev"]
    lines[k] = json.dumps(n, separators=(",", ":"), ensure_ascii=False).encode()
open(path, "wb").write(b"".join(l + b"\n" for l in lines))
PY
}

# A checkpoint line longer than the finder's 64 KiB blocks (1,500 devices:
# about 400 KB), read backwards across several of them.
L="$AV_TMP/long"
mkdir -p "$L"
python3 "$MKC" "$L/journal.jsonl" 4000 --devices 1500 --seed 7
"$AV" --state-dir "$L" journal checkpoint >/dev/null
retime "$L/journal.jsonl" 1
python3 "$MKC" "$L/journal.jsonl" 300 --devices 1500 --seed 8
check "a checkpoint line over several of the finder's blocks is found and serves" \
    eval "[ \"\$(checkpoints '$L/journal.jsonl' | wc -c)\" -gt 200000 ] && same_metrics '$L' &&
          [ \"\$(cat '$AV_TMP/from')\" = \$((\$(last_at_seq '$L/journal.jsonl') + 1)) ]"

# --- hostile checkpoints ---
# A name that holds a checkpoint-like object, newer than the real one: the
# finder takes only a top-level "event" of "checkpoint".
F="$AV_TMP/forged"
mkdir -p "$F"
cp "$J" "$F/journal.jsonl"
python3 - "$F/journal.jsonl" <<'PY'
import hashlib, json, sys
path = sys.argv[1]
lines = open(path, "rb").read().split(b"\n")[:-1]
last = json.loads(lines[-1])
fake = {"event": "checkpoint", "at_seq": 1, "at_sha256": "0" * 64, "at_offset": 1, "at_time": "2026-01-01T00:00:00Z",
        "entries": 1, "lines": 1, "anomalies": {}, "devices": [], "sums": [], "total": {}}
e = {"seq": last["seq"] + 1, "time": last["time"], "prev": hashlib.sha256(lines[-1]).hexdigest(),
     "event": "violation", "domain_name": json.dumps(fake), "detail": fake, "note": '"checkpoint"'}
open(path, "ab").write(json.dumps(e, separators=(",", ":")).encode() + b"\n")
PY
check "a checkpoint-like object nested in an entry is not taken: the real checkpoint serves, the numbers hold" \
    eval "'$AV' --state-dir '$F' journal verify >/dev/null && same_metrics '$F' && [ \"\$(cat '$AV_TMP/from')\" = $((CP3 + 1)) ]"

# A checkpoint whose at_sha256 is not the hash of its line at_seq, the
# chain rewritten after it so that journal verify passes: a warning, the
# whole journal read, the same numbers.
M="$AV_TMP/mismatch"
mkdir -p "$M"
cp "$J" "$M/journal.jsonl"
edit_checkpoint "$M/journal.jsonl" sha
check "a checkpoint whose at_sha256 is not the next entry's prev: chained, but a whole journal verify finds it (exit 4, one line)" \
    one_line 4 "(the state after seq $CP3) does not hold what the entries before it add up to (at_sha256 differs)" \
    "$AV" --state-dir "$M" journal verify
check "... journal verify --since-checkpoint refuses to start from it (exit 4, one line)" \
    one_line 4 "does not match its journal" "$AV" --state-dir "$M" journal verify --since-checkpoint
check "... metrics warn on one line, read the whole journal, and give its numbers" \
    eval "'$AV' --state-dir '$M' metrics >'$AV_TMP/mm.prom' 2>'$AV_TMP/mm.err' &&
          [ \"\$(wc -l <'$AV_TMP/mm.err')\" = 1 ] &&
          grep -q \"^accelvirt: warning: the journal's checkpoint at seq $CP3 is not used (the line before its at_offset is not the entry at_seq hashing to at_sha256): read the whole journal instead\$\" '$AV_TMP/mm.err' &&
          grep -q '^accelvirt_journal_checked_from_seq 1\$' '$AV_TMP/mm.prom' && grep -q '^accelvirt_journal_verified 1\$' '$AV_TMP/mm.prom'"
check "... accounting --since warns the same way and gives the whole read's numbers" \
    eval "'$AV' --state-dir '$M' accounting --since 2027-01-01 --until 2027-06-01 --json >'$AV_TMP/ma.json' 2>'$AV_TMP/ma.err' &&
          grep -q 'is not used' '$AV_TMP/ma.err' && json '$AV_TMP/ma.json' \"d['checked_from_seq'] == 1 and d['verified']\""
check "... and journal checkpoint, which then computes from the start, saying why" \
    eval "'$AV' --state-dir '$M' journal checkpoint --json >'$AV_TMP/mc.json' 2>'$AV_TMP/mc.err' &&
          grep -qx \"accelvirt: warning: the journal's checkpoint at seq $CP3 is not used (the line before its at_offset is not the entry at_seq hashing to at_sha256): computed from the journal's start instead\" '$AV_TMP/mc.err' && '$AV' --state-dir '$M' journal verify --since-checkpoint >/dev/null &&
          same_metrics '$M' && [ \"\$(cat '$AV_TMP/from')\" -gt $CP3 ]"

# A checkpoint in the chain whose state could not come from any journal: a
# device in a state since the smallest 64-bit time (the interval to now
# would overflow), a total of 2^62 seconds.  Readers do not take it.
for what in since huge; do
    X="$AV_TMP/range-$what"
    mkdir -p "$X"
    cp "$J" "$X/journal.jsonl"
    edit_checkpoint "$X/journal.jsonl" "$what"
    check "a checkpoint whose state is out of range ($what): a whole journal verify finds it; metrics warn, do not take it, and give the whole read's numbers" \
        eval "'$AV' --state-dir '$X' journal verify 2>'$AV_TMP/rv.err'; [ \$? = 4 ] && grep -q 'does not hold what the entries before it add up to' '$AV_TMP/rv.err' &&
              '$AV' --state-dir '$X' metrics >'$AV_TMP/r.prom' 2>'$AV_TMP/r.err' && grep -q 'is not used' '$AV_TMP/r.err' &&
              grep -q '^accelvirt_journal_checked_from_seq 1\$' '$AV_TMP/r.prom' && same_metrics '$X'"
done

# A checkpoint whose sums are an hour more than its entries add up to, the
# chain after it rewritten so that it is intact: only a whole verify, which
# adds the entries up again, can tell; metrics would take its sums.
W="$AV_TMP/wrong-sums"
mkdir -p "$W"
cp "$J" "$W/journal.jsonl"
edit_checkpoint "$W/journal.jsonl" rechained-sums
check "a checkpoint in an intact chain whose sums are wrong: journal verify fails, naming it and what differs" \
    one_line 4 "the checkpoint at seq $((CP3 + 2)) (the state after seq $CP3) does not hold what the entries before it add up to (total differs)" \
    "$AV" --state-dir "$W" journal verify
check "... journal verify --since-checkpoint does not add up what came before (the whole one does, now and then)" \
    "$AV" --state-dir "$W" journal verify --since-checkpoint
check "journal verify of the good journal: its three checkpoints hold" \
    eval "'$AV' --state-dir '$S' journal verify | grep -q '; 3 checkpoints hold what the entries before them add up to\.\$' &&
          '$AV' --state-dir '$S' journal verify --json | python3 -c 'import json,sys; assert json.load(sys.stdin)[\"checkpoints_checked\"] == 3'"

# A checkpoint line edited in place (its sums changed, the chain not
# rewritten): journal verify names the break, readers do not trust it.
E="$AV_TMP/edited"
mkdir -p "$E"
cp "$J" "$E/journal.jsonl"
edit_checkpoint "$E/journal.jsonl" sums
check "a checkpoint line edited: journal verify fails" expect_exit 4 "$AV" --state-dir "$E" journal verify
check "... and so does journal verify --since-checkpoint (the chain after the checkpoint covers its line)" \
    expect_exit 4 "$AV" --state-dir "$E" journal verify --since-checkpoint
check "... metrics do not take its sums: a warning, the whole read's numbers, journal_verified 0" \
    eval "'$AV' --state-dir '$E' metrics >'$AV_TMP/e1.prom' 2>'$AV_TMP/e1.err'; grep -q 'is not used' '$AV_TMP/e1.err' &&
          grep -q '^accelvirt_journal_checked_from_seq 1\$' '$AV_TMP/e1.prom' && grep -q '^accelvirt_journal_verified 0\$' '$AV_TMP/e1.prom'"
check "... journal checkpoint refuses to vouch for the broken chain, one line, nothing written" \
    eval "cp '$E/journal.jsonl' '$AV_TMP/e.before' &&
          one_line 4 'does not verify' '$AV' --state-dir '$E' journal checkpoint && cmp '$E/journal.jsonl' '$AV_TMP/e.before'"

check "--min-entries 0 is refused" one_line 2 "'--min-entries' needs a number" "$AV" --state-dir "$S" journal checkpoint --min-entries 0
check "--min-entries is an option of journal checkpoint only" one_line 2 "an option of 'journal checkpoint'" \
    "$AV" --state-dir "$S" journal verify --min-entries 3
check "journal checkpoint takes no arguments" one_line 2 "takes no arguments" "$AV" --state-dir "$S" journal checkpoint x
check "no journal: no checkpoint, exit 0" \
    eval "'$AV' --state-dir '$AV_TMP/none' journal checkpoint --json >'$AV_TMP/n.json' &&
          json '$AV_TMP/n.json' \"d['written'] is False\" && [ ! -e '$AV_TMP/none/journal.jsonl' ]"

finish
