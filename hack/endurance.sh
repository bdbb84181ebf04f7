#!/usr/bin/env bash
# An hour of real use with faults. As root, on real nodes: builds kubelab from this tree,
# runs `kubelab up --offline` in a fresh data dir of its own, and for DURATION (default
# 60m) creates and deletes Deployments with Services, StatefulSets with EBS claims and
# Jobs in namespaces of its own, while a fault loop, at random times, kill -9s `kubelab up`
# (and starts it again on the same data dir), kill -9s one node's containerd, deletes an
# ebs-csi-controller pod with --force, and fails AttachVolume calls for a while through
# the cloud's fault endpoint. At the end it waits for every object to converge, checks
# every claim's data, that no cloud volume outlived its claim and no pod address its pod,
# stops the cluster with `kubelab down` and checks that nothing of it is left on the
# machine. It samples the RSS of `kubelab up` every minute. It prints a summary and exits
# non-zero on any failure.
#
# Each StatefulSet pod writes, at its first start, /data/content (1 MiB of "endure <pod>"
# lines) and at every start of its init container and of its container (so at every
# remount) compares the file with that known content, appending to /data/checks, or to
# /data/FAILED and exiting 1 on a difference.
#
# RSS criterion: the largest sample of the last 30 minutes (of the last half of a shorter
# run) is at most 1.1x the largest sample before them. A fresh `kubelab up` after a kill
# grows back to its working set, so "stable" means not above what it reached before.
#
# Environment: DURATION (e.g. 5m, 1h; default 60m), OUT (directory for the logs and the
# summary; default a new /tmp/kl-endure-out.XXXXXX), FAULT_MIN/FAULT_MAX (seconds between
# faults, default 45/150), CONVERGE_TIMEOUT (seconds, default 900), SEED (of $RANDOM),
# NO_BUILD=1 (use bin/kubelab as it is).
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

[ "$(id -u)" = 0 ] || { echo "endurance: run as root (real nodes)" >&2; exit 2; }

to_seconds() {
	case "$1" in
	*h) echo $((${1%h} * 3600)) ;;
	*m) echo $((${1%m} * 60)) ;;
	*s) echo "${1%s}" ;;
	*) echo "$1" ;;
	esac
}
DURATION="${DURATION:-60m}"
dur=$(to_seconds "$DURATION")
FAULT_MIN="${FAULT_MIN:-45}"
FAULT_MAX="${FAULT_MAX:-150}"
CONVERGE_TIMEOUT="${CONVERGE_TIMEOUT:-900}"
RANDOM="${SEED:-$$}"
out="${OUT:-$(mktemp -d /tmp/kl-endure-out.XXXXXX)}"
mkdir -p "$out/objs"
data="$(mktemp -d /tmp/kl-endure.XXXXXX)"
hash="$(printf %s "$data" | sha256sum | cut -c1-8)"
export KUBECONFIG="$data/kubeconfig"
K=(kubectl --request-timeout=30s)
NS=(endure-1 endure-2 endure-3)
BUSYBOX=docker.io/library/busybox:latest
NGINX=docker.io/library/nginx:latest
CONTENT_BYTES=1048576

log() { echo "endurance: $(date -u +%H:%M:%S) $*" | tee -a "$out/endurance.log" >&2; }
count() { echo "$1" >>"$out/counters"; }
fail() { log "FAIL: $*"; echo "$*" >>"$out/failures"; }
nfail() { if [ -s "$out/failures" ]; then grep -c . "$out/failures"; else echo 0; fi; }

# --- the machine before -------------------------------------------------------------

snapshot() {
	local d="$1"
	mkdir -p "$d"
	losetup -l -n -O NAME,BACK-FILE >"$d/loop" 2>/dev/null
	findmnt -rn -o TARGET | sort >"$d/mounts"
	ip -o link show type veth | awk -F': ' '{print $2}' | cut -d@ -f1 | sort >"$d/veths"
	ip -o addr show | awk '{print $2, $4}' | sort >"$d/addrs"
	ip netns list | awk '{print $1}' | sort >"$d/netns"
	nft list tables 2>/dev/null | sort >"$d/nft"
	find /sys/fs/cgroup -maxdepth 3 -path '*/kubelab/*' -type d 2>/dev/null | sort >"$d/cgroups"
	ps -eo pid=,args= >"$d/procs"
}

# --- the cluster ---------------------------------------------------------------------

free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 20000))
		ss -Hltn "( sport = :$p or sport = :$((p + 1)) )" | grep -q . || { echo "$p"; return; }
	done
}
api_port="$(free_port)"
etcd_port="$(free_port)"
up_pid=""
starts=0

