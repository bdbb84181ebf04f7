package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// DefaultMaxRequestBytes is the largest request etcd takes when Config.MaxRequestBytes is
// 0 (etcd's own default, 1.5 MiB): a write of an object larger than this, with its key,
// fails with "etcdserver: request is too large".
const DefaultMaxRequestBytes = 1536 * 1024

// singleMemberCatchUpEntries is how many applied raft entries the member keeps in memory
// when it compacts its raft log (every 100 entries): the leader would send them to a
// follower that fell behind, and a single-member cluster has no follower.
const singleMemberCatchUpEntries = 100

// TLSFiles are the PEM files of one side of etcd's mutual TLS.
type TLSFiles struct {
	// CertFile and KeyFile are etcd's certificate; it names the URL's host, and for the
	// client URL it is also a client certificate (etcd's gRPC gateway dials etcd with it).
	CertFile, KeyFile string
	// TrustedCAFile is the CA that must have signed the certificate every client (or
	// peer) presents; etcd refuses connections without one.
	TrustedCAFile string
}

func (f TLSFiles) validate(what string) error {
	if f.CertFile == "" || f.KeyFile == "" || f.TrustedCAFile == "" {
		return fmt.Errorf("etcd: %s TLS needs a certificate, its key and the trusted CA (got cert %q, key %q, CA %q)",
			what, f.CertFile, f.KeyFile, f.TrustedCAFile)
	}
	return nil
}

// info is f with client-certificate authentication on.
func (f TLSFiles) info() transport.TLSInfo {
	return transport.TLSInfo{CertFile: f.CertFile, KeyFile: f.KeyFile, TrustedCAFile: f.TrustedCAFile, ClientCertAuth: true}
}

