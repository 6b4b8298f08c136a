package nemesis

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/locktest/locktest/system"
)

// leaderProto is a prototype system whose members elect a leader.
type leaderProto struct{ prototype }

func (leaderProto) Leader(context.Context) (int, error) { return 0, nil }

func keys(cells []Cell) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = c.Key()
	}
	return out
}

// A steered schedule's first faults strike its cells, in order, each aimed
// at the cell's state by its selector; a cell no kind can strike is passed
// over; the same seed and cells draw the same schedule.
func TestSteerDrawsTheCellsFirst(t *testing.T) {
	t.Parallel()
	cfg := genConfig(3)
	cfg.Time = time.Minute
	cfg.Aim, cfg.Dense, cfg.Swarm = true, true, true // the swarm may leave a steered family out: it is drawn all the same
	steer, err := ParseCells("idle×pause,holder-mid-section×isolate,waiter/lease,cluster×pause,leader×crash," +
		"member×member,release-in-flight×lost-reply,holder×clock,leader×isolate,acquire-in-flight×lost-reply")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Steer = steer
	s, err := Generate(7, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	again, _ := Generate(7, cfg)
	if !reflect.DeepEqual(s, again) {
		t.Fatal("same seed and cells, different schedules")
	}
	want := []struct {
		cell, target string
		ahead        bool
	}{
		{"idle×pause", TargetIdle, false},
		{"holder-mid-section×isolate", TargetHolder, true},
		{"waiter×lease", TargetWaiter, false},
		// cluster×pause: no pause strikes the cluster's links
		{"leader×crash", TargetLeader, false},
		{"member×member", "m", false},
		{"release-in-flight×lost-reply", "", false},
		{"holder×clock", TargetHolder, false},
		// leader×isolate: an isolation strikes a client
		{"acquire-in-flight×lost-reply", "", false},
	}
	if len(s.Entries) <= len(want) {
		t.Fatalf("%d entries, want more than the %d steered", len(s.Entries), len(want))
	}
	for i, w := range want {
		e := s.Entries[i]
		c, _ := ParseCells(w.cell)
		if e.Params["cell"] != w.cell || FamilyOf(e.Fault) != c[0].Fault {
			t.Errorf("entry %d: %s, cell %q; want cell %s", i, e.Fault, e.Params["cell"], w.cell)
			continue
		}
		if _, ahead := e.Params["ahead"]; ahead != w.ahead {
			t.Errorf("entry %d (%s): ahead %q", i, w.cell, e.Params["ahead"])
		}
		switch {
		case w.target == "m":
			if !slices.Contains([]string{"m0", "m1", "m2"}, e.Target) {
				t.Errorf("entry %d (%s): target %q, want a member by name", i, w.cell, e.Target)
			}
		case w.target == "":
			if want := map[string]string{StateRelease: LostReplyRelease, StateAcquire: LostReplyAcquire}[c[0].State]; e.Fault != want {
				t.Errorf("entry %d (%s): kind %s, want %s", i, w.cell, e.Fault, want)
			}
		case e.Target != w.target || e.Fallback == "":
			t.Errorf("entry %d (%s): target %q fallback %q, want %q and a fallback", i, w.cell, e.Target, e.Fallback, w.target)
		}
	}
	// The room left is steered at the cells again, in the same order, as
	// long as they fit; then the mix draws.
	i := len(want)
	for ; i < len(s.Entries) && s.Entries[i].Params["cell"] != ""; i++ {
		if got, w := s.Entries[i].Params["cell"], want[i-len(want)].cell; got != w {
			t.Errorf("entry %d, steered again: cell %q, want %q", i, got, w)
		}
	}
	if i == len(want) || i == len(s.Entries) {
		t.Errorf("%d entries steered of %d: want a second pass at some cells, then the mix", i, len(s.Entries))
	}
}

// A run with room to spare strikes its cells a second time, for a strike
// that missed its cell (no client was idle).
func TestSteerTwice(t *testing.T) {
	t.Parallel()
	cfg := genConfig(3)
	cfg.Dense, cfg.Time = true, 30*time.Second
	cfg.Steer, _ = ParseCells("idle×pause")
	s, err := Generate(5, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var cells []string
	for _, e := range s.Entries {
		cells = append(cells, e.Params["cell"])
	}
	if len(cells) < 3 || cells[0] != "idle×pause" || cells[1] != "idle×pause" || cells[2] != "" {
		t.Errorf("cells of the entries: %q; want idle×pause twice, then the mix", cells)
	}
}

// Without cells to steer toward, a seed draws what it drew before.
func TestSteerNoneDrawsAsBefore(t *testing.T) {
	t.Parallel()
	cfg := genConfig(3)
	cfg.Aim, cfg.Dense = true, true
	a, _ := Generate(11, cfg)
	cfg.Steer = []Cell{}
	b, _ := Generate(11, cfg)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("an empty steer changed the schedule")
	}
}

// A cell is offered only where the system's kinds reach it: no leader
// without one, no lease family without leases; and every offered cell is
// one a steered schedule places a fault on.
func TestOfferedCells(t *testing.T) {
	t.Parallel()
	for _, sys := range []struct {
		name   string
		proto  system.System
		leader bool
	}{{"no leader", prototype{}, false}, {"leader", leaderProto{}, true}} {
		cfg := genConfig(3)
		cfg.Faults, cfg.Time = []string{All}, time.Minute
		cfg.Offers = Offered(sys.proto)
		offered := OfferedCells(sys.proto, cfg)
		ks := keys(offered)
		for _, k := range []string{"holder×pause", "holder-mid-section×isolate", "waiter×crash", "idle×slow",
			"member×pause", "member×crash", "release-in-flight×lost-reply", "renewing×lost-reply"} {
			if !slices.Contains(ks, k) {
				t.Errorf("%s: %s not offered (%v)", sys.name, k, ks)
			}
		}
		for _, k := range []string{"holder×lease", "member×isolate", "member×partition", "cluster×partition", "holder×failover"} {
			if slices.Contains(ks, k) {
				t.Errorf("%s: %s offered", sys.name, k)
			}
		}
		if got := slices.Contains(ks, "leader×crash"); got != sys.leader {
			t.Errorf("%s: leader×crash offered %v", sys.name, got)
		}
		for _, c := range offered {
			cfg.Steer = []Cell{c}
			s, err := Generate(3, cfg)
			if err != nil || len(s.Entries) == 0 || s.Entries[0].Params["cell"] != c.Key() {
				t.Errorf("%s: offered %s, but a schedule steered toward it places no fault on it (%v)", sys.name, c.Key(), err)
			}
		}
	}
}

func TestParseCellsRefuses(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"holder", "holder×nope", "nowhere×pause", "pause×holder"} {
		if _, err := ParseCells(s); err == nil {
			t.Errorf("ParseCells(%q) accepted", s)
		}
	}
	c, err := ParseCells(" holder×pause , member/crash ")
	if err != nil || CellKeys(c) != "holder×pause,member×crash" {
		t.Errorf("ParseCells: %v, %v", c, err)
	}
}

