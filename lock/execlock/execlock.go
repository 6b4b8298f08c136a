// Package execlock runs a lock written in any language under locktest: a
// recipe (lock.Recipe) whose lock lives in a process of its own, a command
// started once per client, that speaks locktest's lock-client protocol on
// its stdin and stdout (README.md in this folder pins it: the environment
// it is given, one JSON request per line in, one JSON reply per line out,
// and the "lost" event). The faults act on that process for real: a pause
// stops its process group (SIGSTOP, SIGCONT), a crash kills it (SIGKILL)
// and a new process takes over as a new history process, isolation and
// slow links act on the links it is given, a clock fault fakes its clock
// through libfaketime where its runtime honours it (and is refused by name
// before the run where it does not), and lease faults reach its lock
// through the key its grants name.
//
// The package names no lock service: what a client needs of its servers
// (the addresses of its own links, and what its backend adds, such as
// etcd's URLs) comes from lock.Env. adapters/ holds the adapters of real
// lock libraries (Python, Node, Go).
package execlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/internal/shellwords"
	"github.com/locktest/locktest/lock"
)

// Prefix begins a recipe spec: "exec:COMMAND ARGS…".
const Prefix = "exec:"

// Recipe is a lock in a process of its own: Command, started once per
// client (and again whenever a client starts over). It implements
// lock.Recipe and lock.Starter (a command that is not there or exits at
// once stops the run before it starts), lock.Limited (clock faults need a
// runtime that honours libfaketime) and lock.Described (the protocol's
// version in the history's setup event).
type Recipe struct {
	// Command is the program and its arguments.
	Command []string
	// Clock is how the client's clock is faked for clock faults.
	Clock Clock
	// StartWindow is the longest Start watches a new process for an exit
	// at once (default DefaultStartWindow).
	StartWindow time.Duration

	spec string // as given, after Prefix

	prepare sync.Once
	run     []string // the command as run (a Java source compiled)
	prepErr error
}

// DefaultStartWindow is the longest a process is watched as it starts
// before the run: one still busy then is taken to be up.
const DefaultStartWindow = 10 * time.Second

// settleTime is how long a starting process must stay idle (every process
// of its group asleep, their CPU time still) to count as up, waiting for
// its first request: an interpreter loading its modules, however slowly a
// loaded machine lets it, is busy, and one that fails to exits first.
const settleTime = 500 * time.Millisecond

// New returns the recipe of a command.
func New(command ...string) *Recipe {
	return &Recipe{Command: command, spec: shellwords.Join(command)}
}

// IsSpec says whether s names an exec recipe ("exec:...").
func IsSpec(s string) bool { return strings.HasPrefix(s, Prefix) }

// Parse reads a recipe spec, "exec:COMMAND ARGS…", whose words are split
// as a shell splits them (quotes and backslashes; no variables, no
// globs), and checks that the command can be found.
func Parse(spec string) (*Recipe, error) {
	if !IsSpec(spec) {
		return nil, fmt.Errorf("%q is not an exec recipe (want %sCOMMAND ARGS…)", spec, Prefix)
	}
	text := strings.TrimSpace(strings.TrimPrefix(spec, Prefix))
	words, err := shellwords.Split(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spec, err)
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("%q: no command (want %sCOMMAND ARGS…)", spec, Prefix)
	}
	if _, err := exec.LookPath(words[0]); err != nil {
		return nil, fmt.Errorf("%s: command %s", spec, notFound(words[0], err))
	}
	for i, w := range words {
		if strings.HasPrefix(w, Adapters+"/") {
			if words[i], err = adapter(w); err != nil {
				return nil, fmt.Errorf("%s: %w", spec, err)
			}
		}
	}
	return &Recipe{Command: words, spec: text}, nil
}

// notFound says why a command cannot be run, in words.
func notFound(cmd string, err error) string {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return fmt.Sprintf("%q not found", cmd)
	case errors.Is(err, os.ErrPermission):
		return fmt.Sprintf("%q is not executable", cmd)
	}
	return fmt.Sprintf("%q: %v", cmd, err)
}

// Name is the recipe as --recipe names it: "exec:" and the command.
func (r *Recipe) Name() string { return Prefix + r.spec }

// Params: the protocol's version, for the history's setup event, and that
// the run's stall watcher sees locktest's process, not the lock's: a
// lease the lock's process let lapse while the host did not run it (as
// under load, with no fault) is no broken promise of the lock.
func (r *Recipe) Params() map[string]string {
	return map[string]string{"exec_protocol": fmt.Sprint(Version), histories.SetupStalls: histories.StallsNotTheLocks}
}

// Refuses says why the client cannot suffer clock faults, if it cannot:
// its runtime ignores or breaks under libfaketime, or libfaketime is
// missing. Every other fault family acts on any process.
func (r *Recipe) Refuses(family string) string {
	if family != "clock" {
		return ""
	}
	_, why := r.faketime()
	return why
}

// Prepare returns the command as it is run, once prepared: a Java source
// compiled (java.go), any other command as it is.
func (r *Recipe) Prepare() ([]string, error) {
	r.prepare.Do(func() {
		if r.run, r.prepErr = compileJava(r.Command); r.prepErr != nil {
			r.prepErr = fmt.Errorf("%s: %w", r.Name(), r.prepErr)
		}
	})
	return r.run, r.prepErr
}