start_up() {
	bin/kubelab up --offline --data-dir "$data" --secure-port "$api_port" --etcd-client-port "$etcd_port" \
		>>"$out/kubelab.log" 2>&1 &
	up_pid=$!
	echo "$up_pid" >"$out/up.pid"
	starts=$((starts + 1))
	local t0=$SECONDS
	until [ "$(grep -c '^kubelab is up' "$out/kubelab.log")" -ge "$starts" ]; do
		if ! kill -0 "$up_pid" 2>/dev/null; then
			fail "kubelab up (pid $up_pid, start $starts) exited before it was up"
			tail -20 "$out/kubelab.log" >&2
			return 1
		fi
		if [ $((SECONDS - t0)) -gt 900 ]; then
			fail "kubelab up (start $starts) not up within 900s"
			return 1
		fi
		sleep 2
	done
	log "kubelab up (pid $up_pid) is up, start $starts, in $((SECONDS - t0))s"
	echo "$((SECONDS - t0))" >>"$out/up-times"
}

bg_pids=()
stopped=""
stop_all() {
	local p
	for p in "${bg_pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${bg_pids[@]}"; do wait "$p" 2>/dev/null; done
	bg_pids=()
	if [ -z "$stopped" ] && [ -n "$up_pid" ] && kill -0 "$up_pid" 2>/dev/null; then
		stopped=1
		log "stopping kubelab (kubelab down)"
		bin/kubelab down --data-dir "$data" >>"$out/kubelab-down.log" 2>&1 || fail "kubelab down: $(tail -1 "$out/kubelab-down.log")"
		wait "$up_pid" 2>/dev/null
	fi
}
trap 'stop_all' EXIT
trap 'log "interrupted"; exit 130' INT TERM

cloud_call() { # cloud_call PATH curl-args...: a request signed with the cloud's keys
	local path="$1" ep key secret
	shift
	ep="$(cat "$data/cloud/endpoint")"
	key="$(awk -F' *= *' '$1=="aws_access_key_id"{print $2; exit}' "$data/cloud/aws-credentials")"
	secret="$(awk -F' *= *' '$1=="aws_secret_access_key"{print $2; exit}' "$data/cloud/aws-credentials")"
	curl -sS -m 20 --aws-sigv4 "aws:amz:us-east-1:ec2" --user "$key:$secret" "$@" "$ep$path"
}
cloud_volumes() {
	cloud_call / -d Action=DescribeVolumes -d Version=2016-11-15 |
		grep -o '<volumeId>vol-[0-9a-f]*</volumeId>' | sed 's/<[^>]*>//g' | sort -u
}

node_netns() { ip netns list | awk '{print $1}' | grep "^kubelab-$hash-" | grep -v -- '-vpc$'; }

# --- the load ------------------------------------------------------------------------

# The check every StatefulSet pod's init container and container run against their claim.
read -r -d '' CHECK <<'EOF'
want=$(yes "endure $POD_NAME" | head -c CONTENT_BYTES | sha256sum | cut -d' ' -f1)
if [ ! -e /data/created ]; then
	yes "endure $POD_NAME" | head -c CONTENT_BYTES >/data/content.tmp && sync &&
		mv /data/content.tmp /data/content && echo "$want" >/data/created && sync || exit 1
fi
got=$(sha256sum /data/content 2>&1 | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
	echo "$(date -u) $CHECKER: content $got, want $want" >>/data/FAILED
	echo "DATA CHECK FAILED: /data/content is $got, want $want" >&2
	exit 1
fi
echo "$(date -u +%FT%TZ) $CHECKER ok" >>/data/checks
sync
EOF
CHECK="${CHECK//CONTENT_BYTES/$CONTENT_BYTES}"

indent() { sed "s/^/$1/"; }

sts_manifest() { # ns name replicas
	cat <<EOF
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: $2, namespace: $1}
spec:
  replicas: $3
  serviceName: ""
  selector: {matchLabels: {app: $2}}
  template:
    metadata: {labels: {app: $2}}
    spec:
      terminationGracePeriodSeconds: 3
      initContainers:
      - name: check
        image: $BUSYBOX
        imagePullPolicy: IfNotPresent
        env:
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: CHECKER, value: init}
        command: [sh, -c]
        args:
        - |
$(echo "$CHECK" | indent '          ')
        volumeMounts: [{name: data, mountPath: /data}]
      containers:
      - name: main
        image: $BUSYBOX
        imagePullPolicy: IfNotPresent
        env:
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: CHECKER, value: main}
        command: [sh, -c]
        args:
        - |
$(echo "$CHECK" | indent '          ')
          trap 'exit 0' TERM
          while :; do sleep 1; done
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      storageClassName: gp3
      resources: {requests: {storage: 1Gi}}
EOF
}

