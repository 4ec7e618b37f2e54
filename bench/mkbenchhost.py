#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Generate a fake host for bench/bench-hook: GPUS managed A100s and OTHERS
other PCI functions.

    mkbenchhost.py --mkhosts PATH/TO/tests/data/mkhosts.py --out DIR --gpus N --others M

writes DIR/sys/... in the kernel's layout, with the tree writer of the
tests' fake hosts (tests/data/mkhosts.py).  Two NUMA nodes of 32 CPUs.
Each A100 (10de:20f1, its own DSN, slot and IOMMU group, on nvidia) sits
behind a root port of a root complex of its own, as on a real server; the
GPUs alternate between the nodes.  The other functions are every function
that is not a GPU: the GPUs' host bridges and root ports, then SR-IOV NIC
cards (an E810 PF on ice with iavf VFs, 16 functions a card, each VF in its
own IOMMU group: what makes a host of thousands of functions) until there
are M of them.  The same arguments always give the same tree.
"""

import argparse
import importlib.util
import os
import sys
import uuid

VFS_PER_CARD = 15
GPUS_PER_DOMAIN = 60


def load_mkhosts(path):
    spec = importlib.util.spec_from_file_location("mkhosts", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def host(mk, gpus, others):
    devs = []
    node_of = {}
    count = 0                                        # functions that are not GPUs
    for i in range(gpus):
        dom, rb = i // GPUS_PER_DOMAIN, (i % GPUS_PER_DOMAIN) * 4
        rc = "pci%04x:%02x" % (dom, rb)
        port = "%04x:%02x:02.0" % (dom, rb)
        devs.append(mk.host_bridge(rc))
        devs.append(mk.root_port(port, rc))
        devs.append(mk.a100("%04x:%02x:00.0" % (dom, rb + 1), port, i, "gpu%d" % (i + 1)))
        node_of[rc] = i % 2
        count += 2
    card = 0
    while count < others:
        dom, rb = 0x100 + card // GPUS_PER_DOMAIN, (card % GPUS_PER_DOMAIN) * 4
        rc = "pci%04x:%02x" % (dom, rb)
        port = "%04x:%02x:02.0" % (dom, rb)
        devs.append(mk.host_bridge(rc))
        devs.append(mk.root_port(port, rc))
        count += 2
        node_of[rc] = card % 2
        if count >= others:
            break
        bus = rb + 1
        pf = "%04x:%02x:00.0" % (dom, bus)
        nvfs = min(VFS_PER_CARD, others - count - 1)
        devs.append(mk.Pci(pf, port, mk.INTEL, 0x1593, mk.CLASS_ETHERNET, rev=0x02, subsys=(mk.INTEL, 0x0002),
                           driver="ice", reset="flr", flr=True, multifunction=True,
                           dsn=0x40A6B70000000000 | card, sriov=(VFS_PER_CARD, nvfs, 0x1889)))
        count += 1
        for v in range(nvfs):
            f = v + 1
            devs.append(mk.Pci("%04x:%02x:%02x.%d" % (dom, bus, f // 8, f % 8), port, mk.INTEL, 0x1889,
                               mk.CLASS_ETHERNET, rev=0x02, subsys=(mk.INTEL, 0x0000), driver="iavf",
                               reset="flr", flr=True, physfn=(pf, v)))
            count += 1
        card += 1
    return mk.Host(nodes=[mk.Node(0, "0-15,32-47", 263921276), mk.Node(1, "16-31,48-63", 264195264)],
                   cpus_online="0-63", devices=devs, node_of=node_of)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mkhosts", required=True, help="tests/data/mkhosts.py")
    parser.add_argument("--out", required=True, help="the host's root (DIR/sys is written)")
    parser.add_argument("--gpus", type=int, required=True)
    parser.add_argument("--others", type=int, required=True)
    args = parser.parse_args(argv)
    mk = load_mkhosts(args.mkhosts)
    os.makedirs(args.out, exist_ok=True)
    mk.build(args.out, host(mk, args.gpus, args.others))
    # Every Linux host has a boot id: with it the hook reads only the
    # domain's devices once the pool was reconciled in this boot.
    proc = os.path.join(args.out, "proc", "sys", "kernel", "random")
    os.makedirs(proc, exist_ok=True)
    with open(os.path.join(proc, "boot_id"), "w") as f:
        f.write(str(uuid.uuid4()) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
