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
// core.go, replicationcontrollers.go, apps.go, batch.go, autoscaling.go, policy.go,
// storage.go, networking.go, scheduling.go, certificates.go, flowcontrol.go,
// apiregistration.go, admissionregistration.go, discovery.go, coordination.go,
// events.go, rbac.go, snapshots.go: one file per API group) saying its names, scope,
// subresources, table columns and selectable fields, plus a few hooks for the kind's own
// rules (a core kind's validation in <kind>_rules.go, e.g. pods_rules.go; the checks
// kinds share in rules.go). A generic strategy (strategy.go) applies the rules all kinds share. A kind
// served in two versions (HorizontalPodAutoscaler: autoscaling/v2 and v1) has one store,
// converted through the scheme. CustomResourceDefinitions and custom resources are
// served by k8s.io/apiextensions-apiserver as the delegate behind this server
// (customresources.go); this server's discovery lists their groups, and its /openapi/v2
// and /openapi/v3 describe them (each established CRD's served versions from its
// schema). Kinds with behaviour beyond storage have a file each: pods.go
// (binding, graceful deletion), eviction.go (pods/eviction, honouring
// PodDisruptionBudgets),
// podstreams.go (log, exec, attach and portforward, proxied to the kubelet of the pod's
// node, reached as kubelet.go says), proxy.go (the proxy subresources: any HTTP request
// to a pod or a Service's endpoint through the cluster network, Config.ClusterDial, or
// to a node's kubelet), aggregator.go (API aggregation: the group versions of
// APIServices that name a Service are passed on to that Service's server, with the
// front-proxy certificate of frontproxypki.go and the user in X-Remote-* headers, as
// the ConfigMap kube-system/extension-apiserver-authentication of
// authenticationtrust.go says; their groups in discovery, their Available condition
// kept by kube-aggregator's controllers),
// namespaces.go (two-step deletion, /finalize),
// services.go (the rules of Services), scale.go (/scale), serviceaccounttoken.go
// (serviceaccounts/token: TokenRequest, signed and checked by package
// auth/serviceaccount with the PKI's sa.key and sa.pub), openid.go (the issuer's OpenID
// Connect discovery document and key set).
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
// ends and writes the admin kubeconfig; Ready() closes once the bootstrap RBAC policy and
// the built-in namespaces exist. Every request is authenticated (x509 client
// certificates of the cluster CA with CN user and O groups, bearer tokens; anonymous
// only on /healthz, /livez, /readyz and /version, 401 elsewhere), authorized (the group
// system:masters, then the Node authorizer, then RBAC: package auth; 403 when none
// allows) and passed through the admission chain (package admission) before it
// reaches etcd. The review APIs (reviews.go) answer kubectl's auth whoami and auth
// can-i. Components get their own identities from PKI.ClientCert (identity.go).
//
// etcd is reached over TLS when Config.EtcdCAFile, EtcdCertFile and EtcdKeyFile are set
// (etcdclient.go), by the storage and by the Service allocations alike; the embedded
// etcd's certificates are made by PKI.EnsureEtcd (etcdpki.go) before it starts. Limits
// (limits.go): 400 read-only and 200 mutating requests in flight (429 beyond), request
// bodies of 3 MiB (413), ConfigMap and Secret values of 1 MiB (422), and objects larger
// than etcd's 1.5 MiB request limit get 413 naming it rather than a 500.
//
// Two process-level choices serve throughput (gc.go, certcache.go): Run sets the
// garbage collector's target to Config.GCPercent and Config.MemoryLimit when given, for
// the whole process; unless GOGC is set the target follows the live heap after every
// collection, DefaultGCPercent (400) for a small heap and falling to MinTunedGCPercent so
// that the garbage beyond the live heap stays near GCHeadroom (512 MiB);
// and a client certificate chain is verified once and then remembered until a
// certificate in it expires (refusals are never remembered).
package apiserver
