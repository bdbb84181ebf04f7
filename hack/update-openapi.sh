#!/usr/bin/env bash
# Regenerates internal/apiserver/openapi/zz_generated.openapi.go from the k8s.io types.
set -euo pipefail
cd "$(dirname "$0")/.."
go install k8s.io/kube-openapi/cmd/openapi-gen@"$(go list -m -f '{{.Version}}' k8s.io/kube-openapi)"
"$(go env GOPATH)/bin/openapi-gen" --output-dir internal/apiserver/openapi \
	--output-pkg github.com/kubelab/kubelab/internal/apiserver/openapi \
	--output-file zz_generated.openapi.go --go-header-file hack/boilerplate.go.txt \
	--report-filename /dev/null \
	k8s.io/api/core/v1 k8s.io/api/apps/v1 k8s.io/api/storage/v1 k8s.io/api/discovery/v1 \
	k8s.io/api/coordination/v1 k8s.io/api/events/v1 k8s.io/api/rbac/v1 k8s.io/api/policy/v1 \
	k8s.io/api/autoscaling/v1 k8s.io/api/networking/v1 k8s.io/api/admissionregistration/v1 \
	k8s.io/api/authentication/v1 k8s.io/api/authorization/v1 k8s.io/api/batch/v1 k8s.io/api/autoscaling/v2 \
	k8s.io/api/scheduling/v1 k8s.io/api/scheduling/v1alpha3 k8s.io/api/node/v1 k8s.io/api/certificates/v1 k8s.io/api/flowcontrol/v1 \
	k8s.io/api/resource/v1 k8s.io/api/storagemigration/v1 \
	k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1 k8s.io/kube-aggregator/pkg/apis/apiregistration/v1 \
	k8s.io/metrics/pkg/apis/metrics/v1beta1 \
	k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/runtime \
	k8s.io/apimachinery/pkg/version k8s.io/apimachinery/pkg/util/intstr k8s.io/apimachinery/pkg/api/resource
