package auth

import corev1 "k8s.io/api/core/v1"

// The objects a pod refers to by name, in its own namespace: what the Node authorizer
// lets the kubelet of the pod's node read.

// podSecrets names the Secrets pod uses: image pull secrets, secret volumes and
// projections, CSI volumes' publish secrets, and environment references.
func podSecrets(pod *corev1.Pod) map[string]bool {
	names := map[string]bool{}
	for _, s := range pod.Spec.ImagePullSecrets {
		names[s.Name] = true
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			names[v.Secret.SecretName] = true
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					names[src.Secret.Name] = true
				}
			}
		case v.CSI != nil && v.CSI.NodePublishSecretRef != nil:
			names[v.CSI.NodePublishSecretRef.Name] = true
		}
	}
	visitEnv(pod, func(env corev1.EnvVar) {
		if env.ValueFrom != nil && env.ValueFrom.SecretKeyRef != nil {
			names[env.ValueFrom.SecretKeyRef.Name] = true
		}
	}, func(from corev1.EnvFromSource) {
		if from.SecretRef != nil {
			names[from.SecretRef.Name] = true
		}
	})
	return names
}

// podConfigMaps names the ConfigMaps pod uses: volumes, projections and environment
// references.
func podConfigMaps(pod *corev1.Pod) map[string]bool {
	names := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			names[v.ConfigMap.Name] = true
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					names[src.ConfigMap.Name] = true
				}
			}
		}
	}
	visitEnv(pod, func(env corev1.EnvVar) {
		if env.ValueFrom != nil && env.ValueFrom.ConfigMapKeyRef != nil {
			names[env.ValueFrom.ConfigMapKeyRef.Name] = true
		}
	}, func(from corev1.EnvFromSource) {
		if from.ConfigMapRef != nil {
			names[from.ConfigMapRef.Name] = true
		}
	})
	return names
}

// podClaims names the PersistentVolumeClaims pod mounts, generic ephemeral volumes'
// claims (<pod>-<volume>) among them.
func podClaims(pod *corev1.Pod) map[string]bool {
	names := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			names[v.PersistentVolumeClaim.ClaimName] = true
		case v.Ephemeral != nil:
			names[pod.Name+"-"+v.Name] = true
		}
	}
	return names
}

// visitEnv calls env and from for every environment entry of every container.
func visitEnv(pod *corev1.Pod, env func(corev1.EnvVar), from func(corev1.EnvFromSource)) {
	visit := func(envs []corev1.EnvVar, froms []corev1.EnvFromSource) {
		for _, e := range envs {
			env(e)
		}
		for _, f := range froms {
			from(f)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		visit(c.Env, c.EnvFrom)
	}
	for _, c := range pod.Spec.Containers {
		visit(c.Env, c.EnvFrom)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		visit(c.Env, c.EnvFrom)
	}
}

// pvSecrets names the Secrets, as namespace/name, a CSI PersistentVolume's node
// operations use.
func pvSecrets(pv *corev1.PersistentVolume) map[string]bool {
	names := map[string]bool{}
	if csi := pv.Spec.CSI; csi != nil {
		for _, ref := range []*corev1.SecretReference{csi.NodeStageSecretRef, csi.NodePublishSecretRef, csi.NodeExpandSecretRef} {
			if ref != nil {
				names[ref.Namespace+"/"+ref.Name] = true
			}
		}
	}
	return names
}
