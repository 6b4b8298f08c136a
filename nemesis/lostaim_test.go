package nemesis

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// An aimed schedule strikes the holder's lost release reply right after
// the openings marked before it (the holder's and the waiter's), before
// every fault drawn.
func TestAimOpensWithALostRelease(t *testing.T) {
	cfg := swarmConfig()
	cfg.Time, cfg.TTL = 30*time.Second, 2*time.Second
	r := cfg.WithDefaults().Durations["lost-reply"]
	for seed := int64(1); seed <= 30; seed++ {
		aimed := cfg
		aimed.Aim, aimed.Dense = true, true
		s, err := Generate(seed, aimed)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(s.Entries, func(e Entry) bool { return e.Params["opening"] == "" })
		if i < 1 {
			t.Fatalf("seed %d: no opening before %+v", seed, s.Entries)
		}
		first, prev := s.Entries[i], s.Entries[i-1]
		if first.Fault != LostReplyRelease || first.Target != TargetHolder || !slices.Contains(cfg.Clients, first.Fallback) ||
			first.Duration < r.Min || first.Duration > r.Max || first.At != prev.At+prev.Duration+500*time.Millisecond || first.Params["hold_next"] != "500ms" {
			t.Errorf("seed %d: first entry not an opening %+v", seed, first)
		}
		for _, e := range after(t, s) {
			if e.At < first.At+first.Duration {
				t.Errorf("seed %d: %s at %s, during the first", seed, e.Fault, e.At)
			}
		}
		if err := s.Validate(); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
	// No lost replies offered: none.
	cfg.Aim, cfg.Faults = true, []string{"pause", "isolate"}
	s, _ := Generate(1, cfg)
	for _, e := range s.Entries {
		if e.Fault == LostReplyRelease {
			t.Errorf("lost reply %+v drawn from pause and isolate", e)
		}
	}
}

// aimedBeside draws seed's schedule under cfg plain and aimed, and returns
// both and the aimed one's entries after its openings (the openings take
// the time of the last), the lost acquire reply moved early put back:
// entry for entry, what aim made of the plain draws.
func aimedBeside(t *testing.T, seed int64, cfg Config) (plain, aimed Schedule, inner []Entry) {
	t.Helper()
	plain, _ = Generate(seed, cfg)
	withAim := cfg
	withAim.Aim = true
	aimed, _ = Generate(seed, withAim)
	return plain, aimed, unearly(seed, withAim, aimed, plain.Entries, after(t, aimed))
}

// after are the entries of an aimed schedule after those it opens with:
// the holder's and the waiter's strikes if it has them, the lost release
// reply, and the lost release request.
func after(t *testing.T, s Schedule) []Entry {
	t.Helper()
	es := s.Entries
	opening := func(e Entry) bool { return e.Params["opening"] != "" }
	for len(es) > 0 && opening(es[0]) {
		es = es[1:]
	}
	if len(es) == 0 || es[0].Fault != LostReplyRelease {
		t.Fatalf("schedule %+v does not open with a lost release reply", s.Entries)
	}
	es = es[1:]
	for len(es) > 0 && opening(es[0]) {
		es = es[1:]
	}
	return es
}

// Aimed, every lost release reply strikes the holder's release (the
// client drawn its fallback), about half the lost renewal replies become
// one and the others the holder's lost acquire reply.
func TestAimTurnsLostRepliesOnReleases(t *testing.T) {
	cfg := swarmConfig()
	cfg.Faults = []string{"lost-reply"}
	renewed, turned := 0, 0
	for seed := int64(1); seed <= 30; seed++ {
		plain, _, inner := aimedBeside(t, seed, cfg)
		for i, e := range inner {
			p := plain.Entries[i]
			switch {
			case p.Fault == LostReplyRenew && e.Fault == LostReplyAcquire:
				renewed++
				want := p.Target
				if p.Target == TargetHolder || p.Target == TargetWaiter {
					want = p.Fallback
				}
				r := cfg.WithDefaults().Durations["lost-reply"]
				if e.Target != TargetHolder || e.Fallback != want || e.Duration < r.Min || e.Duration > r.Max || e.Params["ahead"] != "" {
					t.Errorf("seed %d: %+v turned into %+v", seed, p, e)
				}
			case p.Fault == LostReplyRenew:
				turned++
				r := cfg.WithDefaults().Durations["lost-reply"]
				if e.Fault != LostReplyRelease || e.Duration < r.Min || e.Duration > r.Max || e.Params["ahead"] != "" {
					t.Errorf("seed %d: %+v turned into %+v", seed, p, e)
				}
			}
			if e.Fault != LostReplyRelease {
				continue
			}
			want := p.Target
			if p.Target == TargetHolder || p.Target == TargetWaiter {
				want = p.Fallback
			}
			if e.Target != TargetHolder || e.Fallback != want || e.Params["hold_next"] != "500ms" {
				t.Errorf("seed %d: %+v aimed as %+v", seed, p, e)
			}
		}
	}
	if renewed == 0 || turned == 0 {
		t.Errorf("%d lost renewal replies turned on releases, %d on acquires", turned, renewed)
	}
}

// roles is a client whose Role says, call by call, what roles lists, then
// its last.
type roles struct {
	*fakeClients
	list []string
}

func (r *roles) Role(string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	role := r.list[0]
	if len(r.list) > 1 {
		r.list = r.list[1:]
	}
	return role
}

// The stop of a lost release reply waits for the client's next grant,
// not the release it is still in, and says whether it came.
func TestRegrantedWaitsForTheNextGrant(t *testing.T) {
	// A grant that comes is seen however slowly the host runs the polls (a
	// TTL of a minute); one that never comes ends the wait at 2 TTLs.
	for _, c := range []struct {
		roles []string
		ttl   time.Duration
		want  string
	}{
		{[]string{"holder", "holder", "waiter", "waiter", "holder"}, time.Minute, "after "},
		{[]string{"holder", "idle", "holder"}, time.Minute, "after "},
		{[]string{"holder"}, 10 * time.Millisecond, "not within 20ms"}, // still in its release
		{[]string{"holder", "waiter"}, 10 * time.Millisecond, "not within 20ms"},
	} {
		r := &roles{fakeClients: &fakeClients{names: []string{"c0"}}, list: c.roles}
		env := &Env{Clients: r, TTL: c.ttl}
		got := env.regranted(context.Background(), "c0", time.Millisecond)
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("roles %v: %q, want %q", c.roles, got, c.want)
		}
		if c.want == "after " && len(r.list) != 1 {
			t.Errorf("roles %v: grant seen with %v left", c.roles, r.list)
		}
	}
}
