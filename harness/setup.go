package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/internal/scratch"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/system"
	"github.com/locktest/locktest/workload"
)

// NewRunDir creates a fresh directory for one run under out, named after the
// time and the seed.
func NewRunDir(out string, seed int64) (string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("--out: %w", err)
	}
	base := filepath.Join(out, fmt.Sprintf("%s-seed%d", time.Now().Format("20060102-150405"), seed))
	dir := base
	for i := 1; ; i++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return filepath.Abs(dir)
		}
		if !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("--out: %w", err)
		}
		dir = fmt.Sprintf("%s.%d", base, i)
	}
}

// Discard removes the directory (from NewRunDir) of a run that ended in an
// error, unless it recorded a history, which stays to be checked. It keeps
// the servers' logs when one of them says anything: the error may point at
// them. It returns the logs' directory when kept so.
func Discard(dir string) (logs string) {
	if _, err := os.Stat(filepath.Join(dir, historyName)); err == nil {
		return ""
	}
	logs = filepath.Join(dir, logsDir)
	said := false
	filepath.WalkDir(logs, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil && fi.Size() > 0 {
				said = true
				return fs.SkipAll
			}
		}
		return nil
	})
	if !said {
		os.RemoveAll(dir)
		return ""
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != logsDir {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return logs
}

// sweepBeside removes the scratch directories (the members' data, the Redis
// servers' directories) that killed runs left in the run directories beside
// o.Dir, and says so in one line. A run that ends removes its own; one
// killed leaves them, owned by a process that no longer exists.
func (o *Options) sweepBeside() {
	parent := filepath.Dir(o.Dir)
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	var dirs []string
	for _, e := range ents {
		if dir := filepath.Join(parent, e.Name()); e.IsDir() && dir != o.Dir {
			dirs = append(dirs, dir)
		}
	}
	r, err := scratch.Sweep(dirs...)
	if line := r.String(); line != "" {
		o.logf("locktest: %s", line)
	}
	if err != nil {
		o.logf("locktest: removing what killed runs left: %v", err)
	}
}

// nemesisConfig completes the nemesis configuration with the run's facts
// as planned: its members' names, its clients' (workload.ClientNames) and
// how many members a grant takes (grantQuorum; 0: none). The fault kinds
// it can carry out are nemesis.Plan's to find (nil: every kind).
func (o *Options) nemesisConfig(members, clients []string, quorum int) nemesis.Config {
	c := o.Nemesis
	c.Members = o.Members
	c.MemberNames = members
	c.Quorum = quorum
	c.MemberLinks = o.Backend
	c.Clients = clients
	c.TTL = time.Duration(o.Workload.TTL) * time.Second
	c.OpTimeout = o.Workload.OpTimeout
	c.Time = o.Time
	return c
}

// agrees checks that the started system's members are those planned,
// which the schedule's faults were drawn against; a name planned as ""
// is the system's to give.
func (p *Plan) agrees(members []string) error {
	planned := p.system.Members
	same := len(members) == len(planned)
	for i := 0; same && i < len(members); i++ {
		same = planned[i] == "" || planned[i] == members[i]
	}
	if !same {
		return fmt.Errorf("harness: the %s system started members %q, its plan named %q", p.Backend, members, planned)
	}
	return nil
}

// memberHashes asks every member for the digest of its state at one
// point, for the consistency check; nil when the system cannot.
func memberHashes(ctx context.Context, sys system.System) []checker.MemberHash {
	h, ok := sys.(system.Hasher)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	hs, err := h.Hashes(ctx)
	if err != nil {
		out := make([]checker.MemberHash, 0, len(sys.MemberNames()))
		for _, m := range sys.MemberNames() {
			out = append(out, checker.MemberHash{Member: m, Err: err.Error()})
		}
		return out
	}
	out := make([]checker.MemberHash, len(hs))
	for i, h := range hs {
		out[i] = checker.MemberHash{Member: h.Member, Revision: h.Revision, Hash: h.Hash}
	}
	return out
}

// resourceLogName is the resource's log of accepted writes in a run
// directory.
const resourceLogName = "resource-log.jsonl"

// logsDir holds the servers' own logs in a run directory, historyName its
// history.
const (
	logsDir     = "logs"
	historyName = "history.jsonl"
)

// markApplied reads the resource's log at path, if there is one, and tells
// h which writes of unknown outcome the resource accepted.
func markApplied(h *checker.History, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	var ws []checker.AppliedWrite
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		var e resource.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("%s:%d: %v (the resource's log was not used)", path, n, err)
		}
		ws = append(ws, checker.AppliedWrite{Key: e.Key, Token: e.Token, Value: e.Value})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %v (the resource's log was not used)", path, err)
	}
	h.MarkApplied(ws)
	return nil
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// cpuTime is the CPU time this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// DrawSchedule draws from o's seed the schedule o's run would draw on a
// system that can carry out every fault kind (--nemesis all: every
// family), with o.Members members named m0, m1, ... and no recipe's
// quorum: one schedule for runs on several backends, each of which fits it
// to its own system (Options.FitSchedule, nemesis.Plan). Nil without faults.
func DrawSchedule(o Options) (*nemesis.Schedule, error) {
	if len(o.Nemesis.Faults) == 0 {
		return nil, nil
	}
	if o.Backends == nil {
		return nil, errNoBackends
	}
	if o.Members == 0 {
		o.Members = 3
	}
	cfg := o.nemesisConfig(nil, workload.ClientNames(o.Workload.Clients), 0)
	cfg.MemberLinks = o.Backends.Default().Name
	s, err := nemesis.Generate(o.Workload.Seed, cfg)
	if err != nil {
		return nil, err
	}
	return &s, nil
}
