#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
#
# The one command behind docs/performance.md: runs graph_bench (tether vs the raw driver),
# overhead (tether's own CPU cost on fake entry points) and, where cuda.core is installed,
# cuda_core_bench.py, then prints the build comparison against cuda.core.
# Usage: bench/run.sh [build dir] [graph_bench args...]   (default build dir: build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
shift || true
out=${OUT:-$(mktemp -d)}
TETHER_DRIVER=${TETHER_DRIVER:-cuda} "$build/bench/graph_bench" "$@" | tee "$out/graph_bench.txt"
"$build/bench/overhead" --n 10000 | tee "$out/overhead_10000.txt"
"$build/bench/overhead" --n 1000 --reps 41 | tee "$out/overhead_1000.txt"
if python3 -c "import cuda.core" 2>/dev/null; then
  python3 "$here/cuda_core_bench.py" | tee "$out/cuda_core.txt"
  python3 "$here/compare.py" "$out/graph_bench.txt" "$out/cuda_core.txt"
else
  echo "SKIP cuda.core is not installed here: no cuda.core column"
fi
