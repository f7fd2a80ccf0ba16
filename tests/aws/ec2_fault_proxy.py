"""An HTTP proxy in front of moto_server that the aws provider's tests put
faults into, as EC2 shows them: 5xx answers, throttling, an instance that
stays pending. Python's standard library only.

  ec2_fault_proxy.py UPSTREAM PORT_FILE RULES_FILE LOG_FILE

Listens on 127.0.0.1 on a port the system picks, written to PORT_FILE. Each
request's Action and the status answered go to LOG_FILE, a line each. RULES_FILE
(JSON, read again whenever it changes, counts starting over) is a list of:
  {"action": "RunInstances", "times": 1, "status": 500, "code": "InternalError"}
      answer the next `times` requests of that action with that error, without
      forwarding them;
  {"action": "DescribeInstances", "state": "pending"}
      forward, then show every instance in that state;
  {"action": "RunInstances", "delay_ms": 4000, "times": 3}
      forward, then hold the answer that long.
"times" is optional on the last two (default: every request).
"""
import http.server
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

UPSTREAM, PORT_FILE, RULES_FILE, LOG_FILE = sys.argv[1:5]
lock = threading.Lock()
rules = {"stamp": None, "list": []}


def current_rules():
    try:
        st = os.stat(RULES_FILE)
        stamp = (st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        return []
    if stamp != rules["stamp"]:
        with open(RULES_FILE) as f:
            rules["list"] = json.load(f)
        rules["stamp"] = stamp
    return rules["list"]


def error_body(code):
    return ('<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>%s</Code>'
            '<Message>injected by the test proxy</Message></Error></Errors>'
            '<RequestID>fault</RequestID></Response>' % code).encode()


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, action, status, body, headers=()):
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        with lock, open(LOG_FILE, "a") as log:
            log.write("%s %d\n" % (action, status))

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        action = urllib.parse.parse_qs(body.decode()).get("Action", ["?"])[0]
        state, delay, fault = None, 0, None
        with lock:
            for rule in current_rules():
                if rule.get("action") != action:
                    continue
                if "times" in rule:
                    if rule["times"] <= 0:
                        continue
                    rule["times"] -= 1
                if "status" in rule:
                    fault = rule
                    break
                state = rule.get("state", state)
                delay = rule.get("delay_ms", delay)
        if fault:
            self.answer(action, fault["status"], error_body(fault["code"]))
            return
        request = urllib.request.Request(UPSTREAM + self.path, data=body, method="POST",
                                         headers={k: v for k, v in self.headers.items()})
        try:
            with urllib.request.urlopen(request) as reply:
                status, headers, data = reply.status, reply.getheaders(), reply.read()
        except urllib.error.HTTPError as e:
            status, headers, data = e.code, e.headers.items(), e.read()
        if delay:
            time.sleep(delay / 1000.0)
        if state and status == 200:
            data = re.sub(rb"<name>(pending|running)</name>", b"<name>" + state.encode() + b"</name>", data)
            data = re.sub(rb"<code>(0|16)</code>", b"<code>0</code>", data)
        self.answer(action, status, data, headers)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
