package trace

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// fixtureStart is when the fixture's flow begins (not on a whole second: its times are
// shown to the millisecond).
var fixtureStart = time.Date(2024, 5, 6, 7, 8, 9, 100_000_000, time.UTC)

// fixtureAt is a moment of the fixture, ms milliseconds after fixtureStart.
func fixtureAt(ms int) time.Time {
	return fixtureStart.Add(time.Duration(ms) * time.Millisecond)
}

// escapedWhat is a step label with characters XML must escape.
const escapedWhat = "volume <vol-0abc> available & tagged"

// traceFixture is a pod stuck waiting for its volume's attachment: left-to-right and
// right-to-left arrows, a self step, a waiting step, transitions and a diagnosis.
func traceFixture() Trace {
	return Trace{
		Pod: "default/my-app", Node: "ip-10-0-1-5", Zone: "us-east-1a", Phase: "Pending",
		Start: fixtureStart,
		Steps: []Step{
			{From: Kubectl, To: APIServer, What: "POST PersistentVolumeClaim my-app-pvc", At: fixtureAt(0), Took: 12 * time.Millisecond, Source: "managedFields kubectl"},
			{From: APIServer, To: Etcd, What: "WRITE", At: fixtureAt(5), Took: 3 * time.Millisecond, Source: "managedFields kube-apiserver"},
			{From: Kubectl, To: APIServer, What: "POST Pod my-app", At: fixtureAt(200), Source: "managedFields kubectl"},
			{From: Scheduler, To: Scheduler, What: "scheduler selects node ip-10-0-1-5", At: fixtureAt(300), Source: "Event Scheduled"},
			{From: Scheduler, To: APIServer, What: "BIND", Detail: "ip-10-0-1-5", At: fixtureAt(350), Source: "managedFields kube-scheduler"},
			{From: APIServer, To: PVController, What: "WATCH claim", At: fixtureAt(400), Source: "Event WaitForFirstConsumer"},
			{From: Provisioner, To: APIServer, What: "POST PersistentVolume pvc-123", At: fixtureAt(3400), Source: "Event ProvisioningSucceeded"},
			{From: Provisioner, To: Cloud, What: "CreateVolume", Detail: "gp2, 1Gi", At: fixtureAt(1000), Took: 2100 * time.Millisecond, Source: "EC2 CreateTime"},
			{From: Cloud, To: Provisioner, What: escapedWhat, At: fixtureAt(3100), Source: "ebs-plugin log"},
			{From: Kubelet, To: Runtime, What: "RunPodSandbox", At: fixtureAt(4000), Took: 850 * time.Millisecond, Source: "Event SandboxChanged"},
			{From: Kubelet, To: APIServer, What: "GET VolumeAttachment", At: fixtureAt(5000), Source: "Event FailedAttachVolume", Waiting: true},
		},
		Transitions: []Transition{
			{Object: "pvc/my-app-pvc", Before: "", Event: "created", After: "Pending", At: fixtureAt(0)},
			{Object: "pod/my-app", Before: "", Event: "created", After: "Pending", At: fixtureAt(200)},
			{Object: "pv/pvc-123", Before: "", Event: "ProvisioningSucceeded", After: "Available", At: fixtureAt(3400)},
			{Object: "pv/pvc-123", Before: "Available", Event: "bound", After: "Bound", At: fixtureAt(3450), Took: 50 * time.Millisecond},
			{Object: "pvc/my-app-pvc", Before: "Pending", Event: "bound", After: "Bound", At: fixtureAt(3500), Took: 3500 * time.Millisecond},
		},
		Diagnosis: Diagnosis{
			Stage:    StageAttach,
			Reason:   "volume pvc-123 is not attached to ip-10-0-1-5",
			Evidence: "AttachVolume.Attach failed for volume \"pvc-123\": rpc error: code = DeadlineExceeded",
			Command:  "kubectl describe volumeattachment",
		},
	}
}

// usedInFixture and unusedInFixture are the participants the fixture's steps name, in
// order, and those they do not.
var (
	usedInFixture   = []string{Kubectl, APIServer, Etcd, Scheduler, PVController, Provisioner, Cloud, Kubelet, Runtime}
	unusedInFixture = []string{ADController, Attacher, CSIController, CSINode}
)

