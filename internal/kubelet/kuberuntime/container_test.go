package kuberuntime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/kubelet"
)

func TestContainerConfig(t *testing.T) {
	tmp := t.TempDir()
	data := filepath.Join(tmp, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	bidir := corev1.MountPropagationBidirectional
	yes, no, uid := true, false, int64(1000)
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	pod.Spec.TerminationGracePeriodSeconds = new(int64)
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
	}
	c := &pod.Spec.Containers[0]
	c.Command = []string{"sh", "-c"}
	c.Args = []string{"echo $(GREETING) > /data/$(NAME)"}
	c.WorkingDir = "/work"
	c.Env = []corev1.EnvVar{{Name: "GREETING", Value: "hi"}, {Name: "NAME", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	c.VolumeMounts = []corev1.VolumeMount{
		{Name: "data", MountPath: "/data"},
		{Name: "data", MountPath: "/logs", SubPathExpr: "logs/$(NAME)", ReadOnly: true},
		{Name: "data", MountPath: "/shared", MountPropagation: &bidir},
		{Name: "token", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"},
	}
	c.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
	c.SecurityContext = &corev1.SecurityContext{Privileged: &yes, RunAsUser: &uid, ReadOnlyRootFilesystem: &yes,
		AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}, Drop: []corev1.Capability{"ALL"}}}
	c.Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	podDir := filepath.Join(tmp, "pods", "uid-1")
	token := filepath.Join(tmp, "token")
	cfg, err := containerConfig(pod, c, containerInput{ctype: typeApp, restartCount: 3, imageRef: "sha256:abc",
		volumes: kubelet.PodVolumes{"data": data, "token": token}, podDir: podDir, nodeMemory: 8 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.GetMetadata(); m.GetName() != "app" || m.GetAttempt() != 3 {
		t.Errorf("metadata = %v", m)
	}
	if cfg.GetImage().GetImage() != "sha256:abc" || cfg.GetImage().GetUserSpecifiedImage() != "busybox:1.36" {
		t.Errorf("image = %v", cfg.GetImage())
	}
	if got := strings.Join(append(cfg.GetCommand(), cfg.GetArgs()...), " "); got != "sh -c echo hi > /data/web" {
		t.Errorf("command = %q", got)
	}
	if cfg.GetWorkingDir() != "/work" || cfg.GetLogPath() != "app/3.log" {
		t.Errorf("working dir %q, log path %q", cfg.GetWorkingDir(), cfg.GetLogPath())
	}
	mounts := map[string]*runtimeapi.Mount{}
	for _, m := range cfg.GetMounts() {
		mounts[m.GetContainerPath()] = m
	}
	if len(mounts) != 5 {
		t.Fatalf("mounts = %v", cfg.GetMounts())
	}
	// The kubelet's projected volume is mounted read-only though the volumeMount does not say so.
	if m := mounts["/var/run/secrets/kubernetes.io/serviceaccount"]; m.GetHostPath() != token || !m.GetReadonly() {
		t.Errorf("token mount = %v", m)
	}
	if m := mounts["/data"]; m.GetHostPath() != data || m.GetReadonly() || m.GetPropagation() != runtimeapi.MountPropagation_PROPAGATION_PRIVATE {
		t.Errorf("/data mount = %v", m)
	}
	if m := mounts["/logs"]; m.GetHostPath() != filepath.Join(data, "logs", "web") || !m.GetReadonly() {
		t.Errorf("/logs mount = %v", m)
	}
	if fi, err := os.Stat(filepath.Join(data, "logs", "web")); err != nil || !fi.IsDir() {
		t.Errorf("subPath dir not created: %v", err)
	}
	if m := mounts["/shared"]; m.GetPropagation() != runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL {
		t.Errorf("/shared mount = %v", m)
	}
	tm := mounts["/dev/termination-log"]
	if tm == nil || filepath.Dir(tm.GetHostPath()) != filepath.Join(podDir, "containers", "app") || tm.GetReadonly() {
		t.Fatalf("termination-log mount = %v", tm)
	}
	if fi, err := os.Stat(tm.GetHostPath()); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("termination-log file: %v %v", fi, err)
	}
	res := cfg.GetLinux().GetResources()
	if res.GetCpuShares() != 512 || res.GetCpuQuota() != 150000 || res.GetCpuPeriod() != 100000 || res.GetMemoryLimitInBytes() != 2<<30 {
		t.Errorf("resources = %v", res)
	}
	if res.GetOomScoreAdj() != 875 { // Burstable: 1000 - 1000×1Gi/8Gi
		t.Errorf("oom score adj = %d, want 875", res.GetOomScoreAdj())
	}
	sc := cfg.GetLinux().GetSecurityContext()
	if !sc.GetPrivileged() || sc.GetRunAsUser().GetValue() != 1000 || !sc.GetReadonlyRootfs() || !sc.GetNoNewPrivs() ||
		strings.Join(sc.GetCapabilities().GetAddCapabilities(), ",") != "NET_ADMIN" || strings.Join(sc.GetCapabilities().GetDropCapabilities(), ",") != "ALL" {
		t.Errorf("security context = %v", sc)
	}
	if ns := sc.GetNamespaceOptions(); ns.GetNetwork() != runtimeapi.NamespaceMode_POD || ns.GetPid() != runtimeapi.NamespaceMode_CONTAINER || ns.GetIpc() != runtimeapi.NamespaceMode_POD {
		t.Errorf("namespaces = %v", ns)
	}
	l, a := cfg.GetLabels(), cfg.GetAnnotations()
	if l[labelContainerName] != "app" || l[labelPodName] != "web" || l[labelPodNamespace] != "default" || l[labelPodUID] != "uid-1" {
		t.Errorf("labels = %v", l)
	}
	if a[annotationRestartCount] != "3" || a[annotationHash] != containerHash(c) || a[annotationTerminationMessagePath] != "/dev/termination-log" ||
		a[annotationType] != "container" || a[annotationTerminationGracePeriod] != "0" || !strings.Contains(a[annotationPorts], `"hostPort":8080`) {
		t.Errorf("annotations = %v", a)
	}
}

func TestContainerMountErrors(t *testing.T) {
	tmp := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(tmp, "escape")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		mount corev1.VolumeMount
		want  string
	}{
		{"missing volume", corev1.VolumeMount{Name: "gone", MountPath: "/x"}, `cannot find volume "gone" to mount into container "app"`},
		{"dot dot", corev1.VolumeMount{Name: "data", MountPath: "/x", SubPath: "a/../../b"}, "must not contain '..'"},
		{"symlink out", corev1.VolumeMount{Name: "data", MountPath: "/x", SubPath: "escape"}, "outside the volume"},
	}
	for _, tt := range tests {
		pod := testPod(corev1.RestartPolicyAlways, nil, "app")
		pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{tt.mount}
		_, err := containerMounts(pod, &pod.Spec.Containers[0], kubelet.PodVolumes{"data": tmp}, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestOOMScoreAdjAndShares(t *testing.T) {
	q := resource.MustParse
	mk := func(req, lim corev1.ResourceList) *corev1.Pod {
		p := testPod(corev1.RestartPolicyAlways, nil, "app")
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: req, Limits: lim}
		return p
	}
	tests := []struct {
		name          string
		pod           *corev1.Pod
		oom, shares   int64
		quota, memory int64
	}{
		{"best effort", mk(nil, nil), 1000, 2, 0, 0},
		{"guaranteed", mk(corev1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}, corev1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}), -997, 1024, 100000, 1 << 30},
		{"burstable, tiny request", mk(corev1.ResourceList{"memory": q("1Mi")}, nil), 999, 2, 0, 0},
		{"burstable, huge request", mk(corev1.ResourceList{"memory": q("16Gi")}, nil), 3, 2, 0, 0},
		{"limit only: shares from the limit", mk(nil, corev1.ResourceList{"cpu": q("250m")}), 999, 256, 25000, 0},
		{"tiny cpu limit: minimum quota", mk(nil, corev1.ResourceList{"cpu": q("1m")}), 999, 2, 1000, 0},
	}
	for _, tt := range tests {
		res := linuxResources(tt.pod, &tt.pod.Spec.Containers[0], 8<<30)
		if res.GetOomScoreAdj() != tt.oom || res.GetCpuShares() != tt.shares || res.GetCpuQuota() != tt.quota || res.GetMemoryLimitInBytes() != tt.memory {
			t.Errorf("%s: %v, want oom %d shares %d quota %d memory %d", tt.name, res, tt.oom, tt.shares, tt.quota, tt.memory)
		}
	}
	crit := mk(nil, nil)
	crit.Spec.PriorityClassName = "system-node-critical"
	if got := oomScoreAdj(crit, &crit.Spec.Containers[0], 8<<30); got != -997 {
		t.Errorf("node-critical pod oom score adj = %d", got)
	}
}

func TestSandboxConfig(t *testing.T) {
	r, _ := newTestRuntime(t)
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	pod.Labels = map[string]string{"app": "web"}
	pod.Annotations = map[string]string{"note": "x"}
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 53, HostPort: 5353, Protocol: corev1.ProtocolUDP, HostIP: "127.0.0.1"}}
	cfg := r.sandboxConfig(pod, 2)
	if m := cfg.GetMetadata(); m.GetName() != "web" || m.GetNamespace() != "default" || m.GetUid() != "uid-1" || m.GetAttempt() != 2 {
		t.Errorf("metadata = %v", m)
	}
	if cfg.GetHostname() != "web" {
		t.Errorf("hostname = %q", cfg.GetHostname())
	}
	if want := filepath.Join(r.cfg.PodLogsDir, "default_web_uid-1"); cfg.GetLogDirectory() != want {
		t.Errorf("log directory = %q, want %q", cfg.GetLogDirectory(), want)
	}
	if l := cfg.GetLabels(); l["app"] != "web" || l[labelPodUID] != "uid-1" || l[labelPodName] != "web" || l[labelPodNamespace] != "default" {
		t.Errorf("labels = %v", l)
	}
	if cfg.GetAnnotations()["note"] != "x" {
		t.Errorf("annotations = %v", cfg.GetAnnotations())
	}
	if pm := cfg.GetPortMappings(); len(pm) != 1 || pm[0].GetProtocol() != runtimeapi.Protocol_UDP || pm[0].GetHostPort() != 5353 ||
		pm[0].GetContainerPort() != 53 || pm[0].GetHostIp() != "127.0.0.1" {
		t.Errorf("port mappings = %v", pm)
	}
	if cg := cfg.GetLinux().GetCgroupParent(); cg != "/kubelab-test/poduid-1" {
		t.Errorf("cgroup parent = %q", cg)
	}
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetNetwork() != runtimeapi.NamespaceMode_POD || ns.GetPid() != runtimeapi.NamespaceMode_CONTAINER || ns.GetIpc() != runtimeapi.NamespaceMode_POD {
		t.Errorf("namespaces = %v", ns)
	}
	pod.Spec.HostNetwork = true
	cfg = r.sandboxConfig(pod, 0)
	if cfg.GetHostname() != "" || cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() != runtimeapi.NamespaceMode_NODE {
		t.Errorf("host network sandbox: hostname %q, namespaces %v", cfg.GetHostname(), cfg.GetLinux().GetSecurityContext().GetNamespaceOptions())
	}
}

