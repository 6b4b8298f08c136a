// Command gozklock is the lock of go-zookeeper's own package, zk.Lock of
// github.com/go-zookeeper/zk v1.0.4 (the module's latest release, pinned by
// the main module's go.mod), through locktest's exec protocol: one session
// (zk.Conn) per process, a zk.NewLock per acquire, Lock and Unlock as the
// package documents them.
//
// zk.Lock exposes no node, so a grant tells neither a token nor a key (the
// lock's own znode is no claim: it outlives every holder). Lock takes no
// deadline: an acquire that outlives its timeout is answered as of
// unknown outcome (the Lock still runs, and unlocks once it returns).
// A failed Lock is answered as the library says it: not acquired (it keeps
// no node to unlock), even where the node it created stays in line
// (samuel/go-zookeeper#229: see docs/findings.md).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

type request struct {
	ID        int64  `json:"id"`
	Op        string `json:"op"`
	Lock      string `json:"lock"`
	TimeoutMS int64  `json:"timeout_ms"`
}

type reply struct {
	ID       int64  `json:"id"`
	OK       bool   `json:"ok"`
	Error    string `json:"error,omitempty"`
	Definite bool   `json:"definite"`
}

// mu guards held and stdout: a lost event comes from the session's
// event goroutine.
var (
	mu     sync.Mutex
	stdout = bufio.NewWriter(os.Stdout)
)

func emitLocked(v any) {
	b, _ := json.Marshal(v)
	stdout.Write(append(b, '\n'))
	stdout.Flush()
}

type client struct {
	conn   *zk.Conn
	prefix string
	held   map[string]*zk.Lock
}

func (c *client) path(name string) string {
	return strings.TrimSuffix(c.prefix, "/") + "/" + name
}

func (c *client) acquire(name string, timeout time.Duration) reply {
	l := zk.NewLock(c.conn, c.path(name), zk.WorldACL(zk.PermAll))
	done := make(chan error, 1)
	go func() { done <- l.Lock() }()
	select {
	case err := <-done:
		if err != nil {
			// The library says the lock is not held: its Lock keeps no
			// node to unlock, and the caller can only try again.
			return reply{Error: err.Error(), Definite: true}
		}
	case <-time.After(timeout):
		// Lock cannot be cancelled: the abandoned attempt keeps its place
		// in line, and gives the lock back as soon as it gets it, so that
		// this process's next acquire is not queued behind it for good.
		go func() {
			if <-done == nil {
				l.Unlock()
			}
		}()
		return reply{Error: "Lock did not return within " + timeout.String()}
	}
	mu.Lock()
	c.held[name] = l
	mu.Unlock()
	return reply{OK: true}
}

func (c *client) release(name string) reply {
	mu.Lock()
	l := c.held[name]
	delete(c.held, name)
	mu.Unlock()
	if l == nil {
		return reply{Error: "not held: " + name, Definite: true}
	}
	if err := l.Unlock(); err != nil {
		return reply{Error: err.Error()}
	}
	return reply{OK: true}
}

// watch says lost for every held lock once the session expires:
// go-zookeeper then opens a new session on the same Conn, and the old
// session's nodes are gone.
func (c *client) watch(events <-chan zk.Event) {
	for ev := range events {
		if ev.State != zk.StateExpired {
			continue
		}
		mu.Lock()
		for name := range c.held {
			emitLocked(map[string]string{"event": "lost", "lock": name})
			delete(c.held, name)
		}
		mu.Unlock()
	}
}

func main() {
	servers := strings.Split(os.Getenv("LOCKTEST_ENDPOINTS"), ",")
	ttl, err := strconv.Atoi(os.Getenv("LOCKTEST_TTL"))
	if err != nil || servers[0] == "" {
		fmt.Fprintln(os.Stderr, "gozklock: needs LOCKTEST_ENDPOINTS and LOCKTEST_TTL (run it with --backend zookeeper)")
		os.Exit(2)
	}
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "gozklock: takes no arguments, got", os.Args[1:])
		os.Exit(2)
	}
	conn, events, err := zk.Connect(servers, time.Duration(ttl)*time.Second, zk.WithLogger(stderrLogger{}))
	if err != nil {
		fmt.Fprintln(os.Stderr, "gozklock:", err)
		os.Exit(1)
	}
	c := &client{conn: conn, prefix: os.Getenv("LOCKTEST_PREFIX"), held: map[string]*zk.Lock{}}
	go c.watch(events)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, "gozklock: bad request:", err)
			os.Exit(2)
		}
		timeout := time.Duration(req.TimeoutMS) * time.Millisecond
		if timeout <= 0 {
			timeout = 5 * time.Second
		}
		var r reply
		switch req.Op {
		case "acquire":
			r = c.acquire(req.Lock, timeout)
		case "release":
			r = c.release(req.Lock)
		default:
			r = reply{Error: "unknown op " + req.Op, Definite: true}
		}
		r.ID = req.ID
		mu.Lock()
		emitLocked(r)
		mu.Unlock()
	}
	// stdin closed: locktest is done with this client. Closing the
	// session deletes its nodes, held or waiting.
	conn.Close()
	os.Exit(0)
}

// stderrLogger sends go-zookeeper's log to stderr (locktest keeps it in the
// run directory), never stdout, which carries the protocol.
type stderrLogger struct{}

func (stderrLogger) Printf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gozklock: "+format+"\n", args...)
}
