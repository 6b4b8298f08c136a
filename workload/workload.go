// Package workload runs locktest's clients: each contends for etcd locks with
// concurrency.Mutex, takes the lock key's create revision as its fencing
// token, and does a read-think-write critical section against the protected
// resource. Every acquire, release, read and write is recorded as it happens.
//
// Each client has a clock of its own (package clock) that a nemesis can bump
// or make run fast or slow. Everything in the client that decides by time
// uses it: think times, operation timeouts, the clock guard, and the cadence
// of its lease keepalives, which a clock-driven lease (see clockLease) sends
// in place of clientv3's built-in keepalive, which runs on the host's clock.
// A nemesis can also pause a client (stop the world) and crash it (drop its
// session without revoking it; a new process number takes over). *Workload
// provides those controls.
//
// An observer watches the lock keys over direct (unproxied) connections to
// the members and records, as nemesis info events, when the server really
// deleted a client's lock key ("key-deleted") and when a client learned that
// the lease under a lock it holds was gone ("lease-lost").
package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/cluster"
	"github.com/locktest/locktest/histories"
)

// Cluster is what the workload needs from an etcd cluster: an etcd client and
// a link to the resource for each named client, each over links of its own so
// that faults can single one client out, and the members' direct client URLs
// for the observer. *cluster.Cluster is one.
type Cluster interface {
	Client(name string) (*clientv3.Client, error)
	Proxy(name, upstream string) (string, error)
	Members() []*cluster.Member
}

// Recorder appends operations to the run's history.
type Recorder interface {
	Record(op histories.Op) (histories.Op, error)
}

// Guards: what a client checks, just before each write, to convince itself
// that it still holds the lock.
const (
	// GuardNone trusts the lock: no check.
	GuardNone = "none"
	// GuardSession checks that the client's session is not Done, i.e. that
	// its keepalives have not found the lease gone (or gone unanswered past
	// the lease's end on the client's clock).
	GuardSession = "session"
	// GuardClock checks, on the client's own clock, that the lease still has
	// more than the guard margin to run: the lease ends TTL after the last
	// keepalive that the server answered was sent (or after the grant).
	GuardClock = "clock"
)

// Names of the nemesis info events the observer records.
const (
	// FKeyDeleted: the server deleted a client's lock key. Value targets
	// [client]; params key (lock name), lease (hex), revision (of the
	// delete), create_revision (the token of a holder), process (the
	// process that owned the lease) and by: "release" (the client's own
	// Unlock), "acquire" (Mutex.Lock's clean-up after a failed wait),
	// "revoke" (the client closed its session) or "expiry" (the lease ran
	// out on the server).
	FKeyDeleted = "key-deleted"
	// FLeaseLost: a client's session ended (its keepalives found the lease
	// gone, or its own clock said the lease was over) while it believed it
	// held a lock. Value targets [client]; params key, token, lease,
	// process.
	FLeaseLost = "lease-lost"
)

// Config describes the clients and their critical section.
type Config struct {
	Clients int
	// Locks are the lock names clients pick from; each is also the key of the
	// resource register it protects.
	Locks []string
	// Think is how long a holder may pause between read and write; each
	// critical section draws a time uniformly from [ThinkMin, ThinkMax]. It
	// is measured on the client's clock.
	ThinkMin, ThinkMax time.Duration
	// TTL is the session lease TTL in seconds.
	TTL int
	// OpTimeout bounds each acquire, read, write and release, on the
	// client's clock.
	OpTimeout time.Duration
	// Prefix is where lock keys live in etcd.
	Prefix string
	Seed   int64
	// Guard is what a client checks before each write: GuardNone (""
	// too), GuardSession or GuardClock. A client whose guard fails does not
	// write; it releases the lock and counts a refusal.
	Guard string
	// GuardMargin is the clock guard's safety margin: the lease must have
	// more than this left on the client's clock. 0 means TTL/5.
	GuardMargin time.Duration
}

// DefaultConfig is the configuration of a plain `locktest run`.
func DefaultConfig() Config {
	return Config{
		Clients:   5,
		Locks:     []string{"lock"},
		ThinkMin:  0,
		ThinkMax:  20 * time.Millisecond,
		TTL:       2,
		OpTimeout: 5 * time.Second,
		Prefix:    "/locktest/locks/",
		Guard:     GuardNone,
	}
}

// Validate reports the first thing wrong with c.
func (c Config) Validate() error {
	switch {
	case c.Clients < 1:
		return fmt.Errorf("clients must be at least 1, got %d", c.Clients)
	case len(c.Locks) < 1:
		return errors.New("at least one lock name is needed")
	case c.ThinkMin < 0 || c.ThinkMax < c.ThinkMin:
		return fmt.Errorf("think time range [%v, %v] is not valid", c.ThinkMin, c.ThinkMax)
	case c.TTL < 1:
		return fmt.Errorf("ttl must be at least 1 s, got %d", c.TTL)
	case c.OpTimeout <= 0:
		return fmt.Errorf("op timeout must be positive, got %v", c.OpTimeout)
	case c.Prefix == "":
		return errors.New("the lock key prefix must not be empty")
	}
	switch c.Guard {
	case "", GuardNone, GuardSession, GuardClock:
	default:
		return fmt.Errorf("unknown guard %q (want %s, %s or %s)", c.Guard, GuardNone, GuardSession, GuardClock)
	}
	if c.GuardMargin < 0 || c.GuardMargin >= time.Duration(c.TTL)*time.Second {
		return fmt.Errorf("guard margin must be in [0, ttl), got %v with ttl %d s", c.GuardMargin, c.TTL)
	}
	for _, l := range c.Locks {
		if l == "" {
			return errors.New("lock names must not be empty")
		}
	}
	return nil
}

