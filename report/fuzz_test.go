package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/internal/fuzzseed"
)

// FuzzReportModel checks any input as `locktest check` does and draws the
// page's model of it: the model is written as JSON, its plots stay within
// maxBuckets points whatever the time the history spans, every lane's
// records are whole, every client has one lane, and the page is written.
// Its seeds are the curated histories and the hand-written ones.
func FuzzReportModel(f *testing.F) {
	for _, b := range fuzzseed.Histories(f, "..") {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "history.jsonl")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := harness.Check(path, harness.CheckOptions{Backends: backends, Required: []string{"resource"}})
		if err != nil {
			return // malformed: FuzzReader holds the error to its form
		}
		m, _ := fromHistory(res.Paired())
		if _, err := json.Marshal(m); err != nil {
			t.Fatalf("model not written as JSON: %v", err)
		}
		if n := len(m.Plot.T); n == 0 || n > maxBuckets+2 || len(m.Plot.Grants) != n || len(m.Plot.P50) != n || len(m.Plot.P99) != n {
			t.Fatalf("plot of %d points (%d, %d, %d)", n, len(m.Plot.Grants), len(m.Plot.P50), len(m.Plot.P99))
		}
		seen := map[string]bool{}
		for _, c := range m.Clients {
			l, ok := m.Lanes[c]
			if seen[c] || !ok {
				t.Fatalf("client %q: twice, or without a lane: %v", c, m.Clients)
			}
			seen[c] = true
			if len(l.W)%5 != 0 || len(l.H)%5 != 0 || len(l.R)%4 != 0 || len(l.K)%2 != 0 {
				t.Fatalf("lane %s has a record cut short: %+v", c, l)
			}
		}
		if len(m.Lanes) != len(m.Clients) {
			t.Fatalf("%d lanes for %d clients", len(m.Lanes), len(m.Clients))
		}
		if m.Start > m.End {
			t.Fatalf("start %v after end %v", m.Start, m.End)
		}
		if err := Write(filepath.Join(dir, "report.html"), res); err != nil {
			t.Fatal(err)
		}
	})
}
