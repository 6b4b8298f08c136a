#!/usr/bin/python3
"""A deliberately broken lock client of locktest's protocol on ZooKeeper, with kazoo (python3-kazoo),
for the tests: it queues as the ZooKeeper lock recipe does (an ephemeral sequential znode of its own
under the lock's path; the lowest sequence number holds), but waits only 500 ms for the znodes ahead
of it, then takes the lock anyway. token = its znode's creation zxid, key = its znode; no decision
revision (the protocol's minimum). --no-token: no token either, as kazoo's own Lock (key only).
--patient: the correct lock: waits for the znodes ahead of it until the request's timeout, then gives up
(deleting its znode), never taking the lock out of turn."""
import json
import os
import sys
import time

from kazoo.client import KazooClient

E = os.environ
PREFIX = E["LOCKTEST_PREFIX"].rstrip("/") + "/"
zk = KazooClient(hosts=E["LOCKTEST_ENDPOINTS"], timeout=float(E["LOCKTEST_TTL"]))
zk.start()
held = {}


def seq(node):
    return int(node[-10:])


class Refused(Exception):
    pass


def acquire(name, timeout_s):
    path = PREFIX + name
    node = zk.create(path + "/n-", ephemeral=True, sequence=True, makepath=True)
    token = zk.exists(node).czxid
    patient = "--patient" in sys.argv
    give_up = time.monotonic() + (timeout_s if patient else 0.5)
    while True:
        if not [k for k in zk.get_children(path) if seq(k) < seq(node)]:
            break
        if time.monotonic() >= give_up:
            if patient:
                zk.delete(node)
                raise Refused("timeout: %s not first in %.3fs" % (node, timeout_s))
            break
        time.sleep(0.05)
    held[name] = node
    if "--no-token" in sys.argv:
        return {"key": node}
    return {"token": token, "key": node}


def release(name):
    zk.delete(held.pop(name))


for raw in sys.stdin:
    req = json.loads(raw)
    try:
        if req["op"] == "acquire":
            reply = dict({"id": req["id"], "ok": True}, **acquire(req["lock"], req.get("timeout_ms", 5000) / 1000.0 - 0.2))
        else:
            release(req["lock"])
            reply = {"id": req["id"], "ok": True}
    except Refused as ex:
        reply = {"id": req["id"], "ok": False, "error": str(ex), "definite": True}
    except Exception as ex:
        reply = {"id": req["id"], "ok": False, "error": "%s: %s" % (type(ex).__name__, ex), "definite": False}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
