package cni

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

func TestBridgeName(t *testing.T) {
	a, b := BridgeName("/d1/ip-172-31-0-11.ec2.internal"), BridgeName("/d2/ip-172-31-0-11.ec2.internal")
	if a == b || len(a) > 15 || a != BridgeName("/d1/ip-172-31-0-11.ec2.internal") {
		t.Fatalf("bridge names %q, %q: want distinct, stable, at most 15 bytes", a, b)
	}
}

func TestConflist(t *testing.T) {
	b, err := Conflist("kl0123456789", "10.244.1.0/24", "/data/ipam")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Name    string `json:"name"`
		Plugins []struct {
			Type      string `json:"type"`
			Bridge    string `json:"bridge"`
			IsGateway bool   `json:"isGateway"`
			IPAM      struct {
				Type    string                `json:"type"`
				Ranges  [][]map[string]string `json:"ranges"`
				DataDir string                `json:"dataDir"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	p := c.Plugins[0]
	if p.Type != "bridge" || p.Bridge != "kl0123456789" || c.Name != "kubelab-kl0123456789" || p.IsGateway || p.IPAM.Type != "host-local" ||
		p.IPAM.Ranges[0][0]["subnet"] != "10.244.1.0/24" || p.IPAM.DataDir != "/data/ipam" {
		t.Fatalf("conflist %s", b)
	}
	for _, bad := range []string{"", "10.244.1.0", "fd00::/64", "10.0.0.0/31"} {
		if _, err := Conflist("kl0123456789", bad, "/d"); err == nil {
			t.Errorf("pod CIDR %q: no error", bad)
		}
	}
}

func TestWriterWaitsForPodCIDR(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	client := fake.NewClientset(node)
	looked := make(chan struct{}, 1)
	client.PrependReactor("get", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		select {
		case looked <- struct{}{}:
		default:
		}
		return false, nil, nil
	})
	dir := t.TempDir()
	w, err := New(Config{NodeName: "n1", Bridge: "kl0123456789", ConfDir: filepath.Join(dir, "net.d"), DataDir: filepath.Join(dir, "ipam")}, client)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// No file while the node has no podCIDR: Run has looked at the node and still waits.
	<-looked
	select {
	case err := <-done:
		t.Fatalf("Run returned before the node had a podCIDR: %v", err)
	default:
	}
	node.Spec.PodCIDR = "10.244.2.0/24"
	if _, err := os.Stat(filepath.Join(dir, "net.d", ConfFile)); !os.IsNotExist(err) {
		t.Fatalf("conf written before the podCIDR: %v", err)
	}
	if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "net.d", ConfFile))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Conflist("kl0123456789", "10.244.2.0/24", filepath.Join(dir, "ipam"))
	if string(b) != string(want) {
		t.Fatalf("conf %s, want %s", b, want)
	}
}
