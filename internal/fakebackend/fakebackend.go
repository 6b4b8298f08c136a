// Package fakebackend is a backend in memory, for the tests of
// locktest's own logic (the harness's, the CLI's: a run's error recorded,
// a dead lock judged, flags, printing, bookkeeping): a system of three
// members in name only, and no server; the lock under test is in the
// test's process (MemMutex, its one built-in, or the test's own). What
// real servers do is the backends' tests' to show, and the end-to-end
// tests of cmd/locktest run on them. Only tests import it.
package fakebackend

import (
	"context"
	"flag"
	"os"
	"sync"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/system"
	"github.com/locktest/locktest/workload"
)

// Set is the fake backend alone, as the harness and the CLI take their
// backends.
var Set = backend.NewSet(Backend)

// Backend is the fake: no flags of its own, no resource kept in its
// system, no scenario of its own; its one built-in recipe is MemMutex.
var Backend = backend.Backend{
	Name:    "fake",
	Recipes: []lock.Builtin{{Name: "mem-mutex", New: MemMutex, Doc: "a correct lock in the test's memory"}},
	Terms:   checker.LeaseTerms,
	Flags: func(*flag.FlagSet) func() (backend.Options, error) {
		return func() (backend.Options, error) { return fakeOptions{}, nil }
	},
	Defaults: func() backend.Options { return fakeOptions{} },
}

type fakeOptions struct{}

func (fakeOptions) Backend() string                      { return "fake" }
func (fakeOptions) Plan(backend.Plan) ([]string, error)  { return fakeSystem{}.MemberNames(), nil }
func (fakeOptions) Prototype(backend.Plan) system.System { return fakeSystem{} }
func (fakeOptions) Args(int) []string                    { return nil }
func (fakeOptions) Start(_ context.Context, p backend.Plan) (*backend.Started, error) {
	return &backend.Started{System: fakeSystem{logs: p.LogDir}, Workload: fakeWorkload{}, Close: func() error { return nil }}, nil
}

// Pausing is a second fake, for a test of what differs between backends
// (compare: a fault one system carries out and the other drops): its
// members, named p0, p1, p2, can be paused (in name only: nothing runs in
// them), and its "server" is a process of its own, the test's, whose CPU
// a run measures as server CPU. Its one built-in is MemMutex again, as
// mem-mutex-pausing.
var Pausing = backend.Backend{
	Name:    "fake-pausing",
	Recipes: []lock.Builtin{{Name: "mem-mutex-pausing", New: func() lock.Recipe { return memMutex("mem-mutex-pausing") }, Doc: "a correct lock in the test's memory"}},
	Terms:   checker.LeaseTerms,
	Flags: func(*flag.FlagSet) func() (backend.Options, error) {
		return func() (backend.Options, error) { return pausingOptions{}, nil }
	},
	Defaults: func() backend.Options { return pausingOptions{} },
}

// BothSet is the two fakes, Backend the default.
var BothSet = backend.NewSet(Backend, Pausing)

type pausingOptions struct{}

func (pausingOptions) Backend() string { return Pausing.Name }
func (pausingOptions) Plan(backend.Plan) ([]string, error) {
	return (&pausingSystem{}).MemberNames(), nil
}
func (pausingOptions) Prototype(backend.Plan) system.System { return &pausingSystem{} }
func (pausingOptions) Args(int) []string                    { return nil }
func (pausingOptions) Start(_ context.Context, p backend.Plan) (*backend.Started, error) {
	return &backend.Started{System: &pausingSystem{fakeSystem: fakeSystem{logs: p.LogDir}}, Workload: fakeWorkload{}, Close: func() error { return nil }}, nil
}

// pausingSystem offers pause-member, and server processes.
type pausingSystem struct {
	fakeSystem
	mu     sync.Mutex
	paused [3]bool
}

func (*pausingSystem) Describe() string      { return "fake-pausing, 3 members" }
func (*pausingSystem) MemberNames() []string { return []string{"p0", "p1", "p2"} }
func (*pausingSystem) ServerPids() []int     { return []int{os.Getpid()} }

