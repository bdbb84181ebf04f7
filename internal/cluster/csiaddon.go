package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/image"
	"github.com/kubelab/kubelab/internal/vpc"
)

// The EBS CSI add-on as the pods EKS runs, on real nodes: the Deployment
// ebs-csi-controller (the plugin's controller service and its sidecars, two replicas
// behind leader election) and the DaemonSet ebs-csi-node (the node plugin, its registrar
// and liveness probe on every node, privileged, on the node's network), every container
// kubelab's own binary from its registry (image.KubelabImage) running one subcommand.
//
// The node plugin sees the nodes' directories at the paths the kubelets use: the
// hostPath <data-dir>/nodes is mounted at the same path, with Bidirectional propagation
// (kubelab makes it a shared mount), so that what the plugin mounts under a kubelet's dir
// is the kubelet's too. Each pod finds its own node's dirs through $(NODE_NAME): the
// kubelet dir <data-dir>/nodes/$(NODE_NAME)/kubelet and the device dir
// <data-dir>/nodes/$(NODE_NAME)/dev, a link to the node's instance's device dir; /dev is
// the host's, where the attached volumes' loop devices are. The sockets are in the
// cluster's run directory (sockets.go), mounted at the same path too: the plugin's
// <run-dir>/$(NODE_NAME)/plugins/ebs.csi.aws.com/csi.sock and the registrar's
// <run-dir>/$(NODE_NAME)/plugins_registry, where the kubelet dials them.

const (
	// awsSecret held the controller's static cloud credentials in earlier kubelabs; the
	// controller now takes its role (csiirsa.go), and an existing Secret is deleted.
	awsSecret = "aws-secret"
	// serviceAccountCA is the cluster CA in a pod's service account volume: it signed the
	// certificate the cloud's endpoint serves for the AWS APIs' names on the VPC.
	serviceAccountCA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
	// controllerSocketDir holds the plugin's socket in the controller pod (an emptyDir).
	controllerSocketDir = "/var/lib/csi/sockets/pluginproxy/"
	// healthPort is the liveness probes' port (the node pods': on the node's network).
	healthPort = 9808
	// annKubelabBinary, on the add-on's pod templates, names the kubelab binary the image
	// is built from (binaryIdentity): a newer binary changes the templates, and the
	// Deployment and the DaemonSet roll their pods to the image built from it.
	annKubelabBinary = "kubelab.dev/kubelab-binary"
)

// csiAddon is what the add-on's pods need to know of the cluster.
type csiAddon struct {
	nodesDir    string // <data-dir>/nodes
	runDir      string // the cluster's run directory, with the nodes' sockets
	region      string
	ec2Endpoint string // the EC2 API as pods reach it
	binary      string // binaryIdentity of the kubelab binary the image is built from
}

func (c *Cluster) csiAddon() csiAddon {
	return csiAddon{nodesDir: filepath.Join(c.cfg.DataDir, "nodes"), runDir: c.runDir(), region: c.cfg.Region,
		ec2Endpoint: "http://" + vpc.ControlPlaneIP, binary: binaryIdentity(c.cfg.KubelabBinary)}
}

// binaryIdentity names a kubelab binary as the image's layer cache tells binaries apart:
// by size and modification time ("" when it cannot be read).
func binaryIdentity(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d bytes, modified %s", fi.Size(), fi.ModTime().UTC().Format(time.RFC3339Nano))
}

// templateMeta is the metadata of the add-on's pod templates: app's labels and the
// binary the image is built from.
func (a csiAddon) templateMeta(app string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Labels: podLabels(app), Annotations: map[string]string{annKubelabBinary: a.binary}}
}

// podLabels are a pod's labels: app plus the add-on's.
func podLabels(app string) map[string]string {
	l := map[string]string{"app": app}
	for k, v := range ebsLabels {
		l[k] = v
	}
	return l
}

// container is a container of kubelab's image running args.
func container(name string, args ...string) corev1.Container {
	return corev1.Container{Name: name, Image: image.KubelabImage, ImagePullPolicy: corev1.PullAlways, Args: args,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("40Mi")}}}
}

func healthzProbe() *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("healthz")}},
		InitialDelaySeconds: 10, TimeoutSeconds: 3, PeriodSeconds: 10, FailureThreshold: 5}
}

