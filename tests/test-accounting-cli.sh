#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: `accelvirt accounting` on journals written by
# tests/data/journals/mkjournal.py: totals worked out by hand, the window,
# the three outputs (CSV parsed back), bad options, an unverified journal.
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
MK="$AV_TEST_SRCDIR/data/journals/mkjournal.py"
S="$AV_TMP/state"
mkdir -p "$S"

# Two devices, two domains: u1 (a tenant-chosen name with a comma, quotes
# and a newline; Nova project P1, user U1), u2 ("beta", no Nova).  In
# [00:00, 08:00): u1 claimed 01-02 (3600), in-use 02-05 (10800), dirty
# 05-05:30 (1800), scrubbing 05:30-06 (1800), 1 claim, 1 release, 1 scrub
# passed; u2 claimed 02-03 (3600), in-use 03-08 (18000), 1 claim.
O1='{"domain_uuid":"u1","domain_name":"evil, \"name\"\nline2","nova_instance":"i1","nova_project":"P1","nova_user":"U1"}'
O2='{"domain_uuid":"u2","domain_name":"beta","nova_instance":null,"nova_project":null,"nova_user":null}'
python3 "$MK" "$S/journal.jsonl" <<EOF
2026-11-01T00:00:00Z added {"identity":"pci:a","kind":"pci","address":"0000:17:00.0","profile":"gpu","state":"free"}
2026-11-01T00:00:00Z added {"identity":"pci:b","kind":"pci","address":"0000:65:00.0","profile":"fpga","state":"free"}
2026-11-01T01:00:00Z claimed {"identity":"pci:a","address":"0000:17:00.0","from":"free","to":"claimed","owner":$O1,"reason":null}
2026-11-01T02:00:00Z transition {"identity":"pci:a","address":"0000:17:00.0","from":"claimed","to":"in-use","owner":$O1,"reason":null}
2026-11-01T02:00:00Z claimed {"identity":"pci:b","address":"0000:65:00.0","from":"free","to":"claimed","owner":$O2,"reason":null}
2026-11-01T03:00:00Z transition {"identity":"pci:b","address":"0000:65:00.0","from":"claimed","to":"in-use","owner":$O2,"reason":null}
2026-11-01T05:00:00Z transition {"identity":"pci:a","address":"0000:17:00.0","from":"in-use","to":"dirty","owner":$O1,"reason":null}
2026-11-01T05:30:00Z transition {"identity":"pci:a","address":"0000:17:00.0","from":"dirty","to":"scrubbing","owner":$O1,"reason":null}
2026-11-01T06:00:00Z scrub-certificate {"identity":"pci:a","address":"0000:17:00.0","profile":"gpu","previous_owner":$O1,"steps":[],"seconds":1800.25,"ok":true,"result":"free","reason":null}
2026-11-01T06:00:00Z transition {"identity":"pci:a","address":"0000:17:00.0","from":"scrubbing","to":"free","owner":null,"reason":null}
EOF
W="--since 2026-11-01T00:00:00Z --until 2026-11-01T08:00:00Z"

check "the synthetic journal verifies (mkjournal.py chains it as the pool does)" \
    "$AV" --state-dir "$S" journal verify
check "text: a row per domain, hours and seconds, the total, no anomalies" \
    eval "'$AV' --state-dir '$S' accounting $W >'$AV_TMP/t.txt' 2>'$AV_TMP/t.err' &&
          grep -q '^u1  *evil, \"name\"?line2  *3.0 (10800)  *1.0 (3600)  *0.5 (1800)  *0.5 (1800)  *0.0 (0)  *1  *1  *0  *0  1/0\$' '$AV_TMP/t.txt' &&
          grep -q '^u2  *beta  *5.0 (18000)  *1.0 (3600)  *0.0 (0)  *0.0 (0)  *0.0 (0)  *1  *0  *0  *0  0/0\$' '$AV_TMP/t.txt' &&
          grep -q '^total  *8.0 (28800)  *2.0 (7200)  *0.5 (1800)  *0.5 (1800)  *0.0 (0)  *2  *1  *0  *0  1/0\$' '$AV_TMP/t.txt' &&
          grep -qx 'No anomalies in the journal.' '$AV_TMP/t.txt' && [ ! -s '$AV_TMP/t.err' ]"
