package apiserver

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func limitsTestList(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = apiresource.MustParse(kv[i+1])
	}
	return out
}

// errorsSay checks that errs has exactly the wanted "<field>: <detail>" fragments.
func errorsSay(t *testing.T, what string, errs field.ErrorList, want ...string) {
	t.Helper()
	if len(errs) != len(want) {
		t.Errorf("%s: %d errors %v, want %d %v", what, len(errs), errs, len(want), want)
		return
	}
	for i, w := range want {
		if !strings.Contains(errs[i].Error(), w) {
			t.Errorf("%s: error %d is %q, want it to say %q", what, i, errs[i].Error(), w)
		}
	}
}

func TestValidateLimitRange(t *testing.T) {
	lr := func(items ...corev1.LimitRangeItem) *corev1.LimitRange {
		return &corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: items}}
	}
	container := corev1.LimitType("Container")
	errorsSay(t, "ordered", validateLimitRange(lr(corev1.LimitRangeItem{Type: container, Min: limitsTestList("cpu", "100m"),
		DefaultRequest: limitsTestList("cpu", "200m"), Default: limitsTestList("cpu", "300m"), Max: limitsTestList("cpu", "1"), MaxLimitRequestRatio: limitsTestList("cpu", "2")})))
	errorsSay(t, "min above max", validateLimitRange(lr(corev1.LimitRangeItem{Type: container, Min: limitsTestList("cpu", "1"), Max: limitsTestList("cpu", "500m")})),
		"spec.limits[0].min[cpu]: Invalid value: \"1\": min value 1 is greater than max value 500m")
	errorsSay(t, "default request above default", validateLimitRange(lr(corev1.LimitRangeItem{Type: container, DefaultRequest: limitsTestList("memory", "2Gi"), Default: limitsTestList("memory", "1Gi")})),
		"spec.limits[0].defaultRequest[memory]: Invalid value: \"2Gi\": default request value 2Gi is greater than default limit value 1Gi")
	errorsSay(t, "default above max", validateLimitRange(lr(corev1.LimitRangeItem{Type: container, Default: limitsTestList("cpu", "2"), Max: limitsTestList("cpu", "1")})),
		"default value 2 is greater than max value 1")
	errorsSay(t, "ratio below 1", validateLimitRange(lr(corev1.LimitRangeItem{Type: container, MaxLimitRequestRatio: limitsTestList("cpu", "500m")})),
		"spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: \"500m\": ratio 500m is less than 1")
	errorsSay(t, "unknown type", validateLimitRange(lr(corev1.LimitRangeItem{Type: "Node", Max: limitsTestList("cpu", "1")})),
		`spec.limits[0].type: Unsupported value: "Node"`)
	errorsSay(t, "duplicate type", validateLimitRange(lr(corev1.LimitRangeItem{Type: container}, corev1.LimitRangeItem{Type: container})),
		"spec.limits[1].type: Duplicate value")
	errorsSay(t, "pod defaults", validateLimitRange(lr(corev1.LimitRangeItem{Type: corev1.LimitTypePod, Default: limitsTestList("cpu", "1")})),
		"spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'")
	errorsSay(t, "claim without storage bound", validateLimitRange(lr(corev1.LimitRangeItem{Type: corev1.LimitTypePersistentVolumeClaim})),
		"spec.limits[0].limits: Required value: either minimum or maximum storage value is required, but neither was provided")
	errorsSay(t, "container storage", validateLimitRange(lr(corev1.LimitRangeItem{Type: container, Max: limitsTestList("storage", "1Gi")})),
		"spec.limits[0].max[storage]: Invalid value: \"storage\": must be a standard resource for containers")
}

func TestValidateResourceQuota(t *testing.T) {
	rq := func(hard corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes}}
	}
	errorsSay(t, "valid", validateResourceQuota(rq(limitsTestList("pods", "3", "requests.cpu", "2", "count/deployments.apps", "1",
		"gold.storageclass.storage.k8s.io/requests.storage", "10Gi"), corev1.ResourceQuotaScopeBestEffort)))
	errorsSay(t, "negative", validateResourceQuota(rq(limitsTestList("requests.cpu", "-1"))), "spec.hard[requests.cpu]: Invalid value: \"-1\": must be greater than or equal to 0")
	errorsSay(t, "fractional count", validateResourceQuota(rq(limitsTestList("pods", "1500m"))), "spec.hard[pods]: Invalid value: \"1500m\": must be an integer")
	errorsSay(t, "unknown name", validateResourceQuota(rq(limitsTestList("gpus", "1"))), "must be a standard resource for quota")
	errorsSay(t, "unknown scope", validateResourceQuota(rq(limitsTestList("pods", "1"), "Sometimes")), `spec.scopes[0]: Unsupported value: "Sometimes"`)
}

func TestQuotaRow(t *testing.T) {
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Spec:   corev1.ResourceQuotaSpec{Hard: limitsTestList("pods", "3", "limits.cpu", "2", "requests.memory", "1Gi")},
		Status: corev1.ResourceQuotaStatus{Hard: limitsTestList("pods", "3", "limits.cpu", "2", "requests.memory", "1Gi"), Used: limitsTestList("pods", "1", "limits.cpu", "500m", "requests.memory", "0")}}
	row := quotaRow(rq)
	if row[2] != "pods: 1/3, requests.memory: 0/1Gi" || row[3] != "limits.cpu: 500m/2" {
		t.Errorf("row %q", row)
	}
}
