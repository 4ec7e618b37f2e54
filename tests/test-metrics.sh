#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: `accelvirt metrics`, the Prometheus text format 0.0.4,
# checked by promtool (Debian's "prometheus" package; build-aux/install-deps
# installs it) and by a parser of our own (names, types, escaping).
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
POL="$AV_TEST_SRCDIR/../policies"
H2="$AV_TEST_HOSTS/two-socket-8gpu"
MK="$AV_TEST_SRCDIR/data/journals/mkjournal.py"
S="$AV_TMP/state"

# promtool is needed: no silent skip.
check "promtool is installed (build-aux/install-deps installs the prometheus package)" command -v promtool

# The pool of the fake host (9 devices of 3 profiles, all free), and a
# journal with tenant names that need escaping: a backslash, quotes, a
# newline.  0000:17:00.0 in use by u1 from 01:00; 0000:31:00.0 used by u2
# 01:00-02:00, its scrub failed (quarantined); 0000:4b:00.0 scrubbed
# fine after u2; an unverified line at the end.
"$AV" --root "$H2" --policy-dir "$POL" --state-dir "$S" status >/dev/null
O1='{"domain_uuid":"u1","domain_name":"back\\slash \"quoted\"\nnewline","nova_instance":null,"nova_project":"P \"1\"","nova_user":"U\\1"}'
O2='{"domain_uuid":"u2","domain_name":"two","nova_instance":null,"nova_project":null,"nova_user":null}'
A='"identity":"dsn:10de:20f1:48b02d1a000001c0.f0","address":"0000:17:00.0"'
B='"identity":"dsn:10de:20f1:48b02d1a000001c1.f0","address":"0000:31:00.0"'
C='"identity":"dsn:10de:20f1:48b02d1a000001c2.f0","address":"0000:4b:00.0"'
python3 "$MK" "$S/journal.jsonl" <<EOF
2026-11-01T00:00:00Z added {$A,"kind":"pci","profile":"gpu-passthrough","state":"free"}
2026-11-01T00:00:00Z added {$B,"kind":"pci","profile":"gpu-passthrough","state":"free"}
2026-11-01T00:00:00Z added {$C,"kind":"pci","profile":"gpu-passthrough","state":"free"}
2026-11-01T01:00:00Z transition {$A,"from":"free","to":"in-use","owner":$O1,"reason":null}
2026-11-01T01:00:00Z transition {$B,"from":"free","to":"in-use","owner":$O2,"reason":null}
2026-11-01T02:00:00Z transition {$B,"from":"in-use","to":"dirty","owner":$O2,"reason":null}
2026-11-01T02:00:00Z scrub-certificate {$B,"profile":"gpu-passthrough","previous_owner":$O2,"seconds":2.5,"ok":false}
2026-11-01T02:00:00Z transition {$B,"from":"dirty","to":"quarantined","owner":null,"reason":"scrub failed"}
2026-11-01T03:00:00Z scrub-certificate {$C,"profile":"gpu-passthrough","previous_owner":$O2,"seconds":0.25,"ok":true}
RAW not an entry
EOF

check "metrics: exit 0, the format promtool checks" \
    eval "'$AV' --root '$H2' --state-dir '$S' metrics >'$AV_TMP/m.prom' && promtool check metrics <'$AV_TMP/m.prom'"
check "our parser: names, one HELP and TYPE before each family's samples, families together, escaping" \
    python3 - "$AV_TMP/m.prom" <<'PY'
import re, sys
name_re = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*')
label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|\})')
types, helps, done, samples = {}, {}, set(), []
current = None
for line in open(sys.argv[1], encoding="utf-8").read().split("\n")[:-1]:
    if line.startswith("# HELP ") or line.startswith("# TYPE "):
        kind, name, rest = line[2:6], line.split(" ")[2], line.split(" ", 3)[3]
        assert name_re.fullmatch(name) and name.startswith("accelvirt_"), line
        table = helps if kind == "HELP" else types
        assert name not in table, "two %s lines for %s" % (kind, name)
        assert name not in done, "%s comes back after other families" % name
        table[name] = rest
        if current and current != name:
            done.add(current)
        current = name
        continue
    if line.startswith("#"):
        continue
    m = name_re.match(line)
    name = m.group(0)
    assert name == current and name in types and name in helps, "sample before its TYPE/HELP: " + line
    assert types[name] in ("counter", "gauge"), line
    assert types[name] != "counter" or name.endswith("_total"), "counter without _total: " + name
    pos, labels = m.end(), {}
    if line[pos] == "{":
        pos += 1
        while line[pos - 1] != "}":
            lm = label_re.match(line, pos)
            assert lm, "bad label at %d: %s" % (pos, line)
            labels[lm.group(1)] = re.sub(r'\\(.)', lambda x: {"n": "\n", "\\": "\\", '"': '"'}[x.group(1)], lm.group(2))
            pos = lm.end()
    assert line[pos] == " ", line
    float(line[pos + 1:])
    samples.append((name, labels, float(line[pos + 1:])))
