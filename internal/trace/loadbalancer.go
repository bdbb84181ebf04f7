package trace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// The finalizers and the Event reasons of the cloud-controller-manager's load balancer
// controllers, as upstream's and the AWS Load Balancer Controller's.
const (
	lbServiceFinalizer = "service.kubernetes.io/load-balancer-cleanup"
	lbIngressFinalizer = "ingress.k8s.aws/resources"
	lbReasonFailed     = "SyncLoadBalancerFailed"
	lbReasonBuild      = "FailedBuildModel"
	lbReasonDeploy     = "FailedDeployModel"
	lbListCommand      = "aws elbv2 describe-load-balancers --endpoint-url $(cat ~/.kubelab/cloud/endpoint)"
)

// LBSnapshot is what shows how a LoadBalancer Service or an Ingress becomes reachable:
// the object, its Events, and the cloud's load balancer with its targets' health.
type LBSnapshot struct {
	Kind, Namespace, Name string
	Service               *corev1.Service
	Ingress               *networkingv1.Ingress
	Events                []corev1.Event
	// CloudRead is whether the ELB API was asked; LoadBalancer is nil when it has none.
	CloudRead    bool
	LoadBalancer *LBView
}

// LBView is a load balancer of the cloud as the trace shows it.
type LBView struct {
	Name, DNSName, State, Address string
	Listeners                     []string
	Targets                       []LBTarget
}

// LBTarget is a registered target and its health.
type LBTarget struct {
	Group, ID    string
	Port         int32
	State, About string
}

// IsLoadBalancerTarget is whether target is a Service or an Ingress (traced by
// CollectLoadBalancer, not Collect).
func IsLoadBalancerTarget(t Target) bool { return t.Kind == "Service" || t.Kind == "Ingress" }

// serviceLBName is the name the service controller gives a Service's load balancer.
func serviceLBName(uid string) string {
	n := "a" + strings.ReplaceAll(uid, "-", "")
	return n[:min(len(n), 32)]
}

