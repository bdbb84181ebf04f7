package apiserver

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// reservation is one reserved value: its key, the owner written in it ("<namespace>/<name>"
// of the Service) and the etcd revision it was last written at, which changes whenever
// the key is reserved anew.
type reservation struct {
	key, owner string
	revision   int64
}

// reservations keep what the service allocator handed out, one key per value, so that
// every API server sharing the store sees the same allocations. etcdReservations is the
// real one; tests use a map.
type reservations interface {
	// reserve creates key holding owner unless key exists; false when it does.
	reserve(ctx context.Context, key, owner string) (bool, error)
	// release deletes key if it still holds owner, so that a release never takes a
	// value from another Service.
	release(ctx context.Context, key, owner string) error
	// releaseIfUnchanged deletes key if it is still at revision; false when it is not
	// (gone, or reserved anew).
	releaseIfUnchanged(ctx context.Context, key string, revision int64) (bool, error)
	// list returns every key under prefix.
	list(ctx context.Context, prefix string) ([]reservation, error)
}

// etcdReservations keeps reservations as etcd keys, each written in a transaction that
// checks it first.
type etcdReservations struct{ client *clientv3.Client }

func (e etcdReservations) reserve(ctx context.Context, key, owner string) (bool, error) {
	resp, err := e.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, owner)).
		Commit()
	if err != nil {
		return false, fmt.Errorf("reserve %s: %w", key, err)
	}
	return resp.Succeeded, nil
}

func (e etcdReservations) release(ctx context.Context, key, owner string) error {
	_, err := e.client.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), "=", owner)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return fmt.Errorf("release %s: %w", key, err)
	}
	return nil
}

func (e etcdReservations) releaseIfUnchanged(ctx context.Context, key string, revision int64) (bool, error) {
	resp, err := e.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", revision)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return false, fmt.Errorf("release %s: %w", key, err)
	}
	return resp.Succeeded, nil
}

func (e etcdReservations) list(ctx context.Context, prefix string) ([]reservation, error) {
	resp, err := e.client.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	out := make([]reservation, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, reservation{key: string(kv.Key), owner: string(kv.Value), revision: kv.ModRevision})
	}
	return out, nil
}
