package driver

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// cloudStatus turns an error of the cloud (or of waiting on it) into the gRPC status
// the CSI spec asks for. It is the one place the controller makes codes from errors.
func cloudStatus(err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	code := codes.Internal
	switch {
	case errors.Is(err, ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, ErrIdempotentParams):
		code = codes.AlreadyExists
	case errors.Is(err, ErrZoneMismatch), errors.Is(err, ErrIncorrectState):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrAttachLimit), errors.Is(err, ErrVolumeLimit):
		code = codes.ResourceExhausted
	case errors.Is(err, ErrInvalidParameter):
		code = codes.InvalidArgument
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.Errorf(code, "%s: %v", msg, err)
}

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

func aborted(key string) error {
	return status.Errorf(codes.Aborted, "an operation on %s is already in progress", key)
}
