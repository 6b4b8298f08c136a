package lock

import (
	"context"
	"errors"
	"testing"

	"github.com/locktest/locktest/clock"
)

// Call returns as soon as its context ends, with the cause, while the call
// it made goes on; and it returns the call's own result when that comes
// first.
func TestCallEndsWithItsContext(t *testing.T) {
	cause := errors.New("the client's op timeout")
	ctx, cancel := context.WithCancelCause(context.Background())
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := Call(ctx, func(context.Context) (int, error) {
			close(started)
			<-release // a server that does not answer
			return 1, nil
		})
		done <- err
	}()
	<-started
	cancel(cause)
	if err := <-done; !errors.Is(err, cause) {
		t.Errorf("Call = %v, want the context's cause", err)
	}
	if v, err := Call(context.Background(), func(context.Context) (int, error) { return 7, nil }); v != 7 || err != nil {
		t.Errorf("Call = %d, %v, want 7, nil", v, err)
	}
}

// A waiter whose context ends while it waits to retry has not acquired.
func TestRetryAfterEndsAsNotAcquired(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := RetryAfter(ctx, clock.New(), 1<<62); !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Errorf("RetryAfter = %v, want ErrNotAcquired and the context's cause", err)
	}
}
