package pgserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/locktest/locktest/backend/serverkit"
)

// Binary is a usable PostgreSQL installation: the directory holding
// initdb and postgres.
type Binary struct {
	Dir     string
	Version string // "15.18"
}

// Postgres is the server's path.
func (b Binary) Postgres() string { return filepath.Join(b.Dir, "postgres") }

// Initdb is initdb's path.
func (b Binary) Initdb() string { return filepath.Join(b.Dir, "initdb") }

// Basebackup is pg_basebackup's path, which makes a replica's data.
func (b Binary) Basebackup() string { return filepath.Join(b.Dir, "pg_basebackup") }

// Package is what to install when PostgreSQL is missing.
const Package = "postgresql-15"

const install = "apt-get install " + Package

// minMajor is the oldest major version run: idle_session_timeout, which
// ends a cut-off holder's session, is PostgreSQL 14's.
const minMajor = 14

var versionRE = regexp.MustCompile(`^postgres \(PostgreSQL\) (\d+)\.(\d+)`)

// Find returns the PostgreSQL whose binaries are in dir, or, when dir is
// empty, Debian's newest under /usr/lib/postgresql, else the one on PATH.
// The error is one line that says what to install.
func Find(dir string) (Binary, error) {
	if dir == "" {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		slices.SortFunc(dirs, func(a, b string) int { return majorOf(b) - majorOf(a) })
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
				dir = d
				break
			}
		}
		if dir == "" {
			p, err := exec.LookPath("postgres")
			if err != nil {
				return Binary{}, fmt.Errorf("PostgreSQL server not found in /usr/lib/postgresql/*/bin nor on PATH (install it: %s)", install)
			}
			dir = filepath.Dir(p)
		}
	}
	b := Binary{Dir: dir}
	for _, p := range []string{b.Postgres(), b.Initdb(), b.Basebackup()} {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return Binary{}, fmt.Errorf("%s is not an executable file (install PostgreSQL: %s)", p, install)
		}
	}
	out, err := serverkit.Version(b.Postgres(), install)
	if err != nil {
		return Binary{}, err
	}
	m := versionRE.FindStringSubmatch(out)
	if m == nil {
		return Binary{}, fmt.Errorf("%s is not PostgreSQL: --version said %q (install it: %s)", b.Postgres(), out, install)
	}
	if major, _ := strconv.Atoi(m[1]); major < minMajor {
		return Binary{}, fmt.Errorf("PostgreSQL %s.%s at %s is too old: locktest needs %d or newer (%s)", m[1], m[2], dir, minMajor, install)
	}
	b.Version = m[1] + "." + m[2]
	return b, nil
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// ForTest returns the installed PostgreSQL for a test, or skips the test
// saying why.
func ForTest(t interface {
	Helper()
	Skip(args ...any)
}) Binary {
	t.Helper()
	b, err := Find("")
	if err != nil {
		t.Skip("PostgreSQL not installed (" + install + "): " + err.Error())
	}
	return b
}
