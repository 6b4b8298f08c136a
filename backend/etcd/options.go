package etcd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/etcd/cluster"
	"github.com/locktest/locktest/backend/etcd/etcdlock"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/system"
)

// Modes: which etcd a run tests (--cluster).
const (
	Embedded = "embedded" // members in locktest's process
	Process  = "process"  // members as OS processes locktest starts
	External = "external" // a running cluster locktest did not start
)

// Modes lists the modes --cluster takes.
var Modes = []string{Embedded, Process, External}

// Options say which etcd is under test (backend.Options).
type Options struct {
	// Mode is one of Modes; "" is embedded.
	Mode string `json:"mode"`
	// EtcdBin is the etcd binary process members run; "" is the etcd
	// built into locktest.
	EtcdBin string `json:"etcd_bin,omitempty"`
	// Endpoints are an external cluster's client URLs, one per member.
	Endpoints []string `json:"endpoints,omitempty"`
	// Toxiproxy is a running toxiproxy-server's API URL for the links to
	// an external cluster's members; "" runs one in locktest.
	Toxiproxy string `json:"toxiproxy,omitempty"`
	// CACert, Cert and Key are TLS files for an external cluster.
	CACert string `json:"cacert,omitempty"`
	Cert   string `json:"cert,omitempty"`
	Key    string `json:"key,omitempty"`
	// TickMs and ElectionMs are the raft heartbeat and election timeout
	// of the members locktest starts (defaults 10 and 100 ms).
	TickMs     uint `json:"tick_ms,omitempty"`
	ElectionMs uint `json:"election_ms,omitempty"`
	// PollInterval is the polling recipe's retry interval (0:
	// etcdlock.DefaultPollInterval).
	PollInterval time.Duration `json:"poll_interval_ns,omitempty"`
}

var (
	_ backend.Options = (*Options)(nil)
	_ backend.Maker   = (*Options)(nil)
)

// Backend names etcd.
func (o *Options) Backend() string { return Name }

// Check fills in the default mode and says what is wrong with the options,
// in the CLI's flag names.
func (o *Options) Check() error {
	if o.Mode == "" {
		o.Mode = Embedded
	}
	if !slices.Contains(Modes, o.Mode) {
		return fmt.Errorf("--cluster %q: want embedded, process or external", o.Mode)
	}
	external := o.Mode == External
	switch {
	case o.EtcdBin != "" && o.Mode != Process:
		return errors.New("--etcd-bin needs --cluster process")
	case external && len(o.Endpoints) == 0:
		return errors.New("--cluster external needs --endpoints")
	case !external && len(o.Endpoints) > 0:
		return errors.New("--endpoints needs --cluster external")
	case !external && (o.Toxiproxy != "" || o.CACert != "" || o.Cert != "" || o.Key != ""):
		return errors.New("--toxiproxy, --cacert, --cert and --key are for --cluster external")
	case (o.Cert == "") != (o.Key == ""):
		return errors.New("--cert and --key go together")
	}
	return nil
}

// Plan checks the options and sizes the cluster: 3 or 5 members, or an
// external cluster's endpoints, whose names are the members' own, known
// once it is reached (""). A process member's binary is checked here, so
// that a wrong one stops the run before anything starts.
func (o *Options) Plan(p backend.Plan) ([]string, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if o.Mode == External {
		if p.Members != 0 {
			return nil, errors.New("--members does not apply to --cluster external: its size is the number of --endpoints")
		}
		return make([]string, len(o.Endpoints)), nil
	}
	n := p.Members
	if n == 0 {
		n = 3
	}
	if err := cluster.CheckMembers(n); err != nil {
		return nil, fmt.Errorf("--%w", err)
	}
	if o.EtcdBin != "" {
		if _, err := cluster.FindEtcd(o.EtcdBin); err != nil {
			return nil, err
		}
	}
	names := make([]string, n)
	for i := range names {
		names[i] = cluster.MemberName(i)
	}
	return names, nil
}

// Prototype is a cluster locktest runs, or an external one (no member
// faults).
func (o *Options) Prototype(backend.Plan) system.System {
	if o.Mode == External {
		return (*cluster.External)(nil)
	}
	return (*cluster.Cluster)(nil)
}

// Args are the flags that give the options: --members, --cluster and its
// flags (the raft timings and the poll interval are not repeated).
func (o *Options) Args(members int) []string {
	var args []string
	switch o.Mode {
	case Embedded, "":
		args = append(args, "--members", strconv.Itoa(members))
	case Process:
		args = append(args, "--members", strconv.Itoa(members), "--cluster", "process")
		if o.EtcdBin != "" {
			args = append(args, "--etcd-bin", o.EtcdBin)
		}
	case External:
		args = append(args, "--cluster", "external", "--endpoints", strings.Join(o.Endpoints, ","))
		for _, f := range [][2]string{{"toxiproxy", o.Toxiproxy}, {"cacert", o.CACert}, {"cert", o.Cert}, {"key", o.Key}} {
			if f[1] != "" {
				args = append(args, "--"+f[0], f[1])
			}
		}
	}
	return args
}

