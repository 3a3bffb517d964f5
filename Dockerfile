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
ARG BASE_IMAGE=localhost/hoist-debian:bookworm

FROM ${BASE_IMAGE} AS build
WORKDIR /src
# The dependencies first: this layer stays cached until scripts/deps or the
# package list changes. Only the packages the build needs (the list's first
# part), not the test tools, fuzzers and VM tools.
COPY scripts/deps scripts/apt-packages scripts/
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
COPY scripts/build scripts/
COPY CMakeLists.txt ./
COPY include include
COPY src src
# The binary only (no tests, no Catch2), at -O2 as CI's RelWithDebInfo build
# but without the debug info that strip would drop anyway (a faster compile).
RUN set -eu; \
    HOIST_BUILD_DIR=/build scripts/build -DHOIST_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG"; \
    file /build/hoist | grep -q 'statically linked'; \
    strip --strip-all -o /hoist /build/hoist; \
    /hoist version; \
    rm -rf /build

FROM scratch
ARG HOIST_VERSION=unknown
ARG HOIST_REVISION=unknown
# Nothing but the binary. No CA bundle: hoist never reads a system trust store
# (the Kubernetes client trusts exactly the CA of the service account or the
# kubeconfig, and refuses a kubeconfig without one), so a bundle would only
# suggest otherwise.
COPY --from=build /hoist /hoist
LABEL org.opencontainers.image.title="hoist" \
      org.opencontainers.image.description="On-host upgrades for Kubernetes nodes, run by system-upgrade-controller Plans" \
      org.opencontainers.image.version="${HOIST_VERSION}" \
      org.opencontainers.image.revision="${HOIST_REVISION}" \
      org.opencontainers.image.base.name="scratch"
ENTRYPOINT ["/hoist"]
CMD ["--help"]
