package containerd

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	containerdtypes "github.com/containerd/containerd/api/types"
	"golang.org/x/sys/unix"
)

func TestMountArgsOf(t *testing.T) {
	tests := []struct {
		name string
		m    *containerdtypes.Mount
		want mountArgs
		err  string
	}{
		{name: "one layer: a bind of its directory, made read-only",
			m:    &containerdtypes.Mount{Type: "bind", Source: "/root/snapshots/1/fs", Options: []string{"ro", "rbind"}},
			want: mountArgs{source: "/root/snapshots/1/fs", flags: unix.MS_BIND | unix.MS_REC | unix.MS_RDONLY, bind: true}},
		{name: "a bind asked for rw is read-only all the same",
			m:    &containerdtypes.Mount{Type: "bind", Source: "/s", Options: []string{"rw", "bind", "nosuid"}},
			want: mountArgs{source: "/s", flags: unix.MS_BIND | unix.MS_NOSUID | unix.MS_RDONLY, bind: true}},
		{name: "layers: an overlay of their directories",
			m:    &containerdtypes.Mount{Type: "overlay", Source: "overlay", Options: []string{"index=off", "lowerdir=/s/2/fs:/s/1/fs"}},
			want: mountArgs{source: "overlay", fstype: "overlay", flags: unix.MS_RDONLY, data: "index=off,lowerdir=/s/2/fs:/s/1/fs"}},
		{name: "no type", m: &containerdtypes.Mount{Source: "/s"}, err: "has no type"},
		{name: "too many layers for one page of options",
			m:   &containerdtypes.Mount{Type: "overlay", Source: "overlay", Options: []string{"lowerdir=" + strings.Repeat("/s/1/fs:", 1000)}},
			err: "longer than a page"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mountArgsOf(tt.m)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("mountArgsOf = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestChainIDOf(t *testing.T) {
	const (
		a = "sha256:a3ed95caeb02ffe68cdd9fd84406680ae93d633cb16422d00e8a7c22955b46d4"
		b = "sha256:2f6a1a3b0b5b3b0f5e6e7d1c1e0d6a7b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f"
	)
	tests := []struct {
		name string
		info map[string]string
		want string
		err  string
	}{
		{name: "containerd's chain id", info: map[string]string{"info": `{"chainID":"sha256:abc","imageSpec":{"rootfs":{"type":"layers","diff_ids":["` + a + `"]}}}`},
			want: "sha256:abc"},
		// One layer: its diff id; two: sha256 of "<first> <second>".
		{name: "one layer's diff id", info: map[string]string{"info": `{"imageSpec":{"rootfs":{"diff_ids":["` + a + `"]}}}`}, want: a},
		{name: "two layers", info: map[string]string{"info": `{"imageSpec":{"rootfs":{"diff_ids":["` + a + `","` + b + `"]}}}`},
			want: "sha256:" + sha256Hex(a+" "+b)},
		{name: "no info", info: nil, err: "no info"},
		{name: "no layers", info: map[string]string{"info": `{"imageSpec":{}}`}, err: "no layers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := chainIDOf(tt.info)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("chainIDOf = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
