package kuberuntime

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/moby/sys/mountinfo"
	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/containerd"
	"github.com/kubelab/kubelab/internal/kubelet"
	"github.com/kubelab/kubelab/internal/testutil"
)

// The tests in this file run pods in a containerd started for the test, with images
// served by an in-process registry on 127.0.0.1. They need root.

func unique(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// busyboxLayer is a gzipped layer holding /bin/busybox (Debian's busybox-static) and
// links for the applets the tests use, and its diff id.
func busyboxLayer(t *testing.T) ([]byte, v1.Hash) {
	t.Helper()
	bin, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("busybox-static is needed for the test images: %v", err)
	}
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	mtime := time.Unix(0, 0)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime}))
	must(tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: mtime}))
	must(tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin)), ModTime: mtime}))
	_, err = tw.Write(bin)
	must(err)
	for _, applet := range []string{"sh", "sleep", "echo", "cat", "ls", "true", "false", "env"} {
		must(tw.WriteHeader(&tar.Header{Name: "bin/" + applet, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777, ModTime: mtime}))
	}
	must(tw.Close())
	diffID := sha256.Sum256(raw.Bytes())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err = zw.Write(raw.Bytes())
	must(err)
	must(zw.Close())
	return gz.Bytes(), v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(diffID[:])}
}

// pushImage uploads a linux image of the busybox layer to the registry at host and
// returns its reference.
func pushImage(t *testing.T, host, repo, tag string, layer []byte, diffID v1.Hash, entrypoint, cmd []string) string {
	t.Helper()
	return pushLayers(t, host, repo, tag, []testLayer{{layer, diffID}}, entrypoint, cmd)
}

// testLayer is a gzipped layer and its diff id.
type testLayer struct {
	blob   []byte
	diffID v1.Hash
}

// fileLayer is a gzipped layer of regular files (path → content, directories made as
// needed).
func fileLayer(t *testing.T, files map[string]string) testLayer {
	t.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	mtime := time.Unix(0, 0)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	dirs := map[string]bool{}
	for _, name := range names {
		for d := filepath.Dir(name); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	dirList := make([]string, 0, len(dirs))
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList) // parents first
	for _, d := range dirList {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[name])), ModTime: mtime}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	diffID := sha256.Sum256(raw.Bytes())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return testLayer{gz.Bytes(), v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(diffID[:])}}
}

// pushLayers uploads a linux image of the layers (the first one lowest) to the registry
// at host and returns its reference.
func pushLayers(t *testing.T, host, repo, tag string, layers []testLayer, entrypoint, cmd []string) string {
	t.Helper()
	upload := func(b []byte) v1.Descriptor {
		sum := sha256.Sum256(b)
		d := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
		resp, err := http.Post(fmt.Sprintf("http://%s/v2/%s/blobs/uploads/?digest=%s", host, repo, d), "application/octet-stream", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("upload blob %s: %s", d, resp.Status)
		}
		return v1.Descriptor{Digest: d, Size: int64(len(b))}
	}
	var diffIDs []v1.Hash
	var descs []v1.Descriptor
	for _, l := range layers {
		d := upload(l.blob)
		d.MediaType = types.OCILayer
		descs, diffIDs = append(descs, d), append(diffIDs, l.diffID)
	}
	cfg, err := json.Marshal(v1.ConfigFile{Architecture: goruntime.GOARCH, OS: "linux",
		Config: v1.Config{Entrypoint: entrypoint, Cmd: cmd, Env: []string{"PATH=/bin"}},
		RootFS: v1.RootFS{Type: "layers", DiffIDs: diffIDs}})
	if err != nil {
		t.Fatal(err)
	}
	cd := upload(cfg)
	cd.MediaType = types.OCIConfigJSON
	man, err := json.Marshal(v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: cd, Layers: descs})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPut, fmt.Sprintf("http://%s/v2/%s/manifests/%s", host, repo, tag), bytes.NewReader(man))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", string(types.OCIManifestSchema1))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("put manifest %s:%s: %s", repo, tag, resp.Status)
	}
	return host + "/" + repo + ":" + tag
}

// testContainerd is a containerd started for a test.
type testContainerd struct {
	dir string
	rs  runtimeapi.RuntimeServiceClient
	is  runtimeapi.ImageServiceClient
	cl  *containerd.Client
}

