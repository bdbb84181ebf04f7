package kubelet

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/testutil"
)

// drainEvents returns the events the fake recorder holds.
func drainEvents(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// unmountAllUnder unmounts what a test left mounted under dir.
func unmountAllUnder(t *testing.T, dir string) {
	ms, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	for _, m := range ms {
		_ = unix.Unmount(m.Mountpoint, unix.MNT_DETACH)
		t.Errorf("left mounted: %s", m.Mountpoint)
	}
}

func TestConfigVolumesSetUpUpdateTearDown(t *testing.T) {
	testutil.RequireRoot(t)
	root := t.TempDir()
	t.Cleanup(func() { unmountAllUnder(t, root) })
	objs := testObjects()
	rec := record.NewFakeRecorder(100)
	cv := newConfigVolumes(root, objs, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, rec, slog.Default())
	clock := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	api := &fakeTokens{clock: clock}
	cv.tokens, cv.now = newServiceAccountTokens(clientTokenRequester(api.client()), clock), clock.Now
	var requeued []time.Duration
	cv.requeueAfter = func(_ *corev1.Pod, d time.Duration) { requeued = append(requeued, d) }
	pod := configPod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds", DefaultMode: ptr.To[int32](0o400)}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
		{Name: "sa", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}}}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if err := cv.setUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(root, "pods", "uid-1", "volumes")
	cfgDir := filepath.Join(base, "kubernetes.io~configmap", "cfg")
	secDir := filepath.Join(base, "kubernetes.io~secret", "sec")
	if got := readVolume(t, cfgDir); got["greeting"] != "hello" || got["mode"] != "fast" || len(got) != 3 {
		t.Errorf("configMap volume holds %v", got)
	}
	if got := readVolume(t, secDir); got["user"] != "admin" || got["password"] != "s3cret" {
		t.Errorf("secret volume holds %v", got)
	}
	if fi, err := os.Stat(filepath.Join(secDir, "user")); err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("secret file: %v %v, want mode 0400", fi, err)
	}
	if got := readVolume(t, filepath.Join(base, "kubernetes.io~downward-api", "info")); got["labels"] != "app=\"web\"\ntier=\"front \\\"end\\\"\"" {
		t.Errorf("downwardAPI volume holds %v", got)
	}
	saDir := filepath.Join(base, "kubernetes.io~projected", "sa")
	if got := readVolume(t, saDir); len(got) != 2 || got["namespace"] != "ns1" || got["token"] != "token-1" {
		t.Errorf("projected volume holds %v, want namespace and token-1", got)
	}
	if fi, err := os.Stat(filepath.Join(saDir, "token")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("token file: %v %v, want mode 0644", fi, err)
	}
	if want := 3607 * time.Second * 8 / 10; len(requeued) != 1 || requeued[0] != want {
		t.Errorf("pod requeued after %v, want once after %v (the token's refresh)", requeued, want)
	}
	for dir, want := range map[string]string{secDir: "tmpfs", filepath.Join(base, "kubernetes.io~projected", "sa"): "tmpfs"} {
		ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(dir))
		if err != nil || len(ms) != 1 || ms[0].FSType != want {
			t.Errorf("%s: mounts %v (%v), want one %s", dir, ms, err, want)
		}
	}
	if mounted, _ := mountinfo.Mounted(cfgDir); mounted {
		t.Error("a configMap volume is on the disk, not a mount")
	}

	// A second sync with nothing changed mounts nothing more and writes nothing.
	before, _ := os.Readlink(filepath.Join(cfgDir, "..data"))
	if err := cv.setUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Readlink(filepath.Join(cfgDir, "..data")); after != before {
		t.Errorf("..data moved from %s to %s with nothing changed", before, after)
	}
	if api.count() != 1 {
		t.Errorf("%d token requests for a fresh token, want 1", api.count())
	}

	// The sync when the token needs a refresh writes the new one.
	clock.Step(requeued[0])
	if err := cv.setUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := readVolume(t, saDir); got["token"] != "token-2" {
		t.Errorf("refreshed projected volume holds %v, want token-2", got)
	}
	if ms, _ := mountinfo.GetMounts(mountinfo.SingleEntryFilter(secDir)); len(ms) != 1 {
		t.Errorf("secret dir mounted %d times", len(ms))
	}

	// The ConfigMap changes: the volume follows.
	objs.cms["ns1/app"] = &corev1.ConfigMap{Data: map[string]string{"greeting": "bonjour"}}
	if err := cv.setUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := readVolume(t, cfgDir); len(got) != 1 || got["greeting"] != "bonjour" {
		t.Errorf("updated configMap volume holds %v", got)
	}

	// The ConfigMap goes away: the volume keeps its content, a FailedMount event says why.
	delete(objs.cms, "ns1/app")
	drainEvents(rec)
	if err := cv.setUp(context.Background(), pod); err != nil {
		t.Errorf("a volume written once must not block the pod: %v", err)
	}
	if got := readVolume(t, cfgDir); got["greeting"] != "bonjour" {
		t.Errorf("volume after its ConfigMap went: %v", got)
	}
	if evs := drainEvents(rec); len(evs) != 1 || evs[0] != `Warning FailedMount MountVolume.SetUp failed for volume "cfg" : configmap "app" not found` {
		t.Errorf("events %q", evs)
	}

	if err := cv.tearDown(pod.UID); err != nil {
		t.Fatal(err)
	}
	if ms, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(root)); len(ms) > 0 {
		t.Errorf("mounts left after tear down: %v", ms)
	}
	if entries, err := os.ReadDir(base); err != nil || len(entries) != 0 {
		t.Errorf("volumes dir after tear down: %v %v", entries, err)
	}
	if n := len(cv.tokens.cache); n != 0 {
		t.Errorf("%d tokens kept after tear down", n)
	}
	if err := cv.tearDown(pod.UID); err != nil {
		t.Errorf("second tear down: %v", err)
	}
}

