package nemesis

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locktest/locktest/system"
)

func TestParseFaults(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"":                     {},
		"none":                 {},
		"all":                  {All},
		"slow,partition":       {"partition", "slow"},
		" crash , crash,lease": {"lease", "crash"},
	} {
		got, err := ParseFaults(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseFaults(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, frag := range map[string]string{
		"partition,bogus": `unknown fault "bogus"`,
		"all,slow":        `"all" cannot be combined`,
		"slow,,lease":     "empty fault name",
		"Partition":       `unknown fault "Partition"`,
	} {
		_, err := ParseFaults(in)
		if err == nil || !strings.Contains(err.Error(), frag) {
			t.Errorf("ParseFaults(%q) error %v, want one containing %q", in, err, frag)
		}
	}
}

// All is every family the system offers, but those asked for by name only.
func TestExpand(t *testing.T) {
	t.Parallel()
	every := []string{"partition", "isolate", "lease", "clock", "pause", "crash", "slow", "member", "lost-reply"}
	if got := Expand([]string{All}, nil); !slices.Equal(got, every) {
		t.Errorf("all of every family: %v, want %v", got, every)
	}
	// A system of client links and member pauses and crashes, with a
	// failover: what it offers, not failover, nor kinds it lacks.
	offers := Offered(prototype{})
	if got, want := Expand([]string{All}, offers), []string{"isolate", "clock", "pause", "crash", "slow", "lost-reply"}; !slices.Equal(got, want) {
		t.Errorf("all of a system without partitions, leases or members: %v, want %v", got, want)
	}
	if got := Expand([]string{"partition"}, offers); !slices.Equal(got, []string{"partition"}) {
		t.Errorf("a named family expanded: %v", got)
	}
	// A plain run's defaults keep what the system offers of them.
	if got, want := Offering([]string{"pause", "lease", "isolate"}, offers), []string{"pause", "isolate"}; !slices.Equal(got, want) {
		t.Errorf("the defaults on a system without leases: %v, want %v", got, want)
	}
	if got := Needs("failover"); !slices.Contains(got, system.CapFailover) || Needs("bogus") != nil {
		t.Errorf("Needs(failover) = %v", got)
	}
	// What a system lacks for a family: the fewest capabilities of one of
	// its kinds (a partition of one member needs no leader); nothing when
	// it carries out some kind.
	if got := Lacks("partition", prototype{}); !slices.Equal(got, []system.Capability{system.CapPartition}) {
		t.Errorf("Lacks(partition) = %v", got)
	}
	if got := Lacks("pause", prototype{}); got != nil {
		t.Errorf("Lacks(pause) = %v", got)
	}
}

// prototype is a system type with some capabilities, never started: only
// what it implements is asked.
type prototype struct{ system.System }

func (prototype) Links(string) ([]*toxiclient.Proxy, error)      { return nil, nil }
func (prototype) ResourceLink(string) (*toxiclient.Proxy, error) { return nil, nil }
func (prototype) ClearToxics() error                             { return nil }
func (prototype) PauseMember(int) error                          { return nil }
func (prototype) ResumeMember(int) error                         { return nil }
func (prototype) Paused(int) bool                                { return false }
func (prototype) HardStopMember(int) error                       { return nil }
func (prototype) RestartMember(context.Context, int) error       { return nil }
func (prototype) Running(int) bool                               { return true }
func (prototype) CutReplication() error                          { return nil }
func (prototype) Failover(context.Context) (system.Promotion, error) {
	return system.Promotion{}, nil
}
func (prototype) FailedOver() string { return "" }

func genConfig(members int) Config {
	return Config{Faults: Categories(), Members: members, Clients: []string{"c0", "c1", "c2", "c3", "c4"}, Time: 20 * time.Minute}
}

func TestGenerateIsPureAndSeeded(t *testing.T) {
	t.Parallel()
	cfg := genConfig(3)
	a, err := Generate(42, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(42, cfg)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different schedules")
	}
	c, _ := Generate(43, cfg)
	if reflect.DeepEqual(a.Entries, c.Entries) {
		t.Fatal("different seeds, same schedule")
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	// A different client list or cluster size changes the schedule.
	cfg2 := cfg
	cfg2.Clients = cfg.Clients[:2]
	d, _ := Generate(42, cfg2)
	if reflect.DeepEqual(a.Entries, d.Entries) {
		t.Fatal("client list ignored")
	}

	kinds := map[string]int{}
	prevEnd := time.Duration(0)
	for _, e := range a.Entries {
		kinds[e.Fault]++
		if e.At < prevEnd+DefaultInterval || e.At >= cfg.Time {
			t.Fatalf("entry at %v, previous ended %v", e.At, prevEnd)
		}
		prevEnd = e.At + e.Duration
		if e.Fault == PauseClient && (e.Duration < 2500*time.Millisecond || e.Duration > 4*time.Second) {
			t.Fatalf("pause of %v", e.Duration)
		}
	}
	for _, k := range allKinds() {
		ring := k == PartitionMajoritiesRing || k == PartitionBridge
		if ring != (kinds[k] == 0) {
			t.Errorf("3 members: %d × %s in %d entries", kinds[k], k, len(a.Entries))
		}
	}

	five, _ := Generate(7, genConfig(5))
	kinds = map[string]int{}
	for _, e := range five.Entries {
		kinds[e.Fault]++
	}
	if kinds[PartitionMajoritiesRing] == 0 || kinds[PartitionBridge] == 0 {
		t.Errorf("5 members: %v", kinds)
	}
	if err := five.Validate(); err != nil {
		t.Fatal(err)
	}

	none, _ := Generate(1, Config{Faults: []string{}, Clients: cfg.Clients})
	if len(none.Entries) != 0 {
		t.Fatalf("no faults, %d entries", len(none.Entries))
	}
	only, _ := Generate(1, Config{Faults: []string{"crash"}, Clients: cfg.Clients, Time: time.Minute})
	for _, e := range only.Entries {
		if !strings.HasPrefix(e.Fault, "crash-") {
			t.Fatalf("crash only, got %s", e.Fault)
		}
	}
}

func TestScheduleRoundTrip(t *testing.T) {
	t.Parallel()
	s, err := Generate(9, genConfig(5))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "schedule.json")
	if err := s.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, got) {
		t.Fatalf("round trip changed the schedule:\n%+v\n%+v", s, got)
	}

	s.Entries = append(s.Entries, Entry{Fault: "partition-nowhere"})
	if err := s.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); err == nil || !strings.Contains(err.Error(), "unknown fault kind") {
		t.Fatalf("bad kind read back: %v", err)
	}
}

