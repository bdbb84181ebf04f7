package loadbalancer

import (
	"net"
	"strings"
)

// matchRule returns the first rule whose conditions all match the request's host and
// path, or nil (a listener's last rule, the default, has none and always matches).
func matchRule(rules []Rule, host, path string) *Rule {
	host = hostOnly(host)
	for i := range rules {
		if ruleMatches(rules[i], host, path) {
			return &rules[i]
		}
	}
	return nil
}

func ruleMatches(r Rule, host, path string) bool {
	for _, c := range r.Conditions {
		ok := false
		for _, v := range c.Values {
			switch c.Field {
			case "host-header":
				ok = ok || wildcard(strings.ToLower(v), host)
			case "path-pattern":
				ok = ok || wildcard(v, path)
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// hostOnly lowercases a Host header and drops its port.
func hostOnly(h string) string {
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// wildcard matches s against pattern, where * is any run of characters (also none) and
// ? exactly one.
func wildcard(pattern, s string) bool {
	px, sx := 0, 0
	star, mark := -1, 0
	for sx < len(s) {
		switch {
		case px < len(pattern) && (pattern[px] == '?' || pattern[px] == s[sx]):
			px++
			sx++
		case px < len(pattern) && pattern[px] == '*':
			star, mark = px, sx
			px++
		case star >= 0:
			px = star + 1
			mark++
			sx = mark
		default:
			return false
		}
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}
