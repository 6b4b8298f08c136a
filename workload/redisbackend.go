package workload

import (
	"context"

	"github.com/locktest/locktest/backend/redis/redislock"
	"github.com/locktest/locktest/backend/redis/redisserver"
)

// redisBackend is Redis as the workload reaches it: each client's
// connection is a *redislock.Conn over the client's own links to every
// server (and, with Sentinel, to every Sentinel, following the master they
// name); the observer reads the servers' keyspace events
// (redisobserver.go). Redis has no leases of a client's own and no
// revisions: the clock lease and the revision tracking are etcd's.
type redisBackend struct{ d *redisserver.Deployment }

// Redis is the Backend of a redisserver deployment.
func Redis(d *redisserver.Deployment) Backend { return redisBackend{d} }

func (b redisBackend) Name() string { return "redis" }

func (b redisBackend) ResourceProxy(client, upstream string) (string, error) {
	return b.d.ResourceProxy(client, upstream)
}

func (b redisBackend) connect(c *client) (conn, error) {
	servers, err := b.d.Endpoints(c.name)
	if err != nil {
		return conn{}, err
	}
	cfg := redislock.DialConfig{Servers: servers}
	if sentinels := b.d.Sentinels(); len(sentinels) > 0 {
		// The Sentinels' own addresses, as Sentinel hands them out: the
		// Dialer takes each over the client's own link to it.
		for _, s := range sentinels {
			cfg.Sentinels = append(cfg.Sentinels, s.Addr)
		}
		if cfg.Dialer, err = b.d.Dialer(c.name); err != nil {
			return conn{}, err
		}
		cfg.MasterName = redisserver.MasterName
	}
	rc, err := redislock.Dial(cfg)
	if err != nil {
		return conn{}, err
	}
	return conn{env: rc, close: rc.Close}, nil
}

func (b redisBackend) observe(ctx context.Context, w *Workload) (Observer, error) {
	return startRedisObserver(ctx, w, b.d)
}
