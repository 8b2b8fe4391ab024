#!/usr/bin/env bash
# Builds the Python package's wheel into target/wheels/: the release
# `diamond` command first (stripped, into target/wheel-data/scripts/, which
# maturin ships as the wheel's scripts, so that pip puts it on PATH), then
# the extension module with `maturin build` in $WHEEL_PROFILE (default
# release). maturin is $MATURIN, else the one on PATH. $DIAMOND_COMMAND,
# when set, is a `diamond` command already built to ship instead (CI ships
# the one its test build made rather than building the release one too).
set -euo pipefail
cd "$(dirname "$0")/.."
maturin="${MATURIN:-maturin}"
command="${DIAMOND_COMMAND:-}"
if [ -z "$command" ]; then
    # Without tract (`diamond bench` then times diamond alone): it is most of the build.
    cargo build --release --bin diamond --no-default-features
    command="${CARGO_TARGET_DIR:-target}/release/diamond"
fi
mkdir -p target/wheel-data/scripts
if command -v strip >/dev/null 2>&1; then
    strip -o target/wheel-data/scripts/diamond "$command"
else
    cp "$command" target/wheel-data/scripts/diamond
fi
rm -rf target/wheels
"$maturin" build --profile "${WHEEL_PROFILE:-release}" --manifest-path python/Cargo.toml --out target/wheels
