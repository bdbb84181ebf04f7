package admission

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// persistentVolumeClaimResize is the admission step upstream calls
// PersistentVolumeClaimResize: a claim's storage request may grow only when the claim
// is bound and its StorageClass (the same before and after) says
// allowVolumeExpansion: true.
type persistentVolumeClaimResize struct {
	*admission.Handler
	classes storagelisters.StorageClassLister
}

var _ admission.ValidationInterface = (*persistentVolumeClaimResize)(nil)

var (
	errResizeUnbound   = errors.New("Only bound persistent volume claims can be expanded")
	errResizeForbidden = errors.New("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize")
)

func newPersistentVolumeClaimResize(factory informers.SharedInformerFactory) *persistentVolumeClaimResize {
	inf := factory.Storage().V1().StorageClasses()
	p := &persistentVolumeClaimResize{Handler: admission.NewHandler(admission.Update), classes: inf.Lister()}
	p.SetReadyFunc(inf.Informer().HasSynced)
	return p
}

func (p *persistentVolumeClaimResize) Validate(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("persistentvolumeclaims") || a.GetSubresource() != "" {
		return nil
	}
	pvc, ok1 := a.GetObject().(*corev1.PersistentVolumeClaim)
	old, ok2 := a.GetOldObject().(*corev1.PersistentVolumeClaim)
	if !ok1 || !ok2 || !growsStorage(pvc, old) {
		return nil
	}
	if !p.WaitForReady() {
		return admission.NewForbidden(a, errors.New("not yet ready to handle request"))
	}
	var class *storagev1.StorageClass
	if name := storagehelpers.GetPersistentVolumeClaimClass(pvc); name != "" {
		class, _ = p.classes.Get(name)
	}
	if err := resizeDecision(pvc, old, class); err != nil {
		return admission.NewForbidden(a, err)
	}
	return nil
}

// growsStorage: the update asks for more storage than the claim had.
func growsStorage(pvc, old *corev1.PersistentVolumeClaim) bool {
	n, o := pvc.Spec.Resources.Requests[corev1.ResourceStorage], old.Spec.Resources.Requests[corev1.ResourceStorage]
	return n.Cmp(o) > 0
}

// resizeDecision says why growing old into pvc is refused, given pvc's StorageClass
// (nil when it has none or it does not exist), or nil when it is allowed.
func resizeDecision(pvc, old *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) error {
	if old.Status.Phase != corev1.ClaimBound {
		return errResizeUnbound
	}
	name := storagehelpers.GetPersistentVolumeClaimClass(pvc)
	if name == "" || name != storagehelpers.GetPersistentVolumeClaimClass(old) || class == nil || class.Name != name ||
		class.AllowVolumeExpansion == nil || !*class.AllowVolumeExpansion {
		return errResizeForbidden
	}
	return nil
}
