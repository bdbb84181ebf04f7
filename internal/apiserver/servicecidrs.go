package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	netutils "k8s.io/utils/net"
)

// defaultServiceCIDRName names the ServiceCIDR the API server keeps for its own
// --service-cluster-ip-range.
const defaultServiceCIDRName = "kubernetes"

// serviceCIDRResources are the rows of the Service IP ranges of networking.k8s.io/v1:
// ServiceCIDR, of which the API server keeps the one of its own range (named
// "kubernetes", Ready), and IPAddress. ClusterIPs are allocated from that range alone
// and reserved in etcd by the API server's allocator: further ServiceCIDRs are stored
// but not allocated from (nothing marks them Ready), and IPAddresses are stored as
// written.
func serviceCIDRResources() []resource {
	return []resource{{
		group: networkingv1.GroupName, version: "v1", kind: "ServiceCIDR", plural: "servicecidrs", singular: "servicecidr", status: true,
		newObj:  func() runtime.Object { return &networkingv1.ServiceCIDR{} },
		newList: func() runtime.Object { return &networkingv1.ServiceCIDRList{} },
		columns: []metav1.TableColumnDefinition{nameCol(),
			col("CIDRs", "string", networkingv1.ServiceCIDRSpec{}.SwaggerDoc()["cidrs"]), ageCol()},
		row: func(o runtime.Object) []interface{} {
			c := o.(*networkingv1.ServiceCIDR)
			return []interface{}{c.Name, strings.Join(c.Spec.CIDRs, ","), age(c.CreationTimestamp)}
		},
		hooks: hooks{
			validate: func(o runtime.Object) field.ErrorList {
				return validateServiceCIDRSpec(o.(*networkingv1.ServiceCIDR).Spec.CIDRs, field.NewPath("spec", "cidrs"))
			},
			validateUpdate: func(o, old runtime.Object) field.ErrorList {
				return validateServiceCIDRUpdate(o.(*networkingv1.ServiceCIDR).Spec.CIDRs, old.(*networkingv1.ServiceCIDR).Spec.CIDRs)
			},
		},
	}, {
		group: networkingv1.GroupName, version: "v1", kind: "IPAddress", plural: "ipaddresses", singular: "ipaddress",
		shortNames: []string{"ip"},
		newObj:     func() runtime.Object { return &networkingv1.IPAddress{} },
		newList:    func() runtime.Object { return &networkingv1.IPAddressList{} },
		columns: []metav1.TableColumnDefinition{nameCol(),
			col("ParentRef", "string", networkingv1.IPAddressSpec{}.SwaggerDoc()["parentRef"])},
		row: func(o runtime.Object) []interface{} {
			ip := o.(*networkingv1.IPAddress)
			return []interface{}{ip.Name, ipAddressParent(ip.Spec.ParentRef)}
		},
		hooks: hooks{
			name: ipAddressName,
			validate: func(o runtime.Object) field.ErrorList {
				return validateIPAddressParentRef(o.(*networkingv1.IPAddress).Spec.ParentRef, field.NewPath("spec", "parentRef"))
			},
			validateUpdate: func(o, old runtime.Object) field.ErrorList {
				return apivalidation.ValidateImmutableField(o.(*networkingv1.IPAddress).Spec.ParentRef,
					old.(*networkingv1.IPAddress).Spec.ParentRef, field.NewPath("spec", "parentRef"))
			},
		},
	}}
}

// validateServiceCIDRSpec: one or two CIDRs in canonical form, two only of different
// IP families.
func validateServiceCIDRSpec(cidrs []string, p *field.Path) field.ErrorList {
	switch {
	case len(cidrs) == 0:
		return field.ErrorList{field.Required(p, "at least one CIDR required")}
	case len(cidrs) > 2:
		return field.ErrorList{field.Invalid(p, networkingv1.ServiceCIDRSpec{CIDRs: cidrs}, "may only hold up to 2 values")}
	}
	var errs field.ErrorList
	for i, c := range cidrs {
		errs = append(errs, utilvalidation.IsValidCIDR(p.Index(i), c)...)
	}
	if len(cidrs) == 2 {
		f0, f1 := netutils.IPFamilyOfCIDRString(cidrs[0]), netutils.IPFamilyOfCIDRString(cidrs[1])
		if f0 == f1 && f0 != netutils.IPFamilyUnknown {
			errs = append(errs, field.Invalid(p, cidrs, "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"))
		}
	}
	return errs
}

