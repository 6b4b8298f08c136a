package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/links"
	"github.com/locktest/locktest/system"
)

// Lost replies: one operation of a client reaches the server, which applies
// it, and its reply never comes back; the client sees its connection break,
// an error, as it would if a network path died right after the request went
// through. Jepsen's operation of unknown outcome, on demand.
//
// How: just before the client sends the operation (the workload's hook,
// Clients.Intercept), every link of the client to the members drops what
// the servers send (a toxiproxy timeout toxic of timeout 0 on the
// downstream only; links.ReplyToxic where the links are ours, which also
// tells when the server answered), so the request goes through and the
// reply is dropped; after the fault's duration, once the server has
// answered (at most answerWait more, or TTL/4), the toxic is removed,
// which closes the connections it held: the cut. A lease renewal is no
// operation of the workload's: its fault drops the replies for a window
// that holds the next renewal (a renewal goes every TTL/3).
const (
	// LostReplyRelease loses the reply to the holder's next release.
	LostReplyRelease = "lost-reply-release"
	// LostReplyAcquire loses the reply to a client's next acquire, or to a
	// waiter's acquire in flight (its grant).
	LostReplyAcquire = "lost-reply-acquire"
	// LostReplyRenew loses the reply to a client's next lease renewal.
	LostReplyRenew = "lost-reply-renew"
)

type lostReply struct{}

// Spec says what the family is, as data.
func (lostReply) Spec() Spec {
	links := []system.Capability{system.CapLinks}
	return Spec{
		Name: "lost-reply",
		Doc:  "One operation of one client reaches the server, which applies it, and its reply never comes back (Jepsen's operation of unknown outcome): `lost-reply-release` (the holder's next release; drawn twice as often; with param `hold_next`, a duration, the client's next section is then held open that long by a pause armed before its next write, so that a retry of the release in doubt finds the next grant alive, and the fault stays in force until the client is granted again and that section is over, at most two TTLs for the grant: param `regranted` says after how long; with param `request` `lost`, the release's request is held too and never reaches the server, whose grant stays; an aimed schedule opens with one of each), `lost-reply-acquire` (the holder's next acquire, a queued waiter's acquire in flight, whose reply is its grant, or any client's next) and `lost-reply-renew` (the next lease renewal, or watchdog extend, of a holder with work ahead or of a waiter). Just before the client sends the operation (a hook in the workload, as a failpoint in the client would be), every link of that client gets a toxiproxy `timeout` toxic of timeout 0 on its downstream only: the request goes through, whatever the servers send is held. After the fault's duration (TTL/8 to TTL/4), once the server has answered the request (the toxic, locktest's own on its in-process toxiproxy, reads what the server sends: on etcd's gRPC links the end of a stream, not its PINGs or keep-alive messages; on ZooKeeper's a reply to a request, not a ping's reply or a watch's event; on Redis's and the databases' any byte), at most 3 s or TTL/4 more, the toxic is removed, which closes the held connections: the cut. The stop says `server_answered` (`yes`; `no, ...`, and then `missed`: whether the request took effect is unknown, and the story says so; not known on an outside toxiproxy or TLS links). The client sees its connection break, an error (etcd: `Unavailable ... error reading from server: EOF`; Redis: `EOF`; ZooKeeper: go-zookeeper's `zk: connection closed` on the pending request, which the ZooKeeper recipes settle themselves: see below), the history records the operation `info` (unknown), and the fault's stop says `reply=lost`, `client_saw` and `op`; a lost acquire reply on a client's request stays in force until the acquire has its answer, at most the operation timeout (a client that made its claim twice waits behind the first until it gives up: no next fault then ends its session and hides it); the story says \"its reply was lost\", the report marks the cut on the client's lane. A release already in flight is never struck (its reply is on its way); the struck client goes on only once all its links are whole again. `TestLostReplyEndToEnd` (backend/etcd) checks on real members that the server applied the release (its key is gone, read directly, while the client still waits) and the client saw an error.",
		// Releases twice as often as the others: a release whose reply is
		// lost is where retries go wrong (etcd#22082).
		Kinds: []Kind{
			{Name: LostReplyRelease, Needs: links, Weight: 2, Clients: true, Says: lostSays("release")},
			{Name: LostReplyAcquire, Needs: links, Clients: true, Says: lostSays("acquire")},
			{Name: LostReplyRenew, Needs: links, Clients: true, Says: lostSays("lease renewal")},
		},
		// How long the replies are dropped before the cut: ample time for a
		// server to apply a request (a few milliseconds here), short against
		// the lease, whose renewals' replies are dropped too.
		Durations:      func(ttl time.Duration) Range { return Range{ttl / 8, ttl / 4} },
		DurationParams: []string{"hold_next"},
	}
}

