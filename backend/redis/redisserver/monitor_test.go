package redisserver

import (
	"slices"
	"testing"
	"time"
)

// MONITOR's lines as Redis 7 writes them: a script's own commands come
// after it, marked lua; arguments are quoted with escapes.
func TestParseMonitor(t *testing.T) {
	for line, want := range map[string]Command{
		`+1795772910.375870 [0 127.0.0.1:50123] "evalsha" "abc" "1" "k" "v\"1" "2000"`: {At: time.Unix(1795772910, 375870000), Args: []string{"evalsha", "abc", "1", "k", `v"1`, "2000"}},
		`+1795772910.375967 [0 lua] "set" "k" "a\\b\x01\n" "PX" "2000"`:                {At: time.Unix(1795772910, 375967000), Lua: true, Args: []string{"set", "k", "a\\b\x01\n", "PX", "2000"}},
		`+1795772910.000001 [0 unix:/tmp/r.sock] "get" ""`:                             {At: time.Unix(1795772910, 1000), Args: []string{"get", ""}},
	} {
		got, ok := parseMonitor(line)
		if !ok || !got.At.Equal(want.At) || got.Lua != want.Lua || !slices.Equal(got.Args, want.Args) {
			t.Errorf("%s: got %+v %v, want %+v", line, got, ok, want)
		}
	}
	for _, bad := range []string{"+OK", `+1795772910.375870 [0 lua] "set" "unterminated`, `1795772910.3 [0 lua] "get" "k"`, `+x.1 [0 lua] "get" "k"`, `+1.1 [0 lua] "bad\x4"`} {
		if c, ok := parseMonitor(bad); ok {
			t.Errorf("%s: parsed as %+v", bad, c)
		}
	}
}
