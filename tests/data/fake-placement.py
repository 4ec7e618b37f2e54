#!/usr/bin/env python3
"""accelvirt tests: a tiny stand-in for Placement and Keystone, for
tests/test-placement-client.sh.  Not Placement: only what accelvirt's
client asks, answered as Placement 8.0.0 and Keystone v3 answer it
(placement/handlers/inventory.py, resource_provider.py; keystone api-ref).

    fake-placement.py DIR
writes its port to DIR/port, logs every request to DIR/requests.jsonl and
reads DIR/ctl.json at each request: {"conflicts": N (the next N inventory
PUTs answer 409 placement.concurrent_update and bump the generation, as a
concurrent writer would), "fail": STATUS (answer everything with it), "slow": SECONDS (every
answer that late), "providers": "other" | "two" |
"baduuid" (the provider lookup answers another provider's name only, the
name twice, or a malformed uuid)}.
Placement lives under /placement, Keystone under /identity/v3."""
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

DIR = sys.argv[1]
TOKEN = "tok-keystone-123"
PROVIDERS = {
    "compute1_0000:3B:00.0": {"uuid": "11111111-1111-1111-1111-111111111111", "generation": 1,
                              "inventories": {"CUSTOM_PCI_10DE_20B5": {"total": 1, "reserved": 0, "min_unit": 1,
                                                                       "max_unit": 1, "step_size": 1,
                                                                       "allocation_ratio": 1.0}}},
    # As Nova's one_time_use leaves a device it allocated: reserved = total.
    "compute1_0000:65:00.0": {"uuid": "33333333-3333-3333-3333-333333333333", "generation": 7,
                              "inventories": {"CUSTOM_PCI_10DE_20F1": {"total": 1, "reserved": 1, "min_unit": 1,
                                                                       "max_unit": 1, "step_size": 1,
                                                                       "allocation_ratio": 1.0}}},
    "compute1_0000:17:00.0": {"uuid": "22222222-2222-2222-2222-222222222222", "generation": 4,
                              "inventories": {"CUSTOM_PCI_8086_1889": {"total": 2, "reserved": 0, "min_unit": 1,
                                                                       "max_unit": 2, "step_size": 1,
                                                                       "allocation_ratio": 1.0}}},
}
FIELDS = {"resource_provider_generation", "total", "reserved", "min_unit", "max_unit", "step_size",
          "allocation_ratio"}


def ctl():
    try:
        with open(os.path.join(DIR, "ctl.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def set_ctl(c):
    with open(os.path.join(DIR, "ctl.json.tmp"), "w") as f:
        json.dump(c, f)
    os.rename(os.path.join(DIR, "ctl.json.tmp"), os.path.join(DIR, "ctl.json"))


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body=None, headers=None):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, code, detail):
        self.answer(status, {"errors": [{"status": status, "title": "x", "detail": detail, "code": code}]})

    def handle_any(self, method):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        with open(os.path.join(DIR, "requests.jsonl"), "a") as f:
            f.write(json.dumps({"method": method, "path": self.path, "body": body,
                                "token": self.headers.get("X-Auth-Token"),
                                "version": self.headers.get("OpenStack-API-Version"),
                                "content_type": self.headers.get("Content-Type")}) + "\n")
        c = ctl()
        if c.get("slow"):
            time.sleep(c["slow"])
        if c.get("fail"):
            return self.error(c["fail"], "placement.undefined_code", "failing on purpose")
        if self.path == "/identity/v3/auth/tokens" and method == "POST":
            port = self.server.server_address[1]
            catalog = [{"type": "compute", "endpoints": [{"interface": "internal", "url": "http://nova"}]},
                       {"type": "placement", "endpoints": [
                           {"interface": "public", "region_id": "R1", "url": "http://127.0.0.1:1/placement"},
                           {"interface": "internal", "region_id": "R1",
                            "url": "http://127.0.0.1:%d/placement/" % port}]}]
            return self.answer(201, {"token": {"expires_at": "2099-01-01T00:00:00Z", "catalog": catalog}},
                               {"X-Subject-Token": TOKEN})
        if not self.path.startswith("/placement/"):
            return self.error(404, "placement.undefined_code", "no such path")
        if self.headers.get("X-Auth-Token") not in ("admin", TOKEN):
            return self.error(401, "placement.undefined_code", "bad token")
        path = self.path[len("/placement"):]
        if method == "GET" and path.startswith("/resource_providers?name="):
            from urllib.parse import unquote
            name = unquote(path[len("/resource_providers?name="):])
            rp = PROVIDERS.get(name)
            found = [{"uuid": rp["uuid"], "name": name, "generation": rp["generation"]}] if rp else []
            mode = c.get("providers")
            if mode == "other":      # a provider of another name only
                found = [dict(f, name="elsewhere") for f in found]
            elif mode == "two" and found:
                found = found + [dict(found[0], uuid="55555555-5555-5555-5555-555555555555")]
            elif mode == "baduuid" and found:
                found = [dict(found[0], uuid="../../x")]
            return self.answer(200, {"resource_providers": found})
        parts = path.split("/")
        if len(parts) == 5 and parts[1] == "resource_providers" and parts[3] == "inventories":
            rp = next((p for p in PROVIDERS.values() if p["uuid"] == parts[2]), None)
            if not rp or parts[4] not in rp["inventories"]:
                return self.error(404, "placement.undefined_code", "No inventory of class %s" % parts[4])
            inv = rp["inventories"][parts[4]]
            if method == "GET":
                return self.answer(200, dict(inv, resource_provider_generation=rp["generation"]))
            if method == "PUT":
                if self.headers.get("Content-Type") != "application/json":
                    return self.error(415, "placement.undefined_code", "not json")
                if set(body) != FIELDS:
                    return self.error(400, "placement.undefined_code", "fields: %s" % sorted(body))
                if c.get("conflicts", 0) > 0:
                    c["conflicts"] -= 1
                    set_ctl(c)
                    rp["generation"] += 1
                    return self.error(409, "placement.concurrent_update", "resource provider generation conflict")
                if body["resource_provider_generation"] != rp["generation"]:
                    return self.error(409, "placement.concurrent_update", "resource provider generation conflict")
                if body["reserved"] > body["total"]:
                    return self.error(400, "placement.undefined_code", "reserved > total")
                rp["inventories"][parts[4]] = {k: body[k] for k in FIELDS if k != "resource_provider_generation"}
                rp["generation"] += 1
                return self.answer(200, dict(rp["inventories"][parts[4]], resource_provider_generation=rp["generation"]))
        return self.error(404, "placement.undefined_code", "not here")

    def do_GET(self):
        self.handle_any("GET")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_POST(self):
        self.handle_any("POST")


server = HTTPServer(("127.0.0.1", 0), Handler)
with open(os.path.join(DIR, "port.tmp"), "w") as f:
    f.write(str(server.server_address[1]))
os.rename(os.path.join(DIR, "port.tmp"), os.path.join(DIR, "port"))
server.serve_forever()
