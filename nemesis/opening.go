package nemesis

import (
	"math/rand/v2"
	"slices"
	"time"
)

// The openings of an aimed schedule: one strike early in the run for each
// class of moment where lock bugs live, before the faults drawn at random.
// Those are spread over many families whose starts and stops take
// seconds each (a member removed and added back, a lost release waiting
// for its client's next grant), and a 30 s run draws only five or six of
// them: a class that needs one fault at one moment (a waiter's lease
// ended while it queues: etcd#11456, etcd#11051; a release whose request
// never arrived: etcd#22123) was often struck by none. Each opening is
// marked with param opening, which the aim pass and holderFirst
// leave alone.

// openings are the strikes an aimed schedule opens with, in order, their
// At left to the caller: the whole cluster's outage, for a session lock
// (outageOpening: first, at a moment of its own, its restart over before
// the others look for theirs), a waiter's links cut as its acquire gives
// up, for a session lock too (givingUpOpening: second, below), a listing
// and a watch raced by a release, for a session lock too
// (lostWatchOpening: third, lostwatch.go), the lease
// of a holder with work ahead ended (holderOpening), a queued waiter's
// lease ended (waiterOpening), the holder's lost release reply
// (openingStrike), the holder's release whose request is lost
// (requestOpening), and a waiter's clock stepped ahead (clockOpening);
// those fams and the run offer.
//
// The giving-up cut comes right after the outage. Last, behind the
// others' waits for their moments, it struck 26.5-29.1 s into a 30 s run,
// and the orphan it made was told, if at all, at the run's very end
// (kazoo_py.py --lock-per-acquire, seeds 1-5: 3 of 5, at 28.4-30.8 s;
// held-out seeds: 2 of 5). Right after the outage it struck 6.8-15.9 s in
// (seeds 1-5: 4 of 5, at 8.7-18.0 s; seeds 6-10: 4 of 5, at 13.1-28.4 s,
// the latest behind a restart of 15 s), and the Curator bugs, caught by
// the outage, were caught as often (curator-mutex: 4 of 5 on seeds 1-5,
// 5 of 5 on seeds 6-10 as before, at restarts of 0.7-0.9 s;
// leader-latch: 5 and 4 of 5). Before the outage it would put off
// the outage's moment by its look, and its hold of the holder's release
// would leave the waiters stale, where the outage wants them fresh; behind
// it, it costs the outage nothing (the Curator bugs' grant on an old
// session's node comes within TTL/4 of the restart, before it looks), and
// the others its look (up to aimWait) and its cut.
// Where no lease can be revoked, the lost release reply goes first, as
// the waiter's strike must not (below), and the clock step before it:
// last, behind the others' waits for their moments (the lost replies
// held until their client's next grant, the waiter's strike's look for a
// fresh queue), it came 19.7-23.3 s into a 30 s run and, if it missed,
// nothing followed (pg-lease-client-clock, seeds 21-26). It costs the
// others its TTL/4 and its wait for a holder with work ahead, and where
// it harms, what the harm stalls (pg-lease-client-clock: the lost release
// reply at 5.8-7.4 s, not 2.1-4.1 s). Where leases can be revoked (etcd),
// whose locks judge no lease on a client's clock, it stays last.
//
// The holder's goes first, instant: a lock whose release deletes the key
// whoever holds it (unlock-any) harms only once a holder lost its lock
// mid-section, and such a strike, drawn at random, came behind the
// openings' 12-18 s if at all (seeds 11-20: 3 of 10, at 18.8-30.4 s).
// It also ends the section the clients first queued behind: the
// waiter's strike, which wants a section begun while every waiter is
// fresh, found none within its two TTLs at the start of a run, where a
// slow section or two held every client queued since the start, and
// struck the waiter longest in line, which gave up first (mutex-3.4
// seeds 13 and 17 with the waiter's strike first: 7 of 9). Behind the
// holder's, the waiter's comes before the lost releases, each of which
// stays in force until its client is granted again (up to two TTLs and
// its next section).
//
// None where the run offers no lost replies: a run of a family or two
// (sweep's time to harm under pause, isolate or lease alone) is about
// those faults on the holder, and a waiter's strike first put off the
// first harm (pause, seeds 1-6: the median first stale write at 7.11 s,
// 4.19 s without it).
func (c Config) openings(seed int64, fams []Family) []Entry {
	if !c.opensLost(fams) {
		return nil
	}
	lost := openingStrike(seed, c)
	h, revokes := c.holderOpening(seed, fams)
	k, clocks := c.clockOpening(seed, fams)
	var out []Entry
	if o, ok := c.outageOpening(fams); ok {
		out = append(out, o)
	}
	if g, ok := c.givingUpOpening(seed, fams); ok {
		out = append(out, g)
	}
	out = append(out, c.lostWatchOpening(seed, fams)...)
	switch {
	case revokes:
		out = append(out, h)
	case clocks:
		out = append(out, k, lost)
	default:
		out = append(out, lost)
	}
	if w, ok := c.waiterOpening(seed, fams); ok {
		out = append(out, w)
	}
	if revokes {
		out = append(out, lost)
	}
	out = append(out, c.requestOpening(seed))
	if clocks && revokes {
		out = append(out, k)
	}
	return out
}

