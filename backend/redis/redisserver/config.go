package redisserver

import (
	"fmt"
	"strconv"
	"time"
)

// Topology is the shape of a deployment: Single, Replicated or
// Independent(n).
type Topology struct {
	masters    int
	replicated bool
}

var (
	// Single is one master: r0.
	Single = Topology{masters: 1}
	// Replicated is a master r0, its replica r1 (replicating through a
	// proxy, so that a fault can cut it) and three Sentinels s0-s2 that
	// watch r0 and promote r1 when r0 is gone.
	Replicated = Topology{masters: 1, replicated: true}
)

// Independent is n masters r0..r(n-1) that know nothing of each other, as
// Redlock wants them (n = 5).
func Independent(n int) Topology { return Topology{masters: n} }

// Names name the data servers, in order: the masters, and the replica
// (r0, r1, ...).
func (t Topology) Names() []string {
	n := t.masters
	if t.replicated {
		n++
	}
	names := make([]string, n)
	for i := range names {
		names[i] = "r" + strconv.Itoa(i)
	}
	return names
}

// String names the topology: "single", "replicated", "independent-5".
func (t Topology) String() string {
	switch {
	case t.replicated:
		return "replicated"
	case t.masters == 1:
		return "single"
	default:
		return "independent-" + strconv.Itoa(t.masters)
	}
}

// Config describes the deployment to start.
type Config struct {
	// Binary is the redis-server to run; the zero value finds it on PATH.
	Binary Binary
	// Topology is Single when zero.
	Topology Topology
	// Dir is the run directory: the servers' directories are created in a
	// fresh temporary directory inside it (inside os.TempDir when empty),
	// which Close removes.
	Dir string
	// LogDir receives each server's log, redis-<name>.log (r0, s0, ...), and
	// toxiproxy's, toxiproxy.log; existing files are truncated. Dir when
	// empty; when both are empty the logs go to the servers' directories
	// and are removed with them.
	LogDir string
	// DownAfter is Sentinel's down-after-milliseconds: how long the master
	// must be silent before a Sentinel thinks it down (default 1 s). A
	// pause of the master longer than this starts a failover.
	DownAfter time.Duration
	// FailoverTimeout is Sentinel's failover-timeout once Failover has
	// killed the master (default 2 s): a Sentinel that lost an election
	// waits twice this before it tries again. Until then the Sentinels run
	// with quietFailoverTimeout.
	FailoverTimeout time.Duration
	// StartTimeout bounds Start when its context has no deadline (default
	// 30 s).
	StartTimeout time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Binary.Path == "" {
		b, err := Find("")
		if err != nil {
			return c, err
		}
		c.Binary = b
	}
	if c.Topology.masters == 0 {
		c.Topology = Single
	}
	if c.Topology.masters < 1 || c.Topology.masters > 9 {
		return c, fmt.Errorf("redisserver: %d independent masters: want 1 to 9", c.Topology.masters)
	}
	if c.DownAfter == 0 {
		c.DownAfter = time.Second
	}
	if c.FailoverTimeout == 0 {
		c.FailoverTimeout = 2 * time.Second
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 30 * time.Second
	}
	if c.LogDir == "" {
		c.LogDir = c.Dir
	}
	return c, nil
}
