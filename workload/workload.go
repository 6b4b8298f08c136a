// Package workload runs locktest's clients: each contends for etcd locks
// with a lock recipe (package lock; concurrency.Mutex by default), takes the
// grant's fencing token, and does a read-think-write critical section
// against the protected resource: the HTTP store (fenced or not) or a value
// in etcd written by a Txn guarded by the lock (etcd-txn). The critical
// section is a counter (write value+1) or a sale from a stock of items
// (write sold+1 while any is left). Every acquire, release, read and write
// is recorded as it happens; when the run stops, one final read of each key
// records where the value ended.
//
// Each client has a clock of its own (package clock) that a nemesis can bump
// or make run fast or slow. Everything in the client that decides by time
// uses it: think times, operation timeouts, the clock guard, and the cadence
// of its lease keepalives, which a clock-driven lease (see clockLease) sends
// in place of clientv3's built-in keepalive, which runs on the host's clock.
// A nemesis can also pause a client (stop the world) and crash it (drop its
// session without revoking it; a new process number takes over). *Workload
// provides those controls. A recipe's lease is the client's clock-driven one
// when the recipe grants it through the client (sessions do).
//
// An observer watches the lock keys over direct (unproxied) connections to
// the members and records, as nemesis info events, when the server really
// deleted a client's lock key ("key-deleted") and when a client learned that
// the lease under a lock it holds was gone ("lease-lost").
//
// Where things are: workload.go, the clients as a whole, the controls a
// nemesis drives and who deleted a key; client.go, one client's loop and
// what it records; section.go with counter.go and stock.go, what a
// critical section writes; store.go, the resource as a client reaches it;
// observer.go with etcdobserver.go, the server's truth; lease.go, the
// clock-driven lease; revisions.go, the revisions a lock read; control.go,
// pauses and crashes.
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

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/lock/etcdlock"
	"github.com/locktest/locktest/lock/recipes"
	"github.com/locktest/locktest/resource"
)

// Cluster is what the workload needs from an etcd cluster: an etcd client and
// a link to the resource for each named client, each over links of its own so
// that faults can single one client out, and clients dialled directly to the
// members for the observer and the final reads. *cluster.Cluster is one.
type Cluster interface {
	Client(name string) (*clientv3.Client, error)
	ResourceProxy(client, upstream string) (string, error)
	MemberNames() []string
	DirectClient(members ...int) (*clientv3.Client, error)
}

// Backend is the system under test as the workload reaches it: each
// client's own connection to it (lock.Env.Conn, over the client's own
// links), its link to the resource, and the observer of the server's truth
// about lock keys. Etcd and Redis make one, each in a file of its own
// (etcdbackend.go, redisbackend.go).
type Backend interface {
	// Name names the backend in the history's setup event: "etcd",
	// "redis".
	Name() string
	// ResourceProxy returns the address of client's own link to the
	// resource at upstream.
	ResourceProxy(client, upstream string) (string, error)
	// connect makes c's connection over c's own links.
	connect(c *client) (conn, error)
	// observe starts the backend's Observer.
	observe(ctx context.Context, w *Workload) (Observer, error)
}

// conn is one client's connection, as its backend made it.
type conn struct {
	env   any          // lock.Env.Conn
	close func() error // closes it
	// txn is the etcd-txn resource over the client's links; nil for a
	// backend that has none.
	txn store
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
	// GuardClock checks, on the client's own clock, that the time elapsed
	// since the lock was granted is below the TTL minus the guard margin.
	GuardClock = "clock"
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
	// SlowShare of the critical sections are slow, as sections that call
	// another service are: they think a time drawn uniformly from
	// [SlowMin, SlowMax] instead (both zero: SlowRange's default). A lease fault only does harm to a holder with work ahead of
	// it, so the default run has such sections.
	SlowShare        float64
	SlowMin, SlowMax time.Duration
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
	// Recipe is the lock under test; nil means etcdlock.Mutex(). Results record
	// its name, not the value.
	Recipe lock.Recipe `json:"-"`
	// Workload is what a critical section does: one of Workloads
	// (histories.WorkloadCounter, "" too, or histories.WorkloadStock).
	Workload string
	// Items is the stock workload's inventory per key; 0 means
	// DefaultItems.
	Items int
	// Resource is resource.EtcdTxn to keep the protected values in etcd
	// (New then takes no resource address); anything else ("" too) means
	// the HTTP store at the address New is given.
	Resource resource.Mode
}

