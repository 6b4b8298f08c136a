package nemesis

import (
	"context"
	"errors"
	"time"

	"github.com/locktest/locktest/system"
)

// Member faults change the cluster's membership, as an operator replacing
// a member does (Jepsen's member nemesis, etcd's MemberReplace failpoint).
// Both target a member, the leader half the time.
const (
	// MemberRemove removes a member for the fault's duration (the cluster
	// shrinks) and adds it back with empty data when it stops (it grows).
	MemberRemove = "member-remove"
	// MemberReplace removes a member and at once adds a fresh one in its
	// place; the fault lasts until the new member has caught up.
	MemberReplace = "member-replace"
)

type membership struct{}

// Spec says what the family is, as data.
func (membership) Spec() Spec {
	need := []system.Capability{system.CapMembership, system.CapLeader}
	return Spec{
		Name: "member",
		Doc:  "Changes the cluster's membership, as an operator replacing a member does (Jepsen's member nemesis, etcd's `MemberReplace` failpoint): `member-remove` removes a member (the leader half the time) with etcd's `MemberRemove`, stops it and wipes its data for the fault's duration (2-4 s: the cluster shrinks), then adds it back with `MemberAdd` as a new member with empty data under the same name and addresses (it grows); `member-replace` removes one and at once adds a fresh one in its place, until it has caught up. etcd refuses membership changes until its members have been connected for 5 s, so a member fault soon after a start, a restart or another member fault waits for that (`remove_took`).",
		// A cluster of fewer than three members would lose its quorum.
		Kinds: []Kind{
			{Name: MemberRemove, Needs: need, Members: 3, Says: func(ts []string, _ map[string]string) string {
				return "member " + targets(ts) + " was removed from the cluster"
			}},
			{Name: MemberReplace, Needs: need, Members: 3, Says: func(ts []string, _ map[string]string) string {
				return "member " + targets(ts) + " was replaced with a fresh one"
			}},
		},
		// How long a removed member stays out, as a crashed one stays down.
		// A replacement has none: it lasts as long as the new member takes
		// to catch up.
		Durations: fixed(2*time.Second, 4*time.Second),
		// etcd refuses a change until its members have been connected
		// for 5 s: a change struck 5.2-8.5 s after its turn came (16 of
		// 16, on a loaded machine), and an add back took up to 5.4 s.
		Settle: 8 * time.Second,
	}
}

func (membership) Draw(g *Gen, e *Entry, d Range) {
	e.Target = g.member()
	if g.chance(0.5) {
		e.Target, e.Fallback = TargetLeader, e.Target
	}
	if e.Fault == MemberRemove {
		e.Duration = g.dur(d)
	}
}

// Inject removes the member; Stop adds it back, with empty data, and waits
// until it has caught up.
func (membership) Inject(ctx context.Context, env *Env, e Entry) (*Injected, error) {
	inj := &Injected{Params: map[string]string{}}
	r, err := need[reconfigurer](env)
	if err != nil {
		return inj, err
	}
	i, err := env.member(ctx, e, inj)
	if err != nil {
		return inj, err
	}
	// A removal that fails part way may still have taken the member out.
	inj.Stop = func(ctx context.Context) error {
		if !r.Removed(i) {
			return nil
		}
		began := time.Now()
		err := r.AddMember(ctx, i)
		inj.Params["add_took"] = time.Since(began).Round(time.Millisecond).String()
		return err
	}
	// etcd refuses membership changes until its members have been
	// connected for 5 s: after a restart or an add, the removal waits.
	began := time.Now()
	err = r.RemoveMember(ctx, i)
	if err != nil && ctx.Err() != nil && !r.Removed(i) {
		// The run ended while etcd refused: nothing was done.
		return inj, errNotStruck
	}
	inj.Params["remove_took"] = time.Since(began).Round(time.Millisecond).String()
	return inj, err
}

// Heal adds back, with empty data, every member out of the cluster.
func (membership) Heal(ctx context.Context, env *Env) ([]string, error) {
	r, ok := env.Sys.(reconfigurer)
	if !ok {
		return nil, nil
	}
	var (
		healed []string
		errs   []error
	)
	for i, name := range env.Sys.MemberNames() {
		if r.Removed(i) {
			healed = append(healed, name)
			if err := r.AddMember(ctx, i); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return healed, errors.Join(errs...)
}
