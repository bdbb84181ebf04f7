package auth

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
)

// The bootstrap policy: the ClusterRoles and bindings every cluster starts with, under
// the names and with the rules kube-apiserver gives them, so that manifests and users
// that expect "view", "edit", "system:node-proxier" or "system:controller:…" find them.
// ReconcilePolicy writes them at start; a role whose annotation
// rbac.authorization.kubernetes.io/autoupdate is "false" is left as its owner made it.

// Verb sets of the rules.
var (
	readVerbs  = []string{"get", "list", "watch"}
	writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}
	readWrite  = append(append([]string(nil), readVerbs...), writeVerbs...)
)

// bootstrapLabel marks the policy's objects.
var bootstrapLabel = map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}

// rule is a PolicyRule under construction.
type rule rbacv1.PolicyRule

func verbs(v ...string) rule                { return rule{Verbs: v} }
func (r rule) groups(g ...string) rule      { r.APIGroups = g; return r }
func (r rule) resources(res ...string) rule { r.Resources = res; return r }
func (r rule) names(n ...string) rule       { r.ResourceNames = n; return r }
func (r rule) urls(u ...string) rule        { r.NonResourceURLs = u; return r }
func (r rule) policy() rbacv1.PolicyRule    { return rbacv1.PolicyRule(r) }
func rules(rs ...rule) (out []rbacv1.PolicyRule) {
	for _, r := range rs {
		out = append(out, r.policy())
	}
	return out
}

const (
	core          = ""
	appsGroup     = "apps"
	authnGroup    = "authentication.k8s.io"
	authzGroup    = "authorization.k8s.io"
	autoscaling   = "autoscaling"
	batchGroup    = "batch"
	certsGroup    = "certificates.k8s.io"
	coordination  = "coordination.k8s.io"
	discovery     = "discovery.k8s.io"
	eventsGroup   = "events.k8s.io"
	networking    = "networking.k8s.io"
	nodeGroup     = "node.k8s.io"
	policyGroup   = "policy"
	rbacGroup     = "rbac.authorization.k8s.io"
	storageGroup  = "storage.k8s.io"
	snapshotGroup = "snapshot.storage.k8s.io"
	resourceGroup = "resource.k8s.io"
	admissionReg  = "admissionregistration.k8s.io"
)

// eventsRule lets a component record Events through either events API.
func eventsRule() rule {
	return verbs("create", "update", "patch").groups(core, eventsGroup).resources("events")
}

func clusterRole(name string, labels map[string]string, rs ...rule) rbacv1.ClusterRole {
	l := map[string]string{}
	for k, v := range bootstrapLabel {
		l[k] = v
	}
	for k, v := range labels {
		l[k] = v
	}
	return rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l,
		Annotations: map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"}}, Rules: rules(rs...)}
}

