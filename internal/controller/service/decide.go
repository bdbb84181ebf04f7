package service

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/kubelab/kubelab/internal/cloudprovider"
)

// Finalizer holds a Service of type LoadBalancer until its load balancer is deleted.
const Finalizer = "service.kubernetes.io/load-balancer-cleanup"

// The annotations the controller reads, as the AWS cloud provider and the AWS Load
// Balancer Controller name them.
const (
	annPrefix              = "service.beta.kubernetes.io/aws-load-balancer-"
	AnnotationType         = annPrefix + "type"
	AnnotationScheme       = annPrefix + "scheme"
	AnnotationInternal     = annPrefix + "internal"
	AnnotationTargetType   = annPrefix + "nlb-target-type"
	AnnotationHCProtocol   = annPrefix + "healthcheck-protocol"
	AnnotationHCPort       = annPrefix + "healthcheck-port"
	AnnotationHCPath       = annPrefix + "healthcheck-path"
	AnnotationHCInterval   = annPrefix + "healthcheck-interval"
	AnnotationHCTimeout    = annPrefix + "healthcheck-timeout"
	AnnotationHCHealthy    = annPrefix + "healthcheck-healthy-threshold"
	AnnotationHCUnhealthy  = annPrefix + "healthcheck-unhealthy-threshold"
	TagServiceName         = "kubernetes.io/service-name"
	tagClusterPrefix       = "kubernetes.io/cluster/"
	defaultHealthInterval  = 10
	defaultHealthTimeout   = 10
	defaultHealthThreshold = 3
)

// wantsLoadBalancer is whether svc is to have a load balancer of this controller.
func wantsLoadBalancer(svc *corev1.Service) bool {
	return svc.DeletionTimestamp == nil && svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil
}

// LoadBalancerName is the name of svc's load balancer, as upstream forms it: "a" and the
// UID without dashes, 32 characters at most.
func LoadBalancerName(svc *corev1.Service) string {
	n := "a" + strings.ReplaceAll(string(svc.UID), "-", "")
	if len(n) > 32 {
		n = n[:32]
	}
	return n
}

// lbScheme is the load balancer's scheme: the scheme annotation, else internal when the
// legacy internal annotation is true or the AWS Load Balancer Controller's type
// (external) is asked for (its default), else internet-facing.
func lbScheme(a map[string]string) (string, error) {
	switch s := a[AnnotationScheme]; s {
	case cloudprovider.SchemeInternet, cloudprovider.SchemeInternal:
		return s, nil
	case "":
	default:
		return "", fmt.Errorf("annotation %s: %q is neither internet-facing nor internal", AnnotationScheme, s)
	}
	if a[AnnotationInternal] == "true" || a[AnnotationType] == "external" {
		return cloudprovider.SchemeInternal, nil
	}
	return cloudprovider.SchemeInternet, nil
}

func targetType(a map[string]string) (string, error) {
	switch t := a[AnnotationTargetType]; t {
	case "", cloudprovider.TargetTypeInstance:
		return cloudprovider.TargetTypeInstance, nil
	case cloudprovider.TargetTypeIP:
		return t, nil
	default:
		return "", fmt.Errorf("annotation %s: %q is neither instance nor ip", AnnotationTargetType, t)
	}
}

// healthCheck is the target groups' health check: TCP on the traffic port, or, for an
// instance-target Service of externalTrafficPolicy Local, HTTP on its health check node
// port at /healthz (a node answers 200 there only while it has a local endpoint); each
// annotation overrides its part.
func healthCheck(svc *corev1.Service, tt string) (cloudprovider.HealthCheck, error) {
	a := svc.Annotations
	hc := cloudprovider.HealthCheck{Protocol: "TCP", Port: "traffic-port", Interval: defaultHealthInterval,
		Timeout: defaultHealthTimeout, Healthy: defaultHealthThreshold, Unhealthy: defaultHealthThreshold}
	if tt == cloudprovider.TargetTypeInstance && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && svc.Spec.HealthCheckNodePort != 0 {
		hc.Protocol, hc.Port, hc.Path = "HTTP", strconv.Itoa(int(svc.Spec.HealthCheckNodePort)), "/healthz"
	}
	if p := a[AnnotationHCProtocol]; p != "" {
		switch p = strings.ToUpper(p); p {
		case "TCP":
			hc.Protocol, hc.Path = p, ""
		case "HTTP", "HTTPS":
			hc.Protocol = p
			if hc.Path == "" {
				hc.Path = "/"
			}
		default:
			return hc, fmt.Errorf("annotation %s: %q is not TCP, HTTP or HTTPS", AnnotationHCProtocol, a[AnnotationHCProtocol])
		}
	}
	if p := a[AnnotationHCPort]; p != "" {
		if n, err := strconv.Atoi(p); p != "traffic-port" && (err != nil || n < 1 || n > 65535) {
			return hc, fmt.Errorf("annotation %s: %q is neither traffic-port nor a port", AnnotationHCPort, p)
		}
		hc.Port = p
	}
	if p := a[AnnotationHCPath]; p != "" && hc.Protocol != "TCP" {
		hc.Path = p
	}
	for ann, f := range map[string]*int32{AnnotationHCInterval: &hc.Interval, AnnotationHCTimeout: &hc.Timeout,
		AnnotationHCHealthy: &hc.Healthy, AnnotationHCUnhealthy: &hc.Unhealthy} {
		if v := a[ann]; v != "" {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n <= 0 {
				return hc, fmt.Errorf("annotation %s: %q is not a positive number", ann, v)
			}
			*f = int32(n)
		}
	}
	return hc, nil
}

