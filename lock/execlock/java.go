package execlock

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/url"
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
// compiled with javac on first use into a jar, every missing classpath
// entry said, and the program runs with a class-data-sharing archive of
// its classes when one is fit (javaArchive).
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
	main := strings.TrimSuffix(filepath.Base(command[src]), ".java")
	// Named by the file's name, not its path: what javac makes of it does
	// not depend on where it is, and another checkout's copy (a fresh
	// clone's tests) finds it compiled.
	h := sha256.New()
	fmt.Fprintf(h, "jar\x00%s\x00%s\x00%s\x00", javac, cp, filepath.Base(command[src]))
	h.Write(code)
	dir := filepath.Join(javaCache(), hex.EncodeToString(h.Sum(nil))[:16])
	jar := filepath.Join(dir, main+".jar")
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
		classes := filepath.Join(tmp, "classes")
		// -proc:none -implicit:none: no annotation processor of a jar on
		// the classpath runs, and only this source is compiled.
		args := []string{"-proc:none", "-implicit:none", "-d", classes}
		if cp != "" {
			args = append(args, "-cp", cp)
		}
		if out, err := exec.Command(javac, append(args, command[src])...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("javac %s: %v: %s", command[src], err, firstLines(out, 3))
		}
		// A jar, not the directory: JDK 17 archives no class of a
		// directory on the classpath.
		if err := writeJar(filepath.Join(tmp, main+".jar"), classes); err != nil {
			return nil, err
		}
		if err := os.RemoveAll(classes); err != nil {
			return nil, err
		}
		// Another locktest may have compiled it meanwhile: either copy is whole.
		if err := os.Rename(tmp, dir); err != nil && !exists(dir) {
			return nil, err
		}
	}
	var opts []string // the JVM's options, but the classpath
	for i := 1; i < src; i++ {
		if classpathFlags[command[i]] {
			i++ // replaced below
			continue
		}
		opts = append(opts, command[i])
	}
	// Every jar named in another's manifest (Class-Path) named on the
	// classpath too: JDK 17 archives none of their classes otherwise
	// (Debian's jars name theirs by absolute path, which its check of the
	// archive's classpath takes for relative), and they are most of
	// Curator's and ZooKeeper's.
	full := expandClasspath(append([]string{jar}, filepath.SplitList(cp)...))
	run := append([]string{command[0]}, opts...)
	run = append(run, javaArchive(command[0], opts, full, main, command[src+1:], dir)...)
	run = append(run, "-cp", strings.Join(full, string(filepath.ListSeparator)), main)
	return append(run, command[src+1:]...), nil
}

// writeJar writes the class files under dir into a jar at path.
func writeJar(path, dir string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	z := zip.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		w, err := z.Create(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	if err := z.Close(); err != nil {
		return err
	}
	return f.Close()
}

// expandClasspath is cp with the jars each jar's manifest names
// (Class-Path) after it, as the JVM searches them: depth first, each once.
// What is not a jar on this machine stays as it is.
func expandClasspath(cp []string) []string {
	var out []string
	seen := map[string]bool{}
	var add func(e string)
	add = func(e string) {
		if seen[e] {
			return
		}
		seen[e] = true
		out = append(out, e)
		for _, c := range manifestClasspath(e) {
			add(c)
		}
	}
	for _, e := range cp {
		add(e)
	}
	return out
}

// manifestClasspath is the local jars a jar's manifest names in its
// Class-Path, which are URLs relative to the jar's own; none when jar is
// not a readable jar.
func manifestClasspath(jar string) []string {
	if !strings.HasSuffix(jar, ".jar") {
		return nil
	}
	z, err := zip.OpenReader(jar)
	if err != nil {
		return nil
	}
	defer z.Close()
	f, err := z.Open("META-INF/MANIFEST.MF")
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil
	}
	// A manifest's long lines go on in lines that begin with a space.
	text := strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n ", "")
	var out []string
	for _, line := range strings.Split(text, "\n") {
		v, ok := strings.CutPrefix(line, "Class-Path:")
		if !ok {
			continue
		}
		for _, u := range strings.Fields(v) {
			p, err := url.PathUnescape(strings.TrimPrefix(u, "file:"))
			if err != nil || strings.Contains(p, ":") {
				continue // another scheme's URL: left to the JVM
			}
			if !filepath.IsAbs(p) {
				p = filepath.Join(filepath.Dir(jar), p)
			}
			if _, err := os.Stat(p); err == nil {
				out = append(out, filepath.Clean(p))
			}
		}
	}
	return out
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
