#!/usr/bin/env bash
# Checks a release directory that hack/dist.sh wrote (mysql.yaml, checksums.txt and the
# mysqlctl_<version>_<os>_<arch>.tar.gz archives) with krew's own tools, offline:
#
#   1. every archive matches checksums.txt (sha256sum -c, as a user without krew checks it);
#   2. validate-krew-manifest -skip-install, krew-index's validator: apiVersion, kind, name,
#      semantic version, shortDescription, uri, sha256 and bin set, files entries, selectors that
#      match a platform krew knows and do not overlap;
#   3. for each archive, `kubectl-krew install --manifest --archive` into a fresh KREW_ROOT with
#      KREW_OS/KREW_ARCH set to the archive's platform: krew picks that platform's entry, checks
#      the archive against its sha256, extracts it, applies every files entry (each must match
#      something in the archive) and links its bin;
#   4. a LICENSE was installed with it, which validate-krew-manifest also demands when it installs
#      (it downloads from the uri, so it runs here with -skip-install and step 3 installs instead).
#
#   hack/krewcheck/check.sh DIST_DIR
#
# The tools come from hack/krewcheck/build.sh (built once, cached). Prints one line on success;
# on failure, the failing tool's output, and exits 1.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIST_DIR" >&2; exit 2; }
dist=$(cd "$1" && pwd)
manifest="$dist/mysql.yaml"
krew=$("$(dirname "$0")/build.sh")

fail() { echo "krewcheck: $manifest: $1" >&2; [ -z "${2:-}" ] || printf '%s\n' "$2" | sed 's/^/  /' >&2; exit 1; }

[ -f "$manifest" ] || fail "no such file"
if command -v sha256sum >/dev/null 2>&1; then sha256=(sha256sum); else sha256=(shasum -a 256); fi
out=$(cd "$dist" && "${sha256[@]}" -c checksums.txt 2>&1) ||
  fail "checksums.txt does not match the archives" "$(grep -v ': OK$' <<<"$out")"

# (On failure it exits through klog.Fatal, which appends every goroutine's stack: cut that.)
out=$("$krew/validate-krew-manifest" -manifest "$manifest" -skip-install 2>&1) ||
  fail "validate-krew-manifest failed" "$(sed '/^goroutine /,$d' <<<"$out")"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
platforms=()
while read -r _ name; do
  name=${name#\*}
  p=${name%.tar.gz} && arch=${p##*_} && p=${p%_*} && os=${p##*_}
  platforms+=("$os/$arch")
  r="$root/${os}_$arch"
  out=$(KREW_ROOT=$r KREW_OS=$os KREW_ARCH=$arch KREW_NO_UPGRADE_CHECK=1 PATH="$r/bin:$PATH" \
    "$krew/kubectl-krew" install --manifest="$manifest" --archive="$dist/$name" </dev/null 2>&1) ||
    fail "krew install for $os/$arch from $name failed" "$out"
  licenses=("$r"/store/mysql/*/LICENSE)
  [ -f "${licenses[0]}" ] || fail "krew install for $os/$arch installed no LICENSE" "$(cd "$r/store" && find . -type f)"
done <"$dist/checksums.txt"
[ ${#platforms[@]} -gt 0 ] || fail "checksums.txt lists no archive"

echo "krewcheck: $manifest: ok: validate-krew-manifest and kubectl-krew install ($(basename "$krew")) of ${platforms[*]} from the archives in $dist"
