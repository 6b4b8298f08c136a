package nemesis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/system"
)

// Lease faults make the holder's lease end mid-section.
const (
	// LeaseStarve starves its keepalives (its links drop data) until the
	// server expires the lease.
	LeaseStarve = "lease-starve"
	// LeaseRevoke revokes it, as an operator (or a lease bug) would.
	LeaseRevoke = histories.FaultLeaseRevoke
)

type lease struct{}

// Spec says what the family is, as data.
func (lease) Spec() Spec {
	return Spec{
		Name: "lease",
		Doc:  "Ends a client's lease: starve its keepalives (its links drop data) until the server expires it, mostly the holder's mid-section (the lease race); or, twice as often, revoke it with an admin client, the holder's or, as often, a queued waiter's (whose key the server then deletes while it waits: etcd#11456; with param `until` `passed` the revocation stays in force until the lock passes on, at most two TTLs: param `passed`); an aimed schedule opens with a revocation of a holder's with work ahead and then of the waiter's first in line.",
		// Two revocations to one starvation. Starving shows the lease race
		// on holders; a revocation strikes a holder or, as often, a waiter,
		// whose key the server then deletes while it is queued: where lock
		// bugs (etcd#11456) live.
		Kinds: []Kind{
			{Name: LeaseStarve, Needs: []system.Capability{system.CapLinks, system.CapLeases}, Clients: true, Says: func(ts []string, _ map[string]string) string {
				return "lease renewals of " + targets(ts) + " were starved"
			}},
			{Name: LeaseRevoke, Needs: []system.Capability{system.CapLeases}, Weight: 2, Clients: true, Instant: true, Says: func(ts []string, _ map[string]string) string {
				return "the lease of " + targets(ts) + " was revoked"
			}},
		},
		// The longest a starve waits for the server to expire the lease.
		Durations: func(ttl time.Duration) Range { return Range{ttl + 2*time.Second, 2*ttl + 2*time.Second} },
	}
}

func (lease) Draw(g *Gen, e *Entry, d Range) {
	// Starvation mostly strikes the holder, whose lease running out
	// mid-section is the lease race (a starved waiter's links drop its
	// request too).
	if e.Fault == LeaseStarve {
		g.roleTarget(e, 0.85, 0.15)
	} else {
		g.roleTarget(e, 0.35, 0.6)
	}
	if e.Fault == LeaseStarve {
		g.aim(e, g.cfg.TTL+g.cfg.TTL/4, 0)
		e.Duration = g.dur(d)
	} else {
		g.aim(e, workAhead, 0)
	}
}

func (lease) Inject(ctx context.Context, env *Env, e Entry) (*Injected, error) {
	inj := &Injected{Params: map[string]string{}}
	leases, err := need[leaser](env)
	if err != nil {
		return inj, err
	}
	name, err := env.client(ctx, e, inj, true)
	if err != nil {
		return inj, err
	}
	id, ok := env.Clients.Lease(name)
	if !ok {
		return inj, asPause(env, name, inj)
	}
	inj.Params["lease"] = id
	if e.Fault == LeaseRevoke {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := leases.RevokeLease(rctx, id); err != nil {
			return inj, fmt.Errorf("%s: %w", name, err)
		}
		if e.Params["until"] == "passed" {
			// In force until the lock passes on (at most regrantWait
			// TTLs): the next fault must not strike the release that a
			// revoked waiter's grant waits for (mutex-3.4 seed 1: a lost
			// release request of that holder, 3 s later, kept its grant
			// until the waiter gave up).
			inj.Hold = func(ctx context.Context, _ time.Duration) map[string]string {
				return map[string]string{"passed": strconv.FormatBool(env.lockPassed(ctx, regrantWait*env.TTL))}
			}
		}
		return inj, nil
	}
	if err := cutClient(env, name, LeaseStarve, inj); err != nil {
		return inj, err
	}
	cutAt := time.Now()
	inj.Hold = func(ctx context.Context, d time.Duration) map[string]string {
		hctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		for {
			qctx, qcancel := context.WithTimeout(hctx, 500*time.Millisecond)
			gone, err := leases.LeaseGone(qctx, id)
			qcancel()
			if err == nil && gone {
				return map[string]string{"expired": "true", "expired_after": time.Since(cutAt).Round(time.Millisecond).String()}
			}
			if !sleepUntil(hctx, time.Now().Add(20*time.Millisecond)) {
				return map[string]string{"expired": "false"}
			}
		}
	}
	return inj, nil
}

// waiterPause is how long a pause of a queued waiter lasts at most: a
// second past its TTL (waiter-expiry's pause), which ends its lease (the
// server expires it within a TTL of its last renewal and sweeps every half
// second) and wakes it while its acquire still waits.
func waiterPause(ttl time.Duration) time.Duration { return ttl + time.Second }

// asPause plays a lease fault on a client whose lock tells no lease (a
// lock in another process, queued: what its lease is only it knows) as a
// fault any lock allows: a pause of the client, its process stopped, for
// waiterPause, which ends its lease as surely. No longer: a queued waiter
// must wake while its acquire still waits (it gives up --op-timeout less a
// second after it began, 4 s by default), for a lock that grants a waiter
// whose lease ended in line (etcd#11456) to do so; paused for two TTLs,
// each waiter woke to a deadline already past and gave up.
func asPause(env *Env, name string, inj *Injected) error {
	d := waiterPause(env.TTL)
	inj.Kind = PauseClient
	inj.Params["lease"] = "untold"
	inj.Params["before_write"] = "false"
	inj.Params["duration"] = d.String()
	inj.Hold = func(ctx context.Context, _ time.Duration) map[string]string {
		sleepUntil(ctx, time.Now().Add(d))
		return nil
	}
	if err := env.Clients.Pause(name, d, false); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
