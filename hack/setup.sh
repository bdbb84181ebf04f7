#!/usr/bin/env bash
# Installs what kubelab needs on a fresh Debian machine, only where missing: with no
# argument what running a cluster needs (hack/up.sh), with --test also the judges the
# test suite compares kubelab with (hack/test.sh). Safe to run again: it changes nothing
# when everything is there, and then prints nothing.
set -euo pipefail

test=false
case "${1:-}" in
--test) test=true ;;
"") ;;
*)
	echo "usage: hack/setup.sh [--test]" >&2
	exit 2
	;;
esac

# Debian packages: the real parts kubelab drives (block devices, filesystems, runtime,
# CNI plugins, nftables), what its images are built from (busybox-static, nginx), and
# curl for the nodes' metadata service by hand.
packages=(
	util-linux e2fsprogs xfsprogs iproute2 nftables
	containerd runc containernetworking-plugins busybox-static nginx curl
)
# The peers the tests use as judges: etcd-server, awscli, and chromium, the browser that
# opens `kubelab trace -o svg`'s pictures.
if $test; then
	packages+=(etcd-server awscli chromium)
fi

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: missing Debian packages (${missing[*]}); run as root to install them" >&2
	else
		echo "setup: installing ${missing[*]}" >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		# etcd-server's, containerd's and nginx's units must not start on their own:
		# kubelab starts what it uses, and only that.
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
fi

$test || exit 0

# Go tools the tests use as judges.
gobin="$(go env GOPATH)/bin"
if [ ! -x "$gobin/csi-sanity" ]; then
	echo "setup: installing csi-sanity" >&2
	go install github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity@v5.6.0 || echo "setup: csi-sanity not installed; its tests will skip" >&2
fi

# The upstream CSI sidecars, which a test runs in place of kubelab's with only the RBAC
# kubelab gives the add-on. Their modules replace dependencies, so `go install mod@version`
# refuses them: each is built in a copy of its module.
upstream="$(go env GOPATH)/upstream/bin"
build_upstream() { # module version command
	[ -x "$upstream/$3" ] && return 0
	echo "setup: building the upstream $3 $2" >&2
	local src dir
	src="$(go mod download -json "$1@$2" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	[ -n "$src" ] || return 1
	dir="$(mktemp -d)"
	cp -r "$src/." "$dir" && chmod -R u+w "$dir" &&
		(cd "$dir" && GOFLAGS=-mod=mod go build -o "$upstream/$3" "./cmd/$3")
	local rc=$?
	rm -rf "$dir"
	return $rc
}
build_upstream github.com/kubernetes-csi/external-provisioner/v6 v6.4.0 csi-provisioner ||
	echo "setup: the upstream csi-provisioner not built; its test will skip" >&2
build_upstream github.com/kubernetes-csi/external-attacher/v4 v4.13.0 csi-attacher ||
	echo "setup: the upstream csi-attacher not built; its test will skip" >&2
# The Helm client, which installs, upgrades, rolls back and uninstalls a chart in a test.
if [ ! -x "$upstream/helm" ]; then
	echo "setup: building helm v4.3.1" >&2
	GOBIN="$upstream" go install helm.sh/helm/v4/cmd/helm@v4.3.1 || echo "setup: helm not built; its test will skip" >&2
fi
