package app

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubelab/kubelab/internal/cluster"
)

// controlPlaneFlags are the flags of the API server and its etcd.
type controlPlaneFlags struct {
	dataDir        string
	bindAddress    string
	securePort     int
	etcdServers    []string
	etcdPrefix     string
	etcdClientPort int
	etcdPeerPort   int
	etcdCAFile     string
	etcdCertFile   string
	etcdKeyFile    string
	serviceCIDR    string
	gcPercent      int
	memoryLimit    string
	saIssuers      []string
	saJWKSURI      string
}

func (f *controlPlaneFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.dataDir, "data-dir", DefaultDataDir, "directory for etcd data, certificates and the kubeconfig")
	fs.StringVar(&f.bindAddress, "bind-address", "127.0.0.1", "address the API server listens on")
	fs.IntVar(&f.securePort, "secure-port", 6443, "HTTPS port of the API server (0 picks a free one)")
	fs.StringSliceVar(&f.etcdServers, "etcd-servers", nil, "external etcd client URLs; when empty an embedded etcd runs in the data dir")
	fs.StringVar(&f.etcdPrefix, "etcd-prefix", "/registry", "prefix of every key the API server writes")
	fs.IntVar(&f.etcdClientPort, "etcd-client-port", 2379, "client port of the embedded etcd on 127.0.0.1")
	fs.IntVar(&f.etcdPeerPort, "etcd-peer-port", 0, "peer port of the embedded etcd on 127.0.0.1 (default: the client port + 1)")
	fs.StringVar(&f.etcdCAFile, "etcd-cafile", "", "CA of an external etcd's serving certificate (with --etcd-servers https://...; the embedded etcd uses DATA-DIR/pki/etcd)")
	fs.StringVar(&f.etcdCertFile, "etcd-certfile", "", "client certificate toward an external etcd")
	fs.StringVar(&f.etcdKeyFile, "etcd-keyfile", "", "key of the client certificate toward an external etcd")
	fs.StringVar(&f.serviceCIDR, "service-cluster-ip-range", "10.96.0.0/12", "range Service ClusterIPs come from")
	fs.IntVar(&f.gcPercent, "gc-percent", 0, "garbage collector target of the process (0: the API server's default, 400 falling to 50 as the live heap grows past 128 MiB, or $GOGC; -1: Go's own)")
	fs.StringArrayVar(&f.saIssuers, "service-account-issuer", nil, "issuer of service account tokens, their iss and the discovery document's issuer; repeatable: the first signs, all are accepted (default: kubelab up, the API server's URL on the cluster network, then https://kubernetes.default.svc.cluster.local; kubelab apiserver, the latter)")
	fs.StringVar(&f.saJWKSURI, "service-account-jwks-uri", "", "jwks_uri of the issuer's discovery document, an https URL (default: the key set's path at the API server's advertised or listening address)")
	fs.StringVar(&f.memoryLimit, "memory-limit", "", "soft memory limit of the process, a quantity such as 4Gi (default $GOMEMLIMIT, or none)")
}

// config is the control plane these flags describe.
func (f *controlPlaneFlags) config() (cluster.ControlPlaneConfig, error) {
	cfg := cluster.ControlPlaneConfig{
		DataDir: f.dataDir, BindAddress: f.bindAddress, SecurePort: f.securePort,
		EtcdServers: f.etcdServers, EtcdPrefix: f.etcdPrefix, EtcdClientPort: f.etcdClientPort,
		EtcdPeerPort: f.etcdPeerPort, EtcdCAFile: f.etcdCAFile, EtcdCertFile: f.etcdCertFile, EtcdKeyFile: f.etcdKeyFile,
		ServiceCIDR: f.serviceCIDR, GCPercent: f.gcPercent,
		ServiceAccountIssuers: f.saIssuers, ServiceAccountJWKSURI: f.saJWKSURI,
	}
	if f.memoryLimit != "" {
		q, err := resource.ParseQuantity(f.memoryLimit)
		if err != nil || q.Sign() <= 0 {
			return cfg, fmt.Errorf("--memory-limit %q: want a positive quantity such as 4Gi", f.memoryLimit)
		}
		cfg.MemoryLimit = q.Value()
	}
	return cfg, nil
}

func newAPIServerCommand() *cobra.Command {
	f := &controlPlaneFlags{}
	cmd := &cobra.Command{
		Use:   "apiserver",
		Short: "Run the Kubernetes-compatible API server (with an embedded etcd unless --etcd-servers is given)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := setupLogging(cmd, slog.LevelInfo); err != nil {
				return err
			}
			cfg, err := f.config()
			if err != nil {
				return err
			}
			cp, err := cluster.NewControlPlane(cfg)
			if err != nil {
				return err
			}
			g, ctx := errgroup.WithContext(cmd.Context())
			cp.Start(ctx, g)
			g.Go(func() error {
				select {
				case <-cp.APIServer.Ready():
					fmt.Fprintf(cmd.OutOrStdout(), "API server at %s\nkubeconfig: %s\n", cp.APIServer.URL(), cp.APIServer.KubeconfigPath())
				case <-ctx.Done():
				}
				return nil
			})
			return g.Wait()
		},
	}
	f.register(cmd)
	addLogFormatFlag(cmd)
	return cmd
}
