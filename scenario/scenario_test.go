package scenario

import (
	"strings"
	"testing"
	"time"
)

// Every scenario is well-formed: a unique name, a summary and a lesson of
// two or three sentences, expectations for both resources, and a schedule
// that validates for 3 and 5 members.
func TestCatalog(t *testing.T) {
	seen := map[string]bool{}
	for _, sc := range Catalog {
		if sc.Name == "" || seen[sc.Name] {
			t.Errorf("scenario %q: empty or duplicate name", sc.Name)
		}
		seen[sc.Name] = true
		if sc.Summary == "" || strings.Contains(sc.Summary, "\n") {
			t.Errorf("%s: summary %q", sc.Name, sc.Summary)
		}
		if n := strings.Count(sc.Lesson, ". "); n < 1 || n > 3 {
			t.Errorf("%s: lesson of %d sentences: %q", sc.Name, n+1, sc.Lesson)
		}
		for _, res := range []string{unfenced, fenced} {
			if len(sc.Expect[res]) == 0 {
				t.Errorf("%s: no expectation with the %s resource", sc.Name, res)
			}
		}
		for _, members := range []int{3, 5} {
			s := sc.Schedule(1, Shape{Members: members, Clients: []string{"c0", "c1", "c2"}, TTL: 2 * time.Second})
			if err := s.Validate(); err != nil {
				t.Errorf("%s, %d members: %v", sc.Name, members, err)
			}
		}
		if got, err := Lookup(sc.Name); err != nil || got.Name != sc.Name {
			t.Errorf("Lookup(%s): %v", sc.Name, err)
		}
	}
	we, _ := Lookup("waiter-expiry")
	if we.Expected("mutex-3.4", fenced)["contract"] != "invalid" || we.Expected("mutex", unfenced)["contract"] != "valid" {
		t.Errorf("waiter-expiry expects %v of mutex-3.4 and %v of mutex", we.Expected("mutex-3.4", fenced), we.Expected("mutex", unfenced))
	}
	if ph, _ := Lookup("paused-holder"); ph.Settings()["slow-share"] != "0" || ph.Settings()["time"] != ph.Flags["time"] {
		t.Errorf("paused-holder settings %v: want its flags over the common ones", ph.Settings())
	}
	if _, err := Lookup("split-brain"); err == nil || !strings.Contains(err.Error(), "paused-holder") {
		t.Errorf("unknown scenario: %v, want the known ones listed", err)
	}
}
