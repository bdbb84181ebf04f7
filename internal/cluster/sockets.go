package cluster

import (
	"fmt"
	"path/filepath"

	"github.com/kubelab/kubelab/internal/util/rundir"
)

// The cluster's unix sockets are in its run directory (rundir.For of the data dir, e.g.
// /run/kubelab/3f2a9c1b), never under the data dir, so that they fit in a unix socket
// address whatever the data dir's length:
//
//	csi/controller.sock                               the in-process CSI controller plugin
//	<node>/containerd/containerd.sock(.ttrpc)         the node's containerd
//	<node>/plugins_registry/<driver>-reg.sock         plugin registration sockets
//	<node>/plugins/ebs.csi.aws.com/csi.sock           the EBS CSI node plugin
//
// The node's kubelet root keeps its usual layout: its plugins_registry and
// plugins/ebs.csi.aws.com are links to the node's directories here, and everything else
// (plugins/kubernetes.io/csi/…, pods/<uid>/volumes/…) stays under the data dir. The run
// directory goes when the cluster stops; the next start on the data dir makes it again.

// runDir is the cluster's run directory.
func (c *Cluster) runDir() string { return rundir.For(c.cfg.DataDir) }

// nodeRunDir is the directory of node n's sockets.
func (c *Cluster) nodeRunDir(n Node) string { return nodeRunDir(c.cfg.DataDir, n.Name) }

func nodeRunDir(dataDir, node string) string { return filepath.Join(rundir.For(dataDir), node) }

// NodeContainerdSocketDir is where the containerd of node node of the cluster at dataDir
// has its sockets.
func NodeContainerdSocketDir(dataDir, node string) string {
	return filepath.Join(nodeRunDir(dataDir, node), "containerd")
}

// nodeCSISocket is the EBS CSI node plugin's socket on node n, as the kubelet dials it.
func (c *Cluster) nodeCSISocket(n Node) string {
	return filepath.Join(c.nodeRunDir(n), "plugins", DriverName, "csi.sock")
}

// nodeRegistrationDir is where node n's plugins put their registration sockets.
func (c *Cluster) nodeRegistrationDir(n Node) string {
	return filepath.Join(c.nodeRunDir(n), "plugins_registry")
}

// linkSocketDirs makes node n's socket directories and links its kubelet root's
// plugins_registry and plugins/ebs.csi.aws.com to them.
func (c *Cluster) linkSocketDirs(n Node) error {
	root := c.kubeletRoot(n)
	for link, target := range map[string]string{
		filepath.Join(root, "plugins_registry"):    c.nodeRegistrationDir(n),
		filepath.Join(root, "plugins", DriverName): filepath.Dir(c.nodeCSISocket(n)),
	} {
		if err := rundir.Link(link, target); err != nil {
			return fmt.Errorf("cluster: node %s: %w", n.Name, err)
		}
	}
	return nil
}
