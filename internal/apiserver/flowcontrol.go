package apiserver

import (
	"context"
	"fmt"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fcbootstrap "k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// flowcontrolResources are the rows of flowcontrol.apiserver.k8s.io/v1. The objects are
// stored and listed, with the suggested and mandatory configuration the API server
// writes at start; kubelab limits concurrency with max-inflight, not by them.
func flowcontrolResources() []resource {
	fc := func(r resource) resource {
		r.group, r.version, r.status, r.generation = "flowcontrol.apiserver.k8s.io", "v1", true, true
		return r
	}
	return []resource{
		fc(resource{
			kind: "FlowSchema", plural: "flowschemas", singular: "flowschema",
			newObj: func() runtime.Object { return &flowcontrolv1.FlowSchema{} }, newList: func() runtime.Object { return &flowcontrolv1.FlowSchemaList{} },
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("PriorityLevel", "string", "The priority level the matching requests go to."),
				col("MatchingPrecedence", "string", "Lower values are matched first."),
				col("DistinguisherMethod", "string", "How flows are told apart."), ageCol(),
				col("MissingPL", "string", "Whether the priority level is missing.")},
			row: func(o runtime.Object) []interface{} {
				f := o.(*flowcontrolv1.FlowSchema)
				method := "<none>"
				if f.Spec.DistinguisherMethod != nil {
					method = string(f.Spec.DistinguisherMethod.Type)
				}
				missing := "?"
				for _, c := range f.Status.Conditions {
					if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
						missing = string(c.Status)
					}
				}
				return []interface{}{f.Name, f.Spec.PriorityLevelConfiguration.Name, fmt.Sprint(f.Spec.MatchingPrecedence), method, age(f.CreationTimestamp), missing}
			},
		}),
		fc(resource{
			kind: "PriorityLevelConfiguration", plural: "prioritylevelconfigurations", singular: "prioritylevelconfiguration",
			newObj:  func() runtime.Object { return &flowcontrolv1.PriorityLevelConfiguration{} },
			newList: func() runtime.Object { return &flowcontrolv1.PriorityLevelConfigurationList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("Type", "string", "Exempt or Limited."),
				col("NominalConcurrencyShares", "string", "The share of the server's concurrency."),
				col("Queues", "string", "The number of queues."), col("HandSize", "string", "Shuffle sharding's hand size."),
				col("QueueLengthLimit", "string", "The length of each queue."), ageCol()},
			row: func(o runtime.Object) []interface{} {
				p := o.(*flowcontrolv1.PriorityLevelConfiguration)
				shares, queues, hand, limit := "<none>", "<none>", "<none>", "<none>"
				if l := p.Spec.Limited; l != nil {
					shares = fmt.Sprint(ptr.Deref(l.NominalConcurrencyShares, 0))
					if q := l.LimitResponse.Queuing; q != nil {
						queues, hand, limit = fmt.Sprint(q.Queues), fmt.Sprint(q.HandSize), fmt.Sprint(q.QueueLengthLimit)
					}
				}
				return []interface{}{p.Name, string(p.Spec.Type), shares, queues, hand, limit, age(p.CreationTimestamp)}
			},
		}),
	}
}

// ensureFlowControlDefaults creates the mandatory and suggested FlowSchemas and
// PriorityLevelConfigurations that are missing, as kube-apiserver does at start.
func ensureFlowControlDefaults(ctx context.Context, client kubernetes.Interface) error {
	levels := append(append([]*flowcontrolv1.PriorityLevelConfiguration{}, fcbootstrap.MandatoryPriorityLevelConfigurations...),
		fcbootstrap.SuggestedPriorityLevelConfigurations...)
	for _, pl := range levels {
		pl = pl.DeepCopy()
		if _, err := client.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, pl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("priority level %s: %w", pl.Name, err)
		}
	}
	schemas := append(append([]*flowcontrolv1.FlowSchema{}, fcbootstrap.MandatoryFlowSchemas...), fcbootstrap.SuggestedFlowSchemas...)
	for _, fs := range schemas {
		fs = fs.DeepCopy()
		if _, err := client.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("flow schema %s: %w", fs.Name, err)
		}
	}
	return nil
}