// lostSays is Kind.Says for a lost reply to op.
func lostSays(op string) func([]string, map[string]string) string {
	return func(ts []string, params map[string]string) string {
		answered := params["server_answered"]
		switch {
		case params["request"] == "lost":
			return fmt.Sprintf("%s's %s never reached the server: its request was lost, and its reply", targets(ts), op)
		case strings.HasPrefix(answered, "no"):
			return fmt.Sprintf("%s's %s was sent, and its link was cut before the server answered: whether it took effect is unknown", targets(ts), op)
		case answered == "yes":
			return fmt.Sprintf("%s's %s reached the server, which answered, but its reply was lost", targets(ts), op)
		}
		// Not known (a renewal's, one the fault could not read, or the
		// fault's start, before its end tells).
		return fmt.Sprintf("%s's %s was sent, and its reply was lost", targets(ts), op)
	}
}

func (lostReply) Draw(g *Gen, e *Entry, d Range) {
	switch e.Fault {
	case LostReplyRelease:
		g.roleTarget(e, 0.85, 0)
		e.Duration = g.dur(d)
	case LostReplyAcquire:
		// The holder's next acquire (it goes back in line), a waiter's
		// acquire in flight (the reply is its grant), or any client's next.
		g.roleTarget(e, 0.4, 0.4)
		e.Duration = g.dur(d)
	default:
		g.roleTarget(e, 0.7, 0.3)
		// The window holds the next renewal (one goes every TTL/3) and
		// ends soon after it: a longer one would lose more, and the client
		// would give its lease up. A holder entering a section longer than
		// it does not release meanwhile, and a waiter queued behind one
		// stays queued.
		e.Duration = (g.cfg.TTL / 3).Round(time.Millisecond) + g.between(g.cfg.TTL/32, g.cfg.TTL/16)
		if e.Target == TargetHolder || e.Target == TargetWaiter {
			e.Params["ahead"] = (e.Duration + g.cfg.TTL/4).String() + "-"
		}
	}
}

// answerWait bounds how long the stop of a lost reply waits for the
// server's answer before the cut, and for the client to learn that its
// connection broke after it.
const answerWait = 3 * time.Second

// cutSettle is how long a client struck by a lost reply waits after the
// cut before it goes on: long enough for its transport to have seen every
// cut connection close (well under a millisecond on loopback here, tens of
// milliseconds on a loaded machine), so that the cut loses the one reply
// and no later request.
const cutSettle = 100 * time.Millisecond

