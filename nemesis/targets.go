package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/system"
)

// Env is what faults act on: the system under test and the workload's
// clients (nil without a workload).
type Env struct {
	Sys     system.System
	Clients Clients
	// TTL is the clients' lease TTL; OpTimeout their operation timeout
	// (0: not known).
	TTL, OpTimeout time.Duration
	// aimBy is when a fault being injected must strike at the latest to
	// last its duration within the run's fault phase (zero: no bound):
	// an aimed fault waits for its moment no longer.
	aimBy time.Time
	// calm is when the fault before the one being injected stopped (zero:
	// none before it).
	calm time.Time
	// watchStruck says the lost-watch opening's last try held its aimed
	// release into the window: the tries after it are left out.
	watchStruck bool
}

// The capabilities, by the names the families use.
type (
	linker       = system.Linker
	partitioner  = system.Partitioner
	pauser       = system.MemberPauser
	crasher      = system.Crasher
	leaser       = system.Leaser
	reconfigurer = system.Reconfigurer
)

// need returns the system as capability T, or the error that it lacks it.
func need[T any](env *Env) (T, error) {
	s, ok := env.Sys.(T)
	if !ok {
		return s, fmt.Errorf("%s lacks a capability this fault needs (%T)", env.Sys.Describe(), (*T)(nil))
	}
	return s, nil
}

// freshGrantWait bounds how long a fault that should hit a holder early in
// its critical section waits for the next grant.
const freshGrantWait = 2 * time.Second

// minWaiterWait is how long a client must have waited in Acquire to count
// as a waiter: long enough to be queued behind a holder.
const minWaiterWait = 20 * time.Millisecond

// client resolves e's client target, records it as the fault's target, and
// notes in its params how it was resolved and the role the client had when
// struck. With fresh set (isolation and lease faults), a holder target
// waits (briefly) for a fresh grant and strikes its holder, so that the
// holder still has its critical section ahead of it when its lease runs
// out: that is when it does damage. A waiter target waits (as briefly) for
// a client queued in Acquire.
func (env *Env) client(ctx context.Context, e Entry, inj *Injected, fresh bool) (string, error) {
	if env.Clients == nil {
		return "", errors.New("no clients")
	}
	name, err := env.resolveClient(ctx, e, inj.Params, fresh)
	if err != nil {
		return "", err
	}
	if _, seen := inj.Params["role"]; !seen { // as its selector saw it, if it looked
		inj.Params["role"] = env.Clients.Role(name)
	}
	inj.Targets = []string{name}
	return name, nil
}

func (env *Env) resolveClient(ctx context.Context, e Entry, params map[string]string, fresh bool) (string, error) {
	var name string
	var err error
	switch e.Target {
	case TargetHolder, TargetWaiter:
		name, err = env.findClient(ctx, e, params, fresh)
	case TargetIdle:
		params["selector"] = e.Target
		name, err = env.idleClient(ctx, e, params)
	default:
		return e.Target, nil
	}
	if err == nil && ctx.Err() != nil {
		// The run ended while the fault waited for its moment.
		return "", errNotStruck
	}
	return name, err
}

// errNotStruck is a fault that the run's end overtook before it found its
// target: nothing was done, and nothing is recorded.
var errNotStruck = errors.New("the run ended before the fault found its target")

