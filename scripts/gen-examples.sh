#!/usr/bin/env bash
# Regenerate the shipped examples/*.capture with this build's attnctl gen.
# A capture records the CPU reference engine's fp32 output bit for bit, so
# it must be regenerated whenever the CPU engine's arithmetic changes
# (replay --verify then reports "o differs bitwise" on every run).
# Usage: scripts/gen-examples.sh [BUILD_DIR]
set -eu
BUILD=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
for k in decode prefill append mixed; do
    rm -f "$here/examples/$k.capture" # a capture never overwrites a file
    "$here/$BUILD/attnctl" gen --out "$here/examples/$k.capture" --kind "$k" --seed 7 --pool "$k" \
        --requests 4 --max-len 64
done
