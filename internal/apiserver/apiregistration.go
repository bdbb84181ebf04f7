package apiserver

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

// apiregistrationResources is the row of apiregistration.k8s.io/v1 APIServices. kubelab
// writes one Local APIService per group version it serves, as kube-apiserver's
// aggregator lists them; an APIService naming a Service has its group version served
// by that Service's server (aggregator.go).
func apiregistrationResources() []resource {
	return []resource{{
		group: "apiregistration.k8s.io", version: "v1", kind: "APIService", plural: "apiservices", singular: "apiservice",
		categories: []string{"api-extensions"}, status: true, generation: true,
		newObj: func() runtime.Object { return &apiregistrationv1.APIService{} }, newList: func() runtime.Object { return &apiregistrationv1.APIServiceList{} },
		columns: []metav1.TableColumnDefinition{nameCol(), col("Service", "string", "The service that serves the group version."),
			col("Available", "string", "Whether the group version is available."), ageCol()},
		row: func(o runtime.Object) []interface{} {
			a := o.(*apiregistrationv1.APIService)
			svc := "Local"
			if a.Spec.Service != nil {
				svc = a.Spec.Service.Namespace + "/" + a.Spec.Service.Name
			}
			available := "Unknown"
			for _, c := range a.Status.Conditions {
				if c.Type == apiregistrationv1.Available {
					available = string(c.Status)
					if c.Status != apiregistrationv1.ConditionTrue {
						available += " (" + c.Reason + ")"
					}
				}
			}
			return []interface{}{a.Name, svc, available, age(a.CreationTimestamp)}
		},
		hooks: hooks{
			name: func(name string, prefix bool) []string { return nil },
			validate: func(o runtime.Object) field.ErrorList {
				a := o.(*apiregistrationv1.APIService)
				// The core group's is "v1.", as kube-aggregator names it.
				if want := a.Spec.Version + "." + a.Spec.Group; a.Name != want {
					return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), a.Name, "must be `spec.version+\".\"+spec.group`: \""+want+"\"")}
				}
				return nil
			},
		},
	}}
}

// localAPIService is the APIService of a group version kubelab serves itself.
func localAPIService(group, version string, groupPriority, versionPriority int32) *apiregistrationv1.APIService {
	name := version + "." + group // "v1." for the core group
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kube-aggregator.kubernetes.io/automanaged": "onstart"}},
		Spec: apiregistrationv1.APIServiceSpec{Group: group, Version: version,
			GroupPriorityMinimum: groupPriority, VersionPriority: versionPriority},
	}
}

// ensureAPIServices writes a Local APIService for each group version in gvs that lacks
// one (the aggregation's local availability controller marks them Available).
func ensureAPIServices(ctx context.Context, client dynamic.Interface, gvs [][2]string) error {
	res := client.Resource(apiregistrationv1.SchemeGroupVersion.WithResource("apiservices"))
	for i, gv := range gvs {
		svc := localAPIService(gv[0], gv[1], int32(18000-100*i), 15)
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(svc)
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{Object: u}
		obj.SetAPIVersion(apiregistrationv1.SchemeGroupVersion.String())
		obj.SetKind("APIService")
		_, err = res.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("apiservice %s: %w", svc.Name, err)
		}
	}
	return nil
}
