package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// ReasonFailedMount is the reason of the Warning event of a pod volume that could not be
// set up.
const ReasonFailedMount = "FailedMount"

// The plugin directories of the volumes the kubelet writes itself, under
// <root>/pods/<uid>/volumes/.
const (
	configMapPluginDir   = "kubernetes.io~configmap"
	secretPluginDir      = "kubernetes.io~secret"
	downwardAPIPluginDir = "kubernetes.io~downward-api"
	projectedPluginDir   = "kubernetes.io~projected"
)

// objectsRetainInterval is how often the kubelet stops watching the objects of
// namespaces it no longer runs pods in.
const objectsRetainInterval = time.Minute

// configVolumePlugin is the plugin directory of a configMap, secret, downwardAPI or
// projected volume ("" for other volumes) and whether it lives on a tmpfs (secret and
// projected volumes: their files never reach the disk).
func configVolumePlugin(v *corev1.Volume) (string, bool) {
	switch {
	case v.ConfigMap != nil:
		return configMapPluginDir, false
	case v.Secret != nil:
		return secretPluginDir, true
	case v.DownwardAPI != nil:
		return downwardAPIPluginDir, false
	case v.Projected != nil:
		return projectedPluginDir, true
	}
	return "", false
}

// configVolumePath is where a configMap, secret, downwardAPI or projected volume of the
// pod lives on the node.
func configVolumePath(root string, uid types.UID, plugin, volume string) string {
	return filepath.Join(podDir(root, uid), "volumes", plugin, volume)
}

// configVolumes writes the configMap, secret, downwardAPI and projected volumes of the
// node's pods from the API's objects: at each sync of a pod, each volume's files are
// brought to the objects' current content with the atomic writer (nothing is written
// when nothing changed), secret and projected volumes on a tmpfs of their own. The
// kubelet syncs a pod again when a ConfigMap or Secret it references is added or changes
// (Objects' watches), so updates reach running containers within moments. The service
// account tokens of projected volumes come from tokens; a pod with one is synced again
// (requeueAfter) when its first token needs a refresh, so the new token lands in the
// volume. A volume that cannot be written records a FailedMount event; before its first
// write it keeps the pod from starting (ContainerCreating), afterwards the volume keeps
// its last content.
type configVolumes struct {
	root        string
	objects     objectSource
	allocatable corev1.ResourceList
	recorder    record.EventRecorder
	log         *slog.Logger
	// tokens gives serviceAccountToken sources their tokens (nil: the node has none).
	tokens *serviceAccountTokens
	// trustBundles gives clusterTrustBundle sources their certificates (nil: the node
	// has none).
	trustBundles *clusterTrustBundles
	// podCerts gives podCertificate sources their keys and certificates (nil: the node
	// has none).
	podCerts *podCertificates
	// requeueAfter has the pod synced again after d (nil: nothing does).
	requeueAfter func(pod *corev1.Pod, d time.Duration)
	now          func() time.Time
}

func newConfigVolumes(root string, objects objectSource, allocatable corev1.ResourceList, recorder record.EventRecorder, log *slog.Logger) *configVolumes {
	return &configVolumes{root: root, objects: objects, allocatable: allocatable, recorder: recorder, log: log, now: time.Now}
}

