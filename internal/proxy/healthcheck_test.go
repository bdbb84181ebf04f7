package proxy

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestHealthCheckPorts(t *testing.T) {
	svc := func(name string, typ v1.ServiceType, policy v1.ServiceExternalTrafficPolicy, port int32) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: v1.ServiceSpec{Type: typ, ExternalTrafficPolicy: policy, HealthCheckNodePort: port}}
	}
	ep := func(ip, node string, ready bool) discovery.Endpoint {
		return discovery.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(node), Conditions: discovery.EndpointConditions{Ready: ptr.To(ready)}}
	}
	slices := map[string][]*discovery.EndpointSlice{
		"local": {{AddressType: discovery.AddressTypeIPv4, Endpoints: []discovery.Endpoint{
			ep("10.244.0.5", "n0", true), ep("10.244.0.6", "n0", false), ep("10.244.1.5", "n1", true)}},
			{AddressType: discovery.AddressTypeIPv4, Endpoints: []discovery.Endpoint{ep("10.244.0.7", "n0", true), ep("10.244.0.5", "n0", true)}}},
		"elsewhere": {{AddressType: discovery.AddressTypeIPv4, Endpoints: []discovery.Endpoint{ep("10.244.1.5", "n1", true)}}},
	}
	got := healthCheckPorts([]*v1.Service{
		svc("local", v1.ServiceTypeLoadBalancer, v1.ServiceExternalTrafficPolicyLocal, 31000),
		svc("elsewhere", v1.ServiceTypeLoadBalancer, v1.ServiceExternalTrafficPolicyLocal, 31001),
		svc("cluster", v1.ServiceTypeLoadBalancer, v1.ServiceExternalTrafficPolicyCluster, 0),
		svc("nodeport", v1.ServiceTypeNodePort, v1.ServiceExternalTrafficPolicyLocal, 0),
	}, func(s *v1.Service) []*discovery.EndpointSlice { return slices[s.Name] }, "n0")
	want := map[int32]healthCheck{31000: {"ns", "local", 2}, 31001: {"ns", "elsewhere", 0}}
	if len(got) != len(want) || got[31000] != want[31000] || got[31001] != want[31001] {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestHealthServers: a health check node port answers 200 with the local endpoints while
// there are some, 503 without, and stops answering once the Service is gone.
func TestHealthServers(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := int32(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	h := &healthServers{log: slog.Default()}
	t.Cleanup(func() { h.update(nil) })
	url := "http://127.0.0.1:" + strconv.Itoa(int(port)) + "/healthz"
	get := func() (int, map[string]any, error) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var body map[string]any
		err = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body, err
	}
	h.update(map[int32]healthCheck{port: {"ns", "web", 2}})
	code, body, err := get()
	if err != nil || code != 200 || body["localEndpoints"] != float64(2) || body["service"].(map[string]any)["name"] != "web" {
		t.Errorf("with 2 local endpoints: %d %v %v", code, body, err)
	}
	h.update(map[int32]healthCheck{port: {"ns", "web", 0}})
	if code, body, err := get(); err != nil || code != 503 || body["localEndpoints"] != float64(0) {
		t.Errorf("with none: %d %v %v", code, body, err)
	}
	h.update(nil)
	if _, _, err := get(); err == nil {
		t.Error("the port still answers after the Service went")
	}
}
