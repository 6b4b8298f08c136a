package harness

import (
	"path/filepath"
	"strconv"
	"strings"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/shellwords"
	"github.com/locktest/locktest/lock/execlock"
	"github.com/locktest/locktest/nemesis"
)

// Reproduce is the command that runs o (planned: NewPlan) again: its
// flags and its backend's, its seed, and the schedule its run directory
// holds (a scenario's too). args are its words after "locktest", as the
// program receives them; command is the line a shell reads them from. A
// planned run records them in its results.
func Reproduce(o Options) (args []string, command string) {
	_, _, builtin := o.Backends.Builtin(o.recipe())
	var system []string
	if o.System != nil {
		system = o.System.Args(o.Members)
	}
	return reproduce(o, builtin, system)
}

// reproduce is Reproduce's command for a run of o whose recipe is a
// built-in or not, and whose backend's options are given by the flags
// system.
func reproduce(o Options, builtin bool, system []string) (args []string, command string) {
	w := o.Workload
	args = []string{"run"}
	if o.Scenario != nil {
		args = []string{"scenario", "run", o.Scenario.Name}
	}
	args = append(args, "--recipe", o.recipe())
	if !builtin && o.Backend != "" {
		args = append(args, "--backend", o.Backend)
	}
	if r, ok := w.Recipe.(*execlock.Recipe); ok && r.Clock != execlock.ClockAuto {
		args = append(args, "--exec-clock", r.Clock.String())
	}
	args = append(args, "--resource", string(o.Resource), "--workload", w.Workload,
		"--clients", strconv.Itoa(w.Clients), "--locks", strconv.Itoa(len(w.Locks)), "--ttl", strconv.Itoa(w.TTL),
		"--think-min", w.ThinkMin.String(), "--think", w.ThinkMax.String(), "--op-timeout", w.OpTimeout.String(),
		"--guard", w.Guard, "--time", o.Time.String(), "--quiet", o.Quiet.String(),
		"--liveness-bound", o.LivenessBound.String(), "--require", strings.Join(o.Required, ","))
	args = append(args, system...)
	lo, hi := w.SlowRange()
	args = append(args, "--slow-share", strconv.FormatFloat(w.SlowShare, 'g', -1, 64), "--slow-think", lo.String()+"-"+hi.String())
	if w.Workload == histories.WorkloadStock {
		args = append(args, "--items", strconv.Itoa(w.Items))
	}
	args = append(args, "--seed", strconv.FormatInt(w.Seed, 10))
	switch {
	case o.Schedule != nil || len(o.Nemesis.Faults) > 0:
		if len(o.Nemesis.Faults) > 0 {
			args = append(args, "--nemesis", strings.Join(o.Nemesis.Faults, ","))
		}
		if len(o.Nemesis.Steer) > 0 {
			// Beside the schedule: the seed and the cells redraw it.
			args = append(args, "--steer", nemesis.CellKeys(o.Nemesis.Steer))
		}
		args = append(args, "--schedule", filepath.Join(o.Dir, "schedule.json"))
	default:
		args = append(args, "--nemesis", "none")
	}
	return args, "locktest " + shellwords.Join(args)
}

// recipe names the recipe under test: the plan's name, else the recipe's.
func (o Options) recipe() string {
	if o.RecipeName == "" && o.Workload.Recipe != nil {
		return o.Workload.Recipe.Name()
	}
	return o.RecipeName
}
