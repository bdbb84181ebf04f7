#!/usr/bin/env bash
# Builds kubelab into ${1:-bin/kubelab} and the pod sandbox's pause process,
# kubelab-pause, static next to it (the image registry.k8s.io/pause that kubelab serves
# is built from that file), and the nodes' CNI plugin, kubelab-cni, static next to it too.
# The embedded kubectl reports the Kubernetes
# release of the k8s.io libraries kubelab is built on (k8s.io/client-go v0.X.Y belongs to
# Kubernetes v1.X.Y), as `kubelab kubectl version` shows; Go sets those build variables
# only through -ldflags, so builds without this script report v0.0.0-master, which
# kubectl version refuses to parse.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bin/kubelab}"
lib="$(go list -m -f '{{.Version}}' k8s.io/client-go)"
kube="v1.${lib#v0.}"
minor="${kube#v1.}"
minor="${minor%%.*}"
# kubectl reads k8s.io/component-base/version, client-go's user agent its own copy.
ldflags=()
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=("-X $pkg.gitVersion=$kube-kubelab" "-X $pkg.gitMajor=1" "-X $pkg.gitMinor=$minor" "-X $pkg.gitTreeState=clean")
done
mkdir -p "$(dirname "$out")"
# A first build downloads the modules: one line says so instead of one line per module.
quiet_downloads() {
	awk '/^go: downloading / { if (!seen++) print "build: downloading Go modules (first build only)"; next } { print }' >&2
}
go build -ldflags "${ldflags[*]}" -o "$out" ./cmd/kubelab 2> >(quiet_downloads)
CGO_ENABLED=0 go build -ldflags "-s -w" -o "$(dirname "$out")/kubelab-pause" ./cmd/kubelab-pause
CGO_ENABLED=0 go build -ldflags "-s -w" -o "$(dirname "$out")/kubelab-cni" ./cmd/kubelab-cni
