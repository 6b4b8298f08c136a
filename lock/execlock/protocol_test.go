package execlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/lock/execlock"
)

// A grant's session (protocol version 2) is read as the client wrote it;
// a reply without one, as version 1 wrote it, tells none; one of another
// type breaks the protocol. The client is a shell loop that answers every
// request with the same reply under the request's id. (An external test:
// one inside the package would make go test compile it, and every package
// of this test binary that imports it, a second time.)
func TestReplySession(t *testing.T) {
	t.Parallel()
	const answer = `while IFS= read -r req; do id=${req#*'"id":'}; printf '{"id":%s,%s\n' "${id%%,*}" "$1"; done`
	acquire := func(t *testing.T, reply string) (lock.Held, error) {
		t.Helper()
		l, err := execlock.New("/bin/sh", "-c", answer, "client", reply).New(context.Background(),
			lock.Env{Name: "c0", Backend: "etcd", Prefix: "/l/", TTL: 2, OpTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l.Acquire(context.Background(), "lock")
	}
	t.Run("session", func(t *testing.T) {
		t.Parallel()
		h, err := acquire(t, `"ok":true,"token":7,"key":"/l/lock-0000000001","session":"0x1000a3b2c0004"}`)
		if err != nil || h.(lock.Sessioned).Session() != "0x1000a3b2c0004" || h.(lock.Keyed).Key() != "/l/lock-0000000001" {
			t.Errorf("a grant with its session: %v, %v", h, err)
		}
	})
	t.Run("version-1", func(t *testing.T) {
		t.Parallel()
		h, err := acquire(t, `"ok":true,"token":7}`)
		if err != nil || h.(lock.Sessioned).Session() != "" {
			t.Errorf("a version-1 grant: %v, %v", h, err)
		}
	})
	t.Run("number", func(t *testing.T) {
		t.Parallel()
		if _, err := acquire(t, `"ok":true,"session":12}`); err == nil || !strings.Contains(err.Error(), "not the protocol's") {
			t.Errorf("a session that is a number: want the line called not the protocol's, got %v", err)
		}
	})
}

// A replacement still starting when its operation's time runs out is taken
// to be up (a slow runtime on a loaded machine: its first request will
// tell), also when that time is the client's clock's, which ends the
// context by cancelling it with cause DeadlineExceeded; a run that stops
// meanwhile (cause Canceled) ends it. Before, the first was taken as the
// second: Java clients started again and again at a load of 30, killed
// each time before they were up, and liveness blamed the lock.
func TestNewTimedOutIsUp(t *testing.T) {
	t.Parallel()
	const answer = `while IFS= read -r req; do id=${req#*'"id":'}; printf '{"id":%s,"ok":true,"token":7}\n' "${id%%,*}"; done`
	env := lock.Env{Name: "c0", Backend: "etcd", Prefix: "/l/", TTL: 2, OpTimeout: 30 * time.Second}
	for _, tc := range []struct {
		cause error
		up    bool
	}{{context.DeadlineExceeded, true}, {context.Canceled, false}} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(tc.cause) // before New: its process cannot have settled
		l, err := execlock.New("/bin/sh", "-c", answer).New(ctx, env)
		if !tc.up {
			if err == nil {
				l.Close()
				t.Errorf("cause %v: a locker; want the start ended", tc.cause)
			}
			continue
		}
		if err != nil {
			t.Fatalf("cause %v: %v; want it taken to be up", tc.cause, err)
		}
		h, err := l.Acquire(context.Background(), "lock")
		l.Close()
		if err != nil || h.Token() != 7 {
			t.Errorf("cause %v: its first request: %v, %v", tc.cause, h, err)
		}
	}
}
