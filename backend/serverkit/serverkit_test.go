package serverkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/internal/polltest"
	"github.com/locktest/locktest/internal/proc"
)

func TestRetryTriesOtherPortsOnlyWhenOneWasTaken(t *testing.T) {
	var attempts, undos int
	err := Retry(5, func(attempt int) error {
		attempts++
		if attempt < 3 {
			return fmt.Errorf("r0: %w", syscall.EADDRINUSE)
		}
		return nil
	}, func() error { undos++; return nil })
	if err != nil || attempts != 3 || undos != 2 {
		t.Errorf("Retry = %v after %d attempts, %d undos; want nil after 3, 2", err, attempts, undos)
	}

	attempts, undos = 0, 0
	other := errors.New("bad config")
	err = Retry(5, func(int) error { attempts++; return other }, func() error { undos++; return nil })
	if err != other || attempts != 1 || undos != 1 {
		t.Errorf("Retry = %v after %d attempts, %d undos; want %v after 1, 1", err, attempts, undos, other)
	}

	attempts = 0
	err = Retry(2, func(int) error { attempts++; return syscall.EADDRINUSE }, nil)
	if !errors.Is(err, syscall.EADDRINUSE) || attempts != 2 {
		t.Errorf("Retry = %v after %d attempts; want EADDRINUSE after 2", err, attempts)
	}
}

func TestProcPauseResumeKill(t *testing.T) {
	var s Proc
	if err := s.Pause(); !errors.Is(err, ErrDown) {
		t.Errorf("Pause before Start = %v, want ErrDown", err)
	}
	if err := s.Start(proc.Spec{Path: "sleep", Args: []string{"60"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Kill() })
	pid := s.Pid()
	if !s.Running() || pid == 0 {
		t.Fatalf("Running = %v, Pid = %d after Start", s.Running(), pid)
	}
	if err := s.Pause(); err != nil || !s.Paused() {
		t.Fatalf("Pause = %v, Paused = %v", err, s.Paused())
	}
	polltest.Until(t, 10*time.Second, "state T", func() bool { st, _ := proc.State(pid); return st == 'T' })
	if err := s.Resume(); err != nil || s.Paused() {
		t.Fatalf("Resume = %v, Paused = %v", err, s.Paused())
	}
	polltest.Until(t, 10*time.Second, "state S", func() bool { st, _ := proc.State(pid); return st == 'S' })
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	// A paused process dies of SIGKILL too, and is no longer paused.
	if err := s.Kill(); err != nil || s.Running() || s.Paused() || proc.Alive(pid) {
		t.Errorf("Kill = %v; then Running = %v, Paused = %v, alive = %v", err, s.Running(), s.Paused(), proc.Alive(pid))
	}
}

func TestProcSignalStandsInForTheGroupsSignals(t *testing.T) {
	var got []syscall.Signal
	s := Proc{Signal: func(p *proc.Process, sig syscall.Signal) error {
		got = append(got, sig)
		if sig == syscall.SIGKILL {
			return p.Kill()
		}
		return nil
	}}
	if err := s.Start(proc.Spec{Path: "sleep", Args: []string{"60"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Process().Kill() })
	if err := s.Pause(); err != nil || !s.Paused() {
		t.Fatalf("Pause = %v, Paused = %v", err, s.Paused())
	}
	if st, _ := proc.State(s.Pid()); st == 'T' {
		t.Error("Pause signalled the group itself")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil || s.Running() {
		t.Fatalf("Kill = %v, Running = %v", err, s.Running())
	}
	if want := []syscall.Signal{syscall.SIGSTOP, syscall.SIGCONT, syscall.SIGKILL}; !slices.Equal(got, want) {
		t.Errorf("Signal got %v, want %v", got, want)
	}
}

// exitWith starts a shell that writes lines to its log and exits 1.
func exitWith(t *testing.T, s *Proc, lines string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "server.log")
	// What an earlier process wrote is not this one's.
	if err := os.WriteFile(log, []byte("bind: address already in use\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(proc.Spec{Path: "sh", Args: []string{"-c", "printf '" + lines + "' >&2; exit 1"}, Log: log}); err != nil {
		t.Fatal(err)
	}
}

func TestWaitEndsWhenTheProcessExits(t *testing.T) {
	ctx := context.Background()
	never := func(context.Context) error { return errors.New("not yet") }

	var s Proc
	exitWith(t, &s, "starting\\nlisten tcp 127.0.0.1:1: bind: Address already in use\\n")
	w := Wait{What: "waiting for r0", Proc: &s, Who: "test: r0"}
	if err := w.Until(ctx, never); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("a taken port: Until = %v, want EADDRINUSE", err)
	}

	exitWith(t, &s, "starting\\nDo you already have another server running\\n")
	w.InUse = []string{"Do you already have another"}
	if err := w.Until(ctx, never); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("a taken port said otherwise: Until = %v, want EADDRINUSE", err)
	}

	exitWith(t, &s, "starting\\nbad option --frob\\n")
	err := w.Until(ctx, never)
	if errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "test: r0 exited as it started") || !strings.Contains(err.Error(), "bad option --frob") {
		t.Errorf("a bad start: Until = %v, want its exit and the log's last line", err)
	}
}

