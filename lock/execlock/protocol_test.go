package execlock

import "testing"

// A grant's session (protocol version 2) is read as the client wrote it;
// a reply without one, as version 1 wrote it, tells none; one of another
// type breaks the protocol.
func TestReplySession(t *testing.T) {
	l, err := parseLine([]byte(`{"id":3,"ok":true,"token":7,"key":"/l/lock-0000000001","session":"0x1000a3b2c0004"}`))
	if err != nil || l.Session != "0x1000a3b2c0004" || l.Key != "/l/lock-0000000001" {
		t.Errorf("a grant with its session: %+v, %v", l, err)
	}
	if l, err := parseLine([]byte(`{"id":3,"ok":true,"token":7}`)); err != nil || l.Session != "" {
		t.Errorf("a version-1 grant: session %q, %v", l.Session, err)
	}
	if _, err := parseLine([]byte(`{"id":3,"ok":true,"session":12}`)); err == nil {
		t.Error("a session that is a number: no error")
	}
}
