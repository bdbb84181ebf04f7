package apiserver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestEtcdOutOfSpace: when the filesystem of the embedded etcd fills up, writes answer a
// 500 Status that says so, reads keep working, and writes work again once space is back.
func TestEtcdOutOfSpace(t *testing.T) {
	testutil.RequireRoot(t)
	fs := t.TempDir()
	if err := unix.Mount("kubelab-apiserver-test", fs, "tmpfs", 0, "size=320m,mode=0755"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", fs, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(fs, 0); err != nil {
			t.Errorf("unmount %s: %v", fs, err)
		}
	})
	s := apiservertest.Start(t, apiservertest.Options{DataDir: fs})
	ctx := context.Background()
	cms := s.Client.CoreV1().ConfigMaps("default")
	create := func(name string) error {
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	}
	if err := create("before"); err != nil {
		t.Fatalf("create with space: %v", err)
	}

	// Leave 64 MiB: less than the 128 MiB the embedded etcd keeps free by default.
	var st unix.Statfs_t
	if err := unix.Statfs(fs, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(fs, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, int64(st.Bavail*uint64(st.Bsize))-64<<20); err != nil {
		t.Fatalf("fill %s: %v", fs, err)
	}
	f.Close()

	var werr error
	i := 0
	testutil.EventuallyWithin(t, 10*time.Second, "creates to fail on the full filesystem", func() bool {
		werr = create(fmt.Sprintf("during-%d", i))
		i++
		return werr != nil
	})
	status, ok := werr.(apierrors.APIStatus)
	if !ok || status.Status().Code != 500 || !strings.Contains(status.Status().Message, "database space exceeded") {
		t.Fatalf("create on a full filesystem: %v (%#v), want a 500 Status saying the space is exceeded", werr, werr)
	}
	t.Logf("create on a full filesystem: %d %s", status.Status().Code, status.Status().Message)
	if _, err := cms.Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Fatalf("get on a full filesystem: %v", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 10*time.Second, "creates to work once space came back", func() error { return create("after") })
}
