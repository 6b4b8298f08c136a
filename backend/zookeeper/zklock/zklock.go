// Package zklock is the API a ZooKeeper lock recipe is written against
// (Client, the lock.Env.Conn of a ZooKeeper run, opens go-zookeeper
// sessions over the client's own links; Session follows one and says when
// it is lost), and ZooKeeper's built-in recipes (Builtins).
//
// The standard lock, as ZooKeeper's recipes page, Curator's
// InterProcessMutex and kazoo's Lock do it: each contender creates an
// ephemeral sequential child of the lock's node and holds the lock while its
// child has the lowest sequence number; a waiter watches the child just
// before its own, and lists the children again when it goes. Children are
// created in Curator's protected mode: a unique prefix in the name, so that
// a create whose reply was lost is found again instead of being left
// behind, owned by the live session, ahead of everyone in the queue. The
// fencing token is the child's creation zxid, which grows with every grant
// of the ensemble; the grant's decision zxid is the lock node's Pzxid in
// the listing that showed the child first (every child's deletion up to it
// is reflected in that listing).
package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locktest/locktest/lock"
)

// The built-in recipes' names.
const (
	LockName        = "zk-lock"
	HerdName        = "zk-herd"
	UnprotectedName = "zk-unprotected"
	NoRecheckName   = "zk-no-recheck"
)

// Builtins are ZooKeeper's built-in recipes, the correct ones first.
var Builtins = []lock.Builtin{
	{Name: LockName, Doc: "the standard lock of ZooKeeper's recipes page (Curator's InterProcessMutex, kazoo's Lock): an ephemeral sequential child per contender, held while it is the lowest, each waiter watching the child before its own; children created in Curator's protected mode; the token is the child's creation zxid.", New: func() lock.Recipe { return Recipe(LockName, Options{}) }},
	{Name: HerdName, Doc: "the same queue, but every waiter watches all the lock's children and checks again on any change: each release wakes every waiter (the herd effect).", New: func() lock.Recipe { return Recipe(HerdName, Options{Herd: true}) }},
	{Name: UnprotectedName, Doc: "broken on purpose: plain sequential children; a create whose reply was lost is created again, leaving a ghost znode of the live session in the queue, which blocks every waiter until the session ends (ZOOKEEPER-1262).", New: func() lock.Recipe { return Recipe(UnprotectedName, Options{Unprotected: true}) }, Broken: true},
	{Name: NoRecheckName, Doc: "broken on purpose: a waiter takes the lock as soon as the child it watches is deleted, without listing the children again; when that child was a waiter that gave up or whose session expired, the holder ahead still holds the lock.", New: func() lock.Recipe { return Recipe(NoRecheckName, Options{NoRecheck: true}) }, Broken: true},
}

// Options choose a variant of the standard lock.
type Options struct {
	// Herd makes every waiter watch the lock's children, and re-check on
	// every change: each release (and each waiter that comes or goes)
	// wakes every waiter, the herd effect.
	Herd bool
	// Unprotected creates plain sequential children and, when a create's
	// reply is lost, creates again: broken on purpose (the ghost node).
	// A create the servers applied but whose reply was lost leaves a node
	// owned by the client's live session ahead of its second one: the
	// client waits behind its own ghost, and every later waiter behind
	// both, until the session ends.
	Unprotected bool
	// NoRecheck takes the lock as soon as the watched predecessor is
	// deleted, without listing the children again: broken on purpose. A
	// predecessor that was itself a waiter (it gave up, or its session
	// expired) leaves the holder ahead of it holding the lock, and the
	// woken waiter holds it too.
	NoRecheck bool
}

// Recipe returns the standard lock in the variant o, called name. Each
// locker opens its own session (a crash orphans it, Close ends it), and
// its lock node for name is env.Prefix+name.
func Recipe(name string, o Options) lock.Recipe {
	return lock.RecipeFunc(name, func(ctx context.Context, env lock.Env) (lock.Locker, error) {
		c, err := Env(env)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(env.Prefix, "/") {
			return nil, fmt.Errorf("zklock: the lock prefix %q is not a znode path", env.Prefix)
		}
		s, err := c.Connect(ctx, time.Duration(env.TTL)*time.Second)
		if err != nil {
			return nil, err
		}
		return &Mutex{Session: s, Options: o, prefix: env.Prefix}, nil
	})
}

