package report

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
)

// model is what the page draws, as compact JSON: times in milliseconds
// since the run started, items as flat number arrays (a 1-hour run holds
// some 120,000 grants, so every byte per item counts).
type model struct {
	Meta     meta            `json:"meta"`
	Checks   []check         `json:"checks"`
	Clients  []string        `json:"clients"`
	Start    float64         `json:"start"`
	End      float64         `json:"end"`
	Lanes    map[string]lane `json:"lanes"`
	Faults   []fault         `json:"faults"`
	Overlaps [][]any         `json:"overlaps"` // [from, to, clientA, clientB, key]
	Plot     plot            `json:"plot"`
	Links    []link          `json:"links"`
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

type fault struct {
	From    float64           `json:"from"`
	To      float64           `json:"to"`
	Fault   string            `json:"fault"`
	Targets []string          `json:"targets"`
	Params  map[string]string `json:"params,omitempty"`
}

// plot holds per-second series: grants, and acquire latency p50 and p99 in
// ms (null where nothing was granted that second).
type plot struct {
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

// builder turns a history, read once, into the model.
type builder struct {
	m        model
	clientOf map[histories.Process]string
	inflight map[histories.Process]histories.Op
	holding  map[histories.Process][]float64 // the open hold's [from, token, index]
	waits    map[int][]time.Duration         // per second: acquire latencies
	grants   map[int]int
	open     map[string]int // open fault windows by fault|targets
	setup    map[string]string
	named    bool // the history has process events
	first    int64
	seen     bool
	end      int64
}

func newBuilder() *builder {
	return &builder{
		m:        model{Lanes: map[string]lane{}, Faults: []fault{}, Overlaps: [][]any{}, Links: []link{}, Checks: []check{}},
		clientOf: map[histories.Process]string{}, inflight: map[histories.Process]histories.Op{},
		holding: map[histories.Process][]float64{}, waits: map[int][]time.Duration{}, grants: map[int]int{},
		open: map[string]int{}, setup: map[string]string{},
	}
}

func (b *builder) client(p histories.Process) string {
	if c, ok := b.clientOf[p]; ok {
		return c
	}
	// Without process events, client cN is process N (the workload's
	// numbering); with them, a process they do not name is no client's
	// (the final reads).
	c := "c" + strconv.Itoa(int(p))
	if b.named {
		c = "process " + strconv.Itoa(int(p))
	}
	b.clientOf[p] = c
	return c
}

func (b *builder) lane(c string) lane {
	l, ok := b.m.Lanes[c]
	if !ok {
		b.m.Clients = append(b.m.Clients, c)
		l = lane{W: []float64{}, H: []float64{}, R: []float64{}, K: []float64{}}
		b.m.Lanes[c] = l
	}
	return l
}

func (b *builder) add(op histories.Op) {
	if !b.seen {
		b.first, b.seen = op.Time, true
	}
	b.end = max(b.end, op.Time)
	if op.Process == histories.Nemesis {
		b.nemesis(op)
		return
	}
	if op.Type == histories.Invoke {
		b.inflight[op.Process] = op
		if op.F == histories.Release {
			b.closeHold(op.Process, op.Time)
		}
		return
	}
	inv := b.inflight[op.Process]
	delete(b.inflight, op.Process)
	c := b.client(op.Process)
	l := b.lane(c)
	p := float64(op.Process)
	switch op.F {
	case histories.Acquire:
		outcome := map[histories.Type]float64{histories.OK: 0, histories.Fail: 1, histories.Info: 2}[op.Type]
		l.W = append(l.W, ms(inv.Time), ms(op.Time), outcome, float64(inv.Index), p)
		if op.Type == histories.OK {
			tok, _ := op.Token()
			b.holding[op.Process] = []float64{ms(op.Time), float64(tok), float64(op.Index)}
			sec := int(op.Time / int64(time.Second))
			b.grants[sec]++
			b.waits[sec] = append(b.waits[sec], time.Duration(op.Time-inv.Time))
		}
	case histories.Read, histories.Write:
		code := map[histories.Type]float64{histories.OK: 0, histories.Fail: 1, histories.Info: 2}[op.Type]
		if op.F == histories.Read {
			code += 3
		}
		v, ok := op.Val()
		if !ok {
			v, _ = inv.Val()
		}
		l.R = append(l.R, ms(op.Time), code, float64(op.Index), float64(v))
	}
	b.m.Lanes[c] = l
}

func (b *builder) closeHold(p histories.Process, at int64) {
	h, ok := b.holding[p]
	if !ok {
		return
	}
	delete(b.holding, p)
	c := b.client(p)
	l := b.lane(c)
	l.H = append(l.H, h[0], ms(at), h[1], h[2], float64(p))
	b.m.Lanes[c] = l
}

func (b *builder) nemesis(op histories.Op) {
	v := op.Value
	if v == nil {
		v = &histories.Value{}
	}
	target := ""
	if len(v.Targets) == 1 {
		target = v.Targets[0]
	}
	switch op.F {
	case histories.FProcess:
		if p, err := strconv.Atoi(v.Params["process"]); err == nil && target != "" {
			b.named = true
			b.clientOf[histories.Process(p)] = target
			b.lane(target)
		}
	case histories.FSetup:
		for k, val := range v.Params {
			b.setup[k] = val
		}
	case histories.FObserved, histories.FLockerFailed, histories.FEnd:
	case histories.FKeyDeleted, histories.FLeaseLost:
		if target == "" {
			return
		}
		code, ok := deletedBy[v.Params["by"]]
		if !ok {
			code = 4
		}
		if op.F == histories.FLeaseLost {
			code = 5
		}
		l := b.lane(target)
		l.K = append(l.K, ms(op.Time), code)
		b.m.Lanes[target] = l
	case histories.FStart:
		b.open[v.Fault+"|"+fmt.Sprint(v.Targets)] = len(b.m.Faults)
		b.m.Faults = append(b.m.Faults, fault{From: ms(op.Time), To: -1, Fault: v.Fault, Targets: v.Targets, Params: v.Params})
	case histories.FStop:
		id := v.Fault + "|" + fmt.Sprint(v.Targets)
		if i, ok := b.open[id]; ok {
			b.m.Faults[i].To = ms(op.Time)
			delete(b.open, id)
		}
	case histories.FHeal:
		for id, i := range b.open {
			b.m.Faults[i].To = ms(op.Time)
			delete(b.open, id)
		}
		b.m.Faults = append(b.m.Faults, fault{From: ms(op.Time), To: ms(op.Time), Fault: histories.FHeal, Targets: v.Targets})
	default:
		b.m.Faults = append(b.m.Faults, fault{From: ms(op.Time), To: ms(op.Time), Fault: cmp.Or(v.Fault, op.F), Targets: v.Targets, Params: v.Params})
	}
}

// finish closes what is still open at the end and computes the plots.
func (b *builder) finish() {
	b.m.Start, b.m.End = ms(b.first), ms(b.end)
	for p := range b.holding {
		b.closeHold(p, b.end)
	}
	for p, inv := range b.inflight {
		if inv.F == histories.Acquire {
			c := b.client(p)
			l := b.lane(c)
			l.W = append(l.W, ms(inv.Time), ms(b.end), 3, float64(inv.Index), float64(p))
			b.m.Lanes[c] = l
		}
	}
	for i := range b.m.Faults {
		if b.m.Faults[i].To < 0 {
			b.m.Faults[i].To = b.m.End
		}
	}
	slices.Sort(b.m.Clients)
	b.m.Clients = slices.Compact(b.m.Clients)
	for c, l := range b.m.Lanes { // items by start time, for the page's binary search
		l.W, l.H = sortedBy(l.W, 5), sortedBy(l.H, 5)
		b.m.Lanes[c] = l
	}
	for s := int(b.first / int64(time.Second)); s <= int(b.end/int64(time.Second)); s++ {
		b.m.Plot.T = append(b.m.Plot.T, float64(s))
		b.m.Plot.Grants = append(b.m.Plot.Grants, float64(b.grants[s]))
		w := b.waits[s]
		if len(w) == 0 {
			b.m.Plot.P50, b.m.Plot.P99 = append(b.m.Plot.P50, nil), append(b.m.Plot.P99, nil)
			continue
		}
		slices.Sort(w)
		p50, p99 := ms(int64(w[len(w)/2])), ms(int64(w[min(len(w)-1, len(w)*99/100)]))
		b.m.Plot.P50, b.m.Plot.P99 = append(b.m.Plot.P50, &p50), append(b.m.Plot.P99, &p99)
	}
}

// sortedBy sorts a flat array of records of n numbers by their first.
func sortedBy(xs []float64, n int) []float64 {
	recs := make([][]float64, 0, len(xs)/n)
	for i := 0; i+n <= len(xs); i += n {
		recs = append(recs, xs[i:i+n])
	}
	slices.SortStableFunc(recs, func(a, b []float64) int { return cmp.Compare(a[0], b[0]) })
	out := make([]float64, 0, len(xs))
	for _, r := range recs {
		out = append(out, r...)
	}
	return out
}

// readHistory streams the history into the model and the checker's
// compact form (for the overlaps).
func readHistory(path string) (*builder, *checker.History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, cb := newBuilder(), checker.NewBuilder()
	r := histories.NewReader(f, path)
	for {
		op, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		b.add(op)
		if err := cb.Add(op); err != nil {
			return nil, nil, err
		}
	}
	b.finish()
	return b, cb.Finish(), nil
}
