// Package system says what locktest needs of a system under test: its
// members, and the capabilities the faults and the end-of-run checks use
// (Capabilities; which backend offers which is in docs/reference/faults.md,
// which `locktest docs` writes). A system offers a capability by
// implementing its interface; a fault names the capabilities it needs, and
// a run refuses, before it starts, a fault whose system lacks one. Each
// backend (backend/) adapts its servers to System.
package system

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locktest/locktest/checker"
)

// System is a system under test. Members are addressed by index, in the
// order of MemberNames.
type System interface {
	// Describe says what the system is, for results and errors
	// ("etcd 3.6.16, 3 embedded members").
	Describe() string
	// MemberNames names the members: "m0", "m1", ...
	MemberNames() []string
	// Endpoints are the addresses through which client reaches the
	// members, one per member in order: its own links, which faults can
	// single out.
	Endpoints(client string) ([]string, error)
	// LogDir is where the members' own logs go.
	LogDir() string
}

// Capability names what a fault may need of a system.
type Capability string

// The capabilities, each an interface below.
const (
	CapLeader      Capability = "leader"       // Leaderer
	CapPartition   Capability = "partition"    // Partitioner
	CapPauseMember Capability = "pause-member" // MemberPauser
	CapCrashMember Capability = "crash-member" // Crasher
	CapLinks       Capability = "client-links" // Linker
	CapLeases      Capability = "leases"       // Leaser
	CapHash        Capability = "hash"         // Hasher
	CapMembership  Capability = "membership"   // Reconfigurer
	CapFailover    Capability = "failover"     // Failoverer
	CapExpireEarly Capability = "expire-early" // EarlyExpirer
)

// Capabilities are every capability, in the order above (Has knows each).
func Capabilities() []Capability {
	return []Capability{CapLeader, CapPartition, CapPauseMember, CapCrashMember, CapLinks, CapLeases, CapHash, CapMembership, CapFailover, CapExpireEarly}
}

// Leaderer is a system with a leader among its members.
type Leaderer interface {
	// Leader returns the index of the member every running member names
	// as leader, waiting until they agree or ctx ends.
	Leader(ctx context.Context) (int, error)
}

// Partitioner cuts the links between members.
type Partitioner interface {
	// SetCuts makes exactly the given member pairs (indices) unable to
	// reach each other, both ways; nil mends every cut.
	SetCuts(pairs [][2]int) error
}

// MemberPauser freezes a member as a stop-the-world pause would.
type MemberPauser interface {
	PauseMember(i int) error
	ResumeMember(i int) error
	Paused(i int) bool
}

// Crasher kills a member without warning and restarts it from its data.
type Crasher interface {
	HardStopMember(i int) error
	RestartMember(ctx context.Context, i int) error
	Running(i int) bool
}

// Linker puts every client's links behind toxiproxy: one to each member,
// and one to the protected resource.
type Linker interface {
	// Links returns client's links to every member, in member order.
	Links(client string) ([]*toxiclient.Proxy, error)
	// ResourceLink returns client's link to the resource.
	ResourceLink(client string) (*toxiclient.Proxy, error)
	// ClearToxics removes every toxic and enables every link.
	ClearToxics() error
}

// Multiplexed is a Linker whose client links carry several streams at
// once, so that what a server sends on one is not one request's reply:
// LinkProtocol names their protocol ("h2": HTTP/2, gRPC; "zk":
// ZooKeeper's; "tls": none a proxy can read), which a lost reply reads to
// tell its reply from the rest. Not a capability.
type Multiplexed interface {
	LinkProtocol() string
}

// Leaser acts on client leases from outside, as an operator would. Leases
// are named in hex, as the history writes them.
type Leaser interface {
	RevokeLease(ctx context.Context, lease string) error
	// LeaseGone reports whether the server no longer has the lease.
	LeaseGone(ctx context.Context, lease string) (bool, error)
}

// Hasher reads every member's state digest at one point, for the
// end-of-run consistency check, which judges them.
type Hasher interface {
	Hashes(ctx context.Context) ([]checker.MemberHash, error)
}

