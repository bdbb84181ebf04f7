package ipamd

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestRestore(t *testing.T) {
	cloud := map[netip.Addr]string{
		netip.MustParseAddr("172.31.16.11"): "eni-a",
		netip.MustParseAddr("172.31.16.12"): "eni-a",
		netip.MustParseAddr("172.31.16.20"): "eni-b",
	}
	entries := []CheckpointEntry{
		{ContainerID: "c1", IfName: "eth0", IPv4: "172.31.16.11"},
		{ContainerID: "c2", IfName: "eth0", IPv4: "172.31.16.13"}, // the cloud no longer has it
		{ContainerID: "c3", IfName: "eth0", IPv4: "172.31.16.11"}, // a second holder of c1's
		{ContainerID: "c1", IfName: "eth0", IPv4: "172.31.16.12"}, // c1 again
		{ContainerID: "c4", IfName: "eth0", IPv4: "172.31.16.20"},
		{ContainerID: "c5", IfName: "eth0", IPv4: "not an address"},
	}
	keep, drop := restore(entries, cloud)
	ids := func(es []CheckpointEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.ContainerID+"="+e.IPv4)
		}
		return out
	}
	if got, want := ids(keep), []string{"c1=172.31.16.11", "c4=172.31.16.20"}; !reflect.DeepEqual(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	if got, want := ids(drop), []string{"c2=172.31.16.13", "c3=172.31.16.11", "c1=172.31.16.12", "c5=not an address"}; !reflect.DeepEqual(got, want) {
		t.Errorf("dropped %v, want %v", got, want)
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), CheckpointFile)
	c, err := readCheckpoint(path)
	if err != nil || c.Version != CheckpointVersion || len(c.Allocations) != 0 {
		t.Fatalf("missing checkpoint read as %+v, %v; want an empty one", c, err)
	}
	c.Allocations = []CheckpointEntry{{ContainerID: "c1", IfName: "eth0", NetworkName: "kubelab", IPv4: "172.31.16.11",
		Metadata: CheckpointMetadata{PodNamespace: "default", PodName: "web"}}}
	if err := writeCheckpoint(path, c); err != nil {
		t.Fatal(err)
	}
	got, err := readCheckpoint(path)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("read back %+v, %v; want %+v", got, err, c)
	}
	b, _ := os.ReadFile(path)
	for _, field := range []string{`"version": "vpc-cni-ipam/1"`, `"containerID": "c1"`, `"ipv4": "172.31.16.11"`, `"k8sPodName": "web"`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("checkpoint %s lacks %s", b, field)
		}
	}
	if err := os.WriteFile(path, []byte(`{"version":"other"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readCheckpoint(path); err == nil {
		t.Error("a checkpoint of another version was read")
	}
}
