package image

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
)

// Files and directories of a registry's Dir.
const (
	// addrFileName holds the address the registry serves on, "127.0.0.1:PORT\n".
	addrFileName = "addr"
	// layoutDirName is the OCI image layout of the imported images; its blobs directory
	// is also the registry's blob store (built layers included).
	layoutDirName = "layout"
	// cacheDirName holds the digests of built layers, by the hash of their inputs.
	cacheDirName = "cache"
	// upstreamDirName holds what was fetched from upstream registries.
	upstreamDirName = "upstream"
)

// AddrFile is the file in a registry's Dir that records its address.
func AddrFile(dir string) string { return filepath.Join(dir, addrFileName) }

// LayoutDir is the OCI image layout in a registry's Dir that Import writes to and Run
// pushes from.
func LayoutDir(dir string) string { return filepath.Join(dir, layoutDirName) }

// CacheDir is where the registry in dir keeps built layers' digests.
func CacheDir(dir string) string { return filepath.Join(dir, cacheDirName) }

// RecordedAddr is the address (host:port) a registry with this Dir last served on.
func RecordedAddr(dir string) (string, error) {
	b, err := os.ReadFile(AddrFile(dir))
	if err != nil {
		return "", fmt.Errorf("read the registry's address: %w", err)
	}
	addr := strings.TrimSpace(string(b))
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("%s: %w", AddrFile(dir), err)
	}
	return addr, nil
}

// Config configures a Registry.
type Config struct {
	// Dir holds the registry's state: the blob store, the OCI layout of imported
	// images, the layer cache and the address file. Required.
	Dir string
	// Addr is the listen address. With no port (or port 0) the registry reuses the port
	// recorded in Dir by an earlier start, or picks a free one and records it: clients
	// and containerd's configurations hold it. Default 127.0.0.1.
	Addr string
	// PauseBinary is the static kubelab-pause the pause image is built from. Default
	// kubelab-pause beside the running executable.
	PauseBinary string
	// KubelabBinary is the kubelab executable KubelabImage is built from; empty: no
	// kubelab image.
	KubelabBinary string
	// Offline keeps the registry to the images it holds: a pull through containerd's
	// mirror of anything else is not found, with a message naming offline mode, and
	// nothing leaves the machine. Without it such a pull is served from the registry
	// the image names (see Upstreams), once, and kept in Dir/upstream.
	Offline bool
	// Upstreams maps a registry host as images name it ("docker.io", "registry.k8s.io",
	// "ghcr.io", "myregistry:5000") to the endpoint its images are fetched from
	// ("https://mirror.example", "http://127.0.0.1:5000"); a host not named is reached at
	// its own address over HTTPS (docker.io at index.docker.io). Tests point hosts at
	// registries they run.
	Upstreams map[string]string
	// Keychain gives the credentials of the user running kubelab for a registry (the
	// docker CLI's config.json: authn.DefaultKeychain); nil: none. What they fetch is
	// cached and served to every pull, as upstream's kubelet uses a node's own
	// credentials for every pod.
	Keychain authn.Keychain
	// Proxy picks the HTTP proxy of each request to an upstream registry; nil:
	// http.ProxyFromEnvironment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY).
	Proxy func(*http.Request) (*url.URL, error)
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Dir == "" {
		return errors.New("dir is required")
	}
	if c.Addr == "" {
		c.Addr = "127.0.0.1"
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		c.Addr = net.JoinHostPort(strings.Trim(c.Addr, "[]"), "0")
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("addr %q: %w", c.Addr, err)
	}
	if c.PauseBinary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("pause binary: locate the executable: %w", err)
		}
		c.PauseBinary = filepath.Join(filepath.Dir(exe), "kubelab-pause")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Proxy == nil {
		c.Proxy = http.ProxyFromEnvironment
	}
	return nil
}

// Registry is the OCI distribution registry the nodes' containerd pull every image
// from, with the default images built at start and the imported ones pushed again.
type Registry struct {
	cfg     Config
	log     *slog.Logger
	up      *upstreams // nil when offline
	ready   chan struct{}
	addr    atomic.Value // string, once listening
	started atomic.Bool
	extra   []net.Listener // AddListener's, served by Run
}

// AddListener has Run serve pulls on l too, besides the configured address: a socket the
// caller opened in another network namespace, say, where the nodes' containerd pull from.
// There the registry is read-only (GET and HEAD; anything else 405): pods reach that
// address, and the images it serves run on the nodes. Call it before Run; Run closes l
// when it returns.
func (r *Registry) AddListener(l net.Listener) error {
	if r.started.Load() {
		l.Close()
		return fmt.Errorf("image registry: add listener %s: the registry already runs", l.Addr())
	}
	r.extra = append(r.extra, l)
	return nil
}

// New returns a Registry; Run serves it.
func New(cfg Config) (*Registry, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("image registry config: %w", err)
	}
	r := &Registry{cfg: cfg, log: cfg.Logger, ready: make(chan struct{})}
	if !cfg.Offline {
		up, err := newUpstreams(cfg)
		if err != nil {
			return nil, fmt.Errorf("image registry config: %w", err)
		}
		r.up = up
	}
	return r, nil
}

// Ready is closed once the registry serves the default and imported images.
func (r *Registry) Ready() <-chan struct{} { return r.ready }

