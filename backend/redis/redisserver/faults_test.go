package redisserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/internal/polltest"
	"github.com/locktest/locktest/internal/proc"
)

// A paused server is stopped ('T') and answers nothing; resumed, it
// answers again, and a key whose TTL ran out meanwhile is gone.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	ctx, d := start(t, Single)
	eps, err := d.Endpoints("c1")
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, eps[0])
	if err := c.Set(ctx, "lock", "c1", 200*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	if err := d.Pause(0); err != nil {
		t.Fatal(err)
	}
	pid := d.Servers()[0].Pid()
	polltest.Until(t, 10*time.Second, "state T", func() bool { s, _ := proc.State(pid); return s == 'T' })
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = c.Ping(pctx).Err()
	cancel()
	if err == nil {
		t.Fatal("a paused server answered PING")
	}
	if err := d.Resume(0); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 10*time.Second, "the server to run", func() bool { s, _ := proc.State(pid); return s != 'T' })
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
	if n, err := c.Exists(ctx, "lock").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS of a key whose TTL ran out during the pause: %d, %v", n, err)
	}
}

// A crashed server is gone; restarted, it listens where it did, empty.
func TestCrashRestart(t *testing.T) {
	t.Parallel()
	ctx, d := start(t, Single)
	eps, err := d.Endpoints("c1")
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, eps[0])
	if err := c.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	old := d.Servers()[0].Pid()
	if err := d.Crash(0); err != nil {
		t.Fatal(err)
	}
	if d.Running(0) || proc.Alive(old) {
		t.Fatal("the server runs after Crash")
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("a crashed server answered PING")
	}
	if err := d.Pause(0); !errors.Is(err, proc.ErrExited) {
		t.Errorf("Pause of a crashed server: %v", err)
	}
	if err := d.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if d.Servers()[0].Pid() == old || !d.Running(0) {
		t.Fatal("no new process after Restart")
	}
	// The same endpoint reaches it: same port.
	if err := c.Get(ctx, "k").Err(); err != redis.Nil {
		t.Fatalf("GET of a key set before the crash: %v, want it gone", err)
	}
}

// ExpireEarly expires keys with a TTL, reported as expired, and leaves the
// others.
func TestExpireEarly(t *testing.T) {
	t.Parallel()
	ctx, d := start(t, Single)
	c := d.Servers()[0].Client()
	evctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := d.Events(evctx, 0, "/p/")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "/p/lock", "c1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Incr(ctx, "/p/counter").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "/other/lock", "c1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	keys, err := d.ExpireEarly(ctx, 0, "/p/*")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"/p/lock"}) {
		t.Fatalf("ExpireEarly expired %v, want [/p/lock]", keys)
	}
	if n, err := c.Exists(ctx, "/p/lock", "/p/counter", "/other/lock").Result(); err != nil || n != 2 {
		t.Fatalf("%d of the lock, the counter and the other key exist (%v), want 2", n, err)
	}
	var got []string
	for ev := range events {
		if ev.Server != 0 || ev.At.IsZero() {
			t.Fatalf("event %+v", ev)
		}
		got = append(got, ev.Key+" "+ev.Op)
		if ev.Op == "expired" {
			break
		}
	}
	// SET with a TTL is a set and an expire; ExpireEarly's PEXPIRE another.
	want := []string{"/p/lock set", "/p/lock expire", "/p/counter incrby", "/p/lock expire", "/p/lock expired"}
	if !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	cancel()
	for range events { // closes once ctx ends
	}
}

