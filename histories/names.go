package histories

// Nemesis events: operations of process "nemesis", type "info". The fault
// runner records a fault's start and stop and the final heal; the workload
// records the rest (what the run does, and the server's truth as its
// observer saw it). histories/README.md documents their values.
const (
	// FStart: a fault begins. Value fault (its kind), targets, params.
	FStart = "start"
	// FStop: a fault ends; same value as its start.
	FStop = "stop"
	// FHeal: everything healed at the end; value fault HealAll.
	FHeal = "heal"
	// FSetup is recorded first: params workload, items (stock), recipe,
	// resource, locks (comma-separated), ttl (the lease TTL in seconds),
	// backend (the system under test's), and fencing_token "false" for a
	// recipe whose token is no fencing token.
	FSetup = "setup"
	// FProcess says which client works under a process number: targets
	// [client], params process.
	FProcess = "process"
	// FKeyDeleted: the server deleted a client's lock key. Targets
	// [client]; params key, lease, revision, create_revision, process, by
	// (one of the Deleted* causes), and for DeletedByOther released_by and
	// released_token; lease_alive when the observer could ask; for
	// DeletedByAcquire, head_own and head_own_revision when the head of the
	// lock's queue was then another node of the same session, never
	// granted, and head_since when the node headed its lock's queue, every
	// older node gone, since the deletion of that revision at the latest
	// (ZooKeeper's observer).
	FKeyDeleted = "key-deleted"
	// FKeyKept: right after a client's release returned ok, the server
	// still held the key with the value that client's grant set: the
	// release did not take effect (Redis's observer, on one server).
	// Targets [client]; params key, process, server.
	FKeyKept = "key-kept"
	// FKeySet: what the server took of one grant's key, on its own clock
	// (Redis's observer, on one server, recorded when the clients
	// stopped). Targets [client]; params key, process, server, set_ns
	// (when the server set the key to the grant's value), ttl_ms (the TTL
	// it set), and, when there were such, asked_ns (when the server took
	// the client's request before the one that set it: the same request,
	// an earlier attempt), next_ns (the first request with the grant's
	// value after it) and changed_ns (the first command after it that may
	// have changed or deleted the key). Times are the history's.
	FKeySet = "key-set"
	// FLeaseLost: a client's session ended while it believed it held a
	// lock. Targets [client]; params key, token, lease, process.
	FLeaseLost = "lease-lost"
	// FLockerFailed: a client could not build its locker. Targets
	// [client]; params error.
	FLockerFailed = "locker-failed"
	// FStall: locktest's own process ran none of its goroutines for a
	// while (the host starved it of CPU, swapped it out or stopped it),
	// as the workload's stall watcher measured on the host's clock: its
	// clients could not renew then, as under a pause nobody injected.
	// Recorded once the process runs again; params duration_ns, how long
	// it did not run (the stall ended at the event's time).
	FStall = "stall"
	// FStarved: a thread of a client's lock process (a lock in an
	// operating system process of its own) waited on a run queue, runnable
	// but not run, for a while, as the workload's starvation watcher read
	// from /proc/PID/task/TID/schedstat: a loaded machine ran the lock
	// slowly. Targets [client]; params process (the client's process
	// number then), pid, duration_ns (the longest any one thread waited,
	// at most span_ns) and span_ns (over the span_ns that ended at the
	// event's time).
	FStarved = "starved"
	// FObserved is recorded once the clients stopped: the history holds
	// every deletion of a lock key up to params revision.
	FObserved = "observed"
	// FEnd is recorded last, once nothing else records: the run reached its
	// end. Params: interrupted "true" when it was interrupted (its clients
	// stopped at once). A history whose setup event has param end
	// EndRecorded and that lacks FEnd was cut short: the run was killed.
	FEnd = "end"
)

// SetupStalls is the setup event's param saying whether the run records
// stall events; StallsWatched, that it does (a history without it may
// have stalled unseen); StallsNotTheLocks, that it records locktest's own
// but the lock runs in a process of its own, whose stalls it cannot see.
const (
	SetupStalls       = "stalls"
	StallsWatched     = "watched"
	StallsNotTheLocks = "locktest-only"
)

// EndRecorded is the setup event's param end in a run that records FEnd.
const EndRecorded = "recorded"

// HealAll is the value.fault of the final heal.
const HealAll = "all"

// FaultLeaseRevoke is the fault kind of an operator revoking a client's
// lease. The checks read it: a key the observer saw deleted with its lease
// at that moment was revoked, not expired.
const FaultLeaseRevoke = "lease-revoke"

// Causes of a key-deleted event (its param "by").
const (
	DeletedByRelease = "release"       // the holder's own release
	DeletedByAcquire = "acquire"       // the client's clean-up after a failed acquire
	DeletedByRevoke  = "revoke"        // the client closed its session (or an operator revoked it)
	DeletedByExpiry  = "expiry"        // the lease ran out on the server
	DeletedByOther   = "other-release" // a release of another grant deleted it: another client's, or a retried one of the owner's older grant
)

// Workloads: what a critical section does (the setup event's param
// workload).
const (
	// WorkloadCounter reads the value and writes value+1.
	WorkloadCounter = "counter"
	// WorkloadStock sells from a stock of items per key: the value is the
	// number sold; a client reads it and, if it is below the stock, writes
	// it +1.
	WorkloadStock = "stock"
)

// Checks: the names of the verdicts judged from a history (the checker's
// registry runs them, in its order).
const (
	CheckMutex       = "mutex"
	CheckResource    = "resource"
	CheckInvariant   = "invariant"
	CheckLiveness    = "liveness"
	CheckContract    = "contract"
	CheckConsistency = "consistency"
)
