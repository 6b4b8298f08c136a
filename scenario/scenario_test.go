package scenario

import (
	"slices"
	"strings"
	"testing"
)

// The catalog lists scenarios by topic, every lock's first, then each
// backend's in order; an extension adds a backend's verdicts, lesson and
// references to a scenario of every lock.
func TestNewCatalog(t *testing.T) {
	generic := []Scenario{{Name: "g-bugs", Topic: LockBugs, Lesson: "L."}, {Name: "g-fencing", Topic: Fencing}}
	a := []Scenario{{Name: "a-keeps", Topic: Keeps}, {Name: "a-fencing", Topic: Fencing}}
	b := []Scenario{{Name: "b-fencing", Topic: Fencing}, {Name: "b-bugs", Topic: LockBugs}}
	ext := []Extension{{Scenario: "g-bugs", ByRecipe: map[string]map[string]string{"a-old": {"contract": Invalid}},
		Lesson: "More.", Refs: []string{"a#1"}}}
	c, err := NewCatalog(generic, []string{"a", "b"}, [][]Scenario{a, b}, ext)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"g-fencing", "a-fencing", "b-fencing", "g-bugs", "b-bugs", "a-keeps"}
	if !slices.Equal(c.Names(), want) {
		t.Errorf("order %v, want %v", c.Names(), want)
	}
	g, err := c.Lookup("g-bugs")
	if err != nil || g.Backend != "" || g.Lesson != "L. More." || g.Line() != " (a#1)" || g.Expected("a-old", Fenced)["contract"] != Invalid {
		t.Errorf("extended: %+v, %v", g, err)
	}
	if generic[0].Lesson != "L." || generic[0].ByRecipe != nil {
		t.Error("the extension changed the scenario it extends in place")
	}
	if s, _ := c.Lookup("b-bugs"); s.Backend != "b" {
		t.Errorf("b-bugs of backend %q", s.Backend)
	}
	if _, err := c.Lookup("split-brain"); err == nil || !strings.Contains(err.Error(), "g-fencing") {
		t.Errorf("unknown scenario: %v, want the known ones listed", err)
	}
	if _, err := NewCatalog(generic, []string{"a"}, [][]Scenario{{{Name: "g-bugs"}}}, nil); err == nil {
		t.Error("two scenarios of one name accepted")
	}
	if _, err := NewCatalog(generic, nil, nil, []Extension{{Scenario: "none"}}); err == nil {
		t.Error("an extension of no scenario accepted")
	}
}

// A scenario's settings are its flags over the common ones.
func TestSettings(t *testing.T) {
	ph := Generic[0]
	if ph.Settings()["slow-share"] != "0" || ph.Settings()["time"] != ph.Flags["time"] {
		t.Errorf("%s settings %v: want its flags over the common ones", ph.Name, ph.Settings())
	}
}
