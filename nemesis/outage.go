package nemesis

import (
	"context"
	"sync"
	"time"

	"github.com/locktest/locktest/histories"
)

// outageOpening is an aimed schedule's outage of the whole cluster: every
// member crashed at once (crash-member, target all), restarted together
// from its data, as after a power cut or a careless rolling restart done
// all at once. Random crashes take one member at a time: the others expire
// the old sessions while their clients are away, and the bugs below never
// showed (leader-latch and curator-mutex, seeds 1-10: 0 of 10 runs each,
// by the adapter's log).
//
// Down TTL/2: with the restart of three servers (0.5-1.6 s measured) the
// clients are cut off past their session timeout, so that a library that
// declares its session lost after that long (Curator's LOST, 2.0 s after
// it lost the connection) makes a new one, while the restarted servers
// give every session they restore a fresh timeout: the old sessions and
// their nodes live on for one more timeout, and a lock that keeps its
// node's path across sessions grants on its old session's node once the
// nodes before it go (CURATOR-696, CURATOR-604).
//
// Its moment (outageMoment): a holder still in its section, with less
// than 1.25 TTL of it left, while every waiter has waited less than TTL/8
// (param fresh); and that holder's release is held until TTL/4 after the
// cluster is back (param hold), so that it comes once its client is back
// on its new session, which deletes its old node at once, and before the
// waiters' acquires give up (4 s after they began). Curator's mutex
// released during the outage retries its delete with backoff past that, and a node left to
// the servers' expiry goes a TTL after the restart, when every waiter
// fresh at the crash has given up (curator-mutex seed 1: the waiters gave
// up 1.3 s after the restart, the holder's node went with its old session
// 0.7 s later); a holder deep in a slow section releases too late itself.
// A restart slower than 1.5-2 s (a loaded host: 2.7-22 s at a load
// average of 20-30) leaves the waiters no time either way.
//
// Only for a session lock in a process of its own (sessionLock) on a
// cluster whose members can crash: where a waiter's claim is its
// session's, and the library, not locktest, decides when a session is
// lost.
func (c Config) outageOpening(fams []Family) (Entry, bool) {
	if !c.sessionLock() || c.Members < 2 || !c.offersKind(fams, CrashMember) {
		return Entry{}, false
	}
	return Entry{
		Fault: CrashMember, Target: AllMembers, Duration: c.TTL / 2,
		Params: map[string]string{"fresh": (c.TTL / 8).String(), "hold": (c.TTL / 4).String(), "opening": "outage"},
	}, true
}

// outage waits for e's moment (outageMoment), then holds the release of
// the holder then, if any, until e's param hold after the cluster is back
// (at most releaseHoldMax in all), which the returned func says. It notes
// the client held in params (held).
func (env *Env) outage(ctx context.Context, e Entry, params map[string]string) (back func()) {
	var (
		once   sync.Once
		backAt time.Time
	)
	done := make(chan struct{})
	back = func() {
		once.Do(func() {
			backAt = time.Now()
			close(done)
		})
	}
	h := env.outageMoment(ctx, e, params)
	hold, err := time.ParseDuration(e.Params["hold"])
	if env.Clients == nil || err != nil || hold <= 0 {
		return back
	}
	if h == "" {
		var ok bool
		if h, _, ok = env.Clients.Holder(""); !ok {
			return back
		}
	}
	bound := time.Now().Add(releaseHoldMax)
	_, err = env.Clients.Intercept(h, histories.Release, func() {
		select {
		case <-done:
			until := backAt.Add(hold)
			if until.After(bound) {
				until = bound
			}
			sleepUntil(ctx, until)
		case <-ctx.Done():
		case <-time.After(time.Until(bound)):
		}
	}, func(error) {})
	if err == nil {
		params["held"] = h
	}
	return back
}

// releaseHoldMax bounds a hold of the holder's release (the outage's from
// the crash on, the giving-up opening's): a release held past the run's
// operation timeout (5 s by default) would be given up as unknown.
const releaseHoldMax = 4 * time.Second

// outageMoment waits, as aim does, for e's moment: a holder still in its
// section, with less than 1.25 TTL of it left, while a client is queued
// in Acquire and every waiter has waited less than e's param fresh. It
// returns that holder ("" when it found none) and says in params whether
// it found one (aimed).
//
// 1.25 TTL: such a section ends by the time the servers are back (TTL/2
// down and a restart of TTL/4 or more) and the hold is over (TTL/4), so
// its release is held no later than a shorter one's. Less than a TTL
// found no moment in some runs: a hand-off into a slow section of 2-2.5
// s, its waiters fresh only while it still had more than a TTL left
// (curator-mutex seed 726, twice: struck unaimed at a queue of 2 s).
//
// Still in its section, not merely holding: a holder whose release is
// already on its way when the servers go down cannot have it held, and
// its library retries the delete with backoff well past the waiters'
// acquires (held-out seeds 725-729 at a load average of 3-8: three of the
// five misses of leader-latch and curator-mutex struck 45-100 ms after
// the holder had sent its release, and held the release of its next
// section instead).
func (env *Env) outageMoment(ctx context.Context, e Entry, params map[string]string) string {
	if env.Clients == nil {
		return ""
	}
	limit, _ := time.ParseDuration(e.Params["fresh"])
	wctx, cancel := env.aimContext(ctx)
	defer cancel()
	for {
		h, thinking := env.Clients.Ahead(0)
		_, long := env.Clients.Ahead(env.TTL + env.TTL/4)
		if thinking && !long && env.freshQueue(limit) {
			params["aimed"] = "true"
			return h
		}
		if !sleepUntil(wctx, time.Now().Add(5*time.Millisecond)) {
			return ""
		}
	}
}

// sessionLock says whether the run's lock is a session lock in a process
// of its own: one whose waiters locktest cannot see (UntoldWaiters, with
// an operation timeout), on a system that can neither revoke leases nor
// expire keys early (whether the run draws those or not): there a
// waiter's claim is its connection's session (ZooKeeper's ephemeral node,
// a database's session lock).
func (c Config) sessionLock() bool {
	return c.UntoldWaiters && c.OpTimeout > 0 && !c.offers(LeaseRevoke) && !c.offers(ClockJumpEmulated)
}

// freshQueue says whether a client is queued in Acquire while every
// waiter has waited less than limit. Every one: a waiter whose acquire
// gives up while the servers are down gets no answer from its library
// until they are back, and its node stays first in line until then, ahead
// of a fresh waiter (tuning seeds 611-615 with only the newest waiter
// fresh: 5 of 10 runs of curator-mutex and leader-latch caught, 10 of 10
// with every one).
func (env *Env) freshQueue(limit time.Duration) bool {
	_, queued := env.Clients.Waiter(minWaiterWait)
	_, stale := env.Clients.Waiter(limit)
	return queued && !stale
}
