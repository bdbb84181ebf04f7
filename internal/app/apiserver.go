package app

import (
	"errors"

	"github.com/spf13/cobra"
)

// newAPIServerCommand is a placeholder until the component lands; it refuses to run.
func newAPIServerCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "apiserver",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("apiserver: not built yet")
		},
	}
}