// targetGroupName names a port's target group from the Service and what cannot change on
// a target group: "k8s-<namespace>-<name>-<hash>", 32 characters at most.
func targetGroupName(svc *corev1.Service, p corev1.ServicePort, tt string) string {
	h := sha256.Sum256([]byte(strings.Join([]string{string(svc.UID), string(p.Protocol), strconv.Itoa(int(p.Port)),
		strconv.Itoa(int(p.NodePort)), tt}, "/")))
	cut := func(s string) string { return strings.Trim(s[:min(len(s), 8)], "-") }
	return "k8s-" + cut(svc.Namespace) + "-" + cut(svc.Name) + "-" + hex.EncodeToString(h[:])[:10]
}

// desiredLoadBalancer is the network load balancer svc is to have: one listener and
// target group per port, targets the eligible nodes at the node port (instance) or the
// ready endpoints (ip).
func desiredLoadBalancer(svc *corev1.Service, nodes []*corev1.Node, eps []*discoveryv1.EndpointSlice, cluster string) (*cloudprovider.LoadBalancer, error) {
	sch, err := lbScheme(svc.Annotations)
	if err != nil {
		return nil, err
	}
	tt, err := targetType(svc.Annotations)
	if err != nil {
		return nil, err
	}
	hc, err := healthCheck(svc, tt)
	if err != nil {
		return nil, err
	}
	if len(svc.Spec.Ports) == 0 {
		return nil, fmt.Errorf("service %s/%s has no ports", svc.Namespace, svc.Name)
	}
	lb := &cloudprovider.LoadBalancer{Name: LoadBalancerName(svc), Type: cloudprovider.TypeNetwork, Scheme: sch,
		Tags: map[string]string{TagServiceName: svc.Namespace + "/" + svc.Name, tagClusterPrefix + cluster: "owned"}}
	for _, p := range svc.Spec.Ports {
		if p.Protocol != corev1.ProtocolTCP && p.Protocol != corev1.ProtocolUDP {
			return nil, fmt.Errorf("port %d: protocol %s: a network load balancer carries TCP and UDP", p.Port, p.Protocol)
		}
		tg := &cloudprovider.TargetGroup{Name: targetGroupName(svc, p, tt), Protocol: string(p.Protocol), Port: p.Port, TargetType: tt, Health: hc}
		if tt == cloudprovider.TargetTypeInstance {
			if p.NodePort == 0 {
				return nil, fmt.Errorf("port %d has no node port (spec.allocateLoadBalancerNodePorts false needs target type ip)", p.Port)
			}
			tg.Port = p.NodePort
			tg.Targets = cloudprovider.InstanceTargets(nodes, p.NodePort)
		} else {
			tg.Targets = cloudprovider.EndpointTargets(p, eps)
		}
		lb.Listeners = append(lb.Listeners, cloudprovider.Listener{Protocol: string(p.Protocol), Port: p.Port, Default: tg})
	}
	return lb, nil
}

// ingressStatus is the Service's status.loadBalancer for the cloud's load balancer.
func ingressStatus(st *cloudprovider.Status) corev1.LoadBalancerStatus {
	in := corev1.LoadBalancerIngress{Hostname: st.DNSName, IP: st.Address}
	if in.IP != "" {
		mode := corev1.LoadBalancerIPModeProxy
		in.IPMode = &mode
	}
	return corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{in}}
}