// givingUpStream is the PCG stream of the giving-up opening's draws.
const givingUpStream = 0x67697665

// givingUpOpening is an aimed schedule's cut of a waiter's links across
// the moment its acquire gives up (param giving_up: the wait at which it
// strikes), shorter than its session: a lock that cleans up its claim
// when it gives up sends that clean-up into the cut, and a clean-up whose
// error is swallowed leaves the claim in line, owned by a session that
// lives on once the links are back, which stalls the lock (kazoo#732).
// Random isolations last 1.5-3 TTLs and end the session, and the claim
// with it. It strikes TTL/5 before an exec lock's give-up (execlock's
// timeout_ms: a second before the harness's deadline, at most a fifth of
// it), which the harness's clock of the wait runs ahead of by the
// request's trip, and cuts for TTL*9/20: a ZooKeeper client pings every
// third of its session, so a session's servers may have heard nothing
// for TTL/3 when the cut begins, and the client reconnects at the heal.
//
// Only where the system can neither revoke leases nor expire keys early
// (whether the run draws those or not): there a waiter's claim is its
// connection's session (ZooKeeper's ephemeral node, a database's session
// lock), kept through a brief cut; etcd's and Redis's schedules are left
// as they were. And only for a lock in a process of its own
// (UntoldWaiters), whose clean-up locktest does not know: its own recipes
// do not swallow a clean-up's error, and there the opening's wait for a
// waiter about to give up pushed the random faults past the run's end
// (zk-unprotected, seeds 281-285: its lost create reply never struck in 4
// of 5). The client drawn from the seed is the fallback.
func (c Config) givingUpOpening(seed int64, fams []Family) (Entry, bool) {
	if !c.sessionLock() || !c.offersKind(fams, Isolate) {
		return Entry{}, false
	}
	rng := rand.New(rand.NewPCG(uint64(seed), givingUpStream))
	gives := c.OpTimeout - min(time.Second, c.OpTimeout/5)
	return Entry{
		Fault: Isolate, Target: TargetWaiter,
		Fallback: c.Clients[rng.IntN(len(c.Clients))],
		Duration: c.TTL * 9 / 20,
		Params:   map[string]string{"giving_up": (gives - c.TTL/5).String(), "opening": "giving-up"},
	}, true
}

// offers says whether the run's system can carry out kind, drawn or not
// (nil Offers: every kind).
func (c Config) offers(kind string) bool { return c.Offers == nil || slices.Contains(c.Offers, kind) }

// holderStream is the PCG stream of the holder opening's draw.
const holderStream = 0x686f6c64

