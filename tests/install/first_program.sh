#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
#
# The first-program test (suite 'install'): installs the build it belongs to into a staging
# directory (`meson install --destdir`, nothing rebuilt), then builds the program of
# docs/first-program.md, exactly the files of tests/install/first/, against the staged prefix with
# Meson (add_languages('cuda')) and with CMake (LANGUAGES CXX CUDA), and runs each on the simulator.
# Args: <build root> <prefix> <libdir> <c++ compiler> <nvcc> <work dir>
# Environment: TETHER_INSTALL_CMAKE, the CMake executable (default `cmake`);
# TETHER_INSTALL_REQUIRE_CMAKE=1 fails instead of skipping the CMake build where no CMake is found.
set -euo pipefail
build_root=$1 prefix=$2 libdir=$3 cxx=$4 nvcc=$5 work=$6
here=$(cd "$(dirname "$0")" && pwd)
first=$here/first

rm -rf "$work"
mkdir -p "$work"
stage=$work/stage
root=$stage$prefix
case $libdir in /*) lib=$stage$libdir ;; *) lib=$root/$libdir ;; esac
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
quiet() {
  local log=$1; shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    return 1
  fi
}
links_libcuda() {
  case "$(readelf -d "$1" | sed -n '/(NEEDED)/p')" in *libcuda.so*) return 0 ;; *) return 1 ;; esac
}
check_run() {
  local how=$1 exe=$2 out
  if ! out=$(cd "$(dirname "$exe")" && TETHER_DRIVER=sim "$exe" 2>&1); then
    fail "$how: the program failed: $out"
    return
  fi
  if [ "$out" != "y[0] = 5, y[65535] = 5 (simulated driver)" ]; then
    fail "$how: unexpected output: $out"
    return
  fi
  if links_libcuda "$exe"; then
    fail "$how: the program links libcuda"
    return
  fi
  echo "ok: $how: $out"
}

echo "== meson install --destdir $stage (prefix $prefix)"
quiet "$work/install.log" meson install -C "$build_root" --no-rebuild --destdir "$stage"
if ! grep -q '^prefix=${pcfiledir}/' "$lib/pkgconfig/tether.pc"; then
  echo "skip: tether.pc is not relocatable in this build directory; run: meson configure $build_root -Dpkgconfig.relocatable=true"
  exit 77
fi
export PKG_CONFIG_PATH=$lib/pkgconfig
export PATH=$(dirname "$nvcc"):$PATH   # Meson and CMake find nvcc on the PATH

echo "== meson: add_languages('cuda')"
mkdir -p "$work/meson-src"
cp "$first/meson.build" "$first/kernels.cu" "$first/kernels.hpp" "$first/main.cpp" "$work/meson-src/"
if quiet "$work/meson-setup.log" env CXX="$cxx" meson setup "$work/meson-build" "$work/meson-src" &&
   quiet "$work/meson-build.log" ninja -C "$work/meson-build"; then
  check_run "meson" "$work/meson-build/first_program"
else
  fail "meson: the first program did not build"
fi

cmake=${TETHER_INSTALL_CMAKE:-cmake}
cmake=${cmake%% *}
if command -v "$cmake" >/dev/null; then
  echo "== cmake $("$cmake" --version | sed -n 's/^cmake version //p'): LANGUAGES CXX CUDA"
  mkdir -p "$work/cmake-src"
  cp "$first/CMakeLists.txt" "$first/kernels.cu" "$first/kernels.hpp" "$first/main.cpp" "$work/cmake-src/"
  if quiet "$work/cmake-configure.log" "$cmake" -S "$work/cmake-src" -B "$work/cmake-build" -G Ninja \
       "-DCMAKE_CXX_COMPILER=$cxx" "-DCMAKE_CUDA_COMPILER=$nvcc" "-DCMAKE_PREFIX_PATH=$root" &&
     quiet "$work/cmake-build.log" "$cmake" --build "$work/cmake-build"; then
    check_run "cmake" "$work/cmake-build/first_program"
  else
    fail "cmake: the first program did not build"
  fi
elif [ "${TETHER_INSTALL_REQUIRE_CMAKE:-0}" = 1 ]; then
  fail "no CMake at '$cmake', and TETHER_INSTALL_REQUIRE_CMAKE=1"
else
  echo "skip: no CMake at '$cmake'"
fi

if [ $failures -ne 0 ]; then
  echo "first-program test: $failures failure(s); logs in $work" >&2
  exit 1
fi
echo "first-program test: the first program built and ran with every build system"
