package app

import (
	"errors"

	"github.com/spf13/cobra"
)

// newCSIDriverCommand is a placeholder until the component lands; it refuses to run.
func newCSIDriverCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "csi-driver",
		Short: "(not built yet)",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("csi-driver: not built yet")
		},
	}
}
