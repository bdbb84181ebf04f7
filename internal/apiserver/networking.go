package apiserver

import (
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// networkingResources are the rows of networking.k8s.io/v1: NetworkPolicy, which the
// network policy agent of every node turns into packet filters for its pods.
func networkingResources() []resource {
	return []resource{{
		group: networkingv1.GroupName, version: "v1", kind: "NetworkPolicy", plural: "networkpolicies", singular: "networkpolicy",
		shortNames: []string{"netpol"}, namespaced: true, generation: true,
		newObj:  func() runtime.Object { return &networkingv1.NetworkPolicy{} },
		newList: func() runtime.Object { return &networkingv1.NetworkPolicyList{} },
		columns: []metav1.TableColumnDefinition{nameCol(),
			col("Pod-Selector", "string", networkingv1.NetworkPolicySpec{}.SwaggerDoc()["podSelector"]), ageCol()},
		row: func(o runtime.Object) []interface{} {
			np := o.(*networkingv1.NetworkPolicy)
			return []interface{}{np.Name, metav1.FormatLabelSelector(&np.Spec.PodSelector), age(np.CreationTimestamp)}
		},
		hooks: hooks{validate: func(o runtime.Object) field.ErrorList {
			return validateNetworkPolicySpec(&o.(*networkingv1.NetworkPolicy).Spec, field.NewPath("spec"))
		}},
	}, {
		group: networkingv1.GroupName, version: "v1", kind: "Ingress", plural: "ingresses", singular: "ingress",
		shortNames: []string{"ing"}, namespaced: true, status: true, generation: true,
		newObj:  func() runtime.Object { return &networkingv1.Ingress{} },
		newList: func() runtime.Object { return &networkingv1.IngressList{} },
		columns: []metav1.TableColumnDefinition{nameCol(), col("Class", "string", "The ingress class."),
			col("Hosts", "string", "Hosts that incoming requests are matched against."),
			col("Address", "string", "Address is a list containing ingress points for the load-balancer."),
			col("Ports", "string", "Ports of TLS configurations that open."), ageCol()},
		row:   ingressRow,
		hooks: hooks{validate: func(o runtime.Object) field.ErrorList { return validateIngress(o.(*networkingv1.Ingress)) }},
	}, {
		group: networkingv1.GroupName, version: "v1", kind: "IngressClass", plural: "ingressclasses", singular: "ingressclass", generation: true,
		newObj:  func() runtime.Object { return &networkingv1.IngressClass{} },
		newList: func() runtime.Object { return &networkingv1.IngressClassList{} },
		columns: []metav1.TableColumnDefinition{nameCol(), col("Controller", "string", "The controller that implements the class."),
			col("Parameters", "string", "A reference to a resource with additional parameters."), ageCol()},
		row: func(o runtime.Object) []interface{} {
			c := o.(*networkingv1.IngressClass)
			params := "<none>"
			if p := c.Spec.Parameters; p != nil {
				params = p.Kind + "/" + p.Name
				if p.APIGroup != nil {
					params = p.Kind + "." + *p.APIGroup + "/" + p.Name
				}
			}
			return []interface{}{c.Name, c.Spec.Controller, params, age(c.CreationTimestamp)}
		},
		hooks: hooks{validate: func(o runtime.Object) field.ErrorList { return validateIngressClass(o.(*networkingv1.IngressClass)) }},
	}}
}

func ingressRow(o runtime.Object) []interface{} {
	ing := o.(*networkingv1.Ingress)
	var hosts, addrs []string
	for _, r := range ing.Spec.Rules {
		if r.Host != "" {
			hosts = append(hosts, r.Host)
		}
	}
	if len(hosts) == 0 {
		hosts = []string{"*"}
	}
	for _, lb := range ing.Status.LoadBalancer.Ingress {
		if lb.IP != "" {
			addrs = append(addrs, lb.IP)
		} else if lb.Hostname != "" {
			addrs = append(addrs, lb.Hostname)
		}
	}
	ports := "80"
	if len(ing.Spec.TLS) > 0 {
		ports = "80, 443"
	}
	class := "<none>"
	if ing.Spec.IngressClassName != nil {
		class = *ing.Spec.IngressClassName
	}
	return []interface{}{ing.Name, class, strings.Join(hosts, ","), strings.Join(addrs, ","), ports, age(ing.CreationTimestamp)}
}

func validateIngress(ing *networkingv1.Ingress) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if ing.Spec.DefaultBackend == nil && len(ing.Spec.Rules) == 0 {
		errs = append(errs, field.Invalid(spec, ing.Spec, "either `defaultBackend` or `rules` must be specified"))
	}
	if c := ing.Spec.IngressClassName; c != nil {
		for _, msg := range apivalidation.NameIsDNSSubdomain(*c, false) {
			errs = append(errs, field.Invalid(spec.Child("ingressClassName"), *c, msg))
		}
	}
	if b := ing.Spec.DefaultBackend; b != nil {
		errs = append(errs, validateIngressBackend(b, spec.Child("defaultBackend"))...)
	}
	for i, r := range ing.Spec.Rules {
		rp := spec.Child("rules").Index(i)
		if r.Host != "" {
			errs = append(errs, validateIngressHost(r.Host, rp.Child("host"), true)...)
		}
		if r.HTTP == nil {
			continue
		}
		if len(r.HTTP.Paths) == 0 {
			errs = append(errs, field.Required(rp.Child("http", "paths"), ""))
		}
		for j, p := range r.HTTP.Paths {
			pp := rp.Child("http", "paths").Index(j)
			if p.PathType == nil {
				errs = append(errs, field.Required(pp.Child("pathType"), "pathType must be specified"))
			} else {
				switch *p.PathType {
				case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
					if !strings.HasPrefix(p.Path, "/") {
						errs = append(errs, field.Invalid(pp.Child("path"), p.Path, "must be an absolute path"))
					}
					for _, seq := range []string{"//", "/./", "/../", "%2f", "%2F"} {
						if strings.Contains(p.Path, seq) {
							errs = append(errs, field.Invalid(pp.Child("path"), p.Path, fmt.Sprintf("must not contain '%s'", seq)))
						}
					}
					for _, suffix := range []string{"/..", "/."} {
						if strings.HasSuffix(p.Path, suffix) {
							errs = append(errs, field.Invalid(pp.Child("path"), p.Path, fmt.Sprintf("cannot end with '%s'", suffix)))
						}
					}
				case networkingv1.PathTypeImplementationSpecific:
					if p.Path != "" && !strings.HasPrefix(p.Path, "/") {
						errs = append(errs, field.Invalid(pp.Child("path"), p.Path, "must be an absolute path"))
					}
				default:
					errs = append(errs, field.NotSupported(pp.Child("pathType"), *p.PathType, []networkingv1.PathType{
						networkingv1.PathTypeExact, networkingv1.PathTypeImplementationSpecific, networkingv1.PathTypePrefix}))
				}
			}
			errs = append(errs, validateIngressBackend(&p.Backend, pp.Child("backend"))...)
		}
	}
	for i, tls := range ing.Spec.TLS {
		tp := spec.Child("tls").Index(i)
		for j, h := range tls.Hosts {
			errs = append(errs, validateIngressHost(h, tp.Child("hosts").Index(j), false)...)
		}
		if tls.SecretName != "" {
			for _, msg := range apivalidation.NameIsDNSSubdomain(tls.SecretName, false) {
				errs = append(errs, field.Invalid(tp.Child("secretName"), tls.SecretName, msg))
			}
		}
	}
	return errs
}