deploy_manifest() { # ns name replicas
	cat <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: $2, namespace: $1}
spec:
  replicas: $3
  selector: {matchLabels: {app: $2}}
  template:
    metadata: {labels: {app: $2}}
    spec:
      terminationGracePeriodSeconds: 3
      containers:
      - name: web
        image: $NGINX
        imagePullPolicy: IfNotPresent
        ports: [{containerPort: 80}]
        readinessProbe: {httpGet: {path: /, port: 80}, periodSeconds: 3}
---
apiVersion: v1
kind: Service
metadata: {name: $2, namespace: $1}
spec:
  selector: {app: $2}
  ports: [{port: 80, targetPort: 80}]
EOF
}

job_manifest() { # ns name
	cat <<EOF
apiVersion: batch/v1
kind: Job
metadata: {name: $2, namespace: $1}
spec:
  completions: 3
  parallelism: 2
  backoffLimit: 20
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 3
      containers:
      - name: work
        image: $BUSYBOX
        imagePullPolicy: IfNotPresent
        command: [sh, -c, 'echo endure \$(hostname); sleep 3']
EOF
}

# objs/<kind> lists the live objects ("ns name"), oldest first.
obj_add() { echo "$2 $3" >>"$out/objs/$1"; }
obj_del() { grep -v -x -F "$2 $3" "$out/objs/$1" >"$out/objs/$1.tmp"; mv "$out/objs/$1.tmp" "$out/objs/$1"; }
obj_n() { wc -l <"$out/objs/$1"; }
obj_oldest() { head -1 "$out/objs/$1"; }

# apply KIND NS NAME MANIFEST: applies it, again while the API server is away (kubelab up
# restarting); an object never applied is taken off the live list.
apply() {
	local try
	for try in $(seq 12); do
		echo "$4" | "${K[@]}" apply -f - >>"$out/load.log" 2>&1 && return 0
		sleep 10
	done
	"${K[@]}" delete -n "$2" "$(echo "$4" | awk '/^kind:/{print tolower($2); exit}')/$3" --ignore-not-found --wait=false >>"$out/load.log" 2>&1 &&
		obj_del "$1" "$2" "$3"
	return 1
}

# verify_claims NS STS: each Running pod of the StatefulSet compares its claim's content
# with the known one; prints "ok N" lines; returns 1 on a difference.
verify_pod() { # ns pod -> 0 ok, 1 mismatch, 2 could not check
	local want res
	want="$(yes "endure $2" | head -c "$CONTENT_BYTES" | sha256sum | cut -d' ' -f1)"
	res="$("${K[@]}" exec -n "$1" "$2" -c main -- sh -c \
		'sha256sum /data/content | cut -d" " -f1; cat /data/created; wc -l </data/checks; cat /data/FAILED 2>/dev/null | head -3' 2>&1)" || return 2
	local got created checks failed
	got="$(echo "$res" | sed -n 1p)"
	created="$(echo "$res" | sed -n 2p)"
	checks="$(echo "$res" | sed -n 3p)"
	failed="$(echo "$res" | sed -n '4,$p')"
	if [ "$got" != "$want" ] || [ "$created" != "$want" ] || [ -n "$failed" ]; then
		fail "data of $1/$2: content $got, created $created, want $want; FAILED: $failed"
		return 1
	fi
	echo "$1/$2 ok checks=$checks" >>"$out/data-checks"
	return 0
}

check_service() { # ns name -> 0 when it answers from a node
	local ip n
	ip="$("${K[@]}" get svc -n "$1" "$2" -o jsonpath='{.spec.clusterIP}' 2>/dev/null)" || return 2
	[ -n "$ip" ] || return 2
	n="$(node_netns | shuf -n1)"
	ip netns exec "$n" curl -sS -m 5 "http://$ip/" 2>>"$out/load.log" | grep -q 'nginx' && return 0
	return 1
}