"$AV" --state-dir "$S" accounting $W --json >"$AV_TMP/a.json"
check "--json: exact seconds, the tenant's name as it is, verified" \
    json "$AV_TMP/a.json" "(d['verified'] and d['chain_error'] is None and d['entries'] == 10 and
        [(g['domain'], g['name'], g['in_use_s'], g['claimed_s'], g['dirty_s'], g['scrubbing_s'], g['claims'],
          g['releases'], g['scrubs_passed'], g['scrub_seconds']) for g in d['groups']] ==
        [('u1', 'evil, \"name\"\nline2', 10800, 3600, 1800, 1800, 1, 1, 1, 1800.25),
         ('u2', 'beta', 18000, 3600, 0, 0, 1, 0, 0, 0)] and
        d['total']['in_use_s'] == 28800 and d['since'] == '2026-11-01T00:00:00Z' and
        sum(d['anomalies'].values()) == 0)"
for by in domain project user profile device; do
    check "--by $by: the groups add up to the same total" \
        eval "'$AV' --state-dir '$S' accounting $W --by $by --json >'$AV_TMP/by.json' && python3 - '$AV_TMP/by.json' <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
keys = ['in_use_s', 'claimed_s', 'dirty_s', 'scrubbing_s', 'quarantined_s', 'claims', 'releases', 'attaches',
        'detaches', 'scrubs_passed', 'scrubs_failed', 'quarantines']
for k in keys:
    assert sum(g[k] for g in d['groups']) == d['total'][k], k
assert (d['total']['in_use_s'], d['total']['claimed_s'], d['total']['dirty_s']) == (28800, 7200, 1800), d['total']
assert d['by'] == '$by'
PY"
done
check "--by project: Nova's project, '-' when unknown" \
    eval "'$AV' --state-dir '$S' accounting $W --by project --json >'$AV_TMP/p.json' &&
          json '$AV_TMP/p.json' \"[(g['project'], g['in_use_s']) for g in d['groups']] == [('-', 18000), ('P1', 10800)]\""
check "--csv: RFC 4180, parsed back with the tenant's name intact" \
    eval "'$AV' --state-dir '$S' accounting $W --csv >'$AV_TMP/a.csv' && python3 - '$AV_TMP/a.csv' <<'PY'
