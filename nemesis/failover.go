package nemesis

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/locktest/locktest/system"
)

// Failover is the failover family's --nemesis name, and its one kind. It
// loses the master the way asynchronous replication loses a lock: the
// master's replication to its replica is cut, a client takes the lock (on
// the master only), the master is killed, and its watcher (Redis's
// Sentinel) promotes the replica, which never saw the lock; the next client
// takes it there. The old master stays down for the fault's duration and
// comes back empty.
const Failover = "failover"

type failover struct{}

// Spec says what the family is, as data.
func (failover) Spec() Spec {
	return Spec{
		Name: Failover,
		Doc:  "Asked for by name (not in `all`), with `redis-setnx` or `redis-del`, which then run on a master r0, its replica r1 and 3 Sentinels: the replication to r1 is cut, a client is granted the lock (the second grant after the cut, one entering a section longer than 1.25 TTL) on r0 only, r0 is killed, and Sentinel promotes r1, which never saw the lock; r0 comes back empty after the fault's duration (2-4 s). Params: `promoted_by`, `promotion_took`, `holder`, `holder_token`. With a PostgreSQL recipe the run starts a streaming replica pg1 of the primary pg0 (pg_basebackup): the replication is cut the same way, pg0 is killed, pg1 promoted by `pg_promote()` and every client's link moved to it; advisory locks, never replicated, are all gone. One per run (redisserver and pgserver fail over from the starting roles only): a schedule draws one, a later scripted one is skipped with the reason (`skipped`). Refused against etcd, ZooKeeper, MySQL and `redlock`.",
		// It needs a replica and a watcher that promotes it (a backend
		// whose system has them starts them when the faults include a
		// failover), and a way to bring the old master back. Who promoted
		// the replica, and on what grounds, is the system's to say (its
		// Promotion, in the fault's params).
		Kinds: []Kind{{Name: Failover, Needs: []system.Capability{system.CapFailover, system.CapCrashMember}, Says: func(ts []string, _ map[string]string) string {
			if len(ts) != 2 {
				return "the master " + targets(ts) + " was lost and its replica was promoted, which had not seen the lock"
			}
			return "the master " + ts[0] + " was lost and " + ts[1] + " was promoted, which had not seen the lock"
		}}},
		// How long the old master stays down after the promotion.
		Durations: fixed(2*time.Second, 4*time.Second),
		// The system fails over once per run (from the starting roles).
		OncePerRun: true,
		// A failover changes the servers a run starts.
		ByNameOnly: true,
		// Without clients there is no holder to aim at: the cut is untargeted.
		Untargeted: true,
	}
}

// Draw aims at the holder of the next grant: the lock it takes after the
// cut exists on the master only.
func (failover) Draw(g *Gen, e *Entry, d Range) {
	if len(g.cfg.Clients) > 0 {
		e.Target, e.Fallback = TargetHolder, g.client()
		// A section longer than the promotion (about 1.5-2.5 s) and its
		// lock's TTL: the holder still works when the next client is
		// granted the lock on the promoted replica.
		g.aim(e, g.cfg.TTL+g.cfg.TTL/4, 0)
	}
	e.Duration = g.dur(d)
}

// promotionWait bounds the wait for a promotion once the master is lost:
// Sentinel promotes in about DownAfter + 1 s.
const promotionWait = 20 * time.Second

// afterCut waits (up to aimWait) for a holder granted after the moment it
// is called (the replication cut, members paused), and, with ahead ("MIN-MAX" or "MIN-", as the
// holder faults' param), one that has just begun a section of that
// length, still ahead of it when the replica is promoted. A grant counts
// as after the cut from the second on: the first may have been taken on
// the master before the cut and reported only after it (one grant at a
// time is ever in flight).
func (env *Env) afterCut(ctx context.Context, ahead string) (string, int64, bool) {
	lo, hi, err := parseAhead(ahead)
	aimed := err == nil
	wctx, cancel := context.WithTimeout(ctx, aimWait)
	defer cancel()
	var seen []int64
	for look := newLook(); ; {
		h, tok, ok := env.Clients.Holder("")
		if ok && !slices.Contains(seen, tok) {
			seen = append(seen, tok)
		}
		if ok && len(seen) >= 3 || ok && len(seen) == 2 && tok == seen[1] {
			// The second token seen was granted after the cut.
			if !aimed {
				return h, tok, true
			}
			if a, ok := env.Clients.Entering(lo, hi, look.since()); ok && a == h {
				return h, tok, true
			}
		}
		if !sleepUntil(wctx, time.Now().Add(5*time.Millisecond)) {
			return "", 0, false
		}
	}
}

// Inject cuts the replication and waits for a fresh grant (which then
// exists on the master only); Hold, once the fault's start is in the
// history, loses the master and waits for the promotion, then for the
// fault's duration. Stop restarts the old master, empty.
func (failover) Inject(ctx context.Context, env *Env, e Entry) (*Injected, error) {
	inj := &Injected{Params: map[string]string{}}
	f, err := need[system.Failoverer](env)
	if err != nil {
		return inj, err
	}
	c, err := need[crasher](env)
	if err != nil {
		return inj, err
	}
	if why := f.FailedOver(); why != "" {
		// A later entry of a schedule: recorded, with why nothing was done.
		inj.Params["skipped"] = why
		return inj, nil
	}
	if err := f.CutReplication(); err != nil {
		return inj, err
	}
	if e.Target == TargetHolder && env.Clients != nil {
		// No later than the fault must strike to last its duration in
		// the run: a loaded run that found no holder for aimWait (10 s)
		// struck 10.5 s into a 15 s run, and the run ended before the
		// promotion (TestRuns/RunRedisFailover).
		actx, cancel := env.aimContext(ctx)
		h, tok, ok := env.afterCut(actx, e.Params["ahead"])
		cancel()
		if ctx.Err() != nil {
			return inj, errNotStruck
		}
		if ok {
			inj.Params["holder"], inj.Params["holder_token"] = h, strconv.FormatInt(tok, 10)
			inj.Params["role"] = env.Clients.Role(h)
		} else {
			inj.Params["holder"] = "none found: the master was lost all the same"
		}
	}
	// Failover runs from the starting roles: r0 is lost, r1 promoted.
	names := env.Sys.MemberNames()
	inj.Targets = []string{names[0], names[1]}
	var (
		p         system.Promotion
		failedErr error
	)
	inj.Hold = func(ctx context.Context, d time.Duration) map[string]string {
		// Once the master is killed the promotion is awaited even past
		// the run's end: cut off there, the fault failed with "no
		// Sentinel answered" (every query cut by the run's end) while
		// the Sentinels' logs showed the switch of master.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), promotionWait)
		p, failedErr = f.Failover(pctx)
		cancel()
		if failedErr != nil {
			return nil
		}
		sleepUntil(ctx, time.Now().Add(d))
		return map[string]string{"promoted": names[p.New], "promoted_by": p.How,
			"promotion_took": p.Took.Round(time.Millisecond).String()}
	}
	inj.Stop = func(ctx context.Context) error {
		if failedErr != nil {
			return failedErr
		}
		began := time.Now()
		err := c.RestartMember(ctx, p.Old)
		inj.Params["restart_took"] = time.Since(began).Round(time.Millisecond).String()
		return err
	}
	return inj, nil
}
