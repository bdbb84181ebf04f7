package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestRealConfigVolumes runs, on a real node, a pod with a configMap, a secret, a
// downwardAPI and a service-account-shaped projected volume and environment from a
// ConfigMap key, a Secret and the Services, and checks what the container sees; a change
// of the ConfigMap reaches the running container; a pod naming a missing ConfigMap waits
// in ContainerCreating with upstream's FailedMount event and starts once it exists;
// deleting the pod leaves no tmpfs mounted. Then a Helm chart of such objects installs,
// upgrades, rolls back and uninstalls (helmChart). The cluster is online, its registries
// stand-ins: pods run an image only "docker.io" has and a private registry's image with
// imagePullSecrets (checkUpstreamImages).
func TestRealConfigVolumes(t *testing.T) {
	t.Parallel()
	images := startUpstreamStandIns(t)
	tc := startRealClusterWith(t, images.tweak, 1, "us-east-1a")
	ctx := context.Background()
	ns := tc.Namespace("real-config")
	root := tc.KubeletRoot(tc.Nodes()[0])
	if _, err := tc.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config"},
		Data: map[string]string{"greeting": "hello", "mode": "fast"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-secret"},
		Data: map[string][]byte{"user": []byte("admin"), "password": []byte("s3cret")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	backend, err := tc.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "backend"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	pod := busyboxPod(ns, "config-reader", corev1.RestartPolicyAlways, "sleep 3600")
	pod.Labels = map[string]string{"app": "reader"}
	field := func(path, fp string) corev1.DownwardAPIVolumeFile {
		return corev1.DownwardAPIVolumeFile{Path: path, FieldRef: &corev1.ObjectFieldSelector{FieldPath: fp}}
	}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "app-secret", DefaultMode: ptr.To[int32](0o400)}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			field("name", "metadata.name"), field("labels", "metadata.labels"),
			{Path: "cpu_limit", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
		}}}},
		{Name: "sa", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{field("namespace", "metadata.namespace")}}},
		}}}},
	}
	c := &pod.Spec.Containers[0]
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
	c.VolumeMounts = []corev1.VolumeMount{
		{Name: "cfg", MountPath: "/etc/config"},
		{Name: "cfg", MountPath: "/etc/greeting.txt", SubPath: "greeting"},
		{Name: "sec", MountPath: "/etc/secret"},
		{Name: "info", MountPath: "/etc/podinfo"},
		{Name: "sa", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"},
	}
	c.Env = []corev1.EnvVar{{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}, Key: "greeting"}}}}
	c.EnvFrom = []corev1.EnvFromSource{{Prefix: "SECRET_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-secret"}}}}
	if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A pod naming a ConfigMap that does not exist (yet).
	missing := busyboxPod(ns, "no-config", corev1.RestartPolicyAlways, "cat /etc/config/k; sleep 3600")
	missing.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "missing-cm"}}}}}
	missing.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/config"}}
	if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, missing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	p := tc.WaitPodRunning(ns, "config-reader")
	pid := tc.containerPID(p, "main")
	inCtr := func(path string) string { return filepath.Join("/proc", strconv.Itoa(pid), "root", path) }
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(inCtr(path))
		if err != nil {
			t.Errorf("container file %s: %v", path, err)
		}
		return string(b)
	}
	for path, want := range map[string]string{
		"/etc/config/greeting": "hello", "/etc/config/mode": "fast", "/etc/greeting.txt": "hello",
		"/etc/secret/user": "admin", "/etc/secret/password": "s3cret",
		"/etc/podinfo/name": "config-reader", "/etc/podinfo/labels": `app="reader"`, "/etc/podinfo/cpu_limit": "500",
		"/var/run/secrets/kubernetes.io/serviceaccount/namespace": ns,
	} {
		if got := read(path); got != want {
			t.Errorf("%s holds %q, want %q", path, got, want)
		}
	}
	if ca := read("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"); !strings.HasPrefix(ca, "-----BEGIN CERTIFICATE-----") {
		t.Errorf("ca.crt holds %q", ca)
	}
	// The token is the pod's: the API server says whose, and that it is bound to this pod.
	review, err := tc.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: read("/var/run/secrets/kubernetes.io/serviceaccount/token")}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := review.Status.User; !review.Status.Authenticated || u.Username != "system:serviceaccount:"+ns+":default" ||
		len(u.Extra["authentication.kubernetes.io/pod-name"]) != 1 || u.Extra["authentication.kubernetes.io/pod-name"][0] != "config-reader" {
		t.Errorf("the pod's token authenticates as %+v (%s), want %s's default service account bound to config-reader",
			u, review.Status.Error, ns)
	}
	if fi, err := os.Stat(inCtr("/etc/secret/password")); err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("secret file: %v %v, want mode 0400", fi, err)
	}
	if target, err := os.Readlink(inCtr("/etc/config/greeting")); err != nil || target != "..data/greeting" {
		t.Errorf("/etc/config/greeting → %q (%v), want ..data/greeting", target, err)
	}
	for path, fstype := range map[string]string{"/etc/config": "", "/etc/secret": "tmpfs", "/var/run/secrets/kubernetes.io/serviceaccount": "tmpfs", "/etc/podinfo": ""} {
		m := mountAt(t, pid, path)
		if !slices.Contains(strings.Split(m.Options, ","), "ro") || (fstype != "" && m.FSType != fstype) {
			t.Errorf("%s mounted %s (%s), want read-only %s", path, m.FSType, m.Options, fstype)
		}
	}
	if err := os.WriteFile(inCtr("/etc/config/new"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write into the configMap volume: %v, want EROFS", err)
	}
	env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	vars := strings.Split(string(env), "\x00")
	for _, want := range []string{"GREETING=hello", "SECRET_user=admin", "SECRET_password=s3cret",
		"BACKEND_SERVICE_HOST=" + backend.Spec.ClusterIP, "BACKEND_SERVICE_PORT_HTTP=8080",
		"BACKEND_PORT=tcp://" + backend.Spec.ClusterIP + ":8080", "KUBERNETES_SERVICE_PORT=443"} {
		if !slices.Contains(vars, want) {
			t.Errorf("environment lacks %s: %q", want, vars)
		}
	}
	secDir := filepath.Join(root, "pods", string(p.UID), "volumes", "kubernetes.io~secret", "sec")
	if m := hostMount(t, secDir); m.FSType != "tmpfs" {
		t.Errorf("secret volume on the node is %s, want tmpfs", m.FSType)
	}

	// The ConfigMap changes: the running container sees the new file (the subPath mount
	// keeps the old one, as subPath mounts do).
	cm, err := tc.Client.CoreV1().ConfigMaps(ns).Get(ctx, "app-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["greeting"] = "bonjour"
	if _, err := tc.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	updated := time.Now()
	testutil.EventuallyWithin(t, clustertest.Timeout, "the container sees the updated ConfigMap", func() (bool, error) {
		b, _ := os.ReadFile(inCtr("/etc/config/greeting"))
		return string(b) == "bonjour", nil
	})
	t.Logf("ConfigMap update reached the container in %v", time.Since(updated))
	if got := read("/etc/greeting.txt"); got != "hello" {
		t.Errorf("subPath file holds %q after the update, want the old content", got)
	}

	// The pod naming a missing ConfigMap waits with upstream's event and status.
	const wantEvent = `FailedMount: MountVolume.SetUp failed for volume "cfg" : configmap "missing-cm" not found`
	testutil.EventuallyWithin(t, clustertest.Timeout, "FailedMount event of pod no-config", func() (bool, error) {
		return slices.Contains(tc.Warnings(ns, "no-config"), wantEvent), nil
	})
	testutil.EventuallyWithin(t, clustertest.Timeout, "pod no-config ContainerCreating", func() (bool, error) {
		p, err := tc.Client.CoreV1().Pods(ns).Get(ctx, "no-config", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cs := p.Status.ContainerStatuses
		return p.Status.Phase == corev1.PodPending && len(cs) == 1 && cs[0].State.Waiting != nil &&
			cs[0].State.Waiting.Reason == "ContainerCreating", nil
	})
	// Once the ConfigMap exists, the pod starts with it.
	if _, err := tc.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "missing-cm"},
		Data: map[string]string{"k": "here now"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	late := tc.WaitPodRunning(ns, "no-config")
	if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(tc.containerPID(late, "main")), "root/etc/config/k")); err != nil || string(b) != "here now" {
		t.Errorf("no-config sees %q (%v)", b, err)
	}

	// Deleting the pods unmounts their tmpfs and removes their dirs (the pods have a grace
	// period of 0: the API server deletes them at once and the kubelet cleans up after).
	for _, name := range []string{"config-reader", "no-config"} {
		tc.deletePodAndWait(ns, name)
	}
	podDir := filepath.Join(root, "pods", string(p.UID))
	testutil.EventuallyWithin(t, clustertest.Timeout, "pod config-reader's mounts and dir gone", func() (bool, error) {
		ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(podDir))
		if err != nil || len(ms) > 0 {
			return false, err
		}
		_, err = os.Stat(podDir)
		return errors.Is(err, os.ErrNotExist), nil
	})
	if b, _ := os.ReadFile("/proc/self/mountinfo"); bytes.Contains(b, []byte(string(p.UID))) {
		t.Errorf("a mount of pod %s is left in the mount table", p.UID)
	}

	images.checkUpstreamImages(t, tc, ns)

	// The same objects as a user installs them: a Helm chart, on the same node.
	t.Run("helm chart", func(t *testing.T) { tc.helmChart(t, tc.Namespace("real-helm")) })
}
