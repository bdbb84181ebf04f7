// Package auth is the authorization step of the API server's request path (kubectl
// apply → API server → authentication → authorization → admission → etcd): who may do
// what.
//
// RBAC (rbac.go) allows a request when a rule of a Role or ClusterRole bound to its
// user, one of its groups or its service account allows it (rules.go); it reads roles
// and bindings from informers of the server's loopback client. The Node authorizer
// (node.go) decides for kubelets (system:node:<name> in system:nodes): the system:node
// rules, narrowed to the Secrets, ConfigMaps, claims, volumes, service accounts and
// VolumeAttachments the pods bound to that node use (podrefs.go), and to its own Lease
// and CSINode. The server puts them in a union after the group system:masters, which
// may do everything; what none allows is refused with 403.
//
// The bootstrap policy (policy.go, controllerpolicy.go) is the set of roles and bindings
// every cluster starts with, under upstream's names: cluster-admin,
// the aggregated admin/edit/view, system:basic-user, system:discovery,
// system:public-info-viewer, the components' system:kube-scheduler,
// system:kube-controller-manager, system:node-proxier, system:kube-dns, and a
// system:controller:<name> role per controller bound to its service account
// kube-system/<name>; and the Role kube-system/extension-apiserver-authentication-reader
// (reading the ConfigMap where the API server says whom servers that delegate
// authentication to it trust), bound to the scheduler and controller-manager users and
// by aggregated API servers to their service accounts. ReconcilePolicy writes it at every start, adding what is missing
// and never removing what a cluster's owner added.
//
// Everything here is hand-written on k8s.io/apiserver's authorizer interfaces and
// k8s.io/component-helpers' role reconciliation: kube-apiserver's RBAC and Node
// authorizers live in k8s.io/kubernetes, which is not a library.
package auth
