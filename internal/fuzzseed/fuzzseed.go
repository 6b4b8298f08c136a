// Package fuzzseed gives the fuzz targets their seeds: the curated
// histories (recorded from real runs) and the hand-written ones of the
// tests, small ones whole and the start of big ones, as the fuzzer mutates
// small inputs best.
package fuzzseed

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// MaxSeed is the most of a history a seed holds; a longer one is cut at
// the last line that fits.
const MaxSeed = 16 << 10

// Histories returns the seed histories; root is the repository's root, as
// the calling test's package sees it ("..", "../..").
func Histories(tb testing.TB, root string) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, pattern := range []string{"histories/curated/*.jsonl", "histories/testdata/*.jsonl"} {
		paths, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			tb.Fatal(err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				tb.Fatal(err)
			}
			if len(b) > MaxSeed {
				b = b[:bytes.LastIndexByte(b[:MaxSeed], '\n')+1]
			}
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		tb.Fatalf("no seed histories under %s", root)
	}
	return out
}
