package workload

import "github.com/locktest/locktest/histories"

const counterName = histories.WorkloadCounter

// counter is the counter workload: read the value, write value+1. With
// mutual exclusion (or fencing) no increment is lost.
type counter struct{}

func newCounter(Config) Section { return counter{} }

func (counter) Next(v int64) (int64, bool) { return v + 1, true }
func (counter) Sells() bool                { return false }
func (counter) Params() map[string]string  { return nil }
