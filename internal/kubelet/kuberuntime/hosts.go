package kuberuntime

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// etcHostsPath is the hosts file of the node, and where containers see theirs.
	etcHostsPath = "/etc/hosts"
	// hostsFileName is the pod's hosts file in its directory under the kubelet root.
	hostsFileName = "etc-hosts"
	// The first line of the hosts files the kubelet writes, for pods on the pod network
	// and for host-network pods.
	managedHostsHeader            = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
	// maxHostnameLen is the longest hostname the kernel takes.
	maxHostnameLen = 63
)

// podHostname is the pod's hostname and, when it has a subdomain, its domain: the
// hostnameOverride when set (and then no domain), else spec.hostname or the pod's name,
// cut to 63 characters without a trailing '-' or '.'; the domain is
// <subdomain>.<namespace>.svc.<clusterDomain>.
func podHostname(pod *corev1.Pod, clusterDomain string) (hostname, domain string) {
	if o := pod.Spec.HostnameOverride; o != nil && *o != "" {
		return truncateHostname(*o), ""
	}
	hostname = pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	if pod.Spec.Subdomain != "" {
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, clusterDomain)
	}
	return truncateHostname(hostname), domain
}

func truncateHostname(h string) string {
	if len(h) <= maxHostnameLen {
		return h
	}
	return strings.TrimRight(h[:maxHostnameLen], "-.")
}

// managedHostsContent is the hosts file of a pod on the pod network: the header, the
// localhost and IPv6 lines, a line per pod IP naming the pod (its FQDN first when it has
// a domain), then the pod's hostAliases.
func managedHostsContent(podIPs []string, hostname, domain string, aliases []corev1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range podIPs {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	b.Write(hostAliasesEntries(aliases))
	return b.Bytes()
}

// hostNetworkHostsContent is the hosts file of a host-network pod: the header, the
// node's hosts file as it is, then the pod's hostAliases.
func hostNetworkHostsContent(node []byte, aliases []corev1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeaderHostNetwork)
	b.Write(node)
	b.Write(hostAliasesEntries(aliases))
	return b.Bytes()
}

// hostAliasesEntries is the hostAliases section: a blank line, a comment, and a line per
// alias with its hostnames separated by tabs; nothing without aliases.
func hostAliasesEntries(aliases []corev1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}

// mountsHostsFile says whether the kubelet gives container c its /etc/hosts: a pod on
// the pod network once it has an address, or a host-network pod, unless c mounts
// something at /etc/hosts itself.
func mountsHostsFile(pod *corev1.Pod, c *corev1.Container, podIP string) bool {
	if podIP == "" && !pod.Spec.HostNetwork {
		return false
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == etcHostsPath {
			return false
		}
	}
	return true
}

// hostsInput is what the pod's hosts file is made from beyond its spec.
type hostsInput struct {
	hostname, domain string
	// nodeHostsFile is the node's hosts file, which host-network pods get.
	nodeHostsFile string
}

// hostsMount writes the pod's hosts file to <podDir>/etc-hosts (mode 0644, anew at each
// container start, as the pod's address may have changed) and returns its bind mount at
// /etc/hosts.
func hostsMount(pod *corev1.Pod, podDir, podIP string, in hostsInput) (*runtimeapi.Mount, error) {
	var content []byte
	if pod.Spec.HostNetwork {
		node, err := os.ReadFile(in.nodeHostsFile)
		if err != nil {
			return nil, fmt.Errorf("read the node's hosts file: %w", err)
		}
		content = hostNetworkHostsContent(node, pod.Spec.HostAliases)
	} else {
		content = managedHostsContent([]string{podIP}, in.hostname, in.domain, pod.Spec.HostAliases)
	}
	if err := os.MkdirAll(podDir, 0o750); err != nil {
		return nil, fmt.Errorf("pod dir: %w", err)
	}
	path := filepath.Join(podDir, hostsFileName)
	if err := os.WriteFile(path, content, 0o644); err != nil {
		return nil, fmt.Errorf("write hosts file: %w", err)
	}
	// WriteFile's mode is cut by the umask, and not applied to a file that exists.
	if err := os.Chmod(path, 0o644); err != nil {
		return nil, fmt.Errorf("write hosts file: %w", err)
	}
	return &runtimeapi.Mount{HostPath: path, ContainerPath: etcHostsPath}, nil
}
