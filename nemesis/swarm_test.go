package nemesis

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

func swarmConfig() Config {
	return Config{Faults: []string{All}, Time: 60 * time.Second, Members: 3, Clients: []string{"c0", "c1", "c2"}}
}

// A swarm schedule draws only from its seed's subset of the families,
// which is never empty, differs between seeds, and is the same for the
// same seed.
func TestSwarmConcentrates(t *testing.T) {
	// What Generate draws from without the swarm: every family --nemesis
	// all takes.
	var every []Family
	for _, f := range families {
		if !f.Spec().ByNameOnly {
			every = append(every, f)
		}
	}
	cfg := swarmConfig()
	cfg.Swarm = true
	sizes := map[int]bool{}
	for seed := int64(1); seed <= 40; seed++ {
		var sub []string
		for _, f := range swarm(seed, every) {
			sub = append(sub, f.Spec().Name)
		}
		if len(sub) == 0 || len(sub) > len(every) {
			t.Fatalf("seed %d: subset %v", seed, sub)
		}
		sizes[len(sub)] = true
		s, err := Generate(seed, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range s.Families() {
			// Generate keeps of the offered families those in the
			// subset: a family outside it is never drawn.
			if !slices.Contains(sub, f) {
				t.Errorf("seed %d: schedule has %s, outside its subset %v", seed, f, sub)
			}
		}
		again, _ := Generate(seed, cfg)
		if !reflect.DeepEqual(s, again) {
			t.Errorf("seed %d: two schedules differ", seed)
		}
	}
	if len(sizes) < 3 {
		t.Errorf("40 seeds drew subsets of sizes %v only", sizes)
	}
}

// Aim turns some faults that end a lease on an aimed waiter, the client
// drawn kept as its fallback (and aims those drawn on a waiter), holds the next section of a holder whose
// release reply is lost, strikes a holder mid-section with a pause armed for its write, and touches
// no other entry.
func TestAimTurnsFaultsOnWaiters(t *testing.T) {
	cfg := swarmConfig()
	cfg.Faults = []string{"isolate", "lease", "pause", "crash", "lost-reply"}
	turned, kept := 0, 0
	for seed := int64(1); seed <= 30; seed++ {
		// The pauses' order (TestHolderPauseFirst), after the strikes it
		// opens with (opening.go): a prefix of the plain schedule's entries.
		plain, s, inner := aimedBeside(t, seed, cfg)
		if len(inner) > len(plain.Entries) {
			t.Fatalf("seed %d: %d entries aimed, %d plain", seed, len(inner), len(plain.Entries))
		}
		holderFirst(plain.Entries[:len(inner)])
		for i, e := range inner {
			p := plain.Entries[i]
			e.At = p.At
			if reflect.DeepEqual(e, p) {
				kept++
				continue
			}
			if p.Fault == LostReplyRelease || p.Fault == LostReplyRenew && e.Fault == LostReplyRelease {
				if e.Target != TargetHolder || e.Params["hold_next"] != "500ms" {
					t.Errorf("seed %d: entry %d aimed as %+v", seed, i, e)
				}
				turned++
				continue
			}
			if p.Fault == PauseClient && p.Target == TargetHolder {
				if p.Params["before_write"] != "true" || e.Params["mid_section"] != "200ms" {
					t.Errorf("seed %d: entry %d aimed as %+v from %+v", seed, i, e, p)
				}
				turned++
				continue
			}
			if p.Fault == LostReplyAcquire || p.Fault == LostReplyRenew && e.Fault == LostReplyAcquire {
				if e.Target != TargetHolder {
					t.Errorf("seed %d: entry %d aimed as %+v", seed, i, e)
				}
				turned++
				continue
			}
			if !aimable(p.Fault) || !slices.Contains(cfg.Clients, p.Target) && p.Target != TargetWaiter {
				t.Errorf("seed %d: entry %d (%s on %s) was changed", seed, i, p.Fault, p.Target)
			}
			fallback := p.Target
			if p.Target == TargetWaiter {
				fallback = p.Fallback
			}
			ahead := "2.5s-"
			if p.Fault == LeaseRevoke {
				ahead = "200ms-"
			}
			if e.Target != TargetWaiter || e.Fallback != fallback || e.Params["ahead"] != ahead {
				t.Errorf("seed %d: entry %d aimed as %+v", seed, i, e)
			}
			turned++
		}
		if err := s.Validate(); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
	if turned == 0 || kept == 0 {
		t.Errorf("aim turned %d entries and kept %d", turned, kept)
	}
}

func TestParseMix(t *testing.T) {
	for in, want := range map[string][3]bool{"even": {}, "swarm": {true, false, false}, "aim": {false, true, false}, "swarm, aim,dense": {true, true, true}} {
		var c Config
		err := c.ParseMix(in)
		if got := [3]bool{c.Swarm, c.Aim, c.Dense}; err != nil || got != want {
			t.Errorf("ParseMix(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	var c Config
	if err := c.ParseMix("swarm,even"); err == nil {
		t.Error("ParseMix accepted even in a list")
	}
}

// Dense: the first fault after a quarter of the interval, and each after
// a quarter of the interval, after a long fault as after a short one.
func TestDenseGap(t *testing.T) {
	cfg := swarmConfig()
	cfg.Faults = []string{"lost-reply", "isolate"}
	plain, _ := Generate(3, cfg)
	cfg.Dense = true
	dense, _ := Generate(3, cfg)
	if len(dense.Entries) <= len(plain.Entries) {
		t.Errorf("dense: %d faults in a minute, plain %d", len(dense.Entries), len(plain.Entries))
	}
	c := cfg.WithDefaults()
	if dense.Entries[0].At != c.Interval/4 || plain.Entries[0].At != c.Interval {
		t.Errorf("first faults at %s dense, %s plain", dense.Entries[0].At, plain.Entries[0].At)
	}
	for i, e := range dense.Entries[1:] {
		prev := dense.Entries[i]
		want := c.Interval / 4
		if got := e.At - prev.At - prev.Duration; got != want {
			t.Errorf("after %s of %s: %s quiet, want %s", prev.Fault, prev.Duration, got, want)
		}
	}
}

// A fired fault's cell: the state it struck in, by its kind, its
// client's role or its member, and its family; failed faults strike none.
func TestCellsOf(t *testing.T) {
	fired := []Fired{
		{Fault: PauseClient, Targets: []string{"c1"}, Params: map[string]string{"role": "waiter"}},
		{Fault: PauseClient, Targets: []string{"c2"}, Params: map[string]string{"role": "waiter"}},
		{Fault: Isolate, Targets: []string{"c0"}, Params: map[string]string{"role": "holder", "aimed": "true"}},
		{Fault: LostReplyRelease, Targets: []string{"c0"}, Params: map[string]string{"role": "holder"}},
		{Fault: PauseMember, Targets: []string{"m0"}, Params: map[string]string{"selector": TargetLeader}},
		{Fault: PauseMember, Targets: []string{"m1"}, Params: map[string]string{"selector": TargetLeader, "resolved": "fallback"}},
		{Fault: "partition-majority", Params: map[string]string{}},
		{Fault: PauseClient, Targets: []string{"c1"}, Params: map[string]string{"role": "idle"}, Error: "boom"},
	}
	want := []Cell{
		{StateMidSection, "isolate", 1},
		{StateRelease, "lost-reply", 1},
		{StateCluster, "partition", 1},
		{StateLeader, "pause", 1},
		{StateMember, "pause", 1},
		{StateWaiter, "pause", 2},
	}
	if got := CellsOf(fired); !reflect.DeepEqual(got, want) {
		t.Errorf("CellsOf = %v\nwant %v", got, want)
	}
}

// Dense: each family has about an equal share of the run's time, so short
// faults are drawn more often than long ones.
func TestDenseSharesTime(t *testing.T) {
	cfg := swarmConfig()
	cfg.Faults = []string{"lost-reply", "isolate"}
	cfg.Dense = true
	cfg.Time = 10 * time.Minute
	s, err := Generate(1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	took := map[string]time.Duration{}
	for _, e := range s.Entries {
		n[FamilyOf(e.Fault)]++
		took[FamilyOf(e.Fault)] += e.Duration
	}
	if n["lost-reply"] < 3*n["isolate"] {
		t.Errorf("%d lost replies, %d isolations: want the short fault several times as often", n["lost-reply"], n["isolate"])
	}
	c := cfg.WithDefaults()
	share := func(f string) time.Duration {
		return took[f] + time.Duration(n[f])*c.gap()
	}
	if a, b := share("lost-reply"), share("isolate"); a < b/2 || b < a/2 {
		t.Errorf("time: lost replies %s, isolations %s; want about equal", a, b)
	}
}

// A dense schedule weighs a family by the time its faults take, an instant
// kind (a revocation) taking none but the quiet after it: the lease
// family, two revocations to one starvation, is drawn by its mean of the
// three, not as if every fault of it starved for 4-6 s.
func TestDenseMeanTimeCountsInstantKinds(t *testing.T) {
	t.Parallel()
	c := Config{Dense: true, Clients: []string{"c0"}, TTL: 2 * time.Second}.WithDefaults()
	lease, _ := family("lease")
	// starve: 5 s mean; revoke: 0 s; each with 0.5 s quiet.
	if got, want := c.meanTime(lease), (5*time.Second+3*500*time.Millisecond)/3; got != want {
		t.Errorf("lease's mean time %v, want %v", got, want)
	}
	// A member's removal counts the seconds etcd takes to carry it out.
	member, _ := family("member")
	if got := c.meanTime(member); got < member.Spec().Settle+3*time.Second {
		t.Errorf("member's mean time %v, want its settle (%v) and its 2-4 s besides", got, member.Spec().Settle)
	}
	isolate, _ := family("isolate")
	if got, want := c.meanTime(isolate), 4500*time.Millisecond+500*time.Millisecond; got != want {
		t.Errorf("isolate's mean time %v, want %v", got, want)
	}
}

// The first pause of a schedule is the holder's when it has one, and so
// is its first isolation: two entries of a class swap what they strike,
// every slot keeps its time and duration, and the schedule strikes the same
// members and clients as before.
func TestHolderFirst(t *testing.T) {
	cfg := swarmConfig()
	cfg.Faults = []string{"pause", "isolate"}
	classes := []struct {
		name  string
		class func(Entry) bool
		kind  string
	}{
		{"pause", isPause, PauseClient},
		{"isolation", func(e Entry) bool { return e.Fault == Isolate }, Isolate},
	}
	moved := map[string]int{}
	for seed := int64(1); seed <= 60; seed++ {
		plain, _ := Generate(seed, cfg)
		es := slices.Clone(plain.Entries)
		holderFirst(es)
		for i, e := range es {
			p := plain.Entries[i]
			if e.At != p.At || e.Duration != p.Duration {
				t.Fatalf("seed %d: entry %d moved from %v+%v to %v+%v", seed, i, p.At, p.Duration, e.At, e.Duration)
			}
		}
		for _, c := range classes {
			first, holders := -1, 0
			for i, e := range es {
				if c.class(e) && first < 0 {
					first = i
				}
				if e.Fault == c.kind && e.Target == TargetHolder {
					holders++
				}
			}
			if holders > 0 && (es[first].Fault != c.kind || es[first].Target != TargetHolder) {
				t.Errorf("seed %d: first %s %+v, with %d of the holder", seed, c.name, es[first], holders)
			}
			differ := 0
			for i := range es {
				if c.class(plain.Entries[i]) && !reflect.DeepEqual(es[i], plain.Entries[i]) {
					differ++
				}
			}
			if differ != 0 && differ != 2 {
				t.Errorf("seed %d: %d %ss changed", seed, differ, c.name)
			}
			if differ == 2 {
				moved[c.name]++
			}
		}
		what := func(es []Entry) []string {
			var out []string
			for _, e := range es {
				out = append(out, e.Fault+" "+e.Target+" "+e.Fallback)
			}
			slices.Sort(out)
			return out
		}
		if !reflect.DeepEqual(what(es), what(plain.Entries)) {
			t.Errorf("seed %d: strikes %v, were %v", seed, what(es), what(plain.Entries))
		}
	}
	for _, c := range classes {
		if moved[c.name] == 0 {
			t.Errorf("no schedule of 60 had a %s before the holder's first", c.name)
		}
	}
}
