package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/registry"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/browsertest"
	"github.com/locktest/locktest/internal/fakebackend"
	"github.com/locktest/locktest/internal/partest"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
	"github.com/locktest/locktest/workload"
)

// TestMain lets a test run locktest itself in a process of its own: with
// LOCKTEST_CLI_ARGS set (arguments separated by spaces), the test binary is
// locktest with those arguments (on the fake backend with
// LOCKTEST_CLI_FAKE set: runOnFake, for a child). Otherwise it gives
// the tests a temporary directory of their own. Every
// locktest command first sweeps the temporary directory for what killed
// runs left there and says so on stderr; the machine's shared one holds
// what other processes leave (other suites, other engineers' runs), which
// made the tests' one-line errors two lines, now and then. A test's child
// (the test binary run again as locktest) keeps the TMPDIR its test gave it.
func TestMain(m *testing.M) {
	if args := os.Getenv("LOCKTEST_CLI_ARGS"); args != "" {
		bs := ownBackends
		if os.Getenv("LOCKTEST_CLI_FAKE") != "" {
			bs = fakebackend.Set
		}
		os.Exit(mainArgs(bs, strings.Fields(args), os.Stdout, os.Stderr))
	}
	const mark = "LOCKTEST_CMD_TESTS_TMPDIR"
	if os.Getenv(mark) != "" {
		code := m.Run()
		browsertest.Close()
		os.Exit(code)
	}
	// The end-to-end runs (TestRuns) mostly wait on their servers and
	// their runs' clocks, not on the CPU (the package's tests take about
	// 32 s of CPU in 80 s): six of them at once, unless -parallel says
	// otherwise.
	partest.RaiseTo(runsAtOnce)
	tmp, err := os.MkdirTemp("", "cmd-locktest-tests-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv("TMPDIR", tmp)
	os.Setenv(mark, tmp)
	code := m.Run()
	browsertest.Close()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// runMain runs locktest with args on its own backends (real servers).
func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runMainOn(t, ownBackends, args...)
}

// runMainOn runs locktest with args on the backends bs.
func runMainOn(t *testing.T, bs *backend.Set, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := mainArgs(bs, args, &out, &errb)
	return code, out.String(), errb.String()
}

// sockets counts the process's open sockets (listeners and connections).
func sockets(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count sockets: %v", err)
	}
	n := 0
	for _, e := range ents {
		if link, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(link, "socket:") {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

// TestRunEndToEnd runs the real thing: a 3-member embedded etcd cluster
// behind toxiproxy, five contending clients, the fenced resource, the checks.
// It also checks that the run leaves nothing behind.
func TestRunEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real etcd cluster")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", filepath.Join(tmp, "tmp"))
	if err := os.Mkdir(os.Getenv("TMPDIR"), 0o755); err != nil {
		t.Fatal(err)
	}
	goroutines, socks := runtime.NumGoroutine(), sockets(t)

	out := filepath.Join(tmp, "runs")
	// No slow sections: two seconds of them would hold few grants.
	code, stdout, stderr := runMain(t, "run", "--time", "2s", "--nemesis", "none", "--slow-share", "0", "--seed", "42", "--out", out, "--require", "all")
	if code != exitValid {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if stderr != "" {
		t.Errorf("run wrote to stderr: %q", stderr)
	}
	for _, want := range []string{"seed 42", "mutex", "resource", "verdict: valid"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}

	dirs, _ := filepath.Glob(filepath.Join(out, "*-seed42"))
	if len(dirs) != 1 {
		t.Fatalf("want one run directory, got %v", dirs)
	}
	dir := dirs[0]
	for _, f := range []string{"history.jsonl", "results.json", "report.html", "mutex.html", "resource.html", "resource-log.jsonl", "logs/etcd-m0.log"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("run directory lacks %s: %v", f, err)
		}
	}

	var res struct {
		harness.Results
		Config struct{ Workload struct{ Clients int } } `json:"config"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Seed == nil || *res.Seed != 42 || res.Config.Workload.Clients != 5 {
		t.Errorf("results lack the seed or configuration: %+v", res)
	}
	if res.Run == nil || res.Run.Stats.Acquisitions < 5 {
		t.Fatalf("too few acquisitions in 2 s: %+v", res.Run)
	}
	// Embedded members run in locktest's process: no server CPU apart
	// from its own (compare's "in process").
	if res.Run.ServerCPU != nil {
		t.Errorf("server CPU %v measured for embedded members", *res.Run.ServerCPU)
	}
	for _, c := range res.Checks {
		if c.Verdict != checker.Valid {
			t.Errorf("check %s: %s: %s", c.Name, c.Verdict, c.Explanation)
		}
	}

	// The history is complete and well-formed: every acquire ok carries a
	// token, and tokens grow.
	ops, err := histories.ReadFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	acquired := 0
	for _, op := range ops {
		if op.F == histories.Acquire && op.Type == histories.OK {
			tok, ok := op.Token()
			if !ok || tok <= last {
				t.Fatalf("acquire at index %d: token %d after %d", op.Index, tok, last)
			}
			last = tok
			acquired++
		}
	}
	if acquired != res.Run.Stats.Acquisitions {
		t.Errorf("history has %d acquisitions, stats say %d", acquired, res.Run.Stats.Acquisitions)
	}

	// Re-checking the stored run gives the same verdict and keeps the seed.
	code, stdout, _ = runMain(t, "check", "--require", "all", dir)
	if code != exitValid || !strings.Contains(stdout, "verdict: valid") {
		t.Errorf("re-check: exit %d\n%s", code, stdout)
	}

	// Nothing is left behind: temp dirs, sockets, goroutines.
	if ents, _ := os.ReadDir(os.Getenv("TMPDIR")); len(ents) != 0 {
		t.Errorf("temp dir not cleaned: %v", ents)
	}
	if !eventually(t, 10*time.Second, func() bool { return sockets(t) <= socks }) {
		t.Errorf("sockets: %d before the run, %d after", socks, sockets(t))
	}
	if !eventually(t, 10*time.Second, func() bool { return runtime.NumGoroutine() <= goroutines+2 }) {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines: %d before the run, %d after\n%s", goroutines, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
}

func TestBadInput(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	bad := filepath.Join(tmp, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"type":"invoke","f":"acquire","process":0,"time":1}`+"\n"+`{"type":"okay","f":"acquire","process":0,"time":2}`+"\n"), 0o644)

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, ""},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown flag", []string{"run", "--frob"}, "unknown flag --frob (see locktest run --help)"},
		{"zero clients", []string{"run", "--clients", "0"}, "clients must be at least 1"},
		{"bad resource", []string{"run", "--resource", "maybe"}, `unknown resource mode "maybe"`},
		{"bad require", []string{"run", "--require", "mutex,speed"}, `unknown check "speed"`},
		{"unwritable out", []string{"run", "--out", filepath.Join(file, "runs")}, "--out:"},
		{"missing history", []string{"check", filepath.Join(tmp, "nope.jsonl")}, "no such file"},
		{"malformed history", []string{"check", bad}, "bad.jsonl:2:"},
		{"check without path", []string{"check"}, "want exactly one PATH"},
		{"bad nemesis", []string{"run", "--nemesis", "pause,meteor"}, `unknown fault "meteor"`},
		{"bad guard", []string{"run", "--guard", "hope"}, "guard"},
		{"bad durations", []string{"run", "--fault-durations", "pause=5s-1s"}, "--fault-durations"},
		{"five is the other size", []string{"run", "--members", "4"}, "--members must be 3 or 5"},
		{"missing schedule", []string{"run", "--schedule", filepath.Join(tmp, "nope.json")}, "--schedule"},
		{"zero seeds", []string{"sweep", "--seeds", "0"}, "--seeds must be at least 1"},
		{"unknown scenario", []string{"scenario", "run", "split-brain"}, "paused-holder"},
		{"scenario without name", []string{"scenario", "run"}, "want a scenario name"},
		{"shard 0/2", []string{"nightly", "--shard", "0/2"}, "--shard"},
		{"shard 3/2", []string{"nightly", "--shard", "3/2"}, "--shard"},
		{"shard x", []string{"nightly", "--shard", "x"}, "--shard"},
		{"tiny budget", []string{"nightly", "--budget", "5s"}, "too small for one run"},
		{"unwritable junit", []string{"nightly", "--junit", filepath.Join(file, "j.xml")}, "--junit"},
		{"bad keep", []string{"nightly", "--keep", "some"}, "--keep"},
		{"unknown nightly recipe", []string{"nightly", "--recipes", "mutex,hope"}, `unknown lock recipe "hope"`},
		{"slow share above 1", []string{"run", "--slow-share", "1.5"}, "slow share 1.5"},
		{"slow think without range", []string{"run", "--slow-think", "2s"}, "--slow-think"},
		{"bad cluster mode", []string{"run", "--cluster", "cloud"}, `--cluster "cloud"`},
		{"etcd-bin without process", []string{"run", "--etcd-bin", "/usr/bin/etcd"}, "--etcd-bin needs --cluster process"},
		{"missing etcd-bin", []string{"run", "--cluster", "process", "--etcd-bin", filepath.Join(tmp, "etcd")}, "no such file"},
		{"etcd-bin not executable", []string{"run", "--cluster", "process", "--etcd-bin", file}, "not executable"},
		{"etcd-bin not etcd", []string{"run", "--cluster", "process", "--etcd-bin", "/bin/true"}, "not etcd"},
		{"external without endpoints", []string{"run", "--cluster", "external"}, "--cluster external needs --endpoints"},
		{"endpoints without external", []string{"run", "--endpoints", "http://127.0.0.1:2379"}, "--endpoints needs --cluster external"},
		{"endpoints that do not answer", []string{"run", "--cluster", "external", "--endpoints", "http://127.0.0.1:1", "--out", tmp}, "127.0.0.1:1"},
		{"toxiproxy without external", []string{"run", "--toxiproxy", "http://127.0.0.1:8474"}, "--toxiproxy"},
		{"exec command not found", []string{"run", "--backend", "etcd", "--recipe", "exec:" + filepath.Join(tmp, "no-client")}, "not found"},
		{"exec command not executable", []string{"run", "--backend", "etcd", "--recipe", "exec:" + file}, "not executable"},
		{"exec unterminated quote", []string{"run", "--recipe", "exec:node 'client.js"}, "unterminated"},
		{"exec-clock on a built-in", []string{"run", "--recipe", "mutex", "--exec-clock", "none"}, "--exec-clock is for exec:"},
		{"bad exec-clock", []string{"run", "--recipe", "exec:/bin/cat", "--exec-clock", "sometimes"}, "--exec-clock"},
		{"unknown backend", []string{"run", "--recipe", "exec:/bin/cat", "--backend", "mongo"}, "mongo"},
		{"live beyond loopback", []string{"run", "--live", "--live-addr", "0.0.0.0:0", "--out", filepath.Join(tmp, "runs")}, "--live-addr 0.0.0.0:0 listens beyond loopback (locktest serve --public serves beyond)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runMain(t, tc.args...)
			if code != exitUnknown {
				t.Errorf("exit %d, want 2", code)
			}
			if tc.want == "" {
				return
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q lacks %q", stderr, tc.want)
			}
			if strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("error is not one line: %q", stderr)
			}
		})
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 2 {
		t.Errorf("bad input left files behind: %v", ents)
	}
}

