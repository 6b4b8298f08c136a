// Package histgen writes synthetic locktest histories of any size, shaped
// as a real run records them (setup, process events, contended grants with
// their decision revisions and claims, reads, writes, releases, the
// observer's deletions, the observed revision), for benchmarks and fuzz
// seeds. Its histories are valid: every check that judges them says valid.
package histgen

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
)

// Config sizes a history.
type Config struct {
	// Acquisitions is the number of grants; each comes with a read, a
	// write and a release: 8 client records per acquisition.
	Acquisitions int
	// Clients contend for one lock (default 5).
	Clients int
	// Seed draws the think times.
	Seed uint64
}

// Write writes the history to w.
func Write(w io.Writer, c Config) error {
	if c.Clients <= 0 {
		c.Clients = 5
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	g := &gen{w: bw, rng: rand.New(rand.NewPCG(c.Seed, 1))}
	g.nemesis(`"setup"`, 1000, `{"params":{"backend":"etcd","locks":"lock","recipe":"mutex","resource":"http","ttl":"2","workload":"counter"}}`)
	queue := make([]int, c.Clients)
	for i := range queue {
		queue[i] = i
		g.nemesis(`"process"`, 2000+int64(i), fmt.Sprintf(`{"targets":["c%d"],"params":{"process":"%d"}}`, i, i))
	}
	now := int64(10_000)
	for i := range queue {
		g.client("invoke", "acquire", i, now+int64(i), "")
	}
	var rev, value int64 = 1, 0
	for range c.Acquisitions {
		p := queue[0]
		queue = append(queue[1:], p)
		// The head of the queue is granted: its key was created when it
		// asked, the grant is decided on the deletion before it.
		rev += 2
		token := rev
		lease := fmt.Sprintf("694d%012x", p)
		now += 1_000_000 + g.rng.Int64N(2_000_000)
		g.client("ok", "acquire", p, now, fmt.Sprintf(`{"token":%d,"revision":%d,"claim":"/locktest/run/lock/%s"}`, token, token, lease))
		now += 200_000 + g.rng.Int64N(300_000)
		g.client("invoke", "read", p, now, "")
		now += 300_000 + g.rng.Int64N(300_000)
		g.client("ok", "read", p, now, fmt.Sprintf(`{"value":%d}`, value))
		now += 2_000_000 + g.rng.Int64N(10_000_000)
		value++
		g.client("invoke", "write", p, now, fmt.Sprintf(`{"token":%d,"value":%d}`, token, value))
		now += 300_000 + g.rng.Int64N(300_000)
		g.client("ok", "write", p, now, fmt.Sprintf(`{"token":%d,"value":%d}`, token, value))
		now += 100_000
		g.client("invoke", "release", p, now, "")
		rev++
		now += 500_000 + g.rng.Int64N(500_000)
		g.nemesis(`"key-deleted"`, now, fmt.Sprintf(`{"targets":["c%d"],"params":{"by":"release","create_revision":"%d","key":"lock","lease":"%s","lease_alive":"true","process":"%d","revision":"%d"}}`,
			p, token, lease, p, rev))
		now += 100_000
		g.client("ok", "release", p, now, "")
		now += 50_000
		g.client("invoke", "acquire", p, now, "")
	}
	// The waiters give up when the run stops.
	for _, p := range queue {
		now += 1000
		g.client("info", "acquire", p, now, "")
	}
	// The final read, by a fresh process, as the workload makes it.
	final := c.Clients
	g.client("invoke", "read", final, now+2000, "")
	g.client("ok", "read", final, now+3000, fmt.Sprintf(`{"value":%d}`, value))
	g.nemesis(`"observed"`, now+4000, fmt.Sprintf(`{"params":{"revision":"%d"}}`, rev))
	if g.err != nil {
		return g.err
	}
	return bw.Flush()
}

type gen struct {
	w     *bufio.Writer
	rng   *rand.Rand
	index int
	buf   []byte
	err   error
}

func (g *gen) line(typ, f, process string, t int64, key, value string) {
	b := append(g.buf[:0], `{"index":`...)
	b = strconv.AppendInt(b, int64(g.index), 10)
	b = append(b, `,"type":"`...)
	b = append(b, typ...)
	b = append(b, `","f":`...)
	b = append(b, f...)
	b = append(b, `,"process":`...)
	b = append(b, process...)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, t, 10)
	if key != "" {
		b = append(b, `,"key":"`...)
		b = append(b, key...)
		b = append(b, '"')
	}
	if value != "" {
		b = append(b, `,"value":`...)
		b = append(b, value...)
	}
	b = append(b, "}\n"...)
	g.buf = b
	g.index++
	if _, err := g.w.Write(b); err != nil && g.err == nil {
		g.err = err
	}
}

func (g *gen) client(typ, f string, p int, t int64, value string) {
	g.line(typ, `"`+f+`"`, strconv.Itoa(p), t, "lock", value)
}

func (g *gen) nemesis(f string, t int64, value string) {
	g.line("info", f, `"nemesis"`, t, "", value)
}

// Million sizes the history of the benchmarks: a million client records,
// 125,000 acquisitions each with a read, a write and a release.
var Million = Config{Acquisitions: 125_000}

// File writes the history to a file at path.
func File(path string, c Config) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Write(f, c); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
