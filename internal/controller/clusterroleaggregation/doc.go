// Package clusterroleaggregation is the controller that fills aggregated ClusterRoles:
// a ClusterRole with an aggregationRule (admin, edit and view among the bootstrap
// roles) gets as its rules the union of the rules of every ClusterRole its selectors
// match, so that labelling a ClusterRole rbac.authorization.k8s.io/aggregate-to-view:
// "true" extends what "view" grants. It is part of the request path's authorization
// step: RBAC evaluates the rules this controller writes.
//
// Contract: New registers informers on the factory; Run waits for them and keeps every
// aggregated ClusterRole's rules equal to aggregate(role, all roles) until ctx ends.
package clusterroleaggregation
