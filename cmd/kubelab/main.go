// Command kubelab runs a whole Kubernetes cluster, storage and networking pipeline
// included, on one machine: API server on etcd, controllers, scheduler, the CSI driver
// ebs.csi.aws.com on a local EC2/EBS-compatible cloud, kubelets, CNI and a service proxy.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kubelab/kubelab/internal/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first Ctrl-C the components stop in order; a second one ends the
		// process at once.
		<-ctx.Done()
		stop()
	}()
	err := app.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubelab:", err)
		os.Exit(1)
	}
}