// setUp writes the pod's configMap, secret, downwardAPI and projected volumes. The error
// wraps errVolumesNotReady and names the volumes that were never written.
func (c *configVolumes) setUp(ctx context.Context, pod *corev1.Pod) error {
	var errs []error
	var refresh time.Time // the earliest refresh of the pod's tokens and certificates
	in := payloadInput{objects: c.objects, allocatable: c.allocatable}
	if c.tokens != nil {
		in.token = func(pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) (string, error) {
			token, at, err := c.tokens.token(ctx, pod, src)
			if err == nil && (refresh.IsZero() || at.Before(refresh)) {
				refresh = at
			}
			return token, err
		}
	}
	if c.trustBundles != nil {
		in.trustAnchors = c.trustBundles.trustAnchors
	}
	if c.podCerts != nil {
		in.podCertificate = func(pod *corev1.Pod, volume string, index int, src *corev1.PodCertificateProjection) ([]byte, []byte, error) {
			key, chain, at, err := c.podCerts.credentials(ctx, pod, volume, index, src)
			if err == nil && (refresh.IsZero() || at.Before(refresh)) {
				refresh = at
			}
			return key, chain, err
		}
	}
	defer func() {
		if !refresh.IsZero() && c.requeueAfter != nil {
			c.requeueAfter(pod, max(refresh.Sub(c.now()), 0))
		}
	}()
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		plugin, tmpfs := configVolumePlugin(v)
		if plugin == "" {
			continue
		}
		dir := configVolumePath(c.root, pod.UID, plugin, v.Name)
		err := c.setUpVolume(pod, v, dir, tmpfs, in)
		if err == nil {
			continue
		}
		c.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonFailedMount, "MountVolume.SetUp failed for volume %q : %v", v.Name, err)
		if _, lerr := os.Lstat(filepath.Join(dir, dataDirName)); lerr == nil {
			c.log.Warn("update volume; it keeps its last content", "pod", pod.Namespace+"/"+pod.Name, "volume", v.Name, "err", err)
			continue
		}
		errs = append(errs, fmt.Errorf("volume %q: %w", v.Name, err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", errVolumesNotReady, errors.Join(errs...))
	}
	return nil
}

func (c *configVolumes) setUpVolume(pod *corev1.Pod, v *corev1.Volume, dir string, tmpfs bool, in payloadInput) error {
	payload, err := volumePayload(pod, v, in)
	if err != nil {
		return err
	}
	if err := volumeDir(dir, tmpfs); err != nil {
		return err
	}
	var fsGroup *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		fsGroup = sc.FSGroup
	}
	changed, err := writeAtomic(dir, payload, fsGroup)
	if err != nil {
		return fmt.Errorf("write files: %w", err)
	}
	if changed {
		c.log.Debug("volume written", "pod", pod.Namespace+"/"+pod.Name, "volume", v.Name, "files", len(payload))
	}
	return nil
}

// volumeDir makes the volume's directory: world-writable as an emptyDir's, or a tmpfs
// mounted there.
func volumeDir(dir string, tmpfs bool) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create volume dir: %w", err)
	}
	if !tmpfs {
		if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm() != 0o777 {
			return os.Chmod(dir, 0o777)
		}
		return nil
	}
	mounted, err := mountinfo.Mounted(dir)
	if err != nil {
		return fmt.Errorf("check mount at %s: %w", dir, err)
	}
	if mounted {
		return nil
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, ""); err != nil {
		return fmt.Errorf("mount tmpfs at %s: %w", dir, err)
	}
	return nil
}

// tearDown unmounts the tmpfs of the pod's secret and projected volumes, removes the
// directories of its configMap, secret, downwardAPI and projected volumes, and forgets
// its tokens.
func (c *configVolumes) tearDown(uid types.UID) error {
	if c.tokens != nil {
		c.tokens.forget(uid)
	}
	if c.podCerts != nil {
		c.podCerts.forget(uid)
	}
	base := filepath.Join(podDir(c.root, uid), "volumes")
	if _, err := os.Stat(base); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var errs []error
	for _, plugin := range []string{configMapPluginDir, secretPluginDir, downwardAPIPluginDir, projectedPluginDir} {
		pdir := filepath.Join(base, plugin)
		entries, err := os.ReadDir(pdir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			dir := filepath.Join(pdir, e.Name())
			mounted, err := mountinfo.Mounted(dir)
			if err != nil {
				errs = append(errs, fmt.Errorf("is %s mounted: %w", dir, err))
				continue // never remove through a mount that may be there
			}
			if mounted {
				if err := unix.Unmount(dir, 0); err != nil && !errors.Is(err, unix.EINVAL) {
					errs = append(errs, fmt.Errorf("unmount %s: %w", dir, err))
					continue
				}
			}
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", dir, err))
			}
		}
		if err := os.Remove(pdir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", pdir, err))
		}
	}
	return errors.Join(errs...)
}