// renderText renders t as text, failing the test on error.
func renderText(t *testing.T, tr Trace) []string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteText(&b, tr); err != nil {
		t.Fatalf("WriteText: %v", err)
	}
	t.Logf("\n%s", b.String())
	return strings.Split(b.String(), "\n")
}

// lifelineColumns returns the rune indexes of the lifelines in a lifelines row.
func lifelineColumns(row string) []int {
	var xs []int
	for i, r := range []rune(row) {
		if r == lifelineRune {
			xs = append(xs, i)
		}
	}
	return xs
}

// arrowRowOf returns the row of the step labelled what: the row holding the label if it
// has an arrowhead, else the row above it (the label sits under its arrow).
func arrowRowOf(t *testing.T, lines []string, what string) []rune {
	t.Helper()
	for i, l := range lines {
		if !strings.Contains(l, what) {
			continue
		}
		if strings.ContainsAny(l, string(headRightRune)+string(headLeftRune)) || i == 0 {
			return []rune(l)
		}
		return []rune(lines[i-1])
	}
	t.Fatalf("no row holds %q", what)
	return nil
}

// indexRune returns the rune index of r in row, or -1.
func indexRune(row []rune, r rune) int {
	for i, c := range row {
		if c == r {
			return i
		}
	}
	return -1
}

func TestWriteTextHeaderAndColumns(t *testing.T) {
	lines := renderText(t, traceFixture())
	if want := "pod default/my-app on ip-10-0-1-5 (us-east-1a): Pending"; lines[0] != want {
		t.Errorf("header = %q, want %q", lines[0], want)
	}
	names := lines[2]
	last := -1
	for _, p := range usedInFixture {
		if n := strings.Count(names, p); n != 1 {
			t.Errorf("participant %q appears %d times in the names row %q, want 1", p, n, names)
			continue
		}
		i := strings.Index(names, p)
		if i <= last {
			t.Errorf("participant %q is out of order in the names row %q", p, names)
		}
		last = i
	}
	for _, p := range unusedInFixture {
		if strings.Contains(names, p) {
			t.Errorf("unused participant %q has a column: %q", p, names)
		}
	}
	if got := len(lifelineColumns(lines[3])); got != len(usedInFixture) {
		t.Errorf("lifelines = %d, want %d", got, len(usedInFixture))
	}
}

func TestWriteTextSteps(t *testing.T) {
	tr := traceFixture()
	out := strings.Join(renderText(t, tr), "\n")
	for _, s := range tr.Steps {
		if !strings.Contains(out, s.What) {
			t.Errorf("step %q is missing", s.What)
		}
	}
	if !strings.Contains(out, "CreateVolume (gp2, 1Gi)") {
		t.Errorf("the short Detail of CreateVolume is missing")
	}
}

func TestWriteTextArrowDirections(t *testing.T) {
	lines := renderText(t, traceFixture())
	xs := lifelineColumns(lines[3])
	col := func(p string) int {
		for i, u := range usedInFixture {
			if u == p {
				return xs[i]
			}
		}
		t.Fatalf("no column for %q", p)
		return 0
	}
	tests := []struct {
		what     string
		from, to string
	}{
		{"POST PersistentVolumeClaim my-app-pvc", Kubectl, APIServer},
		{"WRITE", APIServer, Etcd},
		{"POST PersistentVolume pvc-123", Provisioner, APIServer},
		{escapedWhat, Cloud, Provisioner},
		{"RunPodSandbox", Kubelet, Runtime},
	}
	for _, tt := range tests {
		row := arrowRowOf(t, lines, tt.what)
		from, to := col(tt.from), col(tt.to)
		if from < to {
			if got := indexRune(row, headRightRune); got != to-1 {
				t.Errorf("%q: %q at %d, want %d (left of %s's lifeline)", tt.what, headRightRune, got, to-1, tt.to)
			}
			if indexRune(row, headLeftRune) >= 0 {
				t.Errorf("%q: a left-to-right step has a %q", tt.what, headLeftRune)
			}
		} else {
			if got := indexRune(row, headLeftRune); got != to+1 {
				t.Errorf("%q: %q at %d, want %d (right of %s's lifeline)", tt.what, headLeftRune, got, to+1, tt.to)
			}
			if indexRune(row, headRightRune) >= 0 {
				t.Errorf("%q: a right-to-left step has a %q", tt.what, headRightRune)
			}
		}
		if row[from] != lifelineRune || row[to] != lifelineRune {
			t.Errorf("%q: the lifelines at the arrow's ends are gone: %q", tt.what, string(row))
		}
	}
}

