package apiserver_test

import (
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/controller/namespace"
	"github.com/kubelab/kubelab/internal/testutil"
)

// waitTimeout is how long the package's tests wait for the server to act on a change.
const waitTimeout = time.Minute

// startNamespaceController runs the namespace controller against s until the test ends.
func startNamespaceController(t *testing.T, s *apiservertest.Server) {
	t.Helper()
	c, err := namespace.New(namespace.Config{Recheck: 200 * time.Millisecond}, kubernetes.NewForConfigOrDie(s.Config), metadata.NewForConfigOrDie(s.Config))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "the namespace controller", 0, c.Run, testutil.NoWait)
}
