package app

import (
	"errors"

	"github.com/spf13/cobra"
)

// newUpCommand is a placeholder until the component lands; it refuses to run.
func newUpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "up",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("up: not built yet")
		},
	}
}
