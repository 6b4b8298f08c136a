package execlock

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/locktest/locktest/clock"
)

// Clock says how a client's clock is faked for clock faults.
type Clock int

const (
	// ClockAuto fakes it with libfaketime where the client's runtime is
	// one measured to honour it (Node, Java), and refuses clock faults
	// otherwise.
	ClockAuto Clock = iota
	// ClockFaketime fakes it with libfaketime whatever the runtime (the
	// user vouches for it).
	ClockFaketime
	// ClockNone never fakes it: clock faults are refused.
	ClockNone
)

// ParseClock reads --exec-clock: auto, libfaketime or none.
func ParseClock(s string) (Clock, error) {
	switch s {
	case "auto", "":
		return ClockAuto, nil
	case "libfaketime":
		return ClockFaketime, nil
	case "none":
		return ClockNone, nil
	}
	return 0, fmt.Errorf("want auto, libfaketime or none, got %q", s)
}

func (c Clock) String() string {
	return [...]string{"auto", "libfaketime", "none"}[c]
}

// The runtimes whose clock behaviour under libfaketime was measured (see
// README.md, Clock faults).
const (
	runtimeNode   = "Node"
	runtimePython = "Python"
	runtimeJava   = "Java"
)

// runtimeOf names the runtime command runs on, by its program's name or
// the "#!" line of its script, following /usr/bin/env; "" when unknown.
func runtimeOf(command []string) string {
	for len(command) > 0 {
		path, err := exec.LookPath(command[0])
		if err != nil {
			return ""
		}
		base := filepath.Base(path)
		switch {
		case base == "env":
			command = command[1:]
			for len(command) > 0 && (strings.HasPrefix(command[0], "-") || strings.Contains(command[0], "=")) {
				command = command[1:] // env's options and assignments
			}
			continue
		case base == "node" || base == "nodejs":
			return runtimeNode
		case strings.HasPrefix(base, "python"):
			return runtimePython
		case base == "java":
			return runtimeJava
		}
		line := firstLine(path)
		if !strings.HasPrefix(string(line), "#!") {
			return ""
		}
		command = strings.Fields(strings.TrimPrefix(string(line), "#!"))
	}
	return ""
}

// libfaketimePaths are where Debian and others install libfaketime.
var libfaketimePaths = []string{
	"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib/faketime/libfaketime.so.1",
	"/usr/local/lib/faketime/libfaketime.so.1",
}

// libfaketime is the path of libfaketime, or "".
func libfaketime() string {
	if p := os.Getenv("LOCKTEST_LIBFAKETIME"); p != "" {
		return p
	}
	for _, p := range libfaketimePaths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// faketime returns libfaketime's path when the client's clock is to be
// faked; else why clock faults are refused.
func (r *Recipe) faketime() (string, string) {
	if r.Clock == ClockNone {
		return "", fmt.Sprintf("%s: the client's clock is not faked (--exec-clock none), so clock faults cannot reach its lock", r.Name())
	}
	lib := libfaketime()
	if lib == "" {
		return "", fmt.Sprintf("%s: clock faults fake the client's clock with libfaketime, which is not installed (Debian: apt-get install libfaketime)", r.Name())
	}
	if r.Clock == ClockFaketime {
		return lib, ""
	}
	switch rt := runtimeOf(r.Command); rt {
	case runtimeNode, runtimeJava:
		return lib, ""
	case runtimePython:
		return "", fmt.Sprintf("%s runs on Python, whose timed waits (threading's Event, Lock and Queue with a timeout) hang for ever under libfaketime (measured on Python 3.11), so its clock cannot be faked: clock faults are refused (--exec-clock libfaketime forces them)", r.Name())
	default:
		return "", fmt.Sprintf("%s runs on a runtime locktest has not measured under libfaketime (Go programs read the clock without libc, which libfaketime cannot reach): clock faults are refused (--exec-clock libfaketime forces them)", r.Name())
	}
}

// fakeClock makes a client process's clock follow its client's clock in
// locktest (lock.Env.Clock) through libfaketime: the spec file it reads at
// every clock reading (FAKETIME_TIMESTAMP_FILE, FAKETIME_NO_CACHE) holds
// the client's clock's skew as an offset, "+1.500000", rewritten at each
// change of the client's clock and, while that clock runs at a rate other
// than 1, every rateStep. libfaketime's own rates ("x0.5") are not used:
// a new rate re-anchors at the last clock reading the process made, which
// locktest cannot know, and an offset given with a rate is ignored; an
// offset alone is exact (the faked time is the real time plus it).
type fakeClock struct {
	clk  *clock.Clock
	path string
	stop chan struct{}
	done chan struct{}
}

// rateStep is how often the faked clock of a client whose clock runs at a
// rate other than 1 is stepped to where that clock has come.
const rateStep = 100 * time.Millisecond

// fakeEnv starts following clk in a spec file at path and returns the
// environment that makes a process read it.
func fakeEnv(lib, path string, clk *clock.Clock) (*fakeClock, []string, error) {
	f := &fakeClock{clk: clk, path: path, stop: make(chan struct{}), done: make(chan struct{})}
	changed := clk.Changed()
	if err := f.write(); err != nil {
		return nil, nil, err
	}
	go f.follow(changed)
	return f, []string{
		"LD_PRELOAD=" + lib,
		"FAKETIME_TIMESTAMP_FILE=" + path,
		"FAKETIME_NO_CACHE=1",
	}, nil
}

func (f *fakeClock) follow(changed <-chan struct{}) {
	defer close(f.done)
	t := time.NewTicker(rateStep)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-changed:
			changed = f.clk.Changed()
		case <-t.C:
			if f.clk.Rate() == 1 {
				continue
			}
		}
		f.write()
	}
}

// write writes the spec whole: a reader sees the old file or the new one.
func (f *fakeClock) write() error {
	tmp := f.path + ".new"
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf("%+.6f\n", f.clk.Skew().Seconds())), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, f.path)
}

// close stops following the clock.
func (f *fakeClock) close() {
	close(f.stop)
	<-f.done
}
