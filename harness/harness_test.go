package harness

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/workload"
)

// A run that fails part way (here the nemesis refuses its schedule once the
// clients are running) is still checked, and its results say what went
// wrong; with no violation found, the exit status is 2.
func TestRunErrorIsCheckedAndRecorded(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir, Workload: workload.DefaultConfig(), Time: time.Second,
		Schedule: &nemesis.Schedule{Members: 3, Entries: []nemesis.Entry{{Fault: "bogus", Target: "c0"}}}}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Run: %v; want results carrying the error", err)
	}
	if !strings.Contains(res.Error, "unknown fault kind") || res.Exit != ExitUnknown {
		t.Fatalf("error %q, exit %d; want the nemesis' error and exit 2", res.Error, res.Exit)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var stored Results
	if err := json.Unmarshal(b, &stored); err != nil || stored.Error != res.Error || len(stored.Checks) == 0 {
		t.Fatalf("results.json: error %q, %d checks (%v); want the error and the checks", stored.Error, len(stored.Checks), err)
	}
}
