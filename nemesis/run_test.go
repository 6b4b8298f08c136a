package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/locktest/locktest/backend/etcd/cluster"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
)

// --- helpers ---

type memRec struct {
	mu  sync.Mutex
	ops []histories.Op
	ch  chan histories.Op
}

func newRec() *memRec { return &memRec{ch: make(chan histories.Op, 1000)} }

func (r *memRec) Record(op histories.Op) (histories.Op, error) {
	r.mu.Lock()
	op.Index = len(r.ops)
	r.ops = append(r.ops, op)
	r.mu.Unlock()
	r.ch <- op
	return op, nil
}

func (r *memRec) all() []histories.Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// wait returns the next recorded op with f and fault, waiting for it as
// long as ctx lasts (a test's, see testContext): how soon it comes on a
// loaded machine is no property of the run.
func (r *memRec) wait(t *testing.T, ctx context.Context, f, fault string) histories.Op {
	t.Helper()
	for {
		select {
		case op := <-r.ch:
			if op.F == f && op.Value != nil && op.Value.Fault == fault {
				return op
			}
		case <-ctx.Done():
			t.Fatalf("no %s %s: %v", f, fault, context.Cause(ctx))
		}
	}
}

type fakeClients struct {
	mu     sync.Mutex
	names  []string
	holder string
	waiter string
	// waited, if set, is how long waiter has waited (Waiter finds it
	// only if that is at least its minWait); unset, any wait.
	waited time.Duration
	// since, if set, is when waiter began to wait (its wait then grows).
	since time.Time
	// newest, if set, is the client that began waiting last (else
	// waiter), and newestWaited, if set, how long it has waited (Newest
	// finds it only if that is at least its minWait); unset, any wait.
	newest       string
	newestWaited time.Duration
	// entering is the holder entering a slow section, and its think time.
	entering string
	think    time.Duration
	// midway is a holder mid-section, with left of its think time ahead.
	midway string
	left   time.Duration
	leases map[string]string
	calls  []string
	hook   *fakeHook
}

func (f *fakeClients) call(format string, args ...any) {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *fakeClients) Names() []string { return f.names }
func (f *fakeClients) Holder(string) (string, int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.holder, 1, f.holder != ""
}
func (f *fakeClients) Pause(c string, d time.Duration, bw bool) error {
	f.call("pause %s %v %v", c, d, bw)
	return nil
}
func (f *fakeClients) BumpClock(c string, d time.Duration) { f.call("bump %s %v", c, d) }
func (f *fakeClients) SetClockRate(c string, r float64)    { f.call("rate %s %v", c, r) }
func (f *fakeClients) ResetClock(c string)                 { f.call("reset %s", c) }
func (f *fakeClients) Crash(c string) error {
	f.call("crash %s", c)
	// A crashed client goes on as a new process that holds nothing.
	f.mu.Lock()
	if f.holder == c {
		f.holder = ""
	}
	f.mu.Unlock()
	return nil
}
func (f *fakeClients) Lease(c string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.leases[c]
	return l, ok
}

func (f *fakeClients) Waiter(min time.Duration) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w := f.wait(); w > 0 && w < min {
		return "", false
	}
	return f.waiter, f.waiter != ""
}
func (f *fakeClients) Newest(min time.Duration) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.newest != "" {
		return f.newest, f.newestWaited == 0 || f.newestWaited >= min
	}
	return f.waiter, f.waiter != "" && (f.wait() == 0 || f.wait() >= min)
}

// wait is how long waiter has waited (0: any wait); f.mu is held.
func (f *fakeClients) wait() time.Duration {
	if !f.since.IsZero() {
		return time.Since(f.since)
	}
	return f.waited
}
func (f *fakeClients) Entering(min, max, _ time.Duration) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok := f.entering != "" && f.think >= min && (max == 0 || f.think <= max)
	return f.entering, ok
}
func (f *fakeClients) Ahead(min time.Duration) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.midway, f.midway != "" && f.left >= min
}
func (f *fakeClients) Role(c string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch c {
	case f.holder:
		return "holder"
	case f.waiter:
		return "waiter"
	}
	return "idle"
}

func (f *fakeClients) Disarm(c string) (bool, time.Time) {
	f.call("disarm %s", c)
	return false, time.Time{}
}

// Intercept keeps the hook for the test to fire, as the client would just
// before it sends op.
func (f *fakeClients) Intercept(c, op string, before func(), after func(error)) (func() bool, error) {
	f.call("intercept %s %s", c, op)
	h := &fakeHook{before: before, after: after}
	f.mu.Lock()
	f.hook = h
	f.mu.Unlock()
	return func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return h.fired
	}, nil
}

