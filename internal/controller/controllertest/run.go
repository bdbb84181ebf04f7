package controllertest

import (
	"context"
	"testing"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/testutil"
)

// Runner is a controller: Run blocks until ctx ends.
type Runner interface {
	Run(ctx context.Context) error
}

// RunController builds a controller with build on a fresh informer factory of client,
// starts the factory and the controller (testutil.Start), and stops both when the test
// ends, failing the test if the controller's Run returned an error.
func RunController(t testing.TB, client kubernetes.Interface, build func(informers.SharedInformerFactory) (Runner, error)) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := build(factory)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() }) // after the controller stopped
	factory.Start(stop)
	testutil.Start(t, "controller", 0, c.Run, testutil.NoWait)
}