def get(name, **want):
    got = [v for n, l, v in samples if n == name and all(l.get(k) == x for k, x in want.items())]
    assert len(got) == 1, (name, want, got)
    return got[0]
# escaping: the tenant's names come back exactly; by project, user and
# profile (no domain label without --per-domain: bounded series)
assert get("accelvirt_device_in_use_seconds_total", project='P "1"', user="U\\1", profile="gpu-passthrough") > 0
assert get("accelvirt_device_in_use_seconds_total", project="-", user="-", profile="gpu-passthrough") == 3600
assert not [l for n, l, v in samples if "domain" in l]
assert get("accelvirt_journal_checked_from_seq") == 1
# devices by state: every state of every profile, 0 included
states = ["free", "claimed", "in-use", "dirty", "scrubbing", "quarantined", "missing"]
for p, free in (("gpu-passthrough", 6), ("gpu-rtx-a6000", 2), ("usb-ai-stick", 1)):
    for s in states:
        assert get("accelvirt_devices", profile=p, state=s) == (free if s == "free" else 0), (p, s)
assert get("accelvirt_scrubs_total", profile="gpu-passthrough", result="passed") == 1
assert get("accelvirt_scrubs_total", profile="gpu-passthrough", result="failed") == 1
assert get("accelvirt_scrub_seconds_total", profile="gpu-passthrough") == 2.75
assert get("accelvirt_quarantines_total", profile="gpu-passthrough") == 1
assert get("accelvirt_state_seconds_total", profile="gpu-passthrough", state="dirty") == 0
assert get("accelvirt_journal_verified") == 0
assert get("accelvirt_journal_anomalies", kind="not_entry") == 1
assert get("accelvirt_device_scrub_failures", device="dsn:10de:20f1:48b02d1a000001c0.f0") == 0
# a device's link samples agree with each other (whichever devices av_pci_health_read() reads)
for n, l, v in samples:
    if n == "accelvirt_device_link_width":
        mx = get("accelvirt_device_link_max_width", address=l["address"])
        assert get("accelvirt_device_link_degraded", address=l["address"]) == (1 if 0 < v < mx else 0), l
PY
check "--per-domain: device-seconds by domain UUID and name too, the tenant's name escaped, promtool passes" \
    eval "'$AV' --root '$H2' --state-dir '$S' metrics --per-domain >'$AV_TMP/pd.prom' && promtool check metrics <'$AV_TMP/pd.prom' &&
          grep -qF 'accelvirt_device_in_use_seconds_total{domain=\"u2\",domain_name=\"two\",project=\"-\",user=\"-\",profile=\"gpu-passthrough\"} 3600' '$AV_TMP/pd.prom' &&
          grep -qF 'domain_name=\"back\\\\slash \\\"quoted\\\"\\nnewline\"' '$AV_TMP/pd.prom'"
check "each PCI device has its link metrics or a comment saying why not; USB has none" \
    python3 - "$AV_TMP/m.prom" <<'PY'
import sys
text = open(sys.argv[1]).read()
for a in ("0000:17:00.0", "0000:31:00.0", "0000:4b:00.0", "0000:65:00.0", "0000:ca:00.0", "0000:e3:00.0",
          "0000:98:00.0", "0000:b1:00.0"):
    assert ('address="%s"' % a in text) != ("\n# %s: no health metrics: " % a in text), a
assert "1-1.2" not in text.replace('"1-1.2"', "")
PY

