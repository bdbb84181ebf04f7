package client

import (
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/cache"
)

// IndexAttachmentsByPV adds to a VolumeAttachment informer an index called name of the
// attachments by the PersistentVolume they attach. Each sidecar uses a name of its own: the
// informer factory may be shared, and an index name can be added only once.
func IndexAttachmentsByPV(inf cache.SharedIndexInformer, name string) error {
	return inf.AddIndexers(cache.Indexers{name: func(obj interface{}) ([]string, error) {
		va, ok := obj.(*storagev1.VolumeAttachment)
		if !ok || va.Spec.Source.PersistentVolumeName == nil {
			return nil, nil
		}
		return []string{*va.Spec.Source.PersistentVolumeName}, nil
	}})
}