// controller is the Deployment ebs-csi-controller.
func (a csiAddon) controller() *appsv1.Deployment {
	socket := corev1.VolumeMount{Name: "socket-dir", MountPath: controllerSocketDir}
	address := "--csi-address=" + controllerSocketDir + "csi.sock"
	plugin := container("ebs-plugin", "csi-driver", "--mode=controller", "--endpoint=unix://"+controllerSocketDir+"csi.sock",
		"--ec2-endpoint="+a.ec2Endpoint, "--region="+a.region)
	// No keys: the pod identity webhook gives the plugin its role (AWS_ROLE_ARN and the
	// token), which the SDK's default chain assumes at STS by its regional name, served
	// on the VPC with a certificate of the cluster CA.
	plugin.Env = []corev1.EnvVar{{Name: "AWS_CA_BUNDLE", Value: serviceAccountCA}}
	plugin.Ports = []corev1.ContainerPort{{Name: "healthz", ContainerPort: healthPort, Protocol: corev1.ProtocolTCP}}
	plugin.LivenessProbe = healthzProbe()
	sidecar := func(name string, args ...string) corev1.Container {
		return container(name, append([]string{name, address, "--v=2", "--kube-api-qps=20", "--kube-api-burst=100"}, args...)...)
	}
	containers := []corev1.Container{plugin,
		sidecar("csi-provisioner", "--default-fstype=ext4", "--extra-create-metadata", "--leader-election"),
		sidecar("csi-attacher", "--leader-election"),
		sidecar("csi-resizer", "--leader-election"),
		sidecar("csi-snapshotter", "--leader-election"),
		container("liveness-probe", "liveness-probe", address, fmt.Sprintf("--health-port=%d", healthPort)),
	}
	for i := range containers {
		containers[i].VolumeMounts = []corev1.VolumeMount{socket}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: appCSIController, Namespace: metav1.NamespaceSystem, Labels: ebsLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": appCSIController}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: a.templateMeta(appCSIController),
				Spec: corev1.PodSpec{
					ServiceAccountName: csiControllerSA,
					PriorityClassName:  "system-cluster-critical",
					Tolerations:        []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}},
					Containers:         containers,
					Volumes:            []corev1.Volume{{Name: "socket-dir", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
}

// node is the DaemonSet ebs-csi-node.
func (a csiAddon) node() *appsv1.DaemonSet {
	nodeRun := filepath.Join(a.runDir, "$(NODE_NAME)")
	socket := filepath.Join(nodeRun, "plugins", DriverName, "csi.sock")
	// The plugin's mounts reach the machine (Bidirectional); the other containers need
	// only the sockets, and so hold no copy of a volume's mount that the kubelet has undone.
	bidirectional := corev1.VolumeMount{Name: "nodes-dir", MountPath: a.nodesDir, MountPropagation: ptr.To(corev1.MountPropagationBidirectional)}
	sockets := corev1.VolumeMount{Name: "run-dir", MountPath: a.runDir}
	nodeName := corev1.EnvVar{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}

	plugin := container("ebs-plugin", "csi-driver", "--mode=node", "--endpoint=unix://"+socket,
		"--device-dir="+filepath.Join(a.nodesDir, "$(NODE_NAME)", "dev"))
	plugin.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	plugin.VolumeMounts = []corev1.VolumeMount{bidirectional, sockets, {Name: "device-dir", MountPath: "/dev"}}
	plugin.Ports = []corev1.ContainerPort{{Name: "healthz", ContainerPort: healthPort, Protocol: corev1.ProtocolTCP}}
	plugin.LivenessProbe = healthzProbe()
	registrar := container("node-driver-registrar", "node-driver-registrar", "--csi-address="+socket,
		"--kubelet-registration-path="+socket, "--plugin-registration-path="+filepath.Join(nodeRun, "plugins_registry"), "--v=2")
	registrar.VolumeMounts = []corev1.VolumeMount{sockets}
	probe := container("liveness-probe", "liveness-probe", "--csi-address="+socket, fmt.Sprintf("--health-port=%d", healthPort))
	probe.VolumeMounts = []corev1.VolumeMount{sockets}
	containers := []corev1.Container{plugin, registrar, probe}
	for i := range containers {
		containers[i].Env = append([]corev1.EnvVar{nodeName}, containers[i].Env...)
	}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: appCSINode, Namespace: metav1.NamespaceSystem, Labels: ebsLabels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": appCSINode}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: a.templateMeta(appCSINode),
				Spec: corev1.PodSpec{
					ServiceAccountName: csiNodeSA,
					PriorityClassName:  "system-node-critical",
					HostNetwork:        true,
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:         containers,
					Volumes: []corev1.Volume{
						{Name: "nodes-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
							Path: a.nodesDir, Type: ptr.To(corev1.HostPathDirectory)}}},
						{Name: "run-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
							Path: a.runDir, Type: ptr.To(corev1.HostPathDirectory)}}},
						{Name: "device-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
							Path: "/dev", Type: ptr.To(corev1.HostPathDirectory)}}},
					},
				},
			},
		},
	}
}

