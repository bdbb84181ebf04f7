// Package tracetest checks trace pictures the way their readers see them: in a real
// browser.
package tracetest

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chromiumFlags run Chromium headless without reaching out to any network.
var chromiumFlags = []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"}

var sizeAttr = regexp.MustCompile(`<svg[^>]*\swidth="([0-9.]+)"[^>]*\sheight="([0-9.]+)"`)

// AssertRendersInBrowser opens the SVG file svg in headless Chromium and checks that the
// browser parses it as an SVG document without errors and draws it: a screenshot of the
// picture's size has ink all over it, from the header at the top to the table at the
// bottom. It skips when Chromium is not installed.
func AssertRendersInBrowser(t testing.TB, svg string) {
	t.Helper()
	bin := chromium(t)
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	m := sizeAttr.FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no width and height on its <svg> element", svg)
	}
	w, _ := strconv.ParseFloat(string(m[1]), 64)
	h, _ := strconv.ParseFloat(string(m[2]), 64)
	url := "file://" + svg
	dom := run(t, bin, "--dump-dom", url)
	if !strings.Contains(dom, "<svg") || strings.Contains(dom, "parsererror") {
		t.Fatalf("Chromium did not parse %s as SVG:\n%.2000s", svg, dom)
	}
	shot := filepath.Join(t.TempDir(), "shot.png")
	run(t, bin, fmt.Sprintf("--window-size=%d,%d", int(w)+1, int(h)+1), "--screenshot="+shot, url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("Chromium made no screenshot of %s: %v", svg, err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot of %s: %v", svg, err)
	}
	top, bottom := inkRows(img)
	bounds := img.Bounds()
	if top < 0 || top > bounds.Dy()/10 || bottom < bounds.Dy()*8/10 {
		t.Errorf("screenshot of %s (%dx%d) has ink only in rows %d..%d: the picture is not drawn whole", svg, bounds.Dx(), bounds.Dy(), top, bottom)
	}
}

// inkRows are the first and last rows of img with a pixel that is not near white (-1:
// none).
func inkRows(img image.Image) (first, last int) {
	first, last = -1, -1
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r < 0xc000 || g < 0xc000 || bl < 0xc000 {
				if first < 0 {
					first = y - b.Min.Y
				}
				last = y - b.Min.Y
				break
			}
		}
	}
	return first, last
}

func chromium(t testing.TB) string {
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("Chromium is not installed (Debian package chromium; hack/setup.sh --test installs it)")
	return ""
}

// run runs Chromium with args and a fresh profile, and returns what it printed.
func run(t testing.TB, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	full := append(append([]string{}, chromiumFlags...), "--user-data-dir="+t.TempDir())
	cmd := exec.CommandContext(ctx, bin, append(full, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}
