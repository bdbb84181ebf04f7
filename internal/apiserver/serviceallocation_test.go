package apiserver_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

const (
	ipKeys   = "/registry/kubelab/serviceips/"
	portKeys = "/registry/kubelab/nodeports/"
)

// etcdOf is a client of the server's embedded etcd, for looking at the reservations.
func etcdOf(t *testing.T, s *apiservertest.Server) *clientv3.Client {
	t.Helper()
	return s.EtcdClient(t)
}

// reservedKeys are the reservations under prefix, "<value>=<owner>", sorted.
func reservedKeys(t *testing.T, c *clientv3.Client, prefix string) []string {
	t.Helper()
	resp, err := c.Get(context.Background(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, strings.TrimPrefix(string(kv.Key), prefix)+"="+string(kv.Value))
	}
	slices.Sort(out)
	return out
}

func allReserved(t *testing.T, c *clientv3.Client) []string {
	return append(reservedKeys(t, c, ipKeys), reservedKeys(t, c, portKeys)...)
}

func patchService(ctx context.Context, client kubernetes.Interface, name, patch string) (*corev1.Service, error) {
	return client.CoreV1().Services("default").Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
}

func createService(ctx context.Context, client kubernetes.Interface, name string, typ corev1.ServiceType, nodePort int32) (*corev1.Service, error) {
	return client.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, NodePort: nodePort}}},
	}, metav1.CreateOptions{})
}

// wantFieldError checks err is an Invalid error on field whose detail contains detail.
func wantFieldError(t *testing.T, err error, field, detail string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want an Invalid error on %s", err, field)
	}
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message, detail) {
			return
		}
	}
	t.Fatalf("got %v, want %s: %q", err, field, detail)
}

