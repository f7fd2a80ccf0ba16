"""A small fake of OpenStack's Keystone, Nova and Glance for the openstack
provider's tests, written from the public API reference; Python's standard
library only.

  fake_openstack.py PORT_FILE
      listens on 127.0.0.1 on a port the system picks, written to PORT_FILE.

What it serves (one user 'weft', password 'secret', project 'weft-project'
in domain Default, region RegionOne):
  POST /identity/v3/auth/tokens       Keystone v3 password auth: 201, the token in
                                      X-Subject-Token, a catalog with compute and image
  POST /identity/v2.0/tokens          Keystone v2.0: 200, access.token.id, serviceCatalog
  /compute/v2.1/...                   Nova: flavors, os-keypairs, servers (create, show,
                                      list and detail with the name regex filter, delete);
                                      a server is BUILD for its first `build_polls` shows,
                                      then ACTIVE with a fixed address
  GET /image/v2/images?name=N         Glance: images by name
  /network/v2.0/...                   Neutron: external networks, ports by device_id,
                                      floating IPs (list by description or port_id, create,
                                      attach with PUT, delete), shown in the server's addresses
Errors have Nova's shape ({"itemNotFound": {"code": 404, "message": ...}}) and
Keystone's ({"error": {"code": 401, "title": ..., "message": ...}}); a request
without a token Keystone issued gets 401.

The admin endpoints (no token):
  GET  /_admin/state     {"servers": [every server made, deleted ones too, with its
                          metadata, status, flavor, image, key_name, user_data decoded],
                          "keypairs": [names],
                          "floatingips": [...],
                          "calls": ["METHOD /path STATUS", ...], "held": [ids of servers
                          whose creation's answer is being held back by a delay_ms rule]}
  POST /_admin/faults    a list of rules, replacing the last; each
      {"method": "POST", "path": "^/compute/v2.1/servers$", "times": 1, ...} and
      "status": 500 (+ "retry_after": 1): answer that error instead of serving;
      "status": 500, "after": true: serve it (the server is made), then answer the error;
      "delay_ms": 20000: serve it, then hold the answer that long.
      "times" is optional (default: every matching request).
  POST /_admin/keypairs  {"name": ..., "public_key": ...}: an operator's own key pair.
  POST /_admin/config    {"build_polls": 2, "stuck": false, "fail_build": ""}: shows a server
                          is BUILD for; servers that never leave BUILD; servers that go to
                          ERROR with that fault message.
"""
import base64
import binascii
import http.server
import json
import os
import re
import sys
import threading
import time
import urllib.parse
import uuid

USER, PASSWORD, PROJECT, DOMAIN, REGION = "weft", "secret", "weft-project", "Default", "RegionOne"
FLAVORS = [{"id": "1", "name": "m1.tiny"}, {"id": "2", "name": "m1.small"}, {"id": "3", "name": "m1.medium"}]
IMAGES = [{"id": "6a8e5a2c-35c1-4b1d-9f4e-6c3f0d1e2a7b", "name": "debian-12"},
          {"id": "0d2b9c1e-8f7a-4e36-a5b4-2c1d3e4f5a6b", "name": "ubuntu-24.04"}]
ERROR_KINDS = {400: "badRequest", 401: "unauthorized", 403: "forbidden", 404: "itemNotFound",
               409: "conflictingRequest", 413: "overLimit", 429: "overLimit", 500: "computeFault",
               503: "serviceUnavailable"}

lock = threading.Lock()
state = {"tokens": set(), "servers": {}, "keypairs": {}, "floatingips": {}, "calls": [], "faults": [], "held": [],
         "config": {"build_polls": 2, "stuck": False, "fail_build": ""}, "next_ip": 10}


class Reply(Exception):
    def __init__(self, status, body=None, headers=()):
        self.status, self.body, self.headers = status, body, list(headers)


def nova_error(status, message):
    return Reply(status, {ERROR_KINDS.get(status, "computeFault"): {"code": status, "message": message}})