// useObjects makes the real kubelet write configMap, secret, downwardAPI and projected
// volumes from objects (its own when nil) and sync pods when what they reference
// changes.
func (k *Kubelet) useObjects(objects *Objects) error {
	if objects == nil {
		var err error
		if objects, err = NewObjects(ObjectsConfig{Logger: k.log}, k.client); err != nil {
			return err
		}
	}
	k.objects = objects
	k.volumes.config = newConfigVolumes(k.cfg.RootDir, objects, k.cfg.Capacity, k.recorder, k.log)
	k.volumes.config.tokens = newServiceAccountTokens(clientTokenRequester(k.client), clock.RealClock{})
	k.volumes.config.requeueAfter = func(pod *corev1.Pod, d time.Duration) { k.queue.AddAfter(pod.Namespace+"/"+pod.Name, d) }
	k.volumes.config.trustBundles = newClusterTrustBundles(k.client, k.onTrustBundleChange)
	k.volumes.config.podCerts = newPodCertificates(k.client, k.cfg.NodeName, k.registeredNodeUID, clock.RealClock{}, k.recorder, k.onPodCertificateChange)
	objects.OnChange(k.onObjectChange)
	return nil
}

// runObjects runs the object source and the sources of ClusterTrustBundles and pod
// certificates until ctx ends, and every objectsRetainInterval stops watching the
// namespaces the node has no pods in.
func (k *Kubelet) runObjects(ctx context.Context) {
	done := make(chan struct{})
	go func() { defer close(done); _ = k.objects.Run(ctx) }()
	if tb := k.volumes.config.trustBundles; tb != nil {
		bundlesDone := make(chan struct{})
		go func() { defer close(bundlesDone); tb.Run(ctx) }()
		defer func() { <-bundlesDone }()
	}
	if pc := k.volumes.config.podCerts; pc != nil {
		certsDone := make(chan struct{})
		go func() { defer close(certsDone); pc.Run(ctx) }()
		defer func() { <-certsDone }()
	}
	t := time.NewTicker(objectsRetainInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			<-done
			return
		case <-t.C:
			k.objects.Retain(func(ns string) bool {
				pods, err := k.podLister.Pods(ns).List(labelsEverything())
				return err != nil || len(pods) > 0
			})
		}
	}
}

// onObjectChange syncs the node's pods that reference the ConfigMap or Secret.
func (k *Kubelet) onObjectChange(ref ObjectRef) {
	pods, err := k.podLister.Pods(ref.Namespace).List(labelsEverything())
	if err != nil {
		return
	}
	for _, p := range pods {
		if p.Spec.NodeName == k.cfg.NodeName && p.DeletionTimestamp == nil && podReferences(p, ref) {
			k.queue.Add(p.Namespace + "/" + p.Name)
		}
	}
}

// podReferences says whether the pod's volumes or containers' env reference the object.
func podReferences(pod *corev1.Pod, ref ObjectRef) bool {
	cm := func(name string) bool { return ref.Kind == "ConfigMap" && name == ref.Name }
	sec := func(name string) bool { return ref.Kind == "Secret" && name == ref.Name }
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil && cm(v.ConfigMap.Name), v.Secret != nil && sec(v.Secret.SecretName):
			return true
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil && cm(s.ConfigMap.Name) || s.Secret != nil && sec(s.Secret.Name) {
					return true
				}
			}
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, e := range c.EnvFrom {
				if e.ConfigMapRef != nil && cm(e.ConfigMapRef.Name) || e.SecretRef != nil && sec(e.SecretRef.Name) {
					return true
				}
			}
			for _, e := range c.Env {
				if f := e.ValueFrom; f != nil && (f.ConfigMapKeyRef != nil && cm(f.ConfigMapKeyRef.Name) || f.SecretKeyRef != nil && sec(f.SecretKeyRef.Name)) {
					return true
				}
			}
		}
	}
	return false
}
