package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/backend/serverkit"
	"github.com/locktest/locktest/internal/links"
	"github.com/locktest/locktest/internal/partest"
	"github.com/locktest/locktest/internal/polltest"
)

// TestEndToEnd starts a cluster, uses it through proxied client links,
// blackholes one client's links with a toxic, and checks that Close leaves
// nothing behind.
func TestEndToEnd(t *testing.T) {
	partest.Own(t, "TestOwnProcess")
	before := goroutines()
	dir := t.TempDir()
	logDir := filepath.Join(dir, "logs")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	c, err := Start(ctx, Config{Dir: dir, LogDir: logDir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	ms := c.Members()
	if len(ms) != 3 {
		t.Fatalf("%d members, want 3", len(ms))
	}
	ids := map[uint64]bool{}
	for i, m := range ms {
		if m.Name != "m"+strconv.Itoa(i) || m.Index != i || m.ID == 0 || ids[m.ID] {
			t.Fatalf("member %d: %+v", i, m)
		}
		ids[m.ID] = true
		if got := uint64(m.Etcd().Server.MemberID()); got != m.ID {
			t.Fatalf("member %s: ID %x, server says %x", m.Name, m.ID, got)
		}
	}
	li, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader := ms[li]
	for _, m := range ms {
		if got := uint64(m.Etcd().Server.Leader()); got != leader.ID {
			t.Fatalf("%s says leader %x, Leader() says %s (%x)", m.Name, got, leader.Name, leader.ID)
		}
	}
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}

	epsA, err := c.Endpoints("a")
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Endpoints("a")
	if err != nil || len(epsA) != 3 || !equal(epsA, again) {
		t.Fatalf("ClientEndpoints: %v then %v, %v", epsA, again, err)
	}
	for i, ep := range epsA {
		if ep == ms[i].ClientAddr() {
			t.Fatalf("endpoint %d is the member's own address %s", i, ep)
		}
	}

	a, err := c.Client("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Client("b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Put(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}
	if v := get(ctx, t, b, "k"); v != "v1" {
		t.Fatalf("b read %q, want v1", v)
	}

	// Blackhole every link of client a: a times out, b is unaffected.
	proxies, err := c.Links("a")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range proxies {
		if _, err := l.AddToxic("blackhole", "timeout", "downstream", 1, toxiclient.Attributes{"timeout": 0}); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := c.Link("a", 1); err != nil || len(p.ActiveToxics) != 1 || p.Name != "a->m1" {
		t.Fatalf("Link(a, 1) = %+v, %v", p, err)
	}
	start := time.Now()
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = a.Get(short, "k")
	cancelShort()
	if err == nil {
		t.Fatal("Get through blackholed links succeeded")
	}
	t.Logf("blackholed Get failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if _, err := b.Put(ctx, "k", "v2"); err != nil {
		t.Fatal(err)
	}

	// Healed as the nemesis heals a cut (links.RemoveCut): toxiproxy's
	// own RemoveToxic of a timeout toxic leaks the link's goroutines if a
	// byte comes after it (the leak check below caught two, once).
	for _, l := range proxies {
		if err := links.RemoveCut(l, "blackhole"); err != nil {
			t.Fatal(err)
		}
	}
	start = time.Now()
	polltest.Until(t, 10*time.Second, "client a recovers", func() bool {
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		r, err := a.Get(short, "k")
		return err == nil && len(r.Kvs) == 1 && string(r.Kvs[0].Value) == "v2"
	})
	t.Logf("client a recovered %v after the toxics were removed", time.Since(start).Round(time.Millisecond))

	// A generic proxy in front of another service.
	echo := startEcho(t)
	pa, err := c.Proxy("resource", echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if pa2, err := c.Proxy("resource", echo.Addr().String()); err != nil || pa2 != pa {
		t.Fatalf("second Proxy = %q, %v; want %q", pa2, err, pa)
	}
	if _, err := c.Proxy("resource", ms[0].ClientAddr()); err == nil {
		t.Fatal("Proxy with another upstream succeeded")
	}
	checkEcho(t, pa)
	if _, err := c.Proxy("bad name", echo.Addr().String()); err == nil {
		t.Fatal("Proxy accepted a name with a space")
	}

	// Everything that listened must be gone after Close.
	addrs := []string{c.ToxiproxyAddr(), pa}
	addrs = append(addrs, epsA...)
	for _, m := range ms {
		addrs = append(addrs, m.ClientAddr(), m.PeerAddr(), strings.TrimPrefix(m.peerListen, "http://"))
	}
	dataDir := c.Dir
	start = time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %v", time.Since(start).Round(time.Millisecond))
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	echo.Close()

	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data dir %s: %v", dataDir, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != "logs" {
		t.Errorf("Dir holds %v, want only logs", ents)
	}
	for _, name := range []string{"etcd-m0.log", "etcd-m1.log", "etcd-m2.log", "toxiproxy.log"} {
		if fi, err := os.Stat(filepath.Join(logDir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("log %s: %v", name, err)
		}
	}
	checkRefused(t, addrs)
	start = time.Now()
	waitGoroutines(t, before)
	t.Logf("all goroutines gone %v after Close", time.Since(start).Round(time.Microsecond))
	if _, err := c.Endpoints("c"); !errors.Is(err, serverkit.ErrClosed) {
		t.Errorf("ClientEndpoints after Close: %v", err)
	}
	if _, err := c.Leader(ctx); !errors.Is(err, serverkit.ErrClosed) {
		t.Errorf("Leader after Close: %v", err)
	}
}

// TestStartRetriesOnPortConflict occupies the last member's peer port on
// the first attempt: the first two members start, the third fails to bind,
// and Start must tear down and succeed on fresh ports.
func TestStartRetriesOnPortConflict(t *testing.T) {
	partest.Own(t, "TestOwnProcess")
	before := goroutines()
	var (
		blocker  net.Listener
		attempts int
		first    []int
	)
	testHooks.afterReserve = func(attempt int, ports []int) {
		attempts = attempt
		if attempt == 1 {
			first = append([]int(nil), ports...)
			l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(ports[len(ports)-1])))
			if err != nil {
				t.Errorf("occupying port: %v", err)
				return
			}
			blocker = l
		}
	}
	defer func() { testHooks.afterReserve = nil }()

	c, err := Start(context.Background(), Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if blocker == nil {
		t.Fatal("port was not occupied")
	}
	blocker.Close()
	if attempts != 2 {
		t.Fatalf("%d attempts, want 2", attempts)
	}
	// The members started in attempt 1 must have released their ports.
	var firstAddrs []string
	for _, p := range first[:len(first)-1] {
		firstAddrs = append(firstAddrs, net.JoinHostPort(host, strconv.Itoa(p)))
	}
	checkRefused(t, firstAddrs)
	cl, err := c.Client("a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cl.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waitGoroutines(t, before)
}

// TestFailedStartCleansUp fails Start after all members are running.
func TestFailedStartCleansUp(t *testing.T) {
	partest.Own(t, "TestOwnProcess")
	before := goroutines()
	dir := t.TempDir()
	var addrs []string
	testHooks.afterReserve = func(_ int, ports []int) {
		for _, p := range ports {
			addrs = append(addrs, net.JoinHostPort(host, strconv.Itoa(p)))
		}
	}
	testHooks.afterMembers = func() error { return errors.New("injected") }
	defer func() { testHooks.afterReserve, testHooks.afterMembers = nil, nil }()

	c, err := Start(context.Background(), Config{Dir: dir, LogDir: filepath.Join(dir, "logs")})
	if err == nil || c != nil {
		t.Fatalf("Start = %v, %v; want injected error", c, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != "logs" {
		t.Errorf("Dir holds %v, want only logs", ents)
	}
	checkRefused(t, addrs)
	waitGoroutines(t, before)

	if _, err := Start(context.Background(), Config{TickMs: 100, ElectionMs: 200}); err == nil {
		t.Fatal("Start accepted ElectionMs < 5*TickMs")
	}
}

func TestFiveMembers(t *testing.T) {
	t.Parallel()
	c, err := Start(context.Background(), Config{Members: 5, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	eps, err := c.Endpoints("a")
	if err != nil || len(eps) != 5 {
		t.Fatalf("endpoints %v, %v", eps, err)
	}
	if _, err := c.Leader(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestNoTerminalOutput runs a scenario in a child process and checks that
// nothing but the test framework's "PASS" reaches stdout or stderr: etcd,
// grpc and toxiproxy must log only to files.
func TestNoTerminalOutput(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperScenario$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LOCKTEST_CLUSTER_HELPER=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil || stderr.Len() != 0 || stdout.String() != "PASS\n" {
		t.Fatalf("child: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.Bytes(), stderr.Bytes())
	}
}

func TestHelperScenario(t *testing.T) {
	t.Parallel()
	if os.Getenv("LOCKTEST_CLUSTER_HELPER") == "" {
		t.Skip("helper for TestNoTerminalOutput")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Start(ctx, Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := c.Client("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	proxies, err := c.Links("a")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range proxies {
		if _, err := l.AddToxic("blackhole", "timeout", "", 1, toxiclient.Attributes{"timeout": 0}); err != nil {
			t.Fatal(err)
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	a.Get(short, "k")
	cancelShort()
	for _, l := range proxies {
		if err := links.RemoveCut(l, "blackhole"); err != nil {
			t.Fatal(err)
		}
		if _, err := l.AddToxic("slow", "bandwidth", "upstream", 1, toxiclient.Attributes{"rate": 1}); err != nil {
			t.Fatal(err)
		}
		if err := l.Disable(); err != nil {
			t.Fatal(err)
		}
	}
	short, cancelShort = context.WithTimeout(ctx, 300*time.Millisecond)
	a.Get(short, "k")
	cancelShort()
	for _, l := range proxies {
		if err := l.Enable(); err != nil {
			t.Fatal(err)
		}
		if err := l.RemoveToxic("slow"); err != nil {
			t.Fatal(err)
		}
	}
	polltest.Until(t, 10*time.Second, "client a recovers", func() bool {
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err := a.Get(short, "k")
		return err == nil
	})
	// Kill the leader hard while a client is attached, then close.
	l, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Members()[l].Etcd().Server.HardStop()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkStartClose reports the time from Start to a ready cluster with
// an agreed leader, and the time Close takes.
func BenchmarkStartClose(b *testing.B) {
	dir := b.TempDir()
	var start, stop time.Duration
	for b.Loop() {
		t0 := time.Now()
		c, err := Start(context.Background(), Config{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
		start += t1.Sub(t0)
		stop += time.Since(t1)
	}
	b.ReportMetric(float64(start.Microseconds())/1000/float64(b.N), "start-ms/op")
	b.ReportMetric(float64(stop.Microseconds())/1000/float64(b.N), "close-ms/op")
}

func get(ctx context.Context, t *testing.T, cl *clientv3.Client, key string) string {
	t.Helper()
	r, err := cl.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) != 1 {
		t.Fatalf("Get %s: %d kvs", key, len(r.Kvs))
	}
	return string(r.Kvs[0].Value)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// goroutines returns the stacks of all goroutines by ID.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	gs := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if id, _, ok := strings.Cut(strings.TrimPrefix(g, "goroutine "), " "); ok {
			gs[id] = g
		}
	}
	return gs
}

// waitGoroutines waits until every goroutine not in before has exited,
// but those with any of ignore in their stacks.
func waitGoroutines(t *testing.T, before map[string]string, ignore ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var extra []string
		for id, g := range goroutines() {
			if _, ok := before[id]; !ok && !slices.ContainsFunc(ignore, func(s string) bool { return strings.Contains(g, s) }) {
				extra = append(extra, g)
			}
		}
		if len(extra) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left:\n\n%s", len(extra), strings.Join(extra, "\n\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func checkRefused(t *testing.T, addrs []string) {
	t.Helper()
	for _, a := range addrs {
		conn, err := net.DialTimeout("tcp", a, time.Second)
		if err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections", a)
		} else if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial %s: %v, want connection refused", a, err)
		}
	}
}

func startEcho(t *testing.T) net.Listener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				io.Copy(conn, conn)
			}()
		}
	}()
	return l
}

func checkEcho(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	msg := []byte("hello")
	if _, err := conn.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(conn, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo through proxy: %q, %v", got, err)
	}
}
