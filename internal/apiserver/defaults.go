package apiserver

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
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
		if p.Spec.ServiceAccountName == "" {
			p.Spec.ServiceAccountName = "default"
		}
	})
	s.AddTypeDefaultingFunc(&corev1.Service{}, func(o interface{}) { defaultService(o.(*corev1.Service)) })
	s.AddTypeDefaultingFunc(&corev1.PodTemplate{}, func(o interface{}) { defaultPodSpec(&o.(*corev1.PodTemplate).Template.Spec) })
	s.AddTypeDefaultingFunc(&corev1.ReplicationController{}, func(o interface{}) {
		defaultReplicationController(o.(*corev1.ReplicationController))
	})
	s.AddTypeDefaultingFunc(&batchv1.Job{}, func(o interface{}) { defaultJobSpec(&o.(*batchv1.Job).Spec) })
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
	})
	s.AddTypeDefaultingFunc(&corev1.PersistentVolume{}, func(o interface{}) {
		pv := o.(*corev1.PersistentVolume)
		if pv.Spec.VolumeMode == nil {
			pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeFilesystem)
		}
		if pv.Spec.PersistentVolumeReclaimPolicy == "" {
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
		}
	})
	s.AddTypeDefaultingFunc(&networkingv1.NetworkPolicy{}, func(o interface{}) { defaultNetworkPolicy(o.(*networkingv1.NetworkPolicy)) })
	s.AddTypeDefaultingFunc(&corev1.Secret{}, func(o interface{}) {
		if sec := o.(*corev1.Secret); sec.Type == "" {
			sec.Type = corev1.SecretTypeOpaque
		}
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
		if ss.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && ss.Spec.UpdateStrategy.RollingUpdate == nil {
			ss.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)}
		}
		if ss.Spec.RevisionHistoryLimit == nil {
			ss.Spec.RevisionHistoryLimit = ptr.To[int32](10)
		}
		if ss.Spec.PersistentVolumeClaimRetentionPolicy == nil {
			ss.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			}
		}
		for i := range ss.Spec.VolumeClaimTemplates {
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
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptr.To(true)
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		switch {
		case v.ConfigMap != nil && v.ConfigMap.DefaultMode == nil:
			v.ConfigMap.DefaultMode = ptr.To[int32](corev1.ConfigMapVolumeSourceDefaultMode)
		case v.Secret != nil && v.Secret.DefaultMode == nil:
			v.Secret.DefaultMode = ptr.To[int32](corev1.SecretVolumeSourceDefaultMode)
		}
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
