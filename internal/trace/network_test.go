package trace

import (
	"slices"
	"testing"
	"time"
)

// netLine is an aws-node log line at ms milliseconds after the pod's creation, in
// klog's text format as aws-node's mirror pod logs it.
func netLine(created time.Time, ms int, text string) LogLine {
	return LogLine{Pod: "aws-node-x1", Container: awsNodeContainer, Time: created.Add(time.Duration(ms) * time.Millisecond),
		Text: `I1129 01:02:03.456789   99 ipamd.go:1] ` + text}
}

func TestParseKlogLine(t *testing.T) {
	msg, attrs, ok := parseKlogLine(`I1129 01:03:28.540217   16844 ipamd.go:274] "assigned addresses" component="aws-node" node="n1" eni="eni-0abc" ips=["10.0.1.5","10.0.1.6"] took="1.234ms" note="a \"q\" b" n=3`)
	if !ok || msg != "assigned addresses" {
		t.Fatalf("message %q %v", msg, ok)
	}
	want := map[string]string{"component": "aws-node", "node": "n1", "eni": "eni-0abc", "ips": `["10.0.1.5","10.0.1.6"]`,
		"took": "1.234ms", "note": `a "q" b`, "n": "3"}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, attrs[k], v)
		}
	}
	if got := (awsNodeLine{attrs: attrs}).ips(); !slices.Equal(got, []string{"10.0.1.5", "10.0.1.6"}) {
		t.Errorf("ips %v", got)
	}
	if _, _, ok := parseKlogLine(`level=INFO msg="CreateVolume: done"`); ok {
		t.Error("a line not of klog's format was read")
	}
}

func TestNetworkSteps(t *testing.T) {
	created := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	const pod, ip = "ns1/my-pod", "10.0.1.9"
	assigned := netLine(created, 2500, `"assigned pod address" node="n1" ip="10.0.1.9" eni="eni-2" pod="ns1/my-pod" container="c1" waited="2s"`)
	fromPool := netLine(created, 600, `"assigned pod address" node="n1" ip="10.0.1.9" eni="eni-2" pod="ns1/my-pod" container="c1"`)
	call := netLine(created, 2400, `"assigned addresses" node="n1" eni="eni-2" ips=["10.0.1.8","10.0.1.9","10.0.1.10"] call="AssignPrivateIpAddresses" took="150ms"`)
	oldCall := netLine(created, -5000, `"assigned addresses" node="n1" eni="eni-2" ips=["10.0.1.8","10.0.1.9","10.0.1.10"] took="150ms"`)
	otherIPs := netLine(created, 2400, `"assigned addresses" node="n1" eni="eni-2" ips=["10.0.1.90"] took="150ms"`)
	attached := netLine(created, 2000, `"attached ENI" node="n1" eni="eni-2" device=2 createTook="300ms" attachTook="200ms"`)
	otherENI := netLine(created, 2000, `"attached ENI" node="n1" eni="eni-3" device=2 createTook="300ms" attachTook="200ms"`)
	other := netLine(created, 2500, `"assigned pod address" node="n1" ip="10.0.1.8" eni="eni-2" pod="ns1/other" container="c2"`)
	base := []string{"kubelet→kubelab-cni: ADD (VPC mode)", "kubelab-cni→aws-node: assign pod address"}
	assign := "aws-node→EC2: AssignPrivateIpAddresses"
	eni := []string{"aws-node→EC2: CreateNetworkInterface", "aws-node→EC2: AttachNetworkInterface"}
	for _, tc := range []struct {
		name  string
		logs  []LogLine
		podIP string
		want  []string
	}{
		{"overlay: no aws-node lines", nil, ip, nil},
		{"another pod's address only", []LogLine{other, call}, ip, nil},
		{"address from the warm pool", []LogLine{fromPool}, ip, base},
		{"a call made for the pod", []LogLine{call, assigned, other}, ip, append(slices.Clone(base), assign)},
		{"the pod's IP not yet in its status", []LogLine{call, assigned}, "", append(slices.Clone(base), assign)},
		{"a call before the pod was created does not count", []LogLine{oldCall, fromPool}, ip, base},
		{"a call of other addresses does not count", []LogLine{otherIPs, assigned}, ip, base},
		{"a new ENI for the pod", []LogLine{attached, otherENI, call, assigned}, ip, append(append(slices.Clone(base), eni...), assign)},
		{"the address line names another address than the status", []LogLine{call, assigned}, "10.0.1.50", nil},
		{"a line of another container", []LogLine{{Container: "ebs-plugin", Time: created, Text: assigned.Text}}, ip, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := networkSteps(tc.logs, pod, tc.podIP, created)
			if got := bldArrows(steps); !slices.Equal(got, tc.want) {
				t.Errorf("steps\n%v\nwant\n%v", got, tc.want)
			}
		})
	}

	// Times: the ADD asked when the pod's line says minus its wait; each call from its
	// line's time minus its duration.
	steps := networkSteps([]LogLine{attached, call, assigned}, pod, ip, created)
	at := func(ms int) time.Time { return created.Add(time.Duration(ms) * time.Millisecond) }
	for i, w := range []struct {
		at   time.Time
		took time.Duration
	}{{at(500), 0}, {at(500), 2 * time.Second}, {at(1500), 300 * time.Millisecond}, {at(1800), 200 * time.Millisecond}, {at(2250), 150 * time.Millisecond}} {
		if !steps[i].At.Equal(w.at) || steps[i].Took != w.took {
			t.Errorf("step %d %q at %v took %v, want %v, %v", i, steps[i].What, steps[i].At, steps[i].Took, w.at, w.took)
		}
	}
	if d := steps[4].Detail; d != "eni-2: 10.0.1.9 and 2 more" {
		t.Errorf("AssignPrivateIpAddresses detail %q", d)
	}
}

