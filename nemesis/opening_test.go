package nemesis

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"
)

// An aimed schedule's second strike is on a queued waiter's lease (after
// the holder's revocation, where leases can be revoked, else after the
// lost release reply): a revocation where leases can be revoked, else a
// pause of the waiter past its lease (TTL+1 s), each aimed at a section
// just begun (a bounded ahead), the revocation at one of at least 200 ms,
// the pause at one of at most a TTL; the rest of the schedule starts
// after it. Without aim, without a
// kind that ends a lease, or without lost replies, there is none.
func TestAimStrikesAWaiterEarly(t *testing.T) {
	for _, c := range []struct {
		faults []string
		kind   string
		dur    time.Duration
		ahead  string
		at     time.Duration
	}{
		{[]string{All}, LeaseRevoke, 0, "200ms-4s", 1100 * time.Millisecond},
		{[]string{"lease", "lost-reply", "crash"}, LeaseRevoke, 0, "200ms-4s", 1100 * time.Millisecond},
		{[]string{"pause", "lost-reply", "crash"}, PauseClient, 3 * time.Second, "0s-2s", 0},
	} {
		cfg := swarmConfig()
		cfg.Faults, cfg.Time, cfg.TTL = c.faults, 30*time.Second, 2*time.Second
		cfg.Aim, cfg.Dense = true, true
		for seed := int64(1); seed <= 20; seed++ {
			s, err := Generate(seed, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Entries) < 3 {
				t.Fatalf("%v seed %d: %d entries", c.faults, seed, len(s.Entries))
			}
			i := slices.IndexFunc(s.Entries, func(e Entry) bool { return e.Params["opening"] == "waiter" })
			if i != 1 {
				t.Fatalf("%v seed %d: the waiter's strike at %d: %+v", c.faults, seed, i, s.Entries[:2])
			}
			// After the holder's revocation, or where none, the lost
			// release reply.
			prev, w := s.Entries[0], s.Entries[1]
			want := c.at
			if c.kind == PauseClient {
				if prev.Fault != LostReplyRelease || prev.Target != TargetHolder || prev.Params["opening"] != "" {
					t.Errorf("%v seed %d: opens with %+v, want the lost release reply", c.faults, seed, prev)
				}
				want = prev.At + prev.Duration + 500*time.Millisecond
			}
			if w.Fault != c.kind || w.Target != TargetWaiter || !slices.Contains(cfg.Clients, w.Fallback) ||
				w.Duration != c.dur || w.Params["ahead"] != c.ahead || w.At != want {
				t.Errorf("%v seed %d: first entry %+v, want a waiter's %s", c.faults, seed, w, c.kind)
			}
			if w.Params["waited"] != "500ms" {
				t.Errorf("%v seed %d: waiter's strike %+v not limited to a waiter queued under TTL/4", c.faults, seed, w)
			}
			if c.kind == LeaseRevoke && w.Params["until"] != "passed" {
				t.Errorf("%v seed %d: waiter's revocation %+v over at once", c.faults, seed, w)
			}
			if c.kind == PauseClient && w.Params["before_write"] != "false" {
				t.Errorf("%v seed %d: waiter's pause %+v armed for a write", c.faults, seed, w)
			}
			if next := s.Entries[i+1]; next.At != w.At+w.Duration+500*time.Millisecond {
				t.Errorf("%v seed %d: %s at %s, not right after the waiter's strike", c.faults, seed, next.Fault, next.At)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("%v seed %d: %v", c.faults, seed, err)
			}
		}
	}
	// Not aimed, no kind that ends a waiter's lease, or no lost replies
	// (a run of pauses alone strikes the holder first): no such opening.
	noOpening(t, "waiter", []aimedFaults{{[]string{All}, false}, {[]string{"isolate", "lost-reply", "crash"}, true}, {[]string{"pause"}, true}, {[]string{"lease", "isolate"}, true}})
}