func TestServiceAllocationOnUpdate(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	etcd := etcdOf(t, s)
	c := s.Client

	a, err := createService(ctx, c, "a", corev1.ServiceTypeClusterIP, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Spec.ClusterIP == "" || a.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("ClusterIP Service: clusterIP %q nodePort %d", a.Spec.ClusterIP, a.Spec.Ports[0].NodePort)
	}

	// ClusterIP → NodePort allocates a node port; the ClusterIP stays.
	a, err = patchService(ctx, c, "a", `{"spec":{"type":"NodePort"}}`)
	if err != nil {
		t.Fatal(err)
	}
	port := a.Spec.Ports[0].NodePort
	if port < 30000 || port > 32767 {
		t.Fatalf("NodePort Service got node port %d", port)
	}
	if !slices.Contains(reservedKeys(t, etcd, portKeys), fmt.Sprintf("%d=default/a", port)) {
		t.Fatalf("node port %d is not reserved for default/a: %v", port, reservedKeys(t, etcd, portKeys))
	}
	_, err = createService(ctx, c, "b", corev1.ServiceTypeNodePort, port)
	wantFieldError(t, err, "spec.ports[0].nodePort", "provided port is already allocated")

	// An update that changes nothing (or only a label) allocates nothing.
	before := allReserved(t, etcd)
	if _, err := c.CoreV1().Services("default").Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if a, err = patchService(ctx, c, "a", `{"metadata":{"labels":{"x":"y"}}}`); err != nil {
		t.Fatal(err)
	}
	if got := allReserved(t, etcd); !slices.Equal(got, before) || a.Spec.Ports[0].NodePort != port {
		t.Fatalf("a no-op update changed the reservations: %v → %v (node port %d → %d)", before, got, port, a.Spec.Ports[0].NodePort)
	}

	// NodePort → ClusterIP releases the node port and clears it from the spec: another
	// Service can then take exactly that port.
	a, err = patchService(ctx, c, "a", `{"spec":{"type":"ClusterIP"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if a.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("node port %d kept after the change to ClusterIP", a.Spec.Ports[0].NodePort)
	}
	b, err := createService(ctx, c, "b", corev1.ServiceTypeNodePort, port)
	if err != nil {
		t.Fatalf("the released node port %d cannot be taken: %v", port, err)
	}

	// A type change asking for a taken port is refused and leaks nothing.
	before = allReserved(t, etcd)
	_, err = patchService(ctx, c, "a", fmt.Sprintf(`{"spec":{"type":"NodePort","ports":[{"name":"http","port":80,"nodePort":%d}]}}`, port))
	wantFieldError(t, err, "spec.ports[0].nodePort", "provided port is already allocated")
	// The first port gets a node port picked, the second asks for the taken one: the
	// picked one is given back.
	_, err = patchService(ctx, c, "a", fmt.Sprintf(`{"spec":{"type":"NodePort","ports":[{"name":"http","port":80},{"name":"x","port":81,"nodePort":%d}]}}`, port))
	wantFieldError(t, err, "spec.ports[1].nodePort", "provided port is already allocated")
	// Allocation succeeds but validation then refuses the update.
	_, err = patchService(ctx, c, "a", `{"spec":{"type":"NodePort","ports":[{"name":"http","port":80,"protocol":"ICMP"}]}}`)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("an update with a bad protocol: %v, want Invalid", err)
	}
	if got := allReserved(t, etcd); !slices.Equal(got, before) {
		t.Fatalf("failed updates changed the reservations: %v → %v", before, got)
	}

	// Ports added to and removed from a NodePort Service get and give back node ports.
	b, err = patchService(ctx, c, "b", `{"spec":{"ports":[{"name":"http","port":80},{"name":"extra","port":8080}]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.Ports[0].NodePort != port {
		t.Fatalf("node port of the kept port changed: %d → %d", port, b.Spec.Ports[0].NodePort)
	}
	extra := b.Spec.Ports[1].NodePort
	if extra == 0 || extra == port || !slices.Contains(reservedKeys(t, etcd, portKeys), fmt.Sprintf("%d=default/b", extra)) {
		t.Fatalf("added port got node port %d; reserved %v", extra, reservedKeys(t, etcd, portKeys))
	}
	if _, err = patchService(ctx, c, "b", `{"spec":{"ports":[{"name":"http","port":80}]}}`); err != nil {
		t.Fatal(err)
	}
	if got := reservedKeys(t, etcd, portKeys); !slices.Equal(got, []string{fmt.Sprintf("%d=default/b", port)}) {
		t.Fatalf("after removing a port the node ports reserved are %v, want only %d", got, port)
	}

	// → ExternalName releases the ClusterIP and the node ports and clears them.
	ip := b.Spec.ClusterIP
	b, err = patchService(ctx, c, "b", `{"spec":{"type":"ExternalName","externalName":"example.com"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.ClusterIP != "" || len(b.Spec.ClusterIPs) != 0 || b.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("ExternalName Service keeps clusterIP %q clusterIPs %v nodePort %d", b.Spec.ClusterIP, b.Spec.ClusterIPs, b.Spec.Ports[0].NodePort)
	}
	for _, k := range allReserved(t, etcd) {
		if strings.HasSuffix(k, "=default/b") {
			t.Fatalf("%s still reserved for the ExternalName Service (was %s, %d)", k, ip, port)
		}
	}

	// ExternalName → ClusterIP allocates a ClusterIP.
	b, err = patchService(ctx, c, "b", `{"spec":{"type":"ClusterIP","externalName":null}}`)
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.ClusterIP == "" || !slices.Equal(b.Spec.ClusterIPs, []string{b.Spec.ClusterIP}) {
		t.Fatalf("ClusterIP Service made from an ExternalName one: clusterIP %q clusterIPs %v", b.Spec.ClusterIP, b.Spec.ClusterIPs)
	}
	if !slices.Contains(reservedKeys(t, etcd, ipKeys), b.Spec.ClusterIP+"=default/b") {
		t.Fatalf("ClusterIP %s not reserved: %v", b.Spec.ClusterIP, reservedKeys(t, etcd, ipKeys))
	}

	// Deleting the Services gives everything back but the kubernetes Service's address.
	for _, name := range []string{"a", "b"} {
		if err := c.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := allReserved(t, etcd); !slices.Equal(got, []string{"10.96.0.1=default/kubernetes"}) {
		t.Fatalf("after deleting every Service the reservations are %v", got)
	}
}

func TestServiceCIDRFillsToItsSize(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{ServiceCIDR: "10.97.0.0/29"})
	ctx := context.Background()
	// 8 addresses: the network, 10.97.0.1 (the kubernetes Service), 5 for Services, the
	// broadcast address.
	seen := map[string]bool{}
	for i := 0; i < 5; i++ {
		svc, err := createService(ctx, s.Client, fmt.Sprintf("s%d", i), corev1.ServiceTypeClusterIP, 0)
		if err != nil {
			t.Fatalf("Service %d of 5: %v", i, err)
		}
		ip := net.ParseIP(svc.Spec.ClusterIP)
		_, cidr, _ := net.ParseCIDR("10.97.0.0/29")
		if !cidr.Contains(ip) || seen[svc.Spec.ClusterIP] || svc.Spec.ClusterIP == "10.97.0.1" ||
			svc.Spec.ClusterIP == "10.97.0.0" || svc.Spec.ClusterIP == "10.97.0.7" {
			t.Fatalf("Service %d got ClusterIP %s (handed out: %v)", i, ip, seen)
		}
		seen[svc.Spec.ClusterIP] = true
	}
	_, err := createService(ctx, s.Client, "full", corev1.ServiceTypeClusterIP, 0)
	wantFieldError(t, err, "spec.clusterIPs", "range 10.97.0.0/29 is full")

	// A freed address is found again, whatever the picking starts from.
	s2, err := s.Client.CoreV1().Services("default").Get(ctx, "s2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Client.CoreV1().Services("default").Delete(ctx, "s2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again, err := createService(ctx, s.Client, "again", corev1.ServiceTypeClusterIP, 0)
	if err != nil {
		t.Fatal(err)
	}
	if again.Spec.ClusterIP != s2.Spec.ClusterIP {
		t.Fatalf("the one free address is %s, got %s", s2.Spec.ClusterIP, again.Spec.ClusterIP)
	}
}

func TestServiceRepairReclaimsLeaks(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{ServiceRepairInterval: 100 * time.Millisecond})
	ctx := context.Background()
	etcd := etcdOf(t, s)

	// A create that crashed between reserving and storing left a node port and an
	// address behind; the kubernetes Service's reservation is lost.
	for k, v := range map[string]string{portKeys + "31234": "default/crashed", ipKeys + "10.96.0.77": "default/crashed"} {
		if _, err := etcd.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := etcd.Delete(ctx, ipKeys+"10.96.0.1"); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, waitTimeout, "the repair loop", func() error {
		if got := allReserved(t, etcd); !slices.Equal(got, []string{"10.96.0.1=default/kubernetes"}) {
			return fmt.Errorf("reserved: %v", got)
		}
		return nil
	})

	// The reclaimed port is free again.
	if _, err := createService(ctx, s.Client, "web", corev1.ServiceTypeNodePort, 31234); err != nil {
		t.Fatalf("the reclaimed node port cannot be taken: %v", err)
	}
}