import csv, sys
raw = open(sys.argv[1], newline='').read()
assert raw.endswith('\r\n') and '\"evil, \"\"name\"\"\nline2\"' in raw, repr(raw)
rows = list(csv.reader(open(sys.argv[1], newline='')))
assert rows[0][:4] == ['row', 'domain', 'name', 'in_use_s'], rows[0]
assert rows[1][:5] == ['group', 'u1', 'evil, \"name\"\nline2', '10800', '3600'], rows[1]
assert rows[2][:4] == ['group', 'u2', 'beta', '18000'], rows[2]
assert rows[3][:4] == ['total', '', '', '28800'], rows[3]
assert len(rows) == 4 and all(len(r) == 15 for r in rows)
PY"
# A tenant names its domain "=HYPERLINK(...)" or "@SUM(...)": a spreadsheet
# would run it (OWASP, "CSV Injection"); the field gets a leading
# apostrophe, and a plain number ("-12") or the lone "-" stays as it is.
F="$AV_TMP/formula"
mkdir -p "$F"
own() { printf '{"domain_uuid":"%s","domain_name":"%s","nova_instance":null,"nova_project":null,"nova_user":null}' "$1" "$2"; }
python3 "$MK" "$F/journal.jsonl" <<EOF
2026-11-01T00:00:00Z added {"identity":"pci:a","kind":"pci","address":"0000:17:00.0","profile":"gpu","state":"free"}
2026-11-01T00:00:00Z added {"identity":"pci:b","kind":"pci","address":"0000:65:00.0","profile":"gpu","state":"free"}
2026-11-01T00:00:00Z added {"identity":"pci:c","kind":"pci","address":"0000:b1:00.0","profile":"gpu","state":"free"}
2026-11-01T01:00:00Z claimed {"identity":"pci:a","address":"0000:17:00.0","from":"free","to":"claimed","owner":$(own u1 '=HYPERLINK(1,2)'),"reason":null}
2026-11-01T01:00:00Z claimed {"identity":"pci:b","address":"0000:65:00.0","from":"free","to":"claimed","owner":$(own u2 '@SUM(1+1)'),"reason":null}
2026-11-01T01:00:00Z claimed {"identity":"pci:c","address":"0000:b1:00.0","from":"free","to":"claimed","owner":$(own +u3 -12),"reason":null}
EOF
check "--csv: a name a spreadsheet would run as a formula gets a leading apostrophe; numbers and '-' do not" \
    eval "'$AV' --state-dir '$F' accounting --until 2026-11-01T02:00:00Z --csv >'$AV_TMP/f.csv' &&
          '$AV' --state-dir '$F' accounting --until 2026-11-01T02:00:00Z --by project --csv >'$AV_TMP/fp.csv' &&
          grep -qF \"group,u1,\\\"'=HYPERLINK(1,2)\\\",0,3600,\" '$AV_TMP/f.csv' &&
          grep -qF \"group,u2,'@SUM(1+1),0,3600,\" '$AV_TMP/f.csv' &&
          grep -qF \"group,'+u3,-12,0,3600,\" '$AV_TMP/f.csv' && grep -q '^group,-,,0,10800,' '$AV_TMP/fp.csv'"
check "--since cuts intervals: from 04:00, u1 in-use 3600 and no claim, u2 in-use 14400" \
    eval "'$AV' --state-dir '$S' accounting --since 2026-11-01T04:00:00Z --until 2026-11-01T08:00:00Z --json >'$AV_TMP/w.json' &&
          json '$AV_TMP/w.json' \"[(g['in_use_s'], g['claimed_s'], g['claims'], g['dirty_s']) for g in d['groups']] == [(3600, 0, 0, 1800), (14400, 0, 0, 0)]\""
check "a date is midnight UTC: --until 2026-11-01 counts nothing" \
    eval "'$AV' --state-dir '$S' accounting --until 2026-11-01 --json >'$AV_TMP/e.json' &&
          json '$AV_TMP/e.json' \"d['groups'] == [] and d['until'] == '2026-11-01T00:00:00Z' and d['since'] is None\""
check "a duration back from now: --since 3650d reaches the journal, open intervals end now" \
    eval "'$AV' --state-dir '$S' accounting --since 3650d --json >'$AV_TMP/n.json' &&
          json '$AV_TMP/n.json' \"d['total']['in_use_s'] > 28800 and d['total']['claims'] == 2\""
check "an offset time is taken as the instant it names" \
    eval "'$AV' --state-dir '$S' accounting --since 2026-11-01T06:00:00+02:00 --until 2026-11-01T08:00:00Z --json >'$AV_TMP/o.json' &&
          json '$AV_TMP/o.json' \"d['since'] == '2026-11-01T04:00:00Z'\""

# --- bad options: one line, exit 2, nothing read ---
check "--since that is no time is refused" one_line 2 "'--since' takes RFC 3339" "$AV" --state-dir "$S" accounting --since yesterday
check "--until with month 13 is refused" one_line 2 "'--until' takes" "$AV" --state-dir "$S" accounting --until 2026-13-01
check "a zero duration is refused" one_line 2 "got '0d'" "$AV" --state-dir "$S" accounting --since 0d
check "a negative duration is refused" one_line 2 "got '-7d'" "$AV" --state-dir "$S" accounting --since=-7d
check "a duration past ten years is refused" one_line 2 "got '99999d'" "$AV" --state-dir "$S" accounting --since 99999d
check "an empty window is refused" one_line 2 "the window is empty" "$AV" --state-dir "$S" accounting --since 2026-11-02 --until 2026-11-01
check "--by with an unknown grouping is refused" one_line 2 "'--by' takes domain, project" "$AV" --state-dir "$S" accounting --by owner
check "--json and --csv together are refused" one_line 2 "not both" "$AV" --state-dir "$S" accounting --json --csv
check "an argument is refused" one_line 2 "takes no arguments" "$AV" --state-dir "$S" accounting u1

