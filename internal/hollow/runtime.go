package hollow

import "github.com/kubelab/kubelab/internal/version"

// RuntimeName is the container runtime a hollow node reports, as containerd reports
// "containerd".
const RuntimeName = "hollow"

// ContainerIDPrefix starts the IDs of a hollow node's containers in pod status
// (containerStatuses[].containerID), as "containerd://" starts a real node's.
const ContainerIDPrefix = RuntimeName + "://"

// RuntimeVersion is a hollow node's node.status.nodeInfo.containerRuntimeVersion:
// "hollow://<kubelab version>".
func RuntimeVersion() string { return ContainerIDPrefix + version.Kubelab }
