package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelab/kubelab/internal/trace"
)

// traceOptions are the flags of `kubelab trace` and `kubelab why`.
type traceOptions struct {
	dataDir, kubeconfig, namespace, output string
	watch, why                             bool
}

func (o *traceOptions) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.dataDir, "data-dir", DefaultDataDir, "data dir of the cluster: its kubeconfig and the cloud's client files")
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig (default: $KUBECONFIG, else DATA-DIR/kubeconfig)")
	cmd.Flags().StringVarP(&o.namespace, "namespace", "n", "default", "namespace of the pod or claim")
}

func newTraceCommand() *cobra.Command {
	o := &traceOptions{}
	cmd := &cobra.Command{
		Use:   "trace pod/NAME | pvc/NAME | svc/NAME | ingress/NAME",
		Short: "Draw a pod's flow, from kubectl apply to Running, as the sequence it happened in",
		Long: `Reconstruct one pod's flow from the API (Events, managedFields times, conditions, its claims,
their volumes and VolumeAttachments), the cloud's EC2 API (the volume's create and attach
times) and the EBS CSI add-on pods' logs (each CSI call with its duration), with
--pod-network vpc the aws-node pod's log (the pod's address, and the
AssignPrivateIpAddresses and new ENI made for it), and draw it as
a sequence diagram: who asked whom for what, when, and how long it took, in causal order.
Then the claim's, the volume's and the attachment's state transitions, and, for a pod that
is stuck, the stage where and why, with the command that shows the evidence. For a
LoadBalancer Service or an Ingress of class alb: the object → the cloud-controller-manager
(its Events) → the ELB API (the load balancer, its state, address and listeners) → the
targets and their health, then where it is stuck.

pvc/NAME traces the newest pod that uses the claim. --watch follows the flow while it
happens (start it before kubectl apply), printing each new step, until interrupted; it then
prints the whole trace, with the times it saw each state change and, once the pod and the
claim are deleted, what became of the volume.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0])
		},
	}
	o.bind(cmd)
	cmd.Flags().StringVarP(&o.output, "output", "o", "text", "text, svg or html")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "follow the flow while it happens, until interrupted")
	cmd.Flags().BoolVar(&o.why, "why", false, "print only where the pod is stuck and why")
	return cmd
}

func newWhyCommand() *cobra.Command {
	o := &traceOptions{why: true, output: "text"}
	cmd := &cobra.Command{
		Use:   "why pod/NAME | pvc/NAME | deployment/NAME | replicaset/NAME | statefulset/NAME | daemonset/NAME | job/NAME | svc/NAME | ingress/NAME",
		Short: "Name the stage where a pod is stuck, the reason, and the command that shows the evidence",
		Long: `Name the stage of the flow where a pod that is not Running and Ready is stuck, why, the
status or Event message that shows it, and the command that prints that evidence: admission
refused (for a workload whose pods are refused), Pending (which scheduler filter, which
claim, a volume in a zone without nodes), provisioning failed (with the cloud's error
code), waiting for the provisioner, attach failed or stuck (the cloud's error,
multi-attach), mount failed, no pod IP (a full podCIDR), ErrImagePull/ImagePullBackOff,
CreateContainerError, probes failing, CrashLoopBackOff, OOMKilled, terminating held by a
finalizer. For a workload, the pod diagnosed is its newest pod that is not Ready. For a
LoadBalancer Service or an Ingress: the stage (Service/Ingress, cloud-controller-manager,
ELB API, targets) where it does not become reachable.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0])
		},
	}
	o.bind(cmd)
	return cmd
}

func (o *traceOptions) run(ctx context.Context, out io.Writer, arg string) error {
	write, err := traceWriter(o.output)
	if err != nil {
		return err
	}
	target, err := trace.ParseTarget(arg, o.namespace)
	if err != nil {
		return err
	}
	src, err := o.sources(ctx)
	if err != nil {
		return err
	}
	if trace.IsLoadBalancerTarget(target) {
		s, err := trace.CollectLoadBalancer(ctx, src, target)
		if err != nil {
			return err
		}
		if o.why {
			return trace.WriteLoadBalancerWhy(out, s)
		}
		return trace.WriteLoadBalancerTrace(out, s, time.Now())
	}
	var s *trace.Snapshot
	if o.watch {
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		printed := map[string]bool{}
		s, err = trace.Watch(ctx, src, target, func(t trace.Trace) {
			if o.output == "text" {
				trace.WriteNewSteps(out, t, printed)
			}
		})
	} else {
		s, err = trace.Collect(ctx, src, target)
	}
	if err != nil {
		return err
	}
	t := trace.Build(s)
	if o.watch && o.output == "text" {
		fmt.Fprintln(out)
	}
	if o.why {
		return trace.WriteWhy(out, t)
	}
	return write(out, t)
}

func traceWriter(output string) (func(io.Writer, trace.Trace) error, error) {
	switch output {
	case "text":
		return trace.WriteText, nil
	case "svg":
		return trace.WriteSVG, nil
	case "html":
		return trace.WriteHTML, nil
	}
	return nil, fmt.Errorf("trace: output %q: must be text, svg or html", output)
}

// sources are the cluster's API (from the kubeconfig) and, when the data dir has the
// cloud's client files, its EC2 API.
func (o *traceOptions) sources(ctx context.Context) (trace.Sources, error) {
	path := o.kubeconfig
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	if path == "" {
		path = filepath.Join(o.dataDir, "kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return trace.Sources{}, fmt.Errorf("trace: kubeconfig %s: %w", path, err)
	}
	cfg.UserAgent = "kubelab-trace"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return trace.Sources{}, err
	}
	src := trace.Sources{Client: client}
	cloudDir := filepath.Join(o.dataDir, "cloud")
	endpoint, err := os.ReadFile(filepath.Join(cloudDir, "endpoint"))
	if errors.Is(err, os.ErrNotExist) {
		return src, nil
	}
	if err != nil {
		return src, fmt.Errorf("trace: %w", err)
	}
	// The cloud's own profile and keys, whatever AWS_* variables the user's shell has.
	files := func(o *awsconfig.LoadSharedConfigOptions) {
		o.ConfigFiles = []string{filepath.Join(cloudDir, "aws-config")}
		o.CredentialsFiles = []string{filepath.Join(cloudDir, "aws-credentials")}
	}
	profile, err := awsconfig.LoadSharedConfigProfile(ctx, "default", files)
	if err != nil {
		return src, fmt.Errorf("trace: cloud client: %w", err)
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx,
		awsconfig.WithEC2IMDSClientEnableState(imds.ClientDisabled),
		awsconfig.WithSharedConfigProfile("default"),
		awsconfig.WithSharedConfigFiles([]string{filepath.Join(cloudDir, "aws-config")}),
		awsconfig.WithSharedCredentialsFiles([]string{filepath.Join(cloudDir, "aws-credentials")}),
		awsconfig.WithRegion(profile.Region),
		awsconfig.WithCredentialsProvider(credentials.StaticCredentialsProvider{Value: profile.Credentials}))
	if err != nil {
		return src, fmt.Errorf("trace: cloud client: %w", err)
	}
	src.EC2 = ec2.NewFromConfig(awsCfg, func(opt *ec2.Options) { opt.BaseEndpoint = aws.String(strings.TrimSpace(string(endpoint))) })
	src.ELB = elb.NewFromConfig(awsCfg, func(opt *elb.Options) { opt.BaseEndpoint = aws.String(strings.TrimSpace(string(endpoint))) })
	return src, nil
}
