package resource

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func start(t *testing.T, mode Mode) *Client {
	_, c := startServer(t, mode)
	return c
}

// startServer starts a resource and a client of it, both closed with the test.
func startServer(t *testing.T, mode Mode) (*Server, *Client) {
	t.Helper()
	s, err := Start(mode)
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(s.Addr())
	t.Cleanup(func() {
		c.Close()
		s.Close()
	})
	return s, c
}

func TestFencedRejectsStaleToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := start(t, Fenced)
	if err := c.Write(ctx, "k", 10, 1); err != nil {
		t.Fatalf("first write: %v", err)
	}
	if err := c.Write(ctx, "k", 10, 2); err != nil {
		t.Fatalf("write with the same token must be accepted: %v", err)
	}
	if err := c.Write(ctx, "k", 9, 3); !errors.Is(err, ErrRejected) {
		t.Fatalf("stale write: got %v, want ErrRejected", err)
	}
	if err := c.Write(ctx, "other", 1, 7); err != nil {
		t.Fatalf("tokens are per key: %v", err)
	}
	v, err := c.Read(ctx, "k", 0)
	if err != nil || v != 2 {
		t.Fatalf("read = %d, %v; want 2", v, err)
	}
}

// A fenced resource remembers the tokens of reads too: an older holder's
// late write must not overwrite what a newer holder read and is about to
// update (a lost update that fencing only the writes would let through).
func TestFencedReadRaisesTheFence(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := start(t, Fenced)
	if _, err := c.Read(ctx, "k", 10); err != nil {
		t.Fatalf("read with token 10: %v", err)
	}
	if err := c.Write(ctx, "k", 9, 1); !errors.Is(err, ErrRejected) {
		t.Fatalf("write with token 9 after a read with 10: got %v, want ErrRejected", err)
	}
	if _, err := c.Read(ctx, "k", 8); !errors.Is(err, ErrRejected) {
		t.Fatalf("read with token 8 after one with 10: got %v, want ErrRejected", err)
	}
	if err := c.Write(ctx, "k", 10, 1); err != nil {
		t.Fatalf("write with token 10: %v", err)
	}
	if v, err := c.Read(ctx, "k", 0); err != nil || v != 1 {
		t.Fatalf("untokened read = %d, %v; want 1", v, err)
	}
	us, u := startServer(t, Unfenced)
	u.Read(ctx, "k", 10)
	if err := u.Write(ctx, "k", 9, 1); err != nil {
		t.Fatalf("unfenced write after a read: %v", err)
	}
	if log := us.Log(); len(log) != 1 || !log[0].Stale {
		t.Fatalf("an unfenced write below a read's token is not marked stale: %+v", log)
	}
}

func TestUnfencedAcceptsEverything(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := start(t, Unfenced)
	for i, tok := range []int64{10, 3, 7} {
		if err := c.Write(ctx, "k", tok, int64(i)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	v, err := c.Read(ctx, "k", 0)
	if err != nil || v != 2 {
		t.Fatalf("read = %d, %v; want 2", v, err)
	}
}

func TestUnfencedMarksStaleWrites(t *testing.T) {
	s, c := startServer(t, Unfenced)
	ctx := context.Background()
	c.Write(ctx, "k", 10, 1)
	select {
	case <-s.Stale():
		t.Fatal("stale signalled before any stale write")
	default:
	}
	c.Write(ctx, "k", 3, 2)
	select {
	case <-s.Stale():
	default:
		t.Fatal("stale write not signalled")
	}
	if log := s.Log(); len(log) != 2 || log[0].Stale || !log[1].Stale {
		t.Fatalf("log = %+v", log)
	}
}

func TestLogOrder(t *testing.T) {
	s, c := startServer(t, Fenced)
	ctx := context.Background()
	c.Write(ctx, "a", 1, 1)
	c.Write(ctx, "a", 0, 5) // rejected: not logged
	c.Write(ctx, "b", 2, 2)
	log := s.Log()
	if len(log) != 2 || log[0].Key != "a" || log[1].Key != "b" || log[1].Seq != 1 {
		t.Fatalf("log = %+v", log)
	}
}

func TestParseMode(t *testing.T) {
	if _, err := ParseMode("fencd"); err == nil {
		t.Fatal("want error for unknown mode")
	}
	if m, err := ParseMode("unfenced"); err != nil || m != Unfenced {
		t.Fatalf("ParseMode(unfenced) = %v, %v", m, err)
	}
}

// failAfter is a log that takes n lines and then fails.
type failAfter struct {
	lines [][]byte
	n     int
}

func (f *failAfter) Write(b []byte) (int, error) {
	if len(f.lines) == f.n {
		return 0, errors.New("disk full")
	}
	f.lines = append(f.lines, append([]byte(nil), b...))
	return len(b), nil
}

// TestStartLogged: each accepted write is logged as it is accepted, a
// rejected one is not, and a write that cannot be logged does not take
// effect: the log holds exactly what the resource accepted.
func TestStartLogged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	log := &failAfter{n: 2}
	s, err := StartLogged(Fenced, log)
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(s.Addr())
	defer s.Close()
	defer c.Close()
	if err := c.Write(ctx, "k", 5, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, "k", 4, 2); !errors.Is(err, ErrRejected) {
		t.Fatalf("stale write: %v", err)
	}
	if err := c.Write(ctx, "k", 6, 3); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, "k", 7, 4); err == nil || errors.Is(err, ErrRejected) {
		t.Fatalf("a write the log refused: %v, want an error of unknown outcome", err)
	}
	if v, err := c.Read(ctx, "k", 0); err != nil || v != 3 {
		t.Fatalf("read %d, %v: want 3, the last write logged", v, err)
	}
	var got []Entry
	for _, l := range log.lines {
		var e Entry
		if err := json.Unmarshal(l, &e); err != nil || l[len(l)-1] != '\n' {
			t.Fatalf("log line %q: %v", l, err)
		}
		got = append(got, e)
	}
	if len(got) != 2 || got[0].Token != 5 || got[0].Value != 1 || got[1].Token != 6 || got[1].Value != 3 || got[1].Seq != 1 {
		t.Fatalf("logged %+v, want the writes of tokens 5 and 6", got)
	}
	if n := len(s.Log()); n != 2 {
		t.Errorf("the resource's own log holds %d writes, want 2", n)
	}
}
