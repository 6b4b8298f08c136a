package lock

import (
	"context"
	"fmt"
	"time"

	"github.com/locktest/locktest/clock"
)

// Call runs f and returns its result, or the cause of ctx's end as soon as
// ctx ends, leaving f to finish on its own. A context of the client's clock
// (clock.WithTimeout) has no deadline a client library can see: without
// this, a call to a paused server would hold a recipe for the library's own
// read timeout, whatever its context said.
func Call[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f(ctx)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	}
}

// RetryAfter waits d of the client's clock before a waiter tries again. A
// waiter holds nothing, so a ctx that ends meanwhile fails the acquire
// definitely (ErrNotAcquired).
func RetryAfter(ctx context.Context, clk *clock.Clock, d time.Duration) error {
	if err := clk.Sleep(ctx, d); err != nil {
		return fmt.Errorf("%w: %w (waiting to retry)", ErrNotAcquired, context.Cause(ctx))
	}
	return nil
}
