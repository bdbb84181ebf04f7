package admission

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/ptr"
)

const (
	// defaultServiceAccountName is the account of pods that name none.
	defaultServiceAccountName = "default"
	// serviceAccountVolumePrefix starts the name of the token volume the plugin adds
	// (kube-api-access-<5 random characters>).
	serviceAccountVolumePrefix = "kube-api-access-"
	// serviceAccountMountPath is where every container finds token, ca.crt and namespace.
	serviceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// rootCAConfigMap is the ConfigMap of every namespace that holds the cluster's CA
	// bundle under ca.crt (the root-ca-cert-publisher controller keeps it).
	rootCAConfigMap = "kube-root-ca.crt"
	// tokenExpirationSeconds is the lifetime the token source asks for: an hour and
	// seven seconds, which the API server recognises as the kubelet's and extends.
	tokenExpirationSeconds = 60*60 + 7
	// enforceMountableSecretsAnnotation on a ServiceAccount ("true") limits its pods to
	// the secrets it lists.
	enforceMountableSecretsAnnotation = "kubernetes.io/enforce-mountable-secrets"
)

// serviceAccountLookups is how often a missing "default" account is looked up live,
// while the serviceaccount controller may be creating it; other names get one look.
const serviceAccountLookups = 10

// serviceAccount is the admission step upstream calls ServiceAccount. On pod create:
//   - a pod without spec.serviceAccountName runs as "default";
//   - its ServiceAccount must exist (a miss in the informer's cache is looked up live,
//     the default account a few times over a second or two), else the pod is refused
//     with `error looking up service account <ns>/<name>: ...`;
//   - unless spec.automountServiceAccountToken (or the account's) is false, the pod gets
//     the projected volume kube-api-access-<random>: a serviceAccountToken source (path
//     token, expirationSeconds 3607), ca.crt from the kube-root-ca.crt ConfigMap and the
//     namespace from the downward API, mode 0644, mounted read-only at
//     serviceAccountMountPath in every container and init container that does not
//     mount something there already;
//   - without imagePullSecrets of its own, the pod gets the account's;
//   - an account annotated kubernetes.io/enforce-mountable-secrets=true refuses pods
//     that use secrets it does not list.
//
// Mirror pods are not changed, and may use neither secrets nor service account tokens.
type serviceAccount struct {
	*admission.Handler
	client          kubernetes.Interface
	serviceAccounts corelisters.ServiceAccountLister
	synced          func() bool
	generateName    func(base string) string
	// retryInterval is the pause between live lookups of the default account.
	retryInterval func() time.Duration
}

var (
	_ admission.MutationInterface   = (*serviceAccount)(nil)
	_ admission.ValidationInterface = (*serviceAccount)(nil)
)

func newServiceAccount(factory informers.SharedInformerFactory, client kubernetes.Interface) *serviceAccount {
	inf := factory.Core().V1().ServiceAccounts()
	p := &serviceAccount{
		Handler: admission.NewHandler(admission.Create), client: client,
		serviceAccounts: inf.Lister(), synced: inf.Informer().HasSynced,
		generateName:  names.SimpleNameGenerator.GenerateName,
		retryInterval: func() time.Duration { return time.Duration(100+rand.IntN(100)) * time.Millisecond },
	}
	return p
}

// podOf is the pod of a request the plugin looks at: a pod create, not a subresource.
func podOf(a admission.Attributes) (*corev1.Pod, bool) {
	if a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetSubresource() != "" {
		return nil, false
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	return pod, ok
}

func (p *serviceAccount) Admit(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	pod, ok := podOf(a)
	if !ok {
		return nil
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return p.Validate(ctx, a, o)
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = defaultServiceAccountName
	}
	sa, err := p.lookup(ctx, a.GetNamespace(), pod.Spec.ServiceAccountName)
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("error looking up service account %s/%s: %w", a.GetNamespace(), pod.Spec.ServiceAccountName, err))
	}
	if shouldAutomount(sa, pod) {
		mountServiceAccountToken(pod, p.generateName)
	}
	if len(pod.Spec.ImagePullSecrets) == 0 && len(sa.ImagePullSecrets) > 0 {
		pod.Spec.ImagePullSecrets = append([]corev1.LocalObjectReference(nil), sa.ImagePullSecrets...)
	}
	return p.Validate(ctx, a, o)
}

func (p *serviceAccount) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	pod, ok := podOf(a)
	if !ok {
		return nil
	}
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		// The API server defaults serviceAccountName of every pod, so only what a
		// mirror pod mounts is checked.
		if err := validateMirrorPod(pod); err != nil {
			return admission.NewForbidden(a, err)
		}
		return nil
	}
	sa, err := p.lookup(ctx, a.GetNamespace(), pod.Spec.ServiceAccountName)
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("error looking up service account %s/%s: %w", a.GetNamespace(), pod.Spec.ServiceAccountName, err))
	}
	if enforceMountableSecrets(sa) {
		if err := limitSecretReferences(sa, pod); err != nil {
			return admission.NewForbidden(a, err)
		}
	}
	return nil
}

