package harness

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/locktest/locktest/cluster"
	"github.com/locktest/locktest/redisserver"
	"github.com/locktest/locktest/system"
	"github.com/locktest/locktest/workload"
)

// Cluster modes.
const (
	ClusterEmbedded = "embedded" // members in locktest's process
	ClusterProcess  = "process"  // members as OS processes locktest starts
	ClusterExternal = "external" // a running cluster locktest did not start
)

// ClusterModes lists the modes --cluster takes.
var ClusterModes = []string{ClusterEmbedded, ClusterProcess, ClusterExternal}

// ClusterOptions say which etcd is under test.
type ClusterOptions struct {
	// Mode is one of ClusterModes; "" is embedded.
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
	// RedisBin is the redis-server a Redis recipe's servers run; "" is
	// the one on PATH.
	RedisBin string `json:"redis_bin,omitempty"`
}

// Check fills in the default mode and says what is wrong with the options,
// in the CLI's flag names.
func (c *ClusterOptions) Check() error {
	if c.Mode == "" {
		c.Mode = ClusterEmbedded
	}
	if !slices.Contains(ClusterModes, c.Mode) {
		return fmt.Errorf("--cluster %q: want embedded, process or external", c.Mode)
	}
	external := c.Mode == ClusterExternal
	switch {
	case c.EtcdBin != "" && c.Mode != ClusterProcess:
		return errors.New("--etcd-bin needs --cluster process")
	case external && len(c.Endpoints) == 0:
		return errors.New("--cluster external needs --endpoints")
	case !external && len(c.Endpoints) > 0:
		return errors.New("--endpoints needs --cluster external")
	case !external && (c.Toxiproxy != "" || c.CACert != "" || c.Cert != "" || c.Key != ""):
		return errors.New("--toxiproxy, --cacert, --cert and --key are for --cluster external")
	case (c.Cert == "") != (c.Key == ""):
		return errors.New("--cert and --key go together")
	}
	return nil
}

// etcdSystem is the etcd under test, as the run uses it.
type etcdSystem interface {
	system.System
	system.Leaderer
	workload.Cluster
	Etcd() cluster.Etcd
	Close() error
}

// started is the system under test of a run, started: etcd's or Redis's.
type started struct {
	sys     system.System // with the capabilities it offers
	backend workload.Backend
	version string // of the etcd or redis-server under test
	close   func() error
}

// startSystem starts the system under test the recipe runs on: a
// redisserver deployment for a Redis recipe (redisTopology), else etcd.
func (o *Options) startSystem(ctx context.Context, logs string) (*started, error) {
	if t, ok := redisTopology(o.RecipeName, o.faultFamilies()); ok {
		r, err := startRedis(ctx, o.Cluster.RedisBin, t, o.Dir, logs)
		if err != nil {
			return nil, err
		}
		var sys system.System = r
		if t == redisserver.Replicated {
			sys = &replicatedRedis{redisSystem: r}
		}
		return &started{sys: sys, backend: workload.Redis(r.d), version: r.d.Binary().Version, close: r.Close}, nil
	}
	e, err := o.startEtcd(ctx, logs)
	if err != nil {
		return nil, err
	}
	return &started{sys: e, backend: workload.Etcd(e), version: e.Etcd().Version, close: e.Close}, nil
}

// startEtcd starts (or connects to) the etcd under test. An external
// cluster's keys live under a prefix of the run's own, which it deletes
// when closed; the workload's lock keys and etcd-txn values go there.
func (o *Options) startEtcd(ctx context.Context, logs string) (etcdSystem, error) {
	if o.Cluster.Mode == ClusterExternal {
		prefix := "/locktest/" + filepath.Base(o.Dir) + "/"
		o.Workload.Prefix = prefix + "locks/"
		e, err := cluster.Connect(ctx, cluster.ExternalConfig{
			Endpoints: o.Cluster.Endpoints, Toxiproxy: o.Cluster.Toxiproxy,
			CACert: o.Cluster.CACert, Cert: o.Cluster.Cert, Key: o.Cluster.Key, Prefix: prefix, LogDir: logs,
		})
		if err != nil {
			return nil, err
		}
		if line := e.Leftovers(); line != "" {
			o.logf("locktest: %s", line)
		}
		return e, nil
	}
	// The members' data dirs go under the run, beside their logs: nothing
	// of a run is left outside its directory, even by a killed one.
	cfg := cluster.Config{Members: o.Members, Dir: o.Dir, LogDir: logs, TickMs: o.TickMs, ElectionMs: o.ElectionMs}
	if o.Cluster.Mode == ClusterProcess {
		cfg.Processes, cfg.EtcdBin = true, o.Cluster.EtcdBin
	}
	cl, err := cluster.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("starting the cluster: %w", err)
	}
	return cl, nil
}
