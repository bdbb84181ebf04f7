package cluster

import (
	"context"
	"maps"
	"slices"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// TestEnsureAddonsStorageClasses: a cluster starts with gp2 (the one default), gp3 and
// standard, all ebs.csi.aws.com and WaitForFirstConsumer, standard and gp3 making gp3
// volumes. On a data dir whose gp2 the user changed and which has no gp3 or standard
// yet (an earlier kubelab's), the new classes are made and gp2 stays as the user left it.
func TestEnsureAddonsStorageClasses(t *testing.T) {
	ctx := context.Background()
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	changed := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp2",
		Annotations: map[string]string{AnnDefaultStorageClass: "false"}},
		Provisioner: DriverName, VolumeBindingMode: &wffc}
	client := fake.NewClientset(changed)
	if err := ensureAddons(ctx, client); err != nil {
		t.Fatal(err)
	}
	list, err := client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]storagev1.StorageClass{}
	for _, sc := range list.Items {
		got[sc.Name] = sc
	}
	if len(got) != 3 {
		t.Fatalf("classes %v, want gp2, gp3 and standard", slices.Sorted(maps.Keys(got)))
	}
	if a := got["gp2"].Annotations[AnnDefaultStorageClass]; a != "false" {
		t.Errorf("gp2's default annotation %q after ensureAddons, want the user's %q", a, "false")
	}
	for _, name := range []string{"gp3", "standard"} {
		sc := got[name]
		if sc.Provisioner != DriverName || ptr.Deref(sc.VolumeBindingMode, "") != wffc || sc.Parameters["type"] != "gp3" ||
			!ptr.Deref(sc.AllowVolumeExpansion, false) || sc.Annotations[AnnDefaultStorageClass] != "" {
			t.Errorf("class %s = %s %v %v expansion %v annotations %v, want %s WaitForFirstConsumer type gp3, expandable, not default",
				name, sc.Provisioner, ptr.Deref(sc.VolumeBindingMode, ""), sc.Parameters, ptr.Deref(sc.AllowVolumeExpansion, false), sc.Annotations, DriverName)
		}
	}

	// A new cluster: gp2 is the only default.
	fresh := fake.NewClientset()
	if err := ensureAddons(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	list, err = fresh.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var defaults []string
	for _, sc := range list.Items {
		if sc.Annotations[AnnDefaultStorageClass] == "true" {
			defaults = append(defaults, sc.Name)
		}
	}
	if len(list.Items) != 3 || len(defaults) != 1 || defaults[0] != DefaultStorageClass {
		t.Errorf("a new cluster's classes: %d, defaults %v; want 3, gp2 the only default", len(list.Items), defaults)
	}
}

// TestEnsureAddonsIngressClass: a cluster starts with the IngressClass alb of the
// controller ingress.k8s.aws/alb, which the cloud-controller-manager serves.
func TestEnsureAddonsIngressClass(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	if err := ensureAddons(ctx, client); err != nil {
		t.Fatal(err)
	}
	ic, err := client.NetworkingV1().IngressClasses().Get(ctx, "alb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ic.Spec.Controller != "ingress.k8s.aws/alb" {
		t.Errorf("IngressClass alb's controller %q", ic.Spec.Controller)
	}
}
