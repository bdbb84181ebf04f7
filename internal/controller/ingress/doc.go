// Package ingress is the cloud-controller-manager's Ingress controller of class alb, as
// the AWS Load Balancer Controller runs it: the Ingresses of an IngressClass whose
// spec.controller is ingress.k8s.aws/alb (or of the legacy annotation
// kubernetes.io/ingress.class: alb) are grouped by alb.ingress.kubernetes.io/group.name
// (else each is a group of its own), and each group gets an application load balancer of
// the cloud: listeners from alb.ingress.kubernetes.io/listen-ports (HTTP:80 by default),
// a rule per host and path in a stable priority order, each forwarding to a target group
// of the backend Service (the nodes at its node port with target-type instance, the pods
// with target-type ip), and the default backend as the listeners' default action (else a
// fixed 404). The load balancer's DNS name goes into each Ingress's status. The finalizer
// ingress.k8s.aws/resources holds an Ingress until its rules are gone from the load
// balancer (and the load balancer with its last Ingress).
//
// The decisions are pure functions in decide.go.
package ingress