// The catalog lists every scenario with what it expects.
func TestScenarioList(t *testing.T) {
	code, stdout, _ := runMain(t, "scenario", "list")
	if code != exitValid {
		t.Fatalf("exit %d", code)
	}
	names := registry.Backends().Catalog().Names()
	for _, redis := range []string{"oversold-redis", "failover-redis", "redlock-restart", "redlock-clock"} {
		if !slices.Contains(names, redis) {
			t.Errorf("the catalog lacks %s", redis)
		}
	}
	for _, name := range names {
		if !strings.Contains(stdout, name+" ") {
			t.Errorf("list lacks %s:\n%s", name, stdout)
		}
	}
	if n := strings.Count(stdout, "expects: unfenced "); n != len(names) {
		t.Errorf("%d expectation lines for %d scenarios:\n%s", n, len(names), stdout)
	}
	// Each upstream bug: its reference, whether it is fixed, the versions
	// and the recipe that shows it, under its scenario.
	for _, want := range []string{
		"upstream bug: etcd#22082 (open; a fix is proposed in etcd pull request 22115), seen in etcd 3.6.16 (client/v3 concurrency), with --recipe mutex-retry",
		"upstream bug: etcd#19597 (open; a fix is proposed in etcd pull request 22387), seen in etcd 3.6.16 (client/v3 concurrency), with --recipe election",
		"upstream bug: etcd#11456 (fixed in 3.5",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("list lacks %q:\n%s", want, stdout)
		}
	}
	if i, j := strings.Index(stdout, "etcd-22082 "), strings.Index(stdout, "upstream bug: etcd#22082"); i < 0 || j < i {
		t.Errorf("etcd#22082 not listed under etcd-22082:\n%s", stdout)
	}
}