# --output: a whole file or none, mode 0644 whatever the umask.
OUTD="$AV_TMP/textfile"
mkdir -p "$OUTD"
check "--output writes the file 0644 under umask 077, no temporary file left, promtool passes" \
    eval "(umask 077 && '$AV' --root '$H2' --state-dir '$S' metrics --output '$OUTD/accelvirt.prom' >'$AV_TMP/o.txt') &&
          [ \"\$(stat -c %a '$OUTD/accelvirt.prom')\" = 644 ] && [ \"\$(ls '$OUTD')\" = accelvirt.prom ] &&
          grep -qx \"Wrote \$(stat -c %s '$OUTD/accelvirt.prom') bytes of metrics to $OUTD/accelvirt.prom.\" '$AV_TMP/o.txt' &&
          promtool check metrics <'$OUTD/accelvirt.prom'"
check "--output --json says what it wrote" \
    eval "'$AV' --root '$H2' --state-dir '$S' metrics --output '$OUTD/accelvirt.prom' --json >'$AV_TMP/o.json' &&
          json '$AV_TMP/o.json' \"d['output'] == '$OUTD/accelvirt.prom' and d['bytes'] == __import__('os').path.getsize(d['output'])\""
check "--json without --output is refused" one_line 2 "needs '--output FILE'" "$AV" --root "$H2" --state-dir "$S" metrics --json
check "an argument is refused" one_line 2 "takes no arguments" "$AV" --root "$H2" --state-dir "$S" metrics now
check "an --output in a directory that does not exist fails, one line" \
    one_line 1 "$AV_TMP/nodir/m.prom" "$AV" --root "$H2" --state-dir "$S" metrics --output "$AV_TMP/nodir/m.prom"
# The textfile directory may be reachable by another user (Debian's
# /var/lib/prometheus is the prometheus user's): refused unless owned by
# root (or the caller) and writable by its owner only; a symlink planted at
# FILE is replaced, never followed.
OTH="$AV_TMP/other"
mkdir -p "$OTH" && chown 65534 "$OTH"
check "--output in a directory owned by another uid is refused, one line, nothing written" \
    eval "one_line 1 \"refusing to write in '$OTH': it is owned by uid 65534\" '$AV' --root '$H2' --state-dir '$S' metrics --output '$OTH/m.prom' && [ -z \"\$(ls -A '$OTH')\" ]"
GW="$AV_TMP/groupw"
mkdir -p "$GW" && chmod 0775 "$GW"
check "--output in a group-writable directory is refused, one line, nothing written" \
    eval "one_line 1 \"refusing to write in '$GW': it is owned by uid 0 with mode 0775\" '$AV' --root '$H2' --state-dir '$S' metrics --output '$GW/m.prom' && [ -z \"\$(ls -A '$GW')\" ]"
echo victim >"$AV_TMP/victim"
ln -sfn "$AV_TMP/victim" "$OUTD/planted.prom"
check "a symlink planted at FILE is replaced by the file, its target untouched" \
    eval "'$AV' --root '$H2' --state-dir '$S' metrics --output '$OUTD/planted.prom' >/dev/null && [ ! -L '$OUTD/planted.prom' ] && [ -f '$OUTD/planted.prom' ] &&
          [ \"\$(cat '$AV_TMP/victim')\" = victim ] && grep -q '^# TYPE accelvirt_devices gauge\$' '$OUTD/planted.prom'"
ln -sfn "$OUTD" "$AV_TMP/textfile-link"
check "a directory given through a symlink is resolved as given, then checked" \
    eval "'$AV' --root '$H2' --state-dir '$S' metrics --output '$AV_TMP/textfile-link/l.prom' >/dev/null && [ -f '$OUTD/l.prom' ] && rm -f '$OUTD/l.prom' '$OUTD/planted.prom'"
check "metrics changes nothing in the state dir" \
    state_unchanged "$S" "$AV" --root "$H2" --state-dir "$S" metrics --output "$OUTD/accelvirt.prom"
check "an empty state dir: every family still there, promtool passes" \
    eval "'$AV' --root '$H2' --state-dir '$AV_TMP/empty' metrics >'$AV_TMP/e.prom' &&
          promtool check metrics <'$AV_TMP/e.prom' && grep -q '^# TYPE accelvirt_devices gauge\$' '$AV_TMP/e.prom'"

finish
