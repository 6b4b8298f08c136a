package pgserver

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktest/locktest/internal/polltest"
	"github.com/locktest/locktest/internal/proc"
)

// TestCutOffSessionEnds: a client whose link is cut holds an advisory
// lock; the server ends its silent session after IdleTimeout, and another
// session is granted the lock; a crash ends every session, and the server
// restarts from its data.
func TestCutOffSessionEnds(t *testing.T) {
	b := ForTest(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Start(ctx, Config{Binary: b, Dir: dir, IdleTimeout: time.Second, Setup: "CREATE SEQUENCE fence"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Logf("PostgreSQL %s ready in %v", b.Version, s.Ready)

	ep, err := s.Endpoint("c1")
	if err != nil {
		t.Fatal(err)
	}
	c1, err := pgx.Connect(ctx, ConnString(ep))
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close(context.Background())
	if _, err := c1.Exec(ctx, "SELECT pg_advisory_lock(7)"); err != nil {
		t.Fatal(err)
	}
	ps, err := s.Links("c1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ps[0].AddToxic("cut", "timeout", "downstream", 1, map[string]any{"timeout": 0}); err != nil {
		t.Fatal(err)
	}
	admin, err := s.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	began := time.Now()
	var got bool
	if _, err := admin.Exec(ctx, "SET lock_timeout = '10s'"); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRow(ctx, "SELECT pg_advisory_lock(7) IS NOT NULL").Scan(&got); err != nil {
		t.Fatalf("the lock of a cut-off session was not freed: %v", err)
	}
	t.Logf("the cut-off session's lock was granted to another after %v", time.Since(began))

	if err := s.Crash(0); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	admin2, err := s.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin2.Close(context.Background())
	var n int64
	if err := admin2.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("after a restart: %d advisory locks (%v), want none", n, err)
	}
}

// A pause freezes the backends too, each of which PostgreSQL makes the
// leader of a process group of its own, not only the postmaster; a crash
// leaves none of them behind.
func TestPauseFreezesBackends(t *testing.T) {
	b := ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Start(ctx, Config{Binary: b, Dir: t.TempDir(), IdleTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var backend int
	if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(0); err != nil {
		t.Fatal(err)
	}
	// A signal takes effect as the process next runs: a moment after kill.
	polltest.Until(t, 5*time.Second, "the session's backend to stop", func() bool {
		st, err := proc.State(backend)
		return err == nil && st == 'T'
	})
	if err := s.Resume(0); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	if err := s.Crash(0); err != nil {
		t.Fatal(err)
	}
	if proc.Alive(backend) {
		t.Errorf("the backend %d outlived the crash", backend)
	}
}

// After a failover every advisory lock is gone: a client that held one on
// the primary finds its session broken, and another client, whose link now
// leads to the promoted replica, is granted the same lock at once. The
// sequence replicated before the cut: its values grow past the failover.
func TestFailoverLosesAdvisoryLocks(t *testing.T) {
	b := ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := Start(ctx, Config{Binary: b, Dir: t.TempDir(), IdleTimeout: 10 * time.Second, Setup: "CREATE SEQUENCE fence", Replica: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Logf("PostgreSQL %s, primary and replica ready in %v", b.Version, s.Ready)
	if got := s.Members(); len(got) != 2 {
		t.Fatalf("members %v, want a primary and a replica", got)
	}
	dial := func(client string) *pgx.Conn {
		ep, err := s.Endpoint(client)
		if err != nil {
			t.Fatal(err)
		}
		c, err := pgx.Connect(ctx, ConnString(ep))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	c1 := dial("c1")
	var held int64
	if err := c1.QueryRow(ctx, "SELECT nextval('fence') FROM pg_advisory_lock(7)").Scan(&held); err != nil {
		t.Fatal(err)
	}
	// The replica has the sequence's WAL (a nextval logs 32 ahead) before the cut.
	replica, err := s.ConnectMember(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close(context.Background())
	polltest.Until(t, 30*time.Second, "the replica to replay the token's nextval", func() bool {
		var caught bool
		err := replica.QueryRow(ctx, "SELECT is_called AND last_value >= $1 FROM fence", held).Scan(&caught)
		return err == nil && caught
	})
	if err := s.CutReplication(); err != nil {
		t.Fatal(err)
	}
	took, err := s.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failed over in %v", took)
	if s.Primary() != ReplicaName || !s.FailedOver() {
		t.Fatalf("primary %s after the failover, want %s", s.Primary(), ReplicaName)
	}
	if err := c1.QueryRow(ctx, "SELECT 1").Scan(new(int)); err == nil {
		t.Error("the holder's session to the lost primary still answers")
	}
	c2 := dial("c2")
	var got bool
	var token int64
	var recovering bool
	if err := c2.QueryRow(ctx, "SELECT pg_try_advisory_lock(7), nextval('fence'), pg_is_in_recovery()").Scan(&got, &token, &recovering); err != nil {
		t.Fatal(err)
	}
	if !got || recovering {
		t.Fatalf("on the promoted replica: lock granted %v, in recovery %v; want the lock free and writes taken", got, recovering)
	}
	if token <= held {
		t.Errorf("token %d after the failover, not past the %d given before it", token, held)
	}
	if _, err := s.Failover(ctx); err == nil {
		t.Error("a second failover was not refused")
	}
}

// A crash kills the server's processes, not the machine: every commit it
// acknowledged is there when it restarts from its data (a lease row's
// fence that went back would hand out a token twice, and the contract
// check would rightly say so, of a deployment no one runs).
func TestCrashKeepsAcknowledgedCommits(t *testing.T) {
	b := ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Start(ctx, Config{Binary: b, Dir: t.TempDir(), IdleTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const rounds = 3
	for i := 1; i <= rounds; i++ {
		c, err := s.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, "CREATE TABLE IF NOT EXISTS acked (n int)"); err != nil {
			t.Fatal(err)
		}
		// Many small commits, then the kill at once: what the server has
		// not yet written when it acknowledges one is what a crash loses.
		for j := 0; j < 200; j++ {
			if _, err := c.Exec(ctx, "INSERT INTO acked VALUES (1)"); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Crash(0); err != nil {
			t.Fatal(err)
		}
		c.Close(context.Background())
		if err := s.Restart(ctx, 0); err != nil {
			t.Fatal(err)
		}
		c, err = s.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		err = c.QueryRow(ctx, "SELECT count(*) FROM acked").Scan(&n)
		c.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n != 200*i {
			t.Fatalf("after crash %d: %d rows, want the %d acknowledged", i, n, 200*i)
		}
	}
}
