package resourceversion

import "testing"

func TestOlder(t *testing.T) {
	for _, tc := range []struct {
		rv, than string
		want     bool
	}{
		{"5", "7", true},
		{"7", "7", false},
		{"9", "7", false},
		{"99", "100", true}, // numbers, not strings
		{"", "7", false},
		{"7", "", false},
		{"abc", "7", false},
	} {
		if got := Older(tc.rv, tc.than); got != tc.want {
			t.Errorf("Older(%q, %q) = %v, want %v", tc.rv, tc.than, got, tc.want)
		}
	}
}
