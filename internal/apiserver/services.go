package apiserver

import (
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The rules of Services: their names, the fields each type uses, what an update may
// change, and what the server fills in or drops when a writer changes the type. The
// values allocated from ranges (ClusterIPs, node ports) are serviceallocator.go's.

func parseCIDR(s string) (*net.IPNet, error) {
	_, n, err := net.ParseCIDR(s)
	return n, err
}

func serviceHooks() hooks {
	return hooks{
		name: func(name string, prefix bool) []string {
			if prefix {
				name = maskTrailingDash(name)
			}
			// A DNS-1123 label: since v1.34 a name may start with a digit.
			return utilvalidation.IsDNS1123Label(name)
		},
		validate: validateService,
		// The services store's BeginUpdate did this before allocating; doing it again is
		// a no-op there, and keeps the strategy whole for any other caller.
		prepareForUpdate: func(o, old runtime.Object) {
			prepareServiceUpdate(o.(*corev1.Service), old.(*corev1.Service))
		},
		validateUpdate: func(o, old runtime.Object) field.ErrorList {
			s, os := o.(*corev1.Service), old.(*corev1.Service)
			// The ClusterIP may change only with a change to or from ExternalName, and
			// between "None" and "None".
			if !hasClusterIP(s) || !hasClusterIP(os) || (isHeadless(s) && isHeadless(os)) {
				return nil
			}
			if s.Spec.ClusterIP != os.Spec.ClusterIP {
				return field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs").Index(0), s.Spec.ClusterIP, "may not change once set")}
			}
			return nil
		},
	}
}

func isHeadless(s *corev1.Service) bool { return s.Spec.ClusterIP == corev1.ClusterIPNone }

// maskTrailingDash lets a generateName prefix end in "-" (a name made from it goes on with
// random characters).
func maskTrailingDash(name string) string {
	if len(name) > 1 && name[len(name)-1] == '-' {
		return name[:len(name)-1] + "a"
	}
	return name
}

// prepareServiceUpdate fills in and drops fields of an updated Service s the way every
// Kubernetes API server does, so that writers need not repeat what the server allocated
// and a type change does not leave fields of the old type behind.
func prepareServiceUpdate(s, old *corev1.Service) {
	normalizeClusterIPs(s, old)
	patchAllocatedValues(s, old)
	dropTypeDependentFields(s, old)
}

// normalizeClusterIPs keeps spec.clusterIP and spec.clusterIPs in step for writers that
// set only the first (old clients) or left both out of an update.
func normalizeClusterIPs(s, old *corev1.Service) {
	if old == nil {
		if s.Spec.ClusterIP != "" && len(s.Spec.ClusterIPs) == 0 {
			s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
		}
		return
	}
	// An old client patching something else left clusterIPs out.
	if len(old.Spec.ClusterIPs) > 0 && len(s.Spec.ClusterIPs) == 0 && old.Spec.ClusterIP == s.Spec.ClusterIP {
		s.Spec.ClusterIPs = append([]string(nil), old.Spec.ClusterIPs...)
	}
	if old.Spec.ClusterIP != s.Spec.ClusterIP {
		switch {
		case old.Spec.ClusterIP != "" && s.Spec.ClusterIP == "":
			// Clearing clusterIP clears clusterIPs too when the writer left them as they were.
			if sameStrings(old.Spec.ClusterIPs, s.Spec.ClusterIPs) {
				s.Spec.ClusterIPs = nil
			}
		case sameStrings(old.Spec.ClusterIPs, s.Spec.ClusterIPs):
			s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
		}
	}
}

// patchAllocatedValues carries allocated values over that the writer of an update left
// out (kubectl apply of a manifest without them, say): the ClusterIP, and node ports by
// port name when the port's node port is not taken by another port of the update.
func patchAllocatedValues(s, old *corev1.Service) {
	if hasClusterIP(old) && hasClusterIP(s) {
		if s.Spec.ClusterIP == "" {
			s.Spec.ClusterIP = old.Spec.ClusterIP
		}
		if len(s.Spec.ClusterIPs) == 0 && len(old.Spec.ClusterIPs) > 0 {
			s.Spec.ClusterIPs = append([]string(nil), old.Spec.ClusterIPs...)
		}
	}
	if needsNodePorts(old) && needsNodePorts(s) {
		oldPorts, newPorts := nodePortSet(old), nodePortSet(s)
		byName := map[string]int32{}
		for _, p := range old.Spec.Ports {
			byName[p.Name] = p.NodePort
		}
		for i := range s.Spec.Ports {
			p := &s.Spec.Ports[i]
			if v := byName[p.Name]; p.NodePort == 0 && v != 0 && !(oldPorts[v] && newPorts[v]) {
				p.NodePort = v
			}
		}
	}
}

// dropTypeDependentFields clears fields the Service's new type does not use, when the
// writer left them as they were (a value the writer changed stays, for validation to
// refuse): clusterIP(s) and the IP family fields on a change to ExternalName, node ports
// on a change away from NodePort and LoadBalancer, and the load-balancer fields.
func dropTypeDependentFields(s, old *corev1.Service) {
	if hasClusterIP(old) && !hasClusterIP(s) {
		if old.Spec.ClusterIP == s.Spec.ClusterIP && sameStrings(old.Spec.ClusterIPs, s.Spec.ClusterIPs) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
		}
		if reflect.DeepEqual(old.Spec.IPFamilies, s.Spec.IPFamilies) {
			s.Spec.IPFamilies = nil
		}
		if derefString(old.Spec.IPFamilyPolicy) == derefString(s.Spec.IPFamilyPolicy) {
			s.Spec.IPFamilyPolicy = nil
		}
	}
	if needsNodePorts(old) && !needsNodePorts(s) && isSubset(nodePortSet(s), nodePortSet(old)) {
		for i := range s.Spec.Ports {
			s.Spec.Ports[i].NodePort = 0
		}
	}
	if needsHealthCheckNodePort(old) && !needsHealthCheckNodePort(s) && old.Spec.HealthCheckNodePort == s.Spec.HealthCheckNodePort {
		s.Spec.HealthCheckNodePort = 0
	}
	if old.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		if a, b := old.Spec.AllocateLoadBalancerNodePorts, s.Spec.AllocateLoadBalancerNodePorts; a != nil && b != nil && *a == *b {
			s.Spec.AllocateLoadBalancerNodePorts = nil
		}
		if derefString(old.Spec.LoadBalancerClass) == derefString(s.Spec.LoadBalancerClass) {
			s.Spec.LoadBalancerClass = nil
		}
	}
	if externallyAccessible(old) && !externallyAccessible(s) && old.Spec.ExternalTrafficPolicy == s.Spec.ExternalTrafficPolicy {
		s.Spec.ExternalTrafficPolicy = ""
	}
	if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		s.Status.LoadBalancer = corev1.LoadBalancerStatus{}
	}
}

