package deployment

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// A Deployment of a namespace being terminated, whose new ReplicaSet the API server
// refuses, is tried once: no retry, no Event, no failed condition.
func TestTerminatingNamespaceIsNotRetried(t *testing.T) {
	const ns = "deploy-terminating"
	d := newDeployment("web", 2, "busybox")
	d.Namespace = ns
	d.UID = "d-uid"
	d.Spec.ProgressDeadlineSeconds = ptr.To(int32(600))
	client := fake.NewClientset(d)
	var creates, statusWrites atomic.Int32
	client.PrependReactor("create", "replicasets", func(k8stesting.Action) (bool, runtime.Object, error) {
		creates.Add(1)
		err := apierrors.NewForbidden(appsv1.Resource("replicasets"), "web-x",
			errors.New("unable to create new content in namespace "+ns+" because it is being terminated"))
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
			Type: corev1.NamespaceTerminatingCause, Message: "namespace " + ns + " is being terminated", Field: "metadata.namespace"})
		return true, nil, err
	})
	client.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" {
			statusWrites.Add(1)
		}
		return false, nil, nil
	})
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{}, client, f)
	})
	testutil.Eventually(t, "a create of the new ReplicaSet", func() bool { return creates.Load() >= 1 })
	// A retried key would come back within 5ms, 10ms, 20ms... of the rate limiter.
	testutil.Consistently(t, time.Second, "one create of the new ReplicaSet", func() error {
		if n := creates.Load(); n != 1 {
			return fmt.Errorf("%d creates", n)
		}
		return nil
	})
	if n := statusWrites.Load(); n != 0 {
		t.Errorf("status writes = %d, want 0 (no failed condition for a namespace that is going)", n)
	}
	if controllertest.HasEvent(t, client, ns, "web", ReasonFailedRSCreate) {
		t.Errorf("Event %s recorded for a namespace that is going", ReasonFailedRSCreate)
	}
}
