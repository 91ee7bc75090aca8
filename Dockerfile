# attnd in a container: build with the CPU engine (CUDA=0) on Debian, run
# the tests at build time, ship attnd + attnctl + the examples.  For the GPU
# engine build on an nvidia/cuda devel image with CUDA=1 instead.
FROM debian:bookworm AS build
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
        build-essential pkg-config libuv1-dev libnng-dev libmsgpack-dev libcmocka-dev \
        libssl-dev libjansson-dev libmbedtls-dev cppcheck clang-format python3 \
        python3-msgpack ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN make CUDA=0 -j2 all && make CUDA=0 -j2 test

FROM debian:bookworm-slim
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
        libuv1 libnng1 libmsgpackc2 libjansson4 libssl3 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --no-create-home attnd && mkdir -p /run/attnd && chown attnd /run/attnd
COPY --from=build /src/build/attnd /src/build/attnctl /usr/local/bin/
COPY --from=build /src/examples /usr/local/share/attnd/examples
USER attnd
VOLUME /run/attnd
ENTRYPOINT ["/usr/local/bin/attnd", "--listen", "ipc:///run/attnd/attnd.sock", "--engine", "auto"]
