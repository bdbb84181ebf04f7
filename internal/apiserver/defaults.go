package apiserver

import (
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// addDefaults registers the defaulting the API server applies to every decoded object,
// the defaults users see in `kubectl get -o yaml` on any cluster.
func addDefaults(s *runtime.Scheme) {
	s.AddTypeDefaultingFunc(&corev1.Pod{}, func(o interface{}) {
		p := o.(*corev1.Pod)
		defaultPodSpec(&p.Spec)
		// Pod-only defaults: templates keep these unset.
		if p.Spec.EnableServiceLinks == nil {
			p.Spec.EnableServiceLinks = ptr.To(true)
		}
		if p.Spec.HostNetwork {
			for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
				for i := range list {
					for j := range list[i].Ports {
						if list[i].Ports[j].HostPort == 0 {
							list[i].Ports[j].HostPort = list[i].Ports[j].ContainerPort
						}
					}
				}
			}
		}
		if g := p.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
		}
		// A mirror pod names no service account (a kubelet may not create one that does);
		// every other pod runs as "default" unless it names one.
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; p.Spec.ServiceAccountName == "" && !mirror {
			p.Spec.ServiceAccountName = "default"
		}
		p.Spec.DeprecatedServiceAccount = p.Spec.ServiceAccountName
	})
	s.AddTypeDefaultingFunc(&corev1.Service{}, func(o interface{}) { defaultService(o.(*corev1.Service)) })
	s.AddTypeDefaultingFunc(&corev1.PodTemplate{}, func(o interface{}) { defaultPodSpec(&o.(*corev1.PodTemplate).Template.Spec) })
	s.AddTypeDefaultingFunc(&corev1.ReplicationController{}, func(o interface{}) {
		defaultReplicationController(o.(*corev1.ReplicationController))
	})
	s.AddTypeDefaultingFunc(&batchv1.Job{}, func(o interface{}) {
		j := o.(*batchv1.Job)
		defaultJobSpec(&j.Spec)
		// A Job without labels takes its template's.
		if len(j.Labels) == 0 && j.Spec.Template.Labels != nil {
			j.Labels = make(map[string]string, len(j.Spec.Template.Labels))
			for k, v := range j.Spec.Template.Labels {
				j.Labels[k] = v
			}
		}
	})
	s.AddTypeDefaultingFunc(&batchv1.CronJob{}, func(o interface{}) { defaultCronJob(o.(*batchv1.CronJob)) })
	s.AddTypeDefaultingFunc(&autoscalingv2.HorizontalPodAutoscaler{}, func(o interface{}) {
		defaultHPA(o.(*autoscalingv2.HorizontalPodAutoscaler))
	})
	s.AddTypeDefaultingFunc(&autoscalingv1.HorizontalPodAutoscaler{}, func(o interface{}) {
		if h := o.(*autoscalingv1.HorizontalPodAutoscaler); h.Spec.MinReplicas == nil {
			h.Spec.MinReplicas = ptr.To[int32](1)
		}
	})
	s.AddTypeDefaultingFunc(&schedulingv1.PriorityClass{}, func(o interface{}) {
		if pc := o.(*schedulingv1.PriorityClass); pc.PreemptionPolicy == nil {
			pc.PreemptionPolicy = ptr.To(corev1.PreemptLowerPriority)
		}
	})
	s.AddTypeDefaultingFunc(&corev1.LimitRange{}, func(o interface{}) {
		lr := o.(*corev1.LimitRange)
		for i := range lr.Spec.Limits {
			defaultLimitRangeItem(&lr.Spec.Limits[i])
		}
	})
	s.AddTypeDefaultingFunc(&corev1.PersistentVolumeClaim{}, func(o interface{}) {
		pvc := o.(*corev1.PersistentVolumeClaim)
		if pvc.Spec.VolumeMode == nil {
			pvc.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
		}
		normalizeDataSources(&pvc.Spec)
	})
	s.AddTypeDefaultingFunc(&rbacv1.RoleBinding{}, func(o interface{}) {
		b := o.(*rbacv1.RoleBinding)
		defaultRoleRef(&b.RoleRef)
		defaultSubjects(b.Subjects)
	})
	s.AddTypeDefaultingFunc(&rbacv1.ClusterRoleBinding{}, func(o interface{}) {
		b := o.(*rbacv1.ClusterRoleBinding)
		defaultRoleRef(&b.RoleRef)
		defaultSubjects(b.Subjects)
	})
	s.AddTypeDefaultingFunc(&networkingv1.IngressClass{}, func(o interface{}) {
		if p := o.(*networkingv1.IngressClass).Spec.Parameters; p != nil && p.Scope == nil {
			p.Scope = ptr.To(networkingv1.IngressClassParametersReferenceScopeCluster)
		}
	})
	s.AddTypeDefaultingFunc(&corev1.Endpoints{}, func(o interface{}) {
		for i := range o.(*corev1.Endpoints).Subsets {
			ports := o.(*corev1.Endpoints).Subsets[i].Ports
			for j := range ports {
				if ports[j].Protocol == "" {
					ports[j].Protocol = corev1.ProtocolTCP
				}
			}
		}
	})
	s.AddTypeDefaultingFunc(&discoveryv1.EndpointSlice{}, func(o interface{}) {
		es := o.(*discoveryv1.EndpointSlice)
		for i := range es.Ports {
			if es.Ports[i].Name == nil {
				es.Ports[i].Name = ptr.To("")
			}
			if es.Ports[i].Protocol == nil {
				es.Ports[i].Protocol = ptr.To(corev1.ProtocolTCP)
			}
		}
	})
	s.AddTypeDefaultingFunc(&coordinationv1.Lease{}, func(o interface{}) {
		// Coordinated leader election is off: its fields are dropped.
		l := o.(*coordinationv1.Lease)
		l.Spec.Strategy, l.Spec.PreferredHolder = nil, nil
	})
	s.AddTypeDefaultingFunc(&corev1.PersistentVolume{}, func(o interface{}) {
		pv := o.(*corev1.PersistentVolume)
		if pv.Spec.VolumeMode == nil {
			pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
		}
		if pv.Spec.HostPath != nil && pv.Spec.HostPath.Type == nil {
			pv.Spec.HostPath.Type = ptr.To(corev1.HostPathUnset)
		}
		if pv.Spec.PersistentVolumeReclaimPolicy == "" {
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
		}
	})
	s.AddTypeDefaultingFunc(&networkingv1.NetworkPolicy{}, func(o interface{}) { defaultNetworkPolicy(o.(*networkingv1.NetworkPolicy)) })
	s.AddTypeDefaultingFunc(&corev1.Secret{}, func(o interface{}) {
		sec := o.(*corev1.Secret)
		if sec.Type == "" {
			sec.Type = corev1.SecretTypeOpaque
		}
		// stringData is write-only: it is merged into data, overriding the same keys.
		if sec.StringData != nil {
			if sec.Data == nil {
				sec.Data = make(map[string][]byte, len(sec.StringData))
			}
			for k, v := range sec.StringData {
				sec.Data[k] = []byte(v)
			}
			sec.StringData = nil
		}
	})
	s.AddTypeDefaultingFunc(&corev1.Namespace{}, func(o interface{}) { defaultNamespaceLabel(o.(*corev1.Namespace)) })
	s.AddTypeDefaultingFunc(&certificatesv1.PodCertificateRequest{}, func(o interface{}) {
		defaultPodCertificateRequest(o.(*certificatesv1.PodCertificateRequest))
	})
	s.AddTypeDefaultingFunc(&storagev1.StorageClass{}, func(o interface{}) {
		sc := o.(*storagev1.StorageClass)
		if sc.ReclaimPolicy == nil {
			sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimDelete)
		}
		if sc.VolumeBindingMode == nil {
			sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
		}
	})
	s.AddTypeDefaultingFunc(&storagev1.CSIDriver{}, func(o interface{}) {
		d := o.(*storagev1.CSIDriver)
		for _, b := range []**bool{&d.Spec.PodInfoOnMount, &d.Spec.RequiresRepublish, &d.Spec.StorageCapacity, &d.Spec.SELinuxMount} {
			if *b == nil {
				*b = ptr.To(false)
			}
		}
		if d.Spec.AttachRequired == nil {
			d.Spec.AttachRequired = ptr.To(true)
		}
		if len(d.Spec.VolumeLifecycleModes) == 0 {
			d.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
		}
		if d.Spec.PreventPodSchedulingIfMissing == nil {
			d.Spec.PreventPodSchedulingIfMissing = ptr.To(false)
		}
		if d.Spec.FSGroupPolicy == nil {
			d.Spec.FSGroupPolicy = ptr.To(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)
		}
	})
	s.AddTypeDefaultingFunc(&appsv1.Deployment{}, func(o interface{}) {
		d := o.(*appsv1.Deployment)
		defaultReplicas(&d.Spec.Replicas)
		defaultPodSpec(&d.Spec.Template.Spec)
		if d.Spec.Strategy.Type == "" {
			d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
		}
		if d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType {
			if d.Spec.Strategy.RollingUpdate == nil {
				d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{}
			}
			quarter := intstr.FromString("25%")
			if d.Spec.Strategy.RollingUpdate.MaxUnavailable == nil {
				d.Spec.Strategy.RollingUpdate.MaxUnavailable = &quarter
			}
			if d.Spec.Strategy.RollingUpdate.MaxSurge == nil {
				d.Spec.Strategy.RollingUpdate.MaxSurge = &quarter
			}
		}
		if d.Spec.RevisionHistoryLimit == nil {
			d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
		}
		if d.Spec.ProgressDeadlineSeconds == nil {
			d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
		}
	})
	s.AddTypeDefaultingFunc(&appsv1.ReplicaSet{}, func(o interface{}) {
		rs := o.(*appsv1.ReplicaSet)
		defaultReplicas(&rs.Spec.Replicas)
		defaultPodSpec(&rs.Spec.Template.Spec)
	})
	s.AddTypeDefaultingFunc(&appsv1.StatefulSet{}, func(o interface{}) {
		ss := o.(*appsv1.StatefulSet)
		defaultReplicas(&ss.Spec.Replicas)
		defaultPodSpec(&ss.Spec.Template.Spec)
		if ss.Spec.PodManagementPolicy == "" {
			ss.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
		}
		if ss.Spec.UpdateStrategy.Type == "" {
			ss.Spec.UpdateStrategy.Type = appsv1.RollingUpdateStatefulSetStrategyType
		}
		if ss.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType {
			if ss.Spec.UpdateStrategy.RollingUpdate == nil {
				ss.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
			}
			ru := ss.Spec.UpdateStrategy.RollingUpdate
			if ru.Partition == nil {
				ru.Partition = ptr.To[int32](0)
			}
			if ru.MaxUnavailable == nil {
				one := intstr.FromInt32(1)
				ru.MaxUnavailable = &one
			}
		}
		if ss.Spec.RevisionHistoryLimit == nil {
			ss.Spec.RevisionHistoryLimit = ptr.To[int32](10)
		}
		if ss.Spec.PersistentVolumeClaimRetentionPolicy == nil {
			ss.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
		}
		if rp := ss.Spec.PersistentVolumeClaimRetentionPolicy; rp.WhenDeleted == "" {
			rp.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
		}
		if rp := ss.Spec.PersistentVolumeClaimRetentionPolicy; rp.WhenScaled == "" {
			rp.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
		}
		for i := range ss.Spec.VolumeClaimTemplates {
			vct := &ss.Spec.VolumeClaimTemplates[i]
			if vct.APIVersion == "" {
				vct.APIVersion = "v1"
			}
			if vct.Kind == "" {
				vct.Kind = "PersistentVolumeClaim"
			}
			if vct.Status.Phase == "" {
				vct.Status.Phase = corev1.ClaimPending
			}
			if ss.Spec.VolumeClaimTemplates[i].Spec.VolumeMode == nil {
				ss.Spec.VolumeClaimTemplates[i].Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
			}
		}
	})
	s.AddTypeDefaultingFunc(&appsv1.DaemonSet{}, func(o interface{}) {
		ds := o.(*appsv1.DaemonSet)
		defaultPodSpec(&ds.Spec.Template.Spec)
		if ds.Spec.UpdateStrategy.Type == "" {
			ds.Spec.UpdateStrategy.Type = appsv1.RollingUpdateDaemonSetStrategyType
		}
		if ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType && ds.Spec.UpdateStrategy.RollingUpdate == nil {
			one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
			ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &one, MaxSurge: &zero}
		}
		if ds.Spec.RevisionHistoryLimit == nil {
			ds.Spec.RevisionHistoryLimit = ptr.To[int32](10)
		}
	})
}

