#!/usr/bin/env bash
# make demo: build mysqlctl, start the local rig (a real Kubernetes control plane plus a node agent
# that runs MariaDB pods as local processes) in the background, install the CRD, create a
# three-instance MariaDB cluster, print its status and what to try next. It keeps running until
# hack/demo-down.sh (make demo-down).
#
#   MYSQLCTL_DEMO_DIR          work directory of the rig (default /tmp/mysqlctl-demo)
#   MYSQLCTL_CONTROLPLANE_BIN  control-plane binaries (default: hack/build-controlplane.sh, which
#                              builds them once from the Go module proxy, ~10 minutes)
#   MYSQLCTL_DEMO_S3=1         also run an S3-compatible object store (versitygw) for backups, its
#                              settings and keys in $MYSQLCTL_DEMO_DIR/s3.env
#   MYSQLCTL_S3_BIN            the versitygw binary (default: hack/build-s3.sh, which builds it once
#                              from the Go module proxy, ~5 minutes)
#
# Needs root (the node agent uses mount namespaces, bind mounts and iptables), Go, and on Debian
# installs mariadb-server, mariadb-backup and iptables when they are missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dir=${MYSQLCTL_DEMO_DIR:-/tmp/mysqlctl-demo}
ns=default

step() { printf '\n==> %s\n' "$*" >&2; }
die() {
	printf 'demo: %s\n' "$*" >&2
	exit 1
}

[ "$(id -u)" -eq 0 ] || die "the rig needs root (mount namespaces, bind mounts, iptables): run it as root"
command -v go >/dev/null || die "Go is needed to build mysqlctl and the control plane (https://go.dev/dl/)"

missing=()
command -v mariadbd >/dev/null || missing+=(mariadb-server)
command -v mariadb >/dev/null || missing+=(mariadb-client)
command -v mariadb-backup >/dev/null || missing+=(mariadb-backup)
command -v iptables >/dev/null || missing+=(iptables)
command -v nsenter >/dev/null || missing+=(util-linux)
if [ ${#missing[@]} -gt 0 ]; then
	command -v apt-get >/dev/null || die "install these packages first: ${missing[*]}"
	step "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

step "building bin/mysqlctl and bin/rig"
if [ -f Makefile ] && grep -q '^build:' Makefile; then
	make --no-print-directory build
else
	CGO_ENABLED=0 go build -o bin/mysqlctl ./cmd/mysqlctl
fi
go build -o bin/rig ./test/rig/cmd/rig

if [ -z "${MYSQLCTL_CONTROLPLANE_BIN:-}" ]; then
	step "control-plane binaries (built once from the Go module proxy and cached; the first build takes ~10 minutes)"
	MYSQLCTL_CONTROLPLANE_BIN=$(hack/build-controlplane.sh)
fi
export MYSQLCTL_CONTROLPLANE_BIN

up_flags=()
if [ "${MYSQLCTL_DEMO_S3:-0}" = 1 ]; then
	if [ -z "${MYSQLCTL_S3_BIN:-}" ]; then
		step "object store binary (versitygw, built once from the Go module proxy and cached; the first build takes ~5 minutes)"
		MYSQLCTL_S3_BIN=$(hack/build-s3.sh)
	fi
	export MYSQLCTL_S3_BIN
	up_flags+=(--s3)
fi

step "starting the rig in $dir"
bin/rig up --dir "$dir" "${up_flags[@]}"
trap 'printf "\ndemo: failed; the rig keeps running in %s (bin/rig status --dir %s); stop it with: make demo-down\n" "$dir" "$dir" >&2' ERR
export KUBECONFIG="$dir/kubeconfig"
rig() { bin/rig "$1" --dir "$dir" "${@:2}"; }

step "bin/mysqlctl install"
bin/mysqlctl install --kubeconfig "$KUBECONFIG"

cluster=demo
if bin/mysqlctl status "$cluster" --kubeconfig "$KUBECONFIG" -n "$ns" >/dev/null 2>&1; then
	step "cluster $cluster exists already"
else
	# mysqlctl reaches the servers as from any workstation: through the API server's
	# pods/portforward and the rig node's kubelet API.
	step "bin/mysqlctl create -f manifests/examples/demo.yaml --wait"
	bin/mysqlctl create -f manifests/examples/demo.yaml --wait --kubeconfig "$KUBECONFIG" -n "$ns"
fi
step "bin/mysqlctl status $cluster"
bin/mysqlctl status "$cluster" --kubeconfig "$KUBECONFIG" -n "$ns" || true

step "pods"
rig pods -n "$ns"

first_pod=$(rig pods -n "$ns" | awk 'NR == 2 { print $1 }')

if [ -f "$dir/s3.env" ]; then
	# Outside the "Try:" block: test/demo runs every line of that block.
	printf '\nAn S3-compatible object store (versitygw) runs for backups: its endpoint, region, bucket and\n'
	printf 'keys are in %s (mode 0600; `set -a; . %s; set +a` exports them for the AWS SDKs).\n' "$dir/s3.env" "$dir/s3.env"
fi

# try CMD COMMENT prints one suggestion, aligned. test/demo runs every line printed here.
try() { printf '  %-62s # %s\n' "$1" "$2"; }

printf '\nThe demo is running (work directory %s). Try:\n\n' "$dir"
printf '  export KUBECONFIG=%s\n' "$KUBECONFIG"
# kubectl: the one on PATH, or the one built with the control plane.
kubectl=kubectl
command -v kubectl >/dev/null || kubectl="$MYSQLCTL_CONTROLPLANE_BIN/kubectl"
try "$kubectl get pods -o wide" "the pods, on their own loopback addresses"
try "$kubectl logs $first_pod" "the server's output, through the API server and the node"
try "bin/mysqlctl status $cluster" "roles, GTIDs, lag"
try "bin/mysqlctl switchover $cluster --wait" "planned primary change"
try "bin/mysqlctl watch $cluster" "automatic failover while you inject faults (Ctrl-C ends it)"
try "bin/rig kill --dir $dir $first_pod" "kill -9 the server; RESTARTS grows"
try "bin/rig freeze --dir $dir $first_pod" "SIGSTOP: READY drops to 0/1 (bin/rig thaw …)"
try "bin/rig cut --dir $dir $first_pod" "partition it (bin/rig restore …)"
try "bin/rig logs --dir $dir $first_pod" "the server's output"
try "bin/rig status --dir $dir" "the rig, its node and pods"
printf '\nStop everything with: make demo-down   (or hack/demo-down.sh)\n'
