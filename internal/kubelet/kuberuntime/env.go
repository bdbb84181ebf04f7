package kuberuntime

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
)

// expand replaces $(VAR) references in s with mapping's values: $$ is a literal $, a
// reference to an unknown variable and an unterminated $( stay as written.
func expand(s string, mapping func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := mapping(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// mappingOf looks names up in the maps, first one first.
func mappingOf(maps ...map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, m := range maps {
			if v, ok := m[name]; ok {
				return v, true
			}
		}
		return "", false
	}
}

// envVar is one variable of a container's environment.
type envVar struct{ name, value string }

// envInput is what a container's environment is made from beyond the pod: the node, the
// pod's address and the objects its variables reference.
type envInput struct {
	nodeIP, podIP string
	allocatable   corev1.ResourceList
	objects       Objects
}

// containerEnv builds a container's environment: the variables of
// envFrom's ConfigMaps and Secrets (every key, prefixed, as upstream's kubelet takes
// them: a ConfigMap or Secret key such as "data-1" or "1st" is a variable too; a later
// source's key wins), then env in order (each value may reference earlier variables and
// Service variables with $(VAR); an env entry overrides an envFrom variable of its name),
// then the Service variables not set otherwise. Variables whose value is unknown
// (status.hostIP without a node address) are left out.
func containerEnv(pod *corev1.Pod, c *corev1.Container, in envInput) ([]envVar, error) {
	var service map[string]string
	if in.objects != nil {
		var err error
		if service, err = in.objects.ServiceEnv(pod); err != nil {
			return nil, fmt.Errorf("list service variables: %w", err)
		}
	}
	values := map[string]string{}
	var order []string
	set := func(name, value string) {
		if _, ok := values[name]; !ok {
			order = append(order, name)
		}
		values[name] = value
	}
	for _, from := range c.EnvFrom {
		data, err := envFromData(pod.Namespace, from, in.objects)
		if err != nil {
			return nil, err
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(from.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			set(e.Name, expand(e.Value, mappingOf(values, service)))
		default:
			v, ok, err := envValueFrom(pod, c, e, in)
			if err != nil {
				return nil, err
			}
			if ok {
				set(e.Name, v)
			}
		}
	}
	names := make([]string, 0, len(service))
	for k := range service {
		if _, ok := values[k]; !ok {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		set(k, service[k])
	}
	out := make([]envVar, 0, len(order))
	for _, k := range order {
		out = append(out, envVar{k, values[k]})
	}
	return out, nil
}

func envFromData(ns string, from corev1.EnvFromSource, objects Objects) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		ref := from.ConfigMapRef
		optional := ref.Optional != nil && *ref.Optional
		if objects == nil {
			if optional {
				return nil, nil
			}
			return nil, fmt.Errorf("configmap %q: no source of ConfigMaps on this node", ref.Name)
		}
		cm, err := objects.ConfigMap(ns, ref.Name)
		if err != nil {
			if optional && isAPINotFound(err) {
				return nil, nil
			}
			return nil, err
		}
		out := make(map[string]string, len(cm.Data))
		for k, v := range cm.Data {
			out[k] = v
		}
		return out, nil
	case from.SecretRef != nil:
		ref := from.SecretRef
		optional := ref.Optional != nil && *ref.Optional
		if objects == nil {
			if optional {
				return nil, nil
			}
			return nil, fmt.Errorf("secret %q: no source of Secrets on this node", ref.Name)
		}
		s, err := objects.Secret(ns, ref.Name)
		if err != nil {
			if optional && isAPINotFound(err) {
				return nil, nil
			}
			return nil, err
		}
		out := make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			out[k] = string(v)
		}
		return out, nil
	}
	return nil, nil
}

// envValueFrom resolves a valueFrom; ok is false for a variable left out.
func envValueFrom(pod *corev1.Pod, c *corev1.Container, e corev1.EnvVar, in envInput) (string, bool, error) {
	vf := e.ValueFrom
	switch {
	case vf.FieldRef != nil:
		return fieldValue(pod, vf.FieldRef.FieldPath, in)
	case vf.ResourceFieldRef != nil:
		v, err := resourceValue(pod, c, vf.ResourceFieldRef, in.allocatable)
		if err != nil {
			return "", false, fmt.Errorf("env %s: %w", e.Name, err)
		}
		return v, true, nil
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		if in.objects == nil {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %q: no source of ConfigMaps on this node", ref.Name)
		}
		cm, err := in.objects.ConfigMap(pod.Namespace, ref.Name)
		if err != nil {
			if optional && isAPINotFound(err) {
				return "", false, nil
			}
			return "", false, err
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return v, true, nil
	case vf.SecretKeyRef != nil:
		ref := vf.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		if in.objects == nil {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %q: no source of Secrets on this node", ref.Name)
		}
		s, err := in.objects.Secret(pod.Namespace, ref.Name)
		if err != nil {
			if optional && isAPINotFound(err) {
				return "", false, nil
			}
			return "", false, err
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
		}
		return string(v), true, nil
	}
	return "", true, nil
}

// fieldValue is the downward API value of a pod field.
func fieldValue(pod *corev1.Pod, path string, in envInput) (string, bool, error) {
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], true, nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], true, nil
	}
	podIP := in.podIP
	if pod.Spec.HostNetwork {
		podIP = in.nodeIP
	}
	switch path {
	case "metadata.name":
		return pod.Name, true, nil
	case "metadata.namespace":
		return pod.Namespace, true, nil
	case "metadata.uid":
		return string(pod.UID), true, nil
	case "spec.nodeName":
		return pod.Spec.NodeName, true, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, true, nil
	case "status.hostIP", "status.hostIPs":
		return in.nodeIP, in.nodeIP != "", nil
	case "status.podIP", "status.podIPs":
		return podIP, podIP != "", nil
	}
	return "", false, fmt.Errorf("unsupported fieldPath: %s", path)
}

// subscript parses prefix['key'].
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

// resourceValue is the downward API value of a container's request or limit, divided by
// the divisor and rounded up; limits that are not set are the node's allocatable.
func resourceValue(pod *corev1.Pod, self *corev1.Container, ref *corev1.ResourceFieldSelector, allocatable corev1.ResourceList) (string, error) {
	c := self
	if ref.ContainerName != "" && ref.ContainerName != self.Name {
		c = nil
		for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range cs {
				if cs[i].Name == ref.ContainerName {
					c = &cs[i]
				}
			}
		}
		if c == nil {
			return "", fmt.Errorf("container %q not found", ref.ContainerName)
		}
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported container resource: %s", ref.Resource)
	}
	rname := corev1.ResourceName(name)
	var q resource.Quantity
	if kind == "limits" {
		var set bool
		if q, set = c.Resources.Limits[rname]; !set {
			q = allocatable[rname]
		}
	} else {
		q = c.Resources.Requests[rname]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if rname == corev1.ResourceCPU {
		v := int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))
		return strconv.FormatInt(v, 10), nil
	}
	v := int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))
	return strconv.FormatInt(v, 10), nil
}

// isAPINotFound says whether an object lookup failed because the object does not exist.
func isAPINotFound(err error) bool { return apierrors.IsNotFound(err) }
