package client

import "testing"

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
