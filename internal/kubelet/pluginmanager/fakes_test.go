package pluginmanager

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
	"github.com/kubelab/kubelab/internal/csi/sidecar/registrar"
	"github.com/kubelab/kubelab/internal/testutil"
)

const (
	testDriver = "ebs.csi.aws.com"
	testNode   = "node-1"
	testUID    = "6b2c3f0e-node-1-uid"
	zoneKey    = "topology.ebs.csi.aws.com/zone"
	otherIDs   = `{"other.csi.example.com":"other-1"}`
)

// shortDir is a temporary directory with a short path, as unix socket paths are limited
// to 108 bytes.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testNodeObject is the node the kubelet registered: it already carries another driver's
// node id.
func testNodeObject() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: testNode, UID: testUID,
		Labels:      map[string]string{corev1.LabelHostname: testNode},
		Annotations: map[string]string{AnnotationNodeID: otherIDs},
	}}
}

// env is a running Manager for a node whose kubelet root is root.
type env struct {
	root   string
	client *fake.Clientset
	m      *Manager

	mu     sync.Mutex
	events map[string]int // "<event> <socket path>" → how often the manager's hook heard it
}

// newEnv starts a Manager; withNode says whether the Node exists from the start.
func newEnv(t *testing.T, withNode bool) *env {
	t.Helper()
	return newEnvAt(t, shortDir(t), withNode)
}

// newEnvAt starts a Manager for the kubelet root root.
func newEnvAt(t *testing.T, root string, withNode bool) *env {
	t.Helper()
	e := &env{root: root, client: fake.NewClientset(), events: map[string]int{}}
	if withNode {
		if _, err := e.client.CoreV1().Nodes().Create(context.Background(), testNodeObject(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := New(Config{NodeName: testNode, RootDir: e.root, RetryInitial: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		Logger: testLogger(t)}, e.client)
	if err != nil {
		t.Fatal(err)
	}
	m.hook = func(event, path string) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.events[event+" "+path]++
	}
	e.m = m
	testutil.Start(t, "the plugin manager", 20*time.Second, m.Run, testutil.Closed(m.Ready()))
	return e
}

func (e *env) regDir() string { return filepath.Join(e.root, "plugins_registry") }

func (e *env) csiSock(name string) string { return filepath.Join(e.root, "plugins", testDriver, name) }

// hookEvents is how often the manager's hook heard event for the registration socket
// path ("settled": it stopped trying to register; "done": its worker ended).
func (e *env) hookEvents(event, path string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.events[event+" "+path]
}

// fakeCSI is a CSI node plugin that records the node calls it gets. Like a real driver
// it makes and removes the mount points (as directories), and it refuses calls whose
// parent directory or vol_data.json is missing.
type fakeCSI struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer

	nodeID     string
	maxVolumes int64
	topology   map[string]string
	caps       []csi.NodeServiceCapability_RPC_Type

	mu sync.Mutex
	// infoFailures NodeGetInfo calls fail with Internal before it answers.
	infoFailures int
	infoCalls    int
	calls        []proto.Message
	srv          *grpc.Server
}

// failHandle is a volume handle whose node calls fail with FailedPrecondition.
const failHandle = "vol-fail"

func newFakeCSI(nodeID string, caps ...csi.NodeServiceCapability_RPC_Type) *fakeCSI {
	return &fakeCSI{nodeID: nodeID, maxVolumes: 25, caps: caps,
		topology: map[string]string{zoneKey: "us-east-1a", corev1.LabelTopologyZone: "us-east-1a"}}
}

// serve serves f on the unix socket sock until the test ends (or stop).
func (f *fakeCSI) serve(t *testing.T, sock string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(sock), 0o750); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = grpc.NewServer()
	csi.RegisterIdentityServer(f.srv, f)
	csi.RegisterNodeServer(f.srv, f)
	go f.srv.Serve(lis)
	t.Cleanup(f.srv.Stop)
}

func (f *fakeCSI) record(req proto.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, proto.Clone(req))
}

// callsOf returns the recorded requests of one kind.
func callsOf[T proto.Message](f *fakeCSI) []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []T
	for _, c := range f.calls {
		if r, ok := c.(T); ok {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeCSI) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: testDriver, VendorVersion: "test"}, nil
}

