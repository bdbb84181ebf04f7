package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	mdns "github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/controller/rootcacertpublisher"
	"github.com/kubelab/kubelab/internal/util/podutil"
	"github.com/kubelab/kubelab/internal/vpc"
)

// waitFor polls check every interval until it has nothing left to wait for (it returns
// ""), ctx ends or timeout passes; the error names what was awaited and what check last
// said it waited for. It is the one way boot waits for the cluster.
func waitFor(ctx context.Context, what string, interval, timeout time.Duration, check func(ctx context.Context) string) error {
	var waiting string
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		waiting = check(ctx)
		return waiting == "", nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("cluster: %s not ready after %v (%s): %w", what, timeout, waiting, err)
	}
	return err
}

// waitUsable waits until a user's first commands work on the cluster: the ServiceAccount
// default in namespace default (`kubectl create token default`, and every pod created
// there, need it) and the namespace's kube-root-ca.crt (the pods' token volumes hold
// it), the EBS CSI add-on's pods Ready (its controller and a node
// plugin on every node), and, with real nodes, cluster DNS answering from every node.
func (c *Cluster) waitUsable(ctx context.Context, client kubernetes.Interface, nodes []Node) error {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	if err := waitFor(ctx, "namespace default's service account", 200*time.Millisecond, 2*time.Minute, func(ctx context.Context) string {
		if _, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err.Error()
		}
		if _, err := client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, rootcacertpublisher.ConfigMapName, metav1.GetOptions{}); err != nil {
			return err.Error()
		}
		return ""
	}); err != nil {
		return err
	}
	if len(nodes) > 0 {
		// From a watch: a list of every node's plugin pod twice a second would load the
		// API server of thousands of hollow nodes more than their pods do.
		ctx, cancel := context.WithCancel(ctx)
		factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(metav1.NamespaceSystem),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = addonPodSelector }))
		lister := factory.Core().V1().Pods().Lister()
		factory.Start(ctx.Done())
		err := waitFor(ctx, "the EBS CSI add-on's pods", 500*time.Millisecond, nodesWait(3*time.Minute, len(nodes)), func(ctx context.Context) string {
			pods, err := lister.List(labels.Everything())
			if err != nil {
				return err.Error()
			}
			return addonPodsWaiting(pods, names)
		})
		cancel()
		factory.Shutdown()
		if err != nil {
			return err
		}
		c.cfg.Progress("the EBS CSI add-on's pods Ready (kube-system ebs-csi-controller, ebs-csi-node)")
	}
	if c.vpc == nil || len(nodes) == 0 {
		return nil // hollow: no cluster DNS to ask
	}
	if err := waitFor(ctx, "cluster DNS", 500*time.Millisecond, 2*time.Minute, func(ctx context.Context) string {
		svc, err := client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		for _, n := range nodes {
			if err := askClusterDNS(ctx, c.vpc.NodePath(n.Name), "kubernetes.default.svc."+ClusterDomain+".", svc.Spec.ClusterIP); err != nil {
				return fmt.Sprintf("from node %s: %v", n.Name, err)
			}
		}
		return ""
	}); err != nil {
		return err
	}
	c.cfg.Progress("cluster DNS answering from every node")
	return nil
}

// nodesWait is how long a wait on every node may take: base, or 50 ms a node when
// longer (beyond 2,400 nodes for 2 minutes), as thousands of hollow nodes take that long
// to register and have their pods made.
func nodesWait(base time.Duration, nodes int) time.Duration {
	return max(base, time.Duration(nodes)*50*time.Millisecond)
}

// addonPodsWaiting says what the EBS CSI add-on's pods still lack ("" when nothing): a
// Ready controller pod, a Ready node plugin pod on each of nodes, and every other pod of
// theirs that is not terminating Ready too (a rollout under way). At most ten nodes'
// lacks are named.
func addonPodsWaiting(pods []*corev1.Pod, nodes []string) string {
	controller := false
	plugins := map[string]bool{}
	var notReady []string
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if !podutil.IsRunningAndReady(p) {
			notReady = append(notReady, p.Name)
			continue
		}
		switch p.Labels["app"] {
		case appCSIController:
			controller = true
		case appCSINode:
			plugins[p.Spec.NodeName] = true
		}
	}
	var lack []string
	if !controller {
		lack = append(lack, "no Ready "+appCSIController+" pod")
	}
	missing := 0
	for _, n := range nodes {
		if !plugins[n] {
			if missing++; missing <= 10 {
				lack = append(lack, "no Ready "+appCSINode+" pod on "+n)
			}
		}
	}
	if missing > 10 {
		lack = append(lack, fmt.Sprintf("nor on %d more nodes", missing-10))
	}
	if len(notReady) > 0 {
		slices.Sort(notReady)
		lack = append(lack, "not Ready: "+strings.Join(notReady, ", "))
	}
	return strings.Join(lack, "; ")
}

// askClusterDNS asks the cluster DNS service (ClusterDNSIP:53, UDP) for name's A record
// from the network namespace at netnsPath, where a node's service proxy translates the
// address as it does for the node's pods, and checks that the answer is want.
func askClusterDNS(ctx context.Context, netnsPath, name, want string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := vpc.DialContext(netnsPath)(ctx, "udp", net.JoinHostPort(ClusterDNSIP, "53"))
	if err != nil {
		return err
	}
	defer conn.Close()
	q := new(mdns.Msg)
	q.SetQuestion(name, mdns.TypeA)
	client := &mdns.Client{Net: "udp"}
	r, _, err := client.ExchangeWithConnContext(ctx, q, &mdns.Conn{Conn: conn})
	if err != nil {
		return fmt.Errorf("%s A: %w", name, err)
	}
	if r.Rcode != mdns.RcodeSuccess {
		return fmt.Errorf("%s A: %s", name, mdns.RcodeToString[r.Rcode])
	}
	var got []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*mdns.A); ok {
			got = append(got, a.A.String())
		}
	}
	if !slices.Contains(got, want) {
		return fmt.Errorf("%s A: %v, want %s", name, got, want)
	}
	return nil
}
