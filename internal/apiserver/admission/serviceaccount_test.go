package admission

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// newTestServiceAccount is the plugin on a fake client holding objs, with informers
// that never start (every lookup is live), no pause between lookups and volume names
// kube-api-access-xxxxx.
func newTestServiceAccount(objs ...runtime.Object) (*serviceAccount, *fake.Clientset) {
	client := fake.NewClientset(objs...)
	p := newServiceAccount(informers.NewSharedInformerFactory(client, 0), client)
	p.generateName = func(base string) string { return base + "xxxxx" }
	p.retryInterval = func() time.Duration { return 0 }
	return p, client
}

func podCreate(pod *corev1.Pod) admission.Attributes {
	return admission.NewAttributesRecord(pod, nil, corev1.SchemeGroupVersion.WithKind("Pod"), pod.Namespace, pod.Name,
		corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create, &metav1.CreateOptions{}, false, nil)
}

func saPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init"}},
		Containers:     []corev1.Container{{Name: "a"}, {Name: "b"}}}}
}

func defaultSA(mutate ...func(*corev1.ServiceAccount)) *corev1.ServiceAccount {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "default"}}
	for _, m := range mutate {
		m(sa)
	}
	return sa
}

func TestServiceAccountMountsTheTokenVolume(t *testing.T) {
	p, _ := newTestServiceAccount(defaultSA())
	pod := saPod("web")
	// A container that mounts something of its own at the path keeps it.
	pod.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "mine", MountPath: serviceAccountMountPath}}
	if err := p.Admit(context.Background(), podCreate(pod), nil); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.ServiceAccountName != "default" {
		t.Errorf("serviceAccountName %q, want default", pod.Spec.ServiceAccountName)
	}
	want := corev1.Volume{Name: "kube-api-access-xxxxx", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o644),
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}}}}
	if len(pod.Spec.Volumes) != 1 || !reflect.DeepEqual(pod.Spec.Volumes[0], want) {
		t.Errorf("volumes %+v\nwant %+v", pod.Spec.Volumes, want)
	}
	mount := corev1.VolumeMount{Name: "kube-api-access-xxxxx", ReadOnly: true, MountPath: serviceAccountMountPath}
	for _, c := range []corev1.Container{pod.Spec.InitContainers[0], pod.Spec.Containers[0]} {
		if !reflect.DeepEqual(c.VolumeMounts, []corev1.VolumeMount{mount}) {
			t.Errorf("container %s mounts %+v", c.Name, c.VolumeMounts)
		}
	}
	if m := pod.Spec.Containers[1].VolumeMounts; len(m) != 1 || m[0].Name != "mine" {
		t.Errorf("a container with its own mount at the path: %+v", m)
	}

	// Admitted again (a retried request), the pod keeps its one token volume.
	if err := p.Admit(context.Background(), podCreate(pod), nil); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Volumes) != 1 || len(pod.Spec.Containers[0].VolumeMounts) != 1 {
		t.Errorf("second admission: volumes %v, mounts %v", pod.Spec.Volumes, pod.Spec.Containers[0].VolumeMounts)
	}

	// Every container mounts something there already: no volume.
	busy := saPod("busy")
	for _, cs := range [][]corev1.Container{busy.Spec.InitContainers, busy.Spec.Containers} {
		for i := range cs {
			cs[i].VolumeMounts = []corev1.VolumeMount{{Name: "mine", MountPath: serviceAccountMountPath}}
		}
	}
	if err := p.Admit(context.Background(), podCreate(busy), nil); err != nil || len(busy.Spec.Volumes) != 0 {
		t.Errorf("all paths taken: %v, volumes %v", err, busy.Spec.Volumes)
	}
}

func TestServiceAccountAutomount(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pod, sa    *bool
		wantVolume bool
	}{
		{"unset", nil, nil, true},
		{"pod false", ptr.To(false), nil, false},
		{"account false", nil, ptr.To(false), false},
		{"pod true wins over account false", ptr.To(true), ptr.To(false), true},
		{"pod false wins over account true", ptr.To(false), ptr.To(true), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newTestServiceAccount(defaultSA(func(sa *corev1.ServiceAccount) { sa.AutomountServiceAccountToken = tc.sa }))
			pod := saPod("web")
			pod.Spec.AutomountServiceAccountToken = tc.pod
			if err := p.Admit(context.Background(), podCreate(pod), nil); err != nil {
				t.Fatal(err)
			}
			if got := len(pod.Spec.Volumes) == 1; got != tc.wantVolume {
				t.Errorf("token volume %v, want %v", got, tc.wantVolume)
			}
			if !tc.wantVolume && len(pod.Spec.Containers[0].VolumeMounts) != 0 {
				t.Errorf("mounts without a volume: %v", pod.Spec.Containers[0].VolumeMounts)
			}
		})
	}
}

