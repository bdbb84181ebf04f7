package client

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// Patch is the strategic merge patch that turns before into after (objects of a built-in
// kind, pointers to the same type), with before's metadata.resourceVersion as a
// precondition: the API server refuses it with a Conflict, as it would an update, when
// the object changed since before was read. The sidecars patch where their roles allow
// patch and not update (PersistentVolumes, VolumeAttachments and their status,
// PersistentVolumeClaims' status).
func Patch[T metav1.Object](before, after T) ([]byte, error) {
	old, err := json.Marshal(before)
	if err != nil {
		return nil, fmt.Errorf("patch %s: %w", before.GetName(), err)
	}
	cur, err := json.Marshal(after)
	if err != nil {
		return nil, fmt.Errorf("patch %s: %w", before.GetName(), err)
	}
	diff, err := strategicpatch.CreateTwoWayMergePatch(old, cur, before)
	if err != nil {
		return nil, fmt.Errorf("patch %s: %w", before.GetName(), err)
	}
	var patch map[string]any
	if err := json.Unmarshal(diff, &patch); err != nil {
		return nil, fmt.Errorf("patch %s: %w", before.GetName(), err)
	}
	meta, _ := patch["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		patch["metadata"] = meta
	}
	meta["resourceVersion"] = before.GetResourceVersion()
	return json.Marshal(patch)
}