type fakeHook struct {
	before func()
	after  func(error)
	fired  bool
}

// take disarms the armed hook, if any, and marks it fired.
func (f *fakeClients) take() *fakeHook {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.hook
	if h != nil {
		h.fired = true
		f.hook = nil
	}
	return h
}

// fire waits for an armed hook and fires it, as the client would just
// before it sends the operation: its before has run when fire returns, and
// the test calls its after with the operation's error.
func (f *fakeClients) fire(t *testing.T, ctx context.Context) *fakeHook {
	t.Helper()
	for {
		if h := f.take(); h != nil {
			h.before()
			return h
		}
		if ctx.Err() != nil {
			t.Fatal("no hook armed")
		}
		time.Sleep(time.Millisecond)
	}
}

// autoFire fires every hook armed until stop closes, each operation
// failing at once with err.
func (f *fakeClients) autoFire(stop <-chan struct{}, err error) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Millisecond):
		}
		if h := f.take(); h != nil {
			h.before()
			go h.after(err)
		}
	}
}

func (f *fakeClients) callList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// testContext ends a little before the test binary's deadline (-timeout):
// what a test merely expects to happen eventually (a cluster up, a fault's
// stop, a request through once the links are whole) it waits for as long
// as the test may run, not for a guess at how long that takes on a loaded
// machine (TestRunEveryKind's faults took 26-27 s with two suites at once
// on two cores, 14.5 s at a load of 15). Cut short of the deadline, the
// test fails saying what it waited for rather than in the binary's panic.
// Bounds that are what a test checks are measured, and asserted, on their
// own.
func testContext(t *testing.T) context.Context {
	t.Helper()
	d, ok := t.Deadline()
	if !ok {
		return context.Background()
	}
	ctx, cancel := context.WithDeadline(context.Background(), d.Add(-time.Until(d)/10))
	t.Cleanup(cancel)
	return ctx
}

func startCluster(t *testing.T) (*cluster.Cluster, context.Context) {
	t.Helper()
	ctx := testContext(t)
	// A heartbeat of 50 ms, an election timeout of 500 ms: the package's
	// parallel tests run a dozen clusters' members in one process, and
	// at the cluster's default (10 ms, 100 ms), on two cores beside
	// another suite, a heartbeat late by 100 ms ended a term: 262-531
	// elections begun a run, and requests proposed into a term that
	// ended waited out etcd's 5 s ("request timed out"), which failed 3
	// of 6 runs of the package at load 34-80 (none of 5 with these).
	c, err := cluster.Start(ctx, cluster.Config{Dir: t.TempDir(), TickMs: 50, ElectionMs: 500})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, ctx
}

type runResult struct {
	rep Report
	err error
}

// goRun runs sched in the background; cancel ends it.
func goRun(c *cluster.Cluster, cl Clients, rec Recorder, sched Schedule) (cancel func() runResult) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan runResult, 1)
	go func() {
		rep, err := Run(ctx, Config{}, c, cl, rec, sched)
		done <- runResult{rep, err}
	}()
	return func() runResult { stop(); return <-done }
}

// put puts k, waiting as long as ctx lasts (a test's, see testContext).
// A put that etcd lost in a leader change comes back "request timed out"
// after etcd's own request timeout, and is never proposed again: it is
// put again (the cause backend/etcd/cluster's commitWithin found; here,
// two suites at once failed five tests so, the put after a heal).
func put(ctx context.Context, cl *clientv3.Client, k, v string) error {
	for {
		_, err := cl.Put(ctx, k, v)
		if !errors.Is(err, rpctypes.ErrTimeout) && !errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail) || ctx.Err() != nil {
			return err
		}
	}
}

// putWithin puts k, giving up after d: for a put that must not commit.
func putWithin(ctx context.Context, cl *clientv3.Client, d time.Duration, k, v string) error {
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return put(pctx, cl, k, v)
}