func TestConfigVolumeMissingObjectBlocksPod(t *testing.T) {
	root := t.TempDir()
	rec := record.NewFakeRecorder(100)
	cv := newConfigVolumes(root, testObjects(), nil, rec, slog.Default())
	pod := configPod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "missing-cm"}}}},
		{Name: "opt", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "also-missing"}, Optional: ptr.To(true)}}},
	}
	err := cv.setUp(context.Background(), pod)
	if !errors.Is(err, errVolumesNotReady) {
		t.Fatalf("err = %v, want volumes not ready", err)
	}
	if evs := drainEvents(rec); len(evs) != 1 || evs[0] != `Warning FailedMount MountVolume.SetUp failed for volume "cfg" : configmap "missing-cm" not found` {
		t.Errorf("events %q", evs)
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "uid-1", "volumes", "kubernetes.io~configmap", "opt", "..data")); err != nil {
		t.Errorf("the optional volume of a missing ConfigMap is not written empty: %v", err)
	}
	if err := cv.tearDown(pod.UID); err != nil {
		t.Fatal(err)
	}
}

func TestPodReferences(t *testing.T) {
	pod := configPod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol-cm"}}}},
		{Name: "b", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-secret"}}}}}}},
	}
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", EnvFrom: []corev1.EnvFromSource{
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env-secret"}}}}}}
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env-cm"}, Key: "k"}}}}
	for ref, want := range map[ObjectRef]bool{
		{Kind: "ConfigMap", Name: "vol-cm"}: true, {Kind: "Secret", Name: "vol-cm"}: false,
		{Kind: "Secret", Name: "proj-secret"}: true, {Kind: "Secret", Name: "env-secret"}: true,
		{Kind: "ConfigMap", Name: "env-cm"}: true, {Kind: "ConfigMap", Name: "other"}: false,
	} {
		if got := podReferences(pod, ref); got != want {
			t.Errorf("%+v: %v, want %v", ref, got, want)
		}
	}
}
