package image

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kubelab/kubelab/internal/testutil"
)

// The tests in this file never leave the machine: the "upstream" registries are
// stand-ins on 127.0.0.1 that the test runs, and Config.Upstreams points the registry
// hosts the pulls name at them.

// standIn is an upstream registry run by a test: in memory, optionally asking for Basic
// credentials, recording what it was asked.
type standIn struct {
	addr       string
	user, pass string // required when set

	mu   sync.Mutex
	hits []string // "METHOD path"
	gate map[string]chan struct{}
}

func startStandIn(t *testing.T, user, pass string) *standIn {
	t.Helper()
	s := &standIn{user: user, pass: pass, gate: map[string]chan struct{}{}}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits = append(s.hits, r.Method+" "+r.URL.Path)
		gate := s.gate[r.URL.Path]
		s.mu.Unlock()
		if s.user != "" {
			if u, p, ok := r.BasicAuth(); !ok || u != s.user || p != s.pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="stand-in"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		if gate != nil && r.Method == http.MethodGet {
			<-gate
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.addr = strings.TrimPrefix(srv.URL, "http://")
	return s
}

func (s *standIn) url() string { return "http://" + s.addr }

// asked counts the requests of method for path.
func (s *standIn) asked(method, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, h := range s.hits {
		if h == method+" "+path {
			n++
		}
	}
	return n
}

// askedFor counts the requests under /v2/<repo>/.
func (s *standIn) askedFor(repo string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, h := range s.hits {
		if strings.Contains(h, " /v2/"+repo+"/") {
			n++
		}
	}
	return n
}

// hold makes GETs of path wait until the returned function is called.
func (s *standIn) hold(path string) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.gate[path] = ch
	s.mu.Unlock()
	return sync.OnceFunc(func() { close(ch) })
}

// push writes a random image to repo:tag of s and returns it.
func (s *standIn) push(t *testing.T, repo, tag string) v1.Image {
	t.Helper()
	img, err := random.Image(2048, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(s.addr+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	auth := authn.Anonymous
	if s.user != "" {
		auth = &authn.Basic{Username: s.user, Password: s.pass}
	}
	if err := remote.Write(ref, img, remote.WithAuth(auth)); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	s.mu.Lock()
	s.hits = nil // only pulls count
	s.mu.Unlock()
	return img
}

// mirrorTransport sends every request as containerd sends a pull through its mirror:
// with ?ns=<the image's registry> and, once challenged, the pull's credentials.
type mirrorTransport struct {
	ns         string
	user, pass string
}

func (m mirrorTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	q := r.URL.Query()
	q.Set("ns", m.ns)
	r.URL.RawQuery = q.Encode()
	if m.user != "" {
		r.SetBasicAuth(m.user, m.pass)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// pullThroughMirror pulls repoPath (e.g. "library/redis:7") of registry ns from the
// registry at addr as containerd pulls through its mirror, reading every blob.
func pullThroughMirror(addr, ns, repoPath, user, pass string) (v1.Image, error) {
	ref, err := name.ParseReference(addr+"/"+repoPath, name.Insecure)
	if err != nil {
		return nil, err
	}
	img, err := remote.Image(ref, remote.WithTransport(mirrorTransport{ns: ns, user: user, pass: pass}))
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
	}
	if _, err := img.RawConfigFile(); err != nil {
		return nil, err
	}
	return img, nil
}

func sameDigest(t *testing.T, got, want v1.Image) {
	t.Helper()
	gd, err := got.Digest()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := want.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if gd != wd {
		t.Errorf("pulled %s, want %s", gd, wd)
	}
}

// testPullThrough is the registry's handler (as Run serves it) on a fresh dir, served on
// 127.0.0.1; cfg.Dir is set.
type testPullThrough struct {
	addr string
	dir  string
	pt   *pullThrough
}

func startPullThrough(t *testing.T, cfg Config) *testPullThrough {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	cfg.PauseBinary = "/nonexistent" // nothing is built here
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	blobDir := filepath.Join(LayoutDir(cfg.Dir), "blobs")
	if err := os.MkdirAll(filepath.Join(blobDir, "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pt := r.handler(ctx, blobDir)
	srv := httptest.NewServer(pt)
	t.Cleanup(srv.Close)
	return &testPullThrough{addr: strings.TrimPrefix(srv.URL, "http://"), dir: cfg.Dir, pt: pt}
}

// get sends method for path (with ?ns=ns) to the registry, with Basic credentials when
// user is set, and returns the response with its body read.
func (p *testPullThrough) get(t *testing.T, method, ns, path, user, pass string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+p.addr+path+"?ns="+url.QueryEscape(ns), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", strings.Join(manifestTypes, ", "))
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func layerDigest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	d, err := ls[0].Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPullThroughPublic: an image the registry does not hold comes from the registry
// the pull names, once; later pulls, from any node, and pulls after a restart while
// offline are served from the cache; images the registry holds win.
func TestPullThroughPublic(t *testing.T) {
	hub := startStandIn(t, "", "")
	want := hub.push(t, "kubelab-test/app", "1")
	dir := t.TempDir()
	p := startPullThrough(t, Config{Dir: dir, Upstreams: map[string]string{"docker.io": hub.url()}})

	got, err := pullThroughMirror(p.addr, "docker.io", "kubelab-test/app:1", "", "")
	if err != nil {
		t.Fatalf("pull docker.io/kubelab-test/app:1 through the registry: %v", err)
	}
	sameDigest(t, got, want)
	if hub.asked(http.MethodGet, "/v2/kubelab-test/app/manifests/1") != 1 {
		t.Errorf("the stand-in was asked for the manifest %d times, want once", hub.asked(http.MethodGet, "/v2/kubelab-test/app/manifests/1"))
	}
	asked := hub.askedFor("kubelab-test/app")

	// A second pull (another node): all of it from the cache.
	if got, err := pullThroughMirror(p.addr, "docker.io", "kubelab-test/app:1", "", ""); err != nil {
		t.Fatal(err)
	} else {
		sameDigest(t, got, want)
	}
	if n := hub.askedFor("kubelab-test/app"); n != asked {
		t.Errorf("the second pull asked the stand-in %d more times, want none", n-asked)
	}
	if _, err := os.Stat(filepath.Join(dir, "upstream", "blobs", "sha256", layerDigest(t, want).Hex)); err != nil {
		t.Errorf("the layer is not in the cache: %v", err)
	}

	// What the registry holds wins over upstream.
	hub.push(t, "kubelab-test/both", "1")
	local, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := push(context.Background(), p.addr, "docker.io/kubelab-test/both:1", local); err != nil {
		t.Fatal(err)
	}
	got, err = pullThroughMirror(p.addr, "docker.io", "kubelab-test/both:1", "", "")
	if err != nil {
		t.Fatal(err)
	}
	sameDigest(t, got, local)
	if n := hub.askedFor("kubelab-test/both"); n != 0 {
		t.Errorf("a pull of an image the registry holds asked upstream %d times", n)
	}

	// An image no one has: not found.
	if resp, body := p.get(t, http.MethodHead, "docker.io", "/v2/kubelab-test/missing/manifests/1", "", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("HEAD of a missing image = %s %s, want 404", resp.Status, body)
	}
	// The registry does not fetch from this machine's own addresses for a pull that
	// names them (pods reach the registry).
	if resp, body := p.get(t, http.MethodGet, hub.addr, "/v2/kubelab-test/app/manifests/1", "", ""); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "this machine") {
		t.Errorf("GET naming the machine's own address = %s %s, want 404 saying why", resp.Status, body)
	}

	// Offline, on the same dir: the cached image is served, others are not found with a
	// message naming offline mode, and nothing asks upstream.
	off := startPullThrough(t, Config{Dir: dir, Offline: true, Upstreams: map[string]string{"docker.io": hub.url()}})
	if got, err := pullThroughMirror(off.addr, "docker.io", "kubelab-test/app:1", "", ""); err != nil {
		t.Errorf("offline pull of the cached image: %v", err)
	} else {
		sameDigest(t, got, want)
	}
	hub.push(t, "kubelab-test/later", "1")
	before := len(hub.hits)
	resp, body := off.get(t, http.MethodGet, "docker.io", "/v2/kubelab-test/later/manifests/1", "", "")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "offline") {
		t.Errorf("offline GET of an uncached image = %s %s, want 404 naming offline mode", resp.Status, body)
	}
	if len(hub.hits) != before {
		t.Errorf("offline, the registry asked upstream: %q", hub.hits[before:])
	}
}

// TestPullThroughTagRevalidation: a tag cached a while ago is checked with a HEAD; the
// same digest is served from the cache, a moved tag is fetched again, and an upstream
// that cannot be reached leaves the cached one served.
func TestPullThroughTagRevalidation(t *testing.T) {
	hub := startStandIn(t, "", "")
	first := hub.push(t, "kubelab-test/moving", "v")
	p := startPullThrough(t, Config{Upstreams: map[string]string{"docker.io": hub.url()}})
	const path = "/v2/kubelab-test/moving/manifests/v"
	age := func() {
		old := time.Now().Add(-2 * tagFreshFor)
		if err := os.Chtimes(filepath.Join(p.dir, "upstream", "repos", "docker.io", "kubelab-test", "moving", "_tags", "v"), old, old); err != nil {
			t.Fatal(err)
		}
	}
	digestOf := func(img v1.Image) string {
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	if resp, _ := p.get(t, http.MethodGet, "docker.io", path, "", ""); resp.Header.Get("Docker-Content-Digest") != digestOf(first) {
		t.Fatalf("first GET = %s %s", resp.Status, resp.Header.Get("Docker-Content-Digest"))
	}
	// Fresh: upstream is not asked.
	p.get(t, http.MethodGet, "docker.io", path, "", "")
	if n := hub.asked(http.MethodGet, path) + hub.asked(http.MethodHead, path); n != 1 {
		t.Errorf("upstream asked %d times for a fresh tag, want once", n)
	}
	// Stale, unchanged: one HEAD, no GET.
	age()
	if resp, _ := p.get(t, http.MethodGet, "docker.io", path, "", ""); resp.Header.Get("Docker-Content-Digest") != digestOf(first) {
		t.Errorf("stale unchanged tag served %s", resp.Header.Get("Docker-Content-Digest"))
	}
	if hub.asked(http.MethodHead, path) != 1 || hub.asked(http.MethodGet, path) != 1 {
		t.Errorf("stale unchanged tag: upstream asked HEAD %d, GET %d times; want 1 and 1", hub.asked(http.MethodHead, path), hub.asked(http.MethodGet, path))
	}
	// Stale, moved: the new manifest.
	second := hub.push(t, "kubelab-test/moving", "v")
	age()
	if resp, _ := p.get(t, http.MethodGet, "docker.io", path, "", ""); resp.Header.Get("Docker-Content-Digest") != digestOf(second) {
		t.Errorf("moved tag served %s, want %s", resp.Header.Get("Docker-Content-Digest"), digestOf(second))
	}
	// Stale, upstream gone: the cached one.
	down := startPullThrough(t, Config{Dir: p.dir, Upstreams: map[string]string{"docker.io": "http://127.0.0.1:1"}})
	age()
	if resp, body := down.get(t, http.MethodGet, "docker.io", path, "", ""); resp.StatusCode != http.StatusOK || resp.Header.Get("Docker-Content-Digest") != digestOf(second) {
		t.Errorf("stale tag with upstream unreachable = %s %s %s, want the cached %s", resp.Status, resp.Header.Get("Docker-Content-Digest"), body, digestOf(second))
	}
}

// TestPullThroughPrivate: a registry that asks for credentials gets the pull's own (a
// Basic challenge makes containerd send those the kubelet gave it), and what they fetch
// is not cached for pulls without them; the user's own credentials (the docker CLI's
// config) serve every pull and are cached.
func TestPullThroughPrivate(t *testing.T) {
	const host = "private.kubelab.test"
	priv := startStandIn(t, "alice", "s3cret")
	want := priv.push(t, "team/app", "1")
	p := startPullThrough(t, Config{Upstreams: map[string]string{host: priv.url()}})

	resp, body := p.get(t, http.MethodHead, host, "/v2/team/app/manifests/1", "", "")
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
		t.Fatalf("anonymous HEAD = %s %q %s, want 401 with a Basic challenge", resp.Status, resp.Header.Get("WWW-Authenticate"), body)
	}
	if _, err := pullThroughMirror(p.addr, host, "team/app:1", "", ""); err == nil {
		t.Error("anonymous pull of a private image succeeded")
	}
	got, err := pullThroughMirror(p.addr, host, "team/app:1", "alice", "s3cret")
	if err != nil {
		t.Fatalf("pull with the credentials: %v", err)
	}
	sameDigest(t, got, want)
	// Nothing of it serves a pull without them.
	layer := layerDigest(t, want)
	if _, err := os.Stat(filepath.Join(p.dir, "upstream", "blobs", "sha256", layer.Hex)); err == nil {
		t.Error("a layer fetched with a pull's own credentials is in the shared cache")
	}
	if resp, _ := p.get(t, http.MethodGet, host, "/v2/team/app/blobs/"+layer.String(), "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous GET of the private layer = %s, want 401", resp.Status)
	}
	if resp, _ := p.get(t, http.MethodGet, host, "/v2/team/app/manifests/1", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous GET of the private manifest after a pull with credentials = %s, want 401", resp.Status)
	}
	if resp, body := p.get(t, http.MethodGet, host, "/v2/team/app/manifests/1", "alice", "wrong"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET with wrong credentials = %s %s, want 403", resp.Status, body)
	}

	// The user's docker config names credentials for the host: pulls without their own
	// use them, and the image is cached.
	cfgDir := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", cfgDir)
	user := startPullThrough(t, Config{Upstreams: map[string]string{host: priv.url()}, Keychain: authn.DefaultKeychain})
	got, err = pullThroughMirror(user.addr, host, "team/app:1", "", "")
	if err != nil {
		t.Fatalf("pull with the user's credentials: %v", err)
	}
	sameDigest(t, got, want)
	if _, err := os.Stat(filepath.Join(user.dir, "upstream", "blobs", "sha256", layer.Hex)); err != nil {
		t.Errorf("a layer fetched with the user's credentials is not cached: %v", err)
	}
}

// TestPullThroughSharesFetches: pulls of one blob while it is being fetched (nodes
// pulling an image at once) share the one fetch from upstream.
func TestPullThroughSharesFetches(t *testing.T) {
	hub := startStandIn(t, "", "")
	img := hub.push(t, "kubelab-test/big", "1")
	p := startPullThrough(t, Config{Upstreams: map[string]string{"docker.io": hub.url()}})
	layer := layerDigest(t, img)
	blobPath := "/v2/kubelab-test/big/blobs/" + layer.String()
	release := hub.hold(blobPath)
	t.Cleanup(release)

	type result struct {
		status int
		body   string
	}
	results := make(chan result, 2)
	for range 2 {
		go func() {
			resp, err := http.Get("http://" + p.addr + blobPath + "?ns=docker.io")
			if err != nil {
				results <- result{body: err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- result{resp.StatusCode, string(b)}
		}()
	}
	testutil.Eventually(t, "the stand-in asked for the layer", func() bool { return hub.asked(http.MethodGet, blobPath) == 1 })
	p.pt.cache.mu.Lock()
	_, fetching := p.pt.cache.fetching[layer]
	p.pt.cache.mu.Unlock()
	if !fetching {
		t.Error("no fetch of the layer under way")
	}
	release()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ls[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(rc)
	rc.Close()
	for range 2 {
		r := <-results
		if r.status != http.StatusOK || r.body != string(want) {
			t.Errorf("GET of the layer = %d, %d bytes, want 200 with its %d bytes", r.status, len(r.body), len(want))
		}
	}
	if n := hub.asked(http.MethodGet, blobPath); n != 1 {
		t.Errorf("the stand-in was asked for the layer %d times, want once", n)
	}
}

// TestPullThroughProxy: requests to upstream go through the proxy Config.Proxy names.
func TestPullThroughProxy(t *testing.T) {
	hub := startStandIn(t, "", "")
	want := hub.push(t, "kubelab-test/proxied", "1")
	var mu sync.Mutex
	var proxied []string
	forward := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		mu.Lock()
		proxied = append(proxied, r.In.Method+" "+r.In.URL.String())
		mu.Unlock()
		r.Out.URL.Scheme, r.Out.URL.Host = "http", r.In.URL.Host // a forward proxy: the request names its target
	}}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect { // no tunnels: the stand-in speaks plain HTTP
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	proxyURL, _ := url.Parse(proxy.URL)
	p := startPullThrough(t, Config{Upstreams: map[string]string{"docker.io": hub.url()},
		Proxy: func(*http.Request) (*url.URL, error) { return proxyURL, nil }})
	got, err := pullThroughMirror(p.addr, "docker.io", "kubelab-test/proxied:1", "", "")
	if err != nil {
		t.Fatal(err)
	}
	sameDigest(t, got, want)
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(strings.Join(proxied, "\n"), "GET http://"+hub.addr+"/v2/kubelab-test/proxied/manifests/1") {
		t.Errorf("the proxy carried %q, want the manifest's GET", proxied)
	}
}

func TestUpstreamsConfig(t *testing.T) {
	for _, ep := range []string{"ftp://x", "http://", "http://x/path", "x:5000", "http://u:p@x"} {
		if _, err := New(Config{Dir: t.TempDir(), PauseBinary: "/x", Upstreams: map[string]string{"docker.io": ep}}); err == nil {
			t.Errorf("endpoint %q accepted", ep)
		}
	}
	if _, err := New(Config{Dir: t.TempDir(), PauseBinary: "/x", Upstreams: map[string]string{"not a host": "http://x"}}); err == nil {
		t.Error("host \"not a host\" accepted")
	}
	up, err := newUpstreams(Config{Upstreams: map[string]string{"127.0.0.1:5000": "http://127.0.0.1:5000"}, Proxy: http.ProxyFromEnvironment})
	if err != nil {
		t.Fatal(err)
	}
	for host, ok := range map[string]bool{
		"docker.io": true, "registry.k8s.io": true, "myregistry.example:5000": true, "10.1.2.3:5000": true,
		"127.0.0.1:5000": true, // named in Upstreams
		"localhost:5000": false, "127.0.0.1:6443": false, "[::1]:5000": false, "169.254.169.254": false, "0.0.0.0": false,
		"Docker.io": false, "a/b": false, "": false,
	} {
		if err := up.checkHost(host); (err == nil) != ok {
			t.Errorf("checkHost(%q) = %v, want ok %v", host, err, ok)
		}
	}
	for path, want := range map[string]string{
		"/v2/library/redis/manifests/7":                         "library/redis manifests 7",
		"/v2/a/b/c/manifests/sha256:" + strings.Repeat("a", 64): "a/b/c manifests sha256:" + strings.Repeat("a", 64),
		"/v2/pause/blobs/sha256:" + strings.Repeat("b", 64):     "pause blobs sha256:" + strings.Repeat("b", 64),
		"/v2/pause/blobs/latest":                                "",
		"/v2/../x/manifests/1":                                  "",
		"/v2/":                                                  "",
		"/v2/library/redis/blobs/uploads/":                      "",
	} {
		repo, kind, ref, ok := splitPullPath(path)
		got := ""
		if ok {
			got = fmt.Sprintf("%s %s %s", repo, kind, ref)
		}
		if got != want {
			t.Errorf("splitPullPath(%q) = %q, want %q", path, got, want)
		}
	}
}
