package livenessprobe

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/kubelab/kubelab/internal/testutil"
)

// identity is a driver whose Probe answers what probe says.
type identity struct {
	csi.UnimplementedIdentityServer
	probe func() (*csi.ProbeResponse, error)
}

func (i identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return i.probe()
}

// serve runs the sidecar over a driver answering probe and returns its /healthz URL.
func serve(t *testing.T, probe func() (*csi.ProbeResponse, error)) string {
	t.Helper()
	lis := bufconn.Listen(1 << 16)
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, identity{probe: probe})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///driver", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	p := New(Config{Addr: "127.0.0.1:0"}, conn)
	testutil.Start(t, "the livenessprobe", testutil.DefaultTimeout, p.Run, testutil.Closed(p.Ready()))
	return "http://" + p.Addr() + "/healthz"
}

func TestHealthz(t *testing.T) {
	tests := []struct {
		name     string
		probe    func() (*csi.ProbeResponse, error)
		code     int
		bodyPart string
	}{
		{"ready", func() (*csi.ProbeResponse, error) { return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil }, 200, "ok"},
		{"no readiness said", func() (*csi.ProbeResponse, error) { return &csi.ProbeResponse{}, nil }, 200, "ok"},
		{"not ready", func() (*csi.ProbeResponse, error) { return &csi.ProbeResponse{Ready: wrapperspb.Bool(false)}, nil }, 500, "not ready"},
		{"probe fails", func() (*csi.ProbeResponse, error) { return nil, status.Error(codes.FailedPrecondition, "no metadata") }, 500, "no metadata"},
		{"driver gone", func() (*csi.ProbeResponse, error) { return nil, errors.New("x") }, 500, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Get(serve(t, tt.probe))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.code || !strings.Contains(string(b), tt.bodyPart) {
				t.Errorf("/healthz = %d %q, want %d with %q", resp.StatusCode, b, tt.code, tt.bodyPart)
			}
		})
	}
}
