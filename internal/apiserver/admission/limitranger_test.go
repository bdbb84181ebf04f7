package admission

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func containerWith(name string, requests, limits corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Image: "busybox", Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
}

func containerRange(item corev1.LimitRangeItem) *corev1.LimitRange {
	item.Type = corev1.LimitTypeContainer
	return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: "ns"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{item}}}
}

// Containers lacking requests or limits get the defaults, the annotation says which;
// what a container states is kept.
func TestApplyLimitRangeDefaults(t *testing.T) {
	lr := containerRange(corev1.LimitRangeItem{Default: rl("cpu", "500m", "memory", "256Mi"), DefaultRequest: rl("cpu", "100m", "memory", "128Mi")})
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{containerWith("init", rl("memory", "64Mi"), rl("memory", "64Mi"))},
		Containers:     []corev1.Container{containerWith("web", nil, nil), containerWith("side", rl("cpu", "50m"), nil)},
	}}
	applyLimitRangeDefaults(lr, pod)

	web := pod.Spec.Containers[0].Resources
	if q := web.Requests.Cpu(); q.String() != "100m" {
		t.Errorf("web cpu request %s, want 100m", q)
	}
	if q := web.Limits.Memory(); q.String() != "256Mi" {
		t.Errorf("web memory limit %s, want 256Mi", q)
	}
	if q := pod.Spec.Containers[1].Resources.Requests.Cpu(); q.String() != "50m" {
		t.Errorf("side cpu request %s, want its own 50m", q)
	}
	if q := pod.Spec.InitContainers[0].Resources.Limits.Memory(); q.String() != "64Mi" {
		t.Errorf("init memory limit %s, want its own 64Mi", q)
	}
	want := "LimitRanger plugin set: cpu, memory request for container web; cpu, memory limit for container web; " +
		"memory request for container side; cpu, memory limit for container side; " +
		"cpu request for init container init; cpu limit for init container init"
	if got := pod.Annotations[limitRangerAnnotation]; got != want {
		t.Errorf("annotation\n got %q\nwant %q", got, want)
	}

	untouched := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{containerWith("c", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "1", "memory", "1Gi"))}}}
	applyLimitRangeDefaults(lr, untouched)
	if _, ok := untouched.Annotations[limitRangerAnnotation]; ok {
		t.Errorf("a pod that states everything got the annotation %q", untouched.Annotations[limitRangerAnnotation])
	}
}

