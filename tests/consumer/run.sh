#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
# Configures, builds and runs the consumer project. Args: <consumer source dir> <build dir> <c++ compiler>
set -eu
src=$1 build=$2 cxx=$3
rm -rf "$build"
CXX="$cxx" meson setup "$build" "$src" --wrap-mode=nodownload >"$build.setup.log" 2>&1 || { cat "$build.setup.log"; exit 1; }
ninja -C "$build" >"$build.build.log" 2>&1 || { cat "$build.build.log"; exit 1; }
out=$("$build/app")
echo "$out"
case "$out" in
  consumer:*) ;;
  *) echo "unexpected output from the consumer app" >&2; exit 1 ;;
esac
