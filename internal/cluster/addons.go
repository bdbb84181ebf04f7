package cluster

import (
	"context"
	"fmt"
	"maps"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/csi/driver"
	"github.com/kubelab/kubelab/internal/storageclass"
)

// DefaultStorageClass is the cluster's default class: gp2 (ebs.csi.aws.com,
// WaitForFirstConsumer), marked as the default as on EKS.
const DefaultStorageClass = "gp2"

// AnnDefaultStorageClass marks the default StorageClass: claims that name no class get it.
const AnnDefaultStorageClass = storageclass.AnnDefault

// addons are the objects an EKS cluster with the EBS CSI driver add-on starts with: the
// CSIDriver (attach required, fsGroup applied by the kubelet) and the storage classes. The
// add-ons' service accounts and roles are addonRBAC's.
func addons() (*storagev1.CSIDriver, []*storagev1.StorageClass) {
	drv := &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: DriverName},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(false),
			FSGroupPolicy: ptr.To(storagev1.FileFSGroupPolicy),
		},
	}
	return drv, storageClasses()
}

// storageClasses are the classes the cluster starts with, all of the EBS CSI driver and
// WaitForFirstConsumer (a volume is made once a pod that uses the claim is scheduled, in
// that pod's zone):
//   - gp2, the default, as on EKS; it names no parameters, so its volumes are of the
//     driver's default type (gp3).
//   - gp3, the general purpose type by name, expandable.
//   - standard, the class that manifests written for kind, minikube or GKE name (there it
//     is the cluster's ordinary disk). It gets a gp3 volume, as gp3 does, and not EBS's
//     own type "standard": that is the previous generation's magnetic disk, at most 1 TiB,
//     which no one asking for the ordinary class means.
func storageClasses() []*storagev1.StorageClass {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	class := func(name string, params map[string]string, expandable bool) *storagev1.StorageClass {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name},
			Provisioner: DriverName, VolumeBindingMode: &wffc, Parameters: params}
		if expandable {
			sc.AllowVolumeExpansion = ptr.To(true)
		}
		return sc
	}
	gp2 := class(DefaultStorageClass, nil, false)
	gp2.Annotations = map[string]string{AnnDefaultStorageClass: "true"}
	gp3 := map[string]string{driver.ParamType: "gp3"}
	return []*storagev1.StorageClass{gp2, class("gp3", gp3, true), class("standard", maps.Clone(gp3), true)}
}

// albIngressClass is the IngressClass of the cloud-controller-manager's Ingress
// controller, as the AWS Load Balancer Controller's chart installs it: Ingresses of class
// alb get an application load balancer.
func albIngressClass() *networkingv1.IngressClass {
	return &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: "alb",
		Labels: map[string]string{"app.kubernetes.io/name": "aws-load-balancer-controller"}},
		Spec: networkingv1.IngressClassSpec{Controller: "ingress.k8s.aws/alb"}}
}

// ensureAddons creates the add-on objects that are missing (addons, addonRBAC, leasesRBAC); existing
// ones are left as the user changed them. It runs before any component starts, so that
// each finds its role in place.
func ensureAddons(ctx context.Context, client kubernetes.Interface) error {
	drv, classes := addons()
	create := func(what string, f func(ctx context.Context) error) error { return createAddon(ctx, what, f) }
	if err := create("CSIDriver "+drv.Name, func(ctx context.Context) error {
		_, err := client.StorageV1().CSIDrivers().Create(ctx, drv, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	for _, sc := range classes {
		if err := create("StorageClass "+sc.Name, func(ctx context.Context) error {
			_, err := client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	ic := albIngressClass()
	if err := create("IngressClass "+ic.Name, func(ctx context.Context) error {
		_, err := client.NetworkingV1().IngressClasses().Create(ctx, ic, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	accounts, roles, bindings := addonRBAC()
	for _, sa := range accounts {
		if err := create("ServiceAccount "+sa.Namespace+"/"+sa.Name, func(ctx context.Context) error {
			_, err := client.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	for _, r := range roles {
		if err := create("ClusterRole "+r.Name, func(ctx context.Context) error {
			_, err := client.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	for _, b := range bindings {
		if err := create("ClusterRoleBinding "+b.Name, func(ctx context.Context) error {
			_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	role, binding := leasesRBAC()
	if err := create("Role kube-system/"+role.Name, func(ctx context.Context) error {
		_, err := client.RbacV1().Roles(role.Namespace).Create(ctx, role, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := create("RoleBinding kube-system/"+binding.Name, func(ctx context.Context) error {
		_, err := client.RbacV1().RoleBindings(binding.Namespace).Create(ctx, binding, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// createAddon creates one add-on object with f, retrying while the API server settles;
// an object that exists already is left as it is.
func createAddon(ctx context.Context, what string, f func(ctx context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = f(ctx)
		switch {
		case last == nil || apierrors.IsAlreadyExists(last):
			return true, nil
		case apierrors.IsInvalid(last) || apierrors.IsBadRequest(last):
			return false, last
		}
		return false, nil // the API server may still be settling: retry
	})
	if err != nil && last != nil {
		err = last
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", what, err)
	}
	return nil
}