load_step() {
	local i="$1" ns name r
	ns="${NS[$((RANDOM % ${#NS[@]}))]}"
	case $((RANDOM % 9)) in
	0 | 1) # Deployment + Service
		if [ "$(obj_n deploy)" -lt 5 ]; then
			name="web-$i"
			r=$((1 + RANDOM % 3))
			obj_add deploy "$ns" "$name"
			apply deploy "$ns" "$name" "$(deploy_manifest "$ns" "$name" "$r")" && count "create deployment" || count "create-error deployment"
		else
			read -r ns name <<<"$(obj_oldest deploy)"
			if "${K[@]}" delete -n "$ns" deployment/"$name" service/"$name" --wait=false --ignore-not-found >>"$out/load.log" 2>&1; then
				obj_del deploy "$ns" "$name"
				count "delete deployment"
			else
				count "delete-error deployment"
			fi
		fi
		;;
	2) # scale or roll a Deployment
		[ "$(obj_n deploy)" -gt 0 ] || return 0
		read -r ns name <<<"$(shuf -n1 "$out/objs/deploy")"
		if ((RANDOM % 2)); then
			"${K[@]}" scale -n "$ns" deployment/"$name" --replicas=$((1 + RANDOM % 3)) >>"$out/load.log" 2>&1 && count "scale deployment" || count "scale-error deployment"
		else
			"${K[@]}" set env -n "$ns" deployment/"$name" ROLL="$i" >>"$out/load.log" 2>&1 && count "rollout deployment" || count "rollout-error deployment"
		fi
		;;
	3 | 4) # StatefulSet with claims
		if [ "$(obj_n sts)" -lt 4 ]; then
			name="db-$i"
			r=$((1 + RANDOM % 2))
			obj_add sts "$ns" "$name"
			apply sts "$ns" "$name" "$(sts_manifest "$ns" "$name" "$r")" && count "create statefulset" || count "create-error statefulset"
		else
			read -r ns name <<<"$(obj_oldest sts)"
			local p pods
			pods="$("${K[@]}" get pods -n "$ns" -l app="$name" --field-selector=status.phase=Running -o name 2>/dev/null | sed 's|pod/||')"
			for p in $pods; do
				verify_pod "$ns" "$p"
				case $? in 0) count "data-check ok" ;; 1) count "data-check FAILED" ;; *) count "data-check not-reached" ;; esac
			done
			if "${K[@]}" delete -n "$ns" statefulset/"$name" --wait=false --ignore-not-found >>"$out/load.log" 2>&1 &&
				"${K[@]}" delete -n "$ns" pvc -l app="$name" --wait=false --ignore-not-found >>"$out/load.log" 2>&1; then
				obj_del sts "$ns" "$name"
				count "delete statefulset"
			else
				count "delete-error statefulset"
			fi
		fi
		;;
	5 | 6) # Job
		if [ "$(obj_n job)" -lt 3 ]; then
			name="job-$i"
			obj_add job "$ns" "$name"
			apply job "$ns" "$name" "$(job_manifest "$ns" "$name")" && count "create job" || count "create-error job"
		else
			read -r ns name <<<"$(obj_oldest job)"
			if "${K[@]}" delete -n "$ns" job/"$name" --wait=false --ignore-not-found >>"$out/load.log" 2>&1; then
				obj_del job "$ns" "$name"
				count "delete job"
			else
				count "delete-error job"
			fi
		fi
		;;
	8) # a StatefulSet pod deleted: made again, its claim mounted again, its data checked
		[ "$(obj_n sts)" -gt 0 ] || return 0
		read -r ns name <<<"$(shuf -n1 "$out/objs/sts")"
		"${K[@]}" delete -n "$ns" pod "$name-0" --wait=false >>"$out/load.log" 2>&1 && count "restart statefulset-pod" || count "restart-error statefulset-pod"
		;;
	7) # a client asks a Service
		[ "$(obj_n deploy)" -gt 0 ] || return 0
		read -r ns name <<<"$(shuf -n1 "$out/objs/deploy")"
		check_service "$ns" "$name"
		case $? in
		0) count "service-check ok" ;;
		1) count "service-check no-answer" ;;
		*) count "service-check api-error" ;;
		esac
		;;
	esac
}

load_loop() {
	local i=0
	while [ "$SECONDS" -lt "$end" ]; do
		i=$((i + 1))
		load_step "$i"
		sleep $((3 + RANDOM % 6))
	done
}

# --- the faults ----------------------------------------------------------------------

fault_kill_up() {
	log "fault: kill -9 kubelab up (pid $up_pid)"
	kill -9 "$up_pid"
	wait "$up_pid" 2>/dev/null
	count "fault kill-up"
	start_up || return 1
}

fault_kill_containerd() {
	local f node pid
	f="$(ls "$data"/nodes/*/containerd/containerd.pid 2>/dev/null | shuf -n1)"
	[ -n "$f" ] || { log "fault: no containerd pid file"; return 0; }
	node="$(basename "$(dirname "$(dirname "$f")")")"
	pid="$(cat "$f")"
	# Only a containerd of this cluster: its config is in this data dir, its parent this up.
	if ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$data/nodes/$node/containerd/config.toml" ||
		[ "$(ps -o ppid= -p "$pid" | tr -d ' ')" != "$up_pid" ]; then
		log "fault: containerd pid $pid of $node is not this cluster's running containerd; skipped"
		count "fault kill-containerd-skipped"
		return 0
	fi
	log "fault: kill -9 containerd of $node (pid $pid)"
	kill -9 "$pid"
	count "fault kill-containerd"
}

