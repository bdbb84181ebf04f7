#!/usr/bin/env bash
# Sets up this machine and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/setup.sh
export PATH="$(go env GOPATH)/bin:$PATH"
go vet ./...
go test -timeout 75m -count=1 ./... "$@"
