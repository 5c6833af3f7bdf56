#!/usr/bin/env bash
# Cross-builds the release archives, their checksums and the krew manifest; `make dist` runs it.
#
#   DIST_DIR/mysqlctl_<VERSION>_<os>_<arch>.tar.gz   kubectl-mysql, mysqlctl (the same binary),
#                                                   README.md, LICENSE and docs/ (the manual the
#                                                   README links to)
#   DIST_DIR/checksums.txt                          sha256sum format, one line per archive
#   DIST_DIR/mysql.yaml                             plugins/mysql.yaml rendered for these archives
#
# then checks the result with krew's own validator and installer (hack/krewcheck/check.sh: no
# network, but the first run builds krew from the Go module proxy and caches it).
#
# Environment (all optional):
#   DIST_PLATFORMS  space-separated os/arch list (default: linux/amd64 linux/arm64 darwin/amd64
#                   darwin/arm64); the manifest lists exactly these
#   DIST_DIR        output directory (default: dist); earlier archives, checksums.txt and
#                   mysql.yaml in it are removed first, nothing else
#   VERSION COMMIT DATE DIST_LDFLAGS   as the Makefile's VERSION, COMMIT, DATE and LDFLAGS
#   DIST_HOMEPAGE   the manifest's homepage (default: https://github.com/mysqlctl/mysqlctl)
#   DIST_URL_BASE   where the archives are published (default: $DIST_HOMEPAGE/releases/download/$VERSION)
#   GO              the go command that builds the binaries (default: go)
#
# Archives are reproducible for the same binaries: sorted entries, mtime 0, owner 0:0, fixed
# modes, gzip without name or time. The binaries embed DATE: pin it (make dist DATE=…) for
# byte-identical archives across runs.
set -euo pipefail

DIST_DIR=${DIST_DIR:-dist}
mkdir -p "$DIST_DIR"
DIST_DIR=$(cd "$DIST_DIR" && pwd)
cd "$(dirname "$0")/.."

GO=${GO:-go}
DIST_PLATFORMS=${DIST_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
COMMIT=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
DATE=${DATE:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}
DIST_LDFLAGS=${DIST_LDFLAGS:-"-s -w -X main.version=$VERSION -X main.commit=$COMMIT -X main.date=$DATE"}
DIST_HOMEPAGE=${DIST_HOMEPAGE:-https://github.com/mysqlctl/mysqlctl}
DIST_URL_BASE=${DIST_URL_BASE:-$DIST_HOMEPAGE/releases/download/$VERSION}
DIST_URL_BASE=${DIST_URL_BASE%/}

die() { echo "dist: $*" >&2; exit 1; }

[[ $VERSION =~ ^[0-9A-Za-z][0-9A-Za-z.+-]*$ ]] || die "VERSION \"$VERSION\" cannot name an archive (letters, digits, . + - only)"

# krew wants a semantic version with a leading v: a tag such as v1.2.3 (or git describe's
# v1.2.3-4-gabcdef) is one already; anything else (a bare commit from --always) becomes
# v0.0.0-dev-<version> (krew's validator then checks that it parses).
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$'
if [[ $VERSION =~ $semver ]]; then
  KREW_VERSION=$VERSION
else
  KREW_VERSION="v0.0.0-dev-$(printf %s "$VERSION" | tr -c '0-9A-Za-z-' '-')"
fi

# GNU tar for --sort/--mtime/--owner (gtar on macOS); sha256sum or shasum.
case "$(tar --version 2>/dev/null)" in
  *"GNU tar"*) TAR=tar ;;
  *) command -v gtar >/dev/null 2>&1 || die "GNU tar is needed (on macOS: brew install gnu-tar)"; TAR=gtar ;;
esac
if command -v sha256sum >/dev/null 2>&1; then sha256() { sha256sum "$@"; }; else sha256() { shasum -a 256 "$@"; }; fi

keep=()
for p in $DIST_PLATFORMS; do
  case $p in
    linux/amd64 | linux/arm64 | darwin/amd64 | darwin/arm64) ;;
    *) die "platform \"$p\" is not one of linux/amd64 linux/arm64 darwin/amd64 darwin/arm64" ;;
  esac
  for k in "${keep[@]}"; do [[ $k != "${p/\//_}" ]] || die "platform $p listed twice"; done
  keep+=("${p/\//_}")
