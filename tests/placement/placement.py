#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The placement tier's client (tests/placement/README.md): what Nova does in
Placement, done by hand against the tier's real Placement (noauth2, token
"admin"), and what the tests read back.

    placement.py --url URL COMMAND ARGS...

  wait SECONDS [PID]         until GET / answers (fails early when PID dies)
  traits-missing TRAIT...    prints the TRAITs this Placement does not know
  otu-trait                  the one-time-use trait to set: HW_PCI_ONE_TIME_USE
                             where os-traits has it, else CUSTOM_HW_PCI_ONE_TIME_USE
  compute-node HOST          the compute node's root RP HOST (as Nova's
                             resource tracker makes it)
  pci-rp HOST ADDRESS RC TOTAL [TRAIT...]
                             what Nova makes with [pci] report_in_placement: the
                             child RP HOST_ADDRESS (address upper-cased) under
                             HOST, inventory {RC: {total, max_unit: TOTAL}},
                             traits COMPUTE_MANAGED_PCI_DEVICE and TRAIT...
  inventory RP RC            prints the inventory of RC on the RP named RP (JSON)
  reserved RP RC             prints its reserved
  generation RP              prints the RP's generation
  candidates RC[:N]          prints the names of the RPs that GET
                             /allocation_candidates?resources=RC:N (microversion
                             1.29) returns, one a line
  allocate RP RC CONSUMER [--otu]
                             Nova's allocation of the device to the instance
                             CONSUMER; --otu: then one_time_use's reserved = total
  deallocate CONSUMER        the instance is gone: its allocations deleted (Nova
                             never gives reserved back)
  set-reserved RP RC N       the operator's `inventory set --amend` of reserved
  nova-put RP RC             Nova's PUT of the whole inventory with total and
                             max_unit only: Placement resets reserved to 0
  bump RP                    the RP's generation bumped (a test trait toggled)
  uuid RP                    prints the RP's uuid
  proxy PORT-FILE LOG CONFLICTS [RP-UUID]
                             a proxy to URL on a free port (written to PORT-FILE):
                             before forwarding each of the first CONFLICTS PUTs of
                             an inventory (of RP-UUID's only, when given) it bumps
                             the RP's generation, so that
                             the PUT gets Placement's own 409; logs "METHOD PATH
                             STATUS [OpenStack-API-Version] token=yes|no" per
                             request and "bumped RP-UUID" to LOG
"""

import http.server
import json
import os
import socket
import socketserver
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid as uuidlib

MICROVERSION = "1.29"
URL = None


class PlacementError(Exception):
    pass


def call(method, path, body=None, version=MICROVERSION, ok=(200, 201, 204), url=None):
    """One request; returns (status, parsed body or None)."""
    headers = {"X-Auth-Token": "admin", "Accept": "application/json",
               "OpenStack-API-Version": "placement " + version}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request((url or URL) + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, text = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read()
    parsed = json.loads(text) if text else None
    if ok and status not in ok:
        raise PlacementError("%s %s: HTTP %d: %s" % (method, path, status, text.decode(errors="replace")[:500]))
    return status, parsed


def rp_by_name(name):
    _, d = call("GET", "/resource_providers?name=" + urllib.parse.quote(name, safe=""))
    rps = d["resource_providers"]
    if len(rps) != 1:
        raise PlacementError("no resource provider named '%s'" % name)
    return rps[0]


def rp_name(host, address):
    # Nova: f"{root_rp_name}_{addr.upper()}" (research c): only the address.
    return "%s_%s" % (host, address.upper())


def get_inventory(rp, rc):
    _, inv = call("GET", "/resource_providers/%s/inventories/%s" % (rp["uuid"], rc))
    return inv


def amend(rp, rc, **changes):
    """GET, then PUT with every field copied: `inventory set --amend`."""
    for _ in range(10):
        inv = get_inventory(rp, rc)
        inv.update(changes)
        st, _ = call("PUT", "/resource_providers/%s/inventories/%s" % (rp["uuid"], rc), inv, ok=(200, 409))
        if st == 200:
            return
    raise PlacementError("10 conflicts in a row amending %s %s" % (rp["name"], rc))


def ensure_trait(t):
    if not t.startswith("CUSTOM_"):
        return
    call("PUT", "/traits/" + t)


def trait_known(t):
    st, _ = call("GET", "/traits/" + t, ok=None)
    return st == 204


def cmd_wait(args):
    limit = float(args[0])
    pid = int(args[1]) if len(args) > 1 else None
    end = time.time() + limit
    while time.time() < end:
        try:
            with urllib.request.urlopen(URL + "/", timeout=2) as r:
                d = json.loads(r.read())
                if d.get("versions"):
                    return 0
        except (OSError, ValueError):
            pass
        if pid is not None:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                print("placement-api (pid %d) exited" % pid, file=sys.stderr)
                return 1
        time.sleep(0.2)
    return 1


def cmd_traits_missing(args):
    for t in args:
        if not trait_known(t):
            print(t)
    return 0


def otu_trait():
    return "HW_PCI_ONE_TIME_USE" if trait_known("HW_PCI_ONE_TIME_USE") else "CUSTOM_HW_PCI_ONE_TIME_USE"


def cmd_otu_trait(args):
    print(otu_trait())
    return 0


def cmd_compute_node(args):
    host = args[0]
    _, d = call("POST", "/resource_providers", {"name": host, "uuid": str(uuidlib.uuid4())})
    call("PUT", "/resource_providers/%s/inventories" % d["uuid"],
         {"resource_provider_generation": d["generation"],
          "inventories": {"VCPU": {"total": 32, "max_unit": 32}, "MEMORY_MB": {"total": 131072, "max_unit": 131072}}})
    rp = rp_by_name(host)
    call("PUT", "/resource_providers/%s/traits" % rp["uuid"],
         {"resource_provider_generation": rp["generation"], "traits": ["COMPUTE_NODE"]})
    return 0


def cmd_pci_rp(args):
    host, address, rc, total = args[0], args[1], args[2], int(args[3])
    traits = ["COMPUTE_MANAGED_PCI_DEVICE"] + args[4:]
    root = rp_by_name(host)
    call("PUT", "/resource_classes/" + rc)
    for t in traits:
        ensure_trait(t)
    _, d = call("POST", "/resource_providers",
                {"name": rp_name(host, address), "uuid": str(uuidlib.uuid4()),
                 "parent_provider_uuid": root["uuid"]})
    # Nova sends total and max_unit only (research c): the rest defaults.
    call("PUT", "/resource_providers/%s/inventories" % d["uuid"],
         {"resource_provider_generation": d["generation"],
          "inventories": {rc: {"total": total, "max_unit": total}}})
    rp = rp_by_name(rp_name(host, address))
    call("PUT", "/resource_providers/%s/traits" % rp["uuid"],
         {"resource_provider_generation": rp["generation"], "traits": traits})
    print(rp_name(host, address))
    return 0


def cmd_inventory(args):
    print(json.dumps(get_inventory(rp_by_name(args[0]), args[1]), sort_keys=True))
    return 0


def cmd_reserved(args):
    print(get_inventory(rp_by_name(args[0]), args[1])["reserved"])
    return 0


def cmd_generation(args):
    print(rp_by_name(args[0])["generation"])
    return 0


def cmd_candidates(args):
    rc = args[0] if ":" in args[0] else args[0] + ":1"
    _, d = call("GET", "/allocation_candidates?resources=" + rc)
    uuids = set()
    for ar in d["allocation_requests"]:
        for u, a in ar["allocations"].items():
            if rc.split(":")[0] in a["resources"]:
                uuids.add(u)
    names = [call("GET", "/resource_providers/" + u)[1]["name"] for u in uuids]
    for n in sorted(names):
        print(n)
    return 0


def cmd_allocate(args):
    rp = rp_by_name(args[0])
    rc, consumer = args[1], args[2]
    call("PUT", "/allocations/" + consumer,
         {"allocations": {rp["uuid"]: {"resources": {rc: 1}}},
          "project_id": "6f1f5c3d0f0b4b8e9d0c8b0a1e2f3a4b", "user_id": "0a1b2c3d4e5f46a7b8c9d0e1f2a3b4c5",
          "consumer_generation": None}, version="1.29")
    if "--otu" in args[3:]:
        # Nova's _handle_one_time_use: reserved = total once allocated, at 1.26+.
        inv = get_inventory(rp, rc)
        amend(rp, rc, reserved=inv["total"])
    return 0


def cmd_deallocate(args):
    call("DELETE", "/allocations/" + args[0])
    return 0


def cmd_set_reserved(args):
    amend(rp_by_name(args[0]), args[1], reserved=int(args[2]))
    return 0


def cmd_nova_put(args):
    rp = rp_by_name(args[0])
    inv = get_inventory(rp, args[1])
    call("PUT", "/resource_providers/%s/inventories" % rp["uuid"],
         {"resource_provider_generation": inv["resource_provider_generation"],
          "inventories": {args[1]: {"total": inv["total"], "max_unit": inv["max_unit"]}}})
    return 0


def bump_uuid(u, url=None):
    """Bumps the generation of the RP with uuid U: its trait CUSTOM_AV_TEST_BUMP
    toggled (a PUT of the same trait set leaves the generation as it was)."""
    call("PUT", "/traits/CUSTOM_AV_TEST_BUMP", url=url)
    _, t = call("GET", "/resource_providers/%s/traits" % u, url=url)
    traits = set(t["traits"]) ^ {"CUSTOM_AV_TEST_BUMP"}
    call("PUT", "/resource_providers/%s/traits" % u,
         {"resource_provider_generation": t["resource_provider_generation"], "traits": sorted(traits)}, url=url)


def cmd_uuid(args):
    print(rp_by_name(args[0])["uuid"])
    return 0


def cmd_bump(args):
    bump_uuid(rp_by_name(args[0])["uuid"])
    return 0


class Proxy(http.server.BaseHTTPRequestHandler):
    target = None
    log_path = None
    conflicts = 0
    only = None
    lock = threading.Lock()

    def log_message(self, fmt, *a):
        pass

    def note(self, line):
        with Proxy.lock:
            with open(Proxy.log_path, "a") as f:
                f.write(line + "\n")

    def forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        parts = self.path.split("?")[0].strip("/").split("/")
        if (self.command == "PUT" and len(parts) == 4 and parts[0] == "resource_providers"
                and parts[2] == "inventories" and Proxy.only in (None, parts[1])):
            with Proxy.lock:
                inject = Proxy.conflicts > 0
                if inject:
                    Proxy.conflicts -= 1
            if inject:
                try:
                    bump_uuid(parts[1], url=Proxy.target)
                    self.note("bumped %s" % parts[1])
                except Exception as e:  # noqa: BLE001 (the log says it)
                    self.note("bump failed: %s" % e)
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("host", "connection", "content-length", "accept-encoding")}
        req = urllib.request.Request(Proxy.target + self.path, data=body, method=self.command, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status, rh, text = r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            status, rh, text = e.code, e.headers, e.read()
        except OSError as e:
            self.note("%s %s unreachable: %s" % (self.command, self.path, e))
            self.send_error(502)
            return
        self.note("%s %s %d [%s] token=%s" % (self.command, self.path, status,
                                              self.headers.get("OpenStack-API-Version", "-"),
                                              "yes" if self.headers.get("X-Auth-Token") else "no"))
        self.send_response(status)
        for k, v in rh.items():
            if k.lower() not in ("connection", "transfer-encoding", "content-length", "server", "date"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(text)))
        self.send_header("Connection", "close")
        self.end_headers()
        if text:
            self.wfile.write(text)

    do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = forward


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def cmd_proxy(args):
    port_file, Proxy.log_path, Proxy.conflicts = args[0], args[1], int(args[2])
    Proxy.target = URL
    Proxy.only = args[3] if len(args) > 3 else None
    srv = ThreadingServer(("127.0.0.1", 0), Proxy)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, port_file)
    srv.serve_forever()
    return 0


COMMANDS = {
    "wait": cmd_wait, "traits-missing": cmd_traits_missing, "otu-trait": cmd_otu_trait,
    "compute-node": cmd_compute_node, "pci-rp": cmd_pci_rp, "inventory": cmd_inventory,
    "reserved": cmd_reserved, "generation": cmd_generation, "candidates": cmd_candidates,
    "allocate": cmd_allocate, "deallocate": cmd_deallocate, "set-reserved": cmd_set_reserved,
    "nova-put": cmd_nova_put, "bump": cmd_bump, "uuid": cmd_uuid, "proxy": cmd_proxy,
}


def main(argv):
    global URL
    if len(argv) < 3 or argv[0] != "--url" or argv[2] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        return 2
    URL = argv[1].rstrip("/")
    try:
        return COMMANDS[argv[2]](argv[3:])
    except (PlacementError, OSError, KeyError, IndexError, ValueError) as e:
        print("placement.py %s: %s" % (argv[2], e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
