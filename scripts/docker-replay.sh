#!/usr/bin/env bash
# Replay a Dockerfile without Docker: base images cannot be pulled on the
# development machines, so each stage's base (debian:bookworm, -slim) is a
# clean Debian root made with debootstrap from the Debian archive, and the
# Dockerfile's steps run in it with chroot: RUN, COPY (the build context as
# .dockerignore filters it, or --from an earlier stage), WORKDIR, ENV, ARG,
# USER.  Then the run step: the final stage's ENTRYPOINT + CMD started as its
# USER, its HEALTHCHECK polled until it passes, `attnctl hello` answered, and
# SIGTERM giving exit 0.  Too slow for CI (a debootstrap, the package
# installs and the whole test suite of the build stage: ~10+ minutes).
#
#   sudo scripts/docker-replay.sh [--dockerfile Dockerfile] [--build-arg K=V]...
#                                 [--work DIR] [--keep] [--skip-run REGEX]
#                                 [--health-url http://127.0.0.1:PORT/health/ready]
#
# --work holds the debootstrap cache (base-bookworm.tar, reused) and the stage
# roots (removed afterwards unless --keep); --skip-run skips RUN steps
# matching REGEX (e.g. ' test' to leave the test suite out); --health-url also
# GETs that URL once hello answered (the chroot shares the host's network).  Needs root
# (debootstrap, chroot, mounts); installs debootstrap from Debian if missing.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "docker-replay: needs root (debootstrap, chroot)" >&2; exit 2; }
if ! command -v debootstrap >/dev/null 2>&1; then
    echo "docker-replay: installing debootstrap from Debian" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
exec python3 "$here/scripts/docker_replay.py" --context "$here" "$@"
