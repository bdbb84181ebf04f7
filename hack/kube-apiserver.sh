#!/usr/bin/env bash
# Builds the upstream kube-apiserver, the reference of BenchmarkAgainstKubeAPIServer
# (internal/apiserver), from the k8s.io/kubernetes Go module: by default the release
# whose libraries kubelab builds on (k8s.io/apiserver's version in go.mod), into
# ${OUT:-/tmp/kubelab-kube-apiserver}/kube-apiserver. Needs Go and the module proxy.
#
#   hack/kube-apiserver.sh
#   KUBELAB_KUBE_APISERVER=/tmp/kubelab-kube-apiserver/kube-apiserver \
#     go test ./internal/apiserver -run '^$' -bench AgainstKubeAPIServer -benchtime 4000x
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
lib="$(cd "$repo" && go list -m -f '{{.Version}}' k8s.io/apiserver)" # v0.MINOR.PATCH
version="${VERSION:-v1.${lib#v0.}}"
staging="v0.${version#v1.}" # the libraries of release v1.X.Y are tagged v0.X.Y
out="${OUT:-/tmp/kubelab-kube-apiserver}"
mkdir -p "$out/src"
cd "$out/src"

# k8s.io/kubernetes points its staging libraries at ./staging; a module that builds it
# points them at their published versions instead.
gomod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$version.mod"
if ! go mod download k8s.io/kubernetes@"$version"; then
	echo "k8s.io/kubernetes@$version cannot be downloaded here; set VERSION to a release the module proxy serves (e.g. VERSION=v1.36.3)" >&2
	exit 1
fi
{
	printf 'module kubelab-kube-apiserver\n\ngo %s\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' \
		"$(go env GOVERSION | sed 's/^go//')" "$version"
	awk -v v="$staging" '/=> \.\/staging\/src\// {printf "\t%s => %s %s\n", $1, $1, v}' "$gomod"
	printf ')\n'
} >go.mod
printf 'package main\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver/app"\n\nfunc main() {}\n' >main.go
go mod tidy
go build -o "$out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
echo "$out/kube-apiserver ($version)"
