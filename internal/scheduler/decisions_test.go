package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	volumehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

func TestFitErrorMessage(t *testing.T) {
	cpu := NewStatus(Unschedulable, "Insufficient cpu")
	conflict := NewStatus(UnschedulableAndUnresolvable, reasonVolumeNodeConflict)
	for _, tc := range []struct {
		name string
		fe   FitError
		want string
	}{
		{"histogram sorted", FitError{NumAllNodes: 3, Diagnosis: Diagnosis{NodeToStatus: map[string]*Status{"a": conflict, "b": cpu, "c": cpu}}},
			"0/3 nodes are available: 1 node(s) had volume node affinity conflict, 2 Insufficient cpu."},
		{"with preemption", FitError{NumAllNodes: 1, Diagnosis: Diagnosis{NodeToStatus: map[string]*Status{"a": cpu},
			PostFilterMsg: "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."}},
			"0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."},
		{"two reasons on one node", FitError{NumAllNodes: 1, Diagnosis: Diagnosis{NodeToStatus: map[string]*Status{"a": NewStatus(Unschedulable, "Insufficient cpu", "Insufficient memory")}}},
			"0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."},
		{"prefilter", FitError{NumAllNodes: 2, Diagnosis: Diagnosis{PreFilterMsg: `persistentvolumeclaim "data" not found`,
			NodeToStatus: map[string]*Status{"a": conflict, "b": conflict}}},
			`0/2 nodes are available: persistentvolumeclaim "data" not found.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fe.Error(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func nodeInfo(cpu, mem string, pods int, existing ...*corev1.Pod) *NodeInfo {
	n := makeNode("n", cpu)
	n.Status.Allocatable[corev1.ResourceMemory] = resource.MustParse(mem)
	n.Status.Allocatable[corev1.ResourcePods] = *resource.NewQuantity(int64(pods), resource.DecimalSI)
	ni := newNodeInfo(n)
	for _, p := range existing {
		ni.AddPod(NewPodInfo(p))
	}
	return ni
}

func podReq(name, cpu, mem string) *corev1.Pod {
	p := makePod(name)
	p.UID = types.UID(name)
	rl := corev1.ResourceList{}
	if cpu != "" {
		rl[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		rl[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	p.Spec.Containers[0].Resources.Requests = rl
	return p
}

func TestInsufficientResources(t *testing.T) {
	for _, tc := range []struct {
		name string
		node *NodeInfo
		pod  *corev1.Pod
		want string
	}{
		{"fits", nodeInfo("2", "4Gi", 10), podReq("p", "1", "1Gi"), ""},
		{"cpu", nodeInfo("2", "4Gi", 10, podReq("a", "1500m", "")), podReq("p", "1", ""), "Insufficient cpu"},
		{"cpu and memory", nodeInfo("1", "1Gi", 10), podReq("p", "2", "2Gi"), "Insufficient cpu,Insufficient memory"},
		{"too many pods", nodeInfo("8", "8Gi", 1, podReq("a", "", "")), podReq("p", "", ""), "Too many pods"},
		{"exactly full fits", nodeInfo("2", "4Gi", 10, podReq("a", "1", "")), podReq("p", "1", ""), ""},
		{"best effort always fits resources", nodeInfo("1", "1Gi", 10, podReq("a", "1", "1Gi")), podReq("p", "", ""), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(insufficientResources(NewPodInfo(tc.pod), tc.node, nil), ",")
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestScoresPreferEmptierAndBalancedNodes(t *testing.T) {
	pod := NewPodInfo(podReq("p", "1", "1Gi"))
	empty := nodeInfo("4", "4Gi", 110)
	half := nodeInfo("4", "4Gi", 110, podReq("a", "2", "2Gi"))
	if a, b := leastAllocatedScore(pod, empty), leastAllocatedScore(pod, half); a <= b {
		t.Errorf("least allocated: empty %d <= half-full %d", a, b)
	}
	if got := leastAllocatedScore(pod, empty); got != 75 {
		t.Errorf("least allocated of 1/4 cpu and 1/4 memory = %d, want 75", got)
	}
	skewed := nodeInfo("4", "4Gi", 110, podReq("a", "2", ""))
	if a, b := balancedScore(pod, half), balancedScore(pod, skewed); a <= b {
		t.Errorf("balanced: even %d <= skewed %d", a, b)
	}
}

func TestNodeFilters(t *testing.T) {
	tainted := makeNode("n", "4", taint("dedicated", "infra"))
	cordoned := makeNode("n", "4")
	cordoned.Spec.Unschedulable = true
	zoned := makeNode("n", "4", zoneLabel("us-east-1b"))
	tolerating := makePod("p")
	tolerating.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
	selecting := func(zone string) *corev1.Pod {
		p := makePod("p")
		p.Spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: zone}
		return p
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		plugin FilterPlugin
		pre    PreFilterPlugin
		pod    *corev1.Pod
		node   *corev1.Node
		want   string
		code   Code
	}{
		{"untolerated taint", taintToleration{}, nil, makePod("p"), tainted, "node(s) had untolerated taint {dedicated: infra}", UnschedulableAndUnresolvable},
		{"tolerated taint", taintToleration{}, nil, tolerating, tainted, "", Success},
		{"cordoned", nodeUnschedulable{}, nil, makePod("p"), cordoned, reasonNodeUnschedulable, UnschedulableAndUnresolvable},
		{"selector matches", nodeAffinity{}, nodeAffinity{}, selecting("us-east-1b"), zoned, "", Success},
		{"selector does not match", nodeAffinity{}, nodeAffinity{}, selecting("us-east-1a"), zoned, reasonNodeAffinity, UnschedulableAndUnresolvable},
		{"nodeName other node", nodeName{}, nil, func() *corev1.Pod { p := makePod("p"); p.Spec.NodeName = "m"; return p }(), zoned, reasonNodeName, UnschedulableAndUnresolvable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := NewCycleState()
			pi := NewPodInfo(tc.pod)
			if tc.pre != nil {
				tc.pre.PreFilter(ctx, state, pi, NewSnapshot(nil))
			}
			st := tc.plugin.Filter(ctx, state, pi, newNodeInfo(tc.node))
			if st.Code() != tc.code || st.Message() != tc.want {
				t.Errorf("got %v %q, want %v %q", st.Code(), st.Message(), tc.code, tc.want)
			}
		})
	}
}

// Pods' hostPorts conflict on a node when protocol and port are the same and the hostIPs
// are the same or one is 0.0.0.0; the same port on another address or protocol fits.
func TestNodePortsFilter(t *testing.T) {
	withPort := func(name, ip string, proto corev1.Protocol, port int32) *corev1.Pod {
		p := makePod(name)
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: port, HostIP: ip, Protocol: proto}}
		return p
	}
	ctx := context.Background()
	node := newNodeInfo(makeNode("n", "4"))
	node.AddPod(NewPodInfo(withPort("pod1", "127.0.0.1", corev1.ProtocolTCP, 54323)))
	node.AddPod(NewPodInfo(withPort("pod2", "172.31.0.10", corev1.ProtocolTCP, 54323)))
	node.AddPod(NewPodInfo(withPort("pod3", "172.31.0.10", corev1.ProtocolUDP, 54323)))
	node.AddPod(NewPodInfo(withPort("pod4", "", corev1.ProtocolTCP, 54322)))
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		fits bool
	}{
		{"same port on another address", withPort("p", "172.31.0.11", corev1.ProtocolTCP, 54323), true},
		{"same port and address", withPort("p", "127.0.0.1", corev1.ProtocolTCP, 54323), false},
		{"same port on every address", withPort("p", "0.0.0.0", corev1.ProtocolTCP, 54323), false},
		{"one address of a port held on every address", withPort("p", "172.31.0.10", corev1.ProtocolTCP, 54322), false},
		{"another protocol of a port held on every address", withPort("p", "", corev1.ProtocolUDP, 54322), true},
		{"another port", withPort("p", "", corev1.ProtocolTCP, 54321), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, pi := NewCycleState(), NewPodInfo(tc.pod)
			if st := (nodePorts{}).PreFilter(ctx, state, pi, NewSnapshot(nil)); !st.IsSuccess() {
				t.Fatalf("PreFilter: %v", st.Message())
			}
			st := (nodePorts{}).Filter(ctx, state, pi, node)
			if tc.fits != st.IsSuccess() || !tc.fits && (st.Code() != Unschedulable || st.Message() != reasonNodePorts) {
				t.Errorf("got %v %q, fits %v", st.Code(), st.Message(), tc.fits)
			}
		})
	}
	if st := (nodePorts{}).PreFilter(ctx, NewCycleState(), NewPodInfo(makePod("none")), NewSnapshot(nil)); !st.IsSkip() {
		t.Errorf("a pod without hostPorts: %v, want Skip", st.Code())
	}
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	for _, tc := range []struct{ all, pct, want int }{
		{50, 0, 50}, {100, 0, 100}, {1000, 0, 420}, {5000, 0, 500}, {10000, 0, 500}, {1000, 10, 100}, {1000, 100, 1000},
	} {
		if got := numFeasibleNodesToFind(tc.all, tc.pct); got != tc.want {
			t.Errorf("numFeasibleNodesToFind(%d, %d) = %d, want %d", tc.all, tc.pct, got, tc.want)
		}
	}
}

func TestSelectHost(t *testing.T) {
	scores := []NodeScore{{"a", 10}, {"b", 30}, {"c", 30}, {"d", 5}}
	seen := map[string]bool{}
	for i := 0; i < 2; i++ {
		pick := i
		seen[selectHost(scores, func(n int) int { return pick % n })] = true
	}
	if !seen["b"] || !seen["c"] || len(seen) != 2 {
		t.Errorf("picked %v, want b and c (the best, by tie-break)", seen)
	}
}

func TestMatchTopologySelectorTerms(t *testing.T) {
	terms := []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
		{Key: "topology.ebs.csi.aws.com/zone", Values: []string{"us-east-1a", "us-east-1b"}}}}}
	for _, tc := range []struct {
		terms  []corev1.TopologySelectorTerm
		labels map[string]string
		want   bool
	}{
		{nil, nil, true},
		{terms, map[string]string{"topology.ebs.csi.aws.com/zone": "us-east-1b"}, true},
		{terms, map[string]string{"topology.ebs.csi.aws.com/zone": "us-east-1c"}, false},
		{terms, map[string]string{"topology.kubernetes.io/zone": "us-east-1a"}, false},
	} {
		if got := matchTopologySelectorTerms(tc.terms, tc.labels); got != tc.want {
			t.Errorf("match(%v) = %v, want %v", tc.labels, got, tc.want)
		}
	}
}

// fakeView builds listers over the given objects.
func fakeView(t *testing.T, objs ...any) *storageView {
	t.Helper()
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	pvcs, pvs, classes, csiNodes, drivers := idx(), idx(), idx(), idx(), idx()
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *corev1.PersistentVolumeClaim:
			err = pvcs.Add(o)
		case *corev1.PersistentVolume:
			err = pvs.Add(o)
		case *storagev1.StorageClass:
			err = classes.Add(o)
		case *storagev1.CSINode:
			err = csiNodes.Add(o)
		case *storagev1.CSIDriver:
			err = drivers.Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &storageView{pvcs: corelisters.NewPersistentVolumeClaimLister(pvcs), pvs: corelisters.NewPersistentVolumeLister(pvs),
		classes: storagelisters.NewStorageClassLister(classes), csiNodes: storagelisters.NewCSINodeLister(csiNodes),
		csiDrivers: storagelisters.NewCSIDriverLister(drivers)}
}

func claim(name, class, volume string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, VolumeName: volume,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
}

func pvIn(name, class, zone string, claimRef *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{StorageClassName: class,
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-" + name}},
			NodeAffinity:           zoneAffinity(corev1.LabelTopologyZone, zone)},
	}
	if claimRef != nil {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: claimRef.Namespace, Name: claimRef.Name, UID: claimRef.UID}
		pv.Status.Phase = corev1.VolumeBound
	} else {
		pv.Status.Phase = corev1.VolumeAvailable
	}
	return pv
}

func class(name string, wffc bool, provisioner string, zones ...string) *storagev1.StorageClass {
	mode := storagev1.VolumeBindingImmediate
	if wffc {
		mode = storagev1.VolumeBindingWaitForFirstConsumer
	}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
	if len(zones) > 0 {
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: corev1.LabelTopologyZone, Values: zones}}}}
	}
	return sc
}

func csiNode(node string, drivers ...string) *storagev1.CSINode {
	n := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: node}}
	for _, d := range drivers {
		n.Spec.Drivers = append(n.Spec.Drivers, storagev1.CSINodeDriver{Name: d, NodeID: "i-" + node, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](2)}})
	}
	return n
}

func TestVolumeBindingDecisions(t *testing.T) {
	bound := claim("bound", "gp2", "pv-a")
	wffc := claim("wffc", "gp2", "")
	imm := claim("imm", "io1", "")
	static := claim("static", "local", "")
	nodeB := makeNode("node-b", "4", zoneLabel("us-east-1b"))
	for _, tc := range []struct {
		name      string
		objs      []any
		claim     string
		node      *corev1.Node
		preCode   Code
		preMsg    string
		filterMsg string
		provision bool
		staticPV  string
	}{
		{"bound PV in the node's zone", []any{bound, pvIn("pv-a", "gp2", "us-east-1b", bound)}, "bound", nodeB, Success, "", "", false, ""},
		{"bound PV in another zone", []any{bound, pvIn("pv-a", "gp2", "us-east-1a", bound)}, "bound", nodeB, Success, "", reasonVolumeNodeConflict, false, ""},
		{"bound PV missing", []any{bound}, "bound", nodeB, Success, "", reasonPVNotExist, false, ""},
		{"claim missing", nil, "bound", nodeB, UnschedulableAndUnresolvable, `persistentvolumeclaim "bound" not found`, "", false, ""},
		{"unbound immediate", []any{imm, class("io1", false, "ebs.csi.aws.com")}, "imm", nodeB, UnschedulableAndUnresolvable, reasonUnboundImmediateClaim, "", false, ""},
		{"class missing", []any{wffc}, "wffc", nodeB, UnschedulableAndUnresolvable, `storageclass.storage.k8s.io "gp2" not found`, "", false, ""},
		{"wffc provisions in an allowed zone", []any{wffc, class("gp2", true, "ebs.csi.aws.com", "us-east-1b")}, "wffc", nodeB, Success, "", "", true, ""},
		{"wffc zone not allowed", []any{wffc, class("gp2", true, "ebs.csi.aws.com", "us-east-1a")}, "wffc", nodeB, Success, "", reasonVolumeBindConflict, false, ""},
		{"wffc no provisioner", []any{wffc, class("gp2", true, "kubernetes.io/no-provisioner")}, "wffc", nodeB, Success, "", reasonVolumeBindConflict, false, ""},
		{"wffc known CSI driver not on the node", []any{wffc, class("gp2", true, "ebs.csi.aws.com"),
			&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "ebs.csi.aws.com"}}, csiNode("node-b")}, "wffc", nodeB, Success, "", reasonVolumeBindConflict, false, ""},
		{"wffc known CSI driver on the node", []any{wffc, class("gp2", true, "ebs.csi.aws.com"),
			&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "ebs.csi.aws.com"}}, csiNode("node-b", "ebs.csi.aws.com")}, "wffc", nodeB, Success, "", "", true, ""},
		{"wffc static PV in zone", []any{static, class("local", true, "kubernetes.io/no-provisioner"), pvIn("pv-l", "local", "us-east-1b", nil)}, "static", nodeB, Success, "", "", false, "pv-l"},
		{"wffc static PV elsewhere", []any{static, class("local", true, "kubernetes.io/no-provisioner"), pvIn("pv-l", "local", "us-east-1a", nil)}, "static", nodeB, Success, "", reasonVolumeBindConflict, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newVolumeBinding(fakeView(t, tc.objs...), nil, 0)
			pi := NewPodInfo(makePod("p", withClaim(tc.claim)))
			state := NewCycleState()
			st := b.PreFilter(context.Background(), state, pi, nil)
			if st.Code() != tc.preCode || st.Message() != tc.preMsg {
				t.Fatalf("PreFilter %v %q, want %v %q", st.Code(), st.Message(), tc.preCode, tc.preMsg)
			}
			if !st.IsSuccess() {
				return
			}
			st = b.Filter(context.Background(), state, pi, newNodeInfo(tc.node))
			if st.Message() != tc.filterMsg {
				t.Fatalf("Filter %q, want %q", st.Message(), tc.filterMsg)
			}
			if !st.IsSuccess() {
				return
			}
			pv := state.Read(VolumeBindingName).(*volumeBindingState).byNode[tc.node.Name]
			if pv == nil {
				pv = &podVolumes{} // only bound claims: nothing to remember
			}
			if (len(pv.provisions) > 0) != tc.provision {
				t.Errorf("provisions %v, want %v", pv.provisions, tc.provision)
			}
			if tc.staticPV != "" && (len(pv.static) != 1 || pv.static[0].pv.Name != tc.staticPV) {
				t.Errorf("static bindings %+v, want %s", pv.static, tc.staticPV)
			}
		})
	}
}

func TestVolumeZonesAndLimits(t *testing.T) {
	c := map[string]sets.Set[string]{corev1.LabelTopologyZone: sets.New("us-east-1a", "us-east-1b")}
	for _, tc := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{corev1.LabelTopologyZone: "us-east-1b"}, true},
		{map[string]string{corev1.LabelTopologyZone: "us-east-1c"}, false},
		{map[string]string{}, true}, // a node without zone labels passes, as upstream
		{map[string]string{corev1.LabelTopologyRegion: "us-east-1"}, false},
	} {
		if got := fitsVolumeZones(c, tc.labels); got != tc.want {
			t.Errorf("fitsVolumeZones(%v) = %v, want %v", tc.labels, got, tc.want)
		}
	}
	for _, tc := range []struct {
		pod, node []string
		limit     int
		want      bool
	}{
		{[]string{"v1"}, []string{"a", "b"}, 2, true},
		{[]string{"a"}, []string{"a", "b"}, 2, false}, // already there: nothing new
		{[]string{"v1"}, []string{"a"}, 2, false},
		{[]string{"v1", "v2"}, []string{"a"}, 2, true},
	} {
		if got := exceedsVolumeLimit(sets.New(tc.pod...), sets.New(tc.node...), tc.limit); got != tc.want {
			t.Errorf("exceedsVolumeLimit(%v, %v, %d) = %v, want %v", tc.pod, tc.node, tc.limit, got, tc.want)
		}
	}
}

func TestNodeVolumeLimitsFilter(t *testing.T) {
	c1, c2, c3 := claim("c1", "gp2", "pv-1"), claim("c2", "gp2", "pv-2"), claim("c3", "gp2", "pv-3")
	view := fakeView(t, c1, c2, c3, pvIn("pv-1", "gp2", "a", c1), pvIn("pv-2", "gp2", "a", c2), pvIn("pv-3", "gp2", "a", c3), csiNode("n", "ebs.csi.aws.com"))
	l := &nodeVolumeLimits{view: view}
	ni := newNodeInfo(makeNode("n", "4"))
	ni.AddPod(NewPodInfo(makePod("a", withClaim("c1"))))
	ni.AddPod(NewPodInfo(makePod("b", withClaim("c2"))))
	for _, tc := range []struct {
		claim string
		want  string
	}{{"c3", reasonMaxVolumeCount}, {"c1", ""}} {
		pi := NewPodInfo(makePod("p", withClaim(tc.claim)))
		state := NewCycleState()
		l.PreFilter(context.Background(), state, pi, nil)
		if got := l.Filter(context.Background(), state, pi, ni).Message(); got != tc.want {
			t.Errorf("claim %s: %q, want %q", tc.claim, got, tc.want)
		}
	}
}

func spreadPod(name, zoneOfNode string, skew int32) *corev1.Pod {
	p := makePod(name)
	p.UID = types.UID(name)
	p.Labels = map[string]string{"app": "db"}
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: skew, TopologyKey: corev1.LabelTopologyZone,
		WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}
	return p
}

func TestPodTopologySpread(t *testing.T) {
	na := newNodeInfo(makeNode("a", "4", zoneLabel("z1")))
	nb := newNodeInfo(makeNode("b", "4", zoneLabel("z2")))
	nc := newNodeInfo(makeNode("c", "4", zoneLabel("z3")))
	nolabel := newNodeInfo(makeNode("d", "4"))
	na.AddPod(NewPodInfo(spreadPod("db-0", "z1", 1)))
	nb.AddPod(NewPodInfo(spreadPod("db-1", "z2", 1)))
	snap := NewSnapshot([]*NodeInfo{na, nb, nc, nolabel})
	pi := NewPodInfo(spreadPod("db-2", "", 1))
	state := NewCycleState()
	pl := podTopologySpread{}
	if st := pl.PreFilter(context.Background(), state, pi, snap); !st.IsSuccess() {
		t.Fatal(st.Message())
	}
	for _, tc := range []struct {
		node *NodeInfo
		want string
	}{{na, reasonSpreadNotMatch}, {nb, reasonSpreadNotMatch}, {nc, ""}, {nolabel, reasonSpreadMissingLabel}} {
		if got := pl.Filter(context.Background(), state, pi, tc.node).Message(); got != tc.want {
			t.Errorf("node %s: %q, want %q", tc.node.Name(), got, tc.want)
		}
	}
	// Preemption's dry run: without db-0, zone z1 is as good as z3.
	st2 := state.Clone()
	pl.RemovePod(st2, pi, na.Pods[0], na)
	if got := pl.Filter(context.Background(), st2, pi, na).Message(); got != "" {
		t.Errorf("after removing db-0, node a: %q", got)
	}
}

func TestInterPodAffinity(t *testing.T) {
	mk := func(name string, labels map[string]string, aff, anti string) *corev1.Pod {
		p := makePod(name)
		p.UID = types.UID(name)
		p.Labels = labels
		term := func(app string) []corev1.PodAffinityTerm {
			return []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
		}
		p.Spec.Affinity = &corev1.Affinity{}
		if aff != "" {
			p.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term(aff)}
		}
		if anti != "" {
			p.Spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term(anti)}
		}
		return p
	}
	na := newNodeInfo(makeNode("a", "4", zoneLabel("z1")))
	nb := newNodeInfo(makeNode("b", "4", zoneLabel("z2")))
	na.AddPod(NewPodInfo(mk("cache", map[string]string{"app": "cache"}, "", "web-solo")))
	nb.AddPod(NewPodInfo(mk("db", map[string]string{"app": "db"}, "", "")))
	snap := NewSnapshot([]*NodeInfo{na, nb})
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		wantA string
		wantB string
	}{
		{"affinity to cache", mk("web", map[string]string{"app": "web"}, "cache", ""), "", reasonAffinityNotMatch},
		{"anti-affinity to db", mk("web", map[string]string{"app": "web"}, "", "db"), "", reasonAntiAffinityNotMatch},
		{"existing anti-affinity", mk("solo", map[string]string{"app": "web-solo"}, "", ""), reasonExistingAntiAffinityRule, ""},
		{"first of a self-affine group", mk("g0", map[string]string{"app": "grp"}, "grp", ""), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl := interPodAffinity{}
			pi := NewPodInfo(tc.pod)
			state := NewCycleState()
			if st := pl.PreFilter(context.Background(), state, pi, snap); !st.IsSuccess() {
				t.Fatal(st.Message())
			}
			if got := pl.Filter(context.Background(), state, pi, na).Message(); got != tc.wantA {
				t.Errorf("node a: %q, want %q", got, tc.wantA)
			}
			if got := pl.Filter(context.Background(), state, pi, nb).Message(); got != tc.wantB {
				t.Errorf("node b: %q, want %q", got, tc.wantB)
			}
		})
	}
}

func TestPreemptionChoosesCheapestVictims(t *testing.T) {
	s := &Scheduler{profile: &Profile{}, cache: newSchedCache(nil)}
	s.profile.addPlugin(&nodeResourcesFit{}, 1)
	d := &defaultPreemption{s: s}
	prio := func(p *corev1.Pod, v int32) *corev1.Pod { p.Spec.Priority = &v; return p }
	// Node a: two low pods of 1 cpu each; node b: one medium pod of 2 cpu; node c: a high pod.
	na := nodeInfo("2", "8Gi", 110, prio(podReq("a1", "1", ""), 1), prio(podReq("a2", "1", ""), 1))
	na.Node.Name = "a"
	nb := nodeInfo("2", "8Gi", 110, prio(podReq("b1", "2", ""), 5))
	nb.Node.Name = "b"
	nc := nodeInfo("2", "8Gi", 110, prio(podReq("c1", "2", ""), 100))
	nc.Node.Name = "c"
	snap := NewSnapshot([]*NodeInfo{na, nb, nc})
	pod := NewPodInfo(prio(podReq("p", "1", ""), 10))
	statuses := map[string]*Status{"a": NewStatus(Unschedulable, "Insufficient cpu"), "b": NewStatus(Unschedulable, "Insufficient cpu"), "c": NewStatus(Unschedulable, "Insufficient cpu")}
	state := NewCycleState()
	node, st := d.PostFilter(context.Background(), state, pod, snap, statuses)
	if !st.IsSuccess() || node != "a" {
		t.Fatalf("nominated %q (%v), want a", node, st.Message())
	}
	plan := state.Read(preemptionPlanKey).(*preemptionPlan)
	if len(plan.victims) != 1 || plan.victims[0].Priority != 1 {
		t.Errorf("victims %d, want one low-priority pod", len(plan.victims))
	}
	// Nothing lower to evict anywhere: upstream's message.
	high := NewPodInfo(prio(podReq("h", "1", ""), 0))
	_, st = d.PostFilter(context.Background(), NewCycleState(), high, snap, statuses)
	want := "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
	if st.Message() != want {
		t.Errorf("got %q, want %q", st.Message(), want)
	}
	never := prio(podReq("n", "1", ""), 10)
	never.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	if _, st = d.PostFilter(context.Background(), NewCycleState(), NewPodInfo(never), snap, statuses); st.Message() != "preemption: "+msgPolicyNever {
		t.Errorf("preemptionPolicy Never: %q", st.Message())
	}
}

func TestNodeUpdateInterest(t *testing.T) {
	base := makeNode("n", "4", zoneLabel("z1"))
	heartbeat := base.DeepCopy()
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	relabel := base.DeepCopy()
	relabel.Labels["x"] = "y"
	tainted := base.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	bigger := base.DeepCopy()
	bigger.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("8")
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want []string
	}{
		{"heartbeat", heartbeat, nil},
		{"labels", relabel, []string{InterPodAffinityName, NodeAffinityName, PodTopologySpreadName, VolumeBindingName, VolumeZoneName}},
		{"taints", tainted, []string{PodTopologySpreadName, TaintTolerationName}},
		{"allocatable", bigger, []string{NodeResourcesFitName}},
	} {
		got := sets.List(nodeUpdateInterest(base, tc.node))
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// labelNodeSelector must agree with component-helpers' MatchNodeSelectorTerms.
func TestLabelNodeSelectorAgreesWithCheckNodeAffinity(t *testing.T) {
	req := func(key string, op corev1.NodeSelectorOperator, vals ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: vals}
	}
	terms := [][]corev1.NodeSelectorTerm{
		{{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpIn, "a", "b")}}},
		{{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpNotIn, "a")}}},
		{{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpIn, "a"), req("disk", corev1.NodeSelectorOpExists)}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpIn, "c")}}},
		{{MatchExpressions: []corev1.NodeSelectorRequirement{req("gen", corev1.NodeSelectorOpGt, "3")}}},
		{{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "n1")}}},
		{{MatchExpressions: []corev1.NodeSelectorRequirement{req("zone", corev1.NodeSelectorOpDoesNotExist)}}},
		{{}},
	}
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a", "disk": "ssd", "gen": "5"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"zone": "b", "gen": "2"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n3", Labels: map[string]string{"zone": "c"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n4"}},
	}
	for i, ts := range terms {
		ns := &corev1.NodeSelector{NodeSelectorTerms: ts}
		sel, err := newLabelNodeSelector(ns)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			pv := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: ns}}}
			want := volumehelpersMatch(pv, n)
			if got := sel.match(n); got != want {
				t.Errorf("terms %d node %s: %v, want %v", i, n.Name, got, want)
			}
		}
	}
}

func volumehelpersMatch(pv *corev1.PersistentVolume, n *corev1.Node) bool {
	ok, err := corev1helpers.MatchNodeSelectorTerms(n, pv.Spec.NodeAffinity.Required)
	return err == nil && ok
}

// TestCheckBoundWaitsForItsOwnWrite: right after PreBind sets selected-node on a claim,
// the informer may still hold the claim without it; that is "not yet", not the
// provisioner's reset, which only a newer claim without the annotation is.
func TestCheckBoundWaitsForItsOwnWrite(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	cached := func(rv, selected string) *corev1.PersistentVolumeClaim {
		c := claim("data", "gp2", "")
		c.ResourceVersion = rv
		if selected != "" {
			c.Annotations = map[string]string{volumehelpers.AnnSelectedNode: selected}
		}
		return c
	}
	for _, tc := range []struct {
		name      string
		cached    *corev1.PersistentVolumeClaim
		wantReset bool
	}{
		{"the cache has not seen the write", cached("5", ""), false},
		{"the cache has the write, provisioning goes on", cached("7", "n1"), false},
		{"a newer claim without the annotation: reset", cached("9", ""), true},
		{"a newer claim selecting another node: reset", cached("9", "n2"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newVolumeBinding(fakeView(t, tc.cached), nil, time.Minute)
			pv := &podVolumes{node: node, provisions: []*corev1.PersistentVolumeClaim{claim("data", "gp2", "")},
				selected: map[string]string{"default/data": "7"}}
			err := b.checkBound(pv)
			if reset := err != nil && strings.Contains(err.Error(), "selectedNode annotation reset"); reset != tc.wantReset {
				t.Fatalf("checkBound = %v, want reset %v", err, tc.wantReset)
			}
			if !tc.wantReset && !errors.Is(err, errNotYet) {
				t.Fatalf("checkBound = %v, want errNotYet", err)
			}
		})
	}
}

// TestResizedPodHoldsTheLarger: a pod resized in place holds, per resource, the larger of
// its spec's requests and those its kubelet allocated (status); an infeasible resize
// holds only what was allocated. A resize down counts as one once both agree.
func TestResizedPodHoldsTheLarger(t *testing.T) {
	resized := func(specCPU, specMem, allocCPU, allocMem string) *corev1.Pod {
		p := podReq("p", specCPU, specMem)
		alloc := podReq("p", allocCPU, allocMem).Spec.Containers[0].Resources.Requests
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, AllocatedResources: alloc,
			Resources: &corev1.ResourceRequirements{Requests: alloc}}}
		return p
	}
	infeasible := resized("4", "1Gi", "1", "1Gi")
	infeasible.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible}}
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		cpu, mem  int64
		scaleDown bool
	}{
		{"growing: the spec", resized("2", "1Gi", "1", "1Gi"), 2000, 1 << 30, false},
		{"shrinking: the allocation", resized("500m", "512Mi", "1", "1Gi"), 1000, 1 << 30, false},
		{"mixed", resized("2", "512Mi", "1", "1Gi"), 2000, 1 << 30, false},
		{"infeasible: the allocation", infeasible, 1000, 1 << 30, false},
		{"shrunk", resized("500m", "1Gi", "500m", "1Gi"), 500, 1 << 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NewPodInfo(tc.pod).Requests
			if got.MilliCPU != tc.cpu || got.Memory != tc.mem {
				t.Errorf("requests %dm %d, want %dm %d", got.MilliCPU, got.Memory, tc.cpu, tc.mem)
			}
			before := resized("1", "1Gi", "1", "1Gi")
			if down := podScaledDown(before, tc.pod); down != tc.scaleDown {
				t.Errorf("scaled down = %v, want %v", down, tc.scaleDown)
			}
		})
	}
}

// Every cycle on nodes that all fit starts where the previous one's kept nodes end, however
// far the parallel filter ran past the count it wanted, so that each node is looked at as
// often as the others.
func TestFindFeasibleRotatesByKeptNodes(t *testing.T) {
	c := fake.NewClientset()
	s, err := New(Config{Parallelism: 16}, c, informers.NewSharedInformerFactory(c, 0))
	if err != nil {
		t.Fatal(err)
	}
	const nodes = 1000
	for i := 0; i < nodes; i++ {
		s.cache.SetNode(makeNode(fmt.Sprintf("node-%04d", i), "4"))
	}
	want := numFeasibleNodesToFind(nodes, 0)
	pi := NewPodInfo(makePod("p", cpu("100m")))
	for cycle := 1; cycle <= 20; cycle++ {
		state := NewCycleState()
		snap, release := s.cache.readSnapshot()
		if st := s.profile.RunPreFilter(context.Background(), state, pi, snap); !st.IsSuccess() {
			t.Fatal(st.AsError())
		}
		feasible, _, err := s.findFeasible(context.Background(), state, pi, snap)
		release()
		if err != nil || len(feasible) != want {
			t.Fatalf("cycle %d: %d feasible nodes, %v; want %d", cycle, len(feasible), err, want)
		}
		if got := s.nextStart; got != cycle*want%nodes {
			t.Fatalf("cycle %d starts the next at node %d, want %d", cycle, got, cycle*want%nodes)
		}
	}
}
