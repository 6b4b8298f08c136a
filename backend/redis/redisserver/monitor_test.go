package redisserver

import (
	"context"
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

// Monitor streams the commands on keys under its prefix, with the server's
// own times, and after a crash and restart, says where some may be missing
// and goes on.
func TestMonitor(t *testing.T) {
	t.Parallel()
	ctx, d := start(t, Single)
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmds, gaps, err := d.Monitor(mctx, 0, "p:")
	if err != nil {
		t.Fatal(err)
	}
	c := d.Servers()[0].Client()
	before := time.Now()
	if err := c.Set(ctx, "other", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "p:k", "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	got := <-cmds // "other" is not under the prefix
	if !slices.Equal(got.Args, []string{"set", "p:k", "v1"}) || got.Lua || got.At.Before(before.Add(-time.Millisecond)) || got.At.After(time.Now()) {
		t.Fatalf("got %+v, want set p:k v1 taken since %v", got, before)
	}
	if err := d.Crash(0); err != nil {
		t.Fatal(err)
	}
	if err := d.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-gaps:
		if !g.To.After(g.From) {
			t.Errorf("gap %+v", g)
		}
	case <-ctx.Done():
		t.Fatal("no gap after a crash")
	}
	if err := c.Eval(ctx, `return redis.call("set", KEYS[1], ARGV[1])`, []string{"p:k"}, "v2").Err(); err != nil {
		t.Fatal(err)
	}
	var lines []Command
	for len(lines) < 2 {
		select {
		case c := <-cmds:
			lines = append(lines, c)
		case <-ctx.Done():
			t.Fatalf("after the restart: %+v", lines)
		}
	}
	if lines[0].Lua || lines[0].Args[0] != "eval" || !lines[1].Lua || !slices.Equal(lines[1].Args, []string{"set", "p:k", "v2"}) {
		t.Errorf("after the restart: %+v, want the eval, then its set", lines)
	}
}
