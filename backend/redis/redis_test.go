package redis

import (
	"slices"
	"testing"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/redis/redislock"
	"github.com/locktest/locktest/backend/redis/redisserver"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/system"
)

// The deployment a run starts: Redlock's independent masters for a recipe
// whose grant takes a majority, a master with a replica and Sentinel when
// a fault needs a failover, else one master; and the faults --nemesis all
// then draws from are the ones that system offers.
func TestTopology(t *testing.T) {
	majority := slices.ContainsFunc(redislock.Builtins, func(b lock.Builtin) bool { return b.Name == redislock.RedlockName && b.Majority })
	if !majority {
		t.Fatal("redlock's grant does not take a majority")
	}
	for _, c := range []struct {
		plan backend.Plan
		want redisserver.Topology
		all  []string
	}{
		{backend.Plan{Recipe: redislock.RedlockName, Majority: true, Families: []string{"crash"}}, redisserver.Independent(5),
			[]string{"isolate", "clock", "pause", "crash", "slow"}},
		{backend.Plan{Recipe: redislock.SetNXName, Families: []string{"pause", nemesis.Failover}}, redisserver.Replicated,
			[]string{"isolate", "clock", "pause", "crash", "slow"}},
		{backend.Plan{Recipe: redislock.SetNXName, Families: []string{nemesis.All}}, redisserver.Single,
			[]string{"isolate", "clock", "pause", "crash", "slow"}},
	} {
		if got := topology(c.plan); got != c.want {
			t.Errorf("%+v: topology %v, want %v", c.plan, got, c.want)
		}
		proto := (&Options{}).Prototype(c.plan)
		if all := nemesis.Expand([]string{nemesis.All}, nemesis.Offered(proto)); !slices.Equal(all, c.all) {
			t.Errorf("%+v: --nemesis all is %v, want %v", c.plan, all, c.all)
		}
		if _, fails := proto.(system.Failoverer); fails != (c.want == redisserver.Replicated) {
			t.Errorf("%+v: fails over %v", c.plan, fails)
		}
	}
}
