# syntax=docker/dockerfile:1.4
# tensord container: a build stage that installs the same Debian packages as
# CI (deploy/install-deps.sh build) and a slim runtime stage with only the
# shared libraries tensord and tensorctl load.
#
#   container-build --tag localhost/tensord:latest          (or: docker build -t tensord .)
#   docker run -v /run/tensord:/run/tensord tensord        (clients on this host)
#
# GPU image: --build-arg TENSORD_CUDA=ON installs Debian's CUDA toolkit
# (non-free nvidia-cuda-toolkit) in the build stage and builds the CUDA device
# backend. The runtime needs no CUDA libraries: the backend links the CUDA
# runtime statically and loads the driver (libcuda.so.1) at start, which the
# NVIDIA container toolkit injects: docker run --gpus all ... (podman:
# --device nvidia.com/gpu=all with CDI). Without a GPU the same image serves
# host tensors.
ARG TENSORD_CUDA=OFF

FROM debian:bookworm-slim AS build
ARG TENSORD_CUDA
# The image has no .git: the commit `tensord --version` reports comes from
# here (scripts/container-smoke.sh passes it).
ARG TENSORD_GIT_COMMIT=unknown
COPY deploy/install-deps.sh /src/deploy/install-deps.sh
RUN if [ "$TENSORD_CUDA" = "ON" ]; then \
      sed -i 's/^Components: main$/Components: main contrib non-free non-free-firmware/' /etc/apt/sources.list.d/debian.sources; \
      export TENSORD_DEPS_EXTRA=nvidia-cuda-toolkit; \
    fi \
 && /src/deploy/install-deps.sh build && rm -rf /var/lib/apt/lists/*
COPY . /src
WORKDIR /src
# The ccache cache mount keeps rebuilds of the image fast on one host.
RUN --mount=type=cache,target=/root/.cache/ccache \
    cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTENSORD_BUILD_TESTS=OFF \
      -DTENSORD_CUDA=${TENSORD_CUDA} -DTENSORD_GIT_COMMIT=${TENSORD_GIT_COMMIT} \
 && cmake --build /build --target tensord tensorctl \
 && strip /build/server/tensord /build/client/tensorctl/tensorctl

FROM debian:bookworm-slim AS runtime
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libabsl20220623 libprometheus-cpp-pull1.0 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin tensord \
 && mkdir -p /run/tensord && chown tensord /run/tensord
COPY --from=build /build/server/tensord /build/client/tensorctl/tensorctl /usr/local/bin/
USER 10001
VOLUME ["/run/tensord"]
EXPOSE 50051 9464
# Secure by default: gRPC on loopback and on a Unix socket in the shared
# volume (health probes, same-pod and same-node clients). To serve other
# hosts, listen on 0.0.0.0 with --tls-cert/--tls-key (and --tokens-file), or
# set TENSORD_ALLOW_INSECURE_REMOTE=true on a network you trust
# (docs/operations.md).
ENV TENSORD_LISTEN=127.0.0.1:50051,unix:/run/tensord/grpc.sock \
    TENSORD_HANDOFF_SOCKET=/run/tensord/tensord.sock \
    TENSORD_METRICS_LISTEN=0.0.0.0:9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s \
  CMD ["/usr/local/bin/tensorctl", "--server", "unix:/run/tensord/grpc.sock", "health"]
ENTRYPOINT ["/usr/local/bin/tensord"]
