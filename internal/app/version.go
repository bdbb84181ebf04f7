package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kubelab/kubelab/internal/version"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kubelab's version and the Kubernetes API version it serves",
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := version.Info()
			fmt.Fprintf(cmd.OutOrStdout(), "kubelab %s (Kubernetes API %s, %s)\n", version.Kubelab, info.GitVersion, info.GoVersion)
			return nil
		},
	}
}
