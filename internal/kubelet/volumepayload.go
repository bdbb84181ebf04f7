package kubelet

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// objectSource is what volume contents are read from: the ConfigMaps and Secrets of the
// API (Objects in a running kubelet). Missing objects are NotFound errors.
type objectSource interface {
	ConfigMap(namespace, name string) (*corev1.ConfigMap, error)
	Secret(namespace, name string) (*corev1.Secret, error)
}

// payloadInput is what a volume's files are made from beyond the pod.
type payloadInput struct {
	objects     objectSource
	allocatable corev1.ResourceList
	// token is the service account token of a projected serviceAccountToken source of
	// the pod (nil: the node has none to give).
	token func(pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) (string, error)
	// trustAnchors is the PEM of a projected clusterTrustBundle source (nil: the node
	// has none to give).
	trustAnchors func(src *corev1.ClusterTrustBundleProjection) ([]byte, error)
	// podCertificate is the private key and certificate chain (PEM) of the pod's
	// podCertificate source, index of the projected volume named volume (nil: the node
	// has none to give).
	podCertificate func(pod *corev1.Pod, volume string, index int, src *corev1.PodCertificateProjection) (key, chain []byte, err error)
	// volume is the name of the volume whose files are being made.
	volume string
}

// configMapPayload is the files of a ConfigMap: every key of data and binaryData, or
// only items (key → path), each with its mode or defaultMode. A key that items names and
// the ConfigMap lacks is an error unless optional.
func configMapPayload(items []corev1.KeyToPath, cm *corev1.ConfigMap, defaultMode int32, optional bool) (map[string]fileProjection, error) {
	out := map[string]fileProjection{}
	if len(items) == 0 {
		for k, v := range cm.Data {
			out[k] = fileProjection{data: []byte(v), mode: defaultMode}
		}
		for k, v := range cm.BinaryData {
			out[k] = fileProjection{data: v, mode: defaultMode}
		}
		return out, nil
	}
	for _, it := range items {
		var data []byte
		if v, ok := cm.Data[it.Key]; ok {
			data = []byte(v)
		} else if v, ok := cm.BinaryData[it.Key]; ok {
			data = v
		} else {
			if optional {
				continue
			}
			return nil, fmt.Errorf("configmap references non-existent config key: %s", it.Key)
		}
		out[it.Path] = fileProjection{data: data, mode: itemMode(it.Mode, defaultMode)}
	}
	return out, nil
}

// secretPayload is the files of a Secret, as configMapPayload.
func secretPayload(items []corev1.KeyToPath, s *corev1.Secret, defaultMode int32, optional bool) (map[string]fileProjection, error) {
	out := map[string]fileProjection{}
	if len(items) == 0 {
		for k, v := range s.Data {
			out[k] = fileProjection{data: v, mode: defaultMode}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := s.Data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("references non-existent secret key: %s", it.Key)
		}
		out[it.Path] = fileProjection{data: v, mode: itemMode(it.Mode, defaultMode)}
	}
	return out, nil
}

func itemMode(mode *int32, defaultMode int32) int32 {
	if mode != nil {
		return *mode
	}
	return defaultMode
}

func modeOr(mode *int32, def int32) int32 {
	if mode != nil {
		return *mode
	}
	return def
}

// downwardAPIPayload is the files of downward API items: pod fields (fieldRef) and
// containers' resources (resourceFieldRef). Every item that cannot be resolved is named
// in the error.
func downwardAPIPayload(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defaultMode int32, allocatable corev1.ResourceList) (map[string]fileProjection, error) {
	out := map[string]fileProjection{}
	var errs []error
	for _, it := range items {
		f := fileProjection{mode: itemMode(it.Mode, defaultMode)}
		switch {
		case it.FieldRef != nil:
			v, err := podFieldValue(pod, it.FieldRef.FieldPath)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			f.data = []byte(v)
		case it.ResourceFieldRef != nil:
			v, err := containerResourceValue(pod, it.ResourceFieldRef, allocatable)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			f.data = []byte(v)
		}
		out[it.Path] = f
	}
	if len(errs) > 0 {
		return nil, utilerrors.NewAggregate(errs)
	}
	return out, nil
}

