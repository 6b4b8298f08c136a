package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/resource"
)

type client struct {
	w     *Workload
	name  string
	cfg   Config
	rng   *rand.Rand
	etcd  *clientv3.Client
	lease *clockLease
	clock *clock.Clock
	ctl   *control
	res   *resource.Client
	rec   Recorder

	// mu guards what other goroutines read: the process, the session, the
	// lock the client believes it holds, and the stats (lease-lost events
	// come from another goroutine). Only the client's goroutine writes
	// process and session.
	mu      sync.Mutex
	process histories.Process
	session *session
	held    *holding
	stats   Stats
}

// session is a concurrency.Session with its cancel and whether the client
// ended it on purpose.
type session struct {
	*concurrency.Session
	cancel  context.CancelFunc
	dropped atomic.Bool
}

// holding is a lock the client believes it holds.
type holding struct {
	key     string // lock name
	token   int64
	lease   clientv3.LeaseID
	process histories.Process
	lost    bool // lease-lost recorded
}

func newClient(w *Workload, i int, cl Cluster, resourceAddr string) (*client, error) {
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
	c := &client{
		w:       w,
		name:    name,
		cfg:     w.cfg,
		rng:     rand.New(rand.NewPCG(uint64(w.cfg.Seed), uint64(i))),
		etcd:    cli,
		clock:   clock.New(),
		ctl:     newControl(),
		res:     resource.NewClient(addr),
		rec:     w.rec,
		process: histories.Process(i),
	}
	// concurrency.NewSession grants and keeps its lease alive through the
	// client's embedded Lease: this puts the client's clock in charge.
	c.lease = newClockLease(cli.Lease, c.clock, c.ctl)
	cli.Lease = c.lease
	return c, nil
}

// finish ends the client's session at the end of Run and returns its stats.
func (c *client) finish() Stats {
	c.dropSession()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

func (c *client) close() {
	// Closing the session revokes its lease so no lock key outlives the run.
	c.dropSession()
	c.res.Close()
	c.etcd.Close()
}

func (c *client) run(ctx context.Context, stop <-chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return nil
		default:
		}
		err := c.cycle(ctx, stop)
		switch {
		case errors.Is(err, errCrashed):
			c.crash()
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return err
		}
	}
}

// crash makes a requested crash take effect: the client forgets its lock,
// orphans its session (no revoke: its keys stay until the lease expires) and
// goes on as a new process.
func (c *client) crash() {
	c.mu.Lock()
	s := c.session
	c.session, c.held = nil, nil
	c.process = histories.Process(c.w.next.Add(1) - 1)
	c.stats.Crashes++
	c.mu.Unlock()
	if s != nil {
		s.dropped.Store(true)
		s.Orphan()
		s.cancel()
	}
	c.ctl.crashDone()
}

// record appends op for the client's current process.
func (c *client) record(typ histories.Type, f, key string, v *histories.Value, err error) error {
	c.mu.Lock()
	p := c.process
	if typ != histories.Invoke {
		c.stats.Operations++
		if typ == histories.Info {
			c.stats.Unknown++
		}
	}
	c.mu.Unlock()
	op := histories.Op{Type: typ, F: f, Process: p, Key: key, Value: v}
	if err != nil {
		op.Error = err.Error()
	}
	_, werr := c.rec.Record(op)
	return werr
}

// complete records the completion of the operation in flight, unless a crash
// is pending: then the outcome is unknown to the history (info) and the crash
// unwinds the cycle.
func (c *client) complete(typ histories.Type, f, key string, v *histories.Value, err error) error {
	if crashing, _ := c.ctl.crashState(); crashing {
		if rerr := c.record(histories.Info, f, key, v, errCrashed); rerr != nil {
			return rerr
		}
		return errCrashed
	}
	return c.record(typ, f, key, v, err)
}

// opContext bounds one operation by OpTimeout of the client's clock.
func (c *client) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return c.clock.WithTimeout(ctx, c.cfg.OpTimeout)
}

// opError says that an operation timed out on the client's clock, which a
// clock-timed context cannot say itself.
func opError(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return fmt.Errorf("op timeout on the client's clock: %w", err)
	}
	return err
}

// newProcess gives the client a fresh process number after an operation with
// an unknown outcome, as in Jepsen, and a fresh session: the old one may
// still hold a lock key, so it is closed, which revokes its lease.
func (c *client) newProcess() {
	c.mu.Lock()
	c.process = histories.Process(c.w.next.Add(1) - 1)
	c.mu.Unlock()
	c.dropSession()
}

