package apiserver_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// recorder keeps the informer events it sees, in order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) handler(kind string) cache.ResourceEventHandlerFuncs {
	name := func(obj interface{}) string {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			return d.Key
		}
		key, _ := cache.MetaNamespaceKeyFunc(obj)
		return key
	}
	add := func(verb string, obj interface{}) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, fmt.Sprintf("%s %s %s", verb, kind, name(obj)))
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { add("add", obj) },
		UpdateFunc: func(old, obj interface{}) {
			if old.(metav1.Object).GetResourceVersion() != obj.(metav1.Object).GetResourceVersion() {
				add("update", obj)
			}
		},
		DeleteFunc: func(obj interface{}) { add("delete", obj) },
	}
}

// has reports whether the recorded events contain want in order, kind by kind (each
// informer has its own stream; across kinds there is no order).
func (r *recorder) has(want []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	kindOf := func(e string) string { return strings.Fields(e)[1] }
	for _, kind := range []string{"pod", "pvc", "pv", "va"} {
		i := 0
		var wantKind []string
		for _, w := range want {
			if kindOf(w) == kind {
				wantKind = append(wantKind, w)
			}
		}
		for _, e := range r.events {
			if i < len(wantKind) && e == wantKind[i] {
				i++
			}
		}
		if i != len(wantKind) {
			return false
		}
	}
	return true
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.events)
}

// TestInformersSeeEverythingInOrderAndResume runs client-go informers with protobuf and
// WatchList (as client-go's typed clients and the CSI sidecars do) and checks that they
// see each add, update and delete in order, and keep going across an API server restart.
func TestInformersSeeEverythingInOrderAndResume(t *testing.T) {
	t.Setenv("KUBE_FEATURE_WatchListClient", "true")
	s := apiservertest.Start(t, apiservertest.Options{})
	cfg := *s.Config
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	client := kubernetes.NewForConfigOrDie(&cfg)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{}
	factory := informers.NewSharedInformerFactory(client, 0)
	for kind, inf := range map[string]cache.SharedIndexInformer{
		"pod": factory.Core().V1().Pods().Informer(), "pvc": factory.Core().V1().PersistentVolumeClaims().Informer(),
		"pv": factory.Core().V1().PersistentVolumes().Informer(), "va": factory.Storage().V1().VolumeAttachments().Informer(),
	} {
		if _, err := inf.AddEventHandler(rec.handler(kind)); err != nil {
			t.Fatal(err)
		}
	}
	// One object exists before the informers start: it arrives through the initial events.
	if _, err := client.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim("early", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}

	flow := func(suffix string) []string {
		pods, pvcs := client.CoreV1().Pods("default"), client.CoreV1().PersistentVolumeClaims("default")
		pvName, vaName := "pv-"+suffix, "va-"+suffix
		must(t, func() error {
			_, err := pvcs.Create(ctx, claim("data-"+suffix, "1Gi"), metav1.CreateOptions{})
			return err
		})
		must(t, func() error { _, err := pods.Create(ctx, pod("app-"+suffix), metav1.CreateOptions{}); return err })
		must(t, func() error {
			_, err := client.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: pvName},
				Spec: corev1.PersistentVolumeSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
						Driver: "ebs.csi.aws.com", VolumeHandle: "vol-" + suffix}},
				},
			}, metav1.CreateOptions{})
			return err
		})
		must(t, func() error {
			_, err := client.StorageV1().VolumeAttachments().Create(ctx, &storagev1.VolumeAttachment{
				ObjectMeta: metav1.ObjectMeta{Name: vaName},
				Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: "node-a",
					Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pvName)}},
			}, metav1.CreateOptions{})
			return err
		})
		must(t, func() error {
			va, err := client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			va.Status.Attached = true
			va.Status.AttachmentMetadata = map[string]string{"devicePath": "/dev/xvdba"}
			_, err = client.StorageV1().VolumeAttachments().UpdateStatus(ctx, va, metav1.UpdateOptions{})
			return err
		})
		must(t, func() error {
			_, err := pods.Patch(ctx, "app-"+suffix, "application/merge-patch+json", []byte(`{"metadata":{"labels":{"seen":"yes"}}}`), metav1.PatchOptions{})
			return err
		})
		must(t, func() error {
			return client.StorageV1().VolumeAttachments().Delete(ctx, vaName, metav1.DeleteOptions{})
		})
		must(t, func() error { return pods.Delete(ctx, "app-"+suffix, metav1.DeleteOptions{}) })
		return []string{"add pvc default/data-" + suffix, "add pod default/app-" + suffix, "add pv " + pvName, "add va " + vaName,
			"update va " + vaName, "update pod default/app-" + suffix, "delete va " + vaName, "delete pod default/app-" + suffix}
	}

	want := append([]string{"add pvc default/early"}, flow("one")...)
	testutil.EventuallyWithin(t, waitTimeout, "informer events "+fmt.Sprint(want), func() bool { return rec.has(want) })

	// Restart the API server (same port, same etcd): the informers reconnect and resume.
	// What changes while an informer is away it learns by relisting, as a state rather than
	// as events, so the test waits until each informer is back (a fresh object of each kind
	// reaches it) and then requires every event of a second flow.
	s.Stop()
	apiservertest.Start(t, s.Options)
	sendProbe := func(n string) {
		must(t, func() error {
			_, err := client.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim(n, "1Gi"), metav1.CreateOptions{})
			return err
		})
		must(t, func() error {
			_, err := client.CoreV1().Pods("default").Create(ctx, pod(n), metav1.CreateOptions{})
			return err
		})
		must(t, func() error {
			_, err := client.StorageV1().VolumeAttachments().Create(ctx, &storagev1.VolumeAttachment{
				ObjectMeta: metav1.ObjectMeta{Name: n},
				Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: "node-a",
					Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(n)}},
			}, metav1.CreateOptions{})
			return err
		})
	}
	var probe string
	var sent time.Time
	probes := 0
	testutil.EventuallyWithin(t, time.Minute, "the informers back after the restart", func() error {
		if probe != "" && rec.has([]string{"add pvc default/" + probe, "add pod default/" + probe, "add va " + probe}) {
			return nil
		}
		if time.Since(sent) >= time.Second { // a fresh probe each second
			probe, sent = fmt.Sprint("probe-", probes), time.Now()
			probes++
			sendProbe(probe)
		}
		return fmt.Errorf("%s not seen yet: %s", probe, rec)
	})
	want = append(want, flow("two")...)
	testutil.EventuallyWithin(t, waitTimeout, "informer events after restart", func() error {
		if !rec.has(want) {
			return fmt.Errorf("events: %s", rec)
		}
		return nil
	})
	if t.Failed() {
		t.Logf("events: %s", rec)
	}
	t.Logf("events: %s", rec)
}

