package app

import (
	"fmt"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/tools/clientcmd"
)

// newUpCommand runs the cluster: etcd, the API server and the controller-manager, each
// reaching the others only over its wire.
func newUpCommand() *cobra.Command {
	f := &controlPlaneFlags{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a kubelab cluster on this machine (Ctrl-C stops it)",
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
				case <-ctx.Done():
					return nil
				}
				restConfig, err := clientcmd.BuildConfigFromFlags("", cp.apiserver.KubeconfigPath())
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				fmt.Fprintf(out, "kubelab is up.\n  API server:  %s\n  kubeconfig:  %s\n\n", cp.apiserver.URL(), cp.apiserver.KubeconfigPath())
				fmt.Fprintf(out, "Use it with the real kubectl:\n  export KUBECONFIG=%s\n  kubectl get namespaces\nor with the embedded one:\n  kubelab kubectl get namespaces\n", cp.apiserver.KubeconfigPath())
				return runControllerManager(ctx, restConfig)
			})
			return g.Wait()
		},
	}
	f.register(cmd)
	return cmd
}
