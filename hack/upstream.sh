#!/usr/bin/env bash
# Builds upstream Kubernetes components from the k8s.io/kubernetes Go module, the
# references kubelab's benchmarks run beside its own: by default the release whose
# libraries kubelab builds on (k8s.io/apiserver's version in go.mod), each into
# ${OUT:-/tmp/kubelab-upstream}/<component>. Needs Go and the module proxy.
#
#   hack/upstream.sh                       # kube-apiserver
#   hack/upstream.sh kube-scheduler kube-proxy
#   KUBELAB_KUBE_APISERVER=/tmp/kubelab-upstream/kube-apiserver \
#     go test ./internal/apiserver -run '^$' -bench AgainstKubeAPIServer -benchtime 4000x
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
lib="$(cd "$repo" && go list -m -f '{{.Version}}' k8s.io/apiserver)" # v0.MINOR.PATCH
version="${VERSION:-v1.${lib#v0.}}"
staging="v0.${version#v1.}" # the libraries of release v1.X.Y are tagged v0.X.Y
out="${OUT:-/tmp/kubelab-upstream}"
components=("$@")
[ ${#components[@]} -gt 0 ] || components=(kube-apiserver)
for c in "${components[@]}"; do
	case "$c" in
	kube-apiserver | kube-scheduler | kube-proxy | kube-controller-manager) ;;
	*)
		echo "upstream.sh: unknown component $c (kube-apiserver, kube-scheduler, kube-proxy, kube-controller-manager)" >&2
		exit 2
		;;
	esac
done
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
	printf 'module kubelab-upstream\n\ngo %s\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' \
		"$(go env GOVERSION | sed 's/^go//')" "$version"
	awk -v v="$staging" '/=> \.\/staging\/src\// {printf "\t%s => %s %s\n", $1, $1, v}' "$gomod"
	printf ')\n'
} >go.mod
{
	printf 'package main\n\nimport (\n'
	for c in "${components[@]}"; do
		printf '\t_ "k8s.io/kubernetes/cmd/%s/app"\n' "$c"
	done
	printf ')\n\nfunc main() {}\n'
} >main.go
go mod tidy
for c in "${components[@]}"; do
	go build -o "$out/$c" "k8s.io/kubernetes/cmd/$c"
	echo "$out/$c ($version)"
done
