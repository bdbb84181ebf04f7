package app

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelab/kubelab/internal/controller/namespace"
)

// runControllerManager runs the controllers against the API server of restConfig until
// ctx ends.
func runControllerManager(ctx context.Context, restConfig *rest.Config) error {
	restConfig = rest.CopyConfig(restConfig)
	restConfig.UserAgent = "kubelab-controller-manager"
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	md, err := metadata.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	ns, err := namespace.New(namespace.Config{Workers: 2}, client, md)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ns.Run(ctx) })
	return g.Wait()
}

func newControllerManagerCommand() *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run the controllers (namespace, …) against a kubelab API server",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
			}
			return runControllerManager(cmd.Context(), cfg)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", DefaultDataDir+"/kubeconfig", "kubeconfig of the API server")
	return cmd
}
