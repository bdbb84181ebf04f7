package apiserver_test

import "strings"

// corpusDRAKinds are the corpus's cases of resource.k8s.io/v1.
func corpusDRAKinds() []corpusKind {
	many := func(n int, item func(i int) any) cl {
		var out cl
		for i := range n {
			out = append(out, item(i))
		}
		return out
	}
	selector := func(expr string) cm { return cm{"cel": cm{"expression": expr}} }
	opaque := func(driver string, params any) cm { return cm{"opaque": cm{"driver": driver, "parameters": params}} }
	deviceClass := corpusKind{kind: "DeviceClass", apiVersion: "resource.k8s.io/v1", resource: "deviceclasses",
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"selectors": cl{selector(`device.driver == "dra.example.com"`)}}},
		cases: []corpusCase{
			{"spec-empty", setTo("spec", cm{}), nil},
			{"selector-without-cel", setTo("spec.selectors", cl{cm{}}), nil},
			{"selector-expression-empty", setTo("spec.selectors", cl{selector("")}), nil},
			{"selector-expression-too-long", setTo("spec.selectors", cl{selector(strings.Repeat("a", 10*1024+1))}), nil},
			{"selector-expression-syntax-error", setTo("spec.selectors", cl{selector("device.driver ==")}), nil},
			{"selectors-too-many", setTo("spec.selectors", many(33, func(int) any { return selector("true") })), nil},
			{"config-opaque", setTo("spec.config", cl{opaque("dra.example.com", cm{"a": 1})}), nil},
			{"config-without-opaque", setTo("spec.config", cl{cm{}}), nil},
			{"config-driver-bad", setTo("spec.config", cl{opaque("Bad_Driver", cm{})}), nil},
			{"config-driver-missing", setTo("spec.config", cl{cm{"opaque": cm{"parameters": cm{}}}}), nil},
			{"config-parameters-missing", setTo("spec.config", cl{cm{"opaque": cm{"driver": "dra.example.com"}}}), nil},
			{"config-parameters-not-object", setTo("spec.config", cl{opaque("dra.example.com", cl{1})}), nil},
			{"config-parameters-too-large", setTo("spec.config", cl{opaque("dra.example.com", cm{"a": strings.Repeat("a", 10*1024)})}), nil},
			{"extended-resource-name", setTo("spec.extendedResourceName", "example.com/gpu"), nil},
			{"extended-resource-name-unqualified", setTo("spec.extendedResourceName", "gpu"), nil},
			{"extended-resource-name-native", setTo("spec.extendedResourceName", "kubernetes.io/gpu"), nil},
		},
	}
	request := cm{"name": "req-0", "exactly": cm{"deviceClassName": "dra.example.com"}}
	claimCases := func(prefix string) []corpusCase {
		r := prefix + "devices.requests.0"
		return []corpusCase{
			{"request-name-bad", setTo(r+".name", "Req_0"), nil},
			{"request-name-missing", without(r + ".name"), nil},
			{"request-neither", without(r + ".exactly"), nil},
			{"request-both", setTo(r+".firstAvailable", cl{cm{"name": "a", "deviceClassName": "c"}}), nil},
			{"requests-duplicate", dupFirst(prefix + "devices.requests"), nil},
			{"requests-too-many", setTo(prefix+"devices.requests", many(33, func(i int) any {
				return cm{"name": "r" + strings.Repeat("x", i), "exactly": cm{"deviceClassName": "c"}}
			})), nil},
			{"device-class-missing", without(r + ".exactly.deviceClassName"), nil},
			{"device-class-bad", setTo(r+".exactly.deviceClassName", "Bad_Class"), nil},
			{"allocation-mode-all", setTo(r+".exactly.allocationMode", "All"), nil},
			{"allocation-mode-all-with-count", allOf(setTo(r+".exactly.allocationMode", "All"), setTo(r+".exactly.count", 2)), nil},
			{"allocation-mode-bad", setTo(r+".exactly.allocationMode", "Some"), nil},
			{"count-negative", setTo(r+".exactly.count", -1), nil},
			{"count-two", setTo(r+".exactly.count", 2), nil},
			{"selectors", setTo(r+".exactly.selectors", cl{selector("true")}), nil},
			{"selector-without-cel", setTo(r+".exactly.selectors", cl{cm{}}), nil},
			{"first-available", setTo(r, cm{"name": "req-0", "firstAvailable": cl{cm{"name": "a", "deviceClassName": "c"}, cm{"name": "b", "deviceClassName": "d", "count": 2}}}), nil},
			{"first-available-duplicate", setTo(r, cm{"name": "req-0", "firstAvailable": cl{cm{"name": "a", "deviceClassName": "c"}, cm{"name": "a", "deviceClassName": "c"}}}), nil},
			{"first-available-too-many", setTo(r, cm{"name": "req-0", "firstAvailable": many(9, func(i int) any {
				return cm{"name": "s" + strings.Repeat("x", i), "deviceClassName": "c"}
			})}), nil},
			{"first-available-class-missing", setTo(r, cm{"name": "req-0", "firstAvailable": cl{cm{"name": "a"}}}), nil},
			{"toleration-exists", setTo(r+".exactly.tolerations", cl{cm{"key": "example.com/k", "operator": "Exists", "effect": "NoSchedule"}}), nil},
			{"toleration-equal-default", setTo(r+".exactly.tolerations", cl{cm{"key": "k", "value": "v"}}), nil},
			{"toleration-exists-with-value", setTo(r+".exactly.tolerations", cl{cm{"key": "k", "operator": "Exists", "value": "v"}}), nil},
			{"toleration-operator-bad", setTo(r+".exactly.tolerations", cl{cm{"key": "k", "operator": "In"}}), nil},
			{"toleration-effect-bad", setTo(r+".exactly.tolerations", cl{cm{"key": "k", "operator": "Exists", "effect": "Evict"}}), nil},
			{"toleration-key-bad", setTo(r+".exactly.tolerations", cl{cm{"key": "bad key", "operator": "Exists"}}), nil},
			{"constraint-match-attribute", setTo(prefix+"devices.constraints", cl{cm{"matchAttribute": "dra.example.com/model"}}), nil},
			{"constraint-requests", setTo(prefix+"devices.constraints", cl{cm{"requests": cl{"req-0"}, "matchAttribute": "dra.example.com/model"}}), nil},
			{"constraint-unqualified", setTo(prefix+"devices.constraints", cl{cm{"matchAttribute": "model"}}), nil},
			{"constraint-attribute-bad", setTo(prefix+"devices.constraints", cl{cm{"matchAttribute": "dra.example.com/bad-name"}}), nil},
			{"constraint-request-unknown", setTo(prefix+"devices.constraints", cl{cm{"requests": cl{"nope"}, "matchAttribute": "dra.example.com/model"}}), nil},
			{"constraint-without-attribute", setTo(prefix+"devices.constraints", cl{cm{}}), nil},
			{"config", setTo(prefix+"devices.config", cl{cm{"requests": cl{"req-0"}, "opaque": cm{"driver": "dra.example.com", "parameters": cm{"a": 1}}}}), nil},
			{"config-request-unknown", setTo(prefix+"devices.config", cl{cm{"requests": cl{"nope"}, "opaque": cm{"driver": "dra.example.com", "parameters": cm{}}}}), nil},
			{"config-without-opaque", setTo(prefix+"devices.config", cl{cm{}}), nil},
		}
	}
	resourceClaim := corpusKind{kind: "ResourceClaim", apiVersion: "resource.k8s.io/v1", resource: "resourceclaims", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"devices": cm{"requests": cl{request}}}},
		cases: append(claimCases("spec."),
			corpusCase{"spec-empty", setTo("spec", cm{}), nil},
			corpusCase{"status-on-create", setTo("status", cm{"allocation": cm{}}), nil},
		),
	}
	resourceClaimTemplate := corpusKind{kind: "ResourceClaimTemplate", apiVersion: "resource.k8s.io/v1", resource: "resourceclaimtemplates", namespaced: true,
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"spec": cm{"devices": cm{"requests": cl{request}}}}},
		cases: append(claimCases("spec.spec."),
			corpusCase{"template-labels", setTo("spec.metadata", cm{"labels": cm{"app": "web"}, "annotations": cm{"a": "b"}}), nil},
			corpusCase{"template-label-bad", setTo("spec.metadata", cm{"labels": cm{"bad key": "x"}}), nil},
			corpusCase{"template-name", setTo("spec.metadata", cm{"name": "x"}), nil},
			corpusCase{"template-namespace-and-finalizers", setTo("spec.metadata", cm{"namespace": "x", "finalizers": cl{"example.com/f"}}), nil},
		),
	}
	device := func(extra cm) cm {
		d := cm{"name": "device-0"}
		for k, v := range extra {
			d[k] = v
		}
		return d
	}
	resourceSlice := corpusKind{kind: "ResourceSlice", apiVersion: "resource.k8s.io/v1", resource: "resourceslices",
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"driver": "dra.example.com", "nodeName": "node-1",
			"pool": cm{"name": "pool", "generation": 1, "resourceSliceCount": 1}}},
		cases: []corpusCase{
			{"driver-missing", without("spec.driver"), nil},
			{"driver-bad", setTo("spec.driver", "bad_driver"), nil},
			{"driver-uppercase", setTo("spec.driver", "DRA.example.com"), nil},
			{"driver-64", setTo("spec.driver", strings.Repeat("a", 64)), nil},
			{"pool-name-missing", without("spec.pool.name"), nil},
			{"pool-name-slashes", setTo("spec.pool.name", "a/b.c"), nil},
			{"pool-name-empty-part", setTo("spec.pool.name", "a//b"), nil},
			{"pool-name-bad", setTo("spec.pool.name", "Pool_1"), nil},
			{"pool-slice-count-zero", setTo("spec.pool.resourceSliceCount", 0), nil},
			{"pool-generation-negative", setTo("spec.pool.generation", -1), nil},
			{"node-name-empty", setTo("spec.nodeName", ""), nil},
			{"node-name-bad", setTo("spec.nodeName", "Node_1"), nil},
			{"node-selection-missing", without("spec.nodeName"), nil},
			{"all-nodes-and-node-name", setTo("spec.allNodes", true), nil},
			{"all-nodes", allOf(without("spec.nodeName"), setTo("spec.allNodes", true)), nil},
			{"all-nodes-false", allOf(without("spec.nodeName"), setTo("spec.allNodes", false)), nil},
			{"node-selector", allOf(without("spec.nodeName"), setTo("spec.nodeSelector", cm{"nodeSelectorTerms": cl{
				cm{"matchExpressions": cl{cm{"key": "zone", "operator": "In", "values": cl{"a"}}}}}})), nil},
			{"node-selector-two-terms", allOf(without("spec.nodeName"), setTo("spec.nodeSelector", cm{"nodeSelectorTerms": cl{
				cm{"matchExpressions": cl{cm{"key": "zone", "operator": "Exists"}}}, cm{"matchExpressions": cl{cm{"key": "rack", "operator": "Exists"}}}}})), nil},
			{"node-selector-no-terms", allOf(without("spec.nodeName"), setTo("spec.nodeSelector", cm{"nodeSelectorTerms": cl{}})), nil},
			{"node-selector-operator-bad", allOf(without("spec.nodeName"), setTo("spec.nodeSelector", cm{"nodeSelectorTerms": cl{
				cm{"matchExpressions": cl{cm{"key": "zone", "operator": "Near"}}}}})), nil},
			{"devices", setTo("spec.devices", cl{device(cm{
				"attributes": cm{"model": cm{"string": "a"}, "dra.example.com/version": cm{"version": "1.0.0"}, "index": cm{"int": 1}},
				"capacity":   cm{"memory": cm{"value": "1Gi"}}})}), nil},
			{"device-name-bad", setTo("spec.devices", cl{cm{"name": "Device_0"}}), nil},
			{"device-name-missing", setTo("spec.devices", cl{cm{}}), nil},
			{"devices-duplicate", setTo("spec.devices", cl{device(nil), device(nil)}), nil},
			{"devices-too-many", setTo("spec.devices", many(129, func(i int) any { return cm{"name": "d" + strings.Repeat("x", i%60) + string(rune('a'+i/60))} })), nil},
			{"attribute-without-value", setTo("spec.devices", cl{device(cm{"attributes": cm{"model": cm{}}})}), nil},
			{"attribute-two-values", setTo("spec.devices", cl{device(cm{"attributes": cm{"model": cm{"string": "a", "int": 1}}})}), nil},
			{"attribute-version-bad", setTo("spec.devices", cl{device(cm{"attributes": cm{"v": cm{"version": "1.0"}}})}), nil},
			{"attribute-string-too-long", setTo("spec.devices", cl{device(cm{"attributes": cm{"s": cm{"string": strings.Repeat("a", 65)}}})}), nil},
			{"attribute-name-bad", setTo("spec.devices", cl{device(cm{"attributes": cm{"bad-name": cm{"int": 1}}})}), nil},
			{"attribute-name-too-long", setTo("spec.devices", cl{device(cm{"attributes": cm{strings.Repeat("a", 33): cm{"int": 1}}})}), nil},
			{"attribute-domain-bad", setTo("spec.devices", cl{device(cm{"attributes": cm{"Bad_Domain/model": cm{"int": 1}}})}), nil},
			{"attribute-domain-empty", setTo("spec.devices", cl{device(cm{"attributes": cm{"/model": cm{"int": 1}}})}), nil},
			{"attributes-too-many", setTo("spec.devices", cl{device(cm{"attributes": func() cm {
				out := cm{}
				for i := range 33 {
					out["a"+strings.Repeat("x", i)] = cm{"int": i}
				}
				return out
			}()})}), nil},
			{"capacity-name-bad", setTo("spec.devices", cl{device(cm{"capacity": cm{"bad-name": cm{"value": "1"}}})}), nil},
			{"device-taint", setTo("spec.devices", cl{device(cm{"taints": cl{cm{"key": "example.com/k", "value": "v", "effect": "NoExecute"}}})}), nil},
			{"device-taint-effect-bad", setTo("spec.devices", cl{device(cm{"taints": cl{cm{"key": "k", "effect": "Evict"}}})}), nil},
			{"device-taint-key-missing", setTo("spec.devices", cl{device(cm{"taints": cl{cm{"effect": "NoSchedule"}}})}), nil},
			{"device-node-name-without-per-device", setTo("spec.devices", cl{device(cm{"nodeName": "node-1"})}), nil},
		},
	}
	deviceTaintRule := corpusKind{kind: "DeviceTaintRule", apiVersion: "resource.k8s.io/v1", resource: "devicetaintrules",
		base: cm{"metadata": cm{"name": "base"}, "spec": cm{"taint": cm{"key": "example.com/taint", "effect": "NoSchedule"}}},
		cases: []corpusCase{
			{"effect-none", setTo("spec.taint.effect", "None"), nil},
			{"effect-missing", without("spec.taint.effect"), nil},
			{"effect-bad", setTo("spec.taint.effect", "Evict"), nil},
			{"key-missing", without("spec.taint.key"), nil},
			{"key-bad", setTo("spec.taint.key", "bad key"), nil},
			{"value", setTo("spec.taint.value", "v"), nil},
			{"value-bad", setTo("spec.taint.value", "-bad-"), nil},
			{"time-added", setTo("spec.taint.timeAdded", "2024-01-01T00:00:00Z"), nil},
			{"selector", setTo("spec.deviceSelector", cm{"driver": "dra.example.com", "pool": "pool", "device": "device-0"}), nil},
			{"selector-driver-bad", setTo("spec.deviceSelector", cm{"driver": "bad_driver"}), nil},
			{"selector-pool-bad", setTo("spec.deviceSelector", cm{"pool": "Pool_1"}), nil},
			{"selector-device-bad", setTo("spec.deviceSelector", cm{"device": "Device_0"}), nil},
			{"status-on-create", setTo("status", cm{"conditions": cl{cm{"type": "Ready", "status": "True", "reason": "R", "message": "",
				"lastTransitionTime": "2024-01-01T00:00:00Z"}}}), nil},
		},
	}
	return []corpusKind{deviceClass, resourceClaim, resourceClaimTemplate, resourceSlice, deviceTaintRule}
}
