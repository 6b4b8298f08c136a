package workload

import (
	"errors"
	"fmt"
	"time"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/words"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/resource"
)

// Guards: what a client checks, just before each write, to convince itself
// that it still holds the lock.
const (
	// GuardNone trusts the lock: no check.
	GuardNone = "none"
	// GuardSession checks that the client's session is not Done, i.e. that
	// its keepalives have not found the lease gone (or gone unanswered past
	// the lease's end on the client's clock).
	GuardSession = "session"
	// GuardClock checks, on the client's own clock, that the time elapsed
	// since the lock was granted is below the TTL minus the guard margin.
	GuardClock = "clock"
)

// Config describes the clients and their critical section.
type Config struct {
	Clients int
	// Locks are the lock names clients pick from; each is also the key of the
	// resource register it protects.
	Locks []string
	// Think is how long a holder may pause between read and write; each
	// critical section draws a time uniformly from [ThinkMin, ThinkMax]. It
	// is measured on the client's clock.
	ThinkMin, ThinkMax time.Duration
	// SlowShare of the critical sections are slow, as sections that call
	// another service are: they think a time drawn uniformly from
	// [SlowMin, SlowMax] instead (both zero: SlowRange's default). A lease fault only does harm to a holder with work ahead of
	// it, so the default run has such sections.
	SlowShare        float64
	SlowMin, SlowMax time.Duration
	// TTL is the session lease TTL in seconds.
	TTL int
	// OpTimeout bounds each acquire, read, write and release, on the
	// client's clock.
	OpTimeout time.Duration
	// Prefix is where lock keys live on the servers (a backend whose
	// system decides it, as an external etcd cluster does, sets it).
	Prefix string
	Seed   int64
	// Guard is what a client checks before each write: GuardNone (""
	// too), GuardSession or GuardClock. A client whose guard fails does not
	// write; it releases the lock and counts a refusal.
	Guard string
	// GuardMargin is the clock guard's safety margin: the lease must have
	// more than this left on the client's clock. 0 means TTL/5.
	GuardMargin time.Duration
	// Recipe is the lock under test (the harness puts the default
	// backend's first recipe here when it is nil). Results record its
	// name, not the value.
	Recipe lock.Recipe `json:"-"`
	// Workload is what a critical section does: one of Workloads
	// (histories.WorkloadCounter, "" too, or histories.WorkloadStock).
	Workload string
	// Items is the stock workload's inventory per key; 0 means
	// DefaultItems.
	Items int
	// Dir is the run directory, where a recipe may keep files of its own
	// (lock.Env.Dir); "" when there is none.
	Dir string
	// Logf, if set, takes a line for the run's log (lock.Env.Logf).
	Logf func(format string, args ...any) `json:"-"`
	// Resource is the resource mode. One of the HTTP store's (fenced,
	// unfenced, or "") means the store at the address New is given; any
	// other is a mode the backend keeps in the system under test itself
	// (a Keeper's, as etcd's etcd-txn: New then takes no address).
	Resource resource.Mode
}

// DefaultConfig is the configuration of a plain `locktest run`.
func DefaultConfig() Config {
	return Config{
		Clients:   5,
		Locks:     []string{"lock"},
		ThinkMin:  0,
		ThinkMax:  20 * time.Millisecond,
		SlowShare: DefaultSlowShare,
		TTL:       2,
		OpTimeout: 5 * time.Second,
		Prefix:    "/locktest/locks/",
		Guard:     GuardNone,
	}
}

// Validate reports the first thing wrong with c.
func (c Config) Validate() error {
	switch {
	case c.Clients < 1:
		return fmt.Errorf("clients must be at least 1, got %d", c.Clients)
	case len(c.Locks) < 1:
		return errors.New("at least one lock name is needed")
	case c.ThinkMin < 0 || c.ThinkMax < c.ThinkMin:
		return fmt.Errorf("think time range [%v, %v] is not valid", c.ThinkMin, c.ThinkMax)
	case c.SlowShare < 0 || c.SlowShare > 1:
		return fmt.Errorf("slow share %v is not between 0 and 1", c.SlowShare)
	case c.SlowMin < 0 || c.SlowMax < c.SlowMin:
		return fmt.Errorf("slow think range [%v, %v] is not valid", c.SlowMin, c.SlowMax)
	case c.TTL < 1:
		return fmt.Errorf("ttl must be at least 1 s, got %d", c.TTL)
	case c.OpTimeout <= 0:
		return fmt.Errorf("op timeout must be positive, got %v", c.OpTimeout)
	case c.Prefix == "":
		return errors.New("the lock key prefix must not be empty")
	}
	switch c.Guard {
	case "", GuardNone, GuardSession, GuardClock:
	default:
		return fmt.Errorf("unknown guard %q%s (want %s, %s or %s)", c.Guard, words.DidYouMean(c.Guard, []string{GuardNone, GuardSession, GuardClock}), GuardNone, GuardSession, GuardClock)
	}
	if c.GuardMargin < 0 || c.GuardMargin >= time.Duration(c.TTL)*time.Second {
		return fmt.Errorf("guard margin must be in [0, ttl), got %v with ttl %d s", c.GuardMargin, c.TTL)
	}
	for _, l := range c.Locks {
		if l == "" {
			return errors.New("lock names must not be empty")
		}
	}
	if _, err := c.section(); err != nil {
		return err
	}
	if c.Items < 0 {
		return fmt.Errorf("items must not be negative, got %d", c.Items)
	}
	return nil
}

// Plan checks c before anything starts (Validate), and names the clients
// New will make of it (ClientNames), against which faults are drawn.
func (c Config) Plan() (clients []string, err error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return ClientNames(c.Clients), nil
}

// workload is the effective workload name.
func (c Config) workload() string {
	if c.Workload == "" {
		return histories.WorkloadCounter
	}
	return c.Workload
}

// DefaultSlowShare is the share of slow critical sections by default.
const DefaultSlowShare = 0.1

// SlowRange is the think time range of slow sections. By default, one to
// two TTLs (long enough that a lease fault striking as one begins does
// harm); with the clock guard, a quarter of the TTL to what
// the guard lets write (a team that checks its lease's time left keeps its
// sections inside the lease).
func (c Config) SlowRange() (time.Duration, time.Duration) {
	if c.SlowMin == 0 && c.SlowMax == 0 {
		ttl := time.Duration(c.TTL) * time.Second
		if c.Guard == GuardClock {
			return ttl / 4, ttl - c.margin()
		}
		return ttl, 2 * ttl
	}
	return c.SlowMin, c.SlowMax
}

// margin is the clock guard's effective margin.
func (c Config) margin() time.Duration {
	if c.GuardMargin > 0 {
		return c.GuardMargin
	}
	return time.Duration(c.TTL) * time.Second / 5
}
