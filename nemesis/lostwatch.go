package nemesis

import (
	"cmp"
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/locktest/locktest/histories"
)

// lostWatchStream is the PCG stream of the lost-watch opening's draw.
const lostWatchStream = 0x7761746368

// lostWatchOpening is an aimed schedule's race of a queue lock's listing
// and its watch: a client's requests reach the servers late (a slow
// fault, latency upstream on its links to the members, param trip), from
// a holder's short section (param ahead) through its release and its next
// acquire, whose listing of the lock's children and watch on the node
// before its own then land a trip apart; meanwhile the release of the
// client whose node is before its own is held so that it lands between
// them (Env.lostWatch). A lock that watches the node it saw in the listing
// without looking again when that node is gone waits for a node that never
// comes back: ZooKeeper's WriteLock (shayhatsor/zookeeper#26) logs "Could
// not find the stats for less than me" and is never woken; its waiter
// then heads the queue, nobody granted, until its acquire gives up
// (liveness's unwoken rule). Random slow faults never made that race in
// ten runs (no lost watch in any adapter's log): they seldom draw a
// latency the session survives on a client about to ask, and nothing
// times a release into the window.
//
// The trip is 3/20 of the TTL (0.3 s of 2 s): a ZooKeeper client pings
// every third of its session timeout and gives its connection up after
// two thirds without a reply, so the session lives through it; and it is
// under a quarter of the TTL, so that once it stops the client's session
// is taken to have settled within two trips (the unwoken rule's settle).
// The slow fault stops a quarter trip after the watch landed: the waiter
// then sits with calm links, its acquire's 5 s most of it still ahead.
//
// Only for a session lock in a process of its own (sessionLock): its
// waiters' nodes are their sessions', and the library, not locktest,
// watches the queue. Third, after the outage and the giving-up cut:
// first, it put the outage off by its own strike and the look that
// followed it (the outage at 22.4 s, not 5-16 s), and the Curator bugs
// it catches were caught in none of eight runs (curator-mutex seeds 1-5,
// leader-latch seeds 1-3; 4 and 5 of 5 before); kazoo#732, caught by the
// giving-up cut, 4 of 5 as before, 5 s later (seeds 1-5).
func (c Config) lostWatchOpening(seed int64, fams []Family) (Entry, bool) {
	if !c.sessionLock() || len(c.Clients) < 2 || !c.offersKind(fams, Slow) {
		return Entry{}, false
	}
	rng := rand.New(rand.NewPCG(uint64(seed), lostWatchStream))
	trip := c.TTL * 3 / 20
	return Entry{
		Fault: Slow, Target: TargetHolder,
		Fallback: c.Clients[rng.IntN(len(c.Clients))],
		Duration: c.TTL/2 + 6*trip + trip/4,
		Params: map[string]string{"link": cmp.Or(c.MemberLinks, "members"), "toxic": "latency", "latency": trip.String(), "jitter": "0s",
			"trip": trip.String(), "ahead": "0s-" + (c.TTL / 4).String(), "opening": "lost-watch"},
	}, true
}

// lostWatch is the lost-watch opening's hold of client w's slowed links
// (trip: their latency): it waits, at most d, for w's next acquire, whose
// requests land a trip apart: the check that the lock's folder exists,
// the listing in which its node is not yet, the creation of its node
// (3 trips after it asked), the listing (a trip later) and the watch on
// the node before its own (2 trips later). Meanwhile it holds the release
// of the client whose node is before w's (nodeBefore) until 1.5 trips
// after w's node was made (lostWatchTry). It returns once the watch
// landed, and says whom it held (held: that client's release came in
// time to be held into the window).
func (env *Env) lostWatch(ctx context.Context, w string, trip, d time.Duration) map[string]string {
	out := map[string]string{}
	if env.Clients == nil {
		return out
	}
	by := time.Now().Add(d)
	wait := func(role func(string) bool) bool {
		for !role(env.Clients.Role(w)) {
			if time.Now().After(by) || !sleepUntil(ctx, time.Now().Add(time.Millisecond)) {
				return false
			}
		}
		return true
	}
	// Its next acquire: a waiter struck as the fallback waits on first.
	if !wait(func(r string) bool { return r != "waiter" }) || !wait(func(r string) bool { return r == "waiter" }) {
		return out
	}
	if ahead, held := env.lostWatchTry(ctx, w, trip, time.Now()); held {
		out["held"] = ahead
	}
	return out
}

