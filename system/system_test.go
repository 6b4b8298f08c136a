package system

import (
	"context"
	"testing"
)

type bare struct{}

func (bare) Describe() string                   { return "a bare system" }
func (bare) MemberNames() []string              { return []string{"m0"} }
func (bare) Endpoints(string) ([]string, error) { return []string{"127.0.0.1:1"}, nil }
func (bare) LogDir() string                     { return "" }

// leader has a leader and nothing else.
type leader struct{ bare }

func (leader) Leader(context.Context) (int, error) { return 0, nil }

// hinted says where what it lacks is to be had.
type hinted struct{ bare }

func (hinted) Hint() string { return "try another system" }

func TestCapabilities(t *testing.T) {
	all := []Capability{CapLeader, CapPartition, CapPauseMember, CapCrashMember, CapLinks, CapLeases, CapHash, CapMembership}
	if got := Missing(bare{}, all); len(got) != len(all) {
		t.Errorf("a bare system offers %v", got)
	}
	if !Has(leader{}, CapLeader) || Has(leader{}, CapPartition) {
		t.Error("Has does not follow the interfaces")
	}
	if err := Refuse(leader{}, "fault x", []Capability{CapLeader}); err != nil {
		t.Errorf("refused what it offers: %v", err)
	}
	err := Refuse(leader{}, "fault x", []Capability{CapLeader, CapPartition, CapLeases})
	if err == nil || err.Error() != "fault x needs partition and leases, which a bare system does not offer" {
		t.Errorf("Refuse = %v", err)
	}
	err = Refuse(hinted{}, "fault x", []Capability{CapPartition})
	if err == nil || err.Error() != "fault x needs partition, which a bare system does not offer; try another system" {
		t.Errorf("Refuse with a hint = %v", err)
	}
	if Has(leader{}, Capability("no-such")) {
		t.Error("an unknown capability is offered")
	}
}
