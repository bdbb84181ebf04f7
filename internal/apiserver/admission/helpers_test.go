package admission_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

var nameSeq atomic.Int64

// uniqueName is prefix with a suffix no other name of this test binary has.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000, nameSeq.Add(1))
}

// newNamespace creates a namespace labelled scope=<its name>, for webhooks and
// policies that select only it; it is deleted when the test ends.
func newNamespace(t *testing.T, s *apiservertest.Server) string {
	t.Helper()
	name := uniqueName("ns")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"scope": name}}}
	if _, err := s.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// scopeSelector selects the namespace newNamespace made.
func scopeSelector(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"scope": ns}}
}

// dryRun is a create that stores nothing but goes through admission.
var dryRun = metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

// warningCollector records the warnings the server sends a client.
type warningCollector struct{ warnings chan string }

func (w warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	select {
	case w.warnings <- text:
	default:
	}
}

// clientWithWarnings is a client of s whose warnings land in the returned channel.
func clientWithWarnings(t *testing.T, s *apiservertest.Server) (kubernetes.Interface, <-chan string) {
	t.Helper()
	cfg := *s.Config
	w := warningCollector{warnings: make(chan string, 100)}
	cfg.WarningHandler = w
	c, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, w.warnings
}
