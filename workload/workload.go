// Package workload runs locktest's clients: each contends for locks with a
// lock recipe (package lock) on the system under test, takes the grant's
// fencing token, and does a read-think-write critical section against the
// protected resource: the HTTP store (fenced or not) or a resource its
// backend keeps in the system itself (Keeper, as etcd's etcd-txn). The
// critical section is a counter (write value+1) or a sale from a stock of
// items (write sold+1 while any is left). Every acquire, release, read and
// write is recorded as it happens; when the run stops, one final read of
// each key records where the value ended.
//
// Each client has a clock of its own (package clock) that a nemesis can bump
// or make run fast or slow. Everything in the client that decides by time
// uses it: think times, operation timeouts, the clock guard, and its
// connection's own timing (a backend runs its lease keepalives on it). A
// nemesis can also pause a client (stop the world, its connection's
// background work too) and crash it (orphan its session without ending it;
// a new process number takes over). *Workload provides those controls.
//
// The workload names no lock service: what it needs of one is the small
// interfaces of backend.go (Backend, Conn, Grant, Observer, Keeper), which
// each backend implements in its folder. A backend's observer watches the
// lock keys from outside the clients' links and records, as nemesis info
// events, when the server really deleted a client's lock key
// ("key-deleted"); a client records when it learned that the session under
// a lock it holds was gone ("lease-lost").
//
// Where things are: workload.go, the clients as a whole; config.go, their
// configuration; controls.go, the controls a nemesis drives; stats.go, the
// figures of a run; client.go, one client's loop and what it records;
// control.go, pauses and crashes; section.go with counter.go and stock.go,
// what a critical section writes; store.go, the resource as a client
// reaches it; backend.go, the seam to the system under test.
package workload

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/resource"
)

// Recorder appends operations to the run's history.
type Recorder interface {
	Record(op histories.Op) (histories.Op, error)
}

// A Timeline is a Recorder that places an instant read from the host's
// wall clock in its history (histories.Recorder.At): an observer that
// reads a server's own clock records those times.
type Timeline interface {
	At(t time.Time) (int64, bool)
}

// Workload is a set of clients ready to run, and the controls a nemesis
// drives them with. Its methods are safe for concurrent use.
type Workload struct {
	cfg     Config
	section Section
	rec     Recorder
	clients []*client
	byName  map[string]*client
	next    atomic.Int64 // next process number
	// untokened counts the grants that carry no fencing token
	// (lock.Untokened): their count tells them apart.
	untokened atomic.Int64
	obs       Observer
	backend   Backend

	resourceAddr string

	ran         atomic.Bool
	interrupted atomic.Bool // Run's context ended before the clients were done
	closeOnce   sync.Once
}

// New connects cfg.Clients clients ("c0", "c1", ...) to b, each with its own
// connection and resource link (a proxy named "<client>-resource" in front
// of resourceAddr; with a resource b keeps itself there is none, and
// resourceAddr is ignored: pass ""), and starts the observer. Nothing is
// recorded and no lock recipe runs until Run. Close releases everything.
func New(ctx context.Context, cfg Config, b Backend, resourceAddr string, rec Recorder) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Guard == "" {
		cfg.Guard = GuardNone
	}
	if cfg.Recipe == nil {
		return nil, errors.New("workload: no recipe (Config.Recipe)")
	}
	cfg.Workload = cfg.workload()
	section, err := cfg.section()
	if err != nil {
		return nil, err
	}
	if kept(cfg.Resource) {
		if _, ok := b.(Keeper); !ok {
			return nil, fmt.Errorf("workload: the %s resource is kept in the system under test; %s keeps none", cfg.Resource, b.Name())
		}
	} else if resourceAddr == "" {
		return nil, errors.New("workload: no resource address (a resource the system keeps needs none: set Config.Resource)")
	}
	w := &Workload{
		cfg:          cfg,
		section:      section,
		rec:          rec,
		byName:       map[string]*client{},
		resourceAddr: resourceAddr,
		backend:      b,
	}
	w.next.Store(int64(cfg.Clients))
	for i := range cfg.Clients {
		c, err := newClient(w, i, resourceAddr)
		if err != nil {
			w.Close()
			return nil, err
		}
		w.clients = append(w.clients, c)
		w.byName[c.name] = c
	}
	if s, ok := cfg.Recipe.(lock.Starter); ok {
		if err := w.start(ctx, s); err != nil {
			w.Close()
			return nil, err
		}
	}
	obs, err := b.Observe(ctx, Keys{Prefix: cfg.Prefix, Locks: slices.Clone(cfg.Locks)}, rec)
	if err != nil {
		w.Close()
		return nil, err
	}
	w.obs = obs
	return w, nil
}

