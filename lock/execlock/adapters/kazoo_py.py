#!/usr/bin/python3
"""locktest adapter: kazoo Lock (Debian python3-kazoo 2.8.0), as its docs say: one
zk.Lock(path, identifier) per lock name, acquire(timeout=...), release(), and a connection listener.
The session timeout is LOCKTEST_TTL (a ZooKeeper session is the lock's lease; kazoo's default is 10 s).
No fencing token: kazoo's Lock keeps neither its node's czxid nor any other fencing value (reading
the czxid would take a read of our own of the node after the grant). key = the lock's own znode
(kazoo's lock.node under the lock's path), so the observer attributes its deletion. lost: when the
listener reports the session LOST (its ephemeral nodes are gone); SUSPENDED is not yet a loss.
A release after the loss succeeds (kazoo ignores the node already gone)."""
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import LockTimeout

import _proto as p

cfg = p.env()
zk = KazooClient(hosts=",".join(cfg["endpoints"]), timeout=cfg["ttl"])
locks = {}  # name -> kazoo Lock, reused as the docs do (it finds its own node again after a lost reply)
held = set()


def on_state(state):  # on kazoo's connection thread: must not block
    if state == KazooState.LOST:
        for name in list(held):
            held.discard(name)
            p.lost(name)


zk.add_listener(on_state)
zk.start()


def acquire(name, timeout_s):
    lk = locks.get(name)
    if lk is None:
        lk = locks[name] = zk.Lock(cfg["prefix"] + name, cfg["client"])
    try:
        ok = lk.acquire(timeout=timeout_s)
    except LockTimeout as ex:  # the wait ran out while connected; kazoo deleted its node
        raise p.Fail("LockTimeout: %s" % ex, True)
    if not ok:  # kazoo's retries of a lost connection ran out: its node may be left
        raise p.Fail("not acquired in %.3fs (connection retries ran out)" % timeout_s, False)
    held.add(name)
    return {"key": lk.path + "/" + lk.node}


def release(name):
    lk = locks.get(name)
    if lk is None or not lk.is_acquired:
        raise p.Fail("not held: %s" % name, True)
    lk.release()
    held.discard(name)


p.serve(acquire, release)