// checkHealed checks that all members agree and run, nothing is cut or
// paused, no proxy has a toxic or is disabled, and every link of names
// passes traffic.
func checkHealed(t *testing.T, ctx context.Context, c *cluster.Cluster, names ...string) {
	t.Helper()
	if cuts := c.Cuts(); len(cuts) > 0 {
		t.Fatalf("cuts left: %v", cuts)
	}
	for i, m := range c.Members() {
		if !c.Running(i) || c.Paused(i) {
			t.Fatalf("%s: running %v paused %v", m.Name, c.Running(i), c.Paused(i))
		}
	}
	ps, err := c.Toxiproxy().Proxies()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if !p.Enabled || len(p.ActiveToxics) > 0 {
			t.Fatalf("proxy %s: enabled %v, toxics %v", p.Name, p.Enabled, p.ActiveToxics)
		}
	}
	for _, name := range names {
		eps, err := c.Endpoints(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, ep := range eps {
			cl, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			err = put(ctx, cl, "check/"+name, "v")
			cl.Close()
			if err != nil {
				t.Fatalf("link %s->m%d: %v", name, i, err)
			}
		}
	}
	hs, err := c.Hashes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if checker.Consistency(hs).Verdict != checker.Valid {
		t.Fatalf("members disagree: %+v", hs)
	}
}

// checkPairs checks the nemesis events: start/stop pairs in order, then one
// heal at the end.
func checkPairs(t *testing.T, ops []histories.Op, kinds ...string) {
	t.Helper()
	var got []string
	for _, op := range ops {
		if op.Process != histories.Nemesis || op.Type != histories.Info || op.Value == nil {
			t.Fatalf("bad nemesis op %+v", op)
		}
		got = append(got, op.F+" "+op.Value.Fault)
	}
	var want []string
	for _, k := range kinds {
		want = append(want, "start "+k, "stop "+k)
	}
	want = append(want, "heal all")
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// --- tests ---

// TestRunClientFaults checks our own scheduling of the faults carried out
// by the workload (clocks, pauses, client crashes) against a fake.
func TestRunClientFaults(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t)
	fc := &fakeClients{names: []string{"c0", "c1", "c2", "c3"}, holder: "c3"}
	ms := 20 * time.Millisecond
	sched := Schedule{Members: 3, Clients: fc.names, Entries: []Entry{
		{At: 0, Fault: ClockBump, Target: TargetHolder, Fallback: "c0", Duration: ms, Params: map[string]string{"delta": "1.5s"}},
		{At: 0, Fault: ClockStrobe, Target: "c1", Duration: 5 * ms, Params: map[string]string{"delta": "500ms", "period": "10ms"}},
		{At: 0, Fault: ClockRate, Target: "c2", Duration: ms, Params: map[string]string{"rate": "0.5"}},
		{At: 0, Fault: PauseClient, Target: TargetHolder, Fallback: "c0", Duration: 5 * ms, Params: map[string]string{"before_write": "true"}},
		{At: 0, Fault: CrashClient, Target: TargetHolder, Fallback: "c1"},
		{At: 500 * time.Millisecond, Fault: Isolate, Target: TargetHolder, Fallback: "c2", Duration: ms},
	}}
	rec := newRec()
	cancel := goRun(c, fc, rec, sched)
	// The crash leaves nobody holding a lock: the isolation's fallback is
	// used. (The test cleared the holder once it saw the crash recorded,
	// which a loaded machine let come after the isolation had begun.)
	rec.wait(t, ctx, histories.FStart, Isolate)
	rec.wait(t, ctx, histories.FStop, Isolate)
	res := cancel()
	if res.err != nil {
		t.Fatal(res.err)
	}
	ops := rec.all()
	checkPairs(t, ops, ClockBump, ClockStrobe, ClockRate, PauseClient, CrashClient, Isolate)
	if v := ops[0].Value; !slices.Equal(v.Targets, []string{"c3"}) || v.Params["selector"] != "holder" || v.Params["delta"] != "1.5s" {
		t.Fatalf("clock-bump start: %+v", v)
	}
	if v := ops[10].Value; !slices.Equal(v.Targets, []string{"c2"}) || v.Params["resolved"] != "fallback" {
		t.Fatalf("isolate start: %+v", v)
	}
	if len(res.rep.Faults) != 6 || res.rep.Faults[5].Error != "" {
		t.Fatalf("report: %+v", res.rep)
	}

	calls := fc.callList()
	strobes := 0
	var rest []string
	for _, cl := range calls {
		if strings.HasPrefix(cl, "bump c1 ") {
			strobes++
			continue
		}
		rest = append(rest, cl)
	}
	want := []string{
		"bump c3 1.5s", "reset c3",
		"reset c1",
		"rate c2 0.5", "rate c2 1",
		"pause c3 100ms true", "disarm c3", // armed for a write that never came: called off at its stop
		"crash c3",
		"reset c0", "reset c1", "reset c2", "reset c3", "disarm c0", "disarm c1", "disarm c2", "disarm c3", // heal: clocks, then pauses
	}
	if !slices.Equal(rest, want) || strobes < 2 {
		t.Fatalf("calls %q (%d strobe bumps), want %q", rest, strobes, want)
	}
	checkHealed(t, ctx, c, "c2")
}

