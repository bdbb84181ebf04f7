// Package kuberuntime is the real kubelet's container runtime: it implements the
// kubelet's Runtime interface over CRI v1 (gRPC to the node's containerd). It is the last
// step of the flow "kubectl apply → … → the kubelet asks the CSI node plugin to
// stage/publish → the container runtime starts the container": once a pod's volumes are
// mounted, the kubelet calls SyncPod with their host paths, and the runtime makes the
// pod's sandbox and containers match the spec.
//
// SyncPod, on every sync of a pod:
//   - finds the pod's sandboxes and containers by the label io.kubernetes.pod.uid, and
//     removes old container instances (each container keeps its newest instance and the
//     newest exited one, which the status shows as the last termination);
//   - decides what to do (computePodActions, a pure function of the spec and what runs):
//     create the sandbox (again, with attempt+1, when its pause process died; with the
//     runtime handler of the pod's RuntimeClass, Config.RuntimeClasses — a class that does
//     not exist or a handler the runtime lacks fails it, FailedCreatePodSandBox), run the init
//     containers one at a time (sidecars — init containers with restartPolicy Always — start
//     in order and keep running), start the app containers, restart exited ones as the
//     restartPolicy says, recreate running ones whose spec hash (all of the container
//     but its resources) changed, resize running ones in place (resize.go), and stop the pod
//     when nothing of it is to run any more (a failed init container under restartPolicy
//     Never, or every app container done); ephemeral containers (ephemeral.go) are
//     started once in a running sandbox, never restarted, one with a target in that
//     container's process namespace;
//   - starts a container: waits out its restart back-off (10 s doubling to 300 s; status
//     Waiting CrashLoopBackOff meanwhile), makes its image present (ImageStatus, PullImage as
//     imagePullPolicy says, with each matching credential of the pod's imagePullSecrets in
//     turn (pullsecrets.go); ErrImagePull then ImagePullBackOff with a back-off per pod and
//     image; with Config.OfflineImages the message says the node's images come only from
//     kubelab's registry), builds its config (command and args with $(VAR) expanded, environment with the
//     downward API, ConfigMap/Secret references and Service variables, bind mounts of the
//     pod's volumes — those the kubelet writes (configMap, secret, downwardAPI, projected)
//     always read-only — of a termination-message file and of the pod's hosts file at /etc/hosts
//     (hosts.go: localhost lines, the pod's address with its hostname and FQDN, its
//     hostAliases; a host-network pod's is the node's with its hostAliases; none for a
//     container that mounts /etc/hosts itself), cgroup resources, security context, log path
//     <container>/<restartCount>.log under the pod's log directory) and creates and starts it;
//   - sets up the pod's image volumes (imagevolumes.go) before it starts containers: each
//     volume's image pulled as its pullPolicy says (the pod's pull secrets, back-off and
//     events as for a container's image, on the pod), then mounted read-only at
//     <root>/pods/<uid>/volumes/kubernetes.io~image/<volume> by Config.ImageVolumes (the
//     node's containerd 1.6 CRI cannot mount images itself); a container mounting a volume
//     that failed waits with the pull's reason (ErrImagePull, ImagePullBackOff) or
//     CreateContainerError ("ImageVolumeMountFailed: …", also for a subPath the image
//     lacks), the others start; KillPod unmounts them once the containers are gone;
//   - resizes a running container whose resources (the ones the kubelet allocated, in
//     the pod it is given) differ from those applied to it: with CRI
//     UpdateContainerResources (cpu shares, CFS quota, memory limit), or, when a resource
//     that changes has the resizePolicy RestartContainer, by stopping it ("Container x
//     resize requires restart") and starting it again at once with them; a failed update
//     is a kubelet.ResizeError. What it applied to each container's instance it keeps in
//     memory; a restarted runtime takes a running container whose cgroup settings are its
//     spec's as applied, and updates (never restarts) one whose are not. A container's
//     state carries its cgroup settings as quantities (from CRI ContainerStatus.resources,
//     which containerd reports, else those applied) and the resources applied;
//   - records the events the kubelet records (Pulling, Pulled, Created, Started, Killing,
//     BackOff, Failed, SandboxChanged, FailedCreatePodSandBox) and returns the containers'
//     states for the pod's status.
//
// Lifecycle hooks (hooks.go): a container's postStart hook (exec, httpGet or sleep) runs
// right after it started, and when it fails the container is killed
// (FailedPostStartHook) and waits with PostStartHookError; before a running container is
// stopped its preStop hook runs within the grace period (FailedPreStopHook when it
// fails), then StopContainer sends SIGTERM with what is left of it (at least 2 s) before
// SIGKILL.
//
// Probes (probe.go, netprobes.go) implement kubelet.ContainerProber: exec through CRI
// ExecSync within timeoutSeconds; httpGet, tcpSocket and grpc (grpc.health.v1) connect from
// inside the pod's network namespace (netns.go: the namespace containerd's verbose sandbox
// status names, joined by a locked thread for the time of the connect), since the node has
// no route to its pods' addresses. KillContainer stops one container for the kubelet when
// it failed its liveness or startup probe.
//
// KillPod stops a pod's containers and sandboxes and removes them; Relist gives the PLEG a
// fingerprint per pod; Ready reports the runtime's RuntimeReady and NetworkReady
// conditions.
//
// The package fakecri is an in-memory CRI for tests of this package and of the kubelet.
package kuberuntime
