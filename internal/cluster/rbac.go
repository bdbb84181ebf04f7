package cluster

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The add-ons' service accounts, ClusterRoles and ClusterRoleBindings, which the
// components that are not part of the bootstrap policy run as (identity.go):
//
//   - the EBS CSI driver's, with the names and rules its deployment gives them: the
//     controller's sidecars are kube-system/ebs-csi-controller-sa, bound to
//     ebs-external-provisioner-role, ebs-external-attacher-role, ebs-external-resizer-role
//     and ebs-external-snapshotter-role; the node plugin is kube-system/ebs-csi-node-sa,
//     bound to ebs-csi-node-role; the Role ebs-csi-leases-role in kube-system
//     (leasesRBAC) lets the controller's sidecars hold their Leases;
//   - the cluster DNS's, as CoreDNS is deployed: kube-system/coredns, bound to
//     system:coredns (it watches Namespaces besides Services and EndpointSlices, which
//     the bootstrap policy's system:kube-dns does not allow);
//   - the cloud-controller-manager's, as the AWS cloud provider deploys it:
//     kube-system/cloud-controller-manager, bound to system:cloud-controller-manager;
//   - the overlay agent's (kube-system/kubelab-overlay, kubelab:overlay: it watches Nodes
//     and annotates its own) and the NetworkPolicy agent's (kube-system/kubelab-netpol,
//     kubelab:netpol: it watches Pods, Namespaces and NetworkPolicies);
//   - the pod identity webhook's (kube-system/pod-identity-webhook,
//     kubelab:pod-identity-webhook: it reads ServiceAccounts);
//   - the binding of the bootstrap role system:service-account-issuer-discovery to
//     system:unauthenticated (issuerDiscoveryBinding), so that relying parties outside
//     the cluster, the cloud's STS among them, read the issuer's discovery document and
//     keys without credentials, as they read an EKS cluster's OIDC issuer.

// The add-ons' service accounts, all in kube-system.
const (
	csiControllerSA = "ebs-csi-controller-sa"
	csiNodeSA       = "ebs-csi-node-sa"
	clusterDNSSA    = "coredns"
	overlaySA       = "kubelab-overlay"
	netpolSA        = "kubelab-netpol"
	ccmSA           = "cloud-controller-manager"
	podIdentitySA   = "pod-identity-webhook"
)

// API groups of the rules.
const (
	coreGroup          = ""
	storageGroup       = "storage.k8s.io"
	snapshotGroup      = "snapshot.storage.k8s.io"
	groupSnapshotGroup = "groupsnapshot.storage.k8s.io"
	discoveryGroup     = "discovery.k8s.io"
	networkingGroup    = "networking.k8s.io"
)

// rule allows verbs on resources of group.
func rule(group string, resources []string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs}
}

func res(r ...string) []string { return r }

// addonRole is a ClusterRole and the service account of kube-system it is bound to.
type addonRole struct {
	role, binding, account string
	labels                 map[string]string
	rules                  []rbacv1.PolicyRule
}

var (
	ebsLabels     = map[string]string{"app.kubernetes.io/name": "aws-ebs-csi-driver", "app.kubernetes.io/component": "csi-driver"}
	dnsLabels     = map[string]string{"k8s-app": "kube-dns"}
	overlayLabels = map[string]string{"app.kubernetes.io/name": "kubelab-overlay"}
	netpolLabels  = map[string]string{"app.kubernetes.io/name": "kubelab-netpol"}
	ccmLabels     = map[string]string{"app.kubernetes.io/name": "aws-cloud-controller-manager"}
	podIDLabels   = map[string]string{"app.kubernetes.io/name": "pod-identity-webhook"}
)

// eventRule lets a sidecar record Events.
var eventRule = rule(coreGroup, res("events"), "list", "watch", "create", "update", "patch")

