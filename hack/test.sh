#!/usr/bin/env bash
# Sets up this machine and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/setup.sh --test
export PATH="$(go env GOPATH)/bin:$PATH"

# The upstream kube-apiserver, which TestValidationCorpus (internal/apiserver) sends the
# same requests as kubelab's API server: built once and kept, for the tests only
# (hack/up.sh does not need it).
if [ -z "${KUBELAB_KUBE_APISERVER:-}" ]; then
	kas="$(go env GOPATH)/upstream/kube-apiserver"
	if [ ! -x "$kas/kube-apiserver" ]; then
		echo "test: building the upstream kube-apiserver (once; kept in $kas)" >&2
		OUT="$kas" hack/upstream.sh kube-apiserver >&2 || true
	fi
	if [ -x "$kas/kube-apiserver" ]; then
		export KUBELAB_KUBE_APISERVER="$kas/kube-apiserver"
	else
		echo "test: the upstream kube-apiserver could not be built; TestValidationCorpus will NOT run" >&2
	fi
fi

go vet ./...
go test -timeout 75m -count=1 ./... "$@"
