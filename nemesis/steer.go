package nemesis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/system"
)

// TargetIdle selects a client neither holding a lock nor waiting for one
// when the fault fires (else Entry.Fallback): how a steered fault strikes
// the idle cell, which a client drawn by name strikes only by chance.
const TargetIdle = "idle"

// Steering (Config.Steer): a nightly's random run is steered toward the
// cells its earlier runs have not struck. The schedule's first faults are
// drawn for the steered cells, in order, each from its family's kinds that
// reach the cell's state, of the family's shortest duration, and aimed at
// that state, the next placed after its family's Settle too; the rest as
// the mix draws them. A cell whose fault would not be over (settled too)
// by the end of the run's faults is left for a later run, and the next
// cell that fits is drawn in its place: a fault cut short by the run's end
// strikes nothing worth counting, and one that never starts nothing at
// all. The room the cells leave is steered at them once more, in the same
// order: a fault may miss its cell (no client was idle in the 3 s it
// looked: 3 of 17 steered idle faults on Redis in three nightlies, where
// the releasing client takes the lock again within microseconds), and a
// second strike is its second chance. All of it from the seed: the run is
// replayed from its seed and its steered cells.

// steerDrift is how far behind its planned time each steered fault may
// start, for each steered fault before it: a fault waits for a client in
// its state and for the one before it to stop (measured: 0.3-0.4 s a
// fault, 11 steered faults of a Redis run ended 3.5 s late, 8 of another
// 2.9 s late).
const steerDrift = 500 * time.Millisecond

// kindStates are the lock states a fault kind can strike in, each by a
// target Steer can give it: a client kind strikes a client in any role
// (its selector finds a holder, a holder entering a section with work
// ahead, a waiter or an idle client), a member kind a member (and the
// leader, on a system with one, by the leader selector), a lost reply the
// operation it loses. Kinds not here (failover, which strikes the
// master under the holder, not a state it chooses) are never steered.
var kindStates = map[string][]string{
	PauseClient: clientStates, CrashClient: clientStates, Isolate: clientStates, Slow: clientStates,
	ClockBump: clientStates, ClockStrobe: clientStates, ClockRate: clientStates,
	// A lease fault needs the client's lease, which a client between two
	// acquisitions may not have (it then pauses the client instead).
	LeaseStarve: clientStates[:3], LeaseRevoke: clientStates[:3],

	PauseMember: memberStates, CrashMember: {StateMember}, CrashLeader: {StateLeader},
	MemberRemove: memberStates, MemberReplace: memberStates,
	PartitionOne: {StateMember}, PartitionLeader: {StateLeader}, PartitionMajority: {StateMember},
	PartitionMajoritiesRing: {StateMember}, PartitionBridge: {StateMember},
	ClockJumpEmulated: {StateMember},

	LostReplyRelease: {StateRelease}, LostReplyAcquire: {StateAcquire}, LostReplyRenew: {StateRenew},
}

var (
	clientStates = []string{StateHolder, StateMidSection, StateWaiter, StateIdle}
	memberStates = []string{StateLeader, StateMember}
)

// Settle is how long a fault of family name takes to start and stop on a
// real system (Spec.Settle); 0 for a name no family has.
func Settle(name string) time.Duration {
	if f, ok := family(name); ok {
		return f.Spec().Settle
	}
	return 0
}

// settle is Settle for a fault of kind of f: none for an instant kind,
// which strikes at once (a client's crash).
func settle(f Family, kind string) time.Duration {
	for _, k := range f.Spec().Kinds {
		if k.Name == kind && k.Instant {
			return 0
		}
	}
	return f.Spec().Settle
}

// reaches says whether a fault of kind, on a system with a leader or not,
// can strike in state.
func reaches(kind, state string, leader bool) bool {
	return slices.Contains(kindStates[kind], state) && (state != StateLeader || leader)
}

// OfferedCells are the cells a run of sys can strike under cfg: each
// family of cfg.Faults (expanded) with each state one of its kinds that
// the system offers reaches. A leader is struck only on a system that has
// one (elsewhere the selector falls back to a member). Sorted as CellsOf's.
func OfferedCells(sys system.System, cfg Config) []Cell {
	cfg = cfg.WithDefaults()
	leader := system.Has(sys, system.CapLeader)
	n := map[Cell]int{}
	for _, f := range families {
		name := f.Spec().Name
		if !slices.Contains(Expand(cfg.Faults, cfg.Offers), name) {
			continue
		}
		for _, k := range cfg.kinds(f, len(cfg.Clients) > 0) {
			for _, st := range kindStates[k] {
				if reaches(k, st, leader) {
					n[Cell{State: st, Fault: name}] = 0
				}
			}
		}
	}
	return counted(n)
}

