package execlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/locktest/locktest/lock"
)

// locker is one client process as a lock.Locker: one request at a time on
// its stdin, the replies and events on its stdout. It is a lock.Session
// whose Done closes when the process is of no more use (it exited, or
// broke the protocol, and was killed), and whose Orphan is a crash
// (SIGKILL of its group); a lock.Process (a pause stops its group).
type locker struct {
	r     *Recipe
	env   lock.Env
	pr    *process
	clock *fakeClock // nil when its clock is not faked

	mu      sync.Mutex
	nextID  int64
	pending *call            // the request in flight
	held    map[string]*held // the locks it holds, by name
	lines   int              // lines read from its stdout
	broken  error            // why it is of no more use; nil while it is
	stopped bool             // a pause has stopped it
	gone    chan struct{}    // closed when broken is set
}

// call is a request in flight and where its reply goes.
type call struct {
	req   request
	reply chan reply // buffered: one reply
}

// held is one grant of a lock.
type held struct {
	l        *locker
	name     string
	token    int64
	hasToken bool
	key      string
	revision int64
	session  string
	lost     chan struct{} // closed at a "lost" event
	lostOnce sync.Once
}

var (
	_ lock.Locker    = (*locker)(nil)
	_ lock.Session   = (*locker)(nil)
	_ lock.Process   = (*locker)(nil)
	_ lock.Watched   = (*held)(nil)
	_ lock.Keyed     = (*held)(nil)
	_ lock.Decided   = (*held)(nil)
	_ lock.Sessioned = (*held)(nil)
	_ lock.Untokened = (*held)(nil)
)

// start starts a client process for env's client.
func (r *Recipe) start(env lock.Env) (*locker, error) {
	if len(r.Command) == 0 {
		return nil, errors.New("exec: no command")
	}
	run, err := r.Prepare()
	if err != nil {
		return nil, err
	}
	l := &locker{r: r, env: env, held: map[string]*held{}, gone: make(chan struct{})}
	vars := r.environment(env)
	if lib, why := r.faketime(); why == "" && env.Clock != nil {
		path, err := clockPath(env)
		if err != nil {
			return nil, err
		}
		fc, fv, err := fakeEnv(lib, path, env.Clock)
		if err != nil {
			return nil, fmt.Errorf("faking the client's clock: %w", err)
		}
		l.clock, vars = fc, append(vars, fv...)
	}
	pr, err := spawn(run, vars, logPath(env))
	if err != nil {
		if l.clock != nil {
			l.clock.close()
		}
		return nil, fmt.Errorf("%s: %s", r.Name(), startError(r.Command[0], err))
	}
	l.pr = pr
	pr.serve(l.onLine, l.onEOF)
	return l, nil
}

// startError says why a command could not start, in words.
func startError(cmd string, err error) string {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) || errors.Is(err, syscallENOEXEC) {
		return "command " + notFound(cmd, err)
	}
	return err.Error()
}

// syscallENOEXEC is the error of a file that is no program (no "#!").
var syscallENOEXEC = syscall.ENOEXEC

// clockPath is the spec file of env's client's faked clock: under the
// run directory, or in the temporary directory without one.
func clockPath(env lock.Env) (string, error) {
	dir := filepath.Join(env.Dir, "clocks")
	if env.Dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("locktest-clocks-%d", os.Getpid()))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(dir, env.Name), nil
}

// Pid is the lock process's: the workload reads how long it waited to
// run (its starvation).
func (l *locker) Pid() int { return l.pr.p.Pid() }

// who names the client in a line for the user.
func (l *locker) who() string {
	return fmt.Sprintf("exec client %s (pid %d)", l.env.Name, l.pr.p.Pid())
}

