package execlock_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/locktest/locktest/backend/zookeeper/zkserver"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	be "github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/registry"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/polltest"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/internal/proctest"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/lock/execlock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/workload"
)

// testClient is the command of the test client (testdata/lockclient.py,
// standard-library Python) with flags that break it; the test skips
// without a python3.
func testClient(t *testing.T, flags ...string) []string {
	t.Helper()
	py, err := python3()
	if err != nil {
		t.Skip("python3 not on PATH: the test client is a Python script (any Python 3, standard library only): ", err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "lockclient.py"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{py, script}, flags...)
}

// python3 is the interpreter that python3 on PATH runs, found once: a
// version manager's shim (pyenv's is a shell script that runs a dozen
// more) would otherwise be run again at every client's start, some 0.1 s
// of CPU each, for the package's hundred-odd clients.
var python3 = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "", err
	}
	py := strings.TrimSpace(string(out))
	if py == "" {
		return "", errors.New("python3 does not say where its interpreter is (sys.executable)")
	}
	return py, nil
})

type runOptions struct {
	clients int
	faults  []string
	time    time.Duration
	quiet   time.Duration
	mode    resource.Mode
	seed    int64
	slow    float64 // share of slow sections (default none)
	bound   time.Duration
	ttl     int // the locks' TTL in seconds (default the workload's)
}