// start makes every client's first locker with a recipe that can fail for
// good (lock.Starter), all at once; the first client's error, if any, is
// the run's: the others most likely failed alike.
func (w *Workload) start(ctx context.Context, s lock.Starter) error {
	errs := make([]error, len(w.clients))
	var wg sync.WaitGroup
	for i, c := range w.clients {
		wg.Go(func() { errs[i] = c.start(ctx, s) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// kept says whether mode is a resource the backend keeps in the system
// under test, not the HTTP store.
func kept(mode resource.Mode) bool { return mode != "" && !mode.HTTP() }

// Run records the setup event, then lets the clients work until stop is
// closed; each then finishes the cycle it is in (so locks are released and
// the history ends quietly) and closes its locker. Then one final read of
// each key, by a fresh process over a direct link, records the value the
// run left (the invariant check needs it), and Run returns once the observer
// has seen every deletion up to then. Cancelling ctx interrupts everything
// at once: operations in flight are recorded as info. Run can be called
// once.
func (w *Workload) Run(ctx context.Context, stop <-chan struct{}) (Stats, error) {
	if !w.ran.CompareAndSwap(false, true) {
		return Stats{}, errors.New("workload: Run called twice")
	}
	if _, err := w.rec.Record(w.setupEvent()); err != nil {
		return Stats{}, err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total Stats
		errs  []error
	)
	stopStalls := make(chan struct{})
	var stalls sync.WaitGroup
	stalls.Go(func() { watchStalls(w.rec, stopStalls) })
	stalls.Go(func() { watchStarvation(w.rec, w.clients, stopStalls) })
	for _, c := range w.clients {
		wg.Go(func() {
			err := c.run(ctx, stop)
			st := c.finish()
			mu.Lock()
			defer mu.Unlock()
			total.add(st)
			if err != nil {
				errs = append(errs, fmt.Errorf("client %s: %w", c.name, err))
			}
		})
	}
	wg.Wait()
	close(stopStalls)
	stalls.Wait()
	w.interrupted.Store(ctx.Err() != nil)
	if err := w.finalReads(ctx); err != nil {
		errs = append(errs, err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	if err := w.obs.Sync(sctx); err == nil {
		w.obs.RecordObserved()
	}
	cancel()
	if err := w.obs.Err(); err != nil {
		errs = append(errs, err)
	}
	slices.Sort(total.acquireWaits)
	total.AcquireP50 = percentile(total.acquireWaits, 0.50)
	total.AcquireP70 = percentile(total.acquireWaits, 0.70)
	total.AcquireP90 = percentile(total.acquireWaits, 0.90)
	total.AcquireP99 = percentile(total.acquireWaits, 0.99)
	return total, errors.Join(errs...)
}

// Close stops the observer and closes every client's session (revoking its
// lease), etcd client and resource link. Then, if Run ran, it records the
// end event, the history's last: nothing records after it. It is
// idempotent; its error is the end event's.
func (w *Workload) Close() error {
	var err error
	w.closeOnce.Do(func() {
		if w.obs != nil {
			w.obs.Close()
		}
		for _, c := range w.clients {
			c.close()
		}
		if w.ran.Load() {
			err = w.recordEnd()
		}
	})
	return err
}

// recordEnd records that the run reached its end, and whether it was
// interrupted.
func (w *Workload) recordEnd() error {
	params := map[string]string{}
	if w.interrupted.Load() {
		params["interrupted"] = "true"
	}
	_, err := w.rec.Record(histories.Op{Type: histories.Info, F: histories.FEnd, Process: histories.Nemesis, Value: &histories.Value{Params: params}})
	return err
}

// setupEvent says what the run does.
func (w *Workload) setupEvent() histories.Op {
	params := map[string]string{
		// Close records the end: a history without it was cut short.
		"end":      histories.EndRecorded,
		"workload": w.cfg.Workload,
		"recipe":   w.cfg.Recipe.Name(),
		"resource": "http",
		"locks":    strings.Join(w.cfg.Locks, ","),
		"ttl":      strconv.Itoa(w.cfg.TTL),
		"backend":  w.backend.Name(),
		// Run watches for stalls of this process (watchStalls).
		histories.SetupStalls: histories.StallsWatched,
	}
	maps.Copy(params, w.section.Params())
	if d, ok := w.cfg.Recipe.(lock.Described); ok {
		maps.Copy(params, d.Params())
	}
	if _, ok := w.cfg.Recipe.(lock.Unfenced); ok {
		// The token is locktest's count, taken after the grant: the
		// lock promises no order of it (the contract check reads this).
		params["fencing_token"] = "false"
	}
	if kept(w.cfg.Resource) {
		params["resource"] = string(w.cfg.Resource)
	}
	return histories.Op{Type: histories.Info, F: histories.FSetup, Process: histories.Nemesis, Value: &histories.Value{Params: params}}
}

// finalReads reads each key once after the clients stopped, as a fresh
// process, over a direct link (faults on the clients' links do not block
// it), and records the reads.
func (w *Workload) finalReads(ctx context.Context) error {
	var st Store
	if kept(w.cfg.Resource) {
		s, err := w.backend.(Keeper).Store(nil, w.cfg.Resource, w.cfg.Prefix)
		if err != nil {
			return fmt.Errorf("workload: final reads: %w", err)
		}
		st = s
	} else {
		st = httpStore{resource.NewClient(w.resourceAddr)}
	}
	defer st.Close()
	keys := slices.Clone(w.cfg.Locks)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	p := histories.Process(w.next.Add(1) - 1)
	for _, key := range keys {
		if _, err := w.rec.Record(histories.Op{Type: histories.Invoke, F: histories.Read, Process: p, Key: key}); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		v, err := st.Read(rctx, key, 0)
		cancel()
		op := histories.Op{Type: histories.OK, F: histories.Read, Process: p, Key: key, Value: histories.ReadValue(v)}
		if err != nil {
			op = histories.Op{Type: histories.Fail, F: histories.Read, Process: p, Key: key, Error: err.Error()}
		}
		if _, err := w.rec.Record(op); err != nil {
			return err
		}
	}
	return nil
}