func (f *fakeCSI) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (f *fakeCSI) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

func (f *fakeCSI) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.infoCalls++
	if f.infoFailures > 0 {
		f.infoFailures--
		return nil, status.Error(codes.Internal, "instance metadata not ready")
	}
	return &csi.NodeGetInfoResponse{NodeId: f.nodeID, MaxVolumesPerNode: f.maxVolumes,
		AccessibleTopology: &csi.Topology{Segments: f.topology}}, nil
}

func (f *fakeCSI) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, c := range f.caps {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: c}}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// checkDataDir refuses a mount point whose directory or vol_data.json is missing.
func checkDataDir(path string) error {
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), VolumeDataFile)); err != nil {
		return status.Errorf(codes.FailedPrecondition, "no volume data beside %s: %v", path, err)
	}
	return nil
}

func (f *fakeCSI) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	f.record(req)
	if req.GetVolumeId() == failHandle {
		return nil, status.Error(codes.FailedPrecondition, "device holds xfs, not the requested ext4")
	}
	if err := checkDataDir(req.GetStagingTargetPath()); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(req.GetStagingTargetPath(), 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (f *fakeCSI) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	f.record(req)
	if err := checkDataDir(req.GetTargetPath()); err != nil {
		return nil, err
	}
	if err := os.Mkdir(req.GetTargetPath(), 0o750); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (f *fakeCSI) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	f.record(req)
	if err := os.Remove(req.GetTargetPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

func (f *fakeCSI) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	f.record(req)
	if err := os.Remove(req.GetStagingTargetPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (f *fakeCSI) NodeExpandVolume(_ context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	f.record(req)
	return &csi.NodeExpandVolumeResponse{CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}, nil
}

// startRegistrar runs the node-driver-registrar for the driver at csiSock; the returned
// function stops it (which removes its socket).
func startRegistrar(t *testing.T, e *env, csiSock string) (*registrar.Registrar, func()) {
	t.Helper()
	conn, err := csiclient.Dial(csiSock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r, err := registrar.New(registrar.Config{KubeletRegistrationPath: csiSock, PluginRegistrationDir: e.regDir(), Logger: testLogger(t)}, conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("registrar: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-r.Ready():
	case err := <-errc:
		t.Fatalf("registrar ended: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("registrar not ready")
	}
	return r, stop
}

// fakeReg serves the plugin registration API with a fixed PluginInfo and records what
// the kubelet tells it.
type fakeReg struct {
	registerapi.UnimplementedRegistrationServer
	info *registerapi.PluginInfo
	path string
	srv  *grpc.Server

	mu       sync.Mutex
	getInfo  int
	statuses []*registerapi.RegistrationStatus
}

// serveReg serves a registration socket at path until the test ends or stop.
func serveReg(t *testing.T, path string, info *registerapi.PluginInfo) *fakeReg {
	t.Helper()
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeReg{info: info, path: path, srv: grpc.NewServer()}
	registerapi.RegisterRegistrationServer(r.srv, r)
	go r.srv.Serve(lis)
	t.Cleanup(r.stop)
	return r
}

// stop stops serving and removes the socket.
func (r *fakeReg) stop() {
	r.srv.Stop()
	os.Remove(r.path)
}

func (r *fakeReg) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.getInfo++
	return r.info, nil
}

func (r *fakeReg) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statuses = append(r.statuses, proto.Clone(st).(*registerapi.RegistrationStatus))
	return &registerapi.RegistrationStatusResponse{}, nil
}

// waitStatus waits for a status that match accepts and returns it.
func (r *fakeReg) waitStatus(t *testing.T, what string, match func(*registerapi.RegistrationStatus) bool) *registerapi.RegistrationStatus {
	t.Helper()
	var found *registerapi.RegistrationStatus
	testutil.Eventually(t, what, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, st := range r.statuses {
			if match(st) {
				found = st
				return true
			}
		}
		return false
	})
	return found
}

func refusedWith(substr string) func(*registerapi.RegistrationStatus) bool {
	return func(st *registerapi.RegistrationStatus) bool {
		return !st.GetPluginRegistered() && strings.Contains(st.GetError(), substr)
	}
}

func csiInfo(endpoint string) *registerapi.PluginInfo {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: testDriver, Endpoint: endpoint, SupportedVersions: []string{"1.0.0"}}
}
