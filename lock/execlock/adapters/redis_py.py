#!/usr/bin/python3
"""locktest adapter: redis-py Lock (Debian python3-redis 4.3.4), as its docs say:
r.lock(name, timeout=TTL).acquire(blocking_timeout=...), release(). No fencing token (the value is
a uuid1 string); key = the Redis key. The library never learns it lost the lock, except when release
finds the key gone or another's (LockNotOwnedError): then this adapter says lost.

Options (the catalog's scenario redis-py-3847): --retry-release retries a release that failed on a
connection error, as services retry errors; --fix=4258 applies redis-py pull request 4258
(the upstream fix of redis-py#3847) to the installed Lock: release() keeps its token until the
release is done, unless the lock was no longer owned."""
import sys
import time

import redis
import redis.lock
from redis.exceptions import ConnectionError, LockError, LockNotOwnedError

import _proto as p

cfg = p.env()
retry_release = "--retry-release" in sys.argv[1:]


def release_4258(self):
    """redis-py pull request 4258's Lock.release: the token is forgotten once the release is done (or
    the lock found no longer owned), not before the round trip."""
    expected_token = self.local.token
    if expected_token is None:
        raise LockError("Cannot release an unlocked lock")
    try:
        self.do_release(expected_token)
    except LockNotOwnedError:
        self.local.token = None
        raise
    self.local.token = None


if "--fix=4258" in sys.argv[1:]:
    redis.lock.Lock.release = release_4258

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
        if not retry_release:
            raise p.Fail("ConnectionError: %s" % ex, definite="connecting to" in str(ex))
        retry(name, lk, ex)


def retry(name, lk, first):
    """Retries a release that failed on a connection error, as services do: up to 3 times, 200 ms
    apart. Whatever it answers, the first attempt's outcome stays unknown (it may have deleted the
    key), so a failure is never definite."""
    for attempt in range(3):
        time.sleep(0.2)
        try:
            lk.release()  # redis-py 4.3.4 forgot its token: LockError "Cannot release an unlocked lock"
            return
        except ConnectionError as ex:
            last = ex
        except LockError as ex:
            last = ex
            break
    raise p.Fail("ConnectionError: %s; retried: %s: %s" % (first, type(last).__name__, last), False)


p.serve(acquire, release)
