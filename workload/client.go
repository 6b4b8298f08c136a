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

	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/resource"
)

type client struct {
	w      *Workload
	name   string
	cfg    Config
	recipe lock.Recipe
	rng    *rand.Rand
	conn   Conn
	clock  *clock.Clock
	ctl    *control
	store  Store
	rec    Recorder

	// mu guards what other goroutines read: the process, the locker, the
	// lock the client believes it holds, and the stats (lease-lost events
	// come from another goroutine). Only the client's goroutine writes
	// process and locker.
	mu      sync.Mutex
	process histories.Process
	locker  *locker
	held    *holding
	waiting time.Time // when the Acquire in flight began; zero when none is
	// thinking is the critical section's think in progress, if any.
	thinking thinking
	// inFlight is the acquire or release the client has sent and not yet
	// had an answer to ("" between them), and intercept a hook a fault
	// armed on its next one (Workload.Intercept).
	inFlight  string
	intercept *intercept
	stats     Stats

	// stopMu guards stopped: the lock process a pause of the client has
	// stopped (lock.Process), to be continued when the pause ends.
	stopMu  sync.Mutex
	stopped lock.Process
}

// intercept is a hook on a client's next operation of a kind.
type intercept struct {
	op     string
	before func()
	after  func(error)
	fired  bool // before has run (or is running)
}

// sending marks op as the operation in flight and runs a hook armed on it,
// just before the client sends it.
func (c *client) sending(op string) {
	c.mu.Lock()
	c.inFlight = op
	ic := c.intercept
	if ic == nil || ic.op != op || ic.fired {
		ic = nil
	} else {
		ic.fired = true
	}
	c.mu.Unlock()
	if ic != nil {
		ic.before()
	}
}

// answered marks the operation in flight as returned with err, and runs the
// hook that struck it.
func (c *client) answered(op string, err error) {
	c.mu.Lock()
	c.inFlight = ""
	ic := c.intercept
	if ic != nil && ic.op == op && ic.fired {
		c.intercept = nil
	} else {
		ic = nil
	}
	c.mu.Unlock()
	if ic != nil {
		ic.after(err)
	}
}

// locker is the client's current lock.Locker, with its session if it keeps
// one, the lease its backend names for it, and whether the client has
// dropped it on purpose.
type locker struct {
	lock.Locker
	session lock.Session // nil if the recipe keeps no session of its own
	lease   string       // as Conn.Locker named it; "" if none
	dropped atomic.Bool
}

// done is closed when the locker's session is gone (never, without one).
func (l *locker) done() <-chan struct{} {
	if l.session == nil {
		return nil
	}
	return l.session.Done()
}

// holding is a lock the client believes it holds.
type holding struct {
	key   string // lock name
	token int64
	// untokened says the grant carries no fencing token
	// (lock.Untokened): token is then locktest's count of such grants,
	// which tells the grants apart but is recorded nowhere as a token.
	untokened bool
	grant     Grant // the backend's view of it
	claim     Claim // what it holds on the server, as the backend tells
	process   histories.Process
	lost      bool // lease-lost recorded
	held      lock.Held
	locker    *locker
	since     time.Time     // client clock: when the acquire returned
	gone      chan struct{} // closed when the client stops believing
}

// ClientNames name the clients of a workload of n: c0, c1, ..., as
// Workload.Names will, so that faults can be drawn against them before
// anything starts.
func ClientNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = clientName(i)
	}
	return names
}

func clientName(i int) string { return "c" + strconv.Itoa(i) }

func newClient(w *Workload, i int, resourceAddr string) (*client, error) {
	name := clientName(i)
	c := &client{
		w:       w,
		name:    name,
		cfg:     w.cfg,
		recipe:  w.cfg.Recipe,
		rng:     rand.New(rand.NewPCG(uint64(w.cfg.Seed), uint64(i))),
		clock:   clock.New(),
		ctl:     newControl(),
		rec:     w.rec,
		process: histories.Process(i),
	}
	c.ctl.changed = c.followPause
	cn, err := w.backend.Connect(Client{Name: name, Clock: c.clock, Paused: c.ctl.waitPaused})
	if err != nil {
		return nil, fmt.Errorf("client %s: %w", name, err)
	}
	c.conn = cn
	if kept(w.cfg.Resource) {
		c.store, err = w.backend.(Keeper).Store(cn, w.cfg.Resource, w.cfg.Prefix)
		if err != nil {
			cn.Close()
			return nil, fmt.Errorf("client %s: %w", name, err)
		}
	} else {
		addr, err := w.backend.ResourceProxy(name, resourceAddr)
		if err != nil {
			cn.Close()
			return nil, fmt.Errorf("client %s: resource link: %w", name, err)
		}
		c.store = httpStore{resource.NewClient(addr)}
	}
	return c, nil
}

