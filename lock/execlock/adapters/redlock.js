#!/usr/bin/env node
// locktest adapter: @sesamecare-oss/redlock 1.4.0 over ioredis, as its README says: one ioredis
// client per endpoint (one per independent master), new Redlock(clients). Default mode:
// redlock.acquire([key], TTL ms) / lock.release(): no extension, so the library never learns of a
// loss except at release. `--using`: redlock.using(), which auto-extends the lock and aborts its
// signal when an extension fails: that abort is reported as lost. No fencing token (the value is
// 16 random bytes); key = the Redis key. acquire takes no timeout: timeout_ms is mapped to the
// documented retryCount (retryDelay 200 ms apart), the one knob the library has for it.
// `--redlock=5.0.0-beta.2`: mike-marcacci's redlock 5.0.0-beta.2 (installed as redlock-5.0.0-beta.2),
// the code @sesamecare-oss/redlock forked, instead: its acquire dates the lock's expiration from the
// start of its first attempt, however many retries it took (node-redlock#296).
'use strict';
const Redis = require('ioredis');
const version = process.argv.find((a) => a.startsWith('--redlock='))?.slice('--redlock='.length);
const lib = version ? require(`redlock-${version}`) : require('@sesamecare-oss/redlock');
const { ExecutionError, ResourceLockedError } = lib;
const Redlock = version ? lib.default : lib.Redlock;
const p = require('./_proto');

const cfg = p.env();
const using = process.argv.includes('--using');
const clients = cfg.endpoints.map((hp) => {
  const [host, port] = hp.split(':');
  return new Redis({ host, port: Number(port) }); // defaults: reconnect forever, no command timeout
});
const redlock = new Redlock(clients);
const ttlMs = Math.round(cfg.ttl * 1000);
const held = new Map(); // name -> { lock } or, with --using, { done, finished }

// Every client has voted and every vote against was "the key is there (or is not ours)": the
// operation surely did nothing. An attempt's stats resolve only once every client has answered,
// which for a dead master is ioredis's ~75 s of reconnects: do not wait for them (unknown then).
async function definite(err) {
  if (!(err instanceof ExecutionError)) return false;
  const now = new Promise((resolve) => setImmediate(() => resolve(null)));
  const stats = await Promise.race([Promise.all(err.attempts), now]);
  if (!stats) return false;
  return stats.every((s) => [...s.votesAgainst.values()].every((e) => e instanceof ResourceLockedError));
}

async function acquire(name, timeoutMs) {
  const key = cfg.prefix + name;
  const settings = { retryCount: Math.max(0, Math.floor(timeoutMs / redlock.settings.retryDelay)) };
  try {
    if (!using) {
      held.set(name, { lock: await redlock.acquire([key], ttlMs, settings) });
    } else {
      const h = {};
      await new Promise((granted, refused) => {
        let done;
        const finished = redlock.using([key], ttlMs, settings, (signal) => {
          signal.addEventListener('abort', () => {
            h.lost = true;
            p.lost(name);
          });
          granted();
          return new Promise((r) => (done = r)); // hold until release
        });
        finished.catch(refused); // a refusal before the grant; after it, release() sees the error
        Object.assign(h, { done: () => done(), finished });
      });
      held.set(name, h);
    }
  } catch (err) {
    throw new p.Fail(`${err.name}: ${err.message}`, await definite(err));
  }
  return { key };
}

async function release(name) {
  const h = held.get(name);
  if (!h) throw new p.Fail(`not held: ${name}`, true);
  held.delete(name);
  try {
    if (using) {
      h.done();
      await h.finished; // using() releases after the routine returns
    } else {
      await h.lock.release();
    }
  } catch (err) {
    // a quorum said "not ours": the key had expired (and may be another's); nothing was deleted
    if (await definite(err)) {
      if (!h.lost) p.lost(name);
      throw new p.Fail(`${err.name}: ${err.message}`, true);
    }
    throw new p.Fail(`${err.name}: ${err.message}`, false);
  }
}

p.serve(acquire, release);
