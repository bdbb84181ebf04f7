package clustertest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// Cluster is a whole cluster a test runs, with an admin client and an EC2 client of its
// cloud.
type Cluster struct {
	*cluster.Cluster
	T testing.TB
	// Config is the config the cluster runs with (its data dir, its nodes' settings).
	Config     cluster.Config
	RESTConfig *rest.Config
	Client     kubernetes.Interface
	EC2        *ec2.Client
	// ZoneOf is each node's zone, by node name.
	ZoneOf map[string]string
}

// DataDir is the cluster's data dir.
func (c *Cluster) DataDir() string { return c.Config.DataDir }

// NodeNames are the names of the cluster's nodes.
func (c *Cluster) NodeNames() []string {
	var names []string
	for _, n := range c.Nodes() {
		names = append(names, n.Name)
	}
	return names
}

// Namespace creates the namespace name for one test and returns its name.
func (c *Cluster) Namespace(name string) string {
	c.T.Helper()
	if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		c.T.Fatal(err)
	}
	return name
}

// CloudVolumes lists the cloud's volumes made for the PV named pv.
func (c *Cluster) CloudVolumes(pv string) []ec2types.Volume {
	c.T.Helper()
	return cloudtest.VolumesOfPV(c.T, c.EC2, pv)
}

// AttachedVolumes lists the cloud's volume attachments in any state but detached, as
// "<volume>@<instance>".
func (c *Cluster) AttachedVolumes() []string {
	c.T.Helper()
	out, err := c.EC2.DescribeVolumes(context.Background(), &ec2.DescribeVolumesInput{})
	if err != nil {
		c.T.Fatal(err)
	}
	var ids []string
	for _, v := range out.Volumes {
		for _, a := range v.Attachments {
			if a.State != ec2types.VolumeAttachmentStateDetached {
				ids = append(ids, fmt.Sprintf("%s@%s", aws.ToString(v.VolumeId), aws.ToString(a.InstanceId)))
			}
		}
	}
	return ids
}

// HasEvent says whether an Event of namespace ns about name has the given reason.
func (c *Cluster) HasEvent(ns, name, reason string) bool {
	return controllertest.HasEvent(c.T, c.Client, ns, name, reason)
}

// Warnings are the Warning events about an object, as "Reason: message".
func (c *Cluster) Warnings(ns, name string) []string {
	var out []string
	for _, ev := range controllertest.EventsAbout(c.T, c.Client, ns, name) {
		if ev.Type == corev1.EventTypeWarning {
			out = append(out, ev.Reason+": "+ev.Message)
		}
	}
	return out
}

// PodRunning says whether p runs and is Ready.
func PodRunning(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && podutils.IsPodReady(p)
}

// WaitPodRunning waits until the pod runs and is Ready, and returns it.
func (c *Cluster) WaitPodRunning(ns, name string) *corev1.Pod {
	c.T.Helper()
	var pod *corev1.Pod
	testutil.EventuallyWithin(c.T, Timeout, "pod "+ns+"/"+name+" Running", func() (bool, error) {
		var err error
		pod, err = c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && PodRunning(pod), err
	})
	return pod
}

// Kubectl runs the test's kubectl (testutil.Kubectl) with args on the cluster and
// returns its output, failing the test if it fails.
func (c *Cluster) Kubectl(args ...string) string {
	c.T.Helper()
	return Kubectl(c.T, c.Kubeconfig(), args...)
}

// Kubectl runs the test's kubectl with args on the cluster of kubeconfig and returns
// its output, failing t if it fails.
func Kubectl(t testing.TB, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := testutil.KubectlCommand(t, kubeconfig, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
