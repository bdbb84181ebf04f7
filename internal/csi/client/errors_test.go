package client

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestIsFinal(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{status.Error(codes.InvalidArgument, "x"), true},
		{status.Error(codes.NotFound, "x"), true},
		{status.Error(codes.FailedPrecondition, "x"), true},
		{status.Error(codes.DeadlineExceeded, "x"), false},
		{status.Error(codes.Aborted, "x"), false},
		{status.Error(codes.Unavailable, "x"), false},
		{status.Error(codes.ResourceExhausted, "x"), false},
		{errors.New("plain"), false},
	}
	for _, tc := range cases {
		if got := IsFinal(tc.err); got != tc.want {
			t.Errorf("%v: final %v, want %v", tc.err, got, tc.want)
		}
	}
}