// DefaultConfig is the configuration of a plain `locktest run`.
func DefaultConfig() Config {
	return Config{
		Clients:   5,
		Locks:     []string{"lock"},
		ThinkMin:  0,
		ThinkMax:  20 * time.Millisecond,
		SlowShare: DefaultSlowShare,
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
	case c.SlowShare < 0 || c.SlowShare > 1:
		return fmt.Errorf("slow share %v is not between 0 and 1", c.SlowShare)
	case c.SlowMin < 0 || c.SlowMax < c.SlowMin:
		return fmt.Errorf("slow think range [%v, %v] is not valid", c.SlowMin, c.SlowMax)
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
	if _, err := c.section(); err != nil {
		return err
	}
	if c.Items < 0 {
		return fmt.Errorf("items must not be negative, got %d", c.Items)
	}
	if c.Resource != "" {
		if _, err := resource.ParseMode(string(c.Resource)); err != nil {
			return err
		}
	}
	return nil
}

// workload is the effective workload name.
func (c Config) workload() string {
	if c.Workload == "" {
		return histories.WorkloadCounter
	}
	return c.Workload
}

// margin is the clock guard's effective margin.
// DefaultSlowShare is the share of slow critical sections by default.
const DefaultSlowShare = 0.1

// SlowRange is the think time range of slow sections. By default, one to
// two TTLs (long enough that a lease fault striking as one begins does
// harm); with the clock guard, a quarter of the TTL to what
// the guard lets write (a team that checks its lease's time left keeps its
// sections inside the lease).
func (c Config) SlowRange() (time.Duration, time.Duration) {
	if c.SlowMin == 0 && c.SlowMax == 0 {
		ttl := time.Duration(c.TTL) * time.Second
		if c.Guard == GuardClock {
			return ttl / 4, ttl - c.margin()
		}
		return ttl, 2 * ttl
	}
	return c.SlowMin, c.SlowMax
}

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
	AcquireP70   time.Duration `json:"acquire_p70_ns"`
	AcquireP90   time.Duration `json:"acquire_p90_ns"`
	AcquireP99   time.Duration `json:"acquire_p99_ns"`
	// GuardRefusals counts writes a client skipped because its guard
	// failed.
	GuardRefusals int `json:"guard_refusals"`
	// LeasesLost counts lease-lost events: a session ended under a lock its
	// client believed it held.
	LeasesLost int `json:"leases_lost"`
	// Crashes counts crashes that took effect.
	Crashes int `json:"crashes"`
	// Sales counts the stock workload's accepted writes (each a sale), and
	// SoldOut its critical sections that found no stock left.
	Sales        int `json:"sales,omitempty"`
	SoldOut      int `json:"sold_out,omitempty"`
	acquireWaits []time.Duration
}

func (s *Stats) add(o Stats) {
	s.Acquisitions += o.Acquisitions
	s.Operations += o.Operations
	s.Unknown += o.Unknown
	s.GuardRefusals += o.GuardRefusals
	s.LeasesLost += o.LeasesLost
	s.Crashes += o.Crashes
	s.Sales += o.Sales
	s.SoldOut += o.SoldOut
	s.acquireWaits = append(s.acquireWaits, o.acquireWaits...)
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
	obs     Observer
	backend Backend

	// values attributes deletions of keys whose grants tell their values
	// (redislock.Valued).
	values *grantValues

	mu       sync.Mutex
	owners   map[clientv3.LeaseID]leaseOwner
	releases map[keyRev]release // lock keys their owner is deleting in a release
	revoking map[clientv3.LeaseID]bool

	resourceAddr string

	ran         atomic.Bool
	interrupted atomic.Bool // Run's context ended before the clients were done
	closeOnce   sync.Once

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

// New connects cfg.Clients clients ("c0", "c1", ...) to b, each with its own
// connection and resource link (a proxy named "<client>-resource" in front
// of resourceAddr; with cfg.Resource resource.EtcdTxn there is none, and
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
		cfg.Recipe = etcdlock.Mutex()
	}
	cfg.Workload = cfg.workload()
	section, err := cfg.section()
	if err != nil {
		return nil, err
	}
	if _, etcd := b.(etcdBackend); cfg.Resource == resource.EtcdTxn && !etcd {
		return nil, fmt.Errorf("workload: the %s resource keeps its values in etcd; the system under test is %s", resource.EtcdTxn, b.Name())
	}
	if cfg.Resource != resource.EtcdTxn && resourceAddr == "" {
		return nil, errors.New("workload: no resource address (the etcd-txn resource needs none: set Config.Resource)")
	}
	w := &Workload{
		cfg:          cfg,
		section:      section,
		rec:          rec,
		byName:       map[string]*client{},
		owners:       map[clientv3.LeaseID]leaseOwner{},
		releases:     map[keyRev]release{},
		revoking:     map[clientv3.LeaseID]bool{},
		resourceAddr: resourceAddr,
		backend:      b,
		values:       newGrantValues(),
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
	obs, err := b.observe(ctx, w)
	if err != nil {
		w.Close()
		return nil, err
	}
	w.obs = obs
	return w, nil
}

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
// expired under one of them), it returns the one holding the newest grant,
// with that grant's token.
func (w *Workload) Holder(key string) (string, int64, bool) {
	best, tok := "", int64(-1)
	for _, c := range w.clients {
		c.mu.Lock()
		h := c.held
		c.mu.Unlock()
		if h != nil && (key == "" || h.key == key) && h.token > tok {
			best, tok = c.name, h.token
		}
	}
	return best, tok, best != ""
}

