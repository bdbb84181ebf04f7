package registrar

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestConfigValidate(t *testing.T) {
	conn, err := grpc.NewClient("unix:///nonexistent.sock", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cases := []struct {
		cfg Config
		err string
	}{
		{Config{KubeletRegistrationPath: "csi.sock", PluginRegistrationDir: "/reg"}, `kubelet registration path "csi.sock"`},
		{Config{KubeletRegistrationPath: "/p/csi.sock", PluginRegistrationDir: "reg"}, `plugin registration dir "reg"`},
	}
	for _, tc := range cases {
		if _, err := New(tc.cfg, conn); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: err %v, want %q", tc.cfg, err, tc.err)
		}
	}
	if _, err := New(Config{KubeletRegistrationPath: "/p/csi.sock", PluginRegistrationDir: "/reg"}, nil); err == nil {
		t.Error("nil connection accepted")
	}
	r, err := New(Config{KubeletRegistrationPath: "/p/csi.sock", PluginRegistrationDir: "/reg"}, conn)
	if err != nil || r.cfg.SupportedVersions[0] != "1.0.0" {
		t.Fatalf("defaults: %v %v", r, err)
	}
	if r.Healthy() == nil {
		t.Error("healthy before any registration")
	}
}
