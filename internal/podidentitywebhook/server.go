package podidentitywebhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MutatePath is where the webhook answers AdmissionReviews.
const MutatePath = "/mutate"

// maxReviewBytes bounds a request body: the API server's own limit on an object is 3 MiB,
// and a review carries it once (old object none, on CREATE).
const maxReviewBytes = 8 << 20

// serviceAccountGetter reads a ServiceAccount; a missing one is an apierrors NotFound.
type serviceAccountGetter func(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)

// handler answers AdmissionReviews (admission.k8s.io/v1, or v1beta1 of the same shape)
// on pods: allowed always, with the JSON Patch Mutate makes when the pod's
// ServiceAccount names a role.
type handler struct {
	settings        Settings
	serviceAccounts serviceAccountGetter
	log             *slog.Logger
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		http.Error(w, "Invalid Content-Type, expected `application/json`", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
	if err != nil {
		http.Error(w, fmt.Sprintf("read request: %v", err), http.StatusBadRequest)
		return
	}
	if len(body) > maxReviewBytes {
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		if err == nil {
			err = fmt.Errorf("the AdmissionReview has no request")
		}
		http.Error(w, fmt.Sprintf("decode AdmissionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := h.review(r.Context(), review.Request)
	resp.UID = review.Request.UID
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	if out.APIVersion == "" {
		out.APIVersion, out.Kind = admissionv1.SchemeGroupVersion.String(), "AdmissionReview"
	}
	raw, err := json.Marshal(out)
	if err != nil {
		http.Error(w, fmt.Sprintf("encode AdmissionReview: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}

// review decides on one request: pods being created are mutated when their
// ServiceAccount names a role; everything else is allowed as it is. A ServiceAccount
// that cannot be read leaves the pod as it is, as the EKS webhook does.
func (h *handler) review(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allowed := &admissionv1.AdmissionResponse{Allowed: true}
	if req.Resource.Group != "" || req.Resource.Resource != "pods" || req.SubResource != "" || req.Operation != admissionv1.Create {
		return allowed
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Status: metav1.StatusFailure,
			Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest, Message: fmt.Sprintf("decode pod: %v", err)}}
	}
	namespace := req.Namespace
	saName := pod.Spec.ServiceAccountName
	if saName == "" {
		saName = "default"
	}
	log := h.log.With("namespace", namespace, "pod", podName(&pod), "serviceAccount", saName)
	sa, err := h.serviceAccounts(ctx, namespace, saName)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			log.Warn("pod not mutated: its service account cannot be read", "err", err)
		}
		return allowed
	}
	id, ok := IdentityOf(sa, h.settings)
	if !ok {
		return allowed
	}
	patch, changed := Mutate(&pod, id, h.settings.Region)
	raw, err := json.Marshal(patch)
	if err != nil {
		log.Error("pod not mutated", "err", err)
		return allowed
	}
	log.Info("pod mutated", "roleARN", id.RoleARN, "audience", id.Audience, "changed", changed)
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: raw, PatchType: &pt}
}

// podName is the pod's name, or its generateName while it has none.
func podName(p *corev1.Pod) string {
	if p.Name != "" {
		return p.Name
	}
	return p.GenerateName
}
