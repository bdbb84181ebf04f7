package apiserver

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

// coreResources are the rows of the legacy core group ("", v1).
func coreResources() []resource {
	return []resource{
		{
			kind: "Namespace", plural: "namespaces", singular: "namespace", shortNames: []string{"ns"},
			newObj: func() runtime.Object { return &corev1.Namespace{} }, newList: func() runtime.Object { return &corev1.NamespaceList{} },
			status: true, selectableFields: []string{"status.phase"},
			fields: func(o runtime.Object) fields.Set {
				return fields.Set{"status.phase": string(o.(*corev1.Namespace).Status.Phase)}
			},
			columns: []metav1.TableColumnDefinition{nameCol(), col("Status", "string", "The status of the namespace"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				ns := o.(*corev1.Namespace)
				return []interface{}{ns.Name, string(ns.Status.Phase), age(ns.CreationTimestamp)}
			},
			hooks: namespaceHooks(),
		},
		{
			kind: "Pod", plural: "pods", singular: "pod", shortNames: []string{"po"}, categories: []string{"all"}, namespaced: true,
			newObj: func() runtime.Object { return &corev1.Pod{} }, newList: func() runtime.Object { return &corev1.PodList{} },
			status: true, generation: true,
			selectableFields: []string{"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
				"spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName"},
			fields: podFields, indexedField: "spec.nodeName",
			indexValue: func(o runtime.Object) string { return o.(*corev1.Pod).Spec.NodeName },
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
				col("Status", "string", "The aggregate status of the containers in this pod."),
				col("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
				ageCol(),
				wide("IP", "string", "IP address allocated to the pod."),
				wide("Node", "string", "Name of the node the pod is assigned to."),
				wide("Nominated Node", "string", "Name of the node the pod is nominated to by the scheduler."),
				wide("Readiness Gates", "string", "The readiness gates of the pod."),
			},
			row:   podRow,
			hooks: podHooks(),
		},
		{
			kind: "Node", plural: "nodes", singular: "node", shortNames: []string{"no"},
			newObj: func() runtime.Object { return &corev1.Node{} }, newList: func() runtime.Object { return &corev1.NodeList{} },
			status: true, selectableFields: []string{"spec.unschedulable"},
			fields: func(o runtime.Object) fields.Set {
				return fields.Set{"spec.unschedulable": strconv.FormatBool(o.(*corev1.Node).Spec.Unschedulable)}
			},
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("Status", "string", "The status of the node"), col("Roles", "string", "The roles of the node"),
				ageCol(), col("Version", "string", "Kubelet Version reported by the node."),
				wide("Internal-IP", "string", "Internal IP of the node"), wide("External-IP", "string", "External IP of the node"),
				wide("OS-Image", "string", "OS image reported by the node."), wide("Kernel-Version", "string", "Kernel version reported by the node."),
				wide("Container-Runtime", "string", "Container runtime reported by the node."),
			},
			row:   nodeRow,
			hooks: hooks{validate: validateNode},
		},
		{
			kind: "PersistentVolume", plural: "persistentvolumes", singular: "persistentvolume", shortNames: []string{"pv"},
			newObj: func() runtime.Object { return &corev1.PersistentVolume{} }, newList: func() runtime.Object { return &corev1.PersistentVolumeList{} },
			status: true,
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("Capacity", "string", "The storage capacity of the volume"), col("Access Modes", "string", "Access modes of the volume"),
				col("Reclaim Policy", "string", "What happens to a released volume"), col("Status", "string", "The phase of the volume"),
				col("Claim", "string", "The claim bound to the volume"), col("StorageClass", "string", "The storage class of the volume"),
				col("VolumeAttributesClass", "string", "The volume attributes class of the volume"),
				col("Reason", "string", "Why the volume is in this phase"), ageCol(), wide("VolumeMode", "string", "Filesystem or Block"),
			},
			row:   pvRow,
			hooks: pvHooks(),
		},
		{
			kind: "PersistentVolumeClaim", plural: "persistentvolumeclaims", singular: "persistentvolumeclaim", shortNames: []string{"pvc"}, namespaced: true,
			newObj: func() runtime.Object { return &corev1.PersistentVolumeClaim{} }, newList: func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },
			status: true,
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("Status", "string", "The phase of the claim"), col("Volume", "string", "The volume bound to the claim"),
				col("Capacity", "string", "The capacity of the bound volume"), col("Access Modes", "string", "Access modes of the bound volume"),
				col("StorageClass", "string", "The storage class of the claim"),
				col("VolumeAttributesClass", "string", "The volume attributes class of the claim"), ageCol(),
				wide("VolumeMode", "string", "Filesystem or Block"),
			},
			row:   pvcRow,
			hooks: pvcHooks(),
		},
		{
			kind: "Service", plural: "services", singular: "service", shortNames: []string{"svc"}, categories: []string{"all"}, namespaced: true,
			newObj: func() runtime.Object { return &corev1.Service{} }, newList: func() runtime.Object { return &corev1.ServiceList{} },
			status: true, selectableFields: []string{"spec.clusterIP", "spec.type"},
			fields: func(o runtime.Object) fields.Set {
				s := o.(*corev1.Service)
				return fields.Set{"spec.clusterIP": s.Spec.ClusterIP, "spec.type": string(s.Spec.Type)}
			},
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("Type", "string", "The type of the service"), col("Cluster-IP", "string", "The cluster IP of the service"),
				col("External-IP", "string", "External IPs of the service"), col("Port(s)", "string", "The ports of the service"),
				ageCol(), wide("Selector", "string", "The pods the service selects"),
			},
			row:   serviceRow,
			hooks: serviceHooks(),
		},
		{
			kind: "Endpoints", plural: "endpoints", singular: "endpoints", shortNames: []string{"ep"}, namespaced: true,
			newObj: func() runtime.Object { return &corev1.Endpoints{} }, newList: func() runtime.Object { return &corev1.EndpointsList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("Endpoints", "string", "The endpoints"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				ep := o.(*corev1.Endpoints)
				var out []string
				for _, ss := range ep.Subsets {
					for _, a := range ss.Addresses {
						for _, p := range ss.Ports {
							out = append(out, fmt.Sprintf("%s:%d", a.IP, p.Port))
						}
						if len(ss.Ports) == 0 {
							out = append(out, a.IP)
						}
					}
				}
				return []interface{}{ep.Name, joinOrNone(out), age(ep.CreationTimestamp)}
			},
		},
		{
			kind: "ConfigMap", plural: "configmaps", singular: "configmap", shortNames: []string{"cm"}, namespaced: true,
			newObj: func() runtime.Object { return &corev1.ConfigMap{} }, newList: func() runtime.Object { return &corev1.ConfigMapList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("Data", "string", "Number of keys"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				cm := o.(*corev1.ConfigMap)
				return []interface{}{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), age(cm.CreationTimestamp)}
			},
			hooks: hooks{validate: validateConfigMap, validateUpdate: validateConfigMapUpdate},
		},
		{
			kind: "Secret", plural: "secrets", singular: "secret", namespaced: true,
			newObj: func() runtime.Object { return &corev1.Secret{} }, newList: func() runtime.Object { return &corev1.SecretList{} },
			selectableFields: []string{"type"},
			fields:           func(o runtime.Object) fields.Set { return fields.Set{"type": string(o.(*corev1.Secret).Type)} },
			columns:          []metav1.TableColumnDefinition{nameCol(), col("Type", "string", "The type of the secret"), col("Data", "string", "Number of keys"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				s := o.(*corev1.Secret)
				return []interface{}{s.Name, string(s.Type), int64(len(s.Data)), age(s.CreationTimestamp)}
			},
			hooks: hooks{validate: validateSecret, validateUpdate: validateSecretUpdate},
		},
		{
			kind: "ServiceAccount", plural: "serviceaccounts", singular: "serviceaccount", shortNames: []string{"sa"}, namespaced: true,
			newObj: func() runtime.Object { return &corev1.ServiceAccount{} }, newList: func() runtime.Object { return &corev1.ServiceAccountList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("Secrets", "string", "Number of secrets"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				sa := o.(*corev1.ServiceAccount)
				return []interface{}{sa.Name, int64(len(sa.Secrets)), age(sa.CreationTimestamp)}
			},
		},
		{
			kind: "LimitRange", plural: "limitranges", singular: "limitrange", shortNames: []string{"limits"}, namespaced: true,
			newObj: func() runtime.Object { return &corev1.LimitRange{} }, newList: func() runtime.Object { return &corev1.LimitRangeList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("Created At", "date", metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"])},
			row: func(o runtime.Object) []interface{} {
				lr := o.(*corev1.LimitRange)
				return []interface{}{lr.Name, lr.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z")}
			},
			hooks: hooks{validate: validateLimitRange},
		},
		{
			kind: "ResourceQuota", plural: "resourcequotas", singular: "resourcequota", shortNames: []string{"quota"}, namespaced: true,
			newObj: func() runtime.Object { return &corev1.ResourceQuota{} }, newList: func() runtime.Object { return &corev1.ResourceQuotaList{} },
			status: true,
			columns: []metav1.TableColumnDefinition{nameCol(), ageCol(),
				col("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume."),
				col("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
			},
			row:   quotaRow,
			hooks: hooks{validate: validateResourceQuota},
		},
		{
			kind: "Event", plural: "events", singular: "event", shortNames: []string{"ev"}, namespaced: true,
			newObj: func() runtime.Object { return &corev1.Event{} }, newList: func() runtime.Object { return &corev1.EventList{} },
			selectableFields: eventFieldLabels,
			fields:           eventFields,
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
	}
}

var eventFieldLabels = []string{"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
	"involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
	"reason", "reportingComponent", "source", "type"}

// eventsV1FieldLabels are the field labels events.k8s.io/v1 accepts, each with the
// core/v1 label of the Events both APIs share (eventFields).
var eventsV1FieldLabels = map[string]string{
	"regarding.kind": "involvedObject.kind", "regarding.namespace": "involvedObject.namespace",
	"regarding.name": "involvedObject.name", "regarding.uid": "involvedObject.uid",
	"regarding.apiVersion": "involvedObject.apiVersion", "regarding.resourceVersion": "involvedObject.resourceVersion",
	"regarding.fieldPath": "involvedObject.fieldPath", "reportingController": "reportingComponent",
	"reason": "reason", "source": "source", "type": "type",
}

// eventsV1SelectableFields are the keys of eventsV1FieldLabels, sorted.
func eventsV1SelectableFields() []string {
	out := make([]string, 0, len(eventsV1FieldLabels))
	for label := range eventsV1FieldLabels {
		out = append(out, label)
	}
	sort.Strings(out)
	return out
}

func eventFields(o runtime.Object) fields.Set {
	e := o.(*corev1.Event)
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	return fields.Set{
		"involvedObject.kind": e.InvolvedObject.Kind, "involvedObject.namespace": e.InvolvedObject.Namespace,
		"involvedObject.name": e.InvolvedObject.Name, "involvedObject.uid": string(e.InvolvedObject.UID),
		"involvedObject.apiVersion": e.InvolvedObject.APIVersion, "involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath": e.InvolvedObject.FieldPath, "reason": e.Reason,
		"reportingComponent": e.ReportingController, "source": source, "type": e.Type,
	}
}

func eventRow(o runtime.Object) []interface{} {
	e := o.(*corev1.Event)
	first, last := e.FirstTimestamp, e.LastTimestamp
	if last.IsZero() {
		last = metav1.NewTime(e.EventTime.Time)
	}
	if first.IsZero() {
		first = metav1.NewTime(e.EventTime.Time)
	}
	object := strings.ToLower(e.InvolvedObject.Kind) + "/" + e.InvolvedObject.Name
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	if e.Source.Host != "" {
		source += ", " + e.Source.Host
	}
	count := e.Count
	if count == 0 && e.Series != nil {
		count = e.Series.Count
	}
	return []interface{}{age(last), e.Type, e.Reason, object, e.InvolvedObject.FieldPath, source,
		strings.TrimSpace(e.Message), age(first), int64(count), e.Name}
}

func podFields(o runtime.Object) fields.Set {
	p := o.(*corev1.Pod)
	ips := make([]string, 0, len(p.Status.PodIPs))
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	return fields.Set{
		"spec.nodeName": p.Spec.NodeName, "spec.restartPolicy": string(p.Spec.RestartPolicy),
		"spec.schedulerName": p.Spec.SchedulerName, "spec.serviceAccountName": p.Spec.ServiceAccountName,
		"spec.hostNetwork": strconv.FormatBool(p.Spec.HostNetwork), "status.phase": string(p.Status.Phase),
		"status.podIP": p.Status.PodIP, "status.podIPs": strings.Join(ips, ","),
		"status.nominatedNodeName": p.Status.NominatedNodeName,
	}
}

// podRow computes READY, STATUS and RESTARTS the way kubectl users know them.
func podRow(o runtime.Object) []interface{} {
	p := o.(*corev1.Pod)
	total := len(p.Spec.Containers)
	ready, restarts := 0, int32(0)
	reason := string(p.Status.Phase)
	if p.Status.Reason != "" {
		reason = p.Status.Reason
	}
	initializing := false
	for i, c := range p.Status.InitContainerStatuses {
		restarts += c.RestartCount
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case c.State.Terminated != nil:
			reason = "Init:" + orDefault(c.State.Terminated.Reason, fmt.Sprintf("ExitCode:%d", c.State.Terminated.ExitCode))
		case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + c.State.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(p.Spec.InitContainers))
		}
		initializing = true
		break
	}
	if !initializing {
		hasRunning := false
		for i := len(p.Status.ContainerStatuses) - 1; i >= 0; i-- {
			c := p.Status.ContainerStatuses[i]
			restarts += c.RestartCount
			switch {
			case c.State.Waiting != nil && c.State.Waiting.Reason != "":
				reason = c.State.Waiting.Reason
			case c.State.Terminated != nil && c.State.Terminated.Reason != "":
				reason = c.State.Terminated.Reason
			case c.State.Terminated != nil:
				reason = fmt.Sprintf("ExitCode:%d", c.State.Terminated.ExitCode)
			case c.Ready && c.State.Running != nil:
				hasRunning = true
				ready++
			}
		}
		if reason == "Completed" && hasRunning {
			reason = "Running"
		}
	}
	if p.DeletionTimestamp != nil {
		reason = "Terminating"
	}
	gates := "<none>"
	if n := len(p.Spec.ReadinessGates); n > 0 {
		gates = fmt.Sprintf("0/%d", n)
	}
	return []interface{}{p.Name, fmt.Sprintf("%d/%d", ready, total), reason, int64(restarts), age(p.CreationTimestamp),
		orNone(p.Status.PodIP), orNone(p.Spec.NodeName), orNone(p.Status.NominatedNodeName), gates}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func nodeRow(o runtime.Object) []interface{} {
	n := o.(*corev1.Node)
	status := "Unknown"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				status = "Ready"
			} else {
				status = "NotReady"
			}
		}
	}
	if n.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	var roles []string
	for k := range n.Labels {
		if r, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok && r != "" {
			roles = append(roles, r)
		}
	}
	internal, external := "<none>", "<none>"
	for _, a := range n.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP:
			internal = a.Address
		case corev1.NodeExternalIP:
			external = a.Address
		}
	}
	info := n.Status.NodeInfo
	return []interface{}{n.Name, status, joinOrNone(roles), age(n.CreationTimestamp), info.KubeletVersion,
		internal, external, orUnknown(info.OSImage), orUnknown(info.KernelVersion), orUnknown(info.ContainerRuntimeVersion)}
}

