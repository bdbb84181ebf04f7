package scheduler

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Code says how a plugin answered for one pod (and, at Filter, one node).
type Code int

const (
	// Success: the pod may go on.
	Success Code = iota
	// Error: something broke; the pod is retried after a backoff.
	Error
	// Unschedulable: the pod does not fit now; preemption might make room.
	Unschedulable
	// UnschedulableAndUnresolvable: the pod does not fit and preemption cannot help.
	UnschedulableAndUnresolvable
	// Skip: at PreFilter, the plugin has nothing to check for this pod.
	Skip
)

func (c Code) String() string {
	switch c {
	case Success:
		return "Success"
	case Error:
		return "Error"
	case Unschedulable:
		return "Unschedulable"
	case UnschedulableAndUnresolvable:
		return "UnschedulableAndUnresolvable"
	case Skip:
		return "Skip"
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Status is a plugin's answer. A nil *Status means Success.
type Status struct {
	code    Code
	reasons []string
	err     error
	plugin  string
}

// NewStatus makes a status with the upstream-worded reasons.
func NewStatus(code Code, reasons ...string) *Status {
	return &Status{code: code, reasons: reasons}
}

// AsStatus wraps an error as an Error status.
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{code: Error, reasons: []string{err.Error()}, err: err}
}

// Code of s (Success for nil).
func (s *Status) Code() Code {
	if s == nil {
		return Success
	}
	return s.code
}

// IsSuccess is true for nil and Success.
func (s *Status) IsSuccess() bool { return s.Code() == Success }

// IsSkip is true for Skip.
func (s *Status) IsSkip() bool { return s.Code() == Skip }

// IsRejected is true for both unschedulable codes.
func (s *Status) IsRejected() bool {
	c := s.Code()
	return c == Unschedulable || c == UnschedulableAndUnresolvable
}

// Reasons are the human-readable reasons.
func (s *Status) Reasons() []string {
	if s == nil {
		return nil
	}
	return s.reasons
}

// Message joins the reasons.
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.reasons, ", ")
}

// Plugin that answered.
func (s *Status) Plugin() string {
	if s == nil {
		return ""
	}
	return s.plugin
}

// WithPlugin records which plugin answered.
func (s *Status) WithPlugin(name string) *Status {
	if s != nil {
		s.plugin = name
	}
	return s
}

// AsError turns a non-success status into an error.
func (s *Status) AsError() error {
	if s.IsSuccess() || s.IsSkip() {
		return nil
	}
	if s.err != nil {
		return s.err
	}
	return errors.New(s.Message())
}

// Diagnosis records why a pod did not fit.
type Diagnosis struct {
	// NodeToStatus holds the rejecting status of each node that was filtered.
	NodeToStatus map[string]*Status
	// UnschedulablePlugins rejected the pod; their cluster events re-queue it.
	UnschedulablePlugins map[string]bool
	// PreFilterMsg is set when a PreFilter plugin rejected the pod for every node.
	PreFilterMsg string
	// PostFilterMsg is what preemption said.
	PostFilterMsg string
}

// FitError is returned when no node fits the pod.
type FitError struct {
	NumAllNodes int
	Diagnosis   Diagnosis
}

// noNodeAvailableMsg is upstream's wording.
const noNodeAvailableMsg = "0/%v nodes are available"

// Error reads as upstream's: "0/3 nodes are available: 1 node(s) had volume node affinity
// conflict, 2 Insufficient cpu. preemption: 0/3 nodes are available: 3 Preemption is not
// helpful for scheduling."
func (f *FitError) Error() string {
	msg := fmt.Sprintf(noNodeAvailableMsg+":", f.NumAllNodes)
	if f.Diagnosis.PreFilterMsg != "" {
		msg += " " + f.Diagnosis.PreFilterMsg + "."
	} else if h := reasonHistogram(f.Diagnosis.NodeToStatus); h != "" {
		msg += " " + h + "."
	}
	if pm := f.Diagnosis.PostFilterMsg; pm != "" {
		msg += " " + pm
		if !strings.HasSuffix(pm, ".") {
			msg += "."
		}
	}
	return msg
}

// reasonHistogram counts each reason over nodes: "1 node(s) had …, 2 Insufficient cpu".
func reasonHistogram(statuses map[string]*Status) string {
	counts := map[string]int{}
	for _, s := range statuses {
		for _, r := range s.Reasons() {
			counts[r]++
		}
	}
	parts := make([]string, 0, len(counts))
	for r, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
