package apiserver

import (
	"fmt"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"

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
			hooks:   hooks{name: pathSegmentName},
			columns: []metav1.TableColumnDefinition{nameCol(), col("Created At", "date", "When the role was created")},
			row: func(o runtime.Object) []interface{} {
				r := o.(*rbacv1.Role)
				return []interface{}{r.Name, r.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}
			}}),
		rbac(resource{kind: "ClusterRole", plural: "clusterroles", singular: "clusterrole",
			newObj: func() runtime.Object { return &rbacv1.ClusterRole{} }, newList: func() runtime.Object { return &rbacv1.ClusterRoleList{} },
			hooks:   hooks{name: pathSegmentName},
			columns: []metav1.TableColumnDefinition{nameCol(), col("Created At", "date", "When the role was created")},
			row: func(o runtime.Object) []interface{} {
				r := o.(*rbacv1.ClusterRole)
				return []interface{}{r.Name, r.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}
			}}),
		rbac(resource{kind: "RoleBinding", plural: "rolebindings", singular: "rolebinding", namespaced: true,
			newObj: func() runtime.Object { return &rbacv1.RoleBinding{} }, newList: func() runtime.Object { return &rbacv1.RoleBindingList{} },
			hooks:   hooks{name: pathSegmentName},
			columns: bindingColumns(),
			row: func(o runtime.Object) []interface{} {
				b := o.(*rbacv1.RoleBinding)
				return bindingRow(b.Name, b.RoleRef, b.Subjects, b.CreationTimestamp)
			}}),
		rbac(resource{kind: "ClusterRoleBinding", plural: "clusterrolebindings", singular: "clusterrolebinding",
			newObj: func() runtime.Object { return &rbacv1.ClusterRoleBinding{} }, newList: func() runtime.Object { return &rbacv1.ClusterRoleBindingList{} },
			hooks:   hooks{name: pathSegmentName},
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
