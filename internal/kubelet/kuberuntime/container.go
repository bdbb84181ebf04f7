package kuberuntime

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"

	"github.com/kubelab/kubelab/internal/kubelet"
	"github.com/kubelab/kubelab/internal/util/podutil"
)

// containerInput is what a container's config is made from beyond its spec.
type containerInput struct {
	ctype        containerType
	restartCount uint32
	imageRef     string
	env          envInput
	hosts        hostsInput
	volumes      kubelet.PodVolumes
	// imageVolumes are the pod's image volumes set up for this sync (their host paths are
	// in volumes).
	imageVolumes map[string]imageVolume
	// podDir is the pod's dir under the kubelet root (termination-message files).
	podDir     string
	nodeMemory int64
}

// containerConfig is the CRI config of a new instance of c. Its errors are the pod's
// (CreateContainerConfigError).
func containerConfig(pod *corev1.Pod, c *corev1.Container, in containerInput) (*runtimeapi.ContainerConfig, error) {
	env, err := containerEnv(pod, c, in.env)
	if err != nil {
		return nil, err
	}
	values := make(map[string]string, len(env))
	kvs := make([]*runtimeapi.KeyValue, 0, len(env))
	for _, e := range env {
		values[e.name] = e.value
		kvs = append(kvs, &runtimeapi.KeyValue{Key: e.name, Value: []byte(e.value)})
	}
	mapping := mappingOf(values)
	expandAll := func(ss []string) []string {
		if ss == nil {
			return nil
		}
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = expand(s, mapping)
		}
		return out
	}
	mounts, err := containerMounts(pod, c, in.volumes, values)
	if err != nil {
		return nil, err
	}
	if mountsHostsFile(pod, c, in.env.podIP) {
		m, err := hostsMount(pod, in.podDir, in.env.podIP, in.hosts)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, m)
	}
	if c.TerminationMessagePath != "" {
		file, err := terminationFile(in.podDir, c.Name)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, &runtimeapi.Mount{HostPath: file, ContainerPath: c.TerminationMessagePath})
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: in.restartCount},
		Image:       &runtimeapi.ImageSpec{Image: in.imageRef, UserSpecifiedImage: c.Image},
		Command:     expandAll(c.Command),
		Args:        expandAll(c.Args),
		WorkingDir:  c.WorkingDir,
		Envs:        kvs,
		Mounts:      mounts,
		Labels:      containerLabels(pod, c),
		Annotations: containerAnnotations(pod, c, in.ctype, in.restartCount),
		LogPath:     filepath.Join(c.Name, fmt.Sprintf("%d.log", in.restartCount)),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       linuxResources(pod, c, in.nodeMemory),
			SecurityContext: containerSecurityContext(pod, c),
		},
	}
	return cfg, nil
}

// readOnlyVolume says whether the volume's mounts are read-only whatever the
// volumeMount says: the kubelet owns the files of configMap, secret, downwardAPI and
// projected volumes, and an image volume is an image's filesystem.
func readOnlyVolume(pod *corev1.Pod, name string) bool {
	for i := range pod.Spec.Volumes {
		if v := &pod.Spec.Volumes[i]; v.Name == name {
			return v.ConfigMap != nil || v.Secret != nil || v.Projected != nil || v.DownwardAPI != nil || v.Image != nil
		}
	}
	return false
}

// imageMountError is a mount of an image volume the container cannot have (a subPath
// the image lacks): the runtime's CreateContainer error upstream, CreateContainerError.
type imageMountError struct{ msg string }

func (e *imageMountError) Error() string { return e.msg }

// containerMounts binds the container's volumeMounts to the volumes' host paths.
func containerMounts(pod *corev1.Pod, c *corev1.Container, volumes kubelet.PodVolumes, env map[string]string) ([]*runtimeapi.Mount, error) {
	var out []*runtimeapi.Mount
	for _, m := range c.VolumeMounts {
		host, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("cannot find volume %q to mount into container %q", m.Name, c.Name)
		}
		sub := m.SubPath
		if m.SubPathExpr != "" {
			sub = expand(m.SubPathExpr, mappingOf(env))
		}
		if sub != "" && isImageVolume(pod, m.Name) {
			// The image's directory must be there: nothing is made in an image.
			p, err := imageSubPath(host, sub)
			if err != nil {
				return nil, &imageMountError{msg: fmt.Sprintf("%s: volume %q subPath %q: %v", crierrors.ErrImageVolumeMountFailed, m.Name, sub, err)}
			}
			host = p
		} else if sub != "" {
			p, err := subPath(host, sub)
			if err != nil {
				return nil, fmt.Errorf("volume %q subPath %q: %w", m.Name, sub, err)
			}
			host = p
		}
		out = append(out, &runtimeapi.Mount{HostPath: host, ContainerPath: m.MountPath, Readonly: m.ReadOnly || readOnlyVolume(pod, m.Name),
			Propagation: propagation(m.MountPropagation)})
	}
	return out, nil
}

// subPath is the host path of sub inside the volume at root, created as a directory when
// missing; it must stay inside the volume (after symlinks).
func subPath(root, sub string) (string, error) {
	if err := checkSubPath(sub); err != nil {
		return "", err
	}
	p := filepath.Join(root, sub)
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	// Directories are made only under the volume: a link on the way that leads out of it
	// is refused before anything is created.
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		parent := filepath.Dir(p)
		for {
			if _, err := os.Lstat(parent); err == nil {
				break
			}
			parent = filepath.Dir(parent)
		}
		realParent, err := filepath.EvalSymlinks(parent)
		if err != nil {
			return "", err
		}
		if realParent != realRoot && !strings.HasPrefix(realParent, realRoot+string(filepath.Separator)) {
			return "", fmt.Errorf("resolves to %s, outside the volume", realParent)
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return "", err
		}
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	if real != realRoot && !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
		return "", fmt.Errorf("resolves to %s, outside the volume", real)
	}
	return real, nil
}

