package harness

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/lock"
	"github.com/locktest/locktest/lock/execlock"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
	"github.com/locktest/locktest/workload"
)

// Play returns o set up to play catalog scenario sc (o.Backends.Catalog()
// holds them) with o's recipe, of any backend, a team's own or a lock in
// another process: the scenario's settings over o's (Apply), and the
// scenario itself (Stage). A caller may change the options before Run, as
// the CLI's flags override a scenario's.
func Play(o Options, sc scenario.Scenario) (Options, error) {
	if err := o.Apply(sc.Settings()); err != nil {
		return o, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	o.Stage(sc)
	return o, nil
}

// Stage makes the run play sc: its lesson and the verdicts it expects of
// the run's recipe and resource (Options.Scenario, once planned), and,
// unless o replays a schedule, its scripted schedule, drawn when the run is
// planned for the run's members, clients and TTL. It leaves the settings
// alone (see Apply).
func (o *Options) Stage(sc scenario.Scenario) {
	o.play = &sc
	o.Scenario = &Scenario{Name: sc.Name, Lesson: sc.Lesson, Bugs: sc.Bugs}
}

// Apply sets what s sets, as the command line's flags would: the run's
// size and times, its workload and think times, its guard, its required
// checks; its recipe, when o has none (s names a built-in); and its
// backend's system settings (by the backend's flag names), when o has no
// System of its own. o.Workload is best made from workload.DefaultConfig;
// o.Backends must be set.
func (o *Options) Apply(s scenario.Settings) error {
	if o.Backends == nil {
		return errNoBackends
	}
	w := &o.Workload
	if s.Recipe != "" && w.Recipe == nil {
		switch _, b, ok := o.Backends.Builtin(s.Recipe); {
		case ok:
			o.Backend = b.Name
		case execlock.IsSpec(s.Recipe) && s.Backend != "":
			o.Backend = s.Backend
		default:
			return fmt.Errorf("recipe %q is no built-in, nor an exec recipe with its backend", s.Recipe)
		}
	}
	if s.Workload != "" {
		w.Workload = s.Workload
	}
	if s.Items != 0 {
		w.Items = s.Items
	}
	if s.Clients != 0 {
		w.Clients = s.Clients
	}
	if s.TTL != 0 {
		w.TTL = s.TTL
	}
	if s.Think > 0 {
		w.ThinkMin, w.ThinkMax = s.ThinkMin, s.Think
	}
	if s.OpTimeout > 0 {
		w.OpTimeout = s.OpTimeout
	}
	if s.NoSlow {
		w.SlowShare = 0
	}
	if s.Guard != "" {
		w.Guard = s.Guard
	}
	if s.Time > 0 {
		o.Time = s.Time
	}
	if s.Quiet > 0 {
		o.Quiet = s.Quiet
	}
	if s.LivenessBound > 0 {
		o.LivenessBound = s.LivenessBound
	}
	if s.Require != nil {
		o.Required = slices.Sorted(slices.Values(s.Require))
	}
	if len(s.System) > 0 && o.System == nil {
		recipe := s.Recipe
		if w.Recipe != nil {
			recipe = w.Recipe.Name()
		}
		b, err := o.Backends.For(recipe, o.Backend)
		if err != nil {
			return err
		}
		fs := flag.NewFlagSet("scenario", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		flags := o.Backends.AddFlags(fs)
		for name, v := range s.System {
			if err := fs.Set(name, v); err != nil {
				return fmt.Errorf("--%s=%s: %w", name, v, err)
			}
		}
		if o.System, err = flags.OptionsOf(b, recipe, true); err != nil {
			return err
		}
	}
	if s.Recipe != "" && w.Recipe == nil {
		var r lock.Recipe
		var err error
		if execlock.IsSpec(s.Recipe) {
			r, err = execlock.Parse(s.Recipe)
		} else {
			r, err = o.Backends.NewRecipe(s.Recipe, o.System)
		}
		if err != nil {
			return err
		}
		w.Recipe = r
	}
	return nil
}

// stage completes the scenario the run plays, once its recipe, resource
// and system are known: the verdicts it expects of them, and its schedule
// unless o replays one, drawn for the members planned; p is the backend's
// plan of the run, which the schedule's faults may change (a failover needs
// a replica): it returns the system the backend plans then, or planned
// (the one before) when o replays a schedule.
func (o *Options) stage(p backend.Plan, planned backend.Planned) (backend.Planned, error) {
	sc := o.play
	o.Scenario = &Scenario{Name: sc.Name, Lesson: sc.Lesson, Expect: sc.Expected(o.RecipeName, string(o.Resource)), Bugs: sc.Bugs}
	if o.Schedule != nil {
		return planned, nil
	}
	s := sc.Schedule(o.Workload.Seed, scenario.Shape{Members: len(planned.Members), Clients: workload.ClientNames(o.Workload.Clients), TTL: time.Duration(o.Workload.TTL) * time.Second})
	o.Schedule = &s
	p.Members, p.Families = len(planned.Members), o.faultFamilies()
	staged, err := backend.PlanRun(o.System, p)
	s.Members = len(staged.Members)
	return staged, err
}

// Scenario is a catalog scenario as a run plays it (package scenario holds
// the catalog): what it teaches and the verdicts it expects of this run's
// resource and recipe.
type Scenario struct {
	Name   string            `json:"name"`
	Lesson string            `json:"lesson"`
	Expect map[string]string `json:"expect"` // check name: verdict
	// Bugs are the upstream bugs the scenario reproduces (with the
	// recipes that show them).
	Bugs []scenario.Bug `json:"bugs,omitempty"`
	// Met says whether every expected check came out as expected; Missed
	// are those that did not. Both are set once the run is checked.
	Met    *bool  `json:"met,omitempty"`
	Missed []Miss `json:"missed,omitempty"`
	// Unstaged says why the run did not stage what the scenario shows: a
	// fault of its script whose moment never came (its param missed, as
	// a pause until a grant that no client was granted). A check found
	// valid where the scenario expects a violation then tells nothing of
	// the lock: the exit is unknown, not a miss.
	Unstaged string `json:"unstaged,omitempty"`
	// Exit is the scenario run's exit status, by its expectations: 0 when
	// every check came out as it expects, harm included (an unfenced
	// resource found invalid); 1 when one came out otherwise; 2 when one
	// was unknown or not checked (a definite miss outweighs an unknown
	// one, as a violation an unknown check). This is what a CI job wants
	// of a scenario; the run's own verdict and exit stay in Results.
	Exit *int `json:"exit,omitempty"`
}

// Miss is an expected check that came out otherwise: Got is its verdict,
// empty if it was not checked.
type Miss struct {
	Check string `json:"check"`
	Got   string `json:"got"`
	Want  string `json:"want"`
}

func (m Miss) String() string {
	if m.Got == "" {
		return fmt.Sprintf("%s was not checked, expected %s", m.Check, m.Want)
	}
	return fmt.Sprintf("%s is %s, expected %s", m.Check, m.Got, m.Want)
}

// MissedText lists the misses in a line.
func (s *Scenario) MissedText() string {
	var out []string
	for _, m := range s.Missed {
		out = append(out, m.String())
	}
	return strings.Join(out, "; ")
}

// ExpectText lists the expected verdicts in order of check name:
// "resource invalid, invariant valid".
func (s *Scenario) ExpectText() string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(s.Expect)) {
		out = append(out, name+" "+s.Expect[name])
	}
	return strings.Join(out, ", ")
}

