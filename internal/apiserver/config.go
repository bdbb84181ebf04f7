package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubelab/kubelab/internal/apiserver/auth/serviceaccount"
)

// DefaultServiceRepairInterval is how often the Service allocations are checked against
// the Services when Config.ServiceRepairInterval is 0.
const DefaultServiceRepairInterval = 3 * time.Minute

// Config is what `kubelab apiserver` and `kubelab up` set.
type Config struct {
	// DataDir holds the PKI (DataDir/pki) and the admin kubeconfig (DataDir/kubeconfig).
	DataDir string
	// BindAddress and Port: where HTTPS is served; Port 0 picks a free port.
	BindAddress string
	Port        int
	// EtcdServers are the etcd client URLs; EtcdPrefix the key prefix ("/registry").
	EtcdServers []string
	EtcdPrefix  string
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile are the API server's TLS toward etcd: the
	// CA that signed etcd's serving certificate, and the client certificate etcd asks for
	// (the embedded etcd's are PKI.APIServerEtcdClientCert and PKI.EtcdCACert). All three
	// or none; https etcd servers need them.
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	// ServiceCIDR is the range ClusterIPs come from (10.96.0.0/12).
	ServiceCIDR string
	// KubeconfigPath is where the admin kubeconfig is written; DataDir/kubeconfig when empty.
	KubeconfigPath string
	// GCPercent is the garbage collector's target Run sets for the process
	// (debug.SetGCPercent): 0 means DefaultGCPercent unless the GOGC environment variable
	// is set, -1 keeps the runtime's setting.
	GCPercent int
	// MemoryLimit, when positive, is the soft memory limit in bytes Run sets for the
	// process (debug.SetMemoryLimit); 0 keeps the runtime's (GOMEMLIMIT, or none).
	MemoryLimit int64
	// KubeletPreferredAddressTypes are the node address types tried, in order, to reach a
	// node's kubelet (pods' log, exec, attach, portforward); InternalIP, Hostname when empty.
	KubeletPreferredAddressTypes []corev1.NodeAddressType
	// ServiceRepairInterval is how often the ClusterIP and NodePort reservations are
	// checked against the Services (servicerepair.go); the first check runs at start.
	// DefaultServiceRepairInterval when 0.
	ServiceRepairInterval time.Duration

	// AdvertiseAddress, when set, is the IPv4 address pods reach the API server at (its
	// address on the cluster network): the serving certificate names it, and the
	// "kubernetes" Service of the default namespace is kept pointing at
	// AdvertiseAddress:AdvertisePort through its Endpoints and EndpointSlice
	// (kubernetesservice.go). Empty: the Service targets the loopback port and has no
	// endpoints.
	AdvertiseAddress string
	// AdvertisePort is the port at AdvertiseAddress; 443 when 0.
	AdvertisePort int
	// ExtraListeners are sockets the caller opened (in another network namespace, say),
	// served with the same handler and certificate as the main address. Run closes them
	// when it returns. Server.AddListener hands one over later (after New, before or
	// during Run), for callers that open it only once the cluster runs.
	ExtraListeners []net.Listener
	// ClusterDial connects to addresses on the cluster's network (pod IPs, ClusterIPs),
	// which the API server's own network namespace may have no route to (kubelab's real
	// nodes: the host namespace has none), as kube-apiserver's egress selector does for
	// its "cluster" network context. Admission and CRD conversion webhooks named by a
	// Service, and the pods' and Services' proxy subresources, are reached through it.
	// nil dials from the process's own namespace (a net.Dialer).
	ClusterDial func(ctx context.Context, network, addr string) (net.Conn, error)

	// ServiceAccountIssuers are kube-apiserver's --service-account-issuer values: the
	// first is the iss of the service account tokens the server signs and the issuer of
	// its OpenID Connect discovery document; tokens of any of them are accepted, and all
	// of them are the server's own audiences (what a TokenRequest without audiences
	// gets). [serviceaccount.DefaultIssuer] when empty. Discovery is served only when the
	// first is an https URL without query or fragment, as upstream.
	ServiceAccountIssuers []string
	// ServiceAccountJWKSURI is --service-account-jwks-uri: the jwks_uri of the discovery
	// document (an https URL). Empty: the key set's path at AdvertiseAddress:AdvertisePort
	// when set, else at the address the server listens on.
	ServiceAccountJWKSURI string

	// Logger receives the server's own logs; slog.Default() when nil.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.BindAddress == "" {
		c.BindAddress = "127.0.0.1"
	}
	if c.EtcdPrefix == "" {
		c.EtcdPrefix = "/registry"
	}
	if c.ServiceCIDR == "" {
		c.ServiceCIDR = "10.96.0.0/12"
	}
	if c.ServiceRepairInterval == 0 {
		c.ServiceRepairInterval = DefaultServiceRepairInterval
	}
	if c.AdvertiseAddress != "" && c.AdvertisePort == 0 {
		c.AdvertisePort = 443
	}
	if len(c.ServiceAccountIssuers) == 0 {
		c.ServiceAccountIssuers = []string{serviceaccount.DefaultIssuer}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.KubeconfigPath == "" && c.DataDir != "" {
		c.KubeconfigPath = filepath.Join(c.DataDir, "kubeconfig")
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is required"))
	}
	if ip := net.ParseIP(c.BindAddress); ip == nil {
		errs = append(errs, fmt.Errorf("bind address %q is not an IP address", c.BindAddress))
	}
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d is out of range", c.Port))
	}
	if len(c.EtcdServers) == 0 {
		errs = append(errs, errors.New("at least one etcd server is required"))
	}
	for _, s := range c.EtcdServers {
		if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
			errs = append(errs, fmt.Errorf("etcd server %q must be a URL like http://127.0.0.1:2379", s))
		}
	}
	errs = append(errs, c.validateEtcdTLS()...)
	if !strings.HasPrefix(c.EtcdPrefix, "/") {
		errs = append(errs, fmt.Errorf("etcd prefix %q must start with /", c.EtcdPrefix))
	}
	if c.GCPercent < -1 {
		errs = append(errs, fmt.Errorf("GC percent %d must be positive, 0 (default) or -1 (keep the runtime's)", c.GCPercent))
	}
	if c.MemoryLimit < 0 {
		errs = append(errs, fmt.Errorf("memory limit %d must not be negative", c.MemoryLimit))
	}
	if _, n, err := net.ParseCIDR(c.ServiceCIDR); err != nil || n.IP.To4() == nil {
		errs = append(errs, fmt.Errorf("service CIDR %q is not an IPv4 CIDR", c.ServiceCIDR))
	} else if ones, _ := n.Mask.Size(); ones > 30 {
		errs = append(errs, fmt.Errorf("service CIDR %q is too small: it needs at least /30 (the kubernetes Service and one more)", c.ServiceCIDR))
	}
	if c.ServiceRepairInterval < 0 {
		errs = append(errs, fmt.Errorf("service repair interval %s must not be negative", c.ServiceRepairInterval))
	}
	if c.AdvertiseAddress != "" {
		if ip := net.ParseIP(c.AdvertiseAddress); ip == nil || ip.To4() == nil || ip.IsUnspecified() {
			errs = append(errs, fmt.Errorf("advertise address %q is not an IPv4 address", c.AdvertiseAddress))
		}
	}
	if c.AdvertisePort < 0 || c.AdvertisePort > 65535 {
		errs = append(errs, fmt.Errorf("advertise port %d is out of range", c.AdvertisePort))
	}
	errs = append(errs, validateServiceAccountIssuers(c.ServiceAccountIssuers, c.ServiceAccountJWKSURI)...)
	for i, l := range c.ExtraListeners {
		if l == nil {
			errs = append(errs, fmt.Errorf("extra listener %d is nil", i))
		}
	}
	return errors.Join(errs...)
}

// validateServiceAccountIssuers checks the issuers and the JWKS URI as kube-apiserver
// does: no issuer empty or given twice, one with a colon a URL, the JWKS URI https.
func validateServiceAccountIssuers(issuers []string, jwksURI string) []error {
	var errs []error
	seen := map[string]bool{}
	for _, iss := range issuers {
		switch {
		case iss == "":
			errs = append(errs, errors.New("service-account-issuer must not be empty"))
		case seen[iss]:
			errs = append(errs, fmt.Errorf("service-account-issuer %q is already specified", iss))
		case strings.Contains(iss, ":"):
			if _, err := url.Parse(iss); err != nil {
				errs = append(errs, fmt.Errorf("service-account-issuer %q contained a ':' but was not a valid URL: %w", iss, err))
			}
		}
		seen[iss] = true
	}
	if jwksURI != "" {
		if u, err := url.Parse(jwksURI); err != nil {
			errs = append(errs, fmt.Errorf("service-account-jwks-uri must be a valid URL: %w", err))
		} else if u.Scheme != "https" {
			errs = append(errs, fmt.Errorf("service-account-jwks-uri requires https scheme, parsed as: %s", u))
		}
	}
	return errs
}
