package app

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelab/kubelab/internal/controllermanager"
)

func newControllerManagerCommand() *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run the controllers (namespace, garbage collector, PV binder, attach/detach, workloads, …) against a kubelab API server",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
			}
			cm, err := controllermanager.New(controllermanager.Config{}, cfg)
			if err != nil {
				return err
			}
			return cm.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", DefaultDataDir+"/kubeconfig", "kubeconfig of the API server")
	return cmd
}