func (env *Env) findClient(ctx context.Context, e Entry, params map[string]string, fresh bool) (string, error) {
	// A scripted entry may ask any fault to strike at a fresh grant.
	fresh = fresh || e.Params["on"] == "grant"
	params["selector"] = e.Target
	wctx, cancel := context.WithTimeout(ctx, freshGrantWait)
	defer cancel()
	if e.Target == TargetWaiter {
		if g, ok := e.Params["giving_up"]; ok {
			gives, _ := time.ParseDuration(g)
			if w, ok := env.givingUp(ctx, gives, e.Duration, params); ok {
				params["aimed"] = "true"
				return w, nil
			}
		}
		aim, aimed := e.Params["ahead"]
		limit, _ := time.ParseDuration(e.Params["waited"])
		if e.Params["waiter"] == "newest" {
			// The client that began to wait last, once it is fresh
			// (param waited) and so is every waiter (param queue),
			// while a holder has its section ahead (param ahead).
			queue, _ := time.ParseDuration(e.Params["queue"])
			if (aimed || limit > 0 || queue > 0) && env.aimNewest(ctx, aim, limit, queue) {
				params["aimed"] = "true"
			}
			if w, ok := env.Clients.Newest(minWaiterWait); ok {
				return w, nil
			}
		} else if aimed {
			// Aimed: a waiter queued behind a holder that has just
			// begun a long section, so that it stays queued through
			// the fault.
			if env.aimWaiter(ctx, aim, limit) {
				params["aimed"] = "true"
			} else if w, ok := env.freshWaiter(ctx, limit); ok {
				params["fresh_queue"] = "true"
				return w, nil
			}
		}
		for {
			if w, ok := env.Clients.Waiter(minWaiterWait); ok {
				return w, nil
			}
			if !sleepUntil(wctx, time.Now().Add(5*time.Millisecond)) {
				break
			}
		}
	} else {
		if aim, ok := e.Params["ahead"]; ok {
			if h, ok := env.aim(ctx, aim); ok {
				params["aimed"] = "true"
				return h, nil
			}
		}
		h, tok, ok := env.Clients.Holder("")
		if fresh {
			for wctx.Err() == nil {
				if nh, ntok, nok := env.Clients.Holder(""); nok && ntok != tok {
					h, ok = nh, true
					params["fresh_grant"] = "true"
					break
				}
				sleepUntil(wctx, time.Now().Add(5*time.Millisecond))
			}
		}
		if !ok && (e.Params["on"] == "grant" || e.Fault == LostReplyRelease) {
			// A script's strike at a grant waits for the run's first
			// grant as long as the fault can still strike: on a loaded
			// machine it came 2.1-2.3 s into zk-ghost-node's run (load
			// 33), and a strike that fell back on a waiter's acquire in
			// flight made no ghost. So does a lost release reply struck
			// in a hand-off: a waiter's release comes only after its
			// grant and section, too late for its client to be granted
			// again while the fault holds (mutex-retry, seeds 603, 604,
			// 721-723: fallen on a waiter each time, and no retried
			// release struck a later grant).
			h, ok = env.firstHolder(ctx)
		}
		if ok {
			return h, nil
		}
	}
	if e.Fallback == "" {
		return "", fmt.Errorf("no client is the %s and no fallback", e.Target)
	}
	params["resolved"] = "fallback"
	if e.Params["on"] == "grant" {
		// What the script staged on a grant did not happen: a scenario
		// that finds no violation then says unknown, not a miss.
		params["missed"] = "no client held the lock by the strike: it fell on " + e.Fallback + ", the fallback"
	}
	return e.Fallback, nil
}

// firstHolder waits for a client to hold the lock, at most until the fault
// must strike (aimContext).
func (env *Env) firstHolder(ctx context.Context) (string, bool) {
	wctx, cancel := env.aimContext(ctx)
	defer cancel()
	for {
		if h, _, ok := env.Clients.Holder(""); ok {
			return h, true
		}
		if !sleepUntil(wctx, time.Now().Add(5*time.Millisecond)) {
			return "", false
		}
	}
}

// workAhead is the least think time of a section that a fault striking
// its holder at once (a lease revoked, keys expired early) aims at: the
// holder still works, its key or lease still there when the fault strikes.
const workAhead = 200 * time.Millisecond

// aimWait bounds how long a fault aimed at a holder with work ahead waits
// for one; slow sections come every few seconds.
const aimWait = 10 * time.Second

// aimContext bounds a look for a fault's moment: aimWait, and no later
// than the fault must strike (aimBy). In a short run the moment may not
// come before the run ends: the fault then strikes what its selector
// finds, not nothing.
func (env *Env) aimContext(ctx context.Context) (context.Context, context.CancelFunc) {
	wait := aimWait
	if !env.aimBy.IsZero() {
		wait = min(wait, time.Until(env.aimBy))
	}
	return context.WithTimeout(ctx, wait)
}

// aim waits for a holder entering a critical section whose think time is in
// the range "MIN-MAX"; with MAX empty (no bound), a holder already in a
// section with at least MIN of it left serves too, at once: waiting for the
// next long section to begin made each strike seconds late.
func (env *Env) aim(ctx context.Context, ahead string) (string, bool) {
	lo, hi, err := parseAhead(ahead)
	if err != nil {
		return "", false
	}
	wctx, cancel := env.aimContext(ctx)
	defer cancel()
	for look := newLook(); ; {
		if h, ok := env.Clients.Entering(lo, hi, look.since()); ok {
			return h, true
		}
		if h, ok := env.Clients.Ahead(lo); ok && hi == 0 {
			return h, true
		}
		if !sleepUntil(wctx, time.Now().Add(5*time.Millisecond)) {
			return "", false
		}
	}
}