// CollectLoadBalancer reads a Service or an Ingress, its Events and, when src.ELB is not
// nil, its load balancer from the cloud.
func CollectLoadBalancer(ctx context.Context, src Sources, target Target) (*LBSnapshot, error) {
	if !IsLoadBalancerTarget(target) {
		return nil, errNotLoadBalancerTarget
	}
	elbc := src.ELB
	s := &LBSnapshot{Kind: target.Kind, Namespace: target.Namespace, Name: target.Name}
	var lbName, dns string
	switch target.Kind {
	case "Service":
		svc, err := src.Client.CoreV1().Services(target.Namespace).Get(ctx, target.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		s.Service, lbName = svc, serviceLBName(string(svc.UID))
	case "Ingress":
		ing, err := src.Client.NetworkingV1().Ingresses(target.Namespace).Get(ctx, target.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		s.Ingress = ing
		if len(ing.Status.LoadBalancer.Ingress) > 0 {
			dns = ing.Status.LoadBalancer.Ingress[0].Hostname
		}
	}
	evs, err := src.Client.CoreV1().Events(target.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": target.Kind, "involvedObject.name": target.Name}.String()})
	if err != nil && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("trace: events: %w", err)
	}
	if evs != nil {
		s.Events = evs.Items
		slices.SortStableFunc(s.Events, func(a, b corev1.Event) int { return eventFirst(&a).Compare(eventFirst(&b)) })
	}
	if elbc == nil {
		return s, nil
	}
	s.CloudRead = true
	lb, err := findLoadBalancer(ctx, elbc, lbName, dns)
	if err != nil || lb == nil {
		return s, err
	}
	s.LoadBalancer, err = lbView(ctx, elbc, lb)
	return s, err
}

func findLoadBalancer(ctx context.Context, c *elb.Client, name, dns string) (*elbtypes.LoadBalancer, error) {
	in := &elb.DescribeLoadBalancersInput{}
	if name != "" {
		in.Names = []string{name}
	}
	out, err := c.DescribeLoadBalancers(ctx, in)
	if strings.Contains(fmt.Sprint(err), "LoadBalancerNotFound") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("trace: describe load balancers: %w", err)
	}
	for i, lb := range out.LoadBalancers {
		if name != "" || (dns != "" && aws.ToString(lb.DNSName) == dns) {
			return &out.LoadBalancers[i], nil
		}
	}
	return nil, nil
}

func lbView(ctx context.Context, c *elb.Client, lb *elbtypes.LoadBalancer) (*LBView, error) {
	v := &LBView{Name: aws.ToString(lb.LoadBalancerName), DNSName: aws.ToString(lb.DNSName)}
	if lb.State != nil {
		v.State = string(lb.State.Code)
	}
	for _, z := range lb.AvailabilityZones {
		for _, a := range z.LoadBalancerAddresses {
			if v.Address == "" {
				v.Address = aws.ToString(a.IpAddress) + aws.ToString(a.PrivateIPv4Address)
			}
		}
	}
	ls, err := c.DescribeListeners(ctx, &elb.DescribeListenersInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil {
		return nil, fmt.Errorf("trace: describe listeners: %w", err)
	}
	for _, l := range ls.Listeners {
		v.Listeners = append(v.Listeners, fmt.Sprintf("%s:%d", l.Protocol, aws.ToInt32(l.Port)))
	}
	tgs, err := c.DescribeTargetGroups(ctx, &elb.DescribeTargetGroupsInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil {
		return nil, fmt.Errorf("trace: describe target groups: %w", err)
	}
	for _, tg := range tgs.TargetGroups {
		h, err := c.DescribeTargetHealth(ctx, &elb.DescribeTargetHealthInput{TargetGroupArn: tg.TargetGroupArn})
		if err != nil {
			return nil, fmt.Errorf("trace: describe target health: %w", err)
		}
		for _, d := range h.TargetHealthDescriptions {
			t := LBTarget{Group: aws.ToString(tg.TargetGroupName), ID: aws.ToString(d.Target.Id), Port: aws.ToInt32(d.Target.Port)}
			if d.TargetHealth != nil {
				t.State = string(d.TargetHealth.State)
				t.About = strings.TrimSpace(string(d.TargetHealth.Reason) + " " + aws.ToString(d.TargetHealth.Description))
			}
			v.Targets = append(v.Targets, t)
		}
	}
	return v, nil
}

// LBDiagnosis is the stage where a load balancer's flow stops (Stage "" when it is
// reachable), why, and the command that shows it.
type LBDiagnosis struct {
	Stage, Reason, Message, Command string
}

// The stages of a LoadBalancer Service's or an Ingress's flow.
const (
	LBStageObject     = "Service/Ingress"
	LBStageController = "cloud-controller-manager"
	LBStageELB        = "ELB API"
	LBStageTargets    = "targets"
)

func (s *LBSnapshot) lastEvent(reasons ...string) *corev1.Event {
	for i := len(s.Events) - 1; i >= 0; i-- {
		if slices.Contains(reasons, s.Events[i].Reason) {
			return &s.Events[i]
		}
	}
	return nil
}

// DiagnoseLoadBalancer names the stage where s's flow stops.
func DiagnoseLoadBalancer(s *LBSnapshot) LBDiagnosis {
	describe := fmt.Sprintf("kubectl -n %s describe %s %s", s.Namespace, strings.ToLower(s.Kind), s.Name)
	var finalizer string
	var meta *metav1.ObjectMeta
	var reachable bool
	switch {
	case s.Service != nil:
		svc := s.Service
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			return LBDiagnosis{Stage: LBStageObject, Reason: "NotLoadBalancer", Message: fmt.Sprintf("the Service is of type %s: no load balancer is made for it", svc.Spec.Type), Command: describe}
		}
		if svc.Spec.LoadBalancerClass != nil {
			return LBDiagnosis{Stage: LBStageObject, Reason: "OtherClass", Message: fmt.Sprintf("spec.loadBalancerClass %s: the cloud-controller-manager leaves the Service to that class's controller", *svc.Spec.LoadBalancerClass), Command: describe}
		}
		finalizer, meta, reachable = lbServiceFinalizer, &svc.ObjectMeta, len(svc.Status.LoadBalancer.Ingress) > 0
	case s.Ingress != nil:
		finalizer, meta, reachable = lbIngressFinalizer, &s.Ingress.ObjectMeta, len(s.Ingress.Status.LoadBalancer.Ingress) > 0
	}
	if ev := s.lastEvent(lbReasonFailed, lbReasonBuild, lbReasonDeploy, "EnsuredLoadBalancer", "UpdatedLoadBalancer", "SuccessfullyReconciled"); ev != nil &&
		(ev.Reason == lbReasonFailed || ev.Reason == lbReasonBuild || ev.Reason == lbReasonDeploy) {
		stage := LBStageELB
		if ev.Reason == lbReasonBuild || !strings.Contains(ev.Message, "api error") {
			stage = LBStageController
		}
		reason := ev.Reason
		if m := diagAPIErrorCode.FindStringSubmatch(ev.Message); m != nil {
			reason = m[1]
		}
		return LBDiagnosis{Stage: stage, Reason: reason, Message: ev.Message, Command: describe}
	}
	if meta != nil && !slices.Contains(meta.Finalizers, finalizer) && !reachable {
		return LBDiagnosis{Stage: LBStageController, Reason: "NotSeen", Message: fmt.Sprintf("no finalizer %s yet: the cloud-controller-manager has not taken the %s up (is it running?)", finalizer, s.Kind),
			Command: "kubectl -n kube-system get lease cloud-controller-manager"}
	}
	if s.CloudRead && s.LoadBalancer == nil {
		return LBDiagnosis{Stage: LBStageELB, Reason: "LoadBalancerNotFound", Message: "the cloud has no load balancer for it", Command: lbListCommand}
	}
	if lb := s.LoadBalancer; lb != nil {
		if lb.State != string(elbtypes.LoadBalancerStateEnumActive) {
			return LBDiagnosis{Stage: LBStageELB, Reason: lb.State, Message: fmt.Sprintf("load balancer %s is %s", lb.Name, lb.State), Command: lbListCommand}
		}
		if len(lb.Targets) == 0 {
			return LBDiagnosis{Stage: LBStageTargets, Reason: "NoTargets", Message: "no targets: no Ready node (target type instance) or no ready endpoint (ip)",
				Command: fmt.Sprintf("kubectl get nodes; kubectl -n %s get endpointslices", s.Namespace)}
		}
		var bad []string
		healthy := 0
		for _, t := range lb.Targets {
			if t.State == string(elbtypes.TargetHealthStateEnumHealthy) {
				healthy++
			} else {
				bad = append(bad, fmt.Sprintf("%s:%d %s (%s)", t.ID, t.Port, t.State, t.About))
			}
		}
		if healthy == 0 {
			return LBDiagnosis{Stage: LBStageTargets, Reason: "NoHealthyTargets", Message: "no healthy target: " + strings.Join(bad, "; "),
				Command: "aws elbv2 describe-target-health --endpoint-url $(cat ~/.kubelab/cloud/endpoint) --target-group-arn …"}
		}
	}
	if !reachable {
		return LBDiagnosis{Stage: LBStageController, Reason: "NoStatus", Message: "the status names no load balancer yet", Command: describe}
	}
	return LBDiagnosis{}
}

// WriteLoadBalancerTrace draws s: the object → cloud-controller-manager → ELB API →
// targets, then the diagnosis.
func WriteLoadBalancerTrace(w io.Writer, s *LBSnapshot, now time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s\n", s.Kind, s.Namespace, s.Name)
	if svc := s.Service; svc != nil {
		var ports []string
		for _, p := range svc.Spec.Ports {
			ports = append(ports, fmt.Sprintf("%s:%d→node port %d", p.Protocol, p.Port, p.NodePort))
		}
		fmt.Fprintf(&b, "  type %s, ports %s, externalTrafficPolicy %s\n", svc.Spec.Type, strings.Join(ports, " "), svc.Spec.ExternalTrafficPolicy)
	}
	fmt.Fprintf(&b, "  ↓ cloud-controller-manager\n")
	for _, ev := range s.Events {
		fmt.Fprintf(&b, "    %s ago  %s %s: %s", now.Sub(eventFirst(&ev)).Round(time.Second), ev.Type, ev.Reason, ev.Message)
		if ev.Count > 1 {
			fmt.Fprintf(&b, " (×%d)", ev.Count)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "  ↓ ELB API\n")
	switch lb := s.LoadBalancer; {
	case !s.CloudRead:
		b.WriteString("    (the cloud was not read)\n")
	case lb == nil:
		b.WriteString("    no load balancer\n")
	default:
		fmt.Fprintf(&b, "    %s %s %s at %s, listeners %s\n", lb.Name, lb.State, lb.DNSName, lb.Address, strings.Join(lb.Listeners, " "))
		fmt.Fprintf(&b, "  ↓ targets\n")
		for _, t := range lb.Targets {
			fmt.Fprintf(&b, "    %s %s:%d %s %s\n", t.Group, t.ID, t.Port, t.State, t.About)
		}
	}
	d := DiagnoseLoadBalancer(s)
	if d.Stage == "" {
		addr := ""
		if s.LoadBalancer != nil {
			addr = s.LoadBalancer.Address
		}
		fmt.Fprintf(&b, "reachable: %s\n", strings.TrimSpace(addr+" "+lbHostname(s)))
	} else {
		fmt.Fprintf(&b, "stuck at %s: %s: %s\n  see: %s\n", d.Stage, d.Reason, d.Message, d.Command)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteLoadBalancerWhy prints only the diagnosis.
func WriteLoadBalancerWhy(w io.Writer, s *LBSnapshot) error {
	d := DiagnoseLoadBalancer(s)
	var err error
	if d.Stage == "" {
		_, err = fmt.Fprintf(w, "%s %s/%s is not stuck: its load balancer %s answers\n", s.Kind, s.Namespace, s.Name, lbHostname(s))
	} else {
		_, err = fmt.Fprintf(w, "stage: %s\nreason: %s\nmessage: %s\nsee: %s\n", d.Stage, d.Reason, d.Message, d.Command)
	}
	return err
}

func lbHostname(s *LBSnapshot) string {
	switch {
	case s.Service != nil && len(s.Service.Status.LoadBalancer.Ingress) > 0:
		return s.Service.Status.LoadBalancer.Ingress[0].Hostname
	case s.Ingress != nil && len(s.Ingress.Status.LoadBalancer.Ingress) > 0:
		return s.Ingress.Status.LoadBalancer.Ingress[0].Hostname
	}
	return ""
}

var errNotLoadBalancerTarget = errors.New("trace: not a Service or an Ingress")