// startContainerd runs a node's containerd as kubelab runs it (internal/containerd's
// config), with its directory fresh, its registry the test's (the host of sandboxImage)
// and its CNI config dir empty, so only host-network pods run. When the test ends it
// removes its pods and stops, and what is left in its directory is removed.
func startContainerd(t *testing.T, sandboxImage string) *testContainerd {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "kr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeDir(t, dir) })
	c, err := containerd.New(containerd.Config{Name: filepath.Base(dir), Dir: dir, SandboxImage: sandboxImage,
		RegistryAddr: strings.SplitN(sandboxImage, "/", 2)[0], Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "containerd", time.Minute, c.Run, testutil.Closed(c.Ready()))
	cl, err := containerd.Dial(c.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return &testContainerd{dir: dir, rs: cl.Runtime, is: cl.Image, cl: cl}
}

// removeDir unmounts whatever is still mounted under dir (deepest first) and removes it.
func removeDir(t *testing.T, dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err == nil {
		var mounts []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
				mounts = append(mounts, fields[4])
			}
		}
		f.Close()
		sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
		for _, m := range mounts {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
				t.Logf("cleanup: unmount %s: %v", m, err)
			}
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Logf("cleanup: %v", err)
	}
}

// removeCgroupTree removes the cgroup directory rel (relative to each hierarchy's root)
// and the directories under it, deepest first, in every hierarchy.
func removeCgroupTree(t *testing.T, rel string) {
	roots, err := cgroupRoots()
	if err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	for _, root := range roots {
		top := filepath.Join(root, rel)
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Logf("cleanup: remove cgroup %s: %v", d, err)
			}
		}
	}
}

// syncUntil calls SyncPod, as the kubelet would on every sync, until done accepts the
// status (or the time is up).
func syncUntil(t *testing.T, r *Runtime, pod *corev1.Pod, vols kubelet.PodVolumes, what string, done func(kubelet.PodStatus) bool) kubelet.PodStatus {
	t.Helper()
	var last kubelet.PodStatus
	testutil.EventuallyWithin(t, 30*time.Second, what, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var err error
		last, err = r.SyncPod(ctx, pod, vols)
		if done(last) {
			return nil
		}
		return fmt.Errorf("last status %+v, err %v", last, err)
	})
	return last
}

func find(st kubelet.PodStatus, name string) (kubelet.ContainerState, bool) {
	for _, c := range st.Containers {
		if c.Name == name {
			return c, true
		}
	}
	return kubelet.ContainerState{}, false
}

