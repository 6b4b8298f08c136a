// Package txnlog reads ZooKeeper's transaction logs (dataDir/version-2/
// log.<zxid>): every change the ensemble committed, with its zxid, the
// session that made it, the leader's time, and for a closed or expired
// session the ephemeral nodes its close deleted. It is the server's own
// record of who deleted a znode, and when.
//
// Format (FileTxnLog, jute big-endian): a header (int32 magic "ZKLG",
// int32 version 2, int64 dbid), then records: int64 Adler-32 of the entry,
// int32 length, the entry (TxnHeader, the txn, a TxnDigest), byte 'B'. The
// file is preallocated with zeros: a zero length is the end, so far.
package txnlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Txn types (ZooDefs.OpCode) this package decodes.
const (
	TypeCreate          = 1
	TypeDelete          = 2
	TypeSetData         = 5
	TypeMulti           = 14
	TypeCreate2         = 15
	TypeCreateContainer = 19
	TypeDeleteContainer = 20
	TypeCreateTTL       = 21
	TypeCreateSession   = -10
	TypeCloseSession    = -11
	TypeError           = -1
)

// Txn is one committed (or, at a log's tail, proposed) transaction.
type Txn struct {
	Session   int64 // the session that made it (for a close: the closed one)
	Cxid      int32 // the client's request number; 0 for the server's own (an expiry)
	Zxid      int64
	Time      int64 // ms since the epoch, the leader's clock when it proposed
	Type      int32
	Path      string   // create, delete, setData
	Ephemeral bool     // create
	Deleted   []string // closeSession: the ephemeral nodes it deleted
	Timeout   int32    // createSession: the negotiated timeout, ms
	Ops       []Txn    // multi: its parts (Session, Zxid, Time as the multi's)
}

// Expired says whether t is a close of a session the server made itself
// (expiry), not one its client asked for.
func (t Txn) Expired() bool { return t.Type == TypeCloseSession && t.Cxid == 0 }

func (t Txn) String() string {
	s := fmt.Sprintf("zxid 0x%x session 0x%x cxid %d %s", t.Zxid, t.Session, t.Cxid, typeName(t.Type))
	switch {
	case t.Path != "":
		s += " " + t.Path
	case len(t.Deleted) > 0:
		s += " deleted " + strings.Join(t.Deleted, ",")
	}
	return s
}

func typeName(t int32) string {
	switch t {
	case TypeCreate, TypeCreate2:
		return "create"
	case TypeDelete:
		return "delete"
	case TypeSetData:
		return "setData"
	case TypeMulti:
		return "multi"
	case TypeCreateSession:
		return "createSession"
	case TypeCloseSession:
		return "closeSession"
	case TypeError:
		return "error"
	}
	return "type" + strconv.Itoa(int(t))
}

const magic = 0x5a4b4c47 // "ZKLG"

// Reader reads one log file from its start, and can be called again as
// the file grows (Next returns io.EOF at the current end).
type Reader struct {
	f   *os.File
	off int64
}

// errNotYet: a log file just created, its header not written yet.
var errNotYet = errors.New("txnlog: the file has no header yet")

// Open opens a log file and checks its header.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	var h [16]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		f.Close()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errNotYet
		}
		return nil, fmt.Errorf("txnlog: %s: header: %w", path, err)
	}
	switch binary.BigEndian.Uint32(h[:4]) {
	case magic:
	case 0:
		f.Close()
		return nil, errNotYet
	default:
		f.Close()
		return nil, fmt.Errorf("txnlog: %s: not a transaction log", path)
	}
	return &Reader{f: f, off: 16}, nil
}

// Close closes the file.
func (r *Reader) Close() error { return r.f.Close() }

// Next returns the next transaction, or io.EOF at the end so far (a
// partial record at the end counts as the end: call again later).
func (r *Reader) Next() (Txn, error) {
	var h [12]byte
	if _, err := r.f.ReadAt(h[:], r.off); err != nil {
		return Txn{}, eof(err)
	}
	sum := binary.BigEndian.Uint64(h[:8])
	n := int32(binary.BigEndian.Uint32(h[8:]))
	if n == 0 {
		return Txn{}, io.EOF
	}
	if n < 0 || n > 64<<20 {
		return Txn{}, fmt.Errorf("txnlog: %s at %d: record length %d", r.f.Name(), r.off, n)
	}
	buf := make([]byte, n+1)
	if _, err := r.f.ReadAt(buf, r.off+12); err != nil {
		return Txn{}, eof(err)
	}
	if buf[n] != 'B' || uint64(adler32.Checksum(buf[:n])) != sum {
		return Txn{}, io.EOF // still being written
	}
	t, err := decode(buf[:n])
	if err != nil {
		return Txn{}, fmt.Errorf("txnlog: %s at %d: %w", r.f.Name(), r.off, err)
	}
	r.off += 12 + int64(n) + 1
	return t, nil
}

func eof(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return io.EOF
	}
	return err
}

