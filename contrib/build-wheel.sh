#!/usr/bin/env bash
# The portable wheel: tuimon with its compiled core, for machines without a Rust toolchain (cluster
# login nodes). abi3: one wheel for every CPython >= 3.11. manylinux_2_17: zig links the core against
# glibc 2.17's symbols whatever this machine's glibc is; auditwheel checks the result.
#   pip install maturin ziglang auditwheel && contrib/build-wheel.sh [OUT_DIR]   (default: dist/)
#   then, on the cluster: pip install tuimon-*-cp311-abi3-manylinux*.whl
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)
python3 -m maturin build --release --zig --compatibility manylinux2014 --out "$out" -i "$(command -v python3)" >&2
wheel=$(ls -t "$out"/tuimon-*-cp311-abi3-manylinux*.whl | head -n 1)
python3 -m auditwheel show "$wheel" >&2
echo "$wheel"
