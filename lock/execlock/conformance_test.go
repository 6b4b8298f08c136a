package execlock_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/locktest/locktest/backend/etcd"
	"github.com/locktest/locktest/backend/etcd/cluster"
	"github.com/locktest/locktest/backend/redis/redisserver"
	"github.com/locktest/locktest/backend/zookeeper/zkserver"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/partest"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/lock/execlock"
)

// TestConformance checks a lock client against the protocol (README.md:
// Checking a client against the protocol): LOCKTEST_CONFORMANCE='COMMAND
// ARGS…' on LOCKTEST_CONFORMANCE_BACKEND (etcd, the default, redis or
// zookeeper), or else the test client in testdata on every backend this
// machine has. It drives the processes itself, on a real system without
// faults, then has contending clients judged by a short run.
func TestConformance(t *testing.T) {
	t.Parallel()
	if spec := os.Getenv("LOCKTEST_CONFORMANCE"); spec != "" {
		r, err := execlock.Parse(execlock.Prefix + spec)
		if err != nil {
			t.Fatalf("LOCKTEST_CONFORMANCE: %v", err)
		}
		backend := os.Getenv("LOCKTEST_CONFORMANCE_BACKEND")
		if backend == "" {
			backend = "etcd"
		}
		conform(t, backend, r.Command)
		return
	}
	for _, backend := range []string{"etcd", "redis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			conform(t, backend, testClient(t))
		})
	}
}

// conformTTL is the TTL, in seconds, of the conformance drives' locks: long
// enough that a correct client starved of the CPU for seconds (a JVM or a
// Node process on a loaded 2-core machine) keeps its lease, so that what
// the drive finds is the client's, not the host's.
const conformTTL = 15

// replyWait bounds the wait for any reply: a fail-safe against a client
// that never answers, not a measure of its speed.
const replyWait = 60 * time.Second

func conform(t *testing.T, backend string, command []string) {
	command, err := execlock.New(command...).Prepare() // a Java source compiled, as a run does
	if err != nil {
		t.Fatal(err)
	}
	env := system(t, backend)
	prefix := "/locktest/conformance/" + strings.ReplaceAll(t.Name(), "/", "-") + "/"
	env = append(env, "LOCKTEST_PROTOCOL="+strconv.Itoa(execlock.Version), "LOCKTEST_BACKEND="+backend, "LOCKTEST_PREFIX="+prefix,
		"LOCKTEST_TTL="+strconv.Itoa(conformTTL), "LOCKTEST_SEED=1")
	c0 := startClient(t, command, append(env, "LOCKTEST_CLIENT=c0"))
	c1 := startClient(t, command, append(env, "LOCKTEST_CLIENT=c1"))

	grant := func(c *client, what string) (token int64, hasToken bool) {
		t.Helper()
		r := c.call(t, `{"op":"acquire","lock":"lock","timeout_ms":20000}`, replyWait)
		if r.OK == nil || !*r.OK {
			t.Fatalf("%s: %s acquire of a free lock: want ok true, got %s", what, c.name, r.raw)
		}
		if r.Key != nil && !strings.HasPrefix(*r.Key, prefix) {
			// Allowed (a library may fix where its keys live), but said.
			t.Logf("%s: note: the grant's key %q is not under LOCKTEST_PREFIX %q: the observer cannot attribute its deletions", what, *r.Key, prefix)
		}
		if r.Token == nil {
			return 0, false
		}
		return *r.Token, true
	}
	release := func(c *client, what string) {
		t.Helper()
		r := c.call(t, `{"op":"release","lock":"lock"}`, replyWait)
		if r.OK == nil || !*r.OK {
			t.Fatalf("%s: %s release of its lock: want ok true, got %s", what, c.name, r.raw)
		}
	}

	t0, tokened := grant(c0, "first grant")
	if r := c1.call(t, `{"op":"frobnicate","lock":"lock"}`, replyWait); r.OK == nil || *r.OK || r.Definite == nil || !*r.Definite {
		t.Errorf("an unknown op: want ok false, definite true, got %s", r.raw)
	}
	// c1 up (it answers, and is idle, as locktest waits for a client it
	// starts): the timed acquire below is then c1's, not its runtime's
	// start or warm-up (a Node client's start outlasted the 10 s below at
	// load 79; a JVM's cold first acquire took 20 s beside 8 busy loops).
	c1.up(t)
	began := time.Now()
	r := c1.call(t, `{"op":"acquire","lock":"lock","timeout_ms":700}`, replyWait)
	switch {
	case *r.OK:
		t.Errorf("acquire of a held lock with timeout_ms 700: want ok false, got %s", r.raw)
	case r.Definite == nil || !*r.Definite:
		// Allowed (when in doubt, unknown), but it weakens what the checks
		// can tell: said.
		t.Logf("note: a timed-out acquire answered definite false: it is recorded with an unknown outcome: %s", r.raw)
	}
	// Well past 700 ms, for a starved machine, but short of the TTL: an
	// acquire that waits for the holder's lease to run out is caught.
	if took := time.Since(began); took > conformTTL*time.Second*2/3 {
		t.Errorf("acquire with timeout_ms 700 answered after %v: keep to timeout_ms", took)
	}
	release(c0, "first release")
	t1, tokened1 := grant(c1, "handover")
	if tokened != tokened1 {
		t.Errorf("one grant told a token and the next did not: a lock offers a fencing token always or never")
	}
	if tokened && t1 <= t0 {
		t.Errorf("tokens must grow with every grant: %d, then %d", t0, t1)
	}
	release(c1, "handover release")
	for _, c := range []*client{c0, c1} {
		c.in.Close()
		select {
		case <-c.exited:
		case <-time.After(replyWait):
			t.Errorf("%s did not exit within %v of its stdin's end", c.name, replyWait)
		}
	}
	if backend == "zookeeper" {
		noWarmUpLeft(t, env, prefix)
	}

	res := run(t, backend, command, func(o *runOptions) { o.clients = 3; o.ttl = conformTTL })
	// Without faults and without sections longer than the TTL, a correct
	// lock keeps every promise: no check may find a violation, and the
	// lock's own checks must be valid. (A lock without tokens leaves the
	// resource unjudged; Redis offers the contract and consistency checks
	// no revisions, and they say unknown.)
	for _, c := range res.Checks {
		must := c.Name == histories.CheckMutex || c.Name == histories.CheckLiveness || c.Name == histories.CheckInvariant ||
			c.Name == histories.CheckResource && tokened
		if c.Verdict == checker.Invalid || must && c.Verdict != checker.Valid {
			t.Errorf("a run without faults: check %s is %s: %s", c.Name, c.Verdict, c.Explanation)
		}
	}
}