// validateServiceCIDRUpdate: the CIDRs never change, but a single-stack range may get
// its second family.
func validateServiceCIDRUpdate(cidrs, old []string) field.ErrorList {
	p := field.NewPath("spec", "cidrs")
	var errs field.ErrorList
	switch {
	case len(cidrs) == len(old):
		for i := range old {
			if cidrs[i] != old[i] {
				errs = append(errs, field.Invalid(p.Index(i), cidrs[i], apivalidation.FieldImmutableErrorMsg))
			}
		}
	case len(old) == 1 && len(cidrs) == 2:
		if cidrs[0] != old[0] {
			errs = append(errs, field.Invalid(p.Index(0), cidrs[0], apivalidation.FieldImmutableErrorMsg))
		}
	default:
		errs = append(errs, field.Invalid(p, cidrs, apivalidation.FieldImmutableErrorMsg))
	}
	return errs
}

// ipAddressName: an IPAddress is named by its address, in canonical form; a generated
// name is checked the same way.
func ipAddressName(name string, prefix bool) []string {
	var msgs []string
	for _, err := range utilvalidation.IsValidIP(&field.Path{}, name) {
		msgs = append(msgs, err.Detail)
	}
	return msgs
}

// validateIPAddressParentRef: a parent is required, with a resource and a name (path
// segments); its group is a DNS subdomain when set (the core group is empty).
func validateIPAddressParentRef(ref *networkingv1.ParentReference, p *field.Path) field.ErrorList {
	if ref == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	if ref.Group != "" {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(ref.Group) {
			errs = append(errs, field.Invalid(p.Child("group"), ref.Group, msg))
		}
	}
	for _, f := range []struct {
		name, value string
		required    bool
	}{{"resource", ref.Resource, true}, {"name", ref.Name, true}, {"namespace", ref.Namespace, false}} {
		if f.value == "" {
			if f.required {
				errs = append(errs, field.Required(p.Child(f.name), ""))
			}
			continue
		}
		for _, msg := range pathSegmentName(f.value, false) {
			errs = append(errs, field.Invalid(p.Child(f.name), f.value, msg))
		}
	}
	return errs
}

// ipAddressParent is how kubectl shows an IPAddress's parent: resource.group[/namespace]/name.
func ipAddressParent(ref *networkingv1.ParentReference) string {
	if ref == nil {
		return "<none>"
	}
	s := strings.ToLower(schema.GroupResource{Group: ref.Group, Resource: ref.Resource}.String())
	if ref.Namespace != "" {
		s += "/" + ref.Namespace
	}
	return s + "/" + ref.Name
}

// defaultServiceCIDR keeps the ServiceCIDR of the API server's own Service range: it
// creates it when missing (again after a delete) and marks it Ready once its CIDRs are
// the server's.
type defaultServiceCIDR struct {
	client kubernetes.Interface
	cidrs  []string
	log    *slog.Logger
}

// defaultServiceCIDRResync is how often the default ServiceCIDR is checked once it is in
// place, as kube-apiserver does.
const defaultServiceCIDRResync = 10 * time.Second

// run syncs until ctx ends: every 100ms until the first sync succeeds, then every interval.
func (d *defaultServiceCIDR) run(ctx context.Context, interval time.Duration) {
	_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		return d.sync(ctx) == nil, nil
	})
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := d.sync(ctx); err != nil {
			d.log.InfoContext(ctx, "default ServiceCIDR not synced", "err", err)
		}
	}, interval)
}

func (d *defaultServiceCIDR) sync(ctx context.Context) error {
	api := d.client.NetworkingV1().ServiceCIDRs()
	cur, err := api.Get(ctx, defaultServiceCIDRName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cur, err = api.Create(ctx, &networkingv1.ServiceCIDR{
			ObjectMeta: metav1.ObjectMeta{Name: defaultServiceCIDRName},
			Spec:       networkingv1.ServiceCIDRSpec{CIDRs: d.cidrs},
		}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("default ServiceCIDR: %w", err)
	}
	if !defaultServiceCIDRNeedsReady(cur, d.cidrs) {
		return nil
	}
	cur = cur.DeepCopy()
	apimeta.SetStatusCondition(&cur.Status.Conditions, metav1.Condition{
		Type: networkingv1.ServiceCIDRConditionReady, Status: metav1.ConditionTrue,
		Message: "Kubernetes default Service CIDR is ready",
	})
	if _, err := api.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("default ServiceCIDR status: %w", err)
	}
	return nil
}

// defaultServiceCIDRNeedsReady: the default ServiceCIDR, not being deleted, has the
// server's CIDRs and no Ready condition yet (or an Unknown one). A Ready=False someone
// else wrote is left alone, as is a ServiceCIDR whose CIDRs differ from the server's.
func defaultServiceCIDRNeedsReady(c *networkingv1.ServiceCIDR, cidrs []string) bool {
	if c.DeletionTimestamp != nil || !slices.Equal(c.Spec.CIDRs, cidrs) {
		return false
	}
	ready := apimeta.FindStatusCondition(c.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
	return ready == nil || ready.Status == metav1.ConditionUnknown
}
