package apiserver

import (
	"context"
	"fmt"
	"math"
	"net"
	"reflect"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubelab/kubelab/internal/util/podutil"
)

// podHooks give a new pod its Pending phase and QoS class, and check its spec on create
// and on update.
func podHooks() hooks {
	return hooks{
		prepareForCreate: func(o runtime.Object) {
			p := o.(*corev1.Pod)
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: podutil.ComputeQOSClass(p)}
		},
		prepareForStatusUpdate: func(o, old runtime.Object) {
			keepObservedGenerations(&o.(*corev1.Pod).Status, &old.(*corev1.Pod).Status)
		},
		validate:       validatePod,
		validateUpdate: validatePodUpdate,
		gracefulDelete: podGracefulDelete,
		validateCreate: validatePodCreate,
	}
}

// keepObservedGenerations keeps the observedGeneration of a pod's status, and of each of
// its conditions, that a status write leaves at 0: the old value, matching conditions
// of a type in order.
func keepObservedGenerations(status, old *corev1.PodStatus) {
	if status.ObservedGeneration == 0 {
		status.ObservedGeneration = old.ObservedGeneration
	}
	oldByType := map[corev1.PodConditionType][]int64{}
	for _, c := range old.Conditions {
		oldByType[c.Type] = append(oldByType[c.Type], c.ObservedGeneration)
	}
	for i := range status.Conditions {
		c := &status.Conditions[i]
		gens := oldByType[c.Type]
		if len(gens) == 0 {
			continue
		}
		oldByType[c.Type] = gens[1:]
		if c.ObservedGeneration == 0 {
			c.ObservedGeneration = gens[0]
		}
	}
}

func validatePod(o runtime.Object) field.ErrorList {
	spec := &o.(*corev1.Pod).Spec
	return append(validatePodSpec(spec, field.NewPath("spec"), nil), validateEphemeralContainers(spec, field.NewPath("spec", "ephemeralContainers"))...)
}

// validatePodSpec checks a pod's spec at path spec; claimVolumes are volume names that
// come from elsewhere (a StatefulSet's volumeClaimTemplates).
func validatePodSpec(podSpec *corev1.PodSpec, spec *field.Path, claimVolumes []string) field.ErrorList {
	p := &corev1.Pod{Spec: *podSpec}
	var errs field.ErrorList
	if len(p.Spec.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("containers"), ""))
	}
	volumes := sets.New(claimVolumes...)
	for i, v := range p.Spec.Volumes {
		vp := spec.Child("volumes").Index(i)
		errs = append(errs, dnsLabel(vp.Child("name"), v.Name)...)
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		volumes.Insert(v.Name)
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "" {
			errs = append(errs, field.Required(vp.Child("persistentVolumeClaim", "claimName"), ""))
		}
		errs = append(errs, validateVolumeSource(&v.VolumeSource, vp)...)
	}
	names := sets.New[string]()
	check := func(list []corev1.Container, p *field.Path) {
		for i, c := range list {
			cp := p.Index(i)
			errs = append(errs, dnsLabel(cp.Child("name"), c.Name)...)
			if names.Has(c.Name) {
				errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
			}
			names.Insert(c.Name)
			if c.Image == "" {
				errs = append(errs, field.Required(cp.Child("image"), ""))
			}
			for j, port := range c.Ports {
				switch {
				case port.ContainerPort == 0:
					errs = append(errs, field.Required(cp.Child("ports").Index(j).Child("containerPort"), ""))
				case port.ContainerPort < 1 || port.ContainerPort > 65535:
					errs = append(errs, field.Invalid(cp.Child("ports").Index(j).Child("containerPort"), port.ContainerPort, "must be between 1 and 65535, inclusive"))
				}
			}
			errs = append(errs, validateContainerExtra(&c, cp, podSpec.HostNetwork)...)
			for j, m := range c.VolumeMounts {
				mp := cp.Child("volumeMounts").Index(j)
				if !volumes.Has(m.Name) {
					errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
				}
				if m.MountPath == "" {
					errs = append(errs, field.Required(mp.Child("mountPath"), ""))
				}
			}
			errs = append(errs, nonNegative(cp.Child("resources", "requests"), c.Resources.Requests)...)
			errs = append(errs, nonNegative(cp.Child("resources", "limits"), c.Resources.Limits)...)
			errs = append(errs, validateResizePolicy(c.ResizePolicy, cp.Child("resizePolicy"), podSpec.RestartPolicy)...)
		}
	}
	// Regular containers first: a clashing name is reported on the init container.
	check(p.Spec.Containers, spec.Child("containers"))
	check(p.Spec.InitContainers, spec.Child("initContainers"))
	for i := range p.Spec.InitContainers {
		if c := &p.Spec.InitContainers[i]; !isRestartableInit(c) {
			for j, rp := range c.ResizePolicy {
				if rp.RestartPolicy == corev1.RestartContainer {
					errs = append(errs, field.Invalid(spec.Child("initContainers").Index(i).Child("resizePolicy").Index(j).Child("restartPolicy"),
						rp.RestartPolicy, "must not be set to 'RestartContainer' for non-sidecar initContainers"))
				}
			}
		}
	}
	errs = append(errs, validatePodSpecExtra(podSpec, spec)...)
	switch p.Spec.RestartPolicy {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), p.Spec.RestartPolicy,
			[]string{string(corev1.RestartPolicyAlways), string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever)}))
	}
	return errs
}

