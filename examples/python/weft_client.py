#!/usr/bin/python3
"""weft_client.py: a small Weft API client in Python, as an example for client authors.

It speaks weftd's wire protocol (docs/protocol.md, "Writing a client") over ZeroMQ
with CurveZMQ, using only Debian's python3-zmq:

    weft_client.py --credentials FILE status
    weft_client.py --credentials FILE catalog-import DIR
    weft_client.py --credentials FILE cluster-create NAME --template T --size N

The credential file is what `weft credentials USER -f FILE` writes (or weftd's own
<data_dir>/credentials/superadmin.json): weftd's api endpoint and public key, and
the client's key pair. `cluster-create` follows the job's progress on weftd's
`events` endpoint and exits 0 when the job succeeded, 1 when it did not.
"""

import argparse
import itertools
import json
import os
import sys
import time

import zmq

PROTOCOL_VERSION = 1
KINDS = [  # catalog directory -> op noun, in the order entities may refer to each other
    ("providers", "provider"),
    ("hardwaretypes", "hardwaretype"),
    ("imagetypes", "imagetype"),
    ("services", "service"),
    ("clustertemplates", "clustertemplate"),
]


class WeftError(Exception):
    """An error reply: code is INVALID, NOT_FOUND, CONFLICT, DENIED, UNAVAILABLE, ...

    TIMEOUT when no reply came in time: the request may or may not have been
    carried out (UNAVAILABLE, weftd's own, says it was not: retry)."""

    def __init__(self, code, message, details=None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details or {}


class Client:
    """Request/reply over a DEALER socket to weftd's api endpoint.

    A call that times out closes its socket and the next call opens a fresh one
    (so a late reply is never taken for a newer request's), as the C++ client does.
    """

    def __init__(self, credential, endpoint=None, tenant=None, timeout_ms=10000):
        self.context = zmq.Context.instance()
        self.credential = credential
        self.endpoint = endpoint or credential["api"]
        self.tenant = tenant
        self.timeout_ms = timeout_ms
        self.ids = itertools.count(1)
        self.prefix = f"py{os.getpid()}-"
        self.socket = None

    def _secure(self, socket):
        socket.curve_serverkey = self.credential["server_key"].encode()
        socket.curve_publickey = self.credential["public_key"].encode()
        socket.curve_secretkey = self.credential["secret_key"].encode()

    def _connect(self):
        self.socket = self.context.socket(zmq.DEALER)
        self.socket.linger = 0
        self._secure(self.socket)
        self.socket.connect(self.endpoint)

    def call(self, op, body=None, timeout_ms=None):
        """Sends op with body; returns the reply's body or raises WeftError."""
        if self.socket is None:
            self._connect()
        request_id = self.prefix + str(next(self.ids))
        header = {"v": PROTOCOL_VERSION, "id": request_id, "op": op, "body": body or {}}
        if self.tenant:
            header["tenant"] = self.tenant
        # A DEALER sends the frames as they are; weftd's ROUTER adds the routing id.
        self.socket.send_multipart([json.dumps(header).encode()])
        deadline = time.monotonic() + (timeout_ms or self.timeout_ms) / 1000
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.socket.poll(int(left * 1000)):
                self.socket.close()
                self.socket = None
                raise WeftError("TIMEOUT", f"no reply from weftd at {self.endpoint} to {op} (it may or may not "
                                "have been carried out)")
            frames = self.socket.recv_multipart()
            reply = json.loads(frames[0])
            if reply.get("id") != request_id:
                continue  # a late reply to a request given up on
            if reply.get("ok"):
                return reply.get("body") or {}
            error = reply.get("error") or {}
            raise WeftError(error.get("code", "INTERNAL"), error.get("message", ""), error.get("details"))

    def events_endpoint(self):
        """weftd's events endpoint as reachable from here (a wildcard host becomes the api's)."""
        status = self.call("server.status")
        events = status["endpoints"]["events"]
        # Several weftd on one database: only the leader publishes (a follower answers this itself).
        leader = ((status.get("leadership") or {}).get("leader") or {}).get("endpoints") or {}
        events = leader.get("events", events)
        for wildcard in ("tcp://0.0.0.0:", "tcp://*:", "tcp://[::]:"):
            if events.startswith(wildcard):
                host = self.endpoint.split("://", 1)[1].rsplit(":", 1)[0]
                events = f"tcp://{host}:{events[len(wildcard):]}"
        return events

    def subscribe(self, topic):
        """A SUB socket on weftd's events, subscribed to topic (a prefix)."""
        sub = self.context.socket(zmq.SUB)
        sub.linger = 0
        self._secure(sub)
        sub.setsockopt(zmq.SUBSCRIBE, topic.encode())
        sub.connect(self.events_endpoint())
        return sub


def load_credential(path):
    with open(path, encoding="utf-8") as f:
        credential = json.load(f)
    for key in ("api", "server_key", "public_key", "secret_key"):
        if not credential.get(key):
            raise SystemExit(f"weft_client: the credential file {path} has no {key}")
    return credential


def cmd_status(client, _args):
    status = client.call("server.status")
    print(json.dumps(status, indent=2, sort_keys=True))
    return 0


def cmd_catalog_import(client, args):
    count = 0
    for directory, noun in KINDS:
        folder = os.path.join(args.dir, directory)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".json"):
                continue
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                entity = json.load(f)
            reply = client.call(f"{noun}.put", entity)
            print(f"{noun} {entity.get('name')}: version {reply.get('version', '?')}")
            count += 1
    print(f"imported {count} entities from {args.dir}")
    return 0


