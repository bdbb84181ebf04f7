package cloud

import (
	"testing"

	"github.com/kubelab/kubelab/internal/cloud/iampolicy"
)

// TestManagedPolicies: every AWS managed policy the cloud knows is a valid identity
// policy, and the node role's ones allow what EKS nodes do with them and no more: the
// CNI's ENI and address actions, the worker node's describes, not CreateVolume.
func TestManagedPolicies(t *testing.T) {
	docs := map[string]*iampolicy.Document{}
	for arn, mp := range awsManagedPolicies {
		doc, err := iampolicy.Parse(mp.Document, iampolicy.ParseOptions{})
		if err != nil {
			t.Errorf("%s: %v", arn, err)
			continue
		}
		docs[mp.Name] = doc
	}
	for _, c := range []struct {
		policy, action, resource string
		want                     iampolicy.Decision
	}{
		{"AmazonEKS_CNI_Policy", "ec2:AssignPrivateIpAddresses", "*", iampolicy.Allow},
		{"AmazonEKS_CNI_Policy", "ec2:CreateTags", "arn:aws:ec2:us-east-1:111122223333:network-interface/eni-1", iampolicy.Allow},
		{"AmazonEKS_CNI_Policy", "ec2:CreateTags", "arn:aws:ec2:us-east-1:111122223333:volume/vol-1", iampolicy.ImplicitDeny},
		{"AmazonEKSWorkerNodePolicy", "ec2:DescribeInstances", "*", iampolicy.Allow},
		{"AmazonEKSWorkerNodePolicy", "ec2:CreateVolume", "*", iampolicy.ImplicitDeny},
		{"AmazonEC2ContainerRegistryReadOnly", "ecr:BatchGetImage", "*", iampolicy.Allow},
		{"AmazonEC2ContainerRegistryReadOnly", "ec2:DescribeInstances", "*", iampolicy.ImplicitDeny},
	} {
		doc := docs[c.policy]
		if doc == nil {
			t.Errorf("no managed policy %s", c.policy)
			continue
		}
		if got := iampolicy.Evaluate(iampolicy.Request{Action: c.action, Resource: c.resource}, doc); got != c.want {
			t.Errorf("%s for %s on %s: %v, want %v", c.policy, c.action, c.resource, got, c.want)
		}
	}
}
