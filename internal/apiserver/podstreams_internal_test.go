package apiserver

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func TestPodContainer(t *testing.T) {
	mk := func(containers, init []string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
		for _, c := range containers {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
		}
		for _, c := range init {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: c})
		}
		return p
	}
	withEphemeral := mk([]string{"app"}, nil)
	withEphemeral.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		ask  string
		want string
		err  string
	}{
		{name: "only container", pod: mk([]string{"app"}, nil), want: "app"},
		{name: "only container with init", pod: mk([]string{"app"}, []string{"setup"}), want: "app"},
		{name: "named", pod: mk([]string{"a", "b"}, nil), ask: "b", want: "b"},
		{name: "init container", pod: mk([]string{"a", "b"}, []string{"setup"}), ask: "setup", want: "setup"},
		{name: "ephemeral container", pod: withEphemeral, ask: "debug", want: "debug"},
		{name: "several", pod: mk([]string{"a", "b"}, nil),
			err: "a container name must be specified for pod web, choose one of: [a b]"},
		{name: "several with init", pod: mk([]string{"a", "b"}, []string{"setup", "migrate"}),
			err: "a container name must be specified for pod web, choose one of: [a b] or one of the init containers: [setup migrate]"},
		{name: "none", pod: mk(nil, nil), err: "a container name must be specified for pod web"},
		{name: "unknown", pod: mk([]string{"a"}, nil), ask: "nope", err: "container nope is not valid for pod web"},
	} {
		got, err := podContainer(tc.pod, tc.ask)
		if tc.err != "" {
			if !apierrors.IsBadRequest(err) || err.Error() != tc.err {
				t.Errorf("%s: %q %v, want 400 %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q %v, want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestValidatePodLogOptions(t *testing.T) {
	for _, tc := range []struct {
		opts corev1.PodLogOptions
		want string // a substring of the errors; "" for valid
	}{
		{opts: corev1.PodLogOptions{TailLines: ptr.To[int64](0), LimitBytes: ptr.To[int64](1), SinceSeconds: ptr.To[int64](1)}},
		{opts: corev1.PodLogOptions{TailLines: ptr.To[int64](-1)}, want: "tailLines: Invalid value: -1"},
		{opts: corev1.PodLogOptions{LimitBytes: ptr.To[int64](0)}, want: "limitBytes: Invalid value: 0"},
		{opts: corev1.PodLogOptions{SinceSeconds: ptr.To[int64](0)}, want: "sinceSeconds: Invalid value: 0"},
		{opts: corev1.PodLogOptions{SinceSeconds: ptr.To[int64](5), SinceTime: &metav1.Time{}}, want: "at most one of `sinceTime` or `sinceSeconds`"},
		{opts: corev1.PodLogOptions{Stream: ptr.To("Stderr")}},
		{opts: corev1.PodLogOptions{Stream: ptr.To("Stderr"), TailLines: ptr.To[int64](3)}, want: "mutually exclusive"},
		{opts: corev1.PodLogOptions{Stream: ptr.To("Both")}, want: "stream: Unsupported value"},
	} {
		errs := validatePodLogOptions(&tc.opts)
		if got := errs.ToAggregate(); (tc.want == "") != (got == nil) || (got != nil && !strings.Contains(got.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.opts, got, tc.want)
		}
	}
}

// The options come from the query as the API names them.
func TestPodOptionsFromQuery(t *testing.T) {
	scheme, _, err := newScheme(allResources())
	if err != nil {
		t.Fatal(err)
	}
	codec := runtime.NewParameterCodec(scheme)
	var logOpts corev1.PodLogOptions
	q, _ := url.ParseQuery("container=app&follow&previous=false&timestamps=1&tailLines=10&limitBytes=20&sinceTime=2024-05-01T10:00:00Z&stream=Stdout")
	if err := codec.DecodeParameters(q, corev1.SchemeGroupVersion, &logOpts); err != nil {
		t.Fatal(err)
	}
	if logOpts.Container != "app" || !logOpts.Follow || logOpts.Previous || !logOpts.Timestamps || *logOpts.TailLines != 10 ||
		*logOpts.LimitBytes != 20 || logOpts.SinceTime.UTC().Hour() != 10 || *logOpts.Stream != "Stdout" || logOpts.SinceSeconds != nil {
		t.Errorf("log options: %+v", logOpts)
	}
	if err := codec.DecodeParameters(url.Values{"tailLines": {"x"}}, corev1.SchemeGroupVersion, &corev1.PodLogOptions{}); err == nil {
		t.Error("tailLines=x decoded")
	}
	var execOpts corev1.PodExecOptions
	q, _ = url.ParseQuery("command=sh&command=-c&command=echo+hi&stdin=true&stdout=true&tty=true&container=app")
	if err := codec.DecodeParameters(q, corev1.SchemeGroupVersion, &execOpts); err != nil {
		t.Fatal(err)
	}
	if strings.Join(execOpts.Command, "|") != "sh|-c|echo hi" || !execOpts.Stdin || !execOpts.Stdout || execOpts.Stderr || !execOpts.TTY || execOpts.Container != "app" {
		t.Errorf("exec options: %+v", execOpts)
	}
	var pfOpts corev1.PodPortForwardOptions
	if err := codec.DecodeParameters(url.Values{"ports": {"80,443", "8080"}}, corev1.SchemeGroupVersion, &pfOpts); err != nil {
		t.Fatal(err)
	}
	if len(pfOpts.Ports) != 3 || pfOpts.Ports[0] != 80 || pfOpts.Ports[2] != 8080 {
		t.Errorf("port-forward options: %+v", pfOpts)
	}
	if got := streamQuery(true, true, false, true, []string{"ls", "-l"}).Encode(); got != "command=ls&command=-l&input=1&output=1&tty=1" {
		t.Errorf("kubelet query: %s", got)
	}
}

func TestNodeAddress(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "node-a"}, {Type: corev1.NodeExternalIP, Address: "1.2.3.4"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.5"}}}}
	if got := nodeAddress(node, defaultKubeletAddressTypes); got != "10.0.0.5" {
		t.Errorf("InternalIP first: %q", got)
	}
	node.Status.Addresses = node.Status.Addresses[:2]
	if got := nodeAddress(node, defaultKubeletAddressTypes); got != "node-a" {
		t.Errorf("then Hostname: %q", got)
	}
	node.Status.Addresses = node.Status.Addresses[1:]
	if got := nodeAddress(node, defaultKubeletAddressTypes); got != "" {
		t.Errorf("ExternalIP is not used: %q", got)
	}
}

func TestIssueKubeletServingCert(t *testing.T) {
	p := PKI{Dir: t.TempDir()}
	if _, _, err := p.IssueKubeletServingCert(t.TempDir(), "node-a", nil); err == nil {
		t.Fatal("issued without a CA")
	}
	if err := p.ensure(); err != nil {
		t.Fatal(err)
	}
	if _, err := newKubeletClient(p, nil, clusterDialer(Config{})); err != nil {
		t.Fatalf("kubelet client from a fresh PKI: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "kubelet-pki")
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	certFile, keyFile, err := p.IssueKubeletServingCert(dir, "node-a", ips)
	if err != nil {
		t.Fatal(err)
	}
	ca, _, _ := p.loadCA()
	if !servingCertCurrent(certFile, keyFile, ca, []string{"node-a", "localhost"}, ips) {
		t.Fatal("the issued certificate is not current")
	}
	first := readFile(t, certFile)
	if _, _, err := p.IssueKubeletServingCert(dir, "node-a", ips); err != nil || readFile(t, certFile) != first {
		t.Errorf("a current certificate was replaced (%v)", err)
	}
	ips = append(ips, net.ParseIP("10.0.0.5"))
	if _, _, err := p.IssueKubeletServingCert(dir, "node-a", ips); err != nil || readFile(t, certFile) == first {
		t.Errorf("a certificate lacking an address was kept (%v)", err)
	}
	if !servingCertCurrent(certFile, keyFile, ca, []string{"node-a", "localhost"}, ips) {
		t.Error("the reissued certificate is not current")
	}
	// A new CA makes certificates of the old one stale.
	other := PKI{Dir: t.TempDir()}
	if err := other.ensure(); err != nil {
		t.Fatal(err)
	}
	otherCA, _, _ := other.loadCA()
	if servingCertCurrent(certFile, keyFile, otherCA, []string{"node-a"}, ips) {
		t.Error("a certificate of another CA counts as current")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
