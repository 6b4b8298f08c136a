package serverkit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestVersion(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	out, err := Version(script("ok", "echo 'Server v=7.0.15'; echo noise >&2"), "apt-get install x")
	if err != nil || out != "Server v=7.0.15\n" {
		t.Errorf("a binary that answers: %q, %v", out, err)
	}
	_, err = Version(script("fails", "echo 'cannot load libfoo.so' >&2; exit 1"), "apt-get install x")
	if err == nil || errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "cannot load libfoo.so") || !strings.Contains(err.Error(), "install it: apt-get install x") {
		t.Errorf("a binary that fails: %v; want its error line and how to install it", err)
	}

	// A binary that does not answer in time is not called missing: the
	// machine is busy, and installing would not help.
	defer func(w time.Duration) { versionWait = w }(versionWait)
	versionWait = 50 * time.Millisecond
	_, err = Version(script("slow", "exec sleep 10"), "apt-get install x")
	if !errors.Is(err, ErrNoAnswer) || strings.Contains(err.Error(), "install") {
		t.Errorf("a binary that does not answer: %v; want ErrNoAnswer, no install hint", err)
	}
}
