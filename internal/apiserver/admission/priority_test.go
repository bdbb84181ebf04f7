package admission

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func priorityClass(name string, value int32, globalDefault bool, policy corev1.PreemptionPolicy) *schedulingv1.PriorityClass {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: globalDefault}
	if policy != "" {
		pc.PreemptionPolicy = ptr.To(policy)
	}
	return pc
}

func TestResolvePriority(t *testing.T) {
	critical := priorityClass("system-cluster-critical", 2000000000, false, corev1.PreemptLowerPriority)
	never := priorityClass("batch", 100, false, corev1.PreemptNever)
	def := priorityClass("standard", 50, true, corev1.PreemptLowerPriority)
	cases := []struct {
		name       string
		podClass   string
		class      *schedulingv1.PriorityClass
		priority   *int32
		policy     *corev1.PreemptionPolicy
		want       int32
		wantPolicy corev1.PreemptionPolicy
		wantClass  string
		err        string
	}{
		{name: "no class, no default", want: 0, wantPolicy: corev1.PreemptLowerPriority},
		{name: "named class", podClass: "system-cluster-critical", class: critical, want: 2000000000,
			wantPolicy: corev1.PreemptLowerPriority, wantClass: "system-cluster-critical"},
		{name: "class policy", podClass: "batch", class: never, want: 100, wantPolicy: corev1.PreemptNever, wantClass: "batch"},
		{name: "default class named", class: def, want: 50, wantPolicy: corev1.PreemptLowerPriority, wantClass: "standard"},
		{name: "class without policy leaves the pod's", podClass: "bare", class: priorityClass("bare", 3, false, ""),
			policy: ptr.To(corev1.PreemptNever), want: 3, wantPolicy: corev1.PreemptNever, wantClass: "bare"},
		{name: "matching priority stated", podClass: "system-cluster-critical", class: critical, priority: ptr.To[int32](2000000000),
			want: 2000000000, wantPolicy: corev1.PreemptLowerPriority, wantClass: "system-cluster-critical"},
		{name: "own priority", priority: ptr.To[int32](7),
			err: "the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name"},
		{name: "own preemption policy", policy: ptr.To(corev1.PreemptNever),
			err: "the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name"},
		{name: "policy differs from the class's", podClass: "batch", class: never, policy: ptr.To(corev1.PreemptLowerPriority),
			err: "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name"},
	}
	for _, tc := range cases {
		pod := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: tc.podClass, Priority: tc.priority, PreemptionPolicy: tc.policy}}
		err := resolvePriority(pod, tc.class)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if pod.Spec.Priority == nil || *pod.Spec.Priority != tc.want {
			t.Errorf("%s: priority %v, want %d", tc.name, pod.Spec.Priority, tc.want)
		}
		if pod.Spec.PreemptionPolicy == nil || *pod.Spec.PreemptionPolicy != tc.wantPolicy {
			t.Errorf("%s: preemption policy %v, want %s", tc.name, pod.Spec.PreemptionPolicy, tc.wantPolicy)
		}
		if pod.Spec.PriorityClassName != tc.wantClass {
			t.Errorf("%s: class %q, want %q", tc.name, pod.Spec.PriorityClassName, tc.wantClass)
		}
	}
}