// aimWaiter waits, as aim does, for a holder entering a section of the
// range ahead; with limit set (param waited), for one behind which every
// waiter has waited less than limit, so that the first in line, struck
// then, is granted before its acquire gives up. A section begun behind a
// long one, whose waiters had queued through it, is passed over (mutex-3.4
// seed 5: the first in line, struck 3.6 s into its wait, gave up 1.4 s
// later, before the holder released).
//
// With limit set it looks for two TTLs, not aimWait: where waiters do not
// queue in turn (a lock on one fixed key, whose waiters all wait from one
// release to the next) none is ever fresh, and ten seconds of a 30 s run
// went by before the strike (unlock-any, seeds 1-5: caught in 0, and in 2
// as on main once bounded).
func (env *Env) aimWaiter(ctx context.Context, ahead string, limit time.Duration) bool {
	wait := aimWait
	if limit > 0 {
		wait = min(wait, 2*env.TTL)
	}
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		if _, ok := env.aim(actx, ahead); !ok {
			return false
		}
		if _, stale := env.Clients.Waiter(limit); limit <= 0 || !stale {
			return true
		}
		// The next section: this one is entered no more once the
		// slack is past.
		if !sleepUntil(actx, time.Now().Add(enteredSlack)) {
			return false
		}
	}
}

// freshWaiter waits, at most freshGrantWait, for a queue whose waiters
// have all waited less than limit (0: none is looked for), and returns
// the first in line then: a strike that found no section begun behind a
// fresh queue strikes a waiter that has time left in its acquire, not
// the one longest in line, whose acquire gives up before it can be
// granted where one or two slow sections held every client queued since
// the start of the run (mutex-3.4 seed 13: struck 4.5 s into its wait,
// and it gave up 0.5 s later; the waiters that gave up then queued
// again, fresh, 1.7 s before the lock passed on).
func (env *Env) freshWaiter(ctx context.Context, limit time.Duration) (string, bool) {
	if limit <= 0 {
		return "", false
	}
	wctx, cancel := context.WithTimeout(ctx, freshGrantWait)
	defer cancel()
	for {
		if _, stale := env.Clients.Waiter(limit); !stale {
			if w, ok := env.Clients.Waiter(minWaiterWait); ok {
				return w, true
			}
		}
		if !sleepUntil(wctx, time.Now().Add(5*time.Millisecond)) {
			return "", false
		}
	}
}

// givingUp waits, as aim does, for the waiter longest in its acquire to
// have waited wait, once every waiter began its acquire since the fault
// before stopped (env.calm): the giving-up opening, its acquire about to
// give up. A waiter begun before may give up for that fault, not on its
// lock: struck right after the outage opening as the longest waiter, each
// waiter struck had begun its acquire just before the crash, and it was
// granted, or ended unknown ("connection retries ran out"), not refused
// (kazoo_py.py --lock-per-acquire, seeds 1, 2, 4, 5: no orphan).
// Meanwhile, once every waiter began since the calm, it holds the
// release of the holder there then until the strike's cut ends (once a
// look, at most releaseHoldMax), noted in params (held) if it was, so
// that the line waits as behind a slow section and the first in line,
// struck, has waited behind the same node since it queued: kazoo's Lock
// times each wait from its predecessor's last change, not from the
// acquire's start. Without the hold, a wait that long in an acquire begun
// after the outage came within aimWait in 3 of 5 runs (seeds 1-5); a hold
// with older waiters still ahead had them give up, each giving the one
// behind it a fresh wait, and the waiter struck at 3.6 s of its acquire
// was granted at the heal, 4.5 s in (seeds 1, 3, 4).
func (env *Env) givingUp(ctx context.Context, wait, cut time.Duration, params map[string]string) (string, bool) {
	wctx, cancel := env.aimContext(ctx)
	defer cancel()
	struck := make(chan struct{})
	var letGo time.Time // written before struck is closed
	var (
		armed  string
		disarm = func() bool { return false }
	)
	defer func() {
		if disarm() {
			params["held"] = armed
		}
		close(struck)
	}()
	for {
		// Armed on the holder there now: one armed on a holder that had
		// sent its release already would hold its next one instead.
		since := time.Since(env.calm)
		_, old := env.Clients.Waiter(since)
		if h, _, ok := env.Clients.Holder(""); ok && !old && h != armed && !disarm() {
			if c, err := env.Clients.Intercept(h, histories.Release, func() {
				bound := time.Now().Add(releaseHoldMax)
				select {
				case <-struck:
					if letGo.Before(bound) {
						bound = letGo
					}
					sleepUntil(ctx, bound)
				case <-ctx.Done():
				case <-time.After(releaseHoldMax):
				}
			}, func(error) {}); err == nil {
				armed, disarm = h, c
			}
		}
		if w, ok := env.Clients.Waiter(wait); ok && !old {
			letGo = time.Now().Add(cut)
			return w, true
		}
		if !sleepUntil(wctx, time.Now().Add(5*time.Millisecond)) {
			return "", false
		}
	}
}

