package redislock_test

import (
	"context"
	"fmt"
	"os"

	"github.com/locktest/locktest/backend/redis/redislock"
	"github.com/locktest/locktest/backend/redis/redisserver"
	"github.com/locktest/locktest/clock"
	"github.com/locktest/locktest/lock"
)

// A team's service takes the redis-setnx lock around a job. To try it
// under faults: start real servers, give each client a Conn over its own
// links, and hand the recipe a lock.Env with the client's clock.
//
// (No Output line: the example needs redis-server, which `go test` may not
// have; the tests above run the same steps and skip without it.)
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "redislock-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	d, err := redisserver.Start(ctx, redisserver.Config{Topology: redisserver.Single, Dir: dir})
	if err != nil {
		panic(err) // e.g. redis-server not installed
	}
	defer d.Close()

	eps, err := d.Endpoints("worker-1") // proxies "worker-1->r0", ...
	if err != nil {
		panic(err)
	}
	conn, err := redislock.Dial(redislock.DialConfig{Servers: eps})
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	recipe := redislock.SetNX(redislock.DefaultPollInterval)
	locker, err := recipe.New(ctx, lock.Env{Conn: conn, Clock: clock.New(), TTL: 5, Prefix: "/jobs/", Name: "worker-1"})
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	held, err := locker.Acquire(ctx, "nightly-report")
	if err != nil {
		panic(err)
	}
	// The job: pass held.Token() to every write the job makes, so that the
	// store can refuse a holder whose lock has since passed to another.
	fmt.Println("token", held.Token())
	select {
	case <-held.(lock.Watched).Done():
		fmt.Println("lost the lock mid-job: stop writing")
	default:
	}
	if err := held.Release(ctx); err != nil {
		panic(err)
	}
}
