package storageclass

import storagev1 "k8s.io/api/storage/v1"

// Annotations that mark a StorageClass as the default one, the GA and the beta key.
const (
	AnnDefault     = "storageclass.kubernetes.io/is-default-class"
	AnnBetaDefault = "storageclass.beta.kubernetes.io/is-default-class"
)

// IsDefault says whether class is marked as a default class.
func IsDefault(class *storagev1.StorageClass) bool {
	return class.Annotations[AnnDefault] == "true" || class.Annotations[AnnBetaDefault] == "true"
}

// Default is the class that claims without one get: of the classes marked default, the
// newest (then the first by name), as upstream picks when several are; nil if none is.
func Default(classes []*storagev1.StorageClass) *storagev1.StorageClass {
	var best *storagev1.StorageClass
	for _, c := range classes {
		if !IsDefault(c) {
			continue
		}
		if best == nil || c.CreationTimestamp.After(best.CreationTimestamp.Time) ||
			(c.CreationTimestamp.Equal(&best.CreationTimestamp) && c.Name < best.Name) {
			best = c
		}
	}
	return best
}
