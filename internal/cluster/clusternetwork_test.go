package cluster

import (
	"context"
	"strings"
	"testing"

	"github.com/kubelab/kubelab/internal/vpc"
)

// The API server's connections into the cluster start in the first node whose
// namespace exists: a removed node's namespace is passed over.
func TestFirstExisting(t *testing.T) {
	present := map[string]bool{"/run/netns/b": true, "/run/netns/c": true}
	exists := func(p string) bool { return present[p] }
	for _, tc := range []struct {
		paths  []string
		want   string
		wantOK bool
	}{
		{[]string{"/run/netns/a", "/run/netns/b", "/run/netns/c"}, "/run/netns/b", true},
		{[]string{"/run/netns/c", "/run/netns/b"}, "/run/netns/c", true},
		{[]string{"/run/netns/a"}, "", false},
		{nil, "", false},
	} {
		if got, ok := firstExisting(tc.paths, exists); got != tc.want || ok != tc.wantOK {
			t.Errorf("firstExisting(%v) = %q, %v; want %q, %v", tc.paths, got, ok, tc.want, tc.wantOK)
		}
	}
}

// Before the nodes are named, or once none of their namespaces exists, a dial fails at
// once with a reason instead of leaving from the machine's namespace.
func TestClusterNetworkWithoutNodes(t *testing.T) {
	v, err := vpc.New(vpc.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	n := newClusterNetwork(v)
	n.exists = func(string) bool { return false }
	if _, err := n.DialContext(context.Background(), "tcp", "10.96.0.1:443"); err == nil || !strings.Contains(err.Error(), "no node's network namespace") {
		t.Errorf("dial before the nodes are known: %v", err)
	}
	n.setNodes([]Node{{Name: "ip-172-31-0-10.ec2.internal"}})
	if _, err := n.DialContext(context.Background(), "tcp", "10.96.0.1:443"); err == nil || !strings.Contains(err.Error(), "ip-172-31-0-10.ec2.internal") {
		t.Errorf("dial with no node namespace: %v", err)
	}
}