// Files lists the log files in dir (a server's dataDir/version-2), oldest
// first.
func Files(dir string) ([]string, error) {
	m, err := filepath.Glob(filepath.Join(dir, "log.*"))
	if err != nil {
		return nil, err
	}
	sort.Slice(m, func(i, j int) bool { return logZxid(m[i]) < logZxid(m[j]) })
	return m, nil
}

// decode reads a TxnHeader and the txn after it.
func decode(b []byte) (Txn, error) {
	d := &decoder{b: b}
	t := Txn{Session: d.i64(), Cxid: d.i32(), Zxid: d.i64(), Time: d.i64(), Type: d.i32()}
	d.body(&t)
	return t, d.err
}

// body decodes the txn record of t's type; unknown types keep only the
// header.
func (d *decoder) body(t *Txn) {
	switch t.Type {
	case TypeCreate, TypeCreate2, TypeCreateContainer, TypeCreateTTL:
		t.Path = d.str()
		d.buffer()
		d.acls()
		t.Ephemeral = d.bool()
	case TypeDelete, TypeDeleteContainer, TypeSetData:
		t.Path = d.str()
	case TypeCreateSession:
		t.Timeout = d.i32()
	case TypeCloseSession:
		// CloseSessionTxn is there when zookeeper.closeSessionTxn.enabled
		// (the default since 3.6); a digest may follow either way.
		if d.left() >= 4 && d.left() != 12 {
			for i, n := 0, d.i32(); i < int(n) && d.err == nil; i++ {
				t.Deleted = append(t.Deleted, d.str())
			}
		}
	case TypeMulti:
		for i, n := 0, d.i32(); i < int(n) && d.err == nil; i++ {
			op := Txn{Session: t.Session, Cxid: t.Cxid, Zxid: t.Zxid, Time: t.Time, Type: d.i32()}
			sub := &decoder{b: d.buffer()}
			sub.body(&op)
			if sub.err != nil {
				d.err = sub.err
			}
			t.Ops = append(t.Ops, op)
		}
	}
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) left() int { return len(d.b) }

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = fmt.Errorf("short txn: want %d bytes, have %d", n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) i32() int32 {
	v := d.take(4)
	if v == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(v))
}

func (d *decoder) i64() int64 {
	v := d.take(8)
	if v == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

func (d *decoder) bool() bool {
	v := d.take(1)
	return v != nil && v[0] != 0
}

func (d *decoder) buffer() []byte {
	n := d.i32()
	if n <= 0 {
		return nil
	}
	return d.take(int(n))
}

func (d *decoder) str() string { return string(d.buffer()) }

func (d *decoder) acls() {
	for i, n := 0, d.i32(); i < int(n) && d.err == nil; i++ {
		d.i32() // perms
		d.str() // scheme
		d.str() // id
	}
}

// Tailer follows the log files of one server as they grow and roll over.
type Tailer struct {
	dir     string
	cur     *Reader
	name    string
	globbed time.Time // when Poll last looked for newer files
}

// globEvery is how often Poll looks for a newer log file (ZooKeeper rolls
// over after a snapshot, and a restarted server begins a new file), so
// that polling a quiet log costs a read, not a directory listing.
const globEvery = 50 * time.Millisecond

// NewTailer follows the logs in dir (a server's dataDir/version-2) from
// their start.
func NewTailer(dir string) *Tailer { return &Tailer{dir: dir} }

// Poll returns the transactions appended since the last call. A record a
// follower logged as a proposal may be truncated later if it never
// commits: trust a txn once the server has applied it (a watch fired, or
// srvr's Zxid passed it).
func (t *Tailer) Poll() ([]Txn, error) {
	var out []Txn
	drain := func() error {
		for t.cur != nil {
			tx, err := t.cur.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			out = append(out, tx)
		}
		return nil
	}
	for {
		if err := drain(); err != nil {
			return out, err
		}
		if t.cur != nil && time.Since(t.globbed) < globEvery {
			return out, nil
		}
		t.globbed = time.Now()
		files, err := Files(t.dir)
		if err != nil {
			return out, err
		}
		next := ""
		for _, f := range files {
			if t.name == "" || logZxid(f) > logZxid(t.name) {
				next = f
				break
			}
		}
		if next == "" {
			return out, nil
		}
		// A newer file: the current one is finished once ZooKeeper has
		// created the next; read what was appended meanwhile, then go on.
		if err := drain(); err != nil {
			return out, err
		}
		r, err := Open(next)
		if errors.Is(err, errNotYet) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if t.cur != nil {
			t.cur.Close()
		}
		t.cur, t.name = r, next
	}
}

// Close closes the current file.
func (t *Tailer) Close() {
	if t.cur != nil {
		t.cur.Close()
	}
}

func logZxid(p string) int64 {
	v, _ := strconv.ParseInt(strings.TrimPrefix(filepath.Base(p), "log."), 16, 64)
	return v
}