// dropSession closes the current session, revoking its lease (which fails
// fast if the lease is gone already).
func (c *client) dropSession() {
	c.mu.Lock()
	s := c.session
	c.session = nil
	c.mu.Unlock()
	if s == nil {
		return
	}
	s.dropped.Store(true)
	c.w.intendRevoke(s.Lease())
	s.Close()
	s.cancel()
	c.lease.forget(s.Lease())
}

// ensureSession creates a session, retrying until it works, the run is
// stopped, a crash is requested or the run is interrupted; faults can make
// lease grants fail for a while.
func (c *client) ensureSession(ctx context.Context, stop <-chan struct{}) (*session, error) {
	for {
		c.mu.Lock()
		s := c.session
		c.mu.Unlock()
		if s != nil && !isDone(s.Done()) {
			return s, nil
		}
		c.dropSession()
		if err := c.ctl.step(ctx); err != nil {
			return nil, err
		}
		// The session's context also drives its keepalives, so it cannot
		// carry a deadline; a timer cancels it only if the grant hangs.
		sctx, cancel := context.WithCancel(ctx)
		timer := c.clock.AfterFunc(c.cfg.OpTimeout, cancel)
		cs, err := concurrency.NewSession(c.etcd, concurrency.WithTTL(c.cfg.TTL), concurrency.WithContext(sctx))
		if timer.Stop() && err == nil {
			s := &session{Session: cs, cancel: cancel}
			c.mu.Lock()
			c.session = s
			p := c.process
			c.mu.Unlock()
			c.w.registerLease(cs.Lease(), c.name, p)
			go func() {
				<-cs.Done()
				if ctx.Err() == nil { // not the end of an interrupted run
					c.sessionDone(s)
				}
			}()
			return s, nil
		}
		cancel()
		_, crashed := c.ctl.crashState()
		t := c.clock.NewTimer(100 * time.Millisecond) // back off before the next grant
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-stop:
			t.Stop()
			return nil, nil
		case <-crashed:
			t.Stop()
		case <-t.C:
		}
	}
}

// sessionDone runs when a session ends. If the client ended it on purpose,
// nothing happens; otherwise, if the client believes it holds a lock under
// it, the client has just found out that its lease is gone: lease-lost.
func (c *client) sessionDone(s *session) {
	if s.dropped.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leaseLostLocked(s.Lease())
}

