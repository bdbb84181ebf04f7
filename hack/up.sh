#!/usr/bin/env bash
# Sets up this machine and runs a kubelab cluster in the foreground (Ctrl-C stops it).
# Until real nodes exist it runs `kubelab up --hollow` (three hollow nodes, one per zone);
# arguments are passed on (e.g. --nodes 6, --data-dir DIR, or --hollow=false).
set -euo pipefail
cd "$(dirname "$0")/.."
hack/setup.sh
hack/build.sh bin/kubelab
exec bin/kubelab up --hollow "$@"
