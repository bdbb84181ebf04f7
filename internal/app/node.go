package app

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/containerd"
	"github.com/kubelab/kubelab/internal/util/netns"
	"github.com/kubelab/kubelab/internal/vpc"
)

// newNodeCommand is `kubelab node`: a look at a real node as if logged into it.
func newNodeCommand() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Look at a real node: a shell in its directories, its containerd's pods and containers",
	}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", DefaultDataDir, "data dir of the cluster")
	shell := &cobra.Command{
		Use:   "shell NODE [-- COMMAND [ARG...]]",
		Short: "Open a shell as on NODE: in its network namespace and kubelet root dir, with its containerd as the CRI endpoint",
		Long: `Open a shell (or run COMMAND) as on NODE: in the node's network namespace (eth0 on the
VPC with the node's private IP, the pod bridge cni0 and the overlay device (with --pod-network
vpc: the ENIs eth1…, the pods' eni… veths and their rules), the node's nftables
rules, and the instance metadata service at 169.254.169.254), the working directory the node's
kubelet root (plugins_registry/ and plugins/<driver>/csi.sock, links to the node's socket
dirs under /run/kubelab, plugins/kubernetes.io/csi/pv/<pv>/globalmount,
pods/<uid>/volumes/...), and the environment
naming its containerd: CONTAINER_RUNTIME_ENDPOINT and IMAGE_SERVICE_ENDPOINT (as crictl reads
them) and CONTAINERD_ADDRESS with CONTAINERD_NAMESPACE=k8s.io (as ctr reads them). As on an
EC2 instance, the aws CLI works there without an endpoint: the node's /etc/hosts (in a
mount namespace of the shell's own) names ec2.<region>.amazonaws.com at the EC2 API's VPC
endpoint, and AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE and AWS_CA_BUNDLE name the
cloud's client files and the cluster CA, so that
  aws ec2 describe-volumes --volume-ids vol-…
asks the cluster's cloud.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := openNode(dataDir, args[0])
			if err != nil {
				return err
			}
			argv := args[1:]
			if len(argv) == 0 {
				sh := os.Getenv("SHELL")
				if sh == "" {
					sh = "/bin/sh"
				}
				argv = []string{sh}
				netns := n.netns
				if netns == "" {
					netns = "none (kubelab up is not running)"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "node %s\n  network:      %s (ip addr, ip route, nft list ruleset)\n  kubelet root: %s\n  containerd:   %s\n  pods:         kubelab node ps %s\n  mounts:       findmnt -R %s\n  containers:   ctr containers ls\n",
					n.name, netns, n.kubeletRoot, n.endpoint, n.name, n.kubeletRoot)
			}
			c := exec.CommandContext(cmd.Context(), argv[0], argv[1:]...)
			if n.hosts != "" {
				// A mount namespace of its own (Go makes its mounts private before the
				// command runs, so nothing reaches the machine's), where the node's hosts
				// file is /etc/hosts.
				c = exec.CommandContext(cmd.Context(), "sh", append([]string{"-c", `mount --bind "$0" /etc/hosts && exec "$@"`, n.hosts}, argv...)...)
				c.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
			}
			c.Dir = n.kubeletRoot
			sock := strings.TrimPrefix(n.endpoint, "unix://")
			env := os.Environ()
			if len(n.awsEnv) > 0 {
				env = environWithout("AWS_")
			}
			c.Env = append(env, "KUBELAB_NODE="+n.name, "KUBELET_ROOT_DIR="+n.kubeletRoot,
				"CONTAINER_RUNTIME_ENDPOINT="+n.endpoint, "IMAGE_SERVICE_ENDPOINT="+n.endpoint,
				"CONTAINERD_ADDRESS="+sock, "CONTAINERD_NAMESPACE=k8s.io", "PS1=["+n.name+"] \\w# ")
			c.Env = append(c.Env, n.awsEnv...)
			c.Stdin, c.Stdout, c.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			// Started from a thread inside the node's namespace, the command is in it too.
			if err := netns.Do(n.netns, c.Start); err != nil {
				return err
			}
			return c.Wait()
		},
	}
	ps := &cobra.Command{
		Use:   "ps NODE",
		Short: "List NODE's pod sandboxes and containers, from its containerd over CRI",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := openNode(dataDir, args[0])
			if err != nil {
				return err
			}
			return listNode(cmd.Context(), cmd, n)
		},
	}
	cmd.AddCommand(shell, ps)
	return cmd
}

// environWithout is this process's environment without the variables that start with
// prefix (the user's own AWS settings would win over the node's).
func environWithout(prefix string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, prefix) {
			env = append(env, kv)
		}
	}
	return env
}

// nodeDirs are where a real node's parts are on this machine.
type nodeDirs struct {
	name, kubeletRoot, endpoint string
	netns                       string // "" while the node has none (kubelab up not running)
	// hosts is the node's hosts file ("" when there is none); awsEnv the environment that
	// points the aws CLI at the cluster's cloud.
	hosts  string
	awsEnv []string
}

// openNode finds node name of the cluster on dataDir.
func openNode(dataDir, name string) (nodeDirs, error) {
	dataDir, err := filepath.Abs(dataDir) // as kubelab up has it, wherever this runs
	if err != nil {
		return nodeDirs{}, err
	}
	dir := filepath.Join(dataDir, "nodes", name)
	if _, err := os.Stat(filepath.Join(dir, "kubelet")); err != nil {
		entries, _ := os.ReadDir(filepath.Join(dataDir, "nodes"))
		var names []string
		for _, e := range entries {
			if _, err := os.Stat(filepath.Join(dataDir, "nodes", e.Name(), "kubelet")); err == nil {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		return nodeDirs{}, fmt.Errorf("node %q: no real node of that name on data dir %s (nodes: %s)", name, dataDir, strings.Join(names, ", "))
	}
	ctrd, err := containerd.New(containerd.Config{Name: name, Dir: filepath.Join(dir, "containerd"),
		SocketDir: cluster.NodeContainerdSocketDir(dataDir, name)})
	if err != nil {
		return nodeDirs{}, err
	}
	out := nodeDirs{name: name, kubeletRoot: filepath.Join(dir, "kubelet"), endpoint: ctrd.Endpoint()}
	v, err := vpc.New(vpc.Config{DataDir: dataDir})
	if err != nil {
		return nodeDirs{}, err
	}
	if _, err := os.Stat(v.NodePath(name)); err == nil {
		out.netns = v.NodePath(name)
	}
	if _, err := os.Stat(filepath.Join(dir, "hosts")); err == nil && out.netns != "" {
		out.hosts = filepath.Join(dir, "hosts")
		out.awsEnv = []string{"AWS_CONFIG_FILE=" + filepath.Join(dataDir, "cloud", "aws-config"),
			"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dataDir, "cloud", "aws-credentials"),
			"AWS_CA_BUNDLE=" + filepath.Join(dataDir, "pki", "ca.crt")}
	}
	return out, nil
}

// listNode prints the node's sandboxes and containers.
func listNode(ctx context.Context, cmd *cobra.Command, n nodeDirs) error {
	cri, err := containerd.Dial(n.endpoint)
	if err != nil {
		return err
	}
	defer cri.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sandboxes, err := cri.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("node %s: list pod sandboxes (is kubelab up running?): %w", n.name, err)
	}
	containers, err := cri.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return fmt.Errorf("node %s: list containers: %w", n.name, err)
	}
	pods := map[string]string{}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "POD SANDBOX\tSTATE\tPOD\tCREATED")
	for _, s := range sandboxes.Items {
		name := s.Metadata.Namespace + "/" + s.Metadata.Name
		pods[s.Id] = name
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", short(s.Id), strings.TrimPrefix(s.State.String(), "SANDBOX_"), name, time.Unix(0, s.CreatedAt).Format(time.RFC3339))
	}
	fmt.Fprintln(w, "\nCONTAINER\tSTATE\tNAME\tATTEMPT\tPOD\tIMAGE")
	for _, c := range containers.Containers {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", short(c.Id), strings.TrimPrefix(c.State.String(), "CONTAINER_"), c.Metadata.Name,
			c.Metadata.Attempt, pods[c.PodSandboxId], c.Image.GetImage())
	}
	return w.Flush()
}

func short(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}