// Recipe makes the polling recipe with the options' interval.
func (o *Options) Recipe(name string) (lock.Recipe, bool) {
	if name != etcdlock.PollingName || o.PollInterval == 0 {
		return nil, false
	}
	return etcdlock.Polling(o.PollInterval), true
}

// Start starts (or connects to) the etcd under test. An external cluster's
// keys live under a prefix of the run's own, which it deletes when closed;
// the workload's lock keys and etcd-txn values go there.
func (o *Options) Start(ctx context.Context, p backend.Plan) (*backend.Started, error) {
	if o.Mode == External {
		prefix := "/locktest/" + filepath.Base(p.Dir) + "/"
		e, err := cluster.Connect(ctx, cluster.ExternalConfig{
			Endpoints: o.Endpoints, Toxiproxy: o.Toxiproxy,
			CACert: o.CACert, Cert: o.Cert, Key: o.Key, Prefix: prefix, LogDir: p.LogDir,
		})
		if err != nil {
			return nil, err
		}
		if line := e.Leftovers(); line != "" && p.Logf != nil {
			p.Logf("locktest: %s", line)
		}
		return &backend.Started{System: e, Workload: Workload(e), Version: e.Etcd().Version, Prefix: prefix + "locks/", Close: e.Close}, nil
	}
	// The members' data dirs go under the run, beside their logs: nothing
	// of a run is left outside its directory, even by a killed one.
	cfg := cluster.Config{Members: p.Members, Dir: p.Dir, LogDir: p.LogDir, TickMs: o.TickMs, ElectionMs: o.ElectionMs}
	if o.Mode == Process {
		cfg.Processes, cfg.EtcdBin = true, o.EtcdBin
	}
	cl, err := cluster.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("starting the cluster: %w", err)
	}
	return &backend.Started{System: cl, Workload: Workload(cl), Version: cl.Etcd().Version, Close: cl.Close}, nil
}

// flags adds etcd's command-line flags to fs.
func flags(fs *flag.FlagSet) func() (backend.Options, error) {
	mode := fs.String("cluster", Embedded, "the etcd under test: embedded (members in locktest's process), process (members as OS processes: real SIGSTOP, SIGKILL and peer cuts) or external (a running cluster, --endpoints)")
	etcdBin := fs.String("etcd-bin", "", "with --cluster process: the etcd binary members run, 3.4 or later (default: the etcd built into locktest)")
	endpoints := fs.String("endpoints", "", "with --cluster external: the cluster's client URLs, comma-separated, one per member")
	toxiproxy := fs.String("toxiproxy", "", "with --cluster external: API URL of a running toxiproxy-server for the links to the members (default: one in locktest)")
	caCert := fs.String("cacert", "", "with --cluster external: CA certificate file to verify the members")
	cert := fs.String("cert", "", "with --cluster external: client certificate file")
	key := fs.String("key", "", "with --cluster external: client key file")
	tick := fs.Uint("raft-tick", 10, "raft heartbeat interval of the members, in ms")
	election := fs.Uint("raft-election", 100, "raft election timeout of the members, in ms (at least 5 ticks)")
	poll := fs.Duration("poll-interval", etcdlock.DefaultPollInterval, "retry interval of the "+etcdlock.PollingName+" recipe")
	return func() (backend.Options, error) {
		o := &Options{Mode: *mode, EtcdBin: *etcdBin, Toxiproxy: *toxiproxy, CACert: *caCert, Cert: *cert, Key: *key,
			TickMs: *tick, ElectionMs: *election, PollInterval: *poll}
		if *endpoints != "" {
			o.Endpoints = strings.Split(*endpoints, ",")
		}
		if err := o.Check(); err != nil {
			return nil, err
		}
		if *tick == 0 || *election < 5**tick {
			return nil, fmt.Errorf("--raft-tick must be positive and --raft-election at least 5 ticks, got %d and %d ms", *tick, *election)
		}
		if *poll <= 0 {
			return nil, fmt.Errorf("--poll-interval must be positive, got %v", *poll)
		}
		return o, nil
	}
}

// missing says what a run with these settings lacks here: an etcd binary
// --etcd-bin names that is not installed.
func missing(settings map[string]string) error {
	bin := settings["etcd-bin"]
	if bin == "" {
		return nil
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s is not installed (apt-get install etcd-server)", bin)
	}
	return nil
}