// holderOpening is an aimed schedule's revocation of the lease of a
// holder with work ahead (param ahead: at least workAhead of its section
// left), where the system revokes leases: the server deletes its key at
// once, another client is granted, and the first still works and then
// releases, which a lock that deletes whatever key is there (unlock-any)
// does on the next holder's grant. It is instant; played as a pause
// where the lock tells no lease. Where leases cannot be revoked, none:
// a pause of the holder would take a TTL and more of the run, and the
// first pause drawn strikes the holder already (holderFirst). It
// lasts 2*enteredSlack, quiet after the revocation, so that the waiter's
// strike after it aims at the sections begun since: looking at once, it
// took the revoked holder's section, just begun, for one the first in
// line waits behind, and struck that waiter as the lock passed to it
// (mutex-3.4 seed 13: revoked as it was granted, on its key). The client
// drawn from the seed is the fallback.
func (c Config) holderOpening(seed int64, fams []Family) (Entry, bool) {
	if !c.Aim || len(c.Clients) == 0 || !c.offersKind(fams, LeaseRevoke) {
		return Entry{}, false
	}
	rng := rand.New(rand.NewPCG(uint64(seed), holderStream))
	return Entry{
		Fault: LeaseRevoke, Target: TargetHolder,
		Fallback: c.Clients[rng.IntN(len(c.Clients))],
		Duration: 2 * enteredSlack,
		Params:   map[string]string{"ahead": workAhead.String() + "-", "opening": "holder"},
	}, true
}

// requestOpening is the holder's lost release as an opening, whose request
// is lost with its reply (param request): the release never reaches the
// server, whose grant stays, and a service that retries it, or acquires
// again, meets that grant (etcd#22123; etcd#22082 when the retry comes
// after the next grant, which param hold_next holds open).
//
// It is cut after TTL/16, not the family's TTL/8 to TTL/4: the server
// needs no time to apply a request it never sees, and the session's
// renewals are held with it (their replies only, with a lost reply), then
// resume only a second or so after the cut; held longer, the session's
// lease ran out after the cut (election-retry seed 1, TTL 2 s: 1.4 s
// after), and with it the grant the retry should meet.
//
// It strikes a holder entering a section of at most TTL/4 (param ahead),
// whose grant is surely alive when it releases: struck as it came, the
// holder was mostly in a slow section (they hold the lock most of the
// time), and a lock that does not renew (redis-py's) had lost its key
// before its release, which then met no grant (redis-py#3847, seeds 1-3:
// 3 of 3 strikes).
func (c Config) requestOpening(seed int64) Entry {
	rng := rand.New(rand.NewPCG(uint64(seed), lostStream+2))
	return Entry{
		Fault: LostReplyRelease, Target: TargetHolder,
		Fallback: c.Clients[rng.IntN(len(c.Clients))],
		Duration: c.TTL / 16,
		Params: map[string]string{"request": "lost", "hold_next": (c.TTL / 4).String(), "opening": "release-request",
			"ahead": "0s-" + (c.TTL / 4).String()},
	}
}

// waiterStream is the PCG stream of the waiter opening's draws.
const waiterStream = 0x77616974

