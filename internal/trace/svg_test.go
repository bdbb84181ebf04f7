package trace

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

// renderSVGOf renders t as SVG, failing the test on error.
func renderSVGOf(t *testing.T, tr Trace) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteSVG(&b, tr); err != nil {
		t.Fatalf("WriteSVG: %v", err)
	}
	return b.String()
}

// svgGroup is a step group as decoded from the SVG: its class, tooltip, the elements in
// it and its text.
type svgGroup struct {
	class, title string
	elements     []xml.StartElement
	text         string
}

// svgAttr returns the value of the attribute named name, or "".
func svgAttr(e xml.StartElement, name string) string {
	for _, a := range e.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// decodeSVG decodes every token of doc, failing the test on a syntax error, and returns
// the root element and the step groups in order.
func decodeSVG(t *testing.T, doc string) (xml.StartElement, []svgGroup) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	var root xml.StartElement
	var groups []svgGroup
	var cur *svgGroup
	var inTitle bool
	depth := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG does not parse: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			depth++
			if depth == 1 {
				root = tok.Copy()
			}
			if tok.Name.Local == "g" && strings.HasPrefix(svgAttr(tok, "class"), "step") {
				groups = append(groups, svgGroup{class: svgAttr(tok, "class")})
				cur = &groups[len(groups)-1]
				continue
			}
			if cur != nil {
				cur.elements = append(cur.elements, tok.Copy())
				inTitle = tok.Name.Local == "title"
			}
		case xml.EndElement:
			depth--
			if tok.Name.Local == "g" {
				cur = nil
			}
			inTitle = false
		case xml.CharData:
			if cur == nil {
				continue
			}
			if inTitle {
				cur.title += string(tok)
			} else {
				cur.text += string(tok)
			}
		}
	}
	if depth != 0 {
		t.Fatalf("unbalanced elements: depth %d at the end", depth)
	}
	return root, groups
}

func TestWriteSVGParsesWithOneGroupPerStep(t *testing.T) {
	tr := traceFixture()
	root, groups := decodeSVG(t, renderSVGOf(t, tr))
	if root.Name.Local != "svg" || root.Name.Space != "http://www.w3.org/2000/svg" {
		t.Errorf("root = %v, want svg in the SVG namespace", root.Name)
	}
	if len(groups) != len(tr.Steps) {
		t.Fatalf("step groups = %d, want %d", len(groups), len(tr.Steps))
	}
	for i, g := range groups {
		s := tr.Steps[i]
		if len(g.elements) == 0 || g.elements[0].Name.Local != "title" {
			t.Errorf("step %q: the group does not start with a title", s.What)
		}
		if !strings.Contains(g.title, s.Source) {
			t.Errorf("step %q: tooltip %q does not name the source %q", s.What, g.title, s.Source)
		}
		if !strings.Contains(g.text, s.What) {
			t.Errorf("step %q: group text %q lacks the label", s.What, g.text)
		}
		var line, rect bool
		for _, e := range g.elements {
			switch e.Name.Local {
			case "line":
				line = true
				if !strings.Contains(svgAttr(e, "marker-end"), "arrow") {
					t.Errorf("step %q: the line has no arrowhead", s.What)
				}
				if s.Waiting != (svgAttr(e, "stroke-dasharray") != "") {
					t.Errorf("step %q (waiting %v): stroke-dasharray %q", s.What, s.Waiting, svgAttr(e, "stroke-dasharray"))
				}
			case "rect":
				rect = true
			}
		}
		if self := s.From == s.To; line == self || rect != self {
			t.Errorf("step %q (self %v): line %v, note box %v", s.What, self, line, rect)
		}
		if s.Waiting != (g.class == "step waiting") {
			t.Errorf("step %q (waiting %v): class %q", s.What, s.Waiting, g.class)
		}
	}
}

func TestWriteSVGEscapesText(t *testing.T) {
	tr := traceFixture()
	doc := renderSVGOf(t, tr)
	if strings.Contains(doc, escapedWhat) {
		t.Errorf("the label %q is not escaped", escapedWhat)
	}
	for _, s := range tr.Steps {
		if !strings.Contains(doc, esc(s.What)) {
			t.Errorf("the escaped label %q is missing", esc(s.What))
		}
	}
	if !strings.Contains(doc, "volume &lt;vol-0abc&gt; available &amp; tagged") {
		t.Errorf("the label with < and & is not escaped as expected")
	}
}

