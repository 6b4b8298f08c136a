package execlock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Version is the protocol's version, as the history's setup event records
// it (exec_protocol) and LOCKTEST_PROTOCOL tells the client.
const Version = 2

// request is one line locktest writes on the client's stdin.
type request struct {
	ID        int64  `json:"id"`
	Op        string `json:"op"`
	Lock      string `json:"lock"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"`
}

// The ops.
const (
	opAcquire = "acquire"
	opRelease = "release"
)

// line is one line the client wrote on its stdout, as read: a reply to
// the request in flight, or an event.
type line struct {
	// Event is the event's name ("lost"), "" for a reply.
	Event string
	// Lock is the lock an event is about.
	Lock string
	reply
}

// reply is a reply to a request.
type reply struct {
	ID int64
	OK bool
	// Token is the grant's fencing token; HasToken is false when the
	// reply gave none.
	Token    int64
	HasToken bool
	// Key is the key or node the grant holds, if the reply says.
	Key string
	// Revision is the newest revision of the server's state the lock
	// read before it granted, if the reply says (0: it does not).
	Revision int64
	// Session is the session the client's lock was on when it answered
	// the grant, as the service names it, if the reply says (protocol
	// version 2).
	Session string
	// Error and Definite are a failure's: Definite says it surely had no
	// effect.
	Error    string
	Definite bool
}

// EventLost is the event a client sends when it learns it lost a lock it
// holds.
const EventLost = "lost"

// errLine is a line that is not the protocol's; its text says why.
type errLine struct{ why string }

func (e *errLine) Error() string { return e.why }

func badLine(format string, args ...any) error { return &errLine{fmt.Sprintf(format, args...)} }

// parseLine reads one line of a client's output. Fields it does not know
// are ignored; a field it knows with the wrong type is an error.
func parseLine(b []byte) (line, error) {
	var raw map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&raw); err != nil || raw == nil {
		return line{}, badLine("not a JSON object")
	}
	if d.More() {
		return line{}, badLine("more than one JSON value on the line")
	}
	var l line
	if ev, ok := raw["event"]; ok {
		if err := json.Unmarshal(ev, &l.Event); err != nil || l.Event == "" {
			return line{}, badLine(`"event" is not a name`)
		}
		if err := str(raw, "lock", &l.Lock); err != nil {
			return line{}, err
		}
		if _, ok := raw["id"]; ok {
			return line{}, badLine(`an event with an "id"`)
		}
		return l, nil
	}
	idRaw, ok := raw["id"]
	if !ok {
		return line{}, badLine(`neither a reply (no "id") nor an event (no "event")`)
	}
	id, err := integer(idRaw)
	if err != nil {
		return line{}, badLine(`"id" %v`, err)
	}
	l.ID = id
	okRaw, ok := raw["ok"]
	if !ok || json.Unmarshal(okRaw, &l.OK) != nil {
		return line{}, badLine(`a reply without "ok": true or false`)
	}
	if t, ok := raw["token"]; ok && !null(t) {
		if l.Token, err = integer(t); err != nil {
			return line{}, badLine(`"token" %v`, err)
		}
		l.HasToken = true
	}
	if r, ok := raw["revision"]; ok && !null(r) {
		if l.Revision, err = integer(r); err != nil || l.Revision < 0 {
			return line{}, badLine(`"revision" is not a revision`)
		}
	}
	if err := str(raw, "key", &l.Key); err != nil {
		return line{}, err
	}
	if err := str(raw, "session", &l.Session); err != nil {
		return line{}, err
	}
	if err := str(raw, "error", &l.Error); err != nil {
		return line{}, err
	}
	if d, ok := raw["definite"]; ok && !null(d) {
		if json.Unmarshal(d, &l.Definite) != nil {
			return line{}, badLine(`"definite" is not true or false`)
		}
	}
	return l, nil
}

func null(r json.RawMessage) bool { return string(bytes.TrimSpace(r)) == "null" }

// str reads an optional string field.
func str(raw map[string]json.RawMessage, name string, to *string) error {
	r, ok := raw[name]
	if !ok || null(r) {
		return nil
	}
	if json.Unmarshal(r, to) != nil {
		return badLine("%q is not a string", name)
	}
	return nil
}

// integer reads a JSON number that is a whole number in int64's range
// (1234, 1.234e3 and 1234.0 alike).
func integer(r json.RawMessage) (int64, error) {
	var n json.Number
	if json.Unmarshal(r, &n) != nil {
		return 0, errors.New("is not a number")
	}
	if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
		return i, nil
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) >= 1<<63 {
		return 0, errors.New("is not a whole number")
	}
	return int64(f), nil
}

// quote is a line as an error message shows it: quoted, cut to a length a
// line can hold.
func quote(b []byte) string {
	const max = 200
	s := string(b)
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strconv.Quote(strings.TrimRight(s, "\r"))
}
