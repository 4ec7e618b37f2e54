#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""accelvirt benchmark: `accelvirt metrics` and `accelvirt accounting --since
30d` on journals of growing size, read whole (ACCELVIRT_IGNORE_CHECKPOINTS=1)
and from a journal checkpoint, side by side in one run.

    bench-journal.py --cli ACCELVIRT --mkcycles MKCYCLES [--sizes 1000,100000,1000000]

For each size N: a journal of N entries written by mkcycles.py (1,000
devices, 300,000 domains, three profiles), in the past: the first part ends
31 days ago, then `accelvirt journal checkpoint` (its time set back to the
entry it covers, as the synthetic journal lives in the past), then the
entries that came after it (10,000, or a tenth of N below 100,000) over
the 30 days up to a day ago: what the reconcile timer leaves at worst
(it writes one every 10,000 entries).  Each command runs three times
(once at 1,000,000 entries and above), the fastest counts; the table gives
seconds and the ratio whole / checkpoint.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time


def run(cmd, env=None):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)


def fastest(cmd, env, repeats):
    best = None
    for _ in range(repeats):
        t0 = time.monotonic()
        run(cmd, env)
        dt = time.monotonic() - t0
        best = dt if best is None else min(best, dt)
    return best


def retime_last(path):
    """The last line (the checkpoint accelvirt just wrote, stamped now)
    takes the time of the entry it covers; it is the last line, so no
    entry's prev names it yet."""
    import json
    with open(path, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        back = min(size, 4 << 20)
        f.seek(size - back)
        tail = f.read()
        lines = tail.split(b"\n")
        last = json.loads(lines[-2])
        last["time"] = last["at_time"]
        new = json.dumps(last, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        f.seek(size - len(lines[-2]) - 1)
        f.truncate()
        f.write(new)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--mkcycles", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--sizes", default="1000,100000,1000000")
    a = ap.parse_args()
    now = int(time.time())
    rows = []
    for n in [int(x) for x in a.sizes.replace(" ", ",").split(",") if x]:
        fresh = 10000 if n >= 100000 else max(n // 10, 1)
        old = n - fresh
        d = tempfile.mkdtemp(prefix="accelvirt-bench-journal.")
        try:
            j = os.path.join(d, "journal.jsonl")
            span_old = 400 * 86400 - 31 * 86400
            stamp = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
            t0 = time.monotonic()
            run([a.python, a.mkcycles, j, str(old), "--devices", "1000", "--domains", "300000",
                 "--start", stamp(now - 400 * 86400), "--step-max", str(max(2 * span_old // max(old, 1), 2))])
            gen = time.monotonic() - t0
            t0 = time.monotonic()
            run([a.cli, "--state-dir", d, "journal", "checkpoint"])
            ckpt = time.monotonic() - t0
            retime_last(j)
            run([a.python, a.mkcycles, j, str(fresh), "--devices", "1000", "--domains", "300000", "--seed", "2",
                 "--start", stamp(now - 31 * 86400), "--step-max", str(max(2 * 30 * 86400 // fresh, 2))])
            run([a.cli, "--state-dir", d, "journal", "verify"])
            mb = os.path.getsize(j) / 1e6
            repeats = 1 if n >= 1000000 else 3
            whole = dict(os.environ, ACCELVIRT_IGNORE_CHECKPOINTS="1")
            ckp = dict(os.environ)
            ckp.pop("ACCELVIRT_IGNORE_CHECKPOINTS", None)
            metrics = [a.cli, "--state-dir", d, "metrics"]
            acct = [a.cli, "--state-dir", d, "accounting", "--since", "30d", "--json"]
            m_whole, m_ckpt = fastest(metrics, whole, repeats), fastest(metrics, ckp, repeats)
            a_whole, a_ckpt = fastest(acct, whole, repeats), fastest(acct, ckp, repeats)
            rows.append((n, mb, gen, ckpt, m_whole, m_ckpt, a_whole, a_ckpt))
            print("  %d entries (%.0f MB): generated in %.1f s, first checkpoint %.2f s" % (n, mb, gen, ckpt),
                  flush=True)
        finally:
            shutil.rmtree(d)
    print("journal: whole read vs from a checkpoint (%s new entries after it), fastest of 3 (1 at 1M+)"
          % "10,000 (a tenth below 100,000)")
    print("%10s %8s  %12s %12s %7s  %12s %12s %7s" % ("entries", "MB", "metrics", "metrics", "ratio",
                                                    "acct --since", "acct --since", "ratio"))
    print("%10s %8s  %12s %12s %7s  %12s %12s %7s" % ("", "", "whole s", "ckpt s", "", "whole s", "ckpt s", ""))
    for n, mb, gen, ckpt, mw, mc, aw, ac in rows:
        print("%10d %8.1f  %12.3f %12.3f %6.1fx  %12.3f %12.3f %6.1fx" % (n, mb, mw, mc, mw / mc, aw, ac, aw / ac))


main()
