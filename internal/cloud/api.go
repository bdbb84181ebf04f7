package cloud

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

const apiVersion = "2016-11-15"

// action serves one EC2 action: it reads p and returns the response body or an error.
type action func(c *Cloud, p *params) (response, *apiError)

var actions = map[string]action{
	"CreateVolume":                 (*Cloud).createVolume,
	"DeleteVolume":                 (*Cloud).deleteVolume,
	"DescribeVolumes":              (*Cloud).describeVolumes,
	"ModifyVolume":                 (*Cloud).modifyVolume,
	"DescribeVolumesModifications": (*Cloud).describeVolumesModifications,
	"AttachVolume":                 (*Cloud).attachVolume,
	"DetachVolume":                 (*Cloud).detachVolume,
	"CreateSnapshot":               (*Cloud).createSnapshot,
	"DeleteSnapshot":               (*Cloud).deleteSnapshot,
	"DescribeSnapshots":            (*Cloud).describeSnapshots,
	"RunInstances":                 (*Cloud).runInstances,
	"TerminateInstances":           (*Cloud).terminateInstances,
	"StopInstances":                (*Cloud).stopInstances,
	"StartInstances":               (*Cloud).startInstances,
	"DescribeInstances":            (*Cloud).describeInstances,
	"DescribeAvailabilityZones":    (*Cloud).describeAvailabilityZones,
	"DescribeSubnets":              (*Cloud).describeSubnets,
	"DescribeVpcs":                 (*Cloud).describeVpcs,
	"CreateTags":                   (*Cloud).createTags,
	"DeleteTags":                   (*Cloud).deleteTags,
}

// response is an action's XML body; the dispatcher sets its request id.
type response interface{ setRequestID(string) }

type respBase struct {
	RequestID string `xml:"requestId"`
}

func (r *respBase) setRequestID(id string) { r.RequestID = id }

type returnResponse struct {
	respBase
	Return bool `xml:"return"`
}