// margin is the clock guard's effective margin.
func (c Config) margin() time.Duration {
	if c.GuardMargin > 0 {
		return c.GuardMargin
	}
	return time.Duration(c.TTL) * time.Second / 5
}

// Stats summarises what the clients did.
type Stats struct {
	Acquisitions int           `json:"acquisitions"`
	Operations   int           `json:"operations"`
	Unknown      int           `json:"unknown"`
	AcquireP50   time.Duration `json:"acquire_p50_ns"`
	AcquireP99   time.Duration `json:"acquire_p99_ns"`
	// GuardRefusals counts writes a client skipped because its guard
	// failed.
	GuardRefusals int `json:"guard_refusals"`
	// LeasesLost counts lease-lost events: a session ended under a lock its
	// client believed it held.
	LeasesLost int `json:"leases_lost"`
	// Crashes counts crashes that took effect.
	Crashes      int `json:"crashes"`
	acquireWaits []time.Duration
}

func (s *Stats) add(o Stats) {
	s.Acquisitions += o.Acquisitions
	s.Operations += o.Operations
	s.Unknown += o.Unknown
	s.GuardRefusals += o.GuardRefusals
	s.LeasesLost += o.LeasesLost
	s.Crashes += o.Crashes
	s.acquireWaits = append(s.acquireWaits, o.acquireWaits...)
}

// Workload is a set of clients ready to run, and the controls a nemesis
// drives them with. Its methods are safe for concurrent use.
type Workload struct {
	cfg     Config
	rec     Recorder
	clients []*client
	byName  map[string]*client
	next    atomic.Int64 // next process number
	obs     *observer

	mu       sync.Mutex
	owners   map[clientv3.LeaseID]leaseOwner
	releases map[keyRev]bool // lock keys their owner is deleting in a release
	revoking map[clientv3.LeaseID]bool

	ran       atomic.Bool
	closeOnce sync.Once

	// startDelay holds clients back at the start of Run (tests).
	startDelay map[string]time.Duration
}

// keyRev is one incarnation of an etcd key.
type keyRev struct {
	key string
	rev int64
}

type leaseOwner struct {
	client  string
	process histories.Process
}

// New connects cfg.Clients clients ("c0", "c1", ...) to cl, each with its own
// etcd client and resource link (a proxy named "<client>-resource" in front
// of resourceAddr), and starts the observer. Nothing is recorded and no
// session exists until Run. Close releases everything.
func New(ctx context.Context, cfg Config, cl Cluster, resourceAddr string, rec Recorder) (*Workload, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Guard == "" {
		cfg.Guard = GuardNone
	}
	w := &Workload{
		cfg:      cfg,
		rec:      rec,
		byName:   map[string]*client{},
		owners:   map[clientv3.LeaseID]leaseOwner{},
		releases: map[keyRev]bool{},
		revoking: map[clientv3.LeaseID]bool{},
	}
	w.next.Store(int64(cfg.Clients))
	for i := range cfg.Clients {
		c, err := newClient(w, i, cl, resourceAddr)
		if err != nil {
			w.Close()
			return nil, err
		}
		w.clients = append(w.clients, c)
		w.byName[c.name] = c
	}
	var eps []string
	for _, m := range cl.Members() {
		eps = append(eps, m.ClientURL)
	}
	obs, err := startObserver(ctx, w, eps)
	if err != nil {
		w.Close()
		return nil, err
	}
	w.obs = obs
	return w, nil
}

