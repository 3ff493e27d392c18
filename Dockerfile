# syntax=docker/dockerfile:1
#
# The gpuready operator image: one static (musl) binary on an empty base, run as
# the non-root user 65532 that the Helm chart's securityContext expects.
#
#   docker build -t <your-registry>/<path>/gpuready:0.1.0 .
#   docker push <your-registry>/<path>/gpuready:0.1.0
#   helm install gpuready charts/gpuready -n gpuready-system --create-namespace \
#     --set image.repository=<your-registry>/<path>/gpuready
#
# The base images are official images named without a registry host (your
# engine's default registry); point RUST_IMAGE at a mirror if you need one.
# Needs BuildKit (the default builder of current Docker and Podman/Buildah).
ARG RUST_IMAGE=rust:1.95-alpine
# The probe image (`--target probe`, see below) is a glibc build on a glibc base.
ARG RUST_GNU_IMAGE=rust:1.95-bookworm
ARG PROBE_BASE_IMAGE=debian:bookworm-slim

FROM ${RUST_IMAGE} AS builder
# musl-dev: C runtime objects for ring's C/assembly parts; the Rust target on
# Alpine is *-linux-musl, which links statically. make: jemalloc (the
# operator's allocator, see crates/gpuready/src/main.rs) is built from C.
RUN apk add --no-cache musl-dev make ca-certificates
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
# Cache mounts keep the registry and the target folder between builds.
# jemalloc fixes its page size when it is built: arm64 kernels with 64 KiB pages
# exist, and a 64 KiB build runs on 4 KiB kernels too, not the other way round.
ARG TARGETARCH
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    if [ "$TARGETARCH" = arm64 ]; then export JEMALLOC_SYS_WITH_LG_PAGE=16; fi \
 && cargo build --release --locked -p gpuready --bin gpuready \
 && install -D -m 0755 target/release/gpuready /out/usr/local/bin/gpuready \
 && /out/usr/local/bin/gpuready --version
# A passwd/group entry, so the user has a name in ps/logs.
RUN mkdir -p /out/etc \
 && echo 'gpuready:x:65532:65532:gpuready:/nonexistent:/sbin/nologin' > /out/etc/passwd \
 && echo 'gpuready:x:65532:' > /out/etc/group

# The node agent `gpuready probe` (docs/probe.md), built with
#   docker build --target probe -t <your-registry>/<path>/gpuready-probe:0.1.0 .
# It loads libnvidia-ml.so.1, which the NVIDIA container runtime mounts into the
# container from the host's driver. That library is linked against glibc, and a
# static musl binary cannot dlopen it, so the probe is a glibc build on a small
# glibc base rather than the operator's static binary on an empty one.
FROM ${RUST_GNU_IMAGE} AS builder-gnu
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
ARG TARGETARCH
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,id=gpuready-target-gnu \
    if [ "$TARGETARCH" = arm64 ]; then export JEMALLOC_SYS_WITH_LG_PAGE=16; fi \
 && cargo build --release --locked -p gpuready --bin gpuready \
 && install -D -m 0755 target/release/gpuready /out/usr/local/bin/gpuready \
 && /out/usr/local/bin/gpuready --version

FROM ${PROBE_BASE_IMAGE} AS probe
COPY --from=builder-gnu /out/ /
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/gpuready"]
CMD ["probe"]

# The operator image (the default target): keep it the last stage.
FROM scratch
COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=builder /out/ /
USER 65532:65532
# /metrics, /healthz, /readyz
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/gpuready"]
CMD ["run"]
