package nemesis

import (
	"context"
	"time"
)

// outageOpening is an aimed schedule's outage of the whole cluster: every
// member crashed at once (crash-member, target all), restarted together
// from its data, as after a power cut or a careless rolling restart done
// all at once. Its moment is a fresh queue (param fresh: every waiter has
// waited less than TTL/8, and one waits), its downtime TTL/2: with the
// restart of three servers (1.5-3 s measured) the clients are cut off past
// their session timeout, so that a library that declares its session lost
// after that long (Curator's LOST) makes a new one, while the restarted
// servers give every session they restore a fresh timeout; the old
// sessions and their nodes live on for one more timeout after the
// restart, and a lock that keeps its node's path across sessions grants on
// its old session's node (CURATOR-696, CURATOR-604). The waiters, fresh
// when the cluster went, are still in their acquires (a 4 s wait) when
// their clients are back. Random crashes take one member at a time: the
// others expire the old sessions while their clients are away, and those
// bugs never showed (leader-latch and curator-mutex, seeds 1-10: 0 of 10
// runs each, by the adapter's log).
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
		Params: map[string]string{"fresh": (c.TTL / 8).String(), "opening": "outage"},
	}, true
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

// freshQueue waits, as aim does, for a client queued in Acquire while every
// waiter has waited less than limit, and says whether it found one.
func (env *Env) freshQueue(ctx context.Context, limit time.Duration) bool {
	if env.Clients == nil {
		return false
	}
	wctx, cancel := env.aimContext(ctx)
	defer cancel()
	for {
		_, queued := env.Clients.Waiter(minWaiterWait)
		if _, stale := env.Clients.Waiter(limit); queued && !stale {
			return true
		}
		if !sleepUntil(wctx, time.Now().Add(5*time.Millisecond)) {
			return false
		}
	}
}
