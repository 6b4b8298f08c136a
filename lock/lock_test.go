package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/cluster"
	"github.com/locktest/locktest/lock"
)

func TestBuiltins(t *testing.T) {
	for _, name := range lock.Names() {
		r, err := lock.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		if r.Name() != name {
			t.Errorf("Builtin(%q).Name() = %q", name, r.Name())
		}
	}
	if _, err := lock.Builtin("redlock"); err == nil {
		t.Error("unknown recipe accepted")
	}
	if !lock.Broken(lock.NoRenewName) || lock.Broken(lock.MutexName) {
		t.Error("Broken")
	}
}

// Each recipe, driven directly: two clients take turns, tokens grow, and
// the second waits while the first holds.
func TestRecipesDirect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, name := range lock.Names() {
		t.Run(name, func(t *testing.T) {
			r, _ := lock.Builtin(name)
			var lockers []lock.Locker
			for _, cn := range []string{"a", "b"} {
				cli, err := c.Client(name + "-" + cn)
				if err != nil {
					t.Fatal(err)
				}
				defer cli.Close()
				env := lock.Env{Client: cli, Clock: clock.New(), TTL: 2, Prefix: "/direct/" + name + "/", Name: cn}
				l, err := r.New(ctx, env)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				lockers = append(lockers, l)
			}
			h, err := lockers[0].Acquire(ctx, "x")
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan lock.Held, 1)
			go func() {
				h2, err := lockers[1].Acquire(ctx, "x")
				if err != nil {
					t.Error(err)
				}
				got <- h2
			}()
			select {
			case <-got:
				t.Fatal("the second client acquired while the first held")
			case <-time.After(300 * time.Millisecond):
			}
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
			var h2 lock.Held
			select {
			case h2 = <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("the second client did not acquire after the release")
			}
			if h2 == nil {
				return
			}
			if h2.Token() <= h.Token() {
				t.Errorf("token %d after %d", h2.Token(), h.Token())
			}
			if err := h2.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
