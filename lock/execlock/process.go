package execlock

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/locktest/locktest/internal/proc"
)

// process is one client process: the command in a process group of its
// own (a pause stops the group, a crash kills it), its stdin for requests,
// its stdout read line by line, its stderr appended to its log in the run
// directory with a tail kept for error messages, and a watchdog that kills
// the group should locktest die (the kernel's parent-death signal reaches
// the command alone, not what it started).
type process struct {
	p        *proc.Process
	stdin    *os.File
	watchdog *proc.Process
	dismiss  *os.File // the watchdog's stdin: a line dismisses it, EOF (locktest gone) sets it off
	stderr   *tail
	out, err *os.File       // the read ends of its stdout and stderr
	read     sync.WaitGroup // their readers
	killOnce sync.Once
}

// spawn starts command with env added to locktest's environment (none of
// locktest's own LOCKTEST_ variables, nor a faked clock's, are passed on).
// Its stderr is appended to log ("" keeps only the tail); serve reads its
// stdout.
func spawn(command []string, env []string, log string) (*process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	pr := &process{stdin: inW, stderr: &tail{}, out: outR, err: errR}
	var logFile *os.File
	if log != "" {
		if logFile, err = os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			closeAll(inR, inW, outR, outW, errR, errW)
			return nil, err
		}
	}
	pr.p, err = proc.Start(proc.Spec{Path: command[0], Args: command[1:], Env: env, Stdin: inR, Stdout: outW, Stderr: errW,
		Unset: []string{"LOCKTEST_", "FAKETIME", "LD_PRELOAD"}})
	closeAll(inR, outW, errW) // the child's ends
	if err != nil {
		closeAll(inW, outR, errR, logFile)
		return nil, err
	}
	if logFile != nil {
		fmt.Fprintf(logFile, "--- locktest: started pid %d: %s\n", pr.p.Pid(), strings.Join(command, " "))
	}
	pr.read.Add(1)
	go func() {
		defer pr.read.Done()
		var w io.Writer = pr.stderr
		if logFile != nil {
			w = io.MultiWriter(logFile, pr.stderr)
		}
		io.Copy(w, errR)
		if logFile != nil {
			logFile.Close()
		}
	}()
	if err := pr.watch(); err != nil {
		pr.kill()
		return nil, err
	}
	return pr, nil
}

// serve reads the client's stdout: each line goes to onLine (torn: the
// last, cut off by the end of its output without a newline), then, once
// stdout is closed (the process exited, or closed it), onEOF is called.
func (pr *process) serve(onLine func(b []byte, torn bool), onEOF func()) {
	pr.read.Add(1)
	go func() {
		defer pr.read.Done()
		sc := bufio.NewScanner(pr.out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		torn := false
		sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
			adv, tok, err := bufio.ScanLines(data, atEOF)
			torn = tok != nil && atEOF && adv == len(data) && !bytes.HasSuffix(data, []byte("\n"))
			return adv, tok, err
		})
		for sc.Scan() {
			onLine(sc.Bytes(), torn)
		}
		onEOF()
	}()
}

// watch starts the watchdog: a shell that waits for a line on its stdin,
// and kills the client's process group if it gets EOF instead, which it
// gets when locktest dies, however it dies. It runs in a group of its own
// (a pause of the client does not stop it) and outlives locktest.
func (pr *process) watch() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	pr.watchdog, err = proc.Start(proc.Spec{Path: "/bin/sh", Stdin: r, Survive: true,
		Args: []string{"-c", `read _ || kill -KILL -- -"$1" 2>/dev/null`, "locktest-exec-watchdog", strconv.Itoa(pr.p.Pid())}})
	r.Close()
	if err != nil {
		w.Close()
		return fmt.Errorf("starting the watchdog: %w", err)
	}
	pr.dismiss = w
	return nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// send writes one line on the client's stdin.
func (pr *process) send(b []byte) error {
	_, err := pr.stdin.Write(append(b, '\n'))
	return err
}

// signal sends sig to the client's process group.
func (pr *process) signal(sig syscall.Signal) error {
	if pr.p.Exited() {
		return proc.ErrExited
	}
	if err := syscall.Kill(-pr.p.Pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%v to process group %d: %w", sig, pr.p.Pid(), err)
	}
	return nil
}

// closeStdin tells the client that locktest is done with it.
func (pr *process) closeStdin() { pr.stdin.Close() }

// kill kills the client's whole process group (a stopped one too), waits
// for the command to exit and its output to be read, and dismisses the
// watchdog. It is idempotent.
func (pr *process) kill() {
	pr.killOnce.Do(func() {
		pr.signal(syscall.SIGKILL)
		<-pr.p.Done()
		pr.stdin.Close()
		if pr.dismiss != nil {
			pr.dismiss.Write([]byte("\n"))
			pr.dismiss.Close()
			<-pr.watchdog.Done()
		}
		read := make(chan struct{})
		go func() {
			pr.read.Wait()
			close(read)
		}()
		select {
		case <-read:
		case <-time.After(readWait):
			// Something the command started outside its group still
			// holds its output open: stop reading it.
			pr.out.Close()
			pr.err.Close()
			<-read
		}
		pr.out.Close()
		pr.err.Close()
	})
}

// readWait bounds how long kill waits for the rest of a killed client's
// output.
const readWait = 2 * time.Second

// status says how the command ended: "exit status 1", "killed" ...; ""
// while it runs.
func (pr *process) status() string {
	if !pr.p.Exited() {
		return ""
	}
	var ee *exec.ExitError
	if err := pr.p.Err(); errors.As(err, &ee) {
		return ee.String()
	}
	if err := pr.p.Err(); err != nil {
		return err.Error()
	}
	return "exit status 0"
}

// tail keeps the last bytes written to it: a client's stderr, for the
// one line that says why it failed.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 4 << 10

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > tailSize {
		t.buf = t.buf[len(t.buf)-tailSize:]
	}
	return len(b), nil
}

// line is the tail's last non-empty lines, at most n of them, in one
// line, cut to a length a line can hold; "" when the client wrote
// nothing.
func (t *tail) line(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lines []string
	for _, l := range bytes.Split(t.buf, []byte("\n")) {
		if l = bytes.TrimSpace(l); len(l) > 0 {
			lines = append(lines, string(l))
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s := strings.Join(lines, " | ")
	const max = 400
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	return s
}
