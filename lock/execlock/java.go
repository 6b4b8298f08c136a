package execlock

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// A command "java [options] Main.java args…" is Java's own way to run a
// program from its source (JEP 330): the JVM compiles it in memory at every
// start, a second or more of each client's start. locktest instead
// compiles it once with javac, into a cache directory named by the hash of
// the source (its name and text), the classpath and the javac, and runs the
// compiled class: the command means what it means to java, and starts as
// fast as a compiled program. Nothing compiled is kept in the repository.

// classpathFlags are java's options that take the classpath as their next
// word.
var classpathFlags = map[string]bool{"-cp": true, "-classpath": true, "--class-path": true}

// javaSource finds the source file of a java command in source-file mode:
// its index in command and the classpath given (""); ok false when the
// command is not one.
func javaSource(command []string) (src int, classpath string, ok bool) {
	if len(command) < 2 || filepath.Base(command[0]) != "java" {
		return 0, "", false
	}
	for i := 1; i < len(command); i++ {
		w := command[i]
		switch {
		case classpathFlags[w] && i+1 < len(command):
			i++
			classpath = command[i]
		case strings.HasPrefix(w, "-"):
			// another option of the JVM's, taking no separate word
		default:
			return i, classpath, strings.HasSuffix(w, ".java")
		}
	}
	return 0, "", false
}

// compileJava returns the command that runs a java source-file command's
// program compiled (command itself when it is not one): the source is
// compiled with javac on first use, every missing classpath entry said.
func compileJava(command []string) ([]string, error) {
	src, cp, ok := javaSource(command)
	if !ok {
		return command, nil
	}
	for _, e := range filepath.SplitList(cp) {
		if _, err := os.Stat(e); err != nil && !strings.HasSuffix(e, "*") {
			return nil, fmt.Errorf("the classpath entry %s is missing (%v)", e, err)
		}
	}
	javac, err := exec.LookPath(filepath.Join(filepath.Dir(command[0]), "javac"))
	if err != nil {
		if javac, err = exec.LookPath("javac"); err != nil {
			return nil, fmt.Errorf("%s is a Java source, and javac is not found to compile it (Debian: apt-get install default-jdk-headless)", command[src])
		}
	}
	code, err := os.ReadFile(command[src])
	if err != nil {
		return nil, err
	}
	// Named by the file's name, not its path: what javac makes of it does
	// not depend on where it is, and another checkout's copy (a fresh
	// clone's tests) finds it compiled.
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", javac, cp, filepath.Base(command[src]))
	h.Write(code)
	dir := filepath.Join(javaCache(), hex.EncodeToString(h.Sum(nil))[:16])
	// One javac at a time in this process: clients and tests that start
	// together would otherwise each compile the same source (TestAdapters'
	// six Java adapters on an empty cache: four javacs, 15.9 s of CPU).
	javacMu.Lock()
	defer javacMu.Unlock()
	if _, err := os.Stat(dir); err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, err
		}
		tmp, err := os.MkdirTemp(filepath.Dir(dir), "build-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		// -proc:none -implicit:none: no annotation processor of a jar on
		// the classpath runs, and only this source is compiled.
		args := []string{"-proc:none", "-implicit:none", "-d", tmp}
		if cp != "" {
			args = append(args, "-cp", cp)
		}
		if out, err := exec.Command(javac, append(args, command[src])...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("javac %s: %v: %s", command[src], err, firstLines(out, 3))
		}
		// Another locktest may have compiled it meanwhile: either copy is whole.
		if err := os.Rename(tmp, dir); err != nil && !exists(dir) {
			return nil, err
		}
	}
	run := []string{command[0]}
	for i := 1; i < src; i++ {
		if classpathFlags[command[i]] {
			i++ // replaced below
			continue
		}
		run = append(run, command[i])
	}
	full := dir
	if cp != "" {
		full += string(filepath.ListSeparator) + cp
	}
	run = append(run, "-cp", full, strings.TrimSuffix(filepath.Base(command[src]), ".java"))
	return append(run, command[src+1:]...), nil
}

var javacMu sync.Mutex

// javaCache is where compiled sources are kept.
func javaCache() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "locktest", "java")
	}
	return filepath.Join(os.TempDir(), "locktest-java")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// firstLines is up to n lines of out, in one line.
func firstLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}
