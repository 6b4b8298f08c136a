package execlock

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A compiled Java program runs with a class-data-sharing archive of its
// classes, made at its first use; an archive cut short is found unfit and
// made again, and one gone stale (its jar changed) is passed over by the
// JVM, said on stderr: neither breaks the client or its stdout.
func TestJavaArchive(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("javac"); err != nil {
		t.Skip("javac not on PATH (apt-get install openjdk-17-jdk-headless)")
	}
	src, err := filepath.Abs(filepath.Join("testdata", "Now.java"))
	if err != nil {
		t.Fatal(err)
	}
	// Compiled as TestJavaClockFaked compiles it, in locktest's cache.
	cmd, err := compileJava([]string{"java", src})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(cmd, " "), " -XX:SharedArchiveFile=") {
		t.Errorf("no archive in %q", cmd)
	}
	// The archives below are of a copy of its jar, in a directory of the
	// test's own: the cache's are another test's too.
	dir := t.TempDir()
	jar := filepath.Join(dir, "Now.jar")
	b, err := os.ReadFile(strings.Split(cmd[len(cmd)-2], ":")[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jar, b, 0o644); err != nil {
		t.Fatal(err)
	}
	archive := func() (cmd []string, path string) {
		t.Helper()
		javacMu.Lock()
		flags := javaArchive("java", nil, []string{jar}, "Now", nil, dir)
		javacMu.Unlock()
		if len(flags) == 0 {
			t.Fatalf("no archive made")
		}
		return append(append([]string{"java"}, flags...), "-cp", jar, "Now"), strings.TrimPrefix(flags[0], "-XX:SharedArchiveFile=")
	}
	cmd, path := archive()
	if mapped, stderr := ask(t, cmd, path); !mapped {
		t.Errorf("the client did not map %s; its stderr:\n%s", path, stderr)
	}

	// Cut short, as by a full disk: a JVM told to map it would crash.
	if b, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	javacMu.Lock()
	delete(archives, path) // as a new process finds it
	javacMu.Unlock()
	if cmd, again := archive(); again != path {
		t.Errorf("made again at %s, not %s", again, path)
	} else if mapped, stderr := ask(t, cmd, path); !mapped {
		t.Errorf("the client did not map %s made again; its stderr:\n%s", path, stderr)
	}
	log, _ := os.ReadFile(strings.TrimSuffix(path, ".jsa") + ".log")
	if !strings.Contains(string(log), "the archive is unfit, made again") {
		t.Errorf("the archive's log does not say it was unfit:\n%s", log)
	}

	// Stale: its jar changed since (a new archive for a new process).
	if err := os.Chtimes(jar, time.Now(), time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if mapped, stderr := ask(t, cmd, path); mapped || !strings.Contains(stderr, "Unable to use shared archive") {
		t.Errorf("a stale archive: want it passed over and said on stderr, got mapped %v, stderr:\n%s", mapped, stderr)
	}
}

// ask runs a client of cmd (Now.java's), has it answer one request, and
// says whether it mapped archive meanwhile, and what it wrote on stderr;
// its stdout must be the reply alone.
func ask(t *testing.T, cmd []string, archive string) (mapped bool, stderr string) {
	t.Helper()
	c := exec.Command(cmd[0], cmd[1:]...)
	var errOut strings.Builder
	c.Stderr = &errOut
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Process.Kill()
	lines := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if _, err := in.Write([]byte(`{"id":1,"op":"acquire","lock":"lock"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-lines:
		if !strings.HasPrefix(l, `{"id":1,"ok":true`) {
			t.Errorf("a line that is not the reply on stdout: %q", l)
		}
	case <-time.After(60 * time.Second):
		c.Process.Kill()
		c.Wait()
		t.Fatalf("no reply within 60 s; stderr:\n%s", errOut.String())
	}
	maps, _ := os.ReadFile("/proc/" + strconv.Itoa(c.Process.Pid) + "/maps")
	in.Close()
	for l := range lines {
		t.Errorf("more on stdout: %q", l)
	}
	if err := c.Wait(); err != nil {
		t.Errorf("the client: %v", err)
	}
	return strings.Contains(string(maps), archive), errOut.String()
}