func (lostReply) Inject(ctx context.Context, env *Env, e Entry) (*Injected, error) {
	inj := &Injected{Params: map[string]string{}}
	lk, err := need[linker](env)
	if err != nil {
		return inj, err
	}
	name, err := env.client(ctx, e, inj, false)
	if err != nil {
		return inj, err
	}
	ps, err := lk.Links(name)
	if err != nil {
		return inj, err
	}
	if ps, err = memberLinks(env, ps, e.Params["members"]); err != nil {
		return inj, err
	}
	var ts toxics
	inj.Stop = func(context.Context) error { return ts.remove() }
	streams := []string{"downstream"}
	if e.Params["request"] == "lost" && e.Fault == LostReplyRelease {
		// Param request=lost: the release's request is held too, and the
		// cut closes its connection before the server ever sees it: the
		// client sees the same error, and the server still holds its
		// grant (etcd#22123: Resign forgot leadership all the same).
		streams = append(streams, "upstream")
		inj.Params["request"] = "lost"
	}
	drop := func() error {
		for _, p := range ps {
			if err := ts.add(p, e.Fault, "timeout", toxiclient.Attributes{"timeout": 0}, streams...); err != nil {
				return err
			}
		}
		return nil
	}
	if e.Fault == LostReplyRenew {
		return inj, drop()
	}
	// The replies are dropped by a toxic that tells when the server
	// answered (links.ReplyToxic): the cut waits for it, so that the
	// request was applied (or refused) before its connection closed, and
	// not dropped with it on a machine too loaded to serve it within the
	// fault's duration. An outside toxiproxy knows no such toxic: the
	// replies are dropped as before, and whether the server answered is
	// not known (ans stays nil).
	var ans *links.Answers
	proto := ""
	if m, ok := env.Sys.(system.Multiplexed); ok {
		proto = m.LinkProtocol()
	}
	if inj.Params["request"] != "lost" && proto != "tls" {
		timeout := drop
		drop = func() error {
			a := links.Watch()
			for i, p := range ps {
				err := ts.add(p, e.Fault, links.ReplyToxic, toxiclient.Attributes{"tag": a.Tag(), "proto": proto}, "downstream")
				if err != nil && i == 0 && strings.Contains(err.Error(), "invalid toxic type") {
					a.Close()
					return timeout()
				}
				if err != nil {
					a.Close()
					return err
				}
			}
			ans = a
			return nil
		}
	}

	op := histories.Release
	if e.Fault == LostReplyAcquire {
		op = histories.Acquire
	}
	sent := make(chan struct{})
	answers := make(chan error, 1)
	whole := make(chan struct{}) // closed once the cut is complete
	var dropErr error
	intercept := env.Clients.Intercept
	if op == histories.Acquire && inj.Params["role"] == TargetHolder {
		intercept = env.interceptAfterSection
	}
	cancel, err := intercept(name, op, func() { dropErr = drop(); close(sent) }, func(err error) {
		answers <- err
		// The client goes on once all its links are whole again and their
		// cut has reached it: cut one by one, and each closed connection
		// learned of by the client's transport on its own (its reader sees
		// the end of the stream), the next request would be caught too.
		select {
		case <-whole:
			time.Sleep(cutSettle)
		case <-time.After(answerWait):
		}
	})
	if err != nil {
		return inj, err
	}
	inFlight := false
	select {
	case <-sent:
		inFlight = true // armed on an operation already sent
	default:
		wctx, wcancel := context.WithTimeout(ctx, aimWait)
		select {
		case <-sent:
		case <-wctx.Done():
			if !cancel() {
				wcancel()
				if ctx.Err() != nil {
					return inj, errNotStruck
				}
				return inj, fmt.Errorf("%s sent no %s within %s", name, op, aimWait)
			}
			<-sent // it fired as the wait ended
		}
		wcancel()
	}
	inj.Params["op"] = op
	if inFlight {
		inj.Params["in_flight"] = "true"
	}
	var (
		answered bool
		result   error
	)
	inj.Stop = func(sctx context.Context) error {
		if !answered && ans != nil {
			// The cut waits for the server's answer, a while beyond the
			// fault's duration: answerWait, or a quarter of the TTL if
			// shorter, as the replies to the client's lease renewals are
			// dropped meanwhile too.
			bound := answerWait
			if env.TTL > 0 {
				bound = min(bound, env.TTL/4)
			}
			select {
			case <-ans.Answered():
				inj.Params["server_answered"] = "yes"
			case result = <-answers:
				answered = true
			case <-time.After(bound):
				inj.Params["server_answered"] = "no, within " + bound.String() + " after the fault's duration"
				inj.Params["missed"] = strings.TrimPrefix(inj.Params["missed"]+"; ", "; ") +
					"the server had not answered the " + op + " when its link was cut: whether it took effect is unknown"
			}
		}
		if ans == nil && inj.Params["request"] != "lost" {
			inj.Params["server_answered"] = "not known (the links' toxiproxy cannot tell)"
		}
		if ans != nil {
			ans.Close()
		}
		err := ts.remove() // the cut: removing the toxic closes what it held
		hold, perr := time.ParseDuration(e.Params["hold_next"])
		if perr == nil && op == histories.Release {
			// Param hold_next: the client's next section is held open
			// this long (a pause armed before its next write, before the
			// client goes on), so that a retry of the release in doubt,
			// which a service sends after its next grant, finds that
			// grant alive (etcd#22082).
			err = errors.Join(err, env.Clients.Pause(name, hold, true))
		}
		close(whole)
		cut := time.Now()
		if answered {
			inj.Params["reply"] = "arrived" // before the cut: nothing was lost
		} else {
			wait := answerWait
			if op == histories.Acquire && !inFlight {
				// An acquire whose claim was made twice waits behind the
				// first until it gives up (ZooKeeper's ghost node): the
				// fault stays in force until the acquire has its answer,
				// at most the operation timeout, so that no next fault
				// ends the client's session first and hides what it did.
				wait = max(wait, env.OpTimeout)
			}
			select {
			case result = <-answers:
				answered = true
				inj.Params["reply"] = "lost"
				inj.Params["answered_after"] = time.Since(cut).Round(time.Millisecond).String()
			case <-time.After(wait):
				inj.Params["reply"] = "lost"
				inj.Params["client_saw"] = "no answer within " + wait.String()
			}
		}
		if answered {
			inj.Params["client_saw"] = outcome(result)
		}
		if perr == nil && op == histories.Release {
			inj.Params["regranted"] = env.regranted(sctx, name, hold)
		}
		return err
	}
	if dropErr != nil {
		return inj, dropErr
	}
	inj.Hold = func(ctx context.Context, d time.Duration) map[string]string {
		if inFlight && op == histories.Acquire {
			// A queued waiter's reply is its grant: the lock must pass on
			// first, within d, so that the replies of the waiter's lease
			// renewals are not dropped for so long that it gives its
			// lease up.
			if passed := env.lockPassed(ctx, d); passed {
				inj.Params["passed"] = "true"
			}
		}
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-ctx.Done():
		case <-timer.C:
		case result = <-answers:
			answered = true
		}
		return nil
	}
	return inj, nil
}

