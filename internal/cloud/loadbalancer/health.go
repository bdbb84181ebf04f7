package loadbalancer

import (
	"strconv"
	"strings"
)

// ELB's target health reason codes.
const (
	reasonInitial  = "Elb.InitialHealthChecking"
	reasonTimeout  = "Target.Timeout"
	reasonMismatch = "Target.ResponseCodeMismatch"
	reasonFailed   = "Target.FailedHealthChecks"
)

// probeResult is one health check's outcome.
type probeResult struct {
	ok                  bool
	reason, description string
}

// checkState is a target's health and its run of equal results.
type checkState struct {
	health    Health
	successes int
	failures  int
}

// step is the health state machine: the state after one more check result. A target
// turns healthy after hc.Healthy consecutive successes and unhealthy after hc.Unhealthy
// consecutive failures; until either, a new target is initial.
func step(s checkState, r probeResult, hc HealthCheck) checkState {
	if r.ok {
		s.successes++
		s.failures = 0
		if s.health.State != "healthy" && s.successes >= hc.Healthy {
			s.health = Health{State: "healthy"}
		}
	} else {
		s.failures++
		s.successes = 0
		if s.health.State == "unhealthy" || s.failures >= hc.Unhealthy {
			s.health = Health{State: "unhealthy", Reason: r.reason, Description: r.description}
		}
	}
	if s.health.State == "initial" || s.health.State == "" {
		s.health = Health{State: "initial", Reason: reasonInitial, Description: "Initial health checking in progress"}
	}
	return s
}

// matchCode says whether an HTTP status satisfies a matcher ("200", "200-299",
// "200,202"; "" means 200).
func matchCode(matcher string, code int) bool {
	if matcher == "" {
		matcher = "200"
	}
	for _, part := range strings.Split(matcher, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		l, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		h := l
		if isRange {
			if h, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		if code >= l && code <= h {
			return true
		}
	}
	return false
}
