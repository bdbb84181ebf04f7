package trace

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// SVG diagram geometry, in user units (pixels at scale 1).
const (
	svgMargin = 16.0
	// svgCharW is the estimated advance of one character of the 12px monospace font.
	svgCharW    = 7.2
	svgHeaderH  = 30.0
	svgBoxH     = 28.0
	svgRowH     = 36.0
	svgLineH    = 18.0
	svgMinSpan  = 150.0
	svgColGap   = 40.0
	svgNoteH    = 20.0
	svgWrapCols = 110
)

// svgHalo outlines a label in white so the lifelines it crosses do not cut through it.
const svgHalo = ` stroke="white" stroke-width="3" paint-order="stroke"`

// SVG colours.
const (
	svgInk     = "#1e293b"
	svgWaiting = "#d97706"
	svgStuck   = "#b91c1c"
	svgBox     = "#e0e7ff"
	svgNote    = "#fef9c3"
	svgFaint   = "#94a3b8"
)

// WriteSVG writes t to w as a standalone SVG sequence diagram: a header, a box per
// participant with its lifeline, an arrow per step labelled with What and timed at the
// left margin, then the state transitions and, in red, the diagnosis.
func WriteSVG(w io.Writer, t Trace) error {
	if _, err := io.WriteString(w, renderSVG(t)); err != nil {
		return fmt.Errorf("write svg trace of pod %s: %w", t.Pod, err)
	}
	return nil
}

