// The locktest lock-client protocol (issue 20), Node side: one JSON request per line on stdin,
// handled one at a time; one JSON reply per line on stdout; events (lost) at any time.
'use strict';
const readline = require('readline');

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function lost(name) {
  emit({ event: 'lost', lock: name });
}

// An operation that failed; definite=false when it may have taken effect.
class Fail extends Error {
  constructor(error, definite) {
    super(error);
    this.definite = definite;
  }
}

function env() {
  const e = process.env;
  const split = (s) => (s || '').split(',').filter(Boolean);
  return {
    backend: e.LOCKTEST_BACKEND || '',
    endpoints: split(e.LOCKTEST_ENDPOINTS),
    etcdUrls: split(e.LOCKTEST_ETCD_URLS),
    prefix: (e.LOCKTEST_PREFIX || '/locktest/').replace(/\/+$/, '') + '/',
    ttl: Number(e.LOCKTEST_TTL || '5'),
    client: e.LOCKTEST_CLIENT || 'c0',
  };
}

// acquire(name, timeoutMs) -> {token?, key?} or throws Fail; release(name) -> void or throws Fail.
async function serve(acquire, release) {
  const rl = readline.createInterface({ input: process.stdin });
  for await (const raw of rl) {
    if (!raw.trim()) continue;
    const req = JSON.parse(raw);
    try {
      if (req.op === 'acquire') {
        const grant = await acquire(req.lock, req.timeout_ms ?? 5000);
        emit({ id: req.id, ok: true, ...grant });
      } else if (req.op === 'release') {
        await release(req.lock);
        emit({ id: req.id, ok: true });
      } else {
        emit({ id: req.id, ok: false, error: `unknown op ${req.op}`, definite: true });
      }
    } catch (err) {
      if (err instanceof Fail) emit({ id: req.id, ok: false, error: err.message, definite: err.definite });
      else emit({ id: req.id, ok: false, error: `${err.name}: ${err.message}`, definite: false });
    }
  }
  process.exit(0); // stdin closed: locktest is done with us (open sockets would keep node alive)
}

module.exports = { emit, lost, Fail, env, serve };