def progress_bar(done, total, status):
    width = 30
    filled = width * done // total if total else 0
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} tasks, {status}"


class Gaps:
    """Notices missed events (docs/protocol.md, "events"): every event carries its
    topic's `seq`, one more than the topic's last, and the numbering's
    `incarnation`, new when weftd restarted or another weftd took the lead."""

    def __init__(self):
        self.incarnation = None
        self.last = {}

    def missed(self, topic, event):
        """None when nothing was missed before this event, else why the state must be read again."""
        seq, incarnation = event.get("seq"), event.get("incarnation")
        if seq is None or incarnation is None:
            return None  # a weftd that does not number its events
        if incarnation != self.incarnation:
            first = self.incarnation is None
            self.incarnation, self.last = incarnation, {topic: seq}
            return None if first else "weftd's numbering started anew (a restart or a new leader)"
        last = self.last.get(topic)
        self.last[topic] = seq
        if last is not None and seq != last + 1:
            return f"{seq - last - 1} events missed on {topic}"
        return None


def subscribe_jobs(client, tenant, cluster_id=""):
    """A SUB socket on the tenant's task events (one per attempt's transition) and
    job events (one per status change), of one cluster when cluster_id is given."""
    scope = f"{cluster_id}/" if cluster_id else ""
    sub = client.subscribe(f"{tenant}/task/{scope}")
    sub.setsockopt(zmq.SUBSCRIBE, f"{tenant}/job/{scope}".encode())
    time.sleep(0.2)  # a SUB's subscription reaches the publisher asynchronously
    return sub


class Progress:
    """The job's succeeded tasks, as job.get lists them and task events add to them.

    job.get gives what happened before the subscription (tasks may finish before
    it reaches weftd); a JOIN task runs no plugin and publishes no event, but
    completes as soon as every task it comes after has succeeded, so it is
    counted then."""

    def __init__(self, job):
        self.total = job["progress"]["total"]
        self.done = set()
        self.joins = {}  # JOIN task id -> the ids it comes after
        self.read(job)

    def read(self, job):
        """Takes the job as job.get gave it (its `tasks` list)."""
        self.total = job["progress"]["total"]
        for task in job.get("tasks", []):
            if task.get("state") == "succeeded":
                self.done.add(task["id"])
            elif task.get("action") == "JOIN":
                self.joins[task["id"]] = set(task.get("after", []))
        self._joins()

    def succeeded(self, task_id):
        self.done.add(task_id)
        self._joins()

    def _joins(self):
        ready = True
        while ready:  # a JOIN may come after another
            ready = [j for j, after in self.joins.items() if after <= self.done]
            for j in ready:
                self.done.add(j)
                del self.joins[j]

    def bar(self, status):
        return progress_bar(len(self.done), self.total, status)


