package kuberuntime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// Config describes the node the runtime serves and how it behaves.
type Config struct {
	// NodeName is the node's name (spec.nodeName of its pods).
	NodeName string
	// RootDir is the kubelet's root dir: termination-message files go under
	// <RootDir>/pods/<uid>/containers/<container>/.
	RootDir string
	// PodLogsDir holds the containers' logs, a directory per pod
	// (<PodLogsDir>/<namespace>_<name>_<uid>/<container>/<restartCount>.log); it defaults
	// to <RootDir>/../pod-logs and must not be shared between nodes.
	PodLogsDir string
	// CgroupParent is the cgroupfs path under which each pod gets its cgroup
	// (<CgroupParent>/pod<uid>); empty leaves the choice to the runtime.
	CgroupParent string
	// NodeIP is the node's address: status.hostIP in the downward API, and status.podIP
	// of host-network pods. Variables asking for an unknown address are left out.
	NodeIP string
	// Allocatable is what limits default to in the downward API (resourceFieldRef) and the
	// memory the OOM score adjustment of Burstable containers is computed against; cpu and
	// memory default to the machine's.
	Allocatable corev1.ResourceList
	// Objects resolves ConfigMaps, Secrets and Service variables that containers'
	// environments reference; nil makes such references a CreateContainerConfigError
	// (optional ones are skipped).
	Objects Objects
	// RuntimeClasses resolves pods' spec.runtimeClassName to the runtime handler their
	// sandboxes run with (RunPodSandbox's runtime_handler); nil runs every pod with the
	// runtime's default handler.
	RuntimeClasses RuntimeClasses
	// Recorder receives the pod events (Pulling, Created, BackOff, …); nil records none.
	Recorder record.EventRecorder
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock drives the back-offs (the real clock by default).
	Clock clock.Clock
	// RestartBackOff is the first delay before restarting a crashed container (10 s); it
	// doubles at each crash up to MaxRestartBackOff (300 s) and starts over once the
	// container ran for twice MaxRestartBackOff.
	RestartBackOff, MaxRestartBackOff time.Duration
	// ImagePullBackOff is the first delay before pulling an image again after a failed pull
	// (10 s), doubling up to MaxImagePullBackOff (300 s); per pod and image.
	ImagePullBackOff, MaxImagePullBackOff time.Duration
	// RuntimeName prefixes container IDs in the status ("containerd" →
	// containerd://<id>).
	RuntimeName string
	// ClusterDNS are the nameservers (addresses) of pods whose dnsPolicy is ClusterFirst
	// (or ClusterFirstWithHostNet); when empty such pods get the node's resolv.conf, with
	// a MissingClusterDNS warning event.
	ClusterDNS []string
	// OfflineImages says the node's images come only from kubelab's registry (kubelab up
	// --offline): the message of a failed pull says so.
	OfflineImages bool
	// ImageVolumes mounts the images of pods' image volumes (the runtime pulls them);
	// nil fails the containers that mount one (CreateContainerError).
	ImageVolumes ImageMounter
	// ClusterDomain is the cluster's DNS domain ("cluster.local" when empty): the search
	// list of ClusterFirst pods is <namespace>.svc.<domain> svc.<domain> <domain>.
	ClusterDomain string
}

// Objects gives the runtime the API objects containers' environments refer to. Errors for
// missing objects should be the API's NotFound errors.
type Objects interface {
	ConfigMap(namespace, name string) (*corev1.ConfigMap, error)
	Secret(namespace, name string) (*corev1.Secret, error)
	// ServiceEnv returns the Service variables (FOO_SERVICE_HOST, …) for a pod.
	ServiceEnv(pod *corev1.Pod) (map[string]string, error)
}

// RuntimeClasses resolves a RuntimeClass name to its handler ("" for the empty name);
// a class that does not exist should be the API's NotFound error.
type RuntimeClasses interface {
	Handler(ctx context.Context, name string) (string, error)
}

