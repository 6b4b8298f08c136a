package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/locktest/locktest/backend/registry"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/internal/scratch"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/resource"
	"github.com/locktest/locktest/system"
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

// fleet is what the started system tells the run's faults: the fault kinds
// it can carry out (of them, those the recipe can suffer), the members they
// may strike, and how many of them a grant takes (grantQuorum). The zero
// fleet (a schedule drawn before any system, DrawSchedule) offers every
// kind, names no member and has no quorum.
type fleet struct {
	offers  func(kind string) bool
	members []string
	quorum  int
}

// nemesisConfig completes the nemesis configuration with the run's facts
// and its system's.
func (o *Options) nemesisConfig(clients []string, fl fleet) nemesis.Config {
	c := o.Nemesis
	c.Members = o.Members
	c.MemberNames = fl.members
	c.Quorum = fl.quorum
	c.MemberLinks = o.Backend
	c.Clients = clients
	c.TTL = time.Duration(o.Workload.TTL) * time.Second
	c.Time = o.Time
	if o.Log != nil && c.Logf == nil {
		c.Logf = o.logf
	}
	c.Offers = fl.offers
	return c
}

// schedule is the replayed schedule (as fitted to the system), or one
// drawn from the seed; nil when there are no faults.
func (o *Options) schedule(replay *nemesis.Schedule, clients []string, fl fleet) (*nemesis.Schedule, error) {
	if replay != nil {
		return replay, nil
	}
	if len(o.Nemesis.Faults) == 0 {
		return nil, nil
	}
	s, err := nemesis.Generate(o.Workload.Seed, o.nemesisConfig(clients, fl))
	if err != nil {
		return nil, err
	}
	return &s, nil
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
// to its own system (Options.FitSchedule). Nil without faults.
func DrawSchedule(o Options) (*nemesis.Schedule, error) {
	if len(o.Nemesis.Faults) == 0 {
		return nil, nil
	}
	if o.Members == 0 {
		o.Members = 3
	}
	clients := make([]string, o.Workload.Clients)
	for i := range clients {
		clients[i] = fmt.Sprintf("c%d", i) // as the workload names them
	}
	cfg := o.nemesisConfig(clients, fleet{})
	cfg.MemberLinks = registry.Default().Name
	s, err := nemesis.Generate(o.Workload.Seed, cfg)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// fitSchedule fits s, drawn by DrawSchedule, to a system with these
// members that offers these fault kinds: a fault on member mI strikes
// member I modulo their number (a pause or crash of a member is one of any
// backend's server alike, and one of the leader is one of a member where
// there is no leader), and a fault the system cannot carry out, or whose
// members do not fit it, is dropped and returned.
func fitSchedule(s nemesis.Schedule, offers func(kind string) bool, members []string) (nemesis.Schedule, []nemesis.Entry) {
	member := func(name string) string {
		if i, err := strconv.Atoi(strings.TrimPrefix(name, "m")); err == nil && strings.HasPrefix(name, "m") {
			return members[i%len(members)]
		}
		return name
	}
	fitted := s
	fitted.Members, fitted.Entries = len(members), []nemesis.Entry{}
	var dropped []nemesis.Entry
	for _, e := range s.Entries {
		e.Target, e.Fallback = member(e.Target), member(e.Fallback)
		if e.Fault == nemesis.CrashLeader && !offers(e.Fault) && offers(nemesis.CrashMember) {
			// A system without a leader crashes a member: the leader
			// selector resolves to the entry's fallback, as a member
			// pause aimed at the leader does.
			e.Fault = nemesis.CrashMember
		}
		one := nemesis.Schedule{Members: len(members), Clients: s.Clients, Entries: []nemesis.Entry{e}}
		if !offers(e.Fault) || one.Validate() != nil {
			dropped = append(dropped, e)
			continue
		}
		fitted.Entries = append(fitted.Entries, e)
	}
	return fitted, dropped
}