// New starts a client process for env's client, a replacement in the run,
// and watches it until it is up (as Start does) or ctx ends: a runtime's
// slow start (a JVM's) is then not part of its first operation, whose
// time counts against the lock. A command that exits at once is an error.
func (r *Recipe) New(ctx context.Context, env lock.Env) (lock.Locker, error) {
	l, err := r.start(env)
	if err != nil {
		return nil, err
	}
	switch err := r.settle(ctx, l); {
	case errors.Is(err, context.DeadlineExceeded):
		// Taken to be up: its first operation will tell.
	case err != nil:
		l.end()
		return nil, err
	}
	return l, nil
}

// Start starts the client's first process before the run, and watches it
// until it is up, idle and waiting for its first request (settleTime), or
// for StartWindow at most: a command that exits by then (a missing module,
// a syntax error, a server it cannot reach) stops the run, its stderr's
// last lines said.
func (r *Recipe) Start(ctx context.Context, env lock.Env) (lock.Locker, error) {
	l, err := r.start(env)
	if err != nil {
		return nil, err
	}
	window := r.StartWindow
	if window <= 0 {
		window = DefaultStartWindow
	}
	wctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	switch err := r.settle(wctx, l); {
	case ctx.Err() != nil:
		l.end()
		return nil, ctx.Err()
	case err != nil && !errors.Is(err, context.DeadlineExceeded):
		l.end()
		return nil, err
	}
	return l, nil // up, or still busy after StartWindow and taken to be up
}

// settle watches a new process until it is idle (settleTime), or ctx ends
// (its error then). A process that exits first: its exit is the error,
// with its stderr's last lines.
func (r *Recipe) settle(ctx context.Context, l *locker) error {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var (
		was   proc.GroupState
		quiet time.Time // since when the group has been idle
		// every: watch every process of the group (proc.Group, a scan of
		// all of /proc), not only its leader's descendants (cheap).
		every bool
	)
	// group is what the group is doing: its leader's descendants while
	// the kernel lists children (proc.Descendants), else all of it.
	group := func() proc.GroupState {
		if !every {
			if g, ok := proc.Descendants(l.pr.p.Pid()); ok {
				return g
			}
			every = true
		}
		return proc.Group(l.pr.p.Pid())
	}
	for {
		select {
		case <-l.pr.p.Done():
			l.pr.kill() // its output read whole, for its stderr's last lines
			return fmt.Errorf("%s exited at once (%s)%s", r.Name(), l.pr.status(), stderrSays(l.pr))
		case <-ctx.Done():
			// Its cause: the workload's op timeout runs on the client's
			// clock, which ends ctx by cancelling it with cause
			// DeadlineExceeded (ctx.Err() says only Canceled).
			return context.Cause(ctx)
		case <-tick.C:
		}
		now := time.Now()
		g := group()
		if !g.Idle(was) {
			was, quiet = g, now
		}
		if now.Sub(quiet) < settleTime {
			continue
		}
		if every {
			return nil
		}
		// Idle below its leader: a member adopted elsewhere (its parent
		// exited) is seen by a scan of all; if there is one, the group
		// is watched whole from then on.
		all := proc.Group(l.pr.p.Pid())
		if slices.Sort(all.Pids); slices.Equal(all.Pids, g.Pids) {
			return nil
		}
		every, was, quiet = true, proc.GroupState{}, now
	}
}

// stderrSays is ": " and the last lines of a process's stderr, or "".
func stderrSays(pr *process) string {
	if t := pr.stderr.line(3); t != "" {
		return ": " + t
	}
	return ": it wrote nothing on stderr"
}

// environment is what a client process is told (README.md: The
// environment).
func (r *Recipe) environment(env lock.Env) []string {
	vars := []string{
		"LOCKTEST_PROTOCOL=" + fmt.Sprint(Version),
		"LOCKTEST_BACKEND=" + env.Backend,
		"LOCKTEST_ENDPOINTS=" + strings.Join(env.Endpoints, ","),
		"LOCKTEST_PREFIX=" + env.Prefix,
		fmt.Sprintf("LOCKTEST_TTL=%d", env.TTL),
		"LOCKTEST_CLIENT=" + env.Name,
		fmt.Sprintf("LOCKTEST_SEED=%d", env.Seed),
	}
	for k, v := range env.Vars {
		vars = append(vars, k+"="+v)
	}
	return vars
}

// logPath is where a client's stderr goes: logs/ in the run directory.
func logPath(env lock.Env) string {
	if env.Dir == "" {
		return ""
	}
	dir := filepath.Join(env.Dir, "logs")
	if os.MkdirAll(dir, 0o755) != nil {
		return ""
	}
	return filepath.Join(dir, "exec-"+env.Name+".log")
}

// firstLine is a file's first line, for its "#!" (nil if it cannot be
// read).
func firstLine(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, 256)
	n, _ := f.Read(b)
	line, _, _ := bytes.Cut(b[:n], []byte("\n"))
	return line
}

// Adapters is the folder of the adapters of real libraries, from the
// repository's root. The catalog's scenarios of a library's bugs name them
// by this path, which Parse resolves against the repository's root
// (adapter), so that the recipe's name is the same in every checkout and
// from every working directory.
const Adapters = "lock/execlock/adapters"

// adapter is the absolute path of path, a file under Adapters, in the
// first of the working directory and its parents that holds it: the root
// of the locktest checkout the command runs in.
func adapter(path string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		p := filepath.Join(dir, path)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("%s is an adapter of locktest's repository, found from its root: run locktest inside a checkout of github.com/locktest/locktest (not found in %s nor above it)", path, wd)
		}
	}
}

// Spec is the recipe spec of command: Prefix and its words, quoted as
// Parse reads them.
func Spec(command ...string) string { return Prefix + shellwords.Join(command) }
