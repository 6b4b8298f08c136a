package scratch

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/internal/polltest"
	"github.com/locktest/locktest/internal/proc"
)

// TestSweepKilledOwner has a child process make a scratch directory and
// write into it, kills the child with SIGKILL, and sweeps: the directory of
// the dead child goes, this live process's own stays.
func TestSweepKilledOwner(t *testing.T) {
	if parent := os.Getenv("SCRATCH_TEST_PARENT"); parent != "" {
		dir, err := Dir(parent, "etcd")
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(filepath.Join(dir, "wal"), make([]byte, 1<<20), 0o644); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(dir)
		time.Sleep(time.Hour) // until killed
	}
	parent := t.TempDir()
	mine, err := Dir(parent, "etcd")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSweepKilledOwner$")
	cmd.Env = append(os.Environ(), "SCRATCH_TEST_PARENT="+parent)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("reading the child's directory: %v", err)
	}
	theirs := strings.TrimSpace(line)
	if !strings.HasPrefix(filepath.Base(theirs), fmt.Sprintf("locktest-etcd-%d-", cmd.Process.Pid)) {
		t.Fatalf("the child's directory %q does not name it", theirs)
	}
	// While the child lives, its directory is not swept.
	if r, err := Sweep(parent); err != nil || len(r.Paths) != 0 {
		t.Fatalf("swept %v (%v) while the owners live", r.Paths, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	polltest.Until(t, 5*time.Second, "the child is gone", func() bool { return !proc.Alive(cmd.Process.Pid) })

	r, err := Sweep(parent)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Paths, []string{theirs}) {
		t.Fatalf("swept %v, want only the killed child's %s", r.Paths, theirs)
	}
	if r.Bytes < 1<<20 {
		t.Errorf("swept %d bytes, want at least the 1 MiB it wrote", r.Bytes)
	}
	if _, err := os.Stat(theirs); !os.IsNotExist(err) {
		t.Errorf("the killed child's directory is still there: %v", err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("this process's own directory went: %v", err)
	}
	if s := r.String(); !strings.Contains(s, "removed 1 directory") || !strings.Contains(s, theirs) || strings.Contains(s, "\n") {
		t.Errorf("the line says %q", s)
	}
}

// TestSweepReusedPid: a directory named after this process's pid with
// another start time is a dead process's whose pid was reused.
func TestSweepReusedPid(t *testing.T) {
	parent := t.TempDir()
	stale := filepath.Join(parent, fmt.Sprintf("locktest-redis-%d-1-42", os.Getpid()))
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := Sweep(parent)
	if err != nil || !slices.Equal(r.Paths, []string{stale}) {
		t.Fatalf("swept %v (%v), want %s", r.Paths, err, stale)
	}
}

// TestSweepLegacy: directories of earlier versions, with no owner in their
// name, go only when no process uses them and they were left unchanged.
func TestSweepLegacy(t *testing.T) {
	parent := t.TempDir()
	old := time.Now().Add(-2 * legacyQuiet)
	mk := func(name string, age time.Time) string {
		p := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(p, "m0"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "m0", "db"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{filepath.Join(p, "m0", "db"), filepath.Join(p, "m0"), p} {
			if err := os.Chtimes(q, age, age); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	left := mk("locktest-etcd-1799659234", old)
	recent := mk("locktest-etcd-1799659235", time.Now())
	inUse := mk("locktest-redis-1799659236", old)
	other := mk("locktest-notes-1", old) // not a name locktest gives
	f, err := os.Open(filepath.Join(inUse, "m0", "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	r, err := Sweep(parent)
	if err != nil || !slices.Equal(r.Paths, []string{left}) {
		t.Fatalf("swept %v (%v), want only %s", r.Paths, err, left)
	}
	for _, p := range []string{recent, inUse, other} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s went: %v", p, err)
		}
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{12: "12 B", 3 << 10: "3 KiB", 384000000: "366.2 MiB", 3 << 30: "3.0 GiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

// Dir creates its parent when missing: a run directory that does not exist
// yet holds its servers' data.
func TestDirCreatesParent(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "run", "data")
	dir, err := Dir(parent, "zk")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(dir) != parent || !owned.MatchString(filepath.Base(dir)) {
		t.Fatalf("Dir = %s, want a locktest-zk-... directory in %s", dir, parent)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("%s: %v", dir, err)
	}
}
