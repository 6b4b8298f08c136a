package shrink

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/harness"
	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/nemesis"
)

// Target is the failure a shrunk schedule must keep: a check invalid and,
// if Kind is set, a violation of that kind (a broken promise of the
// contract check: "promise 4").
type Target struct {
	Check string
	Kind  string
}

func (t Target) String() string {
	if t.Kind == "" {
		return t.Check
	}
	return t.Check + " " + t.Kind
}

// In says whether checks show the target failure.
func (t Target) In(checks []checker.Result) bool {
	_, ok := t.violations(checks)
	return ok
}

// violations are the target check's violations of the target kind, and
// whether the check failed so.
func (t Target) violations(checks []checker.Result) ([]checker.Violation, bool) {
	i := slices.IndexFunc(checks, func(c checker.Result) bool { return c.Name == t.Check })
	if i < 0 || checks[i].Verdict != checker.Invalid {
		return nil, false
	}
	vs := checks[i].Violations
	if t.Kind != "" {
		vs = slices.DeleteFunc(slices.Clone(vs), func(v checker.Violation) bool { return v.Kind != t.Kind })
		return vs, len(vs) > 0
	}
	return vs, true
}

// ChooseTarget picks the failure to keep from a run's results: spec names a
// check ("mutex"), or a promise of the contract check ("contract:4"); empty,
// the first required check that failed (for contract, its first broken
// promise). It says why when the run has no such failure.
func ChooseTarget(res *harness.Results, spec string) (Target, error) {
	var t Target
	if spec == "" {
		i := slices.IndexFunc(res.Checks, func(c checker.Result) bool {
			return c.Verdict == checker.Invalid && slices.Contains(res.Required, c.Name)
		})
		if i < 0 {
			return t, errNoFailure
		}
		t.Check = res.Checks[i].Name
		if t.Check == histories.CheckContract && len(res.Checks[i].Violations) > 0 {
			t.Kind = res.Checks[i].Violations[0].Kind
		}
		return t, nil
	}
	name, promise, hasPromise := strings.Cut(spec, ":")
	t.Check = name
	if !slices.Contains(checker.Names(), name) {
		return t, fmt.Errorf("--check %q: want one of %s, or contract:N for a promise", spec, strings.Join(checker.Names(), ", "))
	}
	if hasPromise {
		if name != histories.CheckContract {
			return t, fmt.Errorf("--check %q: only the contract check has promises", spec)
		}
		t.Kind = "promise " + strings.TrimPrefix(promise, "promise ")
	}
	if !t.In(res.Checks) {
		return t, fmt.Errorf("--check %s: the run did not fail it", t)
	}
	return t, nil
}

// errNoFailure is ChooseTarget's error for a run whose required checks did
// not fail.
var errNoFailure = errors.New("no required check failed")

// IsNoFailure says whether err is ChooseTarget's for a run with no
// required check failed.
func IsNoFailure(err error) bool { return errors.Is(err, errNoFailure) }

// Observe reads what a checked run showed of target: whether it failed so,
// when, which schedule entries struck when, and which were in force during
// the failure. history is the run's history file.
func Observe(res *harness.Results, history string, target Target) (Observation, error) {
	var o Observation
	vs, failed := target.violations(res.Checks)
	o.Failed = failed
	var fired []nemesis.Fired
	if res.Run != nil && res.Run.Nemesis != nil {
		fired = res.Run.Nemesis.Faults
	}
	starts, heal, err := faultEvents(history)
	if err != nil {
		return o, err
	}
	// A fault's start is in the history (history time) and in the
	// nemesis' report (since the fault phase began), in the same order.
	var offset int64
	if len(starts) > 0 && len(fired) > 0 {
		offset = starts[0].time - int64(fired[0].Start)
	}
	entries := 0
	for _, f := range fired {
		entries = max(entries, f.Entry+1)
	}
	// The fault phase ended when the final heal began: a fault stopped
	// then was cut short.
	end := time.Duration(-1)
	if heal >= 0 && res.Run != nil && res.Run.Nemesis != nil {
		end = time.Duration(heal-offset) - res.Run.Nemesis.Heal
	}
	o.Struck = make([]Window, entries)
	for _, f := range fired {
		o.Struck[f.Entry] = Window{Struck: true, Start: f.Start, Stop: f.Stop, Targets: f.Targets, Cut: end >= 0 && f.Stop >= end}
	}
	first := -1
	for i, v := range vs {
		if v.To > 0 && (first < 0 || v.To < vs[first].To) {
			first = i
		}
	}
	if !failed || first < 0 {
		return o, nil
	}
	v := vs[first]
	o.Violation = max(time.Duration(v.To-offset), time.Nanosecond)
	for _, f := range v.Faults {
		p := slices.IndexFunc(starts, func(s startEvent) bool { return s.index == f.Index })
		if p >= 0 && p < len(fired) && !slices.Contains(o.Suspects, fired[p].Entry) {
			o.Suspects = append(o.Suspects, fired[p].Entry)
		}
	}
	slices.Sort(o.Suspects)
	return o, nil
}

type startEvent struct {
	index int
	time  int64
}

// faultEvents reads the history's fault starts, in order, and the time of
// the final heal (-1: none).
func faultEvents(path string) (starts []startEvent, heal int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, -1, err
	}
	defer f.Close()
	heal = -1
	r := histories.NewReader(f, path)
	for {
		op, err := r.Next()
		if err == io.EOF {
			return starts, heal, nil
		}
		if err != nil {
			return nil, -1, err
		}
		switch {
		case op.Process != histories.Nemesis:
		case op.F == histories.FStart:
			starts = append(starts, startEvent{op.Index, op.Time})
		case op.F == histories.FHeal:
			heal = op.Time
		}
	}
}
