// Package controllermanager is `kubelab controller-manager`: every controller of the
// cluster in one component on one shared informer factory, as kube-controller-manager
// runs them — the workload and cluster controllers (deployment, replicaset,
// statefulset, daemonset, garbage collector, namespace, nodeipam, nodelifecycle,
// endpoint, endpointslice, endpointslicemirroring, serviceaccount, root-ca-cert-publisher, resourcequota,
// pod garbage collector) and the
// storage controllers (persistentvolume-binder, pvc/pv-protection, attach/detach) plus
// the snapshot controller.
//
// New builds them all against an API server (each reaches it only through client-go);
// Run starts the informers once every controller has registered its own and runs them
// until the context ends. Writes carry the field manager kube-controller-manager.
package controllermanager
