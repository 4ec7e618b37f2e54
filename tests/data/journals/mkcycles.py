#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Appends device cycles to a journal, chained as the pool chains it (tests
of checkpoints, and the journals of bench/bench-journal.sh).

    mkcycles.py JOURNAL ENTRIES [--seed N] [--devices N] [--domains N]
                [--start RFC3339] [--step-max S] [--hostile] [--remove-all]

Continues JOURNAL (created when missing) from its last line: "seq" and "prev"
go on, times go on from its last entry's (or --start, default
2026-01-01T00:00:00Z, whichever is later), 1 to --step-max seconds apart
(default 900).  Each device goes
round free -> claimed -> in-use (attach, detach) -> dirty -> scrubbing ->
scrub-certificate -> free, or quarantined and later cleared, for owners of
several Nova projects, users and domains, over three profiles.  --hostile
mixes in what accounting must survive: unknown events, time going backwards,
a torn line and the "torn-line" entry acknowledging it (as a writer killed
mid-append and the next writer leave them), a name holding a nested
checkpoint-like object, a reprofile.  --remove-all ends with every device
"removed" (no interval left open).  The same arguments write the same
bytes.
"""
import argparse
import datetime
import hashlib
import json
import os
import random

STATES = ["claimed", "in-use", "dirty", "scrubbing"]
PROFILES = ["gpu", "fpga", "usb-ai"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("journal")
    ap.add_argument("entries", type=int)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--devices", type=int, default=12)
    ap.add_argument("--domains", type=int, default=40)
    ap.add_argument("--start", default="2026-01-01T00:00:00Z")
    ap.add_argument("--step-max", type=int, default=900)
    ap.add_argument("--hostile", action="store_true")
    ap.add_argument("--remove-all", action="store_true")
    a = ap.parse_args()
    rnd = random.Random(a.seed)

    seq, prev, lineno = 0, "", 0
    t = int(datetime.datetime.fromisoformat(a.start.replace("Z", "+00:00")).timestamp())
    devs = {}
    if os.path.exists(a.journal):
        with open(a.journal, "rb") as f:
            for raw in f:
                lineno += 1
                line = raw.rstrip(b"\n")
                prev = hashlib.sha256(line).hexdigest()
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(e, dict) or not isinstance(e.get("seq"), int):
                    continue
                seq = e["seq"]
                t = max(t, int(datetime.datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()))
                ident = e.get("identity")
                if e.get("event") == "added":
                    devs[ident] = {"state": e["state"], "owner": None, "profile": e["profile"]}
                elif e.get("event") == "removed":
                    devs.pop(ident, None)
                elif ident in devs and isinstance(e.get("to"), str):
                    devs[ident]["state"] = e["to"]
                    devs[ident]["owner"] = e.get("owner")
    out = open(a.journal, "ab")

    def write_raw(line):
        nonlocal prev, lineno
        out.write(line + b"\n")
        prev = hashlib.sha256(line).hexdigest()
        lineno += 1

    def entry(event, fields, when=None):
        nonlocal seq
        seq += 1
        stamp = datetime.datetime.fromtimestamp(t if when is None else when, datetime.timezone.utc)
        e = {"seq": seq, "time": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"), "prev": prev, "event": event}
        e.update(fields)
        write_raw(json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode())

    def owner():
        d = rnd.randrange(a.domains)
        return {"domain_uuid": "dom-%04d" % d, "domain_name": "vm-%d" % d, "nova_instance": None,
                "nova_project": "proj-%d" % (d % 4) if d % 5 else None, "nova_user": "user-%d" % (d % 3)}

    def move(ident, frm, to, who, event="transition", **extra):
        fields = {"identity": ident, "address": addr(ident), "from": frm, "to": to, "owner": who, "reason": None}
        fields.update(extra)
        entry(event, fields)
        devs[ident]["state"], devs[ident]["owner"] = to, who

    def addr(ident):
        return "0000:%02x:00.0" % (int(ident.split(":")[1]) % 256)

    written = lambda: seq
    goal = seq + a.entries
    for i in range(a.devices):
        ident = "pci:%d" % i
        if ident not in devs and written() < goal:
            devs[ident] = {"state": "free", "owner": None, "profile": PROFILES[i % 3]}
            entry("added", {"identity": ident, "kind": "pci", "address": addr(ident), "profile": PROFILES[i % 3],
                            "state": "free", "owner": None})
    while written() < goal and devs:
        t += rnd.randrange(1, max(a.step_max, 2))
        ident = rnd.choice(sorted(devs))
        d = devs[ident]
        s, who = d["state"], d["owner"]
        if a.hostile and rnd.random() < 0.01:
            kind = rnd.randrange(5)
            if kind == 0:
                entry("who-knows", {"identity": ident})
            elif kind == 1:
                entry("claim-renewed", {"identity": ident}, when=t - rnd.randrange(1, 5000))
            elif kind == 2:
                # a writer killed mid-append, the next one acknowledging it
                torn_line = lineno + 1
                write_raw(b'{"seq":%d,"time":"2026-' % (seq + 1))
                entry("torn-line", {"line": torn_line, "length": len(b'{"seq":%d,"time":"2026-' % (seq + 1)),
                                    "sha256": prev})
            elif kind == 3:
                fake = {"event": "checkpoint", "at_seq": 1, "at_sha256": "0" * 64, "at_offset": 1,
                        "at_time": "2026-01-01T00:00:00Z", "entries": 1, "lines": 1}
                entry("violation", {"identity": ident, "domain_name": json.dumps(fake), "detail": fake})
            else:
                p = rnd.choice(PROFILES)
                d["profile"] = p
                entry("reprofiled", {"identity": ident, "address": addr(ident), "profile": p})
            continue
        if s == "free":
            move(ident, "free", "claimed", owner(), event="claimed")
        elif s == "claimed":
            move(ident, "claimed", "in-use", who)
            entry("attach", {"domain_uuid": who["domain_uuid"], "domain_name": who["domain_name"],
                             "devices": [{"identity": ident, "profile": d["profile"]}]})
        elif s == "in-use":
            entry("detach", {"domain_uuid": who["domain_uuid"], "released": [ident]})
            move(ident, "in-use", "dirty", who)
        elif s == "dirty":
            move(ident, "dirty", "scrubbing", who)
        elif s == "scrubbing":
            ok = rnd.random() < 0.85
            entry("scrub-certificate", {"identity": ident, "address": addr(ident), "profile": d["profile"],
                                        "previous_owner": who, "seconds": rnd.randrange(1, 4000) / 8,
                                        "ok": ok})
            move(ident, "scrubbing", "free" if ok else "quarantined", None,
                 reason=None if ok else "scrub failed")
        elif s == "quarantined":
            move(ident, "quarantined", "free", None, event="cleared")
        else:
            move(ident, s, "free", None)
    if a.remove_all:
        for ident in sorted(devs):
            t += 1
            entry("removed", {"identity": ident, "address": addr(ident)})
    out.close()


main()