// Config describes an embedded, single-member etcd.
type Config struct {
	// DataDir holds etcd's write-ahead log and database.
	DataDir string
	// ClientURL is where clients reach it, e.g. https://127.0.0.1:2379.
	ClientURL string
	// PeerURL is the raft peer address, e.g. https://127.0.0.1:2380; nothing else joins.
	PeerURL string
	// ClientTLS and PeerTLS are etcd's certificates and the CA its clients' and peers'
	// certificates must come from. Both URLs are https and both sides require a client
	// certificate: a process without one signed by the CA reads nothing.
	ClientTLS, PeerTLS TLSFiles
	// MaxRequestBytes is the largest request etcd takes; DefaultMaxRequestBytes when 0.
	MaxRequestBytes uint
	// Name of the member; "kubelab" when empty.
	Name string
	// MinFreeBytes is the free space kept on DataDir's filesystem (space.go): Run does not
	// start etcd with less than this plus the write-ahead log etcd allocates at start, and
	// while etcd runs, less than this makes it refuse writes until space is back. 0 means
	// 128 MiB; a negative value turns both off.
	MinFreeBytes int64
	// Logger receives etcd's logs (log.go); slog.Default() when nil.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.DataDir == "" {
		return errors.New("etcd: data dir is required")
	}
	for what, raw := range map[string]string{"client": c.ClientURL, "peer": c.PeerURL} {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || u.Scheme != "https" {
			return fmt.Errorf("etcd: %s URL %q is not a URL like https://127.0.0.1:2379", what, raw)
		}
	}
	if err := c.ClientTLS.validate("client"); err != nil {
		return err
	}
	return c.PeerTLS.validate("peer")
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
	if cfg.MinFreeBytes == 0 {
		cfg.MinFreeBytes = defaultMinFree
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
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

// Run starts etcd and blocks until ctx ends or etcd fails. It returns an error wrapping
// syscall.ENOSPC when DataDir's filesystem has too little space to start, and when etcd
// stops because its filesystem filled up.
func (s *Server) Run(ctx context.Context) error {
	client, _ := url.Parse(s.cfg.ClientURL)
	peer, _ := url.Parse(s.cfg.PeerURL)
	dir := filepath.Clean(s.cfg.DataDir)
	if err := s.checkStartSpace(dir); err != nil {
		return err
	}
	if err := s.privateDir(ctx, dir); err != nil {
		return err
	}

	fail := newFailure()
	ec := embed.NewConfig()
	ec.Name = s.cfg.Name
	ec.Dir = dir
	ec.ListenClientUrls = []url.URL{*client}
	ec.AdvertiseClientUrls = []url.URL{*client}
	ec.ListenPeerUrls = []url.URL{*peer}
	ec.AdvertisePeerUrls = []url.URL{*peer}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	ec.ClientTLSInfo = s.cfg.ClientTLS.info()
	ec.PeerTLSInfo = s.cfg.PeerTLS.info()
	ec.MaxRequestBytes = s.cfg.MaxRequestBytes
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newLogger(s.cfg.Logger, func() bool { return ctx.Err() != nil },
		zap.WithFatalHook(fail), zap.WithPanicHook(fail)))
	// The API server's watch cache asks for progress notifications to serve consistent
	// reads from memory; keep revisions for an hour, as kube-apiserver's compactor would.
	ec.WatchProgressNotifyInterval = 5 * time.Second
	ec.AutoCompactionMode = "periodic"
	ec.AutoCompactionRetention = "1h"
	// The raft log etcd keeps in memory after each snapshot serves slow followers; a
	// single member has none, and at the default 5,000 entries of up to MaxRequestBytes
	// it held about 175 MB of 35 KB ConfigMap writes in the heap.
	ec.SnapshotCatchUpEntries = singleMemberCatchUpEntries

	// etcd reports what it cannot go on from by logging at fatal or panic level, also
	// while it starts; the goroutine that logged stops there (failure.go), so start it in
	// one of its own.
	type started struct {
		e   *embed.Etcd
		err error
	}
	startc := make(chan started, 1)
	go func() {
		e, err := embed.StartEtcd(ec)
		startc <- started{e, err}
	}()
	var e *embed.Etcd
	select {
	case st := <-startc:
		if st.err != nil {
			return s.stopped(dir, fmt.Errorf("start: %w", st.err))
		}
		e = st.e
	case <-fail.done:
		return s.stopped(dir, fail.err)
	}

	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		closeEtcd(e, fail)
		return s.stopped(dir, err)
	case <-fail.done:
		return s.stopped(dir, fail.err) // a goroutine of etcd is stopped: closing it could hang
	case <-ctx.Done():
		return s.closed(dir, e, fail)
	}

	guardCtx, cancelGuard := context.WithCancel(ctx)
	guardDone := make(chan struct{})
	stopGuard := func() {
		cancelGuard()
		<-guardDone
	}
	defer stopGuard()
	guard := s.newSpaceGuard(dir, e.Server, e.Server.Backend().Size, ec.QuotaBackendBytes)
	guard.check(guardCtx) // before the API server's first write, after a restart in particular
	go func() {
		defer close(guardDone)
		guard.run(guardCtx)
	}()
	s.cfg.Logger.InfoContext(ctx, "etcd is ready", "client", s.cfg.ClientURL, "dir", ec.Dir)
	close(s.ready)

	select {
	case err := <-e.Err():
		stopGuard()
		closeEtcd(e, fail)
		return s.stopped(dir, err)
	case <-fail.done:
		return s.stopped(dir, fail.err) // a goroutine of etcd is stopped: closing it could hang
	case <-ctx.Done():
		stopGuard()
		return s.closed(dir, e, fail)
	}
}

// closed stops etcd because Run's ctx ended: nil, or what etcd could not go on from
// while stopping.
func (s *Server) closed(dir string, e *embed.Etcd, fail *failure) error {
	if err := closeEtcd(e, fail); err != nil {
		return s.stopped(dir, err)
	}
	return nil
}

// closeEtcd stops etcd and waits until it has, or until it fails (a goroutine of etcd
// is then stopped for good, and closing could wait for it forever).
func closeEtcd(e *embed.Etcd, fail *failure) error {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		e.Close()
	}()
	select {
	case <-closed:
		return nil
	case <-fail.done:
		return fail.err
	}
}