# --- a hostile journal: counted, warned about, never fatal ---
H="$AV_TMP/hostile"
mkdir -p "$H"
python3 "$MK" "$H/journal.jsonl" <<EOF
2026-11-01T00:00:00Z added {"identity":"pci:a","kind":"pci","address":"0000:17:00.0","profile":"gpu","state":"free"}
RAW this is not json, "nor" a journal entry
2026-11-01T02:00:00Z claimed {"identity":"pci:a","address":"0000:17:00.0","from":"free","to":"claimed","owner":$O2,"reason":null}
2026-11-01T01:00:00Z transition {"identity":"pci:a","address":"0000:17:00.0","from":"claimed","to":"in-use","owner":$O2,"reason":null}
2026-11-01T03:00:00Z who-knows {"identity":"pci:a"}
EOF
check "an unverified journal: one warning line, the anomalies line, exit 0" \
    eval "'$AV' --state-dir '$H' accounting --until 2026-11-01T04:00:00Z >'$AV_TMP/h.txt' 2>'$AV_TMP/h.err' &&
          [ \"\$(wc -l <'$AV_TMP/h.err')\" -eq 1 ] &&
          grep -q \"^accelvirt: warning: the journal's chain does not verify (line 2: not a journal entry, and no torn-line entry acknowledges it): accounting from an unverified journal\" '$AV_TMP/h.err' &&
          grep -qx '3 journal lines skipped or doubted: 1 not a journal entry, 1 time going backwards (taken as no time), 1 an unknown event' '$AV_TMP/h.txt' &&
          grep -q '^total  *2.0 (7200)  *0.0 (0) ' '$AV_TMP/h.txt'"
check "--csv: the anomalies line goes to standard error (the CSV has no row for it)" \
    eval "'$AV' --state-dir '$H' accounting --until 2026-11-01T04:00:00Z --csv >'$AV_TMP/h.csv' 2>'$AV_TMP/hc.err' &&
          grep -qx 'accelvirt: warning: 3 journal lines skipped or doubted: 1 not a journal entry, 1 time going backwards (taken as no time), 1 an unknown event' '$AV_TMP/hc.err' &&
          ! grep -q 'skipped' '$AV_TMP/h.csv' && [ \"\$(wc -l <'$AV_TMP/hc.err')\" -eq 2 ]"
check "journal verify refuses that journal too" expect_exit 4 "$AV" --state-dir "$H" journal verify
check "--json of an unverified journal says so and counts each anomaly" \
    eval "'$AV' --state-dir '$H' accounting --until 2026-11-01T04:00:00Z --json 2>/dev/null >'$AV_TMP/h.json' &&
          json '$AV_TMP/h.json' \"not d['verified'] and d['anomalies'] == {'not_entry': 1, 'bad_time': 0, 'backwards': 1, 'from_mismatch': 0, 'unknown_device': 0, 'bad_fields': 0, 'unknown_event': 1}\""
check "accounting changes nothing in the state dir" \
    eval "(cd '$S' && sha256sum journal.jsonl) >'$AV_TMP/s0' && '$AV' --state-dir '$S' accounting >/dev/null &&
          (cd '$S' && sha256sum journal.jsonl) | cmp - '$AV_TMP/s0' && [ ! -e '$S/pool.json' ]"
check "no journal at all: nothing to account, exit 0" \
    eval "'$AV' --state-dir '$AV_TMP/none' accounting --json >'$AV_TMP/z.json' &&
          json '$AV_TMP/z.json' \"d['groups'] == [] and d['entries'] == 0 and d['verified']\""

finish