// Addr is the host:port the registry serves on; valid once Ready is closed.
func (r *Registry) Addr() string {
	a, _ := r.addr.Load().(string)
	return a
}

// Run listens, builds and pushes the default images, pushes the imported images of
// the layout, closes Ready, and serves until ctx ends.
func (r *Registry) Run(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("image registry: Run called twice")
	}
	defer func() {
		for _, l := range r.extra {
			l.Close()
		}
	}()
	layoutDir := LayoutDir(r.cfg.Dir)
	blobDir := filepath.Join(layoutDir, "blobs")
	cacheDir := CacheDir(r.cfg.Dir)
	for _, d := range []string{r.cfg.Dir, filepath.Join(blobDir, "sha256"), cacheDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("image registry: %w", err)
		}
	}
	if err := ensureLayout(layoutDir); err != nil {
		return fmt.Errorf("image registry: %w", err)
	}
	ln, err := r.listen()
	if err != nil {
		return fmt.Errorf("image registry: %w", err)
	}
	addr := ln.Addr().String()
	if err := atomicfile.WriteFile(AddrFile(r.cfg.Dir), []byte(addr+"\n"), 0o644); err != nil {
		ln.Close()
		return fmt.Errorf("image registry: record the address: %w", err)
	}
	r.addr.Store(addr)

	h := r.handler(ctx, blobDir)
	if err := h.cache.removeTemp(); err != nil {
		ln.Close()
		return fmt.Errorf("image registry: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	pulls := &http.Server{Handler: readOnly(srv.Handler), ReadHeaderTimeout: srv.ReadHeaderTimeout}
	serveErr := make(chan error, 1+len(r.extra))
	go func() { serveErr <- srv.Serve(ln) }()
	for _, l := range r.extra {
		go func() { serveErr <- pulls.Serve(l) }()
	}
	// Pulls under way when kubelab stops are cut; containerd retries them.
	defer srv.Close()
	defer pulls.Close()

	if err := r.publish(ctx, addr, layoutDir, blobDir, cacheDir); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it was ready
		}
		return fmt.Errorf("image registry: %w", err)
	}
	close(r.ready)

	select {
	case <-ctx.Done():
		return nil
	case err := <-serveErr:
		return fmt.Errorf("image registry: serve: %w", err)
	}
}

// handler serves the registry: the images in blobDir and in memory, and those of
// upstream registries (fetched until ctx ends).
func (r *Registry) handler(ctx context.Context, blobDir string) *pullThrough {
	local := registry.New(
		registry.WithBlobHandler(registry.NewDiskBlobHandler(blobDir)),
		registry.Logger(slog.NewLogLogger(r.log.Handler(), slog.LevelDebug)),
	)
	return &pullThrough{local: local, localBlobs: blobDir, cache: newUpstreamCache(filepath.Join(r.cfg.Dir, upstreamDirName)),
		up: r.up, log: r.log, ctx: ctx}
}

// publish builds the default images and pushes them and the layout's images to the
// registry at addr.
func (r *Registry) publish(ctx context.Context, addr, layoutDir, blobDir, cacheDir string) error {
	start := time.Now()
	b := &builder{pauseBinary: r.cfg.PauseBinary, kubelabBinary: r.cfg.KubelabBinary, cache: &layerCache{dir: cacheDir, blobDir: blobDir}, log: r.log}
	images, err := b.build()
	if err != nil {
		return err
	}
	built := time.Since(start)
	var refs []string
	for _, bi := range images {
		for _, ref := range bi.refs {
			if err := push(ctx, addr, ref, bi.img); err != nil {
				return err
			}
			refs = append(refs, ref)
		}
	}
	imported, err := pushLayout(ctx, addr, layoutDir, r.log)
	if err != nil {
		return err
	}
	r.log.Info("image registry ready", "addr", addr, "images", refs, "imported", len(imported), "offline", r.cfg.Offline,
		"build", built.Round(time.Millisecond), "total", time.Since(start).Round(time.Millisecond))
	return nil
}

// readOnly serves h's GET and HEAD requests and refuses the others (405), as the
// distribution API answers an unsupported method.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMethodNotAllowed)
			_, _ = w.Write([]byte(`{"errors":[{"code":"UNSUPPORTED","message":"this address of the registry is read-only: push to kubelab's registry on the machine (kubelab image import)"}]}` + "\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// listen listens on the configured address; with port 0 on the recorded one if any.
func (r *Registry) listen() (net.Listener, error) {
	host, port, _ := net.SplitHostPort(r.cfg.Addr)
	addr := r.cfg.Addr
	recorded := ""
	if port == "0" {
		if a, err := RecordedAddr(r.cfg.Dir); err == nil {
			if h, _, _ := net.SplitHostPort(a); h == host {
				addr, recorded = a, a
			}
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if recorded != "" && errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("listen on %s, the address recorded in %s that containerd's configurations use: the port is taken (is another kubelab serving this data dir? otherwise remove the file to pick a new port): %w",
			recorded, AddrFile(r.cfg.Dir), err)
	}
	return nil, fmt.Errorf("listen on %s: %w", addr, err)
}

// push pushes img to the registry at addr under RepoPath(ref).
func push(ctx context.Context, addr, ref string, img v1.Image) error {
	p, err := RepoPath(ref)
	if err != nil {
		return err
	}
	dst, err := localRef(addr, p)
	if err != nil {
		return err
	}
	if err := remote.Write(dst, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	return nil
}
