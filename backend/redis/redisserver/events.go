package redisserver

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Event is a keyspace event: a change a server made to a key.
type Event struct {
	Server int    // index in Servers()
	Key    string // the key changed
	// Op is Redis's name for the change: "set", "expire" (a TTL set),
	// "expired" (the server deleted the key when its TTL ran out), "del",
	// "incrby", ...
	Op string
	At time.Time // when locktest received it
}

// keyspaceChannel is the prefix of keyspace event channels of database 0.
const keyspaceChannel = "__keyspace@0__:"

// Events subscribes to server i's keyspace events for keys under prefix,
// over a direct connection (no fault on a client's links touches it). The
// subscription is in place when Events returns; the channel closes when ctx
// ends or the deployment closes. Keys a server loses when it crashes or
// restarts produce no event, nor do events while it is paused or its
// subscription reconnects.
func (d *Deployment) Events(ctx context.Context, i int, prefix string) (<-chan Event, error) {
	if i < 0 || i >= len(d.servers) {
		return nil, fmt.Errorf("redisserver: no server %d", i)
	}
	s := d.servers[i]
	ps := s.client.PSubscribe(ctx, keyspaceChannel+globEscape(prefix)+"*")
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return nil, fmt.Errorf("redisserver: subscribing to %s's keyspace events: %w", s.Name, err)
	}
	if err := d.Track(ps); err != nil {
		return nil, err
	}

	out := make(chan Event)
	go func() {
		defer close(out)
		defer ps.Close()
		msgs := ps.Channel()
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					return
				}
				ev := Event{Server: i, Key: strings.TrimPrefix(m.Channel, keyspaceChannel), Op: m.Payload, At: time.Now()}
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// globEscape quotes the characters PSUBSCRIBE's glob patterns give meaning.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