// With the operation timeout known, the waiter's revocation waits for a
// section that ends while the first in line, queued under TTL/4 as it
// began, still waits, with TTL/2 to spare: at most 3.5 s of a 5 s
// timeout and a TTL of 2 s (two TTLs, 4 s, left it 1 s at most for the
// write, the release and the hand-off), never under 200 ms, and two TTLs
// where the timeout is long or not known.
func TestWaiterOpeningFitsTheAcquire(t *testing.T) {
	for _, c := range []struct {
		op    time.Duration
		ahead string
	}{{5 * time.Second, "200ms-3.5s"}, {0, "200ms-4s"}, {20 * time.Second, "200ms-4s"}, {time.Second, "200ms-200ms"}} {
		cfg := swarmConfig()
		cfg.Time, cfg.TTL, cfg.OpTimeout, cfg.Aim = 30*time.Second, 2*time.Second, c.op, true
		for seed := int64(1); seed <= 5; seed++ {
			s, _ := Generate(seed, cfg)
			if w := s.Entries[1]; w.Params["opening"] != "waiter" || w.Params["ahead"] != c.ahead {
				t.Errorf("op timeout %s seed %d: waiter's opening %+v, want ahead %s", c.op, seed, w, c.ahead)
			}
		}
	}
}

// An aimed schedule where leases can be revoked opens with a revocation
// of the lease of a holder with at least 200 ms of its section ahead
// (param ahead, unbounded: one under way serves), the client drawn its
// fallback: a holder that lost its lock and works on; the waiter's strike
// comes after it and 100 ms of quiet, which puts the revoked holder's
// section out of its look. Not aimed, without lease
// revocations, or without lost replies, there is none.
func TestAimRevokesAHolderEarly(t *testing.T) {
	for _, faults := range [][]string{{All}, {"lease", "lost-reply", "crash"}} {
		cfg := swarmConfig()
		cfg.Faults, cfg.Time, cfg.TTL, cfg.Aim, cfg.Dense = faults, 30*time.Second, 2*time.Second, true, true
		for seed := int64(1); seed <= 20; seed++ {
			s, _ := Generate(seed, cfg)
			h, w := s.Entries[0], s.Entries[1]
			if h.Fault != LeaseRevoke || h.Target != TargetHolder || !slices.Contains(cfg.Clients, h.Fallback) || h.Duration != 2*enteredSlack ||
				h.Params["ahead"] != "200ms-" || h.Params["opening"] != "holder" || h.At != 500*time.Millisecond {
				t.Errorf("%v seed %d: first entry %+v, want the holder's lease revoked", faults, seed, h)
			}
			if w.Params["opening"] != "waiter" || w.At != h.At+h.Duration+500*time.Millisecond {
				t.Errorf("%v seed %d: second entry %+v, want the waiter's strike", faults, seed, w)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("%v seed %d: %v", faults, seed, err)
			}
		}
	}
	noOpening(t, "holder", []aimedFaults{{[]string{All}, false}, {[]string{"pause", "lost-reply", "crash"}, true}, {[]string{"lease", "isolate"}, true}})
}

// The waiter's pause an aimed schedule opens with stays on the waiter:
// the first pause of the holder is not swapped into its place
// (holderFirst), nor is it aimed again.
func TestWaiterOpeningKeepsItsTarget(t *testing.T) {
	cfg := swarmConfig()
	cfg.Faults, cfg.Time, cfg.Aim = []string{"pause", "lost-reply"}, 30*time.Second, true
	holders := 0
	for seed := int64(1); seed <= 20; seed++ {
		s, _ := Generate(seed, cfg)
		w := s.Entries[1]
		if w.Fault != PauseClient || w.Target != TargetWaiter || w.Params["mid_section"] != "" {
			t.Errorf("seed %d: opening %+v", seed, w)
		}
		for _, e := range s.Entries[2:] {
			if e.Fault == PauseClient && e.Target == TargetHolder {
				holders++
			}
		}
	}
	if holders == 0 {
		t.Error("no pause of the holder after the opening: nothing to swap")
	}
}

// An aimed schedule on a system with lost replies strikes, after the
// holder's and the waiter's openings, two lost releases of the holder:
// the reply lost, first, and then the request lost too (param request),
// cut after TTL/16, its next section held open as the first's is, on a
// holder entering a section of at most TTL/4 (param ahead); each after
// the one before it.
func TestAimLosesAReleaseRequest(t *testing.T) {
	cfg := swarmConfig()
	cfg.Time, cfg.TTL, cfg.Aim, cfg.Dense = 30*time.Second, 2*time.Second, true, true
	for seed := int64(1); seed <= 20; seed++ {
		s, _ := Generate(seed, cfg)
		first, req := s.Entries[2], s.Entries[3]
		if s.Entries[0].Params["opening"] != "holder" || s.Entries[1].Params["opening"] != "waiter" || first.Fault != LostReplyRelease || first.Params["request"] != "" {
			t.Fatalf("seed %d: opens with %+v", seed, s.Entries[:3])
		}
		if req.Fault != LostReplyRelease || req.Target != TargetHolder || !slices.Contains(cfg.Clients, req.Fallback) ||
			req.Params["request"] != "lost" || req.Params["hold_next"] != "500ms" || req.Params["ahead"] != "0s-500ms" || req.Duration != 125*time.Millisecond ||
			req.At != first.At+first.Duration+500*time.Millisecond {
			t.Errorf("seed %d: fourth entry %+v, want the holder's release request lost", seed, req)
		}
		for _, e := range s.Entries[4:] {
			if e.Params["request"] != "" || e.At < req.At+req.Duration {
				t.Errorf("seed %d: %+v after the lost request", seed, e)
			}
		}
	}
	// Without aim, none.
	cfg.Aim = false
	for seed := int64(1); seed <= 20; seed++ {
		s, _ := Generate(seed, cfg)
		for _, e := range s.Entries {
			if e.Params["request"] != "" {
				t.Errorf("seed %d: %+v unaimed", seed, e)
			}
		}
	}
}

