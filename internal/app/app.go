// Package app is kubelab's command line: one cobra command per component, each a thin
// wrapper that fills the component's Config and calls its Run.
package app

import (
	"context"
	"io"

	"github.com/spf13/cobra"
)

// Run executes the kubelab command line with args and returns its error.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return root.ExecuteContext(ctx)
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "kubelab",
		Short:         "The Kubernetes storage and networking pipeline, real and visible, on one machine",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newVersionCommand(),
		newUpCommand(),
		newDownCommand(),
		newAPIServerCommand(),
		newCloudCommand(),
		newCSIDriverCommand(),
		newCSIProvisionerCommand(),
		newCSIAttacherCommand(),
		newCSIResizerCommand(),
		newCSISnapshotterCommand(),
		newNodeDriverRegistrarCommand(),
		newLivenessProbeCommand(),
		newKubectlCommand(),
		newControllerManagerCommand(),
		newCloudControllerManagerCommand(),
		newSchedulerCommand(),
		newKubeletCommand(),
		newImageCommand(),
		newNodeCommand(),
		newTraceCommand(),
		newWhyCommand(),
	)
	return root
}