def cmd_cluster_create(client, args):
    # Topics start with the tenant the cluster is in: the one asked for, else the
    # credential's own (a tenant admin's or user's key acts in its tenant only).
    tenant = client.tenant or client.credential.get("tenant") or "default"
    # A user's subscription covers the clusters they own when they subscribe
    # (docs/protocol.md, "events"): a user subscribes once cluster.create has
    # answered, and reads job.get for what happened before. Other keys subscribe
    # before the job starts, so that no event is missed.
    user = client.credential.get("role") == "user"
    sub = None if user else subscribe_jobs(client, tenant)
    body = {"name": args.name, "template": args.template, "size": args.size}
    reply = client.call("cluster.create", body)
    job = reply["job"]
    cluster_id = job["cluster_id"]
    print(f"cluster {args.name}: job {job['id']} ({job.get('operation')}) started", flush=True)
    if sub is None:
        sub = subscribe_jobs(client, tenant, cluster_id)
    # Once subscribed, what happened before: the tasks that already succeeded.
    now = client.call("job.get", {"job": job["id"]})["job"]
    progress = Progress(now)
    gaps = Gaps()
    status = now["status"]
    deadline = time.monotonic() + args.timeout
    while status in ("running", "failing"):
        if time.monotonic() > deadline:
            print(f"gave up waiting for job {job['id']}", file=sys.stderr)
            return 1
        if not sub.poll(1000):
            # Events are best effort (PUB drops for slow subscribers): read the state back.
            now = client.call("job.get", {"job": job["id"]})["job"]
            status = now["status"]
            progress.read(now)
            continue
        topic, payload = sub.recv_multipart()
        event = json.loads(payload)
        why = gaps.missed(topic.decode(), event)
        if why:
            # Events were dropped: what they said is read back from weftd.
            print(f"events were missed ({why}); reading the job again", file=sys.stderr, flush=True)
            now = client.call("job.get", {"job": job["id"]})["job"]
            status = now["status"]
            progress.read(now)
            print(progress.bar(status), flush=True)
        if event.get("cluster_id") != cluster_id:
            continue
        if event.get("type") == "job" and event.get("job_id") == job["id"]:
            status = event.get("status")
            if status not in ("running", "failing"):
                break  # the last line is the job as weftd has it, below
        elif event.get("type") == "task" and event.get("state") == "succeeded":
            progress.succeeded(event.get("task_id"))
        else:
            continue
        print(progress.bar(status), flush=True)
    # The final numbers from weftd: events of the job's last turn may still be on their way.
    final = client.call("job.get", {"job": job["id"]})["job"]
    progress.read(final)
    print(progress.bar(final["status"]))
    print(f"job {final['id']}: {final['status']}{': ' + final['message'] if final.get('message') else ''}")
    return 0 if final["status"] == "succeeded" else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description="A small Weft API client (examples/python).")
    parser.add_argument("--credentials", required=True, help="a credential file (weft credentials USER -f FILE)")
    parser.add_argument("--server", help="weftd's api endpoint; default: the credential's")
    parser.add_argument("--tenant", help="the tenant to act in; default: the server's 'default'")
    parser.add_argument("--timeout-ms", type=int, default=10000, help="how long to wait for each reply")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("status", help="server.status")
    imp = commands.add_parser("catalog-import", help="put every entity of a catalog directory")
    imp.add_argument("dir")
    create = commands.add_parser("cluster-create", help="create a cluster and follow its job")
    create.add_argument("name")
    create.add_argument("--template", required=True)
    create.add_argument("--size", type=int, required=True)
    create.add_argument("--timeout", type=float, default=300, help="seconds to follow the job")
    args = parser.parse_args(argv)

    client = Client(load_credential(args.credentials), endpoint=args.server, tenant=args.tenant,
                    timeout_ms=args.timeout_ms)
    handler = {"status": cmd_status, "catalog-import": cmd_catalog_import, "cluster-create": cmd_cluster_create}
    try:
        return handler[args.command](client, args)
    except WeftError as e:
        print(f"weft_client: {e.message} ({e.code})", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
