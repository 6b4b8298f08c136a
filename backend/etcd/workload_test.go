package etcd

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locktest/locktest/backend/etcd/cluster"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/recordtest"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/workload"
)

func verdicts(ops []histories.Op) map[string]checker.Verdict {
	v := map[string]checker.Verdict{}
	for _, r := range checker.Linearizable(ops, checker.Options{Timeout: 20 * time.Second}) {
		v[r.Name] = r.Verdict
	}
	return v
}

// A quiet run: a well-formed, valid history in which the observer saw every
// release. Quiet means no fault, so no lease may be lost; a lease of 5 s
// keeps that true on a loaded machine too, where with 2 s a stall of the
// whole process past the TTL (acquire p90 near 1 s, two suites and other
// work on two cores) let a lease lapse: the lease race, which this test is
// not about.
func TestQuietRun(t *testing.T) {
	cfg := testConfig()
	cfg.Clients = 3
	cfg.TTL = 5
	cfg.Guard = workload.GuardClock
	e := setup(t, resource.Fenced, cfg)
	e.start()
	e.rec.WaitFor(t, 10*time.Second, 0, "ten releases", func(histories.Op) bool {
		ops, _ := e.rec.Snapshot()
		n := 0
		for _, op := range ops {
			if op.F == histories.Release && op.Type == histories.OK {
				n++
			}
		}
		return n >= 10
	})
	st, ops := e.finish()
	releases, byRelease := 0, 0
	for _, op := range ops {
		switch {
		case op.F == histories.Release && op.Type == histories.OK:
			releases++
		case op.F == histories.FKeyDeleted:
			if op.Value.Params["by"] == "release" {
				byRelease++
			} else {
				t.Errorf("unexpected deletion in a quiet run: %+v", op.Value)
			}
		case op.F == histories.FLeaseLost:
			t.Errorf("lease lost in a quiet run: %+v", op.Value)
		}
	}
	if byRelease != releases {
		t.Errorf("observer saw %d deletions by release, clients released %d times", byRelease, releases)
	}
	if st.GuardRefusals != 0 || st.LeasesLost != 0 {
		t.Errorf("stats %+v", st)
	}
	for name, v := range verdicts(ops) {
		if v != checker.Valid {
			t.Errorf("%s: %s", name, v)
		}
	}
}

