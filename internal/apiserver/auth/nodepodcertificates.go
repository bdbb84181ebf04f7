package auth

import (
	"fmt"

	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// decidePodCertificateRequest: a kubelet may create PodCertificateRequests (admission
// checks each against its pods), get those naming its node, and list and watch them
// only with the field selector spec.nodeName=<its node>; never their status.
func (n *Node) decidePodCertificateRequest(node string, a authorizer.Attributes) (authorizer.Decision, string, bool) {
	if a.GetSubresource() != "" {
		return deny("nodes may not access the status subresource of PodCertificateRequests")
	}
	switch a.GetVerb() {
	case "create":
		return authorizer.DecisionAllow, "", true
	case "get":
		if n.podCertificateRequests == nil || a.GetName() == "" {
			break
		}
		r, err := n.podCertificateRequests.PodCertificateRequests(a.GetNamespace()).Get(a.GetName())
		if err == nil && string(r.Spec.NodeName) == node {
			return authorizer.DecisionAllow, "", true
		}
		return deny(fmt.Sprintf("no relationship found between node %q and this object", node))
	case "list", "watch":
		reqs, _ := a.GetFieldSelector()
		for _, r := range reqs {
			if r.Field == "spec.nodeName" && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) && r.Value == node {
				return authorizer.DecisionAllow, "", true
			}
		}
		return deny("can only list/watch podcertificaterequests with nodeName field selector")
	}
	return deny(fmt.Sprintf("nodes may not %s podcertificaterequests", a.GetVerb()))
}