func TestImageNames(t *testing.T) {
	tests := []struct {
		image, want string
		policy      corev1.PullPolicy
		bad         bool
	}{
		{image: "busybox", want: "busybox:latest", policy: corev1.PullAlways},
		{image: "busybox:1.36", want: "busybox:1.36", policy: corev1.PullIfNotPresent},
		{image: "busybox:latest", want: "busybox:latest", policy: corev1.PullAlways},
		{image: "127.0.0.1:5000/test/busybox:v1", want: "127.0.0.1:5000/test/busybox:v1", policy: corev1.PullIfNotPresent},
		{image: "busybox@sha256:" + strings.Repeat("a", 64), want: "busybox@sha256:" + strings.Repeat("a", 64), policy: corev1.PullIfNotPresent},
		{image: "Not A Name", bad: true},
	}
	for _, tt := range tests {
		got, err := applyDefaultImageTag(tt.image)
		if tt.bad {
			if err == nil {
				t.Errorf("%q: no error", tt.image)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("applyDefaultImageTag(%q) = %q, %v; want %q", tt.image, got, err, tt.want)
		}
		if p := pullPolicy(tt.image, ""); p != tt.policy {
			t.Errorf("default pull policy of %q = %s, want %s", tt.image, p, tt.policy)
		}
	}
	for _, tt := range []struct {
		policy  corev1.PullPolicy
		present bool
		want    bool
	}{
		{corev1.PullAlways, true, true}, {corev1.PullIfNotPresent, true, false}, {corev1.PullIfNotPresent, false, true},
		{corev1.PullNever, false, false}, {corev1.PullNever, true, false},
	} {
		if got := shouldPull(tt.policy, tt.present); got != tt.want {
			t.Errorf("shouldPull(%s, %v) = %v", tt.policy, tt.present, got)
		}
	}
}