// validateResizePolicy: a container's resize policies name cpu or memory once each, with
// NotRequired or RestartContainer (only NotRequired in a pod whose restartPolicy is Never).
func validateResizePolicy(policies []corev1.ContainerResizePolicy, p *field.Path, podRestart corev1.RestartPolicy) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[corev1.ResourceName]()
	for i, rp := range policies {
		if seen.Has(rp.ResourceName) {
			errs = append(errs, field.Duplicate(p.Index(i), rp.ResourceName))
		}
		seen.Insert(rp.ResourceName)
		switch rp.ResourceName {
		case corev1.ResourceCPU, corev1.ResourceMemory:
		case "":
			errs = append(errs, field.Required(p, ""))
		default:
			errs = append(errs, field.NotSupported(p, rp.ResourceName, []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}))
		}
		switch rp.RestartPolicy {
		case corev1.NotRequired, corev1.RestartContainer:
		case "":
			errs = append(errs, field.Required(p, ""))
		default:
			errs = append(errs, field.NotSupported(p, rp.RestartPolicy, []corev1.ResourceResizeRestartPolicy{corev1.NotRequired, corev1.RestartContainer}))
		}
		if podRestart == corev1.RestartPolicyNever && rp.RestartPolicy != corev1.NotRequired {
			errs = append(errs, field.Invalid(p, rp.RestartPolicy, "must be 'NotRequired' when pod `restartPolicy` is 'Never'"))
		}
	}
	return errs
}

// validatePodUpdate: a pod's spec is fixed once created, but for container images,
// activeDeadlineSeconds (set, or lowered), added tolerations and removed scheduling gates.
func validatePodUpdate(o, old runtime.Object) field.ErrorList {
	p, op := o.(*corev1.Pod), old.(*corev1.Pod)
	errs := validateActiveDeadlineUpdate(p.Spec.ActiveDeadlineSeconds, op.Spec.ActiveDeadlineSeconds)
	if len(errs) > 0 && p.Spec.ActiveDeadlineSeconds != nil {
		return errs
	}
	mutable := p.Spec.DeepCopy()
	for i := range mutable.Containers {
		if i < len(op.Spec.Containers) {
			mutable.Containers[i].Image = op.Spec.Containers[i].Image
		}
	}
	for i := range mutable.InitContainers {
		if i < len(op.Spec.InitContainers) {
			mutable.InitContainers[i].Image = op.Spec.InitContainers[i].Image
		}
	}
	mutable.ActiveDeadlineSeconds = op.Spec.ActiveDeadlineSeconds
	mutable.Tolerations = op.Spec.Tolerations
	mutable.SchedulingGates = op.Spec.SchedulingGates
	if !apiequality.Semantic.DeepEqual(*mutable, op.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"),
			"pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"))
	}
	return errs
}

// validateActiveDeadlineUpdate: a pod's activeDeadlineSeconds may be set or lowered, not
// raised or removed.
func validateActiveDeadlineUpdate(now, was *int64) field.ErrorList {
	p := field.NewPath("spec", "activeDeadlineSeconds")
	switch {
	case now == nil && was != nil:
		return field.ErrorList{field.Invalid(p, now, "must not update from a positive integer to nil value")}
	case now == nil:
		return nil
	case *now < 0 || *now > math.MaxInt32:
		return field.ErrorList{field.Invalid(p, *now, utilvalidation.InclusiveRangeError(0, math.MaxInt32))}
	case was != nil && *was < *now:
		return field.ErrorList{field.Invalid(p, *now, "must be less than or equal to previous value")}
	}
	return nil
}

