#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
#
# The install test (suite 'install'): installs the build it belongs to into a staging directory
# (`meson install --destdir`, nothing rebuilt), checks what was installed, then builds and runs on
# the simulator a consumer of the staged prefix each way docs/install.md describes:
#   meson, pkg-config, header mode     dependency('tether') from tether.pc
#   clang by hand, pkg-config, module  the installed tether.cppm precompiled with tether.pc's flags
#   cmake, pkg-config, header mode     pkg_check_modules(... IMPORTED_TARGET tether)
#   cmake, package config, header mode find_package(tether) -> tether::tether
#   cmake, package config, module      tether::module (only with a CMake >= 3.28 and clang-scan-deps)
# Args: <build root> <prefix> <libdir> <includedir> <c++ compiler> <tether version> <work dir>
# Environment: TETHER_INSTALL_CMAKE, the CMake executables to use (space-separated; default
# `cmake`); TETHER_INSTALL_REQUIRE_CMAKE=1 fails instead of skipping the CMake consumers where no
# CMake is found (CI sets it).
set -euo pipefail
build_root=$1 prefix=$2 libdir=$3 includedir=$4 cxx=$5 version=$6 work=$7
here=$(cd "$(dirname "$0")" && pwd)
src_root=$(cd "$here/../.." && pwd)

