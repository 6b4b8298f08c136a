package workload

import (
	"context"

	"github.com/locktest/locktest/backend/etcd/etcdlock"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/resource"
)

// store is the protected resource as a client reaches it.
type store interface {
	// Read reads under the holder's fencing token; it returns
	// resource.ErrRejected if the resource refused the token.
	Read(ctx context.Context, key string, token int64) (int64, error)
	// Write returns resource.ErrRejected if the resource refused the write.
	Write(ctx context.Context, key string, token, value int64, held lock.Held) error
	Close()
}

// httpStore is the HTTP resource, fenced or not, over the client's link.
type httpStore struct{ *resource.Client }

func (s httpStore) Write(ctx context.Context, key string, token, value int64, _ lock.Held) error {
	return s.Client.Write(ctx, key, token, value)
}

// etcdStore is the etcd-txn resource: a write commits only if the grant's
// compare holds (etcdlock.Fenced), or, for a recipe without one, if its token
// is at least the highest accepted.
type etcdStore struct{ *resource.Etcd }

func (s etcdStore) Write(ctx context.Context, key string, token, value int64, held lock.Held) error {
	if f, ok := held.(etcdlock.Fenced); ok {
		return s.Etcd.Write(ctx, key, value, f.Guard())
	}
	return s.WriteFenced(ctx, key, token, value)
}

func (etcdStore) Close() {}
