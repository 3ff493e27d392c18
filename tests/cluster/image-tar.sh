#!/usr/bin/env bash
# Turns a root file system folder into a one-layer container image tarball that
# `ctr images import` reads, without a container engine and without a remote
# registry. crane (go-containerregistry, built by build.sh) does the image work:
# `crane append` makes the layer into an image on an empty base and pushes it to
# a registry crane itself serves on 127.0.0.1 for the few seconds of this script
# (`crane mutate`, which sets entrypoint, cmd, user and ports, reads only from a
# registry), and `crane mutate -o` writes the final tarball. The layer tar is
# made with fixed owner, order and mtime, so the same folder gives the same
# image digest.
set -euo pipefail

usage() {
  echo "usage: image-tar.sh --crane CRANE --root DIR --name NAME --entrypoint PATH [--cmd ARG]... --user UID:GID [--expose PORT/tcp] --output FILE.tar" >&2
  exit 2
}

crane="" root="" name="" entrypoint="" user="" expose="" output=""
cmd=()
while [ $# -gt 0 ]; do
  case "$1" in
    --crane) crane=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --entrypoint) entrypoint=$2; shift 2 ;;
    --cmd) cmd+=("$2"); shift 2 ;;
    --user) user=$2; shift 2 ;;
    --expose) expose=$2; shift 2 ;;
    --output) output=$2; shift 2 ;;
    *) usage ;;
  esac
done
[ -n "$crane" ] && [ -d "$root" ] && [ -n "$name" ] && [ -n "$entrypoint" ] && [ -n "$user" ] && [ -n "$output" ] || usage

work=$(mktemp -d)
registry_pid=""
cleanup() {
  if [ -n "$registry_pid" ]; then kill "$registry_pid" 2>/dev/null || true; wait "$registry_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --format=posix \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$root" -cf "$work/layer.tar" .

# Port 0: the kernel picks a free port, so two builds (or the tests) never clash.
"$crane" registry serve --address 127.0.0.1:0 >"$work/registry.log" 2>&1 &
registry_pid=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$work/registry.log")
  [ -n "$port" ] && break
  kill -0 "$registry_pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$port" ] || { echo "error: crane's registry did not start:" >&2; cat "$work/registry.log" >&2; exit 1; }

staging="127.0.0.1:$port/image:build"
"$crane" append --oci-empty-base -f "$work/layer.tar" -t "$staging" >/dev/null 2>"$work/append.log" \
  || { cat "$work/append.log" >&2; exit 1; }
args=(--entrypoint "$entrypoint" --user "$user" --set-platform "linux/$(dpkg --print-architecture)")
for c in "${cmd[@]}"; do args+=(--cmd "$c"); done
[ -n "$expose" ] && args+=(--exposed-ports "$expose")
"$crane" mutate "$staging" "${args[@]}" -t "$name" -o "$output"
