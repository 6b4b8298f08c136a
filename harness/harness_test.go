package harness

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/internal/fakebackend"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
	"github.com/locktest/locktest/workload"
)

// A run that fails part way (here the final heal: a client pause outlasts
// its timeout) is still checked, and its results say what went wrong; with
// no violation found, the exit status is 2. The harness's logic: on the
// fake backend, with a lock in memory.
func TestRunErrorIsCheckedAndRecorded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := workload.DefaultConfig()
	cfg.Recipe = fakebackend.MemMutex()
	o := Options{Backends: fakebackend.Set, Dir: dir, Workload: cfg, Time: time.Second,
		Nemesis:  nemesis.Config{HealTimeout: 50 * time.Millisecond},
		Schedule: &nemesis.Schedule{Members: 3, Entries: []nemesis.Entry{{Fault: nemesis.PauseClient, Target: "c0", Duration: 3 * time.Second}}}}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Run: %v; want results carrying the error", err)
	}
	if !strings.Contains(res.Error, "outlasted the heal timeout") || res.Exit != ExitUnknown {
		t.Fatalf("error %q, exit %d; want the heal's error and exit 2", res.Error, res.Exit)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var stored Results
	if err := json.Unmarshal(b, &stored); err != nil || stored.Error != res.Error || len(stored.Checks) == 0 {
		t.Fatalf("results.json: error %q, %d checks (%v); want the error and the checks", stored.Error, len(stored.Checks), err)
	}
}

// A schedule that cannot be carried out is refused before anything starts:
// no history, no results.
func TestBadScheduleIsRefusedBeforeTheRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := Options{Backends: backends, Dir: dir, Workload: workload.DefaultConfig(), Time: time.Second,
		Schedule: &nemesis.Schedule{Members: 3, Entries: []nemesis.Entry{{Fault: "bogus", Target: "c0"}}}}
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "unknown fault kind") {
		t.Fatalf("Run: %v; want the schedule refused", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a refused run left %d files in its directory", len(ents))
	}
}

// hangingLocker's Acquire blocks until its context ends.
type hangingLocker struct{}

func (hangingLocker) Acquire(ctx context.Context, _ string) (lock.Held, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (hangingLocker) Close() error { return nil }

// A dead lock fails: one whose New always fails, and one whose Acquire
// hangs, both grant nothing, and liveness says so once clients asked for
// longer than the bound. The lock is the test's own: no server is needed
// (the fake backend).
func TestDeadLocksFailLiveness(t *testing.T) {
	t.Parallel()
	for name, newLocker := range map[string]func(context.Context, lock.Env) (lock.Locker, error){
		"new-fails": func(context.Context, lock.Env) (lock.Locker, error) { return nil, errors.New("no lock for you") },
		"hangs":     func(context.Context, lock.Env) (lock.Locker, error) { return hangingLocker{}, nil },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := workload.DefaultConfig()
			cfg.Clients, cfg.OpTimeout = 2, time.Second
			cfg.Recipe = lock.RecipeFunc(name, newLocker)
			res, err := Run(context.Background(), Options{Backends: fakebackend.Set, Dir: t.TempDir(), Workload: cfg, Time: 3 * time.Second, LivenessBound: 2 * time.Second, Required: checker.Names()})
			if err != nil {
				t.Fatal(err)
			}
			var live *checker.Result
			for i := range res.Checks {
				if res.Checks[i].Name == "liveness" {
					live = &res.Checks[i]
				}
			}
			if live == nil || live.Verdict != checker.Invalid || !strings.Contains(live.Explanation, "The lock granted nothing") {
				t.Fatalf("liveness %+v; want invalid: the lock granted nothing", live)
			}
			if res.Exit != ExitInvalid {
				t.Errorf("exit %d, want %d", res.Exit, ExitInvalid)
			}
		})
	}
}

// A Go caller who gives no Backends is told so before anything starts,
// not given a default: the harness imports no backend.
func TestNoBackendsRefused(t *testing.T) {
	t.Parallel()
	o := Options{Dir: t.TempDir(), Workload: workload.DefaultConfig(), Time: time.Second, Nemesis: nemesis.Config{Faults: []string{nemesis.All}}}
	if _, err := Run(context.Background(), o); !errors.Is(err, errNoBackends) {
		t.Errorf("Run: %v, want %v", err, errNoBackends)
	}
	if err := o.Apply(scenario.Settings{Recipe: "exec:/bin/cat adapter", Backend: "redis"}); !errors.Is(err, errNoBackends) {
		t.Errorf("Apply: %v", err)
	}
	if _, err := DrawSchedule(o); !errors.Is(err, errNoBackends) {
		t.Errorf("DrawSchedule: %v", err)
	}
	if _, err := Check(filepath.Join("..", "histories", "testdata", "overwritten-key.jsonl"), CheckOptions{}); !errors.Is(err, errNoBackends) {
		t.Errorf("Check: %v", err)
	}
	if ents, _ := os.ReadDir(o.Dir); len(ents) != 0 {
		t.Errorf("a refused run left %d files in its directory", len(ents))
	}
}

// The harness, and what draws on it (shrink, report), import no backend:
// they are given a backend.Set, so that their binaries (and their tests')
// link no server.
func TestImportsNoBackend(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".", "../shrink", "../report").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/locktest/locktest/backend/") {
			t.Errorf("imports %s", p)
		}
	}
}
