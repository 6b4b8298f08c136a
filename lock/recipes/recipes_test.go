package recipes_test

import (
	"context"
	"strings"
	"testing"

	"github.com/locktest/locktest/backend/etcd/etcdlock"
	"github.com/locktest/locktest/backend/redis/redislock"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/lock/recipes"
)

func TestLookup(t *testing.T) {
	names := recipes.Names()
	if len(names) != len(etcdlock.Builtins)+len(redislock.Builtins) {
		t.Errorf("%d names for %d etcd and %d Redis recipes", len(names), len(etcdlock.Builtins), len(redislock.Builtins))
	}
	for _, name := range names {
		r, err := recipes.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if r.Name() != name {
			t.Errorf("Lookup(%q).Name() = %q", name, r.Name())
		}
	}
	if _, err := recipes.Lookup("zookeeper"); err == nil || !strings.Contains(err.Error(), "mutex") {
		t.Errorf("unknown recipe: %v, want an error listing the known ones", err)
	}
	if !recipes.Broken(etcdlock.NoRenewName) || recipes.Broken(etcdlock.MutexName) || recipes.Broken(redislock.RedlockName) || !recipes.Broken(redislock.DelName) {
		t.Error("Broken does not follow the backends' lists")
	}
	if !recipes.NoFencingToken(redislock.RedlockName) || !recipes.NoFencingToken(redislock.DelName) || recipes.NoFencingToken(redislock.SetNXName) || recipes.NoFencingToken(etcdlock.MutexName) {
		t.Error("NoFencingToken does not follow the backends' lists")
	}
}

// An etcd recipe refuses a connection that is not an etcd client, with an
// error that says so, rather than failing later.
func TestEtcdRecipeRefusesOtherConnections(t *testing.T) {
	r, err := recipes.Lookup(etcdlock.MutexName)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.New(context.Background(), lock.Env{Conn: "redis://127.0.0.1:6379", TTL: 2, Name: "c0"})
	if err == nil || !strings.Contains(err.Error(), "needs an etcd client") {
		t.Errorf("New with a non-etcd connection: %v", err)
	}
}
