package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/system"
)

// Pause faults stop the world.
const (
	// PauseClient pauses a client, its keepalives too; often the holder
	// between its guard and its write (param before_write).
	PauseClient = "pause-client"
	// PauseMember freezes a member (the leader, half the time).
	PauseMember = "pause-member"
)

type pause struct{}

// Spec says what the family is, as data.
func (pause) Spec() Spec {
	return Spec{
		Name: "pause",
		Doc:  "Stops a client stop-the-world (its keepalives too), often the holder between its guard and its write (in an aimed schedule, a holder mid-section at once: param mid_section); or, one time in five, pauses a member: a member process gets SIGSTOP (nothing in it runs until SIGCONT); an embedded member stops sending and its client links hold (its lessor keeps running, and a new leader extends every lease, so it seldom harms a lease lock).",
		// A paused member seldom harms a lease lock here (the embedded
		// member's lessor keeps running, and a new leader extends every
		// lease), a paused holder nearly always: four client pauses to one
		// member pause.
		Kinds: []Kind{
			{Name: PauseClient, Weight: 4, Clients: true, Says: says("was paused")},
			{Name: PauseMember, Needs: []system.Capability{system.CapPauseMember}, Clients: true, Says: func(ts []string, _ map[string]string) string {
				if len(ts) > 1 {
					return "members " + targets(ts) + " were paused"
				}
				return "member " + targets(ts) + " was paused"
			}},
		},
		// Pauses outlast the lease, so the holder wakes up with its lease
		// gone.
		Durations: func(ttl time.Duration) Range { return Range{ttl + ttl/4, 2 * ttl} },
		// mid_section: a holder with at least this much of its section's
		// think time left is paused at once rather than at its write
		// (before_write); else the pause is armed for the write as drawn.
		DurationParams: []string{"mid_section"},
	}
}

func (pause) Draw(g *Gen, e *Entry, d Range) {
	if e.Fault == PauseClient {
		g.roleTarget(e, 0.8, 0.15)
		e.Params["before_write"] = strconv.FormatBool(e.Target == TargetHolder && g.chance(0.7))
		if e.Target == TargetWaiter {
			// Aimed at a waiter queued behind a holder that has just begun
			// a section longer than the lease, so that the pause outlasts
			// its lease while it is still queued: where etcd#11456 lives.
			e.Params["ahead"] = (g.cfg.TTL + g.cfg.TTL/4).String() + "-"
		}
	} else {
		e.Target = g.member()
		if g.chance(0.5) {
			e.Target, e.Fallback = TargetLeader, e.Target
		}
	}
	e.Duration = g.dur(d)
	if e.Target == TargetWaiter && d == (pause{}).Spec().Durations(g.cfg.TTL) {
		// A lock in a process of its own (exec:) stops whole, its acquire's
		// timer too: woken past the acquire's end (4 s by default) it
		// gives up and grants nothing. The default pause of a waiter ends
		// when a revoked lease's does, still past its TTL.
		e.Duration = min(e.Duration, waiterPause(g.cfg.TTL))
	}
}