// TestRunPartitionLeader isolates the leader with one client on its side:
// the majority elects a new leader, the client on the majority side
// commits, the one with the old leader cannot; heal restores everything.
func TestRunPartitionLeader(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t)
	oldIndex, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := c.Members()[oldIndex]
	fc := &fakeClients{names: []string{"c0", "c1"}}
	c0, err := c.Client("c0")
	if err != nil {
		t.Fatal(err)
	}
	// c1 talks to the majority only, through its links: a connection to
	// the old leader, cut as the partition starts, would fail a put sent
	// before the client saw it close (EOF), which says nothing of the
	// majority.
	eps, err := c.Endpoints("c1")
	if err != nil {
		t.Fatal(err)
	}
	eps = slices.Delete(eps, oldIndex, oldIndex+1)
	c1, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	sched := Schedule{Members: 3, Entries: []Entry{{
		Fault: PartitionLeader, Target: TargetLeader, Fallback: "m0", Duration: time.Minute,
		Sides: map[string]int{"c0": 0, "c1": 1},
	}}}
	rec := newRec()
	cancel := goRun(c, fc, rec, sched)
	start := rec.wait(t, ctx, histories.FStart, PartitionLeader)
	cut := time.Now()
	if !slices.Equal(start.Value.Targets, []string{old.Name}) || start.Value.Params["selector"] != "leader" {
		t.Fatalf("start: %+v", start.Value)
	}
	t.Logf("start params: %v", start.Value.Params)

	// The majority elects a new leader.
	var rest []*cluster.Member
	for _, m := range c.Members() {
		if m != old {
			rest = append(rest, m)
		}
	}
	for {
		l0, l1 := rest[0].Etcd().Server.Leader(), rest[1].Etcd().Server.Leader()
		if l0 != 0 && l0 == l1 && uint64(l0) != old.ID {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no new leader in the majority")
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("new leader %v after the partition started", time.Since(cut).Round(time.Millisecond))
	began := time.Now()
	if err := put(ctx, c1, "k", "majority"); err != nil {
		t.Fatalf("client on the majority side: %v", err)
	}
	t.Logf("majority-side put took %v", time.Since(began).Round(time.Millisecond))
	if err := putWithin(ctx, c0, time.Second, "k", "minority"); err == nil {
		t.Fatal("client on the old leader's side committed")
	}

	res := cancel()
	if res.err != nil {
		t.Fatal(res.err)
	}
	checkPairs(t, rec.all(), PartitionLeader)
	t.Logf("heal took %v", res.rep.Heal.Round(time.Millisecond))
	if err := put(ctx, c0, "k", "healed"); err != nil {
		t.Fatalf("c0 after heal: %v", err)
	}
	checkHealed(t, ctx, c, "c0", "c1")
}

// TestRunCrashLeader crashes the leader, writes while it is down, and checks
// it restarted and caught up.
func TestRunCrashLeader(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t)
	oldIndex, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := c.Members()[oldIndex]
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	sched := Schedule{Members: 3, Entries: []Entry{{Fault: CrashLeader, Target: TargetLeader, Fallback: "m1", Duration: 700 * time.Millisecond}}}
	rec := newRec()
	cancel := goRun(c, nil, rec, sched)
	rec.wait(t, ctx, histories.FStart, CrashLeader)
	if c.Running(old.Index) {
		t.Fatal("leader still running")
	}
	// A put proposed while there is no leader is dropped by raft and the
	// server answers only at its request timeout (~5 s): wait for the new
	// leader first.
	began := time.Now()
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("new leader %v after the crash was recorded", time.Since(began).Round(time.Millisecond))
	for i := range 30 {
		if err := put(ctx, admin, fmt.Sprintf("down/%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	stop := rec.wait(t, ctx, histories.FStop, CrashLeader)
	t.Logf("stop params %v", stop.Value.Params)
	if stop.Error != "" || stop.Value.Params["restart_took"] == "" {
		t.Fatalf("stop: %+v", stop)
	}
	if res := cancel(); res.err != nil {
		t.Fatal(res.err)
	}
	checkHealed(t, ctx, c, "c0")
}

// TestRunCrashAll crashes every member at once (crash-member with target
// all) and checks that none runs until the fault stops, then that all
// restarted together and the cluster serves again.
func TestRunCrashAll(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t)
	sched := Schedule{Members: 3, Entries: []Entry{{Fault: CrashMember, Target: AllMembers, Duration: 700 * time.Millisecond}}}
	rec := newRec()
	cancel := goRun(c, nil, rec, sched)
	start := rec.wait(t, ctx, histories.FStart, CrashMember)
	if got := start.Value.Targets; len(got) != 3 {
		t.Errorf("targets %v, want the 3 members", got)
	}
	for _, m := range c.Members() {
		if c.Running(m.Index) {
			t.Errorf("member %d still running under crash-member all", m.Index)
		}
	}
	stop := rec.wait(t, ctx, histories.FStop, CrashMember)
	if stop.Error != "" || stop.Value.Params["restart_took"] == "" {
		t.Fatalf("stop: %+v", stop)
	}
	for _, m := range c.Members() {
		if !c.Running(m.Index) {
			t.Errorf("member %d not restarted when the fault stopped", m.Index)
		}
	}
	if res := cancel(); res.err != nil {
		t.Fatal(res.err)
	}
	checkHealed(t, ctx, c, "c0")
}

// TestRunLease revokes a real session's lease from outside, then starves
// another session's keepalives until the server expires it, while a second
// client waits for the lock.
func TestRunLease(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t)
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	cli := map[string]*clientv3.Client{}
	for _, n := range []string{"c0", "c1"} {
		if cli[n], err = c.Client(n); err != nil {
			t.Fatal(err)
		}
	}
	// c0's lease is revoked, not starved: its TTL outlasts any stall of a
	// loaded machine until then.
	sess := map[string]*concurrency.Session{}
	if sess["c0"], err = concurrency.NewSession(cli["c0"], concurrency.WithTTL(60)); err != nil {
		t.Fatal(err)
	}
	fc := &fakeClients{names: []string{"c0", "c1"}, holder: "c0", leases: map[string]string{"c0": hex(sess["c0"].Lease())}}
	m := concurrency.NewMutex(sess["c0"], "/lock")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	keys := func() int64 {
		r, err := admin.Get(ctx, "/lock", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return r.Count
	}
	if keys() != 1 {
		t.Fatal("no lock key")
	}

	// Revoke.
	rec := newRec()
	res := goRun(c, fc, rec, Schedule{Members: 3, Entries: []Entry{{Fault: LeaseRevoke, Target: TargetHolder, Fallback: "c1"}}})
	stop := rec.wait(t, ctx, histories.FStop, LeaseRevoke)
	if stop.Error != "" || !slices.Equal(stop.Value.Targets, []string{"c0"}) {
		t.Fatalf("stop %+v", stop)
	}
	if n := keys(); n != 0 {
		t.Fatalf("%d lock keys after revoke", n)
	}
	select {
	case <-sess["c0"].Done():
	case <-ctx.Done():
		t.Fatal("session not done after its lease was revoked")
	}
	if r := res(); r.err != nil {
		t.Fatal(r.err)
	}
	checkPairs(t, rec.all(), LeaseRevoke)

	// Starve: c1 holds the lock, c0 (new session) waits for it. c1's
	// lease, of 2 s so that the starvation ends it within the fault,
	// begins only now: begun with c0's and idle through the revocation, a
	// loaded machine's stalls of its keepalives once ended it before its
	// Lock ("requested lease not found").
	if sess["c1"], err = concurrency.NewSession(cli["c1"], concurrency.WithTTL(2)); err != nil {
		t.Fatal(err)
	}
	m1 := concurrency.NewMutex(sess["c1"], "/lock")
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// The waiter's lease is not what is starved: a TTL of 20 s keeps it
	// through a loaded machine's stalls (with 2 s, once, it expired while
	// it waited, and the waiter never got the lock).
	s0, err := concurrency.NewSession(cli["c0"], concurrency.WithTTL(20))
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		at  time.Time
		err error
	}
	got := make(chan grant, 1)
	go func() {
		err := concurrency.NewMutex(s0, "/lock").Lock(ctx)
		got <- grant{time.Now(), err}
	}()
	fc.mu.Lock()
	fc.holder, fc.leases["c1"] = "c1", hex(sess["c1"].Lease())
	fc.mu.Unlock()
	rec = newRec()
	res = goRun(c, fc, rec, Schedule{Members: 3, Entries: []Entry{{Fault: LeaseStarve, Target: TargetHolder, Fallback: "c0", Duration: 8 * time.Second}}})
	start := rec.wait(t, ctx, histories.FStart, LeaseStarve)
	began := time.Now()
	stop = rec.wait(t, ctx, histories.FStop, LeaseStarve)
	t.Logf("starve: start %v, stop %v", start.Value.Params, stop.Value.Params)
	if stop.Value.Params["expired"] != "true" || !slices.Equal(stop.Value.Targets, []string{"c1"}) {
		t.Fatalf("stop %+v", stop.Value)
	}
	select {
	case g := <-got:
		if g.err != nil {
			t.Fatalf("waiting client's Lock: %v", g.err)
		}
		t.Logf("waiting client got the lock %v after the starvation began", g.at.Sub(began).Round(time.Millisecond))
	case <-ctx.Done():
		t.Fatal("waiting client did not get the lock")
	}
	select {
	case <-sess["c1"].Done():
	case <-ctx.Done():
		t.Fatal("starved session not done")
	}
	if r := res(); r.err != nil {
		t.Fatal(r.err)
	}
	checkPairs(t, rec.all(), LeaseStarve)
	checkHealed(t, ctx, c, "c0", "c1")
}

// TestHealRestoresEverything leaves a mess behind (partition, paused member,
// crashed member, toxics, a disabled proxy) and checks that the heal at the
// end of Run clears all of it.
func TestHealRestoresEverything(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t)
	if err := c.Partition([][]int{{0}, {1, 2}}); err != nil {
		t.Fatal(err)
	}
	if err := c.PauseMember(1); err != nil {
		t.Fatal(err)
	}
	if err := c.HardStopMember(2); err != nil {
		t.Fatal(err)
	}
	links, err := c.Links("c0")
	if err != nil {
		t.Fatal(err)
	}
	var ts toxics
	for _, p := range links {
		if err := ts.cut(p, "test"); err != nil {
			t.Fatal(err)
		}
	}
	p, err := c.Link("c1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Disable(); err != nil {
		t.Fatal(err)
	}
	rec := newRec()
	fc := &fakeClients{names: []string{"c0", "c1"}}
	done, cancel := context.WithCancel(ctx)
	cancel()
	rep, err := Run(done, Config{}, c, fc, rec, Schedule{Members: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("heal took %v", rep.Heal.Round(time.Millisecond))
	ops := rec.all()
	checkPairs(t, ops)
	if v := ops[0].Value; !slices.Equal(v.Targets, []string{"m1", "m2"}) {
		t.Fatalf("heal targets %v", v.Targets)
	}
	checkHealed(t, ctx, c, "c0", "c1")
}

// TestRunFiveMemberRing runs a majorities ring and a bridge on five members;
// the cluster keeps a leader and commits through both.
func TestRunFiveMemberRing(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c, err := cluster.Start(ctx, cluster.Config{Members: 5, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fc := &fakeClients{names: []string{"c0"}}
	sched := Schedule{Members: 5, Entries: []Entry{
		{Fault: PartitionMajoritiesRing, Groups: [][]int{{3, 0, 4, 1, 2}}, Sides: map[string]int{"c0": 0}, Duration: time.Minute},
	}}
	rec := newRec()
	cancel := goRun(c, fc, rec, sched)
	start := rec.wait(t, ctx, histories.FStart, PartitionMajoritiesRing)
	t.Logf("ring: %v", start.Value.Params)
	if got := len(c.Cuts()); got != 5 {
		t.Fatalf("%d cut pairs", got)
	}
	if start.Value.Params["clients"] != "c0:m0+m2+m3" {
		t.Fatalf("client placement %q", start.Value.Params["clients"])
	}
	// Write through the leader: a member that cannot reach it forwards
	// proposals into the void (they time out after ~5 s).
	var lc *clientv3.Client
	for lc == nil {
		for i, m := range c.Members() {
			if uint64(m.Etcd().Server.Leader()) == m.ID {
				if lc, err = c.DirectClient(i); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatal("no leader")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := put(ctx, lc, "ring", "v"); err != nil {
		t.Fatal(err)
	}
	if r := cancel(); r.err != nil {
		t.Fatal(r.err)
	}
	checkHealed(t, ctx, c, "c0")
}

// TestRunEveryKind fires every fault kind once, briefly, on a 5-member
// cluster and checks that each started and stopped without error and that
// the heal leaves a sound cluster.
func TestRunEveryKind(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	c, err := cluster.Start(ctx, cluster.Config{Members: 5, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	names := []string{"c0", "c1"}
	leases := map[string]string{}
	for _, n := range names {
		cli, err := c.Client(n)
		if err != nil {
			t.Fatal(err)
		}
		ttl := int64(60) // c0's lease is revoked
		if n == "c1" {
			ttl = 2 // c1's lease is starved (without keepalives: expires anyway)
		}
		g, err := cli.Grant(ctx, ttl)
		if err != nil {
			t.Fatal(err)
		}
		leases[n] = hex(g.ID)
		if _, err := c.Proxy(n+"-resource", c.Members()[0].ClientAddr()); err != nil {
			t.Fatal(err)
		}
	}
	fc := &fakeClients{names: names, holder: "c1", leases: leases}
	// Every family etcd runs: those of --nemesis all (failover and the
	// emulated clock jump are asked for by name).
	all := Expand([]string{All}, Offered(c))
	var allKinds []string
	for _, name := range all {
		f, _ := family(name)
		allKinds = append(allKinds, everyKind(f)...)
	}
	cfg := Config{Faults: all, Members: 5, Clients: names, Time: 2 * time.Hour}
	full, err := Generate(3, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// One entry of each kind, in kind order, 150 ms apart, each 100 ms long.
	var sched Schedule
	sched.Members = 5
	var kinds []string
	for _, k := range allKinds {
		for _, e := range full.Entries {
			if e.Fault != k {
				continue
			}
			if e.Duration > 0 {
				e.Duration = 100 * time.Millisecond
			}
			delete(e.Params, "ahead") // no sections here to aim at (TestAim... covers aiming)
			switch k {
			case LeaseStarve:
				e.Duration = 5 * time.Second // until the lease expired
			case LeaseRevoke:
				e.Target, e.Fallback = "c0", "" // c1's lease is starved first
			}
			e.At = 0
			sched.Entries = append(sched.Entries, e)
			kinds = append(kinds, k)
			break
		}
	}
	if len(kinds) != len(allKinds) {
		t.Fatalf("generated kinds %v", kinds)
	}
	rec := newRec()
	firing := make(chan struct{})
	defer close(firing)
	go fc.autoFire(firing, errors.New("connection closed"))
	cancel := goRun(c, fc, rec, sched)
	last := kinds[len(kinds)-1]
	rec.wait(t, ctx, histories.FStop, last)
	res := cancel()
	if res.err != nil {
		t.Fatal(res.err)
	}
	for _, f := range res.rep.Faults {
		t.Logf("%-26s %v %v %v..%v %s", f.Fault, f.Targets, f.Params, f.Start.Round(time.Millisecond), f.Stop.Round(time.Millisecond), f.Error)
		if f.Error != "" {
			t.Errorf("%s: %s", f.Fault, f.Error)
		}
	}
	checkPairs(t, rec.all(), kinds...)
	checkHealed(t, ctx, c, names...)
}

func hex(l clientv3.LeaseID) string { return strconv.FormatInt(int64(l), 16) }

// A lost reply: the holder's next operation (here a delete of a key, over
// its own links) reaches the server and is applied, its reply is dropped,
// and the cut after the fault's duration breaks the connection: the client
// sees an error soon after the cut, not at its own timeout, and the key is
// gone on the server. The fault's params say what the client saw. With
// param request=lost the request is held too: the client sees the same
// error, and the key is still there.
func TestRunLostReply(t *testing.T) {
	t.Parallel()
	t.Run("reply", func(t *testing.T) { testRunLost(t, false) })
	t.Run("request", func(t *testing.T) { testRunLost(t, true) })
}

func testRunLost(t *testing.T, request bool) {
	c, ctx := startCluster(t)
	cli, err := c.Client("c0")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if err := put(ctx, cli, "lost/k", "v"); err != nil {
		t.Fatal(err)
	}
	fc := &fakeClients{names: []string{"c0", "c1"}, holder: "c0"}
	hold := 300 * time.Millisecond
	params := map[string]string{"hold_next": "500ms"}
	if request {
		params["request"] = "lost"
	}
	sched := Schedule{Members: 3, Clients: fc.names, Entries: []Entry{
		{At: 0, Fault: LostReplyRelease, Target: TargetHolder, Fallback: "c1", Duration: hold, Params: params},
	}}
	rec := newRec()
	cancel := goRun(c, fc, rec, sched)
	h := fc.fire(t, ctx)
	sent := time.Now()
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	_, derr := cli.Delete(dctx, "lost/k")
	dcancel()
	took := time.Since(sent)
	h.after(derr) // returns once the links are whole
	// The next request goes through: the cut lost one reply, no more.
	if err := put(ctx, cli, "lost/next", "v"); err != nil {
		t.Errorf("the request after the lost reply: %v", err)
	}
	stop := rec.wait(t, ctx, histories.FStop, LostReplyRelease)
	res := cancel()
	if res.err != nil {
		t.Fatal(res.err)
	}
	if derr == nil {
		t.Fatalf("the delete returned its reply (after %v); want it lost", took)
	}
	// Not before the cut. Soon after it, by the fault's own record
	// (answered_after: the client's answer came within answerWait of the
	// cut), not by this test's clock, which a loaded machine stretches.
	if took < hold {
		t.Errorf("the client saw %q after %v; want it after the cut at %v", derr, took, hold)
	}
	direct, err := c.DirectClient()
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	got, err := direct.Get(ctx, "lost/k")
	if err != nil {
		t.Fatal(err)
	}
	p := stop.Value.Params
	// The cut waits for the server's answer (the delete's reply, held at
	// the proxy): the delete was applied before its connection closed.
	// Only a server that has not answered within answerWait after the
	// fault's duration is cut first, and the fault then says so (its
	// story: whether it took effect is unknown).
	applied := len(got.Kvs) == 0
	switch answered := p["server_answered"]; {
	case request:
		if applied || answered != "" {
			t.Errorf("request lost: the server applied the delete %v (%+v), server_answered %q", applied, got.Kvs, answered)
		}
	case answered == "yes":
		if !applied {
			t.Errorf("the server answered the delete, but did not apply it: %+v", got.Kvs)
		}
	case strings.HasPrefix(answered, "no") && strings.Contains(p["missed"], "whether it took effect is unknown"):
		t.Logf("the server did not answer in time: %v", p)
	default:
		t.Errorf("server_answered %q, missed %q", answered, p["missed"])
	}
	if p["op"] != histories.Release || p["reply"] != "lost" || p["answered_after"] == "" || !strings.HasPrefix(p["client_saw"], "error: ") || p["role"] != "holder" ||
		p["request"] != params["request"] {
		t.Errorf("stop params %v", p)
	}
	// Param hold_next: the client's next section is held open, a pause
	// armed before its next write.
	fc.mu.Lock()
	calls := slices.Clone(fc.calls)
	fc.mu.Unlock()
	if !slices.Contains(calls, "pause c0 500ms true") {
		t.Errorf("calls %v; want c0's next write paused 500ms", calls)
	}
	if !slices.Equal(stop.Value.Targets, []string{"c0"}) {
		t.Errorf("targets %v", stop.Value.Targets)
	}
	if calls := fc.callList(); !slices.Contains(calls, "intercept c0 release") {
		t.Errorf("calls %v", calls)
	}
	checkHealed(t, ctx, c, "c0")
}

// A lost acquire reply on a client's request stays in force until the
// acquire has its answer, up to the operation timeout: a client that made
// its claim twice (ZooKeeper's ghost node) answers only when it gives up,
// and a next fault must not end its session first. Here the client answers
// 4 s after the cut, later than the 3 s a lost reply's stop waits for
// others.
func TestLostAcquireReplyWaitsForTheAnswer(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t)
	fc := &fakeClients{names: []string{"c0", "c1"}, holder: "c0"}
	sched := Schedule{Members: 3, Clients: fc.names, Entries: []Entry{
		{At: 0, Fault: LostReplyAcquire, Target: TargetHolder, Fallback: "c1", Duration: 200 * time.Millisecond},
	}}
	rec := newRec()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := Run(rctx, Config{OpTimeout: 8 * time.Second}, c, fc, rec, sched)
		done <- err
	}()
	fc.fire(t, ctx) // the holder's section ends: its next acquire is armed
	h := fc.fire(t, ctx)
	time.Sleep(200*time.Millisecond + answerWait + time.Second) // the client's wait behind its first claim
	h.after(errors.New("zk: connection closed"))
	ev := rec.wait(t, ctx, histories.FStop, LostReplyAcquire)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p := ev.Value.Params
	if p["answered_after"] == "" || p["client_saw"] != "error: zk: connection closed" {
		t.Errorf("stop params %v; want the acquire's answer", p)
	}
}
