#!/usr/bin/env bash
# Runs `kubelab up --hollow --nodes $NODES` built from this tree in a fresh mktemp data
# dir, creates $PODS pods at $RATE pods/s once every node is Ready, and prints the
# figures ClusterLoader2 reads of such a run (API call latency p99 per call against its
# SLO, pod startup p50/p90/p99), the times to every node Ready and every pod Running and
# the process's peak RSS; profiles and /metrics land in $OUT (default: the data dir).
#
#   NODES=5000 PODS=50000 RATE=100 hack/hollow-scale.sh
#
# KUBELAB=path skips the build; UP_ARGS adds arguments to kubelab up.
set -euo pipefail
cd "$(dirname "$0")/.."
NODES="${NODES:-5000}"
PODS="${PODS:-50000}"
RATE="${RATE:-100}"
bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
if [[ -z "${KUBELAB:-}" ]]; then
	hack/build.sh "$bin/kubelab" >&2
	KUBELAB="$bin/kubelab"
fi
go build -o "$bin/hollow-scale" ./hack/hollow-scale
echo "machine: $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2 " GiB, " $7 " GiB available"}'), load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)$(git diff --quiet || echo '+dirty')"
"$bin/hollow-scale" -kubelab "$KUBELAB" -nodes "$NODES" -pods "$PODS" -rate "$RATE" ${OUT:+-out "$OUT"} ${UP_ARGS:+-up-args "$UP_ARGS"} "$@"
