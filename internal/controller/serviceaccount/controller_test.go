package serviceaccount

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

func TestMissing(t *testing.T) {
	have := map[string]bool{"default": true}
	got := missing([]string{"default", "builder"}, func(n string) bool { return have[n] })
	if !reflect.DeepEqual(got, []string{"builder"}) {
		t.Errorf("missing = %v", got)
	}
}

func TestConfigRejectsBadNames(t *testing.T) {
	if _, err := New(Config{ServiceAccounts: []string{"Not_Valid"}}, nil, nil); err == nil {
		t.Error("an invalid service account name is accepted")
	}
}

func TestDefaultServiceAccountInEveryNamespace(t *testing.T) {
	// The helper's own default accounts would hide what the controller does.
	s := apiservertest.Start(t, apiservertest.Options{NoDefaultServiceAccounts: true})
	ctx := context.Background()
	controllertest.RunController(t, s.Client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{}, s.Client, f)
	})

	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSA := func(ns string) {
		t.Helper()
		testutil.Eventually(t, "the default service account in "+ns, func() error {
			_, err := s.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
			return err
		})
	}
	for _, ns := range []string{"default", "kube-system", "team-a"} {
		waitSA(ns)
	}
	// Deleted, it comes back.
	if err := s.Client.CoreV1().ServiceAccounts("team-a").Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSA("team-a")
}
