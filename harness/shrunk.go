package harness

// Shrunk is what a run of a shrunk schedule (locktest shrink) records of
// where it came from, for its results and its report page.
type Shrunk struct {
	// From is the run directory of the failing run that was shrunk.
	From string `json:"from"`
	// Failure is the failure kept: a check ("resource"), or a promise of
	// the contract ("contract promise 4").
	Failure string `json:"failure"`
	// Summary says it in a line: "12 faults over 30 s → 1 fault (...) over
	// 8 s".
	Summary string `json:"summary"`
	// Removed describes the faults left out, Changed what changed in
	// those kept and in the run's settings.
	Removed []string `json:"removed"`
	Changed []string `json:"changed,omitempty"`
}