func TestPodLimitErrors(t *testing.T) {
	cases := []struct {
		name string
		lr   *corev1.LimitRange
		pod  []corev1.Container
		want string
	}{
		{"within bounds", containerRange(corev1.LimitRangeItem{Min: rl("cpu", "100m"), Max: rl("cpu", "1")}),
			[]corev1.Container{containerWith("x", rl("cpu", "200m"), rl("cpu", "500m"))}, ""},
		{"limit above max", containerRange(corev1.LimitRangeItem{Max: rl("cpu", "500m")}),
			[]corev1.Container{containerWith("x", rl("cpu", "200m"), rl("cpu", "1"))}, "maximum cpu usage per Container is 500m, but limit is 1"},
		{"no limit under a max", containerRange(corev1.LimitRangeItem{Max: rl("memory", "1Gi")}),
			[]corev1.Container{containerWith("x", nil, nil)}, "maximum memory usage per Container is 1Gi.  No limit is specified"},
		{"request below min", containerRange(corev1.LimitRangeItem{Min: rl("cpu", "100m")}),
			[]corev1.Container{containerWith("x", rl("cpu", "50m"), nil)}, "minimum cpu usage per Container is 100m, but request is 50m"},
		{"no request over a min", containerRange(corev1.LimitRangeItem{Min: rl("cpu", "100m")}),
			[]corev1.Container{containerWith("x", nil, nil)}, "minimum cpu usage per Container is 100m.  No request is specified"},
		{"ratio exceeded", containerRange(corev1.LimitRangeItem{MaxLimitRequestRatio: rl("cpu", "2")}),
			[]corev1.Container{containerWith("x", rl("cpu", "100m"), rl("cpu", "300m"))}, "cpu max limit to request ratio per Container is 2, but provided ratio is 3.000000"},
		{"ratio kept", containerRange(corev1.LimitRangeItem{MaxLimitRequestRatio: rl("cpu", "2")}),
			[]corev1.Container{containerWith("x", rl("cpu", "100m"), rl("cpu", "200m"))}, ""},
		{"pod total above max",
			&corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypePod, Max: rl("memory", "1Gi")}}}},
			[]corev1.Container{containerWith("a", rl("memory", "512Mi"), rl("memory", "768Mi")), containerWith("b", rl("memory", "256Mi"), rl("memory", "512Mi"))},
			"maximum memory usage per Pod is 1Gi, but limit is 1280Mi"},
	}
	for _, tc := range cases {
		err := podLimitErrors(tc.lr, &corev1.Pod{Spec: corev1.PodSpec{Containers: tc.pod}})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tc.name, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestClaimLimitErrors(t *testing.T) {
	lr := &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypePersistentVolumeClaim, Min: rl("storage", "1Gi"), Max: rl("storage", "10Gi")}}}}
	claim := func(size string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", size)}}}
	}
	for size, want := range map[string]string{
		"5Gi":   "",
		"500Mi": "minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi",
		"20Gi":  "maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi",
	} {
		err := claimLimitErrors(lr, claim(size))
		if (want == "") != (err == nil) || (err != nil && err.Error() != want) {
			t.Errorf("claim of %s: error %v, want %q", size, err, want)
		}
	}
}

// The plugin defaults pods on create only, validates claims on update too, and takes
// LimitRanges the cache does not have yet from the API server.
func TestLimitRangerPlugin(t *testing.T) {
	lr := containerRange(corev1.LimitRangeItem{Max: rl("cpu", "500m"), Default: rl("cpu", "200m"), DefaultRequest: rl("cpu", "100m")})
	client := fake.NewClientset(lr)
	p := newLimitRanger(informers.NewSharedInformerFactory(client, 0), client)
	p.SetReadyFunc(func() bool { return true })
	ctx := context.Background()

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{containerWith("x", nil, nil)}}}
	attrs := admission.NewAttributesRecord(pod, nil, corev1.SchemeGroupVersion.WithKind("Pod"), "ns", "p",
		corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create, &metav1.CreateOptions{}, false, nil)
	if err := p.Admit(ctx, attrs, nil); err != nil {
		t.Fatal(err)
	}
	if q := pod.Spec.Containers[0].Resources.Limits.Cpu(); q.String() != "200m" {
		t.Fatalf("defaulted cpu limit %s, want 200m (LimitRange read from the API server)", q)
	}
	if err := p.Validate(ctx, attrs, nil); err != nil {
		t.Fatalf("defaulted pod refused: %v", err)
	}

	big := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: []corev1.Container{containerWith("x", nil, rl("cpu", "1"))}}}
	err := p.Validate(ctx, admission.NewAttributesRecord(big, nil, corev1.SchemeGroupVersion.WithKind("Pod"), "ns", "big",
		corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create, &metav1.CreateOptions{}, false, nil), nil)
	if err == nil || !strings.Contains(err.Error(), `pods "big" is forbidden: maximum cpu usage per Container is 500m, but limit is 1`) {
		t.Fatalf("oversized pod: %v", err)
	}

	old := pod.DeepCopy()
	update := admission.NewAttributesRecord(big, old, corev1.SchemeGroupVersion.WithKind("Pod"), "ns", "big",
		corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Update, &metav1.UpdateOptions{}, false, nil)
	if err := p.Validate(ctx, update, nil); err != nil {
		t.Errorf("pod update checked: %v", err)
	}
}
