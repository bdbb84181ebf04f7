package app

import (
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/kubelab/kubelab/internal/util/logging"
)

// Every command that runs a component logs in one format (package logging): klog's text
// format by default, as the Kubernetes components do, or JSON with --log-format json.

// addLogFormatFlag adds --log-format to a command that runs a component.
func addLogFormatFlag(cmd *cobra.Command) {
	cmd.Flags().String("log-format", string(logging.Text), logging.FormatUsage)
}

// setupLogging makes the process's logger the command's: its --log-format, records at
// level and above, on the command's stderr; slog's default and klog log through it.
func setupLogging(cmd *cobra.Command, level slog.Level) (*slog.Logger, error) {
	name := ""
	if f := cmd.Flags().Lookup("log-format"); f != nil {
		name = f.Value.String()
	}
	format, err := logging.ParseFormat(name)
	if err != nil {
		return nil, fmt.Errorf("--log-format: %w", err)
	}
	return logging.Setup(cmd.ErrOrStderr(), format, level), nil
}
