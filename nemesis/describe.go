package nemesis

import "strings"

// Describe says in words what a fault of kind fault did to its targets, for
// the checks' stories ("c4 was paused"); false for a kind it does not know.
func Describe(fault string, targets []string) (string, bool) {
	t := strings.Join(targets, ", ")
	if t == "" {
		t = "the cluster"
	}
	switch fault {
	case PauseClient:
		return t + " was paused", true
	case PauseMember:
		return "member " + t + " was paused", true
	case PartitionLeader:
		return "the leader " + t + " was partitioned away", true
	case Isolate, PartitionOne, PartitionMajority:
		return t + " was isolated", true
	case LeaseStarve:
		return "lease renewals of " + t + " were starved", true
	case LeaseRevoke:
		return "the lease of " + t + " was revoked", true
	case ClockBump:
		return "the clock of " + t + " was bumped", true
	case ClockStrobe:
		return "the clock of " + t + " was strobed", true
	case ClockRate:
		return "the clock of " + t + " ran at a skewed rate", true
	case CrashMember, CrashLeader, CrashClient:
		return t + " was crashed", true
	case Slow:
		return "the network of " + t + " was slowed", true
	}
	return "", false
}
