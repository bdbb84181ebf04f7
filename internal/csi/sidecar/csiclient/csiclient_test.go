package csiclient

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestTarget(t *testing.T) {
	cases := map[string]string{"unix:///run/csi.sock": "unix:///run/csi.sock", "/run/csi.sock": "unix:///run/csi.sock"}
	for in, want := range cases {
		if got, err := Target(in); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "tcp://127.0.0.1:1", "unix://relative.sock", "csi.sock"} {
		if _, err := Target(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

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