// unstruck are the entries of the script sched that never struck (the
// run ended while one waited for its moment, and nothing was recorded of
// it), each as a fault that missed: a scenario whose staging never came
// is unknown, not a miss (zk-ghost-node, whose strike found its holder
// too late at load 60, said NOT as expected of a run with no fault).
func unstruck(sched *nemesis.Schedule, fired []nemesis.Fired) []nemesis.Fired {
	if sched == nil {
		return nil
	}
	var out []nemesis.Fired
	for i, e := range sched.Entries {
		if !slices.ContainsFunc(fired, func(f nemesis.Fired) bool { return f.Entry == i }) {
			out = append(out, nemesis.Fired{Entry: i, Fault: e.Fault, Params: map[string]string{"missed": "the run ended before it struck"}})
		}
	}
	return out
}

// judge returns a copy of s with the verdicts of checks compared to what it
// expects, given the faults the run fired; nil for a run that plays no
// scenario.
func (s *Scenario) judge(checks []checker.Result, faults []nemesis.Fired) *Scenario {
	if s == nil {
		return nil
	}
	out := *s
	out.Missed, out.Unstaged = nil, ""
	var unstaged []string
	for _, f := range faults {
		if why := f.Params["missed"]; why != "" {
			unstaged = append(unstaged, f.Fault+": "+why)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Expect)) {
		want := s.Expect[name]
		got := ""
		if i := slices.IndexFunc(checks, func(c checker.Result) bool { return c.Name == name }); i >= 0 {
			got = string(checks[i].Verdict)
		}
		if got != want {
			out.Missed = append(out.Missed, Miss{Check: name, Got: got, Want: want})
		}
	}
	met := len(out.Missed) == 0
	out.Met = &met
	code := ExitValid
	for _, m := range out.Missed {
		// A violation the staging was to bring about, missing where it
		// did not happen.
		untold := len(unstaged) > 0 && m.Got == string(checker.Valid) && m.Want == string(checker.Invalid)
		if untold {
			out.Unstaged = strings.Join(unstaged, "; ")
		}
		switch {
		case m.Got != "" && m.Got != string(checker.Unknown) && !untold:
			code = ExitInvalid
		case code == ExitValid:
			code = ExitUnknown
		}
	}
	out.Exit = &code
	return &out
}
