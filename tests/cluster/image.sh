#!/usr/bin/env bash
# Builds the operator image (with --probe: the probe image) from this checkout
# without a container engine or a registry, in the layout of the Dockerfile's
# stages: the binary at /usr/local/bin/gpuready, user and group 65532 with a
# passwd entry, the CA bundle at /etc/ssl/certs/ca-certificates.crt, EXPOSE 8080,
# ENTRYPOINT /usr/local/bin/gpuready, CMD run (probe: CMD probe).
#
# How it differs from the Dockerfile build, and why: the Dockerfile links the
# operator statically against musl on an empty base; the musl target cannot be
# installed on the machines this runs on, so this is a glibc release build of
# the same code, and the image carries, beside the binary, exactly the shared
# libraries `ldd` lists (libc, libgcc_s, libm, the dynamic loader) copied from
# the build machine. The probe image of the Dockerfile is a glibc build too, on
# debian:bookworm-slim; here it is the same binary on the same minimal base
# (NVML is loaded at run time from what the NVIDIA runtime mounts).
#
# With --import DIR (a cluster of tests/cluster/up.sh) the image is imported
# into that cluster's containerd. The tarball is written to
# target/cluster-images/; the image reference is printed on the last line.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
probe=false import=""
while [ $# -gt 0 ]; do
  case "$1" in
    --probe) probe=true; shift ;;
    --import) import=$(cd "$2" && pwd); shift 2 ;;
    -h|--help) echo "usage: tests/cluster/image.sh [--probe] [--import CLUSTER_DIR]" >&2; exit 0 ;;
    *) echo "usage: tests/cluster/image.sh [--probe] [--import CLUSTER_DIR]" >&2; exit 2 ;;
  esac
done
bin=$(bash "$here/build.sh" --print-dir)
[ -x "$bin/crane" ] || { echo "error: crane is missing: run tests/cluster/build.sh" >&2; exit 1; }

cd "$repo"
profile=${GPUREADY_IMAGE_PROFILE:-release}
echo "==> cargo build --profile $profile -p gpuready --bin gpuready" >&2
cargo build --locked --profile "$profile" -p gpuready --bin gpuready >&2
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
case "$profile" in dev) sub=debug ;; *) sub=$profile ;; esac
binary="$target_dir/$sub/gpuready"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
install -D -m 0755 "$binary" "$root/usr/local/bin/gpuready"
# The shared libraries the binary needs, at the paths the loader looks in.
for lib in $(ldd "$binary" | awk '/=>/ {print $3} !/=>/ && $1 ~ /^\// {print $1}'); do
  [ -f "$lib" ] || continue
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
mkdir -p "$root/etc/ssl/certs"
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
echo 'gpuready:x:65532:65532:gpuready:/nonexistent:/sbin/nologin' > "$root/etc/passwd"
echo 'gpuready:x:65532:' > "$root/etc/group"
"$root/usr/local/bin/gpuready" --version >&2

# The tag names the binary's content, so every changed build is a new image
# (the kubelet never mistakes an old image for it) and the same build the same.
version=$("$binary" --version | awk '{print $2}')
tag="$version-local.$(sha256sum "$binary" | cut -c1-12)"
expose=(--expose 8080/tcp)
if $probe; then name=gpuready.local/gpuready-probe cmd=probe expose=(); else name=gpuready.local/gpuready cmd=run; fi
mkdir -p "$target_dir/cluster-images"
tarball="$target_dir/cluster-images/$(basename "$name")-$tag.tar"
"$here/image-tar.sh" --crane "$bin/crane" --root "$root" --name "$name:$tag" \
  --entrypoint /usr/local/bin/gpuready --cmd "$cmd" --user 65532:65532 "${expose[@]}" --output "$tarball"
echo "==> $tarball" >&2

if [ -n "$import" ]; then
  holder=$(cat "$import/pids/holder")
  nsenter -t "$holder" -n -m -- ctr --address "$import/containerd/containerd.sock" -n k8s.io images import "$tarball" >&2
fi
echo "$name:$tag"