func orUnknown(s string) string { return orDefault(s, "<unknown>") }

func accessModes(modes []corev1.PersistentVolumeAccessMode) string {
	short := map[corev1.PersistentVolumeAccessMode]string{
		corev1.ReadWriteOnce: "RWO", corev1.ReadOnlyMany: "ROX", corev1.ReadWriteMany: "RWX", corev1.ReadWriteOncePod: "RWOP",
	}
	var out []string
	for _, m := range modes {
		out = append(out, short[m])
	}
	return strings.Join(out, ",")
}

func volumeMode(m *corev1.PersistentVolumeMode) string {
	if m == nil {
		return "<unset>"
	}
	return string(*m)
}

func pvRow(o runtime.Object) []interface{} {
	pv := o.(*corev1.PersistentVolume)
	claim := ""
	if pv.Spec.ClaimRef != nil {
		claim = pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name
	}
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	return []interface{}{pv.Name, size.String(), accessModes(pv.Spec.AccessModes), string(pv.Spec.PersistentVolumeReclaimPolicy),
		string(pv.Status.Phase), claim, pv.Spec.StorageClassName, orUnset(pv.Spec.VolumeAttributesClassName),
		pv.Status.Reason, age(pv.CreationTimestamp), volumeMode(pv.Spec.VolumeMode)}
}