// Hinter is a system that can say, when a use needs capabilities it
// lacks, where they are to be had; Refuse adds that to its error. Hint is
// asked of a backend's Prototype too (a typed nil, before anything
// starts): it must not need the system.
type Hinter interface {
	Hint() string
}

// Processes is a system whose servers run as processes of their own, apart
// from locktest's: ServerPids are their process IDs now (a server restarted
// since has a new one). Their CPU time is measured apart from locktest's.
// Not a capability: no fault needs it.
type Processes interface {
	ServerPids() []int
}

// Reconfigurer changes the cluster's membership, as an operator replacing
// a member does.
type Reconfigurer interface {
	// RemoveMember removes member i from the cluster (asking the others)
	// and stops it; its data is wiped. It refuses (error) when the rest
	// could not keep a quorum (a member down, paused or cut off) and when i
	// is removed already.
	RemoveMember(ctx context.Context, i int) error
	// AddMember adds removed member i back as a new member with empty
	// data, under the same name and addresses, and returns once it is
	// ready and has caught up with the cluster's commit index.
	AddMember(ctx context.Context, i int) error
	// Removed reports whether member i is out of the cluster.
	Removed(i int) bool
}

// Failoverer is a primary whose writes reach a replica asynchronously, and
// a watcher (Redis Sentinel) that promotes the replica when the primary is
// lost.
type Failoverer interface {
	// CutReplication stops the primary's writes from reaching the replica:
	// what it takes from then on is lost if it is lost.
	CutReplication() error
	// Failover loses the primary (it is killed, and stays down until
	// RestartMember) and returns once the replica has been promoted.
	Failover(ctx context.Context) (Promotion, error)
	// FailedOver says why no further Failover can be had (a system may
	// support one per run); "" while it can.
	FailedOver() string
}

// Promotion is the outcome of a Failover.
type Promotion struct {
	Old, New int // the lost primary and the promoted replica, member indexes
	// How says who promoted the replica and on what grounds.
	How string
	// Took is from the primary's loss until the replica took writes.
	Took time.Duration
}

// EarlyExpirer EMULATES a forward jump of a member's clock: it expires
// now every key of the member's that has a time to live. An emulation, not
// a clock change: the members share the host's clock, and nothing else on
// the member moves in time.
type EarlyExpirer interface {
	// ExpireEarly expires member i's keys that have a TTL and returns
	// them (none: it had none).
	ExpireEarly(ctx context.Context, i int) ([]string, error)
	// Expiring returns the keys ExpireEarly would expire on member i now,
	// expiring none; an error when it could not expire them.
	Expiring(ctx context.Context, i int) ([]string, error)
}

// Has reports whether s offers capability c.
func Has(s System, c Capability) bool {
	var ok bool
	switch c {
	case CapLeader:
		_, ok = s.(Leaderer)
	case CapPartition:
		_, ok = s.(Partitioner)
	case CapPauseMember:
		_, ok = s.(MemberPauser)
	case CapCrashMember:
		_, ok = s.(Crasher)
	case CapLinks:
		_, ok = s.(Linker)
	case CapLeases:
		_, ok = s.(Leaser)
	case CapHash:
		_, ok = s.(Hasher)
	case CapMembership:
		_, ok = s.(Reconfigurer)
	case CapFailover:
		_, ok = s.(Failoverer)
	case CapExpireEarly:
		_, ok = s.(EarlyExpirer)
	}
	return ok
}

// Missing returns the capabilities of need that s lacks.
func Missing(s System, need []Capability) []Capability {
	var out []Capability
	for _, c := range need {
		if !Has(s, c) {
			out = append(out, c)
		}
	}
	return out
}

// Refuse is the error for a use that needs capabilities s lacks; nil when
// it lacks none.
func Refuse(s System, what string, need []Capability) error {
	miss := Missing(s, need)
	if len(miss) == 0 {
		return nil
	}
	names := make([]string, len(miss))
	for i, c := range miss {
		names[i] = string(c)
	}
	msg := fmt.Sprintf("%s needs %s, which %s does not offer", what, strings.Join(names, " and "), s.Describe())
	if h, ok := s.(Hinter); ok {
		msg += "; " + h.Hint()
	}
	return errors.New(msg)
}