// addonRoles are the add-ons' ClusterRoles with their bindings.
func addonRoles() []addonRole {
	return []addonRole{
		{role: "ebs-external-provisioner-role", binding: "ebs-csi-provisioner-binding", account: csiControllerSA, labels: ebsLabels,
			rules: []rbacv1.PolicyRule{
				rule(coreGroup, res("persistentvolumes"), "get", "list", "watch", "create", "patch", "delete"),
				rule(coreGroup, res("persistentvolumeclaims"), "get", "list", "watch", "update"),
				rule(storageGroup, res("storageclasses"), "get", "list", "watch"),
				eventRule,
				rule(snapshotGroup, res("volumesnapshots"), "get", "list", "watch", "update"),
				rule(snapshotGroup, res("volumesnapshotcontents"), "get", "list"),
				rule(storageGroup, res("csinodes"), "get", "list", "watch"),
				rule(coreGroup, res("nodes"), "get", "list", "watch"),
				rule(storageGroup, res("volumeattachments"), "get", "list", "watch"),
				rule(storageGroup, res("volumeattributesclasses"), "get"),
			}},
		{role: "ebs-external-attacher-role", binding: "ebs-csi-attacher-binding", account: csiControllerSA, labels: ebsLabels,
			rules: []rbacv1.PolicyRule{
				rule(coreGroup, res("persistentvolumes"), "get", "list", "watch", "patch"),
				rule(storageGroup, res("csinodes"), "get", "list", "watch"),
				rule(storageGroup, res("volumeattachments"), "get", "list", "watch", "patch"),
				rule(storageGroup, res("volumeattachments/status"), "patch"),
			}},
		{role: "ebs-external-resizer-role", binding: "ebs-csi-resizer-binding", account: csiControllerSA, labels: ebsLabels,
			rules: []rbacv1.PolicyRule{
				rule(coreGroup, res("persistentvolumes"), "get", "list", "watch", "patch"),
				rule(coreGroup, res("persistentvolumeclaims"), "get", "list", "watch"),
				rule(coreGroup, res("pods"), "get", "list", "watch"),
				rule(coreGroup, res("persistentvolumeclaims/status"), "patch"),
				eventRule,
				rule(storageGroup, res("volumeattributesclasses"), "get", "list", "watch"),
			}},
		{role: "ebs-external-snapshotter-role", binding: "ebs-csi-snapshotter-binding", account: csiControllerSA, labels: ebsLabels,
			rules: []rbacv1.PolicyRule{
				eventRule,
				rule(snapshotGroup, res("volumesnapshotclasses"), "get", "list", "watch"),
				rule(snapshotGroup, res("volumesnapshotcontents"), "get", "list", "watch", "update", "patch"),
				rule(snapshotGroup, res("volumesnapshotcontents/status"), "update", "patch"),
				rule(groupSnapshotGroup, res("volumegroupsnapshotclasses"), "get", "list", "watch"),
				rule(groupSnapshotGroup, res("volumegroupsnapshotcontents"), "get", "list", "watch", "update", "patch"),
				rule(groupSnapshotGroup, res("volumegroupsnapshotcontents/status"), "update", "patch"),
			}},
		{role: "ebs-csi-node-role", binding: "ebs-csi-node-getter-binding", account: csiNodeSA, labels: ebsLabels,
			rules: []rbacv1.PolicyRule{
				rule(storageGroup, res("volumeattachments"), "get", "list", "watch"),
				rule(coreGroup, res("nodes"), "get"),
				rule(coreGroup, res("nodes"), "patch", "list", "watch"),
				rule(storageGroup, res("csinodes"), "get"),
			}},
		{role: "system:coredns", binding: "system:coredns", account: clusterDNSSA, labels: dnsLabels,
			rules: []rbacv1.PolicyRule{
				rule(coreGroup, res("endpoints", "services", "pods", "namespaces"), "list", "watch"),
				rule(discoveryGroup, res("endpointslices"), "list", "watch"),
			}},
		{role: "system:cloud-controller-manager", binding: "system:cloud-controller-manager", account: ccmSA, labels: ccmLabels,
			rules: []rbacv1.PolicyRule{
				rule(coreGroup, res("events"), "create", "patch", "update"),
				rule(coreGroup, res("nodes"), "*"),
				rule(coreGroup, res("nodes/status"), "patch", "update"),
				rule(coreGroup, res("services"), "list", "patch", "update", "watch"),
				rule(coreGroup, res("services/status"), "list", "patch", "update", "watch"),
				rule(coreGroup, res("serviceaccounts"), "create", "get"),
				rule(coreGroup, res("persistentvolumes"), "get", "list", "update", "watch"),
				rule(coreGroup, res("endpoints"), "create", "get", "list", "watch", "update"),
				rule("coordination.k8s.io", res("leases"), "create", "get", "list", "watch", "update"),
				rule(coreGroup, res("serviceaccounts/token"), "create"),
				rule(discoveryGroup, res("endpointslices"), "get", "list", "watch"),
				rule(networkingGroup, res("ingressclasses"), "get", "list", "watch"),
				rule(networkingGroup, res("ingresses"), "get", "list", "watch", "update", "patch"),
				rule(networkingGroup, res("ingresses/status"), "update", "patch"),
			}},
		{role: "kubelab:overlay", binding: "kubelab:overlay", account: overlaySA, labels: overlayLabels,
			rules: []rbacv1.PolicyRule{
				rule(coreGroup, res("nodes"), "list", "watch", "patch"),
			}},
		{role: "kubelab:netpol", binding: "kubelab:netpol", account: netpolSA, labels: netpolLabels,
			rules: []rbacv1.PolicyRule{
				rule(coreGroup, res("pods", "namespaces"), "list", "watch"),
				rule(networkingGroup, res("networkpolicies"), "list", "watch"),
			}},
		{role: "kubelab:pod-identity-webhook", binding: "kubelab:pod-identity-webhook", account: podIdentitySA, labels: podIDLabels,
			rules: []rbacv1.PolicyRule{
				rule(coreGroup, res("serviceaccounts"), "get", "list", "watch"),
			}},
	}
}

