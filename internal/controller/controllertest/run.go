package controllertest

import (
	"context"
	"testing"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// Runner is a controller: Run blocks until ctx ends.
type Runner interface {
	Run(ctx context.Context) error
}

// RunController builds a controller with build on a fresh informer factory of client,
// starts the factory and the controller, and stops both when the test ends, failing the
// test if the controller's Run returned an error.
func RunController(t testing.TB, client kubernetes.Interface, build func(informers.SharedInformerFactory) (Runner, error)) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := build(factory)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	factory.Start(ctx.Done())
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller stopped with: %v", err)
		}
		factory.Shutdown()
	})
}
