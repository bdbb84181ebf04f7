package hollow

import "testing"

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		ann         map[string]string
		cpu, memory uint64
	}{
		{ann: nil},
		{ann: map[string]string{CPUUsageAnnotation: "250m", MemoryUsageAnnotation: "64Mi"}, cpu: 250_000_000, memory: 64 << 20},
		{ann: map[string]string{CPUUsageAnnotation: "2", MemoryUsageAnnotation: "1G"}, cpu: 2_000_000_000, memory: 1_000_000_000},
		{ann: map[string]string{CPUUsageAnnotation: "-1", MemoryUsageAnnotation: "lots"}},
	} {
		if cpu, memory := Usage(tc.ann); cpu != tc.cpu || memory != tc.memory {
			t.Errorf("%v: %d %d, want %d %d", tc.ann, cpu, memory, tc.cpu, tc.memory)
		}
	}
}
