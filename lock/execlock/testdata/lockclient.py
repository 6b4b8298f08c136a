#!/usr/bin/env python3
"""A lock client of locktest's protocol in Python's standard library alone, for the tests: a lease lock
on etcd over its JSON gateway (grant a lease, create the key if absent under it, keep the lease alive;
the token is the key's create revision), or a TTL key on Redis over RESP (SET NX PX, a Lua
compare-and-delete to release; no token). Flags make it broken in one way each, as a lock can be:

  --no-renew      never renews its lease: a holder loses its lock after the TTL, and never says so
  --release-any   releases by deleting the key whoever holds it
  --stale-token   answers every grant with token 1
  --grant-always  says it holds the lock without taking it
  --out-of-turn   answers each release twice
  --bad-id        answers its third request with the wrong id
  --garbage       answers its third request with a line that is not JSON
  --crash-reply   dies in the middle of its third reply
  --silent        never answers an acquire
  --exit-at-once  exits as it starts, saying why on stderr
  --no-key        leaves the key out of its grants
  --no-revision   leaves the decision revision out of its grants (the protocol's minimum)
  --impatient     etcd: queues (a key of its own under the lock's name; the lowest create revision
                  holds), but waits only 500 ms for the keys ahead of it, then takes the lock anyway;
                  tells no decision revision
  --lost-at-once  says each grant is lost in the same write as its reply (a lock that calls a grant
                  lost at once: node-redlock#296)
  --slow-start    is busy for 1.5 s as it starts (as a JVM loading its classes), then serves
"""
import base64
import json
import os
import socket
import sys
import threading
import time
import urllib.request

FLAGS = set(a for a in sys.argv[1:] if a.startswith("--"))
if "--exit-at-once" in FLAGS:
    sys.stderr.write("lockclient: cannot reach the lock service: told to exit at once\n")
    sys.exit(3)
if "--slow-start" in FLAGS:
    busy_until = time.monotonic() + 1.5
    while time.monotonic() < busy_until:
        pass

E = os.environ
BACKEND = E["LOCKTEST_BACKEND"]
PREFIX = E["LOCKTEST_PREFIX"]
TTL = int(E["LOCKTEST_TTL"])
out = threading.Lock()


def emit(obj):
    with out:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


class Fail(Exception):
    def __init__(self, why, definite):
        super().__init__(why)
        self.definite = definite


def b64(s):
    return base64.b64encode(s.encode()).decode()


