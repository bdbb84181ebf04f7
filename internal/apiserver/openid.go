package apiserver

import (
	"fmt"
	"net"
	"net/http"
	"strconv"

	"k8s.io/apiserver/pkg/server/mux"

	"github.com/kubelab/kubelab/internal/apiserver/auth/serviceaccount"
)

// The service account issuer's OpenID Connect discovery: its metadata at
// /.well-known/openid-configuration and its public keys at /openid/v1/jwks, so that a
// relying party (a pod with a projected token for its own audience, a cloud's identity
// federation) checks tokens itself. Anyone the bootstrap role
// system:service-account-issuer-discovery is bound to may read them.

// openIDCacheControl lets clients keep both documents an hour: the keys change only
// with sa.pub, which the server reads at start.
const openIDCacheControl = "public, max-age=3600"

// jwksURI is where clients reach the key set: the address pods reach the server at when
// there is one, else the address it listens on.
func (s *Server) jwksURI(listener net.Addr) string {
	host := listener.String()
	if s.cfg.AdvertiseAddress != "" {
		host = net.JoinHostPort(s.cfg.AdvertiseAddress, strconv.Itoa(s.cfg.AdvertisePort))
	}
	return "https://" + host + serviceaccount.JWKSPath
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
