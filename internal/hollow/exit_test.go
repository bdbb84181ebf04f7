package hollow

import (
	"testing"
	"time"
)

func TestExit(t *testing.T) {
	for _, tc := range []struct {
		ann  map[string]string
		run  time.Duration
		code int32
		ok   bool
	}{
		{ann: nil},
		{ann: map[string]string{ExitCodeAnnotation: "3"}},
		{ann: map[string]string{RunSecondsAnnotation: "5"}, run: 5 * time.Second, ok: true},
		{ann: map[string]string{RunSecondsAnnotation: "0.5", ExitCodeAnnotation: "42"}, run: 500 * time.Millisecond, code: 42, ok: true},
		{ann: map[string]string{RunSecondsAnnotation: "0"}, ok: true},
		{ann: map[string]string{RunSecondsAnnotation: "2", ExitCodeAnnotation: "x"}, run: 2 * time.Second, ok: true},
		{ann: map[string]string{RunSecondsAnnotation: "-1"}},
		{ann: map[string]string{RunSecondsAnnotation: "soon"}},
		{ann: map[string]string{RunSecondsAnnotation: "NaN"}},
		{ann: map[string]string{RunSecondsAnnotation: "1e300"}},
	} {
		run, code, ok := Exit(tc.ann)
		if run != tc.run || code != tc.code || ok != tc.ok {
			t.Errorf("Exit(%v) = %v, %d, %v; want %v, %d, %v", tc.ann, run, code, ok, tc.run, tc.code, tc.ok)
		}
	}
}
