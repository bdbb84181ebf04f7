package app

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelab/kubelab/internal/controllermanager"
)

func newControllerManagerCommand() *cobra.Command {
	var kubeconfig, rootCAFile string
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run the controllers (namespace, garbage collector, PV binder, attach/detach, workloads, …) against a kubelab API server",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
			}
			var rootCA []byte
			if rootCAFile != "" {
				if rootCA, err = os.ReadFile(rootCAFile); err != nil {
					return fmt.Errorf("--root-ca-file: %w", err)
				}
			}
			cm, err := controllermanager.New(controllermanager.Config{RootCA: rootCA}, cfg)
			if err != nil {
				return err
			}
			return cm.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", DefaultDataDir+"/kubeconfig", "kubeconfig of the API server")
	cmd.Flags().StringVar(&rootCAFile, "root-ca-file", "", "CA bundle published in every namespace as the kube-root-ca.crt ConfigMap (default: the kubeconfig's CA)")
	return cmd
}
