#!/usr/bin/env bash
# Builds krew's own tools from the Go module proxy at the version pinned in hack/krewcheck/go.mod
# (its `tool` lines) into a cache directory keyed by that version, and prints that directory:
#
#   kubectl-krew             the plugin manager (`kubectl krew`)
#   validate-krew-manifest   the validator krew-index runs on every manifest submitted to it
#
# A second run with the binaries present is instant. They are built without a version stamp, so
# krew treats them as a development build and never asks GitHub for a newer release.
#
#   MYSQLCTL_KREW_CACHE   overrides the cache root (default ${XDG_CACHE_HOME:-~/.cache}/mysqlctl/krew)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=$(sed -n 's|^[[:space:]]*sigs\.k8s\.io/krew \(v[^[:space:]]*\).*|\1|p' "$here/go.mod")
[ -n "$version" ] || { echo "krewcheck: no sigs.k8s.io/krew requirement in $here/go.mod" >&2; exit 1; }
root=${MYSQLCTL_KREW_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mysqlctl/krew}
dir="$root/krew-$version"

if ! [ -x "$dir/kubectl-krew" ] || ! [ -x "$dir/validate-krew-manifest" ]; then
  echo "building krew $version into $dir (first run only)" >&2
  mkdir -p "$dir"
  tmp=$(mktemp -d "$dir/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/" \
    sigs.k8s.io/krew/cmd/krew sigs.k8s.io/krew/cmd/validate-krew-manifest)
  mv "$tmp/validate-krew-manifest" "$dir/validate-krew-manifest"
  mv "$tmp/krew" "$dir/kubectl-krew"
fi
echo "$dir"
