// Package workload runs locktest's clients: each contends for etcd locks with
// concurrency.Mutex, takes the lock key's create revision as its fencing
// token, and does a read-think-write critical section against the protected
// resource. Every acquire, release, read and write is recorded as it happens.
package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/resource"
)

// Cluster is what the workload needs from an etcd cluster: an etcd client and
// a link to the resource for each named client, each over links of its own so
// that faults can single one client out.
type Cluster interface {
	Client(name string) (*clientv3.Client, error)
	Proxy(name, upstream string) (string, error)
}

// Recorder appends operations to the run's history.
type Recorder interface {
	Record(op histories.Op) (histories.Op, error)
}

// Config describes the clients and their critical section.
type Config struct {
	Clients int
	// Locks are the lock names clients pick from; each is also the key of the
	// resource register it protects.
	Locks []string
	// Think is how long a holder may pause between read and write; each
	// critical section draws a time uniformly from [ThinkMin, ThinkMax].
	ThinkMin, ThinkMax time.Duration
	// TTL is the session lease TTL in seconds.
	TTL int
	// OpTimeout bounds each acquire, read, write and release.
	OpTimeout time.Duration
	// Prefix is where lock keys live in etcd.
	Prefix string
	Seed   int64
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
	}
	for _, l := range c.Locks {
		if l == "" {
			return errors.New("lock names must not be empty")
		}
	}
	return nil
}

// Stats summarises what the clients did.
type Stats struct {
	Acquisitions int           `json:"acquisitions"`
	Operations   int           `json:"operations"`
	Unknown      int           `json:"unknown"`
	AcquireP50   time.Duration `json:"acquire_p50_ns"`
	AcquireP99   time.Duration `json:"acquire_p99_ns"`
	acquireWaits []time.Duration
}

// Run starts the clients and lets them work until stop is closed; each then
// finishes the cycle it is in (so locks are released and the history ends
// quietly) and Run returns. Cancelling ctx interrupts everything at once:
// operations in flight are recorded as info.
func Run(ctx context.Context, cfg Config, cl Cluster, resourceAddr string, rec Recorder, stop <-chan struct{}) (Stats, error) {
	if err := cfg.Validate(); err != nil {
		return Stats{}, err
	}
	var (
		nextProcess atomic.Int64
		wg          sync.WaitGroup
		mu          sync.Mutex
		total       Stats
		errs        []error
	)
	nextProcess.Store(int64(cfg.Clients))
	for i := range cfg.Clients {
		c, err := newClient(ctx, i, cfg, cl, resourceAddr, rec, &nextProcess)
		if err != nil {
			errs = append(errs, err)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := c.run(ctx, stop)
			c.close()
			mu.Lock()
			defer mu.Unlock()
			total.Acquisitions += st.Acquisitions
			total.Operations += st.Operations
			total.Unknown += st.Unknown
			total.acquireWaits = append(total.acquireWaits, st.acquireWaits...)
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	slices.Sort(total.acquireWaits)
	total.AcquireP50 = percentile(total.acquireWaits, 0.50)
	total.AcquireP99 = percentile(total.acquireWaits, 0.99)
	return total, errors.Join(errs...)
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1))]
}

type client struct {
	name    string
	cfg     Config
	rng     *rand.Rand
	etcd    *clientv3.Client
	res     *resource.Client
	rec     Recorder
	next    *atomic.Int64
	process histories.Process
	session *concurrency.Session
	// cancelSession ends the session's keepalive context.
	cancelSession context.CancelFunc
	stats         Stats
}

func newClient(ctx context.Context, i int, cfg Config, cl Cluster, resourceAddr string, rec Recorder, next *atomic.Int64) (*client, error) {
	name := fmt.Sprintf("c%d", i)
	cli, err := cl.Client(name)
	if err != nil {
		return nil, fmt.Errorf("client %s: %w", name, err)
	}
	addr, err := cl.Proxy(name+"-resource", resourceAddr)
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("client %s: resource link: %w", name, err)
	}
	return &client{
		name:    name,
		cfg:     cfg,
		rng:     rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(i))),
		etcd:    cli,
		res:     resource.NewClient(addr),
		rec:     rec,
		next:    next,
		process: histories.Process(i),
	}, nil
}

func (c *client) close() {
	// Closing the session revokes its lease so no lock key outlives the run.
	c.dropSession()
	c.res.Close()
	c.etcd.Close()
}

func (c *client) run(ctx context.Context, stop <-chan struct{}) (Stats, error) {
	for {
		select {
		case <-stop:
			return c.stats, nil
		case <-ctx.Done():
			return c.stats, nil
		default:
		}
		if err := c.cycle(ctx, stop); err != nil {
			return c.stats, err
		}
	}
}

// record appends op for the client's current process.
func (c *client) record(typ histories.Type, f, key string, v *histories.Value, err error) error {
	op := histories.Op{Type: typ, F: f, Process: c.process, Key: key, Value: v}
	if err != nil {
		op.Error = err.Error()
	}
	if typ != histories.Invoke {
		c.stats.Operations++
		if typ == histories.Info {
			c.stats.Unknown++
		}
	}
	_, werr := c.rec.Record(op)
	return werr
}

// newProcess gives the client a fresh process number after an operation with
// an unknown outcome, as in Jepsen, and a fresh session: the old one may
// still hold a lock key, so it is closed, which revokes its lease.
func (c *client) newProcess() {
	c.process = histories.Process(c.next.Add(1) - 1)
	c.dropSession()
}

