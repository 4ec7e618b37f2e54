#!/usr/bin/env python3
"""Writes a journal as the pool writes it (tests of accounting and metrics).

    mkjournal.py OUT < SPEC

Each SPEC line is "TIME EVENT FIELDS": TIME in RFC 3339 ("2026-11-01T01:00:00Z"),
EVENT the event name, FIELDS a JSON object of the members after "event"
(may be omitted).  A line "RAW TEXT" writes TEXT as it is (a hostile line:
the chain then breaks).  Entries get "seq" from 1 and "prev", the SHA-256 of
the line before, so that `accelvirt journal verify` passes when no RAW line
is there.  Blank lines and lines starting with '#' are skipped.
"""
import hashlib
import json
import sys


def main():
    out = []
    seq = 0
    prev = ""
    for spec in sys.stdin.read().splitlines():
        if not spec.strip() or spec.startswith("#"):
            continue
        if spec.startswith("RAW "):
            line = spec[4:]
        else:
            parts = spec.split(" ", 2)
            fields = json.loads(parts[2]) if len(parts) > 2 else {}
            seq += 1
            entry = {"seq": seq, "time": parts[0], "prev": prev, "event": parts[1]}
            entry.update(fields)
            line = json.dumps(entry, separators=(",", ":"), ensure_ascii=False)
        out.append(line)
        prev = hashlib.sha256(line.encode()).hexdigest()
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in out))


main()
