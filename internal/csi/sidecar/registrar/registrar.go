package registrar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
)

// Config says where the sockets are.
type Config struct {
	// KubeletRegistrationPath is the driver's socket as the kubelet reaches it
	// (an absolute path, e.g. /var/lib/kubelet/plugins/ebs.csi.aws.com/csi.sock).
	KubeletRegistrationPath string
	// PluginRegistrationDir is the kubelet's plugins_registry directory; the
	// registrar serves <dir>/<driver>-reg.sock there.
	PluginRegistrationDir string
	// SupportedVersions of the CSI spec (default 1.0.0).
	SupportedVersions []string
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	var errs []error
	if !filepath.IsAbs(c.KubeletRegistrationPath) {
		errs = append(errs, fmt.Errorf("registrar: kubelet registration path %q must be an absolute path", c.KubeletRegistrationPath))
	}
	if !filepath.IsAbs(c.PluginRegistrationDir) {
		errs = append(errs, fmt.Errorf("registrar: plugin registration dir %q must be an absolute path", c.PluginRegistrationDir))
	}
	return errors.Join(errs...)
}

// Registrar serves the kubelet plugin registration API for one driver.
type Registrar struct {
	registerapi.UnimplementedRegistrationServer
	cfg   Config
	conn  *grpc.ClientConn
	log   *slog.Logger
	ready chan struct{}

	mu         sync.Mutex
	driver     string
	socket     string
	registered bool
	regErr     string
}

// New builds the registrar for the driver behind conn.
func New(cfg Config, conn *grpc.ClientConn) (*Registrar, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if conn == nil {
		return nil, errors.New("registrar: a CSI connection is required")
	}
	if len(cfg.SupportedVersions) == 0 {
		cfg.SupportedVersions = []string{"1.0.0"}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Registrar{cfg: cfg, conn: conn, log: cfg.Logger, ready: make(chan struct{})}, nil
}

// Ready is closed once the registration socket serves.
func (r *Registrar) Ready() <-chan struct{} { return r.ready }

// Socket is the registration socket's path (set once Ready).
func (r *Registrar) Socket() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.socket
}

// Healthy is nil once the kubelet reported a successful registration.
func (r *Registrar) Healthy() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.regErr != "":
		return fmt.Errorf("kubelet refused plugin %s: %s", r.driver, r.regErr)
	case !r.registered:
		return fmt.Errorf("plugin %s not registered with the kubelet yet", r.driver)
	}
	return nil
}

// Run learns the driver's name and serves the registration socket until ctx ends.
func (r *Registrar) Run(ctx context.Context) error {
	info, err := csiclient.Discover(ctx, r.conn, 0)
	if err != nil {
		return fmt.Errorf("registrar: %w", err)
	}
	sock := filepath.Join(r.cfg.PluginRegistrationDir, info.Name+"-reg.sock")
	if err := os.MkdirAll(r.cfg.PluginRegistrationDir, 0o750); err != nil {
		return fmt.Errorf("registrar: %w", err)
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("registrar: remove stale socket: %w", err)
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("registrar: listen on %s: %w", sock, err)
	}
	defer os.Remove(sock)
	r.mu.Lock()
	r.driver, r.socket = info.Name, sock
	r.mu.Unlock()
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, r)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	r.log.InfoContext(ctx, "serving registration", "driver", info.Name, "socket", sock, "endpoint", r.cfg.KubeletRegistrationPath)
	close(r.ready)
	select {
	case <-ctx.Done():
		srv.Stop()
		<-errc
		return nil
	case err := <-errc:
		return fmt.Errorf("registrar: serve: %w", err)
	}
}

// GetInfo tells the kubelet which plugin this is and where its socket is.
func (r *Registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &registerapi.PluginInfo{
		Type: registerapi.CSIPlugin, Name: r.driver, Endpoint: r.cfg.KubeletRegistrationPath,
		SupportedVersions: append([]string(nil), r.cfg.SupportedVersions...),
	}, nil
}

// NotifyRegistrationStatus records the kubelet's verdict.
func (r *Registrar) NotifyRegistrationStatus(ctx context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.mu.Lock()
	r.registered = st.GetPluginRegistered()
	r.regErr = strings.TrimSpace(st.GetError())
	if r.registered {
		r.regErr = ""
	} else if r.regErr == "" {
		r.regErr = "registration failed without a reason"
	}
	r.mu.Unlock()
	if st.GetPluginRegistered() {
		r.log.InfoContext(ctx, "registered with the kubelet", "driver", r.driver)
	} else {
		r.log.ErrorContext(ctx, "kubelet refused the registration", "driver", r.driver, "error", st.GetError())
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
