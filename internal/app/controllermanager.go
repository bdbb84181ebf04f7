package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelab/kubelab/internal/controllermanager"
	"github.com/kubelab/kubelab/internal/leaderelection"
)

func newControllerManagerCommand() *cobra.Command {
	var kubeconfig, rootCAFile, signingCertFile, signingKeyFile string
	var leaderElect bool
	cmd := &cobra.Command{
		Use:   "controller-manager",
		Short: "Run the controllers (namespace, garbage collector, PV binder, attach/detach, workloads, …) against a kubelab API server",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := setupLogging(cmd, slog.LevelInfo); err != nil {
				return err
			}
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
			run := func(ctx context.Context) error {
				cm, err := controllermanager.New(controllermanager.Config{RootCA: rootCA,
					ClusterSigningCertFile: signingCertFile, ClusterSigningKeyFile: signingKeyFile}, cfg)
				if err != nil {
					return err
				}
				return cm.Run(ctx)
			}
			if !leaderElect {
				return run(cmd.Context())
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			return leaderelection.Run(cmd.Context(), leaderelection.Config{Name: "kube-controller-manager"}, client, run)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", DefaultDataDir+"/kubeconfig", "kubeconfig of the API server")
	cmd.Flags().BoolVar(&leaderElect, "leader-elect", true, "run the controllers only while holding the Lease kube-system/kube-controller-manager, so that several controller-managers are safe")
	cmd.Flags().StringVar(&rootCAFile, "root-ca-file", "", "CA bundle published in every namespace as the kube-root-ca.crt ConfigMap (default: the kubeconfig's CA)")
	cmd.Flags().StringVar(&signingCertFile, "cluster-signing-cert-file", "", "PEM CA certificate approved CertificateSigningRequests are signed with (none: nothing is signed)")
	cmd.Flags().StringVar(&signingKeyFile, "cluster-signing-key-file", "", "PEM private key of --cluster-signing-cert-file")
	addLogFormatFlag(cmd)
	return cmd
}
