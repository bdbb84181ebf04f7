package kuberuntime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestPodHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b"
	tests := []struct {
		name                 string
		spec                 corev1.PodSpec
		podName              string
		wantHost, wantDomain string
	}{
		{"the pod's name", corev1.PodSpec{}, "web", "web", ""},
		{"spec.hostname", corev1.PodSpec{Hostname: "h1"}, "web", "h1", ""},
		{"a subdomain", corev1.PodSpec{Hostname: "h1", Subdomain: "sub"}, "web", "h1", "sub.ns1.svc.cluster.local"},
		{"a long name, cut without a trailing dash", corev1.PodSpec{}, long, strings.Repeat("a", 62), ""},
		{"hostnameOverride, no domain", corev1.PodSpec{Hostname: "h1", Subdomain: "sub", HostnameOverride: ptr.To("over.ride")}, "web", "over.ride", ""},
	}
	for _, tt := range tests {
		pod := &corev1.Pod{Spec: tt.spec}
		pod.Name, pod.Namespace = tt.podName, "ns1"
		host, domain := podHostname(pod, "cluster.local")
		if host != tt.wantHost || domain != tt.wantDomain {
			t.Errorf("%s: %q, %q; want %q, %q", tt.name, host, domain, tt.wantHost, tt.wantDomain)
		}
	}
}

func TestHostsContent(t *testing.T) {
	const head = "# Kubernetes-managed hosts file.\n" +
		"127.0.0.1\tlocalhost\n" +
		"::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\n" +
		"fe00::0\tip6-mcastprefix\n" +
		"fe00::1\tip6-allnodes\n" +
		"fe00::2\tip6-allrouters\n"
	aliases := []corev1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}, {IP: "10.0.0.1", Hostnames: []string{"baz"}}}
	const aliasLines = "\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n10.0.0.1\tbaz\n"
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"pod", managedHostsContent([]string{"10.1.0.5"}, "web", "", nil), head + "10.1.0.5\tweb\n"},
		{"pod with a domain", managedHostsContent([]string{"10.1.0.5"}, "h1", "sub.ns1.svc.cluster.local", nil),
			head + "10.1.0.5\th1.sub.ns1.svc.cluster.local\th1\n"},
		{"pod with hostAliases", managedHostsContent([]string{"10.1.0.5"}, "web", "", aliases), head + "10.1.0.5\tweb\n" + aliasLines},
		{"host network", hostNetworkHostsContent([]byte("127.0.0.1 localhost\n"), nil),
			"# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n"},
		{"host network with hostAliases", hostNetworkHostsContent([]byte("127.0.0.1 localhost\n"), aliases),
			"# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n" + aliasLines},
	}
	for _, tt := range tests {
		if string(tt.got) != tt.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tt.name, tt.got, tt.want)
		}
	}
}

func TestMountsHostsFile(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	c := &pod.Spec.Containers[0]
	if mountsHostsFile(pod, c, "") {
		t.Error("a pod on the pod network without an address yet gets a hosts file")
	}
	if !mountsHostsFile(pod, c, "10.1.0.5") {
		t.Error("a pod with an address gets no hosts file")
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "h", MountPath: "/etc/hosts-original"}}
	if !mountsHostsFile(pod, c, "10.1.0.5") {
		t.Error("a mount beside /etc/hosts stops the kubelet's")
	}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "h", MountPath: "/etc/hosts"})
	if mountsHostsFile(pod, c, "10.1.0.5") {
		t.Error("a container that mounts its own /etc/hosts gets the kubelet's")
	}
	hn := testPod(corev1.RestartPolicyAlways, nil, "app")
	hn.Spec.HostNetwork = true
	if !mountsHostsFile(hn, &hn.Spec.Containers[0], "") {
		t.Error("a host-network pod gets no hosts file")
	}
}

// Each container of a pod on the pod network gets the pod's hosts file at /etc/hosts,
// written 0644 in the pod's directory; host-network pods get the node's, with their
// hostAliases.
func TestContainerConfigHostsFile(t *testing.T) {
	tmp := t.TempDir()
	podDir := filepath.Join(tmp, "pods", "uid-1")
	node := filepath.Join(tmp, "node-hosts")
	if err := os.WriteFile(node, []byte("127.0.0.1\tlocalhost\n192.168.1.10\tnode-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := testPod(corev1.RestartPolicyAlways, nil, "app", "own")
	pod.Spec.Hostname, pod.Spec.Subdomain = "h1", "sub"
	pod.Spec.HostAliases = []corev1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: node}}}}
	pod.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "h", MountPath: "/etc/hosts"}}
	host, domain := podHostname(pod, "cluster.local")
	in := containerInput{env: envInput{podIP: "10.1.0.5"}, podDir: podDir,
		hosts: hostsInput{hostname: host, domain: domain, nodeHostsFile: node}, volumes: map[string]string{"h": node}}
	hostsMounts := func(c *corev1.Container) []string {
		t.Helper()
		cfg, err := containerConfig(pod, c, in)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range cfg.GetMounts() {
			if m.GetContainerPath() == "/etc/hosts" {
				out = append(out, m.GetHostPath())
				if m.GetReadonly() {
					t.Errorf("%s: /etc/hosts mounted read-only", c.Name)
				}
			}
		}
		return out
	}
	file := filepath.Join(podDir, "etc-hosts")
	if got := hostsMounts(&pod.Spec.Containers[0]); len(got) != 1 || got[0] != file {
		t.Fatalf("app's /etc/hosts mounts: %v, want %s", got, file)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.HasPrefix(s, "# Kubernetes-managed hosts file.\n") ||
		!strings.Contains(s, "\n10.1.0.5\th1.sub.default.svc.cluster.local\th1\n") ||
		!strings.HasSuffix(s, "\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n") {
		t.Errorf("pod's hosts file:\n%s", s)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("hosts file: %v %v, want mode 0644", fi, err)
	}
	if got := hostsMounts(&pod.Spec.Containers[1]); len(got) != 1 || got[0] != node {
		t.Errorf("a container mounting its own /etc/hosts: %v, want only its volume %s", got, node)
	}

	pod.Spec.HostNetwork = true
	in.env.podIP = ""
	if got := hostsMounts(&pod.Spec.Containers[0]); len(got) != 1 || got[0] != file {
		t.Fatalf("host-network app's /etc/hosts mounts: %v", got)
	}
	b, _ = os.ReadFile(file)
	if want := "# Kubernetes-managed hosts file (host network).\n127.0.0.1\tlocalhost\n192.168.1.10\tnode-1\n" +
		"\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n"; string(b) != want {
		t.Errorf("host-network pod's hosts file:\n%s\nwant:\n%s", b, want)
	}
}
