package cluster_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// helmChart installs testdata/helmchart (a Deployment of nginx serving its page from a
// ConfigMap, with a Secret's password and a claim of the default class mounted, a
// Service, and a post-install/post-upgrade Job hook that fetches the page through the
// Service) with the Helm client in namespace ns, upgrades it to a new page, rolls it
// back, and uninstalls it, checking the page served after each step; after the uninstall
// nothing of the release is left: no object, no release record, no volume.
func (tc *testCluster) helmChart(t *testing.T, ns string) {
	helm := upstreamBinary(t, "helm")
	ctx := context.Background()
	home := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(helm, append(args, "--kubeconfig", tc.Kubeconfig(), "--namespace", ns)...)
		// Helm's own files (cache, config, data) in the test's dir, not the user's.
		cmd.Env = append(os.Environ(), "KUBECONFIG=", "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	page := func() string {
		t.Helper()
		cm, err := tc.Client.CoreV1().ConfigMaps(ns).Get(ctx, "web-page", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data["index.html"]
	}
	served := func(want string) {
		t.Helper()
		testutil.EventuallyWithin(t, clustertest.Timeout, "the release's pod serves "+want, func() (bool, error) {
			pods, err := tc.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=web"})
			if err != nil || len(pods.Items) != 1 || !clustertest.PodRunning(&pods.Items[0]) {
				return false, err
			}
			out, err := testutil.KubectlCommand(t, tc.Kubeconfig(), "exec", "-n", ns, pods.Items[0].Name, "--",
				"cat", "/usr/share/nginx/html/index.html").Output()
			return err == nil && string(out) == want, nil
		})
	}
	chart := filepath.Join("testdata", "helmchart")

	run("install", "web", chart, "--wait", "--timeout", "5m")
	if got := page(); got != "hello from revision one" {
		t.Errorf("after install the page is %q", got)
	}
	served("hello from revision one")
	pvc, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "web-data", metav1.GetOptions{})
	if err != nil || pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "gp2" {
		t.Fatalf("the chart's claim: %v %+v, want Bound in the default class gp2", err, pvc)
	}

	run("upgrade", "web", chart, "--set", "message=hello from revision two", "--wait", "--timeout", "5m")
	served("hello from revision two")
	run("rollback", "web", "1", "--wait", "--timeout", "5m")
	served("hello from revision one")
	if h := run("history", "web"); strings.Count(h, "\n") != 4 || !strings.Contains(h, "Rollback to 1") {
		t.Errorf("helm history: want the install, the upgrade and the rollback:\n%s", h)
	}

	run("uninstall", "web", "--wait", "--timeout", "5m")
	instance := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=web"}
	testutil.EventuallyWithin(t, clustertest.Timeout, "nothing of the release left", func() (bool, error) {
		var left []string
		if l, err := tc.Client.CoreV1().Pods(ns).List(ctx, instance); err != nil || len(l.Items) > 0 {
			left = append(left, "pods")
		}
		if l, err := tc.Client.AppsV1().Deployments(ns).List(ctx, instance); err != nil || len(l.Items) > 0 {
			left = append(left, "deployments")
		}
		if l, err := tc.Client.CoreV1().Services(ns).List(ctx, instance); err != nil || len(l.Items) > 0 {
			left = append(left, "services")
		}
		if l, err := tc.Client.CoreV1().ConfigMaps(ns).List(ctx, instance); err != nil || len(l.Items) > 0 {
			left = append(left, "configmaps")
		}
		if l, err := tc.Client.BatchV1().Jobs(ns).List(ctx, instance); err != nil || len(l.Items) > 0 {
			left = append(left, "jobs")
		}
		if l, err := tc.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
			left = append(left, "secrets (the chart's and helm's release records)")
		}
		if l, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
			left = append(left, "claims")
		}
		if _, err := tc.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, "volume "+pvc.Spec.VolumeName)
		}
		if len(tc.CloudVolumes(pvc.Spec.VolumeName)) > 0 {
			left = append(left, "the cloud's volume of "+pvc.Spec.VolumeName)
		}
		if len(left) > 0 {
			t.Logf("left: %v", left)
		}
		return len(left) == 0, nil
	})
}
