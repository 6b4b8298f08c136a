package zookeeper

import "testing"

// A session a lock tells is written as the observer writes a node's owner,
// with or without ZooKeeper's 0x, in either case; anything else is not
// taken (its grant is then not judged by promise 8).
func TestToldSession(t *testing.T) {
	for in, want := range map[string]string{
		"0x1000467904a0002":  sessionHex(0x1000467904a0002),
		"1000467904A0002":    sessionHex(0x1000467904a0002),
		"0xffffffffffffffff": sessionHex(-1),
		"":                   "",
		"session 7":          "",
	} {
		if got := toldSession(in); got != want {
			t.Errorf("toldSession(%q) = %q, want %q", in, got, want)
		}
	}
}
