package apiserver

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
)

// otherResources are the rows of discovery, coordination, events, rbac and snapshots.
func otherResources() []resource {
	rbac := func(r resource) resource { r.group, r.version = "rbac.authorization.k8s.io", "v1"; return r }
	snap := func(r resource) resource {
		r.group, r.version, r.status, r.generation = snapshotGroup, "v1", true, true
		return r
	}
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
		{
			group: "coordination.k8s.io", version: "v1", kind: "Lease", plural: "leases", singular: "lease", namespaced: true,
			newObj: func() runtime.Object { return &coordinationv1.Lease{} }, newList: func() runtime.Object { return &coordinationv1.LeaseList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("Holder", "string", "The holder of the lease"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				l := o.(*coordinationv1.Lease)
				holder := ""
				if l.Spec.HolderIdentity != nil {
					holder = *l.Spec.HolderIdentity
				}
				return []interface{}{l.Name, holder, age(l.CreationTimestamp)}
			},
			hooks: hooks{validate: func(o runtime.Object) field.ErrorList {
				l := o.(*coordinationv1.Lease)
				var errs field.ErrorList
				if d := l.Spec.LeaseDurationSeconds; d != nil && *d <= 0 {
					errs = append(errs, field.Invalid(field.NewPath("spec", "leaseDurationSeconds"), *d, "must be greater than 0"))
				}
				if t := l.Spec.LeaseTransitions; t != nil && *t < 0 {
					errs = append(errs, field.Invalid(field.NewPath("spec", "leaseTransitions"), *t, "must be greater than or equal to 0"))
				}
				return errs
			}},
		},
		{
			// events.k8s.io/v1 serves the same objects as core/v1 events, from the same
			// store; its internal type is core's Event (see scheme.go). Its field labels
			// (regarding.*, reportingController) are converted to core's (scheme.go).
			group: "events.k8s.io", version: "v1", kind: "Event", plural: "events", singular: "event", shortNames: []string{"ev"}, namespaced: true,
			newObj: func() runtime.Object { return &corev1.Event{} }, newList: func() runtime.Object { return &corev1.EventList{} },
			selectableFields: eventsV1SelectableFields(), fields: eventFields,
			columns: []metav1.TableColumnDefinition{
				col("Last Seen", "string", "Time since the event was last seen"), col("Type", "string", "Normal or Warning"),
				col("Reason", "string", "Why the event happened"), col("Object", "string", "The object it is about"),
				wide("Subobject", "string", "The part of the object"), wide("Source", "string", "Who reported it"),
				col("Message", "string", "What happened"), wide("First Seen", "string", "Time since the event was first seen"),
				wide("Count", "string", "How often it happened"), wide("Name", "string", "The name of the event"),
			},
			row:   eventRow,
			hooks: hooks{name: pathSegmentName},
		},
		rbac(resource{kind: "Role", plural: "roles", singular: "role", namespaced: true,
			newObj: func() runtime.Object { return &rbacv1.Role{} }, newList: func() runtime.Object { return &rbacv1.RoleList{} },
			hooks: hooks{name: pathSegmentName,
				validate: func(o runtime.Object) field.ErrorList { return validatePolicyRules(o.(*rbacv1.Role).Rules, true) }},
			columns: []metav1.TableColumnDefinition{nameCol(), col("Created At", "date", "When the role was created")},
			row: func(o runtime.Object) []interface{} {
				r := o.(*rbacv1.Role)
				return []interface{}{r.Name, r.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}
			}}),
		rbac(resource{kind: "ClusterRole", plural: "clusterroles", singular: "clusterrole",
			newObj: func() runtime.Object { return &rbacv1.ClusterRole{} }, newList: func() runtime.Object { return &rbacv1.ClusterRoleList{} },
			hooks: hooks{name: pathSegmentName,
				validate: func(o runtime.Object) field.ErrorList { return validateClusterRole(o.(*rbacv1.ClusterRole)) }},
			columns: []metav1.TableColumnDefinition{nameCol(), col("Created At", "date", "When the role was created")},
			row: func(o runtime.Object) []interface{} {
				r := o.(*rbacv1.ClusterRole)
				return []interface{}{r.Name, r.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}
			}}),
		rbac(resource{kind: "RoleBinding", plural: "rolebindings", singular: "rolebinding", namespaced: true,
			newObj: func() runtime.Object { return &rbacv1.RoleBinding{} }, newList: func() runtime.Object { return &rbacv1.RoleBindingList{} },
			hooks: hooks{name: pathSegmentName,
				validate: func(o runtime.Object) field.ErrorList {
					b := o.(*rbacv1.RoleBinding)
					return validateBinding(b.RoleRef, b.Subjects, true)
				},
				validateUpdate: func(o, old runtime.Object) field.ErrorList {
					return validateRoleRefUpdate(o.(*rbacv1.RoleBinding).RoleRef, old.(*rbacv1.RoleBinding).RoleRef)
				}},
			columns: bindingColumns(),
			row: func(o runtime.Object) []interface{} {
				b := o.(*rbacv1.RoleBinding)
				return bindingRow(b.Name, b.RoleRef, b.Subjects, b.CreationTimestamp)
			}}),
		rbac(resource{kind: "ClusterRoleBinding", plural: "clusterrolebindings", singular: "clusterrolebinding",
			newObj: func() runtime.Object { return &rbacv1.ClusterRoleBinding{} }, newList: func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
			hooks: hooks{name: pathSegmentName,
				validate: func(o runtime.Object) field.ErrorList {
					b := o.(*rbacv1.ClusterRoleBinding)
					return validateBinding(b.RoleRef, b.Subjects, false)
				},
				validateUpdate: func(o, old runtime.Object) field.ErrorList {
					return validateRoleRefUpdate(o.(*rbacv1.ClusterRoleBinding).RoleRef, old.(*rbacv1.ClusterRoleBinding).RoleRef)
				}},
			columns: bindingColumns(),
			row: func(o runtime.Object) []interface{} {
				b := o.(*rbacv1.ClusterRoleBinding)
				return bindingRow(b.Name, b.RoleRef, b.Subjects, b.CreationTimestamp)
			}}),
		snap(resource{kind: "VolumeSnapshot", plural: "volumesnapshots", singular: "volumesnapshot", shortNames: []string{"vs"}, namespaced: true,
			newObj: func() runtime.Object { return &snapshotv1.VolumeSnapshot{} }, newList: func() runtime.Object { return &snapshotv1.VolumeSnapshotList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("ReadyToUse", "boolean", "Whether the snapshot is ready to be used to restore a volume."),
				col("SourcePVC", "string", "The claim the snapshot was taken from."),
				col("SourceSnapshotContent", "string", "The content a pre-provisioned snapshot names."),
				col("RestoreSize", "string", "The minimum size of a volume restored from it."),
				col("SnapshotClass", "string", "The VolumeSnapshotClass it asks for."),
				col("SnapshotContent", "string", "The VolumeSnapshotContent it is bound to."),
				col("CreationTime", "string", "When the storage system took the snapshot."), ageCol()},
			row: func(o runtime.Object) []interface{} {
				s := o.(*snapshotv1.VolumeSnapshot)
				ready, restore, content, created := "", "", "", ""
				if st := s.Status; st != nil {
					if st.ReadyToUse != nil {
						ready = fmt.Sprint(*st.ReadyToUse)
					}
					if st.RestoreSize != nil {
						restore = st.RestoreSize.String()
					}
					if st.BoundVolumeSnapshotContentName != nil {
						content = *st.BoundVolumeSnapshotContentName
					}
					if st.CreationTime != nil {
						created = age(*st.CreationTime)
					}
				}
				return []interface{}{s.Name, ready, strOr(s.Spec.Source.PersistentVolumeClaimName), strOr(s.Spec.Source.VolumeSnapshotContentName),
					restore, strOr(s.Spec.VolumeSnapshotClassName), content, created, age(s.CreationTimestamp)}
			}}),
		snap(resource{kind: "VolumeSnapshotContent", plural: "volumesnapshotcontents", singular: "volumesnapshotcontent", shortNames: []string{"vsc", "vscs"},
			newObj: func() runtime.Object { return &snapshotv1.VolumeSnapshotContent{} }, newList: func() runtime.Object { return &snapshotv1.VolumeSnapshotContentList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("ReadyToUse", "boolean", "Whether the snapshot is ready to be used to restore a volume."),
				col("RestoreSize", "integer", "The size in bytes of a volume restored from it."),
				col("DeletionPolicy", "string", "What happens to the storage snapshot when this object goes."),
				col("Driver", "string", "The CSI driver that took it."),
				col("VolumeSnapshotClass", "string", "The class it was taken with."),
				col("VolumeSnapshot", "string", "The VolumeSnapshot it is bound to."),
				col("VolumeSnapshotNamespace", "string", "The namespace of that VolumeSnapshot."), ageCol()},
			row: func(o runtime.Object) []interface{} {
				c := o.(*snapshotv1.VolumeSnapshotContent)
				ready, restore := "", ""
				if st := c.Status; st != nil {
					if st.ReadyToUse != nil {
						ready = fmt.Sprint(*st.ReadyToUse)
					}
					if st.RestoreSize != nil {
						restore = fmt.Sprint(*st.RestoreSize)
					}
				}
				return []interface{}{c.Name, ready, restore, string(c.Spec.DeletionPolicy), c.Spec.Driver,
					strOr(c.Spec.VolumeSnapshotClassName), c.Spec.VolumeSnapshotRef.Name, c.Spec.VolumeSnapshotRef.Namespace, age(c.CreationTimestamp)}
			}}),
		{
			group: snapshotGroup, version: "v1", kind: "VolumeSnapshotClass", plural: "volumesnapshotclasses", singular: "volumesnapshotclass", shortNames: []string{"vsclass", "vsclasses"},
			newObj: func() runtime.Object { return &snapshotv1.VolumeSnapshotClass{} }, newList: func() runtime.Object { return &snapshotv1.VolumeSnapshotClassList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("Driver", "string", "The CSI driver"), col("DeletionPolicy", "string", "What happens to snapshots of this class"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				c := o.(*snapshotv1.VolumeSnapshotClass)
				return []interface{}{c.Name, c.Driver, string(c.DeletionPolicy), age(c.CreationTimestamp)}
			},
		},
	}
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func bindingColumns() []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{nameCol(), col("Role", "string", "The role it grants"), ageCol(),
		wide("Users", "string", "Users in the binding"), wide("Groups", "string", "Groups in the binding"),
		wide("ServiceAccounts", "string", "ServiceAccounts in the binding")}
}

func bindingRow(name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, created metav1.Time) []interface{} {
	var users, groups, sas []string
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			users = append(users, s.Name)
		case rbacv1.GroupKind:
			groups = append(groups, s.Name)
		case rbacv1.ServiceAccountKind:
			sas = append(sas, s.Namespace+"/"+s.Name)
		}
	}
	return []interface{}{name, ref.Kind + "/" + ref.Name, age(created), strings.Join(users, ", "), strings.Join(groups, ", "), strings.Join(sas, ", ")}
}