func orUnset(s *string) string {
	if s == nil || *s == "" {
		return "<unset>"
	}
	return *s
}

func pvcRow(o runtime.Object) []interface{} {
	pvc := o.(*corev1.PersistentVolumeClaim)
	capacity, modes := "", ""
	if pvc.Spec.VolumeName != "" {
		modes = accessModes(pvc.Status.AccessModes)
		if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
			capacity = q.String()
		}
	}
	phase := string(pvc.Status.Phase)
	if pvc.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	sc := ""
	if pvc.Spec.StorageClassName != nil {
		sc = *pvc.Spec.StorageClassName
	}
	return []interface{}{pvc.Name, phase, pvc.Spec.VolumeName, capacity, modes, sc,
		orUnset(pvc.Spec.VolumeAttributesClassName), age(pvc.CreationTimestamp), volumeMode(pvc.Spec.VolumeMode)}
}

func serviceRow(o runtime.Object) []interface{} {
	s := o.(*corev1.Service)
	external := "<none>"
	switch s.Spec.Type {
	case corev1.ServiceTypeExternalName:
		external = s.Spec.ExternalName
	case corev1.ServiceTypeLoadBalancer:
		var ips []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			ips = append(ips, orDefault(in.IP, in.Hostname))
		}
		ips = append(ips, s.Spec.ExternalIPs...)
		external = orDefault(strings.Join(ips, ","), "<pending>")
	default:
		if len(s.Spec.ExternalIPs) > 0 {
			external = strings.Join(s.Spec.ExternalIPs, ",")
		}
	}
	var ports []string
	for _, p := range s.Spec.Ports {
		port := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if p.NodePort > 0 {
			port = fmt.Sprintf("%d:%d/%s", p.Port, p.NodePort, p.Protocol)
		}
		ports = append(ports, port)
	}
	return []interface{}{s.Name, string(s.Spec.Type), orNone(s.Spec.ClusterIP), external, joinOrNone(ports),
		age(s.CreationTimestamp), labelMap(s.Spec.Selector)}
}

// quotaRow shows used/hard per resource, limits.* under LIMIT and the rest under REQUEST.
func quotaRow(o runtime.Object) []interface{} {
	rq := o.(*corev1.ResourceQuota)
	names := make([]string, 0, len(rq.Spec.Hard))
	for name := range rq.Spec.Hard {
		names = append(names, string(name))
	}
	sort.Strings(names)
	var requests, limits []string
	for _, name := range names {
		used, hard := rq.Status.Used[corev1.ResourceName(name)], rq.Status.Hard[corev1.ResourceName(name)]
		cell := fmt.Sprintf("%s: %s/%s", name, used.String(), hard.String())
		if strings.HasPrefix(name, "limits.") {
			limits = append(limits, cell)
		} else {
			requests = append(requests, cell)
		}
	}
	return []interface{}{rq.Name, age(rq.CreationTimestamp), strings.Join(requests, ", "), strings.Join(limits, ", ")}
}