// lookup is the ServiceAccount ns/name from the cache once it has synced, or else from
// the API: the default account up to serviceAccountLookups times, as the controller may
// be about to create it in a new namespace.
func (p *serviceAccount) lookup(ctx context.Context, ns, name string) (*corev1.ServiceAccount, error) {
	if p.synced() {
		sa, err := p.serviceAccounts.ServiceAccounts(ns).Get(name)
		if err == nil {
			return sa, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	attempts := 1
	if name == defaultServiceAccountName {
		attempts = serviceAccountLookups
	}
	for i := 0; i < attempts; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(p.retryInterval()):
			}
		}
		sa, err := p.client.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return sa, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("serviceaccount"), name)
}

// shouldAutomount: the pod's automountServiceAccountToken, else the account's, else yes.
func shouldAutomount(sa *corev1.ServiceAccount, pod *corev1.Pod) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	if sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

// tokenVolumeSource is the projected source of the token volume.
func tokenVolumeSource() *corev1.ProjectedVolumeSource {
	return &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](corev1.ProjectedVolumeSourceDefaultMode),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](tokenExpirationSeconds)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: rootCAConfigMap},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		},
	}
}

// mountServiceAccountToken mounts the token volume at serviceAccountMountPath in every
// container and init container that has nothing mounted there, and adds the volume if
// one of them got it. A kube-api-access-* volume the pod already has is reused.
func mountServiceAccountToken(pod *corev1.Pod, generateName func(string) string) {
	volume := ""
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, serviceAccountVolumePrefix) {
			volume = v.Name
			break
		}
	}
	existing := volume != ""
	if !existing {
		taken := sets.New[string]()
		for _, v := range pod.Spec.Volumes {
			taken.Insert(v.Name)
		}
		for volume = generateName(serviceAccountVolumePrefix); taken.Has(volume); {
			volume = generateName(serviceAccountVolumePrefix)
		}
	}
	mount := corev1.VolumeMount{Name: volume, ReadOnly: true, MountPath: serviceAccountMountPath}
	needed := false
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if !mountsAt(cs[i].VolumeMounts, serviceAccountMountPath) {
				cs[i].VolumeMounts = append(cs[i].VolumeMounts, mount)
				needed = true
			}
		}
	}
	if needed && !existing {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{Projected: tokenVolumeSource()}})
	}
}

func mountsAt(mounts []corev1.VolumeMount, path string) bool {
	for _, m := range mounts {
		if m.MountPath == path {
			return true
		}
	}
	return false
}

// enforceMountableSecrets says whether the account limits its pods to its secrets.
func enforceMountableSecrets(sa *corev1.ServiceAccount) bool {
	v, _ := strconv.ParseBool(sa.Annotations[enforceMountableSecretsAnnotation])
	return v
}

// limitSecretReferences refuses secret volumes, secret env vars and image pull secrets
// the account does not list.
func limitSecretReferences(sa *corev1.ServiceAccount, pod *corev1.Pod) error {
	mountable := sets.New[string]()
	for _, s := range sa.Secrets {
		mountable.Insert(s.Name)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && !mountable.Has(v.Secret.SecretName) {
			return fmt.Errorf("volume with secret.secretName=%q is not allowed because service account %s does not reference that secret", v.Secret.SecretName, sa.Name)
		}
	}
	for _, c := range []struct {
		kind       string
		containers []corev1.Container
	}{{"init container", pod.Spec.InitContainers}, {"container", pod.Spec.Containers}} {
		for _, ctr := range c.containers {
			for _, env := range ctr.Env {
				if ref := env.ValueFrom; ref != nil && ref.SecretKeyRef != nil && !mountable.Has(ref.SecretKeyRef.Name) {
					return fmt.Errorf("%s %s with envVar %s referencing secret.secretName=%q is not allowed because service account %s does not reference that secret",
						c.kind, ctr.Name, env.Name, ref.SecretKeyRef.Name, sa.Name)
				}
			}
		}
	}
	pullable := sets.New[string]()
	for _, s := range sa.ImagePullSecrets {
		pullable.Insert(s.Name)
	}
	for i, s := range pod.Spec.ImagePullSecrets {
		if !pullable.Has(s.Name) {
			return fmt.Errorf("imagePullSecrets[%d].name=%q is not allowed because service account %s does not reference that imagePullSecret", i, s.Name, sa.Name)
		}
	}
	return nil
}

// validateMirrorPod refuses a mirror pod that uses secrets or service account tokens.
func validateMirrorPod(pod *corev1.Pod) error {
	if len(pod.Spec.ImagePullSecrets) > 0 {
		return errors.New("a mirror pod may not reference secrets")
	}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			return errors.New("a mirror pod may not reference secrets")
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					return errors.New("a mirror pod may not reference secrets")
				}
				if s.ServiceAccountToken != nil {
					return errors.New("a mirror pod may not use ServiceAccountToken volume projections")
				}
			}
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil {
					return errors.New("a mirror pod may not reference secrets")
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					return errors.New("a mirror pod may not reference secrets")
				}
			}
		}
	}
	return nil
}
