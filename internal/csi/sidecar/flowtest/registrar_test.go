package flowtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/kubelab/kubelab/internal/csi/sidecar/registrar"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestRegistrar plays the kubelet's plugin watcher against the registrar in front
// of the real driver: GetInfo names the driver and its socket, the registration
// status reaches Healthy, and the socket goes when the registrar stops.
func TestRegistrar(t *testing.T) {
	e := newEnv(t)
	regDir := filepath.Join(shortDir(t), "plugins_registry")
	const kubeletPath = "/var/lib/kubelet/plugins/ebs.csi.aws.com/csi.sock"
	r, err := registrar.New(registrar.Config{KubeletRegistrationPath: kubeletPath, PluginRegistrationDir: regDir, Logger: e.log}, e.dial())
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(regDir, driverName+"-reg.sock")
	t.Run("runs", func(t *testing.T) {
		testutil.Start(t, "registrar", 30*time.Second, r.Run, testutil.Closed(r.Ready()))
		if r.Socket() != sock {
			t.Fatalf("socket %s, want %s", r.Socket(), sock)
		}
		conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx := context.Background()
		kubelet := registerapi.NewRegistrationClient(conn)
		info, err := kubelet.GetInfo(ctx, &registerapi.InfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if info.Type != registerapi.CSIPlugin || info.Name != driverName || info.Endpoint != kubeletPath || len(info.SupportedVersions) == 0 {
			t.Fatalf("GetInfo = %+v", info)
		}
		if _, err := kubelet.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: "version 0.9 unsupported"}); err != nil {
			t.Fatal(err)
		}
		if err := r.Healthy(); err == nil || !strings.Contains(err.Error(), "version 0.9 unsupported") {
			t.Fatalf("Healthy after a refusal = %v", err)
		}
		if _, err := kubelet.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
			t.Fatal(err)
		}
		if err := r.Healthy(); err != nil {
			t.Fatalf("Healthy after registration = %v", err)
		}
	})
	// The registrar stopped at the end of its subtest.
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("registration socket left behind: %v", err)
	}
}