// aggregated is a ClusterRole whose rules are those of the ClusterRoles labelled
// rbac.authorization.k8s.io/aggregate-to-<to>: "true" (the aggregation controller keeps them).
func aggregated(name, to string, labels map[string]string) rbacv1.ClusterRole {
	r := clusterRole(name, labels)
	r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
		{MatchLabels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-" + to: "true"}}}}
	return r
}

func aggregateTo(to ...string) map[string]string {
	l := map[string]string{}
	for _, t := range to {
		l["rbac.authorization.k8s.io/aggregate-to-"+t] = "true"
	}
	return l
}

// ClusterRoles are the bootstrap policy's ClusterRoles.
func ClusterRoles() []rbacv1.ClusterRole {
	roles := []rbacv1.ClusterRole{
		clusterRole("cluster-admin", nil,
			verbs("*").groups("*").resources("*"),
			verbs("*").urls("*")),
		clusterRole("system:discovery", nil,
			verbs("get").urls("/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/readyz",
				"/openapi", "/openapi/*", "/version", "/version/")),
		clusterRole("system:public-info-viewer", nil,
			verbs("get").urls("/healthz", "/livez", "/readyz", "/version", "/version/")),
		clusterRole("system:basic-user", nil,
			verbs("create").groups(authzGroup).resources("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
			verbs("create").groups(authnGroup).resources("selfsubjectreviews")),
		clusterRole("system:monitoring", nil,
			verbs("get").urls("/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz", "/livez/*", "/readyz/*", "/healthz/*")),
		clusterRole("system:service-account-issuer-discovery", nil,
			verbs("get").urls("/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/")),
		clusterRole("system:cluster-trust-bundle-discovery", nil,
			verbs(readVerbs...).groups(certsGroup).resources("clustertrustbundles")),
		clusterRole("system:auth-delegator", nil,
			verbs("create").groups(authnGroup).resources("tokenreviews"),
			verbs("create").groups(authzGroup).resources("subjectaccessreviews")),
		// Full use of the kubelets' API, nodes/proxy among it; bound to no one.
		clusterRole("system:kubelet-api-admin", nil,
			verbs("get", "list", "watch").groups(core).resources("nodes"),
			verbs("proxy").groups(core).resources("nodes"),
			verbs("*").groups(core).resources("nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log",
				"nodes/pods", "nodes/healthz", "nodes/configz")),

		// The user-facing roles: the rules are those of the system:aggregate-to-* roles
		// and of any ClusterRole a cluster's users label for them.
		aggregated("admin", "admin", nil),
		aggregated("edit", "edit", aggregateTo("admin")),
		aggregated("view", "view", aggregateTo("edit")),
		// What a kubelet's client certificate requests need to be approved automatically.
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:nodeclient", nil,
			verbs("create").groups("certificates.k8s.io").resources("certificatesigningrequests/nodeclient")),
		clusterRole("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", nil,
			verbs("create").groups("certificates.k8s.io").resources("certificatesigningrequests/selfnodeclient")),
		// metrics-server's role: whoever may view a namespace may `kubectl top` it.
		clusterRole("system:aggregated-metrics-reader", aggregateTo("view", "edit", "admin"),
			verbs("get", "list", "watch").groups("metrics.k8s.io").resources("pods", "nodes")),
		clusterRole("system:aggregate-to-admin", aggregateTo("admin"),
			verbs("create").groups(authzGroup).resources("localsubjectaccessreviews"),
			verbs(readWrite...).groups(rbacGroup).resources("roles", "rolebindings")),
		clusterRole("system:aggregate-to-edit", aggregateTo("edit"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(core).resources(
				"pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"),
			verbs("create").groups(core).resources("pods/eviction"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(core).resources(
				"configmaps", "events", "persistentvolumeclaims", "replicationcontrollers", "replicationcontrollers/scale",
				"secrets", "serviceaccounts", "services", "services/proxy"),
			verbs("create").groups(core).resources("serviceaccounts/token"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(appsGroup).resources(
				"daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets", "replicasets/scale",
				"statefulsets", "statefulsets/scale"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(autoscaling).resources("horizontalpodautoscalers"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(batchGroup).resources("cronjobs", "jobs"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(networking).resources("ingresses", "networkpolicies"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(policyGroup).resources("poddisruptionbudgets"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(discovery).resources("endpointslices"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(snapshotGroup).resources("volumesnapshots"),
			verbs("create", "delete", "deletecollection", "patch", "update").groups(resourceGroup).resources("resourceclaims", "resourceclaimtemplates"),
			verbs(readVerbs...).groups(core).resources("pods/attach", "pods/proxy", "pods/exec", "pods/portforward",
				"secrets", "services/proxy"),
			verbs("impersonate").groups(core).resources("serviceaccounts")),
		clusterRole("system:aggregate-to-view", aggregateTo("view"),
			verbs(readVerbs...).groups(core).resources("configmaps", "endpoints", "persistentvolumeclaims",
				"persistentvolumeclaims/status", "pods", "replicationcontrollers", "replicationcontrollers/scale",
				"serviceaccounts", "services", "services/status"),
			verbs(readVerbs...).groups(core).resources("bindings", "events", "limitranges", "namespaces/status",
				"pods/log", "pods/status", "replicationcontrollers/status", "resourcequotas", "resourcequotas/status"),
			verbs(readVerbs...).groups(core).resources("namespaces"),
			verbs(readVerbs...).groups(discovery).resources("endpointslices"),
			verbs(readVerbs...).groups(appsGroup).resources("controllerrevisions", "daemonsets", "daemonsets/status",
				"deployments", "deployments/scale", "deployments/status", "replicasets", "replicasets/scale",
				"replicasets/status", "statefulsets", "statefulsets/scale", "statefulsets/status"),
			verbs(readVerbs...).groups(autoscaling).resources("horizontalpodautoscalers", "horizontalpodautoscalers/status"),
			verbs(readVerbs...).groups(batchGroup).resources("cronjobs", "cronjobs/status", "jobs", "jobs/status"),
			verbs(readVerbs...).groups(networking).resources("ingresses", "ingresses/status", "networkpolicies"),
			verbs(readVerbs...).groups(policyGroup).resources("poddisruptionbudgets", "poddisruptionbudgets/status"),
			verbs(readVerbs...).groups(snapshotGroup).resources("volumesnapshots", "volumesnapshots/status"),
			verbs(readVerbs...).groups(resourceGroup).resources("resourceclaims", "resourceclaims/status", "resourceclaimtemplates")),

		// The components.
		clusterRole("system:node", nil, nodeRules()...),
		clusterRole("system:node-proxier", nil,
			verbs("list", "watch").groups(core).resources("services", "endpoints"),
			verbs("get", "list", "watch").groups(core).resources("nodes"),
			verbs("list", "watch").groups(discovery).resources("endpointslices"),
			eventsRule()),
		clusterRole("system:kube-dns", nil,
			verbs("list", "watch").groups(core).resources("endpoints", "services"),
			verbs("list", "watch").groups(discovery).resources("endpointslices")),
		clusterRole("system:volume-scheduler", nil,
			verbs(readVerbs...).groups(core).resources("persistentvolumes"),
			verbs(readVerbs...).groups(storageGroup).resources("storageclasses"),
			verbs(append([]string{"patch", "update"}, readVerbs...)...).groups(core).resources("persistentvolumeclaims")),
		clusterRole("system:kube-scheduler", nil,
			eventsRule(),
			verbs("create").groups(coordination).resources("leases"),
			verbs("get", "update").groups(coordination).resources("leases").names("kube-scheduler"),
			verbs("delete", "get", "list", "watch").groups(core).resources("pods"),
			verbs("create").groups(core).resources("bindings", "pods/binding"),
			verbs("patch", "update").groups(core).resources("pods/status"),
			verbs(readVerbs...).groups(core).resources("nodes", "namespaces", "persistentvolumeclaims",
				"persistentvolumes", "replicationcontrollers", "services"),
			verbs(readVerbs...).groups(appsGroup).resources("replicasets", "statefulsets"),
			verbs(readVerbs...).groups(policyGroup).resources("poddisruptionbudgets"),
			verbs(readVerbs...).groups(storageGroup).resources("storageclasses", "csinodes", "csidrivers", "csistoragecapacities", "volumeattachments"),
			verbs("create").groups(authnGroup).resources("tokenreviews"),
			verbs("create").groups(authzGroup).resources("subjectaccessreviews")),
		clusterRole("system:kube-controller-manager", nil,
			eventsRule(),
			verbs("create").groups(coordination).resources("leases"),
			verbs("get", "update").groups(coordination).resources("leases").names("kube-controller-manager"),
			verbs("create").groups(core).resources("secrets", "serviceaccounts"),
			verbs("delete").groups(core).resources("secrets"),
			verbs("get").groups(core).resources("configmaps", "namespaces", "secrets", "serviceaccounts"),
			verbs("update").groups(core).resources("secrets", "serviceaccounts"),
			verbs("create").groups(authnGroup).resources("tokenreviews"),
			verbs("create").groups(authzGroup).resources("subjectaccessreviews"),
			verbs("list", "watch").groups("*").resources("*"),
			verbs("create").groups(core).resources("serviceaccounts/token")),
	}
	return append(roles, controllerRoles()...)
}

// ClusterRoleBindings are the bootstrap policy's ClusterRoleBindings.
func ClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	bindings := []rbacv1.ClusterRoleBinding{
		bind("cluster-admin", group(user.SystemPrivilegedGroup)),
		bind("system:discovery", group(user.AllAuthenticated)),
		bind("system:basic-user", group(user.AllAuthenticated)),
		bind("system:public-info-viewer", group(user.AllAuthenticated), group(user.AllUnauthenticated)),
		bind("system:monitoring", group(user.MonitoringGroup)),
		bind("system:service-account-issuer-discovery", group(serviceaccount.AllServiceAccountsGroup)),
		bind("system:cluster-trust-bundle-discovery", group(serviceaccount.AllServiceAccountsGroup)),
		// system:node is left unbound, as upstream: the Node authorizer grants kubelets
		// its rules, narrowed to what their own pods need.
		bind("system:node"),
		bind("system:node-proxier", usr(user.KubeProxy)),
		bind("system:kube-dns", sa("kube-system", "kube-dns")),
		bind("system:kube-scheduler", usr(user.KubeScheduler)),
		bind("system:volume-scheduler", usr(user.KubeScheduler)),
		bind("system:kube-controller-manager", usr(user.KubeControllerManager)),
	}
	for _, r := range controllerRoles() {
		name := r.Name[len(controllerPrefix):]
		bindings = append(bindings, bind(r.Name, sa("kube-system", name)))
	}
	return bindings
}

// ExtensionAPIServerAuthenticationReader is the kube-system Role that may read the
// ConfigMap kube-system/extension-apiserver-authentication, in which the API server
// publishes whom servers that delegate authentication to it must trust; aggregated API
// servers' service accounts are bound to it.
const ExtensionAPIServerAuthenticationReader = "extension-apiserver-authentication-reader"

// Roles are the bootstrap policy's Roles (each in its namespace).
func Roles() []rbacv1.Role {
	return []rbacv1.Role{
		namespacedRole(metav1.NamespaceSystem, ExtensionAPIServerAuthenticationReader,
			verbs(readVerbs...).groups(core).resources("configmaps").names("extension-apiserver-authentication")),
	}
}

// RoleBindings are the bootstrap policy's RoleBindings (each in its namespace).
func RoleBindings() []rbacv1.RoleBinding {
	reader := rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "system::" + ExtensionAPIServerAuthenticationReader, Namespace: metav1.NamespaceSystem,
			Labels: bootstrapLabel, Annotations: map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: ExtensionAPIServerAuthenticationReader},
		Subjects: []rbacv1.Subject{usr(user.KubeControllerManager), usr(user.KubeScheduler)},
	}
	return []rbacv1.RoleBinding{reader}
}

func namespacedRole(namespace, name string, rs ...rule) rbacv1.Role {
	return rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: bootstrapLabel,
		Annotations: map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"}}, Rules: rules(rs...)}
}

func bind(role string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role, Labels: bootstrapLabel,
			Annotations: map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: subjects,
	}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

func usr(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func sa(namespace, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}
}

// nodeRules are what a kubelet may do at most; the Node authorizer grants them to
// system:node:<name> narrowed to the objects of the node's own pods.
func nodeRules() []rule {
	return []rule{
		verbs("create").groups(authnGroup).resources("tokenreviews"),
		verbs("create").groups(authzGroup).resources("subjectaccessreviews", "localsubjectaccessreviews"),
		verbs(readVerbs...).groups(core).resources("services"),
		verbs("create", "get", "list", "watch").groups(core).resources("nodes"),
		verbs("update", "patch").groups(core).resources("nodes/status"),
		verbs("update", "patch").groups(core).resources("nodes"),
		eventsRule(),
		verbs(readVerbs...).groups(core).resources("pods"),
		verbs("create", "delete").groups(core).resources("pods"),
		verbs("update", "patch").groups(core).resources("pods/status"),
		verbs("create").groups(core).resources("pods/eviction"),
		verbs(readVerbs...).groups(core).resources("secrets", "configmaps"),
		verbs("get").groups(core).resources("persistentvolumeclaims", "persistentvolumes"),
		verbs("get").groups(core).resources("endpoints"),
		verbs("update", "patch").groups(core).resources("persistentvolumeclaims/status"),
		verbs("get").groups(storageGroup).resources("volumeattachments"),
		verbs("create").groups(core).resources("serviceaccounts/token"),
		verbs("get").groups(core).resources("serviceaccounts"),
		verbs("get", "create", "update", "patch", "delete").groups(coordination).resources("leases"),
		verbs(readVerbs...).groups(storageGroup).resources("csidrivers"),
		verbs("get", "create", "update", "patch", "delete").groups(storageGroup).resources("csinodes"),
		verbs("get", "list", "watch").groups(nodeGroup).resources("runtimeclasses"),
		// The trust anchors of projected clusterTrustBundle volume sources.
		verbs("get", "list", "watch").groups(certsGroup).resources("clustertrustbundles"),
		// The certificates of projected podCertificate volume sources.
		verbs("get", "list", "watch", "create").groups(certsGroup).resources("podcertificaterequests"),
	}
}