// WriteHTML writes t to w as a self-contained HTML5 page: the SVG diagram inline, the
// state transitions as a table and the diagnosis as a paragraph.
func WriteHTML(w io.Writer, t Trace) error {
	var b strings.Builder
	b.WriteString("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(svgTitle(t)))
	b.WriteString(htmlStyle)
	b.WriteString("</head>\n<body>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(headerLine(t)))
	b.WriteString(renderSVG(t))
	writeHTMLTransitions(&b, t)
	writeHTMLDiagnosis(&b, t.Diagnosis)
	b.WriteString("</body>\n</html>\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write html trace of pod %s: %w", t.Pod, err)
	}
	return nil
}

// htmlStyle is the page's inline style sheet.
const htmlStyle = `<style>
body { font-family: sans-serif; margin: 1.5em; color: #1e293b; }
h1 { font-size: 1.2em; }
h2 { font-size: 1.05em; }
svg { display: block; max-width: 100%; height: auto; }
table { border-collapse: collapse; font-family: monospace; }
th, td { text-align: left; padding: 0.2em 0.8em; border-bottom: 1px solid #e2e8f0; }
.diagnosis { color: #b91c1c; }
</style>
`

// writeHTMLTransitions writes the state transitions as a table.
func writeHTMLTransitions(b *strings.Builder, t Trace) {
	if len(t.Transitions) == 0 {
		return
	}
	origin := traceOrigin(t)
	b.WriteString("<h2>State transitions</h2>\n<table>\n<thead><tr>")
	for _, h := range transitionHeader {
		fmt.Fprintf(b, "<th>%s</th>", esc(h))
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for _, tr := range t.Transitions {
		b.WriteString("<tr>")
		for _, c := range transitionCells(tr, origin) {
			fmt.Fprintf(b, "<td>%s</td>", esc(c))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n")
}

// writeHTMLDiagnosis writes where the pod is stuck as a paragraph, if it is.
func writeHTMLDiagnosis(b *strings.Builder, d Diagnosis) {
	if d.Stage == StageNone {
		return
	}
	fmt.Fprintf(b, "<p class=\"diagnosis\"><strong>Stuck at %s</strong>: %s", esc(d.Stage), esc(d.Reason))
	if d.Evidence != "" {
		fmt.Fprintf(b, "<br>\nevidence: %s", esc(d.Evidence))
	}
	if d.Command != "" {
		fmt.Fprintf(b, "<br>\nsee: <code>%s</code>", esc(d.Command))
	}
	b.WriteString("</p>\n")
}

// svgTitle is the document title of the diagram.
func svgTitle(t Trace) string {
	return "trace of pod " + orDash(t.Pod)
}

// esc escapes s for XML and HTML text and attribute values; characters XML does not
// allow become U+FFFD.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

// textWidth estimates the width of s in the diagram's font.
func textWidth(s string) float64 {
	return float64(utf8.RuneCountInString(s)) * svgCharW
}

// svgCanvas collects the SVG elements of a diagram and how far right they reach.
type svgCanvas struct {
	b    strings.Builder
	maxX float64
}

// reach notes that something extends to x.
func (c *svgCanvas) reach(x float64) {
	c.maxX = max(c.maxX, x)
}

// text writes a left-aligned text element at x, y (the baseline).
func (c *svgCanvas) text(x, y float64, attrs, s string) {
	fmt.Fprintf(&c.b, "<text x=\"%.1f\" y=\"%.1f\"%s>%s</text>\n", x, y, attrs, esc(s))
	c.reach(x + textWidth(s))
}

// renderSVG lays out and draws the whole diagram.
func renderSVG(t Trace) string {
	var c svgCanvas
	origin := traceOrigin(t)
	y := svgMargin + 14
	c.text(svgMargin, y, ` font-size="14" font-weight="bold"`, headerLine(t))
	y = c.sequence(t, origin, y+16)
	y = c.transitions(t, origin, y)
	y = c.diagnosis(t.Diagnosis, y)
	width, height := c.maxX+svgMargin, y+svgMargin

	var b strings.Builder
	fmt.Fprintf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"monospace\" font-size=\"12\" fill=\"%s\">\n",
		width, height, width, height, svgInk)
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(svgTitle(t)))
	b.WriteString(svgDefs)
	b.WriteString("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n")
	b.WriteString(c.b.String())
	b.WriteString("</svg>\n")
	return b.String()
}

// svgDefs are the arrowheads: one for done steps, one for the waiting step.
var svgDefs = `<defs>
<marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="9" markerHeight="9" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="` + svgInk + `"/></marker>
<marker id="arrow-waiting" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="9" markerHeight="9" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="` + svgWaiting + `"/></marker>
</defs>
`

// svgColumns returns the centre of each participant's column, the first at least left:
// columns are as wide as their name box and at least svgMinSpan apart.
func svgColumns(names []string, left float64) []float64 {
	xs := make([]float64, len(names))
	for i, name := range names {
		half := svgBoxWidth(name) / 2
		if i == 0 {
			xs[i] = left + half
			continue
		}
		prevHalf := svgBoxWidth(names[i-1]) / 2
		xs[i] = xs[i-1] + max(prevHalf+svgColGap+half, svgMinSpan)
	}
	return xs
}

// svgBoxWidth is the width of a participant's name box.
func svgBoxWidth(name string) float64 {
	return max(textWidth(name)+16, 80)
}

// sequence draws the participants, their lifelines and the steps from y down, and
// returns the y under them.
func (c *svgCanvas) sequence(t Trace, origin time.Time, top float64) float64 {
	names := usedParticipants(t.Steps)
	if len(names) == 0 {
		c.text(svgMargin, top+svgLineH, ` fill="`+svgFaint+`"`, "(no steps)")
		return top + svgLineH + 10
	}
	timeW := textWidth("+0.000s")
	for _, s := range t.Steps {
		timeW = max(timeW, textWidth(stepTime(s, origin)))
	}
	left := svgMargin + timeW + 16
	xs := svgColumns(names, left)
	index := map[string]int{}
	first := top + svgBoxH + 30
	bottom := first + float64(max(len(t.Steps)-1, 0))*svgRowH + 20
	for i, name := range names {
		index[name] = i
		c.participant(name, xs[i], top, bottom)
	}
	for k, s := range t.Steps {
		c.step(s, xs[index[s.From]], xs[index[s.To]], first+float64(k)*svgRowH, origin, left)
	}
	return bottom + 30
}

// participant draws a participant's name box at the top of its column and its dashed
// lifeline down to bottom.
func (c *svgCanvas) participant(name string, x, top, bottom float64) {
	w := svgBoxWidth(name)
	fmt.Fprintf(&c.b, "<g class=\"participant\">\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" rx=\"4\" fill=\"%s\" stroke=\"%s\"/>\n",
		x-w/2, top, w, svgBoxH, svgBox, svgInk)
	fmt.Fprintf(&c.b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", x, top+svgBoxH/2+4, esc(name))
	fmt.Fprintf(&c.b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"4 4\"/>\n</g>\n",
		x, top+svgBoxH, x, bottom, svgFaint)
	c.reach(x + w/2)
}

// step draws one step at height y as a group with a tooltip naming its source: the time
// at the left margin and an arrow from x1 to x2 labelled above, or a note box when the
// participant acts alone. Labels do not start left of left.
func (c *svgCanvas) step(s Step, x1, x2, y float64, origin time.Time, left float64) {
	colour, dash, marker, class := svgInk, "", "arrow", "step"
	if s.Waiting {
		colour, dash, marker, class = svgWaiting, ` stroke-dasharray="6 4"`, "arrow-waiting", "step waiting"
	}
	fmt.Fprintf(&c.b, "<g class=\"%s\">\n<title>%s</title>\n", class, esc(stepTooltip(s)))
	c.text(svgMargin, y+4, ` fill="`+colour+`"`, stepTime(s, origin))
	label := stepLabel(s)
	if x1 == x2 {
		c.note(label, x1, y, left, colour, dash)
	} else {
		fmt.Fprintf(&c.b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.5\"%s marker-end=\"url(#%s)\"/>\n",
			x1, y, x2, y, colour, dash, marker)
		lx := max((x1+x2)/2-textWidth(label)/2, left)
		c.text(lx, y-6, ` fill="`+colour+`"`+svgHalo, label)
	}
	c.b.WriteString("</g>\n")
}

// note draws a self-step: a small box on the lifeline at x holding the label.
func (c *svgCanvas) note(label string, x, y, left float64, colour, dash string) {
	w := textWidth(label) + 12
	bx := max(x-w/2, left)
	fmt.Fprintf(&c.b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" stroke=\"%s\"%s/>\n",
		bx, y-svgNoteH/2, w, svgNoteH, svgNote, colour, dash)
	c.text(bx+6, y+4, ` fill="`+colour+`"`, label)
	c.reach(bx + w)
}

// stepTooltip is a step's tooltip: its full label and where its times come from.
func stepTooltip(s Step) string {
	label := s.What
	if s.Detail != "" {
		label += " (" + s.Detail + ")"
	}
	source := s.Source
	if source == "" {
		source = "unknown"
	}
	return label + "\nsource: " + source
}

// transitions draws the state transitions table from y down and returns the y under it.
func (c *svgCanvas) transitions(t Trace, origin time.Time, y float64) float64 {
	if len(t.Transitions) == 0 {
		return y
	}
	rows := [][]string{transitionHeader}
	for _, tr := range t.Transitions {
		rows = append(rows, transitionCells(tr, origin))
	}
	xs := tableColumns(rows, svgMargin)
	y += svgLineH
	c.text(svgMargin, y, ` font-weight="bold"`, "State transitions")
	c.b.WriteString("<g class=\"transitions\">\n")
	for i, row := range rows {
		y += svgLineH
		class, attrs := "transition", ""
		if i == 0 {
			class, attrs = "transition-header", ` font-weight="bold"`
		}
		fmt.Fprintf(&c.b, "<text class=\"%s\" y=\"%.1f\"%s>", class, y, attrs)
		for j, cell := range row {
			fmt.Fprintf(&c.b, "<tspan x=\"%.1f\">%s</tspan>", xs[j], esc(cell))
			c.reach(xs[j] + textWidth(cell))
		}
		c.b.WriteString("</text>\n")
	}
	c.b.WriteString("</g>\n")
	return y + 10
}

// tableColumns returns where each column of rows starts: two characters right of the
// widest cell of the column before.
func tableColumns(rows [][]string, left float64) []float64 {
	var widths []int
	for _, row := range rows {
		for j, cell := range row {
			if j >= len(widths) {
				widths = append(widths, 0)
			}
			widths[j] = max(widths[j], utf8.RuneCountInString(cell))
		}
	}
	xs := make([]float64, len(widths))
	x := left
	for j, w := range widths {
		xs[j] = x
		x += float64(w+2) * svgCharW
	}
	return xs
}

// diagnosis draws, in red, where the pod is stuck (if it is) from y down and returns the y
// under it.
func (c *svgCanvas) diagnosis(d Diagnosis, y float64) float64 {
	if d.Stage == StageNone {
		return y
	}
	fmt.Fprintf(&c.b, "<g class=\"diagnosis\" fill=\"%s\">\n", svgStuck)
	y += svgLineH + 4
	c.text(svgMargin, y, ` font-weight="bold"`, "Stuck at "+d.Stage+": "+oneLine(d.Reason))
	lines := func(name, s string) {
		for i, part := range wrap(oneLine(s), svgWrapCols) {
			y += svgLineH
			if i == 0 {
				c.text(svgMargin+2*svgCharW, y, "", name)
			}
			c.text(svgMargin+12*svgCharW, y, "", part)
		}
	}
	if d.Evidence != "" {
		lines("evidence:", d.Evidence)
	}
	if d.Command != "" {
		lines("see:", d.Command)
	}
	c.b.WriteString("</g>\n")
	return y + 10
}

// wrap splits s into lines of at most n characters at spaces; a word longer than n keeps
// a line of its own.
func wrap(s string, n int) []string {
	var lines []string
	var cur string
	for _, word := range strings.Fields(s) {
		switch {
		case cur == "":
			cur = word
		case utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(word) <= n:
			cur += " " + word
		default:
			lines = append(lines, cur)
			cur = word
		}
	}
	if cur != "" || len(lines) == 0 {
		lines = append(lines, cur)
	}
	return lines
}
