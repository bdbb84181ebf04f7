package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

func TestLeaseName(t *testing.T) {
	for in, want := range map[string]string{"ebs.csi.aws.com": "ebs-csi-aws-com", "a/b_c": "a-b-c", "x.": "x-X"} {
		if got := leaseName(in); got != want {
			t.Errorf("leaseName(%q) = %q, want %q", in, got, want)
		}
	}
}

// command is one `kubelab …` run in this process until the test ends or stop: unlike
// testutil.Start, a test may stop it midway (the leading attacher) and read what it
// returned.
type command struct {
	out  syncBuffer
	stop context.CancelFunc
	done chan error
}

func startCommand(t *testing.T, args ...string) *command {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &command{stop: cancel, done: make(chan error, 1)}
	go func() { c.done <- Run(ctx, args, &c.out, &c.out) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			t.Errorf("kubelab %s did not stop within 30s", args[0])
		}
	})
	return c
}

// TestCSIAttacherLeaderElection runs the ebs.csi.aws.com controller (`kubelab csi-driver`
// on a hollow `kubelab cloud`) and two `kubelab csi-attacher --leader-election` on it: one
// holds the Lease external-attacher-leader-ebs-csi-aws-com and handles VolumeAttachments
// (the cloud's refusal lands in status.attachError); when it stops, the other takes the
// Lease over and handles the next one.
func TestCSIAttacherLeaderElection(t *testing.T) {
	api := apiservertest.Start(t, apiservertest.Options{})
	dir := t.TempDir()
	cloudDir := filepath.Join(dir, "cloud")
	cloud := startCommand(t, "cloud", "--hollow", "--data-dir", cloudDir)
	testutil.EventuallyWithin(t, time.Minute, "the cloud's credentials", func() bool { return strings.Contains(cloud.out.String(), "credentials:") })
	sock := filepath.Join(dir, "csi.sock")
	startCommand(t, "csi-driver", "--mode", "controller", "--endpoint", "unix://"+sock, "--cloud-dir", cloudDir)
	testutil.EventuallyWithin(t, time.Minute, "the driver's socket", func() bool { _, err := os.Stat(sock); return err == nil })

	attacher := func() *command {
		return startCommand(t, "csi-attacher", "--kubeconfig", api.Kubeconfig, "--csi-address", sock, "--leader-election")
	}
	a, b := attacher(), attacher()
	const lease = "external-attacher-leader-ebs-csi-aws-com"
	ctx := context.Background()
	holder := func() string {
		l, err := api.Client.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	leading := func(c *command) bool { return strings.Contains(c.out.String(), `] "leading"`) }
	testutil.EventuallyWithin(t, time.Minute, "an attacher to lead", func() bool { return leading(a) || leading(b) })
	leader, standby := a, b
	if leading(b) {
		leader, standby = b, a
	}
	first := holder()
	if first == "" || !strings.Contains(leader.out.String(), first) || leading(standby) {
		t.Fatalf("want the one leading attacher to hold Lease kube-system/%s (holder %q); logs:\n%s\n---\n%s", lease, first, a.out.String(), b.out.String())
	}

	if _, err := api.Client.StorageV1().CSINodes().Create(ctx, &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: "ebs.csi.aws.com", NodeID: "i-0123456789abcdef0"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	attachFails := func(name string) {
		t.Helper()
		volume := "vol-0" + fmt.Sprintf("%016x", time.Now().UnixNano())
		if _, err := api.Client.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: volume}},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := api.Client.StorageV1().VolumeAttachments().Create(ctx, &storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: "n1",
				Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &name}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testutil.EventuallyWithin(t, time.Minute, "VolumeAttachment "+name+" to carry the cloud's error", func() (bool, error) {
			va, err := api.Client.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			e := va.Status.AttachError
			return e != nil && strings.Contains(e.Message, volume), fmt.Errorf("status %+v", va.Status)
		})
	}
	attachFails("va-first")
	if !strings.Contains(leader.out.String(), "va-first") || strings.Contains(standby.out.String(), "va-first") {
		t.Errorf("va-first was not handled by the leader alone; leader's log:\n%s\nstandby's log:\n%s", leader.out.String(), standby.out.String())
	}

	leader.stop()
	select {
	case err := <-leader.done:
		leader.done <- err
		if err != nil {
			t.Errorf("the stopped attacher returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the leading attacher did not stop")
	}
	testutil.EventuallyWithin(t, time.Minute, "the standby attacher to take the Lease over", func() bool {
		h := holder()
		return h != "" && h != first && strings.Contains(standby.out.String(), `] "leading"`)
	})
	attachFails("va-second")
}
