package auth

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/auth/rbac/reconciliation"
)

// ReconcilePolicy writes the bootstrap policy through client: a missing role or binding
// is created (and a Role's namespace with it); an existing one gets the rules, aggregation selectors and subjects it
// lacks (nothing a cluster's owner added is removed); one annotated
// rbac.authorization.kubernetes.io/autoupdate: "false" is left alone.
func ReconcilePolicy(ctx context.Context, client kubernetes.Interface) error {
	var errs []error
	roles := reconciliation.ClusterRoleModifier{Client: client.RbacV1().ClusterRoles()}
	for _, r := range ClusterRoles() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		opts := reconciliation.ReconcileRoleOptions{Role: reconciliation.ClusterRoleRuleOwner{ClusterRole: r.DeepCopy()},
			Client: roles, Confirm: true}
		if _, err := opts.Run(); err != nil {
			errs = append(errs, fmt.Errorf("clusterrole %s: %w", r.Name, err))
		}
	}
	bindings := reconciliation.ClusterRoleBindingClientAdapter{Client: client.RbacV1().ClusterRoleBindings()}
	for _, b := range ClusterRoleBindings() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		opts := reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: b.DeepCopy()},
			Client:      bindings, Confirm: true}
		if _, err := opts.Run(); err != nil {
			errs = append(errs, fmt.Errorf("clusterrolebinding %s: %w", b.Name, err))
		}
	}
	namespaced := reconciliation.RoleModifier{Client: client.RbacV1(), NamespaceClient: client.CoreV1().Namespaces()}
	for _, r := range Roles() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		opts := reconciliation.ReconcileRoleOptions{Role: reconciliation.RoleRuleOwner{Role: r.DeepCopy()},
			Client: namespaced, Confirm: true}
		if _, err := opts.Run(); err != nil {
			errs = append(errs, fmt.Errorf("role %s/%s: %w", r.Namespace, r.Name, err))
		}
	}
	roleBindings := reconciliation.RoleBindingClientAdapter{Client: client.RbacV1(), NamespaceClient: client.CoreV1().Namespaces()}
	for _, b := range RoleBindings() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		opts := reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.RoleBindingAdapter{RoleBinding: b.DeepCopy()},
			Client:      roleBindings, Confirm: true}
		if _, err := opts.Run(); err != nil {
			errs = append(errs, fmt.Errorf("rolebinding %s/%s: %w", b.Namespace, b.Name, err))
		}
	}
	return errors.Join(errs...)
}
