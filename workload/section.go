package workload

import (
	"fmt"
	"slices"
	"strings"

	"github.com/locktest/locktest/internal/words"
)

// A Section is what a holder does, in its critical section, with the value
// it read: one workload (--workload), named in the setup event. A new
// workload is one file with its Section and one line in sections.
type Section interface {
	// Next is the value to write after reading v; false when there is
	// nothing to write (counted in Stats.SoldOut).
	Next(read int64) (write int64, ok bool)
	// Sells says whether each accepted write is a sale (counted in
	// Stats.Sales).
	Sells() bool
	// Params are the workload's own params of the setup event.
	Params() map[string]string
}

// sections makes each workload's Section from the configuration, by name.
var sections = map[string]func(Config) Section{
	counterName: newCounter,
	stockName:   newStock,
}

// Workloads lists the workload names, sorted.
func Workloads() []string {
	var names []string
	for n := range sections {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// section is cfg's Section.
func (c Config) section() (Section, error) {
	f, ok := sections[c.workload()]
	if !ok {
		return nil, fmt.Errorf("unknown workload %q%s (want one of %s)", c.Workload, words.DidYouMean(c.Workload, Workloads()), strings.Join(Workloads(), ", "))
	}
	return f(c), nil
}
