package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// writeStatus answers a streaming request with err as metav1.Status JSON: the API server
// hands the response of a refused upgrade to its client unchanged, and clients decode it.
func writeStatus(w http.ResponseWriter, err error) {
	st := toStatus(err)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

// toStatus turns err into a Status: API errors keep theirs, CRI (gRPC) errors map their
// code, anything else is an internal error.
func toStatus(err error) metav1.Status {
	var st metav1.Status
	var apiErr apierrors.APIStatus
	switch {
	case errors.As(err, &apiErr):
		st = apiErr.Status()
	default:
		code := http.StatusInternalServerError
		reason := metav1.StatusReasonInternalError
		if s, ok := status.FromError(err); ok {
			switch s.Code() {
			case codes.NotFound:
				code, reason = http.StatusNotFound, metav1.StatusReasonNotFound
			case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
				code, reason = http.StatusBadRequest, metav1.StatusReasonBadRequest
			case codes.Unimplemented:
				code, reason = http.StatusNotImplemented, metav1.StatusReasonMethodNotAllowed
			}
		}
		st = metav1.Status{Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: err.Error()}
	}
	st.Kind, st.APIVersion = "Status", "v1"
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
	return st
}

// writeText answers a log request with err as plain text, which the API server turns into
// the message of its own error (400 stays BadRequest, 404 NotFound).
func writeText(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = fmt.Fprint(w, err.Error())
}

// errorResponder answers proxy errors (the runtime's streaming server unreachable) as
// Status JSON.
type errorResponder struct{}

func (errorResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	writeStatus(w, fmt.Errorf("proxy to the container runtime's streaming server: %w", err))
}
