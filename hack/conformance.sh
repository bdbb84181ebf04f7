#!/usr/bin/env bash
# Runs Kubernetes' own conformance suite (the e2e [Conformance] specs of the release whose
# libraries kubelab builds on) against kubelab on real nodes, as root.
#
#   hack/conformance.sh                      # all [Conformance] specs: parallel, then [Serial]
#   hack/conformance.sh --focus 'emptydir'   # only the matching specs (ginkgo's own flags)
#   KUBECONFIG=... DATA_DIR=... hack/conformance.sh   # against a running kubelab instead
#
# It builds, once and kept in $(go env GOPATH)/upstream/conformance-<version>:
#   e2e.test          from the k8s.io/kubernetes module (test/e2e, with the version ldflags),
#   ginkgo            the runner of the version that module requires,
#   kubectl           of the same release, for the kubectl specs,
#   agnhost, nnp      the test images' programs, from their Go packages in the same module,
#   sample-apiserver  from the k8s.io/sample-apiserver module of the same release;
# makes the images the [Conformance] specs run available to the nodes without internet
# (images() below, with `kubelab image build` and `kubelab image tag`), starts a cluster
# in a data dir of its own (DATA_DIR, default a new /tmp/kl-e2e.XXXXXX) unless $KUBECONFIG names one,
# runs the specs (PROCS in parallel, default 8) and writes junit*.xml and summary.txt
# into $ARTIFACTS (default _artifacts/).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
lib="$(go list -m -f '{{.Version}}' k8s.io/apiserver)" # v0.MINOR.PATCH
version="${VERSION:-v1.${lib#v0.}}"
staging="v0.${version#v1.}"
cache="${CACHE:-$(go env GOPATH)/upstream/conformance-$version}"
artifacts="$(mkdir -p "${ARTIFACTS:-_artifacts}" && cd "${ARTIFACTS:-_artifacts}" && pwd)"

log() { printf 'conformance: %s\n' "$*" >&2; }

# build_suite builds the programs into $cache, unless they are there.
build_suite() {
	local p missing=0
	for p in e2e.test ginkgo kubectl agnhost nnp sample-apiserver; do
		[ -x "$cache/$p" ] || missing=1
	done
	if [ "$missing" = 0 ]; then
		return 0
	fi
	log "building e2e.test, ginkgo, kubectl and agnhost $version (once; kept in $cache)"
	mkdir -p "$cache/src"
	local gomod
	gomod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$version.mod"
	go mod download k8s.io/kubernetes@"$version"
	local src
	src="$(go env GOMODCACHE)/k8s.io/kubernetes@$version"
	(
		cd "$cache/src"
		# k8s.io/kubernetes points its staging libraries at ./staging; a module that
		# builds it points them at their published versions instead.
		{
			printf 'module kubelab-conformance\n\ngo %s\n\nrequire (\n\tk8s.io/kubernetes %s\n\tk8s.io/sample-apiserver %s\n)\n\nreplace (\n' \
				"$(go env GOVERSION | sed 's/^go//')" "$version" "$staging"
			awk -v v="$staging" '/=> \.\/staging\/src\// {printf "\t%s => %s %s\n", $1, $1, v}' "$gomod"
			printf ')\n'
		} >go.mod
		# The packages the suite's test binary imports (its _test.go files' imports
		# included), so that `go mod tidy` keeps every module they need.
		{
			printf '// Package deps names what the conformance programs import.\npackage deps\n\nimport (\n'
			printf '\t_ "github.com/onsi/ginkgo/v2/ginkgo"\n'
			printf '\t_ "k8s.io/sample-apiserver/pkg/cmd/server"\n'
			sed -n '/^import (/,/^)/p' "$src/test/e2e/e2e_test.go" "$src/test/e2e/e2e.go" "$src/test/images/agnhost/agnhost.go" \
				"$src/cmd/kubectl/kubectl.go" |
				grep -o '"[^"]*"' | grep '\.' | sort -u | sed 's/^/\t_ /'
			printf ')\n'
		} >deps.go
		go mod tidy
		local ldflags="" key val
		for kv in "gitVersion=$version" "gitMajor=1" "gitMinor=$(echo "$version" | cut -d. -f2)" \
			"gitTreeState=clean" "buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; do
			key="${kv%%=*}" val="${kv#*=}"
			ldflags+=" -X k8s.io/client-go/pkg/version.$key=$val -X k8s.io/component-base/version.$key=$val"
		done
		go test -c -ldflags "$ldflags" -o "$cache/e2e.test" k8s.io/kubernetes/test/e2e
		go build -ldflags "$ldflags" -o "$cache/kubectl" k8s.io/kubernetes/cmd/kubectl
		# The test images' programs, static: they run in images without glibc's NSS.
		CGO_ENABLED=0 go build -o "$cache/agnhost" k8s.io/kubernetes/test/images/agnhost
		CGO_ENABLED=0 go build -o "$cache/nnp" "$src/test/images/nonewprivs/nnp.go"
		chmod u+s,g+s "$cache/nnp" # the image's file is setuid, as upstream's Dockerfile makes it
		go build -o "$cache/ginkgo" github.com/onsi/ginkgo/v2/ginkgo
		CGO_ENABLED=0 go build -o "$cache/sample-apiserver" k8s.io/sample-apiserver
	)
}