// ParseCells reads a comma list of cells, each STATE×FAULT (or
// STATE/FAULT), as Cell.Key writes them.
func ParseCells(s string) ([]Cell, error) {
	var out []Cell
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		st, fam, ok := strings.Cut(k, "×")
		if !ok {
			st, fam, ok = strings.Cut(k, "/")
		}
		if _, known := family(fam); !ok || !known || !slices.Contains(allStates, st) {
			return nil, fmt.Errorf("cell %q: want STATE×FAULT, a state of %s and a fault family of %s", k,
				strings.Join(allStates, ", "), strings.Join(Categories(), ", "))
		}
		out = append(out, Cell{State: st, Fault: fam})
	}
	return out, nil
}

// CellKeys writes cells as ParseCells reads them.
func CellKeys(cells []Cell) string {
	keys := make([]string, len(cells))
	for i, c := range cells {
		keys[i] = c.Key()
	}
	return strings.Join(keys, ",")
}

var allStates = []string{StateHolder, StateMidSection, StateWaiter, StateIdle, StateRelease, StateAcquire,
	StateRenew, StateLeader, StateMember, StateCluster}

// steered draws the next steered cell's fault to start at at, if any is
// left: its family (one of fams) and its entry, aimed at the cell's state.
// A cell that no kind of fams can strike on this system, or whose fault
// would not be over by the end of the faults (allowing steerDrift for each
// steered fault before it), is passed over.
func (g *Gen) steered(fams []Family, clients bool, at time.Duration) (Family, Entry, bool) {
	for len(g.steer) > 0 {
		c := g.steer[0]
		g.steer = g.steer[1:]
		i := slices.IndexFunc(fams, func(f Family) bool { return f.Spec().Name == c.Fault })
		if i < 0 {
			continue
		}
		f := fams[i]
		// A leader asked of a system without one falls back to a member:
		// OfferedCells offers it only where there is one.
		ks := slices.DeleteFunc(g.cfg.kinds(f, clients), func(k string) bool { return !reaches(k, c.State, true) })
		if len(ks) == 0 {
			continue
		}
		// The family's shortest faults: a steered run strikes as many
		// cells as it has room for.
		d := g.cfg.Durations[c.Fault]
		d.Max = d.Min
		e := Entry{Fault: g.kind(ks), Params: map[string]string{}}
		f.Draw(g, &e, d)
		g.aimCell(&e, c.State)
		e.Params["cell"] = c.Key()
		end := at + time.Duration(g.placed)*steerDrift + e.Duration + settle(f, e.Fault)
		for _, b := range g.before {
			end += b.Duration
		}
		if end > g.cfg.Time {
			g.before = g.before[:0]
			continue
		}
		return f, e, true
	}
	return nil, Entry{}, false
}

// aimCell points e, drawn by its family, at state: the selector that
// finds a client or member in it, with a client or member drawn now as
// the fallback. A lost reply's state is its kind's, as drawn.
func (g *Gen) aimCell(e *Entry, state string) {
	fallback := func(pick func() string) string {
		if e.Fallback != "" {
			return e.Fallback
		}
		if e.Target != "" && e.Target != TargetHolder && e.Target != TargetWaiter && e.Target != TargetLeader {
			return e.Target
		}
		return pick()
	}
	switch state {
	case StateHolder, StateMidSection, StateWaiter, StateIdle:
		e.Fallback = fallback(g.client)
		delete(e.Params, "ahead")
		switch state {
		case StateHolder:
			e.Target = TargetHolder
		case StateMidSection:
			// The least work ahead the aim looks for: the moment comes
			// often, in every workload.
			e.Target, e.Params["ahead"] = TargetHolder, workAhead.String()+"-"
		case StateWaiter:
			e.Target = TargetWaiter
		case StateIdle:
			e.Target = TargetIdle
		}
	case StateLeader:
		if e.Target != TargetLeader {
			e.Target, e.Fallback = TargetLeader, fallback(g.member)
		}
	case StateMember:
		if e.Target == TargetLeader {
			e.Target, e.Fallback = fallback(g.member), ""
		}
	}
}

// idleWait bounds how long a fault on an idle client waits for one.
const idleWait = 3 * time.Second

// idlePoll is how often it looks: a client contending for a lock is idle
// only between a release and its next acquire, often well under a
// millisecond (polled every millisecond, 2 of 6 idle targets in a nightly
// found none in 2 s).
const idlePoll = 100 * time.Microsecond

// idleClient finds a client neither holding nor waiting, polling every
// idlePoll, until idleWait; else the fallback. The role it found is the
// one recorded: a client is idle for microseconds between a release and
// its next acquire, and asked again it was often a waiter already (a
// nightly's steered idle×clock on ZooKeeper recorded a waiter).
func (env *Env) idleClient(ctx context.Context, e Entry, params map[string]string) (string, error) {
	wctx, cancel := context.WithTimeout(ctx, idleWait)
	defer cancel()
	for {
		for _, c := range env.Clients.Names() {
			if env.Clients.Role(c) == StateIdle {
				params["role"] = StateIdle
				return c, nil
			}
		}
		if !sleepUntil(wctx, time.Now().Add(idlePoll)) {
			break
		}
	}
	if e.Fallback == "" {
		return "", fmt.Errorf("no client is idle and no fallback")
	}
	params["resolved"] = "fallback"
	return e.Fallback, nil
}
