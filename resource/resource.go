// Package resource is the protected resource of locktest: a small storage
// service, reached over loopback HTTP, that holds one value per key and an
// ordered log of every write it accepted. In fenced mode it rejects a read or
// a write whose fencing token is lower than the highest it has seen for that
// key, which is what keeps data safe when two clients believe they hold a
// lock.
package resource

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/internal/words"
)

// Mode says where the protected value lives and how writes to it are
// fenced. This package's modes are its HTTP store's; a backend may keep the
// resource in its own system under modes of its own (etcd's etcd-txn, a
// value written by a Txn guarded by the lock).
type Mode string

// The HTTP store's modes.
const (
	// Fenced: the HTTP store, rejecting writes with stale tokens.
	Fenced Mode = "fenced"
	// Unfenced: the HTTP store, accepting every write.
	Unfenced Mode = "unfenced"
)

// HTTP reports whether m is a mode of the HTTP store.
func (m Mode) HTTP() bool { return m == Fenced || m == Unfenced }

// ParseMode validates a mode of the HTTP store; others name the modes a
// backend adds (its own words, "or etcd-txn (...)"), for the error.
func ParseMode(s string, others ...string) (Mode, error) {
	if m := Mode(s); m.HTTP() {
		return m, nil
	}
	want := "fenced or unfenced"
	if len(others) > 0 {
		want = "fenced, unfenced or " + strings.Join(others, " or ")
	}
	return "", fmt.Errorf("unknown resource mode %q%s (want %s)", s, words.DidYouMean(s, append([]string{string(Fenced), string(Unfenced)}, others...)), want)
}

// Entry is one accepted write, in the order the resource applied it.
type Entry struct {
	Seq   int       `json:"seq"`
	Key   string    `json:"key"`
	Token int64     `json:"token"`
	Value int64     `json:"value"`
	At    time.Time `json:"at"`
	// Stale marks a write accepted with a token lower than one seen before
	// for the same key (on a write or a read): only an unfenced resource
	// does that, and it is the moment data gets damaged.
	Stale bool `json:"stale,omitempty"`
}

type register struct {
	token int64
	value int64
}

// Server is a running resource.
type Server struct {
	mode Mode
	ln   net.Listener
	srv  *http.Server

	mu    sync.Mutex
	state map[string]register
	log   []Entry
	// logTo receives each accepted write as it is accepted (StartLogged).
	logTo io.Writer
	// stale is closed at the first stale write accepted.
	stale     chan struct{}
	staleOnce sync.Once
}

// Start serves the HTTP store in mode on a fresh loopback port.
func Start(mode Mode) (*Server, error) { return StartLogged(mode, nil) }

// StartLogged is Start, and each write the resource accepts is also
// appended to log as one JSON line (an Entry), in a single Write call, before
// the write takes effect: a process that dies at any moment leaves the log of
// every write its resource accepted, which only a write no one saw may miss.
// A write that cannot be logged is refused as an error (its outcome unknown
// to the client).
func StartLogged(mode Mode, log io.Writer) (*Server, error) {
	if _, err := ParseMode(string(mode)); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("resource: listen: %w", err)
	}
	s := &Server{mode: mode, ln: ln, state: map[string]register{}, stale: make(chan struct{}), logTo: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/read", s.handleRead)
	mux.HandleFunc("POST /v1/write", s.handleWrite)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// Addr is the address the resource listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Mode is the resource's fencing mode.
func (s *Server) Mode() Mode { return s.mode }

// Log returns a copy of the accepted writes, in order.
func (s *Server) Log() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.log...)
}

// Stale is closed when the resource first accepts a stale write, so a run
// can stop at the first damage.
func (s *Server) Stale() <-chan struct{} { return s.stale }

// Close stops serving and closes every connection.
func (s *Server) Close() error { return s.srv.Close() }

type readReply struct {
	Value int64 `json:"value"`
	Token int64 `json:"token"`
}

type writeRequest struct {
	Key   string `json:"key"`
	Token int64  `json:"token"`
	Value int64  `json:"value"`
}

type writeReply struct {
	Accepted bool  `json:"accepted"`
	Highest  int64 `json:"highest"`
}

