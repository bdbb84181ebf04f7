package apiserver

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// discoveryResources is the row of discovery.k8s.io/v1 EndpointSlices, which the
// endpoint slice controller writes for every Service and the proxy reads.
func discoveryResources() []resource {
	return []resource{
		{
			group: "discovery.k8s.io", version: "v1", kind: "EndpointSlice", plural: "endpointslices", singular: "endpointslice", namespaced: true, generation: true,
			newObj: func() runtime.Object { return &discoveryv1.EndpointSlice{} }, newList: func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
			hooks: hooks{validate: func(o runtime.Object) field.ErrorList { return validateEndpointSlice(o.(*discoveryv1.EndpointSlice)) }},
			columns: []metav1.TableColumnDefinition{nameCol(), col("AddressType", "string", "The type of address"),
				col("Ports", "string", "The ports"), col("Endpoints", "string", "The endpoints"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				s := o.(*discoveryv1.EndpointSlice)
				var ports, addrs []string
				for _, p := range s.Ports {
					if p.Port != nil {
						ports = append(ports, fmt.Sprint(*p.Port))
					}
				}
				for _, e := range s.Endpoints {
					addrs = append(addrs, e.Addresses...)
				}
				return []interface{}{s.Name, string(s.AddressType), joinOrNone(ports), joinOrNone(addrs), age(s.CreationTimestamp)}
			},
		},
	}
}

// validateEndpointSlice checks the address type, each endpoint's addresses (1 to 100,
// of the slice's type), hostname and node name, and the ports' names and protocols.
func validateEndpointSlice(es *discoveryv1.EndpointSlice) field.ErrorList {
	var errs field.ErrorList
	types := []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN}
	switch {
	case es.AddressType == "":
		errs = append(errs, field.Required(field.NewPath("addressType"), ""))
	case !slices.Contains(types, es.AddressType):
		errs = append(errs, field.NotSupported(field.NewPath("addressType"), es.AddressType, types))
	}
	for i, ep := range es.Endpoints {
		p := field.NewPath("endpoints").Index(i)
		ap := p.Child("addresses")
		switch {
		case len(ep.Addresses) == 0:
			errs = append(errs, field.Required(ap, "must contain at least 1 address"))
		case len(ep.Addresses) > 100:
			errs = append(errs, field.TooMany(ap, len(ep.Addresses), 100))
		}
		for j, addr := range ep.Addresses {
			switch es.AddressType {
			case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
				ip, err := netip.ParseAddr(addr)
				if err != nil || ip.Zone() != "" {
					errs = append(errs, field.Invalid(ap.Index(j), addr, "must be a valid IP address"))
					continue
				}
				if ip.Is4() != (es.AddressType == discoveryv1.AddressTypeIPv4) {
					errs = append(errs, field.Invalid(ap, addr, "must be an "+string(es.AddressType)+" address"))
				}
			case discoveryv1.AddressTypeFQDN:
				errs = append(errs, utilvalidation.IsFullyQualifiedDomainName(ap.Index(j), addr)...)
			}
		}
		if ep.Hostname != nil {
			for _, msg := range utilvalidation.IsDNS1123Label(*ep.Hostname) {
				errs = append(errs, field.Invalid(p.Child("hostname"), *ep.Hostname, msg))
			}
		}
		if ep.NodeName != nil {
			for _, msg := range apivalidation.NameIsDNSSubdomain(*ep.NodeName, false) {
				errs = append(errs, field.Invalid(p.Child("nodeName"), *ep.NodeName, msg))
			}
		}
	}
	names := map[string]bool{}
	for i, port := range es.Ports {
		p := field.NewPath("ports").Index(i)
		name := ptr.Deref(port.Name, "")
		if name != "" {
			for _, msg := range utilvalidation.IsDNS1123Label(name) {
				errs = append(errs, field.Invalid(p.Child("name"), name, msg))
			}
		}
		if names[name] {
			errs = append(errs, field.Duplicate(p.Child("name"), name))
		}
		names[name] = true
		protocols := []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}
		if port.Protocol == nil {
			errs = append(errs, field.Required(p.Child("protocol"), ""))
		} else if !slices.Contains(protocols, *port.Protocol) {
			errs = append(errs, field.NotSupported(p.Child("protocol"), *port.Protocol, protocols))
		}
		if port.AppProtocol != nil {
			for _, msg := range utilvalidation.IsQualifiedName(*port.AppProtocol) {
				errs = append(errs, field.Invalid(p.Child("appProtocol"), *port.AppProtocol, msg))
			}
		}
	}
	return errs
}