// onLine handles one line of the client's output.
func (l *locker) onLine(b []byte, torn bool) {
	l.mu.Lock()
	l.lines++
	n := l.lines
	l.mu.Unlock()
	if torn {
		l.breach(fmt.Errorf("line %d of its output was cut off by its end (no newline): %s", n, quote(b)))
		return
	}
	ln, err := parseLine(b)
	if err != nil {
		l.breach(fmt.Errorf("line %d of its output is not the protocol's (%v): %s", n, err, quote(b)))
		return
	}
	if ln.Event != "" {
		l.event(ln)
		return
	}
	l.mu.Lock()
	c := l.pending
	switch {
	case c == nil:
		l.mu.Unlock()
		l.breach(fmt.Errorf("line %d answers out of turn (no request is in flight): %s", n, quote(b)))
		return
	case c.req.ID != ln.ID:
		l.mu.Unlock()
		l.breach(fmt.Errorf("line %d answers id %d, but the request in flight is id %d: %s", n, ln.ID, c.req.ID, quote(b)))
		return
	}
	l.pending = nil
	if c.req.Op == opAcquire && ln.reply.OK {
		// Held before the reply is handed on: a "lost" the client sends
		// right after it (a grant its lock calls lost at once) is read
		// before Acquire's goroutine runs again, and must find it.
		r := ln.reply
		l.held[c.req.Lock] = &held{l: l, name: c.req.Lock, token: r.Token, hasToken: r.HasToken, key: r.Key, revision: r.Revision, session: r.Session, lost: make(chan struct{})}
	}
	l.mu.Unlock()
	c.reply <- ln.reply
}

// event handles an event line: "lost" ends the client's belief in a lock
// it holds (Watched); one about a lock it does not hold (a release is
// under way, or done) tells nothing more. Events of names this version
// does not know are left alone.
func (l *locker) event(ln line) {
	if ln.Event != EventLost {
		return
	}
	l.mu.Lock()
	h := l.held[ln.Lock]
	l.mu.Unlock()
	if h != nil {
		h.lostOnce.Do(func() { close(h.lost) })
	}
}

// onEOF: the client closed its stdout, which it does by exiting.
func (l *locker) onEOF() {
	select {
	case <-l.pr.p.Done():
	case <-time.After(readWait):
	}
	l.fail(fmt.Errorf("the client exited (%s)%s", orRunning(l.pr.status()), stderrSays(l.pr)))
}

func orRunning(status string) string {
	if status == "" {
		return "its stdout closed, the process still running"
	}
	return status
}

// breach is a line that broke the protocol: the user is told in one line,
// the operation in flight (if any) gets an unknown outcome, and the
// process is killed, to be replaced.
func (l *locker) breach(err error) {
	if l.env.Logf != nil {
		l.env.Logf("%s: %v; its operation in flight has an unknown outcome, and the process is replaced", l.who(), err)
	}
	l.fail(err)
	go l.pr.kill()
}

// fail makes the locker of no more use, with why; the first reason stays.
func (l *locker) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken != nil {
		return
	}
	l.broken = err
	close(l.gone)
}

// brokenErr is why the locker is of no more use.
func (l *locker) brokenErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.broken
}

// errUnknown is an operation's error when its outcome is unknown.
func errUnknown(format string, args ...any) error {
	return fmt.Errorf("outcome unknown: "+format, args...)
}

// do sends one request and waits for its reply, ctx's end, or the
// process's breakdown. sent says whether the request reached the process
// (a failed write of a line to a pipe writes nothing).
func (l *locker) do(ctx context.Context, req request) (rep reply, sent bool, err error) {
	l.mu.Lock()
	if l.broken != nil {
		err := l.broken
		l.mu.Unlock()
		return reply{}, false, err
	}
	if l.pending != nil {
		l.mu.Unlock()
		return reply{}, false, errors.New("exec: a request is in flight already")
	}
	l.nextID++
	req.ID = l.nextID
	c := &call{req: req, reply: make(chan reply, 1)}
	l.pending = c
	l.mu.Unlock()
	b, _ := json.Marshal(req)
	if err := l.pr.send(b); err != nil {
		l.mu.Lock()
		l.pending = nil
		l.mu.Unlock()
		l.fail(fmt.Errorf("writing its request: %w", err))
		return reply{}, false, err
	}
	select {
	case rep := <-c.reply:
		return rep, true, nil
	case <-l.gone:
		select {
		case rep := <-c.reply: // answered just before it broke down
			return rep, true, nil
		default:
		}
		return reply{}, true, l.brokenErr()
	case <-ctx.Done():
		// It may still act on the request: it is of no more use.
		l.fail(fmt.Errorf("request %d (%s) got no reply in time", req.ID, req.Op))
		return reply{}, true, context.Cause(ctx)
	}
}

