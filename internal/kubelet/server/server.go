package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Server is the kubelet's HTTPS server.
type Server struct {
	cfg   Config
	ready chan struct{}
	addr  string
	stats *statsProvider
}

// New checks cfg and prepares a Server; Run starts it.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("kubelet server config: %w", err)
	}
	return &Server{cfg: cfg, ready: make(chan struct{}), stats: newStatsProvider(cfg.Runtime, cfg.NodeName, cfg.now)}, nil
}

// Ready is closed once the server listens.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Addr is the address the server listens on (host:port); valid after Ready.
func (s *Server) Addr() string { return s.addr }

// handler is the server's routes, without TLS and client authentication.
func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	mux.Handle("GET /logs/", s.nodeLogs())
	if s.cfg.PodList != nil {
		mux.HandleFunc("GET /pods", s.podList)
		mux.HandleFunc("GET /pods/{$}", s.podList)
	}
	summary := summarySource(s.stats.summary)
	if s.cfg.Summary != nil {
		mux.Handle("GET /stats/summary", summaryFunc(s.cfg.Summary))
		summary = s.cfg.Summary
	} else {
		mux.Handle("GET /stats/summary", s.stats)
	}
	if s.cfg.Metrics != nil {
		mux.Handle("GET /metrics", gathererHandler(s.cfg.Metrics))
	}
	if s.cfg.ProbeMetrics != nil {
		mux.Handle("GET /metrics/probes", gathererHandler(s.cfg.ProbeMetrics))
	}
	mux.Handle("GET /metrics/resource", summaryMetricsHandler(summary, resourceDescs, collectResource))
	mux.Handle("GET /metrics/cadvisor", summaryMetricsHandler(summary, cadvisorDescs, collectCAdvisor))
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{container}", s.exec)
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{uid}/{container}", s.exec)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{container}", s.attach)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{uid}/{container}", s.attach)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}", s.portForward)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}/{uid}", s.portForward)
	}
	return mux
}

// Who may use the server beyond /healthz: the API server's kubelet client, and the
// cluster's administrators.
const (
	kubeletClientUser = "kube-apiserver-kubelet-client"
	mastersGroup      = "system:masters"
)

// authorize lets a client whose certificate names the API server's kubelet client (or
// the system:masters group) through, and answers anyone else the CA also signed with 403.
func authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.TLS == nil {
			next.ServeHTTP(w, r)
			return
		}
		if len(r.TLS.PeerCertificates) > 0 {
			subj := r.TLS.PeerCertificates[0].Subject
			if subj.CommonName == kubeletClientUser || slices.Contains(subj.Organization, mastersGroup) {
				next.ServeHTTP(w, r)
				return
			}
			writeStatus(w, apierrors.NewForbidden(corev1.Resource("nodes"), "proxy",
				fmt.Errorf("user %q may not use the kubelet's API", subj.CommonName)))
			return
		}
		writeStatus(w, apierrors.NewUnauthorized("a client certificate is required"))
	})
}

// tlsConfig serves the node's certificate and requires a client certificate signed by
// the client CA.
func (s *Server) tlsConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(s.cfg.CertFile, s.cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load serving certificate: %w", err)
	}
	caPEM, err := os.ReadFile(s.cfg.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("read client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("client CA file %s holds no PEM certificate", s.cfg.ClientCAFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
		// HTTP/1.1 only: exec, attach and port-forward hijack the connection to upgrade it.
		NextProtos: []string{"http/1.1"},
	}, nil
}

// Run serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	tlsCfg, err := s.tlsConfig()
	if err != nil {
		return fmt.Errorf("kubelet server: %w", err)
	}
	l, err := s.cfg.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("kubelet server listen: %w", err)
	}
	s.addr = l.Addr().String()
	sampling, stopSampling := context.WithCancel(ctx)
	s.stats.sampleWhileAsked(sampling, s.cfg.statsInterval)
	defer func() {
		stopSampling()
		s.stats.wait()
	}()
	srv := &http.Server{
		Handler:           authorize(s.handler()),
		TLSConfig:         tlsCfg,
		ReadHeaderTimeout: 30 * time.Second,
		// Followed logs end with ctx.
		BaseContext: func(net.Listener) context.Context { return ctx },
		// Refused handshakes (clients without a certificate of the client CA) and the like.
		ErrorLog: slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
	s.cfg.Logger.InfoContext(ctx, "kubelet server listening", "addr", s.addr)
	close(s.ready)
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(l, "", "") }()
	select {
	case err := <-done:
		return fmt.Errorf("kubelet server: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("kubelet server: %w", err)
	}
	return nil
}