# The images the suite lists (e2e.test --list-images) that its [Conformance] specs run,
# made without internet into the registry of the kubelab with data dir $1: the suite's
# own programs from the module, with busybox's applets and Debian's tools where the
# upstream images have Alpine's or Debian's (docs/conformance.md says how they differ).
images() {
	local data="$1" k="bin/kubelab" e2e="registry.k8s.io/e2e-test-images" src stage
	src="$(go env GOMODCACHE)/k8s.io/kubernetes@$version"
	stage="$(mktemp -d)"
	build() { "$k" image build --data-dir "$data" "$@" >/dev/null; }

	# agnhost: the test program at /agnhost (also /agnhost-2), the porter's certificate,
	# /uploads, the user and group the security-context specs name, curl, dig, getent, netcat and
	# busybox for the commands the specs exec.
	mkdir -p "$stage/agnhost/uploads" "$stage/agnhost/etc"
	cp "$cache/agnhost" "$stage/agnhost/agnhost"
	ln -s agnhost "$stage/agnhost/agnhost-2"
	cp "$src/test/images/agnhost/porter/localhost.crt" "$src/test/images/agnhost/porter/localhost.key" "$stage/agnhost/"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\nuser-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n' >"$stage/agnhost/etc/passwd"
	printf 'root:x:0:\nnobody:x:65534:\nuser-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n' >"$stage/agnhost/etc/group"
	# Upstream's agnhost (and the kitten and nautilus images on it) is Alpine Linux, whose
	# /etc/os-release the ImageVolume spec reads through an image volume; the stand-in's
	# says what it is.
	printf 'NAME="kubelab stand-in of an Alpine Linux test image"\nID=kubelab-stand-in\nPRETTY_NAME="kubelab stand-in of an Alpine Linux test image (registry.k8s.io/e2e-test-images)"\n' >"$stage/agnhost/etc/os-release"
	# The shell is Debian's bash as /bin/sh: the specs' environment holds names such as
	# data-1, which upstream's busybox and Alpine's ash pass on and Debian's busybox drops.
	local shell=(--file /bin/bash:/bin/sh)
	local agnhost=(--busybox "${shell[@]}" --file "$stage/agnhost:/" --file /usr/bin/curl --file /usr/bin/dig --file /usr/bin/nslookup --file /usr/bin/getent \
		--file /usr/bin/nc.openbsd:/usr/bin/nc)
	build "$e2e/agnhost:2.66.1" "$e2e/agnhost:2.55" "${agnhost[@]}" \
		--entrypoint /agnhost --cmd pause --expose 80 --expose 8080 --expose 8081 --expose 9376 --expose 5000
	local pet
	for pet in kitten nautilus; do
		build "$e2e/$pet:1.8" "${agnhost[@]}" --file "$src/test/images/$pet/html:/" \
			--entrypoint /agnhost --cmd test-webserver --expose 80
	done
	build "$e2e/busybox:1.37.0-2" "$e2e/busybox:1.36.1-1" --busybox "${shell[@]}" --cmd sh
	build "$e2e/nonroot:1.5" --busybox --cmd sh --user 1234
	build "$e2e/nonewprivs:1.4" --busybox --file "$cache/nnp:/usr/local/bin/nnp" --cmd nnp
	build "$e2e/glibc-dns-testing:2.1.1" --busybox --file /usr/bin/dig --file /usr/bin/nslookup \
		--file /usr/bin/host --file /usr/bin/getent --cmd sh
	build "$e2e/sample-apiserver:1.29.2" --busybox --file "$cache/sample-apiserver:/sample-apiserver" --entrypoint /sample-apiserver
	build registry.k8s.io/etcd:3.7.0-0 --busybox --file /usr/bin/etcd:/usr/local/bin/etcd --cmd /usr/local/bin/etcd
	"$k" image tag --data-dir "$data" docker.io/library/nginx:latest "$e2e/nginx:1.27.0-2" "$e2e/nginx:1.28.0-2" >/dev/null
	"$k" image tag --data-dir "$data" registry.k8s.io/pause:3.10 registry.k8s.io/pause:3.10.2 >/dev/null
	rm -rf "$stage"
}

hack/setup.sh
# Debian's tools the test images carry: DNS tools (agnhost, glibc-dns-testing) and
# OpenBSD's netcat (agnhost: the Service specs run `nc -v -t -w 2 HOST PORT`, options
# busybox's nc lacks).
if ! command -v dig >/dev/null || [ ! -x /usr/bin/nc.openbsd ]; then
	log "installing bind9-dnsutils and netcat-openbsd (tools of the test images)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq --no-install-recommends bind9-dnsutils netcat-openbsd >/dev/null
