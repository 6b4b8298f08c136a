package nemesis

import (
	"context"
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
