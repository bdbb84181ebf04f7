package trace

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The VPC pod network's part of the flow: the kubelet's CNI ADD asks kubelab-cni for the
// pod's network, kubelab-cni asks the node's aws-node for an address, and aws-node, when
// its warm pool had none, asks EC2 for more (AssignPrivateIpAddresses) and, when its ENIs
// were full, for a new ENI (CreateNetworkInterface, AttachNetworkInterface). It is read
// from the aws-node pod's log lines (LogLine.Container "aws-node"), which the overlay
// network has none of.

// awsNodeLine is one aws-node log line read into its message and attributes.
type awsNodeLine struct {
	at    time.Time
	msg   string
	attrs map[string]string
}

// ips are the addresses of an attribute holding a list (ips=["10.0.1.5","10.0.1.6"]).
func (l awsNodeLine) ips() []string {
	v := strings.Trim(l.attrs["ips"], "[]")
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.Trim(strings.TrimSpace(s), `"`); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// duration is attribute key as a duration (0 when absent or unreadable).
func (l awsNodeLine) duration(key string) time.Duration {
	d, _ := time.ParseDuration(l.attrs[key])
	return d
}

// parseKlogLine reads a line of klog's text format (`I1129 01:02:03.456789 1 file.go:12]
// "message" key="value" key=[...] key=value`) into its message and attributes.
func parseKlogLine(text string) (string, map[string]string, bool) {
	_, rest, ok := strings.Cut(text, "] ")
	if !ok || !strings.HasPrefix(rest, `"`) {
		return "", nil, false
	}
	msg, rest, ok := cutQuoted(rest)
	if !ok {
		return "", nil, false
	}
	attrs := map[string]string{}
	for rest = strings.TrimLeft(rest, " "); rest != ""; rest = strings.TrimLeft(rest, " ") {
		key, after, ok := strings.Cut(rest, "=")
		if !ok || strings.Contains(key, " ") {
			break
		}
		var val string
		switch {
		case strings.HasPrefix(after, `"`):
			if val, rest, ok = cutQuoted(after); !ok {
				return msg, attrs, true
			}
		case strings.HasPrefix(after, "["):
			end := strings.Index(after, "]")
			if end < 0 {
				return msg, attrs, true
			}
			val, rest = after[:end+1], after[end+1:]
		default:
			val, rest, _ = strings.Cut(after, " ")
		}
		attrs[key] = val
	}
	return msg, attrs, true
}

// cutQuoted reads the Go-quoted string s starts with and returns it unquoted and what follows.
func cutQuoted(s string) (string, string, bool) {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			v, err := strconv.Unquote(s[:i+1])
			return v, s[i+1:], err == nil
		}
	}
	return "", "", false
}

// awsNodeLines are the snapshot's aws-node log lines, read.
func awsNodeLines(logs []LogLine) []awsNodeLine {
	var out []awsNodeLine
	for _, l := range logs {
		if l.Container != awsNodeContainer {
			continue
		}
		if msg, attrs, ok := parseKlogLine(l.Text); ok {
			out = append(out, awsNodeLine{at: l.Time, msg: msg, attrs: attrs})
		}
	}
	return out
}

// awsNodeContainer is the container of the aws-node pods.
const awsNodeContainer = "aws-node"

// networkSteps are the steps of the pod podKey's (namespace/name) network from aws-node's
// log lines: none when no line says which address the pod got. The EC2 calls count only
// when made after created (the pod's creation, kept to the second) and before the pod got
// its address: those that got the addresses (and the ENI) it was given.
func networkSteps(logs []LogLine, podKey, podIP string, created time.Time) []Step {
	lines := awsNodeLines(logs)
	var got *awsNodeLine
	for i := range lines {
		l := &lines[i]
		if l.msg == "assigned pod address" && l.attrs["pod"] == podKey && (podIP == "" || l.attrs["ip"] == podIP) {
			got = l // the last counts: the address the pod has
		}
	}
	if got == nil {
		return nil
	}
	ip, eni := got.attrs["ip"], got.attrs["eni"]
	waited := got.duration("waited")
	asked := got.at.Add(-waited)
	detail := ip + " of " + eni
	if waited > 0 {
		detail += fmt.Sprintf(", waited %v for the warm pool", waited.Round(time.Millisecond))
	} else {
		detail += ", from the warm pool"
	}
	steps := []Step{
		{From: Kubelet, To: CNI, What: "ADD (VPC mode)", Detail: "eth0 of the pod's sandbox", At: asked, Source: "aws-node log"},
		{From: CNI, To: AWSNode, What: "assign pod address", Detail: detail, At: asked, Took: waited, Source: "aws-node log"},
	}
	since := created.Add(-time.Second)
	inFlow := func(start time.Time) bool {
		return !start.After(got.at) && (created.IsZero() || !start.Before(since))
	}
	for _, l := range lines {
		if l.msg != "attached ENI" || l.attrs["eni"] != eni {
			continue
		}
		create, attach := l.duration("createTook"), l.duration("attachTook")
		start := l.at.Add(-create - attach)
		if !inFlow(start) {
			continue
		}
		steps = append(steps,
			Step{From: AWSNode, To: Cloud, What: "CreateNetworkInterface", Detail: eni, At: start, Took: create, Source: "aws-node log"},
			Step{From: AWSNode, To: Cloud, What: "AttachNetworkInterface", Detail: eni + " device " + l.attrs["device"], At: l.at.Add(-attach), Took: attach, Source: "aws-node log"})
	}
	for _, l := range lines {
		if l.msg != "assigned addresses" || l.attrs["eni"] != eni || !slices.Contains(l.ips(), ip) {
			continue
		}
		took := l.duration("took")
		start := l.at.Add(-took)
		if !inFlow(start) {
			continue
		}
		detail := eni + ": " + ip
		if more := len(l.ips()) - 1; more > 0 {
			detail += fmt.Sprintf(" and %d more", more)
		}
		steps = append(steps, Step{From: AWSNode, To: Cloud, What: "AssignPrivateIpAddresses",
			Detail: detail, At: start, Took: took, Source: "aws-node log"})
	}
	return steps
}

// network: the pod's address in the VPC pod network.
func (b *builder) network() {
	p := b.s.Pod
	if p == nil || p.Spec.NodeName == "" || p.Spec.HostNetwork {
		return
	}
	for _, st := range networkSteps(b.s.Logs, p.Namespace+"/"+p.Name, p.Status.PodIP, p.CreationTimestamp.Time) {
		b.add(st)
	}
}