// Failover: what the master took after the replication link was cut is
// lost with it; Sentinel promotes the replica, and a client that follows
// Sentinel over its own links reaches the new master.
func TestFailover(t *testing.T) {
	t.Parallel()
	ctx, d := start(t, Replicated)
	dial, err := d.Dialer("c1")
	if err != nil {
		t.Fatal(err)
	}
	var sentinels []string
	for _, s := range d.Sentinels() {
		sentinels = append(sentinels, s.Addr)
	}
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: MasterName, SentinelAddrs: sentinels, Dialer: dial,
		MaxRetries: -1, DialerRetries: 1, Protocol: 2, DisableIdentity: true,
	})
	defer c.Close()
	if err := c.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	replica := d.Servers()[1].Client()
	polltest.Until(t, 10*time.Second, "the replica to have the key", func() bool { return replica.Get(ctx, "before").Val() == "1" })

	if err := d.CutReplication(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "lost", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p, err := d.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failover: %+v", p)
	if p.Old != 0 || p.New != 1 {
		t.Fatalf("failover %+v, want r0 to r1", p)
	}
	if m, err := d.Master(ctx); err != nil || m != 1 {
		t.Fatalf("Master = %d, %v; want 1", m, err)
	}
	// The client's first commands may still go to the old master's link.
	polltest.Until(t, 10*time.Second, "the client to write to the new master", func() bool { return c.Set(ctx, "after", "1", 0).Err() == nil })
	if v, err := c.Get(ctx, "before").Result(); err != nil || v != "1" {
		t.Fatalf("GET before = %q, %v", v, err)
	}
	if err := c.Get(ctx, "lost").Err(); err != redis.Nil {
		t.Fatalf("GET of the key written after the cut: %v, want it lost", err)
	}
	// The client reaches the new master over its own link.
	ls, err := d.Links("c1")
	if err != nil {
		t.Fatal(err)
	}
	if err := ls[1].Disable(); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, "after").Err(); err == nil {
		t.Fatal("the client reached the new master with its link to it disabled")
	}
	if err := d.ClearToxics(); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 10*time.Second, "the client to read again", func() bool { return c.Get(ctx, "after").Err() == nil })

	if _, err := d.Failover(ctx); err == nil {
		t.Fatal("a second Failover was not refused")
	}
	// The old master comes back empty; Sentinel still names the new one.
	if err := d.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := d.Servers()[0].Client().DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("the restarted old master holds %d keys (%v), want none", n, err)
	}
	if m, err := d.Master(ctx); err != nil || m != 1 {
		t.Fatalf("Master after the old one's restart = %d, %v; want 1", m, err)
	}
}

// A Sentinel that answers late (stopped here for 3 s, as a loaded machine
// can starve one past the admin clients' one-second wait) holds the
// failover up, not fails it: its settings are asked for again until it
// answers, and the replica is promoted.
func TestFailoverWaitsForASlowSentinel(t *testing.T) {
	t.Parallel()
	ctx, d := start(t, Replicated)
	if err := d.CutReplication(); err != nil {
		t.Fatal(err)
	}
	s0 := d.sentinels[0].proc.Process()
	if err := s0.Stop(); err != nil {
		t.Fatal(err)
	}
	resumed := make(chan error, 1)
	stall := time.AfterFunc(3*time.Second, func() { resumed <- s0.Cont() })
	defer stall.Stop()
	p, err := d.Failover(ctx)
	if err != nil {
		t.Fatalf("failover with a Sentinel stalled for 3 s: %v", err)
	}
	if err := <-resumed; err != nil {
		t.Fatal(err)
	}
	if p.Old != 0 || p.New != 1 {
		t.Fatalf("failover %+v, want r0 to r1", p)
	}
}

// The replica stays on its proxied link after Sentinel has looked at it
// again, well past a short failover-timeout: Sentinel re-points a replica
// whose master address is not the one it monitors once failover-timeout
// has passed, and a cut of the link it left would cut nothing.
func TestReplicationStaysOnItsLink(t *testing.T) {
	t.Parallel()
	ctx, d := start(t, Replicated)
	since := time.Now().Add(3 * time.Second)
	for _, s := range d.Sentinels() {
		// Sentinel reads a replica's INFO every 10 s.
		deadline := time.Now().Add(20 * time.Second)
		for {
			// A Sentinel a loaded machine keeps from answering within the
			// admin clients' second is asked again.
			r, err := sentinelReplica(ctx, s)
			if err == nil {
				ms, err := strconv.Atoi(r["info-refresh"])
				if err != nil {
					t.Fatalf("%s: info-refresh %q", s.Name, r["info-refresh"])
				}
				if time.Now().Add(-time.Duration(ms) * time.Millisecond).After(since) {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not read the replica's INFO again (last error: %v)", s.Name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := d.CutReplication(); err != nil {
		t.Fatal(err)
	}
	if err := d.Servers()[0].Client().Set(ctx, "lost", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A marker written straight to the replica's master would reach the
	// replica at once; through the cut link it never does.
	replica := d.Servers()[1].Client()
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if replica.Exists(ctx, "lost").Val() != 0 {
			t.Fatal("a key written after the cut reached the replica")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sentinelReplica is what Sentinel s says of the replica.
func sentinelReplica(ctx context.Context, s *Server) (map[string]string, error) {
	v, err := s.Client().Do(ctx, "SENTINEL", "REPLICAS", MasterName).Slice()
	if err != nil {
		return nil, err
	}
	if len(v) != 1 {
		return nil, fmt.Errorf("%s knows %d replicas", s.Name, len(v))
	}
	fields, _ := v[0].([]any)
	m := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		m[fmt.Sprint(fields[i])] = fmt.Sprint(fields[i+1])
	}
	return m, nil
}
