package redis

import (
	"context"
	"time"

	"github.com/locktest/locktest/backend/redis/redislock"
	"github.com/locktest/locktest/backend/redis/redisserver"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/workload"
)

// run is Redis as the workload reaches it in one run (a workload.Backend):
// each client's connection is a *redislock.Conn over the client's own links
// to every server (and, with Sentinel, to every Sentinel, following the
// master they name); the observer reads the servers' keyspace events
// (observer.go) and attributes a deletion to a grant by the values the
// connections note (grantValues). Redis has no leases of a client's own and
// no revisions.
type run struct {
	d      *redisserver.Deployment
	values *grantValues
}

// Workload is the workload.Backend of a redisserver deployment, for one
// run.
func Workload(d *redisserver.Deployment) workload.Backend {
	return &run{d: d, values: newGrantValues()}
}

func (r *run) Name() string { return Name }

func (r *run) ResourceProxy(client, upstream string) (string, error) {
	return r.d.ResourceProxy(client, upstream)
}

func (r *run) Connect(c workload.Client) (workload.Conn, error) {
	servers, err := r.d.Endpoints(c.Name)
	if err != nil {
		return nil, err
	}
	cfg := redislock.DialConfig{Servers: servers}
	if sentinels := r.d.Sentinels(); len(sentinels) > 0 {
		// The Sentinels' own addresses, as Sentinel hands them out: the
		// Dialer takes each over the client's own link to it.
		for _, s := range sentinels {
			cfg.Sentinels = append(cfg.Sentinels, s.Addr)
		}
		if cfg.Dialer, err = r.d.Dialer(c.Name); err != nil {
			return nil, err
		}
		cfg.MasterName = redisserver.MasterName
	}
	rc, err := redislock.Dial(cfg)
	if err != nil {
		return nil, err
	}
	return &conn{run: r, name: c.Name, rc: rc, eps: servers}, nil
}

func (r *run) Observe(ctx context.Context, keys workload.Keys, rec workload.Recorder) (workload.Observer, error) {
	return startObserver(ctx, r.d, r.values, keys, rec)
}

// conn is one client's connection.
type conn struct {
	run  *run
	name string
	rc   *redislock.Conn
	eps  []string
}

func (c *conn) Env() any { return c.rc }

func (c *conn) Endpoints() []string { return c.eps }

func (c *conn) Close() error { return c.rc.Close() }

// Locker: a Redis locker keeps no lease.
func (c *conn) Locker(lock.Locker, histories.Process) string { return "" }

func (c *conn) CloseLocker(l lock.Locker) error { return l.Close() }

func (c *conn) Acquiring() {}

// Granted notes the value a grant set (redislock.Valued; for a Held that
// tells its key only, lock.Keyed, the key's value on the servers), by
// which the observer tells whose key a deletion deleted. The history names
// no claim: Redis orders no deletion against a grant.
func (c *conn) Granted(_ lock.Locker, held lock.Held, p histories.Process) workload.Grant {
	var key, value string
	switch v := held.(type) {
	case redislock.Valued:
		key, value = v.Key(), v.Value()
	case lock.Keyed:
		key = v.Key()
		value = c.run.valueOf(key)
	}
	if value == "" {
		return grant{}
	}
	vg := valueGrant{value: value, client: c.name, process: p, token: held.Token()}
	if u, ok := held.(lock.Untokened); ok && u.Untokened() {
		vg.token, vg.untokened = 0, true
	}
	g := c.run.values.granted(key, vg)
	return grant{values: c.run.values, key: key, valued: &g}
}

// valueOf is key's value on the servers, read over direct links right
// after a grant that tells its key only; "" if none holds it (gone already:
// the grant cannot be told from the next by its value).
func (r *run) valueOf(key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	for _, s := range r.d.Servers() {
		if v, err := s.Client().Get(ctx, key).Result(); err == nil && v != "" {
			return v
		}
	}
	return ""
}

// grant is one grant of a client's lock; valued is nil for a recipe that
// does not tell its value.
type grant struct {
	values *grantValues
	key    string
	valued *valueGrant
}

func (grant) Claim() workload.Claim { return workload.Claim{} }

func (g grant) Releasing() {
	if g.valued != nil {
		g.values.release(g.key, *g.valued)
	}
}

func (g grant) Released(err error) {
	if g.valued != nil {
		g.values.released(g.key, *g.valued, err)
	}
}