// serveAPI is the EC2 Query endpoint: POST / (or GET with a query), SigV4-signed.
func (c *Cloud) serveAPI(w http.ResponseWriter, r *http.Request) {
	reqID := newRequestID()
	start := time.Now()
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	if err != nil {
		writeError(w, reqID, errf("InvalidRequest", "read request body: %v", err))
		return
	}
	if len(body) > 1<<20 {
		writeError(w, reqID, errf("InvalidRequest", "The request body is larger than 1 MiB."))
		return
	}
	form, ferr := url.ParseQuery(string(body))
	for k, v := range r.URL.Query() {
		form[k] = append(form[k], v...)
	}
	// The Elastic Load Balancing, IAM and STS APIs share the endpoint: their requests
	// are signed for their own service names, and name their own API versions.
	svc, version := signedService(r), form.Get("Version")
	switch {
	case svc == elbSigningName || svc == "" && version == elbAPIVersion:
		who, aerr := c.authenticate(r, body, elbSigningName, []string{c.cfg.Region}, queryDialect)
		if aerr == nil && ferr != nil {
			aerr = errValidation("The request body is not form-encoded: %v", ferr)
		}
		if aerr != nil {
			c.log.Info("rejected request", "code", aerr.Code, "remote", r.RemoteAddr)
			writeELBError(w, reqID, aerr)
			return
		}
		c.serveELB(w, who, form, reqID, start)
		return
	case svc == iamSigningName || svc == "" && version == iamAPIVersion:
		who, aerr := c.authenticate(r, body, iamSigningName, []string{iamRegion, c.cfg.Region}, queryDialect)
		if aerr == nil && ferr != nil {
			aerr = errValidation("The request body is not form-encoded: %v", ferr)
		}
		if aerr != nil {
			c.log.Info("rejected request", "code", aerr.Code, "remote", r.RemoteAddr)
			writeQueryError(w, iamNamespace, reqID, aerr)
			return
		}
		c.serveIAM(w, who, form, reqID, start)
		return
	case svc == stsSigningName || svc == "" && version == stsAPIVersion:
		c.serveSTS(w, r, body, form, ferr, reqID, start)
		return
	}
	who, aerr := c.authenticate(r, body, "ec2", []string{c.cfg.Region}, ec2Dialect)
	if aerr != nil {
		c.log.Info("rejected request", "code", aerr.Code, "remote", r.RemoteAddr)
		writeError(w, reqID, aerr)
		return
	}
	if ferr != nil {
		writeError(w, reqID, errf("InvalidParameterValue", "The request body is not form-encoded: %v", ferr))
		return
	}
	name := form.Get("Action")
	if name == "" {
		writeError(w, reqID, errMissing("Action"))
		return
	}
	act, ok := actions[name]
	if !ok {
		writeError(w, reqID, errf("InvalidAction", "The action %s is not valid for this web service.", name))
		return
	}
	if v := form.Get("Version"); v == "" {
		writeError(w, reqID, errMissing("Version"))
		return
	} else if v != apiVersion {
		writeError(w, reqID, errInvalid("Version", v, "This service speaks version "+apiVersion+"."))
		return
	}
	if aerr := c.authorize(who, "ec2:"+name, c.ec2AuthResources(name, form), unauthorizedOperation); aerr != nil {
		writeError(w, reqID, aerr)
		return
	}
	p := &params{v: form}
	resp, aerr := act(c, p)
	if aerr == nil && p.err != nil {
		aerr = p.err
	}
	if aerr != nil {
		if aerr.Code != "DryRunOperation" {
			c.log.Info("action failed", "action", name, "code", aerr.Code, "message", aerr.Message, "requestId", reqID)
		}
		writeError(w, reqID, aerr)
		return
	}
	resp.setRequestID(reqID)
	out, err := xml.Marshal(resp)
	if err != nil {
		writeError(w, reqID, errInternal(err))
		return
	}
	// Rename the root element to <ActionResponse xmlns=...>.
	out = renameRoot(out, name+"Response")
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	io.WriteString(w, xml.Header)
	w.Write(out)
	c.log.Debug("action", "action", name, "requestId", reqID, "duration", time.Since(start))
}

var rootRE = regexp.MustCompile(`^<([A-Za-z]+)>`)

func renameRoot(b []byte, name string) []byte {
	m := rootRE.FindSubmatch(b)
	if m == nil {
		return b
	}
	old := string(m[1])
	s := string(b)
	s = `<` + name + ` xmlns="http://ec2.amazonaws.com/doc/` + apiVersion + `/">` + s[len(m[0]):]
	s = strings.TrimSuffix(s, "</"+old+">") + "</" + name + ">"
	return []byte(s)
}

type xmlError struct {
	XMLName   xml.Name `xml:"Response"`
	Errors    []xmlErr `xml:"Errors>Error"`
	RequestID string   `xml:"RequestID"`
}

type xmlErr struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func writeError(w http.ResponseWriter, reqID string, e *apiError) {
	out, _ := xml.Marshal(xmlError{Errors: []xmlErr{{e.Code, e.Message}}, RequestID: reqID})
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	status := e.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	w.WriteHeader(status)
	io.WriteString(w, xml.Header)
	w.Write(out)
}

func newRequestID() string {
	b := newID("")
	return b[:8] + "-" + b[8:12] + "-4" + b[12:15] + "-8" + b[15:17] + "0-" + newID("")[:12]
}

// params reads an action's form parameters; the first problem is kept in err.
type params struct {
	v   url.Values
	err *apiError
}

func (p *params) fail(e *apiError) {
	if p.err == nil {
		p.err = e
	}
}

func (p *params) str(name string) string { return p.v.Get(name) }

func (p *params) required(name string) string {
	s := p.v.Get(name)
	if s == "" {
		p.fail(errMissing(name))
	}
	return s
}

