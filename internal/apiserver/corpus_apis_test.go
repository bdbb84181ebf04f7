package apiserver_test

// servedAPICorpusKinds are the corpus cases of ServiceCIDR, IPAddress and
// StorageVersionMigration.
func servedAPICorpusKinds() []corpusKind {
	serviceCIDR := corpusKind{kind: "ServiceCIDR", apiVersion: "networking.k8s.io/v1", resource: "servicecidrs",
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"cidrs": cl{"192.0.2.0/24"}}},
		cases: []corpusCase{
			{"dual-stack", setTo("spec.cidrs", cl{"192.0.2.0/24", "2001:db8::/64"}), nil},
			{"no-cidrs", without("spec.cidrs"), nil},
			{"empty-cidrs", setTo("spec.cidrs", cl{}), nil},
			{"three-cidrs", setTo("spec.cidrs", cl{"192.0.2.0/24", "2001:db8::/64", "198.51.100.0/24"}), nil},
			{"same-family-twice", setTo("spec.cidrs", cl{"192.0.2.0/24", "198.51.100.0/24"}), nil},
			{"not-canonical", setTo("spec.cidrs", cl{"192.0.2.1/24"}), nil},
			{"not-a-cidr", setTo("spec.cidrs", cl{"192.0.2.0"}), nil},
			{"leading-zeros", setTo("spec.cidrs", cl{"192.000.2.0/24"}), nil},
			{"ipv6-not-canonical", setTo("spec.cidrs", cl{"2001:DB8::/64"}), nil},
			{"status-dropped", setTo("status", cm{"conditions": cl{cm{"type": "Ready", "status": "True", "reason": "Set",
				"message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}}}), nil},
		},
	}
	ipAddress := corpusKind{kind: "IPAddress", apiVersion: "networking.k8s.io/v1", resource: "ipaddresses",
		base: cm{"metadata": cm{"name": "192.0.2.10"}, "spec": cm{"parentRef": cm{"group": "", "resource": "services", "namespace": "default", "name": "web"}}},
		cases: []corpusCase{
			{"ipv6", setTo("metadata.name", "2001:db8::10"), nil},
			{"ipv6-not-canonical", setTo("metadata.name", "2001:db8:0::10"), nil},
			{"ipv6-uppercase", setTo("metadata.name", "2001:DB8::10"), nil},
			{"ipv4-mapped-ipv6", setTo("metadata.name", "::ffff:192.0.2.10"), nil},
			{"leading-zeros", setTo("metadata.name", "192.0.2.010"), nil},
			{"not-an-ip", setTo("metadata.name", "web"), nil},
			{"parent-missing", without("spec.parentRef"), nil},
			{"parent-resource-missing", without("spec.parentRef.resource"), nil},
			{"parent-name-missing", without("spec.parentRef.name"), nil},
			{"parent-name-with-slash", setTo("spec.parentRef.name", "a/b"), nil},
			{"parent-resource-dot-dot", setTo("spec.parentRef.resource", ".."), nil},
			{"parent-namespace-percent", setTo("spec.parentRef.namespace", "a%b"), nil},
			{"parent-group-bad", setTo("spec.parentRef.group", "My_Group"), nil},
			{"parent-cluster-scoped", without("spec.parentRef.namespace"), nil},
		},
	}
	storageVersionMigration := corpusKind{kind: "StorageVersionMigration", apiVersion: "storagemigration.k8s.io/v1", resource: "storageversionmigrations",
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"resource": cm{"group": "apps", "resource": "deployments"}}},
		cases: []corpusCase{
			{"core-group", setTo("spec.resource", cm{"group": "", "resource": "secrets"}), nil},
			{"resource-missing", without("spec.resource.resource"), nil},
			{"resource-uppercase", setTo("spec.resource.resource", "Deployments"), nil},
			{"resource-with-dot", setTo("spec.resource.resource", "deployments.apps"), nil},
			{"resource-leading-digit", setTo("spec.resource.resource", "1deployments"), nil},
			{"group-bad", setTo("spec.resource.group", "My_Group"), nil},
			{"status-dropped", setTo("status", cm{"resourceVersion": "12", "conditions": cl{cm{"type": "Succeeded", "status": "True",
				"reason": "Done", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}}}), nil},
		},
	}
	return []corpusKind{serviceCIDR, ipAddress, storageVersionMigration}
}
