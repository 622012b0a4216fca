# syntax=docker/dockerfile:1.4
# tensord container: a build stage that installs the same Debian packages as
# CI (deploy/install-deps.sh build) and a slim runtime stage with only the
# shared libraries tensord and tensorctl load.
#
#   container-build --tag localhost/tensord:latest          (or: docker build -t tensord .)
#   docker run -v /run/tensord:/run/tensord tensord        (clients on this host)
#
# The default image is GPU-ready: the build stage installs CUDA 13.0's nvcc
# and runtime from PyPI's NVIDIA wheels (deploy/cuda-wheels.txt: exact
# versions, sha256-pinned) and builds the CUDA device backend. The runtime
# stage needs no CUDA library: the backend links the CUDA runtime statically
# and loads the driver (libcuda.so.1) at start, which the NVIDIA container
# toolkit injects from the host: docker run --gpus all ... (podman: --device
# nvidia.com/gpu=all with CDI; Kubernetes: an nvidia.com/gpu resource). The
# driver must be release 580 or newer (CUDA 13). Without a GPU or driver the
# same image starts as usual, logs one device_backend_none line and serves
# host tensors; `tensord --version` says "CUDA backend built in".
#
# CPU-only image: --build-arg TENSORD_CUDA=OFF. Not much smaller (the CUDA
# runtime linked in adds about 0.7 MB to each binary: 114.1 MB against
# 112.7 MB here); it is for builders without PyPI (Debian's mirror only)
# and builds a little faster (no toolkit download, no CUDA detection).
ARG TENSORD_CUDA=ON

FROM debian:bookworm-slim AS build
ARG TENSORD_CUDA
# The image has no .git: the commit `tensord --version` reports comes from
# here (scripts/container-smoke.sh passes it).
ARG TENSORD_GIT_COMMIT=unknown
COPY deploy/install-deps.sh /src/deploy/install-deps.sh
RUN case "$TENSORD_CUDA" in ON|OFF) ;; \
      *) echo "TENSORD_CUDA=$TENSORD_CUDA: expected ON (default) or OFF" >&2; exit 2 ;; esac \
 && if [ "$TENSORD_CUDA" = ON ]; then export TENSORD_DEPS_EXTRA=python3-venv; fi \
 && /src/deploy/install-deps.sh build && rm -rf /var/lib/apt/lists/*
# The CUDA toolkit pieces from PyPI (pip from a throwaway venv), laid out as
# a toolkit at /usr/local/cuda (bin/nvcc, include, lib64 -> lib, and the
# libcudart.so link the wheel leaves out, which FindCUDAToolkit requires)
# where CMake's CUDA language and FindCUDAToolkit find it. --require-hashes
# checks every wheel against deploy/cuda-wheels.txt; so where a
# TLS-intercepting proxy (as on this project's CI machines) makes pip's
# certificate check fail, the download is retried without that check and
# the hashes still hold it to the pinned bytes. A layer of its own, before
# the sources are copied: rebuilds on one host reuse it.
COPY deploy/cuda-wheels.txt /src/deploy/cuda-wheels.txt
RUN if [ "$TENSORD_CUDA" = ON ]; then \
      python3 -m venv /tmp/pip \
      && pip_install() { /tmp/pip/bin/pip install --quiet --disable-pip-version-check --no-cache-dir \
           --no-deps --require-hashes --only-binary=:all: --target /tmp/cuda-wheels \
           -r /src/deploy/cuda-wheels.txt "$@"; } \
      && if ! pip_install --retries 1; then \
           echo "cuda wheels: TLS verification failed or PyPI unreachable; retrying without certificate verification (sha256-pinned)" >&2; \
           rm -rf /tmp/cuda-wheels; \
           pip_install --trusted-host pypi.org --trusted-host files.pythonhosted.org; \
         fi \
      && mv /tmp/cuda-wheels/nvidia/cu13 /usr/local/cuda && ln -s lib /usr/local/cuda/lib64 \
      && ln -s libcudart.so.13 /usr/local/cuda/lib/libcudart.so \
      && rm -rf /tmp/cuda-wheels /tmp/pip \
      && /usr/local/cuda/bin/nvcc --version | tail -n 2; \
    fi
ENV PATH=/usr/local/cuda/bin:$PATH
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
# What the NVIDIA container toolkit mounts when a GPU is given to the
# container (--gpus, CDI, Kubernetes' device plugin): the CUDA driver
# (compute) and nvidia-smi (utility). It selects no GPU by itself and does
# nothing without the toolkit or in the CPU-only image.
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s \
  CMD ["/usr/local/bin/tensorctl", "--server", "unix:/run/tensord/grpc.sock", "health"]
ENTRYPOINT ["/usr/local/bin/tensord"]
