package histories

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// record is one decoded line, before the format's rules are applied: what
// each field holds and whether it was there.
type record struct {
	index                             int
	typ                               Type
	f, key, err                       string
	time                              int64
	process                           Process
	processErr                        string // why the process is not one
	value                             *Value
	hasIndex, hasType, hasPr, hasTime bool
}

// decodeSlow decodes a line with encoding/json: the reference for every
// line, and the decoder of those the fast one leaves to it.
func decodeSlow(b []byte) (record, string) {
	var l struct {
		Index   *int            `json:"index"`
		Type    *Type           `json:"type"`
		F       *string         `json:"f"`
		Process json.RawMessage `json:"process"`
		Time    *int64          `json:"time"`
		Key     string          `json:"key"`
		Value   *Value          `json:"value"`
		Error   string          `json:"error"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return record{}, "bad JSON: " + err.Error()
	}
	r := record{key: l.Key, value: l.Value, err: l.Error, hasPr: l.Process != nil}
	if l.Index != nil {
		r.index, r.hasIndex = *l.Index, true
	}
	if l.Type != nil {
		r.typ, r.hasType = *l.Type, true
	}
	if l.F != nil {
		r.f = *l.F
	}
	if l.Time != nil {
		r.time, r.hasTime = *l.Time, true
	}
	if r.hasPr {
		if err := r.process.UnmarshalJSON(l.Process); err != nil {
			r.processErr = err.Error()
		}
	}
	return r, ""
}

// decoder decodes the lines locktest writes, and hand-written ones in the
// same plain form, several times faster than encoding/json: ASCII strings
// without escapes, integers where the format has them, each known field
// once. Anything else it leaves to decodeSlow (false), whose result it
// would otherwise equal (FuzzDecode holds it to that).
type decoder struct {
	b     []byte
	i     int
	depth int
	// strs interns the keys, f's and parameter names, which repeat.
	strs map[string]string
	// slab holds values and their numbers, allocated together; with
	// reuse, one block, one list of targets and one map of params serve
	// every line.
	slab    []valueBlock
	reuse   bool
	block   valueBlock
	targetz []string
	paramz  Params
}

type valueBlock struct {
	v                              Value
	tok, val, rev, revMax, created int64
}

// fields of a line and of its value, as the format names them.
const (
	fIndex = 1 << iota
	fType
	fF
	fProcess
	fTime
	fKey
	fValue
	fError
	fToken
	fVal
	fRevision
	fClaim
	fRevisionMax
	fClaimCreated
	fSession
	fFault
	fTargets
	fParams
)

func lineField(name []byte) int {
	switch string(name) {
	case "index":
		return fIndex
	case "type":
		return fType
	case "f":
		return fF
	case "process":
		return fProcess
	case "time":
		return fTime
	case "key":
		return fKey
	case "value":
		return fValue
	case "error":
		return fError
	}
	return 0
}

var lineNames = []string{"index", "type", "f", "process", "time", "key", "value", "error"}

func valueField(name []byte) int {
	switch string(name) {
	case "token":
		return fToken
	case "value":
		return fVal
	case "revision":
		return fRevision
	case "claim":
		return fClaim
	case "revision_max":
		return fRevisionMax
	case "claim_created":
		return fClaimCreated
	case "session":
		return fSession
	case "fault":
		return fFault
	case "targets":
		return fTargets
	case "params":
		return fParams
	}
	return 0
}

var valueNames = []string{"token", "value", "revision", "claim", "revision_max", "claim_created", "session", "fault", "targets", "params"}

func (d *decoder) decode(b []byte) (r record, ok bool) {
	d.b, d.i, d.depth = b, 0, 0
	var seen int
	ok = d.object(func(name []byte) bool {
		field, ok := d.field(name, lineField, lineNames, &seen)
		if !ok {
			return false
		}
		switch field {
		case 0:
			return d.skip()
		case fIndex:
			n, ok := d.integer()
			r.index, r.hasIndex = int(n), ok && int64(int(n)) == n
			return r.hasIndex
		case fType:
			s, ok := d.str()
			r.typ, r.hasType = Type(d.word(s)), ok
			return ok
		case fF:
			s, ok := d.str()
			r.f = d.word(s)
			return ok
		case fProcess:
			r.hasPr = true
			if d.peek() == '"' {
				s, ok := d.str()
				r.process = Nemesis
				return ok && string(s) == `nemesis`
			}
			n, ok := d.integer()
			r.process = Process(n)
			return ok && n >= 0 && int64(int(n)) == n
		case fTime:
			r.time, r.hasTime = d.integer()
			return r.hasTime
		case fKey:
			s, ok := d.str()
			r.key = d.intern(s)
			return ok
		case fError:
			s, ok := d.str()
			r.err = d.intern(s)
			return ok
		case fValue:
			r.value, ok = d.value()
			return ok
		}
		return false
	})
	return r, ok && d.end()
}

// field looks a member's name up: 0 for a name the format does not have,
// false for one decodeSlow must judge (a repeated field, or a name
// encoding/json would match without regard to case).
func (d *decoder) field(name []byte, field func([]byte) int, names []string, seen *int) (int, bool) {
	f := field(name)
	if f == 0 {
		for _, known := range names {
			if len(name) == len(known) && strings.EqualFold(string(name), known) {
				return 0, false
			}
		}
		return 0, true
	}
	if *seen&f != 0 {
		return 0, false
	}
	*seen |= f
	return f, true
}

func (d *decoder) value() (*Value, bool) {
	if d.peek() != '{' {
		return nil, false
	}
	var blk *valueBlock
	if d.reuse {
		d.block = valueBlock{}
		blk = &d.block
	} else {
		if len(d.slab) == 0 {
			d.slab = make([]valueBlock, 256)
		}
		blk = &d.slab[0]
		d.slab = d.slab[1:]
	}
	v := &blk.v
	var seen int
	ok := d.object(func(name []byte) bool {
		field, ok := d.field(name, valueField, valueNames, &seen)
		if !ok {
			return false
		}
		switch field {
		case 0:
			return d.skip()
		case fToken:
			blk.tok, ok = d.integer()
			v.Token = &blk.tok
		case fVal:
			blk.val, ok = d.integer()
			v.Value = &blk.val
		case fRevision:
			blk.rev, ok = d.integer()
			v.Revision = &blk.rev
		case fClaim:
			var s []byte
			s, ok = d.str()
			v.Claim = string(s)
		case fRevisionMax:
			blk.revMax, ok = d.integer()
			v.RevisionMax = &blk.revMax
		case fClaimCreated:
			blk.created, ok = d.integer()
			v.ClaimCreated = &blk.created
		case fSession:
			var s []byte
			s, ok = d.str()
			v.Session = string(s)
		case fFault:
			var s []byte
			s, ok = d.str()
			v.Fault = d.intern(s)
		case fTargets:
			v.Targets, ok = d.targets()
		case fParams:
			v.Params, ok = d.params()
		}
		return ok
	})
	return v, ok
}

func (d *decoder) targets() ([]string, bool) {
	if d.peek() != '[' {
		return nil, false
	}
	d.i++
	out := []string{}
	if d.reuse {
		out = d.targetz[:0]
		defer func() { d.targetz = out[:0] }()
	}
	d.ws()
	if d.peek() == ']' {
		d.i++
		return out, true
	}
	for {
		d.ws()
		s, ok := d.str()
		if !ok {
			return nil, false
		}
		out = append(out, d.intern(s))
		d.ws()
		switch d.next() {
		case ',':
		case ']':
			return out, true
		default:
			return nil, false
		}
	}
}

func (d *decoder) params() (Params, bool) {
	if d.peek() != '{' {
		return nil, false
	}
	p := Params{}
	if d.reuse {
		if d.paramz == nil {
			d.paramz = Params{}
		}
		clear(d.paramz)
		p = d.paramz
	}
	ok := d.object(func(name []byte) bool {
		k := d.intern(name)
		switch c := d.peek(); {
		case c == '"':
			s, ok := d.str()
			p[k] = d.intern(s)
			return ok
		case c == '-' || '0' <= c && c <= '9':
			from := d.i
			if !d.number() {
				return false
			}
			p[k] = d.intern(d.b[from:d.i])
		case d.literal("true"):
			p[k] = "true"
		case d.literal("false"):
			p[k] = "false"
		case d.literal("null"):
			p[k] = ""
		default:
			return false
		}
		return true
	})
	return p, ok
}

// word returns b as a string, the format's own without allocating.
func (d *decoder) word(b []byte) string {
	switch string(b) {
	case "invoke":
		return "invoke"
	case "ok":
		return "ok"
	case "fail":
		return "fail"
	case "info":
		return "info"
	case Acquire:
		return Acquire
	case Release:
		return Release
	case Read:
		return Read
	case Write:
		return Write
	case FKeyDeleted:
		return FKeyDeleted
	}
	return d.intern(b)
}

// intern returns b as a string, the same string for the same bytes while
// there are few of them (keys, f's, parameter names and values that
// repeat); beyond, a fresh one.
func (d *decoder) intern(b []byte) string {
	if s, ok := d.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(d.strs) < 4096 && len(b) <= 64 {
		if d.strs == nil {
			d.strs = map[string]string{}
		}
		d.strs[s] = s
	}
	return s
}

// object decodes an object, calling member with each name, positioned at
// its value, which member must consume.
func (d *decoder) object(member func(name []byte) bool) bool {
	d.ws()
	if d.next() != '{' {
		return false
	}
	if d.depth++; d.depth > 32 {
		return false
	}
	defer func() { d.depth-- }()
	d.ws()
	if d.peek() == '}' {
		d.i++
		return true
	}
	for {
		d.ws()
		name, ok := d.str()
		if !ok {
			return false
		}
		d.ws()
		if d.next() != ':' {
			return false
		}
		d.ws()
		if !member(name) {
			return false
		}
		d.ws()
		switch d.next() {
		case ',':
		case '}':
			return true
		default:
			return false
		}
	}
}

// skip consumes a value of any kind, checking that it is valid JSON.
func (d *decoder) skip() bool {
	switch c := d.peek(); {
	case c == '"':
		_, ok := d.str()
		return ok
	case c == '{':
		return d.object(func([]byte) bool { return d.skip() })
	case c == '[':
		d.i++
		if d.depth++; d.depth > 32 {
			return false
		}
		defer func() { d.depth-- }()
		d.ws()
		if d.peek() == ']' {
			d.i++
			return true
		}
		for {
			d.ws()
			if !d.skip() {
				return false
			}
			d.ws()
			switch d.next() {
			case ',':
			case ']':
				return true
			default:
				return false
			}
		}
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	}
	return d.literal("true") || d.literal("false") || d.literal("null")
}

// str consumes a string of printable ASCII without escapes and returns its
// bytes.
func (d *decoder) str() ([]byte, bool) {
	if d.peek() != '"' {
		return nil, false
	}
	from := d.i + 1
	for j := from; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			d.i = j + 1
			return d.b[from:j], true
		case c < 0x20 || c >= 0x80 || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// integer consumes a JSON number written as an integer that fits an
// int64.
func (d *decoder) integer() (int64, bool) {
	from := d.i
	if !d.number() {
		return 0, false
	}
	digits := d.b[from:d.i]
	if len(digits) < 19 && digits[0] != '-' { // no overflow, no sign
		var n int64
		for _, c := range digits {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int64(c-'0')
		}
		return n, true
	}
	n, err := strconv.ParseInt(string(digits), 10, 64)
	return n, err == nil
}

// number consumes a JSON number.
func (d *decoder) number() bool {
	b, i := d.b, d.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() bool {
		from := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > from
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	d.i = i
	return true
}

func (d *decoder) literal(s string) bool {
	if bytes.HasPrefix(d.b[d.i:], []byte(s)) {
		d.i += len(s)
		return true
	}
	return false
}

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

func (d *decoder) next() byte {
	c := d.peek()
	d.i++
	return c
}

// end says whether only white space is left.
func (d *decoder) end() bool {
	d.ws()
	return d.i == len(d.b)
}