fault_kill_csi_controller() {
	local pod
	pod="$("${K[@]}" get pods -n kube-system -l app=ebs-csi-controller -o name 2>/dev/null | shuf -n1)"
	[ -n "$pod" ] || { log "fault: no ebs-csi-controller pod"; return 0; }
	log "fault: delete --force $pod"
	"${K[@]}" delete -n kube-system "$pod" --force --grace-period=0 >>"$out/faults.log" 2>&1
	count "fault kill-csi-controller"
}

fault_attach() {
	local id hold hits
	hold=$((20 + RANDOM % 60))
	id="$(cloud_call /_kubelab/faults -X POST -H 'Content-Type: application/json' \
		-d '{"action":"AttachVolume","mode":"fail","code":"InternalError","message":"endurance: injected"}' | jq -r .id 2>/dev/null)"
	if [ -z "$id" ] || [ "$id" = null ]; then
		log "fault: could not inject the AttachVolume fault"
		count "fault attach-error"
		return 0
	fi
	log "fault: AttachVolume fails for ${hold}s ($id)"
	sleep "$hold"
	hits="$(cloud_call /_kubelab/faults | jq -r --arg id "$id" '.[] | select(.id==$id) | .hits' 2>/dev/null)"
	cloud_call "/_kubelab/faults/$id" -X DELETE >/dev/null
	log "fault: AttachVolume fault cleared; it failed ${hits:-?} calls"
	echo "${hits:-0}" >>"$out/attach-hits"
	count "fault attach"
}

fault_loop() {
	local kinds=() k
	while :; do
		sleep $((FAULT_MIN + RANDOM % (FAULT_MAX - FAULT_MIN + 1)))
		[ "$SECONDS" -lt "$end" ] || return 0
		[ "${#kinds[@]}" -gt 0 ] || mapfile -t kinds < <(printf '%s\n' up containerd csi attach | shuf)
		k="${kinds[0]}"
		kinds=("${kinds[@]:1}")
		case "$k" in
		up) fault_kill_up || return 1 ;;
		containerd) fault_kill_containerd ;;
		csi) fault_kill_csi_controller ;;
		attach) fault_attach ;;
		esac
	done
}

rss_loop() {
	while :; do
		local pid rss
		pid="$(cat "$out/up.pid")"
		rss="$(awk '/^VmRSS/{print $2}' "/proc/$pid/status" 2>/dev/null)"
		echo "$((SECONDS - t_start)) $pid ${rss:-0} $(cut -d' ' -f1 /proc/loadavg)" >>"$out/rss"
		sleep 60
	done
}

# --- the end -------------------------------------------------------------------------

# not_ready KIND FILE READY STATUS prints each object of KIND listed in FILE ("ns name"
# lines) that is gone or for which the jq test READY fails, with the jq filter STATUS of
# its .status.
not_ready() {
	local kind=$1 file=$2 ready=$3 status=$4 ns name j
	while read -r ns name; do
		[ -n "$name" ] || continue
		j="$("${K[@]}" get "$kind" -n "$ns" "$name" -o json 2>/dev/null)" || { echo "$kind $ns/$name: not found"; continue; }
		echo "$j" | jq -e "$ready" >/dev/null || echo "$kind $ns/$name: $(echo "$j" | jq -c ".status | $status")"
	done <"$file"
}

