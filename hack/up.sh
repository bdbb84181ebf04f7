#!/usr/bin/env bash
# Sets up this machine and runs a kubelab cluster in the foreground (Ctrl-C stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
hack/setup.sh
mkdir -p bin
go build -o bin/kubelab ./cmd/kubelab
exec bin/kubelab up "$@"
