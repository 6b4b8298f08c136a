package nemesis

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/system"
)

// A pause of the holder with param mid_section strikes at once a holder
// with that much think time ahead, not armed for its write; without one
// (or without the param) it is armed as drawn, for the write of a holder
// still in its think if there is one, else of the holder.
func TestPauseStrikesAHolderMidSection(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		left   time.Duration
		params map[string]string
		want   string
		aimed  string
	}{
		{"mid-section", time.Second, map[string]string{"before_write": "true", "mid_section": "200ms"}, "pause c2 3s false", "true"},
		{"too little left", 100 * time.Millisecond, map[string]string{"before_write": "true", "mid_section": "200ms"}, "pause c2 3s true", ""},
		{"not aimed", time.Second, map[string]string{"before_write": "true"}, "pause c2 3s true", ""},
		{"none thinking", 0, map[string]string{"before_write": "true"}, "pause c0 3s true", ""},
	} {
		fc := &fakeClients{names: []string{"c0", "c1", "c2"}, holder: "c0", midway: "c2", left: c.left}
		if c.left == 0 {
			fc.midway = ""
		}
		env := &Env{Clients: fc}
		e := Entry{Fault: PauseClient, Target: TargetHolder, Fallback: "c1", Duration: 3 * time.Second, Params: c.params}
		inj, err := pause{}.Inject(context.Background(), env, e)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(fc.calls) != 1 || fc.calls[0] != c.want {
			t.Errorf("%s: calls %v, want %q", c.name, fc.calls, c.want)
		}
		if inj.Params["aimed"] != c.aimed || inj.Params["selector"] != TargetHolder {
			t.Errorf("%s: params %v", c.name, inj.Params)
		}
	}
}

// armedClients are fakeClients whose pause armed for a write is pending
// (it has not struck) or, once struck, in force until until.
type armedClients struct {
	*fakeClients
	pending bool
	until   time.Time
}

func (a *armedClients) Disarm(c string) (bool, time.Time) {
	a.fakeClients.Disarm(c)
	return a.pending, a.until
}