// addonRBAC are the objects of the add-ons' roles: the service accounts (each once), the
// ClusterRoles and their ClusterRoleBindings.
func addonRBAC() ([]*corev1.ServiceAccount, []*rbacv1.ClusterRole, []*rbacv1.ClusterRoleBinding) {
	var accounts []*corev1.ServiceAccount
	var roles []*rbacv1.ClusterRole
	var bindings []*rbacv1.ClusterRoleBinding
	seen := map[string]bool{}
	for _, r := range addonRoles() {
		if !seen[r.account] {
			seen[r.account] = true
			accounts = append(accounts, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
				Name: r.account, Namespace: metav1.NamespaceSystem, Labels: r.labels}})
		}
		roles = append(roles, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: r.role, Labels: r.labels}, Rules: r.rules})
		bindings = append(bindings, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: r.binding, Labels: r.labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: r.account, Namespace: metav1.NamespaceSystem}},
		})
	}
	return accounts, roles, append(bindings, issuerDiscoveryBinding())
}

// issuerDiscoveryBinding lets anonymous requests read the service account issuer's
// discovery document and keys.
func issuerDiscoveryBinding() *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "service-account-issuer-discovery-unauthenticated"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:service-account-issuer-discovery"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:unauthenticated"}},
	}
}

// leasesRole lets the EBS CSI controller's sidecars hold their Leases in kube-system.
const leasesRole = "ebs-csi-leases-role"

// leasesRBAC are the Role on Leases of the EBS CSI controller's sidecars and its binding
// to their service account.
func leasesRBAC() (*rbacv1.Role, *rbacv1.RoleBinding) {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: leasesRole, Namespace: metav1.NamespaceSystem, Labels: ebsLabels},
		Rules: []rbacv1.PolicyRule{rule("coordination.k8s.io", res("leases"), "get", "watch", "list", "delete", "update", "create")}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ebs-csi-leases-rolebinding", Namespace: metav1.NamespaceSystem, Labels: ebsLabels},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: leasesRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: csiControllerSA, Namespace: metav1.NamespaceSystem}}}
	return role, binding
}
