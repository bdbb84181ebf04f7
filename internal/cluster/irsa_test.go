package cluster_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/image"
	"github.com/kubelab/kubelab/internal/testutil"
)

// awsClientRef is the IRSA test image: testutil.AWSClient's program at /awsclient, with
// busybox for a shell.
const awsClientRef = "kubelab.test/awsclient:1"

// awsClientImage builds the IRSA test image into the cluster's registry, as `kubelab
// image build` does, and returns its reference.
func awsClientImage(t *testing.T, tc *testCluster) string {
	t.Helper()
	dir := filepath.Join(tc.DataDir(), "images")
	addr, err := image.RecordedAddr(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := image.HostImage{Refs: []string{awsClientRef}, Busybox: true,
		Files:  []image.HostFile{{Src: testutil.AWSClient(t), Dest: "/awsclient"}},
		Config: v1.Config{Entrypoint: []string{"/awsclient"}}}
	if _, err := image.BuildHost(context.Background(), addr, image.LayoutDir(dir), image.CacheDir(dir), h); err != nil {
		t.Fatalf("build the IRSA test image: %v", err)
	}
	return awsClientRef
}

// irsaPod is a pod of service account sa running the IRSA test program (args), then
// printing its web identity token on a line of its own; AWS_CA_BUNDLE is the cluster CA
// of the pod's service account volume, which signed the cloud endpoint's certificate.
func irsaPod(ns, name, node, sa string, args ...string) *corev1.Pod {
	script := "/awsclient " + strings.Join(args, " ") + "; echo; cat /var/run/secrets/eks.amazonaws.com/serviceaccount/token"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, NodeName: node, ServiceAccountName: sa,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "main", Image: awsClientRef, Command: []string{"sh", "-c", script},
				Env: []corev1.EnvVar{{Name: "AWS_CA_BUNDLE", Value: "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"}}}}},
	}
}

// irsaOutput is what an irsaPod printed: the program's JSON and the token's claims.
type irsaOutput struct {
	Result map[string]any
	Claims struct {
		Issuer   string   `json:"iss"`
		Audience []string `json:"aud"`
		Subject  string   `json:"sub"`
	}
}

// parseIRSAOutput reads an irsaPod's log.
func parseIRSAOutput(t *testing.T, log string) irsaOutput {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(log), "\n")
	var out irsaOutput
	if len(lines) < 2 || json.Unmarshal([]byte(lines[0]), &out.Result) != nil {
		t.Fatalf("IRSA pod's log %q: want the program's JSON, then the token", log)
	}
	parts := strings.Split(lines[len(lines)-1], ".")
	if len(parts) != 3 {
		t.Fatalf("IRSA pod's token %q is not a JWT", lines[len(lines)-1])
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(payload, &out.Claims) != nil {
		t.Fatalf("IRSA pod's token payload %q: %v", parts[1], err)
	}
	return out
}
