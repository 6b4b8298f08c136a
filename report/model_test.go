package report

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/locktest/locktest/harness"
)

// A lane is written as encoding/json writes it, and the model's lanes
// beside the rest.
func TestLaneJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	xs := []float64{0, -0.5, 1, -3, 12345.6, 1e15, 1e21, 1.5e-7, math.MaxInt64, 9007199254740993, 0.1, 123456789.3}
	for range 2000 {
		xs = append(xs, math.Round(rng.NormFloat64()*1e7)/10, float64(rng.Int64()), rng.Float64()*math.Pow(10, float64(rng.IntN(40)-20)))
	}
	l := lane{W: xs, H: []float64{}, R: xs[:7], K: []float64{1, 2}}
	got := l.appendJSON(nil)
	type plain struct {
		W []float64 `json:"w"`
		H []float64 `json:"h"`
		R []float64 `json:"r"`
		K []float64 `json:"k"`
	}
	want, _ := json.Marshal(plain(l))
	if string(got) != string(want) {
		t.Fatalf("lane JSON differs:\n got %.300s\nwant %.300s", got, want)
	}
	m := model{Lanes: map[string]lane{"c1": l, "c0": {}}, Clients: []string{"c0", "c1"}}
	b, err := m.marshal()
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Lanes   map[string]plain `json:"lanes"`
		Clients []string         `json:"clients"`
	}
	if err := json.Unmarshal(b, &back); err != nil || len(back.Lanes) != 2 || len(back.Lanes["c1"].W) != len(xs) || len(back.Clients) != 2 {
		t.Fatalf("model written as %.200s: %v", b, err)
	}
}

// The page's size follows the operations, not the time the history spans:
// four operations whose last time is near the largest int64, or spread
// over 46 days, make plots of at most maxBuckets points.
func TestModelBoundedBySpan(t *testing.T) {
	for _, last := range []int64{math.MaxInt64 - 1, 46 * 24 * int64(time.Hour), math.MaxInt64} {
		text := fmt.Sprintf(`{"type":"invoke","f":"acquire","process":1,"time":0}
{"type":"ok","f":"acquire","process":1,"time":1,"value":{"token":1}}
{"type":"invoke","f":"release","process":1,"time":2}
{"type":"ok","f":"release","process":1,"time":%d}
`, last)
		path := filepath.Join(t.TempDir(), "h.jsonl")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := harness.Check(path, harness.CheckOptions{Backends: backends, Required: []string{"mutex"}})
		if err != nil {
			t.Fatal(err)
		}
		m, _ := fromHistory(res.Paired())
		if n := len(m.Plot.T); n == 0 || n > maxBuckets+2 || len(m.Plot.Grants) != n || len(m.Plot.P50) != n {
			t.Errorf("last time %d: %d plot points", last, n)
		}
		if m.Plot.T[0] > 0 || m.Plot.T[len(m.Plot.T)-1] < float64(last)/1e9-m.Plot.Bucket {
			t.Errorf("last time %d: buckets %v..%v of %v s do not cover the history", last, m.Plot.T[0], m.Plot.T[len(m.Plot.T)-1], m.Plot.Bucket)
		}
		if err := Write(filepath.Join(filepath.Dir(path), "report.html"), res); err != nil {
			t.Fatal(err)
		}
	}
}