func TestServiceAccountMustExist(t *testing.T) {
	p, client := newTestServiceAccount()
	pod := saPod("web")
	pod.Spec.ServiceAccountName = "ghost"
	err := p.Admit(context.Background(), podCreate(pod), nil)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(),
		`pods "web" is forbidden: error looking up service account ns/ghost: serviceaccount "ghost" not found`) {
		t.Errorf("a missing account: %v", err)
	}
	if n := len(client.Actions()); n != 1 {
		t.Errorf("%d lookups of a missing named account, want 1", n)
	}

	// The default account is looked up again, as its controller may be creating it.
	client.ClearActions()
	err = p.Admit(context.Background(), podCreate(saPod("web")), nil)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `serviceaccount "default" not found`) {
		t.Errorf("a missing default account: %v", err)
	}
	if n := len(client.Actions()); n != serviceAccountLookups {
		t.Errorf("%d lookups of the missing default account, want %d", n, serviceAccountLookups)
	}
}

func TestServiceAccountCopiesPullSecretsAndLimitsSecrets(t *testing.T) {
	p, _ := newTestServiceAccount(defaultSA(func(sa *corev1.ServiceAccount) {
		sa.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
	}), &corev1.ServiceAccount{
		ObjectMeta:       metav1.ObjectMeta{Namespace: "ns", Name: "strict", Annotations: map[string]string{enforceMountableSecretsAnnotation: "true"}},
		Secrets:          []corev1.ObjectReference{{Name: "allowed"}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
	})
	pod := saPod("web")
	if err := p.Admit(context.Background(), podCreate(pod), nil); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pod.Spec.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "registry"}}) {
		t.Errorf("imagePullSecrets %v", pod.Spec.ImagePullSecrets)
	}

	strict := func(mutate func(*corev1.Pod)) error {
		pod := saPod("web")
		pod.Spec.ServiceAccountName = "strict"
		mutate(pod)
		return p.Admit(context.Background(), podCreate(pod), nil)
	}
	if err := strict(func(pod *corev1.Pod) {
		pod.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "allowed"}}}}
	}); err != nil {
		t.Errorf("a listed secret: %v", err)
	}
	if err := strict(func(pod *corev1.Pod) {
		pod.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "other"}}}}
	}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `volume with secret.secretName="other" is not allowed because service account strict does not reference that secret`) {
		t.Errorf("an unlisted secret volume: %v", err)
	}
	if err := strict(func(pod *corev1.Pod) {
		pod.Spec.InitContainers[0].Env = []corev1.EnvVar{{Name: "PW", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "other"}, Key: "pw"}}}}
	}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "init container init with envVar PW") {
		t.Errorf("an unlisted secret env var: %v", err)
	}
}

func TestServiceAccountMirrorPods(t *testing.T) {
	p, _ := newTestServiceAccount()
	mirror := saPod("static")
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
	mirror.Spec.ServiceAccountName = "default"
	if err := p.Admit(context.Background(), podCreate(mirror), nil); err != nil || len(mirror.Spec.Volumes) != 0 {
		t.Errorf("a mirror pod: %v, volumes %v", err, mirror.Spec.Volumes)
	}
	mirror.Spec.Volumes = []corev1.Volume{{Name: "t", VolumeSource: corev1.VolumeSource{Projected: tokenVolumeSource()}}}
	if err := p.Admit(context.Background(), podCreate(mirror), nil); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "a mirror pod may not use ServiceAccountToken volume projections") {
		t.Errorf("a mirror pod with a token: %v", err)
	}
}

// Only pod creates are the plugin's business.
func TestServiceAccountIgnoresOtherRequests(t *testing.T) {
	p, client := newTestServiceAccount()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	attrs := admission.NewAttributesRecord(cm, nil, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "ns", "c",
		corev1.SchemeGroupVersion.WithResource("configmaps"), "", admission.Create, &metav1.CreateOptions{}, false, nil)
	if err := p.Admit(context.Background(), attrs, nil); err != nil {
		t.Error(err)
	}
	pod := saPod("web")
	status := admission.NewAttributesRecord(pod, pod, corev1.SchemeGroupVersion.WithKind("Pod"), "ns", "web",
		corev1.SchemeGroupVersion.WithResource("pods"), "status", admission.Update, &metav1.UpdateOptions{}, false, nil)
	if p.Handles(admission.Update) {
		t.Error("the plugin handles updates")
	}
	if err := p.Admit(context.Background(), status, nil); err != nil || len(client.Actions()) != 0 {
		t.Errorf("a status update: %v, %d lookups", err, len(client.Actions()))
	}
}