// Mutex is one client's standard lock over one session (a lock.Locker and
// lock.Session).
type Mutex struct {
	*Session
	Options
	prefix string
	// Wakeups counts the watch events that woke a waiter of this Mutex.
	Wakeups atomic.Int64
}

var (
	_ lock.Locker  = (*Mutex)(nil)
	_ lock.Session = (*Mutex)(nil)
)

// Held is a grant of a Mutex. Besides lock.Held, it tells its node
// (lock.Keyed), the zxid of the state it was decided on (lock.Decided),
// when its session is lost (lock.Watched) and the session (SessionID).
type Held struct {
	s       *Session
	node    string
	token   int64
	decided int64
}

var (
	_ Owned        = (*Held)(nil)
	_ Owned        = (*Mutex)(nil)
	_ lock.Keyed   = (*Held)(nil)
	_ lock.Decided = (*Held)(nil)
	_ lock.Watched = (*Held)(nil)
)

// Token is the node's creation zxid.
func (h *Held) Token() int64 { return h.token }

// Key is the node's path.
func (h *Held) Key() string { return h.node }

// Revision is the decision zxid: the lock node's Pzxid in the listing that
// showed this node first.
func (h *Held) Revision() int64 { return h.decided }

// Done is closed once the grant's session is lost.
func (h *Held) Done() <-chan struct{} { return h.s.Done() }

// SessionID is the id of the session that owns the node.
func (h *Held) SessionID() int64 { return h.s.SessionID() }

// Owned is implemented by a Locker or a Held that tells the session it
// keeps (a Mutex, its Held): the backend names it, as the history's
// lease, and the observer tells the owner of each node by it.
type Owned interface {
	SessionID() int64
}

// Release deletes the node. A retried delete is safe, unlike etcd#22082's:
// the node's name is this grant's alone, so a retry deletes this grant's
// node or finds none (it went with its session: released all the same).
func (h *Held) Release(ctx context.Context) error {
	for {
		err := h.s.Conn.Delete(h.node, -1)
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode):
			return nil
		case errors.Is(err, zk.ErrSessionExpired):
			return nil // the node went with the session
		case !transient(err):
			return fmt.Errorf("zklock: deleting %s: %w", h.node, err)
		}
		if err := h.s.lost(); err != nil {
			return fmt.Errorf("zklock: deleting %s: %w", h.node, err)
		}
		if err := h.s.sleep(ctx, retry); err != nil {
			return fmt.Errorf("zklock: deleting %s: %w", h.node, err)
		}
	}
}

// lost is the session's loss, if it is lost.
func (s *Session) lost() error {
	select {
	case <-s.gone:
		return s.Err()
	default:
		return nil
	}
}

// lockName is the stem of every child's name; ZooKeeper appends the
// 10-digit sequence number.
const lockName = "lock-"

// retry is the wait before retrying a request that failed for want of a
// connection.
const retry = 20 * time.Millisecond

// transient says whether err means the connection failed, not the request:
// it may or may not have been applied.
func transient(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer)
}

// notAcquired is a definite failure: the session's node is gone, or never
// was.
func notAcquired(why error) error { return fmt.Errorf("%w: %w", lock.ErrNotAcquired, why) }

// created counts the creates of every Mutex, for protected names.
var created atomic.Int64

// Acquire queues for lock name and returns once this client holds it. On
// ctx's end it deletes its node (best effort) and returns ctx's error. An
// error wrapping lock.ErrNotAcquired is definite: the session is lost, or
// its node was deleted while it waited (the contract's etcd#11456 lesson:
// a waiter whose node is gone is never told it holds the lock).
func (m *Mutex) Acquire(ctx context.Context, name string) (lock.Held, error) {
	if err := m.lost(); err != nil {
		return nil, notAcquired(err)
	}
	dir := strings.TrimSuffix(m.prefix+name, "/")
	node, err := m.create(ctx, dir)
	if err != nil {
		return nil, err
	}
	// The node's creation zxid is read beside the wait: go-zookeeper
	// pipelines the two requests, one round trip for both.
	type read struct {
		czxid int64
		err   error
	}
	token := make(chan read, 1)
	rctx, cancel := context.WithCancel(ctx)
	go func() {
		czxid, err := m.czxid(rctx, node)
		token <- read{czxid, err}
	}()
	decided, err := m.wait(ctx, dir, node)
	if err != nil {
		cancel()
	}
	t := <-token
	cancel()
	if err == nil {
		err = t.err
	}
	if err != nil {
		if !errors.Is(err, lock.ErrNotAcquired) {
			m.abandon(node)
		}
		return nil, err
	}
	return &Held{s: m.Session, node: node, token: t.czxid, decided: decided}, nil
}