func (pause) Inject(ctx context.Context, env *Env, e Entry) (*Injected, error) {
	inj := &Injected{Params: map[string]string{}}
	if e.Fault == PauseClient {
		armed := e.Params["before_write"] == "true"
		if h, ok := env.midSection(e); ok {
			// Its keepalives stop now, and it stops at the end of its
			// think, before its write: the pause strikes as one armed
			// for the write would, a section's think time sooner.
			inj.Params["selector"], inj.Params["aimed"] = TargetHolder, "true"
			e.Target, armed = h, false
		} else if armed && e.Target == TargetHolder {
			if h, ok := env.thinking(ctx); ok {
				inj.Params["selector"] = TargetHolder
				e.Target = h
			}
		}
		name, err := env.client(ctx, e, inj, false)
		if err != nil {
			return inj, err
		}
		if err := env.Clients.Pause(name, e.Duration, armed); err != nil || !armed {
			return inj, err
		}
		// An armed pause lives only in its fault's window: at its stop, one
		// that has not struck is called off (param struck=false), and one
		// that struck is waited out, so that the history's start and stop
		// bound the pause. Left armed, a pause that fell back on a waiter
		// struck at the write after its grant, seconds after its recorded
		// stop, and its lease ran out "with no fault" (redlock seed 42: a
		// false promise 5).
		inj.Stop = func(ctx context.Context) error {
			pending, until := env.Clients.Disarm(name)
			if pending {
				inj.Params["struck"] = "false"
			}
			if !sleepUntil(ctx, until) {
				return fmt.Errorf("nemesis: the pause of %s outlasted the heal timeout", name)
			}
			return nil
		}
		return inj, nil
	}
	p, err := need[pauser](env)
	if err != nil {
		return inj, err
	}
	i, err := env.member(ctx, e, inj)
	if err != nil {
		return inj, err
	}
	// Param with: more members paused alongside (a script's, or drawn by
	// Gen.bareQuorum, so that a Redlock client is granted the lock on a
	// bare majority).
	ms := []int{i}
	for _, name := range strings.FieldsFunc(e.Params["with"], func(r rune) bool { return r == ',' }) {
		j := slices.Index(env.Sys.MemberNames(), name)
		if j < 0 {
			return inj, fmt.Errorf("param with: no member %q", name)
		}
		ms = append(ms, j)
		inj.Targets = append(inj.Targets, name)
	}
	var cuts toxics
	inj.Stop = func(context.Context) error {
		var errs []error
		for _, m := range ms {
			errs = append(errs, p.ResumeMember(m))
		}
		// Resumed first: the cut drops what comes until the members run
		// again.
		return errors.Join(append(errs, cuts.remove())...)
	}
	if e.Params["until"] == "grant" && env.Clients != nil {
		// Struck while a client holds the lock (as long as the fault
		// can still strike), so that the next grant is one after the
		// cut (afterCut). Struck while every client was still in its
		// first acquire, the first grant seen was in doubt and a second
		// was needed, which a loaded host did not make within the
		// pause's 8 s (redlock-restart: pause-member missed, unknown).
		if h, ok := env.firstHolder(ctx); ok {
			inj.Params["held_at_cut"] = h
		} else if ctx.Err() != nil {
			return inj, errNotStruck
		}
		// Out of reach until the grant on the others, as the
		// counterexamples have them, not merely slow: what the clients
		// send them meanwhile is dropped on its links. A stopped member
		// reads on resume what waited in its sockets: the claims of
		// attempts that had failed meanwhile landed then (the lock key on
		// a paused master 50 ms after the resume, for a TTL, in 4 of 4
		// redlock-restart runs), and the next client was granted only
		// once they expired, 0.4-1.0 s before the holder's section ended,
		// which a loaded host missed (mutex valid). Cut, it is granted
		// as soon as the crashed master is back, 1.9-2.5 s before.
		if links, ok := env.Sys.(linker); ok {
			for _, c := range env.Clients.Names() {
				ps, err := links.Links(c)
				if err != nil {
					return inj, err
				}
				for _, m := range ms {
					if err := cuts.cut(ps[m], PauseMember); err != nil {
						return inj, err
					}
				}
			}
			inj.Params["links"] = "cut"
		}
		// Resumed as soon as a client is granted the lock while they are
		// paused (one entering a section of param ahead, if set): that
		// holder has its section ahead of it, and holds the lock on the
		// others only.
		inj.Hold = func(ctx context.Context, d time.Duration) map[string]string {
			hctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			if h, tok, ok := env.afterCut(hctx, e.Params["ahead"]); ok {
				return map[string]string{"granted_meanwhile": h, "granted_token": strconv.FormatInt(tok, 10)}
			}
			return map[string]string{"missed": "no client was granted the lock while " + targets(inj.Targets) + " were paused"}
		}
	}
	for _, m := range ms {
		if err := p.PauseMember(m); err != nil {
			return inj, err
		}
	}
	return inj, nil
}

// thinkingWait bounds the look for a holder still in its think: sections
// begin every few tens of milliseconds under contention.
const thinkingWait = time.Second

// thinking finds, for a pause armed for the holder's write, a holder still
// in its think, its write ahead. The holder past its think has its write
// in flight or done, and the pause waits for its next section, which may
// not come in the fault's window: a seed's first pause, armed 1 ms after
// the holder's write, never struck, and the run's first stale write came
// 20 s in, not 4 s.
func (env *Env) thinking(ctx context.Context) (string, bool) {
	wctx, cancel := context.WithTimeout(ctx, thinkingWait)
	defer cancel()
	for {
		if h, ok := env.Clients.Ahead(time.Millisecond); ok {
			return h, true
		}
		if !sleepUntil(wctx, time.Now().Add(2*time.Millisecond)) {
			return "", false
		}
	}
}

// midSection finds, for a pause of the holder with param mid_section, a
// holder in a section with at least that much of its think time left.
func (env *Env) midSection(e Entry) (string, bool) {
	lo, err := time.ParseDuration(e.Params["mid_section"])
	if err != nil || e.Target != TargetHolder || env.Clients == nil {
		return "", false
	}
	return env.Clients.Ahead(lo)
}

// Heal resumes paused members, disarms client pauses armed for a next
// write (they would strike after the heal) and waits out those under way.
func (pause) Heal(ctx context.Context, env *Env) ([]string, error) {
	var (
		healed []string
		errs   []error
	)
	if p, ok := env.Sys.(pauser); ok {
		for i, name := range env.Sys.MemberNames() {
			if p.Paused(i) {
				healed = append(healed, name)
				if err := p.ResumeMember(i); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if env.Clients != nil {
		var until time.Time
		for _, n := range env.Clients.Names() {
			armed, end := env.Clients.Disarm(n)
			if armed {
				healed = append(healed, n)
			}
			if end.After(until) {
				until = end
			}
		}
		if !sleepUntil(ctx, until) {
			errs = append(errs, errors.New("nemesis: heal: a client pause outlasted the heal timeout"))
		}
	}
	return healed, errors.Join(errs...)
}
