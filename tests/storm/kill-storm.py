#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""accelvirt's kill storm (issue 10): any process may be killed at any
instruction, and the promise must hold all the same.

On private copies of fake hosts, with the emulated kernel behind them, it
runs well over a thousand hook, worker and CLI processes (prepares and
releases of domains that want the same devices, GPUs, USB sticks, mdevs
created and removed, scrub workers, status, reconcile, the operator's
release) and kills most of
them with SIGKILL: at a random one of their test kill points
(ACCELVIRT_TEST_KILL_AT: before and after every write the fake kernel acts
on, around every crash-safe save, before and half-way through every journal
line), or from outside after a random delay.  Releases and scrubs go on in
between; at the end a reconcile and a worker finish what is left to finish.

On the host with Resizable BARs, some kills are at the named points of a
resize (ACCELVIRT_TEST_KILL_AT=bar-grown and the others of REBAR_POINTS).

Then it checks, and prints TAP:
  - the journal's hash chain verifies and the pool parses (strictly);
  - no write-ahead record and no release marker is left over;
  - no device is free unless a scrub certificate that freed it (or the
    operator's clear) follows its last move to in-use in the journal;
  - every free device is on the driver the pool recorded, and its
    companions on theirs; no device of a managed='no' domain in use is off
    vfio-pci;
  - no host device (no profile takes it, no profile names it a companion)
    was ever written to by the emulated kernel: never unbound, rebound,
    overridden or resized, and no USB device but the pooled sticks ever had
    its "authorized" written;
  - no USB stick is authorized unless it is free or given to a domain
    (claimed, in use): dirty, scrubbing and quarantined ones read 0, and a
    free one reads 1 (it is usable again);
  - on the host whose A100s have a Resizable BAR that their scrub grows
    ("vfio-zero" with "resize": true), every BAR is at its size from before
    the storm (the kernel's "resource" line and the BAR), and no record of
    BAR sizes is left (src/vfio/av-bar-sizes.h);
  - every hold record left (state/holds, src/vfio/av-hold.h) names a live
    holder of this boot (the recorded boot id, pid, start time, name and
    user), and no holder of the world's group files lives without a
    record that names it;
  - with attach and detach (libvirt's test driver, the CLI's fake
    hot-plug): every device a running domain holds is in use by it, or
    quarantined;
  - with two profiles of one chip told apart by subsystem id (a narrow one
    with a real scrub first, a broad one that scrubs nothing), and tenants'
    firmware changing their cards' subsystem id to the broad one's while
    the cards are out of the pool's hands (the operator putting it back and
    clearing the quarantine): every scrub certificate of those cards names
    the profile they were claimed under and ran its step, and no card was
    ever reprofiled.
The counts are printed as TAP comments.

Usage: kill-storm.py (from `make check-storm`; the environment of `make
check` names the build: ACCELVIRT, ACCELVIRT_HOOK, ACCELVIRT_WORKER,
AV_TEST_SRCDIR, AV_TEST_HOSTS).  AV_STORM_KILLS (default 1000): how many
killed processes at least; AV_STORM_SEED: the random seed (printed)."""

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

AV = os.environ["ACCELVIRT"]
HOOK = os.environ["ACCELVIRT_HOOK"]
WORKER = os.environ["ACCELVIRT_WORKER"]
SRC = os.environ["AV_TEST_SRCDIR"]
HOSTS = os.environ["AV_TEST_HOSTS"]
KILLS = int(os.environ.get("AV_STORM_KILLS", "1000"))
SEED = int(os.environ.get("AV_STORM_SEED", str(int(time.time()))))

tap = []

# The A100s of the host with Resizable BARs: BAR0 of 1 MiB, offering 1, 2
# and 4 MiB; the named kill points of a resize (src/scrub/av-scrub-zero.c).
REBAR_GPUS = ["0000:17:00.0", "0000:31:00.0", "0000:4b:00.0", "0000:65:00.0", "0000:ca:00.0", "0000:e3:00.0"]
REBAR_SIZE = 1 << 20
REBAR_POINTS = ["bar-recorded", "bar-unbound", "bar-grown", "bar-zeroed", "bar-back", "bar-restored"]

# The A100s of the two-profile world: subsystem id 0x145f (the 80 GB board,
# profile test-a100-80g, the real scrub); a tenant's firmware makes it 0x1460
# (what the broad profile test-a100-40g, which scrubs nothing, takes).
FLIP_GPUS = ["0000:17:00.0", "0000:31:00.0", "0000:4b:00.0"]
FLIP_HEAVY, FLIP_LIGHT = "0x145f", "0x1460"


def check(ok, name, detail=""):
    tap.append((ok, name, detail))


def uuid(n):
    return "%08x-0000-4000-8000-%012x" % (n, n)


def hostdev(addr, managed="no"):
    dom, bus, sf = addr.split(":")
    slot, fn = sf.split(".")
    return ("<hostdev mode='subsystem' type='pci' managed='%s'><source><address domain='0x%s' bus='0x%s' "
            "slot='0x%s' function='0x%s'/></source></hostdev>" % (managed, dom, bus, slot, fn))


def mdev(u):
    return ("<hostdev mode='subsystem' type='mdev' model='vfio-pci'><source><address uuid='%s'/></source>"
            "</hostdev>" % u)


def usb(vendor, product):
    """A USB hostdev by vendor and product only: each storm stick has ids of its own."""
    return ("<hostdev mode='subsystem' type='usb' managed='no'><source><vendor id='0x%04x'/>"
            "<product id='0x%04x'/></source></hostdev>" % (vendor, product))


def add_stick(root, port, devnum, product, serial):
    """A Movidius-like stick (03e7:PRODUCT) at PORT of bus 1 of the tree
    @root, with its /dev/bus/usb node, as tests/test-hook.sh makes them."""
    rel = "devices/pci0000:00/0000:00:14.0/usb1/" + port
    d = os.path.join(root, "sys", rel)
    os.makedirs(d)
    for name, value in (("idVendor", "03e7"), ("idProduct", "%04x" % product), ("busnum", "1"),
                        ("devnum", str(devnum)), ("speed", "480"), ("authorized", "1"), ("serial", serial)):
        with open(os.path.join(d, name), "w") as f:
            f.write(value + "\n")
    os.symlink("../../../" + rel, os.path.join(root, "sys/bus/usb/devices", port))
    os.makedirs(os.path.join(root, "dev/bus/usb/001"), exist_ok=True)
    open(os.path.join(root, "dev/bus/usb/001/%03d" % devnum), "w").close()


def domain_xml(name, u, devs, placed=""):
    meta = ""
    if placed:
        meta = ("<metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'><av:placement>%s</av:placement>"
                "</av:accelerators></metadata>" % placed)
    return ("<domain type='kvm'><name>%s</name><uuid>%s</uuid><memory unit='GiB'>4</memory>"
            "<vcpu placement='static'>2</vcpu>%s<devices>%s</devices></domain>\n" % (name, u, meta, "".join(devs)))


class World:
    """A private copy of a fake host, its state dir, and its domains."""

    def __init__(self, top, host, policies, domains, name=None, source=None, rebar=False):
        self.dir = os.path.join(top, name or host)
        self.rebar = source.rebar if source else rebar
        self.root = os.path.join(self.dir, "host")
        self.state = os.path.join(self.dir, "state")
        self.policies = policies
        self.host, self.top, self.spec = host, top, domains
        if source:      # a copy of another world as it stands: tree and state
            shutil.copytree(source.root, self.root, symlinks=True)
            if os.path.exists(source.state):
                # not its holds: those processes hold the other tree's group
                # files; the copy's own sweep takes its holds
                shutil.copytree(source.state, self.state, symlinks=True,
                                ignore=shutil.ignore_patterns("holds"))
        else:
            shutil.copytree(os.path.join(HOSTS, host), self.root, symlinks=True)
            if self.rebar:
                for addr in REBAR_GPUS:
                    make_rebar(self.root, addr)
        self.domains = []
        for i, (name, u, xml) in enumerate(domains):
            path = os.path.join(self.dir, name + ".xml")
            with open(path, "w") as f:
                f.write(xml)
            self.domains.append((name, u, path))
        self.env = dict(os.environ, ACCELVIRT_ROOT=self.root, ACCELVIRT_STATE_DIR=self.state,
                        ACCELVIRT_POLICY_DIR=policies, ACCELVIRT_WORKER=WORKER,
                        ACCELVIRT_LOG_FILE=os.path.join(self.dir, "log"),
                        AV_SCRUB_LOG=os.path.join(self.dir, "scrub.log"))
        for k in ("ACCELVIRT_TEST_KILL_AT", "ACCELVIRT_TEST_STOP"):
            self.env.pop(k, None)

    def clone(self, name):
        w = World(self.top, self.host, self.policies, self.spec, name=name, source=self)
        if getattr(self, "hp", None):
            hotplug(w, source=self)
        return w

    def remove(self):
        kill_holders(self.state)
        shutil.rmtree(self.dir, ignore_errors=True)

    def cli(self, *args, env=None):
        return [AV, "--root", self.root, "--state-dir", self.state, "--policy-dir", self.policies] + list(args)


stats = {"started": 0, "killed_point": 0, "killed_outside": 0, "completed": 0, "survived_kill": 0, "swept": 0}
kinds = {}


def make_rebar(root, addr):
    """Gives the PCI function @addr of the tree @root a Resizable BAR0 of
    REBAR_SIZE bytes (a tenant's bytes in it), offering 1, 2 and 4 MiB, as
    the emulated kernel's resourceN_resize wants it."""
    d = os.path.join(root, "sys/bus/pci/devices", addr)
    with open(os.path.join(d, "resource0"), "wb") as f:
        f.write(b"\xa5" * REBAR_SIZE)
    with open(os.path.join(d, "resource"), "w") as f:
        f.write("0x%016x 0x%016x 0x%016x\n" % (0xe0000000, 0xe0000000 + REBAR_SIZE - 1, 0x14220c))
        f.write("0x%016x 0x%016x 0x%016x\n" % (0, 0, 0) * 5)
    with open(os.path.join(d, "resource0_resize"), "w") as f:
        f.write("0000000000000007\n")


def bar_problems(world):
    """What is wrong with the Resizable BARs of @world: one at another size
    than before the storm (its file or the kernel's resource line), or a
    record of BAR sizes left over."""
    bad = []
    for addr in REBAR_GPUS if world.rebar else []:
        d = os.path.join(world.root, "sys/bus/pci/devices", addr)
        size = os.path.getsize(os.path.join(d, "resource0"))
        with open(os.path.join(d, "resource")) as f:
            start, end, _ = [int(x, 16) for x in f.readline().split()]
        if size != REBAR_SIZE or end - start + 1 != REBAR_SIZE:
            bad.append("%s BAR0 is %d bytes (resource line: %d), not %d" % (addr, size, end - start + 1,
                                                                            REBAR_SIZE))
    rec = os.path.join(world.state, "bar-sizes")
    # A temporary file of a writer killed before its record was in place is
    # no record (nothing was resized yet); the next calls remove it once it
    # is a minute old.
    bad += ["record %s left" % n for n in (os.listdir(rec) if os.path.isdir(rec) else []) if ".json.tmp." not in n]
    return bad


# The running domains of libvirt's test driver that `accelvirt attach` and
# `detach` hot-plug into (test:///FILE: every domain of the file runs); the
# hot-plug itself is the CLI's fake (ACCELVIRT_TEST_HOTPLUG, tests/test-attach.sh),
# whose state is files, so it outlives each process.
HOTPLUG_DOMAINS = ["h%d" % i for i in range(1, 4)]


def hotplug(world, source=None):
    """Makes @world one whose domains run under libvirt's test driver, for
    attach and detach: its hot-plug state in world.hp (copied from @source)."""
    world.hp = os.path.join(world.dir, "hp")
    if source:
        shutil.copytree(source.hp, world.hp, symlinks=True)
    else:
        os.makedirs(world.hp, exist_ok=True)
    world.drv = os.path.join(world.dir, "drv.xml")
    with open(world.drv, "w") as f:
        f.write("<node>\n")
        for i, name in enumerate(HOTPLUG_DOMAINS, 1):
            f.write("<domain type='test'><name>%s</name><uuid>%s</uuid><memory>1048576</memory>"
                    "<vcpu placement='static'>2</vcpu><os><type>hvm</type></os><devices/></domain>\n"
                    % (name, "5eed0000-0000-4000-8000-%012x" % (0xb000 + i)))
        f.write("</node>\n")
    world.env["ACCELVIRT_TEST_HOTPLUG"] = world.hp
    return world


def attach_argv(world, name, profile, count=1):
    return world.cli("attach", name, profile, "--count", str(count), "--connect", "test://" + world.drv)


def detach_argv(world, name):
    return world.cli("detach", name, "--all", "--timeout", "5", "--connect", "test://" + world.drv)


def run(world, argv, stdin=None, mode="none"):
    """Runs one process of the storm; mode: none, point (a kill point), or
    outside (SIGKILL after a random delay)."""
    env = dict(world.env)
    if mode == "point":
        env["ACCELVIRT_TEST_KILL_AT"] = str(random.randrange(0, 14))
        if world.rebar and random.random() < 0.3:
            env["ACCELVIRT_TEST_KILL_AT"] = random.choice(REBAR_POINTS)
    stats["started"] += 1
    kind = os.path.basename(argv[0]) + (" " + argv[1] if argv[0] == HOOK else
                                        " " + argv[7] if argv[0] == AV else "")
    kinds[kind] = kinds.get(kind, 0) + 1
    with open(stdin, "rb") if stdin else open(os.devnull, "rb") as inp:
        p = subprocess.Popen(argv, stdin=inp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        if mode == "outside":
            time.sleep(random.uniform(0, 0.025))
            try:
                p.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            rc = p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise RuntimeError("%s did not end within 120 s" % argv)
    if rc == -signal.SIGKILL:
        stats["killed_point" if mode == "point" else "killed_outside"] += 1
    elif mode == "none":
        stats["completed"] += 1
    else:
        stats["survived_kill"] += 1
    return rc


def hook(world, name, path, op, sub, mode):
    return run(world, [HOOK, name, op, sub, "-"], stdin=path, mode=mode)


def killed():
    return stats["killed_point"] + stats["killed_outside"]


def comm_of(pid):
    try:
        with open("/proc/%s/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def kill_holders(state):
    """Ends the holders (accelvirt-hold, src/vfio/av-hold.c) recorded in
    @state/holds: they outlive the storm's processes by design."""
    d = os.path.join(state, "holds")
    for name in os.listdir(d) if os.path.isdir(d) else []:
        try:
            with open(os.path.join(d, name)) as f:
                pid = int(json.load(f)["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if comm_of(pid) == "accelvirt-hold":
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def boot_id_of(world):
    """This boot's id as accelvirt's holds record it for @world: its tree's
    /proc/sys/kernel/random/boot_id, else the host's."""
    for path in (os.path.join(world.root, "proc/sys/kernel/random/boot_id"), "/proc/sys/kernel/random/boot_id"):
        try:
            with open(path) as f:
                return f.read().strip().lower()
        except OSError:
            continue
    return None


def holder_facts(pid):
    """(start time, name, uids) of process @pid, or None when it is gone or
    a zombie."""
    try:
        with open("/proc/%s/stat" % pid) as f:
            stat = f.read()
        with open("/proc/%s/status" % pid) as f:
            status = f.read()
    except OSError:
        return None
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    uids = next((line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")), [])
    return int(fields[19]), comm, [int(u) for u in uids]


def holds_problems(world):
    """What is wrong with @world's holds: a record that names no live holder
    of this boot, or a holder of one of its group files that no record
    names; and how many records there are.  Only when no process of @world
    runs."""
    problems, recorded, records = [], set(), 0
    d = os.path.join(world.state, "holds")
    boot = boot_id_of(world)
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if not name.endswith(".json"):
            continue
        records += 1
        try:
            with open(os.path.join(d, name)) as f:
                rec = json.load(f)
        except (OSError, ValueError) as e:
            problems.append("%s: unreadable (%s)" % (name, e))
            continue
        facts = holder_facts(rec.get("pid"))
        if rec.get("boot_id") != boot:
            problems.append("%s: boot id %s, not this boot's %s" % (name, rec.get("boot_id"), boot))
        elif not facts:
            problems.append("%s: its holder %s is gone" % (name, rec.get("pid")))
        elif facts[0] != rec.get("start_time") or facts[1] != "accelvirt-hold" or \
                any(u != os.geteuid() for u in facts[2]):
            problems.append("%s: process %s is not its holder (%s)" % (name, rec.get("pid"), facts))
        else:
            recorded.add(int(rec["pid"]))
    root = os.path.realpath(world.root) + "/"
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or comm_of(pid) != "accelvirt-hold":
            continue
        try:
            held = os.readlink("/proc/%s/fd/3" % pid)
        except OSError:
            continue
        if held.startswith(root) and int(pid) not in recorded:
            problems.append("holder %s of %s has no record" % (pid, held[len(root) - 1:]))
    return problems, records


def our_workers(world):
    """The PIDs of workers running for @world (their environment names its
    state dir); not the holders the worker forks (named accelvirt-hold),
    which live as long as a device is dirty or quarantined."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read()
            exe = os.readlink("/proc/%s/exe" % pid)
        except OSError:
            continue
        if comm_of(pid) == "accelvirt-hold":
            continue
        if os.path.basename(exe).startswith("accelvirt-worker") and \
                ("ACCELVIRT_STATE_DIR=" + world.state).encode() + b"\0" in env:
            pids.append(int(pid))
    return pids


def quiesce(world):
    """Waits for the detached workers of @world (60 s), then finishes what is left."""
    deadline = time.time() + 60
    while our_workers(world) and time.time() < deadline:
        time.sleep(0.1)
    subprocess.run(world.cli("reconcile"), env=world.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(20):
        while our_workers(world) and time.time() < deadline + 60:
            time.sleep(0.1)
        subprocess.run([WORKER], env=world.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120)
        pool = load_pool(world)
        if not [d for d in pool["devices"] if d["state"] in ("dirty", "scrubbing")]:
            break


def load_pool(world):
    with open(os.path.join(world.state, "pool.json")) as f:
        return json.load(f)


def index_missing(world):
    """The domains that pool.json names and its domain index (state/domains,
    av-pool-index.c) lacks; none when there is no index yet.  Only when no
    process of @world runs."""
    d = os.path.join(world.state, "domains")
    if not os.path.isdir(d) or not os.path.exists(os.path.join(world.state, "pool.json")):
        return []
    pool = load_pool(world)
    names = set()
    for dev in pool["devices"]:
        names.add((dev.get("owner") or {}).get("domain_uuid"))
        names.add(dev.get("scrub_domain"))
    for rec in pool.get("intents", []) + pool.get("placements", []):
        names.add(rec.get("domain_uuid"))
    have = set(os.listdir(d))
    return sorted(n for n in names if n and n not in have)


def journal(world):
    with open(os.path.join(world.state, "journal.jsonl")) as f:
        out = []
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass    # a torn line, acknowledged by its "torn-line" entry (the verifier checks)
        return out


def usb_authorized(world, port):
    try:
        with open(os.path.join(world.root, "sys/bus/usb/devices", port, "authorized")) as f:
            return f.read().strip()
    except OSError:
        return None


def vf_shrunk(world, dev):
    """TRUE for an SR-IOV VF that the shrink of its PF removed after its scrub
    (vfs_shrink): its pool entry stays, missing, until a prepare or attach
    makes the VF again; its address is gone from sysfs."""
    return (dev["kind"] == "pci" and dev["state"] == "missing" and "/vf" in dev["identity"] and
            not os.path.exists(os.path.join(world.root, "sys/bus/pci/devices", dev["address"])))


def driver(world, addr):
    link = os.path.join(world.root, "sys/bus/pci/devices", addr, "driver")
    return os.path.basename(os.readlink(link)) if os.path.islink(link) else None


def set_subsystem(world, addr, value):
    """The card at @addr presents subsystem id @value from now on (its
    firmware changed it), written as a new file moved in place."""
    path = os.path.join(world.root, "sys/bus/pci/devices", addr, "subsystem_device")
    with open(path + ".new", "w") as f:
        f.write(value + "\n")
    os.replace(path + ".new", path)


def subsystem(world, addr):
    with open(os.path.join(world.root, "sys/bus/pci/devices", addr, "subsystem_device")) as f:
        return f.read().strip()


def firmware_flip(world):
    """A tenant's firmware changes the subsystem id of a card out of the
    pool's hands (claimed, in use, dirty, scrubbing), to the other board's."""
    try:
        pool = load_pool(world)
    except (OSError, ValueError):
        return
    out = [d["address"] for d in pool["devices"] if d["kind"] == "pci" and d["address"] in world.flip and
           d["state"] in ("claimed", "in-use", "dirty", "scrubbing")]
    if out:
        addr = random.choice(out)
        set_subsystem(world, addr, FLIP_LIGHT if subsystem(world, addr) == FLIP_HEAVY else FLIP_HEAVY)
        stats["flips"] = stats.get("flips", 0) + 1


def operator_fix(world, mode, every=False):
    """The operator checks a quarantined card of the two-profile world (or
    @every one): puts its subsystem id back, scrubs it when it holds a
    tenant's data, and clears its quarantine (each of which may be killed)."""
    try:
        pool = load_pool(world)
    except (OSError, ValueError):
        return
    q = [d for d in pool["devices"] if d["kind"] == "pci" and d["address"] in world.flip and
         d["state"] == "quarantined"]
    for d in q if every else random.sample(q, min(1, len(q))):
        operator_fix_one(world, d, mode)


def operator_fix_one(world, d, mode):
    set_subsystem(world, d["address"], FLIP_HEAVY)
    if d.get("unscrubbed"):
        run(world, world.cli("scrub", d["address"]), mode=mode)
    run(world, world.cli("quarantine", "clear", d["address"]), mode=mode)


def storm(worlds):
    while killed() < KILLS:
        w = random.choice(worlds)
        mode = random.choices(["point", "outside", "none"], [45, 35, 20])[0]
        if getattr(w, "flip", None) and random.random() < 0.15:
            if random.random() < 0.6:
                firmware_flip(w)
            else:
                operator_fix(w, mode)
            continue
        r = random.random()
        if getattr(w, "hp", None):
            name = random.choice(HOTPLUG_DOMAINS)
            if r < 0.40:
                run(w, attach_argv(w, name, w.attach_profile, random.randint(1, w.attach_max)), mode=mode)
            elif r < 0.75:
                run(w, detach_argv(w, name), mode=mode)
            elif r < 0.87:
                run(w, [WORKER], mode=mode)
            elif r < 0.95:
                run(w, w.cli("reconcile"), mode=mode)
            else:
                run(w, w.cli("status", "--json"), mode=mode)
            continue
        if r < 0.45:
            name, _, path = random.choice(w.domains)
            hook(w, name, path, "prepare", "begin", mode)
        elif r < 0.80:
            name, _, path = random.choice(w.domains)
            hook(w, name, path, "release", "end", mode)
        elif r < 0.88:
            run(w, [WORKER], mode=mode)
        elif r < 0.93:
            run(w, w.cli("status", "--json"), mode=mode)
        elif r < 0.97:
            run(w, w.cli("reconcile"), mode=mode)
        else:
            name, _, _ = random.choice(w.domains)
            run(w, w.cli("release", "--force", name), mode=mode)


def run_at(world, argv, stdin, point):
    """Runs @argv killing it at its kill point @point; TRUE when it was killed."""
    env = dict(world.env, ACCELVIRT_TEST_KILL_AT=str(point))
    stats["started"] += 1
    with open(stdin, "rb") if stdin else open(os.devnull, "rb") as inp:
        rc = subprocess.run(argv, stdin=inp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            timeout=120).returncode
    if rc == -signal.SIGKILL:
        stats["killed_point"] += 1
        stats["swept"] += 1
        return True
    stats["completed"] += 1
    return False


def sweep(template, label, argv_of, pooled, companions, then):
    """Kills the process @argv_of(world) at each of its kill points in
    turn, each time on a fresh copy of @template, until it runs to its end;
    after each kill a reconcile without a worker must leave the holds right
    (holds_problems()), the next accelvirt calls put things right (reconcile,
    the worker), the invariants must hold, and @then(world) (the domain's
    life carried on to its end, nobody killed) must leave every device
    free on its drivers.  Records one TAP line for all the points."""
    problems = []
    point = 0
    hold_records = 0
    while point < 200:
        w = template.clone("%s-at-%d" % (label.replace(" ", "-"), point))
        argv, stdin = argv_of(w)
        if not run_at(w, argv, stdin, point):
            w.remove()
            break
        deadline = time.time() + 60
        while our_workers(w) and time.time() < deadline:
            time.sleep(0.1)
        missing = index_missing(w)
        if missing:
            problems.append("killed at point %d: the domain index lacks %s, which pool.json names"
                            % (point, " ".join(missing)))
        # Holds as the kill left them, once a reconcile (no worker) swept:
        # every record a live holder, every holder recorded.
        subprocess.run(w.cli("reconcile"), env=dict(w.env, ACCELVIRT_WORKER="/bin/true"),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        hold_problems, records = holds_problems(w)
        hold_records += records
        problems += ["killed at point %d, then a reconcile: %s" % (point, h) for h in hold_problems]
        quiesce(w)
        before = len(tap)
        verify(w, pooled, companions, quiet=True)
        for ok, name, detail in tap[before:]:
            if not ok:
                problems.append("killed at point %d: %s %s" % (point, name, detail))
        del tap[before:]
        then(w)
        quiesce(w)
        p = load_pool(w)
        bad = ["%s %s%s" % (d["identity"], d["state"], " (%s)" % d["reason"] if d.get("reason") else "")
               for d in p["devices"] if d["state"] != "free" and not vf_shrunk(w, d)]
        bad += ["%s on %s" % (d["address"], driver(w, d["address"])) for d in p["devices"]
                if d["kind"] == "pci" and not vf_shrunk(w, d) and driver(w, d["address"]) != d["original_driver"]]
        bad += ["companion %s on %s" % (a, driver(w, a)) for a, want in companions.items() if driver(w, a) != want]
        bad += bar_problems(w)
        if bad:
            problems.append("killed at point %d, then carried on: %s" % (point, "; ".join(bad)))
        w.remove()
        point += 1
    check(not problems and point > 0,
          "%s: killed at each of its %d kill points in turn, the next calls put it right: the invariants hold "
          "(%d hold records checked), and the domain's life carried on to its end leaves every device free on its "
          "drivers" % (label, point, hold_records), "\n".join(problems))
    return point


def verify(world, pooled_ok, companions_ok, quiet=False):
    label = os.path.basename(world.dir)
    r = subprocess.run(world.cli("journal", "verify"), env=world.env, capture_output=True, text=True)
    check(r.returncode == 0, "%s: the journal's hash chain verifies" % label, r.stdout + r.stderr)
    r = subprocess.run(world.cli("status", "--no-sync", "--json"), env=world.env, capture_output=True, text=True)
    check(r.returncode == 0, "%s: the pool parses, every device in a state of the lifecycle" % label, r.stderr)
    pool = load_pool(world)
    check("intents" not in pool, "%s: no write-ahead record of a prepare is left" % label,
          json.dumps(pool.get("intents")))
    missing = index_missing(world)
    check(not missing, "%s: the domain index names every domain pool.json names" % label, " ".join(missing))
    markers = os.path.join(world.state, "release-pending")
    left = [n for n in os.listdir(markers) if n.endswith(".json")] if os.path.isdir(markers) else []
    check(not left, "%s: no release marker is left" % label, " ".join(left))

    # Free only after a scrub that freed it, since its last use.
    entries = journal(world)
    bad = []
    for dev in pool["devices"]:
        if dev["state"] != "free":
            continue
        last_use = max([e["seq"] for e in entries if e.get("identity") == dev["identity"] and
                        e.get("event") == "transition" and e.get("to") == "in-use"], default=0)
        if not last_use:
            continue
        # Freed by a scrub or the operator; or never used: the prepare that
        # journalled the move died before saving it, and its rollback says so.
        freed = [e for e in entries if e["seq"] > last_use and
                 ((e.get("identity") == dev["identity"] and
                   ((e.get("event") == "scrub-certificate" and e.get("result") == "free") or
                    e.get("event") == "cleared")) or
                  (e.get("event") == "rolled-back" and dev["identity"] in e.get("claims", [])))]
        if not freed:
            bad.append(dev["identity"])
    check(not bad, "%s: no device is free unless a scrub certificate (or the operator's clear) follows its "
                   "last use" % label, " ".join(bad))

    # Drivers: free devices and their companions on what the pool recorded.
    bad = []
    for dev in pool["devices"]:
        if dev["kind"] != "pci":
            continue
        now = driver(world, dev["address"])
        if dev["state"] == "free" and now != dev["original_driver"]:
            bad.append("%s is free on %s, recorded %s" % (dev["address"], now, dev["original_driver"]))
        if dev["state"] == "free" and dev.get("companions"):
            bad.append("%s is free with companions still recorded" % dev["address"])
        for c in dev.get("companions", []):
            if dev["state"] in ("in-use", "dirty", "scrubbing", "quarantined") and \
                    driver(world, c["address"]) not in ("vfio-pci", c["original_driver"]):
                bad.append("companion %s on %s" % (c["address"], driver(world, c["address"])))
    for addr, want in companions_ok.items():
        owner = [d for d in pool["devices"] if d["kind"] == "pci" and d["address"] == addr[:-1] + "0"]
        if owner and owner[0]["state"] == "free" and driver(world, addr) != want:
            bad.append("companion %s of a free card is on %s, not %s" % (addr, driver(world, addr), want))
    check(not bad, "%s: every free device and its companions are on the drivers the pool recorded" % label,
          "; ".join(bad))

    # A QAT VF (8086:4941) a domain has in use is on qat_vfio_pci, the vfio-pci variant
    # sriov-fpga-qat's kernel offers it: never on a host driver, and on plain vfio-pci
    # only where it already was before its tenant (a vfio driver is never changed under
    # a process that may hold the device).
    bad = []
    for dev in pool["devices"]:
        # A VF's identity is its PF's (8086:4940) with /vfN.
        if dev["kind"] != "pci" or dev["state"] != "in-use" or \
                not (dev["identity"].startswith("pci:8086:4940:") and "/vf" in dev["identity"]):
            continue
        now = driver(world, dev["address"])
        if now is not None and now != "qat_vfio_pci" and \
                not (now == "vfio-pci" and dev.get("original_driver") == "vfio-pci"):
            bad.append("%s is %s on %s" % (dev["address"], dev["state"], now))
    check(not bad, "%s: every QAT VF in use is on its variant qat_vfio_pci" % label, "; ".join(bad))

    # A VF with NVIDIA's vGPU interface: free, no vGPU left on it (destroyed by
    # its scrub, or by the undo of a prepare that died); in use, its vGPU is
    # made; always on NVIDIA's driver, never rebound.
    bad = []
    for dev in pool["devices"]:
        if dev["kind"] != "pci" or not dev.get("address"):
            continue
        cur = os.path.join(world.root, "sys/bus/pci/devices", dev["address"], "nvidia/current_vgpu_type")
        if not os.path.exists(cur):
            continue
        with open(cur) as f:
            t = f.read().strip()
        if dev["state"] == "free" and t != "0":
            bad.append("%s is free with vGPU type %s" % (dev["address"], t))
        if dev["state"] == "in-use" and t == "0":
            bad.append("%s is in use with no vGPU" % dev["address"])
        if driver(world, dev["address"]) != "nvidia":
            bad.append("%s is on %s" % (dev["address"], driver(world, dev["address"])))
    check(not bad, "%s: every vGPU VF free has no vGPU, every one in use has its vGPU, all on nvidia" % label,
          "; ".join(bad))

    # What a running domain holds (the fake hot-plug's live hostdevs) is in use by it,
    # or quarantined: never free, claimed by nobody, dirty or being scrubbed under it.
    bad = []
    for u in sorted(os.listdir(world.hp)) if getattr(world, "hp", None) else []:
        d = os.path.join(world.hp, u)
        for n in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if not n.endswith(".live"):
                continue
            with open(os.path.join(d, n)) as f:
                m = re.search(r"domain='0x([0-9a-fA-F]+)' bus='0x([0-9a-fA-F]+)' slot='0x([0-9a-fA-F]+)' "
                              r"function='0x([0-9a-fA-F]+)'", f.read())
            if not m:
                continue
            addr = "%04x:%02x:%02x.%x" % tuple(int(x, 16) for x in m.groups())
            for dev in [x for x in pool["devices"] if x["kind"] == "pci" and x["address"] == addr]:
                owner = (dev.get("owner") or {}).get("domain_uuid")
                if not ((dev["state"] == "in-use" and owner == u) or dev["state"] == "quarantined"):
                    bad.append("%s is in domain %s (%s) but %s by %s" % (addr, u, n, dev["state"], owner))
    check(not bad, "%s: every device a running domain holds is in use by it in the pool, or quarantined" % label,
          "; ".join(bad))

    # USB sticks: held (authorized 0) unless free or given to a domain.
    bad = []
    for dev in pool["devices"]:
        if dev["kind"] != "usb":
            continue
        now = usb_authorized(world, dev["address"])
        if dev["state"] in ("dirty", "scrubbing", "quarantined") and now != "0":
            bad.append("%s is %s with authorized %s" % (dev["address"], dev["state"], now))
        if dev["state"] == "free" and now != "1":
            bad.append("%s is free with authorized %s" % (dev["address"], now))
    check(not bad, "%s: no USB stick is authorized unless free or given to a domain, and every free one is" % label,
          "; ".join(bad))

    # Host devices: never written to.
    writes = os.path.join(world.root, "sys/.accelvirt-fake-kernel.writes")
    touched = set()
    authorized = set()
    if os.path.exists(writes):
        with open(writes) as f:
            for line in f:
                path, _, value = line.rstrip("\n").partition(" ")
                parts = path.split("/")
                if "devices" in parts and (parts[-1] == "driver_override" or
                                           (parts[-1].startswith("resource") and parts[-1].endswith("_resize"))):
                    touched.add(parts[-2])
                elif parts[-1] in ("bind", "unbind", "drivers_probe"):
                    touched.add(value)
                elif parts[-1] == "authorized":
                    authorized.add(parts[-2])
    allowed = set(pooled_ok) | set(companions_ok)
    check(touched <= allowed,
          "%s: the kernel was asked to bind, unbind or resize only pooled devices and their named companions, "
          "never a host device (%d devices written to)" % (label, len(touched)), " ".join(sorted(touched - allowed)))
    if world.rebar:
        bad = bar_problems(world)
        check(not bad, "%s: every Resizable BAR is at its size from before the storm, and no record of BAR sizes "
                       "is left" % label, "; ".join(bad))

    # Two profiles of one chip: a card is scrubbed by the profile it was
    # claimed under, whatever its firmware presents since.
    if getattr(world, "flip", None):
        certs = [e for e in entries if e.get("event") == "scrub-certificate" and e.get("address") in world.flip]
        bad = ["%s #%d: profile %s, steps %s" % (e["address"], e["seq"], e.get("profile"),
                                                 [x.get("method") for x in e.get("steps") or []])
               for e in certs if e.get("profile") != "test-a100-80g" or not e.get("steps") or
               (e.get("result") == "free" and [x.get("method") for x in e["steps"]] != ["command"])]
        check(not bad and certs, "%s: every scrub certificate of the cards whose firmware changed their subsystem id "
                                 "(%d flips) names the profile they were claimed under and its step (%d certificates)"
              % (label, stats.get("flips", 0), len(certs)), "; ".join(bad))
        bad = ["#%d %s %s -> %s" % (e["seq"], e.get("address"), e.get("old_profile"), e.get("profile"))
               for e in entries if e.get("event") == "reprofiled"]
        check(not bad, "%s: no card was reprofiled by what its firmware presents" % label, "; ".join(bad))

    # Holds: every record a live holder of this boot, every holder recorded.
    problems, records = holds_problems(world)
    check(not problems, "%s: every hold record names a live holder of this boot, and every holder of its group "
                        "files has a record (%d records)" % (label, records), "; ".join(problems))
    sticks = {d["address"] for d in pool["devices"] if d["kind"] == "usb"}
    check(authorized <= sticks,
          "%s: 'authorized' was written only for pooled USB sticks, never a host USB device (%d written to)"
          % (label, len(authorized)), " ".join(sorted(authorized - sticks)))
    return touched


def main():
    random.seed(SEED)
    top = tempfile.mkdtemp(prefix="accelvirt-storm.")
    try:
        pol = os.path.join(top, "policies")
        os.mkdir(pol, 0o755)
        scrub = os.path.join(SRC, "data/hook-scrub.sh")
        for n in sorted(os.listdir(os.path.join(SRC, "data/hook-policies"))):
            with open(os.path.join(SRC, "data/hook-policies", n)) as f:
                text = f.read().replace("@SCRUB@", scrub)
            with open(os.path.join(pol, n), "w") as f:
                f.write(text)
            os.chmod(os.path.join(pol, n), 0o644)
        with open(os.path.join(pol, "30-usb.json"), "w") as f:
            json.dump({"profiles": [{"name": "storm-stick", "match": {"vendor": "0x03e7",
                                                                      "device": ["0x2485", "0x2486"]},
                                     "attach": "usb", "numa": "none",
                                     "scrub": [{"method": "usb-reset"},
                                               {"method": "usb-reauthorize", "timeout": 5}]}]}, f)
        os.chmod(os.path.join(pol, "30-usb.json"), 0o644)

        gpus = ["0000:17:00.0", "0000:31:00.0", "0000:4b:00.0", "0000:65:00.0", "0000:98:00.0", "0000:b1:00.0",
                "0000:ca:00.0", "0000:e3:00.0"]
        doms = []
        n = 0
        for i, g in enumerate(gpus):
            for k in range(2):      # two domains want each GPU
                n += 1
                doms.append(("g%d" % n, uuid(n), domain_xml("g%d" % n, uuid(n),
                                                            [hostdev(g, "yes" if (i + k) % 5 == 0 else "no")])))
        n += 1   # the A6000's audio function alone: its group goes with it
        doms.append(("audio%d" % n, uuid(n), domain_xml("audio%d" % n, uuid(n), [hostdev("0000:98:00.1")])))
        n += 1   # two cards at once
        doms.append(("pair%d" % n, uuid(n), domain_xml("pair%d" % n, uuid(n), [hostdev("0000:17:00.0"),
                                                                                hostdev("0000:ca:00.0")])))
        n += 1   # the host's NIC: accelvirt never touches it
        doms.append(("nic%d" % n, uuid(n), domain_xml("nic%d" % n, uuid(n), [hostdev("0000:02:00.0")])))
        for product in (0x2485, 0x2486):   # two domains want each USB stick
            for k in range(2):
                n += 1
                doms.append(("u%d" % n, uuid(n), domain_xml("u%d" % n, uuid(n), [usb(0x03e7, product)])))
        gpu_world = World(top, "two-socket-8gpu", pol, doms)
        # the tree's stick 1-1.2 (03e7:2485) gets its node, and a second one joins it
        os.makedirs(os.path.join(gpu_world.root, "dev/bus/usb/001"), exist_ok=True)
        open(os.path.join(gpu_world.root, "dev/bus/usb/001/003"), "w").close()
        add_stick(gpu_world.root, "1-3", 6, 0x2486, "S2")

        mdoms = []
        mdevs = ["6f2a0b1c-9d8e-4f7a-8b6c-5d4e3f2a1b%02x" % i for i in range(4)]
        for i, m in enumerate(mdevs):
            for k in range(2):
                n += 1
                mdoms.append(("v%d" % n, uuid(n), domain_xml("v%d" % n, uuid(n), [mdev(m)],
                                                             "<av:mdev profile='test-vgpu' uuid='%s'/>" % m)))
        vgpu_world = World(top, "vgpu-mdev", pol, mdoms)

        # The A100s with a Resizable BAR that their scrub grows for the
        # scrub and puts back: policies of their own.
        pol_rebar = os.path.join(top, "policies-rebar")
        os.mkdir(pol_rebar, 0o755)
        for fname in sorted(os.listdir(pol)):
            with open(os.path.join(pol, fname)) as f:
                spec = json.load(f)
            for prof in spec["profiles"]:
                if prof["name"] == "test-a100":
                    prof["scrub"] = [{"method": "vfio-zero", "resize": True}]
            with open(os.path.join(pol_rebar, fname), "w") as f:
                json.dump(spec, f)
            os.chmod(os.path.join(pol_rebar, fname), 0o644)
        rdoms = []
        for i, g in enumerate(REBAR_GPUS[:2]):
            for k in range(2):
                n += 1
                rdoms.append(("r%d" % n, uuid(n), domain_xml("r%d" % n, uuid(n), [hostdev(g, "yes" if k else "no")])))
        rebar_world = World(top, "two-socket-8gpu", pol_rebar, rdoms, name="rebar", rebar=True)
        # Hot-plug: A6000s (each with its audio function, a companion) attached to and
        # detached from running domains of libvirt's test driver; QAT VFs made for an
        # attach (the PF grown) and the PF shrunk back once they are scrubbed and free.
        hot_world = hotplug(World(top, "two-socket-8gpu", pol, [], name="hotplug"))
        hot_world.attach_profile, hot_world.attach_max = "test-a6000", 2
        qpol = os.path.join(top, "policies-sriov")
        os.mkdir(qpol, 0o755)
        for fname in os.listdir(pol):
            with open(os.path.join(pol, fname)) as f:
                d = json.load(f)
            for prof in d.get("profiles", []):
                if prof["name"] == "test-qat-vf":
                    prof["vfs"] = "on-demand"
                    prof["vfs_shrink"] = True
            with open(os.path.join(qpol, fname), "w") as f:
                json.dump(d, f)
            os.chmod(os.path.join(qpol, fname), 0o644)
        sriov_world = hotplug(World(top, "sriov-fpga-qat", qpol, [], name="sriov"))
        for i in range(1, 5):       # the PF's 4 VFs idle (no driver): VFs to take, or to shrink
            os.unlink(os.path.join(sriov_world.root, "sys/bus/pci/devices/0000:6b:00.%d/driver" % i))
        sriov_world.attach_profile, sriov_world.attach_max = "test-qat-vf", 4
        # Two profiles of one chip told apart by subsystem id, the narrow one
        # (the 80 GB board, the real scrub) before the broad one (nothing).
        ppol = os.path.join(top, "policies-twoprof")
        os.mkdir(ppol, 0o755)
        for fname in sorted(os.listdir(pol)):
            with open(os.path.join(pol, fname)) as f:
                spec = json.load(f)
            profiles = []
            for prof in spec["profiles"]:
                if prof["name"] == "test-a100":
                    profiles.append(dict(prof, name="test-a100-80g",
                                         match=dict(prof["match"], subsystem_device=FLIP_HEAVY)))
                    prof = dict(prof, name="test-a100-40g", scrub=[{"method": "none"}])
                profiles.append(prof)
            spec["profiles"] = profiles
            with open(os.path.join(ppol, fname), "w") as f:
                json.dump(spec, f)
            os.chmod(os.path.join(ppol, fname), 0o644)
        pdoms = []
        for g in FLIP_GPUS:
            for k in range(2):
                n += 1
                pdoms.append(("p%d" % n, uuid(n), domain_xml("p%d" % n, uuid(n), [hostdev(g, "yes" if k else "no")])))
        prof_world = World(top, "two-socket-8gpu", ppol, pdoms, name="twoprof")
        prof_world.flip = FLIP_GPUS
        # NVIDIA vGPU on VFs: two L40S, one type each, two domains per VF.
        gpol = os.path.join(top, "policies-vgpu-sriov")
        os.mkdir(gpol, 0o755)
        with open(os.path.join(gpol, "10-l40s.json"), "w") as f:
            json.dump({"profiles": [
                {"name": "storm-l40s-2q", "match": {"vendor": "0x10de", "pf": "0000:17:00.0"}, "attach": "sriov-vf",
                 "vgpu_type": "L40S-2Q", "numa": "none",
                 "scrub": [{"method": "reset"}, {"method": "command", "argv": [scrub], "timeout": 5}]},
                {"name": "storm-l40s-4q", "match": {"vendor": "0x10de", "pf": "0000:98:00.0"}, "attach": "sriov-vf",
                 "vgpu_type": "NVIDIA L40S-4Q", "numa": "none", "scrub": [{"method": "reset"}]}]}, f)
        os.chmod(os.path.join(gpol, "10-l40s.json"), 0o644)
        vgpu_vfs = ["0000:17:00.%d" % i for i in range(1, 5)] + ["0000:98:00.%d" % i for i in range(1, 5)]
        gdoms = []
        for vf in vgpu_vfs:
            for k in range(2):
                n += 1
                gdoms.append(("s%d" % n, uuid(n), domain_xml("s%d" % n, uuid(n), [hostdev(vf)])))
        vsriov_world = World(top, "vgpu-sriov", gpol, gdoms, name="vgpu-sriov")
        vfs = ["0000:6b:00.%d" % i for i in range(1, 8)] + ["0000:6b:01.%d" % i for i in range(8)]
        hot_gpus = ["0000:98:00.0", "0000:b1:00.0"]

        print("# kill storm: seed %d, at least %d killed processes" % (SEED, KILLS))
        sys.stdout.flush()
        t0 = time.time()
        companions = {"0000:98:00.1": "snd_hda_intel", "0000:b1:00.1": "snd_hda_intel"}

        # Every kill point of one prepare, one release and one scrub, in turn.
        a6000 = next(d for d in gpu_world.domains if d[2].endswith("/g9.xml"))    # 0000:98:00.0, managed='no'
        vg = vgpu_world.domains[0]
        def release_of(name):
            return lambda w: hook(w, name, w.dir + "/" + name + ".xml", "release", "end", "none")
        release_a6000, release_vg = release_of(a6000[0]), release_of(vg[0])
        sweep(gpu_world, "an A6000's prepare (card and audio bound)",
              lambda w: ([HOOK, a6000[0], "prepare", "begin", "-"], w.dir + "/" + a6000[0] + ".xml"),
              gpus, companions,
              lambda w: (hook(w, a6000[0], w.dir + "/" + a6000[0] + ".xml", "prepare", "begin", "none"),
                         release_a6000(w)))
        prepared = gpu_world.clone("prepared")
        hook(prepared, a6000[0], prepared.dir + "/" + a6000[0] + ".xml", "prepare", "begin", "none")
        sweep(prepared, "its release", lambda w: ([HOOK, a6000[0], "release", "end", "-"],
                                                  w.dir + "/" + a6000[0] + ".xml"),
              gpus, companions, release_a6000)
        released = prepared.clone("released")
        env = dict(released.env, ACCELVIRT_WORKER="/bin/true")     # the worker, run by hand below
        subprocess.run([HOOK, a6000[0], "release", "end", "-"], stdin=open(released.dir + "/" + a6000[0] + ".xml"),
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sweep(released, "its scrub by the worker", lambda w: ([WORKER], None), gpus, companions, release_a6000)
        stick = next(d for d in gpu_world.domains if d[0].startswith("u"))    # 1-1.2
        release_stick = release_of(stick[0])
        sprepared = gpu_world.clone("stick-prepared")
        hook(sprepared, stick[0], sprepared.dir + "/" + stick[0] + ".xml", "prepare", "begin", "none")
        sweep(sprepared, "a USB stick's release", lambda w: ([HOOK, stick[0], "release", "end", "-"],
                                                           w.dir + "/" + stick[0] + ".xml"),
              gpus, companions, release_stick)
        sreleased = sprepared.clone("stick-released")
        env = dict(sreleased.env, ACCELVIRT_WORKER="/bin/true")
        subprocess.run([HOOK, stick[0], "release", "end", "-"], stdin=open(sreleased.dir + "/" + stick[0] + ".xml"),
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sweep(sreleased, "its scrub by the worker (usb-reset, usb-reauthorize)", lambda w: ([WORKER], None), gpus,
              companions, release_stick)
        for w in (sprepared, sreleased):
            w.remove()
        sweep(vgpu_world, "an mdev's prepare (created)",
              lambda w: ([HOOK, vg[0], "prepare", "begin", "-"], w.dir + "/" + vg[0] + ".xml"),
              ["0000:17:00.0", "0000:98:00.0"], {},
              lambda w: (hook(w, vg[0], w.dir + "/" + vg[0] + ".xml", "prepare", "begin", "none"), release_vg(w)))
        for w in (prepared, released):
            w.remove()
        # A scrub that grows a Resizable BAR, killed at each of its points
        # (the record, the unbind, the resize, the zeroing, the way back).
        r0 = rebar_world.domains[0]
        rprepared = rebar_world.clone("rebar-prepared")
        hook(rprepared, r0[0], rprepared.dir + "/" + r0[0] + ".xml", "prepare", "begin", "none")
        env = dict(rprepared.env, ACCELVIRT_WORKER="/bin/true")
        subprocess.run([HOOK, r0[0], "release", "end", "-"], stdin=open(rprepared.dir + "/" + r0[0] + ".xml"),
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sweep(rprepared, "a Resizable BAR's scrub by the worker", lambda w: ([WORKER], None), REBAR_GPUS, {},
              release_of(r0[0]))
        rprepared.remove()

        def detach_all(w):
            for name in HOTPLUG_DOMAINS:
                run(w, detach_argv(w, name))
            quiesce(w)
        sweep(hot_world, "an A6000's attach (card and audio bound, hot-plugged)",
              lambda w: (attach_argv(w, "h1", "test-a6000"), None), hot_gpus, companions,
              lambda w: (run(w, attach_argv(w, "h1", "test-a6000")), detach_all(w)))
        attached = hot_world.clone("attached")
        run(attached, attach_argv(attached, "h1", "test-a6000"))
        sweep(attached, "its detach", lambda w: (detach_argv(w, "h1"), None), hot_gpus, companions, detach_all)
        attached.remove()
        sweep(sriov_world, "an attach of 6 QAT VFs (the PF grown from 4)",
              lambda w: (attach_argv(w, "h1", "test-qat-vf", 6), None), vfs, {},
              lambda w: (run(w, attach_argv(w, "h1", "test-qat-vf", 6)), detach_all(w)))

        # A vGPU VF's prepare (its vGPU made), release and scrub (destroyed), killed at each point.
        sv = vsriov_world.domains[0]
        release_sv = release_of(sv[0])
        sweep(vsriov_world, "a vGPU VF's prepare (its vGPU made)",
              lambda w: ([HOOK, sv[0], "prepare", "begin", "-"], w.dir + "/" + sv[0] + ".xml"), vgpu_vfs, {},
              lambda w: (hook(w, sv[0], w.dir + "/" + sv[0] + ".xml", "prepare", "begin", "none"), release_sv(w)))
        gprepared = vsriov_world.clone("vgpu-prepared")
        hook(gprepared, sv[0], gprepared.dir + "/" + sv[0] + ".xml", "prepare", "begin", "none")
        genv = dict(gprepared.env, ACCELVIRT_WORKER="/bin/true")
        subprocess.run([HOOK, sv[0], "release", "end", "-"], stdin=open(gprepared.dir + "/" + sv[0] + ".xml"),
                       env=genv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sweep(gprepared, "its scrub by the worker (its vGPU destroyed last)", lambda w: ([WORKER], None), vgpu_vfs,
              {}, release_sv)
        gprepared.remove()

        storm([gpu_world, vgpu_world, rebar_world, hot_world, sriov_world, prof_world, vsriov_world])
        for w in (gpu_world, vgpu_world, rebar_world, hot_world, sriov_world, prof_world, vsriov_world):
            quiesce(w)
        seconds = time.time() - t0

        check(killed() >= KILLS, "%d hook, worker and CLI processes were killed with SIGKILL (at least %d)"
              % (killed(), KILLS))
        touched = verify(gpu_world, gpus, companions)
        check(len(touched) >= 3, "two-socket-8gpu: the storm bound and unbound GPUs and companions (%d devices)"
              % len(touched))
        check(driver(gpu_world, "0000:02:00.0") == "i40e" and driver(gpu_world, "0000:02:00.1") == "i40e",
              "two-socket-8gpu: the host's NIC is on i40e, as it was")
        klog = os.path.join(gpu_world.root, "sys/.accelvirt-fake-kernel.log")
        with open(klog) if os.path.exists(klog) else open(os.devnull) as f:
            holds = sum(1 for line in f if line.startswith("USB_DEAUTHORIZE "))
        check(holds >= 1, "two-socket-8gpu: the storm held released USB sticks (%d de-authorizations)" % holds)
        verify(vgpu_world, ["0000:17:00.0", "0000:98:00.0"], {})
        verify(rebar_world, REBAR_GPUS, {})
        verify(hot_world, hot_gpus, companions)
        verify(sriov_world, vfs, {})
        verify(prof_world, gpus, companions)
        verify(vsriov_world, vgpu_vfs, {})
        mdev_dir = os.path.join(vgpu_world.root, "sys/bus/mdev/devices")
        vp = load_pool(vgpu_world)
        held = {d["identity"][5:] for d in vp["devices"] if d["kind"] == "mdev"}
        leaked = [m for m in mdevs if os.path.exists(os.path.join(mdev_dir, m)) and m not in held]
        check(not leaked, "vgpu-mdev: no mdev accelvirt created is left on the host without a pool entry",
              " ".join(leaked))

        # Then every domain is released for good, nobody killed: every device
        # comes back free, scrubbed, on the drivers it had.
        for w in (gpu_world, vgpu_world, rebar_world, prof_world, vsriov_world):
            for name, _, path in w.domains:
                hook(w, name, path, "release", "end", "none")
            quiesce(w)
        for w in (hot_world, sriov_world):
            detach_all(w)
        # The operator checks every card the firmware flips quarantined.
        for addr in FLIP_GPUS:
            set_subsystem(prof_world, addr, FLIP_HEAVY)
        operator_fix(prof_world, "none", every=True)
        quiesce(prof_world)
        for w in (gpu_world, vgpu_world, rebar_world, hot_world, sriov_world, prof_world, vsriov_world):
            label = os.path.basename(w.dir)
            p = load_pool(w)
            bad = ["%s %s" % (d["identity"], d["state"]) for d in p["devices"]
                   if d["state"] != "free" and not vf_shrunk(w, d)]
            check(not bad, "%s: once every domain is released, every device is scrubbed and free (a VF its PF "
                           "shrank away: missing until it is made again)" % label,
                  " ".join(bad))
            bad = ["%s on %s, recorded %s" % (d["address"], driver(w, d["address"]), d["original_driver"])
                   for d in p["devices"] if d["kind"] == "pci" and not vf_shrunk(w, d) and
                   driver(w, d["address"]) != d["original_driver"]]
            bad += ["companion %s on %s" % (a, driver(w, a))
                    for a, want in (companions if w in (gpu_world, hot_world) else {}).items() if driver(w, a) != want]
            check(not bad, "%s: ... and every one on the driver it had before the storm" % label, "; ".join(bad))
            if w.rebar:
                bad = bar_problems(w)
                check(not bad, "%s: ... and every Resizable BAR at its size from before the storm, no record of "
                               "BAR sizes left" % label, "; ".join(bad))
        left = [m for m in mdevs if os.path.exists(os.path.join(mdev_dir, m))]
        check(not left, "vgpu-mdev: ... and no mdev accelvirt created is left", " ".join(left))

        numvfs = open(os.path.join(sriov_world.root, "sys/bus/pci/devices/0000:6b:00.0/sriov_numvfs")).read().strip()
        check(numvfs in ("0", "4"), "sriov: once every VF is scrubbed and free, the PF is shrunk back (%s VFs)" % numvfs)
        print("# %d processes in %.0f s: %d killed at a kill point (%d of them one point after another), %d "
              "killed from outside, %d ran to their end, %d outlived their kill"
              % (stats["started"], seconds, stats["killed_point"], stats["swept"], stats["killed_outside"],
                 stats["completed"], stats["survived_kill"]))
        print("# by program: " + ", ".join("%s %d" % (k, v) for k, v in sorted(kinds.items())))
        states = {}
        for w in (gpu_world, vgpu_world, rebar_world, hot_world, sriov_world, prof_world, vsriov_world):
            for d in load_pool(w)["devices"]:
                states[d["state"]] = states.get(d["state"], 0) + 1
        print("# final states: " + ", ".join("%s %d" % kv for kv in sorted(states.items())))
        for i, (ok, name, detail) in enumerate(tap, 1):
            print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
            if not ok and detail:
                for line in str(detail).splitlines():
                    print("# " + line)
        print("1..%d" % len(tap))
        return 0 if all(ok for ok, _, _ in tap) else 1
    finally:
        for state, _, _ in os.walk(top):
            if os.path.basename(state) == "state":
                kill_holders(state)
        if os.environ.get("AV_STORM_KEEP") != "1":
            shutil.rmtree(top, ignore_errors=True)
        else:
            print("# kept %s" % top)


if __name__ == "__main__":
    sys.exit(main())
