package apiserver

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func svc(name string, typ corev1.ServiceType, clusterIP string, nodePorts ...int32) corev1.Service {
	s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{Type: typ, ClusterIP: clusterIP}}
	for i, np := range nodePorts {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: string(rune('a' + i)), Port: 80 + int32(i), NodePort: np})
	}
	if len(s.Spec.Ports) == 0 {
		s.Spec.Ports = []corev1.ServicePort{{Port: 80}}
	}
	return s
}

func TestServiceRepairPass(t *testing.T) {
	a, store := testAllocator(t, "10.96.0.0/24")
	ctx := context.Background()
	services := []corev1.Service{
		svc("kubernetes", corev1.ServiceTypeClusterIP, "10.96.0.1"),
		svc("web", corev1.ServiceTypeNodePort, "10.96.0.20", 30080),
		svc("outside", corev1.ServiceTypeClusterIP, "10.97.0.5"), // not of this range
	}
	r := &serviceRepair{alloc: a, log: a.log,
		services: func(context.Context) ([]corev1.Service, error) { return services, nil }}

	// The Services' reservations: the kubernetes one is there, web's are lost.
	store.reserve(ctx, a.ipKey("10.96.0.1"), "default/kubernetes")
	// Leaked: a create that crashed before storing its Service.
	store.reserve(ctx, a.ipKey("10.96.0.33"), "default/crashed")
	store.reserve(ctx, a.portKey(31000), "default/crashed")

	rep, err := r.pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantRestored := []string{a.portKey(30080), a.ipKey("10.96.0.20")} // sorted
	if !slices.Equal(rep.restored, wantRestored) {
		t.Errorf("restored %v, want %v", rep.restored, wantRestored)
	}
	if len(rep.reclaimed) != 0 {
		t.Errorf("first pass reclaimed %v: a leak must be seen on two passes", rep.reclaimed)
	}
	if len(rep.suspects) != 2 || !store.has(a.ipKey("10.96.0.33")) {
		t.Errorf("suspects %v, want the two leaked keys (still reserved)", rep.suspects)
	}
	if store.has(a.ipKey("10.97.0.5")) {
		t.Error("a ClusterIP outside the range was reserved")
	}

	// Between the passes the leaked port is reserved anew (an in-flight create took it
	// the moment it was released by someone else): it is not taken from that create.
	store.release(ctx, a.portKey(31000), "default/crashed")
	store.reserve(ctx, a.portKey(31000), "default/inflight")

	rep, err = r.pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.reclaimed, []string{a.ipKey("10.96.0.33")}) {
		t.Errorf("second pass reclaimed %v, want only the IP leaked on both passes", rep.reclaimed)
	}
	if store.has(a.ipKey("10.96.0.33")) {
		t.Error("the leaked IP is still reserved")
	}
	if !store.has(a.portKey(31000)) || !slices.Equal(rep.suspects, []string{a.portKey(31000)}) {
		t.Errorf("the port reserved anew must stay, suspected once more; suspects %v", rep.suspects)
	}
	if len(rep.restored) != 0 {
		t.Errorf("second pass restored %v; all were in place", rep.restored)
	}

	// The in-flight create's Service is stored: its reservation is no longer a suspect.
	store.reserve(ctx, a.ipKey("10.96.0.40"), "default/inflight")
	services = append(services, svc("inflight", corev1.ServiceTypeNodePort, "10.96.0.40", 31000))
	rep, err = r.pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.reclaimed) != 0 || len(rep.suspects) != 0 || len(rep.restored) != 0 || !store.has(a.portKey(31000)) {
		t.Errorf("third pass: reclaimed %v, suspects %v, restored %v; want none", rep.reclaimed, rep.suspects, rep.restored)
	}
}

func TestServiceRepairSparesRequestsInFlight(t *testing.T) {
	a, store := testAllocator(t, "10.96.0.0/24")
	ctx := context.Background()
	r := &serviceRepair{alloc: a, log: a.log,
		services: func(context.Context) ([]corev1.Service, error) { return nil, nil }}
	// A create reserved the address and has not stored its Service yet, however long
	// that takes.
	key := a.ipKey("10.96.0.9")
	a.track(key)
	store.reserve(ctx, key, "default/slow")
	for i := 0; i < 3; i++ {
		rep, err := r.pass(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.reclaimed) != 0 || len(rep.suspects) != 0 {
			t.Fatalf("pass %d: reclaimed %v, suspects %v while the request is in flight", i, rep.reclaimed, rep.suspects)
		}
	}
	// The request ended without storing its Service (and without releasing): the key
	// has leaked and goes after two passes.
	a.untrack([]string{key})
	for i := 0; i < 2; i++ {
		if _, err := r.pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if store.has(key) {
		t.Fatal("the key leaked by the ended request was not reclaimed")
	}
}
