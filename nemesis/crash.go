package nemesis

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/system"
)

// Crash faults kill without warning.
const (
	CrashMember = "crash-member" // a member, restarted from its data after the fault's duration
	CrashLeader = "crash-leader" // the leader, likewise
	CrashClient = "crash-client" // a client: it drops its session without closing it and goes on as a new process
)

// AllMembers as the target of a crash-member crashes every member at once,
// restarted together after the fault's duration: an outage of the whole
// cluster, which schedules ask for (random draws do not).
const AllMembers = "all"

type crash struct{}

// Spec says what the family is, as data.
func (crash) Spec() Spec {
	return Spec{
		Name: "crash",
		Doc:  "Kills a member (or the leader) without a leader hand-off, SIGKILL for a process, and restarts it from its data dir; or crashes a client, whose session is abandoned, not closed. A schedule's `crash-member` with target `all` kills every member at once and restarts them together; with param `until` `grant` (a script's strike under a holder granted on a bare quorum), the holder at the crash is kept in its section (its release not yet invoked) and the fault lasts, once the member is back, until another client is granted the lock: param `granted_meanwhile`, or `missed` and why.",
		Kinds: []Kind{
			{Name: CrashMember, Needs: []system.Capability{system.CapCrashMember}, Says: says("was crashed")},
			{Name: CrashLeader, Needs: []system.Capability{system.CapCrashMember, system.CapLeader}, Says: says("was crashed")},
			{Name: CrashClient, Clients: true, Instant: true, Says: says("was crashed")},
		},
		// The downtime of a crashed member.
		Durations: fixed(2*time.Second, 4*time.Second),
		// A member's crash struck 5.8-6.3 s after its turn came (13 of
		// 13, etcd, on a loaded machine), a client's at once.
		Settle:         4 * time.Second,
		DurationParams: []string{"fresh", "hold"},
	}
}

func (crash) Draw(g *Gen, e *Entry, d Range) {
	switch e.Fault {
	case CrashMember:
		if g.bareQuorum(e) {
			// Restarted at once: empty, it can serve the next grant while
			// the holder still works.
			e.Duration = g.between(100*time.Millisecond, 500*time.Millisecond)
			return
		}
		e.Target = g.member()
		e.Duration = g.dur(d)
	case CrashLeader:
		e.Target, e.Fallback = TargetLeader, g.member()
		e.Duration = g.dur(d)
	case CrashClient:
		g.clientTarget(e, 0.7)
	}
}

func (crash) Inject(ctx context.Context, env *Env, e Entry) (*Injected, error) {
	inj := &Injected{Params: map[string]string{}}
	if e.Fault == CrashClient {
		name, err := env.client(ctx, e, inj, false)
		if err != nil {
			return inj, err
		}
		return inj, env.Clients.Crash(name)
	}
	c, err := need[crasher](env)
	if err != nil {
		return inj, err
	}
	if e.Fault == CrashMember && e.Target == AllMembers {
		return crashAll(ctx, env, c, e, inj)
	}
	i, err := env.member(ctx, e, inj)
	if err != nil {
		return inj, err
	}
	regranted := env.holdUntilGrant(e, inj)
	inj.Stop = func(ctx context.Context) error {
		began := time.Now()
		err := c.RestartMember(ctx, i)
		inj.Params["restart_took"] = time.Since(began).Round(time.Millisecond).String()
		regranted(ctx)
		return err
	}
	return inj, c.HardStopMember(i)
}

// holdUntilGrant, for param until=grant (a strike on the members under a
// holder granted on a bare quorum), keeps the holder at the strike in its
// section: a hook on the section's end holds it there, still holding,
// until another client is granted the lock. So the next grant, which the
// member's loss allows, comes while it holds however slow the host is,
// not only within what is left of its section. The returned wait, run
// once the member is back, waits for that grant (at most as long as ctx
// lasts) and lets the holder go; params granted_meanwhile, or missed
// with why.
func (env *Env) holdUntilGrant(e Entry, inj *Injected) (wait func(context.Context)) {
	wait = func(context.Context) {}
	if e.Params["until"] != "grant" || env.Clients == nil {
		return wait
	}
	h, _, ok := env.Clients.Holder("")
	if !ok {
		inj.Params["missed"] = "no client held the lock when " + e.Fault + " struck"
		return wait
	}
	letGo := make(chan struct{})
	disarm, err := env.Clients.Intercept(h, histories.SectionEnd, func() { <-letGo }, func(error) {})
	if err != nil {
		inj.Params["missed"] = "the holder could not be held: " + err.Error()
		return wait
	}
	inj.Params["held"] = h
	return func(ctx context.Context) {
		defer close(letGo)
		defer disarm()
		for {
			for _, c := range env.Clients.Names() {
				if c != h && env.Clients.Role(c) == TargetHolder {
					inj.Params["granted_meanwhile"] = c
					return
				}
			}
			if !sleepUntil(ctx, time.Now().Add(5*time.Millisecond)) {
				inj.Params["missed"] = "no other client was granted the lock while " + h + " held it"
				return
			}
		}
	}
}

// crashAll kills every member, and restarts them all when the fault stops;
// with param fresh, at the outage's moment (outageOpening).
func crashAll(ctx context.Context, env *Env, c crasher, e Entry, inj *Injected) (*Injected, error) {
	back := func() {}
	if _, ok := e.Params["fresh"]; ok {
		back = env.outage(ctx, e, inj.Params)
	}
	inj.Targets = env.Sys.MemberNames()
	inj.Stop = func(ctx context.Context) error {
		began := time.Now()
		errs := make([]error, len(inj.Targets))
		var wg sync.WaitGroup
		for i := range inj.Targets {
			wg.Go(func() { errs[i] = c.RestartMember(ctx, i) })
		}
		wg.Wait()
		back()
		inj.Params["restart_took"] = time.Since(began).Round(time.Millisecond).String()
		return errors.Join(errs...)
	}
	var errs []error
	for i := range inj.Targets {
		errs = append(errs, c.HardStopMember(i))
	}
	return inj, errors.Join(errs...)
}

// Heal restarts every member that is down, but those removed from the
// cluster: the member family adds them back.
func (crash) Heal(ctx context.Context, env *Env) ([]string, error) {
	c, ok := env.Sys.(crasher)
	if !ok {
		return nil, nil
	}
	r, _ := env.Sys.(reconfigurer)
	var (
		healed []string
		errs   []error
	)
	for i, name := range env.Sys.MemberNames() {
		if !c.Running(i) && (r == nil || !r.Removed(i)) {
			healed = append(healed, name)
			if err := c.RestartMember(ctx, i); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return healed, errors.Join(errs...)
}
