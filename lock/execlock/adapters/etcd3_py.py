#!/usr/bin/python3
"""locktest adapter: python-etcd3 lock (Debian python3-etcd3 0.12.0), as its docs say:
etcd.lock(name, ttl=TTL).acquire(timeout=...), release(). The key is always '/locks/' + name
(Lock.lock_prefix); the name carries LOCKTEST_PREFIX. No fencing token: the Lock keeps neither the
Txn's revision nor the key's create revision. The lease is never refreshed (the docs leave that to
the caller): the library cannot learn it lost the lock, except when release finds the key gone.
Debian 12 pairs it with tenacity 8.2.1, whose wait() call the Lock's old-style wait callback does
not accept (kragniz/python-etcd3#2149): an acquire that finds the key taken raises TypeError at once
instead of waiting. `--poll` works around it with acquire(timeout=0) every 100 ms (not the docs' way)."""
import sys
import time

import etcd3
from etcd3.exceptions import ConnectionFailedError, ConnectionTimeoutError

import _proto as p

cfg = p.env()
host, port = p.hostport(cfg["endpoints"][0])  # one endpoint only: 0.12 has no multi-endpoint client
etcd = etcd3.client(host=host, port=port)  # default: no call timeout
held = {}
POLL = "--poll" in sys.argv


def acquire(name, timeout_s):
    lk = etcd.lock(cfg["prefix"].lstrip("/") + name, ttl=int(cfg["ttl"]))
    try:
        if POLL:
            deadline = time.monotonic() + timeout_s
            ok = lk.acquire(timeout=0)
            while not ok and time.monotonic() + 0.1 < deadline:
                time.sleep(0.1)
                ok = lk.acquire(timeout=0)
        else:
            ok = lk.acquire(timeout=timeout_s)
    except TypeError as ex:  # python-etcd3#2149: raised after the Txn found the key taken
        raise p.Fail("TypeError (python-etcd3#2149, lock held by another): %s" % ex, True)
    except (ConnectionFailedError, ConnectionTimeoutError) as ex:
        raise p.Fail("%s: %s" % (type(ex).__name__, ex), False)
    if not ok:
        raise p.Fail("timeout: %s not acquired in %.3fs" % (lk.key, timeout_s), True)
    held[name] = lk
    return {"key": lk.key}


def release(name):
    lk = held.pop(name, None)
    if lk is None:
        raise p.Fail("not held: %s" % name, True)
    try:
        ok = lk.release()  # Txn: delete if value == our uuid; the lease is left to expire
    except (ConnectionFailedError, ConnectionTimeoutError) as ex:
        raise p.Fail("%s: %s" % (type(ex).__name__, ex), False)
    if not ok:
        p.lost(name)
        raise p.Fail("not owned: %s was gone or another's at release" % lk.key, True)


p.serve(acquire, release)
