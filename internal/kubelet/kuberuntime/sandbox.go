package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podLogDir is the pod's log directory: <PodLogsDir>/<namespace>_<name>_<uid>.
func (r *Runtime) podLogDir(pod *corev1.Pod) string {
	return filepath.Join(r.cfg.PodLogsDir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
}

// podDir is the pod's directory under the kubelet root.
func (r *Runtime) podDir(uid types.UID) string {
	return filepath.Join(r.cfg.RootDir, "pods", string(uid))
}

// podCgroup is the pod's cgroup (relative to each hierarchy's root), "" when the runtime
// chooses.
func (r *Runtime) podCgroup(uid types.UID) string {
	if r.cfg.CgroupParent == "" {
		return ""
	}
	return path.Join(r.cfg.CgroupParent, "pod"+string(uid))
}

// sandboxConfig is the CRI config of the pod's sandbox.
func (r *Runtime) sandboxConfig(pod *corev1.Pod, attempt uint32) *runtimeapi.PodSandboxConfig {
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt},
		LogDirectory: r.podLogDir(pod),
		Labels:       sandboxLabels(pod),
		Annotations:  map[string]string{},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent:    r.podCgroup(pod.UID),
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: namespaceOptions(pod)},
		},
		DnsConfig: r.podDNS(pod),
	}
	for k, v := range pod.Annotations {
		cfg.Annotations[k] = v
	}
	if !pod.Spec.HostNetwork {
		// Host-network pods share the node's hostname.
		cfg.Hostname, _ = podHostname(pod, r.cfg.ClusterDomain)
	}
	sc := cfg.Linux.SecurityContext
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
		sc.Seccomp = seccompProfile(psc.SeccompProfile)
		if len(psc.Sysctls) > 0 {
			cfg.Linux.Sysctls = map[string]string{}
			for _, s := range psc.Sysctls {
				cfg.Linux.Sysctls[strings.ReplaceAll(s.Name, "/", ".")] = s.Value
			}
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
				sc.Privileged = true
			}
			for _, p := range c.Ports {
				if p.HostPort == 0 {
					continue
				}
				cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{Protocol: protocol(p.Protocol),
					ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP})
			}
		}
	}
	return cfg
}

func protocol(p corev1.Protocol) runtimeapi.Protocol {
	switch p {
	case corev1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case corev1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

// createSandbox runs the pod's sandbox with the runtime handler and returns its id and
// address.
func (r *Runtime) createSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, string, error) {
	if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
		return "", "", fmt.Errorf("create pod log directory: %w", err)
	}
	resp, err := r.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
	if err != nil {
		return "", "", err
	}
	id := resp.GetPodSandboxId()
	st, err := r.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		return id, "", fmt.Errorf("status of new sandbox %s: %w", id, err)
	}
	if st.GetStatus() == nil {
		return id, "", errPodSandboxStatusMissing
	}
	return id, st.GetStatus().GetNetwork().GetIp(), nil
}

// runtimeHandler is the runtime handler of the RuntimeClass the pod names ("" for none,
// the runtime's default); a class that does not exist is an error, which fails the
// sandbox.
func (r *Runtime) runtimeHandler(ctx context.Context, pod *corev1.Pod) (string, error) {
	name := pod.Spec.RuntimeClassName
	if name == nil || *name == "" || r.cfg.RuntimeClasses == nil {
		return "", nil
	}
	return r.cfg.RuntimeClasses.Handler(ctx, *name)
}

// removePodCgroup removes the pod's cgroup directory from every cgroup hierarchy once the
// runtime removed the containers' cgroups inside it. Directories that are gone or still
// in use are left to a later call.
func (r *Runtime) removePodCgroup(uid types.UID) error {
	cg := r.podCgroup(uid)
	if cg == "" {
		return nil
	}
	roots, err := cgroupRoots()
	if err != nil {
		return err
	}
	var errs []error
	for _, root := range roots {
		dir := filepath.Join(root, cg)
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cgroupRoots are the mount points of the cgroup hierarchies (v1 and v2).
func cgroupRoots() ([]string, error) {
	ms, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Mountpoint)
	}
	return out, nil
}