func TestWriteSVGSize(t *testing.T) {
	root, _ := decodeSVG(t, renderSVGOf(t, traceFixture()))
	width, errW := strconv.ParseFloat(svgAttr(root, "width"), 64)
	height, errH := strconv.ParseFloat(svgAttr(root, "height"), 64)
	if errW != nil || errH != nil || width <= 0 || height <= 0 {
		t.Fatalf("width %q, height %q: want positive numbers", svgAttr(root, "width"), svgAttr(root, "height"))
	}
	if want := "0 0 " + svgAttr(root, "width") + " " + svgAttr(root, "height"); svgAttr(root, "viewBox") != want {
		t.Errorf("viewBox = %q, want %q", svgAttr(root, "viewBox"), want)
	}
	small, _ := decodeSVG(t, renderSVGOf(t, Trace{Pod: "default/gone"}))
	if w, _ := strconv.ParseFloat(svgAttr(small, "width"), 64); w <= 0 || w >= width {
		t.Errorf("an empty trace is %v wide, want positive and less than %v", w, width)
	}
}

func TestWriteSVGTransitionsAndDiagnosis(t *testing.T) {
	tr := traceFixture()
	doc := renderSVGOf(t, tr)
	if got := strings.Count(doc, `<text class="transition" `); got != len(tr.Transitions) {
		t.Errorf("transition rows = %d, want %d", got, len(tr.Transitions))
	}
	i := strings.Index(doc, `<g class="diagnosis" fill="`+svgStuck+`">`)
	if i < 0 {
		t.Fatalf("no red diagnosis group")
	}
	for _, want := range []string{"Stuck at attach: " + tr.Diagnosis.Reason, "kubectl describe volumeattachment", "DeadlineExceeded"} {
		if !strings.Contains(doc[i:], esc(want)) {
			t.Errorf("the diagnosis lacks %q", want)
		}
	}
	tr.Diagnosis = Diagnosis{}
	if strings.Contains(renderSVGOf(t, tr), `class="diagnosis"`) {
		t.Errorf("a pod that is not stuck has a diagnosis")
	}
}

func TestWriteHTML(t *testing.T) {
	tr := traceFixture()
	var b bytes.Buffer
	if err := WriteHTML(&b, tr); err != nil {
		t.Fatalf("WriteHTML: %v", err)
	}
	page := b.String()
	for _, want := range []string{"<!doctype html>", `<meta charset="utf-8">`, "<title>trace of pod default/my-app</title>",
		"<svg", "</svg>", "<table>", "</html>", `<p class="diagnosis">`, esc(escapedWhat)} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, external := range []string{"<script", "<link", "src=", "@import", "url(http"} {
		if strings.Contains(page, external) {
			t.Errorf("the page loads an external resource: %q", external)
		}
	}
	if got := strings.Count(page, "<tr>"); got != len(tr.Transitions)+1 {
		t.Errorf("table rows = %d, want %d (a header and one per transition)", got, len(tr.Transitions)+1)
	}
	start, end := strings.Index(page, "<svg"), strings.LastIndex(page, "</svg>")
	if start < 0 || end < start {
		t.Fatalf("no inline SVG")
	}
	_, groups := decodeSVG(t, page[start:end+len("</svg>")])
	if len(groups) != len(tr.Steps) {
		t.Errorf("inline SVG step groups = %d, want %d", len(groups), len(tr.Steps))
	}
}

func TestWrap(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want []string
	}{
		{"", 10, []string{""}},
		{"a b c", 10, []string{"a b c"}},
		{"aaaa bbbb cccc", 9, []string{"aaaa bbbb", "cccc"}},
		{"averyveryverylongword x", 5, []string{"averyveryverylongword", "x"}},
	}
	for _, tt := range tests {
		if got := wrap(tt.s, tt.n); strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("wrap(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