// The keepalives of the sessions run on the clients' clocks: at rate 0.6 a
// TTL-3s lease is renewed every 1 s of client time, 5/3 s of host time;
// at rate 4, every 1/4 s of host time. Both keep the lease alive. (With
// TTL 2 and rate 0.5, as this test had, the slow client's renewals left the
// server 0.67 s of slack, less than a loaded machine's stalls: the lease
// expired, which is not what this test is about.)
func TestKeepAliveCadenceFollowsClientClock(t *testing.T) {
	const ttl = 3
	period := ttl * time.Second / 3 // a host-clock client's renewal period
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := cluster.Start(ctx, cluster.Config{LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	type sent struct {
		rate  float64
		times chan time.Time
	}
	var sessions []*concurrency.Session
	var traces []sent
	notPaused := func(ctx context.Context) error { return ctx.Err() }
	for i, rate := range []float64{0.6, 4} {
		cli, err := cl.Client(fmt.Sprintf("c%d", i))
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		clk := clock.New()
		clk.SetRate(rate)
		lease := newClockLease(cli.Lease, clk, notPaused)
		cli.Lease = lease
		ch := make(chan time.Time, 64)
		lease.trace = func(_ clientv3.LeaseID, at time.Time) {
			select {
			case ch <- at:
			default:
			}
		}
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		sessions = append(sessions, s)
		traces = append(traces, sent{rate, ch})
	}
	for _, tr := range traces {
		var at []time.Time
		deadline := time.After(20 * time.Second)
		for len(at) < 3 {
			select {
			case x := <-tr.times:
				at = append(at, x)
			case <-deadline:
				t.Fatalf("rate %v: only %d keepalives within 20s", tr.rate, len(at))
			}
		}
		// The next renewal is due a period of client time after the answer
		// to the last: never sooner, and later by the round trip and the
		// scheduler's lateness. The upper bound is the nearest interval above
		// it that a wrong clock would give (the host's clock, or the rate
		// applied twice), not a guess at lateness.
		want := time.Duration(float64(period) / tr.rate)
		limit := time.Duration(math.MaxInt64)
		for _, wrong := range []time.Duration{period, time.Duration(float64(period) / (tr.rate * tr.rate))} {
			if wrong > want {
				limit = min(limit, wrong)
			}
		}
		for i := 1; i < len(at); i++ {
			gap := at[i].Sub(at[i-1])
			t.Logf("rate %v: keepalive interval %v host (host-clock client: %v)", tr.rate, gap.Round(time.Millisecond), period)
			if gap < want-time.Millisecond || gap >= limit {
				t.Errorf("rate %v: keepalive interval %v, want at least %v and under %v", tr.rate, gap, want, limit)
			}
		}
	}
	admin, err := cl.DirectClient()
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for i, s := range sessions {
		select {
		case <-s.Done():
			t.Errorf("session %d ended", i)
		default:
		}
		ttl, err := admin.TimeToLive(context.Background(), s.Lease())
		if err != nil || ttl.TTL < 0 { // -1: not found; 0: under a second left
			t.Errorf("session %d lease: ttl %v err %v", i, ttl, err)
		}
	}
}

// A client whose clock runs slow renews its lease too late: the server
// deletes its lock key by expiry while the client, thinking, still believes
// it holds the lock; another client acquires; the slow client's clock guard
// still passes (skew defeats the clock guard) and it writes with its stale
// token, which the unfenced resource accepts. It stays serial: it also
// asserts that no guard refused, c1's included, and beside the others (c0
// at rate 0.06 for a wider margin, a run twice as long) one did, at load 75.
func TestSlowClockLosesLeaseWhileBelievingItHolds(t *testing.T) {
	cfg := testConfig()
	cfg.Guard = workload.GuardClock
	cfg.ThinkMin, cfg.ThinkMax = 500*time.Millisecond, 500*time.Millisecond
	e := setup(t, resource.Unfenced, cfg)
	// c0's clock runs at 0.12: it renews every 2/3 s of its time, 5.6 s
	// of host time, and thinks 0.5 s of its time, 4.2 s of host time.
	e.wl.SetClockRate("c0", 0.12)
	// c1 is held back at its first step, so that c0 is granted first.
	if err := e.wl.Pause("c1", 300*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	e.start()

	acq := e.rec.WaitFor(t, 5*time.Second, 0, "c0 acquire", isOp(histories.OK, histories.Acquire, 0))
	del := e.rec.WaitFor(t, 10*time.Second, acq.Index, "key-deleted by expiry", nemesisEvent(histories.FKeyDeleted, "c0", "expiry"))
	if del.Value.Params["create_revision"] != strconv.FormatInt(tokenOf(acq), 10) || del.Key != "lock" {
		t.Errorf("key-deleted: %+v", del)
	}
	t.Logf("server deleted c0's key %v after its acquire", ms(del.Time-acq.Time))
	acq1 := e.rec.WaitFor(t, 10*time.Second, del.Index, "c1 acquire", isOp(histories.OK, histories.Acquire, 1))
	if tokenOf(acq1) <= tokenOf(acq) {
		t.Errorf("c1's token %d is not above c0's %d", tokenOf(acq1), tokenOf(acq))
	}
	w0 := e.rec.WaitFor(t, 20*time.Second, acq.Index, "c0 write", func(op histories.Op) bool {
		return op.Process == 0 && op.F == histories.Write && op.Type != histories.Invoke
	})
	// c0 began that write, in the section of its acquire (its guard
	// passed), after the server had deleted its key: it still believed it
	// held the lock when the server deleted its key.
	w0Invoke := e.rec.WaitFor(t, time.Second, acq.Index, "c0's write invoked", func(op histories.Op) bool {
		return op.Process == 0 && op.F == histories.Write && op.Type == histories.Invoke
	})
	if w0Invoke.Index < del.Index {
		t.Fatalf("c0 began its write (%v after its acquire) before the server deleted its key (%v)", ms(w0Invoke.Time-acq.Time), ms(del.Time-acq.Time))
	}
	if w0.Type != histories.OK || tokenOf(w0) != tokenOf(acq) {
		t.Errorf("c0's stale write: %+v", w0)
	}
	t.Logf("c0's guard passed and it wrote %v after the server deleted its key", ms(w0.Time-del.Time))
	st, ops := e.finish()
	if st.GuardRefusals != 0 {
		t.Errorf("guard refusals: %d", st.GuardRefusals)
	}
	if v := verdicts(ops); v["resource"] != checker.Invalid {
		t.Logf("history:\n%s", recordtest.Dump(ops))
		t.Errorf("resource check %s, want invalid (c0's stale write after c1's)", v["resource"])
	}
}

// A holder paused between its guard check and its write for longer than the
// TTL loses its lease; another client acquires and writes; when the paused
// client resumes it writes with its old token. Its guard passed before the
// pause (check, then act), whatever the guard. The unfenced resource accepts
// the stale write and the checker flags it; the fenced one rejects it.
func TestPausedHolderWritesStale(t *testing.T) {
	for _, tc := range []struct {
		mode  resource.Mode
		guard string
	}{
		{resource.Unfenced, workload.GuardSession},
		{resource.Fenced, workload.GuardClock},
	} {
		t.Run(string(tc.mode)+"-"+tc.guard, func(t *testing.T) {
			cfg := testConfig()
			cfg.Guard = tc.guard
			cfg.ThinkMin, cfg.ThinkMax = 20*time.Millisecond, 20*time.Millisecond
			e := setup(t, tc.mode, cfg)
			e.start()
			held, from := e.pauseFirstHolder()
			name := nameOf(held.Process)
			other := histories.Process(1 - int(held.Process))
			del := e.rec.WaitFor(t, time.Second, from, "key-deleted by expiry", nemesisEvent(histories.FKeyDeleted, name, "expiry"))
			acq := e.rec.WaitFor(t, time.Second, del.Index, "the other client's acquire", isOp(histories.OK, histories.Acquire, other))
			w := e.rec.WaitFor(t, 5*time.Second, from, "the paused client's write", func(op histories.Op) bool {
				return op.Process == held.Process && op.F == histories.Write && op.Type != histories.Invoke
			})
			if tokenOf(w) != tokenOf(held) || tokenOf(w) >= tokenOf(acq) {
				t.Errorf("paused client wrote with token %d; it held %d, the other client %d", tokenOf(w), tokenOf(held), tokenOf(acq))
			}
			ops, _ := e.rec.Snapshot()
			t.Logf("server deleted the paused holder's key %v into the pause; the other client acquired %v later",
				ms(del.Time-ops[from-1].Time), ms(acq.Time-del.Time))
			want := histories.OK
			if tc.mode == resource.Fenced {
				want = histories.Fail
			}
			if w.Type != want {
				t.Errorf("stale write %s, want %s", w.Type, want)
			}
			e.rec.WaitFor(t, 3*time.Second, from, "lease-lost", nemesisEvent(histories.FLeaseLost, name, ""))
			st, hist := e.finish()
			if st.GuardRefusals != 0 {
				t.Errorf("guard refusals: %d (the guard ran before the pause)", st.GuardRefusals)
			}
			v := verdicts(hist)
			wantV := checker.Invalid
			if tc.mode == resource.Fenced {
				wantV = checker.Valid
			}
			if v["resource"] != wantV {
				t.Errorf("resource check %s, want %s", v["resource"], wantV)
			}
		})
	}
}

// With guard=session, a holder whose lease ran out (its links stalled) while
// it was thinking refuses to write: its session is Done when it checks.
func TestSessionGuardRefusesAfterLeaseLost(t *testing.T) {
	cfg := testConfig()
	cfg.Clients = 1
	cfg.Guard = workload.GuardSession
	cfg.ThinkMin, cfg.ThinkMax = 3*time.Second, 3*time.Second
	e := setup(t, resource.Unfenced, cfg)
	e.start()
	acq := e.rec.WaitFor(t, 5*time.Second, 0, "acquire", isOp(histories.OK, histories.Acquire, 0))
	links, err := e.cl.Links("c0")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		for _, stream := range []string{"upstream", "downstream"} {
			if _, err := l.AddToxic("stall-"+stream, "timeout", stream, 1, toxiclient.Attributes{"timeout": 0}); err != nil {
				t.Fatal(err)
			}
		}
	}
	stalled := time.Now()
	lost := e.rec.WaitFor(t, 3*time.Second, acq.Index, "lease-lost", nemesisEvent(histories.FLeaseLost, "c0", ""))
	t.Logf("c0's session ended %v after its links stalled", time.Since(stalled).Round(time.Millisecond))
	del := e.rec.WaitFor(t, 3*time.Second, acq.Index, "key-deleted by expiry", nemesisEvent(histories.FKeyDeleted, "c0", "expiry"))
	t.Logf("server deleted c0's key %v after c0 found out (negative: before)", ms(del.Time-lost.Time))
	for _, l := range links {
		for _, stream := range []string{"upstream", "downstream"} {
			if err := l.RemoveToxic("stall-" + stream); err != nil {
				t.Fatal(err)
			}
		}
	}
	rel := e.rec.WaitFor(t, 10*time.Second, acq.Index, "release", func(op histories.Op) bool {
		return op.Process == 0 && op.F == histories.Release && op.Type != histories.Invoke
	})
	st, ops := e.finish()
	if st.GuardRefusals != 1 {
		t.Errorf("guard refusals %d, want 1", st.GuardRefusals)
	}
	for _, op := range ops[acq.Index:rel.Index] {
		if op.F == histories.Write {
			t.Errorf("c0 wrote after losing its lease: %+v", op)
		}
	}
	t.Logf("release after the refusal: %s %s", rel.Type, rel.Error)
}

// A crashed client's session is orphaned, not revoked: its lock key stays
// until the lease expires, and it goes on as a new process. It runs beside
// the others: it waits for the expiry, whenever it comes.
func TestCrash(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.ThinkMin, cfg.ThinkMax = 200*time.Millisecond, 200*time.Millisecond
	e := setup(t, resource.Fenced, cfg)
	e.start()
	acq := e.rec.WaitFor(t, 5*time.Second, 0, "an acquire", func(op histories.Op) bool {
		return op.Type == histories.OK && op.F == histories.Acquire
	})
	name := nameOf(acq.Process)
	lease, ok := e.wl.Lease(name)
	if !ok {
		t.Fatal("no lease")
	}
	if err := e.wl.Crash(name); err != nil {
		t.Fatal(err)
	}
	next := e.rec.WaitFor(t, 10*time.Second, acq.Index, "an op of a new process", func(op histories.Op) bool {
		return op.Process >= 2
	})
	del := e.rec.WaitFor(t, 10*time.Second, acq.Index, "key-deleted of the crashed lease", func(op histories.Op) bool {
		return nemesisEvent(histories.FKeyDeleted, name, "")(op) && op.Value.Params["lease"] == lease
	})
	if by := del.Value.Params["by"]; by != "expiry" {
		t.Errorf("crashed holder's key deleted by %s, want expiry", by)
	}
	if del.Value.Params["process"] != acq.Process.String() {
		t.Errorf("key-deleted process %s, want %s", del.Value.Params["process"], acq.Process)
	}
	if l2, ok := e.wl.Lease(name); ok && l2 == lease {
		t.Error("the crashed client still has its old lease")
	}
	t.Logf("crashed process %d, new process %d; key expired %v after the acquire", acq.Process, next.Process, ms(del.Time-acq.Time))
	st, ops := e.finish()
	if st.Crashes != 1 {
		t.Errorf("crashes %d", st.Crashes)
	}
	// The crashed process never completes anything after the crash point.
	for _, op := range ops {
		if op.Process == acq.Process && op.Index > del.Index {
			t.Errorf("crashed process still active: %+v", op)
		}
	}
}
