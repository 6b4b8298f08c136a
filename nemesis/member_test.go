package nemesis

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
)

// TestRunMember removes the leader, writes while the cluster is down to
// two, and checks it came back as a new member; then replaces another
// member, and heals a member left removed. The members stay consistent
// throughout.
func TestRunMember(t *testing.T) {
	t.Parallel()
	c, ctx := startCluster(t)
	oldIndex, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := c.Members()[oldIndex]
	oldID := old.ID
	other := c.Members()[(oldIndex+1)%3]
	otherID := other.ID
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	sched := Schedule{Members: 3, Entries: []Entry{
		{Fault: MemberRemove, Target: TargetLeader, Fallback: "m1", Duration: 700 * time.Millisecond},
		{Fault: MemberReplace, Target: other.Name},
	}}
	rec := newRec()
	cancel := goRun(c, nil, rec, sched)
	// A fresh cluster: etcd refuses the removal for its first 5 s.
	start := rec.wait(t, ctx, histories.FStart, MemberRemove)
	t.Logf("start params %v", start.Value.Params)
	if !slices.Equal(start.Value.Targets, []string{old.Name}) || start.Value.Params["selector"] != TargetLeader || start.Value.Params["remove_took"] == "" {
		t.Fatalf("start: %+v", start.Value)
	}
	if !c.Removed(oldIndex) {
		t.Fatal("the leader is still a member")
	}
	if _, err := c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	if err := put(ctx, admin, "k", "two"); err != nil {
		t.Fatalf("the two left cannot commit: %v", err)
	}
	stop := rec.wait(t, ctx, histories.FStop, MemberRemove)
	t.Logf("stop params %v", stop.Value.Params)
	if stop.Error != "" || stop.Value.Params["add_took"] == "" {
		t.Fatalf("stop: %+v", stop)
	}
	if c.Removed(oldIndex) || old.ID == oldID {
		t.Fatalf("%s after the fault: removed %v, ID %x (was %x)", old.Name, c.Removed(oldIndex), old.ID, oldID)
	}
	// The member added back is new: etcd refuses the next removal for 5 s.
	stop = rec.wait(t, ctx, histories.FStop, MemberReplace)
	t.Logf("replace params %v", stop.Value.Params)
	if stop.Error != "" || !slices.Equal(stop.Value.Targets, []string{other.Name}) || other.ID == otherID {
		t.Fatalf("replace: %+v, ID %x (was %x)", stop, other.ID, otherID)
	}
	if res := cancel(); res.err != nil {
		t.Fatal(res.err)
	}
	checkPairs(t, rec.all(), MemberRemove, MemberReplace)
	checkHealed(t, ctx, c, "c0")

	// A member left removed is added back by the heal.
	if err := c.RemoveMember(ctx, oldIndex); err != nil {
		t.Fatal(err)
	}
	rec = newRec()
	done, stopRun := context.WithCancel(ctx)
	stopRun()
	if _, err := Run(done, Config{}, c, nil, rec, Schedule{Members: 3}); err != nil {
		t.Fatal(err)
	}
	ops := rec.all()
	checkPairs(t, ops)
	if v := ops[0].Value; !slices.Equal(v.Targets, []string{old.Name}) {
		t.Fatalf("heal targets %v", v.Targets)
	}
	checkHealed(t, ctx, c, "c0")
}

func TestDescribeMember(t *testing.T) {
	t.Parallel()
	for kind, want := range map[string]string{
		MemberRemove:  "member m1 was removed from the cluster",
		MemberReplace: "member m1 was replaced with a fresh one",
	} {
		if got, _ := Describe(kind, []string{"m1"}, nil); got != want {
			t.Errorf("Describe(%s) = %q, want %q", kind, got, want)
		}
	}
}