// ensureCSIAddon creates the add-on's Deployment and DaemonSet, or updates them to this
// kubelab's spec when they exist, and deletes the Secret of static keys an earlier
// kubelab made. rolled says that existing workloads had pods of another kubelab binary,
// which now roll to this one's image.
func ensureCSIAddon(ctx context.Context, client kubernetes.Interface, a csiAddon) (rolled bool, err error) {
	if err := client.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, awsSecret, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("cluster: delete Secret kube-system/%s: %w", awsSecret, err)
	}
	// update gives an existing workload's pod template this kubelab's; it notes a change of
	// binary.
	update := func(cur *corev1.PodTemplateSpec, want corev1.PodTemplateSpec) {
		if cur.Annotations[annKubelabBinary] != want.Annotations[annKubelabBinary] {
			rolled = true
		}
		*cur = want
	}
	dep, ds := a.controller(), a.node()
	deployments, daemonsets := client.AppsV1().Deployments(dep.Namespace), client.AppsV1().DaemonSets(ds.Namespace)
	if err := createAddon(ctx, "Deployment kube-system/"+dep.Name, func(ctx context.Context) error {
		_, err := deployments.Create(ctx, dep, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var cur *appsv1.Deployment
			if cur, err = deployments.Get(ctx, dep.Name, metav1.GetOptions{}); err == nil {
				update(&cur.Spec.Template, dep.Spec.Template)
				_, err = deployments.Update(ctx, cur, metav1.UpdateOptions{})
			}
		}
		return err
	}); err != nil {
		return false, fmt.Errorf("cluster: %w", err)
	}
	if err := createAddon(ctx, "DaemonSet kube-system/"+ds.Name, func(ctx context.Context) error {
		_, err := daemonsets.Create(ctx, ds, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var cur *appsv1.DaemonSet
			if cur, err = daemonsets.Get(ctx, ds.Name, metav1.GetOptions{}); err == nil {
				update(&cur.Spec.Template, ds.Spec.Template)
				_, err = daemonsets.Update(ctx, cur, metav1.UpdateOptions{})
			}
		}
		return err
	}); err != nil {
		return false, fmt.Errorf("cluster: %w", err)
	}
	return rolled, nil
}

// waitCSIAddon waits until the add-on's workloads have rolled out: every replica of the
// controller's Deployment updated and available and none of an older template left, an
// updated, ready node plugin on each of the nodes.
func waitCSIAddon(ctx context.Context, client kubernetes.Interface, nodes int) error {
	return waitFor(ctx, "the EBS CSI add-on's workloads", 500*time.Millisecond, 3*time.Minute, func(ctx context.Context) string {
		dep, err := client.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, appCSIController, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		ds, err := client.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, appCSINode, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		want := ptr.Deref(dep.Spec.Replicas, 1)
		// No replica of an older template left (a rollout's old pods), as kubectl rollout
		// status waits.
		if dep.Status.ObservedGeneration >= dep.Generation && dep.Status.UpdatedReplicas == want && dep.Status.Replicas == want &&
			dep.Status.AvailableReplicas == want &&
			ds.Status.ObservedGeneration >= ds.Generation && ds.Status.UpdatedNumberScheduled == int32(nodes) && ds.Status.NumberReady == int32(nodes) {
			return ""
		}
		return fmt.Sprintf("%s: %d of %d replicas available, %d in all; %s: %d of %d nodes ready", appCSIController,
			dep.Status.AvailableReplicas, want, dep.Status.Replicas, appCSINode, ds.Status.NumberReady, nodes)
	})
}

// removeCSIAddonWorkloads deletes the add-on's Deployment and DaemonSet (with their pods)
// that an earlier run with the add-on as pods made, for a run that has it in process.
func removeCSIAddonWorkloads(ctx context.Context, client kubernetes.Interface) error {
	background := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	err := client.AppsV1().Deployments(metav1.NamespaceSystem).Delete(ctx, appCSIController, background)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cluster: delete the add-on's Deployment: %w", err)
	}
	err = client.AppsV1().DaemonSets(metav1.NamespaceSystem).Delete(ctx, appCSINode, background)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cluster: delete the add-on's DaemonSet: %w", err)
	}
	return nil
}
