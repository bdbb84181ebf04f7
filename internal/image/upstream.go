package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// upstreams reaches the registries images come from: a registry host ("docker.io",
// "registry.k8s.io", "ghcr.io") at the endpoint Config.Upstreams names for it, else at
// its own address over HTTPS. Requests carry the credentials they are given, else the
// keychain's for the host (the user's own), else none.
type upstreams struct {
	endpoints map[string]*url.URL
	keychain  authn.Keychain
	base      http.RoundTripper
	log       *slog.Logger

	mu         sync.Mutex
	transports map[transportKey]cachedTransport
}

// transportKey names an authenticated transport: one per registry host, repository and
// credentials (auth is "" for the keychain's, else a hash of the request's).
type transportKey struct{ host, repo, auth string }

type cachedTransport struct {
	rt      http.RoundTripper
	created time.Time
}

// transportLifetime is how long an authenticated transport (its ping's result and
// tokens, which it refreshes itself) is reused before the registry is pinged again.
const transportLifetime = 10 * time.Minute

// hostPattern is a registry host as containerd names it in ?ns=: a DNS name or an IP
// address, with an optional port.
var hostPattern = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:.]+\])(:[0-9]{1,5})?$`)

// repoPattern is a repository path as the distribution spec allows it.
var repoPattern = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)

// tagPattern is a tag as the distribution spec allows it.
var tagPattern = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)

func newUpstreams(cfg Config) (*upstreams, error) {
	eps := map[string]*url.URL{}
	for host, ep := range cfg.Upstreams {
		u, err := parseEndpoint(ep)
		if err != nil {
			return nil, fmt.Errorf("upstream of %s: %w", host, err)
		}
		h := strings.ToLower(host)
		if !hostPattern.MatchString(h) {
			return nil, fmt.Errorf("upstream of %q: not a registry host", host)
		}
		eps[h] = u
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.Proxy = cfg.Proxy
	base.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	base.ResponseHeaderTimeout = 2 * time.Minute
	return &upstreams{endpoints: eps, keychain: cfg.Keychain, base: base, log: cfg.Logger,
		transports: map[transportKey]cachedTransport{}}, nil
}

// parseEndpoint checks an upstream endpoint: http or https, a host, no path.
func parseEndpoint(ep string) (*url.URL, error) {
	u, err := url.Parse(ep)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", ep, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("endpoint %q: want http(s)://host[:port]", ep)
	}
	return u, nil
}

// checkHost says whether host, from a pull's ?ns=, may be fetched from: a registry host,
// and not this machine or a link-local address (a pod reaches the registry and must not
// reach the machine's own services through it) unless Config.Upstreams names it.
func (u *upstreams) checkHost(host string) error {
	if !hostPattern.MatchString(host) {
		return fmt.Errorf("%q is not a registry host", host)
	}
	if _, ok := u.endpoints[host]; ok {
		return nil
	}
	h := host
	if sh, _, err := net.SplitHostPort(host); err == nil {
		h = sh
	}
	h = strings.Trim(h, "[]")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return fmt.Errorf("registry host %s is this machine", host)
	}
	if ip := net.ParseIP(h); ip != nil && (ip.IsLoopback() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()) {
		return fmt.Errorf("registry host %s is this machine or link-local", host)
	}
	return nil
}

// registry is where host's images are fetched from.
func (u *upstreams) registry(host string) (name.Registry, error) {
	if ep, ok := u.endpoints[host]; ok {
		opts := []name.Option{name.StrictValidation}
		if ep.Scheme == "http" {
			opts = append(opts, name.Insecure)
		}
		return name.NewRegistry(ep.Host, opts...)
	}
	return name.NewRegistry(host, name.StrictValidation)
}

// credentials are what a request to an upstream registry authenticates with: those the
// pull carried (containerd's, from the pod's imagePullSecrets), or nil for the
// keychain's.
type credentials struct{ username, password string }

func (c *credentials) key() string {
	if c == nil {
		return ""
	}
	sum := sha256.Sum256([]byte(c.username + "\x00" + c.password))
	return hex.EncodeToString(sum[:])
}

// transport is an authenticated round tripper for repo of host with creds.
func (u *upstreams) transport(ctx context.Context, host, repo string, creds *credentials) (http.RoundTripper, name.Registry, error) {
	reg, err := u.registry(host)
	if err != nil {
		return nil, reg, err
	}
	key := transportKey{host: host, repo: repo, auth: creds.key()}
	u.mu.Lock()
	ct, ok := u.transports[key]
	u.mu.Unlock()
	if ok && time.Since(ct.created) < transportLifetime {
		return ct.rt, reg, nil
	}
	var auth authn.Authenticator = authn.Anonymous
	if creds != nil {
		auth = &authn.Basic{Username: creds.username, Password: creds.password}
	} else if u.keychain != nil {
		// The keychain knows the registry by its own name (docker.io as index.docker.io).
		logical, err := name.NewRegistry(host)
		if err == nil {
			if a, err := authn.Resolve(ctx, u.keychain, logical); err != nil {
				u.log.Warn("image registry: the user's credentials for a registry could not be read; pulling anonymously", "registry", host, "err", err)
			} else {
				auth = a
			}
		}
	}
	rt, err := transport.NewWithContext(ctx, reg, auth, u.base, []string{reg.Repo(repo).Scope(transport.PullScope)})
	if err != nil {
		return nil, reg, err
	}
	u.mu.Lock()
	u.transports[key] = cachedTransport{rt: rt, created: time.Now()}
	u.mu.Unlock()
	return rt, reg, nil
}

// forget drops the transport of key, after its credentials were refused.
func (u *upstreams) forget(host, repo string, creds *credentials) {
	u.mu.Lock()
	delete(u.transports, transportKey{host: host, repo: repo, auth: creds.key()})
	u.mu.Unlock()
}

// do sends method on /v2/<repo>/<kind>/<ref> to host's registry, with the Accept header
// given (manifests), and returns the response (redirects followed). An authentication
// refused before the request was sent (the registry's token service) is a response
// with its status.
func (u *upstreams) do(ctx context.Context, method, host, repo, kind, ref string, accept []string, creds *credentials) (*http.Response, error) {
	rt, reg, err := u.transport(ctx, host, repo, creds)
	if err != nil {
		var terr *transport.Error
		if errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden) {
			return &http.Response{StatusCode: terr.StatusCode, Status: http.StatusText(terr.StatusCode), Header: http.Header{},
				Body: http.NoBody}, nil
		}
		return nil, fmt.Errorf("reach %s: %w", host, err)
	}
	target := fmt.Sprintf("%s://%s/v2/%s/%s/%s", reg.Scheme(), reg.RegistryStr(), repo, kind, ref)
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return nil, err
	}
	for _, a := range accept {
		req.Header.Add("Accept", a)
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		u.forget(host, repo, creds)
		return nil, fmt.Errorf("%s %s from %s: %w", method, kind, host, err)
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		u.forget(host, repo, creds)
	}
	return resp, nil
}