// Run lets the clients work until stop is closed; each then finishes the
// cycle it is in (so locks are released and the history ends quietly), closes
// its session, and Run returns once the observer has seen every deletion up
// to then. Cancelling ctx interrupts everything at once: operations in flight
// are recorded as info. Run can be called once.
func (w *Workload) Run(ctx context.Context, stop <-chan struct{}) (Stats, error) {
	if !w.ran.CompareAndSwap(false, true) {
		return Stats{}, errors.New("workload: Run called twice")
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total Stats
		errs  []error
	)
	for _, c := range w.clients {
		wg.Go(func() {
			if d := w.startDelay[c.name]; d > 0 {
				select {
				case <-time.After(d):
				case <-stop:
				case <-ctx.Done():
				}
			}
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
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	w.obs.sync(sctx)
	cancel()
	if err := w.obs.error(); err != nil {
		errs = append(errs, err)
	}
	slices.Sort(total.acquireWaits)
	total.AcquireP50 = percentile(total.acquireWaits, 0.50)
	total.AcquireP99 = percentile(total.acquireWaits, 0.99)
	return total, errors.Join(errs...)
}

// Close stops the observer and closes every client's session (revoking its
// lease), etcd client and resource link. It is idempotent.
func (w *Workload) Close() error {
	w.closeOnce.Do(func() {
		if w.obs != nil {
			w.obs.close()
		}
		for _, c := range w.clients {
			c.close()
		}
	})
	return nil
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}

// Names returns the clients' names, "c0", "c1", ...
func (w *Workload) Names() []string {
	names := make([]string, len(w.clients))
	for i, c := range w.clients {
		names[i] = c.name
	}
	return names
}

// Holder returns the client that believes it holds lock key (any lock if key
// is ""): one whose acquire succeeded and whose release has not completed,
// whether or not its session has ended since. If several believe so (a lease
// expired under one of them), it returns the one holding the newest grant.
func (w *Workload) Holder(key string) (string, bool) {
	best, tok := "", int64(-1)
	for _, c := range w.clients {
		c.mu.Lock()
		h := c.held
		c.mu.Unlock()
		if h != nil && (key == "" || h.key == key) && h.token > tok {
			best, tok = c.name, h.token
		}
	}
	return best, best != ""
}

// Pause stops client's world for d of host time: its own goroutine blocks at
// its next pause point (before each operation, after its think time, between
// its guard and its write) and its keepalive loop stops sending, until d has
// passed since the pause began; operations already in flight complete. With
// beforeWrite the pause is armed instead and begins when the client next
// passes its guard, right before the write. Pause returns at once; a pause
// while paused extends it.
func (w *Workload) Pause(client string, d time.Duration, beforeWrite bool) error {
	c, err := w.client(client)
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("workload: pause of %v: must be positive", d)
	}
	if beforeWrite {
		c.ctl.arm(d)
	} else {
		c.ctl.pause(d)
	}
	return nil
}

// BumpClock jumps client's clock by d.
func (w *Workload) BumpClock(client string, d time.Duration) {
	if c, ok := w.byName[client]; ok {
		c.clock.Bump(d)
	}
}

// SetClockRate makes client's clock run at rate (1 normal, 0.5 half speed).
func (w *Workload) SetClockRate(client string, rate float64) {
	if c, ok := w.byName[client]; ok {
		c.clock.SetRate(rate)
	}
}

// ResetClock puts client's clock back on host time at rate 1.
func (w *Workload) ResetClock(client string) {
	if c, ok := w.byName[client]; ok {
		c.clock.Reset()
	}
}

// Clock returns client's clock.
func (w *Workload) Clock(client string) (*clock.Clock, bool) {
	c, ok := w.byName[client]
	if !ok {
		return nil, false
	}
	return c.clock, true
}

// Crash crashes client at its next pause point (at once if it is paused or
// thinking): the operation in flight, if any, is recorded as info whatever
// its result, its session is orphaned (keepalives stop, the lease is not
// revoked, so a lock key it holds stays until the lease expires), and it goes
// on as a new process with a new session.
func (w *Workload) Crash(client string) error {
	c, err := w.client(client)
	if err != nil {
		return err
	}
	c.ctl.crash()
	return nil
}

// Lease returns the lease of client's current session.
func (w *Workload) Lease(client string) (clientv3.LeaseID, bool) {
	c, ok := w.byName[client]
	if !ok {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == nil {
		return 0, false
	}
	return c.session.Lease(), true
}

func (w *Workload) client(name string) (*client, error) {
	c, ok := w.byName[name]
	if !ok {
		return nil, fmt.Errorf("workload: no client %q", name)
	}
	return c, nil
}

// registerLease notes which client process owns lease, for the observer.
func (w *Workload) registerLease(id clientv3.LeaseID, client string, p histories.Process) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.owners[id] = leaseOwner{client, p}
}

// intendRelease notes that the owner of etcd key, created at revision rev
// (its fencing token), is about to delete it in a release.
func (w *Workload) intendRelease(key string, rev int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.releases[keyRev{key, rev}] = true
}

// intendRevoke notes that the owner of lease is about to revoke it.
func (w *Workload) intendRevoke(id clientv3.LeaseID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.revoking[id] = true
}

// deleted says who deleted etcd key, created at revision rev and attached to
// lease: its owner in a release, its owner otherwise (Mutex.Lock's clean-up
// of its key after a failed wait: the lease is still alive), its owner by
// revoking the lease, or the server when the lease expired. alive reports
// whether the lease exists after the deletion (nil: unknown).
func (w *Workload) deleted(key string, rev int64, lease clientv3.LeaseID, alive *bool) (leaseOwner, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	owner := w.owners[lease]
	k := keyRev{key, rev}
	switch {
	case w.releases[k]:
		delete(w.releases, k)
		return owner, "release"
	case alive != nil && *alive:
		return owner, "acquire"
	case w.revoking[lease]:
		return owner, "revoke"
	}
	return owner, "expiry"
}