// scenario list --bugs is the table of the catalog's upstream bugs, a row
// each, from the scenarios' own data; --json is the same for CI tools.
func TestScenarioBugs(t *testing.T) {
	entries := registry.Backends().Catalog().Entries()
	code, stdout, _ := runMain(t, "scenario", "list", "--bugs")
	if code != exitValid {
		t.Fatalf("exit %d", code)
	}
	if rows := strings.Count(stdout, "\n| ["); rows != len(entries) {
		t.Errorf("%d rows for %d bugs:\n%s", rows, len(entries), stdout)
	}
	for _, want := range []string{
		"| [redis-py#3847](https://github.com/redis/redis-py/issues/3847) | Python: redis-py (Lock) |",
		"| redis-py-3847 | --recipe 'exec:/usr/bin/python3 lock/execlock/adapters/redis_py.py --retry-release' | --recipe 'exec:/usr/bin/python3 lock/execlock/adapters/redis_py.py --retry-release --fix=4258' |",
		"| redis-py-4279 | --recipe 'exec:/usr/bin/python3 lock/execlock/adapters/redis_py.py --persistent --renew' | --recipe 'exec:/usr/bin/python3 lock/execlock/adapters/redis_py.py --persistent --renew --fix=4282' |",
		"| [shayhatsor/zookeeper#26](https://github.com/shayhatsor/zookeeper/issues/26) | Java: ZooKeeper's lock recipe (WriteLock) |",
		"| etcd-22123 | --recipe election-retry | --recipe election-retry-kept |",
		"| [microsoft/etcd3#176](https://github.com/microsoft/etcd3/issues/176) | Node: etcd3 (Election) |",
		"| etcd3-node-176 | --recipe 'exec:node lock/execlock/adapters/etcd3_node.js --election --etcd3=1.1.0' | --recipe 'exec:node lock/execlock/adapters/etcd3_node.js --election' |",
		"| node-redlock-296 | --recipe 'exec:node lock/execlock/adapters/redlock.js --using --redlock=5.0.0-beta.2' | --recipe 'exec:node lock/execlock/adapters/redlock.js --using' |",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = runMain(t, "scenario", "list", "--bugs", "--json")
	var got []scenario.Entry
	if err := json.Unmarshal([]byte(stdout), &got); code != exitValid || err != nil {
		t.Fatalf("exit %d, %v:\n%s", code, err, stdout)
	}
	if len(got) != len(entries) || got[0].Ref != entries[0].Ref || got[0].Scenario != entries[0].Scenario {
		t.Errorf("JSON %+v, want %+v", got, entries)
	}
	if code, _, stderr := runMain(t, "scenario", "list", "--json"); code != exitUnknown || !strings.Contains(stderr, "--json is for --bugs") {
		t.Errorf("--json without --bugs: exit %d, %q", code, stderr)
	}
}

func TestHelp(t *testing.T) {
	for _, cmd := range []string{"run", "check", "sweep"} {
		code, stdout, _ := runMain(t, cmd, "--help")
		if code != exitValid || !strings.Contains(stdout, "-require") {
			t.Errorf("%s --help: exit %d, output %q", cmd, code, stdout)
		}
	}
}

func TestCheckExitStatus(t *testing.T) {
	dir := t.TempDir()
	// Two holders at once on an unfenced resource: the resource accepts the
	// lower token's write after the higher one's, which is invalid.
	h := strings.Join([]string{
		`{"type":"invoke","f":"acquire","process":0,"time":0}`,
		`{"type":"ok","f":"acquire","process":0,"time":1,"value":{"token":5}}`,
		`{"type":"invoke","f":"acquire","process":1,"time":2}`,
		`{"type":"ok","f":"acquire","process":1,"time":3,"value":{"token":7}}`,
		`{"type":"invoke","f":"write","process":1,"time":4,"value":{"token":7,"value":1}}`,
		`{"type":"ok","f":"write","process":1,"time":5,"value":{"token":7,"value":1}}`,
		`{"type":"invoke","f":"write","process":0,"time":6,"value":{"token":5,"value":1}}`,
		`{"type":"ok","f":"write","process":0,"time":7,"value":{"token":5,"value":1}}`,
	}, "\n") + "\n"
	path := filepath.Join(dir, "split.jsonl")
	os.WriteFile(path, []byte(h), 0o644)

	code, stdout, stderr := runMain(t, "check", path)
	if code != exitInvalid {
		t.Fatalf("exit %d, want 1\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "split.results.json")); err != nil {
		t.Errorf("no results file: %v", err)
	}
	// With only mutex required the exit is still 1: both checks fail here.
	if code, _, _ := runMain(t, "check", "--require", "mutex", path); code != exitInvalid {
		t.Errorf("--require mutex: exit %d, want 1", code)
	}
}

// testRunWithFaults is the run command's fault plumbing, on the fake
// backend (the CLI's own logic: it runs beside TestRuns's real runs): a
// given schedule's faults are fired at their clients, each recorded as
// started and stopped and the whole healed once, the report's faults are
// the history's, and the stored schedule replays, the same faults in its
// order. The faults are client kinds the fake carries out (not a crash:
// its lock, in memory, has no lease to expire and would stay held). What
// real servers do under such faults stays on them: etcd
// members' under pause, lease and isolate with the fenced resource safe is
// RunExternal's, their agreeing at the end under member faults
// (consistency) RunProcessCluster's, Redis's and ZooKeeper's their runs'.
func testRunWithFaults(t *testing.T) {
	out := t.TempDir()
	given := nemesis.Schedule{Seed: 11, Members: 3, Clients: workload.ClientNames(5), Entries: []nemesis.Entry{
		{At: 200 * time.Millisecond, Fault: "pause-client", Target: "c0", Duration: time.Second},
		{At: 400 * time.Millisecond, Fault: "clock-rate", Target: "c1", Duration: time.Second, Params: map[string]string{"rate": "0.5"}},
		{At: 1600 * time.Millisecond, Fault: "clock-bump", Target: "c2", Duration: time.Second, Params: map[string]string{"delta": "-1s"}},
	}}
	if err := given.WriteFile(filepath.Join(out, "given.json")); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--nemesis", "pause,clock", "--time", "5s", "--quiet", "1s", "--resource", "fenced", "--require", "resource", "--out", out}
	code, stdout, stderr := runOnFake(t, append(args, "--seed", "11", "--schedule", filepath.Join(out, "given.json"))...)
	if code != exitValid {
		t.Fatalf("exit %d, want 0 (the fenced resource must stay safe)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	dirs, _ := filepath.Glob(filepath.Join(out, "*-seed11"))
	if len(dirs) != 1 {
		t.Fatalf("want one run directory, got %v", dirs)
	}
	faults := func(dir string) []string {
		ops, err := histories.ReadFile(filepath.Join(dir, "history.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var started []string
		stops, heals := 0, 0
		for _, op := range ops {
			if op.Process != histories.Nemesis {
				continue
			}
			switch op.F {
			case "start":
				started = append(started, op.Value.Fault)
			case "stop":
				stops++
			case "heal":
				heals++
			}
		}
		if len(started) == 0 || stops != len(started) || heals != 1 {
			t.Fatalf("%s: %d faults started, %d stopped, %d heals", dir, len(started), stops, heals)
		}
		return started
	}
	// Replaying the stored schedule fires its faults in its order, from the
	// first on, and no other.
	replay := append(args, "--seed", "12", "--schedule", filepath.Join(dirs[0], "schedule.json"))
	if code, stdout, _ := runOnFake(t, replay...); code != exitValid {
		t.Fatalf("replay: exit %d\n%s", code, stdout)
	}
	again, _ := filepath.Glob(filepath.Join(out, "*-seed12"))
	if len(again) != 1 {
		t.Fatalf("want one replay directory, got %v", again)
	}
	sched, err := nemesis.ReadFile(filepath.Join(dirs[0], "schedule.json"))
	if err != nil {
		t.Fatal(err)
	}
	if replayed, err := nemesis.ReadFile(filepath.Join(again[0], "schedule.json")); err != nil || !reflect.DeepEqual(replayed, sched) {
		t.Fatalf("the replay ran schedule %+v (%v), not the stored %+v", replayed, err, sched)
	}
	for _, dir := range []string{dirs[0], again[0]} {
		b, err := os.ReadFile(filepath.Join(dir, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		var res harness.Results
		if err := json.Unmarshal(b, &res); err != nil || res.Run == nil || res.Run.Nemesis == nil {
			t.Fatalf("%s: no nemesis report (%v)", dir, err)
		}
		var kinds []string
		for i, f := range res.Run.Nemesis.Faults {
			if i >= len(sched.Entries) || f.Entry != i || f.Fault != sched.Entries[i].Fault {
				t.Errorf("%s: fault %d was entry %d (%s) of %v", dir, i, f.Entry, f.Fault, sched.Entries)
				continue
			}
			kinds = append(kinds, f.Fault)
		}
		if fired := faults(dir); !slices.Equal(fired, kinds) {
			t.Errorf("%s: the history fired %v, the report %v", dir, fired, kinds)
		}
	}
}

// A mistyped flag, command, recipe, fault, scenario, resource or check: a
// one-line error with the nearest name, exit 2, no prefix said twice.
func TestMistyped(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--nemsis", "pause"}, "run: unknown flag --nemsis; did you mean --nemesis? (see locktest run --help)"},
		{[]string{"run", "--nemesis", "pase"}, `run: --nemesis: unknown fault "pase"; did you mean pause? (want`},
		{[]string{"run", "--recipe", "mutx"}, `run: --recipe: unknown lock recipe "mutx"; did you mean mutex? (want`},
		{[]string{"rnu"}, `unknown command "rnu"; did you mean run? (want`},
		{[]string{"chek", "runs/x"}, `unknown command "chek"; did you mean check? (want`},
		{[]string{"scenario", "run", "paused-holdr"}, `unknown scenario "paused-holdr"; did you mean paused-holder? (want`},
		{[]string{"scenario", "lst"}, `scenario: unknown subcommand "lst"; did you mean list? (want`},
		{[]string{"run", "--resource", "fencd"}, `run: --resource: unknown resource mode "fencd"; did you mean fenced? (want`},
		{[]string{"check", "--requre", "all", "x"}, "check: unknown flag --requre; did you mean --require? (see locktest check --help)"},
		{[]string{"run", "--guard", "sesion"}, `run: unknown guard "sesion"; did you mean session? (want`},
		{[]string{"run", "--workload", "countr"}, `run: unknown workload "countr"; did you mean counter? (want`},
		{[]string{"run", "--recipe", "exec:/bin/cat", "--backend", "etdc"}, `run: --backend: unknown backend "etdc"; did you mean etcd? (want`},
		{[]string{"run", "--time", "5"}, `run: invalid value "5" for flag --time: parse error`},
		{[]string{"run", "--nemesis", "meteor"}, `run: --nemesis: unknown fault "meteor" (want`},
	} {
		code, stdout, stderr := runMain(t, tc.args...)
		if code != exitUnknown || stdout != "" || !strings.HasPrefix(stderr, "locktest: "+tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("locktest %s: exit %d, stdout %q, stderr %q; want exit 2 and the one line %q…", strings.Join(tc.args, " "), code, stdout, stderr, "locktest: "+tc.want)
		}
	}
}

// Every command's --help: the common flags first, every flag written as
// typed (--nemesis, never -nemesis), each flag under one heading, and
// examples; run's flags all belong to a topic of runGroups.
func TestHelpGrouped(t *testing.T) {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	addRunFlags(fs, ownBackends)
	_, backends := backendFlags()
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(runFlagNames(), f.Name) && !slices.Contains(slices.Concat(backends...), f.Name) {
			t.Errorf("run's flag --%s is under no heading of runGroups", f.Name)
		}
	})
	for _, args := range [][]string{{"run"}, {"scenario", "run"}, {"check"}, {"nightly"}, {"sweep"}, {"compare"}, {"shrink"}, {"serve"}, {"report"}} {
		code, stdout, stderr := runMain(t, append(args, "--help")...)
		name := strings.Join(args, " ")
		if code != exitValid || stderr != "" {
			t.Errorf("%s --help: exit %d, stderr %q", name, code, stderr)
		}
		if regexp.MustCompile(`(?m)^\s+-[a-z]`).MatchString(stdout) {
			t.Errorf("%s --help writes a flag with one dash:\n%s", name, stdout)
		}
		flags := regexp.MustCompile(`(?m)^  --([a-z0-9-]+)`).FindAllStringSubmatch(stdout, -1)
		seen := map[string]bool{}
		for _, f := range flags {
			if seen[f[1]] {
				t.Errorf("%s --help lists --%s twice", name, f[1])
			}
			seen[f[1]] = true
		}
		h := helps[name]
		if len(h.common) > 0 && (!strings.Contains(stdout, "\nCommon flags:\n") || flags[0][1] != h.common[0]) {
			t.Errorf("%s --help does not begin its flags with the common ones:\n%s", name, stdout)
		}
		if !strings.Contains(stdout, "\nExamples:\n  locktest "+strings.Fields(name)[0]) {
			t.Errorf("%s --help has no examples:\n%s", name, stdout)
		}
	}
}
