package redis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/backend/redis/redisserver"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/workload"
)

// commandLog is what one server took of the lock keys, on its own clock
// (its MONITOR stream): by which the observer tells, of each grant, when
// the server set its key and when it took the client's attempts before
// (key-set events). The servers share the host's clock with locktest.
type commandLog struct {
	prefix, syncKey string

	mu     sync.Mutex
	byKey  map[string][]redisserver.Command
	gaps   []redisserver.Gap
	marks  int           // the newest sync marker seen
	change chan struct{} // closed and replaced when marks advances
}

// startCommandLog reads server 0's commands on keys under prefix until ctx
// ends; wg counts its goroutines.
func startCommandLog(ctx context.Context, d *redisserver.Deployment, prefix, syncKey string, wg *sync.WaitGroup) (*commandLog, error) {
	cmds, gaps, err := d.Monitor(ctx, 0, prefix)
	if err != nil {
		return nil, fmt.Errorf("observer: %w", err)
	}
	l := &commandLog{prefix: prefix, syncKey: syncKey, byKey: map[string][]redisserver.Command{}, change: make(chan struct{})}
	wg.Go(func() {
		for g := range gaps {
			l.mu.Lock()
			l.gaps = append(l.gaps, g)
			l.mu.Unlock()
		}
	})
	wg.Go(func() {
		for c := range cmds {
			l.add(c)
		}
	})
	return l, nil
}

func (l *commandLog) add(c redisserver.Command) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(c.Args) >= 3 && strings.EqualFold(c.Args[0], "set") && c.Args[1] == l.syncKey {
		if n, err := strconv.Atoi(c.Args[2]); err == nil && n > l.marks {
			l.marks = n
			close(l.change)
			l.change = make(chan struct{})
		}
		return
	}
	// The key: its first argument under the prefix (a script's keys
	// follow its body or hash).
	if i := slices.IndexFunc(c.Args[1:], func(a string) bool { return strings.HasPrefix(a, l.prefix) }); i >= 0 {
		l.byKey[c.Args[1+i]] = append(l.byKey[c.Args[1+i]], c)
	}
}

// await waits until the log has seen sync marker mark.
func (l *commandLog) await(ctx context.Context, mark int) error {
	for {
		l.mu.Lock()
		seen, change := l.marks, l.change
		l.mu.Unlock()
		if seen >= mark {
			return nil
		}
		select {
		case <-change:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// notedGrant is a grant of a key.
type notedGrant struct {
	key string
	valueGrant
}

// keySet is the key-set event of grant g, placed in the history by tl;
// false when the log holds no set of its value, or may miss commands of
// it (a gap from its first attempt to its TTL's end), or tl cannot place
// its times.
func (l *commandLog) keySet(g notedGrant, lock, server string, tl workload.Timeline) (histories.Op, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cmds := l.byKey[g.key]
	set := slices.IndexFunc(cmds, func(c redisserver.Command) bool {
		return len(c.Args) >= 3 && strings.EqualFold(c.Args[0], "set") && c.Args[2] == g.value
	})
	if set < 0 {
		return histories.Op{}, false
	}
	carries := func(c redisserver.Command) bool { return !c.Lua && slices.Contains(c.Args[1:], g.value) }
	// The request that set it: the set itself, or the client's request
	// (a script's) that ran it, which MONITOR tells first.
	won := set
	if cmds[set].Lua {
		for won = set - 1; won >= 0 && !carries(cmds[won]); won-- {
		}
		if won < 0 {
			return histories.Op{}, false
		}
	}
	if slices.ContainsFunc(cmds[set].Args[3:], func(o string) bool { return strings.EqualFold(o, "nx") }) {
		// A SET NX (a client's own, or a script's) is sent again until
		// it takes: the last of the same, before any other request of
		// the value, set it.
		req, first := won, cmds[set]
		for i := set + 1; i < len(cmds); i++ {
			c := cmds[i]
			if carries(c) {
				if !slices.Equal(c.Args, cmds[won].Args) {
					break
				}
				req = i
			}
			if c.Lua == first.Lua && slices.Equal(c.Args, first.Args) {
				set, won = i, req
			}
		}
	}
	ttl, ok := setTTL(cmds[set].Args[3:])
	if !ok {
		return histories.Op{}, false
	}
	first := cmds[won].At
	params := map[string]string{"key": lock, "process": g.process.String(), "server": server, "ttl_ms": strconv.FormatInt(ttl.Milliseconds(), 10)}
	place := func(name string, t time.Time) bool {
		at, ok := tl.At(t)
		if ok && at >= 0 {
			params[name] = strconv.FormatInt(at, 10)
		}
		return ok && at >= 0
	}
	if !place("set_ns", cmds[set].At) {
		return histories.Op{}, false
	}
	// An earlier attempt: the same request, taken before.
	for i := won - 1; i >= 0; i-- {
		if !cmds[i].Lua && slices.Equal(cmds[i].Args, cmds[won].Args) {
			first = cmds[i].At
			if !place("asked_ns", cmds[i].At) {
				return histories.Op{}, false
			}
			break
		}
	}
	end := cmds[set].At.Add(ttl)
	for _, g := range l.gaps {
		if g.From.Before(end) && g.To.After(first) {
			return histories.Op{}, false
		}
	}
	for _, c := range cmds[set+1:] {
		if _, ok := params["next_ns"]; !ok && carries(c) && !place("next_ns", c.At) {
			return histories.Op{}, false
		}
		if _, ok := params["changed_ns"]; !ok && changes(c) && !place("changed_ns", c.At) {
			return histories.Op{}, false
		}
	}
	return histories.Op{Type: histories.Info, F: histories.FKeySet, Process: histories.Nemesis, Key: lock,
		Value: &histories.Value{Targets: []string{g.client}, Params: params}}, true
}

// setTTL reads the TTL of a SET's options.
func setTTL(opts []string) (time.Duration, bool) {
	for i := 0; i+1 < len(opts); i++ {
		n, err := strconv.ParseInt(opts[i+1], 10, 64)
		switch {
		case err != nil || n <= 0:
		case strings.EqualFold(opts[i], "px"):
			return time.Duration(n) * time.Millisecond, true
		case strings.EqualFold(opts[i], "ex"):
			return time.Duration(n) * time.Second, true
		}
	}
	return 0, false
}

// readOnly are the commands on a key that leave it as it is; a script's
// (EVAL, EVALSHA, FCALL) effects are the commands it runs, told apart.
var readOnly = map[string]bool{"get": true, "exists": true, "pttl": true, "ttl": true, "type": true, "strlen": true,
	"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true}

// changes says whether c may have changed or deleted the key it names,
// which the server holds: a SET NX (another's attempt) sets only a key
// that is not there.
func changes(c redisserver.Command) bool {
	name := strings.ToLower(c.Args[0])
	nx := name == "set" && slices.ContainsFunc(c.Args[3:], func(o string) bool { return strings.EqualFold(o, "nx") })
	return !readOnly[name] && !nx
}
