package history

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Hash names obj (by its JSON form) and collisionCount, the number of times an earlier
// hash was found taken by another revision: a short string safe in names and labels.
func Hash(obj any, collisionCount *int32) string {
	h := fnv.New32a()
	b, _ := json.Marshal(obj)
	h.Write(b)
	if collisionCount != nil {
		var c [4]byte
		binary.LittleEndian.PutUint32(c[:], uint32(*collisionCount))
		h.Write(c[:])
	}
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// TemplatePatch is the data of a revision of workload obj (a DaemonSet or a
// StatefulSet): a strategic merge patch that replaces its spec.template with the one
// it has now, {"spec":{"template":{…,"$patch":"replace"}}}, made from obj's JSON form
// (keys in order), so that equal templates give equal bytes. kubectl rollout undo
// applies it; kubectl and the e2e framework compare it byte for byte.
func TemplatePatch(obj any) ([]byte, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("revision data: %w", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("revision data: %w", err)
	}
	spec, _ := raw["spec"].(map[string]any)
	template, ok := spec["template"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("revision data: %T has no spec.template", obj)
	}
	template["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": template}})
}

// MaxRevision is the highest revision number of revs, 0 when there is none.
func MaxRevision(revs []*appsv1.ControllerRevision) int64 {
	var n int64
	for _, r := range revs {
		n = max(n, r.Revision)
	}
	return n
}

// SortByRevision orders revs oldest first: by revision number, then creation, then name.
func SortByRevision(revs []*appsv1.ControllerRevision) {
	sort.SliceStable(revs, func(i, j int) bool {
		a, b := revs[i], revs[j]
		if a.Revision != b.Revision {
			return a.Revision < b.Revision
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}