func (c *Config) validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("node name is required"))
	}
	if c.RootDir == "" || !filepath.IsAbs(c.RootDir) {
		errs = append(errs, fmt.Errorf("root dir %q must be an absolute path", c.RootDir))
	}
	if c.PodLogsDir != "" && !filepath.IsAbs(c.PodLogsDir) {
		errs = append(errs, fmt.Errorf("pod logs dir %q must be an absolute path", c.PodLogsDir))
	}
	if c.CgroupParent != "" && !strings.HasPrefix(c.CgroupParent, "/") {
		errs = append(errs, fmt.Errorf("cgroup parent %q must start with /", c.CgroupParent))
	}
	if c.RestartBackOff < 0 || c.MaxRestartBackOff < 0 || c.ImagePullBackOff < 0 || c.MaxImagePullBackOff < 0 {
		errs = append(errs, errors.New("back-offs must not be negative"))
	}
	if c.RestartBackOff > 0 && c.MaxRestartBackOff > 0 && c.MaxRestartBackOff < c.RestartBackOff {
		errs = append(errs, fmt.Errorf("max restart back-off %v is shorter than the first %v", c.MaxRestartBackOff, c.RestartBackOff))
	}
	if c.ImagePullBackOff > 0 && c.MaxImagePullBackOff > 0 && c.MaxImagePullBackOff < c.ImagePullBackOff {
		errs = append(errs, fmt.Errorf("max image pull back-off %v is shorter than the first %v", c.MaxImagePullBackOff, c.ImagePullBackOff))
	}
	for _, ns := range c.ClusterDNS {
		if _, err := netip.ParseAddr(ns); err != nil {
			errs = append(errs, fmt.Errorf("cluster DNS %q is not an IP address", ns))
		}
	}
	if d := strings.TrimSuffix(c.ClusterDomain, "."); c.ClusterDomain != "" {
		for _, msg := range validation.IsDNS1123Subdomain(d) {
			errs = append(errs, fmt.Errorf("cluster domain %q: %s", c.ClusterDomain, msg))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kuberuntime config: %w", err)
	}
	return nil
}

func (c *Config) defaults() {
	if c.PodLogsDir == "" {
		c.PodLogsDir = filepath.Join(filepath.Dir(filepath.Clean(c.RootDir)), "pod-logs")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.RestartBackOff == 0 {
		c.RestartBackOff = 10 * time.Second
	}
	if c.MaxRestartBackOff == 0 {
		c.MaxRestartBackOff = max(300*time.Second, c.RestartBackOff)
	}
	if c.ImagePullBackOff == 0 {
		c.ImagePullBackOff = 10 * time.Second
	}
	if c.MaxImagePullBackOff == 0 {
		c.MaxImagePullBackOff = max(300*time.Second, c.ImagePullBackOff)
	}
	if c.RuntimeName == "" {
		c.RuntimeName = "containerd"
	}
	c.ClusterDomain = strings.TrimSuffix(c.ClusterDomain, ".")
	if c.ClusterDomain == "" {
		c.ClusterDomain = "cluster.local"
	}
	alloc := corev1.ResourceList{}
	for k, v := range c.Allocatable {
		alloc[k] = v
	}
	if _, ok := alloc[corev1.ResourceCPU]; !ok {
		alloc[corev1.ResourceCPU] = *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI)
	}
	if _, ok := alloc[corev1.ResourceMemory]; !ok {
		alloc[corev1.ResourceMemory] = *resource.NewQuantity(machineMemory(), resource.BinarySI)
	}
	c.Allocatable = alloc
}

// machineMemory is MemTotal from /proc/meminfo (8 GiB when it cannot be read).
func machineMemory() int64 {
	const fallback = 8 << 30
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return fallback
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil && kb > 0 {
				return kb * 1024
			}
		}
	}
	return fallback
}
