// Package proc runs the OS processes a run starts (etcd members, Redis
// servers) so that none outlives locktest: each gets SIGKILL from the kernel
// when locktest dies, however it dies, and is in a process group of its own,
// so that a Ctrl-C at the terminal reaches locktest alone, which then stops
// them in order. It also gives the faults their signals: SIGSTOP and
// SIGCONT for a pause, SIGKILL for a crash.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Spec describes a process to start.
type Spec struct {
	Path string
	Args []string // without the program name
	Env  []string // added to locktest's environment
	// Unset are prefixes of the names of locktest's environment variables
	// the process is not to get ("LOCKTEST_").
	Unset []string
	Dir   string
	// Log receives the process's stdout and stderr (appended); "" discards.
	Log string
	// Stdin, Stdout and Stderr, if set, are the process's own (pipes to
	// a process locktest talks with); they override Log.
	Stdin, Stdout, Stderr *os.File
	// Survive leaves out the parent-death signal: the process outlives
	// locktest (a watchdog that acts on its death).
	Survive bool
	// Unprivileged runs the process as nobody (65534) in a user namespace
	// of its own, where that user is locktest's outside: a server that
	// refuses to run as root (PostgreSQL) runs, and reads and writes what
	// locktest can.
	Unprivileged bool
}

// Process is a started OS process.
type Process struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // Wait's result, set before done closes
}

// spawner starts every process from one goroutine locked to its OS thread
// for good: the kernel sends the parent-death signal when the thread that
// forked the child exits, not the process, and Go may end other threads.
var spawner = sync.OnceValue(func() chan<- func() {
	ch := make(chan func())
	go func() {
		runtime.LockOSThread()
		for f := range ch {
			f()
		}
	}()
	return ch
})

// Start starts the process described by s.
func Start(s Spec) (*Process, error) {
	path := s.Path
	if s.Dir != "" && strings.ContainsRune(path, filepath.Separator) && !filepath.IsAbs(path) {
		// A relative path the user gave (--redis-bin ./redis-server) is
		// theirs, from locktest's directory; exec would look in Dir.
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", path, err)
		}
		path = abs
	}
	cmd := exec.Command(path, s.Args...)
	cmd.Dir = s.Dir
	cmd.Env = append(environ(s.Unset), s.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if s.Survive {
		cmd.SysProcAttr.Pdeathsig = 0
	}
	if s.Unprivileged {
		const nobody = 65534
		a := cmd.SysProcAttr
		a.Cloneflags = syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: nobody, HostID: os.Getuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: nobody, HostID: os.Getgid(), Size: 1}}
		a.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	if s.Log != "" {
		f, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		p.log = f
		cmd.Stdout, cmd.Stderr = f, f
	}
	if s.Stdin != nil {
		cmd.Stdin = s.Stdin
	}
	if s.Stdout != nil {
		cmd.Stdout = s.Stdout
	}
	if s.Stderr != nil {
		cmd.Stderr = s.Stderr
	}
	res := make(chan error, 1)
	spawner() <- func() { res <- cmd.Start() }
	if err := <-res; err != nil {
		p.closeLog()
		return nil, fmt.Errorf("starting %s: %w", s.Path, err)
	}
	go func() {
		p.err = cmd.Wait()
		p.closeLog()
		close(p.done)
	}()
	return p, nil
}

// environ is locktest's environment without the variables whose names
// begin with one of unset.
func environ(unset []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(unset, func(p string) bool { return strings.HasPrefix(name, p) }) {
			out = append(out, kv)
		}
	}
	return out
}

func (p *Process) closeLog() {
	if p.log != nil {
		p.log.Close()
	}
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is how the process ended (nil before it has).
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// signal sends sig to the process's group (the process and anything it
// started).
func (p *Process) signal(sig syscall.Signal) error {
	if p.Exited() {
		return ErrExited
	}
	if err := syscall.Kill(-p.Pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%v to process %d: %w", sig, p.Pid(), err)
	}
	return nil
}

// ErrExited is returned for a signal to a process that has exited.
var ErrExited = errors.New("proc: the process has exited")

// Stop freezes the process (SIGSTOP): it runs no instruction until Cont.
func (p *Process) Stop() error { return p.signal(syscall.SIGSTOP) }

// Cont resumes a stopped process (SIGCONT).
func (p *Process) Cont() error { return p.signal(syscall.SIGCONT) }

// Terminate asks the process to exit (SIGTERM).
func (p *Process) Terminate() error { return p.signal(syscall.SIGTERM) }

// Kill kills the process (SIGKILL, which a stopped process gets too) and
// waits until it has exited. Killing an exited process does nothing.
func (p *Process) Kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil && !errors.Is(err, ErrExited) {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("proc: process %d did not exit within 10 s of SIGKILL", p.Pid())
	}
}

// stat returns the fields of /proc/PID/stat after "pid (comm)", whose
// comm may hold spaces and parentheses: the state (field 3) comes first.
func stat(pid int) ([][]byte, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("proc: cannot parse /proc/%d/stat", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return nil, fmt.Errorf("proc: cannot parse /proc/%d/stat", pid)
	}
	return f, nil
}

// State is the process's state letter in /proc/PID/stat: 'R' running,
// 'S' sleeping, 'T' stopped by a signal, 'Z' exited but not reaped, ...
func State(pid int) (byte, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	return f[0][0], nil
}

// StartTime is when process pid started, in clock ticks since boot
// (field 22 of /proc/PID/stat). A pid and its start time name one process
// for good, where a pid alone may be reused by another.
func StartTime(pid int) (uint64, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(string(f[19]), 10, 64)
}

