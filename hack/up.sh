#!/usr/bin/env bash
# Sets up this machine and runs a kubelab cluster in the foreground (Ctrl-C stops it).
# With no arguments it runs `kubelab up --hollow` (three hollow nodes, one per zone) until
# real nodes exist; any arguments are passed to `kubelab up` instead.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/setup.sh
mkdir -p bin
go build -o bin/kubelab ./cmd/kubelab
if [ "$#" -eq 0 ]; then
	set -- --hollow
fi
exec bin/kubelab up "$@"