// The default is the globalDefault class with the lowest value.
func TestDefaultPriorityClass(t *testing.T) {
	cases := []struct {
		name    string
		classes []*schedulingv1.PriorityClass
		want    string
	}{
		{name: "none", want: ""},
		{name: "no default", classes: []*schedulingv1.PriorityClass{priorityClass("a", 1, false, "")}, want: ""},
		{name: "one default", classes: []*schedulingv1.PriorityClass{priorityClass("a", 1, false, ""), priorityClass("b", 5, true, "")}, want: "b"},
		{name: "lowest of several", classes: []*schedulingv1.PriorityClass{
			priorityClass("high", 900, true, ""), priorityClass("low", 10, true, ""), priorityClass("lower", 1, false, "")}, want: "low"},
	}
	for _, tc := range cases {
		got := ""
		if def := defaultPriorityClass(tc.classes); def != nil {
			got = def.Name
		}
		if got != tc.want {
			t.Errorf("%s: default %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestCheckSingleDefault(t *testing.T) {
	current := priorityClass("standard", 50, true, "")
	cases := []struct {
		name    string
		pc      *schedulingv1.PriorityClass
		create  bool
		current *schedulingv1.PriorityClass
		err     string
	}{
		{name: "first default", pc: priorityClass("standard", 50, true, ""), create: true},
		{name: "second default created", pc: priorityClass("other", 10, true, ""), create: true, current: current,
			err: "PriorityClass standard is already marked as default. Only one default can exist"},
		{name: "default updated", pc: priorityClass("standard", 50, true, ""), current: current},
		{name: "another class made default", pc: priorityClass("other", 10, true, ""), current: current,
			err: "PriorityClass standard is already marked as default. Only one default can exist"},
	}
	for _, tc := range cases {
		err := checkSingleDefault(tc.pc, tc.create, tc.current)
		if (tc.err == "") != (err == nil) || (err != nil && err.Error() != tc.err) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
	}
}

// newTestPriority is the plugin over a synced informer of cached, reading through a
// client that holds live (what the API server has but the cache may not yet).
func newTestPriority(t *testing.T, cached []runtime.Object, live ...runtime.Object) *priority {
	t.Helper()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(cached...), 0)
	p := newPriority(factory, fake.NewClientset(append(cached, live...)...))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return p
}

func podAttrs(pod *corev1.Pod, op admission.Operation, old *corev1.Pod) admission.Attributes {
	var opts runtime.Object = &metav1.CreateOptions{}
	if op == admission.Update {
		opts = &metav1.UpdateOptions{}
	}
	var oldObj runtime.Object
	if old != nil {
		oldObj = old
	}
	return admission.NewAttributesRecord(pod, oldObj, corev1.SchemeGroupVersion.WithKind("Pod"), pod.Namespace, pod.Name,
		corev1.SchemeGroupVersion.WithResource("pods"), "", op, opts, false, nil)
}

func classAttrs(pc *schedulingv1.PriorityClass, op admission.Operation, old *schedulingv1.PriorityClass) admission.Attributes {
	var opts runtime.Object = &metav1.CreateOptions{}
	var oldObj runtime.Object
	if op == admission.Update {
		opts, oldObj = &metav1.UpdateOptions{}, old
	}
	return admission.NewAttributesRecord(pc, oldObj, schedulingv1.SchemeGroupVersion.WithKind("PriorityClass"), "", pc.Name,
		schedulingv1.SchemeGroupVersion.WithResource("priorityclasses"), "", op, opts, false, nil)
}

// Pods take their class's priority and policy, the default class when they name none;
// an update that leaves the priority out keeps the one given at creation; an unknown
// class is forbidden; a class only the API server has yet is found.
func TestPriorityPlugin(t *testing.T) {
	ctx := context.Background()
	p := newTestPriority(t,
		[]runtime.Object{priorityClass("system-cluster-critical", 2000000000, false, corev1.PreemptLowerPriority),
			priorityClass("standard", 50, true, corev1.PreemptLowerPriority), priorityClass("batch", 100, false, corev1.PreemptNever)},
		priorityClass("fresh", 7, false, corev1.PreemptNever))

	critical := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}, Spec: corev1.PodSpec{PriorityClassName: "system-cluster-critical"}}
	if err := p.Admit(ctx, podAttrs(critical, admission.Create, nil), nil); err != nil {
		t.Fatalf("system class outside kube-system: %v", err)
	}
	if ptr.Deref(critical.Spec.Priority, -1) != 2000000000 {
		t.Errorf("critical pod priority %v", critical.Spec.Priority)
	}

	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	if err := p.Admit(ctx, podAttrs(plain, admission.Create, nil), nil); err != nil {
		t.Fatal(err)
	}
	if plain.Spec.PriorityClassName != "standard" || ptr.Deref(plain.Spec.Priority, -1) != 50 {
		t.Errorf("pod without class: class %q priority %v, want the default class standard (50)", plain.Spec.PriorityClassName, plain.Spec.Priority)
	}

	batch := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}, Spec: corev1.PodSpec{PriorityClassName: "batch"}}
	if err := p.Admit(ctx, podAttrs(batch, admission.Create, nil), nil); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(batch.Spec.PreemptionPolicy, "") != corev1.PreemptNever || ptr.Deref(batch.Spec.Priority, -1) != 100 {
		t.Errorf("batch pod: policy %v priority %v", batch.Spec.PreemptionPolicy, batch.Spec.Priority)
	}

	fresh := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "f", Namespace: "ns"}, Spec: corev1.PodSpec{PriorityClassName: "fresh"}}
	if err := p.Admit(ctx, podAttrs(fresh, admission.Create, nil), nil); err != nil {
		t.Fatalf("class not cached yet: %v", err)
	}
	if ptr.Deref(fresh.Spec.Priority, -1) != 7 {
		t.Errorf("fresh pod priority %v, want 7", fresh.Spec.Priority)
	}

	updated := &corev1.Pod{ObjectMeta: batch.ObjectMeta, Spec: corev1.PodSpec{PriorityClassName: "batch"}}
	if err := p.Admit(ctx, podAttrs(updated, admission.Update, batch), nil); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(updated.Spec.Priority, -1) != 100 || ptr.Deref(updated.Spec.PreemptionPolicy, "") != corev1.PreemptNever {
		t.Errorf("update lost the priority: %v %v", updated.Spec.Priority, updated.Spec.PreemptionPolicy)
	}

	bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}, Spec: corev1.PodSpec{PriorityClassName: "gold"}}
	err := p.Admit(ctx, podAttrs(bad, admission.Create, nil), nil)
	if !apierrors.IsForbidden(err) || err.Error() != `pods "q" is forbidden: no PriorityClass with name gold was found` {
		t.Errorf("unknown class: %v", err)
	}
}

