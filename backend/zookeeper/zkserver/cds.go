package zkserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// A server's JVM spends much of its start loading and verifying
// ZooKeeper's classes; class-data sharing maps them, parsed and verified,
// from an archive instead: a server of a 3-member ensemble took 0.89 s of
// CPU to quorum without, 0.75 s with (JDK 17, a loaded 2-core machine).
// JDK 17 makes the archive of an application's classes only as a JVM exits
// (-XX:ArchiveClassesAtExit), and servers are killed (SIGKILL), so the
// first ensemble of a machine (of a JDK and jars) first runs a standalone
// server that makes it: started, serving, then stopped with SIGTERM (3 s
// to write it, measured). The archive is kept in the user's cache
// directory, beside compiled Java adapters (lock/execlock/java.go); a JVM
// that finds it unfit says so in its log and runs without it.

// archives remembers, by archive path, the flags Start gives the servers:
// the archive's, or none when making it failed (not tried again by this
// process).
var archives struct {
	sync.Mutex
	flags map[string][]string
}

// archiveFlags are the JVM flags that map in's archive of ZooKeeper's
// classes, made first if there is none (in dir); none when there is no
// cache directory or making it failed.
func (in Install) archiveFlags(ctx context.Context, dir string) []string {
	path, err := in.archivePath()
	if err != nil {
		return nil
	}
	archives.Lock()
	defer archives.Unlock()
	if f, ok := archives.flags[path]; ok {
		return f
	}
	flags := []string{"-XX:SharedArchiveFile=" + path}
	if _, err := os.Stat(path); err != nil {
		if err := in.makeArchive(ctx, dir, path); err != nil {
			flags = nil
		}
	}
	if archives.flags == nil {
		archives.flags = map[string][]string{}
	}
	archives.flags[path] = flags
	return flags
}

// archivePath is where in's archive is kept: named by what makes a JVM
// reject it (the java binary and the jars, by path, size and time) and the
// server's flags.
func (in Install) archivePath() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	java, err := filepath.EvalSymlinks(in.Java)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range append([]string{java}, in.Classpath...) {
		st, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d %d\x00", f, st.Size(), st.ModTime().UnixNano())
	}
	fmt.Fprintf(h, "%s\x00", strings.Join(jvmFlags, " "))
	return filepath.Join(cache, "locktest", "zookeeper-cds", hex.EncodeToString(h.Sum(nil))[:16]+".jsa"), nil
}

// makeArchive runs a standalone server under dir that writes the archive
// at path as it exits.
func (in Install) makeArchive(ctx context.Context, dir, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// A file of this process's own: another locktest may make one too, and
	// either is whole when renamed.
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	defer os.Remove(tmp)
	e, err := Start(ctx, Config{Servers: 1, Dir: dir, Install: in, archiveAtExit: tmp})
	if err != nil {
		return err
	}
	defer e.Close()
	p := e.servers[0].proc.Process()
	if err := p.Terminate(); err != nil {
		return err
	}
	select {
	case <-p.Done():
	case <-time.After(60 * time.Second):
		return fmt.Errorf("zkserver: the archive's server did not exit within 60 s of SIGTERM")
	}
	return os.Rename(tmp, path)
}