rm -rf "$work"
mkdir -p "$work"
stage=$work/stage
root=$stage$prefix                    # the staged prefix: tether.pc and the CMake package relocate
case $libdir in /*) lib=$stage$libdir ;; *) lib=$root/$libdir ;; esac
case $includedir in /*) inc=$stage$includedir ;; *) inc=$root/$includedir ;; esac
expected_tail="x = 7 then 9 (update: success), host node ran 2 times"
failures=0

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# Whether an ELF file needs libcuda (why not a pipe into grep -q: under pipefail, readelf killed
# by grep's early exit would turn a match into a failure).
links_libcuda() {
  case "$(readelf -d "$1" | sed -n '/(NEEDED)/p')" in *libcuda*) return 0 ;; *) return 1 ;; esac
}

# Runs a log-producing step quietly; prints its log when it fails.
quiet() {
  local log=$1; shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    return 1
  fi
}

# Runs one consumer program on the simulator and checks its one line of output.
check_run() {
  local how=$1 exe=$2 out
  if ! out=$(TETHER_DRIVER=sim "$exe" 2>&1); then
    fail "$how: the program failed: $out"
    return
  fi
  if [ "$out" != "$how: $expected_tail" ]; then
    fail "$how: unexpected output: $out"
    return
  fi
  if links_libcuda "$exe"; then
    fail "$how: the program links libcuda"
    return
  fi
  echo "ok: $out"
}

echo "== meson install --destdir $stage (prefix $prefix)"
quiet "$work/install.log" meson install -C "$build_root" --no-rebuild --destdir "$stage"
echo "ok: installed $(find "$stage" -type f | wc -l) files"
if ! grep -q '^prefix=${pcfiledir}/' "$lib/pkgconfig/tether.pc"; then
  # A build directory configured before tether made pkgconfig.relocatable its default keeps false.
  echo "skip: tether.pc is not relocatable in this build directory, so the staged copy points at"
  echo "  $prefix; run: meson configure $build_root -Dpkgconfig.relocatable=true"
  exit 77
fi

# The installed headers are exactly what the module interface and tether.hpp include.
want=$(python3 "$src_root/modules/public_headers.py" "$src_root/src" tether.hpp prelude.hpp)
have=$(cd "$inc/tether" && find . -type f ! -name tether.cppm | sed 's|^\./||' | LC_ALL=C sort)
if [ "$(LC_ALL=C sort <<<"$want")" != "$have" ]; then
  fail "the installed headers differ from the include closure of tether.hpp:"
  diff <(LC_ALL=C sort <<<"$want") <(echo "$have") >&2 || true
else
  echo "ok: $(wc -l <<<"$have") headers under include/tether, as tether.hpp includes them"
fi
[ -f "$inc/tether/tether.cppm" ] || fail "no include/tether/tether.cppm"
if links_libcuda "$lib/libtether.so"; then
  fail "libtether.so links libcuda"
fi

export PKG_CONFIG_PATH=$lib/pkgconfig
case " $(pkg-config --libs --static tether) " in *' -lcuda '*)
  fail "tether.pc names libcuda" ;;
esac

echo "== meson consumer"
mkdir -p "$work/meson-src"
cp "$here/meson/meson.build" "$here/app.cpp" "$work/meson-src/"
if quiet "$work/meson-setup.log" env CXX="$cxx" meson setup "$work/meson-build" "$work/meson-src" &&
   quiet "$work/meson-build.log" ninja -C "$work/meson-build"; then
  check_run "meson, pkg-config, header mode" "$work/meson-build/app"
else
  fail "meson, pkg-config, header mode: the consumer did not build"
fi

echo "== clang by hand: the installed module interface"
iface=$(pkg-config --variable=module_interface tether)
read -r -a cflags <<<"$(pkg-config --cflags tether)"
read -r -a libs <<<"$(pkg-config --libs tether)"
how="clang by hand, pkg-config, module"
if quiet "$work/module-pcm.log" "$cxx" -std=c++20 "${cflags[@]}" --precompile "$iface" -o "$work/tether.pcm" &&
   quiet "$work/module-app.log" "$cxx" -std=c++20 -Wall -Wextra -Wpedantic -Werror -DTETHER_CONSUMER_IMPORT=1 \
     "-DTETHER_CONSUMER_HOW=\"$how\"" "-fmodule-file=tether=$work/tether.pcm" "$here/app.cpp" \
     "${cflags[@]}" "${libs[@]}" "-Wl,-rpath,$lib" -o "$work/app_module_by_hand"; then
  check_run "$how" "$work/app_module_by_hand"
else
  fail "$how: did not build"
fi

read -r -a cmakes <<<"${TETHER_INSTALL_CMAKE:-cmake}"
found_cmake=0
for cmake in "${cmakes[@]}"; do
  if ! command -v "$cmake" >/dev/null; then
    echo "skip: no CMake at '$cmake'"
    continue
  fi
  found_cmake=1
  cmake_version=$("$cmake" --version | sed -n 's/^cmake version //p')
  echo "== cmake consumer with CMake $cmake_version ($(command -v "$cmake"))"
  module=OFF
  if [ "$(printf '%s\n' 3.28 "$cmake_version" | sort -V | head -n1)" = 3.28 ]; then
    if command -v "clang-scan-deps-${cxx##*clang++-}" >/dev/null || command -v clang-scan-deps >/dev/null; then
      module=ON
    else
      echo "skip: the module consumer (CMake $cmake_version needs clang-scan-deps: apt install clang-tools-19)"
    fi
  else
    echo "skip: the module consumer (CMake $cmake_version < 3.28)"
  fi
  dir=$work/cmake-$cmake_version
  mkdir -p "$dir/src"
  cp "$here/cmake/CMakeLists.txt" "$here/app.cpp" "$dir/src/"
  if quiet "$dir/configure.log" "$cmake" -S "$dir/src" -B "$dir/build" -G Ninja \
       "-DCMAKE_CXX_COMPILER=$cxx" "-DCMAKE_PREFIX_PATH=$root" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
       "-DTETHER_CONSUMER_MODULE=$module" "-DTETHER_WANTED_VERSION=$version" &&
     quiet "$dir/build.log" "$cmake" --build "$dir/build"; then
    check_run "cmake $cmake_version, pkg-config, header mode" "$dir/build/app_pkgconfig"
    check_run "cmake $cmake_version, package config, header mode" "$dir/build/app_config"
    if [ $module = ON ]; then
      check_run "cmake $cmake_version, package config, module" "$dir/build/app_module"
    fi
  else
    fail "CMake $cmake_version: the consumer did not build"
  fi
done
if [ $found_cmake = 0 ] && [ "${TETHER_INSTALL_REQUIRE_CMAKE:-0}" = 1 ]; then
  fail "no CMake found, and TETHER_INSTALL_REQUIRE_CMAKE=1"
fi

if [ $failures -ne 0 ]; then
  echo "install test: $failures failure(s); logs in $work" >&2
  exit 1
fi
echo "install test: every consumer built and ran"