// handleRead returns a key's value. A read may carry the reader's fencing
// token: a fenced resource then refuses it if the token is stale, and
// otherwise remembers it, so that a holder that read under a newer token
// cannot lose its update to an older holder's late write (fencing only the
// writes leaves read-modify-write open to lost updates).
func (s *Server) handleRead(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	var token int64
	if t := r.URL.Query().Get("token"); t != "" {
		var err error
		if token, err = strconv.ParseInt(t, 10, 64); err != nil {
			http.Error(w, "bad token: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	s.mu.Lock()
	reg := s.state[key]
	if token > 0 {
		if s.mode == Fenced && token < reg.token {
			s.mu.Unlock()
			writeJSON(w, http.StatusConflict, readReply{Value: reg.value, Token: reg.token})
			return
		}
		// Unfenced, the token only marks later writes with lower ones
		// as stale in the log.
		reg.token = max(reg.token, token)
		s.state[key] = reg
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, readReply{Value: reg.value, Token: reg.token})
}

func (s *Server) handleWrite(w http.ResponseWriter, r *http.Request) {
	var req writeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad write request: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	reg := s.state[req.Key]
	if s.mode == Fenced && req.Token < reg.token {
		s.mu.Unlock()
		writeJSON(w, http.StatusConflict, writeReply{Accepted: false, Highest: reg.token})
		return
	}
	stale := req.Token < reg.token
	e := Entry{Seq: len(s.log), Key: req.Key, Token: req.Token, Value: req.Value, At: time.Now(), Stale: stale}
	if err := s.logEntry(e); err != nil {
		s.mu.Unlock()
		http.Error(w, "resource: logging the write: "+err.Error(), http.StatusInternalServerError)
		return
	}
	reg.value = req.Value
	reg.token = max(reg.token, req.Token)
	s.state[req.Key] = reg
	s.log = append(s.log, e)
	s.mu.Unlock()
	if stale {
		s.staleOnce.Do(func() { close(s.stale) })
	}
	writeJSON(w, http.StatusOK, writeReply{Accepted: true, Highest: reg.token})
}

// logEntry appends e to the log StartLogged was given, if any. s.mu is
// held: lines go out in the order of the writes.
func (s *Server) logEntry(e Entry) error {
	if s.logTo == nil {
		return nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = s.logTo.Write(append(b, '\n'))
	return err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// ErrRejected is returned by Read and Write when the resource refused a
// stale token.
var ErrRejected = errors.New("resource: write rejected: stale fencing token")

// Client talks to a resource at one address (normally a toxiproxy link).
type Client struct {
	base string
	http *http.Client
}

// NewClient returns a client with its own connection pool, so that its
// connections go only through addr and can be closed with it.
func NewClient(addr string) *Client {
	return &Client{
		base: "http://" + addr,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}},
	}
}

// Read returns the current value of key, read under a fencing token (0 for
// none). It returns ErrRejected when a fenced resource refused the token.
func (c *Client) Read(ctx context.Context, key string, token int64) (int64, error) {
	q := url.Values{"key": {key}}
	if token > 0 {
		q.Set("token", strconv.FormatInt(token, 10))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/read?"+q.Encode(), nil)
	if err != nil {
		return 0, err
	}
	var rep readReply
	status, err := c.do(req, &rep)
	if err != nil {
		return 0, err
	}
	if status == http.StatusConflict {
		return 0, ErrRejected
	}
	return rep.Value, nil
}

// Write asks the resource to store value under key with a fencing token. It
// returns ErrRejected when the resource refused the token; any other error
// leaves the outcome unknown.
func (c *Client) Write(ctx context.Context, key string, token, value int64) error {
	body, err := json.Marshal(writeRequest{Key: key, Token: token, Value: value})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/write", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	var rep writeReply
	status, err := c.do(req, &rep)
	if err != nil {
		return err
	}
	if status == http.StatusConflict || !rep.Accepted {
		return ErrRejected
	}
	return nil
}

// Close drops the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

func (c *Client) do(req *http.Request, out any) (int, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusConflict {
		return resp.StatusCode, fmt.Errorf("resource: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("resource: bad reply: %w", err)
	}
	return resp.StatusCode, nil
}
