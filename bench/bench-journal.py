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

A second table, side by side on the same journals: `accelvirt journal
verify` (the whole chain) with its time and peak memory (the child's
ru_maxrss), and, with --hook, --mkhost and --mkhosts, accelvirt-hook
"prepare begin" of a domain with one GPU on a fake host of 12 A100s and 50
other functions (bench/mkbenchhost.py) whose state dir holds that journal:
the median of 11 prepares, each of another domain and GPU (the first call,
which makes the pool, untimed).  The hook reads only the journal's end: its
time should not grow with the journal.

    bench-journal.py ... [--hook TESTS/BIN/ACCELVIRT-HOOK --mkhost MKBENCHHOST --mkhosts MKHOSTS]
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


def measured(cmd, env=None):
    """Runs @cmd; its wall time in seconds and its peak resident memory in
    MiB (ru_maxrss of that child alone)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(p.pid, 0)
    dt = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, cmd)
    return dt, usage.ru_maxrss / 1024.0


POLICY = ('{"profiles": [{"name": "bench-a100", "match": {"vendor": "0x10de", "device": "0x20f1"},'
          ' "attach": "vfio-pci", "granularity": "card", "numa": "preferred",'
          ' "scrub": [{"method": "none"}], "restore_driver": "on-release"}]}\n')
PREPARE_GPUS = 12


def domain_xml(i):
    """A domain with GPU i of bench/mkbenchhost.py (the first 60 are on
    PCI domain 0, bus 4i+1)."""
    return ("<domain type='kvm'>\n  <name>j%d</name>\n  <uuid>6d1f3a52-0c5e-4b8e-9c1a-%012x</uuid>\n"
            "  <memory unit='KiB'>8388608</memory>\n  <vcpu>4</vcpu>\n"
            "  <os><type arch='x86_64' machine='q35'>hvm</type></os>\n  <devices>\n"
            "    <hostdev mode='subsystem' type='pci' managed='no'>\n"
            "      <source><address domain='0x0000' bus='0x%02x' slot='0x00' function='0x0'/></source>\n"
            "    </hostdev>\n  </devices>\n</domain>\n" % (i, i, 4 * i + 1))


def prepare_median(a, d):
    """The median prepare on a fake host whose state dir @d holds the
    journal (see the module's comment)."""
    root, policies = os.path.join(d, "root"), os.path.join(d, "policies")
    os.makedirs(policies)
    with open(os.path.join(policies, "10-bench.json"), "w") as f:
        f.write(POLICY)
    run([a.python, a.mkhost, "--mkhosts", a.mkhosts, "--out", root, "--gpus", str(PREPARE_GPUS),
         "--others", "50"])
    env = dict(os.environ, ACCELVIRT_ROOT=root, ACCELVIRT_STATE_DIR=d, ACCELVIRT_POLICY_DIR=policies,
               ACCELVIRT_WORKER="/bin/true")
    times = []
    for i in range(PREPARE_GPUS):
        t0 = time.monotonic()
        subprocess.run([a.hook, "j%d" % i, "prepare", "begin", "-"], input=domain_xml(i).encode(), check=True,
                       stdout=subprocess.DEVNULL, env=env)
        if i:
            times.append(time.monotonic() - t0)
    times.sort()
    return times[len(times) // 2]


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
    ap.add_argument("--hook", help="accelvirt-hook (a test build: tests/bin/accelvirt-hook)")
    ap.add_argument("--mkhost", help="bench/mkbenchhost.py")
    ap.add_argument("--mkhosts", help="tests/data/mkhosts.py")
    a = ap.parse_args()
    hook = a.hook and a.mkhost and a.mkhosts
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
            v_time, v_rss = measured([a.cli, "--state-dir", d, "journal", "verify"])
            prep = prepare_median(a, d) if hook else None
            rows.append((n, mb, gen, ckpt, m_whole, m_ckpt, a_whole, a_ckpt, v_time, v_rss, prep))
            print("  %d entries (%.0f MB): generated in %.1f s, first checkpoint %.2f s" % (n, mb, gen, ckpt),
                  flush=True)
        finally:
            shutil.rmtree(d)
    print("journal: whole read vs from a checkpoint (%s new entries after it), fastest of 3 (1 at 1M+)"
          % "10,000 (a tenth below 100,000)")
    print("%10s %8s  %12s %12s %7s  %12s %12s %7s" % ("entries", "MB", "metrics", "metrics", "ratio",
                                                    "acct --since", "acct --since", "ratio"))
    print("%10s %8s  %12s %12s %7s  %12s %12s %7s" % ("", "", "whole s", "ckpt s", "", "whole s", "ckpt s", ""))
    for n, mb, gen, ckpt, mw, mc, aw, ac, _, _, _ in rows:
        print("%10d %8.1f  %12.3f %12.3f %6.1fx  %12.3f %12.3f %6.1fx" % (n, mb, mw, mc, mw / mc, aw, ac, aw / ac))
    print("\njournal verify (whole chain; peak memory: the child's ru_maxrss) and hook prepare (median of %d; "
          "%s) against the journal's size; ratios against the smallest" % (PREPARE_GPUS - 1,
                                                                           "12 GPUs, 50 other functions" if hook
                                                                           else "not run: no --hook"))
    print("%10s %8s  %10s %7s %10s %7s  %12s %7s" % ("entries", "MB", "verify s", "ratio", "verify MiB", "ratio",
                                                   "prepare ms", "ratio"))
    if not rows:
        return
    v0, r0, p0 = rows[0][8], rows[0][9], rows[0][10]
    for n, mb, _, _, _, _, _, _, vt, vr, prep in rows:
        print("%10d %8.1f  %10.3f %6.1fx %10.1f %6.1fx  %12s %7s" % (
            n, mb, vt, vt / v0, vr, vr / r0, "-" if prep is None else "%.2f" % (prep * 1e3),
            "-" if prep is None else "%.2fx" % (prep / p0)))


main()