// GroupState is what Group saw of a process group.
type GroupState struct {
	// Ticks sums the CPU time (clock ticks: user and system, their own
	// and their reaped children's) of its live processes.
	Ticks uint64
	// Running says whether one of them is running or waits to run (a
	// thread of it not asleep, not stopped).
	Running bool
	// Pids are its live processes, in /proc's order.
	Pids []int
}

// Group tells what process group pgid is doing: whether it is busy (a
// program starting, a shell running its commands) or idle, waiting for
// input; Equal states seen a while apart say it has been idle since.
func Group(pgid int) GroupState {
	var g GroupState
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return g
	}
	group := strconv.Itoa(pgid)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// "state ppid pgrp ... utime(14) stime(15) cutime(16) cstime(17)".
		f, err := stat(pid)
		if err != nil || string(f[2]) != group || f[0][0] == 'Z' || f[0][0] == 'X' {
			continue
		}
		g.add(pid, f)
	}
	return g
}

// add counts in process pid, whose /proc/PID/stat fields are f.
func (g *GroupState) add(pid int, f [][]byte) {
	g.Pids = append(g.Pids, pid)
	for _, i := range []int{11, 12, 13, 14} {
		v, _ := strconv.ParseUint(string(f[i]), 10, 64)
		g.Ticks += v
	}
	if busy(f[0][0]) || threadBusy(pid) {
		g.Running = true
	}
}

// busy says whether a state letter is a task's that runs or waits to run
// (R), or waits on the disk (D): not asleep, not stopped.
func busy(state byte) bool {
	return state != 'S' && state != 'T' && state != 't' && state != 'I'
}

// threadBusy says whether a thread of process pid is busy. A process's own
// state is its first thread's, which in a JVM only waits for the thread
// that runs main: the JVM starting on a loaded machine, its threads
// runnable but not run (no CPU time spent for seconds), looked idle.
func threadBusy(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		b, err := os.ReadFile(dir + e.Name() + "/stat")
		if err != nil {
			continue // exited since the listing
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && busy(b[i+2]) {
			return true
		}
	}
	return false
}

// Descendants is Group for the members of group pgid that descend from
// its leader (pgid itself), found through /proc/PID/task/TID/children:
// it reads their entries only, where Group reads every process's, and its
// Pids are in ascending order. It misses a member whose parent exited
// (adopted by init or a subreaper), which Group sees. False where the
// kernel has no children files.
func Descendants(pgid int) (GroupState, bool) {
	var g GroupState
	group := strconv.Itoa(pgid)
	for queue := []int{pgid}; len(queue) > 0; queue = queue[1:] {
		pid := queue[0]
		f, err := stat(pid)
		if err != nil || f[0][0] == 'Z' || f[0][0] == 'X' {
			continue // gone: its children were adopted elsewhere
		}
		if string(f[2]) == group {
			g.add(pid, f)
		}
		kids, ok := childFiles(pid)
		if !ok && pid == pgid {
			return GroupState{}, false
		}
		queue = append(queue, kids...)
	}
	slices.Sort(g.Pids)
	return g, true
}

// Idle says whether g shows an idle group that is still g was: no process
// running, the same processes, no CPU time spent since.
func (g GroupState) Idle(was GroupState) bool {
	return !g.Running && !was.Running && g.Ticks == was.Ticks && slices.Equal(g.Pids, was.Pids) && len(g.Pids) > 0
}

// Alive reports whether a process with that ID exists and has not exited
// (a zombie has).
func Alive(pid int) bool {
	s, err := State(pid)
	return err == nil && s != 'Z' && s != 'X'
}

// Children lists the live processes whose parent is pid: from pid's
// children files (/proc/PID/task/TID/children), a few reads where the
// kernel has them, else from a scan of every process's entry (tests poll
// this while runs go on).
func Children(pid int) []int {
	var out []int
	kids, ok := childFiles(pid)
	if !ok {
		kids = nil
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return nil
		}
		for _, e := range ents {
			if p, err := strconv.Atoi(e.Name()); err == nil {
				kids = append(kids, p)
			}
		}
	}
	parent := strconv.Itoa(pid)
	for _, p := range kids {
		// "state ppid ...": a zombie has exited, and a pid read from a
		// children file may have been reused since.
		f, err := stat(p)
		if err == nil && string(f[1]) == parent && string(f[0]) != "Z" {
			out = append(out, p)
		}
	}
	return out
}

// childFiles lists the pids in pid's children files, one for each of its
// threads (none when pid is gone); false where the kernel has no such
// files.
func childFiles(pid int) ([]int, bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, true // exited since
	}
	var kids []int
	for _, task := range tasks {
		b, err := os.ReadFile(dir + task.Name() + "/children")
		if errors.Is(err, fs.ErrNotExist) && task.Name() == strconv.Itoa(pid) {
			return nil, false // no children files in this kernel
		}
		for _, c := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(c); err == nil {
				kids = append(kids, n)
			}
		}
	}
	return kids, true
}

// Using reports whether some process has a file open under dir, or works
// in it (its current directory). It reads every process's /proc entry it
// may: a process of another user is not seen unless this one is root.
func Using(dir string) bool {
	dir = filepath.Clean(dir)
	under := func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		base := "/proc/" + e.Name()
		if cwd, err := os.Readlink(base + "/cwd"); err == nil && under(cwd) {
			return true
		}
		fds, err := os.ReadDir(base + "/fd")
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(base + "/fd/" + fd.Name()); err == nil && under(l) {
				return true
			}
		}
	}
	return false
}
