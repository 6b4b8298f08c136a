// Package histories defines locktest's history format: JSON Lines, one
// operation per line, with Jepsen's field names. The format is pinned; other
// tools and the curated histories depend on it.
package histories

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Type is the kind of an operation record.
type Type string

// Operation types, as in Jepsen.
const (
	Invoke Type = "invoke"
	OK     Type = "ok"
	Fail   Type = "fail"
	// Info means the outcome is unknown (a timeout, a lost connection).
	Info Type = "info"
)

func (t Type) valid() bool {
	switch t {
	case Invoke, OK, Fail, Info:
		return true
	}
	return false
}

// Client operation functions.
const (
	Acquire = "acquire"
	Release = "release"
	Read    = "read"
	Write   = "write"
)

// SectionEnd is no operation of a history: it names, for a hook a fault
// arms on a client (nemesis.Clients.Intercept), the end of a holder's
// critical section, after its write, before it invokes its release.
const SectionEnd = "section-end"

// Process identifies who performed an operation: a client process number, or
// the nemesis. It is written as an integer, or as the string "nemesis".
type Process int

// Nemesis is the process of fault events.
const Nemesis Process = -1

// MarshalJSON writes the nemesis as "nemesis" and clients as integers.
func (p Process) MarshalJSON() ([]byte, error) {
	if p == Nemesis {
		return []byte(`"nemesis"`), nil
	}
	return strconv.AppendInt(nil, int64(p), 10), nil
}

// UnmarshalJSON accepts a non-negative integer or "nemesis" (in any of
// JSON's spellings of that string, escapes included).
func (p *Process) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) > 0 && b[0] == '"' && json.Unmarshal(b, &s) == nil && s == "nemesis" {
		*p = Nemesis
		return nil
	}
	n, err := strconv.Atoi(string(b))
	if err != nil || n < 0 {
		return fmt.Errorf("process must be a non-negative integer or \"nemesis\", got %s", b)
	}
	*p = Process(n)
	return nil
}

func (p Process) String() string {
	if p == Nemesis {
		return "nemesis"
	}
	return strconv.Itoa(int(p))
}

// Value is an operation's value. Which fields are set depends on f and type:
// acquire ok has Token and, in histories that record it, Revision; write has
// Token and Value; read ok has Value. Nemesis events use Fault, Targets and
// Params.
type Value struct {
	Token *int64 `json:"token,omitempty"`
	Value *int64 `json:"value,omitempty"`
	// Revision is, for an acquire ok, the grant's decision revision: the
	// revision of the response the lock decided on, where it says, else
	// the newest revision the client's lock had read from the server when
	// Acquire returned (on a server that orders its changes by revisions).
	Revision *int64 `json:"revision,omitempty"`
	// RevisionMax is, for an acquire ok, an upper bound on the decision
	// revision that does not depend on the lock's word: the revision of a
	// linearizable read locktest made past every client's link after
	// Acquire returned. The decision was at or before it; it is never the
	// decision itself.
	RevisionMax *int64 `json:"revision_max,omitempty"`
	// ClaimCreated is, for an acquire ok without a token, its claim's
	// creation point read from the servers after the reply (ZooKeeper: the
	// czxid of the grant's own sequential znode, a name never reused): the
	// contract check takes it where it takes a token for the claim's
	// create revision, never as a token.
	ClaimCreated *int64 `json:"claim_created,omitempty"`
	// Claim is, for an acquire ok, the key the grant holds, when the lock
	// says (lock.Keyed) and its backend records it: its deletion (a
	// key-deleted event whose create_revision is the token) ends the
	// grant's claim on the server.
	Claim string `json:"claim,omitempty"`
	// Session is, for an acquire ok, the session the lock says it was on
	// when it answered the grant (lock.Sessioned), written as the
	// key-deleted events write leases: the claim should be that
	// session's.
	Session string `json:"session,omitempty"`

	Fault   string   `json:"fault,omitempty"`
	Targets []string `json:"targets,omitempty"`
	Params  Params   `json:"params,omitempty"`
}

// Params are a nemesis event's parameters. They are written as a JSON object
// of strings; a reader also accepts numbers, booleans and null as values
// (kept as their JSON text, null as ""), so hand-written histories may write
// {"revision": 12}.
type Params map[string]string

// UnmarshalJSON accepts an object whose values are strings or other JSON
// scalars.
func (p *Params) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("params must be an object of strings or numbers: %w", err)
	}
	if raw == nil {
		*p = nil
		return nil
	}
	out := make(Params, len(raw))
	for k, v := range raw {
		v = bytes.TrimSpace(v)
		switch {
		case len(v) > 0 && v[0] == '"':
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return err
			}
			out[k] = s
		case len(v) > 0 && (v[0] == '{' || v[0] == '['):
			return fmt.Errorf("params: value of %q must be a string or a number, got %s", k, v)
		case string(v) == "null":
			out[k] = ""
		default:
			out[k] = string(v)
		}
	}
	*p = out
	return nil
}

// Op is one line of a history.
type Op struct {
	Index   int     `json:"index"`
	Type    Type    `json:"type"`
	F       string  `json:"f"`
	Process Process `json:"process"`
	// Time is nanoseconds since the run started.
	Time int64 `json:"time"`
	// Key is the lock's key, "" for an operation that carries none.
	Key   string `json:"key,omitempty"`
	Value *Value `json:"value,omitempty"`
	Error string `json:"error,omitempty"`
}

// Token returns the op's fencing token, if it carries one.
func (o Op) Token() (int64, bool) {
	if o.Value == nil || o.Value.Token == nil {
		return 0, false
	}
	return *o.Value.Token, true
}

// Val returns the op's data value, if it carries one.
func (o Op) Val() (int64, bool) {
	if o.Value == nil || o.Value.Value == nil {
		return 0, false
	}
	return *o.Value.Value, true
}

// Revision returns an acquire's decision revision, if the op carries one.
func (o Op) Revision() (int64, bool) {
	if o.Value == nil || o.Value.Revision == nil {
		return 0, false
	}
	return *o.Value.Revision, true
}

// RevisionBound returns an acquire's upper bound on its decision revision
// (RevisionMax), if the op carries one.
func (o Op) RevisionBound() (int64, bool) {
	if o.Value == nil || o.Value.RevisionMax == nil {
		return 0, false
	}
	return *o.Value.RevisionMax, true
}

// GrantValue builds the value of an acquire ok: the token, the claim's key
// (if known) and, if rev > 0, the decision revision.
func GrantValue(token, rev int64, claim string) *Value {
	v := &Value{Token: &token, Claim: claim}
	if rev > 0 {
		v.Revision = &rev
	}
	return v
}

// TokenValue builds a Value holding a token.
func TokenValue(token int64) *Value { return &Value{Token: &token} }

// WriteValue builds the value of a write: a token and the value written.
func WriteValue(token, v int64) *Value { return &Value{Token: &token, Value: &v} }

// ReadValue builds the value of a read completion.
func ReadValue(v int64) *Value { return &Value{Value: &v} }

// MarshalLine encodes op as one JSON line without the trailing newline.
func MarshalLine(op Op) ([]byte, error) { return json.Marshal(op) }
