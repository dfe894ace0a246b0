#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
#
# Runs the test executables of a build folder on the real driver (TETHER_DRIVER=cuda) and prints
# one summary line per executable plus a total. Used on the GPU machine, where the build folder made
# on the development machine is carried (see docs/gpu-results.md). Args: [build dir] [extra doctest args]
set -uo pipefail
build=${1:-build}
shift || true
export TETHER_DRIVER=${TETHER_DRIVER:-cuda}
# Every log goes to one folder, packed into $OUT/logs.tgz at the end (the device tool brings back
# few files).
out=$(mktemp -d)
status=0
pass=0 fail=0
for t in tests/unit_tests tests/selection_tests tests/module_surface_test tests/conformance_tests tests/commit_alloc_tests tests/dsl_tests tests/capture_tests tests/introspect_tests tests/hardening/hardening_tests tests/reliability_tests tests/module_only_test tests/mem_pool_tests tests/cuda/function_twin_tests tests/cuda/runtime_kernel_tests tests/cuda/cuda_import_tests tests/multi/multi_device_tests tests/nccl/nccl_tests; do
  exe="$build/$t"
  [ -x "$exe" ] || continue
  name=$(basename "$t")
  "$exe" "$@" >"$out/$name.log" 2>&1
  rc=$?
  line=$(grep -E '^\[doctest\] test cases:' "$out/$name.log" | tail -1)
  echo "$name (rc=$rc): $line"
  p=$(sed -E 's/.*\| *([0-9]+) passed.*/\1/' <<<"$line")
  f=$(sed -E 's/.*\| *([0-9]+) failed.*/\1/' <<<"$line")
  pass=$((pass + ${p:-0})) fail=$((fail + ${f:-0}))
  if [ $rc -ne 0 ]; then
    status=1
    grep -E "ERROR|FATAL|TEST CASE" "$out/$name.log" | head -40
  fi
done
for e in "$build"/examples/[0-9]*; do
  [ -x "$e" ] || continue
  if "$e" >"$out/$(basename "$e").log" 2>&1; then pass=$((pass + 1)); echo "$(basename "$e"): ok"; else fail=$((fail + 1)); status=1; echo "$(basename "$e"): FAILED"; cat "$out/$(basename "$e").log"; fi
done
echo "gpu: $pass passed, $fail failed"
[ -n "${OUT:-}" ] && tar czf "$OUT/logs.tgz" -C "$out" .
exit $status
