package ingress

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/kubelab/kubelab/internal/cloudprovider"
)

// The names the controller answers to, as the AWS Load Balancer Controller's.
const (
	ControllerName        = "ingress.k8s.aws/alb"
	ClassName             = "alb"
	Finalizer             = "ingress.k8s.aws/resources"
	annLegacyClass        = "kubernetes.io/ingress.class"
	annPrefix             = "alb.ingress.kubernetes.io/"
	AnnotationGroupName   = annPrefix + "group.name"
	AnnotationListenPorts = annPrefix + "listen-ports"
	AnnotationScheme      = annPrefix + "scheme"
	AnnotationTargetType  = annPrefix + "target-type"
	AnnotationHealthPath  = annPrefix + "healthcheck-path"
	tagClusterPrefix      = "kubernetes.io/cluster/"
	tagStack              = "ingress.k8s.aws/stack"
)

// ofClass is whether ing is served by this controller: its class (spec.ingressClassName,
// else the legacy annotation) names an IngressClass of the controller ingress.k8s.aws/alb
// (classes maps class names to their controllers), or the legacy annotation says alb.
func ofClass(ing *networkingv1.Ingress, classes map[string]string) bool {
	if ing.Spec.IngressClassName != nil {
		return classes[*ing.Spec.IngressClassName] == ControllerName
	}
	return ing.Annotations[annLegacyClass] == ClassName
}

// GroupKey names the group of ing: "group/<name>" for an explicit group, else
// "<namespace>/<name>".
func GroupKey(ing *networkingv1.Ingress) string {
	if g := ing.Annotations[AnnotationGroupName]; g != "" {
		return "group/" + g
	}
	return ing.Namespace + "/" + ing.Name
}

func hash10(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "/")))
	return hex.EncodeToString(h[:])[:10]
}

func cut(s string, n int) string { return strings.Trim(s[:min(len(s), n)], "-.") }

// LoadBalancerName is the name of a group's load balancer, 32 characters at most:
// k8s-<group>-<hash> or k8s-<namespace>-<name>-<hash>.
func LoadBalancerName(group string) string {
	if g, ok := strings.CutPrefix(group, "group/"); ok {
		return "k8s-" + cut(g, 17) + "-" + hash10(group)
	}
	ns, name, _ := strings.Cut(group, "/")
	return "k8s-" + cut(ns, 8) + "-" + cut(name, 8) + "-" + hash10(group)
}

// listenPorts reads the listen-ports annotation, a JSON list of {"HTTP": port}; HTTP:80
// when absent. HTTPS needs certificates kubelab's cloud does not have.
func listenPorts(a map[string]string) ([]int32, error) {
	v := a[AnnotationListenPorts]
	if v == "" {
		return []int32{80}, nil
	}
	var entries []map[string]int32
	if err := json.Unmarshal([]byte(v), &entries); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationListenPorts, err)
	}
	var ports []int32
	for _, e := range entries {
		for proto, port := range e {
			if proto != "HTTP" {
				return nil, fmt.Errorf("annotation %s: protocol %s: only HTTP listeners are supported", AnnotationListenPorts, proto)
			}
			if port < 1 || port > 65535 {
				return nil, fmt.Errorf("annotation %s: port %d", AnnotationListenPorts, port)
			}
			if !slices.Contains(ports, port) {
				ports = append(ports, port)
			}
		}
	}
	if len(ports) == 0 {
		return nil, fmt.Errorf("annotation %s: no ports", AnnotationListenPorts)
	}
	return ports, nil
}

// PathPatterns are the path-pattern values of an Ingress path: Prefix /p matches /p and
// /p/*, Exact /p only /p, ImplementationSpecific the path as written.
func PathPatterns(p networkingv1.HTTPIngressPath) []string {
	path := p.Path
	if path == "" {
		path = "/"
	}
	typ := networkingv1.PathTypeImplementationSpecific
	if p.PathType != nil {
		typ = *p.PathType
	}
	switch {
	case typ == networkingv1.PathTypeExact:
		return []string{path}
	case typ == networkingv1.PathTypePrefix && strings.TrimSuffix(path, "/") == "":
		return []string{"/*"}
	case typ == networkingv1.PathTypePrefix:
		path = strings.TrimSuffix(path, "/")
		return []string{path, path + "/*"}
	default:
		return []string{path}
	}
}

// World is what the decisions read besides the Ingresses: the Services, nodes and
// EndpointSlices of the backends' namespaces.
type World struct {
	Services func(ns, name string) (*corev1.Service, error)
	Nodes    []*corev1.Node
	Slices   func(ns, service string) []*discoveryv1.EndpointSlice
}

// settings are a group's load balancer settings, from its first Ingress that sets each.
type settings struct {
	scheme, targetType, healthPath string
	ports                          []int32
}

