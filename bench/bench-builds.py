#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""accelvirt benchmark: two builds of the hook side by side (issue 38, item
3).  A measurement, not a test: it prints medians and ratios, and fails only
when a call itself fails.

    bench-builds.py --before DIR --after DIR --mkhost MKBENCHHOST --mkhosts MKHOSTS
                    [--cycles 21] [--hosts 8/50,64/1000,512/5000] [--python PYTHON]

DIR is a build tree holding tests/bin/accelvirt-hook, accelvirt-worker and
accelvirt-hold (make check builds them; copy them away to keep a build
"before").  For each host (bench/mkbenchhost.py: GPUS managed A100s and
OTHER other PCI functions, on tmpfs) each build gets a state dir of its own
and runs bench-hook's cycle of a domain with one A100: prepare begin, start
begin, release end, then its worker scrubs the GPU free (untimed).  The
builds alternate cycle by cycle, so that the machine's load falls on both
alike.  Each call is a whole process; the table gives the medians of its
CPU time (user and system, of the hook process) and of its wall time.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

POLICY = ('{"profiles": [{"name": "bench-a100", "match": {"vendor": "0x10de", "device": "0x20f1"},'
          ' "attach": "vfio-pci", "granularity": "card", "numa": "preferred",'
          ' "scrub": [{"method": "none"}], "restore_driver": "on-release"}]}\n')
DOMAIN = """<domain type='kvm'>
  <name>gpu</name>
  <uuid>6d1f3a52-0c5e-4b8e-9c1a-2f4b6a8d0e12</uuid>
  <memory unit='KiB'>8388608</memory>
  <vcpu placement='static'>4</vcpu>
  <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <hostdev mode='subsystem' type='pci' managed='no'>
      <source><address domain='0x0000' bus='0x01' slot='0x00' function='0x0'/></source>
    </hostdev>
  </devices>
</domain>
"""
STEPS = (("prepare", "begin"), ("start", "begin"), ("release", "end"))


def run(argv, env, stdin_path=None):
    """Runs @argv; returns (CPU ms, wall ms).  Exits on failure."""
    t0 = time.monotonic()
    with open(stdin_path or os.devnull, "rb") as stdin:
        proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.monotonic() - t0) * 1e3
    proc.returncode = 0
    if status != 0:
        sys.exit("bench-builds: %s failed (status %d): %s" % (" ".join(argv), status, err.decode(errors="replace")))
    return (usage.ru_utime + usage.ru_stime) * 1e3, wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", required=True)
    parser.add_argument("--mkhost", required=True)
    parser.add_argument("--mkhosts", required=True)
    parser.add_argument("--cycles", type=int, default=21)
    parser.add_argument("--hosts", default="8/50,64/1000,512/5000")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    hosts = []
    for h in args.hosts.split(","):
        m = re.fullmatch(r"(\d+)/(\d+)", h)
        if not m:
            sys.exit("bench-builds: --hosts: expected GPUS/OTHERS[,...], not '%s'" % h)
        hosts.append((int(m.group(1)), int(m.group(2))))
    builds = (("before", os.path.abspath(args.before)), ("after", os.path.abspath(args.after)))
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    tmp = tempfile.mkdtemp(prefix="accelvirt-bench-builds.", dir=base)
    try:
        policies = os.path.join(tmp, "policies")
        os.mkdir(policies)
        with open(os.path.join(policies, "10-bench.json"), "w") as f:
            f.write(POLICY)
        xml = os.path.join(tmp, "gpu.xml")
        with open(xml, "w") as f:
            f.write(DOMAIN)
        print("bench-builds: whole hook processes, before / after, medians of %d cycles "
              "(CPU: user and system of the hook; wall: fork to exit)" % args.cycles)
        print("  %-22s %-8s %21s %21s %21s" % ("host", "", "prepare", "start", "release"))
        for gpus, others in hosts:
            root = os.path.join(tmp, "host-%d-%d" % (gpus, others))
            subprocess.run([args.python, args.mkhost, "--mkhosts", args.mkhosts, "--out", root,
                            "--gpus", str(gpus), "--others", str(others)], check=True)
            envs = {}
            for name, build in builds:
                envs[name] = dict(os.environ, ACCELVIRT_ROOT=root,
                                  ACCELVIRT_STATE_DIR=os.path.join(tmp, "state-%d-%d-%s" % (gpus, others, name)),
                                  ACCELVIRT_POLICY_DIR=policies, ACCELVIRT_WORKER="/bin/true",
                                  ACCELVIRT_HOLD=os.path.join(build, "tests/bin/accelvirt-hold"))
                hook = os.path.join(build, "tests/bin/accelvirt-hook")
                # Warm-up: the first call makes the pool.
                run([hook, "gpu", "prepare", "begin", "-"], envs[name], xml)
                run([hook, "gpu", "release", "end", "-"], envs[name], xml)
                run([os.path.join(build, "tests/bin/accelvirt-worker")], envs[name])
            times = {name: {step: ([], []) for step, _ in STEPS} for name, _ in builds}
            for _ in range(args.cycles):
                for name, build in builds:
                    hook = os.path.join(build, "tests/bin/accelvirt-hook")
                    for step, sub in STEPS:
                        cpu, wall = run([hook, "gpu", step, sub, "-"], envs[name], xml)
                        times[name][step][0].append(cpu)
                        times[name][step][1].append(wall)
                    run([os.path.join(build, "tests/bin/accelvirt-worker")], envs[name])
            label = "%d GPUs, %d others" % (gpus, others)
            for kind, index in (("CPU", 0), ("wall", 1)):
                cells = []
                for step, _ in STEPS:
                    b = statistics.median(times["before"][step][index])
                    a = statistics.median(times["after"][step][index])
                    cells.append("%6.2f / %6.2f ms" % (b, a))
                print("  %-22s %-8s %21s %21s %21s" % (label, kind, *cells))
                label = ""
            shutil.rmtree(root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
