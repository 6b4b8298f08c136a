#!/usr/bin/python3
"""locktest adapter: redis-py Lock (Debian python3-redis 4.3.4), as its docs say:
r.lock(name, timeout=TTL).acquire(blocking_timeout=...), release(). No fencing token (the value is
a uuid1 string); key = the Redis key. The library never learns it lost the lock, except when release
finds the key gone or another's (LockNotOwnedError): then this adapter says lost."""
import redis
from redis.exceptions import ConnectionError, LockError, LockNotOwnedError

import _proto as p

cfg = p.env()
host, port = p.hostport(cfg["endpoints"][0])
r = redis.Redis(host=host, port=port)  # defaults: no socket timeout, no retry
held = {}


def acquire(name, timeout_s):
    key = cfg["prefix"] + name
    lk = r.lock(key, timeout=cfg["ttl"])  # without timeout the key never expires
    try:
        ok = lk.acquire(blocking_timeout=timeout_s)
    except ConnectionError as ex:
        # refused at connect: the SET was never sent; anything else: it may have been applied
        raise p.Fail("ConnectionError: %s" % ex, definite="connecting to" in str(ex))
    if not ok:
        raise p.Fail("timeout: lock %s not acquired in %.3fs" % (key, timeout_s), True)
    held[name] = lk
    return {"key": key}


def release(name):
    lk = held.pop(name, None)
    if lk is None:
        raise p.Fail("not held: %s" % name, True)
    try:
        lk.release()
    except LockNotOwnedError as ex:  # expired (and maybe taken by another): nothing was deleted
        p.lost(name)
        raise p.Fail("LockNotOwnedError: %s" % ex, True)
    except LockError as ex:
        raise p.Fail("LockError: %s" % ex, True)
    except ConnectionError as ex:
        raise p.Fail("ConnectionError: %s" % ex, definite="connecting to" in str(ex))


p.serve(acquire, release)
