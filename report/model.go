package report

import (
	"cmp"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
)

// model is what the page draws, as compact JSON: times in milliseconds
// since the run started, items as flat number arrays (a 1-hour run holds
// some 120,000 grants, so every byte per item counts).
type model struct {
	Meta    meta            `json:"meta"`
	Checks  []check         `json:"checks"`
	Clients []string        `json:"clients"`
	Start   float64         `json:"start"`
	End     float64         `json:"end"`
	Lanes   map[string]lane `json:"-"` // written by marshal, apart

	Faults   []fault `json:"faults"`
	Overlaps [][]any `json:"overlaps"` // [from, to, clientA, clientB, key, class (checker.OverlapClass's; "" not judged)]
	Plot     plot    `json:"plot"`
	Links    []link  `json:"links"`
	// Reads are the reads of processes that are no client's (the final
	// reads a run makes when its clients stopped): no lane shows them.
	Reads []read `json:"reads,omitempty"`
}

type read struct {
	Key     string  `json:"key"`
	Value   int64   `json:"value"`
	At      float64 `json:"at"`
	Process int     `json:"process"`
}

type meta struct {
	Title    string            `json:"title"`
	Verdict  string            `json:"verdict"`
	Exit     int               `json:"exit"`
	Required []string          `json:"required"`
	Seed     *int64            `json:"seed,omitempty"`
	Setup    map[string]string `json:"setup"`
	// Legend are the backend's words for the server's truth (expiry) and
	// a client that found its claim gone (lost).
	Legend    map[string]string `json:"legend"`
	Versions  map[string]string `json:"versions"`
	Reproduce string            `json:"reproduce,omitempty"`
	Warnings  []string          `json:"warnings,omitempty"`
	Error     string            `json:"error,omitempty"`
	// CutShort says where a run cut short (killed, interrupted) stops.
	CutShort string            `json:"cut_short,omitempty"`
	Scenario *harness.Scenario `json:"scenario,omitempty"`
	Shrunk   *harness.Shrunk   `json:"shrunk,omitempty"`
	// Cells are the (lock state × fault) cells the faults struck.
	Cells []nemesis.Cell `json:"cells,omitempty"`
	// Live is where a live page asks for the history recorded since
	// (LiveJSON); empty in a report.
	Live string `json:"live,omitempty"`
}

type check struct {
	Name        string      `json:"name"`
	Verdict     string      `json:"verdict"`
	Required    bool        `json:"required"`
	Explanation string      `json:"explanation,omitempty"`
	Violations  []violation `json:"violations,omitempty"`
}

type violation struct {
	Kind    string   `json:"kind"`
	Key     string   `json:"key,omitempty"`
	From    float64  `json:"from"`
	To      float64  `json:"to"`
	Clients []string `json:"clients"`
	Story   string   `json:"story"`
}

// lane is one client's life. W: waits [from, to, outcome, index, process]
// (outcome 0 granted, 1 failed, 2 unknown, 3 still waiting); H: holds [from,
// to, token, index, process] (to is the release's invocation, or the end);
// R: the resource's answers [time, code, index, value] (code 0 write
// accepted, 1 write rejected as stale, 2 write unknown, 3 read ok, 4 read
// rejected, 5 read unknown); K: the server's truth [time, code] (code 0 key
// deleted by release, 1 expired, 2 revoked, 3 deleted by another client's
// release, 4 other; 5 the client noticed its lease was lost).
type lane struct {
	W []float64 `json:"w"`
	H []float64 `json:"h"`
	R []float64 `json:"r"`
	K []float64 `json:"k"`
}

// marshal writes the model as JSON. The lanes, a long run's millions of
// numbers, most of them whole, are written apart, without reflection (and
// without the second pass encoding/json makes over what a MarshalJSON
// returns).
func (m model) marshal() ([]byte, error) {
	rest, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	b := []byte(`{"lanes":{`)
	for i, c := range slices.Sorted(maps.Keys(m.Lanes)) {
		if i > 0 {
			b = append(b, ',')
		}
		name, _ := json.Marshal(c)
		b = append(append(b, name...), ':')
		b = m.Lanes[c].appendJSON(b)
	}
	b = append(b, '}')
	if len(rest) > 2 { // not {}
		b = append(b, ',')
	}
	return append(b, rest[1:]...), nil
}