// must retries f until it succeeds: the API server may be restarting.
func must(t *testing.T, f func() error) {
	t.Helper()
	testutil.EventuallyWithin(t, 10*time.Second, "the API server to take the request", f)
}

// TestObjectsSurviveRestart: objects and their resourceVersions come back after a restart,
// with the embedded etcd and with an external one.
func TestObjectsSurviveRestart(t *testing.T) {
	check := func(t *testing.T, opts apiservertest.Options, restart func(*apiservertest.Server) *apiservertest.Server) {
		s := apiservertest.Start(t, opts)
		ctx := context.Background()
		created, err := s.Client.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim("keep", "2Gi"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s2 := restart(s)
		got, err := s2.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "keep", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != created.ResourceVersion || got.UID != created.UID {
			t.Errorf("after restart rv %s uid %s, want %s %s", got.ResourceVersion, got.UID, created.ResourceVersion, created.UID)
		}
		list, err := s2.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 4 {
			t.Errorf("namespaces after restart: %v %d", err, len(list.Items))
		}
	}
	t.Run("embedded etcd", func(t *testing.T) {
		check(t, apiservertest.Options{}, func(s *apiservertest.Server) *apiservertest.Server {
			s.Stop()
			return apiservertest.Start(t, s.Options)
		})
	})
	t.Run("external etcd", func(t *testing.T) {
		endpoint := startExternalEtcd(t)
		check(t, apiservertest.Options{EtcdServers: []string{endpoint}}, func(s *apiservertest.Server) *apiservertest.Server {
			s.Stop()
			return apiservertest.Start(t, s.Options)
		})
	})
}

// startExternalEtcd runs Debian's etcd (etcd-server) for the test, on free loopback ports.
func startExternalEtcd(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd (Debian's etcd-server) is not installed; hack/setup.sh --test installs it")
	}
	dir := t.TempDir()
	client := fmt.Sprintf("http://127.0.0.1:%d", apiservertest.FreePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", apiservertest.FreePort(t))
	cmd := exec.Command(bin, "--name", "external", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "external="+peer)
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	return client
}