// imageSubPath is the host path of sub inside the image volume at root; it must exist
// and stay inside the volume after symlinks (resolved on the node: an absolute link, or
// one that leads out of the volume, is refused).
func imageSubPath(root, sub string) (string, error) {
	if err := checkSubPath(sub); err != nil {
		return "", err
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(root, sub))
	if errors.Is(err, os.ErrNotExist) {
		return "", errors.New("does not exist in the image")
	}
	if err != nil {
		return "", err
	}
	if real != realRoot && !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
		return "", errors.New("resolves outside the volume")
	}
	return real, nil
}

// checkSubPath refuses an absolute subPath and one with "..".
func checkSubPath(sub string) error {
	if filepath.IsAbs(sub) {
		return errors.New("must be a relative path")
	}
	for _, part := range strings.Split(filepath.ToSlash(sub), "/") {
		if part == ".." {
			return errors.New("must not contain '..'")
		}
	}
	return nil
}

func propagation(p *corev1.MountPropagationMode) runtimeapi.MountPropagation {
	if p == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
	}
	switch *p {
	case corev1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
	case corev1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
	}
	return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
}

// terminationFile creates the file a new instance writes its termination message to:
// <podDir>/containers/<name>/<random>, writable by any user.
func terminationFile(podDir, name string) (string, error) {
	dir := filepath.Join(podDir, "containers", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("termination-message dir: %w", err)
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	path := filepath.Join(dir, hex.EncodeToString(b[:]))
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("termination-message file: %w", err)
	}
	f.Close()
	if err := os.Chmod(path, 0o666); err != nil {
		return "", fmt.Errorf("termination-message file: %w", err)
	}
	return path, nil
}

const (
	minShares     = 2
	maxShares     = 262144
	sharesPerCPU  = 1024
	quotaPeriod   = 100000 // µs
	minQuota      = 1000
	criticalOOM   = -997
	bestEffortOOM = 1000
)

// linuxResources are the container's cgroup settings: cpu shares from the request (the
// limit when there is no request), a CFS quota from the cpu limit, the memory limit and
// the OOM score adjustment of the pod's QoS class.
func linuxResources(pod *corev1.Pod, c *corev1.Container, nodeMemory int64) *runtimeapi.LinuxContainerResources {
	req, lim := c.Resources.Requests.Cpu(), c.Resources.Limits.Cpu()
	milli := req.MilliValue()
	if req.IsZero() && !lim.IsZero() {
		milli = lim.MilliValue()
	}
	shares := milli * sharesPerCPU / 1000
	shares = max(min(shares, maxShares), minShares)
	res := &runtimeapi.LinuxContainerResources{CpuShares: shares, OomScoreAdj: oomScoreAdj(pod, c, nodeMemory)}
	if !lim.IsZero() {
		res.CpuPeriod = quotaPeriod
		res.CpuQuota = max(lim.MilliValue()*quotaPeriod/1000, minQuota)
	}
	if m := c.Resources.Limits.Memory(); !m.IsZero() {
		res.MemoryLimitInBytes = m.Value()
	}
	return res
}

// oomScoreAdj: node-critical and Guaranteed pods -997, BestEffort 1000, Burstable
// 1000 - 1000×request/node memory within [3, 999].
func oomScoreAdj(pod *corev1.Pod, c *corev1.Container, nodeMemory int64) int64 {
	if pod.Spec.PriorityClassName == "system-node-critical" {
		return criticalOOM
	}
	switch podutil.QOSClass(pod) {
	case corev1.PodQOSGuaranteed:
		return criticalOOM
	case corev1.PodQOSBestEffort:
		return bestEffortOOM
	}
	if nodeMemory <= 0 {
		return bestEffortOOM - 1
	}
	adj := bestEffortOOM - (1000*c.Resources.Requests.Memory().Value())/nodeMemory
	return max(min(adj, bestEffortOOM-1), bestEffortOOM+criticalOOM)
}

// namespaceOptions are the pod's namespaces: the node's network for host-network pods,
// the node's PID and IPC namespaces when asked, a PID namespace per container unless the
// pod shares one.
func namespaceOptions(pod *corev1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER,
		Ipc: runtimeapi.NamespaceMode_POD}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

func seccompProfile(p *corev1.SeccompProfile) *runtimeapi.SecurityProfile {
	if p == nil {
		return nil
	}
	switch p.Type {
	case corev1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	case corev1.SeccompProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	case corev1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile != nil {
			return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: *p.LocalhostProfile}
		}
	}
	return nil
}

// containerSecurityContext merges the pod's and the container's security contexts (the
// container's wins).
func containerSecurityContext(pod *corev1.Pod, c *corev1.Container) *runtimeapi.LinuxContainerSecurityContext {
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(pod)}
	psc, csc := pod.Spec.SecurityContext, c.SecurityContext
	if psc != nil {
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
	}
	if csc == nil {
		return sc
	}
	if csc.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *csc.RunAsUser}
	}
	if csc.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *csc.RunAsGroup}
	}
	if p := seccompProfile(csc.SeccompProfile); p != nil {
		sc.Seccomp = p
	}
	sc.Privileged = csc.Privileged != nil && *csc.Privileged
	sc.ReadonlyRootfs = csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem
	sc.NoNewPrivs = csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation
	if caps := csc.Capabilities; caps != nil {
		sc.Capabilities = &runtimeapi.Capability{}
		for _, c := range caps.Add {
			sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(c))
		}
		for _, c := range caps.Drop {
			sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(c))
		}
	}
	return sc
}
