# syntax=docker/dockerfile:1
#
# Cairn container image.
#
#   docker build -t cairn .                       # builds from source (stages builder -> runtime)
#   docker run -d -p 27017:27017 -v cairn-data:/data/db cairn
#
# Stages:
#   builder   compiles a static (glibc, +crt-static) release binary from the source tree.
#   prebuilt  packages a static binary that was built outside, taken from the build context
#             at .ci/out/cairn. CI builds this one (`--target prebuilt`) because its machines
#             cannot pull base images; it needs no image at all (FROM scratch).
#   runtime   the default (last) stage: the same image as `prebuilt`, with the binary from
#             `builder`.
#
# Both final stages follow the official `mongo` image's conventions: port 27017, data in the
# /data/db volume, a non-root user (999:999), configuration through flags or CAIRN_* variables,
# a healthcheck that sends a `ping` over the wire, and MONGO_INITDB_ROOT_USERNAME/_PASSWORD
# (or CAIRN_INITDB_ROOT_*) turning access control on with a `root` user created on first start.
#
# Notes:
# - HEALTHCHECK is not part of the OCI image format: with buildah/podman build with
#   `--format docker`, or the healthcheck is dropped.
# - buildah/podman skip stages the target does not depend on (`--skip-unused-stages`, on by
#   default), so `--target prebuilt` never pulls the Rust image. BuildKit does the same.
# - The builder uses the toolchain of the image tag; RUSTUP_TOOLCHAIN overrides
#   rust-toolchain.toml so rustup does not download the extra components it lists.

ARG RUST_VERSION=1.95.0
ARG CAIRN_TARGET=x86_64-unknown-linux-gnu

########################################################################################
FROM docker.io/library/rust:${RUST_VERSION}-slim-bookworm AS builder
ARG RUST_VERSION
ARG CAIRN_TARGET
# Commit reported by buildInfo.gitVersion (build.rs reads it when .git is absent).
ARG CAIRN_GIT_VERSION=""
ENV CAIRN_GIT_VERSION=${CAIRN_GIT_VERSION} \
    RUSTUP_TOOLCHAIN=${RUST_VERSION} \
    RUSTFLAGS="-C target-feature=+crt-static" \
    CARGO_TERM_COLOR=never

# gcc/make/libc headers for C dependencies (zstd-sys).
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev make pkg-config \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --target "${CAIRN_TARGET}" --bin cairn \
 && mkdir -p /out \
 && cp "target/${CAIRN_TARGET}/release/cairn" /out/cairn \
 && strip --strip-debug /out/cairn \
 && /out/cairn --version

########################################################################################
# The image CI builds here: the same layout as `runtime`, from a binary in the context.
FROM scratch AS prebuilt
COPY .ci/container/rootfs/etc/passwd .ci/container/rootfs/etc/group /etc/
COPY --chown=999:999 .ci/container/rootfs/data/ /data/
COPY --chmod=0755 .ci/out/cairn /usr/local/bin/cairn
ENV CAIRN_BIND=0.0.0.0 \
    CAIRN_LOG_FORMAT=json \
    CAIRN_PORT=27017 \
    CAIRN_DATA_DIR=/data/db
USER 999:999
WORKDIR /data/db
VOLUME /data/db
EXPOSE 27017
HEALTHCHECK --interval=30s --timeout=10s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/cairn", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/cairn"]
LABEL org.opencontainers.image.title="cairn" \
      org.opencontainers.image.description="A MongoDB-wire-compatible document database" \
      org.opencontainers.image.licenses="Apache-2.0"

########################################################################################
# Default target: the small runtime image with the binary compiled by `builder`.
FROM scratch AS runtime
COPY .ci/container/rootfs/etc/passwd .ci/container/rootfs/etc/group /etc/
COPY --chown=999:999 .ci/container/rootfs/data/ /data/
COPY --from=builder /out/cairn /usr/local/bin/cairn
ENV CAIRN_BIND=0.0.0.0 \
    CAIRN_LOG_FORMAT=json \
    CAIRN_PORT=27017 \
    CAIRN_DATA_DIR=/data/db
USER 999:999
WORKDIR /data/db
VOLUME /data/db
EXPOSE 27017
HEALTHCHECK --interval=30s --timeout=10s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/cairn", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/cairn"]
LABEL org.opencontainers.image.title="cairn" \
      org.opencontainers.image.description="A MongoDB-wire-compatible document database" \
      org.opencontainers.image.licenses="Apache-2.0"