// waiterOpening is an aimed schedule's strike on a queued waiter's lease:
// the waiter first in line, struck as the holder enters its section (param
// ahead, bounded: a section just begun, not one under way), so that it has
// waited only through the sections before and is granted next, well before
// its acquire gives up, when no waiter has waited TTL/4 yet (param waited:
// a section begun behind a long one is passed over); struck behind a
// section under way, the first in line had often waited seconds and gave
// up first (mutex-3.4 seed 1: the revocation came 0.8 s before its
// acquire's 5 s ran out), and the last in line waited behind every section
// and gave up as well (seed 5). Its lease
// is revoked when the system offers that, behind a section of at least
// workAhead (the server deletes its key while the holder still works) and
// at most waiterSection (its acquire still waits when it ends), the
// revocation in force until the lock passes on (param until); else the
// client is paused past its lease (waiterPause) behind a section of at
// most a TTL, as a waiter of a lock in a process of its own is: its claim
// blocks the line until its lease runs out, and it wakes to a grant while
// its acquire still waits. Where the lock's waiters tell no lease
// (UntoldWaiters: a lock in a process of its own, whose revocation asPause
// plays as that pause) the pause strikes the waiter that began to wait
// last, once it has waited under TTL/8 (param waited) and every waiter
// under TTL/4 (param queue: the lock moves), behind any section: it is
// furthest from the end of its acquire, which must outlast the pause and
// then the sections still ahead of it, and it still queues when struck,
// however short the section (the first in line may be granted before the
// pause stops it). The revocation's aim found no section begun behind a
// fresh queue in a lock whose hand-offs take 50-80 ms, and struck the
// longest waiter, which gave up (exec etcdmutex34, seeds 21-30: missed 24
// and 26, the catches' strikes 2.6-7.3 s into the run). With the newest's
// wait under TTL/4 alone, a waiter struck 0.45 s into its 4 s acquire woke
// with 0.55 s of it left behind a slow section (seed 21); under TTL/8
// alone, a waiter that had just asked again, its acquire given up, was
// struck behind a stalled queue whose others had waited 3 s, and gave up
// 3 ms before the lock came to it (seed 21 again). The client drawn from
// the seed is the fallback. ok is false when the run has no clients, no
// aim, or neither kind is offered.
func (c Config) waiterOpening(seed int64, fams []Family) (Entry, bool) {
	if !c.Aim || len(c.Clients) == 0 {
		return Entry{}, false
	}
	rng := rand.New(rand.NewPCG(uint64(seed), waiterStream))
	e := Entry{Target: TargetWaiter, Fallback: c.Clients[rng.IntN(len(c.Clients))]}
	revokes, pauses := c.offersKind(fams, LeaseRevoke), c.offersKind(fams, PauseClient)
	r := c.Durations[pause{}.Spec().Name]
	switch {
	case revokes && c.UntoldWaiters && pauses:
		e.Fault = PauseClient
		e.Duration = max(r.Min, min(r.Max, waiterPause(c.TTL)))
		e.Params = map[string]string{"before_write": "false", "waiter": "newest", "waited": (c.TTL / 8).String(), "queue": (c.TTL / 4).String()}
	case revokes:
		e.Fault = LeaseRevoke
		e.Params = map[string]string{"ahead": workAhead.String() + "-" + c.waiterSection().String(), "until": "passed", "waited": (c.TTL / 4).String()}
	case pauses:
		e.Fault = PauseClient
		e.Duration = max(r.Min, min(r.Max, waiterPause(c.TTL)))
		e.Params = map[string]string{"before_write": "false", "ahead": "0s-" + c.TTL.String(), "waited": (c.TTL / 4).String()}
	default:
		return Entry{}, false
	}
	e.Params["opening"] = "waiter"
	return e, true
}

// waiterSection is the longest section behind which the waiter opening
// revokes the first in line: two TTLs, or with the operation timeout known
// short enough that the waiter, queued under TTL/4 as it begins, is still
// in its acquire when the section ends, with TTL/2 to spare for the
// holder's write and release and the hand-off on a loaded host. Behind a
// section of two TTLs (4 s) the revoked waiter's acquire was answered
// 3.5-4 s after it began in 6 of 10 runs (mutex-3.4, seeds 11-20), under
// the 5 s after which it gives up and the bug no longer shows.
func (c Config) waiterSection() time.Duration {
	d := 2 * c.TTL
	if c.OpTimeout > 0 {
		d = min(d, c.OpTimeout-c.TTL/4-c.TTL/2)
	}
	return max(d, workAhead)
}

// offersKind says whether one of fams draws kind for a run with clients.
func (c Config) offersKind(fams []Family, kind string) bool {
	for _, f := range fams {
		if slices.Contains(c.kinds(f, true), kind) {
			return true
		}
	}
	return false
}
