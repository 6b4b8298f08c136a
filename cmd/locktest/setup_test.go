package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSetupFailureKeepsServerLogs: a run whose server exits as it starts
// (a stand-in redis-server, named by a path relative to where locktest
// runs) ends with one line, exit 2, and a run directory that holds only
// the servers' logs, among them the one the error points at.
func TestSetupFailureKeepsServerLogs(t *testing.T) {
	t.Chdir(t.TempDir())
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'Redis server v=7.0.15 sha=00000000:0'; exit 0; fi\necho 'refusing to start: a test' >&2\nexit 3\n"
	if err := os.WriteFile("redis-stand-in", []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runMain(t, "run", "--recipe", "redis-setnx", "--redis-bin", "./redis-stand-in", "--time", "2s", "--out", "runs")
	line := strings.TrimSpace(stderr)
	if code != exitUnknown || strings.Contains(line, "\n") || !strings.Contains(line, "refusing to start: a test") {
		t.Fatalf("exit %d, stderr %q; want 2 and one line quoting the server\nstdout:\n%s", code, stderr, stdout)
	}
	m := regexp.MustCompile(`its log: ([^)]+)\)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("the error names no log: %q", line)
	}
	if b, err := os.ReadFile(m[1]); err != nil || !strings.Contains(string(b), "refusing to start") {
		t.Errorf("the log the error names: %q, %v", b, err)
	}
	dirs, _ := filepath.Glob(filepath.Join("runs", "*"))
	if len(dirs) != 1 {
		t.Fatalf("run directories %v, want one", dirs)
	}
	ents, _ := os.ReadDir(dirs[0])
	if len(ents) != 1 || ents[0].Name() != "logs" {
		t.Errorf("the failed run left %v, want only logs", ents)
	}
	if !strings.Contains(stdout, filepath.Join(dirs[0], "logs")) {
		t.Errorf("stdout does not say where the logs are:\n%s", stdout)
	}
}
