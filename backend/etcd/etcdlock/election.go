package etcdlock

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/locktest/locktest/lock"
)

// Election is the election recipe: concurrency.NewElection, Campaign to
// acquire (the leader holds the lock) and Resign to release. The token is
// the leader key's create revision (Election.Rev). Split-brain here is two
// leaders at once.
func Election() lock.Recipe { return RecipeFunc(ElectionName, newElectionLocker) }

type electionLocker struct{ session }

func newElectionLocker(ctx context.Context, env Env) (lock.Locker, error) {
	s, err := newSessionLocker(ctx, env)
	if err != nil {
		return nil, err
	}
	return &electionLocker{s}, nil
}

func (l *electionLocker) Acquire(ctx context.Context, name string) (lock.Held, error) {
	e := concurrency.NewElection(l.s, l.env.Prefix+name)
	if err := e.Campaign(ctx, l.env.Name); err != nil {
		return nil, err
	}
	return &electionHeld{e: e, s: l.s, key: e.Key(), token: e.Rev()}, nil
}

type electionHeld struct {
	e     *concurrency.Election
	s     *concurrency.Session
	key   string
	token int64
}

func (h *electionHeld) Token() int64                      { return h.token }
func (h *electionHeld) Release(ctx context.Context) error { return h.e.Resign(ctx) }
func (h *electionHeld) Done() <-chan struct{}             { return h.s.Done() }
func (h *electionHeld) Guard() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.token)
}
func (h *electionHeld) Key() string               { return h.key }
func (h *electionHeld) LeaseID() clientv3.LeaseID { return h.s.Lease() }
