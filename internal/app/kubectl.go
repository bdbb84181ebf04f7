package app

import (
	"errors"

	"github.com/spf13/cobra"
)

// newKubectlCommand is a placeholder until the component lands; it refuses to run.
func newKubectlCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "kubectl",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("kubectl: not built yet")
		},
	}
}
