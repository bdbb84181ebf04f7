package pluginmanager

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/kubelet"
	"github.com/kubelab/kubelab/internal/testutil"
)

func (e *env) csiNode(t *testing.T) (*storagev1.CSINode, bool) {
	t.Helper()
	n, err := e.client.StorageV1().CSINodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return n, true
}

func (e *env) node(t *testing.T) *corev1.Node {
	t.Helper()
	n, err := e.client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (e *env) nodeIDs(t *testing.T) map[string]string {
	t.Helper()
	ids := map[string]string{}
	if v := e.node(t).Annotations[AnnotationNodeID]; v != "" {
		if err := json.Unmarshal([]byte(v), &ids); err != nil {
			t.Fatalf("annotation %s=%q: %v", AnnotationNodeID, v, err)
		}
	}
	return ids
}

// driverEntry returns the CSINode entry of the test driver.
func (e *env) driverEntry(t *testing.T) (storagev1.CSINodeDriver, bool) {
	t.Helper()
	n, ok := e.csiNode(t)
	if !ok {
		return storagev1.CSINodeDriver{}, false
	}
	for _, d := range n.Spec.Drivers {
		if d.Name == testDriver {
			return d, true
		}
	}
	return storagev1.CSINodeDriver{}, false
}

func waitRegistered(t *testing.T, e *env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.m.WaitFor(ctx, testDriver); err != nil {
		t.Fatal(err)
	}
}

// TestRegistration plays the whole registration: nothing is written before the
// registrar's socket appears; then the Node and CSINode carry the driver; its removal
// takes the driver out again; a restarted driver on a new socket registers again.
func TestRegistration(t *testing.T) {
	e := newEnv(t, true)
	sock1 := e.csiSock("csi.sock")
	f1 := newFakeCSI("i-0aaa", csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME, csi.NodeServiceCapability_RPC_EXPAND_VOLUME)
	f1.serve(t, sock1)

	if _, ok := e.csiNode(t); ok {
		t.Fatal("CSINode written before any plugin registered")
	}
	if _, ok := e.m.Endpoint(testDriver); ok {
		t.Fatal("driver registered before its registration socket appeared")
	}
	if got := e.nodeIDs(t); !maps.Equal(got, map[string]string{"other.csi.example.com": "other-1"}) {
		t.Fatalf("node ids before registration = %v", got)
	}

	reg, stopReg := startRegistrar(t, e, sock1)
	waitRegistered(t, e)
	if ep, ok := e.m.Endpoint(testDriver); !ok || ep != sock1 {
		t.Fatalf("Endpoint = %q %v, want %q", ep, ok, sock1)
	}
	n, ok := e.csiNode(t)
	if !ok {
		t.Fatal("no CSINode after registration")
	}
	wantOwner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: testNode, UID: testUID}}
	if !reflect.DeepEqual(n.OwnerReferences, wantOwner) {
		t.Errorf("CSINode owners = %+v, want %+v", n.OwnerReferences, wantOwner)
	}
	want := storagev1.CSINodeDriver{Name: testDriver, NodeID: "i-0aaa", TopologyKeys: []string{zoneKey, corev1.LabelTopologyZone},
		Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](25)}}
	if len(n.Spec.Drivers) != 1 || !apiequality.Semantic.DeepEqual(n.Spec.Drivers[0], want) {
		t.Errorf("CSINode drivers = %+v, want [%+v]", n.Spec.Drivers, want)
	}
	wantIDs := map[string]string{"other.csi.example.com": "other-1", testDriver: "i-0aaa"}
	if got := e.nodeIDs(t); !maps.Equal(got, wantIDs) {
		t.Errorf("node ids = %v, want %v", got, wantIDs)
	}
	labels := e.node(t).Labels
	for k, v := range map[string]string{zoneKey: "us-east-1a", corev1.LabelTopologyZone: "us-east-1a", corev1.LabelHostname: testNode} {
		if labels[k] != v {
			t.Errorf("node label %s=%q, want %q", k, labels[k], v)
		}
	}
	testutil.Eventually(t, "the registrar to hear of its registration", func() bool { return reg.Healthy() == nil })

	// The registrar goes away: the driver leaves the CSINode and the annotation; the
	// topology labels stay.
	stopReg()
	testutil.Eventually(t, "the driver to leave the CSINode", func() bool { _, ok := e.driverEntry(t); return !ok })
	if _, ok := e.m.Endpoint(testDriver); ok {
		t.Error("driver still registered after its socket went")
	}
	if n, ok := e.csiNode(t); !ok || len(n.Spec.Drivers) != 0 {
		t.Errorf("CSINode after unregistration = %+v (exists %v), want it empty", n, ok)
	}
	testutil.Eventually(t, "the node id to leave the annotation", func() bool {
		return maps.Equal(e.nodeIDs(t), map[string]string{"other.csi.example.com": "other-1"})
	})
	if l := e.node(t).Labels; l[zoneKey] != "us-east-1a" {
		t.Errorf("topology label removed: %v", l)
	}

	// The driver restarts on a new socket with a new node id: the entry is updated and
	// the mounter talks to the new socket.
	sock2 := e.csiSock("csi2.sock")
	f2 := newFakeCSI("i-0bbb", csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	f2.maxVolumes = 0
	f2.serve(t, sock2)
	startRegistrar(t, e, sock2)
	waitRegistered(t, e)
	if ep, _ := e.m.Endpoint(testDriver); ep != sock2 {
		t.Fatalf("Endpoint after re-registration = %q, want %q", ep, sock2)
	}
	d, ok := e.driverEntry(t)
	if !ok || d.NodeID != "i-0bbb" || d.Allocatable != nil {
		t.Errorf("CSINode entry after re-registration = %+v, want node id i-0bbb and no allocatable", d)
	}
	if got := e.nodeIDs(t)[testDriver]; got != "i-0bbb" {
		t.Errorf("node id annotation after re-registration = %q", got)
	}
	v := &kubelet.Volume{PVName: "pv-1", Driver: testDriver, Handle: "vol-1", AccessMode: corev1.ReadWriteOnce}
	if err := NewCSIMounter(e.m).Stage(context.Background(), v, filepath.Join(e.root, "plugins/kubernetes.io/csi/pv/pv-1/globalmount")); err != nil {
		t.Fatal(err)
	}
	if len(callsOf[*csi.NodeStageVolumeRequest](f2)) != 1 || len(callsOf[*csi.NodeStageVolumeRequest](f1)) != 0 {
		t.Errorf("NodeStageVolume went to the old endpoint")
	}
}

