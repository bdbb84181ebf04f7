package trace

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// Text diagram geometry, in terminal columns.
const (
	// nameGap is the number of spaces between two participant names.
	nameGap = 2
	// minLifelineGap is the least distance between two lifelines: room for `─►`.
	minLifelineGap = 4
	// timeGap is the number of spaces between the diagram and the time column.
	timeGap = 3
	// maxDetail is the longest Detail shown next to What in a label.
	maxDetail = 40
)

// Characters of the text diagram.
const (
	lifelineRune  = '│'
	strokeRune    = '─'
	dashedRune    = '╌'
	headRightRune = '►'
	headLeftRune  = '◄'
)

// waitingMark replaces the time of the step the flow waits at.
const waitingMark = "waiting…"

// WriteText writes t to w as a terminal sequence diagram: a header naming the pod, one
// column per participant that takes part in some step, one arrow per step with its time
// relative to t.Start, then the state transitions table and, when the pod is stuck, the
// diagnosis.
func WriteText(w io.Writer, t Trace) error {
	var b strings.Builder
	b.WriteString(headerLine(t))
	b.WriteString("\n\n")
	writeTextDiagram(&b, t)
	writeTextTransitions(&b, t)
	writeTextDiagnosis(&b, t.Diagnosis)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write trace of pod %s: %w", t.Pod, err)
	}
	return nil
}

// headerLine names the pod, where it runs and its phase.
func headerLine(t Trace) string {
	s := "pod " + orDash(t.Pod)
	if t.Node != "" {
		s += " on " + t.Node
	}
	if t.Zone != "" {
		s += " (" + t.Zone + ")"
	}
	phase := t.Phase
	if phase == "" {
		phase = "gone"
	}
	return s + ": " + phase
}

// usedParticipants returns the participants some step names, in Participants' order,
// followed by names Participants does not know, in the order they first appear.
func usedParticipants(steps []Step) []string {
	used := map[string]bool{}
	var extra []string
	for _, s := range steps {
		for _, p := range []string{s.From, s.To} {
			if used[p] {
				continue
			}
			used[p] = true
			if !slices.Contains(Participants, p) {
				extra = append(extra, p)
			}
		}
	}
	var out []string
	for _, p := range Participants {
		if used[p] {
			out = append(out, p)
		}
	}
	return append(out, extra...)
}

// traceOrigin is the moment step times are relative to: t.Start, or else the earliest
// time the trace knows.
func traceOrigin(t Trace) time.Time {
	if !t.Start.IsZero() {
		return t.Start
	}
	var first time.Time
	note := func(at time.Time) {
		if !at.IsZero() && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	for _, s := range t.Steps {
		note(s.At)
	}
	for _, tr := range t.Transitions {
		note(tr.At)
	}
	return first
}

// stepLabel is the text drawn with a step: What, and Detail in parentheses when short.
func stepLabel(s Step) string {
	label := oneLine(s.What)
	if d := oneLine(s.Detail); d != "" && utf8.RuneCountInString(d) <= maxDetail {
		label += " (" + d + ")"
	}
	return label
}

// stepTime is the time column of a step: its offset from origin and how long it took, or
// waitingMark for the step the flow waits at.
func stepTime(s Step, origin time.Time) string {
	if s.Waiting {
		return waitingMark
	}
	out := sinceStart(s.At, origin)
	if s.Took > 0 {
		out += " (took " + compactDuration(s.Took) + ")"
	}
	return out
}

// sinceStart formats at-origin as seconds with millisecond precision ("+1.234s"), or in
// whole seconds ("+1s") when both are whole seconds: the API keeps its timestamps to the
// second, and a time read from one is no more precise than that. "?" when at is unknown.
func sinceStart(at, origin time.Time) string {
	if at.IsZero() || origin.IsZero() {
		return "?"
	}
	d := at.Sub(origin)
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	if at.Nanosecond() == 0 && origin.Nanosecond() == 0 {
		return fmt.Sprintf("%s%ds", sign, int64(d/time.Second))
	}
	ms := d.Round(time.Millisecond).Milliseconds()
	return fmt.Sprintf("%s%d.%03ds", sign, ms/1000, ms%1000)
}

// compactDuration formats d briefly: 850ms, 1.2s, 42s, 2m3s, 1h5m.
func compactDuration(d time.Duration) string {
	if d < 0 {
		return "-" + compactDuration(-d)
	}
	if d == 0 {
		return "0s"
	}
	if d < time.Millisecond {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + "ms"
	}
	if ms := d.Round(time.Millisecond); ms < time.Second {
		return strconv.FormatInt(ms.Milliseconds(), 10) + "ms"
	}
	if tenths := d.Round(100 * time.Millisecond); tenths < 10*time.Second {
		s := strconv.FormatFloat(tenths.Seconds(), 'f', 1, 64)
		return strings.TrimSuffix(s, ".0") + "s"
	}
	if secs := d.Round(time.Second); secs < time.Minute {
		return strconv.Itoa(int(secs/time.Second)) + "s"
	} else if secs < time.Hour {
		return joinUnits(int(secs/time.Minute), "m", int(secs%time.Minute/time.Second), "s")
	}
	mins := d.Round(time.Minute)
	return joinUnits(int(mins/time.Hour), "h", int(mins%time.Hour/time.Minute), "m")
}

// joinUnits formats a big and a small unit, leaving out a small unit of zero: "2m3s", "2m".
func joinUnits(big int, bigUnit string, small int, smallUnit string) string {
	s := strconv.Itoa(big) + bigUnit
	if small != 0 {
		s += strconv.Itoa(small) + smallUnit
	}
	return s
}

// oneLine replaces the tabs and line breaks of s by spaces, so it keeps its cell or row.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s)
}

