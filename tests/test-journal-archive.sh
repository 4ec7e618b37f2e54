#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: `accelvirt journal archive`.  The entries before the
# newest checkpoint move to a gzip segment of journal.d; every reader
# (verify, show, accounting, metrics, verify --since-checkpoint) reads across
# the segments and gives what it gave on the same bytes in one file; no
# entry is lost (the segments and the live file, put end to end, are the
# journal as it was, plus the archive's own entry); a journal of 0.1.0
# without a checkpoint is taken over; an archive killed at any point leaves
# a journal that verifies, and the next one finishes; a segment edited,
# missing, renamed, a stray file or a symlink is refused, never read quietly.
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
MKC="$AV_TEST_SRCDIR/data/journals/mkcycles.py"
S="$AV_TMP/state"
mkdir -p "$S"
J="$S/journal.jsonl"

# flat DIR OUT: the journal of DIR as one file: its segments, oldest
# first, then journal.jsonl; segments whose entries journal.jsonl still
# holds (an archive stopped before its cut) left out.
flat() {
    python3 - "$1" "$2" <<'PY'
import gzip, json, os, re, sys
d, out = sys.argv[1], sys.argv[2]
segs = []
if os.path.isdir(os.path.join(d, "journal.d")):
    for n in os.listdir(os.path.join(d, "journal.d")):
        if n.startswith("."):
            continue
        m = re.match(r"journal-(\d+)-\d+\.lines-\d+-\d+\.bytes-(\d+)\+(\d+)\.jsonl\.gz$", n)
        segs.append((int(m.group(2)), int(m.group(1)), n))
first = json.loads(open(os.path.join(d, "journal.jsonl"), "rb").readline())["seq"]
data = b""
for off, seq, n in sorted(segs):
    if seq == first:
        break
    assert len(data) == off, (len(data), off)
    data += gzip.open(os.path.join(d, "journal.d", n)).read()
data += open(os.path.join(d, "journal.jsonl"), "rb").read()
open(out, "wb").write(data)
PY
}

# same_readers A B: verify (entries, checkpoints), show, accounting by every
# grouping and metrics give the same on the state dirs A and B.
same_readers() {
    for d in "$1" "$2"; do
        n=$(basename "$d")
        "$AV" --state-dir "$d" journal verify --json | python3 -c 'import json, sys
d = json.load(sys.stdin); del d["segments"]; print(json.dumps(d, sort_keys=True))' >"$AV_TMP/$n.verify" || return 1
        "$AV" --state-dir "$d" journal show >"$AV_TMP/$n.show" || return 1
        "$AV" --state-dir "$d" journal show --last 7 --event checkpoint >"$AV_TMP/$n.showcp" || return 1
        for by in domain project user profile device; do
            "$AV" --state-dir "$d" accounting --until 2027-06-01 --by $by --json >"$AV_TMP/$n.acc.$by" || return 1
            "$AV" --state-dir "$d" accounting --since 2026-02-01 --until 2027-06-01 --by $by --csv \
                >"$AV_TMP/$n.accs.$by" || return 1
        done
    done
    a=$(basename "$1"); b=$(basename "$2")
    for f in verify show showcp acc.domain acc.project acc.user acc.profile acc.device accs.domain accs.project \
             accs.user accs.profile accs.device; do
        cmp "$AV_TMP/$a.$f" "$AV_TMP/$b.$f" || { echo "differ: $f"; return 1; }
    done
    for try in 1 2 3 4 5; do
        t0=$(date +%s)
        "$AV" --state-dir "$1" metrics >"$AV_TMP/m1" || return 1
        "$AV" --state-dir "$2" metrics >"$AV_TMP/m2" || return 1
        [ "$(date +%s)" = "$t0" ] && break
    done
    # The same checkpoint too (journal_checked_from_seq): one in a segment
    # is found there when journal.jsonl holds none that serves.
    cmp "$AV_TMP/m1" "$AV_TMP/m2"
}