not_converged() { # prints what is not converged yet
	local ns
	not_ready deployment "$out/objs/deploy" \
		'.status.observedGeneration == .metadata.generation and (.status.availableReplicas // 0) == .spec.replicas and (.status.updatedReplicas // 0) == .spec.replicas and (.status.replicas // 0) == .spec.replicas' \
		'{replicas, updatedReplicas, availableReplicas}'
	not_ready statefulset "$out/objs/sts" \
		'(.status.readyReplicas // 0) == .spec.replicas and (.status.availableReplicas // 0) == .spec.replicas' \
		'{replicas, readyReplicas}'
	not_ready job "$out/objs/job" \
		'[.status.conditions[]? | select(.type=="Complete" and .status=="True")] | length == 1' \
		'{succeeded, failed, active}'
	for ns in "${NS[@]}"; do
		"${K[@]}" get pvc -n "$ns" -o json 2>/dev/null | jq -r --arg ns "$ns" '.items[] | select(.status.phase != "Bound" and .metadata.deletionTimestamp == null) | "claim \($ns)/\(.metadata.name): \(.status.phase)"'
	done
	"${K[@]}" get pods -A -o json 2>/dev/null | jq -r '.items[] | select(.metadata.namespace | test("^(endure-|kube-system$)")) |
		select((.status.phase == "Succeeded" and (.metadata.ownerReferences[0].kind // "") == "Job") | not) |
		select(.status.phase != "Running" or ([.status.conditions[]? | select(.type=="Ready" and .status=="True")] | length == 0) or .metadata.deletionTimestamp != null) |
		"pod \(.metadata.namespace)/\(.metadata.name): \(.status.phase)\(if .metadata.deletionTimestamp then " terminating" else "" end)"'
	"${K[@]}" get nodes -o json 2>/dev/null | jq -r '.items[] | select([.status.conditions[] | select(.type=="Ready" and .status=="True")] | length == 0) | "node \(.metadata.name): not Ready"'
}

# The objects of the namespaces are exactly the live ones: none lost, none left over.
check_objects() {
	local kind list
	for kind in deploy sts job; do
		case $kind in deploy) list=deployments ;; sts) list=statefulsets ;; job) list=jobs ;; esac
		"${K[@]}" get "$list" -A -o jsonpath='{range .items[*]}{.metadata.namespace}{" "}{.metadata.name}{"\n"}{end}' |
			grep '^endure-' | sort >"$out/objs/$kind.actual"
		sort "$out/objs/$kind" >"$out/objs/$kind.want"
		diff "$out/objs/$kind.want" "$out/objs/$kind.actual" >"$out/objs/$kind.diff" ||
			fail "$list: want (<) and have (>) differ: $(tr '\n' ' ' <"$out/objs/$kind.diff")"
	done
}

# Every cloud volume is a PV's and every PV's volume exists; PVs are all Bound.
check_volumes() {
	local t0=$SECONDS extra missing
	while :; do
		cloud_volumes >"$out/volumes.cloud"
		"${K[@]}" get pv -o jsonpath='{range .items[*]}{.spec.csi.volumeHandle}{"\n"}{end}' | sort -u >"$out/volumes.pv"
		extra="$(comm -23 "$out/volumes.cloud" "$out/volumes.pv")"
		missing="$(comm -13 "$out/volumes.cloud" "$out/volumes.pv")"
		[ -z "$extra$missing" ] && [ -s "$out/volumes.cloud" -o ! -s "$out/volumes.pv" ] && break
		[ $((SECONDS - t0)) -lt 300 ] || break
		sleep 10
	done
	[ -z "$extra" ] || fail "cloud volumes of no PV (leaked): $extra"
	[ -z "$missing" ] || fail "PVs whose cloud volume is gone: $missing"
	local notbound
	notbound="$("${K[@]}" get pv -o json | jq -r '.items[] | select(.status.phase != "Bound") | "\(.metadata.name) \(.status.phase)"')"
	[ -z "$notbound" ] || fail "PVs not Bound (claims deleted, volumes kept): $notbound"
	echo "cloud volumes $(wc -l <"$out/volumes.cloud"), PVs $(wc -l <"$out/volumes.pv")"
}

# Every address the nodes' IPAM holds is a pod's.
check_ips() {
	local held pods leaked
	held="$(find "$data"/nodes/*/cni -type f -regextype posix-extended -regex '.*/[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+' -printf '%f\n' 2>/dev/null | sort)"
	pods="$("${K[@]}" get pods -A -o json | jq -r '.items[] | select(.spec.hostNetwork != true) | .status.podIPs[]?.ip' | sort -u)"
	leaked="$(comm -23 <(echo "$held") <(echo "$pods"))"
	[ -z "$leaked" ] || fail "pod addresses held by IPAM with no pod: $(echo "$leaked" | tr '\n' ' ')"
	echo "IPAM addresses $(echo "$held" | grep -c .), pod addresses $(echo "$pods" | grep -c .)"
}

# While the cluster runs, nothing of a deleted pod or claim is left on the nodes: mounts
# and cgroups only of pods the API has, one loop device per attached volume, one
# containerd per node.
check_nodes() {
	local uids what t0=$SECONDS loops attached n nodes
	uids="$("${K[@]}" get pods -A -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}' | sort -u)"
	[ -n "$uids" ] || { fail "node check: no pods listed"; return; }
	what="$(findmnt -rn -o TARGET | grep -F "$data/nodes/" | grep -o '/pods/[0-9a-f-]\{36\}/' | cut -d/ -f3 | sort -u |
		comm -23 - <(echo "$uids"))"
	[ -z "$what" ] || fail "mounts of pods the API does not have: $(echo "$what" | tr '\n' ' ')"
	what="$(find /sys/fs/cgroup/*/kubelab/"$hash" -maxdepth 2 -type d -name 'pod*' 2>/dev/null | sed 's|.*/pod||' | sort -u |
		comm -23 - <(echo "$uids"))"
	[ -z "$what" ] || fail "cgroups of pods the API does not have: $(echo "$what" | tr '\n' ' ')"
	while :; do
		loops="$(losetup -l -n -O NAME,BACK-FILE | awk -v d="$data/" 'index($2, d) == 1' | grep -c .)"
		attached="$("${K[@]}" get volumeattachments -o json | jq '[.items[] | select(.status.attached == true)] | length')"
		[ "$loops" != "$attached" ] || break
		if [ $((SECONDS - t0)) -gt 120 ]; then
			fail "loop devices over the data dir's volumes: $loops, attached volumes: $attached"
			break
		fi
		sleep 10
	done
	nodes="$("${K[@]}" get nodes -o name | wc -l)"
	n="$(for p in /proc/[0-9]*; do { [ "$(cat "$p/comm")" = containerd ] && tr '\0' ' ' <"$p/cmdline" | grep -F "$data/nodes/"; } 2>/dev/null; done | grep -c .)"
	[ "$n" = "$nodes" ] || fail "containerd processes of this cluster: $n, nodes: $nodes"
	echo "loop devices $loops = attached volumes $attached; containerds $n = nodes $nodes"
}

