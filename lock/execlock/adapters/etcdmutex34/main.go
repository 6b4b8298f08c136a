// Command etcdmutex34 is etcdmutex (../etcdmutex) on etcd 3.4.13's client,
// the real code of the concurrency.Mutex teams on 3.4 run: Mutex.Lock then
// did not check, after its wait, that its session was alive (etcd#11456,
// fixed in 3.5). It is a module of its own, pinning go.etcd.io/etcd
// v3.4.13 (as a pseudo-version: the 3.4 module has no /v3 path), which the
// main module's go test ./... skips; locktest runs it with go run -C. The
// token is the create revision of the client's key; lost is said when the
// session's lease is gone while a lock is held.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
	pb "go.etcd.io/etcd/etcdserver/etcdserverpb"
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
	Token    int64  `json:"token,omitempty"`
	Key      string `json:"key,omitempty"`
	Revision int64  `json:"revision,omitempty"`
	Error    string `json:"error,omitempty"`
	Definite bool   `json:"definite"`
}

// mu guards held and stdout: a lost event comes from a session's goroutine.
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
	cli    *clientv3.Client
	prefix string
	ttl    int
	s      *concurrency.Session
	held   map[string]*concurrency.Mutex
}

// session is the process's session, a new one once the last is gone.
func (c *client) session() (*concurrency.Session, error) {
	if c.s != nil {
		select {
		case <-c.s.Done():
		default:
			return c.s, nil
		}
	}
	s, err := concurrency.NewSession(c.cli, concurrency.WithTTL(c.ttl))
	if err != nil {
		return nil, err
	}
	c.s = s
	return s, nil
}

func (c *client) acquire(ctx context.Context, name string) reply {
	s, err := c.session()
	if err != nil {
		return reply{Error: "session: " + err.Error()}
	}
	m := concurrency.NewMutex(s, c.prefix+name)
	if err := m.Lock(ctx); err != nil {
		// 3.4's Lock has no ErrSessionExpired: an error may have left the
		// key behind.
		return reply{Error: err.Error()}
	}
	mu.Lock()
	c.held[name] = m
	mu.Unlock()
	go func() {
		<-s.Done()
		mu.Lock()
		defer mu.Unlock()
		if c.held[name] == m {
			emitLocked(map[string]string{"event": "lost", "lock": name})
		}
	}()
	// The revision of the response Lock decided on: the contract check's
	// promise that no lost lock is granted reads it.
	return reply{OK: true, Token: createRevision(m.IsOwner()), Key: m.Key(), Revision: m.Header().Revision}
}

func (c *client) release(ctx context.Context, name string) reply {
	mu.Lock()
	m := c.held[name]
	delete(c.held, name)
	mu.Unlock()
	if m == nil {
		return reply{Error: "not held: " + name, Definite: true}
	}
	if err := m.Unlock(ctx); err != nil {
		return reply{Error: err.Error()}
	}
	return reply{OK: true}
}

// createRevision is the revision IsOwner's comparison compares with: the
// client's key's create revision.
func createRevision(c clientv3.Cmp) int64 {
	if cr, ok := pb.Compare(c).TargetUnion.(*pb.Compare_CreateRevision); ok {
		return cr.CreateRevision
	}
	return 0
}

func main() {
	urls := strings.Split(os.Getenv("LOCKTEST_ETCD_URLS"), ",")
	ttl, err := strconv.Atoi(os.Getenv("LOCKTEST_TTL"))
	if err != nil || urls[0] == "" {
		fmt.Fprintln(os.Stderr, "etcdmutex34: needs LOCKTEST_ETCD_URLS and LOCKTEST_TTL (run it as exec:etcdmutex34 with --backend etcd)")
		os.Exit(2)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: 2 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdmutex34:", err)
		os.Exit(1)
	}
	c := &client{cli: cli, prefix: os.Getenv("LOCKTEST_PREFIX"), ttl: ttl, held: map[string]*concurrency.Mutex{}}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, "etcdmutex34: bad request:", err)
			os.Exit(2)
		}
		timeout := time.Duration(req.TimeoutMS) * time.Millisecond
		if timeout <= 0 {
			timeout = 5 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		var r reply
		switch req.Op {
		case "acquire":
			r = c.acquire(ctx, req.Lock)
		case "release":
			r = c.release(ctx, req.Lock)
		default:
			r = reply{Error: "unknown op " + req.Op, Definite: true}
		}
		cancel()
		r.ID = req.ID
		mu.Lock()
		emitLocked(r)
		mu.Unlock()
	}
	// stdin closed: locktest is done with this client (at the run's end,
	// or after an operation of unknown outcome). Closing the session
	// revokes its lease, so that no key of it, held or waiting, outlives
	// the process: the built-in recipe's locker does the same.
	if c.s != nil {
		c.s.Close()
	}
	os.Exit(0)
}
