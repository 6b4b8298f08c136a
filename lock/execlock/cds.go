package execlock

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/internal/proc"
)

// A Java client's JVM spends most of its start loading and verifying its
// classes (Curator's, ZooKeeper's, Guava's: some 900); class-data sharing
// maps them, parsed and verified, from an archive instead. JDK 17 makes
// an archive of an application's classes only as a JVM exits
// (-XX:ArchiveClassesAtExit), so the first use of a compiled program (by
// its JVM options and arguments) runs it once to make one: started with
// its servers unreachable, asked an unknown op, left to settle, then
// stopped with SIGTERM. It loads its library's classes as it starts and
// tries to connect; those of a session's traffic stay out, and load from
// their jars as before. The archive is kept beside the compiled jar,
// checked by a JVM that must map it (-Xshare:on) before it is first used
// by this process; one unfit is not used, and why is written to its log
// there (cds-KEY.log), not to the client's stdout, the protocol's.

// archives remembers, by archive path, the flags javaArchive gave: the
// archive's, or none when it is unfit (not tried again by this process).
var archives = map[string][]string{}

// javaArchive returns the JVM flags that map the class-data-sharing
// archive of the program (its JVM options, classpath, main class and
// arguments), made in dir first if there is none or it is unfit; none
// when it cannot be. The caller holds javacMu.
func javaArchive(java string, opts, cp []string, main string, args []string, dir string) []string {
	key, err := archiveKey(java, opts, cp, main, args)
	if err != nil {
		return nil
	}
	path := filepath.Join(dir, "cds-"+key+".jsa")
	if f, ok := archives[path]; ok {
		return f
	}
	// The JVM says why it cannot use an archive on stdout by default: on
	// its stderr, the client's log, instead.
	flags := []string{"-XX:SharedArchiveFile=" + path, "-Xlog:cds*=off", "-Xlog:cds*=warning:stderr"}
	log := strings.TrimSuffix(path, ".jsa") + ".log"
	cmd := append(append([]string{java}, opts...), "-cp", strings.Join(cp, string(filepath.ListSeparator)))
	why := checkArchive(cmd, path)
	if why != nil {
		if !errors.Is(why, os.ErrNotExist) {
			note(log, "the archive is unfit, made again: %v", why)
		}
		why = makeArchive(cmd, main, args, path, log)
	}
	if why != nil {
		note(log, "no archive: %v", why)
		flags = nil
	}
	archives[path] = flags
	return flags
}

// archiveKey names an archive by what makes a JVM reject it (the java
// binary and the jars, by path, size and time) and by what the program
// loads (its options, main class and arguments).
func archiveKey(java string, opts, cp []string, main string, args []string) (string, error) {
	bin, err := exec.LookPath(java)
	if err != nil {
		return "", err
	}
	if bin, err = filepath.EvalSymlinks(bin); err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range append([]string{bin}, cp...) {
		st, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d %d\x00", f, st.Size(), st.ModTime().UnixNano())
	}
	fmt.Fprintf(h, "%q %q %q", opts, main, args)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// checkArchive runs a JVM of cmd (java, options and classpath) that must
// map the archive at path, or fail; once one has, a stamp of the archive's
// size and time beside it spares the next process that JVM (a third of a
// second of CPU): an archive cut short, or replaced, no longer matches it.
func checkArchive(cmd []string, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	stamp := fmt.Sprintf("%d %d", st.Size(), st.ModTime().UnixNano())
	if b, err := os.ReadFile(path + ".checked"); err == nil && string(b) == stamp {
		return nil
	}
	// An archive cut short crashes the JVM: its crash report goes beside
	// the archive, not into the working directory.
	c := exec.Command(cmd[0], append(append([]string{}, cmd[1:]...), "-Xshare:on", "-XX:SharedArchiveFile="+path,
		"-XX:ErrorFile="+path+".crash.log", "-version")...)
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("a JVM could not map it (%v): %s", err, firstLines(out, 3))
	}
	// A file of this process's own, renamed: either stamp is whole.
	tmp := fmt.Sprintf("%s.checked.%d.tmp", path, os.Getpid())
	if err := os.WriteFile(tmp, []byte(stamp), 0o644); err == nil {
		os.Rename(tmp, path+".checked")
	}
	return nil
}

// makeArchive runs the program (cmd, main and args) once to write its
// archive at path as it exits, and renames it there once a JVM maps it.
// What the program and its JVM print goes to log.
func makeArchive(cmd []string, main string, args []string, path, log string) error {
	// A file of this process's own: another locktest may make one too, and
	// either is whole when renamed.
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	defer os.Remove(tmp)
	defer os.Remove(tmp + ".checked")
	defer os.Remove(tmp + ".crash.log")
	out, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	fmt.Fprintf(out, "--- locktest %s: making the archive\n", time.Now().UTC().Format(time.RFC3339))
	inR, in, err := os.Pipe()
	if err != nil {
		return err
	}
	defer in.Close()
	// Its servers unreachable (nothing listens on port 1): it starts and
	// tries them, and keeps nothing anywhere. Its stdin stays open until
	// it exited: a client exits once done.
	p, err := proc.Start(proc.Spec{Path: cmd[0], Args: append(append(append([]string{}, cmd[1:]...), "-XX:ArchiveClassesAtExit="+tmp, main), args...),
		Env: []string{"LOCKTEST_PROTOCOL=" + strconv.Itoa(Version), "LOCKTEST_ENDPOINTS=127.0.0.1:1", "LOCKTEST_ETCD_URLS=http://127.0.0.1:1",
			"LOCKTEST_PREFIX=/locktest/cds/", "LOCKTEST_CLIENT=cds", "LOCKTEST_TTL=5", "LOCKTEST_SEED=1"},
		Unset: []string{"LOCKTEST_", "FAKETIME", "LD_PRELOAD"}, Stdin: inR, Stdout: out, Stderr: out})
	inR.Close()
	if err != nil {
		return err
	}
	// An unknown op: the code that reads a request and replies runs too.
	fmt.Fprintln(in, `{"id":1,"op":"locktest-cds","lock":"cds"}`)
	if settle(p, 500*time.Millisecond, 30*time.Second) {
		p.Terminate()
		select {
		case <-p.Done():
		case <-time.After(60 * time.Second):
			p.Kill()
			<-p.Done()
			return errors.New("the JVM making it did not exit within 60 s of SIGTERM")
		}
	}
	if _, err := os.Stat(tmp); err != nil {
		return fmt.Errorf("the JVM making it wrote none (%v)", p.Err())
	}
	if err := checkArchive(cmd, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	os.Rename(tmp+".checked", path+".checked") // its stamp: the rename kept its size and time
	return nil
}

// settle waits until p's process group has been idle for quiet (true),
// or busy for limit (true), or p exited (false).
func settle(p *proc.Process, quiet, limit time.Duration) bool {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(limit)
	var was proc.GroupState
	since := time.Now()
	for {
		select {
		case <-p.Done():
			return false
		case <-deadline:
			return true
		case <-tick.C:
		}
		g, ok := proc.Descendants(p.Pid())
		if !ok {
			g = proc.Group(p.Pid())
		}
		if !g.Idle(was) {
			was, since = g, time.Now()
		}
		if time.Since(since) >= quiet {
			return true
		}
	}
}

// note appends a line to log.
func note(log, format string, args ...any) {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "--- locktest %s: %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, args...))
}
