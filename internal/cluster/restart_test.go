package cluster_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestRestartsMidFlow kills and restarts the controller-manager, the scheduler, the
// sidecars and the CSI controller while PVC + Pod pairs go through the storage flow on a
// cloud with AWS-like latencies (a create takes 2 s, an attach 3 s, so the kills land in
// the middle of cloud operations). Everything converges: each claim gets exactly one
// cloud volume, every pod runs, and after the pods and claims are deleted no volume,
// attachment or VolumeAttachment is left.
func TestRestartsMidFlow(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: the cloud's AWS-like latencies make this take a minute")
	}
	tc := startCluster(t, func(c *cluster.Config) { c.CloudProfile = "aws" })
	ctx := context.Background()
	ns := tc.Namespace("restarts")

	// A kill before anything happens: with the scheduler down, the claim stays Pending.
	if err := tc.Stop(ctx, "scheduler"); err != nil {
		t.Fatal(err)
	}
	tc.seedPair(ns, "claim-0", "pod-0", "gp2")
	// The PV controller has seen the claim and waits for its consumer to be scheduled;
	// no node is picked for it while the scheduler is down.
	testutil.EventuallyWithin(t, clustertest.Timeout, "WaitForFirstConsumer event on claim-0", func() bool {
		return tc.HasEvent(ns, "claim-0", "WaitForFirstConsumer")
	})
	testutil.Consistently(t, time.Second, "claim-0 Pending with no node selected while the scheduler is down", func() error {
		c, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "claim-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Status.Phase != corev1.ClaimPending || c.Annotations[annSelectedNode] != "" {
			return fmt.Errorf("claim %s, annotations %v", c.Status.Phase, c.Annotations)
		}
		return nil
	})
	if err := tc.Start(ctx, "scheduler"); err != nil {
		t.Fatal(err)
	}

	// Kills in the middle: a chaos loop stops a random component for a while, over and
	// over, while more pairs are created.
	components := []string{"controller-manager", "scheduler", "csi-provisioner", "csi-attacher", "csi-controller"}
	chaosCtx, stopChaos := context.WithCancel(ctx)
	var wg sync.WaitGroup
	kills := map[string]int{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		for chaosCtx.Err() == nil {
			name := components[rng.IntN(len(components))]
			if err := tc.Stop(ctx, name); err != nil {
				t.Errorf("stop %s: %v", name, err)
				return
			}
			kills[name]++
			time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
			if err := tc.Start(ctx, name); err != nil {
				t.Errorf("start %s: %v", name, err)
				return
			}
			time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		}
	}()
	const pairs = 6
	for i := 1; i < pairs; i++ {
		tc.seedPair(ns, fmt.Sprintf("claim-%d", i), fmt.Sprintf("pod-%d", i), "gp2")
		time.Sleep(700 * time.Millisecond)
	}
	// Let the chaos run through at least one round of each cloud operation.
	time.Sleep(8 * time.Second)
	stopChaos()
	wg.Wait()
	t.Logf("kills: %v", kills)

	for i := 0; i < pairs; i++ {
		tc.WaitPodRunning(ns, fmt.Sprintf("pod-%d", i))
	}
	all, err := tc.EC2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Volumes) != pairs {
		t.Errorf("cloud has %d volumes for %d claims", len(all.Volumes), pairs)
	}
	for i := 0; i < pairs; i++ {
		c, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, fmt.Sprintf("claim-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vols := tc.CloudVolumes(c.Spec.VolumeName)
		if len(vols) != 1 || vols[0].State != ec2types.VolumeStateInUse || len(vols[0].Attachments) != 1 {
			t.Errorf("claim-%d (%s): cloud volumes %+v, want one, in use, attached once", i, c.Spec.VolumeName, vols)
		}
	}

	// Tear down, with one more kill of the attacher and the controller-manager while
	// volumes detach.
	for i := 0; i < pairs; i++ {
		if err := tc.Client.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("pod-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, fmt.Sprintf("claim-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"csi-attacher", "controller-manager"} {
		time.Sleep(time.Second)
		if err := tc.Stop(ctx, name); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if err := tc.Start(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "no PVs, VolumeAttachments, attachments or volumes left", func() (bool, error) {
		pvs, err := tc.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		vas, err := tc.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		out, err := tc.EC2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{})
		if err != nil {
			return false, err
		}
		live := 0
		for _, v := range out.Volumes {
			if v.State != ec2types.VolumeStateDeleted {
				live++
			}
		}
		return len(pvs.Items) == 0 && len(vas.Items) == 0 && live == 0 && len(tc.AttachedVolumes()) == 0, nil
	})
	if _, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "claim-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("claim-0 after delete: %v", err)
	}
}
