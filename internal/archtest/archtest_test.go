package archtest

import (
	"os"
	"strings"
	"testing"
)

// TestImportGraph: no component of kubelab imports another, and no leaf imports a
// component, in the module's non-test code.
func TestImportGraph(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := ModuleRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"internal/kubelet", "internal/apiserver", "internal/cluster", "internal/util/worker"} {
		if _, ok := g[want]; !ok {
			t.Fatalf("the graph lacks %s: %d packages read from %s", want, len(g), root)
		}
	}
	for _, v := range Check(g) {
		t.Error(v)
	}
}

// The checker fails on a component importing another, on a leaf importing a component
// and on anything but a composer importing a composer, naming the pair; it accepts
// imports within a component, of leaves, by composers, and the allowed exception.
func TestCheckNamesTheBrokenPairs(t *testing.T) {
	g := Graph{
		"internal/kubelet":                  {"internal/kubelet/server", "internal/util/volumeutil", "internal/controller/attachdetach"},
		"internal/kubelet/pluginmanager":    {"internal/kubelet", "internal/csi/sidecar/attacher", "internal/csi/client"},
		"internal/kubelet/server":           nil,
		"internal/controller/attachdetach":  {"internal/util/worker", "internal/controller/expectations"},
		"internal/controller/replication":   {"internal/controller/replicaset"},
		"internal/controller/replicaset":    {"internal/controller/expectations"},
		"internal/controller/expectations":  nil,
		"internal/csi/sidecar/attacher":     {"internal/csi/client"},
		"internal/csi/client":               nil,
		"internal/util/worker":              nil,
		"internal/util/volumeutil":          nil,
		"internal/util/podutil":             {"internal/apiserver"},
		"internal/apiserver":                {"internal/cluster"},
		"internal/cluster":                  {"internal/kubelet", "internal/apiserver", "internal/controllermanager"},
		"internal/controllermanager":        {"internal/controller/attachdetach", "internal/controller/replicaset"},
		"cmd/kubelab":                       {"internal/app"},
		"internal/app":                      {"internal/cluster", "internal/kubelet"},
		"internal/something/new":            {"internal/util/worker"},
		"internal/kubelet/kuberuntime/fake": {"internal/hollow"},
	}
	want := []string{
		"internal/apiserver imports internal/cluster: only the composers import the composers",
		"internal/kubelet imports internal/controller/attachdetach: components meet only on the wire",
		"internal/kubelet imports internal/csi/sidecar/attacher (internal/kubelet/pluginmanager imports internal/csi/sidecar/attacher): components meet only on the wire",
		"internal/util/podutil imports internal/apiserver: a leaf imports no component",
	}
	var got []string
	for _, v := range Check(g) {
		got = append(got, v.Error())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestClassify(t *testing.T) {
	for pkg, want := range map[string]struct {
		kind Kind
		name string
	}{
		"internal/kubelet/pluginmanager":     {Component, "internal/kubelet"},
		"internal/kubeletx":                  {Leaf, "internal/kubeletx"},
		"internal/controller/job":            {Component, "internal/controller/job"},
		"internal/controller/controllertest": {Leaf, "internal/controller/controllertest"},
		"internal/csi/sidecar/provisioner":   {Component, "internal/csi/sidecar/provisioner"},
		"internal/csi/driver":                {Component, "internal/csi/driver"},
		"internal/csi/client":                {Leaf, "internal/csi/client"},
		"internal/csi/calllog":               {Leaf, "internal/csi/calllog"},
		"internal/apiserver/apiservertest":   {Component, "internal/apiserver"},
		"internal/controllermanager":         {Composer, "internal/controllermanager"},
		"cmd/kubelab-cni":                    {Composer, "cmd"},
		"internal/hollow":                    {Leaf, "internal/hollow"},
	} {
		if kind, name := Classify(pkg); kind != want.kind || name != want.name {
			t.Errorf("%s: %v %s, want %v %s", pkg, kind, name, want.kind, want.name)
		}
	}
}
