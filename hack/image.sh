#!/usr/bin/env bash
# Builds the container image of mysqlctl with buildah and no network (make image): the static
# binary BIN (default bin/mysqlctl, CGO_ENABLED=0) on an empty base (Dockerfile.local), tagged
# IMAGE (default mysqlctl:latest, the image manifests/watch/deployment.yaml runs).
#
# buildah keeps the image in the storage /etc/containers/storage.conf configures, or the file
# CONTAINERS_STORAGE_CONF names (test/image uses a temporary one); where overlay mounts are
# refused (inside some containers) use driver = "vfs" there, or STORAGE_DRIVER=vfs for a new
# storage. Nothing is pulled (FROM scratch, --pull=never). Prints the image ID on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE="${IMAGE:-mysqlctl:latest}"
BIN="${BIN:-bin/mysqlctl}"
VERSION="${VERSION:-dev}"

if ! command -v buildah >/dev/null 2>&1; then
  echo "image: buildah not found (apt-get install -y --no-install-recommends buildah)" >&2
  exit 1
fi
# A binary that needs libc would not start on an empty base: Go records how it was built.
if ! "${GO:-go}" version -m "$BIN" 2>/dev/null | grep -q 'CGO_ENABLED=0'; then
  echo "image: $BIN is missing or not static (build it with CGO_ENABLED=0: make build)" >&2
  exit 1
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$BIN" "$ctx/mysqlctl"
cp LICENSE "$ctx/LICENSE"
buildah build --quiet --pull=never --layers=false \
  --label "org.opencontainers.image.title=mysqlctl" \
  --label "org.opencontainers.image.version=$VERSION" \
  --label "org.opencontainers.image.licenses=Apache-2.0" \
  -f Dockerfile.local -t "$IMAGE" "$ctx"