// orDash returns s, or "-" when s is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// textLayout places the participants' columns of the text diagram.
type textLayout struct {
	names []string
	// starts are where the names begin, lifelines where their lifelines run.
	starts, lifelines []int
	index             map[string]int
	// width is the right edge of the last name.
	width int
}

// newTextLayout gives each name a column as wide as the name, nameGap apart, with the
// lifeline under the name's middle, and lifelines at least minLifelineGap apart.
func newTextLayout(names []string) textLayout {
	l := textLayout{names: names, index: map[string]int{}}
	pos := 0
	for i, name := range names {
		w := max(utf8.RuneCountInString(name), 1)
		start := pos
		x := start + (w-1)/2
		if i > 0 {
			if short := minLifelineGap - (x - l.lifelines[i-1]); short > 0 {
				start += short
				x += short
			}
		}
		l.starts = append(l.starts, start)
		l.lifelines = append(l.lifelines, x)
		l.index[name] = i
		pos = start + w + nameGap
		l.width = start + w
	}
	return l
}

// namesRow is the row of participant names.
func (l textLayout) namesRow() []rune {
	r := blankRow(l.width)
	for i, name := range l.names {
		r = putText(r, l.starts[i], name)
	}
	return r
}

// lifelinesRow is a row with only the lifelines.
func (l textLayout) lifelinesRow() []rune {
	r := blankRow(l.width)
	for _, x := range l.lifelines {
		r[x] = lifelineRune
	}
	return r
}

// stepRows draws a step: its arrow (or self-note) row and, when the label does not fit
// on the arrow, a label row under it (nil otherwise).
func (l textLayout) stepRows(s Step) (arrow, label []rune) {
	text := stepLabel(s)
	from, to := l.lifelines[l.index[s.From]], l.lifelines[l.index[s.To]]
	if from == to {
		return l.selfNote(from, text), nil
	}
	r := l.lifelinesRow()
	stroke := strokeRune
	if s.Waiting {
		stroke = dashedRune
	}
	lo, hi := min(from, to), max(from, to)
	for x := lo + 1; x < hi; x++ {
		r[x] = stroke
	}
	textStart := lo + 2
	if from < to {
		r[hi-1] = headRightRune
	} else {
		r[lo+1] = headLeftRune
		textStart = lo + 3
	}
	n := utf8.RuneCountInString(text)
	if n == 0 {
		return r, nil
	}
	// The label needs a stroke before and after it, and the head.
	if n+3 <= hi-lo-1 {
		return putText(r, textStart, text), nil
	}
	return r, l.labelRow(lo, text)
}