// A revocation with param until=passed stays in force until the lock
// passes on, and says so; without it, it is over at once.
func TestRevocationHeldUntilTheLockPasses(t *testing.T) {
	fc := &fakeClients{names: []string{"c0", "c1"}, holder: "c0", waiter: "c1", leases: map[string]string{"c1": "1"}}
	env := &Env{Sys: leasing{}, Clients: fc, TTL: 2 * time.Second}
	plain, err := lease{}.Inject(context.Background(), env, Entry{Fault: LeaseRevoke, Target: TargetWaiter, Fallback: "c0"})
	if err != nil || plain.Hold != nil {
		t.Fatalf("a revocation without until: hold %v, err %v", plain.Hold != nil, err)
	}
	inj, err := lease{}.Inject(context.Background(), env, Entry{Fault: LeaseRevoke, Target: TargetWaiter, Fallback: "c0", Params: map[string]string{"until": "passed"}})
	if err != nil || inj.Hold == nil {
		t.Fatalf("a revocation until the lock passes: no hold (err %v)", err)
	}
	held := make(chan map[string]string, 1)
	go func() { held <- inj.Hold(context.Background(), 0) }()
	select {
	case p := <-held:
		t.Fatalf("the hold ended (%v) while c0 still held the lock", p)
	case <-time.After(50 * time.Millisecond):
	}
	fc.mu.Lock()
	fc.holder = ""
	fc.mu.Unlock()
	if p := <-held; p["passed"] != "true" {
		t.Errorf("hold ended with %v, want passed=true", p)
	}
}

// A waiter's strike with param waited passes over a section entered while
// a waiter has queued that long already, and strikes behind one entered
// while every waiter is fresh.
func TestAimWaiterPassesOverStaleQueues(t *testing.T) {
	t.Parallel()
	fc := &fakeClients{names: []string{"c0", "c1"}, holder: "c0", waiter: "c1", entering: "c0", think: time.Second, waited: 3 * time.Second}
	env := &Env{Clients: fc, TTL: 2 * time.Second, aimBy: time.Now().Add(300 * time.Millisecond)}
	if env.aimWaiter(context.Background(), "200ms-4s", 500*time.Millisecond) {
		t.Error("aimed behind a section whose first waiter had waited 3 s")
	}
	if !env.aimWaiter(context.Background(), "200ms-4s", 0) {
		t.Error("without a limit, not aimed behind a section entered")
	}
	fc.mu.Lock()
	fc.waited = 100 * time.Millisecond
	fc.mu.Unlock()
	env.aimBy = time.Now().Add(300 * time.Millisecond)
	if !env.aimWaiter(context.Background(), "200ms-4s", 500*time.Millisecond) {
		t.Error("not aimed behind a section whose waiters had waited 100 ms")
	}
}

