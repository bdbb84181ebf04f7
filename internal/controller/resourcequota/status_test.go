package resourcequota

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	quota "k8s.io/apiserver/pkg/quota/v1"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// sameUsage compares lists by quantity, so that 1 and 1000m are equal.
func sameUsage(t *testing.T, what string, got, want corev1.ResourceList) {
	t.Helper()
	if !quota.Equals(got, want) {
		t.Errorf("%s: usage %v, want %v", what, got, want)
	}
}

func TestDesiredStatus(t *testing.T) {
	rq := &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: rl("pods", "3", "secrets", "5")}}
	status, dirty := desiredStatus(rq, rl("pods", "2"))
	if !dirty {
		t.Error("a quota without status is not dirty")
	}
	sameUsage(t, "hard", status.Hard, rl("pods", "3", "secrets", "5"))
	sameUsage(t, "used", status.Used, rl("pods", "2"))

	rq.Status = corev1.ResourceQuotaStatus{Hard: rl("pods", "3", "secrets", "5"), Used: rl("pods", "2", "secrets", "1", "services", "4")}
	status, dirty = desiredStatus(rq, rl("pods", "2"))
	if !dirty {
		t.Error("usage of a resource no longer hard is not dropped")
	}
	sameUsage(t, "kept used", status.Used, rl("pods", "2", "secrets", "1"))
	rq.Status.Used = status.Used
	if status, dirty = desiredStatus(rq, rl("pods", "2")); dirty {
		t.Errorf("unchanged usage is dirty: %v", status)
	}
	if _, dirty := desiredStatus(rq, rl("pods", "1")); !dirty {
		t.Error("freed usage is not dirty")
	}
	rq.Spec.Hard = rl("pods", "4", "secrets", "5")
	if _, dirty := desiredStatus(rq, rl("pods", "2", "secrets", "1")); !dirty {
		t.Error("a changed hard is not dirty")
	}
	if !needsSync(rq) {
		t.Error("spec.hard differing from status.hard needs no sync")
	}
	rq.Status.Hard = rl("pods", "4", "secrets", "5")
	if needsSync(rq) {
		t.Error("a quota in sync needs a sync")
	}
	rq.Spec.Hard["configmaps"] = resource.MustParse("1")
	rq.Status.Hard["configmaps"] = resource.MustParse("1")
	if !needsSync(rq) {
		t.Error("a hard resource without usage needs no sync")
	}
}

func TestGaveBack(t *testing.T) {
	old := rl("pods", "3", "requests.cpu", "1")
	for _, c := range []struct {
		used corev1.ResourceList
		want bool
	}{
		{rl("pods", "3", "requests.cpu", "1000m"), false},
		{rl("pods", "4", "requests.cpu", "1"), false},
		{rl("pods", "2", "requests.cpu", "1"), true},
		{rl("pods", "3", "requests.cpu", "500m"), true},
		{rl("pods", "3", "services", "0"), false},
	} {
		if got := gaveBack(old, c.used); got != c.want {
			t.Errorf("gaveBack(%v, %v) = %v, want %v", old, c.used, got, c.want)
		}
	}
}
