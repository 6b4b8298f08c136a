package system

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
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
	all := Capabilities()
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

// Capabilities lists every capability this package declares (the
// reference's table of what each backend offers is drawn from it).
func TestCapabilitiesListed(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "system.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []Capability
	ast.Inspect(f, func(n ast.Node) bool {
		if v, ok := n.(*ast.ValueSpec); ok {
			if id, ok := v.Type.(*ast.Ident); ok && id.Name == "Capability" {
				for _, lit := range v.Values {
					if b, ok := lit.(*ast.BasicLit); ok {
						declared = append(declared, Capability(b.Value[1:len(b.Value)-1]))
					}
				}
			}
		}
		return true
	})
	if len(declared) == 0 || !slices.Equal(declared, Capabilities()) {
		t.Errorf("Capabilities() = %v, the declared capabilities are %v", Capabilities(), declared)
	}
}