func TestReach(t *testing.T) {
	t.Parallel()
	ring := Reach(PartitionMajoritiesRing, [][]int{{3, 0, 4, 1, 2}}, 5)
	views := map[string]bool{}
	for x := range 5 {
		var v []byte
		for y := range 5 {
			if ring[x][y] != ring[y][x] {
				t.Fatal("not symmetric")
			}
			if ring[x][y] {
				v = append(v, byte('0'+y))
			}
		}
		if len(v) != 3 || views[string(v)] {
			t.Fatalf("member %d sees %s", x, v)
		}
		views[string(v)] = true
	}
	if !ring[3][0] || !ring[3][2] || ring[3][4] {
		t.Fatalf("ring neighbours wrong: %v", ring[3])
	}

	bridge := Reach(PartitionBridge, [][]int{{0, 1}, {2}, {3, 4}}, 5)
	for y := range 5 {
		if !bridge[2][y] {
			t.Fatal("bridge does not see everyone")
		}
	}
	if bridge[0][3] || !bridge[0][1] || !bridge[4][3] {
		t.Fatalf("bridge sides wrong: %v", bridge)
	}
}

// Lease, isolation, client pauses and lost replies of acquires and
// renewals strike waiters too, and only those kinds do; a waiter entry has
// a fallback for when nobody waits.
func TestGenerateStrikesWaiters(t *testing.T) {
	t.Parallel()
	cfg := Config{Faults: Categories(), Members: 3, Clients: []string{"c0", "c1", "c2"}, Time: 10 * time.Minute}
	kinds := map[string]bool{}
	for seed := range int64(5) {
		s, err := Generate(seed, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range s.Entries {
			if e.Target != TargetWaiter {
				continue
			}
			kinds[e.Fault] = true
			if e.Fallback == "" {
				t.Errorf("waiter entry %+v without a fallback", e)
			}
		}
	}
	want := map[string]bool{LeaseStarve: true, LeaseRevoke: true, Isolate: true, PauseClient: true, LostReplyAcquire: true, LostReplyRenew: true}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("kinds aimed at waiters: %v; want %v", kinds, want)
	}
}

