package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// corpusDifferencesFile lists the corpus cases on which kubelab and kube-apiserver are
// known to disagree, one a line: the case, a tab, a short reason.
const corpusDifferencesFile = "testdata/corpus-differences.txt"

// corpusOutEnv names a file TestValidationCorpus writes its Markdown table of
// differences to; corpusUpdateEnv=1 makes it rewrite corpusDifferencesFile from the run,
// keeping the reasons of cases already listed.
const (
	corpusOutEnv    = "KUBELAB_CORPUS_OUT"
	corpusUpdateEnv = "KUBELAB_CORPUS_UPDATE"
)

// corpusNamespace is where the namespaced cases are sent.
const corpusNamespace = "corpus"

// TestValidationCorpus sends the same create requests (dry run, strict field
// validation, byte-identical JSON bodies) to kubelab's API server and to the upstream
// kube-apiserver, both on one etcd with the same admin credentials, and compares per
// case the HTTP status code, the Status reason, the set of causes (type and field) and,
// for accepted objects, the defaulted object as returned. It fails when the set of
// cases on which they disagree differs from corpusDifferencesFile.
func TestValidationCorpus(t *testing.T) {
	bin := kubeAPIServerBinary()
	if bin == "" {
		t.Skipf("not run: no upstream kube-apiserver to compare with (hack/test.sh builds one with hack/upstream.sh; or set %s to one)", kubeAPIServerEnv)
	}
	s := apiservertest.Start(t, apiservertest.Options{})
	kas := startKubeAPIServer(t, bin, s)
	ctx := context.Background()

	type target struct {
		name   string
		config *rest.Config
		http   *http.Client
	}
	var targets [2]target
	for i, c := range []struct {
		name   string
		config *rest.Config
	}{{"kubelab", s.Config}, {"kube-apiserver", kas.config}} {
		client := kubernetes.NewForConfigOrDie(c.config)
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: corpusNamespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// No controller-manager runs beside kube-apiserver: the ServiceAccount admission
		// plugin wants the namespace's default account to exist.
		if _, err := client.CoreV1().ServiceAccounts(corpusNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: %v", c.name, err)
		}
		hc, err := rest.HTTPClientFor(c.config)
		if err != nil {
			t.Fatal(err)
		}
		targets[i] = target{c.name, c.config, hc}
	}

	var rows []corpusRow
	total := 0
	var perKind []corpusKindTotal
	ids := map[string]bool{}
	for _, k := range append(corpusKinds(), servedAPICorpusKinds()...) {
		perKind = append(perKind, corpusKindTotal{kind: k.kind})
		for _, c := range k.allCases() {
			if id := k.kind + "/" + c.name; ids[id] {
				t.Fatalf("the corpus has %s twice", id)
			} else {
				ids[id] = true
			}
			total++
			perKind[len(perKind)-1].cases++
			body, err := k.body(c)
			if err != nil {
				t.Fatalf("%s/%s: %v", k.kind, c.name, err)
			}
			var res [2]corpusResult
			for i, tg := range targets {
				res[i], err = corpusSend(ctx, tg.http, tg.config.Host, k.path(), body)
				if err != nil {
					t.Fatalf("%s/%s to %s: %v", k.kind, c.name, tg.name, err)
				}
			}
			if row, differ := corpusCompare(k, c, body, res[0], res[1]); differ {
				rows = append(rows, row)
				perKind[len(perKind)-1].differ++
			}
		}
	}
	t.Logf("%d cases: %d agree, %d differ", total, total-len(rows), len(rows))

	if out := os.Getenv(corpusOutEnv); out != "" {
		if err := os.WriteFile(out, []byte(corpusTable(total, perKind, rows)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	known, err := readCorpusDifferences(corpusDifferencesFile)
	if err != nil && !(os.IsNotExist(err) && os.Getenv(corpusUpdateEnv) == "1") {
		t.Fatal(err)
	}
	if os.Getenv(corpusUpdateEnv) == "1" {
		if err := writeCorpusDifferences(corpusDifferencesFile, rows, known); err != nil {
			t.Fatal(err)
		}
		return
	}
	var added []string
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.id()] = true
		if _, ok := known[r.id()]; !ok {
			line := r.id() + "\t" + r.reason()
			if len(r.defaults) > 0 {
				line += "\n\t\tkubelab: " + r.kubelab + "\n\t\tkube-apiserver: " + r.upstream
			}
			added = append(added, line)
		}
	}
	var fixed []string
	for id := range known {
		if !seen[id] {
			fixed = append(fixed, id)
		}
	}
	sort.Strings(fixed)
	if len(added) > 0 {
		t.Errorf("%d new differences from kube-apiserver (fix them, or add them to %s):\n%s", len(added), corpusDifferencesFile, strings.Join(added, "\n"))
	}
	if len(fixed) > 0 {
		t.Errorf("%d cases now agree with kube-apiserver; remove them from %s:\n%s", len(fixed), corpusDifferencesFile, strings.Join(fixed, "\n"))
	}
}

// corpusKind is one kind of the corpus: where it is created, a valid object, and the
// cases of its own besides the generic ones every kind gets.
type corpusKind struct {
	kind, apiVersion, resource string
	namespaced                 bool
	base                       cm
	cases                      []corpusCase
}

// corpusCase is one request: the base object changed by mut, then its JSON by raw.
type corpusCase struct {
	name string
	mut  corpusMut
	raw  func([]byte) []byte
}

type (
	cm        = map[string]any
	cl        = []any
	corpusMut func(o cm)
)

func (k corpusKind) path() string {
	p := "/apis/" + k.apiVersion
	if !strings.Contains(k.apiVersion, "/") {
		p = "/api/" + k.apiVersion
	}
	if k.namespaced {
		p += "/namespaces/" + corpusNamespace
	}
	return p + "/" + k.resource
}

// allCases are the valid object, the generic cases about object metadata and request
// decoding, and the kind's own.
func (k corpusKind) allCases() []corpusCase {
	cases := []corpusCase{
		{name: "valid"},
		{"name-uppercase", setTo("metadata.name", "Base"), nil},
		{"name-with-dot", setTo("metadata.name", "base.example"), nil},
		{"name-underscore", setTo("metadata.name", "base_1"), nil},
		{"name-253", setTo("metadata.name", strings.Repeat("a", 253)), nil},
		{"name-254", setTo("metadata.name", strings.Repeat("a", 254)), nil},
		{"name-empty", without("metadata.name"), nil},
		{"generate-name", allOf(without("metadata.name"), setTo("metadata.generateName", "gen-")), nil},
		{"namespace-other", setTo("metadata.namespace", "other"), nil},
		{"label-key-bad", setTo("metadata.labels", cm{"bad key": "x"}), nil},
		{"label-value-bad", setTo("metadata.labels", cm{"app": "-bad-"}), nil},
		{"annotation-key-bad", setTo("metadata.annotations", cm{"bad key": "x"}), nil},
		{"finalizer-unqualified", setTo("metadata.finalizers", cl{"foo"}), nil},
		{"owner-reference-no-uid", setTo("metadata.ownerReferences", cl{cm{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner"}}), nil},
		{"unknown-field", setTo("bogus", 1), nil},
	}
	return append(cases, k.cases...)
}

// body is the case's request body.
func (k corpusKind) body(c corpusCase) ([]byte, error) {
	o := corpusCopy(k.base).(cm)
	o["apiVersion"], o["kind"] = k.apiVersion, k.kind
	if c.mut != nil {
		c.mut(o)
	}
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	if c.raw != nil {
		b = c.raw(b)
	}
	return b, nil
}

// corpusCopy deep-copies a JSON value, keeping numbers as written.
func corpusCopy(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return corpusDecode(b)
}

func corpusDecode(b []byte) any {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return nil
	}
	return out
}

// setTo sets a dotted path (numbers index lists; an index one past the end appends).
func setTo(path string, v any) corpusMut {
	return func(o cm) { setPath(o, strings.Split(path, "."), corpusCopy(v)) }
}

// without removes a dotted path's last element from its map or list.
func without(path string) corpusMut {
	return func(o cm) { delPath(o, strings.Split(path, ".")) }
}

// dupFirst appends a copy of the list's first item to the list at path.
func dupFirst(path string) corpusMut {
	return func(o cm) {
		list := getPath(o, strings.Split(path, ".")).([]any)
		setPath(o, strings.Split(path, "."), append(list, corpusCopy(list[0])))
	}
}

func allOf(ms ...corpusMut) corpusMut {
	return func(o cm) {
		for _, m := range ms {
			m(o)
		}
	}
}

func getPath(o any, segs []string) any {
	for _, s := range segs {
		switch c := o.(type) {
		case map[string]any:
			o = c[s]
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil || i >= len(c) {
				return nil
			}
			o = c[i]
		default:
			return nil
		}
	}
	return o
}

func setPath(o any, segs []string, v any) any {
	if len(segs) == 0 {
		return v
	}
	switch c := o.(type) {
	case map[string]any:
		c[segs[0]] = setPath(c[segs[0]], segs[1:], v)
		return c
	case []any:
		i, err := strconv.Atoi(segs[0])
		if err != nil || i > len(c) {
			panic(fmt.Sprintf("corpus path: %q indexes a list of %d", segs[0], len(c)))
		}
		if i == len(c) {
			c = append(c, nil)
		}
		c[i] = setPath(c[i], segs[1:], v)
		return c
	case nil:
		if i, err := strconv.Atoi(segs[0]); err == nil {
			if i != 0 {
				panic(fmt.Sprintf("corpus path: %q indexes an empty list", segs[0]))
			}
			return []any{setPath(nil, segs[1:], v)}
		}
		return map[string]any{segs[0]: setPath(nil, segs[1:], v)}
	}
	panic(fmt.Sprintf("corpus path: %q under a %T", segs[0], o))
}

func delPath(o cm, segs []string) {
	parentSegs, last := segs[:len(segs)-1], segs[len(segs)-1]
	switch p := getPath(o, parentSegs).(type) {
	case map[string]any:
		delete(p, last)
	case []any:
		i, _ := strconv.Atoi(last)
		setPath(o, parentSegs, slices.Delete(p, i, i+1))
	}
}

// corpusResult is one server's answer, as far as it is compared.
type corpusResult struct {
	code    int
	reason  string
	causes  []string // "type field", sorted, unique
	message string
	object  any // the returned object, normalised, for 2xx answers
}

func (r corpusResult) accepted() bool { return r.code >= 200 && r.code < 300 }

func corpusSend(ctx context.Context, client *http.Client, host, path string, body []byte) (corpusResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, host+path+"?dryRun=All&fieldValidation=Strict", bytes.NewReader(body))
	if err != nil {
		return corpusResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return corpusResult{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return corpusResult{}, err
	}
	r := corpusResult{code: resp.StatusCode}
	if r.accepted() {
		r.object = corpusDecode(raw)
		return r, nil
	}
	var st metav1.Status
	if err := json.Unmarshal(raw, &st); err != nil || st.Kind != "Status" {
		r.message = strings.TrimSpace(string(raw))
		return r, nil
	}
	r.reason, r.message = string(st.Reason), st.Message
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			r.causes = append(r.causes, string(c.Type)+" "+c.Field)
		}
	}
	slices.Sort(r.causes)
	r.causes = slices.Compact(r.causes)
	return r, nil
}

// corpusRow is a case on which the servers disagree.
type corpusRow struct {
	kind, name        string
	kubelab, upstream string // the answers as the table shows them
	accepted          [2]bool
	defaults          []string
}

func (r corpusRow) id() string { return r.kind + "/" + r.name }

// reason is a short account of the difference for corpusDifferencesFile.
func (r corpusRow) reason() string {
	if len(r.defaults) > 0 {
		paths := make([]string, 0, len(r.defaults))
		for _, d := range r.defaults {
			paths = append(paths, d[:strings.Index(d, ": ")])
		}
		return "defaulted object differs at " + corpusTruncate(strings.Join(paths, ", "), 120)
	}
	switch {
	case r.accepted[0] && !r.accepted[1]:
		return corpusTruncate("kubelab accepts; kube-apiserver "+r.upstream, 160)
	case !r.accepted[0] && r.accepted[1]:
		return corpusTruncate("kube-apiserver accepts; kubelab "+r.kubelab, 160)
	}
	return corpusTruncate("kubelab "+r.kubelab+"; kube-apiserver "+r.upstream, 160)
}

var (
	corpusRandomName = regexp.MustCompile(`kube-api-access-[a-z0-9]{5}`)
	corpusTimestamp  = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$`)
)

// corpusCompare compares the two answers to one request.
func corpusCompare(k corpusKind, c corpusCase, body []byte, kubelab, upstream corpusResult) (corpusRow, bool) {
	row := corpusRow{kind: k.kind, name: c.name, accepted: [2]bool{kubelab.accepted(), upstream.accepted()}}
	if kubelab.code != upstream.code || kubelab.reason != upstream.reason || !slices.Equal(kubelab.causes, upstream.causes) {
		row.kubelab, row.upstream = corpusDescribe(kubelab), corpusDescribe(upstream)
		return row, true
	}
	if !kubelab.accepted() {
		return row, false
	}
	req := corpusDecode(body)
	a, b := corpusNormalize(k, req, kubelab.object), corpusNormalize(k, req, upstream.object)
	if reflect.DeepEqual(a, b) {
		return row, false
	}
	var diffs []string
	corpusDiff("", a, b, &diffs)
	row.defaults = diffs
	var l, u, more []string
	for i, d := range diffs {
		path, vals, _ := strings.Cut(d, ": ")
		if i >= 3 {
			more = append(more, "`"+path+"`")
			continue
		}
		kv, uv, _ := strings.Cut(vals, " | ")
		l, u = append(l, "`"+path+"`="+kv), append(u, "`"+path+"`="+uv)
	}
	if len(more) > 0 {
		also := "also differ: " + strings.Join(more, ", ")
		l, u = append(l, also), append(u, also)
	}
	row.kubelab = fmt.Sprintf("%d; %s", kubelab.code, strings.Join(l, "; "))
	row.upstream = fmt.Sprintf("%d; %s", upstream.code, strings.Join(u, "; "))
	return row, true
}

// corpusDescribe is an answer as the table shows it.
func corpusDescribe(r corpusResult) string {
	if r.accepted() {
		return strconv.Itoa(r.code)
	}
	s := strconv.Itoa(r.code)
	if r.reason != "" {
		s += " " + r.reason
	}
	if len(r.causes) == 0 {
		return s + ": " + corpusTruncate(r.message, 100)
	}
	short := make([]string, len(r.causes))
	for i, c := range r.causes {
		short[i] = strings.TrimPrefix(c, "FieldValue")
	}
	return s + ": " + strings.Join(short, ", ")
}

// corpusNormalize drops from an accepted object what necessarily differs between two
// servers: its identity and time of creation (and the uid wherever it is copied), managed
// fields, generated names and suffixes, and the addresses and ports each allocates for a
// Service.
func corpusNormalize(k corpusKind, req, obj any) any {
	o, ok := corpusCopy(obj).(cm)
	if !ok {
		return obj
	}
	uid := ""
	if md, ok := o["metadata"].(cm); ok {
		uid, _ = md["uid"].(string)
		for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields"} {
			delete(md, f)
		}
	}
	// A generated name shows wherever the server copies the name (labels, say).
	generated := ""
	if md, ok := o["metadata"].(cm); ok && md["generateName"] != nil {
		generated, _ = md["name"].(string)
	}
	if k.kind == "Service" {
		spec, _ := o["spec"].(cm)
		reqSpec, _ := req.(cm)["spec"].(cm)
		for _, f := range []string{"clusterIP", "clusterIPs", "healthCheckNodePort"} {
			if _, ok := spec[f]; ok && reqSpec[f] == nil && reqSpec["clusterIP"] == nil {
				spec[f] = "<allocated>"
			}
		}
		ports, _ := spec["ports"].([]any)
		reqPorts, _ := reqSpec["ports"].([]any)
		for i, p := range ports {
			pm, _ := p.(cm)
			if _, ok := pm["nodePort"]; ok && (i >= len(reqPorts) || reqPorts[i].(cm)["nodePort"] == nil) {
				pm["nodePort"] = "<allocated>"
			}
		}
	}
	return corpusMap(o, func(s string) string {
		if uid != "" {
			s = strings.ReplaceAll(s, uid, "<uid>")
		}
		if generated != "" {
			s = strings.ReplaceAll(s, generated, "<generated>")
		}
		if corpusTimestamp.MatchString(s) {
			return "<time>"
		}
		return corpusRandomName.ReplaceAllString(s, "kube-api-access-<random>")
	})
}

// corpusMap applies f to every string (values and map keys) in v.
func corpusMap(v any, f func(string) string) any {
	switch c := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(c))
		for k, e := range c {
			out[f(k)] = corpusMap(e, f)
		}
		return out
	case []any:
		out := make([]any, len(c))
		for i, e := range c {
			out[i] = corpusMap(e, f)
		}
		return out
	case string:
		return f(c)
	}
	return v
}

// corpusDiff appends "path: kubelab's value | kube-apiserver's value" for every leaf
// that differs; lists of different lengths differ as a whole.
func corpusDiff(path string, a, b any, out *[]string) {
	if reflect.DeepEqual(a, b) {
		return
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range keys {
				if !yield(k) {
					return
				}
			}
		}) {
			p := k
			if path != "" {
				p = path + "." + k
			}
			av, ain := am[k]
			bv, bin := bm[k]
			switch {
			case !ain:
				*out = append(*out, p+": (absent) | "+corpusValue(bv))
			case !bin:
				*out = append(*out, p+": "+corpusValue(av)+" | (absent)")
			default:
				corpusDiff(p, av, bv, out)
			}
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			corpusDiff(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i], out)
		}
		return
	}
	*out = append(*out, path+": "+corpusValue(a)+" | "+corpusValue(b))
}

func corpusValue(v any) string {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(v)
	return corpusTruncate(b.String(), 80)
}

func corpusTruncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// corpusKindTotal counts one kind's cases and those on which the servers disagree.
type corpusKindTotal struct {
	kind          string
	cases, differ int
}

// corpusTable is the Markdown account of a run: the totals, per kind, and the cases on
// which the servers disagree, in corpus order (so grouped by kind).
func corpusTable(total int, perKind []corpusKindTotal, rows []corpusRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Cases: %d, agreeing: %d, differing: %d.\n\n", total, total-len(rows), len(rows))
	b.WriteString("| Kind | Cases | Agreeing | Differing |\n| --- | --- | --- | --- |\n")
	for _, k := range perKind {
		fmt.Fprintf(&b, "| %s | %d | %d | %d |\n", k.kind, k.cases, k.cases-k.differ, k.differ)
	}
	if len(rows) == 0 {
		return b.String()
	}
	b.WriteString("\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	b.WriteString("| Kind | Case | kubelab | kube-apiserver |\n| --- | --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.kind, r.name, cell(r.kubelab), cell(r.upstream))
	}
	return b.String()
}

// readCorpusDifferences reads the known differences: case name to reason.
func readCorpusDifferences(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return map[string]string{}, err
	}
	defer f.Close()
	known := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, reason, _ := strings.Cut(line, "\t")
		known[strings.TrimSpace(id)] = strings.TrimSpace(reason)
	}
	return known, sc.Err()
}

func writeCorpusDifferences(path string, rows []corpusRow, known map[string]string) error {
	var b strings.Builder
	b.WriteString("# Cases of TestValidationCorpus on which kubelab's API server and kube-apiserver\n")
	b.WriteString("# disagree: the case, a tab, the reason.\n")
	for _, r := range rows {
		reason := known[r.id()]
		if reason == "" {
			reason = r.reason()
		}
		fmt.Fprintf(&b, "%s\t%s\n", r.id(), reason)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// The corpus.

func corpusPodSpec() cm {
	return cm{"containers": cl{cm{"name": "app", "image": "nginx:1.27"}}}
}

func corpusTemplate(spec cm) cm {
	return cm{"metadata": cm{"labels": cm{"app": "web"}}, "spec": spec}
}

func corpusSelector() cm { return cm{"matchLabels": cm{"app": "web"}} }

// corpusWorkloadCases are the cases every kind with a selector and a pod template at
// spec.template has.
func corpusWorkloadCases() []corpusCase {
	return []corpusCase{
		{"no-selector", without("spec.selector"), nil},
		{"selector-mismatch", setTo("spec.template.metadata.labels", cm{"app": "other"}), nil},
		{"selector-empty", setTo("spec.selector", cm{}), nil},
		{"selector-bad-operator", setTo("spec.selector", cm{"matchExpressions": cl{cm{"key": "app", "operator": "Equals", "values": cl{"web"}}}}), nil},
		{"selector-match-expressions", setTo("spec.selector", cm{"matchExpressions": cl{cm{"key": "app", "operator": "In", "values": cl{"web", "api"}}}}), nil},
		{"template-no-containers", setTo("spec.template.spec.containers", cl{}), nil},
		{"template-image-missing", without("spec.template.spec.containers.0.image"), nil},
		{"template-restart-never", setTo("spec.template.spec.restartPolicy", "Never"), nil},
		{"template-active-deadline", setTo("spec.template.spec.activeDeadlineSeconds", 10), nil},
		{"template-labels-bad", setTo("spec.template.metadata.labels", cm{"app": "web", "bad key": "x"}), nil},
		{"template-duplicate-containers", dupFirst("spec.template.spec.containers"), nil},
		{"min-ready-negative", setTo("spec.minReadySeconds", -1), nil},
		{"status-on-create", setTo("status", cm{"observedGeneration": 5}), nil},
	}
}

// projected is the volumes of a pod with one projected volume of the sources.
func projected(sources ...any) cl {
	return cl{cm{"name": "p", "projected": cm{"sources": cl(sources)}}}
}

// podCert is a projected podCertificate source, with the fields of with set (or
// removed when empty).
func podCert(with cm) cm {
	pc := cm{"signerName": "example.com/spiffe", "keyType": "ECDSAP256", "credentialBundlePath": "creds.pem"}
	for k, v := range with {
		if v == "" {
			delete(pc, k)
		} else {
			pc[k] = v
		}
	}
	return cm{"podCertificate": pc}
}

func corpusKinds() []corpusKind {
	long := func(n int) string { return strings.Repeat("a", n) }
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	pod := corpusKind{kind: "Pod", apiVersion: "v1", resource: "pods", namespaced: true,
		base: cm{"metadata": cm{"name": "base", "labels": cm{"app": "web"}}, "spec": cm{"containers": cl{cm{
			"name": "app", "image": "nginx:1.27", "ports": cl{cm{"name": "http", "containerPort": 80}},
			"resources": cm{"requests": cm{"cpu": "100m", "memory": "64Mi"}, "limits": cm{"memory": "128Mi"}},
		}}}},
		cases: []corpusCase{
			{"no-containers", setTo("spec.containers", cl{}), nil},
			{"container-name-missing", without("spec.containers.0.name"), nil},
			{"container-name-uppercase", setTo("spec.containers.0.name", "App"), nil},
			{"image-missing", without("spec.containers.0.image"), nil},
			{"image-with-spaces", setTo("spec.containers.0.image", "nginx latest"), nil},
			{"duplicate-container-names", dupFirst("spec.containers"), nil},
			{"init-container-same-name", setTo("spec.initContainers", cl{cm{"name": "app", "image": "busybox"}}), nil},
			{"sidecar-init-container", setTo("spec.initContainers", cl{cm{"name": "sidecar", "image": "busybox", "restartPolicy": "Always"}}), nil},
			{"init-container-restart-never", setTo("spec.initContainers", cl{cm{"name": "init", "image": "busybox", "restartPolicy": "Never"}}), nil},
			{"container-port-zero", setTo("spec.containers.0.ports", cl{cm{"containerPort": 0}}), nil},
			{"container-port-too-big", setTo("spec.containers.0.ports", cl{cm{"containerPort": 70000}}), nil},
			{"container-port-protocol-lowercase", setTo("spec.containers.0.ports", cl{cm{"containerPort": 80, "protocol": "tcp"}}), nil},
			{"duplicate-port-names", setTo("spec.containers.0.ports", cl{cm{"name": "http", "containerPort": 80}, cm{"name": "http", "containerPort": 81}}), nil},
			{"port-name-too-long", setTo("spec.containers.0.ports.0.name", "a-very-long-port-name"), nil},
			{"host-port-without-host-network", setTo("spec.containers.0.ports.0.hostPort", 8080), nil},
			{"host-network-port-mismatch", allOf(setTo("spec.hostNetwork", true), setTo("spec.containers.0.ports.0.hostPort", 81)), nil},
			{"host-network-defaults-host-port", setTo("spec.hostNetwork", true), nil},
			{"restart-policy-bad", setTo("spec.restartPolicy", "Sometimes"), nil},
			{"dns-policy-bad", setTo("spec.dnsPolicy", "Google"), nil},
			{"dns-none-without-config", setTo("spec.dnsPolicy", "None"), nil},
			{"image-pull-policy-bad", setTo("spec.containers.0.imagePullPolicy", "Sometimes"), nil},
			{"termination-message-policy-bad", setTo("spec.containers.0.terminationMessagePolicy", "Always"), nil},
			{"termination-grace-negative", setTo("spec.terminationGracePeriodSeconds", -5), nil},
			{"active-deadline-zero", setTo("spec.activeDeadlineSeconds", 0), nil},
			{"quantity-malformed", setTo("spec.containers.0.resources.requests.cpu", "1.5.5"), nil},
			{"request-negative", setTo("spec.containers.0.resources.requests.cpu", "-1"), nil},
			{"request-over-limit", setTo("spec.containers.0.resources.requests.memory", "256Mi"), nil},
			{"limit-only-defaults-request", setTo("spec.containers.0.resources", cm{"limits": cm{"cpu": "1", "memory": "1Gi"}}), nil},
			{"resource-name-unqualified", setTo("spec.containers.0.resources.requests.foo", "1"), nil},
			{"mount-unknown-volume", setTo("spec.containers.0.volumeMounts", cl{cm{"name": "data", "mountPath": "/data"}}), nil},
			{"mount-path-empty", allOf(setTo("spec.volumes", cl{cm{"name": "data", "emptyDir": cm{}}}), setTo("spec.containers.0.volumeMounts", cl{cm{"name": "data"}})), nil},
			{"duplicate-mount-paths", allOf(setTo("spec.volumes", cl{cm{"name": "a", "emptyDir": cm{}}, cm{"name": "b", "emptyDir": cm{}}}),
				setTo("spec.containers.0.volumeMounts", cl{cm{"name": "a", "mountPath": "/data"}, cm{"name": "b", "mountPath": "/data"}})), nil},
			{"duplicate-volume-names", setTo("spec.volumes", cl{cm{"name": "data", "emptyDir": cm{}}, cm{"name": "data", "emptyDir": cm{}}}), nil},
			{"volume-no-source", setTo("spec.volumes", cl{cm{"name": "data"}}), nil},
			{"volume-two-sources", setTo("spec.volumes", cl{cm{"name": "data", "emptyDir": cm{}, "hostPath": cm{"path": "/tmp"}}}), nil},
			{"volume-name-uppercase", setTo("spec.volumes", cl{cm{"name": "Data", "emptyDir": cm{}}}), nil},
			{"hostpath-type-bad", setTo("spec.volumes", cl{cm{"name": "data", "hostPath": cm{"path": "/tmp", "type": "Folder"}}}), nil},
			{"empty-dir-size-negative", setTo("spec.volumes", cl{cm{"name": "data", "emptyDir": cm{"sizeLimit": "-1Gi"}}}), nil},
			{"configmap-volume-mode-too-big", setTo("spec.volumes", cl{cm{"name": "cfg", "configMap": cm{"name": "cfg", "defaultMode": 1000}}}), nil},
			{"configmap-volume-defaults", setTo("spec.volumes", cl{cm{"name": "cfg", "configMap": cm{"name": "cfg"}}}), nil},
			{"secret-volume-missing-name", setTo("spec.volumes", cl{cm{"name": "s", "secret": cm{}}}), nil},
			{"pvc-volume-missing-claim", setTo("spec.volumes", cl{cm{"name": "pvc", "persistentVolumeClaim": cm{}}}), nil},
			{"projected-pod-certificate", setTo("spec.volumes", projected(podCert(nil))), nil},
			{"projected-pod-certificate-max-expiration-too-long", setTo("spec.volumes", projected(podCert(cm{"maxExpirationSeconds": 91*24*3600 + 1}))), nil},
			{"projected-pod-certificate-max-expiration-too-short", setTo("spec.volumes", projected(podCert(cm{"maxExpirationSeconds": 3599}))), nil},
			{"projected-pod-certificate-kubernetes-signer-over-a-day", setTo("spec.volumes", projected(podCert(cm{"signerName": "kubernetes.io/pods", "maxExpirationSeconds": 86401}))), nil},
			{"projected-pod-certificate-key-type-bad", setTo("spec.volumes", projected(podCert(cm{"keyType": "DSA"}))), nil},
			{"projected-pod-certificate-no-paths", setTo("spec.volumes", projected(podCert(cm{"credentialBundlePath": ""}))), nil},
			{"projected-pod-certificate-absolute-path", setTo("spec.volumes", projected(podCert(cm{"keyPath": "/key.pem", "certificateChainPath": "../chain.pem"}))), nil},
			{"projected-pod-certificate-signer-bad", setTo("spec.volumes", projected(podCert(cm{"signerName": "spiffe"}))), nil},
			{"projected-pod-certificate-user-annotation-unprefixed", setTo("spec.volumes", projected(podCert(cm{"userAnnotations": cm{"path": "/x"}}))), nil},
			{"projected-pod-certificate-user-annotation", setTo("spec.volumes", projected(podCert(cm{"userAnnotations": cm{"spiffe/path-overriding": "/x"}}))), nil},
			{"projected-duplicate-paths", setTo("spec.volumes", projected(podCert(nil), cm{"clusterTrustBundle": cm{"name": "bundle", "path": "creds.pem"}})), nil},
			{"projected-trust-bundle-by-name", setTo("spec.volumes", projected(cm{"clusterTrustBundle": cm{"name": "example.com:signer:one", "path": "ca.pem"}})), nil},
			{"projected-trust-bundle-name-bad", setTo("spec.volumes", projected(cm{"clusterTrustBundle": cm{"name": "example.com:signer:One_", "path": "ca.pem"}})), nil},
			{"projected-trust-bundle-name-and-selector", setTo("spec.volumes", projected(cm{"clusterTrustBundle": cm{"name": "bundle", "labelSelector": cm{}, "path": "ca.pem"}})), nil},
			{"projected-trust-bundle-by-signer", setTo("spec.volumes", projected(cm{"clusterTrustBundle": cm{"signerName": "example.com/signer", "labelSelector": cm{"matchLabels": cm{"a": "b"}}, "path": "ca.pem"}})), nil},
			{"projected-trust-bundle-name-and-signer", setTo("spec.volumes", projected(cm{"clusterTrustBundle": cm{"name": "bundle", "signerName": "example.com/signer", "path": "ca.pem"}})), nil},
			{"projected-trust-bundle-neither", setTo("spec.volumes", projected(cm{"clusterTrustBundle": cm{"path": "ca.pem"}})), nil},
			{"projected-trust-bundle-no-path", setTo("spec.volumes", projected(cm{"clusterTrustBundle": cm{"name": "bundle"}})), nil},
			{"projected-two-types-in-a-source", setTo("spec.volumes", projected(cm{"clusterTrustBundle": cm{"name": "bundle", "path": "ca.pem"}, "configMap": cm{"name": "cfg"}})), nil},
			{"projected-default-mode-too-big", setTo("spec.volumes", cl{cm{"name": "p", "projected": cm{"defaultMode": 1000, "sources": cl{cm{"configMap": cm{"name": "cfg"}}}}}}), nil},
			{"env-name-with-equals", setTo("spec.containers.0.env", cl{cm{"name": "A=B", "value": "x"}}), nil},
			{"env-value-and-value-from", setTo("spec.containers.0.env", cl{cm{"name": "A", "value": "x", "valueFrom": cm{"fieldRef": cm{"fieldPath": "metadata.name"}}}}), nil},
			{"env-field-ref-bad-path", setTo("spec.containers.0.env", cl{cm{"name": "A", "valueFrom": cm{"fieldRef": cm{"fieldPath": "spec.bogus"}}}}), nil},
			{"env-field-ref-defaults-api-version", setTo("spec.containers.0.env", cl{cm{"name": "A", "valueFrom": cm{"fieldRef": cm{"fieldPath": "metadata.name"}}}}), nil},
			{"probe-without-handler", setTo("spec.containers.0.livenessProbe", cm{"periodSeconds": 10}), nil},
			{"probe-two-handlers", setTo("spec.containers.0.livenessProbe", cm{"httpGet": cm{"path": "/", "port": 80}, "tcpSocket": cm{"port": 80}}), nil},
			{"probe-negative-threshold", setTo("spec.containers.0.livenessProbe", cm{"httpGet": cm{"path": "/", "port": 80}, "failureThreshold": -1}), nil},
			{"probe-defaults", setTo("spec.containers.0.readinessProbe", cm{"httpGet": cm{"port": "http"}}), nil},
			{"probe-named-port-unknown", setTo("spec.containers.0.readinessProbe", cm{"httpGet": cm{"port": "metrics"}}), nil},
			{"liveness-success-threshold-two", setTo("spec.containers.0.livenessProbe", cm{"tcpSocket": cm{"port": 80}, "successThreshold": 2}), nil},
			{"run-as-user-negative", setTo("spec.securityContext", cm{"runAsUser": -1}), nil},
			{"privileged-without-escalation", setTo("spec.containers.0.securityContext", cm{"privileged": true, "allowPrivilegeEscalation": false}), nil},
			{"capability-add", setTo("spec.containers.0.securityContext", cm{"capabilities": cm{"add": cl{"NET_ADMIN"}}}), nil},
			{"seccomp-localhost-without-profile", setTo("spec.securityContext", cm{"seccompProfile": cm{"type": "Localhost"}}), nil},
			{"fs-group-change-policy-bad", setTo("spec.securityContext", cm{"fsGroupChangePolicy": "Sometimes"}), nil},
			{"sysctl-bad-name", setTo("spec.securityContext", cm{"sysctls": cl{cm{"name": "bad sysctl", "value": "1"}}}), nil},
			{"node-selector-bad-value", setTo("spec.nodeSelector", cm{"disk": "ssd fast"}), nil},
			{"toleration-exists-with-value", setTo("spec.tolerations", cl{cm{"key": "k", "operator": "Exists", "value": "v"}}), nil},
			{"toleration-bad-effect", setTo("spec.tolerations", cl{cm{"key": "k", "operator": "Equal", "value": "v", "effect": "NoRun"}}), nil},
			{"toleration-seconds-with-noschedule", setTo("spec.tolerations", cl{cm{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}}), nil},
			{"toleration-operator-bad", setTo("spec.tolerations", cl{cm{"key": "k", "operator": "Is"}}), nil},
			{"node-affinity-empty-terms", setTo("spec.affinity", cm{"nodeAffinity": cm{"requiredDuringSchedulingIgnoredDuringExecution": cm{"nodeSelectorTerms": cl{}}}}), nil},
			{"pod-anti-affinity-no-topology-key", setTo("spec.affinity", cm{"podAntiAffinity": cm{"requiredDuringSchedulingIgnoredDuringExecution": cl{cm{"labelSelector": corpusSelector()}}}}), nil},
			{"topology-spread-bad-skew", setTo("spec.topologySpreadConstraints", cl{cm{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": corpusSelector()}}), nil},
			{"topology-spread-bad-when", setTo("spec.topologySpreadConstraints", cl{cm{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Never", "labelSelector": corpusSelector()}}), nil},
			{"hostname-uppercase", setTo("spec.hostname", "Web"), nil},
			{"subdomain-bad", setTo("spec.subdomain", "bad_sub"), nil},
			{"host-aliases-bad-ip", setTo("spec.hostAliases", cl{cm{"ip": "not-an-ip", "hostnames": cl{"a"}}}), nil},
			{"ephemeral-containers-on-create", setTo("spec.ephemeralContainers", cl{cm{"name": "debug", "image": "busybox"}}), nil},
			{"ephemeral-container-with-ports-and-probe", setTo("spec.ephemeralContainers", cl{cm{"name": "debug", "image": "busybox",
				"ports": cl{cm{"containerPort": 80}}, "readinessProbe": cm{"tcpSocket": cm{"port": 80}}, "resources": cm{"requests": cm{"cpu": "1"}}}}), nil},
			{"ephemeral-container-name-taken", setTo("spec.ephemeralContainers", cl{cm{"name": "app", "image": "busybox"}}), nil},
			{"ephemeral-container-target-unknown", setTo("spec.ephemeralContainers", cl{cm{"name": "debug", "image": "busybox", "targetContainerName": "nope"}}), nil},
			{"ephemeral-container-subpath", allOf(setTo("spec.volumes", cl{cm{"name": "data", "emptyDir": cm{}}}),
				setTo("spec.ephemeralContainers", cl{cm{"name": "debug", "image": "busybox", "volumeMounts": cl{cm{"name": "data", "mountPath": "/d", "subPath": "x"}}}})), nil},
			{"ephemeral-container-restart-policy", setTo("spec.ephemeralContainers", cl{cm{"name": "debug", "restartPolicy": "Always"}}), nil},
			{"container-restart-policy-always", setTo("spec.containers.0.restartPolicy", "Always"), nil},
			{"lifecycle-prestop-sleep-negative", setTo("spec.containers.0.lifecycle", cm{"preStop": cm{"sleep": cm{"seconds": -1}}}), nil},
			{"lifecycle-without-handler", setTo("spec.containers.0.lifecycle", cm{"preStop": cm{}}), nil},
			{"priority-without-class", setTo("spec.priority", 5), nil},
			{"priority-class-missing", setTo("spec.priorityClassName", "nope"), nil},
			{"priority-class-system", setTo("spec.priorityClassName", "system-node-critical"), nil},
			{"service-account-missing", setTo("spec.serviceAccountName", "nope"), nil},
			{"service-account-name-bad", setTo("spec.serviceAccountName", "Bad_SA"), nil},
			{"runtime-class-missing", setTo("spec.runtimeClassName", "nope"), nil},
			{"overhead-without-runtime-class", setTo("spec.overhead", cm{"cpu": "10m"}), nil},
			{"automount-token-false", setTo("spec.automountServiceAccountToken", false), nil},
			{"status-on-create", setTo("status", cm{"phase": "Running", "podIP": "10.0.0.9"}), nil},
			{"node-name-set", setTo("spec.nodeName", "node-1"), nil},
			{"node-name-bad", setTo("spec.nodeName", "Node_1"), nil},
			{"scheduling-gates", setTo("spec.schedulingGates", cl{cm{"name": "example.com/gate"}}), nil},
			{"scheduling-gate-bad-name", setTo("spec.schedulingGates", cl{cm{"name": "bad gate"}}), nil},
			{"scheduling-gate-with-node-name", allOf(setTo("spec.schedulingGates", cl{cm{"name": "example.com/gate"}}), setTo("spec.nodeName", "node-1")), nil},
			{"os-name-bad", setTo("spec.os", cm{"name": "plan9"}), nil},
			{"image-pull-secret-empty-name", setTo("spec.imagePullSecrets", cl{cm{}}), nil},
			{"readiness-gate-bad", setTo("spec.readinessGates", cl{cm{"conditionType": "bad type"}}), nil},
			{"preemption-policy-without-class", setTo("spec.preemptionPolicy", "Never"), nil},
		},
	}
	service := corpusKind{kind: "Service", apiVersion: "v1", resource: "services", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"selector": cm{"app": "web"}, "ports": cl{cm{"name": "http", "port": 80, "targetPort": 8080}}}},
		cases: []corpusCase{
			{"name-64", setTo("metadata.name", long(64)), nil},
			{"name-starts-with-digit", setTo("metadata.name", "1web"), nil},
			{"no-ports", without("spec.ports"), nil},
			{"port-zero", setTo("spec.ports.0.port", 0), nil},
			{"port-too-big", setTo("spec.ports.0.port", 70000), nil},
			{"target-port-omitted", without("spec.ports.0.targetPort"), nil},
			{"target-port-name", setTo("spec.ports.0.targetPort", "http"), nil},
			{"target-port-name-bad", setTo("spec.ports.0.targetPort", "Bad_Name"), nil},
			{"duplicate-port-names", setTo("spec.ports", cl{cm{"name": "http", "port": 80}, cm{"name": "http", "port": 81}}), nil},
			{"two-ports-unnamed", setTo("spec.ports", cl{cm{"port": 80}, cm{"port": 81}}), nil},
			{"duplicate-port-protocol", setTo("spec.ports", cl{cm{"name": "a", "port": 80}, cm{"name": "b", "port": 80}}), nil},
			{"protocol-lowercase", setTo("spec.ports.0.protocol", "tcp"), nil},
			{"protocol-udp", setTo("spec.ports.0.protocol", "UDP"), nil},
			{"app-protocol-bad", setTo("spec.ports.0.appProtocol", "bad/proto/x"), nil},
			{"type-bad", setTo("spec.type", "Internal"), nil},
			{"node-port-allocated", setTo("spec.type", "NodePort"), nil},
			{"node-port-valid", allOf(setTo("spec.type", "NodePort"), setTo("spec.ports.0.nodePort", 30080)), nil},
			{"node-port-out-of-range", allOf(setTo("spec.type", "NodePort"), setTo("spec.ports.0.nodePort", 80)), nil},
			{"node-port-on-cluster-ip", setTo("spec.ports.0.nodePort", 30080), nil},
			{"load-balancer", setTo("spec.type", "LoadBalancer"), nil},
			{"load-balancer-local", allOf(setTo("spec.type", "LoadBalancer"), setTo("spec.externalTrafficPolicy", "Local")), nil},
			{"load-balancer-class-bad", allOf(setTo("spec.type", "LoadBalancer"), setTo("spec.loadBalancerClass", "bad class")), nil},
			{"load-balancer-source-ranges-bad", allOf(setTo("spec.type", "LoadBalancer"), setTo("spec.loadBalancerSourceRanges", cl{"10.0.0.0/33"})), nil},
			{"cluster-ip-in-range", setTo("spec.clusterIP", "10.96.0.77"), nil},
			{"cluster-ip-out-of-range", setTo("spec.clusterIP", "192.168.0.10"), nil},
			{"cluster-ip-malformed", setTo("spec.clusterIP", "10.96.0.300"), nil},
			{"cluster-ips-mismatch", allOf(setTo("spec.clusterIP", "10.96.0.77"), setTo("spec.clusterIPs", cl{"10.96.0.78"})), nil},
			{"headless", setTo("spec.clusterIP", "None"), nil},
			{"headless-node-port", allOf(setTo("spec.clusterIP", "None"), setTo("spec.type", "NodePort")), nil},
			{"headless-no-ports", allOf(setTo("spec.clusterIP", "None"), without("spec.ports")), nil},
			{"external-name", allOf(setTo("spec.type", "ExternalName"), setTo("spec.externalName", "db.example.com"), without("spec.selector"), without("spec.ports")), nil},
			{"external-name-missing", setTo("spec.type", "ExternalName"), nil},
			{"external-name-bad", allOf(setTo("spec.type", "ExternalName"), setTo("spec.externalName", "bad_name!")), nil},
			{"external-name-with-cluster-ip", allOf(setTo("spec.type", "ExternalName"), setTo("spec.externalName", "db.example.com"), setTo("spec.clusterIP", "10.96.0.77")), nil},
			{"session-affinity-bad", setTo("spec.sessionAffinity", "Cookie"), nil},
			{"session-affinity-client-ip", setTo("spec.sessionAffinity", "ClientIP"), nil},
			{"session-affinity-timeout-too-big", allOf(setTo("spec.sessionAffinity", "ClientIP"), setTo("spec.sessionAffinityConfig", cm{"clientIP": cm{"timeoutSeconds": 86401}})), nil},
			{"external-traffic-policy-on-cluster-ip", setTo("spec.externalTrafficPolicy", "Local"), nil},
			{"internal-traffic-policy-bad", setTo("spec.internalTrafficPolicy", "Everywhere"), nil},
			{"ip-family-policy-bad", setTo("spec.ipFamilyPolicy", "Dual"), nil},
			{"ip-family-ipv6-single-stack-cluster", setTo("spec.ipFamilies", cl{"IPv6"}), nil},
			{"require-dual-stack", setTo("spec.ipFamilyPolicy", "RequireDualStack"), nil},
			{"selector-bad-value", setTo("spec.selector", cm{"app": "bad value"}), nil},
			{"external-ips-bad", setTo("spec.externalIPs", cl{"not-an-ip"}), nil},
			{"traffic-distribution-bad", setTo("spec.trafficDistribution", "Nearest"), nil},
			{"publish-not-ready", setTo("spec.publishNotReadyAddresses", true), nil},
		},
	}
	configMap := corpusKind{kind: "ConfigMap", apiVersion: "v1", resource: "configmaps", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "data": cm{"key": "value", "app.properties": "a=b"}},
		cases: []corpusCase{
			{"data-key-bad", setTo("data", cm{"bad key": "x"}), nil},
			{"data-key-dot", setTo("data", cm{".": "x"}), nil},
			{"data-key-dotdot-prefix", setTo("data", cm{"..a": "x"}), nil},
			{"data-key-slash", setTo("data", cm{"a/b": "x"}), nil},
			{"data-key-254", setTo("data", cm{long(254): "x"}), nil},
			{"key-in-data-and-binary-data", allOf(setTo("data", cm{"k": "x"}), setTo("binaryData", cm{"k": b64("x")})), nil},
			{"binary-data-not-base64", setTo("binaryData", cm{"k": "not base64!"}), nil},
			{"binary-data-valid", setTo("binaryData", cm{"bin": b64("\x00\x01")}), nil},
			{"too-large", setTo("data", cm{"big": long(1024*1024 + 1)}), nil},
			{"immutable", setTo("immutable", true), nil},
			{"data-not-string", setTo("data", cm{"n": 1}), nil},
			{"duplicate-json-field", nil, func(b []byte) []byte { return bytes.Replace(b, []byte(`{`), []byte(`{"kind":"ConfigMap",`), 1) }},
			{"kind-mismatch", setTo("kind", "Secret"), nil},
			{"api-version-missing", without("apiVersion"), nil},
			{"malformed-json", nil, func(b []byte) []byte { return b[:len(b)-1] }},
		},
	}
	secret := corpusKind{kind: "Secret", apiVersion: "v1", resource: "secrets", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "data": cm{"password": b64("pass")}},
		cases: []corpusCase{
			{"string-data-merged", setTo("stringData", cm{"user": "admin", "password": "override"}), nil},
			{"data-not-base64", setTo("data", cm{"k": "not base64!"}), nil},
			{"data-key-bad", setTo("data", cm{"bad key": b64("x")}), nil},
			{"string-data-key-bad", setTo("stringData", cm{"bad key": "x"}), nil},
			{"type-empty-string", setTo("type", ""), nil},
			{"type-custom", setTo("type", "example.com/custom"), nil},
			{"tls-missing-key", allOf(setTo("type", "kubernetes.io/tls"), setTo("data", cm{"tls.crt": b64("x")})), nil},
			{"tls-valid-shape", allOf(setTo("type", "kubernetes.io/tls"), setTo("data", cm{"tls.crt": b64("x"), "tls.key": b64("y")})), nil},
			{"dockerconfigjson-missing", allOf(setTo("type", "kubernetes.io/dockerconfigjson"), setTo("data", cm{})), nil},
			{"dockerconfigjson-invalid", allOf(setTo("type", "kubernetes.io/dockerconfigjson"), setTo("data", cm{".dockerconfigjson": b64("not json")})), nil},
			{"dockerconfigjson-valid", allOf(setTo("type", "kubernetes.io/dockerconfigjson"), setTo("data", cm{".dockerconfigjson": b64(`{"auths":{}}`)})), nil},
			{"dockercfg-invalid", allOf(setTo("type", "kubernetes.io/dockercfg"), setTo("data", cm{".dockercfg": b64("not json")})), nil},
			{"service-account-token-no-annotation", setTo("type", "kubernetes.io/service-account-token"), nil},
			{"service-account-token", allOf(setTo("type", "kubernetes.io/service-account-token"), setTo("metadata.annotations", cm{"kubernetes.io/service-account.name": "default"})), nil},
			{"basic-auth-empty", allOf(setTo("type", "kubernetes.io/basic-auth"), setTo("data", cm{})), nil},
			{"basic-auth-valid", allOf(setTo("type", "kubernetes.io/basic-auth"), setTo("data", cm{"username": b64("u")})), nil},
			{"ssh-auth-missing-key", allOf(setTo("type", "kubernetes.io/ssh-auth"), setTo("data", cm{})), nil},
			{"bootstrap-token", allOf(setTo("type", "bootstrap.kubernetes.io/token"), setTo("data", cm{"token-id": b64("abcdef")})), nil},
			{"too-large", setTo("data", cm{"big": b64(long(1024*1024 + 1))}), nil},
			{"immutable", setTo("immutable", true), nil},
		},
	}
	pvc := corpusKind{kind: "PersistentVolumeClaim", apiVersion: "v1", resource: "persistentvolumeclaims", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"accessModes": cl{"ReadWriteOnce"}, "resources": cm{"requests": cm{"storage": "1Gi"}}}},
		cases: []corpusCase{
			{"no-access-modes", without("spec.accessModes"), nil},
			{"access-mode-bad", setTo("spec.accessModes", cl{"ReadWriteSometimes"}), nil},
			{"read-write-once-pod-with-other", setTo("spec.accessModes", cl{"ReadWriteOncePod", "ReadWriteOnce"}), nil},
			{"no-storage-request", without("spec.resources"), nil},
			{"storage-zero", setTo("spec.resources.requests.storage", "0"), nil},
			{"storage-negative", setTo("spec.resources.requests.storage", "-1Gi"), nil},
			{"storage-malformed", setTo("spec.resources.requests.storage", "1GB!"), nil},
			{"limits-below-requests", setTo("spec.resources.limits", cm{"storage": "500Mi"}), nil},
			{"volume-mode-bad", setTo("spec.volumeMode", "Raw"), nil},
			{"volume-mode-block", setTo("spec.volumeMode", "Block"), nil},
			{"storage-class-name-bad", setTo("spec.storageClassName", "Bad_Class"), nil},
			{"storage-class-name-empty", setTo("spec.storageClassName", ""), nil},
			{"selector-bad-operator", setTo("spec.selector", cm{"matchExpressions": cl{cm{"key": "k", "operator": "Equals", "values": cl{"v"}}}}), nil},
			{"data-source-bad-kind", setTo("spec.dataSource", cm{"kind": "Pod", "name": "x"}), nil},
			{"data-source-defaults-ref", setTo("spec.dataSource", cm{"kind": "PersistentVolumeClaim", "name": "src"}), nil},
			{"data-source-ref-mismatch", allOf(setTo("spec.dataSource", cm{"kind": "PersistentVolumeClaim", "name": "a"}), setTo("spec.dataSourceRef", cm{"kind": "PersistentVolumeClaim", "name": "b"})), nil},
			{"data-source-snapshot", setTo("spec.dataSource", cm{"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "snap"}), nil},
			{"volume-name-set", setTo("spec.volumeName", "pv-1"), nil},
			{"status-on-create", setTo("status", cm{"phase": "Bound"}), nil},
		},
	}
	pv := corpusKind{kind: "PersistentVolume", apiVersion: "v1", resource: "persistentvolumes",
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"capacity": cm{"storage": "1Gi"}, "accessModes": cl{"ReadWriteOnce"}, "hostPath": cm{"path": "/tmp/pv"}}},
		cases: []corpusCase{
			{"no-source", without("spec.hostPath"), nil},
			{"two-sources", setTo("spec.nfs", cm{"server": "nfs.example.com", "path": "/x"}), nil},
			{"no-capacity", without("spec.capacity"), nil},
			{"capacity-negative", setTo("spec.capacity.storage", "-1Gi"), nil},
			{"capacity-other-resource", setTo("spec.capacity", cm{"storage": "1Gi", "cpu": "1"}), nil},
			{"no-access-modes", without("spec.accessModes"), nil},
			{"access-mode-bad", setTo("spec.accessModes", cl{"ReadOnce"}), nil},
			{"reclaim-policy-bad", setTo("spec.persistentVolumeReclaimPolicy", "Keep"), nil},
			{"recycle-hostpath-root", allOf(setTo("spec.hostPath.path", "/"), setTo("spec.persistentVolumeReclaimPolicy", "Recycle")), nil},
			{"hostpath-dotdot", setTo("spec.hostPath.path", "/tmp/../etc"), nil},
			{"hostpath-type-bad", setTo("spec.hostPath.type", "Folder"), nil},
			{"local-without-node-affinity", allOf(without("spec.hostPath"), setTo("spec.local", cm{"path": "/mnt/disk"})), nil},
			{"local-with-node-affinity", allOf(without("spec.hostPath"), setTo("spec.local", cm{"path": "/mnt/disk"}),
				setTo("spec.nodeAffinity", cm{"required": cm{"nodeSelectorTerms": cl{cm{"matchExpressions": cl{cm{"key": "kubernetes.io/hostname", "operator": "In", "values": cl{"node-1"}}}}}}})), nil},
			{"node-affinity-empty-terms", setTo("spec.nodeAffinity", cm{"required": cm{"nodeSelectorTerms": cl{}}}), nil},
			{"mount-options-hostpath", setTo("spec.mountOptions", cl{"ro"}), nil},
			{"volume-mode-bad", setTo("spec.volumeMode", "Raw"), nil},
			{"claim-ref", setTo("spec.claimRef", cm{"namespace": corpusNamespace, "name": "claim"}), nil},
			{"csi-missing-driver", allOf(without("spec.hostPath"), setTo("spec.csi", cm{"volumeHandle": "h"})), nil},
			{"csi-missing-handle", allOf(without("spec.hostPath"), setTo("spec.csi", cm{"driver": "csi.example.com"})), nil},
			{"csi-valid", allOf(without("spec.hostPath"), setTo("spec.csi", cm{"driver": "csi.example.com", "volumeHandle": "h"})), nil},
			{"nfs-relative-path", allOf(without("spec.hostPath"), setTo("spec.nfs", cm{"server": "nfs.example.com", "path": "x"})), nil},
			{"storage-class-name-bad", setTo("spec.storageClassName", "Bad_Class"), nil},
			{"status-on-create", setTo("status", cm{"phase": "Bound"}), nil},
		},
	}
	deployment := corpusKind{kind: "Deployment", apiVersion: "apps/v1", resource: "deployments", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"replicas": 2, "selector": corpusSelector(), "template": corpusTemplate(corpusPodSpec())}},
		cases: append(corpusWorkloadCases(),
			corpusCase{"replicas-negative", setTo("spec.replicas", -1), nil},
			corpusCase{"replicas-omitted", without("spec.replicas"), nil},
			corpusCase{"strategy-type-bad", setTo("spec.strategy", cm{"type": "BlueGreen"}), nil},
			corpusCase{"max-surge-and-unavailable-zero", setTo("spec.strategy", cm{"type": "RollingUpdate", "rollingUpdate": cm{"maxSurge": 0, "maxUnavailable": 0}}), nil},
			corpusCase{"max-unavailable-over-100", setTo("spec.strategy", cm{"rollingUpdate": cm{"maxUnavailable": "150%"}}), nil},
			corpusCase{"max-surge-not-percent", setTo("spec.strategy", cm{"rollingUpdate": cm{"maxSurge": "abc"}}), nil},
			corpusCase{"max-surge-negative", setTo("spec.strategy", cm{"rollingUpdate": cm{"maxSurge": -1}}), nil},
			corpusCase{"recreate-with-rolling-update", setTo("spec.strategy", cm{"type": "Recreate", "rollingUpdate": cm{"maxSurge": 1}}), nil},
			corpusCase{"recreate", setTo("spec.strategy", cm{"type": "Recreate"}), nil},
			corpusCase{"revision-history-negative", setTo("spec.revisionHistoryLimit", -1), nil},
			corpusCase{"progress-deadline-not-above-min-ready", allOf(setTo("spec.progressDeadlineSeconds", 10), setTo("spec.minReadySeconds", 10)), nil},
			corpusCase{"progress-deadline-zero", setTo("spec.progressDeadlineSeconds", 0), nil},
			corpusCase{"paused", setTo("spec.paused", true), nil},
			corpusCase{"template-restart-on-failure", setTo("spec.template.spec.restartPolicy", "OnFailure"), nil},
			corpusCase{"rollback-to", setTo("spec.rollbackTo", cm{"revision": 1}), nil},
		),
	}
	statefulSet := corpusKind{kind: "StatefulSet", apiVersion: "apps/v1", resource: "statefulsets", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"serviceName": "web", "replicas": 1, "selector": corpusSelector(), "template": corpusTemplate(corpusPodSpec())}},
		cases: append(corpusWorkloadCases(),
			corpusCase{"replicas-negative", setTo("spec.replicas", -1), nil},
			corpusCase{"replicas-omitted", without("spec.replicas"), nil},
			corpusCase{"service-name-omitted", without("spec.serviceName"), nil},
			corpusCase{"service-name-bad", setTo("spec.serviceName", "Bad_Service"), nil},
			corpusCase{"pod-management-policy-bad", setTo("spec.podManagementPolicy", "Random"), nil},
			corpusCase{"pod-management-parallel", setTo("spec.podManagementPolicy", "Parallel"), nil},
			corpusCase{"update-strategy-bad", setTo("spec.updateStrategy", cm{"type": "Replace"}), nil},
			corpusCase{"partition-negative", setTo("spec.updateStrategy", cm{"type": "RollingUpdate", "rollingUpdate": cm{"partition": -1}}), nil},
			corpusCase{"max-unavailable-zero", setTo("spec.updateStrategy", cm{"type": "RollingUpdate", "rollingUpdate": cm{"maxUnavailable": 0}}), nil},
			corpusCase{"on-delete-with-rolling-update", setTo("spec.updateStrategy", cm{"type": "OnDelete", "rollingUpdate": cm{"partition": 0}}), nil},
			corpusCase{"volume-claim-template-no-access-modes", setTo("spec.volumeClaimTemplates", cl{cm{"metadata": cm{"name": "data"}, "spec": cm{"resources": cm{"requests": cm{"storage": "1Gi"}}}}}), nil},
			corpusCase{"volume-claim-template", setTo("spec.volumeClaimTemplates", cl{cm{"metadata": cm{"name": "data"}, "spec": cm{"accessModes": cl{"ReadWriteOnce"}, "resources": cm{"requests": cm{"storage": "1Gi"}}}}}), nil},
			corpusCase{"volume-claim-template-name-bad", setTo("spec.volumeClaimTemplates", cl{cm{"metadata": cm{"name": "Data"}, "spec": cm{"accessModes": cl{"ReadWriteOnce"}, "resources": cm{"requests": cm{"storage": "1Gi"}}}}}), nil},
			corpusCase{"retention-policy-bad", setTo("spec.persistentVolumeClaimRetentionPolicy", cm{"whenDeleted": "Keep"}), nil},
			corpusCase{"ordinals-negative", setTo("spec.ordinals", cm{"start": -1}), nil},
			corpusCase{"ordinals-start", setTo("spec.ordinals", cm{"start": 5}), nil},
			corpusCase{"revision-history-negative", setTo("spec.revisionHistoryLimit", -1), nil},
			corpusCase{"template-restart-on-failure", setTo("spec.template.spec.restartPolicy", "OnFailure"), nil},
		),
	}
	daemonSet := corpusKind{kind: "DaemonSet", apiVersion: "apps/v1", resource: "daemonsets", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"selector": corpusSelector(), "template": corpusTemplate(corpusPodSpec())}},
		cases: append(corpusWorkloadCases(),
			corpusCase{"update-strategy-bad", setTo("spec.updateStrategy", cm{"type": "Replace"}), nil},
			corpusCase{"max-unavailable-and-surge-zero", setTo("spec.updateStrategy", cm{"type": "RollingUpdate", "rollingUpdate": cm{"maxUnavailable": 0, "maxSurge": 0}}), nil},
			corpusCase{"max-surge", setTo("spec.updateStrategy", cm{"type": "RollingUpdate", "rollingUpdate": cm{"maxUnavailable": 0, "maxSurge": 1}}), nil},
			corpusCase{"max-unavailable-over-100", setTo("spec.updateStrategy", cm{"type": "RollingUpdate", "rollingUpdate": cm{"maxUnavailable": "200%"}}), nil},
			corpusCase{"on-delete", setTo("spec.updateStrategy", cm{"type": "OnDelete"}), nil},
			corpusCase{"revision-history-negative", setTo("spec.revisionHistoryLimit", -1), nil},
			corpusCase{"template-restart-on-failure", setTo("spec.template.spec.restartPolicy", "OnFailure"), nil},
		),
	}
	replicaSet := corpusKind{kind: "ReplicaSet", apiVersion: "apps/v1", resource: "replicasets", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"replicas": 2, "selector": corpusSelector(), "template": corpusTemplate(corpusPodSpec())}},
		cases: append(corpusWorkloadCases(),
			corpusCase{"replicas-negative", setTo("spec.replicas", -1), nil},
			corpusCase{"replicas-omitted", without("spec.replicas"), nil},
			corpusCase{"no-template", without("spec.template"), nil},
		),
	}
	rc := corpusKind{kind: "ReplicationController", apiVersion: "v1", resource: "replicationcontrollers", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"replicas": 1, "selector": cm{"app": "web"}, "template": corpusTemplate(corpusPodSpec())}},
		cases: []corpusCase{
			{"selector-omitted", without("spec.selector"), nil},
			{"selector-mismatch", setTo("spec.selector", cm{"app": "other"}), nil},
			{"selector-bad-value", setTo("spec.selector", cm{"app": "bad value"}), nil},
			{"replicas-negative", setTo("spec.replicas", -1), nil},
			{"replicas-omitted", without("spec.replicas"), nil},
			{"no-template", without("spec.template"), nil},
			{"template-no-containers", setTo("spec.template.spec.containers", cl{}), nil},
			{"template-restart-never", setTo("spec.template.spec.restartPolicy", "Never"), nil},
			{"template-labels-omitted", without("spec.template.metadata"), nil},
			{"min-ready-negative", setTo("spec.minReadySeconds", -1), nil},
			{"status-on-create", setTo("status", cm{"replicas": 3}), nil},
		},
	}
	jobSpec := func() cm {
		s := corpusPodSpec()
		s["restartPolicy"] = "Never"
		return cm{"template": cm{"spec": s}}
	}
	job := corpusKind{kind: "Job", apiVersion: "batch/v1", resource: "jobs", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": jobSpec()},
		cases: []corpusCase{
			{"name-63", setTo("metadata.name", long(63)), nil},
			{"name-64", setTo("metadata.name", long(64)), nil},
			{"restart-always", setTo("spec.template.spec.restartPolicy", "Always"), nil},
			{"restart-omitted", without("spec.template.spec.restartPolicy"), nil},
			{"restart-on-failure", setTo("spec.template.spec.restartPolicy", "OnFailure"), nil},
			{"parallelism-negative", setTo("spec.parallelism", -1), nil},
			{"completions-negative", setTo("spec.completions", -1), nil},
			{"backoff-negative", setTo("spec.backoffLimit", -1), nil},
			{"active-deadline-zero", setTo("spec.activeDeadlineSeconds", 0), nil},
			{"manual-selector-without-selector", setTo("spec.manualSelector", true), nil},
			{"selector-without-manual-selector", setTo("spec.selector", corpusSelector()), nil},
			{"manual-selector", allOf(setTo("spec.manualSelector", true), setTo("spec.selector", corpusSelector()), setTo("spec.template.metadata", cm{"labels": cm{"app": "web"}})), nil},
			{"manual-selector-mismatch", allOf(setTo("spec.manualSelector", true), setTo("spec.selector", corpusSelector()), setTo("spec.template.metadata", cm{"labels": cm{"app": "other"}})), nil},
			{"completion-mode-bad", setTo("spec.completionMode", "Ordered"), nil},
			{"indexed-without-completions", setTo("spec.completionMode", "Indexed"), nil},
			{"indexed", allOf(setTo("spec.completionMode", "Indexed"), setTo("spec.completions", 3), setTo("spec.parallelism", 3)), nil},
			{"ttl-negative", setTo("spec.ttlSecondsAfterFinished", -1), nil},
			{"pod-failure-policy", setTo("spec.podFailurePolicy", cm{"rules": cl{cm{"action": "FailJob", "onExitCodes": cm{"operator": "In", "values": cl{42}}}}}), nil},
			{"pod-failure-policy-with-on-failure", allOf(setTo("spec.template.spec.restartPolicy", "OnFailure"), setTo("spec.podFailurePolicy", cm{"rules": cl{cm{"action": "FailJob", "onExitCodes": cm{"operator": "In", "values": cl{42}}}}})), nil},
			{"pod-failure-policy-bad-action", setTo("spec.podFailurePolicy", cm{"rules": cl{cm{"action": "Explode", "onExitCodes": cm{"operator": "In", "values": cl{42}}}}}), nil},
			{"pod-failure-policy-exit-code-zero-in", setTo("spec.podFailurePolicy", cm{"rules": cl{cm{"action": "FailJob", "onExitCodes": cm{"operator": "In", "values": cl{0}}}}}), nil},
			{"backoff-per-index-not-indexed", setTo("spec.backoffLimitPerIndex", 1), nil},
			{"max-failed-indexes-without-backoff-per-index", allOf(setTo("spec.completionMode", "Indexed"), setTo("spec.completions", 3), setTo("spec.maxFailedIndexes", 1)), nil},
			{"success-policy-not-indexed", setTo("spec.successPolicy", cm{"rules": cl{cm{"succeededCount": 1}}}), nil},
			{"pod-replacement-policy-bad", setTo("spec.podReplacementPolicy", "Sometimes"), nil},
			{"suspend", setTo("spec.suspend", true), nil},
			{"template-no-containers", setTo("spec.template.spec.containers", cl{}), nil},
			{"template-labels-bad", setTo("spec.template.metadata", cm{"labels": cm{"bad key": "x"}}), nil},
			{"managed-by-bad", setTo("spec.managedBy", "bad"), nil},
			{"status-on-create", setTo("status", cm{"succeeded": 1}), nil},
		},
	}
	cronJob := corpusKind{kind: "CronJob", apiVersion: "batch/v1", resource: "cronjobs", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"schedule": "*/5 * * * *", "jobTemplate": cm{"spec": jobSpec()}}},
		cases: []corpusCase{
			{"name-52", setTo("metadata.name", long(52)), nil},
			{"name-53", setTo("metadata.name", long(53)), nil},
			{"schedule-bad", setTo("spec.schedule", "not a schedule"), nil},
			{"schedule-missing", without("spec.schedule"), nil},
			{"schedule-six-fields", setTo("spec.schedule", "0 */5 * * * *"), nil},
			{"schedule-tz-prefix", setTo("spec.schedule", "TZ=UTC */5 * * * *"), nil},
			{"schedule-descriptor", setTo("spec.schedule", "@hourly"), nil},
			{"schedule-every", setTo("spec.schedule", "@every 5m"), nil},
			{"time-zone-bad", setTo("spec.timeZone", "Mars/Olympus"), nil},
			{"time-zone-valid", setTo("spec.timeZone", "Europe/Paris"), nil},
			{"time-zone-local", setTo("spec.timeZone", "Local"), nil},
			{"concurrency-policy-bad", setTo("spec.concurrencyPolicy", "Sometimes"), nil},
			{"concurrency-policy-forbid", setTo("spec.concurrencyPolicy", "Forbid"), nil},
			{"starting-deadline-negative", setTo("spec.startingDeadlineSeconds", -1), nil},
			{"successful-history-negative", setTo("spec.successfulJobsHistoryLimit", -1), nil},
			{"failed-history-negative", setTo("spec.failedJobsHistoryLimit", -1), nil},
			{"job-template-restart-always", setTo("spec.jobTemplate.spec.template.spec.restartPolicy", "Always"), nil},
			{"job-template-no-containers", setTo("spec.jobTemplate.spec.template.spec.containers", cl{}), nil},
			{"job-template-selector", setTo("spec.jobTemplate.spec.selector", corpusSelector()), nil},
			{"job-template-manual-selector", allOf(setTo("spec.jobTemplate.spec.manualSelector", true), setTo("spec.jobTemplate.spec.selector", corpusSelector()), setTo("spec.jobTemplate.spec.template.metadata", cm{"labels": cm{"app": "web"}})), nil},
			{"job-template-parallelism-negative", setTo("spec.jobTemplate.spec.parallelism", -1), nil},
			{"suspend", setTo("spec.suspend", true), nil},
		},
	}
	namespace := corpusKind{kind: "Namespace", apiVersion: "v1", resource: "namespaces",
		base: cm{"metadata": cm{"name": "base"}},
		cases: []corpusCase{
			{"name-64", setTo("metadata.name", long(64)), nil},
			{"name-starts-with-digit", setTo("metadata.name", "1ns"), nil},
			{"spec-finalizer-bad", setTo("spec.finalizers", cl{"bad finalizer"}), nil},
			{"spec-finalizer-qualified", setTo("spec.finalizers", cl{"example.com/cleanup"}), nil},
			{"spec-finalizer-kubernetes", setTo("spec.finalizers", cl{"kubernetes"}), nil},
			{"status-on-create", setTo("status", cm{"phase": "Terminating"}), nil},
			{"metadata-name-label-wrong", setTo("metadata.labels", cm{"kubernetes.io/metadata.name": "other"}), nil},
			{"already-exists", setTo("metadata.name", corpusNamespace), nil},
		},
	}
	serviceAccount := corpusKind{kind: "ServiceAccount", apiVersion: "v1", resource: "serviceaccounts", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}},
		cases: []corpusCase{
			{"automount-false", setTo("automountServiceAccountToken", false), nil},
			{"secrets", setTo("secrets", cl{cm{"name": "token"}}), nil},
			{"image-pull-secrets", setTo("imagePullSecrets", cl{cm{"name": "registry"}}), nil},
			{"already-exists", setTo("metadata.name", "default"), nil},
		},
	}
	rule := func() cm {
		return cm{"apiGroups": cl{""}, "resources": cl{"pods"}, "verbs": cl{"get", "list"}}
	}
	role := corpusKind{kind: "Role", apiVersion: "rbac.authorization.k8s.io/v1", resource: "roles", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "rules": cl{rule()}},
		cases: []corpusCase{
			{"rule-no-verbs", without("rules.0.verbs"), nil},
			{"rule-no-api-groups", without("rules.0.apiGroups"), nil},
			{"rule-no-resources", without("rules.0.resources"), nil},
			{"rule-non-resource-urls", setTo("rules", cl{cm{"nonResourceURLs": cl{"/healthz"}, "verbs": cl{"get"}}}), nil},
			{"rules-empty", setTo("rules", cl{}), nil},
			{"rule-resource-names", setTo("rules.0.resourceNames", cl{"web"}), nil},
			{"rule-wildcards", setTo("rules", cl{cm{"apiGroups": cl{"*"}, "resources": cl{"*"}, "verbs": cl{"*"}}}), nil},
			{"name-with-colon", setTo("metadata.name", "system:base"), nil},
			{"name-with-slash", setTo("metadata.name", "a/b"), nil},
			{"name-with-percent", setTo("metadata.name", "a%b"), nil},
			{"name-dotdot", setTo("metadata.name", ".."), nil},
		},
	}
	clusterRole := corpusKind{kind: "ClusterRole", apiVersion: "rbac.authorization.k8s.io/v1", resource: "clusterroles",
		base: cm{"metadata": cm{"name": "base"}, "rules": cl{rule()}},
		cases: []corpusCase{
			{"rule-no-verbs", without("rules.0.verbs"), nil},
			{"rule-no-api-groups", without("rules.0.apiGroups"), nil},
			{"non-resource-urls", setTo("rules", cl{cm{"nonResourceURLs": cl{"/healthz", "/metrics/*"}, "verbs": cl{"get"}}}), nil},
			{"non-resource-urls-with-resources", setTo("rules.0.nonResourceURLs", cl{"/healthz"}), nil},
			{"non-resource-url-relative", setTo("rules", cl{cm{"nonResourceURLs": cl{"healthz"}, "verbs": cl{"get"}}}), nil},
			{"aggregation-rule", setTo("aggregationRule", cm{"clusterRoleSelectors": cl{cm{"matchLabels": cm{"rbac.example.com/aggregate": "true"}}}}), nil},
			{"aggregation-rule-bad-selector", setTo("aggregationRule", cm{"clusterRoleSelectors": cl{cm{"matchExpressions": cl{cm{"key": "k", "operator": "Equals"}}}}}), nil},
			{"name-with-colon", setTo("metadata.name", "system:base"), nil},
			{"already-exists", setTo("metadata.name", "cluster-admin"), nil},
		},
	}
	userSubject := func() cm { return cm{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"} }
	roleBinding := corpusKind{kind: "RoleBinding", apiVersion: "rbac.authorization.k8s.io/v1", resource: "rolebindings", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "roleRef": cm{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"}, "subjects": cl{userSubject()}},
		cases: []corpusCase{
			{"role-ref-no-name", without("roleRef.name"), nil},
			{"role-ref-kind-bad", setTo("roleRef.kind", "Group"), nil},
			{"role-ref-api-group-bad", setTo("roleRef.apiGroup", "rbac"), nil},
			{"role-ref-no-api-group", without("roleRef.apiGroup"), nil},
			{"role-ref-api-group-empty", setTo("roleRef.apiGroup", ""), nil},
			{"role-ref-cluster-role", setTo("roleRef", cm{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}), nil},
			{"subject-kind-bad", setTo("subjects.0.kind", "Robot"), nil},
			{"subject-user-no-api-group", without("subjects.0.apiGroup"), nil},
			{"subject-no-name", without("subjects.0.name"), nil},
			{"subject-service-account", setTo("subjects", cl{cm{"kind": "ServiceAccount", "name": "default"}}), nil},
			{"subject-service-account-api-group", setTo("subjects", cl{cm{"kind": "ServiceAccount", "name": "default", "apiGroup": "rbac.authorization.k8s.io"}}), nil},
			{"subject-service-account-name-bad", setTo("subjects", cl{cm{"kind": "ServiceAccount", "name": "Bad_SA", "namespace": corpusNamespace}}), nil},
			{"subject-group", setTo("subjects", cl{cm{"kind": "Group", "name": "system:authenticated", "apiGroup": "rbac.authorization.k8s.io"}}), nil},
			{"no-subjects", without("subjects"), nil},
		},
	}
	clusterRoleBinding := corpusKind{kind: "ClusterRoleBinding", apiVersion: "rbac.authorization.k8s.io/v1", resource: "clusterrolebindings",
		base: cm{"metadata": cm{"name": "base"}, "roleRef": cm{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}, "subjects": cl{userSubject()}},
		cases: []corpusCase{
			{"role-ref-kind-role", setTo("roleRef.kind", "Role"), nil},
			{"role-ref-no-name", without("roleRef.name"), nil},
			{"role-ref-no-api-group", without("roleRef.apiGroup"), nil},
			{"subject-service-account-no-namespace", setTo("subjects", cl{cm{"kind": "ServiceAccount", "name": "default"}}), nil},
			{"subject-service-account", setTo("subjects", cl{cm{"kind": "ServiceAccount", "name": "default", "namespace": corpusNamespace}}), nil},
			{"subject-group", setTo("subjects", cl{cm{"kind": "Group", "name": "system:authenticated", "apiGroup": "rbac.authorization.k8s.io"}}), nil},
		},
	}
	networkPolicy := corpusKind{kind: "NetworkPolicy", apiVersion: "networking.k8s.io/v1", resource: "networkpolicies", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"podSelector": corpusSelector(),
			"ingress": cl{cm{"from": cl{cm{"podSelector": cm{}}}, "ports": cl{cm{"protocol": "TCP", "port": 80}}}}}},
		cases: []corpusCase{
			{"port-zero", setTo("spec.ingress.0.ports.0.port", 0), nil},
			{"port-too-big", setTo("spec.ingress.0.ports.0.port", 70000), nil},
			{"port-name-bad", setTo("spec.ingress.0.ports.0.port", "Bad_Port"), nil},
			{"port-protocol-omitted", without("spec.ingress.0.ports.0.protocol"), nil},
			{"end-port", setTo("spec.ingress.0.ports.0.endPort", 90), nil},
			{"end-port-below-port", setTo("spec.ingress.0.ports.0.endPort", 79), nil},
			{"end-port-named-port", allOf(setTo("spec.ingress.0.ports.0.port", "http"), setTo("spec.ingress.0.ports.0.endPort", 90)), nil},
			{"protocol-bad", setTo("spec.ingress.0.ports.0.protocol", "ICMP"), nil},
			{"ip-block-bad-cidr", setTo("spec.ingress.0.from", cl{cm{"ipBlock": cm{"cidr": "10.0.0.0/33"}}}), nil},
			{"ip-block-except-outside", setTo("spec.ingress.0.from", cl{cm{"ipBlock": cm{"cidr": "10.0.0.0/8", "except": cl{"192.168.0.0/16"}}}}), nil},
			{"ip-block-valid", setTo("spec.ingress.0.from", cl{cm{"ipBlock": cm{"cidr": "10.0.0.0/8", "except": cl{"10.1.0.0/16"}}}}), nil},
			{"ip-block-and-pod-selector", setTo("spec.ingress.0.from", cl{cm{"ipBlock": cm{"cidr": "10.0.0.0/8"}, "podSelector": cm{}}}), nil},
			{"peer-empty", setTo("spec.ingress.0.from", cl{cm{}}), nil},
			{"policy-types-bad", setTo("spec.policyTypes", cl{"Both"}), nil},
			{"egress-only", allOf(without("spec.ingress"), setTo("spec.policyTypes", cl{"Egress"})), nil},
			{"egress-defaults-policy-types", setTo("spec.egress", cl{cm{"to": cl{cm{"namespaceSelector": cm{}}}}}), nil},
			{"pod-selector-omitted", without("spec.podSelector"), nil},
			{"pod-selector-bad-value", setTo("spec.podSelector", cm{"matchLabels": cm{"app": "bad value"}}), nil},
			{"namespace-selector", setTo("spec.ingress.0.from", cl{cm{"namespaceSelector": cm{"matchLabels": cm{"team": "a"}}}}), nil},
		},
	}
	ingressPath := func() cm {
		return cm{"path": "/", "pathType": "Prefix", "backend": cm{"service": cm{"name": "web", "port": cm{"number": 80}}}}
	}
	ingress := corpusKind{kind: "Ingress", apiVersion: "networking.k8s.io/v1", resource: "ingresses", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"rules": cl{cm{"host": "example.com", "http": cm{"paths": cl{ingressPath()}}}}}},
		cases: []corpusCase{
			{"path-type-missing", without("spec.rules.0.http.paths.0.pathType"), nil},
			{"path-type-bad", setTo("spec.rules.0.http.paths.0.pathType", "Regex"), nil},
			{"path-relative", setTo("spec.rules.0.http.paths.0.path", "foo"), nil},
			{"path-exact", setTo("spec.rules.0.http.paths.0.pathType", "Exact"), nil},
			{"path-implementation-specific-regex", allOf(setTo("spec.rules.0.http.paths.0.pathType", "ImplementationSpecific"), setTo("spec.rules.0.http.paths.0.path", "/(foo|bar)")), nil},
			{"path-prefix-double-slash", setTo("spec.rules.0.http.paths.0.path", "/a//b"), nil},
			{"host-ip", setTo("spec.rules.0.host", "1.2.3.4"), nil},
			{"host-wildcard", setTo("spec.rules.0.host", "*.example.com"), nil},
			{"host-star-only", setTo("spec.rules.0.host", "*"), nil},
			{"host-uppercase", setTo("spec.rules.0.host", "Example.com"), nil},
			{"host-with-port", setTo("spec.rules.0.host", "example.com:80"), nil},
			{"backend-service-and-resource", setTo("spec.rules.0.http.paths.0.backend.resource", cm{"apiGroup": "example.com", "kind": "Bucket", "name": "b"}), nil},
			{"backend-port-number-and-name", setTo("spec.rules.0.http.paths.0.backend.service.port.name", "http"), nil},
			{"backend-port-zero", setTo("spec.rules.0.http.paths.0.backend.service.port.number", 0), nil},
			{"backend-port-missing", without("spec.rules.0.http.paths.0.backend.service.port"), nil},
			{"backend-missing", without("spec.rules.0.http.paths.0.backend"), nil},
			{"backend-service-name-bad", setTo("spec.rules.0.http.paths.0.backend.service.name", "Bad_Service"), nil},
			{"no-paths", setTo("spec.rules.0.http.paths", cl{}), nil},
			{"rule-host-only", without("spec.rules.0.http"), nil},
			{"default-backend", allOf(without("spec.rules"), setTo("spec.defaultBackend", cm{"service": cm{"name": "web", "port": cm{"number": 80}}})), nil},
			{"no-rules-no-backend", setTo("spec", cm{}), nil},
			{"tls-host-bad", setTo("spec.tls", cl{cm{"hosts": cl{"bad_host"}}}), nil},
			{"tls-valid", setTo("spec.tls", cl{cm{"hosts": cl{"example.com"}, "secretName": "tls"}}), nil},
			{"tls-secret-name-bad", setTo("spec.tls", cl{cm{"hosts": cl{"example.com"}, "secretName": "Bad_Secret"}}), nil},
			{"ingress-class-name", setTo("spec.ingressClassName", "nginx"), nil},
			{"ingress-class-name-bad", setTo("spec.ingressClassName", "Bad_Class"), nil},
		},
	}
	ingressClass := corpusKind{kind: "IngressClass", apiVersion: "networking.k8s.io/v1", resource: "ingressclasses",
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"controller": "example.com/ingress-controller"}},
		cases: []corpusCase{
			{"controller-missing", without("spec.controller"), nil},
			{"controller-no-slash", setTo("spec.controller", "nginx"), nil},
			{"controller-too-long", setTo("spec.controller", "example.com/"+long(250)), nil},
			{"parameters-valid", setTo("spec.parameters", cm{"apiGroup": "example.com", "kind": "Params", "name": "p"}), nil},
			{"parameters-no-kind", setTo("spec.parameters", cm{"apiGroup": "example.com", "name": "p"}), nil},
			{"parameters-scope-bad", setTo("spec.parameters", cm{"apiGroup": "example.com", "kind": "Params", "name": "p", "scope": "Global"}), nil},
			{"parameters-namespace-scope-no-namespace", setTo("spec.parameters", cm{"apiGroup": "example.com", "kind": "Params", "name": "p", "scope": "Namespace"}), nil},
			{"parameters-cluster-scope-with-namespace", setTo("spec.parameters", cm{"apiGroup": "example.com", "kind": "Params", "name": "p", "scope": "Cluster", "namespace": "x"}), nil},
			{"default-class-annotation", setTo("metadata.annotations", cm{"ingressclass.kubernetes.io/is-default-class": "true"}), nil},
		},
	}
	storageClass := corpusKind{kind: "StorageClass", apiVersion: "storage.k8s.io/v1", resource: "storageclasses",
		base: cm{"metadata": cm{"name": "base"}, "provisioner": "example.com/csi"},
		cases: []corpusCase{
			{"provisioner-missing", without("provisioner"), nil},
			{"provisioner-bad", setTo("provisioner", "bad provisioner!"), nil},
			{"reclaim-policy-bad", setTo("reclaimPolicy", "Keep"), nil},
			{"reclaim-policy-recycle", setTo("reclaimPolicy", "Recycle"), nil},
			{"reclaim-policy-retain", setTo("reclaimPolicy", "Retain"), nil},
			{"binding-mode-bad", setTo("volumeBindingMode", "Lazy"), nil},
			{"binding-mode-wait", setTo("volumeBindingMode", "WaitForFirstConsumer"), nil},
			{"allowed-topologies-empty-term", setTo("allowedTopologies", cl{cm{}}), nil},
			{"allowed-topologies", setTo("allowedTopologies", cl{cm{"matchLabelExpressions": cl{cm{"key": "topology.kubernetes.io/zone", "values": cl{"a"}}}}}), nil},
			{"allowed-topologies-no-values", setTo("allowedTopologies", cl{cm{"matchLabelExpressions": cl{cm{"key": "topology.kubernetes.io/zone", "values": cl{}}}}}), nil},
			{"parameters", setTo("parameters", cm{"type": "ssd"}), nil},
			{"mount-options", setTo("mountOptions", cl{"ro"}), nil},
			{"allow-volume-expansion", setTo("allowVolumeExpansion", true), nil},
			{"default-class-annotation", setTo("metadata.annotations", cm{"storageclass.kubernetes.io/is-default-class": "true"}), nil},
		},
	}
	pdb := corpusKind{kind: "PodDisruptionBudget", apiVersion: "policy/v1", resource: "poddisruptionbudgets", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"selector": corpusSelector(), "minAvailable": 1}},
		cases: []corpusCase{
			{"min-and-max", setTo("spec.maxUnavailable", 1), nil},
			{"min-percent-over-100", setTo("spec.minAvailable", "150%"), nil},
			{"min-negative", setTo("spec.minAvailable", -1), nil},
			{"min-not-percent", setTo("spec.minAvailable", "abc"), nil},
			{"max-unavailable-percent", allOf(without("spec.minAvailable"), setTo("spec.maxUnavailable", "10%")), nil},
			{"max-unavailable-negative", allOf(without("spec.minAvailable"), setTo("spec.maxUnavailable", -1)), nil},
			{"neither", without("spec.minAvailable"), nil},
			{"selector-bad-operator", setTo("spec.selector", cm{"matchExpressions": cl{cm{"key": "k", "operator": "Equals", "values": cl{"v"}}}}), nil},
			{"selector-omitted", without("spec.selector"), nil},
			{"selector-empty", setTo("spec.selector", cm{}), nil},
			{"unhealthy-policy-bad", setTo("spec.unhealthyPodEvictionPolicy", "Never"), nil},
			{"unhealthy-policy-always-allow", setTo("spec.unhealthyPodEvictionPolicy", "AlwaysAllow"), nil},
			{"status-on-create", setTo("status", cm{"disruptionsAllowed": 5, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}), nil},
		},
	}
	priorityClass := corpusKind{kind: "PriorityClass", apiVersion: "scheduling.k8s.io/v1", resource: "priorityclasses",
		base: cm{"metadata": cm{"name": "base"}, "value": 1000},
		cases: []corpusCase{
			{"value-too-high", setTo("value", 2000000000), nil},
			{"value-omitted", without("value"), nil},
			{"value-negative", setTo("value", -10), nil},
			{"name-system-prefix", setTo("metadata.name", "system-custom"), nil},
			{"preemption-policy-bad", setTo("preemptionPolicy", "Always"), nil},
			{"preemption-policy-never", setTo("preemptionPolicy", "Never"), nil},
			{"global-default", setTo("globalDefault", true), nil},
			{"description", setTo("description", "for batch"), nil},
			{"already-exists", setTo("metadata.name", "system-node-critical"), nil},
		},
	}
	hpa := corpusKind{kind: "HorizontalPodAutoscaler", apiVersion: "autoscaling/v2", resource: "horizontalpodautoscalers", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{
			"scaleTargetRef": cm{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "minReplicas": 1, "maxReplicas": 5,
			"metrics": cl{cm{"type": "Resource", "resource": cm{"name": "cpu", "target": cm{"type": "Utilization", "averageUtilization": 80}}}},
		}},
		cases: []corpusCase{
			{"max-replicas-zero", setTo("spec.maxReplicas", 0), nil},
			{"min-above-max", setTo("spec.minReplicas", 6), nil},
			{"min-replicas-zero", setTo("spec.minReplicas", 0), nil},
			{"min-replicas-omitted", without("spec.minReplicas"), nil},
			{"metrics-omitted", without("spec.metrics"), nil},
			{"scale-target-no-kind", without("spec.scaleTargetRef.kind"), nil},
			{"scale-target-no-name", without("spec.scaleTargetRef.name"), nil},
			{"scale-target-name-bad", setTo("spec.scaleTargetRef.name", "a/b"), nil},
			{"metric-type-bad", setTo("spec.metrics.0.type", "Memory"), nil},
			{"resource-metric-missing", without("spec.metrics.0.resource"), nil},
			{"resource-target-type-bad", setTo("spec.metrics.0.resource.target.type", "Percent"), nil},
			{"utilization-zero", setTo("spec.metrics.0.resource.target.averageUtilization", 0), nil},
			{"average-value", setTo("spec.metrics.0.resource.target", cm{"type": "AverageValue", "averageValue": "500m"}), nil},
			{"average-value-missing", setTo("spec.metrics.0.resource.target", cm{"type": "AverageValue"}), nil},
			{"pods-metric-missing", setTo("spec.metrics", cl{cm{"type": "Pods"}}), nil},
			{"external-metric", setTo("spec.metrics", cl{cm{"type": "External", "external": cm{"metric": cm{"name": "queue_length"}, "target": cm{"type": "Value", "value": "10"}}}}), nil},
			{"container-resource", setTo("spec.metrics", cl{cm{"type": "ContainerResource", "containerResource": cm{"name": "cpu", "container": "app", "target": cm{"type": "Utilization", "averageUtilization": 60}}}}), nil},
			{"behavior-defaults", setTo("spec.behavior", cm{"scaleDown": cm{"stabilizationWindowSeconds": 60}}), nil},
			{"behavior-select-policy-bad", setTo("spec.behavior", cm{"scaleUp": cm{"selectPolicy": "Any"}}), nil},
			{"behavior-policy-period-zero", setTo("spec.behavior", cm{"scaleUp": cm{"policies": cl{cm{"type": "Pods", "value": 1, "periodSeconds": 0}}}}), nil},
			{"behavior-policy-type-bad", setTo("spec.behavior", cm{"scaleUp": cm{"policies": cl{cm{"type": "Nodes", "value": 1, "periodSeconds": 15}}}}), nil},
			{"behavior-window-too-big", setTo("spec.behavior", cm{"scaleDown": cm{"stabilizationWindowSeconds": 3601}}), nil},
		},
	}
	quota := corpusKind{kind: "ResourceQuota", apiVersion: "v1", resource: "resourcequotas", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"hard": cm{"pods": "10", "requests.cpu": "4"}}},
		cases: []corpusCase{
			{"hard-negative", setTo("spec.hard.pods", "-1"), nil},
			{"hard-malformed", setTo("spec.hard.pods", "ten"), nil},
			{"hard-unknown-resource", setTo("spec.hard.foo", "1"), nil},
			{"hard-fractional-pods", setTo("spec.hard.pods", "1.5"), nil},
			{"hard-extended-resource", setTo("spec.hard", cm{"requests.example.com/gpu": "2"}), nil},
			{"hard-extended-resource-limits", setTo("spec.hard", cm{"limits.example.com/gpu": "2"}), nil},
			{"hard-count-object", setTo("spec.hard", cm{"count/deployments.apps": "5"}), nil},
			{"hard-storage-class", setTo("spec.hard", cm{"fast.storageclass.storage.k8s.io/requests.storage": "10Gi"}), nil},
			{"scopes-bad", setTo("spec.scopes", cl{"Everything"}), nil},
			{"scopes-conflict", allOf(setTo("spec.hard", cm{"pods": "10"}), setTo("spec.scopes", cl{"Terminating", "NotTerminating"})), nil},
			{"scope-best-effort-with-cpu", setTo("spec.scopes", cl{"BestEffort"}), nil},
			{"scope-best-effort", allOf(setTo("spec.hard", cm{"pods": "10"}), setTo("spec.scopes", cl{"BestEffort"})), nil},
			{"scope-selector-bad-operator", setTo("spec.scopeSelector", cm{"matchExpressions": cl{cm{"scopeName": "PriorityClass", "operator": "Equals", "values": cl{"high"}}}}), nil},
			{"scope-selector-priority-class", setTo("spec.scopeSelector", cm{"matchExpressions": cl{cm{"scopeName": "PriorityClass", "operator": "In", "values": cl{"high"}}}}), nil},
			{"scope-selector-exists-with-values", setTo("spec.scopeSelector", cm{"matchExpressions": cl{cm{"scopeName": "Terminating", "operator": "Exists", "values": cl{"x"}}}}), nil},
			{"status-on-create", setTo("status", cm{"hard": cm{"pods": "10"}, "used": cm{"pods": "3"}}), nil},
		},
	}
	limitRange := corpusKind{kind: "LimitRange", apiVersion: "v1", resource: "limitranges", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"limits": cl{cm{"type": "Container",
			"default": cm{"cpu": "500m"}, "defaultRequest": cm{"cpu": "100m"}, "max": cm{"cpu": "2"}, "min": cm{"cpu": "50m"}}}}},
		cases: []corpusCase{
			{"min-above-max", setTo("spec.limits.0.min.cpu", "3"), nil},
			{"default-above-max", setTo("spec.limits.0.default.cpu", "3"), nil},
			{"default-request-above-default", setTo("spec.limits.0.defaultRequest.cpu", "600m"), nil},
			{"default-below-min", setTo("spec.limits.0.default.cpu", "10m"), nil},
			{"max-only-defaults", setTo("spec.limits", cl{cm{"type": "Container", "max": cm{"cpu": "2", "memory": "1Gi"}}}), nil},
			{"default-only-defaults-request", setTo("spec.limits", cl{cm{"type": "Container", "default": cm{"memory": "256Mi"}}}), nil},
			{"pod-type-with-default", setTo("spec.limits", cl{cm{"type": "Pod", "default": cm{"cpu": "1"}}}), nil},
			{"pod-type", setTo("spec.limits", cl{cm{"type": "Pod", "max": cm{"cpu": "4"}}}), nil},
			{"pvc-type", setTo("spec.limits", cl{cm{"type": "PersistentVolumeClaim", "max": cm{"storage": "10Gi"}, "min": cm{"storage": "1Gi"}}}), nil},
			{"pvc-type-with-default", setTo("spec.limits", cl{cm{"type": "PersistentVolumeClaim", "default": cm{"storage": "1Gi"}}}), nil},
			{"ratio-below-one", setTo("spec.limits.0.maxLimitRequestRatio", cm{"cpu": "500m"}), nil},
			{"type-bad", setTo("spec.limits.0.type", "Node"), nil},
			{"type-missing", without("spec.limits.0.type"), nil},
			{"min-negative", setTo("spec.limits.0.min.cpu", "-1"), nil},
			{"limits-empty", setTo("spec.limits", cl{}), nil},
			{"resource-name-bad", setTo("spec.limits.0.max", cm{"bad resource": "1"}), nil},
		},
	}
	volumeAttachment := corpusKind{kind: "VolumeAttachment", apiVersion: "storage.k8s.io/v1", resource: "volumeattachments",
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"attacher": "csi.example.com", "nodeName": "node-1", "source": cm{"persistentVolumeName": "pv-1"}}},
		cases: []corpusCase{
			{"attacher-missing", without("spec.attacher"), nil},
			{"attacher-bad", setTo("spec.attacher", "bad attacher!"), nil},
			{"node-name-missing", without("spec.nodeName"), nil},
			{"node-name-bad", setTo("spec.nodeName", "Node_1"), nil},
			{"source-empty", setTo("spec.source", cm{}), nil},
			{"source-pv-name-bad", setTo("spec.source.persistentVolumeName", "Bad_PV"), nil},
			{"source-both", setTo("spec.source.inlineVolumeSpec", cm{"csi": cm{"driver": "csi.example.com", "volumeHandle": "h"}}), nil},
			{"inline-volume-spec", setTo("spec.source", cm{"inlineVolumeSpec": cm{"csi": cm{"driver": "csi.example.com", "volumeHandle": "h"}, "accessModes": cl{"ReadWriteOnce"}}}), nil},
			{"status-on-create", setTo("status", cm{"attached": true}), nil},
		},
	}
	csiDriver := corpusKind{kind: "CSIDriver", apiVersion: "storage.k8s.io/v1", resource: "csidrivers",
		base: cm{"metadata": cm{"name": "csi.example.com"}, "spec": cm{"attachRequired": true, "podInfoOnMount": false}},
		cases: []corpusCase{
			{"spec-empty", setTo("spec", cm{}), nil},
			{"name-64", setTo("metadata.name", long(64)), nil},
			{"lifecycle-mode-bad", setTo("spec.volumeLifecycleModes", cl{"Temporary"}), nil},
			{"lifecycle-mode-ephemeral", setTo("spec.volumeLifecycleModes", cl{"Ephemeral"}), nil},
			{"fs-group-policy-bad", setTo("spec.fsGroupPolicy", "Always"), nil},
			{"fs-group-policy-file", setTo("spec.fsGroupPolicy", "File"), nil},
			{"token-requests", setTo("spec.tokenRequests", cl{cm{"audience": "vault", "expirationSeconds": 3600}}), nil},
			{"token-requests-duplicate-audience", setTo("spec.tokenRequests", cl{cm{"audience": "vault"}, cm{"audience": "vault"}}), nil},
			{"token-requests-short-expiry", setTo("spec.tokenRequests", cl{cm{"audience": "vault", "expirationSeconds": 60}}), nil},
			{"storage-capacity", setTo("spec.storageCapacity", true), nil},
			{"requires-republish", setTo("spec.requiresRepublish", true), nil},
			{"se-linux-mount", setTo("spec.seLinuxMount", true), nil},
			{"node-allocatable-period-too-small", setTo("spec.nodeAllocatableUpdatePeriodSeconds", 5), nil},
		},
	}
	lease := corpusKind{kind: "Lease", apiVersion: "coordination.k8s.io/v1", resource: "leases", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"holderIdentity": "holder", "leaseDurationSeconds": 15}},
		cases: []corpusCase{
			{"duration-zero", setTo("spec.leaseDurationSeconds", 0), nil},
			{"duration-negative", setTo("spec.leaseDurationSeconds", -1), nil},
			{"transitions-negative", setTo("spec.leaseTransitions", -1), nil},
			{"holder-omitted", without("spec.holderIdentity"), nil},
			{"spec-empty", setTo("spec", cm{}), nil},
			{"acquire-time", setTo("spec.acquireTime", "2024-01-01T00:00:00.000000Z"), nil},
			{"strategy-bad", setTo("spec.strategy", "Random"), nil},
			{"preferred-holder", setTo("spec.preferredHolder", "other"), nil},
		},
	}
	endpointSlice := corpusKind{kind: "EndpointSlice", apiVersion: "discovery.k8s.io/v1", resource: "endpointslices", namespaced: true,
		base: cm{"metadata": cm{"name": "base", "labels": cm{"kubernetes.io/service-name": "web"}}, "addressType": "IPv4",
			"endpoints": cl{cm{"addresses": cl{"10.0.0.1"}, "conditions": cm{"ready": true}}},
			"ports":     cl{cm{"name": "http", "port": 80, "protocol": "TCP"}}},
		cases: []corpusCase{
			{"address-type-bad", setTo("addressType", "IPv5"), nil},
			{"address-type-missing", without("addressType"), nil},
			{"address-invalid", setTo("endpoints.0.addresses", cl{"300.0.0.1"}), nil},
			{"address-ipv6-in-ipv4", setTo("endpoints.0.addresses", cl{"fd00::1"}), nil},
			{"address-leading-zero", setTo("endpoints.0.addresses", cl{"010.0.0.1"}), nil},
			{"ipv6", allOf(setTo("addressType", "IPv6"), setTo("endpoints.0.addresses", cl{"fd00::1"})), nil},
			{"no-addresses", setTo("endpoints.0.addresses", cl{}), nil},
			{"too-many-addresses", setTo("endpoints.0.addresses", func() cl {
				var out cl
				for i := range 101 {
					out = append(out, fmt.Sprintf("10.0.%d.%d", i/250, i%250+1))
				}
				return out
			}()), nil},
			{"fqdn", allOf(setTo("addressType", "FQDN"), setTo("endpoints.0.addresses", cl{"db.example.com"})), nil},
			{"fqdn-bad", allOf(setTo("addressType", "FQDN"), setTo("endpoints.0.addresses", cl{"bad_host!"})), nil},
			{"hostname-bad", setTo("endpoints.0.hostname", "Bad_Host"), nil},
			{"node-name-bad", setTo("endpoints.0.nodeName", "Node_1"), nil},
			{"target-ref", setTo("endpoints.0.targetRef", cm{"kind": "Pod", "name": "web-1", "namespace": corpusNamespace}), nil},
			{"zone-hints", setTo("endpoints.0.hints", cm{"forZones": cl{cm{"name": "zone-a"}}}), nil},
			{"duplicate-port-names", dupFirst("ports"), nil},
			{"port-name-bad", setTo("ports.0.name", "Bad_Port"), nil},
			{"port-protocol-bad", setTo("ports.0.protocol", "ICMP"), nil},
			{"port-fields-omitted", setTo("ports", cl{cm{}}), nil},
			{"port-too-big", setTo("ports.0.port", 70000), nil},
			{"app-protocol-bad", setTo("ports.0.appProtocol", "bad/proto/x"), nil},
			{"conditions-omitted", without("endpoints.0.conditions"), nil},
			{"endpoints-omitted", without("endpoints"), nil},
		},
	}
	runtimeClass := corpusKind{kind: "RuntimeClass", apiVersion: "node.k8s.io/v1", resource: "runtimeclasses",
		base: cm{"metadata": cm{"name": "base"}, "handler": "runc"},
		cases: []corpusCase{
			{"handler-missing", without("handler"), nil},
			{"handler-uppercase", setTo("handler", "Runc"), nil},
			{"handler-underscore", setTo("handler", "run_c"), nil},
			{"handler-64", setTo("handler", long(64)), nil},
			{"overhead", setTo("overhead", cm{"podFixed": cm{"cpu": "10m", "memory": "16Mi"}}), nil},
			{"overhead-negative", setTo("overhead", cm{"podFixed": cm{"cpu": "-10m"}}), nil},
			{"scheduling", setTo("scheduling", cm{"nodeSelector": cm{"runtime": "gvisor"}, "tolerations": cl{cm{"key": "runtime", "operator": "Exists", "effect": "NoSchedule"}}}), nil},
			{"scheduling-node-selector-bad", setTo("scheduling", cm{"nodeSelector": cm{"bad key": "x"}}), nil},
			{"scheduling-toleration-bad", setTo("scheduling", cm{"tolerations": cl{cm{"key": "k", "operator": "Exists", "value": "v"}}}), nil},
		},
	}
	ca, otherCA, leaf := corpusCertPEM("corpus-ca", true), corpusCertPEM("corpus-other-ca", true), corpusCertPEM("corpus-leaf", false)
	clusterTrustBundle := corpusKind{kind: "ClusterTrustBundle", apiVersion: "certificates.k8s.io/v1", resource: "clustertrustbundles",
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"trustBundle": ca}},
		cases: []corpusCase{
			{"signer-prefixed-name", allOf(setTo("metadata.name", "example.com:mysigner:abc"), setTo("spec.signerName", "example.com/mysigner")), nil},
			{"signer-prefixed-name-without-signer", setTo("metadata.name", "example.com:mysigner:abc"), nil},
			{"signer-without-prefixed-name", setTo("spec.signerName", "example.com/mysigner"), nil},
			{"signer-prefix-of-another-signer", allOf(setTo("metadata.name", "example.com:other:abc"), setTo("spec.signerName", "example.com/mysigner")), nil},
			{"signer-prefix-only", allOf(setTo("metadata.name", "example.com:mysigner:"), setTo("spec.signerName", "example.com/mysigner")), nil},
			{"signer-prefixed-name-suffix-bad", allOf(setTo("metadata.name", "example.com:mysigner:Bad_1"), setTo("spec.signerName", "example.com/mysigner")), nil},
			{"signer-generate-name", allOf(without("metadata.name"), setTo("metadata.generateName", "example.com:mysigner:"), setTo("spec.signerName", "example.com/mysigner")), nil},
			{"signer-no-slash", allOf(setTo("metadata.name", "mysigner:abc"), setTo("spec.signerName", "mysigner")), nil},
			{"signer-one-label-domain", allOf(setTo("metadata.name", "example:mysigner:abc"), setTo("spec.signerName", "example/mysigner")), nil},
			{"signer-two-slashes", allOf(setTo("metadata.name", "example.com:a:b:abc"), setTo("spec.signerName", "example.com/a/b")), nil},
			{"signer-path-bad", allOf(setTo("metadata.name", "example.com:My_Signer:abc"), setTo("spec.signerName", "example.com/My_Signer")), nil},
			{"trust-bundle-missing", without("spec.trustBundle"), nil},
			{"trust-bundle-not-pem", setTo("spec.trustBundle", "not a certificate"), nil},
			{"trust-bundle-not-ca", setTo("spec.trustBundle", leaf), nil},
			{"trust-bundle-two-anchors", setTo("spec.trustBundle", ca+otherCA), nil},
			{"trust-bundle-duplicate", setTo("spec.trustBundle", ca+otherCA+ca), nil},
			{"trust-bundle-wrong-block", setTo("spec.trustBundle", strings.ReplaceAll(ca, "CERTIFICATE", "PUBLIC KEY")), nil},
			{"trust-bundle-headers", setTo("spec.trustBundle", strings.Replace(ca, "-----\n", "-----\nX-Header: 1\n\n", 1)), nil},
			{"trust-bundle-too-large", setTo("spec.trustBundle", ca+long(1<<20)), nil},
		},
	}
	stub := func(key crypto.Signer) string {
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
		if err != nil {
			panic(err)
		}
		return b64(string(der))
	}
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p224, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	rsa2048, _ := rsa.GenerateKey(rand.Reader, 2048)
	podCertificateRequest := corpusKind{kind: "PodCertificateRequest", apiVersion: "certificates.k8s.io/v1", resource: "podcertificaterequests",
		namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"signerName": "example.com/pods", "podName": "web", "podUID": "pod-uid",
			"serviceAccountName": "default", "serviceAccountUID": "sa-uid", "nodeName": "node-a", "nodeUID": "node-uid",
			"stubPKCS10Request": stub(p256)}},
		cases: []corpusCase{
			{"max-expiration-hour", setTo("spec.maxExpirationSeconds", 3600), nil},
			{"max-expiration-too-short", setTo("spec.maxExpirationSeconds", 3599), nil},
			{"max-expiration-91-days", setTo("spec.maxExpirationSeconds", 91*24*3600), nil},
			{"max-expiration-too-long", setTo("spec.maxExpirationSeconds", 91*24*3600+1), nil},
			{"kubernetes-signer-over-a-day", allOf(setTo("spec.signerName", "kubernetes.io/pods"), setTo("spec.maxExpirationSeconds", 86401)), nil},
			{"signer-bad", setTo("spec.signerName", "pods"), nil},
			{"stub-missing", without("spec.stubPKCS10Request"), nil},
			{"stub-not-a-request", setTo("spec.stubPKCS10Request", b64("junk")), nil},
			{"stub-rsa-2048", setTo("spec.stubPKCS10Request", stub(rsa2048)), nil},
			{"stub-p224", setTo("spec.stubPKCS10Request", stub(p224)), nil},
			{"pod-name-bad", setTo("spec.podName", "Web_1"), nil},
			{"pod-uid-missing", without("spec.podUID"), nil},
			{"pod-uid-too-long", setTo("spec.podUID", long(129)), nil},
			{"service-account-uid-missing", without("spec.serviceAccountUID"), nil},
			{"node-name-bad", setTo("spec.nodeName", "Node A"), nil},
			{"node-uid-missing", without("spec.nodeUID"), nil},
			{"user-annotations", setTo("spec.unverifiedUserAnnotations", cm{"example.com/path": "/x"}), nil},
			{"user-annotations-unprefixed", setTo("spec.unverifiedUserAnnotations", cm{"path": "/x"}), nil},
			{"status-on-create", setTo("status", cm{"certificateChain": ca}), nil},
		},
	}
	return append([]corpusKind{pod, service, configMap, secret, pvc, pv, deployment, statefulSet, daemonSet, replicaSet, rc,
		job, cronJob, namespace, serviceAccount, role, clusterRole, roleBinding, clusterRoleBinding, networkPolicy,
		ingress, ingressClass, storageClass, pdb, priorityClass, hpa, quota, limitRange, volumeAttachment, csiDriver,
		lease, endpointSlice, runtimeClass, clusterTrustBundle, podCertificateRequest}, corpusDRAKinds()...)
}

// corpusCertPEM is a new self-signed ECDSA certificate named cn, a CA or not, as PEM.
func corpusCertPEM(cn string, isCA bool) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: isCA, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
