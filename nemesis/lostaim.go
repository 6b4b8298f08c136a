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

// strikesLost says whether an aimed schedule opens with a lost release
// reply and ends with a lost acquire reply: it does when the system offers
// both and the run has clients.
func (c Config) strikesLost(fams []Family) bool {
	if !c.Aim || len(c.Clients) == 0 {
		return false
	}
	for _, f := range fams {
		if _, ok := f.(lostReply); ok {
			ks := c.kinds(f, true)
			return slices.Contains(ks, LostReplyRelease) && slices.Contains(ks, LostReplyAcquire)
		}
	}
	return false
}

// lostStrike is an aimed schedule's first or last fault, at at: the
// holder's lost release reply (first: most faults of a run come late, as
// they wait for their moment or the fault before, and a retry needs time
// after it, the client's next grant), or its lost acquire reply (last).
// When nobody holds the lock then, the client drawn from the seed.
func lostStrike(seed int64, cfg Config, kind string, at time.Duration) Entry {
	stream := uint64(lostStream + 1)
	if kind == LostReplyAcquire {
		stream++
	}
	rng := rand.New(rand.NewPCG(uint64(seed), stream))
	e := Entry{
		At: at, Fault: kind, Target: TargetHolder,
		Fallback: cfg.Clients[rng.IntN(len(cfg.Clients))],
		Duration: lostDur(rng, cfg.Durations[lostReply{}.Spec().Name]),
	}
	if kind == LostReplyAcquire {
		e.Params = map[string]string{OnTime: "true"}
	}
	return e
}

// OnTime is the param of an entry that strikes at its At: a fault before
// it that is still waiting for its moment or in force then ends, as at
// the end of the run (an aimed schedule's last lost reply: what it leaves
// behind is judged only if it comes before the final heal).
const OnTime = "on_time"

// nextOnTime is the At of the first entry after entry i that strikes on
// time.
func (s Schedule) nextOnTime(i int) (time.Duration, bool) {
	for _, e := range s.Entries[i+1:] {
		if e.Params[OnTime] == "true" {
			return e.At, true
		}
	}
	return 0, false
}