// Run waits for a program's end; a failure quotes its log's last line,
// and one still running when ctx ends is killed.
func TestRunToTheEnd(t *testing.T) {
	ctx := context.Background()
	log := filepath.Join(t.TempDir(), "setup.log")
	if err := Run(ctx, "test: setup", proc.Spec{Path: "true", Log: log}); err != nil {
		t.Errorf("a program that succeeds: %v", err)
	}
	err := Run(ctx, "test: setup", proc.Spec{Path: "sh", Args: []string{"-c", "echo starting; echo no space left >&2; exit 3"}, Log: log})
	if err == nil || !strings.Contains(err.Error(), "test: setup failed") || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("a program that fails: Run = %v, want who failed and its log's last line", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := Run(cctx, "test: setup", proc.Spec{Path: "sleep", Args: []string{"60"}, Log: log}); !errors.Is(err, context.Canceled) {
		t.Errorf("ctx ended: Run = %v, want context.Canceled", err)
	}
}

func TestWaitFinalAndDeadline(t *testing.T) {
	bad := errors.New("the server says no")
	tries := 0
	err := Wait{}.Until(context.Background(), func(context.Context) error { tries++; return Final(bad) })
	if err != bad || tries != 1 {
		t.Errorf("Until = %v after %d tries, want %v after 1", err, tries, bad)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = Wait{What: "waiting for r0"}.Until(ctx, func(context.Context) error { return errors.New("not yet") })
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting for r0: not yet") {
		t.Errorf("Until = %v, want what it waited for, the last error and ctx's", err)
	}

	err = Wait{Try: time.Millisecond}.Until(context.Background(), func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			return Final(errors.New("a try without a deadline"))
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

func TestBaseCloseStopsOnceAndRemovesTheScratchDir(t *testing.T) {
	logs := t.TempDir()
	b := Base{Name: "test"}
	if err := b.Open(t.TempDir(), logs, "kit"); err != nil {
		t.Fatal(err)
	}
	if err := b.StartLinks(logs); err != nil {
		t.Fatal(err)
	}
	ps, err := b.Reserve(2)
	if err != nil || len(ps) != 2 {
		t.Fatalf("Reserve = %v, %v", ps, err)
	}
	if s, unlock, err := FaultOn(&b, []int{7}, 0); err != nil || s != 7 {
		t.Errorf("FaultOn(0) = %d, %v", s, err)
	} else {
		unlock()
	}
	addr, err := b.ResourceProxy("c1", "127.0.0.1:1")
	if err != nil || addr == "" {
		t.Fatalf("ResourceProxy = %q, %v", addr, err)
	}
	if _, err := b.Proxy("c 1", "bad", "127.0.0.1:1"); err == nil {
		t.Error("a client name with a space was taken")
	}
	early, late := &closer{}, &closer{}
	if err := b.Track(early); err != nil {
		t.Fatal(err)
	}
	stops := 0
	for range 2 {
		if err := b.Close(nil, func() error { stops++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if stops != 1 {
		t.Errorf("stop ran %d times, want 1", stops)
	}
	if err := b.Track(late); !errors.Is(err, ErrClosed) || early.n != 1 || late.n != 1 {
		t.Errorf("Track after Close = %v; closed %d and %d times, want once each", err, early.n, late.n)
	}
	if _, err := os.Stat(b.Dir); !os.IsNotExist(err) {
		t.Errorf("scratch dir after Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(logs, "toxiproxy.log")); err != nil {
		t.Errorf("toxiproxy's log: %v", err)
	}
	if _, _, err := FaultOn(&b, []int{7}, 1); err == nil || err.Error() != "test: no server 1" {
		t.Errorf("FaultOn(1) of one server = %v", err)
	}
	if _, err := b.Fault(); !errors.Is(err, ErrClosed) || err.Error() != "test: closed" {
		t.Errorf("Fault after Close = %v, want \"test: closed\"", err)
	}
	if err := b.ClearToxics(); !errors.Is(err, ErrClosed) {
		t.Errorf("ClearToxics after Close = %v", err)
	}
}

type closer struct{ n int }

func (c *closer) Close() error { c.n++; return nil }

func TestLogWriterDropsWritesAfterClose(t *testing.T) {
	var none *LogWriter
	if n, err := none.Write([]byte("x")); n != 1 || err != nil {
		t.Errorf("a nil LogWriter: Write = %d, %v", n, err)
	}
	dir := t.TempDir()
	w, err := OpenLog(dir, "a.log")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "kept\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := io.WriteString(w, "dropped\n"); n != 8 || err != nil {
		t.Errorf("Write after Close = %d, %v", n, err)
	}
	if got := LastLine(filepath.Join(dir, "a.log")); got != "kept" {
		t.Errorf("log's last line %q, want kept", got)
	}
}

// echo serves one connection: it echoes what it reads.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func TestRelayCutsByDialler(t *testing.T) {
	target := echo(t)
	r, err := Listen()
	if err != nil {
		t.Fatal(err)
	}
	r.Serve(func(c net.Conn) {
		// The dialler names itself in its first byte.
		var b [1]byte
		if _, err := io.ReadFull(c, b[:]); err != nil || !r.Track(c, int(b[0])) {
			return
		}
		u, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		if !r.Track(u, int(b[0])) {
			u.Close()
			return
		}
		defer r.Forget(u)
		Join(c, u, func(dst, src net.Conn) { io.Copy(dst, src) })
	})
	dial := func(from byte) net.Conn {
		c, err := net.Dial("tcp", r.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte{from, 'x'}); err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		if _, err := io.ReadFull(c, b[:]); err != nil || b[0] != 'x' {
			t.Fatalf("echo through the relay: %q, %v", b, err)
		}
		return c
	}
	one, two := dial(1), dial(2)
	// A connection the relay failed to close fails the test, not hangs it.
	one.SetReadDeadline(time.Now().Add(10 * time.Second))
	two.SetReadDeadline(time.Now().Add(10 * time.Second))
	r.CutFrom(1)
	if _, err := io.ReadAll(one); err != nil {
		t.Errorf("the cut connection: %v", err)
	}
	if _, err := two.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if _, err := io.ReadFull(two, b[:]); err != nil || b[0] != 'y' {
		t.Errorf("the other dialler's connection after the cut: %q, %v", b, err)
	}
	r.Close()
	if _, err := io.ReadAll(two); err != nil {
		t.Errorf("after Close: %v", err)
	}
	if _, err := net.Dial("tcp", r.Addr()); err == nil {
		t.Error("the relay accepts after Close")
	}
}

func TestStartBoundsAndClosesAFailedStart(t *testing.T) {
	closed := 0
	failed := errors.New("no quorum")
	err := Start(context.Background(), time.Minute, func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("start ran without a deadline")
		}
		return failed
	}, func() error { closed++; return nil })
	if err != failed || closed != 1 {
		t.Errorf("Start = %v, closed %d times; want %v, once", err, closed, failed)
	}
	if err := Start(context.Background(), time.Minute, func(context.Context) error { return nil }, func() error { closed++; return nil }); err != nil || closed != 1 {
		t.Errorf("a good start: %v, closed %d times in all", err, closed)
	}
}
