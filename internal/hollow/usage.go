package hollow

import "k8s.io/apimachinery/pkg/api/resource"

// The usage a hollow container reports through CRI stats, set as pod annotations (the
// kubelet copies a pod's annotations onto its sandbox; an annotation on the container's
// own config wins). Each value is a quantity that applies to every container of the pod;
// a container without one, or with one that does not parse, uses nothing.
const (
	// CPUUsageAnnotation is the CPU a container uses, e.g. "250m".
	CPUUsageAnnotation = "kubelab.dev/hollow-cpu-usage"
	// MemoryUsageAnnotation is the memory working set of a container, e.g. "64Mi".
	MemoryUsageAnnotation = "kubelab.dev/hollow-memory-usage"
)

// Usage reads the usage of one container the annotations declare: CPU in
// nanocores and the memory working set in bytes; 0 for an annotation that is absent,
// negative or not a quantity.
func Usage(annotations map[string]string) (nanoCores, workingSetBytes uint64) {
	return quantityAnnotation(annotations, CPUUsageAnnotation, resource.Nano),
		quantityAnnotation(annotations, MemoryUsageAnnotation, 0)
}

func quantityAnnotation(annotations map[string]string, key string, scale resource.Scale) uint64 {
	v, ok := annotations[key]
	if !ok {
		return 0
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Sign() < 0 {
		return 0
	}
	return uint64(q.ScaledValue(scale))
}
