// Package scenario is the catalog of classic split-brains, each a scripted
// fault schedule and the workload settings that put a lock in the
// situation, with its lesson and the verdicts it should give: the incident
// on demand, in seconds, where a random schedule finds it by chance.
package scenario

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/backend/etcd/etcdlock"
	"github.com/locktest/locktest/backend/redis/redislock"
	"github.com/locktest/locktest/backend/redis/redisserver"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/resource"
)

// Scenario is one classic split-brain.
type Scenario struct {
	Name string
	// Summary is one line for the catalog.
	Summary string
	// Lesson is what it teaches, in two or three sentences.
	Lesson string
	// Flags are run flags the scenario sets unless the command line does
	// (think times, run time, recipe, workload, guard).
	Flags map[string]string
	// Expect are the verdicts it should give, by resource mode (unfenced,
	// fenced) and check.
	Expect map[string]map[string]string
	// ByRecipe overrides Expect for the recipes named, whatever the
	// resource: a scenario that shows a lock bug expects it of the recipes
	// that have it.
	ByRecipe map[string]map[string]string
	// Faults script the schedule for a run of this shape.
	Faults func(s Shape) []nemesis.Entry
}

// Shape is what a schedule is scripted for.
type Shape struct {
	Members int
	Clients []string
	TTL     time.Duration
}

// Schedule is the scenario's fault schedule for a run of shape s.
func (sc Scenario) Schedule(seed int64, s Shape) nemesis.Schedule {
	return nemesis.Schedule{Seed: seed, Members: s.Members, Clients: slices.Clone(s.Clients), Entries: sc.Faults(s)}
}

// common are the settings of every scenario: a shorter quiet period than
// a random run's, since a scenario's faults are over early and its
// clients are few, and no slow sections but those it asks for.
var common = map[string]string{"quiet": "6s", "liveness-bound": "5s", "slow-share": "0"}

// Settings are the run flags the scenario sets unless the command line
// does.
func (sc Scenario) Settings() map[string]string {
	out := maps.Clone(common)
	maps.Copy(out, sc.Flags)
	return out
}

// Expected are the verdicts the scenario expects of recipe with resource
// mode res.
func (sc Scenario) Expected(recipe, res string) map[string]string {
	if e, ok := sc.ByRecipe[recipe]; ok {
		return maps.Clone(e)
	}
	return maps.Clone(sc.Expect[res])
}

// Missing says what the scenario needs that this machine lacks (the etcd
// binary it runs, or redis-server for a Redis recipe), nil when nothing.
func (sc Scenario) Missing() error {
	if slices.ContainsFunc(redislock.Builtins, func(b lock.Builtin) bool { return b.Name == sc.Flags["recipe"] }) {
		_, err := redisserver.Find("")
		return err
	}
	bin, ok := sc.Flags["etcd-bin"]
	if !ok {
		return nil
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s is not installed (apt-get install etcd-server)", bin)
	}
	return nil
}

// Lookup returns the scenario called name.
func Lookup(name string) (Scenario, error) {
	for _, sc := range Catalog {
		if sc.Name == name {
			return sc, nil
		}
	}
	return Scenario{}, fmt.Errorf("unknown scenario %q (want one of %s)", name, strings.Join(Names(), ", "))
}

// Names lists the catalog's names.
func Names() []string {
	var out []string
	for _, sc := range Catalog {
		out = append(out, sc.Name)
	}
	return out
}

// holder strikes the client granted the lock next (waiting for a fresh
// grant, so that it has its section ahead of it), else fallback c0.
func holder(e nemesis.Entry) nemesis.Entry {
	e.Target, e.Fallback = nemesis.TargetHolder, "c0"
	if e.Params == nil {
		e.Params = map[string]string{}
	}
	e.Params["on"] = "grant"
	return e
}

// pauseHolderBeforeWrite pauses the holder between its last check and its
// write, for longer than its lease.
func pauseHolderBeforeWrite(s Shape) []nemesis.Entry {
	return []nemesis.Entry{holder(nemesis.Entry{At: time.Second, Fault: nemesis.PauseClient, Duration: 2*s.TTL + time.Second,
		Params: map[string]string{"before_write": "true"}})}
}

// bareMajority pauses two of Redlock's five masters (r3, r4) until a
// client is granted the lock on the other three, as a network would that
// cut them off from that client: the holder then has a bare majority,
// r0-r2.
func bareMajority() nemesis.Entry {
	return nemesis.Entry{At: time.Second, Fault: nemesis.PauseMember, Target: "r3", Duration: 8 * time.Second,
		Params: map[string]string{"with": "r4", "until": "grant"}}
}