// int reads an integer parameter; absent is 0.
func (p *params) int(name string) int {
	s := p.v.Get(name)
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		p.fail(errInvalid(name, s, "It must be a non-negative integer."))
		return 0
	}
	return n
}

func (p *params) bool(name string) bool {
	switch s := p.v.Get(name); strings.ToLower(s) {
	case "", "false":
		return false
	case "true":
		return true
	default:
		p.fail(errInvalid(name, s, "It must be true or false."))
		return false
	}
}

func (p *params) dryRun() bool { return p.bool("DryRun") }

// indexed returns the N of the keys "prefix.N..." in order.
func (p *params) indexed(prefix string) []string {
	seen := map[int]bool{}
	for k := range p.v {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		numStr, _, _ := strings.Cut(rest, ".")
		n, err := strconv.Atoi(numStr)
		if err != nil || n < 1 {
			p.fail(errInvalid(k, p.v.Get(k), "List members are numbered from 1."))
			continue
		}
		seen[n] = true
	}
	idx := make([]int, 0, len(seen))
	for n := range seen {
		idx = append(idx, n)
	}
	sort.Ints(idx)
	out := make([]string, len(idx))
	for i, n := range idx {
		out[i] = prefix + "." + strconv.Itoa(n)
	}
	return out
}

// list reads "prefix.1", "prefix.2", … as strings.
func (p *params) list(prefix string) []string {
	var out []string
	for _, k := range p.indexed(prefix) {
		out = append(out, p.v.Get(k))
	}
	return out
}

// tags reads "prefix.N.Key" / "prefix.N.Value".
func (p *params) tags(prefix string) []Tag {
	var out []Tag
	for _, k := range p.indexed(prefix) {
		key := p.v.Get(k + ".Key")
		if key == "" {
			p.fail(errMissing(k + ".Key"))
			continue
		}
		if strings.HasPrefix(strings.ToLower(key), "aws:") {
			p.fail(errInvalid(k+".Key", key, "Tag keys starting with 'aws:' are reserved."))
			continue
		}
		out = append(out, Tag{Key: key, Value: p.v.Get(k + ".Value")})
	}
	return out
}

// tagSpecs reads TagSpecification.N for resourceType and returns its tags.
func (p *params) tagSpecs(resourceType string) []Tag {
	var out []Tag
	for _, k := range p.indexed("TagSpecification") {
		rt := p.v.Get(k + ".ResourceType")
		if rt == "" {
			p.fail(errMissing(k + ".ResourceType"))
			continue
		}
		if rt != resourceType {
			p.fail(errInvalid(k+".ResourceType", rt, "This action tags resources of type '"+resourceType+"'."))
			continue
		}
		out = mergeTags(out, p.tags(k+".Tag"))
	}
	return out
}

// filter is one Filter.N: a name and the values any of which may match.
type filter struct {
	Name   string
	Values []string
}

func (p *params) filters() []filter {
	var out []filter
	for _, k := range p.indexed("Filter") {
		name := p.v.Get(k + ".Name")
		if name == "" {
			p.fail(errMissing(k + ".Name"))
			continue
		}
		out = append(out, filter{Name: name, Values: p.list(k + ".Value")})
	}
	return out
}

// maxResults reads MaxResults (0 when absent): below lo is an error, above hi means hi
// (as EC2 documents: "if you specify a value larger than hi, only hi items are returned").
func (p *params) maxResults(lo, hi int) int {
	n := p.int("MaxResults")
	if p.v.Get("MaxResults") == "" {
		return 0
	}
	if n < lo {
		p.fail(errInvalid("MaxResults", p.v.Get("MaxResults"), fmt.Sprintf("It must be between %d and %d.", lo, hi)))
	}
	return min(n, hi)
}

// requestHash identifies a request's parameters for ClientToken idempotency.
func (p *params) requestHash() string {
	keys := make([]string, 0, len(p.v))
	for k := range p.v {
		if k == "ClientToken" || k == "DryRun" || k == "Version" {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%q\n", k, p.v[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func ts(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}
