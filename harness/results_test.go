package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
)

func TestParseRequire(t *testing.T) {
	got, err := ParseRequire("all")
	if err != nil || strings.Join(got, ",") != "consistency,contract,invariant,liveness,mutex,resource" {
		t.Errorf("all: %v %v", got, err)
	}
	if got, err := ParseRequire("liveness, mutex"); err != nil || strings.Join(got, ",") != "liveness,mutex" {
		t.Errorf("list: %v %v", got, err)
	}
	// A required check the results lack does not change the verdict.
	if v, code := verdict([]checker.Result{{Name: histories.CheckMutex, Verdict: checker.Valid}}, []string{"mutex", "consistency"}); v != checker.Valid || code != ExitValid {
		t.Errorf("verdict %s %d", v, code)
	}
}

// TestCheckVisualizesAndWordsFaults checks the harness's part of a check:
// it writes each check's visualization as NAME.html, and its stories word
// the faults as the nemesis describes them.
func TestCheckVisualizesAndWordsFaults(t *testing.T) {
	dir := t.TempDir()
	history := filepath.Join("..", "histories", "curated", "paused-holder-unfenced.jsonl")
	res, err := Check(history, CheckOptions{VisualizationDir: dir, Required: histories.Checks()})
	if err != nil {
		t.Fatal(err)
	}
	drawn := 0
	for _, c := range res.Checks {
		if c.Visual != nil {
			t.Errorf("%s: the visualization is kept after writing", c.Name)
		}
		if c.Visualization == "" {
			continue
		}
		drawn++
		if want := filepath.Join(dir, c.Name+".html"); c.Visualization != want {
			t.Errorf("%s: visualization %q, want %q", c.Name, c.Visualization, want)
		}
		b, err := os.ReadFile(c.Visualization)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "c1 was paused") {
			t.Errorf("%s: the visualization lacks the fault annotation", c.Name)
		}
	}
	if drawn != 2 {
		t.Errorf("%d visualizations, want mutex and resource", drawn)
	}
	if !strings.Contains(res.Checks[0].Explanation, "c1 was paused 2.03-6.00 s") {
		t.Errorf("mutex story does not word the pause as the nemesis does: %s", res.Checks[0].Explanation)
	}
}
