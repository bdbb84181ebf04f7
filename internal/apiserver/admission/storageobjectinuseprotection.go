package admission

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/admission"

	"github.com/kubelab/kubelab/internal/util/volumeutil"
)

// storageObjectInUseProtection is the admission step upstream calls
// StorageObjectInUseProtection: a new claim gets the finalizer
// kubernetes.io/pvc-protection and a new volume kubernetes.io/pv-protection, so that
// neither goes away while in use from the moment it exists; the protection controllers
// remove them once the object is deleted and no longer used.
type storageObjectInUseProtection struct {
	*admission.Handler
}

var _ admission.MutationInterface = (*storageObjectInUseProtection)(nil)

func newStorageObjectInUseProtection() *storageObjectInUseProtection {
	return &storageObjectInUseProtection{Handler: admission.NewHandler(admission.Create)}
}

func (p *storageObjectInUseProtection) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetSubresource() != "" {
		return nil
	}
	switch o := a.GetObject().(type) {
	case *corev1.PersistentVolumeClaim:
		o.Finalizers = withFinalizer(o.Finalizers, volumeutil.PVCProtectionFinalizer)
	case *corev1.PersistentVolume:
		o.Finalizers = withFinalizer(o.Finalizers, volumeutil.PVProtectionFinalizer)
	}
	return nil
}

// withFinalizer is list with f added unless present.
func withFinalizer(list []string, f string) []string {
	for _, x := range list {
		if x == f {
			return list
		}
	}
	return append(list, f)
}
