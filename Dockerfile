# tensord container: build stage with the same install-deps script as CI,
# slim runtime stage with only the shared libraries tensord needs.
FROM debian:bookworm-slim AS build
COPY deploy/install-deps.sh /src/deploy/install-deps.sh
RUN /src/deploy/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . /src
WORKDIR /src
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTENSORD_BUILD_TESTS=OFF -DTENSORD_CUDA=OFF \
 && cmake --build /build --target tensord tensorctl

FROM debian:bookworm-slim AS runtime
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libabsl20220623 libprometheus-cpp-pull1.0 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin tensord \
 && mkdir -p /run/tensord && chown tensord /run/tensord
COPY --from=build /build/server/tensord /build/client/tensorctl/tensorctl /usr/local/bin/
USER tensord
VOLUME ["/run/tensord"]
EXPOSE 50051 9464
ENV TENSORD_LISTEN=0.0.0.0:50051 \
    TENSORD_HANDOFF_SOCKET=/run/tensord/tensord.sock \
    TENSORD_METRICS_LISTEN=0.0.0.0:9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s \
  CMD ["/usr/local/bin/tensorctl", "--server", "127.0.0.1:50051", "health"]
ENTRYPOINT ["/usr/local/bin/tensord"]