func (c *client) dropSession() {
	if c.session == nil {
		return
	}
	c.session.Close()
	c.cancelSession()
	c.session, c.cancelSession = nil, nil
}

// ensureSession creates a session, retrying until it works, the run is
// stopped or it is interrupted; faults can make lease grants fail for a while.
func (c *client) ensureSession(ctx context.Context, stop <-chan struct{}) bool {
	for c.session == nil || isDone(c.session.Done()) {
		c.dropSession()
		// The session's context also drives its keepalives, so it cannot
		// carry a deadline; a timer cancels it only if the grant hangs.
		sctx, cancel := context.WithCancel(ctx)
		timer := time.AfterFunc(c.cfg.OpTimeout, cancel)
		s, err := concurrency.NewSession(c.etcd, concurrency.WithTTL(c.cfg.TTL), concurrency.WithContext(sctx))
		if timer.Stop() && err == nil {
			c.session, c.cancelSession = s, cancel
			return true
		}
		cancel()
		select {
		case <-ctx.Done():
			return false
		case <-stop:
			return false
		case <-time.After(100 * time.Millisecond): // back off before the next grant
		}
	}
	return true
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// cycle is one acquire, critical section and release.
func (c *client) cycle(ctx context.Context, stop <-chan struct{}) error {
	if !c.ensureSession(ctx, stop) {
		return nil
	}
	key := c.cfg.Locks[c.rng.IntN(len(c.cfg.Locks))]
	m := concurrency.NewMutex(c.session, c.cfg.Prefix+key)

	if err := c.record(histories.Invoke, histories.Acquire, key, nil, nil); err != nil {
		return err
	}
	began := time.Now()
	lctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	err := m.Lock(lctx)
	cancel()
	switch {
	case errors.Is(err, concurrency.ErrSessionExpired):
		// Lock re-read its own key after waiting and found it gone: it
		// definitely does not hold the lock.
		c.dropSession()
		return c.record(histories.Fail, histories.Acquire, key, nil, err)
	case err != nil:
		if rerr := c.record(histories.Info, histories.Acquire, key, nil, err); rerr != nil {
			return rerr
		}
		c.newProcess()
		return nil
	}
	token := fencingToken(m)
	c.stats.Acquisitions++
	c.stats.acquireWaits = append(c.stats.acquireWaits, time.Since(began))
	if err := c.record(histories.OK, histories.Acquire, key, histories.TokenValue(token), nil); err != nil {
		return err
	}

	unknown, err := c.criticalSection(ctx, key, token)
	if err != nil {
		return err
	}

	// The holder releases what it holds under its own process, even after an
	// unknown read or write, so the mutex history stays well-formed.
	if err := c.record(histories.Invoke, histories.Release, key, nil, nil); err != nil {
		return err
	}
	uctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	err = m.Unlock(uctx)
	cancel()
	if err != nil {
		if rerr := c.record(histories.Info, histories.Release, key, nil, err); rerr != nil {
			return rerr
		}
		unknown = true
	} else if err := c.record(histories.OK, histories.Release, key, nil, nil); err != nil {
		return err
	}
	if unknown {
		c.newProcess()
	}
	return nil
}

// criticalSection reads the resource, thinks, and writes value+1 with the
// fencing token. It reports whether an operation's outcome was unknown.
func (c *client) criticalSection(ctx context.Context, key string, token int64) (unknown bool, err error) {
	if err := c.record(histories.Invoke, histories.Read, key, nil, nil); err != nil {
		return false, err
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	v, rerr := c.res.Read(rctx, key)
	cancel()
	if rerr != nil {
		// A read changes nothing, so a failed one is a plain fail.
		return false, c.record(histories.Fail, histories.Read, key, nil, rerr)
	}
	if err := c.record(histories.OK, histories.Read, key, histories.ReadValue(v), nil); err != nil {
		return false, err
	}

	if think := c.thinkTime(); think > 0 {
		select {
		case <-time.After(think):
		case <-ctx.Done():
		}
	}

	wv := histories.WriteValue(token, v+1)
	if err := c.record(histories.Invoke, histories.Write, key, wv, nil); err != nil {
		return false, err
	}
	wctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	werr := c.res.Write(wctx, key, token, v+1)
	cancel()
	switch {
	case werr == nil:
		return false, c.record(histories.OK, histories.Write, key, wv, nil)
	case errors.Is(werr, resource.ErrRejected):
		return false, c.record(histories.Fail, histories.Write, key, wv, werr)
	default:
		return true, c.record(histories.Info, histories.Write, key, wv, werr)
	}
}

func (c *client) thinkTime() time.Duration {
	span := c.cfg.ThinkMax - c.cfg.ThinkMin
	if span <= 0 {
		return c.cfg.ThinkMin
	}
	return c.cfg.ThinkMin + time.Duration(c.rng.Int64N(int64(span)+1))
}

// fencingToken is the create revision of the mutex's own key. Mutex keeps it
// privately, but its IsOwner comparison carries it, which spares an RPC.
func fencingToken(m *concurrency.Mutex) int64 {
	cmp := pb.Compare(m.IsOwner())
	if cr, ok := cmp.TargetUnion.(*pb.Compare_CreateRevision); ok {
		return cr.CreateRevision
	}
	return 0
}
