package mysqlserver

import (
	"context"
	"testing"
	"time"
)

// A crash kills the server's process, not the machine: every commit it
// acknowledged is there when it restarts (the fencing sequence that went
// back would hand out a token twice, of a deployment no one runs).
func TestCrashKeepsAcknowledgedCommits(t *testing.T) {
	b := ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := Start(ctx, Config{Binary: b, Dir: t.TempDir(), Setup: []string{
		"CREATE DATABASE IF NOT EXISTS t", "CREATE TABLE IF NOT EXISTS t.acked (n int) ENGINE=InnoDB"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const rounds, rows = 2, 200
	for i := 1; i <= rounds; i++ {
		db, err := s.DB()
		if err != nil {
			t.Fatal(err)
		}
		// Many small commits, then the kill at once: what the server has
		// not yet written when it acknowledges one is what a crash loses.
		for range rows {
			if _, err := db.ExecContext(ctx, "INSERT INTO t.acked VALUES (1)"); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Crash(); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if err := s.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if db, err = s.DB(); err != nil {
			t.Fatal(err)
		}
		var n int
		err = db.QueryRowContext(ctx, "SELECT count(*) FROM t.acked").Scan(&n)
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		if n != rows*i {
			t.Fatalf("after crash %d: %d rows, want the %d acknowledged", i, n, rows*i)
		}
	}
}
