package nemesis

import (
	"context"
	"testing"
	"time"
)

// expirer is a system of two servers whose keys with a TTL are given; it
// records what it expired.
type expirer struct {
	keys    map[int][]string
	expired []string
}

func (*expirer) Describe() string                                      { return "fake redis" }
func (*expirer) MemberNames() []string                                 { return []string{"r0", "r1"} }
func (*expirer) Endpoints(string) ([]string, error)                    { return nil, nil }
func (*expirer) LogDir() string                                        { return "" }
func (x *expirer) Expiring(_ context.Context, i int) ([]string, error) { return x.keys[i], nil }
func (x *expirer) ExpireEarly(_ context.Context, i int) ([]string, error) {
	x.expired = append(x.expired, x.keys[i]...)
	return x.keys[i], nil
}

// An emulated clock jump on a grant strikes a holder entering a section
// with work ahead, whose key is still there when it expires, not whoever
// holds the lock at that instant (a short section releases its key first:
// the jump then expired nothing).
func TestClockJumpAimsAtAHolderWithWorkAhead(t *testing.T) {
	t.Parallel()
	fc := &fakeClients{names: []string{"c0", "c1", "c2"}, holder: "c0", entering: "c2", think: 3 * time.Second}
	x := &expirer{keys: map[int][]string{1: {"lock"}}}
	env := &Env{Sys: x, Clients: fc}
	e := Entry{Fault: ClockJumpEmulated, Target: "r0", Duration: time.Millisecond, Params: map[string]string{"on": "grant"}}
	inj, err := clockJump{}.Inject(context.Background(), env, e)
	if err != nil {
		t.Fatal(err)
	}
	if inj.Params["holder"] != "c2" || inj.Params["aimed"] != "true" {
		t.Errorf("struck holder %q (aimed %q), want c2 entering its section", inj.Params["holder"], inj.Params["aimed"])
	}
	if len(inj.Targets) != 1 || inj.Targets[0] != "r1" || inj.Hold == nil {
		t.Fatalf("targets %v, want r1, the server with a key", inj.Targets)
	}
	if got := inj.Hold(context.Background(), e.Duration); got["expired"] != "lock" || len(x.expired) != 1 {
		t.Errorf("hold: %v, expired %v", got, x.expired)
	}
}