// Entering returns a holder that began, within the last within, a critical
// section that will think between min and max on its clock: a holder with
// that much work ahead of it. It is how a fault aims at a section it can
// harm, as a failpoint in the client would.
func (w *Workload) Entering(min, max, within time.Duration) (string, bool) {
	since := time.Now().Add(-within)
	for _, c := range w.clients {
		c.mu.Lock()
		t, held := c.thinking, c.held != nil
		c.mu.Unlock()
		if held && !t.since.IsZero() && t.since.After(since) && t.length >= min && (max <= 0 || t.length <= max) {
			return c.name, true
		}
	}
	return "", false
}

// Waiter returns the client that has waited longest in Acquire, if one has
// waited at least minWait (long enough to be queued behind a holder rather
// than about to be granted at once).
func (w *Workload) Waiter(minWait time.Duration) (string, bool) {
	best, since := "", time.Now().Add(-minWait)
	for _, c := range w.clients {
		c.mu.Lock()
		t := c.waiting
		c.mu.Unlock()
		if !t.IsZero() && !t.After(since) {
			best, since = c.name, t
		}
	}
	return best, best != ""
}

// Disarm cancels a pause armed for client's next write, saying whether
// there was one, and says when the client's current pause ends (zero if it
// is not paused).
func (w *Workload) Disarm(client string) (bool, time.Time) {
	c, ok := w.byName[client]
	if !ok {
		return false, time.Time{}
	}
	return c.ctl.disarm()
}