// podGracefulDelete: a pod on a node gets its grace period so the kubelet can stop it;
// a pod never scheduled, or already finished, goes at once.
func podGracefulDelete(ctx context.Context, o runtime.Object, options *metav1.DeleteOptions) bool {
	p := o.(*corev1.Pod)
	if options == nil {
		return false
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		grace = *p.Spec.TerminationGracePeriodSeconds
	}
	if options.GracePeriodSeconds != nil {
		grace = *options.GracePeriodSeconds
	}
	if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		grace = 0
	}
	if grace < 0 {
		grace = 1
	}
	options.GracePeriodSeconds = &grace
	return true
}

func nonNegative(p *field.Path, list corev1.ResourceList) field.ErrorList {
	var errs field.ErrorList
	for name, q := range list {
		if q.Cmp(apiresource.Quantity{}) < 0 {
			errs = append(errs, field.Invalid(p.Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
	}
	return errs
}

// validateVolumeSource checks one pod volume's source: exactly one type, and the
// fields of the common types.
func validateVolumeSource(v *corev1.VolumeSource, vp *field.Path) field.ErrorList {
	var errs field.ErrorList
	rv := reflect.ValueOf(*v)
	var set []string
	for i := 0; i < rv.NumField(); i++ {
		if !rv.Field(i).IsNil() {
			name, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("json"), ",")
			set = append(set, name)
		}
	}
	// Upstream looks at emptyDir before hostPath: the later type is the one reported.
	if len(set) > 1 && set[0] == "hostPath" && set[1] == "emptyDir" {
		set[0], set[1] = set[1], set[0]
	}
	for _, extra := range set[min(1, len(set)):] {
		errs = append(errs, field.Forbidden(vp.Child(extra), "may not specify more than 1 volume type"))
	}
	mode := func(m *int32, p *field.Path) {
		if m != nil && (*m < 0 || *m > 0777) {
			errs = append(errs, field.Invalid(p, *m, "must be a number between 0 and 0777 (octal), both inclusive"))
		}
	}
	switch {
	case v.HostPath != nil:
		if t := v.HostPath.Type; t != nil {
			valid := []corev1.HostPathType{corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory,
				corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev}
			if !slices.Contains(valid, *t) {
				errs = append(errs, field.NotSupported(vp.Child("hostPath", "type"), *t, valid))
			}
		}
	case v.EmptyDir != nil:
		if l := v.EmptyDir.SizeLimit; l != nil && l.Sign() < 0 {
			errs = append(errs, field.Forbidden(vp.Child("emptyDir", "sizeLimit"), "SizeLimit field must be a valid resource quantity"))
		}
	case v.ConfigMap != nil:
		mode(v.ConfigMap.DefaultMode, vp.Child("configMap", "defaultMode"))
	case v.Secret != nil:
		if v.Secret.SecretName == "" {
			errs = append(errs, field.Required(vp.Child("secret", "secretName"), ""))
		}
		mode(v.Secret.DefaultMode, vp.Child("secret", "defaultMode"))
	case v.Projected != nil:
		errs = append(errs, validateProjectedSources(v.Projected, vp.Child("projected"))...)
	case v.Image != nil:
		if v.Image.Reference == "" {
			errs = append(errs, field.Required(vp.Child("image", "reference"), ""))
		}
		if pol := v.Image.PullPolicy; pol != "" {
			valid := []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
			if !slices.Contains(valid, pol) {
				errs = append(errs, field.NotSupported(vp.Child("image", "pullPolicy"), pol, valid))
			}
		}
	}
	return errs
}

// downwardAPIPaths are the pod field paths a fieldRef may name (true: usable in env).
var downwardAPIPaths = map[string]bool{
	"metadata.name": true, "metadata.namespace": true, "metadata.uid": true, "spec.nodeName": true,
	"spec.serviceAccountName": true, "status.hostIP": true, "status.hostIPs": true, "status.podIP": true,
	"status.podIPs": true, "metadata.labels": false, "metadata.annotations": false, "spec.restartPolicy": false,
	"spec.schedulerName": false, "status.phase": false,
}

// validateContainerExtra: the container rules beyond names, images and mounts.
func validateContainerExtra(c *corev1.Container, cp *field.Path, hostNetwork bool) field.ErrorList {
	var errs field.ErrorList
	portNames := sets.New[string]()
	for j, port := range c.Ports {
		pp := cp.Child("ports").Index(j)
		if port.Name != "" {
			for _, msg := range utilvalidation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if portNames.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			portNames.Insert(port.Name)
		}
		if port.HostPort != 0 {
			for _, msg := range utilvalidation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
			}
		}
		// Pods have hostPort defaulted from containerPort; templates keep it unset.
		if hostNetwork && port.HostPort != 0 && port.HostPort != port.ContainerPort {
			errs = append(errs, field.Invalid(pp.Child("hostPort"), port.ContainerPort, "must match `containerPort` when `hostNetwork` is true"))
		}
		valid := []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}
		if !slices.Contains(valid, port.Protocol) {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, valid))
		}
	}
	if pol := c.ImagePullPolicy; pol != "" {
		valid := []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
		if !slices.Contains(valid, pol) {
			errs = append(errs, field.NotSupported(cp.Child("imagePullPolicy"), pol, valid))
		}
	}
	if pol := c.TerminationMessagePolicy; pol != "" {
		valid := []corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}
		if !slices.Contains(valid, pol) {
			errs = append(errs, field.NotSupported(cp.Child("terminationMessagePolicy"), pol, valid))
		}
	}
	for j, e := range c.Env {
		ep := cp.Child("env").Index(j)
		if e.Name == "" {
			errs = append(errs, field.Required(ep.Child("name"), ""))
		} else if strings.ContainsFunc(e.Name, func(r rune) bool { return r < ' ' || r > '~' || r == '=' }) {
			errs = append(errs, field.Invalid(ep.Child("name"), e.Name, "a valid environment variable name must consist only of printable ASCII characters other than '='"))
		}
		if e.ValueFrom == nil {
			continue
		}
		if e.Value != "" {
			errs = append(errs, field.Invalid(ep.Child("valueFrom"), "", "may not be specified when `value` is not empty"))
		}
		if f := e.ValueFrom.FieldRef; f != nil {
			fp := ep.Child("valueFrom", "fieldRef", "fieldPath")
			path, subscript, hasSubscript := strings.Cut(f.FieldPath, "[")
			envOK, known := downwardAPIPaths[path]
			switch {
			case !known || (hasSubscript && path != "metadata.labels" && path != "metadata.annotations"):
				errs = append(errs, field.Invalid(fp, f.FieldPath, "error converting fieldPath: field label not supported: "+f.FieldPath))
			case hasSubscript && !strings.HasSuffix(subscript, "]"):
				errs = append(errs, field.Invalid(fp, f.FieldPath, "error converting fieldPath: invalid subscript"))
			case !hasSubscript && !envOK:
				errs = append(errs, field.NotSupported(fp, f.FieldPath, []string{"metadata.name", "metadata.namespace", "metadata.uid",
					"spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"}))
			}
		}
	}
	for _, pr := range []struct {
		name     string
		probe    *corev1.Probe
		liveness bool
	}{{"livenessProbe", c.LivenessProbe, true}, {"readinessProbe", c.ReadinessProbe, false}, {"startupProbe", c.StartupProbe, true}} {
		if pr.probe == nil {
			continue
		}
		pp := cp.Child(pr.name)
		h := pr.probe.ProbeHandler
		errs = append(errs, validateHandlerCount(pp, h.Exec != nil, h.HTTPGet != nil, h.TCPSocket != nil, h.GRPC != nil)...)
		for _, f := range []struct {
			name string
			v    int32
		}{{"initialDelaySeconds", pr.probe.InitialDelaySeconds}, {"timeoutSeconds", pr.probe.TimeoutSeconds},
			{"periodSeconds", pr.probe.PeriodSeconds}, {"successThreshold", pr.probe.SuccessThreshold}, {"failureThreshold", pr.probe.FailureThreshold}} {
			if f.v < 0 {
				errs = append(errs, field.Invalid(pp.Child(f.name), f.v, "must be greater than or equal to 0"))
			}
		}
		if pr.liveness && pr.probe.SuccessThreshold != 1 {
			errs = append(errs, field.Invalid(pp.Child("successThreshold"), pr.probe.SuccessThreshold, "must be 1"))
		}
	}
	if l := c.Lifecycle; l != nil {
		for _, hk := range []struct {
			name string
			h    *corev1.LifecycleHandler
		}{{"postStart", l.PostStart}, {"preStop", l.PreStop}} {
			if hk.h == nil {
				continue
			}
			hp := cp.Child("lifecycle", hk.name)
			errs = append(errs, validateHandlerCount(hp, hk.h.Exec != nil, hk.h.HTTPGet != nil, hk.h.TCPSocket != nil, hk.h.Sleep != nil)...)
			if hk.h.Sleep != nil && hk.h.Sleep.Seconds < 0 {
				errs = append(errs, field.Invalid(hp.Child("sleep"), hk.h.Sleep.Seconds, "must be non-negative"))
			}
		}
	}
	for _, list := range []struct {
		name string
		rl   corev1.ResourceList
	}{{"requests", c.Resources.Requests}, {"limits", c.Resources.Limits}} {
		for name := range list.rl {
			if !strings.Contains(string(name), "/") && !standardContainerResources.Has(string(name)) && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
				errs = append(errs, field.Invalid(cp.Child("resources", list.name).Key(string(name)), name, "must be a standard resource type or fully qualified"))
			}
		}
	}
	for name, req := range c.Resources.Requests {
		if lim, ok := c.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(cp.Child("resources", "requests"), req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	mounts := sets.New[string]()
	for j, m := range c.VolumeMounts {
		if m.MountPath != "" && mounts.Has(m.MountPath) {
			errs = append(errs, field.Invalid(cp.Child("volumeMounts").Index(j).Child("mountPath"), m.MountPath, "must be unique"))
		}
		mounts.Insert(m.MountPath)
	}
	return errs
}

var standardContainerResources = sets.New("cpu", "memory", "ephemeral-storage")

// validateHandlerCount: a probe or lifecycle hook has exactly one handler type; the
// flags are in upstream's order (exec, httpGet, tcpSocket, then grpc or sleep).
func validateHandlerCount(p *field.Path, exec, httpGet, tcpSocket, fourth bool) field.ErrorList {
	names := []string{"exec", "httpGet", "tcpSocket", "grpc"}
	if p.String() != "" && strings.Contains(p.String(), "lifecycle") {
		names[3] = "sleep"
	}
	var errs field.ErrorList
	n := 0
	for i, set := range []bool{exec, httpGet, tcpSocket, fourth} {
		if !set {
			continue
		}
		if n > 0 {
			errs = append(errs, field.Forbidden(p.Child(names[i]), "may not specify more than 1 handler type"))
		}
		n++
	}
	if n == 0 {
		errs = append(errs, field.Required(p, "must specify a handler type"))
	}
	return errs
}

// validatePodSpecExtra: the pod-level rules beyond containers, volumes and restartPolicy.
func validatePodSpecExtra(ps *corev1.PodSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	dnsPolicies := []corev1.DNSPolicy{corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone}
	if ps.DNSPolicy != "" && !slices.Contains(dnsPolicies, ps.DNSPolicy) {
		errs = append(errs, field.NotSupported(spec.Child("dnsPolicy"), ps.DNSPolicy, dnsPolicies))
	}
	if ps.DNSPolicy == corev1.DNSNone && ps.DNSConfig == nil {
		errs = append(errs, field.Required(spec.Child("dnsConfig"), fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", corev1.DNSNone)))
	}
	if a := ps.ActiveDeadlineSeconds; a != nil && (*a < 1 || *a > math.MaxInt32) {
		errs = append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), *a, "must be between 1 and 2147483647, inclusive"))
	}
	if sc := ps.SecurityContext; sc != nil {
		scp := spec.Child("securityContext")
		for _, id := range []struct {
			name string
			v    *int64
		}{{"runAsUser", sc.RunAsUser}, {"runAsGroup", sc.RunAsGroup}, {"fsGroup", sc.FSGroup}} {
			if id.v != nil && (*id.v < 0 || *id.v > math.MaxInt32) {
				errs = append(errs, field.Invalid(scp.Child(id.name), *id.v, "must be between 0 and 2147483647, inclusive"))
			}
		}
		if p := sc.FSGroupChangePolicy; p != nil && *p != corev1.FSGroupChangeOnRootMismatch && *p != corev1.FSGroupChangeAlways {
			errs = append(errs, field.NotSupported(scp.Child("fsGroupChangePolicy"), *p, []corev1.PodFSGroupChangePolicy{corev1.FSGroupChangeOnRootMismatch, corev1.FSGroupChangeAlways}))
		}
		if sp := sc.SeccompProfile; sp != nil && sp.Type == corev1.SeccompProfileTypeLocalhost && (sp.LocalhostProfile == nil || *sp.LocalhostProfile == "") {
			errs = append(errs, field.Required(scp.Child("seccompProfile", "localhostProfile"), "must be set when seccomp type is Localhost"))
		}
		for i, sys := range sc.Sysctls {
			if !sysctlName.MatchString(sys.Name) || len(sys.Name) > 253 {
				errs = append(errs, field.Invalid(scp.Child("sysctls").Index(i).Child("name"), sys.Name,
					fmt.Sprintf("must have at most 253 characters and match regex %s", sysctlName.String())))
			}
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(ps.NodeSelector, spec.Child("nodeSelector"))...)
	for i, t := range ps.Tolerations {
		errs = append(errs, validateToleration(t, spec.Child("tolerations").Index(i))...)
	}
	if ps.Hostname != "" {
		for _, msg := range utilvalidation.IsDNS1123Label(ps.Hostname) {
			errs = append(errs, field.Invalid(spec.Child("hostname"), ps.Hostname, msg))
		}
	}
	if ps.Subdomain != "" {
		for _, msg := range utilvalidation.IsDNS1123Label(ps.Subdomain) {
			errs = append(errs, field.Invalid(spec.Child("subdomain"), ps.Subdomain, msg))
		}
	}
	for i, ha := range ps.HostAliases {
		if net.ParseIP(ha.IP) == nil {
			errs = append(errs, field.Invalid(spec.Child("hostAliases").Index(i).Child("ip"), ha.IP, "must be a valid IP address"))
		}
	}
	if ps.NodeName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(ps.NodeName, false) {
			errs = append(errs, field.Invalid(spec.Child("nodeName"), ps.NodeName, msg))
		}
		if len(ps.SchedulingGates) > 0 {
			errs = append(errs, field.Forbidden(spec.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
		}
	}
	for i, g := range ps.SchedulingGates {
		for _, msg := range utilvalidation.IsQualifiedName(g.Name) {
			errs = append(errs, field.Invalid(spec.Child("schedulingGates").Index(i), g.Name, msg))
		}
	}
	for i, g := range ps.ReadinessGates {
		for _, msg := range utilvalidation.IsQualifiedName(string(g.ConditionType)) {
			errs = append(errs, field.Invalid(spec.Child("readinessGates").Index(i).Child("conditionType"), g.ConditionType, msg))
		}
	}
	if ps.OS != nil && ps.OS.Name != corev1.Linux && ps.OS.Name != corev1.Windows {
		errs = append(errs, field.NotSupported(spec.Child("os"), ps.OS.Name, []corev1.OSName{corev1.Linux, corev1.Windows}))
	}
	for i, c := range ps.TopologySpreadConstraints {
		cp := spec.Child("topologySpreadConstraints").Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(cp.Child("maxSkew"), c.MaxSkew, "must be greater than zero"))
		}
		valid := []corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}
		if !slices.Contains(valid, c.WhenUnsatisfiable) {
			errs = append(errs, field.NotSupported(cp.Child("whenUnsatisfiable"), c.WhenUnsatisfiable, valid))
		}
	}
	if a := ps.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil &&
		len(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		errs = append(errs, field.Required(spec.Child("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"),
			"must have at least one node selector term"))
	}
	return errs
}

var sysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

// validateToleration checks a toleration's key, operator, value and effect.
func validateToleration(t corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, p.Child("key"))...)
	}
	if t.Key == "" && t.Operator != corev1.TolerationOpExists {
		errs = append(errs, field.Invalid(p.Child("operator"), t.Operator,
			"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(p.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		for _, msg := range utilvalidation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(p.Child("operator"), t.Value, msg))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("operator"), t, "value must be empty when `operator` is 'Exists'"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
	}
	if t.Effect != "" {
		valid := []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
		if !slices.Contains(valid, t.Effect) {
			errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, valid))
		}
	}
	return errs
}
