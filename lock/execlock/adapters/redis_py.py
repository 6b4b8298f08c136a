#!/usr/bin/python3
"""locktest adapter: redis-py Lock (Debian python3-redis 4.3.4), as its docs say:
r.lock(name, timeout=TTL).acquire(blocking_timeout=...), release(). No fencing token (the value is
a uuid1 string); key = the Redis key. The library never learns it lost the lock, except when release
finds the key gone or another's (LockNotOwnedError): then this adapter says lost.

Options (the catalog's scenario redis-py-3847): --retry-release retries a release that failed on a
connection error, as services retry errors, and takes a retry's "Cannot release an unlocked lock" for
done, as they take it (see retry); --fix=4258 applies redis-py pull request 4258
(the upstream fix of redis-py#3847) to the installed Lock: release() keeps its token until the
release is done, unless the lock was no longer owned.

Options (the catalog's scenario redis-py-4279): --persistent makes the Lock hold until released
(timeout=0: "it will remain locked until release() is called", as its docs say; LOCKTEST_TTL only
paces the renewal then); --renew keeps a held lock with a thread that calls reacquire() every third of
LOCKTEST_TTL, as services keep a lock alive (the use redis-py pull request 1014 added reacquire for;
the lock is made with thread_local=False, as the docs ask of a lock used from another thread); a
renewal that finds the lock no longer owned says lost. --fix=4282 applies the invariant redis-py pull
request 4282 (the fix proposed for redis-py#4279) puts in the Lock's scripts to the installed
reacquire script: a renewal never sends PEXPIRE with a non-positive TTL (which deletes the key), so a
lock with no timeout stays without one."""
import sys
import threading
import time

import redis
import redis.lock
from redis.exceptions import ConnectionError, LockError, LockNotOwnedError

import _proto as p

cfg = p.env()
retry_release = "--retry-release" in sys.argv[1:]
persistent = "--persistent" in sys.argv[1:]
renew = "--renew" in sys.argv[1:]


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

# redis-py pull request 4282's invariant in the reacquire script: the token checked as before, but a
# non-positive TTL (a lock with timeout=0) leaves the key as it is instead of deleting it.
REACQUIRE_4282 = """
    local token = redis.call('get', KEYS[1])
    if not token or token ~= ARGV[1] then
        return 0
    end
    if tonumber(ARGV[2]) <= 0 then
        return 1
    end
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 1
"""

if "--fix=4282" in sys.argv[1:]:
    redis.lock.Lock.LUA_REACQUIRE_SCRIPT = REACQUIRE_4282  # before the first Lock registers the scripts

host, port = p.hostport(cfg["endpoints"][0])
r = redis.Redis(host=host, port=port)  # defaults: no socket timeout, no retry
held = {}
renewals = {}  # name -> the Event that stops its renewal thread


def keep(name, lk, stop):
    """Renews lk every third of the TTL until stop is set; says lost when the lock is no longer owned.
    redis-py 4.3.4's reacquire of a lock with timeout=0 deletes the key and returns True (#4279)."""
    while not stop.wait(cfg["ttl"] / 3):
        try:
            lk.reacquire()
        except LockNotOwnedError:
            if held.get(name) is lk:
                p.lost(name)
            return
        except (ConnectionError, LockError):
            pass  # the next renewal tries again; the TTL bounds the claim meanwhile


def acquire(name, timeout_s):
    key = cfg["prefix"] + name
    # without timeout (or 0) the key never expires; a lock renewed from another thread keeps its
    # token where that thread sees it
    lk = r.lock(key, timeout=0 if persistent else cfg["ttl"], thread_local=not renew)
    try:
        ok = lk.acquire(blocking_timeout=timeout_s)
    except ConnectionError as ex:
        # refused at connect: the SET was never sent; anything else: it may have been applied
        raise p.Fail("ConnectionError: %s" % ex, definite="connecting to" in str(ex))
    if not ok:
        raise p.Fail("timeout: lock %s not acquired in %.3fs" % (key, timeout_s), True)
    held[name] = lk
    if renew:
        stop = renewals[name] = threading.Event()
        threading.Thread(target=keep, args=(name, lk, stop), daemon=True).start()
    return {"key": key}


def release(name):
    lk = held.pop(name, None)
    if lk is None:
        raise p.Fail("not held: %s" % name, True)
    stop = renewals.pop(name, None)
    if stop is not None:
        stop.set()
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
    apart. A retry answered "Cannot release an unlocked lock" is taken at redis-py's word, as a
    service takes it: the Lock holds no token, which it says of a lock it has released, so the
    release is done (redis-py 4.3.4 forgot its token before the first attempt's round trip, #3847:
    it says so whether or not the key went). Otherwise the first attempt's outcome stays unknown
    (it may have deleted the key), so a failure is never definite."""
    for attempt in range(3):
        time.sleep(0.2)
        try:
            lk.release()
            return
        except ConnectionError as ex:
            last = ex
        except LockNotOwnedError as ex:
            last = ex
            break
        except LockError:
            return
    raise p.Fail("ConnectionError: %s; retried: %s: %s" % (first, type(last).__name__, last), False)


p.serve(acquire, release)
