#!/usr/bin/env node
// locktest adapter: the etcd3 npm package's Lock (1.1.2), as its docs say:
// client.lock(name).ttl(TTL).acquire() / release(). The Lock does not wait: acquire() makes one
// attempt (Txn: create the key if absent, under a fresh lease) and throws EtcdLockFailedError if
// the key exists; this adapter retries it every 100 ms until timeout_ms. The lease is kept alive
// (keepalive every TTL/3). No fencing token: the Lock hides the Txn's revision; it exposes only
// leaseId(). Lost: the Lock has no event; its (TypeScript-private) lease emits 'lost'.
// `--election`: the package's Election instead, as its docs say: election(name, TTL).campaign(value),
// wait() for 'elected', resign() to release (it revokes the campaign's lease); the token is the
// campaign key's create revision, as etcd's Go Election uses it. `--etcd3=1.1.0`: the package's
// 1.1.0 release (installed as etcd3-1.1.0), whose campaign waits for the one key just before its own
// and then leads, though an older key, the leader's, still stands (microsoft/etcd3#176; 1.1.1 waits
// again until no older key is left).
'use strict';
const version = process.argv.find((a) => a.startsWith('--etcd3='))?.slice('--etcd3='.length);
const { Etcd3, EtcdLockFailedError, Election } = require(version ? `etcd3-${version}` : 'etcd3');
const p = require('./_proto');

const cfg = p.env();
const election = process.argv.includes('--election');
const urls = cfg.etcdUrls.length ? cfg.etcdUrls : cfg.endpoints.map((h) => `http://${h}`);
const client = new Etcd3({ hosts: urls }); // defaults: 3 retries, no call deadline
const held = new Map();
const RETRY_MS = 100;

async function acquire(name, timeoutMs) {
  if (election) return campaign(name, timeoutMs);
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

// The package names an election's keys NAMESPACE + 'election/' + name + '/' + lease; the observer
// reads a key's lock from PREFIX + name + '/…' (as etcd's Go Election names them). So the package's
// election prefix is set empty and the namespace is PREFIX without its slash.
if (election) Election.prefix = '';
const electionNamespace = client.namespace(cfg.prefix.replace(/\/$/, ''));

// campaign runs for name's election until elected or timeoutMs; a campaign given up resigns, which
// revokes its lease and with it its key.
async function campaign(name, timeoutMs) {
  const c = electionNamespace.election(name, Math.max(1, Math.round(cfg.ttl))).campaign(cfg.client);
  let timer;
  const timeout = new Promise((_, refuse) => {
    timer = setTimeout(() => refuse(new Error(`timeout: ${name} not elected`)), timeoutMs);
  });
  try {
    await Promise.race([c.wait(), timeout]);
  } catch (err) {
    const revoked = await c.resign().then(() => true, () => false);
    throw new p.Fail(`${err.name}: ${err.message}`, revoked);
  } finally {
    clearTimeout(timer);
  }
  held.set(name, c);
  c.on('error', () => held.get(name) === c && p.lost(name)); // the lease was lost
  return { key: await c.getCampaignKey(), token: Number(c.keyRevision) };
}

async function release(name) {
  const lock = held.get(name);
  if (!lock) throw new p.Fail(`not held: ${name}`, true);
  held.delete(name);
  try {
    await (election ? lock.resign() : lock.release()); // revokes the lease; an already expired lease is ignored silently
  } catch (err) {
    throw new p.Fail(`${err.name}: ${err.message}`, false);
  }
}

// The client connects lazily, and the first request of each kind loads and compiles its code: a cold
// first campaign cost 0.10-0.13 s of CPU, a warm one 0.02, and on a loaded machine three cold ones
// outlasted the 5 s op timeout, none granted. So the adapter makes those requests as it starts, while
// locktest waits for it to settle (a busy process is not yet up): a Txn of reads, a sorted range read
// and a lease granted and revoked, none of them on a lock's key. It does not hold up the reading of
// requests: a warm-up blocked on unreachable servers is idle, and taken to be up.
async function warmUp() {
  const key = cfg.prefix + 'warm-up';
  await client.if(key, 'Create', '==', 0).then(client.get(key)).else(client.get(key)).commit();
  await client.getAll().prefix(key).sort('Create', 'Descend').limit(1).keys();
  const lease = client.lease(Math.max(1, Math.round(cfg.ttl)), { autoKeepAlive: false });
  await lease.grant();
  await lease.revoke();
}
warmUp().catch((err) => console.error(`etcd3_node: warm-up: ${err}`));

p.serve(acquire, release);