// interceptAfterSection arms before and after on client's op (as
// Clients.Intercept) once the client's current or next section ends: a
// holder's next acquire, never one it has sent already. Armed at once, a
// holder that had let go meanwhile (a 200-300 ms section on a loaded host)
// was struck on its next acquire in flight, whose create had been
// answered: no ghost node (zk-ghost-node).
func (env *Env) interceptAfterSection(client, op string, before func(), after func(error)) (func() bool, error) {
	var (
		mu   sync.Mutex
		next func() bool
	)
	cancelEnd, err := env.Clients.Intercept(client, histories.SectionEnd, func() {
		// Cannot fail: the client was accepted just now, and op is one
		// the fault's own arm names.
		c, _ := env.Clients.Intercept(client, op, before, after)
		mu.Lock()
		next = c
		mu.Unlock()
	}, func(error) {})
	if err != nil {
		return nil, err
	}
	return func() bool {
		if !cancelEnd() {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		return next != nil && next()
	}, nil
}

// outcome words what a client saw of an operation: "ok", or its error.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return "error: " + s
}

// memberLinks are the links of ps (one per member, in order) to the members
// named in list ("" or "all": every one).
func memberLinks(env *Env, ps []*toxiclient.Proxy, list string) ([]*toxiclient.Proxy, error) {
	if list == "" || list == "all" {
		return ps, nil
	}
	names := env.Sys.MemberNames()
	var out []*toxiclient.Proxy
	for _, m := range strings.Split(list, ",") {
		i := slices.Index(names, m)
		if i < 0 || i >= len(ps) {
			return nil, fmt.Errorf("param members: no member %q", m)
		}
		out = append(out, ps[i])
	}
	return out, nil
}

// lockPassed waits, at most max, until the grant held now (if any) is
// released or another is made; false if neither came.
func (env *Env) lockPassed(ctx context.Context, max time.Duration) bool {
	_, tok, _ := env.Clients.Holder("")
	wctx, cancel := context.WithTimeout(ctx, max)
	defer cancel()
	for {
		if _, ntok, ok := env.Clients.Holder(""); !ok || ntok != tok {
			return true
		}
		if !sleepUntil(wctx, time.Now().Add(5*time.Millisecond)) {
			return false
		}
	}
}

// regrantWait bounds, in TTLs, how long the stop of a lost release reply
// with hold_next waits for its client's next grant.
const regrantWait = 2

// regranted waits, with the fault still in force, until client, which
// lost its release reply, is granted again and its next section, held
// open for hold, is over: the retry of the release in doubt goes out in
// it, and a fault after it would else often end the client's session
// before its next grant (mutex-retry seed 7: twice a partition of its
// member, 0.3 s after the cut). At most regrantWait TTLs for
// the grant. It says how long the grant took, or that it did not come.
func (env *Env) regranted(ctx context.Context, client string, hold time.Duration) string {
	began := time.Now()
	wctx, cancel := context.WithTimeout(ctx, regrantWait*env.TTL)
	defer cancel()
	// Still in the release whose reply was lost, then waiting: the next
	// time it holds is its next grant.
	for _, want := range []bool{false, true} {
		for (env.Clients.Role(client) == TargetHolder) != want {
			if !sleepUntil(wctx, time.Now().Add(5*time.Millisecond)) {
				return "not within " + (regrantWait * env.TTL).String()
			}
		}
	}
	took := time.Since(began).Round(time.Millisecond)
	sleepUntil(ctx, time.Now().Add(hold))
	return "after " + took.String()
}
