package livenessprobe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
)

// Config says where to listen and how long a probe may take.
type Config struct {
	// Addr is the address to listen on (the sidecar's --http-endpoint; default
	// 127.0.0.1:9808). Listen, when set, makes the listener instead (in a network
	// namespace, say).
	Addr   string
	Listen func(network, addr string) (net.Listener, error)
	// ProbeTimeout bounds each Probe call (default 1s, as upstream).
	ProbeTimeout time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

// Prober serves /healthz from the driver behind its connection.
type Prober struct {
	cfg   Config
	id    csi.IdentityClient
	log   *slog.Logger
	ready chan struct{}
	addr  string
}

// New builds the sidecar for the driver behind conn.
func New(cfg Config, conn *grpc.ClientConn) *Prober {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:9808"
	}
	if cfg.Listen == nil {
		cfg.Listen = net.Listen
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Prober{cfg: cfg, id: csi.NewIdentityClient(conn), log: cfg.Logger, ready: make(chan struct{})}
}

// Ready is closed once the sidecar listens.
func (p *Prober) Ready() <-chan struct{} { return p.ready }

// Addr is where it listens (once Ready).
func (p *Prober) Addr() string { return p.addr }

// Run serves /healthz until ctx ends.
func (p *Prober) Run(ctx context.Context) error {
	l, err := p.cfg.Listen("tcp", p.cfg.Addr)
	if err != nil {
		return fmt.Errorf("livenessprobe: %w", err)
	}
	p.addr = l.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", p.healthz)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	p.log.InfoContext(ctx, "serving /healthz", "addr", p.addr)
	close(p.ready)
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("livenessprobe: %w", err)
	}
	return nil
}

// healthz asks the driver's Probe: 200 when it is ready, 500 with why when not.
func (p *Prober) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), p.cfg.ProbeTimeout)
	defer cancel()
	resp, err := p.id.Probe(ctx, &csi.ProbeRequest{})
	switch {
	case err != nil:
		p.log.InfoContext(ctx, "health check failed", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
	case resp.GetReady() != nil && !resp.GetReady().GetValue():
		p.log.InfoContext(ctx, "health check failed: driver not ready")
		http.Error(w, "driver responded but is not ready", http.StatusInternalServerError)
	default:
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok"))
	}
}