// A weighted family's kinds come in proportion to their weights: four
// client pauses to one member pause.
func TestGenerateWeighsKinds(t *testing.T) {
	t.Parallel()
	cfg := Config{Faults: []string{"pause"}, Members: 3, Clients: []string{"c0", "c1"}, Time: 10 * time.Hour}
	s, err := Generate(1, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range s.Entries {
		n[e.Fault]++
	}
	if ratio := float64(n[PauseClient]) / float64(n[PauseMember]); ratio < 3 || ratio > 5.5 {
		t.Errorf("%d client pauses to %d member pauses: want about 4 to 1", n[PauseClient], n[PauseMember])
	}
}

// With a grant quorum (Redlock's 3 of 5), crashes and clock jumps of a
// member mostly strike under a holder granted on a bare quorum: a pause of
// the two other members until a grant goes first, at the same time, the
// target not among them; without a quorum, no such pause is drawn.
func TestGenerateBareQuorum(t *testing.T) {
	t.Parallel()
	names := []string{"r0", "r1", "r2", "r3", "r4"}
	cfg := Config{Faults: []string{"crash", ClockJumpEmulated}, Members: 5, MemberNames: names,
		Clients: []string{"c0", "c1", "c2"}, Time: 20 * time.Minute, TTL: 2 * time.Second}
	count := func(cfg Config) (bare, all int) {
		s, err := Generate(7, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		for i, e := range s.Entries {
			if e.Fault != CrashMember && e.Fault != ClockJumpEmulated {
				if e.Fault == PauseMember && (i+1 == len(s.Entries) || s.Entries[i+1].At != e.At) {
					t.Fatalf("entry %d %+v: a pause for a bare quorum with no strike after it", i, e)
				}
				continue
			}
			all++
			if i == 0 || s.Entries[i-1].Fault != PauseMember {
				continue
			}
			bare++
			p := s.Entries[i-1]
			paused := []string{p.Target, p.Params["with"]}
			if p.At != e.At || p.Params["until"] != "grant" || p.Params["ahead"] != "2s-" || slices.Contains(paused, e.Target) ||
				paused[0] == paused[1] || !slices.Contains(names, paused[1]) {
				t.Fatalf("pause %+v before %+v: want two other members paused until a grant, aimed at a section of a TTL or more", p, e)
			}
			if e.Fault == CrashMember && e.Duration > 500*time.Millisecond {
				t.Fatalf("entry %+v: a bare-quorum crash restarts at once", e)
			}
		}
		return bare, all
	}
	cfg.Quorum = 3
	bare, all := count(cfg)
	if all < 50 || float64(bare) < 0.55*float64(all) || float64(bare) > 0.85*float64(all) {
		t.Errorf("%d of %d member crashes and jumps on a bare quorum; want about %.0f%%", bare, all, 100*bareQuorumChance)
	}
	cfg.Quorum = 0
	if bare, _ := count(cfg); bare != 0 {
		t.Errorf("without a quorum %d entries on a bare quorum", bare)
	}
}

// unearly undoes lostAcquireEarly on the aimed schedule s of seed under
// cfg, whose entries after its openings are inner and whose plain schedule
// (drawn without aim) is plain: it finds where the lost acquire reply
// stood by aiming the plain entries as Generate does, after the same
// openings, before the move.
func unearly(seed int64, cfg Config, s Schedule, plain, inner []Entry) []Entry {
	cfg = cfg.WithDefaults()
	opens := s.Entries[:len(s.Entries)-len(inner)]
	pre := Schedule{Seed: seed, Members: cfg.Members, Clients: cfg.Clients,
		Entries: slices.Concat(opens, plain[:min(len(inner), len(plain))])}
	aimLost(seed, &pre, cfg)
	aimAt(seed, &pre, cfg.TTL)
	i := slices.IndexFunc(pre.Entries[len(opens):], lostCreate)
	out := slices.Clone(inner)
	switch {
	case i < 0 && len(out) > 0:
		return out[1:] // drawn for the move
	case i > 0:
		m := out[0]
		copy(out[:i], out[1:i+1])
		out[i] = m
	}
	return out
}

// An aimed schedule's first lost acquire reply on a client's request (not
// a waiter's in flight) comes right after its opening strike, or the
// holder's is drawn there when it has none; the entries it passes move
// later by its duration and the gap, and those after it keep their times.
func TestLostAcquireEarly(t *testing.T) {
	cfg := swarmConfig()
	cfg.Aim, cfg.Dense = true, true
	r := cfg.WithDefaults().Durations["lost-reply"]
	moved, drawn := 0, 0
	for seed := int64(1); seed <= 30; seed++ {
		plainCfg := cfg
		plainCfg.Aim = false
		plain, _ := Generate(seed, plainCfg)
		s, err := Generate(seed, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
		inner := after(t, s)
		if !lostCreate(inner[0]) {
			t.Errorf("seed %d: the entry after the opening is %+v", seed, inner[0])
			continue
		}
		was := unearly(seed, cfg, s, plain.Entries, inner)
		j := slices.IndexFunc(was, lostCreate)
		switch {
		case j == 0:
			continue // drawn there
		case j < 0:
			drawn++
			if e := inner[0]; e.Target != TargetHolder || !slices.Contains(cfg.Clients, e.Fallback) || e.Duration < r.Min || e.Duration > r.Max {
				t.Errorf("seed %d: drawn %+v", seed, e)
			}
			j = len(was)
		default:
			moved++
		}
		// The aimed schedule's times before the move: the plain one's,
		// later by the opening strike; inner[0] took the first's.
		at := func(k int) time.Duration { return inner[0].At + plain.Entries[k].At - plain.Entries[0].At }
		d := inner[0].Duration + cfg.WithDefaults().gap()
		for k := 1; k < len(inner); k++ {
			var want time.Duration
			if k <= j {
				want = at(k-1) + d
			} else {
				want = at(k)
			}
			if inner[k].At != want {
				t.Errorf("seed %d: entry %d at %s, want %s", seed, k, inner[k].At, want)
			}
		}
	}
	if moved == 0 || drawn == 0 {
		t.Errorf("%d lost acquire replies moved, %d drawn", moved, drawn)
	}
	// No lost replies offered: none.
	cfg.Faults = []string{"pause", "isolate"}
	s, _ := Generate(1, cfg)
	if slices.ContainsFunc(s.Entries, func(e Entry) bool { return e.Fault == LostReplyAcquire }) {
		t.Errorf("a lost acquire reply drawn from pause and isolate: %+v", s.Entries)
	}
}
