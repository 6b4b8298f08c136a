package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/locktest/locktest/checker"
)

// curated is one entry of histories/curated/index.json: a history recorded
// from a real run, the command that produced it, and the verdicts it must
// keep getting.
type curated struct {
	Name     string                     `json:"name"`
	Story    string                     `json:"story"`
	Command  string                     `json:"command"`
	Seed     int64                      `json:"seed"`
	History  string                     `json:"history"`
	Expected map[string]checker.Verdict `json:"expected"`
}

// TestCuratedHistories re-checks every curated history and asserts the
// verdicts recorded with it.
func TestCuratedHistories(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "histories", "curated")
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var index []curated
	if err := json.Unmarshal(b, &index); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(index) < 8 {
		t.Fatalf("index.json lists %d histories, want the 4 split-brain cases with and without fencing", len(index))
	}
	for _, c := range index {
		t.Run(c.Name, func(t *testing.T) {
			if c.Command == "" || c.Story == "" || len(c.Expected) == 0 {
				t.Fatalf("entry lacks its command, story or expected verdicts: %+v", c)
			}
			res, err := Check(filepath.Join(dir, c.History), CheckOptions{Backends: backends, Required: checker.Names()})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]checker.Verdict{}
			for _, r := range res.Checks {
				got[r.Name] = r.Verdict
			}
			for name, want := range c.Expected {
				if got[name] != want {
					t.Errorf("%s: %s, want %s", name, got[name], want)
				}
			}
		})
	}
}
