#!/usr/bin/env bash
# Sets up this machine and runs a kubelab cluster in the foreground (Ctrl-C, or
# `bin/kubelab down` from another shell, stops it): three real nodes, one per zone, with
# containerd, real volumes and a pod network. Run it as root. Arguments are passed on
# (e.g. --nodes 6, --data-dir DIR, or --hollow for nodes without root). It installs only
# what running needs; the test suite's judges are hack/test.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/setup.sh
echo "up: building bin/kubelab" >&2
hack/build.sh bin/kubelab
exec bin/kubelab up "$@"
