// Command kubelab-cni is the CNI plugin of kubelab's real nodes: each node's containerd
// runs it from the node's CNI bin dir to give a pod its interface and address.
package main

import "github.com/kubelab/kubelab/internal/cni/plugin"

func main() { plugin.Main() }