done
[[ ${#keep[@]} -gt 0 ]] || die "DIST_PLATFORMS is empty"

rm -f "$DIST_DIR"/mysqlctl_*.tar.gz "$DIST_DIR/checksums.txt" "$DIST_DIR/mysql.yaml"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

extra=(README.md LICENSE)

archives=()
for p in $DIST_PLATFORMS; do
  os=${p%/*} arch=${p#*/}
  name="mysqlctl_${VERSION}_${os}_${arch}.tar.gz"
  dir="$stage/${os}_${arch}"
  mkdir -p "$dir"
  echo "dist: $name"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath -ldflags "$DIST_LDFLAGS" -o "$dir/kubectl-mysql" ./cmd/mysqlctl
  chmod 0755 "$dir/kubectl-mysql"
  cp "$dir/kubectl-mysql" "$dir/mysqlctl"
  for f in "${extra[@]}"; do install -m 0644 "$f" "$dir/$f"; done
  while IFS= read -r f; do install -D -m 0644 "$f" "$dir/$f"; done < <(find docs -type f -name "*.md")
  find "$dir/docs" -type d -exec chmod 0755 {} +
  # Entries in byte order, each directory before what it holds (--sort=name orders only what
  # tar finds in directories).
  (cd "$dir" && find . -mindepth 1 | sed 's|^\./||' | LC_ALL=C sort | "$TAR" --format=gnu --sort=name --mtime=@0 \
    --owner=0 --group=0 --numeric-owner --no-recursion -T - -cf -) | gzip -n >"$DIST_DIR/$name"
  archives+=("$name")
done

(cd "$DIST_DIR" && sha256 "${archives[@]}") >"$DIST_DIR/checksums.txt"

# Render the manifest: keep the platform list items whose @SHA256_<os>_<arch>@ was built, drop
# the template's leading comment, substitute every @NAME@ from the DISTVAR_NAME variables.
export DISTVAR_VERSION=$VERSION DISTVAR_KREW_VERSION=$KREW_VERSION DISTVAR_URL_BASE=$DIST_URL_BASE DISTVAR_HOMEPAGE=$DIST_HOMEPAGE
export DISTVAR_KEEP="${keep[*]}"
while read -r sum name; do
  p=${name#"mysqlctl_${VERSION}_"}
  export "DISTVAR_SHA256_${p%.tar.gz}=$sum"
done <"$DIST_DIR/checksums.txt"
awk -v header="# Rendered by hack/dist.sh from plugins/mysql.yaml for version $VERSION; do not edit." '
  function repl(s, from, to,   out, i) {
    out = ""
    while ((i = index(s, from)) > 0) { out = out substr(s, 1, i - 1) to; s = substr(s, i + length(from)) }
    return out s
  }
  function emit(line,   k) { for (k in vals) line = repl(line, "@" k "@", vals[k]); print line }
  function flush(   i, n, kept, found) {
    if (nb == 0) return
    found = 0
    for (i = 1; i <= nkeep; i++) if (index(block, "@SHA256_" keep[i] "@")) { found = 1; seen[keep[i]] = 1 }
    if (!found && block !~ /@SHA256_[a-z0-9]+_[a-z0-9]+@/) { print "dist: a platform of plugins/mysql.yaml has no @SHA256_<os>_<arch>@" > "/dev/stderr"; bad = 1 }
    if (found) for (i = 1; i <= nb; i++) emit(lines[i])
    nb = 0; block = ""
  }
  BEGIN {
    for (k in ENVIRON) if (k ~ /^DISTVAR_/ && k != "DISTVAR_KEEP") vals[substr(k, 9)] = ENVIRON[k]
    nkeep = split(ENVIRON["DISTVAR_KEEP"], keep, " ")
    print header
  }
  NR == 1, !/^#/ { if (/^#/) next }
  inplat && /^  - / { flush(); lines[++nb] = $0; block = block $0 "\n"; next }
  inplat && (/^    / || /^[[:space:]]*$/) && nb > 0 { lines[++nb] = $0; block = block $0 "\n"; next }
  inplat { flush(); inplat = 0 }
  /^  platforms:[[:space:]]*$/ { emit($0); inplat = 1; next }
  { emit($0) }
  END {
    flush()
    for (i = 1; i <= nkeep; i++) if (!seen[keep[i]]) { print "dist: plugins/mysql.yaml has no platform with @SHA256_" keep[i] "@" > "/dev/stderr"; bad = 1 }
    exit bad
  }
' plugins/mysql.yaml >"$DIST_DIR/mysql.yaml"
if left=$(grep -o '@[A-Za-z0-9_]*@' "$DIST_DIR/mysql.yaml"); then
  die "placeholders left in $DIST_DIR/mysql.yaml: $(echo "$left" | sort -u | tr '\n' ' ')"
fi

hack/krewcheck/check.sh "$DIST_DIR"
ls -l "$DIST_DIR"