// abandon deletes the node of an Acquire that gave up, within a second:
// else it would hold the queue up until the session ends.
func (m *Mutex) abandon(node string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	(&Held{s: m.Session, node: node}).Release(ctx)
}

// create creates this contender's node under dir and returns its path;
// protected, it finds its node again after a lost reply.
func (m *Mutex) create(ctx context.Context, dir string) (string, error) {
	prefix := dir + "/" + lockName
	var id string
	if !m.Unprotected {
		// Curator's protected form is _c_<uuid>-; here the session's id
		// and a count make it unique, and name the owner.
		id = fmt.Sprintf("_c_%x-%d-", m.SessionID(), created.Add(1))
		prefix = dir + "/" + id + lockName
	}
	acl := zk.WorldACL(zk.PermAll)
	for {
		p, err := m.Conn.Create(prefix, nil, zk.FlagEphemeral|zk.FlagSequence, acl)
		switch {
		case err == nil:
			return p, nil
		case errors.Is(err, zk.ErrNoNode):
			if err := m.makeDir(ctx, dir); err != nil {
				return "", err
			}
			continue
		case errors.Is(err, zk.ErrSessionExpired):
			return "", notAcquired(err) // anything created went with the session
		case !transient(err):
			return "", fmt.Errorf("zklock: creating under %s: %w", dir, err)
		case m.Unprotected:
			// The mistake: no lookup; the loop creates a second node.
		default:
			p, err := m.find(ctx, dir, id)
			if err != nil {
				return "", err
			}
			if p != "" {
				return p, nil
			}
		}
		if err := m.lost(); err != nil {
			return "", notAcquired(err)
		}
		if err := m.sleep(ctx, retry); err != nil {
			return "", err
		}
	}
}

// find looks for this contender's node by its unique prefix once a
// connection is back; "" when the create was not applied. It syncs first:
// the server answering may be behind the one that applied the create.
func (m *Mutex) find(ctx context.Context, dir, id string) (string, error) {
	for {
		_, err := m.Conn.Sync(dir)
		var kids []string
		if err == nil {
			kids, _, err = m.Conn.Children(dir)
		}
		switch {
		case err == nil:
			for _, k := range kids {
				if strings.HasPrefix(k, id) {
					return dir + "/" + k, nil
				}
			}
			return "", nil
		case errors.Is(err, zk.ErrSessionExpired):
			return "", notAcquired(err)
		case errors.Is(err, zk.ErrNoNode):
			return "", nil
		case !transient(err):
			return "", fmt.Errorf("zklock: listing %s: %w", dir, err)
		}
		if err := m.lost(); err != nil {
			return "", notAcquired(err)
		}
		if err := m.sleep(ctx, retry); err != nil {
			return "", err
		}
	}
}

// makeDir creates dir and its parents, as persistent nodes.
func (m *Mutex) makeDir(ctx context.Context, dir string) error {
	p := ""
	for part := range strings.SplitSeq(strings.Trim(dir, "/"), "/") {
		p += "/" + part
		for {
			_, err := m.Conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll))
			if err == nil || errors.Is(err, zk.ErrNodeExists) {
				break
			}
			if !transient(err) {
				return fmt.Errorf("zklock: creating %s: %w", p, err)
			}
			if err := m.lost(); err != nil {
				return notAcquired(err)
			}
			if err := m.sleep(ctx, retry); err != nil {
				return err
			}
		}
	}
	return nil
}