func TestContainerdPods(t *testing.T) {
	testutil.RequireRoot(t, "containerd", "containerd-shim-runc-v2", "runc")
	layer, diffID := busyboxLayer(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	busybox := pushImage(t, host, "test/busybox", "v1", layer, diffID, nil, []string{"sh"})
	pause := pushImage(t, host, "test/pause", "v1", layer, diffID, []string{"/bin/sleep", "3600"}, nil)

	id := unique(t)
	cgroupParent := "/kubelab-test-" + id
	t.Cleanup(func() { removeCgroupTree(t, cgroupParent) }) // after containerd stopped
	cd := startContainerd(t, pause)
	root := filepath.Join(cd.dir, "kubelet")
	recorder := record.NewFakeRecorder(1000)
	r, err := New(Config{NodeName: "kr-" + id, RootDir: root, CgroupParent: cgroupParent, Recorder: recorder,
		RestartBackOff: 2 * time.Second, MaxRestartBackOff: 4 * time.Second, ImagePullBackOff: time.Minute,
		Objects: &fakeObjects{
			cms:     map[string]*corev1.ConfigMap{"default/cfg": {Data: map[string]string{"data-1": "value-1", "DUP": "from-configmap"}}},
			secrets: map[string]*corev1.Secret{"default/creds": {Data: map[string][]byte{"data-2": []byte("value-2")}}}},
		RuntimeClasses: fakeRuntimeClasses{"runc": "runc", "unconfigured": "kr-" + id + "-handler"},
		ImageVolumes:   cd.cl.ImageVolumes(),
		Logger:         slog.New(slog.NewTextHandler(tWriter{t}, nil))}, cd.rs, cd.is)
	if err != nil {
		t.Fatal(err)
	}
	newPod := func(name string, policy corev1.RestartPolicy) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID(name + "-" + id)},
			Spec:       corev1.PodSpec{HostNetwork: true, RestartPolicy: policy, NodeName: "kr-" + id},
		}
	}
	ctr := func(name, script string) corev1.Container {
		return corev1.Container{Name: name, Image: busybox, Command: []string{"sh", "-c", script},
			ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePath: "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile}
	}
	ctx := context.Background()

	// An init container writes into a volume, the app container reads it and keeps running.
	data := filepath.Join(cd.dir, "data")
	if err := os.Mkdir(data, 0o777); err != nil {
		t.Fatal(err)
	}
	web := newPod("web", corev1.RestartPolicyAlways)
	web.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	init := ctr("write", "echo hello from init > /data/msg")
	init.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	web.Spec.HostAliases = []corev1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}}
	app := ctr("read", "cat /data/msg; echo pod $(POD_NAME); cat /etc/hosts; exec sleep 3600")
	app.Env = []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	app.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true}}
	app.Resources = res("20m", "30m", "35Mi", "64Mi")
	// envFrom's variables reach the process with their names as the keys are, "-" and all
	// (env runs directly: Debian's busybox sh, the test image's, drops variables whose
	// names are not shell identifiers from the environment of what it runs).
	envs := corev1.Container{Name: "env", Image: busybox, Command: []string{"env"}, ImagePullPolicy: corev1.PullIfNotPresent,
		EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
			{Prefix: "p-", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}},
		},
		Env: []corev1.EnvVar{{Name: "DUP", Value: "from-env"}}}
	web.Spec.InitContainers, web.Spec.Containers = []corev1.Container{init, envs}, []corev1.Container{app}
	// Its RuntimeClass's handler is runc, which the node's containerd runs.
	runcClass := "runc"
	web.Spec.RuntimeClassName = &runcClass
	vols := kubelet.PodVolumes{"data": data}
	st := syncUntil(t, r, web, vols, "web running", func(st kubelet.PodStatus) bool {
		c, ok := find(st, "read")
		return ok && !c.Waiting && !c.Terminated
	})
	if w, _ := find(st, "write"); !w.Terminated || w.ExitCode != 0 || w.Reason != "Completed" || w.FinishedAt.IsZero() {
		t.Errorf("init container = %+v", w)
	}
	rd, _ := find(st, "read")
	if !strings.HasPrefix(rd.ContainerID, "containerd://") || !strings.Contains(rd.ImageID, "@sha256:") || rd.StartedAt.IsZero() ||
		rd.RestartCount != 0 || rd.Image != busybox {
		t.Errorf("app container = %+v", rd)
	}
	if st.IP != "" || st.SandboxID == "" {
		t.Errorf("host-network pod: sandbox %q ip %q", st.SandboxID, st.IP)
	}
	envLog := filepath.Join(r.cfg.PodLogsDir, "default_web_"+string(web.UID), "env", "0.log")
	testutil.EventuallyWithin(t, 10*time.Second, "envFrom's variables in "+envLog, func() error {
		b, _ := os.ReadFile(envLog)
		for _, want := range []string{"data-1=value-1", "p-data-1=value-1", "data-2=value-2", "DUP=from-env", "p-DUP=from-configmap"} {
			if !strings.Contains(string(b), "stdout F "+want+"\n") {
				return fmt.Errorf("no %q in the env container's log:\n%s", want, b)
			}
		}
		return nil
	})
	logPath := filepath.Join(r.cfg.PodLogsDir, "default_web_"+string(web.UID), "read", "0.log")
	testutil.EventuallyWithin(t, 10*time.Second, "the containers' lines in "+logPath, func() error {
		b, _ := os.ReadFile(logPath)
		// The kubelet's hosts file of a host-network pod: the node's with the pod's hostAliases.
		if strings.Contains(string(b), "stdout F hello from init") && strings.Contains(string(b), "stdout F pod web") &&
			strings.Contains(string(b), "stdout F # Kubernetes-managed hosts file (host network).\n") &&
			strings.Contains(string(b), "stdout F 123.45.67.89\tfoo\tbar\n") {
			return nil
		}
		return fmt.Errorf("log = %q", b)
	})

	// Resized in place: the running container's cgroup takes the new cpu and memory
	// limits, and it is not restarted.
	before := cgroupLimits(t, cgroupParent, web.UID, strings.TrimPrefix(rd.ContainerID, "containerd://"))
	if before != "cpu 3000/100000 memory 67108864" {
		t.Errorf("cgroup before the resize: %s", before)
	}
	web.Spec.Containers[0].Resources = res("25m", "50m", "40Mi", "128Mi")
	st = syncUntil(t, r, web, vols, "the app container resized", func(st kubelet.PodStatus) bool {
		c, _ := find(st, "read")
		return c.Actuated != nil && c.Actuated.Limits.Memory().String() == "128Mi"
	})
	resized, _ := find(st, "read")
	if resized.ContainerID != rd.ContainerID || resized.RestartCount != 0 || resized.Resources == nil ||
		resized.Resources.CPULimit.String() != "50m" || resized.Resources.MemoryLimit.String() != "128Mi" || resized.Resources.CPURequest.String() != "25m" {
		t.Errorf("resized container %s (was %s), restarts %d, resources %+v", resized.ContainerID, rd.ContainerID, resized.RestartCount, resized.Resources)
	}
	if after := cgroupLimits(t, cgroupParent, web.UID, strings.TrimPrefix(rd.ContainerID, "containerd://")); after != "cpu 5000/100000 memory 134217728" {
		t.Errorf("cgroup after the resize: %s", after)
	}

	// An ephemeral container with a terminal, targeting the app container: in the app's
	// process namespace, its PID 1 is the app's sleep.
	web.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: "debugger", Image: busybox, Command: []string{"sh", "-c", "cat /proc/1/cmdline; echo; echo polo; exec sleep 3600"},
		ImagePullPolicy: corev1.PullIfNotPresent, Stdin: true, TTY: true}, TargetContainerName: "read"}}
	syncUntil(t, r, web, vols, "the ephemeral container running", func(st kubelet.PodStatus) bool {
		c, ok := find(st, "debugger")
		return ok && !c.Waiting && !c.Terminated
	})
	debugLog := filepath.Join(r.cfg.PodLogsDir, "default_web_"+string(web.UID), "debugger", "0.log")
	testutil.EventuallyWithin(t, 10*time.Second, "the ephemeral container's lines in "+debugLog, func() error {
		b, _ := os.ReadFile(debugLog)
		if strings.Contains(string(b), "sleep\x003600") && strings.Contains(string(b), "polo") {
			return nil
		}
		return fmt.Errorf("log = %q", b)
	})

	// A container that keeps failing is restarted, then backs off.
	crash := newPod("crash", corev1.RestartPolicyAlways)
	crash.Spec.Containers = []corev1.Container{ctr("crash", "echo crashing; exit 1")}
	st = syncUntil(t, r, crash, nil, "crash loop", func(st kubelet.PodStatus) bool {
		c, _ := find(st, "crash")
		return c.Waiting && c.Reason == "CrashLoopBackOff"
	})
	c, _ := find(st, "crash")
	wantMsg := fmt.Sprintf("back-off 2s restarting failed container=crash pod=crash_default(%s)", crash.UID)
	if c.RestartCount != 1 || c.Message != wantMsg || c.LastTerminated == nil || c.LastTerminated.ExitCode != 1 || c.LastTerminated.Reason != "Error" {
		t.Errorf("crash-looping container = %+v, last %+v", c, c.LastTerminated)
	}
	syncUntil(t, r, crash, nil, "restart after the back-off", func(st kubelet.PodStatus) bool {
		c, _ := find(st, "crash")
		return c.RestartCount == 2
	})

	// Image volumes: an image of two layers (the upper replacing a file of the lower)
	// mounted whole, and the busybox image's bin directory through a subPath; both
	// read-only. A subPath the image lacks keeps only its container from starting.
	dataImage := pushLayers(t, host, "test/data", "v1", []testLayer{
		fileLayer(t, map[string]string{"data.json": `{"picture": "kitten.jpg"}` + "\n", "etc/os-release": "NAME=lower\n"}),
		fileLayer(t, map[string]string{"etc/os-release": "NAME=\"Upper Linux\"\n"}),
	}, nil, nil)
	imagevol := newPod("imagevol", corev1.RestartPolicyAlways)
	imagevol.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: dataImage, PullPolicy: corev1.PullAlways}}},
		{Name: "tools", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: busybox}}},
	}
	reader := ctr("reader", "cat /data/data.json /data/etc/os-release; ls /tools; echo x > /data/x; exec sleep 3600")
	reader.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "tools", MountPath: "/tools", SubPath: "bin"}}
	nosub := ctr("nosub", "exec sleep 3600")
	nosub.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: "missing"}}
	imagevol.Spec.Containers = []corev1.Container{reader, nosub}
	st = syncUntil(t, r, imagevol, nil, "the image volumes' reader running", func(st kubelet.PodStatus) bool {
		c, ok := find(st, "reader")
		return ok && !c.Waiting && !c.Terminated
	})
	if c, _ := find(st, "nosub"); !c.Waiting || c.Reason != "CreateContainerError" || !strings.HasPrefix(c.Message, "ImageVolumeMountFailed: ") ||
		!strings.Contains(c.Message, "does not exist in the image") {
		t.Errorf("container with a subPath the image lacks = %+v", c)
	}
	readerLog := filepath.Join(r.cfg.PodLogsDir, "default_imagevol_"+string(imagevol.UID), "reader", "0.log")
	testutil.EventuallyWithin(t, 10*time.Second, "the image volumes' files in "+readerLog, func() error {
		b, _ := os.ReadFile(readerLog)
		for _, want := range []string{`stdout F {"picture": "kitten.jpg"}`, `stdout F NAME="Upper Linux"`, "stdout F busybox\n",
			"Read-only file system"} {
			if !strings.Contains(string(b), want) {
				return fmt.Errorf("no %q in %q", want, b)
			}
		}
		return nil
	})
	imageVolDir := filepath.Join(root, "pods", string(imagevol.UID), "volumes", "kubernetes.io~image")
	if mounts := mountsUnder(t, imageVolDir); len(mounts) != 2 {
		t.Errorf("mounts under %s = %v, want the two volumes'", imageVolDir, mounts)
	}
	if views := imageViews(t, cd, imagevol.UID); len(views) != 2 {
		t.Errorf("image volume snapshots = %v, want two", views)
	}

	// An image that does not exist.
	missing := newPod("missing", corev1.RestartPolicyAlways)
	missing.Spec.Containers = []corev1.Container{ctr("app", "true")}
	missing.Spec.Containers[0].Image = host + "/test/missing:v1"
	st, err = r.SyncPod(ctx, missing, nil)
	if m, _ := find(st, "app"); !errors.Is(err, ErrImagePull) || !m.Waiting || m.Reason != "ErrImagePull" || !strings.Contains(m.Message, "not found") {
		t.Errorf("missing image: %+v, %v", m, err)
	}
	st, err = r.SyncPod(ctx, missing, nil)
	if m, _ := find(st, "app"); !errors.Is(err, ErrImagePullBackOff) || m.Reason != "ImagePullBackOff" ||
		!strings.HasPrefix(m.Message, fmt.Sprintf("Back-off pulling image %q: ErrImagePull: ", missing.Spec.Containers[0].Image)) {
		t.Errorf("missing image, again: %+v, %v", m, err)
	}

	// A RuntimeClass whose handler the node's containerd does not have: no sandbox.
	unconfigured := newPod("unconfigured", corev1.RestartPolicyAlways)
	unconfigured.Spec.Containers = []corev1.Container{ctr("app", "true")}
	unconfiguredClass := "unconfigured"
	unconfigured.Spec.RuntimeClassName = &unconfiguredClass
	st, err = r.SyncPod(ctx, unconfigured, nil)
	if handler := "kr-" + id + "-handler"; !errors.Is(err, ErrCreatePodSandbox) || !strings.Contains(err.Error(), handler) || st.SandboxID != "" {
		t.Errorf("pod of an unconfigured handler: sandbox %q, err %v, want one naming %s", st.SandboxID, err, handler)
	}

	fp, err := r.Relist(ctx)
	if err != nil || fp[web.UID] == "" || fp[crash.UID] == "" || fp[missing.UID] == "" {
		t.Errorf("relist = %v, %v", fp, err)
	}
	if err := r.Ready(ctx); err == nil || !strings.Contains(err.Error(), "NetworkReady=false") {
		t.Errorf("ready without a CNI config: %v", err)
	}

	// KillPod leaves nothing behind.
	killed, err := r.KillPod(ctx, web, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rd, _ := find(killed, "read"); !rd.Terminated || rd.ExitCode != 137 {
		t.Errorf("killed app container = %+v", rd)
	}
	for _, p := range []*corev1.Pod{crash, {ObjectMeta: metav1.ObjectMeta{UID: missing.UID}}, {ObjectMeta: metav1.ObjectMeta{UID: imagevol.UID}}} {
		if _, err := r.KillPod(ctx, p, 0); err != nil {
			t.Fatal(err)
		}
	}
	// The image volumes are unmounted, their directory and snapshots gone.
	if mounts := mountsUnder(t, filepath.Join(root, "pods", string(imagevol.UID))); len(mounts) != 0 {
		t.Errorf("mounts left after KillPod: %v", mounts)
	}
	if _, err := os.Stat(imageVolDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("image volume dir left: %v", err)
	}
	if views := imageViews(t, cd, imagevol.UID); len(views) != 0 {
		t.Errorf("image volume snapshots left: %v", views)
	}
	sbs, err := cd.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(sbs.GetItems()) != 0 {
		t.Errorf("sandboxes left: %v, %v", sbs.GetItems(), err)
	}
	cs, err := cd.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(cs.GetContainers()) != 0 {
		t.Errorf("containers left: %v, %v", cs.GetContainers(), err)
	}
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory", cgroupParent, "pod"+string(web.UID))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod cgroup left: %v", err)
	}
	events := strings.Join(drain(recorder), "\n")
	for _, want := range []string{"Normal Pulling Pulling image", "Normal Created Created container: write",
		fmt.Sprintf("Normal Pulling Pulling image %q", dataImage), fmt.Sprintf("Normal Pulled Container image %q already present on machine", busybox),
		"Warning Failed Error: ImageVolumeMountFailed: ",
		"Normal Started Started container read", "Warning BackOff Back-off restarting failed container crash in pod crash_default",
		"Warning Failed Failed to pull image", "Normal Killing Stopping container read",
		"Warning FailedCreatePodSandBox Failed to create pod sandbox: "} {
		if !strings.Contains(events, want) {
			t.Errorf("no event %q in:\n%s", want, events)
		}
	}
}

