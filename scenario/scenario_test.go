package scenario

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// The catalog lists scenarios by topic, every lock's first, then each
// backend's in order; an extension adds a backend's verdicts, lesson and
// references to a scenario of every lock.
func TestNewCatalog(t *testing.T) {
	generic := []Scenario{{Name: "g-bugs", Topic: LockBugs, Lesson: "L."}, {Name: "g-fencing", Topic: Fencing}}
	a := []Scenario{{Name: "a-keeps", Topic: Keeps}, {Name: "a-fencing", Topic: Fencing}}
	b := []Scenario{{Name: "b-fencing", Topic: Fencing}, {Name: "b-bugs", Topic: LockBugs}}
	ext := []Extension{{Scenario: "g-bugs", ByRecipe: map[string]map[string]string{"a-old": {"contract": Invalid}},
		Lesson: "More.", Bugs: []Bug{{Ref: "a#1", Status: "open", Seen: "a 1.0", Recipes: []string{"a-old"}}}}}
	c, err := NewCatalog(generic, []string{"a", "b"}, [][]Scenario{a, b}, ext)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"g-fencing", "a-fencing", "b-fencing", "g-bugs", "b-bugs", "a-keeps"}
	if !slices.Equal(c.Names(), want) {
		t.Errorf("order %v, want %v", c.Names(), want)
	}
	g, err := c.Lookup("g-bugs")
	if err != nil || g.Backend != "" || g.Lesson != "L. More." || g.Line() != " (a#1)" || g.Bugs[0].String() != "a#1 (open), seen in a 1.0, with --recipe a-old" || g.Expected("a-old", Fenced)["contract"] != Invalid {
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

// A scenario's settings are its own over the common ones.
func TestSettings(t *testing.T) {
	sc := Scenario{Run: Settings{Time: 8 * time.Second, Quiet: 2 * time.Second, Think: 1400 * time.Millisecond, ThinkMin: 0,
		Require: []string{"contract"}, System: map[string]string{"cluster": "process"}}}
	s := sc.Settings()
	if s.Time != 8*time.Second || s.Quiet != 2*time.Second || s.LivenessBound != common.LivenessBound || !s.NoSlow {
		t.Errorf("settings %+v: want its own over the common ones", s)
	}
	if s.Think != 1400*time.Millisecond || s.ThinkMin != 0 || !slices.Equal(s.Require, []string{"contract"}) ||
		!maps.Equal(s.System, map[string]string{"cluster": "process"}) {
		t.Errorf("settings %+v: want its own think times, checks and system", s)
	}
	if common.System != nil {
		t.Error("a scenario's system settings changed the common ones")
	}
}

// The table of upstream bugs has a row per bug, with the scenario that
// shows it and, as contrasts, the recipes the scenario expects to keep
// every promise it judges.
func TestEntries(t *testing.T) {
	c := Catalog{
		{Name: "plain"},
		{Name: "bug", Bugs: []Bug{{Ref: "x#1", Recipes: []string{"old"}}, {Ref: "x#2"}},
			ByRecipe: map[string]map[string]string{"old": {"contract": Invalid}, "fixed": {"contract": Valid, "liveness": Valid}, "half": {"contract": Valid, "liveness": Invalid}}},
	}
	got := c.Entries()
	if len(got) != 2 || got[0].Ref != "x#1" || got[1].Ref != "x#2" || got[0].Scenario != "bug" {
		t.Fatalf("entries %+v", got)
	}
	if !slices.Equal(got[0].Contrasts, []string{"fixed"}) || !slices.Equal(got[1].Contrasts, []string{"fixed"}) {
		t.Errorf("contrasts %v, %v: want only the recipe expected valid on every check", got[0].Contrasts, got[1].Contrasts)
	}
}