// timeout is the acquire's timeout_ms: the harness's deadline less a
// margin, so that a client that keeps to it answers before locktest gives
// up on it.
func (l *locker) timeout() time.Duration {
	d := l.env.OpTimeout
	if d <= 0 {
		return 5 * time.Second
	}
	return d - min(time.Second, d/5)
}

// Acquire sends an acquire and waits for its reply.
func (l *locker) Acquire(ctx context.Context, name string) (lock.Held, error) {
	rep, sent, err := l.do(ctx, request{Op: opAcquire, Lock: name, TimeoutMS: l.timeout().Milliseconds()})
	switch {
	case err != nil && !sent:
		return nil, fmt.Errorf("%w: %s: request not sent: %v", lock.ErrNotAcquired, l.r.Name(), err)
	case err != nil:
		return nil, errUnknown("%v", err)
	case !rep.OK && rep.Definite:
		return nil, fmt.Errorf("%w: %s", lock.ErrNotAcquired, orNoReason(rep.Error))
	case !rep.OK:
		return nil, errUnknown("%s", orNoReason(rep.Error))
	}
	l.mu.Lock()
	h := l.held[name] // onLine's, as it read the reply
	l.mu.Unlock()
	return h, nil
}

func orNoReason(s string) string {
	if s == "" {
		return "the client gave no reason"
	}
	return s
}

// release sends a release of h and waits for its reply.
func (l *locker) release(ctx context.Context, h *held) error {
	defer func() {
		l.mu.Lock()
		if l.held[h.name] == h {
			delete(l.held, h.name)
		}
		l.mu.Unlock()
	}()
	rep, _, err := l.do(ctx, request{Op: opRelease, Lock: h.name})
	switch {
	case err != nil:
		return errUnknown("%v", err)
	case !rep.OK && rep.Definite:
		// Nothing was released: the lock was not the client's any more.
		return fmt.Errorf("release failed, and did nothing: %s", orNoReason(rep.Error))
	case !rep.OK:
		return errUnknown("%s", orNoReason(rep.Error))
	}
	return nil
}

// Close ends the process: a client that is idle and healthy is told by
// the end of its stdin and given a moment to exit; then its group is
// killed, whatever it started too.
func (l *locker) Close() error {
	l.mu.Lock()
	idle := l.broken == nil && l.pending == nil && !l.stopped
	l.mu.Unlock()
	if idle {
		l.pr.closeStdin()
		select {
		case <-l.pr.p.Done():
		case <-time.After(closeWait):
		}
	}
	l.end()
	return nil
}

// closeWait is how long Close waits for an idle client to exit by itself
// once its stdin is closed: long enough to give up what it holds (a
// session's revoke is one round trip) on a loaded machine.
const closeWait = time.Second

// end kills the process and stops what followed it.
func (l *locker) end() {
	l.fail(errors.New("closed"))
	l.pr.kill()
	if l.clock != nil {
		l.clock.close()
	}
}

// Done is closed once the process is of no more use.
func (l *locker) Done() <-chan struct{} { return l.gone }

// Orphan is a crash: SIGKILL of the group, nothing asked of the client.
func (l *locker) Orphan() { l.end() }

// Stop stops the process group (SIGSTOP).
func (l *locker) Stop() error {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	return l.pr.signal(syscall.SIGSTOP)
}

// Continue continues it (SIGCONT).
func (l *locker) Continue() error {
	l.mu.Lock()
	l.stopped = false
	l.mu.Unlock()
	return l.pr.signal(syscall.SIGCONT)
}

func (h *held) Token() int64                      { return h.token }
func (h *held) Untokened() bool                   { return !h.hasToken }
func (h *held) Key() string                       { return h.key }
func (h *held) Revision() int64                   { return h.revision }
func (h *held) Session() string                   { return h.session }
func (h *held) Done() <-chan struct{}             { return h.lost }
func (h *held) Release(ctx context.Context) error { return h.l.release(ctx, h) }
