package workload

import "context"

// An Observer is a backend's view of the server's truth about lock keys,
// from outside every client's links (client faults do not blind it): it
// records each deletion of a client's lock key as a key-deleted event,
// saying why (the holder's release, its lease's expiry or revoke, another
// client's release; see Workload.deleted), and how far it has seen. The
// etcd watch (etcdobserver.go) is the first.
type Observer interface {
	// Sync waits until the observer has seen every change made before the
	// call, or ctx ends.
	Sync(ctx context.Context) error
	// RecordObserved records the observed event: every deletion up to the
	// revision it names is in the history.
	RecordObserved()
	// Err is the first error the observer met in recording.
	Err() error
	// Close stops it.
	Close()
}