func groupSettings(ings []*networkingv1.Ingress) (settings, error) {
	s := settings{scheme: cloudprovider.SchemeInternal, targetType: cloudprovider.TargetTypeInstance, healthPath: "/"}
	var err error
	var portsSet bool
	for _, ing := range ings {
		a := ing.Annotations
		if v := a[AnnotationScheme]; v != "" {
			if v != cloudprovider.SchemeInternal && v != cloudprovider.SchemeInternet {
				return s, fmt.Errorf("ingress %s/%s: annotation %s: %q", ing.Namespace, ing.Name, AnnotationScheme, v)
			}
			s.scheme = v
		}
		if v := a[AnnotationTargetType]; v != "" {
			if v != cloudprovider.TargetTypeInstance && v != cloudprovider.TargetTypeIP {
				return s, fmt.Errorf("ingress %s/%s: annotation %s: %q", ing.Namespace, ing.Name, AnnotationTargetType, v)
			}
			s.targetType = v
		}
		if v := a[AnnotationHealthPath]; v != "" {
			s.healthPath = v
		}
		if _, ok := a[AnnotationListenPorts]; ok && !portsSet {
			if s.ports, err = listenPorts(a); err != nil {
				return s, fmt.Errorf("ingress %s/%s: %w", ing.Namespace, ing.Name, err)
			}
			portsSet = true
		}
	}
	if !portsSet {
		s.ports = []int32{80}
	}
	return s, nil
}

// targetGroup is the target group of an Ingress backend.
func targetGroup(lbName, ns string, b *networkingv1.IngressServiceBackend, s settings, w World) (*cloudprovider.TargetGroup, error) {
	if b == nil {
		return nil, fmt.Errorf("a backend of namespace %s names no Service (resource backends are not supported)", ns)
	}
	svc, err := w.Services(ns, b.Name)
	if err != nil {
		return nil, fmt.Errorf("backend service %s/%s: %w", ns, b.Name, err)
	}
	var port *corev1.ServicePort
	for i, p := range svc.Spec.Ports {
		if (b.Port.Name != "" && p.Name == b.Port.Name) || (b.Port.Name == "" && p.Port == b.Port.Number) {
			port = &svc.Spec.Ports[i]
		}
	}
	if port == nil {
		return nil, fmt.Errorf("backend service %s/%s has no port %s", ns, b.Name, portString(b.Port))
	}
	tg := &cloudprovider.TargetGroup{Protocol: "HTTP", TargetType: s.targetType,
		Health: cloudprovider.HealthCheck{Protocol: "HTTP", Port: "traffic-port", Path: s.healthPath, Interval: 15, Timeout: 5, Healthy: 2, Unhealthy: 2}}
	if s.targetType == cloudprovider.TargetTypeInstance {
		if svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer || port.NodePort == 0 {
			return nil, fmt.Errorf("backend service %s/%s is of type %s: target-type instance needs a NodePort or LoadBalancer Service", ns, b.Name, svc.Spec.Type)
		}
		tg.Port = port.NodePort
		tg.Targets = cloudprovider.InstanceTargets(w.Nodes, port.NodePort)
	} else {
		tg.Port = port.Port
		tg.Targets = cloudprovider.EndpointTargets(*port, w.Slices(ns, b.Name))
	}
	tg.Name = "k8s-" + cut(ns, 8) + "-" + cut(b.Name, 8) + "-" + hash10(lbName, ns, b.Name, strconv.Itoa(int(port.Port)), s.targetType, strconv.Itoa(int(tg.Port)))
	return tg, nil
}

func portString(p networkingv1.ServiceBackendPort) string {
	if p.Name != "" {
		return p.Name
	}
	return strconv.Itoa(int(p.Number))
}

// DesiredLoadBalancer is the application load balancer of a group of Ingresses (sorted
// by namespace and name): each listen port gets the same rules, one per host and path
// in the order the Ingresses list them, priorities from 1; the first default backend is
// the listeners' default action.
func DesiredLoadBalancer(group string, ings []*networkingv1.Ingress, w World, cluster string) (*cloudprovider.LoadBalancer, error) {
	s, err := groupSettings(ings)
	if err != nil {
		return nil, err
	}
	name := LoadBalancerName(group)
	lb := &cloudprovider.LoadBalancer{Name: name, Type: cloudprovider.TypeApplication, Scheme: s.scheme,
		Tags: map[string]string{tagClusterPrefix + cluster: "owned", tagStack: strings.TrimPrefix(group, "group/")}}
	var def *cloudprovider.TargetGroup
	var rules []cloudprovider.Rule
	for _, ing := range ings {
		if ing.Spec.DefaultBackend != nil && def == nil {
			if def, err = targetGroup(name, ing.Namespace, ing.Spec.DefaultBackend.Service, s, w); err != nil {
				return nil, err
			}
		}
		for _, r := range ing.Spec.Rules {
			if r.HTTP == nil {
				continue
			}
			for _, p := range r.HTTP.Paths {
				tg, err := targetGroup(name, ing.Namespace, p.Backend.Service, s, w)
				if err != nil {
					return nil, err
				}
				rule := cloudprovider.Rule{Priority: int32(len(rules) + 1), Paths: PathPatterns(p), TargetGroup: *tg}
				if r.Host != "" {
					rule.Hosts = []string{r.Host}
				}
				rules = append(rules, rule)
			}
		}
	}
	for _, port := range s.ports {
		lb.Listeners = append(lb.Listeners, cloudprovider.Listener{Protocol: "HTTP", Port: port, Default: def, Rules: rules})
	}
	return lb, nil
}

// ingressStatus is an Ingress's status.loadBalancer for the load balancer of DNS name
// dns.
func ingressStatus(dns string) networkingv1.IngressLoadBalancerStatus {
	return networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{{Hostname: dns}}}
}
