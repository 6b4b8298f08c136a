package report

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// A lane is written as encoding/json writes it.
func TestLaneJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	xs := []float64{0, -0.5, 1, -3, 12345.6, 1e15, 1e21, 1.5e-7, math.MaxInt64, 9007199254740993, 0.1, 123456789.3}
	for range 2000 {
		xs = append(xs, math.Round(rng.NormFloat64()*1e7)/10, float64(rng.Int64()), rng.Float64()*math.Pow(10, float64(rng.IntN(40)-20)))
	}
	l := lane{W: xs, H: []float64{}, R: xs[:7], K: []float64{1, 2}}
	got, err := l.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
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
}
