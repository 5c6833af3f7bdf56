#!/usr/bin/env bash
# Builds versitygw, the S3-compatible object store of the test world (tests, make demo, CI), from
# the Go module proxy at the pinned version into a cache directory keyed by that version, and
# prints the binary's path. A second run with the binary present is instant.
#
# versitygw (github.com/versity/versitygw, Apache-2.0) serves a plain directory tree (its POSIX
# backend) over the S3 API with SigV4 and multipart uploads. Its module has no replace
# directives, so `go install module@version` builds it as published, checked against its own
# go.sum and the checksum database; nothing of it is committed here. CGO is off: the only cgo
# code (RDMA, cuObject) is behind build tags the POSIX gateway does not need.
#
#   MYSQLCTL_S3_CACHE   overrides the cache root (default ${XDG_CACHE_HOME:-~/.cache}/mysqlctl/s3)
set -euo pipefail
VERSITYGW_VERSION=v1.8.0
root=${MYSQLCTL_S3_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mysqlctl/s3}
dir="$root/versitygw-$VERSITYGW_VERSION"
bin="$dir/versitygw"

if [ ! -x "$bin" ]; then
  echo "building versitygw $VERSITYGW_VERSION into $dir (first run only, a few minutes)" >&2
  mkdir -p "$dir"
  tmp=$(mktemp -d "$dir/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # Run outside any module (a throwaway directory) with GOFLAGS cleared, so the caller's go.mod,
  # go.work and flags cannot change what is built.
  (cd "$tmp" && GOBIN="$tmp/bin" GOWORK=off GOFLAGS= CGO_ENABLED=0 \
    go install -trimpath -ldflags "-s -w -X main.Version=$VERSITYGW_VERSION" \
    "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION")
  mv "$tmp/bin/versitygw" "$bin"
fi
echo "$bin"