// Role says what client is doing now: "holder" (it believes it holds a
// lock), "waiter" (it is in Acquire) or "idle".
func (w *Workload) Role(client string) string {
	c, ok := w.byName[client]
	if !ok {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.held != nil:
		return "holder"
	case !c.waiting.IsZero():
		return "waiter"
	}
	return "idle"
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

// Lease returns the lease (in hex, as the history writes it) of client's
// current locker (its session), or, for a recipe without one, the lease of
// the grant it holds, if any.
func (w *Workload) Lease(client string) (string, bool) {
	c, ok := w.byName[client]
	if !ok {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.locker != nil && c.locker.lh != nil {
		return leaseHex(c.locker.lh.LeaseID()), true
	}
	if c.held != nil && c.held.lease != 0 {
		return leaseHex(c.held.lease), true
	}
	return "", false
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

// release is a client's intent to delete its lock key. It is kept until the
// observer has seen the deletion, or has seen past the revision the release
// ended at (until; 0 while unknown) without one: the release found its key
// gone. Dropping it any sooner would let the observer, which runs behind,
// misread the deletion it did make. deletedAt is the revision at which the
// release's own delete removed a key, by its response (0: none, or not
// known): that attributes the deletion at that revision definitely.
type release struct {
	client    string
	until     int64
	deletedAt int64
	done      bool
}

// intendRelease notes that client, the owner of etcd key created at
// revision rev (its fencing token), is about to delete it in a release.
func (w *Workload) intendRelease(key string, rev int64, client string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.releases[keyRev{key, rev}] = release{client: client}
}

// releaseDone notes that the release of key at rev returned, having read
// the store up to revision until (its deletion, if it made one, is at or
// before until; 0 if it failed) and having deleted a key at deletedAt.
func (w *Workload) releaseDone(key string, rev, until, deletedAt int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r, ok := w.releases[keyRev{key, rev}]; ok {
		r.until, r.deletedAt, r.done = until, deletedAt, true
		w.releases[keyRev{key, rev}] = r
	}
}

// awaitReleases waits, at most d, until no release of key is under way, so
// that a deletion is judged with the releases' own word on what they
// deleted.
func (w *Workload) awaitReleases(key string, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && w.releasing(key) {
		time.Sleep(2 * time.Millisecond)
	}
}

// releasing says whether a release of key is under way.
func (w *Workload) releasing(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, r := range w.releases {
		if k.key == key && !r.done {
			return true
		}
	}
	return false
}

// observedUpTo drops the intents of releases that ended at or before rev,
// which the observer has now seen: whatever they deleted is recorded.
func (w *Workload) observedUpTo(rev int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, r := range w.releases {
		if r.until > 0 && r.until <= rev {
			delete(w.releases, k)
		}
	}
}

// intendRevoke notes that the owner of lease is about to revoke it.
func (w *Workload) intendRevoke(id clientv3.LeaseID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.revoking[id] = true
}

// deletion is who deleted a lock key, as the observer records it.
type deletion struct {
	owner leaseOwner
	by    string
	// releaser is, for "other-release", the client whose release deleted
	// it, and released the token that release was for.
	releaser string
	released int64
}

// deleted says who deleted etcd key, created at revision rev and attached to
// lease: its owner in a release, another client in a release of an older
// grant of the same key (a release that deletes whatever is there), its
// owner otherwise (Mutex.Lock's clean-up of its key after a failed wait: the
// lease is still alive), its owner by revoking the lease, or the server when
// the lease expired. alive reports whether the lease exists after the
// deletion (nil: unknown).
//
// "other-release" is definite, for the contract check: the lease was alive
// after the deletion (so neither expiry nor a revoke deleted the key), the
// owner had no release of this grant in progress, and another client was
// releasing an older grant of the same key.
func (w *Workload) deleted(key string, rev, at int64, lease clientv3.LeaseID, alive *bool) deletion {
	w.mu.Lock()
	defer w.mu.Unlock()
	owner := w.owners[lease]
	// A release whose own delete removed a key of this name at this
	// revision made this deletion: definite, whoever else was releasing.
	for r, intent := range w.releases {
		if r.key != key || intent.deletedAt != at || at == 0 {
			continue
		}
		delete(w.releases, r)
		if intent.client == owner.client {
			return deletion{owner: owner, by: histories.DeletedByRelease}
		}
		return deletion{owner: owner, by: histories.DeletedByOther, releaser: intent.client, released: r.rev}
	}
	k := keyRev{key, rev}
	if _, ok := w.releases[k]; ok {
		delete(w.releases, k)
		return deletion{owner: owner, by: histories.DeletedByRelease}
	}
	isAlive := alive != nil && *alive
	var other *keyRev
	for r, intent := range w.releases {
		switch {
		case r.key != key:
		case intent.client == owner.client && r.rev >= rev:
			// The owner is releasing a grant of this key whose token is
			// not the key's create revision (check-then-set's token is
			// the revision of its Put, which may follow the create): its
			// own release.
			delete(w.releases, r)
			return deletion{owner: owner, by: histories.DeletedByRelease}
		case intent.client != owner.client && r.rev < rev && isAlive && (other == nil || r.rev > other.rev):
			// Of several, the release of the newest grant.
			other = &r
		}
	}
	if other != nil {
		intent := w.releases[*other]
		delete(w.releases, *other)
		return deletion{owner: owner, by: histories.DeletedByOther, releaser: intent.client, released: other.rev}
	}
	switch {
	case isAlive:
		return deletion{owner: owner, by: histories.DeletedByAcquire}
	case w.revoking[lease]:
		return deletion{owner: owner, by: histories.DeletedByRevoke}
	}
	return deletion{owner: owner, by: histories.DeletedByExpiry}
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
	}
	maps.Copy(params, w.section.Params())
	if recipes.NoFencingToken(w.cfg.Recipe.Name()) {
		// The token is locktest's count, taken after the grant: the
		// lock promises no order of it (the contract check reads this).
		params["fencing_token"] = "false"
	}
	if w.cfg.Resource == resource.EtcdTxn {
		params["resource"] = string(resource.EtcdTxn)
	}
	return histories.Op{Type: histories.Info, F: histories.FSetup, Process: histories.Nemesis, Value: &histories.Value{Params: params}}
}

// finalReads reads each key once after the clients stopped, as a fresh
// process, over a direct link (faults on the clients' links do not block
// it), and records the reads.
func (w *Workload) finalReads(ctx context.Context) error {
	var st store
	if w.cfg.Resource == resource.EtcdTxn {
		s, closeDirect, err := w.backend.(etcdBackend).finalStore(w.cfg.Prefix)
		if err != nil {
			return err
		}
		defer closeDirect()
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