check_leaks() {
	local after="$out/after" what
	snapshot "$after"
	what="$(awk -v d="$data/" 'index($2, d) == 1' "$after/loop")"
	[ -z "$what" ] || fail "loop devices left over volumes of the data dir: $what"
	what="$(grep -F -e "$data/" -e "/run/kubelab/$hash" "$after/mounts")"
	[ -z "$what" ] || fail "mounts left: $(echo "$what" | head -5 | tr '\n' ' ')"
	what="$(grep -F "kubelab-$hash-" "$after/netns")"
	[ -z "$what" ] || fail "network namespaces left: $(echo "$what" | tr '\n' ' ')"
	what="$(grep -F "/kubelab/$hash" "$after/cgroups")"
	[ -z "$what" ] || fail "cgroups left: $(echo "$what" | head -5 | tr '\n' ' ')"
	[ ! -e "/run/kubelab/$hash" ] || fail "run directory /run/kubelab/$hash left"
	local p procs=""
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" != "$$" ] || continue
		{
			if tr '\0' ' ' <"$p/cmdline" | grep -qF -e "$data" -e "/run/kubelab/$hash" ||
				grep -qF "/kubelab/$hash" "$p/cgroup"; then
				procs+="${p#/proc/}:$(tr '\0' ' ' <"$p/cmdline" | cut -c1-80) "
			fi
		} 2>/dev/null
	done
	[ -z "$procs" ] || fail "processes left: $procs"
	# Host-wide: kubelab adds no veth, address or nft table to the host's namespace. Other
	# clusters may run on this machine, so these are told, and only ours by name fail.
	local k
	for k in veths addrs nft; do
		comm -13 "$before/$k" "$after/$k" >"$out/new-host-$k"
		if [ -s "$out/new-host-$k" ]; then
			log "new on the host since the start ($k, not by name this cluster's): $(head -5 "$out/new-host-$k" | tr '\n' ' ')"
			! grep -qF "$hash" "$out/new-host-$k" || fail "host $k of this cluster left: $(grep -F "$hash" "$out/new-host-$k")"
		fi
	done
}

# RSS: the largest sample of the last 30 minutes (of the last half when shorter) <= 1.1x
# the largest before.
check_rss() {
	awk -v dur="$dur" '
		{ t[NR] = $1; pid[NR] = $2; r[NR] = $3 }
		END {
			cut = dur - 1800; if (cut < dur / 2) cut = dur / 2
			for (i = 1; i <= NR; i++) {
				if (t[i] > dur) continue
				if (t[i] < cut) { if (r[i] > early) early = r[i] }
				else { if (r[i] > late) late = r[i]; n++ }
				if (r[i] > peak) peak = r[i]
				if (min == "" || r[i] < min) min = r[i]
			}
			printf "RSS samples %d; min %.0f MiB, max %.0f MiB; max before %ds %.0f MiB, max after %.0f MiB (%d samples): ratio %.2f\n", \
				NR, min / 1024, peak / 1024, cut, early / 1024, late / 1024, n, (early > 0 ? late / early : 0)
			exit (early > 0 && late <= 1.1 * early) ? 0 : 1
		}' "$out/rss"
}

# --- run -----------------------------------------------------------------------------

log "output in $out, data dir $data (namespaces kubelab-$hash-*), DURATION $DURATION"
before="$out/before"
snapshot "$before"
if [ -z "${NO_BUILD:-}" ]; then
	log "building bin/kubelab"
	hack/build.sh bin/kubelab || { fail "build"; exit 1; }