fi
build_suite
hack/build.sh bin/kubelab >/dev/null

# The cluster: $KUBECONFIG's, whose data dir is $DATA_DIR (default kubelab's), or one of
# the script's own, stopped at the end: in $DATA_DIR when set, else in a new data dir
# (so that no node keeps an earlier run's image under a tag the images below make
# again), removed once kubelab has stopped and left nothing mounted in it.
pid=""
if [ -n "${KUBECONFIG:-}" ]; then
	data="${DATA_DIR:-/var/lib/kubelab}"
else
	fresh=""
	if [ -z "${DATA_DIR:-}" ]; then
		data="$(mktemp -d /tmp/kl-e2e.XXXXXX)"
		fresh="$data"
	else
		data="$DATA_DIR"
	fi
	mkdir -p "$data"
	: >"$artifacts/kubelab.log"
	log "starting kubelab in $data (log: $artifacts/kubelab.log)"
	bin/kubelab up --offline --data-dir "$data" --secure-port 0 --etcd-client-port "${ETCD_PORT:-42379}" >"$artifacts/kubelab.log" 2>&1 &
	pid=$!
	stop_cluster() {
		[ -n "$pid" ] || return 0
		{ kill -TERM "$pid" 2>/dev/null && wait "$pid"; } || true
		if [ -n "$fresh" ] && ! findmnt -rn -o TARGET | grep -qF "$fresh/"; then
			rm -rf "$fresh"
		fi
	}
	trap stop_cluster EXIT
	until grep -q '^kubelab is up' "$artifacts/kubelab.log"; do
		kill -0 "$pid" 2>/dev/null || { tail -20 "$artifacts/kubelab.log" >&2; exit 1; }
		sleep 2
	done
	export KUBECONFIG="$data/kubeconfig"
fi
log "making the test images available in kubelab's registry"
images "$data"

# The specs: the parallel ones with ginkgo -p, then the [Serial] ones, each with its JUnit
# report: every spec labelled Conformance (ginkgo's label of the [Conformance] ones).
# Arguments go to ginkgo (--focus, --skip, ...); with --focus only the matching
# [Conformance] specs run.
run_specs() { # name, ginkgo flags...
	local name="$1"
	shift
	"$cache/ginkgo" --silence-skips --no-color --output-dir="$artifacts" \
		--junit-report="junit_conformance_$name.xml" "$@" "$cache/e2e.test" -- \
		--kubeconfig="$KUBECONFIG" --provider=skeleton --kubectl-path="$cache/kubectl" \
		--report-dir="$artifacts" --dns-domain=cluster.local --disable-log-dump
}
start=$(date +%s)
status=0
# A spec that never ends (a wait without a deadline) holds its part to the timeout, after
# which ginkgo interrupts the specs and still writes the report.
run_specs parallel --timeout="${TIMEOUT:-100m}" --procs="${PROCS:-8}" --label-filter='Conformance && !Serial' "$@" || status=1
run_specs serial --timeout="${TIMEOUT:-100m}" --label-filter='Conformance && Serial' "$@" || status=1
elapsed=$(($(date +%s) - start))

# summary.txt: passed/failed/skipped per SIG and the failed specs, from the reports.
{
	printf 'kubelab conformance run, %s, %s (%s cores), e2e.test %s, %dm%02ds\n\n' \
		"$(date -u +%Y-%m-%dT%H:%MZ)" "$(uname -n)" "$(nproc)" "$version" $((elapsed / 60)) $((elapsed % 60))
	cat "$artifacts"/junit_conformance_*.xml | awk '
		/<testcase / && /[[ ]Conformance[],]/ {
			# A spec is in both reports, skipped in the one that did not run it.
			match($0, /name="[^"]*"/); name = substr($0, RSTART + 6, RLENGTH - 7)
			match($0, /status="[a-z]+"/); st = substr($0, RSTART + 8, RLENGTH - 9)
			if (!(name in status) || status[name] == "skipped" || status[name] == "pending") status[name] = st
		}
		END {
			for (name in status) {
				match(name, /\[sig-[a-z-]+\]/); sig = (RSTART ? substr(name, RSTART + 5, RLENGTH - 6) : "other")
				st = status[name]
				if (st == "timedout" || st == "panicked" || st == "interrupted") st = "failed"
				if (st == "pending") st = "skipped"
				sigs[sig] = 1; n[sig, st]++; total[st]++
				if (st == "failed") failed[++nf] = name
			}
			printf "%-20s %7s %7s %7s\n", "SIG", "passed", "failed", "skipped"
			for (s in sigs) printf "%-20s %7d %7d %7d\n", s, n[s, "passed"], n[s, "failed"], n[s, "skipped"]
			printf "%-20s %7d %7d %7d\n\nfailed:\n", "all", total["passed"], total["failed"], total["skipped"]
			for (i = 1; i <= nf; i++) print "  " failed[i]
		}'
} | tee "$artifacts/summary.txt"
exit "$status"
