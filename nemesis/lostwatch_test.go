package nemesis

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// A session lock in a process of its own opens with the lost-watch race:
// a holder entering a short section has its links to the members slowed
// by 3/20 of the TTL, upstream alone, for one acquire of its own; third,
// after the outage and the giving-up cut. None where leases can be revoked, nor for a lock
// whose waiters locktest sees.
func TestLostWatchOpening(t *testing.T) {
	cfg, ss := sessionSchedules(t)
	for i, s := range ss {
		seed := i + 1
		w := s.Entries[2]
		if w.Fault != Slow || w.Target != TargetHolder || !slices.Contains(cfg.Clients, w.Fallback) || w.Duration != 2875*time.Millisecond ||
			w.Params["opening"] != "lost-watch" || w.Params["toxic"] != "latency" || w.Params["latency"] != "300ms" || w.Params["jitter"] != "0s" ||
			w.Params["trip"] != "300ms" || w.Params["ahead"] != "0s-500ms" || w.Params["link"] != "members" {
			t.Errorf("seed %d: opens with %+v, want the lost-watch race", seed, w)
		}
	}
	for _, c := range []struct {
		offers []string
		exec   bool
	}{{sessionKinds(), false}, {append(sessionKinds(), LeaseRevoke), true}} {
		cfg := swarmConfig()
		cfg.Aim, cfg.OpTimeout, cfg.TTL, cfg.Offers, cfg.UntoldWaiters = true, 5*time.Second, 2*time.Second, c.offers, c.exec
		for seed := int64(1); seed <= 20; seed++ {
			s, _ := Generate(seed, cfg)
			for _, e := range s.Entries {
				if e.Params["opening"] == "lost-watch" {
					t.Errorf("%v, exec %v, seed %d: %+v", c.offers, c.exec, seed, e)
				}
			}
		}
	}
}

// The lost-watch opening tries three times, each try a fault of its own
// right after the one before, which a try that held its aimed release
// leaves out (nothing done, nothing recorded).
func TestLostWatchTriesAgain(t *testing.T) {
	cfg, ss := sessionSchedules(t)
	for i, s := range ss {
		for k, e := range s.Entries[3:5] {
			before := s.Entries[2+k]
			if e.Params["try"] != strconv.Itoa(k+2) || e.Params["opening"] != "lost-watch" || e.Fault != Slow ||
				e.Duration != before.Duration || e.At < before.At+before.Duration || !slices.Contains(cfg.Clients, e.Fallback) {
				t.Errorf("seed %d: %+v after %+v, want the lost-watch race again", i+1, e, before)
			}
		}
		if s.Entries[2].Params["try"] != "" || s.Entries[5].Params["opening"] == "lost-watch" {
			t.Errorf("seed %d: tries %v, %v", i+1, s.Entries[2].Params, s.Entries[5].Params)
		}
	}

	// A try that held its aimed release leaves the tries after it out;
	// one that did not lets them strike.
	e := Entry{Fault: Slow, Target: TargetHolder, Fallback: "c1", Duration: time.Second,
		Params: map[string]string{"link": "members", "toxic": "latency", "latency": "300ms", "trip": "300ms", "opening": "lost-watch"}}
	for _, struck := range []bool{true, false} {
		env := &Env{Sys: prototype{}, watchStruck: struck}
		for try := 2; try <= 3; try++ {
			e.Params["try"] = strconv.Itoa(try)
			if _, err := (slow{}).Inject(context.Background(), env, e); errors.Is(err, errNotStruck) != struck {
				t.Errorf("try %d, the try before struck %v: %v", try, struck, err)
			}
		}
	}
}

// One try: the client last in line when the struck client asked has its
// release held until a trip and a half after the struck client's node is
// made (3 trips after it asked); the others go on through the line but
// queue again only once that node is made: a holder once its release
// returned, an idle client before its next acquire.
func TestLostWatchTry(t *testing.T) {
	const trip = 100 * time.Millisecond
	lc := &lineClients{fakeClients: &fakeClients{names: []string{"c0", "c1", "c2", "c3"}, holder: "c1", waiter: "c2"}, back: map[string]time.Time{}}
	env := &Env{Clients: lc}
	asked := time.Now()
	ahead, told, held := env.lostWatchTry(context.Background(), "c0", trip, asked)
	lc.wg.Wait()
	if ahead != "c2" || told || !held {
		t.Errorf("aimed at %q (told %v), held %v; want c2, guessed, held", ahead, told, held)
	}
	if got := lc.ops; !slices.Equal(got, []string{"c1 release", "c2 release", "c3 acquire"}) {
		t.Errorf("hooks %v", got)
	}
	made := asked.Add(3 * trip)
	for c, at := range map[string]time.Time{"c1": made, "c3": made, "c2": made.Add(trip + trip/2)} {
		if lc.back[c].Before(at) {
			t.Errorf("%s went on %v after the ask, before %v", c, lc.back[c].Sub(asked), at.Sub(asked))
		}
	}
}

// lineClients are fakeClients whose clients send the operation hooked at
// once, and note when each went on.
type lineClients struct {
	*fakeClients
	wg   sync.WaitGroup
	lmu  sync.Mutex
	ops  []string
	back map[string]time.Time
}

func (l *lineClients) Role(c string) string {
	if c == "c0" {
		return "waiter"
	}
	return l.fakeClients.Role(c)
}

func (l *lineClients) Intercept(c, op string, before func(), after func(error)) (func() bool, error) {
	l.lmu.Lock()
	l.ops = append(l.ops, c+" "+op)
	slices.Sort(l.ops)
	l.lmu.Unlock()
	l.wg.Go(func() {
		before()
		after(nil)
		l.lmu.Lock()
		l.back[c] = time.Now()
		l.lmu.Unlock()
	})
	return func() bool { return true }, nil
}
