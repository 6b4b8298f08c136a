package partest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// aloneEnv names, in the test binary run again by Alone, the tests it
// runs ("|" between them).
const aloneEnv = "LOCKTEST_TEST_ALONE"

// Alone starts the top-level tests named in a process of their own (the
// test binary again), one after another: what they count of their process
// (goroutines, sockets) or set in it (test hooks) is their own while the
// package's other tests go on in this one. The test it returns waits for
// that process: it fails if one of them failed or did not run, and skips
// if every one skipped (what it needs is not installed). Each of them
// calls Own first.
func Alone(t *testing.T, names ...string) func(*testing.T) {
	t.Helper()
	args := []string{"-test.run=^(" + strings.Join(names, "|") + ")$", "-test.count=1", "-test.v"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), aloneEnv+"="+strings.Join(names, "|"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return func(t *testing.T) {
		t.Helper()
		err := <-done
		var skipped []string
		for _, name := range names {
			switch {
			case bytes.Contains(out.Bytes(), []byte("--- SKIP: "+name+" ")):
				skipped = append(skipped, name)
			case !bytes.Contains(out.Bytes(), []byte("--- PASS: "+name+" ")):
				err = errors.New(name + " did not pass")
			}
		}
		switch {
		case err != nil:
			t.Fatalf("%s in a process of their own: %v\n%s", strings.Join(names, ", "), err, out.Bytes())
		case len(skipped) == len(names):
			t.Skipf("%s in a process of their own skipped:\n%s", strings.Join(names, ", "), out.Bytes())
		case len(skipped) > 0:
			t.Logf("skipped in a process of their own: %s\n%s", strings.Join(skipped, ", "), out.Bytes())
		}
	}
}

// Own skips t, a top-level test, unless this process is the one Alone
// started for it; run says which test to run instead (-run).
func Own(t *testing.T, run string) {
	t.Helper()
	if !slices.Contains(strings.Split(os.Getenv(aloneEnv), "|"), t.Name()) {
		t.Skipf("runs in a process of its own, beside the package's other tests: -run '%s'", run)
	}
}
