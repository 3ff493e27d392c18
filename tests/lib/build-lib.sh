# shellcheck shell=bash
# What the build scripts share (sourced, not run): the cache root outside the
# clone, pinned versions read from go.mod, a timed step, a file of a Go module
# fetched from the module proxy, a Go build that lands
# only once complete, and one file of a Debian package unpacked without
# installing it. Every part is cached by version, so a second run is a no-op.

# The cache root: every script keeps its results under it, keyed by version.
cache_root=${GPUREADY_CACHE:-$HOME/.cache/gpuready}

# module_version MODULE GO_MOD: the version GO_MOD requires of MODULE, whether
# the requirement sits on a 'require' line or inside a require block.
module_version() { awk -v m="$1" '($1==m){print $2; exit} ($1=="require" && $2==m){print $3; exit}' "$2"; }

step() { printf '==> %s\n' "$*" >&2; }

# module_file MODULE VERSION PATH OUTPUT: the file PATH of Go module
# MODULE@VERSION (go mod download: checked against the Go checksum database),
# copied to OUTPUT and moved into place only when complete, so a test reading
# it concurrently never sees half a file. A no-op when OUTPUT is there.
module_file() {
  local module=$1 version=$2 path=$3 output=$4 work json moddir
  [ -s "$output" ] && return 0
  mkdir -p "$(dirname "$output")"
  # Outside any module, so no go.mod nearby changes what is resolved.
  work=$(mktemp -d)
  json=$(cd "$work" && GO111MODULE=on GOFLAGS=-mod=mod go mod download -json "$module@$version") || {
    rm -rf "$work"
    echo "error: 'go mod download $module@$version' failed; is the Go module proxy reachable (GOPROXY)?" >&2
    echo "$json" >&2; return 1; }
  rm -rf "$work"
  moddir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -f "$moddir/$path" ] || { echo "error: $module@$version has no $path (module dir '$moddir')" >&2; return 1; }
  cp "$moddir/$path" "$output.tmp.$$"
  chmod 0644 "$output.tmp.$$"
  mv "$output.tmp.$$" "$output"
}

# go_build_once OUTPUT MODULE_DIR LABEL [go build arguments...]: a static build
# in the helper module MODULE_DIR, written to OUTPUT.tmp and moved into place
# only when complete (an interrupted build never leaves a binary to trust). A
# no-op when OUTPUT is already there.
go_build_once() {
  local output=$1 dir=$2 label=$3 start=$SECONDS
  shift 3
  [ -x "$output" ] && return 0
  step "building $label"
  mkdir -p "$(dirname "$output")"
  (cd "$dir" && GOTOOLCHAIN=local CGO_ENABLED=0 go build -mod=mod -trimpath -o "$output.tmp" "$@")
  mv "$output.tmp" "$output"
  step "$label built in $((SECONDS - start))s"
}

# debian_file PACKAGE PATH NAME: the file PATH of Debian's PACKAGE at its
# candidate version, unpacked (apt-get download, dpkg-deb -x: nothing is
# installed, no service starts, no root needed once the package lists are
# there) into $cache_root/tools/NAME-deb-<version>/. Prints the file's path.
debian_file() {
  local package=$1 path=$2 name=$3 have version dir tmp start=$SECONDS
  mkdir -p "$cache_root/tools"
  have=$(find "$cache_root/tools" -maxdepth 2 -path "*/$name-deb-*/$(basename "$path")" | sort | tail -n 1)
  if [ -n "$have" ] && [ -x "$have" ]; then echo "$have"; return 0; fi
  version=$(apt-cache policy "$package" 2>/dev/null | awk '/Candidate:/ {print $2}')
  if [ -z "$version" ] || [ "$version" = "(none)" ]; then
    step "apt-get update (no candidate for Debian's $package package yet)"
    apt-get update -qq >&2
    version=$(apt-cache policy "$package" | awk '/Candidate:/ {print $2}')
  fi
  [ -n "$version" ] && [ "$version" != "(none)" ] || {
    echo "error: Debian offers no '$package' package here (apt-cache policy $package)" >&2; return 1; }
  dir="$cache_root/tools/$name-deb-$(echo "$version" | tr -c 'a-zA-Z0-9._\n-' '_')"
  step "fetching $(basename "$path") from Debian's $package $version (unpacked, not installed)"
  tmp=$(mktemp -d)
  chmod 755 "$tmp"
  (cd "$tmp" && apt-get download -q "$package=$version" >/dev/null 2>&1) \
    || (cd "$tmp" && apt-get download "$package=$version" >&2)
  dpkg-deb -x "$tmp/${package}_"*.deb "$tmp/root"
  mkdir -p "$dir"
  cp "$tmp/root/$path" "$dir/$(basename "$path").tmp"
  mv "$dir/$(basename "$path").tmp" "$dir/$(basename "$path")"
  rm -rf "$tmp"
  step "$(basename "$path") ready in $((SECONDS - start))s"
  echo "$dir/$(basename "$path")"
}
