// Package image tests the container image `make image` builds (hack/image.sh, Dockerfile.local):
// it is built with the real buildah, offline, from a static binary; its configuration runs
// /mysqlctl as the nonroot user; `mysqlctl version` and `mysqlctl watch --help` run inside it; and
// it carries the name manifests/watch/deployment.yaml runs. The tests need root and buildah
// (apt-get install -y --no-install-recommends buildah), which .ci/run installs.
package image
