package cluster_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/image"
	"github.com/kubelab/kubelab/internal/testutil"
)

// Stand-ins for the registries pods' images come from: the tests never leave the
// machine, so docker.io (and the other public hosts) and a private registry are OCI
// registries the test runs on 127.0.0.1, and the cluster's ImageUpstreams points the
// registry hosts at them.

// privateRegistryHost is the private registry's host as pods' images name it.
const privateRegistryHost = "private.kubelab.test"

// upstreamStandIn is an in-memory registry on 127.0.0.1 asking for Basic credentials
// when user is set.
type upstreamStandIn struct {
	addr, user, pass string
}

func startUpstreamStandIn(t *testing.T, user, pass string) *upstreamStandIn {
	t.Helper()
	s := &upstreamStandIn{user: user, pass: pass}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); user != "" && (!ok || u != user || p != pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="stand-in"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.addr = strings.TrimPrefix(srv.URL, "http://")
	return s
}

// upstreamStandIns are the registries of TestRealConfigVolumes' cluster: docker.io,
// registry.k8s.io, quay.io, ghcr.io and public.ecr.aws all at hub, and the private one.
type upstreamStandIns struct{ hub, private *upstreamStandIn }

func startUpstreamStandIns(t *testing.T) *upstreamStandIns {
	t.Helper()
	return &upstreamStandIns{hub: startUpstreamStandIn(t, "", ""), private: startUpstreamStandIn(t, "puller", "s3cret")}
}

// tweak makes the cluster fetch images its registry lacks, from the stand-ins only; the
// VPC's way out and the cluster DNS's upstreams, which online mode opens too, reach
// nowhere.
func (s *upstreamStandIns) tweak(cfg *cluster.Config) {
	cfg.Offline = false
	cfg.EgressDial = func(_ context.Context, network, addr string) (net.Conn, error) {
		return nil, fmt.Errorf("dial %s %s: this test's cluster has no way out", network, addr)
	}
	cfg.ImageUpstreams = map[string]string{privateRegistryHost: "http://" + s.private.addr}
	for _, host := range []string{"docker.io", "registry.k8s.io", "quay.io", "ghcr.io", "public.ecr.aws", "gcr.io"} {
		cfg.ImageUpstreams[host] = "http://" + s.hub.addr
	}
}

// seed pushes to repo:tag of s kubelab's busybox with KUBELAB_TEST_FROM=from in its
// environment (an image kubelab's registry does not hold), and returns its digest.
func (s *upstreamStandIn) seed(t *testing.T, tc *testCluster, repo, tag, from string) v1.Hash {
	t.Helper()
	addr, err := image.RecordedAddr(filepath.Join(tc.DataDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := name.ParseReference(addr+"/library/busybox:latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	busybox, err := remote.Image(src)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := busybox.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config.DeepCopy()
	c.Env = append(c.Env, "KUBELAB_TEST_FROM="+from)
	img, err := mutate.Config(busybox, *c)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := name.ParseReference(s.addr+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	auth := authn.Anonymous
	if s.user != "" {
		auth = &authn.Basic{Username: s.user, Password: s.pass}
	}
	if err := remote.Write(dst, img, remote.WithAuth(auth)); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// checkUpstreamImages runs, on the real nodes of tc (whose ImageUpstreams s.tweak set),
// a pod of an image only the docker.io stand-in holds, by its docker.io name; a pod of
// the private registry's image with imagePullSecrets; and one without them, which cannot
// pull it.
func (s *upstreamStandIns) checkUpstreamImages(t *testing.T, tc *testCluster, ns string) {
	t.Helper()
	ctx := context.Background()
	public := s.hub.seed(t, tc, "kubelab-test/upstream-only", "1", "docker.io")
	private := s.private.seed(t, tc, "team/app", "1", "private")
	auth := base64.StdEncoding.EncodeToString([]byte(s.private.user + ":" + s.private.pass))
	if _, err := tc.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred"},
		Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + privateRegistryHost + `":{"auth":"` + auth + `"}}}`)}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := map[string]string{
		"from-docker-io":    "docker.io/kubelab-test/upstream-only:1",
		"from-private":      privateRegistryHost + "/team/app:1",
		"private-no-secret": privateRegistryHost + "/team/app:1",
	}
	for pod, img := range pods {
		p := busyboxPod(ns, pod, corev1.RestartPolicyAlways, "echo from $KUBELAB_TEST_FROM; exec sleep 3600")
		p.Spec.Containers[0].Image = img
		switch pod {
		case "from-private":
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
		case "private-no-secret":
			// Pulled again even once the node has it: kubelab's registry must not serve
			// what the other pod's credentials fetched.
			p.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
		}
		if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for pod, digest := range map[string]v1.Hash{"from-docker-io": public, "from-private": private} {
		p := tc.WaitPodRunning(ns, pod)
		if id := p.Status.ContainerStatuses[0].ImageID; !strings.HasSuffix(id, "@"+digest.String()) {
			t.Errorf("pod %s runs image %s, want the stand-in's %s", pod, id, digest)
		}
	}
	p := tc.waitContainer(ns, "private-no-secret", "ErrImagePull or its back-off", func(cs corev1.ContainerStatus) bool {
		w := cs.State.Waiting
		return w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff")
	})
	msg := p.Status.ContainerStatuses[0].State.Waiting.Message
	t.Logf("private-no-secret: %s", msg)
	if strings.Contains(msg, "offline") {
		t.Errorf("private-no-secret: waiting message %q names offline mode on an online cluster", msg)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "Failed event of pod private-no-secret", func() (bool, error) {
		return tc.HasEvent(ns, "private-no-secret", "Failed"), nil
	})
	t.Logf("private-no-secret: %v", tc.Warnings(ns, "private-no-secret"))
	for pod := range pods {
		tc.deletePodAndWait(ns, pod)
	}
}