const (
	unfenced = string(resource.Unfenced)
	fenced   = string(resource.Fenced)
	valid    = string(checker.Valid)
	invalid  = string(checker.Invalid)
)

// damage is the expectation of a scenario that shows what fencing is for.
var damage = map[string]map[string]string{
	unfenced: {histories.CheckResource: invalid},
	fenced:   {histories.CheckResource: valid, histories.CheckInvariant: valid},
}

// Catalog is every scenario, in the order the list prints them.
var Catalog = []Scenario{
	{
		Name:    "paused-holder",
		Summary: "the holder stops (a GC pause) between its read and its write, longer than its lease",
		Lesson: "A pause can strike between any check a holder makes and its write: its lease expires while it is stopped, " +
			"another client takes the lock and writes, and the first wakes up and writes too. No check in the client " +
			"helps; a fencing token checked by the resource rejects the late write.",
		Flags:  map[string]string{"time": "8s"},
		Expect: damage,
		Faults: pauseHolderBeforeWrite,
	},
	{
		Name:    "partitioned-holder",
		Summary: "the holder's links to the cluster are cut mid-section; its lease expires; it keeps working",
		Lesson: "A holder cut off from the cluster cannot renew its lease, and cannot learn that it has lost it: the server " +
			"expires the lease and grants the lock to another client while the first goes on with its critical section " +
			"and writes. Fencing rejects that write.",
		Flags:  map[string]string{"time": "6s", "think": "2500ms", "think-min": "2500ms", "clients": "3"},
		Expect: damage,
		Faults: func(s Shape) []nemesis.Entry {
			return []nemesis.Entry{holder(nemesis.Entry{At: 2 * time.Second, Fault: nemesis.Isolate, Duration: 2*s.TTL + 2*time.Second})}
		},
	},
	{
		Name:    "lease-revoked",
		Summary: "an operator (or a lease bug) revokes the holder's lease mid-section",
		Lesson: "The lease is the lock: when it is revoked, the key goes with it and the next client is granted the lock at " +
			"once, while the holder is still in its critical section. The holder learns of it only at its next keepalive; " +
			"its write lands after the new holder's. Fencing rejects it.",
		Flags:  map[string]string{"time": "5s", "think": "2s", "think-min": "2s", "clients": "3"},
		Expect: damage,
		Faults: func(Shape) []nemesis.Entry {
			return []nemesis.Entry{holder(nemesis.Entry{At: 2 * time.Second, Fault: nemesis.LeaseRevoke})}
		},
	},
	{
		Name:    "delayed-write",
		Summary: "the holder's write to the resource is delayed on the network past its lease and the next holder's write",
		Lesson: "A write in flight is not a write done: the network holds the holder's write, and its lease renewals with it; " +
			"the lease runs out, another client takes the lock and writes, and then the old write arrives and is " +
			"accepted. Only the resource, which sees the token with the write, can tell it is stale.",
		// Its keepalives are held too: the lease runs out while the write is
		// in flight, and the client waits for the write.
		Flags:  map[string]string{"time": "6s", "think": "500ms", "think-min": "300ms"},
		Expect: damage,
		Faults: func(s Shape) []nemesis.Entry {
			return []nemesis.Entry{holder(nemesis.Entry{At: time.Second, Fault: nemesis.Slow, Duration: 5 * time.Second,
				Params: map[string]string{"link": "all", "toxic": "latency", "latency": (s.TTL + time.Second).String(), "jitter": "0s"}})}
		},
	},
	{
		Name:    "clock-guard",
		Summary: "the holder checks its lease on its own clock before writing; its clock runs slow; the check passes after the lease is gone",
		Lesson: "Checking the lease's time left on the client's own clock assumes that clock keeps time. A clock running slow " +
			"says the lease has time left after the server has expired it and granted the lock to another client; the " +
			"check passes and the write goes through. Fencing does not depend on any clock.",
		// The section (1.4 s on the holder's clock, under the guard's 1.6 s)
		// spans the drift (2.5 TTL of host time, a quarter of that on its
		// clock): its renewals come too late for the lease, and its write
		// lands after the next holder's, before the final heal steps its
		// clock back.
		Flags:  map[string]string{"time": "8s", "guard": "clock", "think": "1400ms", "think-min": "1400ms", "clients": "3"},
		Expect: damage,
		Faults: func(s Shape) []nemesis.Entry {
			return []nemesis.Entry{holder(nemesis.Entry{At: 500 * time.Millisecond, Fault: nemesis.ClockRate, Duration: 5 * s.TTL / 2,
				Params: map[string]string{"rate": "0.25"}})}
		},
	},
	{
		Name:    "oversold",
		Summary: "a flash sale: a holder stalls inside its critical section longer than its lease, and a release deletes whoever holds the lock",
		Lesson: "A holder that stalls past its lease (a slow dependency, a pause) overlaps the next holder, and a release " +
			"that deletes the lock key whoever holds it (no ownership check) then hands the lock to a third client in the " +
			"middle of the second's sale: several clients sell at once and more items are sold than there were. Fencing " +
			"the writes keeps the count right.",
		Flags: map[string]string{"time": "8s", "recipe": "unlock-any", "workload": "stock", "items": "40",
			"think": "200ms", "think-min": "100ms", "require": "resource,invariant"},
		Expect: map[string]map[string]string{
			unfenced: {histories.CheckInvariant: invalid},
			fenced:   {histories.CheckResource: valid, histories.CheckInvariant: valid},
		},
		Faults: pauseHolderBeforeWrite,
	},
	{
		Name:    "oversold-redis",
		Summary: "the flash sale on real Redis: SET NX EX, a holder paused past its TTL, and its late DEL removes the next holder's key",
		Lesson: "redis-del is the incident's lock: SET NX with a TTL and release by a plain DEL. A holder paused past its TTL " +
			"loses the key to the next client, then wakes, sells, and DELs the key the next holder set, handing the lock to " +
			"a third client mid-sale: items are oversold. Its token is an INCR taken after the grant, not a fencing token: " +
			"the order of the tokens is not the order of the grants, so a fenced resource cannot trust it.",
		Flags: map[string]string{"time": "8s", "recipe": redislock.DelName, "workload": "stock", "items": "40",
			"think": "200ms", "think-min": "100ms", "require": "invariant,contract"},
		Expect: map[string]map[string]string{
			unfenced: {histories.CheckInvariant: invalid, histories.CheckContract: invalid},
			fenced:   {histories.CheckContract: invalid},
		},
		Faults: pauseHolderBeforeWrite,
	},
	{
		Name:    "failover-redis",
		Summary: "Redis with a replica and Sentinel: the replication is cut, a client takes the lock on the master only, the master dies, Sentinel promotes the replica",
		Lesson: "Redis replicates asynchronously: a lock the master granted and lost before its replica saw it does not exist " +
			"on the replica Sentinel promotes, and the next client is granted it there while the first still works. Its " +
			"fencing counter goes back with it: the promoted replica hands out tokens it never saw given. Replication " +
			"does not make a single-Redis lock safe; WAIT would only narrow the window.",
		Flags: map[string]string{"time": "14s", "recipe": redislock.SetNXName, "think": "3s", "think-min": "3s", "clients": "3",
			"require": "mutex"},
		Expect: map[string]map[string]string{
			unfenced: {histories.CheckMutex: invalid},
			fenced:   {histories.CheckMutex: invalid},
		},
		Faults: func(s Shape) []nemesis.Entry {
			return []nemesis.Entry{{At: time.Second, Fault: nemesis.Failover, Target: nemesis.TargetHolder, Fallback: "c0",
				Duration: 2 * time.Second, Params: map[string]string{"ahead": (s.TTL + s.TTL/4).String() + "-"}}}
		},
	},
	{
		Name:    "redlock-restart",
		Summary: "Redlock (Kleppmann): a holder holds 3 of 5 masters; one of them crashes and restarts without persistence; another client gets 3 of 5",
		Lesson: "Redlock's safety rests on every master keeping its keys: a client granted the lock on a bare majority (two " +
			"masters were unreachable) loses it when one of its three restarts empty, and the next client is granted the " +
			"lock on that one and the two others while the first still works. Two holders; and Redlock has no fencing " +
			"token to save the resource (Kleppmann, \"How to do distributed locking\", 2016).",
		Flags: map[string]string{"time": "12s", "recipe": redislock.RedlockName, "think": "3s", "think-min": "3s", "clients": "3",
			"require": "mutex"},
		Expect: map[string]map[string]string{
			unfenced: {histories.CheckMutex: invalid},
			fenced:   {histories.CheckMutex: invalid},
		},
		Faults: func(Shape) []nemesis.Entry {
			return []nemesis.Entry{
				bareMajority(),
				{At: time.Second, Fault: nemesis.CrashMember, Target: "r2", Duration: 300 * time.Millisecond},
			}
		},
	},
	{
		Name:    "redlock-clock",
		Summary: "Redlock (Kleppmann): a holder holds 3 of 5 masters; the clock of one jumps forward (emulated) and its key expires; another client gets 3 of 5",
		Lesson: "Redlock assumes the masters' clocks run at about the same rate: one that jumps forward expires the holder's " +
			"key early, and with two masters unreachable when it was granted, the holder is left with no majority while it " +
			"still works; the next client is granted the lock. The jump is EMULATED here (the master's keys expired early, " +
			"no clock changed): the servers share the host clock.",
		Flags: map[string]string{"time": "12s", "recipe": redislock.RedlockName, "think": "3s", "think-min": "3s", "clients": "3",
			"require": "mutex"},
		Expect: map[string]map[string]string{
			unfenced: {histories.CheckMutex: invalid},
			fenced:   {histories.CheckMutex: invalid},
		},
		Faults: func(s Shape) []nemesis.Entry {
			return []nemesis.Entry{
				bareMajority(),
				{At: time.Second, Fault: nemesis.ClockJumpEmulated, Target: "r2", Duration: s.TTL},
			}
		},
	},
	{
		Name:    "waiter-expiry",
		Summary: "a queued waiter's lease expires while it waits (etcd#11456)",
		Lesson: "A waiter whose session lease expires while it is queued must not be granted the lock: its key is gone, and " +
			"the next waiter may be granted it too. etcd's Mutex.Lock checks (since the fix for etcd#11456); --recipe " +
			"mutex-3.4 shows the old bug and etcd 3.6's own election still has it. The contract check names it.",
		Flags: map[string]string{"time": "8s", "think": "300ms", "think-min": "200ms", "require": "contract"},
		Expect: map[string]map[string]string{
			unfenced: {histories.CheckContract: valid},
			fenced:   {histories.CheckContract: valid},
		},
		ByRecipe: map[string]map[string]string{
			etcdlock.Mutex34Name:  {histories.CheckContract: invalid},
			etcdlock.ElectionName: {histories.CheckContract: invalid},
		},
		Faults: func(s Shape) []nemesis.Entry {
			return []nemesis.Entry{{At: time.Second, Fault: nemesis.LeaseStarve, Target: nemesis.TargetWaiter, Fallback: "c1",
				Duration: 2*s.TTL + 2*time.Second}}
		},
	},
	{
		Name:    "etcd-11456",
		Summary: "etcd 3.4.23's own Lock RPC grants a waiter whose lease expired while it queued (Debian's etcd-server)",
		Lesson: "A waiter paused in the server's queue for longer than its lease loses its key, yet etcd 3.4's Lock RPC " +
			"still answers it with success once the holder lets go (etcd#11456, fixed in 3.5): two clients are told they " +
			"hold the lock. This runs the etcd binary of a real release as member processes; --etcd-bin '' runs the " +
			"built-in etcd, which refuses the grant (session is expired).",
		Flags: map[string]string{"cluster": "process", "etcd-bin": "/usr/bin/etcd", "recipe": etcdlock.LockRPCName,
			"time": "8s", "think-min": "4s", "think": "5s", "clients": "3", "op-timeout": "20s", "require": "contract"},
		Expect: map[string]map[string]string{
			unfenced: {histories.CheckContract: invalid},
			fenced:   {histories.CheckContract: invalid},
		},
		Faults: func(s Shape) []nemesis.Entry {
			// The head of the queue stops (its keepalives too) while the
			// holder is early in its section, and wakes after its lease
			// has expired but before the holder lets go.
			return []nemesis.Entry{{At: time.Second, Fault: nemesis.PauseClient, Target: nemesis.TargetWaiter, Fallback: "c1",
				Duration: s.TTL + time.Second, Params: map[string]string{"before_write": "false"}}}
		},
	},
	{
		Name:    "leader-loss",
		Summary: "the leader is partitioned away, and later crashed, while a client holds the lock: what etcd gets right",
		Lesson: "Raft keeps the lock safe when the leader goes: the old leader cannot commit without a majority, a new one is " +
			"elected in a few hundred milliseconds, and leases survive the change (a new leader extends them). Mutual " +
			"exclusion holds, only waits grow.",
		Flags: map[string]string{"time": "10s", "require": "resource,contract,liveness"},
		Expect: map[string]map[string]string{
			unfenced: {histories.CheckResource: valid, histories.CheckContract: valid, histories.CheckLiveness: valid},
			fenced:   {histories.CheckResource: valid, histories.CheckContract: valid, histories.CheckLiveness: valid},
		},
		Faults: func(Shape) []nemesis.Entry {
			return []nemesis.Entry{
				{At: time.Second, Fault: nemesis.PartitionLeader, Target: nemesis.TargetLeader, Fallback: "m0", Duration: 3 * time.Second,
					Params: map[string]string{"links": "refuse"}},
				{At: 6 * time.Second, Fault: nemesis.CrashLeader, Target: nemesis.TargetLeader, Fallback: "m1", Duration: 2 * time.Second},
			}
		},
	},
}
