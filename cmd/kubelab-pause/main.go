// Command kubelab-pause is the first process of every pod sandbox on kubelab's real
// nodes: the image registry.k8s.io/pause that kubelab serves holds it as /pause, and
// containerd starts it when the kubelet asks the runtime for a pod sandbox, before any
// of the pod's containers. It holds the pod's namespaces open.
//
// It is PID 1 of the sandbox's PID namespace, which the pod's containers join when the
// pod sets shareProcessNamespace, so it reaps the zombies re-parented to it: on SIGCHLD
// it waits for every child that has exited. SIGINT and SIGTERM make it exit with
// status 0; otherwise it sleeps forever.
//
// It is built static (CGO_ENABLED=0) so the image needs no other file.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "-v", "--version":
			fmt.Println("kubelab-pause")
			return
		default:
			fmt.Fprintf(os.Stderr, "usage: %s [-v]\n", os.Args[0])
			os.Exit(2)
		}
	}
	signals := make(chan os.Signal, 32)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	// Printed once the handlers are in place: from here SIGINT and SIGTERM exit 0.
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "kubelab-pause: warning: not PID 1; zombies are only reaped among its own children")
	}
	// A child that exited before Notify took effect sent its SIGCHLD unseen.
	reap()
	for sig := range signals {
		switch sig {
		case syscall.SIGCHLD:
			reap()
		case syscall.SIGINT, syscall.SIGTERM:
			fmt.Fprintf(os.Stderr, "kubelab-pause: shutting down on %v\n", sig)
			os.Exit(0)
		}
	}
}

// reap waits, without blocking, for every child that has exited. Signals coalesce, so
// one SIGCHLD may stand for several children.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
	}
}
