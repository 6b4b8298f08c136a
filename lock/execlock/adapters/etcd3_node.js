#!/usr/bin/env node
// locktest adapter: the etcd3 npm package's Lock (1.1.2), as its docs say:
// client.lock(name).ttl(TTL).acquire() / release(). The Lock does not wait: acquire() makes one
// attempt (Txn: create the key if absent, under a fresh lease) and throws EtcdLockFailedError if
// the key exists; this adapter retries it every 100 ms until timeout_ms. The lease is kept alive
// (keepalive every TTL/3). No fencing token: the Lock hides the Txn's revision; it exposes only
// leaseId(). Lost: the Lock has no event; its (TypeScript-private) lease emits 'lost'.
'use strict';
const { Etcd3, EtcdLockFailedError } = require('etcd3');
const p = require('./_proto');

const cfg = p.env();
const urls = cfg.etcdUrls.length ? cfg.etcdUrls : cfg.endpoints.map((h) => `http://${h}`);
const client = new Etcd3({ hosts: urls }); // defaults: 3 retries, no call deadline
const held = new Map();
const RETRY_MS = 100;

async function acquire(name, timeoutMs) {
  const key = cfg.prefix + name;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lock = client.lock(key).ttl(Math.max(1, Math.round(cfg.ttl)));
    try {
      await lock.acquire();
      held.set(name, lock);
      lock.lease.on('lost', () => held.get(name) === lock && p.lost(name));
      return { key };
    } catch (err) {
      if (!(err instanceof EtcdLockFailedError)) {
        // the Txn may have applied under a lease this process keeps alive: revoke it
        await lock.release().catch(() => undefined);
        throw new p.Fail(`${err.name}: ${err.message}`, false);
      }
      if (Date.now() + RETRY_MS > deadline) throw new p.Fail(`timeout: ${key} not acquired`, true);
      await new Promise((r) => setTimeout(r, RETRY_MS));
    }
  }
}

async function release(name) {
  const lock = held.get(name);
  if (!lock) throw new p.Fail(`not held: ${name}`, true);
  held.delete(name);
  try {
    await lock.release(); // revokes the lease; an already expired lease is ignored silently
  } catch (err) {
    throw new p.Fail(`${err.name}: ${err.message}`, false);
  }
}

p.serve(acquire, release);
