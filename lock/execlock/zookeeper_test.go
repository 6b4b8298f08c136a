package execlock_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/zookeeper"
	"github.com/locktest/locktest/internal/links"
	"github.com/locktest/locktest/workload"
)

// sharedEnsemble are ZooKeeper's options for this package's runs: each
// run is handed an ensemble (3 servers) that runs before it started
// instead of starting its own, 3 JVMs and about 3 s of CPU each time.
// None of these runs injects a fault. Each keeps its lock keys under a
// prefix of its own, and its clients' links to its resource in a
// toxiproxy of its own (a client's link is named by the client, c0, in
// every run). An ensemble serves one run at a time (the observer's
// session past the links is the ensemble's, closed as a run ends):
// there are at most two, each started by the first run that finds none
// free, all closed by TestMain. Two, not one for each of the tests run at
// once (internal/partest: four): a third and a fourth ensemble cost 3
// JVMs each, starting and then idling until the package ends, while the
// package's ten runs on ZooKeeper, a few seconds each, rarely want more
// than two at once.
type sharedEnsemble struct{ zookeeper.Options }

var ensembles struct {
	free chan struct{} // a token for each ensemble a run may take
	mu   sync.Mutex
	idle []*backend.Started // started, and free
	all  []*backend.Started
	dirs []string
	runs int
	once sync.Once
}

func (o *sharedEnsemble) Start(ctx context.Context, p backend.Plan) (*backend.Started, error) {
	ensembles.once.Do(func() { ensembles.free = make(chan struct{}, max(1, min(2, parallel()))) })
	select {
	case ensembles.free <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	ensembles.mu.Lock()
	var e *backend.Started
	if n := len(ensembles.idle); n > 0 {
		e, ensembles.idle = ensembles.idle[n-1], ensembles.idle[:n-1]
	}
	ensembles.runs++
	prefix := fmt.Sprintf("/locktest/run%d/", ensembles.runs)
	ensembles.mu.Unlock()
	release := func() {
		ensembles.mu.Lock()
		if e != nil {
			ensembles.idle = append(ensembles.idle, e)
		}
		ensembles.mu.Unlock()
		<-ensembles.free
	}
	if e == nil {
		dir, err := os.MkdirTemp("", "execlock-zookeeper-")
		if err != nil {
			release()
			return nil, err
		}
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		e, err = o.Options.Start(sctx, backend.Plan{Recipe: p.Recipe, Members: p.Members, Resource: p.Resource, Dir: dir, LogDir: filepath.Join(dir, "logs")})
		cancel()
		ensembles.mu.Lock()
		ensembles.dirs = append(ensembles.dirs, dir)
		if err == nil {
			ensembles.all = append(ensembles.all, e)
		}
		ensembles.mu.Unlock()
		if err != nil {
			e = nil
			release()
			return nil, err
		}
	}
	l, err := links.Start(io.Discard)
	if err != nil {
		release()
		return nil, err
	}
	st := *e
	st.Prefix = prefix
	st.Workload = resourceLinks{st.Workload, l}
	st.Close = func() error {
		defer release()
		return l.Close()
	}
	return &st, nil
}

// parallel is the number of tests run at once (-test.parallel).
func parallel() int {
	n, _ := strconv.Atoi(flag.Lookup("test.parallel").Value.String())
	return n
}

// closeEnsembles stops the shared ensembles.
func closeEnsembles() {
	for _, e := range ensembles.all {
		e.Close()
	}
	for _, d := range ensembles.dirs {
		os.RemoveAll(d)
	}
}

// resourceLinks is an ensemble's workload backend with the clients'
// links to the resource in the run's own toxiproxy.
type resourceLinks struct {
	workload.Backend
	links *links.Links
}

func (r resourceLinks) ResourceProxy(client, upstream string) (string, error) {
	return r.links.Proxy(links.ResourceName(client), upstream)
}
