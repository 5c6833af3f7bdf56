#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from the Go module
# proxy at the versions pinned in hack/kube/go.mod and hack/etcd/go.mod, into a cache directory
# keyed by version, and prints that directory. A second run with the binaries present is instant.
#
#   MYSQLCTL_CONTROLPLANE_CACHE   overrides the cache root (default ${XDG_CACHE_HOME:-~/.cache}/mysqlctl/controlplane)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
root=${MYSQLCTL_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mysqlctl/controlplane}
dir="$root/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"
mkdir -p "$dir"

have() { for b in "$@"; do [ -x "$dir/$b" ] || return 1; done; }

if ! have etcd; then
  echo "building etcd $ETCD_VERSION into $dir (first run only)" >&2
  (cd "$here/etcd" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir/etcd.tmp" . && mv "$dir/etcd.tmp" "$dir/etcd")
fi
if ! have kube-apiserver kube-controller-manager kube-scheduler; then
  echo "building kube-apiserver, kube-controller-manager, kube-scheduler $KUBE_VERSION into $dir (first run only, ~10 min)" >&2
  minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  tmp=$(mktemp -d "$dir/build.XXXXXX")
  (cd "$here/kube" && CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
    -o "$tmp/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
  mv "$tmp"/* "$dir/" && rmdir "$tmp"
fi
# kubectl: the tests drive `kubectl explain` and kubectl's plugin completion against the rig.
if ! have kubectl; then
  echo "building kubectl $KUBE_VERSION into $dir (first run only)" >&2
  minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  (cd "$here/kube" && CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
    -o "$dir/kubectl.tmp" k8s.io/kubernetes/cmd/kubectl && mv "$dir/kubectl.tmp" "$dir/kubectl")
fi
echo "$dir"