// env is what the recipe gets for this client.
func (c *client) env() lock.Env {
	return lock.Env{Conn: c.conn.Env(), Clock: c.clock, TTL: c.cfg.TTL, Prefix: c.cfg.Prefix, Name: c.name,
		Backend: c.w.backend.Name(), Endpoints: c.conn.Endpoints(), OpTimeout: c.cfg.OpTimeout, Dir: c.cfg.Dir, Logf: c.cfg.Logf,
		Seed: c.cfg.Seed, Vars: vars(c.conn), Paused: c.ctl.waitPaused}
}

// vars are what cn tells a lock in another process beyond its endpoints.
func vars(cn Conn) map[string]string {
	if v, ok := cn.(Vars); ok {
		return v.Vars()
	}
	return nil
}

// start makes the client's first locker with a recipe that can fail for
// good (lock.Starter), before the run: its error stops the run.
func (c *client) start(ctx context.Context, s lock.Starter) error {
	lk, err := s.Start(ctx, c.env())
	if err != nil {
		return fmt.Errorf("client %s: %w", c.name, err)
	}
	c.useLocker(lk)
	return nil
}

// useLocker makes lk the client's current locker.
func (c *client) useLocker(lk lock.Locker) *locker {
	l := &locker{Locker: lk}
	l.session, _ = lk.(lock.Session)
	c.mu.Lock()
	p := c.process // only this goroutine changes it
	c.mu.Unlock()
	l.lease = c.conn.Locker(lk, p)
	c.mu.Lock()
	c.locker = l
	c.mu.Unlock()
	return l
}

// followPause stops the current locker's process when a pause of the
// client begins and continues it when the pause ends (lock.Process), as
// a stop-the-world pause stops a lock's own threads.
func (c *client) followPause() {
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	paused := c.ctl.paused()
	c.mu.Lock()
	l := c.locker
	c.mu.Unlock()
	switch {
	case paused && c.stopped == nil && l != nil:
		if p, ok := l.Locker.(lock.Process); ok && p.Stop() == nil {
			c.stopped = p
		}
	case !paused && c.stopped != nil:
		c.stopped.Continue()
		c.stopped = nil
	}
}

