package client

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// IsFinal says whether a CSI call's error is final: the driver has certainly not
// started the operation, or refused it for good, so retrying the same request
// would not help (as the external sidecars classify them). Timeouts, Aborted and
// Unavailable are not final: the operation may still be under way.
func IsFinal(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.Unknown:
		return false
	}
	return true
}

// Code is the gRPC code of err (codes.Unknown for non-status errors).
func Code(err error) codes.Code { return status.Code(err) }
