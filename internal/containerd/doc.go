// Package containerd runs one containerd per real kubelab node: the container runtime at the
// end of the flow "kubectl apply → … → the kubelet asks the CSI node plugin to
// stage/publish → the container runtime starts the container". The node's kubelet speaks
// CRI v1 to it; containerd pulls images through kubelab's local registry, makes each pod's
// network namespace and calls CNI in it, and starts the containers with runc.
//
// Several instances run on one machine at once, one per node, each with its own
// directory (Config.Dir, e.g. <data-dir>/nodes/<node>/containerd):
//
//	config.toml       containerd's config, written at every start
//	root/             images, snapshots, metadata (kept across runs)
//	state/            task bundles, sandboxes, pods' network namespaces (state/
//	                  io.containerd.grpc.v1.cri/netns), runc's state (state/runc)
//	certs.d/          registry hosts: _default, docker.io and registry.k8s.io all point at
//	                  kubelab's registry (Config.RegistryAddr) over plain HTTP, the only
//	                  registry the node talks to
//	cni/net.d/        the CNI config dir (unless Config.CNIConfDir says otherwise)
//	opt/, tmp/        containerd's opt and temp dirs
//	containerd.pid    the containerd Run started
//	containerd.lock   held (flock) by the Run managing this Dir; a second Run fails
//	containerd.log    containerd's own log
//
// Its sockets are in a short directory of their own (Config.SocketDir), so that they fit
// in a unix socket address whatever Dir's length:
//
//	containerd.sock         gRPC (containerd API and CRI), the one Endpoint names
//	containerd.sock.ttrpc   ttrpc (the shims' events)
//
// Without a SocketDir they go to the run directory of Dir (rundir.For: /run/kubelab/<hash
// of Dir>), the same directory for the same Dir across restarts.
//
// The config keeps everything per instance: root, state, sockets, runc's root, the opt
// dir, network namespaces, CNI conf dir and registry hosts. The CRI plugin uses overlayfs
// and runc (io.containerd.runc.v2, cgroupfs: SystemdCgroup=false, as the kubelet's
// cgroupDriver must be); streaming listens on 127.0.0.1 on a random port; snapshotters
// that cannot work here and tracing are disabled. restrict_oom_score_adj is set only when
// kubelab lacks CAP_SYS_RESOURCE (some VMs and containers): then containerd may not lower
// oom_score_adj and runc would fail to start every sandbox.
//
// Contract:
//   - New checks the Config; Run cleans up after an earlier run, writes the config,
//     starts containerd in its own process group with SIGKILL as its parent-death signal,
//     and closes Ready once CRI Version and Status (RuntimeReady) answer. NetworkReady stays
//     false until a CNI config is in the conf dir.
//   - While ctx lives, Run restarts containerd whenever it exits, after a back-off
//     (0.5 s doubling to 30 s, reset once it ran a minute); containers keep running meanwhile
//     and the new containerd adopts them.
//   - When ctx ends, Run tears down: every pod sandbox is stopped (CNI DEL, network
//     namespace removed) and removed through CRI, containerd is stopped, and whatever is
//     left is removed by hand: runc containers of this instance, shims whose command line
//     carries -address <this socket>, mounts under root/ and state/, the sockets and the
//     pid file. Nothing of another instance is touched. Images stay in root/.
//   - After kubelab was killed (kill -9), the next Run ends the containerd named by the pid
//     file if it still runs with this instance's config; the containers and shims it left
//     are adopted by the new containerd, so the kubelet finds its pods again.
//
// Dial returns a CRI client (runtime and image services) for an endpoint, with containerd's
// own snapshots service on the same connection. Its ImageVolumes mounts pulled images for
// the kubelet's image volumes, as containerd 2.1's CRI does for a mount naming an image:
// a read-only View snapshot (overlayfs, namespace k8s.io) of the image's chain ID, keyed
// by the target directory, labelled containerd.io/gc.root and with the pod's UID, mounted
// there (a bind of the layer's directory for one layer, an overlay for more); the pod's
// views are found by that label, unmounted and removed when the pod goes.
package containerd