// validateIngressHost: a DNS name (a wildcard one when it has a "*"), not an IP address.
func validateIngressHost(host string, p *field.Path, rejectIP bool) field.ErrorList {
	var errs field.ErrorList
	if rejectIP && net.ParseIP(host) != nil {
		errs = append(errs, field.Invalid(p, host, "must be a DNS name, not an IP address"))
	}
	check := utilvalidation.IsDNS1123Subdomain
	if strings.Contains(host, "*") {
		check = utilvalidation.IsWildcardDNS1123Subdomain
	}
	for _, msg := range check(host) {
		errs = append(errs, field.Invalid(p, host, msg))
	}
	return errs
}

// validateIngressBackend: exactly one of a service (with a name and one of a port name
// or number) and a resource.
func validateIngressBackend(b *networkingv1.IngressBackend, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case b.Resource != nil && b.Service != nil:
		errs = append(errs, field.Invalid(p, "", "cannot set both resource and service backends"))
	case b.Resource != nil:
		if b.Resource.Kind == "" {
			errs = append(errs, field.Required(p.Child("resource", "kind"), ""))
		}
		if b.Resource.Name == "" {
			errs = append(errs, field.Required(p.Child("resource", "name"), ""))
		}
	case b.Service != nil:
		sp := p.Child("service")
		if b.Service.Name == "" {
			errs = append(errs, field.Required(sp.Child("name"), ""))
		} else {
			for _, msg := range utilvalidation.IsDNS1123Label(b.Service.Name) {
				errs = append(errs, field.Invalid(sp.Child("name"), b.Service.Name, msg))
			}
		}
		port := b.Service.Port
		switch {
		case port.Name != "" && port.Number != 0:
			errs = append(errs, field.Invalid(p, "", "cannot set both port name & port number"))
		case port.Name != "":
			for _, msg := range utilvalidation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(sp.Child("port", "name"), port.Name, msg))
			}
		case port.Number != 0:
			for _, msg := range utilvalidation.IsValidPortNum(int(port.Number)) {
				errs = append(errs, field.Invalid(sp.Child("port", "number"), port.Number, msg))
			}
		default:
			errs = append(errs, field.Required(p, "port name or number is required"))
		}
	default:
		errs = append(errs, field.Invalid(p, "", "resource or service backend is required"))
	}
	return errs
}