# A journal of cycles with hostile lines, a checkpoint in its middle.
python3 "$MKC" "$J" 3000 --hostile --seed 11
"$AV" --state-dir "$S" journal checkpoint >/dev/null
python3 "$MKC" "$J" 2000 --hostile --seed 12
"$AV" --state-dir "$S" journal checkpoint >/dev/null
python3 "$MKC" "$J" 500 --hostile --seed 13
cp "$J" "$AV_TMP/before.jsonl"
check "journal archive: one segment, read back, journal.jsonl starts at the entry that the newest checkpoint covers" \
    eval "'$AV' --state-dir '$S' journal archive --keep-days 0 --json >'$AV_TMP/a.json' &&
          json '$AV_TMP/a.json' \"d['archived'] is True and d['first_seq'] == 1 and d['finished_earlier_archive'] is False and not d['checkpoint_written']\" &&
          [ \"\$(ls '$S/journal.d' | wc -l)\" = 1 ] && [ \$(stat -c %s '$J') -lt \$(stat -c %s '$AV_TMP/before.jsonl') ]"
check "no entry lost: the segment and journal.jsonl end to end are the journal as it was and the archive's entry" \
    eval "flat '$S' '$AV_TMP/flat.jsonl' && head -c \$(stat -c %s '$AV_TMP/before.jsonl') '$AV_TMP/flat.jsonl' | cmp - '$AV_TMP/before.jsonl' &&
          tail -1 '$AV_TMP/flat.jsonl' | grep -q '\"event\":\"journal-archive\"' &&
          [ \$((\$(wc -l <'$AV_TMP/before.jsonl') + 1)) = \$(wc -l <'$AV_TMP/flat.jsonl') ]"
mkdir -p "$AV_TMP/one"
flat "$S" "$AV_TMP/one/journal.jsonl"
check "verify, show, accounting (every --by, --since) and metrics across the segment are those of the same bytes in one file" \
    same_readers "$S" "$AV_TMP/one"
check "journal verify says how many segments it read" \
    eval "'$AV' --state-dir '$S' journal verify | grep -q ' entries (1 archived segment of journal.d, then journal.jsonl), chain intact' &&
          '$AV' --state-dir '$S' journal verify --json | python3 -c 'import json, sys; assert json.load(sys.stdin)[\"segments\"] == 1'"
check "journal verify --since-checkpoint reads only journal.jsonl after an archive" \
    eval "'$AV' --state-dir '$S' journal verify --since-checkpoint | grep -q 'after the checkpoint at seq'"
check "a second archive right after: nothing to archive" \
    eval "'$AV' --state-dir '$S' journal archive --keep-days 0 | grep -q '^Nothing to archive'"
check "--min-size and --min-age: not due on a small, young journal.jsonl" \
    eval "python3 '$MKC' '$J' 200 --seed 14 && '$AV' --state-dir '$S' journal checkpoint >/dev/null &&
          '$AV' --state-dir '$S' journal archive --min-size 1G | grep -q '^Not archived' &&
          '$AV' --state-dir '$S' journal archive --min-age 36500 | grep -q '^Not archived'"
check "--min-size reached: a second segment, which follows the first" \
    eval "'$AV' --state-dir '$S' journal archive --keep-days 0 --min-size 1K | grep -q '^Archived entries' &&
          [ \"\$(ls '$S/journal.d' | wc -l)\" = 2 ] && '$AV' --state-dir '$S' journal verify >/dev/null"
rm -rf "$AV_TMP/one"; mkdir -p "$AV_TMP/one"
flat "$S" "$AV_TMP/one/journal.jsonl"
check "two segments: the readers still give what one file gives" same_readers "$S" "$AV_TMP/one"

# A torn last line after an archive: the writer acknowledges it with the
# journal's line number (the archived lines counted).
printf '{"seq":77777,"time":"2026-' >>"$J"
check "a torn line after an archive is acknowledged by the journal's line number, and verify passes" \
    eval "'$AV' --state-dir '$S' journal checkpoint >/dev/null && '$AV' --state-dir '$S' journal verify >/dev/null &&
          flat '$S' '$AV_TMP/flat2' && n=\$(grep -n '^{\"seq\":77777,\"time\":\"2026-\$' '$AV_TMP/flat2' | cut -d: -f1) &&
          grep -q \"\\\"event\\\":\\\"torn-line\\\",\\\"line\\\":\$n,\" '$J'"

usage() { expect_exit 2 "$AV" --state-dir "$S" journal archive "$@"; }
check "bad options: one line, exit 2" \
    eval "usage --min-size 0 && usage --min-size 12X && usage --min-size -5 && usage --min-age -1 && usage extra &&
          usage --keep-days -2 && expect_exit 2 '$AV' --state-dir '$S' journal verify --keep-days 3 &&
          expect_exit 2 '$AV' --state-dir '$S' journal verify --min-size 1M"

# --keep-days (default 31): the cut is at the newest checkpoint at least
# that old, so that accounting --since within a month starts from a
# checkpoint in journal.jsonl.  A journal of about the last 60 days, a checkpoint
# every 1,000 entries (about 3 days).
D="$AV_TMP/days"
mkdir -p "$D"
start=$(date -u -d '60 days ago' +%Y-%m-%dT%H:%M:%SZ)
for k in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19; do
    python3 "$MKC" "$D/journal.jsonl" 1000 --seed $((50 + k)) --start "$start" --step-max 500
    "$AV" --state-dir "$D" journal checkpoint >/dev/null
    # The checkpoint takes its at_time as its time (it was written "now"),
    # so that the next entries go on from there, not from today.
    python3 - "$D/journal.jsonl" <<'PY'
import json, sys
lines = open(sys.argv[1], "rb").read().split(b"\n")[:-1]
e = json.loads(lines[-1])
e["time"] = e["at_time"]
lines[-1] = json.dumps(e, separators=(",", ":")).encode()
open(sys.argv[1], "wb").write(b"".join(l + b"\n" for l in lines))
PY
done
cut_seq=$(python3 - "$D/journal.jsonl" <<'PY'
import json, sys, time, calendar
best = None
for line in open(sys.argv[1], "rb"):
    e = json.loads(line)
    if e["event"] == "checkpoint":
        t = calendar.timegm(time.strptime(e["at_time"], "%Y-%m-%dT%H:%M:%SZ"))
        if t <= time.time() - 31 * 86400:
            best = e["at_seq"]
print(best)
PY
)
check "--keep-days 31 (default): cut before the entry that the newest checkpoint at least 31 days old covers" \
    eval "'$AV' --state-dir '$D' journal archive --json >'$AV_TMP/d.json' &&
          json '$AV_TMP/d.json' \"d['archived'] is True and d['last_seq'] == $cut_seq - 1\" &&
          '$AV' --state-dir '$D' journal verify >/dev/null"
since=$(date -u -d '30 days ago' +%Y-%m-%dT%H:%M:%SZ)
until=$(date -u +%Y-%m-%dT%H:%M:%SZ)
check "accounting --since 30 days ago then starts from a checkpoint in journal.jsonl, with a whole read's numbers" \
    eval "'$AV' --state-dir '$D' accounting --since $since --until $until --json >'$AV_TMP/d1.json' &&
          ACCELVIRT_IGNORE_CHECKPOINTS=1 '$AV' --state-dir '$D' accounting --since $since --until $until --json >'$AV_TMP/d2.json' &&
          python3 -c \"import json; a = json.load(open('$AV_TMP/d1.json')); b = json.load(open('$AV_TMP/d2.json'))
assert a['checked_from_seq'] > $cut_seq and b['checked_from_seq'] == 1, (a['checked_from_seq'], b['checked_from_seq'])
del a['checked_from_seq'], b['checked_from_seq']
assert a == b\""
old_since=$(date -u -d '50 days ago' +%Y-%m-%dT%H:%M:%SZ)
check "accounting --since 50 days ago: from a checkpoint in the segment, with a whole read's numbers" \
    eval "'$AV' --state-dir '$D' accounting --since $old_since --until $until --json >'$AV_TMP/d1.json' &&
          ACCELVIRT_IGNORE_CHECKPOINTS=1 '$AV' --state-dir '$D' accounting --since $old_since --until $until --json >'$AV_TMP/d2.json' &&
          python3 -c \"import json; a = json.load(open('$AV_TMP/d1.json')); b = json.load(open('$AV_TMP/d2.json'))
assert 1 < a['checked_from_seq'] <= $cut_seq, a['checked_from_seq']
del a['checked_from_seq'], b['checked_from_seq']
assert a == b\""

# A journal of 0.1.0 (no checkpoint, no journal.d) is taken over.
O="$AV_TMP/old"
mkdir -p "$O"
python3 "$MKC" "$O/journal.jsonl" 1500 --seed 21
cp "$O/journal.jsonl" "$AV_TMP/old-before.jsonl"
check "a journal without a checkpoint: one is written, then the cut; no entry lost" \
    eval "'$AV' --state-dir '$O' journal archive --keep-days 0 --json >'$AV_TMP/o.json' &&
          json '$AV_TMP/o.json' \"d['archived'] is True and d['checkpoint_written'] is True\" &&
          flat '$O' '$AV_TMP/oflat' && head -c \$(stat -c %s '$AV_TMP/old-before.jsonl') '$AV_TMP/oflat' | cmp - '$AV_TMP/old-before.jsonl' &&
          '$AV' --state-dir '$O' journal verify >/dev/null"

# An archive stopped after its segment and before its cut: the segment is
# there, journal.jsonl still holds its entries.
K="$AV_TMP/stopped"
mkdir -p "$K"
python3 "$MKC" "$K/journal.jsonl" 1200 --seed 31
"$AV" --state-dir "$K" journal checkpoint >/dev/null
python3 "$MKC" "$K/journal.jsonl" 100 --seed 32
cp "$K/journal.jsonl" "$AV_TMP/k-live"
"$AV" --state-dir "$K" journal archive --keep-days 0 >/dev/null
cp "$AV_TMP/k-live" "$K/journal.jsonl"
rm -rf "$AV_TMP/one"; mkdir -p "$AV_TMP/one"
cp "$AV_TMP/k-live" "$AV_TMP/one/journal.jsonl"
check "stopped between segment and cut: readers take the entries from journal.jsonl, as in one file" \
    same_readers "$K" "$AV_TMP/one"
check "the next archive finishes the cut, after comparing the segment with journal.jsonl" \
    eval "'$AV' --state-dir '$K' journal archive --keep-days 0 | grep -q '^Finished an archive that was stopped' &&
          '$AV' --state-dir '$K' journal verify >/dev/null && flat '$K' '$AV_TMP/kflat' &&
          head -c \$(stat -c %s '$AV_TMP/k-live') '$AV_TMP/kflat' | cmp - '$AV_TMP/k-live'"

# Killed at random points: the journal always verifies and holds every entry.
R="$AV_TMP/killed"
mkdir -p "$R"
python3 "$MKC" "$R/journal.jsonl" 30000 --seed 41
"$AV" --state-dir "$R" journal checkpoint >/dev/null
python3 "$MKC" "$R/journal.jsonl" 50 --seed 42
killed_ok=yes
for delay in 0.01 0.03 0.06 0.1 0.15 0.2 0.3 0.5; do
    flat "$R" "$AV_TMP/r-before"
    timeout -s KILL $delay "$AV" --state-dir "$R" journal archive --keep-days 0 >/dev/null 2>&1
    "$AV" --state-dir "$R" journal verify >/dev/null 2>"$AV_TMP/r.err" || { cat "$AV_TMP/r.err"; killed_ok="no: $delay"; break; }
    flat "$R" "$AV_TMP/rflat"
    head -c $(stat -c %s "$AV_TMP/r-before") "$AV_TMP/rflat" | cmp -s - "$AV_TMP/r-before" ||
        cmp -s "$AV_TMP/rflat" "$AV_TMP/r-before" || { killed_ok="lost entries: $delay"; break; }
done
check "an archive killed at 8 points: the journal verifies and holds every entry each time ($killed_ok)" \
    eval "[ '$killed_ok' = yes ] && '$AV' --state-dir '$R' journal archive --keep-days 0 >/dev/null &&
          '$AV' --state-dir '$R' journal verify >/dev/null && [ \"\$(ls '$R/journal.d' | wc -l)\" = 1 ] &&
          [ -z \"\$(ls -A '$R/journal.d' | grep '^\\.tmp-')\" ] && [ ! -e '$R/.journal.jsonl.archive' ]"

# Segments edited, missing, renamed, stray: refused with one line.
T="$AV_TMP/tamper"
seg_of() { ls "$1/journal.d" | grep -v '^\.' | head -1; }
fresh() {
    rm -rf "$T"; cp -a "$S" "$T"
}
fresh
SEG=$(seg_of "$T")
python3 - "$T/journal.d/$SEG" <<'PY'
import gzip, sys
data = bytearray(gzip.open(sys.argv[1]).read())
i = data.index(b'"time":"2026-', len(data) // 2)
data[i + 12] = ord("7")
gzip.open(sys.argv[1], "wb").write(bytes(data))
PY
check "a segment edited: verify names the broken line" \
    eval "! '$AV' --state-dir '$T' journal verify 2>'$AV_TMP/t.err' && grep -q 'is broken at line' '$AV_TMP/t.err'"
fresh
rm "$T/journal.d/$SEG"
check "the first segment missing: verify, accounting and show refuse, naming the gap" \
    eval "! '$AV' --state-dir '$T' journal verify 2>'$AV_TMP/t.err' && grep -q 'does not follow' '$AV_TMP/t.err' &&
          ! '$AV' --state-dir '$T' accounting >/dev/null 2>&1 && ! '$AV' --state-dir '$T' journal show >/dev/null 2>&1"
fresh
mv "$T/journal.d/$SEG" "$T/journal.d/$(echo "$SEG" | sed 's/bytes-0+/bytes-0+1/')"
check "a segment whose name says more bytes than it holds: refused" \
    eval "! '$AV' --state-dir '$T' journal verify 2>'$AV_TMP/t.err' && grep -q 'segment' '$AV_TMP/t.err'"
fresh
echo hello >"$T/journal.d/notes.txt"
check "a stray file in journal.d: refused, naming it" \
    eval "! '$AV' --state-dir '$T' journal verify 2>'$AV_TMP/t.err' && grep -q \"'notes.txt'\" '$AV_TMP/t.err'"
fresh
mv "$T/journal.d/$SEG" "$AV_TMP/elsewhere.gz"
ln -s "$AV_TMP/elsewhere.gz" "$T/journal.d/$SEG"
check "a segment that is a symlink: not followed" \
    eval "! '$AV' --state-dir '$T' journal verify 2>'$AV_TMP/t.err' && grep -q 'segment' '$AV_TMP/t.err'"
fresh
printf 'not gzip\n' >"$T/journal.d/$SEG"
check "a segment that does not decompress: refused" \
    eval "! '$AV' --state-dir '$T' journal verify 2>'$AV_TMP/t.err' && grep -q 'segment' '$AV_TMP/t.err'"
fresh
head -3 "$J" >"$T/journal.jsonl.x"; mv "$T/journal.jsonl.x" "$T/journal.jsonl"
sed -i '1d' "$T/journal.jsonl"
check "journal.jsonl that follows no segment: refused" \
    eval "! '$AV' --state-dir '$T' journal verify 2>'$AV_TMP/t.err' && grep -q 'follows none of the segments' '$AV_TMP/t.err'"

fresh
head -5 "$AV_TMP/before.jsonl" >"$T/journal.jsonl"
check "journal.jsonl put back from an old backup (from seq 1, shorter than the segments): refused, the segments not hidden" \
    eval "! '$AV' --state-dir '$T' journal verify 2>'$AV_TMP/t.err' && grep -q 'holds less than the segments' '$AV_TMP/t.err' &&
          ! '$AV' --state-dir '$T' accounting >/dev/null 2>&1"
fresh
: >"$T/journal.jsonl"
check "journal.jsonl emptied: readers refuse, naming it" \
    eval "! '$AV' --state-dir '$T' journal verify 2>'$AV_TMP/t.err' && grep -q 'starts with no entry' '$AV_TMP/t.err'"
fresh
rm -f "$T/journal.d/"journal-*
cp "$AV_TMP/before.jsonl" "$T/journal.jsonl"
mkfifo "$T/journal.d/$SEG"
check "a FIFO in the place of the segment an archive would finish: refused, never waited on" \
    eval "! timeout 30 '$AV' --state-dir '$T' journal archive --keep-days 0 2>'$AV_TMP/t.err' && grep -q 'not a regular file' '$AV_TMP/t.err'"

finish
