package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"golang.org/x/sync/errgroup"

	"github.com/kubelab/kubelab/internal/apiserver"
	"github.com/kubelab/kubelab/internal/apiserver/auth/serviceaccount"
	"github.com/kubelab/kubelab/internal/etcd"
)

// ControlPlaneConfig says where the API server serves and which etcd it stores in.
type ControlPlaneConfig struct {
	// DataDir holds etcd's data (DataDir/etcd), the PKI and the admin kubeconfig.
	DataDir string
	// BindAddress and SecurePort of the API server (port 0 picks a free one).
	BindAddress string
	SecurePort  int
	// EtcdServers are an external etcd's client URLs; when empty an etcd is embedded,
	// serving clients on https://127.0.0.1:EtcdClientPort and peers on EtcdPeerPort
	// (default the next port), both over mutual TLS with the certificates of DataDir/pki
	// (apiserver.PKI.EnsureEtcd).
	EtcdServers                  []string
	EtcdPrefix                   string
	EtcdClientPort, EtcdPeerPort int
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile are the API server's TLS toward an external
	// etcd (all three, or none for http).
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	// ServiceCIDR is the range Service ClusterIPs come from.
	ServiceCIDR string
	// AdvertiseAddress is where pods reach the API server (the kubernetes Service's
	// endpoint), port 443; empty when they do not (hollow nodes).
	AdvertiseAddress string
	// GCPercent and MemoryLimit tune the process's garbage collector (see
	// apiserver.Config; 0 takes the API server's defaults).
	GCPercent   int
	MemoryLimit int64
	// ClusterDial connects the API server to the cluster's network (webhooks' Services,
	// the proxy subresources' pods and Services); nil: from the process's namespace.
	ClusterDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// ServiceAccountIssuers and ServiceAccountJWKSURI are the API server's
	// --service-account-issuer (the first signs, all are accepted) and
	// --service-account-jwks-uri. A cluster (New) without issuers gets
	// defaultServiceAccountIssuers; the API server alone, kube-apiserver's default.
	ServiceAccountIssuers []string
	ServiceAccountJWKSURI string
	// KubeletPreferredAddressTypes are the node address types the API server tries, in
	// order, to reach a kubelet (default: InternalDNS first, where a hollow node's kubelet
	// names its loopback server, then InternalIP and Hostname).
	KubeletPreferredAddressTypes []corev1.NodeAddressType
}

// ControlPlane is etcd (when embedded) and the API server, ready to run.
type ControlPlane struct {
	Etcd      *etcd.Server // nil with an external etcd
	APIServer *apiserver.Server

	pki apiserver.PKI // where the embedded etcd's certificates are made
}

