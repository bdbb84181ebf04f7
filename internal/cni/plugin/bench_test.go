package plugin

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/kubelab/kubelab/internal/ipamd"
	"github.com/kubelab/kubelab/internal/testutil"
)

// BenchmarkADD measures ADD+DEL of a pod, each plugin exec'd as a runtime execs it inside
// the node's namespace: kubelab-cni against the reference bridge + host-local plugins
// (/usr/lib/cni) with the same bridge, subnet, MTU, hairpin mode and gateway, and
// kubelab-cni in VPC mode (kubelab-cni-vpc: its address from the node's IP address
// manager over a fake EC2 of an m5.large, a routed veth with its rules). ns/op is
// ADD+DEL; p50-ms and p90-ms are the ADD latencies.
func BenchmarkADD(b *testing.B) {
	testutil.RequireRoot(b, "nft")
	kubelab := pluginBinary(b)
	refConf := func(dataDir string) []byte {
		c, _ := json.Marshal(map[string]any{
			"cniVersion": "1.0.0", "name": "bench", "type": "bridge",
			"bridge": "cni0", "isGateway": true, "hairpinMode": true, "mtu": 1450,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": "10.244.40.0/24"}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				"dataDir": dataDir,
			},
		})
		return c
	}
	for _, bc := range []struct {
		name string
		bin  string
		conf func(n *node) []byte
	}{
		{"kubelab-cni", kubelab, func(n *node) []byte { return n.conf(nil) }},
		{"reference-bridge+host-local", "/usr/lib/cni/bridge", func(n *node) []byte { return refConf(n.dataDir) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			n := newNode(b, "10.244.40.0/24")
			benchAddDel(b, n.ns, bc.bin, bc.conf(n))
		})
	}
	b.Run("kubelab-cni-vpc", func(b *testing.B) {
		// The primary ENI's nine addresses stay assigned: no ENI comes and goes between
		// one pod and the next, as none does while a node's pods churn under aws-node's
		// cooldown.
		// The manager runs in a process of its own, as on a node (not in the runtime's).
		v := newVPCNodeProc(b, 3, 10, ipamd.Targets{WarmIP: 1, MinimumIP: 9})
		benchAddDel(b, v.ns, kubelab, v.conf(nil))
	})
}

// benchAddDel runs ADD and DEL of one pod after another with the plugin binary bin in
// the node's namespace in.
func benchAddDel(b *testing.B, in ns.NetNS, bin string, conf []byte) {
	cycle := addDelCycle(b, in, bin, conf)
	var adds []time.Duration
	i := 0
	for b.Loop() {
		adds = append(adds, cycle(i))
		i++
	}
	reportP50P90(b, adds, "")
}

// addDelCycle returns what ADDs and DELs the i-th pod with the plugin binary bin in the
// node's namespace in, returning how long the ADD took.
func addDelCycle(b *testing.B, in ns.NetNS, bin string, conf []byte) func(i int) time.Duration {
	pod := testutil.NetNS(b)
	bin, err := filepath.Abs(bin)
	if err != nil {
		b.Fatal(err)
	}
	return func(i int) time.Duration {
		id := fmt.Sprintf("bench%08d", i)
		start := time.Now()
		if _, err := execPlugin(in, bin, cniEnv("ADD", id, pod), conf); err != nil {
			b.Fatalf("ADD: %v", err)
		}
		took := time.Since(start)
		if _, err := execPlugin(in, bin, cniEnv("DEL", id, pod), conf); err != nil {
			b.Fatalf("DEL: %v", err)
		}
		return took
	}
}

// reportP50P90 reports the median and 90th percentile of ds, their units prefixed.
func reportP50P90(b *testing.B, ds []time.Duration, prefix string) float64 {
	slices.Sort(ds)
	p50 := float64(ds[len(ds)/2]) / 1e6
	b.ReportMetric(p50, prefix+"p50-ms")
	b.ReportMetric(float64(ds[len(ds)*9/10])/1e6, prefix+"p90-ms")
	return p50
}

// BenchmarkADDVPCRatio measures kubelab-cni's ADD in VPC mode against the bridge mode,
// alternating one pod of each so that both see the same load: vpc-p50-ms over
// bridge-p50-ms is the ratio (vpc/bridge). The VPC node is BenchmarkADD's.
func BenchmarkADDVPCRatio(b *testing.B) {
	testutil.RequireRoot(b, "nft")
	kubelab := pluginBinary(b)
	bridgeNode := newNode(b, "10.244.41.0/24")
	bridge := addDelCycle(b, bridgeNode.ns, kubelab, bridgeNode.conf(nil))
	v := newVPCNodeProc(b, 3, 10, ipamd.Targets{WarmIP: 1, MinimumIP: 9})
	vpc := addDelCycle(b, v.ns, kubelab, v.conf(nil))
	var bridgeAdds, vpcAdds []time.Duration
	i := 0
	for b.Loop() {
		bridgeAdds = append(bridgeAdds, bridge(i))
		vpcAdds = append(vpcAdds, vpc(i))
		i++
	}
	bp := reportP50P90(b, bridgeAdds, "bridge-")
	vp := reportP50P90(b, vpcAdds, "vpc-")
	b.ReportMetric(vp/bp, "vpc/bridge")
}
