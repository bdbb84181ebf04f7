// Package server is the kubelet's HTTPS server: what `kubectl logs`, `kubectl exec`,
// `kubectl attach` and `kubectl port-forward` reach through the API server once "kubectl
// apply → … → the container runtime starts the container" has a container running on a
// real node. The API server proxies the pods' log, exec, attach and portforward
// subresources to https://<node address>:<kubelet port>/… with its kubelet client
// certificate; this server answers:
//
//	GET      /containerLogs/{namespace}/{pod}/{container}
//	         ?follow&previous&timestamps&sinceSeconds&sinceTime&tailLines&limitBytes&stream
//	GET+POST /exec/{namespace}/{pod}[/{uid}]/{container}?command=…&input&output&error&tty
//	GET+POST /attach/{namespace}/{pod}[/{uid}]/{container}?input&output&error&tty
//	GET+POST /portForward/{namespace}/{pod}[/{uid}]
//	GET      /stats/summary
//	GET      /metrics, /metrics/probes, /metrics/resource, /metrics/cadvisor
//	GET      /pods
//	GET      /logs/[path]
//	GET      /healthz
//
// /stats/summary is the Summary API (k8s.io/kubelet/pkg/apis/stats/v1alpha1) the API
// server's metrics.k8s.io reads: a pod per ready sandbox with its running containers'
// CPU (usageNanoCores, usageCoreNanoSeconds) and memory (workingSetBytes), from the
// runtime's CRI ListContainerStats and ListPodSandboxStats. Once it has been asked for,
// the server samples those stats every 10s, so CPU rates span about that long: the
// runtime's (containerd rates each sample against the previous one, and reports 0 for a
// container's first), or, when the runtime leaves them out, the server's own from the
// cumulative usage of two samples (none for a first sample). A pod's figures are its
// sandbox's stats (the sum of its containers' when the runtime has none); the node's are
// the sum of its pods' (the kubelet reads no machine-wide counters). A hollow node's
// server answers it from Config.Summary instead: the hollow kubelet's fake runtime's
// usage (internal/hollow), so the API server reads every node's usage the same way.
//
// The metrics paths answer the Prometheus text format (metrics.go): /metrics and
// /metrics/probes what the kubelet's registries gather (Config.Metrics, ProbeMetrics);
// /metrics/resource upstream's resource metrics of the same summary /stats/summary
// answers (node_cpu_usage_seconds_total, node_memory_working_set_bytes, pod_… and
// container_cpu_usage_seconds_total, container_memory_working_set_bytes,
// container_start_time_seconds, resource_scrape_error), each sample stamped with its
// time; /metrics/cadvisor cAdvisor's names for the same stats, a series per container and
// per pod (container=""): container_cpu_usage_seconds_total{cpu="total"},
// container_memory_working_set_bytes, _usage_bytes, container_memory_rss,
// container_start_time_seconds. kubelab runs no cAdvisor: what neither the runtime's
// stats nor the kubelet has (machine_*, file systems, network, the id and image labels)
// is not there.
//
// /pods is the node's pods as the kubelet knows them (Config.PodList), a v1 PodList.
// /logs/ is the node's log directory as a file server (a kubelet serves its node's
// /var/log): pods/ holds the pod log directories of Config.PodLogsDir.
//
// Logs are read from the CRI log file the container runtime writes (the path CRI
// ContainerStatus reports, else <PodLogsDir>/<namespace>_<pod>_<uid>/<container>/
// <restartCount>.log): one "<RFC3339Nano time> <stdout|stderr> <P|F> <text>" record a line,
// P marking a part of a longer line. Which container instance is read follows the pod's
// status: the running one, else the last terminated one; previous=true reads the one
// before (lastState.terminated). follow=true keeps reading as the file grows until the
// container is no longer running or the request ends.
//
// Exec, attach and port-forward are not served here: the server asks the runtime (CRI
// Exec, Attach, PortForward) for a one-shot URL on the runtime's streaming server
// (containerd's, on 127.0.0.1) and proxies the client's upgraded connection (SPDY, or a
// WebSocket protocol the runtime speaks) to it.
//
// Contract: New checks the Config; Run listens on Config.Addr with TLS (the node's serving
// certificate), serves only clients presenting a certificate signed by Config.ClientCAFile
// (the API server's kubelet client certificate), closes Ready once it listens (Addr is
// then the address it listens on) and serves until ctx ends. Errors of the log endpoint
// are plain text (the API server wraps them into its own Status); errors of the streaming
// endpoints are metav1.Status JSON, which the API server passes on to the client as is:
// 404 for an unknown pod or container, 400 for a bad query or a container that is not
// running.
package server
