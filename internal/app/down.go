package app

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
)

// newDownCommand is `kubelab down`: it stops the `kubelab up` of a data dir as Ctrl-C
// would, and waits until it has removed what it set up on the machine.
func newDownCommand() *cobra.Command {
	var dataDir string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the kubelab cluster of a data dir (as Ctrl-C does) and wait until it is gone",
		Long: `Stop the 'kubelab up' running on --data-dir: it gets SIGTERM, stops its pods'
containers and its containerds, unmounts its nodes' volumes, releases the loop devices,
removes its sockets (its run directory under /run/kubelab) and exits. The cluster's state (etcd, the cloud's volumes) stays for the next 'kubelab up'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pid, err := runningPID(dataDir)
			if errors.Is(err, errNotRunning) {
				fmt.Fprintf(cmd.OutOrStdout(), "kubelab is not running on %s\n", dataDir)
				return nil
			}
			if err != nil {
				return fmt.Errorf("down: %w", err)
			}
			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
				return fmt.Errorf("down: stop kubelab up (pid %d): %w", pid, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stopping kubelab up (pid %d)...\n", pid)
			err = wait.PollUntilContextTimeout(cmd.Context(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
				_, err := runningPID(dataDir)
				return errors.Is(err, errNotRunning), nil
			})
			if err != nil {
				return fmt.Errorf("down: kubelab up (pid %d) still runs after %v: %w", pid, timeout, err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "kubelab is down")
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", DefaultDataDir, "data dir of the cluster to stop")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for it to stop")
	return cmd
}
