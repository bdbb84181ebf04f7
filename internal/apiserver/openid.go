package apiserver

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"k8s.io/apiserver/pkg/server/mux"

	"github.com/kubelab/kubelab/internal/apiserver/auth/serviceaccount"
)

// The service account issuer's OpenID Connect discovery: its metadata at
// /.well-known/openid-configuration and its public keys at /openid/v1/jwks, so that a
// relying party (a pod with a projected token for its own audience, a cloud's identity
// federation) checks tokens itself. Anyone the role system:service-account-issuer-discovery
// is bound to may read them: every service account by the bootstrap policy, and anonymous
// requests where it is bound to system:unauthenticated too (as kubelab up does, so that
// the cloud's STS fetches the keys without credentials).

// openIDCacheControl lets clients keep both documents an hour: the keys change only
// with sa.pub, which the server reads at start.
const openIDCacheControl = "public, max-age=3600"

// jwksURI is where clients reach the key set: Config.ServiceAccountJWKSURI, else the
// address pods reach the server at when there is one, else the address it listens on.
func (s *Server) jwksURI(listener net.Addr) string {
	if s.cfg.ServiceAccountJWKSURI != "" {
		return s.cfg.ServiceAccountJWKSURI
	}
	host := listener.String()
	switch {
	case s.cfg.AdvertiseAddress != "" && s.cfg.AdvertisePort == 443:
		host = s.cfg.AdvertiseAddress // https's own port, unnamed as in the issuer's URL
	case s.cfg.AdvertiseAddress != "":
		host = net.JoinHostPort(s.cfg.AdvertiseAddress, strconv.Itoa(s.cfg.AdvertisePort))
	}
	return "https://" + host + serviceaccount.JWKSPath
}

// discoverableIssuer says why an issuer gets no discovery document, as kube-apiserver
// decides: it must be an https URL without query or fragment.
func discoverableIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	switch {
	case err != nil:
		return fmt.Errorf("issuer %q is not a URL: %w", issuer, err)
	case u.Scheme != "https":
		return fmt.Errorf("issuer URL must use https scheme, got: %s", issuer)
	case u.RawQuery != "":
		return fmt.Errorf("issuer URL may not include a query, got: %s", issuer)
	case u.Fragment != "":
		return fmt.Errorf("issuer URL may not include a fragment, got: %s", issuer)
	}
	return nil
}

// installOpenIDMetadata serves the discovery document and the key set of tokens' issuer
// on m.
func installOpenIDMetadata(m *mux.PathRecorderMux, tokens *serviceAccountTokens, jwksURI string) error {
	config, err := serviceaccount.OpenIDConfiguration(tokens.issuer.Name(), jwksURI, tokens.keys)
	if err != nil {
		return fmt.Errorf("openid configuration: %w", err)
	}
	keys, err := serviceaccount.JWKS(tokens.keys)
	if err != nil {
		return fmt.Errorf("openid key set: %w", err)
	}
	m.Handle(serviceaccount.OpenIDConfigurationPath, staticJSON(config, "application/json"))
	m.Handle(serviceaccount.JWKSPath, staticJSON(keys, "application/jwk-set+json"))
	return nil
}

// staticJSON answers GET with body as contentType.
func staticJSON(body []byte, contentType string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", openIDCacheControl)
		_, _ = w.Write(body)
	})
}
