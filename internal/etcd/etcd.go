package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Config describes an embedded, single-member etcd.
type Config struct {
	// DataDir holds etcd's write-ahead log and database.
	DataDir string
	// ClientURL is where clients reach it, e.g. http://127.0.0.1:2379.
	ClientURL string
	// PeerURL is the raft peer address, e.g. http://127.0.0.1:2380; nothing else joins.
	PeerURL string
	// Name of the member; "kubelab" when empty.
	Name string
	// Logger receives etcd's logs (log.go); slog.Default() when nil.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.DataDir == "" {
		return errors.New("etcd: data dir is required")
	}
	for what, raw := range map[string]string{"client": c.ClientURL, "peer": c.PeerURL} {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return fmt.Errorf("etcd: %s URL %q is not a URL like http://127.0.0.1:2379", what, raw)
		}
	}
	return nil
}

// Server is an embedded etcd.
type Server struct {
	cfg   Config
	ready chan struct{}
}

// New checks cfg and returns a Server that Run starts.
func New(cfg Config) (*Server, error) {
	if cfg.Name == "" {
		cfg.Name = "kubelab"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, ready: make(chan struct{})}, nil
}

// Ready is closed once etcd serves clients.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Endpoints are the client URLs to hand to etcd clients.
func (s *Server) Endpoints() []string { return []string{s.cfg.ClientURL} }

// Run starts etcd and blocks until ctx ends or etcd fails.
func (s *Server) Run(ctx context.Context) error {
	client, _ := url.Parse(s.cfg.ClientURL)
	peer, _ := url.Parse(s.cfg.PeerURL)

	ec := embed.NewConfig()
	ec.Name = s.cfg.Name
	ec.Dir = filepath.Clean(s.cfg.DataDir)
	ec.ListenClientUrls = []url.URL{*client}
	ec.AdvertiseClientUrls = []url.URL{*client}
	ec.ListenPeerUrls = []url.URL{*peer}
	ec.AdvertisePeerUrls = []url.URL{*peer}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newLogger(s.cfg.Logger, func() bool { return ctx.Err() != nil }))
	// The API server's watch cache asks for progress notifications to serve consistent
	// reads from memory; keep revisions for an hour, as kube-apiserver's compactor would.
	ec.WatchProgressNotifyInterval = 5 * time.Second
	ec.AutoCompactionMode = "periodic"
	ec.AutoCompactionRetention = "1h"

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return fmt.Errorf("start etcd in %s: %w", ec.Dir, err)
	}
	defer e.Close()

	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	case <-ctx.Done():
		e.Server.Stop()
		return nil
	}
	slog.InfoContext(ctx, "etcd is ready", "client", s.cfg.ClientURL, "dir", ec.Dir)
	close(s.ready)

	select {
	case err := <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	case <-ctx.Done():
		return nil
	}
}