// czxid reads node's creation zxid: go-zookeeper has no create2, so Create
// does not return it.
func (m *Mutex) czxid(ctx context.Context, node string) (int64, error) {
	for {
		ok, st, err := m.Conn.Exists(node)
		switch {
		case err == nil && !ok:
			return 0, notAcquired(fmt.Errorf("zklock: %s is gone (its session expired)", node))
		case err == nil:
			return st.Czxid, nil
		case errors.Is(err, zk.ErrSessionExpired):
			return 0, notAcquired(err)
		case !transient(err):
			return 0, fmt.Errorf("zklock: reading %s: %w", node, err)
		}
		if err := m.lost(); err != nil {
			return 0, notAcquired(err)
		}
		if err := m.sleep(ctx, retry); err != nil {
			return 0, err
		}
	}
}

// wait waits until node is the first child of dir and returns the lock
// node's Pzxid in the listing that showed it.
func (m *Mutex) wait(ctx context.Context, dir, node string) (int64, error) {
	var pzxid int64 // of the last listing
	for {
		var (
			kids    []string
			st      *zk.Stat
			changed <-chan zk.Event
			err     error
		)
		if m.Herd {
			kids, st, changed, err = m.Conn.ChildrenW(dir)
		} else {
			kids, st, err = m.Conn.Children(dir)
		}
		if err != nil {
			if err := m.retryable(ctx, err); err != nil {
				return 0, err
			}
			continue
		}
		pzxid = st.Pzxid
		slices.SortFunc(kids, func(a, b string) int { return int(seq(a) - seq(b)) })
		i := slices.IndexFunc(kids, func(k string) bool { return dir+"/"+k == node })
		switch {
		case i < 0:
			return 0, notAcquired(fmt.Errorf("zklock: %s is gone while it waited (its session expired or was closed)", node))
		case i == 0:
			return pzxid, nil
		}
		if !m.Herd {
			var ok bool
			ok, _, changed, err = m.Conn.ExistsW(dir + "/" + kids[i-1])
			if err != nil {
				if err := m.retryable(ctx, err); err != nil {
					return 0, err
				}
				continue
			}
			if !ok {
				continue // deleted in between
			}
		}
		select {
		case ev := <-changed:
			m.Wakeups.Add(1)
			switch {
			case errors.Is(ev.Err, zk.ErrSessionExpired):
				return 0, notAcquired(ev.Err)
			case ev.Err != nil && !transient(ev.Err):
				return 0, fmt.Errorf("zklock: watching %s: %w", dir, ev.Err)
			case m.NoRecheck && ev.Type == zk.EventNodeDeleted:
				// The mistake: the predecessor is gone, so this one
				// must be first. The decision zxid is the lock node's
				// Pzxid now, at or after the deletion that woke it
				// (watch events carry no zxid): its children unread.
				return m.pzxid(ctx, dir)
			}
		case <-m.gone:
			return 0, notAcquired(m.Err())
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// pzxid reads dir's Pzxid: the zxid of its children's last change.
func (m *Mutex) pzxid(ctx context.Context, dir string) (int64, error) {
	for {
		_, st, err := m.Conn.Exists(dir)
		if err == nil && st != nil {
			return st.Pzxid, nil
		}
		if err == nil {
			err = zk.ErrNoNode
		}
		if err := m.retryable(ctx, err); err != nil {
			return 0, err
		}
	}
}

// retryable waits before a retry after a request failed for want of a
// connection; any other failure, or the session's loss, it returns.
func (m *Mutex) retryable(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, zk.ErrSessionExpired):
		return notAcquired(err)
	case !transient(err):
		return fmt.Errorf("zklock: %w", err)
	}
	if err := m.lost(); err != nil {
		return notAcquired(err)
	}
	return m.sleep(ctx, retry)
}

// seq is a child's sequence number, the 10 digits ZooKeeper appends:
// children sort by it, not by name (a protected name begins with an id).
func seq(name string) int64 {
	i := strings.LastIndex(name, lockName)
	if i < 0 {
		return -1
	}
	n, err := strconv.ParseInt(name[i+len(lockName):], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// sleep waits d on the client's clock, or until ctx ends.
func (s *Session) sleep(ctx context.Context, d time.Duration) error {
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