// addEventConversions teaches the scheme to translate events.k8s.io/v1 Events to and from
// core/v1 Events, the form both APIs store.
func addEventConversions(s *runtime.Scheme) error {
	if err := s.AddConversionFunc((*eventsv1.Event)(nil), (*corev1.Event)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*eventsv1.Event), b.(*corev1.Event)
		*out = corev1.Event{
			TypeMeta: metav1.TypeMeta{}, ObjectMeta: in.ObjectMeta,
			InvolvedObject: in.Regarding, Reason: in.Reason, Message: in.Note, Type: in.Type,
			EventTime: in.EventTime, Action: in.Action, Related: in.Related,
			ReportingController: in.ReportingController, ReportingInstance: in.ReportingInstance,
			Source:         corev1.EventSource{Component: in.DeprecatedSource.Component, Host: in.DeprecatedSource.Host},
			FirstTimestamp: in.DeprecatedFirstTimestamp, LastTimestamp: in.DeprecatedLastTimestamp, Count: in.DeprecatedCount,
		}
		if in.Series != nil {
			out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*corev1.Event)(nil), (*eventsv1.Event)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*corev1.Event), b.(*eventsv1.Event)
		*out = eventsv1.Event{
			ObjectMeta: in.ObjectMeta, Regarding: in.InvolvedObject, Reason: in.Reason, Note: in.Message, Type: in.Type,
			EventTime: in.EventTime, Action: in.Action, Related: in.Related,
			ReportingController: in.ReportingController, ReportingInstance: in.ReportingInstance,
			DeprecatedSource:         corev1.EventSource{Component: in.Source.Component, Host: in.Source.Host},
			DeprecatedFirstTimestamp: in.FirstTimestamp, DeprecatedLastTimestamp: in.LastTimestamp, DeprecatedCount: in.Count,
		}
		if in.Series != nil {
			out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*eventsv1.EventList)(nil), (*corev1.EventList)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*eventsv1.EventList), b.(*corev1.EventList)
		out.ListMeta = in.ListMeta
		out.Items = make([]corev1.Event, len(in.Items))
		for i := range in.Items {
			if err := s.Convert(&in.Items[i], &out.Items[i], nil); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return s.AddConversionFunc((*corev1.EventList)(nil), (*eventsv1.EventList)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*corev1.EventList), b.(*eventsv1.EventList)
		out.ListMeta = in.ListMeta
		out.Items = make([]eventsv1.Event, len(in.Items))
		for i := range in.Items {
			if err := s.Convert(&in.Items[i], &out.Items[i], nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// validatePolicyRules checks RBAC rules: verbs always, and either non-resource URLs
// (cluster roles only, alone) or API groups and resources.
func validatePolicyRules(rules []rbacv1.PolicyRule, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range rules {
		p := field.NewPath("rules").Index(i)
		if len(rule.Verbs) == 0 {
			errs = append(errs, field.Required(p.Child("verbs"), "verbs must contain at least one value"))
		}
		if len(rule.NonResourceURLs) > 0 {
			if namespaced {
				errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
				errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(rule.APIGroups) == 0 {
			errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(rule.Resources) == 0 {
			errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return errs
}

func validateClusterRole(r *rbacv1.ClusterRole) field.ErrorList {
	errs := validatePolicyRules(r.Rules, false)
	if r.AggregationRule == nil {
		return errs
	}
	p := field.NewPath("aggregationRule", "clusterRoleSelectors")
	if len(r.AggregationRule.ClusterRoleSelectors) == 0 {
		errs = append(errs, field.Required(p, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
	}
	for i := range r.AggregationRule.ClusterRoleSelectors {
		sel := &r.AggregationRule.ClusterRoleSelectors[i]
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, p.Index(i))...)
		if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			errs = append(errs, field.Invalid(p.Index(i), sel, "invalid label selector."))
		}
	}
	return errs
}

// validateBinding checks a binding's roleRef (a Role only in a namespaced binding) and
// subjects (a ServiceAccount subject needs a namespace in a cluster binding).
func validateBinding(ref rbacv1.RoleRef, subjects []rbacv1.Subject, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	rp := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(rp.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	kinds := []string{"ClusterRole"}
	if namespaced {
		kinds = []string{"Role", "ClusterRole"}
	}
	if !slices.Contains(kinds, ref.Kind) {
		errs = append(errs, field.NotSupported(rp.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(rp.Child("name"), ""))
	} else {
		for _, msg := range pathSegmentName(ref.Name, false) {
			errs = append(errs, field.Invalid(rp.Child("name"), ref.Name, msg))
		}
	}
	for i, sub := range subjects {
		p := field.NewPath("subjects").Index(i)
		if sub.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		switch sub.Kind {
		case rbacv1.ServiceAccountKind:
			if sub.Name != "" {
				for _, msg := range apivalidation.NameIsDNSSubdomain(sub.Name, false) {
					errs = append(errs, field.Invalid(p.Child("name"), sub.Name, msg))
				}
			}
			if sub.APIGroup != "" {
				errs = append(errs, field.NotSupported(p.Child("apiGroup"), sub.APIGroup, []string{""}))
			}
			if !namespaced && sub.Namespace == "" {
				errs = append(errs, field.Required(p.Child("namespace"), ""))
			}
		case rbacv1.UserKind, rbacv1.GroupKind:
			if sub.APIGroup != rbacv1.GroupName {
				errs = append(errs, field.NotSupported(p.Child("apiGroup"), sub.APIGroup, []string{rbacv1.GroupName}))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("kind"), sub.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
		}
	}
	return errs
}

func validateRoleRefUpdate(ref, old rbacv1.RoleRef) field.ErrorList {
	if ref != old {
		return field.ErrorList{field.Invalid(field.NewPath("roleRef"), ref, "cannot change roleRef")}
	}
	return nil
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
