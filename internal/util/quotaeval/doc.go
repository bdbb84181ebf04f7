// Package quotaeval measures what objects take from a ResourceQuota: the quota
// evaluators of the request path's ResourceQuota admission (which refuses a create that
// would take status.used past status.hard) and of the controller-manager's
// resourcequota controller (which recomputes status.used), so both count alike.
//
// Evaluators measure usage per kind: pods (pods, count/pods, cpu, memory, requests.*
// and limits.* of cpu, memory and ephemeral-storage, hugepages-<size> and
// requests.hugepages-<size>, requests.<extended resource>; terminal pods count only in
// count/pods; scopes Terminating, NotTerminating, BestEffort, NotBestEffort,
// PriorityClass, CrossNamespacePodAffinity), services (services, services.nodeports,
// services.loadbalancers), persistentvolumeclaims (persistentvolumeclaims,
// requests.storage and their <class>.storageclass.storage.k8s.io/ forms), and object
// counts (configmaps, secrets, resourcequotas, replicationcontrollers, each also under
// count/<resource>). EvaluatedResources are those kinds;
// CountedResource resolves a count/<resource>.<group> name to the kind it counts;
// IgnoredResources are never charged.
//
// It is a leaf: it imports no component, so the API server and the controller-manager
// share it without importing each other. The evaluators are pure and tested directly.
package quotaeval