// The idle selector strikes a client neither holding nor waiting, and the
// fault records it so.
func TestIdleSelector(t *testing.T) {
	t.Parallel()
	fc := &fakeClients{names: []string{"c0", "c1", "c2"}, holder: "c0", waiter: "c1"}
	env := &Env{Clients: fc}
	inj := &Injected{Params: map[string]string{}}
	got, err := env.client(context.Background(), Entry{Fault: PauseClient, Target: TargetIdle, Fallback: "c0"}, inj, false)
	if err != nil || got != "c2" || inj.Params["role"] != StateIdle || inj.Params["resolved"] != "" {
		t.Fatalf("struck %q (%v), params %v; want c2, idle", got, err, inj.Params)
	}
	f := Fired{Fault: PauseClient, Targets: inj.Targets, Params: inj.Params}
	if f.State() != StateIdle {
		t.Errorf("state %q", f.State())
	}
}

// A steered schedule holds the cells whose faults are over, settled too,
// by the end of the run's faults, allowing each steerDrift for every
// steered fault before it: a cell that would not fit is left for a later
// run and the next that fits is drawn in its place. A client's crash,
// instant, is not followed by a crash's settle time.
func TestSteerPacksTheRun(t *testing.T) {
	t.Parallel()
	cfg := genConfig(3)
	cfg.Dense, cfg.Time = true, 13*time.Second
	cfg.Steer, _ = ParseCells("member×member,leader×crash,holder×crash,idle×pause,acquire-in-flight×lost-reply")
	s, err := Generate(5, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, e := range s.Entries {
		if e.Params["cell"] == "" {
			continue
		}
		got = append(got, e.Params["cell"])
		f, _ := familyOf(e.Fault)
		if end := e.At + time.Duration(len(got)-1)*steerDrift + e.Duration + settle(f, e.Fault); end > cfg.Time {
			t.Errorf("entry %d (%s) ends at %s, after the faults' %s", i, e.Params["cell"], end, cfg.Time)
		}
		if e.Fault == CrashClient && i+1 < len(s.Entries) && s.Entries[i+1].At != e.At+cfg.WithDefaults().gap() {
			t.Errorf("the entry after a client's crash at %s starts at %s, want a gap after it", e.At, s.Entries[i+1].At)
		}
	}
	// member×member takes 10.5 s with its settle; the leader's crash (6 s)
	// and the pause (2.5 s) no longer fit, the client's crash and the lost
	// reply (0.25 s) do.
	if want := []string{"member×member", "holder×crash", "acquire-in-flight×lost-reply"}; !slices.Equal(got, want) {
		t.Errorf("steered cells placed: %v, want %v", got, want)
	}
}

// With one client nobody waits; with no section thinking workAhead no
// holder has work ahead; otherwise every client state is reached.
func TestUnreached(t *testing.T) {
	t.Parallel()
	if u := Unreached(5, 4*time.Second); len(u) != 0 {
		t.Errorf("5 clients, 4 s sections: %v", u)
	}
	if u := Unreached(1, workAhead); len(u) != 1 || u[StateWaiter] == "" {
		t.Errorf("one client: %v, want the waiter", u)
	}
	if u := Unreached(2, workAhead-time.Millisecond); len(u) != 1 || u[StateMidSection] == "" {
		t.Errorf("sections under %s: %v, want the mid-section", workAhead, u)
	}
}

// fleeting is clients each idle only the first time it is asked, a waiter
// from then on: as a client is idle for microseconds before its next
// acquire.
type fleeting struct {
	*fakeClients
	asked map[string]int
}

func (f *fleeting) Role(c string) string {
	f.asked[c]++
	if f.asked[c] == 1 {
		return StateIdle
	}
	return StateWaiter
}

// The idle selector records the role it found the client in, not the one
// the client has moved on to by the time the fault is recorded.
func TestIdleSelectorRecordsWhatItSaw(t *testing.T) {
	t.Parallel()
	env := &Env{Clients: &fleeting{fakeClients: &fakeClients{names: []string{"c0"}}, asked: map[string]int{}}}
	inj := &Injected{Params: map[string]string{}}
	got, err := env.client(context.Background(), Entry{Fault: ClockRate, Target: TargetIdle, Fallback: "c0"}, inj, false)
	if err != nil || got != "c0" || inj.Params["role"] != StateIdle {
		t.Fatalf("struck %q (%v), params %v; want c0, recorded idle", got, err, inj.Params)
	}
}
