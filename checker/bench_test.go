package checker

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locktest/locktest/histories"
)

// benchHistory makes a history of about n operations by 10 clients on one
// key (generate's contended FIFO workload: every acquire waits while the
// other clients hold the lock), with unknowns operations' outcomes made
// unknown (info): writes that took effect, and releases. If invalid, one
// release goes missing in the middle (the mutex check fails), and one read
// returns a stale value (the resource check fails).
func benchHistory(n, unknowns int, invalid bool) []histories.Op {
	ops := generate(n, 10, 0, 1)
	rng := rand.New(rand.NewPCG(uint64(n), uint64(unknowns)))
	var cands, releases, reads []int
	for i, op := range ops {
		switch {
		case op.Type == histories.OK && (op.F == histories.Write || op.F == histories.Release):
			cands = append(cands, i)
			if op.F == histories.Release {
				releases = append(releases, i)
			}
		case op.Type == histories.OK && op.F == histories.Read:
			if v, _ := op.Val(); v > 0 {
				reads = append(reads, i)
			}
		}
	}
	for _, j := range rng.Perm(len(cands))[:min(unknowns, len(cands))] {
		ops[cands[j]].Type = histories.Info
	}
	if !invalid {
		return ops
	}
	r := reads[len(reads)/2]
	v, _ := ops[r].Val()
	ops[r].Value = histories.ReadValue(v - 1)
	// Drop a release (invocation and completion) in the middle.
	drop := releases[len(releases)/2]
	p := ops[drop].Process
	inv := drop - 1
	for ops[inv].Process != p || ops[inv].Type != histories.Invoke {
		inv--
	}
	out := append(ops[:inv:inv], ops[inv+1:drop]...)
	out = append(out, ops[drop+1:]...)
	for i := range out {
		out[i].Index = i
	}
	return out
}

// peakHeap samples the heap in use while f runs and returns its peak above
// the heap in use before.
func peakHeap(f func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > base && ms.HeapInuse-base > peak.Load() {
				peak.Store(ms.HeapInuse - base)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	f()
	close(stop)
	wg.Wait()
	return peak.Load()
}

// BenchmarkCheck checks generated histories of 1k to 100k operations (1M
// with LOCKTEST_BENCH_1M=1), valid and invalid, with 0, 10 and 100 unknown
// outcomes, from records: pairing, then the mutex or resource check. It
// reports the peak heap in use during a check (peak-MB) besides -benchmem's
// figures. Run with
//
//	go test ./checker/ -run '^$' -bench BenchmarkCheck -benchmem -benchtime 1x
func BenchmarkCheck(b *testing.B) {
	sizes := []int{1000, 10000, 100000}
	if os.Getenv("LOCKTEST_BENCH_1M") != "" {
		sizes = append(sizes, 1000000)
	}
	for _, n := range sizes {
		for _, unknowns := range []int{0, 10, 100} {
			for _, invalid := range []bool{false, true} {
				ops := benchHistory(n, unknowns, invalid)
				want := Valid
				if invalid {
					want = Invalid
				}
				for _, check := range []string{"mutex", "resource"} {
					name := fmt.Sprintf("%s/ops=%d/unknown=%d/%s", check, n, unknowns, want)
					b.Run(name, func(b *testing.B) {
						var peak uint64
						for b.Loop() {
							var r Result
							peak = max(peak, peakHeap(func() {
								h := Build(ops)
								if check == "mutex" {
									r = h.Mutex(Options{Timeout: time.Minute})
								} else {
									r = h.Resource(Options{Timeout: time.Minute})
								}
							}))
							if r.Verdict != want {
								b.Fatalf("verdict %s, want %s: %s", r.Verdict, want, r.Explanation)
							}
						}
						b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
					})
				}
			}
		}
	}
}
