package apiserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"slices"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

const advertised = "172.31.0.2"

// clientAt is a client of s reaching it at host (through dial when given), checking the
// serving certificate against the cluster CA for serverName.
func clientAt(t *testing.T, s *apiservertest.Server, host, serverName string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(s.Config)
	cfg.Host = "https://" + host
	cfg.TLSClientConfig.ServerName = serverName
	cfg.Dial = dial
	return kubernetes.NewForConfigOrDie(cfg)
}

// checkKubernetesEndpoints checks the kubernetes Service, Endpoints and EndpointSlice
// point at addr:port; it returns what is wrong, or nil.
func checkKubernetesEndpoints(ctx context.Context, c kubernetes.Interface, addr string, port int32) error {
	svc, err := c.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort != intstr.FromInt32(port) ||
		svc.Spec.Ports[0].Name != "https" || svc.Spec.ClusterIP != "10.96.0.1" {
		return fmt.Errorf("service: clusterIP %s ports %+v", svc.Spec.ClusterIP, svc.Spec.Ports)
	}
	ep, err := c.CoreV1().Endpoints("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if len(ep.Subsets) != 1 || len(ep.Subsets[0].Addresses) != 1 || ep.Subsets[0].Addresses[0].IP != addr ||
		!slices.Equal(ep.Subsets[0].Ports, []corev1.EndpointPort{{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}}) {
		return fmt.Errorf("endpoints: %+v", ep.Subsets)
	}
	sl, err := c.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return err
	}
	p := sl.Ports
	if sl.AddressType != discoveryv1.AddressTypeIPv4 || sl.Labels[discoveryv1.LabelServiceName] != "kubernetes" ||
		len(sl.Endpoints) != 1 || !slices.Equal(sl.Endpoints[0].Addresses, []string{addr}) ||
		sl.Endpoints[0].Conditions.Ready == nil || !*sl.Endpoints[0].Conditions.Ready ||
		len(p) != 1 || p[0].Name == nil || *p[0].Name != "https" || p[0].Port == nil || *p[0].Port != port ||
		p[0].Protocol == nil || *p[0].Protocol != corev1.ProtocolTCP {
		return fmt.Errorf("endpointslice: type %s labels %v endpoints %+v ports %+v", sl.AddressType, sl.Labels, sl.Endpoints, sl.Ports)
	}
	return nil
}

func TestAdvertiseAddressAndExtraListener(t *testing.T) {
	extra, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := apiservertest.Start(t, apiservertest.Options{AdvertiseAddress: advertised, AdvertisePort: 6443,
		Listeners: []net.Listener{extra}})
	ctx := context.Background()

	// The extra listener serves the API with the same certificate, which names the
	// advertised address and the kubernetes Service's ClusterIP.
	for _, name := range []string{advertised, "10.96.0.1", "kubernetes.default.svc"} {
		c := clientAt(t, s, extra.Addr().String(), name, nil)
		if _, err := c.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Fatalf("through the extra listener, as %s: %v", name, err)
		}
	}
	c := clientAt(t, s, extra.Addr().String(), "172.31.0.3", nil)
	if _, err := c.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err == nil {
		t.Fatal("the serving certificate is accepted for an address it must not name")
	}

	// The kubernetes Service points at the advertised address.
	testutil.EventuallyWithin(t, waitTimeout, "the kubernetes endpoints", func() error {
		return checkKubernetesEndpoints(ctx, s.Client, advertised, 6443)
	})

	// Deleted or changed, they are put back.
	if err := s.Client.DiscoveryV1().EndpointSlices("default").Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.CoreV1().Endpoints("default").Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, waitTimeout, "the kubernetes endpoints recreated", func() error {
		return checkKubernetesEndpoints(ctx, s.Client, advertised, 6443)
	})
	if _, err := patchService(ctx, s.Client, "kubernetes", `{"spec":{"ports":[{"name":"https","port":443,"targetPort":9999}]}}`); err != nil {
		t.Fatal(err)
	}
	sl, err := s.Client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sl.Endpoints[0].Addresses = []string{"172.31.9.9"}
	if _, err := s.Client.DiscoveryV1().EndpointSlices("default").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, waitTimeout, "the kubernetes endpoints repaired", func() error {
		return checkKubernetesEndpoints(ctx, s.Client, advertised, 6443)
	})
	if err := s.Client.CoreV1().Services("default").Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, waitTimeout, "the kubernetes Service recreated", func() error {
		return checkKubernetesEndpoints(ctx, s.Client, advertised, 6443)
	})

	// When the server stops, the extra listener is closed.
	s.Stop()
	if conn, err := net.Dial("tcp", extra.Addr().String()); err == nil {
		conn.Close()
		t.Fatal("the extra listener still accepts after the server stopped")
	}
	if err := s.API.AddListener(newLoopbackListener(t)); err == nil {
		t.Fatal("AddListener after the server stopped succeeded")
	}
}

func newLoopbackListener(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNoAdvertiseAddress(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	svc, err := s.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The Service targets the loopback port, and no endpoints are written.
	if got, want := svc.Spec.Ports[0].TargetPort, intstr.FromInt32(int32(s.Port)); got != want {
		t.Errorf("targetPort %v, want the serving port %v", got, want)
	}
	if _, err := s.Client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("EndpointSlice kubernetes without an advertised address: %v, want NotFound", err)
	}
}

// TestListenerInAnotherNetworkNamespace is how the cluster uses it: a socket opened in
// the cluster network's namespace, handed to the running server, reached there by pods.
func TestListenerInAnotherNetworkNamespace(t *testing.T) {
	netns := testutil.NetNS(t)
	var l net.Listener
	err := netns.Do(func(ns.NetNS) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		addr, err := netlink.ParseAddr(advertised + "/32")
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(lo, addr); err != nil {
			return err
		}
		l, err = net.Listen("tcp", advertised+":443")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s := apiservertest.Start(t, apiservertest.Options{AdvertiseAddress: advertised})
	// Handed over while the server runs.
	if err := s.API.AddListener(l); err != nil {
		t.Fatal(err)
	}
	dialInNS := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := netns.Do(func(ns.NetNS) error {
			var err error
			conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	}
	c := clientAt(t, s, advertised+":443", "", dialInNS)
	ctx := context.Background()
	if _, err := c.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("from the other namespace: %v", err)
	}
	testutil.EventuallyWithin(t, waitTimeout, "the kubernetes endpoints", func() error {
		return checkKubernetesEndpoints(ctx, c, advertised, 443)
	})

	// The certificate presented there names the kubernetes Service's ClusterIP too.
	conn, err := dialInNS(ctx, "tcp", advertised+":443")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(s.API.PKI().CACert())
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(ca)
	tc := tls.Client(conn, &tls.Config{RootCAs: pool, ServerName: "10.96.0.1"})
	defer tc.Close()
	if err := tc.HandshakeContext(ctx); err != nil {
		t.Fatalf("TLS as 10.96.0.1: %v", err)
	}
}
