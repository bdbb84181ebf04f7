// Package kubelet is kubelab's kubelet, for real and hollow nodes: the node agent that
// turns a pod bound to its node into running containers, and the last steps of the
// storage flow (the kubelet sees the pod and its PVC → NodeStageVolume →
// NodePublishVolume → the kubelet starts the containers).
//
// What it does, as upstream's kubelet (and KWOK/kubemark hollow nodes) do:
//   - registers its Node: labels kubernetes.io/hostname, kubernetes.io/os=linux,
//     kubernetes.io/arch, topology.kubernetes.io/zone and /region,
//     topology.ebs.csi.aws.com/zone, node.kubernetes.io/instance-type; the annotations
//     csi.volume.kubernetes.io/nodeid and volumes.kubernetes.io/controller-managed-attach-detach;
//     providerID aws:///<zone>/<instance-id> (with Config.ExternalCloudProvider, as upstream's
//     --cloud-provider=external: the taint node.cloudprovider.kubernetes.io/uninitialized
//     and the annotation alpha.kubernetes.io/provided-node-ip instead of the zone, region,
//     instance-type labels and the providerID, which the cloud-controller-manager sets, as it
//     sets the addresses once the kubelet's first ones are there); capacity = allocatable (cpu, memory, pods,
//     ephemeral-storage), the Ready/MemoryPressure/DiskPressure/PIDPressure conditions,
//     addresses, nodeInfo.kubeletVersion and containerRuntimeVersion (the Runtime's
//     Version: CRI Version's "<runtimeName>://<runtimeVersion>", hollow://<kubelab
//     version> on a hollow node); the status is written when it changes (checked
//     every 10 s) and at least every 5 min;
//   - registers the CSI driver (ebs.csi.aws.com) in its CSINode: nodeID = the instance id,
//     topologyKeys, allocatable.count (in hollow mode at start; on real nodes the plugin
//     manager does it when the driver's registration socket appears);
//   - keeps a Lease in kube-node-lease, owned by the Node, renewed every 10 s;
//   - runs its pods (a workqueue of pod keys drained by internal/util/worker; sync is
//     idempotent): the volume manager
//     resolves each PVC to its CSI PV, reports the volume in node.status.volumesInUse, waits
//     for it to be reported and for the VolumeAttachment of (PV, node) to be attached when
//     the driver needs attach (no CSIDriver object or attachRequired) — claims, PVs and
//     attachments it gets by name and polls while it waits, for a kubelet may read only
//     those of its own pods and list none (the Node authorizer) — then stages it at
//     <root>/plugins/kubernetes.io/csi/pv/<pv>/globalmount and publishes it at
//     <root>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount through the Mounter, with
//     attachmentMetadata as the publish context; the Runtime starts the containers; the
//     pod goes Running and Ready with container statuses and an IP from the node's
//     podCIDR (when it has one);
//   - grows published volumes online (expand.go): when a claim it has published (looked at
//     every second) waits for
//     the node (FileSystemResizePending / NodeResizePending) and its PV is larger than the
//     claim's capacity, it expands through the Mounter (NodeExpandVolume), writes the new
//     capacity into the claim's status with the resize condition and status cleared, and
//     records FileSystemResizeSuccessful on the pod and the claim;
//   - completes deletions: on a deletionTimestamp it stops the containers, unpublishes and
//     (when no other pod uses the volume) unstages, drops the volume from volumesInUse,
//     reports a terminal phase and deletes the pod with grace 0.
//   - in real mode, writes the configMap, secret, downwardAPI and projected volumes of its
//     pods (configvolumes.go) under pods/<uid>/volumes/kubernetes.io~<plugin>/<volume> with
//     the atomic-writer layout (atomicwriter.go: a ..data symlink to a timestamped dir, a
//     symlink per top-level name), secret and projected volumes on a tmpfs unmounted at
//     teardown; a missing ConfigMap or Secret keeps the pod ContainerCreating with a
//     FailedMount event; Objects (objects.go) watches the ConfigMaps, Secrets and Services
//     of its pods' namespaces, syncs a pod again when one it references changes, and gives
//     the runtime the containers' ConfigMap/Secret references and Service variables
//     (serviceenv.go).
//   - in real mode, makes its pods' emptyDir volumes (emptydir.go) once, at
//     pods/<uid>/volumes/kubernetes.io~empty-dir/<volume>: a directory of mode 0777
//     (whatever the umask), or for medium Memory a tmpfs sized by the volume's sizeLimit,
//     the pod's memory limit or the node's allocatable memory, whichever is smallest; with
//     a fsGroup the directory is the group's and setgid. Tear down unmounts and removes them.
//   - in real mode, runs its containers' probes (prober.go, probeworker.go) when the Runtime
//     also implements ContainerProber: a worker per pod, container and probe (startup,
//     liveness, readiness) while the container instance runs, first at its start plus
//     initialDelaySeconds, then every periodSeconds; a verdict flips after
//     successThreshold/failureThreshold equal results in a row and syncs the pod again. The
//     startup probe holds back the other two; readiness makes the container's ready and the
//     pod's Ready and ContainersReady (so its endpoints follow); a liveness or startup
//     failure has the container killed (ContainerProber.KillContainer, with the probe's or
//     the pod's grace period) before the runtime syncs the pod, which restarts it as the
//     restartPolicy says. Failures are Unhealthy events ("Liveness probe failed: …").
//     Hollow nodes run no probes: their running containers are ready.
//   - admits each pod once before running it (admission.go), as upstream's NodePorts
//     predicate does: a pod one of whose hostPorts a pod admitted before holds (same
//     protocol and port, on the same hostIP or either on 0.0.0.0) and has not finished is
//     rejected — a NodePorts Warning event and the phase Failed, reason NodePorts,
//     "Pod was rejected: Predicate NodePorts failed: …"; a pod that already ran (before
//     this kubelet started) is admitted as it is;
//   - resizes pods in place (allocation.go, resize.go), as upstream's kubelet: it runs
//     each pod at the resources it allocated to it, its spec's when it first ran it,
//     kept in <root>/allocated_pods_state (hollow nodes: in memory); when a pod's spec
//     asks for others (pods/resize), it takes them if the node's allocatable covers them
//     next to its other active pods' allocations (ResizeStarted), else the pod keeps
//     what it had with the condition PodResizePending, reason Deferred ("Node didn't
//     have enough resource: cpu, requested: …, used: …, capacity: …", ResizeDeferred;
//     tried again when a pod leaves the node or gives up resources, and every 30 s) or
//     Infeasible ("Node didn't have enough capacity: …", ResizeInfeasible). The runtime
//     gets the pod at its allocated resources and applies them to the running
//     containers; PodResizeInProgress holds while a running container does not run with
//     them yet (reason Error with the runtime's message when it failed, ResizeError) and
//     goes when it does (ResizeCompleted). Each known container's status reports
//     allocatedResources (the allocated requests) and resources (the allocated ones, with
//     the cpu and memory limits and cpu request of a running container's cgroup as the
//     runtime reports them);
//   - stops a pod that has been active longer than its spec.activeDeadlineSeconds
//     (deadline.go; counted from status.startTime, and again when the field is set or
//     lowered on a running pod): a DeadlineExceeded event, its containers killed within
//     their grace period, the phase Failed with reason DeadlineExceeded ("Pod was active
//     on the node longer than the specified deadline");
//   - reports each pod's status as upstream's kubelet does (podstatus.go,
//     podconditions.go): the phase from the containers' states (Pending while
//     initializing, Failed when an init container fails under restartPolicy Never),
//     container statuses in spec order (a container not created yet waits with
//     PodInitializing in a pod with init containers, ContainerCreating otherwise; an init
//     container that exited 0 is ready), and the conditions Initialized
//     (ContainersNotInitialized, "containers with incomplete status: […]"; PodCompleted),
//     ContainersReady and Ready (ContainersNotReady, PodCompleted, PodFailed; Ready also
//     waits for the readiness gates) and PodReadyToStartContainers;
//   - leaves mirror pods (annotation kubernetes.io/config.mirror) alone: they are the API's
//     view of pods something else runs on the node;
//   - in hollow mode, gives pods IPs from the node's podCIDR (a FailedCreatePodSandBox
//     event when it is full, as a real node's CNI plugin fails), and its fake mounter, which
//     stands in for the node's CSI plugin, logs each call as the plugin would
//     (Deps.NodePluginLogger); a hollow kubelet's Summary API answer (HollowSummary, which
//     its server serves as /stats/summary) has its running containers use what their
//     pods' hollow usage annotations say (internal/hollow).
//
// Metrics and ProbeMetrics (metrics.go) are what its server serves at /metrics and
// /metrics/probes, under upstream's names: kubelet_node_name, kubelet_running_pods (pods
// whose sandbox runs), kubelet_running_containers by container_state (the runtime's
// instances of those pods' containers as the kubelet last saw them: each current one, and
// the previous one kept as the last termination), kubelet_desired_pods; prober_probe_total
// by probe_type and result (successful, failed, unknown for a probe that could not be
// run) and prober_probe_duration_seconds, dropped when the pod's probes stop.
//
// The Runtime (CRI) and Mounter (CSI node calls) are injected interfaces; hollow mode uses
// fakes that touch nothing on the machine. It talks to the API server only through
// client-go.
package kubelet
