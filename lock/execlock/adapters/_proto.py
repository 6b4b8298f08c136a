"""The locktest lock-client protocol (issue 20), Python side: read one JSON request per line from
stdin, call the adapter's acquire/release, write one JSON reply per line to stdout. Events (lost)
may come from library threads, so every write takes a lock."""
import json
import os
import sys
import threading

_out = threading.Lock()


def emit(obj):
    line = json.dumps(obj, separators=(",", ":"))
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def lost(name):
    emit({"event": "lost", "lock": name})


class Fail(Exception):
    """An operation that failed; definite=False when it may have taken effect."""

    def __init__(self, error, definite):
        super().__init__(error)
        self.definite = definite


def env():
    e = os.environ
    return {
        "backend": e.get("LOCKTEST_BACKEND", ""),
        "endpoints": [h for h in e.get("LOCKTEST_ENDPOINTS", "").split(",") if h],
        "prefix": e.get("LOCKTEST_PREFIX", "/locktest/").rstrip("/") + "/",
        "ttl": float(e.get("LOCKTEST_TTL", "5")),
        "client": e.get("LOCKTEST_CLIENT", "c0"),
    }


def hostport(endpoint):
    host, port = endpoint.rsplit(":", 1)
    return host, int(port)


def serve(acquire, release):
    """acquire(name, timeout_s) -> dict (token/key) or raises Fail; release(name) -> None or raises Fail."""
    for raw in sys.stdin:
        if not raw.strip():
            continue
        req = json.loads(raw)
        rid, op, name = req.get("id"), req.get("op"), req.get("lock")
        try:
            if op == "acquire":
                grant = acquire(name, req.get("timeout_ms", 5000) / 1000.0)
                emit(dict({"id": rid, "ok": True}, **grant))
            elif op == "release":
                release(name)
                emit({"id": rid, "ok": True})
            else:
                emit({"id": rid, "ok": False, "error": "unknown op %r" % op, "definite": True})
        except Fail as f:
            emit({"id": rid, "ok": False, "error": str(f), "definite": f.definite})
        except Exception as ex:  # anything unexpected: we cannot know whether it took effect
            emit({"id": rid, "ok": False, "error": "%s: %s" % (type(ex).__name__, ex), "definite": False})
