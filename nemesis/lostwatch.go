package nemesis

import (
	"cmp"
	"context"
	"math/rand/v2"
	"strconv"
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
//
// It is tried again (param try: 2, then 3), each try a fault of its
// own right after the one before, unless a try before held its aimed
// release into the window (env.watchStruck; a try left out does nothing):
// one try struck the race in 2 of 5 runs (held-out seeds 331-335); with
// the tries and the line moving (lostWatchTry), 5 of 5 on seeds 6-10,
// two of them by the second try. A try of its own, the slow links of the
// try before are recorded stopped when they were: a try that missed,
// kept on into the next, left the waiter of a race struck meanwhile on
// slow links, its stall excused.
func (c Config) lostWatchOpening(seed int64, fams []Family) []Entry {
	if !c.sessionLock() || len(c.Clients) < 2 || !c.offersKind(fams, Slow) {
		return nil
	}
	rng := rand.New(rand.NewPCG(uint64(seed), lostWatchStream))
	trip := c.TTL * 3 / 20
	var out []Entry
	for try := 1; try <= lostWatchTries; try++ {
		e := Entry{
			Fault: Slow, Target: TargetHolder,
			Fallback: c.Clients[rng.IntN(len(c.Clients))],
			Duration: c.TTL/2 + 6*trip + trip/4,
			Params: map[string]string{"link": cmp.Or(c.MemberLinks, "members"), "toxic": "latency", "latency": trip.String(), "jitter": "0s",
				"trip": trip.String(), "ahead": "0s-" + (c.TTL / 4).String(), "opening": "lost-watch"},
		}
		if try > 1 {
			e.Params["try"] = strconv.Itoa(try)
		}
		out = append(out, e)
	}
	return out
}

// lostWatchTries is how many times the lost-watch opening tries at most.
const lostWatchTries = 3

// lostWatch is the lost-watch opening's hold of client w's slowed links
// (trip: their latency): it waits, at most d, for w's next acquire, whose
// requests land a trip apart: the check that the lock's folder exists,
// the listing in which its node is not yet, the creation of its node
// (3 trips after it asked), the listing (a trip later) and the watch on
// the node before its own (2 trips later). Meanwhile it holds the release
// of the client whose node is before w's (nodeBefore) until 1.5 trips
// after w's node was made (lostWatchTry). It returns once the watch
// landed, and says whom it held (held: that client's release came in
// time to be held into the window), which leaves the tries after it out
// (env.watchStruck).
func (env *Env) lostWatch(ctx context.Context, w string, trip, d time.Duration) map[string]string {
	out := map[string]string{}
	env.watchStruck = false
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
	ahead, told, held := env.lostWatchTry(ctx, w, trip, time.Now())
	if ahead != "" {
		// Whose release it aimed at, and whence it knew that client's
		// node was before w's: the server's truth, or the harness's guess.
		out["before"], out["before_from"] = ahead, "guess"
		if told {
			out["before_from"] = "queue"
		}
	}
	if held {
		out["held"] = ahead
		env.watchStruck = true
	}
	return out
}

// lostWatchTry is one try of lostWatch at w's acquire asked at asked: it
// says whose release it aimed at, whether the server's truth told that
// (nodeBefore), and whether it held it into the window.
//
// The client last in line when w asked (lastInLine), whose node is then
// just before w's, has its release held from then until 1.5 trips after
// w's node was made; the others' next acquires wait until w's node is
// made (queueBehind), and the line ahead moves on meanwhile. Before, the
// line stood still until w's node was made (its holder's release held),
// and the sections ahead of the node before w's were passed only then,
// in the trip and a half before the window: one hand-off of 0.76 s among
// them, and the release aimed at came past it; and clients that asked
// after w, on links that are not slowed, made their nodes before w's
// (main 94cf9c2, seeds 3 and 4).
func (env *Env) lostWatchTry(ctx context.Context, w string, trip time.Duration, asked time.Time) (ahead string, told, held bool) {
	last, ok := env.lastInLine(w, asked)
	if !ok {
		sleepUntil(ctx, asked.Add(5*trip+trip/4))
		return "", false, false
	}
	hctx, cancel := context.WithTimeout(ctx, 5*trip)
	defer cancel()
	made := make(chan struct{})
	var letGo time.Time // written before made is closed
	// hold holds c's release until letGo, and says whether it did.
	hold := func(c string) (func() bool, error) {
		var holding atomic.Bool
		disarm, err := env.Clients.Intercept(c, histories.Release, func() {
			select {
			case <-made:
			case <-hctx.Done():
				return
			}
			if time.Now().Before(letGo) {
				holding.Store(true)
				sleepUntil(hctx, letGo)
			}
		}, func(error) {})
		return func() bool { disarm(); return holding.Load() }, err
	}
	queued := make(chan struct{})
	disarms := env.queueBehind(ctx, w, last, queued, 4*trip)
	defer func() {
		for _, d := range disarms {
			d()
		}
	}()
	aimed, err := hold(last)
	ahead, at, told, ok := env.nodeBefore(ctx, w, trip, asked, last)
	letGo = at.Add(trip + trip/2)
	close(made)
	close(queued)
	if ok && ahead != last {
		// The server's truth has another client's node before w's.
		if err == nil {
			aimed()
		}
		aimed, err = hold(ahead)
	}
	if !ok {
		ahead = ""
	}
	sleepUntil(ctx, at.Add(2*trip+trip/4))
	if err != nil {
		return ahead, told, false
	}
	return ahead, told, aimed() && ok
}

// lastInLine is the client whose node is last in w's lock's queue when w
// asked at asked: the client that began to wait last before it (one that
// began within minWaiterWait of it may be either side, and is passed
// over), else the holder. Not ok when there is none but w.
func (env *Env) lastInLine(w string, asked time.Time) (string, bool) {
	last, ok := env.Clients.Newest(time.Since(asked) + minWaiterWait)
	if !ok {
		last, _, ok = env.Clients.Holder("")
	}
	return last, ok && last != w
}

// queueBehind holds every client but w and last, once its release
// returned (or, idle, before its next acquire), until queued is closed,
// at most d: the line ahead of w moves on meanwhile, and no client
// queues again ahead of w's node, which comes 3 trips after it asked.
// It returns the hooks' cancels.
func (env *Env) queueBehind(ctx context.Context, w, last string, queued <-chan struct{}, d time.Duration) []func() bool {
	bound := time.Now().Add(d)
	wait := func() {
		select {
		case <-queued:
		case <-ctx.Done():
		case <-time.After(time.Until(bound)):
		}
	}
	var out []func() bool
	for _, c := range env.Clients.Names() {
		if c == w || c == last {
			continue
		}
		op, before, after := histories.Release, func() {}, func(error) { wait() }
		if env.Clients.Role(c) == "idle" {
			op, before, after = histories.Acquire, wait, func(error) {}
		}
		if cancel, err := env.Clients.Intercept(c, op, before, after); err == nil {
			out = append(out, cancel)
		}
	}
	return out
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
// released, may be seen still until then); else guessed: last, the
// client last in line when w asked (nobody queues behind it meanwhile:
// queueBehind). told says it was the server's truth. Not ok when w's
// node heads the queue, or nobody is known to be before it.
func (env *Env) nodeBefore(ctx context.Context, w string, trip time.Duration, asked time.Time, last string) (ahead string, made time.Time, told, ok bool) {
	made = asked.Add(3 * trip)
	if q, ok := env.Clients.(queueView); ok {
		if !sleepUntil(ctx, asked.Add(2*trip)) {
			return "", time.Time{}, false, false
		}
		for time.Now().Before(made.Add(trip / 2)) {
			if ahead, in := q.Before(w); in {
				if ahead != "" {
					return ahead, time.Now(), true, ahead != w
				}
				made = time.Now()
				break
			}
			if !sleepUntil(ctx, time.Now().Add(2*time.Millisecond)) {
				return "", time.Time{}, false, false
			}
		}
	}
	if !sleepUntil(ctx, made) {
		return "", time.Time{}, false, false
	}
	// Nobody queued since w asked.
	return last, made, false, true
}
