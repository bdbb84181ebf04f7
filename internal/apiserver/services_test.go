package apiserver

import "testing"

func TestServiceNamePrefix(t *testing.T) {
	name := serviceHooks().name
	for _, tc := range []struct {
		name   string
		prefix bool
		ok     bool
	}{
		{"web", false, true}, {"web-", true, true}, {"w-", true, true}, {"web-", false, false},
		{"9web", false, true}, {"Web", false, false},
	} {
		if got := len(name(tc.name, tc.prefix)) == 0; got != tc.ok {
			t.Errorf("name %q prefix %v: valid %v, want %v", tc.name, tc.prefix, got, tc.ok)
		}
	}
}