// selfNote draws a step a participant takes alone: the label in brackets at its lifeline.
func (l textLayout) selfNote(x int, text string) []rune {
	return putText(l.lifelinesRow(), x, "["+text+"]")
}

// labelRow writes a label that does not fit on its arrow under it, starting just right of
// the arrow's left end, moved left if it would stick out past the last name.
func (l textLayout) labelRow(lo int, text string) []rune {
	n := utf8.RuneCountInString(text)
	start := max(min(lo+2, l.width-n-1), 0)
	return putText(l.lifelinesRow(), start, text+" ")
}

// blankRow returns a row of n spaces.
func blankRow(n int) []rune {
	r := make([]rune, n)
	for i := range r {
		r[i] = ' '
	}
	return r
}

// putText writes s into r from column at, growing r as needed.
func putText(r []rune, at int, s string) []rune {
	for _, c := range s {
		for at >= len(r) {
			r = append(r, ' ')
		}
		r[at] = c
		at++
	}
	return r
}

// textRow is one line of the diagram and the time shown at its right ("" for none).
type textRow struct {
	cells []rune
	time  string
}

// writeTextDiagram writes the participants' names and one row (or two) per step, with the
// time column aligned right of the widest row.
func writeTextDiagram(b *strings.Builder, t Trace) {
	names := usedParticipants(t.Steps)
	if len(names) == 0 {
		b.WriteString("(no steps)\n")
		return
	}
	l := newTextLayout(names)
	origin := traceOrigin(t)
	rows := []textRow{{cells: l.namesRow()}, {cells: l.lifelinesRow()}}
	for _, s := range t.Steps {
		arrow, label := l.stepRows(s)
		rows = append(rows, textRow{cells: arrow, time: stepTime(s, origin)})
		if label != nil {
			rows = append(rows, textRow{cells: label})
		}
	}
	rows = append(rows, textRow{cells: l.lifelinesRow()})
	width := 0
	for i := range rows {
		rows[i].cells = []rune(strings.TrimRight(string(rows[i].cells), " "))
		width = max(width, len(rows[i].cells))
	}
	for _, r := range rows {
		b.WriteString(string(r.cells))
		if r.time != "" {
			b.WriteString(strings.Repeat(" ", width-len(r.cells)+timeGap))
			b.WriteString(r.time)
		}
		b.WriteByte('\n')
	}
}

// transitionCells are the cells of a transitions table row, after the header
// OBJECT BEFORE EVENT AFTER AT TOOK.
func transitionCells(tr Transition, origin time.Time) []string {
	took := "-"
	if tr.Took > 0 {
		took = compactDuration(tr.Took)
	}
	return []string{orDash(oneLine(tr.Object)), orDash(oneLine(tr.Before)), orDash(oneLine(tr.Event)),
		orDash(oneLine(tr.After)), sinceStart(tr.At, origin), took}
}

// transitionHeader names the columns of the transitions table.
var transitionHeader = []string{"OBJECT", "BEFORE", "EVENT", "AFTER", "AT", "TOOK"}

// writeTextTransitions writes the state transitions table, if there are any.
func writeTextTransitions(b *strings.Builder, t Trace) {
	if len(t.Transitions) == 0 {
		return
	}
	origin := traceOrigin(t)
	b.WriteString("\nState transitions\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(transitionHeader, "\t"))
	for _, tr := range t.Transitions {
		fmt.Fprintln(tw, strings.Join(transitionCells(tr, origin), "\t"))
	}
	_ = tw.Flush() // a strings.Builder does not fail
}

// writeTextDiagnosis writes where the pod is stuck, if it is.
func writeTextDiagnosis(b *strings.Builder, d Diagnosis) {
	if d.Stage == StageNone {
		return
	}
	fmt.Fprintf(b, "\nStuck at %s: %s\n", d.Stage, oneLine(d.Reason))
	if d.Evidence != "" {
		fmt.Fprintf(b, "  evidence: %s\n", oneLine(d.Evidence))
	}
	if d.Command != "" {
		fmt.Fprintf(b, "  see:      %s\n", oneLine(d.Command))
	}
}
