// Package scratch makes the directories a run needs but does not keep (the
// etcd members' data, the Redis servers' working directories, a test
// browser's profile), each named after the process that owns it, and finds
// and removes those whose owner no longer exists: what a killed run left.
package scratch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/locktest/locktest/internal/proc"
	"github.com/locktest/locktest/internal/words"
)

// self is this process's pid and start time, which name it in Dir's names.
var self = sync.OnceValues(func() (string, error) {
	pid := os.Getpid()
	start, err := proc.StartTime(pid)
	if err != nil {
		return "", fmt.Errorf("scratch: %w", err)
	}
	return fmt.Sprintf("%d-%d", pid, start), nil
})

// Dir creates a fresh directory in parent (os.TempDir when empty; created
// if missing) named locktest-KIND-PID-START-N: owned by this process, known
// by its pid and its start time (a pid alone may be reused once the owner
// is gone). The caller removes it when done; if this process dies first,
// Sweep does.
func Dir(parent, kind string) (string, error) {
	owner, err := self()
	if err != nil {
		return "", err
	}
	if parent != "" {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return "", err
		}
	}
	return os.MkdirTemp(parent, "locktest-"+kind+"-"+owner+"-")
}

var (
	owned = regexp.MustCompile(`^locktest-[a-z]+-(\d+)-(\d+)-\d+$`)
	// legacy are the names earlier versions gave, with no owner in them.
	legacy = regexp.MustCompile(`^locktest-(etcd|redis|chromium)-\d+$`)
)

// legacyQuiet is how long a directory of an earlier version must have been
// left unchanged, beside no process using it, before Sweep takes it for a
// dead run's: a live member always holds its files open, and a directory
// between two of its members' lives is not left alone for long.
const legacyQuiet = 10 * time.Minute

// Removed is what Sweep removed.
type Removed struct {
	Paths []string
	// Bytes is the disk space they used (as du counts it).
	Bytes int64
}

// String says in one line what was removed, or "" for nothing.
func (r Removed) String() string {
	if len(r.Paths) == 0 {
		return ""
	}
	paths := r.Paths
	more := ""
	if len(paths) > 3 {
		paths, more = paths[:3], fmt.Sprintf(" and %d more", len(r.Paths)-3)
	}
	return fmt.Sprintf("removed %s that killed runs left behind (%s): %s%s",
		words.Count(len(r.Paths), "directory", "directories"), Size(r.Bytes), strings.Join(paths, ", "), more)
}

// Sweep removes from each of dirs the scratch directories whose owner no
// longer exists, and those of earlier versions (no owner in their name)
// that no process uses and that were left unchanged for legacyQuiet. A dir
// that does not exist is skipped; errors are joined, and the rest is swept
// all the same.
func Sweep(dirs ...string) (Removed, error) {
	var (
		r    Removed
		errs []error
	)
	for _, dir := range dirs {
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range ents {
			path := filepath.Join(dir, e.Name())
			if !e.IsDir() || !dead(path, e.Name()) {
				continue
			}
			n := DiskUsage(path)
			if err := os.RemoveAll(path); err != nil {
				errs = append(errs, fmt.Errorf("scratch: %w", err))
				continue
			}
			r.Paths = append(r.Paths, path)
			r.Bytes += n
		}
	}
	return r, errors.Join(errs...)
}

// dead says whether the scratch directory at path, named name, belongs to
// no live process.
func dead(path, name string) bool {
	if m := owned.FindStringSubmatch(name); m != nil {
		pid, err1 := strconv.Atoi(m[1])
		start, err2 := strconv.ParseUint(m[2], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		now, err := proc.StartTime(pid)
		return err != nil || now != start || !proc.Alive(pid)
	}
	if legacy.MatchString(name) {
		return !changedSince(path, time.Now().Add(-legacyQuiet)) && !proc.Using(path)
	}
	return false
}

// changedSince says whether anything under path was modified after t (or
// cannot be read).
func changedSince(path string, t time.Time) bool {
	changed := false
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			changed = true
			return filepath.SkipAll
		}
		if info, err := d.Info(); err != nil || info.ModTime().After(t) {
			changed = true
			return filepath.SkipAll
		}
		return nil
	})
	return changed
}

// DiskUsage is the disk space the files under path take, as du counts it
// (allocated blocks: a sparse file counts what it holds, a preallocated one
// all it reserved).
func DiskUsage(path string) int64 {
	var n int64
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// Size writes a number of bytes as du -h does, in binary units.
func Size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
