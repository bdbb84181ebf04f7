// Package apiserver is kubelab's Kubernetes-compatible API server: the front door of every
// step of the flow (kubectl apply → API server → authn/authz/admission → etcd, and the
// watches that wake the controllers, the scheduler and the kubelets).
//
// It is built on k8s.io/apiserver, the library kube-apiserver and aggregated API servers
// are made of, so the wire is the real one: JSON, YAML and protobuf; watch with bookmarks
// and WatchList; every patch type and server-side apply with managedFields; field
// validation; tables; discovery and OpenAPI v2/v3; resourceVersion and pagination rules.
//
// What kubelab adds is the registry: one row per kind (resource.go; the rows are in
// core.go, apps.go, storage.go, networking.go, other.go) saying its names, scope, subresources, table
// columns and selectable fields, plus a few hooks for the kind's own rules. A generic
// strategy (strategy.go) applies the rules all kinds share. Kinds with behaviour beyond
// storage have a file each: pods.go (binding, eviction, graceful deletion),
// podstreams.go (log, exec, attach and portforward, proxied to the kubelet of the pod's
// node, reached as kubelet.go says), namespaces.go (two-step deletion, /finalize),
// services.go (the rules of Services), scale.go (/scale).
//
// Service ClusterIPs (Config.ServiceCIDR; its first host is the "kubernetes" Service's)
// and NodePorts (30000-32767) are reserved as etcd keys, one per value, on create and on
// every update that needs more (a change of type, added ports) and given back when a
// Service is deleted or an update drops them; a failed or dry-run request gives back
// what it reserved (serviceallocator.go, reservations.go). A repair loop reconciles the
// keys with the Services at start and every Config.ServiceRepairInterval
// (servicerepair.go). With Config.AdvertiseAddress the "kubernetes" Service, its
// Endpoints and its EndpointSlice point at that address (kubernetesservice.go), and the
// server serves on sockets handed to it (Config.ExtraListeners, Server.AddListener) as on
// its own.
//
// Kubelets are reached at https://<Node's InternalIP, else Hostname>:<Node's
// status.daemonEndpoints.kubeletEndpoint.port, 10250 when unset>, with the client
// certificate PKI.KubeletClientCert (user kube-apiserver-kubelet-client); the kubelet's
// serving certificate must be signed by the cluster CA and name the address
// (PKI.IssueKubeletServingCert makes one). WebSocket exec and attach (kubectl ≥1.30) are
// translated into SPDY and WebSocket-tunnelled port-forward (kubectl ≥1.31) is unwrapped,
// so kubelets only ever see SPDY upgrades.
//
// Contract: New(Config) validates; Run(ctx) serves HTTPS on the loopback address until ctx
// ends, authenticating x509 client certificates of the cluster CA (CN user, O groups) and
// bearer tokens, and writes the admin kubeconfig; Ready() closes once the built-in
// namespaces exist. Authorization allows every authenticated user for now (a seam for RBAC).
//
// Two process-level choices serve throughput (gc.go, certcache.go): Run sets the
// garbage collector's target to Config.GCPercent (DefaultGCPercent, 400, unless the GOGC
// environment variable is set) and Config.MemoryLimit when given, for the whole process;
// and a client certificate chain is verified once and then remembered until a
// certificate in it expires (refusals are never remembered).
package apiserver