func TestWriteTextSelfStep(t *testing.T) {
	lines := renderText(t, traceFixture())
	note := "[scheduler selects node ip-10-0-1-5]"
	xs := lifelineColumns(lines[3])
	for _, l := range lines {
		if i := strings.Index(l, note); i >= 0 {
			if got := len([]rune(l[:i])); got != xs[3] {
				t.Errorf("self note at column %d, want at the scheduler's lifeline (%d): %q", got, xs[3], l)
			}
			if !strings.HasSuffix(l, "+0.300s") {
				t.Errorf("the self note's row does not end with its time: %q", l)
			}
			return
		}
	}
	t.Errorf("no self note %q", note)
}

func TestWriteTextTimesAndWaiting(t *testing.T) {
	lines := renderText(t, traceFixture())
	tests := []struct{ what, time string }{
		{"POST PersistentVolumeClaim my-app-pvc", "+0.000s (took 12ms)"},
		{"POST Pod my-app", "+0.200s"},
		{"CreateVolume", "+1.000s (took 2.1s)"},
		{"RunPodSandbox", "+4.000s (took 850ms)"},
		{"GET VolumeAttachment", waitingMark},
	}
	for _, tt := range tests {
		row := string(arrowRowOf(t, lines, tt.what))
		if !strings.HasSuffix(row, tt.time) {
			t.Errorf("%q: row %q does not end with %q", tt.what, row, tt.time)
		}
	}
	waiting := string(arrowRowOf(t, lines, "GET VolumeAttachment"))
	if !strings.ContainsRune(waiting, dashedRune) || strings.ContainsRune(waiting, strokeRune) {
		t.Errorf("the waiting step is not dashed: %q", waiting)
	}
	if strings.Contains(waiting, "+5.000s") {
		t.Errorf("the waiting step shows a time: %q", waiting)
	}
	timeCol := -1
	for _, l := range lines {
		if i := strings.Index(l, "+0.200s"); i >= 0 && timeCol < 0 {
			timeCol = len([]rune(l[:i]))
		}
	}
	for _, l := range lines {
		if i := strings.Index(l, "+4.000s"); i >= 0 && len([]rune(l[:i])) != timeCol {
			t.Errorf("the time column is not aligned: %q", l)
		}
	}
}

func TestWriteTextTransitionsAndDiagnosis(t *testing.T) {
	tr := traceFixture()
	lines := renderText(t, tr)
	start := -1
	for i, l := range lines {
		if l == "State transitions" {
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("no State transitions table")
	}
	if got, want := strings.Join(strings.Fields(lines[start+1]), " "), "OBJECT BEFORE EVENT AFTER AT TOOK"; got != want {
		t.Errorf("table header = %q, want %q", got, want)
	}
	wantRows := [][]string{
		{"pvc/my-app-pvc", "-", "created", "Pending", "+0.000s", "-"},
		{"pod/my-app", "-", "created", "Pending", "+0.200s", "-"},
		{"pv/pvc-123", "-", "ProvisioningSucceeded", "Available", "+3.400s", "-"},
		{"pv/pvc-123", "Available", "bound", "Bound", "+3.450s", "50ms"},
		{"pvc/my-app-pvc", "Pending", "bound", "Bound", "+3.500s", "3.5s"},
	}
	for i, want := range wantRows {
		if got := strings.Fields(lines[start+2+i]); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("table row %d = %q, want %q", i, got, want)
		}
	}
	out := strings.Join(lines, "\n")
	block := "Stuck at attach: volume pvc-123 is not attached to ip-10-0-1-5\n" +
		"  evidence: " + tr.Diagnosis.Evidence + "\n" +
		"  see:      kubectl describe volumeattachment\n"
	if !strings.Contains(out, block) {
		t.Errorf("the diagnosis block is missing; want\n%s", block)
	}
}