// noWarmUpLeft checks that the clients, once exited, left nothing beside
// prefix: the Java adapter warms up on a lock path of its own there
// (PREFIX-warm-up-CLIENT-PID, outside the prefix the observer reads), and
// deletes it.
func noWarmUpLeft(t *testing.T, env []string, prefix string) {
	t.Helper()
	var servers []string
	for _, v := range env {
		if e, ok := strings.CutPrefix(v, "LOCKTEST_ENDPOINTS="); ok {
			servers = strings.Split(e, ",")
		}
	}
	c, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	parent, base := path.Split(strings.TrimSuffix(prefix, "/"))
	children, _, err := c.Children(strings.TrimSuffix(parent, "/"))
	if errors.Is(err, zk.ErrNoNode) {
		return // a container, gone once empty
	}
	if err != nil {
		t.Fatalf("listing %s: %v", parent, err)
	}
	for _, child := range children {
		if strings.HasPrefix(child, base+"-warm-up-") {
			t.Errorf("%s%s is left after the clients exited", parent, child)
		}
	}
}

// shared is a real system the conformance drives of one backend share
// (a ZooKeeper server is a JVM to start): started by the first drive that
// needs it, closed by TestMain. Each drive keeps to a prefix of its own,
// as the test client and every adapter here keep their keys under
// LOCKTEST_PREFIX (a command given in LOCKTEST_CONFORMANCE is the only
// drive).
type shared struct {
	once  sync.Once
	env   []string
	urls  []string // every member's client URL (etcd)
	err   error
	close func()
}

var systems = map[string]*shared{"etcd": {}, "redis": {}, "zookeeper": {}}

// The tests here mostly wait (on their servers, their clients' starts, a
// run's clock): they run four at once (internal/partest).
func TestMain(m *testing.M) {
	partest.Raise()
	code := m.Run()
	closeEnsembles()
	for _, s := range systems {
		if s.close != nil {
			s.close()
		}
	}
	os.Exit(code)
}

// system returns the client environment naming the real system of backend
// that the drives share.
func system(t testing.TB, backend string) []string {
	s, ok := systems[backend]
	if !ok {
		t.Fatalf("LOCKTEST_CONFORMANCE_BACKEND: want etcd, redis or zookeeper, got %q", backend)
	}
	var start func(ctx context.Context, dir string) ([]string, func(), error)
	switch backend {
	case "etcd":
		start = func(ctx context.Context, dir string) ([]string, func(), error) {
			// etcd's own raft timing, as locktest's runs without faults
			// have it: the cluster idles through the whole package.
			c, err := cluster.Start(ctx, cluster.Config{Members: 3, Dir: dir, TickMs: 100, ElectionMs: 1000})
			if err != nil {
				return nil, nil, err
			}
			for _, m := range c.Members() {
				s.urls = append(s.urls, m.ClientURL)
			}
			m := c.Members()[0]
			return []string{"LOCKTEST_ENDPOINTS=" + m.ClientAddr(), "LOCKTEST_ETCD_URLS=" + m.ClientURL}, func() { c.Close() }, nil
		}
	case "redis":
		bin := redisserver.ForTest(t)
		start = func(ctx context.Context, dir string) ([]string, func(), error) {
			d, err := redisserver.Start(ctx, redisserver.Config{Binary: bin, Dir: dir})
			if err != nil {
				return nil, nil, err
			}
			return []string{"LOCKTEST_ENDPOINTS=" + d.Servers()[0].Addr}, func() { d.Close() }, nil
		}
	case "zookeeper":
		install := zkserver.ForTest(t)
		start = func(ctx context.Context, dir string) ([]string, func(), error) {
			e, err := zkserver.Start(ctx, zkserver.Config{Servers: 1, Dir: dir, Install: install})
			if err != nil {
				return nil, nil, err
			}
			return []string{"LOCKTEST_ENDPOINTS=" + e.ClientAddrs()[0]}, func() { e.Close() }, nil
		}
	}
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		dir, err := os.MkdirTemp("", "execlock-conformance-"+backend+"-")
		if err != nil {
			s.err = err
			return
		}
		var stop func()
		if s.env, stop, s.err = start(ctx, dir); s.err != nil {
			os.RemoveAll(dir)
			return
		}
		s.close = func() { stop(); os.RemoveAll(dir) }
	})
	if s.err != nil {
		t.Fatalf("starting %s: %v", backend, s.err)
	}
	return s.env
}