// mountsUnder lists the mount points at or under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, m.Mountpoint)
	}
	return out
}

// imageViews lists the names of the snapshots (of every kind, in the CRI's namespace)
// labelled as image volumes of pod uid.
func imageViews(t *testing.T, cd *testContainerd, uid k8stypes.UID) []string {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "containerd-namespace", "k8s.io")
	stream, err := cd.cl.Snapshots.List(ctx, &snapshotsapi.ListSnapshotsRequest{Snapshotter: "overlayfs"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range resp.GetInfo() {
			if info.GetLabels()[containerd.LabelImageVolumePod] == string(uid) {
				out = append(out, info.GetName())
			}
		}
	}
}

// cgroupLimits reads a container's cpu quota and period and memory limit from its cgroup
// (cgroup v2's cpu.max and memory.max, or v1's cpu.cfs_quota_us, cpu.cfs_period_us and
// memory.limit_in_bytes) as "cpu <quota>/<period> memory <bytes>".
func cgroupLimits(t *testing.T, parent string, uid k8stypes.UID, id string) string {
	t.Helper()
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read cgroup: %v", err)
		}
		return strings.TrimSpace(string(b))
	}
	dir := filepath.Join(parent, "pod"+string(uid), id)
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		quota, period, _ := strings.Cut(read(filepath.Join("/sys/fs/cgroup", dir, "cpu.max")), " ")
		return fmt.Sprintf("cpu %s/%s memory %s", quota, period, read(filepath.Join("/sys/fs/cgroup", dir, "memory.max")))
	}
	return fmt.Sprintf("cpu %s/%s memory %s", read(filepath.Join("/sys/fs/cgroup/cpu", dir, "cpu.cfs_quota_us")),
		read(filepath.Join("/sys/fs/cgroup/cpu", dir, "cpu.cfs_period_us")), read(filepath.Join("/sys/fs/cgroup/memory", dir, "memory.limit_in_bytes")))
}

func drain(r *record.FakeRecorder) []string {
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