// podFieldValue is a pod field the downward API volume offers: metadata.name, namespace,
// uid, labels and annotations (all of them, one key="value" line each, sorted, or one with
// ['key']).
func podFieldValue(pod *corev1.Pod, path string) (string, error) {
	if p, key, ok := subscripted(path); ok {
		switch p {
		case "metadata.labels":
			return pod.Labels[key], nil
		case "metadata.annotations":
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("fieldPath %q does not support subscript", path)
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %s", path)
}

// subscripted splits path['key'].
func subscripted(path string) (string, string, bool) {
	i := strings.Index(path, "['")
	if i < 0 || !strings.HasSuffix(path, "']") {
		return "", "", false
	}
	return path[:i], path[i+2 : len(path)-2], true
}

// formatMap is a map as key="value" lines sorted by key, values Go-quoted.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(m[k]))
	}
	return b.String()
}

// containerResourceValue is a request or limit of one of the pod's containers divided by
// the divisor (1 by default) and rounded up; limits that are not set are the node's
// allocatable.
func containerResourceValue(pod *corev1.Pod, ref *corev1.ResourceFieldSelector, allocatable corev1.ResourceList) (string, error) {
	var c *corev1.Container
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == ref.ContainerName && c == nil {
				c = &cs[i]
			}
		}
	}
	if c == nil {
		return "", fmt.Errorf("container %s not found", ref.ContainerName)
	}
	kind, name, _ := strings.Cut(ref.Resource, ".")
	rname := corev1.ResourceName(name)
	var q resource.Quantity
	switch kind {
	case "limits":
		var set bool
		if q, set = c.Resources.Limits[rname]; !set {
			q = allocatable[rname]
		}
	case "requests":
		q = c.Resources.Requests[rname]
	default:
		return "", fmt.Errorf("unsupported container resource : %s", ref.Resource)
	}
	switch rname {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
	default:
		if !strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
			return "", fmt.Errorf("unsupported container resource : %s", ref.Resource)
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if rname == corev1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// volumePayload is the files of one of the pod's configMap, secret, downwardAPI or
// projected volumes. A missing ConfigMap or Secret is an error unless the volume (or
// source) is optional, which makes it contribute no files.
func volumePayload(pod *corev1.Pod, v *corev1.Volume, in payloadInput) (map[string]fileProjection, error) {
	ns := pod.Namespace
	switch {
	case v.ConfigMap != nil:
		src := v.ConfigMap
		optional := src.Optional != nil && *src.Optional
		cm, err := in.objects.ConfigMap(ns, src.Name)
		if err != nil {
			if optional && apierrors.IsNotFound(err) {
				return map[string]fileProjection{}, nil
			}
			return nil, err
		}
		return configMapPayload(src.Items, cm, modeOr(src.DefaultMode, corev1.ConfigMapVolumeSourceDefaultMode), optional)
	case v.Secret != nil:
		src := v.Secret
		optional := src.Optional != nil && *src.Optional
		s, err := in.objects.Secret(ns, src.SecretName)
		if err != nil {
			if optional && apierrors.IsNotFound(err) {
				return map[string]fileProjection{}, nil
			}
			return nil, err
		}
		return secretPayload(src.Items, s, modeOr(src.DefaultMode, corev1.SecretVolumeSourceDefaultMode), optional)
	case v.DownwardAPI != nil:
		return downwardAPIPayload(pod, v.DownwardAPI.Items, modeOr(v.DownwardAPI.DefaultMode, corev1.DownwardAPIVolumeSourceDefaultMode), in.allocatable)
	case v.Projected != nil:
		in.volume = v.Name
		return projectedPayload(pod, v.Projected, in)
	}
	return nil, fmt.Errorf("volume %q is not a configMap, secret, downwardAPI or projected volume", v.Name)
}

// projectedPayload merges the files of the projected volume's sources, in order. A
// serviceAccountToken source's file is the token in.token gives, a clusterTrustBundle
// source's the certificates in.trustAnchors gives, a podCertificate source's the key
// and chain in.podCertificate gives (credentialBundlePath: the key, then the chain;
// keyPath; certificateChainPath), all with the volume's defaultMode (0600 for a pod with
// a fsGroup, which makes them group-readable).
func projectedPayload(pod *corev1.Pod, src *corev1.ProjectedVolumeSource, in payloadInput) (map[string]fileProjection, error) {
	defaultMode := modeOr(src.DefaultMode, corev1.ProjectedVolumeSourceDefaultMode)
	out := map[string]fileProjection{}
	var errs []error
	merge := func(p map[string]fileProjection, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		for k, v := range p {
			out[k] = v
		}
	}
	for i, s := range src.Sources {
		switch {
		case s.ConfigMap != nil:
			optional := s.ConfigMap.Optional != nil && *s.ConfigMap.Optional
			cm, err := in.objects.ConfigMap(pod.Namespace, s.ConfigMap.Name)
			if err != nil {
				if !(optional && apierrors.IsNotFound(err)) {
					errs = append(errs, err)
				}
				continue
			}
			merge(configMapPayload(s.ConfigMap.Items, cm, defaultMode, optional))
		case s.Secret != nil:
			optional := s.Secret.Optional != nil && *s.Secret.Optional
			sec, err := in.objects.Secret(pod.Namespace, s.Secret.Name)
			if err != nil {
				if !(optional && apierrors.IsNotFound(err)) {
					errs = append(errs, err)
				}
				continue
			}
			merge(secretPayload(s.Secret.Items, sec, defaultMode, optional))
		case s.DownwardAPI != nil:
			merge(downwardAPIPayload(pod, s.DownwardAPI.Items, defaultMode, in.allocatable))
		case s.ServiceAccountToken != nil:
			if in.token == nil {
				errs = append(errs, fmt.Errorf("serviceAccountToken sources are not supported on this node"))
				continue
			}
			token, err := in.token(pod, s.ServiceAccountToken)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out[s.ServiceAccountToken.Path] = fileProjection{data: []byte(token), mode: ownerOnlyWithFSGroup(pod, defaultMode)}
		case s.ClusterTrustBundle != nil:
			if in.trustAnchors == nil {
				errs = append(errs, fmt.Errorf("clusterTrustBundle sources are not supported on this node"))
				continue
			}
			pemData, err := in.trustAnchors(s.ClusterTrustBundle)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out[s.ClusterTrustBundle.Path] = fileProjection{data: pemData, mode: ownerOnlyWithFSGroup(pod, defaultMode)}
		case s.PodCertificate != nil:
			if in.podCertificate == nil {
				errs = append(errs, fmt.Errorf("podCertificate sources are not supported on this node"))
				continue
			}
			key, chain, err := in.podCertificate(pod, in.volume, i, s.PodCertificate)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			mode := ownerOnlyWithFSGroup(pod, defaultMode)
			pc := s.PodCertificate
			if pc.CredentialBundlePath != "" {
				out[pc.CredentialBundlePath] = fileProjection{data: append(append([]byte{}, key...), chain...), mode: mode}
			}
			if pc.KeyPath != "" {
				out[pc.KeyPath] = fileProjection{data: key, mode: mode}
			}
			if pc.CertificateChainPath != "" {
				out[pc.CertificateChainPath] = fileProjection{data: chain, mode: mode}
			}
		}
	}
	if len(errs) > 0 {
		return nil, utilerrors.NewAggregate(errs)
	}
	return out, nil
}

// ownerOnlyWithFSGroup is the mode of a projected token or trust bundle file: the
// volume's defaultMode, or 0600 when the pod has a fsGroup (the writer makes it
// group-readable).
func ownerOnlyWithFSGroup(pod *corev1.Pod, defaultMode int32) int32 {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		return 0o600
	}
	return defaultMode
}