class Etcd:
    def __init__(self):
        self.url = E["LOCKTEST_ETCD_URLS"].split(",")[0]
        self.held = {}  # name -> (key, lease, token, stop event)

    def call(self, path, body):
        req = urllib.request.Request(self.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.load(r)

    def acquire(self, name, deadline):
        key = PREFIX + name
        while True:
            # A read while the key is there: each attempt is a lease and a
            # Txn through raft, too dear to poll with.
            if "--grant-always" not in FLAGS and self.call("/v3/kv/range", {"key": b64(key), "keys_only": True}).get("kvs"):
                if time.monotonic() > deadline:
                    raise Fail("timeout: %s is held by another" % key, True)
                time.sleep(0.05)
                continue
            lease = self.call("/v3/lease/grant", {"TTL": TTL})["ID"]
            txn = self.call("/v3/kv/txn", {
                "compare": [{"key": b64(key), "target": "CREATE", "create_revision": "0"}],
                "success": [{"request_put": {"key": b64(key), "value": b64(E["LOCKTEST_CLIENT"]), "lease": lease}}]})
            if txn.get("succeeded") or "--grant-always" in FLAGS:
                token = int(txn["header"]["revision"])
                stop = threading.Event()
                self.held[name] = (key, lease, token, stop)
                if "--no-renew" not in FLAGS:
                    threading.Thread(target=self.keepalive, args=(name, lease, stop), daemon=True).start()
                # The Txn decided on the state at its revision, where the key is ours.
                return {"token": 1 if "--stale-token" in FLAGS else token, "key": key, "revision": token}
            self.call("/v3/lease/revoke", {"ID": lease})
            if time.monotonic() > deadline:
                raise Fail("timeout: %s is held by another" % key, True)
            time.sleep(0.05)

    def acquire_impatient(self, name):
        prefix = PREFIX + name + "/"
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        lease = self.call("/v3/lease/grant", {"TTL": TTL})["ID"]
        key = prefix + str(lease)
        put = self.call("/v3/kv/txn", {
            "compare": [{"key": b64(key), "target": "CREATE", "create_revision": "0"}],
            "success": [{"request_put": {"key": b64(key), "value": b64(E["LOCKTEST_CLIENT"]), "lease": lease}}]})
        token = int(put["header"]["revision"])
        stop = threading.Event()
        self.held[name] = (key, lease, token, stop)
        threading.Thread(target=self.keepalive, args=(name, lease, stop), daemon=True).start()
        give_up = time.monotonic() + 0.5
        while time.monotonic() < give_up:
            ahead = self.call("/v3/kv/range", {"key": b64(prefix), "range_end": b64(end), "keys_only": True,
                                               "max_create_revision": str(token - 1)})
            if not ahead.get("kvs"):
                break
            time.sleep(0.05)
        return {"token": token, "key": key}

    def keepalive(self, name, lease, stop):
        while not stop.wait(TTL / 3.0):
            try:
                ttl = int(self.call("/v3/lease/keepalive", {"ID": lease}).get("result", {}).get("TTL", 0))
            except Exception:
                continue
            if ttl <= 0 and not stop.is_set():
                emit({"event": "lost", "lock": name})
                return

    def release(self, name):
        key, lease, token, stop = self.held.pop(name)
        stop.set()
        cond = [] if "--release-any" in FLAGS else [{"key": b64(key), "target": "CREATE", "create_revision": str(token)}]
        txn = self.call("/v3/kv/txn", {"compare": cond, "success": [{"request_delete_range": {"key": b64(key)}}]})
        self.call("/v3/lease/revoke", {"ID": lease})
        if not txn.get("succeeded"):
            emit({"event": "lost", "lock": name})
            raise Fail("not released: %s was no longer ours" % key, True)


class Redis:
    RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

    def __init__(self):
        host, port = E["LOCKTEST_ENDPOINTS"].split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.f = self.sock.makefile("rb")
        self.held = {}

    def cmd(self, *args):
        b = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in (str(x).encode() for x in args))
        self.sock.sendall(b)
        return self.read()

    def read(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2].decode()
        if kind == b":":
            return int(rest)
        if kind == b"-":
            raise Fail("redis: " + rest.decode(), False)
        return rest.decode()

    def acquire(self, name, deadline):
        key, value = PREFIX + name, "%s:%f" % (E["LOCKTEST_CLIENT"], time.time())
        while True:
            if self.cmd("SET", key, value, "NX", "PX", TTL * 1000) == "OK" or "--grant-always" in FLAGS:
                self.held[name] = (key, value)
                return {"key": key}
            if time.monotonic() > deadline:
                raise Fail("timeout: %s is held by another" % key, True)
            time.sleep(0.05)

    def release(self, name):
        key, value = self.held.pop(name)
        if "--release-any" in FLAGS:
            self.cmd("DEL", key)
            return
        if self.cmd("EVAL", self.RELEASE, 1, key, value) != 1:
            emit({"event": "lost", "lock": name})
            raise Fail("not released: %s was no longer ours" % key, True)


lock = Etcd() if BACKEND == "etcd" else Redis()
n = 0
for raw in sys.stdin:
    req = json.loads(raw)
    n += 1
    rid = req["id"]
    if n == 3 and "--bad-id" in FLAGS:
        rid += 100
    if n == 3 and "--garbage" in FLAGS:
        emit("this is not the protocol")
        continue
    try:
        if req["op"] == "acquire":
            if "--silent" in FLAGS:
                continue
            deadline = time.monotonic() + req.get("timeout_ms", 5000) / 1000.0
            if "--impatient" in FLAGS:
                reply = dict({"id": rid, "ok": True}, **lock.acquire_impatient(req["lock"]))
            else:
                reply = dict({"id": rid, "ok": True}, **lock.acquire(req["lock"], deadline))
            if "--no-key" in FLAGS:
                reply.pop("key", None)
            if "--no-revision" in FLAGS:
                reply.pop("revision", None)
        elif req["op"] == "release":
            lock.release(req["lock"])
            reply = {"id": rid, "ok": True}
        else:
            reply = {"id": rid, "ok": False, "error": "unknown op %r" % req["op"], "definite": True}
    except Fail as f:
        reply = {"id": rid, "ok": False, "error": str(f), "definite": f.definite}
    except Exception as ex:
        reply = {"id": rid, "ok": False, "error": "%s: %s" % (type(ex).__name__, ex), "definite": False}
    if n == 3 and "--crash-reply" in FLAGS:
        with out:
            sys.stdout.write(json.dumps(reply)[:7])
            sys.stdout.flush()
            os._exit(1)
    if req["op"] == "acquire" and reply["ok"] and "--lost-at-once" in FLAGS:
        with out:
            sys.stdout.write(json.dumps(reply) + "\n" + json.dumps({"event": "lost", "lock": req["lock"]}) + "\n")
            sys.stdout.flush()
        continue
    emit(reply)
    if req["op"] == "release" and "--out-of-turn" in FLAGS:
        emit(reply)
