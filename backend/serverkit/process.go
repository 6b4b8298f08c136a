package serverkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/locktest/locktest/internal/ports"
	"github.com/locktest/locktest/internal/proc"
)

// Proc is one server's current OS process, which a crash ends and a
// restart replaces. Every process it starts is a proc.Process: killed by
// the kernel when locktest dies, however it dies, and in a process group
// of its own, which the signals reach whole. Safe for concurrent use.
type Proc struct {
	// Log is the file the server writes its errors to, which Exited
	// reads; "" is the process's own output (Spec.Log).
	Log string
	// Signal, when set, stands in for a signal to the process's group
	// (SIGSTOP, SIGCONT, SIGKILL), for a server whose children make groups
	// of their own (PostgreSQL's backends); after SIGKILL it returns once
	// everything it signalled has exited.
	Signal func(p *proc.Process, sig syscall.Signal) error

	mu       sync.Mutex
	p        *proc.Process
	paused   bool
	log      string
	logStart int64 // the log's size when p started
}

// ErrDown is the error of a signal to a server that does not run.
var ErrDown = errors.New("server is down")

// Start starts the process spec describes, in place of any earlier one.
func (s *Proc) Start(spec proc.Spec) error {
	log := s.Log
	if log == "" {
		log = spec.Log
	}
	start := size(log)
	p, err := proc.Start(spec)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.p, s.paused, s.log, s.logStart = p, false, log, start
	s.mu.Unlock()
	return nil
}

// Process is the current process, nil before Start.
func (s *Proc) Process() *proc.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}

// Pid is the current process's ID (one that has exited too), 0 before
// Start.
func (s *Proc) Pid() int {
	if p := s.Process(); p != nil {
		return p.Pid()
	}
	return 0
}

// Running reports whether the process is alive (it may be paused).
func (s *Proc) Running() bool {
	p := s.Process()
	return p != nil && !p.Exited()
}

// Pause freezes the process (SIGSTOP to its group): it runs no
// instruction until Resume, while the kernel still accepts its
// connections.
func (s *Proc) Pause() error { return s.freeze(true) }

// Resume continues it (SIGCONT).
func (s *Proc) Resume() error { return s.freeze(false) }

func (s *Proc) freeze(stop bool) error {
	p := s.Process()
	if p == nil {
		return ErrDown
	}
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	if err := s.signal(p, sig); err != nil {
		return err
	}
	s.mu.Lock()
	s.paused = stop
	s.mu.Unlock()
	return nil
}

// Paused reports whether Pause is in force.
func (s *Proc) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// Kill kills the process (SIGKILL, a paused one too) and waits until it
// has exited; without one it does nothing.
func (s *Proc) Kill() error {
	p := s.Process()
	if p == nil {
		return nil
	}
	err := s.signal(p, syscall.SIGKILL)
	s.mu.Lock()
	s.paused = false
	s.mu.Unlock()
	return err
}

func (s *Proc) signal(p *proc.Process, sig syscall.Signal) error {
	switch {
	case s.Signal != nil:
		return s.Signal(p, sig)
	case sig == syscall.SIGSTOP:
		return p.Stop()
	case sig == syscall.SIGCONT:
		return p.Cont()
	default:
		return p.Kill()
	}
}

// LogSince is what the server's log holds since the process started.
func (s *Proc) LogSince() ([]byte, error) {
	s.mu.Lock()
	log, from := s.log, s.logStart
	s.mu.Unlock()
	return Since(log, from)
}

// Exited says why the process, which who names ("redisserver: r0"), ended
// as it started: a port taken in the meantime, when its log since its
// start says "address already in use" (in any case) or one of inUse
// (errors.Is syscall.EADDRINUSE: Retry tries other ports), or else its
// exit and the last line of its log.
func (s *Proc) Exited(who string, inUse ...string) error {
	b, _ := s.LogSince()
	low := bytes.ToLower(b)
	for _, m := range append([]string{"address already in use"}, inUse...) {
		if bytes.Contains(low, bytes.ToLower([]byte(m))) {
			return fmt.Errorf("%s: %s: %w", who, lastLine(b), syscall.EADDRINUSE)
		}
	}
	var err error
	if p := s.Process(); p != nil {
		err = p.Err()
	}
	return fmt.Errorf("%s exited as it started (%v): %s (its log: %s)", who, err, lastLine(b), s.log)
}

// Run runs the program spec describes to its end (a setup step: initdb,
// mariadb-install-db), killing it if ctx ends first. who names it in the
// error ("pgserver: initdb"), which quotes the last line of spec.Log.
func Run(ctx context.Context, who string, spec proc.Spec) error {
	p, err := proc.Start(spec)
	if err != nil {
		return fmt.Errorf("%s: %w", who, err)
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		p.Kill()
		return fmt.Errorf("%s: %w", who, ctx.Err())
	}
	if err := p.Err(); err != nil {
		return fmt.Errorf("%s failed: %v: %s (its log: %s)", who, err, LastLine(spec.Log), spec.Log)
	}
	return nil
}

// Retry runs start, numbering its attempts from 1, until it succeeds, it
// fails for another reason than a port taken after ports.Reserve checked
// it (ports.IsAddrInUse), or attempts have failed. After each failure undo
// (if set) stops what the attempt started.
func Retry(attempts int, start func(attempt int) error, undo func() error) error {
	for attempt := 1; ; attempt++ {
		err := start(attempt)
		if err == nil {
			return nil
		}
		if undo != nil {
			if uerr := undo(); uerr != nil {
				return errors.Join(err, uerr)
			}
		}
		if !ports.IsAddrInUse(err) || attempt >= attempts {
			return err
		}
	}
}

// Wait says how to wait for a server to be ready.
type Wait struct {
	// Every is how often to try (default 10 ms); Try bounds one try
	// (0: ctx alone does).
	Every, Try time.Duration
	// What is said when ctx ends first: "redisserver: waiting for PING (r0)".
	What string
	// Proc, when set, ends the wait once it has exited, with
	// Proc.Exited(Who, InUse...).
	Proc  *Proc
	Who   string
	InUse []string
}

// Until calls ready until it returns nil, it returns an error wrapped in
// Final (then that error), the process has exited, or ctx ends.
func (w Wait) Until(ctx context.Context, ready func(context.Context) error) error {
	every := w.Every
	if every == 0 {
		every = 10 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if w.Try > 0 {
			tctx, cancel = context.WithTimeout(ctx, w.Try)
		}
		err := ready(tctx)
		cancel()
		if err == nil {
			return nil
		}
		var f final
		if errors.As(err, &f) {
			return f.err
		}
		if w.Proc != nil && !w.Proc.Running() {
			return w.Proc.Exited(w.Who, w.InUse...)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %v: %w", w.What, err, ctx.Err())
		case <-t.C:
		}
	}
}

type final struct{ err error }

func (f final) Error() string { return f.err.Error() }

// Final marks an error of a readiness check that waiting will not cure:
// Until returns it at once.
func Final(err error) error { return final{err} }

// Start runs start under ctx, or under timeout when ctx has no deadline,
// and calls close when it fails: a failed start leaves nothing behind.
func Start(ctx context.Context, timeout time.Duration, start func(context.Context) error, close func() error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := start(ctx); err != nil {
		close()
		return err
	}
	return nil
}
