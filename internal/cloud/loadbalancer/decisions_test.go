package loadbalancer

import (
	"slices"
	"testing"
)

func TestWildcard(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"/api/*", "/api/v1/users", true},
		{"/api/*", "/api", false},
		{"/api*", "/api", true},
		{"/img/?.png", "/img/a.png", true},
		{"/img/?.png", "/img/ab.png", false},
		{"*.example.com", "www.example.com", true},
		{"*.example.com", "example.com", false},
		{"*", "", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"/exact", "/exact", true},
		{"/exact", "/exact/", false},
	} {
		if got := wildcard(tc.pattern, tc.s); got != tc.want {
			t.Errorf("wildcard(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}

func TestMatchRule(t *testing.T) {
	fwd := func(tg string) Action { return Action{Forward: []WeightedTargetGroup{{ARN: tg, Weight: 1}}} }
	rules := []Rule{
		{Conditions: []Condition{{Field: "host-header", Values: []string{"api.example.com"}}, {Field: "path-pattern", Values: []string{"/v2/*"}}}, Action: fwd("api-v2")},
		{Conditions: []Condition{{Field: "host-header", Values: []string{"API.example.com", "*.api.example.com"}}}, Action: fwd("api")},
		{Conditions: []Condition{{Field: "path-pattern", Values: []string{"/static/*", "/favicon.ico"}}}, Action: fwd("static")},
		{Action: fwd("default")},
	}
	for _, tc := range []struct{ host, path, want string }{
		{"api.example.com", "/v2/users", "api-v2"},
		{"api.example.com:8080", "/v2/users", "api-v2"},
		{"Api.Example.com", "/v1/users", "api"},
		{"eu.api.example.com", "/v2/x", "api"},
		{"www.example.com", "/static/app.js", "static"},
		{"www.example.com", "/favicon.ico", "static"},
		{"www.example.com", "/Static/app.js", "default"}, // paths are case-sensitive
		{"", "/", "default"},
	} {
		r := matchRule(rules, tc.host, tc.path)
		if r == nil || r.Action.Forward[0].ARN != tc.want {
			t.Errorf("matchRule(%q, %q) = %+v, want %s", tc.host, tc.path, r, tc.want)
		}
	}
}

func TestEligible(t *testing.T) {
	for _, tc := range []struct {
		states []string
		min    int
		want   []int
	}{
		{[]string{"healthy", "unhealthy", "healthy"}, 1, []int{0, 2}},
		{[]string{"unhealthy", "initial"}, 1, []int{0, 1}}, // fail open
		{[]string{"healthy", "unhealthy", "unhealthy"}, 2, []int{0, 1, 2}},
		{[]string{"healthy", "healthy", "unhealthy"}, 2, []int{0, 1}},
		{nil, 1, []int{}},
	} {
		if got := eligible(tc.states, tc.min); !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("eligible(%v, %d) = %v, want %v", tc.states, tc.min, got, tc.want)
		}
	}
	if got := pickWeighted([]int{0, 3, 1}, 3); got != 2 {
		t.Errorf("pickWeighted = %d, want 2", got)
	}
	if got := pickWeighted([]int{0, 3, 1}, 0); got != 1 {
		t.Errorf("pickWeighted = %d, want 1", got)
	}
}

func TestStep(t *testing.T) {
	hc := HealthCheck{Healthy: 3, Unhealthy: 2}
	ok := probeResult{ok: true}
	bad := probeResult{reason: reasonMismatch, description: "Health checks failed with these codes: [503]"}
	s := checkState{health: Health{State: "initial"}}
	var seen []string
	for _, r := range []probeResult{ok, ok, ok, bad, ok, bad, bad, ok, ok, ok} {
		s = step(s, r, hc)
		seen = append(seen, s.health.State)
	}
	want := []string{"initial", "initial", "healthy", "healthy", "healthy", "healthy", "unhealthy", "unhealthy", "unhealthy", "healthy"}
	if !slices.Equal(seen, want) {
		t.Errorf("states %v, want %v", seen, want)
	}
	s = step(checkState{health: Health{State: "initial"}}, bad, hc)
	if s.health.Reason != reasonInitial {
		t.Errorf("one failure of a new target: %+v", s.health)
	}
	s = step(s, bad, hc)
	if s.health.State != "unhealthy" || s.health.Reason != reasonMismatch {
		t.Errorf("two failures: %+v", s.health)
	}
}

func TestMatchCode(t *testing.T) {
	for _, tc := range []struct {
		m    string
		code int
		want bool
	}{
		{"200", 200, true}, {"200", 204, false}, {"200-299", 204, true}, {"200,202", 202, true},
		{"200,202", 201, false}, {"", 200, true}, {"200-399,404", 404, true},
	} {
		if got := matchCode(tc.m, tc.code); got != tc.want {
			t.Errorf("matchCode(%q, %d) = %v", tc.m, tc.code, got)
		}
	}
}
