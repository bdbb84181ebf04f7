package auth

import rbacv1 "k8s.io/api/rbac/v1"

// controllerPrefix names the ClusterRole of each controller of the controller-manager;
// the role is bound to the service account kube-system/<controller>, the identity
// the controller-manager gives that controller's client.
const controllerPrefix = "system:controller:"

// ControllerNames are the controllers the bootstrap policy has a role for, by the
// names of their service accounts in kube-system.
func ControllerNames() []string {
	var names []string
	for _, r := range controllerRoles() {
		names = append(names, r.Name[len(controllerPrefix):])
	}
	return names
}

func controller(name string, rs ...rule) rbacv1.ClusterRole {
	return clusterRole(controllerPrefix+name, nil, rs...)
}

// controllerRoles are the ClusterRoles of the controllers kubelab's controller-manager runs.
func controllerRoles() []rbacv1.ClusterRole {
	return []rbacv1.ClusterRole{
		controller("attachdetach-controller",
			verbs(readVerbs...).groups(core).resources("persistentvolumeclaims", "persistentvolumes", "nodes", "pods"),
			verbs("patch", "update").groups(core).resources("nodes/status"),
			verbs("create", "delete", "get", "list", "watch", "patch", "update").groups(storageGroup).resources("volumeattachments"),
			verbs(readVerbs...).groups(storageGroup).resources("csidrivers", "csinodes"),
			eventsRule()),
		controller("clusterrole-aggregation-controller",
			verbs("escalate", "get", "list", "patch", "update", "watch").groups(rbacGroup).resources("clusterroles")),
		controller("cronjob-controller",
			verbs("get", "list", "watch", "update").groups(batchGroup).resources("cronjobs"),
			verbs("get", "list", "watch", "create", "update", "delete", "patch").groups(batchGroup).resources("jobs"),
			verbs("update").groups(batchGroup).resources("cronjobs/status", "cronjobs/finalizers"),
			verbs("list", "delete").groups(core).resources("pods"),
			eventsRule()),
		controller("daemon-set-controller",
			verbs(readVerbs...).groups(appsGroup).resources("daemonsets"),
			verbs("update").groups(appsGroup).resources("daemonsets/status", "daemonsets/finalizers"),
			verbs(readVerbs...).groups(core).resources("nodes"),
			verbs("create", "delete", "list", "patch", "watch").groups(core).resources("pods"),
			verbs("create").groups(core).resources("pods/binding"),
			verbs(readWrite...).groups(appsGroup).resources("controllerrevisions"),
			eventsRule()),
		controller("deployment-controller",
			verbs("get", "list", "watch", "update").groups(appsGroup).resources("deployments"),
			verbs("update").groups(appsGroup).resources("deployments/status", "deployments/finalizers"),
			verbs(readWrite...).groups(appsGroup).resources("replicasets"),
			verbs("get", "list", "watch", "update").groups(core).resources("pods"),
			eventsRule()),
		controller("disruption-controller",
			verbs(readVerbs...).groups(appsGroup).resources("deployments", "replicasets", "statefulsets"),
			verbs(readVerbs...).groups(core).resources("replicationcontrollers"),
			verbs(readVerbs...).groups(policyGroup).resources("poddisruptionbudgets"),
			verbs("update").groups(policyGroup).resources("poddisruptionbudgets/status"),
			verbs("patch", "update").groups(core).resources("pods/status"),
			verbs("get").groups("*").resources("*/scale"),
			eventsRule()),
		controller("endpointslice-controller",
			verbs(readVerbs...).groups(core).resources("services", "pods", "nodes"),
			verbs("update").groups(core).resources("services/finalizers"),
			verbs(readWrite...).groups(discovery).resources("endpointslices"),
			eventsRule()),
		controller("generic-garbage-collector",
			verbs("delete", "get", "list", "patch", "update", "watch").groups("*").resources("*")),
		controller("horizontal-pod-autoscaler",
			verbs("get", "list", "watch").groups(autoscaling).resources("horizontalpodautoscalers"),
			verbs("update").groups(autoscaling).resources("horizontalpodautoscalers/status"),
			verbs("get", "update").groups("*").resources("*/scale"),
			verbs("list", "watch").groups(core).resources("pods"),
			// Resource, custom and external metrics.
			verbs("list", "watch").groups("metrics.k8s.io").resources("pods"),
			verbs("get", "list", "watch").groups("custom.metrics.k8s.io").resources("*"),
			verbs("get", "list", "watch").groups("external.metrics.k8s.io").resources("*"),
			eventsRule()),
		controller("job-controller",
			verbs("get", "list", "watch", "update", "patch").groups(batchGroup).resources("jobs"),
			verbs("update").groups(batchGroup).resources("jobs/status", "jobs/finalizers"),
			verbs("list", "watch", "create", "delete", "patch").groups(core).resources("pods"),
			eventsRule()),
		controller("namespace-controller",
			verbs("delete", "get", "list", "watch").groups(core).resources("namespaces"),
			verbs("update").groups(core).resources("namespaces/finalize", "namespaces/status"),
			verbs("delete", "deletecollection", "get", "list").groups("*").resources("*")),
		controller("node-controller",
			verbs("delete", "get", "list", "patch", "update", "watch").groups(core).resources("nodes"),
			verbs("patch", "update").groups(core).resources("nodes/status"),
			verbs("delete", "list", "watch").groups(core).resources("pods"),
			verbs("patch", "update").groups(core).resources("pods/status"),
			verbs("create").groups(core).resources("pods/eviction"),
			verbs(readVerbs...).groups(coordination).resources("leases"),
			eventsRule()),
		controller("persistent-volume-binder",
			verbs("create", "delete", "get", "list", "update", "watch", "patch").groups(core).resources("persistentvolumes"),
			verbs("update", "patch").groups(core).resources("persistentvolumes/status"),
			verbs("get", "list", "update", "watch", "patch").groups(core).resources("persistentvolumeclaims"),
			verbs("update", "patch").groups(core).resources("persistentvolumeclaims/status"),
			verbs(readVerbs...).groups(core).resources("pods", "nodes"),
			verbs(readVerbs...).groups(storageGroup).resources("storageclasses", "csinodes", "csidrivers"),
			eventsRule()),
		// One controller keeps both the pvc-protection and the pv-protection finalizers.
		controller("pvc-protection-controller",
			verbs("get", "list", "watch", "update", "patch").groups(core).resources("persistentvolumeclaims", "persistentvolumes"),
			verbs(readVerbs...).groups(core).resources("pods"),
			eventsRule()),
		controller("replicaset-controller",
			verbs("get", "list", "watch", "update").groups(appsGroup).resources("replicasets"),
			verbs("update").groups(appsGroup).resources("replicasets/status", "replicasets/finalizers"),
			verbs("create", "delete", "list", "patch", "watch").groups(core).resources("pods"),
			eventsRule()),
		controller("replication-controller",
			verbs("get", "list", "watch", "update").groups(core).resources("replicationcontrollers"),
			verbs("update").groups(core).resources("replicationcontrollers/status", "replicationcontrollers/finalizers"),
			verbs("create", "delete", "list", "patch", "watch").groups(core).resources("pods"),
			eventsRule()),
		controller("resourcequota-controller",
			verbs("list", "watch").groups("*").resources("*"),
			verbs("update").groups(core).resources("resourcequotas/status"),
			eventsRule()),
		controller("root-ca-cert-publisher",
			verbs("create", "update").groups(core).resources("configmaps"),
			eventsRule()),
		controller("service-account-controller",
			verbs("create").groups(core).resources("serviceaccounts"),
			eventsRule()),
		controller("snapshot-controller",
			verbs(readVerbs...).groups(core).resources("persistentvolumes", "persistentvolumeclaims"),
			verbs("update", "patch").groups(core).resources("persistentvolumeclaims"),
			verbs(readVerbs...).groups(storageGroup).resources("storageclasses"),
			verbs(readVerbs...).groups(snapshotGroup).resources("volumesnapshotclasses"),
			verbs("create", "get", "list", "watch", "update", "delete", "patch").groups(snapshotGroup).resources("volumesnapshotcontents"),
			verbs("patch", "update").groups(snapshotGroup).resources("volumesnapshotcontents/status"),
			verbs("get", "list", "watch", "update", "patch", "delete").groups(snapshotGroup).resources("volumesnapshots"),
			verbs("update", "patch").groups(snapshotGroup).resources("volumesnapshots/status"),
			eventsRule()),
		controller("statefulset-controller",
			verbs(readVerbs...).groups(appsGroup).resources("statefulsets"),
			verbs("update").groups(appsGroup).resources("statefulsets/status", "statefulsets/finalizers"),
			verbs("create", "delete", "get", "list", "patch", "update", "watch").groups(core).resources("pods"),
			verbs(readWrite...).groups(appsGroup).resources("controllerrevisions"),
			verbs("create", "get", "update", "delete").groups(core).resources("persistentvolumeclaims"),
			eventsRule()),
		controller("ttl-after-finished-controller",
			verbs("get", "list", "watch", "delete").groups(batchGroup).resources("jobs"),
			eventsRule()),
	}
}