// A waiter's strike that wants a fresh waiter gives up looking after two
// TTLs (here 100 ms), not aimWait's ten seconds, where none is ever fresh.
func TestAimWaiterLooksForTwoTTLs(t *testing.T) {
	fc := &fakeClients{names: []string{"c0", "c1"}, holder: "c0", waiter: "c1", entering: "c0", think: time.Second, waited: 3 * time.Second}
	env := &Env{Clients: fc, TTL: 50 * time.Millisecond}
	done := make(chan bool, 1)
	go func() { done <- env.aimWaiter(context.Background(), "200ms-4s", 500*time.Millisecond) }()
	select {
	case aimed := <-done:
		if aimed {
			t.Error("aimed behind a section whose first waiter had waited 3 s")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still looking for a fresh waiter after 5 s; want two TTLs, 100 ms")
	}
}

// staleQueue is fakeClients whose waiter has waited long until Waiter has
// been asked n times, and then is fresh: a queue that drains.
type staleQueue struct {
	*fakeClients
	n int
}

func (q *staleQueue) Waiter(min time.Duration) (string, bool) {
	q.mu.Lock()
	if q.n--; q.n < 0 {
		q.waited = 100 * time.Millisecond
	}
	q.mu.Unlock()
	return q.fakeClients.Waiter(min)
}

// A waiter's strike with param waited that finds no section begun behind
// a fresh queue waits for the queue to be fresh and strikes its first in
// line then (param fresh_queue), not the waiter longest in line while
// every waiter has queued for seconds; where it never turns fresh, that
// one after all.
func TestWaiterStrikeWaitsForAFreshQueue(t *testing.T) {
	t.Parallel()
	e := Entry{Fault: LeaseRevoke, Target: TargetWaiter, Fallback: "c0",
		Params: map[string]string{"ahead": "200ms-4s", "until": "passed", "waited": "500ms"}}
	q := &staleQueue{fakeClients: &fakeClients{names: []string{"c0", "c1"}, holder: "c0", waiter: "c1", waited: 3 * time.Second}, n: 3}
	env := &Env{Clients: q, TTL: 50 * time.Millisecond}
	params := map[string]string{}
	w, err := env.findClient(context.Background(), e, params, true)
	if err != nil || w != "c1" || params["fresh_queue"] != "true" || params["aimed"] != "" {
		t.Errorf("struck %q (err %v) with params %v; want c1 once its queue was fresh", w, err, params)
	}
	q.mu.Lock()
	if q.waited != 100*time.Millisecond {
		t.Error("struck before the queue turned fresh")
	}
	q.mu.Unlock()

	// Never fresh: the longest in line, once the wait is over.
	stale := &fakeClients{names: []string{"c0", "c1"}, holder: "c0", waiter: "c1", waited: 3 * time.Second}
	env = &Env{Clients: stale, TTL: 50 * time.Millisecond}
	params = map[string]string{}
	if w, err := env.findClient(context.Background(), e, params, true); err != nil || w != "c1" || params["aimed"] != "" {
		t.Errorf("never fresh: struck %q (err %v) with params %v", w, err, params)
	}
}

// aimedFaults are the families of a schedule, and whether it is aimed.
type aimedFaults struct {
	faults []string
	aim    bool
}

// noOpening fails t if a schedule of any of cases, seeds 1-20, has an
// opening of that name.
func noOpening(t *testing.T, name string, cases []aimedFaults) {
	t.Helper()
	for _, c := range cases {
		cfg := swarmConfig()
		cfg.Faults, cfg.Aim = c.faults, c.aim
		for seed := int64(1); seed <= 20; seed++ {
			s, _ := Generate(seed, cfg)
			for _, e := range s.Entries {
				if e.Params["opening"] == name {
					t.Errorf("%v aim %v seed %d: %s opening %+v", c.faults, c.aim, seed, name, e)
				}
			}
		}
	}
}

// Where leases can be neither revoked nor expired early (ZooKeeper's
// sessions), an aimed schedule with the clients' operation timeout known
// cuts a waiter's links, shorter than half a TTL, struck TTL/5 before an
// exec lock's acquire gives up (a second before the 5 s deadline): right
// after the outage, before the other openings (the waiter's clock step
// first there), which waited for their moments long enough to put it off
// to the fault phase's end. Without the timeout, or where leases can be
// revoked or keys expired early, none.
func TestAimCutsAWaiterGivingUp(t *testing.T) {
	cfg := swarmConfig()
	cfg.Faults, cfg.Time, cfg.TTL, cfg.OpTimeout = []string{All}, 30*time.Second, 2*time.Second, 5*time.Second
	cfg.Aim, cfg.Dense, cfg.Offers, cfg.UntoldWaiters = true, true, sessionKinds(), true
	for seed := int64(1); seed <= 20; seed++ {
		s, err := Generate(seed, cfg)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(s.Entries, func(e Entry) bool { return e.Params["opening"] == "giving-up" })
		if i != 1 || s.Entries[0].Params["opening"] != "outage" || s.Entries[2].Params["opening"] != "lost-watch" || s.Entries[3].Params["try"] != "2" || s.Entries[4].Params["try"] != "3" || s.Entries[5].Params["opening"] != "clock" || s.Entries[8].Params["opening"] != "release-request" {
			t.Fatalf("seed %d: the giving-up opening is entry %d after %v, want 1, right after the outage", seed, i, s.Entries[max(i-1, 0)].Params)
		}
		g, out := s.Entries[i], s.Entries[i-1]
		if g.Fault != Isolate || g.Target != TargetWaiter || !slices.Contains(cfg.Clients, g.Fallback) ||
			g.Duration != 900*time.Millisecond || g.Params["giving_up"] != "3.6s" || g.At != out.At+out.Duration+500*time.Millisecond {
			t.Errorf("seed %d: giving-up opening %+v", seed, g)
		}
		if next := s.Entries[i+1]; next.At < g.At+g.Duration {
			t.Errorf("seed %d: %s at %s, during the cut", seed, next.Fault, next.At)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
	for _, c := range []struct {
		offers []string
		op     time.Duration
		exec   bool
	}{{sessionKinds(), 0, true}, {nil, 5 * time.Second, true}, {append(sessionKinds(), ClockJumpEmulated), 5 * time.Second, true},
		{append(sessionKinds(), LeaseRevoke), 5 * time.Second, true}, {sessionKinds(), 5 * time.Second, false}} {
		cfg := swarmConfig()
		cfg.Aim, cfg.OpTimeout, cfg.TTL, cfg.Offers, cfg.UntoldWaiters = true, c.op, 2*time.Second, c.offers, c.exec
		for seed := int64(1); seed <= 20; seed++ {
			s, _ := Generate(seed, cfg)
			for _, e := range s.Entries {
				if e.Params["giving_up"] != "" {
					t.Errorf("%v op timeout %s exec %v seed %d: %+v", c.offers, c.op, c.exec, seed, e)
				}
			}
		}
	}
}

// A strike with param giving_up waits for a waiter that has waited that
// long in an acquire begun since the fault before stopped, strikes it as
// aimed, and falls back once the run's end is near: a waiter that had
// waited as long, its acquire begun before that fault's stop, is left
// alone. Meanwhile the holder's release is held, and let go at the strike.
func TestGivingUpWaitsForTheWait(t *testing.T) {
	now := time.Now()
	fc := &fakeClients{names: []string{"c0", "c1"}, holder: "c0", waiter: "c1", since: now.Add(-time.Second)}
	env := &Env{Clients: fc, TTL: 2 * time.Second, aimBy: now.Add(100 * time.Millisecond)}
	e := Entry{Fault: Isolate, Target: TargetWaiter, Fallback: "c0", Params: map[string]string{"giving_up": "3.6s"}}
	params := map[string]string{}
	if w, err := env.findClient(context.Background(), e, params, true); err != nil || params["aimed"] != "" {
		t.Errorf("a waiter of 1 s struck as giving up: %s, %v, %v", w, params, err)
	}
	fc.mu.Lock()
	fc.since, fc.hook = now.Add(-4*time.Second), nil
	fc.mu.Unlock()
	env.aimBy, env.calm = time.Now().Add(100*time.Millisecond), now.Add(-3*time.Second)
	params = map[string]string{}
	if w, err := env.findClient(context.Background(), e, params, true); err != nil || params["aimed"] != "" {
		t.Errorf("a waiter of 4 s whose acquire began before the fault before stopped struck as giving up: %s, %v, %v", w, params, err)
	}
	fc.take()
	env.aimBy, env.calm = time.Now().Add(time.Minute), now.Add(-5*time.Second)
	params = map[string]string{}
	if w, err := env.findClient(context.Background(), e, params, true); err != nil || w != "c1" || params["aimed"] != "true" || params["held"] != "" {
		t.Errorf("the waiter of 4 s, begun since the fault before: %s, %v, %v; want c1 aimed, no release held (none sent)", w, params, err)
	}
	h := fc.take()
	if h == nil || !slices.Contains(fc.calls, "intercept c0 release") {
		t.Fatalf("the holder's release not intercepted: %v", fc.calls)
	}
	h.before() // let go at the strike: returns at once
}

// sessionKinds are every fault kind but those that end a lease or expire
// keys early: what a system of sessions (ZooKeeper) offers, at most.
func sessionKinds() []string {
	var out []string
	for _, f := range families {
		for _, k := range f.Spec().Kinds {
			if k.Name != LeaseRevoke && k.Name != ClockJumpEmulated {
				out = append(out, k.Name)
			}
		}
	}
	return out
}

// Where the lock's waiters tell no lease (UntoldWaiters), the waiter's
// strike is a pause of the waiter that began to wait last, for TTL+1 s,
// once it has waited under TTL/8 and every waiter under TTL/4, behind any
// section (no param ahead);
// the holder's revocation still opens the schedule. Where no lease can
// be revoked, the flag changes nothing: the pause is aimed as before.
func TestUntoldWaitersPauseTheNewest(t *testing.T) {
	cfg := swarmConfig()
	cfg.Time, cfg.TTL, cfg.Aim, cfg.Dense, cfg.UntoldWaiters = 30*time.Second, 2*time.Second, true, true, true
	for seed := int64(1); seed <= 20; seed++ {
		s, _ := Generate(seed, cfg)
		h, w := s.Entries[0], s.Entries[1]
		if h.Params["opening"] != "holder" || h.Fault != LeaseRevoke {
			t.Errorf("seed %d: opens with %+v, want the holder's revocation", seed, h)
		}
		if w.Params["opening"] != "waiter" || w.Fault != PauseClient || w.Target != TargetWaiter || w.Duration != 3*time.Second ||
			w.Params["waiter"] != "newest" || w.Params["waited"] != "250ms" || w.Params["queue"] != "500ms" || w.Params["ahead"] != "" || w.Params["before_write"] != "false" {
			t.Errorf("seed %d: waiter's strike %+v, want the newest waiter paused 3s", seed, w)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
	cfg.Faults = []string{"pause", "lost-reply", "crash"}
	for seed := int64(1); seed <= 20; seed++ {
		told := cfg
		told.UntoldWaiters = false
		a, _ := Generate(seed, cfg)
		b, _ := Generate(seed, told)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("seed %d: without lease revocations the flag changed the schedule:\n%+v\n%+v", seed, a.Entries[:2], b.Entries[:2])
		}
	}
}

// staleNewest is fakeClients whose newest waiter has waited long until
// Newest has been asked n times, and then 100 ms: a slow section ends.
type staleNewest struct {
	*fakeClients
	n int
}

func (q *staleNewest) Newest(min time.Duration) (string, bool) {
	q.mu.Lock()
	if q.n--; q.n < 0 {
		q.newestWaited = 100 * time.Millisecond
	}
	q.mu.Unlock()
	return q.fakeClients.Newest(min)
}

// The pause of the newest waiter with params waited (250 ms) and queue
// (500 ms) strikes it only once it has waited under the first (param
// aimed; here 100 ms) and every waiter under the second, not while it has
// queued behind a slow section for seconds, nor while it has just asked
// again behind a queue that has not moved for seconds; where that never
// comes, the newest after all, once the look is over.
func TestNewestWaiterStruckFresh(t *testing.T) {
	cfg := Config{Aim: true, Clients: []string{"c0", "c1", "c2"}, TTL: 2 * time.Second, UntoldWaiters: true}.WithDefaults()
	e, ok := cfg.waiterOpening(1, families)
	if !ok {
		t.Fatal("no waiter opening")
	}
	q := &staleNewest{fakeClients: &fakeClients{names: cfg.Clients, holder: "c0", waiter: "c2", waited: 300 * time.Millisecond, newest: "c1", newestWaited: 3 * time.Second}, n: 4}
	env := &Env{Clients: q, TTL: cfg.TTL}
	params := map[string]string{}
	if w, err := env.findClient(context.Background(), e, params, false); err != nil || w != "c1" || params["aimed"] != "true" {
		t.Errorf("struck %q (err %v) with params %v; want c1 once it had waited under 500ms", w, err, params)
	}
	q.mu.Lock()
	if q.newestWaited != 100*time.Millisecond {
		t.Error("struck before the newest waiter was fresh")
	}
	q.mu.Unlock()

	for _, fc := range []*fakeClients{
		{names: cfg.Clients, holder: "c0", waiter: "c2", waited: 300 * time.Millisecond, newest: "c1", newestWaited: 3 * time.Second},
		{names: cfg.Clients, holder: "c0", waiter: "c2", waited: 3 * time.Second, newest: "c1", newestWaited: 100 * time.Millisecond},
	} {
		env = &Env{Clients: fc, TTL: cfg.TTL, aimBy: time.Now().Add(50 * time.Millisecond)}
		params = map[string]string{}
		if w, err := env.findClient(context.Background(), e, params, false); err != nil || w != "c1" || params["aimed"] != "" {
			t.Errorf("newest waited %s, longest %s: struck %q (err %v) with params %v", fc.newestWaited, fc.waited, w, err, params)
		}
	}
}