// aimNewest waits, at most aimWait (and no later than the fault must
// strike), for the client that began to wait last to have waited less
// than limit (0: any wait), and every waiter less than queue (0: any
// wait), while a holder has a section of the range ahead left ("": any
// moment), and says whether it found that. A strike that ends the
// waiter's lease (a pause past it) or steps its clock ahead must leave its
// acquire time to be granted: most of a run goes by in its few slow
// sections, and behind one every waiter had queued for seconds (exec
// etcdmutex34: the struck waiter gave up; pg-lease-client-clock seed 24:
// the newest waiter had waited 3.2 s, and a clock 3 s ahead ended its 5 s
// acquire as the server granted it).
func (env *Env) aimNewest(ctx context.Context, ahead string, limit, queue time.Duration) bool {
	actx, cancel := env.aimContext(ctx)
	defer cancel()
	for {
		if ahead != "" {
			if _, ok := env.aim(actx, ahead); !ok {
				return false
			}
		}
		_, stale := env.Clients.Waiter(queue)
		if env.newestFresh(limit) && (queue <= 0 || !stale) {
			return true
		}
		if !sleepUntil(actx, time.Now().Add(5*time.Millisecond)) {
			return false
		}
	}
}

// newestFresh says whether the client that began to wait last has waited
// less than limit (0: any wait): it is not the newest of those that
// waited limit or more.
func (env *Env) newestFresh(limit time.Duration) bool {
	w, ok := env.Clients.Newest(minWaiterWait)
	if !ok {
		return false
	}
	if limit <= 0 {
		return true
	}
	stale, ok := env.Clients.Newest(limit)
	return !ok || stale != w
}

// enteredSlack is how long before a fault began to wait a section may have
// begun and still count as entered while it waited.
const enteredSlack = 50 * time.Millisecond

// look is a fault's polling for a holder entering a section: each look
// asks for the sections begun since the previous one (and enteredSlack
// before it), however late it comes. A fixed window of the last 50 ms
// missed every section begun while a loaded machine kept the poller
// waiting longer than that, and the fault never struck.
type look struct{ last time.Time }

func newLook() *look { return &look{last: time.Now()} }

// since is the window of this look, and starts the next one.
func (l *look) since() time.Duration {
	now := time.Now()
	d := now.Sub(l.last) + enteredSlack
	l.last = now
	return d
}

// parseAhead reads an "ahead" parameter: "MIN-MAX" or "MIN-".
func parseAhead(s string) (lo, hi time.Duration, err error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return 0, 0, fmt.Errorf("ahead %q: want MIN-MAX or MIN-", s)
	}
	if lo, err = time.ParseDuration(a); err != nil {
		return 0, 0, fmt.Errorf("ahead %q: %w", s, err)
	}
	if b != "" {
		if hi, err = time.ParseDuration(b); err != nil {
			return 0, 0, fmt.Errorf("ahead %q: %w", s, err)
		}
	}
	if lo < 0 || (b != "" && hi < lo) {
		return 0, 0, fmt.Errorf("ahead %q: not a range", s)
	}
	return lo, hi, nil
}

// member resolves e's member target to its index, records it as the
// fault's target, and notes in its params how it was resolved.
func (env *Env) member(ctx context.Context, e Entry, inj *Injected) (int, error) {
	i, err := env.memberIndex(ctx, e, inj.Params)
	if err != nil {
		return 0, err
	}
	inj.Targets = []string{env.Sys.MemberNames()[i]}
	return i, nil
}

func (env *Env) memberIndex(ctx context.Context, e Entry, params map[string]string) (int, error) {
	name := e.Target
	if name == TargetLeader {
		params["selector"] = TargetLeader
		err := errors.New("the system has no leader")
		if l, ok := env.Sys.(system.Leaderer); ok {
			lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			var i int
			i, err = l.Leader(lctx)
			cancel()
			if err == nil {
				return i, nil
			}
		}
		if e.Fallback == "" {
			return 0, err
		}
		params["resolved"] = "fallback"
		name = e.Fallback
	}
	i := slices.Index(env.Sys.MemberNames(), name)
	if i < 0 {
		return 0, fmt.Errorf("no member %q", name)
	}
	return i, nil
}
