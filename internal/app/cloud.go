package app

import (
	"errors"

	"github.com/spf13/cobra"
)

// newCloudCommand is a placeholder until the component lands; it refuses to run.
func newCloudCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cloud",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("cloud: not built yet")
		},
	}
}