func TestWriteTextNotStuck(t *testing.T) {
	tr := traceFixture()
	tr.Diagnosis = Diagnosis{}
	tr.Transitions = nil
	out := strings.Join(renderText(t, tr), "\n")
	if strings.Contains(out, "Stuck at") || strings.Contains(out, "State transitions") {
		t.Errorf("a running pod without transitions shows a diagnosis or a table")
	}
}

func TestWriteTextWideDiagramIsNotTruncated(t *testing.T) {
	extra := "a participant with a very long name that widens the diagram well past 200 columns"
	var steps []Step
	for i, p := range append(append([]string{}, Participants...), extra) {
		steps = append(steps, Step{From: Kubectl, To: p, What: "step " + p, At: fixtureAt(i)})
	}
	steps = append(steps, Step{From: Kubectl, To: extra, What: "the long one", At: fixtureAt(99)})
	lines := renderText(t, Trace{Pod: "default/wide", Start: fixtureStart, Steps: steps})
	xs := lifelineColumns(lines[3])
	if len(xs) != len(Participants)+1 {
		t.Fatalf("lifelines = %d, want %d", len(xs), len(Participants)+1)
	}
	last := xs[len(xs)-1]
	if last <= 200 {
		t.Fatalf("the diagram is only %d columns wide; the test wants more than 200", last)
	}
	row := arrowRowOf(t, lines, "the long one")
	if got := indexRune(row, headRightRune); got != last-1 {
		t.Errorf("arrowhead at %d, want %d", got, last-1)
	}
	label := "the long one"
	labelEnd := len([]rune(string(row)[:strings.Index(string(row), label)])) + len(label)
	for x := labelEnd; x < last-1; x++ {
		if row[x] == ' ' {
			t.Fatalf("the arrow has a gap at %d: %q", x, string(row))
		}
	}
}

func TestWriteTextNoSteps(t *testing.T) {
	lines := renderText(t, Trace{Pod: "default/gone"})
	if lines[0] != "pod default/gone: gone" {
		t.Errorf("header = %q", lines[0])
	}
	if lines[2] != "(no steps)" {
		t.Errorf("diagram = %q, want (no steps)", lines[2])
	}
}

func TestCompactDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{500 * time.Microsecond, "0.50ms"},
		{850 * time.Millisecond, "850ms"},
		{999*time.Millisecond + 600*time.Microsecond, "1s"},
		{1200 * time.Millisecond, "1.2s"},
		{2 * time.Second, "2s"},
		{42 * time.Second, "42s"},
		{59*time.Second + 700*time.Millisecond, "1m"},
		{2*time.Minute + 3*time.Second, "2m3s"},
		{time.Hour + 5*time.Minute + 10*time.Second, "1h5m"},
		{-1500 * time.Millisecond, "-1.5s"},
	}
	for _, tt := range tests {
		if got := compactDuration(tt.d); got != tt.want {
			t.Errorf("compactDuration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestSinceStart(t *testing.T) {
	tests := []struct {
		at   time.Time
		want string
	}{
		{fixtureAt(1234), "+1.234s"},
		{fixtureAt(0), "+0.000s"},
		{fixtureAt(-250), "-0.250s"},
		{fixtureAt(125000), "+125.000s"},
		{time.Time{}, "?"},
	}
	for _, tt := range tests {
		if got := sinceStart(tt.at, fixtureStart); got != tt.want {
			t.Errorf("sinceStart(%v) = %q, want %q", tt.at, got, tt.want)
		}
	}
	// Two times kept to the second (as the API keeps them) are shown to the second.
	whole := fixtureStart.Truncate(time.Second)
	if got := sinceStart(whole.Add(2*time.Second), whole); got != "+2s" {
		t.Errorf("sinceStart of whole seconds = %q, want +2s", got)
	}
}