// defaultNetworkPolicy fills in what a writer may leave out: the protocol of a port is
// TCP, and a policy naming no policyTypes is an Ingress policy, and an Egress one too
// when it has egress rules.
func defaultNetworkPolicy(np *networkingv1.NetworkPolicy) {
	defaultPorts := func(ports []networkingv1.NetworkPolicyPort) {
		for i := range ports {
			if ports[i].Protocol == nil {
				tcp := corev1.ProtocolTCP
				ports[i].Protocol = &tcp
			}
		}
	}
	for i := range np.Spec.Ingress {
		defaultPorts(np.Spec.Ingress[i].Ports)
	}
	for i := range np.Spec.Egress {
		defaultPorts(np.Spec.Egress[i].Ports)
	}
	if len(np.Spec.PolicyTypes) == 0 {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		if len(np.Spec.Egress) > 0 {
			np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		}
	}
}

// validateNetworkPolicySpec checks a policy's selectors, ports, peers and policy types
// with the rules (and messages) of every Kubernetes API server.
func validateNetworkPolicySpec(spec *networkingv1.NetworkPolicySpec, path *field.Path) field.ErrorList {
	selectorOpts := metav1validation.LabelSelectorValidationOptions{}
	errs := metav1validation.ValidateLabelSelector(&spec.PodSelector, selectorOpts, path.Child("podSelector"))
	for i, rule := range spec.Ingress {
		rp := path.Child("ingress").Index(i)
		for j := range rule.Ports {
			errs = append(errs, validateNetworkPolicyPort(&rule.Ports[j], rp.Child("ports").Index(j))...)
		}
		for j := range rule.From {
			errs = append(errs, validateNetworkPolicyPeer(&rule.From[j], rp.Child("from").Index(j))...)
		}
	}
	for i, rule := range spec.Egress {
		rp := path.Child("egress").Index(i)
		for j := range rule.Ports {
			errs = append(errs, validateNetworkPolicyPort(&rule.Ports[j], rp.Child("ports").Index(j))...)
		}
		for j := range rule.To {
			errs = append(errs, validateNetworkPolicyPeer(&rule.To[j], rp.Child("to").Index(j))...)
		}
	}
	allowed := []string{string(networkingv1.PolicyTypeIngress), string(networkingv1.PolicyTypeEgress)}
	if len(spec.PolicyTypes) > len(allowed) {
		return append(errs, field.Invalid(path.Child("policyTypes"), spec.PolicyTypes, "may not specify more than two policyTypes"))
	}
	for i, t := range spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			errs = append(errs, field.NotSupported(path.Child("policyTypes").Index(i), t, allowed))
		}
	}
	return errs
}

// validateNetworkPolicyPort: a known protocol; a port number in range or a port name;
// an end port only after a numeric port, no lower than it.
func validateNetworkPolicyPort(p *networkingv1.NetworkPolicyPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p.Protocol != nil {
		switch *p.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			errs = append(errs, field.NotSupported(path.Child("protocol"), *p.Protocol, []string{"TCP", "UDP", "SCTP"}))
		}
	}
	switch {
	case p.Port == nil:
		if p.EndPort != nil {
			errs = append(errs, field.Invalid(path.Child("endPort"), *p.EndPort, "may not be specified when `port` is not specified"))
		}
	case p.Port.Type == intstr.Int:
		for _, msg := range utilvalidation.IsValidPortNum(int(p.Port.IntVal)) {
			errs = append(errs, field.Invalid(path.Child("port"), p.Port.IntVal, msg))
		}
		if p.EndPort != nil {
			if *p.EndPort < p.Port.IntVal {
				errs = append(errs, field.Invalid(path.Child("endPort"), *p.EndPort, "must be greater than or equal to `port`"))
			}
			for _, msg := range utilvalidation.IsValidPortNum(int(*p.EndPort)) {
				errs = append(errs, field.Invalid(path.Child("endPort"), *p.EndPort, msg))
			}
		}
	default:
		if p.EndPort != nil {
			errs = append(errs, field.Invalid(path.Child("endPort"), *p.EndPort, "may not be specified when `port` is non-numeric"))
		}
		for _, msg := range utilvalidation.IsValidPortName(p.Port.StrVal) {
			errs = append(errs, field.Invalid(path.Child("port"), p.Port.StrVal, msg))
		}
	}
	return errs
}