// appendJSON appends the lane's arrays as encoding/json would write them.
func (l lane) appendJSON(b []byte) []byte {
	b = slices.Grow(b, 8*(len(l.W)+len(l.H)+len(l.R)+len(l.K))+32)
	b = append(b, '{')
	for i, xs := range [][]float64{l.W, l.H, l.R, l.K} {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"', "whrk"[i], '"', ':', '[')
		for j, x := range xs {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendNumber(b, x)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendNumber appends x as encoding/json writes a float64.
func appendNumber(b []byte, x float64) []byte {
	switch abs := math.Abs(x); {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return append(b, '0')
	case x == math.Trunc(x) && abs < 1e15:
		return strconv.AppendInt(b, int64(x), 10)
	case abs != 0 && (abs < 1e-6 || abs >= 1e21):
		b = strconv.AppendFloat(b, x, 'e', -1, 64)
		// e-09 as e-9, as encoding/json writes it
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
		return b
	}
	return strconv.AppendFloat(b, x, 'f', -1, 64)
}

type fault struct {
	From    float64           `json:"from"`
	To      float64           `json:"to"`
	Fault   string            `json:"fault"`
	Targets []string          `json:"targets"`
	Params  map[string]string `json:"params,omitempty"`
	Outcome map[string]string `json:"outcome,omitempty"` // what its stop found
}

// plot holds series over buckets of time (Bucket seconds wide, starting at
// T): grants per second, and acquire latency p50 and p99 in ms (null where
// nothing was granted).
type plot struct {
	Bucket float64    `json:"bucket"`
	T      []float64  `json:"t"`
	Grants []float64  `json:"grants"`
	P50    []*float64 `json:"p50"`
	P99    []*float64 `json:"p99"`
}

type link struct {
	Name string `json:"name"`
	Href string `json:"href"`
}

func ms(ns int64) float64 { return math.Round(float64(ns)/1e5) / 10 }

var deletedBy = map[string]float64{histories.DeletedByRelease: 0, histories.DeletedByExpiry: 1, histories.DeletedByRevoke: 2, histories.DeletedByOther: 3}

// maxBuckets bounds the points of each plot: a plot's buckets are a second
// wide, or wider for a long history, so that its size follows the number
// of operations, not the time the history spans.
const maxBuckets = 2000

// fromHistory draws the model from the history the checks judged, and
// returns how the page names each process.
func fromHistory(h *checker.History) (model, func(histories.Process) string) {
	m := model{Lanes: map[string]lane{}, Clients: []string{}, Faults: []fault{}, Overlaps: [][]any{}, Links: []link{}, Checks: []check{}}
	start, end := h.Span()
	m.Start, m.End = ms(start), ms(max(end-1, start))

	// Who is who: the clients the process events name; without any, client
	// cN is process N (the workload's numbering). A process no event
	// names is no client's: it gets a lane of its own if it asked for a
	// lock, and otherwise (the final reads) none.
	names := h.Clients()
	acquired := map[histories.Process]bool{}
	for o := range h.Operations() {
		if o.F == histories.Acquire {
			acquired[o.Process] = true
		}
	}
	name := func(p histories.Process) string {
		switch c, ok := names[p]; {
		case ok:
			return c
		case len(names) > 0:
			return "process " + strconv.Itoa(int(p))
		}
		return "c" + strconv.Itoa(int(p))
	}
	laneOf := func(p histories.Process) (string, bool) {
		_, named := names[p]
		return name(p), named || acquired[p] || len(acquired) == 0
	}
	get := func(c string) lane {
		if l, ok := m.Lanes[c]; ok {
			return l
		}
		m.Clients = append(m.Clients, c)
		return lane{W: []float64{}, H: []float64{}, R: []float64{}, K: []float64{}}
	}
	for _, c := range names {
		m.Lanes[c] = get(c)
	}
	var grants []grant
	for o := range h.Operations() {
		c, drawn := laneOf(o.Process)
		if !drawn {
			if o.F == histories.Read && o.Status == histories.OK && o.HasValue && len(m.Reads) < maxReads {
				m.Reads = append(m.Reads, read{Key: o.Key, Value: o.Value, At: ms(o.Return), Process: int(o.Process)})
			}
			continue
		}
		l := get(c)
		p := float64(o.Process)
		switch o.F {
		case histories.Acquire:
			outcome := map[histories.Type]float64{histories.OK: 0, histories.Fail: 1, histories.Info: 2}[o.Status]
			if o.Missing {
				outcome = 3
			}
			l.W = append(l.W, ms(o.Call), ms(o.Return), outcome, float64(o.Invoked), p)
			if o.Status == histories.OK {
				grants = append(grants, grant{o.Return, o.Return - o.Call})
			}
		case histories.Read, histories.Write:
			if o.Missing {
				break
			}
			code := map[histories.Type]float64{histories.OK: 0, histories.Fail: 1, histories.Info: 2}[o.Status]
			if o.F == histories.Read {
				code += 3
			}
			l.R = append(l.R, ms(o.Return), code, float64(o.Completed), float64(o.Value))
		}
		m.Lanes[c] = l
	}
	an := h.Overlaps()
	for _, b := range an.Beliefs {
		c, _ := laneOf(histories.Process(b.Process))
		l := get(c)
		l.H = append(l.H, ms(b.From), ms(b.To), float64(b.Token), float64(b.AcquireIndex), float64(b.Process))
		m.Lanes[c] = l
	}
	for _, o := range an.Overlaps {
		m.Overlaps = append(m.Overlaps, []any{ms(o.From), ms(o.To), name(histories.Process(o.First.Process)), name(histories.Process(o.Second.Process)), o.Key, h.OverlapClass(o)})
	}
	// The server's truth, on the lane of the client it struck.
	truth := func(targets []string, t int64, code float64) {
		if len(targets) != 1 {
			return
		}
		if _, ok := m.Lanes[targets[0]]; !ok && !slices.Contains(m.Clients, targets[0]) {
			return // a target no lane shows
		}
		l := m.Lanes[targets[0]]
		l.K = append(l.K, ms(t), code)
		m.Lanes[targets[0]] = l
	}
	for _, d := range h.Deletions() {
		code, ok := deletedBy[d.By]
		if !ok {
			code = 4
		}
		truth(d.Targets, d.Time, code)
	}
	for _, l := range h.LeasesLost() {
		truth(l.Targets, l.Time, 5)
	}
	for _, f := range h.Faults() {
		m.Faults = append(m.Faults, fault{From: ms(f.Start), To: ms(f.End), Fault: f.Fault, Targets: f.Targets, Params: f.Params, Outcome: f.Outcome})
	}
	if t, ok := h.Heal(); ok {
		m.Faults = append(m.Faults, fault{From: ms(t), To: ms(t), Fault: histories.FHeal})
	}
	for _, e := range h.Events() {
		m.Faults = append(m.Faults, fault{From: ms(e.Start), To: ms(e.End), Fault: e.Fault, Targets: e.Targets, Params: e.Params})
	}
	slices.SortStableFunc(m.Faults, func(a, b fault) int { return cmp.Compare(a.From, b.From) })
	slices.Sort(m.Clients)
	for c, l := range m.Lanes { // items by start time, for the page's binary search
		l.W, l.H, l.R, l.K = sortedBy(l.W, 5), sortedBy(l.H, 5), sortedBy(l.R, 4), sortedBy(l.K, 2)
		m.Lanes[c] = l
	}
	m.Plot = plotOf(grants, start, end)
	return m, name
}

// maxReads bounds the reads by no client's process (the final reads) the
// page lists.
const maxReads = 20

// grant is when a grant returned, and how long it waited.
type grant struct {
	at   int64
	wait int64
}

// plotOf buckets the grants: per bucket (a second, or wider, 2, 5 or 10
// times over, so that there are at most maxBuckets), grants per second and
// the acquire latency p50 and p99. Its size follows the number of grants
// and maxBuckets, never the time the history spans.
func plotOf(grants []grant, start, end int64) plot {
	width := int64(time.Second)
	for step := 0; (end-start)/width > maxBuckets; step++ {
		f := []int64{2, 5, 2}[step%3] // 1, 2, 5, 10, 20, 50, ...
		if width > math.MaxInt64/f {
			width = math.MaxInt64
			break
		}
		width = width / []int64{1, 2, 5}[step%3] * []int64{2, 5, 10}[step%3]
	}
	p := plot{T: []float64{}, Grants: []float64{}, P50: []*float64{}, P99: []*float64{}, Bucket: float64(width) / float64(time.Second)}
	first := start - start%width
	slices.SortFunc(grants, func(a, b grant) int { return cmp.Compare(a.at, b.at) })
	i := 0
	for b := int64(0); ; b++ {
		from := first + b*width
		// The last bucket reaches the end of the history (or of int64).
		last := from > math.MaxInt64-width || from+width >= end || b > maxBuckets
		var waits []int64
		for ; i < len(grants) && (last || grants[i].at < from+width); i++ {
			waits = append(waits, grants[i].wait)
		}
		p.T = append(p.T, float64(from)/1e9)
		p.Grants = append(p.Grants, float64(len(waits))/p.Bucket)
		if len(waits) == 0 {
			p.P50, p.P99 = append(p.P50, nil), append(p.P99, nil)
		} else {
			slices.Sort(waits)
			p50, p99 := ms(waits[len(waits)/2]), ms(waits[min(len(waits)-1, len(waits)*99/100)])
			p.P50, p.P99 = append(p.P50, &p50), append(p.P99, &p99)
		}
		if last {
			break
		}
	}
	return p
}

// sortedBy sorts a flat array of records of n numbers by their first.
func sortedBy(xs []float64, n int) []float64 {
	recs := make([][]float64, 0, len(xs)/n)
	for i := 0; i+n <= len(xs); i += n {
		recs = append(recs, xs[i:i+n])
	}
	if slices.IsSortedFunc(recs, func(a, b []float64) int { return cmp.Compare(a[0], b[0]) }) {
		return xs
	}
	slices.SortStableFunc(recs, func(a, b []float64) int { return cmp.Compare(a[0], b[0]) })
	out := make([]float64, 0, len(xs))
	for _, r := range recs {
		out = append(out, r...)
	}
	return out
}
