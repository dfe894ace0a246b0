#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
#
# Copies what the GPU machine needs from a build folder (library, test and example executables,
# the fake driver libraries, bench programs) into a small folder with the same layout, so that it
# fits the device tool's carry limit. Args: <build dir> <stage dir>
set -euo pipefail
build=$1 stage=$2
rm -rf "$stage"
mkdir -p "$stage/tests" "$stage/examples" "$stage/bench"
cp -a "$build"/libtether.so* "$stage/" 2>/dev/null || true
rm -rf "$stage"/libtether.so*.p
for f in "$build"/tests/*; do
  [ -f "$f" ] && [ -x "$f" ] && cp -a "$f" "$stage/tests/"
done
cp -a "$build"/tests/*.so "$build"/tests/*.fatbin "$stage/tests/" 2>/dev/null || true
if [ -d "$build/tests/hardening" ]; then
  mkdir -p "$stage/tests/hardening"
  cp -a "$build"/tests/hardening/hardening_tests "$build"/tests/hardening/*.fatbin "$stage/tests/hardening/" 2>/dev/null || true
fi
for d in multi nccl; do   # their executables, the kernels beside them, the fake NCCL
  if [ -d "$build/tests/$d" ]; then
    mkdir -p "$stage/tests/$d"
    for f in "$build/tests/$d"/*; do
      [ -f "$f" ] && { [ -x "$f" ] || [[ $f == *.fatbin ]] || [[ $f == *.so ]]; } && cp -a "$f" "$stage/tests/$d/"
    done
  fi
done
if [ -d "$build/tests/cuda" ]; then   # tether::kernel(&fn): the kernels are inside the executables
  mkdir -p "$stage/tests/cuda"
  for f in "$build"/tests/cuda/*; do
    [ -f "$f" ] && [ -x "$f" ] && cp -a "$f" "$stage/tests/cuda/"
  done
fi
cp -a "$build"/examples/*.fatbin "$stage/examples/" 2>/dev/null || true
for d in examples bench; do
  for f in "$build/$d"/*; do
    [ -f "$f" ] && [ -x "$f" ] && cp -a "$f" "$stage/$d/"
  done
done
du -sh "$stage"
# Debug information is most of the size; the GPU runs need symbols only for crash reports.
find "$stage" -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c 'file "$1" | grep -q ELF && strip --strip-debug "$1"' _ {} \;
du -sh "$stage"
