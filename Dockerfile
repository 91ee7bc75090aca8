# attnd with the CPU engine on Debian 12.  The build stage runs the test
# suite; the image ships attnd, attnctl, the default configuration and the
# examples, runs as user attnd and serves ipc:///run/attnd/attnd.sock
# (share /run/attnd with the client containers).  The CUDA variant is
# Dockerfile.cuda.
#
#   docker build --build-arg ATTN_BUILD_ID=$(git rev-parse --short=12 HEAD) -t attnd:cpu .
#   docker run -d --name attnd -v attnd-run:/run/attnd attnd:cpu
#   docker run --rm -v attnd-run:/run/attnd --entrypoint attnctl attnd:cpu hello
#
# .dockerignore keeps build outputs and .git out of the context, hence the
# build id as a build argument (empty: the Makefile's own, "unknown-dirty").
# scripts/docker-replay.sh replays these steps in a debootstrapped root.
FROM debian:bookworm AS build
ARG ATTN_BUILD_ID=
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
        build-essential pkg-config libuv1-dev libnng-dev libmsgpack-dev libcmocka-dev \
        libssl-dev libjansson-dev libmbedtls-dev cppcheck clang-format python3 \
        python3-msgpack ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN make CUDA=0 -j2 ${ATTN_BUILD_ID:+ATTN_BUILD_ID=$ATTN_BUILD_ID}
RUN make CUDA=0 -j2 ${ATTN_BUILD_ID:+ATTN_BUILD_ID=$ATTN_BUILD_ID} test
RUN make CUDA=0 ${ATTN_BUILD_ID:+ATTN_BUILD_ID=$ATTN_BUILD_ID} install DESTDIR=/stage

FROM debian:bookworm-slim
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
        libuv1 libnng1 libmsgpackc2 libjansson4 libssl3 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --no-create-home --shell /usr/sbin/nologin attnd \
    && install -d -o attnd -g attnd -m 0750 /run/attnd
COPY --from=build /stage/usr/local/bin/ /usr/local/bin/
COPY --from=build /stage/etc/attnd/ /etc/attnd/
COPY --from=build /stage/usr/local/share/doc/attnd/ /usr/local/share/doc/attnd/
COPY --from=build /src/examples/ /usr/local/share/attnd/examples/
USER attnd
VOLUME /run/attnd
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/attnctl", "hello", "--url", "ipc:///run/attnd/attnd.sock"]
ENTRYPOINT ["/usr/local/bin/attnd", "--config", "/etc/attnd/attnd.json"]
CMD ["--engine", "cpu"]