// Only one class may be globalDefault; the default itself may be updated.
func TestPriorityPluginSingleDefault(t *testing.T) {
	ctx := context.Background()
	standard := priorityClass("standard", 50, true, corev1.PreemptLowerPriority)
	p := newTestPriority(t, []runtime.Object{standard, priorityClass("batch", 100, false, corev1.PreemptNever)})

	second := priorityClass("second", 10, true, corev1.PreemptLowerPriority)
	err := p.Validate(ctx, classAttrs(second, admission.Create, nil), nil)
	if !apierrors.IsForbidden(err) || err.Error() != `priorityclasses.scheduling.k8s.io "second" is forbidden: PriorityClass standard is already marked as default. Only one default can exist` {
		t.Errorf("second default: %v", err)
	}
	batch := priorityClass("batch", 100, true, corev1.PreemptNever)
	if err := p.Validate(ctx, classAttrs(batch, admission.Update, priorityClass("batch", 100, false, corev1.PreemptNever)), nil); !apierrors.IsForbidden(err) {
		t.Errorf("another class made default: %v", err)
	}
	relabelled := standard.DeepCopy()
	relabelled.Labels = map[string]string{"tier": "default"}
	if err := p.Validate(ctx, classAttrs(relabelled, admission.Update, standard), nil); err != nil {
		t.Errorf("update of the default: %v", err)
	}
	if err := p.Validate(ctx, classAttrs(priorityClass("plain", 1, false, ""), admission.Create, nil), nil); err != nil {
		t.Errorf("class that is not default: %v", err)
	}
}