def keystone_error(status, title, message):
    return Reply(status, {"error": {"code": status, "title": title, "message": message}})


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def base(self):
        return "http://127.0.0.1:%d" % self.server.server_address[1]

    # ---- plumbing ----------------------------------------------------------

    def handle_any(self, method):
        length = int(self.headers.get("Content-Length", "0") or 0)
        raw = self.rfile.read(length) if length else b""
        url = urllib.parse.urlsplit(self.path)
        path, query = url.path, urllib.parse.parse_qs(url.query)
        fault, delay = None, 0
        if not path.startswith("/_admin"):
            with lock:
                for rule in state["faults"]:
                    if rule.get("method", method) != method or not re.search(rule.get("path", ""), path):
                        continue
                    if "times" in rule:
                        if rule["times"] <= 0:
                            continue
                        rule["times"] -= 1
                    if "status" in rule:
                        fault = rule
                        break
                    delay = rule.get("delay_ms", delay)
        if fault and not fault.get("after"):
            reply = self.fault_reply(fault)
        else:
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            try:
                reply = self.route(method, path, query, body)
            except Reply as r:
                reply = r
            if fault:
                reply = self.fault_reply(fault)
        if delay:
            held = (reply.body or {}).get("server", {}).get("id") if isinstance(reply.body, dict) else None
            with lock:
                state["held"].append(held or path)
            time.sleep(delay / 1000.0)
            with lock:
                state["held"].remove(held or path)
        self.answer(method, path, reply)

    def fault_reply(self, rule):
        status = rule["status"]
        headers = [("Retry-After", str(rule["retry_after"]))] if "retry_after" in rule else []
        message = rule.get("message", "injected by the test's fake OpenStack")
        body = {ERROR_KINDS.get(status, "computeFault"): {"code": status, "message": message}}
        if "retry_after" in rule:
            body[ERROR_KINDS.get(status, "computeFault")]["retryAfter"] = str(rule["retry_after"])
        return Reply(status, body, headers)

    def answer(self, method, path, reply):
        data = b"" if reply.body is None else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        if not path.startswith("/_admin"):
            with lock:
                state["calls"].append("%s %s %d" % (method, path, reply.status))

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_DELETE(self):
        self.handle_any("DELETE")

    def do_PUT(self):
        self.handle_any("PUT")

    # ---- routes ------------------------------------------------------------

    def route(self, method, path, query, body):
        if path.startswith("/_admin/"):
            return self.admin(method, path, body)
        if method == "POST" and path == "/identity/v3/auth/tokens":
            return self.token_v3(body or {})
        if method == "POST" and path in ("/identity/v2.0/tokens", "/identity/v2.0/tokens/"):
            return self.token_v2(body or {})
        token = self.headers.get("X-Auth-Token", "")
        with lock:
            known = token in state["tokens"]
        if not known:
            raise keystone_error(401, "Unauthorized", "The request you have made requires authentication.")
        if path.startswith("/compute/v2.1/"):
            return self.nova(method, path[len("/compute/v2.1"):], query, body)
        if path.startswith("/network/v2.0/"):
            return self.neutron(method, path[len("/network/v2.0"):], query, body)
        if method == "GET" and path == "/image/v2/images":
            name = query.get("name", [None])[0]
            return Reply(200, {"images": [dict(i, status="active") for i in IMAGES if name in (None, i["name"])]})
        raise nova_error(404, "The resource could not be found.")

    def catalog_v3(self):
        def service(kind, name, url):
            return {"type": kind, "name": name, "id": uuid.uuid4().hex, "endpoints": [
                {"interface": i, "region": REGION, "region_id": REGION, "url": url, "id": uuid.uuid4().hex}
                for i in ("public", "internal", "admin")]}
        return [service("identity", "keystone", self.base() + "/identity"),
                service("compute", "nova", self.base() + "/compute/v2.1"),
                service("image", "glance", self.base() + "/image"),
                service("network", "neutron", self.base() + "/network")]

    def issue(self):
        token = "tok-" + uuid.uuid4().hex
        with lock:
            state["tokens"].add(token)
        return token

    def token_v3(self, body):
        auth = body.get("auth", {})
        user = auth.get("identity", {}).get("password", {}).get("user", {})
        project = auth.get("scope", {}).get("project", {})
        if (user.get("name") != USER or user.get("password") != PASSWORD
                or user.get("domain", {}).get("name") != DOMAIN):
            raise keystone_error(401, "Unauthorized", "The request you have made requires authentication.")
        if project.get("name") != PROJECT or project.get("domain", {}).get("name") != DOMAIN:
            raise keystone_error(401, "Unauthorized",
                                 "User %s has no access to project %s" % (USER, project.get("name")))
        token = self.issue()
        return Reply(201, {"token": {
            "methods": ["password"], "expires_at": "2099-01-01T00:00:00.000000Z",
            "user": {"name": USER, "id": "u1", "domain": {"name": DOMAIN, "id": "default"}},
            "project": {"name": PROJECT, "id": "p1", "domain": {"name": DOMAIN, "id": "default"}},
            "catalog": self.catalog_v3()}}, [("X-Subject-Token", token)])

    def token_v2(self, body):
        auth = body.get("auth", {})
        creds = auth.get("passwordCredentials", {})
        if creds.get("username") != USER or creds.get("password") != PASSWORD or auth.get("tenantName") != PROJECT:
            raise keystone_error(401, "Unauthorized", "The request you have made requires authentication.")
        token = self.issue()
        catalog = [{"type": s["type"], "name": s["name"], "endpoints": [
            {"region": REGION, "publicURL": s["endpoints"][0]["url"], "internalURL": s["endpoints"][0]["url"],
             "adminURL": s["endpoints"][0]["url"]}]} for s in self.catalog_v3()]
        return Reply(200, {"access": {"token": {"id": token, "expires": "2099-01-01T00:00:00Z",
                                                "tenant": {"id": "p1", "name": PROJECT}},
                                      "serviceCatalog": catalog, "user": {"id": "u1", "name": USER}}})

    def nova(self, method, path, query, body):
        if method == "GET" and path in ("/flavors", "/flavors/detail"):
            return Reply(200, {"flavors": FLAVORS})
        if path == "/os-keypairs":
            if method == "GET":
                with lock:
                    return Reply(200, {"keypairs": [{"keypair": k} for k in state["keypairs"].values()]})
            if method == "POST":
                return self.create_keypair((body or {}).get("keypair", {}))
        m = re.fullmatch(r"/os-keypairs/([^/]+)", path)
        if m and method == "DELETE":
            name = urllib.parse.unquote(m.group(1))
            with lock:
                if state["keypairs"].pop(name, None) is None:
                    raise nova_error(404, "Keypair %s not found for user u1" % name)
            return Reply(202)
        if path == "/servers" and method == "POST":
            return self.create_server((body or {}).get("server", {}))
        if path in ("/servers", "/servers/detail") and method == "GET":
            pattern = query.get("name", [""])[0]
            with lock:
                servers = [self.view(s, path.endswith("detail")) for s in state["servers"].values()
                           if s["status"] != "DELETED" and re.search(pattern, s["name"])]
            return Reply(200, {"servers": servers})
        m = re.fullmatch(r"/servers/([^/]+)", path)
        if m:
            with lock:
                server = state["servers"].get(m.group(1))
                if server is None or server["status"] == "DELETED":
                    raise nova_error(404, "Instance %s could not be found." % m.group(1))
                if method == "GET":
                    self.advance(server)
                    return Reply(200, {"server": self.view(server, True)})
                if method == "DELETE":
                    server["status"] = "DELETED"
                    for ip in state["floatingips"].values():
                        if ip["port_id"] == "port-" + server["id"]:
                            ip["port_id"] = None
                    return Reply(204)
        raise nova_error(404, "The resource could not be found.")

    def neutron(self, method, path, query, body):
        def error(status, kind, message):
            return Reply(status, {"NeutronError": {"type": kind, "message": message, "detail": ""}})
        arg = lambda name: query.get(name, [None])[0]
        with lock:
            if method == "GET" and path == "/networks":
                external = [{"id": "ext-net", "name": "public", "router:external": True}]
                return Reply(200, {"networks": external if arg("router:external") == "true" else []})
            if method == "GET" and path == "/ports":
                server = state["servers"].get(arg("device_id") or "")
                ports = [] if server is None or server["status"] == "DELETED" else [
                    {"id": "port-" + server["id"], "device_id": server["id"],
                     "fixed_ips": [{"ip_address": server["ip"]}]}]
                return Reply(200, {"ports": ports})
            if method == "GET" and path == "/floatingips":
                ips = [ip for ip in state["floatingips"].values()
                       if arg("description") in (None, ip["description"]) and arg("port_id") in (None, ip["port_id"])]
                return Reply(200, {"floatingips": ips})
            if method == "POST" and path == "/floatingips":
                ip = (body or {}).get("floatingip", {})
                if ip.get("floating_network_id") != "ext-net":
                    raise error(404, "NetworkNotFound",
                                "Network %s could not be found." % ip.get("floating_network_id"))
                fid = str(uuid.uuid4())
                state["floatingips"][fid] = {
                    "id": fid, "floating_network_id": "ext-net", "port_id": ip.get("port_id"), "status": "ACTIVE",
                    "description": ip.get("description", ""),
                    "floating_ip_address": "172.24.4.%d" % (len(state["floatingips"]) + 10)}
                return Reply(201, {"floatingip": state["floatingips"][fid]})
            m = re.fullmatch(r"/floatingips/([^/]+)", path)
            if m:
                ip = state["floatingips"].get(m.group(1))
                if ip is None:
                    raise error(404, "FloatingIPNotFound", "Floating IP %s could not be found" % m.group(1))
                if method == "PUT":
                    ip["port_id"] = (body or {}).get("floatingip", {}).get("port_id")
                    return Reply(200, {"floatingip": ip})
                if method == "DELETE":
                    del state["floatingips"][m.group(1)]
                    return Reply(204)
        raise error(404, "HTTPNotFound", "The resource could not be found.")

    def create_keypair(self, keypair):
        name = keypair.get("name", "")
        if not name or not keypair.get("public_key", "").startswith("ssh-"):
            raise nova_error(400, "Keypair data is invalid: a name and an OpenSSH public key are required")
        with lock:
            if name in state["keypairs"]:
                raise nova_error(409, "Key pair '%s' already exists." % name)
            state["keypairs"][name] = {"name": name, "public_key": keypair["public_key"], "type": "ssh",
                                       "fingerprint": "fake"}
        return Reply(200, {"keypair": state["keypairs"][name]})

    def create_server(self, server):
        flavor = server.get("flavorRef")
        if not any(f["id"] == flavor for f in FLAVORS):
            raise nova_error(400, "Flavor %s could not be found." % flavor)
        image = server.get("imageRef")
        if not any(i["id"] == image for i in IMAGES):
            raise nova_error(400, "Can not find requested image")
        metadata = server.get("metadata", {})
        if any(len(k) > 255 or len(str(v)) > 255 for k, v in metadata.items()):
            raise nova_error(400, "Invalid input for field/attribute metadata.")
        try:
            user_data = base64.b64decode(server.get("user_data", ""), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise nova_error(400, "User data needs to be valid base 64.")
        with lock:
            key = server.get("key_name")
            if key and key not in state["keypairs"]:
                raise nova_error(400, "Invalid key_name provided.")
            sid = str(uuid.uuid4())
            state["next_ip"] += 1
            state["servers"][sid] = {
                "id": sid, "name": server.get("name", ""), "flavor": flavor, "image": image, "key_name": key,
                "metadata": metadata, "user_data": user_data,
                "security_groups": [g.get("name") for g in server.get("security_groups", [])],
                "networks": server.get("networks", []), "status": "BUILD", "shows": 0,
                "ip": "10.0.0.%d" % state["next_ip"], "created": time.time()}
        return Reply(202, {"server": {"id": sid, "adminPass": "fake-admin-pass", "OS-DCF:diskConfig": "MANUAL",
                                      "links": [{"rel": "self",
                                                 "href": "%s/compute/v2.1/servers/%s" % (self.base(), sid)}],
                                      "security_groups": [{"name": "default"}]}})

    def advance(self, server):
        """BUILD for the first build_polls shows, then ACTIVE (or ERROR); under the lock."""
        server["shows"] += 1
        config = state["config"]
        if server["status"] == "BUILD" and not config["stuck"] and server["shows"] > config["build_polls"]:
            if config["fail_build"]:
                server["status"] = "ERROR"
                server["fault"] = {"code": 500, "message": config["fail_build"], "created": "2026-01-01T00:00:00Z"}
            else:
                server["status"] = "ACTIVE"

    def view(self, s, detail):
        out = {"id": s["id"], "name": s["name"], "links": []}
        if detail:
            out.update({"status": s["status"], "metadata": s["metadata"], "key_name": s["key_name"],
                        "flavor": {"id": s["flavor"]}, "image": {"id": s["image"]}, "tenant_id": "p1",
                        "accessIPv4": "", "accessIPv6": "",
                        "addresses": {} if s["status"] == "BUILD" else {"private": [
                            {"addr": s["ip"], "version": 4, "OS-EXT-IPS:type": "fixed"}] + [
                            {"addr": ip["floating_ip_address"], "version": 4, "OS-EXT-IPS:type": "floating"}
                            for ip in state["floatingips"].values() if ip["port_id"] == "port-" + s["id"]]}})
            if "fault" in s:
                out["fault"] = s["fault"]
        return out

    def admin(self, method, path, body):
        with lock:
            if method == "GET" and path == "/_admin/state":
                servers = [{k: v for k, v in s.items() if k not in ("shows", "created")}
                           for s in sorted(state["servers"].values(), key=lambda s: s["created"])]
                return Reply(200, {"servers": servers, "keypairs": sorted(state["keypairs"]),
                                   "floatingips": list(state["floatingips"].values()),
                                   "calls": list(state["calls"]), "held": list(state["held"])})
            if method == "POST" and path == "/_admin/faults":
                state["faults"] = body or []
                return Reply(200, {})
            if method == "POST" and path == "/_admin/keypairs":
                state["keypairs"][body["name"]] = dict(body, type="ssh", fingerprint="fake")
                return Reply(200, {})
            if method == "POST" and path == "/_admin/config":
                state["config"].update(body or {})
                return Reply(200, state["config"])
        raise nova_error(404, "no such admin endpoint")


def serve(port_file):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    serve(sys.argv[1])
