package etcd

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/resource"
)

// TxnMode is the etcd-txn resource's mode: the protected values live in
// etcd, and every write is a Txn guarded by the lock (Txn); no HTTP store
// is started.
const TxnMode resource.Mode = "etcd-txn"

// Txn is a client of the etcd-txn resource: the protected value of each
// key lives in etcd itself, under a data prefix, and every write is a Txn
// that commits only if the writer's lock grant is still current
// (If(mutex.IsOwner()) or the recipe's equivalent compare on its lock key):
// etcd's documented way to fence inside its own keyspace, as in Jepsen's
// lock-etcd-set. A write whose compare fails is rejected
// (resource.ErrRejected), like a stale token at the fenced HTTP store.
// Reads are plain Gets.
//
// For a lock that offers no compare, WriteFenced fences by token instead:
// etcd keeps the highest token accepted per key beside the value, and the
// Txn accepts a write only if its token is at least that.
type Txn struct {
	cli    *clientv3.Client
	prefix string
}

// TxnPrefix is where the etcd-txn resource keeps its values for locks
// whose keys live under lockPrefix: beside that prefix, not under it, so
// that no lock recipe ever waits on a data key.
func TxnPrefix(lockPrefix string) string {
	return strings.TrimSuffix(lockPrefix, "/") + "-data/"
}

// NewTxn returns a client of the etcd-txn resource whose values live under
// prefix (see TxnPrefix), through cli.
func NewTxn(cli *clientv3.Client, prefix string) *Txn { return &Txn{cli: cli, prefix: prefix} }

// DataKey is the etcd key holding key's value.
func (e *Txn) DataKey(key string) string { return e.prefix + "value/" + key }

// fenceKey is the etcd key holding the highest token WriteFenced accepted
// for key, zero-padded so that etcd's byte-wise comparison orders tokens.
func (e *Txn) fenceKey(key string) string { return e.prefix + "fence/" + key }

func padToken(t int64) string { return fmt.Sprintf("%020d", t) }

// Read returns key's value (0 if it was never written). The token is not
// needed: the guarded Txn of the write fences it.
func (e *Txn) Read(ctx context.Context, key string, _ int64) (int64, error) {
	resp, err := e.cli.Get(ctx, e.DataKey(key))
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	v, err := strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("resource: value of %s: %w", key, err)
	}
	return v, nil
}

// Write stores value under key if guard holds, in one Txn. It returns
// resource.ErrRejected if the guard failed; any other error leaves the outcome
// unknown.
func (e *Txn) Write(ctx context.Context, key string, value int64, guard clientv3.Cmp) error {
	resp, err := e.cli.Txn(ctx).If(guard).Then(clientv3.OpPut(e.DataKey(key), strconv.FormatInt(value, 10))).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w (etcd-txn: the lock's compare failed)", resource.ErrRejected)
	}
	return nil
}

// WriteFenced stores value under key if token is at least the highest token
// accepted for key, and raises that to token, in one Txn. It returns
// resource.ErrRejected for a stale token.
func (e *Txn) WriteFenced(ctx context.Context, key string, token, value int64) error {
	fk := e.fenceKey(key)
	put := []clientv3.Op{
		clientv3.OpPut(e.DataKey(key), strconv.FormatInt(value, 10)),
		clientv3.OpPut(fk, padToken(token)),
	}
	// A missing fence key is token 0; etcd's value compare fails on a
	// missing key, hence the two branches.
	resp, err := e.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(fk), "=", 0)).
		Then(put...).
		Else(clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Value(fk), "<", padToken(token+1))}, put, nil)).
		Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded && !resp.Responses[0].GetResponseTxn().Succeeded {
		return fmt.Errorf("%w (etcd-txn: token %d below the highest accepted)", resource.ErrRejected, token)
	}
	return nil
}
