package nemesis

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locktest/locktest/histories"
	"github.com/locktest/locktest/internal/links"
)

// linkedSystem is one member, a TCP server that reads a request and
// answers it after answerAfter (never, if negative), behind a real
// toxiproxy link of client c0: what the lost reply's own logic does with
// the server's answer, not what a lock server does.
type linkedSystem struct {
	bare
	l *links.Links
	p *toxiclient.Proxy
}

func (linkedSystem) MemberNames() []string { return []string{"m0"} }
func (s linkedSystem) Links(string) ([]*toxiclient.Proxy, error) {
	return []*toxiclient.Proxy{s.p}, nil
}
func (linkedSystem) ResourceLink(string) (*toxiclient.Proxy, error) {
	return nil, errors.New("no resource")
}
func (s linkedSystem) ClearToxics() error { return s.l.ClearToxics() }

// startLinked starts the server and its link; wrote gets the time the
// server wrote its answer.
func startLinked(t *testing.T, answerAfter time.Duration) (linkedSystem, string, <-chan time.Time) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	wrote := make(chan time.Time, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		buf := make([]byte, 16)
		if _, err := conn.Read(buf); err != nil || answerAfter < 0 {
			io.Copy(io.Discard, conn)
			return
		}
		time.Sleep(answerAfter) // the server's own pace, not synchronisation
		if _, err := conn.Write([]byte("done")); err == nil {
			wrote <- time.Now()
		}
		io.Copy(io.Discard, conn)
	}()
	l, err := links.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	addr, err := l.Proxy("c0-m0", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Get("c0-m0")
	if err != nil {
		t.Fatal(err)
	}
	return linkedSystem{l: l, p: p}, addr, wrote
}

// lostRelease runs a lost release reply of duration 50 ms on sys: the
// client sends its request through its link and reads until the cut.
// It returns the fault's stop params and when the client saw the cut.
func lostRelease(t *testing.T, sys linkedSystem, addr string) (map[string]string, time.Time) {
	t.Helper()
	ctx := testContext(t)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fc := &fakeClients{names: []string{"c0", "c1"}, holder: "c0"}
	sched := Schedule{Members: 1, Clients: fc.names, Entries: []Entry{
		{At: 0, Fault: LostReplyRelease, Target: TargetHolder, Fallback: "c1", Duration: 50 * time.Millisecond},
	}}
	rec := newRec()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		// A TTL of 20 s: the cut waits up to 3 s for the answer.
		_, err := Run(rctx, Config{TTL: 20 * time.Second}, sys, fc, rec, sched)
		done <- err
	}()
	h := fc.fire(t, ctx)
	if _, err := conn.Write([]byte("release")); err != nil {
		t.Fatal(err)
	}
	_, rerr := io.ReadAll(conn) // nothing comes back: the cut ends it
	cut := time.Now()
	h.after(errors.Join(rerr, io.ErrUnexpectedEOF))
	ev := rec.wait(t, ctx, histories.FStop, LostReplyRelease)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return ev.Value.Params, cut
}

// A server slower than the fault's duration: the cut waits for its answer
// (held at the link), so that the request was served before its
// connection closed, and the fault says the server answered.
func TestLostReplyCutsAfterTheAnswer(t *testing.T) {
	t.Parallel()
	sys, addr, wrote := startLinked(t, 400*time.Millisecond)
	p, cut := lostRelease(t, sys, addr)
	select {
	case at := <-wrote:
		if cut.Before(at) {
			t.Errorf("the link was cut %v before the server answered", at.Sub(cut))
		}
	default:
		t.Errorf("the server never answered; params %v", p)
	}
	if p["server_answered"] != "yes" || p["missed"] != "" || p["reply"] != "lost" {
		t.Errorf("stop params %v", p)
	}
}

// A server that never answers: the link is cut 3 s (answerWait) after the
// fault's duration, and the fault says that whether the request took
// effect is unknown (a scenario counts it as not staged).
func TestLostReplyUnanswered(t *testing.T) {
	t.Parallel()
	sys, addr, _ := startLinked(t, -1)
	p, _ := lostRelease(t, sys, addr)
	if !strings.HasPrefix(p["server_answered"], "no") || !strings.Contains(p["missed"], "whether it took effect is unknown") {
		t.Errorf("stop params %v", p)
	}
	if s, _ := Describe(LostReplyRelease, []string{"c0"}, p); !strings.Contains(s, "whether it took effect is unknown") {
		t.Errorf("story %q", s)
	}
}

// A lost acquire reply aimed at the holder strikes its next acquire, armed
// only once its section has ended: armed at once, the hook fired on an
// acquire already sent by a holder that had let go meanwhile, whose reply
// had come (zk-ghost-node made no ghost on a loaded host).
func TestLostAcquireReplyOfAHolderWaitsForItsSectionEnd(t *testing.T) {
	t.Parallel()
	fc := &fakeClients{names: []string{"c0", "c1"}, holder: "c1"}
	env := &Env{Sys: prototype{}, Clients: fc}
	type result struct {
		inj *Injected
		err error
	}
	done := make(chan result, 1)
	go func() {
		inj, err := lostReply{}.Inject(context.Background(), env, Entry{Fault: LostReplyAcquire, Target: TargetHolder, Fallback: "c0"})
		done <- result{inj, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fc.fire(t, ctx) // the section's end: only now is the acquire armed
	fc.fire(t, ctx) // the next acquire, as it is sent
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	fc.mu.Lock()
	calls := slices.Clone(fc.calls)
	fc.mu.Unlock()
	if want := []string{"intercept c1 section-end", "intercept c1 acquire"}; !slices.Equal(calls, want) || r.inj.Params["in_flight"] != "" {
		t.Fatalf("calls %v, params %v; want %v, not in flight", calls, r.inj.Params, want)
	}
}