func (s *pausingSystem) PauseMember(i int) error  { return s.setPaused(i, true) }
func (s *pausingSystem) ResumeMember(i int) error { return s.setPaused(i, false) }

func (s *pausingSystem) Paused(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused[i]
}

func (s *pausingSystem) setPaused(i int, p bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paused[i] = p
	return nil
}

// fakeSystem offers no capability: only faults at the clients strike it.
type fakeSystem struct{ logs string }

func (fakeSystem) Describe() string                   { return "fake, 3 members" }
func (fakeSystem) MemberNames() []string              { return []string{"m0", "m1", "m2"} }
func (fakeSystem) Endpoints(string) ([]string, error) { return nil, nil }
func (s fakeSystem) LogDir() string                   { return s.logs }

// fakeWorkload connects each client to nothing: its recipe's lock is in
// the test's process.
type fakeWorkload struct{}

func (fakeWorkload) Name() string                                     { return "fake" }
func (fakeWorkload) ResourceProxy(_, upstream string) (string, error) { return upstream, nil }
func (fakeWorkload) Connect(workload.Client) (workload.Conn, error)   { return fakeConn{}, nil }
func (fakeWorkload) Observe(context.Context, workload.Keys, workload.Recorder) (workload.Observer, error) {
	return fakeObserver{}, nil
}

type fakeConn struct{}

func (fakeConn) Env() any                                     { return nil }
func (fakeConn) Endpoints() []string                          { return nil }
func (fakeConn) Locker(lock.Locker, histories.Process) string { return "" }
func (fakeConn) CloseLocker(l lock.Locker) error              { return l.Close() }
func (fakeConn) Acquiring()                                   {}
func (fakeConn) Close() error                                 { return nil }
func (fakeConn) Granted(lock.Locker, lock.Held, histories.Process) workload.Grant {
	return fakeGrant{}
}

type fakeGrant struct{}

func (fakeGrant) Claim() workload.Claim { return workload.Claim{} }
func (fakeGrant) Releasing()            {}
func (fakeGrant) Released(error)        {}

// fakeObserver sees no deletion: nothing expires.
type fakeObserver struct{}

func (fakeObserver) Sync(context.Context) error { return nil }
func (fakeObserver) RecordObserved()            {}
func (fakeObserver) Err() error                 { return nil }
func (fakeObserver) Close()                     {}

// MemMutex is a correct lock in memory: one holder of each lock at a
// time, each grant's token above the last.
func MemMutex() lock.Recipe { return memMutex("mem-mutex") }

// memMutex is MemMutex under another name.
func memMutex(name string) lock.Recipe {
	m := &memLocks{held: map[string]bool{}, tokens: map[string]int64{}, changed: make(chan struct{})}
	return lock.RecipeFunc(name, func(context.Context, lock.Env) (lock.Locker, error) { return &memLocker{m: m}, nil })
}

type memLocks struct {
	mu      sync.Mutex
	held    map[string]bool
	tokens  map[string]int64
	changed chan struct{} // closed at each release
}

type memLocker struct {
	m    *memLocks
	mine []*memHeld
}

func (l *memLocker) Acquire(ctx context.Context, name string) (lock.Held, error) {
	m := l.m
	for {
		m.mu.Lock()
		if !m.held[name] {
			m.held[name] = true
			m.tokens[name]++
			h := &memHeld{m: m, name: name, token: m.tokens[name]}
			l.mine = append(l.mine, h)
			m.mu.Unlock()
			return h, nil
		}
		changed := m.changed
		m.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close lets go of what l holds, as a session's end would.
func (l *memLocker) Close() error {
	l.m.mu.Lock()
	mine := l.mine
	l.m.mu.Unlock()
	for _, h := range mine {
		h.Release(context.Background())
	}
	return nil
}

type memHeld struct {
	m     *memLocks
	name  string
	token int64
	done  bool
}

func (h *memHeld) Token() int64 { return h.token }

func (h *memHeld) Release(context.Context) error {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if !h.done && m.tokens[h.name] == h.token {
		h.done = true
		delete(m.held, h.name)
		close(m.changed)
		m.changed = make(chan struct{})
	}
	return nil
}