// logBuffer collects the run's log lines.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// run runs command's lock on backend (etcd or redis; the test skips
// without redis-server) and returns the results; the test fails if the run
// cannot be made.
func run(t *testing.T, backend string, command []string, opts ...func(*runOptions)) *harness.Results {
	t.Helper()
	res, _, err := tryRun(t, backend, command, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// startWait bounds the wait for a run's clients to be up: a fail-safe
// against one that never settles, not a measure of its start.
const startWait = time.Minute

func tryRun(t *testing.T, backend string, command []string, opts ...func(*runOptions)) (*harness.Results, string, error) {
	t.Helper()
	switch backend {
	case "redis":
		needRedis(t)
	case "zookeeper":
		zkserver.ForTest(t)
	}
	o := runOptions{clients: 3, time: 3 * time.Second, quiet: time.Second, mode: resource.Fenced, seed: 1}
	for _, f := range opts {
		f(&o)
	}
	cfg := workload.DefaultConfig()
	r := execlock.New(command...)
	// The run's clock starts once every client is up, however long a
	// loaded machine takes to start it: not after the protocol's 10 s,
	// which a dozen JVMs starting at once at load 40 outlast (each ~0.7 s
	// of CPU), and whose first acquires then ate the run's few seconds.
	r.StartWindow = startWait
	cfg.Recipe = r
	cfg.Clients = o.clients
	cfg.Seed = o.seed
	cfg.SlowShare = o.slow
	if o.ttl > 0 {
		cfg.TTL = o.ttl
	}
	var log logBuffer
	var sys be.Options
	dir := keptDir(t)
	switch {
	case backend == "zookeeper":
		sys = &sharedEnsemble{}
	case backend == "etcd" && len(o.faults) == 0:
		sys = sharedEtcd(t)
	}
	res, err := harness.Run(context.Background(), harness.Options{
		Backends: registry.Backends(),
		Dir:      dir,
		System:   sys,
		Backend:  backend,
		Workload: cfg,
		Resource: o.mode,
		Time:     o.time,
		Quiet:    o.quiet,
		Nemesis:  nemesis.Config{Faults: o.faults},
		Log:      &log,

		LivenessBound: o.bound,
	})
	return res, log.String(), err
}

// keptDir is a run directory that outlives a failed test, said in its
// log: the run's history and its clients' logs tell why.
func keptDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "execlock-run-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the run's directory is kept: %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

func verdicts(res *harness.Results) map[string]checker.Verdict {
	v := map[string]checker.Verdict{}
	for _, c := range res.Checks {
		v[c.Name] = c.Verdict
	}
	return v
}

func explain(res *harness.Results) string {
	var b strings.Builder
	for _, c := range res.Checks {
		b.WriteString("\n  " + c.Name + " " + string(c.Verdict) + ": " + c.Explanation)
	}
	return b.String()
}

// A correct lock whose process is stopped (SIGSTOP of its group) past its
// TTL while it holds the lock, as the catalog's paused-holder plays it
// through the Go API (harness.Play) with a lock that is no built-in: its
// keepalives stop, its lease expires, the fence keeps the data safe, the
// lock keeps its contract, and the scenario's expectations are judged
// against this lock's verdicts.
func TestPausedProcessLosesItsLease(t *testing.T) {
	t.Parallel()
	sc, err := registry.Backends().Catalog().Lookup("paused-holder")
	if err != nil {
		t.Fatal(err)
	}
	cfg := workload.DefaultConfig()
	cfg.Recipe = execlock.New(testClient(t)...)
	cfg.Seed = 3
	// Three clients, not the default five: the test client's lock is no
	// queue (waiters poll), and liveness is asserted.
	cfg.Clients = 3
	o, err := harness.Play(harness.Options{Backends: registry.Backends(), Dir: t.TempDir(), Backend: "etcd", Workload: cfg, Resource: resource.Fenced}, sc)
	if err != nil {
		t.Fatal(err)
	}
	res, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Scenario == nil || res.Scenario.Met == nil || !*res.Scenario.Met {
		t.Errorf("paused-holder with a correct, fenced lock in a process: want its expectations met, got %+v:%s", res.Scenario, explain(res))
	}
	v := verdicts(res)
	if v[histories.CheckResource] != checker.Valid || v[histories.CheckContract] != checker.Valid || v[histories.CheckLiveness] != checker.Valid {
		t.Errorf("a correct lock under a pause: want resource, contract and liveness valid:%s", explain(res))
	}
	h, err := histories.ReadFile(res.History)
	if err != nil {
		t.Fatal(err)
	}
	paused := 0
	for _, op := range h {
		if op.F == histories.FStart && op.Value != nil && op.Value.Fault == nemesis.PauseClient && op.Error == "" {
			paused++
		}
	}
	if paused == 0 {
		t.Errorf("the scenario's pause-client struck nothing")
	}
}

// Broken locks are caught, each by the check its breakage breaks.
func TestBrokenClientsCaught(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		flag  string
		check string
	}{
		{"--grant-always", histories.CheckMutex},   // says it holds a lock it never took
		{"--stale-token", histories.CheckContract}, // tokens that do not grow
	} {
		t.Run(c.flag, func(t *testing.T) {
			t.Parallel()
			res := run(t, "etcd", testClient(t, c.flag))
			if v := verdicts(res)[c.check]; v != checker.Invalid {
				t.Errorf("%s: check %s is %s, want invalid:%s", c.flag, c.check, v, explain(res))
			}
		})
	}
}

// A lock without a fencing token, on Redis, without faults or slow
// sections: the resource check cannot judge writes that nothing could
// fence (unknown, not valid), and the lock itself is judged as any lock.
func TestUntokenedLock(t *testing.T) {
	t.Parallel()
	res := run(t, "redis", testClient(t))
	v := verdicts(res)
	if v[histories.CheckResource] != checker.Unknown || v[histories.CheckMutex] != checker.Valid {
		t.Errorf("a correct lock without tokens, no faults: want resource unknown, mutex valid:%s", explain(res))
	}
}

// A command that exits at once stops the run before it starts, naming the
// client and the command's stderr.
func TestCommandExitsAtOnce(t *testing.T) {
	t.Parallel()
	began := time.Now()
	_, _, err := tryRun(t, "etcd", testClient(t, "--exit-at-once"), func(o *runOptions) { o.faults = []string{"pause"} })
	if err == nil || !strings.Contains(err.Error(), "c0") || !strings.Contains(err.Error(), "told to exit at once") {
		t.Fatalf("want an error naming c0 and the command's stderr, got %v", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("want one line, got %q", err)
	}
	t.Logf("refused in %v: %v", time.Since(began), err)
	_, _, err = tryRun(t, "etcd", []string{filepath.Join(t.TempDir(), "no-such-client")})
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a command that is not there: want 'not found', got %v", err)
	}
}

// The catalog's adapters are named from the repository's root, and found
// from any folder of the checkout (nightly run from a package's folder);
// elsewhere Parse says in one line where to run locktest. The recipe's
// name stays as the catalog spells it.
func TestAdapterFoundFromTheRoot(t *testing.T) {
	spec := execlock.Spec("/bin/sh", execlock.Adapters+"/kazoo_py.py", "--lock-per-acquire")
	want, err := filepath.Abs(filepath.Join("adapters", "kazoo_py.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{".", "adapters"} {
		t.Chdir(dir)
		r, err := execlock.Parse(spec)
		if err != nil {
			t.Fatalf("from %s: %v", dir, err)
		}
		if r.Command[1] != want || r.Name() != spec {
			t.Errorf("from %s: %s runs %v, want %s", dir, r.Name(), r.Command, want)
		}
	}
	t.Chdir(t.TempDir())
	_, err = execlock.Parse(spec)
	if err == nil || !strings.Contains(err.Error(), "run locktest inside a checkout") || strings.Contains(err.Error(), "\n") {
		t.Errorf("outside a checkout: want one line saying where to run locktest, got %v", err)
	}
}

// A new process for a client in the run (a replacement) is watched until
// it is up, as a first one is: a runtime's slow start (a JVM's) is not
// part of its first operation, whose time counts against the lock. One
// still busy when the harness's deadline comes is taken to be up.
func TestNewWaitsForASlowStart(t *testing.T) {
	t.Parallel()
	r := execlock.New(testClient(t, "--slow-start")...)
	env := lock.Env{Name: "c0", Backend: "etcd", Prefix: "/locktest/", TTL: 2,
		Endpoints: []string{"127.0.0.1:1"}, Vars: map[string]string{"LOCKTEST_ETCD_URLS": "http://127.0.0.1:1"}}
	began := time.Now()
	l, err := r.New(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if took := time.Since(began); took < 1500*time.Millisecond {
		t.Errorf("New returned %v after the start of a client busy for 1.5 s: want it up first", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	l, err = r.New(ctx, env)
	if err != nil {
		t.Fatalf("a client still starting at the deadline: want it taken to be up, got %v", err)
	}
	l.Close()
}

// A client whose group has a busy member outside its leader's descendants
// (a daemon whose parent exited, adopted by init) is up only once that
// member is idle too: the group is watched whole, as a scan of all of
// /proc sees it. The member is busy starting a process every 0.1 s, 50
// times, then leaves a file; the client is idle long before.
func TestNewWaitsForAnOrphanedMember(t *testing.T) {
	t.Parallel()
	client := testClient(t)
	done := filepath.Join(t.TempDir(), "done")
	busy := `i=0; while [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; touch "$0"`
	r := execlock.New("sh", "-c", `(sh -c "$1" "$2" &); exec "$0" "$3"`, client[0], busy, done, client[1])
	env := lock.Env{Name: "c0", Backend: "etcd", Prefix: "/locktest/", TTL: 2,
		Endpoints: []string{"127.0.0.1:1"}, Vars: map[string]string{"LOCKTEST_ETCD_URLS": "http://127.0.0.1:1"}}
	l, err := r.New(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := os.Stat(done); err != nil {
		t.Errorf("New returned while the client's orphaned member was still busy: %v", err)
	}
}

// A JVM client's clock follows its client's clock in locktest through
// libfaketime (--exec-clock auto offers clock faults to Java): the JVM
// reads the faked time, from its start and after a bump. (Its timed waits
// run on real time: README.md, Faults on a client process.)
func TestJavaClockFaked(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("javac"); err != nil {
		t.Skip("javac not on PATH (apt-get install openjdk-17-jdk-headless)")
	}
	src, err := filepath.Abs(filepath.Join("testdata", "Now.java"))
	if err != nil {
		t.Fatal(err)
	}
	r := execlock.New("java", src)
	if why := r.Refuses("clock"); why != "" {
		t.Skip(why) // libfaketime missing
	}
	clk := clock.New()
	clk.Bump(100 * time.Second)
	l, err := r.New(context.Background(), lock.Env{Name: "c0", Backend: "etcd", Prefix: "/locktest/", TTL: 2, Clock: clk, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// read is the JVM's clock less the host's, in seconds.
	read := func() int64 {
		h, err := l.Acquire(context.Background(), "lock")
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release(context.Background())
		return h.Token() - time.Now().Unix()
	}
	if got := read(); got < 98 || got > 102 {
		t.Errorf("skew 100 s from the start: the JVM's clock is %d s off the host's", got)
	}
	// The faked clock's file is rewritten as the client's clock changes,
	// a moment after.
	clk.Bump(50 * time.Second)
	polltest.Until(t, 5*time.Second, "the JVM to read a skew of 150 s", func() bool {
		got := read()
		return got >= 148 && got <= 152
	})
}

// A reply that breaks the protocol is told in one line naming the client
// and the line; its operation has an unknown outcome, the process is
// replaced (a new history process), and the run goes on.
func TestBadReplyReplacesTheProcess(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--garbage", "--bad-id", "--out-of-turn", "--crash-reply"} {
		t.Run(flag, func(t *testing.T) {
			t.Parallel()
			const clients = 2
			// 5 s: a client that breaks the protocol holding the lock
			// (--bad-id, --crash-reply) keeps it until its lease runs out
			// (2 s), and the run must outlast that and a new process's
			// start on a loaded machine.
			res, log, err := tryRun(t, "etcd", testClient(t, flag), func(o *runOptions) { o.clients = clients; o.time = 5 * time.Second })
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(log, "exec client c") || !strings.Contains(log, "the process is replaced") {
				t.Errorf("no line naming the client and the breach in the run's log:\n%s", log)
			}
			checkGoesOn(t, res, clients)
			if v := verdicts(res)[histories.CheckMutex]; v == checker.Invalid {
				t.Errorf("a breach of the protocol is no violation of the lock:%s", explain(res))
			}
		})
	}
}

// checkGoesOn checks that after the first breach (the first operation of
// unknown outcome) a new process (numbered past the first clients') made a
// request, and a lock was granted.
func checkGoesOn(t *testing.T, res *harness.Results, clients int) {
	t.Helper()
	h, err := histories.ReadFile(res.History)
	if err != nil {
		t.Fatal(err)
	}
	breach, replaced, granted := false, false, false
	for _, op := range h {
		switch {
		case !breach:
			breach = op.Type == histories.Info
		case op.Type == histories.Invoke && int(op.Process) >= clients:
			replaced = true
		case op.Type == histories.OK && op.F == histories.Acquire:
			granted = true
		}
	}
	if !breach || !replaced || !granted {
		t.Errorf("the run did not go on after the breach: a breach %v, a new process's request after it %v, a grant after it %v", breach, replaced, granted)
	}
}

func needRedis(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed (apt-get install redis-server): " + err.Error())
	}
}

// The client processes die with locktest, also when it is killed with
// SIGKILL (this test binary stands in for it): the test client, and the
// JVM of the Java adapter.
func TestClientsDieWithLocktest(t *testing.T) {
	t.Parallel()
	if kind := os.Getenv("EXECLOCK_TEST_PARENT"); kind != "" {
		startAndWait(t, kind)
		return
	}
	for _, kind := range []string{"python", "java"} {
		t.Run(kind, func(t *testing.T) {
			clientOf(t, kind) // skips without its runtime
			// Each client, and the watchdog that kills its group on locktest's death.
			proctest.KillParent(t, "TestClientsDieWithLocktest", 4, "EXECLOCK_TEST_PARENT="+kind)
		})
	}
}

// clientOf is the command of a client: the test client (python) or the
// Java adapter (java).
func clientOf(t *testing.T, kind string) []string {
	if kind == "java" {
		dir, err := filepath.Abs("adapters")
		if err != nil {
			t.Fatal(err)
		}
		return javaCommand(t, dir, "curator-mutex")
	}
	return testClient(t)
}

// startAndWait starts two clients of kind, prints the pids of its
// children (the clients and their watchdogs) and waits to be killed.
func startAndWait(t *testing.T, kind string) {
	r := execlock.New(clientOf(t, kind)...)
	var pids []string
	for _, name := range []string{"c0", "c1"} {
		l, err := r.Start(context.Background(), lock.Env{Name: name, Backend: "etcd", Prefix: "/locktest/", TTL: 2,
			Endpoints: []string{"127.0.0.1:1"}, Vars: map[string]string{"LOCKTEST_ETCD_URLS": "http://127.0.0.1:1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for _, pid := range proc.Children(os.Getpid()) {
			if !slices.Contains(pids, strconv.Itoa(pid)) {
				pids = append(pids, strconv.Itoa(pid))
			}
		}
	}
	fmt.Println(strings.Join(pids, " "))
	time.Sleep(time.Minute) // killed by the test long before
}

// A client that never answers: its acquires time out as any lock's do
// (unknown outcomes, the process replaced), and liveness says the lock
// granted nothing. A run in which every wait saw the machine stall
// locktest or the client (a loaded host) is unknown, rightly: a slow lock
// cannot be told from a stuck one there; it is skipped, saying so.
func TestSilentClient(t *testing.T) {
	t.Parallel()
	res := run(t, "etcd", testClient(t, "--silent"), func(o *runOptions) {
		o.clients = 2
		o.time = 2 * time.Second
		o.bound = 2 * time.Second // shorter than the acquires' 5 s timeout
	})
	for _, c := range res.Checks {
		if c.Name == histories.CheckLiveness && c.Verdict == checker.Unknown && strings.Contains(c.Explanation, "a slow lock cannot be told from a stuck one") {
			t.Skipf("every wait saw the machine stalled: %s", c.Explanation)
		}
	}
	if v := verdicts(res); v[histories.CheckLiveness] != checker.Invalid || v[histories.CheckMutex] == checker.Invalid {
		t.Errorf("a client that never answers: want liveness invalid and no mutex violation:%s", explain(res))
	}
	if res.Run.Stats.Acquisitions != 0 {
		t.Errorf("%d acquisitions recorded of a client that never answers", res.Run.Stats.Acquisitions)
	}
}

// A lock that tells no decision revision is judged from the bounds
// locktest takes itself: an impatient client (it waits 500 ms for the keys
// ahead of it, then takes the lock anyway) is caught by promise 3 on a run
// without faults, where every overlap began while the earlier holder's key
// was on the server.
func TestImpatientClientCaught(t *testing.T) {
	t.Parallel()
	impatient := func(t *testing.T, backend string, command []string) {
		res := run(t, backend, command, func(o *runOptions) {
			// Every section slow (a TTL or more), so that a waiter's
			// 500 ms end before the holder lets go: a run of few
			// grants (7 on a loaded machine) had no section that long
			// at the default share, and no overlap to catch.
			o.slow = 1
			o.time = 5 * time.Second
		})
		var contract checker.Result
		for _, c := range res.Checks {
			if c.Name == histories.CheckContract {
				contract = c
			}
		}
		if contract.Verdict != checker.Invalid || !strings.Contains(contract.Explanation, "Promise 3 (overlap only after loss)") || contract.LockBugs == 0 || contract.LeaseRaces != 0 {
			t.Errorf("an impatient lock on %s: want contract invalid by promise 3, every overlap the lock's bug; %d races, %d bugs, %d undecided:%s",
				backend, contract.LeaseRaces, contract.LockBugs, contract.Undecided, explain(res))
		}
	}
	t.Run("etcd", func(t *testing.T) {
		t.Parallel()
		impatient(t, "etcd", testClient(t, "--impatient"))
	})
	kazoo := func(t *testing.T, flags ...string) []string {
		if err := exec.Command("/usr/bin/python3", "-c", "import kazoo").Run(); err != nil {
			t.Skipf("/usr/bin/python3 cannot import kazoo (apt-get install python3-kazoo; .ci/run installs adapters/apt-packages): %v", err)
		}
		script, err := filepath.Abs(filepath.Join("testdata", "impatient_kazoo.py"))
		if err != nil {
			t.Fatal(err)
		}
		return append([]string{"/usr/bin/python3", script}, flags...)
	}
	t.Run("zookeeper", func(t *testing.T) {
		t.Parallel()
		impatient(t, "zookeeper", kazoo(t))
	})
	// Without a token, as kazoo's own Lock: judged by its znode's czxid,
	// read from the servers.
	t.Run("zookeeper-no-token", func(t *testing.T) {
		t.Parallel()
		impatient(t, "zookeeper", kazoo(t, "--no-token"))
	})
}

// A correct client without the revision (the protocol's minimum) keeps its
// contract under pauses: the bounds never make a race a bug.
func TestCorrectClientWithoutRevision(t *testing.T) {
	t.Parallel()
	res := run(t, "etcd", testClient(t, "--no-revision"), func(o *runOptions) {
		o.faults = []string{"pause"}
		o.slow = workload.DefaultConfig().SlowShare
		o.time = 6 * time.Second
		o.quiet = 3 * time.Second
	})
	if v := verdicts(res)[histories.CheckContract]; v == checker.Invalid {
		t.Errorf("a correct lock without the revision, under pauses: contract invalid:%s", explain(res))
	}
}

// A lock that calls each grant lost in the same write as its reply: every
// lost is recorded (the grant is held before its reply is handed on, so
// the lost read right after it finds it), and with two clients, one wins
// after an attempt that found the key taken, and the contract check's
// promise 7 catches the grant called lost while its key was fresh, with
// no fault.
func TestLostAtOnce(t *testing.T) {
	t.Parallel()
	res := run(t, "redis", testClient(t, "--lost-at-once"), func(o *runOptions) { o.clients = 2 })
	st := res.Run.Stats
	if st.Acquisitions == 0 || st.LeasesLost != st.Acquisitions {
		t.Errorf("%d grants, each called lost at once, but %d lost recorded", st.Acquisitions, st.LeasesLost)
	}
	if v := verdicts(res); v[histories.CheckContract] != checker.Invalid || !strings.Contains(explain(res), "Promise 7") {
		t.Errorf("grants called lost at once with no fault: want contract invalid by promise 7:%s", explain(res))
	}
}
