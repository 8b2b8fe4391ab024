#!/usr/bin/env bash
# Builds the Python package's wheel into target/wheels/: the release
# `diamond` command first (stripped, into target/wheel-data/scripts/, which
# maturin ships as the wheel's scripts, so that pip puts it on PATH), then
# the extension module with `maturin build --release`, which reuses the
# workspace crates that build compiled. maturin is $MATURIN, else the one on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
maturin="${MATURIN:-maturin}"
release="${CARGO_TARGET_DIR:-target}/release"
# Without tract (`diamond bench` then times diamond alone): it is most of the build.
cargo build --release --bin diamond --no-default-features
mkdir -p target/wheel-data/scripts
if command -v strip >/dev/null 2>&1; then
    strip -o target/wheel-data/scripts/diamond "$release/diamond"
else
    cp "$release/diamond" target/wheel-data/scripts/diamond
fi
rm -rf target/wheels
"$maturin" build --release --manifest-path python/Cargo.toml --out target/wheels