// finish ends the client's locker at the end of Run and returns its stats.
func (c *client) finish() Stats {
	c.forgetHeld()
	c.dropLocker()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

func (c *client) close() {
	// Closing the locker revokes its lease so no lock key outlives the run.
	c.forgetHeld()
	c.dropLocker()
	c.store.Close()
	c.conn.Close()
}

func (c *client) run(ctx context.Context, stop <-chan struct{}) error {
	c.announce()
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
// orphans its locker (its session is not ended and its watchdogs stop, so
// its keys stay until the server expires them; a locker that keeps nothing
// alive is just abandoned) and goes on as a new process.
func (c *client) crash() {
	c.mu.Lock()
	l := c.locker
	c.locker = nil
	c.forgetHeldLocked()
	c.process = histories.Process(c.w.next.Add(1) - 1)
	c.stats.Crashes++
	c.mu.Unlock()
	c.announce()
	if l != nil {
		l.dropped.Store(true)
		if o, ok := l.Locker.(lock.Orphaner); ok {
			o.Orphan()
		}
	}
	c.ctl.crashDone()
}

// forgetHeld drops the client's belief that it holds a lock.
func (c *client) forgetHeld() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetHeldLocked()
}

func (c *client) forgetHeldLocked() {
	if h := c.held; h != nil {
		close(h.gone)
		c.held = nil
	}
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

// lockContext bounds a lock operation (acquire, release) as opContext
// does; for a lock in a process of its own (lock.Process), the time the
// client spends paused does not count, as it does not for the stopped
// process, whose own deadline stops with it.
func (c *client) lockContext(ctx context.Context, l lock.Locker) (context.Context, context.CancelFunc) {
	if _, ok := l.(lock.Process); !ok {
		return c.opContext(ctx)
	}
	octx, cancel := context.WithCancelCause(ctx)
	go func() {
		budget, paused := c.cfg.OpTimeout, c.ctl.pausedTotal()
		for {
			t := c.clock.NewTimer(budget)
			select {
			case <-octx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if c.ctl.waitPaused(octx) != nil {
				return
			}
			now := c.ctl.pausedTotal()
			if budget, paused = now-paused, now; budget <= 0 {
				cancel(context.DeadlineExceeded)
				return
			}
		}
	}()
	return octx, func() { cancel(context.Canceled) }
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
// an unknown outcome, as in Jepsen, and a fresh locker: the old one may
// still hold a lock key, so it is closed, which ends its session.
func (c *client) newProcess() {
	c.mu.Lock()
	c.process = histories.Process(c.w.next.Add(1) - 1)
	c.mu.Unlock()
	c.announce()
	c.dropLocker()
}

// renumber gives the client a fresh process number after an operation with
// an unknown outcome, keeping l, its locker, whose lease the process now
// owns.
func (c *client) renumber(l *locker) {
	c.mu.Lock()
	c.process = histories.Process(c.w.next.Add(1) - 1)
	p := c.process
	c.mu.Unlock()
	c.announce()
	c.conn.Locker(l.Locker, p)
}

// announce records which process number the client works under now.
func (c *client) announce() {
	c.mu.Lock()
	p := c.process
	c.mu.Unlock()
	c.rec.Record(histories.Op{Type: histories.Info, F: histories.FProcess, Process: histories.Nemesis,
		Value: &histories.Value{Targets: []string{c.name}, Params: map[string]string{"process": p.String()}}})
}

// dropLocker closes the current locker, ending its session (which fails
// fast if the session is gone already).
func (c *client) dropLocker() {
	c.mu.Lock()
	l := c.locker
	c.locker = nil
	c.mu.Unlock()
	if l == nil {
		return
	}
	l.dropped.Store(true)
	c.conn.CloseLocker(l.Locker)
}

// ensureLocker makes a locker, retrying until it works, the run is stopped,
// a crash is requested or the run is interrupted; faults can make session
// grants fail for a while. A locker whose session is gone is replaced.
func (c *client) ensureLocker(ctx context.Context, stop <-chan struct{}) (*locker, error) {
	for {
		c.mu.Lock()
		l := c.locker
		c.mu.Unlock()
		if l != nil && !isDone(l.done()) {
			return l, nil
		}
		c.dropLocker()
		if err := c.ctl.step(ctx); err != nil {
			return nil, err
		}
		nctx, cancel := c.opContext(ctx)
		lk, err := c.recipe.New(nctx, c.env())
		cancel()
		if err == nil {
			return c.useLocker(lk), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if _, rerr := c.rec.Record(histories.Op{Type: histories.Info, F: histories.FLockerFailed, Process: histories.Nemesis,
			Value: &histories.Value{Targets: []string{c.name}, Params: map[string]string{"error": err.Error()}}}); rerr != nil {
			return nil, rerr
		}
		if stopped := c.backOff(ctx, stop); stopped {
			return nil, ctx.Err()
		}
	}
}

// retryDelay is how long a client waits before it tries again after it
// failed to reach the servers, as real clients back off: without it, a
// client whose server is down retries at once, thousands of times a second.
const retryDelay = 100 * time.Millisecond

// backOff waits retryDelay on the client's clock, or less if the client is
// crashed meanwhile; stopped says the run or ctx ended first.
func (c *client) backOff(ctx context.Context, stop <-chan struct{}) (stopped bool) {
	_, crashed := c.ctl.crashState()
	t := c.clock.NewTimer(retryDelay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return true
	case <-stop:
		return true
	case <-crashed:
	case <-t.C:
	}
	return false
}

// watchHeld records lease-lost if the grant's Done closes while the client
// still believes it holds it, unless the client dropped its locker on
// purpose.
func (c *client) watchHeld(h *holding) {
	w, ok := h.held.(lock.Watched)
	if !ok {
		return
	}
	done := w.Done()
	if done == nil {
		return
	}
	go func() {
		select {
		case <-done:
		case <-h.gone:
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.held == h && !h.locker.dropped.Load() {
			c.leaseLostLocked(h)
		}
	}()
}

// leaseLostLocked records lease-lost once for h. c.mu is held.
func (c *client) leaseLostLocked(h *holding) {
	if h.lost {
		return
	}
	h.lost = true
	c.stats.LeasesLost++
	params := map[string]string{
		"key":     h.key,
		"token":   strconv.FormatInt(h.token, 10),
		"process": h.process.String(),
	}
	if h.untokened {
		delete(params, "token")
	}
	if h.claim.Lease != "" {
		params["lease"] = h.claim.Lease
	}
	c.rec.Record(histories.Op{Type: histories.Info, F: histories.FLeaseLost, Process: histories.Nemesis, Key: h.key,
		Value: &histories.Value{Targets: []string{c.name}, Params: params}})
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

// guard reports whether the client, by its guard, still holds h.
func (c *client) guard(h *holding) bool {
	switch c.cfg.Guard {
	case GuardSession:
		if w, ok := h.held.(lock.Watched); ok && w.Done() != nil {
			return !isDone(w.Done())
		}
		return true // the recipe cannot tell
	case GuardClock:
		// The grant is trusted for the TTL from when it was granted, less
		// the margin, as measured on the client's own clock: right while
		// that clock keeps time, wrong when it falls behind.
		ttl := time.Duration(c.cfg.TTL) * time.Second
		return c.clock.Since(h.since) < ttl-c.cfg.margin()
	default:
		return true
	}
}

// thinking is a think in progress: when it began (host time) and how long
// it lasts on the client's clock.
type thinking struct {
	since  time.Time
	length time.Duration
}

func (c *client) setThinking(t thinking) {
	c.mu.Lock()
	c.thinking = t
	c.mu.Unlock()
}

func (c *client) setWaiting(since time.Time) {
	c.mu.Lock()
	c.waiting = since
	c.mu.Unlock()
}

// cycle is one acquire, critical section and release.
func (c *client) cycle(ctx context.Context, stop <-chan struct{}) error {
	if err := c.ctl.step(ctx); err != nil {
		return err
	}
	l, err := c.ensureLocker(ctx, stop)
	if l == nil {
		return err
	}
	key := c.cfg.Locks[c.rng.IntN(len(c.cfg.Locks))]

	if err := c.ctl.step(ctx); err != nil {
		return err
	}
	if err := c.record(histories.Invoke, histories.Acquire, key, nil, nil); err != nil {
		return err
	}
	began := time.Now() // stats are measured on host time
	lctx, cancel := c.lockContext(ctx, l.Locker)
	c.conn.Acquiring()
	c.setWaiting(began)
	c.sending(histories.Acquire)
	held, err := l.Acquire(lctx, key)
	c.answered(histories.Acquire, err)
	c.setWaiting(time.Time{})
	err = opError(lctx, err)
	cancel()
	switch {
	case errors.Is(err, lock.ErrNotAcquired):
		// The client definitely does not hold the lock (for a session
		// recipe, its lease is gone): start over with a new locker, but
		// for a lock in a process of its own, which a refusal leaves as
		// it was.
		if err := c.complete(histories.Fail, histories.Acquire, key, nil, err); err != nil {
			return err
		}
		if _, ok := l.Locker.(lock.Process); !ok {
			c.dropLocker()
		}
		return nil
	case err != nil:
		if err := c.complete(histories.Info, histories.Acquire, key, nil, err); err != nil {
			return err
		}
		c.newProcess()
		c.backOff(ctx, stop)
		return nil
	}
	h := &holding{key: key, token: held.Token(), held: held, locker: l, since: c.clock.Now(), gone: make(chan struct{})}
	if u, ok := held.(lock.Untokened); ok && u.Untokened() {
		h.untokened, h.token = true, c.w.untokened.Add(1)
	}
	c.mu.Lock()
	p := c.process
	c.mu.Unlock()
	h.grant = c.conn.Granted(l.Locker, held, p)
	h.claim = h.grant.Claim()
	granted := histories.GrantValue(h.token, h.claim.Decided, h.claim.Key)
	if by := h.claim.DecidedBy; by > 0 && (!h.untokened || h.claim.Created > 0) {
		granted.RevisionMax = &by
	}
	if made := h.claim.Created; made > 0 && h.untokened {
		granted.ClaimCreated = &made
	}
	granted.Session = h.claim.Session
	if h.untokened {
		granted.Token = nil
	}
	if err := c.complete(histories.OK, histories.Acquire, key, granted, nil); err != nil {
		return err
	}
	c.mu.Lock()
	c.stats.Acquisitions++
	c.stats.acquireWaits = append(c.stats.acquireWaits, time.Since(began))
	h.process = c.process
	c.held = h
	c.mu.Unlock()
	c.watchHeld(h)

	unknown, err := c.criticalSection(ctx, h)
	if err != nil {
		return err
	}

	// The holder releases what it holds under its own process, even after an
	// unknown read or write or a refused guard, so the mutex history stays
	// well-formed.
	if err := c.ctl.step(ctx); err != nil {
		return err
	}
	// A hook on the section's end keeps the holder there, still holding:
	// its release is not invoked yet.
	c.sending(histories.SectionEnd)
	c.answered(histories.SectionEnd, nil)
	if err := c.record(histories.Invoke, histories.Release, key, nil, nil); err != nil {
		return err
	}
	h.grant.Releasing()
	uctx, cancel := c.lockContext(ctx, l.Locker)
	c.sending(histories.Release)
	err = held.Release(uctx)
	c.answered(histories.Release, err)
	err = opError(uctx, err)
	cancel()
	h.grant.Released(err)
	retried := false
	if err != nil {
		err = c.complete(histories.Info, histories.Release, key, nil, err)
		unknown = true
		_, retried = l.Locker.(lock.Retrier)
	} else {
		err = c.complete(histories.OK, histories.Release, key, nil, nil)
	}
	c.forgetHeld()
	switch {
	case err != nil:
		return err
	case retried:
		// The locker settles its release itself, on its session, which the
		// client keeps, as a service does.
		c.renumber(l)
	case unknown:
		c.newProcess()
	}
	return nil
}

// criticalSection reads the resource, thinks, checks its guard and writes
// with the fencing token what the workload's Section makes of the value. It reports whether an
// operation's outcome was unknown.
func (c *client) criticalSection(ctx context.Context, h *holding) (unknown bool, err error) {
	key, token := h.key, h.token
	var read *histories.Value // a read under a token carries it
	if h.untokened {
		token = 0 // the resource's "no token"
	} else {
		read = histories.TokenValue(token)
	}
	if err := c.ctl.step(ctx); err != nil {
		return false, err
	}
	if err := c.record(histories.Invoke, histories.Read, key, read, nil); err != nil {
		return false, err
	}
	rctx, cancel := c.opContext(ctx)
	v, rerr := c.store.Read(rctx, key, token)
	rerr = opError(rctx, rerr)
	cancel()
	if rerr != nil {
		// A read changes nothing, so a failed one is a plain fail.
		return false, c.complete(histories.Fail, histories.Read, key, nil, rerr)
	}
	if err := c.complete(histories.OK, histories.Read, key, histories.ReadValue(v), nil); err != nil {
		return false, err
	}
	next, ok := c.w.section.Next(v)
	if !ok {
		c.mu.Lock()
		c.stats.SoldOut++
		c.mu.Unlock()
		return false, nil
	}

	d := c.thinkTime()
	c.setThinking(thinking{since: time.Now(), length: d})
	err = c.think(ctx, d)
	c.setThinking(thinking{})
	if err != nil {
		return false, err
	}
	if !c.guard(h) {
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

	wv := histories.WriteValue(token, next)
	if h.untokened {
		wv.Token = nil
	}
	if err := c.record(histories.Invoke, histories.Write, key, wv, nil); err != nil {
		return false, err
	}
	wctx, cancel := c.opContext(ctx)
	werr := opError(wctx, c.store.Write(wctx, key, token, next, h.held))
	cancel()
	switch {
	case werr == nil:
		if c.w.section.Sells() {
			c.mu.Lock()
			c.stats.Sales++
			c.mu.Unlock()
		}
		return false, c.complete(histories.OK, histories.Write, key, wv, nil)
	case errors.Is(werr, resource.ErrRejected):
		return false, c.complete(histories.Fail, histories.Write, key, wv, werr)
	default:
		return true, c.complete(histories.Info, histories.Write, key, wv, werr)
	}
}

// thinkTime draws a critical section's think time: mostly short, a share
// slow.
func (c *client) thinkTime() time.Duration {
	lo, hi := c.cfg.ThinkMin, c.cfg.ThinkMax
	if c.cfg.SlowShare > 0 && c.rng.Float64() < c.cfg.SlowShare {
		lo, hi = c.cfg.SlowRange()
	}
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(c.rng.Int64N(int64(hi-lo)+1))
}
