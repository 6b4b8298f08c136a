package zkserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/internal/polltest"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/internal/proctest"
)

// start starts an ensemble for one test; its logs are printed if the test
// fails.
func start(t *testing.T, servers int) (context.Context, *Ensemble) {
	t.Helper()
	in := ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	e, err := Start(ctx, Config{Servers: servers, Dir: dir, LogDir: filepath.Join(dir, "logs"), Install: in})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "logs", "zk*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", filepath.Base(l), b)
			}
		}
	})
	return ctx, e
}

func mode(ctx context.Context, s *Server) string {
	st, err := Srvr(ctx, s.ClientAddr)
	if err != nil {
		return "down"
	}
	return st.Mode
}

// noBypass fails t if a server's peer connection skips the relays: a cut
// would not cut it.
func noBypass(t *testing.T, e *Ensemble, when string) {
	t.Helper()
	if b, err := e.Bypasses(); err != nil || len(b) > 0 {
		t.Fatalf("%s, peer connections past the relays: %v (%v)", when, b, err)
	}
}

// sharesClasses fails t unless every running server maps the archive of
// ZooKeeper's classes (cds.go).
func sharesClasses(t *testing.T, e *Ensemble) {
	t.Helper()
	path, err := e.cfg.Install.archivePath()
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range e.Pids() {
		if maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid)); err != nil || !strings.Contains(string(maps), path) {
			t.Errorf("server process %d does not map %s (%v)", pid, path, err)
		}
	}
}

// The ensemble's servers share the archive of their classes. Its levers on real processes: a leader cut off at the relays
// steps down and the others elect another, and after the heal it follows
// (a server that is dialled back by a higher id dials the relay, not the
// address in the election header: no connection bypasses the relays); a
// paused server is stopped; a crashed leader restarts from its data and
// rejoins; the whole ensemble crashed restarts together; Close leaves no process and no scratch directory.
func TestEnsemble(t *testing.T) {
	t.Parallel()
	ctx, e := start(t, 3)
	if v := e.Version(); !strings.HasPrefix(v, "3.") {
		t.Errorf("version %q", v)
	}
	noBypass(t, e, "at the start")
	sharesClasses(t, e)
	old, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	servers := e.Servers()
	var cuts [][2]int
	for i := range servers {
		if i != old {
			cuts = append(cuts, [2]int{old, i})
		}
	}
	if err := e.SetCuts(cuts, CutDrop); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 30*time.Second, "a new leader among the others", func() bool {
		i, ok := e.leader(ctx)
		return ok && i != old
	})
	polltest.Until(t, 30*time.Second, "the old leader to stop serving", func() bool { return mode(ctx, servers[old]) == "" })
	if err := e.SetCuts(nil, CutDrop); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 30*time.Second, "the old leader to follow", func() bool { return mode(ctx, servers[old]) == ModeFollower })
	noBypass(t, e, "after the heal")

	// Each server cut off in turn, with connections closed, and back.
	for i, s := range servers {
		var cuts [][2]int
		for j := range servers {
			if j != i {
				cuts = append(cuts, [2]int{i, j})
			}
		}
		if err := e.SetCuts(cuts, CutClose); err != nil {
			t.Fatal(err)
		}
		polltest.Until(t, 30*time.Second, s.Name+" to stop serving", func() bool { return mode(ctx, s) == "" })
		if err := e.SetCuts(nil, CutClose); err != nil {
			t.Fatal(err)
		}
		polltest.Until(t, 30*time.Second, s.Name+" to serve again", func() bool { m := mode(ctx, s); return m == ModeLeader || m == ModeFollower })
		noBypass(t, e, "after "+s.Name+" rejoined")
	}

	follower := (old + 1) % len(servers)
	if err := e.Pause(follower); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 5*time.Second, "the paused server to be stopped", func() bool {
		st, err := proc.State(servers[follower].Pid())
		return err == nil && st == 'T' && e.Paused(follower)
	})
	if err := e.Resume(follower); err != nil {
		t.Fatal(err)
	}

	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if e.Running(leader) || len(e.Pids()) != 2 {
		t.Fatalf("after the kill: running %v, pids %v", e.Running(leader), e.Pids())
	}
	polltest.Until(t, 30*time.Second, "a leader of the two others", func() bool {
		i, ok := e.leader(ctx)
		return ok && i != leader
	})
	if err := e.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 30*time.Second, "the restarted server to follow", func() bool { return mode(ctx, servers[leader]) == ModeFollower })
	sharesClasses(t, e)

	// The whole ensemble crashed and restarted together: every server's
	// process starts before any has booted (a restart that held the fault
	// lock through its server's boot started the next one only once it
	// listened), and they elect a leader again.
	for i := range servers {
		if err := e.Kill(i); err != nil {
			t.Fatal(err)
		}
	}
	restarted := make(chan error, len(servers))
	for i := range servers {
		go func() { restarted <- e.Restart(ctx, i) }()
	}
	polltest.Until(t, 30*time.Second, "every server's process to start", func() bool { return len(e.Pids()) == len(servers) })
	for _, s := range servers {
		if ok, err := e.listening(s); ok || err != nil {
			t.Errorf("%s listened (%v) before every server's process had started: the restarts took turns", s.Name, err)
		}
	}
	for range servers {
		if err := <-restarted; err != nil {
			t.Fatal(err)
		}
	}
	polltest.Until(t, 30*time.Second, "a leader after the ensemble's restart", func() bool { _, ok := e.leader(ctx); return ok })

	pids := e.Pids()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if proc.Alive(pid) {
			t.Errorf("server process %d outlived Close", pid)
		}
	}
	if _, err := os.Stat(e.Dir); !os.IsNotExist(err) {
		t.Errorf("Close left %s (%v)", e.Dir, err)
	}
}

// No server outlives the process that started it, however it dies.
func TestNothingOutlivesParent(t *testing.T) {
	t.Parallel()
	if dir := os.Getenv("ZKSERVER_TEST_DIR"); dir != "" {
		e, err := Start(context.Background(), Config{Servers: 3, Dir: dir})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		var pids []string
		for _, pid := range e.Pids() {
			pids = append(pids, strconv.Itoa(pid))
		}
		os.Stdout.WriteString(strings.Join(pids, " ") + "\n")
		select {}
	}
	ForTest(t)
	proctest.KillParent(t, "TestNothingOutlivesParent", 3, "ZKSERVER_TEST_DIR="+t.TempDir())
}
