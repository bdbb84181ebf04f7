package trace_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kubelab/kubelab/internal/trace/tracetest"
)

// TestDocsTraceRendersInBrowser: the trace picture in the docs, drawn by a real run of
// the flow, renders in a real browser.
func TestDocsTraceRendersInBrowser(t *testing.T) {
	svg, err := filepath.Abs(filepath.Join("..", "..", "docs", "trace-example.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(svg); err != nil {
		t.Fatal(err)
	}
	tracetest.AssertRendersInBrowser(t, svg)
}
