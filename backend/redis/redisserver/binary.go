package redisserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"github.com/locktest/locktest/backend/serverkit"
)

// Binary is a usable redis-server executable.
type Binary struct {
	Path    string
	Version string // "7.0.15"
}

// minMajor is the oldest Redis major version locktest runs: the one it is
// tested against (Debian's 7.0), whose behaviour the faults and stories
// describe.
const minMajor = 7

const install = "apt-get install redis-server"

// versionRE reads the version out of `redis-server --version`:
// "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=...".
var versionRE = regexp.MustCompile(`^Redis server v=(\d+)\.(\d+)\.(\d+)\b`)

// Find returns the redis-server at path, or the one on PATH when path is
// empty, once it has answered --version as Redis 7 or newer. The
// error is one line that names what is wrong and how to install Redis.
// Sentinel needs no binary of its own: it is `redis-server --sentinel`.
func Find(path string) (Binary, error) {
	if path == "" {
		p, err := exec.LookPath("redis-server")
		if err != nil {
			return Binary{}, fmt.Errorf("redis-server not found on PATH (install it: %s)", install)
		}
		path = p
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return Binary{}, fmt.Errorf("redis-server %s: %v (install it: %s)", path, errors.Unwrap(err), install)
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return Binary{}, fmt.Errorf("redis-server %s is not an executable file (install it: %s)", path, install)
	}
	out, err := serverkit.Version(path, install)
	if err != nil {
		return Binary{}, err
	}
	first, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	m := versionRE.FindStringSubmatch(first)
	if m == nil {
		return Binary{}, fmt.Errorf("%s is not redis-server: --version said %q (install it: %s)", path, first, install)
	}
	version := m[1] + "." + m[2] + "." + m[3]
	if major, _ := strconv.Atoi(m[1]); major < minMajor {
		return Binary{}, fmt.Errorf("redis-server %s at %s is too old: locktest needs Redis %d or newer (%s)", version, path, minMajor, install)
	}
	return Binary{Path: path, Version: version}, nil
}

// ForTest returns the redis-server on PATH for a test (t is a
// *testing.T), or skips the test saying why: tests that need real servers
// call it first, so that `go test` passes, and says so, on a machine
// without Redis.
func ForTest(t interface {
	Helper()
	Skip(args ...any)
}) Binary {
	t.Helper()
	b, err := Find("")
	if err != nil {
		t.Skip("redis-server not installed (" + install + "): " + err.Error())
	}
	return b
}