fi
commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD || echo -dirty)"
log "commit $commit; machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, load $(cut -d' ' -f1-3 /proc/loadavg)"
t_start=$SECONDS
start_up || exit 1
for ns in "${NS[@]}"; do "${K[@]}" create namespace "$ns" >>"$out/load.log" 2>&1; done
: >"$out/objs/deploy"
: >"$out/objs/sts"
: >"$out/objs/job"
: >"$out/counters"
end=$((SECONDS + dur))
t_start=$SECONDS
rss_loop &
bg_pids+=($!)
load_loop &
load_pid=$!
fault_loop
fault_rc=$?
[ "$fault_rc" = 0 ] || fail "the fault loop stopped: kubelab up did not come back"
wait "$load_pid"
log "load done: $(sort "$out/counters" | uniq -c | tr '\n' ';')"
log "load average $(cut -d' ' -f1-3 /proc/loadavg)"

# Faults cleared, the cluster up: everything converges.
cloud_call /_kubelab/faults -X DELETE >/dev/null
if ! kill -0 "$up_pid" 2>/dev/null; then
	fail "kubelab up is not running at the end"
	start_up || exit 1
fi
log "waiting up to ${CONVERGE_TIMEOUT}s for every object to converge"
t0=$SECONDS
while :; do
	left="$(not_converged)"
	[ -n "$left" ] || break
	if [ $((SECONDS - t0)) -gt "$CONVERGE_TIMEOUT" ]; then
		fail "not converged after ${CONVERGE_TIMEOUT}s: $(echo "$left" | head -20 | tr '\n' ';')"
		break
	fi
	sleep 10
done
converge_s=$((SECONDS - t0))
log "converged in ${converge_s}s"
check_objects
# Every claim's data, from its pod.
: >"$out/data-checks.final"
while read -r ns name; do
	[ -n "$name" ] || continue
	for p in $("${K[@]}" get pods -n "$ns" -l app="$name" -o name | sed 's|pod/||'); do
		verify_pod "$ns" "$p" && echo "$ns/$p" >>"$out/data-checks.final" || fail "data of $ns/$p not checked"
	done
done <"$out/objs/sts"
for ns in "${NS[@]}"; do
	"${K[@]}" get pvc -n "$ns" -o name | while read -r c; do echo "$ns/$c"; done
done >"$out/claims.final"
[ "$(wc -l <"$out/data-checks.final")" = "$(wc -l <"$out/claims.final")" ] ||
	fail "claims $(wc -l <"$out/claims.final"), data checked $(wc -l <"$out/data-checks.final")"
svc_ok=0
while read -r ns name; do
	[ -n "$name" ] || continue
	ok=""
	for _ in 1 2 3 4 5 6; do check_service "$ns" "$name" && { ok=1; break; }; sleep 5; done
	[ -n "$ok" ] && svc_ok=$((svc_ok + 1)) || fail "Service $ns/$name does not answer"
done <"$out/objs/deploy"
vols="$(check_volumes)"
ips="$(check_ips)"
nodes_state="$(check_nodes)"
log "$vols; $ips; $nodes_state"
remounts="$(awk '{sum += substr($3, 8)} END {print sum + 0}' "$out/data-checks" 2>/dev/null)"

stop_all
check_leaks
rss="$(check_rss)" || fail "RSS grew: $rss"

{
	echo "== endurance summary"
	echo "commit $commit, DURATION $DURATION, data dir $data, output $out"
	echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "load and faults:"
	sort "$out/counters" | uniq -c | sed 's/^/  /'
	echo "  AttachVolume calls failed by the fault: $(awk '{s += $1} END {print s + 0}' "$out/attach-hits" 2>/dev/null)"
	echo "  kubelab up starts: $starts, seconds to up: $(tr '\n' ' ' <"$out/up-times")"
	echo "live at the end: $(obj_n deploy) Deployments (Services answering: $svc_ok), $(obj_n sts) StatefulSets, $(obj_n job) Jobs, $(wc -l <"$out/claims.final") claims"
	echo "converged in ${converge_s}s; claims' data checked: $(wc -l <"$out/data-checks.final") at the end, $(grep -c . "$out/data-checks" 2>/dev/null) in all (checks recorded by the pods in them: $remounts)"
	echo "$vols; $ips; $nodes_state"
	echo "$rss"
	echo "RSS series (seconds/pid/MiB/load average): $(awk '{printf "%s/%s/%.0f/%s ", $1, $2, $3 / 1024, $4}' "$out/rss")"
	if [ "$(nfail)" = 0 ]; then
		echo "RESULT: PASS"
	else
		echo "RESULT: FAIL ($(nfail))"
		sed 's/^/  - /' "$out/failures"
	fi
} | tee "$out/summary"
if [ "$(nfail)" = 0 ]; then
	rm -rf "$data"
	exit 0
fi
exit 1
