package proc

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/internal/polltest"
)

func sleeper(t *testing.T) *Process {
	t.Helper()
	p, err := Start(Spec{Path: "sleep", Args: []string{"60"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	return p
}

func TestStopContKill(t *testing.T) {
	p := sleeper(t)
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 10*time.Second, "state T", func() bool { s, _ := State(p.Pid()); return s == 'T' })
	if err := p.Cont(); err != nil {
		t.Fatal(err)
	}
	polltest.Until(t, 10*time.Second, "state S", func() bool { s, _ := State(p.Pid()); return s == 'S' })
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	// A stopped process dies of SIGKILL too.
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() || Alive(p.Pid()) {
		t.Fatal("the process is still there after Kill")
	}
	if err := p.Stop(); err != ErrExited {
		t.Fatalf("Stop of an exited process: %v, want ErrExited", err)
	}
}

func TestLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "out.log")
	p, err := Start(Spec{Path: "sh", Args: []string{"-c", "echo out; echo err >&2"}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); !strings.Contains(got, "out\n") || !strings.Contains(got, "err\n") {
		t.Fatalf("log holds %q, want both streams", got)
	}
}

func TestStartMissing(t *testing.T) {
	if _, err := Start(Spec{Path: filepath.Join(t.TempDir(), "nothing")}); err == nil {
		t.Fatal("Start of a missing program succeeded")
	}
}

// TestStartRelativePath starts a program by a path relative to the test's
// directory in another Dir: the path is the caller's, not Dir's.
func TestStartRelativePath(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.WriteFile("prog", []byte("#!/bin/sh\necho ran in \"$(pwd)\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "out.log")
	p, err := Start(Spec{Path: "./prog", Dir: dir, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(log)
	if got, want := strings.TrimSpace(string(b)), "ran in "+dir; got != want {
		t.Fatalf("program said %q, want %q", got, want)
	}
}

// TestChildDiesWithParent kills a parent (this test binary run again) with
// SIGKILL and checks that the child it started is gone.
func TestChildDiesWithParent(t *testing.T) {
	if os.Getenv("PROC_TEST_PARENT") == "1" {
		p, err := Start(Spec{Path: "sleep", Args: []string{"60"}})
		if err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString(strconv.Itoa(p.Pid()) + "\n")
		select {}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithParent$")
	cmd.Env = append(os.Environ(), "PROC_TEST_PARENT=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var buf [32]byte
	n, err := out.Read(buf[:])
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("parent printed %q", buf[:n])
	}
	if !Alive(child) {
		t.Fatal("the child is not running")
	}
	cmd.Process.Kill()
	cmd.Wait()
	polltest.Until(t, 10*time.Second, "the child to die with its parent", func() bool { return !Alive(child) })
}

// connection is a loopback TCP connection's two ends, closed when t ends.
func connection(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return c, s
}

func TestSocketOwner(t *testing.T) {
	_, s := connection(t)
	other := sleeper(t)
	pid, err := SocketOwner(s.RemoteAddr().String(), s.LocalAddr().String(), []int{other.Pid(), os.Getpid()})
	if err != nil || pid != os.Getpid() {
		t.Fatalf("SocketOwner = %d, %v; want this process, %d", pid, err, os.Getpid())
	}
	if _, err := SocketOwner(s.RemoteAddr().String(), s.LocalAddr().String(), []int{other.Pid()}); err == nil {
		t.Fatal("SocketOwner found the socket in a process that does not have it")
	}
}

// The kernel's answer to a lookup by addresses (sock_diag) is the inode
// /proc/net/tcp lists, for either end of a connection; a socket that does
// not exist is none.
func TestSocketInode(t *testing.T) {
	c, s := connection(t)
	var inodes []string
	for _, conn := range []net.Conn{c, s} {
		local, remote := conn.LocalAddr().String(), conn.RemoteAddr().String()
		want, err := tcpFileInode(local, remote)
		if err != nil {
			t.Fatal(err)
		}
		got, err := diagInode(local, remote)
		if errors.Is(err, errNoDiag) {
			t.Skipf("skipped: the kernel does not answer sock_diag: %v", err)
		}
		if err != nil || got != want {
			t.Errorf("%s -> %s: sock_diag says inode %q (%v), /proc/net/tcp %q", local, remote, got, err, want)
		}
		inodes = append(inodes, got)
	}
	if inodes[0] == inodes[1] {
		t.Errorf("both ends have inode %s", inodes[0])
	}
	// The listener's port, dialled from a port nothing uses.
	if inode, err := diagInode("127.0.0.1:1", s.LocalAddr().String()); err == nil || errors.Is(err, errNoDiag) {
		t.Errorf("a socket that does not exist: inode %q, %v", inode, err)
	}
}

// A busy process's CPU time grows, read from /proc, and a killed child's
// moves to the reaped children: ServerCPU does not lose it.
func TestCPU(t *testing.T) {
	busy, err := Start(Spec{Path: "/bin/sh", Args: []string{"-c", "while :; do :; done"}})
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Kill()
	before := ServerCPU([]int{busy.Pid()})
	polltest.Until(t, 10*time.Second, "the busy child to use 200 ms of CPU", func() bool {
		d, err := CPU(busy.Pid())
		return err == nil && d >= 200*time.Millisecond
	})
	used, _ := CPU(busy.Pid())
	if err := busy.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := CPU(busy.Pid()); err == nil {
		t.Error("CPU of a reaped process: no error")
	}
	if after := ServerCPU([]int{busy.Pid()}); after-before < used {
		t.Errorf("ServerCPU grew by %v after the kill; the child had used %v", after-before, used)
	}
	if _, err := CPU(os.Getpid()); err != nil {
		t.Error(err)
	}
}

func TestChildren(t *testing.T) {
	p := sleeper(t)
	if !slices.Contains(Children(os.Getpid()), p.Pid()) {
		t.Fatalf("Children(%d) = %v, lacks %d", os.Getpid(), Children(os.Getpid()), p.Pid())
	}
	p.Kill()
	if slices.Contains(Children(os.Getpid()), p.Pid()) {
		t.Fatal("Children lists a process that has exited")
	}
}

// Descendants sees the group's processes below its leader, as Group does,
// and not a member whose parent exited (the second sleep: its subshell
// ended), which Group sees.
func TestDescendants(t *testing.T) {
	p, err := Start(Spec{Path: "sh", Args: []string{"-c", "sleep 60 & (sleep 60 &); wait"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() }) // the group: the orphan too
	pid := p.Pid()
	var d, all GroupState
	polltest.Until(t, 10*time.Second, "the group's leader, its sleep and the orphaned sleep", func() bool {
		var ok bool
		if d, ok = Descendants(pid); !ok {
			t.Skip("this kernel has no /proc/PID/task/TID/children")
		}
		all = Group(pid)
		return len(all.Pids) == 3 && len(d.Pids) == 2
	})
	want := append([]int{pid}, Children(pid)...)
	slices.Sort(want)
	if !slices.Equal(d.Pids, want) {
		t.Errorf("Descendants(%d).Pids = %v, want the leader and its child %v", pid, d.Pids, want)
	}
	for _, q := range d.Pids {
		if !slices.Contains(all.Pids, q) {
			t.Errorf("Descendants lists %d, which Group (%v) does not", q, all.Pids)
		}
	}
}

// A process is busy while any of its threads is, though its first thread
// sleeps (a JVM's waits for the thread that runs main): on a loaded
// machine such a thread may wait to run for seconds, spending no CPU
// time, and only its state says it is not idle.
func TestGroupSeesABusyThread(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH: the process with threads is a Python one")
	}
	for _, c := range []struct {
		work string
		busy bool
	}{{"while True: pass", true}, {"time.sleep(60)", false}} {
		script := "import threading, time\n" +
			"threading.Thread(target=lambda: exec(" + strconv.Quote(c.work) + "), daemon=True).start()\n" +
			"print('up', flush=True)\n" +
			"time.sleep(60)\n"
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		p, err := Start(Spec{Path: py, Args: []string{"-c", script}, Stdout: w})
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		if up, err := bufio.NewReader(r).ReadString('\n'); up != "up\n" {
			t.Fatalf("python3: want up, got %q, %v", up, err)
		}
		r.Close()
		// Its first thread asleep in time.sleep, the other busy or not.
		polltest.Until(t, 10*time.Second, "the first thread asleep", func() bool {
			s, err := State(p.Pid())
			return err == nil && s == 'S'
		})
		if g := Group(p.Pid()); g.Running != c.busy {
			t.Errorf("a thread doing %q: Group(%d).Running = %v, want %v", c.work, p.Pid(), g.Running, c.busy)
		}
		if g, ok := Descendants(p.Pid()); ok && g.Running != c.busy {
			t.Errorf("a thread doing %q: Descendants(%d).Running = %v, want %v", c.work, p.Pid(), g.Running, c.busy)
		}
		p.Kill()
	}
}
