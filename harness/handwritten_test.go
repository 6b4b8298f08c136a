package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
)

// handWritten is one entry of histories/testdata/index.json: a small
// history of a kind a person writes, and the verdicts it deserves, or the
// error that says where it is malformed.
type handWritten struct {
	History  string                     `json:"history"`
	About    string                     `json:"about"`
	Expected map[string]checker.Verdict `json:"expected"`
	Error    string                     `json:"error"`
}

// TestHandWrittenHistories checks each hand-written history: the verdicts
// it deserves (no invalid where no promise definitely broke), or a
// file:line error.
func TestHandWrittenHistories(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "histories", "testdata")
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var index []handWritten
	if err := json.Unmarshal(b, &index); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	for _, c := range index {
		t.Run(strings.TrimSuffix(c.History, ".jsonl"), func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join(dir, c.History))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), c.History)
			if err := os.WriteFile(path, text, 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := Check(path, CheckOptions{Backends: backends, Required: checker.Names()})
			if c.Error != "" {
				if err == nil || !strings.Contains(err.Error(), c.Error) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("%s: error %v, want one line with %q", c.About, err, c.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Checks {
				if want, ok := c.Expected[r.Name]; ok && r.Verdict != want {
					t.Errorf("%s: %s is %s, want %s:\n%s", c.About, r.Name, r.Verdict, want, r.Explanation)
				}
			}
		})
	}
}