// lostWatchTry is one try of lostWatch at w's acquire asked at asked: it
// says whose release it aimed at, and whether it held it into the window.
func (env *Env) lostWatchTry(ctx context.Context, w string, trip time.Duration, asked time.Time) (string, bool) {
	// The line stands still until w's node is made: a line that moved
	// meanwhile started sections, one in ten of them slow (1-2 TTLs),
	// and one in the line ahead of w's node at the window held up the
	// release aimed at (seeds 1-5, twice: 1 of 16 tries held it).
	// w's release just let the next waiter in, whose grant may come
	// some 100-200 ms later: its release is held, the first holder seen.
	standing := make(chan struct{})
	var disarm func() bool
	looked := make(chan struct{})
	go func() {
		defer close(looked)
		for {
			if h, _, ok := env.Clients.Holder(""); ok && h != w {
				if d, err := env.Clients.Intercept(h, histories.Release, func() {
					select {
					case <-standing:
					case <-ctx.Done():
					case <-time.After(4 * trip):
					}
				}, func(error) {}); err == nil {
					disarm = d
				}
				return
			}
			select {
			case <-standing:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	ahead, made, ok := env.nodeBefore(ctx, w, trip, asked)
	close(standing)
	<-looked
	defer func() {
		if disarm != nil {
			disarm()
		}
	}()
	if !ok {
		sleepUntil(ctx, asked.Add(5*trip+trip/4))
		return "", false
	}
	letGo, watched := made.Add(trip+trip/2), made.Add(2*trip)
	var held atomic.Bool
	disarm, err := env.Clients.Intercept(ahead, histories.Release, func() {
		if time.Now().Before(letGo) {
			held.Store(true)
			sleepUntil(ctx, letGo)
		}
	}, func(error) {})
	sleepUntil(ctx, watched.Add(trip/4))
	if err != nil {
		return ahead, false
	}
	disarm()
	return ahead, held.Load()
}

// queueView is Clients that can tell, from the server's truth, whose node
// is before a client's in its lock's queue (workload.Workload, with
// ZooKeeper's observer).
type queueView interface {
	Before(client string) (ahead string, ok bool)
}

// nodeBefore waits for the node of w's acquire asked at asked, made 3
// trips after it asked, and returns the client whose node is just before
// it and when it saw the node made. From the server's truth where the
// clients have it (queueView), looked at from 2 trips on (w's node before,
// released, may be seen still until then); else guessed: the client that
// began to wait last before the node was made (one that began within
// minWaiterWait of it may be either side, and is passed over), or the
// holder. Not ok when w's node heads the queue, or nobody is known to be
// before it.
func (env *Env) nodeBefore(ctx context.Context, w string, trip time.Duration, asked time.Time) (string, time.Time, bool) {
	made := asked.Add(3 * trip)
	if q, ok := env.Clients.(queueView); ok {
		if !sleepUntil(ctx, asked.Add(2*trip)) {
			return "", time.Time{}, false
		}
		for time.Now().Before(made.Add(trip / 2)) {
			if ahead, in := q.Before(w); in {
				if ahead != "" {
					return ahead, time.Now(), ahead != w
				}
				made = time.Now()
				break
			}
			if !sleepUntil(ctx, time.Now().Add(2*time.Millisecond)) {
				return "", time.Time{}, false
			}
		}
	}
	if !sleepUntil(ctx, made) {
		return "", time.Time{}, false
	}
	// The line stood still since w asked.
	ahead, ok := env.Clients.Newest(time.Since(asked) + time.Millisecond)
	if !ok {
		ahead, _, ok = env.Clients.Holder("")
	}
	return ahead, made, ok && ahead != w
}
