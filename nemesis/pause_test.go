package nemesis

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"
)

// A pause of the holder with param mid_section strikes at once a holder
// with that much think time ahead, not armed for its write; without one
// (or without the param) it is armed as drawn.
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
		{"too little left", 100 * time.Millisecond, map[string]string{"before_write": "true", "mid_section": "200ms"}, "pause c0 3s true", ""},
		{"not aimed", time.Second, map[string]string{"before_write": "true"}, "pause c0 3s true", ""},
	} {
		fc := &fakeClients{names: []string{"c0", "c1", "c2"}, holder: "c0", midway: "c2", left: c.left}
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

// isPause says whether e is a pause holderPauseFirst may move.
func isPause(e Entry) bool {
	return e.Fault == PauseClient || e.Fault == PauseMember && e.Params["until"] == ""
}

// The first pause of a schedule is the holder's when it has one: two
// entries swap what they strike, every slot keeps its time and duration,
// and the schedule pauses the same members and clients as before.
func TestHolderPauseFirst(t *testing.T) {
	cfg := swarmConfig()
	cfg.Faults = []string{"pause", "isolate"}
	moved := 0
	for seed := int64(1); seed <= 60; seed++ {
		plain, _ := Generate(seed, cfg)
		es := slices.Clone(plain.Entries)
		holderPauseFirst(es)
		first, holders := -1, 0
		for i, e := range es {
			p := plain.Entries[i]
			if e.At != p.At || e.Duration != p.Duration {
				t.Fatalf("seed %d: entry %d moved from %v+%v to %v+%v", seed, i, p.At, p.Duration, e.At, e.Duration)
			}
			if isPause(e) && first < 0 {
				first = i
			}
			if e.Fault == PauseClient && e.Target == TargetHolder {
				holders++
			}
		}
		if holders > 0 && (es[first].Fault != PauseClient || es[first].Target != TargetHolder) {
			t.Errorf("seed %d: first pause %+v, with %d of the holder", seed, es[first], holders)
		}
		what := func(es []Entry) []string {
			var out []string
			for _, e := range es {
				out = append(out, e.Fault+" "+e.Target+" "+e.Fallback)
			}
			slices.Sort(out)
			return out
		}
		if !reflect.DeepEqual(what(es), what(plain.Entries)) {
			t.Errorf("seed %d: strikes %v, were %v", seed, what(es), what(plain.Entries))
		}
		differ := 0
		for i := range es {
			if !reflect.DeepEqual(es[i], plain.Entries[i]) {
				differ++
			}
		}
		if differ != 0 && differ != 2 {
			t.Errorf("seed %d: %d entries changed", seed, differ)
		}
		if differ == 2 {
			moved++
		}
	}
	if moved == 0 {
		t.Error("no schedule of 60 had a pause before the holder's first")
	}
}