// leaseLostLocked records lease-lost once for the lock held under lease, if
// any. c.mu is held.
func (c *client) leaseLostLocked(lease clientv3.LeaseID) {
	h := c.held
	if h == nil || h.lease != lease || h.lost {
		return
	}
	h.lost = true
	c.stats.LeasesLost++
	c.rec.Record(histories.Op{Type: histories.Info, F: FLeaseLost, Process: histories.Nemesis, Key: h.key,
		Value: &histories.Value{Targets: []string{c.name}, Params: map[string]string{
			"key":     h.key,
			"token":   strconv.FormatInt(h.token, 10),
			"lease":   strconv.FormatInt(int64(lease), 16),
			"process": h.process.String(),
		}}})
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// think waits d of the client's clock (a crash cuts it short), then passes a
// pause point: a pause during the think time delays the client only if it
// outlasts it.
func (c *client) think(ctx context.Context, d time.Duration) error {
	if d > 0 {
		_, crashed := c.ctl.crashState()
		t := c.clock.NewTimer(d)
		select {
		case <-t.C:
		case <-crashed:
		case <-ctx.Done():
		}
		t.Stop()
	}
	return c.ctl.step(ctx)
}

// guard reports whether the client, by its guard, still holds the lock
// under lease.
func (c *client) guard(s *session) bool {
	switch c.cfg.Guard {
	case GuardSession:
		return !isDone(s.Done())
	case GuardClock:
		end, alive := c.lease.believed(s.Lease())
		return alive && c.clock.Now().Before(end.Add(-c.cfg.margin()))
	default:
		return true
	}
}

// cycle is one acquire, critical section and release.
func (c *client) cycle(ctx context.Context, stop <-chan struct{}) error {
	if err := c.ctl.step(ctx); err != nil {
		return err
	}
	s, err := c.ensureSession(ctx, stop)
	if s == nil {
		return err
	}
	key := c.cfg.Locks[c.rng.IntN(len(c.cfg.Locks))]
	m := concurrency.NewMutex(s.Session, c.cfg.Prefix+key)

	if err := c.ctl.step(ctx); err != nil {
		return err
	}
	if err := c.record(histories.Invoke, histories.Acquire, key, nil, nil); err != nil {
		return err
	}
	began := time.Now() // stats are measured on host time
	lctx, cancel := c.opContext(ctx)
	err = opError(lctx, m.Lock(lctx))
	cancel()
	switch {
	case errors.Is(err, concurrency.ErrSessionExpired):
		// Lock re-read its own key after waiting and found it gone: it
		// definitely does not hold the lock.
		if err := c.complete(histories.Fail, histories.Acquire, key, nil, err); err != nil {
			return err
		}
		c.dropSession()
		return nil
	case err != nil:
		if err := c.complete(histories.Info, histories.Acquire, key, nil, err); err != nil {
			return err
		}
		c.newProcess()
		return nil
	}
	token := fencingToken(m)
	if err := c.complete(histories.OK, histories.Acquire, key, histories.TokenValue(token), nil); err != nil {
		return err
	}
	c.mu.Lock()
	c.stats.Acquisitions++
	c.stats.acquireWaits = append(c.stats.acquireWaits, time.Since(began))
	c.held = &holding{key: key, token: token, lease: s.Lease(), process: c.process}
	if isDone(s.Done()) && !s.dropped.Load() {
		c.leaseLostLocked(s.Lease()) // the session ended before the belief was noted
	}
	c.mu.Unlock()

	unknown, err := c.criticalSection(ctx, s, key, token)
	if err != nil {
		return err
	}

	// The holder releases what it holds under its own process, even after an
	// unknown read or write or a refused guard, so the mutex history stays
	// well-formed.
	if err := c.ctl.step(ctx); err != nil {
		return err
	}
	if err := c.record(histories.Invoke, histories.Release, key, nil, nil); err != nil {
		return err
	}
	c.w.intendRelease(m.Key(), token)
	uctx, cancel := c.opContext(ctx)
	err = opError(uctx, m.Unlock(uctx))
	cancel()
	if err != nil {
		err = c.complete(histories.Info, histories.Release, key, nil, err)
		unknown = true
	} else {
		err = c.complete(histories.OK, histories.Release, key, nil, nil)
	}
	c.mu.Lock()
	c.held = nil
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if unknown {
		c.newProcess()
	}
	return nil
}

// criticalSection reads the resource, thinks, checks its guard and writes
// value+1 with the fencing token. It reports whether an operation's outcome
// was unknown.
func (c *client) criticalSection(ctx context.Context, s *session, key string, token int64) (unknown bool, err error) {
	if err := c.ctl.step(ctx); err != nil {
		return false, err
	}
	if err := c.record(histories.Invoke, histories.Read, key, nil, nil); err != nil {
		return false, err
	}
	rctx, cancel := c.opContext(ctx)
	v, rerr := c.res.Read(rctx, key)
	rerr = opError(rctx, rerr)
	cancel()
	if rerr != nil {
		// A read changes nothing, so a failed one is a plain fail.
		return false, c.complete(histories.Fail, histories.Read, key, nil, rerr)
	}
	if err := c.complete(histories.OK, histories.Read, key, histories.ReadValue(v), nil); err != nil {
		return false, err
	}

	if err := c.think(ctx, c.thinkTime()); err != nil {
		return false, err
	}
	if !c.guard(s) {
		c.mu.Lock()
		c.stats.GuardRefusals++
		c.mu.Unlock()
		return false, nil
	}
	// Check, then act: a pause here defeats every guard.
	c.ctl.fireArmed()
	if err := c.ctl.step(ctx); err != nil {
		return false, err
	}

	wv := histories.WriteValue(token, v+1)
	if err := c.record(histories.Invoke, histories.Write, key, wv, nil); err != nil {
		return false, err
	}
	wctx, cancel := c.opContext(ctx)
	werr := opError(wctx, c.res.Write(wctx, key, token, v+1))
	cancel()
	switch {
	case werr == nil:
		return false, c.complete(histories.OK, histories.Write, key, wv, nil)
	case errors.Is(werr, resource.ErrRejected):
		return false, c.complete(histories.Fail, histories.Write, key, wv, werr)
	default:
		return true, c.complete(histories.Info, histories.Write, key, wv, werr)
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
