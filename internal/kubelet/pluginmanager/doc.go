// Package pluginmanager is the kubelet's plugin manager: the plugin watcher of the node's
// plugins_registry directory, the registration handler of CSI plugins and the CSI node
// calls the kubelet's volume manager makes over a registered driver's socket.
//
// It implements two steps of the flow "kubectl apply → … → kubelet asks the CSI node
// plugin to stage/publish → the container runtime starts the container":
//
//   - registration of the CSI node plugin: the node-driver-registrar serves
//     <root>/plugins_registry/<driver>-reg.sock; the Manager finds it (fsnotify plus a scan
//     at start, in the directory plugins_registry links to when it is a link; names
//     starting with "." and files that are not sockets are skipped), calls
//     GetInfo (k8s.io/kubelet pluginregistration v1), checks the plugin type (CSIPlugin;
//     others are refused) and that supported_versions holds a 1.x version, then asks the
//     driver's own socket (the endpoint of GetInfo) NodeGetInfo and NodeGetCapabilities.
//     From the answer it writes the Node's csi.volume.kubernetes.io/nodeid annotation (a
//     JSON map driver → node id, merged with other drivers'), the topology labels of
//     AccessibleTopology, and the driver's entry in the CSINode named after the node
//     (created when missing, owned by the Node): nodeID, sorted topologyKeys and
//     allocatable.count when MaxVolumesPerNode > 0. Then it reports the outcome with
//     NotifyRegistrationStatus. A failed registration is reported and retried with
//     back-off while the socket exists; an unknown type or unsupported versions are
//     reported once. When the socket goes, the driver's CSINode entry and annotation key
//     are removed (its topology labels stay). A new socket of a registered driver (after
//     a restart) registers it again and updates its entry;
//   - the CSI node calls: CSIMounter implements kubelet.Mounter with NodeStageVolume
//     (only for drivers with STAGE_UNSTAGE_VOLUME), NodePublishVolume,
//     NodeUnpublishVolume, NodeUnstageVolume and NodeExpandVolume over one gRPC
//     connection per registered driver. It creates the parents of the staging and target
//     paths (the driver makes the mount points) and writes vol_data.json beside them, so
//     a restarted kubelet can tell which volume a directory holds; unstage and unpublish
//     remove them again.
//
// Contract: New(cfg, client) checks the config; Run(ctx), called once, watches the
// directory itself (not its subdirectories) until ctx ends; the driver entries stay in
// the API then, for the kubelet's next run to find; Ready is
// closed after the first scan; Endpoint and WaitFor tell callers about registered
// drivers. CSIMounter's calls fail with an error matching ErrNotRegistered while the
// volume's driver is not registered, and wrap the driver's gRPC errors, whose status
// codes stay readable with status.Code.
package pluginmanager
