package workload

import (
	"context"

	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/resource"
)

// Store is the protected resource as a client reaches it: the HTTP store,
// or one its backend keeps in the system under test (Keeper).
type Store interface {
	// Read reads under the holder's fencing token; it returns
	// resource.ErrRejected if the resource refused the token.
	Read(ctx context.Context, key string, token int64) (int64, error)
	// Write writes value with the grant held (whose token is token); it
	// returns resource.ErrRejected if the resource refused the write.
	Write(ctx context.Context, key string, token, value int64, held lock.Held) error
	Close()
}

// httpStore is the HTTP resource, fenced or not, over the client's link.
type httpStore struct{ *resource.Client }

func (s httpStore) Write(ctx context.Context, key string, token, value int64, _ lock.Held) error {
	return s.Client.Write(ctx, key, token, value)
}