// validateNetworkPolicyPeer: at least one of podSelector, namespaceSelector and ipBlock,
// and ipBlock alone.
func validateNetworkPolicyPeer(peer *networkingv1.NetworkPolicyPeer, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	selectorOpts := metav1validation.LabelSelectorValidationOptions{}
	n := 0
	if peer.PodSelector != nil {
		n++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.PodSelector, selectorOpts, path.Child("podSelector"))...)
	}
	if peer.NamespaceSelector != nil {
		n++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.NamespaceSelector, selectorOpts, path.Child("namespaceSelector"))...)
	}
	if peer.IPBlock != nil {
		n++
		errs = append(errs, validateIPBlock(peer.IPBlock, path.Child("ipBlock"))...)
	}
	switch {
	case n == 0:
		errs = append(errs, field.Required(path, "must specify a peer"))
	case n > 1 && peer.IPBlock != nil:
		errs = append(errs, field.Forbidden(path, "may not specify both ipBlock and another peer"))
	}
	return errs
}

// validateIPBlock: cidr is a CIDR and every except entry a CIDR strictly inside it.
func validateIPBlock(b *networkingv1.IPBlock, path *field.Path) field.ErrorList {
	if b.CIDR == "" {
		return field.ErrorList{field.Required(path.Child("cidr"), "")}
	}
	errs := utilvalidation.IsValidCIDRForLegacyField(path.Child("cidr"), b.CIDR, false, nil)
	_, cidr, err := net.ParseCIDR(b.CIDR)
	if err != nil {
		return errs
	}
	ones, _ := cidr.Mask.Size()
	for i, e := range b.Except {
		ep := path.Child("except").Index(i)
		exceptErrs := utilvalidation.IsValidCIDRForLegacyField(ep, e, false, nil)
		errs = append(errs, exceptErrs...)
		_, except, err := net.ParseCIDR(e)
		if err != nil || len(exceptErrs) > 0 {
			continue
		}
		exceptOnes, _ := except.Mask.Size()
		if !cidr.Contains(except.IP) || ones >= exceptOnes {
			errs = append(errs, field.Invalid(ep, e, "must be a strict subset of `cidr`"))
		}
	}
	return errs
}

// validateIngressClass checks the controller (a domain-prefixed path of at most 250
// characters) and the parameters reference with its scope.
func validateIngressClass(c *networkingv1.IngressClass) field.ErrorList {
	cp := field.NewPath("spec", "controller")
	var errs field.ErrorList
	if len(c.Spec.Controller) > 250 {
		errs = append(errs, field.TooLong(cp, "", 250))
	}
	errs = append(errs, utilvalidation.IsDomainPrefixedPath(cp, c.Spec.Controller)...)
	params := c.Spec.Parameters
	if params == nil {
		return errs
	}
	pp := field.NewPath("spec", "parameters")
	for _, f := range []struct{ name, v string }{{"kind", params.Kind}, {"name", params.Name}} {
		if f.v == "" {
			errs = append(errs, field.Required(pp.Child(f.name), ""))
			continue
		}
		for _, msg := range pathSegmentName(f.v, false) {
			errs = append(errs, field.Invalid(pp.Child(f.name), f.v, msg))
		}
	}
	if params.APIGroup != nil {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(*params.APIGroup) {
			errs = append(errs, field.Invalid(pp.Child("apiGroup"), *params.APIGroup, msg))
		}
	}
	if params.Scope == nil {
		return append(errs, field.Required(pp.Child("scope"), ""))
	}
	switch *params.Scope {
	case networkingv1.IngressClassParametersReferenceScopeNamespace:
		if params.Namespace == nil {
			errs = append(errs, field.Required(pp.Child("namespace"), "`parameters.scope` is set to 'Namespace'"))
		} else {
			for _, msg := range apivalidation.ValidateNamespaceName(*params.Namespace, false) {
				errs = append(errs, field.Invalid(pp.Child("namespace"), *params.Namespace, msg))
			}
		}
	case networkingv1.IngressClassParametersReferenceScopeCluster:
		if params.Namespace != nil {
			errs = append(errs, field.Forbidden(pp.Child("namespace"), "`parameters.scope` is set to 'Cluster'"))
		}
	default:
		errs = append(errs, field.NotSupported(pp.Child("scope"), *params.Scope, []string{
			networkingv1.IngressClassParametersReferenceScopeCluster, networkingv1.IngressClassParametersReferenceScopeNamespace}))
	}
	return errs
}