// An armed pause ends with its fault: at its stop one that has not struck
// is called off (param struck=false), and one that struck is waited out.
// A pause that strikes at once has nothing to stop.
func TestArmedPauseEndsWithItsFault(t *testing.T) {
	t.Parallel()
	inject := func(fc Clients, params map[string]string) *Injected {
		e := Entry{Fault: PauseClient, Target: TargetHolder, Fallback: "c1", Duration: 3 * time.Second, Params: params}
		inj, err := pause{}.Inject(context.Background(), &Env{Clients: fc}, e)
		if err != nil {
			t.Fatal(err)
		}
		return inj
	}
	armed := map[string]string{"before_write": "true"}

	pending := &armedClients{fakeClients: &fakeClients{names: []string{"c0", "c1"}}, pending: true}
	inj := inject(pending, armed)
	if inj.Stop == nil {
		t.Fatal("an armed pause has no stop")
	}
	if err := inj.Stop(context.Background()); err != nil || inj.Params["struck"] != "false" {
		t.Errorf("stop of a pending pause: %v, params %v", err, inj.Params)
	}
	if got := pending.calls; len(got) != 2 || got[0] != "pause c1 3s true" || got[1] != "disarm c1" {
		t.Errorf("calls %v, want the pause armed on the fallback, then disarmed", got)
	}

	struck := &armedClients{fakeClients: &fakeClients{names: []string{"c0", "c1"}}, until: time.Now().Add(50 * time.Millisecond)}
	inj = inject(struck, armed)
	if err := inj.Stop(context.Background()); err != nil || inj.Params["struck"] != "" || time.Now().Before(struck.until) {
		t.Errorf("stop of a pause that struck: %v, params %v, returned before its end", err, inj.Params)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	struck.until = time.Now().Add(time.Hour)
	if err := inject(struck, armed).Stop(ctx); err == nil {
		t.Error("a pause outlasting the stop's time: no error")
	}

	if inj := inject(&armedClients{fakeClients: &fakeClients{names: []string{"c0", "c1"}}}, nil); inj.Stop != nil {
		t.Error("a pause that strikes at once has a stop")
	}
}

// A member pause until a grant cuts every client's links to the paused
// members until it stops (param links=cut): what the clients send them is
// dropped, not read when they resume. It stops with the members resumed
// and the links whole.
func TestPauseUntilGrantCutsTheLinks(t *testing.T) {
	t.Parallel()
	c, _ := startCluster(t)
	fc := &fakeClients{names: []string{"c0", "c1"}, holder: "c0"}
	env := &Env{Sys: c, Clients: fc}
	e := Entry{Fault: PauseMember, Target: "m1", Duration: time.Minute, Params: map[string]string{"until": "grant"}}
	inj, err := pause{}.Inject(context.Background(), env, e)
	if inj.Stop == nil {
		t.Fatalf("no stop (%v)", err)
	}
	cutNow := func() map[string]int {
		ps, err := c.Toxiproxy().Proxies()
		if err != nil {
			t.Fatal(err)
		}
		// The nemesis's own toxics (an embedded member's pause holds its
		// links too).
		cut := map[string]int{}
		for name, p := range ps {
			for _, x := range p.ActiveToxics {
				if strings.HasPrefix(x.Name, "nemesis-"+PauseMember+"-") {
					cut[name]++
				}
			}
		}
		return cut
	}
	got := cutNow()
	if err != nil || inj.Params["links"] != "cut" || !c.Paused(1) || len(got) != 2 || got["c0->m1"] != 2 || got["c1->m1"] != 2 {
		t.Errorf("paused: %v, m1 paused %v, params %v, links with toxics %v; want c0's and c1's to m1 cut both ways", err, c.Paused(1), inj.Params, got)
	}
	if err := inj.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := cutNow(); len(got) > 0 || c.Paused(1) {
		t.Errorf("stopped: m1 paused %v, links with toxics %v", c.Paused(1), got)
	}
}

// memberPauses records when its members were paused; it has no links.
type memberPauses struct {
	system.System
	mu     sync.Mutex
	paused time.Time
}

func (*memberPauses) MemberNames() []string  { return []string{"m0", "m1", "m2"} }
func (*memberPauses) ResumeMember(int) error { return nil }
func (*memberPauses) Paused(int) bool        { return false }
func (m *memberPauses) PauseMember(int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.paused.IsZero() {
		m.paused = time.Now()
	}
	return nil
}

// A member pause until a grant strikes once a client holds the lock, so
// that the next grant is one after the cut: struck while every client was
// in its first acquire, the first grant was in doubt and a second was
// needed, which a loaded host did not make within the pause
// (redlock-restart, unknown).
func TestPauseUntilGrantStrikesUnderAHolder(t *testing.T) {
	t.Parallel()
	sys := &memberPauses{}
	fc := &fakeClients{names: []string{"c0", "c1"}}
	held := time.Now().Add(200 * time.Millisecond)
	time.AfterFunc(time.Until(held), func() {
		fc.mu.Lock()
		fc.holder = "c1"
		fc.mu.Unlock()
	})
	e := Entry{Fault: PauseMember, Target: "m1", Duration: time.Minute, Params: map[string]string{"until": "grant", "with": "m2"}}
	inj, err := pause{}.Inject(context.Background(), &Env{Sys: sys, Clients: fc}, e)
	if err != nil {
		t.Fatal(err)
	}
	sys.mu.Lock()
	paused := sys.paused
	sys.mu.Unlock()
	if paused.Before(held) || inj.Params["held_at_cut"] != "c1" {
		t.Fatalf("paused %s before the first grant, params %v; want paused under c1", held.Sub(paused), inj.Params)
	}
}
