package cluster_test

import (
	"context"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
	"github.com/kubelab/kubelab/internal/cluster"
)

// upstreamBinary is the judge cmd (an upstream CSI sidecar, the Helm client) as
// hack/setup.sh --test builds it; the test skips without it.
func upstreamBinary(t *testing.T, cmd string) string {
	t.Helper()
	bin := filepath.Join(build.Default.GOPATH, "upstream", "bin", cmd)
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("the upstream %s is not built (hack/setup.sh --test builds it into %s): %v", cmd, filepath.Dir(bin), err)
	}
	return bin
}

// serviceAccountKubeconfig writes a kubeconfig of the API server as service account
// kube-system/sa.
func (tc *testCluster) serviceAccountKubeconfig(sa string) string {
	t := tc.T
	t.Helper()
	cfg, err := tc.RestConfig("upstream-"+sa, cluster.ServiceAccountIdentity(metav1.NamespaceSystem, sa))
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubelab"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["kubelab"] = &clientcmdapi.Context{Cluster: "kubelab", AuthInfo: sa}
	kc.CurrentContext = "kubelab"
	path := filepath.Join(t.TempDir(), sa+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// startProcess runs bin with args until the test ends, its output in the test's log;
// the process is ended (by its PID) and waited for at cleanup.
func startProcess(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = cloudtest.Writer(t), cloudtest.Writer(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
}

// TestUpstreamSidecarsWithChartRBAC runs the upstream external-provisioner and
// external-attacher in place of kubelab's, as the add-on's controller service account
// with only the roles kubelab gives it (the chart's ClusterRoles and Leases Role), with
// leader election, on the cluster's driver: examples/seed's claim is provisioned, its
// volume attached and its pod runs, and each sidecar holds its Lease.
func TestUpstreamSidecarsWithChartRBAC(t *testing.T) {
	provisioner, attacher := upstreamBinary(t, "csi-provisioner"), upstreamBinary(t, "csi-attacher")
	tc := startCluster(t, nil)
	ctx := context.Background()
	for _, u := range []string{"csi-provisioner", "csi-attacher"} {
		if err := tc.Stop(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	kc := tc.serviceAccountKubeconfig(cluster.CSIControllerSA)
	common := []string{"--csi-address=" + tc.CSISocket(), "--kubeconfig=" + kc, "--leader-election",
		"--leader-election-namespace=kube-system", "--v=2"}
	startProcess(t, provisioner, append(common, "--default-fstype=ext4", "--extra-create-metadata", "--feature-gates=Topology=true")...)
	startProcess(t, attacher, common...)

	ns := tc.Namespace("upstream")
	tc.seedPair(ns, "my-app-pvc", "my-app-pod", "gp2")
	tc.WaitPodRunning(ns, "my-app-pod")
	for _, lease := range []string{"ebs-csi-aws-com", "external-attacher-leader-ebs-csi-aws-com"} {
		l, err := tc.Client.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			t.Errorf("Lease kube-system/%s: %v, want one held by the upstream sidecar", lease, err)
		}
	}
}
