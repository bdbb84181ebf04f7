package leaderelection_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/leaderelection"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestOneLeaderAtATime: of two candidates for a Lease only the holder works, the other
// waits through the holder's renewals, and takes over as soon as the holder stops.
func TestOneLeaderAtATime(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	cfg := func(id string) leaderelection.Config {
		return leaderelection.Config{Name: "test-component", Identity: id,
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}
	}
	var leading [2]atomic.Bool
	run := func(i int, id string) (context.CancelFunc, chan error) {
		c, cancel := context.WithCancel(ctx)
		done, ended := make(chan error, 1), make(chan struct{})
		go func() {
			defer close(ended)
			done <- leaderelection.Run(c, cfg(id), s.Client, func(lctx context.Context) error {
				leading[i].Store(true)
				<-lctx.Done()
				leading[i].Store(false)
				return nil
			})
		}()
		t.Cleanup(func() { cancel(); <-ended })
		return cancel, done
	}
	holder := func() (string, metav1.MicroTime) {
		l, err := s.Client.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, "test-component", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil {
			return "", metav1.MicroTime{}
		}
		return *l.Spec.HolderIdentity, *l.Spec.RenewTime
	}

	stopA, doneA := run(0, "a")
	testutil.EventuallyWithin(t, 30*time.Second, "a leads", func() (bool, error) {
		id, _ := holder()
		return leading[0].Load() && id == "a", nil
	})
	run(1, "b")
	// b campaigns while a renews: two renewals of a's, and b never led.
	_, first := holder()
	renewals := 0
	testutil.EventuallyWithin(t, 30*time.Second, "two renewals by a", func() (bool, error) {
		id, at := holder()
		if id != "a" || leading[1].Load() {
			return false, errors.New("the lease changed hands while a held it")
		}
		if at.After(first.Time) {
			renewals, first = renewals+1, at
		}
		return renewals >= 2, nil
	})

	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("a's Run: %v", err)
	}
	if leading[0].Load() {
		t.Error("a still leads after its Run returned")
	}
	// a gave the lease up: b takes it at its next retry, well before a's lease would
	// have expired.
	testutil.EventuallyWithin(t, 30*time.Second, "b leads", func() (bool, error) {
		id, _ := holder()
		return leading[1].Load() && id == "b", nil
	})
}

// TestLeadFailureEndsRun: lead's failure while leading is Run's error.
func TestLeadFailureEndsRun(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	boom := errors.New("boom")
	err := leaderelection.Run(context.Background(), leaderelection.Config{Name: "failing",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond},
		s.Client, func(context.Context) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want %v", err, boom)
	}
}
