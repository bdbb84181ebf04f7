package apiserver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSplitProxyName(t *testing.T) {
	for _, tc := range []struct {
		id, scheme, name, port string
		bad                    bool
	}{
		{id: "web", name: "web"},
		{id: "web:8080", name: "web", port: "8080"},
		{id: "web:http", name: "web", port: "http"},
		{id: "https:web:443", scheme: "https", name: "web", port: "443"},
		{id: "http:web:", scheme: "http", name: "web"},
		{id: "ftp:web:21", bad: true},
		{id: ":80", bad: true},
		{id: "a:b:c:d", bad: true},
	} {
		scheme, name, port, err := splitProxyName("pod", tc.id)
		if tc.bad {
			if !apierrors.IsBadRequest(err) || err.Error() != `invalid pod request "`+tc.id+`"` {
				t.Errorf("%q: %v, want 400 invalid pod request", tc.id, err)
			}
			continue
		}
		if err != nil || scheme != tc.scheme || name != tc.name || port != tc.port {
			t.Errorf("%q: %q %q %q %v; want %q %q %q", tc.id, scheme, name, port, err, tc.scheme, tc.name, tc.port)
		}
	}
}

func TestPodProxyLocation(t *testing.T) {
	pod := func(ip string, ports ...corev1.ContainerPort) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "sidecar"}, {Name: "main", Ports: ports}}},
			Status: corev1.PodStatus{PodIP: ip}}
	}
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}}
	for _, tc := range []struct {
		name         string
		pod          *corev1.Pod
		scheme, port string
		want         string // "" for a 400
	}{
		{"the first declared port", pod("10.244.1.5", ports...), "", "", "//10.244.1.5:8080"},
		{"no declared port", pod("10.244.1.5"), "", "", "//10.244.1.5"},
		{"a port number", pod("10.244.1.5", ports...), "", "1080", "//10.244.1.5:1080"},
		{"a named port", pod("10.244.1.5", ports...), "https", "metrics", "https://10.244.1.5:9090"},
		{"an unknown named port", pod("10.244.1.5", ports...), "", "grpc", ""},
		{"IPv6", pod("fd00::5", ports...), "http", "", "http://[fd00::5]:8080"},
		{"IPv6 without a port", pod("fd00::5"), "", "", "//[fd00::5]"},
		{"no IP yet", pod("", ports...), "", "", ""},
		{"loopback", pod("127.0.0.1", ports...), "", "", ""},
		{"link-local", pod("169.254.169.254", ports...), "", "80", ""},
	} {
		loc, err := podProxyLocation(tc.pod, tc.scheme, tc.port)
		switch {
		case tc.want == "":
			if !apierrors.IsBadRequest(err) {
				t.Errorf("%s: %v %v, want 400", tc.name, loc, err)
			}
		case err != nil || loc.String() != tc.want:
			t.Errorf("%s: %v %v, want %s", tc.name, loc, err, tc.want)
		}
	}
	if _, err := podProxyLocation(pod("127.0.0.1"), "", ""); err == nil || err.Error() != "address not allowed" {
		t.Errorf("a loopback pod IP: %v, want kube-apiserver's %q", err, "address not allowed")
	}
}

func TestServicePortName(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
		{Name: "portname1", Port: 80}, {Name: "tlsportname1", Port: 443}}}}
	for port, want := range map[string]string{"80": "portname1", "443": "tlsportname1", "portname1": "portname1", "": ""} {
		if got, err := servicePortName(svc, port); err != nil || got != want {
			t.Errorf("port %q: %q %v, want %q", port, got, err, want)
		}
	}
	_, err := servicePortName(svc, "81")
	if !apierrors.IsServiceUnavailable(err) || err.Error() != `no service port 81 found for service "web"` {
		t.Errorf("an unknown port number: %v, want kube-apiserver's 503", err)
	}
}

func TestEndpointIsPod(t *testing.T) {
	pods := map[string]*corev1.Pod{
		"web-0": {Status: corev1.PodStatus{PodIP: "10.244.1.5", PodIPs: []corev1.PodIP{{IP: "10.244.1.5"}}}},
		"web-1": {Status: corev1.PodStatus{PodIP: "10.244.2.6"}},
	}
	getPod := func(name string) (*corev1.Pod, error) {
		if p, ok := pods[name]; ok {
			return p, nil
		}
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	ep := func(addr string, ref *corev1.ObjectReference) *discoveryv1.Endpoint {
		return &discoveryv1.Endpoint{Addresses: []string{addr}, TargetRef: ref}
	}
	ref := func(ns, kind, name string) *corev1.ObjectReference {
		return &corev1.ObjectReference{Namespace: ns, Kind: kind, Name: name}
	}
	for _, tc := range []struct {
		name string
		ep   *discoveryv1.Endpoint
		want bool
	}{
		{"the pod's IP", ep("10.244.1.5", ref("web", "Pod", "web-0")), true},
		{"the pod's status.podIP", ep("10.244.2.6", ref("web", "Pod", "web-1")), true},
		{"another IP than the pod's", ep("10.244.9.9", ref("web", "Pod", "web-0")), false},
		{"no target", ep("10.244.1.5", nil), false},
		{"a pod of another namespace", ep("10.244.1.5", ref("other", "Pod", "web-0")), false},
		{"not a pod", ep("10.244.1.5", ref("web", "Node", "web-0")), false},
		{"a missing pod", ep("10.244.1.5", ref("web", "Pod", "gone")), false},
		{"no address", &discoveryv1.Endpoint{TargetRef: ref("web", "Pod", "web-0")}, false},
	} {
		if got := endpointIsPod(tc.ep, "web", getPod); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNodeProxyLocation(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-172-31-0-10.ec2.internal"}, Status: corev1.NodeStatus{
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.31.0.10"},
			{Type: corev1.NodeHostName, Address: "ip-172-31-0-10.ec2.internal"}, {Type: corev1.NodeInternalDNS, Address: "localhost"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 41234}}}}
	kubeletTypes := []corev1.NodeAddressType{corev1.NodeInternalDNS, corev1.NodeInternalIP}
	loopbackNode := node.DeepCopy()
	loopbackNode.Status.Addresses = loopbackNode.Status.Addresses[2:]
	for _, tc := range []struct {
		name         string
		node         *corev1.Node
		scheme, port string
		want         string // "" for a 400
		kubelet      bool
	}{
		{"the kubelet", node, "", "", "https://localhost:41234", true},
		{"the kubelet's port", node, "http", "41234", "https://localhost:41234", true},
		{"another port", node, "", "8080", "//172.31.0.10:8080", false},
		{"another port over https", node, "https", "8443", "https://172.31.0.10:8443", false},
		{"a port name", node, "", "http", "", false},
		{"another port of a node without an IP", loopbackNode, "", "8080", "", false},
	} {
		loc, kubelet, err := nodeProxyLocation(tc.node, kubeletTypes, tc.scheme, tc.port)
		switch {
		case tc.want == "":
			if !apierrors.IsBadRequest(err) {
				t.Errorf("%s: %v %v, want 400", tc.name, loc, err)
			}
		case err != nil || loc.String() != tc.want || kubelet != tc.kubelet:
			t.Errorf("%s: %v (kubelet %v) %v, want %s (kubelet %v)", tc.name, loc, kubelet, err, tc.want, tc.kubelet)
		}
	}
}
