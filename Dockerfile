# hoist's image: one static binary FROM scratch.
#
#   scripts/image          # makes the base image if needed, then builds this file with podman
#
# The build stage starts FROM a Debian 12 made locally by scripts/base-image
# (debootstrap + podman import: no registry), runs the project's own
# scripts/deps and scripts/build, and checks that the binary is static. Build it
# with --network=host (apt-get) and, to reuse the host's dependency build, with
# -v /var/cache/hoist-deps:/host-deps-cache:ro; without that mount the stage
# builds the static libraries itself (several minutes).
#
# The arm64 image (scripts/image with HOIST_IMAGE_ARCHES=arm64): the build stage
# runs on the machine's own platform and cross-builds (HOIST_TARGET_ARCH=arm64,
# as scripts/build does); only the final stage, which runs nothing, is arm64.
ARG BASE_IMAGE=localhost/hoist-debian:bookworm
# The build stage's platform, the machine's own (podman 4.3's $BUILDPLATFORM names the target under --platform).
ARG BUILD_PLATFORM=linux/amd64

FROM --platform=${BUILD_PLATFORM} ${BASE_IMAGE} AS build
WORKDIR /src
# empty: the build stage's own architecture; arm64: a cross build
ARG HOIST_TARGET_ARCH=
# The dependencies first: this layer stays cached until scripts/deps, the
# package list or what scripts/deps builds from changes: deps-inputs.txt is
# `scripts/deps --inputs` as scripts/image found it on the host (its hash, the
# versions of the Debian packages it compiles with and links, the newest
# source of each pinned series), so that a security update in the archive
# rebuilds this layer, as it changes scripts/deps' cache key. Only the
# packages the build needs (the list's first part), not the test tools,
# fuzzers and VM tools (scripts/image's context holds only that part, so that
# a test tool added to the list keeps this layer cached).
COPY scripts/deps scripts/apt-packages scripts/deps-inputs.txt scripts/
# a cross build's deps are built with its CMake toolchain file (in scripts/deps' cache key)
COPY cmake/toolchain-arm64.cmake cmake/
RUN set -eu; \
    sed -i '/^# ---- the image.s build (Dockerfile) installs the packages above this line only/,$d' \
        scripts/apt-packages; \
    grep -q '^build-essential' scripts/apt-packages; \
    if [ -d /host-deps-cache ]; then \
        for key in /host-deps-cache/*/; do \
            if [ -f "$key/prefix/.complete" ]; then \
                mkdir -p /var/cache/hoist-deps; cp -a "${key%/}" /var/cache/hoist-deps/; \
            fi; \
        done; \
    fi; \
    prefix=$(scripts/deps | tail -n 1); \
    for key in /var/cache/hoist-deps/*/; do \
        [ "${key%/}" = "${prefix%/prefix}" ] || rm -rf "$key"; \
    done; \
    apt-get clean; rm -rf /var/lib/apt/lists/*

# Then the sources: a change in them rebuilds from here on.
COPY scripts/build scripts/sbom scripts/man-pages scripts/
COPY docs/manifest.md docs/
COPY LICENSE CMakeLists.txt ./
COPY cmake cmake
COPY include include
COPY src src
# The binary only (no tests, no Catch2), at -O2 as CI's RelWithDebInfo build
# but by default without the debug info that strip would drop anyway (a faster
# compile; -g does not change the code GCC generates). With the host's compiler
# cache mounted at /ccache (scripts/image mounts scripts/build's, and passes
# scripts/build's flags and -Werror setting), every object the host's build
# compiled from the same sources is a cache hit: the build directory sits in
# the source directory, as build/ does on the host, so that the paths ccache
# hashes relative to it are the same.
# The context has no .git: the commit comes from scripts/image, for `hoist
# version`. It is the last commit that changed what this file builds from, so
# a commit that changed only tests or docs reuses this layer (docs/manifest.md
# aside: hoist.json(5) is written from it, by the build and below).
ARG HOIST_REVISION=unknown
ARG HOIST_COMPILE_FLAGS="-O2 -DNDEBUG"
ARG HOIST_WERROR=OFF
RUN set -eu; \
    ccache_dir=; [ ! -d /ccache ] || ccache_dir=/ccache; \
    export CCACHE_STATSLOG=/tmp/ccache-stats.log; \
    HOIST_BUILD_DIR=/src/build scripts/build -DHOIST_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DHOIST_REVISION="$HOIST_REVISION" -DHOIST_WERROR="$HOIST_WERROR" -DHOIST_CCACHE_DIR="$ccache_dir" \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$HOIST_COMPILE_FLAGS" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$HOIST_COMPILE_FLAGS"; \
    [ -z "$ccache_dir" ] || ccache --show-log-stats; rm -f "$CCACHE_STATSLOG"; \
    mv /src/build /build; \
    file /build/hoist | grep -q 'static-pie linked'; \
    tools=; run=; \
    if [ -n "$HOIST_TARGET_ARCH" ]; then \
        file /build/hoist | grep -q 'ARM aarch64'; tools=aarch64-linux-gnu-; run=qemu-aarch64-static; \
    fi; \
    ${tools}strip --strip-all -o /hoist /build/hoist; \
    $run /hoist version; \
    mkdir -p /doc; \
    sed -n 's/^HOIST_DEPS_PREFIX:PATH=//p' /build/CMakeCache.txt >/doc/.deps-prefix; \
    sed -n 's/^DEPS_STATIC_LIBRARIES:INTERNAL=//p' /build/CMakeCache.txt >/doc/.libs; \
    cp /build/sbom-args.txt /doc/.sbom-args; \
    rm -rf /build
# The license, the third-party notices and the SBOM of the stripped binary.
ARG HOIST_VERSION=unknown
RUN set -eu; \
    cp LICENSE /doc/; \
    scripts/sbom --binary /hoist --version "$HOIST_VERSION" --revision "$HOIST_REVISION" \
        --prefix "$(cat /doc/.deps-prefix)" --libs "$(cat /doc/.libs)" \
        --sbom /doc/hoist.spdx.json --notices /doc/THIRD_PARTY_NOTICES \
        --arch "$(sed -n 1p /doc/.sbom-args)" --cxx "$(sed -n 2p /doc/.sbom-args)"; \
    rm /doc/.deps-prefix /doc/.libs /doc/.sbom-args; \
    run=; [ -z "$HOIST_TARGET_ARCH" ] || run=qemu-aarch64-static; \
    HOIST_MAN_RUNNER="$run" scripts/man-pages /hoist /man "$HOIST_VERSION"; \
    mkdir -p /share/doc /share/man /share/bash-completion/completions /share/zsh/vendor-completions; \
    mv /doc /share/doc/hoist; mv /man/man5 /man/man8 /share/man/; \
    mv /man/completion/hoist.bash /share/bash-completion/completions/hoist; \
    mv /man/completion/_hoist /share/zsh/vendor-completions/_hoist; rm -rf /man

FROM scratch
ARG HOIST_VERSION=unknown
ARG HOIST_REVISION=unknown
# The binary and its documents, nothing else. No CA bundle: hoist never reads a system trust store
# (the Kubernetes client trusts exactly the CA of the service account or the
# kubeconfig, and refuses a kubeconfig without one), so a bundle would only
# suggest otherwise.
# Its license, the third-party notices and the SBOM (SPDX 2.3, of the stripped
# binary that is here: the image has no package database for a scanner to read).
# scripts/image passes the creation time, the repository's URL and the licenses
# of everything in the binary (hoist's AND each library's, from the SBOM).
ARG HOIST_CREATED=unknown
ARG HOIST_SOURCE=unknown
ARG HOIST_LICENSES=Apache-2.0
COPY --from=build /hoist /hoist
COPY --from=build /share/ /usr/share/
LABEL org.opencontainers.image.title="hoist" \
      org.opencontainers.image.description="On-host upgrades for Kubernetes nodes, run by system-upgrade-controller Plans" \
      org.opencontainers.image.version="${HOIST_VERSION}" \
      org.opencontainers.image.revision="${HOIST_REVISION}" \
      org.opencontainers.image.created="${HOIST_CREATED}" \
      org.opencontainers.image.source="${HOIST_SOURCE}" \
      org.opencontainers.image.licenses="${HOIST_LICENSES}" \
      org.opencontainers.image.documentation="/usr/share/doc/hoist/THIRD_PARTY_NOTICES" \
      org.opencontainers.image.base.name="scratch"
ENTRYPOINT ["/hoist"]
CMD ["--help"]
