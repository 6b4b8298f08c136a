package redisserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktest/locktest/backend/serverkit"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/internal/proctest"
)

// start starts a deployment for one test, with a minute for the test.
func start(t *testing.T, topo Topology) (context.Context, *Deployment) {
	t.Helper()
	bin := ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	d, err := Start(ctx, Config{Binary: bin, Topology: topo, Dir: dir, LogDir: filepath.Join(dir, "logs")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "logs", "redis-*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", filepath.Base(l), b)
			}
		}
	})
	return ctx, d
}

// client is a go-redis client of one proxied endpoint.
func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(adminOptions(addr))
	t.Cleanup(func() { c.Close() })
	return c
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing"), "no such file"},
		{script("noexec", "exit 0", 0o644), "not an executable"},
		{script("other", "echo 'other 1.0'", 0o755), `not redis-server: --version said "other 1.0"`},
		{script("old", "echo 'Redis server v=6.2.14 sha=00000000:0 malloc=libc bits=64'", 0o755), "6.2.14 at " + dir + "/old is too old"},
		{script("fails", "exit 1", 0o755), "--version failed"},
	} {
		_, err := Find(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "apt-get install redis-server") || strings.Contains(err.Error(), "\n") {
			t.Errorf("Find(%s) = %v; want one line with %q and how to install", tc.path, err, tc.want)
		}
	}
	b, err := Find(script("new", "echo 'Redis server v=7.2.4 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64'", 0o755))
	if err != nil || b.Version != "7.2.4" {
		t.Errorf("Find of a Redis 7.2.4: %+v, %v", b, err)
	}
	t.Setenv("PATH", dir)
	if _, err := Find(""); err == nil || !strings.Contains(err.Error(), "not found on PATH") {
		t.Errorf("Find with no redis-server on PATH: %v", err)
	}
}

// Each topology starts ready, serves over a client's proxies, and leaves
// nothing behind when it closes.
func TestTopologies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		topo               Topology
		servers, sentinels int
	}{
		{Single, 1, 0}, {Replicated, 2, 3}, {Independent(5), 5, 0},
	} {
		t.Run(tc.topo.String(), func(t *testing.T) {
			bin := ForTest(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dir := t.TempDir()
			began := time.Now()
			d, err := Start(ctx, Config{Binary: bin, Topology: tc.topo, Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			started := time.Since(began)
			defer d.Close()
			if len(d.Servers()) != tc.servers || len(d.Sentinels()) != tc.sentinels {
				t.Fatalf("%d servers and %d sentinels, want %d and %d", len(d.Servers()), len(d.Sentinels()), tc.servers, tc.sentinels)
			}
			eps, err := d.Endpoints("c1")
			if err != nil {
				t.Fatal(err)
			}
			for i, ep := range eps {
				err := client(t, ep).Set(ctx, "k", "v", 0).Err()
				if tc.topo == Replicated && i == 1 {
					if err == nil || !strings.HasPrefix(err.Error(), "READONLY") {
						t.Fatalf("SET on the replica: %v, want READONLY", err)
					}
				} else if err != nil {
					t.Fatalf("SET through %s: %v", LinkName("c1", d.Servers()[i]), err)
				}
			}
			if tc.topo == Replicated {
				if m, err := d.Master(ctx); err != nil || m != 0 {
					t.Fatalf("Master = %d, %v; want 0", m, err)
				}
			}
			ls, err := d.Links("c1")
			if err != nil || len(ls) != tc.servers+tc.sentinels || ls[0].Name != "c1->r0" {
				t.Fatalf("Links(c1) = %v, %v", ls, err)
			}
			var pids []int
			for _, s := range append(d.Servers(), d.Sentinels()...) {
				pids = append(pids, s.Pid())
				if b, err := os.ReadFile(filepath.Join(dir, "redis-"+s.Name+".log")); err != nil || len(b) == 0 {
					t.Errorf("%s's log: %d bytes, %v", s.Name, len(b), err)
				}
			}
			dataDir := d.Dir

			began = time.Now()
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			closed := time.Since(began)
			t.Logf("%s: started in %v, closed in %v", tc.topo, started.Round(time.Millisecond), closed.Round(time.Millisecond))
			for _, pid := range pids {
				if proc.Alive(pid) {
					t.Errorf("process %d is alive after Close", pid)
				}
			}
			if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
				t.Errorf("data dir %s after Close: %v", dataDir, err)
			}
			if err := d.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if _, err := d.Endpoints("c2"); !errors.Is(err, serverkit.ErrClosed) {
				t.Errorf("Endpoints after Close: %v", err)
			}
		})
	}
}

// TestSentinelsStartOnceTheServersAnswer: no Sentinel starts before the
// master accepts connections and the replica has synced. A Sentinel counts
// the master's silence from its own start; started beside the servers on a
// loaded machine, the Sentinels declared the master down before it
// listened and failed it over before any test began.
func TestSentinelsStartOnceTheServersAnswer(t *testing.T) {
	t.Parallel()
	_, d := start(t, Replicated)
	logs := filepath.Join(filepath.Dir(d.Dir), "logs")
	ready := logTime(t, filepath.Join(logs, "redis-r0.log"), "Ready to accept connections")
	synced := logTime(t, filepath.Join(logs, "redis-r1.log"), "MASTER <-> REPLICA sync: Finished with success")
	for _, s := range d.Sentinels() {
		began := logTime(t, filepath.Join(logs, "redis-"+s.Name+".log"), "Redis is starting")
		if began.Before(ready) || began.Before(synced) {
			t.Errorf("%s started at %s, the master was ready at %s, the replica synced at %s",
				s.Name, began.Format(redisLogTime), ready.Format(redisLogTime), synced.Format(redisLogTime))
		}
	}
}

// redisLogTime is how redis-server stamps its log lines.
const redisLogTime = "2 Jan 2006 15:04:05.000"

// logTime is the time of the first line of the log at path that holds what.
func logTime(t *testing.T, path, what string) time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		// 17368:M 25 Nov 2026 01:19:34.414 * Ready to accept connections
		f := strings.Fields(line)
		if !strings.Contains(line, what) || len(f) < 5 {
			continue
		}
		ts, err := time.Parse(redisLogTime, strings.Join(f[1:5], " "))
		if err != nil {
			t.Fatalf("%s: %q: %v", filepath.Base(path), line, err)
		}
		return ts
	}
	t.Fatalf("%s has no line with %q", filepath.Base(path), what)
	return time.Time{}
}

// TestNothingOutlivesParent kills a parent (this test binary run again)
// that started a Replicated deployment with SIGKILL, and checks that none of
// its redis-server processes is left.
func TestNothingOutlivesParent(t *testing.T) {
	t.Parallel()
	if os.Getenv("REDISSERVER_TEST_PARENT") == "1" {
		d, err := Start(context.Background(), Config{Topology: Replicated, Dir: os.Getenv("REDISSERVER_TEST_DIR")})
		if err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n")
			os.Exit(3)
		}
		var pids []string
		for _, s := range append(d.Servers(), d.Sentinels()...) {
			pids = append(pids, strconv.Itoa(s.Pid()))
		}
		os.Stdout.WriteString(strings.Join(pids, " ") + "\n")
		select {}
	}
	ForTest(t)
	proctest.KillParent(t, "TestNothingOutlivesParent", 5, "REDISSERVER_TEST_PARENT=1", "REDISSERVER_TEST_DIR="+t.TempDir())
}
