package apiserver

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestLeaseFresh(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, renewed time.Duration) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler"},
			Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](15), RenewTime: &metav1.MicroTime{Time: now.Add(-renewed)}}}
		if holder != "" {
			l.Spec.HolderIdentity = &holder
		}
		return l
	}
	for _, c := range []struct {
		name    string
		lease   *coordinationv1.Lease
		healthy bool
	}{
		{"renewed 2s ago", lease("vm_1", 2*time.Second), true},
		{"renewed at the deadline", lease("vm_1", 15*time.Second), true},
		{"not renewed within its duration", lease("vm_1", 16*time.Second), false},
		{"released", lease("", time.Second), false},
	} {
		if got, msg := leaseFresh(c.lease, now); got != c.healthy {
			t.Errorf("%s: healthy %v (%s), want %v", c.name, got, msg, c.healthy)
		}
	}
}