// TestRegistrationRetries: a registration that fails is reported and retried while the
// socket exists, until it succeeds (the driver answers late, then wrongly; the Node
// appears late).
func TestRegistrationRetries(t *testing.T) {
	e := newEnv(t, false)
	sock := e.csiSock("csi.sock")
	reg := serveReg(t, filepath.Join(e.regDir(), testDriver+"-reg.sock"), csiInfo(sock))

	// The driver comes up only after the registration began, then fails its first
	// NodeGetInfo.
	testutil.Eventually(t, "GetInfo", func() bool { reg.mu.Lock(); defer reg.mu.Unlock(); return reg.getInfo > 0 })
	f := newFakeCSI("i-0ccc")
	f.infoFailures = 1
	f.serve(t, sock)
	reg.waitStatus(t, "a refusal naming NodeGetInfo's error", refusedWith("instance metadata not ready"))
	reg.waitStatus(t, "a refusal naming the missing node", refusedWith("not found"))
	if _, ok := e.csiNode(t); ok {
		t.Fatal("CSINode written without a Node")
	}
	if _, err := e.client.CoreV1().Nodes().Create(context.Background(), testNodeObject(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reg.waitStatus(t, "the registration", func(st *registerapi.RegistrationStatus) bool { return st.GetPluginRegistered() })
	waitRegistered(t, e)
	if d, ok := e.driverEntry(t); !ok || d.NodeID != "i-0ccc" {
		t.Fatalf("CSINode entry = %+v %v", d, ok)
	}
}

// TestRefusedPlugins: plugins of an unknown type or without a 1.x version are told why
// they are refused; hidden files and non-sockets are not looked at.
func TestRefusedPlugins(t *testing.T) {
	e := newEnv(t, true)
	// A regular file and a hidden socket appear before the plugins: the watcher handles
	// events in order, so they have been passed over once the plugins are answered.
	if err := os.WriteFile(filepath.Join(e.regDir(), "file-reg.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	hidden := serveReg(t, filepath.Join(e.regDir(), ".hidden-reg.sock"), csiInfo(e.csiSock("csi.sock")))

	device := serveReg(t, filepath.Join(e.regDir(), "gpu-reg.sock"),
		&registerapi.PluginInfo{Type: registerapi.DevicePlugin, Name: "example.com/gpu", Endpoint: "/x/gpu.sock", SupportedVersions: []string{"v1beta1"}})
	foo := serveReg(t, filepath.Join(e.regDir(), "foo-reg.sock"),
		&registerapi.PluginInfo{Type: "FooPlugin", Name: "foo", Endpoint: "/x/foo.sock", SupportedVersions: []string{"1.0.0"}})
	old := serveReg(t, filepath.Join(e.regDir(), "old-reg.sock"),
		&registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "old.csi.example.com", Endpoint: "/x/old.sock", SupportedVersions: []string{"0.3.0", "2.0.0"}})
	device.waitStatus(t, "the device plugin's refusal", refusedWith(`type "DevicePlugin" is not supported`))
	foo.waitStatus(t, "the foo plugin's refusal", refusedWith(`"FooPlugin"`))
	old.waitStatus(t, "the old driver's refusal", refusedWith("0.3.0, 2.0.0"))
	// A refusal for good is reported once, not retried.
	for _, r := range []*fakeReg{device, foo, old} {
		testutil.Eventually(t, r.path+" to settle", func() bool { return e.hookEvents("settled", r.path) == 1 })
		r.mu.Lock()
		if r.getInfo != 1 || len(r.statuses) != 1 {
			t.Errorf("%s: %d GetInfo calls, %d statuses; want 1 each", r.path, r.getInfo, len(r.statuses))
		}
		r.mu.Unlock()
	}
	if _, ok := e.csiNode(t); ok {
		t.Error("a refused plugin was written to the CSINode")
	}
	hidden.mu.Lock()
	if hidden.getInfo != 0 {
		t.Errorf("the hidden socket got %d GetInfo calls", hidden.getInfo)
	}
	hidden.mu.Unlock()
}

// TestUnregisterOnlyOwnSocket: a driver registered through a second socket stays when the
// first socket goes.
func TestUnregisterOnlyOwnSocket(t *testing.T) {
	e := newEnv(t, true)
	sockA, sockB := e.csiSock("a.sock"), e.csiSock("b.sock")
	newFakeCSI("i-0ddd").serve(t, sockA)
	newFakeCSI("i-0ddd").serve(t, sockB)
	regA := serveReg(t, filepath.Join(e.regDir(), "a-reg.sock"), csiInfo(sockA))
	regA.waitStatus(t, "a's registration", func(st *registerapi.RegistrationStatus) bool { return st.GetPluginRegistered() })
	regB := serveReg(t, filepath.Join(e.regDir(), "b-reg.sock"), csiInfo(sockB))
	regB.waitStatus(t, "b's registration", func(st *registerapi.RegistrationStatus) bool { return st.GetPluginRegistered() })
	if ep, _ := e.m.Endpoint(testDriver); ep != sockB {
		t.Fatalf("Endpoint = %q, want the newest registration's %q", ep, sockB)
	}
	regA.stop()
	testutil.Eventually(t, "a's worker to end", func() bool { return e.hookEvents("done", regA.path) == 1 })
	if ep, ok := e.m.Endpoint(testDriver); !ok || ep != sockB {
		t.Errorf("Endpoint after a's socket went = %q %v, want %q", ep, ok, sockB)
	}
	if _, ok := e.driverEntry(t); !ok {
		t.Error("the driver left the CSINode when a socket it no longer uses went")
	}
	regB.stop()
	testutil.Eventually(t, "the driver to leave the CSINode", func() bool { _, ok := e.driverEntry(t); return !ok })
}

// TestLinkedRegistryDir: with a kubelet root far too long for a unix socket's path and
// its plugins_registry a link to a short directory, the manager finds the registration
// sockets in the link's target, the one there before it starts and one that comes later,
// and registers their plugins.
func TestLinkedRegistryDir(t *testing.T) {
	short := shortDir(t)
	root := filepath.Join(t.TempDir(), strings.Repeat("r", 200), "kubelet")
	regDir := filepath.Join(short, "plugins_registry")
	for _, d := range []string{root, regDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(regDir, filepath.Join(root, "plugins_registry")); err != nil {
		t.Fatal(err)
	}
	sockA, sockB := filepath.Join(short, "a.sock"), filepath.Join(short, "b.sock")
	newFakeCSI("i-0eee").serve(t, sockA)
	newFakeCSI("i-0eee").serve(t, sockB)
	registered := func(st *registerapi.RegistrationStatus) bool { return st.GetPluginRegistered() }
	regA := serveReg(t, filepath.Join(regDir, "a-reg.sock"), csiInfo(sockA))
	e := newEnvAt(t, root, true)
	regA.waitStatus(t, "the registration of the socket there before the manager", registered)
	regB := serveReg(t, filepath.Join(regDir, "b-reg.sock"), csiInfo(sockB))
	regB.waitStatus(t, "the registration of the socket made later", registered)
	if ep, _ := e.m.Endpoint(testDriver); ep != sockB {
		t.Errorf("Endpoint = %q, want the newest registration's %q", ep, sockB)
	}
}

// TestWaitForContext: WaitFor gives up with the context and names the driver.
func TestWaitForContext(t *testing.T) {
	e := newEnv(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := e.m.WaitFor(ctx, "nope.csi.example.com")
	if err == nil || !strings.Contains(err.Error(), "nope.csi.example.com") {
		t.Fatalf("WaitFor = %v", err)
	}
}

func TestNewValidates(t *testing.T) {
	client := fake.NewClientset()
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{RootDir: "/var/lib/kubelet"}, "node name is required"},
		{Config{NodeName: "n", RootDir: "kubelet"}, `root dir "kubelet"`},
		{Config{NodeName: "n", RootDir: "/k", RetryMax: -time.Second}, "must not be negative"},
	}
	for _, tc := range cases {
		if _, err := New(tc.cfg, client); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := New(Config{NodeName: "n", RootDir: "/k"}, nil); err == nil {
		t.Error("New accepted a nil client")
	}
	m, err := New(Config{NodeName: "n", RootDir: "/k"}, client)
	if err != nil {
		t.Fatal(err)
	}
	if m.cfg.RegistryDir() != "/k/plugins_registry" || m.cfg.RetryInitial <= 0 || m.cfg.RetryMax < m.cfg.RetryInitial {
		t.Errorf("defaults: %+v", m.cfg)
	}
}
