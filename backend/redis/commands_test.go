package redis

import (
	"maps"
	"testing"
	"time"

	"github.com/locktest/locktest/backend/redis/redisserver"
	"github.com/locktest/locktest/histories"
)

// wallStart places wall times in a history that began at base.
type wallStart struct{ base time.Time }

func (w wallStart) At(t time.Time) (int64, bool) { return int64(t.Sub(w.base)), true }

// A grant's key-set event from the commands the server took: a script's
// (Redlock: the attempts are the same EVALSHA, the set is its lua line)
// and a client's own SET NX, sent again until it takes; nothing when a
// gap in the commands covers the grant.
func TestKeySet(t *testing.T) {
	base := time.Unix(1795772910, 0)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	cmd := func(ms int, lua bool, args ...string) redisserver.Command {
		return redisserver.Command{At: at(ms), Lua: lua, Args: args}
	}
	const key = "p:lock"
	g := notedGrant{key: key, valueGrant: valueGrant{value: "v1", client: "c1", process: 1}}
	for name, tc := range map[string]struct {
		cmds []redisserver.Command
		gaps []redisserver.Gap
		want map[string]string // params; nil: no event
	}{
		"script": {cmds: []redisserver.Command{
			cmd(100, false, "evalsha", "h", "1", key, "v1", "2000"),
			cmd(100, true, "exists", key),
			cmd(300, false, "evalsha", "h", "1", key, "v1", "2000"),
			cmd(300, true, "exists", key),
			cmd(301, true, "set", key, "v1", "PX", "2000"),
			cmd(350, false, "evalsha", "h", "1", key, "v2", "2000"), // another's attempt changes nothing
			cmd(350, true, "exists", key),
			cmd(400, false, "evalsha", "r", "1", key, "v1"),
			cmd(401, true, "del", key),
		}, want: map[string]string{"set_ns": "301000000", "asked_ns": "100000000", "next_ns": "400000000", "changed_ns": "401000000", "ttl_ms": "2000"}},
		"set nx": {cmds: []redisserver.Command{
			cmd(100, false, "SET", key, "v1", "NX", "PX", "2000"),
			cmd(150, false, "SET", key, "v1", "NX", "PX", "2000"),
			cmd(200, false, "SET", key, "v1", "NX", "PX", "2000"),
			cmd(300, false, "EVAL", "release", "1", key, "v1"),
		}, want: map[string]string{"set_ns": "200000000", "asked_ns": "150000000", "next_ns": "300000000", "ttl_ms": "2000"}},
		"script set nx": {cmds: []redisserver.Command{
			cmd(100, false, "evalsha", "a", "2", key, "p:lock:fence", "v1", "2000"),
			cmd(100, true, "SET", key, "v1", "NX", "PX", "2000"), // refused: another's key
			cmd(150, false, "evalsha", "a", "2", key, "p:lock:fence", "v1", "2000"),
			cmd(150, true, "SET", key, "v1", "NX", "PX", "2000"),
			cmd(200, false, "evalsha", "a", "2", key, "p:lock:fence", "v2", "2000"),
			cmd(200, true, "SET", key, "v2", "NX", "PX", "2000"), // another's attempt changes nothing
			cmd(400, false, "evalsha", "r", "1", key, "v1"),
			cmd(401, true, "DEL", key),
		}, want: map[string]string{"set_ns": "150000000", "asked_ns": "100000000", "next_ns": "400000000", "changed_ns": "401000000", "ttl_ms": "2000"}},
		"first attempt": {cmds: []redisserver.Command{
			cmd(100, false, "SET", key, "v1", "NX", "EX", "2"),
		}, want: map[string]string{"set_ns": "100000000", "ttl_ms": "2000"}},
		"a gap": {cmds: []redisserver.Command{
			cmd(100, false, "SET", key, "v1", "NX", "PX", "2000"),
			cmd(200, false, "SET", key, "v1", "NX", "PX", "2000"),
		}, gaps: []redisserver.Gap{{From: at(1000), To: at(1500)}}},
		"no set": {cmds: []redisserver.Command{cmd(100, false, "evalsha", "h", "1", key, "v1", "2000"), cmd(100, true, "exists", key)}},
	} {
		l := &commandLog{prefix: "p:", byKey: map[string][]redisserver.Command{key: tc.cmds}, gaps: tc.gaps}
		op, ok := l.keySet(g, "lock", "r0", wallStart{base})
		if ok != (tc.want != nil) {
			t.Errorf("%s: event %v, want %v: %+v", name, ok, tc.want != nil, op)
			continue
		}
		if !ok {
			continue
		}
		want := map[string]string{"key": "lock", "process": "1", "server": "r0"}
		maps.Copy(want, tc.want)
		if op.F != histories.FKeySet || !maps.Equal(op.Value.Params, want) || op.Value.Targets[0] != "c1" {
			t.Errorf("%s: params %v, want %v", name, op.Value.Params, want)
		}
	}
}
