package nemesis

import (
	"math/rand/v2"
	"slices"
	"time"
)

// Lost replies where locks break, in an aimed schedule. The replies whose
// loss leaves a claim in doubt are a release's (the service retries it and
// deletes a newer grant: etcd#22082) and an acquire's (the claim created a
// second time: ZOOKEEPER-1262's ghost node); a lost renewal costs the client
// one renewal of the several its lease gets. And a claim left behind shows
// only if it outlives the faults: the next fault that ends its client's
// session takes it away before the final heal, after which liveness alone
// can see it.

// lostStream is the PCG stream of the lost replies' aim.
const lostStream = 0x6c6f7374

// renewToRelease is the share of lost renewal replies that an aimed
// schedule turns on the holder's release instead.
const renewToRelease = 0.5

// lastStrike is how long before the end of the fault phase an aimed
// schedule strikes last, with a lost acquire reply of the holder (in TTLs):
// time for the holder's next acquire, with no fault after it. A claim the
// lost reply leaves behind (a ghost node) lives until its client's acquire
// times out, and only what it blocks after the final heal is judged
// (liveness); the next fault that ends the client's session would take it
// away sooner.
const lastStrike = 1.0

// aimLost turns the lost replies of s on releases and acquires, from the
// seed on a stream of its own: every lost release reply strikes the
// holder's (the client drawn kept as the fallback; a release is only ever
// a holder's, and the holder's comes within its section, not whenever the
// client drawn holds again), and a share of the lost renewal replies
// become the holder's lost release reply.
func aimLost(seed int64, s *Schedule, cfg Config) {
	rng := rand.New(rand.NewPCG(uint64(seed), lostStream))
	r := cfg.Durations[lostReply{}.Spec().Name]
	for i := range s.Entries {
		e := &s.Entries[i]
		if e.Fault == LostReplyRenew && rng.Float64() < renewToRelease {
			e.Fault, e.Duration = LostReplyRelease, lostDur(rng, r)
			delete(e.Params, "ahead")
		}
		if e.Fault == LostReplyRelease && e.Target != TargetHolder {
			fallback := e.Target
			if e.Target == TargetWaiter {
				fallback = e.Fallback
			}
			e.Target, e.Fallback = TargetHolder, fallback
		}
		if len(e.Params) == 0 {
			e.Params = nil
		}
	}
}

// lostDur draws a lost reply's duration from r in whole milliseconds.
func lostDur(rng *rand.Rand, r Range) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + time.Duration(rng.Int64N(int64((r.Max-r.Min)/time.Millisecond)+1))*time.Millisecond
}

// lastStrikeAt is when an aimed schedule's last fault strikes, or 0 when
// the schedule draws no lost acquire reply (the system offers none).
func (c Config) lastStrikeAt(fams []Family) time.Duration {
	if !c.Aim || len(c.Clients) == 0 {
		return 0
	}
	for _, f := range fams {
		if _, ok := f.(lostReply); ok && slices.Contains(c.kinds(f, true), LostReplyAcquire) {
			return max(c.Time-time.Duration(lastStrike*float64(c.TTL)), 0)
		}
	}
	return 0
}

// strikeLast appends to s its last fault at at: the holder's next acquire
// loses its reply (any client's next, drawn from the seed, when nobody
// holds the lock then).
func strikeLast(seed int64, s *Schedule, cfg Config, at time.Duration) {
	rng := rand.New(rand.NewPCG(uint64(seed), lostStream+1))
	s.Entries = append(s.Entries, Entry{
		At: at, Fault: LostReplyAcquire, Target: TargetHolder,
		Fallback: s.Clients[rng.IntN(len(s.Clients))],
		Duration: lostDur(rng, cfg.Durations[lostReply{}.Spec().Name]),
	})
}
