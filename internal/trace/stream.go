package trace

import (
	"fmt"
	"io"
	"strings"
)

// WriteNewSteps writes, one line each, the steps of t that printed does not hold yet (by
// who, whom and what), and adds them to it: the flow as it happens, for `trace --watch`.
func WriteNewSteps(w io.Writer, t Trace, printed map[string]bool) {
	origin := traceOrigin(t)
	for _, s := range t.Steps {
		if s.Waiting {
			continue
		}
		key := s.From + "\x00" + s.To + "\x00" + s.What
		if printed[key] {
			continue
		}
		printed[key] = true
		fmt.Fprintf(w, "%-22s %s → %s: %s\n", stepTime(s, origin), s.From, s.To, stepLabel(s))
	}
}

// WriteWhy writes only the diagnosis of t: where the pod is stuck, why, the evidence and
// the command that shows it; or that it is not stuck.
func WriteWhy(w io.Writer, t Trace) error {
	var b strings.Builder
	if t.Diagnosis.Stage == StageNone {
		fmt.Fprintf(&b, "pod %s: %s, not stuck", t.Pod, orDash(t.Phase))
		if t.Diagnosis.Reason != "" {
			fmt.Fprintf(&b, " (%s)", t.Diagnosis.Reason)
		}
		b.WriteString("\n")
	} else {
		b.WriteString(headerLine(t))
		b.WriteString("\n")
		writeTextDiagnosis(&b, t.Diagnosis)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
