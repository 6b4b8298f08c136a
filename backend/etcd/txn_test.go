package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locktest/locktest/backend/etcd/cluster"
	"github.com/locktest/locktest/resource"
)

func TestTxnResource(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := cluster.Start(ctx, cluster.Config{LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cli, err := cl.Client("c0")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	e := NewTxn(cli, TxnPrefix("/locks/"))
	if v, err := e.Read(ctx, "k", 0); err != nil || v != 0 {
		t.Fatalf("read of a fresh key: %d %v", v, err)
	}

	// Guarded by a compare.
	put, err := cli.Put(ctx, "/locks/k", "holder")
	if err != nil {
		t.Fatal(err)
	}
	held := clientv3.Compare(clientv3.CreateRevision("/locks/k"), "=", put.Header.Revision)
	if err := e.Write(ctx, "k", 1, held); err != nil {
		t.Fatalf("guarded write: %v", err)
	}
	stale := clientv3.Compare(clientv3.CreateRevision("/locks/k"), "=", put.Header.Revision-1)
	if err := e.Write(ctx, "k", 2, stale); !errors.Is(err, resource.ErrRejected) {
		t.Fatalf("write with a failing compare: %v, want rejected", err)
	}
	if v, _ := e.Read(ctx, "k", 0); v != 1 {
		t.Errorf("value %d, want 1", v)
	}

	// Fenced by token.
	for _, w := range []struct {
		token, value int64
		ok           bool
	}{{5, 10, true}, {3, 11, false}, {5, 12, true}, {40, 13, true}, {9, 14, false}} {
		err := e.WriteFenced(ctx, "f", w.token, w.value)
		switch {
		case w.ok && err != nil:
			t.Errorf("token %d: %v", w.token, err)
		case !w.ok && !errors.Is(err, resource.ErrRejected):
			t.Errorf("token %d: %v, want rejected", w.token, err)
		}
	}
	if v, _ := e.Read(ctx, "f", 0); v != 13 {
		t.Errorf("value %d, want 13", v)
	}
	if _, err := resource.Start(TxnMode); err == nil {
		t.Error("an HTTP store started in etcd-txn mode")
	}
	if _, err := resource.ParseMode(string(TxnMode)); err == nil {
		t.Error("the HTTP store takes the etcd-txn mode")
	}
}