func needsHealthCheckNodePort(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
}

func externallyAccessible(s *corev1.Service) bool {
	return needsNodePorts(s) || (s.Spec.Type == corev1.ServiceTypeClusterIP && len(s.Spec.ExternalIPs) > 0)
}

func nodePortSet(s *corev1.Service) map[int32]bool {
	out := map[int32]bool{}
	for _, p := range s.Spec.Ports {
		if p.NodePort != 0 {
			out[p.NodePort] = true
		}
	}
	return out
}

func isSubset(a, b map[int32]bool) bool {
	for v := range a {
		if !b[v] {
			return false
		}
	}
	return true
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func derefString[T ~string](p *T) string {
	if p == nil {
		return ""
	}
	return string(*p)
}

func validateService(o runtime.Object) field.ErrorList {
	s := o.(*corev1.Service)
	spec := field.NewPath("spec")
	var errs field.ErrorList
	switch s.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if len(s.Spec.Ports) == 0 && !isHeadless(s) {
			errs = append(errs, field.Required(spec.Child("ports"), ""))
		}
		if isHeadless(s) && s.Spec.Type != corev1.ServiceTypeClusterIP {
			errs = append(errs, field.Invalid(spec.Child("clusterIPs").Index(0), s.Spec.ClusterIP,
				fmt.Sprintf("may not be set to 'None' for %s services", s.Spec.Type)))
		}
	case corev1.ServiceTypeExternalName:
		if s.Spec.ExternalName == "" {
			errs = append(errs, field.Required(spec.Child("externalName"), ""))
		}
		if s.Spec.ClusterIP != "" || len(s.Spec.ClusterIPs) > 0 {
			errs = append(errs, field.Forbidden(spec.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		if len(s.Spec.IPFamilies) > 0 {
			errs = append(errs, field.Forbidden(spec.Child("ipFamilies"), "may not be set for ExternalName services"))
		}
		if s.Spec.IPFamilyPolicy != nil {
			errs = append(errs, field.Forbidden(spec.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("type"), s.Spec.Type, []string{"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"}))
	}
	if hasClusterIP(s) {
		switch {
		case len(s.Spec.ClusterIPs) > 1:
			errs = append(errs, field.Invalid(spec.Child("clusterIPs"), s.Spec.ClusterIPs, "this cluster is not configured for dual-stack services"))
		case s.Spec.ClusterIP == "" && len(s.Spec.ClusterIPs) > 0:
			errs = append(errs, field.Invalid(spec.Child("clusterIPs"), s.Spec.ClusterIPs, "must be empty when `clusterIP` is not specified"))
		case len(s.Spec.ClusterIPs) == 1 && s.Spec.ClusterIPs[0] != s.Spec.ClusterIP:
			errs = append(errs, field.Invalid(spec.Child("clusterIPs").Index(0), s.Spec.ClusterIPs, "first value must match `clusterIP`"))
		}
	}
	names := map[string]bool{}
	type protoPort struct {
		proto corev1.Protocol
		port  int32
	}
	nodePorts, ports := map[protoPort]bool{}, map[protoPort]bool{}
	for i, p := range s.Spec.Ports {
		pp := spec.Child("ports").Index(i)
		if len(s.Spec.Ports) > 1 && p.Name == "" {
			errs = append(errs, field.Required(pp.Child("name"), ""))
		}
		if p.Name != "" && names[p.Name] {
			errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
		}
		names[p.Name] = true
		if p.TargetPort.Type == intstr.String {
			for _, msg := range utilvalidation.IsValidPortName(p.TargetPort.StrVal) {
				errs = append(errs, field.Invalid(pp.Child("targetPort"), p.TargetPort.StrVal, msg))
			}
		}
		if p.AppProtocol != nil {
			for _, msg := range utilvalidation.IsQualifiedName(*p.AppProtocol) {
				errs = append(errs, field.Invalid(pp.Child("appProtocol"), *p.AppProtocol, msg))
			}
		}
		if key := (protoPort{p.Protocol, p.Port}); ports[key] {
			errs = append(errs, field.Duplicate(pp, key))
		} else {
			ports[key] = true
		}
		if p.Port < 1 || p.Port > 65535 {
			errs = append(errs, field.Invalid(pp.Child("port"), p.Port, "must be between 1 and 65535, inclusive"))
		}
		if p.TargetPort.Type == intstr.Int && (p.TargetPort.IntVal < 0 || p.TargetPort.IntVal > 65535) {
			errs = append(errs, field.Invalid(pp.Child("targetPort"), p.TargetPort.IntVal, "must be between 1 and 65535, inclusive"))
		}
		switch p.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			errs = append(errs, field.NotSupported(pp.Child("protocol"), p.Protocol, []string{"SCTP", "TCP", "UDP"}))
		}
		if p.NodePort == 0 {
			continue
		}
		if s.Spec.Type == corev1.ServiceTypeClusterIP {
			errs = append(errs, field.Forbidden(pp.Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
		}
		if p.NodePort < 0 || p.NodePort > 65535 {
			errs = append(errs, field.Invalid(pp.Child("nodePort"), p.NodePort, "must be between 1 and 65535, inclusive"))
		}
		key := protoPort{p.Protocol, p.NodePort}
		if nodePorts[key] {
			errs = append(errs, field.Duplicate(pp.Child("nodePort"), p.NodePort))
		}
		nodePorts[key] = true
	}
	return append(errs, validateServiceSpecExtra(s, spec)...)
}

// validateServiceSpecExtra: the enumerations, names and addresses of a Service spec.
func validateServiceSpecExtra(s *corev1.Service, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c := s.Spec.LoadBalancerClass; c != nil {
		for _, msg := range utilvalidation.IsQualifiedName(*c) {
			errs = append(errs, field.Invalid(spec.Child("loadBalancerClass"), *c, msg))
		}
	}
	for i, r := range s.Spec.LoadBalancerSourceRanges {
		if _, _, err := net.ParseCIDR(strings.TrimSpace(r)); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "LoadBalancerSourceRanges").Index(i), r,
				"must be a list of IP ranges. For example, 10.240.0.0/24,10.250.0.0/24 "))
		}
	}
	if s.Spec.Type == corev1.ServiceTypeExternalName {
		if cname := strings.TrimSuffix(s.Spec.ExternalName, "."); cname != "" {
			for _, msg := range utilvalidation.IsDNS1123Subdomain(cname) {
				errs = append(errs, field.Invalid(spec.Child("externalName"), s.Spec.ExternalName, msg))
			}
		}
	}
	switch s.Spec.SessionAffinity {
	case corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP:
	default:
		errs = append(errs, field.NotSupported(spec.Child("sessionAffinity"), s.Spec.SessionAffinity,
			[]corev1.ServiceAffinity{corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone}))
	}
	if s.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		if c := s.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			if t := *c.ClientIP.TimeoutSeconds; t <= 0 || t > maxClientIPAffinitySeconds {
				errs = append(errs, field.Invalid(spec.Child("sessionAffinityConfig", "clientIP", "timeoutSeconds"), t,
					fmt.Sprintf("must be greater than 0 and less than %d", maxClientIPAffinitySeconds)))
			}
		}
	}
	external := s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer ||
		(s.Spec.Type == corev1.ServiceTypeClusterIP && len(s.Spec.ExternalIPs) > 0)
	if p := s.Spec.ExternalTrafficPolicy; p != "" {
		switch {
		case !external:
			errs = append(errs, field.Invalid(spec.Child("externalTrafficPolicy"), p,
				"may only be set for externally-accessible services"))
		case p != corev1.ServiceExternalTrafficPolicyCluster && p != corev1.ServiceExternalTrafficPolicyLocal:
			errs = append(errs, field.NotSupported(spec.Child("externalTrafficPolicy"), p,
				[]corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal}))
		}
	}
	if p := s.Spec.InternalTrafficPolicy; p != nil && *p != corev1.ServiceInternalTrafficPolicyCluster && *p != corev1.ServiceInternalTrafficPolicyLocal {
		errs = append(errs, field.NotSupported(spec.Child("internalTrafficPolicy"), *p,
			[]corev1.ServiceInternalTrafficPolicy{corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal}))
	}
	if p := s.Spec.IPFamilyPolicy; p != nil {
		switch *p {
		case corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack:
		case corev1.IPFamilyPolicyRequireDualStack:
			errs = append(errs, field.Invalid(spec.Child("ipFamilyPolicy"), *p, "this cluster is not configured for dual-stack services"))
		default:
			errs = append(errs, field.NotSupported(spec.Child("ipFamilyPolicy"), *p, []corev1.IPFamilyPolicy{
				corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack}))
		}
	}
	for i, f := range s.Spec.IPFamilies {
		switch f {
		case corev1.IPv4Protocol:
		case corev1.IPv6Protocol:
			errs = append(errs, field.Invalid(spec.Child("ipFamilies").Index(i), f, "not configured on this cluster"))
		default:
			errs = append(errs, field.NotSupported(spec.Child("ipFamilies").Index(i), f, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}))
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(s.Spec.Selector, spec.Child("selector"))...)
	for i, ip := range s.Spec.ExternalIPs {
		if net.ParseIP(ip) == nil {
			errs = append(errs, field.Invalid(spec.Child("externalIPs").Index(i), ip, "must be a valid IP address"))
		}
	}
	if d := s.Spec.TrafficDistribution; d != nil {
		valid := []string{corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameNode, corev1.ServiceTrafficDistributionPreferSameZone}
		if !slices.Contains(valid, *d) {
			errs = append(errs, field.NotSupported(spec.Child("trafficDistribution"), *d, valid))
		}
	}
	return errs
}

// maxClientIPAffinitySeconds is the longest ClientIP session affinity (one day).
const maxClientIPAffinitySeconds = 86400
