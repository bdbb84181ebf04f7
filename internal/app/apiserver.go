package app

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/kubelab/kubelab/internal/apiserver"
	"github.com/kubelab/kubelab/internal/etcd"
)

// DefaultDataDir is where kubelab keeps its state unless told otherwise.
const DefaultDataDir = "/var/lib/kubelab"

// controlPlaneFlags are the flags of the API server and its etcd.
type controlPlaneFlags struct {
	dataDir        string
	bindAddress    string
	securePort     int
	etcdServers    []string
	etcdPrefix     string
	etcdClientPort int
	serviceCIDR    string
}

func (f *controlPlaneFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.dataDir, "data-dir", DefaultDataDir, "directory for etcd data, certificates and the kubeconfig")
	fs.StringVar(&f.bindAddress, "bind-address", "127.0.0.1", "address the API server listens on")
	fs.IntVar(&f.securePort, "secure-port", 6443, "HTTPS port of the API server (0 picks a free one)")
	fs.StringSliceVar(&f.etcdServers, "etcd-servers", nil, "external etcd client URLs; when empty an embedded etcd runs in the data dir")
	fs.StringVar(&f.etcdPrefix, "etcd-prefix", "/registry", "prefix of every key the API server writes")
	fs.IntVar(&f.etcdClientPort, "etcd-client-port", 2379, "client port of the embedded etcd on 127.0.0.1 (the peer port is the next one)")
	fs.StringVar(&f.serviceCIDR, "service-cluster-ip-range", "10.96.0.0/12", "range Service ClusterIPs come from")
}

// controlPlane is etcd (when embedded) and the API server, ready to run.
type controlPlane struct {
	etcd      *etcd.Server
	apiserver *apiserver.Server
}

func newControlPlane(f *controlPlaneFlags) (*controlPlane, error) {
	dataDir, err := filepath.Abs(f.dataDir)
	if err != nil {
		return nil, err
	}
	cp := &controlPlane{}
	servers := f.etcdServers
	if len(servers) == 0 {
		cp.etcd, err = etcd.New(etcd.Config{
			DataDir:   filepath.Join(dataDir, "etcd"),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", f.etcdClientPort),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", f.etcdClientPort+1),
		})
		if err != nil {
			return nil, err
		}
		servers = cp.etcd.Endpoints()
	}
	cp.apiserver, err = apiserver.New(apiserver.Config{
		DataDir: dataDir, BindAddress: f.bindAddress, Port: f.securePort,
		EtcdServers: servers, EtcdPrefix: f.etcdPrefix, ServiceCIDR: f.serviceCIDR,
	})
	if err != nil {
		return nil, err
	}
	return cp, nil
}

// start runs etcd, then the API server once etcd serves, in g. When ctx ends the API
// server stops first and etcd after it, so no request is cut off from its store.
func (cp *controlPlane) start(ctx context.Context, g *errgroup.Group) {
	etcdCtx, stopEtcd := context.WithCancel(context.WithoutCancel(ctx))
	if cp.etcd != nil {
		g.Go(func() error { return cp.etcd.Run(etcdCtx) })
	}
	g.Go(func() error {
		defer stopEtcd()
		if cp.etcd != nil {
			select {
			case <-cp.etcd.Ready():
			case <-ctx.Done():
				return nil
			}
		}
		return cp.apiserver.Run(ctx)
	})
}

func newAPIServerCommand() *cobra.Command {
	f := &controlPlaneFlags{}
	cmd := &cobra.Command{
		Use:   "apiserver",
		Short: "Run the Kubernetes-compatible API server (with an embedded etcd unless --etcd-servers is given)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cp, err := newControlPlane(f)
			if err != nil {
				return err
			}
			g, ctx := errgroup.WithContext(cmd.Context())
			cp.start(ctx, g)
			g.Go(func() error {
				select {
				case <-cp.apiserver.Ready():
					fmt.Fprintf(cmd.OutOrStdout(), "API server at %s\nkubeconfig: %s\n", cp.apiserver.URL(), cp.apiserver.KubeconfigPath())
				case <-ctx.Done():
				}
				return nil
			})
			return g.Wait()
		},
	}
	f.register(cmd)
	return cmd
}