// defaultNamespaceLabel sets the immutable label naming a namespace.
func defaultNamespaceLabel(ns *corev1.Namespace) {
	if ns.Name == "" {
		return
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

// normalizeDataSources drops a dataSource of a kind other than PersistentVolumeClaim or
// VolumeSnapshot and mirrors dataSource and dataSourceRef into each other.
func normalizeDataSources(spec *corev1.PersistentVolumeClaimSpec) {
	if ds := spec.DataSource; ds != nil {
		group := ""
		if ds.APIGroup != nil {
			group = *ds.APIGroup
		}
		pvc := group == "" && ds.Kind == "PersistentVolumeClaim"
		snap := group == "snapshot.storage.k8s.io" && ds.Kind == "VolumeSnapshot"
		if !pvc && !snap {
			spec.DataSource = nil
		}
	}
	switch {
	case spec.DataSource != nil && spec.DataSourceRef == nil:
		spec.DataSourceRef = &corev1.TypedObjectReference{
			APIGroup: spec.DataSource.APIGroup, Kind: spec.DataSource.Kind, Name: spec.DataSource.Name,
		}
	case spec.DataSourceRef != nil && spec.DataSource == nil && spec.DataSourceRef.Namespace == nil:
		spec.DataSource = &corev1.TypedLocalObjectReference{
			APIGroup: spec.DataSourceRef.APIGroup, Kind: spec.DataSourceRef.Kind, Name: spec.DataSourceRef.Name,
		}
	}
}

// defaultRoleRef fills an empty roleRef.apiGroup: a binding refers to a Role or
// ClusterRole of rbac.authorization.k8s.io.
func defaultRoleRef(ref *rbacv1.RoleRef) {
	if ref.APIGroup == "" {
		ref.APIGroup = rbacv1.GroupName
	}
}

// defaultSubjects fills a binding subject's apiGroup from its kind.
func defaultSubjects(subjects []rbacv1.Subject) {
	for i := range subjects {
		sub := &subjects[i]
		if sub.APIGroup != "" {
			continue
		}
		switch sub.Kind {
		case rbacv1.UserKind, rbacv1.GroupKind:
			sub.APIGroup = rbacv1.GroupName
		}
	}
}

func defaultReplicas(r **int32) {
	if *r == nil {
		*r = ptr.To[int32](1)
	}
}

func defaultPodSpec(spec *corev1.PodSpec) {
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To[int64](corev1.DefaultTerminationGracePeriodSeconds)
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	// The deprecated serviceAccount field mirrors serviceAccountName in v1 output.
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.EphemeralContainers {
		defaultContainer((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	for i := range spec.Volumes {
		defaultVolumeSource(&spec.Volumes[i].VolumeSource)
	}
}

// defaultVolumeSource fills a pod volume's defaults; a volume without a source is an emptyDir.
func defaultVolumeSource(v *corev1.VolumeSource) {
	if reflect.ValueOf(*v).IsZero() {
		v.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	switch {
	case v.ConfigMap != nil && v.ConfigMap.DefaultMode == nil:
		v.ConfigMap.DefaultMode = ptr.To[int32](corev1.ConfigMapVolumeSourceDefaultMode)
	case v.Secret != nil && v.Secret.DefaultMode == nil:
		v.Secret.DefaultMode = ptr.To[int32](corev1.SecretVolumeSourceDefaultMode)
	case v.HostPath != nil && v.HostPath.Type == nil:
		v.HostPath.Type = ptr.To(corev1.HostPathUnset)
	case v.Image != nil && v.Image.PullPolicy == "":
		// As a container's imagePullPolicy: Always for :latest or no tag.
		v.Image.PullPolicy = corev1.PullIfNotPresent
		if tag := imageTag(v.Image.Reference); tag == "latest" || tag == "" {
			v.Image.PullPolicy = corev1.PullAlways
		}
	case v.DownwardAPI != nil:
		if v.DownwardAPI.DefaultMode == nil {
			v.DownwardAPI.DefaultMode = ptr.To[int32](corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		for i := range v.DownwardAPI.Items {
			defaultFieldRef(v.DownwardAPI.Items[i].FieldRef)
		}
	case v.Projected != nil:
		if v.Projected.DefaultMode == nil {
			v.Projected.DefaultMode = ptr.To[int32](corev1.ProjectedVolumeSourceDefaultMode)
		}
		for i := range v.Projected.Sources {
			src := &v.Projected.Sources[i]
			if src.DownwardAPI != nil {
				for j := range src.DownwardAPI.Items {
					defaultFieldRef(src.DownwardAPI.Items[j].FieldRef)
				}
			}
			if src.ServiceAccountToken != nil && src.ServiceAccountToken.ExpirationSeconds == nil {
				src.ServiceAccountToken.ExpirationSeconds = ptr.To[int64](3600)
			}
		}
	}
}

func defaultFieldRef(f *corev1.ObjectFieldSelector) {
	if f != nil && f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	defaultProbeHandler(&p.ProbeHandler)
	for _, f := range []struct {
		v   *int32
		def int32
	}{{&p.TimeoutSeconds, 1}, {&p.PeriodSeconds, 10}, {&p.SuccessThreshold, 1}, {&p.FailureThreshold, 3}} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
}

func defaultProbeHandler(h *corev1.ProbeHandler) {
	if h.HTTPGet != nil {
		defaultHTTPGet(h.HTTPGet)
	}
}

func defaultHTTPGet(g *corev1.HTTPGetAction) {
	if g.Path == "" {
		g.Path = "/"
	}
	if g.Scheme == "" {
		g.Scheme = corev1.URISchemeHTTP
	}
}

func defaultContainer(c *corev1.Container) {
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
		if imageTag(c.Image) == "latest" || imageTag(c.Image) == "" {
			c.ImagePullPolicy = corev1.PullAlways
		}
	}
	defaultProbe(c.LivenessProbe)
	defaultProbe(c.ReadinessProbe)
	defaultProbe(c.StartupProbe)
	if l := c.Lifecycle; l != nil {
		for _, h := range []*corev1.LifecycleHandler{l.PostStart, l.PreStop} {
			if h != nil && h.HTTPGet != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
	for i := range c.Env {
		if c.Env[i].ValueFrom != nil {
			defaultFieldRef(c.Env[i].ValueFrom.FieldRef)
		}
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	// Limits without requests: the requests are the limits.
	for name, q := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Requests[name] = q.DeepCopy()
		}
	}
}

// imageTag is the tag of an image reference ("" when there is none; a digest counts as pinned).
func imageTag(image string) string {
	if strings.Contains(image, "@") {
		return "digest"
	}
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		return image[colon+1:]
	}
	return ""
}

func defaultService(s *corev1.Service) {
	if s.Spec.Type == "" {
		s.Spec.Type = corev1.ServiceTypeClusterIP
	}
	if s.Spec.SessionAffinity == "" {
		s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	if s.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		if s.Spec.SessionAffinityConfig == nil {
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{}
		}
		if s.Spec.SessionAffinityConfig.ClientIP == nil {
			s.Spec.SessionAffinityConfig.ClientIP = &corev1.ClientIPConfig{}
		}
		if s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil {
			s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptr.To(corev1.DefaultClientIPServiceAffinitySeconds)
		}
	}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.AllocateLoadBalancerNodePorts == nil {
		s.Spec.AllocateLoadBalancerNodePorts = ptr.To(true)
	}
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == (intstr.IntOrString{}) {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	if s.Spec.Type != corev1.ServiceTypeExternalName {
		if s.Spec.InternalTrafficPolicy == nil {
			s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
		}
		if s.Spec.IPFamilyPolicy == nil {
			s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
		}
		if len(s.Spec.IPFamilies) == 0 {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		}
	}
	if (s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer) && s.Spec.ExternalTrafficPolicy == "" {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
}

// defaultLimitRangeItem fills a Container item's defaults from its bounds: a default
// limit from max, a default request from the default limit, else from min.
func defaultLimitRangeItem(item *corev1.LimitRangeItem) {
	if item.Type != corev1.LimitTypeContainer {
		return
	}
	if item.Default == nil {
		item.Default = corev1.ResourceList{}
	}
	if item.DefaultRequest == nil {
		item.DefaultRequest = corev1.ResourceList{}
	}
	for k, v := range item.Max {
		if _, ok := item.Default[k]; !ok {
			item.Default[k] = v.DeepCopy()
		}
	}
	for k, v := range item.Default {
		if _, ok := item.DefaultRequest[k]; !ok {
			item.DefaultRequest[k] = v.DeepCopy()
		}
	}
	for k, v := range item.Min {
		if _, ok := item.DefaultRequest[k]; !ok {
			item.DefaultRequest[k] = v.DeepCopy()
		}
	}
}