// sharedEtcd are etcd's options for a run without faults: the cluster the
// drives share, as an external one (--cluster external), rather than a
// cluster of the run's own, three members started and stopped again for
// each of the package's dozen such runs. The run keeps its keys under a
// prefix of its own there, its clients' links in its own toxiproxy, and
// deletes what it wrote as it ends.
func sharedEtcd(t testing.TB) *etcd.Options {
	system(t, "etcd")
	return &etcd.Options{Mode: etcd.External, Endpoints: systems["etcd"].urls}
}

// client is a client process driven by the test.
type client struct {
	name   string
	in     io.WriteCloser
	lines  chan []byte
	exited chan struct{}
	id     int
	pid    int // its process group's
}

// reply is a reply as the protocol pins its fields; nil is absent.
type reply struct {
	ID       *int64  `json:"id"`
	OK       *bool   `json:"ok"`
	Token    *int64  `json:"token"`
	Key      *string `json:"key"`
	Revision *int64  `json:"revision"`
	Error    *string `json:"error"`
	Definite *bool   `json:"definite"`
	Event    *string `json:"event"`
	raw      string
}

func startClient(t *testing.T, command, env []string) *client {
	t.Helper()
	name := strings.TrimPrefix(env[len(env)-1], "LOCKTEST_CLIENT=")
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %q: %v", command, err)
	}
	c := &client{name: name, in: in, lines: make(chan []byte, 100), exited: make(chan struct{})}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			c.lines <- append([]byte(nil), s.Bytes()...)
		}
		cmd.Wait()
		close(c.exited)
	}()
	c.pid = cmd.Process.Pid
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
		if t.Failed() {
			t.Logf("%s's stderr:\n%s", name, stderr.String())
		}
	})
	return c
}

// up waits until c's process group has been idle for 500 ms, as
// locktest's Recipe.Start waits for a client it starts, or replyWait has
// passed (then it is taken to be up, as Start takes it).
func (c *client) up(t *testing.T) {
	t.Helper()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(replyWait)
	var was proc.GroupState
	quiet := time.Now()
	for {
		select {
		case <-deadline:
			t.Logf("%s still busy after %v: taken to be up", c.name, replyWait)
			return
		case <-c.exited:
			return // its next call says so
		case <-tick.C:
		}
		g, ok := proc.Descendants(c.pid)
		if !ok {
			g = proc.Group(c.pid)
		}
		if !g.Idle(was) {
			was, quiet = g, time.Now()
		}
		if time.Since(quiet) >= 500*time.Millisecond {
			return
		}
	}
}

// call sends a request (req without its id) and returns its reply,
// passing over events; any line that is not the protocol's fails the test.
func (c *client) call(t *testing.T, req string, wait time.Duration) reply {
	t.Helper()
	c.id++
	line := fmt.Sprintf(`{"id":%d,%s`, c.id, strings.TrimPrefix(req, "{"))
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		t.Fatalf("%s: writing %s: %v", c.name, line, err)
	}
	deadline := time.After(wait)
	for {
		select {
		case b := <-c.lines:
			var r reply
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("%s: a line that is not the protocol's (%v): %q", c.name, err, b)
			}
			r.raw = string(b)
			if r.Event != nil {
				if *r.Event == execlock.EventLost && r.ID != nil {
					t.Fatalf("%s: an event with an id: %s", c.name, b)
				}
				continue
			}
			if r.ID == nil || *r.ID != int64(c.id) {
				t.Fatalf("%s: reply to request %d has the wrong id: %s", c.name, c.id, b)
			}
			if r.OK == nil {
				t.Fatalf(`%s: a reply without "ok": %s`, c.name, b)
			}
			return r
		case <-c.exited:
			t.Fatalf("%s exited before it answered %s", c.name, line)
		case <-deadline:
			t.Fatalf("%s: no reply to %s within %v", c.name, line, wait)
		}
	}
}
