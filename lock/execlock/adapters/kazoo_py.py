#!/usr/bin/python3
"""locktest adapter: kazoo Lock (Debian python3-kazoo 2.8.0), as its docs say: one
zk.Lock(path, identifier) per lock name, acquire(timeout=...), release(), and a connection listener.
The session timeout is LOCKTEST_TTL (a ZooKeeper session is the lock's lease; kazoo's default is 10 s).
No fencing token: kazoo's Lock keeps neither its node's czxid nor any other fencing value (reading
the czxid would take a read of our own of the node after the grant). key = the lock's own znode
(kazoo's lock.node under the lock's path), so the observer attributes its deletion. lost: when the
listener reports the session LOST (its ephemeral nodes are gone); SUSPENDED is not yet a loss.
A release after the loss succeeds (kazoo ignores the node already gone).

Options (the catalog's scenario kazoo-732): --lock-per-acquire makes a new zk.Lock for every acquire,
as kazoo#732's workers do; --fix=760 applies kazoo pull request 760 (the fix proposed for kazoo#732)
to the installed Lock: its clean-up of a contender node after a failed acquire is retried until it
is done, whatever the acquire's timeout, instead of giving up on the first error."""
import sys

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import LockTimeout, NoNodeError
from kazoo.recipe.lock import Lock

import _proto as p

cfg = p.env()
lock_per_acquire = "--lock-per-acquire" in sys.argv[1:]


def cleanup_760(self):
    """kazoo pull request 760's clean-up: the delete of the contender node is retried (the Lock's own
    retry, which has no deadline) until it is done."""

    def cleanup():
        node = self.node or self._find_node()
        if node:
            try:
                self._delete_node(node)
            except NoNodeError:
                pass

    self._retry.copy()(cleanup)


if "--fix=760" in sys.argv[1:]:
    Lock._best_effort_cleanup = cleanup_760

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
    if lk is None or (lock_per_acquire and not lk.is_acquired):
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