func TestAboutPodAddress(t *testing.T) {
	match := aboutPodAddress("ns1/my-pod", "10.0.1.9")
	for text, want := range map[string]bool{
		`"assigned pod address" ip="10.0.1.9" pod="ns1/my-pod"`:  true,
		`"assigned addresses" eni="eni-2" ips=["10.0.1.9"]`:      true,
		`"assigned addresses" eni="eni-2" ips=["10.0.1.90"]`:     false,
		`"attached ENI" eni="eni-2" device=1`:                    true,
		`"assigned pod address" ip="10.0.1.7" pod="ns1/my-pod2"`: false,
		`"released pod address" ip="10.0.1.8"`:                   false,
	} {
		if got := match(text); got != want {
			t.Errorf("%s: %v, want %v", text, got, want)
		}
	}
}

// TestBuildVPCNetwork: in the VPC pod network the pod's trace shows its address's steps
// between its volume's and its containers'.
func TestBuildVPCNetwork(t *testing.T) {
	s := bldSnapshot(bldInOrder())
	created := s.Pod.CreationTimestamp.Time
	s.Logs = append(s.Logs,
		netLine(created, 1200, `"assigned addresses" node="n1" eni="eni-2" ips=["`+s.Pod.Status.PodIP+`"] took="100ms"`),
		netLine(created, 1300, `"assigned pod address" ip="`+s.Pod.Status.PodIP+`" eni="eni-2" pod="`+s.Namespace+"/"+s.Name+`" waited="1s"`))
	got := bldArrows(Build(s).Steps)
	i := slices.Index(got, "aws-node→EC2: AssignPrivateIpAddresses")
	stage := slices.Index(got, "kubelet→ebs-plugin (node): NodePublishVolume")
	start := slices.IndexFunc(got, func(a string) bool { return a == "kubelet→containerd: Started" })
	if i < 0 || stage < 0 || start < 0 || !(stage < i && i < start) {
		t.Errorf("steps %v: want AssignPrivateIpAddresses between NodePublishVolume and Started", got)
	}
}