// NewControlPlane checks cfg and builds etcd and the API server without starting them.
func NewControlPlane(cfg ControlPlaneConfig) (*ControlPlane, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("control plane: data dir is required")
	}
	if len(cfg.EtcdServers) == 0 && (cfg.EtcdClientPort <= 0 || cfg.EtcdClientPort > 65534 || cfg.EtcdPeerPort < 0 || cfg.EtcdPeerPort > 65535) {
		return nil, fmt.Errorf("control plane: etcd ports %d/%d: want a client port in 1..65534 (and a peer port, default the next one)",
			cfg.EtcdClientPort, cfg.EtcdPeerPort)
	}
	if len(cfg.EtcdServers) == 0 && (cfg.EtcdCAFile != "" || cfg.EtcdCertFile != "" || cfg.EtcdKeyFile != "") {
		return nil, errors.New("control plane: etcd CA, certificate and key files are for an external etcd (etcd servers); the embedded etcd uses its own")
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("control plane: data dir: %w", err)
	}
	cp := &ControlPlane{pki: apiserver.PKI{Dir: filepath.Join(dataDir, "pki")}}
	servers := cfg.EtcdServers
	etcdCA, etcdCert, etcdKey := cfg.EtcdCAFile, cfg.EtcdCertFile, cfg.EtcdKeyFile
	if len(servers) == 0 {
		peer := cfg.EtcdPeerPort
		if peer == 0 {
			peer = cfg.EtcdClientPort + 1
		}
		cp.Etcd, err = etcd.New(etcd.Config{
			DataDir:   filepath.Join(dataDir, "etcd"),
			ClientURL: fmt.Sprintf("https://127.0.0.1:%d", cfg.EtcdClientPort),
			PeerURL:   fmt.Sprintf("https://127.0.0.1:%d", peer),
			ClientTLS: etcd.TLSFiles{CertFile: cp.pki.EtcdServerCert(), KeyFile: cp.pki.EtcdServerKey(), TrustedCAFile: cp.pki.EtcdCACert()},
			PeerTLS:   etcd.TLSFiles{CertFile: cp.pki.EtcdPeerCert(), KeyFile: cp.pki.EtcdPeerKey(), TrustedCAFile: cp.pki.EtcdCACert()},
			// The limit the API server names when it refuses an object too large for etcd.
			MaxRequestBytes: apiserver.EtcdMaxRequestBytes,
		})
		if err != nil {
			return nil, err
		}
		servers = cp.Etcd.Endpoints()
		etcdCA, etcdCert, etcdKey = cp.pki.EtcdCACert(), cp.pki.APIServerEtcdClientCert(), cp.pki.APIServerEtcdClientKey()
	}
	if cfg.KubeletPreferredAddressTypes == nil {
		cfg.KubeletPreferredAddressTypes = []corev1.NodeAddressType{corev1.NodeInternalDNS, corev1.NodeInternalIP, corev1.NodeHostName}
	}
	cp.APIServer, err = apiserver.New(apiserver.Config{
		DataDir: dataDir, BindAddress: cfg.BindAddress, Port: cfg.SecurePort,
		EtcdServers: servers, EtcdPrefix: cfg.EtcdPrefix, ServiceCIDR: cfg.ServiceCIDR, AdvertiseAddress: cfg.AdvertiseAddress,
		EtcdCAFile: etcdCA, EtcdCertFile: etcdCert, EtcdKeyFile: etcdKey,
		GCPercent: cfg.GCPercent, MemoryLimit: cfg.MemoryLimit, ClusterDial: cfg.ClusterDial,
		KubeletPreferredAddressTypes: cfg.KubeletPreferredAddressTypes,
		ServiceAccountIssuers:        cfg.ServiceAccountIssuers, ServiceAccountJWKSURI: cfg.ServiceAccountJWKSURI,
	})
	if err != nil {
		return nil, err
	}
	return cp, nil
}

// Start runs etcd (after making its certificates), then the API server once etcd
// serves, in g. When ctx ends the API server stops first and etcd after it, so no
// request is cut off from its store.
func (cp *ControlPlane) Start(ctx context.Context, g *errgroup.Group) {
	etcdCtx, stopEtcd := context.WithCancel(context.WithoutCancel(ctx))
	if cp.Etcd != nil {
		g.Go(func() error {
			if err := cp.pki.EnsureEtcd("127.0.0.1"); err != nil {
				return fmt.Errorf("etcd certificates: %w", err)
			}
			return cp.Etcd.Run(etcdCtx)
		})
	}
	g.Go(func() error {
		defer stopEtcd()
		if cp.Etcd != nil {
			select {
			case <-cp.Etcd.Ready():
			case <-ctx.Done():
				return nil
			}
		}
		return cp.APIServer.Run(ctx)
	})
}

// defaultServiceAccountIssuers are the issuers of a cluster whose config names none: a
// URL of the API server where relying parties (the cloud's STS) read the discovery
// document, its address on the VPC when it has one (real nodes), else its loopback
// address when its port is fixed, followed by kube-apiserver's default, which the tokens
// of a data dir made before carry. Nil (the default alone) when the port is not known
// yet.
func defaultServiceAccountIssuers(cfg ControlPlaneConfig) []string {
	host := ""
	switch {
	case cfg.AdvertiseAddress != "":
		host = cfg.AdvertiseAddress // port 443
	case cfg.SecurePort > 0:
		bind := cfg.BindAddress
		if ip := net.ParseIP(bind); bind == "" || ip == nil || ip.IsUnspecified() {
			bind = "127.0.0.1"
		}
		host = net.JoinHostPort(bind, strconv.Itoa(cfg.SecurePort))
	default:
		return nil
	}
	return []string{"https://" + host, serviceaccount.DefaultIssuer}
}
