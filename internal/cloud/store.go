package cloud

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Buckets of state.db; each value is the JSON of one object, keyed by its id.
var (
	bucketVolumes       = []byte("volumes")
	bucketInstances     = []byte("instances")
	bucketSnapshots     = []byte("snapshots")
	bucketModifications = []byte("modifications")
	bucketTokens        = []byte("tokens")
	bucketMeta          = []byte("meta")
	bucketVPCs          = []byte("vpcs")
	bucketSubnets       = []byte("subnets")
	bucketLoadBalancers = []byte("loadbalancers")
	bucketTargetGroups  = []byte("targetgroups")
	bucketListeners     = []byte("listeners")
	bucketRules         = []byte("rules")
	bucketOIDCProviders = []byte("iam-oidc-providers")
	bucketRoles         = []byte("iam-roles")
	bucketPolicies      = []byte("iam-policies")
	bucketProfiles      = []byte("iam-instance-profiles")
	bucketSessions      = []byte("sts-sessions")
)

// store persists the cloud's objects in a bbolt file.
type store struct{ db *bolt.DB }

func openStore(path string) (*store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open state %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketVolumes, bucketInstances, bucketSnapshots, bucketModifications, bucketTokens, bucketMeta,
			bucketVPCs, bucketSubnets, bucketLoadBalancers, bucketTargetGroups, bucketListeners, bucketRules,
			bucketOIDCProviders, bucketRoles, bucketPolicies, bucketProfiles, bucketSessions} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("init state %s: %w", path, err)
	}
	return &store{db: db}, nil
}

func (s *store) close() error { return s.db.Close() }

// change is one write: a put of val (JSON) under key, or a delete when val is nil.
type change struct {
	bucket []byte
	key    string
	val    any
}

func put(bucket []byte, key string, val any) change { return change{bucket, key, val} }
func del(bucket []byte, key string) change          { return change{bucket: bucket, key: key} }

// apply writes all changes in one transaction: all or nothing.
func (s *store) apply(changes ...change) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, c := range changes {
			b := tx.Bucket(c.bucket)
			if c.val == nil {
				if err := b.Delete([]byte(c.key)); err != nil {
					return fmt.Errorf("delete %s/%s: %w", c.bucket, c.key, err)
				}
				continue
			}
			data, err := json.Marshal(c.val)
			if err != nil {
				return fmt.Errorf("encode %s/%s: %w", c.bucket, c.key, err)
			}
			if err := b.Put([]byte(c.key), data); err != nil {
				return fmt.Errorf("put %s/%s: %w", c.bucket, c.key, err)
			}
		}
		return nil
	})
}

// loadAll decodes every value of bucket with newT and hands it to add.
func loadAll[T any](s *store, bucket []byte, add func(*T)) error {
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
			t := new(T)
			if err := json.Unmarshal(v, t); err != nil {
				return fmt.Errorf("decode %s/%s: %w", bucket, k, err)
			}
			add(t)
			return nil
		})
	})
}

// meta reads a string from the meta bucket ("" when absent).
func (s *store) meta(key string) (string, error) {
	var out string
	err := s.db.View(func(tx *bolt.Tx) error {
		out = string(tx.Bucket(bucketMeta).Get([]byte(key)))
		return nil
	})
	return out, err
}

func (s *store) setMeta(kv map[string]string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for k, v := range kv {
			if err := tx.Bucket(bucketMeta).Put([]byte(k), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
}
